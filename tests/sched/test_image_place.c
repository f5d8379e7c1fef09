/*
 * test_image_place.c - image-aware placement (image_place.h): among the
 * nodes the policy finds equal, the cycle picks those that hold the job's
 * image, by the seconds its pull would take; it never trades a better
 * packing score for a held image; a job with no image, or an image every
 * node holds alike, is placed exactly as without the table; a planned job's
 * image is fetched ahead where it could start; a bad table is refused
 * naming the entry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "tessera/cycle.h"
#include "tessera/image_place.h"
#include "tessera/model.h"
#include "tessera/rng.h"
#include "tessera/sched.h"
#include "tessera/tenant.h"

#define NODES 4
#define NODES_MAX 16
#define GB INT64_C(1000000000)

typedef struct fx {
    ts_cluster *c;
    ts_tenants *tt;
    ts_quota *q;
    ts_sched *s;
    ts_decision d;
    int nnodes;
    int64_t bytes[2];
    int64_t held[2 * NODES_MAX];
    double bw[NODES_MAX];
    ts_image_table t;
} fx;

/* A new cluster and scheduler (a cycle's starts stay bound on them). */
static int build(fx *f)
{
    ts_decision_fini(&f->d);
    ts_sched_free(f->s);
    ts_cluster_free(f->c);
    f->s = NULL;
    f->c = ts_cluster_new();
    for (int i = 0; i < f->nnodes; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        ts_node_spec sp = {.name = name, .gpu_model = "H100-80GB", .ngpu = 8,
                           .cpu_milli = 128000, .mem_mib = 1048576};
        if (ts_cluster_add_node(f->c, &sp, NULL) != i)
            return -1;
    }
    ts_sched_config cfg;
    ts_sched_config_default(&cfg);
    ts_decision_init(&f->d);
    return ts_sched_new(f->c, f->q, &cfg, &f->s, NULL);
}

static int setup(void **state)
{
    fx *f = test_calloc(1, sizeof *f);
    f->tt = ts_tenants_new();
    if (!f->tt || ts_tenant_add(f->tt, "one", NULL, NULL) != 0 ||
        ts_tenants_validate(f->tt, NULL) != 0 || ts_quota_new(f->tt, 3600.0, &f->q, NULL) != 0)
        return -1;
    ts_decision_init(&f->d);
    f->nnodes = NODES;
    if (build(f) != 0)
        return -1;
    f->bytes[0] = 10 * GB;
    f->bytes[1] = 2 * GB;
    f->t = (ts_image_table){.nimages = 2, .bytes = f->bytes, .held = f->held};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    ts_decision_fini(&f->d);
    ts_sched_free(f->s);
    ts_quota_free(f->q);
    ts_tenants_free(f->tt);
    ts_cluster_free(f->c);
    test_free(f);
    return 0;
}

static void set_table(fx *f)
{
    ts_err err = {0};
    if (ts_sched_set_images(f->s, &f->t, &err) != 0)
        fail_msg("%s", err.msg);
}

/* Runs one cycle with job waiting (running[0..nrun-1] as given); returns
 * the decision's start, or NULL. */
static const ts_cycle_start *cycle(fx *f, const ts_job *job, const ts_job *running, int nrun)
{
    ts_err err = {0};
    if (ts_sched_cycle(f->s, 10.0, job, 1, running, nrun, &f->d, &err) != 0)
        fail_msg("%s", err.msg);
    return f->d.nstarts == 1 ? &f->d.starts[0] : NULL;
}

/* Runs one cycle on a fresh scheduler with the table set. */
static const ts_cycle_start *fresh_cycle(fx *f, const ts_job *job)
{
    assert_int_equal(build(f), 0);
    set_table(f);
    return cycle(f, job, NULL, 0);
}

static ts_job a_job(int64_t id, const ts_request *tasks, int ntasks, int image)
{
    return (ts_job){.id = id, .tier = TS_TIER_GUARANTEED, .submit_s = 1.0, .tasks = tasks,
                    .ntasks = ntasks, .required_level = TS_GANG_LEVEL_ANY,
                    .preferred_level = TS_GANG_LEVEL_ANY, .ckpt_grace_s = -1.0,
                    .image = image};
}

static const ts_request ONE_GPU = {.cpu_milli = 8000, .mem_mib = 65536, .num_gpu = 1,
                                   .gpu_milli = TS_MILLI_PER_GPU, .mig_profile = -1};
