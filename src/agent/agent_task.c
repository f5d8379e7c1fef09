/*
 * agent_task.c - the node agent's side of one task: starting it from the
 * desired state (command, environment, GPUs or MIG device, NCCL rails and
 * QoS, MPS, the sharing shim, the record a restarted agent adopts it from),
 * adopting tasks an earlier agent left, the node's MIG layouts and MPS
 * daemons, and what is read back from a task (step times, output).
 * agent.c runs the protocol exchange around these.
 */
#define _DEFAULT_SOURCE /* getpwnam, mkdir, strdup */
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
#include "agent/cdi.h"
#include "agent/netns.h"
#include "agent/tail.h"
#include "agent/taskfile.h"
#include "tessera/shim.h"

#define TASK_MOUNTS_MAX 16 /* a job spec's mounts (TS_SPEC_MAX_MOUNTS) */

static const char *str_or(const json_t *v)
{
    return json_string_value(v) ? json_string_value(v) : "";
}

#define NVIDIA_GPU_MAJOR 195u
#define NVIDIA_PROC_GPUS "/proc/driver/nvidia/gpus"
#define PCI_DOMAIN_SHORT_CHARS 12 /* "0000:17:00.0", as the driver names its GPUs */

/* The minor of /dev/nvidia<N> for the GPU of NVML index gpu: the driver's
 * "Device Minor" for its PCI bus id, else (no driver: tests, fake NVML) the
 * index, which is what the driver assigns on a node that numbers its GPUs
 * in PCI order. */
static unsigned gpu_minor(const ts_agent *a, int gpu)
{
    const json_t *gpus = json_object_get(a->node->discovery, "gpus");
    const char *bus = json_string_value(json_object_get(json_array_get(gpus, (size_t)gpu),
                                                        "pci_bus_id"));
    size_t n = bus ? strlen(bus) : 0;
    if (n >= PCI_DOMAIN_SHORT_CHARS && n < 64) {
        char path[160], line[128];
        snprintf(path, sizeof path, NVIDIA_PROC_GPUS "/%s/information",
                 bus + n - PCI_DOMAIN_SHORT_CHARS);
        for (char *p = path + sizeof NVIDIA_PROC_GPUS; *p; p++)
            if (*p >= 'A' && *p <= 'F')
                *p = (char)(*p - 'A' + 'a');
        FILE *f = fopen(path, "re");
        unsigned minor;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "Device Minor: %u", &minor) == 1) {
                fclose(f);
                return minor;
            }
        if (f)
            fclose(f);
    }
    return (unsigned)gpu;
}

/* A container task's GPUs from the node's CDI spec: its MIG instance (the
 * spec's device whose CUDA_VISIBLE_DEVICES is the task's MIG UUID) or its
 * GPUs by index. A MIG instance the spec does not know (made after the
 * agent started) gets its parent's nodes without the parent's environment,
 * which would name the whole GPU. NULL without a spec. */
static json_t *task_cdi_edits(const ts_agent *a, const local_task *lt, char *why,
                              size_t size)
{
    const json_t *spec = a->node->cdi;
    if (!spec || lt->ngpu <= 0)
        return NULL;
    char names[16][24], want[128];
    const char *ptrs[16];
    int n = lt->ngpu < 16 ? lt->ngpu : 16;
    bool mig_unknown = false;
    for (int k = 0; k < n; k++) {
        snprintf(names[k], sizeof names[k], "%d", lt->gpu[k]);
        ptrs[k] = names[k];
    }
    if (lt->mig_uuid[0]) {
        snprintf(want, sizeof want, "CUDA_VISIBLE_DEVICES=%s", lt->mig_uuid);
        mig_unknown = true;
        size_t i, j;
        json_t *d, *e;
        json_array_foreach(json_object_get(spec, "devices"), i, d) {
            json_array_foreach(json_object_get(json_object_get(d, "containerEdits"), "env"), j,
                               e) {
                if (mig_unknown && strcmp(json_string_value(e), want) == 0) {
                    snprintf(names[0], sizeof names[0], "%s",
                             json_string_value(json_object_get(d, "name")));
                    mig_unknown = false;
                }
            }
        }
    }
    json_t *edits = NULL;
    ts_err err;
    if (agent_cdi_edits(spec, ptrs, (size_t)n, &edits, &err) != 0) {
        snprintf(why, size, "%s", err.msg);
        return NULL;
    }
    if (mig_unknown)
        json_object_del(edits, "env");
    return edits;
}

/* The Unix user a task runs as (docs/agent-tasks.md "User"): the job's
 * mapped user, which must exist on this node with exactly the mapped uid,
 * and uid 0 only when the job's tenant allows root. An agent that is root
 * never runs a task as itself instead; one that is not root can only run
 * tasks as itself (ts_task_start notes it). NULL with why filled when the
 * task must not start. */
static const char *task_user(const ts_agent *a, const json_t *t, char *why, size_t size)
{
    const char *user = json_string_value(json_object_get(t, "user"));
    const json_t *uid = json_object_get(t, "uid");
    if (!a->caps.root)
        return user && *user ? user : NULL;
    if (!user || !*user || !json_is_integer(uid)) {
        snprintf(why, size, "no Unix identity: the job's credential maps no Unix user and uid, "
                 "and an agent running as root never runs a task as itself");
        return NULL;
    }
    struct passwd *pw = getpwnam(user);
    long long want = (long long)json_integer_value(uid);
    if (!pw)
        snprintf(why, size, "user %s: no such user on node %s", user, a->cfg.node);
    else if ((long long)pw->pw_uid != want)
        snprintf(why, size, "user %s: has uid %lld on node %s, but the job is mapped to uid %lld",
                 user, (long long)pw->pw_uid, a->cfg.node, want);
    else if (pw->pw_uid == 0 && !json_is_true(json_object_get(t, "allow_root")))
        snprintf(why, size, "user %s: uid 0 (root), which tenant \"%s\" does not allow "
                 "(allow_root in tenants.yaml)", user, str_or(json_object_get(t, "tenant")));
    else
        return user;
    return NULL;
}

