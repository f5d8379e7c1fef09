/*
 * bulk.c - POST /v1/jobs/cancel: cancels every active job a filter matches,
 * in one call (Slurm's scancel -u/--name/--state). The body is a JSON
 * object of filters, every one optional but at least one given:
 *   user    the submitting token's name (a job's "owner")
 *   name    a job's name; an array's elements ("NAME[i]") match NAME too
 *   state   pending, held, running or stopping
 *   array   an array's id (its first element's): its elements only
 *   tenant  a tenant (admin; others see their own tenant only)
 * A caller acts on what it may see: a tenant's user or tenant-admin on its
 * tenant's jobs, an admin across tenants. Each job cancelled is planned as a
 * single cancel would be (its events, its stopping ranks) and one round's
 * cancels are written in one transaction; a job being written by another
 * thread (pinned) is taken in a further round, at most BULK_ROUNDS of them.
 * A large array's elements that are not jobs yet are stored as cancelled
 * when the filter matches them (state absent or pending).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/depend.h"
#include "ctld/job_fsm.h"

#define BULK_ROUNDS 100
#define BULK_RETRY_MS 20

typedef struct bulk_filter {
    const char *user, *name, *tenant;
    int state;          /* -1: any active */
    int64_t array;      /* 0: any */
    int span;           /* the array's elements */
} bulk_filter;

/* Whether job name n is name, or an array element of it ("name[i]"). */
static bool name_matches(const char *n, const char *name)
{
    size_t l = strlen(name);
    if (strncmp(n, name, l) != 0)
        return false;
    if (!n[l])
        return true;
    if (n[l] != '[')
        return false;
    const char *p = n + l + 1;
    if (*p < '0' || *p > '9')
        return false;
    while (*p >= '0' && *p <= '9')
        p++;
    return p[0] == ']' && !p[1];
}

static bool row_matches(const bulk_filter *f, const ts_job_row *row)
{
    return (!f->tenant || strcmp(row->tenant, f->tenant) == 0) &&
           (!f->user || strcmp(row->owner, f->user) == 0) &&
           (!f->name || name_matches(row->name, f->name)) &&
           (f->state < 0 || row->state == f->state) &&
           (!f->array || (row->id >= f->array && row->id < f->array + f->span));
}

/* The jobs a filter matches, in order, for ctld_event_round. */
typedef struct bulk_walk {
    const bulk_filter *f;
    int i;
} bulk_walk;

static cjob *next_matching(ctld *c, void *ctx)
{
    bulk_walk *w = ctx;
    while (w->i < c->njobs) {
        cjob *j = c->jobs[w->i++];
        if (row_matches(w->f, &j->row))
            return j;
    }
    return NULL;
}

/* One round: a cancel of every matching job not pinned, committed at once;
 * their ids into ids; *busy counts those pinned. */
static int bulk_round(ctld *c, const bulk_filter *f, const char *by, json_t *ids, int *busy,
                      ts_err *err)
{
    bulk_walk w = {f, 0};
    int64_t *planned;
    int n;
    int rc = ctld_event_round(c, CTLD_JE_CANCEL, by, next_matching, &w, &planned, &n, busy, err);
    for (int i = 0; rc == 0 && i < n; i++)
        json_array_append_new(ids, json_integer(planned[i]));
    free(planned);
    return rc;
}

/* The large arrays whose elements not yet jobs the filter matches (their ids
 * into out, at most max). */
static int lazy_matching(ctld *c, const bulk_filter *f, int64_t *out, int max)
{
    int n = 0;
    if (f->state >= 0 && f->state != TS_JOB_PENDING)
        return 0;
    pthread_mutex_lock(&c->mu);
    json_t *arrays = ctld_arrays_render(c, f->tenant, f->user); /* one entry per array */
    pthread_mutex_unlock(&c->mu);
    size_t i;
    json_t *a;
    json_array_foreach(arrays, i, a)
    {
        int64_t id = (int64_t)json_integer_value(json_object_get(a, "array"));
        const char *name = json_string_value(json_object_get(a, "name"));
        if (n < max && (!f->name || (name && name_matches(name, f->name))) &&
            (!f->array || id == f->array))
            out[n++] = id;
    }
    json_decref(arrays);
    return n;
}

/* A filter's string member: true when absent or a non-empty string. */
static bool filter_str(json_t *in, const char *key, const char **out, ctld_reply *r)
{
    json_t *v = json_object_get(in, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_string(v) || !*json_string_value(v)) {
        ctld_reply_error(r, 400, "invalid", "%s: must be a non-empty string", key);
        return false;
    }
    *out = json_string_value(v);
    return true;
}

