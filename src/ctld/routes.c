/*
 * routes.c - the API of docs/api.md: jobs, nodes, tenants, usage, tokens.
 *
 * Visibility: admin and cluster-viewer (a viewer token with no tenant) see
 * everything; every other token is bound to its tenant: its reads (jobs,
 * events, explain, logs, usage, the job ids on nodes) show that tenant
 * only (and a job's env, command, secrets and output only to those
 * privacy.c lets read them), and a job of another tenant answers 404
 * exactly like a job that does not exist. Only admin drains nodes, changes
 * tenants, mints admin and cluster-viewer tokens and revokes tokens;
 * tenant-admin creates its own tenant's user and viewer tokens.
 *
 * Inputs are checked whole, never cut (input.c: names, Idempotency-Key,
 * query times, topology levels, the nesting of a tenants document).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/events.h"
#include "ctld/input.h"
#include "ctld/router.h"
#include "ctld/steps.h"

#define LIST_LIMIT_DEFAULT 100
#define LIST_LIMIT_MAX 1000

/* A cluster-viewer is stored as role viewer with no tenant. */
bool ctld_sees_all(const ctld_caller *w)
{
    return w->role == TS_ROLE_ADMIN || (w->role == TS_ROLE_VIEWER && !w->tenant[0]);
}

static bool may_write_jobs(const ctld_caller *w) { return w->role != TS_ROLE_VIEWER; }

bool ctld_may_manage(const ctld_caller *w, const char *owner)
{
    return w->role == TS_ROLE_ADMIN || w->role == TS_ROLE_TENANT_ADMIN ||
           (w->role == TS_ROLE_USER && strcmp(owner, w->name) == 0);
}

void ctld_reply_not_owner(ctld_reply *r, const char *what, int64_t id, const char *owner,
                          const char *verb)
{
    ctld_reply_error(r, 403, "forbidden", "%s %lld is \"%s\"'s: only its owner, its tenant's "
                     "admins and admins may %s it", what, (long long)id, owner, verb);
}

bool ctld_sees_tenant(const ctld_caller *w, const char *tenant)
{
    return ctld_sees_all(w) || strcmp(w->tenant, tenant) == 0;
}

static bool caller_sees_tenant(const void *who, const char *tenant)
{
    return ctld_sees_tenant(who, tenant);
}

/* One event of a job as its reader may read it: content hidden from those
 * who may not read the job's content, another tenant's preempting job named
 * only by its tier (ctld_event_redact). */
static json_t *event_json(const ctld_caller *who, const ts_event_row *ev, bool content)
{
    bool hide = !content && ctld_event_is_content(ev->kind);
    /* a failed rank's last output line, quoted in its job's failed event */
    char *cut = content ? NULL : ctld_privacy_cut_output(ev->detail);
    const char *text = cut ? cut : ev->detail;
    json_t *data = hide ? json_object() : ctld_event_data(ev->kind, text);
    char *red = hide ? NULL : ctld_event_redact(ev->kind, text, data, caller_sees_tenant, who);
    json_t *detail = hide ? json_string("hidden")
                     : red ? json_string(red)
                     : text ? json_string(text)
                            : json_null();
    free(red);
    free(cut);
    return json_pack("{s:I,s:f,s:s,s:o,s:o}", "id", (json_int_t)ev->id, "time", ev->t_s, "kind",
                     ev->kind, "detail", detail, "data", data);
}

static int limit_of(const ctld_query *q, ctld_reply *r)
{
    int64_t v = LIST_LIMIT_DEFAULT;
    if (q->limit && !ctld_parse_number(q->limit, "limit", 1, LIST_LIMIT_MAX, &v, r))
        return -1;
    return (int)v;
}

/* A cursor is the id of the last row of the page before: 0..INT64_MAX. */
static bool cursor_of(const char *s, int64_t *out, ctld_reply *r)
{
    *out = 0;
    return !s || ctld_parse_number(s, "cursor", 0, INT64_MAX, out, r);
}

/* ---- jobs -------------------------------------------------------------------- */

