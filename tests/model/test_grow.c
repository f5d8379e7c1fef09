/*
 * test_grow.c - the one growth rule of the tree's arrays (tessera/grow.h):
 * from the first capacity, doubling until the need fits; nothing moves
 * when it fits already; a need past what an int capacity can double to is
 * refused with the array left as it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdlib.h>

#include "tessera/error.h"
#include "tessera/grow.h"

static void doubles_from_the_first_capacity(void **state)
{
    (void)state;
    int *v = NULL, cap = 0;
    assert_int_equal(ts_grow((void **)&v, &cap, 1, 8, sizeof *v), 0);
    assert_int_equal(cap, 8);
    v[7] = 7;
    int *was = v;
    assert_int_equal(ts_grow((void **)&v, &cap, 8, 8, sizeof *v), 0);
    assert_ptr_equal(v, was); /* fits: untouched */
    assert_int_equal(ts_grow((void **)&v, &cap, 9, 8, sizeof *v), 0);
    assert_int_equal(cap, 16);
    assert_int_equal(ts_grow((void **)&v, &cap, 100, 8, sizeof *v), 0);
    assert_int_equal(cap, 128);
    assert_int_equal(v[7], 7);
    free(v);
}

static void an_overflowing_need_is_refused(void **state)
{
    (void)state;
    int *v = NULL, cap = 0;
    assert_int_equal(ts_grow((void **)&v, &cap, 4, 4, sizeof *v), 0);
    int *was = v;
    assert_int_equal(ts_grow((void **)&v, &cap, INT_MAX, 4, sizeof *v), TS_ENOMEM);
    assert_ptr_equal(v, was);
    assert_int_equal(cap, 4);
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(doubles_from_the_first_capacity),
        cmocka_unit_test(an_overflowing_need_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
