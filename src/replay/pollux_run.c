/*
 * pollux_run.c - any replay policy (ts_replay_policy_ops: fifo, sjf, srtf,
 * the replay's tiresias, and `tessera`, the production cycle) deciding a
 * Pollux workload whose jobs advance by the job model (pollux_model.h), in
 * the artifact's 60-s rounds. The policy answers which submitted jobs run;
 * a job it starts goes where the policy put it when it says (`tessera`: the
 * cycle's nodes, a gang of node-sized tasks and the remainder), else on the
 * nodes with the most free GPUs, as the artifact's Tiresias does. Rigid
 * jobs run the GPU count and batch size the workload gives. Elastic jobs ask
 * the policy for its minimum. A policy that resizes (`tessera`: the
 * production cycle's elastic step, docs/scheduler.md "Elastic jobs") is told
 * each running job's speedup curve and time left and says each job's size
 * (ops->size); a resized job is placed again where the policy put it. For
 * the others the GPUs no minimum uses are granted where
 * goodput gains most (src/sched/elastic.h) and are invisible to the policy: a
 * job the policy starts goes where it says if those GPUs are free, else on
 * the nodes with the most free GPUs, and extras are taken back (first, before
 * any minimum) only when free GPUs are too few. A job's batch size follows its
 * GPU count; every change of a job's GPUs costs it TS_PM_RESCALE_S.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/pollux_model.h"
#include "replay/replay.h"
#include "sched/elastic.h"
#include "tessera/grow.h"

#define VIRTUAL_TIME_MAX_S (100L * 24 * 3600)
#define APPS_MAX 64

/* Seconds job j still needs on a packed placement of its GPUs, at its
 * current epoch's efficiency: what an oracle policy (sjf, srtf) is told, and
 * a job's work_s before it starts. */
static double left_s(const ts_pm_job *j, int replicas, int gpus_per_node)
{
    ts_pm_job t = *j;
    int cnt[TS_PM_NODES_MAX], m = 0;
    for (int left = replicas; left > 0 && m < TS_PM_NODES_MAX; m++) {
        cnt[m] = left < gpus_per_node ? left : gpus_per_node;
        left -= cnt[m];
    }
    replay_pm_job_reallocate(&t, cnt, m);
    double st, sy;
    replay_pm_step_time(t.app, t.count, t.nnodes, t.atomic_bsz, &st, &sy);
    int batch = replicas * t.atomic_bsz * (t.accum_steps + 1);
    double goodput = replay_pm_gain(t.app, batch, t.epoch) / (st + (st - sy) * t.accum_steps);
    double todo = replay_pm_epoch_progress(t.app, replay_pm_app_epochs(t.app)) - t.progress;
    return (todo > 0 ? todo / goodput : 0) + (j->nnodes ? j->rescale_s : TS_PM_RESCALE_S);
}

/* The elastic run's state beside the rigid one's. */
typedef struct elastic_ctx {
    ts_pm_goodput *gp[APPS_MAX];
    int max_gpus[APPS_MAX];
    int *minrow;       /* n x nodes: where the policy put each job's minimum */
    int *min;          /* per job: the GPUs it asks the policy for */
    double *speedup;   /* scratch: (total + 1) per grant candidate */
    ts_elastic_job *ej;
    int *ejob, *target;
    /* the policy resizes (ops->size, the production cycle's elastic step):
     * the view's elastic arrays, per job */
    int *emax;
    const double **esp;
    double *eleft;
    void *block; /* every array above, sized once (ts_block_alloc) */
} elastic_ctx;

/* Seconds an elastic job still needs at g GPUs, at its best batch. */
static double elastic_left_s(elastic_ctx *e, const ts_pm_job *j, int app, int g)
{
    double gp = replay_pm_goodput_best(e->gp[app], g, j->epoch, NULL);
    double todo = replay_pm_epoch_progress(j->app, replay_pm_app_epochs(j->app)) - j->progress;
    return gp > 0 && todo > 0 ? todo / gp : 0;
}

/* Takes back up to need extra GPUs (above each job's minimum) on node i;
 * changed[] marks the jobs that shrink. Returns the GPUs freed. */
static int take_back(elastic_ctx *e, int *alloc, int n, int nodes, int i, int need,
                     bool *changed)
{
    int got = 0;
    for (int k = 0; k < n && got < need; k++) {
        int extra = alloc[(size_t)k * nodes + i] - e->minrow[(size_t)k * nodes + i];
        if (extra <= 0)
            continue;
        int take = extra < need - got ? extra : need - got;
        alloc[(size_t)k * nodes + i] -= take;
        got += take;
        changed[k] = true;
    }
    return got;
}