static void jobs_list(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    const ctld_caller *w = rq->who;
    int limit = limit_of(&rq->q, r);
    int64_t after;
    if (limit < 0 || !cursor_of(rq->q.cursor, &after, r))
        return;
    ts_job_filter f = {.tenant = rq->q.tenant, .owner = rq->q.owner};
    if (!ctld_states_of(rq->q.state, &f.states, r))
        return;
    const char *order = rq->q.order;
    if (order && strcmp(order, "oldest") != 0 && strcmp(order, "newest") != 0) {
        ctld_reply_error(r, 400, "invalid", "order: \"%.32s\" is neither oldest nor newest",
                         order);
        return;
    }
    f.newest_first = order && strcmp(order, "newest") == 0;
    if (!ctld_sees_all(w)) {
        if (f.tenant && strcmp(f.tenant, w->tenant) != 0) {
            ctld_reply_json(r, 200, json_pack("{s:[],s:n}", "jobs", "next_cursor"));
            return;
        }
        f.tenant = w->tenant;
    }
    ts_job_row *rows = NULL;
    int n = 0;
    ts_err err;
    if (ts_store_job_list(c->store, &f, after, limit, &rows, &n, &err) != 0) {
        ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
        return;
    }
    json_t *jobs = json_array();
    /* the specs (up to 1 MiB each) parsed before the lock: readers, the
     * cycle and every other tenant wait while it is held */
    json_t **specs = calloc((size_t)(n > 0 ? n : 1), sizeof *specs);
    for (int i = 0; specs && i < n; i++)
        specs[i] = ctld_render_spec(&rows[i]);
    ctld_lock_reader(c);
    for (int i = 0; i < n; i++) {
        const cjob *a = ctld_job_find(c, rows[i].id);
        json_t *spec = specs ? specs[i] : ctld_render_spec(&rows[i]);
        if (specs)
            specs[i] = NULL;
        /* shown as memory has it (ctld_render_job): a job whose change is
         * written but not yet applied is left out of a list by state, for
         * the moment it matches neither */
        if (a && f.states && !(f.states & (1u << a->row.state))) {
            json_decref(spec);
            continue;
        }
        json_t *doc = ctld_render_job_parsed(c, &rows[i], a, spec);
        if (doc && !ctld_sees_content(c, w, rows[i].tenant, rows[i].owner))
            ctld_privacy_redact_job(doc);
        json_array_append_new(jobs, doc);
    }
    /* large arrays' elements that are not jobs yet: one entry per array, on
     * the first page, where pending jobs are asked for */
    json_t *arrays = !rq->q.cursor && (!f.states || (f.states & (1u << TS_JOB_PENDING)))
                         ? ctld_arrays_render(c, f.tenant, f.owner)
                         : json_array();
    pthread_mutex_unlock(&c->mu);
    free(specs);
    char cur[32];
    snprintf(cur, sizeof cur, "%lld", n > 0 ? (long long)rows[n - 1].id : 0LL);
    ctld_reply_json(r, 200,
                    json_pack("{s:o,s:o,s:o}", "jobs", jobs, "next_cursor",
                              n == limit ? json_string(cur) : json_null(), "arrays",
                              arrays ? arrays : json_array()));
    ts_store_free_jobs(rows, n);
}

/* Loads a job the caller may see; false (and a 404) otherwise. */
static bool visible_job(ctld *c, const ctld_caller *w, int64_t id, ts_job_row *row,
                        ctld_reply *r)
{
    ts_err err;
    int rc = ts_store_job_get(c->store, id, row, &err);
    if (rc == TS_ENOENT) { /* a large array's element that is not a job yet */
        ctld_lock_reader(c);
        rc = ctld_array_lazy_row(c, id, row);
        pthread_mutex_unlock(&c->mu);
        if (rc == TS_ENOMEM)
            ts_err_set(&err, rc, "out of memory");
    }
    if (rc == 0 && ctld_sees_tenant(w, row->tenant))
        return true;
    if (rc == 0)
        ts_job_row_fini(row);
    if (rc == 0 || rc == TS_ENOENT)
        ctld_reply_error(r, 404, "not_found", "job %lld does not exist", (long long)id);
    else
        ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
    return false;
}

/* A job's document as the caller may see it; its spec parsed before the
 * lock (ctld_render_job_parsed) */
static json_t *job_doc(ctld *c, const ts_job_row *row, bool content)
{
    json_t *spec = ctld_render_spec(row);
    ctld_lock_reader(c);
    json_t *j = ctld_render_job_parsed(c, row, ctld_job_find(c, row->id), spec);
    pthread_mutex_unlock(&c->mu);
    if (j && !content)
        ctld_privacy_redact_job(j);
    return j;
}

