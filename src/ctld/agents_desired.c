/*
 * agents_desired.c - what should run on a node, as the controller answers its
 * agent's sync (docs/agent-protocol.md): every rank of every running job
 * placed there, with its command, environment (Slurm's and the array's
 * variables included), limits, devices, network and the tenant's NCCL QoS;
 * the job steps' tasks; the images to prefetch and the network peers.
 *
 * Apart from agents.c, which runs the protocol (register, sync, reports,
 * health, expiry), because this is one pure function of the controller's
 * state: it reads under c->mu and changes nothing, so it can be read and
 * tested without the exchange around it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/job_end.h"
#include "ctld/job_fsm.h"
#include "ctld/steps.h"

#define MASTER_PORT_BASE 29500
#define MASTER_PORT_SPAN 2000
/* A prefetch takes this share of the node's link: half, as the replay
 * models it, so that the traffic of the jobs running there keeps the rest */
#define PREFETCH_LINK_SHARE_PCT 50

/* ---- tenant policies -------------------------------------------------------------- */

/* The tenant's NCCL QoS (its own, an ancestor's, else "default"); NULL: none. */
static const ctld_qos *tenant_qos(const ctld *c, const char *tenant)
{
    const char *names[CTLD_MAX_QOS];
    for (int i = 0; i < c->cfg.nqos; i++)
        names[i] = c->cfg.qos[i].tenant;
    int k = ctld_tenant_match(c, tenant, names, c->cfg.nqos);
    if (k < 0)
        k = ctld_tenant_match(c, "default", names, c->cfg.nqos);
    return k >= 0 ? &c->cfg.qos[k] : NULL;
}

/* ---- what should run on a node ----------------------------------------------- */

/* The Unix identity the task runs as (docs/agent-tasks.md "User"): the
 * job's mapped user and uid, and whether its tenant lets uid 0 run. */
static void task_identity(const ctld *c, const cjob *j, json_t *t)
{
    int k = ts_tenant_find(c->tenants, j->row.tenant);
    bool root_ok = k >= 0 && c->tenants->t[k].identity.allow_root;
    json_object_set_new(t, "uid", j->row.run_user[0] ? json_integer(j->row.run_uid) : json_null());
    json_object_set_new(t, "allow_root", json_boolean(root_ok));
    /* who a container task may be inside its image (its job's `user`) */
    if (k >= 0 && c->tenants->t[k].identity.has_uid_range)
        json_object_set_new(t, "uid_range",
                            json_pack("[I,I]", (json_int_t)c->tenants->t[k].identity.uid_min,
                                      (json_int_t)c->tenants->t[k].identity.uid_max));
}

