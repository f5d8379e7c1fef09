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
 *
 * Each task is filled in as the protocol's struct (a ctld_dtask: the
 * ts_desired_task and an arena for the strings made here, dtask.h) and
 * written by the codec's encoder, the one the agent's decoder mirrors; a
 * job's rank tasks are kept until its steps' tasks, made from them, are
 * written too.
 *
 * The tasks are what a tenant controls (its environment and command, copied
 * into every rank and step task), and the agent refuses an answer over its
 * limit, after which every sync of the node fails for every job on it. So
 * the tasks are kept within a budget under that limit: over it, the tenant
 * with the most bytes on the node loses its largest job's ranks or steps
 * (answer_budget), never the node and never a tenant within its share.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/agents.h"
#include "ctld/ctld.h"
#include "ctld/dtask.h"
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
static void task_identity(const ctld *c, const cjob *j, ctld_dtask *dt)
{
    int k = ts_tenant_find(c->tenants, j->row.tenant);
    CTLD_DT_SET(dt, UID);
    CTLD_DT_SET(dt, ALLOW_ROOT);
    dt->t.uid_null = !j->row.run_user[0];
    dt->t.uid = j->row.run_uid;
    dt->t.allow_root = k >= 0 && c->tenants->t[k].identity.allow_root;
    /* who a container task may be inside its image (its job's `user`) */
    if (k >= 0 && c->tenants->t[k].identity.has_uid_range) {
        int64_t *range = ctld_dtask_alloc(dt, 2 * sizeof *range);
        if (!range)
            return;
        range[0] = c->tenants->t[k].identity.uid_min;
        range[1] = c->tenants->t[k].identity.uid_max;
        dt->t.uid_range = (ts_intv){range, 2};
        CTLD_DT_SET(dt, UID_RANGE);
    }
}

/* What the job's spec asks of its task beyond the numbers: its stdio on a
 * stream (rank 0 of an interactive job, docs/interactive.md), its image and
 * the user in it, host folders and read-only data (docs/images.md). */
static void task_spec(const cjob *j, int rank, ctld_dtask *dt)
{
    const ts_job_spec *sp = j->spec;
    ts_desired_task *t = &dt->t;
    if (sp->interactive && rank == 0) {
        CTLD_DT_SET(dt, INTERACTIVE);
        t->interactive.tty = sp->interactive_tty;
        t->interactive.rows = sp->tty_rows;
        t->interactive.cols = sp->tty_cols;
    }
    if (sp->image) {
        CTLD_DT_SET(dt, IMAGE);
        t->image = sp->image;
    }
    if (sp->user[0]) {
        CTLD_DT_SET(dt, CONTAINER_USER);
        t->container_user = sp->user;
    }
    if (sp->nmounts > 0 && (t->mounts = ctld_dtask_alloc(dt, sizeof *t->mounts *
                                                                 (size_t)sp->nmounts))) {
        CTLD_DT_SET(dt, MOUNTS);
        t->nmounts = sp->nmounts;
        for (int i = 0; i < sp->nmounts; i++)
            t->mounts[i] = (ts_desired_mount){sp->mounts[i].host, sp->mounts[i].path,
                                              sp->mounts[i].write};
    }
    if (sp->ndata > 0 && (t->data = ctld_dtask_alloc(dt, sizeof *t->data * (size_t)sp->ndata))) {
        CTLD_DT_SET(dt, DATA);
        t->ndata = sp->ndata;
        for (int i = 0; i < sp->ndata; i++)
            t->data[i] = (ts_desired_data){sp->data[i].ref, sp->data[i].path};
    }
}

