/*
 * store_internal.h - internal: what store.c (the object, the public calls,
 * the reader pool), store_commit.c (the group committer), store_schema.c
 * (migrations) and store_usage.c (rolled-up accounting) share.
 *
 * They reach the database only through the one SQL layer of store_sql.h: a
 * store_conn of either backend and the row operations written once. The
 * writer connection belongs to the committer thread, which wraps the writes
 * in begin/commit; reader connections come from a small pool and run in
 * autocommit, one statement per call, so each read sees everything
 * committed before it started.
 */
#ifndef TS_STORE_INTERNAL_H
#define TS_STORE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store_sql.h"
#include "tessera/store.h"

/* The schema this code writes. A store at a higher version is refused. */
#define TS_SCHEMA_VERSION 10
/* The first schema with rolled-up accounting (store_usage.c). */
#define TS_SCHEMA_ROLLUP 8
/* Settings key of the tenants YAML document. */
#define TS_SETTING_TENANTS "tenants"
/* Page size bounds shared by job and event lists. */
#define TS_STORE_LIST_MAX 10000

/* Rolled-up accounting (store_usage.c): its statements, written once in
 * store_stmts.c and run by store_rollup. Every statement binds the arguments its
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

/* Runs rolled-up accounting statement `stmt` (store_sql.c), each row to fn
 * (NULL: rows ignored). */
int store_rollup(store_conn *c, int stmt, const ts_ru_args *a, ts_ru_row_fn fn, void *ctx,
                 ts_err *err);

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
bool store_fault_due(ts_store *s, int *kind);

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
    const struct store_backend *be;
    char *target;     /* path or URI handed to connect */
    int schema_version;
    /* the committer and its queue; qmu guards everything below it */
    store_conn *wconn;
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
    store_conn *readers[TS_STORE_READERS_MAX];
    bool reader_busy[TS_STORE_READERS_MAX];
    int nreaders;
    /* the lease's own session (store_lease.c), opened on first use;
     * lease_mu guards it */
    pthread_mutex_t lease_mu;
    void *lease;
};

/* Closes the lease session, if one was opened (store_lease.c). */
void store_lease_fini(ts_store *s);

/* Migrates the writer's store to `target_version` (TS_SCHEMA_VERSION in
 * normal use); *version is the store's version afterwards. */
int store_migrate(store_conn *conn, int target_version, int *version, ts_err *err);

/* Rolled-up accounting (store_usage.c). After a job row was inserted or
 * updated, brings its recorded run in line with the row; after an event was
 * appended, records the run a "run-ended" event closes. Both inside the
 * writer's transaction. */
int store_rollup_job(store_conn *conn, int64_t job_id, ts_err *err);
int store_rollup_event(store_conn *conn, const ts_event_row *ev, ts_err *err);
/* Migration 8: rolls up every run already in the store. */
int store_rollup_backfill(store_conn *conn, ts_err *err);
/* The usage answer from the rolled-up tables, on a reader connection. */
int store_rollup_usage(store_conn *conn, double from_s, double to_s, double now_s,
                          ts_usage_row **rows, int *n, ts_err *err);

/* Opens like ts_store_open but migrates no further than max_version (tests
 * make old stores with it). */
int store_open_version(const char *url, int max_version, ts_store **out, ts_err *err);

/* Starts and stops the committer thread (store_commit.c). */
int store_committer_start(ts_store *s, ts_err *err);
void store_committer_stop(ts_store *s);
/* Queues op, waits until its group is committed or it failed; returns op->rc
 * with op->err copied to err. */
/* Queues n ops at once (they usually share one transaction) and waits for
 * all of them; each op's own rc says how it went. TS_EINVAL once closed. */
int store_submit_many(ts_store *s, ts_wop *ops, int n);
int store_submit(ts_store *s, ts_wop *op, ts_err *err);

/* Copies src into a fixed field, as much as fits (values are validated to
 * fit before they are written, so truncation only guards the reader). */
void store_copy_field(char *dst, size_t cap, const char *src, size_t len);

/* Grows a row array to hold row n (doubling); the new slot, NULL when out
 * of memory (the array is then unchanged). */
void *store_grow(void **rows, int n, int *cap, size_t size);

#endif
