/*
 * test_mig_plan.c - the dynamic MIG planner (tessera/mig_plan.h).
 *
 * Small crafted clusters whose answers are worked out by hand: seven idle 1g
 * instances and a 3g request (the fewest 1g go, and placement then works),
 * busy instances never removed, two demands never counting on the same room,
 * the tie rules (instances other demand wants, the most carved-up GPU, the
 * fewest memory slices), nothing to do when placement already works, the
 * bound on changes, excluded nodes and model masks, argument errors and stale
 * plans refused by apply. Then a property test over random layouts (bounded
 * count, fixed seed): after apply every busy instance is intact, every
 * layout valid, every instance reported as served places, in order, on the
 * node ts_mig_plan_node picks (and no more do), and against no change at all
 * the first demand that fares differently fares better.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tessera/mig_plan.h"
#include "tessera/rng.h"
#include "test_util.h"

#define CAP 8
#define PROPERTY_ROUNDS 400
#define PROPERTY_SEED 20240605u
#define NODE_CPU_MILLI 64000
#define NODE_MEM_MIB 262144

static ts_request mig_req(int profile)
{
    return (ts_request){.num_gpu = 1, .gpu_milli = 0, .mig_profile = profile};
}

static ts_mig_layout layout_of(const int *ids, const int *starts, int n)
{
    ts_mig_layout l = {.n = n};
    for (int k = 0; k < n; k++)
        l.inst[k] = (ts_mig_instance){(int8_t)ids[k], (int8_t)starts[k], 0};
    return l;
}

static ts_mig_layout seven_1g(void)
{
    const int ids[7] = {TS_MIG_P_1G, TS_MIG_P_1G, TS_MIG_P_1G, TS_MIG_P_1G,
                        TS_MIG_P_1G, TS_MIG_P_1G, TS_MIG_P_1G};
    const int starts[7] = {0, 1, 2, 3, 4, 5, 6};
    return layout_of(ids, starts, 7);
}

static int add_mig_node(ts_cluster *c, const char *name, const char *model, int ngpu,
                        const ts_mig_layout *per_gpu)
{
    ts_node_spec s = {.name = name, .gpu_model = model, .ngpu = ngpu,
                      .cpu_milli = NODE_CPU_MILLI, .mem_mib = NODE_MEM_MIB,
                      .gpu_mode = TS_GPU_MIG, .per_gpu_mig = per_gpu};
    ts_err err;
    int i = ts_cluster_add_node(c, &s, &err);
    assert_true(i >= 0);
    return i;
}

/* Binds a task to the existing instance (profile, start) of node/gpu. */
static void mark_busy(ts_cluster *c, int node, int gpu, int profile, int start,
                      int64_t cpu_milli)
{
    ts_request r = mig_req(profile);
    r.cpu_milli = cpu_milli;
    ts_alloc a = ts_test_alloc(&r, node, &gpu, 1);
    a.mig_profile = (int8_t)profile;
    a.mig_start = (int8_t)start;
    assert_int_equal(ts_node_assign(&c->nodes[node], &r, &a), 0);
}

static bool has_instance(const ts_mig_layout *l, int profile, int start, int busy)
{
    for (int k = 0; k < l->n; k++)
        if (l->inst[k].profile_id == profile && l->inst[k].start == start &&
            (busy < 0 || l->inst[k].busy == busy))
            return true;
    return false;
}

/* Bit s set when the change removes an instance of profile at start s. */
static unsigned removed_starts(const ts_mig_change *ch, int profile)
{
    unsigned m = 0;
    for (int k = 0; k < ch->nremoved; k++)
        if (ch->removed[k].profile_id == profile)
            m |= 1u << ch->removed[k].start;
    return m;
}

static size_t plan(const ts_cluster *c, const ts_mig_demand *d, size_t n,
                   const ts_mig_plan_opts *opts, ts_mig_change *out, size_t cap, int *served)
{
    size_t nout = 99;
    ts_err err = {0};
    int rc = ts_mig_plan(c, d, n, opts, out, cap, &nout, served, &err);
    if (rc != 0)
        fail_msg("ts_mig_plan: %d %s", rc, err.msg);
    assert_true(nout <= cap);
    return nout;
}

/* Places served[i] instances of each demand, in order, where the planner
 * said; the next instance of a demand not fully served must not place. */