static json_t *task_json(const ctld *c, const cjob *j, int rank)
{
    const ts_alloc *a = &j->allocs[rank];
    const ts_job_spec *sp = j->spec;
    json_t *gpus = json_array();
    for (int k = 0; k < a->ngpu; k++)
        json_array_append_new(gpus, json_integer(a->gpu[k]));
    json_t *argv = json_array();
    for (int i = 0; i < sp->argc; i++)
        json_array_append_new(argv, json_string(sp->argv[i]));
    json_t *env = json_array();
    for (int i = 0; i < sp->nenv; i++)
        json_array_append_new(env, json_string(sp->env[i]));
    int local = 0;
    for (int r = 0; r < rank; r++)
        local += j->allocs[r].node == a->node;
    bool stop = j->row.state == TS_JOB_STOPPING;
    json_t *o = json_pack(
        "{s:I,s:i,s:s,s:s,s:o,s:i,s:I,s:I,s:i,s:i,s:o,s:o,s:o,s:s,s:i,s:i,s:s,s:s,s:i,s:f,s:f}",
        "job", (json_int_t)j->row.id, "rank", rank, "name", j->row.name, "action",
        stop ? "stop" : "run", "gpus", gpus, "gpu_milli", a->gpu_milli, "cpu_milli",
        (json_int_t)a->cpu_milli, "memory_mib", (json_int_t)a->mem_mib, "mig_profile",
        a->mig_profile, "mig_start", a->mig_start, "command", argv, "env", env, "workdir",
        sp->workdir ? json_string(sp->workdir) : json_null(), "user", j->row.run_user,
        "world_size", j->ntasks, "local_rank", local, "master_addr",
        c->cluster->nodes[j->allocs[0].node].name, "tenant", j->row.tenant, "master_port",
        MASTER_PORT_BASE + (int)(j->row.id % MASTER_PORT_SPAN), "grace_s",
        j->sj.ckpt_grace_s >= 0 ? j->sj.ckpt_grace_s : c->cfg.sched.default_grace_s, "run",
        j->row.start_s);
    if (o && sp->interactive && rank == 0) { /* its stdio on a stream (docs/interactive.md) */
        json_t *it = json_pack("{s:b}", "tty", sp->interactive_tty);
        if (it && sp->tty_rows > 0)
            json_object_set_new(it, "rows", json_integer(sp->tty_rows));
        if (it && sp->tty_cols > 0)
            json_object_set_new(it, "cols", json_integer(sp->tty_cols));
        json_object_set_new(o, "interactive", it);
    }
    if (o && sp->image) /* the agent runs the task in it (docs/images.md) */
        json_object_set_new(o, "image", json_string(sp->image));
    if (o && sp->user[0]) /* who the task is inside its image */
        json_object_set_new(o, "container_user", json_string(sp->user));
    if (o && sp->nmounts > 0) {
        json_t *ms = json_array();
        for (int i = 0; i < sp->nmounts; i++)
            json_array_append_new(ms, json_pack("{s:s,s:s,s:b}", "host", sp->mounts[i].host,
                                                "path", sp->mounts[i].path, "write",
                                                sp->mounts[i].write));
        json_object_set_new(o, "mounts", ms);
    }
    if (o && sp->ndata > 0) { /* read-only data it reads (docs/images.md) */
        json_t *ds = json_array();
        for (int i = 0; i < sp->ndata; i++)
            json_array_append_new(ds, json_pack("{s:s,s:s}", "ref", sp->data[i].ref, "path",
                                                sp->data[i].path));
        json_object_set_new(o, "data", ds);
    }
    return o;
}

/* For a job from a Slurm batch script (its env has SLURM_JOB_NAME): its
 * nodes, from which the agent sets SLURM_NNODES and SLURM_JOB_NODELIST
 * (docs/agent-tasks.md). */
static void slurm_extras(const ctld *c, const cjob *j, json_t *env)
{
    bool slurm = false;
    for (int i = 0; i < j->spec->nenv && !slurm; i++)
        slurm = strncmp(j->spec->env[i], "SLURM_JOB_NAME=", 15) == 0;
    if (!slurm)
        return;
    char list[4096] = "", kv[4200];
    size_t len = 0;
    int nnodes = 0;
    for (int r = 0; r < j->ntasks; r++) {
        bool seen = false;
        for (int q = 0; q < r && !seen; q++)
            seen = j->allocs[q].node == j->allocs[r].node;
        if (seen)
            continue;
        const char *name = c->cluster->nodes[j->allocs[r].node].name;
        int n = snprintf(list + len, sizeof list - len, "%s%s", nnodes ? "," : "", name);
        if (n < 0 || (size_t)n >= sizeof list - len)
            return; /* a node list over 4 KiB: left out rather than cut */
        len += (size_t)n;
        nnodes++;
    }
    snprintf(kv, sizeof kv, "TESSERA_NNODES=%d", nnodes);
    json_array_append_new(env, json_string(kv));
    snprintf(kv, sizeof kv, "TESSERA_NODELIST=%s", list);
    json_array_append_new(env, json_string(kv));
}

/* For every array element, however submitted: the element's number and the
 * array's id (its first element's), TESSERA_ARRAY_INDEX, TESSERA_ARRAY_JOB_ID
 * and TESSERA_ARRAY_SIZE; the agent turns the first two into SLURM_ARRAY_*
 * for a batch script (docs/agent-tasks.md). */
