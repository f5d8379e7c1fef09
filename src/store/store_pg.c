/*
 * store_pg.c - the PostgreSQL backend, through libpq.
 *
 * For sites that already run PostgreSQL (backups, replicas, a controller
 * that can move between hosts). The committer owns one session; each
 * reader in the pool is a session of its own. Values only ever travel as
 * parameters of statements prepared once per session (named "ts_N", on
 * first use): never spliced into SQL text. Numbers go as text (doubles with
 * 17 significant digits, read back with extra_float_digits=3, so a time
 * round-trips exactly), token hashes as binary bytea.
 *
 * A COMMIT returns once PostgreSQL has flushed its WAL (synchronous_commit
 * is forced on for the session, whatever the server default). A session the
 * server dropped is reset before the next group; its prepared statements
 * went with it, so they are prepared again. libpq's notices (e.g. "relation
 * already exists, skipping") are swallowed: the library never prints.
 */
#include "store/store_internal.h"

#include <libpq-fe.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Key of the advisory lock that serialises migrations across processes
 * (ASCII "tssm"). */
#define MIGRATION_LOCK_KEY 0x7473736d
#define PG_PARAMS_MAX 20

enum pg_stmt {
    PG_SET_VERSION,
    PG_JOB_INSERT,
    PG_JOB_BY_IDEM,
    PG_JOB_UPDATE,
    PG_JOB_GEN,
    PG_JOB_GET,
    PG_COUNTS_ALL,
    PG_COUNTS_TENANT,
    PG_EVENT_INSERT,
    PG_EVENTS_JOB,
    PG_EVENTS_ALL,
    PG_TOKEN_BY_NAME,
    PG_TOKEN_INSERT,
    PG_TOKEN_REVOKE,
    PG_TOKEN_BY_HASH,
    PG_TOKENS_ALL,
    PG_TOKENS_TENANT,
    PG_SETTING_PUT,
    PG_SETTING_GET,
    PG_USAGE,
    PG_IDS_RESERVE,
    PG_ARRAY_PUT,
    PG_ARRAYS_OPEN,
    PG_RESV_INSERT,
    PG_RESV_DELETE,
    PG_RESV_LIST,
    PG_STMTS
};

/* Job-list filter bits; variant m is prepared as statement PG_STMTS + m. */
enum { LF_TENANT = 1, LF_OWNER = 2, LF_STATE = 4, LF_ACTIVE = 8, LF_VARIANTS = 16 };

#define JOB_COLS                                                                               \
    "id, tenant, name, owner, idem_key, state, tier, priority, gpus, gpu_model, submit_s, "    \
    "start_s, end_s, preemptions, reason, why, spec_json, placement_json, gen, result_json, "  \
    "run_user, run_uid"
#define TOKEN_COLS                                                                             \
    "id, name, role, tenant, hash, created_s, revoked_s, unix_user, uid, expires_s"
#define EVENT_COLS "id, job_id, t_s, kind, detail"
/* A job's end, or now while it runs; its running interval clipped to the
 * window [$1, $2) runs from LO to HI. */
#define USAGE_END "(CASE WHEN end_s > 0 THEN end_s ELSE $3::float8 END)"
#define USAGE_LO "GREATEST(start_s, $1::float8)"
#define USAGE_HI "LEAST(" USAGE_END ", $2::float8)"

static const char *const pg_sql[PG_STMTS] = {
    [PG_SET_VERSION] = "UPDATE schema_version SET version = $1",
    [PG_JOB_INSERT] =
        "INSERT INTO jobs (tenant, name, owner, idem_key, state, tier, priority, gpus, "
        "gpu_model, submit_s, start_s, end_s, preemptions, reason, why, spec_json, "
        "placement_json, gen, run_user, run_uid, id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, "
        "$9, $10, $11, $12, $13, "
        "$14, $15, $16, $17, 1, $18, $19, "
        "COALESCE($20::bigint, nextval(pg_get_serial_sequence('jobs', 'id')))) ON CONFLICT (owner, idem_key) WHERE "
        "idem_key <> '' DO NOTHING RETURNING id",
    [PG_JOB_BY_IDEM] = "SELECT id FROM jobs WHERE owner = $1 AND idem_key = $2 AND idem_key <> ''",
    [PG_IDS_RESERVE] = "SELECT setval(pg_get_serial_sequence('jobs', 'id'), GREATEST($1::bigint, "
                       "(SELECT last_value FROM jobs_id_seq)))",
    [PG_ARRAY_PUT] = "INSERT INTO arrays (id, size, next, open) VALUES ($1, $2, $3, $4) "
                     "ON CONFLICT (id) DO UPDATE SET next = excluded.next, open = excluded.open",
    [PG_ARRAYS_OPEN] = "SELECT id, size, next FROM arrays WHERE open = 1 ORDER BY id",
    [PG_RESV_INSERT] = "INSERT INTO reservations (name, nodes, start_s, end_s, tenant, users,"
                       " maintenance, created_s) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
                       " ON CONFLICT (name) DO NOTHING",
    [PG_RESV_DELETE] = "DELETE FROM reservations WHERE name = $1",
    [PG_RESV_LIST] = "SELECT name, nodes, start_s, end_s, tenant, users, maintenance, created_s"
                     " FROM reservations ORDER BY start_s, name",
    [PG_JOB_UPDATE] = "UPDATE jobs SET state = $3, submit_s = $4, start_s = $5, end_s = $6, "
                      "preemptions = $7, reason = $8, why = $9, placement_json = $10, "
                      "gpu_model = $11, result_json = $12, spec_json = COALESCE($13, spec_json), "
                      "priority = $14, gpus = $15, gen = gen + 1 WHERE id = $1 AND gen = $2",
    [PG_JOB_GEN] = "SELECT gen FROM jobs WHERE id = $1",
    [PG_JOB_GET] = "SELECT " JOB_COLS " FROM jobs WHERE id = $1",
    [PG_COUNTS_ALL] = "SELECT state, COUNT(*) FROM jobs GROUP BY state",
    [PG_COUNTS_TENANT] = "SELECT state, COUNT(*) FROM jobs WHERE tenant = $1 GROUP BY state",
    [PG_EVENT_INSERT] = "INSERT INTO events (job_id, t_s, kind, detail) VALUES ($1, $2, $3, $4)",
    [PG_EVENTS_JOB] = "SELECT " EVENT_COLS " FROM events WHERE job_id = $1 AND id > $2 "
                      "ORDER BY id LIMIT $3",
    [PG_EVENTS_ALL] = "SELECT " EVENT_COLS " FROM events WHERE id > $1 ORDER BY id LIMIT $2",
    [PG_TOKEN_BY_NAME] = "SELECT revoked_s FROM tokens WHERE name = $1",
    [PG_TOKEN_INSERT] = "INSERT INTO tokens (name, role, tenant, hash, created_s, revoked_s, "
                        "unix_user, uid, expires_s) VALUES ($1, $2, $3, $4, $5, $6, $7, "
                        "$8, $9) RETURNING id",
    [PG_TOKEN_REVOKE] = "UPDATE tokens SET revoked_s = $2 WHERE name = $1 AND revoked_s = 0",
    [PG_TOKEN_BY_HASH] = "SELECT " TOKEN_COLS " FROM tokens WHERE hash = $1 AND revoked_s = 0",
    [PG_TOKENS_ALL] = "SELECT " TOKEN_COLS " FROM tokens ORDER BY id",
    [PG_TOKENS_TENANT] = "SELECT " TOKEN_COLS " FROM tokens WHERE tenant = $1 ORDER BY id",
    [PG_SETTING_PUT] = "INSERT INTO settings (key, value) VALUES ($1, $2) "
                       "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
    [PG_SETTING_GET] = "SELECT value FROM settings WHERE key = $1",
    /* COLLATE "C": the same byte order as SQLite, whatever the database's locale */
    [PG_USAGE] = "SELECT tenant, tier, gpu_model, SUM(gpus * (" USAGE_HI " - " USAGE_LO ")) "
                 "FROM jobs WHERE start_s > 0 AND start_s < $2::float8 AND " USAGE_HI
                 " > " USAGE_LO " GROUP BY tenant, tier, gpu_model "
                 "ORDER BY tenant COLLATE \"C\", tier, gpu_model COLLATE \"C\"",
};

