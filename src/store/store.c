/*
 * store.c - the ts_store object: which backend a URL names, the name tables
 * for states and roles, the row free helpers, input checks, and the public
 * calls.
 *
 * Writes are checked here (so a bad field is reported before it costs a
 * transaction, and both backends reject the same things with the same
 * message), then handed to the group committer (store_commit.c) as a
 * ts_wop on the caller's stack. Reads never queue behind writes: they borrow
 * a connection from a small pool, opened on first use, and run one
 * autocommit statement on it. On SQLite in WAL mode such a reader sees the
 * last committed state without blocking the writer; on PostgreSQL each
 * reader is its own session. A connection the server dropped is discarded
 * on return, so the pool heals after a database restart.
 */
#include "store/store_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera/grow.h"
#include "tessera/tenant.h"

static const char *const job_state_names[TS_JOB_STATES] = {
    "pending", "held", "running", "stopping", "completed", "failed", "cancelled", "timeout",
};

static const char *const role_names[] = {"admin", "tenant-admin", "user", "viewer", "node",
                                         "scrape"};
#define ROLES ((int)(sizeof role_names / sizeof role_names[0]))

/* names[i] for 0 <= i < n, else "unknown"; and back, -1 for none. */
static const char *store_name_of(const char *const *names, int n, int i)
{
    return i >= 0 && i < n ? names[i] : "unknown";
}

