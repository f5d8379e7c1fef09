/*
 * launch_keeper.c - the keeper: the one process that sees a task end.
 *
 * Only a task's parent can learn its exit status, so that parent must not be
 * the agent, which may be killed, crash or be upgraded while its tasks run.
 * The keeper is a small fork of the agent that leads its own session (a
 * terminal's ^C or the agent's process group being signalled does not reach
 * it), ignores the signals it has no use for, and keeps only the descriptors
 * it needs. It forks the task exactly as the agent used to (own session and
 * process group, cgroup, stdio, user, workdir, default signals, exec),
 * records who the task is, tells the agent, then waits. While it waits it
 * keeps the agent's promise for it: a task whose agent has not heard from a
 * controller by the deadline the agent keeps in TS_TASK_DEADLINE_FILE (the
 * agent killed, or gone for an upgrade that did not come back) is stopped,
 * as a cut-off agent stops it, before the controller declares the node lost
 * and starts the job elsewhere: never twice at once. When the task ends
 * it kills what is left of the task's group and cgroup, writes the exit file,
 * removes the cgroup and exits.
 *
 * Everything here runs after fork() in a process that never execs itself, so
 * only async-signal-safe calls are made (no malloc, stdio or locale): all
 * text was prepared by the agent in the plan, numbers are formatted by hand.
 *
 * _GNU_SOURCE: setgroups and close_range are not POSIX.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch_keeper.h"

#define KEEPER_FAILED_EXIT 127
#define CGROUP_RMDIR_TRIES 100      /* x RMDIR_RETRY_NS while killed processes exit */
#define RMDIR_RETRY_NS 10000000L
#define FD_FIRST_KEPT 3             /* 0..2 become /dev/null in the keeper */
#define EXIT_RESERVE_BYTES 256      /* the exit file's text (agent_rec_exit_text) fits */
#define RUNTIME_SIGNAL_BASE 128     /* an OCI runtime's exit status for signal n: 128 + n */
#define KEEPER_NAME "tessera-keeper" /* its comm (ps, pgrep): at most 15 bytes */
#define DEADLINE_SLACK_MS 2000      /* a live agent's own stop comes first (at most half
                                     * the grace: all is over before the node is lost) */
#define DEADLINE_CHECK_MS 1000      /* the deadline file read this often */

struct task_report {
    int step, err;
};

_Noreturn static void task_fail(int fd, int step)
{
    struct task_report r = {step, errno};
    ssize_t w = write(fd, &r, sizeof r);
    (void)w;
    _exit(KEEPER_FAILED_EXIT);
}

void agent_exec_search(const char *name, const char *path, char *const *argv,
                       char *const *envp)
{
    if (strchr(name, '/')) {
        execve(name, argv, envp);
        return;
    }
    size_t nlen = strlen(name);
    bool denied = false;
    for (const char *d = path; d && *d;) {
        const char *end = strchr(d, ':');
        size_t dlen = end ? (size_t)(end - d) : strlen(d);
        char full[PATH_MAX];
        if (dlen > 0 && dlen + 1 + nlen < sizeof full) {
            memcpy(full, d, dlen);
            full[dlen] = '/';
            memcpy(full + dlen + 1, name, nlen + 1);
            execve(full, argv, envp);
            if (errno != ENOENT && errno != ENOTDIR && errno != EACCES)
                return; /* there, but it cannot run (ENOEXEC, E2BIG, ...): that error */
            denied |= errno == EACCES;
        }
        d = end ? end + 1 : NULL;
    }
    errno = denied ? EACCES : ENOENT;
}

