/*
 * replay_timeline.c - what a finished replay looked like over time: the
 * tenants' fairness figures and the time series behind --series / --plot.
 *
 * Both come from one sweep over the replay's events: every job's submit and
 * finish (its demand comes and goes) and every hold's start and end (from
 * the engine's log: GPUs taken and given back, a preempted job waiting
 * again). Between two event times nothing changes, so every figure is an
 * exact integral of a step function, however the replay was run: siloed
 * partitions and the shared cluster are measured by the same code on the
 * same clock, which is the point (their numbers must compare). The sweep
 * sorts 2 x (jobs + holds) events once; each step costs O(tenants x sizes)
 * for the water-fill and the "smallest waiting job" test. Pure: no I/O.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay/replay.h"
#include "tessera/grow.h"

enum { EV_SUBMIT, EV_FINISH, EV_HOLD_START, EV_HOLD_END };

typedef struct event {
    double t;
    int kind;
    int job;
    bool done; /* EV_HOLD_END: the hold ended with the job's completion */
} event;

/* The state between two event times; the callback reads it. */
typedef struct sweep_state {
    int ntenants;
    long busy;
    long queue;        /* submitted, unfinished, holding nothing */
    long *demand;      /* per tenant */
    long *held;        /* per tenant */
    int nsizes;
    const int *sizes;  /* distinct GPU counts, ascending */
    long *waiting;     /* ntenants x nsizes: waiting jobs of each size */
} sweep_state;

typedef void (*segment_fn)(void *ctx, double t0, double t1, const sweep_state *s);

