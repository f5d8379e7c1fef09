/*
 * test_frag.c - the fragmentation measure of frag.h against cases worked by
 * hand (the arithmetic is in the comments next to each expected value).
 *
 * Typical pods: the 95% cut keeps the class that reaches the threshold, ties
 * in count go to larger cpu, share, GPU count, model mask; weights sum to 1;
 * CPU-only classes are kept; memory does not split classes and mem_mib is the
 * class mean; TS_TYPICAL_BY_GPU weights by GPU milli asked and drops CPU-only
 * classes. Per-node amount: every category of the published definition
 * (CPU-only -> U, model not allowed -> U, lacking CPU -> U, lacking GPUs -> U,
 * fits -> slivers below the share), the mem_aware switch, and a node built by
 * real assignments. Tracker: after a bounded random assign/release sequence
 * (fixed seed) the incremental sums equal an independent oracle's. Memo:
 * the bits of the measure itself on repeated and reordered random shapes,
 * whose S has the bits of the definition's every term added.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tessera/frag.h"
#include "tessera/load.h"
#include "tessera/model.h"
#include "tessera/rng.h"
#include "test_util.h"

/* cmocka here has only a float comparison; doubles need their own */
#define assert_double_equal(a, b, eps)                                                  \
    do {                                                                                \
        double a_ = (a), b_ = (b);                                                      \
        if (!(fabs(a_ - b_) <= (eps)))                                                  \
            fail_msg("%s = %.9f, want %.9f", #a, a_, b_);                               \
    } while (0)

#define EPS 1e-9
#define TRACKER_EPS 1e-6
#define TRACKER_STEPS 3000
#define MAX_LIVE 256

/* Model ids from the built-in table: the tests fail loudly if it moves. */
static int model_id(const char *name)
{
    int m = ts_gpu_model_lookup(name);
    assert_true(m >= 0);
    return m;
}

static ts_request req(int64_t cpu, int32_t ngpu, int32_t milli, uint32_t mask)
{
    ts_request r = {.cpu_milli = cpu, .num_gpu = ngpu, .gpu_milli = milli,
                    .model_mask = mask, .mig_profile = -1};
    return r;
}

/* ---- typical pods from a pod list ------------------------------------- */

/*
 * 20 pods in 5 classes once memory is ignored (6 specs with it):
 *   A  cpu 4000, 1 x 500, any model      10 pods (6 at 1000 MiB, 4 at 2000 MiB)
 *   B  cpu 8000, CPU-only                 5 pods, 4096 MiB
 *   C  cpu 2000, 1 x 1000, V100M16|V100M32 3 pods, 3000 MiB
 *   D  cpu 16000, 8 x 1000                1 pod, 100000 MiB
 *   E  cpu e_cpu, 2 x 1000                1 pod, 500 MiB
 * Rows are interleaved so first-appearance order is not the ranking.
 */
static ts_workload *load_abcde(int64_t e_cpu)
{
    char csv[4096];
    int n = snprintf(csv, sizeof csv,
                     "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
                     "e0,%lld,500,2,1000,\n"
                     "d0,16000,100000,8,1000,\n"
                     "a0,4000,1000,1,500,\n"
                     "c0,2000,3000,1,1000,V100M16|V100M32\n"
                     "b0,8000,4096,0,0,\n"
                     "a1,4000,2000,1,500,\n"
                     "a2,4000,1000,1,500,\n"
                     "b1,8000,4096,0,0,\n"
                     "a3,4000,2000,1,500,\n"
                     "c1,2000,3000,1,1000,V100M16|V100M32\n"
                     "a4,4000,1000,1,500,\n"
                     "b2,8000,4096,0,0,\n"
                     "a5,4000,1000,1,500,\n"
                     "a6,4000,2000,1,500,\n"
                     "b3,8000,4096,0,0,\n"
                     "a7,4000,1000,1,500,\n"
                     "c2,2000,3000,1,1000,V100M16|V100M32\n"
                     "a8,4000,2000,1,500,\n"
                     "b4,8000,4096,0,0,\n"
                     "a9,4000,1000,1,500,\n",
                     (long long)e_cpu);
    assert_true(n > 0 && (size_t)n < sizeof csv);
    ts_workload *w = NULL;
    ts_err err;
    assert_int_equal(ts_load_pods_csv(csv, (size_t)n, "abcde.csv", &w, &err), 0);
    assert_int_equal(w->npods, 20);
    assert_int_equal(w->nspecs, 6); /* A splits in two by memory in the workload */
    return w;
}

static void assert_class(const ts_typical *t, int i, int64_t cpu, int32_t ngpu, int32_t milli,
                         uint32_t mask)
{
    assert_true(i < t->n);
    assert_int_equal(t->req[i].cpu_milli, cpu);
    assert_int_equal(t->req[i].num_gpu, ngpu);
    assert_int_equal(t->req[i].gpu_milli, milli);
    assert_int_equal(t->req[i].model_mask, mask);
}

static void test_typical_cut_95(void **state)
{
    (void)state;
    ts_workload *w = load_abcde(1000);
    ts_typical t;
    ts_err err;
    assert_int_equal(ts_typical_from_workload(w, 0.95, &t, &err), 0);
    /* threshold 0.95 x 20 = 19. Ranked A 10, B 5, C 3, then D and E tie at 1
     * and D goes first (cpu 16000 > 1000). cum 0 -> 10 -> 15 -> 18 (< 19, go
     * on) -> 19 with D: D reaches the threshold and is kept, E is not. */
    assert_int_equal(t.n, 4);
    uint32_t v100 = (1u << model_id("V100M16")) | (1u << model_id("V100M32"));
    assert_class(&t, 0, 4000, 1, 500, 0);
    assert_class(&t, 1, 8000, 0, 0, 0); /* the CPU-only class is in the list */
    assert_class(&t, 2, 2000, 1, 1000, v100);
    assert_class(&t, 3, 16000, 8, 1000, 0);
    /* p = count / 19 (the kept pods), not / 20 */
    const int64_t counts[4] = {10, 5, 3, 1};
    double sum = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(t.count[i], counts[i]);
        assert_double_equal(t.p[i], (double)counts[i] / 19.0, EPS);
        sum += t.p[i];
    }
    assert_double_equal(sum, 1.0, EPS);
    /* memory ignored in grouping; mem_mib is the mean over the class:
     * A (6 x 1000 + 4 x 2000) / 10 = 1400; the request itself carries 0 */
    assert_int_equal(t.mem_mib[0], 1400);
    assert_int_equal(t.mem_mib[1], 4096);
    assert_int_equal(t.mem_mib[2], 3000);
    assert_int_equal(t.mem_mib[3], 100000);
    assert_int_equal(t.req[0].mem_mib, 0);
    assert_false(t.mem_aware);
    ts_typical_free(&t);

    /* 0.80 x 20 = 16: cum 10 -> 15 (< 16) -> 18 with C, which crosses 16 and
     * is kept; nothing after it. p = 10/18, 5/18, 3/18. */
    assert_int_equal(ts_typical_from_workload(w, 0.80, &t, &err), 0);
    assert_int_equal(t.n, 3);
    assert_double_equal(t.p[0], 10.0 / 18.0, EPS);
    assert_double_equal(t.p[2], 3.0 / 18.0, EPS);
    ts_typical_free(&t);

    /* 0.90 x 20 = 18: after C cum is exactly 18, not below, so it stops at 3 */
    assert_int_equal(ts_typical_from_workload(w, 0.90, &t, &err), 0);
    assert_int_equal(t.n, 3);
    ts_typical_free(&t);

    /* coverage 1: every class, weights /20 */
    assert_int_equal(ts_typical_from_workload(w, 1.0, &t, &err), 0);
    assert_int_equal(t.n, 5);
    assert_class(&t, 4, 1000, 2, 1000, 0);
    assert_double_equal(t.p[4], 1.0 / 20.0, EPS);
    ts_typical_free(&t);
    ts_workload_free(w);
}

