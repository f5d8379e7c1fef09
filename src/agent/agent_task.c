/*
 * agent_task.c - the node agent's side of one task: starting it from the
 * desired state (command, environment, GPUs or MIG device, NCCL rails and
 * QoS, MPS, the sharing shim, the record a restarted agent adopts it from),
 * adopting tasks an earlier agent left, the node's MIG layouts and MPS
 * daemons, and what is read back from a task (step times, output).
 * agent.c runs the protocol exchange around these.
 */
#define _DEFAULT_SOURCE /* getpwnam, mkdir, strdup */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_internal.h"
#include "agent/bundle_path.h"
#include "agent/cdi.h"
#include "agent/netns.h"
#include "agent/tail.h"
#include "agent/taskfile.h"
#include "tessera/shim.h"
#include "agent/clock.h"

static const char *str_or(const json_t *v)
{
    return json_string_value(v) ? json_string_value(v) : "";
}


/* Whether mark is where an agent makes task id's shim mark: in its own
 * folder, or (older agents) a name of one component in the steps folder. */
static bool shim_mark_where(const ts_agent *a, const char *id, const char *mark)
{
    char own[sizeof a->task_dirs + 128];
    snprintf(own, sizeof own, "%s/%s/" AGENT_SHIM_MARK_NAME, a->task_dirs, id);
    size_t sl = strlen(a->steps);
    return strcmp(mark, own) == 0 || (strncmp(mark, a->steps, sl) == 0 && mark[sl] == '/' &&
                                      !strchr(mark + sl + 1, '/'));
}

/* Adopts one task from its record: its keeper still runs it, or has left
 * its exit status. Under agent_new, before any exchange. */
