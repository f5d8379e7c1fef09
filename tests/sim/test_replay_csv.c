/*
 * test_replay_csv.c - Tessera's own job list (replay_csv.c).
 *
 * The header tells the format apart (with and without the tenant column,
 * and not the Philly or Pollux headers); the fixture
 * tests/data/replay-jobs-small.csv loads sorted by submit time with its
 * tenants resolved; without tenants the column is ignored; and every bad
 * input names file:line: column: a wrong header, a missing tenant column
 * when tenants are given, an unknown or empty tenant, a GPU count of 0, a
 * negative duration, a wrong field count, an empty file.
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

#define FIXTURE TS_TEST_DATA "/replay-jobs-small.csv"

static const ts_replay_tenant tenants[2] = {{"vision", 8}, {"speech", 8}};

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

static void test_detect(void **state)
{
    (void)state;
    const char *ours = "name,submit_s,gpus,duration_s\na,0,1,10\n";
    const char *with = "name,submit_s,gpus,duration_s,tenant\r\na,0,1,10,x\n";
    const char *philly = "timestamp,duration,num_gpus,gpu_time,cluster\n";
    const char *other = "name,submit_s,gpus\n";
    assert_true(ts_replay_is_jobs_csv(ours, strlen(ours)));
    assert_true(ts_replay_is_jobs_csv(with, strlen(with)));
    assert_false(ts_replay_is_jobs_csv(philly, strlen(philly)));
    assert_false(ts_replay_is_jobs_csv(other, strlen(other)));
    assert_false(ts_replay_is_jobs_csv("", 0));
    assert_false(ts_replay_is_philly(ours, strlen(ours)));
}

/* Rows come in file order 0, 60, 30, 120, 300, 300: sorted by submit time,
 * the two at 300 keep file order (train-e before tiny-f). */
static void test_load_fixture(void **state)
{
    (void)state;
    size_t len;
    char *buf = slurp(FIXTURE, &len);
    ts_replay_trace *t = NULL;
    ts_err err = {0};
    if (ts_replay_load_jobs_csv(buf, len, "jobs.csv", tenants, 2, &t, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(t->nwl, 1);
    assert_int_equal(t->ntenants, 2);
    assert_string_equal(t->tenants[1].name, "speech");
    const ts_replay_workload *w = &t->wl[0];
    assert_int_equal(w->njobs, 6);
    const char *order[6] = {"train-a", "eval-c", "train-b", "sweep-d", "train-e", "tiny-f"};
    int tenant[6] = {0, 1, 0, 1, 1, 0};
    for (int j = 0; j < 6; j++) {
        assert_string_equal(w->jobs[j].name, order[j]);
        assert_int_equal(w->jobs[j].tenant, tenant[j]);
    }
    assert_true(w->jobs[1].submit_s == 30 && w->jobs[1].gpus == 1 && w->jobs[1].work_s == 600);
    ts_replay_trace_free(t);
    /* without tenants the column is ignored */
    assert_int_equal(ts_replay_load_jobs_csv(buf, len, "jobs.csv", NULL, 0, &t, &err), 0);
    assert_int_equal(t->ntenants, 0);
    for (int j = 0; j < 6; j++)
        assert_int_equal(t->wl[0].jobs[j].tenant, 0);
    ts_replay_trace_free(t);
    free(buf);
}

static void expect_bad(const char *text, int ntenants, const char *want)
{
    ts_replay_trace *t = (ts_replay_trace *)&t;
    ts_err err = {0};
    int rc = ts_replay_load_jobs_csv(text, strlen(text), "j.csv", tenants, ntenants, &t, &err);
    if (rc != TS_EINVAL)
        fail_msg("\"%s\": expected TS_EINVAL, got %d", text, rc);
    if (!strstr(err.msg, want))
        fail_msg("\"%s\": message \"%s\" lacks \"%s\"", text, err.msg, want);
}

static void test_bad_input(void **state)
{
    (void)state;
#define H "name,submit_s,gpus,duration_s,tenant\n"
    expect_bad("", 2, "j.csv:1: header: file is empty");
    expect_bad("name,gpus\n", 2, "j.csv:1: header: expected name,submit_s,gpus,duration_s");
    expect_bad("name,submit_s,gpus,duration_s\na,0,1,10\n", 2,
               "j.csv:1: header: tenant: column needed");
    expect_bad(H "a,0,1,10,vision\nb,0,1,10,audio\n", 2, "j.csv:3: tenant: \"audio\" is not one");
    expect_bad(H "a,0,1,10,\n", 2, "j.csv:2: tenant: must not be empty");
    expect_bad(H "a,0,0,10,vision\n", 2, "j.csv:2: gpus: must be an integer");
    expect_bad(H "a,0,1.5,10,vision\n", 2, "j.csv:2: gpus: must be an integer");
    expect_bad(H "a,0,1,-3,vision\n", 2, "j.csv:2: duration_s: must be a number");
    expect_bad(H "a,x,1,3,vision\n", 2, "j.csv:2: submit_s: must be a number");
    expect_bad(H "a,0,1,10\n", 2, "j.csv:2: expected 5 fields, got 4");
    expect_bad(H ",0,1,10,vision\n", 2, "j.csv:2: name: must not be empty");
    expect_bad(H "\n\n", 2, "j.csv: no jobs");
#undef H
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_load_fixture),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