/* The task's place, resources, command and gang: the members every task has. */
static void task_base(const ctld *c, const cjob *j, int rank, ctld_dtask *dt)
{
    const ts_alloc *a = &j->allocs[rank];
    const ts_job_spec *sp = j->spec;
    ts_desired_task *t = &dt->t;
    t->present = TS_DT_BIT(TS_DT_JOB) | TS_DT_BIT(TS_DT_RANK) | TS_DT_BIT(TS_DT_NAME) |
                 TS_DT_BIT(TS_DT_ACTION) | TS_DT_BIT(TS_DT_GPUS) | TS_DT_BIT(TS_DT_GPU_MILLI) |
                 TS_DT_BIT(TS_DT_CPU_MILLI) | TS_DT_BIT(TS_DT_MEMORY_MIB) |
                 TS_DT_BIT(TS_DT_MIG_PROFILE) | TS_DT_BIT(TS_DT_MIG_START) |
                 TS_DT_BIT(TS_DT_COMMAND) | TS_DT_BIT(TS_DT_ENV) | TS_DT_BIT(TS_DT_WORKDIR) |
                 TS_DT_BIT(TS_DT_USER) | TS_DT_BIT(TS_DT_WORLD_SIZE) |
                 TS_DT_BIT(TS_DT_LOCAL_RANK) | TS_DT_BIT(TS_DT_MASTER_ADDR) |
                 TS_DT_BIT(TS_DT_TENANT) | TS_DT_BIT(TS_DT_MASTER_PORT) |
                 TS_DT_BIT(TS_DT_GRACE_S) | TS_DT_BIT(TS_DT_RUN);
    t->job = j->row.id;
    t->rank = rank;
    t->name = j->row.name;
    t->action = j->row.state == TS_JOB_STOPPING ? TS_ACTION_STOP : TS_ACTION_RUN;
    if ((t->gpus.v = ctld_dtask_alloc(dt, sizeof *t->gpus.v * (size_t)a->ngpu)))
        for (int k = 0; k < a->ngpu; k++)
            t->gpus.v[t->gpus.n++] = a->gpu[k];
    t->gpu_milli = a->gpu_milli;
    t->cpu_milli = a->cpu_milli;
    t->memory_mib = a->mem_mib;
    t->mig_profile = a->mig_profile;
    t->mig_start = a->mig_start;
    t->command = (ts_strv){(const char **)sp->argv, sp->argc};
    ctld_dtask_env_init(dt, (const char *const *)sp->env, sp->nenv);
    t->workdir = sp->workdir;
    t->user = j->row.run_user;
    t->world_size = j->ntasks;
    for (int r = 0; r < rank; r++)
        t->local_rank += j->allocs[r].node == a->node;
    t->master_addr = c->cluster->nodes[j->allocs[0].node].name;
    t->tenant = j->row.tenant;
    t->master_port = MASTER_PORT_BASE + (int)(j->row.id % MASTER_PORT_SPAN);
    t->grace_s = j->sj.ckpt_grace_s >= 0 ? j->sj.ckpt_grace_s : c->cfg.sched.default_grace_s;
    t->run = j->row.start_s;
    task_spec(j, rank, dt);
}

/* For a job from a Slurm batch script (its env has SLURM_JOB_NAME): its
 * nodes, from which the agent sets SLURM_NNODES and SLURM_JOB_NODELIST
 * (docs/agent-tasks.md). */
static void slurm_extras(const ctld *c, const cjob *j, ctld_dtask *dt)
{
    bool slurm = false;
    for (int i = 0; i < j->spec->nenv && !slurm; i++)
        slurm = strncmp(j->spec->env[i], "SLURM_JOB_NAME=", 15) == 0;
    if (!slurm)
        return;
    char list[4096] = "";
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
    ctld_dtask_env_add(dt, "TESSERA_NNODES=%d", nnodes);
    ctld_dtask_env_add(dt, "TESSERA_NODELIST=%s", list);
}

/* For every array element, however submitted: the element's number and the
 * array's id (its first element's), TESSERA_ARRAY_INDEX, TESSERA_ARRAY_JOB_ID
 * and TESSERA_ARRAY_SIZE; the agent turns the first two into SLURM_ARRAY_*
 * for a batch script (docs/agent-tasks.md). */
static void array_extras(const cjob *j, ctld_dtask *dt)
{
    long idx = ctld_array_index(j);
    if (idx < 0)
        return;
    ctld_dtask_env_add(dt, "TESSERA_ARRAY_INDEX=%ld", idx);
    ctld_dtask_env_add(dt, "TESSERA_ARRAY_JOB_ID=%lld", (long long)j->row.id - idx);
    ctld_dtask_env_add(dt, "TESSERA_ARRAY_SIZE=%d", j->spec->array_size);
}

/* What the controller adds to a task's environment: where its checkpoints
 * live and whether this run resumes one (docs/agent-tasks.md); a starting
 * rank's secrets; its GPU memory and its tenant's NCCL QoS. */
