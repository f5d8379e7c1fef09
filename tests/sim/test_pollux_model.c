/*
 * test_pollux_model.c - the Pollux job model (src/replay/pollux_model.c) on
 * the tiny profile fixture tests/data/pollux-tiny (a cut of the artifact's
 * bert and ncf profiles; its README names the source and licence).
 *
 * Step time: a profiled point gives the profile's value, a per-GPU batch
 * between two profiled ones the line between them, a placement is read as any
 * of its rotations, an unprofiled one falls back to the (nodes, replicas)
 * table. Efficiency: gain 1 at the smallest validated batch, the gradient
 * noise formula at a validated one, linear statistics between two. A job
 * alone: 30 s, then epochs at the profile's speed, completion to the second.
 * The tiny workload's Tiresias replay is pinned job by job, and so are the
 * production cycle's with rigid jobs and with elastic ones (which finish the
 * workload far sooner: the idle GPUs go to the jobs). Bad input names the
 * file, line and column.
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

#include "replay/pollux_model.h"
#include "replay/replay.h"

#define DIR TS_TEST_DATA "/pollux-tiny"
#define STEP_24_AT_4 2.14779594540596 /* bert placements.csv: 24,4 */

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = malloc(1 << 20);
    assert_non_null(buf);
    *len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

typedef int (*add_fn)(ts_pm_app *, const char *, size_t, const char *, ts_err *);

static void add(ts_pm_app *a, const char *app, const char *file, add_fn fn, int bsz)
{
    char path[512];
    snprintf(path, sizeof path, DIR "/profiles/%s/%s", app, file);
    size_t len;
    char *buf = slurp(path, &len);
    ts_err err = {0};
    int rc = fn ? fn(a, buf, len, path, &err)
                : ts_pm_app_add_validation(a, bsz, buf, len, path, &err);
    if (rc)
        fail_msg("%s", err.msg);
    free(buf);
}

static ts_pm_app *load(const char *name, int b0, int b1)
{
    int epochs, max_local;
    assert_int_equal(ts_pm_app_defaults(name, &epochs, &max_local), 0);
    ts_pm_app *a = NULL;
    assert_int_equal(ts_pm_app_new(name, epochs, max_local, &a, NULL), 0);
    add(a, name, "placements.csv", ts_pm_app_add_placements, 0);
    add(a, name, "scalability.csv", ts_pm_app_add_scalability, 0);
    char f[64];
    snprintf(f, sizeof f, "validation-%d.csv", b1); /* out of order on purpose */
    add(a, name, f, NULL, b1);
    snprintf(f, sizeof f, "validation-%d.csv", b0);
    add(a, name, f, NULL, b0);
    ts_err err = {0};
    if (ts_pm_app_finish(a, &err))
        fail_msg("%s", err.msg);
    return a;
}

static void test_step_time(void **state)
{
    (void)state;
    ts_pm_app *a = load("bert", 12, 48);
    double st, sy;
    int one[1] = {1};
    replay_pm_step_time(a, one, 1, 8, &st, &sy); /* placements.csv: 1,8,... */
    assert_true(st == 0.7032617032527924 && sy == 0.013705408036708831);
    replay_pm_step_time(a, one, 1, 7, &st, &sy); /* halfway between 6 and 8 */
    assert_true(fabs(st - (0.5693899691104889 + 0.7032617032527924) / 2) < 1e-12);
    int two_nodes[3] = {2, 0, 2}, rot[2] = {4, 2}, rot2[2] = {2, 4};
    double a1, b1, a2, b2;
    replay_pm_step_time(a, two_nodes, 3, 4, &a1, &b1); /* zeros dropped: "22" */
    int t22[2] = {2, 2};
    replay_pm_step_time(a, t22, 2, 4, &a2, &b2);
    assert_true(a1 == a2 && b1 == b2);
    replay_pm_step_time(a, rot, 2, 4, &a1, &b1); /* 4 then 2 GPUs reads as profiled "24" */
    replay_pm_step_time(a, rot2, 2, 4, &a2, &b2);
    assert_true(a1 == a2 && a1 == STEP_24_AT_4);
    int spread[3] = {2, 1, 1}; /* "112" is not in the fixture: the table */
    replay_pm_step_time(a, spread, 3, 4, &a1, &b1);
    assert_true(a1 > 0 && isfinite(a1) && b1 >= 0);
    int many[6] = {1, 1, 1, 1, 1, 1}; /* 6 nodes: scalability.csv's (6, 6) */
    replay_pm_step_time(a, many, 6, 4, &a1, &b1);
    assert_true(a1 == 1.4923269003629684 && b1 == 1.0928203125);
    ts_pm_app_free(a);
}