/* GPUs per node the job gets: the policy's, when it says and they are free;
 * else the most free node first, node after node (elastic: extras taken back
 * when the free GPUs are too few). */
static void place(const ts_replay_policy_ops *ops, void *state, int j, int want, int nodes,
                  int *node_free, int *row, elastic_ctx *e, int *alloc, int n, bool *changed)
{
    memset(row, 0, (size_t)nodes * sizeof *row);
    if (ops->placement && ops->placement(state, j, row, nodes) == want) {
        bool fits = true;
        for (int i = 0; i < nodes; i++)
            fits &= row[i] <= node_free[i];
        if (fits) {
            for (int i = 0; i < nodes; i++)
                node_free[i] -= row[i];
            return;
        }
        memset(row, 0, (size_t)nodes * sizeof *row);
    }
    int free_all = 0;
    for (int i = 0; i < nodes; i++)
        free_all += node_free[i];
    for (int i = 0; e && i < nodes && free_all < want; i++) {
        int got = take_back(e, alloc, n, nodes, i, want - free_all, changed);
        node_free[i] += got;
        free_all += got;
    }
    replay_pm_fill_most_free(row, node_free, nodes, want);
}

/* The GPUs nobody's minimum uses go to the running elastic jobs where the
 * goodput gains most; a grown job's extras go on its own nodes first. */
static void grant(elastic_ctx *e, const ts_pm_wjob *jobs, ts_pm_job *pj, const bool *run,
                  const int *pending, int np, int *alloc, int nodes, int total, int *node_free,
                  bool *changed)
{
    int ne = 0, spare = 0;
    for (int i = 0; i < nodes; i++)
        spare += node_free[i];
    for (int k = 0; k < np; k++) {
        int j = pending[k], a = jobs[j].app;
        if (!run[j] || e->max_gpus[a] <= 1)
            continue;
        int cur = 0;
        for (int i = 0; i < nodes; i++)
            cur += alloc[(size_t)j * nodes + i];
        double *sp = &e->speedup[(size_t)ne * (total + 1)];
        double base = replay_pm_goodput_best(e->gp[a], 1, pj[j].epoch, NULL);
        sp[0] = 0;
        for (int g = 1; g <= e->max_gpus[a]; g++)
            sp[g] = base > 0 ? replay_pm_goodput_best(e->gp[a], g, pj[j].epoch, NULL) / base : 1;
        e->ej[ne] = (ts_elastic_job){e->min[j], e->max_gpus[a] > e->min[j] ? e->max_gpus[a] : e->min[j], cur, sp,
                                     elastic_left_s(e, &pj[j], a, cur), changed[j]};
        e->ejob[ne++] = j;
    }
    int pool = spare;
    for (int k = 0; k < ne; k++)
        pool += e->ej[k].cur_gpus - e->ej[k].min_gpus;
    ts_elastic_grant(e->ej, ne, pool, TS_PM_RESCALE_S, e->target);
    for (int k = 0; k < ne; k++) { /* shrinks first: their GPUs feed the grows */
        int j = e->ejob[k], cut = e->ej[k].cur_gpus - e->target[k];
        int *row = &alloc[(size_t)j * nodes];
        const int *mr = &e->minrow[(size_t)j * nodes];
        if (cut > 0)
            changed[j] = true;
        while (cut > 0) { /* from the node where it has the fewest extras */
            int bi = -1;
            for (int i = 0; i < nodes; i++)
                if (row[i] > mr[i] && (bi < 0 || row[i] - mr[i] < row[bi] - mr[bi]))
                    bi = i;
            if (bi < 0)
                break;
            int t = row[bi] - mr[bi] < cut ? row[bi] - mr[bi] : cut;
            row[bi] -= t;
            node_free[bi] += t;
            cut -= t;
        }
    }
    for (int k = 0; k < ne; k++) {
        int j = e->ejob[k], add = e->target[k] - e->ej[k].cur_gpus, *row = &alloc[(size_t)j * nodes];
        if (add <= 0)
            continue;
        changed[j] = true;
        for (int i = 0; i < nodes && add > 0; i++) /* its own nodes first */
            if (row[i] > 0 && node_free[i] > 0) {
                int t = add < node_free[i] ? add : node_free[i];
                row[i] += t;
                node_free[i] -= t;
                add -= t;
            }
        replay_pm_fill_most_free(row, node_free, nodes, add);
    }
}

