/*
 * loop.c - the scheduling thread: finishes what ended on virtual nodes,
 * requeues what was preempted once its grace is over, runs one cycle of the
 * core, applies its decisions and makes them durable in one transaction.
 *
 * It wakes on every change (submit, cancel, drain: ctld_kick) and every
 * cfg.interval_s. Applying a cycle: starts bind (the core already did) and
 * become `running` with their placement; victims become `stopping` until
 * their grace ends (virtual nodes have no process to signal: the grace is
 * the time a real job would take to checkpoint), then `pending` again with a
 * backoff; a pending job's reason and explanation are kept in memory and
 * written with its next state change (writing 100,000 reasons a second would
 * cost more than the scheduling). If the store refuses the transaction the
 * controller exits (a restart rebuilds from what is durable).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctld/ctld.h"
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

typedef struct batch {
    ts_job_row *rows;  /* copies (shallow: strings stay owned by the jobs) */
    cjob **jobs;
    int n, cap;
    ts_event_row *ev;
    char **ev_detail;
    int nev, evcap;
} batch;

static int batch_row(batch *b, cjob *j)
{
    for (int i = 0; i < b->n; i++)
        if (b->jobs[i] == j)
            return 0;
    if (b->n == b->cap) {
        int cap = b->cap ? b->cap * 2 : 64;
        ts_job_row *r = realloc(b->rows, (size_t)cap * sizeof *r);
        if (r)
            b->rows = r;
        cjob **jj = realloc(b->jobs, (size_t)cap * sizeof *jj);
        if (jj)
            b->jobs = jj;
        if (!r || !jj)
            return TS_ENOMEM;
        b->cap = cap;
    }
    b->jobs[b->n++] = j;
    return 0;
}

static int batch_event(batch *b, int64_t job, double t, const char *kind, char *detail)
{
    if (b->nev == b->evcap) {
        int cap = b->evcap ? b->evcap * 2 : 64;
        ts_event_row *e = realloc(b->ev, (size_t)cap * sizeof *e);
        if (!e) {
            free(detail);
            return TS_ENOMEM;
        }
        b->ev = e;
        b->evcap = cap;
    }
    ts_event_row *e = &b->ev[b->nev++];
    memset(e, 0, sizeof *e);
    e->job_id = job;
    e->t_s = t;
    snprintf(e->kind, sizeof e->kind, "%s", kind);
    e->detail = detail;
    return 0;
}

