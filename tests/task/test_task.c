/*
 * test_task.c - the C task library (include/tessera/task.h) against the
 * protocol the agent reads (docs/agent-tasks.md): the checkpoint signal only
 * sets a flag that the loop sees between steps, the acknowledgement appears
 * whole under its name, step times are one parseable line each, and the
 * variables are read with their limits; outside Tessera every call is a
 * harmless no-op. Each case makes its own temporary directory.
 */
#define TESSERA_TASK_IMPLEMENTATION
#include "tessera/task.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tessera-task-XXXXXX");
    assert_non_null(mkdtemp(dir));
    unsetenv("TESSERA_CHECKPOINT_DONE");
    unsetenv("TESSERA_STEP_FILE");
    unsetenv("TESSERA_RESTARTS");
    unsetenv("TESSERA_CHECKPOINT_DIR");
    tessera_task_reset();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tessera_task_reset();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_signal_sets_flag(void **state)
{
    (void)state;
    assert_int_equal(tessera_task_init(0), 0);
    assert_int_equal(tessera_task_checkpoint_requested(), 0);
    assert_int_equal(raise(SIGUSR1), 0); /* the process survives: the handler ran */
    assert_int_equal(tessera_task_checkpoint_requested(), 1);
    assert_int_equal(tessera_task_checkpoint_requested(), 1); /* stays set */
    /* another signal of the job's choosing */
    tessera_task_reset();
    assert_int_equal(tessera_task_init(SIGUSR2), 0);
    assert_int_equal(raise(SIGUSR2), 0);
    assert_int_equal(tessera_task_checkpoint_requested(), 1);
    errno = 0;
    assert_int_equal(tessera_task_init(SIGKILL), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(tessera_task_init(-3), -1);
}

static void test_checkpoint_done(void **state)
{
    (void)state;
    assert_int_equal(tessera_task_checkpoint_done(), 0); /* unset: nothing to do */
    char ack[128];
    snprintf(ack, sizeof ack, "%s/ack", dir);
    setenv("TESSERA_CHECKPOINT_DONE", ack, 1);
    struct stat st;
    assert_int_not_equal(stat(ack, &st), 0);
    assert_int_equal(tessera_task_checkpoint_done(), 0);
    assert_int_equal(stat(ack, &st), 0);
    assert_true(st.st_size > 0);
    /* no temporary file left beside it */
    char cmd[160];
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 1", dir);
    assert_int_equal(system(cmd), 0);
    /* a directory that does not exist: an error, not a silent success */
    setenv("TESSERA_CHECKPOINT_DONE", "/nonexistent-tessera/ack", 1);
    errno = 0;
    assert_int_equal(tessera_task_checkpoint_done(), -1);
    assert_int_equal(errno, ENOENT);
    /* a path over the limit */
    char *longp = malloc(TESSERA_TASK_PATH_MAX + 10);
    memset(longp, 'a', TESSERA_TASK_PATH_MAX + 9);
    longp[0] = '/';
    longp[TESSERA_TASK_PATH_MAX + 9] = 0;
    setenv("TESSERA_CHECKPOINT_DONE", longp, 1);
    errno = 0;
    assert_int_equal(tessera_task_checkpoint_done(), -1);
    assert_int_equal(errno, ENAMETOOLONG);
    free(longp);
}

static void test_report_step(void **state)
{
    (void)state;
    assert_int_equal(tessera_task_report_step(0.5), 0); /* unset: nothing */
    char path[128];
    snprintf(path, sizeof path, "%s/steps", dir);
    setenv("TESSERA_STEP_FILE", path, 1);
    assert_int_equal(tessera_task_report_step(0.412), 0);
    assert_int_equal(tessera_task_report_step(1.5), 0);
    assert_int_equal(tessera_task_report_step(0.000001), 0);
    errno = 0;
    assert_int_equal(tessera_task_report_step(0), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(tessera_task_report_step(-1), -1);
    assert_int_equal(tessera_task_report_step(NAN), -1);
    assert_int_equal(tessera_task_report_step(INFINITY), -1);
    assert_int_equal(tessera_task_report_step(1e60), -1);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[256];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    assert_string_equal(buf, "0.412000\n1.500000\n0.000001\n");
}

static void test_restarts_and_dir(void **state)
{
    (void)state;
    assert_int_equal(tessera_task_restarts(), 0);
    assert_null(tessera_task_checkpoint_dir());
    setenv("TESSERA_RESTARTS", "3", 1);
    assert_int_equal(tessera_task_restarts(), 3);
    setenv("TESSERA_RESTARTS", "1000000", 1);
    assert_int_equal(tessera_task_restarts(), 1000000);
    const char *bad[] = {"-1", "2x", "1000001", "99999999999999999999", " 1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("TESSERA_RESTARTS", bad[i], 1);
        errno = 0;
        assert_int_equal(tessera_task_restarts(), -1);
        assert_int_equal(errno, EINVAL);
    }
    setenv("TESSERA_CHECKPOINT_DIR", "/shared/ckpt/team-a/42", 1);
    assert_string_equal(tessera_task_checkpoint_dir(), "/shared/ckpt/team-a/42");
    setenv("TESSERA_CHECKPOINT_DIR", "", 1);
    assert_null(tessera_task_checkpoint_dir());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_signal_sets_flag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_done, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restarts_and_dir, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
