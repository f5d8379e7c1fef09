/*
 * pollux_goodput.c - what an elastic job of the Pollux job model reports:
 * its best goodput at g GPUs, the batch size adapted to g (pollux_model.h,
 * ts_pm_goodput_*). The candidates are the artifact's: total batches spaced
 * geometrically from max(the smallest validated batch, g x the smallest
 * per-GPU batch) to the largest validated one, split into per-GPU batches
 * of at most the largest profiled size by accumulating gradients; each is
 * timed on g GPUs packed on nodes and weighed by its efficiency gain at the
 * job's epoch. The job reads the application's true profiles (the artifact's
 * Pollux fits them from what the job has run; an oracle here).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay/pollux_model.h"
#include "tessera/grow.h"

#define CANDIDATES 50
#define BSZ_EPS 1e-8

typedef struct cand {
    int batch, atomic, accum;
    double time_s; /* one step, accumulation included; 0: not valid */
} cand;

struct ts_pm_goodput {
    const ts_pm_app *app;
    int max_gpus;
    cand *c;         /* (max_gpus + 1) x CANDIDATES */
    double *best;    /* (epochs) x (max_gpus + 1): goodput, < 0 until computed */
    int *best_batch;
    void *block; /* c, best and best_batch, one allocation */
};

int replay_pm_goodput_new(const ts_pm_app *a, int gpus_per_node, int max_gpus,
                      ts_pm_goodput **out, ts_err *err)
{
    ts_pm_goodput *g = calloc(1, sizeof *g);
    int ep = replay_pm_app_epochs(a);
    if (g) {
        ts_block_part parts[] = {
            TS_BLOCK_PART(g->c, (size_t)(max_gpus + 1) * CANDIDATES),
            TS_BLOCK_PART(g->best, (size_t)ep * (max_gpus + 1)),
            TS_BLOCK_PART(g->best_batch, (size_t)ep * (max_gpus + 1))};
        g->block = ts_block_alloc(parts, sizeof parts / sizeof *parts);
    }
    if (!g || !g->block) {
        free(g);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    g->app = a;
    g->max_gpus = max_gpus;
    for (int i = 0; i < ep * (max_gpus + 1); i++)
        g->best[i] = -1;
    int b0 = replay_pm_app_init_bsz(a), bmax = replay_pm_app_max_bsz(a);
    int lmin = replay_pm_app_min_local_bsz(a), lmax = replay_pm_app_max_local_bsz(a);
    for (int n = 1; n <= max_gpus; n++) {
        int cnt[TS_PM_NODES_MAX], m = 0;
        for (int left = n; left > 0 && m < TS_PM_NODES_MAX; m++) {
            cnt[m] = left < gpus_per_node ? left : gpus_per_node;
            left -= cnt[m];
        }
        double lo = b0 > lmin * n ? b0 : (double)lmin * n;
        for (int k = 0; k < CANDIDATES && lo <= bmax; k++) {
            double b = CANDIDATES == 1 ? lo : lo * pow(bmax / lo, (double)k / (CANDIDATES - 1));
            double local = b / n;
            int accum = (int)ceil(local / lmax - BSZ_EPS) - 1;
            if (n == 1 && local > b0 + BSZ_EPS && accum < 1)
                accum = 1;
            int atomic = (int)ceil(local / (accum + 1) - BSZ_EPS);
            cand *c = &g->c[(size_t)n * CANDIDATES + k];
            if (atomic < lmin || atomic > lmax)
                continue;
            double st, sy;
            replay_pm_step_time(a, cnt, m, atomic, &st, &sy);
            c->batch = n * atomic * (accum + 1);
            c->atomic = atomic;
            c->accum = accum;
            c->time_s = st + (st - sy) * accum;
        }
    }
    *out = g;
    return 0;
}

void replay_pm_goodput_free(ts_pm_goodput *g)
{
    if (!g)
        return;
    free(g->block);
    free(g);
}

double replay_pm_goodput_best(ts_pm_goodput *g, int gpus, int epoch, int *batch)
{
    int ep = replay_pm_app_epochs(g->app);
    if (epoch >= ep)
        epoch = ep - 1;
    if (gpus < 1 || gpus > g->max_gpus) {
        if (batch)
            *batch = 0;
        return 0;
    }
    size_t at = (size_t)epoch * (g->max_gpus + 1) + gpus;
    if (g->best[at] < 0) {
        double best = 0;
        int bb = 0;
        for (int k = 0; k < CANDIDATES; k++) {
            const cand *c = &g->c[(size_t)gpus * CANDIDATES + k];
            if (c->time_s <= 0)
                continue;
            double gp = replay_pm_gain(g->app, c->batch, epoch) / c->time_s;
            if (gp > best) {
                best = gp;
                bb = c->batch;
            }
        }
        g->best[at] = best;
        g->best_batch[at] = bb;
    }
    if (batch)
        *batch = g->best_batch[at];
    return g->best[at];
}
