/*
 * test_elastic.c - the goodput-aware grant of spare GPUs (src/sched/elastic.c).
 *
 * The pool goes where the speedup gained per GPU is largest, a job with a
 * poor speedup curve gets less, a job nearer its end (less work left) more;
 * minimums always hold and nothing passes a
 * maximum or the pool; a size that spans one more node (a dip) is jumped
 * over; a job that holds GPUs keeps its size unless the change gains several
 * times the restart it costs; a job that changes anyway pays nothing; a
 * speedup curve is fitted from the step times measured at two sizes or more.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sched/elastic.h"
#include "tessera/cycle.h"

#define RESIZE_S 30.0

static const double SCALES[] = {0, 1, 1.9, 2.7, 3.4, 4.0, 4.5, 4.9, 5.2};
static const double FLAT[] = {0, 1, 1.1, 1.15, 1.2, 1.22, 1.23, 1.24, 1.25};
static const double DIP[] = {0, 1, 1.8, 2.5, 3.2, 2.9, 3.5, 4.0, 4.6};

static void test_goes_where_it_gains(void **state)
{
    (void)state;
    ts_elastic_job j[2] = {{1, 8, 1, SCALES, 1000, true}, {1, 8, 1, FLAT, 1000, true}};
    int t[2];
    int given = ts_elastic_grant(j, 2, 6, RESIZE_S, t);
    assert_true(t[0] + t[1] <= 6 && given == t[0] + t[1]);
    assert_true(t[0] >= 1 && t[1] >= 1 && t[0] <= 8 && t[1] <= 8);
    assert_true(t[0] > t[1]);
}

static void test_minimums_and_pool(void **state)
{
    (void)state;
    ts_elastic_job j[2] = {{2, 8, 2, SCALES, 1000, true}, {3, 8, 3, SCALES, 1000, true}};
    int t[2];
    assert_int_equal(ts_elastic_grant(j, 2, 5, RESIZE_S, t), 5);
    assert_int_equal(t[0], 2);
    assert_int_equal(t[1], 3);
    ts_elastic_job one = {1, 4, 1, SCALES, 1000, true};
    assert_int_equal(ts_elastic_grant(&one, 1, 64, RESIZE_S, t), 4); /* its maximum */
    assert_int_equal(t[0], 4);
}

static void test_jumps_the_dip(void **state)
{
    (void)state;
    ts_elastic_job j = {1, 8, 1, DIP, 1e5, true};
    int t;
    ts_elastic_grant(&j, 1, 8, RESIZE_S, &t);
    assert_int_equal(t, 8);
}

static void test_restart_cost(void **state)
{
    (void)state;
    /* holding 2 GPUs with 60 s left: 2 more would gain far less than 4 restarts */
    ts_elastic_job j = {1, 8, 2, SCALES, 60, false};
    int t;
    ts_elastic_grant(&j, 1, 4, RESIZE_S, &t);
    assert_int_equal(t, 2);
    j.remaining_s = 1e5; /* a long way to go: the grow pays */
    ts_elastic_grant(&j, 1, 4, RESIZE_S, &t);
    assert_int_equal(t, 4);
    j.remaining_s = 60;
    j.changing = true; /* restarting anyway: no cost to weigh */
    ts_elastic_grant(&j, 1, 4, RESIZE_S, &t);
    assert_int_equal(t, 4);
}

static void test_near_its_end_weighs_more(void **state)
{
    (void)state;
    /* alike but for the work left: the spare GPUs shorten most where one
     * job is 10 times nearer its end; it gets them, the other keeps 1 */
    ts_elastic_job j[2] = {{1, 8, 1, SCALES, 1e4, true}, {1, 8, 1, SCALES, 1e3, true}};
    int t[2];
    ts_elastic_grant(j, 2, 5, RESIZE_S, t);
    assert_int_equal(t[0], 1);
    assert_int_equal(t[1], 4);
    /* as equals they share */
    j[0].remaining_s = 1e3;
    ts_elastic_grant(j, 2, 5, RESIZE_S, t);
    assert_true(t[0] >= 2 && t[1] >= 2);
}

static void test_fit_from_step_times(void **state)
{
    (void)state;
    double step[9] = {0}, sp[9] = {0};
    step[2] = 1.0;
    assert_int_equal(ts_elastic_fit(step, 2, 8, sp), 1);
    assert_true(sp[4] == 0); /* one size: left as it was */
    /* 1.0 s at 2 GPUs, 0.6 s at 4: step = 0.2 + 1.6 / g */
    step[4] = 0.6;
    assert_int_equal(ts_elastic_fit(step, 2, 8, sp), 2);
    assert_true(sp[1] == 0);
    assert_float_equal(sp[2], 1.0, 1e-9);
    assert_float_equal(sp[4], 1.0 / 0.6, 1e-9);
    assert_float_equal(sp[8], 1.0 / 0.4, 1e-9); /* the fixed 0.2 s caps it */
    /* slower with more GPUs: a flat curve, never below 1 */
    step[4] = 1.5;
    ts_elastic_fit(step, 2, 8, sp);
    assert_float_equal(sp[8], 1.0, 1e-9);
    /* perfectly parallel: linear */
    step[4] = 0.5;
    ts_elastic_fit(step, 2, 8, sp);
    assert_float_equal(sp[8], 4.0, 1e-9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_goes_where_it_gains),
        cmocka_unit_test(test_minimums_and_pool),
        cmocka_unit_test(test_jumps_the_dip),
        cmocka_unit_test(test_restart_cost),
        cmocka_unit_test(test_near_its_end_weighs_more),
        cmocka_unit_test(test_fit_from_step_times),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
