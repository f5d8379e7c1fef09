/*
 * test_place_core.c - the scheduling cycle places as the policy it is
 * configured with: on random small workloads, one single-task job per pod
 * given to ts_sched_cycle (tesserad's default configuration, one tenant with
 * no quota, nothing leaves) lands every pod on the same node and GPUs as the
 * placer with the default scorer (TS_PLACEMENT_DEFAULT) over the same
 * cluster, and fails exactly where it fails. This is what `tessera-sim fgd
 * --policy core` relies on to give the default scorer's figures. Also: a
 * configured fgd places as the fgd scorer; the default scorer's bound (the
 * placer stops at a node no other can beat) chooses what a full scan would;
 * and a cycle without an expected workload learns one and still places only
 * feasibly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "tessera/cycle.h"
#include "tessera/frag.h"
#include "tessera/model.h"
#include "tessera/rng.h"
#include "tessera/sched.h"
#include "tessera/tenant.h"

#define WORKLOADS 12
#define CLASSES_MAX 12
#define PODS_MAX 400
#define NODES_MAX 24

static const char *const MODELS[] = {"T4", "V100M16", "A10"};

typedef struct world {
    ts_cluster *c;
    ts_request cls[CLASSES_MAX];
    int ncls;
    int pod_cls[PODS_MAX];
    int npods;
} world;

static ts_cluster *random_cluster(ts_rng *g)
{
    ts_cluster *c = ts_cluster_new();
    assert_non_null(c);
    int n = 4 + (int)ts_rng_below(g, NODES_MAX - 4);
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        bool cpu_only = ts_rng_below(g, 8) == 0;
        static const int ngpus[] = {1, 2, 4, 8};
        ts_node_spec s = {
            .name = name,
            .gpu_model = cpu_only ? NULL : MODELS[ts_rng_below(g, 3)],
            .ngpu = cpu_only ? 0 : ngpus[ts_rng_below(g, 4)],
            .cpu_milli = 8000 * (int64_t)(1 + ts_rng_below(g, 12)),
            .mem_mib = 32768 * (int64_t)(1 + ts_rng_below(g, 8)),
        };
        assert_int_equal(ts_cluster_add_node(c, &s, NULL), i);
    }
    return c;
}

static ts_request random_class(ts_rng *g)
{
    ts_request r = {.mig_profile = -1};
    r.cpu_milli = 1000 * (int64_t)(1 + ts_rng_below(g, 16));
    r.mem_mib = 1024 * (int64_t)(1 + ts_rng_below(g, 64));
    switch (ts_rng_below(g, 4)) {
    case 0: /* CPU only */
        break;
    case 1: /* a share */
        r.num_gpu = 1;
        r.gpu_milli = 100 * (int32_t)(1 + ts_rng_below(g, 9));
        break;
    default: { /* whole GPUs */
        static const int n[] = {1, 1, 1, 2, 4, 8};
        r.num_gpu = n[ts_rng_below(g, 6)];
        r.gpu_milli = TS_MILLI_PER_GPU;
        break;
    }
    }
    if (r.num_gpu > 0 && ts_rng_below(g, 4) == 0)
        r.model_mask = UINT32_C(1) << ts_gpu_model_lookup(MODELS[ts_rng_below(g, 3)]);
    return r;
}

static void world_make(world *w, uint64_t seed)
{
    ts_rng g;
    ts_rng_seed(&g, seed);
    w->c = random_cluster(&g);
    w->ncls = 2 + (int)ts_rng_below(&g, CLASSES_MAX - 2);
    for (int k = 0; k < w->ncls; k++)
        w->cls[k] = random_class(&g);
    w->npods = 50 + (int)ts_rng_below(&g, PODS_MAX - 50);
    for (int i = 0; i < w->npods; i++)
        w->pod_cls[i] = (int)ts_rng_below(&g, (uint64_t)w->ncls);
}

