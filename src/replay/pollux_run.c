/*
 * pollux_run.c - any replay policy (ts_replay_policy_ops: fifo, sjf, srtf,
 * the replay's tiresias, and `tessera`, the production cycle) deciding a
 * Pollux workload whose jobs advance by the job model (pollux_model.h), in
 * the artifact's 60-s rounds. The policy answers which submitted jobs run;
 * a job it starts goes where the policy put it when it says (`tessera`: the
 * cycle's nodes, a gang of node-sized tasks and the remainder), else on the
 * nodes with the most free GPUs, as the artifact's Tiresias does. Jobs are
 * rigid here: the GPU count and the batch size the workload gives.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/pollux_model.h"
#include "replay/replay.h"

#define VIRTUAL_TIME_MAX_S (100L * 24 * 3600)

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
    ts_pm_job_reallocate(&t, cnt, m);
    double st, sy;
    ts_pm_step_time(t.app, t.count, t.nnodes, t.atomic_bsz, &st, &sy);
    int batch = replicas * t.atomic_bsz * (t.accum_steps + 1);
    double goodput = ts_pm_gain(t.app, batch, t.epoch) / (st + (st - sy) * t.accum_steps);
    double todo = ts_pm_epoch_progress(t.app, ts_pm_app_epochs(t.app)) - t.progress;
    return (todo > 0 ? todo / goodput : 0) + (j->nnodes ? j->rescale_s : TS_PM_RESCALE_S);
}

/* GPUs per node the job gets: the policy's, when it says and they are free;
 * else the most free node first, node after node. */
static void place(const ts_replay_policy_ops *ops, void *state, int j, int want, int nodes,
                  int *node_free, int *row)
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
    for (int have = 0; have < want;) {
        int best = -1;
        for (int i = 0; i < nodes; i++)
            if (node_free[i] > 0 && (best < 0 || node_free[i] > node_free[best]))
                best = i;
        if (best < 0)
            break;
        int take = want - have < node_free[best] ? want - have : node_free[best];
        row[best] += take;
        node_free[best] -= take;
        have += take;
    }
}

/* The row's nodes as the model's placement: counts, largest first. */
static int counts_of(const int *row, int nodes, int *cnt)
{
    int m = 0;
    for (int i = 0; i < nodes && m < TS_PM_NODES_MAX; i++)
        if (row[i] > 0) {
            int k = m++;
            while (k > 0 && cnt[k - 1] < row[i]) {
                cnt[k] = cnt[k - 1];
                k--;
            }
            cnt[k] = row[i];
        }
    return m;
}

