/*
 * sched_speed.c - how long one scheduling cycle takes on a large cluster.
 *
 *   tessera-bench-sched [--reps 5] [--pending 1000,10000,100000] [--seed 1] [--after-s 0]
 *                       [--elastic-pct 0]
 *
 * The cluster: 1,250 nodes of 8 H100 GPUs (10,000 GPUs) in 4 leaf groups;
 * 10 teams guaranteed 1,000 GPUs each. A warm-up cycle fills it to about
 * 95 % with a mix of shapes (1, 2, 4 and 8 GPUs, 2..16-node gangs inside a
 * leaf, CPU-only tasks); then for each pending count one cycle is timed over
 * that many waiting jobs of the same mix (tenants, tiers and priorities
 * drawn at random), and its starts are undone so every repetition sees the
 * same state. Prints the median cycle time, the waiting jobs decided per
 * second, and how the cycle grows with the pending count. Target (issue 3):
 * under 50 ms at 100,000 pending. --after-s times the cycles that long after
 * the fill: past the minimum runtime (600 s) guaranteed jobs may preempt, so
 * the cycle also pays for victim searches. --elastic-pct makes that share of
 * the GPU jobs (running and waiting) elastic from their size to twice it (a
 * gang by whole tasks, one task by GPUs up to 8), so the cycle also pays
 * for its elastic step (docs/scheduler.md "Elastic jobs"); 0 draws nothing
 * more from the generator, so the jobs are today's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera/cycle.h"
#include "tessera/load.h"
#include "tessera/rng.h"
#include "tessera/tenant_load.h"

#define NODES 1250
#define LEAVES 4
#define TEAMS 10
#define MAX_PENDING_SIZES 8
#define TARGET_MS 50.0

typedef struct jobset {
    ts_job *jobs;
    ts_request *tasks; /* packed; room for 16 per job */
    int n;
} jobset;

#define TASKS_PER_JOB 16

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static char *cluster_yaml(void)
{
    size_t cap = 4096;
    char *y = malloc(cap);
    int off = snprintf(y, cap,
                       "topology:\n  levels: [leaf, gpu]\n"
                       "node_classes:\n"
                       "  h8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 224000, "
                       "memory_mib: 2097152}\n"
                       "nodes:\n");
    int per = NODES / LEAVES, first = 0;
    for (int l = 0; l < LEAVES; l++) {
        int n = per + (l < NODES % LEAVES);
        off += snprintf(y + off, cap - (size_t)off,
                        "  - {names: 'l%d-[%04d-%04d]', class: h8, topology: {leaf: leaf%d}}\n",
                        l, first, first + n - 1, l);
        first += n;
    }
    return y;
}

static char *tenants_yaml(void)
{
    size_t cap = 4096;
    char *y = malloc(cap);
    int off = snprintf(y, cap, "tenants:\n  org:\n    guaranteed: {gpu: {H100-80GB: %d}}\n"
                       "    teams:\n", TEAMS * 1000);
    for (int t = 0; t < TEAMS; t++)
        off += snprintf(y + off, cap - (size_t)off,
                        "      team-%d: {guaranteed: {gpu: {H100-80GB: 1000}}}\n", t);
    return y;
}

/* One job of the mix. */
static int elastic_pct;

/* Makes j elastic from its size to twice it (tasks of 8 GPUs or gangs grow
 * by tasks, up to 16; one smaller task by GPUs, up to 8). */
static void make_elastic(ts_job *j)
{
    int per = j->tasks[0].num_gpu;
    if (per == 0)
        return;
    j->elastic_min_gpus = per * j->ntasks;
    if (j->ntasks > 1 || per == 8) {
        int max_tasks = 2 * j->ntasks < TASKS_PER_JOB ? 2 * j->ntasks : TASKS_PER_JOB;
        j->elastic_max_gpus = per * max_tasks;
        j->elastic_step_gpus = per;
    } else {
        j->elastic_max_gpus = 2 * per < 8 ? 2 * per : 8;
        j->elastic_step_gpus = 1;
    }
}

