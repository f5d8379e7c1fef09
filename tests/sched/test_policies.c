/*
 * test_policies.c - the seven built-in placement policies through
 * ts_scorer_find and the ts_placer_* loop, on small clusters worked by hand.
 *
 * Hand-computed choices (arithmetic in the comments): dotprod and bestfit
 * score values on one node and the node each picks, truncation ties going to
 * the lowest node index; clustering's four bands; packing's partly-used GPU
 * first, then fewest new GPUs, idle small nodes before big ones; fgd's
 * smallest fragmentation growth, its own GPU choice, and the lowest index on
 * an equal truncated score; whole-GPU pods on the lowest-index free GPUs and
 * shares by best fit. Random picks only feasible nodes and GPUs and is a
 * function of its seed. Every policy returns TS_ENOSPC and leaves the cluster
 * untouched when nothing fits. On a bounded random sequence with releases,
 * each policy (tessera included, checked only for these generic properties)
 * places feasibly, repeats itself for a seed, and decides the same with the
 * score cache as without it.
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
#include "tessera/model.h"
#include "tessera/rng.h"
#include "tessera/sched.h"
#include "test_util.h"

#define SEQ_STEPS 3000
#define SEQ_MAX_LIVE 512
#define RANDOM_DRAWS 400
#define T4_MEM_MIB 16384

static const char *const POLICIES[] = {"random", "dotprod", "clustering", "packing",
                                       "bestfit", "fgd",    "tessera"};
#define NPOLICIES ((int)(sizeof POLICIES / sizeof POLICIES[0]))

/* ---- helpers ----------------------------------------------------------- */

static int model_id(const char *name)
{
    int m = ts_gpu_model_lookup(name);
    assert_true(m >= 0);
    return m;
}

static ts_request req(int64_t cpu, int32_t ngpu, int32_t milli, uint32_t mask)
{
    ts_request r = {.cpu_milli = cpu, .mem_mib = 1000, .num_gpu = ngpu, .gpu_milli = milli,
                    .model_mask = mask, .mig_profile = -1};
    return r;
}

static int add(ts_cluster *c, const char *name, const char *model, int ngpu, int64_t cpu)
{
    ts_node_spec s = {.name = name, .gpu_model = model, .ngpu = ngpu, .cpu_milli = cpu,
                      .mem_mib = 512000, .gpu_mode = TS_GPU_SHARED};
    int i = ts_cluster_add_node(c, &s, NULL);
    assert_true(i >= 0);
    return i;
}

/* Binds a pod to chosen GPUs of node i directly (preloading a state). */
static void bind_mem(ts_cluster *c, int i, int64_t cpu, int32_t ngpu, int32_t milli,
                     const int *gpus, int64_t gpu_mem)
{
    ts_request r = req(cpu, ngpu, milli, 0);
    r.gpu_mem_mib = gpu_mem;
    ts_alloc a = ts_test_alloc(&r, i, gpus, ngpu);
    assert_int_equal(ts_node_assign(&c->nodes[i], &r, &a), 0);
}

static void bind(ts_cluster *c, int i, int64_t cpu, int32_t ngpu, int32_t milli,
                 const int *gpus)
{
    bind_mem(c, i, cpu, ngpu, milli, gpus, 0);
}

/* A single-class or two-class typical list that lives in the caller. */
typedef struct typ_buf {
    ts_request req[4];
    double p[4];
    int64_t count[4];
    int64_t mem[4];
    ts_typical t;
} typ_buf;

static const ts_typical *typ_make(typ_buf *b, int n, const ts_request *rs, const double *p)
{
    memset(b, 0, sizeof *b);
    for (int j = 0; j < n; j++) {
        b->req[j] = rs[j];
        b->req[j].mem_mib = 0;
        b->p[j] = p[j];
        b->count[j] = 1;
    }
    b->t = (ts_typical){.n = n, .req = b->req, .p = b->p, .count = b->count,
                        .mem_mib = b->mem};
    return &b->t;
}

/* FGD_TYP: share 500 (p 0.5) and 1 x 1000 (p 0.5), any model, cpu 1000. */
static const ts_typical *fgd_typ(typ_buf *b)
{
    ts_request rs[2] = {req(1000, 1, 500, 0), req(1000, 1, 1000, 0)};
    double p[2] = {0.5, 0.5};
    return typ_make(b, 2, rs, p);
}

static const struct ts_scorer_ops *find(const char *name)
{
    const struct ts_scorer_ops *ops = ts_scorer_find(name);
    assert_non_null(ops);
    return ops;
}

/* The scorer's own value for one node, through its ops table. */
static int64_t score1(const char *policy, ts_cluster *c, const ts_typical *typ, int node,
                      const ts_request *r, ts_alloc *a)
{
    const struct ts_scorer_ops *ops = find(policy);
    ts_sched_env env = {.cluster = c, .typical = typ};
    void *st = NULL;
    ts_err err;
    if (ops->init)
        assert_int_equal(ops->init(&st, &env, &err), 0);
    ts_rng rng;
    ts_rng_seed(&rng, 1);
    assert_true(ts_node_fits(&c->nodes[node], r));
    int64_t s = ops->score(st, &c->nodes[node], r, a, &rng);
    if (ops->fini)
        ops->fini(st);
    return s;
}

/* One placement with a fresh placer (no cache); returns the node or error. */
static int place1(const char *policy, ts_cluster *c, const ts_typical *typ,
                  const ts_request *r, ts_alloc *a)
{
    ts_sched_env env = {.cluster = c, .typical = typ};
    ts_err err;
    ts_placer *p = ts_placer_new(c, find(policy), &env, 0, 1, &err);
    assert_non_null(p);
    int node = ts_placer_place(p, r, -1, a);
    if (node >= 0)
        assert_int_equal(a->node, node);
    ts_placer_free(p);
    return node;
}

/* Cluster P, big nodes first so the lowest index is not the natural pick:
 *   0: 8 x T4, 64 cores   1: 4 x T4, 32 cores
 *   2: 2 x T4, 16 cores   3: 1 x T4, 8 cores */
static ts_cluster *cluster_p(void)
{
    ts_cluster *c = ts_cluster_new();
    add(c, "p8", "T4", 8, 64000);
    add(c, "p4", "T4", 4, 32000);
    add(c, "p2", "T4", 2, 16000);
    add(c, "p1", "T4", 1, 8000);
    return c;
}

