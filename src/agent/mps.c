/*
 * mps.c - start, drive and stop nvidia-cuda-mps-control daemons (see mps.h).
 *
 * Facts from gpu-facts.md section 4 (NVIDIA "Multi-Process Service" docs,
 * nvidia-cuda-mps-control(1)): `-d` starts the control daemon in the
 * background and it writes nvidia-cuda-mps-control.pid in its pipe
 * directory; the same binary without -d is the client and reads commands
 * from stdin, one per line; `quit` ends the daemon; CUDA_MPS_PIPE_DIRECTORY
 * must match between daemon, servers and clients; CUDA_MPS_LOG_DIRECTORY gets
 * control.log and server.log. Every wait here is bounded by the daemon's
 * wait_ms: on the client and the launcher, our children, by
 * agent_child_reap; on the daemon in POLL_STEP_MS steps, since it is not our
 * child after it daemonises, so there is nothing to block on.
 */
#include "agent/mps.h"
#include "agent/child.h"
#include "agent/taskfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define POLL_STEP_MS 10
#define NS_PER_MS 1000000L
#define MS_PER_S 1000L
#define MIB_PER_GIB 1024u
#define SOCKET_NAME_ROOM 16 /* the daemon's socket names inside the pipe directory */
#define ENV_VAR_MAX (TS_MPS_PATH_MAX + 32)
#define PROC_LINE_MAX 512
#define COMMAND_MAX 128

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / MS_PER_S, (ms % MS_PER_S) * NS_PER_MS};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* GPU-/MIG- UUIDs: letters, digits and '-'; they become a directory name. */
static bool uuid_ok(const char *u)
{
    size_t n = u ? strlen(u) : 0;
    if (n == 0 || n >= TS_MPS_UUID_MAX || u[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((u[i] >= 'a' && u[i] <= 'z') || (u[i] >= 'A' && u[i] <= 'Z') ||
              (u[i] >= '0' && u[i] <= '9') || u[i] == '-'))
            return false;
    return true;
}

static int mkdir_p(const char *path, ts_err *err)
{
    char buf[TS_MPS_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        bool end = *p == '\0';
        if (*p == '/' || end) {
            *p = '\0';
            /* 0755: tasks of other users must reach the daemon's sockets */
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return ts_err_set(err, TS_EIO, "MPS: mkdir %s: %s", buf, strerror(errno));
            if (end)
                break;
            *p = '/';
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return ts_err_set(err, TS_EIO, "MPS: %s: not a directory", path);
    return 0;
}

static int resolve_binary(const char *name, char *out, size_t len, ts_err *err)
{
    if (strchr(name, '/')) {
        snprintf(out, len, "%s", name);
        if (access(name, X_OK) != 0)
            return ts_err_set(err, errno == ENOENT ? TS_ENOENT : TS_EIO, "MPS: %s: %s", name,
                              strerror(errno));
        return 0;
    }
    const char *path = getenv("PATH");
    for (const char *p = path; p && *p;) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > 0 && snprintf(out, len, "%.*s/%s", (int)n, p, name) < (int)len &&
            access(out, X_OK) == 0)
            return 0;
        p = end ? end + 1 : NULL;
    }
    return ts_err_set(err, TS_ENOENT,
                      "MPS: %s: not found on PATH (%s); install the CUDA MPS tools or give "
                      "the binary's path",
                      name, path ? path : "unset");
}

/* ---- processes -------------------------------------------------------------------- */

/* environ without the three variables MPS reads, plus ours for this device.
 * vars holds our strings; free() the returned array only. */
static char **build_env(const ts_mps_daemon *d, char vars[3][ENV_VAR_MAX])
{
    static const char *const names[3] = {"CUDA_VISIBLE_DEVICES=", "CUDA_MPS_PIPE_DIRECTORY=",
                                         "CUDA_MPS_LOG_DIRECTORY="};
    snprintf(vars[0], ENV_VAR_MAX, "%s%s", names[0], d->uuid);
    snprintf(vars[1], ENV_VAR_MAX, "%s%s", names[1], d->pipe_dir);
    snprintf(vars[2], ENV_VAR_MAX, "%s%s", names[2], d->log_dir);
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = malloc((n + 4) * sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool ours = false;
        for (int v = 0; v < 3; v++)
            ours |= strncmp(environ[i], names[v], strlen(names[v])) == 0;
        if (!ours)
            env[k++] = environ[i];
    }
    for (int v = 0; v < 3; v++)
        env[k++] = vars[v];
    env[k] = NULL;
    return env;
}

static void cloexec(int fd)
{
    fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* Spawns binary (with -d when daemon) in its own process group, default
 * signals and an empty mask (the agent ignores SIGPIPE, a child must not
 * inherit that); stdin from in_fd, stdout and stderr to out_fd. */
static int spawn(const ts_mps_daemon *d, bool daemon, int in_fd, int out_fd, pid_t *pid)
{
    char vars[3][ENV_VAR_MAX];
    char **env = build_env(d, vars);
    if (!env)
        return ENOMEM;
    char bin[TS_MPS_PATH_MAX], flag[] = "-d";
    snprintf(bin, sizeof bin, "%s", d->binary);
    char *argv[] = {bin, daemon ? flag : NULL, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_adddup2(&fa, in_fd, STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out_fd, STDERR_FILENO);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETPGROUP);
    int rc = posix_spawn(pid, bin, &fa, &at, argv, env);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    return rc;
}

static void describe_status(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(buf, len, "wait status %d", status);
}

static void first_line(char *s)
{
    s[strcspn(s, "\n")] = '\0';
}

/* Runs the client with `input` on stdin (written before it starts: at most
 * PIPE_BUF bytes, so the pipe holds it all), output into out. */
static int run_client(const ts_mps_daemon *d, const char *input, char *out, size_t len,
                      int *status, ts_err *err)
{
    size_t n = strlen(input);
    if (n >= PIPE_BUF)
        return ts_err_set(err, TS_EINVAL, "MPS %s: command of %zu bytes is too long", d->uuid,
                          n);
    int in[2], op[2];
    if (pipe(in) != 0)
        return ts_err_set(err, TS_EIO, "MPS %s: pipe: %s", d->uuid, strerror(errno));
    if (pipe(op) != 0) {
        close(in[0]);
        close(in[1]);
        return ts_err_set(err, TS_EIO, "MPS %s: pipe: %s", d->uuid, strerror(errno));
    }
    cloexec(in[0]);
    cloexec(in[1]);
    cloexec(op[0]);
    cloexec(op[1]);
    ssize_t w = write(in[1], input, n);
    close(in[1]);
    pid_t pid;
    int sp = w == (ssize_t)n ? spawn(d, false, in[0], op[1], &pid) : EIO;
    close(in[0]);
    close(op[1]);
    if (sp != 0) {
        close(op[0]);
        return ts_err_set(err, TS_EIO, "MPS %s: cannot run %s: %s", d->uuid, d->binary,
                          strerror(sp));
    }
    int64_t deadline = agent_mono_ms() + d->wait_ms;
    /* its output until it closes it or the deadline: the wait below decides */
    (void)agent_child_talk(-1, op[0], NULL, out, len, deadline);
    int wr = agent_child_reap(pid, deadline, status);
    if (wr == ETIMEDOUT)
        return ts_err_set(err, TS_EIO, "MPS %s: %s (client) gave no answer within %d ms",
                          d->uuid, d->binary, d->wait_ms);
    if (wr != 0)
        return ts_err_set(err, TS_EIO, "MPS %s: waitpid: %s", d->uuid, strerror(wr));
    return 0;
}

/* ---- the daemon ------------------------------------------------------------------- */

static long read_pid_file(const ts_mps_daemon *d)
{
    char path[TS_MPS_PATH_MAX + sizeof TS_MPS_PID_FILE + 1];
    snprintf(path, sizeof path, "%s/%s", d->pipe_dir, TS_MPS_PID_FILE);
    /* where MPS clients (tasks) connect: nothing there may block the agent */
    ts_err e;
    int fd = agent_taskfile_open(path, O_RDONLY, AGENT_TASKFILE_ANY_OWNER, &e);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    long pid = 0;
    if (fscanf(f, "%ld", &pid) != 1)
        pid = 0;
    fclose(f);
    return pid > 0 ? pid : 0;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Alive, not a zombie, and (where /proc says) still our binary. */
static bool pid_alive(long pid, const char *binary)
{
    if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno != EPERM))
        return false;
    char path[64], buf[PROC_LINE_MAX];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *p = strrchr(buf, ')'); /* the state follows "(comm) " */
        if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
            return false;
    }
    snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
    f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0'; /* argv[0] ends at the first NUL */
        if (n > 0 && strcmp(base_name(buf), base_name(binary)) != 0)
            return false; /* the pid was recycled */
    }
    return true;
}

