/*
 * agent_start.c - a desired task started: its environment, GPUs (MIG,
 * MPS, the sharing shim), NCCL's rails and partition, its container (binds,
 * CDI edits, user) and what an adopting agent needs, each a phase on one
 * task_start (agent_task.c receives, watches and ends tasks).
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_internal.h"
#include "agent/cdi.h"
#include "agent/netns.h"
#include "agent/tail.h"
#include "agent/taskfile.h"
#include "tessera/agent_proto.h"
#include "tessera/shim.h"
#include "agent/clock.h"

#define TASK_MOUNTS_MAX 16 /* a job spec's mounts (TS_SPEC_MAX_MOUNTS) */
#define NVIDIA_GPU_MAJOR 195u

/* TESSERA_AGENT_START_LOG (docs/tessera-agent.md; for tests and benchmarks
 * that must prove no task starts twice across controller failovers): every
 * task this agent starts appends one line, "node task_id pid start_ticks
 * unix_s controller" (the controller whose answer asked for the start), in
 * a single write(2) to a file opened O_APPEND, so several agents may share
 * the file and a second start of one task shows as a second line.
 * Adopted tasks are not starts and write nothing. A path longer than
 * START_LOG_PATH_MAX or a failed write is reported on stderr; the task runs. */
#define START_LOG_PATH_MAX 4095

/* The minor of /dev/nvidia<N> for the GPU of NVML index gpu (cdi.c). */
static unsigned gpu_minor(const ts_agent *a, int gpu)
{
    const ts_discovery *d = a->node->discovery;
    const char *bus = d && gpu >= 0 && gpu < d->ngpus ? d->gpus[gpu].pci_bus_id : NULL;
    return agent_gpu_minor(NULL, bus, (unsigned)gpu);
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
 * tasks as itself (agent_task_start notes it). NULL with why filled when the
 * task must not start. */
static const char *task_user(const ts_agent *a, const ts_desired_task *d, char *why,
                             size_t size)
{
    const char *user = d->user;
    bool uid = (d->present & TS_DT_BIT(TS_DT_UID)) && !d->uid_null;
    if (!a->caps.root)
        return user && *user ? user : NULL;
    if (!user || !*user || !uid) {
        snprintf(why, size, "no Unix identity: the job's credential maps no Unix user and uid, "
                 "and an agent running as root never runs a task as itself");
        return NULL;
    }
    struct passwd *pw = getpwnam(user);
    long long want = (long long)d->uid;
    if (!pw)
        snprintf(why, size, "user %s: no such user on node %s", user, a->cfg.node);
    else if ((long long)pw->pw_uid != want)
        snprintf(why, size, "user %s: has uid %lld on node %s, but the job is mapped to uid %lld",
                 user, (long long)pw->pw_uid, a->cfg.node, want);
    else if (pw->pw_uid == 0 && !d->allow_root)
        snprintf(why, size, "user %s: uid 0 (root), which tenant \"%s\" does not allow "
                 "(allow_root in tenants.yaml)", user, d->tenant ? d->tenant : "");
    else
        return user;
    return NULL;
}

/* A NULL-terminated copy of a decoded list's pointers (the strings stay
 * the document's). */
static const char **strv_of(const ts_strv *l)
{
    const char **v = calloc((size_t)l->n + 1, sizeof *v);
    for (int i = 0; v && i < l->n; i++)
        v[i] = l->v[i];
    return v;
}

static const char **strv(json_t *arr)
{
    size_t n = json_array_size(arr);
    const char **v = calloc(n + 1, sizeof *v);
    for (size_t i = 0; v && i < n; i++)
        v[i] = json_string_value(json_array_get(arr, i));
    return v;
}

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
    const ts_task_info *in = agent_task_info_get(t);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char line[64 + TS_TASK_ID_MAX + TS_CTL_URL_MAX + 96];
    int n = snprintf(line, sizeof line, "%s %s %ld %llu %.3f %s\n", a->cfg.node, in->task_id,
                     (long)in->pid, in->start_ticks,
                     (double)now.tv_sec + (double)now.tv_nsec / 1e9,
                     agent_ctls_url(&a->cfg.ctls));
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || n <= 0 || n >= (int)sizeof line || write(fd, line, (size_t)n) != n)
        fprintf(stderr, "tessera-agent: TESSERA_AGENT_START_LOG %s: %s\n", path,
                fd < 0 ? strerror(errno) : "short write");
    if (fd >= 0)
        close(fd);
}

