/*
 * cycle_own.c - the cycle plans on the scheduler's own copy of the cluster
 * and the quota, and a separate step applies its starts to the live ones.
 *
 * Why: the shell (tesserad) computes a cycle with its lock released and
 * writes the decisions to its store before they count. A cycle that bound
 * its starts into the live cluster as it planned left readers a half-made
 * state to avoid and a refused write to undo. Planning on a copy leaves the
 * live cluster and quota unchanged until ts_sched_apply binds the starts,
 * a short step the shell takes under its lock once the decisions are
 * written; a write refused needs no undo.
 *
 * The copy is kept, not made per cycle: at each sync (a plan's start) only the
 * nodes whose live version moved, or that the last plan changed on the
 * copy (its starts, the reservation's blockers), are copied again, with
 * the index over the copy told of each; the quota (a few arrays per
 * tenant) is copied whole. A copied node gets a version above any it had,
 * so what is cached by node version (scorers, the scratch cluster of
 * cycle_plan.c) never takes the new contents for the old.
 */
#include <string.h>

#include "sched/cycle_internal.h"

/* The plan's copies brought to the live state: O(nodes) compares plus
 * O(changed nodes x (node size + index depth)) plus the quota's arrays. */
int ts_sched_sync(ts_sched *s, ts_err *err)
{
    const ts_cluster *live = s->live_c;
    for (int i = 0; i < live->nnodes; i++) {
        const ts_node *lv = &live->nodes[i];
        ts_node *ow = &s->c->nodes[i];
        if (lv->version != s->own_ver[i] || ow->version != s->own_at[i]) {
            uint64_t above = (ow->version > lv->version ? ow->version : lv->version) + 1;
            *ow = *lv;
            ow->version = above;
            s->own_ver[i] = lv->version;
            s->own_at[i] = above;
            ts_gang_index_node_changed(s->ix, i);
        }
        bool on = ts_gang_index_node_enabled(s->live_ix, i);
        if (on != ts_gang_index_node_enabled(s->ix, i)) {
            ts_gang_index_node_enable(s->ix, i, on);
            if (s->six)
                ts_gang_index_node_enable(s->six, i, on);
        }
    }
    if (ts_quota_copy(&s->q, s->live_q) != 0)
        return ts_err_set(err, TS_ENOMEM, "cycle: out of memory");
    return 0;
}

int ts_sched_plan(ts_sched *s, double now, const ts_job *waiting, int nwaiting,
                  const ts_job *running, int nrunning, ts_decision *d, ts_err *err)
{
    if (!s || !d)
        return ts_err_set(err, TS_EINVAL, "cycle: bad arguments");
    return cycle_decide(s, now, waiting, nwaiting, running, nrunning, d, err);
}

int ts_sched_apply(ts_sched *s, const ts_decision *d, const ts_job *waiting, const bool *keep,
                   double now, ts_err *err)
{
    int first = 0;
    for (int k = 0; k < d->nstarts; k++) {
        if (keep && !keep[k])
            continue;
        ts_job j = waiting[d->starts[k].job];
        j.allocs = d->starts[k].allocs;
        ts_err e;
        int rc = cycle_apply_start(s, &j, now, &e);
        if (rc != 0 && first == 0) {
            first = rc;
            if (err)
                *err = e;
        }
    }
    return first;
}

int ts_sched_cycle(ts_sched *s, double now, const ts_job *waiting, int nwaiting,
                   const ts_job *running, int nrunning, ts_decision *d, ts_err *err)
{
    int rc = s && d ? ts_sched_sync(s, err) : ts_err_set(err, TS_EINVAL, "cycle: bad arguments");
    if (rc == 0)
        rc = ts_sched_plan(s, now, waiting, nwaiting, running, nrunning, d, err);
    if (rc == 0)
        rc = ts_sched_apply(s, d, waiting, NULL, now, err);
    return rc;
}
