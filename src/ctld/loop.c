/*
 * loop.c - the scheduling thread: finishes what ended on virtual nodes,
 * requeues what was preempted once its grace is over, runs one cycle of the
 * core, applies its decisions and makes them durable in one transaction.
 * Beside it, a filler thread turns large arrays' next elements into jobs
 * after each cycle (array_lazy.c), written while the next cycle plans.
 *
 * It wakes on every change (submit, cancel, drain: ctld_kick) and every
 * cfg.interval_s. Applying a cycle: starts bind (the core already did) and
 * become `running` with their placement; victims become `stopping` until
 * their grace ends (virtual nodes have no process to signal: the grace is
 * the time a real job would take to checkpoint), then `pending` again with a
 * backoff; a pending job's reason and explanation are kept in memory and
 * written with its next state change (writing 100,000 reasons a second would
 * cost more than the scheduling). Every change goes through the job state
 * machine (job_fsm.c): planned, written in one transaction, then applied.
 * If the store refuses the transaction nothing is applied (the starts the
 * core bound are undone) and the cycle runs again STORE_RETRY_S later; the
 * controller never exits over a failed write.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctld/ctld.h"
#include "ctld/http.h"
#include "ctld/imgloc.h"
#include "ctld/depend.h"
#include "ctld/job_end.h"
#include "ctld/job_fsm.h"
#include "tessera/mig_plan.h"

/* Histogram bounds, seconds. */
static const double CYCLE_BUCKETS[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0};
static const double WAIT_BUCKETS[] = {1, 10, 60, 300, 900, 3600, 4 * 3600, 24 * 3600};

static void observe(uint64_t *hist, const double *bounds, int nb, double v)
{
    for (int i = 0; i < nb; i++)
        if (v <= bounds[i])
            hist[i]++;
    hist[nb]++; /* +Inf */
}

static char *dupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dupf(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return strdup(buf);
}

static int recent_preemptions(cjob *j, double now)
{
    int n = 0;
    for (int i = 0; i < j->npreempted && i < CTLD_PREEMPT_MEMORY; i++)
        n += now - j->preempted_at[i] < 3600.0;
    return n;
}

/* The loop wakes for the next virtual end (not only every interval: a 1-s
 * job would hold its GPUs up to twice as long). */
static void next_virtual(ctld *c, double at)
{
    if (at > 0 && (c->next_virtual_s <= 0 || at < c->next_virtual_s))
        c->next_virtual_s = at;
}

/* Virtual jobs that ended, victims whose grace is over, and jobs on agents
 * at their time limit: planned into t
 * (memory changes once t is committed). */
static int finish_and_requeue(ctld *c, double now, ctld_txn *t, ts_err *err)
{
    c->next_virtual_s = 0;
    for (int i = 0; i < c->njobs; i++) {
        ctld_yield_some(c, i);
        cjob *j = c->jobs[i];
        int rc = 0;
        if (j->pinned) /* a change of it is being written: the next cycle */
            continue;
        if (j->is_virtual && j->row.state == TS_JOB_RUNNING && j->end_s > now)
            next_virtual(c, j->end_s);
        else if (j->is_virtual && j->row.state == TS_JOB_STOPPING && j->sj.stop_by_s > now)
            next_virtual(c, j->sj.stop_by_s);
        if (j->row.state == TS_JOB_RUNNING && j->is_virtual && j->end_s <= now) {
            rc = ctld_fsm_plan(c, t, j, CTLD_JE_FINISH, NULL, now, err);
        } else if (j->row.state == TS_JOB_STOPPING && j->is_virtual && j->sj.stop_by_s <= now) {
            /* virtual: the grace is the checkpoint; jobs on agents requeue
             * when their agents report every rank stopped (agents.c) */
            int n = recent_preemptions(j, now);
            double at = now + ts_sched_backoff_s(c->sched, n > 0 ? n : 1);
            char *d = dupf("checkpointed; eligible again at %.0f", at);
            ctld_fsm_args a = {.detail = d, .eligible_s = at};
            rc = d ? ctld_fsm_plan(c, t, j, CTLD_JE_STOPPED, &a, now, err) : TS_ENOMEM;
            free(d);
        }
        if (rc != 0)
            return rc;
    }
    /* time limits on agents (job_end.c): the loop wakes for the next one too */
    next_virtual(c, ctld_next_limit_s(c));
    return ctld_time_limits(c, now, t, err);
}