/* The task itself, from fork to exec. */
_Noreturn static void task(const ts_keeper_plan *p, int rep, int in, int out, int errfd)
{
    const struct ts_run_as *ra = p->run_as;
    if (setsid() < 0)
        task_fail(rep, TS_STEP_SETSID);
    /* joins before dropping privileges: accounted from the first instruction
     * (v1: in each hierarchy; "0" is the writer itself) */
    for (int i = 0; i < p->cgroup->n; i++)
        if (agent_cg_write(p->cgroup->dir[i], "cgroup.procs", "0") != 0)
            task_fail(rep, TS_STEP_CGROUP);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(errfd, 2) < 0)
        task_fail(rep, TS_STEP_STDIO);
    if (p->stdio_tty && ioctl(0, TIOCSCTTY, 0) != 0) /* ^C on it reaches the task */
        task_fail(rep, TS_STEP_STDIO);
    if (ra->change) {
        if (setgroups((size_t)ra->ngroups, ra->groups) != 0)
            task_fail(rep, TS_STEP_GROUPS);
        if (setgid(ra->gid) != 0)
            task_fail(rep, TS_STEP_GID);
        if (setuid(ra->uid) != 0)
            task_fail(rep, TS_STEP_UID);
    }
    if (chdir(p->workdir) != 0)
        task_fail(rep, TS_STEP_CHDIR);
    /* neither the agent's nor the keeper's signal handling, nor what the
     * keeper still holds (its pipes), reaches the task */
    agent_exec_reset();
    agent_exec_search(p->exe, p->path, p->argv, p->envp);
    task_fail(rep, TS_STEP_EXEC);
}

void agent_exec_reset(void)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
}

static void tell_agent(int fd, int step, int err, pid_t pid, unsigned long long start,
                       unsigned long long kstart)
{
    ts_keeper_report r;
    memset(&r, 0, sizeof r);
    r.step = step;
    r.err = err;
    r.pid = pid;
    r.start_ticks = start;
    r.keeper_start_ticks = kstart;
    ssize_t w;
    do /* under PIPE_BUF: one atomic write; EPIPE (agent gone) is ignored */
        w = write(fd, &r, sizeof r);
    while (w < 0 && errno == EINTR);
}

static int reap(pid_t pid)
{
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    return r == pid ? status : -1;
}

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The deadline file's two numbers (0 0: none, or unreadable). */
static void read_deadline(const char *path, long long *deadline, long long *grace)
{
    char b[64];
    *deadline = *grace = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return;
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    long long v[2] = {0, 0};
    int k = 0;
    for (ssize_t i = 0; i < n && k < 2; i++) {
        if (b[i] >= '0' && b[i] <= '9' && v[k] < 1000000000000000LL)
            v[k] = v[k] * 10 + (b[i] - '0');
        else if (b[i] == ' ' || b[i] == '\n')
            k++;
        else
            return;
    }
    if (k == 2) {
        *deadline = v[0];
        *grace = v[1];
    }
}

/* Waits for the task as reap does; past the agent's controller deadline
 * (and a slack for a live agent's own stop) it stops it: SIGTERM to its
 * group, SIGKILL to the group and cgroups after the grace (*cut_off). */
static int keep_waiting(const ts_keeper_plan *p, pid_t pid, bool *cut_off)
{
    *cut_off = false;
    if (p->deadline_path == NULL)
        return reap(pid);
    long pfd = syscall(SYS_pidfd_open, pid, 0);
    long long kill_at = 0;
    for (;;) {
        int status = 0;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR)) {
            if (pfd >= 0)
                close((int)pfd);
            return r == pid ? status : -1;
        }
        long long now = mono_ms(), deadline, grace;
        read_deadline(p->deadline_path, &deadline, &grace);
        long long slack = grace / 2 < DEADLINE_SLACK_MS ? grace / 2 : DEADLINE_SLACK_MS;
        if (!*cut_off && deadline > 0 && now > deadline + slack) {
            *cut_off = true;
            kill(-pid, SIGTERM);
            kill_at = now + grace;
        }
        if (kill_at > 0 && now >= kill_at) {
            kill(-pid, SIGKILL);
            agent_cg_kill(p->cgroup);
            if (p->runtime_cgroup != NULL)
                agent_cg_kill(p->runtime_cgroup);
            kill_at = 0;
        }
        if (pfd >= 0) {
            struct pollfd w = {.fd = (int)pfd, .events = POLLIN};
            poll(&w, 1, DEADLINE_CHECK_MS);
        } else {
            struct timespec ts = {0, 250000000L};
            nanosleep(&ts, NULL);
        }
    }
}

/* A failed start after the fork: nothing of the task may stay behind. */
_Noreturn static void give_up(const ts_keeper_plan *p, int agent_fd, pid_t pid, int step,
                              int err)
{
    if (pid > 0) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        reap(pid);
    }
    unlink(p->paths->keeper_tmp);
    tell_agent(agent_fd, step, err, 0, 0, 0);
    _exit(KEEPER_FAILED_EXIT);
}