/* What one task's start is made of, filled by the phases below in order;
 * why, once set, says why it does not start (each phase then does nothing
 * that could fail). */
typedef struct task_start {
    const ts_desired_task *d; /* the desired task, decoded (tessera/agent_proto.h) */
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
    ts_task_file files[2];        /* made in its own folder: its step file, its shim's mark */
    size_t nfiles;
    ts_bundle_mount binds[5 + TASK_MOUNTS_MAX + TS_AGENT_DATA_MAX];
    char mount_src[TASK_MOUNTS_MAX][900]; /* where a job mount's folder is pinned */
    json_t *cdi;                  /* the container's GPUs (docs/images.md) */
    char cuser[64];               /* who it is inside the image when its job says */
    char ns_path[AGENT_NET_NS_PATH_MAX];
    char *meta;
    int stdio_peer;               /* an interactive task's end of its stream, -1 none */
    ts_task_spec spec;
} task_start;

/* Where a file of the task's own folder will be (<task_dirs>/<id>/<name>,
 * launch.h): made there with the folder, before the folder is the task's
 * (ts_task_file), so no other task and no one else of its user put
 * anything in its place; dev and ino get its identity. False, with why,
 * when the path does not fit. */
static bool task_file_at(const ts_agent *a, task_start *S, const char *name, char *path,
                         size_t len, dev_t *dev, ino_t *ino)
{
    if (snprintf(path, len, "%s/%s/%s", a->task_dirs, S->id, name) >= (int)len) {
        snprintf(S->why, sizeof S->why, "task %s: its file %s: path too long", S->id, name);
        path[0] = '\0';
        return false;
    }
    if (dev != NULL) /* the note is the task's to make; the others the agent's */
        S->files[S->nfiles++] = (ts_task_file){name, dev, ino};
    return true;
}

/* The desired task's numbers: identity, MIG or share, tenant, time limit. */
static void start_fields(local_task *lt, const json_t *t, const ts_desired_task *d)
{
    int mig_profile = d->present & TS_DT_BIT(TS_DT_MIG_PROFILE) ? d->mig_profile : -1;
    int gpu_milli = d->present & TS_DT_BIT(TS_DT_GPU_MILLI) ? d->gpu_milli : 1000;
    lt->mig_profile = mig_profile;
    lt->mig_start = d->mig_start;
    lt->fractional = mig_profile < 0 && gpu_milli > 0 && gpu_milli < 1000;
    lt->gpu_milli = gpu_milli;
    lt->gpu_mem_mib = d->gpu_memory_mib;
    snprintf(lt->tenant, sizeof lt->tenant, "%s", d->tenant ? d->tenant : "");
    /* the time it has left, from the controller: the deadline on this
     * node's own clock, counted from the answer that asked for the start
     * (time_left_s: the agent's own note on the document, agent.c) */
    json_t *left = json_object_get(t, "time_left_s");
    if (json_is_number(left)) {
        double l = json_number_value(left);
        lt->deadline_unix = agent_wall_now() + (l > 0 ? l : 0);
        lt->time_limit_s = d->time_limit_s;
        lt->limit_grace_s = d->limit_grace_s;
        lt->limit_signal = d->limit_signal;
    }
}

static void env_add(task_start *S, const char *fmt, const char *v)
{
    snprintf(S->kv, sizeof S->kv, fmt, v);
    json_array_append_new(S->envj, json_string(S->kv));
}

