/*
 * store_sqlite.c - the embedded backend: one SQLite file in WAL mode.
 *
 * WAL lets the reader connections read the last committed state while the
 * committer writes, and makes a commit one sequential append to the log;
 * synchronous=FULL flushes that log at every commit, so an acknowledged
 * write survives power loss, not only a crash of the process. Groups take
 * the write lock at BEGIN (BEGIN IMMEDIATE): the committer never has to
 * upgrade a read lock, which under contention from another process is where
 * SQLite would fail with "database is locked" instead of waiting.
 *
 * Every statement is prepared once per connection, on first use, and kept;
 * job lists prepare one statement per combination of filters (16 at most),
 * assembled from fixed fragments, so values only ever travel as bound
 * parameters and each variant can use its own index.
 */
#include "store/store_internal.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long a connection waits for another process's lock before failing. */
#define BUSY_TIMEOUT_MS 10000

enum sq_stmt {
    SQ_BEGIN,
    SQ_COMMIT,
    SQ_ROLLBACK,
    SQ_SET_VERSION,
    SQ_JOB_INSERT,
    SQ_JOB_BY_IDEM,
    SQ_JOB_UPDATE,
    SQ_JOB_GEN,
    SQ_JOB_GET,
    SQ_COUNTS_ALL,
    SQ_COUNTS_TENANT,
    SQ_EVENT_INSERT,
    SQ_EVENTS_JOB,
    SQ_EVENTS_ALL,
    SQ_TOKEN_BY_NAME,
    SQ_TOKEN_INSERT,
    SQ_TOKEN_REVOKE,
    SQ_TOKEN_BY_HASH,
    SQ_TOKENS_ALL,
    SQ_TOKENS_TENANT,
    SQ_SETTING_PUT,
    SQ_SETTING_GET,
    SQ_USAGE,
    SQ_IDS_RESERVE,
    SQ_ARRAY_PUT,
    SQ_ARRAYS_OPEN,
    SQ_RESV_INSERT,
    SQ_RESV_DELETE,
    SQ_RESV_LIST,
    SQ_STMTS
};

#define JOB_COLS                                                                               \
    "id, tenant, name, owner, idem_key, state, tier, priority, gpus, gpu_model, submit_s, "    \
    "start_s, end_s, preemptions, reason, why, spec_json, placement_json, gen, result_json, "  \
    "run_user, run_uid"
#define TOKEN_COLS                                                                             \
    "id, name, role, tenant, hash, created_s, revoked_s, unix_user, uid, expires_s"
#define EVENT_COLS "id, job_id, t_s, kind, detail"
/* A job's end, or now while it runs; its running interval clipped to the
 * window [?1, ?2) starts at LO and ends at HI. */
#define USAGE_END "(CASE WHEN end_s > 0 THEN end_s ELSE ?3 END)"
#define USAGE_LO "MAX(start_s, ?1)"
#define USAGE_HI "MIN(" USAGE_END ", ?2)"

