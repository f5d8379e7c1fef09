/*
 * cycle_place.c - placing one job, all or nothing, on a cluster and its gang
 * index: the real cluster during a cycle, or the scratch copy when planning.
 *
 * Gangs of whole-GPU tasks go to ts_gang_place (smallest subtree at the
 * required level, packed, rail-aligned on request). Other jobs (CPU-only
 * tasks, GPU shares, MIG instances, or a mix) are placed task by task, each
 * on the node that keeps the most whole GPUs free (best fit: fewest free
 * GPUs left, then least free CPU), with "node" as the only topology
 * constraint they honour (every task on one node); a task that does not fit
 * rolls the earlier ones back. CPU-only tasks on GPU nodes must leave the
 * CPU and memory the configuration reserves per idle GPU, so they cannot
 * strand a node's GPUs by taking its cores.
 */
#include <stdio.h>
#include <string.h>

#include "sched/cycle_internal.h"

static bool whole_gpu_task(const ts_request *r)
{
    return r->num_gpu >= 1 && r->gpu_milli >= TS_MILLI_PER_GPU && r->mig_profile < 0;
}

int64_t cycle_job_gpus(const ts_job *job)
{
    int64_t n = 0;
    for (int i = 0; i < job->ntasks; i++)
        n += job->tasks[i].mig_profile >= 0 ? 1 : job->tasks[i].num_gpu;
    return n;
}

/* A CPU-only task may use a GPU node only beyond what its idle GPUs keep. */
static bool proportional_ok(const ts_sched *s, const ts_node *n, const ts_request *r)
{
    if (r->num_gpu > 0 || r->mig_profile >= 0 || n->model < 0 || n->gpus_free == 0)
        return true;
    int64_t keep_cpu = s->cfg.reserve_cpu_milli_per_gpu[n->model] * n->gpus_free;
    int64_t keep_mem = s->cfg.reserve_mem_mib_per_gpu[n->model] * n->gpus_free;
    return n->cpu_milli - n->cpu_used - r->cpu_milli >= keep_cpu &&
           n->mem_mib - n->mem_used - r->mem_mib >= keep_mem;
}

/* Best node for one non-gang task, or -1. only >= 0 restricts to that node.
 * GPU tasks: best fit over every node. CPU-only tasks: the first node with
 * no idle GPU to strand (CPU-only nodes, or GPU nodes already full) that
 * fits, searched from where the last one was found (next fit, so a cycle
 * that starts many CPU tasks does not rescan the same full nodes); failing
 * that, the GPU node with the fewest idle GPUs. */
static int best_node(ts_sched *s, const ts_cluster *c, const ts_request *r, int only,
                     bool *blocked_by_reserve)
{
    int best = -1;
    int64_t best_gpus = 0, best_cpu = 0;
    bool cpu_task = r->num_gpu == 0 && r->mig_profile < 0;
    int n = only >= 0 ? 1 : c->nnodes;
    int start = only >= 0 ? only : cpu_task && s->cpu_cursor < c->nnodes ? s->cpu_cursor : 0;
    for (int k = 0; k < n; k++) {
        int i = start + k < c->nnodes ? start + k : start + k - c->nnodes;
        const ts_node *nd = &c->nodes[i];
        if (!ts_gang_index_node_enabled(c == s->c ? s->ix : s->six, i) || !ts_node_fits(nd, r))
            continue;
        if (!proportional_ok(s, nd, r)) {
            *blocked_by_reserve = true;
            continue;
        }
        int64_t gpus = nd->gpus_free, cpu = nd->cpu_milli - nd->cpu_used;
        if (cpu_task && gpus == 0 && only < 0) {
            s->cpu_cursor = i;
            return i;
        }
        if (best < 0 || gpus < best_gpus || (gpus == best_gpus && cpu < best_cpu) ||
            (gpus == best_gpus && cpu == best_cpu && i < best)) {
            best = i;
            best_gpus = gpus;
            best_cpu = cpu;
        }
    }
    return best;
}

/* Tasks first..ntasks-1 each on its best node (only >= 0: all on that one).
 * Returns how many were bound; on a shortfall the caller rolls back. */
