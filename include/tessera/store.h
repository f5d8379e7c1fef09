/*
 * store.h - the controller's durable state: jobs, their events, API tokens,
 * tenant and quota overrides, behind one ops table with two backends.
 *
 * "sqlite:PATH" (or a bare path) is the embedded default: SQLite in WAL mode.
 * "postgresql://..." uses PostgreSQL through libpq. Both apply the same
 * versioned schema migrations at open (table schema_version).
 *
 * Durable before acknowledged: every write call returns only once its
 * transaction is committed (synchronous=FULL on SQLite, a real COMMIT on
 * PostgreSQL). Group commit: writes from concurrent threads are queued to one
 * committer thread per store, which commits whatever is queued in a single
 * transaction and then wakes every waiter, so N concurrent submissions cost
 * about one disk flush, not N. A write that fails inside a group fails alone
 * (the group is retried without it) with its own error.
 *
 * Ownership: a ts_store is created by ts_store_open and freed by
 * ts_store_close. Rows returned to the caller own their strings; free them
 * with ts_job_row_fini / ts_store_free_* . All calls are thread-safe: reads
 * use their own connections (WAL readers on SQLite), writes go through the
 * committer.
 */
#ifndef TESSERA_STORE_H
#define TESSERA_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TS_STORE_NAME_MAX 64
#define TS_STORE_KEY_MAX 128   /* idempotency keys */
#define TS_STORE_REASON_MAX 32

enum ts_job_state {
    TS_JOB_PENDING = 0,
    TS_JOB_HELD = 1,
    TS_JOB_RUNNING = 2,
    TS_JOB_STOPPING = 3,   /* preempted or cancelled, within its grace */
    TS_JOB_COMPLETED = 4,
    TS_JOB_FAILED = 5,
    TS_JOB_CANCELLED = 6,
    TS_JOB_TIMEOUT = 7,    /* stopped at its time limit (docs/job-spec.md) */
};
#define TS_JOB_STATES 8
/* "pending", "held", "running", "stopping", "completed", "failed", "cancelled",
 * "timeout". */
const char *ts_job_state_name(int state);
int ts_job_state_parse(const char *name); /* -1 if unknown */
/* A comma-separated list of state names ("pending,running") into a set,
 * bit (1u << state) for each; -1 (the first unknown name, cut to n, in bad)
 * when a name is not a state or the list is empty. */
int ts_job_states_parse(const char *list, unsigned *set, char *bad, size_t n);
#define TS_JOB_STATES_ALL ((1u << TS_JOB_STATES) - 1u)
static inline bool ts_job_state_terminal(int s) { return s >= TS_JOB_COMPLETED; }

typedef struct ts_job_row {
    int64_t id;                          /* assigned by the store at insert (> 0) */
    char tenant[TS_STORE_NAME_MAX];
    char name[TS_STORE_NAME_MAX];
    char owner[TS_STORE_NAME_MAX];       /* the token's name that submitted it */
    char idem_key[TS_STORE_KEY_MAX];     /* "" = none; unique per owner */
    int state;                           /* enum ts_job_state */
    int tier;                            /* enum ts_tier */
    int priority;
    int gpus;                            /* GPUs it asks for in all (for filters, usage) */
    char gpu_model[TS_STORE_NAME_MAX];   /* model it runs on ("" until placed) */
    double submit_s, start_s, end_s;     /* Unix seconds; 0 = not yet */
    int preemptions;
    int restarts;                        /* runs stopped to run again: preemptions,
                                          * straggler restarts, requeues (TESSERA_RESTARTS) */
    char reason[TS_STORE_REASON_MAX];    /* last pending reason ("" when none) */
    char *spec_json;                     /* the canonical spec (owned, never NULL on read) */
    char *placement_json;                /* allocations while it runs (owned, may be NULL) */
    char *why;                           /* last pending explanation (owned, may be NULL) */
    char *result_json;                   /* an ended job's result: exit code and each rank's
                                          * end (docs/api.md "Job"; owned, may be NULL);
                                          * written by updates (an insert leaves it NULL) */
    /* the Unix identity its tasks run as, taken from the submitter's
     * credential at submission (docs/agent-tasks.md "User"); run_user ""
     * = none (run_uid is then meaningless: a zeroed row maps nobody) */
    char run_user[TS_STORE_NAME_MAX];
    int64_t run_uid;
    int64_t gen;                         /* bumped by every update; optimistic concurrency */
} ts_job_row;

