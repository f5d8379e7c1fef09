/*
 * test_gang.c - gang placement (tessera/gang.h) on crafted clusters.
 *
 * The main cluster has two spines of two leaves each: l0 = three 8-GPU nodes,
 * l1 = two 8-GPU nodes, l2 = four 4-GPU nodes, l3 = two 4-GPU nodes sharing
 * one NVLink domain (64 GPUs). Each test fills nodes by hand so the expected
 * answer can be worked out on paper (in the comments): all or nothing (byte
 * compare of every node), smallest subtree, best-fit packing that keeps whole
 * nodes whole, among nodes with equal free GPUs the one whose fragmentation
 * measure grows least (with an expected workload), preferred level with
 * fallback, required level and the three
 * failure reasons, rail alignment, exact release, and a bounded random
 * sequence (fixed seed) after which every aggregate equals a recomputation
 * from the nodes and every placed gang respects its constraint.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "tessera/gang.h"
#include "tessera/load.h"
#include "tessera/rng.h"
#include "test_util.h"

static const char CLUSTER_YAML[] =
    "topology:\n"
    "  levels: [spine, leaf, nvlink, gpu]\n"
    "node_classes:\n"
    "  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 224000, memory_mib: 2097152}\n"
    "  g4: {gpu_model: H200-141GB, gpus: 4, cpu_milli: 96000, memory_mib: 983040}\n"
    "nodes:\n"
    "  - {names: 'a-[1-3]', class: g8, topology: {spine: s0, leaf: l0}}\n"
    "  - {names: 'b-[1-2]', class: g8, topology: {spine: s0, leaf: l1}}\n"
    "  - {names: 'c-[1-4]', class: g4, topology: {spine: s1, leaf: l2}}\n"
    "  - {names: 'd-[1-2]', class: g4, topology: {spine: s1, leaf: l3, nvlink: nvl-0}}\n";

enum { A1, A2, A3, B1, B2, C1, C2, C3, C4, D1, D2, NNODES };
#define TOTAL_GPUS 64
#define SPINE 0
#define LEAF 1
#define NVLINK 2
#define RANDOM_STEPS 400
#define RANDOM_SEED 20240611u

typedef struct fixture {
    ts_cluster *c;
    ts_gang_index *ix;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    ts_err err;
    if (!f || ts_load_cluster_yaml(CLUSTER_YAML, sizeof CLUSTER_YAML - 1, "gang.yaml", &f->c,
                                   &err) != 0)
        return -1;
    f->ix = ts_gang_index_new(f->c, &err);
    if (!f->ix || f->c->nnodes != NNODES)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ts_gang_index_free(f->ix);
    ts_cluster_free(f->c);
    free(f);
    return 0;
}

static ts_request whole(int k, int64_t cpu)
{
    ts_request r;
    memset(&r, 0, sizeof r);
    r.cpu_milli = cpu;
    r.mem_mib = 1024;
    r.num_gpu = k;
    r.gpu_milli = TS_MILLI_PER_GPU;
    r.mig_profile = -1;
    return r;
}

static int vertex(const ts_cluster *c, const char *spine, const char *leaf)
{
    const char *names[] = {spine, leaf};
    return ts_topo_find(c->topo, names, leaf ? 2 : 1);
}

/* Marks GPUs gpus[0..n-1] of node busy, as another job would. */
static void occupy(fixture *f, int node, const int *gpus, int n)
{
    ts_request r = whole(n, 0);
    ts_alloc a = ts_test_alloc(&r, node, gpus, n);
    assert_int_equal(ts_node_assign(&f->c->nodes[node], &r, &a), 0);
    ts_gang_index_node_changed(f->ix, node);
}

/* Marks every GPU of node that is still free busy. */
static void occupy_all(fixture *f, int node)
{
    int g[TS_NODE_MAX_GPUS], n = 0;
    for (int i = 0; i < f->c->nodes[node].ngpu; i++)
        if (f->c->nodes[node].gpu[i].ntasks == 0)
            g[n++] = i;
    if (n > 0)
        occupy(f, node, g, n);
}

