/*
 * test_launch.c - the task launcher with real processes (/bin/sh scripts):
 * environment, workdir, captured output, exit status, named start errors, the
 * three ways a preemption ends, the process group dying with the task, and
 * cgroups: limits read back where this machine allows them, the probe's
 * reason and an unisolated run where it does not. Every wait is bounded.
 *
 * Agent restarts: a forked child plays the agent that dies (it starts tasks,
 * maybe begins a stop, and _exit()s without cleaning up); this process plays
 * the next agent and adopts them. This process is not made a subreaper, so
 * the dead agent's keepers go to init as they would on a node: the adopting
 * side is never their parent (tasks started in this process are, which the
 * detach test uses for the other case).
 */
#include <errno.h>
#include <fcntl.h>
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/launch.h"
#include "agent/launch_cgroup.h"
#include "agent/launch_record.h"
#include "agent/clock.h"

#define WAIT_S 5.0
#define READY_WAIT_S 3.0

typedef struct fix {
    char dir[64], work[96], logs[96], recs[96];
    pid_t stray;       /* a helper process a failed test may leave */
    pid_t stray_group; /* a task group a failed test may leave without a record */
} fix;

static int setup(void **state)
{
    fix *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/ts-launch-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    chmod(f->dir, 0755);
    snprintf(f->work, sizeof f->work, "%s/work", f->dir);
    snprintf(f->logs, sizeof f->logs, "%s/logs", f->dir);
    snprintf(f->recs, sizeof f->recs, "%s/records", f->dir);
    assert_int_equal(mkdir(f->work, 0777), 0);
    assert_int_equal(mkdir(f->logs, 0777), 0);
    assert_int_equal(mkdir(f->recs, 0700), 0);
    chmod(f->work, 0777);
    chmod(f->logs, 0777);
    *state = f;
    return 0;
}

static int stop_recorded_task(const char *id, void *ctx)
{
    ts_task *t;
    if (agent_task_adopt(NULL, ctx, id, &t, NULL) == 0)
        agent_task_free(t);
    return 0;
}

static int teardown(void **state)
{
    fix *f = *state;
    char cmd[128];
    /* what a failed test left running */
    if (f->stray > 0) {
        kill(f->stray, SIGKILL);
        waitpid(f->stray, NULL, 0);
    }
    if (f->stray_group > 0)
        kill(-f->stray_group, SIGKILL);
    agent_task_records(f->recs, stop_recorded_task, f->recs, NULL);
    agent_task_records(f->logs, stop_recorded_task, f->logs, NULL);
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
    char path[1024];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return NULL; /* too long a path: no file read, as if absent */
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
    double end = agent_mono_s() + READY_WAIT_S;
    while (access(path, F_OK) != 0) {
        assert_true(agent_mono_s() < end);
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
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    ts_task_state st;
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.phase, TS_TASK_EXITED);
    assert_int_equal(st.exit_code, 3);
    assert_int_equal(st.outcome, TS_STOP_NONE);
    const ts_task_info *in = agent_task_info_get(t);
    assert_false(in->isolated);
    assert_string_not_equal(in->isolation_reason, "");

    char expect[1024];
    snprintf(expect, sizeof expect,
             "%s\nCVD=GPU-aaaa,GPU-bbbb\nR=2/4/1@10.0.0.1:29500\nID=job1.0\n"
             "ACK=%s/tasks/job1.0/ckpt-done\nNCCL==mlx5_0:1/106/\nMPS=/run/mps/t1/50\n"
             "PRE=/opt/tessera/shim.so/4096\nMINE=hello\n",
             f->work, f->logs);
    assert_string_equal(slurp(f->logs, "job1.0.out"), expect);
    /* the fake shim path makes ld.so complain first; the task's own line ends it */
    const char *e = slurp(f->logs, "job1.0.err");
    assert_true(strlen(e) >= 5 && strcmp(e + strlen(e) - 5, "oops\n") == 0);
    agent_task_free(t);
}