static void task_extras(const ctld *c, const cjob *j, int rank, ctld_dtask *dt)
{
    bool own_dir = false; /* the job's env names its own checkpoint folder */
    for (int i = 0; i < j->spec->nenv; i++)
        own_dir = own_dir || strncmp(j->spec->env[i], "TESSERA_CHECKPOINT_DIR=", 23) == 0;
    if (c->cfg.checkpoint_dir[0] && !own_dir) {
        const char *kv = ctld_dtask_env_add(dt, "TESSERA_CHECKPOINT_DIR=%s/%s/%lld",
                                            c->cfg.checkpoint_dir, j->row.tenant,
                                            (long long)j->row.id);
        if (j->spec->image && kv) { /* bound into its container (docs/images.md) */
            dt->t.checkpoint_dir = kv + 23;
            CTLD_DT_SET(dt, CHECKPOINT_DIR);
        }
    }
    ctld_dtask_env_add(dt, "TESSERA_JOB_ID=%lld", (long long)j->row.id);
    ctld_dtask_env_add(dt, "TESSERA_RESTARTS=%d", j->row.restarts);
    if (j->row.restarts > 0 && j->stop_outcome[0])
        ctld_dtask_env_add(dt, "TESSERA_LAST_STOP=%s", j->stop_outcome);
    slurm_extras(c, j, dt);
    array_extras(j, dt);
    /* secret values only for a rank about to start, never in a stop */
    bool starting = j->row.state == TS_JOB_RUNNING &&
                    (!j->rank_state || j->rank_state[rank] == CTLD_RANK_PENDING);
    if (j->spec->nsecrets > 0 && starting)
        ctld_task_secrets(c, j, dt);
    if (j->spec->image_secret[0] && starting)
        ctld_task_image_secret(c, j, dt);
    const ts_alloc *al = &j->allocs[rank];
    if (al->gpu_mem_mib > 0) {
        CTLD_DT_SET(dt, GPU_MEMORY_MIB);
        dt->t.gpu_memory_mib = al->gpu_mem_mib;
    }
    const ctld_qos *q = tenant_qos(c, j->row.tenant);
    if (q && q->tc >= 0) {
        CTLD_DT_SET(dt, NCCL_TC);
        dt->t.nccl_tc = q->tc;
    }
    if (q && q->sl >= 0) {
        CTLD_DT_SET(dt, NCCL_SL);
        dt->t.nccl_sl = q->sl;
    }
}

/* Its time limit, which the agent enforces itself (job_end.c): when it
 * comes ("deadline", Unix s on the controller's clock, which the answer's
 * "now" lets the agent read on its own), the signal, the grace before
 * SIGKILL; "hard" on a stop that is the time limit's. */
static void task_limit(const ctld *c, const cjob *j, ctld_dtask *dt)
{
    ts_desired_task *t = &dt->t;
    t->present |= TS_DT_BIT(TS_DT_TIME_LIMIT_S) | TS_DT_BIT(TS_DT_DEADLINE) |
                  TS_DT_BIT(TS_DT_LIMIT_SIGNAL) | TS_DT_BIT(TS_DT_LIMIT_GRACE_S);
    t->time_limit_s = ctld_job_limit_s(c, j);
    t->deadline = j->row.start_s + t->time_limit_s;
    t->limit_signal = ctld_limit_signal(j);
    t->limit_grace_s = ctld_limit_grace_s(c, j);
    if (j->timed_out && j->row.state == TS_JOB_STOPPING) {
        CTLD_DT_SET(dt, HARD);
        t->hard = true;
        t->grace_s = t->limit_grace_s;
    }
}

/* Rank r's task of job j (on the node being answered), into dt. */
static void rank_task(const ctld *c, const cjob *j, int r, ctld_dtask *dt)
{
    task_base(c, j, r, dt);
    if (ctld_job_is_batch(j)) { /* rank 0 runs the script; the others wait for steps */
        char tok[160];
        if (r > 0) {
            CTLD_DT_SET(dt, HOLD);
            dt->t.hold = true;
        } else if (ctld_step_token(c, j->row.id, tok, sizeof tok) == 0) {
            CTLD_DT_SET(dt, STEP_TOKEN);
            dt->t.step_token = ctld_dtask_printf(dt, "%s", tok);
        }
    }
    task_extras(c, j, r, dt);
    task_identity(c, j, dt);
    ctld_net_task(c, j, r, dt);
    if (j->row.state == TS_JOB_STOPPING) {
        CTLD_DT_SET(dt, SIGNAL);
        dt->t.signal = j->timed_out              ? ctld_limit_signal(j)
                       : j->sj.ckpt_signal > 0 ? j->sj.ckpt_signal
                                               : TS_SIGNAL_DEFAULT;
    }
    task_limit(c, j, dt);
    if (j->idle_warned && j->row.state == TS_JOB_RUNNING) {
        CTLD_DT_SET(dt, IDLE_WARNING);
        dt->t.idle_warning = "this job's GPUs have been idle; it will be stopped "
                             "(checkpoint signal first) and held unless they get busy";
    }
}