static int store_name_find(const char *const *names, int n, const char *name)
{
    for (int i = 0; name && i < n; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

const char *ts_job_state_name(int state)
{
    return store_name_of(job_state_names, TS_JOB_STATES, state);
}

int ts_job_state_parse(const char *name)
{
    return store_name_find(job_state_names, TS_JOB_STATES, name);
}

int ts_job_states_parse(const char *list, unsigned *set, char *bad, size_t n)
{
    *set = 0;
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        char name[16] = {0};
        int st = len < sizeof name ? ts_job_state_parse(memcpy(name, p, len)) : -1;
        if (st < 0) {
            if (n)
                snprintf(bad, n, "%.*s", (int)len, p);
            return -1;
        }
        *set |= 1u << st;
        if (!*(p += len))
            return 0;
    }
}

const char *ts_role_name(int role)
{
    return store_name_of(role_names, ROLES, role);
}

int ts_role_parse(const char *name)
{
    return store_name_find(role_names, ROLES, name);
}

void ts_job_row_fini(ts_job_row *r)
{
    if (!r)
        return;
    free(r->spec_json);
    free(r->placement_json);
    free(r->why);
    free(r->result_json);
    r->spec_json = r->placement_json = r->why = r->result_json = NULL;
}

void ts_store_free_jobs(ts_job_row *rows, int n)
{
    for (int i = 0; rows && i < n; i++)
        ts_job_row_fini(&rows[i]);
    free(rows);
}

void ts_store_free_events(ts_event_row *rows, int n)
{
    for (int i = 0; rows && i < n; i++)
        free(rows[i].detail);
    free(rows);
}

void store_copy_field(char *dst, size_t cap, const char *src, size_t len)
{
    if (!src)
        len = 0;
    if (len > cap - 1)
        len = cap - 1;
    if (len)
        memcpy(dst, src, len);
    dst[len] = '\0';
}

void *store_grow(void **rows, int n, int *cap, size_t size)
{
    if (ts_grow(rows, cap, n + 1, 16, size) != 0)
        return NULL;
    return (char *)*rows + (size_t)n * size;
}

/* ---- input checks ---- */

/* A fixed-size field must hold a terminated string; `required` also wants
 * it non-empty. */
static int check_field(const char *what, const char *field, const char *v, size_t cap,
                       bool required, ts_err *err)
{
    size_t len = strnlen(v, cap);
    if (len == cap)
        return ts_err_set(err, TS_EINVAL, "%s.%s: longer than %zu bytes", what, field, cap - 1);
    if (required && len == 0)
        return ts_err_set(err, TS_EINVAL, "%s.%s: must not be empty", what, field);
    return 0;
}

static int check_time(const char *what, const char *field, double t, ts_err *err)
{
    if (!isfinite(t) || t < 0)
        return ts_err_set(err, TS_EINVAL, "%s.%s: must be a finite time >= 0 (Unix seconds)",
                          what, field);
    return 0;
}

/* The fields an update writes (and an insert too). */
static int check_mutable(const char *what, const ts_job_row *r, ts_err *err)
{
    int rc;
    if (r->state < 0 || r->state >= TS_JOB_STATES)
        return ts_err_set(err, TS_EINVAL, "%s.state: %d is not a job state", what, r->state);
    if ((rc = check_field(what, "gpu_model", r->gpu_model, sizeof r->gpu_model, false, err)) ||
        (rc = check_field(what, "reason", r->reason, sizeof r->reason, false, err)) ||
        (rc = check_time(what, "submit_s", r->submit_s, err)) ||
        (rc = check_time(what, "start_s", r->start_s, err)) ||
        (rc = check_time(what, "end_s", r->end_s, err)))
        return rc;
    if (r->preemptions < 0)
        return ts_err_set(err, TS_EINVAL, "%s.preemptions: must be >= 0", what);
    if (r->restarts < 0)
        return ts_err_set(err, TS_EINVAL, "%s.restarts: must be >= 0", what);
    return 0;
}

static int check_new_job(const ts_job_row *r, ts_err *err)
{
    int rc;
    if ((rc = check_field("job", "tenant", r->tenant, sizeof r->tenant, true, err)) ||
        (rc = check_field("job", "name", r->name, sizeof r->name, false, err)) ||
        (rc = check_field("job", "owner", r->owner, sizeof r->owner, false, err)) ||
        (rc = check_field("job", "idem_key", r->idem_key, sizeof r->idem_key, false, err)) ||
        (rc = check_mutable("job", r, err)))
        return rc;
    if (r->tier < 0 || r->tier >= TS_TIERS)
        return ts_err_set(err, TS_EINVAL, "job.tier: %d is not a tier", r->tier);
    if (r->gpus < 0)
        return ts_err_set(err, TS_EINVAL, "job.gpus: must be >= 0");
    if (!r->spec_json)
        return ts_err_set(err, TS_EINVAL, "job.spec_json: must not be NULL");
    return 0;
}

static int check_update(const char *what, const ts_job_row *r, ts_err *err)
{
    if (r->id <= 0)
        return ts_err_set(err, TS_EINVAL, "%s.id: must be > 0", what);
    if (r->gen <= 0)
        return ts_err_set(err, TS_EINVAL, "%s.gen: must be > 0 (the gen read with the job)",
                          what);
    return check_mutable(what, r, err);
}

static int check_event(const char *what, const ts_event_row *ev, ts_err *err)
{
    if (ev->job_id < 0)
        return ts_err_set(err, TS_EINVAL, "%s.job_id: must be >= 0 (0: about no job)", what);
    int rc = check_field(what, "kind", ev->kind, sizeof ev->kind, true, err);
    return rc ? rc : check_time(what, "t_s", ev->t_s, err);
}

static int check_limit(int limit, ts_err *err)
{
    if (limit < 1 || limit > TS_STORE_LIST_MAX)
        return ts_err_set(err, TS_EINVAL, "limit: must be 1..%d", TS_STORE_LIST_MAX);
    return 0;
}

/* ---- open and close ---- */

static bool has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* Picks the backend and the target it connects to. */
static int parse_url(const char *url, const struct store_backend **be, const char **target,
                     ts_err *err)
{
    if (!url || !*url)
        return ts_err_set(err, TS_EINVAL, "store url: must not be empty");
    if (has_prefix(url, "postgresql://") || has_prefix(url, "postgres://")) {
        *be = &store_pg_backend;
        *target = url;
        return 0;
    }
    const char *path = url;
    if (has_prefix(url, "sqlite:")) {
        path = url + strlen("sqlite:");
        if (has_prefix(path, "//"))
            path += 2;
    } else {
        const char *sep = strstr(url, "://");
        if (sep && !memchr(url, '/', (size_t)(sep - url)))
            return ts_err_set(err, TS_EINVAL,
                              "store url: unknown scheme '%.*s' (want sqlite:PATH, a path, or "
                              "postgresql://...)",
                              (int)(sep - url), url);
    }
    if (!*path)
        return ts_err_set(err, TS_EINVAL, "store url: sqlite: needs a file path");
    if (strcmp(path, ":memory:") == 0 || has_prefix(path, "file:"))
        return ts_err_set(err, TS_EINVAL,
                          "store url: '%s': want a plain file path (readers open their own "
                          "connections, so an in-memory or URI database cannot be shared)",
                          path);
    *be = &store_sqlite_backend;
    *target = path;
    return 0;
}

int store_open_version(const char *url, int max_version, ts_store **out, ts_err *err)
{
    const struct store_backend *be = NULL;
    const char *target = NULL;
    *out = NULL;
    int rc = parse_url(url, &be, &target, err);
    if (rc)
        return rc;
    ts_store *s = calloc(1, sizeof *s);
    if (!s || !(s->target = strdup(target))) {
        free(s);
        return ts_err_set(err, TS_ENOMEM, "store: out of memory");
    }
    s->be = be;
    pthread_mutex_init(&s->qmu, NULL);
    pthread_cond_init(&s->qcv, NULL);
    pthread_cond_init(&s->donecv, NULL);
    pthread_mutex_init(&s->rmu, NULL);
    pthread_cond_init(&s->rcv, NULL);
    pthread_mutex_init(&s->lease_mu, NULL);
    rc = store_connect(be, s->target, true, &s->wconn, err);
    if (rc == 0)
        rc = store_migrate(s->wconn, max_version, &s->schema_version, err);
    if (rc == 0)
        rc = store_committer_start(s, err);
    if (rc) {
        ts_store_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

int ts_store_open(const char *url, ts_store **out, ts_err *err)
{
    return store_open_version(url, TS_SCHEMA_VERSION, out, err);
}

void ts_store_close(ts_store *s)
{
    if (!s)
        return;
    store_committer_stop(s);
    store_lease_fini(s);
    for (int i = 0; i < TS_STORE_READERS_MAX; i++)
        store_disconnect(s->readers[i]);
    store_disconnect(s->wconn);
    pthread_mutex_destroy(&s->qmu);
    pthread_cond_destroy(&s->qcv);
    pthread_cond_destroy(&s->donecv);
    pthread_mutex_destroy(&s->rmu);
    pthread_cond_destroy(&s->rcv);
    pthread_mutex_destroy(&s->lease_mu);
    free(s->target);
    free(s);
}

const char *ts_store_backend(const ts_store *s) { return s->be->name; }

int ts_store_schema_version(ts_store *s) { return s->schema_version; }

void ts_store_get_stats(ts_store *s, ts_store_stats *st)
{
    pthread_mutex_lock(&s->qmu);
    *st = s->stats;
    pthread_mutex_unlock(&s->qmu);
}

/* ---- the reader pool ---- */

/* Borrows an idle connection, or opens one in an empty slot, or waits. */
static int reader_get(ts_store *s, int *slot, ts_err *err)
{
    pthread_mutex_lock(&s->rmu);
    for (;;) {
        int empty = -1;
        for (int i = 0; i < TS_STORE_READERS_MAX; i++) {
            if (s->reader_busy[i])
                continue;
            if (s->readers[i]) {
                s->reader_busy[i] = true;
                pthread_mutex_unlock(&s->rmu);
                *slot = i;
                return 0;
            }
            if (empty < 0)
                empty = i;
        }
        if (empty >= 0) {
            s->reader_busy[empty] = true;
            pthread_mutex_unlock(&s->rmu);
            store_conn *conn = NULL;
            int rc = store_connect(s->be, s->target, false, &conn, err);
            pthread_mutex_lock(&s->rmu);
            if (rc) {
                s->reader_busy[empty] = false;
                pthread_cond_signal(&s->rcv);
                pthread_mutex_unlock(&s->rmu);
                return rc;
            }
            s->readers[empty] = conn;
            s->nreaders++;
            pthread_mutex_unlock(&s->rmu);
            *slot = empty;
            return 0;
        }
        pthread_cond_wait(&s->rcv, &s->rmu);
    }
}

static void reader_put(ts_store *s, int slot)
{
    store_conn *dead = NULL;
    pthread_mutex_lock(&s->rmu);
    if (!store_healthy(s->readers[slot])) {
        dead = s->readers[slot];
        s->readers[slot] = NULL;
        s->nreaders--;
    }
    s->reader_busy[slot] = false;
    pthread_cond_signal(&s->rcv);
    pthread_mutex_unlock(&s->rmu);
    store_disconnect(dead);
}

/* A read to run on a reader connection: which, its arguments, where its
 * answer goes (out: the row, the value or the rows' array; n: their count). */
enum read_kind {
    RD_SETTING,
    RD_JOB,
    RD_JOB_BY_IDEM,
    RD_ARRAYS,
    RD_RESVS,
    RD_JOBS,
    RD_COUNTS,
    RD_EVENTS,
    RD_TOKEN,
    RD_TOKENS,
    RD_USAGE,      /* rolled up */
    RD_USAGE_JOBS, /* the jobs' part of the full scan */
};
typedef struct store_read {
    enum read_kind kind;
    const char *key; /* a setting's key; the tenant of counts and tokens; an owner */
    const char *key2; /* an idempotency key */
    int64_t id;      /* a job's id (0: events about no job or of every job) */
    int64_t after_id;
    int limit;
    const ts_job_filter *filter;
    const uint8_t *hash;
    double from_s, to_s, now_s;
    void *out;
    int *n;
} store_read;

static int read_once(store_conn *c, const store_read *r, ts_err *err)
{
    switch (r->kind) {
    case RD_SETTING:
        return store_setting_get(c, r->key, r->out, err);
    case RD_JOB:
        return store_job_get(c, r->id, r->out, err);
    case RD_JOB_BY_IDEM:
        return store_job_by_idem(c, r->key, r->key2, r->out, err);
    case RD_ARRAYS:
        return store_arrays_open(c, r->out, r->n, err);
    case RD_RESVS:
        return store_resv_list(c, r->out, r->n, err);
    case RD_JOBS:
        return store_job_list(c, r->filter, r->after_id, r->limit, r->out, r->n, err);
    case RD_COUNTS:
        return store_job_counts(c, r->key, r->out, err);
    case RD_EVENTS:
        return store_event_list(c, r->id, r->after_id, r->limit, r->out, r->n, err);
    case RD_TOKEN:
        return store_token_by_hash(c, r->hash, r->out, err);
    case RD_TOKENS:
        return store_token_list(c, r->key, r->out, r->n, err);
    case RD_USAGE:
        return store_rollup_usage(c, r->from_s, r->to_s, r->now_s, r->out, r->n, err);
    case RD_USAGE_JOBS:
        return store_usage_jobs(c, r->from_s, r->to_s, r->now_s, r->out, r->n, err);
    }
    return ts_err_set(err, TS_EINVAL, "store: unknown read %d", (int)r->kind);
}

/* How often a read is tried: a read that failed because the server dropped
 * the session is run once more on a new one (reads change nothing, so
 * repeating one is safe). */
#define READ_ATTEMPTS 2

/* Runs r on a borrowed reader connection. */
static int reader_run(ts_store *s, const store_read *r, ts_err *err)
{
    int rc = 0;
    for (int attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
        int slot;
        if ((rc = reader_get(s, &slot, err)))
            return rc;
        store_conn *c = s->readers[slot];
        rc = read_once(c, r, err);
        bool dead = !store_healthy(c);
        reader_put(s, slot);
        if (rc == 0 || !dead)
            return rc;
    }
    return rc;
}

/* ---- writes ---- */

int ts_store_job_insert(ts_store *s, ts_job_row *row, bool *existed, ts_err *err)
{
    int rc = check_new_job(row, err);
    if (rc)
        return rc;
    ts_wop op = {.kind = TS_WOP_JOB_INSERT, .rows = row, .nrows = 1};
    rc = store_submit(s, &op, err);
    if (existed)
        *existed = rc == 0 && op.existed;
    if (rc)
        return rc;
    if (op.existed) {
        /* the caller's strings stay the caller's: only the pointers change */
        *row = op.stored;
    } else {
        row->id = op.id;
        row->gen = 1;
    }
    return 0;
}

/* Submits op (a TS_WOP_JOB_INSERTS of its rows), then gives each row its
 * id, or the stored job when its idempotency key was used before. */
static int submit_rows(ts_store *s, ts_wop *op, ts_job_row *rows, ts_err *err)
{
    for (int i = 0; i < op->nrows; i++)
        op->many_existed[i] = false;
    int rc = store_submit(s, op, err);
    for (int i = 0; i < op->nrows; i++) {
        if (rc == 0 && op->many_existed[i]) {
            rows[i] = op->many_stored[i];
        } else if (rc == 0) {
            rows[i].id = op->many_id[i];
            rows[i].gen = 1;
        } else {
            op->many_existed[i] = false;
            ts_job_row_fini(&op->many_stored[i]);
        }
    }
    return rc;
}

int ts_store_job_insert_many(ts_store *s, ts_job_row *rows, int n, bool *existed, ts_err *err)
{
    if (n < 1 || !rows || !existed)
        return ts_err_set(err, TS_EINVAL, "insert: rows, n >= 1 and existed are required");
    for (int i = 0; i < n; i++) {
        int rc = check_new_job(&rows[i], err);
        if (rc) {
            ts_err_prefix(err, "rows[%d]: ", i);
            return rc;
        }
    }
    int64_t *ids = calloc((size_t)n, sizeof *ids);
    ts_job_row *stored = calloc((size_t)n, sizeof *stored);
    if (!ids || !stored) {
        free(ids);
        free(stored);
        return ts_err_set(err, TS_ENOMEM, "insert: out of memory");
    }
    /* one op: the array is stored whole or not at all */
    ts_wop op = {.kind = TS_WOP_JOB_INSERTS, .rows = rows, .nrows = n, .many_id = ids,
                 .many_existed = existed, .many_stored = stored};
    int rc = submit_rows(s, &op, rows, err);
    free(ids);
    free(stored);
    return rc;
}

int ts_store_array_insert(ts_store *s, ts_job_row *rows, int n, bool *existed,
                          ts_array_row *array, ts_err *err)
{
    if (!array || array->size < 1 || array->next < 0 || array->next > array->size ||
        array->id < 0)
        return ts_err_set(err, TS_EINVAL, "array: size >= 1 and 0 <= next <= size are required");
    if (array->id == 0 && (n < 1 || rows[0].id != 0))
        return ts_err_set(err, TS_EINVAL, "array: a new array's first row must be new");
    for (int i = 0; i < n; i++)
        if (rows[i].id != 0 && (array->id == 0 || rows[i].id < array->id ||
                                rows[i].id >= array->id + array->size))
            return ts_err_set(err, TS_EINVAL, "rows[%d].id: %lld is not an id of array %lld", i,
                              (long long)rows[i].id, (long long)array->id);
    for (int i = 0; i < n; i++) {
        int rc = check_new_job(&rows[i], err);
        if (rc) {
            ts_err_prefix(err, "rows[%d]: ", i);
            return rc;
        }
    }
    int64_t *ids = calloc((size_t)n + 1, sizeof *ids);
    ts_job_row *stored = calloc((size_t)n + 1, sizeof *stored);
    if (!ids || !stored) {
        free(ids);
        free(stored);
        return ts_err_set(err, TS_ENOMEM, "insert: out of memory");
    }
    ts_wop op = {.kind = TS_WOP_JOB_INSERTS, .rows = rows, .nrows = n, .many_id = ids,
                 .many_existed = existed, .many_stored = stored, .array = array};
    int rc = submit_rows(s, &op, rows, err);
    if (rc == 0)
        array->id = op.array_id;
    free(ids);
    free(stored);
    return rc;
}

int ts_store_job_update(ts_store *s, ts_job_row *row, ts_err *err)
{
    return ts_store_apply(s, row, 1, NULL, 0, err);
}

int ts_store_apply(ts_store *s, ts_job_row *rows, int nrows, const ts_event_row *events,
                   int nevents, ts_err *err)
{
    if (nrows < 0 || nevents < 0 || (nrows && !rows) || (nevents && !events))
        return ts_err_set(err, TS_EINVAL, "apply: rows and events must match their counts");
    char what[32];
    for (int i = 0; i < nrows; i++) {
        if (nrows == 1 && !nevents)
            snprintf(what, sizeof what, "job");
        else
            snprintf(what, sizeof what, "rows[%d]", i);
        int rc = check_update(what, &rows[i], err);
        if (rc)
            return rc;
    }
    for (int i = 0; i < nevents; i++) {
        snprintf(what, sizeof what, "events[%d]", i);
        int rc = check_event(what, &events[i], err);
        if (rc)
            return rc;
    }
    if (nrows == 0 && nevents == 0)
        return 0;
    ts_wop op = {.kind = TS_WOP_JOB_UPDATES,
                 .rows = rows,
                 .nrows = nrows,
                 .events = events,
                 .nevents = nevents};
    int rc = store_submit(s, &op, err);
    if (rc == 0)
        for (int i = 0; i < nrows; i++)
            rows[i].gen++;
    return rc;
}

int ts_store_event_append(ts_store *s, const ts_event_row *ev, ts_err *err)
{
    int rc = check_event("event", ev, err);
    if (rc)
        return rc;
    ts_wop op = {.kind = TS_WOP_JOB_UPDATES, .events = ev, .nevents = 1};
    return store_submit(s, &op, err);
}

int ts_store_token_insert(ts_store *s, ts_token_row *row, ts_err *err)
{
    int rc;
    if ((rc = check_field("token", "name", row->name, sizeof row->name, true, err)) ||
        (rc = check_field("token", "tenant", row->tenant, sizeof row->tenant, false, err)) ||
        (rc = check_time("token", "created_s", row->created_s, err)) ||
        (rc = check_time("token", "revoked_s", row->revoked_s, err)))
        return rc;
    if (row->role < 0 || row->role >= ROLES)
        return ts_err_set(err, TS_EINVAL, "token.role: %d is not a role", row->role);
    ts_wop op = {.kind = TS_WOP_TOKEN_INSERT, .token = row};
    rc = store_submit(s, &op, err);
    if (rc == 0)
        row->id = op.id;
    return rc;
}

int ts_store_token_revoke(ts_store *s, const char *name, double now_s, ts_err *err)
{
    if (!name || !*name)
        return ts_err_set(err, TS_EINVAL, "token name: must not be empty");
    int rc = check_time("token", "revoked_s", now_s, err);
    if (rc)
        return rc;
    if (now_s <= 0)
        return ts_err_set(err, TS_EINVAL, "token.revoked_s: must be > 0");
    ts_wop op = {.kind = TS_WOP_TOKEN_REVOKE, .name = name, .now_s = now_s};
    return store_submit(s, &op, err);
}

int ts_store_tenants_put(ts_store *s, const char *yaml, ts_err *err)
{
    if (!yaml)
        return ts_err_set(err, TS_EINVAL, "tenants: the YAML document must not be NULL");
    ts_wop op = {.kind = TS_WOP_SETTING_PUT, .name = TS_SETTING_TENANTS, .value = yaml};
    return store_submit(s, &op, err);
}

int ts_store_setting_put(ts_store *s, const char *key, const char *value, ts_err *err)
{
    if (!key || !*key || !value || strcmp(key, TS_SETTING_TENANTS) == 0)
        return ts_err_set(err, TS_EINVAL, "setting: a key other than \"%s\" and a value are "
                          "required", TS_SETTING_TENANTS);
    ts_wop op = {.kind = TS_WOP_SETTING_PUT, .name = key, .value = value};
    return store_submit(s, &op, err);
}

int ts_store_setting_get(ts_store *s, const char *key, char **value, ts_err *err)
{
    *value = NULL;
    if (!key || !*key)
        return ts_err_set(err, TS_EINVAL, "setting: a key is required");
    store_read r = {.kind = RD_SETTING, .key = key, .out = value};
    return reader_run(s, &r, err);
}

/* ---- reads ---- */

int ts_store_job_get(ts_store *s, int64_t id, ts_job_row *out, ts_err *err)
{
    memset(out, 0, sizeof *out);
    if (id <= 0)
        return ts_err_set(err, TS_ENOENT, "job %lld: no such job", (long long)id);
    store_read r = {.kind = RD_JOB, .id = id, .out = out};
    return reader_run(s, &r, err);
}

int ts_store_job_by_idem(ts_store *s, const char *owner, const char *idem_key, int64_t *id,
                         ts_err *err)
{
    *id = 0;
    if (!owner || !idem_key || !*idem_key)
        return 0; /* no key: never a retry */
    store_read r = {.kind = RD_JOB_BY_IDEM, .key = owner, .key2 = idem_key, .out = id};
    return reader_run(s, &r, err);
}

int ts_store_arrays_open(ts_store *s, ts_array_row **rows, int *n, ts_err *err)
{
    *rows = NULL;
    *n = 0;
    store_read r = {.kind = RD_ARRAYS, .out = rows, .n = n};
    return reader_run(s, &r, err);
}

/* ---- reservations ---- */

int ts_store_resv_insert(ts_store *s, const ts_resv_row *r, ts_err *err)
{
    if (!r || !r->name[0] || !r->nodes[0])
        return ts_err_set(err, TS_EINVAL, "reservation: a name and nodes are required");
    if (!(r->end_s > r->start_s))
        return ts_err_set(err, TS_EINVAL, "reservation.end_s: must be after start_s");
    ts_wop op = {.kind = TS_WOP_RESV_INSERT, .resv = r};
    return store_submit(s, &op, err);
}

int ts_store_resv_delete(ts_store *s, const char *name, ts_err *err)
{
    if (!name || !*name)
        return ts_err_set(err, TS_EINVAL, "reservation name: must not be empty");
    ts_wop op = {.kind = TS_WOP_RESV_DELETE, .name = name};
    return store_submit(s, &op, err);
}

int ts_store_resv_list(ts_store *s, ts_resv_row **rows, int *n, ts_err *err)
{
    *rows = NULL;
    *n = 0;
    store_read r = {.kind = RD_RESVS, .out = rows, .n = n};
    return reader_run(s, &r, err);
}

int ts_store_job_list(ts_store *s, const ts_job_filter *f, int64_t after_id, int limit,
                      ts_job_row **rows, int *n, ts_err *err)
{
    *rows = NULL;
    *n = 0;
    int rc = check_limit(limit, err);
    if (rc)
        return rc;
    ts_job_filter any = {0};
    if (!f)
        f = &any;
    if (f->states & ~TS_JOB_STATES_ALL)
        return ts_err_set(err, TS_EINVAL, "filter.states: 0x%x names no job state",
                          f->states & ~TS_JOB_STATES_ALL);
    store_read r = {
        .kind = RD_JOBS, .filter = f, .after_id = after_id, .limit = limit, .out = rows, .n = n};
    return reader_run(s, &r, err);
}

int ts_store_job_counts(ts_store *s, const char *tenant, int64_t out[TS_JOB_STATES], ts_err *err)
{
    memset(out, 0, sizeof(int64_t) * TS_JOB_STATES);
    store_read r = {.kind = RD_COUNTS, .key = tenant, .out = out};
    return reader_run(s, &r, err);
}

int ts_store_event_list(ts_store *s, int64_t job_id, int64_t after_id, int limit,
                        ts_event_row **rows, int *n, ts_err *err)
{
    *rows = NULL;
    *n = 0;
    int rc = check_limit(limit, err);
    if (rc)
        return rc;
    store_read r = {.kind = RD_EVENTS,
                     .id = job_id,
                     .after_id = after_id,
                     .limit = limit,
                     .out = rows,
                     .n = n};
    return reader_run(s, &r, err);
}

int ts_store_token_by_hash(ts_store *s, const uint8_t hash[TS_TOKEN_HASH_BYTES],
                           ts_token_row *out, ts_err *err)
{
    memset(out, 0, sizeof *out);
    store_read r = {.kind = RD_TOKEN, .hash = hash, .out = out};
    return reader_run(s, &r, err);
}

int ts_store_token_list(ts_store *s, const char *tenant, ts_token_row **rows, int *n,
                        ts_err *err)
{
    *rows = NULL;
    *n = 0;
    store_read r = {.kind = RD_TOKENS, .key = tenant, .out = rows, .n = n};
    return reader_run(s, &r, err);
}

int ts_store_tenants_get(ts_store *s, char **yaml, ts_err *err)
{
    *yaml = NULL;
    store_read r = {.kind = RD_SETTING, .key = TS_SETTING_TENANTS, .out = yaml};
    return reader_run(s, &r, err);
}

static int usage_window(double from_s, double to_s, double *now_s, ts_err *err)
{
    if (!isfinite(from_s) || !isfinite(to_s) || from_s >= to_s)
        return ts_err_set(err, TS_EINVAL, "usage: window [%g, %g) must be finite and non-empty",
                          from_s, to_s);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    *now_s = (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
    return 0;
}

/* The rolled-up answer (RD_USAGE) or the jobs' part of the full scan
 * (RD_USAGE_JOBS) for the window, at now. */
static int usage_read(ts_store *s, enum read_kind kind, double from_s, double to_s,
                      ts_usage_row **rows, int *n, ts_err *err)
{
    *rows = NULL;
    *n = 0;
    store_read r = {.kind = kind, .from_s = from_s, .to_s = to_s, .out = rows, .n = n};
    int rc = usage_window(from_s, to_s, &r.now_s, err);
    return rc ? rc : reader_run(s, &r, err);
}

int ts_store_usage(ts_store *s, double from_s, double to_s, ts_usage_row **rows, int *n,
                   ts_err *err)
{
    if (s->schema_version < TS_SCHEMA_ROLLUP)
        return ts_store_usage_scan(s, from_s, to_s, rows, n, err);
    return usage_read(s, RD_USAGE, from_s, to_s, rows, n, err);
}

/* Adds a run-ended event's run, clipped to the window, to its group. */
static int scan_add(ts_usage_row **rows, int *n, int *cap, const char *tenant, int tier,
                    const char *model, double gpu_s)
{
    for (int i = 0; i < *n; i++)
        if ((*rows)[i].tier == tier && strcmp((*rows)[i].tenant, tenant) == 0 &&
            strcmp((*rows)[i].gpu_model, model) == 0) {
            (*rows)[i].gpu_s += gpu_s;
            return 0;
        }
    ts_usage_row *u = store_grow((void **)rows, *n, cap, sizeof **rows);
    if (!u)
        return TS_ENOMEM;
    memset(u, 0, sizeof *u);
    snprintf(u->tenant, sizeof u->tenant, "%s", tenant);
    u->tier = tier;
    snprintf(u->gpu_model, sizeof u->gpu_model, "%s", model);
    u->gpu_s = gpu_s;
    (*n)++;
    return 0;
}

int ts_store_usage_scan(ts_store *s, double from_s, double to_s, ts_usage_row **rows, int *n,
                        ts_err *err)
{
    int rc = usage_read(s, RD_USAGE_JOBS, from_s, to_s, rows, n, err);
    if (rc)
        return rc;
    int cap = *n;
    /* runs that ended without ending their job ("run-ended" events) */
    int64_t after = 0;
    for (;;) {
        ts_event_row *ev = NULL;
        int ne = 0;
        if ((rc = ts_store_event_list(s, 0, after, TS_STORE_LIST_MAX, &ev, &ne, err)))
            break;
        for (int i = 0; rc == 0 && i < ne; i++) {
            after = ev[i].id;
            ts_run_ended run;
            if (!ts_run_ended_parse(&ev[i], &run))
                continue;
            double lo = run.start_s > from_s ? run.start_s : from_s;
            double hi = run.end_s < to_s ? run.end_s : to_s;
            if (hi <= lo)
                continue;
            ts_job_row j;
            if (ts_store_job_get(s, ev[i].job_id, &j, NULL) != 0)
                continue;
            rc = scan_add(rows, n, &cap, j.tenant, run.tier, run.gpu_model, (hi - lo) * run.gpus);
            ts_job_row_fini(&j);
            if (rc)
                ts_err_set(err, rc, "store: out of memory computing usage");
        }
        ts_store_free_events(ev, ne);
        if (rc || ne < TS_STORE_LIST_MAX)
            break;
    }
    if (rc) {
        free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return rc;
}
