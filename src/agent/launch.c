/*
 * launch.c - starting a task (fork/exec) and the stop state machine.
 *
 * Everything that can fail in an explainable way (spec, user, workdir, command
 * lookup, log files, cgroup) is done in the agent before fork, so the child
 * runs only async-signal-safe calls: setsid, join the cgroup (it writes "0" to
 * the cgroup.procs fd the parent opened, before dropping privileges, so the
 * task and all it forks are accounted from the first instruction), stdio,
 * groups/gid/uid, chdir, default signals, execve. A failure there comes back
 * over a close-on-exec pipe as (step, errno); EOF on the pipe means exec won.
 *
 * The task leads its own session and process group, so signals go to -pid and
 * reach whatever the task started. When the leader is reaped the rest of the
 * group is killed too (and the cgroup, where there is one, via cgroup.kill).
 *
 * _GNU_SOURCE: setgroups, getgrouplist, pipe2 and close_range are not POSIX.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch.h"
#include "launch_cgroup.h"
#include "launch_env.h"

/* snprintf for reasons and names, where cutting a long one short is fine. */
static void say(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

#define TASK_ID_MAX 63
#define POLL_INTERVAL_NS 10000000L /* blocking helpers poll every 10 ms */
#define CGROUP_RMDIR_TRIES 100    /* x 10 ms while killed processes exit */
#define LOG_FILE_MODE 0640

struct ts_task {
    ts_task_info info;
    ts_task_phase phase;
    ts_stop_outcome outcome;
    int exit_code, term_signal;
    bool stopping, ack_seen, cgroup_left;
    double deadline, term_grace_s;
};

enum child_step { STEP_SETSID, STEP_CGROUP, STEP_STDIO, STEP_GROUPS, STEP_GID, STEP_UID,
                  STEP_CHDIR, STEP_EXEC };
static const char *const STEP_NAME[] = {"setsid", "joining the cgroup", "redirecting stdio",
                                        "setgroups", "setgid", "setuid", "chdir", "exec"};

struct child_report {
    int step, err;
};

double ts_launch_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void ts_launch_probe(const char *cgroup_parent, ts_launch_caps *caps)
{
    memset(caps, 0, sizeof *caps);
    caps->root = geteuid() == 0;
    ts_cg_probe(cgroup_parent, caps);
}

const ts_task_info *ts_task_info_get(const ts_task *t)
{
    return &t->info;
}

static int valid_env_name(const char *s, size_t n)
{
    if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= '0' && s[i] <= '9')))
            return 0;
    return 1;
}

static int check_env_list(const char *const *list, const char *what, ts_err *err)
{
    for (size_t i = 0; list != NULL && list[i] != NULL; i++) {
        const char *eq = strchr(list[i], '=');
        if (eq == NULL || !valid_env_name(list[i], (size_t)(eq - list[i])))
            return ts_err_set(err, TS_EINVAL, "%s[%zu]: \"%s\" is not NAME=value", what, i,
                              list[i]);
    }
    return 0;
}