/* ---- registry ---------------------------------------------------------- */

static void test_registry(void **state)
{
    (void)state;
    const struct ts_scorer_ops *const *all = ts_scorer_all();
    int n = 0;
    while (all[n])
        n++;
    assert_int_equal(n, NPOLICIES);
    for (int i = 0; i < NPOLICIES; i++) {
        const struct ts_scorer_ops *ops = find(POLICIES[i]);
        assert_string_equal(ops->name, POLICIES[i]);
        assert_non_null(ops->score);
        /* random draws per call, so it must not be cached; the rest promise to */
        assert_int_equal(ops->cacheable, strcmp(POLICIES[i], "random") != 0);
    }
    assert_null(ts_scorer_find("Random"));
    assert_null(ts_scorer_find(""));
}

/* ---- dotprod and bestfit ----------------------------------------------- */

/* One 8 x T4 node, 64 cores: GPU 0 whole, GPU 1 700 used, GPU 2 400, GPU 3
 * 200, GPUs 4-7 free; a CPU pod uses 24 cores. cpu left 40000; GPU free
 * 0 + 300 + 600 + 800 + 4000 = 5700. Norms 128000 and 8000. */
static ts_cluster *cluster_one_busy(void)
{
    ts_cluster *c = ts_cluster_new();
    add(c, "busy", "T4", 8, 64000);
    const int g0[] = {0}, g1[] = {1}, g2[] = {2}, g3[] = {3};
    bind(c, 0, 0, 1, 1000, g0);
    bind(c, 0, 0, 1, 700, g1);
    bind(c, 0, 0, 1, 400, g2);
    bind(c, 0, 0, 1, 200, g3);
    bind(c, 0, 24000, 0, 0, NULL);
    assert_int_equal(c->nodes[0].milli_free, 5700);
    return c;
}

static void test_dotprod_scores(void **state)
{
    (void)state;
    ts_cluster *c = cluster_one_busy();
    ts_alloc a;
    ts_request share = req(6000, 1, 500, 0);
    /* dot = 40000 x 6000 / 128000^2 + 5700 x 500 / 8000^2
     *     = 0.0146484375 + 0.04453125 = 0.0591796875
     * 100 x (1 - dot/2) = 97.04 -> 97; GPU by best fit: free >= 500 are
     * GPU 2 (600), 3 (800), 4-7 (1000) -> GPU 2 */
    assert_int_equal(score1("dotprod", c, NULL, 0, &share, &a), 97);
    assert_int_equal(a.ngpu, 1);
    assert_int_equal(a.gpu[0], 2);
    /* 4 x 1000, 12 cores: 0.029296875 + 5700 x 4000 / 8000^2 = 0.35625
     * -> 0.385546875; 100 x (1 - 0.1927734375) = 80.72 -> 80; GPUs 4-7 */
    ts_request four = req(12000, 4, 1000, 0);
    assert_int_equal(score1("dotprod", c, NULL, 0, &four, &a), 80);
    assert_int_equal(a.ngpu, 4);
    for (int k = 0; k < 4; k++)
        assert_int_equal(a.gpu[k], 4 + k);
    /* CPU-only 8 cores: 40000 x 8000 / 128000^2 = 0.01953125 -> 99.02 -> 99 */
    ts_request cpu = req(8000, 0, 0, 0);
    assert_int_equal(score1("dotprod", c, NULL, 0, &cpu, &a), 99);
    assert_int_equal(a.ngpu, 0);

    /* a 16-GPU node elsewhere raises the GPU norm to 16000:
     * 0.0146484375 + 2850000 / 16000^2 (0.011132812) = 0.025781 -> 98.71 -> 98 */
    add(c, "wide", "T4", 16, 64000);
    assert_int_equal(score1("dotprod", c, NULL, 0, &share, &a), 98);
    ts_cluster_free(c);
}

static void test_bestfit_scores(void **state)
{
    (void)state;
    ts_cluster *c = cluster_one_busy();
    ts_alloc a;
    /* share 500, 6 cores: 0.5 x 34000/128000 = 0.1328125, 0.5 x 5200/8000 =
     * 0.325 -> 100 x (1 - 0.4578125) = 54.22 -> 54; GPU 2 by best fit */
    ts_request share = req(6000, 1, 500, 0);
    assert_int_equal(score1("bestfit", c, NULL, 0, &share, &a), 54);
    assert_int_equal(a.gpu[0], 2);
    /* 4 x 1000, 12 cores: 0.5 x 28000/128000 = 0.109375, 0.5 x 1700/8000 =
     * 0.10625 -> 100 x (1 - 0.215625) = 78.44 -> 78 */
    ts_request four = req(12000, 4, 1000, 0);
    assert_int_equal(score1("bestfit", c, NULL, 0, &four, &a), 78);
    /* CPU-only 8 cores: 0.5 x 32000/128000 = 0.125, 0.5 x 5700/8000 = 0.35625
     * -> 100 x (1 - 0.48125) = 51.875 -> 51 */
    ts_request cpu = req(8000, 0, 0, 0);
    assert_int_equal(score1("bestfit", c, NULL, 0, &cpu, &a), 51);

    /* a 256-core node elsewhere raises the CPU norm to 256000: share 500
     * becomes 0.5 x 34000/256000 = 0.06640625 + 0.325 -> 60.86 -> 60 */
    add(c, "fat", NULL, 0, 256000);
    assert_int_equal(score1("bestfit", c, NULL, 0, &share, &a), 60);
    /* and a 16-GPU node the GPU norm to 16000: 0.06640625 + 0.5 x
     * 5200/16000 = 0.1625 -> 77.11 -> 77 */
    add(c, "wide", "T4", 16, 64000);
    assert_int_equal(score1("bestfit", c, NULL, 0, &share, &a), 77);
    ts_cluster_free(c);
}

