/*
 * test_spec_elastic.c - an elastic job's range in its spec (spec_elastic.c,
 * docs/job-spec.md "Elastic jobs").
 *
 * Both forms parse to the minimum and maximum the page says and survive the
 * canonical JSON round trip; ts_spec_elastic gives the range in GPUs and
 * the step; a rigid spec is not elastic and keeps its plain numbers; every
 * bad range is one error naming its field and the reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/spec_equal.h"
#include "tessera/spec.h"

#define HEAD "tenant: t\nname: n\n"

static ts_job_spec *parse(const char *text, ts_spec_errors *errs)
{
    ts_job_spec *s = NULL;
    memset(errs, 0, sizeof *errs);
    ts_spec_parse(text, strlen(text), &s, errs);
    return s;
}

/* Parses text, then its canonical JSON, and checks they are equal. */
static ts_job_spec *round_trip(const char *text)
{
    ts_spec_errors errs;
    ts_job_spec *s = parse(text, &errs);
    if (!s)
        print_error("%s\n", errs.msg[0]);
    assert_non_null(s);
    char *json = ts_spec_to_json(s);
    assert_non_null(json);
    ts_job_spec *back = parse(json, &errs);
    assert_non_null(back);
    char why[128];
    if (!ts_test_spec_equal(s, back, why, sizeof why))
        print_error("%s\n%s\n", why, json);
    assert_true(ts_test_spec_equal(s, back, why, sizeof why));
    free(json);
    ts_spec_free(back);
    return s;
}

static void gang_range(void **state)
{
    (void)state;
    ts_job_spec *s = round_trip(HEAD "tasks: [{count: {min: 2, max: 4}, gpus: 2}]\n");
    assert_int_equal(s->tasks[0].count, 2);
    assert_int_equal(s->tasks[0].count_max, 4);
    assert_int_equal(ts_spec_gpus(s), 4); /* the minimum */
    int min, max, step;
    assert_true(ts_spec_elastic(s, &min, &max, &step));
    assert_int_equal(min, 4);
    assert_int_equal(max, 8);
    assert_int_equal(step, 2);
    char *json = ts_spec_to_json(s);
    assert_non_null(strstr(json, "\"count\":{\"min\":2,\"max\":4}"));
    free(json);
    ts_spec_free(s);
}

static void gpus_range(void **state)
{
    (void)state;
    ts_job_spec *s = round_trip(HEAD "tasks: [{gpus: {min: 1, max: 8}}]\n");
    int min, max, step;
    assert_true(ts_spec_elastic(s, &min, &max, &step));
    assert_int_equal(min, 1);
    assert_int_equal(max, 8);
    assert_int_equal(step, 1);
    ts_spec_free(s);
    /* count: 1 said out loud is fine; beside a rigid group too */
    s = round_trip(HEAD "tasks: [{count: 1, gpus: {min: 2, max: 4}}, {count: 2, gpus: 0}]\n");
    assert_true(ts_spec_elastic(s, &min, &max, &step));
    assert_int_equal(min, 2);
    assert_int_equal(max, 4);
    ts_spec_free(s);
}

static void rigid_is_not_elastic(void **state)
{
    (void)state;
    ts_job_spec *s = round_trip(HEAD "tasks: [{count: 2, gpus: 1}]\n");
    int min, max, step;
    assert_false(ts_spec_elastic(s, &min, &max, &step));
    char *json = ts_spec_to_json(s);
    assert_non_null(strstr(json, "\"count\":2,\"gpus\":1"));
    free(json);
    ts_spec_free(s);
    /* a range of one size parses and is rigid */
    s = round_trip(HEAD "tasks: [{gpus: {min: 2, max: 2}}]\n");
    assert_false(ts_spec_elastic(s, &min, &max, &step));
    ts_spec_free(s);
}

static void bad_ranges(void **state)
{
    (void)state;
    static const struct {
        const char *tasks, *msg;
    } C[] = {
        {"[{count: {min: 4, max: 2}, gpus: 1}]", "tasks[0].count.max: 2 is below min 4"},
        {"[{count: {max: 2}, gpus: 1}]", "tasks[0].count.min: required in a range {min, max}"},
        {"[{count: {min: 0, max: 2}, gpus: 1}]", "tasks[0].count.min: must be 1..65536"},
        {"[{gpus: {min: 1, max: 17}}]", "tasks[0].gpus.max: must be 1..16"},
        {"[{gpus: {min: 1, max: 4, step: 2}}]", "tasks[0].gpus.step: unknown key"},
        {"[{count: 2, gpus: {min: 1, max: 4}}]", "tasks[0].gpus: a range of GPUs is for one task"},
        {"[{count: {min: 1, max: 2}, gpus: {min: 1, max: 4}}]",
         "tasks[0].gpus: a range with count a range too"},
        {"[{gpus: {min: 1, max: 2}}, {count: {min: 1, max: 2}}]",
         "tasks[1].count: a second range"},
        {"[{gpus: {min: 1, max: 2}, gpu_fraction: 0.5}]",
         "tasks[0].gpus: a range of whole GPUs cannot be combined"},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, HEAD "tasks: %s\n", C[i].tasks);
        ts_spec_errors errs;
        ts_job_spec *s = parse(text, &errs);
        char all[2048];
        ts_spec_errors_join(&errs, all, sizeof all);
        if (s || !strstr(all, C[i].msg))
            print_error("%s: got \"%s\", want \"%s\"\n", C[i].tasks, all, C[i].msg);
        assert_null(s);
        assert_non_null(strstr(all, C[i].msg));
        assert_int_equal(errs.n, 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gang_range),
        cmocka_unit_test(gpus_range),
        cmocka_unit_test(rigid_is_not_elastic),
        cmocka_unit_test(bad_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
