/*
 * hooks.c - the site's prolog and epilog (docs/tessera-agent.md "Prolog and
 * epilog"): programs the agent runs as root before a task starts
 * (--prolog) and after it ended (--epilog), each within --hook-timeout.
 *
 * A hook is a child process in a process group of its own, its output on
 * the agent's standard error (the agent log), its input /dev/null, its
 * environment the task's identity only (job, rank, user, GPUs, node). The
 * agent never waits for one: a hook is started, then polled (waitpid with
 * WNOHANG) from the agent's loop and from the long-poll's progress callback,
 * so a slow hook never delays a sync. At its deadline its whole group is
 * killed (SIGKILL) and the hook counts as failed; the killed process is
 * reaped by a later poll. A failing or timed-out prolog fails its task's
 * launch (end "prolog_failed"), a failing epilog leaves the task's end as it
 * was; either asks the controller to drain the node, with the reason, as
 * Slurm does: a node whose hooks fail is not trusted with more work until an
 * admin resumes it. At most --max-hooks (TS_AGENT_MAX_HOOKS) hooks run at
 * once. A prolog beyond that waits for a slot, its task held as it is while
 * its prolog runs (at most TS_AGENT_MAX_TASKS wait, one a task): a user
 * starting more tasks at once than there are slots must not drain the node.
 * An epilog beyond it waits in a ring of TS_AGENT_EPILOGS_WAITING_MAX: a
 * user ending many tasks at once must not skip the site's cleanup; one that
 * finds even the ring full is skipped and drains the node, as a failed one
 * does. As a slot frees, waiting epilogs start first (the cleanup of what
 * ran before what runs next), then prologs, each oldest first. A waiting
 * epilog is also a file in <state_dir>/epilogs until it starts: an agent
 * that stops (or is killed) with epilogs waiting runs them after its
 * restart, since the tasks they clean up after may be gone from its records
 * (a task it still has a record of is not given a second one).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent_internal.h"
#include "agent/launch_record.h"
#include "agent/clock.h"

#define HOOK_ENV_MAX 24
#define HOOK_ENV_BYTES 256
#define HOOK_FDS_CLOSE_MAX 4096 /* descriptors above stderr closed in the child */

/* The hook's environment: the task's identity. */
static int hook_env(const ts_agent *a, const char *kind, int64_t job, int rank, const char *user,
                    long long uid, const int *gpus, int ngpu, int exit_code,
                    char env[HOOK_ENV_MAX][HOOK_ENV_BYTES], char **envp)
{
    int n = 0;
    char list[HOOK_ENV_BYTES / 2] = "";
    for (int k = 0; k < ngpu; k++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", k ? "," : "", gpus[k]);
    snprintf(env[n++], HOOK_ENV_BYTES, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
             "/sbin:/bin");
    snprintf(env[n++], HOOK_ENV_BYTES, "TESSERA_HOOK=%s", kind);
    snprintf(env[n++], HOOK_ENV_BYTES, "TESSERA_NODE=%s", a->cfg.node);
    snprintf(env[n++], HOOK_ENV_BYTES, "SLURMD_NODENAME=%s", a->cfg.node);
    snprintf(env[n++], HOOK_ENV_BYTES, "TESSERA_JOB_ID=%lld", (long long)job);
    snprintf(env[n++], HOOK_ENV_BYTES, "SLURM_JOB_ID=%lld", (long long)job);
    snprintf(env[n++], HOOK_ENV_BYTES, "TESSERA_RANK=%d", rank);
    snprintf(env[n++], HOOK_ENV_BYTES, "SLURM_PROCID=%d", rank);
    snprintf(env[n++], HOOK_ENV_BYTES, "TESSERA_USER=%s", user ? user : "");
    snprintf(env[n++], HOOK_ENV_BYTES, "SLURM_JOB_USER=%s", user ? user : "");
    snprintf(env[n++], HOOK_ENV_BYTES, "TESSERA_UID=%lld", uid);
    snprintf(env[n++], HOOK_ENV_BYTES, "SLURM_JOB_UID=%lld", uid);
    snprintf(env[n++], HOOK_ENV_BYTES, "TESSERA_GPUS=%s", list);
    snprintf(env[n++], HOOK_ENV_BYTES, "CUDA_VISIBLE_DEVICES=%s", list);
    if (exit_code >= 0)
        snprintf(env[n++], HOOK_ENV_BYTES, "TESSERA_EXIT_CODE=%d", exit_code);
    for (int i = 0; i < n; i++)
        envp[i] = env[i];
    envp[n] = NULL;
    return n;
}

/* Starts path as a hook; its pid, or -1 with why. Only async-signal-safe
 * calls between fork and exec (the agent has threads: image pulls). */
static pid_t hook_spawn(const char *path, char **envp, char *why, size_t wsize)
{
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0) {
        snprintf(why, wsize, "/dev/null: %s", strerror(errno));
        return -1;
    }
    char *argv[] = {(char *)path, NULL};
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0); /* its own group: a timeout kills what it started too */
        dup2(null, STDIN_FILENO);
        dup2(STDERR_FILENO, STDOUT_FILENO); /* both into the agent log */
        for (int fd = STDERR_FILENO + 1; fd < HOOK_FDS_CLOSE_MAX; fd++)
            close(fd);
        execve(path, argv, envp);
        _exit(127);
    }
    int e = errno;
    close(null);
    if (pid < 0) {
        snprintf(why, wsize, "fork: %s", strerror(e));
        return -1;
    }
    setpgid(pid, pid); /* also here: the group exists before a kill, whoever runs first */
    return pid;
}

