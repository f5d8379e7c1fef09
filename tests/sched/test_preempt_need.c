/*
 * test_preempt_need.c - no preemption without need (issue 23, finding 4-5):
 * the scheduling cycle (tessera/cycle.h) prefers a free instance, then a
 * reshape of idle MIG instances, and only then preemption; opportunistic
 * jobs of two tenants within their guarantees never take each other's room
 * in a loop; a gang whose spec names no level lands on one node.
 *
 * Each test builds its own small cluster so the answer can be worked out on
 * paper: an A100 node in MIG mode (GPU 0 runs an opportunistic 7g notebook,
 * GPUs 1-7 hold seven idle 1g instances each), three 4-GPU H100 nodes
 * (team-a guaranteed 8 H100, team-b and team-c 4 each), and two leaves of
 * 8-GPU nodes. Every scheduler runs tesserad's default configuration.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/cycle.h"
#include "tessera/load.h"
#include "tessera/mig_plan.h"
#include "tessera/tenant_load.h"

#define MAX_JOBS 16
#define MIG_GPUS 8
#define NODE_CPU_MILLI 128000
#define NODE_MEM_MIB 1048576
#define OLD_S 0.0      /* when the running jobs started: long past min_runtime */
#define NOW_S 5000.0
#define ROUND_S 70.0   /* past reclaim_min_runtime's default between rounds */
#define ROUNDS 6

static const char TENANTS_YAML[] =
    "tenants:\n"
    "  org:\n"
    "    guaranteed: {gpu: {H100-80GB: 16, A100-80GB: 8}}\n"
    "    teams:\n"
    "      team-a: {guaranteed: {gpu: {H100-80GB: 8, A100-80GB: 4}}}\n"
    "      team-b: {guaranteed: {gpu: {H100-80GB: 4, A100-80GB: 2}}}\n"
    "      team-c: {guaranteed: {gpu: {H100-80GB: 4, A100-80GB: 2}}}\n";

static const char H100_YAML[] =
    "topology:\n"
    "  levels: [leaf, gpu]\n"
    "node_classes:\n"
    "  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}\n"
    "nodes:\n"
    "  - {names: 'n[0-1]', class: g4, topology: {leaf: l0}}\n"
    "  - {name: n2, class: g4, topology: {leaf: l1}}\n";

/* Two leaves of 8-GPU nodes: p0, p1 on l0, p2 on l1. */
static const char GANG_YAML[] =
    "topology:\n"
    "  levels: [leaf, gpu]\n"
    "node_classes:\n"
    "  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 224000, memory_mib: 2097152}\n"
    "nodes:\n"
    "  - {names: 'p[0-1]', class: g8, topology: {leaf: l0}}\n"
    "  - {name: p2, class: g8, topology: {leaf: l1}}\n";

enum { ORG, TA, TB, TC };

typedef struct fx {
    ts_cluster *c;
    ts_tenants *ts;
    ts_quota *q;
    ts_sched *s;
    ts_decision d;
    ts_job jobs[MAX_JOBS];
    ts_request tasks[MAX_JOBS][2];
    ts_alloc allocs[MAX_JOBS][2];
    int njobs;
} fx;

static void fx_open(fx *f, ts_cluster *c)
{
    ts_err err;
    memset(f, 0, sizeof *f);
    f->c = c;
    assert_int_equal(ts_load_tenants_yaml(TENANTS_YAML, sizeof TENANTS_YAML - 1, "t.yaml",
                                          &f->ts, &err), 0);
    assert_int_equal(ts_quota_new(f->ts, 3600.0, &f->q, &err), 0);
    ts_sched_config cfg;
    ts_sched_config_default(&cfg); /* what tesserad runs */
    assert_int_equal(ts_sched_new(f->c, f->q, &cfg, &f->s, &err), 0);
    ts_decision_init(&f->d);
}

static void fx_open_yaml(fx *f, const char *yaml)
{
    ts_cluster *c = NULL;
    ts_err err;
    assert_int_equal(ts_load_cluster_yaml(yaml, strlen(yaml), "c.yaml", &c, &err), 0);
    fx_open(f, c);
}

static void fx_close(fx *f)
{
    ts_decision_fini(&f->d);
    ts_sched_free(f->s);
    ts_quota_free(f->q);
    ts_tenants_free(f->ts);
    ts_cluster_free(f->c);
}

static ts_job *job(fx *f, int tenant, int tier, int ntasks)
{
    assert_true(f->njobs < MAX_JOBS && ntasks <= 2);
    int n = f->njobs++;
    ts_job *j = &f->jobs[n];
    memset(j, 0, sizeof *j);
    j->id = 100 + n;
    j->tenant = tenant;
    j->tier = tier;
    j->time_limit_s = 100000;
    j->ckpt_grace_s = -1.0;
    j->tasks = f->tasks[n];
    j->ntasks = ntasks;
    j->required_level = TS_GANG_LEVEL_ANY;
    j->preferred_level = TS_GANG_LEVEL_ANY;
    j->submit_s = OLD_S;
    return j;
}