static void elastic_free(elastic_ctx *e)
{
    for (int a = 0; a < APPS_MAX; a++)
        replay_pm_goodput_free(e->gp[a]);
    free(e->block);
}

static int elastic_init(elastic_ctx *e, const ts_pm_app *const *apps, const ts_pm_wjob *jobs,
                        int n, int nodes, int gpus_per_node, ts_pm_jobs_kind kind, ts_err *err)
{
    int total = nodes * gpus_per_node;
    memset(e, 0, sizeof *e);
    for (int j = 0; j < n; j++) {
        int a = jobs[j].app;
        if (a < 0 || a >= APPS_MAX)
            return ts_err_set(err, TS_EINVAL, "%s: application index out of range", jobs[j].name);
        if (e->gp[a])
            continue;
        e->max_gpus[a] = replay_pm_app_max_gpus(apps[a], total);
        int rc = replay_pm_goodput_new(apps[a], gpus_per_node, e->max_gpus[a], &e->gp[a], err);
        if (rc)
            return rc;
    }
    size_t nn = (size_t)n + 1;
    ts_block_part parts[] = {
        TS_BLOCK_PART(e->minrow, nn * (size_t)nodes), TS_BLOCK_PART(e->min, nn),
        TS_BLOCK_PART(e->speedup, nn * (size_t)(total + 1)), TS_BLOCK_PART(e->ej, nn),
        TS_BLOCK_PART(e->ejob, nn), TS_BLOCK_PART(e->target, nn), TS_BLOCK_PART(e->emax, nn),
        TS_BLOCK_PART(e->esp, nn), TS_BLOCK_PART(e->eleft, nn)};
    if (!(e->block = ts_block_alloc(parts, sizeof parts / sizeof *parts)))
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    for (int j = 0; j < n; j++) {
        int a = jobs[j].app, g = jobs[j].replicas;
        e->min[j] = kind == TS_PM_ELASTIC_FROM_TUNED ? (g < e->max_gpus[a] ? g : e->max_gpus[a])
                                                     : 1;
        if (e->min[j] < 1)
            e->min[j] = 1;
        e->emax[j] = e->max_gpus[a] > e->min[j] ? e->max_gpus[a] : e->min[j];
        e->esp[j] = &e->speedup[(size_t)j * (size_t)(total + 1)];
    }
    return 0;
}

/* GPUs job j holds now. */
static int held(const int *alloc, int j, int nodes)
{
    int g = 0;
    for (int i = 0; i < nodes; i++)
        g += alloc[(size_t)j * nodes + i];
    return g;
}

/* What a policy that resizes is told: each running elastic job's speedup
 * curve at its current epoch (over its goodput at 1 GPU, as grant() has it)
 * and its time left at its size. */
static void curves(elastic_ctx *e, const ts_pm_wjob *jobs, const ts_pm_job *pj,
                   const int *pending, int np, const bool *holding, const int *alloc, int nodes,
                   int total)
{
    for (int k = 0; k < np; k++) {
        int j = pending[k], a = jobs[j].app;
        if (!holding[j] || e->emax[j] <= e->min[j])
            continue;
        double *sp = &e->speedup[(size_t)j * (size_t)(total + 1)];
        double base = replay_pm_goodput_best(e->gp[a], 1, pj[j].epoch, NULL);
        sp[0] = 0;
        for (int g = 1; g <= e->emax[j]; g++)
            sp[g] = base > 0 ? replay_pm_goodput_best(e->gp[a], g, pj[j].epoch, NULL) / base : 1;
        e->eleft[j] = elastic_left_s(e, &pj[j], a, held(alloc, j, nodes));
    }
}

/* One run's arrays (n + 1 entries a job, n x nodes for alloc) and what
 * every round reads: the workload, the cluster's shape and the policy. */
typedef struct run_ctx {
    const ts_pm_app *const *apps;
    const ts_pm_wjob *jobs;
    int n, nodes, gpus_per_node, total;
    const ts_replay_policy_ops *ops;
    void *state;
    elastic_ctx *e; /* NULL for rigid jobs */
    bool via;       /* the policy's cycle resizes, not grant() */
    size_t nn;
    ts_pm_job *pj;
    ts_replay_job *rj;
    int *pending;
    bool *holding, *run, *changed;
    double *work_left, *at_risk;
    int *alloc, *node_free;
    void *block; /* the arrays from pj on, sized once (ts_block_alloc) */
} run_ctx;