static const char *const sq_sql[SQ_STMTS] = {
    [SQ_BEGIN] = "BEGIN IMMEDIATE",
    [SQ_COMMIT] = "COMMIT",
    [SQ_ROLLBACK] = "ROLLBACK",
    [SQ_SET_VERSION] = "UPDATE schema_version SET version = ?1",
    [SQ_JOB_INSERT] =
        "INSERT INTO jobs (tenant, name, owner, idem_key, state, tier, priority, gpus, "
        "gpu_model, submit_s, start_s, end_s, preemptions, reason, why, spec_json, "
        "placement_json, gen, run_user, run_uid, id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
        "?9, ?10, ?11, ?12, ?13, "
        "?14, ?15, ?16, ?17, 1, ?18, ?19, ?20) ON CONFLICT (owner, idem_key) WHERE "
        "idem_key <> '' DO NOTHING RETURNING id",
    [SQ_JOB_BY_IDEM] = "SELECT id FROM jobs WHERE owner = ?1 AND idem_key = ?2 AND idem_key <> ''",
    [SQ_IDS_RESERVE] = "UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'jobs' AND seq < ?1",
    [SQ_ARRAY_PUT] = "INSERT INTO arrays (id, size, next, open) VALUES (?1, ?2, ?3, ?4) "
                     "ON CONFLICT (id) DO UPDATE SET next = excluded.next, open = excluded.open",
    [SQ_ARRAYS_OPEN] = "SELECT id, size, next FROM arrays WHERE open = 1 ORDER BY id",
    [SQ_RESV_INSERT] = "INSERT INTO reservations (name, nodes, start_s, end_s, tenant, users,"
                       " maintenance, created_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [SQ_RESV_DELETE] = "DELETE FROM reservations WHERE name = ?1",
    [SQ_RESV_LIST] = "SELECT name, nodes, start_s, end_s, tenant, users, maintenance, created_s"
                     " FROM reservations ORDER BY start_s, name",
    [SQ_JOB_UPDATE] = "UPDATE jobs SET state = ?3, submit_s = ?4, start_s = ?5, end_s = ?6, "
                      "preemptions = ?7, reason = ?8, why = ?9, placement_json = ?10, "
                      "gpu_model = ?11, result_json = ?12, spec_json = COALESCE(?13, spec_json), "
                      "priority = ?14, gpus = ?15, gen = gen + 1 WHERE id = ?1 AND gen = ?2",
    [SQ_JOB_GEN] = "SELECT gen FROM jobs WHERE id = ?1",
    [SQ_JOB_GET] = "SELECT " JOB_COLS " FROM jobs WHERE id = ?1",
    [SQ_COUNTS_ALL] = "SELECT state, COUNT(*) FROM jobs GROUP BY state",
    [SQ_COUNTS_TENANT] = "SELECT state, COUNT(*) FROM jobs WHERE tenant = ?1 GROUP BY state",
    [SQ_EVENT_INSERT] = "INSERT INTO events (job_id, t_s, kind, detail) VALUES (?1, ?2, ?3, ?4)",
    [SQ_EVENTS_JOB] = "SELECT " EVENT_COLS " FROM events WHERE job_id = ?1 AND id > ?2 "
                      "ORDER BY id LIMIT ?3",
    [SQ_EVENTS_ALL] = "SELECT " EVENT_COLS " FROM events WHERE id > ?2 ORDER BY id LIMIT ?3",
    [SQ_TOKEN_BY_NAME] = "SELECT revoked_s FROM tokens WHERE name = ?1",
    [SQ_TOKEN_INSERT] = "INSERT INTO tokens (name, role, tenant, hash, created_s, revoked_s, "
                        "unix_user, uid, expires_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                        "?8, ?9) RETURNING id",
    [SQ_TOKEN_REVOKE] = "UPDATE tokens SET revoked_s = ?2 WHERE name = ?1 AND revoked_s = 0",
    [SQ_TOKEN_BY_HASH] = "SELECT " TOKEN_COLS " FROM tokens WHERE hash = ?1 AND revoked_s = 0",
    [SQ_TOKENS_ALL] = "SELECT " TOKEN_COLS " FROM tokens ORDER BY id",
    [SQ_TOKENS_TENANT] = "SELECT " TOKEN_COLS " FROM tokens WHERE tenant = ?1 ORDER BY id",
    [SQ_SETTING_PUT] = "INSERT INTO settings (key, value) VALUES (?1, ?2) "
                       "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    [SQ_SETTING_GET] = "SELECT value FROM settings WHERE key = ?1",
    [SQ_USAGE] = "SELECT tenant, tier, gpu_model, SUM(gpus * (" USAGE_HI " - " USAGE_LO ")) "
                 "FROM jobs WHERE start_s > 0 AND start_s < ?2 AND " USAGE_HI " > " USAGE_LO
                 " GROUP BY tenant, tier, gpu_model ORDER BY tenant, tier, gpu_model",
};

/* Rolled-up accounting (store_usage.c, migration 8). */
#define RU_GROUP "tenant, tier, gpu_model"
static const char *const sq_ru_sql[TS_RU_STMTS] = {
    [TS_RU_RUN_OF_JOB] = "SELECT j.tenant, j.tier, j.gpu_model, j.gpus, j.start_s, j.end_s, "
                         "r.gpu_model, r.gpus, r.start_s, r.end_s FROM jobs j LEFT JOIN "
                         "usage_runs r ON r.job_id = j.id AND r.whole = 1 WHERE j.id = ?1",
    [TS_RU_RUN_DEL] = "DELETE FROM usage_runs WHERE job_id = ?1 AND whole = 1",
    [TS_RU_RUN_ADD] = "INSERT INTO usage_runs (job_id, tenant, tier, gpu_model, gpus, start_s, "
                      "end_s, whole, span) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                      "CAST(?8 AS INTEGER) & 1, CAST(?8 AS INTEGER) >> 1)",
    [TS_RU_BUCKET_ADD] = "INSERT INTO usage_buckets (span, tenant, tier, gpu_model, start_s, "
                         "gpu_s, carried, width_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
                         "?7, ?8) ON CONFLICT (span, width_s, start_s, " RU_GROUP ") "
                         "DO UPDATE SET "
                         "gpu_s = gpu_s + excluded.gpu_s, carried = carried + excluded.carried",
    [TS_RU_BUCKETS] = "SELECT " RU_GROUP ", SUM(gpu_s) FROM usage_buckets WHERE span = ?1 "
                      "AND width_s = ?2 AND start_s >= ?3 AND start_s < ?4 "
                      "GROUP BY " RU_GROUP,
    [TS_RU_EDGE_AT] = "SELECT " RU_GROUP ", gpu_s, carried FROM usage_buckets WHERE "
                      "span = ?1 AND width_s = ?2 AND start_s = ?3",
    [TS_RU_POINTS] = "SELECT " RU_GROUP ", SUM(gpus * (?3 - start_s)) FROM usage_runs WHERE "
                     "span = ?1 AND start_s >= ?2 AND start_s < ?3 GROUP BY " RU_GROUP " "
                     "UNION ALL SELECT " RU_GROUP ", -SUM(gpus * (?3 - end_s)) FROM usage_runs "
                     "WHERE span = ?1 AND end_s >= ?2 AND end_s < ?3 GROUP BY " RU_GROUP,
    [TS_RU_RUNNING] = "SELECT " RU_GROUP ", SUM(gpus * (MIN(?3, ?2) - MAX(start_s, ?1))) FROM "
                      "jobs WHERE start_s > 0 AND end_s <= 0 AND start_s < ?2 AND "
                      "MIN(?3, ?2) > MAX(start_s, ?1) GROUP BY " RU_GROUP,
    [TS_RU_OLD_JOBS] = "SELECT " RU_GROUP ", gpus, start_s, end_s, id FROM jobs "
                       "WHERE start_s > 0 AND end_s > 0",
    [TS_RU_OLD_RUNS] = ("SELECT j.tenant, e.detail, e.job_id FROM events e JOIN jobs j "
                       "ON j.id = e.job_id WHERE e.kind = 'run-ended'"),
    [TS_RU_READ_BEGIN] = "BEGIN",
    [TS_RU_READ_END] = "COMMIT",
};