void ts_job_row_fini(ts_job_row *r);

typedef struct ts_job_filter {
    const char *tenant;   /* NULL = any */
    const char *owner;    /* NULL = any */
    unsigned states;      /* the states listed, bit (1u << state) each; 0 = any */
    bool active_only;     /* pending, held, running, stopping */
    bool newest_first;    /* by id descending: after_id then lists the ids below it (0: from
                             the newest) */
} ts_job_filter;

typedef struct ts_event_row {
    int64_t id;
    int64_t job_id;                   /* 0: about no job (the secret store's audit) */
    double t_s;
    char kind[TS_STORE_REASON_MAX];   /* submitted, reserved, started, preempted, requeued, ... */
    char *detail;                     /* owned, may be NULL */
} ts_event_row;

/* A run that ended without ending its job, as its "run-ended" event records
 * it (the controller writes the detail "start=S end=E gpus=G model=M
 * tier=T"): what usage and accounting count of it. */
typedef struct ts_run_ended {
    double start_s, end_s;
    int gpus, tier;
    char gpu_model[TS_STORE_NAME_MAX];
} ts_run_ended;
/* False when ev is no run-ended event, or its detail is not such a run. */
bool ts_run_ended_parse(const ts_event_row *ev, ts_run_ended *out);

/* TS_ROLE_NODE: a node agent's credential (its token's name is the node's
 * name); it may use only the agent endpoints. TS_ROLE_SCRAPE: a monitoring
 * system's credential; it may read only /metrics. */
enum ts_role {
    TS_ROLE_ADMIN = 0,
    TS_ROLE_TENANT_ADMIN = 1,
    TS_ROLE_USER = 2,
    TS_ROLE_VIEWER = 3,
    TS_ROLE_NODE = 4,
    TS_ROLE_SCRAPE = 5,
};
const char *ts_role_name(int role);
int ts_role_parse(const char *name);

#define TS_TOKEN_HASH_BYTES 32

typedef struct ts_token_row {
    int64_t id;
    char name[TS_STORE_NAME_MAX];      /* unique */
    int role;
    char tenant[TS_STORE_NAME_MAX];    /* "" for admin and viewer of all */
    uint8_t hash[TS_TOKEN_HASH_BYTES]; /* SHA-256 of the secret; the secret is never stored */
    double created_s;
    double revoked_s;                  /* 0 = live */
    /* the Unix identity its jobs' tasks run as, set by an administrator
     * (docs/api.md "Tokens"); unix_user "" = none (uid then meaningless), and
     * then its jobs cannot run tasks on agents */
    char unix_user[TS_STORE_NAME_MAX];
    int64_t uid;
    double expires_s;                  /* 0 = never; after it the token is refused */
} ts_token_row;

/* A token's name: 1..TS_STORE_NAME_MAX-1 characters of [A-Za-z0-9._-], a
 * letter or digit first. The API refuses any other (POST /v1/tokens), and
 * the CLI checks the same before it asks. */
static inline bool ts_token_name_ok(const char *s)
{
    size_t n = 0;
    for (; s && s[n]; n++) {
        char ch = s[n];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9');
        bool mark = n > 0 && (ch == '.' || ch == '_' || ch == '-');
        if (n + 1 >= TS_STORE_NAME_MAX || !(alnum || mark))
            return false;
    }
    return n > 0;
}

/* GPU-seconds used between [from_s, to_s), by tenant, tier and GPU model
 * (jobs' running intervals clipped to the window). */