static void job_one(ctld *c, const ctld_request *rq, int64_t id, const char *rest,
                    ctld_reply *r)
{
    const ctld_caller *w = rq->who;
    ts_job_row row;
    bool get = strcmp(rq->method, "GET") == 0, post = strcmp(rq->method, "POST") == 0;
    bool patch = strcmp(rq->method, "PATCH") == 0 && !*rest;
    if (!get && !post && !patch) {
        ctld_reply_error(r, 405, "method_not_allowed", "%s %s", rq->method, rq->url);
        return;
    }
    if (!visible_job(c, w, id, &row, r))
        return;
    ctld_lock_reader(c); /* the tenants' privacy policy: PUT /v1/tenants swaps them */
    bool content = ctld_sees_content(c, w, row.tenant, row.owner);
    pthread_mutex_unlock(&c->mu);
    if (patch) {
        ctld_job_patch(c, rq, &row, content, r);
    } else if (get && !*rest) {
        ctld_reply_json(r, 200, json_pack("{s:o}", "job", job_doc(c, &row, content)));
    } else if (get && strcmp(rest, "events") == 0) {
        int limit = limit_of(&rq->q, r);
        int64_t after;
        ts_event_row *ev = NULL;
        int n = 0;
        ts_err err;
        /* the first page (no cursor) starts with the submission, which is the
         * row itself (id 0) and counts against limit like any event */
        bool first = !rq->q.cursor;
        int fetch = limit - (first ? 1 : 0);
        if (limit > 0 && cursor_of(rq->q.cursor, &after, r)) {
            if (fetch > 0 && ts_store_event_list(c->store, id, after, fetch, &ev, &n, &err) != 0) {
                ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
            } else {
                json_t *a = json_array();
                if (first)
                    json_array_append_new(a, json_pack("{s:i,s:f,s:s,s:n,s:{}}", "id", 0, "time",
                                                       row.submit_s, "kind", "submitted",
                                                       "detail", "data"));
                for (int i = 0; i < n; i++) /* a rank's output is content: kind and time stay */
                    json_array_append_new(a, event_json(rq->who, &ev[i], content));
                char cur[32];
                snprintf(cur, sizeof cur, "%lld", n > 0 ? (long long)ev[n - 1].id : 0LL);
                ctld_reply_json(r, 200,
                                json_pack("{s:o,s:o}", "events", a, "next_cursor",
                                          n == fetch ? json_string(cur) : json_null()));
                ts_store_free_events(ev, n);
            }
        }
    } else if (get && strcmp(rest, "logs") == 0 && !content) {
        ctld_reply_error(r, 403, "forbidden", "logs: job %lld's output is visible to its owner "
                         "(\"%s\") and admins only (docs/secrets.md)", (long long)id, row.owner);
    } else if (get && strcmp(rest, "logs") == 0) {
        ctld_job_logs(c, rq, &row, r);
    } else if (post && strcmp(rest, "sessions") == 0) {
        ctld_session_open(c, rq, &row, r);
    } else if (get && strcmp(rest, "explain") == 0) {
        ctld_lock_reader(c);
        const cjob *j = ctld_job_find(c, id);
        const char *reason = j ? j->row.reason : row.reason;
        const char *why = j ? j->row.why : row.why;
        double at = j ? j->reserved_at_s : -1.0;
        int state = j ? j->row.state : row.state;
        json_t *doc = json_pack("{s:I,s:s,s:o,s:o,s:o}", "job_id", (json_int_t)id, "state",
                                ts_job_state_name(state), "reason",
                                reason && *reason ? json_string(reason) : json_null(),
                                "explanation", why && *why ? json_string(why) : json_null(),
                                "reserved_at", at > 0.0 ? json_real(at) : json_null());
        char *cut = content ? NULL : ctld_privacy_cut_output(why);
        if (doc && cut) /* a failed rank's last output is the owner's */
            json_object_set_new(doc, "explanation", json_string(cut));
        free(cut);
        if (doc)
            ctld_render_queue(c, j, doc);
        /* a pending job's tenant owed GPUs of its guarantee (docs/scheduler.md,
         * "The guarantee"): how many, beside why the job is not yet served */
        if (doc && j && j->row.state == TS_JOB_PENDING) {
            double *owed = calloc((size_t)c->tenants->n + 1, sizeof *owed);
            int t = j->sj.tenant;
            if (owed && t >= 0 && t < c->tenants->n) {
                ctld_owed_gpus(c, owed, t);
                json_object_set_new(doc, "tenant_owed_gpus", json_real(owed[t]));
            }
            free(owed);
        }
        pthread_mutex_unlock(&c->mu);
        ctld_reply_json(r, 200, doc);
    } else if (post && (strcmp(rest, "cancel") == 0 || strcmp(rest, "hold") == 0 ||
                        strcmp(rest, "release") == 0 || strcmp(rest, "requeue") == 0)) {
        if (!may_write_jobs(w)) {
            ctld_reply_error(r, 403, "forbidden", "role viewer cannot change jobs");
        } else if (!ctld_may_manage(w, row.owner)) {
            ctld_reply_not_owner(r, "job", id, row.owner, rest);
        } else {
            ts_err err;
            int rc = ctld_job_action(c, id, rest, w->name, &err);
            if (rc == TS_ENOENT || rc == TS_ECONFLICT)
                ctld_reply_error(r, 409, "conflict", "job %lld is %s: cannot %s it",
                                 (long long)id, ts_job_state_name(row.state), rest);
            else if (rc != 0)
                ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
            else {
                ts_job_row now;
                if (ts_store_job_get(c->store, id, &now, NULL) == 0) {
                    ctld_reply_json(r, 200,
                                    json_pack("{s:o}", "job", job_doc(c, &now, content)));
                    ts_job_row_fini(&now);
                } else {
                    ctld_reply_json(r, 200, NULL);
                }
            }
        }
    } else {
        ctld_reply_error(r, 404, "not_found", "%s %s", rq->method, rq->url);
    }
    ts_job_row_fini(&row);
}