/* ---- the node's answer budget ---------------------------------------------------- */

/* One job's tasks on the node, in two parts: its ranks' tasks, kept or left
 * out together (a gang), and its steps' tasks, left out from the last (the
 * newest steps first). */
typedef struct answer_part {
    const cjob *j;
    int tenant;     /* its tenant's index (-1: not in the tenants file any more) */
    bool steps;
    json_t *tasks;  /* the ranks' tasks, built (the steps' are built once kept) */
    size_t *size;   /* [each task] its size in the answer (a step task's at most) */
    size_t ntasks;  /* its tasks */
    size_t keep;    /* the first tasks kept */
    size_t bytes;   /* the kept tasks' size */
} answer_part;

static size_t answer_budget_bytes(void)
{
#ifdef TS_STORE_FAULTS_ENV /* test builds: a small budget, to see it spent */
    const char *b = getenv("TESSERAD_TEST_ANSWER_BUDGET");
    long v = b ? atol(b) : 0;
    if (v > 0 && v < CTLD_ANSWER_BUDGET_BYTES)
        return (size_t)v;
#endif
    return CTLD_ANSWER_BUDGET_BYTES;
}

/* The part of tenant k (any tenant when k is -2) with the most bytes
 * still in; -1 when none. */
static int largest_part(const answer_part *p, int np, int k)
{
    int best = -1;
    for (int i = 0; i < np; i++)
        if (p[i].bytes > 0 && (k == -2 || p[i].tenant == k) &&
            (best < 0 || p[i].bytes > p[best].bytes))
            best = i;
    return best;
}

/* Leaves out part i's last step task, or all its ranks' tasks; the bytes
 * left out. */
static size_t drop_some(answer_part *p)
{
    size_t was = p->bytes;
    if (p->steps && p->keep > 0)
        p->bytes -= p->size[--p->keep];
    else
        p->keep = p->bytes = 0;
    return was - p->bytes;
}

/* While the parts are over the budget, the tenant with the most bytes on
 * the node loses tasks of its largest part: a tenant whose tasks take no
 * more than its share (the budget over the tenants on the node) keeps them
 * all, and a node's answer stays under what its agent reads, whatever one
 * tenant's jobs carry (their environment copied into each step task,
 * thousands of tasks). A task left out is held (a step task not started
 * waits: its step stays running, srun waits) or stopped by the agent, as a
 * task no longer wanted (its rank or step then ends as stopped). */
static void answer_budget(const ctld *c, int n, answer_part *p, int np)
{
    size_t total = 0, budget = answer_budget_bytes();
    for (int i = 0; i < np; i++)
        total += p[i].bytes;
    int nt = c->tenants->n + 1; /* the last: tenants no longer in the file */
    size_t *by = total > budget ? calloc((size_t)nt, sizeof *by) : NULL;
    if (total > budget && !by) { /* out of memory: the largest parts go, whoever's */
        for (int i = largest_part(p, np, -2); total > budget && i >= 0;
             i = largest_part(p, np, -2))
            total -= drop_some(&p[i]);
        return;
    }
    for (int i = 0; by && i < np; i++)
        by[p[i].tenant >= 0 ? p[i].tenant : nt - 1] += p[i].bytes;
    while (by && total > budget) {
        int k = 0;
        for (int t = 1; t < nt; t++)
            if (by[t] > by[k])
                k = t;
        int i = largest_part(p, np, k == nt - 1 ? -1 : k);
        if (i < 0)
            break;
        size_t out = drop_some(&p[i]);
        total -= out;
        by[k] -= out;
        if (p[i].bytes == 0 || total <= budget)
            fprintf(stderr, "tesserad: node %s: job %lld (tenant %s): %zu of its %s tasks held "
                    "out of its agent's answer, over the node's budget of %zu bytes (its "
                    "tenant's tasks there took the most)\n", c->cluster->nodes[n].name,
                    (long long)p[i].j->row.id, p[i].j->row.tenant,
                    p[i].ntasks - p[i].keep, p[i].steps ? "step" : "rank",
                    budget);
    }
    free(by);
}

/* One job's tasks on the node while its answer is built: its ranks' tasks
 * (kept until its steps' tasks, made from them, are built) and the two parts. */
