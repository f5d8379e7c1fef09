/*
 * test_body.c - the daemons' bounded answer sink (io/body.h): pieces
 * appended and kept a string; the piece that would pass the bound refused
 * (0, the transfer fails) with too_big set and what came before kept; an
 * answer exactly at the bound taken.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "io/body.h"

static void pieces_are_appended_as_a_string(void **state)
{
    (void)state;
    io_body b = {.max = 64};
    char one[] = "{\"a\":", two[] = "1}";
    assert_int_equal(io_body_sink(one, 1, 5, &b), 5);
    assert_int_equal(io_body_sink(two, 2, 1, &b), 2);
    assert_int_equal(b.len, 7);
    assert_string_equal(b.p, "{\"a\":1}");
    assert_false(b.too_big);
    free(b.p);
}

static void a_piece_past_the_bound_fails_the_transfer(void **state)
{
    (void)state;
    io_body b = {.max = 8};
    char data[] = "0123456789";
    assert_int_equal(io_body_sink(data, 1, 6, &b), 6);
    assert_int_equal(io_body_sink(data, 1, 3, &b), 0); /* 9 > 8 */
    assert_true(b.too_big);
    assert_int_equal(b.len, 6);
    assert_string_equal(b.p, "012345");
    free(b.p);
}

static void an_answer_at_the_bound_is_taken(void **state)
{
    (void)state;
    io_body b = {.max = 4};
    char data[] = "abcd";
    assert_int_equal(io_body_sink(data, 4, 1, &b), 4);
    assert_false(b.too_big);
    assert_string_equal(b.p, "abcd");
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pieces_are_appended_as_a_string),
        cmocka_unit_test(a_piece_past_the_bound_fails_the_transfer),
        cmocka_unit_test(an_answer_at_the_bound_is_taken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