/* Job-list filter bits: which fragments a variant has. */
enum { LF_TENANT = 1, LF_OWNER = 2, LF_STATE = 4, LF_ACTIVE = 8, LF_VARIANTS = 16 };

typedef struct sq_conn {
    sqlite3 *db;
    sqlite3_stmt *st[SQ_STMTS];
    sqlite3_stmt *list[LF_VARIANTS];
    sqlite3_stmt *ru[TS_RU_STMTS];
} sq_conn;

static int sq_fail(sq_conn *c, int code, const char *what, ts_err *err)
{
    int ts = code == SQLITE_NOMEM ? TS_ENOMEM
             : (code & 0xff) == SQLITE_CONSTRAINT ? TS_EEXIST
             : (code & 0xff) == SQLITE_BUSY       ? TS_ETIMEDOUT
                                                   : TS_EIO;
    return ts_err_set(err, ts, "sqlite: %s: %s", what, c && c->db ? sqlite3_errmsg(c->db)
                                                                  : sqlite3_errstr(code));
}

static int sq_prepare_text(sq_conn *c, const char *sql, sqlite3_stmt **st, ts_err *err)
{
    int rc = sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
    return rc == SQLITE_OK ? 0 : sq_fail(c, rc, "prepare", err);
}

/* The cached statement, reset and unbound, ready for binding. */
static int sq_stmt(sq_conn *c, enum sq_stmt which, sqlite3_stmt **st, ts_err *err)
{
    int rc;
    if (!c->st[which] && (rc = sq_prepare_text(c, sq_sql[which], &c->st[which], err)))
        return rc;
    *st = c->st[which];
    sqlite3_reset(*st);
    sqlite3_clear_bindings(*st);
    return 0;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

/* Steps a statement that returns no rows (or whose rows are ignored). */
static int sq_run(sq_conn *c, sqlite3_stmt *st, const char *what, ts_err *err)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        ;
    int ret = rc == SQLITE_DONE ? 0 : sq_fail(c, rc, what, err);
    sqlite3_reset(st);
    return ret;
}

static char *col_strdup(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? strdup((const char *)t) : NULL;
}

static void col_field(sqlite3_stmt *st, int i, char *dst, size_t cap)
{
    const char *t = (const char *)sqlite3_column_text(st, i);
    ts_store_copy_field(dst, cap, t, t ? (size_t)sqlite3_column_bytes(st, i) : 0);
}

static int read_job(sqlite3_stmt *st, ts_job_row *r, ts_err *err)
{
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    col_field(st, 1, r->tenant, sizeof r->tenant);
    col_field(st, 2, r->name, sizeof r->name);
    col_field(st, 3, r->owner, sizeof r->owner);
    col_field(st, 4, r->idem_key, sizeof r->idem_key);
    r->state = sqlite3_column_int(st, 5);
    r->tier = sqlite3_column_int(st, 6);
    r->priority = sqlite3_column_int(st, 7);
    r->gpus = sqlite3_column_int(st, 8);
    col_field(st, 9, r->gpu_model, sizeof r->gpu_model);
    r->submit_s = sqlite3_column_double(st, 10);
    r->start_s = sqlite3_column_double(st, 11);
    r->end_s = sqlite3_column_double(st, 12);
    r->preemptions = sqlite3_column_int(st, 13);
    col_field(st, 14, r->reason, sizeof r->reason);
    bool why_null = sqlite3_column_type(st, 15) == SQLITE_NULL;
    bool place_null = sqlite3_column_type(st, 17) == SQLITE_NULL;
    bool result_null = sqlite3_column_type(st, 19) == SQLITE_NULL;
    r->why = col_strdup(st, 15);
    r->spec_json = col_strdup(st, 16);
    if (!r->spec_json)
        r->spec_json = strdup("");
    r->placement_json = col_strdup(st, 17);
    r->gen = sqlite3_column_int64(st, 18);
    r->result_json = col_strdup(st, 19);
    col_field(st, 20, r->run_user, sizeof r->run_user);
    r->run_uid = sqlite3_column_int64(st, 21);
    if (!r->spec_json || (!why_null && !r->why) || (!place_null && !r->placement_json) ||
        (!result_null && !r->result_json)) {
        ts_job_row_fini(r);
        return ts_err_set(err, TS_ENOMEM, "store: out of memory reading job %lld",
                          (long long)r->id);
    }
    return 0;
}