typedef struct job_build {
    const cjob *j;
    ctld_dtask *dts; /* [nr] its ranks' tasks on the node */
    json_t **env;    /* [nr] each one's encoded "env" (borrowed from ranks->tasks) */
    int nr;
    answer_part *ranks, *steps;
} job_build;

/* Job j's rank tasks on node n built and measured into b (its parts set
 * up); its step tasks only measured, from their ranks' tasks. False: out
 * of memory. */
static bool job_ranks(const ctld *c, const cjob *j, int n, job_build *b)
{
    for (int r = 0; r < j->ntasks; r++)
        b->nr += j->allocs[r].node == n;
    b->j = j;
    b->dts = calloc((size_t)b->nr + 1, sizeof *b->dts);
    b->env = calloc((size_t)b->nr + 1, sizeof *b->env);
    b->ranks->size = calloc((size_t)b->nr + 1, sizeof *b->ranks->size);
    size_t *bytes = calloc((size_t)b->nr + 1, sizeof *bytes); /* by index in dts */
    bool ok = b->dts && b->env && b->ranks->size && bytes;
    for (int r = 0, k = 0; ok && r < j->ntasks; r++) {
        if (j->allocs[r].node != n)
            continue;
        rank_task(c, j, r, &b->dts[k]);
        json_t *o = ctld_dtask_encode(&b->dts[k]);
        if (o) { /* the size json_dumpb writes, and its comma */
            bytes[k] = json_dumpb(o, NULL, 0, JSON_COMPACT) + 1;
            b->ranks->size[b->ranks->keep++] = bytes[k];
            b->ranks->bytes += bytes[k];
            b->env[k] = json_object_get(o, "env");
        }
        ok = json_array_append_new(b->ranks->tasks, o) == 0 || !o;
        k++;
    }
    b->ranks->ntasks = b->ranks->keep;
    int ns = ok ? ctld_steps_desired(c, j, n, b->dts, NULL, bytes, b->nr, NULL, NULL, INT_MAX)
                : 0;
    if (ok && ns > 0 && (ok = (b->steps->size = calloc((size_t)ns, sizeof(size_t))) != NULL)) {
        b->steps->keep = (size_t)ctld_steps_desired(c, j, n, b->dts, NULL, bytes, b->nr, NULL,
                                                    b->steps->size, ns);
        b->steps->ntasks = b->steps->keep;
        for (size_t k = 0; k < b->steps->keep; k++)
            b->steps->bytes += b->steps->size[k];
    }
    free(bytes);
    return ok;
}

static void job_build_fini(job_build *b)
{
    for (int k = 0; b->dts && k < b->nr; k++)
        ctld_dtask_fini(&b->dts[k]); /* wipes the secrets it held */
    free(b->dts);
    free(b->env);
}

/* Node n's tasks: each job's ranks' tasks, then its steps', kept within
 * the node's answer budget (a step task left out is never built). NULL:
 * out of memory. */
static json_t *node_tasks(const ctld *c, int n)
{
    const ctld_node_jobs *nj = &c->node_jobs[n]; /* not every job: only the node's */
    answer_part *p = calloc((size_t)nj->n * 2 + 1, sizeof *p);
    job_build *jb = calloc((size_t)nj->n + 1, sizeof *jb);
    json_t *tasks = p && jb ? json_array() : NULL;
    int np = 0, nb = 0;
    bool ok = tasks != NULL;
    for (int i = 0; ok && i < nj->n; i++) {
        const cjob *j = nj->v[i];
        if (!j->allocs || (j->row.state != TS_JOB_RUNNING && j->row.state != TS_JOB_STOPPING))
            continue;
        int k = ts_tenant_find(c->tenants, j->row.tenant);
        p[np] = (answer_part){.j = j, .tenant = k, .tasks = json_array()};
        p[np + 1] = (answer_part){.j = j, .tenant = k, .steps = true};
        jb[nb] = (job_build){.ranks = &p[np], .steps = &p[np + 1]};
        np += 2;
        ok = p[np - 2].tasks && job_ranks(c, j, n, &jb[nb++]);
    }
    if (ok)
        answer_budget(c, n, p, np);
    for (int i = 0; ok && i < nb; i++) {
        answer_part *r = jb[i].ranks, *st = jb[i].steps;
        for (size_t k = 0; ok && k < r->keep; k++)
            ok = json_array_append(tasks, json_array_get(r->tasks, k)) == 0;
        if (ok && st->keep > 0)
            ctld_steps_desired(c, jb[i].j, n, jb[i].dts, jb[i].env, NULL, jb[i].nr, tasks,
                               NULL, (int)st->keep);
    }
    for (int i = 0; i < nb; i++)
        job_build_fini(&jb[i]);
    for (int i = 0; i < np; i++) {
        json_decref(p[i].tasks);
        free(p[i].size);
    }
    free(jb);
    free(p);
    if (!ok) {
        json_decref(tasks);
        return NULL;
    }
    return tasks;
}

