/*
 * store_pg.c - the PostgreSQL backend, through libpq.
 *
 * For sites that already run PostgreSQL (backups, replicas, a controller
 * that can move between hosts). The committer owns one session; each
 * reader in the pool is a session of its own. Values only ever travel as
 * parameters of statements prepared once per session (named "ts_N" after
 * their slot, on first run): never spliced into SQL text. Numbers go as
 * text (doubles with 17 significant digits, read back with
 * extra_float_digits=3, so a time round-trips exactly), token hashes as
 * binary bytea.
 *
 * A statement runs whole at its first step (PQexecPrepared) and its rows
 * are then read one per step, so the row operations step it as they step a
 * SQLite statement. A COMMIT returns once PostgreSQL has flushed its WAL
 * (synchronous_commit is forced on for the session, whatever the server
 * default). A session the server dropped is reset before the next group;
 * its prepared statements went with it, so each is prepared again (the
 * session's generation tells). libpq's notices (e.g. "relation already
 * exists, skipping") are swallowed: the library never prints.
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
#define PG_PARAMS_MAX 24

typedef struct pg_conn {
    PGconn *pc;
    bool writer;
    unsigned session;      /* bumped at each session setup: prepared statements died */
    _Atomic int64_t fence; /* epoch every transaction checks (0: none) */
} pg_conn;

typedef struct pg_stmt {
    pg_conn *c;
    char name[16];
    char *sql;
    unsigned prepared; /* the session it was prepared in (0: never) */
    /* parameters of the next run */
    int n;
    const char *v[PG_PARAMS_MAX];
    int len[PG_PARAMS_MAX];
    int fmt[PG_PARAMS_MAX];
    char num[PG_PARAMS_MAX][32];
    /* the current run */
    PGresult *res; /* NULL: not run yet */
    int row;       /* the row the last step reached */
    uint8_t blob[TS_TOKEN_HASH_BYTES];
} pg_stmt;

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

