/*
 * test_score_tessera.c - how the default scorer (tessera) weighs a GPU share.
 *
 * A pod's score is trunc(100 * sigmoid(delta / D)), D = 500 milli-GPU per
 * GPU of the cluster's largest node, at most 4000 (8 GPUs); delta is M before -
 * M after (M = F + w S) for a whole GPU, and a (F drop) + b w (S drop) for a
 * share, with (a, b) = (1/2, 1) when the typical list pins at least 3 % of
 * its GPU demand to GPU models, else (1, 1) when at least 18 % of its pods
 * are CPU-only, else (1/2, 1/2) (docs/policies.md). The test recomputes F
 * and S with the public measure (ts_frag_shape_measure) on a two-GPU node
 * where the three weightings give three different scores, and checks the
 * scorer picks the right one on each side of both thresholds, and that a
 * whole GPU still scores by M. Each case runs on a cluster short of CPU for
 * the mix (2 cores per GPU), where the class asking 3 cores per GPU weighs p
 * (2 / 3)^6, and on one that is not (5 cores per GPU), where every p is as
 * given. The nodes have two GPUs, so D is 1000; test_scale_follows_largest_node
 * checks that a node of 8 GPUs joining the cluster makes it 4000.
 * test_cpu_only_pod_spares_whole_gpus checks that on a cluster short of CPU
 * a pod asking no GPU goes to a node without a fully free GPU first.
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

static ts_request req(int64_t cpu, int32_t ngpu, int32_t milli, uint32_t mask)
{
    ts_request r = {.cpu_milli = cpu, .mem_mib = 1024, .num_gpu = ngpu, .gpu_milli = milli,
                    .model_mask = mask, .mig_profile = -1};
    return r;
}

/* The weights F and S read on cluster c: where the mix asks more CPU per
 * GPU than c has, a class asking more than c has weighs p (has / asks)^6. */
static void weighed(const ts_cluster *c, const ts_typical *typ, double *p)
{
    double cpu = 0.0, gpus = 0.0, have = 0.0, ngpu = 0.0;
    for (int i = 0; i < c->nnodes; i++) {
        have += (double)c->nodes[i].cpu_milli;
        ngpu += c->nodes[i].ngpu;
    }
    double supply = have / ngpu;
    for (int j = 0; j < typ->n; j++) {
        cpu += typ->p[j] * (double)typ->req[j].cpu_milli;
        gpus += typ->p[j] * typ->req[j].num_gpu * typ->req[j].gpu_milli / 1000.0;
    }
    for (int j = 0; j < typ->n; j++) {
        double g = typ->req[j].num_gpu * typ->req[j].gpu_milli / 1000.0;
        double asked = g > 0.0 ? (double)typ->req[j].cpu_milli / g : 0.0;
        p[j] = typ->p[j];
        if (cpu / gpus > supply && asked > supply)
            p[j] *= pow(supply / asked, 6.0);
    }
}

/* D: 500 milli-GPU per GPU of c's largest node, at most 4000. */
static double scale_of(const ts_cluster *c)
{
    int most = 0;
    for (int i = 0; i < c->nnodes; i++)
        most = c->nodes[i].ngpu > most ? c->nodes[i].ngpu : most;
    return most >= 8 ? 4000.0 : 500.0 * most;
}

/* trunc(100 sigmoid(delta / D)), delta = a (F drop) + b w (S drop) of r
 * on the only GPU it can take first (GPU 0) of node 0 of c. */
static int64_t expected(const ts_cluster *c, const ts_request *r, const ts_typical *typ,
                        double a, double b)
{
    const ts_node *n = &c->nodes[0];
    ts_typical t = *typ;
    t.mem_aware = true;
    double w = ts_frag_stranded_weight(&t), s0, s1, p[8];
    weighed(c, typ, p);
    t.p = p;
    ts_frag_shape s;
    ts_frag_shape_of(n, &s);
    double f0 = ts_frag_shape_measure(&s, &t, &s0);
    s.cpu_left -= r->cpu_milli;
    s.mem_left -= r->mem_mib;
    for (int k = 0; k < r->num_gpu; k++)
        s.free[k] -= r->gpu_milli;
    double f1 = ts_frag_shape_measure(&s, &t, &s1);
    return (int64_t)(100.0 / (1.0 + exp(-(a * (f0 - f1) + b * w * (s0 - s1)) / scale_of(c))));
}

/* The tessera score of r on node 0 of c under typ. */
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

/* Four classes: CPU-only (p_cpu), a half-GPU share (p_share), one GPU with
 * 3 cores (the rest: stranded by CPU on the node below, so S moves), one GPU
 * pinned to mask (p_pin). The node scored: two T4s, 4 cores; with rich, a
 * second node (two T4s, 16 cores) makes the cluster's 5 cores per GPU more
 * than any of these mixes asks. */