static void test_dotprod_place(void **state)
{
    (void)state;
    ts_cluster *c = cluster_p();
    ts_alloc a;
    ts_request share = req(4000, 1, 500, 0);
    /* idle P, share 500 with 4 cores:
     *   p8: 64000x4000/128000^2 + 8000x500/8000^2 = 0.015625 + 0.0625 -> 96.09 -> 96
     *   p4: 0.0078125 + 0.03125 -> 98.05 -> 98
     *   p2: 0.00390625 + 0.015625 -> 99.02 -> 99
     *   p1: 0.001953125 + 0.0078125 -> 99.51 -> 99
     * p2 and p1 tie at 99 after truncation: the lower index, p2, GPU 0 */
    assert_int_equal(place1("dotprod", c, NULL, &share, &a), 2);
    assert_int_equal(a.gpu[0], 0);
    /* again: p2 now 12000 cpu, 1500 GPU left: 0.0029296875 + 0.01171875 ->
     * 99.27 -> 99, still the first 99; best fit is GPU 0 (500 left = 500) */
    assert_int_equal(place1("dotprod", c, NULL, &share, &a), 2);
    assert_int_equal(a.gpu[0], 0);
    assert_int_equal(c->nodes[2].gpu[0].milli_used, 1000);
    /* CPU-only 4 cores: every node scores 99 (p8: 0.015625/2 -> 99.2): p8 */
    ts_request cpu = req(4000, 0, 0, 0);
    assert_int_equal(place1("dotprod", c, NULL, &cpu, &a), 0);
    /* 4 x 1000, 4 cores: p8 60000x4000/128000^2 + 8000x4000/8000^2 =
     * 0.0146 + 0.5 -> 74.27 -> 74; p4 0.0078125 + 0.25 -> 87.1 -> 87: p4 */
    ts_request four = req(4000, 4, 1000, 0);
    assert_int_equal(place1("dotprod", c, NULL, &four, &a), 1);
    assert_int_equal(a.ngpu, 4);
    ts_cluster_free(c);
}

static void test_bestfit_place(void **state)
{
    (void)state;
    ts_cluster *c = cluster_p();
    ts_alloc a;
    ts_request share = req(4000, 1, 500, 0);
    /* idle P, share 500 with 4 cores, 100 x (1 - leftover):
     *   p8: 0.5x60000/128000 + 0.5x7500/8000 = 0.234375 + 0.46875 -> 29.69 -> 29
     *   p4: 0.109375 + 0.21875 -> 67.19 -> 67
     *   p2: 0.046875 + 0.09375 -> 85.94 -> 85
     *   p1: 0.015625 + 0.03125 -> 95.31 -> 95   least leftover: p1 */
    assert_int_equal(score1("bestfit", c, NULL, 0, &share, &a), 29);
    assert_int_equal(score1("bestfit", c, NULL, 3, &share, &a), 95);
    assert_int_equal(place1("bestfit", c, NULL, &share, &a), 3);
    /* share 600: p1 has 500 left, filtered out; p2 0.046875 + 0.5x1400/8000
     * = 0.0875 -> 86.56 -> 86 beats p4 (67): p2 */
    ts_request share6 = req(4000, 1, 600, 0);
    assert_int_equal(place1("bestfit", c, NULL, &share6, &a), 2);
    ts_cluster_free(c);

    /* p8 nearly full (7 GPUs and 56 cores used): 0.5x4000/128000 +
     * 0.5x500/8000 = 95.31 -> 95, equal to idle p1: the lower index, p8, GPU 7 */
    c = cluster_p();
    const int g7[] = {0, 1, 2, 3, 4, 5, 6};
    bind(c, 0, 56000, 7, 1000, g7);
    assert_int_equal(score1("bestfit", c, NULL, 0, &share, &a), 95);
    assert_int_equal(place1("bestfit", c, NULL, &share, &a), 0);
    assert_int_equal(a.gpu[0], 7);
    ts_cluster_free(c);
}

/* ---- clustering -------------------------------------------------------- */

static void test_clustering(void **state)
{
    (void)state;
    /* four 4 x T4 nodes; b = 25 x (8000 - free milli) / 8000, integer:
     *   m0: a 1-GPU pod (GPU 0) and a share 300 (GPU 1): free 2700, b 16
     *   m1: a 2-GPU pod (GPUs 0, 1): free 2000, b 18
     *   m2: only a CPU pod (not a GPU class): free 4000, b 12
     *   m3: a share 300 (GPU 0): free 3700, b 13 */
    ts_cluster *c = ts_cluster_new();
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "m%d", i);
        add(c, name, "T4", 4, 32000);
    }
    const int g0[] = {0}, g1[] = {1}, g01[] = {0, 1};
    bind(c, 0, 1000, 1, 1000, g0);
    bind(c, 0, 1000, 1, 300, g1);
    bind(c, 1, 1000, 2, 1000, g01);
    bind(c, 2, 4000, 0, 0, NULL);
    bind(c, 3, 1000, 1, 300, g0);
    ts_alloc a;
    /* share 200: m0 has it among others 50+16; m1 only others 18; m2 no GPU
     * pods 25+12; m3 only shares 75+13 */
    ts_request share = req(1000, 1, 200, 0);
    const int64_t want_share[4] = {66, 18, 37, 88};
    for (int i = 0; i < 4; i++)
        assert_int_equal(score1("clustering", c, NULL, i, &share, &a), want_share[i]);
    /* 1 x 1000: m0 among others 66; m1 18; m2 37; m3 only others 13 */
    ts_request one = req(1000, 1, 1000, 0);
    const int64_t want_one[4] = {66, 18, 37, 13};
    for (int i = 0; i < 4; i++)
        assert_int_equal(score1("clustering", c, NULL, i, &one, &a), want_one[i]);
    /* 2 x 1000: m1 only its class 75+18 = 93 */
    ts_request two = req(1000, 2, 1000, 0);
    assert_int_equal(score1("clustering", c, NULL, 1, &two, &a), 93);
    assert_int_equal(score1("clustering", c, NULL, 0, &two, &a), 16);
    /* CPU-only: 0 everywhere */
    ts_request cpu = req(1000, 0, 0, 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(score1("clustering", c, NULL, i, &cpu, &a), 0);

    /* the placer follows: share -> m3 (GPU 0, best fit 700); 1 GPU -> m0
     * GPU 2; 2 GPUs -> m1 GPUs 2, 3; CPU-only -> m0 (all 0, lowest index) */
    assert_int_equal(place1("clustering", c, NULL, &share, &a), 3);
    assert_int_equal(a.gpu[0], 0);
    assert_int_equal(place1("clustering", c, NULL, &one, &a), 0);
    assert_int_equal(a.gpu[0], 2);
    assert_int_equal(place1("clustering", c, NULL, &two, &a), 1);
    assert_int_equal(a.gpu[0], 2);
    assert_int_equal(a.gpu[1], 3);
    assert_int_equal(place1("clustering", c, NULL, &cpu, &a), 0);
    ts_cluster_free(c);

    /* idle P: b = p8 0, p4 12, p2 18, p1 21 -> 25, 37, 43, 46: smallest
     * first. share 500 -> p1. 1 x 1000 no longer fits p1 -> p2 (43). share
     * 300 -> p1 again: only shares there, free 500 -> 75 + 23 = 98 */
    c = cluster_p();
    ts_request s5 = req(1000, 1, 500, 0), s3 = req(1000, 1, 300, 0);
    assert_int_equal(place1("clustering", c, NULL, &s5, &a), 3);
    assert_int_equal(place1("clustering", c, NULL, &one, &a), 2);
    assert_int_equal(score1("clustering", c, NULL, 3, &s3, &a), 98);
    assert_int_equal(place1("clustering", c, NULL, &s3, &a), 3);
    ts_cluster_free(c);
}