static void test_efficiency(void **state)
{
    (void)state;
    ts_pm_app *a = load("bert", 12, 48);
    assert_int_equal(replay_pm_app_init_bsz(a), 12);
    assert_int_equal(replay_pm_app_max_bsz(a), 48);
    assert_true(replay_pm_gain(a, 12, 0) == 1.0);
    double sqr = 57286300666507.94, var = 6875640191433787.0; /* validation-48, epoch 0 */
    double g = replay_pm_gain(a, 48, 0);
    assert_true(g == (var + sqr) / (var / 4.0 + sqr));
    assert_true(g > 1.0 && g < 4.0); /* a batch 4x larger is worth less than 4 steps */
    double s24, v24;
    replay_pm_grad_stats(a, 24, 1, &s24, &v24); /* a third of the way from 12 to 48 */
    assert_true(fabs(s24 - (12 * 69055119274.80128 + 24 * 408336357954.4091) / 36) < 1e-3);
    assert_true(replay_pm_epoch_progress(a, 0) == 0.0);
    assert_true(replay_pm_epoch_progress(a, 1) == 7387.0); /* the smaller of the curves */
    assert_true(replay_pm_epoch_progress(a, 2) == 14774.0);
    ts_pm_app_free(a);
}

static void test_job_alone(void **state)
{
    (void)state;
    ts_pm_app *a = load("bert", 12, 48);
    ts_pm_job j;
    replay_pm_job_init(&j, a, 0, 12);
    int one[1] = {1};
    replay_pm_job_reallocate(&j, one, 1);
    assert_int_equal(j.atomic_bsz, 12);
    assert_int_equal(j.accum_steps, 0);
    replay_pm_job_step(&j, 20); /* inside the 30-s change: no progress */
    assert_true(j.progress == 0.0 && j.now_s == 20);
    for (int r = 0; r < 400 && j.done_s < 0; r++)
        replay_pm_job_step(&j, 60);
    /* 30 s, then 2 epochs of 7387 steps at 0.9215 s (placements.csv 1,12) */
    double want = 30 + 14774 * 0.9215156733989716;
    assert_true(j.done_s >= 0 && fabs((double)j.done_s - want) <= 1.0);
    assert_int_equal(j.restarts, 0);
    ts_pm_app_free(a);
}

static void test_tiny_replay(void **state)
{
    (void)state;
    ts_pm_app *apps[2] = {load("bert", 12, 48), load("ncf", 256, 1024)};
    size_t len;
    char *buf = slurp(DIR "/workloads/workload-1.csv", &len);
    ts_pm_wjob *jobs = NULL;
    int n = 0;
    ts_err err = {0};
    assert_int_equal(ts_pm_load_workload(buf, len, "workload-1.csv",
                                         (const ts_pm_app *const *)apps, 2, &jobs, &n, &err),
                     0);
    assert_int_equal(n, 6);
    long jct[6];
    ts_pm_stats st;
    assert_int_equal(
        ts_pm_run_tiresias((const ts_pm_app *const *)apps, jobs, n, 2, 4, jct, &st, &err), 0);
    /* pinned (2026-12-04): bert-4 (8 GPUs) waits for the whole cluster */
    const long want[6] = {13704, 541, 7975, 1101, 22898, 2200};
    for (int i = 0; i < 6; i++)
        assert_int_equal(jct[i], want[i]);
    assert_int_equal(st.makespan_s, 23098);
    free(jobs);
    free(buf);
    for (int i = 0; i < 2; i++)
        ts_pm_app_free(apps[i]);
}