static void make_job(ts_rng *rng, ts_job *j, ts_request *tasks, int64_t id, double submit_s,
                     int leaf_level)
{
    memset(j, 0, sizeof *j);
    j->id = id;
    j->tenant = 1 + (int)ts_rng_below(rng, TEAMS);
    j->tier = ts_rng_below(rng, 3) == 0 ? TS_TIER_GUARANTEED : TS_TIER_OPPORTUNISTIC;
    j->priority = (int)ts_rng_below(rng, 3);
    j->submit_s = submit_s;
    j->time_limit_s = 600.0 * (double)(1 + ts_rng_below(rng, 48));
    j->ckpt_grace_s = -1.0;
    j->tasks = tasks;
    j->required_level = TS_GANG_LEVEL_ANY;
    j->preferred_level = TS_GANG_LEVEL_ANY;
    uint64_t shape = ts_rng_below(rng, 100);
    int ntasks = 1, gpus = 1;
    if (shape < 35)
        gpus = 1;
    else if (shape < 50)
        gpus = 2;
    else if (shape < 60)
        gpus = 4;
    else if (shape < 80)
        gpus = 8;
    else if (shape < 95) {
        gpus = 8;
        ntasks = 2 << ts_rng_below(rng, 4); /* 2, 4, 8, 16 nodes */
        j->required_level = leaf_level;
        j->preferred_level = leaf_level;
        j->rail_aligned = true;
    } else {
        gpus = 0;
    }
    j->ntasks = ntasks;
    for (int t = 0; t < ntasks; t++) {
        memset(&tasks[t], 0, sizeof tasks[t]);
        tasks[t].num_gpu = gpus;
        tasks[t].gpu_milli = gpus ? TS_MILLI_PER_GPU : 0;
        tasks[t].cpu_milli = gpus ? 16000 * gpus : 8000;
        tasks[t].mem_mib = gpus ? 131072 * gpus : 32768;
        tasks[t].mig_profile = -1;
    }
    if (elastic_pct > 0 && (int)ts_rng_below(rng, 100) < elastic_pct)
        make_elastic(j);
}

/* Jobs with their tasks packed one after the other, as a shell that reads
 * them from its store would hold them. */