static int place(fixture *f, ts_request *tasks, int n, int req, int pref, bool rail,
                 ts_alloc *out, ts_gang_result *res)
{
    ts_gang_spec sp = {tasks, n, req, pref, rail, NULL, NULL};
    ts_err err;
    return ts_gang_place(f->ix, &sp, out, res, &err);
}

static void fill(ts_request *t, int n, int k, int64_t cpu)
{
    for (int i = 0; i < n; i++)
        t[i] = whole(k, cpu);
}

/* ---- all or nothing ---------------------------------------------------- */

static void test_failed_gang_changes_nothing(void **state)
{
    fixture *f = *state;
    size_t bytes = (size_t)f->c->nnodes * sizeof(ts_node);
    ts_node *before = malloc(bytes);
    memcpy(before, f->c->nodes, bytes);
    ts_request t[17];
    ts_alloc out[17];
    ts_gang_result res;
    /* 4 tasks x 4 GPUs, 150 cores each: an 8-GPU node has CPU for one task
     * only, a 4-GPU node for none. l0 plans three tasks, then runs out. */
    fill(t, 4, 4, 150000);
    assert_int_equal(place(f, t, 4, LEAF, LEAF, false, out, &res), TS_ENOSPC);
    assert_int_equal(res.reason, TS_GANG_FRAGMENTATION);
    assert_non_null(strstr(res.why, "leaf l1 has 16 free GPUs")); /* smallest that holds 16 */
    assert_memory_equal(before, f->c->nodes, bytes);
    /* 17 x 4 = 68 > 64 */
    fill(t, 17, 4, 1000);
    assert_int_equal(place(f, t, 17, TS_GANG_LEVEL_ANY, TS_GANG_LEVEL_ANY, false, out, &res),
                     TS_ENOSPC);
    assert_int_equal(res.reason, TS_GANG_CAPACITY);
    assert_memory_equal(before, f->c->nodes, bytes);
    assert_int_equal(ts_gang_index_free_gpus(f->ix, -1), TOTAL_GPUS);
    /* the same 4 x 150-core gang fits across the spine s0 (five 8-GPU nodes) */
    fill(t, 4, 4, 150000);
    assert_int_equal(place(f, t, 4, SPINE, LEAF, false, out, &res), 0);
    assert_int_equal(res.level, SPINE);
    assert_int_equal(res.nodes, 4);
    free(before);
}

/* ---- choosing the subtree and packing in it ----------------------------- */

static void test_smallest_subtree(void **state)
{
    fixture *f = *state;
    ts_request t[4];
    ts_alloc out[4];
    ts_gang_result res;
    /* 2 x 4 GPUs: leaves have 24/16/16/8 free; l3 leaves nothing over */
    fill(t, 2, 4, 1000);
    assert_int_equal(place(f, t, 2, LEAF, LEAF, false, out, &res), 0);
    assert_int_equal(res.subtree, vertex(f->c, "s1", "l3"));
    assert_int_equal(out[0].node, D1);
    assert_int_equal(out[1].node, D2);
    /* 4 x 4 GPUs: l1 and l2 both leave 0 over; l1 has the lower index. */
    fill(t, 4, 4, 1000);
    assert_int_equal(place(f, t, 4, LEAF, LEAF, false, out, &res), 0);
    assert_int_equal(res.subtree, vertex(f->c, "s0", "l1"));
    int on_b1 = 0;
    for (int i = 0; i < 4; i++) {
        assert_true(out[i].node == B1 || out[i].node == B2);
        on_b1 += out[i].node == B1;
    }
    assert_int_equal(on_b1, 2);
    assert_int_equal(ts_gang_index_free_gpus(f->ix, vertex(f->c, "s0", "l1")), 0);
}