static void place_in_order(ts_cluster *c, const ts_mig_demand *d, size_t n, const int *served,
                           const ts_mig_plan_opts *opts)
{
    for (size_t i = 0; i < n; i++) {
        for (int u = 0; u < served[i]; u++) {
            int node = ts_mig_plan_node(c, &d[i].req, opts);
            if (node < 0)
                fail_msg("demand %zu instance %d: no node (%d)", i, u, node);
            ts_alloc a;
            assert_int_equal(ts_node_choose_gpus(&c->nodes[node], &d[i].req, &a), 0);
            a.node = node;
            assert_int_equal(ts_node_assign(&c->nodes[node], &d[i].req, &a), 0);
        }
        if (served[i] < d[i].count)
            assert_true(ts_mig_plan_node(c, &d[i].req, opts) < 0);
    }
}

/* ---- the worked examples ------------------------------------------------ */

static void test_seven_1g_make_room_for_3g(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    ts_mig_layout per[2] = {seven_1g(), seven_1g()};
    int a = add_mig_node(c, "a", "A100-80GB", 2, per);
    ts_request r3 = mig_req(TS_MIG_P_3G);
    assert_false(ts_node_fits(&c->nodes[a], &r3));

    ts_mig_demand d = {.req = r3, .count = 1};
    ts_mig_change ch[CAP];
    int served = -1;
    assert_int_equal(plan(c, &d, 1, NULL, ch, CAP, &served), 1);
    assert_int_equal(served, 1);
    assert_int_equal(ch[0].node, a);
    assert_int_equal(ch[0].gpu, 0); /* both alike: the lowest index */
    assert_int_equal(ch[0].first_demand, 0);
    /* 3g may start at 0 or 4: slots 4-7 hold three 1g (slot 7 is empty),
     * slots 0-3 hold four */
    assert_int_equal(ch[0].nremoved, 3);
    assert_int_equal(removed_starts(&ch[0], TS_MIG_P_1G), 0x70u);
    assert_int_equal(ch[0].layout.n, 4);
    for (int s = 0; s < 4; s++)
        assert_true(has_instance(&ch[0].layout, TS_MIG_P_1G, s, 0));
    /* the cluster is only read */
    assert_int_equal(c->nodes[a].gpu[0].mig.n, 7);

    ts_err err;
    uint64_t ver = c->nodes[a].version;
    assert_int_equal(ts_mig_plan_apply(c, ch, 1, &err), 0);
    assert_true(c->nodes[a].version > ver);
    assert_int_equal(c->nodes[a].gpu[0].mig.n, 4);
    assert_int_equal(c->nodes[a].gpu[1].mig.n, 7);
    ts_alloc al;
    assert_int_equal(ts_node_choose_gpus(&c->nodes[a], &r3, &al), 0);
    assert_int_equal(al.gpu[0], 0);
    assert_int_equal(al.mig_start, 4);
    assert_int_equal(al.mig_created, 1);
    al.node = a;
    assert_int_equal(ts_node_assign(&c->nodes[a], &r3, &al), 0);
    assert_int_equal(ts_mig_layout_validate(TS_MIG_A100_80GB, &c->nodes[a].gpu[0].mig, NULL),
                     0);
    /* and release destroys the instance placement created */
    assert_int_equal(ts_node_release(&c->nodes[a], &al), 0);
    assert_int_equal(c->nodes[a].gpu[0].mig.n, 4);
    ts_cluster_free(c);
}

