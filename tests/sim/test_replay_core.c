/*
 * test_replay_core.c - the `core` replay policy: the production scheduling
 * cycle (tessera/cycle.h) deciding a replay (replay_core.c).
 *
 * Worked by hand on 2 nodes x 4 GPUs, event-driven, no restart cost: an idle
 * tenant's GPUs are borrowed and taken back by preemption when its own job
 * arrives within its guarantee, in the same decision (the replay has no
 * grace), a young loan too (a loan has no minimum run against its lender);
 * a gang larger than a node spans two; then on random tenanted workloads every job
 * finishes and the same input gives the same output.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "replay/replay.h"
#include "tessera/rng.h"

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

static const ts_replay_tenant TENANTS[2] = {{"a", 4}, {"b", 4}};

static void run(const ts_replay_job *jobs, int n, ts_replay_outcome *o, ts_replay_result *r)
{
    ts_replay_config cfg = {.nodes = 2, .gpus_per_node = 4};
    ts_replay_tenant_result tr[2];
    ts_replay_fairness fair;
    ts_err err = {0};
    if (ts_replay_run_tenants(&cfg, &ts_replay_core_ops, TS_REPLAY_SHARED, jobs, n, TENANTS, 2, o,
                              r, tr, &fair, NULL, &err) != 0)
        fail_msg("%s", err.msg);
}

static void test_borrow_then_reclaim(void **state)
{
    (void)state;
    /* a borrows all 8 GPUs with two 4-GPU jobs; b's 4-GPU job at 700 (past
     * the minimum run) takes 4 back at once, the victim resumes after it */
    ts_replay_job jobs[] = {job(0, 0, 4, 1000), job(0, 0, 4, 1000), job(1, 700, 4, 100)};
    ts_replay_outcome o[3];
    ts_replay_result r;
    run(jobs, 3, o, &r);
    assert_int_equal(r.preemptions, 1);
    assert_int_equal(r.moves + r.time_shares, 0); /* a reclaim */
    assert_true(o[2].queue_s <= 1e-9); /* started in the decision it arrived at */
    assert_true(o[0].preemptions + o[1].preemptions == 1);
}

/* By default a tenant's fresh job splits its first level: a's 4-GPU job at
 * 300 s time-shares one of a's own two jobs (1,200 GPU-s each, past the
 * 120-GPU-s step and the split's minute), and the replay counts it so. The
 * victim is the loan (job 1, opportunistic): had it been job 0, job 0,
 * guaranteed, would have taken job 1's room back in the same decision, two
 * stops for one (a restart the replay counts as a preemption). */
static void test_time_sharing_counted(void **state)
{
    (void)state;
    ts_replay_job jobs[] = {job(0, 0, 4, 1000), job(0, 0, 4, 1000), job(0, 300, 4, 100)};
    ts_replay_outcome o[3];
    ts_replay_result r;
    run(jobs, 3, o, &r);
    assert_int_equal(r.preemptions, 1);
    assert_int_equal(r.time_shares, 1);
    assert_int_equal(r.moves, 0);
    assert_int_equal(o[1].preemptions, 1);
    assert_int_equal(o[0].starts, 1);
    assert_true(o[2].queue_s <= 1e-9);
}

static void test_gang_spans_nodes(void **state)
{
    (void)state;
    ts_replay_job jobs[] = {job(0, 0, 8, 100), job(1, 70, 2, 50)};
    ts_replay_outcome o[2];
    ts_replay_result r;
    run(jobs, 2, o, &r);
    assert_int_equal(r.gang_jobs, 1); /* 8 GPUs on 4-GPU nodes: a gang */
    assert_true(r.avg_gang_wait_s == o[0].queue_s);
    /* b's job within its guarantee takes its GPUs back at once, 70 s into
     * the gang's run (past reclaim_min_runtime, 60 s): the whole gang goes
     * and runs again after it */
    assert_int_equal(o[0].preemptions, 1);
    assert_true(o[1].queue_s <= 1e-9);
    assert_true(o[0].finish_s > o[1].finish_s);
}

static void test_random_workloads_finish_deterministically(void **state)
{
    (void)state;
    enum { N = 60 };
    ts_rng rng;
    ts_rng_seed(&rng, 11);
    ts_replay_job jobs[N];
    double t = 0;
    for (int i = 0; i < N; i++) {
        t += (double)ts_rng_below(&rng, 120);
        int g = 1 << ts_rng_below(&rng, 4); /* 1, 2, 4, 8 */
        jobs[i] = job((int)ts_rng_below(&rng, 2), t, g, 30.0 + (double)ts_rng_below(&rng, 900));
    }
    ts_replay_outcome o1[N], o2[N];
    ts_replay_result r1, r2;
    run(jobs, N, o1, &r1);
    run(jobs, N, o2, &r2);
    assert_int_equal(r1.jobs, N);
    for (int i = 0; i < N; i++) {
        assert_true(o1[i].finish_s >= jobs[i].submit_s + jobs[i].work_s - 1e-6);
        assert_true(o1[i].finish_s == o2[i].finish_s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_borrow_then_reclaim),
        cmocka_unit_test(test_time_sharing_counted),
        cmocka_unit_test(test_gang_spans_nodes),
        cmocka_unit_test(test_random_workloads_finish_deterministically),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
