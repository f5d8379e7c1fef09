/*
 * replay_tessera.c - the `tessera` replay policy: least attained service in
 * three queues, knowing no job durations (it reads submit order, GPU count,
 * the GPU-seconds each job has held and the progress a preemption would
 * lose; never work_s or work_left_s), and, with tenants, guarantees first
 * and idle GPUs lent.
 *
 * A job's level is 0 below 8 GPU-hours attained, 1 below 16, else 2. Jobs
 * are ordered: holders that started less than MIN_RUN_S ago first (a start
 * costs a restart, so a job never loses GPUs to its own tenant before it has
 * made progress); then by level, within a level holders before waiters (no
 * swapping equals, which only pays restarts), then least attained GPU-s,
 * then arrival. Without tenants every job in that order runs if its GPUs
 * still fit (small jobs backfill). Measured on the Pollux rigid workloads
 * (16 x 4, 60-s rounds, 30-s restarts), avg JCT 2,062 / 3,772 / 5,602 /
 * 8,651 s at 0.5x..2.0x against published Tiresias 2,092 / 4,038 / 6,182 /
 * 10,040 (bench/replay-pollux).
 *
 * With tenants (one pooled cluster, each tenant guaranteed some GPUs) a
 * decision has three steps:
 *   1. guaranteed: each tenant's jobs, in the order above, run while they fit
 *      in its guarantee; a tenant's own jobs compete only with each other;
 *   2. borrowed holders (running jobs that did not fit in their tenant's
 *      guarantee in step 1) keep their GPUs if what step 1 left holds them
 *      all; else victims go, whole jobs, from the tenant most over its
 *      guarantee (held / guarantee) first, and within it a running job
 *      whose GPUs fit in the tenant's overage (so it stays at its
 *      guarantee), then one past its minimum run, then the one that loses
 *      least (GPU-s of progress since its last checkpoint), then the most
 *      attained service (as LAS would), until the rest fit;
 *   3. lending: the GPUs still free go to waiting jobs, one job at a time to
 *      the tenant with the lowest held / guarantee that has a job that fits
 *      (its first in the order above).
 * Step 1 can always be met: guarantees add up to at most the cluster, so
 * what a tenant is owed is free or borrowed by others. A tenant whose
 * smallest waiting job fits in its unused guarantee therefore never waits
 * past a decision.
 */
#include <stdlib.h>

#include "sched/replay.h"

#define LEVEL0_GPU_S (8.0 * 3600.0) /* first demotion; each next one doubles */
#define LEVEL_FACTOR 2.0
#define LEVELS 3
#define MIN_RUN_S 120.0             /* restart plus more than a round of progress */
/* Attained service is a sum of float increments in event-driven mode. */
#define SERVICE_EPS_GPU_S 1e-6

typedef struct tessera_key {
    int pinned, level, holding;
    double attained_gpu_s;
    int job;
} tessera_key;

typedef struct tessera_state {
    double *attained_gpu_s;
    double *started_s;  /* when the current hold began */
    tessera_key *kv;
    /* with tenants only */
    int ntenants;
    long *held;         /* per tenant: GPUs it runs on after this decision */
    long *guar_left;    /* per tenant: guarantee not yet used in step 1 */
    int *first, *next, *end; /* per tenant: its step-3 candidates in cand[] */
    int *cand;          /* njobs: waiting jobs, grouped by tenant, in order */
    int *borrowed;      /* njobs: borrowed holders */
} tessera_state;

static void tessera_free(void *p)
{
    tessera_state *s = p;
    if (!s)
        return;
    free(s->attained_gpu_s);
    free(s->started_s);
    free(s->kv);
    free(s->held);
    free(s->guar_left);
    free(s->first);
    free(s->next);
    free(s->end);
    free(s->cand);
    free(s->borrowed);
    free(s);
}

static int tessera_init(void **out, int njobs, int ntenants, ts_err *err)
{
    tessera_state *s = calloc(1, sizeof *s);
    size_t n = (size_t)(njobs > 0 ? njobs : 1), nt = (size_t)(ntenants > 0 ? ntenants : 1);
    bool ok = s != NULL;
    if (ok) {
        s->attained_gpu_s = calloc(n, sizeof *s->attained_gpu_s);
        s->started_s = calloc(n, sizeof *s->started_s);
        s->kv = malloc(n * sizeof *s->kv);
        ok = s->attained_gpu_s && s->started_s && s->kv;
    }
    if (ok && ntenants > 0) {
        s->ntenants = ntenants;
        s->held = malloc(nt * sizeof *s->held);
        s->guar_left = malloc(nt * sizeof *s->guar_left);
        s->first = malloc(nt * sizeof *s->first);
        s->next = malloc(nt * sizeof *s->next);
        s->end = malloc(nt * sizeof *s->end);
        s->cand = malloc(n * sizeof *s->cand);
        s->borrowed = malloc(n * sizeof *s->borrowed);
        ok = s->held && s->guar_left && s->first && s->next && s->end && s->cand && s->borrowed;
    }
    if (!ok) {
        tessera_free(s);
        return ts_err_set(err, TS_ENOMEM, "replay policy tessera: out of memory");
    }
    *out = s;
    return 0;
}