/* ---- nodes ------------------------------------------------------------------------ */

/* Under c->mu: a node's "jobs" keeps the caller's tenant's jobs only. */
static json_t *scope_node(const ctld *c, const ctld_caller *w, json_t *doc)
{
    json_t *jobs = json_object_get(doc, "jobs");
    if (ctld_sees_all(w) || !json_is_array(jobs))
        return doc;
    json_t *mine = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(jobs, i, v)
    {
        const cjob *j = ctld_job_find((ctld *)c, (int64_t)json_integer_value(v));
        if (j && strcmp(j->row.tenant, w->tenant) == 0)
            json_array_append(mine, v);
    }
    json_object_set_new(doc, "jobs", mine);
    return doc;
}

static void nodes(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    const char *p = rq->url + strlen("/v1/nodes");
    if (!*p || strcmp(p, "/") == 0) {
        if (strcmp(rq->method, "GET") != 0) {
            ctld_reply_error(r, 405, "method_not_allowed", "%s %s", rq->method, rq->url);
            return;
        }
        json_t *a = json_array();
        ctld_lock_reader(c);
        for (int i = 0; i < c->cluster->nnodes; i++)
            json_array_append_new(a, scope_node(c, rq->who, ctld_render_node(c, i)));
        pthread_mutex_unlock(&c->mu);
        ctld_reply_json(r, 200, json_pack("{s:o}", "nodes", a));
        return;
    }
    char name[TS_NAME_MAX];
    const char *slash = strchr(p + 1, '/');
    size_t nl = slash ? (size_t)(slash - (p + 1)) : strlen(p + 1);
    if (nl == 0 || nl >= sizeof name) {
        ctld_reply_error(r, 404, "not_found", "no such node");
        return;
    }
    memcpy(name, p + 1, nl);
    name[nl] = '\0';
    const char *action = slash ? slash + 1 : "";
    ctld_lock_reader(c);
    int n = ts_cluster_find_node(c->cluster, name);
    pthread_mutex_unlock(&c->mu);
    if (n < 0) {
        ctld_reply_error(r, 404, "not_found", "node \"%s\" does not exist", name);
        return;
    }
    if (*action) {
        if (strcmp(rq->method, "POST") != 0 ||
            (strcmp(action, "drain") != 0 && strcmp(action, "resume") != 0)) {
            ctld_reply_error(r, 404, "not_found", "%s %s", rq->method, rq->url);
            return;
        }
        if (rq->who->role != TS_ROLE_ADMIN) {
            ctld_reply_error(r, 403, "forbidden", "only admin drains and resumes nodes");
            return;
        }
        ts_err err;
        int drc = ctld_node_drain(c, name, strcmp(action, "drain") == 0, &err);
        if (drc != 0) {
            /* a write that failed is the store's (503, nothing changed); a
             * state that does not allow it is a conflict */
            if (drc == TS_ECONFLICT || drc == TS_EINVAL)
                ctld_reply_error(r, 409, "conflict", "%s", err.msg);
            else if (drc == TS_ENOENT)
                ctld_reply_error(r, 404, "not_found", "%s", err.msg);
            else
                ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
            return;
        }
    }
    ctld_lock_reader(c);
    json_t *doc = scope_node(c, rq->who, ctld_render_node(c, n));
    pthread_mutex_unlock(&c->mu);
    ctld_reply_json(r, 200, json_pack("{s:o}", "node", doc));
}

/* ---- tenants and usage -------------------------------------------------------------- */

static json_t *quota_json(const int64_t *v)
{
    json_t *gpu = json_object();
    for (int m = 0; m < TS_MAX_GPU_MODELS; m++) {
        const ts_gpu_model_info *info = ts_gpu_model_get(m);
        if (info && v[ts_res_gpu(m)] > 0)
            json_object_set_new(gpu, info->name, json_real((double)v[ts_res_gpu(m)] / 1000.0));
    }
    return json_pack("{s:o,s:I,s:I}", "gpu", gpu, "cpu_milli", (json_int_t)v[TS_RES_CPU],
                     "memory_mib", (json_int_t)v[TS_RES_MEM]);
}