/* The job's environment, then the task library's files, the step
 * credential, the data and the secrets (docs/agent-tasks.md). */
static void start_env(ts_agent *a, local_task *lt, task_start *S)
{
    const ts_desired_task *d = S->d;
    S->envj = json_array();
    for (int i = 0; S->envj && i < d->env.n; i++)
        json_array_append_new(S->envj, json_string(d->env.v[i]));
    const char *uname = d->user;
    snprintf(lt->user, sizeof lt->user, "%s", uname ? uname : "");
    S->pw = uname ? getpwnam(uname) : NULL; /* its stream's owner (agent_stdio_make) */
    if (task_file_at(a, S, AGENT_STEP_FILE_NAME, lt->step_file, sizeof lt->step_file,
                     &lt->step_dev, &lt->step_ino))
        env_add(S, "TESSERA_STEP_FILE=%s", lt->step_file);
    /* a batch script's srun reaches the controller with its job's step
     * credential (ctld/steps.h), through the controller this agent uses */
    const char *stok = d->step_token;
    if (stok) {
        env_add(S, "TESSERA_STEP_URL=%s", agent_ctls_url(&a->cfg.ctls));
        env_add(S, "TESSERA_STEP_TOKEN=%s", stok);
    }
    /* made by the task, if at all, in its folder made fresh for this run:
     * an old run's note never names this run's files */
    if (task_file_at(a, S, AGENT_OUT_NOTE_NAME, lt->out_note, sizeof lt->out_note, NULL, NULL))
        env_add(S, "TESSERA_OUTPUT_NOTE=%s", lt->out_note);
    if (d->present & TS_DT_BIT(TS_DT_NET)) {
        /* its namespace has lo and eth0 only: gloo and NCCL bootstrap there
         * (unless the job chose), whatever the node's hostname resolves to */
        json_array_insert_new(S->envj, 0, json_string("GLOO_SOCKET_IFNAME=eth0"));
        json_array_insert_new(S->envj, 0, json_string("NCCL_SOCKET_IFNAME=eth0"));
    }
    agent_data_env(lt, S->envj); /* where its read-only data are (docs/images.md) */
    agent_secrets_put(a, lt, d, S->envj, S->why, sizeof S->why); /* why: no start */
    S->env = strv(S->envj);
}

/* Its GPUs, and CUDA_VISIBLE_DEVICES naming the MIG device, not its GPU. */
static void start_gpus(ts_agent *a, local_task *lt, task_start *S)
{
    const ts_intv *gpus = &S->d->gpus;
    for (int k = 0; k < gpus->n && S->ngpu < 16; k++) {
        int64_t g = gpus->v[k];
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
    else if (agent_mig_uuid(a->node->nv, (unsigned)lt->gpu[0], lt->mig_profile,
                               lt->mig_start, lt->mig_uuid, sizeof lt->mig_uuid, &me) != 0)
        snprintf(S->why, sizeof S->why, "MIG instance (profile %d at slot %d) on GPU %d: %.400s",
                 lt->mig_profile, lt->mig_start, lt->gpu[0], me.msg);
    S->uuids[0] = lt->mig_uuid;
}

/* A fractional task on an MPS node: the GPU's daemon (started once), its
 * share of the SMs and its pinned memory. */
static void start_mps(ts_agent *a, local_task *lt, task_start *S)
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
        if (agent_mps_start(&mc, a->node->gpu_uuid[g], &a->mps[g], &me) != 0)
            snprintf(S->why, sizeof S->why, "MPS on GPU %d: %.400s", g, me.msg);
        else
            a->mps_on[g] = true;
    }
    if (!a->mps_on[g])
        return;
    S->mps_pipe = a->mps[g].pipe_dir;
    S->mps_log = a->mps[g].log_dir;
    S->mps_pct = (lt->gpu_milli + 9) / 10; /* its share of the SMs */
    int64_t mem = S->d->gpu_memory_mib;
    if (mem > 0) {
        snprintf(S->kv, sizeof S->kv, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%lldM",
                 (long long)mem);
        json_array_append_new(S->envj, json_string(S->kv));
        free(S->env);
        S->env = strv(S->envj);
    }
}