static int level_of(double attained_gpu_s)
{
    int level = 0;
    double threshold = LEVEL0_GPU_S;
    while (level < LEVELS - 1 && attained_gpu_s >= threshold - SERVICE_EPS_GPU_S) {
        level++;
        threshold *= LEVEL_FACTOR;
    }
    return level;
}

static int cmp_key(const void *a, const void *b)
{
    const tessera_key *x = a, *y = b;
    if (x->pinned != y->pinned)
        return y->pinned - x->pinned;
    if (x->level != y->level)
        return x->level - y->level;
    if (x->holding != y->holding)
        return y->holding - x->holding;
    if (x->attained_gpu_s != y->attained_gpu_s)
        return x->attained_gpu_s < y->attained_gpu_s ? -1 : 1;
    return (x->job > y->job) - (x->job < y->job);
}

/* Accounts the interval just ended and sorts the pending jobs into s->kv. */
static void order_jobs(tessera_state *s, const ts_replay_view *v)
{
    double held_s = v->now_s - v->since_s;
    for (int i = 0; i < v->npending; i++) {
        int j = v->pending[i];
        if (v->holding[j])
            s->attained_gpu_s[j] += held_s * v->jobs[j].gpus;
        s->kv[i] = (tessera_key){
            .pinned = v->holding[j] && v->now_s - s->started_s[j] < MIN_RUN_S,
            .level = level_of(s->attained_gpu_s[j]),
            .holding = v->holding[j],
            .attained_gpu_s = s->attained_gpu_s[j],
            .job = j,
        };
    }
    if (v->npending > 1)
        qsort(s->kv, (size_t)v->npending, sizeof *s->kv, cmp_key);
}

static void start(tessera_state *s, const ts_replay_view *v, bool *run, int j)
{
    run[j] = true;
    if (!v->holding[j])
        s->started_s[j] = v->now_s;
}

/* ---- tenants ----------------------------------------------------------- */

/* Compares tenants a and b by usage held / guarantee (a tenant guaranteed
 * nothing comes after every tenant guaranteed something); ties by GPUs held,
 * then index. < 0: a is less used. */
static int cmp_usage(const ts_replay_view *v, const long *held, int a, int b)
{
    long ga = v->tenants[a].gpus, gb = v->tenants[b].gpus;
    if ((ga > 0) != (gb > 0))
        return ga > 0 ? -1 : 1;
    if (ga > 0) {
        double ra = (double)held[a] / ga, rb = (double)held[b] / gb;
        if (ra != rb)
            return ra < rb ? -1 : 1;
    }
    if (held[a] != held[b])
        return held[a] < held[b] ? -1 : 1;
    return (a > b) - (a < b);
}

/* Is running holder a a better victim than b (both of the same tenant,
 * over its guarantee by `over` GPUs)? One whose GPUs fit in the overage
 * (the tenant stays at its guarantee), then one past its minimum run, then
 * the least progress lost, then the most attained service, then the newest.
 * The minimum run comes before the loss: a job just restarted from a
 * checkpoint has nothing at risk, and ranking by loss alone preempts it
 * again and again before it makes any progress. */
static bool better_victim(const tessera_state *s, const ts_replay_view *v, long over, int a, int b)
{
    bool fa = v->jobs[a].gpus <= over, fb = v->jobs[b].gpus <= over;
    if (fa != fb)
        return fa;
    bool pa = v->now_s - s->started_s[a] < MIN_RUN_S, pb = v->now_s - s->started_s[b] < MIN_RUN_S;
    if (pa != pb)
        return !pa;
    double la = (v->at_risk_s ? v->at_risk_s[a] : 0) * v->jobs[a].gpus;
    double lb = (v->at_risk_s ? v->at_risk_s[b] : 0) * v->jobs[b].gpus;
    if (la != lb)
        return la < lb;
    if (s->attained_gpu_s[a] != s->attained_gpu_s[b])
        return s->attained_gpu_s[a] > s->attained_gpu_s[b];
    return a > b;
}