static void array_extras(const cjob *j, json_t *env)
{
    long idx = ctld_array_index(j);
    if (idx < 0)
        return;
    char kv[64];
    snprintf(kv, sizeof kv, "TESSERA_ARRAY_INDEX=%ld", idx);
    json_array_append_new(env, json_string(kv));
    snprintf(kv, sizeof kv, "TESSERA_ARRAY_JOB_ID=%lld", (long long)j->row.id - idx);
    json_array_append_new(env, json_string(kv));
    snprintf(kv, sizeof kv, "TESSERA_ARRAY_SIZE=%d", j->spec->array_size);
    json_array_append_new(env, json_string(kv));
}

/* What the controller adds to a task's environment: where its checkpoints
 * live and whether this run resumes one (docs/agent-tasks.md). */
static void task_extras(const ctld *c, const cjob *j, json_t *t)
{
    json_t *env = json_object_get(t, "env");
    char kv[CTLD_PATH_MAX + 160];
    bool own_dir = false; /* the job's env names its own checkpoint folder */
    for (int i = 0; i < j->spec->nenv; i++)
        own_dir = own_dir || strncmp(j->spec->env[i], "TESSERA_CHECKPOINT_DIR=", 23) == 0;
    if (c->cfg.checkpoint_dir[0] && !own_dir) {
        snprintf(kv, sizeof kv, "TESSERA_CHECKPOINT_DIR=%s/%s/%lld", c->cfg.checkpoint_dir,
                 j->row.tenant, (long long)j->row.id);
        json_array_append_new(env, json_string(kv));
        if (j->spec->image) /* bound into its container (docs/images.md "Checkpoints") */
            json_object_set_new(t, "checkpoint_dir", json_string(kv + 23));
    }
    snprintf(kv, sizeof kv, "TESSERA_JOB_ID=%lld", (long long)j->row.id);
    json_array_append_new(env, json_string(kv));
    snprintf(kv, sizeof kv, "TESSERA_RESTARTS=%d", j->row.preemptions);
    json_array_append_new(env, json_string(kv));
    if (j->row.preemptions > 0 && j->stop_outcome[0]) {
        snprintf(kv, sizeof kv, "TESSERA_LAST_STOP=%s", j->stop_outcome);
        json_array_append_new(env, json_string(kv));
    }
    slurm_extras(c, j, env);
    array_extras(j, env);
    int rank = (int)json_integer_value(json_object_get(t, "rank"));
    /* secret values only for a rank about to start, never in a stop */
    if (j->spec->nsecrets > 0 && j->row.state == TS_JOB_RUNNING &&
        (!j->rank_state || j->rank_state[rank] == CTLD_RANK_PENDING))
        ctld_task_secrets(c, j, t);
    if (j->spec->image_secret[0] && j->row.state == TS_JOB_RUNNING &&
        (!j->rank_state || j->rank_state[rank] == CTLD_RANK_PENDING))
        ctld_task_image_secret(c, j, t);
    const ts_alloc *al = &j->allocs[rank];
    if (al->gpu_mem_mib > 0)
        json_object_set_new(t, "gpu_memory_mib", json_integer(al->gpu_mem_mib));
    const ctld_qos *q = tenant_qos(c, j->row.tenant);
    if (q && q->tc >= 0)
        json_object_set_new(t, "nccl_tc", json_integer(q->tc));
    if (q && q->sl >= 0)
        json_object_set_new(t, "nccl_sl", json_integer(q->sl));
}

/* Its time limit, which the agent enforces itself (job_end.c): when it
 * comes ("deadline", Unix s on the controller's clock, which the answer's
 * "now" lets the agent read on its own), the signal, the grace before
 * SIGKILL; "hard" on a stop that is the time limit's. */
static void task_limit(const ctld *c, const cjob *j, json_t *t)
{
    json_object_set_new(t, "time_limit_s", json_real(ctld_job_limit_s(c, j)));
    json_object_set_new(t, "deadline", json_real(j->row.start_s + ctld_job_limit_s(c, j)));
    json_object_set_new(t, "limit_signal", json_integer(ctld_limit_signal(j)));
    json_object_set_new(t, "limit_grace_s", json_real(ctld_limit_grace_s(c, j)));
    if (j->timed_out && j->row.state == TS_JOB_STOPPING) {
        json_object_set_new(t, "hard", json_true());
        json_object_set_new(t, "grace_s", json_real(ctld_limit_grace_s(c, j)));
    }
}

