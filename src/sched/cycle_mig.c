/*
 * cycle_mig.c - reshape before preemption: would destroying idle MIG
 * instances (the dynamic MIG planner, mig_plan.c) give a waiting MIG job the
 * room it lacks?
 *
 * A MIG job that finds no free instance of its profile (and no free slices to
 * create one) may still fit once idle instances of other profiles are
 * destroyed, which disturbs nothing that runs. The cycle asks this before it
 * searches for victims, so running work is preempted only when no reshape
 * would do (docs/scheduler.md, step 6). The question is answered by the same
 * planner, with the same bound on changed GPUs and the same nodes left out
 * (drained ones), that tesserad runs after the cycle to hand the new layouts
 * to the agents; the job then places on the new room at a later cycle.
 *
 * Cost: one ts_mig_plan call (mig_plan.h has its cost) over the job's MIG
 * tasks, identical consecutive tasks counted as one demand; the cycle bounds
 * the calls per cycle and remembers a failed one for identical jobs.
 */
#include <stdlib.h>
#include <string.h>

#include "sched/cycle_internal.h"
#include "tessera/mig_plan.h"

int cycle_mig_reshape(const ts_sched *s, const ts_job *job, int *ngpus)
{
    *ngpus = 0;
    const ts_cluster *c = s->c;
    ts_mig_demand *dem = malloc((size_t)job->ntasks * sizeof *dem);
    int *served = calloc((size_t)job->ntasks, sizeof *served);
    bool *closed = malloc((size_t)(c->nnodes > 0 ? c->nnodes : 1) * sizeof *closed);
    if (!dem || !served || !closed) {
        free(dem);
        free(served);
        free(closed);
        return TS_ENOMEM;
    }
    size_t nd = 0;
    int want = 0;
    for (int t = 0; t < job->ntasks; t++) {
        const ts_request *r = &job->tasks[t];
        if (r->mig_profile < 0)
            continue;
        want++;
        if (nd > 0 && dem[nd - 1].count < TS_MIG_DEMAND_COUNT_MAX &&
            memcmp(&dem[nd - 1].req, r, sizeof *r) == 0)
            dem[nd - 1].count++;
        else
            dem[nd++] = (ts_mig_demand){.req = *r, .count = 1};
    }
    for (int n = 0; n < c->nnodes; n++)
        closed[n] = !ts_gang_index_node_enabled(s->ix, n); /* the plan's copy */
    ts_mig_change ch[TS_MIG_PLAN_CHANGES_DEFAULT];
    size_t nch = 0;
    ts_mig_plan_opts opts = {.max_changes = TS_MIG_PLAN_CHANGES_DEFAULT, .excluded = closed};
    ts_err e;
    int rc = nd > 0 ? ts_mig_plan(c, dem, nd, &opts, ch, TS_MIG_PLAN_CHANGES_DEFAULT, &nch,
                                  served, &e)
                    : 0;
    int got = 0;
    for (size_t k = 0; rc == 0 && k < nd; k++)
        got += served[k];
    free(dem);
    free(served);
    free(closed);
    if (rc == TS_ENOMEM)
        return rc;
    /* no change needed yet it did not place: CPU, memory or its other tasks
     * are what it lacks, and a reshape does not bring them */
    if (rc != 0 || nch == 0 || got < want)
        return 0;
    *ngpus = (int)nch;
    return 1;
}
