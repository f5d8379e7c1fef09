/*
 * test_replay.c - the time-based replay engine, its policies and its loader.
 *
 * Hand-worked cases on clusters of one node (the arithmetic is in the
 * comments; rounds of 60 s and 30-s restarts unless said): a job alone
 * (first seen at the next round boundary, then exact), the same job
 * event-driven, the restart cost paid again after a preemption, tiresias
 * demoting at exactly 16 GPU-hours (not a round earlier) in both clock modes,
 * fifo blocking at the first job that does not fit while sjf takes the
 * shortest first, progress lost to a preemption since the last checkpoint
 * (--checkpoint-s), a job larger than the cluster refused, determinism, and the
 * Pollux CSV loader (start-up subtracted, arrival order, set filtering, and
 * file:line: field messages on bad input).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/replay.h"

#define R_S 60.0
#define RESTART_S 30.0

static ts_replay_config one_node(int gpus, double round_s)
{
    return (ts_replay_config){.nodes = 1, .gpus_per_node = gpus, .round_s = round_s,
                              .restart_cost_s = RESTART_S};
}

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

static void run_ok(const ts_replay_config *cfg, const char *policy, const ts_replay_job *jobs,
                   int n, ts_replay_outcome *out, ts_replay_result *res)
{
    ts_err err = {0};
    const ts_replay_policy_ops *ops = ts_replay_policy_find(policy);
    assert_non_null(ops);
    int rc = replay_run(cfg, ops, jobs, n, out, res, &err);
    if (rc != 0)
        fail_msg("%s", err.msg);
}

/* Submitted at 10, seen at 60, 30 s start-up to 90, 100 s of work: done at
 * 190 exactly (not at the 240 boundary). JCT 180, waited 50. */
static void test_job_alone_rounds(void **state)
{
    (void)state;
    ts_replay_config cfg = one_node(4, R_S);
    ts_replay_job j = job("a", 10, 2, 100);
    const char *pols[] = {"fifo", "sjf", "srtf", "tiresias"};
    for (int p = 0; p < 4; p++) {
        ts_replay_outcome o;
        ts_replay_result r;
        run_ok(&cfg, pols[p], &j, 1, &o, &r);
        assert_true(o.finish_s == 190);
        assert_true(o.jct_s == 180);
        assert_true(o.queue_s == 50);
        assert_int_equal(o.starts, 1);
        assert_true(r.avg_jct_s == 180 && r.p50_jct_s == 180 && r.p99_jct_s == 180);
        assert_true(r.makespan_s == 190);
        /* held 130 s of 190 on 2 of 4 GPUs */
        assert_true(r.utilization_pct > 34.21 && r.utilization_pct < 34.22);
        assert_true(r.lost_gpu_s == 0);
    }
}

/* Event-driven: started on arrival, done at 10 + 30 + 100. */
static void test_job_alone_event_driven(void **state)
{
    (void)state;
    ts_replay_config cfg = one_node(4, 0);
    ts_replay_job j = job("a", 10, 2, 100);
    ts_replay_outcome o;
    ts_replay_result r;
    run_ok(&cfg, "tiresias", &j, 1, &o, &r);
    assert_true(o.finish_s == 140);
    assert_true(o.queue_s == 0);
}

/* One GPU. A (work 600) seen at 60, start-up to 90, 30 s done by 120.
 * B (work 60) arrives at 100, seen at 120: srtf preempts A. B: start-up to
 * 150, done at 210. A restarts at 240 (the next boundary): start-up again to
 * 270, 570 s left, done at 840. */
static void test_restart_cost_on_preemption(void **state)
{
    (void)state;
    ts_replay_config cfg = one_node(1, R_S);
    ts_replay_job jobs[] = {job("A", 0, 1, 600), job("B", 100, 1, 60)};
    ts_replay_outcome o[2];
    ts_replay_result r;
    run_ok(&cfg, "srtf", jobs, 2, o, &r);
    assert_true(o[1].finish_s == 210);
    assert_true(o[0].finish_s == 840);
    assert_int_equal(o[0].preemptions, 1);
    assert_int_equal(o[0].starts, 2);
    assert_int_equal(o[1].preemptions, 0);
    assert_int_equal(r.preemptions, 1);
    assert_true(r.lost_gpu_s == 30);
    /* A waited 0-60 and 120-240, B 100-120 */
    assert_true(o[0].queue_s == 180 && o[1].queue_s == 20);
    assert_true(r.max_wait_s == 180);

    /* the same without preemption (fifo): B waits for A */
    run_ok(&cfg, "fifo", jobs, 2, o, &r);
    assert_true(o[0].finish_s == 690);   /* 60 + 30 + 600 */
    assert_true(o[1].finish_s == 810);   /* seen free at 720, 30 + 60 */
    assert_int_equal(r.preemptions, 0);
}