static void named_errors(void **state)
{
    fix *f = *state;
    const char *argv[] = {"/bin/true", NULL};
    ts_task *t = NULL;
    ts_err err = {0};

    ts_task_spec s = sh_spec(f, "e1", argv);
    s.workdir = "/nonexistent/tessera-wd";
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/tessera-wd"));
    assert_null(t);

    const char *missing[] = {"no-such-command-tessera", NULL};
    s = sh_spec(f, "e2", missing);
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "command not found: no-such-command-tessera"));

    const char *missing_path[] = {"/nonexistent/bin/cmd", NULL};
    s = sh_spec(f, "e3", missing_path);
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/bin/cmd"));

    s = sh_spec(f, "e4", argv);
    s.user = "no_such_user_tessera";
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "no_such_user_tessera"));

    s = sh_spec(f, "../bad", argv);
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "task_id"));

    s = sh_spec(f, "e5", argv);
    s.record_dir = "/nonexistent/tessera-records";
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "record_dir /nonexistent/tessera-records"));

    assert_int_equal(agent_task_adopt(NULL, f->logs, "never-started", &t, &err), TS_ENOENT);
    assert_null(t);
    assert_int_equal(agent_task_adopt(NULL, f->logs, "../x", &t, &err), TS_EINVAL);
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
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    ts_task_state st;
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.exit_code, 0);
    char expect[64];
    if (geteuid() == 0) {
        snprintf(expect, sizeof expect, "%ld\nnobody\n", (long)want);
        assert_string_equal(agent_task_info_get(t)->user_note, "");
    } else {
        snprintf(expect, sizeof expect, "%ld\n", (long)geteuid());
        assert_non_null(strstr(agent_task_info_get(t)->user_note, "not root"));
    }
    assert_true(strncmp(slurp(f->logs, "u1.out"), expect, strlen(expect)) == 0);
    agent_task_free(t);
}

static ts_task *start_ready(fix *f, const char *id, const char *script)
{
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    ts_task_spec s = sh_spec(f, id, argv);
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
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
    double t0 = agent_mono_s();
    assert_int_equal(agent_task_preempt(t, 0, 3.0, &out, &err), 0);
    assert_int_equal(out, TS_STOP_CHECKPOINTED);
    assert_true(agent_mono_s() - t0 < 2.0); /* the ack ended it, not the grace */
    agent_task_free(t);
}

static void preempt_terminated_with_nonblocking_poll(void **state)
{
    fix *f = *state;
    ts_task *t = start_ready(f, "p2", "trap '' USR1; touch ready; while :; do sleep 0.05; done");
    ts_err err = {0};
    ts_task_state st;
    double now = agent_mono_s();
    assert_int_equal(agent_task_preempt_begin(t, SIGUSR1, 0.3, now, &err), 0);
    assert_int_equal(agent_task_poll(t, now, &st, &err), 0);
    assert_int_equal(st.phase, TS_TASK_CHECKPOINTING); /* returned at once */
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.outcome, TS_STOP_TERMINATED);
    assert_int_equal(st.term_signal, SIGTERM);
    agent_task_free(t);
}

static void preempt_killed_with_its_children(void **state)
{
    fix *f = *state;
    ts_task *t = start_ready(f, "p3",
                             "trap '' USR1 TERM; sleep 300 & echo $! > child.pid; "
                             "touch ready; while :; do sleep 0.05; done");
    ts_stop_outcome out;
    ts_err err = {0};
    assert_int_equal(agent_task_preempt(t, SIGUSR1, 0.2, &out, &err), 0);
    assert_int_equal(out, TS_STOP_KILLED);
    long child = atol(slurp(f->work, "child.pid"));
    assert_true(child > 0);
    double end = agent_mono_s() + 1.0;
    while (!process_gone(child) && agent_mono_s() < end)
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    assert_true(process_gone(child));
    agent_task_free(t);
}

/* A time limit's stop: the signal, then SIGKILL when the grace ends, with
 * no SIGTERM grace after it (the spec's is long here), and the stop says it
 * was a hard one; a task that obeys the signal ends by it. */
static void timeout_kills_when_its_grace_ends(void **state)
{
    fix *f = *state;
    const char *argv[] = {"/bin/sh", "-c",
                          "trap '' TERM; touch ready; while :; do sleep 0.05; done", NULL};
    ts_task_spec s = sh_spec(f, "h1", argv);
    s.term_grace_s = 30.0;
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    wait_for_file(f->work, "ready");
    double begun = agent_mono_s();
    assert_int_equal(agent_task_timeout_begin(t, 0, 0.3, begun, &err), 0);
    ts_task_state st;
    assert_int_equal(agent_task_poll(t, agent_mono_s(), &st, &err), 0);
    assert_true(st.hard_stop);
    assert_true(st.phase_end_s > begun && st.phase_end_s <= begun + 0.31);
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    double took = agent_mono_s() - begun;
    assert_true(took >= 0.3 && took < 0.3 + 1.0); /* never the 30-s SIGTERM grace */
    assert_int_equal(st.outcome, TS_STOP_KILLED);
    assert_int_equal(st.term_signal, SIGKILL);
    assert_true(st.hard_stop);
    agent_task_free(t);

    /* SIGTERM by default: a task that keeps default handling ends by it */
    char ready[160];
    snprintf(ready, sizeof ready, "%s/ready", f->work);
    unlink(ready); /* the next task's own */
    t = start_ready(f, "h2", "touch ready; while :; do sleep 0.05; done");
    assert_int_equal(agent_task_timeout_begin(t, 0, 5.0, agent_mono_s(), &err), 0);
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.term_signal, SIGTERM);
    agent_task_free(t);
}