static int cmp_event(const void *a, const void *b)
{
    const event *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (x->job > y->job) - (x->job < y->job);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int size_index(const int *sizes, int n, int g)
{
    const int *p = bsearch(&g, sizes, (size_t)n, sizeof *sizes, cmp_int);
    return p ? (int)(p - sizes) : 0;
}

/* Smallest GPU count among tenant k's waiting jobs, or 0 when none waits. */
static int smallest_waiting(const sweep_state *s, int k)
{
    const long *w = s->waiting + (size_t)k * (size_t)s->nsizes;
    for (int i = 0; i < s->nsizes; i++)
        if (w[i] > 0)
            return s->sizes[i];
    return 0;
}

static void apply(sweep_state *s, const ts_replay_job *jobs, const int *size_of, const event *ev)
{
    const ts_replay_job *J = &jobs[ev->job];
    int k = s->ntenants > 0 ? J->tenant : 0;
    long g = J->gpus;
    long *w = s->waiting + (size_t)k * (size_t)s->nsizes + size_of[ev->job];
    switch (ev->kind) {
    case EV_SUBMIT:
        s->demand[k] += g;
        s->queue++;
        (*w)++;
        break;
    case EV_FINISH:
        s->demand[k] -= g;
        break;
    case EV_HOLD_START:
        s->held[k] += g;
        s->busy += g;
        s->queue--;
        (*w)--;
        break;
    default: /* EV_HOLD_END */
        s->held[k] -= g;
        s->busy -= g;
        if (!ev->done) {
            s->queue++;
            (*w)++;
        }
        break;
    }
}

/* Sorts the events of the replay and calls fn for every stretch of time
 * between consecutive event times, from the first to the last. *ntimes gets
 * the number of distinct event times (may be NULL). */
static int sweep(const ts_replay_job *jobs, int njobs, const ts_replay_outcome *out,
                 const ts_replay_log *log, int ntenants, segment_fn fn, void *ctx, int *ntimes,
                 ts_err *err)
{
    int nholds = log ? log->n : 0;
    size_t nev = 2 * (size_t)njobs + 2 * (size_t)nholds;
    size_t nt = (size_t)(ntenants > 0 ? ntenants : 1);
    event *ev = malloc(sizeof *ev * (nev ? nev : 1));
    int *sizes = malloc(sizeof *sizes * (size_t)(njobs > 0 ? njobs : 1));
    int *size_of = malloc(sizeof *size_of * (size_t)(njobs > 0 ? njobs : 1));
    sweep_state s = {.ntenants = ntenants};
    s.demand = calloc(nt, sizeof *s.demand);
    s.held = calloc(nt, sizeof *s.held);
    int rc = 0;
    if (!ev || !sizes || !size_of || !s.demand || !s.held) {
        rc = ts_err_set(err, TS_ENOMEM, "replay: out of memory");
        goto done;
    }
    for (int j = 0; j < njobs; j++) {
        if (ntenants > 0 && (jobs[j].tenant < 0 || jobs[j].tenant >= ntenants)) {
            rc = ts_err_set(err, TS_EINVAL, "jobs[%d] (%s).tenant: must be 0..%d", j,
                            jobs[j].name, ntenants - 1);
            goto done;
        }
        sizes[j] = jobs[j].gpus;
    }
    qsort(sizes, (size_t)njobs, sizeof *sizes, cmp_int);
    for (int j = 0; j < njobs; j++)
        if (s.nsizes == 0 || sizes[j] != sizes[s.nsizes - 1])
            sizes[s.nsizes++] = sizes[j];
    s.sizes = sizes;
    for (int j = 0; j < njobs; j++)
        size_of[j] = size_index(sizes, s.nsizes, jobs[j].gpus);
    s.waiting = calloc(nt * (size_t)(s.nsizes > 0 ? s.nsizes : 1), sizeof *s.waiting);
    if (!s.waiting) {
        rc = ts_err_set(err, TS_ENOMEM, "replay: out of memory");
        goto done;
    }
    size_t n = 0;
    for (int j = 0; j < njobs; j++) {
        ev[n++] = (event){jobs[j].submit_s, EV_SUBMIT, j, false};
        ev[n++] = (event){out[j].finish_s, EV_FINISH, j, false};
    }
    for (int h = 0; h < nholds; h++) {
        const ts_replay_hold *H = &log->holds[h];
        if (H->job < 0 || H->job >= njobs) {
            rc = ts_err_set(err, TS_EINVAL, "replay log: holds[%d].job: must be 0..%d", h,
                            njobs - 1);
            goto done;
        }
        ev[n++] = (event){H->start_s, EV_HOLD_START, H->job, false};
        ev[n++] = (event){H->end_s, EV_HOLD_END, H->job, H->done};
    }
    qsort(ev, n, sizeof *ev, cmp_event);
    int times = 0;
    for (size_t i = 0; i < n;) {
        double t = ev[i].t;
        for (; i < n && ev[i].t == t; i++)
            apply(&s, jobs, size_of, &ev[i]);
        times++;
        if (i < n)
            fn(ctx, t, ev[i].t, &s);
    }
    if (ntimes)
        *ntimes = times;
done:
    free(ev);
    free(sizes);
    free(size_of);
    free(s.demand);
    free(s.held);
    free(s.waiting);
    return rc;
}

/* ---- fairness --------------------------------------------------------- */

double replay_jain(const double *x, int n)
{
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        s += x[i];
        s2 += x[i] * x[i];
    }
    return s2 > 0 ? s * s / (n * s2) : 1.0;
}

void replay_water_fill(double capacity, const double *demand, const double *weight, int n,
                          double *share)
{
    /* Raise the level: each round, the tenants whose demand is below
     * level x weight are satisfied and leave; the rest split what is left
     * in proportion to their weights. A satisfied tenant is one whose share
     * is already set (> 0). n is small (tenants), so the rounds' O(n^2) does
     * not matter. */
    double left = capacity, wsum = 0;
    int open = 0, zero = 0;
    for (int i = 0; i < n; i++) {
        share[i] = 0;
        if (demand[i] > 0 && weight[i] > 0) {
            wsum += weight[i];
            open++;
        } else if (demand[i] > 0) {
            zero++;
        }
    }
    while (open > 0 && left > 0) {
        double level = left / wsum;
        bool any = false;
        for (int i = 0; i < n; i++)
            if (share[i] == 0 && weight[i] > 0 && demand[i] > 0 && demand[i] <= level * weight[i]) {
                share[i] = demand[i];
                left -= demand[i];
                wsum -= weight[i];
                open--;
                any = true;
            }
        if (!any) {
            for (int i = 0; i < n; i++)
                if (share[i] == 0 && weight[i] > 0 && demand[i] > 0)
                    share[i] = level * weight[i];
            left = 0;
        }
    }
    /* weight 0: an equal max-min split of what the others left */
    while (zero > 0 && left > 0) {
        double each = left / zero;
        bool any = false;
        for (int i = 0; i < n; i++)
            if (share[i] == 0 && weight[i] <= 0 && demand[i] > 0 && demand[i] <= each) {
                share[i] = demand[i];
                left -= demand[i];
                zero--;
                any = true;
            }
        if (!any) {
            for (int i = 0; i < n; i++)
                if (share[i] == 0 && weight[i] <= 0 && demand[i] > 0)
                    share[i] = each;
            left = 0;
        }
    }
}

