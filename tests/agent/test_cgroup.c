/*
 * test_cgroup.c - task limits enforced for real, on whichever cgroup version
 * this machine has (cgroup v1 on Debian 12 and in CI): a task that allocates
 * past its memory limit is OOM-killed and counted so, a fork bomb is held at
 * pids.max, CPU spinners given half a core get about that (and are throttled), a task cannot
 * open a GPU node (a char 195:N made with mknod) it was not given, what left
 * the task's session is killed with it, and no cgroup directory outlives a
 * task, also when the agent that started it died and the next one adopts it.
 *
 * Each test skips, saying why, when not root or when the probe finds no
 * usable cgroups. The CPU figure is a functional check (well under one core),
 * not a timing target. Every wait is bounded.
 *
 * _GNU_SOURCE: mknod and makedev are not POSIX.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/launch.h"
#include "agent/launch_cgroup.h"
#include "agent/clock.h"

#define WAIT_S 20.0
#define READY_WAIT_S 10.0
#define MEMORY_LIMIT_BYTES (32LL << 20)
#define PIDS_MAX 16
#define FORKS_TRIED 60
#define CPU_HALF_MILLI 500
#define CPU_MEASURE_NS 1500000000L
#define CPU_SHARE_MAX 0.8 /* of one core, for a 0.5-core limit */
#define GPU_GIVEN_MINOR 3u
#define GPU_OTHER_MINOR 5u

typedef struct fix {
    char dir[64], work[96], logs[96];
    ts_launch_caps caps;
} fix;

static int setup(void **state)
{
    fix *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/ts-cgroup-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    chmod(f->dir, 0755);
    snprintf(f->work, sizeof f->work, "%s/work", f->dir);
    snprintf(f->logs, sizeof f->logs, "%s/logs", f->dir);
    assert_int_equal(mkdir(f->work, 0777), 0);
    assert_int_equal(mkdir(f->logs, 0777), 0);
    agent_launch_probe(NULL, &f->caps);
    *state = f;
    return 0;
}

static int forget_task(const char *id, void *ctx)
{
    ts_task *t;
    if (agent_task_adopt(NULL, ctx, id, &t, NULL) == 0)
        agent_task_free(t);
    return 0;
}

static int teardown(void **state)
{
    fix *f = *state;
    agent_task_records(f->logs, forget_task, f->logs, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* Skips unless this process may create task cgroups here. */
static void need_cgroups(const fix *f)
{
    if (geteuid() != 0) {
        print_message("skipped: not root, no task cgroups\n");
        skip();
    }
    if (!f->caps.cgroup) {
        print_message("skipped: no usable cgroups: %s\n", f->caps.cgroup_reason);
        skip();
    }
    print_message("cgroup %s under %s\n", f->caps.cgroup_v1 ? "v1" : "v2",
                  f->caps.cgroup_parent);
}

static ts_task_spec spec(const fix *f, const char *id, const char *const *argv)
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
    double end = agent_mono_s() + READY_WAIT_S;
    while (access(path, F_OK) != 0) {
        assert_true(agent_mono_s() < end);
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    }
}

/* A pid that is gone, or only a zombie waiting for its new parent. */
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

static ts_cg_dirs task_dirs(const ts_task *t)
{
    const ts_task_info *in = agent_task_info_get(t);
    assert_true(in->isolated);
    ts_cg_dirs d;
    assert_int_equal(agent_cg_dirs_of(in->cgroup_path, in->cgroup_v1, &d), 0);
    return d;
}

/* Neither the task's directories nor (v1) its agent's directory are left. */
static void assert_removed(const ts_cg_dirs *d)
{
    for (int i = 0; i < d->n; i++) {
        assert_int_equal(access(d->dir[i], F_OK), -1);
        char up[TS_CG_PATH_MAX];
        snprintf(up, sizeof up, "%s", d->dir[i]);
        *strrchr(up, '/') = '\0';
        if (d->v1)
            assert_int_equal(access(up, F_OK), -1);
    }
}

static void allocating_past_the_limit_is_an_oom_kill(void **state)
{
    fix *f = *state;
    need_cgroups(f);
    /* zero-filled, so every page is touched: 8 times the limit */
    const char *argv[] = {"python3", "-c", "b = bytearray(256 << 20); print('survived')", NULL};
    ts_task_spec s = spec(f, "oom1", argv);
    s.memory_bytes = MEMORY_LIMIT_BYTES;
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(&f->caps, &s, &t, &err), 0);
    ts_cg_dirs d = task_dirs(t);
    ts_task_state st;
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    print_message("ended: exit %d, signal %d, oom_kills %lld\n", st.exit_code, st.term_signal,
                  st.oom_kills);
    assert_int_equal(st.term_signal, SIGKILL);
    assert_true(st.oom_kills >= 1);
    agent_task_free(t);
    assert_removed(&d);
}