static void test_busy_instances_never_removed(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    ts_mig_layout per[2] = {seven_1g(), seven_1g()};
    int b = add_mig_node(c, "b", "H100-80GB", 2, per);
    for (int s = 0; s < 7; s++)
        mark_busy(c, b, 0, TS_MIG_P_1G, s, 0);
    mark_busy(c, b, 1, TS_MIG_P_1G, 5, 0);

    ts_mig_demand d = {.req = mig_req(TS_MIG_P_3G), .count = 2};
    ts_mig_change ch[CAP];
    int served = -1;
    assert_int_equal(plan(c, &d, 1, NULL, ch, CAP, &served), 1);
    /* gpu 0 is all busy; on gpu 1 the busy 1g at slot 5 blocks start 4 */
    assert_int_equal(ch[0].gpu, 1);
    assert_int_equal(ch[0].nremoved, 4);
    assert_int_equal(removed_starts(&ch[0], TS_MIG_P_1G), 0x0Fu);
    assert_true(has_instance(&ch[0].layout, TS_MIG_P_1G, 5, 1));
    assert_int_equal(served, 1);

    /* only GPUs that run nothing: gpu 1 is out too */
    ts_mig_plan_opts idle_only = {.idle_gpus_only = true};
    assert_int_equal(plan(c, &d, 1, &idle_only, ch + 1, CAP - 1, &served), 0);
    assert_int_equal(served, 0);
    served = 1;

    ts_err err;
    assert_int_equal(ts_mig_plan_apply(c, ch, 1, &err), 0);
    assert_int_equal(c->nodes[b].gpu[0].mig.n, 7);
    assert_true(has_instance(&c->nodes[b].gpu[1].mig, TS_MIG_P_1G, 5, 1));
    place_in_order(c, &d, 1, &served, NULL);
    assert_true(has_instance(&c->nodes[b].gpu[1].mig, TS_MIG_P_3G, 0, 1));

    /* every instance busy: no change at all */
    ts_cluster *full = ts_cluster_new();
    ts_mig_layout one = seven_1g();
    int f = add_mig_node(full, "f", "A100-40GB", 1, &one);
    for (int s = 0; s < 7; s++)
        mark_busy(full, f, 0, TS_MIG_P_1G, s, 0);
    ts_mig_demand d7[2] = {{.req = mig_req(TS_MIG_P_7G), .count = 1},
                           {.req = mig_req(TS_MIG_P_1G), .count = 1}};
    int served2[2] = {-1, -1};
    assert_int_equal(plan(full, d7, 2, NULL, ch, CAP, served2), 0);
    assert_int_equal(served2[0], 0);
    assert_int_equal(served2[1], 0);
    ts_cluster_free(full);
    ts_cluster_free(c);
}

static void test_two_demands_do_not_share_room(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    /* four idle 1g at slots 0-3; slots 4-7 free: room for exactly one 3g */
    const int ids[4] = {TS_MIG_P_1G, TS_MIG_P_1G, TS_MIG_P_1G, TS_MIG_P_1G};
    const int starts[4] = {0, 1, 2, 3};
    ts_mig_layout l = layout_of(ids, starts, 4);
    add_mig_node(c, "a", "A100-80GB", 1, &l);
    ts_mig_demand d[2] = {{.req = mig_req(TS_MIG_P_3G), .count = 1},
                          {.req = mig_req(TS_MIG_P_3G), .count = 1}};
    ts_mig_change ch[CAP];
    int served[2];

    /* no changes allowed: the first takes the room, the second has none */
    assert_int_equal(plan(c, d, 2, NULL, ch, 0, served), 0);
    assert_int_equal(served[0], 1);
    assert_int_equal(served[1], 0);

    /* with changes: the second gets slots 0-3 */
    assert_int_equal(plan(c, d, 2, NULL, ch, CAP, served), 1);
    assert_int_equal(served[0], 1);
    assert_int_equal(served[1], 1);
    assert_int_equal(ch[0].nremoved, 4);
    assert_int_equal(ch[0].first_demand, 1);
    ts_err err;
    assert_int_equal(ts_mig_plan_apply(c, ch, 1, &err), 0);
    place_in_order(c, d, 2, served, NULL);
    assert_true(has_instance(&c->nodes[0].gpu[0].mig, TS_MIG_P_3G, 0, 1));
    assert_true(has_instance(&c->nodes[0].gpu[0].mig, TS_MIG_P_3G, 4, 1));

    /* seven 1g, a 3g then a 2g: the 2g may not count on the 3g's slots */
    ts_cluster *c2 = ts_cluster_new();
    ts_mig_layout s7 = seven_1g();
    add_mig_node(c2, "b", "A100-80GB", 1, &s7);
    ts_mig_demand d2[2] = {{.req = mig_req(TS_MIG_P_3G), .count = 1},
                           {.req = mig_req(TS_MIG_P_2G), .count = 1}};
    assert_int_equal(plan(c2, d2, 2, NULL, ch, CAP, served), 1);
    assert_int_equal(served[0], 1);
    assert_int_equal(served[1], 1);
    assert_int_equal(ch[0].nremoved, 5); /* 3 for the 3g, 2 more for the 2g */
    assert_int_equal(ts_mig_plan_apply(c2, ch, 1, &err), 0);
    place_in_order(c2, d2, 2, served, NULL);
    assert_int_equal(ts_mig_layout_validate(TS_MIG_A100_80GB, &c2->nodes[0].gpu[0].mig, NULL),
                     0);
    ts_cluster_free(c2);
    ts_cluster_free(c);
}