static int check_spec(const ts_task_spec *s, ts_err *err)
{
    const char *id = s->task_id;
    if (id == NULL || id[0] == '\0' || strlen(id) > TASK_ID_MAX)
        return ts_err_set(err, TS_EINVAL, "task_id: must be 1..%d characters", TASK_ID_MAX);
    if (id[strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")] ||
        strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
        return ts_err_set(err, TS_EINVAL, "task_id: \"%s\": only A-Z a-z 0-9 . _ -", id);
    if (s->argv == NULL || s->argv[0] == NULL || s->argv[0][0] == '\0')
        return ts_err_set(err, TS_EINVAL, "task %s: argv: empty command", id);
    if (s->workdir == NULL || s->workdir[0] == '\0')
        return ts_err_set(err, TS_EINVAL, "task %s: workdir: required", id);
    if (s->log_dir == NULL || s->log_dir[0] == '\0')
        return ts_err_set(err, TS_EINVAL, "task %s: log_dir: required", id);
    if (s->ngpu > 0 && s->gpu_uuids == NULL)
        return ts_err_set(err, TS_EINVAL, "task %s: gpu_uuids: NULL with ngpu %zu", id, s->ngpu);
    for (size_t i = 0; i < s->ngpu; i++)
        if (s->gpu_uuids[i] == NULL || s->gpu_uuids[i][0] == '\0' || strchr(s->gpu_uuids[i], ','))
            return ts_err_set(err, TS_EINVAL, "task %s: gpu_uuids[%zu]: empty or has a comma",
                              id, i);
    if (s->world_size < 0 || (s->world_size > 0 && (s->rank < 0 || s->rank >= s->world_size)) ||
        s->local_rank < 0)
        return ts_err_set(err, TS_EINVAL, "task %s: rank %d / local_rank %d: must be in 0..%d",
                          id, s->rank, s->local_rank, s->world_size - 1);
    if (s->master_port < 0 || s->master_port > 65535)
        return ts_err_set(err, TS_EINVAL, "task %s: master_port: must be 0..65535", id);
    if (s->mps_thread_pct < 0 || s->mps_thread_pct > 100)
        return ts_err_set(err, TS_EINVAL, "task %s: mps_thread_pct: must be 1..100 (0: unset)",
                          id);
    if (s->cpu_milli < 0 || s->memory_bytes < 0 || s->pids_max < 0 || s->term_grace_s < 0)
        return ts_err_set(err, TS_EINVAL, "task %s: limits and grace must not be negative", id);
    if (s->ngpu_devs > 0 && s->gpu_devs == NULL)
        return ts_err_set(err, TS_EINVAL, "task %s: gpu_devs: NULL with ngpu_devs %zu", id,
                          s->ngpu_devs);
    int rc = check_env_list(s->env, "env", err);
    return rc ? rc : check_env_list(s->shim_env, "shim_env", err);
}

/* argv[0] as execve wants it: itself if it has a '/', else found on PATH. */
static int resolve_command(const char *cmd, const char *path, char *out, size_t len)
{
    if (strchr(cmd, '/') != NULL) {
        say(out, len, "%s", cmd);
        return access(cmd, X_OK);
    }
    for (const char *p = path; p != NULL && *p != '\0';) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > 0 && snprintf(out, len, "%.*s/%s", (int)n, p, cmd) < (int)len &&
            access(out, X_OK) == 0)
            return 0;
        p = end ? end + 1 : NULL;
    }
    errno = ENOENT;
    return -1;
}

struct run_as {
    uid_t uid;
    gid_t gid;
    gid_t *groups;
    int ngroups;
    bool change;
    char name[256], home[PATH_MAX];
};

static int pick_user(const ts_task_spec *s, struct run_as *ra, ts_task_info *info, ts_err *err)
{
    struct passwd pw, *res = NULL;
    char buf[16384];
    const char *want = s->user;
    int rc;
    if (want != NULL && want[0] != '\0')
        rc = getpwnam_r(want, &pw, buf, sizeof buf, &res);
    else
        rc = getpwuid_r(geteuid(), &pw, buf, sizeof buf, &res);
    if (want != NULL && want[0] != '\0' && res == NULL)
        return ts_err_set(err, TS_ENOENT, "task %s: user \"%s\": %s", s->task_id, want,
                          rc ? strerror(rc) : "no such user");
    ra->uid = geteuid();
    ra->gid = getegid();
    say(ra->name, sizeof ra->name, "%s", res ? res->pw_name : "");
    say(ra->home, sizeof ra->home, "%s", res ? res->pw_dir : "/");
    if (res == NULL || want == NULL || want[0] == '\0')
        return 0;
    if (geteuid() != 0) {
        if (res->pw_uid != geteuid()) {
            struct passwd *me = getpwuid(geteuid());
            say(ra->name, sizeof ra->name, "%s", me ? me->pw_name : "");
            say(info->user_note, sizeof info->user_note,
                     "agent is not root: runs as uid %ld, not as \"%s\"", (long)geteuid(), want);
        }
        return 0;
    }
    ra->uid = res->pw_uid;
    ra->gid = res->pw_gid;
    ra->change = true;
    int n = 32;
    for (;;) {
        gid_t *g = realloc(ra->groups, (size_t)n * sizeof *g);
        if (g == NULL)
            return ts_err_set(err, TS_ENOMEM, "task %s: group list", s->task_id);
        ra->groups = g;
        int got = n;
        if (getgrouplist(res->pw_name, res->pw_gid, g, &got) >= 0) {
            ra->ngroups = got;
            return 0;
        }
        n = got > n ? got : n * 2;
    }
}