static void test_typical_tie_order(void **state)
{
    (void)state;
    /* E's cpu 32000 now beats D's 16000 in the tie at count 1, so E takes the
     * last slot of the 95% cut instead of D. */
    ts_workload *w = load_abcde(32000);
    ts_typical t;
    assert_int_equal(ts_typical_from_workload(w, 0.95, &t, NULL), 0);
    assert_int_equal(t.n, 4);
    assert_class(&t, 3, 32000, 2, 1000, 0);
    ts_typical_free(&t);
    ts_workload_free(w);

    /* Hand-built workload, every class once, equal cpu: order by larger share,
     * then more GPUs, then larger model mask. Given in scrambled order. */
    uint32_t t4 = 1u << model_id("T4"), v16 = 1u << model_id("V100M16");
    assert_true(v16 > t4);
    ts_request specs[5] = {
        req(1000, 1, 300, 0),   /* X */
        req(1000, 1, 1000, t4), /* W */
        req(1000, 1, 700, 0),   /* Y */
        req(1000, 1, 1000, v16),/* W2 */
        req(1000, 2, 1000, 0),  /* Z */
    };
    int spec_count[5] = {1, 1, 1, 1, 1};
    ts_workload hw = {.specs = specs, .spec_count = spec_count, .nspecs = 5};
    assert_int_equal(ts_typical_from_workload(&hw, 1.0, &t, NULL), 0);
    assert_int_equal(t.n, 5);
    assert_class(&t, 0, 1000, 2, 1000, 0);   /* Z: share 1000, 2 GPUs */
    assert_class(&t, 1, 1000, 1, 1000, v16); /* W2: mask 4 > 2 */
    assert_class(&t, 2, 1000, 1, 1000, t4);  /* W */
    assert_class(&t, 3, 1000, 1, 700, 0);    /* Y */
    assert_class(&t, 4, 1000, 1, 300, 0);    /* X */
    for (int i = 0; i < 5; i++)
        assert_double_equal(t.p[i], 0.2, EPS);
    ts_typical_free(&t);
}

