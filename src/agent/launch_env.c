/*
 * launch_env.c - the environment a task starts with.
 *
 * The job's own env comes first; what the agent computed for this node then
 * replaces any variable of the same name, because those values are how the
 * node keeps tenants apart (CUDA_VISIBLE_DEVICES, NCCL QoS classes, the MPS
 * pipe, the sharing shim) and a job must not be able to choose them. HOME,
 * USER, LOGNAME and PATH are filled in only when the job did not set them.
 * The list is built in the agent before fork, so the child only execs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch_env.h"
#include "tessera/sbatch_array.h"

#define PATH_DEFAULT "/usr/local/bin:/usr/bin:/bin"

void agent_envv_free(ts_envv *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i]);
    free(e->v);
    e->v = NULL;
    e->n = e->cap = 0;
}

static size_t name_len(const char *entry)
{
    const char *eq = strchr(entry, '=');
    return eq ? (size_t)(eq - entry) : strlen(entry);
}

static ssize_t find(const ts_envv *e, const char *name, size_t nl)
{
    for (size_t i = 0; i < e->n; i++)
        if (name_len(e->v[i]) == nl && strncmp(e->v[i], name, nl) == 0)
            return (ssize_t)i;
    return -1;
}

const char *agent_envv_get(const ts_envv *e, const char *name)
{
    ssize_t i = find(e, name, strlen(name));
    return i < 0 ? NULL : e->v[i] + strlen(name) + 1;
}

/* Takes ownership of entry ("NAME=value"). */
static int put(ts_envv *e, char *entry, int replace)
{
    if (entry == NULL)
        return -1;
    ssize_t i = find(e, entry, name_len(entry));
    if (i >= 0) {
        if (replace) {
            free(e->v[i]);
            e->v[i] = entry;
        } else {
            free(entry);
        }
        return 0;
    }
    if (e->n + 2 > e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 32;
        char **v = realloc(e->v, cap * sizeof *v);
        if (v == NULL) {
            free(entry);
            return -1;
        }
        e->v = v;
        e->cap = cap;
    }
    e->v[e->n++] = entry;
    e->v[e->n] = NULL;
    return 0;
}

static char *join(const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    char *s = malloc(nl + vl + 2);
    if (s != NULL) {
        memcpy(s, name, nl);
        s[nl] = '=';
        memcpy(s + nl + 1, value, vl + 1);
    }
    return s;
}

int agent_envv_set(ts_envv *e, const char *name, const char *value, int replace)
{
    return put(e, join(name, value), replace);
}

static int set_int(ts_envv *e, const char *name, long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    return agent_envv_set(e, name, buf, 1);
}

static int set_nonempty(ts_envv *e, const char *name, const char *v)
{
    return v != NULL && v[0] != '\0' ? agent_envv_set(e, name, v, 1) : 0;
}

/*
 * Slurm's per-task variables, for a job submitted as a batch script
 * (`tessera sbatch`, which always sets SLURM_JOB_NAME in the job's env; other
 * jobs get none, since frameworks take SLURM_NTASKS as "running under
 * Slurm"). Built from what the agent knows: the rank, the controller's
 * TESSERA_JOB_ID, and - when the controller sends them - TESSERA_NODELIST,
 * TESSERA_NNODES, TESSERA_ARRAY_JOB_ID and TESSERA_ARRAY_INDEX (the element's
 * 0-based number, turned into its Slurm index through the script's
 * TESSERA_SLURM_ARRAY list). docs/agent-tasks.md lists them.
 */