/* The task's sharing ledger, into S->shim_env[0]: a bare task's in its own
 * folder (its rank's, for a step of a rank running here, so that the rank and
 * its steps count against one quota), which no other user can write into. A
 * name in the node's /dev/shm, shared by every bare task, could be made first
 * by another tenant's task: one the victim's shim cannot open (its processes
 * then each count alone, together past the grant), or a ledger whose totals
 * that tenant writes. A container has a /dev/shm of its own: the name stays. */
static void ledger_env(ts_agent *a, const local_task *lt, task_start *S)
{
    char rank_id[64];
    snprintf(rank_id, sizeof rank_id, "j%lld-r%d", (long long)lt->job, lt->rank);
    const local_task *rank = lt->is_step ? agent_find(a, lt->job, lt->rank, -1) : NULL;
    const char *dir = rank && rank->t ? rank_id : S->id;
    int n = lt->image_ready ? snprintf(S->shim_env[0], sizeof S->shim_env[0],
                                       "TESSERA_CUDA_LEDGER=%s", agent_ledger_name(lt))
                            : snprintf(S->shim_env[0], sizeof S->shim_env[0],
                                       "TESSERA_CUDA_LEDGER=%s/%s/" AGENT_LEDGER_NAME,
                                       a->task_dirs, dir);
    if (n < 0 || (size_t)n >= sizeof S->shim_env[0])
        snprintf(S->why, sizeof S->why, "task %s: its sharing ledger: path too long", S->id);
}

/* The sharing shim (docs/sharing.md): the task's GPU memory and share of
 * the GPU, as the scheduler granted them, enforced for every process of
 * the task through one ledger per task. */
static void start_shim(ts_agent *a, local_task *lt, task_start *S)
{
    if (S->why[0] || !lt->fractional || !a->node->shim[0] || lt->ngpu != 1)
        return;
    int ne = 0;
    ledger_env(a, lt, S);
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
    /* the mark its shim writes once loaded, made with its folder; without
     * one the task could not be watched, so it does not start */
    if (task_file_at(a, S, AGENT_SHIM_MARK_NAME, lt->shim_mark, sizeof lt->shim_mark,
                     &lt->shim_mark_dev, &lt->shim_mark_ino)) {
        snprintf(S->shim_env[ne], sizeof S->shim_env[ne], TS_SHIM_ENV_LOADED "=%s",
                 lt->shim_mark);
        S->shim_envp[ne] = S->shim_env[ne];
    }
}

/* NCCL's adapters by the rail map (with dedicated NICs, the RDMA devices of
 * the task's own VFs), its traffic class and service level, and the
 * tenant's InfiniBand partition: its index in those adapters' tables
 * (docs/network.md). */
static void start_nccl(ts_agent *a, local_task *lt, task_start *S)
{
    const ts_desired_task *d = S->d;
    const char *root = a->node->sysfs_root[0] ? a->node->sysfs_root : "/sys";
    agent_nics_for_task(&a->node->nics, lt->gpu, lt->ngpu, S->hca, sizeof S->hca);
    if (d->net.nics_dedicated) { /* the devices it holds, not the adapters */
        char own[sizeof S->hca];
        agent_nics_for_task_dedicated(root, &a->node->nics, lt->gpu, lt->ngpu, own, sizeof own);
        if (own[0])
            memcpy(S->hca, own, sizeof own);
    }
    if (d->present & TS_DT_BIT(TS_DT_NCCL_TC))
        snprintf(S->tc, sizeof S->tc, "%d", d->nccl_tc);
    if (d->present & TS_DT_BIT(TS_DT_NCCL_SL))
        snprintf(S->sl, sizeof S->sl, "%d", d->nccl_sl);
    if (S->why[0] || !(d->present & TS_DT_BIT(TS_DT_IB_PKEY)) || !S->hca[0])
        return;
    int idx;
    ts_err pe;
    if (agent_nics_pkey_index_all(root, S->hca, (unsigned)d->ib_pkey, &idx, &pe) == 0)
        snprintf(S->pkey, sizeof S->pkey, "%d", idx);
    else
        snprintf(S->why, sizeof S->why, "%s", pe.msg);
}

