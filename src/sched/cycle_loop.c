/*
 * cycle_loop.c - one scheduling cycle: order, quota, placement, reservation,
 * preemption, and a reason for every job that waits. This file orders the
 * waiting jobs and drives the cycle; one job's turn is cycle_job.c's, a
 * victim search cycle_preempt.c's (cycle_loop.h).
 *
 * Order. Jobs a preemption was decided for come first (their victims are
 * checkpointing for them), then jobs past the starvation bound, oldest
 * first (those that would borrow wait until no tenant's next job is
 * guaranteed, then go tenant by tenant by share: visit_starving), then
 * the rest: tenants interleaved through a heap keyed by weighted
 * dominant share (decayed usage, plus what this cycle already started for
 * them), a tenant whose next job is guaranteed before any whose next job
 * only borrows, each tenant's own jobs by priority class, tier (guaranteed
 * first), las level (under las; then service unless las_fifo_within_level),
 * submit time, id. Serving guarantees before loans matters: a borrower
 * started on the last free GPUs is protected by its minimum runtime, so the
 * guaranteed job behind it could neither start nor reclaim.
 *
 * Costs, for W waiting and R running jobs: O(W log W) to order; per job O(1)
 * for held, quota (one check per GPU model it may use) and the cluster-wide
 * free-GPU test; a job identical (tasks and topology) to one that failed
 * since the last start is answered from a memo; a placement attempt costs
 * what ts_gang_place costs (gang.c). One reservation per cycle (O(R log R)
 * plus the plan, cycle_plan.c) and at most cfg.max_preemptors_cycle victim
 * searches, as many again for jobs within their tenant's guarantee (O(R log
 * R) each plus the plan; one that moves jobs adds O(R) and the moves'
 * placements to each plan step).
 *
 * Starvation bound. Time limits are enforced by the shell, so the reserved
 * job starts by its reservation time T <= now + L, L the longest time limit
 * (a backfilled job ends before T or stays off the reserved GPUs). A job that
 * has waited starve_after_s in all (its age less the time it ran:
 * waited_s) is ordered before every job that has not (only preemptors,
 * which take opportunistic GPUs back for guaranteed work, go before it),
 * oldest first; so once the k starving jobs older than it have started it
 * holds the reservation, and it waits at most starve_after_s + (k + 1) * L
 * in all, unless it is held, invalid or refused by its own tenant's quota.
 * Not its age: a long job time-shared away after its first day would go
 * first again at once, and be time-shared away again (churn). tests/sched/test_cycle.c checks the
 * bound against a stream of short jobs from a tenant with a lower share.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/cycle_loop.h"
#include "sched/cycle_order.h"
#include "sched/elastic.h"
#include "tessera/fmt.h"

#define PREFETCH_AHEAD 6 /* jobs of one tenant fetched ahead in the ordered pass */

/* ---- memo keys ------------------------------------------------------------- */

static uint64_t job_key(const ts_job *j, bool blocked)
{
    uint64_t h = mix((uint64_t)j->ntasks, (uint64_t)(j->required_level + 3));
    h = mix(h, (uint64_t)(j->preferred_level + 3) * 2 + j->rail_aligned);
    h = mix(h, blocked);
    h = mix(h, (uint64_t)(uintptr_t)j->node_mask);
    for (int i = 0; i < j->nhost_ports; i++)
        h = mix(h, (uint64_t)j->host_ports[i] + 1);
    for (int i = 0; i < j->ntasks; i++) {
        const ts_request *r = &j->tasks[i];
        h = mix(h, (uint64_t)r->cpu_milli);
        h = mix(h, (uint64_t)r->mem_mib);
        h = mix(h, (uint64_t)r->num_gpu << 32 | (uint32_t)r->gpu_milli);
        h = mix(h, (uint64_t)r->gpu_mem_mib);
        h = mix(h, (uint64_t)r->model_mask << 32 | (uint32_t)(r->mig_profile + 1));
    }
    return h ? h : 1;
}

/* ---- tenant heap ----------------------------------------------------------- */

typedef struct theap {
    int *t;
    double *key;   /* per tenant: weighted dominant share */
    uint8_t *opp;  /* per tenant: its next job is opportunistic */
    int n;
} theap;

/* Tenants whose next job is guaranteed go before tenants whose next job only
 * borrows (what a guarantee promises is served before what is lent), then
 * the lower share. */
static bool heap_less(const theap *h, int a, int b)
{
    int x = h->t[a], y = h->t[b];
    if (h->opp[x] != h->opp[y])
        return h->opp[x] < h->opp[y];
    if (h->key[x] != h->key[y])
        return h->key[x] < h->key[y];
    return x < y;
}

