/*
 * test_grow.c - the one growth rule of the tree's arrays (tessera/grow.h):
 * from the first capacity, doubling until the need fits; nothing moves
 * when it fits already; a need past what an int capacity can double to is
 * refused with the array left as it was. Parallel arrays on one capacity
 * grow together by the same rule. A block of arrays sized once:
 * every part aligned for any type and zeroed, the parts apart, and sizes that
 * overflow refused with no pointer touched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

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

static void parallel_arrays_grow_together(void **state)
{
    (void)state;
    double *d = NULL;
    char *c = NULL;
    int cap = 0;
    ts_block_part parts[] = {TS_GROW_PART(d), TS_GROW_PART(c)};
    assert_int_equal(ts_grow_parts(parts, 2, &cap, 1, 4), 0);
    assert_int_equal(cap, 4);
    d[3] = 3.5;
    c[3] = 'x';
    double *was = d;
    assert_int_equal(ts_grow_parts(parts, 2, &cap, 4, 4), 0);
    assert_ptr_equal(d, was); /* fits: untouched */
    assert_int_equal(ts_grow_parts(parts, 2, &cap, 9, 4), 0);
    assert_int_equal(cap, 16);
    d[15] = 1.0;
    c[15] = 'y';
    assert_true(d[3] == 3.5);
    assert_int_equal(c[3], 'x');
    assert_int_equal(ts_grow_parts(parts, 2, &cap, INT_MAX, 4), TS_ENOMEM);
    assert_int_equal(cap, 16);
    free(d);
    free(c);
}

static void a_block_holds_its_parts_apart_and_aligned(void **state)
{
    (void)state;
    char *bytes = NULL;
    double *d = NULL;
    int *none = NULL, *ints = NULL;
    ts_block_part parts[] = {TS_BLOCK_PART(bytes, 3), TS_BLOCK_PART(d, 5),
                             TS_BLOCK_PART(none, 0), TS_BLOCK_PART(ints, 7)};
    void *block = ts_block_alloc(parts, 4);
    assert_non_null(block);
    assert_ptr_equal(bytes, block);
    assert_int_equal((uintptr_t)d % alignof(max_align_t), 0);
    assert_int_equal((uintptr_t)ints % alignof(max_align_t), 0);
    assert_true((char *)d >= bytes + 3);
    assert_true((char *)ints >= (char *)(d + 5));
    for (int i = 0; i < 5; i++)
        assert_true(d[i] == 0.0);
    for (int i = 0; i < 7; i++)
        assert_int_equal(ints[i], 0);
    memset(bytes, 0xff, 3);
    memset(ints, 0xff, sizeof *ints * 7);
    assert_true(d[0] == 0.0 && d[4] == 0.0); /* its neighbours' writes miss it */
    free(block);
}

static void a_block_too_large_is_refused(void **state)
{
    (void)state;
    double *d = NULL;
    int *ints = NULL;
    ts_block_part parts[] = {TS_BLOCK_PART(ints, 4), TS_BLOCK_PART(d, SIZE_MAX / 4)};
    assert_null(ts_block_alloc(parts, 2));
    assert_null(d);
    assert_null(ints);
    ts_block_part two[] = {TS_BLOCK_PART(ints, SIZE_MAX / 6), TS_BLOCK_PART(d, SIZE_MAX / 16)};
    assert_null(ts_block_alloc(two, 2)); /* each fits, not both */
    assert_null(ints);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(doubles_from_the_first_capacity),
        cmocka_unit_test(an_overflowing_need_is_refused),
        cmocka_unit_test(parallel_arrays_grow_together),
        cmocka_unit_test(a_block_holds_its_parts_apart_and_aligned),
        cmocka_unit_test(a_block_too_large_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