static ts_job *whole_job(fx *f, int tenant, int tier, int ntasks, int k)
{
    ts_job *j = job(f, tenant, tier, ntasks);
    for (int t = 0; t < ntasks; t++)
        f->tasks[j - f->jobs][t] = (ts_request){.cpu_milli = 1000, .mem_mib = 1024, .num_gpu = k,
                                                .gpu_milli = TS_MILLI_PER_GPU, .mig_profile = -1};
    return j;
}

static ts_job *mig_job(fx *f, int tenant, int tier, int profile)
{
    ts_job *j = job(f, tenant, tier, 1);
    f->tasks[j - f->jobs][0] = (ts_request){.cpu_milli = 1000, .mem_mib = 1024, .num_gpu = 1,
                                            .gpu_milli = 0, .mig_profile = profile};
    return j;
}

/* Binds j as running since start_s: task t on node[t], GPUs from gpu[t]
 * (a MIG task on the instance of its profile at mig_start). */
static void run_on(fx *f, ts_job *j, double start_s, const int *node, const int *gpu,
                   int mig_start)
{
    int n = (int)(j - f->jobs);
    for (int t = 0; t < j->ntasks; t++) {
        const ts_request *r = &j->tasks[t];
        ts_alloc *a = &f->allocs[n][t];
        memset(a, 0, sizeof *a);
        a->node = node[t];
        a->ngpu = r->num_gpu;
        for (int g = 0; g < a->ngpu; g++)
            a->gpu[g] = (int8_t)(gpu[t] + g);
        a->gpu_milli = r->gpu_milli;
        a->cpu_milli = r->cpu_milli;
        a->mem_mib = r->mem_mib;
        a->mig_profile = (int8_t)r->mig_profile;
        a->mig_start = (int8_t)(r->mig_profile >= 0 ? mig_start : -1);
        a->shape = (int8_t)ts_request_shape(r);
    }
    j->allocs = f->allocs[n];
    j->start_s = start_s;
    j->last_ckpt_s = start_s;
    j->stopping = false;
    ts_err err;
    assert_int_equal(ts_sched_start(f->s, j, start_s, &err), 0);
}

static void stop(fx *f, ts_job *j, double now)
{
    ts_err err;
    assert_int_equal(ts_sched_stop(f->s, j, now, &err), 0);
    j->allocs = NULL;
}

static void cycle(fx *f, double now, ts_job *const *w, int nw, ts_job *const *r, int nr)
{
    ts_job wv[MAX_JOBS], rv[MAX_JOBS];
    for (int i = 0; i < nw; i++)
        wv[i] = *w[i];
    for (int i = 0; i < nr; i++)
        rv[i] = *r[i];
    ts_err err;
    int rc = ts_sched_cycle(f->s, now, wv, nw, rv, nr, &f->d, &err);
    if (rc != 0)
        fail_msg("cycle: %s", err.msg);
}

/* ---- MIG: reshape before preemption -------------------------------------- */

static ts_mig_layout seven_1g(void)
{
    ts_mig_layout l = {.n = 7};
    for (int k = 0; k < 7; k++)
        l.inst[k] = (ts_mig_instance){TS_MIG_P_1G, (int8_t)k, 0};
    return l;
}

/* One A100-80GB node in MIG mode: GPU 0 one 7g instance, GPUs 1-7 seven 1g
 * instances each (GPU 1 one 7g instead with free7g). */
static ts_cluster *mig_cluster(bool free7g)
{
    ts_cluster *c = ts_cluster_new();
    assert_non_null(c);
    ts_mig_layout per[MIG_GPUS];
    per[0] = (ts_mig_layout){.n = 1, .inst = {{TS_MIG_P_7G, 0, 0}}};
    for (int g = 1; g < MIG_GPUS; g++)
        per[g] = seven_1g();
    if (free7g)
        per[1] = per[0];
    ts_node_spec s = {.name = "m0", .gpu_model = "A100-80GB", .ngpu = MIG_GPUS,
                      .cpu_milli = NODE_CPU_MILLI, .mem_mib = NODE_MEM_MIB,
                      .gpu_mode = TS_GPU_MIG, .per_gpu_mig = per};
    ts_err err;
    assert_int_equal(ts_cluster_add_node(c, &s, &err), 0);
    return c;
}

