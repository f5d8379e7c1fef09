/*
 * test_topology.c - the topology tree: vertices made on first mention of a
 * path, parents and depths, distances between GPUs at every level (same GPU,
 * NVLink domain, leaf, spine, across spines), an NVLink domain shared by two
 * nodes, lookup without creation, cloning, and growth to many vertices (the
 * child index rehashes). Bad levels and paths must fail with a message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "tessera/topology.h"

static const char *const LEVELS[] = {"spine", "leaf", "nvlink", "gpu"};

static int gpu(ts_topo *t, const char *spine, const char *leaf, const char *nvl,
               const char *g)
{
    const char *p[] = {spine, leaf, nvl, g};
    int v = ts_topo_path(t, p, 4, NULL);
    assert_true(v >= 0);
    return v;
}

static void test_levels(void **state)
{
    (void)state;
    ts_err err;
    ts_topo *t = ts_topo_new(LEVELS, 4, &err);
    assert_non_null(t);
    assert_int_equal(ts_topo_nlevels(t), 4);
    assert_string_equal(ts_topo_level_name(t, 0), "spine");
    assert_string_equal(ts_topo_level_name(t, 3), "gpu");
    assert_null(ts_topo_level_name(t, 4));
    assert_int_equal(ts_topo_level_index(t, "nvlink"), 2);
    assert_int_equal(ts_topo_level_index(t, "rack"), -1);
    assert_int_equal(ts_topo_nvertices(t), 0);
    ts_topo_free(t);
    ts_topo_free(NULL);
}

static void test_bad_levels(void **state)
{
    (void)state;
    ts_err err;
    assert_null(ts_topo_new(LEVELS, 1, &err));
    assert_int_equal(err.code, TS_EINVAL);
    assert_non_null(strstr(err.msg, "2..8"));
    const char *nine[9] = {"a", "b", "c", "d", "e", "f", "g", "h", "gpu"};
    assert_null(ts_topo_new(nine, 9, &err));
    const char *dup[] = {"leaf", "leaf", "gpu"};
    assert_null(ts_topo_new(dup, 3, &err));
    assert_non_null(strstr(err.msg, "\"leaf\" named twice"));
    const char *empty[] = {"leaf", "", "gpu"};
    assert_null(ts_topo_new(empty, 3, &err));
    assert_non_null(strstr(err.msg, "empty"));
    assert_null(ts_topo_new(dup, 3, NULL)); /* NULL err is allowed */
}

static void test_path_creates_once(void **state)
{
    (void)state;
    ts_topo *t = ts_topo_new(LEVELS, 4, NULL);
    int g0 = gpu(t, "s0", "l0", "n1", "n1/gpu0");
    assert_int_equal(ts_topo_nvertices(t), 4);
    assert_int_equal(gpu(t, "s0", "l0", "n1", "n1/gpu0"), g0);
    assert_int_equal(ts_topo_nvertices(t), 4);
    int g1 = gpu(t, "s0", "l0", "n1", "n1/gpu1");
    assert_int_equal(ts_topo_nvertices(t), 5);
    assert_int_equal(ts_topo_depth(t, g0), 3);
    int nv = ts_topo_parent(t, g0);
    assert_int_equal(ts_topo_parent(t, g1), nv);
    assert_string_equal(ts_topo_name(t, nv), "n1");
    assert_int_equal(ts_topo_depth(t, nv), 2);
    int spine = ts_topo_parent(t, ts_topo_parent(t, nv));
    assert_string_equal(ts_topo_name(t, spine), "s0");
    assert_int_equal(ts_topo_parent(t, spine), -1);
    assert_int_equal(ts_topo_depth(t, spine), 0);
    /* a prefix path names the inner vertex */
    const char *p[] = {"s0", "l0", "n1"};
    assert_int_equal(ts_topo_path(t, p, 3, NULL), nv);
    /* the same name under another parent is another vertex */
    int other = gpu(t, "s0", "l1", "n1", "n1/gpu0");
    assert_int_not_equal(other, g0);
    assert_int_equal(ts_topo_parent(t, -1), -1);
    assert_null(ts_topo_name(t, 999));
    ts_topo_free(t);
}