static void read_token(sqlite3_stmt *st, ts_token_row *t)
{
    memset(t, 0, sizeof *t);
    t->id = sqlite3_column_int64(st, 0);
    col_field(st, 1, t->name, sizeof t->name);
    t->role = sqlite3_column_int(st, 2);
    col_field(st, 3, t->tenant, sizeof t->tenant);
    int nb = sqlite3_column_bytes(st, 4);
    const void *b = sqlite3_column_blob(st, 4);
    if (b)
        memcpy(t->hash, b, nb < TS_TOKEN_HASH_BYTES ? (size_t)nb : TS_TOKEN_HASH_BYTES);
    t->created_s = sqlite3_column_double(st, 5);
    t->revoked_s = sqlite3_column_double(st, 6);
    col_field(st, 7, t->unix_user, sizeof t->unix_user);
    t->uid = sqlite3_column_int64(st, 8);
    t->expires_s = sqlite3_column_double(st, 9);
}

/* ---- connections and schema ---- */

static void sq_disconnect(void *conn)
{
    sq_conn *c = conn;
    if (!c)
        return;
    for (int i = 0; i < SQ_STMTS; i++)
        sqlite3_finalize(c->st[i]);
    for (int i = 0; i < LF_VARIANTS; i++)
        sqlite3_finalize(c->list[i]);
    for (int i = 0; i < TS_RU_STMTS; i++)
        sqlite3_finalize(c->ru[i]);
    sqlite3_close(c->db);
    free(c);
}

static int sq_exec_script(void *conn, const char *sql, ts_err *err)
{
    sq_conn *c = conn;
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : sq_fail(c, rc, "exec", err);
}

static int sq_connect(const char *target, bool writer, void **out, ts_err *err)
{
    *out = NULL;
    sq_conn *c = calloc(1, sizeof *c);
    if (!c)
        return ts_err_set(err, TS_ENOMEM, "store: out of memory");
    /* one thread at a time per connection, so SQLite's own mutexes are spared */
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (writer ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(target, &c->db, flags, NULL);
    if (rc != SQLITE_OK) {
        int code = rc == SQLITE_NOMEM ? TS_ENOMEM : TS_EIO;
        ts_err_set(err, code, "sqlite: open %s: %s", target,
                   c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
        sq_disconnect(c);
        return code;
    }
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
    if (writer) {
        /* journal_mode answers with the mode in force: "wal" or a refusal */
        sqlite3_stmt *st = NULL;
        rc = sqlite3_prepare_v2(c->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
        bool wal = rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
                   sqlite3_column_text(st, 0) &&
                   strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
        sqlite3_finalize(st);
        if (!wal) {
            ts_err_set(err, TS_EIO, "sqlite: %s: cannot switch to WAL mode: %s", target,
                       sqlite3_errmsg(c->db));
            sq_disconnect(c);
            return TS_EIO;
        }
        rc = sq_exec_script(c, "PRAGMA synchronous=FULL", err);
    } else {
        rc = sq_exec_script(c, "PRAGMA query_only=1", err);
    }
    if (rc) {
        sq_disconnect(c);
        return rc;
    }
    *out = c;
    return 0;
}

static bool sq_healthy(void *conn) { return conn != NULL; }

static int sq_query_int(void *conn, const char *sql, int64_t *out, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(c->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return sq_fail(c, rc, "query", err);
    rc = sqlite3_step(st);
    int ret;
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        *out = sqlite3_column_int64(st, 0);
        ret = 0;
    } else if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
        ret = ts_err_set(err, TS_ENOENT, "sqlite: query: no value");
    } else {
        ret = sq_fail(c, rc, "query", err);
    }
    sqlite3_finalize(st);
    return ret;
}

static int sq_simple(void *conn, enum sq_stmt which, const char *what, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, which, &st, err);
    return rc ? rc : sq_run(c, st, what, err);
}

static int sq_begin(void *conn, ts_err *err) { return sq_simple(conn, SQ_BEGIN, "begin", err); }
static int sq_commit(void *conn, ts_err *err) { return sq_simple(conn, SQ_COMMIT, "commit", err); }

static void sq_rollback(void *conn)
{
    sq_conn *c = conn;
    /* after some errors SQLite has already rolled back: nothing to undo */
    if (!sqlite3_get_autocommit(c->db))
        sq_simple(conn, SQ_ROLLBACK, "rollback", NULL);
}

static int sq_set_version(void *conn, int version, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, SQ_SET_VERSION, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int(st, 1, version);
    return sq_run(c, st, "schema_version", err);
}

/* ---- writes ---- */

static int sq_job_insert(void *conn, const ts_job_row *r, int64_t *id, bool *existed,
                         ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, SQ_JOB_INSERT, &st, err);
    if (rc)
        return rc;
    bind_text(st, 1, r->tenant);
    bind_text(st, 2, r->name);
    bind_text(st, 3, r->owner);
    bind_text(st, 4, r->idem_key);
    sqlite3_bind_int(st, 5, r->state);
    sqlite3_bind_int(st, 6, r->tier);
    sqlite3_bind_int(st, 7, r->priority);
    sqlite3_bind_int(st, 8, r->gpus);
    bind_text(st, 9, r->gpu_model);
    sqlite3_bind_double(st, 10, r->submit_s);
    sqlite3_bind_double(st, 11, r->start_s);
    sqlite3_bind_double(st, 12, r->end_s);
    sqlite3_bind_int(st, 13, r->preemptions);
    bind_text(st, 14, r->reason);
    bind_text(st, 15, r->why);
    bind_text(st, 16, r->spec_json);
    bind_text(st, 17, r->placement_json);
    bind_text(st, 18, r->run_user);
    sqlite3_bind_int64(st, 19, r->run_uid);
    if (r->id > 0) /* an array's element, on the id its array reserved */
        sqlite3_bind_int64(st, 20, r->id);
    else
        sqlite3_bind_null(st, 20);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *id = sqlite3_column_int64(st, 0);
        *existed = false;
        return sq_run(c, st, "insert job", err);
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return sq_fail(c, rc, "insert job", err);
    /* nothing inserted: the owner used this idempotency key before */
    if ((rc = sq_stmt(c, SQ_JOB_BY_IDEM, &st, err)))
        return rc;
    bind_text(st, 1, r->owner);
    bind_text(st, 2, r->idem_key);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *id = sqlite3_column_int64(st, 0);
        *existed = true;
        sqlite3_reset(st);
        return 0;
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE
               ? ts_err_set(err, TS_EIO, "sqlite: insert job: idempotency key conflict "
                                         "without a stored job")
               : sq_fail(c, rc, "insert job", err);
}

