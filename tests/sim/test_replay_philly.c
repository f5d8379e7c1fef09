/*
 * test_replay_philly.c - the Philly replay: virtual clusters as siloed tenants.
 *
 * Hand-worked cases, event-driven with no start-up cost (the Helios
 * procedure, README A): a tenant never uses another's GPUs even when they sit
 * idle; fifo blocks at the head of its queue while sjf starts a shorter job
 * that fits; srtf restarts pay the checkpoint cost for the GPU count; shares
 * against guarantee and Jain's index on numbers worked by hand; and the
 * loader on a tiny fixture (tests/data/replay-philly-small.csv): whole-day
 * inclusive window, VCs outside the VC file and GPU-less rows dropped, time
 * origin at the first kept job, format detection, and a job larger than its
 * partition refused with file:line.
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

#define FIXTURE TS_TEST_DATA "/replay-philly-small.csv"
#define VC_FIXTURE TS_TEST_DATA "/replay-philly-vc-small.csv"

static ts_replay_config helios(void)
{
    return (ts_replay_config){.gpus_per_node = TS_REPLAY_PHILLY_GPUS_PER_NODE, .round_s = 0,
                              .restart_cost_s = 0};
}

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

static const ts_replay_tenant two_tenants[2] = {{"aa", 8}, {"bb", 8}};

static void run_siloed_ok(const ts_replay_config *cfg, const char *policy,
                          const ts_replay_job *jobs, int n, const ts_replay_tenant *t, int nt,
                          ts_replay_outcome *out, ts_replay_result *res,
                          ts_replay_tenant_result *tres, ts_replay_fairness *fair)
{
    ts_err err = {0};
    const ts_replay_policy_ops *ops = ts_replay_policy_find(policy);
    assert_non_null(ops);
    if (ts_replay_run_tenants(cfg, ops, TS_REPLAY_SILOED, jobs, n, t, nt, out, res, tres, fair,
                              NULL, &err) != 0)
        fail_msg("%s", err.msg);
}

/* aa has two 8-GPU jobs at 0 on its one node; bb's node is idle. Siloed, the
 * second aa job waits for the first (100 -> 200) under every policy. */
static void test_tenant_never_uses_another_partition(void **state)
{
    (void)state;
    ts_replay_config cfg = helios();
    ts_replay_job jobs[3] = {job(0, 0, 8, 100), job(0, 0, 8, 100), job(1, 0, 1, 50)};
    const char *pols[] = {"fifo", "sjf", "srtf"};
    for (int p = 0; p < 3; p++) {
        ts_replay_outcome o[3];
        ts_replay_result r;
        ts_replay_tenant_result tr[2];
        ts_replay_fairness fair;
        run_siloed_ok(&cfg, pols[p], jobs, 3, two_tenants, 2, o, &r, tr, &fair);
        assert_true(o[0].finish_s == 100);
        assert_true(o[1].finish_s == 200);
        assert_true(o[1].queue_s == 100);
        assert_true(o[2].finish_s == 50);  /* bb is not held up by aa */
        assert_int_equal(tr[0].jobs, 2);
        assert_int_equal(tr[1].jobs, 1);
        assert_true(tr[0].avg_jct_s == 150);
        assert_true(r.avg_jct_s == (100.0 + 200 + 50) / 3);
        assert_true(r.makespan_s == 200);
    }
}

/* One 8-GPU partition. A: 6 GPUs for 100 s at 0; B: 4 GPUs, 500 s at 1;
 * C: 2 GPUs, 50 s at 2. fifo: B does not fit and blocks C until A ends at
 * 100; both start then, C ends at 150, B at 600. sjf: C (shorter) goes first,
 * fits, runs 2 -> 52; B still waits for A. */
