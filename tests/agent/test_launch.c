/*
 * test_launch.c - the task launcher with real processes (/bin/sh scripts):
 * environment, workdir, captured output, exit status, named start errors, the
 * three ways a preemption ends, the process group dying with the task, and
 * cgroups: limits read back where this machine allows them, the probe's
 * reason and an unisolated run where it does not. Every wait is bounded.
 */
#include <errno.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/launch.h"

#define WAIT_S 5.0
#define READY_WAIT_S 3.0

typedef struct fix {
    char dir[64], work[96], logs[96];
} fix;

static int setup(void **state)
{
    fix *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/ts-launch-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    chmod(f->dir, 0755);
    snprintf(f->work, sizeof f->work, "%s/work", f->dir);
    snprintf(f->logs, sizeof f->logs, "%s/logs", f->dir);
    assert_int_equal(mkdir(f->work, 0777), 0);
    assert_int_equal(mkdir(f->logs, 0777), 0);
    chmod(f->work, 0777);
    chmod(f->logs, 0777);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fix *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static ts_task_spec sh_spec(const fix *f, const char *id, const char *const *argv)
{
    ts_task_spec s;
    memset(&s, 0, sizeof s);
    s.task_id = id;
    s.argv = argv;
    s.workdir = f->work;
    s.log_dir = f->logs;
    s.term_grace_s = 0.5;
    return s;
}

static char *slurp(const char *dir, const char *name)
{
    static char buf[4096];
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

static void wait_for_file(const char *dir, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    double end = ts_launch_now() + READY_WAIT_S;
    while (access(path, F_OK) != 0) {
        assert_true(ts_launch_now() < end);
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    }
}

/* A pid that is gone or only a zombie waiting for init. */
static int process_gone(long pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    return rp != NULL && rp[2] == 'Z';
}

static void env_workdir_output_and_exit_code(void **state)
{
    fix *f = *state;
    const char *argv[] = {"/bin/sh", "-c",
                          "pwd; echo CVD=$CUDA_VISIBLE_DEVICES; "
                          "echo R=$RANK/$WORLD_SIZE/$LOCAL_RANK@$MASTER_ADDR:$MASTER_PORT; "
                          "echo ID=$TESSERA_TASK_ID; echo ACK=$TESSERA_CHECKPOINT_DONE; "
                          "echo NCCL=$NCCL_IB_HCA/$NCCL_IB_TC/$NCCL_IB_SL; "
                          "echo MPS=$CUDA_MPS_PIPE_DIRECTORY/$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; "
                          "echo PRE=$LD_PRELOAD/$TS_SHIM_LIMIT; echo MINE=$MY_VAR; "
                          "echo oops >&2; exit 3",
                          NULL};
    const char *env[] = {"MY_VAR=hello", "CUDA_VISIBLE_DEVICES=all", NULL};
    const char *gpus[] = {"GPU-aaaa", "GPU-bbbb"};
    const char *shim_env[] = {"TS_SHIM_LIMIT=4096", NULL};
    ts_task_spec s = sh_spec(f, "job1.0", argv);
    s.env = env;
    s.gpu_uuids = gpus;
    s.ngpu = 2;
    s.world_size = 4;
    s.rank = 2;
    s.local_rank = 1;
    s.master_addr = "10.0.0.1";
    s.master_port = 29500;
    s.nccl_ib_hca = "=mlx5_0:1";
    s.nccl_ib_tc = "106";
    s.nccl_ib_sl = "";
    s.mps_pipe_dir = "/run/mps/t1";
    s.mps_thread_pct = 50;
    s.preload_shim = "/opt/tessera/shim.so";
    s.shim_env = shim_env;
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(ts_task_start(NULL, &s, &t, &err), 0);
    ts_task_state st;
    assert_int_equal(ts_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.phase, TS_TASK_EXITED);
    assert_int_equal(st.exit_code, 3);
    assert_int_equal(st.outcome, TS_STOP_NONE);
    const ts_task_info *in = ts_task_info_get(t);
    assert_false(in->isolated);
    assert_string_not_equal(in->isolation_reason, "");

    char expect[1024];
    snprintf(expect, sizeof expect,
             "%s\nCVD=GPU-aaaa,GPU-bbbb\nR=2/4/1@10.0.0.1:29500\nID=job1.0\n"
             "ACK=%s/job1.0.ckpt-done\nNCCL==mlx5_0:1/106/\nMPS=/run/mps/t1/50\n"
             "PRE=/opt/tessera/shim.so/4096\nMINE=hello\n",
             f->work, f->logs);
    assert_string_equal(slurp(f->logs, "job1.0.out"), expect);
    /* the fake shim path makes ld.so complain first; the task's own line ends it */
    const char *e = slurp(f->logs, "job1.0.err");
    assert_true(strlen(e) >= 5 && strcmp(e + strlen(e) - 5, "oops\n") == 0);
    ts_task_free(t);
}

static void named_errors(void **state)
{
    fix *f = *state;
    const char *argv[] = {"/bin/true", NULL};
    ts_task *t = NULL;
    ts_err err = {0};

    ts_task_spec s = sh_spec(f, "e1", argv);
    s.workdir = "/nonexistent/tessera-wd";
    assert_int_equal(ts_task_start(NULL, &s, &t, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/tessera-wd"));
    assert_null(t);

    const char *missing[] = {"no-such-command-tessera", NULL};
    s = sh_spec(f, "e2", missing);
    assert_int_equal(ts_task_start(NULL, &s, &t, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "no-such-command-tessera"));

    const char *missing_path[] = {"/nonexistent/bin/cmd", NULL};
    s = sh_spec(f, "e3", missing_path);
    assert_int_equal(ts_task_start(NULL, &s, &t, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/bin/cmd"));

    s = sh_spec(f, "e4", argv);
    s.user = "no_such_user_tessera";
    assert_int_equal(ts_task_start(NULL, &s, &t, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "no_such_user_tessera"));

    s = sh_spec(f, "../bad", argv);
    assert_int_equal(ts_task_start(NULL, &s, &t, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "task_id"));
}

static void runs_as_user_or_says_why_not(void **state)
{
    fix *f = *state;
    struct passwd *pw = getpwnam("nobody");
    if (pw == NULL)
        skip();
    uid_t want = pw->pw_uid;
    const char *argv[] = {"/bin/sh", "-c", "id -u; echo $USER", NULL};
    ts_task_spec s = sh_spec(f, "u1", argv);
    s.user = "nobody";
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(ts_task_start(NULL, &s, &t, &err), 0);
    ts_task_state st;
    assert_int_equal(ts_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.exit_code, 0);
    char expect[64];
    if (geteuid() == 0) {
        snprintf(expect, sizeof expect, "%ld\nnobody\n", (long)want);
        assert_string_equal(ts_task_info_get(t)->user_note, "");
    } else {
        snprintf(expect, sizeof expect, "%ld\n", (long)geteuid());
        assert_non_null(strstr(ts_task_info_get(t)->user_note, "not root"));
    }
    assert_true(strncmp(slurp(f->logs, "u1.out"), expect, strlen(expect)) == 0);
    ts_task_free(t);
}

static ts_task *start_ready(fix *f, const char *id, const char *script)
{
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    ts_task_spec s = sh_spec(f, id, argv);
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(ts_task_start(NULL, &s, &t, &err), 0);
    wait_for_file(f->work, "ready");
    return t;
}

static void preempt_checkpointed(void **state)
{
    fix *f = *state;
    ts_task *t = start_ready(f, "p1",
                             "trap 'echo done > \"$TESSERA_CHECKPOINT_DONE\"; exit 0' USR1; "
                             "touch ready; while :; do sleep 0.05; done");
    ts_stop_outcome out;
    ts_err err = {0};
    double t0 = ts_launch_now();
    assert_int_equal(ts_task_preempt(t, 0, 3.0, &out, &err), 0);
    assert_int_equal(out, TS_STOP_CHECKPOINTED);
    assert_true(ts_launch_now() - t0 < 2.0); /* the ack ended it, not the grace */
    ts_task_free(t);
}

static void preempt_terminated_with_nonblocking_poll(void **state)
{
    fix *f = *state;
    ts_task *t = start_ready(f, "p2", "trap '' USR1; touch ready; while :; do sleep 0.05; done");
    ts_err err = {0};
    ts_task_state st;
    double now = ts_launch_now();
    assert_int_equal(ts_task_preempt_begin(t, SIGUSR1, 0.3, now, &err), 0);
    assert_int_equal(ts_task_poll(t, now, &st, &err), 0);
    assert_int_equal(st.phase, TS_TASK_CHECKPOINTING); /* returned at once */
    assert_int_equal(ts_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.outcome, TS_STOP_TERMINATED);
    assert_int_equal(st.term_signal, SIGTERM);
    ts_task_free(t);
}

static void preempt_killed_with_its_children(void **state)
{
    fix *f = *state;
    ts_task *t = start_ready(f, "p3",
                             "trap '' USR1 TERM; sleep 300 & echo $! > child.pid; "
                             "touch ready; while :; do sleep 0.05; done");
    ts_stop_outcome out;
    ts_err err = {0};
    assert_int_equal(ts_task_preempt(t, SIGUSR1, 0.2, &out, &err), 0);
    assert_int_equal(out, TS_STOP_KILLED);
    long child = atol(slurp(f->work, "child.pid"));
    assert_true(child > 0);
    double end = ts_launch_now() + 1.0;
    while (!process_gone(child) && ts_launch_now() < end)
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    assert_true(process_gone(child));
    ts_task_free(t);
}

static void group_dies_with_the_task(void **state)
{
    fix *f = *state;
    const char *argv[] = {"/bin/sh", "-c", "sleep 300 & echo $! > child.pid; exit 0", NULL};
    ts_task_spec s = sh_spec(f, "g1", argv);
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(ts_task_start(NULL, &s, &t, &err), 0);
    ts_task_state st;
    assert_int_equal(ts_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.exit_code, 0);
    long child = atol(slurp(f->work, "child.pid"));
    double end = ts_launch_now() + 1.0;
    while (!process_gone(child) && ts_launch_now() < end)
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    assert_true(process_gone(child));
    ts_task_free(t);
}

static void cgroup_limits_or_reason(void **state)
{
    fix *f = *state;
    ts_launch_caps caps;
    ts_launch_probe(NULL, &caps);
    const char *argv[] = {"/bin/sh", "-c", "touch ready; sleep 0.5", NULL};
    ts_task_spec s = sh_spec(f, "c1", argv);
    s.cpu_milli = 500;
    s.memory_bytes = 64LL << 20;
    s.pids_max = 64;
    s.limit_devices = true;
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(ts_task_start(&caps, &s, &t, &err), 0);
    const ts_task_info *in = ts_task_info_get(t);
    wait_for_file(f->work, "ready");
    if (caps.cgroup) {
        print_message("cgroups available under %s (devices: %s)\n", caps.cgroup_parent,
                      caps.devices ? "yes" : caps.devices_reason);
        assert_true(in->isolated);
        assert_string_equal(slurp(in->cgroup_path, "cpu.max"), "50000 100000\n");
        assert_string_equal(slurp(in->cgroup_path, "memory.max"), "67108864\n");
        assert_string_equal(slurp(in->cgroup_path, "pids.max"), "64\n");
        assert_int_equal(atol(slurp(in->cgroup_path, "cgroup.procs")), (long)in->pid);
        assert_true(in->devices_isolated == caps.devices);
    } else {
        print_message("cgroups unavailable: %s\n", caps.cgroup_reason);
        assert_string_not_equal(caps.cgroup_reason, "");
        assert_false(in->isolated);
        assert_string_equal(in->isolation_reason, caps.cgroup_reason);
        assert_false(in->devices_isolated);
        assert_string_not_equal(in->devices_reason, "");
    }
    char cg[sizeof in->cgroup_path];
    snprintf(cg, sizeof cg, "%s", in->cgroup_path);
    ts_task_state st;
    assert_int_equal(ts_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.exit_code, 0); /* ran, with or without limits */
    ts_task_free(t);
    if (caps.cgroup)
        assert_int_equal(access(cg, F_OK), -1); /* removed after the task */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(env_workdir_output_and_exit_code, setup, teardown),
        cmocka_unit_test_setup_teardown(named_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(runs_as_user_or_says_why_not, setup, teardown),
        cmocka_unit_test_setup_teardown(preempt_checkpointed, setup, teardown),
        cmocka_unit_test_setup_teardown(preempt_terminated_with_nonblocking_poll, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(preempt_killed_with_its_children, setup, teardown),
        cmocka_unit_test_setup_teardown(group_dies_with_the_task, setup, teardown),
        cmocka_unit_test_setup_teardown(cgroup_limits_or_reason, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
