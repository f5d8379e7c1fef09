/*
 * test_replay_shared.c - the tessera policy on one cluster shared by tenants
 * (replay_tessera.c, ts_replay_run_shared).
 *
 * Worked by hand, event-driven with no restart cost: an idle tenant's GPUs
 * are lent and taken back by preemption the moment it has a job that fits
 * its guarantee (its job never waits, the borrower resumes later); victims
 * come from the tenant most over its guarantee, and within it one that
 * keeps the tenant at its guarantee, then one past its minimum run, then
 * the one that loses least since its last checkpoint (which --checkpoint-s
 * changes);
 * idle GPUs go to the tenant with the lowest held / guarantee first. Then on
 * random tenanted workloads: no tenant is ever below its guarantee while a
 * job of its fits there (deficit exactly 0), decisions do not depend on
 * durations, and the same input gives the same output. Guarantees beyond
 * the cluster are refused.
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

static void shared(const ts_replay_config *cfg, const ts_replay_job *jobs, int n,
                   const ts_replay_tenant *t, int nt, ts_replay_outcome *o, ts_replay_result *r,
                   ts_replay_tenant_result *tr, ts_replay_fairness *fair)
{
    ts_err err = {0};
    if (ts_replay_run_shared(cfg, &ts_replay_tessera_ops, jobs, n, t, nt, o, r, tr, fair, NULL,
                             &err) != 0)
        fail_msg("%s", err.msg);
}

/* 8 GPUs, aa and bb guaranteed 4 each. bb runs two 4-GPU jobs from 0 (1,000
 * s each): one in its guarantee, one on aa's idle GPUs. aa's 2-GPU job
 * (50 s) arrives at 100: it fits aa's guarantee, so bb's borrowed job is
 * preempted at once (100 s done) and aa's runs 100..150. bb's job cannot
 * come back on the 2 GPUs left; at 150 it resumes with 900 s to go: done
 * 1,050. aa never waited (deficit 0). bb held 8,000 GPU-s against an
 * entitlement of min(4, demand): 4 x 1,000 + 4 x 50 = 4,200. Fair share
 * over [100, 150): aa 2, bb 6 (of its 8): bb 8,100 in all. */
static void test_borrow_then_reclaim(void **state)
{
    (void)state;
    ts_replay_config cfg = cluster(2, 4);
    ts_replay_tenant t[2] = {{"aa", 4}, {"bb", 4}};
    ts_replay_job jobs[3] = {job(1, 0, 4, 1000), job(1, 0, 4, 1000), job(0, 100, 2, 50)};
    ts_replay_outcome o[3];
    ts_replay_result r;
    ts_replay_tenant_result tr[2];
    ts_replay_fairness fair;
    shared(&cfg, jobs, 3, t, 2, o, &r, tr, &fair);
    assert_true(o[2].queue_s == 0 && o[2].finish_s == 150);
    assert_true(o[0].finish_s == 1000 && o[0].preemptions == 0);
    assert_int_equal(o[1].preemptions, 1);
    assert_true(o[1].finish_s == 1050 && o[1].queue_s == 50);
    assert_int_equal(r.preemptions, 1);
    assert_true(tr[0].deficit_gpu_s == 0 && tr[1].deficit_gpu_s == 0 && fair.deficit_gpu_s == 0);
    assert_true(tr[0].held_gpu_s == 100 && tr[0].entitled_gpu_s == 100);
    assert_true(tr[0].share_vs_guarantee == 1);
    assert_true(tr[1].held_gpu_s == 8000 && tr[1].entitled_gpu_s == 4200);
    assert_true(fabs(tr[1].share_vs_guarantee - 8000.0 / 4200) < EPS);
    assert_true(tr[1].fair_gpu_s == 8100);
    double x[2] = {1, 8000.0 / 8100};
    assert_true(fabs(fair.jain - ts_replay_jain(x, 2)) < EPS);

    /* siloed, bb's second job waits for its first: 1,000 -> 2,000 */
    ts_err err = {0};
    assert_int_equal(ts_replay_run_siloed(&cfg, ts_replay_policy_find("srtf"), jobs, 3, t, 2, o,
                                          &r, tr, &fair, NULL, &err),
                     0);
    assert_true(o[1].finish_s == 2000);
}

/* 16 GPUs: aa 8, bb 4, cc 4 guaranteed. At 0 bb runs 4 + 4 + 2 GPUs (2.5 x
 * its guarantee), cc 4 + 2 (1.5 x): the cluster is full. At 150 aa needs 2
 * GPUs of its idle guarantee. The victim comes from bb (most over); cc's
 * borrowed job is never touched. With checkpoint at preemption nothing is
 * lost: the job with the most attained service goes (the 4-GPU one), and
 * the 2 GPUs it leaves over are lent back to nobody who fits. With a
 * checkpoint every 100 s both bb candidates are 50 s past one: the 2-GPU
 * job loses 100 GPU-s, the 4-GPU one 200: the 2-GPU one goes instead. */
