/*
 * job_fsm.h - internal: the job state machine of tesserad.
 *
 * Every change of an active job's state goes through one table (state,
 * event -> state, effects) and one path: plan it into a transaction (the new
 * row and its events, built aside; live state untouched), commit the
 * transaction to the store in one write, and only if that succeeded apply
 * it to memory (scheduler bind/unbind, agent wake-ups, metrics, removal of
 * finished jobs). A failed commit leaves memory exactly as the store has
 * it: the caller answers 503 (an HTTP client), keeps the report for the
 * agent's next sync (503 to the agent), or tries again at the next cycle.
 * Users: actions.c (job actions), loop.c (the cycle, time limits), agents.c
 * (reports, lost and failed nodes), policies.c (idle reaping, stragglers).
 */
#ifndef TS_CTLD_JOB_FSM_H
#define TS_CTLD_JOB_FSM_H

#include "ctld/ctld.h"

enum ctld_job_event {
    CTLD_JE_HOLD = 0,  /* user: pending -> held */
    CTLD_JE_RELEASE,   /* user: held -> pending */
    CTLD_JE_CANCEL,    /* user: any active -> cancelled */
    CTLD_JE_REQUEUE,   /* user: running -> pending (the run ends) */
    CTLD_JE_START,     /* cycle: pending -> running on the cycle's allocations */
    CTLD_JE_PREEMPT,   /* cycle: running -> stopping (grace, then requeue) */
    CTLD_JE_REAP,      /* idle policy: running -> stopping (then held) */
    CTLD_JE_STRAGGLE,  /* straggler policy: running -> stopping (then restart at once) */
    CTLD_JE_FINISH,    /* every rank exited 0, or a virtual run ended: -> completed */
    CTLD_JE_FAIL,      /* a rank failed: running -> failed */
    CTLD_JE_STOPPED,   /* every rank stopped: stopping -> pending (or held if reaped) */
    CTLD_JE_EVICT,     /* its node was lost or failed: running/stopping -> pending */
    CTLD_JE_DEPFAIL,   /* its dependency can never be met (depend.c): pending -> failed */
    CTLD_JE_EXPIRE,    /* its time limit came: running -> stopping (signal, grace, kill) */
    CTLD_JE_TIMEOUT,   /* its ranks ended after its time limit: running/stopping -> timeout */
    /* A cancel or requeue of a job whose ranks run on agents stops them
     * first: its GPUs stay its own until every rank has stopped (ctld_fsm_plan
     * picks these for CTLD_JE_CANCEL and CTLD_JE_REQUEUE). */
    CTLD_JE_CANCEL_STOP,    /* user: running/stopping -> stopping, then cancelled */
    CTLD_JE_REQUEUE_STOP,   /* user: running -> stopping, then pending at once */
    CTLD_JE_STOPPED_CANCEL, /* every rank of a cancelled job stopped: stopping -> cancelled */
    /* user (job_update.c): a queued job's spec changes, or a running one's
     * time limit is lowered; the state stays */
    CTLD_JE_UPDATE,
    CTLD_JE_EVENTS
};

/* What a planned event needs beyond the job and the time. */
typedef struct ctld_fsm_args {
    const char *detail;       /* the event's detail (copied), NULL for none */
    const ts_alloc *allocs;   /* START: one per rank (copied) */
    double stop_by_s;         /* PREEMPT, REAP, STRAGGLE: end of the grace */
    double eligible_s;        /* STOPPED, EVICT: when it may start again (0 = now) */
    bool restart_now;         /* PREEMPT: a move (ts_cycle_preempt.move): requeued with
                               * no backoff once stopped */
    /* FINISH, FAIL, TIMEOUT: how it ended (copied; NULL: unknown): the
     * result document (docs/api.md "Job": exit_code, ranks), and the short
     * reason and the line saying why, which the ended job keeps as its
     * reason and why */
    const char *result_json;
    const char *end_reason, *end_why;
    double end_s; /* when it ended, as its agents said (0: now; later than now: now) */
    /* UPDATE: the new canonical spec (copied), and the row's priority and
     * GPUs as that spec gives them */
    const char *spec_json;
    int priority, gpus;
} ctld_fsm_args;

