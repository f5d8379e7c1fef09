/*
 * replay_siloed.c - replays with tenants: every tenant on its own partition
 * (siloed), or all of them on one pooled cluster (shared).
 *
 * The Helios procedure (README "Experiment procedures" A) simulates each
 * Philly virtual cluster alone, on its own nodes, never lending or borrowing.
 * The cleanest way to guarantee that is to do the same: one engine run per
 * tenant on a cluster of that tenant's size with only its jobs, then pool
 * the per-job outcomes and the hold logs. The pooled figures weigh every job
 * equally (Helios' "all" row). A shared replay is one engine run on the whole
 * cluster with the tenants in the policy's view. Both are then measured by
 * the same timeline (replay_timeline.c) against the whole cluster (for a
 * siloed one: base's nodes, or the partitions if they are more), so their
 * fairness figures compare. Pure: no I/O, no globals.
 */
#include <stdlib.h>
#include <string.h>

#include "replay/replay.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int pool(const ts_replay_job *jobs, int njobs, const ts_replay_outcome *o,
                long total_gpus, int gpus_per_node, const ts_replay_result *part, int nparts,
                ts_replay_result *res, ts_err *err)
{
    memset(res, 0, sizeof *res);
    res->jobs = njobs;
    for (int k = 0; k < nparts; k++) {
        res->preemptions += part[k].preemptions;
        res->moves += part[k].moves;
        res->time_shares += part[k].time_shares;
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
        if (jobs[j].gpus > gpus_per_node) {
            res->gang_jobs++;
            res->avg_gang_wait_s += o[j].queue_s;
        }
        held_gpu_s += (o[j].jct_s - o[j].queue_s) * jobs[j].gpus;
        if (o[j].queue_s > res->max_wait_s)
            res->max_wait_s = o[j].queue_s;
        if (o[j].finish_s > res->makespan_s)
            res->makespan_s = o[j].finish_s;
    }
    qsort(jct, (size_t)njobs, sizeof *jct, cmp_double);
    res->avg_jct_s = sum_jct / njobs;
    res->p50_jct_s = replay_percentile(jct, njobs, 50);
    res->p99_jct_s = replay_percentile(jct, njobs, 99);
    res->avg_queue_s = sum_q / njobs;
    if (res->gang_jobs > 0)
        res->avg_gang_wait_s /= res->gang_jobs;
    if (res->makespan_s > 0 && total_gpus > 0)
        res->utilization_pct = 100.0 * held_gpu_s / ((double)total_gpus * res->makespan_s);
    free(jct);
    return 0;
}

static int check_tenants(const ts_replay_job *jobs, int njobs, const ts_replay_tenant *tenants,
                         int ntenants, ts_err *err)
{
    if (ntenants < 1)
        return ts_err_set(err, TS_EINVAL, "replay: a replay with tenants needs tenants");
    for (int k = 0; k < ntenants; k++)
        if (tenants[k].gpus < 0)
            return ts_err_set(err, TS_EINVAL, "tenants[%d] (%s).gpus: must be >= 0", k,
                              tenants[k].name);
    for (int j = 0; j < njobs; j++)
        if (jobs[j].tenant < 0 || jobs[j].tenant >= ntenants)
            return ts_err_set(err, TS_EINVAL, "jobs[%d] (%s).tenant: must be 0..%d", j,
                              jobs[j].name, ntenants - 1);
    return 0;
}

/* Appends the holds of a partition's run, its job indices mapped back. */
static int append_log(ts_replay_log *dst, const ts_replay_log *src, const int *idx, ts_err *err)
{
    if (dst->n + src->n > dst->cap) {
        int nc = dst->cap ? dst->cap : 1024;
        while (nc < dst->n + src->n)
            nc *= 2;
        ts_replay_hold *nh = realloc(dst->holds, sizeof *nh * (size_t)nc);
        if (!nh)
            return ts_err_set(err, TS_ENOMEM, "replay: out of memory for the hold log");
        dst->holds = nh;
        dst->cap = nc;
    }
    for (int i = 0; i < src->n; i++) {
        ts_replay_hold h = src->holds[i];
        h.job = idx[h.job];
        dst->holds[dst->n++] = h;
    }
    return 0;
}

/* Each tenant alone: one engine run per tenant with jobs, on a partition of
 * its GPUs, the outcomes put back at the jobs' places in o and the hold logs
 * pooled into *all. *measured_gpus becomes the larger of the cluster and the
 * partitions together, so that the fairness figures compare with a shared
 * replay's. */
