/*
 * test_share_tie.c - the default scorer's tie-break among equal scores of a
 * GPU share (issue 31): lower first, the change in the sum of squares of the
 * cluster's partly used GPUs counted by gap type (how many typical share
 * sizes fit), in steps of 100, then the lowest node index.
 *
 * The typical list has shares of 300 and 600 milli. On one-GPU nodes a share
 * of 300 scores the same on a fresh GPU (1000 -> 700) and on a GPU with 100
 * used (900 -> 600): no typical class is left a sliver either way. The fresh
 * GPU adds one GPU of type 2 (both sizes fit): 2 c + 1; the used one moves a
 * GPU within type 2: 2 c + 1 - (2 c - 1) = 2. With c = 120 GPUs of type 2 the
 * fresh GPU's change is 241 (step 2) and the used GPU's 2 (step 0), so the
 * share goes to the used GPU, although the fresh one has the lower index;
 * with 10 the steps are equal and the lower index wins, as it did before the
 * tie-break. Both through the score cache and without it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "tessera/frag.h"
#include "tessera/model.h"
#include "tessera/sched.h"

static ts_request share(int32_t milli)
{
    return (ts_request){.cpu_milli = 1000, .mem_mib = 1024, .num_gpu = 1, .gpu_milli = milli,
                        .mig_profile = -1};
}

/* Node 0 fresh, node 1 with 100 milli used, then `fill` nodes with 100 used;
 * every node one shared T4 with room for many pods. */
static ts_cluster *cluster_with(int fill)
{
    ts_cluster *c = ts_cluster_new();
    assert_non_null(c);
    for (int i = 0; i < fill + 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        ts_node_spec s = {.name = name, .gpu_model = "T4", .ngpu = 1, .cpu_milli = 64000,
                          .mem_mib = 262144, .gpu_mode = TS_GPU_SHARED};
        assert_int_equal(ts_cluster_add_node(c, &s, NULL), i);
        if (i == 0)
            continue;
        ts_request r = share(100);
        ts_alloc a = {0};
        assert_int_equal(ts_node_choose_gpus(&c->nodes[i], &r, &a), 0);
        assert_int_equal(ts_node_assign(&c->nodes[i], &r, &a), 0);
    }
    return c;
}

static int place_share(int fill, bool no_cache)
{
    ts_cluster *c = cluster_with(fill);
    ts_request cls[2] = {share(300), share(600)};
    double p[2] = {0.5, 0.5};
    int64_t count[2] = {1, 1}, mem[2] = {1024, 1024};
    ts_typical typ = {.n = 2, .req = cls, .p = p, .count = count, .mem_mib = mem};
    ts_sched_env env = {.cluster = c, .typical = &typ, .no_cache = no_cache};
    ts_err err = {0};
    ts_placer *pl = ts_placer_new(c, ts_scorer_find("tessera"), &env, 2, 1, &err);
    assert_non_null(pl);
    ts_alloc a;
    int node = ts_placer_place(pl, &cls[0], 0, &a);
    ts_placer_free(pl);
    ts_cluster_free(c);
    return node;
}

static void test_many_gaps_of_a_type_send_a_share_to_fill_one(void **state)
{
    (void)state;
    assert_int_equal(place_share(120, false), 1);
    assert_int_equal(place_share(120, true), 1);
}

static void test_few_gaps_keep_the_lowest_index(void **state)
{
    (void)state;
    assert_int_equal(place_share(10, false), 0);
    assert_int_equal(place_share(10, true), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_gaps_of_a_type_send_a_share_to_fill_one),
        cmocka_unit_test(test_few_gaps_keep_the_lowest_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