/* A preemption's stop in progress that the time limit overtakes ends by
 * the limit's grace, not its own longer one. */
static void timeout_shortens_a_stop_in_progress(void **state)
{
    fix *f = *state;
    ts_task *t =
        start_ready(f, "h3", "trap '' USR1 TERM; touch ready; while :; do sleep 0.05; done");
    ts_err err = {0};
    double now = agent_mono_s();
    assert_int_equal(agent_task_preempt_begin(t, SIGUSR1, 60.0, now, &err), 0);
    assert_int_equal(agent_task_timeout_begin(t, SIGTERM, 0.2, now, &err), 0);
    ts_task_state st;
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    assert_true(agent_mono_s() - now < 1.5);
    assert_int_equal(st.term_signal, SIGKILL);
    assert_true(st.hard_stop);
    agent_task_free(t);
}

/* The keeper's exit file: an exit code, a signal, OOM kills; a file of an
 * older agent (no oom_kill) reads as none; another task's is not taken. */
static void exit_file_decodes_code_signal_and_oom_kills(void **state)
{
    fix *f = *state;
    char path[160], tmp[170], text[256];
    snprintf(path, sizeof path, "%s/x.exit", f->logs);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    static const struct {
        int status;
        long long ooms;
        int code, sig;
    } CASES[] = {{3 << 8, 0, 3, 0}, {0, 0, 0, 0}, {SIGSEGV, 0, -1, SIGSEGV},
                 {SIGKILL, 2, -1, SIGKILL}, {1 << 8, 1, 1, 0}};
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        ts_sbuf b;
        agent_sb_init(&b, text, sizeof text);
        agent_rec_exit_text(&b, 4242, 99, CASES[i].status, CASES[i].ooms, i == 2);
        assert_false(b.cut);
        assert_int_equal(agent_rec_put(tmp, path, text, b.len, "", 0), 0);
        int code, sig, cut;
        long long ooms;
        assert_int_equal(agent_rec_exit_read(path, 4242, 99, &code, &sig, &ooms, &cut), 1);
        assert_int_equal(code, CASES[i].code);
        assert_int_equal(sig, CASES[i].sig);
        assert_int_equal(ooms, CASES[i].ooms);
        /* stopped by its keeper, the controller lost */
        assert_int_equal(cut, i == 2 ? TS_CUT_KEEPER : TS_CUT_NONE);
        assert_int_equal(agent_rec_exit_read(path, 4243, 99, &code, &sig, &ooms, &cut), 0);
    }
    /* marked by an agent that stopped it as it left, no controller told:
     * the status stays, and the mark reads as such */
    ts_rec_paths rp = {0};
    snprintf(rp.exit, sizeof rp.exit, "%s", path);
    snprintf(rp.exit_tmp, sizeof rp.exit_tmp, "%s", tmp);
    assert_int_equal(agent_rec_exit_mark_left(&rp), 0);
    {
        int code, sig, cut;
        long long ooms;
        assert_int_equal(agent_rec_exit_read(path, 4242, 99, &code, &sig, &ooms, &cut), 1);
        assert_int_equal(code, 1);
        assert_int_equal(ooms, 1);
        assert_int_equal(cut, TS_CUT_AGENT_LEFT);
    }
    char *nl = strstr(text, "oom_kill"); /* the last case has one: cut it off */
    assert_non_null(nl);
    *nl = '\0';
    assert_int_equal(agent_rec_put(tmp, path, text, strlen(text), "", 0), 0);
    int code, sig, cut = TS_CUT_KEEPER;
    long long ooms = 7;
    assert_int_equal(agent_rec_exit_read(path, 4242, 99, &code, &sig, &ooms, &cut), 1);
    assert_int_equal(cut, TS_CUT_NONE);
    assert_int_equal(code, 1);
    assert_int_equal(ooms, 0);
}

/* A record keeps who the task's processes are (a container user's uid)
 * when that is not its user; a record without it (the same uid, or an
 * older agent's) reads as its user. */