/* What agent_task_start gets for a bare process; a container adds to it. */
static void start_spec(ts_agent *a, local_task *lt, task_start *S)
{
    const ts_desired_task *d = S->d;
    const char *workdir = d->workdir;
    S->spec = (ts_task_spec){
        .task_id = S->id,
        .argv = S->argv,
        .env = S->env,
        .workdir = workdir ? workdir : a->cfg.state_dir,
        .user = S->user,
        .log_dir = a->logs,
        .task_dirs = a->task_dirs,
        .task_files = S->files,
        .ntask_files = S->nfiles,
        .slurm_bin_dir = a->slurm_bin[0] ? a->slurm_bin : NULL,
        .gpu_uuids = S->uuids,
        .ngpu = S->ngpu,
        .world_size = d->world_size,
        .rank = d->present & TS_DT_BIT(TS_DT_TASK_RANK) ? d->task_rank : lt->rank,
        .local_rank = d->local_rank,
        .master_addr = d->master_addr,
        .master_port = d->master_port,
        .nccl_ib_hca = S->hca,
        .nccl_ib_tc = S->tc,
        .nccl_ib_sl = S->sl,
        .nccl_ib_pkey = S->pkey,
        .mps_pipe_dir = S->mps_pipe,
        .mps_log_dir = S->mps_log,
        .mps_thread_pct = S->mps_pct,
        .preload_shim = S->shim_envp[0] ? a->node->shim : NULL,
        .shim_env = S->shim_envp[0] ? S->shim_envp : NULL,
        .cpu_milli = d->cpu_milli,
        .memory_bytes = d->memory_mib * 1048576LL,
        .pids_max = 4096,
        /* its GPUs' nodes and no other GPU's (docs/agent-tasks.md "Isolation") */
        .gpu_devs = S->devs,
        .ngpu_devs = (size_t)lt->ngpu,
        .limit_devices = true,
        /* a cut-off agent must have its tasks gone before the controller
         * declares the node lost (agent_step): a quarter of that time */
        .term_grace_s = a->ctld_lost_s > 0 && a->ctld_lost_s / 4 < TS_TERM_GRACE_DEFAULT_S
                            ? a->ctld_lost_s / 4
                            : 0.0,
    };
    snprintf(lt->workdir, sizeof lt->workdir, "%s", workdir ? workdir : a->cfg.state_dir);
    if (!S->why[0])
        agent_stdio_make(lt, d, S->pw ? S->pw->pw_uid : (uid_t)-1, &S->stdio_peer, S->why,
                         sizeof S->why);
    if (S->stdio_peer >= 0) {
        S->spec.stdio_given = true;
        S->spec.stdio_fd = S->stdio_peer;
        S->spec.stdio_tty = lt->stdio_tty;
    }
}

/* In a container: its secrets at the path its environment names (its own
 * folder, with its step file, shim mark and output note, is bound by the
 * launcher: launch_container.c), the job's host folders (as its tenant may mount them,
 * checked at submission as text; here opened without following a link, and
 * pinned where the runtime binds it from) and data; the number of binds. */