/* Step 2: the borrowed holders s->borrowed[0..nb-1] keep their GPUs; while
 * that oversubscribes the cluster, the tenant most over its guarantee loses
 * a running job (any of its holders: which of its jobs step 1 counted as
 * guaranteed is only an order, and taking one that fits in its overage
 * keeps it at its guarantee). *free_gpus is what is left after. */
static void keep_borrowed(tessera_state *s, const ts_replay_view *v, bool *run, int nb,
                          long *free_gpus)
{
    for (int i = 0; i < nb; i++) {
        int j = s->borrowed[i];
        run[j] = true; /* a holder: its start time stays */
        s->held[v->jobs[j].tenant] += v->jobs[j].gpus;
        *free_gpus -= v->jobs[j].gpus;
    }
    /* Guarantees add up to at most the cluster, so the GPUs tenants hold
     * beyond theirs always cover the shortfall: the loop ends. */
    while (*free_gpus < 0) {
        int worst = -1;
        for (int k = 0; k < s->ntenants; k++)
            if (s->held[k] > v->tenants[k].gpus &&
                (worst < 0 || cmp_usage(v, s->held, k, worst) > 0))
                worst = k;
        long over = s->held[worst] - v->tenants[worst].gpus;
        int victim = -1;
        for (int i = 0; i < v->npending; i++) {
            int j = v->pending[i];
            if (v->jobs[j].tenant == worst && run[j] && v->holding[j] &&
                (victim < 0 || better_victim(s, v, over, j, victim)))
                victim = j;
        }
        run[victim] = false;
        s->held[worst] -= v->jobs[victim].gpus;
        *free_gpus += v->jobs[victim].gpus;
    }
}

static void decide_tenants(tessera_state *s, const ts_replay_view *v, bool *run)
{
    long free_gpus = v->total_gpus;
    int nt = s->ntenants, nb = 0;
    for (int k = 0; k < nt; k++) {
        s->held[k] = 0;
        s->guar_left[k] = v->tenants[k].gpus;
        s->first[k] = 0;
    }
    /* 1: guaranteed */
    for (int i = 0; i < v->npending; i++) {
        int j = s->kv[i].job, k = v->jobs[j].tenant, g = v->jobs[j].gpus;
        if (g <= s->guar_left[k]) {
            start(s, v, run, j);
            s->guar_left[k] -= g;
            s->held[k] += g;
            free_gpus -= g;
        } else if (v->holding[j]) {
            s->borrowed[nb++] = j;
        }
    }
    /* 2: borrowed holders */
    keep_borrowed(s, v, run, nb, &free_gpus);
    /* 3: lending; candidates are every job not running, grouped by tenant
     * (counting sort, so each group keeps the order of kv) */
    for (int i = 0; i < v->npending; i++)
        if (!run[s->kv[i].job])
            s->first[v->jobs[s->kv[i].job].tenant]++;
    for (int k = 0, off = 0; k < nt; k++) {
        int c = s->first[k];
        s->first[k] = s->next[k] = s->end[k] = off;
        off += c;
    }
    for (int i = 0; i < v->npending; i++) {
        int j = s->kv[i].job;
        if (!run[j])
            s->cand[s->end[v->jobs[j].tenant]++] = j;
    }
    for (;;) {
        int best = -1;
        for (int k = 0; k < nt; k++) {
            /* skip what no longer fits: free GPUs only shrink */
            while (s->next[k] < s->end[k] && v->jobs[s->cand[s->next[k]]].gpus > free_gpus)
                s->next[k]++;
            if (s->next[k] < s->end[k] && (best < 0 || cmp_usage(v, s->held, k, best) < 0))
                best = k;
        }
        if (best < 0)
            break;
        int j = s->cand[s->next[best]++];
        start(s, v, run, j);
        s->held[best] += v->jobs[j].gpus;
        free_gpus -= v->jobs[j].gpus;
    }
}

/* ---- the policy -------------------------------------------------------- */

static void tessera_decide(void *p, const ts_replay_view *v, bool *run)
{
    tessera_state *s = p;
    order_jobs(s, v);
    if (s->ntenants > 0 && v->ntenants == s->ntenants && v->tenants) {
        decide_tenants(s, v, run);
        return;
    }
    int free_gpus = v->total_gpus;
    for (int i = 0; i < v->npending; i++) {
        int j = s->kv[i].job;
        if (v->jobs[j].gpus > free_gpus)
            continue;
        start(s, v, run, j);
        free_gpus -= v->jobs[j].gpus;
    }
}

const ts_replay_policy_ops ts_replay_tessera_ops = {"tessera", true, tessera_init, tessera_decide,
                                                    NULL, tessera_free};
