/*
 * test_replay_shared.c - the `tessera` replay policy (the production cycle,
 * replay_core.c) on one cluster shared by tenants (ts_replay_run_tenants,
 * TS_REPLAY_SHARED).
 *
 * Its decisions do not depend on durations (a recording policy wrapped
 * around it sees the same runs when every job's work changes, up to the
 * first completion), and guarantees beyond the cluster are refused. How the
 * cycle chooses victims, honours minimum runtimes and lends idle GPUs is
 * worked by hand in tests/sched/test_cycle.c, on the cycle itself.
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

#include "replay/replay.h"

#define EPS 1e-9
#define MAX_JOBS 64

static ts_replay_job job(int tenant, double submit, int gpus, double work)
{
    ts_replay_job j;
    memset(&j, 0, sizeof j);
    snprintf(j.name, sizeof j.name, "t%d@%.0f/%d", tenant, submit, gpus);
    j.submit_s = submit;
    j.gpus = gpus;
    j.work_s = work;
    j.tenant = tenant;
    return j;
}

static ts_replay_config cluster(int nodes, int gpn)
{
    return (ts_replay_config){.nodes = nodes, .gpus_per_node = gpn, .round_s = 0,
                              .restart_cost_s = 0};
}

static unsigned rng_next(unsigned *x)
{
    *x = *x * 1103515245u + 12345u;
    return (*x >> 8) & 0xffffff;
}

/* n jobs over 3 tenants, arrivals every 0..199 s, 1-8 GPUs, durations scaled. */
static void make_workload(ts_replay_job *jobs, int n, unsigned seed, double scale)
{
    static const int shapes[] = {1, 1, 2, 4, 8};
    unsigned x = seed;
    double t = 0;
    for (int j = 0; j < n; j++) {
        t += rng_next(&x) % 200;
        int k = (int)(rng_next(&x) % 3), g = shapes[rng_next(&x) % 5];
        jobs[j] = job(k, t, g, (50 + (double)(rng_next(&x) % 5000)) * scale);
    }
}

/* Only arrivals, GPU counts, tenants and observed service are read: the
 * same workload with every duration tripled gets the same decisions until
 * the first completion of either run. */
typedef struct rec {
    double t[MAX_JOBS * 4];
    unsigned long long chosen[MAX_JOBS * 4];
    int n;
} rec;
static rec g_rec;

static int rec_init(void **st, int njobs, int ntenants, ts_err *err)
{
    return ts_replay_tessera_ops.init(st, njobs, ntenants, err);
}

static void rec_decide(void *st, const ts_replay_view *v, bool *run)
{
    ts_replay_tessera_ops.decide(st, v, run);
    if (g_rec.n < MAX_JOBS * 4) {
        unsigned long long m = 0;
        for (int i = 0; i < v->npending; i++)
            if (run[v->pending[i]])
                m |= 1ULL << v->pending[i];
        g_rec.t[g_rec.n] = v->now_s;
        g_rec.chosen[g_rec.n++] = m;
    }
}

static void rec_free(void *st)
{
    ts_replay_tessera_ops.free(st);
}

static const ts_replay_policy_ops rec_ops = {"tessera-rec", true, rec_init, rec_decide, NULL,
                                             rec_free, NULL, NULL, NULL, NULL};

static void test_no_durations_read(void **state)
{
    (void)state;
    ts_replay_tenant t[3] = {{"aa", 8}, {"bb", 4}, {"cc", 4}};
    ts_replay_config cfg = cluster(2, 8);
    cfg.tenants = t;
    cfg.ntenants = 3;
    ts_replay_job a[MAX_JOBS], b[MAX_JOBS];
    make_workload(a, MAX_JOBS, 11u, 1.0);
    make_workload(b, MAX_JOBS, 11u, 3.0);
    ts_replay_outcome oa[MAX_JOBS], ob[MAX_JOBS];
    ts_replay_result ra, rb;
    ts_err err = {0};
    memset(&g_rec, 0, sizeof g_rec);
    assert_int_equal(replay_run(&cfg, &rec_ops, a, MAX_JOBS, oa, &ra, &err), 0);
    rec first = g_rec;
    memset(&g_rec, 0, sizeof g_rec);
    assert_int_equal(replay_run(&cfg, &rec_ops, b, MAX_JOBS, ob, &rb, &err), 0);
    double done = INFINITY;
    for (int j = 0; j < MAX_JOBS; j++)
        done = fmin(done, fmin(oa[j].finish_s, ob[j].finish_s));
    int compared = 0;
    for (int i = 0; i < first.n && i < g_rec.n && first.t[i] < done; i++, compared++)
        assert_true(first.t[i] == g_rec.t[i] && first.chosen[i] == g_rec.chosen[i]);
    assert_true(compared >= 3);
}

static void test_guarantees_must_fit(void **state)
{
    (void)state;
    ts_replay_config cfg = cluster(1, 8);
    ts_replay_tenant t[2] = {{"aa", 8}, {"bb", 4}};
    ts_replay_job j = job(0, 0, 1, 10);
    ts_replay_outcome o;
    ts_replay_result r;
    ts_replay_tenant_result tr[2];
    ts_err err = {0};
    assert_int_equal(ts_replay_run_tenants(&cfg, &ts_replay_tessera_ops, TS_REPLAY_SHARED, &j, 1,
                                           t, 2, &o, &r, tr, NULL, NULL, &err),
                     TS_EINVAL);
    assert_non_null(strstr(err.msg, "guarantees add up to 12 GPUs"));
    j.tenant = 2;
    t[1].gpus = 0;
    assert_int_equal(ts_replay_run_tenants(&cfg, &ts_replay_tessera_ops, TS_REPLAY_SHARED, &j, 1,
                                           t, 2, &o, &r, tr, NULL, NULL, &err),
                     TS_EINVAL);
    assert_non_null(strstr(err.msg, ".tenant: must be 0..1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_durations_read),
        cmocka_unit_test(test_guarantees_must_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
