/*
 * test_mps.c - MPS control daemons driven through the fake
 * nvidia-cuda-mps-control (tests/fakes/fake_mps_control.c, built next to the
 * fake NVML): a start gives the daemon the device's UUID and its own pipe and
 * log directories whatever the agent's environment says, and sends the
 * default thread percentage and pinned memory limit in the syntax of
 * gpu-facts.md 4.2 (the fake refuses any other); a restarted agent adopts the
 * running daemon; each device gets its own daemon; quit stops it, and a
 * daemon that ignores quit is reported after the bounded wait, not waited on
 * forever; a missing binary and a daemon that fails to start are errors that
 * name the binary and the reason. Every wait is bounded.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/mps.h"

#define GPU_UUID "GPU-a1000000-2d4e-4a6b-8c1d-100000000000"
#define MIG_UUID "MIG-5c3a1e2f-8b7d-5e0f-a1b2-c3d4e5f60001"
#define PATH_BYTES 512
#define LOG_BYTES 8192
#define SHORT_WAIT_MS 1000
#define KILL_WAIT_STEPS 500
#define KILL_STEP_NS 10000000L
#define MIB_10G 10240u
#define MIB_1536 1536u

#define TRACK_MAX 8

typedef struct fix {
    char base[64];
    long pids[TRACK_MAX]; /* daemons started, killed by the teardown if still there */
    int npids;
    char binary[TS_MPS_PATH_MAX];
    char fakes_dir[TS_MPS_PATH_MAX - sizeof TS_MPS_CONTROL_BINARY - 1];
} fix;

static int setup(void **state)
{
    fix *f = calloc(1, sizeof *f);
    snprintf(f->base, sizeof f->base, "/tmp/ts-mps-XXXXXX");
    assert_non_null(mkdtemp(f->base));
    snprintf(f->fakes_dir, sizeof f->fakes_dir, "%s", TS_FAKE_NVML);
    *strrchr(f->fakes_dir, '/') = '\0';
    snprintf(f->binary, sizeof f->binary, "%s/%s", f->fakes_dir, TS_MPS_CONTROL_BINARY);
    assert_int_equal(access(f->binary, X_OK), 0);
    *state = f;
    return 0;
}

static ts_mps_daemon *track(fix *f, ts_mps_daemon *d)
{
    if (d->pid > 0 && f->npids < TRACK_MAX)
        f->pids[f->npids++] = d->pid;
    return d;
}

static int start(fix *f, const ts_mps_config *c, const char *uuid, ts_mps_daemon *d,
                 ts_err *err)
{
    int rc = agent_mps_start(c, uuid, d, err);
    track(f, d);
    return rc;
}

