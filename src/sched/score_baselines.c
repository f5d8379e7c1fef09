/*
 * score_baselines.c - the five baseline policies of the fragmentation study,
 * as its artifact configures them (docs/policies.md has the formulas).
 *
 * They exist so that every claim about our own policy is measured against the
 * published baselines with the same loop, filter and tie rule. Scores are
 * whole numbers 0..100 truncated the way the study's Kubernetes plugins
 * truncate them: the resulting ties (broken by node order) are part of each
 * policy's behaviour, so they are kept. Except for random, each picks GPUs by
 * best fit (ts_node_choose_gpus). The normalisers are the study's largest node
 * (128 cores, 8 GPUs) or this cluster's largest node if that is bigger.
 */
#include <stdlib.h>

#include "sched/scorers.h"

#define NORM_CPU_MILLI_MIN 128000
#define NORM_GPU_MILLI_MIN 8000
#define SCORE_MAX 100

typedef struct norm_state {
    double cpu, gpu;
} norm_state;

static int norm_init(void **state, const ts_sched_env *env, ts_err *err)
{
    norm_state *s = malloc(sizeof *s);
    if (!s)
        return ts_err_set(err, TS_ENOMEM, "out of memory");
    s->cpu = NORM_CPU_MILLI_MIN;
    s->gpu = NORM_GPU_MILLI_MIN;
    for (int i = 0; i < env->cluster->nnodes; i++) {
        const ts_node *n = &env->cluster->nodes[i];
        if (n->cpu_milli > s->cpu)
            s->cpu = (double)n->cpu_milli;
        if ((double)n->ngpu * TS_MILLI_PER_GPU > s->gpu)
            s->gpu = (double)n->ngpu * TS_MILLI_PER_GPU;
    }
    *state = s;
    return 0;
}

static void norm_fini(void *state) { free(state); }

static int64_t gpu_req(const ts_request *r) { return (int64_t)r->num_gpu * r->gpu_milli; }

/* ---- random ------------------------------------------------------------ */

#define RANDOM_SCORE_BITS 31

static int64_t random_score(void *st, const ts_node *n, const ts_request *r, ts_alloc *a,
                            ts_rng *rng)
{
    (void)st;
    ts_node_choose_gpus(n, r, a);
    if (ts_request_is_share(r)) {
        /* uniform among the GPUs that can take the share (reservoir) */
        int seen = 0;
        for (int i = 0; i < n->ngpu; i++) {
            if (!ts_node_gpu_takes_share(n, i, r))
                continue;
            if (ts_rng_below(rng, (uint64_t)++seen) == 0)
                a->gpu[0] = (int8_t)i;
        }
    }
    return (int64_t)(ts_rng_next(rng) >> (64 - RANDOM_SCORE_BITS));
}

const struct ts_scorer_ops ts_scorer_random = {
    .name = "random",
    .summary = "a uniformly random feasible node and GPU",
    .score = random_score,
};

/* ---- dotprod ----------------------------------------------------------- */

static int64_t dotprod_score(void *st, const ts_node *n, const ts_request *r, ts_alloc *a,
                             ts_rng *rng)
{
    (void)rng;
    const norm_state *s = st;
    ts_node_choose_gpus(n, r, a);
    double cpu_left = (double)(n->cpu_milli - n->cpu_used);
    if (cpu_left < (double)r->cpu_milli)
        return 0;
    double dot = (cpu_left / s->cpu) * ((double)r->cpu_milli / s->cpu) +
                 ((double)n->milli_free / s->gpu) * ((double)gpu_req(r) / s->gpu);
    return (int64_t)(SCORE_MAX * (1.0 - dot / 2.0));
}

const struct ts_scorer_ops ts_scorer_dotprod = {
    .name = "dotprod",
    .summary = "smallest dot product of free (CPU, GPU) and the request",
    .cacheable = true,
    .init = norm_init,
    .fini = norm_fini,
    .score = dotprod_score,
};

/* ---- bestfit ----------------------------------------------------------- */

