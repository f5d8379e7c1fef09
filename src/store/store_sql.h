/*
 * store_sql.h - internal: the one SQL layer of the store, and the thin
 * backend interface it runs on.
 *
 * Every statement is written once (store_stmts.c), in a neutral spelling:
 * parameters as ?N, and the few places where SQLite and PostgreSQL differ
 * as @WORDS that one table expands per dialect. The row operations
 * (store_rows.c) and the rolled-up accounting (store_usage.c) are written
 * once against a store_conn; a backend (store_sqlite.c, store_pg.c) only
 * connects, runs scripts and transactions, prepares, binds, steps and reads
 * columns, in its own client library.
 *
 * Threads: a store_conn is used by one thread at a time; nothing here
 * locks. Errors: functions return 0 or a negative TS_E* code and fill err
 * (which may be NULL); messages start with the backend's name.
 */
#ifndef TS_STORE_SQL_H
#define TS_STORE_SQL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/store.h"

enum store_dialect { STORE_SQLITE = 0, STORE_PG = 1, STORE_DIALECTS };

/* A backend: one client library. `db` is its connection, `st` one of its
 * prepared statements. A statement runs from its first step after binding
 * to its reset; reset also clears the bindings. */
struct store_backend {
    const char *name; /* "sqlite", "postgresql": what errors start with */
    enum store_dialect dialect;
    /* target: a file path (sqlite) or a libpq connection URI. The writer
     * is the one connection that changes the store and migrates it. */
    int (*connect)(const char *target, bool writer, void **db, ts_err *err);
    void (*disconnect)(void *db);
    /* false once the connection is unusable (dropped by the server) */
    bool (*healthy)(void *db);
    /* a script of statements without parameters (already expanded) */
    int (*exec)(void *db, const char *sql, ts_err *err);
    /* exclusive: also excludes other processes migrating the same store */
    int (*begin)(void *db, bool exclusive, ts_err *err);
    int (*commit)(void *db, ts_err *err);
    void (*rollback)(void *db); /* nothing to act on when it fails */
    /* sql is expanded for the dialect; slot names it uniquely on db */
    int (*prepare)(void *db, int slot, const char *sql, void **st, ts_err *err);
    void (*finalize)(void *st);
    void (*reset)(void *st);
    void (*bind_i64)(void *st, int i, int64_t v);
    void (*bind_f64)(void *st, int i, double v);
    void (*bind_text)(void *st, int i, const char *v); /* NULL: SQL NULL */
    void (*bind_blob)(void *st, int i, const uint8_t *b, int n);
    /* 1: a row is there to read; 0: done; < 0: failed (what names it) */
    int (*step)(void *st, const char *what, ts_err *err);
    bool (*col_null)(void *st, int i);
    int64_t (*col_i64)(void *st, int i);
    double (*col_f64)(void *st, int i);
    /* NULL for SQL NULL; *len its length in bytes */
    const char *(*col_text)(void *st, int i, size_t *len);
    /* copies up to cap bytes of a binary column into out */
    void (*col_blob)(void *st, int i, uint8_t *out, int cap);
    int64_t (*changes)(void *st); /* rows the last run changed */
    /* Fault injection: cuts the session as a server restart would; NULL
     * where there is no session. */
    void (*drop_session)(void *db);
    /* High availability: every transaction begun from now on checks that
     * the lease row still has this epoch (0: no check) and fails with
     * TS_EFENCED otherwise; NULL where there is no lease (SQLite). Safe
     * from any thread. */
    void (*set_fence)(void *db, int64_t epoch);
};

/*
 * The members every backend must have, from its functions PREFIX_connect ..
 * PREFIX_changes: a backend that lacks one fails to compile, where a list of
 * designated members would leave it NULL and crash at its first use.
 */
