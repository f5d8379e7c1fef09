/*
 * replay_engine.c - virtual time, progress and metrics of a rigid-job replay.
 *
 * The engine follows the Pollux simulator's clock (README "Experiment
 * procedures" B): with rounds of R seconds, at t = R, 2R, ... every job that
 * holds GPUs first advances R seconds (restart delay, then progress; a job
 * that finishes inside the round finishes at its exact second and frees its
 * GPUs for the next decision), then every submitted, unfinished job goes to
 * the policy. With R = 0 the policy decides at every arrival, completion and
 * policy event instead. Each start and restart costs restart_cost_s held
 * without progress. Placement is count-only: a newly started job takes its
 * GPUs one at a time from the node with the most free GPUs and keeps them
 * until it finishes or is preempted (no migration). With checkpoint_s 0 a
 * preempted job checkpoints as it stops and loses no progress, only the
 * restart cost is paid again; with N > 0 it keeps only the progress up to its
 * last multiple of N s (it checkpoints every N s of progress, and resumes from
 * one, so the multiples stay aligned) and does the rest again. Time is a
 * double in seconds; with integer inputs every time stays an exact integer.
 * With ckpt_cost_by_gpus (the Helios procedure's SRTF, README A) every
 * restart after a preemption also pays the checkpoint cost for the job's GPU
 * count. With tenants in the config the engine only checks them and hands
 * them to the policy; the pooled cluster is the same. Every hold can be
 * logged (start, end, finished or preempted) for the fairness figures and
 * the time series (replay_timeline.c).
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay/replay.h"
#include "tessera/grow.h"

/* Slack for comparing accumulated float times (event-driven mode only; with
 * integer rounds every value is exact). */
#define TIME_EPS_S 1e-6

typedef struct job_state {
    bool holding, finished;
    double delay_left_s, work_left_s;
    double held_s, delay_spent_s;
    double hold_start_s;
    int *gpu_node;  /* gpus entries: the node of each held GPU */
} job_state;

typedef struct engine {
    const ts_replay_config *cfg;
    const ts_replay_policy_ops *pol;
    void *pol_state;
    const ts_replay_job *jobs;
    int njobs, total_gpus;
    job_state *st;
    ts_replay_outcome *out;
    int *node_free;
    int *pending;
    int npending;
    int *active;  /* arrived, unfinished jobs, ascending: what advance and decide walk */
    int nactive;
    bool *holding, *run;
    double *work_left;
    double *at_risk;
    ts_replay_log *log;
    int log_failed;  /* TS_ENOMEM once appending to the log failed */
    int nfinished;
    int arrived;  /* jobs[0..arrived-1] have submit_s <= now */
    double now, since;
} engine;

void ts_replay_log_free(ts_replay_log *log)
{
    if (!log)
        return;
    free(log->holds);
    memset(log, 0, sizeof *log);
}

static void log_hold(engine *e, int j, double end_s, bool done)
{
    ts_replay_log *log = e->log;
    if (!log || e->log_failed)
        return;
    if (ts_grow((void **)&log->holds, &log->cap, log->n + 1, 1024, sizeof *log->holds) != 0) {
        e->log_failed = TS_ENOMEM;
        return;
    }
    log->holds[log->n++] = (ts_replay_hold){j, e->st[j].hold_start_s, end_s, done};
}

/* j gives its GPUs back at end_s, finished (done) or preempted. */
static void release(engine *e, int j, double end_s, bool done)
{
    job_state *s = &e->st[j];
    for (int k = 0; k < e->jobs[j].gpus; k++)
        e->node_free[s->gpu_node[k]]++;
    s->holding = false;
    e->holding[j] = false;
    log_hold(e, j, end_s, done);
}

/* Progress made since j's last checkpoint: what a preemption now loses. A
 * value within TIME_EPS_S of a whole interval is a checkpoint just taken. */
static double at_risk_s(const engine *e, int j)
{
    double every = e->cfg->checkpoint_s;
    if (every <= 0)
        return 0;
    double done = e->jobs[j].work_s - e->st[j].work_left_s;
    double r = fmod(done, every);
    return r < TIME_EPS_S || every - r < TIME_EPS_S ? 0 : r;
}

