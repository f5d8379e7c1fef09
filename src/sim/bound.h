/*
 * bound.h - an offline upper bound and an explicit offline packing for the
 * arrived pod set of one placement experiment (tessera-sim bound).
 *
 * The bound is the optimum of a linear program over node types x pod
 * classes, with one column per per-GPU share pattern found by column
 * generation (GLPK); the packing rounds that solution down to a placement of
 * every pod on a node and GPUs, made and then re-checked with the model's
 * own functions (ts_node_fits, ts_node_choose_gpus, ts_node_gpu_takes_share,
 * ts_node_assign). Single-threaded; the caller owns every result.
 */
#ifndef TS_SIM_BOUND_H
#define TS_SIM_BOUND_H

#include "tessera/load.h"
#include "tessera/model.h"

/* sim_bound_solve's flags */
enum {
    /* every arrived pod that asks no GPU must be placed, as an online placer
     * places each pod that fits: the bound of packings that place them all */
    SIM_BOUND_PLACE_CPU_PODS = 1u << 0,
    /* the LP optimum alone: no packing is built (pack_milli 0, allocs unset:
     * neither sim_bound_check nor a --packing file may be given it) */
    SIM_BOUND_LP_ONLY = 1u << 1,
};

typedef struct sim_bound {
    int npods;            /* the arrived pods */
    const int *pods;      /* their indices in the workload (not owned) */
    int64_t cap_milli;    /* the cluster's GPU capacity */
    int64_t arrived_milli;
    double lp_milli;      /* the LP optimum: no packing allocates more */
    int64_t pack_milli;   /* what the packing allocates */
    int placed;           /* pods the packing placed */
    int cpu_pods_out;     /* pods asking no GPU that the packing left out
                           * (SIM_BOUND_PLACE_CPU_PODS; 0 otherwise) */
    ts_alloc *allocs;     /* per arrived pod; node -1 when left out (owned) */
    int ntypes;           /* node types in the LP */
    int nclasses;         /* pod classes that ask for GPU */
    int patterns;         /* share-pattern columns generated */
    int rounds;           /* column-generation rounds */
} sim_bound;

/* Solves the LP and builds the packing for pods[0..npods) of w on c (c is
 * not changed), under flags (SIM_BOUND_*). 0, or TS_EINVAL (a request the LP
 * does not model: MIG), TS_ENOSPC (the pods that must be placed do not all
 * fit) or TS_ENOMEM / TS_EIO (solver failure) with err. */
int sim_bound_solve(const ts_cluster *c, const ts_workload *w, const int *pods, int npods,
                    unsigned flags, sim_bound *b, ts_err *err);

/* Replays b's packing on an empty copy of c through the model's rules and
 * recomputes its allocation; checks it is at most the bound unless it left
 * out pods the bound had to place. 0, or TS_EINVAL naming the first pod that
 * does not fit (or a total that differs). */
int sim_bound_check(const ts_cluster *c, const ts_workload *w, const sim_bound *b, ts_err *err);

void sim_bound_fini(sim_bound *b);

#endif