static int sq_job_update(void *conn, const ts_job_row *r, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, SQ_JOB_UPDATE, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, r->id);
    sqlite3_bind_int64(st, 2, r->gen);
    sqlite3_bind_int(st, 3, r->state);
    sqlite3_bind_double(st, 4, r->submit_s);
    sqlite3_bind_double(st, 5, r->start_s);
    sqlite3_bind_double(st, 6, r->end_s);
    sqlite3_bind_int(st, 7, r->preemptions);
    bind_text(st, 8, r->reason);
    bind_text(st, 9, r->why);
    bind_text(st, 10, r->placement_json);
    bind_text(st, 11, r->gpu_model);
    bind_text(st, 12, r->result_json);
    bind_text(st, 13, r->spec_json); /* NULL: unchanged (only an update of the job's spec) */
    sqlite3_bind_int(st, 14, r->priority);
    sqlite3_bind_int(st, 15, r->gpus);
    if ((rc = sq_run(c, st, "update job", err)))
        return rc;
    if (sqlite3_changes(c->db) == 1)
        return 0;
    if ((rc = sq_stmt(c, SQ_JOB_GEN, &st, err)))
        return rc;
    sqlite3_bind_int64(st, 1, r->id);
    rc = sqlite3_step(st);
    int64_t gen = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    if (rc == SQLITE_ROW)
        return ts_err_set(err, TS_ECONFLICT,
                          "job %lld: gen %lld is stale (the store has %lld): updated by "
                          "someone else since it was read",
                          (long long)r->id, (long long)r->gen, (long long)gen);
    if (rc == SQLITE_DONE)
        return ts_err_set(err, TS_ENOENT, "job %lld: no such job", (long long)r->id);
    return sq_fail(c, rc, "update job", err);
}

static int sq_event_append(void *conn, const ts_event_row *ev, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, SQ_EVENT_INSERT, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, ev->job_id);
    sqlite3_bind_double(st, 2, ev->t_s);
    bind_text(st, 3, ev->kind);
    bind_text(st, 4, ev->detail);
    return sq_run(c, st, "append event", err);
}

/* The token's revoked_s, TS_ENOENT if there is no token of that name. */
static int token_revoked_s(sq_conn *c, const char *name, double *revoked_s, ts_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, SQ_TOKEN_BY_NAME, &st, err);
    if (rc)
        return rc;
    bind_text(st, 1, name);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *revoked_s = sqlite3_column_double(st, 0);
    sqlite3_reset(st);
    if (rc == SQLITE_ROW)
        return 0;
    if (rc == SQLITE_DONE)
        return ts_err_set(err, TS_ENOENT, "token '%s': no such token", name);
    return sq_fail(c, rc, "token", err);
}

static int sq_token_insert(void *conn, const ts_token_row *t, int64_t *id, ts_err *err)
{
    sq_conn *c = conn;
    double revoked;
    int rc = token_revoked_s(c, t->name, &revoked, NULL);
    if (rc == 0)
        return ts_err_set(err, TS_EEXIST, "token '%s': name already taken", t->name);
    if (rc != TS_ENOENT)
        return token_revoked_s(c, t->name, &revoked, err);
    sqlite3_stmt *st = NULL;
    if ((rc = sq_stmt(c, SQ_TOKEN_INSERT, &st, err)))
        return rc;
    bind_text(st, 1, t->name);
    sqlite3_bind_int(st, 2, t->role);
    bind_text(st, 3, t->tenant);
    sqlite3_bind_blob(st, 4, t->hash, TS_TOKEN_HASH_BYTES, SQLITE_STATIC);
    sqlite3_bind_double(st, 5, t->created_s);
    sqlite3_bind_double(st, 6, t->revoked_s);
    bind_text(st, 7, t->unix_user);
    sqlite3_bind_int64(st, 8, t->uid);
    sqlite3_bind_double(st, 9, t->expires_s);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *id = sqlite3_column_int64(st, 0);
        return sq_run(c, st, "insert token", err);
    }
    sqlite3_reset(st);
    if ((rc & 0xff) == SQLITE_CONSTRAINT)
        return ts_err_set(err, TS_EEXIST, "token '%s': hash already used by another token",
                          t->name);
    return sq_fail(c, rc, "insert token", err);
}

