/*
 * session.c - the agent's side of interactive sessions (docs/interactive.md).
 *
 * A session comes in the desired state ("sessions": id, secret, job, rank,
 * kind). The agent opens its own outgoing connection to the controller
 * (POST /v1/agent/stream/{id}, node credential and the session's secret,
 * upgraded to a byte stream: nodes still need no inbound connection) on a
 * thread of the session's own, and speaks tessera/stream.h frames with the
 * client at the other end:
 *   attach   an interactive task's stdio: the PTY (or socket) the agent
 *            made at its start, shared with the task's local_task through
 *            a reference-counted agent_stdio; one attach at a time
 *   exec     a new process in the task's cgroup (v1 or v2), namespaces (net, ipc,
 *            uts, mount), user, groups, working directory and environment,
 *            all read from /proc/<task pid>; on a PTY when asked (tty)
 *   forward  a TCP connection to 127.0.0.1:port in the task's network
 *            namespace (the thread joins it: a namespace is per thread)
 * What the session reads from the task it sends on with a bounded write:
 * a client that does not read stalls this session's thread, and the task's
 * own writes (the PTY fills), never the agent's loop.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pty.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <linux/capability.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_internal.h"
#include "agent/image.h"
#include "agent/launch.h"
#include "agent/launch_cgroup.h"
#include "agent/launch_keeper.h"
#include "agent/session_proc.h"
#include "tessera/stream.h"
#include "agent/clock.h"

#define SESSION_OPEN_TIMEOUT_S 10.0  /* the agent's side of the stream */
#define SESSION_WRITE_TIMEOUT_S 60.0 /* a client that reads nothing this long ends it */
#define SESSION_ARGS_MAX 256
#define SESSION_KILL_WAIT_S 2.0      /* an exec whose client left: SIGHUP, then SIGKILL */

struct agent_stdio {
    int fd;
    bool tty;
    int refs;     /* atomics: local_task and sessions using it */
    int attached; /* a session reads it now */
    int drained;  /* a session read it to its end */
};

static void stdio_unref(struct agent_stdio *s)
{
    if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        close(s->fd);
        free(s);
    }
}

void agent_stdio_make(local_task *lt, const ts_desired_task *d, uid_t uid, int *peer,
                      char *why, size_t why_len)
{
    *peer = -1;
    if (!(d->present & TS_DT_BIT(TS_DT_INTERACTIVE)))
        return;
    struct agent_stdio *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(why, why_len, "interactive: out of memory");
        return;
    }
    s->tty = d->interactive.tty;
    int fds[2];
    if (s->tty) { /* 0: not sent, the terminal's usual size */
        struct winsize ws = {
            .ws_row = (unsigned short)(d->interactive.rows > 0 ? d->interactive.rows : 24),
            .ws_col = (unsigned short)(d->interactive.cols > 0 ? d->interactive.cols : 80)};
        if (openpty(&fds[0], &fds[1], NULL, NULL, &ws) != 0) {
            snprintf(why, why_len, "interactive: openpty: %s", strerror(errno));
            free(s);
            return;
        }
        fcntl(fds[0], F_SETFD, FD_CLOEXEC);
        fcntl(fds[1], F_SETFD, FD_CLOEXEC);
        if (uid != (uid_t)-1) { /* the task's terminal is its user's, as login makes it */
            struct group *g = getgrnam("tty");
            if (fchown(fds[1], uid, g ? g->gr_gid : (gid_t)-1) != 0 ||
                fchmod(fds[1], 0620) != 0) {
                /* still usable through the descriptor the task inherits */
            }
        }
    } else if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
        snprintf(why, why_len, "interactive: socketpair: %s", strerror(errno));
        free(s);
        return;
    }
    s->fd = fds[0];
    s->refs = 1;
    lt->stdio = s;
    lt->stdio_tty = s->tty;
    lt->stdio_exit_s = 0;
    *peer = fds[1];
}

void agent_stdio_close(local_task *lt)
{
    stdio_unref(lt->stdio);
    lt->stdio = NULL;
}

