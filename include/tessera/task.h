/*
 * task.h - the task side of the Tessera agent's contract (docs/agent-tasks.md,
 * docs/task-library.md): a training program written in C or C++ learns here
 * that it must checkpoint, acknowledges the checkpoint, reports its step
 * times for straggler detection, and reads how often it was restarted and
 * where its checkpoints live - without writing the file protocol by hand.
 *
 * Header-only, in the single-file style: every file that uses it includes it;
 * exactly one of them defines TESSERA_TASK_IMPLEMENTATION before including it,
 * which compiles the functions (and the one flag the signal handler sets)
 * there. POSIX only (sigaction, open, rename: under a strict -std=c11, define
 * _POSIX_C_SOURCE=200809L); no allocation, nothing prints.
 *
 * Outside Tessera (the TESSERA_* variables unset) every call is harmless:
 * checkpoint_done and report_step do nothing and return 0, restarts is 0 and
 * checkpoint_dir is NULL, so the same program runs on a laptop.
 */
#ifndef TESSERA_TASK_H
#define TESSERA_TASK_H

#include <signal.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The longest path the library accepts in TESSERA_CHECKPOINT_DONE and
 * TESSERA_STEP_FILE (a longer one is an error, ENAMETOOLONG). */
#define TESSERA_TASK_PATH_MAX 4096

/* Installs the checkpoint-signal handler for signo (0 = SIGUSR1, the
 * controller's default; give the job's checkpoint.signal if it sets one).
 * The handler only sets a flag (async-signal-safe). Call it first thing in
 * main, before the long set-up: until it runs, the signal's default action
 * (for SIGUSR1: terminate) applies. 0, or -1 with errno (EINVAL: a signal
 * that cannot be caught). */
int tessera_task_init(int signo);

/* 1 once the checkpoint signal has arrived, else 0. A plain read of a
 * volatile sig_atomic_t: call it between steps, as often as you like. */
int tessera_task_checkpoint_requested(void);

/* The acknowledgement: call it after the checkpoint is written and durable.
 * Creates $TESSERA_CHECKPOINT_DONE (a temporary file, fsync, rename, so the
 * agent never sees a half-written one). 0 (also when the variable is unset:
 * not under Tessera), or -1 with errno. */
int tessera_task_checkpoint_done(void);

/* Appends one step's duration, in seconds (finite and > 0), to
 * $TESSERA_STEP_FILE as a line the agent reads ("0.412000\n"), in one
 * write(2) so a reader never sees half a line. 0 (also when the variable is
 * unset), or -1 with errno (EINVAL: not a positive finite number). The file
 * stays open between calls. */
int tessera_task_report_step(double seconds);

/* TESSERA_RESTARTS: how many times the job was stopped to run again; above 0
 * means resume from the latest checkpoint. 0 when unset; -1 with errno
 * EINVAL when it is not a whole number in 0..1000000. */
int tessera_task_restarts(void);

/* TESSERA_CHECKPOINT_DIR (the same on every run of the job), or NULL when
 * unset. The string belongs to the environment. */
const char *tessera_task_checkpoint_dir(void);

/* For tests: forget the flag and close the step file. */
void tessera_task_reset(void);

#ifdef __cplusplus
}
#endif

#ifdef TESSERA_TASK_IMPLEMENTATION

#ifndef SA_RESTART
#error "tessera/task.h needs POSIX declarations: compile with -D_POSIX_C_SOURCE=200809L or a GNU mode (-std=gnu11)"
#endif

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t tessera_task_flag_;
static int tessera_task_step_fd_ = -1;

static void tessera_task_on_signal_(int signo)
{
    (void)signo;
    tessera_task_flag_ = 1;
}

int tessera_task_init(int signo)
{
    if (signo == 0)
        signo = SIGUSR1;
    if (signo == SIGKILL || signo == SIGSTOP || signo < 1) {
        errno = EINVAL;
        return -1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = tessera_task_on_signal_;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* a blocking read in the step is not cut short */
    return sigaction(signo, &sa, NULL);
}

int tessera_task_checkpoint_requested(void)
{
    return tessera_task_flag_ != 0;
}

/* The variable's value if set and non-empty, NULL otherwise; -1 (errno
 * ENAMETOOLONG) through *bad when it is longer than TESSERA_TASK_PATH_MAX. */
static const char *tessera_task_path_(const char *name, int *bad)
{
    const char *v = getenv(name);
    *bad = 0;
    if (!v || !*v)
        return NULL;
    if (strlen(v) >= TESSERA_TASK_PATH_MAX) {
        *bad = 1;
        errno = ENAMETOOLONG;
        return NULL;
    }
    return v;
}

int tessera_task_checkpoint_done(void)
{
    int bad;
    const char *path = tessera_task_path_("TESSERA_CHECKPOINT_DONE", &bad);
    if (bad)
        return -1;
    if (!path)
        return 0;
    char tmp[TESSERA_TASK_PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    static const char body[] = "checkpointed\n";
    int ok = write(fd, body, sizeof body - 1) == (ssize_t)(sizeof body - 1) && fsync(fd) == 0;
    int saved = errno;
    close(fd);
    if (!ok || rename(tmp, path) != 0) {
        saved = ok ? errno : saved;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    return 0;
}

int tessera_task_report_step(double seconds)
{
    if (!(seconds > 0) || !isfinite(seconds)) {
        errno = EINVAL;
        return -1;
    }
    if (tessera_task_step_fd_ < 0) {
        int bad;
        const char *path = tessera_task_path_("TESSERA_STEP_FILE", &bad);
        if (bad)
            return -1;
        if (!path)
            return 0;
        tessera_task_step_fd_ = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (tessera_task_step_fd_ < 0)
            return -1;
    }
    char line[64];
    int n = snprintf(line, sizeof line, "%.6f\n", seconds);
    if (n <= 0 || n >= (int)sizeof line) {
        errno = EINVAL; /* above 1e50 s: not a step time */
        return -1;
    }
    return write(tessera_task_step_fd_, line, (size_t)n) == n ? 0 : -1;
}

int tessera_task_restarts(void)
{
    const char *v = getenv("TESSERA_RESTARTS");
    if (!v || !*v)
        return 0;
    long n = 0;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9' || n > 1000000) {
            errno = EINVAL;
            return -1;
        }
        n = n * 10 + (*p - '0');
    }
    if (n > 1000000) {
        errno = EINVAL;
        return -1;
    }
    return (int)n;
}

const char *tessera_task_checkpoint_dir(void)
{
    const char *v = getenv("TESSERA_CHECKPOINT_DIR");
    return v && *v ? v : NULL;
}

void tessera_task_reset(void)
{
    tessera_task_flag_ = 0;
    if (tessera_task_step_fd_ >= 0)
        close(tessera_task_step_fd_);
    tessera_task_step_fd_ = -1;
}

#endif /* TESSERA_TASK_IMPLEMENTATION */
#endif /* TESSERA_TASK_H */
