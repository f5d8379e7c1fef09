/*
 * score_tessera.c - Tessera's own placement policy (experimental knobs).
 */
#include <math.h>
#include <stdlib.h>

#include "sched/scorers.h"

typedef struct tess {
    const ts_typical *typ;
    ts_typical own;
    ts_typical capown;
    const ts_typical *captyp;
    int q;        /* quantisation: buckets of the sigmoid */
    int tie;      /* 0 none, 1 fuller node first (less idle after), 2 emptier first */
    double lam;
    double wcap, wfgd;
    int cpumode;
} tess;

static int tessera_init(void **state, const ts_sched_env *env, ts_err *err)
{
    if (!env->typical)
        return ts_err_set(err, TS_EINVAL, "tessera: needs a typical-pod list");
    tess *t = calloc(1, sizeof *t);
    if (getenv("TCOV") && env->workload) {
        if (ts_typical_build(env->workload, atof(getenv("TCOV")), getenv("TW") ? atoi(getenv("TW")) : 0, &t->own, err) != 0)
            return err->code;
    } else {
        t->own = *env->typical;
        t->own.req = NULL;
    }
    if (!t->own.req) {
        t->own = *env->typical;
    }
    t->own.mem_aware = getenv("TMEM") ? atoi(getenv("TMEM")) : 1;
    t->typ = &t->own;
    t->captyp = &t->own;
    if (getenv("TCAPW") && env->workload) {
        ts_typical_build(env->workload, getenv("TCAPCOV") ? atof(getenv("TCAPCOV")) : 1.0, atoi(getenv("TCAPW")), &t->capown, err);
        t->capown.mem_aware = t->own.mem_aware;
        t->captyp = &t->capown;
    }
    t->q = getenv("TQ") ? atoi(getenv("TQ")) : 100;
    t->tie = getenv("TTIE") ? atoi(getenv("TTIE")) : 1;
    t->lam = getenv("TLAM") ? atof(getenv("TLAM")) : 0;
    t->cpumode = getenv("TCPU") ? atoi(getenv("TCPU")) : 0;
    t->wcap = getenv("TWCAP") ? atof(getenv("TWCAP")) : 1;
    t->wfgd = getenv("TWFGD") ? atof(getenv("TWFGD")) : 0;
    *state = t;
    return 0;
}

static void tessera_fini(void *st) { free(st); }

/* Idle GPU on the shape that a class could not use even if the node were
 * filled with that class alone: CPU, memory and GPU slivers all bound it. */
static double capacity_frag(const ts_frag_shape *s, const ts_typical *t)
{
    int64_t idle = 0;
    for (int i = 0; i < s->ngpu; i++)
        idle += s->free[i];
    if (idle == 0)
        return 0.0;
    double f = 0.0;
    for (int j = 0; j < t->n; j++) {
        const ts_request *q = &t->req[j];
        int64_t frag_j = idle;
        bool allowed = q->model_mask == 0 || (s->model >= 0 && ((q->model_mask >> s->model) & 1u));
        if (q->num_gpu > 0 && allowed) {
            int64_t k;
            if (q->gpu_milli >= TS_MILLI_PER_GPU) {
                int full = 0;
                for (int i = 0; i < s->ngpu; i++)
                    full += s->free[i] == TS_MILLI_PER_GPU;
                k = full / q->num_gpu;
            } else {
                k = 0;
                for (int i = 0; i < s->ngpu; i++)
                    k += s->free[i] / q->gpu_milli;
            }
            if (q->cpu_milli > 0 && s->cpu_left / q->cpu_milli < k)
                k = s->cpu_left / q->cpu_milli;
            if (t->mem_aware && t->mem_mib[j] > 0 && s->mem_left / t->mem_mib[j] < k)
                k = s->mem_left / t->mem_mib[j];
            if (k < 0)
                k = 0;
            frag_j = idle - k * q->num_gpu * q->gpu_milli;
        }
        f += t->p[j] * (double)frag_j;
    }
    return f;
}

static double amount(const tess *t, const ts_frag_shape *s)
{
    return t->wcap * capacity_frag(s, t->captyp) + t->wfgd * ts_frag_shape_amount(s, t->typ);
}

static int64_t combine(const tess *t, double delta, const ts_frag_shape *after, const ts_node *n)
{
    double sig = 1.0 / (1.0 + exp(-delta / 1000.0));
    int64_t major = (int64_t)(sig * t->q);
    int64_t idle = 0;
    for (int i = 0; i < after->ngpu; i++)
        idle += after->free[i];
    int64_t minor = 0;
    (void)n;
    if (t->tie == 1)
        minor = 100000 - idle;
    else if (t->tie == 2)
        minor = idle;
    else if (t->tie == 3)
        minor = 100000 - (int64_t)(after->cpu_left / 100);
    return major * 1000000 + minor;
}

static int64_t tessera_score(void *st, const ts_node *n, const ts_request *r, ts_alloc *a,
                             ts_rng *rng)
{
    (void)rng;
    const tess *t = st;
    ts_node_choose_gpus(n, r, a);
    ts_frag_shape s;
    ts_frag_shape_of(n, &s);
    double before = amount(t, &s);
    s.cpu_left -= r->cpu_milli;
    s.mem_left -= r->mem_mib;
    if (ts_request_is_share(r)) {
        int64_t best = INT64_MIN;
        for (int i = 0; i < n->ngpu; i++) {
            if (n->gpu[i].mode != TS_GPU_SHARED || s.free[i] < r->gpu_milli)
                continue;
            s.free[i] -= r->gpu_milli;
            int64_t v = combine(t, before - amount(t, &s), &s, n);
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
    if (t->cpumode && r->num_gpu == 0) {
        int64_t idle = 0;
        for (int i = 0; i < s.ngpu; i++)
            idle += s.free[i];
        if (t->cpumode == 1)
            return -idle * 1000000000LL + combine(t, before - amount(t, &s), &s, n) / 1000000;
        return combine(t, before - amount(t, &s), &s, n) / 1000000 * 1000000 - idle;
    }
    return combine(t, before - amount(t, &s), &s, n);
}

const struct ts_scorer_ops ts_scorer_tessera = {
    .name = "tessera",
    .summary = "Tessera: fragmentation gradient at full resolution",
    .cacheable = true,
    .init = tessera_init,
    .fini = tessera_fini,
    .score = tessera_score,
};