static void test_distances(void **state)
{
    (void)state;
    ts_topo *t = ts_topo_new(LEVELS, 4, NULL);
    int a0 = gpu(t, "s0", "l0", "a", "a/gpu0");
    int a1 = gpu(t, "s0", "l0", "a", "a/gpu1");
    int b0 = gpu(t, "s0", "l0", "b", "b/gpu0");
    int c0 = gpu(t, "s0", "l1", "c", "c/gpu0");
    int d0 = gpu(t, "s1", "l0", "d", "d/gpu0");
    assert_int_equal(ts_topo_distance(t, a0, a0), 0);
    assert_int_equal(ts_topo_distance(t, a0, a1), 1); /* same node */
    assert_int_equal(ts_topo_distance(t, a0, b0), 2); /* same leaf */
    assert_int_equal(ts_topo_distance(t, b0, c0), 3); /* same spine */
    assert_int_equal(ts_topo_distance(t, a0, d0), 4); /* across spines */
    assert_int_equal(ts_topo_distance(t, d0, a0), 4); /* symmetric */
    assert_int_equal(ts_topo_distance(t, c0, b0), 3);
    /* inner vertices count from the deeper one's level */
    int na = ts_topo_parent(t, a0), nb = ts_topo_parent(t, b0);
    assert_int_equal(ts_topo_distance(t, na, nb), 1);
    assert_int_equal(ts_topo_distance(t, na, a0), 1);
    assert_int_equal(ts_topo_distance(t, na, c0), 3);
    assert_true(ts_topo_distance(t, a0, 12345) < 0);
    ts_topo_free(t);
}

/* NVL72-style rack: two nodes' GPUs under one NVLink vertex are at distance 1. */
static void test_shared_nvlink_domain(void **state)
{
    (void)state;
    ts_topo *t = ts_topo_new(LEVELS, 4, NULL);
    int x = gpu(t, "s0", "l0", "rack1", "n1/gpu3");
    int y = gpu(t, "s0", "l0", "rack1", "n2/gpu0");
    int z = gpu(t, "s0", "l0", "n3", "n3/gpu0");
    assert_int_equal(ts_topo_distance(t, x, y), 1);
    assert_int_equal(ts_topo_distance(t, x, z), 2);
    assert_int_equal(ts_topo_parent(t, x), ts_topo_parent(t, y));
    ts_topo_free(t);
}

static void test_find_and_ancestor(void **state)
{
    (void)state;
    ts_topo *t = ts_topo_new(LEVELS, 4, NULL);
    int g = gpu(t, "s0", "l0", "a", "a/gpu0");
    const char *p[] = {"s0", "l0", "a", "a/gpu0"};
    assert_int_equal(ts_topo_find(t, p, 4), g);
    const char *q[] = {"s0", "l9"};
    assert_int_equal(ts_topo_find(t, q, 2), TS_ENOENT);
    assert_int_equal(ts_topo_nvertices(t), 4); /* find does not create */
    int leaf = ts_topo_find(t, p, 2);
    assert_int_equal(ts_topo_ancestor(t, g, 1), leaf);
    assert_int_equal(ts_topo_ancestor(t, g, 3), g);
    assert_int_equal(ts_topo_ancestor(t, leaf, 2), -1);
    ts_topo_free(t);
}

static void test_bad_paths(void **state)
{
    (void)state;
    ts_err err;
    ts_topo *t = ts_topo_new(LEVELS, 4, NULL);
    const char *five[] = {"a", "b", "c", "d", "e"};
    assert_int_equal(ts_topo_path(t, five, 5, &err), TS_EINVAL);
    assert_int_equal(ts_topo_path(t, five, 0, &err), TS_EINVAL);
    const char *empty[] = {"s0", ""};
    assert_int_equal(ts_topo_path(t, empty, 2, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "leaf"));
    char longname[TS_TOPO_NAME_MAX + 1];
    memset(longname, 'x', TS_TOPO_NAME_MAX);
    longname[TS_TOPO_NAME_MAX] = '\0';
    const char *lp[] = {longname};
    assert_int_equal(ts_topo_path(t, lp, 1, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "longer than"));
    assert_int_equal(ts_topo_nvertices(t), 0);
    ts_topo_free(t);
}

