/*
 * elastic.c - the goodput-aware grant of spare GPUs (elastic.h).
 *
 * Greedy on the sum of the jobs' times left, each weighted by one over its
 * work left squared (value() below; Pollux maximises a power mean of
 * speedups, exponent -1, which is this sum without the weights): every job
 * starts at its minimum, and GPUs go, a jump at a time, to the job whose
 * next size shortens the weighted sum most per GPU, so a job near its end
 * comes first, as shortest-remaining-first orders rigid work (the weights
 * took the Pollux model's avg JCT 4 % to 10 % lower at every load, long
 * jobs paying: docs/simulator.md). A jump may pass over sizes that lose
 * (one more node to synchronise across). Any size other than what a job
 * holds now costs it a restart, counted as the time it loses,
 * TS_ELASTIC_GAIN_OVER_COST times over; so a job keeps its size unless the
 * cluster gains clearly more elsewhere.
 *
 * cycle_elastic is the cycle's last step: it counts the free GPUs and the
 * GPUs the waiting jobs lack room for, and turns the grant over the
 * running elastic jobs into resizes. It decides sizes, not places: a
 * resize is a requeue at the new size, placed all or nothing by the next
 * cycle as any job is (docs/scheduler.md, "Elastic jobs").
 */
#include "sched/elastic.h"

#include <stdlib.h>
#include <string.h>

#include "sched/cycle_internal.h"

/* Job j's worth at g GPUs: minus its time left there over its work left
 * squared (the work in seconds at its minimum, W = time left x speedup
 * now; time left at g = W / speedup[g]), a restart's loss added when g is
 * not its size. Over the jobs the grant so minimises the sum of their times
 * left weighted by 1 / W^2: the remaining time of a job near its end
 * weighs most (as shortest-remaining-first orders rigid work), and a GPU
 * goes where it shortens the weighted sum most. A job that gives no time
 * left weighs as if it had the restart's cost left. */
static double value(const ts_elastic_job *j, int g, double resize_cost_s)
{
    double rem = j->remaining_s > resize_cost_s ? j->remaining_s : resize_cost_s;
    double now = j->speedup[j->cur_gpus] > 0 ? j->speedup[j->cur_gpus] : 1.0;
    double work = now * (rem > 0 ? rem : 1.0);
    double v = j->speedup[g] > 0 ? -1.0 / j->speedup[g] : -1e9;
    if (g != j->cur_gpus && !j->changing && j->remaining_s > 0)
        v -= TS_ELASTIC_GAIN_OVER_COST * resize_cost_s / (now * rem);
    return v / work;
}

int ts_elastic_grant(const ts_elastic_job *jobs, int n, int pool, double resize_cost_s,
                     int *target)
{
    int left = pool;
    for (int i = 0; i < n; i++) {
        target[i] = jobs[i].min_gpus;
        left -= jobs[i].min_gpus;
    }
    while (left > 0) {
        int bi = -1, bg = 0;
        double best = 0;
        for (int i = 0; i < n; i++) {
            const ts_elastic_job *j = &jobs[i];
            int t = target[i];
            double vt = value(j, t, resize_cost_s);
            for (int g = t + 1; g <= j->max_gpus && g - t <= left; g++) {
                double per = (value(j, g, resize_cost_s) - vt) / (g - t);
                if (per > best) {
                    best = per;
                    bi = i;
                    bg = g;
                }
            }
        }
        if (bi < 0)
            break;
        left -= bg - target[bi];
        target[bi] = bg;
    }
    return pool - left;
}