typedef struct ts_usage_row {
    char tenant[TS_STORE_NAME_MAX];
    int tier;
    char gpu_model[TS_STORE_NAME_MAX];
    double gpu_s;
} ts_usage_row;

typedef struct ts_store ts_store;

/* Opens (creating and migrating) the store at url. */
TS_MUST_CHECK int ts_store_open(const char *url, ts_store **out, ts_err *err);
void ts_store_close(ts_store *s);
/* "sqlite" or "postgresql". */
const char *ts_store_backend(const ts_store *s);
int ts_store_schema_version(ts_store *s);

/* Inserts a job (row->id, row->gen set on return). With a non-empty
 * idem_key already used by the same owner, nothing is inserted: *existed is
 * set and row is overwritten with the stored job. */
TS_MUST_CHECK int ts_store_job_insert(ts_store *s, ts_job_row *row, bool *existed, ts_err *err);
/* Inserts n jobs queued together (an array: one transaction); as
 * ts_store_job_insert for each, existed[i] per row. All or nothing: if any
 * insert fails the error names its row and none is committed. */
TS_MUST_CHECK
int ts_store_job_insert_many(ts_store *s, ts_job_row *rows, int n, bool *existed, ts_err *err);
/* A large array whose pending elements are materialised lazily (docs/store.md
 * "Arrays"): its elements have ids id..id+size-1, all reserved when it is
 * stored; those below next, and any other a job row exists for, are jobs;
 * the rest exist only as this row while it is open. */
typedef struct ts_array_row {
    int64_t id;   /* its first element's id */
    int size;     /* elements */
    int next;     /* the lowest element not yet materialised in order */
    bool open;    /* false once every element has a job row */
} ts_array_row;

/* Inserts n rows of an array's elements and writes the array's row, in one
 * transaction (all or nothing). A new array (array->id 0): rows[0] gets the
 * next id and the others follow (as ts_store_job_insert_many), the ids up to
 * rows[0].id + size - 1 are reserved, and array->id is set; if rows[0]'s
 * idempotency key was used before, nothing is written and array->id is that
 * job's id. An existing array (array->id > 0): rows with id > 0 are stored
 * on that id, which must be one of the array's. n may be 0 (only the row). */
TS_MUST_CHECK
int ts_store_array_insert(ts_store *s, ts_job_row *rows, int n, bool *existed,
                          ts_array_row *array, ts_err *err);
/* The open arrays, ascending id; *rows malloc'd (free() it). */
int ts_store_arrays_open(ts_store *s, ts_array_row **rows, int *n, ts_err *err);

/* A reservation kept by tesserad (docs/scheduler.md "Reservations"): nodes
 * (a host list) kept from start_s to end_s for a tenant's jobs (and, when
 * users is not empty, only those users', comma-separated), or for no job
 * (maintenance). */
typedef struct ts_resv_row {
    char name[64];
    char nodes[1024];
    double start_s, end_s;
    char tenant[64];
    char users[512];
    bool maintenance;
    double created_s;
} ts_resv_row;

/* Stores a new reservation; TS_EEXIST when the name is taken. */
int ts_store_resv_insert(ts_store *s, const ts_resv_row *r, ts_err *err);
/* Deletes one; TS_ENOENT when there is none of that name. */
int ts_store_resv_delete(ts_store *s, const char *name, ts_err *err);
/* Every reservation, by start then name; *rows malloc'd (free() it). */
int ts_store_resv_list(ts_store *s, ts_resv_row **rows, int *n, ts_err *err);
/* Updates every mutable field of job row->id (state, times, preemptions,
 * reason, why, placement_json, gpu_model, result_json, priority, gpus, and
 * spec_json unless it is NULL: a queued job's spec changes only through
 * `tessera update`) if its gen still equals row->gen;
 * row->gen is bumped on success. TS_ECONFLICT when the gen moved (someone else
 * updated it), TS_ENOENT when there is no such job. */