static int open_log(const char *dir, const char *id, const char *ext, char *path, size_t len,
                    const struct run_as *ra, ts_err *err)
{
    if (snprintf(path, len, "%s/%s.%s", dir, id, ext) >= (int)len)
        return ts_err_set(err, TS_EINVAL, "task %s: log_dir: path too long", id);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, LOG_FILE_MODE);
    if (fd < 0)
        return ts_err_set(err, errno == ENOENT ? TS_ENOENT : TS_EIO, "task %s: log %s: %s", id,
                          path, strerror(errno));
    if (ra->change && fchown(fd, ra->uid, ra->gid) != 0) {
        int e = errno;
        close(fd);
        return ts_err_set(err, TS_EIO, "task %s: chown %s: %s", id, path, strerror(e));
    }
    return fd;
}

static void child_fail(int fd, int step)
{
    struct child_report r = {step, errno};
    ssize_t w = write(fd, &r, sizeof r);
    (void)w;
    _exit(127);
}

static void child(int rep, int cg_fd, int in, int out, int errfd, const struct run_as *ra,
                  const char *workdir, const char *exe, char *const argv[], char *const envp[])
{
    if (setsid() < 0)
        child_fail(rep, STEP_SETSID);
    if (cg_fd >= 0 && write(cg_fd, "0", 1) != 1)
        child_fail(rep, STEP_CGROUP);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(errfd, 2) < 0)
        child_fail(rep, STEP_STDIO);
    if (ra->change) {
        if (setgroups((size_t)ra->ngroups, ra->groups) != 0)
            child_fail(rep, STEP_GROUPS);
        if (setgid(ra->gid) != 0)
            child_fail(rep, STEP_GID);
        if (setuid(ra->uid) != 0)
            child_fail(rep, STEP_UID);
    }
    if (chdir(workdir) != 0)
        child_fail(rep, STEP_CHDIR);
    /* the agent's signal handling must not leak into the task */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
    /* descriptors the agent forgot to mark close-on-exec do not reach the task */
    close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    execve(exe, argv, envp);
    child_fail(rep, STEP_EXEC);
}

/* Waits for the child's report: 0 when exec succeeded. */
static int read_report(int fd, pid_t pid, const ts_task_spec *s, const char *exe, ts_err *err)
{
    struct child_report r;
    ssize_t n;
    do
        n = read(fd, &r, sizeof r);
    while (n < 0 && errno == EINTR);
    if (n == 0)
        return 0;
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (n != (ssize_t)sizeof r)
        return ts_err_set(err, TS_EIO, "task %s: lost the start report from the child",
                          s->task_id);
    const char *what = r.step == STEP_CHDIR ? s->workdir : r.step == STEP_EXEC ? exe : "";
    int code = r.err == ENOENT ? TS_ENOENT : TS_EIO;
    return ts_err_set(err, code, "task %s: %s%s%s: %s", s->task_id, STEP_NAME[r.step],
                      what[0] ? " " : "", what, strerror(r.err));
}