/* Rolled-up accounting (store_usage.c, migration 8), prepared as statement
 * PG_STMTS + LF_VARIANTS + i. */
#define RU_GROUP "tenant, tier, gpu_model"
static const char *const pg_ru_sql[TS_RU_STMTS] = {
    [TS_RU_RUN_OF_JOB] = "SELECT j.tenant, j.tier, j.gpu_model, j.gpus, j.start_s, j.end_s, "
                         "r.gpu_model, r.gpus, r.start_s, r.end_s FROM jobs j LEFT JOIN "
                         "usage_runs r ON r.job_id = j.id AND r.whole = 1 WHERE j.id = $1",
    [TS_RU_RUN_DEL] = "DELETE FROM usage_runs WHERE job_id = $1 AND whole = 1",
    [TS_RU_RUN_ADD] = "INSERT INTO usage_runs (job_id, tenant, tier, gpu_model, gpus, start_s, "
                      "end_s, whole, span) VALUES ($1, $2, $3, $4, $5, $6, $7, "
                      "$8::int & 1, $8::int >> 1)",
    [TS_RU_BUCKET_ADD] = "INSERT INTO usage_buckets (span, tenant, tier, gpu_model, start_s, "
                         "gpu_s, carried, width_s) VALUES ($1, $2, $3, $4, $5, $6, "
                         "$7, $8) ON CONFLICT (span, width_s, start_s, " RU_GROUP ") "
                         "DO UPDATE SET "
                         "gpu_s = usage_buckets.gpu_s + excluded.gpu_s, "
                       "carried = usage_buckets.carried + excluded.carried",
    [TS_RU_BUCKETS] = "SELECT " RU_GROUP ", SUM(gpu_s) FROM usage_buckets WHERE span = $1 "
                      "AND width_s = $2 AND start_s >= $3 AND start_s < $4 "
                      "GROUP BY " RU_GROUP,
    [TS_RU_EDGE_AT] = "SELECT " RU_GROUP ", gpu_s, carried FROM usage_buckets WHERE "
                      "span = $1 AND width_s = $2 AND start_s = $3",
    [TS_RU_POINTS] = "SELECT " RU_GROUP ", SUM(gpus * ($3 - start_s)) FROM usage_runs WHERE "
                     "span = $1 AND start_s >= $2 AND start_s < $3 GROUP BY " RU_GROUP " "
                     "UNION ALL SELECT " RU_GROUP ", -SUM(gpus * ($3 - end_s)) FROM usage_runs "
                     "WHERE span = $1 AND end_s >= $2 AND end_s < $3 GROUP BY " RU_GROUP,
    [TS_RU_RUNNING] = "SELECT " RU_GROUP ", SUM(gpus * (LEAST($3::float8, $2::float8) - "
                      "GREATEST(start_s, $1::float8))) FROM jobs WHERE start_s > 0 AND "
                      "end_s <= 0 AND start_s < $2::float8 AND LEAST($3::float8, $2::float8) > "
                      "GREATEST(start_s, $1::float8) GROUP BY " RU_GROUP,
    [TS_RU_OLD_JOBS] = "SELECT " RU_GROUP ", gpus, start_s, end_s, id FROM jobs "
                       "WHERE start_s > 0 AND end_s > 0",
    [TS_RU_OLD_RUNS] = ("SELECT j.tenant, e.detail, e.job_id FROM events e JOIN jobs j "
                       "ON j.id = e.job_id WHERE e.kind = 'run-ended'"),
    [TS_RU_READ_BEGIN] = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    [TS_RU_READ_END] = "COMMIT",
};

