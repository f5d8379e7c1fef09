/*
 * test_name_range.c - node-name range patterns ("h100-[001-004,7,10-12]"),
 * the grammar behind the cluster YAML's `names:` key, tested alone.
 *
 * Expansion must give exactly the names written, in order: prefix and suffix
 * kept, lists and ranges mixed, and zero-padding taken from a low bound
 * written with a leading zero. Every error the parser can report is pinned
 * with its full message, since the loader passes it on to the user with only
 * "file:line: key: " in front; the limits (parts, digits, names) are checked
 * on both sides of the boundary. ts_name_range_name must refuse a name that
 * does not fit the caller's buffer rather than truncate it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "model/name_range.h"

#define NAME_BUF_BYTES 64

/* Parses pattern and checks it expands to exactly the want[0..nwant-1]. */
static void expect_names(const char *pattern, const char *const *want, long nwant)
{
    ts_name_range r;
    ts_err err = {0};
    char name[NAME_BUF_BYTES];
    assert_int_equal(ts_name_range_parse(pattern, &r, &err), 0);
    assert_int_equal(r.count, nwant);
    for (long i = 0; i < nwant; i++) {
        assert_true(ts_name_range_name(&r, i, name, sizeof name));
        assert_string_equal(name, want[i]);
    }
}

/* Parses pattern and checks it fails with TS_EINVAL and exactly msg. */
static void expect_error(const char *pattern, const char *msg)
{
    ts_name_range r;
    ts_err err = {0};
    assert_int_equal(ts_name_range_parse(pattern, &r, &err), TS_EINVAL);
    assert_int_equal(err.code, TS_EINVAL);
    assert_string_equal(err.msg, msg);
}

#define NAMES(...) (const char *const[]){__VA_ARGS__}, \
    (long)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

static void test_simple_range(void **state)
{
    (void)state;
    expect_names("node-[1-4]", NAMES("node-1", "node-2", "node-3", "node-4"));
    expect_names("n[7]", NAMES("n7"));
    expect_names("[1-3]", NAMES("1", "2", "3"));       /* empty prefix */
    expect_names("rack[0-1].gpu", NAMES("rack0.gpu", "rack1.gpu")); /* suffix kept */
    expect_names("big-[99-100]", NAMES("big-99", "big-100"));
    expect_names("a[0-2]", NAMES("a0", "a1", "a2")); /* a lone 0 is not padding */
}

static void test_zero_padding_width(void **state)
{
    (void)state;
    expect_names("h100-[001-004]", NAMES("h100-001", "h100-002", "h100-003", "h100-004"));
    expect_names("r-[008-011]", NAMES("r-008", "r-009", "r-010", "r-011"));
    expect_names("n[08-11]", NAMES("n08", "n09", "n10", "n11"));
    /* the width is a minimum: numbers longer than it are written in full */
    ts_name_range r;
    char name[NAME_BUF_BYTES];
    assert_int_equal(ts_name_range_parse("n[098-1000]", &r, NULL), 0);
    assert_int_equal(r.count, 903);
    assert_true(ts_name_range_name(&r, 0, name, sizeof name));
    assert_string_equal(name, "n098");
    assert_true(ts_name_range_name(&r, r.count - 1, name, sizeof name));
    assert_string_equal(name, "n1000");
    /* only the low bound sets the width; a padded high bound does not */
    expect_names("n[9-010]", NAMES("n9", "n10"));
    expect_names("n[00-01]", NAMES("n00", "n01"));
}

static void test_lists_and_ranges(void **state)
{
    (void)state;
    expect_names("x[1-2,05,7-8]y", NAMES("x1y", "x2y", "x05y", "x7y", "x8y"));
    expect_names("h100-[001-004,7,10-12]",
                 NAMES("h100-001", "h100-002", "h100-003", "h100-004", "h100-7", "h100-10",
                       "h100-11", "h100-12"));
    /* each part keeps its own width */
    expect_names("g[1,002,3]", NAMES("g1", "g002", "g3"));
    /* parts are not sorted or deduplicated: the loader reports duplicate nodes */
    expect_names("d[3,1,1]", NAMES("d3", "d1", "d1"));
}

static void test_not_a_pattern(void **state)
{
    (void)state;
    static const char *const bad[] = {"a-1", "a[1", "a]1[", "a[1]b[2]", "a[1]]", "]a[1]", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char msg[TS_ERR_MSG_MAX];
        snprintf(msg, sizeof msg, "must be a name pattern with one [lo-hi,...] range, such as "
                 "node-[001-016], got \"%s\"", bad[i]);
        expect_error(bad[i], msg);
    }
}

static void test_long_pattern_quoted_short(void **state)
{
    (void)state;
    /* 45 characters: the message quotes the first 40 and marks the cut */
    expect_error("abcdefghijabcdefghijabcdefghijabcdefghij-long",
                 "must be a name pattern with one [lo-hi,...] range, such as node-[001-016], "
                 "got \"abcdefghijabcdefghijabcdefghijabcdefghij...\"");
}

