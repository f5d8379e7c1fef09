/*
 * store_rows.c - the store's row operations, written once for SQLite and
 * PostgreSQL: what each write binds and how it reads its outcome, and how
 * each read turns rows into ts_*_row.
 *
 * A write that may find nothing to change (a stale gen, a revoked token, a
 * taken reservation name) asks the backend how many rows it changed and then
 * reads why, so every error is the same on both backends. A list grows its
 * array while it steps and frees it whole when any row fails, so a failed
 * read leaves nothing behind.
 */
#include "store/store_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Reads the current row of st into row (a ts_*_row); may fail (memory). */
typedef int (*row_reader)(store_conn *c, void *st, void *row, ts_err *err);

static void free_jobs(void *rows, int n) { ts_store_free_jobs(rows, n); }
static void free_events(void *rows, int n) { ts_store_free_events(rows, n); }
static void free_plain(void *rows, int n)
{
    (void)n;
    free(rows);
}

/* How a list names itself: in the backend's errors, and when out of memory. */
typedef struct list_names {
    const char *what, *doing;
} list_names;
static const list_names LIST_JOBS = {"list jobs", "listing jobs"};
static const list_names LIST_EVENTS = {"list events", "listing events"};
static const list_names LIST_TOKENS = {"list tokens", "listing tokens"};
static const list_names LIST_ARRAYS = {"list arrays", "listing arrays"};
static const list_names LIST_RESVS = {"list reservations", "listing reservations"};
static const list_names LIST_USAGE = {"usage", "computing usage"};

/* Steps st (bound) to its end, one row of `size` bytes each into *rows. */
static int collect(store_conn *c, void *st, list_names nm, size_t size, row_reader rd,
                   void (*free_rows)(void *, int), void **rows, int *n, ts_err *err)
{
    int rc, cap = 0, ret = 0;
    *rows = NULL;
    *n = 0;
    while ((rc = c->be->step(st, nm.what, err)) > 0) {
        void *row = store_grow(rows, *n, &cap, size);
        if (!row) {
            ret = ts_err_set(err, TS_ENOMEM, "store: out of memory %s", nm.doing);
            break;
        }
        memset(row, 0, size);
        if ((ret = rd(c, st, row, err)))
            break;
        (*n)++;
    }
    if (ret == 0)
        ret = rc;
    c->be->reset(st);
    if (ret) {
        free_rows(*rows, *n);
        *rows = NULL;
        *n = 0;
    }
    return ret;
}

/* Runs a statement that returns at most one row: 1 when there was one (read
 * by rd), 0 when none. */
static int one_row(store_conn *c, void *st, const char *what, row_reader rd, void *row,
                   ts_err *err)
{
    int rc = c->be->step(st, what, err);
    int bad = rc > 0 ? rd(c, st, row, err) : 0;
    c->be->reset(st);
    return bad ? bad : rc;
}

/* Statement `which`, ready for binding. */
static int prep(store_conn *c, enum store_stmt which, void **st, ts_err *err)
{
    return store_stmt(c, which, store_stmt_sql(which), st, err);
}

/* Steps a bound write that changes at most one row: 1 if it changed one. */
static int changed_one(store_conn *c, void *st, const char *what, ts_err *err)
{
    int rc = c->be->step(st, what, err);
    int64_t changed = rc == 0 ? c->be->changes(st) : 0;
    c->be->reset(st);
    return rc < 0 ? rc : changed == 1;
}

static int read_i64(store_conn *c, void *st, void *out, ts_err *err)
{
    (void)err;
    *(int64_t *)out = c->be->col_i64(st, 0);
    return 0;
}

static int read_f64(store_conn *c, void *st, void *out, ts_err *err)
{
    (void)err;
    *(double *)out = c->be->col_f64(st, 0);
    return 0;
}

