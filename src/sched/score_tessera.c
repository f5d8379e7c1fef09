/*
 * score_tessera.c - Tessera's own placement policy: the fragmentation
 * gradient, extended to the CPU and memory that strand GPUs.
 *
 * FGD (score_fgd.c) scores a node by how much a pod grows the fragmentation
 * F of the expected workload, but F looks only at GPU slivers and CPU, and at
 * whether *one* pod of each typical class still fits. On the openb traces
 * almost every pod that fails does so on a node that still has free GPUs but
 * has run out of CPU or memory. So the measure here is
 *
 *   M(n) = F_mem(n) + w S(n)
 *   F_mem: FGD's F, where a class also fails on a node lacking its mean memory;
 *   S:     GPU stranded by CPU and memory - for each typical class j, the GPU
 *          that j could take on n by GPU count alone, minus what it could
 *          take once n's CPU and memory bound the number of j pods, weighted
 *          by p_j;
 *   w:     1 - 1.5 m (at least 0), m the share of the typical list's GPU
 *          demand that multi-GPU classes carry: S presses small pods towards
 *          nodes with CPU to spare, which are the whole nodes large pods need
 *          (frag.c: ts_frag_shape_placement, shared with gang placement).
 *
 * A pod's score is 100 * sigmoid((M before - M after) / D), truncated to a
 * whole number: coarser buckets than FGD's (D = 4000; 8000 for GPU shares
 * when the typical list pins almost none of its GPU demand to models), so
 * placements consolidate in node order (ties go to the lowest index) unless
 * a node is clearly better. Shares try every GPU that can take them.
 * docs/policies.md has the measurements.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "sched/scorers.h"

#define TESSERA_SCORE_BUCKETS 100
#define TESSERA_DELTA_SCALE_MILLI 4000.0
/* Shares consolidate twice as coarsely where (almost) no pod is pinned to a
 * GPU model: with pinned pods, the finer buckets keep a share off the GPUs
 * only they can use. */
#define TESSERA_SHARE_SCALE_UNPINNED_MILLI 8000.0
#define TESSERA_PINNED_FEW 0.03 /* pinned share of the typical GPU demand */

typedef struct before_entry {
    uint64_t version; /* node version + 1 when valid */
    double measure;
} before_entry;

typedef struct tessera {
    ts_typical typ; /* shallow copy of the env's list, memory-aware */
    const ts_cluster *cluster;
    before_entry *before; /* M(n) per node, valid while the node is unchanged */
    int nbefore;
    double w_stranded;    /* w: the weight of S in M */
    double scale_share;   /* D for GPU shares */
} tessera;

/* The share of the typical list's GPU demand (sum p_j * GPUs_j) that is
 * pinned to GPU models. */
static double pinned_share(const ts_typical *typ)
{
    double all = 0.0, pinned = 0.0;
    for (int j = 0; j < typ->n; j++) {
        double g = typ->p[j] * (double)typ->req[j].num_gpu * (double)typ->req[j].gpu_milli;
        all += g;
        pinned += typ->req[j].model_mask ? g : 0.0;
    }
    return all > 0.0 ? pinned / all : 0.0;
}

static int tessera_init(void **state, const ts_sched_env *env, ts_err *err)
{
    if (!env->typical)
        return ts_err_set(err, TS_EINVAL, "tessera: needs a typical-pod list");
    tessera *t = calloc(1, sizeof *t);
    if (!t)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    t->cluster = env->cluster;
    t->nbefore = env->cluster && !env->no_cache ? env->cluster->nnodes : 0;
    t->before = calloc((size_t)(t->nbefore ? t->nbefore : 1), sizeof *t->before);
    if (!t->before) {
        free(t);
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    }
    t->typ = *env->typical;
    t->typ.mem_aware = t->typ.mem_mib != NULL;
    t->w_stranded = ts_frag_stranded_weight(&t->typ);
    t->scale_share = pinned_share(&t->typ) < TESSERA_PINNED_FEW
                         ? TESSERA_SHARE_SCALE_UNPINNED_MILLI
                         : TESSERA_DELTA_SCALE_MILLI;
    *state = t;
    return 0;
}

static void tessera_fini(void *state)
{
    tessera *t = state;
    if (t)
        free(t->before);
    free(t);
}

/* The measure is symmetric in the GPUs, so a GPU with the same free milli as
 * an earlier candidate scores the same; the earlier one would win the tie. */
static bool same_free_tried(const ts_node *n, int i, const ts_request *r)
{
    for (int k = 0; k < i; k++)
        if (n->gpu[k].milli_used == n->gpu[i].milli_used && ts_node_gpu_takes_share(n, k, r))
            return true;
    return false;
}

static double measure(const ts_frag_shape *s, const tessera *t)
{
    return ts_frag_shape_placement(s, &t->typ, t->w_stranded);
}

static int64_t score_of(double before, const ts_frag_shape *after, const tessera *t,
                        double scale)
{
    double delta = before - measure(after, t);
    return (int64_t)(TESSERA_SCORE_BUCKETS / (1.0 + exp(-delta / scale)));
}

/* M(n) depends on the node alone, so one value serves every class scored
 * against the node until it changes. */
static double measure_before(tessera *t, const ts_node *n, const ts_frag_shape *s)
{
    ptrdiff_t i = t->cluster ? n - t->cluster->nodes : -1;
    if (i < 0 || i >= t->nbefore)
        return measure(s, t);
    before_entry *e = &t->before[i];
    if (e->version != n->version + 1) {
        e->measure = measure(s, t);
        e->version = n->version + 1;
    }
    return e->measure;
}

static int64_t tessera_score(void *st, const ts_node *n, const ts_request *r, ts_alloc *a,
                             ts_rng *rng)
{
    (void)rng;
    tessera *t = st;
    ts_node_choose_gpus(n, r, a);
    ts_frag_shape s;
    ts_frag_shape_of(n, &s);
    double before = measure_before(t, n, &s);
    s.cpu_left -= r->cpu_milli;
    s.mem_left -= r->mem_mib;
    if (ts_request_is_share(r)) {
        int64_t best = INT64_MIN;
        for (int i = 0; i < n->ngpu; i++) {
            if (!ts_node_gpu_takes_share(n, i, r) || same_free_tried(n, i, r))
                continue;
            s.free[i] -= r->gpu_milli;
            int64_t v = score_of(before, &s, t, t->scale_share);
            s.free[i] += r->gpu_milli;
            if (v > best) {
                best = v;
                a->gpu[0] = (int8_t)i;
            }
        }
        return best;
    }
    for (int k = 0; k < a->ngpu && r->mig_profile < 0; k++)
        s.free[a->gpu[k]] -= a->gpu_milli;
    return score_of(before, &s, t, TESSERA_DELTA_SCALE_MILLI);
}

/* A pod without GPUs only takes CPU and memory, which can make classes fail
 * and strand more GPUs but never less: M cannot drop, so the score is at most
 * that of no change, which a node whose M stays the same reaches. */
static int64_t tessera_bound(void *st, const ts_request *r)
{
    (void)st;
    if (r->num_gpu > 0 || r->mig_profile >= 0)
        return INT64_MAX;
    return (int64_t)(TESSERA_SCORE_BUCKETS / 2);
}

const struct ts_scorer_ops ts_scorer_tessera = {
    .name = "tessera",
    .summary = "fragmentation gradient counting GPUs stranded by CPU and memory",
    .cacheable = true,
    .init = tessera_init,
    .fini = tessera_fini,
    .score = tessera_score,
    .bound = tessera_bound,
};
