/*
 * cycle_loop.c - one scheduling cycle: order, quota, placement, reservation,
 * preemption, and a reason for every job that waits.
 *
 * Order. Jobs a preemption was decided for come first (their victims are
 * checkpointing for them), then jobs past the starvation bound, oldest
 * first, then the rest: tenants interleaved through a heap keyed by weighted
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
 * has waited starve_after_s is ordered before every job that has not (only
 * preemptors, which take opportunistic GPUs back for guaranteed work, go
 * before it), oldest first; so once the k starving jobs older than it have
 * started it holds the reservation, and it starts within
 * starve_after_s + (k + 1) * L of its submission, unless it is held, invalid
 * or refused by its own tenant's quota. tests/sched/test_cycle.c checks the
 * bound against a stream of short jobs from a tenant with a lower share.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/cycle_internal.h"
#include "tessera/fmt.h"

#define PREFETCH_AHEAD 6       /* jobs of one tenant fetched ahead in the ordered pass */
#define PREEMPTOR_SLACK_S 60.0 /* a preemptor keeps its place this long past the grace */
#define ESTIMATES_PER_CYCLE 8  /* jobs planned a cycle besides the reserved one */
#define MEMO_SEARCH_FAILED (-2) /* memo reason: a victim search found no set */
#define MEMO_RESHAPE_FAILED (-3) /* memo reason: no MIG reshape gives the room */

/* Per waiting job, computed once in memory order (the ordered pass then
 * touches this and the job only when it tries a placement). */
typedef struct jsum {
    uint64_t key;        /* memo key without the blocked bit */
    int64_t cpu, mem;    /* the job's total demand ... */
    int64_t gpu_milli;   /* ... and GPU milli (whole jobs and shares) */
    int64_t gpus;        /* cycle_job_gpus */
    double limit_s;      /* its time limit, the default applied */
    uint32_t allowed;    /* GPU models it may use, present in the cluster */
    int tenant, tier;
    int level;           /* las level (0 when promoted), 0 under fifo */
    int earned;          /* las level by its service alone: time-sharing's */
    double attained;     /* GPU-s attained, 0 under fifo (an order key only
                          * without las_fifo_within_level; promotion's) */
    bool las;            /* its tenant orders by attained service */
    bool gpu, mig, whole;
    bool preemptor;      /* in the preemptor table: its victims stop for it */
} jsum;

typedef struct loop {
    ts_sched *s;
    double now;
    const ts_job *w;
    int nw;
    const ts_job *r;
    int nr;
    ts_decision *d;
    int npool;
    int *start_off;     /* [nw] pool offset of each start's allocs */
    ts_alloc *tmp;      /* [max ntasks] */
    ts_alloc *plan;     /* [max ntasks] */
    plan_job *pj;       /* [nr + nw + 1] */
    double *lost;       /* [nr] */
    int *cand;          /* [nr] */
    int *chosen;        /* [nr] */
    bool *victim;       /* [nr] */
    int *table_pos;     /* [PREEMPTOR_TABLE_MAX] waiting index of each entry, -1 */
    double *dom;        /* [ntenants] dominant share started this cycle */
    jsum *js;           /* [nw] what the pre-pass learnt of each job */
    int *why_off;       /* [nw] offset of each job's why in d->why_buf */
    int *tord;          /* [ntenants] each tenant's order, inheritance resolved */
    int *tseen;         /* [ntenants] its jobs looked at so far in the order */
    bool *tborrows;     /* [ntenants] it holds more than its guarantee: set per search */
    int64_t *theld;     /* [ntenants] GPU milli it holds: set per fair search */
    double *rattained;  /* [nr] each running job's GPU-s attained, its current run included */
    int *rlevel;        /* [nr] and the las level that makes */
    int *stopping;      /* [nr] the running jobs that are stopping, nstopping of them */
    int nstopping;
    int max_running_level;
    /* the job searching for victims: its tenant stays within its guarantee
     * (loans included) once it runs, so other tenants' loans may go for it */
    bool reclaim_others;
    /* the job searching is past its tenant's guarantee and may take loans
     * of tenants holding more per unit of weight (cfg.fair_reclaim) */
    bool fair;
    /* tenants that borrow, counted at s->starts == borrow_starts */
    bool borrow_known;
    uint64_t borrow_starts;
    int nborrow, borrow_one;
    uint64_t epoch0;    /* the scheduler's epoch when the cycle began */
    int seen;           /* jobs looked at so far in the order */
    int searches;
    int reclaim_searches; /* searches for jobs within their tenant's guarantee */
    int reshapes;       /* MIG reshape questions asked (cycle_mig.c) */
    int plans;          /* plans made for jobs that do not hold the reservation */
    bool have_res;
    double res_at;
    int64_t res_id;
} loop;

/* ---- memo of failures ---------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + UINT64_C(0x9e3779b97f4a7c15) + (h << 6) + (h >> 2);
    return h;
}

static uint64_t job_key(const ts_job *j, bool blocked)
{
    uint64_t h = mix((uint64_t)j->ntasks, (uint64_t)(j->required_level + 3));
    h = mix(h, (uint64_t)(j->preferred_level + 3) * 2 + j->rail_aligned);
    h = mix(h, blocked);
    h = mix(h, (uint64_t)(uintptr_t)j->node_mask);
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

static memo_entry *memo_slot(ts_sched *s, uint64_t key)
{
    return &s->memo[key % MEMO_SLOTS];
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

/* ---- one job --------------------------------------------------------------- */

static double limit_of(const loop *l, const ts_job *j)
{
    return j->time_limit_s > 0.0 ? j->time_limit_s : l->s->cfg.default_time_limit_s;
}

/* Appends a formatted line to the decision's why arena; its offset (the
 * empty string at 0 when memory runs out). */
