/*
 * test_session_proc.c - what an interactive session takes to be its task's
 * process (agent/session_proc.h): the task's own process or one below it,
 * and only while the pid is still the process the agent started.
 *
 * Proves: a pid the task had, once the task ended and the pid went to
 * another process (made so with ns_last_pid, as a task cycling pids would),
 * is not pinned; the task's child is pinned, a process outside its tree is
 * not; a target that ends after the pin is seen gone (agent_rec_alive).
 * (A start time is in clock ticks: a pid reused within its process's first
 * tick would not be told apart; a task has lived longer than that.)
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/launch_record.h"
#include "agent/session_proc.h"

#define REUSE_TRIES 200 /* other processes fork too: ns_last_pid is a race */
#define REUSE_AFTER_NS 50000000L /* 5 clock ticks */

/* A child that waits forever; it dies with this test (a failed assertion
 * leaves no process holding the test runner's output open) and holds none
 * of its descriptors. */
static pid_t sleeper(void)
{
    pid_t p = fork();
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int nul = open("/dev/null", O_RDWR);
        for (int fd = 0; fd < 3 && nul >= 0; fd++)
            dup2(nul, fd);
        for (;;)
            pause();
    }
    assert_true(p > 0);
    return p;
}

static void end(pid_t p)
{
    kill(p, SIGKILL);
    while (waitpid(p, NULL, 0) < 0 && errno == EINTR) {
    }
}

static unsigned long long start_of(pid_t p)
{
    unsigned long long t = 0;
    char state;
    assert_int_equal(agent_rec_proc_stat(p, &t, &state), 0);
    return t;
}

/* A new process given pid want (root: ns_last_pid); 0 where it cannot be. */
static pid_t sleeper_at(pid_t want)
{
    for (int i = 0; i < REUSE_TRIES; i++) {
        int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            return 0;
        char b[32];
        int n = snprintf(b, sizeof b, "%d", (int)want - 1);
        ssize_t w = write(fd, b, (size_t)n);
        close(fd);
        if (w != n)
            return 0;
        pid_t p = sleeper();
        if (p == want)
            return p;
        end(p);
    }
    return 0;
}

static void a_reused_pid_is_not_the_task(void **state)
{
    (void)state;
    pid_t task = sleeper();
    unsigned long long task_start = start_of(task);
    unsigned long long s = 0;
    assert_true(agent_sess_pin(task, task_start, task, &s));
    assert_true(agent_rec_alive(task, s));
    /* start times are in clock ticks (1/100 s): a task's pid reused within
     * the tick it started in would look the same; a task lives longer */
    nanosleep(&(struct timespec){0, REUSE_AFTER_NS}, NULL);
    end(task);
    pid_t other = sleeper_at(task); /* the task's pid, now another process's */
    if (other == 0) {
        skip(); /* not root, or the pid went elsewhere every time */
        return;
    }
    assert_int_equal(other, task);
    assert_false(agent_sess_pin(task, task_start, task, &s));
    assert_false(agent_rec_alive(task, task_start));
    end(other);
}

static void only_the_tasks_tree_is_pinned(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t task = fork();
    if (task == 0) { /* a runtime with one child: the container's process */
        close(fds[0]);
        pid_t c = sleeper();
        if (write(fds[1], &c, sizeof c) != (ssize_t)sizeof c)
            _exit(1);
        for (;;)
            pause();
    }
    close(fds[1]);
    pid_t child = 0;
    assert_int_equal(read(fds[0], &child, sizeof child), (ssize_t)sizeof child);
    close(fds[0]);
    pid_t outsider = sleeper();
    unsigned long long task_start = start_of(task), s = 0;
    assert_true(agent_sess_pin(task, task_start, child, &s));
    assert_true(agent_rec_alive(child, s));
    assert_false(agent_sess_pin(task, task_start, outsider, &s));
    assert_false(agent_sess_pin(task, task_start + 1, child, &s)); /* not the task's start */
    kill(child, SIGKILL);
    end(task);
    end(outsider);
}

static void a_target_that_ends_is_seen_gone(void **state)
{
    (void)state;
    pid_t task = sleeper();
    unsigned long long s = 0;
    assert_true(agent_sess_pin(task, start_of(task), task, &s));
    end(task);
    assert_false(agent_rec_alive(task, s));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_reused_pid_is_not_the_task),
        cmocka_unit_test(only_the_tasks_tree_is_pinned),
        cmocka_unit_test(a_target_that_ends_is_seen_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
