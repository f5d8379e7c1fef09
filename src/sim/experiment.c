/*
 * experiment.c - one run of the study's inflation experiment: shuffle the
 * trace's pods with the seed, append pods drawn with replacement until the
 * requested GPU reaches tune x capacity, permute the node order with the same
 * seed (it decides ties), then submit pods one at a time to the production
 * placer - no queue, no retry, no departures - and log allocation and
 * fragmentation after every pod.
 *
 * The log is binned on the fly: each event falls in bin round(arrived %) and
 * contributes its allocation rounded to 0.01 %, exactly as the study's
 * analysis scripts do; a bin with no event takes the mean of its neighbours'
 * events. Runs share the read-only input and own everything else, so they
 * run on several threads with results independent of the thread count.
 */
#include "sim/experiment.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct bins {
    double alloc[SIM_BINS + 1], frag[SIM_BINS + 1], ratio[SIM_BINS + 1];
    int n[SIM_BINS + 1];
} bins;

/* round half to even, as Python's round() */
static int round_half_even(double x)
{
    double r = nearbyint(x); /* default rounding mode is to-nearest-even */
    return (int)r;
}

static double round2(double x) { return nearbyint(x * 100.0) / 100.0; }

static void bins_finish(const bins *b, sim_run *run)
{
    for (int k = 0; k < SIM_BINS; k++) {
        double sa = b->alloc[k], sf = b->frag[k], sr = b->ratio[k];
        int n = b->n[k];
        if (n == 0) {
            for (int j = k - 1; j <= k + 1; j++) {
                if (j < 0 || j > SIM_BINS)
                    continue;
                sa += b->alloc[j];
                sf += b->frag[j];
                sr += b->ratio[j];
                n += b->n[j];
            }
        }
        run->alloc_pct[k] = n ? round2(sa / n) : NAN;
        run->frag_pct[k] = n ? round2(sf / n) : NAN;
        run->frag_ratio[k] = n ? round2(sr / n) : NAN;
    }
}

static double thread_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int64_t pod_gpu_milli(const ts_pod *p) { return (int64_t)p->req.num_gpu * p->req.gpu_milli; }

/* The submission order: the trace shuffled, then inflated or trimmed. */
static int build_sequence(const sim_input *in, ts_rng *rng, int64_t cap_milli, int **out,
                          int *nout)
{
    const ts_workload *w = in->pods;
    int cap = w->npods * 2 + 16, n = w->npods;
    int *seq = malloc((size_t)cap * sizeof *seq);
    if (!seq)
        return TS_ENOMEM;
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        seq[i] = i;
        total += pod_gpu_milli(&w->pods[i]);
    }
    ts_rng_shuffle(rng, seq, n, sizeof *seq);
    double target = in->tune * (double)cap_milli;
    if ((double)total > target) {
        while (n > 0 && (double)total > target) {
            int k = (int)ts_rng_below(rng, (uint64_t)n);
            total -= pod_gpu_milli(&w->pods[seq[k]]);
            memmove(&seq[k], &seq[k + 1], (size_t)(n - k - 1) * sizeof *seq);
            n--;
        }
    } else {
        /* Draw with replacement; stop at the first draw that would pass the
         * target by its per-GPU share (the study's rule; a multi-GPU pod can
         * overshoot by a few GPUs). CPU-only draws never stop it. */
        for (;;) {
            const ts_pod *p = &w->pods[ts_rng_below(rng, (uint64_t)w->npods)];
            if ((double)(total + p->req.gpu_milli) > target)
                break;
            if (n == cap) {
                int ncap = cap * 2;
                int *ns = realloc(seq, (size_t)ncap * sizeof *ns);
                if (!ns) {
                    free(seq);
                    return TS_ENOMEM;
                }
                seq = ns;
                cap = ncap;
            }
            total += pod_gpu_milli(p);
            seq[n++] = (int)(p - w->pods);
        }
    }
    *out = seq;
    *nout = n;
    return 0;
}

/* A copy of the cluster with its nodes in the seed's random order. */
static ts_cluster *permuted_cluster(const ts_cluster *c, ts_rng *rng)
{
    ts_cluster *d = ts_cluster_clone(c);
    if (!d)
        return NULL;
    ts_rng_shuffle(rng, d->nodes, d->nnodes, sizeof d->nodes[0]);
    return d;
}

