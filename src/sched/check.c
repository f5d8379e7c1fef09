/*
 * check.c - ts_sched_check: what the scheduler holds, recomputed from the
 * jobs that hold allocations and compared (include/tessera/cycle.h).
 *
 * Three invariants, each recomputed from scratch:
 * - the cluster: every node's CPU and memory in use, and each GPU's milli,
 *   GPU memory and task count, equal the sums of the allocations on it;
 * - the quota: each tenant's usage, per tier and dimension, equals the
 *   demand of its jobs' allocations plus its sub-tenants' usage;
 * - the gang index: each node's free whole GPUs (0 on a disabled node) as
 *   the index last saw them equal the node's.
 * Costs O(nodes x GPUs + tasks + tenants x tiers x dimensions) and allocates
 * per call: for test builds and tests, after every change (as a database
 * asserts its pages), not for the production path.
 */
#include <stdlib.h>
#include <string.h>

#include "sched/cycle_internal.h"

#define TIERS 2 /* enum ts_tier */

/* What the allocations put on one node. */
typedef struct node_sum {
    int64_t cpu, mem;
    int ntasks;
    int32_t milli[TS_NODE_MAX_GPUS];
    int64_t gmem[TS_NODE_MAX_GPUS];
    int32_t gtasks[TS_NODE_MAX_GPUS];
} node_sum;

static int sum_allocs(const ts_sched *s, const ts_job *jobs, int n, node_sum *ns, ts_err *err)
{
    for (int k = 0; k < n; k++) {
        const ts_job *j = &jobs[k];
        for (int t = 0; j->allocs && t < j->ntasks; t++) {
            const ts_alloc *a = &j->allocs[t];
            if (a->node < 0 || a->node >= s->live_c->nnodes || a->ngpu < 0 ||
                a->ngpu > TS_NODE_MAX_GPUS)
                return ts_err_set(err, TS_EINVAL, "check: job %lld task %d: allocation "
                                  "names node %d of %d", (long long)j->id, t, a->node,
                                  s->live_c->nnodes);
            node_sum *x = &ns[a->node];
            x->cpu += a->cpu_milli;
            x->mem += a->mem_mib;
            x->ntasks++;
            for (int g = 0; g < a->ngpu; g++) {
                int i = a->gpu[g];
                if (i < 0 || i >= s->live_c->nodes[a->node].ngpu)
                    return ts_err_set(err, TS_EINVAL, "check: job %lld task %d: GPU %d of "
                                      "node %s", (long long)j->id, t, i,
                                      s->live_c->nodes[a->node].name);
                x->gtasks[i]++;
                if (a->mig_profile < 0) {
                    x->milli[i] += a->gpu_milli;
                    x->gmem[i] += a->gpu_mem_mib;
                }
            }
        }
    }
    return 0;
}

static int check_nodes(const ts_sched *s, const node_sum *ns, ts_err *err)
{
    for (int i = 0; i < s->live_c->nnodes; i++) {
        const ts_node *n = &s->live_c->nodes[i];
        const node_sum *x = &ns[i];
        if (n->cpu_used != x->cpu || n->mem_used != x->mem || n->ntasks != x->ntasks)
            return ts_err_set(err, TS_EINVAL, "check: node %s holds cpu %lld, memory %lld, %d "
                              "tasks; its allocations %lld, %lld, %d", n->name,
                              (long long)n->cpu_used, (long long)n->mem_used, n->ntasks,
                              (long long)x->cpu, (long long)x->mem, x->ntasks);
        for (int g = 0; g < n->ngpu; g++) {
            const ts_gpu *gp = &n->gpu[g];
            bool mig = gp->mode == TS_GPU_MIG;
            if (gp->ntasks != x->gtasks[g] ||
                (!mig && (gp->milli_used != x->milli[g] || gp->mem_used_mib != x->gmem[g])))
                return ts_err_set(err, TS_EINVAL, "check: node %s GPU %d holds %d tasks, "
                                  "%d milli, %lld MiB; its allocations %d, %d, %lld", n->name,
                                  g, gp->ntasks, gp->milli_used, (long long)gp->mem_used_mib,
                                  x->gtasks[g], x->milli[g], (long long)x->gmem[g]);
        }
    }
    return 0;
}