static void test_victims_most_over_tenant_least_loss(void **state)
{
    (void)state;
    ts_replay_config cfg = cluster(4, 4);
    ts_replay_tenant t[3] = {{"aa", 8}, {"bb", 4}, {"cc", 4}};
    ts_replay_job jobs[6] = {job(1, 0, 4, 1000), job(1, 0, 4, 1000), job(1, 0, 2, 1000),
                             job(2, 0, 4, 1000), job(2, 0, 2, 1000), job(0, 150, 2, 100)};
    ts_replay_outcome o[6];
    ts_replay_result r;
    ts_replay_tenant_result tr[3];
    ts_replay_fairness fair;
    shared(&cfg, jobs, 6, t, 3, o, &r, tr, &fair);
    assert_true(o[5].queue_s == 0);
    assert_int_equal(o[1].preemptions, 1); /* bb's borrowed 4-GPU job */
    assert_int_equal(o[2].preemptions, 0);
    assert_int_equal(o[4].preemptions, 0); /* cc is less over: untouched */
    assert_int_equal(r.preemptions, 1);
    assert_true(r.lost_gpu_s == 0);
    assert_true(fair.deficit_gpu_s == 0);

    cfg.checkpoint_s = 100;
    shared(&cfg, jobs, 6, t, 3, o, &r, tr, &fair);
    assert_int_equal(o[2].preemptions, 1); /* 50 s x 2 GPUs at risk < 50 s x 4 */
    assert_int_equal(o[1].preemptions, 0);
    assert_int_equal(o[4].preemptions, 0);
    assert_true(o[2].lost_work_s == 50);
    assert_true(r.lost_gpu_s == 100);
    /* it did its 50 s again: back at 250 (aa done), 850 + 50 left */
    assert_true(o[2].finish_s == 250 + 900);
}

/* 16 GPUs, aa and cc guaranteed 8 each. cc runs an 8-GPU job from 0 and a
 * 2-GPU one from 100 (on aa's idle GPUs). At 300 aa wants its 8: cc is 2
 * over. Least attained first, cc's 2-GPU job now counts as its guaranteed
 * one and the 8-GPU job as borrowed; yet taking the 8-GPU job would leave
 * cc at 2 of its 8. The victim is the job that fits in the overage: the
 * 2-GPU one, and cc stays at its guarantee. */
static void test_victim_keeps_tenant_at_guarantee(void **state)
{
    (void)state;
    ts_replay_config cfg = cluster(2, 8);
    ts_replay_tenant t[2] = {{"aa", 8}, {"cc", 8}};
    ts_replay_job jobs[3] = {job(1, 0, 8, 5000), job(1, 100, 2, 5000), job(0, 300, 8, 100)};
    ts_replay_outcome o[3];
    ts_replay_result r;
    ts_replay_tenant_result tr[2];
    ts_replay_fairness fair;
    shared(&cfg, jobs, 3, t, 2, o, &r, tr, &fair);
    assert_true(o[2].queue_s == 0);
    assert_int_equal(o[0].preemptions, 0);
    assert_int_equal(o[1].preemptions, 1);
    assert_true(o[0].finish_s == 5000);
    assert_true(o[1].finish_s == 5100 + 100); /* resumed when aa's job ended at 400 */
    assert_true(fair.deficit_gpu_s == 0);
}

/* The minimum run protects a job that just (re)started even though it has
 * the least at risk. 16 GPUs, aa and bb 8 each; checkpoints every 100 s. bb
 * runs 8 + 4 GPUs from 0 and 4 more from 240 on aa's idle GPUs; at 250 aa
 * wants 4. At risk: 50 s x 8, 50 s x 4, and 10 s x 4 for the job 10 s into
 * its run. Least loss alone would take that one, which would then restart
 * with nothing done, and again at the next reclaim; past its minimum run
 * first, the 4-GPU job started at 0 goes (and does 50 s again). */
static void test_minimum_run_before_least_loss(void **state)
{
    (void)state;
    ts_replay_config cfg = cluster(2, 8);
    cfg.checkpoint_s = 100;
    ts_replay_tenant t[2] = {{"aa", 8}, {"bb", 8}};
    ts_replay_job jobs[4] = {job(1, 0, 8, 5000), job(1, 0, 4, 5000), job(1, 240, 4, 5000),
                             job(0, 250, 4, 100)};
    ts_replay_outcome o[4];
    ts_replay_result r;
    ts_replay_tenant_result tr[2];
    ts_replay_fairness fair;
    shared(&cfg, jobs, 4, t, 2, o, &r, tr, &fair);
    assert_true(o[3].queue_s == 0);
    assert_int_equal(o[1].preemptions, 1);
    assert_int_equal(o[2].preemptions, 0);
    assert_int_equal(o[0].preemptions, 0);
    assert_true(o[1].lost_work_s == 50);
}