/* The typical list of the world's pods, as the simulator builds it. */
static void world_typical(const world *w, ts_typical *t)
{
    int count[CLASSES_MAX] = {0};
    for (int i = 0; i < w->npods; i++)
        count[w->pod_cls[i]]++;
    ts_workload wl = {.specs = (ts_request *)w->cls, .spec_count = count, .nspecs = w->ncls};
    assert_int_equal(ts_typical_from_workload(&wl, TS_TYPICAL_COVERAGE_DEFAULT, t, NULL), 0);
}

/* Placements by the placer with ops: node per pod (-1 none), GPUs in gpus. */
static void by_placer(const world *w, const ts_typical *t, const struct ts_scorer_ops *ops,
                      int *node, ts_alloc *allocs)
{
    ts_cluster *c = ts_cluster_clone(w->c);
    ts_sched_env env = {.cluster = c, .typical = t};
    ts_placer *p = ts_placer_new(c, ops, &env, w->ncls, 1, NULL);
    assert_non_null(p);
    for (int i = 0; i < w->npods; i++)
        node[i] = ts_placer_place(p, &w->cls[w->pod_cls[i]], w->pod_cls[i], &allocs[i]);
    ts_placer_free(p);
    ts_cluster_free(c);
}

/* Placements by ts_sched_cycle, one job per pod, arrival order. t NULL: the
 * cycle learns its own expected workload. */
static void by_cycle(const world *w, const ts_typical *t, const struct ts_scorer_ops *ops,
                     int *node, ts_alloc *allocs)
{
    ts_cluster *c = ts_cluster_clone(w->c);
    ts_tenants *tt = ts_tenants_new();
    assert_non_null(tt);
    assert_int_equal(ts_tenant_add(tt, "one", NULL, NULL), 0);
    assert_int_equal(ts_tenants_validate(tt, NULL), 0);
    ts_quota *q = NULL;
    assert_int_equal(ts_quota_new(tt, 3600.0, &q, NULL), 0);
    ts_sched_config cfg;
    ts_sched_config_default(&cfg);
    cfg.placement = ops;
    ts_sched *s = NULL;
    assert_int_equal(ts_sched_new(c, q, &cfg, &s, NULL), 0);
    if (t)
        assert_int_equal(ts_sched_set_expected(s, t, NULL), 0);
    ts_decision d;
    ts_decision_init(&d);
    for (int i = 0; i < w->npods; i++) {
        ts_job j = {.id = i, .tier = TS_TIER_GUARANTEED, .submit_s = i,
                    .tasks = &w->cls[w->pod_cls[i]], .ntasks = 1,
                    .required_level = TS_GANG_LEVEL_ANY, .preferred_level = TS_GANG_LEVEL_ANY,
                    .ckpt_grace_s = -1.0};
        ts_err err = {0};
        if (ts_sched_cycle(s, i, &j, 1, NULL, 0, &d, &err) != 0)
            fail_msg("pod %d: %s", i, err.msg);
        node[i] = d.nstarts == 1 ? d.starts[0].allocs[0].node : TS_ENOSPC;
        if (d.nstarts == 1)
            allocs[i] = d.starts[0].allocs[0];
    }
    ts_decision_fini(&d);
    ts_sched_free(s);
    ts_quota_free(q);
    ts_tenants_free(tt);
    ts_cluster_free(c);
}

/* Returns how many pods were placed. */
static int same_placements(const world *w, const int *na, const ts_alloc *aa, const int *nb,
                           const ts_alloc *ab, uint64_t seed)
{
    int placed = 0;
    for (int i = 0; i < w->npods; i++) {
        if ((na[i] < 0) != (nb[i] < 0) || (na[i] >= 0 && na[i] != nb[i]))
            fail_msg("workload %llu pod %d: placer node %d, cycle node %d",
                     (unsigned long long)seed, i, na[i], nb[i]);
        if (na[i] < 0)
            continue;
        placed++;
        assert_int_equal(aa[i].ngpu, ab[i].ngpu);
        for (int k = 0; k < aa[i].ngpu; k++)
            if (aa[i].gpu[k] != ab[i].gpu[k])
                fail_msg("workload %llu pod %d: placer GPU %d, cycle GPU %d",
                         (unsigned long long)seed, i, aa[i].gpu[k], ab[i].gpu[k]);
    }
    return placed;
}

