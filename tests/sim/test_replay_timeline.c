/*
 * test_replay_timeline.c - what a replay looked like over time
 * (replay_timeline.c): the weighted water-fill that defines a tenant's fair
 * share, the deficit below guarantee that counts only while the tenant's
 * smallest waiting job fits in its unused guarantee (fifo's head-of-line
 * blocking leaves one, sjf and srtf none), share against guarantee and held
 * against fair share on a replay worked by hand, and the time series, both
 * one point per event time and resampled into time-weighted buckets.
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

static ts_replay_job job(int tenant, double submit, int gpus, double work)
{
    ts_replay_job j;
    memset(&j, 0, sizeof j);
    snprintf(j.name, sizeof j.name, "t%d@%.0f", tenant, submit);
    j.submit_s = submit;
    j.gpus = gpus;
    j.work_s = work;
    j.tenant = tenant;
    return j;
}

/* 10 GPUs, demands 2 / 10 / 10, weights 1 / 1 / 2: the level 10 / 4 = 2.5
 * satisfies the first (2); 8 left over weights 3: 8/3 and 16/3. Weight 0
 * shares only what the others leave: demands 4 / 3 / 5, weights 1 / 0 / 0:
 * 4, then 6 split max-min: 3 and 3. Enough for all: everyone's demand. */
static void test_water_fill(void **state)
{
    (void)state;
    double share[3];
    replay_water_fill(10, (double[]){2, 10, 10}, (double[]){1, 1, 2}, 3, share);
    assert_true(fabs(share[0] - 2) < EPS);
    assert_true(fabs(share[1] - 8.0 / 3) < EPS);
    assert_true(fabs(share[2] - 16.0 / 3) < EPS);
    replay_water_fill(10, (double[]){4, 3, 5}, (double[]){1, 0, 0}, 3, share);
    assert_true(fabs(share[0] - 4) < EPS && fabs(share[1] - 3) < EPS && fabs(share[2] - 3) < EPS);
    replay_water_fill(100, (double[]){4, 0, 5}, (double[]){1, 1, 1}, 3, share);
    assert_true(share[0] == 4 && share[1] == 0 && share[2] == 5);
    /* weights, not demands, decide under contention: 12 GPUs, 6:2 */
    replay_water_fill(12, (double[]){20, 20}, (double[]){6, 2}, 2, share);
    assert_true(fabs(share[0] - 9) < EPS && fabs(share[1] - 3) < EPS);
}

static void siloed(const char *policy, const ts_replay_job *jobs, int n,
                   const ts_replay_tenant *t, int nt, ts_replay_outcome *o,
                   ts_replay_tenant_result *tr, ts_replay_fairness *fair, ts_replay_log *log)
{
    ts_replay_config cfg = {.nodes = 2, .gpus_per_node = 8};
    ts_replay_result r;
    ts_err err = {0};
    if (ts_replay_run_tenants(&cfg, ts_replay_policy_find(policy), TS_REPLAY_SILOED, jobs, n, t,
                              nt, o, &r, tr, fair, log, &err) != 0)
        fail_msg("%s", err.msg);
}

/* Tenant aa, 8 GPUs: A 6 GPUs at 0 for 100 s, B 4 GPUs at 1 for 100 s, C 2
 * GPUs at 2 for 50 s. fifo: B cannot start and blocks C until 100 although C
 * fits in the 2 GPUs aa is not using: deficit min(8, 12) - 6 = 2 GPUs over
 * [2, 100) = 196 GPU-s. Over [1, 2) only B (4) waits, which does not fit in
 * 2: no deficit then. sjf starts C at 2: none. Shares: aa held 600 + 400 +
 * 100 (fifo: A 0..100, B 100..200, C 100..150) = 1,100 GPU-s; entitled
 * min(8, demand): 6 x 1 + 8 x 99 + 6 x 50 + 4 x 50 = 1,298 (the 198 short
 * are the deficit and the second when nothing fitted); bb (8 GPUs, idle)
 * has no demand: share 0 and out of Jain's index. */
static void test_deficit_only_while_a_job_fits(void **state)
{
    (void)state;
    ts_replay_tenant t[2] = {{"aa", 8}, {"bb", 8}};
    ts_replay_job jobs[3] = {job(0, 0, 6, 100), job(0, 1, 4, 100), job(0, 2, 2, 50)};
    ts_replay_outcome o[3];
    ts_replay_tenant_result tr[2];
    ts_replay_fairness fair;
    siloed("fifo", jobs, 3, t, 2, o, tr, &fair, NULL);
    assert_true(o[2].finish_s == 150 && o[1].finish_s == 200);
    assert_true(tr[0].deficit_gpu_s == 196);
    assert_true(fair.deficit_gpu_s == 196);
    assert_true(tr[0].held_gpu_s == 1100);
    assert_true(tr[0].entitled_gpu_s == 6 + 8 * 99 + 6 * 50 + 4 * 50);
    assert_true(fabs(tr[0].share_vs_guarantee - 1100.0 / 1298) < EPS);
    assert_true(tr[1].held_gpu_s == 0 && tr[1].share_vs_guarantee == 0 && tr[1].fair_ratio == 0);
    /* fair share: the whole 16-GPU cluster is aa's when bb wants nothing,
     * so aa's fair share is its demand: 6 + 10 x 1 + 12 x 98 + 6 x 50 + 4 x 50 */
    assert_true(tr[0].fair_gpu_s == 6 + 10 + 12 * 98 + 6 * 50 + 4 * 50);
    assert_true(fabs(fair.jain - 1) < EPS); /* one tenant with demand */
    siloed("sjf", jobs, 3, t, 2, o, tr, &fair, NULL);
    assert_true(o[2].finish_s == 52);
    assert_true(tr[0].deficit_gpu_s == 0);
    siloed("srtf", jobs, 3, t, 2, o, tr, &fair, NULL);
    assert_true(tr[0].deficit_gpu_s == 0);
}