static void test_fifo_blocks_at_head_sjf_does_not(void **state)
{
    (void)state;
    ts_replay_config cfg = helios();
    ts_replay_job jobs[3] = {job(0, 0, 6, 100), job(0, 1, 4, 500), job(0, 2, 2, 50)};
    ts_replay_outcome o[3];
    ts_replay_result r;
    ts_replay_tenant_result tr[2];
    run_siloed_ok(&cfg, "fifo", jobs, 3, two_tenants, 2, o, &r, tr, NULL);
    assert_true(o[1].finish_s == 600);
    assert_true(o[2].finish_s == 150);
    assert_true(o[2].queue_s == 98);
    run_siloed_ok(&cfg, "sjf", jobs, 3, two_tenants, 2, o, &r, tr, NULL);
    assert_true(o[1].finish_s == 600);
    assert_true(o[2].finish_s == 52);
    assert_true(o[2].queue_s == 0);
    assert_int_equal(r.preemptions, 0);
}

/* srtf on one 8-GPU partition: A (8 GPUs, 100 s) at 0, B (1 GPU, 10 s) at
 * 50. B has less left, runs 50 -> 60 and A no longer fits: preempted with
 * 50 s left. A restarts at 60 and pays the 30-s checkpoint cost of a 2..8-GPU
 * job: ends at 60 + 30 + 50 = 140. */
static void test_srtf_restart_pays_checkpoint(void **state)
{
    (void)state;
    ts_replay_config cfg = helios();
    cfg.ckpt_cost_by_gpus = true;
    ts_replay_job jobs[2] = {job(0, 0, 8, 100), job(0, 50, 1, 10)};
    ts_replay_outcome o[2];
    ts_replay_result r;
    ts_replay_tenant_result tr[2];
    run_siloed_ok(&cfg, "srtf", jobs, 2, two_tenants, 2, o, &r, tr, NULL);
    assert_true(o[1].finish_s == 60);
    assert_true(o[0].finish_s == 140);
    assert_int_equal(o[0].preemptions, 1);
    assert_true(r.lost_gpu_s == 30.0 * 8);
    assert_true(replay_ckpt_cost_s(1) == 7 && replay_ckpt_cost_s(2) == 30 &&
                replay_ckpt_cost_s(8) == 30 && replay_ckpt_cost_s(9) == 60);
}

/* The older measure. aa: 4 GPUs for 100 s at 0 and again at 300: demand
 * 200 s (the gap does not count), held 800 GPU-s, share while active 800 /
 * 200 / 8 = 0.5. bb: 8 GPUs for 100 s: 1. Jain = (0.5 + 1)^2 / (2 (0.25 +
 * 1)) = 2.25 / 2.5 = 0.9. By the new one both got all they were entitled to
 * (share vs guarantee 1) and all their fair share: Jain 1, no deficit. */
