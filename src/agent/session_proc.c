/*
 * session_proc.c - what an interactive session reads of the task it joins
 * (session_proc.h): all of it from /proc/<pid>, on the session's own thread,
 * and checked to be the task's before it is used.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/launch_record.h"
#include "agent/session_proc.h"

#define SESSION_ENV_MAX_BYTES (256 * 1024)
/* A container's first process is the OCI runtime's own init until it execs
 * the task's command: a session waits this long for that, polling */
#define SESSION_INIT_WAIT_S 10.0
#define SESSION_INIT_POLL_NS 20000000L
#define SESSION_ENV_RETRIES 25 /* an empty environment read: 0.5 s of polls (task_environ) */
#define SESSION_TREE_DEPTH 16  /* a container's process: this close below its runtime */

/* pid last: joining it moves only the children made after (exec_child) */
static const char *const NS_NAMES[NS_N] = {"ipc", "uts", "net", "mnt", "pid"};

/* Opens the task's namespaces that differ from the agent's (-1 the same). */
void agent_sess_namespaces(pid_t pid, int fds[NS_N])
{
    for (int i = 0; i < NS_N; i++) {
        char p[64], q[64];
        struct stat a, b;
        fds[i] = -1;
        snprintf(p, sizeof p, "/proc/%d/ns/%s", (int)pid, NS_NAMES[i]);
        snprintf(q, sizeof q, "/proc/self/ns/%s", NS_NAMES[i]);
        if (stat(p, &a) == 0 && stat(q, &b) == 0 && (a.st_ino != b.st_ino || a.st_dev != b.st_dev))
            fds[i] = open(p, O_RDONLY | O_CLOEXEC);
    }
}

/* The process whose namespaces, user and environment a session joins: the
 * task's own, or for a container task (whose process is the OCI runtime)
 * its first descendant in another mount namespace: the container's. */
static pid_t join_target(pid_t pid, bool container)
{
    if (!container)
        return pid;
    struct stat self;
    if (stat("/proc/self/ns/mnt", &self) != 0)
        return pid;
    pid_t queue[64];
    int head = 0, tail = 0;
    queue[tail++] = pid;
    while (head < tail) {
        pid_t p = queue[head++];
        char path[96];
        struct stat st;
        snprintf(path, sizeof path, "/proc/%d/ns/mnt", (int)p);
        if (p != pid && stat(path, &st) == 0 && st.st_ino != self.st_ino)
            return p;
        /* every thread's children: a runtime's threads each fork (Go) */
        snprintf(path, sizeof path, "/proc/%d/task", (int)p);
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && tail < 64 && (de = readdir(d)) != NULL) {
            if (de->d_name[0] < '0' || de->d_name[0] > '9')
                continue;
            char cp[128];
            snprintf(cp, sizeof cp, "/proc/%d/task/%.16s/children", (int)p, de->d_name);
            FILE *f = fopen(cp, "re");
            int c;
            while (f && tail < 64 && fscanf(f, "%d", &c) == 1)
                queue[tail++] = (pid_t)c;
            if (f)
                fclose(f);
        }
        if (d)
            closedir(d);
    }
    return pid;
}

/* The first word of a process's command line into out ("" when it is gone). */
static void argv0_of(pid_t pid, char *out, size_t cap)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/cmdline", (int)pid);
    out[0] = '\0';
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    out[n > 0 ? n : 0] = '\0'; /* the first NUL ends the first word */
}

/* join_target for a container task, once the container's first process
 * is the task's command: until then there is none (the runtime is creating
 * the container) or it is the runtime's init (the runtime re-executed with
 * its own first word, e.g. `runc init`), whose directory and environment
 * are not the task's. Waits at most SESSION_INIT_WAIT_S; -1: the container
 * was still starting. */
static pid_t container_target(pid_t runtime)
{
    char rt[256], cand[256];
    double until = (double)time(NULL) + SESSION_INIT_WAIT_S;
    for (;;) {
        pid_t p = join_target(runtime, true);
        argv0_of(runtime, rt, sizeof rt);
        if (!rt[0]) /* the runtime is gone: the task ended (the caller says so) */
            return runtime;
        argv0_of(p, cand, sizeof cand);
        /* p == runtime: no process in another mount namespace yet */
        if (p != runtime && cand[0] && strcmp(rt, cand) != 0)
            return p;
        if ((double)time(NULL) >= until)
            return -1;
        struct timespec ts = {0, SESSION_INIT_POLL_NS};
        nanosleep(&ts, NULL);
    }
}