static void test_typical_by_gpu(void **state)
{
    (void)state;
    ts_workload *w = load_abcde(1000);
    ts_typical t;
    /* weight = pods x GPUs x share: A 10x1x500 = 5000, B 0, C 3x1x1000 =
     * 3000, D 1x8x1000 = 8000, E 1x2x1000 = 2000; total 18000, 95% = 17100.
     * Ranked D, A, C, E: cum 8000 -> 13000 -> 16000 (< 17100) -> 18000 with
     * E. B (weight 0) is left out however high the coverage. */
    assert_int_equal(ts_typical_build(w, 0.95, TS_TYPICAL_BY_GPU, &t, NULL), 0);
    assert_int_equal(t.n, 4);
    assert_class(&t, 0, 16000, 8, 1000, 0);
    assert_class(&t, 1, 4000, 1, 500, 0);
    assert_class(&t, 3, 1000, 2, 1000, 0);
    assert_int_equal(t.count[0], 8000);
    assert_int_equal(t.count[1], 5000);
    assert_int_equal(t.count[2], 3000);
    assert_int_equal(t.count[3], 2000);
    assert_double_equal(t.p[0], 8000.0 / 18000.0, EPS);
    assert_double_equal(t.p[1], 5000.0 / 18000.0, EPS);
    assert_double_equal(t.p[2], 3000.0 / 18000.0, EPS);
    assert_double_equal(t.p[3], 2000.0 / 18000.0, EPS);
    assert_int_equal(t.mem_mib[1], 1400); /* mean memory is still per pod */
    ts_typical_free(&t);

    assert_int_equal(ts_typical_build(w, 1.0, TS_TYPICAL_BY_GPU, &t, NULL), 0);
    assert_int_equal(t.n, 4);
    for (int i = 0; i < t.n; i++)
        assert_int_not_equal(t.req[i].num_gpu, 0);
    ts_typical_free(&t);

    /* 0.7 x 18000 = 12600: 8000 -> 13000 crosses it with A; p = 8/13, 5/13 */
    assert_int_equal(ts_typical_build(w, 0.7, TS_TYPICAL_BY_GPU, &t, NULL), 0);
    assert_int_equal(t.n, 2);
    assert_double_equal(t.p[0], 8000.0 / 13000.0, EPS);
    assert_double_equal(t.p[1], 5000.0 / 13000.0, EPS);
    ts_typical_free(&t);

    /* BY_COUNT through ts_typical_build is ts_typical_from_workload */
    assert_int_equal(ts_typical_build(w, 0.95, TS_TYPICAL_BY_COUNT, &t, NULL), 0);
    assert_int_equal(t.n, 4);
    assert_int_equal(t.count[0], 10);
    ts_typical_free(&t);
    ts_workload_free(w);
}

/*
 * Regression: class weights are 64-bit. Under TS_TYPICAL_BY_GPU 300000 pods
 * of 8 x 1000 weigh 2.4e9 > INT_MAX; an int weight wrapped negative and the
 * list came back empty instead of holding that one dominant class.
 */
static void test_typical_by_gpu_large_weight(void **state)
{
    (void)state;
    ts_request specs[2] = {req(16000, 8, 1000, 0), req(1000, 1, 500, 0)};
    int spec_count[2] = {300000, 10};
    ts_workload hw = {.specs = specs, .spec_count = spec_count, .nspecs = 2};
    ts_typical t;
    assert_int_equal(ts_typical_build(&hw, 0.95, TS_TYPICAL_BY_GPU, &t, NULL), 0);
    /* weights 2,400,000,000 and 5,000: the first alone passes 95%. Read
     * out before freeing, so a failure does not also report a leak. */
    int n = t.n;
    int64_t count0 = n > 0 ? t.count[0] : -1;
    double p0 = n > 0 ? t.p[0] : -1;
    ts_typical_free(&t);
    assert_int_equal(n, 1);
    assert_int_equal(count0, 2400000000LL);
    assert_double_equal(p0, 1.0, EPS);
}