static int read_job(store_conn *c, void *st, void *row, ts_err *err)
{
    const struct store_backend *be = c->be;
    ts_job_row *r = row;
    r->id = be->col_i64(st, 0);
    store_col_field(c, st, 1, r->tenant, sizeof r->tenant);
    store_col_field(c, st, 2, r->name, sizeof r->name);
    store_col_field(c, st, 3, r->owner, sizeof r->owner);
    store_col_field(c, st, 4, r->idem_key, sizeof r->idem_key);
    r->state = (int)be->col_i64(st, 5);
    r->tier = (int)be->col_i64(st, 6);
    r->priority = (int)be->col_i64(st, 7);
    r->gpus = (int)be->col_i64(st, 8);
    store_col_field(c, st, 9, r->gpu_model, sizeof r->gpu_model);
    r->submit_s = be->col_f64(st, 10);
    r->start_s = be->col_f64(st, 11);
    r->end_s = be->col_f64(st, 12);
    r->preemptions = (int)be->col_i64(st, 13);
    store_col_field(c, st, 14, r->reason, sizeof r->reason);
    r->gen = be->col_i64(st, 18);
    store_col_field(c, st, 20, r->run_user, sizeof r->run_user);
    r->run_uid = be->col_i64(st, 21);
    r->restarts = (int)be->col_i64(st, 22);
    if (!store_col_dup(c, st, 15, &r->why) || !store_col_dup(c, st, 16, &r->spec_json) ||
        !store_col_dup(c, st, 17, &r->placement_json) ||
        !store_col_dup(c, st, 19, &r->result_json) ||
        (!r->spec_json && !(r->spec_json = strdup("")))) {
        ts_job_row_fini(r);
        return ts_err_set(err, TS_ENOMEM, "store: out of memory reading job %lld",
                          (long long)r->id);
    }
    return 0;
}

static int read_token(store_conn *c, void *st, void *row, ts_err *err)
{
    (void)err;
    const struct store_backend *be = c->be;
    ts_token_row *t = row;
    t->id = be->col_i64(st, 0);
    store_col_field(c, st, 1, t->name, sizeof t->name);
    t->role = (int)be->col_i64(st, 2);
    store_col_field(c, st, 3, t->tenant, sizeof t->tenant);
    be->col_blob(st, 4, t->hash, TS_TOKEN_HASH_BYTES);
    t->created_s = be->col_f64(st, 5);
    t->revoked_s = be->col_f64(st, 6);
    store_col_field(c, st, 7, t->unix_user, sizeof t->unix_user);
    t->uid = be->col_i64(st, 8);
    t->expires_s = be->col_f64(st, 9);
    return 0;
}

static int read_event(store_conn *c, void *st, void *row, ts_err *err)
{
    ts_event_row *e = row;
    e->id = c->be->col_i64(st, 0);
    e->job_id = c->be->col_i64(st, 1);
    e->t_s = c->be->col_f64(st, 2);
    store_col_field(c, st, 3, e->kind, sizeof e->kind);
    if (!store_col_dup(c, st, 4, &e->detail))
        return ts_err_set(err, TS_ENOMEM, "store: out of memory listing events");
    return 0;
}

static int read_array(store_conn *c, void *st, void *row, ts_err *err)
{
    (void)err;
    *(ts_array_row *)row = (ts_array_row){.id = c->be->col_i64(st, 0),
                                          .size = (int)c->be->col_i64(st, 1),
                                          .next = (int)c->be->col_i64(st, 2),
                                          .open = true};
    return 0;
}

static int read_resv(store_conn *c, void *st, void *row, ts_err *err)
{
    (void)err;
    ts_resv_row *r = row;
    store_col_field(c, st, 0, r->name, sizeof r->name);
    store_col_field(c, st, 1, r->nodes, sizeof r->nodes);
    r->start_s = c->be->col_f64(st, 2);
    r->end_s = c->be->col_f64(st, 3);
    store_col_field(c, st, 4, r->tenant, sizeof r->tenant);
    store_col_field(c, st, 5, r->users, sizeof r->users);
    r->maintenance = c->be->col_i64(st, 6) != 0;
    r->created_s = c->be->col_f64(st, 7);
    return 0;
}