static int check_index(const ts_sched *s, ts_err *err)
{
    for (int i = 0; i < s->live_c->nnodes; i++) {
        const ts_node *n = &s->live_c->nodes[i];
        int f = 0;
        for (int g = 0; g < n->ngpu; g++)
            f += n->gpu[g].mode != TS_GPU_MIG && n->gpu[g].ntasks == 0 &&
                 n->gpu[g].milli_used == 0;
        if (!ts_gang_index_node_enabled(s->live_ix, i))
            f = 0;
        int seen = ts_gang_index_node_free(s->live_ix, i);
        if (seen != f)
            return ts_err_set(err, TS_EINVAL, "check: the gang index sees %d free GPUs on "
                              "node %s, which has %d", seen, n->name, f);
    }
    return 0;
}

/* use[(t * TIERS + tier) * TS_RES_DIMS + d]: each tenant's own jobs'
 * demand, then added up its ancestors, compared with the quota. */
static int check_quota(const ts_sched *s, const ts_job *jobs, int n, ts_err *err)
{
    const ts_tenants *ts = ts_quota_tenants(s->live_q);
    size_t cells = (size_t)ts->n * TIERS * TS_RES_DIMS;
    int64_t *use = calloc(cells ? cells : 1, sizeof *use);
    if (!use)
        return ts_err_set(err, TS_ENOMEM, "check: out of memory");
    int rc = 0;
    for (int k = 0; rc == 0 && k < n; k++) {
        const ts_job *j = &jobs[k];
        int64_t demand[TS_RES_DIMS];
        if (!j->allocs || j->tenant < 0 || j->tenant >= ts->n || j->tier < 0 ||
            j->tier >= TIERS || cycle_job_demand(s, j, j->allocs, -1, demand) != 0) {
            rc = ts_err_set(err, TS_EINVAL, "check: job %lld: no demand to charge",
                            (long long)j->id);
            break;
        }
        for (int t = j->tenant; t >= 0; t = ts->t[t].parent)
            for (int d = 0; d < TS_RES_DIMS; d++)
                use[((size_t)t * TIERS + (size_t)j->tier) * TS_RES_DIMS + (size_t)d] +=
                    demand[d];
    }
    for (int t = 0; rc == 0 && t < ts->n; t++)
        for (int tier = 0; rc == 0 && tier < TIERS; tier++)
            for (int d = 0; rc == 0 && d < TS_RES_DIMS; d++) {
                int64_t want = use[((size_t)t * TIERS + (size_t)tier) * TS_RES_DIMS +
                                   (size_t)d];
                int64_t have = ts_quota_usage_tier(s->live_q, t, tier, d);
                if (have != want)
                    rc = ts_err_set(err, TS_EINVAL, "check: tenant %s tier %d dimension %d "
                                    "uses %lld; its jobs hold %lld", ts->t[t].name, tier, d,
                                    (long long)have, (long long)want);
            }
    free(use);
    return rc;
}

int ts_sched_check(const ts_sched *s, const ts_job *jobs, int njobs, ts_err *err)
{
    node_sum *ns = calloc((size_t)s->live_c->nnodes + 1, sizeof *ns);
    if (!ns)
        return ts_err_set(err, TS_ENOMEM, "check: out of memory");
    int rc = sum_allocs(s, jobs, njobs, ns, err);
    if (rc == 0)
        rc = check_nodes(s, ns, err);
    free(ns);
    if (rc == 0)
        rc = check_index(s, err);
    if (rc == 0)
        rc = check_quota(s, jobs, njobs, err);
    return rc;
}