static void test_tie_rules(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    /* Both GPUs: a busy 3g at slot 0 and two idle instances over slots 4-7,
     * so a 3g needs two removals on either. gpu 0's include a 2g. */
    const int ids0[3] = {TS_MIG_P_3G, TS_MIG_P_2G, TS_MIG_P_1G_2X};
    const int ids1[3] = {TS_MIG_P_3G, TS_MIG_P_1G_2X, TS_MIG_P_1G_2X};
    const int starts[3] = {0, 4, 6};
    ts_mig_layout per[2] = {layout_of(ids0, starts, 3), layout_of(ids1, starts, 3)};
    int a = add_mig_node(c, "a", "H100-80GB", 2, per);
    mark_busy(c, a, 0, TS_MIG_P_3G, 0, 0);
    mark_busy(c, a, 1, TS_MIG_P_3G, 0, 0);
    ts_mig_change ch[CAP];
    int served[2];

    /* alone, the 3g takes the lowest index */
    ts_mig_demand d1 = {.req = mig_req(TS_MIG_P_3G), .count = 1};
    assert_int_equal(plan(c, &d1, 1, NULL, ch, CAP, served), 1);
    assert_int_equal(ch[0].gpu, 0);

    /* a 2g waits too: its idle 2g on gpu 0 is spared, gpu 1 is cut */
    ts_mig_demand d2[2] = {{.req = mig_req(TS_MIG_P_3G), .count = 1},
                           {.req = mig_req(TS_MIG_P_2G), .count = 1}};
    assert_int_equal(plan(c, d2, 2, NULL, ch, CAP, served), 1);
    assert_int_equal(ch[0].gpu, 1);
    assert_int_equal(removed_starts(&ch[0], TS_MIG_P_1G_2X), 0x50u);
    assert_int_equal(served[0], 1);
    assert_int_equal(served[1], 1);
    ts_err err;
    ts_cluster *cc = ts_cluster_clone(c);
    assert_non_null(cc);
    assert_int_equal(ts_mig_plan_apply(cc, ch, 1, &err), 0);
    place_in_order(cc, d2, 2, served, NULL);
    assert_true(has_instance(&cc->nodes[a].gpu[0].mig, TS_MIG_P_2G, 4, 1));
    ts_cluster_free(cc);
    ts_cluster_free(c);

    /* Most carved up: one removal either way for a 1g, gpu 1 has more
     * instances; on it the 2g and the 1gx2 hold two slices each, so the
     * lowest start (the 2g at 4) goes. */
    c = ts_cluster_new();
    const int ida[2] = {TS_MIG_P_4G, TS_MIG_P_3G};
    const int sta[2] = {0, 4};
    const int idb[3] = {TS_MIG_P_4G, TS_MIG_P_2G, TS_MIG_P_1G_2X};
    const int stb[3] = {0, 4, 6};
    ts_mig_layout per2[2] = {layout_of(ida, sta, 2), layout_of(idb, stb, 3)};
    a = add_mig_node(c, "a", "A100-40GB", 2, per2);
    mark_busy(c, a, 0, TS_MIG_P_4G, 0, 0);
    mark_busy(c, a, 1, TS_MIG_P_4G, 0, 0);
    ts_mig_demand d3 = {.req = mig_req(TS_MIG_P_1G), .count = 1};
    assert_int_equal(plan(c, &d3, 1, NULL, ch, CAP, served), 1);
    assert_int_equal(ch[0].gpu, 1);
    assert_int_equal(ch[0].nremoved, 1);
    assert_int_equal(ch[0].removed[0].profile_id, TS_MIG_P_2G);

    /* Fewest slices on one GPU: a 1gx2 at 4 would remove the 2g, at 6 only
     * a 1g (slot 7 stays empty). */
    const int idc[3] = {TS_MIG_P_4G, TS_MIG_P_2G, TS_MIG_P_1G};
    const int stc[3] = {0, 4, 6};
    ts_mig_layout lc = layout_of(idc, stc, 3);
    int b = add_mig_node(c, "b", "A100-80GB", 1, &lc);
    mark_busy(c, b, 0, TS_MIG_P_4G, 0, 0);
    ts_mig_demand d4 = {.req = mig_req(TS_MIG_P_1G_2X), .count = 1};
    d4.req.model_mask = 1u << ts_gpu_model_lookup("A100-80GB");
    assert_int_equal(plan(c, &d4, 1, NULL, ch, CAP, served), 1);
    assert_int_equal(ch[0].node, b);
    assert_int_equal(ch[0].nremoved, 1);
    assert_int_equal(ch[0].removed[0].profile_id, TS_MIG_P_1G);
    assert_int_equal(ch[0].removed[0].start, 6);
    ts_cluster_free(c);
}