int agent_adopt_one(const char *id, void *ctx)
{
    ts_agent *a = ctx;
    ts_task *t = NULL;
    ts_err e;
    if (agent_task_adopt(&a->caps, a->logs, id, &t, &e) != 0) {
        fprintf(stderr, "tessera-agent: task %s: cannot adopt (%s); forgotten\n", id, e.msg);
        agent_task_record_forget(a->logs, id, &e);
        return 0;
    }
    if (a->ntasks == TS_AGENT_MAX_TASKS) {
        agent_task_detach(t);
        return 1;
    }
    json_error_t je;
    json_t *m = agent_task_meta(t) ? json_loads(agent_task_meta(t), 0, &je) : NULL;
    if (!json_is_object(m)) {
        fprintf(stderr, "tessera-agent: task %s: its record has no job; stopped\n", id);
        json_decref(m);
        agent_task_free(t);
        return 0;
    }
    local_task *lt = &a->tasks[a->ntasks++];
    memset(lt, 0, sizeof *lt);
    lt->t = t;
    lt->job = json_integer_value(json_object_get(m, "job"));
    lt->rank = (int)json_integer_value(json_object_get(m, "rank"));
    lt->is_step = json_is_integer(json_object_get(m, "step"));
    lt->step = (int)json_integer_value(json_object_get(m, "step"));
    size_t k;
    json_t *g;
    json_array_foreach(json_object_get(m, "gpus"), k, g)
    {
        if (lt->ngpu < 16)
            lt->gpu[lt->ngpu++] = (int)json_integer_value(g);
    }
    snprintf(lt->step_file, sizeof lt->step_file, "%s",
             str_or(json_object_get(m, "step_file")));
    snprintf(lt->out_note, sizeof lt->out_note, "%s", str_or(json_object_get(m, "out_note")));
    snprintf(lt->workdir, sizeof lt->workdir, "%s", str_or(json_object_get(m, "workdir")));
    snprintf(lt->tenant, sizeof lt->tenant, "%s",
             str_or(json_object_get(m, "tenant")));
    lt->step_dev = (dev_t)json_integer_value(json_object_get(m, "step_dev"));
    lt->step_ino = (ino_t)json_integer_value(json_object_get(m, "step_ino"));
    snprintf(lt->mig_uuid, sizeof lt->mig_uuid, "%s",
             str_or(json_object_get(m, "mig_uuid")));
    lt->mig_profile = (int)json_integer_value(json_object_get(m, "mig_profile"));
    lt->mig_start = (int)json_integer_value(json_object_get(m, "mig_start"));
    lt->fractional = json_is_true(json_object_get(m, "fractional"));
    lt->deadline_unix = json_number_value(json_object_get(m, "deadline"));
    lt->time_limit_s = json_number_value(json_object_get(m, "time_limit_s"));
    lt->limit_grace_s = json_number_value(json_object_get(m, "limit_grace_s"));
    lt->limit_signal = (int)json_integer_value(json_object_get(m, "limit_signal"));
    lt->run = json_number_value(json_object_get(m, "run"));
    lt->net_vni = (unsigned)json_integer_value(json_object_get(m, "net_vni"));
    const char *img = json_string_value(json_object_get(m, "image_digest"));
    if (img && ts_image_digest_ok(img)) { /* still its image's user, its bundle in place */
        snprintf(lt->image.digest, sizeof lt->image.digest, "%s", img);
        lt->image_ready = true;
        snprintf(lt->bundle, sizeof lt->bundle, "%s/%s", a->bundles, id);
    }
    agent_data_meta_get(lt, m); /* its data images: released when it goes */
    /* its shim mark, if still a file where the agent makes it (its own
     * folder; an older agent's steps folder): watched from now for a full
     * period */
    const char *mark = json_string_value(json_object_get(m, "shim_mark"));
    struct stat ms;
    if (mark && shim_mark_where(a, id, mark) && lstat(mark, &ms) == 0 &&
        S_ISREG(ms.st_mode) && ms.st_nlink == 1 && strlen(mark) < sizeof lt->shim_mark) {
        snprintf(lt->shim_mark, sizeof lt->shim_mark, "%s", mark);
        lt->shim_mark_dev = ms.st_dev;
        lt->shim_mark_ino = ms.st_ino;
        lt->shim_due = agent_mono_s() + (a->node->shim_register_s > 0 ? a->node->shim_register_s
                                                                       : TS_AGENT_SHIM_REGISTER_S);
    }
    json_decref(m);
    agent_task_poll(t, agent_mono_s(), &lt->st, &e);
    lt->stop_requested = (lt->st.phase != TS_TASK_RUNNING && lt->st.phase != TS_TASK_EXITED) ||
                         lt->st.outcome != TS_STOP_NONE;
    if (lt->fractional && a->node->mps && lt->ngpu == 1 && !a->mps_on[lt->gpu[0]]) {
        /* its MPS daemon runs on too: take it back */
        char base[700];
        snprintf(base, sizeof base, "%s/mps", a->cfg.state_dir);
        ts_mps_config mc = {.binary = a->node->mps_binary[0] ? a->node->mps_binary : NULL,
                            .base_dir = base};
        int gi = lt->gpu[0];
        if (gi >= 0 && gi < 16 && agent_mps_start(&mc, a->node->gpu_uuid[gi], &a->mps[gi], &e) == 0)
            a->mps_on[gi] = true;
    }
    fprintf(stderr, "tessera-agent: adopted task %s (job %lld rank %d, %s)\n", id,
            (long long)lt->job, lt->rank,
            lt->st.phase == TS_TASK_EXITED ? (lt->st.lost ? "lost" : "ended") : "running");
    return 0;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The median of the last TS_AGENT_STEP_SAMPLES step times the task wrote to
 * its step file (one number of seconds per line); -1 when none, or when
 * what the task left there is not its own regular file (taskfile.h). */
double agent_step_median(const char *path, uid_t owner)
{
    char *tail = NULL;
    long long size;
    ts_err e;
    if (agent_tail_read(path, TS_AGENT_STEP_TAIL_BYTES, owner, &tail, &size, &e) != 0)
        return -1.0;
    double v[TS_AGENT_STEP_SAMPLES];
    int k = 0;
    /* newest last: walk the complete lines backwards */
    char *end = strrchr(tail, '\n');
    while (end && k < TS_AGENT_STEP_SAMPLES) {
        *end = '\0';
        char *line = strrchr(tail, '\n');
        line = line ? line + 1 : tail;
        char *stop;
        double x = strtod(line, &stop);
        if (stop != line && x > 0 && x < 1e6)
            v[k++] = x;
        end = line > tail ? line - 1 : NULL;
    }
    free(tail);
    if (k == 0)
        return -1.0;
    qsort(v, (size_t)k, sizeof *v, cmp_double);
    return v[k / 2];
}

/* Where stream k (0 stdout, 1 stderr) of the task went, into path: a file
 * its output note names (a task that redirected it, as sbatch --output
 * does: TESSERA_OUTPUT_NOTE) and *owned, or else the agent's own log. The
 * note and the file are the task's: read as its user's files only. A
 * container task's names are the container's: root (room rlen) gets where
 * on this node the name is seen from (its bind's source, or its root), and
 * path the name below it; root is "" for a bare task's or the agent's log. */
static void stream_path(const local_task *lt, int k, char *root, size_t rlen, char *path,
                        size_t len, bool *owned)
{
    const ts_task_info *in = agent_task_info_get(lt->t);
    snprintf(path, len, "%s", k ? in->stderr_path : in->stdout_path);
    root[0] = '\0';
    *owned = false;
    char *note = NULL;
    long long size;
    ts_err e;
    if (!lt->out_note[0] ||
        agent_tail_read(lt->out_note, TS_AGENT_NOTE_BYTES, in->run_uid, &note, &size, &e) != 0)
        return;
    char *save = NULL, *line[2] = {NULL, NULL};
    line[0] = strtok_r(note, "\n", &save);
    line[1] = line[0] ? strtok_r(NULL, "\n", &save) : NULL;
    if (note[0] == '\n') { /* an empty first line: stdout stayed */
        line[1] = line[0];
        line[0] = NULL;
    }
    const char *want = line[k];
    /* stderr into stdout's file: reported once, as stdout */
    if (want && want[0] && !(k == 1 && line[0] && strcmp(line[0], want) == 0)) {
        if (lt->bundle[0]) { /* never the node's file of that name */
            *owned = agent_bundle_path(lt->bundle, want, root, rlen, path, len, &e) == 0;
            if (!*owned) { /* in no place the node can read: the agent's log */
                snprintf(path, len, "%s", k ? in->stderr_path : in->stdout_path);
                root[0] = '\0';
            }
        } else {
            if (want[0] == '/')
                snprintf(path, len, "%s", want);
            else
                snprintf(path, len, "%s/%s", lt->workdir, want);
            *owned = true;
        }
    }
    free(note);
}

/* At most max bytes of stream k (stream_path) from byte offset on, or its
 * last ones where offset < 0 (agent_tail_read_at). */
static int stream_read(const local_task *lt, int k, long long offset, size_t max, char **text,
                       long long *size, long long *from, ts_err *e)
{
    char root[1024], path[2048];
    bool owned;
    stream_path(lt, k, root, sizeof root, path, sizeof path, &owned);
    /* the agent's own log files are the task's user's; a file its note
     * names, whoever its processes run as */
    const ts_task_info *in = agent_task_info_get(lt->t);
    return agent_tail_read_at(root[0] ? root : NULL, path, offset, max,
                              owned ? in->run_uid : in->uid, text, size, from, e);
}

/* An ended task's last output, for its job's events (docs/agent-protocol.md). */
void agent_task_output(const local_task *lt, char *text[2])
{
    for (int k = 0; k < 2; k++) {
        long long size, from;
        ts_err e;
        text[k] = NULL;
        if (stream_read(lt, k, -1, TS_AGENT_OUTPUT_TAIL, &text[k], &size, &from, &e) != 0 ||
            (text[k] && !text[k][0])) {
            free(text[k]);
            text[k] = NULL;
        }
    }
}

/* The shim's ledger for a task (a file in TS_SHIM_LEDGER_DIR). */
const char *agent_ledger_name(const local_task *lt)
{
    static char name[96];
    snprintf(name, sizeof name, "tessera-j%lld-r%d", (long long)lt->job, lt->rank);
    return name;
}

/* A forgotten task's shim ledger goes with it. */
void agent_ledger_remove(const ts_agent *a, const local_task *lt)
{
    if (!a->node->shim[0] || !lt->fractional)
        return;
    char path[160];
    snprintf(path, sizeof path, "%s/%s", TS_SHIM_LEDGER_DIR, agent_ledger_name(lt));
    /* the task's shim made it, as the task's user: only a regular file of
     * that user goes, never what another put under its name */
    if (lt->t)
        agent_taskfile_remove(path, 0, 0, agent_task_info_get(lt->t)->run_uid);
}

/* A forgotten task's step file goes with it, if still the agent's. */
void agent_step_file_remove(const local_task *lt)
{
    if (lt->step_file[0] && lt->step_ino)
        agent_taskfile_remove(lt->step_file, lt->step_dev, lt->step_ino,
                              AGENT_TASKFILE_ANY_OWNER);
}

void agent_shim_mark_remove(const local_task *lt)
{
    if (lt->shim_mark[0] && lt->shim_mark_ino)
        agent_taskfile_remove(lt->shim_mark, lt->shim_mark_dev, lt->shim_mark_ino,
                              AGENT_TASKFILE_ANY_OWNER);
}

/* One of the agent's own names in the steps folder: a task id (j<job>-r<rank>,
 * -s<step> for a step's task) then ".<16 hex>" (a step file), ".shim.<16 hex>"
 * (a shim mark) or ".output" (the output note). */
static bool agent_step_name(const char *n)
{
    const char *p = n;
    if (*p++ != 'j' || !(*p >= '0' && *p <= '9'))
        return false;
    while (*p >= '0' && *p <= '9')
        p++;
    if (strncmp(p, "-r", 2) != 0 || !(p[2] >= '0' && p[2] <= '9'))
        return false;
    for (p += 2; *p >= '0' && *p <= '9'; p++)
        ;
    if (strncmp(p, "-s", 2) == 0 && p[2] >= '0' && p[2] <= '9')
        for (p += 2; *p >= '0' && *p <= '9'; p++)
            ;
    if (strcmp(p, ".output") == 0)
        return true;
    if (strncmp(p, ".shim", 5) == 0)
        p += 5;
    if (*p++ != '.' || strlen(p) != 16)
        return false;
    return strspn(p, "0123456789abcdef") == 16;
}

static bool held_by_a_task(const ts_agent *a, const char *path)
{
    for (int i = 0; i < a->ntasks; i++) {
        const local_task *lt = &a->tasks[i];
        if (strcmp(lt->step_file, path) == 0 || strcmp(lt->shim_mark, path) == 0 ||
            strcmp(lt->out_note, path) == 0)
            return true;
    }
    return false;
}

#define AGENT_STEPS_SWEEP_MAX 65536 /* names of the steps folder looked at per start */

void agent_steps_sweep(const ts_agent *a)
{
    /* An older agent (which kept tasks' files in this shared folder) killed
     * between making a task's files and its task's record, or whose record
     * could not be adopted, left files no task owns: the task never ran, or
     * was forgotten, and the controller starts it anew with new ones. Only
     * the agent's own names, only regular files. */
    DIR *d = opendir(a->steps);
    if (!d)
        return;
    struct dirent *de;
    int removed = 0, seen = 0;
    /* bounded: the folder is open to every task (sticky), so a task may
     * fill it; names past the bound are left for the next start */
    while (seen++ < AGENT_STEPS_SWEEP_MAX && (de = readdir(d)) != NULL) {
        char path[sizeof a->steps + 300];
        struct stat st;
        if (!agent_step_name(de->d_name) || strlen(de->d_name) > 256)
            continue;
        snprintf(path, sizeof path, "%s/%s", a->steps, de->d_name);
        if (held_by_a_task(a, path) || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        removed += unlinkat(dirfd(d), de->d_name, 0) == 0;
    }
    closedir(d);
    if (removed)
        fprintf(stderr, "tessera-agent: %d file(s) of tasks no record holds removed from %s\n",
                removed, a->steps);
    if (rmdir(a->steps) == 0) /* no task's files are made there any more */
        fprintf(stderr, "tessera-agent: %s (an older agent's) removed\n", a->steps);
}

void agent_shim_check(ts_agent *a, local_task *lt, double now)
{
    if (!lt->t || !lt->shim_mark[0] || lt->shim_seen || lt->shim_missing ||
        lt->st.phase == TS_TASK_EXITED)
        return;
    ts_err e;
    int fd = agent_taskfile_open(lt->shim_mark, O_RDONLY, AGENT_TASKFILE_ANY_OWNER, &e);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0 && sb.st_dev == lt->shim_mark_dev &&
        sb.st_ino == lt->shim_mark_ino && sb.st_size > 0)
        lt->shim_seen = true;
    if (fd >= 0)
        close(fd);
    if (lt->shim_seen || now < lt->shim_due)
        return;
    lt->shim_missing = true;
    double limit = a->node->shim_register_s > 0 ? a->node->shim_register_s
                                                : TS_AGENT_SHIM_REGISTER_S;
    fprintf(stderr, "tessera-agent: job %lld rank %d: the sharing shim did not register within "
                    "%g s: stopped (shim_not_loaded)\n", (long long)lt->job, lt->rank, limit);
    /* SIGTERM with no grace: the SIGKILL to its group and cgroup follows at once */
    if (agent_task_preempt_begin(lt->t, SIGTERM, 0, now, &e) != 0)
        fprintf(stderr, "tessera-agent: job %lld rank %d: stop: %s\n", (long long)lt->job,
                lt->rank, e.msg);
    agent_task_poll(lt->t, now, &lt->st, &e);
}

void agent_start_task(ts_agent *a, json_t *t, const ts_desired_task *d)
{
    if (a->ntasks == TS_AGENT_MAX_TASKS)
        return;
    local_task *lt = &a->tasks[a->ntasks++];
    memset(lt, 0, sizeof *lt);
    lt->job = d->job;
    lt->rank = d->rank;
    lt->is_step = d->present & TS_DT_BIT(TS_DT_STEP); /* a step runs no prolog */
    lt->step = d->step;
    lt->run = d->run;
    lt->mig_profile = -1;
    agent_image_trace("task j%lld-r%d learned", (long long)lt->job, lt->rank);
    if (agent_prolog_begin(a, lt, t, d))
        return; /* started by agent_hooks_poll once the prolog succeeded */
    agent_start_task_decoded(a, lt, t, d);
}

/* Makes each MIG GPU hold the layout the controller asks for, never
 * touching an instance a local task still uses; the first error is kept
 * for the next report. */
void agent_apply_mig(ts_agent *a, const ts_desired *d)
{
    a->mig_error[0] = '\0';
    bool changed = false; /* instances made or destroyed: the CDI spec is stale */
    for (int i = 0; i < d->nmig; i++) {
        const ts_desired_mig *m = &d->mig[i];
        int g = m->gpu;
        if (!a->node->nv) {
            snprintf(a->mig_error, sizeof a->mig_error, "gpu %d: no NVML on this node", g);
            return;
        }
        ts_mig_layout want = {0};
        for (int k = 0; k < m->nlayout && want.n < TS_MIG_MAX_INSTANCES; k++) {
            want.inst[want.n].profile_id = (int8_t)m->layout[k].profile;
            want.inst[want.n++].start = (int8_t)m->layout[k].start;
        }
        ts_agent_mig_busy busy[TS_AGENT_MAX_TASKS];
        int nbusy = 0;
        for (int x = 0; x < a->ntasks; x++) {
            const local_task *lt = &a->tasks[x];
            if (lt->mig_profile >= 0 && lt->ngpu == 1 && lt->gpu[0] == g && lt->t &&
                lt->st.phase != TS_TASK_EXITED)
                busy[nbusy++] = (ts_agent_mig_busy){.uuid = lt->mig_uuid[0] ? lt->mig_uuid : NULL,
                                                    .profile_id = lt->mig_profile,
                                                    .start = lt->mig_start};
        }
        static ts_agent_mig_report rep;
        ts_err e;
        memset(&rep, 0, sizeof rep);
        if (agent_mig_apply(a->node->nv, (unsigned)g, &want, busy, nbusy, &rep, &e) != 0 &&
            !a->mig_error[0])
            snprintf(a->mig_error, sizeof a->mig_error, "%.250s", e.msg);
        changed |= rep.ncreated > 0 || rep.ndestroyed > 0;
    }
    /* a container task of a new instance gets the instance's own CDI device
     * (docs/images.md "GPUs in a container") */
    if (changed && a->node->cdi_refresh)
        a->node->cdi_refresh(a->node, a->node->cdi_refresh_ctx);
}

/* The answer to one output request, kept for the next sync: the stream's
 * tail or the piece from the offset asked for, or why not. Out of memory:
 * none (the reader's wait ends). */
static void log_answer(ts_agent *a, const ts_desired_log *q)
{
    ts_sync_log ans = {.id = q->id};
    local_task *lt = agent_find(a, q->job, q->rank, -1);
    long long tail = q->tail > 0 ? q->tail : 65536;
    bool cut = tail > TS_AGENT_LOG_ANSWER_MAX_BYTES;
    if (cut)
        tail = TS_AGENT_LOG_ANSWER_MAX_BYTES;
    char *text = NULL, note[160];
    long long size = 0, from = 0;
    ts_err e;
    if (a->log_answers.n >= TS_AGENT_LOG_REQUESTS_MAX)
        ans.error = "too many output requests at once for this node's agent; ask again";
    else if (!lt || !lt->t)
        ans.error = "no such task on this node";
    else if (stream_read(lt, q->is_stderr, q->has_offset ? q->offset : -1, (size_t)tail, &text,
                         &size, &from, &e) != 0)
        ans.error = e.msg;
    else {
        ans.data = text;
        ans.data_len = strlen(text);
        ans.has_size = true;
        ans.size = size;
        ans.has_offset = true;
        ans.offset = from;
        snprintf(note, sizeof note, "cut to its last %lld bytes: an answer carries at most %d "
                 "bytes of output", tail, TS_AGENT_LOG_ANSWER_MAX_BYTES);
        ans.note = cut && size > tail && !q->has_offset ? note : NULL;
    }
    /* a piece from an offset keeps its start when a sync must cut it */
    if (agent_answers_add(&a->log_answers, &ans) == 0)
        a->log_answers.own[a->log_answers.n - 1].keep_start = q->has_offset;
    free(text);
}

/* Reads the output the controller asks for (tessera logs); the answers go
 * with the next sync. */
void agent_answer_logs(ts_agent *a, const ts_desired *d)
{
    for (int i = 0; i < d->nlogs; i++) {
        if (agent_answers_has(&a->log_answers, d->logs[i].id))
            continue; /* listed again before its answer went: answered once */
        log_answer(a, &d->logs[i]);
    }
}

/* An MPS daemon whose GPU no running fractional task uses any more stops. */
void agent_mps_tidy(ts_agent *a)
{
    for (int g = 0; g < 16; g++) {
        if (!a->mps_on[g])
            continue;
        bool used = false;
        for (int x = 0; x < a->ntasks && !used; x++) {
            const local_task *lt = &a->tasks[x];
            used = lt->fractional && lt->ngpu == 1 && lt->gpu[0] == g && lt->t &&
                   lt->st.phase != TS_TASK_EXITED;
        }
        if (used)
            continue;
        ts_err e;
        if (agent_mps_stop(&a->mps[g], &e) != 0)
            fprintf(stderr, "tessera-agent: MPS on GPU %d: %s\n", g, e.msg);
        a->mps_on[g] = false;
    }
}

/* The tasks, for /metrics (its tenant and job labels). */
void agent_tell_metrics(ts_agent *a)
{
    if (!a->node->metrics)
        return;
    ts_metrics_task *mt = calloc((size_t)a->ntasks + 1, sizeof *mt);
    if (!mt)
        return;
    size_t n = 0;
    for (int i = 0; i < a->ntasks; i++) {
        const local_task *lt = &a->tasks[i];
        if (!lt->t || lt->st.phase == TS_TASK_EXITED)
            continue;
        ts_metrics_task *m = &mt[n++];
        m->job = lt->job;
        m->rank = lt->rank;
        snprintf(m->tenant, sizeof m->tenant, "%s", lt->tenant);
        m->pgid = (int)agent_task_info_get(lt->t)->pid;
        for (int k = 0; k < lt->ngpu && k < TS_METRICS_MAX_GPUS; k++)
            m->gpu[m->ngpu++] = lt->gpu[k];
        snprintf(m->mig_uuid, sizeof m->mig_uuid, "%s", lt->mig_uuid);
    }
    ts_err e;
    agent_metrics_set_tasks(a->node->metrics, mt, n, &e);
    free(mt);
}
