/*
 * test_net_tool.c - the runner of the kernel's tools for tenant networks
 * (agent_net_run_tool, netns_priv.h): a tool that hangs fails its call at
 * the deadline and is killed, whatever it does with its stdin.
 *
 * Proves: a tool that exits 0 succeeds and one that exits 1 fails with the
 * first line of its stderr; a tool that sleeps past the deadline fails with
 * TS_ETIMEDOUT well before it would have ended, and is reaped (no child
 * left); the same for one that closes its stderr first (the end of stderr
 * is not the end of the tool), and with 1 MiB on its stdin that it never
 * reads (a blocking
 * write would have waited for it); a tool that reads 1 MiB of stdin gets
 * all of it.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "agent/netns_priv.h"

#define DEADLINE_MS 300
#define BIG_INPUT (1 << 20)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void assert_no_child(void)
{
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

static char *big_input(void)
{
    char *s = malloc(BIG_INPUT + 1);
    assert_non_null(s);
    memset(s, 'x', BIG_INPUT);
    s[BIG_INPUT] = '\0';
    return s;
}

static void test_exit_status(void **state)
{
    (void)state;
    ts_err e;
    const char *ok[] = {"true", NULL};
    assert_int_equal(agent_net_run_tool(ok, NULL, &e), 0);
    const char *bad[] = {"sh", "-c", "echo 'first line' >&2; echo second >&2; exit 1", NULL};
    assert_int_equal(agent_net_run_tool(bad, NULL, &e), TS_EIO);
    assert_non_null(strstr(e.msg, "sh failed: first line"));
    assert_null(strstr(e.msg, "second"));
    assert_no_child();
}

static void test_hang_killed(void **state)
{
    (void)state;
    ts_err e;
    const char *hang[] = {"sleep", "30", NULL};
    double t0 = now_s();
    assert_int_equal(agent_net_run_tool(hang, NULL, &e), TS_ETIMEDOUT);
    double took = now_s() - t0;
    assert_true(took >= DEADLINE_MS / 1000.0 * 0.9);
    assert_true(took < 10.0);
    assert_non_null(strstr(e.msg, "sleep did not finish within 300 ms"));
    assert_no_child();
}

static void test_closed_stderr(void **state)
{
    (void)state;
    ts_err e;
    /* closes its stderr, then hangs: reaped at the deadline all the same */
    const char *hang[] = {"sh", "-c", "exec 2>&-; sleep 30", NULL};
    double t0 = now_s();
    assert_int_equal(agent_net_run_tool(hang, NULL, &e), TS_ETIMEDOUT);
    assert_true(now_s() - t0 < 10.0);
    assert_no_child();
}

static void test_unread_stdin(void **state)
{
    (void)state;
    ts_err e;
    char *in = big_input();
    const char *hang[] = {"sleep", "30", NULL};
    double t0 = now_s();
    assert_int_equal(agent_net_run_tool(hang, in, &e), TS_ETIMEDOUT);
    assert_true(now_s() - t0 < 10.0);
    assert_no_child();
    /* one that reads it all (and checks the count) succeeds */
    const char *count[] = {"sh", "-c", "test \"$(wc -c)\" -eq 1048576", NULL};
    agent_net_set_tool_timeout_ms(0);
    assert_int_equal(agent_net_run_tool(count, in, &e), 0);
    agent_net_set_tool_timeout_ms(DEADLINE_MS);
    free(in);
    assert_no_child();
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the agent does */
    agent_net_set_tool_timeout_ms(DEADLINE_MS);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_status),
        cmocka_unit_test(test_hang_killed),
        cmocka_unit_test(test_closed_stderr),
        cmocka_unit_test(test_unread_stdin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