static void test_no_change_when_placement_works(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    const int ids[5] = {TS_MIG_P_1G, TS_MIG_P_1G, TS_MIG_P_1G, TS_MIG_P_1G, TS_MIG_P_3G};
    const int starts[5] = {0, 1, 2, 3, 4};
    ts_mig_layout per[2] = {layout_of(ids, starts, 5), seven_1g()};
    add_mig_node(c, "a", "A100-80GB", 2, per);
    ts_mig_change ch[CAP];
    int served[2];
    /* an idle 3g exists */
    ts_mig_demand d = {.req = mig_req(TS_MIG_P_3G), .count = 1};
    assert_int_equal(plan(c, &d, 1, NULL, ch, CAP, served), 0);
    assert_int_equal(served[0], 1);

    /* an empty MIG GPU is room already, for a 7g and then some */
    ts_mig_layout empty = {.n = 0};
    add_mig_node(c, "e", "A100-80GB", 1, &empty);
    ts_mig_demand d7 = {.req = mig_req(TS_MIG_P_7G), .count = 1};
    assert_int_equal(plan(c, &d7, 1, NULL, ch, CAP, served), 0);
    assert_int_equal(served[0], 1);
    ts_cluster_free(c);
}

static void test_change_bound_and_exclusions(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    ts_mig_layout per[3] = {seven_1g(), seven_1g(), seven_1g()};
    add_mig_node(c, "a", "A100-80GB", 3, per);
    ts_mig_layout per_h[1] = {seven_1g()};
    int h = add_mig_node(c, "h", "H100-80GB", 1, per_h);
    ts_mig_change ch[CAP];
    int served[1];
    ts_mig_demand d = {.req = mig_req(TS_MIG_P_3G), .count = 3};
    d.req.model_mask = 1u << ts_gpu_model_lookup("A100-80GB");

    /* one change: gpu 0 takes two 3g (slots 4-7, then 0-3), the third waits */
    ts_mig_plan_opts one = {.max_changes = 1};
    assert_int_equal(plan(c, &d, 1, &one, ch, CAP, served), 1);
    assert_int_equal(ch[0].gpu, 0);
    assert_int_equal(ch[0].nremoved, 7);
    assert_int_equal(served[0], 2);
    /* the same bound through cap */
    assert_int_equal(plan(c, &d, 1, NULL, ch, 1, served), 1);
    assert_int_equal(served[0], 2);
    /* unbounded: the second 3g costs three removals on gpu 1 rather than
     * four more on gpu 0, the third likewise on gpu 2 */
    assert_int_equal(plan(c, &d, 1, NULL, ch, CAP, served), 3);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ch[k].gpu, k);
        assert_int_equal(ch[k].nremoved, 3);
    }
    assert_int_equal(served[0], 3);

    /* excluded node "a": the A100-only demand has nowhere to go, and the
     * H100 node is not its model */
    bool excluded[2] = {true, false};
    ts_mig_plan_opts ex = {.excluded = excluded};
    assert_int_equal(plan(c, &d, 1, &ex, ch, CAP, served), 0);
    assert_int_equal(served[0], 0);
    d.req.model_mask = 0;
    assert_int_equal(plan(c, &d, 1, &ex, ch, CAP, served), 1);
    assert_int_equal(ch[0].node, h);
    assert_int_equal(served[0], 2); /* one GPU holds two 3g */

    /* CPU: a request the node cannot feed gets no change there */
    d.req.cpu_milli = NODE_CPU_MILLI + 1;
    assert_int_equal(plan(c, &d, 1, NULL, ch, CAP, served), 0);
    assert_int_equal(served[0], 0);
    ts_cluster_free(c);
}