/* Adopts one task from its record: its keeper still runs it, or has left
 * its exit status. Under ts_agent_new, before any exchange. */
int ts_agent_adopt_one(const char *id, void *ctx)
{
    ts_agent *a = ctx;
    ts_task *t = NULL;
    ts_err e;
    if (ts_task_adopt(&a->caps, a->logs, id, &t, &e) != 0) {
        fprintf(stderr, "tessera-agent: task %s: cannot adopt (%s); forgotten\n", id, e.msg);
        ts_task_forget(a->logs, id, &e);
        return 0;
    }
    if (a->ntasks == TS_AGENT_MAX_TASKS) {
        ts_task_detach(t);
        return 1;
    }
    json_error_t je;
    json_t *m = ts_task_meta(t) ? json_loads(ts_task_meta(t), 0, &je) : NULL;
    if (!json_is_object(m)) {
        fprintf(stderr, "tessera-agent: task %s: its record has no job; stopped\n", id);
        json_decref(m);
        ts_task_free(t);
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
    }
    ts_agent_data_meta_get(lt, m); /* its data images: released when it goes */
    /* its shim mark, if still the file this agent made there (a regular
     * file in the steps folder): watched from now for a full period */
    const char *mark = json_string_value(json_object_get(m, "shim_mark"));
    size_t sl = strlen(a->steps);
    struct stat ms;
    if (mark && strncmp(mark, a->steps, sl) == 0 && mark[sl] == '/' &&
        !strchr(mark + sl + 1, '/') && lstat(mark, &ms) == 0 && S_ISREG(ms.st_mode) && ms.st_nlink == 1 &&
        strlen(mark) < sizeof lt->shim_mark) {
        snprintf(lt->shim_mark, sizeof lt->shim_mark, "%s", mark);
        lt->shim_mark_dev = ms.st_dev;
        lt->shim_mark_ino = ms.st_ino;
        lt->shim_due = ts_launch_now() + (a->node->shim_register_s > 0 ? a->node->shim_register_s
                                                                       : TS_AGENT_SHIM_REGISTER_S);
    }
    json_decref(m);
    ts_task_poll(t, ts_launch_now(), &lt->st, &e);
    lt->stop_requested = (lt->st.phase != TS_TASK_RUNNING && lt->st.phase != TS_TASK_EXITED) ||
                         lt->st.outcome != TS_STOP_NONE;
    if (lt->fractional && a->node->mps && lt->ngpu == 1 && !a->mps_on[lt->gpu[0]]) {
        /* its MPS daemon runs on too: take it back */
        char base[700];
        snprintf(base, sizeof base, "%s/mps", a->cfg.state_dir);
        ts_mps_config mc = {.binary = a->node->mps_binary[0] ? a->node->mps_binary : NULL,
                            .base_dir = base};
        int gi = lt->gpu[0];
        if (gi >= 0 && gi < 16 && ts_mps_start(&mc, a->node->gpu_uuid[gi], &a->mps[gi], &e) == 0)
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
double ts_agent_step_median(const char *path, uid_t owner)
{
    char *tail = NULL;
    long long size;
    ts_err e;
    if (ts_tail_read(path, TS_AGENT_STEP_TAIL_BYTES, owner, &tail, &size, &e) != 0)
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
 * note and the file are the task's: read as its user's files only. */
static void stream_path(const local_task *lt, int k, char *path, size_t len, bool *owned)
{
    const ts_task_info *in = ts_task_info_get(lt->t);
    snprintf(path, len, "%s", k ? in->stderr_path : in->stdout_path);
    *owned = false;
    char *note = NULL;
    long long size;
    ts_err e;
    if (!lt->out_note[0] ||
        ts_tail_read(lt->out_note, TS_AGENT_NOTE_BYTES, in->uid, &note, &size, &e) != 0)
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
        if (want[0] == '/')
            snprintf(path, len, "%s", want);
        else
            snprintf(path, len, "%s/%s", lt->workdir, want);
        *owned = true;
    }
    free(note);
}

/* The last max bytes of stream k (stream_path). */
static int stream_tail(const local_task *lt, int k, size_t max, char **text, long long *size,
                       ts_err *e)
{
    char path[2048];
    bool owned;
    stream_path(lt, k, path, sizeof path, &owned);
    (void)owned; /* the agent's own log files are the task's user's too */
    return ts_tail_read(path, max, ts_task_info_get(lt->t)->uid, text, size, e);
}

/* An ended task's last output, for its job's events (docs/agent-protocol.md). */
void ts_agent_add_output(const local_task *lt, json_t *o)
{
    json_t *out = json_object();
    static const char *const names[2] = {"stdout", "stderr"};
    for (int k = 0; k < 2; k++) {
        char *text = NULL;
        long long size;
        ts_err e;
        if (stream_tail(lt, k, TS_AGENT_OUTPUT_TAIL, &text, &size, &e) == 0 && text[0])
            json_object_set_new(out, names[k], json_string(text));
        free(text);
    }
    json_object_set_new(o, "output", out);
}

static const char **strv(json_t *arr)
{
    size_t n = json_array_size(arr);
    const char **v = calloc(n + 1, sizeof *v);
    for (size_t i = 0; v && i < n; i++)
        v[i] = json_string_value(json_array_get(arr, i));
    return v;
}

/* The shim's ledger for a task (a file in TS_SHIM_LEDGER_DIR). */
static const char *ledger_name(const local_task *lt)
{
    static char name[96];
    snprintf(name, sizeof name, "tessera-j%lld-r%d", (long long)lt->job, lt->rank);
    return name;
}

/* A forgotten task's shim ledger goes with it. */
void ts_agent_ledger_remove(const ts_agent *a, const local_task *lt)
{
    if (!a->node->shim[0] || !lt->fractional)
        return;
    char path[160];
    snprintf(path, sizeof path, "%s/%s", TS_SHIM_LEDGER_DIR, ledger_name(lt));
    /* the task's shim made it, as the task's user: only a regular file of
     * that user goes, never what another put under its name */
    if (lt->t)
        agent_taskfile_remove(path, 0, 0, ts_task_info_get(lt->t)->uid);
}

/* A forgotten task's step file goes with it, if still the agent's. */
void ts_agent_step_file_remove(const local_task *lt)
{
    if (lt->step_file[0] && lt->step_ino)
        agent_taskfile_remove(lt->step_file, lt->step_dev, lt->step_ino,
                              AGENT_TASKFILE_ANY_OWNER);
}

/* TESSERA_AGENT_START_LOG (docs/tessera-agent.md; for tests and benchmarks
 * that must prove no task starts twice across controller failovers): every
 * task this agent starts appends one line, "node task_id pid start_ticks
 * unix_s controller" (the controller whose answer asked for the start), in
 * a single write(2) to a file opened O_APPEND, so several agents may share
 * the file and a second start of one task shows as a second line.
 * Adopted tasks are not starts and write nothing. A path longer than
 * START_LOG_PATH_MAX or a failed write is reported on stderr; the task runs. */
#define START_LOG_PATH_MAX 4095
static void start_log(const ts_agent *a, const ts_task *t)
{
    const char *path = getenv("TESSERA_AGENT_START_LOG");
    if (path == NULL || path[0] == '\0')
        return;
    if (strlen(path) > START_LOG_PATH_MAX) {
        fprintf(stderr, "tessera-agent: TESSERA_AGENT_START_LOG: longer than %d bytes; "
                        "start not logged\n", START_LOG_PATH_MAX);
        return;
    }
    const ts_task_info *in = ts_task_info_get(t);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char line[64 + TS_TASK_ID_MAX + TS_CTL_URL_MAX + 96];
    int n = snprintf(line, sizeof line, "%s %s %ld %llu %.3f %s\n", a->cfg.node, in->task_id,
                     (long)in->pid, in->start_ticks,
                     (double)now.tv_sec + (double)now.tv_nsec / 1e9,
                     ts_ctls_url(&a->cfg.ctls));
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || n <= 0 || n >= (int)sizeof line || write(fd, line, (size_t)n) != n)
        fprintf(stderr, "tessera-agent: TESSERA_AGENT_START_LOG %s: %s\n", path,
                fd < 0 ? strerror(errno) : "short write");
    if (fd >= 0)
        close(fd);
}

/* The task's step file, made by the agent for the task's user under a name
 * no one can guess (the steps directory is everyone's, like /tmp): nothing
 * another user put there is ever read or removed as this task's. Failing,
 * the task may still make it itself; it is then never removed. */
static void step_file_make(const ts_agent *a, local_task *lt, const char *id,
                           const struct passwd *pw)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        r = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)lt;
    snprintf(lt->step_file, sizeof lt->step_file, "%s/%s.%016llx", a->steps, id,
             (unsigned long long)r);
    ts_err e;
    if (agent_taskfile_create(lt->step_file, pw ? pw->pw_uid : (uid_t)-1,
                              pw ? pw->pw_gid : (gid_t)-1, &lt->step_dev, &lt->step_ino,
                              &e) != 0)
        fprintf(stderr, "tessera-agent: task %s: step file: %s\n", id, e.msg);
}

