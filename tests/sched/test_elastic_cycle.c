/*
 * test_elastic_cycle.c - elastic jobs in the scheduling cycle (cycle_elastic,
 * src/sched/elastic.c, the cycle's last step).
 *
 * The cluster: two nodes of 4 H100 (8 GPUs); one tenant guaranteed more
 * than all of them (its quota never binds), every job guaranteed unless a
 * test makes one a victim, so no preemption muddies what the grant decides.
 * Worked out on paper: a lone elastic job grows into the free GPUs; one that
 * has not run its minimum runtime keeps its size; waiting work that lacks
 * room takes the extras back (marked reclaim) and nobody grows meanwhile,
 * before any victim is stopped for it (only what the extras do not cover
 * preempts); a gang grows by whole tasks; a stopping job, a rigid job and a
 * cost < 0 configuration are left alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "sched/sched_world.h"
#include "tessera/cycle.h"
#include "tessera/load.h"
#include "tessera/tenant_load.h"

static const char CLUSTER_YAML[] =
    "topology:\n"
    "  levels: [leaf, gpu]\n"
    "node_classes:\n"
    "  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}\n"
    "nodes:\n"
    "  - {names: 'n[0-1]', class: g4, topology: {leaf: l0}}\n";

static const char TENANTS_YAML[] = "tenants:\n"
                                   "  team: {guaranteed: {gpu: {H100-80GB: 16}}}\n";

#define TEAM 0
#define MAX_JOBS 8
#define MAX_TASKS 4
#define LONG_AGO_S (NOW_S - 600.0) /* past the minimum runtime, low las level */
#define NOW_S 10000.0