int ts_task_start(const ts_launch_caps *caps, const ts_task_spec *s, ts_task **out, ts_err *err)
{
    *out = NULL;
    int rc = check_spec(s, err);
    if (rc)
        return rc;
    struct stat st;
    if (stat(s->workdir, &st) != 0)
        return ts_err_set(err, TS_ENOENT, "task %s: workdir %s: %s", s->task_id, s->workdir,
                          strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ts_err_set(err, TS_ENOENT, "task %s: workdir %s: not a directory", s->task_id,
                          s->workdir);

    ts_task *t = calloc(1, sizeof *t);
    struct run_as ra = {0};
    ts_envv env = {0};
    char **argv = NULL;
    int fds[6] = {-1, -1, -1, -1, -1, -1}; /* in, out, err, cgroup.procs, report r/w */
    if (t == NULL)
        return ts_err_set(err, TS_ENOMEM, "task %s: out of memory", s->task_id);
    t->exit_code = -1;
    t->term_grace_s = s->term_grace_s > 0 ? s->term_grace_s : TS_TERM_GRACE_DEFAULT_S;
    ts_task_info *info = &t->info;

    if ((rc = pick_user(s, &ra, info, err)) != 0)
        goto fail;
    info->uid = ra.uid;
    const char *ack_dir = s->ack_dir && s->ack_dir[0] ? s->ack_dir : s->log_dir;
    say(info->ack_path, sizeof info->ack_path, "%s/%s.ckpt-done", ack_dir, s->task_id);
    if (unlink(info->ack_path) != 0 && errno != ENOENT) {
        rc = ts_err_set(err, TS_EIO, "task %s: removing the old ack %s: %s", s->task_id,
                        info->ack_path, strerror(errno));
        goto fail;
    }
    struct ts_env_user eu = {ra.name, ra.home};
    if (ts_envv_build(&env, s, &eu, info->ack_path) != 0) {
        rc = ts_err_set(err, TS_ENOMEM, "task %s: environment: out of memory", s->task_id);
        goto fail;
    }
    char exe[PATH_MAX];
    if (resolve_command(s->argv[0], ts_envv_get(&env, "PATH"), exe, sizeof exe) != 0) {
        rc = ts_err_set(err, errno == ENOENT ? TS_ENOENT : TS_EIO, "task %s: command %s: %s",
                        s->task_id, s->argv[0], strerror(errno));
        goto fail;
    }
    size_t argc = 0;
    while (s->argv[argc] != NULL)
        argc++;
    argv = calloc(argc + 1, sizeof *argv);
    if (argv == NULL) {
        rc = ts_err_set(err, TS_ENOMEM, "task %s: out of memory", s->task_id);
        goto fail;
    }
    memcpy(argv, s->argv, argc * sizeof *argv); /* execve's prototype is not const-correct */

    if ((fds[1] = open_log(s->log_dir, s->task_id, "out", info->stdout_path,
                           sizeof info->stdout_path, &ra, err)) < 0 ||
        (fds[2] = open_log(s->log_dir, s->task_id, "err", info->stderr_path,
                           sizeof info->stderr_path, &ra, err)) < 0) {
        rc = err ? err->code : TS_EIO;
        goto fail;
    }
    if ((fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        rc = ts_err_set(err, TS_EIO, "task %s: /dev/null: %s", s->task_id, strerror(errno));
        goto fail;
    }

    if (caps == NULL)
        say(info->isolation_reason, sizeof info->isolation_reason, "cgroups not probed");
    else if (!caps->cgroup)
        say(info->isolation_reason, sizeof info->isolation_reason, "%s",
                 caps->cgroup_reason);
    else if (ts_cg_create(caps, s, info->cgroup_path, sizeof info->cgroup_path,
                          info->isolation_reason, sizeof info->isolation_reason) == 0) {
        char procs[1024];
        say(procs, sizeof procs, "%s/cgroup.procs", info->cgroup_path);
        fds[3] = open(procs, O_WRONLY | O_CLOEXEC);
        if (fds[3] < 0) {
            rc = ts_err_set(err, TS_EIO, "task %s: %s: %s", s->task_id, procs, strerror(errno));
            goto fail;
        }
        info->isolated = true;
    } else {
        info->cgroup_path[0] = '\0';
    }
    if (!s->limit_devices)
        say(info->devices_reason, sizeof info->devices_reason, "not requested");
    else if (!info->isolated)
        say(info->devices_reason, sizeof info->devices_reason, "no task cgroup");
    else if (!caps->devices)
        say(info->devices_reason, sizeof info->devices_reason, "%s", caps->devices_reason);
    else if (ts_cg_limit_devices(info->cgroup_path, s->gpu_devs, s->ngpu_devs,
                                 info->devices_reason, sizeof info->devices_reason) == 0)
        info->devices_isolated = true;

    if (pipe2(&fds[4], O_CLOEXEC) != 0) {
        rc = ts_err_set(err, TS_EIO, "task %s: pipe: %s", s->task_id, strerror(errno));
        goto fail;
    }
    pid_t pid = fork();
    if (pid < 0) {
        rc = ts_err_set(err, TS_EIO, "task %s: fork: %s", s->task_id, strerror(errno));
        goto fail;
    }
    if (pid == 0)
        child(fds[5], fds[3], fds[0], fds[1], fds[2], &ra, s->workdir, exe, argv, env.v);
    close(fds[5]);
    fds[5] = -1;
    if ((rc = read_report(fds[4], pid, s, exe, err)) != 0)
        goto fail;
    info->pid = pid;
    t->phase = TS_TASK_RUNNING;
    for (int i = 0; i < 6; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(argv);
    ts_envv_free(&env);
    free(ra.groups);
    *out = t;
    return 0;
fail:
    for (int i = 0; i < 6; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (info->isolated)
        ts_cg_remove(info->cgroup_path);
    free(argv);
    ts_envv_free(&env);
    free(ra.groups);
    free(t);
    return rc;
}

static void signal_group(ts_task *t, int sig)
{
    kill(-t->info.pid, sig);
    if (sig == SIGKILL && t->info.isolated)
        ts_cg_kill(t->info.cgroup_path);
}

static void remove_cgroup(ts_task *t, int tries)
{
    if (!t->info.isolated || !t->cgroup_left)
        return;
    for (int i = 0; i < tries; i++) {
        if (ts_cg_remove(t->info.cgroup_path) == 0 || errno == ENOENT) {
            t->cgroup_left = false;
            return;
        }
        if (i + 1 < tries)
            nanosleep(&(struct timespec){0, POLL_INTERVAL_NS}, NULL);
    }
}

static int ack_present(const ts_task *t)
{
    return access(t->info.ack_path, F_OK) == 0;
}

static void finish(ts_task *t, int status, bool known)
{
    if (known && WIFEXITED(status))
        t->exit_code = WEXITSTATUS(status);
    else if (known && WIFSIGNALED(status))
        t->term_signal = WTERMSIG(status);
    if (t->stopping) {
        t->ack_seen = t->ack_seen || ack_present(t);
        t->outcome = t->ack_seen                          ? TS_STOP_CHECKPOINTED
                     : t->phase == TS_TASK_CHECKPOINTING ? TS_STOP_EXITED
                     : t->phase == TS_TASK_TERMINATING   ? TS_STOP_TERMINATED
                                                          : TS_STOP_KILLED;
    }
    /* what the task left behind in its group (or cgroup) ends with it */
    signal_group(t, SIGKILL);
    t->phase = TS_TASK_EXITED;
    t->cgroup_left = t->info.isolated;
    remove_cgroup(t, 1);
}

int ts_task_preempt_begin(ts_task *t, int sig, double grace_s, double now, ts_err *err)
{
    if (t->stopping || t->phase == TS_TASK_EXITED)
        return 0;
    if (sig == 0)
        sig = SIGUSR1;
    if (sig < 1 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP)
        return ts_err_set(err, TS_EINVAL, "checkpoint signal %d: not a catchable signal", sig);
    t->stopping = true;
    t->phase = TS_TASK_CHECKPOINTING;
    t->deadline = now + (grace_s < 0 ? TS_CHECKPOINT_GRACE_DEFAULT_S : grace_s);
    if (kill(-t->info.pid, sig) != 0 && errno != ESRCH)
        return ts_err_set(err, TS_EIO, "task pid %ld: signal %d: %s", (long)t->info.pid, sig,
                          strerror(errno));
    return 0;
}

int ts_task_poll(ts_task *t, double now, ts_task_state *st, ts_err *err)
{
    if (t->phase != TS_TASK_EXITED) {
        int status = 0;
        pid_t r = waitpid(t->info.pid, &status, WNOHANG);
        if (r == t->info.pid) {
            finish(t, status, true);
        } else if (r < 0 && errno != EINTR) {
            int e = errno;
            finish(t, 0, false); /* someone else reaped it: the status is lost */
            if (e != ECHILD)
                return ts_err_set(err, TS_EIO, "task pid %ld: waitpid: %s", (long)t->info.pid,
                                  strerror(e));
        } else if (t->phase == TS_TASK_CHECKPOINTING && (ack_present(t) || now >= t->deadline)) {
            t->ack_seen = ack_present(t);
            signal_group(t, SIGTERM);
            t->phase = TS_TASK_TERMINATING;
            t->deadline = now + t->term_grace_s;
        } else if (t->phase == TS_TASK_TERMINATING && now >= t->deadline) {
            signal_group(t, SIGKILL);
            t->phase = TS_TASK_KILLING;
        }
    } else {
        remove_cgroup(t, 1);
    }
    if (st != NULL) {
        st->phase = t->phase;
        st->exit_code = t->exit_code;
        st->term_signal = t->term_signal;
        st->outcome = t->outcome;
        st->ack_seen = t->ack_seen;
    }
    return 0;
}

int ts_task_wait(ts_task *t, double timeout_s, ts_task_state *st, ts_err *err)
{
    double end = ts_launch_now() + timeout_s;
    for (;;) {
        ts_task_state s;
        int rc = ts_task_poll(t, ts_launch_now(), &s, err);
        if (st != NULL)
            *st = s;
        if (rc != 0 || s.phase == TS_TASK_EXITED) {
            if (rc == 0)
                remove_cgroup(t, CGROUP_RMDIR_TRIES);
            return rc;
        }
        if (timeout_s >= 0 && ts_launch_now() >= end)
            return TS_ENOSPC;
        nanosleep(&(struct timespec){0, POLL_INTERVAL_NS}, NULL);
    }
}

int ts_task_preempt(ts_task *t, int sig, double grace_s, ts_stop_outcome *outcome, ts_err *err)
{
    int rc = ts_task_preempt_begin(t, sig, grace_s, ts_launch_now(), err);
    ts_task_state st = {0};
    if (rc == 0)
        rc = ts_task_wait(t, -1, &st, err);
    if (outcome != NULL)
        *outcome = rc == 0 ? st.outcome : TS_STOP_NONE;
    return rc;
}

void ts_task_free(ts_task *t)
{
    if (t == NULL)
        return;
    if (t->phase != TS_TASK_EXITED) {
        signal_group(t, SIGKILL);
        int status = 0;
        pid_t r;
        while ((r = waitpid(t->info.pid, &status, 0)) < 0 && errno == EINTR)
            ;
        finish(t, status, r == t->info.pid);
    }
    remove_cgroup(t, CGROUP_RMDIR_TRIES);
    free(t);
}