static int sq_token_revoke(void *conn, const char *name, double now_s, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, SQ_TOKEN_REVOKE, &st, err);
    if (rc)
        return rc;
    bind_text(st, 1, name);
    sqlite3_bind_double(st, 2, now_s);
    if ((rc = sq_run(c, st, "revoke token", err)))
        return rc;
    if (sqlite3_changes(c->db) == 1)
        return 0;
    /* revoked before (the first time stands), or no such token */
    double revoked;
    return token_revoked_s(c, name, &revoked, err);
}

static int sq_setting_put(void *conn, const char *key, const char *value, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, SQ_SETTING_PUT, &st, err);
    if (rc)
        return rc;
    bind_text(st, 1, key);
    bind_text(st, 2, value);
    return sq_run(c, st, "put setting", err);
}

static int sq_ids_reserve(void *conn, int64_t last, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, SQ_IDS_RESERVE, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, last);
    return sq_run(c, st, "reserve ids", err);
}

static int sq_array_put(void *conn, const ts_array_row *a, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, SQ_ARRAY_PUT, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, a->id);
    sqlite3_bind_int(st, 2, a->size);
    sqlite3_bind_int(st, 3, a->next);
    sqlite3_bind_int(st, 4, a->open ? 1 : 0);
    return sq_run(c, st, "put array", err);
}

/* ---- reads ---- */

static int sq_arrays_open(void *conn, ts_array_row **rows, int *n, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    *rows = NULL;
    *n = 0;
    int rc = sq_stmt(c, SQ_ARRAYS_OPEN, &st, err), cap = 0;
    if (rc)
        return rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ts_array_row *a = ts_store_grow((void **)rows, *n, &cap, sizeof **rows);
        if (!a) {
            sqlite3_reset(st);
            return ts_err_set(err, TS_ENOMEM, "store: out of memory listing arrays");
        }
        *a = (ts_array_row){.id = sqlite3_column_int64(st, 0),
                            .size = sqlite3_column_int(st, 1),
                            .next = sqlite3_column_int(st, 2),
                            .open = true};
        (*n)++;
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : sq_fail(c, rc, "list arrays", err);
}

static int sq_resv_insert(void *conn, const ts_resv_row *r, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, SQ_RESV_INSERT, &st, err);
    if (rc)
        return rc;
    bind_text(st, 1, r->name);
    bind_text(st, 2, r->nodes);
    sqlite3_bind_double(st, 3, r->start_s);
    sqlite3_bind_double(st, 4, r->end_s);
    bind_text(st, 5, r->tenant);
    bind_text(st, 6, r->users);
    sqlite3_bind_int(st, 7, r->maintenance ? 1 : 0);
    sqlite3_bind_double(st, 8, r->created_s);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc == SQLITE_DONE)
        return 0;
    if (rc == SQLITE_CONSTRAINT)
        return ts_err_set(err, TS_EEXIST, "reservation \"%s\": exists", r->name);
    return sq_fail(c, rc, "insert reservation", err);
}

static int sq_resv_delete(void *conn, const char *name, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, SQ_RESV_DELETE, &st, err);
    if (rc)
        return rc;
    bind_text(st, 1, name);
    if ((rc = sq_run(c, st, "delete reservation", err)))
        return rc;
    return sqlite3_changes(c->db) == 1
               ? 0
               : ts_err_set(err, TS_ENOENT, "reservation \"%s\": no such reservation", name);
}

static int sq_resv_list(void *conn, ts_resv_row **rows, int *n, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    *rows = NULL;
    *n = 0;
    int rc = sq_stmt(c, SQ_RESV_LIST, &st, err), cap = 0;
    if (rc)
        return rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ts_resv_row *r = ts_store_grow((void **)rows, *n, &cap, sizeof **rows);
        if (!r) {
            sqlite3_reset(st);
            return ts_err_set(err, TS_ENOMEM, "store: out of memory listing reservations");
        }
        memset(r, 0, sizeof *r);
        col_field(st, 0, r->name, sizeof r->name);
        col_field(st, 1, r->nodes, sizeof r->nodes);
        r->start_s = sqlite3_column_double(st, 2);
        r->end_s = sqlite3_column_double(st, 3);
        col_field(st, 4, r->tenant, sizeof r->tenant);
        col_field(st, 5, r->users, sizeof r->users);
        r->maintenance = sqlite3_column_int(st, 6) != 0;
        r->created_s = sqlite3_column_double(st, 7);
        (*n)++;
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : sq_fail(c, rc, "list reservations", err);
}

static int sq_job_get(void *conn, int64_t id, ts_job_row *out, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, SQ_JOB_GET, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    rc = sqlite3_step(st);
    int ret = rc == SQLITE_ROW    ? read_job(st, out, err)
              : rc == SQLITE_DONE ? ts_err_set(err, TS_ENOENT, "job %lld: no such job",
                                               (long long)id)
                                  : sq_fail(c, rc, "get job", err);
    sqlite3_reset(st);
    return ret;
}