static void a_fork_bomb_is_held_at_pids_max(void **state)
{
    fix *f = *state;
    need_cgroups(f);
    char script[512];
    snprintf(script, sizeof script,
             "import os, time\n"
             "n = 0\n"
             "for i in range(%d):\n"
             "    try:\n"
             "        if os.fork() == 0:\n"
             "            time.sleep(60); os._exit(0)\n"
             "        n += 1\n"
             "    except OSError:\n"
             "        pass\n"
             "open('forked', 'w').write(str(n))\n"
             "time.sleep(60)\n",
             FORKS_TRIED);
    const char *argv[] = {"python3", "-c", script, NULL};
    ts_task_spec s = spec(f, "pids1", argv);
    s.pids_max = PIDS_MAX;
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(&f->caps, &s, &t, &err), 0);
    ts_cg_dirs d = task_dirs(t);
    wait_for_file(f->work, "forked");
    nanosleep(&(struct timespec){0, 50000000L}, NULL); /* its write is whole */
    long forked = atol(slurp(f->work, "forked"));
    const char *pids_dir = d.dir[d.at[TS_CG_PIDS]];
    long current = atol(slurp(pids_dir, "pids.current"));
    print_message("%ld of %d forks succeeded, pids.current %ld, pids.max %d\n", forked,
                  FORKS_TRIED, current, PIDS_MAX);
    assert_true(forked < PIDS_MAX);
    assert_true(current <= PIDS_MAX);
    agent_task_free(t); /* its children die with its cgroup */
    assert_removed(&d);
}

/* CPU time the task's cgroup has used, in seconds. */
static double cpu_used_s(const ts_cg_dirs *d)
{
    if (d->v1) {
        assert_true(d->at[TS_CG_CPUACCT] >= 0);
        return (double)atoll(slurp(d->dir[d->at[TS_CG_CPUACCT]], "cpuacct.usage")) / 1e9;
    }
    const char *stat = slurp(d->dir[0], "cpu.stat");
    const char *u = strstr(stat, "usage_usec ");
    assert_non_null(u);
    return (double)atoll(u + 11) / 1e6;
}

/* Periods in which the cgroup ran out of its quota (cpu.stat nr_throttled,
 * v1 and v2 alike): > 0 only where a quota is enforced, however busy the
 * machine is. */
static long long throttled(const ts_cg_dirs *d)
{
    const char *stat = slurp(d->dir[d->at[TS_CG_CPU]], "cpu.stat");
    const char *n = stat ? strstr(stat, "nr_throttled ") : NULL;
    assert_non_null(n);
    return atoll(n + 13);
}