static void test_errors(void **state)
{
    (void)state;
    ts_cluster *c = ts_cluster_new();
    ts_mig_layout s7 = seven_1g();
    int a = add_mig_node(c, "a", "A100-80GB", 1, &s7);
    ts_node_spec whole = {.name = "w", .gpu_model = "H100-80GB", .ngpu = 2,
                          .cpu_milli = 1000, .mem_mib = 1000, .gpu_mode = TS_GPU_WHOLE};
    int w = ts_cluster_add_node(c, &whole, NULL);
    assert_true(w >= 0);
    ts_mig_change ch[CAP];
    size_t nout = 99;
    int served[2] = {7, 7};
    ts_err err;

    ts_mig_demand d[2] = {{.req = mig_req(TS_MIG_P_3G), .count = 1},
                          {.req = mig_req(TS_MIG_P_3G), .count = 0}};
    assert_int_equal(ts_mig_plan(c, d, 2, NULL, ch, CAP, &nout, served, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "demand[1].count"));
    assert_int_equal(nout, 0);
    assert_int_equal(served[0], 0);
    d[1].count = 1;
    d[1].req.mig_profile = 3;
    assert_int_equal(ts_mig_plan(c, d, 2, NULL, ch, CAP, &nout, served, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "demand[1].req.mig_profile"));
    d[1].req.mig_profile = TS_MIG_P_2G;
    d[1].req.gpu_milli = 500;
    assert_int_equal(ts_mig_plan(c, d, 2, NULL, ch, CAP, &nout, served, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "demand[1].req.gpu_milli"));
    assert_int_equal(ts_mig_plan(NULL, d, 1, NULL, ch, CAP, &nout, served, &err), TS_EINVAL);
    assert_int_equal(ts_mig_plan(c, NULL, 1, NULL, ch, CAP, &nout, served, &err), TS_EINVAL);
    assert_int_equal(ts_mig_plan(c, d, 1, NULL, NULL, CAP, &nout, served, &err), TS_EINVAL);
    assert_int_equal(ts_mig_plan(c, d, 1, NULL, ch, CAP, NULL, served, &err), TS_EINVAL);
    assert_int_equal(ts_mig_plan(c, d, 0, NULL, ch, CAP, &nout, NULL, &err), 0);
    ts_request share = {.num_gpu = 1, .gpu_milli = 500, .mig_profile = -1};
    assert_int_equal(ts_mig_plan_node(c, &share, NULL), TS_EINVAL);

    /* apply refuses bad indices, non-MIG GPUs, duplicates, stale plans */
    assert_int_equal(plan(c, d, 1, NULL, ch, CAP, served), 1);
    ts_mig_change bad = ch[0];
    bad.node = 5;
    assert_int_equal(ts_mig_plan_apply(c, &bad, 1, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "changes[0].node"));
    bad = ch[0];
    bad.gpu = 1;
    assert_int_equal(ts_mig_plan_apply(c, &bad, 1, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "changes[0].gpu"));
    bad = ch[0];
    bad.node = w;
    assert_int_equal(ts_mig_plan_apply(c, &bad, 1, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "whole mode"));
    ts_mig_change two[2] = {ch[0], ch[0]};
    assert_int_equal(ts_mig_plan_apply(c, two, 2, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "changes[1]"));
    bad = ch[0];
    bad.layout.inst[0].start = 6;
    bad.layout.inst[0].profile_id = TS_MIG_P_1G_2X;
    assert_int_equal(ts_mig_plan_apply(c, &bad, 1, &err), TS_ENOENT);
    assert_non_null(strstr(err.msg, "changes[0].layout"));
    bad = ch[0];
    bad.layout.inst[1] = bad.layout.inst[0];
    assert_int_equal(ts_mig_plan_apply(c, &bad, 1, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "overlap"));

    /* an instance the plan removes became busy: the plan is stale */
    mark_busy(c, a, 0, TS_MIG_P_1G, 5, 0);
    ts_mig_layout before = c->nodes[a].gpu[0].mig;
    assert_int_equal(ts_mig_plan_apply(c, ch, 1, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "busy"));
    assert_memory_equal(&before, &c->nodes[a].gpu[0].mig, sizeof before);
    ts_cluster_free(c);
}

/* ---- property: random layouts --------------------------------------------- */

static const char *const MIG_MODELS[] = {"A100-40GB", "A100-80GB", "H100-80GB"};
#define NMIG_MODELS 3
static const int PROFILE_IDS[TS_MIG_NPROFILES] = {TS_MIG_P_1G, TS_MIG_P_1G_ME, TS_MIG_P_1G_2X,
                                                  TS_MIG_P_2G, TS_MIG_P_3G, TS_MIG_P_4G,
                                                  TS_MIG_P_7G};
#define MAX_NODES 4
#define MAX_GPUS 3
#define MAX_DEMANDS 5

static ts_mig_layout random_layout(ts_rng *rng, int geo)
{
    ts_mig_layout l = {.n = 0};
    int tries = (int)ts_rng_below(rng, 10);
    for (int t = 0; t < tries; t++) {
        int id = PROFILE_IDS[ts_rng_below(rng, TS_MIG_NPROFILES)];
        int s = (int)ts_rng_below(rng, TS_MIG_MEM_SLICES);
        (void)ts_mig_layout_add(geo, &l, id, s, NULL);
    }
    return l;
}

