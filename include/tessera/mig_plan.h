/*
 * mig_plan.h - dynamic MIG: which idle MIG instances to destroy so that MIG
 * requests that now wait can be placed.
 *
 * A MIG GPU carved into idle instances of the wrong profiles (seven idle 1g
 * instances and a waiting 3g request) has the capacity but not the shape.
 * ts_mig_plan takes the waiting MIG demand in scheduling order and answers a
 * short list of changes, one per GPU: the GPU's layout less some idle
 * instances. It never removes a busy instance, never changes a GPU's mode and
 * never touches a GPU that is not in MIG mode; new instances are not part of
 * a change, they are created by placement (ts_node_choose_gpus) as usual.
 * ts_mig_plan_apply writes the changes into a cluster once the node agent has
 * reshaped the GPUs (or, in the simulator, at once).
 *
 * Everything here is pure: the cluster is only read by the planner, time and
 * randomness play no part, and the answer is a function of the input.
 * Ownership: every array is the caller's; the planner allocates scratch space
 * for the call and frees it before returning. Not thread-safe on one cluster
 * (the shells own the locks). The rules are in docs/scheduler.md, "Dynamic
 * MIG", and in mig_plan.c.
 *
 * Cost: with U demanded instances (the sum of the counts), M MIG GPUs on the
 * nodes the requests admit and V one layout validation (at most 7 instances
 * on 8 slots, about a hundred steps), placing or cutting for one instance is
 * O(M * 8 * V); each tentative cut is verified by replaying the instances
 * placed so far, O(U * M * 8 * V), and there are at most 4 * K such
 * replays. A demand whose next instance can be neither placed nor given room
 * stops there, so hopeless demand costs one scan. Memory: one int per node
 * plus a copy of each node the plan touches. Measured (-O2, one core of a
 * shared machine): 8,000 A100 GPUs in MIG mode, 36 demanded instances,
 * K = 8: 16-32 ms; 800 GPUs: 2-9 ms. Pass only the MIG requests that wait,
 * and bound the work per cycle with max_changes.
 */
#ifndef TESSERA_MIG_PLAN_H
#define TESSERA_MIG_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "tessera/error.h"
#include "tessera/mig.h"
#include "tessera/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest count of one demand (a job array of MIG tasks is several). */
#define TS_MIG_DEMAND_COUNT_MAX 65536
/* A reasonable bound on GPUs reshaped by one scheduling cycle. */
#define TS_MIG_PLAN_CHANGES_DEFAULT 8

/* count identical MIG requests that wait. req is a MIG request
 * (req.mig_profile >= 0, num_gpu 1, gpu_milli 0); its model_mask, cpu_milli
 * and mem_mib constrain the nodes exactly as ts_node_choose_gpus does. */
typedef struct ts_mig_demand {
    ts_request req;
    int count; /* 1..TS_MIG_DEMAND_COUNT_MAX */
} ts_mig_demand;

/* One GPU reshaped: its layout becomes `layout`, which is the layout the GPU
 * had when planned less the `removed` instances, in the same order, busy
 * flags as they were. Every removed instance was idle. */
typedef struct ts_mig_change {
    int node;                                      /* index in the cluster */
    int gpu;                                       /* index on the node */
    ts_mig_layout layout;                          /* after the change */
    int nremoved;                                  /* >= 1 */
    ts_mig_instance removed[TS_MIG_MAX_INSTANCES]; /* to destroy, idle */
    int first_demand; /* index of the demand that first needed it */
} ts_mig_change;

typedef struct ts_mig_plan_opts {
    /* K: at most this many GPUs reshaped by one call (changes listed);
     * 0 means as many as `cap` holds. The effective bound is min(K, cap). */
    size_t max_changes;
    /* NULL, or one flag per node: true = drained or otherwise closed to new
     * work; such a node is neither counted as room nor reshaped. */
    const bool *excluded;
    /* Reshape only GPUs that run nothing now (ntasks == 0), for agents that
     * reconfigure a GPU only when it is idle; false: any MIG GPU, removing
     * idle instances next to busy ones (NVML destroys a GPU instance while
     * other instances of the GPU run). */
    bool idle_gpus_only;
} ts_mig_plan_opts;

/*
 * Plans changes for demand[0..n-1], served in the order given (the caller's
 * scheduling order). Writes at most min(K, cap) changes to out, their number
 * to *nout, and, when served is not NULL, served[i] = how many of demand i's
 * instances place once the changes are applied (ts_mig_plan_apply) and the
 * demands are placed in order, each as many times as it fits up to its
 * count, each instance on the node ts_mig_plan_node picks, with
 * ts_node_choose_gpus and ts_node_assign. Demands that already place count
 * as served and need no change. Against no change at all, the first demand
 * whose served count differs is served more: a later demand may lose an idle
 * instance to an earlier one, never the reverse. opts may be NULL (K = cap,
 * no node excluded, any MIG GPU).
 *
 * Returns 0 (also when nothing can be served: *nout is 0 then), TS_EINVAL
 * naming the argument or field ("demand[2].count: must be 1..65536"), or
 * TS_ENOMEM. On error *nout is 0 and served[] is all 0.
 */
int ts_mig_plan(const ts_cluster *c, const ts_mig_demand *demand, size_t n,
                const ts_mig_plan_opts *opts, ts_mig_change *out, size_t cap, size_t *nout,
                int *served, ts_err *err);

/*
 * The node the planner counts a MIG request on: the lowest-index node with an
 * idle instance of the profile, else the node with a MIG GPU that has room
 * for one and the fewest free memory slices (the tightest hole; ties: lowest
 * node index). Only nodes whose model, CPU and memory admit req and that
 * opts does not exclude count. Returns the node index, TS_ENOSPC when no
 * node can take it, TS_EINVAL when req is not a MIG request.
 */
int ts_mig_plan_node(const ts_cluster *c, const ts_request *req, const ts_mig_plan_opts *opts);

/*
 * Writes changes[0..n-1] into c: each GPU's layout becomes the change's
 * layout, busy flags taken from the GPU as it is now, and the node's version
 * is bumped. All or nothing: every change is checked first, and TS_EINVAL
 * (bad node or GPU index, a GPU not in MIG mode, an invalid layout, two
 * changes to one GPU, a change that would remove an instance that is busy
 * now) or TS_ENOENT (the layout names an instance the GPU no longer has)
 * leaves c unchanged; such a plan is stale and should be made again.
 */
int ts_mig_plan_apply(ts_cluster *c, const ts_mig_change *changes, size_t n, ts_err *err);

#ifdef __cplusplus
}
#endif
#endif