TS_MUST_CHECK int ts_store_job_update(ts_store *s, ts_job_row *row, ts_err *err);
/* Several updates and events in one transaction (the scheduler applies one
 * cycle's decisions at once). Same gen rule per row; all or nothing. */
TS_MUST_CHECK
int ts_store_apply(ts_store *s, ts_job_row *rows, int nrows, const ts_event_row *events,
                   int nevents, ts_err *err);
int ts_store_job_get(ts_store *s, int64_t id, ts_job_row *out, ts_err *err);
/* The id of owner's job stored under idempotency key idem_key (as the row
 * holds it); 0 in *id when there is none. Nothing is written: a submission
 * its tenant's queued cap refuses asks it, since an idempotent retry takes
 * no room. */
int ts_store_job_by_idem(ts_store *s, const char *owner, const char *idem_key, int64_t *id,
                         ts_err *err);
/* Jobs with id > after_id matching f, ascending id, at most limit (1..10000).
 * *rows is malloc'd (free with ts_store_free_jobs). */
int ts_store_job_list(ts_store *s, const ts_job_filter *f, int64_t after_id, int limit,
                      ts_job_row **rows, int *n, ts_err *err);
void ts_store_free_jobs(ts_job_row *rows, int n);
/* Counts by state for one tenant (NULL = all): out[TS_JOB_STATES]. */
int ts_store_job_counts(ts_store *s, const char *tenant, int64_t out[TS_JOB_STATES], ts_err *err);

TS_MUST_CHECK int ts_store_event_append(ts_store *s, const ts_event_row *ev, ts_err *err);
/* Events with id > after_id, ascending, at most limit: job_id's (> 0), every
 * event (0), or those about no job (TS_EVENTS_NO_JOB: the secret store's
 * audit, stored with job_id 0). */
#define TS_EVENTS_NO_JOB (-1)
int ts_store_event_list(ts_store *s, int64_t job_id, int64_t after_id, int limit,
                        ts_event_row **rows, int *n, ts_err *err);
void ts_store_free_events(ts_event_row *rows, int n);

/* TS_EEXIST if the name is taken. */
TS_MUST_CHECK int ts_store_token_insert(ts_store *s, ts_token_row *row, ts_err *err);
/* The live token with this hash, TS_ENOENT if none (or revoked). */
int ts_store_token_by_hash(ts_store *s, const uint8_t hash[TS_TOKEN_HASH_BYTES],
                           ts_token_row *out, ts_err *err);
TS_MUST_CHECK int ts_store_token_revoke(ts_store *s, const char *name, double now_s, ts_err *err);
/* tenant NULL = every token. */
int ts_store_token_list(ts_store *s, const char *tenant, ts_token_row **rows, int *n,
                        ts_err *err);

/* Tenants and quotas changed through the API, as one YAML document in the
 * format of docs/tenants-format.md; *yaml NULL when never set (the
 * configuration file's tenants apply). */
int ts_store_tenants_get(ts_store *s, char **yaml, ts_err *err);
TS_MUST_CHECK int ts_store_tenants_put(ts_store *s, const char *yaml, ts_err *err);

/* Other small settings of the controller (e.g. "drained_nodes"), by key;
 * *value malloc'd, NULL when never set. The key "tenants" is reserved for
 * the two calls above. */
TS_MUST_CHECK
int ts_store_setting_put(ts_store *s, const char *key, const char *value, ts_err *err);
int ts_store_setting_get(ts_store *s, const char *key, char **value, ts_err *err);

/* GPU-seconds over [from_s, to_s) by tenant, tier and GPU model, sorted by
 * them: jobs' runs and the runs "run-ended" events record, clipped to the
 * window, running jobs up to now. Answered from rolled-up accounting (hour
 * buckets kept as runs end), so its cost does not grow with the events;
 * groups that sum to zero are left out. *rows malloc'd. */
int ts_store_usage(ts_store *s, double from_s, double to_s, ts_usage_row **rows, int *n,
                   ts_err *err);
