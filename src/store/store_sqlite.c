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
 * The file belongs to one process (docs/ha.md): the writer holds an
 * exclusive flock on "<file>.lock", which names its pid, for as long as it
 * is open, and a second process (a second tesserad on the same state
 * directory) is refused at start, naming that pid, rather than splitting
 * the control plane in two over one file.
 *
 * Only the client library lives here: the statements are store_stmts.c's,
 * prepared once per connection (SQLITE_PREPARE_PERSISTENT) and kept by
 * store_sql.c.
 */
#include "store/store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* How long a connection waits for another process's lock before failing. */
#define BUSY_TIMEOUT_MS 10000

static int sq_fail(sqlite3 *db, int code, const char *what, ts_err *err)
{
    int ts = code == SQLITE_NOMEM ? TS_ENOMEM
             : (code & 0xff) == SQLITE_CONSTRAINT ? TS_EEXIST
             : (code & 0xff) == SQLITE_BUSY       ? TS_ETIMEDOUT
                                                   : TS_EIO;
    const char *file = db ? sqlite3_db_filename(db, "main") : NULL;
    if (((code & 0xff) == SQLITE_CORRUPT || (code & 0xff) == SQLITE_NOTADB) && file && *file)
        return ts_err_set(err, ts, "sqlite: %s: %s: %s",
                          what, file, sqlite3_errmsg(db));
    return ts_err_set(err, ts, "sqlite: %s: %s", what,
                      db ? sqlite3_errmsg(db) : sqlite3_errstr(code));
}

static int sq_exec(void *db, const char *sql, ts_err *err)
{
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : sq_fail(db, rc, "exec", err);
}

/* The writers this process holds and their lock files' descriptors. */
#define SQ_WRITERS_MAX 16
static struct {
    void *db;
    int fd;
} sq_writers[SQ_WRITERS_MAX];
static pthread_mutex_t sq_writers_mu = PTHREAD_MUTEX_INITIALIZER;

/* Takes "<target>.lock" for writer db: 0, or TS_EEXIST naming the pid that
 * holds it. An in-memory or URI target has no file of its own to guard. */
static int sq_lock(const char *target, void *db, ts_err *err)
{
    if (strcmp(target, ":memory:") == 0 || strncmp(target, "file:", 5) == 0)
        return 0;
    char path[4096];
    if (snprintf(path, sizeof path, "%s.lock", target) >= (int)sizeof path)
        return ts_err_set(err, TS_EINVAL, "sqlite: %s: path too long", target);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return ts_err_set(err, TS_EIO, "sqlite: %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        close(fd);
        return ts_err_set(err, TS_EEXIST, "sqlite: %s is in use by another process (pid %s, "
                          "which holds %s): a SQLite store belongs to one tesserad "
                          "(docs/ha.md); stop that one first", target, pid[0] ? pid : "?",
                          path);
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    /* written or not, the lock holds: only a second process's message lacks the pid */
    bool named = ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)len, 0) == len;
    (void)named;
    pthread_mutex_lock(&sq_writers_mu);
    for (int i = 0; i < SQ_WRITERS_MAX; i++)
        if (!sq_writers[i].db) {
            sq_writers[i].db = db;
            sq_writers[i].fd = fd;
            fd = -1;
            break;
        }
    pthread_mutex_unlock(&sq_writers_mu);
    if (fd >= 0) {
        close(fd);
        return ts_err_set(err, TS_ENOMEM, "sqlite: %s: more than %d stores open in one process",
                          target, SQ_WRITERS_MAX);
    }
    return 0;
}

static void sq_disconnect(void *db)
{
    pthread_mutex_lock(&sq_writers_mu);
    for (int i = 0; db && i < SQ_WRITERS_MAX; i++)
        if (sq_writers[i].db == db) {
            close(sq_writers[i].fd); /* the lock goes with it */
            sq_writers[i].db = NULL;
        }
    pthread_mutex_unlock(&sq_writers_mu);
    sqlite3_close(db);
}