typedef struct pg_conn {
    PGconn *pc;
    uint64_t prepared; /* bit i: statement i prepared in this session */
    _Atomic int64_t fence; /* epoch every transaction checks (0: none) */
} pg_conn;

typedef struct pg_params {
    int n;
    const char *v[PG_PARAMS_MAX];
    int len[PG_PARAMS_MAX];
    int fmt[PG_PARAMS_MAX];
    char num[PG_PARAMS_MAX][32];
} pg_params;

static void pp_text(pg_params *p, const char *s)
{
    p->v[p->n] = s;
    p->len[p->n] = 0;
    p->fmt[p->n++] = 0;
}

static void pp_i64(pg_params *p, int64_t x)
{
    snprintf(p->num[p->n], sizeof p->num[p->n], "%lld", (long long)x);
    pp_text(p, p->num[p->n]);
}

static void pp_f64(pg_params *p, double x)
{
    snprintf(p->num[p->n], sizeof p->num[p->n], "%.17g", x);
    pp_text(p, p->num[p->n]);
}

static void pp_bytes(pg_params *p, const uint8_t *b, int n)
{
    p->v[p->n] = (const char *)b;
    p->len[p->n] = n;
    p->fmt[p->n++] = 1;
}

/* libpq's messages end in a newline; the first line is the one to show. */
static int pg_fail(pg_conn *c, const PGresult *res, const char *what, ts_err *err)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    if (!msg || !*msg)
        msg = c && c->pc ? PQerrorMessage(c->pc) : "out of memory";
    int code = state && strcmp(state, "23505") == 0 ? TS_EEXIST : TS_EIO;
    return ts_err_set(err, code, "postgresql: %s: %.*s", what, (int)strcspn(msg, "\n"), msg);
}

static int pg_exec_text(pg_conn *c, const char *sql, PGresult **out, const char *what,
                        ts_err *err)
{
    PGresult *res = PQexec(c->pc, sql);
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        int rc = pg_fail(c, res, what, err);
        PQclear(res);
        return rc;
    }
    if (out)
        *out = res;
    else
        PQclear(res);
    return 0;
}

/* Runs prepared statement `slot` (preparing `sql` the first time). */
static int pg_run(pg_conn *c, int slot, const char *sql, const pg_params *p, PGresult **out,
                  const char *what, ts_err *err)
{
    char name[16];
    snprintf(name, sizeof name, "ts_%d", slot);
    if (!(c->prepared & (UINT64_C(1) << slot))) {
        PGresult *res = PQprepare(c->pc, name, sql, 0, NULL);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            int rc = pg_fail(c, res, what, err);
            PQclear(res);
            return rc;
        }
        PQclear(res);
        c->prepared |= UINT64_C(1) << slot;
    }
    PGresult *res = PQexecPrepared(c->pc, name, p ? p->n : 0, p ? p->v : NULL,
                                   p ? p->len : NULL, p ? p->fmt : NULL, 0);
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        int rc = pg_fail(c, res, what, err);
        PQclear(res);
        return rc;
    }
    if (out)
        *out = res;
    else
        PQclear(res);
    return 0;
}

static int pg_stmt(pg_conn *c, enum pg_stmt which, const pg_params *p, PGresult **out,
                   const char *what, ts_err *err)
{
    return pg_run(c, (int)which, pg_sql[which], p, out, what, err);
}