static void run_case_on(bool rich, double p_cpu, double p_share, double p_pin, uint32_t mask,
                        double a, double b)
{
    ts_cluster *c = ts_cluster_new();
    assert_non_null(c);
    ts_node_spec spec = {.name = "t4", .gpu_model = "T4", .ngpu = 2, .cpu_milli = 4000,
                         .mem_mib = 32768, .gpu_mode = TS_GPU_SHARED};
    assert_int_equal(ts_cluster_add_node(c, &spec, NULL), 0);
    ts_node_spec more = spec;
    more.name = "t4-rich";
    more.cpu_milli = 16000;
    if (rich)
        assert_int_equal(ts_cluster_add_node(c, &more, NULL), 1);
    ts_request cls[4] = {req(1000, 0, 0, 0), req(1000, 1, 500, 0), req(3000, 1, 1000, 0),
                         req(1000, 1, 1000, mask)};
    double p[4] = {p_cpu, p_share, 1.0 - p_cpu - p_share - p_pin, p_pin};
    int64_t cnt[4] = {1, 1, 1, 1};
    int64_t mem[4] = {1024, 1024, 1024, 1024};
    ts_typical typ = {.n = 4, .req = cls, .p = p, .count = cnt, .mem_mib = mem};

    ts_request share = cls[1];
    int64_t light = expected(c, &share, &typ, 0.5, 0.5);
    int64_t heavy = expected(c, &share, &typ, 1.0, 1.0);
    int64_t pinned = expected(c, &share, &typ, 0.5, 1.0);
    /* the case tells the three weightings apart where every p is as given
     * (short of CPU, the 3-core class weighs too little for S to) */
    if (rich)
        assert_true(light != heavy && light != pinned && heavy != pinned);
    assert_int_equal(score(c, &share, &typ), expected(c, &share, &typ, a, b));

    /* a whole GPU scores by M whatever the list */
    ts_request whole = cls[3];
    whole.model_mask = 0;
    assert_int_equal(score(c, &whole, &typ), expected(c, &whole, &typ, 1.0, 1.0));
    ts_cluster_free(c);
}

/* The case on a cluster short of CPU for these mixes (2 cores per GPU, they
 * ask 2.6-2.99) and on one that is not (5 cores per GPU). */
static void run_case(double p_cpu, double p_share, double p_pin, uint32_t mask, double a,
                     double b)
{
    run_case_on(false, p_cpu, p_share, p_pin, mask, a, b);
    run_case_on(true, p_cpu, p_share, p_pin, mask, a, b);
}

/* On a node short of CPU the class asking 3 cores per GPU weighs less, which
 * moves the score: the cluster's ratio is read. */
static void test_short_cpu_discounts_hungry_class(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    assert_non_null(c);
    ts_node_spec spec = {.name = "t4", .gpu_model = "T4", .ngpu = 2, .cpu_milli = 4000,
                         .mem_mib = 32768, .gpu_mode = TS_GPU_SHARED};
    assert_int_equal(ts_cluster_add_node(c, &spec, NULL), 0);
    ts_request cls[2] = {req(1000, 1, 500, 0), req(3000, 1, 1000, 0)};
    double p[2] = {0.4, 0.6};
    int64_t cnt[2] = {1, 1};
    int64_t mem[2] = {1024, 1024};
    ts_typical typ = {.n = 2, .req = cls, .p = p, .count = cnt, .mem_mib = mem};
    double q[2];
    weighed(c, &typ, q);
    assert_true(q[0] == 0.4 && fabs(q[1] - 0.6 * pow(2.0 / 3.0, 6.0)) < 1e-12);
    ts_request whole = cls[1];
    int64_t v = score(c, &whole, &typ);
    assert_int_equal(v, expected(c, &whole, &typ, 1.0, 1.0));
    ts_typical plain = typ;
    plain.mem_aware = true;
    ts_frag_shape sh;
    ts_frag_shape_of(&c->nodes[0], &sh);
    double s0, s1, w = ts_frag_stranded_weight(&plain);
    double f0 = ts_frag_shape_measure(&sh, &plain, &s0);
    sh.cpu_left -= whole.cpu_milli;
    sh.mem_left -= whole.mem_mib;
    sh.free[0] -= whole.gpu_milli;
    double f1 = ts_frag_shape_measure(&sh, &plain, &s1);
    int64_t unweighed =
        (int64_t)(100.0 / (1.0 + exp(-((f0 + w * s0) - (f1 + w * s1)) / scale_of(c))));
    assert_true(v != unweighed);
    ts_cluster_free(c);
}

/* The sigmoid's scale follows the cluster's largest node: on 2-GPU nodes a
 * node's M moves by at most 2000 milli, and 4000 (chosen where nodes have 8
 * GPUs) put nearly every placement in the buckets next to 50. A node of 8
 * GPUs joining gives 4000 back. */
