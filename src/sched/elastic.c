/*
 * elastic.c - the goodput-aware grant of spare GPUs (elastic.h).
 *
 * Greedy on the sum of the jobs' speedups (the measure the Pollux paper
 * maximises, without its fairness exponent): every job starts at its
 * minimum, and GPUs go, a jump at a time, to the job whose next size adds
 * the most speedup per GPU. A jump may pass over sizes that lose (one more
 * node to synchronise across). Any size other than what a job holds now
 * costs it a restart, counted as the speedup it loses in that time spread
 * over its remaining time, TS_ELASTIC_GAIN_OVER_COST times over; so a job
 * keeps its size unless the cluster gains clearly more elsewhere.
 */
#include "sched/elastic.h"

static double value(const ts_elastic_job *j, int g, double resize_cost_s)
{
    double v = j->speedup[g] > 0 ? -1.0 / j->speedup[g] : -1e9;
    if (g != j->cur_gpus && !j->changing && j->remaining_s > 0) {
        double rem = j->remaining_s > resize_cost_s ? j->remaining_s : resize_cost_s;
        v -= TS_ELASTIC_GAIN_OVER_COST * resize_cost_s / (j->speedup[j->cur_gpus] * rem);
    }
    return v;
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