int ts_pm_run_policy(const ts_pm_app *const *apps, const ts_pm_wjob *jobs, int n, int nodes,
                     int gpus_per_node, const ts_replay_policy_ops *ops, long *jct_s,
                     ts_pm_stats *st, ts_err *err)
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
    size_t nn = (size_t)n + 1;
    ts_pm_job *pj = calloc(nn, sizeof *pj);
    ts_replay_job *rj = calloc(nn, sizeof *rj);
    int *pending = calloc(nn, sizeof *pending);
    bool *holding = calloc(nn, sizeof *holding), *run = calloc(nn, sizeof *run);
    double *work_left = calloc(nn, sizeof *work_left), *at_risk = calloc(nn, sizeof *at_risk);
    int *alloc = calloc(nn * (size_t)nodes, sizeof *alloc);
    int *node_free = calloc((size_t)nodes, sizeof *node_free);
    void *state = NULL;
    int rc = 0;
    if (!pj || !rj || !pending || !holding || !run || !work_left || !at_risk || !alloc ||
        !node_free) {
        rc = ts_err_set(err, TS_ENOMEM, "out of memory");
        goto out;
    }
    for (int j = 0; j < n; j++) {
        ts_pm_job_init(&pj[j], apps[jobs[j].app], jobs[j].submit_s, jobs[j].batch_size);
        snprintf(rj[j].name, sizeof rj[j].name, "%s", jobs[j].name);
        rj[j].submit_s = jobs[j].submit_s;
        rj[j].gpus = jobs[j].replicas;
        rj[j].work_s = left_s(&pj[j], jobs[j].replicas, gpus_per_node);
    }
    if ((rc = ops->init(&state, n, 0, err)) != 0)
        goto out;
    long now = 0, held_gpu_s = 0, since = 0;
    for (int left = n; left > 0;) {
        for (int j = 0; j < n; j++) {
            int g = 0;
            for (int i = 0; i < pj[j].nnodes; i++)
                g += pj[j].count[i];
            if (pj[j].done_s < 0)
                held_gpu_s += (long)g * TS_PM_ROUND_S;
            ts_pm_job_step(&pj[j], TS_PM_ROUND_S);
        }
        now += TS_PM_ROUND_S;
        int np = 0;
        left = 0;
        for (int j = 0; j < n; j++) {
            bool done = pj[j].done_s >= 0;
            left += !done;
            if (done && pj[j].nnodes > 0) { /* a finished job gives its GPUs back */
                ts_pm_job_reallocate(&pj[j], NULL, 0);
                memset(&alloc[(size_t)j * nodes], 0, (size_t)nodes * sizeof *alloc);
            }
            if (!done && jobs[j].submit_s <= now) {
                pending[np++] = j;
                holding[j] = pj[j].nnodes > 0;
                work_left[j] = left_s(&pj[j], jobs[j].replicas, gpus_per_node);
            }
        }
        if (np == 0)
            continue;
        ts_replay_view v = {.now_s = (double)now, .since_s = (double)since, .jobs = rj,
                            .njobs = n, .pending = pending, .npending = np,
                            .holding = holding, .work_left_s = work_left, .total_gpus = total,
                            .at_risk_s = at_risk, .gpus_per_node = gpus_per_node};
        memset(run, 0, nn * sizeof *run);
        ops->decide(state, &v, run);
        since = now;
        for (int k = 0; k < np; k++) { /* holders not chosen stop */
            int j = pending[k];
            if (holding[j] && !run[j]) {
                ts_pm_job_reallocate(&pj[j], NULL, 0);
                memset(&alloc[(size_t)j * nodes], 0, (size_t)nodes * sizeof *alloc);
                holding[j] = false;
            }
        }
        for (int i = 0; i < nodes; i++)
            node_free[i] = gpus_per_node;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < nodes; i++)
                node_free[i] -= alloc[(size_t)j * nodes + i];
        int chosen = 0;
        for (int k = 0; k < np; k++) {
            int j = pending[k];
            if (!run[j])
                continue;
            chosen += jobs[j].replicas;
            if (holding[j])
                continue;
            int *row = &alloc[(size_t)j * nodes], cnt[TS_PM_NODES_MAX];
            place(ops, state, j, jobs[j].replicas, nodes, node_free, row);
            ts_pm_job_reallocate(&pj[j], cnt, counts_of(row, nodes, cnt));
        }
        if (chosen > total) {
            rc = ts_err_set(err, TS_EINVAL, "policy %s: chose %d GPUs of %d", ops->name, chosen,
                            total);
            goto out;
        }
        if (now > VIRTUAL_TIME_MAX_S) {
            rc = ts_err_set(err, TS_EINVAL, "replay: not done after 100 days of virtual time");
            goto out;
        }
    }
    double sum = 0;
    for (int j = 0; j < n; j++) {
        long jct = pj[j].done_s - jobs[j].submit_s;
        if (jct_s)
            jct_s[j] = jct;
        sum += (double)jct;
        if (pj[j].done_s > st->makespan_s)
            st->makespan_s = pj[j].done_s;
        st->restarts += pj[j].restarts > 0 ? pj[j].restarts : 0;
    }
    st->avg_jct_s = n ? sum / n : 0;
    st->util_pct = st->makespan_s
                       ? 100.0 * (double)held_gpu_s / ((double)total * (double)st->makespan_s)
                       : 0;
out:
    if (state)
        ops->free(state);
    free(pj);
    free(rj);
    free(pending);
    free(holding);
    free(run);
    free(work_left);
    free(at_risk);
    free(alloc);
    free(node_free);
    return rc;
}