static void test_scale_follows_largest_node(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    assert_non_null(c);
    ts_node_spec spec = {.name = "t4", .gpu_model = "T4", .ngpu = 2, .cpu_milli = 4000,
                         .mem_mib = 32768, .gpu_mode = TS_GPU_SHARED};
    assert_int_equal(ts_cluster_add_node(c, &spec, NULL), 0);
    ts_request cls[2] = {req(1000, 2, 1000, 0), req(1000, 1, 1000, 0)};
    double p[2] = {0.5, 0.5};
    int64_t cnt[2] = {1, 1};
    int64_t mem[2] = {1024, 1024};
    ts_typical typ = {.n = 2, .req = cls, .p = p, .count = cnt, .mem_mib = mem};
    ts_request one = cls[1];
    assert_true(scale_of(c) == 1000.0);
    int64_t small = expected(c, &one, &typ, 1.0, 1.0);
    assert_int_equal(score(c, &one, &typ), small);
    ts_node_spec big = {.name = "big", .gpu_model = "T4", .ngpu = 8, .cpu_milli = 64000,
                        .mem_mib = 262144, .gpu_mode = TS_GPU_SHARED};
    assert_int_equal(ts_cluster_add_node(c, &big, NULL), 1);
    assert_true(scale_of(c) == 4000.0);
    int64_t large = expected(c, &one, &typ, 1.0, 1.0);
    assert_true(small != large); /* the case tells the two scales apart */
    assert_int_equal(score(c, &one, &typ), large);
    ts_cluster_free(c);
}

/* Node 0: two idle T4s and 4 cores, where a 1-core CPU-only pod leaves M
 * as it is (one 3-core GPU pod fits before and after), so it scores 50;
 * node 1 has no GPU. With 2 cores per GPU against the 4 the mix asks, the
 * pod goes to node 1 (on the scorer before, to node 0: equal scores, lowest
 * index); with 16 cores on node 0 the cluster is not short and node 0, the
 * lowest index, takes it. */
static int cpu_only_lands_on(int64_t cpu0)
{
    ts_cluster *c = ts_cluster_new();
    assert_non_null(c);
    ts_node_spec gpus = {.name = "t4", .gpu_model = "T4", .ngpu = 2, .cpu_milli = cpu0,
                         .mem_mib = 32768, .gpu_mode = TS_GPU_SHARED};
    ts_node_spec cpus = {.name = "cpu", .gpu_model = NULL, .ngpu = 0, .cpu_milli = 8000,
                         .mem_mib = 32768};
    assert_int_equal(ts_cluster_add_node(c, &gpus, NULL), 0);
    assert_int_equal(ts_cluster_add_node(c, &cpus, NULL), 1);
    ts_request cls[2] = {req(1000, 0, 0, 0), req(3000, 1, 1000, 0)};
    double p[2] = {0.5, 0.5};
    int64_t cnt[2] = {1, 1};
    int64_t mem[2] = {1024, 1024};
    ts_typical typ = {.n = 2, .req = cls, .p = p, .count = cnt, .mem_mib = mem};
    ts_sched_env env = {.cluster = c, .typical = &typ};
    ts_err err = {0};
    ts_placer *pl = ts_placer_new(c, ts_scorer_find("tessera"), &env, 2, 1, &err);
    assert_non_null(pl);
    ts_alloc a = {0};
    int node = ts_placer_place(pl, &cls[0], 0, &a);
    ts_placer_free(pl);
    ts_cluster_free(c);
    return node;
}

static void test_cpu_only_pod_spares_whole_gpus(void **state)
{
    (void)state;
    assert_int_equal(cpu_only_lands_on(4000), 1);
    assert_int_equal(cpu_only_lands_on(16000), 0);
}

static uint32_t t4(void) { return UINT32_C(1) << ts_gpu_model_lookup("T4"); }

static void test_light_mix_halves_both(void **state)
{
    (void)state;
    run_case(0.17, 0.4, 0.0, 0, 0.5, 0.5);
    run_case(0.0, 0.3, 0.1, 0, 0.5, 0.5); /* an unpinned fourth class */
}

static void test_cpu_heavy_mix_keeps_both(void **state)
{
    (void)state;
    run_case(0.19, 0.4, 0.0, 0, 1.0, 1.0);
}

static void test_pinned_mix_halves_f(void **state)
{
    (void)state;
    run_case(0.17, 0.3, 0.1, t4(), 0.5, 1.0);
    run_case(0.19, 0.3, 0.1, t4(), 0.5, 1.0); /* pins come first */
}

/* pinned share of the GPU demand = 1000 p_pin / (500 p_share + 1000 (1 -
 * p_cpu - p_share)): 15 / 630 = 2.4 % and 22 / 630 = 3.5 % */
static void test_pinned_threshold(void **state)
{
    (void)state;
    run_case(0.17, 0.4, 0.015, t4(), 0.5, 0.5);
    run_case(0.17, 0.4, 0.022, t4(), 0.5, 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_light_mix_halves_both),
        cmocka_unit_test(test_cpu_heavy_mix_keeps_both),
        cmocka_unit_test(test_pinned_mix_halves_f),
        cmocka_unit_test(test_pinned_threshold),
        cmocka_unit_test(test_short_cpu_discounts_hungry_class),
        cmocka_unit_test(test_scale_follows_largest_node),
        cmocka_unit_test(test_cpu_only_pod_spares_whole_gpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