/* Two tenants, siloed, one 8-GPU partition each on a 16-GPU cluster: aa has
 * two 8-GPU jobs at 0 (100 s each), bb one 1-GPU job at 0 for 200 s. aa's
 * second waits 100 s although 7 GPUs sit idle in bb's partition. Fair share
 * over [0, 100): demands 16 and 1, weights 8 and 8: bb 1, aa 15; then aa 8,
 * bb 1 until 200. aa held 1,600 of a fair 2,300; bb 200 of 200. Jain over
 * 16/23 and 1. aa got all it was entitled to (min(8, 16) = 8): share 1. */
static void test_fair_ratio_and_jain(void **state)
{
    (void)state;
    ts_replay_tenant t[2] = {{"aa", 8}, {"bb", 8}};
    ts_replay_job jobs[3] = {job(0, 0, 8, 100), job(0, 0, 8, 100), job(1, 0, 1, 200)};
    ts_replay_outcome o[3];
    ts_replay_tenant_result tr[2];
    ts_replay_fairness fair;
    ts_replay_log log = {0};
    siloed("fifo", jobs, 3, t, 2, o, tr, &fair, &log);
    assert_true(tr[0].held_gpu_s == 1600 && tr[0].fair_gpu_s == 1500 + 800);
    assert_true(tr[1].held_gpu_s == 200 && tr[1].fair_gpu_s == 200);
    assert_true(tr[0].share_vs_guarantee == 1);
    double x[2] = {1600.0 / 2300, 1};
    assert_true(fabs(fair.jain - replay_jain(x, 2)) < EPS);
    assert_true(fair.jain < 0.97);
    /* the log has every hold, job indices into the full list */
    assert_int_equal(log.n, 3);
    int seen = 0;
    for (int i = 0; i < log.n; i++) {
        seen |= 1 << log.holds[i].job;
        assert_true(log.holds[i].done);
    }
    assert_int_equal(seen, 7);
    /* the same figures from the log alone */
    ts_replay_tenant_result again[2];
    ts_err err = {0};
    assert_int_equal(replay_tenant_metrics(jobs, 3, o, &log, t, 2, 16, again, NULL, &err), 0);
    assert_memory_equal(again, tr, sizeof tr);
    ts_replay_log_free(&log);
}

/* One node of 4 GPUs, fifo: A (2 GPUs, 100 s) at 0; B (4 GPUs, 10 s) at 50
 * waits until 100. Event times 0, 50, 100, 110: three points (busy 2, queue
 * 0), (2, 1), (4, 0), ending at 110. Two buckets of 55 s: busy 2 and
 * (45 x 2 + 10 x 4) / 55; queue 5 / 55 and 45 / 55. */
static void test_series_points_and_buckets(void **state)
{
    (void)state;
    ts_replay_config cfg = {.nodes = 1, .gpus_per_node = 4};
    ts_replay_job jobs[2] = {job(0, 0, 2, 100), job(0, 50, 4, 10)};
    ts_replay_outcome o[2];
    ts_replay_result r;
    ts_replay_log log = {0};
    ts_err err = {0};
    assert_int_equal(ts_replay_run_logged(&cfg, ts_replay_policy_find("fifo"), jobs, 2, o, &r,
                                          &log, &err),
                     0);
    ts_replay_series *s = NULL;
    assert_int_equal(ts_replay_series_build(jobs, 2, o, &log, 0, 4, 100, &s, &err), 0);
    assert_int_equal(s->npoints, 3);
    assert_true(s->end_s == 110 && s->total_gpus == 4 && s->ntenants == 0);
    double t[3] = {0, 50, 100}, busy[3] = {2, 2, 4}, queue[3] = {0, 1, 0};
    for (int i = 0; i < 3; i++)
        assert_true(s->t_s[i] == t[i] && s->busy_gpus[i] == busy[i] &&
                    s->queue_jobs[i] == queue[i]);
    ts_replay_series_free(s);
    assert_int_equal(ts_replay_series_build(jobs, 2, o, &log, 0, 4, 2, &s, &err), 0);
    assert_int_equal(s->npoints, 2);
    assert_true(s->t_s[0] == 0 && s->t_s[1] == 55);
    assert_true(fabs(s->busy_gpus[0] - 2) < EPS);
    assert_true(fabs(s->busy_gpus[1] - 130.0 / 55) < EPS);
    assert_true(fabs(s->queue_jobs[0] - 5.0 / 55) < EPS);
    assert_true(fabs(s->queue_jobs[1] - 45.0 / 55) < EPS);
    ts_replay_series_free(s);
    /* per tenant: both jobs are tenant 1 of 2 */
    jobs[0].tenant = jobs[1].tenant = 1;
    assert_int_equal(ts_replay_series_build(jobs, 2, o, &log, 2, 4, 100, &s, &err), 0);
    assert_true(s->held[0 * 2 + 0] == 0 && s->held[0 * 2 + 1] == 2 && s->held[2 * 2 + 1] == 4);
    ts_replay_series_free(s);
    assert_int_equal(ts_replay_series_build(jobs, 2, o, &log, 0, 4, 0, &s, &err), TS_EINVAL);
    ts_replay_log_free(&log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_water_fill),
        cmocka_unit_test(test_deficit_only_while_a_job_fits),
        cmocka_unit_test(test_fair_ratio_and_jain),
        cmocka_unit_test(test_series_points_and_buckets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