/* A decision the state machine refuses (the core and memory disagree about
 * a job's state) is left out, not the whole cycle: a start is not applied,
 * a preemption dropped, and it is logged. */
static void decision_refused(const ts_job *sj, const ts_err *why)
{
    fprintf(stderr, "tesserad: job %lld: decision left out: %s\n", (long long)sj->id, why->msg);
}

/* "on n1,n2,...": the nodes of a start, each once, in rank order; past
 * STARTED_NODES_MAX of them "... and N more" (the detail stays bounded). */
#define STARTED_NODES_MAX 64
static char *started_detail(const ctld *c, const ts_alloc *al, int ntasks)
{
    size_t cap = 16 + (size_t)STARTED_NODES_MAX * (TS_NAME_MAX + 1);
    char *s = malloc(cap);
    if (!s)
        return NULL;
    size_t len = (size_t)snprintf(s, cap, "on ");
    int listed = 0, more = 0;
    for (int t = 0; t < ntasks; t++) {
        bool seen = false;
        for (int u = 0; u < t && !seen; u++)
            seen = al[u].node == al[t].node;
        if (seen)
            continue;
        if (listed == STARTED_NODES_MAX) {
            more++;
            continue;
        }
        len += (size_t)snprintf(s + len, cap - len, "%s%s", listed ? "," : "",
                                c->cluster->nodes[al[t].node].name);
        listed++;
    }
    if (more)
        snprintf(s + len, cap - len, " and %d more", more);
    return s;
}

/* The "secrets-used" event of a run that receives secrets: their names. */
static int secrets_used(ctld_txn *t, const cjob *j, double now)
{
    char names[TS_SPEC_MAX_SECRETS * TS_SPEC_NAME_MAX + 8] = "names=";
    for (int i = 0; i < j->spec->nsecrets; i++) {
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", i ? "," : "", j->spec->secrets[i].name);
    }
    return ctld_txn_event(t, j->row.id, now, "secrets-used", names);
}

/* A waiting job whose image its reserved nodes fetch ahead: one with an
 * image that needs no pull secret (a secret goes to a node only with a
 * rank about to start). */
static bool prefetches(const cjob *j)
{
    return j->spec && j->spec->image && !j->spec->image_secret[0];
}

/* "a,b,c" of nodes (malloc'd), NULL when none. */
static char *node_list(const ctld *c, const int *nodes, int n)
{
    size_t len = 1;
    for (int i = 0; i < n; i++)
        len += strlen(c->cluster->nodes[nodes[i]].name) + 1;
    char *s = n > 0 ? malloc(len) : NULL;
    if (!s)
        return NULL;
    s[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (i)
            strcat(s, ",");
        strcat(s, c->cluster->nodes[nodes[i]].name);
    }
    return s;
}

/* The waiting job whose image the cycle fetches ahead (d->prefetch, one:
 * TS_CYCLE_PREFETCH_JOBS), or NULL. */
static const cjob *prefetch_of(const ctld *c, cjob **w)
{
    const ts_decision *d = &c->d;
    return d->nprefetch > 0 && prefetches(w[d->prefetch[0].job]) ? w[d->prefetch[0].job] : NULL;
}

/* The fetch ahead of j's image (NULL: none) on the cycle's prefetch nodes:
 * the nodes it leaves and the nodes it reaches get their desired state
 * again. */
static void prefetch_update(ctld *c, const cjob *j)
{
    const ts_decision *d = &c->d;
    int64_t id = j ? j->row.id : 0;
    int n = j ? d->prefetch[0].nnodes : 0;
    const int *nodes = j ? d->prefetch[0].nodes : NULL;
    bool same = id == c->prefetch_job && n == c->nprefetch_nodes &&
                (n == 0 || !memcmp(c->prefetch_nodes, nodes, (size_t)n * sizeof(int)));
    if (same)
        return;
    for (int i = 0; i < c->nprefetch_nodes; i++)
        ctld_agent_moved(c, c->prefetch_nodes[i]);
    c->prefetch_job = n > 0 ? id : 0;
    c->nprefetch_nodes = n;
    if (n > 0)
        memcpy(c->prefetch_nodes, nodes, (size_t)n * sizeof(int));
    for (int i = 0; i < n; i++)
        ctld_agent_moved(c, c->prefetch_nodes[i]);
}