/* The finding: a guaranteed 7g job and team-b's opportunistic 7g notebook
 * on GPU 0, GPUs 1-7 holding only idle 1g instances. Preempting the
 * notebook would free a 7g instance; destroying seven idle 1g instances on
 * one GPU frees one too and disturbs nothing: the job waits for that
 * reshape, no victim. Once the shell applies the plan (as tesserad does
 * after the cycle) it starts on the reshaped GPU, the notebook untouched. */
static void test_mig_reshapes_rather_than_preempts(void **state)
{
    (void)state;
    fx f;
    fx_open(&f, mig_cluster(false));
    ts_job *nb = mig_job(&f, TB, TS_TIER_OPPORTUNISTIC, TS_MIG_P_7G);
    run_on(&f, nb, OLD_S, (int[]){0}, (int[]){0}, 0);
    ts_job *g = mig_job(&f, TA, TS_TIER_GUARANTEED, TS_MIG_P_7G);
    cycle(&f, NOW_S, &g, 1, &nb, 1);
    assert_int_equal(f.d.npreempts, 0);
    assert_int_equal(f.d.nstarts, 0);
    assert_int_equal(f.d.pending[0].reason, TS_PEND_FRAGMENTATION);
    assert_non_null(strstr(f.d.pending[0].why, "destroying idle instances on 1 GPU"));
    /* the shell's part: plan the waiting demand, apply it */
    ts_mig_demand dem = {.req = g->tasks[0], .count = 1};
    ts_mig_change ch[TS_MIG_PLAN_CHANGES_DEFAULT];
    size_t nch = 0;
    int served = 0;
    ts_err err;
    assert_int_equal(ts_mig_plan(f.c, &dem, 1, NULL, ch, TS_MIG_PLAN_CHANGES_DEFAULT, &nch,
                                 &served, &err), 0);
    assert_int_equal(nch, 1);
    assert_int_equal(served, 1);
    assert_int_equal(ts_mig_plan_apply(f.c, ch, nch, &err), 0);
    cycle(&f, NOW_S + 10, &g, 1, &nb, 1);
    assert_int_equal(f.d.npreempts, 0);
    assert_int_equal(f.d.nstarts, 1);
    assert_int_not_equal(f.d.starts[0].allocs[0].gpu[0], 0);
    assert_int_equal(f.d.starts[0].allocs[0].mig_profile, TS_MIG_P_7G);
    fx_close(&f);
}

/* Preemption stays when no reshape can help: each of GPUs 1-7 runs a 1g
 * instance of team-c's guaranteed work, so no GPU can be cleared for a 7g
 * without stopping it; the opportunistic notebook is the victim. */
static void test_mig_preempts_when_no_reshape_helps(void **state)
{
    (void)state;
    fx f;
    fx_open(&f, mig_cluster(false));
    ts_job *run[MIG_GPUS];
    run[0] = mig_job(&f, TB, TS_TIER_OPPORTUNISTIC, TS_MIG_P_7G);
    run_on(&f, run[0], OLD_S, (int[]){0}, (int[]){0}, 0);
    for (int gpu = 1; gpu < MIG_GPUS; gpu++) {
        run[gpu] = mig_job(&f, TC, TS_TIER_GUARANTEED, TS_MIG_P_1G);
        run_on(&f, run[gpu], OLD_S, (int[]){0}, (int[]){gpu}, gpu - 1);
    }
    ts_job *g = mig_job(&f, TA, TS_TIER_GUARANTEED, TS_MIG_P_7G);
    cycle(&f, NOW_S, &g, 1, run, MIG_GPUS);
    assert_int_equal(f.d.npreempts, 1);
    assert_int_equal(f.d.preempts[0].victim, 0);
    assert_int_equal(f.d.pending[0].reason, TS_PEND_PREEMPTING);
    fx_close(&f);
}

/* A free instance comes first: with an idle 7g instance on GPU 1 the job
 * starts there, nothing reshaped, nothing preempted. */
static void test_mig_free_instance_first(void **state)
{
    (void)state;
    fx f;
    fx_open(&f, mig_cluster(true));
    ts_job *nb = mig_job(&f, TB, TS_TIER_OPPORTUNISTIC, TS_MIG_P_7G);
    run_on(&f, nb, OLD_S, (int[]){0}, (int[]){0}, 0);
    ts_job *g = mig_job(&f, TA, TS_TIER_GUARANTEED, TS_MIG_P_7G);
    cycle(&f, NOW_S, &g, 1, &nb, 1);
    assert_int_equal(f.d.npreempts, 0);
    assert_int_equal(f.d.nstarts, 1);
    assert_int_equal(f.d.starts[0].allocs[0].gpu[0], 1);
    fx_close(&f);
}

/* ---- opportunistic work never preempts opportunistic work in a loop ------ */

