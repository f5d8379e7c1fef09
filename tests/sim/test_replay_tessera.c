/*
 * test_replay_tessera.c - the `tessera` replay policy (replay_tessera.c).
 *
 * Hand-worked decisions on one node of 4 GPUs, fed views directly (the
 * policy keeps attained service between calls, so each test is a short
 * sequence of rounds): demotion to level 1 at exactly 8 GPU-hours and a
 * newcomer then taking the GPUs; the minimum runtime that keeps a job just
 * restarted from being preempted again (the thrash limit); holders before
 * waiters of the same level; least attained first among waiters; backfill of
 * a small job past one that does not fit. Then through the engine: decisions
 * do not change when durations change (only arrivals and GPU counts are
 * read) up to the first completion, and a replay is deterministic. The
 * hand-fed views carry work_left_s = NULL and jobs whose work_s is NaN, so
 * a policy that read either would crash or misorder there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/replay.h"

#define GPUS 4
#define MAX_JOBS 64

static ts_replay_job job(const char *name, double submit, int gpus, double work)
{
    ts_replay_job j;
    memset(&j, 0, sizeof j);
    snprintf(j.name, sizeof j.name, "%s", name);
    j.submit_s = submit;
    j.gpus = gpus;
    j.work_s = work;
    return j;
}

/* A policy fed by hand: jobs[] fixed, one decide per call. */
typedef struct driver {
    const ts_replay_policy_ops *ops;
    void *state;
    const ts_replay_job *jobs;
    int njobs;
    bool holding[MAX_JOBS];
    double since_s;
} driver;

static void driver_init(driver *d, const ts_replay_job *jobs, int n)
{
    memset(d, 0, sizeof *d);
    d->ops = ts_replay_policy_find("tessera");
    assert_non_null(d->ops);
    assert_true(d->ops->preemptive);
    d->jobs = jobs;
    d->njobs = n;
    ts_err err = {0};
    assert_int_equal(d->ops->init(&d->state, n, 0, &err), 0);
}

/* Decides at now over the jobs listed in pending (a -1-terminated list of
 * indices), with no oracle knowledge; run[] gets the answer and the holding
 * set becomes what the engine would make of it. */
static void decide_at(driver *d, double now, const int *pending, bool *run)
{
    int idx[MAX_JOBS], n = 0;
    for (int i = 0; pending[i] >= 0; i++)
        idx[n++] = pending[i];
    memset(run, 0, sizeof(bool) * MAX_JOBS);
    ts_replay_view v = {.now_s = now, .since_s = d->since_s, .jobs = d->jobs,
                        .njobs = d->njobs, .pending = idx, .npending = n,
                        .holding = d->holding, .work_left_s = NULL, .total_gpus = GPUS};
    d->ops->decide(d->state, &v, run);
    int used = 0;
    for (int i = 0; i < n; i++)
        used += run[idx[i]] ? d->jobs[idx[i]].gpus : 0;
    assert_true(used <= GPUS);
    for (int j = 0; j < d->njobs; j++)
        d->holding[j] = run[j];
    d->since_s = now;
}

/* A (4 GPUs) runs alone from 60; at 7,260 it has held 7,200 s x 4 = 28,800
 * GPU-s = 8 GPU-h: level 1, so B (4 GPUs, level 0) takes the node. B ends;
 * A restarts at 7,380. C (4 GPUs, level 0) arrives: at 7,440 A has run 60 s
 * of its new hold (< 120 s) and keeps the node; at 7,500 (120 s) it yields. */
static void test_demotion_then_thrash_limit(void **state)
{
    (void)state;
    ts_replay_job jobs[] = {job("A", 0, 4, NAN), job("B", 7000, 4, NAN), job("C", 7400, 4, NAN)};
    driver d;
    bool run[MAX_JOBS];
    driver_init(&d, jobs, 3);
    decide_at(&d, 60, (int[]){0, -1}, run);
    assert_true(run[0]);
    decide_at(&d, 7200, (int[]){0, 1, -1}, run); /* 28,560 GPU-s: still level 0 */
    assert_true(run[0]);
    assert_false(run[1]);
    decide_at(&d, 7260, (int[]){0, 1, -1}, run); /* 28,800: level 1 */
    assert_false(run[0]);
    assert_true(run[1]);
    decide_at(&d, 7320, (int[]){0, 1, -1}, run); /* B holds, level 0 */
    assert_true(run[1]);
    decide_at(&d, 7380, (int[]){0, -1}, run);    /* B done: A restarts */
    assert_true(run[0]);
    decide_at(&d, 7440, (int[]){0, 2, -1}, run); /* A pinned: 60 s into its hold */
    assert_true(run[0]);
    assert_false(run[2]);
    decide_at(&d, 7500, (int[]){0, 2, -1}, run); /* 120 s: level 1 yields to C */
    assert_false(run[0]);
    assert_true(run[2]);
    d.ops->free(d.state);
}

