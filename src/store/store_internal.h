/*
 * store_internal.h - internal: the backend ops table behind ts_store, and the
 * pieces store.c (the object, the public calls, the reader pool),
 * store_commit.c (the group committer) and store_schema.c (migrations) share.
 *
 * A backend knows one SQL dialect and one client library, nothing about
 * threads: every function gets a connection that exactly one thread uses at
 * a time. The writer connection belongs to the committer thread, which wraps
 * the write functions in begin/commit; reader connections come from a small
 * pool and run in autocommit, one statement per call, so each read sees
 * everything committed before it started.
 */
#ifndef TS_STORE_INTERNAL_H
#define TS_STORE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "tessera/store.h"

/* The schema this code writes. A store at a higher version is refused. */
#define TS_SCHEMA_VERSION 9
/* The first schema with rolled-up accounting (store_usage.c). */
#define TS_SCHEMA_ROLLUP 8
/* Settings key of the tenants YAML document. */
#define TS_SETTING_TENANTS "tenants"
/* Page size bounds shared by job and event lists. */
#define TS_STORE_LIST_MAX 10000

/* Rolled-up accounting (store_usage.c): the statements each backend runs
 * for it, in its own dialect. Every statement binds the arguments its
 * TS_RU_SHAPES params string names, in that order ('j' job, 't' tenant,
 * 'i' tier, 'm' model, 's' span, '0'..'3' d[k]) and returns rows of the columns its
 * cols string names ('t' the next text, 'i' the integer, 'r' the next real;
 * NULL reads as "" or 0). */
enum ts_ru_stmt {
    TS_RU_RUN_OF_JOB, /* a job's own run as its row says and as recorded */
    TS_RU_RUN_DEL,    /* forgets a job's recorded own run */
    TS_RU_RUN_ADD,    /* records a closed run */
    TS_RU_BUCKET_ADD, /* adds to one bucket */
    TS_RU_BUCKETS,    /* sums of the span's buckets of width d0 starting in [d1, d2) */
    TS_RU_EDGE_AT,    /* one edge's buckets (width d0, start d1): GPU-s, GPUs carried in */
    TS_RU_POINTS,     /* the span's runs' starts and ends in [d0, d1), weighed to d1 */
    TS_RU_RUNNING,    /* jobs still running, clipped to [d0, d1) at now d2 */
    TS_RU_OLD_JOBS,   /* migration: every ended job's run */
    TS_RU_OLD_RUNS,   /* migration: every "run-ended" event with its job's tenant */
    TS_RU_READ_BEGIN, /* on a reader: one snapshot for the statements of an answer */
    TS_RU_READ_END,
    TS_RU_STMTS
};
typedef struct ts_ru_args {
    int64_t job;
    int64_t span; /* 0: runs up to a week (hour edges), 1: longer (day edges) */
    const char *tenant;
    int64_t tier;
    const char *model;
    double d[4];
} ts_ru_args;
#define TS_RU_TEXT_MAX 256 /* a name, or a "run-ended" event's detail */
typedef struct ts_ru_row {
    char text[3][TS_RU_TEXT_MAX];
    int64_t i;
    double v[6];
} ts_ru_row;
/* Called per row; a non-zero return stops the statement and is returned. */
typedef int (*ts_ru_row_fn)(void *ctx, const ts_ru_row *row, ts_err *err);
extern const char *const TS_RU_SHAPES[TS_RU_STMTS][2];

struct ts_store_ops {
    const char *name; /* "sqlite", "postgresql" */
    /* target: a file path (sqlite) or a libpq connection URI. The writer
     * is the one connection that changes the store and migrates it. */
    int (*connect)(const char *target, bool writer, void **conn, ts_err *err);
    void (*disconnect)(void *conn);
    /* false once the connection is unusable (dropped by the server); the
     * pool then discards it instead of handing it out again. */
    bool (*healthy)(void *conn);

    /* Schema: run a script of statements without parameters (migrations
     * only); read one integer (ENOENT when there is no row). */
    int (*exec_script)(void *conn, const char *sql, ts_err *err);
    int (*query_int)(void *conn, const char *sql, int64_t *out, ts_err *err);
    /* Begins the migration transaction, excluding other processes that
     * open the same store at the same moment. */
    int (*begin_exclusive)(void *conn, ts_err *err);
    int (*set_version)(void *conn, int version, ts_err *err);

    /* Transactions on the writer. rollback never fails in a way the caller
     * could act on; a dead connection is reported by healthy(). */
    int (*begin)(void *conn, ts_err *err);
    int (*commit)(void *conn, ts_err *err);
    void (*rollback)(void *conn);