static void place(engine *e, int j)
{
    job_state *s = &e->st[j];
    for (int k = 0; k < e->jobs[j].gpus; k++) {
        int best = 0;
        for (int n = 1; n < e->cfg->nodes; n++)
            if (e->node_free[n] > e->node_free[best])
                best = n;
        assert(e->node_free[best] > 0);
        e->node_free[best]--;
        s->gpu_node[k] = best;
    }
    s->holding = true;
    e->holding[j] = true;
    s->hold_start_s = e->now;
    s->delay_left_s = e->cfg->restart_cost_s;
    if (e->cfg->ckpt_cost_by_gpus && e->out[j].starts > 0)
        s->delay_left_s += replay_ckpt_cost_s(e->jobs[j].gpus);
    s->delay_left_s += replay_start_delay_s(e->pol, e->pol_state, j); /* an image pull */
    e->out[j].starts++;
}

/* Moves one unfinished job from e->now to t: a holder runs (delay first), a
 * submitted waiter waits. */
static void advance_job(engine *e, int j, double t)
{
    double dt = t - e->now;
    job_state *s = &e->st[j];
    if (s->holding) {
        double d = s->delay_left_s < dt ? s->delay_left_s : dt;
        s->delay_left_s -= d;
        s->delay_spent_s += d;
        double rest = dt - d;
        if (s->work_left_s <= rest + TIME_EPS_S) {
            double fin = e->now + d + s->work_left_s;
            s->held_s += d + s->work_left_s;
            s->work_left_s = 0;
            s->finished = true;
            e->out[j].finish_s = fin;
            e->out[j].jct_s = fin - e->jobs[j].submit_s;
            e->nfinished++;
            release(e, j, fin, true);
        } else {
            s->work_left_s -= rest;
            s->held_s += dt;
        }
    } else if (e->jobs[j].submit_s < t) {
        double from = e->jobs[j].submit_s > e->now ? e->jobs[j].submit_s : e->now;
        e->out[j].queue_s += t - from;
    }
}

/* Moves every job from e->now to t. Only the active list and the jobs that
 * arrive before t are touched, so a step costs O(active), not O(jobs). */
static void advance(engine *e, double t)
{
    assert(t - e->now >= 0);
    int keep = 0;
    for (int i = 0; i < e->nactive; i++) {
        int j = e->active[i];
        advance_job(e, j, t);
        if (!e->st[j].finished)
            e->active[keep++] = j;
    }
    for (int j = e->arrived; j < e->njobs && e->jobs[j].submit_s < t; j++)
        advance_job(e, j, t);  /* waiters only: they hold nothing yet */
    e->nactive = keep;
    e->now = t;
    while (e->arrived < e->njobs && e->jobs[e->arrived].submit_s <= t)
        e->active[e->nactive++] = e->arrived++;
}

static ts_replay_view view_of(const engine *e)
{
    return (ts_replay_view){
        .now_s = e->now,
        .since_s = e->since,
        .jobs = e->jobs,
        .njobs = e->njobs,
        .pending = e->pending,
        .npending = e->npending,
        .holding = e->holding,
        .work_left_s = e->work_left,
        .total_gpus = e->total_gpus,
        .at_risk_s = e->at_risk,
        .tenants = e->cfg->ntenants > 0 ? e->cfg->tenants : NULL,
        .ntenants = e->cfg->ntenants,
        .gpus_per_node = e->cfg->gpus_per_node,
        .sched = e->cfg->sched,
    };
}

