/*
 * experiment.h - the inflation experiment of the fragmentation study, run on
 * the production placer (see docs/simulator.md for the procedure).
 */
#ifndef TS_SIM_EXPERIMENT_H
#define TS_SIM_EXPERIMENT_H

#include "tessera/load.h"
#include "tessera/sched.h"

#define SIM_BINS 131 /* arrived 0..130 % of cluster GPU capacity */

typedef struct sim_input {
    const ts_cluster *cluster;   /* in file order; each run permutes a copy */
    const ts_workload *pods;
    const ts_typical *typical;
    double tune;                 /* requested GPU = tune x capacity */
} sim_input;

/* The production scheduling cycle as a policy (see experiment.c). */
extern const struct ts_scorer_ops sim_policy_core;
extern const struct ts_scorer_ops sim_policy_core_learned;

typedef struct sim_run {
    const struct ts_scorer_ops *policy; /* a scorer, or &sim_policy_core */
    uint64_t seed;
    int *placements;             /* optional: node index per submitted pod (-1 none), */
    int nplacements;             /* in submission order, for the first nplacements */
    /* outputs */
    double alloc_pct[SIM_BINS];  /* allocated GPU % of capacity, binned by arrived % */
    double frag_pct[SIM_BINS];   /* fragmentation amount % of capacity */
    double frag_ratio[SIM_BINS]; /* fragmentation % of idle GPU */
    int npods;                   /* pods submitted (after inflation) */
    int placed;
    double cpu_seconds;          /* thread CPU time of the scheduling loop */
    int rc;                      /* 0, or a negative code with err */
    ts_err err;
} sim_run;

/* The submission order of one seed's run (pod indices into in->pods), as
 * sim_run_one builds it; *seq is malloc'd, the caller frees it. 0 or
 * TS_ENOMEM. */
int sim_sequence(const sim_input *in, uint64_t seed, int **seq, int *n);

/* Runs one (policy, seed); fills the outputs. Thread-safe for distinct runs
 * over the same input. */
void sim_run_one(const sim_input *in, sim_run *run);

/* Runs all runs on `jobs` threads; progress lines on stderr when verbose. */
void sim_run_all(const sim_input *in, sim_run *runs, int nruns, int jobs, int verbose);

#endif