static void test_bad_numbers(void **state)
{
    (void)state;
    static const char *const bad[] = {"a[]", "a[x]", "a[1-]", "a[-1]", "a[1,]", "a[,1]",
                                      "a[1-x]", "a[1234567890]", "a[1-1234567890]",
                                      "a[ 1]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char msg[TS_ERR_MSG_MAX];
        snprintf(msg, sizeof msg, "must be a range of numbers of 1..9 digits inside [...], "
                 "got \"%s\"", bad[i]);
        expect_error(bad[i], msg);
    }
    /* nine digits is the limit, not over it */
    expect_names("a[999999999]", NAMES("a999999999"));
    expect_names("a[000000001-000000002]", NAMES("a000000001", "a000000002"));
}

static void test_bad_separator(void **state)
{
    (void)state;
    static const char *const bad[] = {"a[1;2]", "a[1-2-3]", "a[1 ,2]", "a[1x]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char msg[TS_ERR_MSG_MAX];
        snprintf(msg, sizeof msg, "must be a name pattern such as node-[001-016] or "
                 "node-[1-4,9], got \"%s\"", bad[i]);
        expect_error(bad[i], msg);
    }
}

static void test_backwards(void **state)
{
    (void)state;
    expect_error("a-[3-1]", "range 3-1 runs backwards");
    expect_error("a-[1-2,010-009]", "range 10-9 runs backwards");
    expect_names("a-[5-5]", NAMES("a-5"));
}

static void test_too_many_names(void **state)
{
    (void)state;
    ts_name_range r;
    char name[NAME_BUF_BYTES];
    assert_int_equal(ts_name_range_parse("n[1-10000]", &r, NULL), 0);
    assert_int_equal(r.count, TS_NAME_RANGE_MAX_NAMES);
    assert_true(ts_name_range_name(&r, r.count - 1, name, sizeof name));
    assert_string_equal(name, "n10000");
    expect_error("n[1-10001]", "expands to more than 10000 names");
    expect_error("n[1-99999]", "expands to more than 10000 names");
    expect_error("n[1-999999999]", "expands to more than 10000 names");
    /* the limit counts all parts together */
    assert_int_equal(ts_name_range_parse("n[1-5000,1-5000]", &r, NULL), 0);
    expect_error("n[1-5000,1-5001]", "expands to more than 10000 names");
}

static void test_too_many_parts(void **state)
{
    (void)state;
    char pattern[512] = "p[";
    for (int i = 0; i < TS_NAME_RANGE_MAX_PARTS; i++) {
        size_t used = strlen(pattern);
        snprintf(pattern + used, sizeof pattern - used, "%s%d", i ? "," : "", i);
    }
    strcat(pattern, "]");
    ts_name_range r;
    char name[NAME_BUF_BYTES];
    assert_int_equal(ts_name_range_parse(pattern, &r, NULL), 0);
    assert_int_equal(r.nparts, TS_NAME_RANGE_MAX_PARTS);
    assert_int_equal(r.count, TS_NAME_RANGE_MAX_PARTS);
    assert_true(ts_name_range_name(&r, TS_NAME_RANGE_MAX_PARTS - 1, name, sizeof name));
    assert_string_equal(name, "p63");
    pattern[strlen(pattern) - 1] = '\0';
    strcat(pattern, ",64]");
    expect_error(pattern, "more than 64 parts in [...]");
}

static void test_name_must_fit(void **state)
{
    (void)state;
    ts_name_range r;
    char name[8];
    assert_int_equal(ts_name_range_parse("node-[9-10]", &r, NULL), 0);
    /* "node-9" is 6 characters: fits in 7 bytes, not in 6 */
    assert_true(ts_name_range_name(&r, 0, name, 7));
    assert_string_equal(name, "node-9");
    assert_false(ts_name_range_name(&r, 0, name, 6));
    assert_false(ts_name_range_name(&r, 1, name, 7)); /* "node-10" needs 8 */
    assert_true(ts_name_range_name(&r, 1, name, 8));
    assert_string_equal(name, "node-10");
}

static void test_null_err(void **state)
{
    (void)state;
    ts_name_range r;
    assert_int_equal(ts_name_range_parse("a-1", &r, NULL), TS_EINVAL);
    assert_int_equal(ts_name_range_parse("a[3-1]", &r, NULL), TS_EINVAL);
    assert_int_equal(ts_name_range_parse("a[1-99999]", &r, NULL), TS_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple_range),
        cmocka_unit_test(test_zero_padding_width),
        cmocka_unit_test(test_lists_and_ranges),
        cmocka_unit_test(test_not_a_pattern),
        cmocka_unit_test(test_long_pattern_quoted_short),
        cmocka_unit_test(test_bad_numbers),
        cmocka_unit_test(test_bad_separator),
        cmocka_unit_test(test_backwards),
        cmocka_unit_test(test_too_many_names),
        cmocka_unit_test(test_too_many_parts),
        cmocka_unit_test(test_name_must_fit),
        cmocka_unit_test(test_null_err),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