static const ts_request FOUR_GPU = {.cpu_milli = 8000, .mem_mib = 65536, .num_gpu = 4,
                                    .gpu_milli = TS_MILLI_PER_GPU, .mig_profile = -1};
static const ts_request EIGHT_GPU = {.cpu_milli = 8000, .mem_mib = 65536, .num_gpu = 8,
                                     .gpu_milli = TS_MILLI_PER_GPU, .mig_profile = -1};

/* Empty nodes tie: the one that holds the image takes the task; without an
 * image, or with one held everywhere, node order decides as before. */
static void single_task_goes_where_its_image_is(void **state)
{
    fx *f = *state;
    f->held[0 * NODES + 2] = 10 * GB;
    ts_job j = a_job(1, &ONE_GPU, 1, 1);
    const ts_cycle_start *st = fresh_cycle(f, &j);
    assert_non_null(st);
    assert_int_equal(st->allocs[0].node, 2);
    j.image = 0;
    st = fresh_cycle(f, &j);
    assert_non_null(st);
    assert_int_equal(st->allocs[0].node, 0);
    j.image = 2; /* image 1: no node holds it, so every node is the same */
    st = fresh_cycle(f, &j);
    assert_int_equal(st->allocs[0].node, 0);
    for (int n = 0; n < NODES; n++)
        f->held[0 * NODES + n] = 10 * GB;
    j.image = 1;
    st = fresh_cycle(f, &j);
    assert_int_equal(st->allocs[0].node, 0);
    j.image = 7; /* past the table: no preference */
    st = fresh_cycle(f, &j);
    assert_int_equal(st->allocs[0].node, 0);
}

/* Seconds, not bytes: the node that needs the shortest pull wins. */
static void fewest_pull_seconds_win(void **state)
{
    fx *f = *state;
    f->held[0 * NODES + 1] = 3 * GB;
    f->held[0 * NODES + 3] = 8 * GB;
    ts_job j = a_job(1, &ONE_GPU, 1, 1);
    const ts_cycle_start *st = fresh_cycle(f, &j);
    assert_int_equal(st->allocs[0].node, 3);
    for (int n = 0; n < NODES; n++)
        f->bw[n] = TS_IMAGE_BW_DEFAULT_BYTES_S;
    f->bw[1] = 20.0 * TS_IMAGE_BW_DEFAULT_BYTES_S; /* 7 GB at 25 GB/s beats 2 GB at 1.25 */
    f->t.bw_bytes_s = f->bw;
    st = fresh_cycle(f, &j);
    assert_int_equal(st->allocs[0].node, 1);
    assert_true(ts_image_pull_s(&f->t, NODES, 0, 1) < ts_image_pull_s(&f->t, NODES, 0, 3));
    assert_true(ts_image_pull_s(&f->t, NODES, 0, 0) == 10.0 * GB / TS_IMAGE_BW_DEFAULT_BYTES_S);
}

/* A gang takes the nodes that hold its image when they tie with others. */
static void gang_goes_where_its_image_is(void **state)
{
    fx *f = *state;
    f->held[1 * NODES + 1] = 2 * GB;
    f->held[1 * NODES + 3] = 2 * GB;
    ts_request tasks[2] = {EIGHT_GPU, EIGHT_GPU};
    ts_job j = a_job(1, tasks, 2, 2);
    const ts_cycle_start *st = fresh_cycle(f, &j);
    assert_non_null(st);
    assert_int_equal(st->allocs[0].node + st->allocs[1].node, 1 + 3);
    assert_int_not_equal(st->allocs[0].node, st->allocs[1].node);
    j.image = 0;
    st = fresh_cycle(f, &j);
    assert_int_equal(st->allocs[0].node + st->allocs[1].node, 0 + 1);
}

/* A run of equal nodes longer than the measured head (tasks + 8): the
 * nodes at its end that hold the image are measured too and win. */
static void gang_finds_its_image_past_the_head(void **state)
{
    fx *f = *state;
    f->nnodes = NODES_MAX;
    f->t.held = NULL; /* rows are nnodes wide now */
    static int64_t held[2 * NODES_MAX];
    memset(held, 0, sizeof held);
    held[1 * NODES_MAX + 13] = 2 * GB;
    held[1 * NODES_MAX + 15] = 2 * GB;
    f->t.held = held;
    ts_request tasks[2] = {EIGHT_GPU, EIGHT_GPU};
    ts_job j = a_job(1, tasks, 2, 2);
    const ts_cycle_start *st = fresh_cycle(f, &j);
    assert_non_null(st);
    assert_int_equal(st->allocs[0].node + st->allocs[1].node, 13 + 15);
    assert_int_not_equal(st->allocs[0].node, st->allocs[1].node);
}

