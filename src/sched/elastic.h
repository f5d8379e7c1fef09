/*
 * elastic.h - internal: the goodput-aware grant of spare GPUs to elastic
 * jobs (issue 30). An elastic job holds its minimum as any job does (placed
 * all-or-nothing by the cycle under its tier); what it holds above it is
 * opportunistic: the first thing taken back when the cycle needs GPUs, and
 * shared out here, from the GPUs nobody's minimum uses, where they shorten
 * the jobs' times left most, a job's weighing more the less work it has
 * left. A job reports its speedup (goodput at g GPUs over its goodput at
 * its minimum, batch size adapted to g) and its time left; a change of size
 * costs the job a restart, so a job changes size only when the cluster
 * gains several times what that costs.
 *
 * ts_elastic_grant is pure (no allocation, no state, any thread); the
 * Pollux job model's replay calls it (src/replay/pollux_run.c), and
 * cycle_elastic, the cycle's last step, calls it on the running elastic
 * jobs (docs/scheduler.md, "Elastic jobs").
 */
#ifndef TS_SCHED_ELASTIC_H
#define TS_SCHED_ELASTIC_H

#include <stdbool.h>

#include "tessera/cycle.h"

/* A change of size must gain this many times what the restart costs. */
#define TS_ELASTIC_GAIN_OVER_COST 4.0
/* What a resize costs by default (ts_sched_config.elastic_resize_cost_s):
 * a checkpoint, a stop and a restart, as the default grace allows. */
#define TS_ELASTIC_RESIZE_COST_DEFAULT_S 60.0

typedef struct ts_elastic_job {
    int min_gpus, max_gpus; /* 1 <= min <= max */
    int cur_gpus;           /* held now, in [min, max] */
    /* speedup[g] for g in [0, max_gpus]: goodput at g GPUs over goodput at
     * min_gpus (speedup[min] = 1; entries below min are ignored) */
    const double *speedup;
    double remaining_s; /* estimated time left at cur_gpus */
    bool changing;      /* its allocation changes this round anyway: no extra cost */
} ts_elastic_job;

/* Shares pool GPUs (the free ones and every job's GPUs above its minimum)
 * among jobs: target[i] in [min_gpus, max_gpus], their sum at most pool
 * (the minimums must fit in it). Returns the GPUs given out. */
int ts_elastic_grant(const ts_elastic_job *jobs, int n, int pool, double resize_cost_s,
                     int *target);

/* GPUs above the minimums of the running elastic jobs that a take-back may
 * free: those of jobs free to change size and not victims of this cycle
 * (victim[r], may be NULL), and those of elastic jobs already stopping that
 * are no victims (a resize under way: it asks again for less). O(nrunning). */
int64_t cycle_elastic_extras(const ts_job *running, int nrunning, const bool *victim);

/* The cycle's last step (ts_sched_cycle, after the ordered pass): the
 * running elastic jobs' new sizes into d->resizes. When waiting jobs lack
 * room (and got no victims: the ordered pass preempts only for what the
 * extras do not cover), GPUs above the minimums are taken back (no job
 * grows); else the
 * free GPUs and the extras are granted by ts_elastic_grant, a job resized
 * at most once per cfg.reclaim_min_runtime_s of its run. Victims of this
 * cycle's preemptions and stopping jobs keep their size. Reads the
 * cluster, binds nothing. 0 or TS_ENOMEM (d then holds no resize). */
int cycle_elastic(ts_sched *s, double now, const ts_job *waiting, int nwaiting,
                  const ts_job *running, int nrunning, ts_decision *d);

#endif