/* A tenant's job order with inheritance resolved: its own, its parent's, or
 * the scheduler's. */
static int order_of(const ctld *c, int t)
{
    for (; t >= 0; t = c->tenants->t[t].parent)
        if (c->tenants->t[t].order == TS_ORDER_LAS || c->tenants->t[t].order == TS_ORDER_FIFO)
            return c->tenants->t[t].order;
    return c->cfg.sched.order;
}

/* A tenants document that does not load: 400 with its one error as the
 * message, or, with several, their count as the message and each as a
 * field, its path "tenants:LINE: key.path" (docs/api.md). */
static void reply_tenants_invalid(ctld_reply *r, const ts_errs *bad)
{
    if (bad->n + bad->more <= 1) {
        ctld_reply_error(r, 400, "invalid", "%s", bad->n ? bad->msg[0] : "tenants: invalid");
        return;
    }
    json_t *fields = json_array();
    for (int i = 0; i < bad->n; i++) {
        const char *m = bad->msg[i], *at = strstr(m, ": "); /* after "tenants:LINE" */
        const char *cut = at ? strstr(at + 2, ": ") : NULL;  /* after the key path */
        json_array_append_new(fields, cut ? json_pack("{s:s%,s:s}", "path", m,
                                                      (size_t)(cut - m), "reason", cut + 2)
                                          : json_pack("{s:s,s:s}", "path", "", "reason", m));
    }
    char msg[128];
    int total = bad->n + bad->more;
    if (bad->more)
        snprintf(msg, sizeof msg, "tenants: %d errors, the first %d listed; nothing changed",
                 total, bad->n);
    else
        snprintf(msg, sizeof msg, "tenants: %d errors; nothing changed", total);
    ctld_reply_json(r, 400, json_pack("{s:{s:s,s:s,s:o}}", "error", "code", "invalid", "message",
                                      msg, "fields", fields));
}

static void tenants(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    if (strcmp(rq->method, "PUT") == 0) {
        if (rq->who->role != TS_ROLE_ADMIN) {
            ctld_reply_error(r, 403, "forbidden", "only admin changes tenants and quotas");
            return;
        }
        if (ctld_yaml_depth(rq->body, rq->len, CTLD_TENANTS_DEPTH_MAX) > CTLD_TENANTS_DEPTH_MAX) {
            ctld_reply_error(r, 400, "invalid", "body: nested deeper than %d levels",
                             CTLD_TENANTS_DEPTH_MAX);
            return;
        }
        ts_err err;
        ts_errs *bad = calloc(1, sizeof *bad);
        int rc = bad ? ctld_tenants_replace(c, rq->body, rq->len, bad, &err)
                     : ts_err_set(&err, TS_ENOMEM, "out of memory");
        if (rc == TS_EINVAL)
            reply_tenants_invalid(r, bad);
        free(bad);
        if (rc == TS_EINVAL)
            return;
        if (rc != 0) {
            ctld_reply_error(r, rc == TS_EEXIST ? 409 : 503,
                             rc == TS_EEXIST ? "conflict" : "unavailable", "%s", err.msg);
            return;
        }
    } else if (strcmp(rq->method, "GET") != 0) {
        ctld_reply_error(r, 405, "method_not_allowed", "%s %s", rq->method, rq->url);
        return;
    }
    json_t *a = json_array();
    ctld_lock_reader(c);
    double now = ctld_now();
    for (int t = 0; t < c->tenants->n; t++) {
        const ts_tenant *tn = &c->tenants->t[t];
        int64_t use[TS_RES_DIMS];
        for (int k = 0; k < TS_RES_DIMS; k++)
            use[k] = ts_quota_usage(c->quota, t, k);
        json_array_append_new(
            a, json_pack("{s:s,s:o,s:f,s:o,s:o,s:f,s:f,s:s}", "name", tn->name, "parent",
                         tn->parent >= 0 ? json_string(c->tenants->t[tn->parent].name)
                                         : json_null(),
                         "weight", tn->weight, "guaranteed", quota_json(tn->guaranteed), "usage",
                         quota_json(use), "share", ts_quota_share(c->quota, t, now), "usage_share",
                         ts_quota_usage_share(c->quota, use), "order",
                         ts_order_name(order_of(c, t))));
    }
    pthread_mutex_unlock(&c->mu);
    ctld_reply_json(r, 200, json_pack("{s:o}", "tenants", a));
}

