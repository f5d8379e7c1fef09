/*
 * score_fgd.c - Fragmentation Gradient Descent (Weng et al., ATC '23): send a
 * pod where it increases the expected-workload fragmentation least.
 *
 * Score = 100 * sigmoid((F(n) - F(n after the pod)) / 1000), truncated to a
 * whole number as in the study. A GPU share tries every GPU that can take it
 * (in index order, first strictly better wins) and remembers the GPU, which
 * is then the one bound; whole-GPU pods take the lowest-index free GPUs.
 * F comes from frag.c on a copied shape, so scoring never touches the node.
 */
#include <math.h>

#include "sched/scorers.h"

#define FGD_SCORE_MAX 100.0
#define FGD_DELTA_SCALE_MILLI 1000.0

int64_t sched_fgd_score_of_delta(double delta_milli)
{
    return (int64_t)(FGD_SCORE_MAX / (1.0 + exp(-delta_milli / FGD_DELTA_SCALE_MILLI)));
}

static int fgd_init(void **state, const ts_sched_env *env, ts_err *err)
{
    if (!env->typical)
        return ts_err_set(err, TS_EINVAL, "fgd: needs a typical-pod list");
    *state = (void *)env->typical;
    return 0;
}

static int64_t fgd_score(void *st, const ts_node *n, const ts_request *r, ts_alloc *a,
                         ts_rng *rng)
{
    (void)rng;
    const ts_typical *typ = st;
    ts_node_choose_gpus(n, r, a);
    ts_frag_shape s;
    ts_frag_shape_of(n, &s);
    double before = ts_frag_shape_amount(&s, typ);
    s.cpu_left -= r->cpu_milli;
    if (ts_request_is_share(r)) {
        int64_t best = -1;
        for (int i = 0; i < n->ngpu; i++) {
            if (!ts_node_gpu_takes_share(n, i, r))
                continue;
            s.free[i] -= r->gpu_milli;
            int64_t v = sched_fgd_score_of_delta(before - ts_frag_shape_amount(&s, typ));
            s.free[i] += r->gpu_milli;
            if (v > best) {
                best = v;
                a->gpu[0] = (int8_t)i;
            }
        }
        return best < 0 ? 0 : best;
    }
    for (int k = 0; k < a->ngpu && r->mig_profile < 0; k++)
        s.free[a->gpu[k]] -= a->gpu_milli;
    return sched_fgd_score_of_delta(before - ts_frag_shape_amount(&s, typ));
}

const struct ts_scorer_ops ts_scorer_fgd = {
    .name = "fgd",
    .summary = "least growth of expected-workload fragmentation (FGD)",
    .cacheable = true,
    .init = fgd_init,
    .score = fgd_score,
};