/* 8 GPUs: aa 2, bb 4, cc 2 guaranteed; cc is idle. aa has 2 + 1 + 1 + 1
 * GPUs of jobs, bb 4 + 1 + 1, all at 0. Guarantees first (aa's 2, bb's 4),
 * then cc's 2 idle GPUs are lent one job at a time to the least used by
 * held / guarantee: aa and bb tie at 1, aa holds fewer GPUs: aa's first 1-GPU
 * job (aa 1.5); then bb (1.0 < 1.5): its first. Pooled (no tenants) the
 * same jobs run in arrival order instead: aa's 2 + 1 + 1 + 1, bb's 4 does
 * not fit, but bb's two 1-GPU jobs do. */
static void test_lending_lowest_usage_first(void **state)
{
    (void)state;
    ts_replay_config cfg = cluster(1, 8);
    ts_replay_tenant t[3] = {{"aa", 2}, {"bb", 4}, {"cc", 2}};
    ts_replay_job jobs[7] = {job(0, 0, 2, 100), job(0, 0, 1, 100), job(0, 0, 1, 100),
                             job(0, 0, 1, 100), job(1, 0, 4, 100), job(1, 0, 1, 100),
                             job(1, 0, 1, 100)};
    ts_replay_outcome o[7];
    ts_replay_result r;
    ts_replay_tenant_result tr[3];
    ts_replay_fairness fair;
    shared(&cfg, jobs, 7, t, 3, o, &r, tr, &fair);
    bool first_round[7] = {true, true, false, false, true, true, false};
    for (int j = 0; j < 7; j++)
        assert_true((o[j].queue_s == 0) == first_round[j]);
    ts_err err = {0};
    assert_int_equal(ts_replay_run(&cfg, &ts_replay_tessera_ops, jobs, 7, o, &r, &err), 0);
    bool pooled[7] = {true, true, true, true, false, true, true};
    for (int j = 0; j < 7; j++)
        assert_true((o[j].queue_s == 0) == pooled[j]);
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

/* Guaranteed first: over random busy workloads no tenant ever waits below
 * its guarantee with a job that fits there, the cluster is never
 * oversubscribed (the engine checks every decision), and a run repeats
 * exactly. With rounds the deficit is what a job waits for its round. */
static void test_no_deficit_random_workloads(void **state)
{
    (void)state;
    ts_replay_tenant t[3] = {{"aa", 8}, {"bb", 4}, {"cc", 4}};
    for (unsigned seed = 1; seed <= 20; seed++) {
        ts_replay_job jobs[MAX_JOBS];
        make_workload(jobs, MAX_JOBS, seed, 1.0);
        ts_replay_config cfg = cluster(2, 8);
        cfg.checkpoint_s = seed % 2 ? 0 : 300;
        ts_replay_outcome o[MAX_JOBS], o2[MAX_JOBS];
        ts_replay_result r, r2;
        ts_replay_tenant_result tr[3];
        ts_replay_fairness fair;
        shared(&cfg, jobs, MAX_JOBS, t, 3, o, &r, tr, &fair);
        assert_true(fair.deficit_gpu_s == 0);
        assert_true(fair.jain > 0 && fair.jain <= 1 + EPS);
        shared(&cfg, jobs, MAX_JOBS, t, 3, o2, &r2, tr, &fair);
        assert_memory_equal(o, o2, sizeof o);
        for (int j = 0; j < MAX_JOBS; j++)
            assert_true(o[j].finish_s >= jobs[j].submit_s + jobs[j].work_s);
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
                                             rec_free};

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
    assert_int_equal(ts_replay_run(&cfg, &rec_ops, a, MAX_JOBS, oa, &ra, &err), 0);
    rec first = g_rec;
    memset(&g_rec, 0, sizeof g_rec);
    assert_int_equal(ts_replay_run(&cfg, &rec_ops, b, MAX_JOBS, ob, &rb, &err), 0);
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
    assert_int_equal(ts_replay_run_shared(&cfg, &ts_replay_tessera_ops, &j, 1, t, 2, &o, &r, tr,
                                          NULL, NULL, &err),
                     TS_EINVAL);
    assert_non_null(strstr(err.msg, "guarantees add up to 12 GPUs"));
    j.tenant = 2;
    t[1].gpus = 0;
    assert_int_equal(ts_replay_run_shared(&cfg, &ts_replay_tessera_ops, &j, 1, t, 2, &o, &r, tr,
                                          NULL, NULL, &err),
                     TS_EINVAL);
    assert_non_null(strstr(err.msg, ".tenant: must be 0..1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_borrow_then_reclaim),
        cmocka_unit_test(test_victims_most_over_tenant_least_loss),
        cmocka_unit_test(test_victim_keeps_tenant_at_guarantee),
        cmocka_unit_test(test_minimum_run_before_least_loss),
        cmocka_unit_test(test_lending_lowest_usage_first),
        cmocka_unit_test(test_no_deficit_random_workloads),
        cmocka_unit_test(test_no_durations_read),
        cmocka_unit_test(test_guarantees_must_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