/* The writer runs in WAL mode with every commit flushed; readers only read. */
static int sq_setup(sqlite3 *db, const char *target, bool writer, ts_err *err)
{
    if (!writer)
        return sq_exec(db, "PRAGMA query_only=1", err);
    /* journal_mode answers with the mode in force: "wal" or a refusal */
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
    bool wal = rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) &&
               strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
    sqlite3_finalize(st);
    if (!wal)
        return ts_err_set(err, TS_EIO, "sqlite: %s: cannot switch to WAL mode: %s", target,
                          sqlite3_errmsg(db));
    return sq_exec(db, "PRAGMA synchronous=FULL", err);
}

static int sq_connect(const char *target, bool writer, void **out, ts_err *err)
{
    sqlite3 *db = NULL;
    *out = NULL;
    /* one thread at a time per connection, so SQLite's own mutexes are spared */
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (writer ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(target, &db, flags, NULL);
    if (rc != SQLITE_OK) {
        int code = rc == SQLITE_NOMEM ? TS_ENOMEM : TS_EIO;
        ts_err_set(err, code, "sqlite: open %s: %s", target,
                   db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return code;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
    if ((writer && (rc = sq_lock(target, db, err))) || (rc = sq_setup(db, target, writer, err))) {
        sq_disconnect(db);
        return rc;
    }
    *out = db;
    return 0;
}

static bool sq_healthy(void *db) { return db != NULL; }

/* BEGIN IMMEDIATE takes the write lock at once, which also excludes other
 * processes migrating the same file. */
static int sq_begin(void *db, bool exclusive, ts_err *err)
{
    (void)exclusive;
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : sq_fail(db, rc, "begin", err);
}

static int sq_commit(void *db, ts_err *err)
{
    int rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : sq_fail(db, rc, "commit", err);
}

static void sq_rollback(void *db)
{
    /* after some errors SQLite has already rolled back: nothing to undo */
    if (!sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
}

static int sq_prepare(void *db, int slot, const char *sql, void **st, ts_err *err)
{
    (void)slot;
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL);
    if (rc != SQLITE_OK)
        return sq_fail(db, rc, "prepare", err);
    *st = s;
    return 0;
}

static void sq_finalize(void *st) { sqlite3_finalize(st); }

static void sq_reset(void *st)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

static void sq_bind_i64(void *st, int i, int64_t v) { sqlite3_bind_int64(st, i, v); }

static void sq_bind_f64(void *st, int i, double v) { sqlite3_bind_double(st, i, v); }

static void sq_bind_text(void *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

static void sq_bind_blob(void *st, int i, const uint8_t *b, int n)
{
    sqlite3_bind_blob(st, i, b, n, SQLITE_STATIC);
}

static int sq_step(void *st, const char *what, ts_err *err)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return sq_fail(sqlite3_db_handle(st), rc, what, err);
}

static bool sq_col_null(void *st, int i) { return sqlite3_column_type(st, i) == SQLITE_NULL; }

static int64_t sq_col_i64(void *st, int i) { return sqlite3_column_int64(st, i); }

static double sq_col_f64(void *st, int i) { return sqlite3_column_double(st, i); }

static const char *sq_col_text(void *st, int i, size_t *len)
{
    const char *t = (const char *)sqlite3_column_text(st, i);
    *len = t ? (size_t)sqlite3_column_bytes(st, i) : 0;
    return t;
}

static void sq_col_blob(void *st, int i, uint8_t *out, int cap)
{
    const void *b = sqlite3_column_blob(st, i);
    int nb = sqlite3_column_bytes(st, i);
    memset(out, 0, (size_t)cap);
    if (b)
        memcpy(out, b, (size_t)(nb < cap ? nb : cap));
}

static int64_t sq_changes(void *st) { return sqlite3_changes(sqlite3_db_handle(st)); }

const struct store_backend store_sqlite_backend = {
    .name = "sqlite",
    .dialect = STORE_SQLITE,
    STORE_BACKEND_CORE(sq),
};
