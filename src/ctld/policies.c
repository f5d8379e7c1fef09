/*
 * policies.c - what the controller does about running jobs from their
 * agents' reports, once per scheduling cycle (ctld_agents_expire): the idle
 * policy (tesserad.md `idle`: warn, then stop with the checkpoint signal and
 * hold) and stragglers (tesserad.md `stragglers`: a gang's rank persistently
 * slower than the gang's median is flagged, and for the tenants the policy
 * names its node is drained and the job restarted from its checkpoint).
 * Everything here runs under c->mu, in the scheduling thread; the ranks'
 * readings come from their nodes' agents (ctld_rank_reading). State changes
 * go through the job state machine (job_fsm.c); the idle policy plans a
 * whole pass into one transaction, a straggler its event and restart into
 * one, each written with mu released (ctld_cycle_commit), as is the
 * straggler's drain. A write the store refuses changes nothing, and the
 * next cycle decides again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/job_fsm.h"

/* Index in names[] of the tenant or its nearest ancestor named there, else -1. */
int ctld_tenant_match(const ctld *c, const char *tenant, const char *const *names, int n)
{
    const ts_tenants *ts = c->tenants;
    int t = ts ? ts_tenant_find(ts, tenant) : -1;
    const char *name = tenant;
    for (;;) {
        for (int i = 0; i < n; i++)
            if (strcmp(names[i], name) == 0)
                return i;
        if (t < 0 || ts->t[t].parent < 0)
            return -1;
        t = ts->t[t].parent;
        name = ts->t[t].name;
    }
}

static bool straggler_drains(const ctld *c, const char *tenant)
{
    return ctld_tenant_match(c, tenant, (const char *const *)c->cfg.straggler_drain,
                             c->cfg.nstraggler_drain) >= 0;
}

static double grace_of(const ctld *c, const cjob *j)
{
    return j->sj.ckpt_grace_s >= 0 ? j->sj.ckpt_grace_s : c->cfg.sched.default_grace_s;
}

/* A policy's write the store refused: nothing was applied; the next cycle
 * decides again. */
static void policy_failed(ctld *c, const cjob *j, const ts_err *err)
{
    c->m.store_failures++;
    fprintf(stderr, "tesserad: job %lld: %s; trying again at the next cycle\n",
            (long long)j->row.id, err->msg);
}

#define IDLE_WARNING "idle-warning" /* the event kind of a warning */

/* The idle policy: a running job whose every rank reports GPU utilisation
 * below the threshold is warned (in its tasks' logs) after half its window,
 * then stopped like a preempted job (checkpoint signal first) and held. */
void ctld_idle_check(ctld *c, double now)
{
    /* the pass's warnings and stops, written together (mu released) */
    ctld_txn t = {.quiet = true};
    bool failed = false;
    for (int i = 0; i < c->njobs && !failed; i++) {
        ctld_yield_some(c, i);
        cjob *j = c->jobs[i];
        if (j->row.state != TS_JOB_RUNNING || j->pinned || j->is_virtual || !j->allocs)
            continue;
        /* the job's own window, else its tenant's (or organisation's), else its tier's */
        int k = ctld_tenant_match(c, j->row.tenant, (const char *const *)c->cfg.idle_tenant,
                                  c->cfg.nidle_tenant);
        double window = j->spec->idle_timeout_s > 0 ? j->spec->idle_timeout_s
                        : k >= 0                    ? c->cfg.idle_tenant_s[k]
                                                    : c->cfg.idle_window_s[j->sj.tier ? 1 : 0];
        bool idle = window > 0;
        for (int r = 0; idle && r < j->ntasks; r++) {
            float util = -1.0f;
            idle = ctld_rank_reading(c, j, r, &util, NULL) && util >= 0 &&
                   util < c->cfg.idle_threshold_pct;
        }
        if (!idle) {
            if (j->idle_warned) /* the warning leaves its tasks' documents */
                ctld_nodes_touch_job(c, j);
            j->idle_since_s = 0;
            j->idle_warned = false;
            continue;
        }
        if (j->idle_since_s == 0)
            j->idle_since_s = now;
        double idle_s = now - j->idle_since_s;
        ts_err err;
        char d[160];
        if (idle_s >= window / 2 && !j->idle_warned) {
            snprintf(d, sizeof d, "every rank below %.0f%% GPU utilisation for %.0f s; stopped "
                     "and held at %.0f s", c->cfg.idle_threshold_pct, idle_s, window);
            /* warned once written (else again at the next cycle) */
            if (ctld_txn_event(&t, j->row.id, now, IDLE_WARNING, d) != 0) {
                failed = true;
                break;
            }
        }
        if (idle_s >= window) {
            snprintf(d, sizeof d, "idle for %.0f s (below %.0f%% GPU utilisation): its GPUs go "
                     "back; it is held until released", idle_s, c->cfg.idle_threshold_pct);
            ctld_fsm_args a = {.detail = d, .stop_by_s = now + grace_of(c, j)};
            int rc = ctld_fsm_plan(c, &t, j, CTLD_JE_REAP, &a, now, &err);
            if (rc == TS_ENOMEM) {
                failed = true;
                break;
            }
            if (rc != 0) /* the table refuses it: this job is left for the next cycle */
                fprintf(stderr, "tesserad: job %lld: %s\n", (long long)j->row.id, err.msg);
        }
    }
    ts_err err;
    if (failed) {
        c->m.store_failures++;
        fprintf(stderr, "tesserad: idle policy: out of memory; trying again at the next cycle\n");
    } else if ((t.n > 0 || t.nev > 0) && ctld_cycle_commit(c, &t, &err) == 0) {
        ctld_txn_apply(c, &t, now);
        for (int k = 0; k < t.nev; k++) { /* the warned jobs: their warnings' jobs */
            cjob *j = strcmp(t.ev[k].kind, IDLE_WARNING) == 0 ? ctld_job_find(c, t.ev[k].job_id)
                                                              : NULL;
            if (j) {
                j->idle_warned = true;
                ctld_nodes_touch_job(c, j);
            }
        }
        if (t.n > 0)
            ctld_kick(c);
    } else if (t.n > 0 || t.nev > 0) {
        int nwarned = 0;
        for (int k = 0; k < t.nev; k++)
            nwarned += strcmp(t.ev[k].kind, IDLE_WARNING) == 0;
        c->m.store_failures++;
        fprintf(stderr, "tesserad: idle policy: %d stops and %d warnings not written (%s); "
                "trying again at the next cycle\n", t.n, nwarned, err.msg);
    }
    ctld_txn_fini(&t);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Stragglers: ranks report their step time (docs/agent-tasks.md); a rank
 * whose step time stays above factor x the gang's median (the lower median,
 * so a gang of two can tell its slow rank) for the window is flagged once
 * per run. For tenants whose policy says so its node is drained (it stays
 * drained until an admin resumes it) and the job is stopped with its
 * checkpoint signal and requeued, to restart elsewhere from its checkpoint. */