static int teardown(void **state)
{
    fix *f = *state;
    for (int i = 0; i < f->npids; i++) {
        ts_mps_daemon d;
        memset(&d, 0, sizeof d);
        d.pid = f->pids[i];
        snprintf(d.binary, sizeof d.binary, "%s", f->binary);
        if (agent_mps_running(&d))
            kill((pid_t)d.pid, SIGKILL);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->base);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static ts_mps_config config(const fix *f)
{
    ts_mps_config c;
    memset(&c, 0, sizeof c);
    c.binary = f->binary;
    c.base_dir = f->base;
    return c;
}

static char *control_log(const ts_mps_daemon *d)
{
    static char buf[LOG_BYTES];
    char path[PATH_BYTES];
    snprintf(path, sizeof path, "%s/control.log", d->log_dir);
    buf[0] = '\0';
    FILE *fp = fopen(path, "r");
    if (!fp)
        return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p += n)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

/* SIGKILL and wait (bounded) until the pid is gone: cleanup for daemons a
 * test leaves running on purpose. */
static void kill_daemon(ts_mps_daemon *d)
{
    kill((pid_t)d->pid, SIGKILL);
    struct timespec step = {0, KILL_STEP_NS};
    for (int i = 0; i < KILL_WAIT_STEPS && agent_mps_running(d); i++)
        nanosleep(&step, NULL);
    assert_false(agent_mps_running(d));
}

/* ---- start, commands, env, stop --------------------------------------------------- */

static void start_gives_the_daemon_its_device_and_defaults(void **state)
{
    fix *f = *state;
    setenv("CUDA_VISIBLE_DEVICES", "0,1", 1); /* the agent's own: must not leak */
    setenv("CUDA_MPS_PIPE_DIRECTORY", "/tmp/not-this-one", 1);
    ts_mps_config c = config(f);
    c.thread_pct = 30;
    c.pinned_mem_mib = MIB_10G;
    ts_mps_daemon d;
    ts_err err = {0};
    int rc = start(f, &c, GPU_UUID, &d, &err);
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("CUDA_MPS_PIPE_DIRECTORY");
    if (rc)
        fail_msg("start: %s", err.msg);
    assert_false(d.adopted);
    assert_true(d.pid > 0);
    assert_true(agent_mps_running(&d));

    char want[PATH_BYTES];
    snprintf(want, sizeof want, "%s/%s/pipe", f->base, GPU_UUID);
    assert_string_equal(d.pipe_dir, want);
    snprintf(want, sizeof want, "%s/%s/log", f->base, GPU_UUID);
    assert_string_equal(d.log_dir, want);
    /* the pid file the real daemon writes, in the pipe directory */
    snprintf(want, sizeof want, "%s/%s", d.pipe_dir, TS_MPS_PID_FILE);
    FILE *pf = fopen(want, "r");
    assert_non_null(pf);
    long pid = 0;
    assert_int_equal(fscanf(pf, "%ld", &pid), 1);
    fclose(pf);
    assert_int_equal(pid, d.pid);

    const char *log = control_log(&d);
    assert_true(has_line(log, "env CUDA_VISIBLE_DEVICES=" GPU_UUID));
    snprintf(want, sizeof want, "env CUDA_MPS_PIPE_DIRECTORY=%s", d.pipe_dir);
    assert_true(has_line(log, want));
    snprintf(want, sizeof want, "env CUDA_MPS_LOG_DIRECTORY=%s", d.log_dir);
    assert_true(has_line(log, want));
    assert_true(has_line(log, "cmd set_default_active_thread_percentage 30"));
    assert_true(has_line(log, "cmd set_default_device_pinned_mem_limit 0 10G"));

    char reply[TS_MPS_REPLY_MAX];
    assert_int_equal(agent_mps_send(&d, "get_default_active_thread_percentage", reply,
                                 sizeof reply, &err),
                     0);
    assert_string_equal(reply, "30\n");

    assert_int_equal(agent_mps_stop(&d, &err), 0);
    assert_false(agent_mps_running(&d));
    assert_true(has_line(control_log(&d), "cmd quit"));
    assert_int_equal(agent_mps_stop(&d, &err), 0); /* already stopped: fine */
}

static void each_device_gets_its_own_daemon(void **state)
{
    fix *f = *state;
    ts_mps_config c = config(f);
    c.pinned_mem_mib = MIB_1536; /* not whole GiB: sent in MiB */
    ts_mps_daemon gpu, mig;
    ts_err err = {0};
    assert_int_equal(start(f, &c, GPU_UUID, &gpu, &err), 0);
    if (start(f, &c, MIG_UUID, &mig, &err) != 0)
        fail_msg("start MIG: %s", err.msg);
    assert_true(gpu.pid != mig.pid);
    assert_string_not_equal(gpu.pipe_dir, mig.pipe_dir);
    const char *log = control_log(&mig);
    assert_true(has_line(log, "env CUDA_VISIBLE_DEVICES=" MIG_UUID));
    assert_true(has_line(log, "cmd set_default_device_pinned_mem_limit 0 1536M"));
    assert_false(has_line(log, "cmd set_default_active_thread_percentage 100"));
    assert_null(strstr(log, "set_default_active_thread_percentage")); /* 0: left alone */

    assert_int_equal(agent_mps_stop(&mig, &err), 0);
    assert_false(agent_mps_running(&mig));
    assert_true(agent_mps_running(&gpu)); /* the other device's daemon is not touched */
    assert_int_equal(agent_mps_stop(&gpu, &err), 0);
}

static void a_restarted_agent_adopts_the_running_daemon(void **state)
{
    fix *f = *state;
    ts_mps_config c = config(f);
    c.thread_pct = 50;
    ts_mps_daemon first, again;
    ts_err err = {0};
    assert_int_equal(start(f, &c, MIG_UUID, &first, &err), 0);
    c.thread_pct = 25;
    assert_int_equal(start(f, &c, MIG_UUID, &again, &err), 0);
    assert_true(again.adopted);
    assert_int_equal(again.pid, first.pid);
    assert_true(has_line(control_log(&again), "cmd set_default_active_thread_percentage 25"));
    assert_int_equal(agent_mps_stop(&again, &err), 0);
    assert_false(agent_mps_running(&first));

    /* a stale pid file (daemon killed) does not count as running */
    assert_int_equal(start(f, &c, MIG_UUID, &first, &err), 0);
    kill_daemon(&first);
    assert_int_equal(start(f, &c, MIG_UUID, &again, &err), 0);
    assert_false(again.adopted);
    assert_true(again.pid != first.pid);
    assert_int_equal(agent_mps_stop(&again, &err), 0);
}

static void the_default_binary_is_found_on_path(void **state)
{
    fix *f = *state;
    char *old = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
    ts_mps_config c = config(f);
    c.binary = NULL;
    ts_mps_daemon d;
    ts_err err = {0};

    setenv("PATH", "/nonexistent-a:/nonexistent-b", 1);
    assert_int_equal(start(f, &c, GPU_UUID, &d, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "nvidia-cuda-mps-control: not found on PATH "
                                    "(/nonexistent-a:/nonexistent-b)"));

    char path[2 * PATH_BYTES];
    snprintf(path, sizeof path, "/nonexistent-a:%s", f->fakes_dir);
    setenv("PATH", path, 1);
    int rc = start(f, &c, GPU_UUID, &d, &err);
    if (old) {
        setenv("PATH", old, 1);
        free(old);
    }
    if (rc)
        fail_msg("start: %s", err.msg);
    assert_string_equal(d.binary, f->binary);
    assert_int_equal(agent_mps_stop(&d, &err), 0);

    c.binary = "/nonexistent/nvidia-cuda-mps-control";
    assert_int_equal(start(f, &c, GPU_UUID, &d, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/nvidia-cuda-mps-control: No such file"));
}

/* ---- failures --------------------------------------------------------------------- */

static void a_daemon_that_fails_to_start_is_named_with_its_reason(void **state)
{
    fix *f = *state;
    ts_mps_config c = config(f);
    ts_mps_daemon d;
    ts_err err = {0};
    setenv("FAKE_MPS_FAIL_START", "cannot open /dev/nvidiactl", 1);
    int rc = start(f, &c, GPU_UUID, &d, &err);
    unsetenv("FAKE_MPS_FAIL_START");
    assert_int_equal(rc, TS_EIO);
    char want[2 * PATH_BYTES];
    snprintf(want, sizeof want,
             "MPS %s: %s -d failed (exit status 1): cannot open /dev/nvidiactl", GPU_UUID,
             f->binary);
    assert_string_equal(err.msg, want);
    assert_false(agent_mps_running(&d));
}

static void refused_commands_are_errors(void **state)
{
    fix *f = *state;
    ts_mps_config c = config(f);
    ts_mps_daemon d;
    ts_err err = {0};
    assert_int_equal(start(f, &c, GPU_UUID, &d, &err), 0);
    assert_int_equal(agent_mps_send(&d, "set_default_active_thread_percentage 0", NULL, 0, &err),
                     TS_EIO);
    assert_non_null(strstr(err.msg, "\"set_default_active_thread_percentage 0\": exit status 1: "
                                    "error: usage"));
    assert_int_equal(agent_mps_send(&d, "two\nlines", NULL, 0, &err), TS_EINVAL);
    assert_int_equal(agent_mps_stop(&d, &err), 0);
    /* no daemon: the client says so */
    assert_int_equal(agent_mps_send(&d, "get_server_list", NULL, 0, &err), TS_EIO);
    assert_non_null(strstr(err.msg, "exit status 1"));
}

static void a_daemon_ignoring_quit_is_reported_after_the_wait(void **state)
{
    fix *f = *state;
    ts_mps_config c = config(f);
    ts_mps_daemon d;
    ts_err err = {0};
    setenv("FAKE_MPS_IGNORE_QUIT", "1", 1);
    int rc = start(f, &c, GPU_UUID, &d, &err);
    unsetenv("FAKE_MPS_IGNORE_QUIT");
    if (rc)
        fail_msg("start: %s", err.msg);
    d.wait_ms = SHORT_WAIT_MS; /* only the stop is short: a slow start is not the point */
    assert_int_equal(agent_mps_stop(&d, &err), TS_EIO);
    char want[256];
    snprintf(want, sizeof want, "MPS %s: daemon %ld still running %d ms after quit", GPU_UUID,
             d.pid, SHORT_WAIT_MS);
    assert_non_null(strstr(err.msg, want));
    assert_true(agent_mps_running(&d));
    kill_daemon(&d);
}

static void bad_arguments_are_refused(void **state)
{
    fix *f = *state;
    ts_mps_config c = config(f);
    ts_mps_daemon d;
    ts_err err = {0};
    assert_int_equal(start(f, &c, "../etc", &d, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "uuid \"../etc\""));
    assert_int_equal(start(f, &c, "", &d, &err), TS_EINVAL);
    c.thread_pct = 101;
    assert_int_equal(start(f, &c, GPU_UUID, &d, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "thread_pct"));
    c.thread_pct = 0;
    c.base_dir = NULL;
    assert_int_equal(start(f, &c, GPU_UUID, &d, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "base_dir: required"));
    char long_base[200];
    memset(long_base, 'x', sizeof long_base - 1);
    long_base[0] = '/';
    long_base[sizeof long_base - 1] = '\0';
    c.base_dir = long_base;
    assert_int_equal(start(f, &c, GPU_UUID, &d, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "too long"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(start_gives_the_daemon_its_device_and_defaults, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(each_device_gets_its_own_daemon, setup, teardown),
        cmocka_unit_test_setup_teardown(a_restarted_agent_adopts_the_running_daemon, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(the_default_binary_is_found_on_path, setup, teardown),
        cmocka_unit_test_setup_teardown(a_daemon_that_fails_to_start_is_named_with_its_reason,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(refused_commands_are_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(a_daemon_ignoring_quit_is_reported_after_the_wait,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(bad_arguments_are_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