static void test_tiny_cycle(void **state)
{
    (void)state;
    ts_pm_app *apps[2] = {load("bert", 12, 48), load("ncf", 256, 1024)};
    size_t len;
    char *buf = slurp(DIR "/workloads/workload-1.csv", &len);
    ts_pm_wjob *jobs = NULL;
    int n = 0;
    ts_err err = {0};
    assert_int_equal(ts_pm_load_workload(buf, len, "workload-1.csv",
                                         (const ts_pm_app *const *)apps, 2, &jobs, &n, &err),
                     0);
    /* pinned (2026-12-04; elastic jobs resized by the cycle's elastic step, its grant
     * weighted by the work each job has left) */
    const long want[3][6] = {{13704, 541, 5372, 621, 22898, 1510},
                             {5129, 772, 5842, 762, 7276, 782},
                             {13629, 772, 3632, 762, 22838, 782}};
    const long makespan[3] = {23098, 7476, 23038};
    const ts_pm_jobs_kind kinds[3] = {TS_PM_RIGID, TS_PM_ELASTIC_FROM_ONE,
                                      TS_PM_ELASTIC_FROM_TUNED};
    for (int k = 0; k < 3; k++) {
        long jct[6];
        ts_pm_stats st;
        if (ts_pm_run_policy((const ts_pm_app *const *)apps, jobs, n, 2, 4,
                             &ts_replay_tessera_ops, kinds[k], jct, &st, &err))
            fail_msg("%s", err.msg);
        if (getenv("TS_TEST_VERBOSE"))
            print_message("kind %d: %ld %ld %ld %ld %ld %ld makespan %ld\n", k, jct[0], jct[1],
                          jct[2], jct[3], jct[4], jct[5], st.makespan_s);
        for (int i = 0; i < 6; i++)
            assert_int_equal(jct[i], want[k][i]);
        assert_int_equal(st.makespan_s, makespan[k]);
    }
    free(jobs);
    free(buf);
    for (int i = 0; i < 2; i++)
        ts_pm_app_free(apps[i]);
}

static void test_bad_input(void **state)
{
    (void)state;
    ts_pm_app *a = NULL;
    ts_err err = {0};
    assert_int_equal(ts_pm_app_new("bert", 2, 0, &a, NULL), 0);
    const char *p = "placement,local_bsz,step_time,sync_time\n1,4,0.5,0.1\n15,4,0.5,0.1\n";
    assert_int_equal(ts_pm_app_add_placements(a, p, strlen(p), "p.csv", &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "p.csv:3: placement"));
    const char *v = "progress,iteration,metric,grad_sqr,grad_var\n10,10,1,x,2\n";
    assert_int_equal(ts_pm_app_add_validation(a, 12, v, strlen(v), "v.csv", &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "v.csv:2: grad_sqr"));
    ts_pm_app_free(a);
    ts_pm_app *apps[1] = {load("bert", 12, 48)};
    const char *w = "name,time,application,num_replicas,batch_size\nx,0,resnet,1,12\n";
    ts_pm_wjob *jobs = NULL;
    int n;
    assert_int_equal(ts_pm_load_workload(w, strlen(w), "w.csv", (const ts_pm_app *const *)apps,
                                         1, &jobs, &n, &err),
                     TS_EINVAL);
    assert_non_null(strstr(err.msg, "w.csv:2: application"));
    const char *w2 = "name,time,application,num_replicas,batch_size\nx,0,bert,0,12\n";
    assert_int_equal(ts_pm_load_workload(w2, strlen(w2), "w.csv", (const ts_pm_app *const *)apps,
                                         1, &jobs, &n, &err),
                     TS_EINVAL);
    assert_non_null(strstr(err.msg, "w.csv:2: num_replicas"));
    ts_pm_app_free(apps[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_time),   cmocka_unit_test(test_efficiency),
        cmocka_unit_test(test_job_alone),   cmocka_unit_test(test_tiny_replay),
        cmocka_unit_test(test_tiny_cycle),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