typedef struct fx {
    ts_cluster *c;
    ts_tenants *ts;
    ts_quota *q;
    ts_sched *s;
    ts_sched_config cfg;
    ts_decision d;
    ts_job jobs[MAX_JOBS];
    ts_request tasks[MAX_JOBS][MAX_TASKS];
    ts_alloc allocs[MAX_JOBS][MAX_TASKS];
    int njobs;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    ts_sched_config_default(&f->cfg);
    if (sched_world_open(CLUSTER_YAML, TENANTS_YAML, &f->cfg, &f->c, &f->ts, &f->q, &f->s,
                         &f->d) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    sched_world_close(f->c, f->ts, f->q, f->s, &f->d);
    free(f);
    return 0;
}

/* A guaranteed job of ntasks tasks of k whole GPUs each. */
static ts_job *job(fx *f, int ntasks, int k)
{
    assert_true(f->njobs < MAX_JOBS && ntasks <= MAX_TASKS);
    int n = f->njobs++;
    ts_job *j = &f->jobs[n];
    memset(j, 0, sizeof *j);
    j->id = 100 + n;
    j->tenant = TEAM;
    j->tier = TS_TIER_GUARANTEED;
    j->time_limit_s = 86400.0;
    j->ckpt_grace_s = -1.0;
    j->tasks = f->tasks[n];
    j->ntasks = ntasks;
    j->required_level = TS_GANG_LEVEL_ANY;
    j->preferred_level = TS_GANG_LEVEL_ANY;
    for (int t = 0; t < ntasks; t++) {
        ts_request *r = &f->tasks[n][t];
        memset(r, 0, sizeof *r);
        r->cpu_milli = 1000;
        r->mem_mib = 1024;
        r->num_gpu = k;
        r->gpu_milli = TS_MILLI_PER_GPU;
        r->mig_profile = -1;
    }
    return j;
}

/* Binds j as running since start_s, task t on node nodes[t] from GPU first[t]. */
static void run_on(fx *f, ts_job *j, double start_s, const int *nodes, const int *first)
{
    int n = (int)(j - f->jobs);
    for (int t = 0; t < j->ntasks; t++)
        sched_world_alloc(&f->allocs[n][t], &j->tasks[t], nodes[t], first[t]);
    j->allocs = f->allocs[n];
    j->start_s = start_s;
    j->last_ckpt_s = start_s;
    ts_err err;
    assert_int_equal(ts_sched_start(f->s, j, start_s, &err), 0);
}

static void cycle(fx *f, double now, ts_job *const *w, int nw, ts_job *const *r, int nr)
{
    ts_job wv[MAX_JOBS] = {0}, rv[MAX_JOBS] = {0};
    for (int i = 0; i < nw; i++)
        wv[i] = *w[i];
    for (int i = 0; i < nr; i++)
        rv[i] = *r[i];
    ts_err err;
    int rc = ts_sched_cycle(f->s, now, wv, nw, rv, nr, &f->d, &err);
    if (rc != 0)
        print_error("cycle: %s\n", err.msg);
    assert_int_equal(rc, 0);
}

static void elastic(ts_job *j, int min, int max, int step)
{
    j->elastic_min_gpus = min;
    j->elastic_max_gpus = max;
    j->elastic_step_gpus = step;
}

static void test_grows_into_free_gpus(void **state)
{
    fx *f = *state;
    ts_job *e = job(f, 1, 1);
    elastic(e, 1, 4, 0);
    run_on(f, e, LONG_AGO_S, (int[]){0}, (int[]){0});
    cycle(f, NOW_S, NULL, 0, &e, 1);
    assert_int_equal(f->d.nresizes, 1);
    assert_int_equal(f->d.resizes[0].job, 0);
    assert_int_equal(f->d.resizes[0].gpus, 4); /* linear: every GPU gains */
    assert_int_equal(f->d.resizes[0].from_gpus, 1);
    assert_false(f->d.resizes[0].reclaim);
    assert_int_equal(f->d.stats.grown, 1);
    /* a curve that gains nothing past 2 GPUs stops there */
    static const double FLAT[] = {0, 1, 1.9, 1.9, 1.9};
    e->elastic_speedup = FLAT;
    cycle(f, NOW_S, NULL, 0, &e, 1);
    assert_int_equal(f->d.nresizes, 1);
    assert_int_equal(f->d.resizes[0].gpus, 2);
}

static void test_minimum_runtime_first(void **state)
{
    fx *f = *state;
    ts_job *e = job(f, 1, 1);
    elastic(e, 1, 4, 0);
    run_on(f, e, NOW_S - 10.0, (int[]){0}, (int[]){0});
    cycle(f, NOW_S, NULL, 0, &e, 1);
    assert_int_equal(f->d.nresizes, 0);
    /* a stopping job is left alone, and so is every job when cost < 0 */
    e->start_s = LONG_AGO_S;
    e->stopping = true;
    cycle(f, NOW_S, NULL, 0, &e, 1);
    assert_int_equal(f->d.nresizes, 0);
}

/* Rebuilds the scheduler with f->cfg. */
static void remake(fx *f)
{
    ts_err err;
    ts_sched_free(f->s);
    assert_int_equal(ts_sched_new(f->c, f->q, &f->cfg, &f->s, &err), 0);
}

static void test_waiting_work_takes_extras_back(void **state)
{
    fx *f = *state;
    f->cfg.guarantee_moves = false; /* else g is moved for w: the extras alone are asked */
    remake(f);
    ts_job *e = job(f, 1, 4), *g = job(f, 1, 1);
    elastic(e, 1, 4, 0);
    elastic(g, 1, 4, 0);
    run_on(f, e, LONG_AGO_S, (int[]){0}, (int[]){0});
    run_on(f, g, LONG_AGO_S, (int[]){1}, (int[]){0});
    /* 3 GPUs free on n1; a 6-GPU gang of 2 x 3 waits: 3 of e's extras go */
    ts_job *w = job(f, 2, 3);
    ts_job *run[] = {e, g};
    cycle(f, NOW_S, &w, 1, run, 2);
    assert_int_equal(f->d.nstarts, 0);
    if (getenv("TS_TEST_VERBOSE"))
        print_message("w: %s: %s\n", ts_pending_name(f->d.pending[0].reason), f->d.pending[0].why);
    assert_int_equal(f->d.npreempts, 0);
    assert_int_equal(f->d.nresizes, 1);
    assert_int_equal(f->d.resizes[0].job, 0);
    assert_int_equal(f->d.resizes[0].gpus, 1);
    assert_true(f->d.resizes[0].reclaim);
    assert_int_equal(f->d.stats.shrunk, 1);
    assert_int_equal(f->d.stats.grown, 0); /* g does not grow while w waits */
}

/* The order: extras before victims. e holds n0 (1 GPU its minimum,
 * 3 extras), a rigid opportunistic job r holds n1 (a victim the guaranteed
 * waiting job may reclaim). A rigid 3-GPU job takes e's extras and stops
 * nobody; a 4-GPU one, which the extras do not cover, preempts r and takes
 * no extras besides. */
static void test_extras_go_before_victims(void **state)
{
    fx *f = *state;
    ts_job *e = job(f, 1, 4), *r = job(f, 1, 4);
    elastic(e, 1, 4, 0);
    r->tier = TS_TIER_OPPORTUNISTIC;
    run_on(f, e, LONG_AGO_S, (int[]){0}, (int[]){0});
    run_on(f, r, LONG_AGO_S, (int[]){1}, (int[]){0});
    ts_job *run[] = {e, r};
    ts_job *w = job(f, 1, 3);
    cycle(f, NOW_S, &w, 1, run, 2);
    if (getenv("TS_TEST_VERBOSE"))
        print_message("w: %s: %s\n", ts_pending_name(f->d.pending[0].reason), f->d.pending[0].why);
    assert_int_equal(f->d.nstarts, 0);
    assert_int_equal(f->d.npreempts, 0);
    assert_int_equal(f->d.nresizes, 1);
    assert_int_equal(f->d.resizes[0].job, 0);
    assert_int_equal(f->d.resizes[0].gpus, 1);
    assert_true(f->d.resizes[0].reclaim);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_CAPACITY);
    assert_non_null(strstr(f->d.pending[0].why, "taken back"));
    /* the same rule seen from the other side: 4 GPUs are more than the extras */
    ts_job *w4 = job(f, 1, 4);
    cycle(f, NOW_S, &w4, 1, run, 2);
    assert_int_equal(f->d.npreempts, 1);
    assert_int_equal(f->d.preempts[0].victim, 1);
    assert_int_equal(f->d.nresizes, 0);
}