static int bind_tasks(ts_sched *s, ts_cluster *c, ts_gang_index *ix, const ts_job *job,
                      int only, ts_alloc *allocs, bool *reserve_hit)
{
    int done = 0;
    for (; done < job->ntasks; done++) {
        const ts_request *r = &job->tasks[done];
        int at = best_node(s, c, r, only, reserve_hit);
        ts_alloc a;
        if (at < 0 || ts_node_choose_gpus(&c->nodes[at], r, &a) != 0)
            break;
        a.node = at;
        if (ts_node_assign(&c->nodes[at], r, &a) != 0)
            break;
        allocs[done] = a;
        ts_gang_index_node_changed(ix, at);
    }
    return done;
}

static void unbind(ts_cluster *c, ts_gang_index *ix, ts_alloc *allocs, int n)
{
    while (n-- > 0) {
        ts_node_release(&c->nodes[allocs[n].node], &allocs[n]);
        ts_gang_index_node_changed(ix, allocs[n].node);
    }
}

static int place_tasks(ts_sched *s, ts_cluster *c, ts_gang_index *ix, const ts_job *job,
                       ts_alloc *allocs, int *reason, char *why, size_t whylen)
{
    bool one_node = job->required_level == TS_GANG_LEVEL_NODE && job->ntasks > 1;
    bool reserve_hit = false;
    int most = 0;
    if (one_node) {
        for (int i = 0; i < c->nnodes; i++) {
            if (!ts_node_fits(&c->nodes[i], &job->tasks[0]))
                continue;
            int done = bind_tasks(s, c, ix, job, i, allocs, &reserve_hit);
            if (done == job->ntasks)
                return 0;
            unbind(c, ix, allocs, done);
            most = done > most ? done : most;
        }
    } else {
        int done = bind_tasks(s, c, ix, job, -1, allocs, &reserve_hit);
        if (done == job->ntasks)
            return 0;
        unbind(c, ix, allocs, done);
        most = done;
    }
    if (most > 0) {
        *reason = TS_PEND_GANG;
        snprintf(why, whylen, "%d of %d tasks fit%s; the job starts all at once or not at all",
                 most, job->ntasks, one_node ? " on one node" : "");
    } else if (reserve_hit) {
        *reason = TS_PEND_CAPACITY;
        snprintf(why, whylen, "tasks[0]: the CPU and memory left on GPU nodes are kept for "
                 "their idle GPUs");
    } else {
        *reason = TS_PEND_CAPACITY;
        snprintf(why, whylen, "tasks[0]: no node has the CPU, memory and GPU room it asks for");
    }
    return TS_ENOSPC;
}

int cycle_place(ts_sched *s, ts_cluster *c, ts_gang_index *ix, const ts_job *job,
                ts_alloc *allocs, int *reason, char *why, size_t whylen)
{
    bool gang = true;
    for (int i = 0; i < job->ntasks && gang; i++)
        gang = whole_gpu_task(&job->tasks[i]);
    if (!gang)
        return place_tasks(s, c, ix, job, allocs, reason, why, whylen);
    ts_gang_spec spec = {
        .tasks = job->tasks,
        .ntasks = job->ntasks,
        .required_level = job->required_level,
        .preferred_level = job->preferred_level,
        .rail_aligned = job->rail_aligned,
    };
    ts_gang_result res;
    ts_err err;
    int rc = ts_gang_place(ix, &spec, allocs, &res, &err);
    if (rc == 0)
        return 0;
    if (rc != TS_ENOSPC) {
        *reason = TS_PEND_INVALID;
        snprintf(why, whylen, "%s", err.msg);
        return TS_ENOSPC;
    }
    switch (res.reason) {
    case TS_GANG_TOPOLOGY:
        *reason = TS_PEND_TOPOLOGY;
        break;
    case TS_GANG_FRAGMENTATION:
        *reason = job->ntasks > 1 ? TS_PEND_GANG : TS_PEND_FRAGMENTATION;
        break;
    default:
        *reason = TS_PEND_CAPACITY;
        break;
    }
    snprintf(why, whylen, "%s", res.why);
    return TS_ENOSPC;
}

int cycle_unplace(ts_cluster *c, ts_gang_index *ix, const ts_job *job, const ts_alloc *allocs)
{
    int rc = 0;
    for (int i = 0; i < job->ntasks; i++) {
        const ts_alloc *a = &allocs[i];
        if (a->node < 0 || a->node >= c->nnodes)
            return TS_EINVAL;
        int r = ts_node_release(&c->nodes[a->node], a);
        if (r != 0)
            rc = r;
        ts_gang_index_node_changed(ix, a->node);
    }
    return rc;
}