static void test_packing_keeps_whole_nodes(void **state)
{
    fixture *f = *state;
    /* l3: d-1 holds GPUs 0-1, so l3 has 6 free = need; best fit puts the
     * first 2-GPU task on d-1 (2 free), the other two on d-2. */
    occupy(f, D1, (int[]){0, 1}, 2);
    ts_request t[3];
    ts_alloc out[3];
    ts_gang_result res;
    fill(t, 3, 2, 1000);
    assert_int_equal(place(f, t, 3, LEAF, LEAF, false, out, &res), 0);
    assert_int_equal(res.subtree, vertex(f->c, "s1", "l3"));
    assert_int_equal(out[0].node, D1);
    assert_int_equal(out[0].gpu[0], 2);
    assert_int_equal(out[1].node, D2);
    assert_int_equal(out[2].node, D2);
    /* Only l0 left: a-1 has 2 free, a-2 has 4, a-3 is whole. 3 x 2 GPUs
     * go to a-1 (one) and a-2 (two); a-3 stays whole. */
    for (int n = B1; n <= C4; n++)
        occupy_all(f, n);
    occupy(f, A1, (int[]){0, 1, 2, 3, 4, 5}, 6);
    occupy(f, A2, (int[]){0, 1, 2, 3}, 4);
    int l0 = vertex(f->c, "s0", "l0");
    assert_int_equal(ts_gang_index_free_nodes(f->ix, l0), 1);
    assert_int_equal(place(f, t, 3, LEAF, LEAF, false, out, &res), 0);
    assert_int_equal(out[0].node, A1);
    assert_int_equal(out[1].node, A2);
    assert_int_equal(out[2].node, A2);
    assert_int_equal(ts_gang_index_free_nodes(f->ix, l0), 1);
    assert_int_equal(ts_gang_index_node_free(f->ix, A3), 8);
}

static void test_equal_free_by_fragmentation(void **state)
{
    fixture *f = *state;
    /* Only l1 has room: b-1 and b-2 have 4 free GPUs each; b-1 has 224 cores
     * left, b-2 only 24 (a 4-GPU job there holds 200). The expected workload
     * is 1-GPU pods of 16 cores. On b-2 three of the four free GPUs are
     * stranded by CPU (24 cores: one such pod); a 1-GPU task of 8 cores there
     * leaves 3 GPUs and 16 cores, one pod, 2 stranded: the measure drops by
     * 1000, where on b-1 it stays 0. So with the workload both tasks go to
     * b-2 (which then has 2 GPUs and 8 cores left, b-1 stays at 4 free with
     * its cores); by node order alone (no workload) they go to b-1. */
    for (int n = A1; n <= A3; n++)
        occupy_all(f, n);
    for (int n = C1; n <= D2; n++)
        occupy_all(f, n);
    occupy(f, B1, (int[]){0, 1, 2, 3}, 4);
    ts_request big = whole(4, 200000);
    ts_alloc ba = ts_test_alloc(&big, B2, (int[]){0, 1, 2, 3}, 4);
    assert_int_equal(ts_node_assign(&f->c->nodes[B2], &big, &ba), 0);
    ts_gang_index_node_changed(f->ix, B2);
    ts_request cls = whole(1, 16000);
    double p = 1.0;
    int64_t count = 1;
    ts_typical typ = {.n = 1, .req = &cls, .p = &p, .count = &count};
    ts_request t[2];
    ts_alloc out[2];
    ts_gang_result res;
    ts_err err;
    fill(t, 2, 1, 8000);
    ts_gang_spec sp = {t, 2, LEAF, LEAF, false, &typ, NULL};
    assert_int_equal(ts_gang_place(f->ix, &sp, out, &res, &err), 0);
    assert_int_equal(out[0].node, B2);
    assert_int_equal(out[1].node, B2);
    assert_int_equal(ts_gang_release(f->ix, t, out, 2, &err), 0);
    assert_int_equal(place(f, t, 2, LEAF, LEAF, false, out, &res), 0);
    assert_int_equal(out[0].node, B1);
    assert_int_equal(out[1].node, B1);
}

/* ---- levels ------------------------------------------------------------ */