typedef struct ctld_change {
    cjob *j;
    int64_t base_gen;         /* j->row.gen when planned: applied only if unchanged */
    int event, to;
    unsigned fx;              /* CTLD_FX_* of the table */
    ts_job_row row;           /* the new row; owns placement_json and why; spec_json
                               * only for UPDATE (else NULL: unchanged) */
    ts_alloc *allocs;         /* START */
    double stop_by_s, eligible_s;
    bool restart_now;
} ctld_change;

typedef struct ctld_txn {
    ctld_change *ch;
    int n, cap;
    ts_event_row *ev;         /* details owned */
    int nev, evcap;
    bool committed;
    bool quiet;               /* applying does not kick the loop (the cycle's own) */
} ctld_txn;

/* A user's action (cancel, hold, release, requeue) as its event says who
 * took it: args.detail "by=NAME" and, for a cancel, args.end_why "cancelled
 * by NAME" (the job's why from then); by NULL: the controller's own (no
 * detail). */
typedef struct ctld_actor {
    ctld_fsm_args args;
    char detail[160];
    char why[176];
} ctld_actor;
void ctld_actor_init(ctld_actor *x, int event, const char *by);

/* Name of an event (for messages). */
const char *ctld_job_event_name(int event);
/* Plans event on j into t: checks the table (TS_ECONFLICT, err says which
 * state allows it), builds the new row and its events. Under mu; changes
 * nothing but t. A job already in t is refused (TS_ECONFLICT): one change
 * per job and transaction. */
TS_MUST_CHECK int ctld_fsm_plan(ctld *c, ctld_txn *t, cjob *j, int event,
                                const ctld_fsm_args *a, double now, ts_err *err);
/* Whether j already has a change in t. */
bool ctld_txn_has(const ctld_txn *t, const cjob *j);
/* net.c: the ranks' addresses on their tenant's network, added to a START's
 * placement; TS_ECONFLICT when the tenant has none free. */
int ctld_net_place(ctld *c, const ctld_txn *t, const cjob *j, char **placement_json, ts_err *err);
/* An event that changes no row (output tails, warnings, reservations). */
TS_MUST_CHECK int ctld_txn_event(ctld_txn *t, int64_t job, double now, const char *kind,
                                 const char *detail);
/* Writes every row and event of t in one store transaction; nothing in
 * memory changes. TS_ECONFLICT if a row's gen moved since it was planned. */
TS_MUST_CHECK int ctld_txn_commit(ctld *c, ctld_txn *t, ts_err *err);
/* After a successful commit, under mu: applies every change to memory. */
void ctld_txn_apply(ctld *c, ctld_txn *t, double now);
void ctld_txn_fini(ctld_txn *t);
/* Under mu: commits t with mu released and its jobs pinned (no one else
 * plans a change of them meanwhile), then applies it if it was written.
 * Concurrent writers' commits share the store's group commit. */
TS_MUST_CHECK int ctld_txn_commit_unlocked(ctld *c, ctld_txn *t, double now, ts_err *err);
/* Under mu, in the scheduling thread while its cycle runs (loop.c, and the
 * policies and lost-node evictions it calls): commits t with mu released.
 * Readers and submissions go on meanwhile; whoever would change existing
 * jobs waits for it (ctld_commit_wait), so the jobs t names stay as
 * planned. The caller applies t if it was written. */
TS_MUST_CHECK int ctld_cycle_commit(ctld *c, ctld_txn *t, ts_err *err);
/* Under mu: waits until job id is not pinned and the cycle does not
 * commit; the job then (NULL if gone). */
cjob *ctld_job_wait_unpinned(ctld *c, int64_t id);
/* actions.c, not under mu: one round of a user's event (cancel, hold, release, taken
 * by `by`) over many jobs, in one transaction. Takes mu, waits for commits
 * (ctld_commit_wait) and plans event for each job next(c, ctx) gives (under
 * mu; NULL at the end) that is not pinned (*busy counts those) and that it
 * applies to (the others are left as they are); commits them with mu
 * released. *n: the jobs changed; with ids, *ids their ids (caller frees;
 * NULL on error or when none). */
TS_MUST_CHECK int ctld_event_round(ctld *c, int event, const char *by,
                                   cjob *(*next)(ctld *c, void *ctx), void *ctx, int64_t **ids,
                                   int *n, int *busy, ts_err *err);
/* Plan, commit and apply one event on one job; under mu. */
TS_MUST_CHECK int ctld_fsm_run(ctld *c, cjob *j, int event, const ctld_fsm_args *a,
                               double now, ts_err *err);

#endif