typedef struct fair_ctx {
    const ts_replay_tenant *tenants;
    int ntenants;
    double total_gpus;
    ts_replay_tenant_result *tres;
    double *demand, *weight, *share; /* scratch, ntenants each */
} fair_ctx;

static void fair_segment(void *p, double t0, double t1, const sweep_state *s)
{
    fair_ctx *c = p;
    double dt = t1 - t0;
    for (int k = 0; k < c->ntenants; k++) {
        c->demand[k] = (double)s->demand[k];
        c->weight[k] = c->tenants[k].gpus;
    }
    replay_water_fill(c->total_gpus, c->demand, c->weight, c->ntenants, c->share);
    for (int k = 0; k < c->ntenants; k++) {
        ts_replay_tenant_result *r = &c->tres[k];
        long guar = c->tenants[k].gpus, held = s->held[k], dem = s->demand[k];
        long entitled = dem < guar ? dem : guar;
        r->held_gpu_s += (double)held * dt;
        r->entitled_gpu_s += (double)entitled * dt;
        r->fair_gpu_s += c->share[k] * dt;
        if (dem > 0)
            r->demand_s += dt;
        int small = smallest_waiting(s, k);
        if (small > 0 && small <= guar - held && entitled > held)
            r->deficit_gpu_s += (double)(entitled - held) * dt;
    }
}

int replay_tenant_metrics(const ts_replay_job *jobs, int njobs, const ts_replay_outcome *out,
                             const ts_replay_log *log, const ts_replay_tenant *tenants,
                             int ntenants, long total_gpus, ts_replay_tenant_result *tres,
                             ts_replay_fairness *fair, ts_err *err)
{
    if (ntenants < 1)
        return ts_err_set(err, TS_EINVAL, "replay: tenant figures need tenants");
    memset(tres, 0, sizeof *tres * (size_t)ntenants);
    size_t nt = (size_t)ntenants;
    fair_ctx c = {tenants, ntenants, (double)total_gpus, tres, malloc(sizeof(double) * nt),
                  malloc(sizeof(double) * nt), malloc(sizeof(double) * nt)};
    double *x = malloc(sizeof *x * nt), *y = malloc(sizeof *y * nt);
    int rc = 0;
    if (!c.demand || !c.weight || !c.share || !x || !y)
        rc = ts_err_set(err, TS_ENOMEM, "replay: out of memory");
    if (rc == 0)
        rc = sweep(jobs, njobs, out, log, ntenants, fair_segment, &c, NULL, err);
    if (rc == 0) {
        for (int j = 0; j < njobs; j++) {
            ts_replay_tenant_result *r = &tres[jobs[j].tenant];
            r->jobs++;
            r->avg_jct_s += out[j].jct_s;
        }
        int nx = 0, ny = 0;
        double deficit = 0;
        for (int k = 0; k < ntenants; k++) {
            ts_replay_tenant_result *r = &tres[k];
            if (r->jobs > 0)
                r->avg_jct_s /= r->jobs;
            if (r->entitled_gpu_s > 0)
                r->share_vs_guarantee = r->held_gpu_s / r->entitled_gpu_s;
            if (r->fair_gpu_s > 0) {
                r->fair_ratio = r->held_gpu_s / r->fair_gpu_s;
                x[nx++] = r->fair_ratio;
            }
            if (r->demand_s > 0 && tenants[k].gpus > 0)
                r->share_while_active = r->held_gpu_s / r->demand_s / tenants[k].gpus;
            if (r->jobs > 0)
                y[ny++] = r->share_while_active;
            deficit += r->deficit_gpu_s;
        }
        if (fair) {
            fair->jain = replay_jain(x, nx);
            fair->jain_active = replay_jain(y, ny);
            fair->deficit_gpu_s = deficit;
        }
    }
    free(c.demand);
    free(c.weight);
    free(c.share);
    free(x);
    free(y);
    return rc;
}