/* A fractional task's shim mark: an empty file of the task's user under a
 * name no one can guess, in the steps directory (everyone's, and bound into
 * containers at the same path). 0, or -1 with why filled. */
static int shim_mark_make(const ts_agent *a, local_task *lt, const char *id,
                          const struct passwd *pw, char *why, size_t why_len)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        r = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)lt;
    snprintf(lt->shim_mark, sizeof lt->shim_mark, "%s/%s.shim.%016llx", a->steps, id,
             (unsigned long long)r);
    ts_err e;
    if (agent_taskfile_create(lt->shim_mark, pw ? pw->pw_uid : (uid_t)-1,
                              pw ? pw->pw_gid : (gid_t)-1, &lt->shim_mark_dev,
                              &lt->shim_mark_ino, &e) != 0) {
        snprintf(why, why_len, "the sharing shim's mark: %.400s", e.msg);
        lt->shim_mark[0] = '\0';
        return -1;
    }
    return 0;
}

void ts_agent_shim_mark_remove(const local_task *lt)
{
    if (lt->shim_mark[0] && lt->shim_mark_ino)
        agent_taskfile_remove(lt->shim_mark, lt->shim_mark_dev, lt->shim_mark_ino,
                              AGENT_TASKFILE_ANY_OWNER);
}

void ts_agent_shim_check(ts_agent *a, local_task *lt, double now)
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
    if (ts_task_preempt_begin(lt->t, SIGTERM, 0, now, &e) != 0)
        fprintf(stderr, "tessera-agent: job %lld rank %d: stop: %s\n", (long long)lt->job,
                lt->rank, e.msg);
    ts_task_poll(lt->t, now, &lt->st, &e);
}

void ts_agent_start_task(ts_agent *a, json_t *t)
{
    if (a->ntasks == TS_AGENT_MAX_TASKS)
        return;
    local_task *lt = &a->tasks[a->ntasks++];
    memset(lt, 0, sizeof *lt);
    lt->job = json_integer_value(json_object_get(t, "job"));
    lt->rank = (int)json_integer_value(json_object_get(t, "rank"));
    lt->run = json_number_value(json_object_get(t, "run"));
    lt->mig_profile = -1;
    if (ts_agent_prolog_begin(a, lt, t))
        return; /* started by ts_agent_hooks_poll once the prolog succeeded */
    ts_agent_start_task_in(a, lt, t);
}