static void record_keeps_the_run_uid(void **state)
{
    fix *f = *state;
    for (int other = 1; other >= 0; other--) {
        ts_rec r;
        memset(&r, 0, sizeof r);
        snprintf(r.info.task_id, sizeof r.info.task_id, "ru");
        r.info.uid = 1000;
        r.info.run_uid = other ? 4242 : 1000;
        snprintf(r.info.stdout_path, sizeof r.info.stdout_path, "%s/ru.out", f->logs);
        snprintf(r.info.stderr_path, sizeof r.info.stderr_path, "%s/ru.err", f->logs);
        snprintf(r.info.ack_path, sizeof r.info.ack_path, "%s/ru.ack", f->logs);
        char head[256], path[160], tmp[170];
        ts_sbuf b;
        agent_sb_init(&b, head, sizeof head);
        agent_rec_head(&b, "ru", 4242, 99, 4243, 98);
        char *body = agent_rec_body(&r);
        assert_non_null(body);
        assert_int_equal(strstr(body, "run_uid") != NULL, other);
        snprintf(path, sizeof path, "%s/ru.task", f->logs);
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        assert_int_equal(agent_rec_put(tmp, path, head, b.len, body, strlen(body)), 0);
        free(body);
        ts_rec back;
        ts_err e;
        assert_int_equal(agent_rec_read(path, &back, &e), 0);
        assert_int_equal(back.info.uid, 1000);
        assert_int_equal(back.info.run_uid, other ? 4242 : 1000);
        agent_rec_clear(&back);
        unlink(path); /* never adopted by the teardown: its pids are made up */
    }
}

static void group_dies_with_the_task(void **state)
{
    fix *f = *state;
    const char *argv[] = {"/bin/sh", "-c", "sleep 300 & echo $! > child.pid; exit 0", NULL};
    ts_task_spec s = sh_spec(f, "g1", argv);
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    ts_task_state st;
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.exit_code, 0);
    long child = atol(slurp(f->work, "child.pid"));
    double end = agent_mono_s() + 1.0;
    while (!process_gone(child) && agent_mono_s() < end)
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    assert_true(process_gone(child));
    agent_task_free(t);
}

static void cgroup_limits_or_reason(void **state)
{
    fix *f = *state;
    ts_launch_caps caps;
    agent_launch_probe(NULL, &caps);
    const char *argv[] = {"/bin/sh", "-c", "touch ready; sleep 0.5", NULL};
    ts_task_spec s = sh_spec(f, "c1", argv);
    s.cpu_milli = 500;
    s.memory_bytes = 64LL << 20;
    s.pids_max = 64;
    s.limit_devices = true;
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(&caps, &s, &t, &err), 0);
    const ts_task_info *in = agent_task_info_get(t);
    wait_for_file(f->work, "ready");
    ts_cg_dirs d = {0};
    if (caps.cgroup) {
        print_message("cgroups (%s) available under %s (devices: %s)\n",
                      caps.cgroup_v1 ? "v1" : "v2", caps.cgroup_parent,
                      caps.devices ? "yes" : caps.devices_reason);
        assert_true(in->isolated);
        assert_true(in->cgroup_v1 == caps.cgroup_v1);
        assert_int_equal(agent_cg_dirs_of(in->cgroup_path, in->cgroup_v1, &d), 0);
        if (!in->cgroup_v1) {
            assert_string_equal(slurp(in->cgroup_path, "cpu.max"), "50000 100000\n");
            assert_string_equal(slurp(in->cgroup_path, "memory.max"), "67108864\n");
            assert_string_equal(slurp(in->cgroup_path, "pids.max"), "64\n");
        } else {
            assert_string_equal(slurp(d.dir[d.at[TS_CG_CPU]], "cpu.cfs_quota_us"), "50000\n");
            assert_string_equal(slurp(d.dir[d.at[TS_CG_CPU]], "cpu.cfs_period_us"), "100000\n");
            assert_string_equal(slurp(d.dir[d.at[TS_CG_MEMORY]], "memory.limit_in_bytes"),
                                "67108864\n");
            assert_string_equal(slurp(d.dir[d.at[TS_CG_PIDS]], "pids.max"), "64\n");
        }
        for (int i = 0; i < d.n; i++) /* the task is in each hierarchy */
            assert_int_equal(atol(slurp(d.dir[i], "cgroup.procs")), (long)in->pid);
        assert_true(in->devices_isolated == caps.devices);
    } else {
        print_message("cgroups unavailable: %s\n", caps.cgroup_reason);
        assert_string_not_equal(caps.cgroup_reason, "");
        assert_false(in->isolated);
        assert_string_equal(in->isolation_reason, caps.cgroup_reason);
        assert_false(in->devices_isolated);
        assert_string_not_equal(in->devices_reason, "");
    }
    ts_task_state st;
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.exit_code, 0); /* ran, with or without limits */
    agent_task_free(t);
    for (int i = 0; i < d.n; i++) /* removed after the task */
        assert_int_equal(access(d.dir[i], F_OK), -1);
}

