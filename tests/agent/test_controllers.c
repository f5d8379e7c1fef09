/*
 * test_controllers.c - the agent's --controller list (controllers.c): what
 * a list may hold and how each bad entry is named, and which controller the
 * agent talks to after each kind of failure: round and round the list, a
 * standby's hint followed once, a stale hint that cannot trap the agent
 * between two controllers, a hint that answered followed again later.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent/controllers.h"

static void parse_ok(void **state)
{
    (void)state;
    ts_ctls c;
    ts_err e;
    assert_int_equal(agent_ctls_parse("http://a:1", &c, &e), 0);
    assert_int_equal(c.n, 1);
    assert_string_equal(agent_ctls_url(&c), "http://a:1");
    assert_int_equal(agent_ctls_parse("http://a:1/,https://b:2//,http://[::1]:3", &c, &e), 0);
    assert_int_equal(c.n, 3);
    assert_string_equal(c.url[0], "http://a:1");
    assert_string_equal(c.url[1], "https://b:2");
    assert_string_equal(c.url[2], "http://[::1]:3");
    assert_string_equal(agent_ctls_url(&c), "http://a:1");
    /* the documented maximum, exactly */
    char list[TS_CTLS_MAX * 32] = "";
    for (int i = 0; i < TS_CTLS_MAX; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%shttp://h%d:1",
                 i ? "," : "", i);
    assert_int_equal(agent_ctls_parse(list, &c, &e), 0);
    assert_int_equal(c.n, TS_CTLS_MAX);
    /* a URL of 255 bytes fits, 256 does not */
    char url[TS_CTL_URL_MAX + 1];
    memset(url, 'x', sizeof url);
    memcpy(url, "http://", 7);
    url[TS_CTL_URL_MAX - 1] = '\0';
    assert_int_equal(agent_ctls_parse(url, &c, &e), 0);
    url[TS_CTL_URL_MAX - 1] = 'x';
    url[TS_CTL_URL_MAX] = '\0';
    assert_int_equal(agent_ctls_parse(url, &c, &e), TS_EINVAL);
    assert_non_null(strstr(e.msg, "URL 1"));
    assert_non_null(strstr(e.msg, "longer than 255 bytes"));
}

static void expect_error(const char *list, const char *want1, const char *want2)
{
    ts_ctls c;
    ts_err e = {0};
    if (agent_ctls_parse(list, &c, &e) != TS_EINVAL)
        fail_msg("\"%s\": accepted", list);
    if (!strstr(e.msg, want1) || (want2 && !strstr(e.msg, want2)))
        fail_msg("\"%s\": got \"%s\", wanted \"%s\" and \"%s\"", list, e.msg, want1,
                 want2 ? want2 : "");
}

static void parse_errors(void **state)
{
    (void)state;
    expect_error("", "URL 1 is empty", NULL);
    expect_error("http://a:1,", "URL 2 is empty", NULL);
    expect_error("http://a:1,,http://b:1", "URL 2 is empty", NULL);
    expect_error("http://a:1,ftp://b:1", "URL 2 \"ftp://b:1\"", "http:// or https://");
    expect_error("a:1", "URL 1 \"a:1\"", "http:// or https://");
    expect_error("http://", "URL 1", "no host");
    expect_error("http://a:1,https:///x", "URL 2", "no host");
    expect_error("http://a:1, http://b:1", "URL 2", "blanks or control characters");
    expect_error("http://a\t:1", "URL 1", "blanks or control characters");
    expect_error("http://a:1,http://b:1,http://a:1/", "URL 3 \"http://a:1\"", "repeat of URL 1");
    char list[(TS_CTLS_MAX + 1) * 32] = "";
    for (int i = 0; i <= TS_CTLS_MAX; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%shttp://h%d:1",
                 i ? "," : "", i);
    expect_error(list, "more than 8 URLs", NULL);
}

static void round_robin(void **state)
{
    (void)state;
    ts_ctls c;
    ts_err e;
    assert_int_equal(agent_ctls_parse("http://a,http://b,http://c", &c, &e), 0);
    assert_true(agent_ctls_fail(&c, NULL));
    assert_string_equal(agent_ctls_url(&c), "http://b");
    assert_true(agent_ctls_fail(&c, NULL));
    assert_string_equal(agent_ctls_url(&c), "http://c");
    assert_true(agent_ctls_fail(&c, NULL));
    assert_string_equal(agent_ctls_url(&c), "http://a");
    /* one controller: it stays */
    assert_int_equal(agent_ctls_parse("http://a", &c, &e), 0);
    assert_false(agent_ctls_fail(&c, NULL));
    assert_string_equal(agent_ctls_url(&c), "http://a");
    /* even when it names itself or another as the leader: the hint is
     * followed (the leader need not be listed) */
    assert_false(agent_ctls_fail(&c, "http://a/"));
    assert_true(agent_ctls_fail(&c, "http://z:9"));
    assert_string_equal(agent_ctls_url(&c), "http://z:9");
    assert_true(agent_ctls_fail(&c, NULL));
    assert_string_equal(agent_ctls_url(&c), "http://a");
}