/* ---- the per-node amount, category by category ------------------------- */

/* One class of weight 1 (mem_mib as given), so F = f(n, j). */
typedef struct one_class {
    ts_request req;
    double p;
    int64_t count;
    int64_t mem;
    ts_typical t;
} one_class;

static void one_class_init(one_class *o, ts_request r, int64_t mem)
{
    o->req = r;
    o->p = 1.0;
    o->count = 1;
    o->mem = mem;
    o->t = (ts_typical){.n = 1, .req = &o->req, .p = &o->p, .count = &o->count,
                        .mem_mib = &o->mem};
}

static double f_one(const ts_frag_shape *s, ts_request r, int64_t mem, bool mem_aware)
{
    one_class o;
    one_class_init(&o, r, mem);
    o.t.mem_aware = mem_aware;
    return ts_frag_shape_amount(s, &o.t);
}

/* A T4 node with 4 GPUs free 1000, 600, 300, 0: U = 1900. CPU left 8000,
 * memory left 10000. */
static ts_frag_shape shape_t4(void)
{
    ts_frag_shape s = {.model = model_id("T4"), .ngpu = 4, .cpu_left = 8000,
                       .mem_left = 10000, .free = {1000, 600, 300, 0}};
    return s;
}

static void test_frag_categories(void **state)
{
    (void)state;
    ts_frag_shape s = shape_t4();
    uint32_t t4 = 1u << model_id("T4"), v16 = 1u << model_id("V100M16");
    /* CPU-only class: all idle GPU is fragment for it, though it fits */
    assert_double_equal(f_one(&s, req(1000, 0, 0, 0), 0, false), 1900.0, EPS);
    /* model not allowed (V100M16 only on a T4 node): U */
    assert_double_equal(f_one(&s, req(1000, 1, 500, v16), 0, false), 1900.0, EPS);
    /* lacking CPU (16000 > 8000): U, though the GPUs would take it */
    assert_double_equal(f_one(&s, req(16000, 1, 500, 0), 0, false), 1900.0, EPS);
    /* exactly the CPU left is enough: fits; free >= 500 on GPUs 0 and 1,
     * slivers 300 + 0 = 300 */
    assert_double_equal(f_one(&s, req(8000, 1, 500, 0), 0, false), 300.0, EPS);
    /* lacking GPUs: 2 x 1000 needs two GPUs with 1000 free, only GPU 0: U */
    assert_double_equal(f_one(&s, req(1000, 2, 1000, 0), 0, false), 1900.0, EPS);
    /* fits, 1 x 1000: GPU 0 takes it; slivers 600 + 300 + 0 = 900 */
    assert_double_equal(f_one(&s, req(1000, 1, 1000, 0), 0, false), 900.0, EPS);
    /* fits, share 700 allowed on T4: slivers 600 + 300 = 900 */
    assert_double_equal(f_one(&s, req(1000, 1, 700, t4), 0, false), 900.0, EPS);
    /* fits, share 600: GPU 1 exactly fits (free >= share), slivers 300 */
    assert_double_equal(f_one(&s, req(1000, 1, 600, 0), 0, false), 300.0, EPS);
    /* fits, share 200: only the 0-free GPU is below -> 0 */
    assert_double_equal(f_one(&s, req(1000, 1, 200, 0), 0, false), 0.0, EPS);

    /* weighted: 0.5 share 500 (300) + 0.25 CPU-only (1900) + 0.25 2 x 1000
     * (1900) = 150 + 475 + 475 = 1100 */
    ts_request rs[3] = {req(1000, 1, 500, 0), req(1000, 0, 0, 0), req(1000, 2, 1000, 0)};
    double p[3] = {0.5, 0.25, 0.25};
    int64_t cnt[3] = {2, 1, 1}, mem[3] = {0, 0, 0};
    ts_typical t = {.n = 3, .req = rs, .p = p, .count = cnt, .mem_mib = mem};
    assert_double_equal(ts_frag_shape_amount(&s, &t), 1100.0, EPS);

    /* nothing idle: 0 for every class, CPU-only included */
    ts_frag_shape full = s;
    memset(full.free, 0, sizeof full.free);
    assert_double_equal(ts_frag_shape_amount(&full, &t), 0.0, EPS);
    /* empty class list: 0 */
    ts_typical none = {0};
    assert_double_equal(ts_frag_shape_amount(&s, &none), 0.0, EPS);
}