/* Same level: the holder keeps its GPUs even though the waiter came first
 * and has less service, so equals never swap (each swap is a restart). */
static void test_holder_before_waiter_of_same_level(void **state)
{
    (void)state;
    ts_replay_job jobs[] = {job("A", 0, 4, NAN), job("B", 0, 4, NAN)};
    driver d;
    bool run[MAX_JOBS];
    driver_init(&d, jobs, 2);
    decide_at(&d, 60, (int[]){0, 1, -1}, run); /* neither holds: arrival order */
    assert_true(run[0]);
    assert_false(run[1]);
    for (double t = 120; t <= 3600; t += 60) {
        decide_at(&d, t, (int[]){0, 1, -1}, run);
        assert_true(run[0]);
        assert_false(run[1]);
    }
    d.ops->free(d.state);
}

/* Two waiters of one level: the one with less attained service goes first,
 * whatever the arrival order. A and B (3 GPUs each, 4 on the node) take
 * turns: A to 8 GPU-h, then B to 8 GPU-h and a round beyond; once neither
 * holds, A (less service) comes before B (earlier arrival does not matter:
 * B is job 1 either way, so the tie-break would have picked A too only by
 * index; here service decides as A's 28,800 < B's 28,980). */
static void test_least_attained_first_among_waiters(void **state)
{
    (void)state;
    ts_replay_job jobs[] = {job("A", 0, 3, NAN), job("B", 0, 3, NAN)};
    driver d;
    bool run[MAX_JOBS];
    driver_init(&d, jobs, 2);
    decide_at(&d, 60, (int[]){0, 1, -1}, run);
    assert_true(run[0]); /* 3 + 3 > 4: A by arrival */
    assert_false(run[1]);
    /* A runs until 9,660: 3 x 9,600 = 28,800 GPU-s, level 1; B (level 0)
     * takes over and runs until 19,260: 3 x 9,600 = 28,800, level 1 too. */
    decide_at(&d, 9660, (int[]){0, 1, -1}, run);
    assert_false(run[0]);
    assert_true(run[1]);
    decide_at(&d, 19260, (int[]){0, 1, -1}, run);
    assert_true(run[1]); /* same level: the holder stays */
    assert_false(run[0]);
    /* B runs on to 19,320 (28,980 GPU-s > A's 28,800). Now both wait: the
     * holding set is cleared by hand, as if B had been preempted. */
    decide_at(&d, 19320, (int[]){0, 1, -1}, run);
    d.holding[1] = false;
    decide_at(&d, 19380, (int[]){0, 1, -1}, run);
    assert_true(run[0]); /* A: 28,800 < B's 28,980 */
    assert_false(run[1]);
    d.ops->free(d.state);
}

/* Backfill: A (4 GPUs, level 0) cannot start beside B (1 GPU, running,
 * pinned); C (2 GPUs) arrives after A and fills the idle GPUs. */
static void test_backfill_small_job(void **state)
{
    (void)state;
    ts_replay_job jobs[] = {job("B", 0, 1, NAN), job("A", 30, 4, NAN), job("C", 40, 2, NAN)};
    driver d;
    bool run[MAX_JOBS];
    driver_init(&d, jobs, 3);
    decide_at(&d, 60, (int[]){0, 1, 2, -1}, run);
    /* all level 0, none holding: arrival order B (1), A (4: only 3 left, skipped), C (2) */
    assert_true(run[0]);
    assert_false(run[1]);
    assert_true(run[2]);
    d.ops->free(d.state);
}

/* ---- through the engine ------------------------------------------------- */

/* A wrapper policy that logs every decision (time and chosen set). */
#define LOG_MAX 4096
static struct {
    double t[LOG_MAX];
    unsigned long long chosen[LOG_MAX]; /* bit j: job j runs (<= 64 jobs) */
    int n;
    bool saw_oracle;
} g_log;

static int rec_init(void **st, int njobs, int ntenants, ts_err *err)
{
    return ts_replay_tessera_ops.init(st, njobs, ntenants, err);
}