void sim_run_one(const sim_input *in, sim_run *run)
{
    ts_rng rng;
    ts_rng_seed(&rng, run->seed);
    int64_t cap_milli = in->cluster->total_gpus * TS_MILLI_PER_GPU;
    int *seq = NULL, nseq = 0;
    ts_cluster *c = NULL;
    ts_placer *pl = NULL;
    ts_frag_tracker ft = {0};
    bins *b = calloc(1, sizeof *b);
    run->rc = 0;
    if (!b || cap_milli <= 0) {
        run->rc = ts_err_set(&run->err, b ? TS_EINVAL : TS_ENOMEM,
                             b ? "cluster has no GPUs" : "out of memory");
        goto out;
    }
    if ((run->rc = build_sequence(in, &rng, cap_milli, &seq, &nseq)) != 0) {
        ts_err_set(&run->err, run->rc, "out of memory building the pod sequence");
        goto out;
    }
    if (!(c = permuted_cluster(in->cluster, &rng))) {
        run->rc = ts_err_set(&run->err, TS_ENOMEM, "out of memory copying the cluster");
        goto out;
    }
    ts_sched_env env = {.cluster = c, .typical = in->typical, .workload = in->pods};
    pl = ts_placer_new(c, run->policy, &env, in->pods->nspecs, ts_rng_next(&rng), &run->err);
    if (!pl) {
        run->rc = run->err.code ? run->err.code : TS_ENOMEM;
        goto out;
    }
    if ((run->rc = ts_frag_tracker_init(&ft, c, in->typical, &run->err)) != 0)
        goto out;
    int64_t arrived = 0, used = 0;
    double t0 = thread_cpu_seconds();
    for (int i = 0; i < nseq; i++) {
        const ts_pod *p = &in->pods->pods[seq[i]];
        arrived += pod_gpu_milli(p);
        ts_alloc a;
        int node = ts_placer_place(pl, &p->req, (int)p->spec_key, &a);
        if (node >= 0) {
            used += pod_gpu_milli(p);
            ts_frag_tracker_update(&ft, c, node);
            run->placed++;
        }
        int k = round_half_even(100.0 * (double)arrived / (double)cap_milli);
        if (k < 0)
            k = 0;
        if (k > SIM_BINS)
            k = SIM_BINS;
        b->alloc[k] += round2(100.0 * (double)used / (double)cap_milli);
        b->frag[k] += 100.0 * ft.sum_f / (double)cap_milli;
        b->ratio[k] += ft.sum_u > 0 ? 100.0 * ft.sum_f / (double)ft.sum_u : 0.0;
        b->n[k]++;
    }
    run->cpu_seconds = thread_cpu_seconds() - t0;
    run->npods = nseq;
    bins_finish(b, run);
out:
    ts_frag_tracker_free(&ft);
    ts_placer_free(pl);
    ts_cluster_free(c);
    free(seq);
    free(b);
}

typedef struct pool {
    const sim_input *in;
    sim_run *runs;
    int nruns, next, done, verbose;
    pthread_mutex_t mu;
} pool;

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int i = p->next < p->nruns ? p->next++ : -1;
        pthread_mutex_unlock(&p->mu);
        if (i < 0)
            return NULL;
        sim_run_one(p->in, &p->runs[i]);
        pthread_mutex_lock(&p->mu);
        p->done++;
        if (p->verbose)
            fprintf(stderr, "\r  %d/%d runs (%s seed %llu)   ", p->done, p->nruns,
                    p->runs[i].policy->name, (unsigned long long)p->runs[i].seed);
        pthread_mutex_unlock(&p->mu);
    }
}

#define SIM_MAX_JOBS 64

void sim_run_all(const sim_input *in, sim_run *runs, int nruns, int jobs, int verbose)
{
    pool p = {.in = in, .runs = runs, .nruns = nruns, .verbose = verbose};
    pthread_mutex_init(&p.mu, NULL);
    if (jobs < 1)
        jobs = 1;
    if (jobs > SIM_MAX_JOBS)
        jobs = SIM_MAX_JOBS;
    if (jobs > nruns)
        jobs = nruns;
    pthread_t th[SIM_MAX_JOBS];
    int started = 0;
    for (int t = 1; t < jobs; t++)
        if (pthread_create(&th[started], NULL, worker, &p) == 0)
            started++;
    worker(&p);
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    if (verbose)
        fprintf(stderr, "\n");
    pthread_mutex_destroy(&p.mu);
}
