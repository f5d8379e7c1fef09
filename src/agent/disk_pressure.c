/*
 * disk_pressure.c - the agent's state disk kept for every task
 * (docs/images.md "A container's writable layer").
 *
 * The state disk holds every task's records and exit files, its output logs,
 * the image store and each container's writable layer. A task's output log
 * is kept within --output-keep-mib: past it, the log's older part is punched
 * out (the file keeps its size and its tail, which is what the end report
 * and output requests read), as a container runtime rotates a log. Each
 * layer is bounded (--container-write-mib), but a layer is a sparse file
 * that takes only what was written: several tasks writing together could
 * still fill the disk, and with it every other task's records. So the agent
 * checks the disk's free space every DISK_CHECK_S (also while a long-poll
 * waits). The logs of tasks it no longer has (their ends reported and taken:
 * nothing reads them again, the job keeps their last output) go after
 * --output-keep-hours, and first of all under the reserve, oldest first, as
 * kubelet collects dead containers' logs before it evicts a pod. If that is
 * not enough, it stops the running task whose files there (its layer and its
 * logs) take the most, as kubelet evicts the pod that uses the most
 * ephemeral storage: the tasks that fill the disk pay, not their neighbours.
 * Only where their files filled it: the disk and the running tasks' files
 * are sampled every DISK_SAMPLE_S, and when the disk lost over the last
 * minute more than twice what the tasks' files grew by, it was filled from
 * outside them (a bare task writing in a shared folder of the same disk,
 * which no file of its counts): no task is stopped for that, the largest
 * would be an innocent one, until the disk has its reserve again or the
 * tasks' files fill it. Its job fails with reason
 * `disk_pressure`, the figures in its event. One task at a time, then
 * DISK_SETTLE_S before the next; while a stopped task's layer is still there
 * (its space comes back when its bundle is removed, once the controller
 * acknowledged its end) the next is stopped only if the free space falls
 * under half the reserve. agent_stopped_report reports tasks the agent
 * stopped as they ran (this one, and a sharing shim that never registered).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_internal.h"
#include "agent/image.h"

#define DISK_CHECK_S 0.2   /* statvfs and one stat a container: cheap */
#define DISK_SETTLE_S 1.0  /* after a task was stopped: its kill takes effect */
#define DISK_RESERVE_PERCENT 5
#define DISK_STOP_PART 8       /* a layer stopped gives back an 8th of the reserve at least */
#define DISK_STOP_MIN_MIB 16
#define MIB (1024LL * 1024LL)
#define OUTPUT_KEEP_PERCENT 2
#define OUTPUT_TRIM_ALIGN MIB  /* holes punched in whole MiB */
#define ENDED_SWEEP_S 10.0     /* ended tasks' logs looked at this often */
#define ENDED_PRESSED_S 2.0    /* and under the reserve */
#define ENDED_LOGS_MAX 65536   /* looked at in one sweep */
#define ENDED_MIN_AGE_S 60     /* a log written since is never an ended task's */
#define DISK_SAMPLE_S 5.0      /* the disk and the tasks' files sampled this often */
#define DISK_WINDOW_MIN_S 2.0  /* a sample at least this old tells who filled the disk */

/* percent of the disk under dir in MiB, between least and most; fallback
 * when the disk cannot be read. */
static long long disk_part_mib(const char *dir, int percent, long long least, long long most,
                               long long fallback)
{
    struct statvfs v;
    if (statvfs(dir, &v) != 0)
        return fallback;
    long long part = (long long)v.f_blocks * (long long)v.f_frsize / MIB * percent / 100;
    part = part > least ? part : least;
    return part < most ? part : most;
}

void agent_disk_limits(ts_agent_config *cfg)
{
    if (!cfg->disk_reserve_set)
        cfg->disk_reserve_mib = disk_part_mib(cfg->state_dir, DISK_RESERVE_PERCENT, 0,
                                              TS_AGENT_DISK_RESERVE_MIB, 0);
    if (!cfg->output_keep_set)
        cfg->output_keep_mib = disk_part_mib(cfg->state_dir, OUTPUT_KEEP_PERCENT, 1,
                                             TS_AGENT_OUTPUT_KEEP_MIB, TS_AGENT_OUTPUT_KEEP_MIB);
    if (!cfg->output_hours_set)
        cfg->output_keep_hours = TS_AGENT_OUTPUT_KEEP_HOURS;
    cfg->disk_reserve_set = cfg->output_keep_set = cfg->output_hours_set = true;
}

static long long file_bytes(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? (long long)st.st_blocks * 512 : 0;
}

