/*
 * test_score_tessera.c - the bucket width of the default scorer (tessera).
 *
 * A pod's score is trunc(100 * sigmoid((M before - M after) / D)). D is 4000
 * milli-GPU, except for GPU shares when the typical list pins less than 3 %
 * of its GPU demand to GPU models: then 8000, so shares consolidate in node
 * order more often (docs/policies.md). The test recomputes M with the public
 * measure (ts_frag_shape_placement) on a one-GPU node where the two widths
 * give different scores, and checks the scorer uses the right one for a
 * share and for a whole GPU, with and without pinned classes; a list pinning
 * just under and just over 3 % checks the threshold.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "tessera/frag.h"
#include "tessera/model.h"
#include "tessera/sched.h"

static ts_request req(int64_t cpu, int64_t mem, int32_t ngpu, int32_t milli, uint32_t mask)
{
    ts_request r = {.cpu_milli = cpu, .mem_mib = mem, .num_gpu = ngpu, .gpu_milli = milli,
                    .model_mask = mask, .mig_profile = -1};
    return r;
}

static int64_t expected(const ts_node *n, const ts_request *r, const ts_typical *typ,
                        double d)
{
    ts_typical t = *typ;
    t.mem_aware = true;
    double w = ts_frag_stranded_weight(&t);
    ts_frag_shape s;
    ts_frag_shape_of(n, &s);
    double before = ts_frag_shape_placement(&s, &t, w);
    s.cpu_left -= r->cpu_milli;
    s.mem_left -= r->mem_mib;
    s.free[0] -= r->gpu_milli;
    double delta = before - ts_frag_shape_placement(&s, &t, w);
    return (int64_t)(100.0 / (1.0 + exp(-delta / d)));
}

/* The tessera score of r on the only node of c under typ. */
static int64_t score(ts_cluster *c, const ts_request *r, const ts_typical *typ)
{
    const struct ts_scorer_ops *ops = ts_scorer_find("tessera");
    assert_non_null(ops);
    ts_sched_env env = {.cluster = c, .typical = typ, .no_cache = true};
    void *st = NULL;
    ts_err err = {0};
    assert_int_equal(ops->init(&st, &env, &err), 0);
    ts_alloc a = {0};
    assert_true(ts_node_fits(&c->nodes[0], r));
    int64_t v = ops->score(st, &c->nodes[0], r, &a, NULL);
    ops->fini(st);
    return v;
}

static ts_cluster *one_t4(void)
{
    ts_cluster *c = ts_cluster_new();
    assert_non_null(c);
    ts_node_spec s = {.name = "t4", .gpu_model = "T4", .ngpu = 1, .cpu_milli = 8000,
                      .mem_mib = 32768, .gpu_mode = TS_GPU_SHARED};
    assert_int_equal(ts_cluster_add_node(c, &s, NULL), 0);
    return c;
}

/* Three classes: CPU-only (weight 0.8: it sees all idle GPU as fragment,
 * which makes a placement's delta large enough to tell the widths apart), a
 * half-GPU share and a whole GPU (pinned to T4 when mask), the last two
 * sharing 0.2 as (1 - a, a). */
static void run_case(uint32_t mask, double a, double d_share)
{
    ts_cluster *c = one_t4();
    ts_request cls[3] = {req(1000, 1024, 0, 0, 0), req(1000, 1024, 1, 500, 0),
                         req(1000, 1024, 1, 1000, mask)};
    double p[3] = {0.8, 0.2 * (1.0 - a), 0.2 * a};
    int64_t cnt[3] = {1, 1, 1};
    int64_t mem[3] = {1024, 1024, 1024};
    ts_typical typ = {.n = 3, .req = cls, .p = p, .count = cnt, .mem_mib = mem};

    ts_request share = cls[1];
    int64_t at4 = expected(&c->nodes[0], &share, &typ, 4000.0);
    int64_t at8 = expected(&c->nodes[0], &share, &typ, 8000.0);
    assert_true(at4 != at8); /* the case tells the two widths apart */
    assert_int_equal(score(c, &share, &typ), d_share == 8000.0 ? at8 : at4);

    /* a whole GPU always uses 4000 */
    ts_request whole = req(7000, 1024, 1, 1000, 0);
    int64_t w4 = expected(&c->nodes[0], &whole, &typ, 4000.0);
    int64_t w8 = expected(&c->nodes[0], &whole, &typ, 8000.0);
    assert_true(w4 != w8);
    assert_int_equal(score(c, &whole, &typ), w4);
    ts_cluster_free(c);
}

static void test_unpinned_list_widens_share_buckets(void **state)
{
    (void)state;
    run_case(0, 0.5, 8000.0);
    run_case(0, 0.0, 8000.0);
}

static void test_pinned_list_keeps_share_buckets(void **state)
{
    (void)state;
    run_case(UINT32_C(1) << ts_gpu_model_lookup("T4"), 0.5, 4000.0);
}

/* pinned share of the GPU demand = 1000 a / (500 (1 - a) + 1000 a):
 * a = 0.014 gives 2.8 %, a = 0.016 gives 3.2 % */
static void test_threshold_three_percent(void **state)
{
    (void)state;
    uint32_t t4 = UINT32_C(1) << ts_gpu_model_lookup("T4");
    run_case(t4, 0.014, 8000.0);
    run_case(t4, 0.016, 4000.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unpinned_list_widens_share_buckets),
        cmocka_unit_test(test_pinned_list_keeps_share_buckets),
        cmocka_unit_test(test_threshold_three_percent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