static int jobset_make(jobset *s, int n, ts_rng *rng, int64_t first_id, double submit_s,
                       int leaf_level)
{
    s->jobs = calloc((size_t)n, sizeof *s->jobs);
    s->tasks = calloc((size_t)n * TASKS_PER_JOB, sizeof *s->tasks);
    s->n = n;
    if (!s->jobs || !s->tasks)
        return -1;
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        make_job(rng, &s->jobs[i], &s->tasks[used], first_id + i, submit_s + (double)i * 0.001,
                 leaf_level);
        used += (size_t)s->jobs[i].ntasks;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int reps = 5;
    int sizes[MAX_PENDING_SIZES] = {1000, 10000, 100000};
    int nsizes = 3;
    uint64_t seed = 1;
    double after_s = 0.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--after-s") == 0 && i + 1 < argc) {
            after_s = atof(argv[++i]);
        } else if (strcmp(argv[i], "--elastic-pct") == 0 && i + 1 < argc) {
            elastic_pct = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--pending") == 0 && i + 1 < argc) {
            nsizes = 0;
            for (char *p = strtok(argv[++i], ","); p && nsizes < MAX_PENDING_SIZES;
                 p = strtok(NULL, ","))
                sizes[nsizes++] = atoi(p);
        } else {
            fprintf(stderr, "usage: %s [--reps N] [--pending N,N,...] [--seed S] [--after-s S] "
                            "[--elastic-pct P]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || nsizes < 1) {
        fprintf(stderr, "%s: --reps and --pending must be >= 1\n", argv[0]);
        return 2;
    }
    ts_err err;
    ts_cluster *c = NULL;
    ts_tenants *ts = NULL;
    ts_quota *q = NULL;
    ts_sched *s = NULL;
    char *cy = cluster_yaml(), *ty = tenants_yaml();
    if (ts_load_cluster_yaml(cy, strlen(cy), "bench-cluster.yaml", &c, &err) != 0 ||
        ts_load_tenants_yaml(ty, strlen(ty), "bench-tenants.yaml", &ts, &err) != 0 ||
        ts_quota_new(ts, 3600.0, &q, &err) != 0 || ts_sched_new(c, q, NULL, &s, &err) != 0) {
        fprintf(stderr, "sched-speed: %s\n", err.msg);
        return 1;
    }
    free(cy);
    free(ty);
    int leaf = ts_gang_level_parse(c, "leaf", &err);
    ts_rng rng;
    ts_rng_seed(&rng, seed);
    ts_decision d;
    ts_decision_init(&d);

    /* warm-up: fill the cluster with started jobs */
    jobset fill;
    if (jobset_make(&fill, 4000, &rng, 1, 0.0, leaf) != 0)
        return 1;
    double t = 1.0;
    if (ts_sched_cycle(s, t, fill.jobs, fill.n, NULL, 0, &d, &err) != 0) {
        fprintf(stderr, "sched-speed: %s\n", err.msg);
        return 1;
    }
    int nrun = d.nstarts;
    ts_job *run = calloc((size_t)nrun, sizeof *run);
    ts_alloc *run_allocs = calloc((size_t)nrun * TASKS_PER_JOB, sizeof *run_allocs);
    for (int k = 0; k < nrun; k++) {
        run[k] = fill.jobs[d.starts[k].job];
        memcpy(&run_allocs[(size_t)k * TASKS_PER_JOB], d.starts[k].allocs,
               (size_t)run[k].ntasks * sizeof *run_allocs);
        run[k].allocs = &run_allocs[(size_t)k * TASKS_PER_JOB];
        run[k].start_s = t;
        run[k].last_ckpt_s = t;
    }
    int64_t free_gpus = ts_gang_index_free_gpus(ts_sched_gang_index(s), -1);
    printf("cluster: %d nodes x 8 GPUs in %d leaves; %d running jobs, %lld of %lld GPUs free\n",
           NODES, LEAVES, nrun, (long long)free_gpus, (long long)c->total_gpus);
    t += after_s;
    printf("cycles timed %.0f s after the fill; %d %% of the jobs elastic\n", after_s,
           elastic_pct);
    printf("%9s %10s %10s %10s %10s %8s %8s %12s %8s\n", "pending", "cycle_ms", "min_ms", "placed",
           "memo", "started", "preempt", "decisions/s", "resized");

    double worst_ms = 0.0;
    double first_ms = 0.0;
    for (int si = 0; si < nsizes; si++) {
        jobset pend;
        if (jobset_make(&pend, sizes[si], &rng, 1000000, 10.0, leaf) != 0)
            return 1;
        double *ms = calloc((size_t)reps, sizeof *ms);
        ts_cycle_stats st = {0};
        for (int r = 0; r < reps; r++) {
            t += 1.0;
            double a = now_ms();
            if (ts_sched_cycle(s, t, pend.jobs, pend.n, run, nrun, &d, &err) != 0) {
                fprintf(stderr, "sched-speed: %s\n", err.msg);
                return 1;
            }
            ms[r] = now_ms() - a;
            st = d.stats;
            /* undo the starts so the next repetition sees the same cluster */
            for (int k = 0; k < d.nstarts; k++) {
                ts_job j = pend.jobs[d.starts[k].job];
                j.allocs = d.starts[k].allocs;
                if (ts_sched_stop(s, &j, t, &err) != 0) {
                    fprintf(stderr, "sched-speed: %s\n", err.msg);
                    return 1;
                }
            }
        }
        qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
        double med = ms[reps / 2];
        printf("%9d %10.2f %10.2f %10d %10d %8d %8d %12.0f %8d\n", sizes[si], med, ms[0],
               st.placements, st.memo_hits, st.started, st.preempted,
               (double)sizes[si] / (med / 1e3), st.grown + st.shrunk);
        if (si == 0)
            first_ms = med;
        if (sizes[si] >= 100000 && med > worst_ms)
            worst_ms = med;
        if (si == nsizes - 1 && nsizes > 1)
            printf("growth: %.1fx cycle time for %.0fx pending jobs\n", med / first_ms,
                   (double)sizes[si] / sizes[0]);
        free(ms);
        free(pend.jobs);
        free(pend.tasks);
    }
    if (worst_ms > 0.0)
        printf("100k pending: %.1f ms (target < %.0f ms): %s\n", worst_ms, TARGET_MS,
               worst_ms < TARGET_MS ? "met" : "MISSED");
    ts_decision_fini(&d);
    free(run);
    free(run_allocs);
    free(fill.jobs);
    free(fill.tasks);
    ts_sched_free(s);
    ts_quota_free(q);
    ts_tenants_free(ts);
    ts_cluster_free(c);
    return 0;
}