static void test_frag_mem_aware(void **state)
{
    (void)state;
    ts_frag_shape s = shape_t4(); /* mem_left 10000 */
    ts_request r = req(1000, 1, 500, 0);
    /* class mean memory 12000 > 10000 left: ignored by default (published
     * measure) -> slivers 300; mem_aware -> the node cannot host it -> U */
    assert_double_equal(f_one(&s, r, 12000, false), 300.0, EPS);
    assert_double_equal(f_one(&s, r, 12000, true), 1900.0, EPS);
    /* exactly the memory left is enough */
    assert_double_equal(f_one(&s, r, 10000, true), 300.0, EPS);
    /* mem_aware does not change the U categories */
    assert_double_equal(f_one(&s, req(16000, 1, 500, 0), 0, true), 1900.0, EPS);
}

/* ---- a real node ------------------------------------------------------- */

static void bind(ts_node *n, int64_t cpu, int64_t mem, int32_t ngpu, int32_t milli,
                 const int *gpus)
{
    ts_request r = req(cpu, ngpu, milli, 0);
    r.mem_mib = mem;
    ts_alloc a = ts_test_alloc(&r, -1, gpus, ngpu);
    assert_int_equal(ts_node_assign(n, &r, &a), 0);
}

static void test_frag_node(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    ts_node_spec spec = {.name = "t4x4", .gpu_model = "T4", .ngpu = 4, .cpu_milli = 16000,
                         .mem_mib = 30000, .gpu_mode = TS_GPU_SHARED};
    assert_int_equal(ts_cluster_add_node(c, &spec, NULL), 0);
    ts_node *n = &c->nodes[0];
    const int g1[] = {1}, g2[] = {2}, g3[] = {3};
    bind(n, 2000, 5000, 1, 400, g1);  /* GPU 1 free 600 */
    bind(n, 3000, 5000, 1, 700, g2);  /* GPU 2 free 300 */
    bind(n, 3000, 10000, 1, 1000, g3);/* GPU 3 free 0 */
    ts_frag_shape s;
    ts_frag_shape_of(n, &s);
    ts_frag_shape want = shape_t4(); /* cpu 16000 - 8000, mem 30000 - 20000 */
    assert_int_equal(s.model, want.model);
    assert_int_equal(s.ngpu, 4);
    assert_int_equal(s.cpu_left, 8000);
    assert_int_equal(s.mem_left, 10000);
    for (int i = 0; i < 4; i++)
        assert_int_equal(s.free[i], want.free[i]);
    assert_int_equal(ts_frag_idle(n), 1900);

    ts_request rs[2] = {req(1000, 1, 500, 0), req(1000, 0, 0, 0)};
    double p[2] = {0.75, 0.25};
    int64_t cnt[2] = {3, 1}, mem[2] = {0, 0};
    ts_typical t = {.n = 2, .req = rs, .p = p, .count = cnt, .mem_mib = mem};
    /* 0.75 x 300 + 0.25 x 1900 = 225 + 475 = 700 */
    assert_double_equal(ts_frag_node(n, &t), 700.0, EPS);
    ts_cluster_free(c);
}

/* ---- the tracker ------------------------------------------------------- */

/* The definition written out again from the node's own GPU fields, so the
 * tracker is checked against something other than frag.c. */
static double oracle_node(const ts_node *n, const ts_typical *t)
{
    int64_t idle = 0;
    for (int i = 0; i < n->ngpu; i++)
        if (n->gpu[i].mode != TS_GPU_MIG)
            idle += TS_MILLI_PER_GPU - n->gpu[i].milli_used;
    double f = 0;
    for (int j = 0; j < t->n; j++) {
        const ts_request *q = &t->req[j];
        double fj = (double)idle;
        bool allowed = q->model_mask == 0 || (n->model >= 0 && (q->model_mask >> n->model) & 1u);
        bool cpu_ok = n->cpu_milli - n->cpu_used >= q->cpu_milli;
        bool mem_ok = !t->mem_aware || n->mem_mib - n->mem_used >= t->mem_mib[j];
        if (q->num_gpu > 0 && allowed && cpu_ok && mem_ok) {
            int fit = 0;
            int64_t sliver = 0;
            for (int i = 0; i < n->ngpu; i++) {
                int32_t fr = TS_MILLI_PER_GPU - n->gpu[i].milli_used;
                if (fr >= q->gpu_milli)
                    fit++;
                else
                    sliver += fr;
            }
            if (fit >= q->num_gpu)
                fj = (double)sliver;
        }
        f += t->p[j] * fj;
    }
    return f;
}