int ts_elastic_fit(const double *step_s, int min_gpus, int max_gpus, double *speedup)
{
    if (!step_s || !speedup || min_gpus < 1 || max_gpus < min_gpus)
        return 0;
    /* least squares of step = a + b x, x = 1 / g, over the sizes measured */
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int g = min_gpus; g <= max_gpus; g++) {
        if (!(step_s[g] > 0))
            continue;
        double x = 1.0 / g;
        n++;
        sx += x;
        sy += step_s[g];
        sxx += x * x;
        sxy += x * step_s[g];
    }
    if (n < 2)
        return (int)n;
    double den = n * sxx - sx * sx;
    double b = den > 0 ? (n * sxy - sx * sy) / den : 0, a = (sy - b * sx) / n;
    if (a < 0) { /* nothing fixed: all of the step shrinks with more GPUs */
        a = 0;
        b = sxy / sxx;
    }
    if (b < 0) { /* more GPUs measured no faster: no speedup */
        b = 0;
        a = sy / n;
    }
    double at_min = a + b / min_gpus;
    for (int g = 0; g <= max_gpus; g++)
        speedup[g] = g >= min_gpus && at_min > 0 ? at_min / (a + b / g) : 0;
    return (int)n;
}

/* Waiting work that lacks room (not what waits for its quota, a hold or a
 * dependency, nor a preemptor, whose victims free its room): the GPUs it
 * asks for are owed before any job grows. */
static bool lacks_room(int reason)
{
    switch (reason) {
    case TS_PEND_CAPACITY:
    case TS_PEND_TOPOLOGY:
    case TS_PEND_FRAGMENTATION:
    case TS_PEND_GANG:
    case TS_PEND_RESERVATION:
    case TS_PEND_CONSTRAINT:
        return true;
    default:
        return false;
    }
}

/* Is running job j elastic and free to change size now? */
static bool resizable(const ts_job *j, int64_t cur)
{
    return j->elastic_max_gpus > j->elastic_min_gpus && j->elastic_min_gpus >= 1 &&
           cur >= j->elastic_min_gpus && cur <= j->elastic_max_gpus && !j->stopping;
}

/* speedup[0..max] for the grant: the job's own curve (or g / min), sizes
 * off its step (or below its minimum) made worthless so the grant never
 * lands on them. */
static void fill_speedup(const ts_job *j, double *sp)
{
    int step = j->elastic_step_gpus > 0 ? j->elastic_step_gpus : 1;
    for (int g = 0; g <= j->elastic_max_gpus; g++) {
        bool on = g >= j->elastic_min_gpus && (g - j->elastic_min_gpus) % step == 0;
        double v = j->elastic_speedup ? j->elastic_speedup[g]
                                      : (double)g / (double)j->elastic_min_gpus;
        sp[g] = on && v > 0 ? v : 0.0;
    }
    if (sp[j->elastic_min_gpus] <= 0)
        sp[j->elastic_min_gpus] = 1.0;
}

int64_t cycle_elastic_extras(const ts_job *running, int nrunning, const bool *victim)
{
    int64_t extras = 0;
    for (int r = 0; r < nrunning; r++) {
        const ts_job *j = &running[r];
        if (j->elastic_max_gpus <= 0 || (victim && victim[r]))
            continue;
        int64_t cur = cycle_job_gpus(j);
        if (j->stopping ? cur > j->elastic_min_gpus && cur <= j->elastic_max_gpus
                        : resizable(j, cur))
            extras += cur - j->elastic_min_gpus;
    }
    return extras;
}

