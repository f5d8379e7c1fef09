/*
 * report.h - what the simulator prints and writes: the comparison table, the
 * JSON document later checks read, a per-bin CSV, and the published figures
 * read from the study's summary CSV.
 */
#ifndef TS_SIM_REPORT_H
#define TS_SIM_REPORT_H

#include <stdio.h>

#include "sim/experiment.h"

#define SIM_ARRIVED_REPORT 100

typedef struct sim_summary {
    const char *policy;
    int nseeds;
    const sim_run *runs;      /* nseeds consecutive runs */
    double alloc_mean, alloc_sd, frag_mean, frag_sd, ratio_mean, ratio_sd;
    double pods_per_s;
    double published;         /* NAN when unknown */
    double published_sd;
} sim_summary;

void sim_summarise(const sim_run *runs, int nseeds, sim_summary *s);

/* Reads the published mean allocation % at arrived 100 for (workload,
 * policy) from summary_gpu_alloc_ratio.csv; NAN where absent. Returns 0 or
 * TS_EINVAL (err names the line). */
int sim_published_load(const char *path, const char *workload, sim_summary *s, int ns,
                       ts_err *err);

void sim_print_table(FILE *f, const char *workload, int cluster_gpus, const sim_summary *s,
                     int ns);
int sim_write_json(const char *path, const char *workload, int cluster_gpus,
                   const sim_summary *s, int ns, ts_err *err);
int sim_write_csv(const char *path, const char *workload, const sim_summary *s, int ns,
                  ts_err *err);

#endif