static void check_tracker(const ts_frag_tracker *tr, const ts_cluster *c, const ts_typical *t)
{
    double sf = 0;
    int64_t su = 0;
    for (int i = 0; i < c->nnodes; i++) {
        double f = oracle_node(&c->nodes[i], t);
        assert_double_equal(tr->node_f[i], f, TRACKER_EPS);
        assert_double_equal(ts_frag_node(&c->nodes[i], t), f, TRACKER_EPS);
        sf += f;
        for (int g = 0; g < c->nodes[i].ngpu; g++)
            su += TS_MILLI_PER_GPU - c->nodes[i].gpu[g].milli_used;
    }
    assert_double_equal(tr->sum_f, sf, TRACKER_EPS);
    assert_int_equal(tr->sum_u, su);
}

static ts_cluster *tracker_cluster(void)
{
    static const ts_node_spec specs[] = {
        {.name = "a", .gpu_model = "T4", .ngpu = 1, .cpu_milli = 8000, .mem_mib = 32000},
        {.name = "b", .gpu_model = "T4", .ngpu = 2, .cpu_milli = 16000, .mem_mib = 64000},
        {.name = "c", .gpu_model = "V100M32", .ngpu = 4, .cpu_milli = 32000, .mem_mib = 96000},
        {.name = "d", .gpu_model = "V100M16", .ngpu = 8, .cpu_milli = 64000, .mem_mib = 256000},
        {.name = "e", .gpu_model = "A10", .ngpu = 8, .cpu_milli = 96000, .mem_mib = 128000},
        {.name = "f", .gpu_model = NULL, .ngpu = 0, .cpu_milli = 32000, .mem_mib = 64000},
    };
    ts_cluster *c = ts_cluster_new();
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        ts_node_spec s = specs[i];
        s.gpu_mode = TS_GPU_SHARED;
        assert_int_equal(ts_cluster_add_node(c, &s, NULL), (int)i);
    }
    return c;
}

static void run_tracker(bool mem_aware, uint64_t seed)
{
    ts_cluster *c = tracker_cluster();
    uint32_t v100 = (1u << model_id("V100M16")) | (1u << model_id("V100M32"));
    uint32_t t4 = 1u << model_id("T4");
    ts_request cls[6] = {req(4000, 0, 0, 0),      req(2000, 1, 300, 0),
                         req(6000, 1, 600, v100), req(8000, 1, 1000, 0),
                         req(12000, 2, 1000, t4), req(48000, 8, 1000, 0)};
    double p[6] = {0.2, 0.25, 0.15, 0.2, 0.1, 0.1};
    int64_t cnt[6] = {4, 5, 3, 4, 2, 2};
    int64_t mem[6] = {8000, 4000, 16000, 24000, 30000, 120000};
    ts_typical t = {.n = 6, .req = cls, .p = p, .count = cnt, .mem_mib = mem,
                    .mem_aware = mem_aware};
    /* what arrives: the classes plus shapes outside the list */
    ts_request arrivals[9];
    for (int k = 0; k < 6; k++) {
        arrivals[k] = cls[k];
        arrivals[k].mem_mib = mem[k];
    }
    arrivals[6] = req(1000, 1, 250, 0);
    arrivals[6].mem_mib = 2000;
    arrivals[7] = req(16000, 4, 1000, 0);
    arrivals[7].mem_mib = 40000;
    arrivals[8] = req(3000, 1, 850, 0);
    arrivals[8].mem_mib = 1000;

    ts_frag_tracker tr;
    assert_int_equal(ts_frag_tracker_init(&tr, c, &t, NULL), 0);
    assert_int_equal(tr.nnodes, c->nnodes);
    check_tracker(&tr, c, &t);
    /* U at start: 1 + 2 + 4 + 8 + 8 GPUs = 23000 milli */
    assert_int_equal(tr.sum_u, 23000);

    ts_rng rng;
    ts_rng_seed(&rng, seed);
    ts_alloc live[MAX_LIVE];
    int nlive = 0, placed = 0, released = 0;
    double max_f = 0;
    for (int step = 0; step < TRACKER_STEPS; step++) {
        bool release = nlive == MAX_LIVE || (nlive > 0 && ts_rng_below(&rng, 10) < 3);
        if (!release) {
            const ts_request *r = &arrivals[ts_rng_below(&rng, 9)];
            int i = (int)ts_rng_below(&rng, (uint64_t)c->nnodes);
            ts_alloc a;
            if (ts_node_fits(&c->nodes[i], r) && ts_node_choose_gpus(&c->nodes[i], r, &a) == 0) {
                a.node = i;
                assert_int_equal(ts_node_assign(&c->nodes[i], r, &a), 0);
                live[nlive++] = a;
                placed++;
                ts_frag_tracker_update(&tr, c, i);
            } else if (nlive > 0) {
                release = true;
            }
        }
        if (release) {
            int k = (int)ts_rng_below(&rng, (uint64_t)nlive);
            ts_alloc a = live[k];
            live[k] = live[--nlive];
            assert_int_equal(ts_node_release(&c->nodes[a.node], &a), 0);
            released++;
            ts_frag_tracker_update(&tr, c, a.node);
        }
        check_tracker(&tr, c, &t);
        if (tr.sum_f > max_f)
            max_f = tr.sum_f;
    }
    /* the sequence did real work */
    assert_true(placed > 500);
    assert_true(released > 300);
    assert_true(max_f > 1000.0);
    /* drain: back to an idle cluster, F = sum over nodes of the weight of
     * classes that cannot use a fully idle node times its U */
    while (nlive > 0) {
        ts_alloc a = live[--nlive];
        assert_int_equal(ts_node_release(&c->nodes[a.node], &a), 0);
        ts_frag_tracker_update(&tr, c, a.node);
    }
    check_tracker(&tr, c, &t);
    assert_int_equal(tr.sum_u, 23000);
    ts_frag_tracker_free(&tr);
    assert_null(tr.node_f);
    ts_cluster_free(c);
}