int cycle_elastic(ts_sched *s, double now, const ts_job *waiting, int nwaiting,
                  const ts_job *running, int nrunning, ts_decision *d)
{
    d->nresizes = 0;
    if (s->cfg.elastic_resize_cost_s < 0)
        return 0;
    int n = 0;
    size_t nsp = 0;
    for (int r = 0; r < nrunning; r++) {
        const ts_job *j = &running[r];
        if (j->elastic_max_gpus > 0 && resizable(j, cycle_job_gpus(j))) {
            n++;
            nsp += (size_t)j->elastic_max_gpus + 1;
        }
    }
    if (n == 0)
        return 0;
    int rc = TS_ENOMEM;
    ts_elastic_job *ej = malloc((size_t)n * sizeof *ej);
    int *idx = malloc((size_t)n * sizeof *idx), *target = malloc((size_t)n * sizeof *target);
    double *sp = malloc(nsp * sizeof *sp);
    bool *victim = calloc((size_t)nrunning, sizeof *victim);
    if (!ej || !idx || !target || !sp || !victim)
        goto out;
    for (int k = 0; k < d->npreempts; k++)
        victim[d->preempts[k].victim] = true;
    /* what waits for room is owed first; the free GPUs are what the cycle
     * left (its starts are bound), on nodes that take work */
    int64_t owed = 0, free_gpus = 0;
    bool waits = false; /* nobody grows while work waits for room */
    for (int i = 0; i < nwaiting; i++) {
        if (lacks_room(d->pending[i].reason))
            owed += cycle_job_gpus(&waiting[i]);
        waits = waits || d->pending[i].reason == TS_PEND_PREEMPTING;
    }
    waits = waits || owed > 0;
    /* the extras of elastic jobs already stopping for a resize come back
     * too: only the rest is taken from the running ones */
    for (int r = 0; r < nrunning && waits; r++) {
        const ts_job *j = &running[r];
        int64_t cur = cycle_job_gpus(j);
        if (j->stopping && !victim[r] && j->elastic_max_gpus > 0 && cur > j->elastic_min_gpus &&
            cur <= j->elastic_max_gpus)
            owed -= cur - j->elastic_min_gpus;
    }
    if (owed < 0)
        owed = 0;
    for (int i = 0; i < s->c->nnodes; i++)
        if (ts_gang_index_node_enabled(s->ix, i))
            free_gpus += s->c->nodes[i].gpus_free;
    int64_t pool = 0, extras = 0; /* the minimums, then what is spare */
    n = 0;
    double *next = sp;
    for (int r = 0; r < nrunning; r++) {
        const ts_job *j = &running[r];
        int64_t cur = cycle_job_gpus(j);
        if (j->elastic_max_gpus <= 0 || !resizable(j, cur) || victim[r])
            continue;
        fill_speedup(j, next);
        double limit = j->time_limit_s > 0 ? j->time_limit_s : s->cfg.default_time_limit_s;
        double left = j->elastic_left_s > 0 ? j->elastic_left_s : limit - (now - j->start_s);
        ts_elastic_job e = {j->elastic_min_gpus, j->elastic_max_gpus, (int)cur, next,
                            left > 0 ? left : 0, false};
        /* a job that ran less than the minimum runtime keeps its size,
         * unless waiting work needs its extras */
        if (!waits && now - j->start_s < s->cfg.reclaim_min_runtime_s)
            e.min_gpus = e.max_gpus = (int)cur;
        /* while work waits nobody grows: the grant then only chooses whose
         * extras go back (the least speedup lost), and no more than owed */
        if (waits)
            e.max_gpus = (int)cur;
        next += j->elastic_max_gpus + 1;
        extras += cur - e.min_gpus;
        pool += e.min_gpus;
        idx[n] = r;
        ej[n++] = e;
    }
    /* the free GPUs and the extras, less what waiting work is owed: extras
     * go back until it fits */
    pool += free_gpus + extras > owed ? free_gpus + extras - owed : 0;
    ts_elastic_grant(ej, n, (int)(pool < INT32_MAX ? pool : INT32_MAX),
                     s->cfg.elastic_resize_cost_s, target);
    rc = 0;
    for (int k = 0; k < n; k++) {
        bool grow = target[k] > ej[k].cur_gpus;
        if (target[k] == ej[k].cur_gpus || (grow && waits))
            continue;
        if (cycle_grow((void **)&d->resizes, &d->resizes_cap, d->nresizes + 1,
                       sizeof *d->resizes) != 0) {
            d->nresizes = 0;
            rc = TS_ENOMEM;
            break;
        }
        d->resizes[d->nresizes++] = (ts_cycle_resize){idx[k], target[k], ej[k].cur_gpus,
                                                      !grow && waits};
        if (grow)
            d->stats.grown++;
        else
            d->stats.shrunk++;
    }
out:
    free(ej);
    free(idx);
    free(target);
    free(sp);
    free(victim);
    return rc;
}