/* ---- packing ----------------------------------------------------------- */

static void test_packing_scores(void **state)
{
    (void)state;
    /* 4 x T4 with GPU 0 free 190 and GPU 1 free 530; idle nodes of 8, 4, 2, 1 */
    ts_cluster *c = ts_cluster_new();
    add(c, "part", "T4", 4, 32000);
    add(c, "i8", "T4", 8, 32000);
    add(c, "i4", "T4", 4, 32000);
    add(c, "i2", "T4", 2, 32000);
    add(c, "i1", "T4", 1, 32000);
    const int g0[] = {0}, g1[] = {1};
    bind(c, 0, 1000, 1, 810, g0);
    bind(c, 0, 1000, 1, 470, g1);
    ts_alloc a;
    /* share 150: best fit GPU 0 (190): r = 19, 100 - 19/10 = 99 */
    ts_request s150 = req(1000, 1, 150, 0);
    assert_int_equal(score1("packing", c, NULL, 0, &s150, &a), 99);
    assert_int_equal(a.gpu[0], 0);
    /* share 200: GPU 1 (530): r = 53, 100 - 5 = 95 */
    ts_request s200 = req(1000, 1, 200, 0);
    assert_int_equal(score1("packing", c, NULL, 0, &s200, &a), 95);
    assert_int_equal(a.gpu[0], 1);
    /* share 600 needs a free GPU (2): one new GPU -> 50 - 1 = 49 */
    ts_request s600 = req(1000, 1, 600, 0);
    assert_int_equal(score1("packing", c, NULL, 0, &s600, &a), 49);
    assert_int_equal(a.gpu[0], 2);
    /* 2 x 1000 on the partly used node: 50 - 2 = 48 */
    ts_request two = req(1000, 2, 1000, 0);
    assert_int_equal(score1("packing", c, NULL, 0, &two, &a), 48);
    /* idle nodes: max(33 - n, n): 8 -> 25, 4 -> 29, 2 -> 31, 1 -> 32 */
    const int64_t idle[4] = {25, 29, 31, 32};
    for (int i = 0; i < 4; i++)
        assert_int_equal(score1("packing", c, NULL, 1 + i, &s200, &a), idle[i]);
    /* CPU-only: 0 */
    ts_request cpu = req(1000, 0, 0, 0);
    assert_int_equal(score1("packing", c, NULL, 0, &cpu, &a), 0);
    ts_cluster_free(c);
}

static void test_packing_place(void **state)
{
    (void)state;
    ts_cluster *c = cluster_p();
    const int g5[] = {5};
    bind(c, 0, 1000, 1, 300, g5); /* p8 GPU 5 free 700 */
    ts_alloc a;
    ts_request share = req(1000, 1, 500, 0);
    /* share on the partly used GPU before a free one: p8 GPU 5 (70 -> 93)
     * beats idle p4 29, p2 31, p1 32 */
    assert_int_equal(place1("packing", c, NULL, &share, &a), 0);
    assert_int_equal(a.gpu[0], 5);
    /* GPU 5 has 200 left: a new GPU on the used node (49) still beats idle
     * nodes; best fit among free GPUs -> GPU 0 */
    assert_int_equal(place1("packing", c, NULL, &share, &a), 0);
    assert_int_equal(a.gpu[0], 0);
    /* 2 x 1000: p8's lowest fully free GPUs 1, 2 (48) */
    ts_request two = req(1000, 2, 1000, 0);
    assert_int_equal(place1("packing", c, NULL, &two, &a), 0);
    assert_int_equal(a.gpu[0], 1);
    assert_int_equal(a.gpu[1], 2);
    /* CPU-only: 0 everywhere -> index 0 */
    ts_request cpu = req(1000, 0, 0, 0);
    assert_int_equal(place1("packing", c, NULL, &cpu, &a), 0);
    ts_cluster_free(c);

    /* idle P: smallest idle node first (p1 32), then p2 (31) for a share
     * that p1 cannot take any more */
    c = cluster_p();
    assert_int_equal(place1("packing", c, NULL, &share, &a), 3);
    ts_request s600 = req(1000, 1, 600, 0);
    assert_int_equal(place1("packing", c, NULL, &s600, &a), 2);
    ts_cluster_free(c);
}

/* ---- fgd --------------------------------------------------------------- */