static int why_add(loop *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int why_add(loop *l, const char *fmt, ...)
{
    ts_decision *d = l->d;
    if (d->why_cap - d->why_len < TS_CYCLE_WHY_MAX) {
        size_t cap = d->why_cap ? d->why_cap * 2 : 65536;
        char *b = realloc(d->why_buf, cap);
        if (!b)
            return 0;
        d->why_buf = b;
        d->why_cap = cap;
    }
    int off = (int)d->why_len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(d->why_buf + off, TS_CYCLE_WHY_MAX, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    d->why_len += (size_t)(n < TS_CYCLE_WHY_MAX ? n : TS_CYCLE_WHY_MAX - 1) + 1;
    return off;
}

static const char *why_of(const loop *l, int i) { return l->d->why_buf + l->why_off[i]; }

#define pend(l, i, reason_, ...)                                                              \
    do {                                                                                      \
        (l)->d->pending[i].reason = (reason_);                                                \
        (l)->why_off[i] = why_add((l), __VA_ARGS__);                                          \
    } while (0)

static bool within_guarantee(const loop *l, int i);

/* Whether job i counts as guaranteed work against other tenants' loans (it
 * takes them back, and is not held off by another tenant's reservation):
 * its tenant, all tiers and the job included, stays within its guarantee,
 * and it is guaranteed work or reclaim_any_tier lets any tier. */
static bool reclaims(const loop *l, int i)
{
    return (l->js[i].tier == TS_TIER_GUARANTEED || l->s->cfg.reclaim_any_tier) &&
           within_guarantee(l, i);
}

/* The tier the quota checks a job as: one that reclaims passes as
 * guaranteed work, whatever its own tier. */
static int quota_tier(const loop *l, int i)
{
    const jsum *js = &l->js[i];
    return js->tier == TS_TIER_OPPORTUNISTIC && reclaims(l, i) ? TS_TIER_GUARANTEED : js->tier;
}

/* Quota before placement: refused only if refused on every GPU model the job
 * may land on (exact: any placement is on one of them). */
static bool quota_precheck(loop *l, int i)
{
    ts_sched *s = l->s;
    const ts_job *job = &l->w[i];
    const jsum *js = &l->js[i];
    /* usage only grows within a cycle: a refused job's twins (same tasks,
     * tenant and tier) are refused too */
    uint64_t qkey = mix(mix(js->key, (uint64_t)js->tenant + 11), (uint64_t)js->tier + 5);
    memo_entry *mq = memo_slot(s, qkey);
    if (mq->epoch == s->epoch && mq->key == qkey && mq->reason == TS_PEND_QUOTA) {
        l->d->stats.memo_hits++;
        l->d->pending[i].reason = TS_PEND_QUOTA;
        l->why_off[i] = mq->why_off;
        return false;
    }
    ts_quota_verdict first = {0};
    bool have_first = false;
    for (int m = js->gpu ? 0 : -1; m < (js->gpu ? TS_MAX_GPU_MODELS : 0); m++) {
        if (m >= 0 && !(js->allowed >> m & 1))
            continue;
        int64_t demand[TS_RES_DIMS] = {0};
        if (js->mig) {
            if (cycle_job_demand(s, job, NULL, m, demand) != 0) {
                pend(l, i, TS_PEND_INVALID, "tasks: cannot be charged to a quota");
                return false;
            }
        } else {
            demand[TS_RES_CPU] = js->cpu;
            demand[TS_RES_MEM] = js->mem;
            if (m >= 0)
                demand[ts_res_gpu(m)] = js->gpu_milli;
        }
        ts_quota_verdict v;
        if (ts_quota_check(s->q, js->tenant, quota_tier(l, i), demand, &v) != TS_QUOTA_REFUSED)
            return true;
        if (!have_first) {
            first = v;
            have_first = true;
        }
    }
    char buf[TS_CYCLE_WHY_MAX];
    ts_quota_explain(ts_quota_tenants(s->q), &first, buf, sizeof buf);
    pend(l, i, TS_PEND_QUOTA, "%s", buf);
    *mq = (memo_entry){.key = qkey, .epoch = s->epoch, .starts = s->starts,
                       .reason = TS_PEND_QUOTA, .why_off = l->why_off[i]};
    return false;
}

/* Counts a job's GPUs on the nodes it holds, under its tier. */
static void node_tier_add(ts_sched *s, const ts_job *job, const ts_alloc *allocs)
{
    if (job->tier != TS_TIER_GUARANTEED && job->tier != TS_TIER_OPPORTUNISTIC)
        return;
    for (int t = 0; t < job->ntasks; t++) {
        if (allocs[t].node < 0 || allocs[t].node >= s->c->nnodes)
            continue;
        uint16_t *n = &s->node_tier[(size_t)allocs[t].node * TS_TIERS + (size_t)job->tier];
        *n = (uint16_t)(*n + allocs[t].ngpu);
    }
}

static int record_start(loop *l, int i, const ts_alloc *allocs)
{
    ts_decision *d = l->d;
    const ts_job *job = &l->w[i];
    if (cycle_grow((void **)&d->alloc_pool, &d->alloc_cap, l->npool + job->ntasks,
                   sizeof *d->alloc_pool) != 0)
        return TS_ENOMEM;
    memcpy(d->alloc_pool + l->npool, allocs, (size_t)job->ntasks * sizeof *allocs);
    l->start_off[d->nstarts] = l->npool;
    l->npool += job->ntasks;
    d->starts[d->nstarts++] = (ts_cycle_start){.job = i, .backfilled = l->have_res};
    d->stats.started++;
    if (l->have_res)
        d->stats.backfilled++;
    return 0;
}

/* Tries to start job i; 1 started, 0 waits (p set), < 0 error. */
static int try_start(loop *l, int i)
{
    ts_sched *s = l->s;
    const ts_job *job = &l->w[i];
    ts_cycle_pending *p = &l->d->pending[i];
    const jsum *js = &l->js[i];
    double limit = js->limit_s;
    bool blocked = l->have_res && l->now + limit > l->res_at;
    if (blocked && s->cfg.guarantee_over_reservation && l->d->reserved >= 0 &&
        l->d->reserved != i && l->w[l->d->reserved].tenant != job->tenant && reclaims(l, i))
        blocked = false;
    if (l->have_res) {
        if (blocked)
            blockers_on(s);
        else
            blockers_off(s);
    }
    uint64_t key = blocked ? mix(js->key, 1) : js->key;
    memo_entry *m = memo_slot(s, key);
    if (m->epoch == s->epoch && m->key == key &&
        (m->reason != TS_PEND_RESERVATION || m->starts == s->starts)) {
        l->d->stats.memo_hits++;
        p->reason = m->reason;
        l->why_off[i] = m->why_off;
        return 0;
    }
    int64_t gpus = js->gpus;
    int64_t free_gpus = ts_gang_index_free_gpus(s->ix, -1);
    int reason = 0;
    char why[TS_CYCLE_WHY_MAX];
    int rc = TS_ENOSPC;
    if (js->whole && gpus > free_gpus + s->blk_gpus) {
        reason = TS_PEND_CAPACITY;
        snprintf(why, sizeof why, "needs %lld whole GPUs, %lld free in the cluster",
                 (long long)gpus, (long long)free_gpus);
    } else {
        l->d->stats.placements++;
        rc = cycle_place(s, s->c, s->ix, job, l->tmp, &reason, why, sizeof why);
    }
    if (rc == 0) {
        int64_t demand[TS_RES_DIMS];
        ts_quota_verdict v;
        ts_err e;
        if (cycle_job_demand(s, job, l->tmp, -1, demand) != 0 ||
            ts_quota_check(s->q, job->tenant, quota_tier(l, i), demand, &v) == TS_QUOTA_REFUSED) {
            cycle_unplace(s->c, s->ix, job, l->tmp);
            ts_quota_explain(ts_quota_tenants(s->q), &v, why, sizeof why);
            pend(l, i, TS_PEND_QUOTA, "%s", why);
            return 0;
        }
        if (ts_quota_charge(s->q, job->tenant, job->tier, demand, l->now, &e) != 0) {
            cycle_unplace(s->c, s->ix, job, l->tmp);
            pend(l, i, TS_PEND_QUOTA, "%s", e.msg);
            return 0;
        }
        if (record_start(l, i, l->tmp) != 0)
            return TS_ENOMEM;
        node_tier_add(s, job, l->tmp);
        double dom = 0.0;
        for (int k = 0; k < TS_RES_DIMS; k++)
            if (s->cap[k] > 0 && (double)demand[k] / (double)s->cap[k] > dom)
                dom = (double)demand[k] / (double)s->cap[k];
        l->dom[job->tenant] += dom / ts_quota_tenants(s->q)->t[job->tenant].weight;
        s->starts++;
        p->reason = TS_PEND_NONE;
        l->why_off[i] = 0;
        return 1;
    }
    if (blocked && reason != TS_PEND_INVALID) {
        /* would it fit without the reservation's GPUs held back? */
        blockers_off(s);
        int r2;
        char w2[TS_CYCLE_WHY_MAX];
        if (cycle_place(s, s->c, s->ix, job, l->tmp, &r2, w2, sizeof w2) == 0) {
            cycle_unplace(s->c, s->ix, job, l->tmp);
            reason = TS_PEND_RESERVATION;
            char lim[32], at[32];
            ts_fmt_duration(limit, lim, sizeof lim);
            ts_fmt_time(l->res_at, at, sizeof at);
            snprintf(why, sizeof why, "fits now, but its time limit (%s) runs past %s, "
                     "when job %lld is reserved to start on those GPUs", lim, at,
                     (long long)l->res_id);
        }
        blockers_on(s);
    }
    pend(l, i, reason, "%s", why);
    m->key = key;
    m->epoch = s->epoch;
    m->starts = s->starts;
    m->reason = reason;
    m->why_off = l->why_off[i];
    return 0;
}

/* ---- preemption and reservation ------------------------------------------ */

/* What a running job has attained, its current run included. */
static double running_attained(const loop *l, const ts_job *v)
{
    double run = l->now > v->start_s ? l->now - v->start_s : 0.0;
    return v->attained_gpu_s + run * ts_sched_job_rate(l->s, v);
}

static bool tenant_borrows(const ts_quota *q, int t)
{
    for (int k = 0; k < TS_RES_DIMS; k++)
        if (ts_quota_borrowed(q, t, k) > 0)
            return true;
    return false;
}

/* Whether a tenant other than t borrows GPUs (fair reclaim has a loan to
 * look at): without one, a fair search would only spend the cycle's bound.
 * Recounted only after a start (usage changes with starts alone within a
 * cycle), not per waiting job. */
static bool another_borrows(loop *l, int t)
{
    if (!l->borrow_known || l->borrow_starts != l->s->starts) {
        l->nborrow = 0;
        for (int u = 0; u < ts_quota_tenants(l->s->q)->n; u++)
            for (int m = 0; m < TS_MAX_GPU_MODELS; m++)
                if ((l->s->models_present >> m & 1) &&
                    ts_quota_borrowed(l->s->q, u, ts_res_gpu(m)) > 0) {
                    l->nborrow++;
                    l->borrow_one = u;
                    break;
                }
        l->borrow_starts = l->s->starts;
        l->borrow_known = true;
    }
    return l->nborrow > 1 || (l->nborrow == 1 && l->borrow_one != t);
}

static bool fair_loan(const loop *l, int i, const ts_job *v);

/* GPU milli a job holds (whole GPUs and shares; MIG instances not). */
static int64_t job_gpu_milli(const ts_job *v)
{
    int64_t g = 0;
    for (int t = 0; t < v->ntasks; t++)
        if (v->tasks[t].num_gpu > 0)
            g += (int64_t)v->tasks[t].num_gpu * v->tasks[t].gpu_milli;
    return g;
}

/* May waiting job i take running job v's room? Reclaim: guaranteed work
 * takes opportunistic work's (any tenant's, but not its own tenant's higher
 * classes) and its own tenant's lower classes. Time-sharing (las tenants): a
 * job takes the room of a job that attained a higher level, of its own
 * tenant (an opportunistic job only from opportunistic work, never from a
 * higher class) or opportunistic work of another tenant; so guaranteed work
 * is never a time-sharing victim of another tenant, nor of its own tenant's
 * opportunistic work. Either way never before the victim's minimum runtime
 * nor past its preemptions per hour, except another tenant's loan taken back
 * for a job within its tenant's guarantee (of either tier with
 * reclaim_any_tier): cfg.reclaim_min_runtime_s is its floor (60 s by default),
 * and against guaranteed-tier work the per-hour limit does not hold
 * (reclaim_ignores_hour_limit). Fair reclaim (l->fair): a job past its
 * tenant's guarantee takes another borrowing tenant's loan when its tenant
 * still holds less per unit of weight after (cycle_fair.c), the loan past
 * min_runtime_s and within its preemptions per hour. *ts set when only
 * time-sharing allows it, *fair when only fair reclaim does. */
static bool victim_ok(const loop *l, int i, const ts_job *v, int vlevel, bool *ts, bool *fair)
{
    const ts_job *job = &l->w[i];
    const jsum *js = &l->js[i];
    const ts_sched_config *cfg = &l->s->cfg;
    *ts = false;
    *fair = false;
    if (v->stopping)
        return false;
    bool same = v->tenant == job->tenant;
    /* another tenant's loan, taken back for a job within its guarantee: its
     * tenant borrows, so once taken back it cannot take the room back in
     * turn (the preemptor's tenant stays within its guarantee, and
     * opportunistic work of a tenant within its own is no loan): two
     * tenants' opportunistic jobs never preempt each other in a loop */
    bool loan = !same && v->tier != TS_TIER_GUARANTEED && l->reclaim_others &&
                l->tborrows[v->tenant];
    double floor = loan && cfg->reclaim_min_runtime_s >= 0.0 ? cfg->reclaim_min_runtime_s
                                                             : cfg->min_runtime_s;
    if (l->now - v->start_s < floor)
        return false;
    if (v->preemptions_hour >= cfg->max_preemptions_hour &&
        !(loan && cfg->reclaim_ignores_hour_limit && js->tier == TS_TIER_GUARANTEED))
        return false;
    if (loan)
        return true;
    bool reclaim = js->tier == TS_TIER_GUARANTEED &&
                   (v->tier == TS_TIER_GUARANTEED ? same && v->priority < job->priority
                    : same ? v->priority <= job->priority
                           : l->reclaim_others);
    if (reclaim)
        return true;
    if (js->las && vlevel > js->earned &&
        (same ? v->priority <= job->priority &&
                    (js->tier == TS_TIER_GUARANTEED || v->tier == TS_TIER_OPPORTUNISTIC)
              : v->tier == TS_TIER_OPPORTUNISTIC)) {
        *ts = true;
        return true;
    }
    *fair = fair_loan(l, i, v);
    return *fair;
}

/* Fair reclaim (cfg.fair_reclaim): may job i, its tenant past its
 * guarantee, take running job v's room? (cycle_fair.c) */
static bool fair_loan(const loop *l, int i, const ts_job *v)
{
    return l->fair && cycle_fair_loan(l->s, l->now, v, job_gpu_milli(v), l->tborrows[v->tenant],
                                      l->js[i].tenant, l->js[i].gpu_milli, l->theld);
}

typedef struct vkey {
    int borrowing;
    double share;
    int priority;
    int level;
    double lost;
    int64_t gpus;       /* 0 when the config does not prefer the fewest */
    double attained;
    bool ts;
    bool fair;          /* only fair reclaim lets it go */
    int j;
} vkey;

/* Victims in preference order: borrowing tenants, the most over-share,
 * the lowest class, the highest las level, the least work lost, the fewest
 * GPUs (cfg.victims_fewest_gpus), the most service attained. */
static int cmp_vkey(const void *a, const void *b)
{
    const vkey *x = a, *y = b;
    if (x->borrowing != y->borrowing)
        return y->borrowing - x->borrowing;
    if (x->share != y->share)
        return x->share > y->share ? -1 : 1;
    if (x->priority != y->priority)
        return x->priority < y->priority ? -1 : 1;
    if (x->level != y->level)
        return x->level > y->level ? -1 : 1;
    if (x->lost != y->lost)
        return x->lost < y->lost ? -1 : 1;
    if (x->gpus != y->gpus)
        return x->gpus < y->gpus ? -1 : 1;
    if (x->attained != y->attained)
        return x->attained > y->attained ? -1 : 1;
    return (x->j > y->j) - (x->j < y->j);
}

static double job_grace(const loop *l, const ts_job *j)
{
    return j->ckpt_grace_s >= 0.0 ? j->ckpt_grace_s : l->s->cfg.default_grace_s;
}

/* Records preemptor id with the victims chosen for it (d->preempts from
 * first on). */
static int table_add(ts_sched *s, int64_t id, double until_s, const loop *l, int first)
{
    preemptor_entry e = {.id = id, .until_s = until_s};
    int m = l->d->npreempts - first;
    e.nvictims = m <= PREEMPTOR_VICTIMS_MAX ? m : -1;
    for (int k = 0; k < m && e.nvictims >= 0; k++)
        e.victims[k] = l->r[l->d->preempts[first + k].victim].id;
    for (int k = 0; k < s->npre; k++)
        if (s->pre[k].id == id) {
            s->pre[k] = e;
            return 0;
        }
    if (s->npre == PREEMPTOR_TABLE_MAX)
        return TS_ENOSPC;
    s->pre[s->npre++] = e;
    return 0;
}

/* Whether a preemptor's victims have all stopped (none of them is among
 * the running jobs still stopping): its room was freed, so if it does not
 * fit, another job took that room. */
static bool victims_gone(const loop *l, int64_t id)
{
    const ts_sched *s = l->s;
    const preemptor_entry *e = NULL;
    for (int k = 0; k < s->npre && !e; k++)
        if (s->pre[k].id == id)
            e = &s->pre[k];
    if (!e || e->nvictims < 0)
        return false;
    for (int j = 0; j < l->nstopping; j++)
        for (int k = 0; k < e->nvictims; k++)
            if (l->r[l->stopping[j]].id == e->victims[k])
                return false;
    return true;
}

/* Reclaim exists to give a tenant back the guarantee it lacks: a guaranteed
 * job takes other tenants' loans only while its tenant, this job and its
 * own loans included, stays within its guarantee on some GPU model the job
 * may use. A tenant that borrows itself takes its own loans back first (they
 * are its victims either way); without this, a tenant holding more than its
 * guarantee took other borrowers' room, and the reservation and victims of
 * tenants below their guarantee with them. */
static bool within_guarantee(const loop *l, int i)
{
    const jsum *js = &l->js[i];
    if (!js->gpu)
        return true;
    const ts_tenant *t = &ts_quota_tenants(l->s->q)->t[js->tenant];
    for (int m = 0; m < TS_MAX_GPU_MODELS; m++) {
        if (!(js->allowed >> m & 1))
            continue;
        int k = ts_res_gpu(m);
        if (ts_quota_usage(l->s->q, js->tenant, k) + js->gpu_milli <= t->guaranteed[k])
            return true;
    }
    return false;
}

/* Moves (cfg.guarantee_moves): may running job v (not a candidate of the
 * ordinary search) stop for job i to restart at once elsewhere? One task of
 * whole GPUs, fewer in all than job i's (chains of moves end), running for
 * the loan's minimum runtime at least, within its preemptions per hour. */
static bool move_ok(const loop *l, int i, const ts_job *v)
{
    const ts_sched_config *cfg = &l->s->cfg;
    const ts_request *r = &v->tasks[0];
    if (v->stopping || v->ntasks != 1 || r->num_gpu < 1 || r->gpu_milli < TS_MILLI_PER_GPU ||
        r->mig_profile >= 0 || r->num_gpu >= l->js[i].gpus)
        return false;
    double floor = cfg->reclaim_min_runtime_s >= 0.0 ? cfg->reclaim_min_runtime_s
                                                     : cfg->min_runtime_s;
    return l->now - v->start_s >= floor && v->preemptions_hour < cfg->max_preemptions_hour;
}

/* The ordinary search found no set for job i (within its tenant's
 * guarantee; one task, or a gang of tasks of at most a node each): the
 * nodes that could hold a task of it once their candidates and movable jobs
 * go, the best few of them (the most GPUs free or held by candidates, then
 * the fewest to move; a task's count plus MOVE_NODES_SPARE), give their
 * movable jobs as extra candidates after the ordinary ones (keys[0..n-1],
 * sorted), which also make room for the moves. Returns the victims
 * (l->chosen into keys, (*move)[k] marks a move) or 0; *move is the
 * caller's to free. */
#define MOVE_NODES_SPARE 3
#define MOVE_NODES_MAX 16
static int plan_moves(loop *l, int i, vkey *keys, int n, bool **move)
{
    ts_sched *s = l->s;
    const ts_job *job = &l->w[i];
    if (!l->js[i].whole || l->js[i].gpus < 2 || job->ntasks + MOVE_NODES_SPARE > MOVE_NODES_MAX)
        return 0;
    int64_t need = 0;
    for (int t = 0; t < job->ntasks; t++)
        need = job->tasks[t].num_gpu > need ? job->tasks[t].num_gpu : need;
    int nn = s->c->nnodes;
    int *room = calloc((size_t)nn * 2, sizeof *room); /* free + candidates', movable */
    *move = calloc((size_t)(l->nr > 0 ? l->nr : 1), sizeof **move);
    if (!room || !*move) {
        free(room);
        return 0;
    }
    int *mov = room + nn;
    for (int x = 0; x < nn; x++)
        room[x] = ts_gang_index_node_enabled(s->ix, x) ? s->c->nodes[x].gpus_free : -1;
    for (int k = 0; k < n; k++) {
        const ts_job *v = &l->r[keys[k].j];
        for (int t = 0; t < v->ntasks; t++)
            room[v->allocs[t].node] += v->allocs[t].ngpu;
    }
    bool *cand = *move; /* scratch: which running jobs are ordinary candidates */
    for (int k = 0; k < n; k++)
        cand[keys[k].j] = true;
    for (int j = 0; j < l->nr; j++)
        if (!cand[j] && !l->victim[j] && move_ok(l, i, &l->r[j]))
            mov[l->r[j].allocs[0].node] += l->r[j].allocs[0].ngpu;
    int want = job->ntasks + MOVE_NODES_SPARE;
    int best[MOVE_NODES_MAX], nbest = 0;
    for (int x = 0; x < nn; x++) {
        /* a node with room enough already, for one task, was the ordinary
         * search's */
        if (room[x] < 0 || room[x] + mov[x] < need || mov[x] == 0 ||
            (job->ntasks == 1 && room[x] >= need))
            continue;
        int at = nbest < want ? nbest++ : want;
        while (at > 0 && (room[x] > room[best[at - 1]] ||
                          (room[x] == room[best[at - 1]] && mov[x] < mov[best[at - 1]]))) {
            if (at < want)
                best[at] = best[at - 1];
            at--;
        }
        if (at < want)
            best[at] = x;
    }
    int total = n;
    for (int b = 0; b < nbest; b++) {
        int first = total;
        for (int j = 0; j < l->nr; j++) {
            const ts_job *v = &l->r[j];
            if (cand[j] || l->victim[j] || v->allocs[0].node != best[b] || !move_ok(l, i, v))
                continue;
            double since = v->last_ckpt_s > v->start_s ? v->last_ckpt_s : v->start_s;
            int64_t g = cycle_job_gpus(v);
            keys[total++] = (vkey){0, 0.0, v->priority, l->rlevel[j], (double)g * (l->now - since),
                                   g, l->rattained[j], false, false, j};
        }
        /* on a node, in the ordinary order (class, level, work lost, GPUs) */
        qsort(keys + first, (size_t)(total - first), sizeof *keys, cmp_vkey);
    }
    free(room);
    if (total == n)
        return 0;
    bool *mk = calloc((size_t)total, sizeof *mk);
    if (!mk)
        return 0;
    for (int k = 0; k < total; k++) {
        l->pj[k] = (plan_job){&l->r[keys[k].j], l->r[keys[k].j].allocs, 0.0};
        l->lost[k] = keys[k].lost;
        mk[k] = k >= n;
    }
    int m = plan_victims(s, job, l->pj, l->lost, mk, total, NULL, 0, l->chosen, l->plan);
    /* *move indexed like keys from here on */
    free(*move);
    *move = mk;
    return m;
}

/* Waiting job i's plan, the distinct nodes of it, into the decision: the
 * reserved job's always, an estimate's while no job holds one. */
static void planned_set(ts_decision *d, int i, const ts_alloc *plan, int ntasks, bool hold)
{
    if (!hold && d->planned >= 0)
        return;
    d->planned = i;
    d->nplanned_nodes = 0;
    for (int k = 0; k < ntasks && d->nplanned_nodes < TS_CYCLE_RESERVED_NODES_MAX; k++) {
        bool seen = false;
        for (int q = 0; q < d->nplanned_nodes && !seen; q++)
            seen = d->planned_nodes[q] == plan[k].node;
        if (!seen && plan[k].node >= 0)
            d->planned_nodes[d->nplanned_nodes++] = plan[k].node;
    }
}

/* The victims chosen (l->chosen into keys, m of them) that only fair
 * reclaim lets go, taken together: does each victim tenant, all its fair
 * victims gone, still hold more per unit of weight than job i's tenant with
 * job i started? (Each was checked alone.) */
static bool fair_set_holds(const loop *l, int i, const vkey *keys, int m)
{
    for (int k = 0; k < m; k++) {
        const vkey *x = &keys[l->chosen[k]];
        if (!x->fair)
            continue;
        int b = l->r[x->j].tenant;
        int64_t loss = 0;
        for (int q = 0; q < m; q++) {
            const vkey *y = &keys[l->chosen[q]];
            const ts_job *v = &l->r[y->j];
            if (y->fair && v->tenant == b)
                loss += job_gpu_milli(v);
        }
        int a = l->js[i].tenant;
        if (!cycle_fair_takes(l->s, a, l->theld[a], l->js[i].gpu_milli, b, l->theld[b], loss))
            return false;
    }
    return true;
}

/* Victims for job i (reclaim by guaranteed work, or time-sharing by a job
 * of a lower las level); true if a preemption was decided. swap: the job's
 * quota is what it lacks, so only its own tenant's jobs of its tier that
 * hold at least what it needs may go (their release makes its room in the
 * quota too). */
static bool try_preempt(loop *l, int i, bool swap)
{
    ts_sched *s = l->s;
    const jsum *js = &l->js[i];
    /* time-sharing (swap) takes loans back for guaranteed work only */
    bool others = reclaims(l, i) && (!swap || js->tier == TS_TIER_GUARANTEED);
    /* reclaim_any_tier: an opportunistic job within its guarantee reclaims */
    bool any = others && !swap && js->tier != TS_TIER_GUARANTEED;
    /* searches for jobs within their tenant's guarantee have a bound of
     * their own: time-sharing and starving jobs, ordered first, cannot use
     * up the searches a guarantee needs (at most twice the bound a cycle) */
    int *searches = others ? &l->reclaim_searches : &l->searches;
    /* fair reclaim: a job past its tenant's guarantee (of either tier) may
     * take loans of tenants holding more per unit of weight */
    bool fair = s->cfg.fair_reclaim && !others && !swap && js->gpu &&
                another_borrows(l, js->tenant);
    if ((js->tier != TS_TIER_GUARANTEED && !js->las && !any && !fair) || (swap && !js->las) ||
        *searches >= s->cfg.max_preemptors_cycle || s->npre == PREEMPTOR_TABLE_MAX)
        return false;
    const ts_job *job = &l->w[i];
    /* no running job above its level: time-sharing has no victim */
    if ((swap || js->tier != TS_TIER_GUARANTEED) && !any && !fair &&
        l->max_running_level <= js->earned)
        return false;
    l->reclaim_others = others;
    l->fair = fair;
    /* A search that failed fails again for an identical job (same tasks,
     * tenant, tier, class, level, the same right to other tenants' loans):
     * within a cycle candidates only leave (victims chosen) and free room
     * only shrinks; a reservation's blockers do not matter (the search
     * plans on the scratch copy without them), so the entry holds for the
     * whole cycle. Answered from the memo, it costs no search: without
     * it, a tenant's many identical jobs that could take nothing back used
     * up the cycle's searches before another tenant's job that could. */
    uint64_t skey = mix(mix(mix(js->key, (uint64_t)js->tenant + 17),
                            (uint64_t)js->tier * 64 + (uint64_t)js->earned * 4 +
                                (uint64_t)swap * 2 + l->reclaim_others),
                        (uint64_t)(int64_t)job->priority + 0x5eed);
    memo_entry *ms = memo_slot(s, skey);
    if (ms->epoch == l->epoch0 && ms->key == skey && ms->reason == MEMO_SEARCH_FAILED) {
        l->d->stats.memo_hits++;
        return false;
    }
    /* every search that scans the running jobs counts against its bound */
    (*searches)++;
    /* who borrows, once per search rather than per candidate (usage grows
     * with the cycle's starts, so not once per cycle) */
    for (int t = 0; t < ts_quota_tenants(s->q)->n; t++) {
        l->tborrows[t] = tenant_borrows(s->q, t);
        if (l->fair)
            l->theld[t] = cycle_held_gpu_milli(s, t);
    }
    vkey *keys = malloc((size_t)(l->nr > 0 ? l->nr : 1) * sizeof *keys);
    if (!keys)
        return false;
    int n = 0;
    for (int j = 0; j < l->nr; j++) {
        const ts_job *v = &l->r[j];
        /* a job already stopping frees its room for the job it was
         * preempted for (which goes first and holds that room), not for
         * this one: neither a candidate nor room to count on */
        if (v->stopping || l->victim[j])
            continue;
        bool ts, fair;
        if (swap && (v->tenant != job->tenant || v->tier != job->tier))
            continue;
        if (!victim_ok(l, i, v, l->rlevel[j], &ts, &fair) || (swap && !ts))
            continue;
        double since = v->last_ckpt_s > v->start_s ? v->last_ckpt_s : v->start_s;
        int64_t g = cycle_job_gpus(v);
        keys[n++] = (vkey){l->tborrows[v->tenant], ts_quota_share(s->q, v->tenant, l->now),
                           v->priority, l->rlevel[j], (double)g * (l->now - since),
                           s->cfg.victims_fewest_gpus ? g : 0, l->rattained[j], ts, fair, j};
    }
    int m = 0;
    if (n > 0) {
        qsort(keys, (size_t)n, sizeof *keys, cmp_vkey);
        for (int k = 0; k < n; k++) {
            l->pj[k] = (plan_job){&l->r[keys[k].j], l->r[keys[k].j].allocs, 0.0};
            l->lost[k] = keys[k].lost;
        }
        m = plan_victims(s, job, l->pj, l->lost, NULL, n, NULL, 0, l->chosen, l->plan);
    }
    if (swap && m > 0) {
        double freed = 0.0;
        for (int k = 0; k < m; k++)
            freed += ts_sched_job_rate(s, &l->r[keys[l->chosen[k]].j]);
        if (freed < ts_sched_job_rate(s, job) - 1e-9)
            m = 0; /* its room, but not its quota */
    }
    if (fair && m > 0 && !fair_set_holds(l, i, keys, m))
        m = 0;
    bool *move = NULL;
    if (m == 0 && others && !swap && s->cfg.guarantee_moves)
        m = plan_moves(l, i, keys, n, &move);
    if (m == 0) {
        free(keys);
        free(move);
        *ms = (memo_entry){.key = skey, .epoch = l->epoch0, .reason = MEMO_SEARCH_FAILED};
        return false;
    }
    ts_decision *d = l->d;
    double until = l->now;
    for (int k = 0; k < m; k++) {
        int j = keys[l->chosen[k]].j;
        const ts_job *v = &l->r[j];
        l->victim[j] = true;
        double grace = job_grace(l, v);
        d->preempts[d->npreempts++] = (ts_cycle_preempt){
            .victim = j,
            .preemptor = i,
            .signal = v->ckpt_signal > 0 ? v->ckpt_signal : TS_SIGNAL_DEFAULT,
            .grace_s = grace,
            .lost_gpu_s = keys[l->chosen[k]].lost,
            .time_sharing = keys[l->chosen[k]].ts,
            .move = move && move[l->chosen[k]],
            .victim_level = keys[l->chosen[k]].level,
            .preemptor_level = l->js[i].earned,
        };
        if (l->now + grace > until)
            until = l->now + grace;
    }
    d->stats.preempted += m;
    table_add(s, job->id, until + PREEMPTOR_SLACK_S, l, d->npreempts - m);
    /* a moved job goes first too once stopped, so that it restarts on the
     * room planned for it before anyone else takes that room */
    for (int k = 0; move && k < m && s->npre < PREEMPTOR_TABLE_MAX; k++)
        if (move[l->chosen[k]])
            table_add(s, l->r[keys[l->chosen[k]].j].id, until + PREEMPTOR_SLACK_S, l,
                      d->npreempts);
    if (!l->have_res) {
        l->have_res = true;
        l->res_at = until;
        l->res_id = job->id;
        d->reserved = i;
        d->reserved_at_s = until;
        d->pending[i].reserved_at_s = until;
        d->pending[i].estimated_s = until;
        planned_set(d, i, l->plan, job->ntasks, true);
        if (blockers_set(s, job, l->plan) == 0)
            s->epoch++;
    }
    double lost = 0.0;
    bool sharing = false, fairly = false;
    int moved = 0;
    for (int k = 0; k < m; k++) {
        lost += keys[l->chosen[k]].lost;
        sharing = sharing || keys[l->chosen[k]].ts;
        fairly = fairly || keys[l->chosen[k]].fair;
        moved += move && move[l->chosen[k]];
    }
    char by[32], in[32], lost_h[32];
    ts_fmt_time(until, by, sizeof by);
    ts_fmt_duration(until - l->now, in, sizeof in);
    snprintf(lost_h, sizeof lost_h, "%.2f", lost / 3600.0);
    if (moved > 0)
        pend(l, i, TS_PEND_PREEMPTING, "owed its tenant's guarantee: preempting %d job%s, %d "
             "of them moved to restart at once elsewhere so that one node holds it (%s "
             "GPU-hours since their checkpoints); they stop by %s (in %s)", m,
             m == 1 ? "" : "s", moved, lost_h, by, in);
    else if (fairly && !sharing)
        pend(l, i, TS_PEND_PREEMPTING, "fair share: its tenant holds fewer GPUs per unit of "
             "weight than the tenants it borrows from; preempting %d loan%s of theirs (%s "
             "GPU-hours since their checkpoints); they stop by %s (in %s)", m,
             m == 1 ? "" : "s", lost_h, by, in);
    else if (sharing)
        pend(l, i, TS_PEND_PREEMPTING, "time-sharing: preempting %d job%s of a higher las "
             "level than its %d (%s GPU-hours since their checkpoints); they stop by %s "
             "(in %s)", m, m == 1 ? "" : "s", l->js[i].earned, lost_h, by, in);
    else
        pend(l, i, TS_PEND_PREEMPTING, "preempting %d opportunistic job%s (%s GPU-hours "
             "since their checkpoints); they stop by %s (in %s)", m, m == 1 ? "" : "s", lost_h,
             by, in);
    free(keys);
    free(move);
    return true;
}

static int cmp_end(const void *a, const void *b)
{
    const plan_job *x = a, *y = b;
    if (x->end_s != y->end_s)
        return x->end_s < y->end_s ? -1 : 1;
    return (x->job->id > y->job->id) - (x->job->id < y->job->id);
}

/* Plans job i's earliest start on the scratch copy; a job that does not fit
 * even there is invalid. hold: it gets the reservation (its planned GPUs are
 * held back from later long jobs); else the plan only says when it could
 * start if nothing else started first. */
static void reserve(loop *l, int i, bool hold)
{
    ts_sched *s = l->s;
    const ts_job *job = &l->w[i];
    ts_decision *d = l->d;
    int n = 0;
    for (int j = 0; j < l->nr; j++) {
        const ts_job *v = &l->r[j];
        double end = v->stopping ? v->stop_by_s
                     : l->victim[j] ? l->now + job_grace(l, v)
                                    : v->start_s + limit_of(l, v);
        l->pj[n++] = (plan_job){v, v->allocs, end > l->now ? end : l->now};
    }
    for (int k = 0; k < d->nstarts; k++) {
        const ts_job *v = &l->w[d->starts[k].job];
        l->pj[n++] = (plan_job){v, d->alloc_pool + l->start_off[k], l->now + limit_of(l, v)};
    }
    qsort(l->pj, (size_t)n, sizeof *l->pj, cmp_end);
    double at;
    ts_cycle_pending *p = &d->pending[i];
    if (plan_reservation(s, job, l->pj, n, l->plan, &at) != 0) {
        char was[TS_CYCLE_WHY_MAX];
        snprintf(was, sizeof was, "%s: %s", ts_pending_name(p->reason), why_of(l, i));
        if (p->reason != TS_PEND_PREEMPTING)
            pend(l, i, TS_PEND_INVALID, "does not fit even on the idle cluster (%s)", was);
        return;
    }
    if (at < l->now)
        at = l->now; /* fits on the emptied cluster with nothing running */
    p->estimated_s = at;
    if (!hold) {
        planned_set(d, i, l->plan, job->ntasks, false);
        char was[TS_CYCLE_WHY_MAX];
        snprintf(was, sizeof was, "%s", why_of(l, i));
        char when[32], in[32];
        ts_fmt_time(at, when, sizeof when);
        ts_fmt_duration(at - l->now, in, sizeof in);
        l->why_off[i] = why_add(l, "%s; could start by %s (in %s) as running jobs end", was,
                                when, in);
        return;
    }
    l->have_res = true;
    l->res_at = at;
    l->res_id = job->id;
    d->reserved = i;
    d->reserved_at_s = at;
    p->reserved_at_s = at;
    char was[TS_CYCLE_WHY_MAX];
    snprintf(was, sizeof was, "%s", why_of(l, i));
    char when[32], in[32];
    ts_fmt_time(at, when, sizeof when);
    ts_fmt_duration(at - l->now, in, sizeof in);
    l->why_off[i] = why_add(l, "%s; reserved to start by %s (in %s)", was, when, in);
    planned_set(d, i, l->plan, job->ntasks, true);
    if (blockers_set(s, job, l->plan) == 0)
        s->epoch++;
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
            js->level = js->earned = ts_sched_las_level(s, js->attained);
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
        done[i] = 0;
    }
}

/* Reshape before preemption: a MIG job that lacks room waits for idle
 * instances of other profiles to be destroyed (by tesserad after the cycle,
 * through the same planner) rather than preempt running work, when that
 * gives it room. At most max_preemptors_cycle questions a cycle, as victim
 * searches; a failed one is remembered for identical jobs (free room only
 * shrinks within a cycle). True if the job waits for a reshape (p set). */
static bool reshape_first(loop *l, int i)
{
    ts_sched *s = l->s;
    if (l->reshapes >= s->cfg.max_preemptors_cycle)
        return false;
    uint64_t key = mix(l->js[i].key, 0x3e5a9e);
    memo_entry *m = memo_slot(s, key);
    if (m->epoch == l->epoch0 && m->key == key && m->reason == MEMO_RESHAPE_FAILED) {
        l->d->stats.memo_hits++;
        return false;
    }
    l->reshapes++;
    int ngpus = 0;
    if (cycle_mig_reshape(s, &l->w[i], &ngpus) != 1) {
        *m = (memo_entry){.key = key, .epoch = l->epoch0, .reason = MEMO_RESHAPE_FAILED};
        return false;
    }
    pend(l, i, TS_PEND_FRAGMENTATION, "no free MIG instance fits; destroying idle instances "
         "on %d GPU%s makes room, so nothing is preempted", ngpus, ngpus == 1 ? "" : "s");
    return true;
}

static int process(loop *l, int i)
{
    ts_cycle_pending *p = &l->d->pending[i];
    if (!quota_precheck(l, i)) {
        if (l->js[i].las && !l->js[i].preemptor)
            try_preempt(l, i, true);
        return 0;
    }
    int rc = try_start(l, i);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    switch (p->reason) {
    case TS_PEND_CAPACITY:
    case TS_PEND_TOPOLOGY:
    case TS_PEND_FRAGMENTATION:
    case TS_PEND_GANG:
    case TS_PEND_CONSTRAINT:
        break;
    default:
        return 0;
    }
    /* a preemptor waits for its victims to stop; once they all have and it
     * still does not fit, another job took that room: it searches again
     * rather than wait out its entry */
    bool again = l->js[i].preemptor && l->s->cfg.preemptor_searches_again &&
                 victims_gone(l, l->w[i].id);
    if (l->js[i].preemptor && !again) {
        char was[TS_CYCLE_WHY_MAX];
        snprintf(was, sizeof was, "%s", ts_pending_name(p->reason));
        pend(l, i, TS_PEND_PREEMPTING, "waiting for the jobs preempted for it to stop (%s)",
             was);
    } else if (l->js[i].mig && reshape_first(l, i)) {
        return 0; /* tesserad reshapes after the cycle; it places at a later one */
    } else {
        try_preempt(l, i, false);
    }
    /* under las the order itself moves a waiting job forward (time-sharing
     * takes room from jobs that attained more; promotion lifts the long
     * waiting): only jobs past the starvation bound hold a reservation,
     * which would otherwise idle GPUs for a job that time-sharing serves */
    /* the first job that may hold the reservation takes it; the next few that
     * lack room are planned without holding anything (their start estimate,
     * and a job that fits nowhere is found invalid), a bounded number a cycle */
    bool hold = !l->have_res &&
                (!l->js[i].las || l->now - l->w[i].submit_s >= l->s->cfg.starve_after_s);
    if (hold) {
        reserve(l, i, true);
    } else if (l->plans < ESTIMATES_PER_CYCLE && p->reason != TS_PEND_PREEMPTING) {
        l->plans++;
        reserve(l, i, false);
    }
    return 0;
}

/* ---- order ------------------------------------------------------------------ */

/* A tenant's own order: priority class, tier (guaranteed first), then las
 * level and attained service (both 0 under fifo; the service 0 too with
 * las_fifo_within_level), then submission. */
typedef struct okey {
    int tenant;
    int priority;
    int tier;
    int level;
    double attained;
    double submit_s;
    int64_t id;
    int idx;
} okey;

static int cmp_okey(const void *a, const void *b)
{
    const okey *x = a, *y = b;
    if (x->tenant != y->tenant)
        return x->tenant < y->tenant ? -1 : 1;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    if (x->tier != y->tier)
        return x->tier < y->tier ? -1 : 1;
    if (x->level != y->level)
        return x->level < y->level ? -1 : 1;
    if (x->attained != y->attained)
        return x->attained < y->attained ? -1 : 1;
    if (x->submit_s != y->submit_s)
        return x->submit_s < y->submit_s ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static okey okey_of(const loop *l, int idx, bool by_age)
{
    const ts_job *j = &l->w[idx];
    const jsum *js = &l->js[idx];
    if (by_age) /* one bucket, oldest first */
        return (okey){0, 0, 0, 0, 0.0, j->submit_s, j->id, idx};
    double attained = l->s->cfg.las_fifo_within_level ? 0.0 : js->attained;
    return (okey){j->tenant, j->priority, j->tier, js->level, attained, j->submit_s, j->id, idx};
}

/* Where job i stands in the order, then its processing. */
static int visit(loop *l, int i)
{
    ts_cycle_pending *p = &l->d->pending[i];
    int t = l->w[i].tenant;
    p->tenant_position = l->tseen[t]++;
    p->cluster_position = l->seen++;
    p->level = l->js[i].las ? l->js[i].level : -1;
    return process(l, i);
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
        !l->theld ||
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
    for (int j = 0; j < l->nr; j++)
        node_tier_add(s, &l->r[j], l->r[j].allocs);
    for (int j = 0; j < l->nr; j++) {
        l->rattained[j] = running_attained(l, &l->r[j]);
        l->rlevel[j] = ts_sched_las_level(s, l->rattained[j]);
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
    free(l->rattained);
    free(l->rlevel);
    free(l->stopping);
}

/* Preemptors, then the starving, then tenants by share. */
static int run_order(loop *l)
{
    ts_sched *s = l->s;
    int nwz = l->nw > 0 ? l->nw : 1;
    if (cycle_grow(&s->keys, &s->keys_cap, nwz, sizeof(okey)) != 0 ||
        cycle_grow((void **)&s->done, &s->done_cap, nwz, 1) != 0)
        return TS_ENOMEM;
    uint8_t *done = s->done;
    okey *keys = s->keys;
    memset(done, 0, (size_t)nwz);
    prepass(l, done);
    int nt = ts_quota_tenants(s->q)->n;
    int *tstart = calloc((size_t)nt + 1, sizeof *tstart);
    size_t ntz = (size_t)(nt > 0 ? nt : 1);
    int *tend = malloc(ntz * sizeof *tend);
    int *heap = malloc(ntz * sizeof *heap);
    double *tkey = malloc(ntz * sizeof *tkey);
    uint8_t *topp = malloc(ntz);
    int rc = TS_ENOMEM;
    if (!tstart || !tend || !heap || !tkey || !topp)
        goto out;
    rc = 0;
    /* 1. preemptors, in the order their preemptions were decided */
    int pos[PREEMPTOR_TABLE_MAX];
    for (int k = 0; k < s->npre; k++)
        pos[k] = -1;
    for (int i = 0; i < l->nw && s->npre > 0; i++)
        for (int k = 0; k < s->npre; k++)
            if (s->pre[k].id == l->w[i].id && pos[k] < 0)
                pos[k] = i;
    int npre = s->npre;
    for (int k = 0; k < npre && rc == 0; k++)
        if (pos[k] >= 0 && !done[pos[k]]) {
            done[pos[k]] = 1;
            rc = visit(l, pos[k]);
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
    /* 2. the starving, oldest first */
    int n = 0;
    for (int i = 0; i < l->nw; i++)
        if (!done[i] && l->now - l->w[i].submit_s >= s->cfg.starve_after_s)
            keys[n++] = okey_of(l, i, true);
    qsort(keys, (size_t)n, sizeof *keys, cmp_okey);
    for (int k = 0; k < n && rc == 0; k++) {
        done[keys[k].idx] = 1;
        rc = visit(l, keys[k].idx);
    }
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
            qsort(keys + tstart[t], (size_t)(tend[t] - tstart[t]), sizeof *keys, cmp_okey);
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
        int t = h.t[0];
        int i = keys[tstart[t]++].idx;
        /* the ordered pass is bound by cache misses on the summaries: fetch
         * this tenant's next jobs ahead (it usually goes on until a start) */
        if (tstart[t] + PREFETCH_AHEAD < tend[t]) {
            int ahead = keys[tstart[t] + PREFETCH_AHEAD].idx;
            __builtin_prefetch(&l->js[ahead]);
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
out:
    free(topp);
    free(tstart);
    free(tend);
    free(heap);
    free(tkey);
    return rc;
}

int ts_sched_cycle(ts_sched *s, double now, const ts_job *waiting, int nwaiting,
                   const ts_job *running, int nrunning, ts_decision *d, ts_err *err)
{
    if (!s || !d || nwaiting < 0 || nrunning < 0 || (nwaiting && !waiting) ||
        (nrunning && !running))
        return ts_err_set(err, TS_EINVAL, "cycle: bad arguments");
    loop l = {.s = s, .now = now, .w = waiting, .nw = nwaiting, .r = running, .nr = nrunning,
              .d = d};
    int rc = check_input(&l, err);
    if (rc != 0)
        return rc;
    d->nstarts = 0;
    d->npreempts = 0;
    d->reserved = -1;
    d->reserved_at_s = -1.0;
    d->planned = -1;
    d->nplanned_nodes = 0;
    memset(&d->stats, 0, sizeof d->stats);
    d->why_len = 0;
    blockers_clear(s);
    s->now = now;
    s->epoch++;
    l.epoch0 = s->epoch;
    if ((rc = loop_alloc(&l)) == 0 && (why_add(&l, "%s", "") != 0 || !d->why_buf))
        rc = TS_ENOMEM;
    if (rc == 0)
        rc = run_order(&l);
    blockers_clear(s);
    for (int k = 0; k < d->nstarts; k++)
        d->starts[k].allocs = d->alloc_pool + l.start_off[k];
    for (int i = 0; rc == 0 && i < nwaiting; i++)
        d->pending[i].why = d->why_buf + l.why_off[i];
    loop_free(&l);
    if (rc != 0) {
        /* out of memory part way: the starts planned so far were bound; a
         * failed cycle decides nothing, so they go back */
        for (int k = 0; k < d->nstarts; k++) {
            ts_job j = waiting[d->starts[k].job];
            j.allocs = d->starts[k].allocs;
            (void)ts_sched_stop(s, &j, now, NULL);
        }
        d->nstarts = 0;
        d->npreempts = 0;
        d->reserved = -1;
        d->reserved_at_s = -1.0;
        d->planned = -1;
    d->nplanned_nodes = 0;
        return ts_err_set(err, rc, "cycle: out of memory");
    }
    return 0;
}