/* The cycle's starts and preemptions, planned into t; started[k] says
 * whether start k is to be applied: planned into t (false: refused). */
static int plan_decisions(ctld *c, double now, cjob **w, cjob **r, ctld_txn *t, bool *started,
                          ts_err *err)
{
    ts_decision *d = &c->d;
    int rc = 0;
    for (int k = 0; k < d->nstarts; k++)
        started[k] = true;
    for (int k = 0; rc == 0 && k < d->nstarts; k++) {
        if ((k & 255) == 255) /* a start costs about 4 us here */
            ctld_yield(c);
        cjob *j = w[d->starts[k].job];
        const ts_alloc *al = d->starts[k].allocs;
        char *detail = started_detail(c, al, j->ntasks);
        ctld_fsm_args a = {.detail = detail, .allocs = al};
        rc = detail ? ctld_fsm_plan(c, t, j, CTLD_JE_START, &a, now, err) : TS_ENOMEM;
        free(detail);
        if (rc == TS_ECONFLICT) {
            decision_refused(&j->sj, err);
            started[k] = false;
            rc = 0;
        } else if (rc == 0 && j->spec->nsecrets > 0 && !j->is_virtual) {
            rc = secrets_used(t, j, now); /* audit: this run's agents get them */
        }
    }
    for (int k = 0; rc == 0 && k < d->npreempts; k++) {
        const ts_cycle_preempt *p = &d->preempts[k];
        cjob *v = r[p->victim];
        cjob *for_job = w[p->preemptor];
        /* why: the preemptor's own tier (an opportunistic job within its
         * tenant's guarantee reclaims too), then reclaim or time-sharing
         * (las levels); events.c reads it back */
        char why[64];
        const char *tier = for_job->sj.tier == TS_TIER_GUARANTEED ? "guaranteed" : "opportunistic";
        if (p->time_sharing)
            snprintf(why, sizeof why, "%s, time-sharing, level %d over %d", tier,
                     p->preemptor_level, p->victim_level);
        else if (p->move)
            snprintf(why, sizeof why, "%s, reclaim, moved to restart elsewhere", tier);
        else
            snprintf(why, sizeof why, "%s, reclaim", tier);
        char *detail = dupf("for job %lld (%s, %s); signal %d, grace %.0f s, %.0f "
                            "GPU-s since the last checkpoint",
                            (long long)for_job->row.id, for_job->row.tenant, why, p->signal,
                            p->grace_s, p->lost_gpu_s);
        ctld_fsm_args a = {.detail = detail, .stop_by_s = now + p->grace_s,
                           .restart_now = p->move};
        rc = detail ? ctld_fsm_plan(c, t, v, CTLD_JE_PREEMPT, &a, now, err) : TS_ENOMEM;
        free(detail);
        if (rc == TS_ECONFLICT) {
            decision_refused(&v->sj, err);
            rc = 0;
        }
    }
    for (int k = 0; rc == 0 && k < d->nresizes; k++) {
        cjob *v = r[d->resizes[k].job];
        rc = ctld_elastic_plan(c, t, v, &d->resizes[k], now, err);
        if (rc == TS_ECONFLICT) {
            decision_refused(&v->sj, err);
            rc = 0;
        }
    }
    /* an event when a job first gets the reservation */
    if (rc == 0 && d->reserved >= 0 && w[d->reserved]->row.id != c->reserved_id) {
        cjob *j = w[d->reserved];
        char *detail = dupf("to start by %.0f (in %.0f s)", d->reserved_at_s,
                            d->reserved_at_s - now);
        rc = detail ? ctld_txn_event(t, j->row.id, now, "reserved", detail) : TS_ENOMEM;
        free(detail);
    }
    /* an event when a waiting job's image is first fetched ahead */
    const cjob *pj = prefetch_of(c, w);
    if (rc == 0 && pj && pj->row.id != c->prefetch_job) {
        const cjob *j = pj;
        char *nodes = node_list(c, d->prefetch[0].nodes, d->prefetch[0].nnodes);
        char *pf = nodes ? dupf("nodes=%s image=%s", nodes, j->spec->image) : NULL;
        rc = !nodes || pf ? (pf ? ctld_txn_event(t, j->row.id, now, "prefetch", pf) : 0)
                          : TS_ENOMEM;
        free(pf);
        free(nodes);
    }
    if (rc == TS_ENOMEM)
        ts_err_set(err, TS_ENOMEM, "out of memory");
    return rc;
}

