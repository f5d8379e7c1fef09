/*
 * lock.c - tesserad's lock protocol (lock.h has the table): the only file
 * that sets the phase flags of struct ctld (cycling, committing, swapping,
 * inflight, submitting, changers_waiting) and the readers' counters.
 */
#include "ctld/ctld.h"

#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

/* How long the cycle leaves mu to readers at one yield, at most. */
#define YIELD_MAX_S 0.005

double ctld_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ctld_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double until)
{
    struct timespec ts;
    ts.tv_sec = (time_t)until;
    ts.tv_nsec = (long)((until - floor(until)) * 1e9);
    pthread_cond_timedwait(cv, mu, &ts);
}

/* ---- readers ------------------------------------------------------------------- */

void ctld_lock_reader(ctld *c)
{
    atomic_fetch_add(&c->readers_arrived, 1);
    pthread_mutex_lock(&c->mu);
    atomic_fetch_add(&c->readers_entered, 1);
    if (c->cycling)
        c->m.reads_in_cycle++; /* it did not wait for the cycle's end */
}

void ctld_yield(ctld *c)
{
    /* the readers that came before this yield, not those coming during it
     * (a flood of readers would otherwise hold every yield to its limit) */
    uint64_t due = atomic_load(&c->readers_arrived);
    if (!c->cycling || atomic_load(&c->readers_entered) >= due)
        return;
    pthread_mutex_unlock(&c->mu);
    /* a mutex is not fair: taken back at once, the waiters would never get
     * it; each reader holds it for a fraction of a millisecond */
    double until = ctld_now() + YIELD_MAX_S;
    while (atomic_load(&c->readers_entered) < due && ctld_now() < until)
        sched_yield();
    pthread_mutex_lock(&c->mu);
}

/* ---- waits -------------------------------------------------------------------------- */

void ctld_changer_wait(ctld *c)
{
    /* counted, so that the next cycle lets it in first (ctld_cycle_enter) */
    c->changers_waiting++;
    pthread_cond_wait(&c->committed, &c->mu);
    if (--c->changers_waiting == 0)
        pthread_cond_broadcast(&c->committed);
}

void ctld_commit_wait(ctld *c)
{
    while (c->committing || c->cycling || c->swapping)
        ctld_changer_wait(c);
}

void ctld_settled_wait(ctld *c)
{
    while (c->cycling)
        ctld_changer_wait(c);
}

void ctld_swap_wait(ctld *c)
{
    while (c->swapping)
        pthread_cond_wait(&c->committed, &c->mu);
}

void ctld_phase_wait_until(ctld *c, double until)
{
    ctld_cond_wait_until(&c->committed, &c->mu, until);
}

void ctld_phase_moved(ctld *c)
{
    pthread_cond_broadcast(&c->committed);
}

/* ---- phases ----------------------------------------------------------------------- */

void ctld_cycle_enter(ctld *c)
{
    pthread_mutex_lock(&c->mu);
    ctld_swap_wait(c); /* the tenants and the scheduler are being replaced */
    /* changes that waited for the last cycle (a user action, an agent's
     * report, a drain, a node read) go first, with their writes: otherwise
     * the next cycle could start the instant this one ends, before any of
     * them gets mu, and each would wait for cycle after cycle */
    double lets_in = ctld_now() + CTLD_CHANGERS_WAIT_S;
    while ((c->changers_waiting > 0 || c->inflight > 0) && ctld_now() < lets_in)
        ctld_phase_wait_until(c, lets_in);
    /* from here to ctld_cycle_leave the cycle plans from the cluster, the
     * quota and the scheduler and then applies its starts to them: whoever
     * changes them waits for it (ctld_settled_wait, ctld_commit_wait), so
     * the cycle may let readers and submissions in at its yields and
     * compute with mu released. Readers read the live state: the plan is
     * made on the scheduler's own copy (tessera/cycle.h) and applied under
     * mu with the jobs' new states */
    c->cycling = true;
}

void ctld_cycle_leave(ctld *c)
{
    c->cycling = false;
    ctld_phase_moved(c);
}

void ctld_commit_enter(ctld *c)
{
    ctld_yield(c);
    c->committing++; /* a drain's write may overlap the cycle's */
    pthread_mutex_unlock(&c->mu);
}

void ctld_commit_leave(ctld *c)
{
    pthread_mutex_lock(&c->mu);
    c->committing--;
    ctld_phase_moved(c);
}

void ctld_inflight_enter(ctld *c)
{
    c->inflight++;
    pthread_mutex_unlock(&c->mu);
}

void ctld_inflight_leave(ctld *c)
{
    pthread_mutex_lock(&c->mu);
    ctld_settled_wait(c); /* applying binds and unbinds: not while the cycle plans */
    c->inflight--;
}

void ctld_submission_begin(ctld *c)
{
    c->submitting++; /* no tenant leaves until its jobs are added */
}

void ctld_submission_end(ctld *c)
{
    if (--c->submitting == 0)
        ctld_phase_moved(c);
}

void ctld_swap_enter(ctld *c)
{
    ctld_swap_wait(c); /* one replacement at a time */
    /* the scheduler is swapped by the caller: from here no new change or
     * submission starts, and those in flight end first */
    c->swapping = true;
    while (c->committing || c->cycling || c->inflight || c->submitting)
        pthread_cond_wait(&c->committed, &c->mu);
}

void ctld_swap_leave(ctld *c)
{
    c->swapping = false;
    ctld_phase_moved(c);
}

void ctld_kick(ctld *c)
{
    c->dirty = true;
    pthread_cond_signal(&c->wake);
}