/* One decision at e->now: ask the policy, preempt, place. */
static int decide(engine *e, ts_err *err)
{
    e->npending = e->nactive;
    for (int i = 0; i < e->nactive; i++) {
        int j = e->active[i];
        e->pending[i] = j;
        e->work_left[j] = e->st[j].work_left_s;
        e->at_risk[j] = e->holding[j] ? at_risk_s(e, j) : 0;
    }
    for (int i = 0; i < e->npending; i++)
        e->run[e->pending[i]] = false;
    ts_replay_view v = view_of(e);
    e->pol->decide(e->pol_state, &v, e->run);
    long want = 0;
    for (int i = 0; i < e->npending; i++)
        if (e->run[e->pending[i]])
            want += e->jobs[e->pending[i]].gpus;
    if (want > e->total_gpus)
        return ts_err_set(err, TS_EINVAL, "policy %s: chose %ld GPUs of %d at t=%.0f s",
                          e->pol->name, want, e->total_gpus, e->now);
    int nholding = 0;
    for (int i = 0; i < e->npending; i++) {
        int j = e->pending[i];
        /* stopped, or stopped and started again in this decision (a move):
         * a preemption either way, the restart placed below */
        bool moved = e->run[j] && e->pol->restarted && e->pol->restarted(e->pol_state, j);
        if (e->holding[j] && (!e->run[j] || moved)) {
            assert(e->pol->preemptive);
            double lost = at_risk_s(e, j);
            e->st[j].work_left_s += lost;
            e->out[j].lost_work_s += lost;
            release(e, j, e->now, false);
            e->out[j].preemptions++;
        }
    }
    for (int i = 0; i < e->npending; i++) {
        int j = e->pending[i];
        if (e->run[j] && !e->holding[j])
            place(e, j);
        nholding += e->holding[j];
    }
    if (nholding == 0 && e->npending > 0)
        return ts_err_set(err, TS_ENOSPC, "policy %s: starts nothing on an idle cluster at t=%.0f s",
                          e->pol->name, e->now);
    e->since = e->now;
    return 0;
}