#define STORE_BACKEND_CORE(prefix)     \
    .connect = prefix##_connect,       \
    .disconnect = prefix##_disconnect, \
    .healthy = prefix##_healthy,       \
    .exec = prefix##_exec,             \
    .begin = prefix##_begin,           \
    .commit = prefix##_commit,         \
    .rollback = prefix##_rollback,     \
    .prepare = prefix##_prepare,       \
    .finalize = prefix##_finalize,     \
    .reset = prefix##_reset,           \
    .bind_i64 = prefix##_bind_i64,     \
    .bind_f64 = prefix##_bind_f64,     \
    .bind_text = prefix##_bind_text,   \
    .bind_blob = prefix##_bind_blob,   \
    .step = prefix##_step,             \
    .col_null = prefix##_col_null,     \
    .col_i64 = prefix##_col_i64,       \
    .col_f64 = prefix##_col_f64,       \
    .col_text = prefix##_col_text,     \
    .col_blob = prefix##_col_blob,     \
    .changes = prefix##_changes

extern const struct store_backend store_sqlite_backend;
extern const struct store_backend store_pg_backend;

/* The statements (store_stmts.c). Job lists use one of LIST_VARIANTS
 * statements, one per combination of filters; the rolled-up accounting's
 * statements (enum ts_ru_stmt) follow them. */
enum store_stmt {
    ST_SET_VERSION,
    ST_GET_VERSION,
    ST_JOB_INSERT,
    ST_JOB_BY_IDEM,
    ST_JOB_UPDATE,
    ST_JOB_GEN,
    ST_JOB_GET,
    ST_COUNTS_ALL,
    ST_COUNTS_TENANT,
    ST_EVENT_INSERT,
    ST_EVENTS_JOB,
    ST_EVENTS_ALL,
    ST_TOKEN_BY_NAME,
    ST_TOKEN_INSERT,
    ST_TOKEN_REVOKE,
    ST_TOKEN_BY_HASH,
    ST_TOKENS_ALL,
    ST_TOKENS_TENANT,
    ST_SETTING_PUT,
    ST_SETTING_GET,
    ST_USAGE,
    ST_IDS_RESERVE,
    ST_ARRAY_PUT,
    ST_ARRAYS_OPEN,
    ST_RESV_INSERT,
    ST_RESV_DELETE,
    ST_RESV_LIST,
    ST_COUNT
};
/* Job-list filter bits: which conditions a variant has. */
/* LF_STATE: one state; LF_STATES: a set of several (a bit mask parameter) */
/* LF_DESC: newest first, ?1 the id to list below */
enum { LF_TENANT = 1, LF_OWNER = 2, LF_STATE = 4, LF_ACTIVE = 8, LF_STATES = 16, LF_DESC = 32,
       LF_VARIANTS = 64 };
#define ST_LIST_SLOT(mask) (ST_COUNT + (mask))
#define ST_RU_SLOT(ru) (ST_COUNT + LF_VARIANTS + (ru))
/* Room for the rolled-up accounting's statements (checked in store_sql.c). */
#define ST_RU_MAX 16
#define ST_SLOTS (ST_COUNT + LF_VARIANTS + ST_RU_MAX)

/* The neutral text of statement `which`, of a job-list variant (into buf),
 * of a rolled-up accounting statement. */
const char *store_stmt_sql(enum store_stmt which);
void store_list_sql(int mask, char *buf, size_t cap);
const char *store_ru_sql(int ru);

/* Expands neutral SQL for a dialect: ?N to $N on PostgreSQL, @WORDS to the
 * dialect's spelling. Returns a malloc'd string, NULL when out of memory. */
char *store_expand(enum store_dialect d, const char *sql);

/* A connection of a backend, with its prepared statements. */
typedef struct store_conn {
    const struct store_backend *be;
    void *db;
    void *st[ST_SLOTS];
} store_conn;

int store_connect(const struct store_backend *be, const char *target, bool writer,
                  store_conn **out, ts_err *err);
void store_disconnect(store_conn *c);
bool store_healthy(const store_conn *c);
/* A script in neutral SQL (migrations). */
int store_exec(store_conn *c, const char *sql, ts_err *err);
int store_begin(store_conn *c, bool exclusive, ts_err *err);
int store_commit(store_conn *c, ts_err *err);
void store_rollback(store_conn *c);