/* ---- agent restarts ------------------------------------------------------------- */

#define PLAYED_AGENT_FAILED 3

/* Plays an agent that starts a task (and, with stop_grace_s >= 0, begins its
 * stop once the task is ready), then dies without cleaning anything up. */
static void agent_that_dies(fix *f, const char *id, const char *script, const char *meta,
                            double stop_grace_s)
{
    char ready[160];
    snprintf(ready, sizeof ready, "%s/ready", f->work);
    unlink(ready);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const char *argv[] = {"/bin/sh", "-c", script, NULL};
        ts_task_spec s = sh_spec(f, id, argv);
        s.record_dir = f->recs;
        s.meta = meta;
        ts_task *t;
        ts_err err = {0};
        if (agent_task_start(NULL, &s, &t, &err) != 0)
            _exit(PLAYED_AGENT_FAILED);
        if (stop_grace_s >= 0) {
            double end = agent_mono_s() + READY_WAIT_S;
            while (access(ready, F_OK) != 0 && agent_mono_s() < end)
                nanosleep(&(struct timespec){0, 10000000L}, NULL);
            if (agent_task_preempt_begin(t, SIGUSR1, stop_grace_s, agent_mono_s(), &err) != 0)
                _exit(PLAYED_AGENT_FAILED);
        }
        _exit(0); /* no agent_task_free, no agent_task_detach: a crash */
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static ts_task *adopt(fix *f, const char *id, ts_task_state *st)
{
    ts_task *t = NULL;
    ts_err err = {0};
    assert_int_equal(agent_task_adopt(NULL, f->recs, id, &t, &err), 0);
    assert_non_null(t);
    assert_true(agent_task_info_get(t)->adopted);
    assert_int_equal(agent_task_poll(t, agent_mono_s(), st, &err), 0);
    return t;
}

static int file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static void adopts_running_task_and_sees_its_exit_code(void **state)
{
    fix *f = *state;
    agent_that_dies(f, "a1", "touch ready; while [ ! -e go ]; do sleep 0.05; done; exit 7",
                    "{\"job\":12,\"rank\":3}\nsecond line \\ with a backslash", -1);
    wait_for_file(f->work, "ready");
    ts_task_state st;
    ts_task *t = adopt(f, "a1", &st);
    assert_int_equal(st.phase, TS_TASK_RUNNING);
    assert_string_equal(agent_task_meta(t),
                        "{\"job\":12,\"rank\":3}\nsecond line \\ with a backslash");
    const ts_task_info *in = agent_task_info_get(t);
    assert_string_equal(in->task_id, "a1");
    assert_true(in->pid > 0 && in->keeper_pid > 0 && in->pid != in->keeper_pid);
    assert_false(process_gone(in->pid));
    char out_path[256];
    snprintf(out_path, sizeof out_path, "%s/a1.out", f->logs);
    assert_string_equal(in->stdout_path, out_path);
    /* a terminal's ^C, a hang-up or a stray TERM meant for the agent do not end the keeper */
    assert_int_equal(kill(in->keeper_pid, SIGINT), 0);
    assert_int_equal(kill(in->keeper_pid, SIGHUP), 0);
    assert_int_equal(kill(in->keeper_pid, SIGTERM), 0);
    assert_int_equal(kill(in->keeper_pid, SIGUSR1), 0);

    char go[160];
    snprintf(go, sizeof go, "%s/go", f->work);
    FILE *fp = fopen(go, "w");
    assert_non_null(fp);
    fclose(fp);
    ts_err err = {0};
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.phase, TS_TASK_EXITED);
    assert_int_equal(st.exit_code, 7); /* the real status, through the keeper's exit file */
    assert_int_equal(st.term_signal, 0);
    assert_false(st.lost);
    assert_int_equal(st.outcome, TS_STOP_NONE);
    char rec[sizeof in->record_path], ex[sizeof in->exit_path];
    snprintf(rec, sizeof rec, "%s", in->record_path);
    snprintf(ex, sizeof ex, "%s", in->exit_path);
    assert_true(file_exists(rec) && file_exists(ex));
    agent_task_free(t); /* the task is done with: its files go */
    assert_false(file_exists(rec));
    assert_false(file_exists(ex));
}