static void test_share_and_jain_by_hand(void **state)
{
    (void)state;
    ts_replay_config cfg = helios();
    ts_replay_job jobs[3] = {job(0, 0, 4, 100), job(1, 0, 8, 100), job(0, 300, 4, 100)};
    ts_replay_outcome o[3];
    ts_replay_result r;
    ts_replay_tenant_result tr[2];
    ts_replay_fairness fair;
    run_siloed_ok(&cfg, "fifo", jobs, 3, two_tenants, 2, o, &r, tr, &fair);
    assert_true(tr[0].demand_s == 200);
    assert_true(fabs(tr[0].share_while_active - 0.5) < 1e-12);
    assert_true(fabs(tr[1].share_while_active - 1.0) < 1e-12);
    assert_true(fabs(fair.jain_active - 0.9) < 1e-12);
    assert_true(tr[0].held_gpu_s == 800 && tr[0].entitled_gpu_s == 800);
    assert_true(tr[0].share_vs_guarantee == 1 && tr[1].share_vs_guarantee == 1);
    assert_true(fabs(fair.jain - 1) < 1e-12);
    assert_true(fair.deficit_gpu_s == 0);
    double x[3] = {1, 1, 1}, y[2] = {1, 0};
    assert_true(fabs(replay_jain(x, 3) - 1) < 1e-12);
    assert_true(fabs(replay_jain(y, 2) - 0.5) < 1e-12);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = malloc(1 << 16);
    assert_non_null(buf);
    *len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

static ts_replay_tenant *fixture_vcs(int *n)
{
    size_t len;
    char *buf = slurp(VC_FIXTURE, &len);
    ts_replay_tenant *t = NULL;
    ts_err err = {0};
    if (ts_replay_load_vc_nodes(buf, len, "vc.csv", &t, n, &err) != 0)
        fail_msg("%s", err.msg);
    free(buf);
    return t;
}

/* Window 2017-10-01 .. 2017-10-02 keeps 23:59:59 of the last day and drops
 * 23:59:59 the day before and 00:00:00 the day after. Origin: the first kept
 * job (10-01 00:00:05). */
static void test_loader_window_whole_days(void **state)
{
    (void)state;
    int nvc;
    ts_replay_tenant *vcs = fixture_vcs(&nvc);
    assert_int_equal(nvc, 2);
    assert_int_equal(vcs[1].gpus, 2 * TS_REPLAY_PHILLY_GPUS_PER_NODE);
    size_t len;
    char *buf = slurp(FIXTURE, &len);
    assert_true(ts_replay_is_philly(buf, len));
    long from, to;
    ts_err err = {0};
    assert_int_equal(ts_replay_parse_day("2017-10-01", &from, &err), 0);
    assert_int_equal(ts_replay_parse_day("2017-10-02", &to, &err), 0);
    assert_int_equal(to - from, 1);
    assert_int_equal(ts_replay_parse_day("2017-02-30", &to, &err), TS_EINVAL);
    assert_int_equal(ts_replay_parse_day("2017-10-02", &to, &err), 0);
    ts_replay_trace *t = NULL;
    if (ts_replay_load_philly(buf, len, "p.csv", vcs, nvc, from, to, &t, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(t->nwl, 1);
    assert_int_equal(t->wl[0].njobs, 4);
    assert_int_equal(t->dropped_window, 2);
    assert_int_equal(t->dropped_vc, 1);
    assert_int_equal(t->dropped_no_gpu, 1);
    assert_int_equal(t->ntenants, 2);
    const ts_replay_job *j = t->wl[0].jobs;
    assert_true(j[0].submit_s == 0 && j[0].tenant == 1 && j[0].gpus == 2);
    assert_true(j[1].submit_s == 5 && j[1].work_s == 100);  /* tie keeps file order */
    assert_true(j[2].submit_s == 5 && j[2].work_s == 60);
    assert_true(j[3].submit_s == 2 * 86400 - 1 - 5 && j[3].gpus == 8);
    ts_replay_trace_free(t);

    /* no window: every row of a known VC with GPUs */
    assert_int_equal(ts_replay_load_philly(buf, len, "p.csv", vcs, nvc, -100000, 100000, &t,
                                           &err),
                     0);
    assert_int_equal(t->wl[0].njobs, 6);
    ts_replay_trace_free(t);

    /* aa has one node: a 16-GPU job can never start */
    vcs[0].gpus = TS_REPLAY_PHILLY_GPUS_PER_NODE;
    const char *big = "timestamp,duration,num_gpus,gpu_time,cluster\n"
                      "2017-10-01 00:00:00,10.0,16,160.0,aa\n";
    assert_int_equal(ts_replay_load_philly(big, strlen(big), "big.csv", vcs, nvc, from, to, &t,
                                           &err),
                     TS_EINVAL);
    assert_non_null(strstr(err.msg, "big.csv:2: num_gpus"));
    const char *pollux = "workload_set,workload,name,time,application,num_gpus,batch_size,"
                         "duration,gpu_time\n";
    assert_false(ts_replay_is_philly(pollux, strlen(pollux)));
    free(vcs);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tenant_never_uses_another_partition),
        cmocka_unit_test(test_fifo_blocks_at_head_sjf_does_not),
        cmocka_unit_test(test_srtf_restart_pays_checkpoint),
        cmocka_unit_test(test_share_and_jain_by_hand),
        cmocka_unit_test(test_loader_window_whole_days),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