/* The layout of every MIG GPU of node nd: the agent makes NVML match it.
 * The layouts point into the node's GPUs. False: out of memory. */
static bool mig_layouts(const ts_node *nd, ts_desired *d)
{
    d->mig = nd->ngpu > 0 ? calloc((size_t)nd->ngpu, sizeof *d->mig) : NULL;
    if (nd->ngpu && !d->mig)
        return false;
    for (int g = 0; g < nd->ngpu; g++) {
        const ts_gpu *gp = &nd->gpu[g];
        if (gp->mode != TS_GPU_MIG)
            continue;
        ts_desired_mig *m = &d->mig[d->nmig++];
        m->gpu = g;
        m->layout = gp->mig.n > 0 ? calloc((size_t)gp->mig.n, sizeof *m->layout) : NULL;
        if (gp->mig.n && !m->layout)
            return false;
        for (int k = 0; k < gp->mig.n; k++)
            m->layout[m->nlayout++] = (ts_desired_mig_slot){gp->mig.inst[k].profile_id,
                                                            gp->mig.inst[k].start};
    }
    return true;
}

/* The reserved job's image, fetched ahead at a low rate (docs/images.md):
 * a share of the node's link when the cluster file gives its bandwidth,
 * else the agent's own default rate. False: out of memory. */
static bool prefetch_of(const ctld *c, int n, ts_desired *d)
{
    const cjob *pj = c->prefetch_job ? ctld_job_find((ctld *)c, c->prefetch_job) : NULL;
    if (!pj || !pj->spec || !pj->spec->image)
        return true;
    int64_t rate = c->cluster->nodes[n].net_mbit * 1000000 / 8 * PREFETCH_LINK_SHARE_PCT / 100;
    for (int i = 0; i < c->nprefetch_nodes; i++)
        if (c->prefetch_nodes[i] == n) {
            d->prefetch = calloc(1, sizeof *d->prefetch);
            if (!d->prefetch)
                return false;
            d->prefetch[0] = (ts_desired_prefetch){pj->row.id, pj->spec->image,
                                                   rate > 0 ? rate : 0};
            d->nprefetch = 1;
            d->present |= TS_DS_BIT(TS_DS_PREFETCH);
            return true; /* one image: the reserved job's */
        }
    return true;
}

/* What should run on node n, without the parts that change under the
 * agent's own lock ("gen", "now", "logs", "sessions": added when
 * answering). Under c->mu (a cycle that plans meanwhile leaves the live
 * node alone). */
json_t *ctld_agent_desired(const ctld *c, int n)
{
    json_t *tasks = node_tasks(c, n);
    ts_desired d = {.present = TS_DS_BIT(TS_DS_DRAINED) | TS_DS_BIT(TS_DS_LOST_AFTER_S) |
                               TS_DS_BIT(TS_DS_TASKS) | TS_DS_BIT(TS_DS_MIG),
                    .drained = !ts_sched_node_schedulable(c->sched, n),
                    .lost_after_s = c->cfg.node_lost_s,
                    .tasks = tasks};
    bool ok = tasks && mig_layouts(&c->cluster->nodes[n], &d) && prefetch_of(c, n, &d);
    if (ok && c->cfg.net_isolation) { /* the tenants' VXLANs flood to these */
        d.net_peers.v = malloc(sizeof *d.net_peers.v * (size_t)(c->cluster->nnodes + 1));
        d.net_peers.n = d.net_peers.v ? ctld_net_peers(c, d.net_peers.v) : 0;
        d.present |= TS_DS_BIT(TS_DS_NET_PEERS) | TS_DS_BIT(TS_DS_NET_SERVICES) |
                     TS_DS_BIT(TS_DS_NET_TENANT_SERVICES);
        ok = d.net_peers.v && ctld_net_services(c, &d) == 0;
    }
    json_t *doc = ok ? ts_desired_encode(&d) : NULL;
    json_decref(tasks);
    ts_desired_fini(&d);
    return doc;
}