pid_t agent_sess_target(pid_t task, bool container)
{
    return container ? container_target(task) : task;
}

/* Whether target is the task's: its own process, or (a container) one of
 * its runtime's descendants, while that process is still the one the agent
 * started. A session reads /proc/<pid> on its own thread once its stream is
 * open: the task may have ended by then and its pid gone to another process
 * (a task can cycle pids fast), which a session must never join: its user
 * may be root. *start: target's start ticks, for session_still after the
 * reads. */
bool agent_sess_pin(pid_t task, unsigned long long task_start, pid_t target,
                    unsigned long long *start)
{
    char state;
    if (!agent_rec_alive(task, task_start) || agent_rec_proc_stat(target, start, &state) != 0)
        return false;
    pid_t p = target;
    for (int depth = 0; p > 1 && p != task && depth < SESSION_TREE_DEPTH; depth++)
        p = agent_rec_proc_parent(p);
    /* the tree was read while the task's process was still the agent's */
    return p == task && agent_rec_alive(task, task_start);
}

/* Reads /proc/<pid>/environ into b (cap bytes at most); -1: the process is
 * gone. */
static ssize_t read_environ(pid_t pid, char *b, size_t cap)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/environ", (int)pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    ssize_t k;
    while (n < cap && (k = read(fd, b + n, cap - n)) > 0)
        n += (size_t)k;
    close(fd);
    return (ssize_t)n;
}

/* The task's environment, NUL-separated, as an envp (one allocation each).
 * A process in the middle of an execve (a task's shell exec'ing its
 * command) reads as an empty environment until the new image's stack is
 * set up: an empty read is tried again for SESSION_ENV_RETRIES polls, and
 * taken as empty only then (a task may have cleared its environment). */
char **agent_sess_environ(pid_t pid, char **blob)
{
    *blob = NULL;
    char *b = malloc(SESSION_ENV_MAX_BYTES + 1);
    if (!b)
        return NULL;
    ssize_t got = read_environ(pid, b, SESSION_ENV_MAX_BYTES);
    for (int i = 0; got == 0 && i < SESSION_ENV_RETRIES; i++) {
        struct timespec ts = {0, SESSION_INIT_POLL_NS};
        nanosleep(&ts, NULL);
        got = read_environ(pid, b, SESSION_ENV_MAX_BYTES);
    }
    if (got < 0) {
        free(b);
        return NULL;
    }
    size_t n = (size_t)got;
    b[n] = '\0';
    size_t cnt = 0;
    for (size_t i = 0; i < n; i++)
        cnt += b[i] == '\0';
    char **env = calloc(cnt + 2, sizeof *env);
    if (!env) {
        free(b);
        return NULL;
    }
    size_t e = 0;
    for (size_t i = 0; i < n && e <= cnt;) {
        if (b[i])
            env[e++] = b + i;
        i += strlen(b + i) + 1;
    }
    *blob = b;
    return env;
}

/* The uid, gid and groups of the task (its /proc status). */
bool agent_sess_ids(pid_t pid, uid_t *uid, gid_t *gid, gid_t *groups, int *ng)
{
    char p[64], line[1024];
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    FILE *f = fopen(p, "re");
    bool u = false, g = false;
    *ng = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long v;
        if (sscanf(line, "Uid: %lu", &v) == 1) {
            *uid = (uid_t)v;
            u = true;
        } else if (sscanf(line, "Gid: %lu", &v) == 1) {
            *gid = (gid_t)v;
            g = true;
        } else if (strncmp(line, "Groups:", 7) == 0) {
            char *s = line + 7, *end;
            while (*ng < AGENT_SESS_GROUPS_MAX && (v = strtoul(s, &end, 10), end != s)) {
                groups[(*ng)++] = (gid_t)v;
                s = end;
            }
        }
    }
    if (f)
        fclose(f);
    return u && g;
}