/* What one task's start is made of, filled by the phases below in order;
 * why, once set, says why it does not start (each phase then does nothing
 * that could fail). */
typedef struct task_start {
    char id[64];
    char why[TS_ERR_MSG_MAX];
    char kv[760];
    const char **argv, **env;
    const char *user;             /* who runs it (task_user), NULL when why is set */
    json_t *envj;
    struct passwd *pw;            /* its user's entry, for the files the agent makes */
    const char *uuids[16];
    size_t ngpu;
    const char *mps_pipe, *mps_log;
    int mps_pct;
    char shim_env[4][760];
    const char *shim_envp[5];
    char hca[512], tc[16], sl[16], pkey[16];
    ts_devnum devs[16];
    char bundle[700], secrets_dir[800];
    ts_bundle_mount binds[3 + TASK_MOUNTS_MAX + TS_AGENT_DATA_MAX];
    json_t *cdi;                  /* the container's GPUs (docs/images.md) */
    char cuser[64];               /* who it is inside the image when its job says */
    char ns_path[AGENT_NET_NS_PATH_MAX];
    char *meta;
    int stdio_peer;               /* an interactive task's end of its stream, -1 none */
    ts_task_spec spec;
} task_start;

/* The desired task's numbers: identity, MIG or share, tenant, time limit. */
static void start_fields(local_task *lt, const json_t *t)
{
    int mig_profile = json_is_integer(json_object_get(t, "mig_profile"))
                          ? (int)json_integer_value(json_object_get(t, "mig_profile"))
                          : -1;
    int gpu_milli = json_is_integer(json_object_get(t, "gpu_milli"))
                        ? (int)json_integer_value(json_object_get(t, "gpu_milli"))
                        : 1000;
    lt->mig_profile = mig_profile;
    lt->mig_start = (int)json_integer_value(json_object_get(t, "mig_start"));
    lt->fractional = mig_profile < 0 && gpu_milli > 0 && gpu_milli < 1000;
    lt->gpu_milli = gpu_milli;
    lt->gpu_mem_mib = json_integer_value(json_object_get(t, "gpu_memory_mib"));
    const char *tenant = json_string_value(json_object_get(t, "tenant"));
    snprintf(lt->tenant, sizeof lt->tenant, "%s", tenant ? tenant : "");
    /* the time it has left, from the controller: the deadline on this
     * node's own clock, counted from the answer that asked for the start */
    json_t *left = json_object_get(t, "time_left_s");
    if (json_is_number(left)) {
        double l = json_number_value(left);
        lt->deadline_unix = ts_agent_wall_now() + (l > 0 ? l : 0);
        lt->time_limit_s = json_number_value(json_object_get(t, "time_limit_s"));
        lt->limit_grace_s = json_number_value(json_object_get(t, "limit_grace_s"));
        lt->limit_signal = (int)json_integer_value(json_object_get(t, "limit_signal"));
    }
}

static void env_add(task_start *S, const char *fmt, const char *v)
{
    snprintf(S->kv, sizeof S->kv, fmt, v);
    json_array_append_new(S->envj, json_string(S->kv));
}

/* The job's environment, then the task library's files, the step
 * credential, the data and the secrets (docs/agent-tasks.md). */
static void start_env(ts_agent *a, local_task *lt, const json_t *t, task_start *S)
{
    S->envj = json_deep_copy(json_object_get(t, "env"));
    if (!json_is_array(S->envj)) {
        json_decref(S->envj);
        S->envj = json_array();
    }
    const char *uname = json_string_value(json_object_get(t, "user"));
    snprintf(lt->user, sizeof lt->user, "%s", uname ? uname : "");
    S->pw = uname ? getpwnam(uname) : NULL; /* the step file's owner */
    step_file_make(a, lt, S->id, S->pw && a->caps.root ? S->pw : NULL);
    env_add(S, "TESSERA_STEP_FILE=%s", lt->step_file);
    /* a batch script's srun reaches the controller with its job's step
     * credential (ctld/steps.h), through the controller this agent uses */
    const char *stok = json_string_value(json_object_get(t, "step_token"));
    if (stok) {
        env_add(S, "TESSERA_STEP_URL=%s", ts_ctls_url(&a->cfg.ctls));
        env_add(S, "TESSERA_STEP_TOKEN=%s", stok);
    }
    snprintf(lt->out_note, sizeof lt->out_note, "%s/%s.output", a->steps, S->id);
    unlink(lt->out_note); /* an old run's note must not name this run's files */
    env_add(S, "TESSERA_OUTPUT_NOTE=%s", lt->out_note);
    if (json_is_object(json_object_get(t, "net"))) {
        /* its namespace has lo and eth0 only: gloo and NCCL bootstrap there
         * (unless the job chose), whatever the node's hostname resolves to */
        json_array_insert_new(S->envj, 0, json_string("GLOO_SOCKET_IFNAME=eth0"));
        json_array_insert_new(S->envj, 0, json_string("NCCL_SOCKET_IFNAME=eth0"));
    }
    ts_agent_data_env(lt, S->envj); /* where its read-only data are (docs/images.md) */
    ts_agent_secrets_put(a, lt, t, S->envj, S->why, sizeof S->why); /* why: no start */
    S->env = strv(S->envj);
}