bool agent_stdio_hold(local_task *lt, double now)
{
    /* a stop the controller asked for (cancel, preemption, idle reaping)
     * is reported at once: its GPUs are wanted elsewhere */
    if (!lt->stdio || lt->stop_requested ||
        __atomic_load_n(&lt->stdio->drained, __ATOMIC_ACQUIRE))
        return false;
    if (lt->stdio_exit_s == 0)
        lt->stdio_exit_s = now;
    return now - lt->stdio_exit_s < TS_AGENT_STDIO_DRAIN_S;
}

/* ---- one session ------------------------------------------------------------------ */

enum { K_ATTACH, K_EXEC, K_FORWARD };

typedef struct sess {
    char url[TS_CTL_URL_MAX], token[256], ca[512], id[64], secret[128];
    int kind;
    bool tty;
    int rows, cols, port;
    char **argv;                /* exec: NULL-terminated */
    char error[512];            /* "" or why it cannot run: sent as an error frame */
    pid_t task_pid;             /* the task's process (a container's: its runtime) */
    unsigned long long task_start; /* its start ticks: the pid is this process still */
    bool task_container;
    ts_cg_dirs cg;              /* the task's cgroup (n == 0: none) */
    struct agent_stdio *stdio;  /* attach: a reference */
} sess;

static void sess_free(sess *s)
{
    if (s->argv)
        for (char **p = s->argv; *p; p++)
            free(*p);
    free(s->argv);
    if (s->stdio) {
        __atomic_store_n(&s->stdio->attached, 0, __ATOMIC_RELEASE);
        stdio_unref(s->stdio);
    }
    free(s);
}

/* Writes all of p to a non-blocking local descriptor within the bound. */
static int local_write(int fd, const uint8_t *p, size_t n)
{
    double until = agent_mono_s() + SESSION_WRITE_TIMEOUT_S;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
        } else if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct pollfd pf = {fd, POLLOUT, 0};
            if (agent_mono_s() > until || poll(&pf, 1, 250) < 0)
                return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

typedef struct relay_end {
    int fd;          /* the local side: PTY master, socket */
    bool tty;
    bool socket;     /* half-close with shutdown */
    pid_t pgrp;      /* signals go to it; 0: none */
    unsigned long long pgrp_start; /* its leader's start ticks (0: our own child) */
    bool wait_remote;/* after the local end, relay until the client's too (forward) */
    pid_t child;     /* exec: the command; its end ends the relay (a background
                      * process may keep its terminal open); 0: none */
    bool child_done;
    int child_status;
    bool local_eof;  /* the local side ended */
    bool remote_eof; /* the client sent EOF */
    bool stream_gone;
} relay_end;

#define CHILD_POLL_MS 100 /* how often an exec's relay looks for its command's end */

/* Whether a signal to -pgrp still reaches the task's group: a pid that leads
 * a group stays taken while any member lives, so either its leader is the
 * task's process or no process has that pid; another process with it means
 * the group is gone and the number reused (its group may be root's). */
static bool group_is_ours(const relay_end *e)
{
    unsigned long long t;
    char state;
    return e->pgrp_start == 0 || agent_rec_proc_stat(e->pgrp, &t, &state) != 0 ||
           t == e->pgrp_start;
}

/* Applies one frame from the client; -1 to end. */
static int frame_in(relay_end *e, int type, const uint8_t *p, size_t n)
{
    switch (type) {
    case TS_FRAME_DATA:
        return e->remote_eof ? 0 : local_write(e->fd, p, n);
    case TS_FRAME_EOF:
        if (!e->remote_eof) {
            e->remote_eof = true;
            if (e->socket)
                shutdown(e->fd, SHUT_WR);
            else if (e->tty) /* the terminal's end-of-file character */
                (void)local_write(e->fd, (const uint8_t *)"\x04", 1);
        }
        return 0;
    case TS_FRAME_RESIZE:
        if (e->tty && n == 4) {
            struct winsize ws = {.ws_row = (unsigned short)(p[0] << 8 | p[1]),
                                 .ws_col = (unsigned short)(p[2] << 8 | p[3])};
            ioctl(e->fd, TIOCSWINSZ, &ws); /* the foreground group gets SIGWINCH */
        }
        return 0;
    case TS_FRAME_SIGNAL:
        if (n == 1 && e->pgrp > 0 && p[0] > 0 && p[0] < 65 && group_is_ours(e))
            kill(-e->pgrp, p[0]);
        return 0;
    default:
        return 0; /* unknown frames are ignored (newer clients) */
    }
}

