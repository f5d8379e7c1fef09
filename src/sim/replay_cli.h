/*
 * replay_cli.h - internal: the pieces of `tessera-sim replay` after option
 * parsing (replay_main.c): reading the cluster and tenants YAML into what a
 * replay needs (replay_input.c), printing the tables and writing the JSON,
 * series CSV and per-job CSV (replay_report.c), and drawing the SVG (plot.c).
 *
 * Ownership: replay_main.c owns everything a replay_report points to; the
 * writers only read it. Functions that read files print their own message to
 * stderr and return the exit status (0, or 2 on bad input); writers return 0
 * or -1 (the caller names the path). Single-threaded.
 */
#ifndef TS_SIM_REPLAY_CLI_H
#define TS_SIM_REPLAY_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "replay/replay.h"

/* The file's bytes (malloc'd, *len set), or NULL after saying why on
 * stderr ("tessera-sim replay: ..."). */
char *replay_slurp(const char *path, size_t *len);

/* Of a tenants YAML (docs/tenants-format.md), the leaves (tenants without
 * teams under them), each guaranteed the whole GPUs of all its models'
 * guarantees (fractions dropped). *out is new (free()). */
int replay_load_tenants(const char *path, ts_replay_tenant **out, int *n);

/* Node count and GPUs per node of a cluster YAML (docs/cluster-format.md);
 * refuses a cluster whose nodes do not all have the same number of GPUs
 * (the replay places by count only). */
int replay_load_cluster(const char *path, int *nodes, int *gpus_per_node);

/* One policy's runs: one per workload (pooled) or one over all tenants. */
typedef struct replay_policy_run {
    const ts_replay_policy_ops *ops;
    const char *mode;             /* "pooled", "siloed" or "shared" */
    ts_replay_result *per;        /* one per workload */
    ts_replay_result mean;        /* ts_replay_result_mean of per */
    ts_replay_series **series;    /* one per workload; NULL unless asked for */
    ts_replay_tenant_result *tres; /* one per tenant; NULL without tenants */
    ts_replay_fairness fair;
} replay_policy_run;

typedef struct replay_report {
    const char *jobs_file;
    const char *set;              /* the Pollux set asked for, or NULL */
    const char *format;           /* "pollux", "philly" or "jobs" */
    const ts_replay_trace *t;     /* its tenants are the replay's (ntenants 0: none) */
    const ts_replay_config *cfg;  /* cluster, clock, costs */
    double load;                  /* --load: submit times were divided by it */
    const replay_policy_run *pr;
    int npol;
    const char *const *sched;     /* the --sched NAME=VALUE given, in order */
    int nsched;
} replay_report;

void replay_print(FILE *f, const replay_report *r);
int replay_write_json(const char *path, const replay_report *r);
/* Columns policy,workload,t_s,busy_gpus,utilization_pct,queue_jobs, then
 * held_<tenant> per tenant; one row per series point. */
int replay_write_series(const char *path, const replay_report *r);
/* --jobs-out, written while the runs go (each workload's outcomes live only
 * as long as its run): the header, then per workload of a policy one row per
 * job in the replay's order (by submission, ties in file order). The caller
 * checks the stream for errors. */
void replay_write_jobs_header(FILE *f);
void replay_write_jobs(FILE *f, const char *policy, const ts_replay_workload *W,
                       const ts_replay_trace *t, const ts_replay_outcome *out);

/* An option's number v in [min, max] (an integer if asked) into *out; 0, or
 * -1 after saying "tessera-sim replay: OPT: must be ..." on stderr. */
int replay_parse_num(const char *opt, const char *v, double min, double max, bool integer,
                     double *out);

/* sched_set.c: --sched NAME=VALUE, one field of the tessera policy's
 * ts_sched_config by its name; 0, or -1 after saying why on stderr. */
struct ts_sched_config;
int sim_sched_set(struct ts_sched_config *cfg, const char *arg);

/* plot.c: utilisation and queue length over time, and with tenants the GPUs
 * each holds (stacked), one section per policy, as a self-contained SVG. */
int sim_plot_replay(const char *path, const replay_report *r);

#endif