static void test_gang_grows_by_tasks(void **state)
{
    fx *f = *state;
    ts_job *e = job(f, 1, 2); /* a gang of 2-GPU tasks at its minimum of one */
    elastic(e, 2, 6, 2);
    run_on(f, e, LONG_AGO_S, (int[]){0}, (int[]){0});
    cycle(f, NOW_S, NULL, 0, &e, 1);
    assert_int_equal(f->d.nresizes, 1);
    assert_int_equal(f->d.resizes[0].gpus, 6);
    assert_int_equal((f->d.resizes[0].gpus - 2) % 2, 0);
    /* a rigid job beside it changes nothing */
    ts_job *r = job(f, 1, 1);
    run_on(f, r, LONG_AGO_S, (int[]){1}, (int[]){2});
    ts_job *run[] = {r, e};
    cycle(f, NOW_S, NULL, 0, run, 2);
    assert_int_equal(f->d.nresizes, 1);
    assert_int_equal(f->d.resizes[0].job, 1);
    assert_int_equal(f->d.resizes[0].gpus, 6);
}

static void test_cost_below_zero_turns_it_off(void **state)
{
    fx *f = *state;
    f->cfg.elastic_resize_cost_s = -1.0;
    remake(f);
    ts_job *e = job(f, 1, 1);
    elastic(e, 1, 4, 0);
    run_on(f, e, LONG_AGO_S, (int[]){0}, (int[]){0});
    cycle(f, NOW_S, NULL, 0, &e, 1);
    assert_int_equal(f->d.nresizes, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_grows_into_free_gpus, setup, teardown),
        cmocka_unit_test_setup_teardown(test_minimum_runtime_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_waiting_work_takes_extras_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extras_go_before_victims, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_grows_by_tasks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cost_below_zero_turns_it_off, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