/* Relays between the stream and the local end until the local end is done
 * (and, for a socket, both directions are), or the client is gone. */
static void relay(ts_stream *st, relay_end *e)
{
    ts_frame_reader *fr = calloc(1, sizeof *fr);
    uint8_t *buf = malloc(TS_FRAME_PAYLOAD_MAX);
    if (!fr || !buf) {
        free(fr);
        free(buf);
        return;
    }
    fcntl(e->fd, F_SETFL, fcntl(e->fd, F_GETFL) | O_NONBLOCK);
    while (!e->stream_gone) {
        if (e->local_eof && (!e->wait_remote || e->remote_eof))
            break;
        if (e->child && !e->child_done &&
            waitpid(e->child, &e->child_status, WNOHANG) == e->child) {
            /* the command ended: what it wrote is read to the end (a PTY
             * another process still holds has none: EAGAIN), then the end */
            e->child_done = true;
            ssize_t k;
            while (!e->local_eof && (k = read(e->fd, buf, TS_FRAME_PAYLOAD_MAX)) > 0)
                if (ts_stream_frame(st, TS_FRAME_DATA, buf, (size_t)k, SESSION_WRITE_TIMEOUT_S))
                    e->stream_gone = true;
            if (!e->local_eof && !e->stream_gone &&
                ts_stream_frame(st, TS_FRAME_EOF, NULL, 0, SESSION_WRITE_TIMEOUT_S) != 0)
                e->stream_gone = true;
            e->local_eof = true;
            continue;
        }
        /* an ended side is left out: a hung-up descriptor would wake poll at once */
        struct pollfd p[2] = {{ts_stream_fd(st), POLLIN, 0}, {e->local_eof ? -1 : e->fd, POLLIN, 0}};
        bool more = ts_stream_pending(st); /* then the local side is still looked at */
        int r = poll(p, 2, more ? 0 : e->child ? CHILD_POLL_MS : 1000);
        if (r < 0 && errno != EINTR)
            break;
        if (more || p[0].revents) {
            ssize_t k = ts_stream_read(st, buf, TS_FRAME_PAYLOAD_MAX);
            if (k == 0 || k == -2) {
                e->stream_gone = true;
                break;
            }
            size_t off = 0;
            while (k > 0 && off < (size_t)k) {
                size_t used;
                int type;
                const uint8_t *pl;
                size_t pn;
                int got = ts_frame_feed(fr, buf + off, (size_t)k - off, &used, &type, &pl, &pn);
                off += used;
                if (got < 0) {
                    e->stream_gone = true;
                    break;
                }
                if (got == 0)
                    break;
                if (frame_in(e, type, pl, pn) != 0)
                    e->stream_gone = true;
                ts_frame_next(fr);
            }
        }
        if (!e->local_eof && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t k = read(e->fd, buf, TS_FRAME_PAYLOAD_MAX);
            if (k > 0) {
                if (ts_stream_frame(st, TS_FRAME_DATA, buf, (size_t)k, SESSION_WRITE_TIMEOUT_S) != 0)
                    e->stream_gone = true;
            } else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
                /* the end (a PTY whose last user closed it reads EIO) */
                e->local_eof = true;
                if (ts_stream_frame(st, TS_FRAME_EOF, NULL, 0, SESSION_WRITE_TIMEOUT_S) != 0)
                    e->stream_gone = true;
            }
        }
    }
    free(fr);
    free(buf);
}

