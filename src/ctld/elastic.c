/*
 * elastic.c - elastic jobs in tesserad (docs/scheduler.md, "Elastic jobs").
 *
 * The cycle decides a running elastic job's new size (ts_cycle_resize); a
 * resize is a preemption with its checkpoint signal and grace that requeues
 * it at once (no backoff), and once its run has stopped its tasks are built
 * again at the new size: a gang with more or fewer ranks, one task with
 * more or fewer GPUs. The agents see a new run with a new WORLD_SIZE (and
 * CUDA_VISIBLE_DEVICES); nothing on their side knows about elasticity. The
 * size asked for lives in memory; a controller restart finds a running job's
 * size in its placement, and a waiting one asks for its minimum again.
 *
 * What more GPUs are worth comes from the job itself: the step times its
 * ranks report (tessera_task.report_step, through the agents' syncs), kept
 * per size across its runs and fitted to a part that shrinks with more GPUs
 * and a part that does not (ts_elastic_fit). A job that keeps its global
 * batch per step whatever its size (train_ddp.py divides it by WORLD_SIZE)
 * so reports its throughput; the curve is in memory only, as its size.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctld/ctld.h"
#include "ctld/job_fsm.h"

/* GPUs per rank of group t (a MIG instance counts one). */
static int per_rank(const ts_task_spec *t) { return t->mig_profile[0] ? 1 : t->gpus; }

ts_task_spec ctld_elastic_group(const cjob *j, int g)
{
    ts_task_spec t = j->spec->tasks[g];
    int extra = j->elastic_gpus - (int)ts_spec_gpus(j->spec);
    if (extra <= 0)
        return t;
    if (t.count_max > t.count && per_rank(&t) > 0) {
        int add = extra / per_rank(&t);
        t.count += add < t.count_max - t.count ? add : t.count_max - t.count;
    } else if (t.gpus_max > t.gpus) {
        t.gpus += extra < t.gpus_max - t.gpus ? extra : t.gpus_max - t.gpus;
    }
    return t;
}

/* The whole GPUs of a placement (JSON as ctld_placement_json_allocs writes). */
static int placement_gpus(const char *pj)
{
    json_error_t je;
    json_t *a = pj ? json_loads(pj, 0, &je) : NULL;
    size_t i;
    json_t *t;
    int n = 0;
    json_array_foreach(a, i, t) {
        int mig = (int)json_integer_value(json_object_get(t, "mig_profile"));
        size_t g = json_array_size(json_object_get(t, "gpus"));
        n += mig >= 0 && json_object_get(t, "mig_profile") ? 1 : (int)g;
    }
    json_decref(a);
    return n;
}

void ctld_elastic_build(cjob *j)
{
    int min, max, step;
    if (!ts_spec_elastic(j->spec, &min, &max, &step)) {
        j->sj.elastic_min_gpus = j->sj.elastic_max_gpus = j->sj.elastic_step_gpus = 0;
        j->elastic_gpus = 0;
        return;
    }
    j->sj.elastic_min_gpus = min;
    j->sj.elastic_max_gpus = max;
    j->sj.elastic_step_gpus = step;
    if (j->elastic_gpus == 0 && j->row.placement_json && !j->allocs) {
        int held = placement_gpus(j->row.placement_json);
        if (held > min && held <= max)
            j->elastic_gpus = held;
    }
    if (j->elastic_gpus < min || j->elastic_gpus > max)
        j->elastic_gpus = min;
}

int ctld_elastic_apply(ctld *c, cjob *j, ts_err *err)
{
    if (j->resize_to <= 0 || j->allocs)
        return 0;
    ts_job old = j->sj;
    ts_request *old_tasks = j->tasks;
    int old_n = j->ntasks, old_size = j->elastic_gpus;
    j->elastic_gpus = j->resize_to;
    j->resize_to = 0;
    j->tasks = NULL;
    int rc = ctld_job_build(c, j, err);
    if (rc != 0) { /* it runs again at the size it had */
        free(j->tasks);
        j->tasks = old_tasks;
        j->ntasks = old_n;
        j->sj = old;
        j->elastic_gpus = old_size;
        return rc;
    }
    free(old_tasks);
    /* what the scheduler tracks of it stays (job_update.c keeps the same) */
    j->sj.held = old.held;
    j->sj.eligible_s = old.eligible_s;
    j->sj.attained_gpu_s = old.attained_gpu_s;
    j->sj.queued_s = old.queued_s;
    j->sj.preemptions_hour = old.preemptions_hour;
    j->sj.start_s = old.start_s;
    j->sj.last_ckpt_s = old.last_ckpt_s;
    return 0;
}