/* Its GPUs, and CUDA_VISIBLE_DEVICES naming the MIG device, not its GPU. */
static void start_gpus(ts_agent *a, local_task *lt, const json_t *t, task_start *S)
{
    json_t *gpus = json_object_get(t, "gpus");
    for (size_t k = 0; k < json_array_size(gpus) && S->ngpu < 16; k++) {
        json_int_t g = json_integer_value(json_array_get(gpus, k));
        if (g >= 0 && g < a->node->ngpu) {
            lt->gpu[lt->ngpu++] = (int)g;
            S->uuids[S->ngpu++] = a->node->gpu_uuid[g];
        }
    }
    for (int k = 0; k < lt->ngpu; k++)
        S->devs[k] = (ts_devnum){NVIDIA_GPU_MAJOR, gpu_minor(a, lt->gpu[k])};
    if (S->why[0] || lt->mig_profile < 0)
        return;
    ts_err me;
    if (!a->node->nv || lt->ngpu != 1)
        snprintf(S->why, sizeof S->why, "mig_profile: no MIG GPU here (NVML %s)",
                 a->node->nv ? "present" : "missing");
    else if (ts_agent_mig_uuid(a->node->nv, (unsigned)lt->gpu[0], lt->mig_profile,
                               lt->mig_start, lt->mig_uuid, sizeof lt->mig_uuid, &me) != 0)
        snprintf(S->why, sizeof S->why, "MIG instance (profile %d at slot %d) on GPU %d: %.400s",
                 lt->mig_profile, lt->mig_start, lt->gpu[0], me.msg);
    S->uuids[0] = lt->mig_uuid;
}

/* A fractional task on an MPS node: the GPU's daemon (started once), its
 * share of the SMs and its pinned memory. */
static void start_mps(ts_agent *a, local_task *lt, const json_t *t, task_start *S)
{
    if (S->why[0] || !lt->fractional || !a->node->mps || lt->ngpu != 1)
        return;
    int g = lt->gpu[0];
    if (!a->mps_on[g]) {
        char base[700];
        snprintf(base, sizeof base, "%s/mps", a->cfg.state_dir);
        ts_mps_config mc = {.binary = a->node->mps_binary[0] ? a->node->mps_binary : NULL,
                            .base_dir = base};
        ts_err me;
        if (ts_mps_start(&mc, a->node->gpu_uuid[g], &a->mps[g], &me) != 0)
            snprintf(S->why, sizeof S->why, "MPS on GPU %d: %.400s", g, me.msg);
        else
            a->mps_on[g] = true;
    }
    if (!a->mps_on[g])
        return;
    S->mps_pipe = a->mps[g].pipe_dir;
    S->mps_log = a->mps[g].log_dir;
    S->mps_pct = (lt->gpu_milli + 9) / 10; /* its share of the SMs */
    json_int_t mem = json_integer_value(json_object_get(t, "gpu_memory_mib"));
    if (mem > 0) {
        snprintf(S->kv, sizeof S->kv, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%lldM",
                 (long long)mem);
        json_array_append_new(S->envj, json_string(S->kv));
        free(S->env);
        S->env = strv(S->envj);
    }
}

/* The sharing shim (docs/sharing.md): the task's GPU memory and share of
 * the GPU, as the scheduler granted them, enforced for every process of
 * the task through one ledger per task. */
static void start_shim(ts_agent *a, local_task *lt, task_start *S)
{
    if (S->why[0] || !lt->fractional || !a->node->shim[0] || lt->ngpu != 1)
        return;
    int ne = 0;
    snprintf(S->shim_env[ne], sizeof S->shim_env[ne], "TESSERA_CUDA_LEDGER=%s", ledger_name(lt));
    S->shim_envp[ne] = S->shim_env[ne];
    ne++;
    if (lt->gpu_mem_mib > 0) {
        snprintf(S->shim_env[ne], sizeof S->shim_env[ne], "TESSERA_CUDA_MEM_LIMIT=%lldM",
                 lt->gpu_mem_mib);
        S->shim_envp[ne] = S->shim_env[ne];
        ne++;
    }
    if (!a->node->mps) { /* MPS limits the SMs itself */
        snprintf(S->shim_env[ne], sizeof S->shim_env[ne], "TESSERA_CUDA_COMPUTE_PERCENT=%d",
                 (lt->gpu_milli + 9) / 10);
        S->shim_envp[ne] = S->shim_env[ne];
        ne++;
    }
    /* the mark its shim writes once loaded; without one the task could
     * not be watched, so it does not start */
    if (shim_mark_make(a, lt, S->id, S->pw && a->caps.root ? S->pw : NULL, S->why,
                       sizeof S->why) == 0) {
        snprintf(S->shim_env[ne], sizeof S->shim_env[ne], TS_SHIM_ENV_LOADED "=%s",
                 lt->shim_mark);
        S->shim_envp[ne] = S->shim_env[ne];
    }
}

/* NCCL's adapters by the rail map, its traffic class and service level, and
 * the tenant's InfiniBand partition: its index in the task's first
 * adapter's table (docs/network.md). */
static void start_nccl(ts_agent *a, local_task *lt, const json_t *t, task_start *S)
{
    ts_nics_for_task(&a->node->nics, lt->gpu, lt->ngpu, S->hca, sizeof S->hca);
    if (json_is_integer(json_object_get(t, "nccl_tc")))
        snprintf(S->tc, sizeof S->tc, "%d", (int)json_integer_value(json_object_get(t, "nccl_tc")));
    if (json_is_integer(json_object_get(t, "nccl_sl")))
        snprintf(S->sl, sizeof S->sl, "%d", (int)json_integer_value(json_object_get(t, "nccl_sl")));
    json_t *pk = json_object_get(t, "ib_pkey");
    if (S->why[0] || !json_is_integer(pk) || !S->hca[0])
        return;
    char first[TS_NICS_NAME_MAX];
    const char *from = S->hca[0] == '=' ? S->hca + 1 : S->hca;
    size_t fl = strcspn(from, ",");
    fl = fl < sizeof first ? fl : sizeof first - 1;
    memcpy(first, from, fl);
    first[fl] = '\0';
    int idx;
    ts_err pe;
    if (ts_nics_pkey_index(a->node->sysfs_root[0] ? a->node->sysfs_root : "/sys", first,
                           (unsigned)json_integer_value(pk), &idx, &pe) == 0)
        snprintf(S->pkey, sizeof S->pkey, "%d", idx);
    else
        snprintf(S->why, sizeof S->why, "%s", pe.msg);
}