static void test_preferred_level_with_fallback(void **state)
{
    fixture *f = *state;
    ts_request t[3];
    ts_alloc out[3];
    ts_gang_result res;
    /* 3 x 4 = 12 GPUs: no NVLink domain holds 12 (at most 8), so the
     * preferred nvlink level falls back to leaf: l1 (16) leaves least over. */
    fill(t, 3, 4, 1000);
    assert_int_equal(place(f, t, 3, SPINE, NVLINK, false, out, &res), 0);
    assert_int_equal(res.level, LEAF);
    assert_int_equal(res.subtree, vertex(f->c, "s0", "l1"));
    /* With every 8-GPU node busy, 2 x 4 GPUs preferring one NVLink domain
     * land in nvl-0, the domain spanning d-1 and d-2. */
    for (int n = A1; n <= B2; n++)
        occupy_all(f, n);
    fill(t, 2, 4, 1000);
    assert_int_equal(place(f, t, 2, LEAF, NVLINK, false, out, &res), 0);
    assert_int_equal(res.level, NVLINK);
    assert_string_equal(ts_topo_name(f->c->topo, res.subtree), "nvl-0");
    assert_int_equal(out[0].node, D1);
    assert_int_equal(out[1].node, D2);
    assert_int_equal(res.nodes, 2);
}

static void test_required_level_enforced(void **state)
{
    fixture *f = *state;
    ts_request t[8];
    ts_alloc out[8];
    ts_gang_result res;
    /* 7 x 4 = 28 GPUs: 64 free, but the largest leaf (l0) has 24 */
    fill(t, 7, 4, 1000);
    assert_int_equal(place(f, t, 7, LEAF, LEAF, false, out, &res), TS_ENOSPC);
    assert_int_equal(res.reason, TS_GANG_TOPOLOGY);
    assert_string_equal(ts_gang_reason_name(res.reason), "topology");
    assert_non_null(strstr(res.why, "within one leaf"));
    assert_non_null(strstr(res.why, "24 (l0)"));
    /* 3 x 4 = 12 GPUs within one node: nodes have at most 8 */
    assert_int_equal(place(f, t, 3, TS_GANG_LEVEL_NODE, TS_GANG_LEVEL_NODE, false, out, &res),
                     TS_ENOSPC);
    assert_int_equal(res.reason, TS_GANG_TOPOLOGY);
    /* within one spine it fits: s0 has 40 */
    assert_int_equal(place(f, t, 7, SPINE, LEAF, false, out, &res), 0);
    assert_int_equal(res.level, SPINE);
    assert_int_equal(res.subtree, vertex(f->c, "s0", NULL));
    for (int i = 0; i < 7; i++)
        assert_int_equal(ts_topo_ancestor(f->c->topo, f->c->nodes[out[i].node].topo_vertex, 0),
                         res.subtree);
    /* 2 x 4 within one node: the lowest-index node with exactly 8 free */
    assert_int_equal(place(f, t, 2, TS_GANG_LEVEL_NODE, TS_GANG_LEVEL_NODE, false, out, &res),
                     0);
    assert_int_equal(out[0].node, out[1].node);
    assert_int_equal(res.subtree, out[0].node);
}

/* ---- rail alignment ---------------------------------------------------- */

static void test_rail_alignment(void **state)
{
    fixture *f = *state;
    /* Only l0 has room: a-1 free {4..7}, a-2 free {0,1,6,7}, a-3 whole. */
    for (int n = B1; n <= D2; n++)
        occupy_all(f, n);
    occupy(f, A1, (int[]){0, 1, 2, 3}, 4);
    occupy(f, A2, (int[]){2, 3, 4, 5}, 4);
    ts_request t[2];
    ts_alloc out[2];
    ts_gang_result res;
    fill(t, 2, 4, 1000);
    /* unaligned: best fit takes a-1 and a-2 */
    assert_int_equal(place(f, t, 2, LEAF, LEAF, false, out, &res), 0);
    assert_int_equal(out[0].node, A1);
    assert_int_equal(out[1].node, A2);
    ts_err err;
    assert_int_equal(ts_gang_release(f->ix, t, out, 2, &err), 0);
    /* aligned: rank 1 must use GPUs 4-7 like rank 0 on a-1, so a-3 */
    assert_int_equal(place(f, t, 2, LEAF, LEAF, true, out, &res), 0);
    assert_int_equal(out[0].node, A1);
    assert_int_equal(out[1].node, A3);
    assert_memory_equal(out[0].gpu, out[1].gpu, 4);
    assert_int_equal(out[1].gpu[0], 4);
    assert_int_equal(ts_gang_release(f->ix, t, out, 2, &err), 0);
    /* with a-3 gone, 8 free GPUs in l0 cannot be aligned */
    occupy_all(f, A3);
    assert_int_equal(place(f, t, 2, LEAF, LEAF, true, out, &res), TS_ENOSPC);
    assert_int_equal(res.reason, TS_GANG_FRAGMENTATION);
    assert_non_null(strstr(res.why, "rail-aligned"));
    assert_int_equal(place(f, t, 2, LEAF, LEAF, false, out, &res), 0);
}