/* The bytes task lt's writable layer takes on the state disk (0: none). */
static long long layer_bytes(const ts_agent *a, const local_task *lt)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s/scratch.img", a->bundles,
             agent_task_info_get(lt->t)->task_id);
    return file_bytes(p);
}

/* Keeps an output log within keep bytes on the disk: past it, all but its
 * last half of keep is punched out (whole MiB). Said once per agent where
 * the filesystem cannot punch holes. */
static void output_trim(const char *path, long long keep)
{
    struct stat st;
    if (keep <= 0 || lstat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
        (long long)st.st_blocks * 512 <= keep)
        return;
    int fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return;
    off_t upto = (off_t)((st.st_size - keep / 2) / OUTPUT_TRIM_ALIGN * OUTPUT_TRIM_ALIGN);
    static int said;
    if (upto > 0 && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, upto) != 0 &&
        !said++)
        fprintf(stderr, "tessera-agent: %s: the older part of a task's output cannot be "
                        "dropped here (%s): its log grows\n", path, strerror(errno));
    close(fd);
}

/* The bytes task lt's files take on the state disk: its layer and logs. */
static long long task_disk_bytes(const ts_agent *a, const local_task *lt)
{
    const ts_task_info *in = agent_task_info_get(lt->t);
    return layer_bytes(a, lt) + file_bytes(in->stdout_path) + file_bytes(in->stderr_path);
}

/* What the running tasks' files take on the state disk. */
static long long tasks_disk_bytes(const ts_agent *a)
{
    long long sum = 0;
    for (int i = 0; i < a->ntasks; i++) {
        const local_task *lt = &a->tasks[i];
        if (lt->t && !lt->disk_stopped && lt->st.phase != TS_TASK_EXITED)
            sum += task_disk_bytes(a, lt);
    }
    return sum;
}

static void disk_sample(ts_agent *a, double now, long long free_bytes)
{
    if (now < a->disk_sample_at)
        return;
    a->disk_sample_at = now + DISK_SAMPLE_S;
    a->disk_samples[a->disk_sample_next] =
        (struct agent_disk_sample){now, free_bytes, tasks_disk_bytes(a)};
    a->disk_sample_next = (a->disk_sample_next + 1) % AGENT_DISK_SAMPLES;
    if (a->disk_nsamples < AGENT_DISK_SAMPLES)
        a->disk_nsamples++;
}

/* Whether the tasks' files filled the disk lately: since the oldest sample
 * of the last minute (at least DISK_WINDOW_MIN_S old), they grew by at
 * least half of what the disk lost. True where no sample tells (the agent
 * just started) or the disk lost nothing; *lost and *grew in bytes. */
static bool tasks_filled_it(const ts_agent *a, double now, long long free_bytes,
                            long long *lost, long long *grew)
{
    const struct agent_disk_sample *old = NULL;
    for (int k = 0; k < a->disk_nsamples; k++) {
        const struct agent_disk_sample *s = &a->disk_samples[k];
        double age = now - s->at;
        if (age >= DISK_WINDOW_MIN_S && age <= DISK_SAMPLE_S * AGENT_DISK_SAMPLES &&
            (!old || s->at < old->at))
            old = s;
    }
    *lost = *grew = 0;
    if (!old)
        return true;
    *lost = old->free_bytes - free_bytes;
    *grew = tasks_disk_bytes(a) - old->task_bytes;
    return *lost <= 0 || *grew * 2 >= *lost;
}

/* Whether a task stopped for the disk still holds its layer. One that has
 * ended gives it back now, not when the controller acknowledged its end:
 * its keeper wrote its exit file after the runtime deleted its container,
 * so nothing uses its bundle any more (removed again, as nothing, when the
 * task is forgotten: agent_image.c). */
static bool stopped_layer_left(ts_agent *a, double now)
{
    bool left = false;
    for (int i = 0; i < a->ntasks; i++) {
        local_task *lt = &a->tasks[i];
        if (!lt->disk_stopped || !lt->t || layer_bytes(a, lt) == 0)
            continue;
        ts_err e;
        agent_task_poll(lt->t, now, &lt->st, &e);
        if (lt->st.phase != TS_TASK_EXITED) {
            left = true;
            continue;
        }
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s", a->bundles, agent_task_info_get(lt->t)->task_id);
        agent_bundle_remove(dir);
    }
    return left;
}

typedef struct ended_log {
    char name[256];
    time_t mtime;
    long long bytes;
} ended_log;

static int by_age(const void *x, const void *y)
{
    time_t a = ((const ended_log *)x)->mtime, b = ((const ended_log *)y)->mtime;
    return a < b ? -1 : a > b;
}