bool agent_mps_running(const ts_mps_daemon *d)
{
    return pid_alive(d->pid, d->binary);
}

static int launch_daemon(ts_mps_daemon *d, ts_err *err)
{
    char out_path[TS_MPS_PATH_MAX + sizeof TS_MPS_START_OUTPUT + 1];
    snprintf(out_path, sizeof out_path, "%s/%s", d->log_dir, TS_MPS_START_OUTPUT);
    int out_fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd < 0)
        return ts_err_set(err, TS_EIO, "MPS %s: %s: %s", d->uuid, out_path, strerror(errno));
    int in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t pid;
    int sp = in_fd < 0 ? errno : spawn(d, true, in_fd, out_fd, &pid);
    if (in_fd >= 0)
        close(in_fd);
    close(out_fd);
    if (sp != 0)
        return ts_err_set(err, TS_EIO, "MPS %s: cannot run %s -d: %s", d->uuid, d->binary,
                          strerror(sp));
    long deadline = agent_mono_ms() + d->wait_ms;
    int status = 0;
    int wr = agent_child_reap(pid, deadline, &status);
    if (wr != 0)
        return ts_err_set(err, TS_EIO, "MPS %s: %s -d did not return within %d ms%s%s",
                          d->uuid, d->binary, d->wait_ms, wr == ETIMEDOUT ? "" : ": ",
                          wr == ETIMEDOUT ? "" : strerror(wr));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char how[64], line[PROC_LINE_MAX] = "";
        describe_status(status, how, sizeof how);
        FILE *f = fopen(out_path, "r");
        if (f) {
            size_t n = fread(line, 1, sizeof line - 1, f);
            line[n] = '\0';
            fclose(f);
        }
        first_line(line);
        return ts_err_set(err, TS_EIO, "MPS %s: %s -d failed (%s)%s%s", d->uuid, d->binary,
                          how, line[0] ? ": " : "", line);
    }
    /* the launcher returned; the daemon announces itself with its pid file */
    deadline = agent_mono_ms() + d->wait_ms;
    while ((d->pid = read_pid_file(d)) == 0 || !pid_alive(d->pid, d->binary)) {
        if (agent_mono_ms() >= deadline) {
            d->pid = 0;
            return ts_err_set(err, TS_EIO,
                              "MPS %s: %s -d exited 0 but no live daemon wrote %s/%s within "
                              "%d ms (see %s/control.log)",
                              d->uuid, d->binary, d->pipe_dir, TS_MPS_PID_FILE, d->wait_ms,
                              d->log_dir);
        }
        sleep_ms(POLL_STEP_MS);
    }
    return 0;
}

