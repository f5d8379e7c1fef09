/*
 * resv.c - reservations kept by tesserad (docs/scheduler.md "Reservations"):
 * the store's rows, their node masks, and the scheduler's copy. Every change
 * is written first (with mu released), then applied under mu between two
 * cycles, so the next cycle plans with it. Writers take turns on resv_mu.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/input.h"
#include "ctld/http.h"
#include "tessera/node_select.h"

static void resv_entry_free(ctld_resv *r) { free(r->mask); }

void ctld_resv_free(ctld *c)
{
    for (int i = 0; i < c->nresv; i++)
        resv_entry_free(&c->resv[i]);
    free(c->resv);
    c->resv = NULL;
    c->nresv = 0;
}

/* The node mask of a host list; TS_EINVAL naming `nodes`. */
static int resv_mask(const ctld *c, const char *nodes, uint64_t **mask, ts_err *err)
{
    *mask = calloc(ts_node_mask_words(c->cluster->nnodes) + 1, sizeof **mask);
    if (!*mask)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    ts_err e;
    if (ts_node_select(c->cluster, NULL, nodes, NULL, *mask, &e) != 0) {
        free(*mask);
        *mask = NULL;
        /* the selector names its field nodelist; here it is nodes */
        const char *why = strncmp(e.msg, "nodelist: ", 10) == 0 ? e.msg + 10 : e.msg;
        return ts_err_set(err, TS_EINVAL, "nodes: %s", why);
    }
    return 0;
}

/* Under mu, between cycles: hands every reservation to the scheduler. */
static int resv_apply(ctld *c, ts_err *err)
{
    ts_reservation *v = calloc((size_t)c->nresv + 1, sizeof *v);
    if (!v)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    for (int i = 0; i < c->nresv; i++)
        v[i] = (ts_reservation){.id = c->resv[i].id, .nodes = c->resv[i].mask,
                                .start_s = c->resv[i].row.start_s,
                                .end_s = c->resv[i].row.end_s};
    int rc = ts_sched_set_reservations(c->sched, v, c->nresv, err);
    free(v);
    return rc;
}