#define EPILOG_FILE_HEAD "tessera-epilog 1"
#define EPILOG_FILE_BYTES 512

/* <state_dir>/epilogs[/j<job>-r<rank>] into p. */
static void epilog_path(const ts_agent *a, const agent_epilog_wait *w, char *p, size_t n)
{
    if (w)
        snprintf(p, n, "%s/epilogs/j%lld-r%d", a->cfg.state_dir, (long long)w->job, w->rank);
    else
        snprintf(p, n, "%s/epilogs", a->cfg.state_dir);
}

/* A waiting epilog's file, written whole then renamed into place as a
 * task's record is (agent_rec_put). */
static void epilog_keep(const ts_agent *a, const agent_epilog_wait *w)
{
    char p[700], tmp[720], gpus[128] = "", text[EPILOG_FILE_BYTES];
    epilog_path(a, w, p, sizeof p);
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    for (int k = 0; k < w->ngpu; k++)
        snprintf(gpus + strlen(gpus), sizeof gpus - strlen(gpus), "%s%d", k ? "," : "",
                 w->gpus[k]);
    int n = snprintf(text, sizeof text, EPILOG_FILE_HEAD "\n%lld %d %lld %d %s %s\n",
                     (long long)w->job, w->rank, w->uid, w->exit_code, gpus[0] ? gpus : "-",
                     w->user[0] ? w->user : "-");
    if (n < 0 || (size_t)n >= sizeof text || agent_rec_put(tmp, p, text, (size_t)n, "", 0) != 0)
        fprintf(stderr, "tessera-agent: epilog of job %lld rank %d: %s: %s (it runs, unless "
                "the agent stops first)\n", (long long)w->job, w->rank, p, strerror(errno));
}

/* Reads a waiting epilog's file; false for anything else. */
static bool epilog_read(const char *path, agent_epilog_wait *w)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    char b[EPILOG_FILE_BYTES], gpus[128], user[64];
    ssize_t n = fd >= 0 ? read(fd, b, sizeof b - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return false;
    b[n] = '\0';
    memset(w, 0, sizeof *w);
    long long job, uid;
    if (strncmp(b, EPILOG_FILE_HEAD "\n", strlen(EPILOG_FILE_HEAD) + 1) != 0 ||
        sscanf(b + strlen(EPILOG_FILE_HEAD) + 1, "%lld %d %lld %d %127s %63s", &job, &w->rank,
               &uid, &w->exit_code, gpus, user) != 6)
        return false;
    w->job = job;
    w->uid = uid;
    snprintf(w->user, sizeof w->user, "%s", strcmp(user, "-") ? user : "");
    for (char *s = gpus, *end; *s && *s != '-' && w->ngpu < 16; s = *end ? end + 1 : end) {
        w->gpus[w->ngpu++] = (int)strtol(s, &end, 10);
        if (end == s)
            return false;
    }
    return true;
}

/* Keeps an epilog for when a hook slot frees; false (and the node drained)
 * when even the waiting ring is full. */