/* The body as a filter the caller may use; false, r answered, otherwise. */
static bool parse_filter(ctld *c, const ctld_request *rq, json_t *in, bulk_filter *f,
                         ctld_reply *r)
{
    const ctld_caller *w = rq->who;
    memset(f, 0, sizeof *f);
    f->state = -1;
    const char *key;
    json_t *v;
    json_object_foreach(in, key, v)
    {
        if (strcmp(key, "user") != 0 && strcmp(key, "name") != 0 && strcmp(key, "state") != 0 &&
            strcmp(key, "array") != 0 && strcmp(key, "tenant") != 0) {
            ctld_reply_error(r, 400, "invalid", "%s: unknown filter (user, name, state, array, "
                             "tenant)", key);
            return false;
        }
    }
    const char *state;
    if (!filter_str(in, "user", &f->user, r) || !filter_str(in, "name", &f->name, r) ||
        !filter_str(in, "tenant", &f->tenant, r) || !filter_str(in, "state", &state, r))
        return false;
    if (state) {
        f->state = ts_job_state_parse(state);
        if (f->state != TS_JOB_PENDING && f->state != TS_JOB_HELD &&
            f->state != TS_JOB_RUNNING && f->state != TS_JOB_STOPPING) {
            ctld_reply_error(r, 400, "invalid", "state: \"%s\" is not pending, held, running or "
                             "stopping", state);
            return false;
        }
    }
    v = json_object_get(in, "array");
    if (v && !json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) <= 0)) {
        ctld_reply_error(r, 400, "invalid", "array: must be an array's id (a positive integer)");
        return false;
    }
    if (!f->user && !f->name && !f->tenant && !state && !(v && json_is_integer(v))) {
        ctld_reply_error(r, 400, "invalid", "filter: give at least one of user, name, state, "
                         "array, tenant (a cancel of every job is not done by accident)");
        return false;
    }
    bool all = w->role == TS_ROLE_ADMIN;
    if (!all && f->tenant && strcmp(f->tenant, w->tenant) != 0) {
        ctld_reply_error(r, 403, "forbidden", "tenant: a %s token acts on tenant %s only",
                         ts_role_name(w->role), w->tenant);
        return false;
    }
    if (!all)
        f->tenant = w->tenant;
    /* a user cancels its own jobs (as one by one): its tenant-admins and
     * admins anyone's */
    if (w->role == TS_ROLE_USER && f->user && strcmp(f->user, w->name) != 0) {
        ctld_reply_error(r, 403, "forbidden", "user: a user token cancels its own jobs only "
                         "(\"%s\"), not \"%s\"'s", w->name, f->user);
        return false;
    }
    if (w->role == TS_ROLE_USER)
        f->user = w->name;
    if (v && json_is_integer(v)) {
        f->array = (int64_t)json_integer_value(v);
        ts_job_row row;
        ts_err err;
        int rc = ts_store_job_get(c->store, f->array, &row, &err);
        if (rc != 0 && rc != TS_ENOENT) {
            ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
            return false;
        }
        bool seen = rc == 0 && (all || strcmp(row.tenant, w->tenant) == 0);
        f->span = seen ? ctld_dep_array_span(&row) : 0;
        if (rc == 0)
            ts_job_row_fini(&row);
        if (f->span <= 1) {
            ctld_reply_error(r, 404, "not_an_array", "array: job %lld is not an array's id "
                             "(the id of an array's first element)", (long long)f->array);
            return false;
        }
    }
    return true;
}

void ctld_jobs_cancel_bulk(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    if (strcmp(rq->method, "POST") != 0) {
        ctld_reply_error(r, 405, "method_not_allowed", "%s %s", rq->method, rq->url);
        return;
    }
    if (rq->who->role == TS_ROLE_VIEWER) {
        ctld_reply_error(r, 403, "forbidden", "role viewer cannot change jobs");
        return;
    }
    json_error_t je;
    json_t *in = json_loadb(rq->body ? rq->body : "", rq->len, 0, &je);
    if (!json_is_object(in)) {
        json_decref(in);
        ctld_reply_error(r, 400, "invalid", "body: a JSON object of filters (%s)",
                         in ? "not an object" : je.text);
        return;
    }
    bulk_filter f;
    if (!parse_filter(c, rq, in, &f, r)) {
        json_decref(in);
        return;
    }
    ts_err err = {0};
    int rc = 0, elements = 0;
    int64_t lazy[64];
    for (int pass = 0, nl = 64; rc == 0 && nl == 64 && pass < 1000; pass++) {
        nl = lazy_matching(c, &f, lazy, 64);
        for (int i = 0; rc == 0 && i < nl; i++)
            rc = ctld_array_cancel_rest(c, lazy[i], &elements, &err);
    }
    json_t *ids = json_array();
    for (int round = 0; rc == 0 && round < BULK_ROUNDS; round++) {
        int busy = 0;
        rc = bulk_round(c, &f, rq->who->name, ids, &busy, &err);
        if (rc != 0 || busy == 0)
            break;
        if (round == BULK_ROUNDS - 1)
            rc = ts_err_set(&err, TS_ETIMEDOUT, "some jobs stayed busy; cancelled %zu, try "
                            "again", json_array_size(ids));
        struct timespec ts = {0, BULK_RETRY_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (rc != 0)
        ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
    else
        ctld_reply_json(r, 200, json_pack("{s:I,s:O,s:i}", "cancelled",
                                          (json_int_t)json_array_size(ids) + elements, "jobs",
                                          ids, "elements", elements));
    json_decref(ids);
    json_decref(in);
}