static bool run_alloc(run_ctx *r)
{
    size_t nn = r->nn;
    ts_block_part parts[] = {
        TS_BLOCK_PART(r->pj, nn),        TS_BLOCK_PART(r->rj, nn),
        TS_BLOCK_PART(r->pending, nn),   TS_BLOCK_PART(r->holding, nn),
        TS_BLOCK_PART(r->run, nn),       TS_BLOCK_PART(r->changed, nn),
        TS_BLOCK_PART(r->work_left, nn), TS_BLOCK_PART(r->at_risk, nn),
        TS_BLOCK_PART(r->alloc, nn * (size_t)r->nodes),
        TS_BLOCK_PART(r->node_free, (size_t)r->nodes)};
    r->block = ts_block_alloc(parts, sizeof parts / sizeof *parts);
    return r->block != NULL;
}

static void run_free(run_ctx *r)
{
    if (r->state)
        r->ops->free(r->state);
    if (r->e)
        elastic_free(r->e);
    free(r->block);
}

/* Seconds job j still needs at the GPUs the policy is told it asks for. */
static double job_left_s(const run_ctx *r, int j)
{
    return r->e ? elastic_left_s(r->e, &r->pj[j], r->jobs[j].app, r->rj[j].gpus)
                : left_s(&r->pj[j], r->jobs[j].replicas, r->gpus_per_node);
}

/* Each job in the model and as the policy sees it, before it is submitted. */
static void run_init_jobs(run_ctx *r)
{
    for (int j = 0; j < r->n; j++) {
        const ts_pm_wjob *w = &r->jobs[j];
        replay_pm_job_init(&r->pj[j], r->apps[w->app], w->submit_s, w->batch_size);
        if (r->e) /* the job adapts its batch to its GPUs and epoch */
            r->pj[j].adapt = r->e->gp[w->app];
        snprintf(r->rj[j].name, sizeof r->rj[j].name, "%s", w->name);
        r->rj[j].submit_s = w->submit_s;
        r->rj[j].gpus = r->e ? r->e->min[j] : w->replicas;
        r->rj[j].work_s = job_left_s(r, j);
    }
}

static void give_back_gpus(run_ctx *r, int j)
{
    replay_pm_job_reallocate(&r->pj[j], NULL, 0);
    memset(&r->alloc[(size_t)j * r->nodes], 0, (size_t)r->nodes * sizeof *r->alloc);
}

/* After a round: finished jobs give their GPUs back; the submitted ones left
 * are the policy's pending list. Sets *left to the jobs not done; returns
 * how many are pending. */
static int collect_pending(run_ctx *r, long now, int *left)
{
    int np = 0;
    *left = 0;
    for (int j = 0; j < r->n; j++) {
        bool done = r->pj[j].done_s >= 0;
        *left += !done;
        if (done && r->pj[j].nnodes > 0)
            give_back_gpus(r, j);
        if (!done && r->jobs[j].submit_s <= now) {
            r->pending[np++] = j;
            r->holding[j] = r->pj[j].nnodes > 0;
            r->work_left[j] = job_left_s(r, j);
        }
    }
    return np;
}

/* Holders the policy did not choose stop, and those it resized. */
static void stop_unchosen(run_ctx *r, int np)
{
    for (int k = 0; k < np; k++) {
        int j = r->pending[k];
        if (r->holding[j] &&
            (!r->run[j] || (r->via && r->ops->size(r->state, j) != held(r->alloc, j, r->nodes)))) {
            give_back_gpus(r, j);
            r->holding[j] = false;
        }
    }
}

/* node_free: each node's GPUs that no job holds. */
static void count_free(run_ctx *r)
{
    for (int i = 0; i < r->nodes; i++) {
        r->node_free[i] = r->gpus_per_node;
        for (int j = 0; j < r->n; j++)
            r->node_free[i] -= r->alloc[(size_t)j * r->nodes + i];
    }
}

/* Places the chosen jobs that hold nothing yet. Returns the GPUs chosen. */
static int place_chosen(run_ctx *r, int np)
{
    int chosen = 0;
    for (int k = 0; k < np; k++) {
        int j = r->pending[k];
        if (!r->run[j])
            continue;
        int want = r->via ? r->ops->size(r->state, j) : r->rj[j].gpus;
        chosen += want;
        if (r->holding[j])
            continue;
        int *row = &r->alloc[(size_t)j * r->nodes];
        place(r->ops, r->state, j, want, r->nodes, r->node_free, row, r->via ? NULL : r->e,
              r->alloc, r->n, r->changed);
        if (r->e)
            memcpy(&r->e->minrow[(size_t)j * r->nodes], row, (size_t)r->nodes * sizeof *row);
        r->changed[j] = true;
    }
    return chosen;
}