static int read_usage(store_conn *c, void *st, void *row, ts_err *err)
{
    (void)err;
    ts_usage_row *u = row;
    store_col_field(c, st, 0, u->tenant, sizeof u->tenant);
    u->tier = (int)c->be->col_i64(st, 1);
    store_col_field(c, st, 2, u->gpu_model, sizeof u->gpu_model);
    u->gpu_s = c->be->col_f64(st, 3);
    return 0;
}

/* ---- schema ---- */

int store_set_version(store_conn *c, int version, ts_err *err)
{
    void *st = NULL;
    int rc = prep(c, ST_SET_VERSION, &st, err);
    if (rc)
        return rc;
    c->be->bind_i64(st, 1, version);
    return store_finish(c, st, "schema_version", err);
}

int store_get_version(store_conn *c, int64_t *v, ts_err *err)
{
    void *st = NULL;
    int rc = prep(c, ST_GET_VERSION, &st, err);
    if (rc)
        return rc;
    rc = c->be->step(st, "query", err);
    bool null = rc > 0 && c->be->col_null(st, 0);
    if (rc > 0 && !null)
        *v = c->be->col_i64(st, 0);
    c->be->reset(st);
    if (rc < 0)
        return rc;
    return rc == 0 || null ? ts_err_set(err, TS_ENOENT, "%s: query: no value", c->be->name) : 0;
}

/* ---- writes ---- */

/* What a write binds, in parameter order: each a field of its row. */
enum bind_kind {
    B_I64,  /* int64_t */
    B_INT,  /* int */
    B_BOOL, /* bool, as 0 or 1 */
    B_F64,  /* double */
    B_NAME, /* a char array */
    B_STR,  /* a char * (NULL: SQL NULL) */
    B_HASH, /* a token hash, binary */
};
typedef struct bind_col {
    enum bind_kind kind;
    size_t off;
} bind_col;
#define COL(kind, type, field) {kind, offsetof(type, field)}
#define NCOLS(t) ((int)(sizeof(t) / sizeof((t)[0])))

/* ST_JOB_INSERT, which binds the id (or NULL) after these */
static const bind_col NEW_JOB[] = {
    COL(B_NAME, ts_job_row, tenant),      COL(B_NAME, ts_job_row, name),
    COL(B_NAME, ts_job_row, owner),       COL(B_NAME, ts_job_row, idem_key),
    COL(B_INT, ts_job_row, state),        COL(B_INT, ts_job_row, tier),
    COL(B_INT, ts_job_row, priority),     COL(B_INT, ts_job_row, gpus),
    COL(B_NAME, ts_job_row, gpu_model),   COL(B_F64, ts_job_row, submit_s),
    COL(B_F64, ts_job_row, start_s),      COL(B_F64, ts_job_row, end_s),
    COL(B_INT, ts_job_row, preemptions),  COL(B_NAME, ts_job_row, reason),
    COL(B_STR, ts_job_row, why),          COL(B_STR, ts_job_row, spec_json),
    COL(B_STR, ts_job_row, placement_json), COL(B_NAME, ts_job_row, run_user),
    COL(B_I64, ts_job_row, run_uid),      COL(B_INT, ts_job_row, restarts),
};
/* ST_JOB_UPDATE: the row's id and gen select it, the rest is written */
static const bind_col JOB_UPDATE[] = {
    COL(B_I64, ts_job_row, id),           COL(B_I64, ts_job_row, gen),
    COL(B_INT, ts_job_row, state),        COL(B_F64, ts_job_row, submit_s),
    COL(B_F64, ts_job_row, start_s),      COL(B_F64, ts_job_row, end_s),
    COL(B_INT, ts_job_row, preemptions),  COL(B_NAME, ts_job_row, reason),
    COL(B_STR, ts_job_row, why),          COL(B_STR, ts_job_row, placement_json),
    COL(B_NAME, ts_job_row, gpu_model),   COL(B_STR, ts_job_row, result_json),
    /* NULL: unchanged (only an update of the job's spec sets it) */
    COL(B_STR, ts_job_row, spec_json),    COL(B_INT, ts_job_row, priority),
    COL(B_INT, ts_job_row, gpus),         COL(B_INT, ts_job_row, restarts),
};
static const bind_col NEW_TOKEN[] = {
    COL(B_NAME, ts_token_row, name),      COL(B_INT, ts_token_row, role),
    COL(B_NAME, ts_token_row, tenant),    COL(B_HASH, ts_token_row, hash),
    COL(B_F64, ts_token_row, created_s),  COL(B_F64, ts_token_row, revoked_s),
    COL(B_NAME, ts_token_row, unix_user), COL(B_I64, ts_token_row, uid),
    COL(B_F64, ts_token_row, expires_s),
};
static const bind_col NEW_RESV[] = {
    COL(B_NAME, ts_resv_row, name),       COL(B_NAME, ts_resv_row, nodes),
    COL(B_F64, ts_resv_row, start_s),     COL(B_F64, ts_resv_row, end_s),
    COL(B_NAME, ts_resv_row, tenant),     COL(B_NAME, ts_resv_row, users),
    COL(B_BOOL, ts_resv_row, maintenance), COL(B_F64, ts_resv_row, created_s),
};