static void test_rail_several_tasks_per_node(void **state)
{
    fixture *f = *state;
    /* 4 x 4 GPUs on l1 (two whole 8-GPU nodes): the k-th task on each node
     * takes the same GPUs, {0..3} then {4..7}. */
    ts_request t[4];
    ts_alloc out[4];
    ts_gang_result res;
    fill(t, 4, 4, 1000);
    occupy_all(f, D1);
    occupy_all(f, D2);
    for (int n = C1; n <= C4; n++)
        occupy_all(f, n);
    occupy(f, A1, (int[]){0}, 1);
    assert_int_equal(place(f, t, 4, LEAF, LEAF, true, out, &res), 0);
    assert_int_equal(res.subtree, vertex(f->c, "s0", "l1"));
    assert_int_equal(out[0].node, B1);
    assert_int_equal(out[1].node, B1);
    assert_int_equal(out[2].node, B2);
    assert_int_equal(out[3].node, B2);
    assert_memory_equal(out[0].gpu, out[2].gpu, 4);
    assert_memory_equal(out[1].gpu, out[3].gpu, 4);
}

/* ---- release ----------------------------------------------------------- */

static void zero_versions(ts_node *n, int count)
{
    for (int i = 0; i < count; i++)
        n[i].version = 0;
}

static void test_release_is_exact(void **state)
{
    fixture *f = *state;
    occupy(f, A2, (int[]){1, 5}, 2);
    size_t bytes = (size_t)f->c->nnodes * sizeof(ts_node);
    ts_node *before = malloc(bytes), *after = malloc(bytes);
    memcpy(before, f->c->nodes, bytes);
    int64_t free_before = ts_gang_index_free_gpus(f->ix, -1);
    ts_request t[5];
    ts_alloc out[5];
    ts_gang_result res;
    fill(t, 5, 3, 7000);
    t[4] = whole(1, 3000);
    assert_int_equal(place(f, t, 5, SPINE, LEAF, false, out, &res), 0);
    assert_int_equal(ts_gang_index_free_gpus(f->ix, -1), free_before - 13);
    ts_err err;
    assert_int_equal(ts_gang_release(f->ix, t, out, 5, &err), 0);
    memcpy(after, f->c->nodes, bytes);
    zero_versions(before, f->c->nnodes);
    zero_versions(after, f->c->nnodes);
    assert_memory_equal(before, after, bytes);
    assert_int_equal(ts_gang_index_free_gpus(f->ix, -1), free_before);
    free(before);
    free(after);
}

static void test_bad_specs(void **state)
{
    fixture *f = *state;
    ts_request t[2];
    ts_alloc out[2];
    ts_err err;
    fill(t, 2, 1, 1000);
    t[1].gpu_milli = 500;
    ts_gang_spec sp = {t, 2, LEAF, LEAF, false, NULL, NULL};
    assert_int_equal(ts_gang_place(f->ix, &sp, out, NULL, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "tasks[1]"));
    fill(t, 2, 1, 1000);
    sp = (ts_gang_spec){t, 2, LEAF, TS_GANG_LEVEL_ANY, false, NULL, NULL};
    assert_int_equal(ts_gang_place(f->ix, &sp, out, NULL, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "preferred_level"));
    t[1].num_gpu = 2;
    sp = (ts_gang_spec){t, 2, LEAF, LEAF, true, NULL, NULL};
    assert_int_equal(ts_gang_place(f->ix, &sp, out, NULL, &err), TS_EINVAL);
    assert_int_equal(ts_gang_level_parse(f->c, "leaf", &err), LEAF);
    assert_int_equal(ts_gang_level_parse(f->c, "node", &err), TS_GANG_LEVEL_NODE);
    assert_int_equal(ts_gang_level_parse(f->c, "any", &err), TS_GANG_LEVEL_ANY);
    assert_int_equal(ts_gang_level_parse(f->c, "gpu", &err), TS_EINVAL);
    assert_int_equal(ts_gang_level_parse(f->c, "rack", &err), TS_EINVAL);
}