static bool pg_ok(const PGresult *res)
{
    ExecStatusType st = PQresultStatus(res);
    return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

/* Runs text without parameters; *out (if given) gets the result. */
static int pg_exec_text(pg_conn *c, const char *sql, PGresult **out, const char *what,
                        ts_err *err)
{
    PGresult *res = PQexec(c->pc, sql);
    if (!pg_ok(res)) {
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

/* ---- sessions ---- */

static void quiet_notices(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* What every session needs, again after a reset. */
static int pg_session_setup(pg_conn *c, ts_err *err)
{
    PQsetNoticeProcessor(c->pc, quiet_notices, NULL);
    c->session++;
    return pg_exec_text(c,
                        c->writer ? "SET client_min_messages TO warning;"
                                    "SET synchronous_commit TO on;"
                                    "SET extra_float_digits TO 3"
                                  : "SET client_min_messages TO warning;"
                                    "SET default_transaction_read_only TO on;"
                                    "SET extra_float_digits TO 3",
                        NULL, "session setup", err);
}

static void pg_disconnect(void *db)
{
    pg_conn *c = db;
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
    c->writer = writer;
    c->pc = PQconnectdb(target);
    if (!c->pc || PQstatus(c->pc) != CONNECTION_OK) {
        /* the message names host and port, never the password */
        const char *msg = c->pc ? PQerrorMessage(c->pc) : "out of memory";
        ts_err_set(err, TS_EIO, "postgresql: connect: %.*s", (int)strcspn(msg, "\n"), msg);
        pg_disconnect(c);
        return TS_EIO;
    }
    int rc = pg_session_setup(c, err);
    if (rc) {
        pg_disconnect(c);
        return rc;
    }
    *out = c;
    return 0;
}

static bool pg_healthy(void *db)
{
    pg_conn *c = db;
    return c && PQstatus(c->pc) == CONNECTION_OK;
}

static int pg_exec(void *db, const char *sql, ts_err *err)
{
    return pg_exec_text(db, sql, NULL, "exec", err);
}

/* ---- transactions ---- */

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
        int64_t now = PQntuples(res) == 1 ? strtoll(PQgetvalue(res, 0, 0), NULL, 10) : -1;
        PQclear(res);
        if (now != mine)
            rc = ts_err_set(err, TS_EFENCED, "fenced: epoch %lld is not the lease's %lld",
                            (long long)mine, (long long)now);
    }
    if (rc)
        pg_exec_text(c, "ROLLBACK", NULL, "rollback", NULL);
    return rc;
}

static void pg_set_fence(void *db, int64_t epoch)
{
    pg_conn *c = db;
    atomic_store(&c->fence, epoch);
}

/* A session the server dropped (restart, failover, idle kill) is noticed
 * only at its next use: BEGIN on it fails and leaves it CONNECTION_BAD. As
 * nothing of the group has run yet, one reset and a second BEGIN are safe. */
static int pg_begin_once(pg_conn *c, ts_err *err)
{
    for (int attempt = 0;; attempt++) {
        if (PQstatus(c->pc) != CONNECTION_OK) {
            PQreset(c->pc);
            if (PQstatus(c->pc) != CONNECTION_OK)
                return pg_fail(c, NULL, "reconnect", err);
            int rc = pg_session_setup(c, err);
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

/* exclusive: the migration's advisory lock, held to the transaction's end. */
static int pg_begin(void *db, bool exclusive, ts_err *err)
{
    int rc = pg_begin_once(db, err);
    if (rc || !exclusive)
        return rc;
    char sql[64];
    snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%d)", MIGRATION_LOCK_KEY);
    return pg_exec_text(db, sql, NULL, "migration lock", err);
}

static int pg_commit(void *db, ts_err *err)
{
    pg_conn *c = db;
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

static void pg_rollback(void *db)
{
    pg_conn *c = db;
    if (PQstatus(c->pc) == CONNECTION_OK && PQtransactionStatus(c->pc) != PQTRANS_IDLE)
        pg_exec_text(c, "ROLLBACK", NULL, "rollback", NULL);
}

/* ---- statements ---- */

static int pg_prepare(void *db, int slot, const char *sql, void **out, ts_err *err)
{
    pg_stmt *st = calloc(1, sizeof *st);
    if (!st || !(st->sql = strdup(sql))) {
        free(st);
        return ts_err_set(err, TS_ENOMEM, "store: out of memory");
    }
    st->c = db;
    snprintf(st->name, sizeof st->name, "ts_%d", slot);
    *out = st;
    return 0;
}

static void pg_reset(void *p)
{
    pg_stmt *st = p;
    PQclear(st->res);
    st->res = NULL;
    st->row = -1;
    st->n = 0;
}

static void pg_finalize(void *p)
{
    pg_stmt *st = p;
    pg_reset(st);
    free(st->sql);
    free(st);
}

static void pg_param(pg_stmt *st, int i, const char *v, int len, int fmt)
{
    if (i < 1 || i > PG_PARAMS_MAX)
        return;
    st->v[i - 1] = v;
    st->len[i - 1] = len;
    st->fmt[i - 1] = fmt;
    if (i > st->n)
        st->n = i;
}

static void pg_bind_i64(void *p, int i, int64_t v)
{
    pg_stmt *st = p;
    if (i < 1 || i > PG_PARAMS_MAX)
        return;
    snprintf(st->num[i - 1], sizeof st->num[0], "%lld", (long long)v);
    pg_param(st, i, st->num[i - 1], 0, 0);
}

static void pg_bind_f64(void *p, int i, double v)
{
    pg_stmt *st = p;
    if (i < 1 || i > PG_PARAMS_MAX)
        return;
    snprintf(st->num[i - 1], sizeof st->num[0], "%.17g", v);
    pg_param(st, i, st->num[i - 1], 0, 0);
}

static void pg_bind_text(void *p, int i, const char *v) { pg_param(p, i, v, 0, 0); }

static void pg_bind_blob(void *p, int i, const uint8_t *b, int n)
{
    pg_param(p, i, (const char *)b, n, 1);
}

/* Prepares in this session if not yet, then runs with the bound parameters. */
static int pg_run(pg_stmt *st, const char *what, ts_err *err)
{
    pg_conn *c = st->c;
    if (st->prepared != c->session) {
        PGresult *res = PQprepare(c->pc, st->name, st->sql, 0, NULL);
        bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
        int rc = ok ? 0 : pg_fail(c, res, what, err);
        PQclear(res);
        if (rc)
            return rc;
        st->prepared = c->session;
    }
    PGresult *res = PQexecPrepared(c->pc, st->name, st->n, st->v, st->len, st->fmt, 0);
    if (!pg_ok(res)) {
        int rc = pg_fail(c, res, what, err);
        PQclear(res);
        return rc;
    }
    st->res = res;
    st->row = -1;
    return 0;
}

static int pg_step(void *p, const char *what, ts_err *err)
{
    pg_stmt *st = p;
    if (!st->res) {
        int rc = pg_run(st, what, err);
        if (rc)
            return rc;
    }
    if (st->row + 1 >= PQntuples(st->res))
        return 0;
    st->row++;
    return 1;
}

static bool pg_col_null(void *p, int i)
{
    pg_stmt *st = p;
    return PQgetisnull(st->res, st->row, i);
}

static int64_t pg_col_i64(void *p, int i)
{
    pg_stmt *st = p;
    return strtoll(PQgetvalue(st->res, st->row, i), NULL, 10);
}

static double pg_col_f64(void *p, int i)
{
    pg_stmt *st = p;
    return strtod(PQgetvalue(st->res, st->row, i), NULL);
}

static const char *pg_col_text(void *p, int i, size_t *len)
{
    pg_stmt *st = p;
    if (PQgetisnull(st->res, st->row, i)) {
        *len = 0;
        return NULL;
    }
    *len = (size_t)PQgetlength(st->res, st->row, i);
    return PQgetvalue(st->res, st->row, i);
}

static int hexval(char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* A bytea column in text form ("\x" then hex digits). */
static void pg_col_blob(void *p, int i, uint8_t *out, int cap)
{
    pg_stmt *st = p;
    const char *v = PQgetvalue(st->res, st->row, i);
    memset(out, 0, (size_t)cap);
    if (v[0] != '\\' || v[1] != 'x')
        return;
    v += 2;
    for (int k = 0; k < cap; k++) {
        int hi = hexval(v[2 * k]), lo = hi < 0 ? -1 : hexval(v[2 * k + 1]);
        if (hi < 0 || lo < 0)
            return;
        out[k] = (uint8_t)(hi << 4 | lo);
    }
}

static int64_t pg_changes(void *p)
{
    pg_stmt *st = p;
    return st->res ? strtoll(PQcmdTuples(st->res), NULL, 10) : 0;
}

/* Fault injection: the socket is shut under libpq, as when the server
 * restarts; the next statement fails and the session reads CONNECTION_BAD. */
static void pg_drop_session(void *db)
{
    pg_conn *c = db;
    int fd = c && c->pc ? PQsocket(c->pc) : -1;
    if (fd >= 0)
        shutdown(fd, SHUT_RDWR);
}

const struct store_backend store_pg_backend = {
    .name = "postgresql",
    .dialect = STORE_PG,
    STORE_BACKEND_CORE(pg),
    .drop_session = pg_drop_session,
    .set_fence = pg_set_fence,
};
