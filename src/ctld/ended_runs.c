/*
 * ended_runs.c - the last output of a failed gang's other ranks (docs/cli.md
 * "logs"). A job whose rank fails ends at once and leaves memory (its gang
 * stops as one, job_end.c), while its other ranks are still being stopped
 * on their nodes: their agents report them ended, with their last output,
 * a moment later, when the controller no longer knows the job. Such a run's
 * job, start and the node of each rank still running are kept here for a
 * few minutes, in a ring of the latest ones, so that those reports' output
 * is kept with the job's events as every ended rank's is (agents.c). Only
 * the output: the job's state and result were settled as it failed.
 */
#include <stdlib.h>
#include <string.h>

#include "ctld/ended_runs.h"

typedef struct ended_run {
    int64_t job;       /* 0: a free slot */
    double run_s;      /* the run's start (the agents' "run") */
    double at_s;       /* when its job ended */
    int ntasks;
    int *node;         /* [ntasks] each rank's node */
    uint8_t *open;     /* [ntasks] 1: its last output may still come */
} ended_run;

struct ctld_ended {
    ended_run v[CTLD_ENDED_RUNS];
    int next;          /* the slot the next run takes (the oldest) */
};

static void run_clear(ended_run *e)
{
    free(e->node);
    free(e->open);
    memset(e, 0, sizeof *e);
}

void ctld_ended_note(ctld *c, const cjob *j, double now)
{
    if (!j->allocs || !j->rank_state || j->ntasks < 1)
        return;
    if (!c->ended && !(c->ended = calloc(1, sizeof *c->ended)))
        return; /* out of memory: their output is not kept, as before */
    ended_run *e = &c->ended->v[c->ended->next];
    run_clear(e);
    e->node = malloc((size_t)j->ntasks * sizeof *e->node);
    e->open = malloc((size_t)j->ntasks);
    if (!e->node || !e->open) {
        run_clear(e);
        return;
    }
    bool any = false;
    for (int r = 0; r < j->ntasks; r++) {
        e->node[r] = j->allocs[r].node;
        /* a rank that already ended had its output kept as it ended */
        e->open[r] = !c->node_virtual[e->node[r]] && (j->rank_state[r] == CTLD_RANK_PENDING ||
                                                      j->rank_state[r] == CTLD_RANK_RUNNING);
        any = any || e->open[r];
    }
    if (!any) {
        run_clear(e);
        return;
    }
    e->job = j->row.id;
    e->run_s = j->row.start_s;
    e->at_s = now;
    e->ntasks = j->ntasks;
    c->ended->next = (c->ended->next + 1) % CTLD_ENDED_RUNS;
}

bool ctld_ended_take(ctld *c, int64_t job, int rank, int n, bool has_run, double run_s,
                     double now)
{
    for (int i = 0; c->ended && i < CTLD_ENDED_RUNS; i++) {
        ended_run *e = &c->ended->v[i];
        if (e->job == 0)
            continue;
        if (now - e->at_s > CTLD_ENDED_KEEP_S) {
            run_clear(e);
            continue;
        }
        if (e->job != job || (has_run && run_s != e->run_s) || rank < 0 || rank >= e->ntasks ||
            e->node[rank] != n || !e->open[rank])
            continue;
        e->open[rank] = 0;
        return true;
    }
    return false;
}

void ctld_ended_free(ctld *c)
{
    for (int i = 0; c->ended && i < CTLD_ENDED_RUNS; i++)
        run_clear(&c->ended->v[i]);
    free(c->ended);
    c->ended = NULL;
}