static void adopts_task_that_ended_while_no_agent_ran(void **state)
{
    fix *f = *state;
    agent_that_dies(f, "b1", "exit 5", NULL, -1);
    agent_that_dies(f, "b2", "kill -TERM $$", NULL, -1);
    wait_for_file(f->recs, "b1.exit");
    wait_for_file(f->recs, "b2.exit");
    ts_task_state st;
    ts_task *t = adopt(f, "b1", &st);
    assert_int_equal(st.phase, TS_TASK_EXITED);
    assert_int_equal(st.exit_code, 5);
    assert_int_equal(st.term_signal, 0);
    assert_false(st.lost);
    agent_task_free(t);
    t = adopt(f, "b2", &st);
    assert_int_equal(st.phase, TS_TASK_EXITED);
    assert_int_equal(st.exit_code, -1);
    assert_int_equal(st.term_signal, SIGTERM);
    assert_false(st.lost);
    agent_task_free(t);
}

static void adopted_task_preempted_with_checkpoint_ack(void **state)
{
    fix *f = *state;
    agent_that_dies(f, "c1",
                    "trap 'echo done > \"$TESSERA_CHECKPOINT_DONE\"; exit 0' USR1; "
                    "touch ready; while :; do sleep 0.05; done",
                    NULL, -1);
    wait_for_file(f->work, "ready");
    ts_task_state st;
    ts_task *t = adopt(f, "c1", &st);
    assert_int_equal(st.phase, TS_TASK_RUNNING);
    ts_stop_outcome out;
    ts_err err = {0};
    assert_int_equal(agent_task_preempt(t, 0, 3.0, &out, &err), 0);
    assert_int_equal(out, TS_STOP_CHECKPOINTED);
    assert_int_equal(agent_task_poll(t, agent_mono_s(), &st, &err), 0);
    assert_true(st.ack_seen);
    assert_false(st.lost);
    agent_task_free(t);
}

static void stop_begun_before_the_crash_continues(void **state)
{
    fix *f = *state;
    /* ignores the checkpoint signal: only a SIGTERM from the adopting agent ends it */
    agent_that_dies(f, "s1", "trap '' USR1; touch ready; while :; do sleep 0.05; done", NULL,
                    0.3);
    ts_task_state st;
    ts_task *t = adopt(f, "s1", &st);
    assert_true(st.phase == TS_TASK_CHECKPOINTING || st.phase == TS_TASK_TERMINATING);
    ts_err err = {0};
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.phase, TS_TASK_EXITED);
    assert_int_equal(st.outcome, TS_STOP_TERMINATED);
    assert_int_equal(st.term_signal, SIGTERM);
    assert_false(st.ack_seen);
    agent_task_free(t);
}

/* Field 22 of /proc/<pid>/stat. */
static unsigned long long proc_start(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    assert_non_null(p);
    p += 2;
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        assert_non_null(p);
        p++;
    }
    return strtoull(p, NULL, 10);
}

static void reused_pid_is_not_taken_for_the_task(void **state)
{
    fix *f = *state;
    /* the "reused" pid: an unrelated process that leads its own process group */
    pid_t other = fork();
    assert_true(other >= 0);
    if (other == 0) {
        setpgid(0, 0);
        int null = open("/dev/null", O_RDWR); /* holds no pipe of whoever runs the test */
        dup2(null, 1);
        dup2(null, 2);
        for (;;)
            pause();
    }
    f->stray = other;
    setpgid(other, other);
    unsigned long long wrong = proc_start(other) + 1;
    char path[256];
    snprintf(path, sizeof path, "%s/r1.task", f->recs);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp,
            "tessera-task-record 1\nid r1\npid %ld\nstart %llu\nkeeper %ld\nkeeper_start %llu\n"
            "uid 0\nterm_grace_s 0.5\nisolated 0\ndevices_isolated 0\ncgroup \n"
            "isolation_reason cgroups not probed\ndevices_reason not requested\nuser_note \n"
            "stdout %s/r1.out\nstderr %s/r1.err\nack %s/r1.ckpt-done\nmeta \n",
            (long)other, wrong, (long)other, wrong, f->logs, f->logs, f->logs);
    fclose(fp);

    ts_task_state st;
    ts_task *t = adopt(f, "r1", &st);
    assert_int_equal(st.phase, TS_TASK_EXITED); /* not "running" */
    assert_true(st.lost);
    assert_int_equal(st.exit_code, -1);         /* and never a success */
    assert_int_equal(st.term_signal, TS_TASK_LOST_SIGNAL);
    ts_err err = {0};
    assert_int_equal(agent_task_preempt_begin(t, SIGUSR1, 1.0, agent_mono_s(), &err), 0);
    agent_task_free(t);
    assert_false(file_exists(path));
    /* nothing was sent to the process that now has the pid, nor to its group: the
     * signal that ends it is this one (a SIGKILL sent before would have won) */
    int status;
    assert_int_equal(kill(other, SIGTERM), 0);
    assert_int_equal(waitpid(other, &status, 0), other);
    f->stray = 0;
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGTERM);

    /* a record must not send the agent to kill a cgroup that is not the task's */
    fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp,
            "tessera-task-record 1\nid r1\npid 1\nstart 1\nkeeper 1\nkeeper_start 1\n"
            "isolated 1\ncgroup /sys/fs/cgroup/system.slice\nstdout /o\nstderr /e\nack /a\n");
    fclose(fp);
    assert_int_equal(agent_task_adopt(NULL, f->recs, "r1", &t, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "cgroup"));

    /* a damaged record is refused with its field, and forgetting it removes it */
    fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "tessera-task-record 1\nid r1\npid many\n");
    fclose(fp);
    assert_int_equal(agent_task_adopt(NULL, f->recs, "r1", &t, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "pid"));
    assert_int_equal(agent_task_record_forget(f->recs, "r1", &err), 0);
    assert_false(file_exists(path));
}