/* What ts_task_start gets for a bare process; a container adds to it. */
static void start_spec(ts_agent *a, local_task *lt, const json_t *t, task_start *S)
{
    const char *workdir = json_string_value(json_object_get(t, "workdir"));
    S->spec = (ts_task_spec){
        .task_id = S->id,
        .argv = S->argv,
        .env = S->env,
        .workdir = workdir ? workdir : a->cfg.state_dir,
        .user = S->user,
        .log_dir = a->logs,
        .slurm_bin_dir = a->slurm_bin[0] ? a->slurm_bin : NULL,
        .gpu_uuids = S->uuids,
        .ngpu = S->ngpu,
        .world_size = (int)json_integer_value(json_object_get(t, "world_size")),
        .rank = json_is_integer(json_object_get(t, "task_rank"))
                    ? (int)json_integer_value(json_object_get(t, "task_rank"))
                    : lt->rank,
        .local_rank = (int)json_integer_value(json_object_get(t, "local_rank")),
        .master_addr = json_string_value(json_object_get(t, "master_addr")),
        .master_port = (int)json_integer_value(json_object_get(t, "master_port")),
        .nccl_ib_hca = S->hca,
        .nccl_ib_tc = S->tc,
        .nccl_ib_sl = S->sl,
        .nccl_ib_pkey = S->pkey,
        .mps_pipe_dir = S->mps_pipe,
        .mps_log_dir = S->mps_log,
        .mps_thread_pct = S->mps_pct,
        .preload_shim = S->shim_envp[0] ? a->node->shim : NULL,
        .shim_env = S->shim_envp[0] ? S->shim_envp : NULL,
        .cpu_milli = json_integer_value(json_object_get(t, "cpu_milli")),
        .memory_bytes = json_integer_value(json_object_get(t, "memory_mib")) * 1048576LL,
        .pids_max = 4096,
        /* its GPUs' nodes and no other GPU's (docs/agent-tasks.md "Isolation") */
        .gpu_devs = S->devs,
        .ngpu_devs = (size_t)lt->ngpu,
        .limit_devices = true,
        /* a cut-off agent must have its tasks gone before the controller
         * declares the node lost (ts_agent_step): a quarter of that time */
        .term_grace_s = a->ctld_lost_s > 0 && a->ctld_lost_s / 4 < TS_TERM_GRACE_DEFAULT_S
                            ? a->ctld_lost_s / 4
                            : 0.0,
    };
    snprintf(lt->workdir, sizeof lt->workdir, "%s", workdir ? workdir : a->cfg.state_dir);
    if (!S->why[0])
        ts_agent_stdio_make(lt, t, S->pw ? S->pw->pw_uid : (uid_t)-1, &S->stdio_peer, S->why,
                            sizeof S->why);
    if (S->stdio_peer >= 0) {
        S->spec.stdio_given = true;
        S->spec.stdio_fd = S->stdio_peer;
        S->spec.stdio_tty = lt->stdio_tty;
    }
}

/* In a container: the task library's files and its secrets at the paths its
 * environment names, the job's host folders (as its tenant may mount them,
 * checked at submission) and data; the number of binds. */
static size_t container_binds(ts_agent *a, local_task *lt, const json_t *t, task_start *S)
{
    const size_t cap = sizeof S->binds / sizeof S->binds[0];
    size_t nb = 0;
    S->binds[nb++] = (ts_bundle_mount){a->steps, a->steps, true};
    snprintf(S->secrets_dir, sizeof S->secrets_dir, "%s/secrets/j%lld-r%d", a->cfg.state_dir,
             (long long)lt->job, lt->rank);
    struct stat sd;
    if (stat(S->secrets_dir, &sd) == 0 && S_ISDIR(sd.st_mode))
        S->binds[nb++] = (ts_bundle_mount){S->secrets_dir, S->secrets_dir, false};
    size_t mi;
    json_t *mj;
    json_array_foreach(json_object_get(t, "mounts"), mi, mj) {
        const char *host = json_string_value(json_object_get(mj, "host"));
        const char *in = json_string_value(json_object_get(mj, "path"));
        if (nb == cap || !host || !in)
            break;
        struct stat hs;
        if (!S->why[0] && (stat(host, &hs) != 0 || !S_ISDIR(hs.st_mode)))
            snprintf(S->why, sizeof S->why,
                     "mounts[%zu].host: %.300s: no such folder on this node", mi, host);
        S->binds[nb++] = (ts_bundle_mount){host, in, json_is_true(json_object_get(mj, "write"))};
    }
    return nb + ts_agent_data_binds(lt, S->binds + nb, cap - nb);
}

/* A task in its image: the bundle, its binds, the shim bound in (an image
 * that cannot load it is refused: never a fractional task without its
 * limits, docs/images.md), its GPUs as CDI edits, its user inside. */