#ifdef TS_STORE_FAULTS_ENV
/* Test builds, after every cycle: what the scheduler holds (nodes, quota,
 * gang index) is recomputed from the jobs that hold allocations and
 * compared (ts_sched_check); a difference stops tesserad, so the test that
 * made it fails where it happened. */
static void check_bound(ctld *c)
{
    ts_job *held = malloc((size_t)(c->njobs + 1) * sizeof *held);
    int n = 0;
    if (!held)
        return;
    for (int i = 0; i < c->njobs; i++)
        if (c->jobs[i]->allocs) {
            held[n] = c->jobs[i]->sj;
            held[n++].allocs = c->jobs[i]->allocs;
        }
    ts_err e;
    if (ts_sched_check(c->sched, held, n, &e) == TS_EINVAL) {
        fprintf(stderr, "tesserad: the scheduler and the jobs disagree: %s\n", e.msg);
        abort();
    }
    free(held);
    if (!ctld_counts_check(c, e.msg, sizeof e.msg)) {
        fprintf(stderr, "tesserad: the jobs by tenant and state disagree: %s\n", e.msg);
        abort();
    }
}
#endif

/* After a committed cycle: what only memory keeps (wait times, the
 * reservation). A job's place in the queue is set with its reason (every
 * ranked job; a started one is no longer ranked), not by a pass over every
 * active job. */
static void after_starts(ctld *c, double now, cjob **w, const bool *started)
{
    ts_decision *d = &c->d;
    for (int k = 0; k < d->nstarts; k++) {
        const cjob *j = w[d->starts[k].job];
        if (!started[k])
            continue;
        double wait = now - j->row.submit_s;
        c->m.wait_s_sum += wait;
        c->m.wait_count++;
        observe(c->m.wait_hist, WAIT_BUCKETS, sizeof WAIT_BUCKETS / sizeof *WAIT_BUCKETS, wait);
    }
    if (d->reserved >= 0)
        c->reserved_id = w[d->reserved]->row.id;
    else
        c->reserved_id = 0;
    prefetch_update(c, prefetch_of(c, w));
}

static int by_order(const void *x, const void *y)
{
    const cjob *a = *(cjob *const *)x, *b = *(cjob *const *)y;
    if (a->sj.priority != b->sj.priority)
        return a->sj.priority > b->sj.priority ? -1 : 1;
    return (a->sj.submit_s > b->sj.submit_s) - (a->sj.submit_s < b->sj.submit_s);
}

/* Dynamic MIG (docs/scheduler.md): the MIG requests that wait for room get
 * idle instances of other profiles destroyed (at most
 * TS_MIG_PLAN_CHANGES_DEFAULT GPUs a cycle, never a busy instance). The new
 * layouts go to the agents at once; placement creates the instances the
 * next cycle. Under mu. */
static bool mig_replan(ctld *c, cjob **wj, int nw, double now)
{
    cjob **order = malloc((size_t)(nw + 1) * sizeof *order);
    ts_mig_demand *dem = NULL;
    int nd = 0, no = 0;
    for (int i = 0; order && i < nw; i++) {
        ctld_yield_some(c, i);
        const ts_cycle_pending *p = &c->d.pending[i];
        const cjob *j = wj[i];
        if (j->sj.held || j->sj.eligible_s > now ||
            (p->reason != TS_PEND_CAPACITY && p->reason != TS_PEND_FRAGMENTATION &&
             p->reason != TS_PEND_GANG && p->reason != TS_PEND_TOPOLOGY &&
             p->reason != TS_PEND_RESERVATION))
            continue;
        bool mig = false;
        for (int t = 0; t < j->sj.ntasks && !mig; t++)
            mig = j->sj.tasks[t].mig_profile >= 0;
        if (mig)
            order[no++] = wj[i];
    }
    if (no == 0) {
        free(order);
        return false;
    }
    qsort(order, (size_t)no, sizeof *order, by_order);
    int total = 0;
    for (int i = 0; i < no; i++)
        total += order[i]->sj.ntasks;
    dem = calloc((size_t)total, sizeof *dem);
    for (int i = 0; dem && i < no; i++)
        for (int t = 0; t < order[i]->sj.ntasks; t++)
            if (order[i]->sj.tasks[t].mig_profile >= 0)
                dem[nd++] = (ts_mig_demand){.req = order[i]->sj.tasks[t], .count = 1};
    bool *closed = calloc((size_t)c->cluster->nnodes + 1, sizeof *closed);
    for (int n = 0; closed && n < c->cluster->nnodes; n++)
        closed[n] = !ts_sched_node_schedulable(c->sched, n);
    ts_mig_change ch[TS_MIG_PLAN_CHANGES_DEFAULT];
    size_t nch = 0;
    bool changed = false;
    ts_err e;
    ts_mig_plan_opts opts = {.max_changes = TS_MIG_PLAN_CHANGES_DEFAULT, .excluded = closed};
    if (dem && closed &&
        ts_mig_plan(c->cluster, dem, (size_t)nd, &opts, ch, TS_MIG_PLAN_CHANGES_DEFAULT, &nch,
                    NULL, &e) == 0 &&
        nch > 0) {
        if (ts_mig_plan_apply(c->cluster, ch, nch, &e) == 0) {
            for (size_t k = 0; k < nch; k++)
                ctld_agent_moved(c, ch[k].node);
            changed = true; /* place on the new room at the next cycle */
        } else {
            fprintf(stderr, "tesserad: MIG plan: %s\n", e.msg);
        }
    }
    free(closed);
    free(dem);
    free(order);
    return changed;
}