static void task_lost_when_its_keeper_is_killed(void **state)
{
    fix *f = *state;
    agent_that_dies(f, "k1", "touch ready; while [ ! -e go ]; do sleep 0.05; done; exit 0", NULL,
                    -1);
    wait_for_file(f->work, "ready");
    ts_task_state st;
    ts_task *t = adopt(f, "k1", &st);
    const ts_task_info *in = agent_task_info_get(t);
    assert_int_equal(kill(in->keeper_pid, SIGKILL), 0);
    double end = agent_mono_s() + READY_WAIT_S;
    while (!process_gone(in->keeper_pid) && agent_mono_s() < end)
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    assert_true(process_gone(in->keeper_pid));
    ts_err err = {0};
    assert_int_equal(agent_task_poll(t, agent_mono_s(), &st, &err), 0);
    assert_int_equal(st.phase, TS_TASK_RUNNING); /* still watched, through /proc */
    char go[160];
    snprintf(go, sizeof go, "%s/go", f->work);
    fclose(fopen(go, "w"));
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.phase, TS_TASK_EXITED);
    assert_true(st.lost); /* it exited 0, but nobody could see that */
    assert_int_equal(st.exit_code, -1);
    assert_int_equal(st.term_signal, TS_TASK_LOST_SIGNAL);
    agent_task_free(t);
}

typedef struct seen_ids {
    char ids[8][64];
    int n;
} seen_ids;

static int note_id(const char *id, void *ctx)
{
    seen_ids *s = ctx;
    if (s->n < 8)
        snprintf(s->ids[s->n++], sizeof s->ids[0], "%s", id);
    return 0;
}

static int has_id(const seen_ids *s, const char *id)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->ids[i], id) == 0)
            return 1;
    return 0;
}

static void records_list_what_was_left_running(void **state)
{
    fix *f = *state;
    const char *ids[] = {"l1", "l2", "l3"};
    for (int i = 0; i < 3; i++)
        agent_that_dies(f, ids[i], "touch ready; while :; do sleep 0.05; done", NULL, -1);
    /* what is not a record is not listed */
    const char *junk[] = {"l4.task.tmp", "bad name.task", "notes.txt", "l1.exit.tmp"};
    for (int i = 0; i < 4; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", f->recs, junk[i]);
        fclose(fopen(path, "w"));
    }
    seen_ids seen = {0};
    ts_err err = {0};
    assert_int_equal(agent_task_records(f->recs, note_id, &seen, &err), 3);
    assert_int_equal(seen.n, 3);
    for (int i = 0; i < 3; i++)
        assert_true(has_id(&seen, ids[i]));
    assert_int_equal(agent_task_records("/nonexistent/tessera-records", note_id, &seen, &err),
                     TS_ENOENT);
    /* adopted and freed: killed with their groups, records gone */
    for (int i = 0; i < 3; i++) {
        ts_task_state st;
        ts_task *t = adopt(f, ids[i], &st);
        assert_int_equal(st.phase, TS_TASK_RUNNING);
        long pid = (long)agent_task_info_get(t)->pid;
        agent_task_free(t);
        assert_true(process_gone(pid));
    }
    seen.n = 0;
    assert_int_equal(agent_task_records(f->recs, note_id, &seen, &err), 0);
}