static void hints(void **state)
{
    (void)state;
    ts_ctls c;
    ts_err e;
    assert_int_equal(agent_ctls_parse("http://a,http://b,http://c", &c, &e), 0);
    /* a standby names a listed leader: go there */
    assert_true(agent_ctls_fail(&c, "http://c"));
    assert_string_equal(agent_ctls_url(&c), "http://c");
    /* it answers; later it fails without a word: the entry after a */
    agent_ctls_ok(&c);
    assert_true(agent_ctls_fail(&c, NULL));
    assert_string_equal(agent_ctls_url(&c), "http://b");
    /* unusable hints are ignored */
    assert_true(agent_ctls_fail(&c, "ftp://x"));
    assert_string_equal(agent_ctls_url(&c), "http://c");
    assert_true(agent_ctls_fail(&c, ""));
    assert_string_equal(agent_ctls_url(&c), "http://a");
    assert_true(agent_ctls_fail(&c, "http://evil host"));
    assert_string_equal(agent_ctls_url(&c), "http://b");
}

static void stale_hint(void **state)
{
    (void)state;
    ts_ctls c;
    ts_err e;
    /* a standby keeps naming c, which is dead; b is the new leader */
    assert_int_equal(agent_ctls_parse("http://a,http://b,http://c", &c, &e), 0);
    assert_true(agent_ctls_fail(&c, "http://c"));
    assert_string_equal(agent_ctls_url(&c), "http://c");
    assert_true(agent_ctls_fail(&c, NULL)); /* c refuses */
    assert_string_equal(agent_ctls_url(&c), "http://b");
    /* two standbys naming each other: each hint once, then on down the list */
    assert_int_equal(agent_ctls_parse("http://a,http://b,http://c", &c, &e), 0);
    assert_true(agent_ctls_fail(&c, "http://b"));
    assert_string_equal(agent_ctls_url(&c), "http://b");
    /* b's own hint is not followed: the list moves on from a, to b itself */
    assert_false(agent_ctls_fail(&c, "http://a"));
    assert_string_equal(agent_ctls_url(&c), "http://b");
    /* b is now the entry in use; its hint, a, is followed once */
    assert_true(agent_ctls_fail(&c, "http://a"));
    assert_string_equal(agent_ctls_url(&c), "http://a");
    assert_true(agent_ctls_fail(&c, "http://b"));
    assert_string_equal(agent_ctls_url(&c), "http://c");
    /* every entry within 2n failures, whatever the hints say */
    assert_int_equal(agent_ctls_parse("http://a,http://b,http://c,http://d", &c, &e), 0);
    bool seen[4] = {false};
    for (int i = 0; i < 2 * c.n; i++) {
        agent_ctls_fail(&c, "http://gone:1");
        for (int k = 0; k < c.n; k++)
            seen[k] = seen[k] || strcmp(agent_ctls_url(&c), c.url[k]) == 0;
    }
    assert_true(seen[0] && seen[1] && seen[2] && seen[3]);
}

/* Short pauses while a failover may be under way, then long ones; one
 * controller always pauses long; a success starts the count again. */
static void pauses(void **state)
{
    (void)state;
    ts_ctls c;
    ts_err e;
    assert_int_equal(agent_ctls_parse("http://a:1,http://b:2,http://c:3", &c, &e), 0);
    for (int i = 0; i < TS_CTLS_QUICK_PAUSES; i++)
        assert_true(agent_ctls_pause_s(&c) == TS_CTLS_PAUSE_QUICK_S);
    for (int i = 0; i < 3; i++)
        assert_true(agent_ctls_pause_s(&c) == TS_CTLS_PAUSE_S);
    agent_ctls_ok(&c);
    assert_true(agent_ctls_pause_s(&c) == TS_CTLS_PAUSE_QUICK_S);
    assert_int_equal(agent_ctls_parse("http://a:1", &c, &e), 0);
    assert_true(agent_ctls_pause_s(&c) == TS_CTLS_PAUSE_S);
    assert_true(TS_CTLS_PAUSE_QUICK_S < TS_CTLS_PAUSE_S);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_ok),     cmocka_unit_test(parse_errors),
        cmocka_unit_test(round_robin),  cmocka_unit_test(hints),
        cmocka_unit_test(stale_hint),   cmocka_unit_test(pauses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