    /* Writes, inside a transaction. job_insert sets *id and *existed (the
     * owner's idem_key was used before: *id is that job's). job_update
     * writes the mutable fields with gen = in->gen + 1 if the stored gen is
     * in->gen. None of them changes its inputs, so a group can be re-run. */
    int (*job_insert)(void *conn, const ts_job_row *in, int64_t *id, bool *existed,
                      ts_err *err);
    int (*job_update)(void *conn, const ts_job_row *in, ts_err *err);
    int (*event_append)(void *conn, const ts_event_row *ev, ts_err *err);
    int (*token_insert)(void *conn, const ts_token_row *in, int64_t *id, ts_err *err);
    int (*token_revoke)(void *conn, const char *name, double now_s, ts_err *err);
    int (*setting_put)(void *conn, const char *key, const char *value, ts_err *err);
    /* Arrays (docs/store.md "Arrays"): ids_reserve makes the next id the
     * store hands out greater than last; array_put inserts or updates (next,
     * open) an array's row. */
    int (*ids_reserve)(void *conn, int64_t last, ts_err *err);
    int (*array_put)(void *conn, const ts_array_row *a, ts_err *err);
    /* Reservations: resv_insert fails with TS_EEXIST on a taken name,
     * resv_delete with TS_ENOENT when there is no such row. */
    int (*resv_insert)(void *conn, const ts_resv_row *r, ts_err *err);
    int (*resv_delete)(void *conn, const char *name, ts_err *err);

    /* Reads (any connection; the writer too, inside its transaction). */
    int (*job_get)(void *conn, int64_t id, ts_job_row *out, ts_err *err);
    int (*job_list)(void *conn, const ts_job_filter *f, int64_t after_id, int limit,
                    ts_job_row **rows, int *n, ts_err *err);
    int (*job_counts)(void *conn, const char *tenant, int64_t out[TS_JOB_STATES], ts_err *err);
    int (*event_list)(void *conn, int64_t job_id, int64_t after_id, int limit,
                      ts_event_row **rows, int *n, ts_err *err);
    int (*token_by_hash)(void *conn, const uint8_t hash[TS_TOKEN_HASH_BYTES],
                         ts_token_row *out, ts_err *err);
    int (*token_list)(void *conn, const char *tenant, ts_token_row **rows, int *n,
                      ts_err *err);
    /* *value NULL (and 0 returned) when the key was never set. */
    int (*setting_get)(void *conn, const char *key, char **value, ts_err *err);
    /* The open arrays, ascending id; *rows malloc'd (the caller frees it, also on error). */
    int (*arrays_open)(void *conn, ts_array_row **rows, int *n, ts_err *err);
    /* Every reservation; *rows malloc'd (the caller frees it, also on error). */
    int (*resv_list)(void *conn, ts_resv_row **rows, int *n, ts_err *err);
    /* The jobs' part of the full-scan usage (ts_store_usage_scan). */
    int (*usage)(void *conn, double from_s, double to_s, double now_s, ts_usage_row **rows,
                 int *n, ts_err *err);
    /* Runs rolled-up accounting statement `stmt`, each row to fn (NULL:
     * rows ignored). */
    int (*rollup)(void *conn, int stmt, const ts_ru_args *a, ts_ru_row_fn fn, void *ctx,
                  ts_err *err);
    /* Fault injection (store_faults.c): cuts the session under the client
     * library, as a server restart would; NULL where there is no session. */
    void (*drop_session)(void *conn);
    /* High availability (store_lease.c): from now on every transaction
     * begun on conn first checks that the lease row still has this epoch
     * (0: no check) and fails with TS_EFENCED otherwise. NULL where the
     * backend has no lease (SQLite). Safe to call from any thread. */
    void (*set_fence)(void *conn, int64_t epoch);
};

/* Injected failures (store_faults.c, docs/store.md "Fault injection").
 * Guarded by the queue mutex; only the committer reads it while writing. */
enum ts_fault_kind { TS_FAULT_IO = 0, TS_FAULT_FULL = 1, TS_FAULT_DROP = 2, TS_FAULT_COMMIT = 3 };
typedef struct ts_store_faults {
    bool on;
    uint64_t nth;      /* fail the nth write from now (0 = not this rule) */
    uint64_t every;    /* fail every nth write (0 = not this rule) */
    int kind;          /* enum ts_fault_kind */
    uint64_t delay_ms; /* every transaction waits this long before COMMIT (a slow disk) */
    uint64_t seen;     /* writes counted since the rules were set */
    uint64_t injected; /* failures injected so far */
} ts_store_faults;

/* Under qmu, from the committer, once per write it is about to run: whether
 * this one fails, and how. */
bool ts_store_fault_due(ts_store *s, int *kind);

extern const struct ts_store_ops ts_store_sqlite_ops;
extern const struct ts_store_ops ts_store_pg_ops;

/* One queued write; lives on the calling thread's stack until done. */
enum ts_wop_kind {
    TS_WOP_JOB_INSERT,
    TS_WOP_JOB_INSERTS, /* an array: all of its rows or none */
    TS_WOP_JOB_UPDATES, /* one update or a whole apply: rows, then events */
    TS_WOP_TOKEN_INSERT,
    TS_WOP_TOKEN_REVOKE,
    TS_WOP_SETTING_PUT,
    TS_WOP_RESV_INSERT,
    TS_WOP_RESV_DELETE, /* name */
};