static size_t container_binds(ts_agent *a, local_task *lt, task_start *S)
{
    const size_t cap = sizeof S->binds / sizeof S->binds[0];
    size_t nb = 0;
    snprintf(S->secrets_dir, sizeof S->secrets_dir, "%s/secrets/j%lld-r%d", a->cfg.state_dir,
             (long long)lt->job, lt->rank);
    struct stat sd;
    if (stat(S->secrets_dir, &sd) == 0 && S_ISDIR(sd.st_mode))
        S->binds[nb++] = (ts_bundle_mount){S->secrets_dir, S->secrets_dir, false};
    if (S->d->nmounts > 0) {
        agent_mount_unpin(a->cfg.state_dir, S->id);
        lt->mounts_pinned = true;
    }
    for (size_t mi = 0; mi < (size_t)S->d->nmounts; mi++) {
        const char *host = S->d->mounts[mi].host, *in = S->d->mounts[mi].path;
        if (nb == cap || mi >= AGENT_MOUNT_PINS_MAX)
            break;
        char field[32];
        snprintf(field, sizeof field, "mounts[%zu].host", mi);
        int fd = S->why[0] ? -1 : agent_mount_source_open(field, host, S->why, sizeof S->why);
        /* the runtime binds the folder checked, whatever the path holds later */
        if (fd >= 0 && agent_mount_pin(a->cfg.state_dir, S->id, (int)mi, fd, S->mount_src[mi],
                                       sizeof S->mount_src[mi], S->why, sizeof S->why))
            host = S->mount_src[mi];
        if (fd >= 0)
            close(fd);
        S->binds[nb++] = (ts_bundle_mount){host, in, S->d->mounts[mi].write};
    }
    return nb + agent_data_binds(lt, S->binds + nb, cap - nb);
}

/* Whether the task is a Slurm batch job's (`tessera sbatch` sets
 * SLURM_JOB_NAME in its env), whose PATH names the node's srun folder. */
static bool slurm_task(const ts_desired_task *d)
{
    for (int i = 0; i < d->env.n; i++)
        if (strncmp(d->env.v[i], "SLURM_JOB_NAME=", 15) == 0)
            return true;
    return false;
}

/* In a container, once its user is known: the job's checkpoint folder
 * (read-write, for that user) and a Slurm job's srun kit (read-only, where
 * the node's srun folder is); the number of binds put. */
static size_t container_extras(ts_agent *a, task_start *S, ts_bundle_mount *b, size_t room)
{
    size_t nb = 0;
    const char *ck = S->d->checkpoint_dir;
    if (!S->why[0] && ck && nb < room) {
        uid_t uid = S->pw ? S->pw->pw_uid : 0;
        gid_t gid = S->pw ? S->pw->pw_gid : 0;
        unsigned cu, cg;
        if (S->cuser[0] && sscanf(S->cuser, "%u:%u", &cu, &cg) == 2) {
            uid = (uid_t)cu;
            gid = (gid_t)cg;
        }
        if (agent_checkpoint_folder(ck, uid, gid, S->why, sizeof S->why))
            b[nb++] = (ts_bundle_mount){ck, ck, true};
    }
    if (!S->why[0] && a->slurm_kit[0] && slurm_task(S->d) && nb < room)
        b[nb++] = (ts_bundle_mount){a->slurm_kit, a->slurm_bin, false};
    return nb;
}

/* A bare task's checkpoint folder, made by the agent as a container's is
 * (agent_checkpoint_folder): the folders above it are open to no user, so
 * that none makes another's job folder first. Not made, the task still
 * starts (an admin's folders may let it make its own), the agent log says
 * why. */
static void start_checkpoint(ts_agent *a, local_task *lt, task_start *S)
{
    const char *ck = S->d->checkpoint_dir;
    char why[TS_ERR_MSG_MAX];
    if (S->why[0] || lt->image_ready || !ck || !a->caps.root || !S->pw)
        return;
    if (!agent_checkpoint_folder(ck, S->pw->pw_uid, S->pw->pw_gid, why, sizeof why))
        fprintf(stderr, "tessera-agent: task %s: %s\n", S->id, why);
}

/* A task in its image: the bundle, its binds, the shim bound in (an image
 * that cannot load it is refused: never a fractional task without its
 * limits, docs/images.md), its GPUs as CDI edits, its user inside. */