static void half_a_core_gets_about_half_a_core(void **state)
{
    fix *f = *state;
    need_cgroups(f);
    /* two spinners: more than the quota wherever the machine has 2 cores */
    const char *argv[] = {"/bin/sh", "-c",
                          "spin() { while :; do :; done; }; spin & touch ready; spin", NULL};
    ts_task_spec s = spec(f, "cpu1", argv);
    s.cpu_milli = CPU_HALF_MILLI;
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(&f->caps, &s, &t, &err), 0);
    ts_cg_dirs d = task_dirs(t);
    wait_for_file(f->work, "ready");
    double u0 = cpu_used_s(&d), t0 = agent_mono_s();
    nanosleep(&(struct timespec){CPU_MEASURE_NS / 1000000000L, CPU_MEASURE_NS % 1000000000L},
              NULL);
    double u1 = cpu_used_s(&d), t1 = agent_mono_s();
    double cores = (u1 - u0) / (t1 - t0);
    long long periods = throttled(&d);
    print_message("two spinners limited to %d milli-cores used %.2f cores over %.2f s "
                  "(throttled in %lld periods)\n", CPU_HALF_MILLI, cores, t1 - t0, periods);
    assert_true(cores < CPU_SHARE_MAX);
    /* throttled, unless the machine was too busy for two spinners to reach
     * the quota at all (other work on a shared 2-core machine): then the
     * bound above is all this run can show; under 95 % of the quota on
     * average, a busy machine can keep every period under it (seen at load
     * 7 on 2 cores: 0.4+ cores, no period throttled) */
    if (cores > 0.95 * CPU_HALF_MILLI / 1000.0)
        assert_true(periods > 0);
    else
        print_message("the machine gave the spinners less than the quota: throttling not "
                      "judged\n");
    assert_true(cores > 0.0); /* it did run */
    agent_task_free(t);
    assert_removed(&d);
}

static void only_its_own_gpu_node_opens(void **state)
{
    fix *f = *state;
    need_cgroups(f);
    if (!f->caps.devices) {
        print_message("skipped: no device filter: %s\n", f->caps.devices_reason);
        skip();
    }
    char given[128], other[128];
    snprintf(given, sizeof given, "%s/nvidia%u", f->work, GPU_GIVEN_MINOR);
    snprintf(other, sizeof other, "%s/nvidia%u", f->work, GPU_OTHER_MINOR);
    assert_int_equal(mknod(given, S_IFCHR | 0666, makedev(TS_NVIDIA_GPU_MAJOR, GPU_GIVEN_MINOR)), 0);
    assert_int_equal(mknod(other, S_IFCHR | 0666, makedev(TS_NVIDIA_GPU_MAJOR, GPU_OTHER_MINOR)), 0);
    /* without a driver an open that is allowed fails ENXIO, one that is not EPERM */
    int fd = open(other, O_RDONLY);
    if (fd >= 0 || errno != ENXIO) {
        print_message("skipped: opening a 195:%u node here gives %s, not ENXIO\n",
                      GPU_OTHER_MINOR, fd >= 0 ? "success" : strerror(errno));
        if (fd >= 0)
            close(fd);
        skip();
    }
    const char *argv[] = {"python3", "-c",
                          "import errno, os\n"
                          "for n in ('nvidia3', 'nvidia5', '/dev/null', '/dev/urandom'):\n"
                          "    try:\n"
                          "        os.close(os.open(n, os.O_RDONLY)); print(n, 'ok')\n"
                          "    except OSError as e:\n"
                          "        print(n, errno.errorcode[e.errno])\n",
                          NULL};
    ts_task_spec s = spec(f, "dev1", argv);
    ts_devnum mine = {TS_NVIDIA_GPU_MAJOR, GPU_GIVEN_MINOR};
    s.gpu_devs = &mine;
    s.ngpu_devs = 1;
    s.limit_devices = true;
    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_start(&f->caps, &s, &t, &err), 0);
    assert_true(agent_task_info_get(t)->devices_isolated);
    ts_cg_dirs d = task_dirs(t);
    ts_task_state st;
    assert_int_equal(agent_task_wait(t, WAIT_S, &st, &err), 0);
    assert_int_equal(st.exit_code, 0);
    const char *out = slurp(f->logs, "dev1.out");
    print_message("%s", out);
    assert_non_null(strstr(out, "nvidia3 ENXIO\n"));   /* its own: allowed, no driver */
    assert_non_null(strstr(out, "nvidia5 EPERM\n"));   /* another GPU: refused */
    assert_non_null(strstr(out, "/dev/null ok\n"));    /* the standard nodes stay */
    assert_non_null(strstr(out, "/dev/urandom ok\n"));
    agent_task_free(t);
    assert_removed(&d);
}