typedef struct ts_wop {
    enum ts_wop_kind kind;
    /* inputs, owned by the caller, read only */
    const ts_job_row *rows;
    int nrows;
    const ts_event_row *events;
    int nevents;
    const ts_token_row *token;
    const ts_resv_row *resv;
    const char *name; /* token to revoke, or setting key */
    const char *value;
    double now_s;
    /* results, valid once done */
    int rc;
    ts_err err;
    int64_t id;
    bool existed;
    ts_job_row stored; /* the earlier job when existed (store-owned strings) */
    /* TS_WOP_JOB_INSERTS: per row, the caller's arrays of nrows */
    int64_t *many_id;
    bool *many_existed;
    ts_job_row *many_stored;
    /* TS_WOP_JOB_INSERTS of an array's elements: its row, written after
     * them; id 0 = a new array, whose id becomes rows[0]'s and whose other
     * ids are reserved (array_id gets it); NULL: no array row */
    const ts_array_row *array;
    int64_t array_id;
    bool failed;       /* left out of its group's retry */
    bool done;
    struct ts_wop *next;
} ts_wop;

#define TS_STORE_READERS_MAX 8

struct ts_store {
    const struct ts_store_ops *ops;
    char *target;     /* path or URI handed to connect */
    int schema_version;
    /* the committer and its queue; qmu guards everything below it */
    void *wconn;
    pthread_t committer;
    bool committer_started;
    pthread_mutex_t qmu;
    pthread_cond_t qcv;    /* the committer waits for work */
    pthread_cond_t donecv; /* callers wait for their op */
    ts_wop *qhead, *qtail;
    int nqueued;
    bool stopping;
    bool hold; /* tests: leave the queue alone, to build a known group */
    ts_store_stats stats;
    ts_store_faults faults;
    /* reader pool; rmu guards it */
    pthread_mutex_t rmu;
    pthread_cond_t rcv;
    void *readers[TS_STORE_READERS_MAX];
    bool reader_busy[TS_STORE_READERS_MAX];
    int nreaders;
    /* the lease's own session (store_lease.c), opened on first use;
     * lease_mu guards it */
    pthread_mutex_t lease_mu;
    void *lease;
};

/* Closes the lease session, if one was opened (store_lease.c). */
void ts_store_lease_fini(ts_store *s);

/* Migrates the writer's store to `target_version` (TS_SCHEMA_VERSION in
 * normal use); *version is the store's version afterwards. */
int ts_store_migrate(const struct ts_store_ops *ops, void *conn, int target_version,
                     int *version, ts_err *err);
/* The script that migration `version` runs on a backend (tests build old
 * stores with it); NULL if there is none. */
const char *ts_store_migration_sql(const char *backend, int version);

/* Rolled-up accounting (store_usage.c). After a job row was inserted or
 * updated, brings its recorded run in line with the row; after an event was
 * appended, records the run a "run-ended" event closes. Both inside the
 * writer's transaction. */
int ts_store_rollup_job(const struct ts_store_ops *o, void *conn, int64_t job_id, ts_err *err);
int ts_store_rollup_event(const struct ts_store_ops *o, void *conn, const ts_event_row *ev,
                          ts_err *err);
/* Migration 7: rolls up every run already in the store. */
int ts_store_rollup_backfill(const struct ts_store_ops *o, void *conn, ts_err *err);
/* The usage answer from the rolled-up tables, on a reader connection. */
int ts_store_rollup_usage(const struct ts_store_ops *o, void *conn, double from_s, double to_s,
                          double now_s, ts_usage_row **rows, int *n, ts_err *err);

/* Opens like ts_store_open but migrates no further than max_version (tests
 * make old stores with it). */
int ts_store_open_version(const char *url, int max_version, ts_store **out, ts_err *err);

/* Starts and stops the committer thread (store_commit.c). */
int ts_store_committer_start(ts_store *s, ts_err *err);
void ts_store_committer_stop(ts_store *s);
/* Queues op, waits until its group is committed or it failed; returns op->rc
 * with op->err copied to err. */
/* Queues n ops at once (they usually share one transaction) and waits for
 * all of them; each op's own rc says how it went. TS_EINVAL once closed. */
int ts_store_submit_many(ts_store *s, ts_wop *ops, int n);
int ts_store_submit(ts_store *s, ts_wop *op, ts_err *err);

/* Copies src into a fixed field, as much as fits (values are validated to
 * fit before they are written, so truncation only guards the reader). */
void ts_store_copy_field(char *dst, size_t cap, const char *src, size_t len);

/* Grows a row array to hold row n (doubling); the new slot, NULL when out
 * of memory (the array is then unchanged). */
void *ts_store_grow(void **rows, int n, int *cap, size_t size);

#endif