static void start_container(ts_agent *a, local_task *lt, task_start *S)
{
    if (!lt->image_ready)
        return;
    snprintf(S->bundle, sizeof S->bundle, "%s/%s", a->bundles, S->id);
    snprintf(lt->bundle, sizeof lt->bundle, "%s", S->bundle);
    S->spec.image = &lt->image;
    S->spec.bundle_dir = S->bundle;
    size_t nb = container_binds(a, lt, S);
    S->spec.mounts = S->binds;
    if (S->spec.preload_shim) {
        char gw[TS_ERR_MSG_MAX - 64];
        if (!S->why[0] && agent_image_glibc_check(lt->image.rootfs, gw, sizeof gw) != 0)
            snprintf(S->why, sizeof S->why, "shim_unloadable: %s", gw);
        if (nb < sizeof S->binds / sizeof S->binds[0])
            S->binds[nb++] = (ts_bundle_mount){a->node->shim, a->node->shim, false};
    }
    S->spec.nmounts = nb;
    if (!S->why[0])
        S->cdi = task_cdi_edits(a, lt, S->why, sizeof S->why);
    S->spec.cdi_edits = S->cdi;
    if (!S->why[0])
        agent_container_user(lt, S->d, S->cuser, sizeof S->cuser, S->why, sizeof S->why);
    S->spec.container_user = S->cuser[0] ? S->cuser : NULL;
    S->spec.container_write_mib = a->cfg.container_write_set
                                      ? a->cfg.container_write_mib
                                      : agent_container_write_default(
                                            a->cfg.state_dir, TS_AGENT_CONTAINER_WRITE_MIB);
    nb += container_extras(a, S, S->binds + nb, sizeof S->binds / sizeof S->binds[0] - nb);
    S->spec.nmounts = nb;
    /* inside the image; NULL: the image's own */
    S->spec.workdir = S->d->workdir;
    if (!S->argv || !S->argv[0])
        S->spec.argv = NULL; /* the image's own command */
    ts_err ue;
    if (!S->why[0] && agent_image_use(&a->images, lt->image.digest, S->id, &ue) != 0)
        snprintf(S->why, sizeof S->why, "%s", ue.msg);
}

/* What a restarted agent needs to adopt the task (agent_task_adopt), and its
 * network namespace on its tenant's overlay, when the cluster isolates. */
static void start_meta(ts_agent *a, local_task *lt, task_start *S)
{
    json_t *gl = json_array();
    for (int k = 0; k < lt->ngpu; k++)
        json_array_append_new(gl, json_integer(lt->gpu[k]));
    json_t *mj = json_pack("{s:I,s:i,s:o,s:s,s:s,s:s,s:i,s:i,s:b,s:f,s:f,s:f,s:i,s:s,s:s}",
                           "job", (json_int_t)lt->job, "rank", lt->rank, "gpus", gl,
                           "step_file", lt->step_file, "tenant", lt->tenant,
                           "mig_uuid", lt->mig_uuid, "mig_profile", lt->mig_profile,
                           "mig_start", lt->mig_start, "fractional", lt->fractional,
                           "deadline", lt->deadline_unix, "time_limit_s", lt->time_limit_s,
                           "limit_grace_s", lt->limit_grace_s, "limit_signal", lt->limit_signal,
                           "out_note", lt->out_note, "workdir", lt->workdir);
    if (mj)
        json_object_set_new(mj, "run", json_real(lt->run));
    if (mj && lt->is_step) /* adopted as the step's task, not the rank's */
        json_object_set_new(mj, "step", json_integer(lt->step));
    if (!S->why[0] && S->argv && S->argv[0])
        agent_net_begin(a, lt, S->id, S->d, S->ns_path, sizeof S->ns_path, S->why,
                        sizeof S->why);
    S->spec.netns_path = S->ns_path[0] ? S->ns_path : NULL;
    if (mj)
        json_object_set_new(mj, "net_vni", json_integer(lt->net_vni));
    if (mj && lt->image_ready) /* released when the task is forgotten */
        json_object_set_new(mj, "image_digest", json_string(lt->image.digest));
    agent_data_meta_put(lt, mj);
    if (mj && lt->shim_mark[0]) /* watched again, and removed, by an adopting agent */
        json_object_set_new(mj, "shim_mark", json_string(lt->shim_mark));
    S->meta = mj ? json_dumps(mj, JSON_COMPACT) : NULL;
    json_decref(mj);
    S->spec.meta = S->meta;
}

