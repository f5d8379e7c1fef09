/*
 * ended_runs.h - internal: the last output of a failed gang's other ranks
 * (ended_runs.c). Everything here runs under c->mu.
 */
#ifndef TS_CTLD_ENDED_RUNS_H
#define TS_CTLD_ENDED_RUNS_H

#include "ctld/ctld.h"

/* The runs kept, and for how long after their job ended. */
#define CTLD_ENDED_RUNS 256
#define CTLD_ENDED_KEEP_S 300.0

/* j's run on agents, as it fails: its ranks not yet ended, their nodes and
 * its start (before ctld_job_unbind, which frees them). */
void ctld_ended_note(ctld *c, const cjob *j, double now);
/* Whether an ended rank's report from node n (of the run that started at
 * run_s, when has_run) is the last word of a rank noted here: true once a
 * rank, so its output is kept with the job's events, never twice. */
bool ctld_ended_take(ctld *c, int64_t job, int rank, int n, bool has_run, double run_s,
                     double now);
void ctld_ended_free(ctld *c);

#endif