static void store_failed(ctld *c, const char *what, const ts_err *e)
{
    c->m.store_failures++;
    fprintf(stderr, "tesserad: %s not written (%s); memory unchanged, trying again\n", what,
            e->msg);
}

/* Under mu: waits on cv until it is signalled or the clock (ctld_now)
 * reaches t. */
static void wait_until(ctld *c, pthread_cond_t *cv, double t)
{
    ctld_cond_wait_until(cv, &c->mu, t);
}

/* t, planned by the cycle before it decides: written with mu released,
 * then applied; a refused write changes nothing and is logged (the next
 * cycle plans it again). Whether it was written. */
static bool commit_apply(ctld *c, ctld_txn *t, double now, const char *what)
{
    ts_err e;
    if (ctld_cycle_commit(c, t, &e) != 0) {
        store_failed(c, what, &e);
        return false;
    }
    ctld_txn_apply(c, t, now);
    return true;
}

int ctld_cycle_commit(ctld *c, ctld_txn *t, ts_err *err)
{
    ctld_commit_enter(c);
    int rc = ctld_txn_commit(c, t, err);
    ctld_commit_leave(c);
    return rc;
}

/* Test builds: TESSERAD_TEST_CYCLE_DELAY_MS (0..10000, read at start)
 * stretches every cycle by that long, half with mu released (as the core
 * computes) and half under mu in 5-ms steps with a yield after each, in the
 * middle of the dependency pass (as the passes over every job), so a test
 * can check that reads of jobs never wait for a cycle and that what comes
 * in at a yield is decided right (tests/ctld/reads_test.py). */
static double test_delay_s;

static void test_delay(ctld *c, bool locked)
{
    if (test_delay_s <= 0.0)
        return;
    double until = ctld_now() + test_delay_s / 2;
    struct timespec step = {0, locked ? 5000000L : 20000000L};
    while (ctld_now() < until) {
        nanosleep(&step, NULL);
        if (locked)
            ctld_yield(c);
    }
}

void ctld_test_pause(ctld *c)
{
    test_delay(c, true);
}

/* One cycle's working set, from its phases' start to its end. */
typedef struct cycle_run {
    double now;
    bool failed;    /* a write was refused: the next cycle waits (store_failing) */
    bool planned;   /* the core decided: its decisions were committed or undone */
    bool committed; /* ... and written */
    ctld_throttle *thr;
    /* copies of the waiting and running jobs the core decides on */
    ts_job *wv, *rv;
    cjob **wj, **rj;
    int nw, nr;
} cycle_run;

/* Phase 1: what must be written before the core sees the room: lost
 * agents, the jobs that ended, dependencies decided (a job that waits for
 * one is not shown to the core; one that can never hold fails). */