static bool epilog_wait(ts_agent *a, int64_t job, int rank, const char *user, long long uid,
                        const int *gpus, int ngpu, int exit_code)
{
    if (a->nepilogs_waiting == TS_AGENT_EPILOGS_WAITING_MAX) {
        fprintf(stderr, "tessera-agent: epilog of job %lld rank %d: %d hooks run and %d "
                "epilogs wait; skipped\n", (long long)job, rank, a->cfg.max_hooks,
                TS_AGENT_EPILOGS_WAITING_MAX);
        agent_hook_drain(a, "epilog %.120s skipped: %d epilogs already waiting (job %lld rank "
                         "%d)", a->cfg.epilog, TS_AGENT_EPILOGS_WAITING_MAX, (long long)job, rank);
        return false;
    }
    int k = (a->epilogs_head + a->nepilogs_waiting++) % TS_AGENT_EPILOGS_WAITING_MAX;
    agent_epilog_wait *w = &a->epilogs_waiting[k];
    memset(w, 0, sizeof *w);
    w->job = job;
    w->rank = rank;
    snprintf(w->user, sizeof w->user, "%s", user ? user : "");
    w->uid = uid;
    w->ngpu = ngpu < 16 ? ngpu : 16;
    memcpy(w->gpus, gpus, (size_t)w->ngpu * sizeof *gpus);
    w->exit_code = exit_code;
    epilog_keep(a, w);
    fprintf(stderr, "tessera-agent: epilog of job %lld rank %d waits: %d hooks run (%d "
            "epilogs waiting)\n", (long long)job, rank, a->cfg.max_hooks, a->nepilogs_waiting);
    return true;
}

void agent_epilogs_restore(ts_agent *a)
{
    char dir[700];
    epilog_path(a, NULL, dir, sizeof dir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        fprintf(stderr, "tessera-agent: %s: %s\n", dir, strerror(errno));
    /* the names first: a queued one's file is written again while the
     * folder would still be read */
    DIR *d = opendir(dir);
    struct dirent *de;
    char (*names)[64] = d ? calloc(TS_AGENT_EPILOGS_WAITING_MAX, sizeof *names) : NULL;
    int nn = 0;
    while (names && nn < TS_AGENT_EPILOGS_WAITING_MAX && (de = readdir(d)) != NULL)
        if (de->d_name[0] != '.' && strlen(de->d_name) < sizeof names[0])
            memcpy(names[nn++], de->d_name, strlen(de->d_name) + 1);
    if (d)
        closedir(d);
    for (int i = 0; i < nn; i++) {
        char p[1024];
        agent_epilog_wait w;
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        if (!a->cfg.epilog[0] || !epilog_read(p, &w)) { /* no epilog now, or not ours */
            unlink(p);
            continue;
        }
        fprintf(stderr, "tessera-agent: epilog of job %lld rank %d waited when the last agent "
                "stopped: it runs now\n", (long long)w.job, w.rank);
        if (a->nepilogs_restored < TS_AGENT_EPILOGS_WAITING_MAX)
            a->epilogs_restored[a->nepilogs_restored++] = (struct agent_epilog_id){w.job, w.rank};
        bool queued = a->nhooks >= a->cfg.max_hooks; /* then its file is kept, rewritten */
        agent_hook_start(a, false, w.job, w.rank, w.user, w.uid, w.gpus, w.ngpu, w.exit_code);
        if (!queued)
            unlink(p); /* started (or failed to): it waits no more */
    }
    free(names);
}

static void prologs_resume(ts_agent *a);

/* Starts waiting epilogs, oldest first, while hook slots are free. */
static void epilogs_resume(ts_agent *a)
{
    while (a->nepilogs_waiting > 0 && a->nhooks < a->cfg.max_hooks) {
        agent_epilog_wait w = a->epilogs_waiting[a->epilogs_head];
        a->epilogs_head = (a->epilogs_head + 1) % TS_AGENT_EPILOGS_WAITING_MAX;
        a->nepilogs_waiting--;
        agent_hook_start(a, false, w.job, w.rank, w.user, w.uid, w.gpus, w.ngpu, w.exit_code);
        char p[700];
        epilog_path(a, &w, p, sizeof p);
        unlink(p); /* started: after a restart it would run twice */
    }
}

bool agent_hook_start(ts_agent *a, bool prolog, int64_t job, int rank, const char *user,
                         long long uid, const int *gpus, int ngpu, int exit_code)
{
    const char *path = prolog ? a->cfg.prolog : a->cfg.epilog;
    const char *kind = prolog ? "prolog" : "epilog";
    if (!path[0])
        return false;
    if (a->nhooks >= a->cfg.max_hooks) {
        if (!prolog)
            return epilog_wait(a, job, rank, user, uid, gpus, ngpu, exit_code);
        fprintf(stderr, "tessera-agent: prolog of job %lld rank %d: %d hooks already run\n",
                (long long)job, rank, a->cfg.max_hooks); /* agent_prolog_begin queues it */
        return false;
    }
    char env[HOOK_ENV_MAX][HOOK_ENV_BYTES], *envp[HOOK_ENV_MAX + 1];
    hook_env(a, kind, job, rank, user, uid, gpus, ngpu, exit_code, env, envp);
    char why[160];
    pid_t pid = hook_spawn(path, envp, why, sizeof why);
    if (pid < 0) {
        fprintf(stderr, "tessera-agent: %s %s of job %lld rank %d: %s\n", kind, path,
                (long long)job, rank, why);
        return false;
    }
    agent_hook *h = &a->hooks[a->nhooks++];
    memset(h, 0, sizeof *h);
    h->pid = pid;
    h->prolog = prolog;
    h->job = job;
    h->rank = rank;
    h->deadline = agent_mono_s() + a->cfg.hook_timeout_s;
    fprintf(stderr, "tessera-agent: %s %s of job %lld rank %d started (pid %d)\n", kind, path,
            (long long)job, rank, (int)pid);
    return true;
}

void agent_hook_drain(ts_agent *a, const char *fmt, ...)
{
    if (a->drain_why[0]) /* the first reason stands until the controller took it */
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->drain_why, sizeof a->drain_why, fmt, ap);
    va_end(ap);
    fprintf(stderr, "tessera-agent: asking the controller to drain this node: %s\n",
            a->drain_why);
}