static ts_cluster *random_cluster(ts_rng *rng)
{
    ts_cluster *c = ts_cluster_new();
    int nn = 1 + (int)ts_rng_below(rng, MAX_NODES);
    for (int i = 0; i < nn; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        const char *model = MIG_MODELS[ts_rng_below(rng, NMIG_MODELS)];
        int geo = ts_mig_geometry_of(model);
        int ngpu = 1 + (int)ts_rng_below(rng, MAX_GPUS);
        ts_mig_layout per[MAX_GPUS];
        for (int j = 0; j < ngpu; j++)
            per[j] = random_layout(rng, geo);
        bool whole = ts_rng_below(rng, 6) == 0;
        ts_node_spec s = {.name = name, .gpu_model = model, .ngpu = ngpu,
                          .cpu_milli = 2000 + 1000 * (int64_t)ts_rng_below(rng, 8),
                          .mem_mib = NODE_MEM_MIB,
                          .gpu_mode = whole ? TS_GPU_WHOLE : TS_GPU_MIG,
                          .per_gpu_mig = whole ? NULL : per};
        assert_int_equal(ts_cluster_add_node(c, &s, NULL), i);
        for (int j = 0; j < ngpu && !whole; j++) {
            const ts_mig_layout l = c->nodes[i].gpu[j].mig;
            for (int k = 0; k < l.n; k++)
                if (ts_rng_below(rng, 5) < 2 &&
                    c->nodes[i].cpu_milli - c->nodes[i].cpu_used >= 500)
                    mark_busy(c, i, j, l.inst[k].profile_id, l.inst[k].start, 500);
        }
    }
    return c;
}

static void check_change_shape(const ts_cluster *before, const ts_mig_change *ch, size_t nout)
{
    for (size_t k = 0; k < nout; k++) {
        const ts_mig_change *x = &ch[k];
        assert_true(x->node >= 0 && x->node < before->nnodes);
        const ts_node *n = &before->nodes[x->node];
        assert_true(x->gpu >= 0 && x->gpu < n->ngpu);
        const ts_gpu *g = &n->gpu[x->gpu];
        assert_int_equal(g->mode, TS_GPU_MIG);
        int geo = ts_gpu_model_get(n->model)->mig_geometry;
        assert_int_equal(ts_mig_layout_validate(geo, &x->layout, NULL), 0);
        assert_true(x->nremoved >= 1);
        assert_int_equal(x->layout.n + x->nremoved, g->mig.n);
        for (int r = 0; r < x->nremoved; r++) {
            assert_true(has_instance(&g->mig, x->removed[r].profile_id, x->removed[r].start, 0));
            assert_false(has_instance(&x->layout, x->removed[r].profile_id,
                                      x->removed[r].start, -1));
        }
        for (int i = 0; i < g->mig.n; i++)
            if (g->mig.inst[i].busy)
                assert_true(has_instance(&x->layout, g->mig.inst[i].profile_id,
                                         g->mig.inst[i].start, 1));
        for (size_t j = 0; j < k; j++)
            assert_false(ch[j].node == x->node && ch[j].gpu == x->gpu);
    }
}

static void check_after_apply(const ts_cluster *before, const ts_cluster *after,
                              const ts_mig_change *ch, size_t nout)
{
    for (int i = 0; i < before->nnodes; i++) {
        const ts_node *n0 = &before->nodes[i], *n1 = &after->nodes[i];
        assert_int_equal(n0->ntasks, n1->ntasks);
        for (int j = 0; j < n0->ngpu; j++) {
            const ts_gpu *g0 = &n0->gpu[j], *g1 = &n1->gpu[j];
            assert_int_equal(g0->mode, g1->mode);
            assert_int_equal(g0->ntasks, g1->ntasks);
            if (g0->mode != TS_GPU_MIG)
                continue;
            int geo = ts_gpu_model_get(n0->model)->mig_geometry;
            assert_int_equal(ts_mig_layout_validate(geo, &g1->mig, NULL), 0);
            for (int k = 0; k < g0->mig.n; k++)
                if (g0->mig.inst[k].busy)
                    assert_true(has_instance(&g1->mig, g0->mig.inst[k].profile_id,
                                             g0->mig.inst[k].start, 1));
            bool changed = false;
            for (size_t k = 0; k < nout; k++)
                changed = changed || (ch[k].node == i && ch[k].gpu == j);
            if (!changed)
                assert_memory_equal(&g0->mig, &g1->mig, sizeof g0->mig);
        }
    }
}