/* --checkpoint-s. One GPU, event-driven, no restart cost. A (work 600) from
 * 0; B (work 60) at 130 preempts it under srtf. Checkpointing at preemption
 * (0), A resumes with 470 left at 190: done 660. Every 100 s of progress, A
 * keeps the checkpoint at 100, does 30 s again: 500 left, done 690; 30 s
 * lost, 30 GPU-s with its one GPU. Preempted right at a checkpoint (B at
 * 200), nothing is lost. On 2 GPUs the same loss counts twice. */
static void test_checkpoint_loss(void **state)
{
    (void)state;
    ts_replay_config cfg = one_node(1, 0);
    cfg.restart_cost_s = 0;
    ts_replay_job jobs[] = {job("A", 0, 1, 600), job("B", 130, 1, 60)};
    ts_replay_outcome o[2];
    ts_replay_result r;
    run_ok(&cfg, "srtf", jobs, 2, o, &r);
    assert_true(o[0].finish_s == 660);
    assert_true(o[0].lost_work_s == 0 && r.lost_gpu_s == 0);
    cfg.checkpoint_s = 100;
    run_ok(&cfg, "srtf", jobs, 2, o, &r);
    assert_int_equal(o[0].preemptions, 1);
    assert_true(o[0].finish_s == 690);
    assert_true(o[0].lost_work_s == 30);
    assert_true(r.lost_gpu_s == 30);
    jobs[1].submit_s = 200;
    run_ok(&cfg, "srtf", jobs, 2, o, &r);
    assert_true(o[0].finish_s == 660); /* 200 done, B 200..260, 400 more */
    assert_true(o[0].lost_work_s == 0 && r.lost_gpu_s == 0);
    ts_replay_config two = one_node(2, 0);
    two.restart_cost_s = 0;
    two.checkpoint_s = 100;
    ts_replay_job wide[] = {job("A", 0, 2, 600), job("B", 130, 2, 60)};
    run_ok(&two, "srtf", wide, 2, o, &r);
    assert_true(o[0].finish_s == 690);
    assert_true(r.lost_gpu_s == 60);
    /* restart costs count on top, and delay progress: with 30 s per start,
     * B at 150 finds A 120 s along: 20 s lost, and 30 s of restart again */
    two.restart_cost_s = 30;
    wide[1].submit_s = 150;
    run_ok(&two, "srtf", wide, 2, o, &r);
    assert_true(o[0].lost_work_s == 20);
    assert_true(r.lost_gpu_s == 2 * (30 + 20));
    /* a bad interval is refused, naming the field */
    ts_err err = {0};
    cfg.checkpoint_s = -1;
    assert_int_equal(replay_run(&cfg, ts_replay_policy_find("srtf"), jobs, 2, o, &r, &err),
                     TS_EINVAL);
    assert_non_null(strstr(err.msg, "checkpoint_s"));
}

/* Four GPUs. A (4 GPUs, long) runs from 60; each round adds 60 x 4 = 240
 * GPU-s, so at t = 60 + 240 rounds = 14,460 it has exactly 57,600 and is
 * demoted (at 14,400 it has 57,360: still Q0). B (4 GPUs, work 100) arrived
 * at 1,000 and waited in Q0 behind A; at 14,460 it runs, A is preempted. B
 * done at 14,460 + 30 + 100 = 14,590. A ran 90..14,460 (14,370 s of work),
 * restarts at 14,640 (the first boundary after B ends), 30 s, 5,630 left:
 * done at 20,300. */