static int64_t bestfit_score(void *st, const ts_node *n, const ts_request *r, ts_alloc *a,
                             ts_rng *rng)
{
    (void)rng;
    const norm_state *s = st;
    ts_node_choose_gpus(n, r, a);
    double cpu_left = (double)(n->cpu_milli - n->cpu_used - r->cpu_milli);
    double gpu_left = (double)(n->milli_free - gpu_req(r));
    double v = SCORE_MAX * (1.0 - (0.5 * cpu_left / s->cpu + 0.5 * gpu_left / s->gpu));
    return v < 0 ? 0 : (int64_t)v;
}

const struct ts_scorer_ops ts_scorer_bestfit = {
    .name = "bestfit",
    .summary = "least CPU and GPU left over after placing",
    .cacheable = true,
    .init = norm_init,
    .fini = norm_fini,
    .score = bestfit_score,
};

/* ---- clustering -------------------------------------------------------- */

#define CLUSTER_BAND 25

static int64_t clustering_score(void *st, const ts_node *n, const ts_request *r, ts_alloc *a,
                                ts_rng *rng)
{
    (void)rng;
    const norm_state *s = st;
    ts_node_choose_gpus(n, r, a);
    int shape = ts_request_shape(r);
    if (shape == TS_SHAPE_CPU)
        return 0;
    int64_t gpu_cap = (int64_t)s->gpu;
    int64_t fill = CLUSTER_BAND * (gpu_cap - n->milli_free) / gpu_cap;
    int32_t same = n->shape_tasks[shape], other = 0;
    for (int k = TS_SHAPE_SHARE; k < TS_SHAPES; k++)
        if (k != shape)
            other += n->shape_tasks[k];
    if (same > 0 && other == 0)
        return 3 * CLUSTER_BAND + fill;
    if (same > 0)
        return 2 * CLUSTER_BAND + fill;
    if (other == 0)
        return CLUSTER_BAND + fill;
    return fill;
}

const struct ts_scorer_ops ts_scorer_clustering = {
    .name = "clustering",
    .summary = "keep pods of one GPU shape together, fuller nodes first",
    .cacheable = true,
    .init = norm_init,
    .fini = norm_fini,
    .score = clustering_score,
};

/* ---- packing ----------------------------------------------------------- */

#define PACK_IDLE_BASE 33
#define PACK_NEW_GPU_BASE 50
#define PACK_SHARED_BASE 100

static int64_t packing_score(void *st, const ts_node *n, const ts_request *r, ts_alloc *a,
                             ts_rng *rng)
{
    (void)st;
    (void)rng;
    ts_node_choose_gpus(n, r, a);
    if (r->num_gpu == 0 || r->mig_profile >= 0)
        return 0;
    if (n->gpus_free == n->ngpu) /* an idle node: last resort, bigger ones later */
        return n->ngpu > PACK_IDLE_BASE - n->ngpu ? n->ngpu : PACK_IDLE_BASE - n->ngpu;
    /* the GPUs best fit would use, fewest free first */
    int fully_free = 0;
    int64_t pct_sum = 0;
    for (int k = 0; k < a->ngpu; k++) {
        int32_t f = ts_gpu_free_milli(&n->gpu[a->gpu[k]]);
        if (f == TS_MILLI_PER_GPU)
            fully_free++;
        pct_sum += f * 100 / TS_MILLI_PER_GPU;
    }
    if (fully_free > 0) {
        int64_t v = PACK_NEW_GPU_BASE - fully_free;
        return v > PACK_IDLE_BASE ? v : PACK_IDLE_BASE;
    }
    int64_t v = PACK_SHARED_BASE - pct_sum / 10;
    return v > PACK_NEW_GPU_BASE ? v : PACK_NEW_GPU_BASE;
}

const struct ts_scorer_ops ts_scorer_packing = {
    .name = "packing",
    .summary = "partly used GPUs first, then nodes needing fewest free GPUs, idle nodes last",
    .cacheable = true,
    .score = packing_score,
};