static void test_property_random_layouts(void **state)
{
    (void)state;
    ts_rng rng;
    ts_rng_seed(&rng, PROPERTY_SEED);
    int total_changes = 0, total_served = 0, rounds_with_cuts = 0;
    for (int round = 0; round < PROPERTY_ROUNDS; round++) {
        ts_cluster *c = random_cluster(&rng);
        ts_mig_demand d[MAX_DEMANDS];
        size_t nd = 1 + ts_rng_below(&rng, MAX_DEMANDS);
        for (size_t i = 0; i < nd; i++) {
            d[i] = (ts_mig_demand){.req = mig_req(PROFILE_IDS[ts_rng_below(&rng,
                                                                          TS_MIG_NPROFILES)]),
                                   .count = 1 + (int)ts_rng_below(&rng, 3)};
            if (ts_rng_below(&rng, 3) == 0)
                d[i].req.cpu_milli = 1000;
            if (ts_rng_below(&rng, 3) == 0)
                d[i].req.model_mask =
                    1u << ts_gpu_model_lookup(MIG_MODELS[ts_rng_below(&rng, NMIG_MODELS)]);
        }
        bool excluded[MAX_NODES] = {false};
        for (int i = 0; i < c->nnodes; i++)
            excluded[i] = ts_rng_below(&rng, 5) == 0;
        ts_mig_plan_opts opts = {.max_changes = ts_rng_below(&rng, 4),
                                 .excluded = ts_rng_below(&rng, 2) ? excluded : NULL,
                                 .idle_gpus_only = ts_rng_below(&rng, 4) == 0};

        ts_mig_change ch[CAP];
        int served[MAX_DEMANDS], unchanged[MAX_DEMANDS];
        size_t nout = plan(c, d, nd, &opts, ch, CAP, served);
        if (opts.max_changes > 0)
            assert_true(nout <= opts.max_changes);
        check_change_shape(c, ch, nout);
        for (size_t k = 0; k < nout; k++) {
            if (opts.excluded)
                assert_false(opts.excluded[ch[k].node]);
            if (opts.idle_gpus_only)
                assert_int_equal(c->nodes[ch[k].node].gpu[ch[k].gpu].ntasks, 0);
        }
        /* Order is kept: against no change at all, the first demand that
         * differs gains (and one does whenever there are changes). */
        assert_int_equal(plan(c, d, nd, &opts, ch + CAP - 1, 0, unchanged), 0);
        int order = 0;
        for (size_t i = 0; i < nd && order == 0; i++)
            order = served[i] > unchanged[i] ? 1 : served[i] < unchanged[i] ? -1 : 0;
        assert_true(order >= 0);
        assert_int_equal(order > 0, nout > 0);

        ts_cluster *after = ts_cluster_clone(c);
        assert_non_null(after);
        ts_err err;
        if (ts_mig_plan_apply(after, ch, nout, &err) != 0)
            fail_msg("round %d: apply: %s", round, err.msg);
        check_after_apply(c, after, ch, nout);
        place_in_order(after, d, nd, served, &opts);
        /* and what placement made of it is still a valid layout */
        for (int i = 0; i < after->nnodes; i++)
            for (int j = 0; j < after->nodes[i].ngpu; j++)
                if (after->nodes[i].gpu[j].mode == TS_GPU_MIG)
                    assert_int_equal(
                        ts_mig_layout_validate(
                            ts_gpu_model_get(after->nodes[i].model)->mig_geometry,
                            &after->nodes[i].gpu[j].mig, NULL),
                        0);
        for (size_t i = 0; i < nd; i++) {
            assert_true(served[i] >= 0 && served[i] <= d[i].count);
            total_served += served[i];
        }
        total_changes += (int)nout;
        rounds_with_cuts += nout > 0;
        ts_cluster_free(after);
        ts_cluster_free(c);
    }
    /* the random cases do exercise cutting, not only the easy path */
    assert_true(rounds_with_cuts > PROPERTY_ROUNDS / 10);
    assert_true(total_served > total_changes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seven_1g_make_room_for_3g),
        cmocka_unit_test(test_busy_instances_never_removed),
        cmocka_unit_test(test_two_demands_do_not_share_room),
        cmocka_unit_test(test_tie_rules),
        cmocka_unit_test(test_no_change_when_placement_works),
        cmocka_unit_test(test_change_bound_and_exclusions),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_property_random_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