static void usage(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    double now = ctld_now();
    double from = now - 30 * 86400.0, to = now;
    if ((rq->q.from && !ctld_time_of(rq->q.from, "from", &from, r)) ||
        (rq->q.to && !ctld_time_of(rq->q.to, "to", &to, r)))
        return;
    if (!(to > from)) {
        ctld_reply_error(r, 400, "invalid", "to: must be after from");
        return;
    }
    ts_usage_row *rows = NULL;
    int n = 0;
    ts_err err;
    if (ts_store_usage(c->store, from, to, &rows, &n, &err) != 0) {
        ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
        return;
    }
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        if (ctld_sees_tenant(rq->who, rows[i].tenant))
            json_array_append_new(
                a, json_pack("{s:s,s:s,s:s,s:f}", "tenant", rows[i].tenant, "tier",
                             rows[i].tier == TS_TIER_GUARANTEED ? "guaranteed" : "opportunistic",
                             "gpu_model", rows[i].gpu_model, "gpu_hours", rows[i].gpu_s / 3600.0));
    free(rows);
    ctld_reply_json(r, 200, json_pack("{s:o,s:f,s:f}", "usage", a, "from", from, "to", to));
}

/* ---- the route table (router.h) ------------------------------------------------------ */

static void job_route(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    job_one(c, rq, rq->id, rq->action, r);
}

static void agent_stream(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    ctld_session_agent(c, rq, r);
}

static void whoami(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    (void)c;
    ctld_whoami(rq, r);
}

static void openapi(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    (void)c;
    (void)rq;
    ctld_reply_json(r, 200, ctld_openapi());
}

#define R_READ CTLD_ROLES_READ
#define R_WRITE CTLD_ROLES_WRITE
#define R_ADMIN CTLD_ROLES_ADMIN
#define R_TADMIN CTLD_ROLES_TENANT_ADMIN

/* Every operation of the HTTP API: the router dispatches from this table and
 * openapi.c writes docs/openapi.json from it. Schemas are openapi.c's. */
