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
 *
 * Policy "core" (sim_policy_core) submits the same pods to the production
 * scheduling cycle instead: one single-task job per pod, one tenant with no
 * quota, tesserad's default configuration, one ts_sched_cycle per arrival
 * with that pod as the only waiting job. The study's pods never leave, so
 * there is no end to plan a reservation or preemption around and the
 * cycle is given no running jobs (what they hold is bound on its cluster).
 * Its placements are the default scorer's, which tests/sim checks.
 * "core-learned" is the same without the trace's typical-pod list: the cycle
 * learns its expected workload from the pods as they arrive, as tesserad
 * does.
 */
#include "sim/experiment.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera/cycle.h"
#include "tessera/tenant.h"

const struct ts_scorer_ops sim_policy_core = {
    .name = "core",
    .summary = "ts_sched_cycle with tesserad's default configuration (one job per pod)",
};
const struct ts_scorer_ops sim_policy_core_learned = {
    .name = "core-learned",
    .summary = "core, with the expected workload learned online as tesserad does",
};

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

int sim_sequence(const sim_input *in, uint64_t seed, int **seq, int *n)
{
    ts_rng rng;
    ts_rng_seed(&rng, seed);
    *seq = NULL;
    *n = 0;
    return build_sequence(in, &rng, in->cluster->total_gpus * TS_MILLI_PER_GPU, seq, n);
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

/* The production cycle set up as tesserad's default, on cluster c. */
typedef struct core_run {
    ts_tenants *tenants;
    ts_quota *quota;
    ts_sched *sched;
    ts_decision d;
} core_run;

static void core_fini(core_run *k)
{
    ts_decision_fini(&k->d);
    ts_sched_free(k->sched);
    ts_quota_free(k->quota);
    ts_tenants_free(k->tenants);
}

static int core_init(core_run *k, ts_cluster *c, const ts_typical *typ, bool learn,
                     ts_err *err)
{
    memset(k, 0, sizeof *k);
    ts_decision_init(&k->d);
    ts_sched_config cfg;
    ts_sched_config_default(&cfg);
    int rc;
    if (!(k->tenants = ts_tenants_new()))
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    if ((rc = ts_tenant_add(k->tenants, "sim", NULL, err)) != 0 ||
        (rc = ts_tenants_validate(k->tenants, err)) != 0 ||
        (rc = ts_quota_new(k->tenants, 3600.0, &k->quota, err)) != 0 ||
        (rc = ts_sched_new(c, k->quota, &cfg, &k->sched, err)) != 0 ||
        (!learn && (rc = ts_sched_set_expected(k->sched, typ, err)) != 0))
        return rc;
    return 0;
}

/* Pod i as the only waiting job of one cycle; the node it started on, or
 * TS_ENOSPC (or another negative code with err). */
static int core_place(core_run *k, const ts_pod *p, int i, ts_err *err)
{
    ts_job j = {
        .id = i,
        .tenant = 0,
        .tier = TS_TIER_GUARANTEED,
        .submit_s = (double)i,
        .tasks = &p->req,
        .ntasks = 1,
        .required_level = TS_GANG_LEVEL_ANY,
        .preferred_level = TS_GANG_LEVEL_ANY,
        .ckpt_grace_s = -1.0,
    };
    int rc = ts_sched_cycle(k->sched, (double)i, &j, 1, NULL, 0, &k->d, err);
    if (rc != 0)
        return rc;
    return k->d.nstarts == 1 ? k->d.starts[0].allocs[0].node : TS_ENOSPC;
}

void sim_run_one(const sim_input *in, sim_run *run)
{
    core_run core = {0};
    bool learned = run->policy == &sim_policy_core_learned;
    bool is_core = run->policy == &sim_policy_core || learned;
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
    uint64_t placer_seed = ts_rng_next(&rng);
    if (is_core) {
        if ((run->rc = core_init(&core, c, in->typical, learned, &run->err)) != 0)
            goto out;
    } else if (!(pl = ts_placer_new(c, run->policy, &env, in->pods->nspecs, placer_seed,
                                    &run->err))) {
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
        int node = is_core ? core_place(&core, p, i, &run->err)
                           : ts_placer_place(pl, &p->req, (int)p->spec_key, &a);
        if (is_core && node < 0 && node != TS_ENOSPC) {
            run->rc = node;
            goto out;
        }
        if (run->placements && i < run->nplacements)
            run->placements[i] = node >= 0 ? node : -1;
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
    if (is_core)
        core_fini(&core);
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