/* One decision: the policy chooses among the pending jobs, the unchosen
 * stop, the chosen are placed (and, elastic, granted the spare GPUs), and
 * each job whose GPUs changed is moved in the model. */
static int decide_round(run_ctx *r, int np, long now, long since, ts_err *err)
{
    ts_replay_view v = {.now_s = (double)now, .since_s = (double)since, .jobs = r->rj,
                        .njobs = r->n, .pending = r->pending, .npending = np,
                        .holding = r->holding, .work_left_s = r->work_left,
                        .total_gpus = r->total, .at_risk_s = r->at_risk,
                        .gpus_per_node = r->gpus_per_node};
    if (r->via) {
        curves(r->e, r->jobs, r->pj, r->pending, np, r->holding, r->alloc, r->nodes, r->total);
        v.elastic_max = r->e->emax;
        v.elastic_speedup = r->e->esp;
        v.elastic_left_s = r->e->eleft;
    }
    memset(r->run, 0, r->nn * sizeof *r->run);
    memset(r->changed, 0, r->nn * sizeof *r->changed);
    r->ops->decide(r->state, &v, r->run);
    stop_unchosen(r, np);
    count_free(r);
    int chosen = place_chosen(r, np);
    if (chosen > r->total)
        return ts_err_set(err, TS_EINVAL, "policy %s: chose %d GPUs of %d", r->ops->name, chosen,
                          r->total);
    if (r->e && !r->via) {
        count_free(r); /* what take-backs freed */
        grant(r->e, r->jobs, r->pj, r->run, r->pending, np, r->alloc, r->nodes, r->total,
              r->node_free, r->changed);
    }
    for (int k = 0; k < np; k++) {
        int j = r->pending[k], cnt[TS_PM_NODES_MAX];
        if (!r->run[j] || !r->changed[j])
            continue;
        const int *row = &r->alloc[(size_t)j * r->nodes];
        replay_pm_job_reallocate(&r->pj[j], cnt, replay_pm_counts(row, r->nodes, cnt));
    }
    return 0;
}

int ts_pm_run_policy(const ts_pm_app *const *apps, const ts_pm_wjob *jobs, int n, int nodes,
                     int gpus_per_node, const ts_replay_policy_ops *ops, ts_pm_jobs_kind kind,
                     long *jct_s, ts_pm_stats *st, ts_err *err)
{
    memset(st, 0, sizeof *st);
    if (nodes < 1 || gpus_per_node < 1 || nodes > TS_PM_NODES_MAX)
        return ts_err_set(err, TS_EINVAL, "cluster: nodes must be in [1, %d], GPUs per node >= 1",
                          TS_PM_NODES_MAX);
    int total = nodes * gpus_per_node;
    for (int j = 0; j < n; j++)
        if (jobs[j].replicas > total)
            return ts_err_set(err, TS_EINVAL, "%s: num_replicas: %d, more than the cluster's %d",
                              jobs[j].name, jobs[j].replicas, total);
    elastic_ctx ectx;
    run_ctx r = {.apps = apps, .jobs = jobs, .n = n, .nodes = nodes,
                 .gpus_per_node = gpus_per_node, .total = total, .ops = ops,
                 .e = kind != TS_PM_RIGID ? &ectx : NULL, .nn = (size_t)n + 1};
    r.via = r.e && ops->size;
    bool allocated = run_alloc(&r);
    int rc = 0;
    if (r.e && (rc = elastic_init(r.e, apps, jobs, n, nodes, gpus_per_node, kind, err)) != 0)
        goto out;
    if (!allocated) {
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
        goto out;
    }
    run_init_jobs(&r);
    if ((rc = ops->init(&r.state, n, 0, err)) != 0)
        goto out;
    long now = 0, held_gpu_s = 0, since = 0;
    for (int left = n; left > 0;) {
        held_gpu_s += replay_pm_round(r.pj, n);
        now += TS_PM_ROUND_S;
        int np = collect_pending(&r, now, &left);
        if (np == 0)
            continue;
        if ((rc = decide_round(&r, np, now, since, err)) != 0)
            goto out;
        since = now;
        if (now > VIRTUAL_TIME_MAX_S) {
            rc = ts_err_set(err, TS_EINVAL, "replay: not done after 100 days of virtual time");
            goto out;
        }
    }
    replay_pm_summarise(jobs, r.pj, n, held_gpu_s, total, jct_s, st);
out:
    run_free(&r);
    return rc;
}