void agent_start_task_decoded(ts_agent *a, local_task *lt, const json_t *t,
                              const ts_desired_task *d)
{
    lt->job = d->job;
    lt->rank = d->rank;
    lt->is_step = d->present & TS_DT_BIT(TS_DT_STEP);
    lt->step = d->step;
    lt->run = d->run;
    if (!lt->image_ready && !lt->pulled && agent_image_wait(a, lt, t, d))
        return; /* started by agent_images_poll once its image is there */
    start_fields(lt, t, d);
    task_start *S = calloc(1, sizeof *S);
    if (!S) {
        snprintf(lt->start_error, sizeof lt->start_error, "out of memory");
        return;
    }
    S->d = d;
    S->stdio_peer = -1;
    if (lt->is_step)
        snprintf(S->id, sizeof S->id, "j%lld-r%d-s%d", (long long)lt->job, lt->rank, lt->step);
    else
        snprintf(S->id, sizeof S->id, "j%lld-r%d", (long long)lt->job, lt->rank);
    S->argv = strv_of(&d->command);
    start_env(a, lt, S);
    start_gpus(a, lt, S);
    start_mps(a, lt, S);
    start_shim(a, lt, S);
    S->user = S->why[0] ? NULL : task_user(a, d, S->why, sizeof S->why);
    start_nccl(a, lt, S);
    start_spec(a, lt, S);
    start_container(a, lt, S);
    start_checkpoint(a, lt, S);
    if (!S->why[0])
        agent_data_use(a, lt, S->id, S->why, sizeof S->why);
    start_meta(a, lt, S);
    /* bench/image-p2p's full mode: from here to the next line is the runtime's start */
    agent_image_trace("task %s bundle ready", S->id);
    ts_err err;
    if (S->why[0]) {
        snprintf(lt->start_error, sizeof lt->start_error, "%s", S->why);
    } else if (!lt->image_ready && (!S->argv || !S->argv[0])) {
        snprintf(lt->start_error, sizeof lt->start_error, "command: empty");
    } else if (agent_task_start(&a->caps, &S->spec, &lt->t, &err) != 0) {
        snprintf(lt->start_error, sizeof lt->start_error, "%s", err.msg);
        lt->t = NULL;
    } else {
        agent_image_trace("task %s runtime started", S->id);
        start_log(a, lt->t);
        double reg = a->node->shim_register_s > 0 ? a->node->shim_register_s
                                                  : TS_AGENT_SHIM_REGISTER_S;
        lt->shim_due = agent_mono_s() + reg;
    }
    if (S->stdio_peer >= 0)
        close(S->stdio_peer); /* the task holds it now */
    if (!lt->t)
        agent_stdio_close(lt);
    free(S->argv);
    free(S->env);
    free(S->meta);
    json_decref(S->envj);
    json_decref(S->cdi);
    free(S);
}

void agent_start_task_in(ts_agent *a, local_task *lt, json_t *t)
{
    ts_desired_task d;
    ts_err de;
    if (ts_desired_task_decode(t, "task", &d, &de) != 0) { /* reconcile checked it: memory */
        snprintf(lt->start_error, sizeof lt->start_error, "%.400s", de.msg);
        return;
    }
    agent_start_task_decoded(a, lt, t, &d);
    ts_desired_task_fini(&d);
}