static int64_t g_i64(const PGresult *r, int row, int col)
{
    return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

static double g_f64(const PGresult *r, int row, int col)
{
    return strtod(PQgetvalue(r, row, col), NULL);
}

static void g_field(const PGresult *r, int row, int col, char *dst, size_t cap)
{
    ts_store_copy_field(dst, cap, PQgetvalue(r, row, col), (size_t)PQgetlength(r, row, col));
}

/* A copy of a nullable text column; false when out of memory. */
static bool g_dup(const PGresult *r, int row, int col, char **out)
{
    *out = PQgetisnull(r, row, col) ? NULL : strdup(PQgetvalue(r, row, col));
    return PQgetisnull(r, row, col) || *out;
}

static int hexval(char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* A bytea column in text form ("\x" then hex digits). */
static void g_hash(const PGresult *r, int row, int col, uint8_t out[TS_TOKEN_HASH_BYTES])
{
    const char *v = PQgetvalue(r, row, col);
    memset(out, 0, TS_TOKEN_HASH_BYTES);
    if (v[0] != '\\' || v[1] != 'x')
        return;
    v += 2;
    for (int i = 0; i < TS_TOKEN_HASH_BYTES; i++) {
        int hi = hexval(v[2 * i]), lo = hi < 0 ? -1 : hexval(v[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
}

static int read_job(const PGresult *r, int row, ts_job_row *j, ts_err *err)
{
    memset(j, 0, sizeof *j);
    j->id = g_i64(r, row, 0);
    g_field(r, row, 1, j->tenant, sizeof j->tenant);
    g_field(r, row, 2, j->name, sizeof j->name);
    g_field(r, row, 3, j->owner, sizeof j->owner);
    g_field(r, row, 4, j->idem_key, sizeof j->idem_key);
    j->state = (int)g_i64(r, row, 5);
    j->tier = (int)g_i64(r, row, 6);
    j->priority = (int)g_i64(r, row, 7);
    j->gpus = (int)g_i64(r, row, 8);
    g_field(r, row, 9, j->gpu_model, sizeof j->gpu_model);
    j->submit_s = g_f64(r, row, 10);
    j->start_s = g_f64(r, row, 11);
    j->end_s = g_f64(r, row, 12);
    j->preemptions = (int)g_i64(r, row, 13);
    g_field(r, row, 14, j->reason, sizeof j->reason);
    j->gen = g_i64(r, row, 18);
    g_field(r, row, 20, j->run_user, sizeof j->run_user);
    j->run_uid = g_i64(r, row, 21);
    if (!g_dup(r, row, 15, &j->why) || !g_dup(r, row, 16, &j->spec_json) ||
        !g_dup(r, row, 17, &j->placement_json) || !g_dup(r, row, 19, &j->result_json) ||
        (!j->spec_json && !(j->spec_json = strdup("")))) {
        ts_job_row_fini(j);
        return ts_err_set(err, TS_ENOMEM, "store: out of memory reading job %lld",
                          (long long)j->id);
    }
    return 0;
}

static void read_token(const PGresult *r, int row, ts_token_row *t)
{
    memset(t, 0, sizeof *t);
    t->id = g_i64(r, row, 0);
    g_field(r, row, 1, t->name, sizeof t->name);
    t->role = (int)g_i64(r, row, 2);
    g_field(r, row, 3, t->tenant, sizeof t->tenant);
    g_hash(r, row, 4, t->hash);
    t->created_s = g_f64(r, row, 5);
    t->revoked_s = g_f64(r, row, 6);
    g_field(r, row, 7, t->unix_user, sizeof t->unix_user);
    t->uid = g_i64(r, row, 8);
    t->expires_s = g_f64(r, row, 9);
}

/* ---- sessions and schema ---- */

static void quiet_notices(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* What every session needs, again after a reset. */
static int pg_session_setup(pg_conn *c, bool writer, ts_err *err)
{
    PQsetNoticeProcessor(c->pc, quiet_notices, NULL);
    c->prepared = 0;
    return pg_exec_text(c,
                        writer ? "SET client_min_messages TO warning;"
                                 "SET synchronous_commit TO on;"
                                 "SET extra_float_digits TO 3"
                               : "SET client_min_messages TO warning;"
                                 "SET default_transaction_read_only TO on;"
                                 "SET extra_float_digits TO 3",
                        NULL, "session setup", err);
}

static void pg_disconnect(void *conn)
{
    pg_conn *c = conn;
    if (!c)
        return;
    PQfinish(c->pc);
    free(c);
}

static int pg_connect(const char *target, bool writer, void **out, ts_err *err)
{
    *out = NULL;
    pg_conn *c = calloc(1, sizeof *c);
    if (!c)
        return ts_err_set(err, TS_ENOMEM, "store: out of memory");
    c->pc = PQconnectdb(target);
    if (!c->pc || PQstatus(c->pc) != CONNECTION_OK) {
        /* the message names host and port, never the password */
        const char *msg = c->pc ? PQerrorMessage(c->pc) : "out of memory";
        ts_err_set(err, TS_EIO, "postgresql: connect: %.*s", (int)strcspn(msg, "\n"), msg);
        pg_disconnect(c);
        return TS_EIO;
    }
    int rc = pg_session_setup(c, writer, err);
    if (rc) {
        pg_disconnect(c);
        return rc;
    }
    *out = c;
    return 0;
}

static bool pg_healthy(void *conn)
{
    pg_conn *c = conn;
    return c && PQstatus(c->pc) == CONNECTION_OK;
}

static int pg_exec_script(void *conn, const char *sql, ts_err *err)
{
    return pg_exec_text(conn, sql, NULL, "exec", err);
}

static int pg_query_int(void *conn, const char *sql, int64_t *out, ts_err *err)
{
    PGresult *res = NULL;
    int rc = pg_exec_text(conn, sql, &res, "query", err);
    if (rc)
        return rc;
    if (PQntuples(res) < 1 || PQnfields(res) < 1 || PQgetisnull(res, 0, 0))
        rc = ts_err_set(err, TS_ENOENT, "postgresql: query: no value");
    else
        *out = g_i64(res, 0, 0);
    PQclear(res);
    return rc;
}

/* Fencing (docs/ha.md): with an epoch set, the transaction just begun
 * reads the lease row FOR SHARE and goes on only if the epoch is still
 * ours. The row lock is held to COMMIT, so a new leader's takeover (an
 * UPDATE of that row) waits for this transaction to end, and every
 * transaction begun after the takeover sees the new epoch: no commit of an
 * old epoch can follow the first commit of a new one. The same statement
 * sets tessera.epoch for this transaction, which the epoch columns of jobs
 * and events take as their default (migration 4): the store records which
 * epoch wrote each row, at no extra round trip. */
static int pg_fence_check(pg_conn *c, ts_err *err)
{
    int64_t mine = atomic_load(&c->fence);
    if (mine <= 0)
        return 0;
    char sql[128];
    snprintf(sql, sizeof sql,
             "SELECT epoch, set_config('tessera.epoch', '%lld', true) FROM lease WHERE id = 1 "
             "FOR SHARE",
             (long long)mine);
    PGresult *res = NULL;
    int rc = pg_exec_text(c, sql, &res, "fence", err);
    if (rc == 0) {
        int64_t now = PQntuples(res) == 1 ? g_i64(res, 0, 0) : -1;
        PQclear(res);
        if (now != mine)
            rc = ts_err_set(err, TS_EFENCED, "fenced: epoch %lld is not the lease's %lld",
                            (long long)mine, (long long)now);
    }
    if (rc)
        pg_exec_text(c, "ROLLBACK", NULL, "rollback", NULL);
    return rc;
}

static void pg_set_fence(void *conn, int64_t epoch)
{
    pg_conn *c = conn;
    atomic_store(&c->fence, epoch);
}

/* A session the server dropped (restart, failover, idle kill) is noticed
 * only at its next use: BEGIN on it fails and leaves it CONNECTION_BAD. As
 * nothing of the group has run yet, one reset and a second BEGIN are safe. */
static int pg_begin(void *conn, ts_err *err)
{
    pg_conn *c = conn;
    for (int attempt = 0;; attempt++) {
        if (PQstatus(c->pc) != CONNECTION_OK) {
            PQreset(c->pc);
            if (PQstatus(c->pc) != CONNECTION_OK)
                return pg_fail(c, NULL, "reconnect", err);
            int rc = pg_session_setup(c, true, err);
            if (rc)
                return rc;
        }
        if (PQtransactionStatus(c->pc) != PQTRANS_IDLE)
            pg_exec_text(c, "ROLLBACK", NULL, "rollback", NULL);
        int rc = pg_exec_text(c, "BEGIN", NULL, "begin", err);
        if (rc == 0)
            return pg_fence_check(c, err);
        if (attempt > 0 || PQstatus(c->pc) == CONNECTION_OK)
            return rc;
    }
}

static int pg_begin_exclusive(void *conn, ts_err *err)
{
    int rc = pg_begin(conn, err);
    if (rc)
        return rc;
    char sql[64];
    snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%d)", MIGRATION_LOCK_KEY);
    return pg_exec_text(conn, sql, NULL, "migration lock", err);
}

static int pg_commit(void *conn, ts_err *err)
{
    pg_conn *c = conn;
    PGresult *res = NULL;
    int rc = pg_exec_text(c, "COMMIT", &res, "commit", err);
    if (rc)
        return rc;
    /* COMMIT of a failed transaction "succeeds" as a ROLLBACK */
    if (strcmp(PQcmdStatus(res), "COMMIT") != 0)
        rc = ts_err_set(err, TS_EIO, "postgresql: commit: the transaction was rolled back");
    PQclear(res);
    return rc;
}

static void pg_rollback(void *conn)
{
    pg_conn *c = conn;
    if (PQstatus(c->pc) == CONNECTION_OK && PQtransactionStatus(c->pc) != PQTRANS_IDLE)
        pg_exec_text(c, "ROLLBACK", NULL, "rollback", NULL);
}

static int pg_set_version(void *conn, int version, ts_err *err)
{
    pg_params p = {0};
    pp_i64(&p, version);
    return pg_stmt(conn, PG_SET_VERSION, &p, NULL, "schema_version", err);
}

/* ---- writes ---- */

static int pg_job_insert(void *conn, const ts_job_row *r, int64_t *id, bool *existed,
                         ts_err *err)
{
    pg_params p = {0};
    pp_text(&p, r->tenant);
    pp_text(&p, r->name);
    pp_text(&p, r->owner);
    pp_text(&p, r->idem_key);
    pp_i64(&p, r->state);
    pp_i64(&p, r->tier);
    pp_i64(&p, r->priority);
    pp_i64(&p, r->gpus);
    pp_text(&p, r->gpu_model);
    pp_f64(&p, r->submit_s);
    pp_f64(&p, r->start_s);
    pp_f64(&p, r->end_s);
    pp_i64(&p, r->preemptions);
    pp_text(&p, r->reason);
    pp_text(&p, r->why);
    pp_text(&p, r->spec_json);
    pp_text(&p, r->placement_json);
    pp_text(&p, r->run_user);
    pp_i64(&p, r->run_uid);
    if (r->id > 0) /* an array's element, on the id its array reserved */
        pp_i64(&p, r->id);
    else
        pp_text(&p, NULL);
    PGresult *res = NULL;
    int rc = pg_stmt(conn, PG_JOB_INSERT, &p, &res, "insert job", err);
    if (rc)
        return rc;
    *existed = PQntuples(res) == 0;
    if (!*existed)
        *id = g_i64(res, 0, 0);
    PQclear(res);
    if (!*existed)
        return 0;
    /* nothing inserted: the owner used this idempotency key before */
    pg_params q = {0};
    pp_text(&q, r->owner);
    pp_text(&q, r->idem_key);
    if ((rc = pg_stmt(conn, PG_JOB_BY_IDEM, &q, &res, "insert job", err)))
        return rc;
    if (PQntuples(res) == 1)
        *id = g_i64(res, 0, 0);
    else
        rc = ts_err_set(err, TS_EIO, "postgresql: insert job: idempotency key conflict "
                                     "without a stored job");
    PQclear(res);
    return rc;
}

static int pg_job_update(void *conn, const ts_job_row *r, ts_err *err)
{
    pg_params p = {0};
    pp_i64(&p, r->id);
    pp_i64(&p, r->gen);
    pp_i64(&p, r->state);
    pp_f64(&p, r->submit_s);
    pp_f64(&p, r->start_s);
    pp_f64(&p, r->end_s);
    pp_i64(&p, r->preemptions);
    pp_text(&p, r->reason);
    pp_text(&p, r->why);
    pp_text(&p, r->placement_json);
    pp_text(&p, r->gpu_model);
    pp_text(&p, r->result_json);
    pp_text(&p, r->spec_json); /* NULL: unchanged (only an update of the job's spec) */
    pp_i64(&p, r->priority);
    pp_i64(&p, r->gpus);
    PGresult *res = NULL;
    int rc = pg_stmt(conn, PG_JOB_UPDATE, &p, &res, "update job", err);
    if (rc)
        return rc;
    bool changed = strcmp(PQcmdTuples(res), "1") == 0;
    PQclear(res);
    if (changed)
        return 0;
    pg_params q = {0};
    pp_i64(&q, r->id);
    if ((rc = pg_stmt(conn, PG_JOB_GEN, &q, &res, "update job", err)))
        return rc;
    if (PQntuples(res) == 1)
        rc = ts_err_set(err, TS_ECONFLICT,
                        "job %lld: gen %lld is stale (the store has %lld): updated by "
                        "someone else since it was read",
                        (long long)r->id, (long long)r->gen, (long long)g_i64(res, 0, 0));
    else
        rc = ts_err_set(err, TS_ENOENT, "job %lld: no such job", (long long)r->id);
    PQclear(res);
    return rc;
}

static int pg_event_append(void *conn, const ts_event_row *ev, ts_err *err)
{
    pg_params p = {0};
    pp_i64(&p, ev->job_id);
    pp_f64(&p, ev->t_s);
    pp_text(&p, ev->kind);
    pp_text(&p, ev->detail);
    return pg_stmt(conn, PG_EVENT_INSERT, &p, NULL, "append event", err);
}

/* TS_ENOENT if there is no token of that name. */
static int token_exists(void *conn, const char *name, ts_err *err)
{
    pg_params p = {0};
    pp_text(&p, name);
    PGresult *res = NULL;
    int rc = pg_stmt(conn, PG_TOKEN_BY_NAME, &p, &res, "token", err);
    if (rc)
        return rc;
    if (PQntuples(res) == 0)
        rc = ts_err_set(err, TS_ENOENT, "token '%s': no such token", name);
    PQclear(res);
    return rc;
}

static int pg_token_insert(void *conn, const ts_token_row *t, int64_t *id, ts_err *err)
{
    int rc = token_exists(conn, t->name, NULL);
    if (rc == 0)
        return ts_err_set(err, TS_EEXIST, "token '%s': name already taken", t->name);
    if (rc != TS_ENOENT)
        return token_exists(conn, t->name, err);
    pg_params p = {0};
    pp_text(&p, t->name);
    pp_i64(&p, t->role);
    pp_text(&p, t->tenant);
    pp_bytes(&p, t->hash, TS_TOKEN_HASH_BYTES);
    pp_f64(&p, t->created_s);
    pp_f64(&p, t->revoked_s);
    pp_text(&p, t->unix_user);
    pp_i64(&p, t->uid);
    pp_f64(&p, t->expires_s);
    PGresult *res = NULL;
    rc = pg_stmt(conn, PG_TOKEN_INSERT, &p, &res, "insert token", err);
    if (rc == TS_EEXIST)
        return ts_err_set(err, TS_EEXIST, "token '%s': hash already used by another token",
                          t->name);
    if (rc)
        return rc;
    *id = g_i64(res, 0, 0);
    PQclear(res);
    return 0;
}

static int pg_token_revoke(void *conn, const char *name, double now_s, ts_err *err)
{
    pg_params p = {0};
    pp_text(&p, name);
    pp_f64(&p, now_s);
    PGresult *res = NULL;
    int rc = pg_stmt(conn, PG_TOKEN_REVOKE, &p, &res, "revoke token", err);
    if (rc)
        return rc;
    bool changed = strcmp(PQcmdTuples(res), "1") == 0;
    PQclear(res);
    /* otherwise revoked before (the first time stands), or no such token */
    return changed ? 0 : token_exists(conn, name, err);
}

static int pg_setting_put(void *conn, const char *key, const char *value, ts_err *err)
{
    pg_params p = {0};
    pp_text(&p, key);
    pp_text(&p, value);
    return pg_stmt(conn, PG_SETTING_PUT, &p, NULL, "put setting", err);
}

/* ---- reads ---- */

static int pg_job_get(void *conn, int64_t id, ts_job_row *out, ts_err *err)
{
    pg_params p = {0};
    pp_i64(&p, id);
    PGresult *res = NULL;
    int rc = pg_stmt(conn, PG_JOB_GET, &p, &res, "get job", err);
    if (rc)
        return rc;
    rc = PQntuples(res) == 1 ? read_job(res, 0, out, err)
                             : ts_err_set(err, TS_ENOENT, "job %lld: no such job", (long long)id);
    PQclear(res);
    return rc;
}

static int pg_job_list(void *conn, const ts_job_filter *f, int64_t after_id, int limit,
                       ts_job_row **rows, int *n, ts_err *err)
{
    int mask = (f->tenant ? LF_TENANT : 0) | (f->owner ? LF_OWNER : 0) |
               (f->state >= 0 ? LF_STATE : 0) | (f->active_only ? LF_ACTIVE : 0);
    /* the variant's text, from fixed fragments: values go as parameters */
    char sql[512], tn[32] = "", on[32] = "", sn[32] = "";
    pg_params p = {0};
    pp_i64(&p, after_id);
    if (f->tenant) {
        pp_text(&p, f->tenant);
        snprintf(tn, sizeof tn, " AND tenant = $%d", p.n);
    }
    if (f->owner) {
        pp_text(&p, f->owner);
        snprintf(on, sizeof on, " AND owner = $%d", p.n);
    }
    if (f->state >= 0) {
        pp_i64(&p, f->state);
        snprintf(sn, sizeof sn, " AND state = $%d", p.n);
    }
    pp_i64(&p, limit);
    snprintf(sql, sizeof sql,
             "SELECT " JOB_COLS " FROM jobs WHERE id > $1%s%s%s%s ORDER BY id LIMIT $%d", tn, on,
             sn, mask & LF_ACTIVE ? " AND state IN (0, 1, 2, 3)" : "", p.n);
    PGresult *res = NULL;
    int rc = pg_run(conn, PG_STMTS + mask, sql, &p, &res, "list jobs", err);
    if (rc)
        return rc;
    int nt = PQntuples(res);
    if (nt > 0 && !(*rows = calloc((size_t)nt, sizeof **rows)))
        rc = ts_err_set(err, TS_ENOMEM, "store: out of memory listing jobs");
    for (int i = 0; rc == 0 && i < nt; i++)
        if ((rc = read_job(res, i, &(*rows)[i], err)) == 0)
            (*n)++;
    PQclear(res);
    if (rc) {
        ts_store_free_jobs(*rows, *n);
        *rows = NULL;
        *n = 0;
    }
    return rc;
}

static int pg_job_counts(void *conn, const char *tenant, int64_t out[TS_JOB_STATES],
                         ts_err *err)
{
    pg_params p = {0};
    if (tenant)
        pp_text(&p, tenant);
    PGresult *res = NULL;
    int rc = pg_stmt(conn, tenant ? PG_COUNTS_TENANT : PG_COUNTS_ALL, &p, &res, "count jobs",
                     err);
    if (rc)
        return rc;
    for (int i = 0; i < PQntuples(res); i++) {
        int64_t state = g_i64(res, i, 0);
        if (state >= 0 && state < TS_JOB_STATES)
            out[state] = g_i64(res, i, 1);
    }
    PQclear(res);
    return 0;
}

static int pg_event_list(void *conn, int64_t job_id, int64_t after_id, int limit,
                         ts_event_row **rows, int *n, ts_err *err)
{
    pg_params p = {0};
    if (job_id != 0)
        pp_i64(&p, job_id > 0 ? job_id : 0); /* TS_EVENTS_NO_JOB: job_id 0 */
    pp_i64(&p, after_id);
    pp_i64(&p, limit);
    PGresult *res = NULL;
    int rc = pg_stmt(conn, job_id != 0 ? PG_EVENTS_JOB : PG_EVENTS_ALL, &p, &res, "list events",
                     err);
    if (rc)
        return rc;
    int nt = PQntuples(res);
    if (nt > 0 && !(*rows = calloc((size_t)nt, sizeof **rows)))
        rc = ts_err_set(err, TS_ENOMEM, "store: out of memory listing events");
    for (int i = 0; rc == 0 && i < nt; i++) {
        ts_event_row *e = &(*rows)[i];
        e->id = g_i64(res, i, 0);
        e->job_id = g_i64(res, i, 1);
        e->t_s = g_f64(res, i, 2);
        g_field(res, i, 3, e->kind, sizeof e->kind);
        (*n)++;
        if (!g_dup(res, i, 4, &e->detail))
            rc = ts_err_set(err, TS_ENOMEM, "store: out of memory listing events");
    }
    PQclear(res);
    if (rc) {
        ts_store_free_events(*rows, *n);
        *rows = NULL;
        *n = 0;
    }
    return rc;
}

static int pg_token_by_hash(void *conn, const uint8_t hash[TS_TOKEN_HASH_BYTES],
                            ts_token_row *out, ts_err *err)
{
    pg_params p = {0};
    pp_bytes(&p, hash, TS_TOKEN_HASH_BYTES);
    PGresult *res = NULL;
    int rc = pg_stmt(conn, PG_TOKEN_BY_HASH, &p, &res, "token by hash", err);
    if (rc)
        return rc;
    if (PQntuples(res) == 1)
        read_token(res, 0, out);
    else
        rc = ts_err_set(err, TS_ENOENT, "token: no live token with this secret");
    PQclear(res);
    return rc;
}

static int pg_token_list(void *conn, const char *tenant, ts_token_row **rows, int *n,
                         ts_err *err)
{
    pg_params p = {0};
    if (tenant)
        pp_text(&p, tenant);
    PGresult *res = NULL;
    int rc = pg_stmt(conn, tenant ? PG_TOKENS_TENANT : PG_TOKENS_ALL, &p, &res, "list tokens",
                     err);
    if (rc)
        return rc;
    int nt = PQntuples(res);
    if (nt > 0 && !(*rows = calloc((size_t)nt, sizeof **rows)))
        rc = ts_err_set(err, TS_ENOMEM, "store: out of memory listing tokens");
    for (int i = 0; rc == 0 && i < nt; i++)
        read_token(res, i, &(*rows)[(*n)++]);
    PQclear(res);
    return rc;
}

static int pg_ids_reserve(void *conn, int64_t last, ts_err *err)
{
    pg_params p = {0};
    pp_i64(&p, last);
    return pg_stmt(conn, PG_IDS_RESERVE, &p, NULL, "reserve ids", err);
}

static int pg_array_put(void *conn, const ts_array_row *a, ts_err *err)
{
    pg_params p = {0};
    pp_i64(&p, a->id);
    pp_i64(&p, a->size);
    pp_i64(&p, a->next);
    pp_i64(&p, a->open ? 1 : 0);
    return pg_stmt(conn, PG_ARRAY_PUT, &p, NULL, "put array", err);
}

static int pg_arrays_open(void *conn, ts_array_row **rows, int *n, ts_err *err)
{
    pg_params p = {0};
    PGresult *res = NULL;
    *rows = NULL;
    *n = 0;
    int rc = pg_stmt(conn, PG_ARRAYS_OPEN, &p, &res, "list arrays", err);
    if (rc)
        return rc;
    int nt = PQntuples(res);
    if (nt > 0 && !(*rows = calloc((size_t)nt, sizeof **rows)))
        rc = ts_err_set(err, TS_ENOMEM, "store: out of memory listing arrays");
    for (int i = 0; rc == 0 && i < nt; i++)
        (*rows)[(*n)++] = (ts_array_row){.id = g_i64(res, i, 0), .size = (int)g_i64(res, i, 1),
                                         .next = (int)g_i64(res, i, 2), .open = true};
    PQclear(res);
    return rc;
}

static int pg_resv_insert(void *conn, const ts_resv_row *r, ts_err *err)
{
    pg_params p = {0};
    pp_text(&p, r->name);
    pp_text(&p, r->nodes);
    pp_f64(&p, r->start_s);
    pp_f64(&p, r->end_s);
    pp_text(&p, r->tenant);
    pp_text(&p, r->users);
    pp_i64(&p, r->maintenance ? 1 : 0);
    pp_f64(&p, r->created_s);
    PGresult *res = NULL;
    int rc = pg_stmt(conn, PG_RESV_INSERT, &p, &res, "insert reservation", err);
    if (rc)
        return rc;
    bool inserted = strcmp(PQcmdTuples(res), "1") == 0;
    PQclear(res);
    return inserted ? 0 : ts_err_set(err, TS_EEXIST, "reservation \"%s\": exists", r->name);
}

static int pg_resv_delete(void *conn, const char *name, ts_err *err)
{
    pg_params p = {0};
    pp_text(&p, name);
    PGresult *res = NULL;
    int rc = pg_stmt(conn, PG_RESV_DELETE, &p, &res, "delete reservation", err);
    if (rc)
        return rc;
    bool deleted = strcmp(PQcmdTuples(res), "1") == 0;
    PQclear(res);
    return deleted ? 0
                   : ts_err_set(err, TS_ENOENT, "reservation \"%s\": no such reservation", name);
}

static int pg_resv_list(void *conn, ts_resv_row **rows, int *n, ts_err *err)
{
    pg_params p = {0};
    PGresult *res = NULL;
    *rows = NULL;
    *n = 0;
    int rc = pg_stmt(conn, PG_RESV_LIST, &p, &res, "list reservations", err);
    if (rc)
        return rc;
    int nt = PQntuples(res);
    if (nt > 0 && !(*rows = calloc((size_t)nt, sizeof **rows)))
        rc = ts_err_set(err, TS_ENOMEM, "store: out of memory listing reservations");
    for (int i = 0; rc == 0 && i < nt; i++) {
        ts_resv_row *r = &(*rows)[(*n)++];
        g_field(res, i, 0, r->name, sizeof r->name);
        g_field(res, i, 1, r->nodes, sizeof r->nodes);
        r->start_s = g_f64(res, i, 2);
        r->end_s = g_f64(res, i, 3);
        g_field(res, i, 4, r->tenant, sizeof r->tenant);
        g_field(res, i, 5, r->users, sizeof r->users);
        r->maintenance = g_i64(res, i, 6) != 0;
        r->created_s = g_f64(res, i, 7);
    }
    PQclear(res);
    return rc;
}

static int pg_setting_get(void *conn, const char *key, char **value, ts_err *err)
{
    pg_params p = {0};
    pp_text(&p, key);
    PGresult *res = NULL;
    int rc = pg_stmt(conn, PG_SETTING_GET, &p, &res, "get setting", err);
    if (rc)
        return rc;
    if (PQntuples(res) == 1 && !g_dup(res, 0, 0, value))
        rc = ts_err_set(err, TS_ENOMEM, "store: out of memory reading %s", key);
    PQclear(res);
    return rc;
}

static int pg_usage(void *conn, double from_s, double to_s, double now_s, ts_usage_row **rows,
                    int *n, ts_err *err)
{
    pg_params p = {0};
    pp_f64(&p, from_s);
    pp_f64(&p, to_s);
    pp_f64(&p, now_s);
    PGresult *res = NULL;
    int rc = pg_stmt(conn, PG_USAGE, &p, &res, "usage", err);
    if (rc)
        return rc;
    int nt = PQntuples(res);
    if (nt > 0 && !(*rows = calloc((size_t)nt, sizeof **rows)))
        rc = ts_err_set(err, TS_ENOMEM, "store: out of memory computing usage");
    for (int i = 0; rc == 0 && i < nt; i++) {
        ts_usage_row *u = &(*rows)[(*n)++];
        g_field(res, i, 0, u->tenant, sizeof u->tenant);
        u->tier = (int)g_i64(res, i, 1);
        g_field(res, i, 2, u->gpu_model, sizeof u->gpu_model);
        u->gpu_s = g_f64(res, i, 3);
    }
    PQclear(res);
    return rc;
}

static int pg_rollup(void *conn, int stmt, const ts_ru_args *a, ts_ru_row_fn fn, void *ctx,
                     ts_err *err)
{
    pg_params p = {0};
    const char *shape = TS_RU_SHAPES[stmt][0], *cols = TS_RU_SHAPES[stmt][1];
    for (int i = 0; shape[i]; i++) {
        char k = shape[i];
        if (k == 'j')
            pp_i64(&p, a->job);
        else if (k == 't')
            pp_text(&p, a->tenant);
        else if (k == 'i')
            pp_i64(&p, a->tier);
        else if (k == 's')
            pp_i64(&p, a->span);
        else if (k == 'm')
            pp_text(&p, a->model);
        else
            pp_f64(&p, a->d[k - '0']);
    }
    PGresult *res = NULL;
    int rc = pg_run(conn, PG_STMTS + LF_VARIANTS + stmt, pg_ru_sql[stmt], &p, &res,
                    "rolled-up usage", err);
    if (rc)
        return rc;
    ts_ru_row row;
    for (int r = 0; fn && rc == 0 && r < PQntuples(res); r++) {
        memset(&row, 0, sizeof row);
        for (int i = 0, nt = 0, nv = 0; cols[i]; i++) {
            if (cols[i] == 't')
                g_field(res, r, i, row.text[nt++], sizeof row.text[0]);
            else if (cols[i] == 'i')
                row.i = g_i64(res, r, i);
            else
                row.v[nv++] = g_f64(res, r, i);
        }
        rc = fn(ctx, &row, err);
    }
    PQclear(res);
    return rc;
}

/* Fault injection: the socket is shut under libpq, as when the server
 * restarts; the next statement fails and the session reads CONNECTION_BAD. */
static void pg_drop_session(void *conn)
{
    pg_conn *c = conn;
    int fd = c && c->pc ? PQsocket(c->pc) : -1;
    if (fd >= 0)
        shutdown(fd, SHUT_RDWR);
}

const struct ts_store_ops ts_store_pg_ops = {
    .name = "postgresql",
    .connect = pg_connect,
    .disconnect = pg_disconnect,
    .healthy = pg_healthy,
    .exec_script = pg_exec_script,
    .query_int = pg_query_int,
    .begin_exclusive = pg_begin_exclusive,
    .set_version = pg_set_version,
    .begin = pg_begin,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .job_insert = pg_job_insert,
    .job_update = pg_job_update,
    .event_append = pg_event_append,
    .token_insert = pg_token_insert,
    .token_revoke = pg_token_revoke,
    .setting_put = pg_setting_put,
    .ids_reserve = pg_ids_reserve,
    .array_put = pg_array_put,
    .arrays_open = pg_arrays_open,
    .resv_insert = pg_resv_insert,
    .resv_delete = pg_resv_delete,
    .resv_list = pg_resv_list,
    .job_get = pg_job_get,
    .job_list = pg_job_list,
    .job_counts = pg_job_counts,
    .event_list = pg_event_list,
    .token_by_hash = pg_token_by_hash,
    .token_list = pg_token_list,
    .setting_get = pg_setting_get,
    .usage = pg_usage,
    .rollup = pg_rollup,
    .drop_session = pg_drop_session,
    .set_fence = pg_set_fence,
};