static int cycle_prepare(ctld *c, cycle_run *r, ts_err *err)
{
    /* the policies and lost agents, each written on its own (they log and
     * retry what the store refused) */
    ctld_agents_expire(c, r->now);
    ctld_yield(c);
    ctld_txn t1 = {.quiet = true};
    int rc = finish_and_requeue(c, r->now, &t1, err);
    if (rc == 0 && t1.n > 0 && !commit_apply(c, &t1, r->now, "finished and requeued jobs"))
        r->failed = true;
    ctld_txn_fini(&t1);
    ctld_yield(c);
    ctld_txn td = {.quiet = true};
    if (rc == 0)
        rc = ctld_deps_plan(c, r->now, &td, err);
    if (rc == 0 && td.n > 0 && !commit_apply(c, &td, r->now, "jobs whose dependency failed"))
        r->failed = true;
    ctld_txn_fini(&td);
    ctld_yield(c);
    return rc;
}

/* Phase 2: copies of the jobs the core decides on. The jobs there are now:
 * submissions let in at a yield come after them (and join the next cycle);
 * none leaves while the cycle runs. */
static int cycle_collect(ctld *c, cycle_run *r, ts_err *err)
{
    r->thr = ctld_throttle_scan(c);
    int nj = c->njobs;
    r->wv = malloc((size_t)(nj + 1) * sizeof *r->wv);
    r->rv = malloc((size_t)(nj + 1) * sizeof *r->rv);
    r->wj = malloc((size_t)(nj + 1) * sizeof *r->wj);
    r->rj = malloc((size_t)(nj + 1) * sizeof *r->rj);
    if (!r->wv || !r->rv || !r->wj || !r->rj)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    for (int i = 0; i < nj; i++) {
        ctld_yield_some(c, i);
        cjob *j = c->jobs[i];
        if (j->pinned)
            continue; /* being written by another thread: it joins the next cycle */
        if (ctld_dep_waits(j))
            continue; /* waits for its dependency (depend.c set its reason) */
        if (ctld_throttle_waits(r->thr, j))
            continue; /* its array runs as many elements as its throttle allows */
        if (j->row.state == TS_JOB_PENDING || j->row.state == TS_JOB_HELD) {
            j->sj.held = j->row.state == TS_JOB_HELD;
            r->wj[r->nw] = j;
            r->wv[r->nw++] = j->sj;
        } else if (j->row.state == TS_JOB_RUNNING || j->row.state == TS_JOB_STOPPING) {
            j->sj.preemptions_hour = recent_preemptions(j, r->now);
            ctld_elastic_observe(c, j); /* what its step times say more GPUs are worth */
            r->rj[r->nr] = j;
            r->rv[r->nr++] = j->sj;
        }
    }
    ctld_imgloc_cycle(c, r->wj, r->wv, r->nw); /* ties go where a job's image is */
    return 0;
}

/* Phase 3: the core decides, with mu released, on the copies of the jobs
 * and on its own copy of the cluster and quota (tessera/cycle.h), synced
 * under mu: the live ones stay as they are, so readers (agents' desired
 * documents included) read them meanwhile. A drain may come in meanwhile
 * (a drained node keeps what the apply starts on it, as it keeps what
 * runs); every other change of them waits for the cycle's end. */
static int cycle_plan(ctld *c, cycle_run *r, ts_err *err)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ctld_yield(c);
    int rc = ts_sched_sync(c->sched, err);
    if (rc != 0)
        return rc;
    pthread_mutex_unlock(&c->mu);
    rc = ts_sched_plan(c->sched, r->now, r->wv, r->nw, r->rv, r->nr, &c->d, err);
    test_delay(c, false);
    pthread_mutex_lock(&c->mu);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc != 0)
        return rc;
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    c->m.cycles++;
    c->m.cycle_s_sum += dt;
    c->last_cycle_ms = dt * 1e3;
    observe(c->m.cycle_hist, CYCLE_BUCKETS, sizeof CYCLE_BUCKETS / sizeof *CYCLE_BUCKETS, dt);
    r->planned = true;
    return 0;
}

/* The written starts bound on the live cluster and charged to the live
 * quota (ts_sched_apply). Their room did not change since the sync (only
 * drains come in between), so a start that no longer fits is a bug:
 * logged, and test builds stop at the check at the cycle's end. */
static void apply_starts(ctld *c, const cycle_run *r, const bool *started)
{
    ts_err e;
    if (ts_sched_apply(c->sched, &c->d, r->wv, started, r->now, &e) != 0)
        fprintf(stderr, "tesserad: applying the cycle's starts: %s\n", e.msg);
}

/* Phase 4: the decisions written in one transaction with mu released,
 * then applied under mu: the jobs' states and the starts' binds on the live
 * cluster and quota at once, so no reader sees one without the other.
 * Refused, nothing was applied and nothing is undone. */