static void test_cluster_without_topology(void **state)
{
    (void)state;
    static const char yaml[] =
        "node_classes:\n"
        "  g4: {gpu_model: T4, gpus: 4, cpu_milli: 48000, memory_mib: 196608}\n"
        "nodes:\n"
        "  - {names: 'n-[1-3]', class: g4}\n";
    ts_cluster *c;
    ts_err err;
    assert_int_equal(ts_load_cluster_yaml(yaml, sizeof yaml - 1, "flat.yaml", &c, &err), 0);
    ts_gang_index *ix = ts_gang_index_new(c, &err);
    assert_non_null(ix);
    assert_int_equal(ts_gang_level_parse(c, "leaf", &err), TS_EINVAL);
    ts_request t[3];
    ts_alloc out[3];
    ts_gang_result res;
    fill(t, 3, 2, 1000);
    ts_gang_spec sp = {t, 3, TS_GANG_LEVEL_ANY, TS_GANG_LEVEL_NODE, false, NULL, NULL};
    assert_int_equal(ts_gang_place(ix, &sp, out, &res, &err), 0);
    assert_int_equal(res.level, TS_GANG_LEVEL_ANY); /* 6 GPUs: no node has them */
    assert_int_equal(ts_gang_index_free_gpus(ix, -1), 6);
    assert_int_equal(ts_gang_index_free_nodes(ix, -1), 1);
    ts_gang_index_free(ix);
    ts_cluster_free(c);
}

/* ---- random sequence: aggregates and constraints ------------------------ */

static void check_aggregates(const fixture *f)
{
    const ts_cluster *c = f->c;
    int nv = ts_topo_nvertices(c->topo);
    int64_t *fr = calloc((size_t)nv, sizeof *fr), *full = calloc((size_t)nv, sizeof *full);
    int64_t all = 0, all_full = 0;
    for (int i = 0; i < c->nnodes; i++) {
        const ts_node *n = &c->nodes[i];
        int fg = 0;
        for (int g = 0; g < n->ngpu; g++)
            fg += n->gpu[g].ntasks == 0;
        assert_int_equal(ts_gang_index_node_free(f->ix, i), fg);
        all += fg;
        all_full += fg == n->ngpu;
        for (int d = 0; d <= NVLINK; d++) {
            int v = ts_topo_ancestor(c->topo, n->topo_vertex, d);
            fr[v] += fg;
            full[v] += fg == n->ngpu;
        }
    }
    assert_int_equal(ts_gang_index_free_gpus(f->ix, -1), all);
    assert_int_equal(ts_gang_index_free_nodes(f->ix, -1), all_full);
    for (int v = 0; v < nv; v++) {
        if (ts_topo_depth(c->topo, v) > NVLINK)
            continue;
        assert_int_equal(ts_gang_index_free_gpus(f->ix, v), fr[v]);
        assert_int_equal(ts_gang_index_free_nodes(f->ix, v), full[v]);
    }
    free(fr);
    free(full);
}

static void check_constraint(const fixture *f, const ts_gang_spec *sp, const ts_alloc *a)
{
    const ts_cluster *c = f->c;
    for (int i = 1; i < sp->ntasks; i++) {
        if (sp->required_level == TS_GANG_LEVEL_NODE)
            assert_int_equal(a[i].node, a[0].node);
        else if (sp->required_level >= 0)
            assert_int_equal(
                ts_topo_ancestor(c->topo, c->nodes[a[i].node].topo_vertex, sp->required_level),
                ts_topo_ancestor(c->topo, c->nodes[a[0].node].topo_vertex, sp->required_level));
    }
    if (!sp->rail_aligned)
        return;
    /* the k-th task on a node uses the same GPUs as the k-th task elsewhere */
    int seen[NNODES] = {0}, first_k[TS_NODE_MAX_GPUS];
    for (int k = 0; k < TS_NODE_MAX_GPUS; k++)
        first_k[k] = -1;
    for (int i = 0; i < sp->ntasks; i++) {
        int k = seen[a[i].node]++;
        if (first_k[k] < 0)
            first_k[k] = i;
        else
            assert_memory_equal(a[i].gpu, a[first_k[k]].gpu, (size_t)a[i].ngpu);
    }
}