/* Binds the fields cols names of row as parameters 1..n. */
static void bind_row(store_conn *c, void *st, const bind_col *cols, int n, const void *row)
{
    const struct store_backend *be = c->be;
    for (int i = 0; i < n; i++) {
        const void *f = (const char *)row + cols[i].off;
        switch (cols[i].kind) {
        case B_I64:
            be->bind_i64(st, i + 1, *(const int64_t *)f);
            break;
        case B_INT:
            be->bind_i64(st, i + 1, *(const int *)f);
            break;
        case B_BOOL:
            be->bind_i64(st, i + 1, *(const bool *)f ? 1 : 0);
            break;
        case B_F64:
            be->bind_f64(st, i + 1, *(const double *)f);
            break;
        case B_NAME:
            be->bind_text(st, i + 1, f);
            break;
        case B_STR:
            be->bind_text(st, i + 1, *(const char *const *)f);
            break;
        case B_HASH:
            be->bind_blob(st, i + 1, f, TS_TOKEN_HASH_BYTES);
            break;
        }
    }
}

int store_job_insert(store_conn *c, const ts_job_row *r, int64_t *id, bool *existed,
                     ts_err *err)
{
    void *st = NULL;
    int rc = prep(c, ST_JOB_INSERT, &st, err);
    if (rc)
        return rc;
    bind_row(c, st, NEW_JOB, NCOLS(NEW_JOB), r);
    if (r->id > 0) /* an array's element, on the id its array reserved */
        c->be->bind_i64(st, NCOLS(NEW_JOB) + 1, r->id);
    else
        c->be->bind_text(st, NCOLS(NEW_JOB) + 1, NULL);
    if ((rc = one_row(c, st, "insert job", read_i64, id, err)) < 0)
        return rc;
    *existed = rc == 0;
    if (rc > 0)
        return 0;
    /* nothing inserted: the owner used this idempotency key before */
    if ((rc = store_job_by_idem(c, r->owner, r->idem_key, id, err)))
        return rc;
    return *id > 0 ? 0
                   : ts_err_set(err, TS_EIO, "%s: insert job: idempotency key conflict "
                                             "without a stored job", c->be->name);
}

int store_job_by_idem(store_conn *c, const char *owner, const char *key, int64_t *id,
                      ts_err *err)
{
    *id = 0;
    void *st = NULL;
    int rc = prep(c, ST_JOB_BY_IDEM, &st, err);
    if (rc)
        return rc;
    c->be->bind_text(st, 1, owner);
    c->be->bind_text(st, 2, key);
    rc = one_row(c, st, "job by idempotency key", read_i64, id, err);
    return rc < 0 ? rc : 0;
}