static void check_policy(const char *name)
{
    const struct ts_scorer_ops *ops = ts_scorer_find(name);
    assert_non_null(ops);
    static int na[PODS_MAX], nb[PODS_MAX];
    static ts_alloc aa[PODS_MAX], ab[PODS_MAX];
    int failures = 0, placed = 0;
    for (uint64_t seed = 1; seed <= WORKLOADS; seed++) {
        world w;
        world_make(&w, seed);
        ts_typical t;
        world_typical(&w, &t);
        by_placer(&w, &t, ops, na, aa);
        /* the default configuration leaves placement NULL: the default */
        by_cycle(&w, &t, strcmp(name, TS_PLACEMENT_DEFAULT) == 0 ? NULL : ops, nb, ab);
        placed += same_placements(&w, na, aa, nb, ab, seed);
        for (int i = 0; i < w.npods; i++)
            failures += na[i] < 0;
        ts_typical_free(&t);
        ts_cluster_free(w.c);
    }
    /* the workloads overfill their clusters, so the failure path is covered */
    assert_true(failures > 0);
    assert_true(placed > WORKLOADS * 10);
}

static void test_default_places_as_default_scorer(void **state)
{
    (void)state;
    check_policy(TS_PLACEMENT_DEFAULT);
}

static void test_configured_fgd_places_as_fgd(void **state)
{
    (void)state;
    check_policy("fgd");
}

static void test_bound_changes_nothing(void **state)
{
    (void)state;
    struct ts_scorer_ops full = *ts_scorer_find(TS_PLACEMENT_DEFAULT);
    assert_non_null(full.bound);
    full.bound = NULL;
    static int na[PODS_MAX], nb[PODS_MAX];
    static ts_alloc aa[PODS_MAX], ab[PODS_MAX];
    int cpu_only = 0;
    for (uint64_t seed = 1; seed <= WORKLOADS; seed++) {
        world w;
        world_make(&w, seed);
        ts_typical t;
        world_typical(&w, &t);
        by_placer(&w, &t, ts_scorer_find(TS_PLACEMENT_DEFAULT), na, aa);
        by_placer(&w, &t, &full, nb, ab);
        same_placements(&w, na, aa, nb, ab, seed);
        for (int i = 0; i < w.npods; i++)
            cpu_only += na[i] >= 0 && w.cls[w.pod_cls[i]].num_gpu == 0;
        ts_typical_free(&t);
        ts_cluster_free(w.c);
    }
    assert_true(cpu_only > 0); /* the bound was used */
}

static void test_learned_workload_places_feasibly(void **state)
{
    (void)state;
    static int nb[PODS_MAX];
    static ts_alloc ab[PODS_MAX];
    world w;
    world_make(&w, 99);
    by_cycle(&w, NULL, NULL, nb, ab);
    int placed = 0;
    for (int i = 0; i < w.npods; i++) {
        if (nb[i] < 0)
            continue;
        placed++;
        const ts_request *r = &w.cls[w.pod_cls[i]];
        const ts_node *n = &w.c->nodes[nb[i]];
        assert_true(n->ngpu >= r->num_gpu);
        assert_true(n->cpu_milli >= r->cpu_milli);
        if (r->model_mask)
            assert_true((r->model_mask >> n->model) & 1u);
    }
    assert_true(placed > 0);
    ts_cluster_free(w.c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_places_as_default_scorer),
        cmocka_unit_test(test_configured_fgd_places_as_fgd),
        cmocka_unit_test(test_bound_changes_nothing),
        cmocka_unit_test(test_learned_workload_places_feasibly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