#define MAX_LIVE 32
#define MAX_GANG 8

typedef struct live_gang {
    ts_request t[MAX_GANG];
    ts_alloc a[MAX_GANG];
    int n;
} live_gang;

static void test_random_sequence_keeps_aggregates(void **state)
{
    fixture *f = *state;
    static const int sizes[] = {1, 2, 4, 8};
    static const int levels[] = {TS_GANG_LEVEL_NODE, NVLINK, LEAF, SPINE, TS_GANG_LEVEL_ANY};
    live_gang *live = calloc(MAX_LIVE, sizeof *live);
    int nlive = 0, placed = 0, failed = 0;
    size_t bytes = (size_t)f->c->nnodes * sizeof(ts_node);
    ts_node *before = malloc(bytes);
    ts_rng rng;
    ts_rng_seed(&rng, RANDOM_SEED);
    for (int step = 0; step < RANDOM_STEPS; step++) {
        bool add = nlive == 0 || (nlive < MAX_LIVE && ts_rng_below(&rng, 10) < 6);
        ts_err err;
        if (add) {
            live_gang *g = &live[nlive];
            g->n = 1 + (int)ts_rng_below(&rng, MAX_GANG);
            int k = sizes[ts_rng_below(&rng, 4)];
            bool mixed = ts_rng_below(&rng, 4) == 0;
            for (int i = 0; i < g->n; i++)
                g->t[i] = whole(mixed ? sizes[ts_rng_below(&rng, 3)] : k, 1000);
            int ri = 1 + (int)ts_rng_below(&rng, 4);
            int pi = (int)ts_rng_below(&rng, (uint64_t)ri + 1);
            ts_gang_spec sp = {g->t, g->n, levels[ri], levels[pi],
                               !mixed && ts_rng_below(&rng, 2) == 0, NULL, NULL};
            ts_gang_result res;
            memcpy(before, f->c->nodes, bytes);
            int rc = ts_gang_place(f->ix, &sp, g->a, &res, &err);
            if (rc == 0) {
                check_constraint(f, &sp, g->a);
                nlive++;
                placed++;
            } else {
                assert_int_equal(rc, TS_ENOSPC);
                assert_true(res.reason >= TS_GANG_CAPACITY);
                assert_memory_equal(before, f->c->nodes, bytes);
                failed++;
            }
        } else {
            int j = (int)ts_rng_below(&rng, (uint64_t)nlive);
            assert_int_equal(ts_gang_release(f->ix, live[j].t, live[j].a, live[j].n, &err), 0);
            live[j] = live[--nlive];
        }
        check_aggregates(f);
    }
    assert_true(placed > 50 && failed > 10);
    while (nlive > 0) {
        ts_err err;
        nlive--;
        assert_int_equal(ts_gang_release(f->ix, live[nlive].t, live[nlive].a, live[nlive].n,
                                         &err), 0);
    }
    check_aggregates(f);
    assert_int_equal(ts_gang_index_free_gpus(f->ix, -1), TOTAL_GPUS);
    assert_int_equal(ts_gang_index_free_nodes(f->ix, -1), NNODES);
    free(before);
    free(live);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_failed_gang_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_smallest_subtree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_packing_keeps_whole_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_equal_free_by_fragmentation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preferred_level_with_fallback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_required_level_enforced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rail_alignment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rail_several_tasks_per_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_release_is_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_specs, setup, teardown),
        cmocka_unit_test(test_cluster_without_topology),
        cmocka_unit_test_setup_teardown(test_random_sequence_keeps_aggregates, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