/* n0 runs team-b's opportunistic job, within team-b's guarantee; n1 and n2
 * run team-c's loans (8 GPUs on a guarantee of 4), preempted as often as an
 * hour allows, so opportunistic work may not take them. Team-a, holding
 * nothing, has an opportunistic 4-GPU job within its guarantee. Team-b's job
 * is no loan: neither takes the other's room, however often they alternate
 * (before, each read the other as a loan and they preempted each other
 * round after round). The loans themselves still go back once the hour
 * allows it. */
static void test_opportunistic_jobs_do_not_thrash(void **state)
{
    (void)state;
    fx f;
    fx_open_yaml(&f, H100_YAML);
    ts_job *c1 = whole_job(&f, TC, TS_TIER_OPPORTUNISTIC, 1, 4);
    ts_job *c2 = whole_job(&f, TC, TS_TIER_OPPORTUNISTIC, 1, 4);
    run_on(&f, c1, OLD_S, (int[]){1}, (int[]){0}, -1);
    run_on(&f, c2, OLD_S, (int[]){2}, (int[]){0}, -1);
    c1->preemptions_hour = c2->preemptions_hour = 3;
    ts_job *a = whole_job(&f, TA, TS_TIER_OPPORTUNISTIC, 1, 4);
    ts_job *b = whole_job(&f, TB, TS_TIER_OPPORTUNISTIC, 1, 4);
    ts_job *holder = b, *waiter = a;
    run_on(&f, holder, OLD_S, (int[]){0}, (int[]){0}, -1);
    int preempted = 0;
    double now = NOW_S;
    for (int round = 0; round < ROUNDS; round++, now += ROUND_S) {
        ts_job *run[] = {c1, c2, holder};
        cycle(&f, now, &waiter, 1, run, 3);
        assert_int_equal(f.d.nstarts, 0);
        if (f.d.npreempts == 0)
            continue;
        /* what the shell would do: the victim stops, the preemptor starts */
        preempted++;
        assert_int_equal(run[f.d.preempts[0].victim]->id, holder->id);
        stop(&f, holder, now);
        run_on(&f, waiter, now, (int[]){0}, (int[]){0}, -1);
        ts_job *t = holder;
        holder = waiter;
        waiter = t;
    }
    assert_int_equal(preempted, 0);
    /* a loan is still a loan: c2 goes back to team-a once the hour allows */
    c2->preemptions_hour = 0;
    ts_job *run[] = {c1, c2, holder};
    cycle(&f, now, &waiter, 1, run, 3);
    assert_int_equal(f.d.npreempts, 1);
    assert_int_equal(f.d.preempts[0].victim, 1);
    fx_close(&f);
}

/* ---- gangs: compact first by default -------------------------------------- */

/* p1 (leaf l0) and p2 (leaf l1) have 4 GPUs free each, p0 is whole. A
 * 2 x 4-GPU gang whose spec names no level (preferred node, as the spec
 * layer sets it) lands on p0; asked for `any` explicitly it is packed by best
 * fit, one rank per leaf, keeping p0 whole for a job that needs a node. */
static void test_gang_compact_first(void **state)
{
    (void)state;
    for (int explicit_any = 0; explicit_any <= 1; explicit_any++) {
        fx f;
        fx_open_yaml(&f, GANG_YAML);
        ts_job *x = whole_job(&f, TB, TS_TIER_GUARANTEED, 1, 4);
        ts_job *y = whole_job(&f, TC, TS_TIER_GUARANTEED, 1, 4);
        run_on(&f, x, OLD_S, (int[]){1}, (int[]){0}, -1);
        run_on(&f, y, OLD_S, (int[]){2}, (int[]){0}, -1);
        ts_job *g = whole_job(&f, TA, TS_TIER_GUARANTEED, 2, 4);
        g->preferred_level = explicit_any ? TS_GANG_LEVEL_ANY : TS_GANG_LEVEL_NODE;
        ts_job *run[] = {x, y};
        cycle(&f, NOW_S, &g, 1, run, 2);
        assert_int_equal(f.d.nstarts, 1);
        const ts_alloc *al = f.d.starts[0].allocs;
        if (explicit_any) {
            assert_int_not_equal(al[0].node, al[1].node);
            assert_int_not_equal(al[0].node, 0);
            assert_int_not_equal(al[1].node, 0);
        } else {
            assert_int_equal(al[0].node, 0);
            assert_int_equal(al[1].node, 0);
        }
        fx_close(&f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mig_reshapes_rather_than_preempts),
        cmocka_unit_test(test_mig_preempts_when_no_reshape_helps),
        cmocka_unit_test(test_mig_free_instance_first),
        cmocka_unit_test(test_opportunistic_jobs_do_not_thrash),
        cmocka_unit_test(test_gang_compact_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