/* Under mu: appends row (its mask made here). */
static int resv_add(ctld *c, const ts_resv_row *row, ts_err *err)
{
    uint64_t *mask;
    int rc = resv_mask(c, row->nodes, &mask, err);
    if (rc)
        return rc;
    ctld_resv *nv = realloc(c->resv, (size_t)(c->nresv + 1) * sizeof *nv);
    if (!nv) {
        free(mask);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    c->resv = nv;
    c->resv[c->nresv++] = (ctld_resv){.row = *row, .id = ++c->resv_next_id, .mask = mask};
    return 0;
}

int ctld_resv_load(ctld *c, ts_err *err)
{
    ts_resv_row *rows = NULL;
    int n = 0;
    int rc = ts_store_resv_list(c->store, &rows, &n, err);
    for (int i = 0; rc == 0 && i < n; i++) {
        ts_err e;
        /* a node gone from the cluster file: the reservation keeps the others */
        if (resv_add(c, &rows[i], &e) == TS_ENOMEM)
            rc = ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    free(rows);
    if (rc == 0)
        rc = resv_apply(c, err);
    return rc;
}

static const ctld_resv *resv_find(const ctld *c, const char *name)
{
    for (int i = 0; i < c->nresv; i++)
        if (strcmp(c->resv[i].row.name, name) == 0)
            return &c->resv[i];
    return NULL;
}

int ctld_resv_job(const ctld *c, const char *name, const char *tenant, const char *owner,
                  const char *run_user, int64_t *id, ts_err *err)
{
    const ctld_resv *r = resv_find(c, name);
    if (!r)
        return ts_err_set(err, TS_EINVAL, "reservation: no reservation \"%s\"", name);
    if (r->row.maintenance)
        return ts_err_set(err, TS_EINVAL, "reservation: \"%s\" is a maintenance window; it "
                          "takes no jobs", name);
    if (tenant && strcmp(r->row.tenant, tenant) != 0)
        return ts_err_set(err, TS_EINVAL, "reservation: \"%s\" is tenant \"%s\"'s, not \"%s\"'s",
                          name, r->row.tenant, tenant);
    if (owner && r->row.users[0] && !ctld_name_listed(r->row.users, owner) &&
        !(run_user && run_user[0] && ctld_name_listed(r->row.users, run_user)))
        return ts_err_set(err, TS_EINVAL, "reservation: \"%s\" is kept for the users %s; \"%s\" "
                          "is not one of them", name, r->row.users, owner);
    *id = r->id;
    return 0;
}

/* ---- HTTP ---------------------------------------------------------------------------- */

static json_t *resv_json(const ts_resv_row *r, double now)
{
    json_t *users = json_array();
    for (const char *p = r->users; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        json_array_append_new(users, json_stringn(p, len));
        if (!e)
            break;
        p = e + 1;
    }
    const char *state = now < r->start_s ? "waiting" : now < r->end_s ? "active" : "ended";
    return json_pack("{s:s,s:s,s:f,s:f,s:o,s:o,s:b,s:f,s:s}", "name", r->name, "nodes", r->nodes,
                     "start", r->start_s, "end", r->end_s, "tenant",
                     r->tenant[0] ? json_string(r->tenant) : json_null(), "users", users,
                     "maintenance", r->maintenance, "created", r->created_s, "state", state);
}

static void resv_list(ctld *c, ctld_reply *r)
{
    json_t *a = json_array();
    double now = ctld_now();
    ctld_lock_reader(c);
    for (int i = 0; i < c->nresv; i++)
        json_array_append_new(a, resv_json(&c->resv[i].row, now));
    pthread_mutex_unlock(&c->mu);
    ctld_reply_json(r, 200, json_pack("{s:o}", "reservations", a));
}

/* Times past this are refused (Unix seconds, about the year 5000). */
#define TIME_MAX_S 95617584000.0

/* A time: a number (Unix seconds), or a string: RFC 3339 or a duration from
 * now ("30s"). 0 or 400 with why. */
static int time_field(json_t *v, const char *field, double now, double *out, char *why,
                      size_t size)
{
    if (json_is_number(v) && json_number_value(v) > 0 && json_number_value(v) < TIME_MAX_S) {
        *out = json_number_value(v);
        return 0;
    }
    if (json_is_string(v) && ctld_parse_expiry(json_string_value(v), now, out) == 0 &&
        *out > 0 && *out < TIME_MAX_S)
        return 0;
    snprintf(why, size, "%s: a time is Unix seconds, RFC 3339 (2027-01-31T12:00:00Z) or a "
             "duration from now (\"30s\", \"2h\")", field);
    return 400;
}

/* Reads and checks the body into row; 0, or 400 / 409 with the reason. */
static int resv_read(ctld *c, json_t *in, ts_resv_row *row, char *why, size_t size)
{
    static const char *const keys[] = {"name", "nodes", "start", "duration", "end",
                                       "tenant", "users", "maintenance"};
    const char *k;
    json_t *v;
    json_object_foreach(in, k, v)
    {
        bool known = false;
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            known = known || strcmp(k, keys[i]) == 0;
        if (!known)
            return snprintf(why, size, "%.64s: unknown field", k), 400;
    }
    json_t *name = json_object_get(in, "name"), *nodes = json_object_get(in, "nodes");
    json_t *start = json_object_get(in, "start"), *dur = json_object_get(in, "duration");
    json_t *end = json_object_get(in, "end"), *tenant = json_object_get(in, "tenant");
    json_t *users = json_object_get(in, "users"), *maint = json_object_get(in, "maintenance");
    if (!json_is_string(name) || !ts_token_name_ok(json_string_value(name)))
        return snprintf(why, size, "name: required, 1..63 characters of A-Z a-z 0-9 . _ -"), 400;
    snprintf(row->name, sizeof row->name, "%s", json_string_value(name));
    if (!json_is_string(nodes) || !json_string_length(nodes) ||
        json_string_length(nodes) >= sizeof row->nodes)
        return snprintf(why, size, "nodes: required, a host list (\"r-[1-4],r-7\")"), 400;
    snprintf(row->nodes, sizeof row->nodes, "%s", json_string_value(nodes));
    if (maint && !json_is_boolean(maint))
        return snprintf(why, size, "maintenance: must be true or false"), 400;
    row->maintenance = json_is_true(maint);
    double now = ctld_now();
    row->created_s = now;
    if (!start)
        return snprintf(why, size, "start: required"), 400;
    if (time_field(start, "start", now, &row->start_s, why, size))
        return 400;
    if (!!dur == !!end)
        return snprintf(why, size, "duration: exactly one of duration and end is required"), 400;
    if (end && time_field(end, "end", now, &row->end_s, why, size))
        return 400;
    if (dur) {
        double d = json_is_number(dur) ? json_number_value(dur) : -1.0;
        if (json_is_string(dur) && ctld_parse_duration(json_string_value(dur), &d) != 0)
            d = -1.0;
        if (!isfinite(d) || d <= 0)
            return snprintf(why, size, "duration: seconds > 0, or a duration (\"2h\")"), 400;
        row->end_s = row->start_s + d;
    }
    if (!(row->end_s > row->start_s))
        return snprintf(why, size, "end: must be after start"), 400;
    if (!(row->end_s < TIME_MAX_S))
        return snprintf(why, size, "end: must be before the year 5000 (%.0f)", TIME_MAX_S), 400;
    if (row->end_s <= now)
        return snprintf(why, size, "end: is in the past"), 400;
    if (users && !json_is_array(users))
        return snprintf(why, size, "users: a list of user names"), 400;
    size_t ui;
    json_t *uv;
    json_array_foreach(users, ui, uv)
    {
        const char *u = json_string_value(uv);
        size_t ul = strlen(row->users);
        if (!u || !ts_token_name_ok(u))
            return snprintf(why, size, "users[%zu]: a user name (1..63 characters of A-Z a-z "
                            "0-9 . _ -)", ui), 400;
        if (ul + strlen(u) + 2 > sizeof row->users)
            return snprintf(why, size, "users: too many"), 400;
        snprintf(row->users + ul, sizeof row->users - ul, "%s%s", ul ? "," : "", u);
    }
    if (tenant && !json_is_null(tenant) &&
        (!json_is_string(tenant) || json_string_length(tenant) >= sizeof row->tenant))
        return snprintf(why, size, "tenant: a tenant's name"), 400;
    if (json_is_string(tenant))
        snprintf(row->tenant, sizeof row->tenant, "%s", json_string_value(tenant));
    if (row->maintenance && (row->tenant[0] || row->users[0]))
        return snprintf(why, size, "maintenance: a maintenance window takes no jobs (no tenant "
                        "or users)"), 400;
    if (!row->maintenance && !row->tenant[0])
        return snprintf(why, size, "tenant: required (the tenant whose jobs use it), unless "
                        "maintenance"), 400;
    uint64_t *mask = NULL;
    ts_err e;
    int status = 0;
    ctld_lock_reader(c);
    if (row->tenant[0] && ts_tenant_find(c->tenants, row->tenant) < 0) {
        snprintf(why, size, "tenant: no tenant \"%s\"", row->tenant);
        status = 400;
    } else if (resv_find(c, row->name)) {
        snprintf(why, size, "name: reservation \"%s\" exists", row->name);
        status = 409;
    } else if (resv_mask(c, row->nodes, &mask, &e) != 0) {
        snprintf(why, size, "%s", e.msg);
        status = 400;
    }
    for (int i = 0; status == 0 && i < c->nresv; i++) {
        const ctld_resv *o = &c->resv[i];
        if (!(row->start_s < o->row.end_s && o->row.start_s < row->end_s))
            continue;
        for (int n = 0; n < c->cluster->nnodes; n++)
            if (ts_node_mask_has(mask, n) && ts_node_mask_has(o->mask, n)) {
                snprintf(why, size, "nodes: %s is in reservation \"%s\", whose window "
                         "overlaps this one", c->cluster->nodes[n].name, o->row.name);
                status = 409;
                break;
            }
    }
    pthread_mutex_unlock(&c->mu);
    free(mask);
    return status;
}

/* Under mu: waits for the cycle to settle, then hands the set over. */
static void resv_settle_apply(ctld *c)
{
    ctld_settled_wait(c);
    ts_err e;
    if (resv_apply(c, &e) != 0)
        fprintf(stderr, "tesserad: reservations: %s\n", e.msg);
    ctld_kick(c);
}

static void resv_create(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    json_error_t je;
    json_t *in = json_loadb(rq->body, rq->len, 0, &je);
    char why[512];
    ts_resv_row row = {0};
    pthread_mutex_lock(&c->resv_mu);
    int status = !json_is_object(in) ? (snprintf(why, sizeof why, "body: not a JSON object (%s)",
                                                 je.text), 400)
                                     : resv_read(c, in, &row, why, sizeof why);
    json_decref(in);
    if (status != 0) {
        pthread_mutex_unlock(&c->resv_mu);
        ctld_reply_error(r, status, status == 409 ? "conflict" : "invalid", "%s", why);
        return;
    }
    ts_err err;
    int rc = ts_store_resv_insert(c->store, &row, &err);
    if (rc == 0) {
        pthread_mutex_lock(&c->mu);
        rc = resv_add(c, &row, &err);
        if (rc == 0)
            resv_settle_apply(c);
        pthread_mutex_unlock(&c->mu);
    }
    pthread_mutex_unlock(&c->resv_mu);
    if (rc == TS_EEXIST)
        ctld_reply_error(r, 409, "conflict", "name: reservation \"%s\" exists", row.name);
    else if (rc != 0)
        ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
    else
        ctld_reply_json(r, 201, json_pack("{s:o}", "reservation", resv_json(&row, ctld_now())));
}

static void resv_delete(ctld *c, const char *name, ctld_reply *r)
{
    if (!ts_token_name_ok(name)) {
        ctld_reply_error(r, 400, "invalid", "name: 1..63 characters of A-Z a-z 0-9 . _ -");
        return;
    }
    pthread_mutex_lock(&c->resv_mu);
    ctld_lock_reader(c);
    bool found = resv_find(c, name) != NULL;
    pthread_mutex_unlock(&c->mu);
    ts_err err;
    int rc = found ? ts_store_resv_delete(c->store, name, &err) : TS_ENOENT;
    if (rc == 0) {
        pthread_mutex_lock(&c->mu);
        for (int i = 0; i < c->nresv; i++)
            if (strcmp(c->resv[i].row.name, name) == 0) {
                resv_entry_free(&c->resv[i]);
                c->resv[i] = c->resv[--c->nresv];
                break;
            }
        resv_settle_apply(c);
        pthread_mutex_unlock(&c->mu);
    }
    pthread_mutex_unlock(&c->resv_mu);
    if (rc == TS_ENOENT)
        ctld_reply_error(r, 404, "not_found", "reservation \"%s\" does not exist", name);
    else if (rc != 0)
        ctld_reply_error(r, 503, "unavailable", "%s", err.msg);
    else {
        r->status = 204;
        r->body = NULL;
    }
}

void ctld_resv_route(ctld *c, const ctld_request *rq, ctld_reply *r)
{
    const char *p = rq->url + strlen("/v1/reservations");
    bool admin = rq->who->role == TS_ROLE_ADMIN;
    if (strcmp(rq->method, "GET") == 0 && !*p)
        resv_list(c, r);
    else if (strcmp(rq->method, "POST") == 0 && !*p)
        admin ? resv_create(c, rq, r)
              : ctld_reply_error(r, 403, "forbidden", "only admin creates reservations");
    else if (strcmp(rq->method, "DELETE") == 0 && rq->name)
        admin ? resv_delete(c, rq->name, r)
              : ctld_reply_error(r, 403, "forbidden", "only admin deletes reservations");
    else
        ctld_reply_error(r, 405, "method_not_allowed", "%s %s", rq->method, rq->url);
}