static int slurm_vars(ts_envv *e, const ts_task_spec *s, const struct ts_env_user *u)
{
    if (agent_envv_get(e, "SLURM_JOB_NAME") == NULL)
        return 0;
    int rc = 0;
    int ntasks = s->world_size > 0 ? s->world_size : 1;
    const char *job = agent_envv_get(e, "TESSERA_JOB_ID");
    if (job != NULL)
        rc |= agent_envv_set(e, "SLURM_JOB_ID", job, 1);
    rc |= set_int(e, "SLURM_PROCID", s->world_size > 0 ? s->rank : 0);
    rc |= set_int(e, "SLURM_LOCALID", s->world_size > 0 ? s->local_rank : 0);
    rc |= set_int(e, "SLURM_NTASKS", ntasks);
    rc |= set_int(e, "SLURM_NPROCS", ntasks);
    const char *nodes = agent_envv_get(e, "TESSERA_NODELIST");
    const char *nn = agent_envv_get(e, "TESSERA_NNODES");
    if (nodes == NULL && ntasks == 1)
        nodes = s->master_addr; /* one task: rank 0's node is this one */
    if (nn == NULL && ntasks == 1)
        nn = "1";
    if (nodes != NULL && nodes[0] != '\0') {
        rc |= agent_envv_set(e, "SLURM_JOB_NODELIST", nodes, 1);
        rc |= agent_envv_set(e, "SLURM_NODELIST", nodes, 1);
    }
    if (s->slurm_bin_dir != NULL && s->slurm_bin_dir[0] != '\0') {
        /* the step launcher first (slurm_step.c), then the job's own PATH */
        const char *path = agent_envv_get(e, "PATH");
        size_t n = strlen(s->slurm_bin_dir) + (path ? strlen(path) : 0) + 2;
        char *p = malloc(n);
        if (p == NULL)
            return -1;
        snprintf(p, n, "%s%s%s", s->slurm_bin_dir, path && *path ? ":" : "", path ? path : "");
        rc |= agent_envv_set(e, "PATH", p, 1);
        free(p);
    }
    if (nn != NULL) {
        rc |= agent_envv_set(e, "SLURM_NNODES", nn, 1);
        rc |= agent_envv_set(e, "SLURM_JOB_NUM_NODES", nn, 1);
        long nodes_n = strtol(nn, NULL, 10);
        if (nodes_n > 0 && ntasks % nodes_n == 0) { /* Slurm's "4(x2)": 4 on each of 2 */
            char tpn[48];
            if (nodes_n == 1)
                snprintf(tpn, sizeof tpn, "%d", ntasks);
            else
                snprintf(tpn, sizeof tpn, "%ld(x%ld)", ntasks / nodes_n, nodes_n);
            rc |= agent_envv_set(e, "SLURM_TASKS_PER_NODE", tpn, 1);
        }
    }
    if (u->name && u->name[0])
        rc |= agent_envv_set(e, "SLURM_JOB_USER", u->name, 1);
    rc |= set_int(e, "SLURM_GPUS_ON_NODE", (long)s->ngpu);
    const char *restarts = agent_envv_get(e, "TESSERA_RESTARTS");
    if (restarts != NULL)
        rc |= agent_envv_set(e, "SLURM_RESTART_COUNT", restarts, 1);
    const char *aj = agent_envv_get(e, "TESSERA_ARRAY_JOB_ID");
    const char *ai = agent_envv_get(e, "TESSERA_ARRAY_INDEX");
    if (aj != NULL && ai != NULL) {
        char *end;
        long k = strtol(ai, &end, 10);
        const char *list = agent_envv_get(e, "TESSERA_SLURM_ARRAY");
        long idx = list != NULL ? ts_sbatch_array_nth(list, k) : k;
        if (*ai != '\0' && *end == '\0' && idx >= 0) {
            rc |= agent_envv_set(e, "SLURM_ARRAY_JOB_ID", aj, 1);
            rc |= set_int(e, "SLURM_ARRAY_TASK_ID", idx);
        }
    }
    return rc;
}

int agent_envv_build(ts_envv *e, const ts_task_spec *s, const struct ts_env_user *u,
                  const char *ack_path)
{
    int rc = 0;
    for (const char *const *p = s->env; p != NULL && *p != NULL; p++)
        rc |= put(e, strdup(*p), 1);
    rc |= agent_envv_set(e, "PATH", PATH_DEFAULT, 0);
    rc |= agent_envv_set(e, "HOME", u->home, 0);
    rc |= agent_envv_set(e, "USER", u->name, 0);
    rc |= agent_envv_set(e, "LOGNAME", u->name, 0);

    /* no GPUs: an empty list, so CUDA sees none rather than all of them */
    size_t len = 1;
    for (size_t i = 0; i < s->ngpu; i++)
        len += strlen(s->gpu_uuids[i]) + 1;
    char *cvd = malloc(len);
    if (cvd == NULL)
        return -1;
    cvd[0] = '\0';
    for (size_t i = 0; i < s->ngpu; i++) {
        if (i > 0)
            strcat(cvd, ",");
        strcat(cvd, s->gpu_uuids[i]);
    }
    rc |= agent_envv_set(e, "CUDA_VISIBLE_DEVICES", cvd, 1);
    free(cvd);

    if (s->world_size > 0) {
        rc |= set_int(e, "RANK", s->rank);
        rc |= set_int(e, "WORLD_SIZE", s->world_size);
        rc |= set_int(e, "LOCAL_RANK", s->local_rank);
        rc |= set_nonempty(e, "MASTER_ADDR", s->master_addr);
        if (s->master_port > 0)
            rc |= set_int(e, "MASTER_PORT", s->master_port);
    }
    rc |= set_nonempty(e, "NCCL_IB_HCA", s->nccl_ib_hca);
    rc |= set_nonempty(e, "NCCL_IB_TC", s->nccl_ib_tc);
    rc |= set_nonempty(e, "NCCL_IB_SL", s->nccl_ib_sl);
    rc |= set_nonempty(e, "NCCL_IB_PKEY", s->nccl_ib_pkey);
    rc |= set_nonempty(e, "CUDA_MPS_PIPE_DIRECTORY", s->mps_pipe_dir);
    rc |= set_nonempty(e, "CUDA_MPS_LOG_DIRECTORY", s->mps_log_dir);
    if (s->mps_thread_pct > 0)
        rc |= set_int(e, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", s->mps_thread_pct);

    if (s->preload_shim != NULL && s->preload_shim[0] != '\0') {
        /* the shim first, so the job's own preloads cannot shadow it */
        const char *old = agent_envv_get(e, "LD_PRELOAD");
        char *pre = malloc(strlen(s->preload_shim) + (old ? strlen(old) : 0) + 2);
        if (pre == NULL)
            return -1;
        strcpy(pre, s->preload_shim);
        if (old != NULL && old[0] != '\0') {
            strcat(pre, ":");
            strcat(pre, old);
        }
        rc |= agent_envv_set(e, "LD_PRELOAD", pre, 1);
        free(pre);
        for (const char *const *p = s->shim_env; p != NULL && *p != NULL; p++)
            rc |= put(e, strdup(*p), 1);
    }
    rc |= slurm_vars(e, s, u);
    rc |= agent_envv_set(e, "TESSERA_TASK_ID", s->task_id, 1);
    rc |= agent_envv_set(e, "TESSERA_CHECKPOINT_DONE", ack_path, 1);
    return rc == 0 ? 0 : -1;
}