static void batch_free(batch *b)
{
    for (int i = 0; i < b->nev; i++)
        free(b->ev[i].detail);
    free(b->ev);
    free(b->rows);
    free(b->jobs);
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

/* Virtual jobs that ended, and victims whose grace is over. */
static int finish_and_requeue(ctld *c, double now, batch *b)
{
    for (int i = 0; i < c->njobs; i++) {
        cjob *j = c->jobs[i];
        if (j->row.state == TS_JOB_RUNNING && j->is_virtual && j->end_s <= now) {
            ctld_job_unbind(c, j, now);
            j->row.state = TS_JOB_COMPLETED;
            j->row.end_s = now;
            c->m.finished++;
            if (batch_row(b, j) || batch_event(b, j->row.id, now, "finished", NULL))
                return TS_ENOMEM;
        } else if (j->row.state == TS_JOB_STOPPING && j->is_virtual && j->sj.stop_by_s <= now) {
            /* virtual: the grace is the checkpoint; jobs on agents requeue
             * when their agents report every rank stopped (agents.c) */
            if (batch_event(b, j->row.id, now, "run-ended", ctld_run_detail(j, now)))
                return TS_ENOMEM;
            ctld_job_unbind(c, j, now);
            j->row.state = TS_JOB_PENDING;
            j->row.start_s = 0;
            int n = recent_preemptions(j, now);
            j->sj.eligible_s = now + ts_sched_backoff_s(c->sched, n > 0 ? n : 1);
            if (batch_row(b, j) ||
                batch_event(b, j->row.id, now, "requeued",
                            dupf("checkpointed; eligible again at %.0f", j->sj.eligible_s)))
                return TS_ENOMEM;
        }
    }
    return 0;
}

static int apply(ctld *c, double now, cjob **w, cjob **r, batch *b)
{
    ts_decision *d = &c->d;
    for (int k = 0; k < d->nstarts; k++) {
        cjob *j = w[d->starts[k].job];
        j->allocs = malloc((size_t)j->ntasks * sizeof *j->allocs);
        if (!j->allocs)
            return TS_ENOMEM;
        memcpy(j->allocs, d->starts[k].allocs, (size_t)j->ntasks * sizeof *j->allocs);
        j->sj.allocs = j->allocs;
        j->sj.start_s = now;
        j->sj.last_ckpt_s = now;
        j->sj.stopping = false;
        j->is_virtual = true;
        for (int t = 0; t < j->ntasks; t++)
            j->is_virtual = j->is_virtual && c->node_virtual[j->allocs[t].node];
        j->end_s = now + ctld_job_run_s(j);
        if (!j->is_virtual)
            ctld_nodes_touch_job(c, j); /* their agents start the ranks */
        j->row.state = TS_JOB_RUNNING;
        j->row.start_s = now;
        j->row.reason[0] = '\0';
        free(j->row.why);
        j->row.why = NULL;
        int m = c->cluster->nodes[j->allocs[0].node].model;
        snprintf(j->row.gpu_model, sizeof j->row.gpu_model, "%s",
                 m >= 0 ? ts_gpu_model_get(m)->name : "");
        free(j->row.placement_json);
        j->row.placement_json = ctld_placement_json(c, j);
        c->m.started++;
        double wait = now - j->row.submit_s;
        c->m.wait_s_sum += wait;
        c->m.wait_count++;
        observe(c->m.wait_hist, WAIT_BUCKETS, sizeof WAIT_BUCKETS / sizeof *WAIT_BUCKETS, wait);
        if (batch_row(b, j) ||
            batch_event(b, j->row.id, now, "started",
                        dupf("on %s%s", c->cluster->nodes[j->allocs[0].node].name,
                             j->ntasks > 1 ? " and others" : "")))
            return TS_ENOMEM;
    }
    for (int k = 0; k < d->npreempts; k++) {
        const ts_cycle_preempt *p = &d->preempts[k];
        cjob *v = r[p->victim];
        cjob *for_job = w[p->preemptor];
        v->row.state = TS_JOB_STOPPING;
        v->sj.stopping = true;
        v->sj.stop_by_s = now + p->grace_s;
        v->row.preemptions++;
        if (!v->is_virtual)
            ctld_nodes_touch_job(c, v); /* their agents signal the ranks */
        v->preempted_at[v->npreempted++ % CTLD_PREEMPT_MEMORY] = now;
        c->m.preempted++;
        if (batch_row(b, v) ||
            batch_event(b, v->row.id, now, "preempted",
                        dupf("for job %lld (%s, guaranteed); signal %d, grace %.0f s, %.0f "
                             "GPU-s since the last checkpoint",
                             (long long)for_job->row.id, for_job->row.tenant, p->signal,
                             p->grace_s, p->lost_gpu_s)))
            return TS_ENOMEM;
    }
    /* reasons, in memory; an event when a job first gets the reservation */
    for (int i = 0; i < c->njobs; i++)
        c->jobs[i]->reserved_at_s = -1.0;
    for (int k = 0; k < d->nstarts; k++)
        w[d->starts[k].job]->row.reason[0] = '\0';
    if (d->reserved >= 0 && w[d->reserved]->row.id != c->reserved_id) {
        cjob *j = w[d->reserved];
        c->reserved_id = j->row.id;
        if (batch_event(b, j->row.id, now, "reserved",
                        dupf("to start by %.0f (in %.0f s)", d->reserved_at_s,
                             d->reserved_at_s - now)))
            return TS_ENOMEM;
    } else if (d->reserved < 0) {
        c->reserved_id = 0;
    }
    return 0;
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

int ctld_cycle_once(ctld *c, double now, ts_err *err)
{
    pthread_mutex_lock(&c->mu);
    batch b = {0};
    int rc = ctld_agents_expire(c, now, err);
    if (rc == 0)
        rc = finish_and_requeue(c, now, &b);
    int nw = 0, nr = 0;
    ts_job *wv = malloc((size_t)(c->njobs + 1) * sizeof *wv);
    ts_job *rv = malloc((size_t)(c->njobs + 1) * sizeof *rv);
    cjob **wj = malloc((size_t)(c->njobs + 1) * sizeof *wj);
    cjob **rj = malloc((size_t)(c->njobs + 1) * sizeof *rj);
    if (!wv || !rv || !wj || !rj)
        rc = TS_ENOMEM;
    for (int i = 0; rc == 0 && i < c->njobs; i++) {
        cjob *j = c->jobs[i];
        if (j->row.state == TS_JOB_PENDING || j->row.state == TS_JOB_HELD) {
            j->sj.held = j->row.state == TS_JOB_HELD;
            wj[nw] = j;
            wv[nw++] = j->sj;
        } else if (j->row.state == TS_JOB_RUNNING || j->row.state == TS_JOB_STOPPING) {
            j->sj.preemptions_hour = recent_preemptions(j, now);
            rj[nr] = j;
            rv[nr++] = j->sj;
        }
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (rc == 0)
        rc = ts_sched_cycle(c->sched, now, wv, nw, rv, nr, &c->d, err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (rc == 0) {
        c->m.cycles++;
        c->m.cycle_s_sum += dt;
        c->last_cycle_ms = dt * 1e3;
        observe(c->m.cycle_hist, CYCLE_BUCKETS, sizeof CYCLE_BUCKETS / sizeof *CYCLE_BUCKETS,
                dt);
        rc = apply(c, now, wj, rj, &b);
    }
    if (rc == 0) {
        for (int i = 0; i < nw; i++) {
            const ts_cycle_pending *p = &c->d.pending[i];
            if (p->reason == TS_PEND_NONE)
                continue;
            snprintf(wj[i]->row.reason, sizeof wj[i]->row.reason, "%s",
                     ts_pending_name(p->reason));
            wj[i]->reserved_at_s = p->reserved_at_s;
            if (!wj[i]->row.why || strcmp(wj[i]->row.why, p->why) != 0) {
                free(wj[i]->row.why);
                wj[i]->row.why = strdup(p->why);
            }
        }
        for (int i = 0; i < b.n; i++)
            b.rows[i] = b.jobs[i]->row;
        if (b.n > 0 || b.nev > 0) {
            rc = ts_store_apply(c->store, b.rows, b.n, b.ev, b.nev, err);
            for (int i = 0; rc == 0 && i < b.n; i++)
                b.jobs[i]->row.gen = b.rows[i].gen;
        }
    }
    bool reshaped = rc == 0 && mig_replan(c, wj, nw, now);
    /* finished jobs leave memory once durable */
    for (int i = c->njobs - 1; rc == 0 && i >= 0; i--)
        if (ts_job_state_terminal(c->jobs[i]->row.state))
            ctld_job_remove(c, c->jobs[i]);
    c->frag_free_gpus = ts_gang_index_free_gpus(ts_sched_gang_index(c->sched), -1);
    c->dirty = reshaped;
    pthread_mutex_unlock(&c->mu);
    free(wv);
    free(rv);
    free(wj);
    free(rj);
    batch_free(&b);
    return rc;
}

/* Cycles triggered by changes are at least this far apart, so a storm of
 * submissions is scheduled in batches instead of one cycle per job. */
#define CYCLE_MIN_GAP_S 0.02

static void wait_until(ctld *c, double t)
{
    struct timespec until;
    until.tv_sec = (time_t)t;
    until.tv_nsec = (long)((t - floor(t)) * 1e9);
    pthread_cond_timedwait(&c->wake, &c->mu, &until);
}

static void *loop_main(void *arg)
{
    ctld *c = arg;
    double last = 0.0;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        while (!c->stop && c->dirty && ctld_now() < last + CYCLE_MIN_GAP_S)
            wait_until(c, last + CYCLE_MIN_GAP_S);
        if (!c->dirty && !c->stop) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            double t = (double)until.tv_sec + (double)until.tv_nsec * 1e-9 + c->cfg.interval_s;
            until.tv_sec = (time_t)t;
            until.tv_nsec = (long)((t - floor(t)) * 1e9);
            pthread_cond_timedwait(&c->wake, &c->mu, &until);
        }
        bool stop = c->stop;
        pthread_mutex_unlock(&c->mu);
        if (stop)
            return NULL;
        ts_err err;
        last = ctld_now();
        if (ctld_cycle_once(c, last, &err) != 0) {
            fprintf(stderr, "tesserad: scheduling cycle failed: %s; exiting so that a restart "
                    "rebuilds from the store\n", err.msg);
            exit(1);
        }
        pthread_mutex_lock(&c->mu);
        c->ready = true;
        pthread_mutex_unlock(&c->mu);
    }
}

int ctld_loop_start(ctld *c, pthread_t *th)
{
    return pthread_create(th, NULL, loop_main, c) == 0 ? 0 : TS_ENOMEM;
}