static void rec_decide(void *st, const ts_replay_view *v, bool *run)
{
    ts_replay_tessera_ops.decide(st, v, run);
    if (g_log.n < LOG_MAX) {
        unsigned long long m = 0;
        for (int i = 0; i < v->npending; i++)
            if (run[v->pending[i]])
                m |= 1ULL << v->pending[i];
        g_log.t[g_log.n] = v->now_s;
        g_log.chosen[g_log.n++] = m;
    }
}

static void rec_free(void *st)
{
    ts_replay_tessera_ops.free(st);
}

static const ts_replay_policy_ops rec_ops = {"tessera-rec", true, rec_init, rec_decide, NULL,
                                             rec_free};

static unsigned rng_next(unsigned *x)
{
    *x = *x * 1103515245u + 12345u;
    return (*x >> 8) & 0xffffff;
}

static int make_workload(ts_replay_job *jobs, int n, unsigned seed, double work_scale)
{
    static const int shapes[] = {1, 1, 2, 4, 6, 8};
    unsigned x = seed;
    double t = 0;
    for (int j = 0; j < n; j++) {
        t += rng_next(&x) % 400;
        int g = shapes[rng_next(&x) % 6];
        double w = 100 + (double)(rng_next(&x) % 20000);
        char nm[16];
        snprintf(nm, sizeof nm, "j%d", j);
        jobs[j] = job(nm, t, g, w * work_scale);
    }
    return n;
}

/* Only arrivals and GPU counts are read: the same workload with every
 * duration scaled gets the same decisions until the first completion of
 * either run (the first moment the two inputs differ for the engine). */
static void test_no_durations_read(void **state)
{
    (void)state;
    enum { N = 40 };
    ts_replay_config cfg = {.nodes = 2, .gpus_per_node = 8, .round_s = 60,
                            .restart_cost_s = 30};
    for (int k = 0; k < 2; k++) {
        ts_replay_job a[N], b[N];
        make_workload(a, N, 7u + (unsigned)k, 1.0);
        make_workload(b, N, 7u + (unsigned)k, 3.0);
        ts_replay_outcome oa[N], ob[N];
        ts_replay_result ra, rb;
        ts_err err = {0};
        memset(&g_log, 0, sizeof g_log);
        assert_int_equal(ts_replay_run(&cfg, &rec_ops, a, N, oa, &ra, &err), 0);
        double ta[LOG_MAX];
        unsigned long long ca[LOG_MAX];
        int na = g_log.n;
        memcpy(ta, g_log.t, sizeof ta);
        memcpy(ca, g_log.chosen, sizeof ca);
        memset(&g_log, 0, sizeof g_log);
        assert_int_equal(ts_replay_run(&cfg, &rec_ops, b, N, ob, &rb, &err), 0);
        double first = INFINITY;
        for (int j = 0; j < N; j++) {
            first = fmin(first, oa[j].finish_s);
            first = fmin(first, ob[j].finish_s);
        }
        int compared = 0;
        for (int i = 0; i < na && i < g_log.n && ta[i] < first; i++) {
            assert_true(ta[i] == g_log.t[i]);
            assert_true(ca[i] == g_log.chosen[i]);
            compared++;
        }
        assert_true(compared >= 3);
    }
}

static void test_deterministic(void **state)
{
    (void)state;
    enum { N = 60 };
    ts_replay_job jobs[N];
    make_workload(jobs, N, 42u, 1.0);
    ts_replay_config cfg = {.nodes = 2, .gpus_per_node = 4, .round_s = 60,
                            .restart_cost_s = 30};
    ts_replay_outcome o1[N], o2[N];
    ts_replay_result r1, r2;
    ts_err err = {0};
    const ts_replay_policy_ops *ops = ts_replay_policy_find("tessera");
    assert_int_equal(ts_replay_run(&cfg, ops, jobs, N, o1, &r1, &err), 0);
    assert_int_equal(ts_replay_run(&cfg, ops, jobs, N, o2, &r2, &err), 0);
    assert_memory_equal(o1, o2, sizeof o1);
    assert_memory_equal(&r1, &r2, sizeof r1);
    for (int j = 0; j < N; j++)
        assert_true(o1[j].finish_s >= jobs[j].submit_s + jobs[j].work_s);
    /* event-driven mode ends too */
    cfg.round_s = 0;
    assert_int_equal(ts_replay_run(&cfg, ops, jobs, N, o1, &r1, &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demotion_then_thrash_limit),
        cmocka_unit_test(test_holder_before_waiter_of_same_level),
        cmocka_unit_test(test_least_attained_first_among_waiters),
        cmocka_unit_test(test_backfill_small_job),
        cmocka_unit_test(test_no_durations_read),
        cmocka_unit_test(test_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