static void start_container(ts_agent *a, local_task *lt, const json_t *t, task_start *S)
{
    if (!lt->image_ready)
        return;
    snprintf(S->bundle, sizeof S->bundle, "%s/%s", a->bundles, S->id);
    S->spec.image = &lt->image;
    S->spec.bundle_dir = S->bundle;
    size_t nb = container_binds(a, lt, t, S);
    S->spec.mounts = S->binds;
    if (S->spec.preload_shim) {
        char gw[TS_ERR_MSG_MAX - 64];
        if (!S->why[0] && ts_image_glibc_check(lt->image.rootfs, gw, sizeof gw) != 0)
            snprintf(S->why, sizeof S->why, "shim_unloadable: %s", gw);
        if (nb < sizeof S->binds / sizeof S->binds[0])
            S->binds[nb++] = (ts_bundle_mount){a->node->shim, a->node->shim, false};
    }
    S->spec.nmounts = nb;
    if (!S->why[0])
        S->cdi = task_cdi_edits(a, lt, S->why, sizeof S->why);
    S->spec.cdi_edits = S->cdi;
    if (!S->why[0])
        ts_agent_container_user(lt, t, S->cuser, sizeof S->cuser, S->why, sizeof S->why);
    S->spec.container_user = S->cuser[0] ? S->cuser : NULL;
    /* inside the image; NULL: the image's own */
    S->spec.workdir = json_string_value(json_object_get(t, "workdir"));
    if (!S->argv || !S->argv[0])
        S->spec.argv = NULL; /* the image's own command */
    ts_err ue;
    if (!S->why[0] && ts_image_use(&a->images, lt->image.digest, S->id, &ue) != 0)
        snprintf(S->why, sizeof S->why, "%s", ue.msg);
}

/* What a restarted agent needs to adopt the task (ts_task_adopt), and its
 * network namespace on its tenant's overlay, when the cluster isolates. */
static void start_meta(ts_agent *a, local_task *lt, const json_t *t, task_start *S)
{
    json_t *gl = json_array();
    for (int k = 0; k < lt->ngpu; k++)
        json_array_append_new(gl, json_integer(lt->gpu[k]));
    json_t *mj = json_pack("{s:I,s:i,s:o,s:s,s:s,s:s,s:i,s:i,s:b,s:f,s:f,s:f,s:i,s:s,s:s,s:I,s:I}",
                           "job", (json_int_t)lt->job, "rank", lt->rank, "gpus", gl,
                           "step_file", lt->step_file, "tenant", lt->tenant,
                           "mig_uuid", lt->mig_uuid, "mig_profile", lt->mig_profile,
                           "mig_start", lt->mig_start, "fractional", lt->fractional,
                           "deadline", lt->deadline_unix, "time_limit_s", lt->time_limit_s,
                           "limit_grace_s", lt->limit_grace_s, "limit_signal", lt->limit_signal,
                           "out_note", lt->out_note, "workdir", lt->workdir,
                           "step_dev", (json_int_t)lt->step_dev,
                           "step_ino", (json_int_t)lt->step_ino);
    if (mj)
        json_object_set_new(mj, "run", json_real(lt->run));
    if (mj && lt->is_step) /* adopted as the step's task, not the rank's */
        json_object_set_new(mj, "step", json_integer(lt->step));
    if (!S->why[0] && S->argv && S->argv[0])
        ts_agent_net_begin(a, lt, S->id, t, S->ns_path, sizeof S->ns_path, S->why,
                           sizeof S->why);
    S->spec.netns_path = S->ns_path[0] ? S->ns_path : NULL;
    if (mj)
        json_object_set_new(mj, "net_vni", json_integer(lt->net_vni));
    if (mj && lt->image_ready) /* released when the task is forgotten */
        json_object_set_new(mj, "image_digest", json_string(lt->image.digest));
    ts_agent_data_meta_put(lt, mj);
    if (mj && lt->shim_mark[0]) /* watched again, and removed, by an adopting agent */
        json_object_set_new(mj, "shim_mark", json_string(lt->shim_mark));
    S->meta = mj ? json_dumps(mj, JSON_COMPACT) : NULL;
    json_decref(mj);
    S->spec.meta = S->meta;
}

void ts_agent_start_task_in(ts_agent *a, local_task *lt, json_t *t)
{
    lt->job = json_integer_value(json_object_get(t, "job"));
    lt->rank = (int)json_integer_value(json_object_get(t, "rank"));
    lt->is_step = json_is_integer(json_object_get(t, "step"));
    lt->step = (int)json_integer_value(json_object_get(t, "step"));
    lt->run = json_number_value(json_object_get(t, "run"));
    if (!lt->image_ready && !lt->pulled && ts_agent_image_wait(a, lt, t))
        return; /* started by ts_agent_images_poll once its image is there */
    start_fields(lt, t);
    task_start *S = calloc(1, sizeof *S);
    if (!S) {
        snprintf(lt->start_error, sizeof lt->start_error, "out of memory");
        return;
    }
    S->stdio_peer = -1;
    if (lt->is_step)
        snprintf(S->id, sizeof S->id, "j%lld-r%d-s%d", (long long)lt->job, lt->rank, lt->step);
    else
        snprintf(S->id, sizeof S->id, "j%lld-r%d", (long long)lt->job, lt->rank);
    S->argv = strv(json_object_get(t, "command"));
    start_env(a, lt, t, S);
    start_gpus(a, lt, t, S);
    start_mps(a, lt, t, S);
    start_shim(a, lt, S);
    S->user = S->why[0] ? NULL : task_user(a, t, S->why, sizeof S->why);
    start_nccl(a, lt, t, S);
    start_spec(a, lt, t, S);
    start_container(a, lt, t, S);
    if (!S->why[0])
        ts_agent_data_use(a, lt, S->id, S->why, sizeof S->why);
    start_meta(a, lt, t, S);
    ts_err err;
    if (S->why[0]) {
        snprintf(lt->start_error, sizeof lt->start_error, "%s", S->why);
    } else if (!lt->image_ready && (!S->argv || !S->argv[0])) {
        snprintf(lt->start_error, sizeof lt->start_error, "command: empty");
    } else if (ts_task_start(&a->caps, &S->spec, &lt->t, &err) != 0) {
        snprintf(lt->start_error, sizeof lt->start_error, "%s", err.msg);
        lt->t = NULL;
    } else {
        start_log(a, lt->t);
        double reg = a->node->shim_register_s > 0 ? a->node->shim_register_s
                                                  : TS_AGENT_SHIM_REGISTER_S;
        lt->shim_due = ts_launch_now() + reg;
    }
    if (S->stdio_peer >= 0)
        close(S->stdio_peer); /* the task holds it now */
    if (!lt->t)
        ts_agent_stdio_close(lt);
    free(S->argv);
    free(S->env);
    free(S->meta);
    json_decref(S->envj);
    json_decref(S->cdi);
    free(S);
}