/* The signals nothing should deliver to the keeper are ignored. Faults keep
 * their handling (an ignored SIGSEGV would spin); SIGCHLD stays default, or
 * the task would be reaped by the kernel before the keeper could wait. */
static void keeper_signals(void)
{
    struct sigaction ign, dfl;
    memset(&ign, 0, sizeof ign);
    memset(&dfl, 0, sizeof dfl);
    ign.sa_handler = SIG_IGN;
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&ign.sa_mask);
    sigemptyset(&dfl.sa_mask);
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS ||
            sig == SIGFPE || sig == SIGILL || sig == SIGABRT || sig == SIGTRAP ||
            sig == SIGSYS)
            continue;
        sigaction(sig, sig == SIGCHLD ? &dfl : &ign, NULL); /* EINVAL for libc's own: fine */
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Moves the n descriptors in fds (-1: absent) to FD_FIRST_KEPT.., closes
 * every other one, and points 0..2 at /dev/null. 0, or -1 with errno. */
static int keep_only(int *fds, int n)
{
    int tmp[8];
    if (n > (int)(sizeof tmp / sizeof tmp[0])) {
        errno = EINVAL;
        return -1;
    }
    /* first above the target range, so moving one cannot overwrite another */
    for (int i = 0; i < n; i++) {
        tmp[i] = fds[i] < 0 ? -1 : fcntl(fds[i], F_DUPFD, FD_FIRST_KEPT + n);
        if (fds[i] >= 0 && tmp[i] < 0)
            return -1;
    }
    for (int i = 0; i < n; i++) {
        if (tmp[i] < 0)
            continue;
        if (dup2(tmp[i], FD_FIRST_KEPT + i) < 0)
            return -1;
        fds[i] = FD_FIRST_KEPT + i;
    }
    close_range((unsigned)(FD_FIRST_KEPT + n), ~0U, 0);
    for (int i = 0; i < n; i++) /* a slot of an absent one may hold an old descriptor */
        if (tmp[i] < 0)
            close(FD_FIRST_KEPT + i);
    int null = open("/dev/null", O_RDWR);
    if (null < 0)
        return -1;
    for (int fd = 0; fd <= 2; fd++)
        if (null != fd)
            dup2(null, fd);
    if (null > 2)
        close(null);
    return 0;
}

static void remove_cgroup(const ts_cg_dirs *cg)
{
    for (int i = 0; i < CGROUP_RMDIR_TRIES; i++) {
        if (agent_cg_remove(cg) == 0)
            return;
        struct timespec ts = {0, RMDIR_RETRY_NS};
        nanosleep(&ts, NULL);
    }
}

enum { KEPT_IN, KEPT_OUT, KEPT_ERR, KEPT_TASK_RD, KEPT_TASK_WR, KEPT_AGENT, KEPT_N };