int store_job_update(store_conn *c, const ts_job_row *r, ts_err *err)
{
    const struct store_backend *be = c->be;
    void *st = NULL;
    int rc = prep(c, ST_JOB_UPDATE, &st, err);
    if (rc)
        return rc;
    bind_row(c, st, JOB_UPDATE, NCOLS(JOB_UPDATE), r);
    if ((rc = changed_one(c, st, "update job", err)) != 0)
        return rc < 0 ? rc : 0;
    if ((rc = prep(c, ST_JOB_GEN, &st, err)))
        return rc;
    be->bind_i64(st, 1, r->id);
    int64_t gen = 0;
    if ((rc = one_row(c, st, "update job", read_i64, &gen, err)) < 0)
        return rc;
    if (rc > 0)
        return ts_err_set(err, TS_ECONFLICT,
                          "job %lld: gen %lld is stale (the store has %lld): updated by "
                          "someone else since it was read",
                          (long long)r->id, (long long)r->gen, (long long)gen);
    return ts_err_set(err, TS_ENOENT, "job %lld: no such job", (long long)r->id);
}

int store_event_append(store_conn *c, const ts_event_row *ev, ts_err *err)
{
    void *st = NULL;
    int rc = prep(c, ST_EVENT_INSERT, &st, err);
    if (rc)
        return rc;
    c->be->bind_i64(st, 1, ev->job_id);
    c->be->bind_f64(st, 2, ev->t_s);
    c->be->bind_text(st, 3, ev->kind);
    c->be->bind_text(st, 4, ev->detail);
    return store_finish(c, st, "append event", err);
}

/* 0 when a token of that name exists, TS_ENOENT if there is none. */
static int token_exists(store_conn *c, const char *name, ts_err *err)
{
    void *st = NULL;
    int rc = prep(c, ST_TOKEN_BY_NAME, &st, err);
    if (rc)
        return rc;
    c->be->bind_text(st, 1, name);
    double revoked_s = 0;
    if ((rc = one_row(c, st, "token", read_f64, &revoked_s, err)) < 0)
        return rc;
    return rc > 0 ? 0 : ts_err_set(err, TS_ENOENT, "token '%s': no such token", name);
}

int store_token_insert(store_conn *c, const ts_token_row *t, int64_t *id, ts_err *err)
{
    int rc = token_exists(c, t->name, NULL);
    if (rc == 0)
        return ts_err_set(err, TS_EEXIST, "token '%s': name already taken", t->name);
    if (rc != TS_ENOENT)
        return token_exists(c, t->name, err);
    void *st = NULL;
    if ((rc = prep(c, ST_TOKEN_INSERT, &st, err)))
        return rc;
    bind_row(c, st, NEW_TOKEN, NCOLS(NEW_TOKEN), t);
    rc = one_row(c, st, "insert token", read_i64, id, err);
    if (rc == TS_EEXIST)
        return ts_err_set(err, TS_EEXIST, "token '%s': hash already used by another token",
                          t->name);
    return rc < 0 ? rc : 0;
}

int store_token_revoke(store_conn *c, const char *name, double now_s, ts_err *err)
{
    void *st = NULL;
    int rc = prep(c, ST_TOKEN_REVOKE, &st, err);
    if (rc)
        return rc;
    c->be->bind_text(st, 1, name);
    c->be->bind_f64(st, 2, now_s);
    if ((rc = changed_one(c, st, "revoke token", err)) != 0)
        return rc < 0 ? rc : 0;
    /* revoked before (the first time stands), or no such token */
    return token_exists(c, name, err);
}

int store_setting_put(store_conn *c, const char *key, const char *value, ts_err *err)
{
    void *st = NULL;
    int rc = prep(c, ST_SETTING_PUT, &st, err);
    if (rc)
        return rc;
    c->be->bind_text(st, 1, key);
    c->be->bind_text(st, 2, value);
    return store_finish(c, st, "put setting", err);
}

int store_ids_reserve(store_conn *c, int64_t last, ts_err *err)
{
    void *st = NULL;
    int rc = prep(c, ST_IDS_RESERVE, &st, err);
    if (rc)
        return rc;
    c->be->bind_i64(st, 1, last);
    return store_finish(c, st, "reserve ids", err);
}