static int list_stmt(sq_conn *c, int mask, sqlite3_stmt **st, ts_err *err)
{
    if (!c->list[mask]) {
        char sql[512];
        int p = 2; /* ?1 is after_id */
        char tn[32] = "", on[32] = "", sn[32] = "";
        if (mask & LF_TENANT)
            snprintf(tn, sizeof tn, " AND tenant = ?%d", p++);
        if (mask & LF_OWNER)
            snprintf(on, sizeof on, " AND owner = ?%d", p++);
        if (mask & LF_STATE)
            snprintf(sn, sizeof sn, " AND state = ?%d", p++);
        snprintf(sql, sizeof sql, "SELECT " JOB_COLS " FROM jobs WHERE id > ?1%s%s%s%s "
                 "ORDER BY id LIMIT ?%d",
                 tn, on, sn, mask & LF_ACTIVE ? " AND state IN (0, 1, 2, 3)" : "", p);
        int rc = sq_prepare_text(c, sql, &c->list[mask], err);
        if (rc)
            return rc;
    }
    *st = c->list[mask];
    sqlite3_reset(*st);
    sqlite3_clear_bindings(*st);
    return 0;
}

static int sq_job_list(void *conn, const ts_job_filter *f, int64_t after_id, int limit,
                       ts_job_row **rows, int *n, ts_err *err)
{
    sq_conn *c = conn;
    int mask = (f->tenant ? LF_TENANT : 0) | (f->owner ? LF_OWNER : 0) |
               (f->state >= 0 ? LF_STATE : 0) | (f->active_only ? LF_ACTIVE : 0);
    sqlite3_stmt *st = NULL;
    int rc = list_stmt(c, mask, &st, err);
    if (rc)
        return rc;
    int p = 1;
    sqlite3_bind_int64(st, p++, after_id);
    if (f->tenant)
        bind_text(st, p++, f->tenant);
    if (f->owner)
        bind_text(st, p++, f->owner);
    if (f->state >= 0)
        sqlite3_bind_int(st, p++, f->state);
    sqlite3_bind_int(st, p, limit);
    int cap = 0, ret = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ts_job_row *r = ts_store_grow((void **)rows, *n, &cap, sizeof **rows);
        if (!r) {
            ret = ts_err_set(err, TS_ENOMEM, "store: out of memory listing jobs");
            break;
        }
        if ((ret = read_job(st, r, err)))
            break;
        (*n)++;
    }
    if (ret == 0 && rc != SQLITE_DONE)
        ret = sq_fail(c, rc, "list jobs", err);
    sqlite3_reset(st);
    if (ret) {
        ts_store_free_jobs(*rows, *n);
        *rows = NULL;
        *n = 0;
    }
    return ret;
}

static int sq_job_counts(void *conn, const char *tenant, int64_t out[TS_JOB_STATES],
                         ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, tenant ? SQ_COUNTS_TENANT : SQ_COUNTS_ALL, &st, err);
    if (rc)
        return rc;
    if (tenant)
        bind_text(st, 1, tenant);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int state = sqlite3_column_int(st, 0);
        if (state >= 0 && state < TS_JOB_STATES)
            out[state] = sqlite3_column_int64(st, 1);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : sq_fail(c, rc, "count jobs", err);
}

static int sq_event_list(void *conn, int64_t job_id, int64_t after_id, int limit,
                         ts_event_row **rows, int *n, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, job_id != 0 ? SQ_EVENTS_JOB : SQ_EVENTS_ALL, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, job_id > 0 ? job_id : 0); /* TS_EVENTS_NO_JOB: job_id 0 */
    sqlite3_bind_int64(st, 2, after_id);
    sqlite3_bind_int(st, 3, limit);
    int cap = 0, ret = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ts_event_row *e = ts_store_grow((void **)rows, *n, &cap, sizeof **rows);
        if (!e) {
            ret = ts_err_set(err, TS_ENOMEM, "store: out of memory listing events");
            break;
        }
        memset(e, 0, sizeof *e);
        e->id = sqlite3_column_int64(st, 0);
        e->job_id = sqlite3_column_int64(st, 1);
        e->t_s = sqlite3_column_double(st, 2);
        col_field(st, 3, e->kind, sizeof e->kind);
        bool null = sqlite3_column_type(st, 4) == SQLITE_NULL;
        e->detail = col_strdup(st, 4);
        (*n)++;
        if (!null && !e->detail) {
            ret = ts_err_set(err, TS_ENOMEM, "store: out of memory listing events");
            break;
        }
    }
    if (ret == 0 && rc != SQLITE_DONE)
        ret = sq_fail(c, rc, "list events", err);
    sqlite3_reset(st);
    if (ret) {
        ts_store_free_events(*rows, *n);
        *rows = NULL;
        *n = 0;
    }
    return ret;
}

static int sq_token_by_hash(void *conn, const uint8_t hash[TS_TOKEN_HASH_BYTES],
                            ts_token_row *out, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, SQ_TOKEN_BY_HASH, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_blob(st, 1, hash, TS_TOKEN_HASH_BYTES, SQLITE_STATIC);
    rc = sqlite3_step(st);
    int ret = 0;
    if (rc == SQLITE_ROW)
        read_token(st, out);
    else if (rc == SQLITE_DONE)
        ret = ts_err_set(err, TS_ENOENT, "token: no live token with this secret");
    else
        ret = sq_fail(c, rc, "token by hash", err);
    sqlite3_reset(st);
    return ret;
}