int agent_mps_send(const ts_mps_daemon *d, const char *command, char *reply, size_t len,
                ts_err *err)
{
    char scratch[TS_MPS_REPLY_MAX];
    if (!reply || len == 0) {
        reply = scratch;
        len = sizeof scratch;
    }
    reply[0] = '\0';
    if (!command || !*command || strchr(command, '\n'))
        return ts_err_set(err, TS_EINVAL, "MPS %s: command: must be one non-empty line",
                          d->uuid);
    char input[PIPE_BUF];
    if ((size_t)snprintf(input, sizeof input, "%s\n", command) >= sizeof input)
        return ts_err_set(err, TS_EINVAL, "MPS %s: command: too long", d->uuid);
    int status = 0;
    int rc = run_client(d, input, reply, len, &status, err);
    if (rc)
        return rc;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char how[64], line[TS_MPS_REPLY_MAX];
        describe_status(status, how, sizeof how);
        snprintf(line, sizeof line, "%s", reply);
        first_line(line);
        return ts_err_set(err, TS_EIO, "MPS %s: %s \"%s\": %s%s%s", d->uuid, d->binary,
                          command, how, line[0] ? ": " : "", line);
    }
    return 0;
}

/* gpu-facts.md 4.2: value = integer + "G" or "M". */
static void mem_limit_value(uint64_t mib, char *buf, size_t len)
{
    if (mib % MIB_PER_GIB == 0)
        snprintf(buf, len, "%lluG", (unsigned long long)(mib / MIB_PER_GIB));
    else
        snprintf(buf, len, "%lluM", (unsigned long long)mib);
}