/* ---- the time series -------------------------------------------------- */

typedef struct series_ctx {
    ts_replay_series *s;
    bool per_event;
    double t_first, width; /* buckets */
    int next;              /* per event: the next point */
} series_ctx;

static void add_weighted(ts_replay_series *S, int i, const sweep_state *s, double w)
{
    S->busy_gpus[i] += (double)s->busy * w;
    S->queue_jobs[i] += (double)s->queue * w;
    for (int k = 0; k < S->ntenants; k++)
        S->held[(size_t)i * (size_t)S->ntenants + (size_t)k] += (double)s->held[k] * w;
}

static void series_segment(void *p, double t0, double t1, const sweep_state *s)
{
    series_ctx *c = p;
    ts_replay_series *S = c->s;
    if (c->per_event) {
        int i = c->next++;
        S->t_s[i] = t0;
        add_weighted(S, i, s, 1.0);
        return;
    }
    /* spread [t0, t1) over the buckets it covers, weighted by overlap */
    int b = (int)((t0 - c->t_first) / c->width) - 1; /* one early: float rounding */
    for (b = b > 0 ? b : 0; b < S->npoints; b++) {
        double lo = c->t_first + b * c->width, hi = lo + c->width;
        if (b == S->npoints - 1)
            hi = S->end_s;
        if (lo >= t1)
            break;
        double ov = fmin(hi, t1) - fmax(lo, t0);
        if (ov > 0)
            add_weighted(S, b, s, ov / (hi - lo));
    }
}

static void nothing(void *p, double t0, double t1, const sweep_state *s)
{
    (void)p, (void)t0, (void)t1, (void)s;
}

void ts_replay_series_free(ts_replay_series *s)
{
    if (!s)
        return;
    free(s->block);
    free(s);
}

int ts_replay_series_build(const ts_replay_job *jobs, int njobs, const ts_replay_outcome *out,
                           const ts_replay_log *log, int ntenants, long total_gpus,
                           int max_points, ts_replay_series **series, ts_err *err)
{
    if (max_points < 1)
        return ts_err_set(err, TS_EINVAL, "replay series: max_points: must be >= 1");
    int ntimes = 0;
    int rc = sweep(jobs, njobs, out, log, ntenants, nothing, NULL, &ntimes, err);
    if (rc)
        return rc;
    ts_replay_series *S = calloc(1, sizeof *S);
    if (!S)
        return ts_err_set(err, TS_ENOMEM, "replay: out of memory");
    S->ntenants = ntenants > 0 ? ntenants : 0;
    S->total_gpus = total_gpus;
    double first = INFINITY, last = 0;
    for (int j = 0; j < njobs; j++) {
        first = fmin(first, jobs[j].submit_s);
        last = fmax(last, out[j].finish_s);
    }
    S->end_s = njobs > 0 ? last : 0;
    series_ctx c = {.s = S, .per_event = ntimes - 1 <= max_points,
                    .t_first = njobs > 0 ? first : 0};
    S->npoints = c.per_event ? (ntimes > 1 ? ntimes - 1 : 0) : max_points;
    if (!c.per_event)
        c.width = (S->end_s - c.t_first) / max_points;
    size_t np = (size_t)(S->npoints > 0 ? S->npoints : 1);
    ts_block_part parts[] = {
        TS_BLOCK_PART(S->t_s, np), TS_BLOCK_PART(S->busy_gpus, np),
        TS_BLOCK_PART(S->queue_jobs, np),
        TS_BLOCK_PART(S->held, np * (size_t)(S->ntenants > 0 ? S->ntenants : 1))};
    if (!(S->block = ts_block_alloc(parts, sizeof parts / sizeof *parts))) {
        free(S);
        return ts_err_set(err, TS_ENOMEM, "replay: out of memory");
    }
    if (!c.per_event)
        for (int i = 0; i < S->npoints; i++)
            S->t_s[i] = c.t_first + i * c.width;
    rc = sweep(jobs, njobs, out, log, ntenants, series_segment, &c, NULL, err);
    if (rc) {
        ts_replay_series_free(S);
        return rc;
    }
    *series = S;
    return 0;
}