static void test_fgd_node_choice(void **state)
{
    (void)state;
    typ_buf tb;
    const ts_typical *typ = fgd_typ(&tb); /* 0.5 share 500 + 0.5 one GPU */
    /* f0: 2 GPUs free {1000, 1000}; f1: {600, 1000}; f2: 1 GPU {500};
     * f3: 4 GPUs free. Request share 300.
     *  f0: F = 0; GPU 0 -> {700, 1000}: share 0, 1-GPU sliver 700 -> 350;
     *      delta -350 -> 100 sigmoid(-0.35) = 41.3 -> 41 (GPU 1 the same)
     *  f1: F = 0.5 x 600 = 300; GPU 0 -> {300, 1000}: 0.5x300 + 0.5x300 =
     *      300, delta 0 -> 50; GPU 1 -> {600, 700}: 1-GPU lacks -> 0.5 x
     *      1300 = 650, delta -350 -> 41. Best GPU 0, 50
     *  f2: F = 0.5 x 500 (no free GPU for 1-GPU) = 250; -> {200}: both lack
     *      -> 200; delta +50 -> 51.2 -> 51
     *  f3: as f0 -> 41
     * FGD goes to f2 (51), the only node where fragmentation drops. */
    ts_cluster *c = ts_cluster_new();
    add(c, "f0", "T4", 2, 32000);
    add(c, "f1", "T4", 2, 32000);
    add(c, "f2", "T4", 1, 32000);
    add(c, "f3", "T4", 4, 32000);
    const int g0[] = {0};
    bind(c, 1, 1000, 1, 400, g0);
    bind(c, 2, 1000, 1, 500, g0);
    ts_alloc a;
    ts_request share = req(1000, 1, 300, 0);
    const int64_t want[4] = {41, 50, 51, 41};
    for (int i = 0; i < 4; i++)
        assert_int_equal(score1("fgd", c, typ, i, &share, &a), want[i]);
    /* f0 and f3: every GPU scores 41; equal scores keep the lowest GPU */
    assert_int_equal(score1("fgd", c, typ, 0, &share, &a), 41);
    assert_int_equal(a.gpu[0], 0);
    assert_int_equal(score1("fgd", c, typ, 3, &share, &a), 41);
    assert_int_equal(a.gpu[0], 0);
    assert_int_equal(score1("fgd", c, typ, 1, &share, &a), 50);
    assert_int_equal(a.gpu[0], 0);
    assert_int_equal(place1("fgd", c, typ, &share, &a), 2);
    assert_int_equal(a.gpu[0], 0);
    assert_int_equal(c->nodes[2].gpu[0].milli_used, 800);
    /* 1 x 1000: f0 {1000,1000} -> {0,1000}: 0, delta 0 -> 50; f1 -> GPU 1:
     * {600, 0}: 0.5 x 600, before 300, delta 0 -> 50; f3 delta 0 -> 50; f2
     * cannot. All 50: the lowest index f0, lowest free GPU 0 */
    ts_request one = req(1000, 1, 1000, 0);
    assert_int_equal(place1("fgd", c, typ, &one, &a), 0);
    assert_int_equal(a.gpu[0], 0);
    ts_cluster_free(c);
}

static void test_fgd_truncation_tie(void **state)
{
    (void)state;
    typ_buf tb;
    const ts_typical *typ = fgd_typ(&tb);
    /* t0: 1 GPU free 600: F 300 -> {300}: 300, delta 0 -> 50
     * t1: 1 GPU free 540: F 270 -> {240}: 240, delta +30 -> 50.75 -> 50
     * t1 shrinks F more, but both truncate to 50: t0 (lower index) wins. */
    ts_cluster *c = ts_cluster_new();
    add(c, "t0", "T4", 1, 32000);
    add(c, "t1", "T4", 1, 32000);
    const int g0[] = {0};
    bind(c, 0, 1000, 1, 400, g0);
    bind(c, 1, 1000, 1, 460, g0);
    ts_request share = req(1000, 1, 300, 0);
    ts_frag_shape s;
    ts_frag_shape_of(&c->nodes[1], &s);
    double f_before = ts_frag_shape_amount(&s, typ);
    s.free[0] -= 300;
    assert_true(fabs(f_before - ts_frag_shape_amount(&s, typ) - 30.0) < 1e-9);
    ts_alloc a;
    assert_int_equal(score1("fgd", c, typ, 0, &share, &a), 50);
    assert_int_equal(score1("fgd", c, typ, 1, &share, &a), 50);
    assert_int_equal(place1("fgd", c, typ, &share, &a), 0);
    ts_cluster_free(c);
}

static void test_fgd_gpu_choice(void **state)
{
    (void)state;
    typ_buf tb;
    ts_request rs[1] = {req(1000, 1, 500, 0)};
    double p[1] = {1.0};
    const ts_typical *typ = typ_make(&tb, 1, rs, p);
    /* 2 x T4 free {550, 1000}; share 100. Against "share 500" alone:
     *   GPU 0 -> {450, 1000}: sliver 450, delta -450 -> 38.9 -> 38
     *   GPU 1 -> {550, 900}: no sliver, delta 0 -> 50
     * FGD keeps GPU 0 usable and takes GPU 1; best fit would take GPU 0. */
    ts_cluster *c = ts_cluster_new();
    add(c, "g", "T4", 2, 32000);
    const int g0[] = {0};
    bind(c, 0, 1000, 1, 450, g0);
    ts_cluster *c2 = ts_cluster_clone(c);
    assert_non_null(c2);
    ts_request share = req(1000, 1, 100, 0);
    ts_alloc a;
    assert_int_equal(score1("fgd", c, typ, 0, &share, &a), 50);
    assert_int_equal(a.gpu[0], 1);
    assert_int_equal(place1("fgd", c, typ, &share, &a), 0);
    assert_int_equal(a.gpu[0], 1);
    assert_int_equal(c->nodes[0].gpu[1].milli_used, 100);
    assert_int_equal(place1("bestfit", c2, typ, &share, &a), 0);
    assert_int_equal(a.gpu[0], 0);
    ts_cluster_free(c);
    ts_cluster_free(c2);
}

static void test_fgd_counts_cpu(void **state)
{
    (void)state;
    typ_buf tb;
    ts_request rs[1] = {req(4000, 1, 500, 0)};
    double p[1] = {1.0};
    const ts_typical *typ = typ_make(&tb, 1, rs, p);
    /* Against "share 500 with 4 cores": c0 is 1 x T4 with 8 cores, c1 is
     * 1 x T4 with 64 cores, both idle (F = 0). Share 300 with 6 cores:
     *   c0: 2 cores left < 4: the class lacks CPU -> U = 700; delta -700 ->
     *       100 sigmoid(-0.7) = 33.2 -> 33
     *   c1: fits, no sliver below 500 (700 left): delta 0 -> 50  => c1 */
    ts_cluster *c = ts_cluster_new();
    add(c, "c0", "T4", 1, 8000);
    add(c, "c1", "T4", 1, 64000);
    ts_alloc a;
    ts_request share = req(6000, 1, 300, 0);
    assert_int_equal(score1("fgd", c, typ, 0, &share, &a), 33);
    assert_int_equal(score1("fgd", c, typ, 1, &share, &a), 50);
    /* CPU-only 6 cores: c0 F 0 -> U 1000, delta -1000 -> 26.9 -> 26; c1 50 */
    ts_request cpu = req(6000, 0, 0, 0);
    assert_int_equal(score1("fgd", c, typ, 0, &cpu, &a), 26);
    assert_int_equal(score1("fgd", c, typ, 1, &cpu, &a), 50);
    assert_int_equal(place1("fgd", c, typ, &share, &a), 1);
    assert_int_equal(place1("fgd", c, typ, &cpu, &a), 1);
    ts_cluster_free(c);
}