void ctld_straggler_check(ctld *c, double now)
{
    for (int i = 0; i < c->njobs; i++) {
        ctld_yield_some(c, i);
        cjob *j = c->jobs[i];
        if (j->row.state != TS_JOB_RUNNING || j->pinned || j->is_virtual || !j->allocs ||
            j->ntasks < 2 || j->straggler_flagged)
            continue;
        float *step = malloc((size_t)j->ntasks * 2 * sizeof *step);
        if (!step)
            continue;
        float *sorted = step + j->ntasks;
        int n = 0;
        for (int r = 0; r < j->ntasks; r++) {
            if (!ctld_rank_reading(c, j, r, NULL, &step[r]))
                step[r] = -1.0f;
            n += step[r] > 0;
        }
        if (n < j->ntasks) {
            free(step);
            continue; /* every rank must have reported */
        }
        memcpy(sorted, step, (size_t)n * sizeof *sorted);
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_float);
        float median = sorted[(n - 1) / 2];
        if (!j->straggle_since &&
            !(j->straggle_since = calloc((size_t)j->ntasks, sizeof *j->straggle_since))) {
            free(step);
            continue;
        }
        int worst = -1;
        for (int r = 0; r < j->ntasks; r++) {
            if (step[r] <= c->cfg.straggler_factor * median) {
                j->straggle_since[r] = 0;
                continue;
            }
            if (j->straggle_since[r] == 0)
                j->straggle_since[r] = now;
            if (now - j->straggle_since[r] >= c->cfg.straggler_window_s &&
                (worst < 0 || step[r] > step[worst]))
                worst = r;
        }
        float slow = worst >= 0 ? step[worst] : 0;
        free(step);
        if (worst < 0)
            continue;
        const ts_alloc *a = &j->allocs[worst];
        int node = a->node;
        char gpus[64] = "";
        for (int k = 0; k < a->ngpu; k++)
            snprintf(gpus + strlen(gpus), sizeof gpus - strlen(gpus), "%s%d", k ? "," : "",
                     a->gpu[k]);
        bool drain = straggler_drains(c, j->row.tenant);
        char d[400];
        snprintf(d, sizeof d,
                 "rank %d on node %s (GPUs %s): step %.3g s vs the gang's median %.3g s "
                 "(over %.3gx for %.0f s)%s",
                 worst, c->cluster->nodes[node].name, gpus[0] ? gpus : "none",
                 (double)slow, (double)median, c->cfg.straggler_factor,
                 now - j->straggle_since[worst],
                 drain ? "; the node is drained and the job requeues from its checkpoint"
                       : "; flagged only (the tenant's policy does not drain)");
        ts_err err;
        if (drain) {
            snprintf(c->agents[node].drain_why, sizeof c->agents[node].drain_why,
                     "straggler: job %lld rank %d (GPUs %s) step %.3g s vs median %.3g s",
                     (long long)j->row.id, worst, gpus[0] ? gpus : "none", (double)slow,
                     (double)median);
            /* the node first: the job must not restart there */
            if (ctld_node_drain_cycle(c, node, true, &err) != 0) {
                policy_failed(c, j, &err);
                continue;
            }
        }
        /* the event and, with a drain, the restart: one transaction,
         * written with mu released */
        ctld_txn t = {.quiet = true};
        int rc = ctld_txn_event(&t, j->row.id, now, "straggler", d) != 0
                     ? ts_err_set(&err, TS_ENOMEM, "out of memory")
                     : 0;
        /* a restart: TESSERA_RESTARTS counts it, and it may start at once */
        ctld_fsm_args fa = {.detail = "a straggling rank: restarting from the checkpoint away "
                                      "from the slow node",
                            .stop_by_s = now + grace_of(c, j)};
        if (rc == 0 && drain)
            rc = ctld_fsm_plan(c, &t, j, CTLD_JE_STRAGGLE, &fa, now, &err);
        if (rc == 0)
            rc = ctld_cycle_commit(c, &t, &err);
        if (rc == 0) {
            ctld_txn_apply(c, &t, now);
            if (t.n > 0)
                ctld_kick(c);
        }
        ctld_txn_fini(&t);
        if (rc != 0) {
            policy_failed(c, j, &err);
            continue;
        }
        j->straggler_flagged = true;
    }
}