int store_array_put(store_conn *c, const ts_array_row *a, ts_err *err)
{
    void *st = NULL;
    int rc = prep(c, ST_ARRAY_PUT, &st, err);
    if (rc)
        return rc;
    c->be->bind_i64(st, 1, a->id);
    c->be->bind_i64(st, 2, a->size);
    c->be->bind_i64(st, 3, a->next);
    c->be->bind_i64(st, 4, a->open ? 1 : 0);
    return store_finish(c, st, "put array", err);
}

int store_resv_insert(store_conn *c, const ts_resv_row *r, ts_err *err)
{
    void *st = NULL;
    int rc = prep(c, ST_RESV_INSERT, &st, err);
    if (rc)
        return rc;
    bind_row(c, st, NEW_RESV, NCOLS(NEW_RESV), r);
    rc = changed_one(c, st, "insert reservation", err);
    if (rc < 0)
        return rc;
    return rc ? 0 : ts_err_set(err, TS_EEXIST, "reservation \"%s\": exists", r->name);
}

int store_resv_delete(store_conn *c, const char *name, ts_err *err)
{
    void *st = NULL;
    int rc = prep(c, ST_RESV_DELETE, &st, err);
    if (rc)
        return rc;
    c->be->bind_text(st, 1, name);
    rc = changed_one(c, st, "delete reservation", err);
    if (rc < 0)
        return rc;
    return rc ? 0 : ts_err_set(err, TS_ENOENT, "reservation \"%s\": no such reservation", name);
}

/* ---- reads ---- */

int store_job_get(store_conn *c, int64_t id, ts_job_row *out, ts_err *err)
{
    void *st = NULL;
    int rc = prep(c, ST_JOB_GET, &st, err);
    if (rc)
        return rc;
    c->be->bind_i64(st, 1, id);
    memset(out, 0, sizeof *out);
    if ((rc = one_row(c, st, "get job", read_job, out, err)) < 0)
        return rc;
    return rc > 0 ? 0 : ts_err_set(err, TS_ENOENT, "job %lld: no such job", (long long)id);
}

int store_job_list(store_conn *c, const ts_job_filter *f, int64_t after_id, int limit,
                   ts_job_row **rows, int *n, ts_err *err)
{
    /* one state by its index; several by a mask */
    bool one = f->states && !(f->states & (f->states - 1));
    int mask = (f->tenant ? LF_TENANT : 0) | (f->owner ? LF_OWNER : 0) |
               (one ? LF_STATE : f->states ? LF_STATES : 0) | (f->active_only ? LF_ACTIVE : 0) |
               (f->newest_first ? LF_DESC : 0);
    char sql[1024];
    store_list_sql(mask, sql, sizeof sql);
    void *st = NULL;
    int rc = store_stmt(c, ST_LIST_SLOT(mask), sql, &st, err);
    if (rc)
        return rc;
    int p = 1;
    c->be->bind_i64(st, p++, f->newest_first && after_id == 0 ? INT64_MAX : after_id);
    if (f->tenant)
        c->be->bind_text(st, p++, f->tenant);
    if (f->owner)
        c->be->bind_text(st, p++, f->owner);
    if (one)
        c->be->bind_i64(st, p++, __builtin_ctz(f->states));
    else if (f->states)
        c->be->bind_i64(st, p++, f->states);
    c->be->bind_i64(st, p, limit);
    return collect(c, st, LIST_JOBS, sizeof **rows, read_job, free_jobs, (void **)rows, n,
                   err);
}

int store_job_counts(store_conn *c, const char *tenant, int64_t out[TS_JOB_STATES],
                     ts_err *err)
{
    enum store_stmt which = tenant ? ST_COUNTS_TENANT : ST_COUNTS_ALL;
    void *st = NULL;
    int rc = prep(c, which, &st, err);
    if (rc)
        return rc;
    if (tenant)
        c->be->bind_text(st, 1, tenant);
    while ((rc = c->be->step(st, "count jobs", err)) > 0) {
        int64_t state = c->be->col_i64(st, 0);
        if (state >= 0 && state < TS_JOB_STATES)
            out[state] = c->be->col_i64(st, 1);
    }
    c->be->reset(st);
    return rc;
}