/* The statement in `slot`, prepared from neutral `sql` on first use, ready
 * for binding. */
int store_stmt(store_conn *c, int slot, const char *sql, void **st, ts_err *err);
/* Steps st to its end, ignoring rows, then resets it. */
int store_finish(store_conn *c, void *st, const char *what, ts_err *err);
/* Copies a text column into a fixed field (NULL reads as ""). */
void store_col_field(store_conn *c, void *st, int i, char *dst, size_t cap);
/* A malloc'd copy of a nullable text column; false when out of memory. */
bool store_col_dup(store_conn *c, void *st, int i, char **out);

/* ---- row operations (store_rows.c), written once for both dialects ---- */

/* Writes, inside a transaction. job_insert sets *id and *existed (the
 * owner's idem_key was used before: *id is that job's). job_update writes
 * the mutable fields with gen = in->gen + 1 if the stored gen is in->gen.
 * None of them changes its inputs, so a group can be re-run. */
int store_set_version(store_conn *c, int version, ts_err *err);
/* The store's version; TS_ENOENT when schema_version has no row. */
int store_get_version(store_conn *c, int64_t *v, ts_err *err);
int store_job_insert(store_conn *c, const ts_job_row *in, int64_t *id, bool *existed,
                     ts_err *err);
int store_job_update(store_conn *c, const ts_job_row *in, ts_err *err);
int store_event_append(store_conn *c, const ts_event_row *ev, ts_err *err);
int store_token_insert(store_conn *c, const ts_token_row *in, int64_t *id, ts_err *err);
int store_token_revoke(store_conn *c, const char *name, double now_s, ts_err *err);
int store_setting_put(store_conn *c, const char *key, const char *value, ts_err *err);
/* Arrays (docs/store.md "Arrays"): ids_reserve makes the next id the store
 * hands out greater than last; array_put inserts or updates (next, open). */
int store_ids_reserve(store_conn *c, int64_t last, ts_err *err);
int store_array_put(store_conn *c, const ts_array_row *a, ts_err *err);
/* TS_EEXIST on a taken name; TS_ENOENT when there is no such row. */
int store_resv_insert(store_conn *c, const ts_resv_row *r, ts_err *err);
int store_resv_delete(store_conn *c, const char *name, ts_err *err);

/* Reads (any connection). A list leaves *rows NULL and *n 0 when it fails. */
int store_job_get(store_conn *c, int64_t id, ts_job_row *out, ts_err *err);
int store_job_by_idem(store_conn *c, const char *owner, const char *key, int64_t *id,
                      ts_err *err);
int store_job_list(store_conn *c, const ts_job_filter *f, int64_t after_id, int limit,
                   ts_job_row **rows, int *n, ts_err *err);
int store_job_counts(store_conn *c, const char *tenant, int64_t out[TS_JOB_STATES],
                     ts_err *err);
int store_event_list(store_conn *c, int64_t job_id, int64_t after_id, int limit,
                     ts_event_row **rows, int *n, ts_err *err);
int store_token_by_hash(store_conn *c, const uint8_t hash[TS_TOKEN_HASH_BYTES],
                        ts_token_row *out, ts_err *err);
int store_token_list(store_conn *c, const char *tenant, ts_token_row **rows, int *n,
                     ts_err *err);
/* *value NULL (and 0 returned) when the key was never set. */
int store_setting_get(store_conn *c, const char *key, char **value, ts_err *err);
int store_arrays_open(store_conn *c, ts_array_row **rows, int *n, ts_err *err);
int store_resv_list(store_conn *c, ts_resv_row **rows, int *n, ts_err *err);
/* The jobs' part of the full-scan usage (ts_store_usage_scan). */
int store_usage_jobs(store_conn *c, double from_s, double to_s, double now_s,
                     ts_usage_row **rows, int *n, ts_err *err);

#endif