static void test_clone_is_independent(void **state)
{
    (void)state;
    ts_topo *t = ts_topo_new(LEVELS, 4, NULL);
    int a = gpu(t, "s0", "l0", "a", "a/gpu0");
    int b = gpu(t, "s1", "l0", "b", "b/gpu0");
    ts_topo *c = ts_topo_clone(t);
    assert_non_null(c);
    assert_int_equal(ts_topo_distance(c, a, b), 4);
    assert_string_equal(ts_topo_name(c, a), "a/gpu0");
    int n = gpu(c, "s0", "l0", "a", "a/gpu1");
    assert_int_equal(ts_topo_nvertices(c), ts_topo_nvertices(t) + 1);
    assert_int_equal(ts_topo_distance(c, a, n), 1);
    assert_int_equal(gpu(c, "s1", "l0", "b", "b/gpu0"), b); /* lookups work in the copy */
    ts_topo_free(t);
    ts_topo_free(c);
    assert_null(ts_topo_clone(NULL));
}

/* 2 spines x 8 leaves x 64 nodes x 8 GPUs: ids stay stable across growth and
 * every lookup finds the vertex made first. */
static void test_many_vertices(void **state)
{
    (void)state;
    ts_topo *t = ts_topo_new(LEVELS, 4, NULL);
    static int ids[2][8][64][8];
    char s[16], l[16], n[16], g[32];
    for (int pass = 0; pass < 2; pass++)
        for (int si = 0; si < 2; si++)
            for (int li = 0; li < 8; li++)
                for (int ni = 0; ni < 64; ni++)
                    for (int gi = 0; gi < 8; gi++) {
                        snprintf(s, sizeof s, "s%d", si);
                        snprintf(l, sizeof l, "l%d", li);
                        snprintf(n, sizeof n, "n%d-%d", li, ni);
                        snprintf(g, sizeof g, "%s/gpu%d", n, gi);
                        int v = gpu(t, s, l, n, g);
                        if (pass == 0)
                            ids[si][li][ni][gi] = v;
                        else
                            assert_int_equal(v, ids[si][li][ni][gi]);
                    }
    assert_int_equal(ts_topo_nvertices(t), 2 + 16 + 2 * 8 * 64 + 2 * 8 * 64 * 8);
    assert_int_equal(ts_topo_distance(t, ids[0][3][5][1], ids[0][3][5][7]), 1);
    assert_int_equal(ts_topo_distance(t, ids[0][3][5][1], ids[0][3][6][1]), 2);
    assert_int_equal(ts_topo_distance(t, ids[0][3][5][1], ids[0][4][5][1]), 3);
    assert_int_equal(ts_topo_distance(t, ids[0][3][5][1], ids[1][3][5][1]), 4);
    ts_topo_free(t);
}

/* Two levels only: GPUs meet at their node or not at all. */
static void test_flat_tree(void **state)
{
    (void)state;
    const char *lv[] = {"node", "gpu"};
    ts_topo *t = ts_topo_new(lv, 2, NULL);
    const char *a[] = {"n1", "n1/gpu0"}, *b[] = {"n1", "n1/gpu1"}, *c[] = {"n2", "n2/gpu0"};
    int va = ts_topo_path(t, a, 2, NULL), vb = ts_topo_path(t, b, 2, NULL);
    int vc = ts_topo_path(t, c, 2, NULL);
    assert_int_equal(ts_topo_distance(t, va, vb), 1);
    assert_int_equal(ts_topo_distance(t, va, vc), 2);
    ts_topo_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_bad_levels),
        cmocka_unit_test(test_path_creates_once),
        cmocka_unit_test(test_distances),
        cmocka_unit_test(test_shared_nvlink_domain),
        cmocka_unit_test(test_find_and_ancestor),
        cmocka_unit_test(test_bad_paths),
        cmocka_unit_test(test_clone_is_independent),
        cmocka_unit_test(test_many_vertices),
        cmocka_unit_test(test_flat_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