static void test_fgd_needs_typical(void **state)
{
    (void)state;
    ts_cluster *c = cluster_p();
    ts_sched_env env = {.cluster = c};
    ts_err err;
    ts_err_clear(&err);
    assert_null(ts_placer_new(c, find("fgd"), &env, 0, 1, &err));
    assert_int_equal(err.code, TS_EINVAL);
    ts_cluster_free(c);
}

/* ---- GPU choice common to all policies --------------------------------- */

static void test_whole_gpu_lowest_index(void **state)
{
    (void)state;
    typ_buf tb;
    const ts_typical *typ = fgd_typ(&tb);
    for (int pi = 0; pi < NPOLICIES; pi++) {
        /* 5 x T4: GPU 0 has a share, GPU 2 a whole pod: free are 1, 3, 4 */
        ts_cluster *c = ts_cluster_new();
        add(c, "w", "T4", 5, 32000);
        const int g0[] = {0}, g2[] = {2};
        bind(c, 0, 1000, 1, 300, g0);
        bind(c, 0, 1000, 1, 1000, g2);
        ts_alloc a;
        ts_request two = req(1000, 2, 1000, 0);
        assert_int_equal(place1(POLICIES[pi], c, typ, &two, &a), 0);
        assert_int_equal(a.ngpu, 2);
        assert_int_equal(a.gpu[0], 1);
        assert_int_equal(a.gpu[1], 3);
        ts_request one = req(1000, 1, 1000, 0);
        assert_int_equal(place1(POLICIES[pi], c, typ, &one, &a), 0);
        assert_int_equal(a.gpu[0], 4);
        ts_cluster_free(c);
    }
}

static void test_share_best_fit(void **state)
{
    (void)state;
    static const char *const BEST_FIT[] = {"dotprod", "clustering", "packing", "bestfit"};
    for (int pi = 0; pi < 4; pi++) {
        /* 4 x T4 free {1000, 600, 400, 600} */
        ts_cluster *c = ts_cluster_new();
        add(c, "s", "T4", 4, 32000);
        const int g1[] = {1}, g2[] = {2}, g3[] = {3};
        bind(c, 0, 1000, 1, 400, g1);
        bind(c, 0, 1000, 1, 600, g2);
        bind(c, 0, 1000, 1, 400, g3);
        ts_alloc a;
        /* share 350: least sufficient free is GPU 2 (400) */
        ts_request s350 = req(1000, 1, 350, 0);
        assert_int_equal(place1(BEST_FIT[pi], c, NULL, &s350, &a), 0);
        assert_int_equal(a.gpu[0], 2);
        /* share 500: GPUs 1 and 3 tie at 600: the lower, GPU 1 */
        ts_request s500 = req(1000, 1, 500, 0);
        assert_int_equal(place1(BEST_FIT[pi], c, NULL, &s500, &a), 0);
        assert_int_equal(a.gpu[0], 1);
        ts_cluster_free(c);
    }
}

/* ---- random ------------------------------------------------------------ */

/* r0: 1 GPU with 500 left; r1: 4 free GPUs; r2: no GPUs; r3: 2 GPUs with
 * 700 and 300 left; r4: 8 free GPUs but 500 milli-cores left. A share of 600
 * with 1 core fits r1 (any GPU) and r3 (GPU 0) only. */
static ts_cluster *cluster_random(void)
{
    ts_cluster *c = ts_cluster_new();
    add(c, "r0", "T4", 1, 32000);
    add(c, "r1", "T4", 4, 32000);
    add(c, "r2", NULL, 0, 32000);
    add(c, "r3", "T4", 2, 32000);
    add(c, "r4", "T4", 8, 32000);
    const int g0[] = {0}, g1[] = {1};
    bind(c, 0, 1000, 1, 500, g0);
    bind(c, 3, 1000, 1, 300, g0);
    bind(c, 3, 1000, 1, 700, g1);
    bind(c, 4, 31500, 0, 0, NULL);
    return c;
}

/* RANDOM_DRAWS place-and-release rounds; records node*16+gpu per round. */
static void random_rounds(uint64_t seed, int *out)
{
    ts_cluster *c = cluster_random();
    ts_sched_env env = {.cluster = c};
    ts_placer *p = ts_placer_new(c, find("random"), &env, 4, seed, NULL);
    assert_non_null(p);
    ts_request share = req(1000, 1, 600, 0);
    for (int k = 0; k < RANDOM_DRAWS; k++) {
        ts_alloc a;
        int node = ts_placer_place(p, &share, 0, &a);
        assert_true(node == 1 || node == 3);
        assert_int_equal(a.ngpu, 1);
        if (node == 3)
            assert_int_equal(a.gpu[0], 0);
        else
            assert_true(a.gpu[0] >= 0 && a.gpu[0] < 4);
        out[k] = node * 16 + a.gpu[0];
        assert_int_equal(ts_placer_release(p, &a), 0);
    }
    ts_placer_free(p);
    ts_cluster_free(c);
}

static void test_random(void **state)
{
    (void)state;
    static int run1[RANDOM_DRAWS], run2[RANDOM_DRAWS], run3[RANDOM_DRAWS];
    random_rounds(42, run1);
    random_rounds(42, run2);
    random_rounds(43, run3);
    assert_memory_equal(run1, run2, sizeof run1);
    assert_memory_not_equal(run1, run3, sizeof run1);
    /* both feasible nodes and every GPU of r1 come up (expected 200 per node,
     * 50 per r1 GPU; the counts are fixed by the seed) */
    int per[5 * 16] = {0};
    for (int k = 0; k < RANDOM_DRAWS; k++)
        per[run1[k]]++;
    int on_r1 = per[16] + per[17] + per[18] + per[19];
    assert_true(on_r1 > RANDOM_DRAWS / 4 && on_r1 < 3 * RANDOM_DRAWS / 4);
    assert_int_equal(on_r1 + per[48], RANDOM_DRAWS);
    for (int g = 0; g < 4; g++)
        assert_true(per[16 + g] > 0);
}

/* ---- nothing fits ------------------------------------------------------ */