static int apply_defaults(const ts_mps_config *cfg, const ts_mps_daemon *d, ts_err *err)
{
    char cmd[COMMAND_MAX];
    if (cfg->thread_pct > 0) {
        snprintf(cmd, sizeof cmd, "set_default_active_thread_percentage %d", cfg->thread_pct);
        int rc = agent_mps_send(d, cmd, NULL, 0, err);
        if (rc)
            return rc;
    }
    if (cfg->pinned_mem_mib > 0) {
        char value[32];
        mem_limit_value(cfg->pinned_mem_mib, value, sizeof value);
        /* device 0: the daemon sees only the device its CUDA_VISIBLE_DEVICES names */
        snprintf(cmd, sizeof cmd, "set_default_device_pinned_mem_limit 0 %s", value);
        return agent_mps_send(d, cmd, NULL, 0, err);
    }
    return 0;
}

int agent_mps_start(const ts_mps_config *cfg, const char *uuid, ts_mps_daemon *out, ts_err *err)
{
    memset(out, 0, sizeof *out);
    if (!cfg || !cfg->base_dir || !*cfg->base_dir)
        return ts_err_set(err, TS_EINVAL, "MPS: base_dir: required");
    if (!uuid_ok(uuid))
        return ts_err_set(err, TS_EINVAL,
                          "MPS: uuid \"%s\": must be a GPU-/MIG- UUID (letters, digits, '-')",
                          uuid ? uuid : "(null)");
    if (cfg->thread_pct < 0 || cfg->thread_pct > 100)
        return ts_err_set(err, TS_EINVAL, "MPS %s: thread_pct: must be 1..100 (0: unset), not %d",
                          uuid, cfg->thread_pct);
    if (cfg->wait_ms < 0)
        return ts_err_set(err, TS_EINVAL, "MPS %s: wait_ms: must not be negative", uuid);
    snprintf(out->uuid, sizeof out->uuid, "%s", uuid);
    out->wait_ms = cfg->wait_ms ? cfg->wait_ms : TS_MPS_WAIT_DEFAULT_MS;
    int rc = resolve_binary(cfg->binary ? cfg->binary : TS_MPS_CONTROL_BINARY, out->binary,
                            sizeof out->binary, err);
    if (rc)
        return rc;
    size_t sun_len = sizeof(((struct sockaddr_un *)0)->sun_path);
    int a = snprintf(out->pipe_dir, sizeof out->pipe_dir, "%s/%s/pipe", cfg->base_dir, uuid);
    int b = snprintf(out->log_dir, sizeof out->log_dir, "%s/%s/log", cfg->base_dir, uuid);
    if (a < 0 || b < 0 || (size_t)a >= sizeof out->pipe_dir || (size_t)b >= sizeof out->log_dir ||
        (size_t)a + SOCKET_NAME_ROOM > sun_len)
        return ts_err_set(err, TS_EINVAL,
                          "MPS %s: base_dir \"%s\": too long (the pipe directory holds UNIX "
                          "sockets, whose paths must stay under %zu bytes)",
                          uuid, cfg->base_dir, sun_len);
    if ((rc = mkdir_p(out->pipe_dir, err)) != 0 || (rc = mkdir_p(out->log_dir, err)) != 0)
        return rc;

    long pid = read_pid_file(out);
    if (pid_alive(pid, out->binary)) {
        out->pid = pid;
        out->adopted = true;
    } else {
        if (pid) { /* left by a daemon that died: it would confuse the wait */
            char path[TS_MPS_PATH_MAX + sizeof TS_MPS_PID_FILE + 1];
            snprintf(path, sizeof path, "%s/%s", out->pipe_dir, TS_MPS_PID_FILE);
            unlink(path);
        }
        if ((rc = launch_daemon(out, err)) != 0)
            return rc;
    }
    rc = apply_defaults(cfg, out, err);
    if (rc && !out->adopted)
        agent_mps_stop(out, NULL); /* do not leave a daemon with the wrong limits */
    return rc;
}

int agent_mps_stop(ts_mps_daemon *d, ts_err *err)
{
    if (!pid_alive(d->pid, d->binary))
        return 0;
    ts_err send_err = {0};
    int sent = agent_mps_send(d, "quit", NULL, 0, &send_err);
    long deadline = agent_mono_ms() + d->wait_ms;
    while (pid_alive(d->pid, d->binary)) {
        if (agent_mono_ms() >= deadline)
            return ts_err_set(err, TS_EIO, "MPS %s: daemon %ld still running %d ms after quit%s%s",
                              d->uuid, d->pid, d->wait_ms, sent ? "; " : "",
                              sent ? send_err.msg : "");
        sleep_ms(POLL_STEP_MS);
    }
    return 0;
}