static void test_tracker_random(void **state)
{
    (void)state;
    run_tracker(false, 20240611);
    run_tracker(true, 20240611);
    run_tracker(false, 7);
}

static void test_tracker_idle_cluster(void **state)
{
    (void)state;
    /* Idle tracker cluster, hand sums. Per node U: a 1000, b 2000, c 4000,
     * d 8000, e 8000, f 0. One class share 300 allowed on V100M16|V100M32,
     * p 0.5, and CPU-only p 0.5: the share fits idle c and d with no
     * slivers, so F(c) = F(d) = 0.5 x U; elsewhere both halves are U.
     * sum F = 1000 + 2000 + 2000 + 4000 + 8000 + 0 = 17000. */
    ts_cluster *c = tracker_cluster();
    uint32_t v100 = (1u << model_id("V100M16")) | (1u << model_id("V100M32"));
    ts_request rs[2] = {req(1000, 1, 300, v100), req(1000, 0, 0, 0)};
    double p[2] = {0.5, 0.5};
    int64_t cnt[2] = {1, 1}, mem[2] = {0, 0};
    ts_typical t = {.n = 2, .req = rs, .p = p, .count = cnt, .mem_mib = mem};
    ts_frag_tracker tr;
    assert_int_equal(ts_frag_tracker_init(&tr, c, &t, NULL), 0);
    assert_double_equal(tr.sum_f, 17000.0, EPS);
    assert_double_equal(tr.node_f[2], 2000.0, EPS);
    assert_int_equal(tr.node_u[3], 8000);
    ts_frag_tracker_free(&tr);
    ts_cluster_free(c);
}

/* ---- the memo: the same doubles as a computation ----------------------- */

#define MEMO_QUERIES 20000

static bool same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* S as the definition reads, every class's term added (zeros included) and
 * the pod counts found by division: the measure skips the zeros and the
 * divisions it can, and must still give these bits. */
static double stranded_reference(const ts_frag_shape *s, const ts_typical *t)
{
    int64_t idle = 0;
    for (int i = 0; i < s->ngpu; i++)
        idle += s->free[i];
    double st = 0.0;
    for (int j = 0; idle > 0 && j < t->n; j++) {
        const ts_request *q = &t->req[j];
        bool allowed = q->model_mask == 0 || ((q->model_mask >> s->model) & 1u);
        int fit = 0;
        for (int i = 0; i < s->ngpu; i++)
            fit += s->free[i] >= q->gpu_milli;
        if (q->num_gpu == 0 || !allowed || fit < q->num_gpu)
            continue;
        int64_t by_gpu = fit / q->num_gpu;
        if (q->gpu_milli < TS_MILLI_PER_GPU) {
            by_gpu = 0;
            for (int i = 0; i < s->ngpu; i++)
                by_gpu += s->free[i] / q->gpu_milli;
        }
        int64_t mem = t->mem_aware ? t->mem_mib[j] : 0, k = by_gpu;
        if (q->cpu_milli > 0 && s->cpu_left / q->cpu_milli < k)
            k = s->cpu_left / q->cpu_milli;
        if (mem > 0 && s->mem_left / mem < k)
            k = s->mem_left / mem;
        k = k < 0 ? 0 : k;
        st += t->p[j] * (double)((by_gpu - k) * q->num_gpu * q->gpu_milli);
    }
    return st;
}