int store_event_list(store_conn *c, int64_t job_id, int64_t after_id, int limit,
                     ts_event_row **rows, int *n, ts_err *err)
{
    enum store_stmt which = job_id != 0 ? ST_EVENTS_JOB : ST_EVENTS_ALL;
    void *st = NULL;
    int rc = prep(c, which, &st, err);
    if (rc)
        return rc;
    int p = 1;
    if (job_id != 0)
        c->be->bind_i64(st, p++, job_id > 0 ? job_id : 0); /* TS_EVENTS_NO_JOB: job_id 0 */
    c->be->bind_i64(st, p++, after_id);
    c->be->bind_i64(st, p, limit);
    return collect(c, st, LIST_EVENTS, sizeof **rows, read_event, free_events,
                   (void **)rows, n, err);
}

int store_token_by_hash(store_conn *c, const uint8_t hash[TS_TOKEN_HASH_BYTES],
                        ts_token_row *out, ts_err *err)
{
    void *st = NULL;
    int rc = prep(c, ST_TOKEN_BY_HASH, &st, err);
    if (rc)
        return rc;
    c->be->bind_blob(st, 1, hash, TS_TOKEN_HASH_BYTES);
    memset(out, 0, sizeof *out);
    if ((rc = one_row(c, st, "token by hash", read_token, out, err)) < 0)
        return rc;
    return rc > 0 ? 0 : ts_err_set(err, TS_ENOENT, "token: no live token with this secret");
}

int store_token_list(store_conn *c, const char *tenant, ts_token_row **rows, int *n,
                     ts_err *err)
{
    enum store_stmt which = tenant ? ST_TOKENS_TENANT : ST_TOKENS_ALL;
    void *st = NULL;
    int rc = prep(c, which, &st, err);
    if (rc)
        return rc;
    if (tenant)
        c->be->bind_text(st, 1, tenant);
    return collect(c, st, LIST_TOKENS, sizeof **rows, read_token, free_plain, (void **)rows,
                   n, err);
}

static int read_dup(store_conn *c, void *st, void *out, ts_err *err)
{
    return store_col_dup(c, st, 0, out) ? 0 : ts_err_set(err, TS_ENOMEM, "store: out of memory");
}

int store_setting_get(store_conn *c, const char *key, char **value, ts_err *err)
{
    void *st = NULL;
    int rc = prep(c, ST_SETTING_GET, &st, err);
    if (rc)
        return rc;
    c->be->bind_text(st, 1, key);
    *value = NULL;
    rc = one_row(c, st, "get setting", read_dup, value, err);
    if (rc == TS_ENOMEM)
        return ts_err_set(err, TS_ENOMEM, "store: out of memory reading %s", key);
    return rc < 0 ? rc : 0;
}

int store_arrays_open(store_conn *c, ts_array_row **rows, int *n, ts_err *err)
{
    void *st = NULL;
    *rows = NULL;
    *n = 0;
    int rc = prep(c, ST_ARRAYS_OPEN, &st, err);
    if (rc)
        return rc;
    return collect(c, st, LIST_ARRAYS, sizeof **rows, read_array, free_plain, (void **)rows,
                   n, err);
}

int store_resv_list(store_conn *c, ts_resv_row **rows, int *n, ts_err *err)
{
    void *st = NULL;
    *rows = NULL;
    *n = 0;
    int rc = prep(c, ST_RESV_LIST, &st, err);
    if (rc)
        return rc;
    return collect(c, st, LIST_RESVS, sizeof **rows, read_resv, free_plain,
                   (void **)rows, n, err);
}

int store_usage_jobs(store_conn *c, double from_s, double to_s, double now_s,
                     ts_usage_row **rows, int *n, ts_err *err)
{
    void *st = NULL;
    int rc = prep(c, ST_USAGE, &st, err);
    if (rc)
        return rc;
    c->be->bind_f64(st, 1, from_s);
    c->be->bind_f64(st, 2, to_s);
    c->be->bind_f64(st, 3, now_s);
    return collect(c, st, LIST_USAGE, sizeof **rows, read_usage, free_plain, (void **)rows, n,
                   err);
}
