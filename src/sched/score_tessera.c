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
 *   M(n) = F_mem(n) + S(n)
 *   F_mem: FGD's F, where a class also fails on a node lacking its mean memory;
 *   S:     GPU stranded by CPU and memory - for each typical class j, the GPU
 *          that j could take on n by GPU count alone, minus what it could
 *          take once n's CPU and memory bound the number of j pods, weighted
 *          by p_j.
 *
 * A pod's score is 100 * sigmoid((M before - M after) / 1000), truncated to a
 * whole number as FGD's is (the coarse buckets make placements consolidate in
 * node order, which the published FGD results owe much to); among nodes in
 * the same bucket the one left with more idle GPU wins. Shares try every GPU
 * that can take them. docs/policies.md has the measurements.
 */
#include <math.h>
#include <stdlib.h>

#include "sched/scorers.h"

#define TESSERA_SCORE_BUCKETS 100
#define TESSERA_DELTA_SCALE_MILLI 1000.0
#define TESSERA_MINOR_RANGE (1LL << 24) /* > any node's idle GPU milli */

typedef struct tessera {
    ts_typical typ; /* shallow copy of the env's list, memory-aware */
} tessera;

static int tessera_init(void **state, const ts_sched_env *env, ts_err *err)
{
    if (!env->typical)
        return ts_err_set(err, TS_EINVAL, "tessera: needs a typical-pod list");
    tessera *t = malloc(sizeof *t);
    if (!t)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    t->typ = *env->typical;
    t->typ.mem_aware = t->typ.mem_mib != NULL;
    *state = t;
    return 0;
}

static void tessera_fini(void *state) { free(state); }

static bool class_allowed(const ts_request *q, int model)
{
    return q->model_mask == 0 || (model >= 0 && ((q->model_mask >> model) & 1u));
}

/* S(n): GPU milli that CPU and memory keep the typical classes from using. */
static double stranded(const ts_frag_shape *s, const ts_typical *t)
{
    double f = 0.0;
    for (int j = 0; j < t->n; j++) {
        const ts_request *q = &t->req[j];
        if (q->num_gpu == 0 || !class_allowed(q, s->model))
            continue;
        int64_t by_gpu = 0;
        for (int i = 0; i < s->ngpu; i++)
            by_gpu += q->gpu_milli >= TS_MILLI_PER_GPU ? s->free[i] == TS_MILLI_PER_GPU
                                                       : s->free[i] / q->gpu_milli;
        if (q->gpu_milli >= TS_MILLI_PER_GPU)
            by_gpu /= q->num_gpu;
        int64_t k = by_gpu;
        if (q->cpu_milli > 0 && s->cpu_left / q->cpu_milli < k)
            k = s->cpu_left / q->cpu_milli;
        if (t->mem_aware && t->mem_mib[j] > 0 && s->mem_left / t->mem_mib[j] < k)
            k = s->mem_left / t->mem_mib[j];
        if (k < 0)
            k = 0;
        f += t->p[j] * (double)((by_gpu - k) * q->num_gpu * q->gpu_milli);
    }
    return f;
}

static double measure(const ts_frag_shape *s, const ts_typical *t)
{
    return ts_frag_shape_amount(s, t) + stranded(s, t);
}

static int64_t score_of(double before, const ts_frag_shape *after, const ts_typical *t)
{
    double delta = before - measure(after, t);
    int64_t major = (int64_t)(TESSERA_SCORE_BUCKETS /
                              (1.0 + exp(-delta / TESSERA_DELTA_SCALE_MILLI)));
    int64_t idle = 0;
    for (int i = 0; i < after->ngpu; i++)
        idle += after->free[i];
    return major * TESSERA_MINOR_RANGE + idle;
}

static int64_t tessera_score(void *st, const ts_node *n, const ts_request *r, ts_alloc *a,
                             ts_rng *rng)
{
    (void)rng;
    const tessera *t = st;
    ts_node_choose_gpus(n, r, a);
    ts_frag_shape s;
    ts_frag_shape_of(n, &s);
    double before = measure(&s, &t->typ);
    s.cpu_left -= r->cpu_milli;
    s.mem_left -= r->mem_mib;
    if (ts_request_is_share(r)) {
        int64_t best = INT64_MIN;
        for (int i = 0; i < n->ngpu; i++) {
            if (!ts_node_gpu_takes_share(n, i, r))
                continue;
            s.free[i] -= r->gpu_milli;
            int64_t v = score_of(before, &s, &t->typ);
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
    return score_of(before, &s, &t->typ);
}

const struct ts_scorer_ops ts_scorer_tessera = {
    .name = "tessera",
    .summary = "fragmentation gradient counting GPUs stranded by CPU and memory",
    .cacheable = true,
    .init = tessera_init,
    .fini = tessera_fini,
    .score = tessera_score,
};