/* What should run on node n, without the parts that change under the
 * agent's own lock ("gen", "logs": added when answering). Under c->mu
 * (a cycle that plans meanwhile leaves the live node alone). */
json_t *ctld_agent_desired(const ctld *c, int n)
{
    json_t *tasks = json_array();
    const ctld_node_jobs *nj = &c->node_jobs[n]; /* not every job: only the node's */
    for (int i = 0; i < nj->n; i++) {
        const cjob *j = nj->v[i];
        if (!j->allocs || (j->row.state != TS_JOB_RUNNING && j->row.state != TS_JOB_STOPPING))
            continue;
        bool batch = ctld_job_is_batch(j);
        for (int r = 0; r < j->ntasks; r++)
            if (j->allocs[r].node == n) {
                json_t *t = task_json(c, j, r);
                if (batch) { /* rank 0 runs the script; the others wait for steps */
                    char tok[160];
                    if (r > 0)
                        json_object_set_new(t, "hold", json_true());
                    else if (ctld_step_token(c, j->row.id, tok, sizeof tok) == 0)
                        json_object_set_new(t, "step_token", json_string(tok));
                }
                task_extras(c, j, t);
                task_identity(c, j, t);
                ctld_net_task(c, j, r, t);
                if (j->row.state == TS_JOB_STOPPING)
                    json_object_set_new(t, "signal", json_integer(j->timed_out
                                                                      ? ctld_limit_signal(j)
                                                                  : j->sj.ckpt_signal > 0
                                                                      ? j->sj.ckpt_signal
                                                                      : TS_SIGNAL_DEFAULT));
                task_limit(c, j, t);
                if (j->idle_warned && j->row.state == TS_JOB_RUNNING)
                    json_object_set_new(
                        t, "idle_warning",
                        json_string("this job's GPUs have been idle; it will be stopped "
                                    "(checkpoint signal first) and held unless they get busy"));
                json_array_append_new(tasks, t);
            }
        ctld_steps_desired(c, j, n, tasks);
    }
    /* the MIG layout of every MIG GPU: the agent makes NVML match it */
    json_t *mig = json_array();
    const ts_node *nd = &c->cluster->nodes[n];
    for (int g = 0; g < nd->ngpu; g++) {
        const ts_gpu *gp = &nd->gpu[g];
        if (gp->mode != TS_GPU_MIG)
            continue;
        json_t *layout = json_array();
        for (int k = 0; k < gp->mig.n; k++)
            json_array_append_new(layout, json_pack("{s:i,s:i}", "profile",
                                                    gp->mig.inst[k].profile_id, "start",
                                                    gp->mig.inst[k].start));
        json_array_append_new(mig, json_pack("{s:i,s:o}", "gpu", g, "layout", layout));
    }
    json_t *doc = json_pack("{s:b,s:f,s:o,s:o}", "drained", !ts_sched_node_schedulable(c->sched, n),
                            "lost_after_s", c->cfg.node_lost_s, "tasks", tasks, "mig", mig);
    /* the reserved job's image, fetched ahead at a low rate (docs/images.md):
     * a share of the node's link when the cluster file gives its bandwidth,
     * else the agent's own default rate */
    const cjob *pj = c->prefetch_job ? ctld_job_find((ctld *)c, c->prefetch_job) : NULL;
    json_int_t rate = (json_int_t)(nd->net_mbit * 1000000 / 8 * PREFETCH_LINK_SHARE_PCT / 100);
    for (int i = 0; doc && pj && pj->spec && pj->spec->image && i < c->nprefetch_nodes; i++)
        if (c->prefetch_nodes[i] == n) {
            json_t *pf = json_pack("{s:I,s:s}", "job", (json_int_t)pj->row.id, "image",
                                   pj->spec->image);
            if (pf && rate > 0)
                json_object_set_new(pf, "rate_bytes_s", json_integer(rate));
            json_object_set_new(doc, "prefetch", json_pack("[o]", pf));
        }
    if (doc && c->cfg.net_isolation) { /* the tenants' VXLANs flood to these */
        json_object_set_new(doc, "net_peers", ctld_net_peers(c));
        ctld_net_services(c, doc);
    }
    return doc;
}