static double next_time(engine *e)
{
    double R = e->cfg->round_s;
    bool busy = e->npending > 0;  /* after a decision, pending includes holders */
    if (R > 0) {
        if (busy || e->arrived == e->njobs)
            return e->now + R;
        /* idle: jump to the first boundary at which the next job is seen */
        double tn = ceil(e->jobs[e->arrived].submit_s / R) * R;
        return tn > e->now + R ? tn : e->now + R;
    }
    double tn = INFINITY;
    if (e->arrived < e->njobs)
        tn = e->jobs[e->arrived].submit_s;
    for (int i = 0; i < e->npending; i++) {
        int j = e->pending[i];
        if (e->holding[j]) {
            double f = e->now + e->st[j].delay_left_s + e->st[j].work_left_s;
            if (f < tn)
                tn = f;
        }
    }
    if (e->pol->next_event_s) {
        ts_replay_view v = view_of(e);
        double p = e->pol->next_event_s(e->pol_state, &v);
        if (p > e->now && p < tn)
            tn = p;
    }
    assert(isfinite(tn));
    return tn;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double replay_ckpt_cost_s(int gpus)
{
    return gpus <= 1 ? TS_REPLAY_CKPT_1GPU_S : gpus <= 8 ? TS_REPLAY_CKPT_NODE_S : TS_REPLAY_CKPT_MULTI_S;
}

/* numpy's default (linear interpolation between closest ranks) */
double replay_percentile(const double *sorted, int n, double q)
{
    if (n == 0)
        return 0;
    double pos = q / 100.0 * (n - 1);
    int lo = (int)floor(pos);
    int hi = lo + 1 < n ? lo + 1 : n - 1;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

static int summarise(const engine *e, ts_replay_result *res, ts_err *err)
{
    memset(res, 0, sizeof *res);
    res->jobs = e->njobs;
    if (e->njobs == 0)
        return 0;
    double *jct = malloc(sizeof *jct * (size_t)e->njobs);
    if (!jct)
        return ts_err_set(err, TS_ENOMEM, "replay: out of memory");
    double sum_jct = 0, sum_q = 0, busy_gpu_s = 0;
    for (int j = 0; j < e->njobs; j++) {
        const ts_replay_outcome *o = &e->out[j];
        const job_state *s = &e->st[j];
        int g = e->jobs[j].gpus;
        jct[j] = o->jct_s;
        sum_jct += o->jct_s;
        sum_q += o->queue_s;
        if (g > e->cfg->gpus_per_node) {
            res->gang_jobs++;
            res->avg_gang_wait_s += o->queue_s;
        }
        if (o->queue_s > res->max_wait_s)
            res->max_wait_s = o->queue_s;
        if (o->finish_s > res->makespan_s)
            res->makespan_s = o->finish_s;
        res->preemptions += o->preemptions;
        busy_gpu_s += s->held_s * g;
        double first = e->cfg->restart_cost_s < s->delay_spent_s ? e->cfg->restart_cost_s
                                                                 : s->delay_spent_s;
        res->lost_gpu_s += (s->delay_spent_s - first + o->lost_work_s) * g;
    }
    qsort(jct, (size_t)e->njobs, sizeof *jct, cmp_double);
    res->avg_jct_s = sum_jct / e->njobs;
    res->p50_jct_s = replay_percentile(jct, e->njobs, 50);
    res->p99_jct_s = replay_percentile(jct, e->njobs, 99);
    res->avg_queue_s = sum_q / e->njobs;
    if (res->gang_jobs > 0)
        res->avg_gang_wait_s /= res->gang_jobs;
    if (res->makespan_s > 0)
        res->utilization_pct = 100.0 * busy_gpu_s / (e->total_gpus * res->makespan_s);
    free(jct);
    return 0;
}

static int check_input(const ts_replay_config *cfg, const ts_replay_job *jobs, int njobs,
                       ts_err *err)
{
    if (cfg->nodes < 1 || cfg->gpus_per_node < 1)
        return ts_err_set(err, TS_EINVAL, "replay: nodes and gpus_per_node must be >= 1");
    if (!(cfg->round_s >= 0) || !(cfg->restart_cost_s >= 0) || !isfinite(cfg->round_s) ||
        !isfinite(cfg->restart_cost_s))
        return ts_err_set(err, TS_EINVAL, "replay: round_s and restart_cost_s must be >= 0");
    if (!(cfg->checkpoint_s >= 0) || !isfinite(cfg->checkpoint_s))
        return ts_err_set(err, TS_EINVAL, "replay: checkpoint_s: must be >= 0");
    long total = (long)cfg->nodes * cfg->gpus_per_node;
    if (cfg->ntenants < 0 || (cfg->ntenants > 0 && !cfg->tenants))
        return ts_err_set(err, TS_EINVAL, "replay: ntenants: must be >= 0, with tenants");
    long guaranteed = 0;
    for (int k = 0; k < cfg->ntenants; k++) {
        if (cfg->tenants[k].gpus < 0)
            return ts_err_set(err, TS_EINVAL, "tenants[%d] (%s).gpus: must be >= 0", k,
                              cfg->tenants[k].name);
        guaranteed += cfg->tenants[k].gpus;
    }
    if (guaranteed > total)
        return ts_err_set(err, TS_EINVAL,
                          "tenants: guarantees add up to %ld GPUs, the cluster has %ld",
                          guaranteed, total);
    for (int j = 0; j < njobs; j++) {
        const ts_replay_job *J = &jobs[j];
        if (J->gpus < 1 || J->gpus > total)
            return ts_err_set(err, TS_EINVAL, "jobs[%d] (%s).gpus: must be 1..%ld, got %d", j,
                              J->name, total, J->gpus);
        if (!(J->work_s >= 0) || !isfinite(J->work_s))
            return ts_err_set(err, TS_EINVAL, "jobs[%d] (%s).work_s: must be >= 0", j, J->name);
        if (!(J->submit_s >= 0) || !isfinite(J->submit_s))
            return ts_err_set(err, TS_EINVAL, "jobs[%d] (%s).submit_s: must be >= 0", j, J->name);
        if (j > 0 && J->submit_s < jobs[j - 1].submit_s)
            return ts_err_set(err, TS_EINVAL, "jobs[%d] (%s).submit_s: jobs must be in arrival order",
                              j, J->name);
        if (cfg->ntenants > 0 && (J->tenant < 0 || J->tenant >= cfg->ntenants))
            return ts_err_set(err, TS_EINVAL, "jobs[%d] (%s).tenant: must be 0..%d", j, J->name,
                              cfg->ntenants - 1);
    }
    return 0;
}

static void engine_free(engine *e)
{
    if (e->pol_state && e->pol->free)
        e->pol->free(e->pol_state);
    if (e->st)
        free(e->st[0].gpu_node);
    free(e->st);
    free(e->node_free);
    free(e->pending);
    free(e->active);
    free(e->holding);
    free(e->run);
    free(e->work_left);
    free(e->at_risk);
}

int replay_run(const ts_replay_config *cfg, const ts_replay_policy_ops *policy,
                  const ts_replay_job *jobs, int njobs, ts_replay_outcome *out,
                  ts_replay_result *res, ts_err *err)
{
    return ts_replay_run_logged(cfg, policy, jobs, njobs, out, res, NULL, err);
}

int ts_replay_run_logged(const ts_replay_config *cfg, const ts_replay_policy_ops *policy,
                         const ts_replay_job *jobs, int njobs, ts_replay_outcome *out,
                         ts_replay_result *res, ts_replay_log *log, ts_err *err)
{
    int rc = check_input(cfg, jobs, njobs, err);
    if (rc)
        return rc;
    engine e = {.cfg = cfg, .pol = policy, .jobs = jobs, .njobs = njobs,
                .total_gpus = cfg->nodes * cfg->gpus_per_node, .log = log};
    size_t n = (size_t)(njobs > 0 ? njobs : 1);
    long pool = 0;
    for (int j = 0; j < njobs; j++)
        pool += jobs[j].gpus;
    e.st = calloc(n, sizeof *e.st);
    e.node_free = malloc(sizeof *e.node_free * (size_t)cfg->nodes);
    e.pending = malloc(sizeof *e.pending * n);
    e.active = malloc(sizeof *e.active * n);
    e.holding = calloc(n, sizeof *e.holding);
    e.run = calloc(n, sizeof *e.run);
    e.work_left = calloc(n, sizeof *e.work_left);
    e.at_risk = calloc(n, sizeof *e.at_risk);
    ts_replay_outcome *own = out ? NULL : calloc(n, sizeof *own);
    e.out = out ? out : own;
    int *gpu_pool = malloc(sizeof *gpu_pool * (size_t)(pool > 0 ? pool : 1));
    if (!e.st || !e.node_free || !e.pending || !e.active || !e.holding || !e.run ||
        !e.work_left || !e.at_risk || !e.out || !gpu_pool) {
        free(gpu_pool);
        free(own);
        engine_free(&e);
        return ts_err_set(err, TS_ENOMEM, "replay: out of memory");
    }
    if (out)
        memset(out, 0, sizeof *out * (size_t)njobs);
    for (int nd = 0; nd < cfg->nodes; nd++)
        e.node_free[nd] = cfg->gpus_per_node;
    long off = 0;
    for (int j = 0; j < njobs; j++) {
        e.st[j].work_left_s = jobs[j].work_s;
        e.st[j].gpu_node = gpu_pool + off;
        off += jobs[j].gpus;
    }
    if (njobs == 0)
        free(gpu_pool);  /* st[0].gpu_node is NULL: engine_free frees nothing twice */
    if ((rc = policy->init(&e.pol_state, njobs, cfg->ntenants, err)) != 0) {
        free(own);
        engine_free(&e);
        return rc;
    }

    if (njobs > 0 && cfg->round_s == 0) {
        e.now = e.since = jobs[0].submit_s;
        advance(&e, e.now);
        rc = decide(&e, err);
    }
    while (rc == 0 && e.nfinished < njobs) {
        advance(&e, next_time(&e));
        if (e.nfinished < njobs)
            rc = decide(&e, err);
    }
    if (rc == 0 && e.log_failed)
        rc = ts_err_set(err, e.log_failed, "replay: out of memory for the hold log");
    if (rc == 0)
        rc = summarise(&e, res, err);
    if (rc == 0 && policy->estimates)
        policy->estimates(e.pol_state, res);
    free(own);
    engine_free(&e);
    return rc;
}

void ts_replay_result_mean(const ts_replay_result *per, int n, ts_replay_result *out)
{
    memset(out, 0, sizeof *out);
    if (n <= 0)
        return;
    for (int i = 0; i < n; i++) {
        const ts_replay_result *r = &per[i];
        out->jobs += r->jobs;
        out->avg_jct_s += r->avg_jct_s / n;
        out->p50_jct_s += r->p50_jct_s / n;
        out->p99_jct_s += r->p99_jct_s / n;
        out->avg_queue_s += r->avg_queue_s / n;
        out->gang_jobs += r->gang_jobs;
        out->avg_gang_wait_s += r->avg_gang_wait_s / n;
        out->utilization_pct += r->utilization_pct / n;
        out->makespan_s += r->makespan_s / n;
        out->preemptions += r->preemptions;
        out->moves += r->moves;
        out->time_shares += r->time_shares;
        out->lost_gpu_s += r->lost_gpu_s;
        out->est_waited += r->est_waited;
        out->est_jobs += r->est_jobs;
        out->est_median_err_s += r->est_median_err_s / n;
        out->est_p90_err_s += r->est_p90_err_s / n;
        if (r->max_wait_s > out->max_wait_s)
            out->max_wait_s = r->max_wait_s;
    }
}
