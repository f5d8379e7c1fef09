/*
 * lock.h - internal: tesserad's one lock protocol. lock.c is the only file
 * that changes the flags below (fields of struct ctld); every other file
 * takes and leaves the phases through these calls.
 *
 * One mutex, ctld.mu, guards the controller's state: jobs, cluster,
 * tenants, quota, scheduler, agents' documents. Durable writes and the core's
 * planning run with mu released. The core plans on the scheduler's own copy
 * of the cluster and quota (synced under mu; tessera/cycle.h) and the cycle
 * applies its starts to the live ones under mu once they are written, so
 * the live cluster and quota only ever change under mu and every reader
 * reads them live. While a phase runs unlocked, a phase flag says so, and
 * whoever must not run beside that phase waits for its end on one condition
 * variable (ctld.committed, broadcast whenever a phase ends), each wait
 * re-checking the condition its name says. The modes, and what each
 * excludes while it is on (x: the row's mode waits while the column's
 * phase is on):
 *
 *                               | cycle    | commit     | change in | submission | tenants
 *   mode (who; call)            | planning | (cycling = | flight    | checked,   | swap
 *                               | cycling  | committing)| inflight  | not added  | swapping
 *   ----------------------------+----------+------------+-----------+------------+---------
 *   reader of jobs, nodes,      |          |            |           |            |
 *     usage, agents' documents; |  -  (let in at the cycle's yields: ctld_yield)        | -
 *     submission adding jobs    |          |            |           |            |
 *     (ctld_lock_reader)        |          |            |           |            |
 *   submission's check          |          |            |           |            |   x
 *     (ctld_swap_wait)          |          |            |           |            |
 *   drain or resume of a node   |  -  (the plan is on its copy; the apply binds     | -
 *     (drain_mu, then mu)       |     on a drained node as it keeps what runs there)|
 *   change of the scheduler's   |    x     |            |           |            |
 *     settings (reservations),  |          |            |           |            |
 *     a change applied after    |          |            |           |            |
 *     its write (inflight_leave)|          |            |           |            |
 *     (ctld_settled_wait)       |          |            |           |            |
 *   change of existing jobs     |    x     |     x      |           |            |   x
 *     (ctld_commit_wait)        |          |            |           |            |
 *   a cycle (ctld_cycle_enter)  |  (one    |            | let in    |            |   x
 *                               |  thread) |            | first*    |            |
 *   tenants swap                |    x     |     x      |     x     |     x      |   x
 *     (ctld_swap_enter)         |          |            |           |            |
 *
 *   * a cycle lets the changes that waited for the last one, and the
 *     writes in flight, end first, for at most CTLD_CHANGERS_WAIT_S.
 *
 * Why the x's that remain: a cycle's passes over the job list (collect,
 * reasons) let readers in at yields, and a change that adds or removes
 * jobs or their bindings would move that list under them; the plan reads
 * the scheduler's reservations; the apply needs the room the plan saw
 * (only a drain may come in between, and it takes no room).
 *
 * Other locks, always taken before mu and never while it is held by the
 * same thread for long: drain_mu (drain writers, one at a time),
 * resv_mu (reservation writers), and per node ctld_agent.mu (an agent's
 * sync that changes nothing takes only its node's lock, agents.c). The
 * store has its own locks and is never called with mu held, except a
 * dependency read past the prefetch (depend.c).
 */
#ifndef TS_CTLD_LOCK_H
#define TS_CTLD_LOCK_H

#include <pthread.h>

typedef struct ctld ctld;

/* How long a cycle waits at its start for the changes waiting for the
 * last one, at most. */
#define CTLD_CHANGERS_WAIT_S 0.05

double ctld_now(void);
/* Waits on cv (mu held) until it is signalled or ctld_now() reaches until. */
void ctld_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double until);

/* Takes mu for an HTTP reader (jobs, nodes, tenants, metrics) or a
 * submission adding its jobs: counted while it waits, so a running cycle
 * lets it in at its next yield. */
void ctld_lock_reader(ctld *c);
/* Under mu, in the cycle: if readers came for mu before this call, lets them
 * in (mu released until they have it, 5 ms at most) and takes it back. Only
 * while c->cycling: any thread may take mu meanwhile, but everything that
 * changes what the cycle plans on waits for its end, so readers and
 * submissions are what runs. */
void ctld_yield(ctld *c);

/* Under mu: one wait for the end of a phase, counted in changers_waiting,
 * so the next cycle first lets the waiting changes in (and their writes
 * end) before it starts, for at most CTLD_CHANGERS_WAIT_S: a change waits
 * for the cycle running when it came, not for the ones after. */
void ctld_changer_wait(ctld *c);
/* Under mu, before planning a change of existing jobs: waits while the
 * cycle plans or commits its decisions or the tenants are swapped. */
void ctld_commit_wait(ctld *c);
/* Under mu, before changing the scheduler's settings (reservations) or
 * applying a change written with mu released (binds and unbinds, jobs
 * added or removed): waits while a cycle runs. Reads and drains do not
 * wait (the table above). */
void ctld_settled_wait(ctld *c);
/* Under mu: waits while the tenants are being swapped (a submission's check
 * is against the tenants that will be). */
void ctld_swap_wait(ctld *c);
/* Under mu: waits for any phase to end, or until ctld_now() reaches until. */
void ctld_phase_wait_until(ctld *c, double until);
/* Under mu: says that something a waiter may look at changed (a phase
 * ended, a job was unpinned, an array element was taken). */
void ctld_phase_moved(ctld *c);

/* A cycle: ctld_cycle_enter takes mu, waits out a tenants swap, lets the
 * waiting changes in first, and starts planning (cycling); ctld_cycle_leave
 * (mu held) ends it. */
void ctld_cycle_enter(ctld *c);
void ctld_cycle_leave(ctld *c);
/* A write of the cycle's decisions (or of a drain from the cycle) with mu
 * released: changers of jobs wait meanwhile. Enter under mu (returns
 * without it); leave takes mu back. */
void ctld_commit_enter(ctld *c);
void ctld_commit_leave(ctld *c);
/* A change written with mu released (its jobs pinned by the caller):
 * enter under mu (returns without it); leave takes mu back and waits until
 * the cycle does not plan, so the change may be applied. The caller calls
 * ctld_phase_moved once it is applied. */
void ctld_inflight_enter(ctld *c);
void ctld_inflight_leave(ctld *c);
/* A submission between its check and its jobs' add: no tenants swap meanwhile. */
void ctld_submission_begin(ctld *c);
void ctld_submission_end(ctld *c);
/* A tenants swap: waits for another swap, then stops new changes and
 * submissions and waits for those in flight and the cycle to end. */
void ctld_swap_enter(ctld *c);
void ctld_swap_leave(ctld *c);

/* Wakes the scheduling thread for a cycle soon (under mu). */
void ctld_kick(ctld *c);

/* In the cycle's scans of every job: ctld_yield once every CTLD_YIELD_EVERY
 * jobs (a fraction of a millisecond of work). */
#define CTLD_YIELD_EVERY 1024
static inline void ctld_yield_some(ctld *c, int i)
{
    if ((i & (CTLD_YIELD_EVERY - 1)) == CTLD_YIELD_EVERY - 1)
        ctld_yield(c);
}

#endif