static int run_siloed(const ts_replay_config *base, const ts_replay_policy_ops *policy,
                      const ts_replay_job *jobs, int njobs, const ts_replay_tenant *tenants,
                      int ntenants, ts_replay_outcome *o, ts_replay_result *res,
                      ts_replay_log *all, long *measured_gpus, ts_err *err)
{
    size_t n = (size_t)(njobs > 0 ? njobs : 1);
    int *idx = malloc(sizeof *idx * n);
    ts_replay_job *sub = malloc(sizeof *sub * n);
    ts_replay_outcome *subo = malloc(sizeof *subo * n);
    ts_replay_result *part = calloc((size_t)ntenants, sizeof *part);
    ts_replay_log one = {0};
    int rc = 0;
    if (!idx || !sub || !subo || !part)
        rc = ts_err_set(err, TS_ENOMEM, "replay: out of memory");
    long partition_gpus = 0;
    for (int k = 0; k < ntenants && rc == 0; k++) {
        int m = 0;
        for (int j = 0; j < njobs; j++)
            if (jobs[j].tenant == k) {
                idx[m] = j;
                sub[m++] = jobs[j];
            }
        partition_gpus += tenants[k].gpus;
        if (m == 0)
            continue;
        ts_replay_config cfg = *base;
        cfg.tenants = NULL;
        cfg.ntenants = 0;
        bool whole_nodes = tenants[k].gpus % base->gpus_per_node == 0;
        cfg.nodes = whole_nodes ? tenants[k].gpus / base->gpus_per_node : 1;
        cfg.gpus_per_node = whole_nodes ? base->gpus_per_node : tenants[k].gpus;
        if (cfg.nodes < 1) {
            rc = ts_err_set(err, TS_EINVAL, "tenants[%d] (%s).gpus: has %d jobs but no GPUs", k,
                            tenants[k].name, m);
            break;
        }
        one.n = 0;
        rc = ts_replay_run_logged(&cfg, policy, sub, m, subo, &part[k], &one, err);
        if (rc == 0)
            rc = append_log(all, &one, idx, err);
        for (int i = 0; i < m && rc == 0; i++)
            o[idx[i]] = subo[i];
    }
    if (rc == 0)
        rc = pool(jobs, njobs, o, partition_gpus, base->gpus_per_node, part, ntenants, res, err);
    if (partition_gpus > *measured_gpus)
        *measured_gpus = partition_gpus;
    ts_replay_log_free(&one);
    free(idx);
    free(sub);
    free(subo);
    free(part);
    return rc;
}

int ts_replay_run_tenants(const ts_replay_config *base, const ts_replay_policy_ops *policy,
                          ts_replay_tenancy tenancy, const ts_replay_job *jobs, int njobs,
                          const ts_replay_tenant *tenants, int ntenants, ts_replay_outcome *out,
                          ts_replay_result *res, ts_replay_tenant_result *tres,
                          ts_replay_fairness *fair, ts_replay_log *log, ts_err *err)
{
    int rc = check_tenants(jobs, njobs, tenants, ntenants, err);
    if (rc)
        return rc;
    /* the outcomes go to out, or to an array of our own the metrics read */
    ts_replay_outcome *own = out ? NULL : calloc((size_t)(njobs > 0 ? njobs : 1), sizeof *own);
    ts_replay_outcome *o = out ? out : own;
    if (!o)
        return ts_err_set(err, TS_ENOMEM, "replay: out of memory");
    ts_replay_log all = {0};
    long measured_gpus = (long)base->nodes * base->gpus_per_node;
    if (tenancy == TS_REPLAY_SILOED) {
        rc = run_siloed(base, policy, jobs, njobs, tenants, ntenants, o, res, &all,
                        &measured_gpus, err);
    } else {
        ts_replay_config cfg = *base;
        cfg.tenants = tenants;
        cfg.ntenants = ntenants;
        rc = ts_replay_run_logged(&cfg, policy, jobs, njobs, o, res, &all, err);
    }
    if (rc == 0)
        rc = replay_tenant_metrics(jobs, njobs, o, &all, tenants, ntenants, measured_gpus, tres,
                                   fair, err);
    if (rc == 0 && log) {
        ts_replay_log_free(log);
        *log = all;
        all = (ts_replay_log){0};
    }
    ts_replay_log_free(&all);
    free(own);
    return rc;
}
