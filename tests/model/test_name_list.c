/*
 * test_name_list.c - ts_name_listed, the one answer to "is this name in a
 * comma-separated list" for tenants' registries, the agent's plain-HTTP
 * registries and published ports, and the controller's user lists.
 *
 * An entry matches whole and byte for byte (no prefix, no suffix, no case
 * folding); the first, a middle and the last entry are all found; a NULL or
 * empty list names nothing; an empty name matches only an empty entry (the
 * controller's wrapper refuses it itself).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tessera/name_list.h"

static void test_whole_entries(void **state)
{
    (void)state;
    assert_true(ts_name_listed("a,bb,ccc", "a"));
    assert_true(ts_name_listed("a,bb,ccc", "bb"));
    assert_true(ts_name_listed("a,bb,ccc", "ccc"));
    assert_true(ts_name_listed("8080/tcp", "8080/tcp"));
    assert_false(ts_name_listed("a,bb,ccc", "b"));
    assert_false(ts_name_listed("a,bb,ccc", "cc"));
    assert_false(ts_name_listed("a,bb,ccc", "cccc"));
    assert_false(ts_name_listed("a,bb,ccc", "a,bb"));
    assert_false(ts_name_listed("reg.example.com", "REG.example.com"));
    assert_false(ts_name_listed("a, bb", "bb"));
}

static void test_empty_and_null(void **state)
{
    (void)state;
    assert_false(ts_name_listed(NULL, "a"));
    assert_false(ts_name_listed("", "a"));
    assert_false(ts_name_listed("", ""));
    assert_false(ts_name_listed("a,b", ""));
    assert_false(ts_name_listed("a,", ""));
    assert_true(ts_name_listed(",a", ""));
    assert_true(ts_name_listed("a,,b", ""));
    assert_true(ts_name_listed("a,,b", "b"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_entries),
        cmocka_unit_test(test_empty_and_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