static void test_enospc_unchanged(void **state)
{
    (void)state;
    typ_buf tb;
    const ts_typical *typ = fgd_typ(&tb);
    uint32_t v16 = 1u << model_id("V100M16");
    const ts_request none[] = {
        req(1000, 16, 1000, 0),   /* more GPUs than any node */
        req(200000, 1, 500, 0),   /* more CPU than any node */
        req(1000, 1, 500, v16),   /* no V100M16 anywhere */
        req(1000, 8, 1000, 0),    /* p8 has a share on it */
        req(1000, 1, 900, 0),     /* every GPU has more than 100 used */
    };
    for (int pi = 0; pi < NPOLICIES; pi++) {
        ts_cluster *c = cluster_p();
        const int g3[] = {3};
        bind(c, 0, 1000, 1, 200, g3);
        for (int i = 0; i < c->nnodes; i++)
            for (int g = 0; g < c->nodes[i].ngpu; g++)
                if (c->nodes[i].gpu[g].milli_used < 200) {
                    const int gg[] = {g};
                    bind(c, i, 0, 1, 200, gg);
                }
        ts_cluster *before = ts_cluster_clone(c);
        assert_non_null(before);
        ts_sched_env env = {.cluster = c, .typical = typ};
        ts_placer *p = ts_placer_new(c, find(POLICIES[pi]), &env, 5, 9, NULL);
        assert_non_null(p);
        for (int k = 0; k < 5; k++) {
            ts_alloc a;
            assert_int_equal(ts_placer_place(p, &none[k], k, &a), TS_ENOSPC);
        }
        assert_memory_equal(c->nodes, before->nodes, (size_t)c->nnodes * sizeof *c->nodes);
        ts_placer_stats st;
        ts_placer_get_stats(p, &st);
        assert_int_equal(st.failed, 5);
        assert_int_equal(st.placed, 0);
        ts_placer_free(p);
        ts_cluster_free(before);
        ts_cluster_free(c);
    }
}

/* ---- random sequences: feasible, deterministic, cache-exact ------------ */

#define SEQ_NCLASSES 8

static ts_cluster *cluster_q(void)
{
    static const struct {
        const char *model;
        int ngpu;
        int64_t cpu;
    } nodes[] = {
        {"T4", 1, 8000},       {"T4", 2, 16000},      {"V100M16", 4, 32000},
        {"V100M32", 8, 64000}, {"A10", 8, 96000},     {NULL, 0, 48000},
        {"T4", 4, 24000},      {"V100M16", 8, 48000}, {"A10", 2, 12000},
        {"V100M32", 1, 16000}, {"T4", 8, 128000},     {"A10", 4, 20000},
    };
    ts_cluster *c = ts_cluster_new();
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        char name[16];
        snprintf(name, sizeof name, "q%zu", i);
        ts_node_spec s = {.name = name, .gpu_model = nodes[i].model, .ngpu = nodes[i].ngpu,
                          .cpu_milli = nodes[i].cpu, .mem_mib = 256000,
                          .gpu_mode = TS_GPU_SHARED};
        assert_int_equal(ts_cluster_add_node(c, &s, NULL), (int)i);
    }
    return c;
}

static void seq_classes(ts_request *cls)
{
    uint32_t v100 = (1u << model_id("V100M16")) | (1u << model_id("V100M32"));
    uint32_t t4 = 1u << model_id("T4");
    cls[0] = req(2000, 0, 0, 0);
    cls[1] = req(1000, 1, 250, 0);
    cls[2] = req(4000, 1, 500, 0);
    cls[3] = req(2000, 1, 700, v100);
    cls[4] = req(8000, 1, 1000, 0);
    cls[5] = req(8000, 2, 1000, t4);
    cls[6] = req(16000, 4, 1000, 0);
    cls[7] = req(32000, 8, 1000, 0);
    for (int k = 0; k < SEQ_NCLASSES; k++)
        cls[k].mem_mib = 2000 * (k + 1);
}

typedef struct seq_run {
    ts_cluster *c;
    ts_placer *p;
    ts_alloc live[SEQ_MAX_LIVE];
} seq_run;

static void assert_same_alloc(const ts_alloc *x, const ts_alloc *y)
{
    assert_int_equal(x->node, y->node);
    assert_int_equal(x->ngpu, y->ngpu);
    for (int k = 0; k < x->ngpu; k++)
        assert_int_equal(x->gpu[k], y->gpu[k]);
    assert_int_equal(x->gpu_milli, y->gpu_milli);
    assert_int_equal(x->cpu_milli, y->cpu_milli);
}

/* Runs three placers in lockstep on copies of cluster Q: [0] cached, [1]
 * uncached, [2] cached with the same seed again. Every decision must agree,
 * be feasible, and be ENOSPC exactly when no node fits. */
