/*
 * replay_siloed.c - a replay where every tenant owns a partition.
 *
 * The Helios procedure (README "Experiment procedures" A) simulates each
 * Philly virtual cluster alone, on its own nodes, never lending or borrowing.
 * The cleanest way to guarantee that is to do the same: one engine run per
 * tenant on a cluster of that tenant's size with only its jobs, then pool
 * the per-job outcomes. The pooled figures weigh every job equally (Helios'
 * "all" row); the per-tenant share is the GPU-time its jobs held divided by
 * the time it had demand and by its partition size, and Jain's index is taken
 * over those shares. Pure: no I/O, no globals.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/replay.h"

double ts_replay_jain(const double *x, int n)
{
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        s += x[i];
        s2 += x[i] * x[i];
    }
    return s2 > 0 ? s * s / (n * s2) : 1.0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Length of the union of [submit, finish] over one tenant's jobs; they come
 * in arrival order, so one sweep merges the intervals. */
static double demand_s(const ts_replay_job *jobs, const ts_replay_outcome *o, const int *idx,
                       int n)
{
    double total = 0, lo = 0, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        double s = jobs[idx[i]].submit_s, f = o[idx[i]].finish_s;
        if (s > hi) {
            if (hi > lo)
                total += hi - lo;
            lo = s;
            hi = f;
        } else if (f > hi) {
            hi = f;
        }
    }
    if (hi > lo)
        total += hi - lo;
    return total;
}

static int pool(const ts_replay_config *base, const ts_replay_job *jobs, int njobs,
                const ts_replay_outcome *o, const ts_replay_tenant *tenants, int ntenants,
                const ts_replay_result *part, ts_replay_result *res, ts_err *err)
{
    memset(res, 0, sizeof *res);
    res->jobs = njobs;
    long total_gpus = 0;
    for (int k = 0; k < ntenants; k++) {
        total_gpus += (long)tenants[k].nodes * base->gpus_per_node;
        res->preemptions += part[k].preemptions;
        res->lost_gpu_s += part[k].lost_gpu_s;
    }
    if (njobs == 0)
        return 0;
    double *jct = malloc(sizeof *jct * (size_t)njobs);
    if (!jct)
        return ts_err_set(err, TS_ENOMEM, "replay: out of memory");
    double sum_jct = 0, sum_q = 0, held_gpu_s = 0;
    for (int j = 0; j < njobs; j++) {
        jct[j] = o[j].jct_s;
        sum_jct += o[j].jct_s;
        sum_q += o[j].queue_s;
        held_gpu_s += (o[j].jct_s - o[j].queue_s) * jobs[j].gpus;
        if (o[j].queue_s > res->max_wait_s)
            res->max_wait_s = o[j].queue_s;
        if (o[j].finish_s > res->makespan_s)
            res->makespan_s = o[j].finish_s;
    }
    qsort(jct, (size_t)njobs, sizeof *jct, cmp_double);
    res->avg_jct_s = sum_jct / njobs;
    res->p50_jct_s = ts_replay_percentile(jct, njobs, 50);
    res->p99_jct_s = ts_replay_percentile(jct, njobs, 99);
    res->avg_queue_s = sum_q / njobs;
    if (res->makespan_s > 0 && total_gpus > 0)
        res->utilization_pct = 100.0 * held_gpu_s / ((double)total_gpus * res->makespan_s);
    free(jct);
    return 0;
}

int ts_replay_run_siloed(const ts_replay_config *base, const ts_replay_policy_ops *policy,
                         const ts_replay_job *jobs, int njobs, const ts_replay_tenant *tenants,
                         int ntenants, ts_replay_outcome *out, ts_replay_result *res,
                         ts_replay_tenant_result *tres, double *jain, ts_err *err)
{
    if (ntenants < 1)
        return ts_err_set(err, TS_EINVAL, "replay: a siloed replay needs tenants");
    for (int j = 0; j < njobs; j++)
        if (jobs[j].tenant < 0 || jobs[j].tenant >= ntenants)
            return ts_err_set(err, TS_EINVAL, "jobs[%d] (%s).tenant: must be 0..%d", j,
                              jobs[j].name, ntenants - 1);
    size_t n = (size_t)(njobs > 0 ? njobs : 1);
    int *idx = malloc(sizeof *idx * n);
    ts_replay_job *sub = malloc(sizeof *sub * n);
    ts_replay_outcome *subo = malloc(sizeof *subo * n);
    ts_replay_outcome *own = out ? NULL : calloc(n, sizeof *own);
    ts_replay_result *part = calloc((size_t)ntenants, sizeof *part);
    double *share = malloc(sizeof *share * (size_t)ntenants);
    ts_replay_outcome *o = out ? out : own;
    int rc = 0;
    if (!idx || !sub || !subo || !o || !part || !share)
        rc = ts_err_set(err, TS_ENOMEM, "replay: out of memory");
    int nshare = 0;
    for (int k = 0; k < ntenants && rc == 0; k++) {
        int m = 0;
        for (int j = 0; j < njobs; j++)
            if (jobs[j].tenant == k) {
                idx[m] = j;
                sub[m++] = jobs[j];
            }
        ts_replay_tenant_result *tr = &tres[k];
        memset(tr, 0, sizeof *tr);
        if (m == 0)
            continue;
        ts_replay_config cfg = *base;
        cfg.nodes = tenants[k].nodes;
        rc = ts_replay_run(&cfg, policy, sub, m, subo, &part[k], err);
        if (rc)
            break;
        double held_gpu_s = 0;
        for (int i = 0; i < m; i++) {
            o[idx[i]] = subo[i];
            held_gpu_s += (subo[i].jct_s - subo[i].queue_s) * sub[i].gpus;
        }
        tr->jobs = m;
        tr->avg_jct_s = part[k].avg_jct_s;
        tr->demand_s = demand_s(jobs, o, idx, m);
        long gpus = (long)cfg.nodes * cfg.gpus_per_node;
        if (tr->demand_s > 0)
            tr->share_vs_guarantee = held_gpu_s / tr->demand_s / (double)gpus;
        share[nshare++] = tr->share_vs_guarantee;
    }
    if (rc == 0)
        rc = pool(base, jobs, njobs, o, tenants, ntenants, part, res, err);
    if (rc == 0 && jain)
        *jain = ts_replay_jain(share, nshare);
    free(idx);
    free(sub);
    free(subo);
    free(own);
    free(part);
    free(share);
    return rc;
}
