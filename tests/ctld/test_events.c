/*
 * test_events.c - the typed `data` of job events (src/ctld/events.c): every
 * detail shape the controller writes gives its facts typed (times as
 * numbers, the tier by name, counts as integers), and a detail of an
 * unknown shape gives an empty object rather than a guess.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ctld/events.c"

static json_t *data_of(const char *kind, const char *detail)
{
    json_t *d = ctld_event_data(kind, detail);
    assert_non_null(d);
    assert_true(json_is_object(d));
    return d;
}

static void run_ended_is_typed(void **state)
{
    (void)state;
    json_t *d = data_of("run-ended",
                        "start=1796131456.959 end=1796135058.5 gpus=8 model=H100-80GB tier=0");
    assert_true(json_is_real(json_object_get(d, "start")));
    assert_true(json_real_value(json_object_get(d, "start")) == 1796131456.959);
    assert_true(json_real_value(json_object_get(d, "end")) == 1796135058.5);
    assert_true(json_is_integer(json_object_get(d, "gpus")));
    assert_int_equal(json_integer_value(json_object_get(d, "gpus")), 8);
    assert_string_equal(json_string_value(json_object_get(d, "model")), "H100-80GB");
    assert_string_equal(json_string_value(json_object_get(d, "tier")), "guaranteed");
    json_decref(d);
    d = data_of("run-ended", "start=1 end=2 gpus=1 model=A100-80GB tier=1");
    assert_string_equal(json_string_value(json_object_get(d, "tier")), "opportunistic");
    json_decref(d);
}

static void sentences_are_typed(void **state)
{
    (void)state;
    json_t *d = data_of("reserved", "to start by 1796135058 (in 3600 s)");
    assert_true(json_real_value(json_object_get(d, "start_by")) == 1796135058.0);
    assert_true(json_real_value(json_object_get(d, "in_s")) == 3600.0);
    json_decref(d);
    d = data_of("preempted", "for job 42 (team-a, guaranteed); signal 10, grace 30 s, 1800 "
                             "GPU-s since the last checkpoint");
    assert_int_equal(json_integer_value(json_object_get(d, "for_job")), 42);
    assert_string_equal(json_string_value(json_object_get(d, "for_tenant")), "team-a");
    assert_int_equal(json_integer_value(json_object_get(d, "signal")), 10);
    assert_true(json_real_value(json_object_get(d, "grace_s")) == 30.0);
    assert_true(json_real_value(json_object_get(d, "lost_gpu_s")) == 1800.0);
    assert_string_equal(json_string_value(json_object_get(d, "cause")), "reclaim");
    assert_null(json_object_get(d, "tier")); /* written before the tier was: unknown */
    json_decref(d);
    /* the preemptor's own tier, written since it is recorded */
    d = data_of("preempted", "for job 43 (team-c, opportunistic, reclaim); signal 10, grace "
                             "60 s, 0 GPU-s since the last checkpoint");
    assert_string_equal(json_string_value(json_object_get(d, "for_tenant")), "team-c");
    assert_string_equal(json_string_value(json_object_get(d, "tier")), "opportunistic");
    assert_string_equal(json_string_value(json_object_get(d, "cause")), "reclaim");
    json_decref(d);
    d = data_of("preempted", "for job 44 (vision, opportunistic, time-sharing, level 0 over 2); "
                             "signal 10, grace 3 s, 40 GPU-s since the last checkpoint");
    assert_string_equal(json_string_value(json_object_get(d, "tier")), "opportunistic");
    assert_string_equal(json_string_value(json_object_get(d, "cause")), "time-sharing");
    json_decref(d);
    /* a time-sharing preemption (las levels) */
    d = data_of("preempted", "for job 7 (vision, time-sharing, level 0 over 2); signal 10, "
                             "grace 3 s, 40 GPU-s since the last checkpoint");
    assert_int_equal(json_integer_value(json_object_get(d, "for_job")), 7);
    assert_string_equal(json_string_value(json_object_get(d, "for_tenant")), "vision");
    assert_string_equal(json_string_value(json_object_get(d, "cause")), "time-sharing");
    assert_true(json_real_value(json_object_get(d, "grace_s")) == 3.0);
    json_decref(d);
    d = data_of("started", "on r1-n03 and others");
    assert_string_equal(json_string_value(json_object_get(d, "node")), "r1-n03");
    assert_true(json_is_true(json_object_get(d, "more_nodes")));
    json_decref(d);
    d = data_of("started", "on r1-n03,r1-n04,r2-n01");
    assert_int_equal(json_array_size(json_object_get(d, "nodes")), 3);
    assert_string_equal(json_string_value(json_array_get(json_object_get(d, "nodes"), 2)),
                        "r2-n01");
    assert_false(json_is_true(json_object_get(d, "more_nodes")));
    json_decref(d);
    d = data_of("started", "on a,b and 3 more");
    assert_int_equal(json_array_size(json_object_get(d, "nodes")), 2);
    assert_true(json_is_true(json_object_get(d, "more_nodes")));
    json_decref(d);
    d = data_of("requeued", "every rank stopped (checkpointed); eligible again at 1796135100");
    assert_string_equal(json_string_value(json_object_get(d, "outcome")), "checkpointed");
    assert_true(json_real_value(json_object_get(d, "eligible_at")) == 1796135100.0);
    json_decref(d);
    d = data_of("requeued", "checkpointed; eligible again at 1796135100");
    assert_string_equal(json_string_value(json_object_get(d, "outcome")), "checkpointed");
    assert_true(json_real_value(json_object_get(d, "eligible_at")) == 1796135100.0);
    json_decref(d);
    d = data_of("failed", "1 of 4 ranks failed; the gang stops as one");
    assert_int_equal(json_integer_value(json_object_get(d, "ranks_failed")), 1);
    assert_int_equal(json_integer_value(json_object_get(d, "ranks")), 4);
    json_decref(d);
}

static void unknown_shapes_give_nothing(void **state)
{
    (void)state;
    const char *odd[][2] = {{"reserved", "at +25m"}, {"preempted", "for job x"},
                            {"started", ""}, {"cancel", NULL}, {"run-ended", "start="},
                            {"output", "rank 0 stdout\nx=1 y=2"}};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        json_t *d = data_of(odd[i][0], odd[i][1]);
        size_t n = json_object_size(d);
        if (strcmp(odd[i][0], "output") == 0) { /* only its header line is read */
            assert_null(json_object_get(d, "x"));
            assert_int_equal(json_integer_value(json_object_get(d, "rank")), 0);
        } else {
            assert_int_equal(n, 0);
        }
        json_decref(d);
    }
    /* a value longer than the limit is skipped, not cut */
    char big[400] = "gpus=";
    memset(big + 5, '7', 300);
    json_t *d = data_of("run-ended", big);
    assert_int_equal(json_object_size(d), 0);
    json_decref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(run_ended_is_typed),
        cmocka_unit_test(sentences_are_typed),
        cmocka_unit_test(unknown_shapes_give_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