static const ctld_route_def ROUTES[] = {
    {"POST", "/v1/jobs", ctld_jobs_submit, R_WRITE, "submitJob",
     "Submit a job spec (YAML or JSON); Idempotency-Key makes a retry safe (the same body "
     "again: 200 with the same jobs; another body under the same key: 422; a tenant past its "
     "queued-jobs cap: 429)", "JobSpec", 201, "JobsSubmitted", "200 422 503"},
    {"GET", "/v1/jobs", jobs_list, R_READ, "listJobs",
     "List jobs (filters tenant, state, owner; cursor pagination)", NULL, 200, "JobList", "503"},
    {"POST", "/v1/jobs/cancel", ctld_jobs_cancel_bulk, R_WRITE, "cancelJobs",
     "Cancel every active job a filter matches {user, name, state, array, tenant} (at least "
     "one; a user its own jobs, tenant-admins their tenant's, admin across tenants)",
     "BulkCancel", 200,
     "JobsCancelled", "404 503"},
    {"GET", "/v1/jobs/{id}", job_route, R_READ, "getJob", "Show a job", NULL, 200, "JobOne",
     "503"},
    {"PATCH", "/v1/jobs/{id}", job_route, R_WRITE, "updateJob",
     "Update a job: a pending or held job's time_limit, tasks, gpus, priority_class, "
     "dependency, checked as a submission is; a running job may only lower its time_limit; "
     "hold holds or releases it (its owner, its tenant's admins, admins)", "JobUpdate", 200,
     "JobOne", "404 409 503"},
    {"POST", "/v1/jobs/{id}/cancel", job_route, R_WRITE, "cancelJob",
     "Cancel a job (its owner, its tenant's admins, admins)", NULL, 200,
     "JobOne", "409 503"},
    {"POST", "/v1/jobs/{id}/hold", job_route, R_WRITE, "holdJob",
     "Hold a pending job (its owner, its tenant's admins, admins)", NULL,
     200, "JobOne", "409 503"},
    {"POST", "/v1/jobs/{id}/release", job_route, R_WRITE, "releaseJob",
     "Release a held job (its owner, its tenant's admins, admins)",
     NULL, 200, "JobOne", "409 503"},
    {"POST", "/v1/jobs/{id}/requeue", job_route, R_WRITE, "requeueJob",
     "Requeue a running job (its owner, its tenant's admins, admins)", NULL, 200, "JobOne",
     "409 503"},
    {"GET", "/v1/jobs/{id}/events", job_route, R_READ, "listJobEvents",
     "A job's events (cursor pagination)", NULL, 200, "JobEvents", "503"},
    {"GET", "/v1/jobs/{id}/logs", job_route, R_READ, "getJobLogs",
     "A task's output: live from its agent, else its last output", NULL, 200, "JobLogs",
     "409 502 503 504"},
    {"GET", "/v1/jobs/{id}/steps", ctld_steps_route, R_READ, "listJobSteps",
     "A job's steps (srun inside a batch job), or one with its tasks' ends and output (?step=N); "
     "a task's step credential reads its own job's", NULL, 200, "StepList", "503"},
    {"POST", "/v1/jobs/{id}/steps", ctld_steps_route, R_WRITE, "createJobStep",
     "Start a step in a running batch job's tasks (what srun in its script does, with the "
     "task's step credential); 409 when the job is not running or not a batch job",
     "StepRequest", 201, "StepOne", "409 503"},
    {"GET", "/v1/jobs/{id}/explain", job_route, R_READ, "explainJob",
     "Why a job waits: the scheduler's reason and numbers", NULL, 200, "JobExplain", "503"},
    {"POST", "/v1/jobs/{id}/sessions", job_route, R_WRITE, "openSession",
     "Open an interactive session on a running rank {kind: attach|exec|forward, rank, command, "
     "port, tty, rows, cols}: the connection upgrades (101, Upgrade: tessera-stream/1) to a "
     "byte stream relayed to the rank's agent (the job's owner and admins; "
     "docs/interactive.md); with check: true, 200 once every check passed, and no session",
     "SessionRequest", 101, NULL, "200 409 429 503"},
    {"POST", "/v1/arrays/{id}/cancel", ctld_array_route, R_WRITE, "cancelArray",
     "Cancel every active element of the array whose id (its first element's) is {id}; 404 "
     "not_an_array when {id} is no array's (its owner, its tenant's admins, admins)", NULL, 200,
     "ArrayCancelled", "503 504"},
    {"POST", "/v1/arrays/{id}/hold", ctld_array_route, R_WRITE, "holdArray",
     "Hold every pending element of the array whose id is {id}; 409 when some elements of a "
     "large array are not jobs yet (its owner, its tenant's admins, admins)", NULL, 200,
     "ArrayHeld", "409 503 504"},
    {"POST", "/v1/arrays/{id}/release", ctld_array_route, R_WRITE, "releaseArray",
     "Release every held element of the array whose id is {id} (its owner, its tenant's "
     "admins, admins)", NULL, 200, "ArrayReleased", "503 504"},
    {"GET", "/v1/nodes", nodes, R_READ, "listNodes", "List nodes", NULL, 200, "NodeList", ""},
    {"GET", "/v1/nodes/{name}", nodes, R_READ, "getNode", "Show a node (GPUs, MIG layout, jobs)",
     NULL, 200, "NodeOne", ""},
    {"POST", "/v1/nodes/{name}/drain", nodes, R_ADMIN, "drainNode", "Drain a node (admin)", NULL,
     200, "NodeOne", "409 503"},
    {"POST", "/v1/nodes/{name}/resume", nodes, R_ADMIN, "resumeNode",
     "Resume a drained node (admin)", NULL, 200, "NodeOne", "409 503"},
    {"GET", "/v1/tenants", tenants, R_READ, "listTenants",
     "Tenants with guarantees, usage and fair share", NULL, 200, "TenantList", ""},
    {"PUT", "/v1/tenants", tenants, R_ADMIN, "replaceTenants",
     "Replace tenants and quotas (admin; the tenants YAML, or the same as JSON)", "TenantsDoc",
     200, "TenantList", "409 503"},
    {"GET", "/v1/usage", usage, R_READ, "getUsage",
     "GPU-hours by tenant, tier and GPU model over [from, to)", NULL, 200, "Usage", "503"},
    {"GET", "/v1/acct", ctld_acct, R_READ, "listAcct",
     "One accounting row per job touching [from, to) (filters tenant, owner, state; format json "
     "or csv; steps=true adds each job's steps, sacct's JOB.STEP rows; cursor pagination; a "
     "user sees its own jobs only)", NULL, 200, "AcctRows", "503"},
    {"GET", "/v1/tokens", ctld_tokens_route, R_READ, "listTokens",
     "List tokens visible to the caller", NULL, 200, "TokenList", "503"},
    {"POST", "/v1/tokens", ctld_tokens_route, R_TADMIN, "createToken",
     "Create a token (admin; tenant-admin: user and viewer of its tenant); the secret is "
     "returned once; a tenant-admin's beyond limits.tokens_per_tenant: 429", "TokenRequest",
     201, "TokenCreated", "409 429 503"},
    {"DELETE", "/v1/tokens/{name}", ctld_tokens_route, R_ADMIN, "revokeToken",
     "Revoke a token (admin)", NULL, 204, NULL, "503"},
    {"GET", "/v1/reservations", ctld_resv_route, R_READ, "listReservations",
     "List reservations: nodes kept for a tenant's jobs, or for none (maintenance), in a "
     "window", NULL, 200, "ReservationList", ""},
    {"POST", "/v1/reservations", ctld_resv_route, R_ADMIN, "createReservation",
     "Create a reservation {name, nodes, start, duration|end, tenant, users, maintenance} "
     "(admin; 409: the name is taken or a node is in an overlapping reservation)",
     "ReservationRequest", 201, "ReservationCreated", "409 503"},
    {"DELETE", "/v1/reservations/{name}", ctld_resv_route, R_ADMIN, "deleteReservation",
     "Delete a reservation (admin)", NULL, 204, NULL, "503"},
    {"GET", "/v1/whoami", whoami, R_READ, "whoami",
     "The caller: name, role, tenant, Unix identity, expiry (API token or OpenID Connect ID "
     "token)", NULL, 200, "Whoami", ""},
    {"GET", "/v1/secrets", ctld_secrets_route, R_WRITE, "listSecrets",
     "List secrets: names, scopes and times, never values (a user: its own and its tenant's; "
     "tenant-admin and admin: every one of the tenant)", NULL, 200, "SecretList", "503"},
    {"PUT", "/v1/secrets/{name}", ctld_secrets_route, R_WRITE, "setSecret",
     "Set a secret {value, scope: user|tenant, tenant}: encrypted at rest, never returned "
     "(201 created, 200 replaced; the name events is the audit's path: 405)", "SecretRequest",
     201, "SecretSet", "200 405 409 503"},
    {"DELETE", "/v1/secrets/{name}", ctld_secrets_route, R_WRITE, "deleteSecret",
     "Delete a secret (?scope=user|tenant; the name events is the audit's path: 405)", NULL, 204,
     NULL, "405 503"},
    {"GET", "/v1/secrets/events", ctld_secrets_route, R_TADMIN, "listSecretEvents",
     "The secrets' audit: every set and delete (admin: every tenant's or ?tenant=; "
     "tenant-admin: its tenant's; cursor pagination)", NULL, 200, "SecretEvents", "503"},
    {"GET", "/v1/openapi.json", openapi, R_READ, "getOpenAPI", "This document", NULL, 200,
     "OpenAPI", ""},
    {"POST", "/v1/agent/register", ctld_agent_route, CTLD_ROLES_NODE, "agentRegister",
     "A node agent registers its node (node credential; docs/agent-protocol.md)",
     "AgentMessage", 200, "AgentReply", "409 503"},
    {"POST", "/v1/agent/sync", ctld_agent_route, CTLD_ROLES_NODE, "agentSync",
     "A node agent reports what runs and its health; long-polls for the desired state "
     "(docs/agent-protocol.md)", "AgentMessage", 200, "AgentReply", "409 503"},
    {"POST", "/v1/agent/stream/{name}", agent_stream, CTLD_ROLES_NODE, "agentStream",
     "A node agent opens its side of session {name} (node credential, header "
     "X-Tessera-Session-Secret): upgraded (101) and spliced with the client's "
     "(docs/interactive.md)", NULL, 101, NULL, "409 503"},
    {"POST", "/v1/agent/p2p", ctld_p2p_route, CTLD_ROLES_NODE, "agentP2P",
     "A node agent fetching an image blob says which pieces it holds; learns which peers "
     "hold which pieces, the pieces' hashes, a token for its peers and perhaps a piece to take "
     "from the registry (docs/images.md \"Peer-to-peer\")", "P2PAnnounce", 200, "P2PAnswer",
     "409 503"},
    {"POST", "/v1/agent/p2p/live", ctld_p2p_live_route, CTLD_ROLES_NODE, "agentP2PLive",
     "A node agent holding pieces of image blobs says, every second, that it still serves: "
     "the tracker stops naming a node that went silent (docs/images.md \"Peer-to-peer\")",
     "P2PLive", 200, "P2PLiveAnswer", "503"},
    {"GET", "/healthz", NULL, CTLD_ROLES_PUBLIC, "healthz", "Liveness", NULL, 200, "Text", ""},
    {"GET", "/readyz", NULL, CTLD_ROLES_PUBLIC, "readyz",
     "Readiness: store open and scheduler running (503 while starting)", NULL, 200, "Text",
     "503"},
    {"GET", "/metrics", NULL, R_READ | CTLD_ROLE(TS_ROLE_SCRAPE), "metrics",
     "Prometheus metrics (a scrape token, an admin or a cluster-viewer; anyone when "
     "metrics_public)", NULL, 200, "Text", ""},
};

const ctld_route_def *ctld_routes(size_t *n)
{
    *n = sizeof ROUTES / sizeof ROUTES[0];
    return ROUTES;
}