static void run_sequence(const char *policy, uint64_t seq_seed)
{
    ts_request cls[SEQ_NCLASSES];
    seq_classes(cls);
    int counts[SEQ_NCLASSES] = {30, 25, 20, 10, 8, 4, 2, 1};
    ts_workload w = {.specs = cls, .spec_count = counts, .nspecs = SEQ_NCLASSES};
    ts_typical typ;
    assert_int_equal(ts_typical_from_workload(&w, 0.95, &typ, NULL), 0);
    assert_true(typ.n >= 5);

    static seq_run run[3];
    ts_cluster *base = cluster_q();
    for (int k = 0; k < 3; k++) {
        run[k].c = ts_cluster_clone(base);
        assert_non_null(run[k].c);
        ts_sched_env env = {.cluster = run[k].c, .typical = &typ, .workload = &w};
        ts_err err;
        run[k].p = ts_placer_new(run[k].c, find(policy), &env, k == 1 ? 0 : SEQ_NCLASSES,
                                 1234, &err);
        assert_non_null(run[k].p);
    }
    ts_rng rng;
    ts_rng_seed(&rng, seq_seed);
    int nlive = 0, placed = 0, failed = 0, released = 0;
    for (int step = 0; step < SEQ_STEPS; step++) {
        bool release = nlive == SEQ_MAX_LIVE || (nlive > 0 && ts_rng_below(&rng, 100) < 35);
        if (release) {
            int k = (int)ts_rng_below(&rng, (uint64_t)nlive);
            for (int r = 0; r < 3; r++) {
                assert_int_equal(ts_placer_release(run[r].p, &run[r].live[k]), 0);
                run[r].live[k] = run[r].live[nlive - 1];
            }
            nlive--;
            released++;
            continue;
        }
        int ci = (int)ts_rng_below(&rng, SEQ_NCLASSES);
        const ts_request *q = &cls[ci];
        bool feasible[16] = {false};
        bool any = false;
        for (int i = 0; i < run[0].c->nnodes; i++)
            any |= feasible[i] = ts_node_fits(&run[0].c->nodes[i], q);
        ts_alloc a[3];
        int node[3];
        for (int r = 0; r < 3; r++)
            node[r] = ts_placer_place(run[r].p, q, ci, &a[r]);
        if (!any) {
            for (int r = 0; r < 3; r++)
                assert_int_equal(node[r], TS_ENOSPC);
            failed++;
            continue;
        }
        assert_true(node[0] >= 0 && feasible[node[0]]);
        assert_int_equal(node[1], node[0]);
        assert_int_equal(node[2], node[0]);
        assert_same_alloc(&a[1], &a[0]);
        assert_same_alloc(&a[2], &a[0]);
        /* the allocation is what was asked: right GPU count, distinct GPUs */
        assert_int_equal(a[0].ngpu, q->num_gpu);
        for (int x = 0; x < a[0].ngpu; x++)
            for (int y = x + 1; y < a[0].ngpu; y++)
                assert_int_not_equal(a[0].gpu[x], a[0].gpu[y]);
        for (int r = 0; r < 3; r++)
            run[r].live[nlive] = a[r];
        nlive++;
        placed++;
    }
    /* the sequence exercised both outcomes and releases */
    assert_true(placed > 500);
    assert_true(failed > 20);
    assert_true(released > 300);
    for (int i = 0; i < base->nnodes; i++)
        for (int g = 0; g < base->nodes[i].ngpu; g++)
            assert_int_equal(run[0].c->nodes[i].gpu[g].milli_used,
                             run[1].c->nodes[i].gpu[g].milli_used);
    ts_placer_stats st[3];
    for (int r = 0; r < 3; r++)
        ts_placer_get_stats(run[r].p, &st[r]);
    assert_int_equal(st[0].placed, (uint64_t)placed);
    assert_int_equal(st[0].failed, (uint64_t)failed);
    assert_int_equal(st[1].cache_hits, 0);
    if (find(policy)->cacheable) {
        /* the cache did serve, and saved work */
        assert_true(st[0].cache_hits > 1000);
        assert_true(st[0].scored < st[1].scored);
    }
    for (int r = 0; r < 3; r++) {
        ts_placer_free(run[r].p);
        ts_cluster_free(run[r].c);
    }
    ts_cluster_free(base);
    ts_typical_free(&typ);
}

static void test_sequences(void **state)
{
    (void)state;
    for (int pi = 0; pi < NPOLICIES; pi++) {
        run_sequence(POLICIES[pi], 11);
        run_sequence(POLICIES[pi], 977);
    }
}

/*
 * Regression: a scorer that chooses a share's GPU itself (fgd, random,
 * tessera) must ask whether that GPU has the GPU memory the request needs.
 * ts_node_fits admits the node because another GPU has the memory; choosing
 * by free milli alone bound 1000 MiB onto a T4 with 384 left (or, once assign
 * re-checked memory, failed with TS_ENOSPC although GPU 1 takes it). The
 * right answer is node 0, GPU 1, memory within 16384 MiB.
 */
static void test_share_respects_gpu_memory(void **state)
{
    (void)state;
    typ_buf tb;
    ts_request rs[1] = {req(1000, 1, 500, 0)};
    double p[1] = {1.0};
    const ts_typical *typ = typ_make(&tb, 1, rs, p);
    /* 2 x T4 (16384 MiB each): GPU 0 100 milli and 16000 MiB used, GPU 1 400
     * milli and no memory. Share 300 with 1000 MiB: only GPU 1 can take it.
     * fgd by milli: GPU 0 -> {600, 600}: delta 0 -> 50; GPU 1 -> {900, 300}:
     * sliver 300 -> 42; so fgd wants GPU 0. */
    char msg[256] = "";
    int bad = 0;
    static const char *const WHO[] = {"fgd", "random"};
    for (int pi = 0; pi < 2; pi++) {
        for (uint64_t seed = 1; seed <= 16; seed++) {
            ts_cluster *c = ts_cluster_new();
            add(c, "mem", "T4", 2, 32000);
            const int g0[] = {0}, g1[] = {1};
            bind_mem(c, 0, 1000, 1, 100, g0, 16000);
            bind(c, 0, 1000, 1, 400, g1);
            ts_request share = req(1000, 1, 300, 0);
            share.gpu_mem_mib = 1000;
            assert_true(ts_node_fits(&c->nodes[0], &share));
            ts_sched_env env = {.cluster = c, .typical = typ};
            ts_placer *pl = ts_placer_new(c, find(WHO[pi]), &env, 0, seed, NULL);
            assert_non_null(pl);
            ts_alloc a;
            int node = ts_placer_place(pl, &share, -1, &a);
            ts_placer_free(pl);
            int64_t used = c->nodes[0].gpu[0].mem_used_mib;
            ts_cluster_free(c);
            bool ok = node == 0 && a.gpu[0] == 1 && used <= T4_MEM_MIB;
            if (!ok && bad++ == 0)
                snprintf(msg, sizeof msg, "%s seed %llu: returned %d, GPU 0 holds %lld MiB of %d",
                         WHO[pi], (unsigned long long)seed, node, (long long)used,
                         T4_MEM_MIB);
        }
    }
    if (bad)
        fail_msg("%d of 32 placements went wrong; first: %s", bad, msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_dotprod_scores),
        cmocka_unit_test(test_bestfit_scores),
        cmocka_unit_test(test_dotprod_place),
        cmocka_unit_test(test_bestfit_place),
        cmocka_unit_test(test_clustering),
        cmocka_unit_test(test_packing_scores),
        cmocka_unit_test(test_packing_place),
        cmocka_unit_test(test_fgd_node_choice),
        cmocka_unit_test(test_fgd_truncation_tie),
        cmocka_unit_test(test_fgd_gpu_choice),
        cmocka_unit_test(test_fgd_counts_cpu),
        cmocka_unit_test(test_fgd_needs_typical),
        cmocka_unit_test(test_whole_gpu_lowest_index),
        cmocka_unit_test(test_share_best_fit),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_enospc_unchanged),
        cmocka_unit_test(test_sequences),
        cmocka_unit_test(test_share_respects_gpu_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