static void detach_keeps_task_and_record_forget_removes(void **state)
{
    fix *f = *state;
    const char *argv[] = {"/bin/sh", "-c",
                          "touch ready; while [ ! -e go ]; do sleep 0.05; done; exit 4", NULL};
    ts_task_spec s = sh_spec(f, "d1", argv);
    s.record_dir = f->recs;
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    wait_for_file(f->work, "ready");
    ts_task_info in = *agent_task_info_get(t);
    f->stray_group = in.pid;
    assert_false(in.adopted);
    /* the task is the keeper's child, and the keeper leads a session of its own */
    char stat_name[64];
    snprintf(stat_name, sizeof stat_name, "%ld/stat", (long)in.pid);
    const char *st_line = slurp("/proc", stat_name);
    assert_non_null(st_line);
    long ppid = 0;
    assert_int_equal(sscanf(strrchr(st_line, ')') + 2, "%*c %ld", &ppid), 1);
    assert_int_equal(ppid, (long)in.keeper_pid);
    assert_int_equal(getsid(in.keeper_pid), in.keeper_pid);
    snprintf(stat_name, sizeof stat_name, "%ld/comm", (long)in.keeper_pid);
    assert_string_equal(slurp("/proc", stat_name), "tessera-keeper\n");
    assert_int_equal(getpgid(in.pid), in.pid);

    agent_task_detach(t);
    assert_false(process_gone(in.pid));
    assert_true(file_exists(in.record_path));
    assert_true(file_exists(in.task_dir)); /* its own folder stays while it runs */
    /* the same id is not started twice, nor forgotten while it runs */
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), TS_EEXIST);
    assert_non_null(strstr(err.msg, "d1"));
    assert_int_equal(agent_task_record_forget(f->recs, "d1", &err), TS_EEXIST);
    assert_true(file_exists(in.record_path));

    /* this process is the keeper's parent here, the adopted handle does not know it */
    ts_task_state st;
    t = adopt(f, "d1", &st);
    assert_int_equal(st.phase, TS_TASK_RUNNING);
    assert_int_equal(agent_task_info_get(t)->pid, in.pid);
    assert_int_equal(agent_task_info_get(t)->start_ticks, in.start_ticks);
    char go[160];
    snprintf(go, sizeof go, "%s/go", f->work);
    fclose(fopen(go, "w"));
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.exit_code, 4);
    f->stray_group = 0;
    agent_task_detach(t); /* ended and detached: the exit file waits for the next agent */
    assert_true(file_exists(in.exit_path));
    /* its keeper ends right after the exit file; reaped by the adopter or by its parent here */
    double end = agent_mono_s() + READY_WAIT_S;
    pid_t reaped;
    while ((reaped = waitpid(in.keeper_pid, NULL, WNOHANG)) == 0 && agent_mono_s() < end)
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    assert_true(reaped == in.keeper_pid || (reaped < 0 && errno == ECHILD));

    seen_ids seen = {0};
    assert_int_equal(agent_task_records(f->recs, note_id, &seen, &err), 1);
    assert_int_equal(agent_task_record_forget(f->recs, "d1", &err), 0);
    assert_false(file_exists(in.record_path));
    assert_false(file_exists(in.task_dir));
    assert_false(file_exists(in.exit_path));
    assert_int_equal(agent_task_records(f->recs, note_id, &seen, &err), 0);
    assert_int_equal(agent_task_adopt(NULL, f->recs, "d1", &t, &err), TS_ENOENT);

    /* with nothing left running, the id can be started again */
    unlink(go);
    const char *quick[] = {"/bin/true", NULL};
    s = sh_spec(f, "d1", quick);
    s.record_dir = f->recs;
    assert_int_equal(agent_task_start(NULL, &s, &t, &err), 0);
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.exit_code, 0);
    agent_task_free(t);
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
        cmocka_unit_test_setup_teardown(timeout_kills_when_its_grace_ends, setup, teardown),
        cmocka_unit_test_setup_teardown(timeout_shortens_a_stop_in_progress, setup, teardown),
        cmocka_unit_test_setup_teardown(exit_file_decodes_code_signal_and_oom_kills, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(group_dies_with_the_task, setup, teardown),
        cmocka_unit_test_setup_teardown(cgroup_limits_or_reason, setup, teardown),
        cmocka_unit_test_setup_teardown(adopts_running_task_and_sees_its_exit_code, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(adopts_task_that_ended_while_no_agent_ran, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(adopted_task_preempted_with_checkpoint_ack, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(stop_begun_before_the_crash_continues, setup, teardown),
        cmocka_unit_test_setup_teardown(reused_pid_is_not_taken_for_the_task, setup, teardown),
        cmocka_unit_test_setup_teardown(task_lost_when_its_keeper_is_killed, setup, teardown),
        cmocka_unit_test_setup_teardown(records_list_what_was_left_running, setup, teardown),
        cmocka_unit_test_setup_teardown(record_keeps_the_run_uid, setup, teardown),
        cmocka_unit_test_setup_teardown(detach_keeps_task_and_record_forget_removes, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