/* Packing keeps priority: with node 0 half full, a gang of two 4-GPU tasks
 * fills node 0 first (best fit) even though its image is on nodes 2 and 3;
 * the second task goes to the 8-free node that holds the image. */
static void image_never_beats_packing(void **state)
{
    fx *f = *state;
    ts_job first = a_job(1, &FOUR_GPU, 1, 0), first_copy = first;
    const ts_cycle_start *st = cycle(f, &first, NULL, 0);
    assert_non_null(st);
    assert_int_equal(st->allocs[0].node, 0);
    ts_alloc held = st->allocs[0];
    first.allocs = &held;
    first.start_s = 10.0;
    first.last_ckpt_s = 10.0;
    f->held[0 * NODES + 2] = 10 * GB;
    f->held[0 * NODES + 3] = 10 * GB;
    set_table(f);
    ts_request tasks[2] = {FOUR_GPU, FOUR_GPU};
    ts_job g = a_job(2, tasks, 2, 1);
    st = cycle(f, &g, &first, 1);
    assert_non_null(st);
    int a = st->allocs[0].node, b = st->allocs[1].node;
    assert_true((a == 0 && b == 2) || (a == 2 && b == 0));
    /* a single task: best fit on node 0 too (the gang undone first) */
    assert_int_equal(build(f), 0);
    st = cycle(f, &first_copy, NULL, 0);
    assert_int_equal(st->allocs[0].node, 0);
    held = st->allocs[0];
    set_table(f);
    ts_job one = a_job(3, &FOUR_GPU, 1, 1);
    st = cycle(f, &one, &first, 1);
    assert_int_equal(st->allocs[0].node, 0);
}

static bool same_state(const ts_node *a, const ts_node *b)
{
    if (a->cpu_used != b->cpu_used || a->mem_used != b->mem_used || a->ngpu != b->ngpu)
        return false;
    for (int g = 0; g < a->ngpu; g++)
        if (a->gpu[g].milli_used != b->gpu[g].milli_used || a->gpu[g].ntasks != b->gpu[g].ntasks)
            return false;
    return true;
}

/* The placer's keyed choice over random states and keys: the chosen node
 * scores what the unkeyed choice scores and is in the same state, and has
 * the lowest key of the nodes that are. */
static void keyed_choice_only_breaks_ties(void **state)
{
    (void)state;
    ts_rng g;
    ts_rng_seed(&g, 28);
    const struct ts_scorer_ops *ops = ts_scorer_find("bestfit");
    assert_non_null(ops);
    for (int round = 0; round < 200; round++) {
        ts_cluster *c = ts_cluster_new();
        int nn = 3 + (int)ts_rng_below(&g, 10);
        for (int i = 0; i < nn; i++) {
            char name[16];
            snprintf(name, sizeof name, "n%d", i);
            ts_node_spec sp = {.name = name, .gpu_model = "A10", .ngpu = 4,
                               .cpu_milli = 32000, .mem_mib = 262144};
            assert_int_equal(ts_cluster_add_node(c, &sp, NULL), i);
        }
        ts_sched_env env = {.cluster = c};
        ts_placer *p = ts_placer_new(c, ops, &env, 0, 1, NULL);
        assert_non_null(p);
        for (int k = (int)ts_rng_below(&g, 3 * (uint64_t)nn); k > 0; k--) {
            ts_request r = {.cpu_milli = 4000, .mem_mib = 8192, .mig_profile = -1,
                            .num_gpu = 1 + (int)ts_rng_below(&g, 2),
                            .gpu_milli = TS_MILLI_PER_GPU};
            ts_alloc a;
            (void)ts_placer_place(p, &r, -1, &a);
        }
        double key[16];
        for (int i = 0; i < nn; i++)
            key[i] = (double)ts_rng_below(&g, 3);
        ts_request r = {.cpu_milli = 4000, .mem_mib = 8192, .num_gpu = 1,
                        .gpu_milli = TS_MILLI_PER_GPU, .mig_profile = -1};
        ts_alloc ax, ay;
        int x = ts_placer_choose(p, &r, -1, NULL, NULL, &ax);
        int y = ts_placer_choose_keyed(p, &r, -1, NULL, NULL, key, &ay);
        assert_int_equal(x < 0, y < 0);
        if (x >= 0) {
            void *st = NULL;
            assert_int_equal(ops->init(&st, &env, NULL), 0);
            ts_rng rr;
            ts_rng_seed(&rr, 1);
            ts_alloc tmp;
            int64_t sx = ops->score(st, &c->nodes[x], &r, &tmp, &rr);
            assert_int_equal(ops->score(st, &c->nodes[y], &r, &tmp, &rr), sx);
            assert_true(same_state(&c->nodes[x], &c->nodes[y]));
            for (int i = 0; i < nn; i++)
                if (ts_node_fits(&c->nodes[i], &r) && same_state(&c->nodes[i], &c->nodes[x]) &&
                    ops->score(st, &c->nodes[i], &r, &tmp, &rr) == sx)
                    assert_true(key[y] <= key[i]);
            ops->fini(st);
        }
        ts_placer_free(p);
        ts_cluster_free(c);
    }
}