/* The same answer computed from every job and event (what ts_store_usage
 * answered before the roll-up): the reference its tests and bench compare
 * with. Its cost grows with the store. */
int ts_store_usage_scan(ts_store *s, double from_s, double to_s, ts_usage_row **rows, int *n,
                        ts_err *err);

/* Writes committed and transactions used so far (for the group-commit test). */
typedef struct ts_store_stats {
    uint64_t writes;
    uint64_t commits;
} ts_store_stats;
void ts_store_get_stats(ts_store *s, ts_store_stats *st);

/* Fault injection, for tests of what uses the store (docs/store.md): from
 * now on, writes fail as `spec` says. spec is a comma-separated list of
 *   nth=N      the Nth write from now fails (once)
 *   every=N    every Nth write fails
 *   kind=K     io (default: an I/O error), full (disk full), drop (the
 *              PostgreSQL session is cut; an I/O error on SQLite), commit
 *              (the whole transaction holding that write fails at COMMIT)
 * "" or "off" turns it off. A write is one queued operation (an insert, one
 * apply of rows and events, a token, a setting). TS_EINVAL names a bad item.
 * Off unless called; tesserad calls it only in test builds. */
TS_MUST_CHECK int ts_store_faults_set(ts_store *s, const char *spec, ts_err *err);
/* How many failures have been injected so far. */
uint64_t ts_store_faults_injected(ts_store *s);

/* High availability (docs/ha.md; PostgreSQL only, TS_EINVAL on SQLite).
 * One lease row in the store names the controller that leads; its expiry
 * is kept by the database's clock (now()), so the controllers' clocks never
 * have to agree. Each new holder increments the epoch. */
#define TS_LEASE_HOLDER_MAX 128 /* holder ids */
#define TS_LEASE_URL_MAX 256    /* advertised URLs */
#define TS_LEASE_S_MAX 3600.0   /* lease durations: (0, 3600] seconds */

typedef struct ts_lease_info {
    char holder[TS_LEASE_HOLDER_MAX]; /* "" = never held */
    int64_t epoch;                    /* 0 = never held */
    char url[TS_LEASE_URL_MAX];       /* the holder's advertised URL ("" = none) */
    double remaining_s;               /* until it expires, by the database's clock (<= 0: expired) */
} ts_lease_info;

/* Takes the lease for lease_s seconds if it has expired or `holder` holds it
 * already, advertising url ("" = none); *epoch is the lease's epoch
 * afterwards (incremented unless holder held it, unexpired). TS_ECONFLICT,
 * naming the holder, when someone else holds it. */
TS_MUST_CHECK int ts_store_lease_acquire(ts_store *s, const char *holder, const char *url,
                                         double lease_s, int64_t *epoch, ts_err *err);
/* Extends the lease holder has at `epoch` to lease_s seconds from now;
 * TS_ECONFLICT when it holds it no longer (taken over: the new holder and
 * epoch are named). */
TS_MUST_CHECK int ts_store_lease_renew(ts_store *s, const char *holder, int64_t epoch,
                                       double lease_s, ts_err *err);
/* Ends the lease holder has at `epoch` now (a clean stop), so a standby
 * need not wait for it to expire. Nothing if it holds it no longer. */
int ts_store_lease_release(ts_store *s, const char *holder, int64_t epoch, ts_err *err);
int ts_store_lease_read(ts_store *s, ts_lease_info *out, ts_err *err);
/* Fencing: from now on every write transaction of this store checks, in
 * the transaction, that the lease's epoch is still `epoch`, and fails with
 * TS_EFENCED ("fenced: epoch 7 is not the lease's 8") otherwise: a deposed
 * leader that has not noticed cannot commit. 0 turns the check off. */
TS_MUST_CHECK int ts_store_set_epoch(ts_store *s, int64_t epoch, ts_err *err);

#ifdef __cplusplus
}
#endif
#endif
