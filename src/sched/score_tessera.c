/*
 * score_tessera.c - Tessera's own placement policy (first cut: FGD at full
 * resolution). See docs/policies.md.
 */
#include "sched/scorers.h"

#define TESSERA_SCALE 1000.0

static int tessera_init(void **state, const ts_sched_env *env, ts_err *err)
{
    if (!env->typical)
        return ts_err_set(err, TS_EINVAL, "tessera: needs a typical-pod list");
    *state = (void *)env->typical;
    return 0;
}

static int64_t tessera_score(void *st, const ts_node *n, const ts_request *r, ts_alloc *a,
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
        double best = 0;
        int found = 0;
        for (int i = 0; i < n->ngpu; i++) {
            if (n->gpu[i].mode != TS_GPU_SHARED || s.free[i] < r->gpu_milli)
                continue;
            s.free[i] -= r->gpu_milli;
            double v = before - ts_frag_shape_amount(&s, typ);
            s.free[i] += r->gpu_milli;
            if (!found || v > best) {
                best = v;
                found = 1;
                a->gpu[0] = (int8_t)i;
            }
        }
        return (int64_t)(best * TESSERA_SCALE);
    }
    for (int k = 0; k < a->ngpu && r->mig_profile < 0; k++)
        s.free[a->gpu[k]] -= a->gpu_milli;
    return (int64_t)((before - ts_frag_shape_amount(&s, typ)) * TESSERA_SCALE);
}

const struct ts_scorer_ops ts_scorer_tessera = {
    .name = "tessera",
    .summary = "Tessera: fragmentation gradient at full resolution",
    .cacheable = true,
    .init = tessera_init,
    .score = tessera_score,
};