static int sq_token_list(void *conn, const char *tenant, ts_token_row **rows, int *n,
                         ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, tenant ? SQ_TOKENS_TENANT : SQ_TOKENS_ALL, &st, err);
    if (rc)
        return rc;
    if (tenant)
        bind_text(st, 1, tenant);
    int cap = 0, ret = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ts_token_row *t = ts_store_grow((void **)rows, *n, &cap, sizeof **rows);
        if (!t) {
            ret = ts_err_set(err, TS_ENOMEM, "store: out of memory listing tokens");
            break;
        }
        read_token(st, t);
        (*n)++;
    }
    if (ret == 0 && rc != SQLITE_DONE)
        ret = sq_fail(c, rc, "list tokens", err);
    sqlite3_reset(st);
    if (ret) {
        free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return ret;
}

static int sq_setting_get(void *conn, const char *key, char **value, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, SQ_SETTING_GET, &st, err);
    if (rc)
        return rc;
    bind_text(st, 1, key);
    rc = sqlite3_step(st);
    int ret = 0;
    if (rc == SQLITE_ROW) {
        *value = col_strdup(st, 0);
        if (!*value)
            ret = ts_err_set(err, TS_ENOMEM, "store: out of memory reading %s", key);
    } else if (rc != SQLITE_DONE) {
        ret = sq_fail(c, rc, "get setting", err);
    }
    sqlite3_reset(st);
    return ret;
}

static int sq_usage(void *conn, double from_s, double to_s, double now_s, ts_usage_row **rows,
                    int *n, ts_err *err)
{
    sq_conn *c = conn;
    sqlite3_stmt *st = NULL;
    int rc = sq_stmt(c, SQ_USAGE, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_double(st, 1, from_s);
    sqlite3_bind_double(st, 2, to_s);
    sqlite3_bind_double(st, 3, now_s);
    int cap = 0, ret = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ts_usage_row *u = ts_store_grow((void **)rows, *n, &cap, sizeof **rows);
        if (!u) {
            ret = ts_err_set(err, TS_ENOMEM, "store: out of memory computing usage");
            break;
        }
        memset(u, 0, sizeof *u);
        col_field(st, 0, u->tenant, sizeof u->tenant);
        u->tier = sqlite3_column_int(st, 1);
        col_field(st, 2, u->gpu_model, sizeof u->gpu_model);
        u->gpu_s = sqlite3_column_double(st, 3);
        (*n)++;
    }
    if (ret == 0 && rc != SQLITE_DONE)
        ret = sq_fail(c, rc, "usage", err);
    sqlite3_reset(st);
    if (ret) {
        free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return ret;
}

static int sq_rollup(void *conn, int stmt, const ts_ru_args *a, ts_ru_row_fn fn, void *ctx,
                     ts_err *err)
{
    sq_conn *c = conn;
    int rc;
    if (!c->ru[stmt] && (rc = sq_prepare_text(c, sq_ru_sql[stmt], &c->ru[stmt], err)))
        return rc;
    sqlite3_stmt *st = c->ru[stmt];
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    const char *p = TS_RU_SHAPES[stmt][0], *cols = TS_RU_SHAPES[stmt][1];
    for (int i = 0; p[i]; i++) {
        char k = p[i];
        if (k == 'j')
            sqlite3_bind_int64(st, i + 1, a->job);
        else if (k == 't')
            bind_text(st, i + 1, a->tenant);
        else if (k == 'i')
            sqlite3_bind_int64(st, i + 1, a->tier);
        else if (k == 's')
            sqlite3_bind_int64(st, i + 1, a->span);
        else if (k == 'm')
            bind_text(st, i + 1, a->model);
        else
            sqlite3_bind_double(st, i + 1, a->d[k - '0']);
    }
    int ret = 0;
    ts_ru_row row;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (!fn)
            continue;
        memset(&row, 0, sizeof row);
        for (int i = 0, nt = 0, nv = 0; cols[i]; i++) {
            if (cols[i] == 't')
                col_field(st, i, row.text[nt++], sizeof row.text[0]);
            else if (cols[i] == 'i')
                row.i = sqlite3_column_int64(st, i);
            else
                row.v[nv++] = sqlite3_column_double(st, i);
        }
        if ((ret = fn(ctx, &row, err)))
            break;
    }
    if (ret == 0 && rc != SQLITE_DONE)
        ret = sq_fail(c, rc, "rolled-up usage", err);
    sqlite3_reset(st);
    return ret;
}

const struct ts_store_ops ts_store_sqlite_ops = {
    .name = "sqlite",
    .connect = sq_connect,
    .disconnect = sq_disconnect,
    .healthy = sq_healthy,
    .exec_script = sq_exec_script,
    .query_int = sq_query_int,
    .begin_exclusive = sq_begin,
    .set_version = sq_set_version,
    .begin = sq_begin,
    .commit = sq_commit,
    .rollback = sq_rollback,
    .job_insert = sq_job_insert,
    .job_update = sq_job_update,
    .event_append = sq_event_append,
    .token_insert = sq_token_insert,
    .token_revoke = sq_token_revoke,
    .setting_put = sq_setting_put,
    .ids_reserve = sq_ids_reserve,
    .array_put = sq_array_put,
    .arrays_open = sq_arrays_open,
    .resv_insert = sq_resv_insert,
    .resv_delete = sq_resv_delete,
    .resv_list = sq_resv_list,
    .job_get = sq_job_get,
    .job_list = sq_job_list,
    .job_counts = sq_job_counts,
    .event_list = sq_event_list,
    .token_by_hash = sq_token_by_hash,
    .token_list = sq_token_list,
    .setting_get = sq_setting_get,
    .usage = sq_usage,
    .rollup = sq_rollup,
};