/* A process that left the task's session (setsid) dies with the task; an
 * agent killed while the task ran leaves the cgroup to the next agent, which
 * adopts the task and removes all of it when done. */
static void adopted_after_the_agent_died_nothing_is_left(void **state)
{
    fix *f = *state;
    need_cgroups(f);
    const char *argv[] = {"/bin/sh", "-c",
                          "setsid sleep 301 & echo $! > escaped.pid; touch ready; sleep 300",
                          NULL};
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t agent = fork();
    assert_true(agent >= 0);
    if (agent == 0) { /* plays the agent that is killed: nothing cleaned up */
        close(pfd[0]);
        ts_task_spec s = spec(f, "adopt1", argv);
        s.memory_bytes = MEMORY_LIMIT_BYTES;
        ts_task *t;
        ts_err err;
        int ok = agent_task_start(&f->caps, &s, &t, &err) == 0;
        ssize_t w = write(pfd[1], &ok, sizeof ok);
        (void)w;
        _exit(0);
    }
    close(pfd[1]);
    int ok = 0;
    assert_int_equal(read(pfd[0], &ok, sizeof ok), (ssize_t)sizeof ok);
    close(pfd[0]);
    waitpid(agent, NULL, 0);
    assert_true(ok);
    wait_for_file(f->work, "ready");
    long escaped = atol(slurp(f->work, "escaped.pid"));
    assert_true(escaped > 0);
    assert_false(process_gone(escaped));

    ts_task *t;
    ts_err err = {0};
    assert_int_equal(agent_task_adopt(&f->caps, f->logs, "adopt1", &t, &err), 0);
    ts_cg_dirs d = task_dirs(t);
    agent_task_free(t);
    double end = agent_mono_s() + READY_WAIT_S;
    while (!process_gone(escaped) && agent_mono_s() < end)
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    assert_true(process_gone(escaped)); /* left its session, killed all the same */
    assert_removed(&d);
}

/* A configured parent that is neither a cgroup2 directory nor a cgroup
 * path gets no cgroups, and the reason names it (no root needed). */
static void a_bad_parent_is_refused_naming_it(void **state)
{
    (void)state;
    const char *bad[] = {"tessera/relative", "/tessera/../escape", "/sys/fs/cgroup/memory"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (i == 2 && access(bad[i], F_OK) != 0)
            continue; /* no v1 memory hierarchy to name */
        ts_launch_caps caps;
        agent_launch_probe(bad[i], &caps);
        print_message("%s: %s\n", bad[i], caps.cgroup_reason);
        assert_false(caps.cgroup);
        char want[128];
        snprintf(want, sizeof want, "cgroup parent %s: not a cgroup path", bad[i]);
        assert_non_null(strstr(caps.cgroup_reason, want));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_bad_parent_is_refused_naming_it),
        cmocka_unit_test_setup_teardown(allocating_past_the_limit_is_an_oom_kill, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_fork_bomb_is_held_at_pids_max, setup, teardown),
        cmocka_unit_test_setup_teardown(half_a_core_gets_about_half_a_core, setup, teardown),
        cmocka_unit_test_setup_teardown(only_its_own_gpu_node_opens, setup, teardown),
        cmocka_unit_test_setup_teardown(adopted_after_the_agent_died_nothing_is_left, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