/* ---- exec -------------------------------------------------------------------------- */

/* the order of agent_sess_namespaces's: pid last, joining it moves only the
 * children made after (exec_child) */
static const int NS_FLAGS[NS_N] = {CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWNET, CLONE_NEWNS,
                                   CLONE_NEWPID};

/* The process a session joins, or -1 with an error frame sent on st. */
static pid_t session_target(const sess *s, ts_stream *st)
{
    pid_t p = agent_sess_target(s->task_pid, s->task_container);
    if (p < 0) {
        const char *m = "the container is still starting (its runtime has not started the "
                        "task's command): try again";
        ts_stream_frame(st, TS_FRAME_ERROR, m, strlen(m), SESSION_WRITE_TIMEOUT_S);
    }
    return p;
}

static void session_gone(ts_stream *st)
{
    const char *m = "the task ended: nothing to run a command in";
    ts_stream_frame(st, TS_FRAME_ERROR, m, strlen(m), SESSION_WRITE_TIMEOUT_S);
}

/* What an exec takes of its task, read from /proc/<pid>. */
typedef struct exec_from {
    char **envp;
    char *blob;
    uid_t uid;
    gid_t gid, groups[AGENT_SESS_GROUPS_MAX];
    int ng;
    char cwd[1024];
    int ns[NS_N];
} exec_from;

/* In the child, joining a container: its confinement as its config.json
 * gives it (image_bundle.c): no new privileges, and of the capabilities
 * only the container's set, bounding set included. Without it a session
 * as root would hold every capability the agent has, and one as a user
 * could regain them through a setuid file the container's root made.
 * Async-signal-safe. */
static int confine_as_container(uint64_t keep)
{
    for (int c = 0; c < 64; c++) /* past the kernel's last capability: EINVAL */
        if (!(keep >> c & 1) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL)
            return -1;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        return -1;
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2] = {{0}, {0}};
    if (syscall(SYS_capget, &h, d) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        uint32_t k = (uint32_t)(keep >> (32 * i));
        d[i].effective &= k;
        d[i].permitted &= k;
        d[i].inheritable = 0;
    }
    if (syscall(SYS_capset, &h, d) != 0)
        return -1;
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

/* In the child: joins, drops privileges, execs. Only async-signal-safe
 * calls and writes to its own memory. */