/* Random shapes from a few values each, so shapes repeat, come back with
 * their GPUs in another order and share slots: every answer of the memo has
 * the bits of ts_frag_shape_measure, and a shape's GPU order never changes
 * the measure (what lets the memo key sorted GPUs). */
static void test_memo_same_bits(void **state)
{
    (void)state;
    uint32_t v100 = (1u << model_id("V100M16")) | (1u << model_id("V100M32"));
    ts_request cls[5] = {req(4000, 0, 0, 0), req(2000, 1, 300, 0), req(6000, 1, 600, v100),
                         req(8000, 1, 1000, 0), req(12000, 2, 1000, 0)};
    double p[5] = {0.1, 0.3, 0.2, 0.3, 0.1};
    int64_t cnt[5] = {1, 3, 2, 3, 1};
    int64_t mem[5] = {8000, 4000, 16000, 24000, 30000};
    ts_typical t = {.n = 5, .req = cls, .p = p, .count = cnt, .mem_mib = mem,
                    .mem_aware = true};
    static const int32_t frees[] = {0, 100, 300, 400, 700, 1000};
    int models[2] = {model_id("T4"), model_id("V100M32")};
    ts_frag_memo *m = ts_frag_memo_new();
    assert_non_null(m);
    ts_rng rng;
    ts_rng_seed(&rng, 20261204);
    int nonzero = 0, nbound = 0;
    for (int q = 0; q < MEMO_QUERIES; q++) {
        ts_frag_shape s = {.model = models[ts_rng_below(&rng, 2)],
                           .ngpu = 1 + (int)ts_rng_below(&rng, 4),
                           .cpu_left = 2000 * (int64_t)ts_rng_below(&rng, 8),
                           .mem_left = 8000 * (int64_t)ts_rng_below(&rng, 5)};
        for (int i = 0; i < s.ngpu; i++)
            s.free[i] = frees[ts_rng_below(&rng, 6)];
        double st_direct, st_memo, st_null;
        double f = ts_frag_shape_measure(&s, &t, &st_direct);
        double fm = ts_frag_memo_measure(m, &s, &t, &st_memo);
        assert_true(same_bits(f, fm) && same_bits(st_direct, st_memo));
        assert_true(same_bits(st_direct, stranded_reference(&s, &t)));
        nbound += st_direct > 0.0;
        assert_true(same_bits(ts_frag_memo_measure(m, &s, &t, NULL), f));
        assert_true(same_bits(ts_frag_memo_measure(NULL, &s, &t, &st_null), f) &&
                    same_bits(st_null, st_direct));
        /* the GPUs reversed: the same measure, and from the memo */
        ts_frag_shape r = s;
        for (int i = 0; i < s.ngpu; i++)
            r.free[i] = s.free[s.ngpu - 1 - i];
        double st_rev;
        assert_true(same_bits(ts_frag_shape_measure(&r, &t, &st_rev), f) &&
                    same_bits(st_rev, st_direct));
        assert_true(same_bits(ts_frag_memo_measure(m, &r, &t, &st_rev), f) &&
                    same_bits(st_rev, st_direct));
        nonzero += f > 0.0;
    }
    /* the draw reaches shapes where the measure is not trivially 0 */
    assert_true(nonzero > MEMO_QUERIES / 2);
    /* and shapes where CPU or memory strand GPUs, and where they do not */
    assert_true(nbound > MEMO_QUERIES / 10 && nbound < MEMO_QUERIES * 9 / 10);
    ts_frag_memo_free(m);
    ts_frag_memo_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_typical_cut_95),
        cmocka_unit_test(test_typical_tie_order),
        cmocka_unit_test(test_typical_by_gpu),
        cmocka_unit_test(test_typical_by_gpu_large_weight),
        cmocka_unit_test(test_frag_categories),
        cmocka_unit_test(test_frag_mem_aware),
        cmocka_unit_test(test_frag_node),
        cmocka_unit_test(test_tracker_random),
        cmocka_unit_test(test_tracker_idle_cluster),
        cmocka_unit_test(test_memo_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