/* Makes each MIG GPU hold the layout the controller asks for, never
 * touching an instance a local task still uses; the first error is kept
 * for the next report. */
void ts_agent_apply_mig(ts_agent *a, json_t *mig)
{
    a->mig_error[0] = '\0';
    size_t i;
    json_t *m;
    bool changed = false; /* instances made or destroyed: the CDI spec is stale */
    json_array_foreach(mig, i, m)
    {
        int g = (int)json_integer_value(json_object_get(m, "gpu"));
        if (!a->node->nv) {
            snprintf(a->mig_error, sizeof a->mig_error, "gpu %d: no NVML on this node", g);
            return;
        }
        ts_mig_layout want = {0};
        size_t k;
        json_t *in;
        json_array_foreach(json_object_get(m, "layout"), k, in)
        {
            if (want.n == TS_MIG_MAX_INSTANCES)
                break;
            want.inst[want.n].profile_id =
                (int8_t)json_integer_value(json_object_get(in, "profile"));
            want.inst[want.n++].start = (int8_t)json_integer_value(json_object_get(in, "start"));
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
        if (ts_agent_mig_apply(a->node->nv, (unsigned)g, &want, busy, nbusy, &rep, &e) != 0 &&
            !a->mig_error[0])
            snprintf(a->mig_error, sizeof a->mig_error, "%.250s", e.msg);
        changed |= rep.ncreated > 0 || rep.ndestroyed > 0;
    }
    /* a container task of a new instance gets the instance's own CDI device
     * (docs/images.md "GPUs in a container") */
    if (changed && a->node->cdi_refresh)
        a->node->cdi_refresh(a->node, a->node->cdi_refresh_ctx);
}

/* Whether answers (an array) already holds the answer to request id. */
static bool answered(const json_t *answers, json_int_t id)
{
    size_t i;
    json_t *q;
    json_array_foreach(answers, i, q)
    {
        if (json_integer_value(json_object_get(q, "id")) == id)
            return true;
    }
    return false;
}

/* Reads the output the controller asks for (tessera logs); the answers go
 * with the next sync. */
void ts_agent_answer_logs(ts_agent *a, json_t *reqs)
{
    size_t i;
    json_t *q;
    json_array_foreach(reqs, i, q)
    {
        if (!a->log_answers)
            a->log_answers = json_array();
        json_int_t id = json_integer_value(json_object_get(q, "id"));
        if (answered(a->log_answers, id))
            continue; /* listed again before its answer went: answered once */
        local_task *lt = ts_agent_find(a, json_integer_value(json_object_get(q, "job")),
                                       (int)json_integer_value(json_object_get(q, "rank")), -1);
        const char *stream = json_string_value(json_object_get(q, "stream"));
        json_int_t tail = json_integer_value(json_object_get(q, "tail"));
        if (tail <= 0)
            tail = 65536;
        bool cut = tail > TS_AGENT_LOG_ANSWER_MAX_BYTES;
        if (cut)
            tail = TS_AGENT_LOG_ANSWER_MAX_BYTES;
        if (json_array_size(a->log_answers) >= TS_AGENT_LOG_REQUESTS_MAX) {
            json_array_append_new(a->log_answers,
                                  json_pack("{s:I,s:s}", "id", id, "error",
                                            "too many output requests at once for this node's "
                                            "agent; ask again"));
            continue;
        }
        if (!lt || !lt->t) {
            json_array_append_new(a->log_answers, json_pack("{s:I,s:s}", "id", id, "error",
                                                            "no such task on this node"));
            continue;
        }
        char *text = NULL;
        long long size = 0;
        ts_err e;
        if (stream_tail(lt, stream && strcmp(stream, "stderr") == 0, (size_t)tail, &text, &size,
                        &e) != 0)
            json_array_append_new(a->log_answers,
                                  json_pack("{s:I,s:s}", "id", id, "error", e.msg));
        else {
            json_t *ans = json_pack("{s:I,s:s,s:I}", "id", id, "data", text, "size",
                                    (json_int_t)size);
            if (cut && size > tail)
                json_object_set_new(ans, "note",
                                    json_sprintf("cut to its last %lld bytes: an answer "
                                                 "carries at most %d bytes of output",
                                                 (long long)tail,
                                                 TS_AGENT_LOG_ANSWER_MAX_BYTES));
            json_array_append_new(a->log_answers, ans);
        }
        free(text);
    }
}

/* An MPS daemon whose GPU no running fractional task uses any more stops. */
void ts_agent_mps_tidy(ts_agent *a)
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
        if (ts_mps_stop(&a->mps[g], &e) != 0)
            fprintf(stderr, "tessera-agent: MPS on GPU %d: %s\n", g, e.msg);
        a->mps_on[g] = false;
    }
}

/* The tasks, for /metrics (its tenant and job labels). */
void ts_agent_tell_metrics(ts_agent *a)
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
        m->pgid = (int)ts_task_info_get(lt->t)->pid;
        for (int k = 0; k < lt->ngpu && k < TS_METRICS_MAX_GPUS; k++)
            m->gpu[m->ngpu++] = lt->gpu[k];
        snprintf(m->mig_uuid, sizeof m->mig_uuid, "%s", lt->mig_uuid);
    }
    ts_err e;
    ts_agent_metrics_set_tasks(a->node->metrics, mt, n, &e);
    free(mt);
}
