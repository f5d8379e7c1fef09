/*
 * test_array_range.c - a large array's pending elements as a range less a
 * short list (src/ctld/array_range.c): elements taken lowest first move
 * next; one taken out of turn leaves a hole that the lowest-first order
 * skips and that next swallows when it gets there; counts, the lowest
 * pending indices and Slurm's text follow every step, and a short buffer
 * is cut with "..." rather than overrun.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ctld/array_range.c"

static void text_is(const ctld_range *r, const char *want)
{
    char buf[128];
    ctld_range_text(r, buf, sizeof buf);
    assert_string_equal(buf, want);
}

static void lowest_first_moves_next(void **state)
{
    (void)state;
    ctld_range r = {.size = 100000, .next = 64};
    assert_int_equal(ctld_range_count(&r), 100000 - 64);
    assert_false(ctld_range_has(&r, 63));
    assert_true(ctld_range_has(&r, 64));
    assert_false(ctld_range_has(&r, 100000));
    int out[4];
    assert_int_equal(ctld_range_lowest(&r, 4, out), 4);
    assert_int_equal(out[0], 64);
    assert_int_equal(out[3], 67);
    for (int i = 0; i < 4; i++)
        assert_int_equal(ctld_range_take(&r, out[i]), 0);
    assert_int_equal(r.next, 68);
    assert_int_equal(r.ntaken, 0);
    text_is(&r, "68-99999");
    ctld_range_fini(&r);
}

static void out_of_turn_leaves_a_hole(void **state)
{
    (void)state;
    ctld_range r = {.size = 20, .next = 5};
    assert_int_equal(ctld_range_take(&r, 9), 0);
    assert_int_equal(ctld_range_take(&r, 7), 0);
    assert_int_equal(ctld_range_take(&r, 19), 0);
    assert_int_equal(r.next, 5);
    assert_int_equal(ctld_range_count(&r), 12);
    assert_false(ctld_range_has(&r, 7));
    assert_true(ctld_range_has(&r, 8));
    text_is(&r, "5-6,8,10-18");
    int out[8];
    assert_int_equal(ctld_range_lowest(&r, 5, out), 5);
    int want[] = {5, 6, 8, 10, 11};
    for (int i = 0; i < 5; i++)
        assert_int_equal(out[i], want[i]);
    /* next reaches the hole at 7: it jumps over it, and the list forgets it */
    assert_int_equal(ctld_range_next_after(&r, 5), 6);
    assert_int_equal(ctld_range_take(&r, 5), 0);
    assert_int_equal(ctld_range_next_after(&r, 6), 8);
    assert_int_equal(ctld_range_take(&r, 6), 0);
    assert_int_equal(r.next, 8);
    assert_int_equal(r.ntaken, 2); /* 9 and 19 */
    assert_int_equal(ctld_range_take(&r, 8), 0);
    assert_int_equal(r.next, 10);
    assert_int_equal(r.ntaken, 1);
    text_is(&r, "10-18");
    /* the last pending ones: nothing is left, and the text is empty */
    for (int i = 10; i < 19; i++)
        assert_int_equal(ctld_range_take(&r, i), 0);
    assert_int_equal(ctld_range_count(&r), 0);
    assert_int_equal(r.next, 20);
    assert_int_equal(ctld_range_lowest(&r, 5, out), 0);
    text_is(&r, "");
    ctld_range_fini(&r);
}

static void short_buffer_is_cut(void **state)
{
    (void)state;
    ctld_range r = {.size = 1000, .next = 0};
    for (int i = 1; i < 1000; i += 2)
        assert_int_equal(ctld_range_take(&r, i), 0);
    char buf[16];
    size_t need = ctld_range_text(&r, buf, sizeof buf);
    assert_true(need >= sizeof buf);
    assert_true(strlen(buf) < sizeof buf);
    assert_non_null(strstr(buf, "..."));
    assert_int_equal(strncmp(buf, "0,2,4", 5), 0);
    ctld_range_fini(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lowest_first_moves_next),
        cmocka_unit_test(out_of_turn_leaves_a_hole),
        cmocka_unit_test(short_buffer_is_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