static void heap_swap(theap *h, int a, int b)
{
    int t = h->t[a];
    h->t[a] = h->t[b];
    h->t[b] = t;
}

static void heap_down(theap *h, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && heap_less(h, l, m))
            m = l;
        if (r < h->n && heap_less(h, r, m))
            m = r;
        if (m == i)
            return;
        heap_swap(h, i, m);
        i = m;
    }
}

static void heap_up(theap *h, int i)
{
    while (i > 0 && heap_less(h, i, (i - 1) / 2)) {
        heap_swap(h, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

/* The preemptor table's ids in an open-addressing set (id -1 = empty; a
 * job id of -1 is looked up in the table itself). */
#define PREEMPTOR_SET_SLOTS (4 * PREEMPTOR_TABLE_MAX)

static void preemptor_set_build(const ts_sched *s, int64_t *set)
{
    for (int k = 0; k < PREEMPTOR_SET_SLOTS; k++)
        set[k] = -1;
    for (int k = 0; k < s->npre; k++) {
        uint64_t h = mix(0, (uint64_t)s->pre[k].id) % PREEMPTOR_SET_SLOTS;
        while (set[h] != -1 && set[h] != s->pre[k].id)
            h = (h + 1) % PREEMPTOR_SET_SLOTS;
        set[h] = s->pre[k].id;
    }
}

static bool preemptor_set_has(const int64_t *set, int64_t id)
{
    for (uint64_t h = mix(0, (uint64_t)id) % PREEMPTOR_SET_SLOTS; set[h] != -1;
         h = (h + 1) % PREEMPTOR_SET_SLOTS)
        if (set[h] == id)
            return true;
    return false;
}

/* In memory order, before any ordering: what does not depend on the order
 * (held, invalid) is decided here, and the rest summarised in l->js. */
static void prepass(loop *l, uint8_t *done)
{
    ts_sched *s = l->s;
    int64_t set[PREEMPTOR_SET_SLOTS];
    preemptor_set_build(s, set);
    for (int i = 0; i < l->nw; i++) {
        const ts_job *job = &l->w[i];
        ts_cycle_pending *p = &l->d->pending[i];
        p->reserved_at_s = -1.0;
        p->estimated_s = -1.0;
        p->tenant_position = -1;
        p->cluster_position = -1;
        p->level = -1;
        l->d->stats.considered++;
        done[i] = 1;
        if (job->held) {
            pend(l, i, TS_PEND_HELD, "held");
            continue;
        }
        if (job->eligible_s > l->now) {
            char left[32];
            ts_fmt_duration(job->eligible_s - l->now, left, sizeof left);
            pend(l, i, TS_PEND_HELD, "requeued after a preemption; backing off for another %s",
                 left);
            continue;
        }
        ts_err e;
        if (ts_sched_check_job(s, job, &e) != 0) {
            pend(l, i, TS_PEND_INVALID, "%s", e.msg);
            continue;
        }
        jsum *js = &l->js[i];
        memset(js, 0, sizeof *js);
        js->allowed = s->models_present;
        js->whole = true;
        for (int t = 0; t < job->ntasks; t++) {
            const ts_request *r = &job->tasks[t];
            js->cpu += r->cpu_milli;
            js->mem += r->mem_mib;
            js->gpus += r->mig_profile >= 0 ? 1 : r->num_gpu;
            js->mig = js->mig || r->mig_profile >= 0;
            js->whole = js->whole && r->num_gpu >= 1 && r->gpu_milli >= TS_MILLI_PER_GPU &&
                        r->mig_profile < 0;
            if (r->num_gpu > 0 || r->mig_profile >= 0) {
                js->gpu = true;
                js->gpu_milli += (int64_t)r->num_gpu * r->gpu_milli;
                if (r->model_mask)
                    js->allowed &= r->model_mask;
            }
        }
        if (js->gpu && !js->allowed) {
            pend(l, i, TS_PEND_INVALID, "tasks: no node has a GPU model the tasks allow");
            continue;
        }
        js->key = job_key(job, false);
        if (s->nres > 0) { /* where it may go depends on its window too */
            double limit = job->time_limit_s > 0 ? job->time_limit_s : s->cfg.default_time_limit_s;
            uint64_t bits;
            memcpy(&bits, &limit, sizeof bits);
            js->key = mix(mix(js->key, (uint64_t)job->reservation), bits);
        }
        js->las = l->tord[job->tenant] == TS_ORDER_LAS;
        if (js->las && job->attained_gpu_s > 0.0) { /* a fresh job is at level 0 */
            js->attained = job->attained_gpu_s;
            js->level = js->earned = LAS_SCALE * ts_sched_las_level(s, js->attained);
            double queued = job->queued_s > 0.0 ? job->queued_s : job->submit_s;
            double rate = js->level > 0 && s->cfg.las_promote_factor > 0.0
                              ? ts_sched_job_rate(s, job)
                              : 0.0;
            /* promotion: a job that waited promote_factor times what it ran */
            if (rate > 0.0 && l->now - queued >= s->cfg.las_promote_factor * js->attained / rate) {
                /* promoted: first among its tenant's fresh jobs by age; its
                 * earned level still decides whom it may time-share with */
                js->level = 0;
                js->attained = 0.0;
            }
        }
        js->preemptor = s->npre > 0 && preemptor_set_has(set, job->id);
        js->limit_s = limit_of(l, job);
        js->tenant = job->tenant;
        js->tier = job->tier;
        if (js->las && js->earned == 0) { /* the split first level's measure */
            l->tleft[js->tenant] += s->cfg.las_level_gpu_s - js->attained;
            l->tfresh[js->tenant]++;
        }
        done[i] = 0;
    }
}

/* Where tenant t's split first level steps (cfg.las_split_gpu_s). With
 * las_split_horizon_s set the step follows its backlog: the largest, up to
 * las_split_gpu_s and at least las_split_min_gpu_s, at which every waiting
 * job of its first level could take it within the horizon on the GPUs it
 * holds (each counted at the whole step, a hair more than those that ran
 * have left). A backlog of a few jobs per GPU keeps the step long, so few jobs
 * are stopped where a restart costs minutes; one of hundreds shortens it
 * until a job of minutes is through in minutes. */
static double split_step(const loop *l, int t, double gpus)
{
    const ts_sched_config *c = &l->s->cfg;
    double step = c->las_split_gpu_s;
    if (c->las_split_horizon_s > 0.0 && l->tfresh[t] > 0) {
        double fit = c->las_split_horizon_s * gpus / l->tfresh[t];
        if (fit < step)
            step = fit > c->las_split_min_gpu_s ? fit : c->las_split_min_gpu_s;
    }
    return step;
}

/* The split first level (cfg.las_split_gpu_s). Inside a tenant level 0 is
 * first come first served and never time-shared, so once the tenant's
 * level-0 work outgrows what it holds, a short job waits behind every older
 * job of up to las_level_gpu_s. A tenant with a guarantee whose waiting
 * level-0 work left exceeds las_split_backlog * las_level_gpu_s per GPU it
 * holds (at least its guarantee) puts its jobs past the split step at
 * doubled level 1: after its fresh jobs, which may time-share them. Its
 * jobs promoted by their wait (long jobs requeued, ordered by submission,
 * so ahead of every fresh job in one first level) go there too: with a
 * backlog hours deep they would otherwise hold the tenant's GPUs against
 * every short job that arrives (issue 33: on Philly October-November at
 * 24 and 32 times its arrivals, 336 and 1,324 s off the average JCT). Its
 * fresh jobs go by the GPUs they ask, fewest first, then by submission: no
 * fresh job has a service to go by, and in a backlog that deep first come
 * first served makes a 1-GPU job of minutes wait out every older gang (on
 * Philly, 78 % of 1-GPU jobs hold under a GPU-hour, 17-29 % of 4- and 8-GPU
 * ones; a starving gang still goes first by the starvation bound). A
 * tenant with no guarantee (one team alone on a cluster) is never split:
 * its backlog's depth says nothing of a first level's fit. */
/* The part of a split first level that attained service puts a job in:
 * 0 before the step, 1 past it, 2 past the mid step (when above the step). */
static int split_part(double attained, double step, double mid)
{
    return attained < step ? 0 : mid > step && attained >= mid ? 2 : 1;
}

static int split_levels(loop *l, const uint8_t *done)
{
    ts_sched *s = l->s;
    double step = s->cfg.las_split_gpu_s, top = s->cfg.las_level_gpu_s;
    if (!(step > 0.0) || step >= top)
        return 0;
    int nt = ts_quota_tenants(s->q)->n;
    const double *left = l->tleft; /* summed by prepass */
    uint8_t *split = l->tsplit; /* zeroed by loop_alloc */
    double *at = l->tstep; /* a hair below each split tenant's step: a sum of increments */
    double mid = s->cfg.las_split_mid_gpu_s < top ? s->cfg.las_split_mid_gpu_s * (1.0 - 1e-9)
                                                  : 0.0;
    bool any = false;
    for (int t = 0; t < nt; t++) {
        int64_t g = cycle_guaranteed_gpu_milli(s, t), held = cycle_held_gpu_milli(s, t);
        double gpus = (double)(held > g ? held : g) / TS_MILLI_PER_GPU;
        split[t] = g > 0 && left[t] > s->cfg.las_split_backlog * top * gpus;
        at[t] = split[t] ? split_step(l, t, gpus) * (1.0 - 1e-9) : 0.0;
        any = any || split[t];
    }
    for (int i = 0; any && i < l->nw; i++) {
        jsum *js = &l->js[i];
        if (done[i] || !js->las || !split[js->tenant])
            continue;
        int part = split_part(js->attained, at[js->tenant], mid);
        if (js->earned == 0 && part > 0)
            js->level = js->earned = part; /* past the step */
        else if (js->earned > 0 && js->level == 0)
            js->level = mid > at[js->tenant] ? 2 : 1; /* promoted by its wait: last of the level */
        else if (js->earned == 0)
            js->by_size = true; /* fresh: fewest GPUs first */
    }
    for (int j = 0; any && j < l->nr; j++) {
        int t = l->r[j].tenant;
        int part = split[t] ? split_part(l->rattained[j], at[t], mid) : 0;
        if (part > 0 && l->tord[t] == TS_ORDER_LAS && l->rlevel[j] == 0) {
            l->rlevel[j] = part;
            if (l->max_running_level < l->rlevel[j])
                l->max_running_level = l->rlevel[j];
        }
    }
    return 0;
}

/* ---- order ------------------------------------------------------------------ */

static cycle_okey okey_of(const loop *l, int idx, bool by_age)
{
    const ts_job *j = &l->w[idx];
    const jsum *js = &l->js[idx];
    if (by_age) /* one bucket, oldest first */
        return (cycle_okey){0, 0, 0, 0, 0.0, j->submit_s, j->id, idx};
    double attained = js->by_size                           ? (double)js->gpus
                      : l->s->cfg.las_fifo_within_level ? 0.0
                                                        : js->attained;
    return (cycle_okey){j->tenant, j->priority, j->tier, js->level,
                        attained, j->submit_s, j->id, idx};
}

/* Where job i stands in the order, then its processing. */
static int visit(loop *l, int i)
{
    ts_cycle_pending *p = &l->d->pending[i];
    int t = l->w[i].tenant;
    p->tenant_position = l->tseen[t]++;
    p->cluster_position = l->seen++;
    p->level = l->js[i].las ? l->js[i].level / LAS_SCALE : -1;
    return loop_process(l, i);
}

static int check_input(const loop *l, ts_err *err)
{
    int nt = ts_quota_tenants(l->s->q)->n;
    for (int i = 0; i < l->nw; i++)
        if (l->w[i].tenant < 0 || l->w[i].tenant >= nt || l->w[i].ntasks < 1 || !l->w[i].tasks)
            return ts_err_set(err, TS_EINVAL, "waiting[%d] (job %lld): tenant and tasks are "
                              "required", i, (long long)l->w[i].id);
    for (int j = 0; j < l->nr; j++) {
        const ts_job *v = &l->r[j];
        if (v->tenant < 0 || v->tenant >= nt || v->ntasks < 1 || !v->tasks || !v->allocs)
            return ts_err_set(err, TS_EINVAL, "running[%d] (job %lld): tenant, tasks and allocs "
                              "are required", j, (long long)v->id);
    }
    return 0;
}

static int loop_alloc(loop *l)
{
    int maxt = 1;
    for (int i = 0; i < l->nw; i++)
        maxt = l->w[i].ntasks > maxt ? l->w[i].ntasks : maxt;
    size_t nr = (size_t)(l->nr > 0 ? l->nr : 1);
    int nt = ts_quota_tenants(l->s->q)->n;
    l->start_off = malloc((size_t)(l->nw > 0 ? l->nw : 1) * sizeof *l->start_off);
    l->tmp = malloc((size_t)maxt * sizeof *l->tmp);
    l->plan = malloc((size_t)maxt * sizeof *l->plan);
    /* reserve() plans the running and the started; try_preempt its candidates */
    l->pj = malloc((nr + (size_t)l->nw + 1) * sizeof *l->pj);
    l->lost = malloc(nr * sizeof *l->lost);
    l->cand = malloc(nr * sizeof *l->cand);
    l->chosen = malloc(nr * sizeof *l->chosen);
    l->victim = calloc(nr, sizeof *l->victim);
    l->dom = calloc((size_t)(nt > 0 ? nt : 1), sizeof *l->dom);
    l->tord = malloc((size_t)(nt > 0 ? nt : 1) * sizeof *l->tord);
    l->tseen = calloc((size_t)(nt > 0 ? nt : 1), sizeof *l->tseen);
    l->tborrows = calloc((size_t)(nt > 0 ? nt : 1), sizeof *l->tborrows);
    l->theld = calloc((size_t)(nt > 0 ? nt : 1), sizeof *l->theld);
    l->tleft = calloc((size_t)(nt > 0 ? nt : 1), sizeof *l->tleft);
    l->tsplit = calloc((size_t)(nt > 0 ? nt : 1), sizeof *l->tsplit);
    l->tfresh = calloc((size_t)(nt > 0 ? nt : 1), sizeof *l->tfresh);
    l->tstep = calloc((size_t)(nt > 0 ? nt : 1), sizeof *l->tstep);
    l->rattained = malloc(nr * sizeof *l->rattained);
    l->rlevel = malloc(nr * sizeof *l->rlevel);
    l->stopping = malloc(nr * sizeof *l->stopping);
    ts_sched *s = l->s;
    if (cycle_grow(&s->js, &s->js_cap, l->nw > 0 ? l->nw : 1, sizeof *l->js) != 0 ||
        cycle_grow((void **)&s->why_off, &s->why_off_cap, l->nw > 0 ? l->nw : 1,
                   sizeof *l->why_off) != 0)
        return TS_ENOMEM;
    l->js = s->js;
    l->why_off = s->why_off;
    if (!l->start_off || !l->tmp || !l->plan || !l->pj || !l->lost || !l->cand || !l->chosen ||
        !l->victim || !l->dom || !l->js || !l->why_off || !l->tord || !l->tseen || !l->tborrows ||
        !l->theld || !l->tleft || !l->tsplit || !l->tfresh || !l->tstep ||
        !l->rattained ||
        !l->rlevel || !l->stopping)
        return TS_ENOMEM;
    /* each tenant's order: its own, else its parent's (parents come first) */
    const ts_tenants *ts = ts_quota_tenants(s->q);
    for (int t = 0; t < nt; t++) {
        int o = ts->t[t].order;
        if (o != TS_ORDER_LAS && o != TS_ORDER_FIFO)
            o = ts->t[t].parent >= 0 ? l->tord[ts->t[t].parent] : s->cfg.order;
        l->tord[t] = o;
    }
    l->max_running_level = 0;
    size_t ncells = (size_t)(s->c->nnodes > 0 ? s->c->nnodes : 1) * TS_TIERS;
    if (!s->node_tier)
        s->node_tier = malloc(ncells * sizeof *s->node_tier);
    if (!s->node_tier)
        return TS_ENOMEM;
    memset(s->node_tier, 0, ncells * sizeof *s->node_tier);
    cycle_ports_reset(s);
    for (int j = 0; j < l->nr; j++) {
        loop_node_tier_add(s, &l->r[j], l->r[j].allocs);
        if (cycle_ports_add(s, &l->r[j], l->r[j].allocs) != 0)
            return TS_ENOMEM;
    }
    for (int j = 0; j < l->nr; j++) {
        l->rattained[j] = loop_running_attained(l, &l->r[j]);
        l->rlevel[j] = LAS_SCALE * ts_sched_las_level(s, l->rattained[j]);
        if (l->rlevel[j] > l->max_running_level)
            l->max_running_level = l->rlevel[j];
        if (l->r[j].stopping)
            l->stopping[l->nstopping++] = j;
    }
    ts_decision *d = l->d;
    if (cycle_grow((void **)&d->starts, &d->starts_cap, l->nw, sizeof *d->starts) != 0 ||
        cycle_grow((void **)&d->preempts, &d->preempts_cap, l->nr, sizeof *d->preempts) != 0 ||
        cycle_grow((void **)&d->pending, &d->pending_cap, l->nw, sizeof *d->pending) != 0)
        return TS_ENOMEM;
    return 0;
}

static void loop_free(loop *l)
{
    free(l->start_off);
    free(l->tmp);
    free(l->plan);
    free(l->pj);
    free(l->lost);
    free(l->cand);
    free(l->chosen);
    free(l->victim);
    free(l->dom);
    free(l->tord);
    free(l->tseen);
    free(l->tborrows);
    free(l->theld);
    free(l->tleft);
    free(l->tsplit);
    free(l->tfresh);
    free(l->tstep);
    free(l->swap_top);
    free(l->rattained);
    free(l->rlevel);
    free(l->stopping);
}

/* 1. of the order: the preemptors, in the order their preemptions were
 * decided; then the table keeps the entries whose job still waits, did not
 * start and whose wait is not over. */
#define PREEMPTOR_FILTER_WORDS 64

static int visit_preemptors(loop *l, uint8_t *done)
{
    ts_sched *s = l->s;
    int rc = 0;
    int pos[PREEMPTOR_TABLE_MAX];
    for (int k = 0; k < s->npre; k++)
        pos[k] = -1;
    /* a filter on the ids' low 12 bits: most waiting jobs are in no entry,
     * and the walk over every entry for each of them was 2 % of a
     * 100,000-job cycle (with 6 bits, a full table let half the jobs in) */
    uint64_t maybe[PREEMPTOR_FILTER_WORDS] = {0};
    for (int k = 0; k < s->npre; k++) {
        uint64_t b = (uint64_t)s->pre[k].id % (64 * PREEMPTOR_FILTER_WORDS);
        maybe[b / 64] |= UINT64_C(1) << (b % 64);
    }
    for (int i = 0; i < l->nw && s->npre > 0; i++) {
        uint64_t b = (uint64_t)l->w[i].id % (64 * PREEMPTOR_FILTER_WORDS);
        if (!(maybe[b / 64] >> (b % 64) & 1))
            continue;
        for (int k = 0; k < s->npre; k++)
            if (s->pre[k].id == l->w[i].id && pos[k] < 0)
                pos[k] = i;
    }
    int npre = s->npre;
    /* each waiting preemptor's room is held from every other job for the
     * cycle, and let go while it decides itself: without it, one whose
     * victims stopped first started on another's, and the other, its
     * victims gone but no room, stopped one job more */
    for (int k = 0; k < npre && rc == 0; k++)
        for (int q = 0; pos[k] >= 0 && !done[pos[k]] && q < s->pre[k].nroom && rc == 0; q++)
            rc = room_add(s, s->pre[k].id, &s->pre[k].room[q]);
    for (int k = 0; k < npre && rc == 0; k++)
        if (pos[k] >= 0 && !done[pos[k]]) {
            done[pos[k]] = 1;
            room_want(s, s->pre[k].id, false);
            rc = visit(l, pos[k]);
            /* kept while it waits for its victims; one that started, or
             * now waits for something else (its quota), leaves it */
            if (l->d->pending[pos[k]].reason == TS_PEND_PREEMPTING)
                room_want(s, s->pre[k].id, true);
        }
    /* drop entries whose job left the queue or whose wait is over */
    int kept = 0;
    for (int k = 0; k < s->npre; k++) {
        bool waiting = k < npre ? pos[k] >= 0 : true;
        bool started = false;
        for (int m = 0; k < npre && pos[k] >= 0 && m < l->d->nstarts; m++)
            started = started || l->d->starts[m].job == pos[k];
        if (waiting && !started && s->pre[k].until_s >= l->now)
            s->pre[kept++] = s->pre[k];
    }
    s->npre = kept;
    return rc;
}

/* The starving jobs that would borrow, kept out of 2. of the order: keys[0,
 * n) by tenant, then age; each tenant's cursor and end; a heap of tenants. */
typedef struct deferred {
    cycle_okey *keys;
    int n;
    int *start, *end;
    theap h;
    bool visited;
} deferred;

/* 2b. of the order, once no tenant's next job is guaranteed (so the
 * guaranteed work of the tenants they would borrow from went first): the
 * starving borrowers, their tenants by share as every borrower (what the
 * cycle started for them included), each tenant's oldest first. By age
 * alone, the loans went to the tenants that borrowed most already. */
static int visit_deferred(loop *l, deferred *df)
{
    df->visited = true;
    int nt = ts_quota_tenants(l->s->q)->n;
    theap *h = &df->h;
    h->n = 0;
    for (int t = 0; t < nt; t++)
        df->start[t] = df->end[t] = 0;
    for (int k = df->n - 1; k >= 0; k--) {
        int t = df->keys[k].tenant;
        if (df->end[t] == 0)
            df->end[t] = k + 1;
        df->start[t] = k;
    }
    for (int t = 0; t < nt; t++) {
        if (df->end[t] == 0)
            continue;
        h->key[t] = ts_quota_share(l->s->q, t, l->now) + l->dom[t];
        h->opp[t] = 0;
        h->t[h->n++] = t;
        heap_up(h, h->n - 1);
    }
    int rc = 0;
    while (h->n > 0 && rc == 0) {
        int t = h->t[0];
        int before = l->d->nstarts;
        rc = visit(l, df->keys[df->start[t]++].idx);
        if (df->start[t] == df->end[t])
            h->t[0] = h->t[--h->n];
        else if (l->d->nstarts != before)
            h->key[t] = ts_quota_share(l->s->q, t, l->now) + l->dom[t];
        heap_down(h, 0);
    }
    return rc;
}

/* 2. of the order: the starving, oldest first. With
 * starving_borrowers_by_share, one that would borrow when its turn comes
 * (it does not count as guaranteed work against other tenants' loans) is
 * kept for 2b: first, it took the GPUs freed in the cycle as a loan that
 * the minimum runtime protects, ahead of the guaranteed work of the tenants
 * it borrowed from. Those kept end at the top of keys (nw of them fit: the
 * buckets of 3. take only the jobs not done). */
static int visit_starving(loop *l, uint8_t *done, cycle_okey *keys, deferred *df)
{
    ts_sched *s = l->s;
    int n = 0, nd = 0, rc = 0;
    for (int i = 0; i < l->nw; i++)
        if (!done[i] && waited_s(l, &l->w[i]) >= s->cfg.starve_after_s)
            keys[n++] = okey_of(l, i, true);
    cycle_order_sort(keys, n, l->s->keys_tmp, l->s->keys_grp);
    for (int k = 0; k < n && rc == 0; k++) {
        int i = keys[k].idx;
        done[i] = 1;
        if (s->cfg.starving_borrowers_by_share && !loop_reclaims(l, i)) {
            keys[nd] = keys[k]; /* nd <= k: read before written */
            keys[nd++].tenant = l->w[i].tenant;
            continue;
        }
        rc = visit(l, i);
    }
    df->n = nd;
    df->keys = keys + (l->nw - nd);
    memmove(df->keys, keys, (size_t)nd * sizeof *keys);
    cycle_order_sort(df->keys, nd, l->s->keys_tmp, l->s->keys_grp);
    df->visited = nd == 0;
    return rc;
}

/* Preemptors, then the starving, then tenants by share. */
static int run_order(loop *l)
{
    ts_sched *s = l->s;
    int nwz = l->nw > 0 ? l->nw : 1;
    if (cycle_grow(&s->keys, &s->keys_cap, nwz, sizeof(cycle_okey)) != 0 ||
        cycle_grow(&s->keys_tmp, &s->keys_tmp_cap, nwz, sizeof(cycle_okey)) != 0 ||
        cycle_grow((void **)&s->keys_grp, &s->keys_grp_cap, nwz, 1) != 0 ||
        cycle_grow((void **)&s->done, &s->done_cap, nwz, 1) != 0)
        return TS_ENOMEM;
    uint8_t *done = s->done;
    cycle_okey *keys = s->keys;
    memset(done, 0, (size_t)nwz);
    prepass(l, done);
    if (split_levels(l, done) != 0)
        return TS_ENOMEM;
    int nt = ts_quota_tenants(s->q)->n;
    int *tstart = calloc((size_t)nt + 1, sizeof *tstart);
    size_t ntz = (size_t)(nt > 0 ? nt : 1);
    int *tend = malloc(ntz * sizeof *tend);
    int *heap = malloc(ntz * sizeof *heap);
    double *tkey = malloc(ntz * sizeof *tkey);
    uint8_t *topp = malloc(ntz);
    int *dstart = malloc(ntz * sizeof *dstart);
    int *dend = malloc(ntz * sizeof *dend);
    int *dheap = malloc(ntz * sizeof *dheap);
    double *dkey = malloc(ntz * sizeof *dkey);
    uint8_t *dopp = malloc(ntz);
    int rc = TS_ENOMEM;
    if (!tstart || !tend || !heap || !tkey || !topp || !dstart || !dend || !dheap || !dkey ||
        !dopp)
        goto out;
    deferred df = {.start = dstart, .end = dend, .h = {dheap, dkey, dopp, 0}};
    rc = visit_preemptors(l, done);
    rc = rc ? rc : visit_starving(l, done, keys, &df);
    /* 3. tenants by weighted dominant share, each by its own order */
    /* bucket by tenant (counting sort), then sort each bucket: cheaper than
     * one sort of everything */
    for (int i = 0; i < l->nw; i++)
        if (!done[i])
            tstart[l->w[i].tenant + 1]++;
    for (int t = 0; t < nt; t++)
        tstart[t + 1] += tstart[t];
    for (int t = 0; t < nt; t++)
        tend[t] = tstart[t];
    for (int i = 0; i < l->nw; i++)
        if (!done[i])
            keys[tend[l->w[i].tenant]++] = okey_of(l, i, false);
    for (int t = 0; t < nt; t++)
        if (tend[t] - tstart[t] > 1)
            cycle_order_sort(keys + tstart[t], tend[t] - tstart[t], s->keys_tmp, s->keys_grp);
    /* tstart[t] is now t's cursor, tend[t] its end */
    theap h = {heap, tkey, topp, 0};
    for (int t = 0; t < nt; t++) {
        if (tend[t] == tstart[t])
            continue;
        tkey[t] = ts_quota_share(s->q, t, l->now) + l->dom[t];
        topp[t] = keys[tstart[t]].tier != TS_TIER_GUARANTEED;
        h.t[h.n++] = t;
        heap_up(&h, h.n - 1);
    }
    while (h.n > 0 && rc == 0) {
        if (!df.visited && topp[h.t[0]]) {
            rc = visit_deferred(l, &df);
            /* what they started counts in their tenants' shares */
            for (int k = 0; k < h.n; k++)
                tkey[h.t[k]] = ts_quota_share(s->q, h.t[k], l->now) + l->dom[h.t[k]];
            for (int k = h.n / 2 - 1; k >= 0; k--)
                heap_down(&h, k);
            continue;
        }
        int t = h.t[0];
        int i = keys[tstart[t]++].idx;
        /* the ordered pass is bound by cache misses on the summaries: fetch
         * this tenant's next jobs ahead (it usually goes on until a start) */
        if (tstart[t] + PREFETCH_AHEAD < tend[t]) {
            int ahead = keys[tstart[t] + PREFETCH_AHEAD].idx;
            /* a summary spans two or three lines: its flags are at its end */
            __builtin_prefetch(&l->js[ahead]);
            __builtin_prefetch((const char *)&l->js[ahead + 1] - 1);
            __builtin_prefetch(&l->d->pending[ahead], 1);
            __builtin_prefetch(&l->why_off[ahead], 1);
            /* the job itself, whose tenant visit reads first, and the tasks
             * of one nearer, whose job line was fetched by then (inside this
             * block it exists: PREFETCH_AHEAD / 2 < PREFETCH_AHEAD) */
            __builtin_prefetch(&l->w[ahead]);
            __builtin_prefetch((const char *)&l->w[ahead] + 64);
            __builtin_prefetch(l->w[keys[tstart[t] + PREFETCH_AHEAD / 2].idx].tasks);
        }
        int before = l->d->nstarts;
        rc = visit(l, i);
        if (tstart[t] == tend[t]) {
            h.t[0] = h.t[--h.n];
        } else {
            if (l->d->nstarts != before)
                tkey[t] = ts_quota_share(s->q, t, l->now) + l->dom[t];
            /* a tenant's order may put a higher class's borrowing before
             * its guaranteed work: the flag can fall, and the tenant then
             * stays on top */
            topp[t] = keys[tstart[t]].tier != TS_TIER_GUARANTEED;
        }
        heap_down(&h, 0);
    }
    if (rc == 0 && !df.visited)
        rc = visit_deferred(l, &df);
out:
    free(dstart);
    free(dend);
    free(dheap);
    free(dkey);
    free(dopp);
    free(topp);
    free(tstart);
    free(tend);
    free(heap);
    free(tkey);
    return rc;
}

/* A decision that decides nothing yet: no starts, preemptions, resizes,
 * reservation or plan. */
static void decision_clear(ts_decision *d)
{
    d->nstarts = 0;
    d->npreempts = 0;
    d->nresizes = 0;
    d->reserved = -1;
    d->reserved_at_s = -1.0;
    d->planned = -1;
    d->nplanned_nodes = 0;
    d->nprefetch = 0;
}

int cycle_decide(ts_sched *s, double now, const ts_job *waiting, int nwaiting,
                 const ts_job *running, int nrunning, ts_decision *d, ts_err *err)
{
    if (!s || !d || nwaiting < 0 || nrunning < 0 || (nwaiting && !waiting) ||
        (nrunning && !running))
        return ts_err_set(err, TS_EINVAL, "cycle: bad arguments");
    loop l = {.s = s, .now = now, .w = waiting, .nw = nwaiting, .r = running, .nr = nrunning,
              .d = d, .el_extras = -1, .young_for = -1};
    int rc = check_input(&l, err);
    if (rc != 0)
        return rc;
    decision_clear(d);
    memset(&d->stats, 0, sizeof d->stats);
    d->why_len = 0;
    blockers_clear(s);
    room_clear(s);
    s->now = now;
    s->epoch++;
    l.epoch0 = s->epoch;
    if ((rc = loop_alloc(&l)) == 0 && (loop_why_add(&l, "%s", "") != 0 || !d->why_buf))
        rc = TS_ENOMEM;
    if (rc == 0)
        rc = run_order(&l);
    blockers_clear(s);
    room_clear(s);
    rc = rc ? rc : cycle_elastic(s, now, waiting, nwaiting, running, nrunning, d);
    for (int k = 0; k < d->nstarts; k++)
        d->starts[k].allocs = d->alloc_pool + l.start_off[k];
    for (int i = 0; rc == 0 && i < nwaiting; i++)
        d->pending[i].why = d->why_buf + l.why_off[i];
    loop_free(&l);
    if (rc != 0) {
        /* out of memory part way: a failed cycle decides nothing (what it
         * bound on the copies goes at the next sync) */
        decision_clear(d);
        return ts_err_set(err, rc, "cycle: out of memory");
    }
    return 0;
}