static int cycle_commit_decisions(ctld *c, cycle_run *r, ts_err *err)
{
    ts_err e;
    int rc = 0;
    ctld_txn t2 = {.quiet = true};
    bool *started = calloc((size_t)c->d.nstarts + 1, sizeof *started);
    int prc = started ? plan_decisions(c, r->now, r->wj, r->rj, &t2, started, err)
                      : ts_err_set(err, TS_ENOMEM, "out of memory");
    if (prc == 0 && ctld_cycle_commit(c, &t2, &e) == 0) {
        after_starts(c, r->now, r->wj, started);
        ctld_txn_apply(c, &t2, r->now);
        apply_starts(c, r, started);
        r->committed = true;
        for (int k = 0; k < c->d.nstarts; k++) {
            const cjob *j = r->wj[c->d.starts[k].job];
            if (started[k] && j->is_virtual && j->row.state == TS_JOB_RUNNING)
                next_virtual(c, j->end_s);
        }
        for (int k = 0; k < c->d.npreempts; k++) {
            const cjob *v = r->rj[c->d.preempts[k].victim];
            if (v->is_virtual && v->row.state == TS_JOB_STOPPING)
                next_virtual(c, v->sj.stop_by_s);
        }
    } else {
        if (prc == 0)
            store_failed(c, "the cycle's decisions", &e);
        else
            rc = prc;
        r->failed = true;
    }
    ctld_txn_fini(&t2);
    free(started);
    ctld_yield(c);
    return rc;
}

/* Phase 5: every waiting job's reason, place and estimate, kept in memory
 * (see the top) and copied only when it changed: snprintf for 100,000
 * waiting jobs a cycle was a seventh of the controller's time. */
static void cycle_reasons(ctld *c, cycle_run *r)
{
    for (int i = 0; i < r->nw; i++) {
        ctld_yield_some(c, i);
        const ts_cycle_pending *p = &c->d.pending[i];
        cjob *j = r->wj[i];
        if (p->reason == TS_PEND_NONE) { /* started: no longer ranked */
            j->reserved_at_s = j->estimated_s = -1.0;
            j->queue_tenant = j->queue_cluster = j->las_level = -1;
            continue;
        }
        if (ctld_elastic_fallback(c, j, p->reason))
            c->dirty = true; /* a grown elastic job that did not fit asks for less */
        const char *why_name = ts_pending_name(p->reason);
        size_t wl = strlen(why_name);
        if (wl < sizeof j->row.reason && strcmp(j->row.reason, why_name) != 0)
            memcpy(j->row.reason, why_name, wl + 1);
        j->reserved_at_s = p->reserved_at_s;
        j->estimated_s = p->estimated_s;
        j->queue_tenant = p->tenant_position;
        j->queue_cluster = p->cluster_position;
        j->las_level = p->level;
        if (!j->row.why || strcmp(j->row.why, p->why) != 0) {
            free(j->row.why);
            j->row.why = strdup(p->why);
        }
    }
}

/* Phase 6: what follows the decisions: MIG layouts reshaped for the
 * demand, the fragmentation figure, the store's health. */
static void cycle_finish(ctld *c, cycle_run *r)
{
    ctld_yield(c);
    bool reshaped = r->committed && mig_replan(c, r->wj, r->nw, r->now);
    c->frag_free_gpus = ts_gang_index_free_gpus(ts_sched_gang_index(c->sched), -1);
    if (reshaped)
        c->dirty = true;
    c->store_failing = r->failed;
#ifdef TS_STORE_FAULTS_ENV
    check_bound(c);
#endif
}

int ctld_cycle_once(ctld *c, double now, ts_err *err)
{
    ctld_cycle_enter(c); /* mu held from here; lock.h says who waits for it */
    cycle_run r = {.now = ctld_sched_clock(c, now)}; /* not before a change applied meanwhile */
    c->dirty = false; /* a change from here on asks for another cycle */
    int rc = cycle_prepare(c, &r, err);
    if (rc == 0)
        rc = cycle_collect(c, &r, err);
    if (rc == 0)
        rc = cycle_plan(c, &r, err);
    if (r.planned) {
        rc = cycle_commit_decisions(c, &r, err);
        cycle_reasons(c, &r);
    }
    cycle_finish(c, &r);
    ctld_cycle_leave(c);
    pthread_mutex_unlock(&c->mu);
    ctld_throttle_free(r.thr);
    free(r.wv);
    free(r.rv);
    free(r.wj);
    free(r.rj);
    return rc;
}