_Noreturn void agent_keeper_run(const ts_keeper_plan *p)
{
    int agent = p->agent_report_wr;
    if (setsid() < 0)
        give_up(p, agent, 0, TS_STEP_KEEPER, errno);
    keeper_signals();
    /* the keeper joins the task's network namespace, so the task is born in it */
    if (p->netns >= 0 && setns(p->netns, CLONE_NEWNET) != 0)
        give_up(p, agent, 0, TS_STEP_KEEPER, errno);
    /* not to be taken for the agent by whoever stops agents by name */
    prctl(PR_SET_NAME, KEEPER_NAME, 0, 0, 0);
    int fd[KEPT_N] = {p->in, p->out, p->err, p->task_report_rd, p->task_report_wr, agent};
    if (keep_only(fd, KEPT_N) != 0)
        give_up(p, agent, 0, TS_STEP_KEEPER, errno);
    agent = fd[KEPT_AGENT];

    pid_t pid = fork();
    if (pid < 0)
        give_up(p, agent, 0, TS_STEP_FORK, errno);
    if (pid == 0)
        task(p, fd[KEPT_TASK_WR], fd[KEPT_IN], fd[KEPT_OUT], fd[KEPT_ERR]);
    for (int i = KEPT_IN; i <= KEPT_TASK_WR; i++)
        if (i != KEPT_TASK_RD && fd[i] >= 0)
            close(fd[i]);

    /* EOF: the exec succeeded (the pipe is close-on-exec in the task) */
    struct task_report tr;
    ssize_t n;
    do
        n = read(fd[KEPT_TASK_RD], &tr, sizeof tr);
    while (n < 0 && errno == EINTR);
    close(fd[KEPT_TASK_RD]);
    if (n != 0) {
        reap(pid);
        bool whole = n == (ssize_t)sizeof tr && tr.step > TS_STEP_STARTED && tr.step < TS_STEP_COUNT;
        tell_agent(agent, whole ? tr.step : TS_STEP_EXEC, whole ? tr.err : EIO, 0, 0, 0);
        _exit(KEEPER_FAILED_EXIT);
    }

    /* the task cannot be reaped before this keeper waits: its stat is there */
    unsigned long long start = 0, kstart = 0;
    char state;
    if (agent_rec_proc_stat(pid, &start, &state) != 0 ||
        agent_rec_proc_stat(getpid(), &kstart, &state) != 0)
        give_up(p, agent, pid, TS_STEP_PROC, errno ? errno : EIO);
    char head[512];
    ts_sbuf hb;
    agent_sb_init(&hb, head, sizeof head);
    agent_rec_head(&hb, p->task_id, pid, start, getpid(), kstart);
    if (hb.cut)
        give_up(p, agent, pid, TS_STEP_RECORD, ENAMETOOLONG);
    if (agent_rec_put(p->paths->keeper_tmp, p->paths->record, head, hb.len, p->record_body,
                   strlen(p->record_body)) != 0)
        give_up(p, agent, pid, TS_STEP_RECORD, errno);
    /* the exit file's room now: the task's output may fill the same
     * filesystem before it ends (then its status would be written nowhere,
     * and the task reported lost); without it, written as before */
    int exit_fd = agent_rec_reserve(p->paths->exit_tmp, EXIT_RESERVE_BYTES);
    tell_agent(agent, TS_STEP_STARTED, 0, pid, start, kstart);
    close(agent);

    bool cut_off;
    int status = keep_waiting(p, pid, &cut_off);
    /* counted before the cgroup kill below, which is no OOM kill; a
     * container's own cgroup is read while the runtime has kept it */
    long long ooms = agent_cg_oom_kills(p->cgroup);
    if (p->runtime_cgroup != NULL)
        ooms += agent_cg_oom_kills(p->runtime_cgroup);
    /* what the task left in its group and cgroup ends with it */
    kill(-pid, SIGKILL);
    agent_cg_kill(p->cgroup);
    /* the runtime keeps its container (--keep): deleted here, whatever the end */
    if (p->cleanup_exe != NULL) {
        pid_t c = fork();
        if (c == 0) {
            char *const no_env[] = {NULL};
            execve(p->cleanup_exe, p->cleanup_argv, no_env);
            _exit(KEEPER_FAILED_EXIT);
        }
        if (c > 0)
            reap(c);
        /* an OCI runtime exits 128 + n when its container's process died of
         * signal n: reported as that signal, as for a bare task */
        if (status != -1 && (status & 0x7f) == 0 && ((status >> 8) & 0xff) > RUNTIME_SIGNAL_BASE &&
            ((status >> 8) & 0xff) < RUNTIME_SIGNAL_BASE + NSIG)
            status = ((status >> 8) & 0xff) - RUNTIME_SIGNAL_BASE;
    }
    if (status != -1) {
        char text[256];
        ts_sbuf eb;
        agent_sb_init(&eb, text, sizeof text);
        agent_rec_exit_text(&eb, pid, start, status, ooms, cut_off);
        if (exit_fd < 0 || agent_rec_put_reserved(exit_fd, p->paths->exit_tmp, p->paths->exit,
                                                  text, eb.len) != 0)
            agent_rec_put(p->paths->exit_tmp, p->paths->exit, text, eb.len, "", 0);
    } else if (exit_fd >= 0) {
        close(exit_fd);
        unlink(p->paths->exit_tmp);
    }
    remove_cgroup(p->cgroup);
    _exit(0);
}