static void test_tiresias_demotion_at_threshold(void **state)
{
    (void)state;
    ts_replay_config cfg = one_node(4, R_S);
    ts_replay_job jobs[] = {job("A", 0, 4, 20000), job("B", 1000, 4, 100)};
    ts_replay_outcome o[2];
    ts_replay_result r;
    run_ok(&cfg, "tiresias", jobs, 2, o, &r);
    assert_true(o[1].finish_s == 14590);
    assert_true(o[0].finish_s == 20300);
    assert_int_equal(o[0].preemptions, 1);

    /* a job that never reaches the threshold is never demoted: B (Q0) waits */
    ts_replay_job short_a[] = {job("A", 0, 4, 14000), job("B", 1000, 4, 100)};
    run_ok(&cfg, "tiresias", short_a, 2, o, &r);
    assert_true(o[0].finish_s == 60 + 30 + 14000);
    assert_int_equal(o[0].preemptions, 0);
    assert_true(o[1].finish_s == 14100 + 30 + 100); /* seen at 14,100, the next boundary */

    /* event-driven: A starts at 0, reaches 57,600 GPU-s at 14,400 exactly */
    cfg.round_s = 0;
    run_ok(&cfg, "tiresias", jobs, 2, o, &r);
    assert_true(o[1].finish_s == 14400 + 30 + 100);
    assert_int_equal(o[0].preemptions, 1);
    /* A: 14,370 s done by 14,400; restarts at 14,530: 30 + 5,630 */
    assert_true(o[0].finish_s == 14530 + 30 + 5630);
}

/* Four GPUs. A (3 GPUs, 570 s) arrives 0, B (2 GPUs, 1,000 s) at 10,
 * C (1 GPU, 100 s) at 20; all seen at 60.
 * fifo: A starts; B does not fit and fifo stops there, so C waits too
 * although one GPU is free. A ends at 60+30+570 = 660 (a boundary): B and C
 * start, B done 1,690, C 790.
 * sjf: C (shortest) and then A start at 60; C done 190; B at 660, done 1,690. */
static void test_fifo_blocks_sjf_orders(void **state)
{
    (void)state;
    ts_replay_config cfg = one_node(4, R_S);
    ts_replay_job jobs[] = {job("A", 0, 3, 570), job("B", 10, 2, 1000), job("C", 20, 1, 100)};
    ts_replay_outcome o[3];
    ts_replay_result r;
    run_ok(&cfg, "fifo", jobs, 3, o, &r);
    assert_true(o[0].finish_s == 660);
    assert_true(o[1].finish_s == 1690);
    assert_true(o[2].finish_s == 790);
    run_ok(&cfg, "sjf", jobs, 3, o, &r);
    assert_true(o[2].finish_s == 190);
    assert_true(o[0].finish_s == 660);
    assert_true(o[1].finish_s == 1690);
    /* tiresias skips B (does not fit) and runs C, like sjf here */
    run_ok(&cfg, "tiresias", jobs, 3, o, &r);
    assert_true(o[2].finish_s == 190);
}