/* Cycles triggered by changes are at least this far apart, so a storm of
 * submissions is scheduled in batches instead of one cycle per job. */
#define CYCLE_MIN_GAP_S 0.02
/* After a failed write, the next cycle waits this long. */
#define STORE_RETRY_S 0.25

/* How often the filler looks at the arrays when no cycle wakes it. */
#define FILL_IDLE_S 0.2

/* The filler thread: large arrays' next elements become jobs (array_lazy.c)
 * after each cycle, written while the next one plans, so their writes cost
 * the cycles nothing; the jobs it adds ask for a cycle. */
static void *fill_main(void *arg)
{
    ctld *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        uint64_t seen = c->fill_gen;
        pthread_mutex_unlock(&c->mu);
        ctld_arrays_fill(c);
        pthread_mutex_lock(&c->mu);
        if (!c->stop && c->fill_gen == seen)
            ctld_cond_wait_until(&c->fill_wake, &c->mu, ctld_now() + FILL_IDLE_S);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static void *loop_main(void *arg)
{
    ctld *c = arg;
    double last = 0.0;
    pthread_t filler;
    bool filling = pthread_create(&filler, NULL, fill_main, c) == 0;
    if (!filling) /* the arrays are topped up by the loop itself, below */
        fprintf(stderr, "tesserad: no filler thread: large arrays grow with the cycles\n");
    /* ready (docs/api.md: the store is open and the loop runs) from the
     * start: submissions are acknowledged while the first cycle runs */
    pthread_mutex_lock(&c->mu);
    c->ready = true;
    pthread_mutex_unlock(&c->mu);
    for (;;) {
        pthread_mutex_lock(&c->mu);
        while (!c->stop && c->dirty && ctld_now() < last + CYCLE_MIN_GAP_S)
            wait_until(c, &c->wake, last + CYCLE_MIN_GAP_S);
        if (!c->dirty && !c->stop) {
            double t = ctld_now() + c->cfg.interval_s;
            if (c->next_virtual_s > 0 && c->next_virtual_s < t) /* a virtual run ends first */
                t = c->next_virtual_s > last + CYCLE_MIN_GAP_S ? c->next_virtual_s
                                                               : last + CYCLE_MIN_GAP_S;
            wait_until(c, &c->wake, t);
        }
        bool stop = c->stop;
        pthread_mutex_unlock(&c->mu);
        if (stop) {
            if (filling) {
                pthread_mutex_lock(&c->mu);
                pthread_cond_signal(&c->fill_wake);
                pthread_mutex_unlock(&c->mu);
                pthread_join(filler, NULL);
            }
            return NULL;
        }
        if (!filling)
            ctld_arrays_fill(c);
        ts_err err;
        last = ctld_now();
        int rc = ctld_cycle_once(c, last, &err);
        if (rc != 0) /* memory still equals the store: log and go on */
            fprintf(stderr, "tesserad: scheduling cycle failed: %s; trying again\n", err.msg);
        ctld_net_partitions_sync(c);
        ctld_net_peers_sync(c); /* the tenants' VXLANs flood to the nodes there are now */
        pthread_mutex_lock(&c->mu);
        /* a store (or cycle) that failed is retried, not hammered */
        if (rc != 0 || c->store_failing) {
            c->dirty = true;
            last = ctld_now() + STORE_RETRY_S - CYCLE_MIN_GAP_S;
        }
        c->fill_gen++;
        pthread_cond_signal(&c->fill_wake);
        pthread_mutex_unlock(&c->mu);
    }
}

int ctld_loop_start(ctld *c, pthread_t *th)
{
#ifdef TS_STORE_FAULTS_ENV
    const char *d = getenv("TESSERAD_TEST_CYCLE_DELAY_MS");
    if (d && *d) {
        char *end;
        double ms = strtod(d, &end);
        if (*end || !(ms >= 0.0 && ms <= 10000.0)) {
            fprintf(stderr, "tesserad: TESSERAD_TEST_CYCLE_DELAY_MS: \"%s\": must be 0..10000\n", d);
            return TS_EINVAL;
        }
        test_delay_s = ms / 1000.0;
    }
#endif
    return pthread_create(th, NULL, loop_main, c) == 0 ? 0 : TS_ENOMEM;
}