/* A prolog's end: its task starts, or its launch fails. */
static void prolog_ended(ts_agent *a, const agent_hook *h, bool ok, const char *how)
{
    local_task *lt = agent_find(a, h->job, h->rank, -1); /* the rank's own task */
    if (!lt || !lt->prolog_wait) /* stopped meanwhile: nothing to start */
        return;
    json_t *t = lt->prolog_wait;
    lt->prolog_wait = NULL;
    if (ok) {
        lt->prolog_done = true;
        agent_start_task_in(a, lt, t);
    } else {
        snprintf(lt->start_error, sizeof lt->start_error, "prolog_failed: the node's prolog %.300s "
                 "%s", a->cfg.prolog, how);
        snprintf(lt->launch_end, sizeof lt->launch_end, "prolog_failed");
        agent_hook_drain(a, "prolog %.120s %s (job %lld rank %d)", a->cfg.prolog, how,
                            (long long)h->job, h->rank);
    }
    json_decref(t);
}

void agent_hooks_poll(ts_agent *a, double now)
{
    for (int i = 0; i < a->nhooks;) {
        agent_hook *h = &a->hooks[i];
        int st;
        pid_t r = waitpid(h->pid, &st, WNOHANG);
        if (r == 0 && !h->killed && now >= h->deadline) {
            kill(-h->pid, SIGKILL);
            h->killed = true;
            char how[96];
            snprintf(how, sizeof how, "timed out after %g s (killed)", a->cfg.hook_timeout_s);
            fprintf(stderr, "tessera-agent: %s of job %lld rank %d %s\n",
                    h->prolog ? "prolog" : "epilog", (long long)h->job, h->rank, how);
            agent_hook done = *h;
            if (done.prolog)
                prolog_ended(a, &done, false, how);
            else
                agent_hook_drain(a, "epilog %.120s %s (job %lld rank %d)", a->cfg.epilog, how,
                                    (long long)done.job, done.rank);
            i++;
            continue;
        }
        if (r == 0 || (r < 0 && errno == EINTR)) {
            i++;
            continue;
        }
        agent_hook done = *h;
        a->hooks[i] = a->hooks[--a->nhooks]; /* gone: its slot is free */
        if (done.killed) /* its failure was said at the kill */
            continue;
        bool ok = r > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
        char how[96];
        if (r < 0)
            snprintf(how, sizeof how, "was lost (%s)", strerror(errno));
        else if (WIFEXITED(st))
            snprintf(how, sizeof how, "exited with code %d", WEXITSTATUS(st));
        else
            snprintf(how, sizeof how, "was killed by signal %d",
                     WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        fprintf(stderr, "tessera-agent: %s of job %lld rank %d %s\n",
                done.prolog ? "prolog" : "epilog", (long long)done.job, done.rank, how);
        if (done.prolog)
            prolog_ended(a, &done, ok, how);
        else if (!ok)
            agent_hook_drain(a, "epilog %.120s %s (job %lld rank %d)", a->cfg.epilog, how,
                                (long long)done.job, done.rank);
    }
    epilogs_resume(a);
    prologs_resume(a);
}

/* Starts lt's prolog (its desired task kept in lt->prolog_wait, decoded as
 * d); one that cannot be started fails the launch and drains the node. */
static void prolog_start(ts_agent *a, local_task *lt, const ts_desired_task *d)
{
    int gpus[16], ngpu = 0;
    for (int k = 0; k < d->gpus.n && ngpu < 16; k++)
        gpus[ngpu++] = (int)d->gpus.v[k];
    bool has_uid = (d->present & TS_DT_BIT(TS_DT_UID)) && !d->uid_null;
    if (lt->prolog_wait && agent_hook_start(a, true, lt->job, lt->rank, d->user,
                                            has_uid ? (long long)d->uid : -1, gpus, ngpu, -1))
        return;
    json_decref(lt->prolog_wait);
    lt->prolog_wait = NULL;
    snprintf(lt->start_error, sizeof lt->start_error, "prolog_failed: the node's prolog %.300s "
             "could not be started", a->cfg.prolog);
    snprintf(lt->launch_end, sizeof lt->launch_end, "prolog_failed");
    agent_hook_drain(a, "prolog %.120s could not be started (job %lld rank %d)", a->cfg.prolog,
                     (long long)lt->job, lt->rank);
}

/* Starts waiting prologs, oldest first, while hook slots are free; one
 * whose task was stopped meanwhile (its desired task dropped) leaves the
 * line. */
static void prologs_resume(ts_agent *a)
{
    while (a->nhooks < a->cfg.max_hooks) {
        local_task *next = NULL;
        for (int i = 0; i < a->ntasks; i++) {
            local_task *lt = &a->tasks[i];
            if (lt->prolog_queued && !lt->prolog_wait)
                lt->prolog_queued = 0;
            else if (lt->prolog_queued && (!next || lt->prolog_queued < next->prolog_queued))
                next = lt;
        }
        if (!next)
            return;
        next->prolog_queued = 0;
        ts_desired_task d;
        ts_err de;
        if (ts_desired_task_decode(next->prolog_wait, "task", &d, &de) != 0) { /* memory */
            json_decref(next->prolog_wait);
            next->prolog_wait = NULL;
            snprintf(next->start_error, sizeof next->start_error, "%.400s", de.msg);
            continue;
        }
        prolog_start(a, next, &d);
        ts_desired_task_fini(&d);
    }
}

bool agent_prolog_begin(ts_agent *a, local_task *lt, const json_t *t, const ts_desired_task *d)
{
    if (!a->cfg.prolog[0] || lt->prolog_done || lt->is_step) /* a rank's, not its steps' */
        return false;
    lt->prolog_wait = json_deep_copy(t); /* read again at its start (agent_start_task_in) */
    if (lt->prolog_wait && a->nhooks >= a->cfg.max_hooks) {
        lt->prolog_queued = ++a->prologs_queued;
        fprintf(stderr, "tessera-agent: prolog of job %lld rank %d waits: %d hooks run\n",
                (long long)lt->job, lt->rank, a->cfg.max_hooks);
        return true; /* started by agent_hooks_poll as a slot frees */
    }
    prolog_start(a, lt, d);
    return true;
}

void agent_epilog_begin(ts_agent *a, local_task *lt)
{
    if (!a->cfg.epilog[0] || lt->epilog_done || !lt->t || lt->is_step)
        return;
    lt->epilog_done = true;
    for (int i = 0; i < a->nepilogs_restored; i++) /* the last agent's, taken over */
        if (a->epilogs_restored[i].job == lt->job && a->epilogs_restored[i].rank == lt->rank)
            return;
    const ts_task_info *info = agent_task_info_get(lt->t);
    char user[64] = "";
    long long uid = info ? (long long)info->uid : -1;
    if (lt->user[0])
        snprintf(user, sizeof user, "%s", lt->user);
    agent_hook_start(a, false, lt->job, lt->rank, user, uid, lt->gpu, lt->ngpu,
                        lt->st.exit_code);
}