_Noreturn static void exec_child(const sess *s, int stdio, const exec_from *x)
{
    const int *ns = x->ns;
    uid_t uid = x->uid;
    const char *cwd = x->cwd;
    char **envp = x->envp;
    bool tty = s->tty;
    setsid();
    if (dup2(stdio, 0) < 0 || dup2(stdio, 1) < 0 || dup2(stdio, 2) < 0)
        _exit(126);
    if (tty)
        ioctl(0, TIOCSCTTY, 0);
    for (int i = 0; i < s->cg.n; i++) /* accounted and limited with the task */
        if (agent_cg_write(s->cg.dir[i], "cgroup.procs", "0") != 0)
            _exit(126);
    for (int i = 0; i < NS_N; i++)
        if (ns[i] >= 0 && setns(ns[i], NS_FLAGS[i]) != 0)
            _exit(126);
    /* confined before the pid namespace's child is made: its waiter too */
    if (s->task_container && confine_as_container(agent_container_cap_mask()) != 0)
        _exit(126);
    if (ns[NS_PID] >= 0) {
        /* a container's own pid namespace: only a child is born in it. This
         * process waits for it and ends as it did; it stays in the session's
         * process group, so a signal to the group reaches the command too. */
        pid_t c = fork();
        if (c < 0)
            _exit(126);
        if (c > 0) {
            int st;
            while (waitpid(c, &st, 0) < 0)
                if (errno != EINTR)
                    _exit(126);
            if (WIFSIGNALED(st)) {
                signal(WTERMSIG(st), SIG_DFL);
                kill(getpid(), WTERMSIG(st));
            }
            _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        }
    }
    if (getuid() == 0 && uid != 0) {
        if (setgroups((size_t)x->ng, x->groups) != 0 || setgid(x->gid) != 0 || setuid(uid) != 0)
            _exit(126);
    }
    if (!cwd[0] || chdir(cwd) != 0)
        if (chdir("/") != 0)
            _exit(126);
    agent_exec_reset();
    const char *path = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
    for (char **e = envp; e && *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            path = *e + 5;
    agent_exec_search(s->argv[0], path, s->argv, envp);
    _exit(127);
}

/* Reads what an exec takes of process tp; false: it ended. */
static bool exec_read(pid_t tp, exec_from *x)
{
    x->envp = agent_sess_environ(tp, &x->blob);
    char lnk[64];
    snprintf(lnk, sizeof lnk, "/proc/%d/cwd", (int)tp);
    ssize_t cl = readlink(lnk, x->cwd, sizeof x->cwd - 1);
    x->cwd[cl > 0 ? cl : 0] = '\0';
    /* a container's cwd reads, from here, under its root: made relative to
     * that root, where the command finds it once in the mount namespace */
    char root[1024];
    snprintf(lnk, sizeof lnk, "/proc/%d/root", (int)tp);
    ssize_t rl = readlink(lnk, root, sizeof root - 1);
    root[rl > 0 ? rl : 0] = '\0';
    size_t rn = strlen(root);
    char *cwd = x->cwd;
    if (rn > 1 && strncmp(cwd, root, rn) == 0 && (cwd[rn] == '/' || cwd[rn] == '\0'))
        memmove(cwd, cwd[rn] ? cwd + rn : "/", strlen(cwd[rn] ? cwd + rn : "/") + 1);
    if (!x->envp || !agent_sess_ids(tp, &x->uid, &x->gid, x->groups, &x->ng))
        return false;
    agent_sess_namespaces(tp, x->ns);
    return true;
}

static void exec_from_free(exec_from *x)
{
    for (int i = 0; i < NS_N; i++)
        if (x->ns[i] >= 0)
            close(x->ns[i]);
    free(x->envp);
    free(x->blob);
}

static void run_exec(sess *s, ts_stream *st)
{
    pid_t tp = session_target(s, st);
    if (tp < 0)
        return;
    unsigned long long tstart = 0;
    exec_from x = {.ns = {-1, -1, -1, -1, -1}};
    if (!agent_sess_pin(s->task_pid, s->task_start, tp, &tstart) || !exec_read(tp, &x) || !agent_rec_alive(tp, tstart)) {
        exec_from_free(&x);
        session_gone(st);
        return;
    }
    int fds[2] = {-1, -1};
    int ok;
    if (s->tty) {
        struct winsize ws = {.ws_row = (unsigned short)(s->rows > 0 ? s->rows : 24),
                             .ws_col = (unsigned short)(s->cols > 0 ? s->cols : 80)};
        ok = openpty(&fds[0], &fds[1], NULL, NULL, &ws) == 0;
        if (ok) {
            fcntl(fds[0], F_SETFD, FD_CLOEXEC);
            fcntl(fds[1], F_SETFD, FD_CLOEXEC);
        }
    } else {
        ok = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0;
    }
    pid_t pid = ok ? fork() : -1;
    if (pid == 0)
        exec_child(s, fds[1], &x);
    if (fds[1] >= 0)
        close(fds[1]);
    exec_from_free(&x);
    if (pid < 0) {
        char m[128];
        snprintf(m, sizeof m, "cannot start the command: %s", strerror(errno));
        ts_stream_frame(st, TS_FRAME_ERROR, m, strlen(m), SESSION_WRITE_TIMEOUT_S);
        if (fds[0] >= 0)
            close(fds[0]);
        return;
    }
    relay_end e = {.fd = fds[0], .tty = s->tty, .socket = !s->tty, .pgrp = pid, .child = pid};
    relay(st, &e);
    int status = e.child_status;
    if (e.child_done) {
        char cs[16];
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        snprintf(cs, sizeof cs, "%d", code);
        ts_stream_frame(st, TS_FRAME_EXIT, cs, strlen(cs), SESSION_WRITE_TIMEOUT_S);
    } else if (e.stream_gone) { /* the client left: its command goes, as a closed terminal's */
        kill(-pid, SIGHUP);
        kill(-pid, SIGCONT);
        double until = agent_mono_s() + SESSION_KILL_WAIT_S;
        while (waitpid(pid, &status, WNOHANG) == 0) {
            if (agent_mono_s() > until) {
                kill(-pid, SIGKILL);
                waitpid(pid, &status, 0);
                break;
            }
            struct timespec ts = {0, 20000000};
            nanosleep(&ts, NULL);
        }
    } else {
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        char cs[16];
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        snprintf(cs, sizeof cs, "%d", code);
        ts_stream_frame(st, TS_FRAME_EXIT, cs, strlen(cs), SESSION_WRITE_TIMEOUT_S);
    }
    close(fds[0]);
}

/* ---- forward ---------------------------------------------------------------------- */

static void run_forward(sess *s, ts_stream *st)
{
    pid_t tp = session_target(s, st);
    if (tp < 0)
        return;
    char m[256];
    int ns[NS_N];
    unsigned long long tstart = 0;
    bool ours = agent_sess_pin(s->task_pid, s->task_start, tp, &tstart);
    if (ours)
        agent_sess_namespaces(tp, ns);
    if (!ours || !agent_rec_alive(tp, tstart)) {
        for (int i = 0; ours && i < NS_N; i++)
            if (ns[i] >= 0)
                close(ns[i]);
        session_gone(st);
        return;
    }
    int bad = 0;
    for (int i = 0; i < NS_N; i++) {
        if (i == 2 && ns[i] >= 0 && setns(ns[i], CLONE_NEWNET) != 0)
            bad = errno;
        if (ns[i] >= 0)
            close(ns[i]);
    }
    int fd = bad ? -1 : socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        snprintf(m, sizeof m, "127.0.0.1:%d in the task's network: %s", s->port,
                 strerror(bad ? bad : errno));
        ts_stream_frame(st, TS_FRAME_ERROR, m, strlen(m), SESSION_WRITE_TIMEOUT_S);
        if (fd >= 0)
            close(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    relay_end e = {.fd = fd, .socket = true, .wait_remote = true};
    relay(st, &e);
    close(fd);
}

/* ---- the thread --------------------------------------------------------------------- */

static void *sess_main(void *arg)
{
    sess *s = arg;
    char path[128];
    snprintf(path, sizeof path, "/v1/agent/stream/%s", s->id);
    ts_stream_target tg = {.url = s->url, .token = s->token, .ca_file = s->ca,
                           .secret = s->secret};
    ts_stream *st = NULL;
    int status;
    ts_err err;
    if (ts_stream_open(&tg, path, "{}", SESSION_OPEN_TIMEOUT_S, &st, &status, &err) != 0) {
        fprintf(stderr, "tessera-agent: session %s: %s\n", s->id, err.msg);
        sess_free(s);
        return NULL;
    }
    if (s->error[0]) {
        ts_stream_frame(st, TS_FRAME_ERROR, s->error, strlen(s->error), SESSION_WRITE_TIMEOUT_S);
    } else if (s->kind == K_ATTACH) {
        relay_end e = {.fd = s->stdio->fd, .tty = s->stdio->tty, .socket = !s->stdio->tty,
                       .pgrp = s->task_pid, .pgrp_start = s->task_start};
        relay(st, &e);
        if (e.local_eof) /* all its output went: its end may be reported */
            __atomic_store_n(&s->stdio->drained, 1, __ATOMIC_RELEASE);
    } else if (s->kind == K_EXEC) {
        run_exec(s, st);
    } else {
        run_forward(s, st);
    }
    ts_stream_close(st);
    sess_free(s);
    return NULL;
}

static bool seen(ts_agent *a, const char *id)
{
    for (size_t i = 0; i < sizeof a->sess_seen / sizeof a->sess_seen[0]; i++)
        if (strcmp(a->sess_seen[i], id) == 0)
            return true;
    snprintf(a->sess_seen[a->sess_next], sizeof a->sess_seen[0], "%s", id);
    a->sess_next = (a->sess_next + 1) % (int)(sizeof a->sess_seen / sizeof a->sess_seen[0]);
    return false;
}

/* What the session needs of its task, taken on the agent's thread. */
static void sess_prepare(ts_agent *a, sess *s, const ts_desired_session *q)
{
    int64_t job = q->job;
    int rank = q->rank;
    local_task *lt = agent_find(a, job, rank, -1); /* the rank's own task */
    if (!lt || !lt->t || (lt->st.phase == TS_TASK_EXITED && s->kind != K_ATTACH)) {
        snprintf(s->error, sizeof s->error, "rank %d of job %lld does not run on this node",
                 rank, (long long)job);
        return;
    }
    const ts_task_info *in = agent_task_info_get(lt->t);
    s->task_pid = in->pid;
    s->task_start = in->start_ticks;
    s->task_container = lt->image_ready;
    if (in->isolated && agent_cg_dirs_of(in->cgroup_path, in->cgroup_v1, &s->cg) != 0)
        s->cg.n = 0;
    if (s->kind == K_ATTACH) {
        if (!lt->stdio) {
            snprintf(s->error, sizeof s->error, "rank %d of job %lld has no terminal or stream "
                     "to attach to (not an interactive job's rank 0)", rank, (long long)job);
        } else if (__atomic_exchange_n(&lt->stdio->attached, 1, __ATOMIC_ACQ_REL)) {
            snprintf(s->error, sizeof s->error, "rank %d of job %lld: another session is "
                     "attached (one at a time)", rank, (long long)job);
        } else {
            __atomic_add_fetch(&lt->stdio->refs, 1, __ATOMIC_ACQ_REL);
            s->stdio = lt->stdio;
        }
    }
}

void agent_sessions(ts_agent *a, const ts_desired *d)
{
    for (int i = 0; i < d->nsessions; i++) {
        const ts_desired_session *q = &d->sessions[i];
        const char *id = q->id, *secret = q->secret;
        if (!id || !secret || strlen(id) >= 64 || strlen(secret) >= 128)
            continue;
        /* its rank is here but not started yet (its image or data still
         * coming, its container being made): offered again at the next
         * sync, within the controller's wait, not refused */
        const local_task *lt = agent_find(a, q->job, q->rank, -1);
        if (lt && !lt->t && !lt->start_error[0])
            continue;
        if (seen(a, id))
            continue;
        sess *s = calloc(1, sizeof *s);
        if (!s)
            continue;
        snprintf(s->url, sizeof s->url, "%s", agent_ctls_url(&a->cfg.ctls));
        snprintf(s->token, sizeof s->token, "%s", a->cfg.token);
        snprintf(s->ca, sizeof s->ca, "%s", a->cfg.ca_file);
        snprintf(s->id, sizeof s->id, "%s", id);
        snprintf(s->secret, sizeof s->secret, "%s", secret);
        s->kind = q->kind == TS_SESSION_ATTACH ? K_ATTACH
                  : q->kind == TS_SESSION_EXEC ? K_EXEC
                                               : K_FORWARD;
        s->tty = q->tty;
        s->rows = q->rows;
        s->cols = q->cols;
        s->port = q->port;
        if (s->kind == K_EXEC) {
            int n = q->command.n;
            s->argv = calloc((size_t)n + 1, sizeof *s->argv);
            for (int k = 0; s->argv && k < n && k < SESSION_ARGS_MAX; k++)
                s->argv[k] = strdup(q->command.v[k]);
            if (!s->argv || n == 0 || !s->argv[0] || !s->argv[0][0])
                snprintf(s->error, sizeof s->error, "exec: no command");
        }
        if (!s->error[0])
            sess_prepare(a, s, q);
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, sess_main, s) != 0)
            sess_free(s);
        pthread_attr_destroy(&at);
    }
}