int ctld_elastic_plan(ctld *c, ctld_txn *t, cjob *j, const ts_cycle_resize *rs, double now,
                      ts_err *err)
{
    char detail[160];
    double grace = j->sj.ckpt_grace_s >= 0 ? j->sj.ckpt_grace_s : c->cfg.sched.default_grace_s;
    snprintf(detail, sizeof detail, "elastic resize from %d to %d GPUs (%s); signal %d, grace "
             "%.0f s, then a restart at the new size",
             rs->from_gpus, rs->gpus, rs->reclaim ? "extras taken back for waiting work"
                                                  : rs->gpus > rs->from_gpus ? "grown where "
                                                  "goodput gains" : "shrunk where goodput gains",
             j->sj.ckpt_signal > 0 ? j->sj.ckpt_signal : TS_SIGNAL_DEFAULT, grace);
    ctld_fsm_args a = {.detail = detail, .stop_by_s = now + grace, .restart_now = true};
    int rc = ctld_fsm_plan(c, t, j, CTLD_JE_PREEMPT, &a, now, err);
    if (rc == 0) {
        j->resize_to = rs->gpus; /* taken when its run has stopped */
        j->elastic_prev = rs->from_gpus;
    }
    return rc;
}

bool ctld_elastic_fallback(ctld *c, cjob *j, int reason)
{
    bool no_room = reason == TS_PEND_CAPACITY || reason == TS_PEND_TOPOLOGY ||
                   reason == TS_PEND_FRAGMENTATION || reason == TS_PEND_GANG ||
                   reason == TS_PEND_RESERVATION || reason == TS_PEND_CONSTRAINT;
    int min = j->sj.elastic_min_gpus;
    if (!no_room || j->sj.elastic_max_gpus <= 0 || j->allocs || j->elastic_gpus <= min)
        return false;
    /* the size it had, if it grew; else (or when that did not fit either) its minimum */
    int to = j->elastic_prev > min && j->elastic_prev < j->elastic_gpus ? j->elastic_prev : min;
    j->elastic_prev = 0;
    j->resize_to = to;
    ts_err e;
    if (ctld_elastic_apply(c, j, &e) != 0) {
        fprintf(stderr, "tesserad: job %lld: back to %d GPUs: %s\n", (long long)j->row.id, to,
                e.msg);
        return false;
    }
    return true;
}

/* Weight of a new step time of a size against what was noted before (each
 * distinct reading counts once: ctld_elastic_observe). */
#define STEP_NEW_WEIGHT 0.3

void ctld_elastic_observe(ctld *c, cjob *j)
{
    int max = j->sj.elastic_max_gpus, g = j->elastic_gpus;
    if (max <= 0 || !j->allocs || j->row.state != TS_JOB_RUNNING || g < 1 || g > max)
        return;
    if (j->elastic_step && j->elastic_step_max != max) { /* its range changed */
        free(j->elastic_step);
        j->elastic_step = NULL;
        j->sj.elastic_speedup = NULL;
    }
    if (!j->elastic_step) {
        j->elastic_step = calloc(2 * ((size_t)max + 1), sizeof *j->elastic_step);
        if (!j->elastic_step)
            return;
        j->elastic_step_max = max;
        j->elastic_noted_g = 0; /* nothing noted in the new table yet */
    }
    float worst = 0;
    for (int r = 0; r < j->ntasks; r++) {
        float st = 0;
        if (!ctld_rank_reading(c, j, r, NULL, &st) || !(st > 0))
            return; /* every rank has reported at this size, or nothing is noted */
        worst = st > worst ? st : worst; /* a synchronous step waits for the slowest */
    }
    if (worst == j->elastic_noted_s && g == j->elastic_noted_g)
        return; /* read again, not measured again */
    j->elastic_noted_s = worst;
    j->elastic_noted_g = g;
    double *step = j->elastic_step, *sp = step + max + 1;
    step[g] = step[g] > 0 ? (1 - STEP_NEW_WEIGHT) * step[g] + STEP_NEW_WEIGHT * worst : worst;
    j->sj.elastic_speedup = ts_elastic_fit(step, j->sj.elastic_min_gpus, max, sp) >= 2 ? sp : NULL;
}