/* Whether logs-folder entry n is an output log ("<task id>.out" or ".err")
 * with no record beside it ("<task id>.task": the agent has that task, or
 * will adopt it); its age and size into *e. */
static bool ended_log_of(int dfd, const char *n, ended_log *e)
{
    size_t l = strlen(n);
    struct stat st;
    char rec[300];
    if (l < 5 || l >= sizeof e->name || (strcmp(n + l - 4, ".out") && strcmp(n + l - 4, ".err")))
        return false;
    snprintf(rec, sizeof rec, "%.*s.task", (int)(l - 4), n);
    if (fstatat(dfd, rec, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
        fstatat(dfd, n, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        return false;
    snprintf(e->name, sizeof e->name, "%s", n);
    e->mtime = st.st_mtime;
    e->bytes = (long long)st.st_blocks * 512;
    return true;
}

/* Removes the logs of ended tasks untouched for --output-keep-hours, and
 * with need > 0 (bytes) the oldest others too until that much came back. */
static void ended_logs_sweep(ts_agent *a, long long need)
{
    DIR *d = opendir(a->logs);
    ended_log *v = NULL, e;
    int n = 0, cap = 0;
    struct dirent *de;
    while (d && n < ENDED_LOGS_MAX && (de = readdir(d)) != NULL) {
        if (!ended_log_of(dirfd(d), de->d_name, &e))
            continue;
        if (n == cap) {
            ended_log *g = realloc(v, sizeof *v * (size_t)(cap = cap ? cap * 2 : 64));
            if (!g)
                break;
            v = g;
        }
        v[n++] = e;
    }
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, by_age);
    time_t now = time(NULL), old = now - (time_t)(a->cfg.output_keep_hours * 3600.0);
    int gone = 0;
    long long back = 0;
    /* never one written in the last minute: a task being started has its
     * logs a moment before its record */
    for (int i = 0; i < n && (v[i].mtime < old || back < need) &&
                    v[i].mtime < now - ENDED_MIN_AGE_S; i++)
        if (unlinkat(dirfd(d), v[i].name, 0) == 0) {
            gone++;
            back += v[i].bytes;
        }
    if (gone)
        fprintf(stderr, "tessera-agent: %d output log(s) of ended tasks removed (%lld MiB)%s\n",
                gone, back / MIB, need > 0 ? ": the state disk is under its reserve" : "");
    free(v);
    if (d)
        closedir(d);
}

/* Under the reserve, and ended tasks' logs not enough: stops the running
 * task whose files on the disk take the most (none under a part of the
 * reserve: the disk is full of something else). */
static void stop_the_largest(ts_agent *a, double now, long long free_mib, long long reserve)
{
    long long least = reserve * MIB / DISK_STOP_PART;
    least = least > DISK_STOP_MIN_MIB * MIB ? least : DISK_STOP_MIN_MIB * MIB;
    local_task *worst = NULL;
    long long most = least - 1;
    for (int i = 0; i < a->ntasks; i++) {
        local_task *lt = &a->tasks[i];
        if (!lt->t || lt->disk_stopped || lt->st.phase == TS_TASK_EXITED)
            continue;
        long long b = task_disk_bytes(a, lt);
        if (b > most) {
            most = b;
            worst = lt;
        }
    }
    if (!worst)
        return; /* full of what no task's files hold: not a task's doing */
    worst->disk_stopped = true;
    worst->disk_layer_mib = most / MIB;
    worst->disk_free_mib = free_mib;
    worst->disk_reserve_mib = reserve;
    fprintf(stderr, "tessera-agent: job %lld rank %d: the state disk has %lld MiB free, under "
                    "its reserve of %lld MiB, and this task's files there (its writable layer "
                    "and output) take %lld MiB, the most: stopped (disk_pressure)\n",
            (long long)worst->job, worst->rank, free_mib, reserve, worst->disk_layer_mib);
    ts_err e;
    /* SIGTERM with no grace: the SIGKILL to its group and cgroup follows at once */
    if (agent_task_preempt_begin(worst->t, SIGTERM, 0, now, &e) != 0)
        fprintf(stderr, "tessera-agent: job %lld rank %d: stop: %s\n", (long long)worst->job,
                worst->rank, e.msg);
    agent_task_poll(worst->t, now, &worst->st, &e);
    a->disk_settle = now + DISK_SETTLE_S;
}

/* The state disk's free MiB; -1 when it cannot be read. */
static long long free_mib_now(const ts_agent *a)
{
    struct statvfs v;
    if (statvfs(a->cfg.state_dir, &v) != 0)
        return -1;
    return (long long)v.f_bavail * (long long)v.f_frsize / MIB;
}

void agent_disk_check(ts_agent *a, double now)
{
    if (now < a->disk_next)
        return;
    a->disk_next = now + DISK_CHECK_S;
    long long keep = a->cfg.output_keep_mib * MIB;
    for (int i = 0; i < a->ntasks; i++) {
        const local_task *lt = &a->tasks[i];
        if (lt->t && lt->st.phase != TS_TASK_EXITED) {
            output_trim(agent_task_info_get(lt->t)->stdout_path, keep);
            output_trim(agent_task_info_get(lt->t)->stderr_path, keep);
        }
    }
    if (now >= a->disk_logs_next) {
        a->disk_logs_next = now + ENDED_SWEEP_S;
        ended_logs_sweep(a, 0);
    }
    long long reserve = a->cfg.disk_reserve_mib;
    long long free_mib = free_mib_now(a);
    if (now < a->disk_settle || reserve <= 0 || free_mib < 0)
        return;
    bool left = stopped_layer_left(a, now);
    disk_sample(a, now, free_mib * MIB);
    if (free_mib >= reserve) {
        a->disk_outside = false;
        return;
    }
    if (now >= a->disk_pressed_next) { /* ended tasks' logs go first */
        a->disk_pressed_next = now + ENDED_PRESSED_S;
        ended_logs_sweep(a, (reserve - free_mib) * MIB);
        if ((free_mib = free_mib_now(a)) >= reserve)
            return;
    }
    /* meanwhile the next is stopped only if the disk keeps filling past
     * half the reserve */
    if (left && free_mib >= reserve / 2)
        return;
    /* filled from outside the tasks' files: no task pays for it, until
     * their files fill it again */
    long long lost, grew;
    bool theirs = tasks_filled_it(a, now, free_mib * MIB, &lost, &grew);
    if (!theirs || (a->disk_outside && lost <= 0)) {
        if (!a->disk_outside)
            fprintf(stderr, "tessera-agent: the state disk has %lld MiB free, under its reserve "
                    "of %lld MiB, filled from outside the tasks' files (it lost %lld MiB lately, "
                    "their files grew %lld MiB): no task stopped\n", free_mib, reserve,
                    lost / MIB, grew / MIB);
        a->disk_outside = true;
        return;
    }
    stop_the_largest(a, now, free_mib, reserve);
}

void agent_stopped_report(const ts_agent *a, const local_task *lt, ts_task_report *r, char *why)
{
    if (lt->shim_missing) { /* it would have run without its limits */
        double reg = a->node->shim_register_s > 0 ? a->node->shim_register_s
                                                  : TS_AGENT_SHIM_REGISTER_S;
        snprintf(why, AGENT_STOPPED_WHY_BYTES, "shim_not_loaded: the sharing shim did not "
                 "register within %g s (a static program, or a loader that ignored LD_PRELOAD): "
                 "stopped, never a fractional task without its limits", reg);
        r->launch_end = "shim_not_loaded";
    } else if (lt->agent_stopped) { /* the controller requeues it (ctld/agents.c) */
        snprintf(why, AGENT_STOPPED_WHY_BYTES, "agent_stopped: its agent was stopped "
                 "(SIGTERM), taking the node out of service: stopped, to run elsewhere");
        r->launch_end = "agent_stopped";
    } else if (lt->cut_off) { /* the controller requeues it (ctld/agents.c) */
        if (lt->cut_off_limit_s > 0)
            snprintf(why, AGENT_STOPPED_WHY_BYTES, "controller_lost: no controller answered "
                     "its agent for %.1f s (limit %.1f s): stopped so that it never runs twice",
                     lt->cut_off_silent_s, lt->cut_off_limit_s);
        else
            snprintf(why, AGENT_STOPPED_WHY_BYTES, "controller_lost: stopped by its keeper, "
                     "its agent gone past the time by which it had to hear from a controller "
                     "again: so that it never runs twice");
        r->launch_end = "controller_lost";
    } else {
        snprintf(why, AGENT_STOPPED_WHY_BYTES, "disk_pressure: the node's state disk had %lld MiB "
                 "free, under its reserve of %lld MiB, and this task's files there (writable "
                 "layer, output) took %lld MiB, the most of any task: stopped", lt->disk_free_mib,
                 lt->disk_reserve_mib, lt->disk_layer_mib);
        r->launch_end = "disk_pressure";
    }
    r->state = TS_REPORT_FAILED;
    r->error = why;
}