/* The job the cycle plans has its image fetched ahead (ts_decision.prefetch)
 * on its planned node first, then the node with a free GPU, then the nodes
 * of the running jobs in the order their time limits end them: the plan
 * names the node of the first to end, and any of them may end first. */
static void prefetch_names_where_it_could_start(void **state)
{
    fx *f = *state;
    /* nodes 0..2 full (limits ending 1010, 110, 510), node 3 half full */
    const double limit[4] = {1000.0, 100.0, 500.0, 2000.0};
    ts_job run[4];
    ts_alloc held[4];
    for (int k = 0; k < 4; k++) {
        run[k] = a_job(10 + k, k == 3 ? &FOUR_GPU : &EIGHT_GPU, 1, 0);
        run[k].time_limit_s = limit[k];
        const ts_cycle_start *st = cycle(f, &run[k], run, k);
        assert_non_null(st);
        assert_int_equal(st->allocs[0].node, k);
        held[k] = st->allocs[0];
        run[k].allocs = &held[k];
        run[k].start_s = 10.0;
        run[k].last_ckpt_s = 10.0;
    }
    set_table(f);
    ts_job w = a_job(2, &EIGHT_GPU, 1, 1);
    assert_null(cycle(f, &w, run, 4));
    assert_int_equal(f->d.planned, 0);
    assert_int_equal(f->d.nplanned_nodes, 1);
    assert_int_equal(f->d.planned_nodes[0], 1);
    assert_int_equal(f->d.nprefetch, 1);
    assert_int_equal(f->d.prefetch[0].job, 0);
    const int want[4] = {1, 3, 2, 0};
    assert_int_equal(f->d.prefetch[0].nnodes, 4);
    for (int k = 0; k < 4; k++)
        assert_int_equal(f->d.prefetch[0].nodes[k], want[k]);
}

static void bad_tables_name_the_entry(void **state)
{
    fx *f = *state;
    ts_err err = {0};
    f->bytes[1] = 0;
    assert_int_equal(ts_sched_set_images(f->s, &f->t, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "images[1].bytes"));
    f->bytes[1] = 2 * GB;
    f->held[0 * NODES + 3] = 11 * GB;
    assert_int_equal(ts_sched_set_images(f->s, &f->t, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "images[0].held[3]"));
    f->held[0 * NODES + 3] = 0;
    f->t.bw_bytes_s = f->bw; /* all 0 */
    assert_int_equal(ts_sched_set_images(f->s, &f->t, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "bw_bytes_s[0]"));
    assert_int_equal(ts_sched_set_images(f->s, NULL, &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(single_task_goes_where_its_image_is, setup, teardown),
        cmocka_unit_test_setup_teardown(fewest_pull_seconds_win, setup, teardown),
        cmocka_unit_test_setup_teardown(gang_goes_where_its_image_is, setup, teardown),
        cmocka_unit_test_setup_teardown(gang_finds_its_image_past_the_head, setup, teardown),
        cmocka_unit_test_setup_teardown(image_never_beats_packing, setup, teardown),
        cmocka_unit_test(keyed_choice_only_breaks_ties),
        cmocka_unit_test_setup_teardown(prefetch_names_where_it_could_start, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_tables_name_the_entry, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