static void test_job_too_large_refused(void **state)
{
    (void)state;
    ts_replay_config cfg = one_node(4, R_S);
    ts_replay_job j = job("big", 0, 5, 10);
    ts_replay_result r;
    ts_err err = {0};
    assert_int_equal(replay_run(&cfg, ts_replay_policy_find("fifo"), &j, 1, NULL, &r, &err),
                     TS_EINVAL);
    assert_non_null(strstr(err.msg, "gpus"));
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

static ts_replay_trace *load_fixture(const char *set)
{
    size_t len;
    char *buf = slurp(TS_TEST_DATA "/replay-pollux-small.csv", &len);
    ts_replay_trace *t = NULL;
    ts_err err = {0};
    int rc = ts_replay_load_pollux(buf, len, "small.csv", set, &t, &err);
    free(buf);
    if (rc != 0)
        fail_msg("%s", err.msg);
    return t;
}

/* Same input, same outcome, byte for byte, in both clock modes. */
static void test_deterministic(void **state)
{
    (void)state;
    ts_replay_trace *t = load_fixture("workloads");
    ts_replay_config cfg = {.nodes = 2, .gpus_per_node = 4, .round_s = R_S,
                            .restart_cost_s = RESTART_S};
    for (int mode = 0; mode < 2; mode++, cfg.round_s = 0)
        for (const ts_replay_policy_ops *const *p = ts_replay_policy_all(); *p; p++) {
            ts_replay_outcome a[8], b[8];
            ts_replay_result ra, rb;
            ts_err err = {0};
            assert_int_equal(replay_run(&cfg, *p, t->wl[0].jobs, t->wl[0].njobs, a, &ra, &err), 0);
            assert_int_equal(replay_run(&cfg, *p, t->wl[0].jobs, t->wl[0].njobs, b, &rb, &err), 0);
            assert_memory_equal(a, b, sizeof a[0] * (size_t)t->wl[0].njobs);
            assert_memory_equal(&ra, &rb, sizeof ra);
            for (int j = 0; j < t->wl[0].njobs; j++)
                assert_true(a[j].jct_s >= t->wl[0].jobs[j].work_s + RESTART_S);
        }
    ts_replay_trace_free(t);
}

static void test_load_pollux(void **state)
{
    (void)state;
    ts_replay_trace *t = load_fixture("workloads");
    assert_string_equal(t->set, "workloads");
    assert_int_equal(t->nwl, 2);
    assert_string_equal(t->wl[0].name, "workload-1");
    assert_int_equal(t->wl[0].njobs, 3);
    /* arrival order, start-up subtracted */
    assert_string_equal(t->wl[0].jobs[0].name, "ncf-2");
    assert_true(t->wl[0].jobs[0].work_s == 77 - TS_REPLAY_POLLUX_STARTUP_S);
    assert_string_equal(t->wl[0].jobs[1].name, "cifar10-0");
    assert_int_equal(t->wl[0].jobs[1].gpus, 6);
    assert_true(t->wl[0].jobs[1].submit_s == 107);
    assert_int_equal(t->wl[1].njobs, 2);
    ts_replay_trace_free(t);

    /* a job alone takes exactly its CSV duration once rounds are aligned */
    t = load_fixture("workloads-0.5");
    assert_int_equal(t->nwl, 1);
    ts_replay_config cfg = one_node(4, 0);
    ts_replay_outcome o;
    ts_replay_result r;
    run_ok(&cfg, "tiresias", t->wl[0].jobs, 1, &o, &r);
    assert_true(o.jct_s == 77);
    ts_replay_trace_free(t);
}

static void expect_bad(const char *text, const char *set, const char *want)
{
    ts_replay_trace *t = NULL;
    ts_err err = {0};
    assert_int_equal(ts_replay_load_pollux(text, strlen(text), "x.csv", set, &t, &err), TS_EINVAL);
    assert_null(t);
    if (!strstr(err.msg, want))
        fail_msg("expected \"%s\" in \"%s\"", want, err.msg);
}

#define HDR "workload_set,workload,name,time,application,num_gpus,batch_size,duration,gpu_time\n"
static void test_load_pollux_bad(void **state)
{
    (void)state;
    expect_bad("", NULL, "x.csv:1: header");
    expect_bad("a,b\n", NULL, "x.csv:1: header");
    expect_bad(HDR "w,w-1,a,0,ncf,0,1,77,0\n", NULL, "x.csv:2: num_gpus");
    expect_bad(HDR "w,w-1,a,0,ncf,1,1,77,77\nw,w-1,b,x,ncf,1,1,77,77\n", NULL, "x.csv:3: time");
    expect_bad(HDR "w,w-1,a,0,ncf,1,1,20,20\n", NULL, "x.csv:2: duration");
    expect_bad(HDR "w,w-1,a,0,ncf,2,1,77,77\n", NULL, "x.csv:2: gpu_time");
    expect_bad(HDR "w,w-1,a,0,ncf,1,1,77\n", NULL, "x.csv:2: expected 9 fields");
    expect_bad(HDR "w,w-1,,0,ncf,1,1,77,77\n", NULL, "x.csv:2: name");
    expect_bad(HDR "w,w-1,a,0,ncf,1,1,77,77\nv,w-1,a,0,ncf,1,1,77,77\n", NULL,
               "x.csv:3: workload_set");
    expect_bad(HDR "w,w-1,a,0,ncf,1,1,77,77\n", "nope", "no rows of set");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_alone_rounds),
        cmocka_unit_test(test_job_alone_event_driven),
        cmocka_unit_test(test_restart_cost_on_preemption),
        cmocka_unit_test(test_checkpoint_loss),
        cmocka_unit_test(test_tiresias_demotion_at_threshold),
        cmocka_unit_test(test_fifo_blocks_sjf_orders),
        cmocka_unit_test(test_job_too_large_refused),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_load_pollux),
        cmocka_unit_test(test_load_pollux_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
