/*
 * test_cycle.c - the scheduling cycle (tessera/cycle.h) on crafted clusters.
 *
 * The cluster: leaf l0 = n0, n1 (4 H100 each), leaf l1 = n2 (4 H100) and c0
 * (CPU only). Tenants: org > team-a, team-b, each guaranteed 4 GPUs (the org
 * 12). Each test sets up running jobs by hand so the answer can be worked out
 * on paper: start and charge, all or nothing, quota, borrowing and lending
 * limits, reclaim by preemption (victim choice, minimum runtime, preemptions
 * per hour, whole gangs), reservation and backfill that must not delay it,
 * pending reasons, fair-share order, resource proportionality, arrays, the
 * starvation bound over many cycles, and a random property test: no quota
 * invariant and no capacity is ever broken, no gang is ever partial.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/cycle_internal.h"
#include "sched/sched_world.h"
#include "tessera/cycle.h"
#include "tessera/load.h"
#include "tessera/rng.h"
#include "tessera/tenant_load.h"

static const char CLUSTER_YAML[] =
    "topology:\n"
    "  levels: [leaf, gpu]\n"
    "node_classes:\n"
    "  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}\n"
    "  cpu: {cpu_milli: 32000, memory_mib: 131072}\n"
    "nodes:\n"
    "  - {names: 'n[0-1]', class: g4, topology: {leaf: l0}}\n"
    "  - {name: n2, class: g4, topology: {leaf: l1}}\n"
    "  - {name: c0, class: cpu, topology: {leaf: l1}}\n";

static const char TENANTS_YAML[] =
    "tenants:\n"
    "  org:\n"
    "    guaranteed: {gpu: {H100-80GB: 12}}\n"
    "    teams:\n"
    "      team-a: {guaranteed: {gpu: {H100-80GB: 4}}}\n"
    "      team-b: {guaranteed: {gpu: {H100-80GB: 4}}}\n"
    "      team-c: {guaranteed: {gpu: {H100-80GB: 4}}}\n";

enum { N0, N1, N2, C0 };
enum { ORG, TA, TB, TC };
#define LEAF 0
#define MAX_JOBS 64
#define MAX_TASKS 4

typedef struct fx {
    ts_cluster *c;
    ts_tenants *ts;
    ts_quota *q;
    ts_sched *s;
    ts_sched_config cfg;
    ts_decision d;
    /* job storage: tasks and allocs per job */
    ts_job jobs[MAX_JOBS];
    ts_request tasks[MAX_JOBS][MAX_TASKS];
    ts_alloc allocs[MAX_JOBS][MAX_TASKS];
    int njobs;
} fx;

static int make(fx *f, const char *tenants)
{
    return sched_world_open(CLUSTER_YAML, tenants, &f->cfg, &f->c, &f->ts, &f->q, &f->s, &f->d);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    ts_sched_config_default(&f->cfg);
    if (make(f, TENANTS_YAML) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    sched_world_close(f->c, f->ts, f->q, f->s, &f->d);
    free(f);
    return 0;
}

/* Rebuilds the scheduler with another configuration or tenants. */
static void remake(fx *f, const char *tenants)
{
    sched_world_close(f->c, f->ts, f->q, f->s, &f->d);
    f->s = NULL;
    assert_int_equal(make(f, tenants), 0);
}

/* Without the split of a first level (docs/scheduler.md, "The split"): for
 * tests of another rule whose jobs would otherwise time-share their own
 * tenant's work, as a split tenant's do after las_split_min_runtime_s. */
static void no_split(fx *f)
{
    f->cfg.las_split_gpu_s = 0.0;
    remake(f, TENANTS_YAML);
}

/* EASY backfill's reservation is for every job under fifo; under las (the
 * default) only for jobs past the starvation bound. */
static void use_fifo(fx *f)
{
    f->cfg.order = TS_ORDER_FIFO;
    remake(f, TENANTS_YAML);
}

/* A job of ntasks tasks of k whole GPUs each (k 0: CPU only). */
static ts_job *job(fx *f, int tenant, int tier, int ntasks, int k, double limit_s)
{
    assert_true(f->njobs < MAX_JOBS && ntasks <= MAX_TASKS);
    int n = f->njobs++;
    ts_job *j = &f->jobs[n];
    memset(j, 0, sizeof *j);
    j->id = 100 + n;
    j->tenant = tenant;
    j->tier = tier;
    j->time_limit_s = limit_s;
    j->ckpt_grace_s = -1.0;
    j->tasks = f->tasks[n];
    j->ntasks = ntasks;
    j->required_level = TS_GANG_LEVEL_ANY;
    j->preferred_level = TS_GANG_LEVEL_ANY;
    for (int t = 0; t < ntasks; t++) {
        ts_request *r = &f->tasks[n][t];
        memset(r, 0, sizeof *r);
        r->cpu_milli = 1000;
        r->mem_mib = 1024;
        r->num_gpu = k;
        r->gpu_milli = k > 0 ? TS_MILLI_PER_GPU : 0;
        r->mig_profile = -1;
    }
    return j;
}

/* Binds job j as running since start_s on the given nodes, GPUs from first. */
static void run_on(fx *f, ts_job *j, double start_s, const int *nodes, const int *first_gpu)
{
    int n = (int)(j - f->jobs);
    for (int t = 0; t < j->ntasks; t++)
        sched_world_alloc(&f->allocs[n][t], &j->tasks[t], nodes[t], first_gpu[t]);
    j->allocs = f->allocs[n];
    j->start_s = start_s;
    j->last_ckpt_s = start_s;
    ts_err err;
    int rc_ = ts_sched_start(f->s, j, start_s, &err);
    if (rc_ != 0)
        print_error("start: %s\n", err.msg);
    assert_int_equal(rc_, 0);
}

static int cycle(fx *f, double now, ts_job *const *w, int nw, ts_job *const *r, int nr)
{
    ts_job wv[MAX_JOBS], rv[MAX_JOBS];
    for (int i = 0; i < nw; i++)
        wv[i] = *w[i];
    for (int i = 0; i < nr; i++)
        rv[i] = *r[i];
    ts_err err;
    int rc = ts_sched_cycle(f->s, now, wv, nw, rv, nr, &f->d, &err);
    if (rc != 0)
        print_error("cycle: %s\n", err.msg);
    for (int i = 0; rc == 0 && getenv("TS_TEST_VERBOSE") && i < nw; i++)
        print_message("job %lld: %s: %s\n", (long long)wv[i].id,
                      ts_pending_name(f->d.pending[i].reason), f->d.pending[i].why);
    return rc;
}

static int64_t gpu_usage(const fx *f, int t)
{
    return ts_quota_usage(f->q, t, ts_res_gpu(ts_gpu_model_lookup("H100-80GB")));
}

static int free_gpus(const fx *f) { return (int)ts_gang_index_free_gpus(ts_sched_gang_index(f->s), -1); }

/* ---- starting ------------------------------------------------------------ */

static void test_starts_and_charges(void **state)
{
    fx *f = *state;
    ts_job *a = job(f, TA, TS_TIER_GUARANTEED, 1, 2, 100);
    ts_job *b = job(f, TB, TS_TIER_GUARANTEED, 2, 2, 100);
    ts_job *w[] = {a, b};
    assert_int_equal(cycle(f, 0, w, 2, NULL, 0), 0);
    assert_int_equal(f->d.nstarts, 2);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_NONE);
    assert_int_equal(free_gpus(f), 12 - 6);
    assert_int_equal(gpu_usage(f, TA), 2000);
    assert_int_equal(gpu_usage(f, TB), 4000);
    assert_int_equal(gpu_usage(f, ORG), 6000);
    /* the started job's allocations are whole and bound */
    for (int k = 0; k < f->d.nstarts; k++) {
        const ts_job *j = w[f->d.starts[k].job];
        for (int t = 0; t < j->ntasks; t++)
            assert_int_equal(f->d.starts[k].allocs[t].ngpu, 2);
    }
    /* stopping returns everything */
    ts_job done = *b;
    done.allocs = f->d.starts[1].allocs;
    ts_err err;
    assert_int_equal(ts_sched_stop(f->s, &done, 50, &err), 0);
    assert_int_equal(gpu_usage(f, TB), 0);
    assert_int_equal(free_gpus(f), 12 - 2);
}

static void test_gang_all_or_nothing(void **state)
{
    fx *f = *state;
    use_fifo(f);
    /* n0 has 1 GPU busy until 1000: 2 tasks of 4 GPUs inside leaf l0 need n0
     * and n1 whole */
    ts_job *r = job(f, TC, TS_TIER_GUARANTEED, 1, 1, 1000);
    run_on(f, r, 0, (int[]){N0}, (int[]){0});
    ts_cluster *before = ts_cluster_clone(f->c);
    ts_job *g = job(f, TA, TS_TIER_OPPORTUNISTIC, 2, 4, 100);
    g->required_level = g->preferred_level = LEAF;
    assert_int_equal(cycle(f, 10, &g, 1, &r, 1), 0);
    assert_int_equal(f->d.nstarts, 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_TOPOLOGY);
    /* how far the gang gets in the widest leaf */
    assert_non_null(strstr(f->d.pending[0].why, "1 of 2 tasks fit in l0"));
    for (int i = 0; i < f->c->nnodes; i++) {
        assert_int_equal(f->c->nodes[i].cpu_used, before->nodes[i].cpu_used);
        assert_int_equal(f->c->nodes[i].gpus_free, before->nodes[i].gpus_free);
        assert_int_equal(f->c->nodes[i].ntasks, before->nodes[i].ntasks);
    }
    ts_cluster_free(before);
    /* it holds the reservation: at 1000, when r's time limit ends */
    assert_int_equal(f->d.reserved, 0);
    assert_true(f->d.reserved_at_s == 1000.0);
    /* a gang too big for any leaf can never run */
    ts_job *huge = job(f, TA, TS_TIER_OPPORTUNISTIC, 2, 4, 100);
    huge->required_level = huge->preferred_level = TS_GANG_LEVEL_NODE;
    assert_int_equal(cycle(f, 10, &huge, 1, &r, 1), 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_INVALID);
    assert_non_null(strstr(f->d.pending[0].why, "idle cluster"));
}

/* ---- quota ---------------------------------------------------------------- */

static void test_quota_guarantee_and_borrowing(void **state)
{
    fx *f = *state;
    /* guaranteed work must fit the guarantee: 8 > 4 */
    ts_job *big = job(f, TA, TS_TIER_GUARANTEED, 2, 4, 100);
    assert_int_equal(cycle(f, 0, &big, 1, NULL, 0), 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_QUOTA);
    assert_non_null(strstr(f->d.pending[0].why, "team-a"));
    /* opportunistic work borrows the idle guarantees */
    big->tier = TS_TIER_OPPORTUNISTIC;
    assert_int_equal(cycle(f, 0, &big, 1, NULL, 0), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(gpu_usage(f, TA), 8000);
    assert_true(ts_quota_borrowed(f->q, TA, ts_res_gpu(ts_gpu_model_lookup("H100-80GB"))) > 0);
}

static void test_quota_lend_and_borrow_limits(void **state)
{
    fx *f = *state;
    remake(f, "tenants:\n"
              "  org:\n"
              "    guaranteed: {gpu: {H100-80GB: 12}}\n"
              "    teams:\n"
              "      team-a: {guaranteed: {gpu: {H100-80GB: 4}}, borrow_limit: {gpu: {H100-80GB: 2}}}\n"
              "      team-b: {guaranteed: {gpu: {H100-80GB: 4}}, lend_limit: {gpu: {H100-80GB: 0}}}\n"
              "      team-c: {guaranteed: {gpu: {H100-80GB: 4}}, lend_limit: {gpu: {H100-80GB: 0}}}\n");
    /* team-a may borrow 2 at most: 4 + 3 is refused, 4 + 2 starts */
    ts_job *a7 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 1, 100);
    f->tasks[f->njobs - 1][0].num_gpu = 7;
    assert_int_equal(cycle(f, 0, &a7, 1, NULL, 0), 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_QUOTA);
    assert_non_null(strstr(f->d.pending[0].why, "borrow"));
    /* team-b lends nothing and team-c lends nothing: team-a cannot get 5 */
    ts_job *a5 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 1, 100);
    f->tasks[f->njobs - 1][0].num_gpu = 5;
    assert_int_equal(cycle(f, 0, &a5, 1, NULL, 0), 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_QUOTA);
}

/* ---- preemption ------------------------------------------------------------ */

/* team-a borrows everything with three opportunistic jobs; team-b's
 * guaranteed job takes 4 GPUs back. */
static void test_reclaim_takes_least_lost_work(void **state)
{
    fx *f = *state;
    ts_job *a1 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 10000);
    ts_job *a2 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 10000);
    ts_job *a3 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 10000);
    run_on(f, a1, 0, (int[]){N0}, (int[]){0});
    run_on(f, a2, 0, (int[]){N1}, (int[]){0});
    run_on(f, a3, 0, (int[]){N2}, (int[]){0});
    a1->last_ckpt_s = 1000; /* a2 checkpointed last at 1900: least lost */
    a2->last_ckpt_s = 1900;
    a3->last_ckpt_s = 1200;
    ts_job *b = job(f, TB, TS_TIER_GUARANTEED, 1, 4, 100);
    ts_job *run[] = {a1, a2, a3};
    assert_int_equal(cycle(f, 2000, &b, 1, run, 3), 0);
    assert_int_equal(f->d.nstarts, 0);
    assert_int_equal(f->d.npreempts, 1);
    assert_int_equal(f->d.preempts[0].victim, 1);
    assert_int_equal(f->d.preempts[0].signal, TS_SIGNAL_DEFAULT);
    assert_true(f->d.preempts[0].grace_s == f->cfg.default_grace_s);
    assert_true(f->d.preempts[0].lost_gpu_s == 4 * 100.0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_PREEMPTING);
    assert_int_equal(f->d.reserved, 0);
    /* the next cycle, a2 is stopping: no second victim, b still waits for it */
    ts_job a2s = *a2;
    a2s.stopping = true;
    a2s.stop_by_s = 2060;
    ts_job *run2[] = {a1, &a2s, a3};
    assert_int_equal(cycle(f, 2030, &b, 1, run2, 3), 0);
    assert_int_equal(f->d.npreempts, 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_PREEMPTING);
    /* a2 stopped: b starts on its GPUs */
    ts_err err;
    assert_int_equal(ts_sched_stop(f->s, &a2s, 2050, &err), 0);
    ts_job *run3[] = {a1, a3};
    assert_int_equal(cycle(f, 2050, &b, 1, run3, 2), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].allocs[0].node, N1);
}

/* The base rules, as time-sharing and a tenant's own jobs keep them: with
 * the loans' own floor and per-hour exemption turned off, a loan is
 * protected by its minimum runtime and its preemptions in the last hour
 * (test_loans_go_back_at_once has the defaults). */
static void test_victims_respect_min_runtime_and_rate(void **state)
{
    fx *f = *state;
    f->cfg.reclaim_min_runtime_s = -1.0;
    f->cfg.reclaim_ignores_hour_limit = false;
    remake(f, TENANTS_YAML);
    /* a requeued job backs off longer each time it is preempted */
    assert_true(ts_sched_backoff_s(f->s, 1) == f->cfg.backoff_base_s);
    assert_true(ts_sched_backoff_s(f->s, 3) == 4 * f->cfg.backoff_base_s);
    assert_true(ts_sched_backoff_s(f->s, 100) == 3600.0);
    ts_job *a1 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 10000);
    ts_job *a2 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 10000);
    ts_job *a3 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 10000);
    run_on(f, a2, 0, (int[]){N1}, (int[]){0});
    run_on(f, a3, 0, (int[]){N2}, (int[]){0});
    run_on(f, a1, 1900, (int[]){N0}, (int[]){0}); /* too young at 2000 */
    a2->preemptions_hour = f->cfg.max_preemptions_hour; /* preempted enough */
    ts_job *b = job(f, TB, TS_TIER_GUARANTEED, 1, 4, 100);
    ts_job *run[] = {a1, a2, a3};
    assert_int_equal(cycle(f, 2000, &b, 1, run, 3), 0);
    assert_int_equal(f->d.npreempts, 1);
    assert_int_equal(f->d.preempts[0].victim, 2);
    /* with a3 protected too there is no victim: b waits for capacity */
    a3->preemptions_hour = f->cfg.max_preemptions_hour;
    ts_job *b2 = job(f, TC, TS_TIER_GUARANTEED, 1, 4, 100);
    assert_int_equal(cycle(f, 2000, &b2, 1, run, 3), 0);
    assert_int_equal(f->d.npreempts, 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_CAPACITY);
}

/* Another tenant's loan goes back early to guaranteed work within its
 * tenant's guarantee: its own minimum runtime (reclaim_min_runtime, 60 s by
 * default, so work just started is not stopped again at once) instead of
 * min_runtime, and its preemptions in the last hour do not protect it (it
 * was lent; its checkpoint grace still applies). A job of the
 * opportunistic tier whose tenant stays within its guarantee takes loans
 * back too (Kueue's rule), but the per-hour limit still protects them from
 * it. */
static void test_loans_go_back_at_once(void **state)
{
    fx *f = *state;
    assert_true(f->cfg.reclaim_min_runtime_s == 60.0);
    ts_job *a[3];
    for (int k = 0; k < 3; k++) {
        a[k] = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 10000);
        run_on(f, a[k], 1990, (int[]){k}, (int[]){0}); /* 10 s old at 2000 */
        a[k]->preemptions_hour = f->cfg.max_preemptions_hour;
    }
    ts_job *run[] = {a[0], a[1], a[2]};
    ts_job *b = job(f, TB, TS_TIER_GUARANTEED, 1, 4, 100);
    /* younger than reclaim_min_runtime: no victim yet */
    assert_int_equal(cycle(f, 2000, &b, 1, run, 3), 0);
    assert_int_equal(f->d.npreempts, 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_CAPACITY);
    /* 70 s old, far below min_runtime: one goes back */
    assert_int_equal(cycle(f, 2060, &b, 1, run, 3), 0);
    assert_int_equal(f->d.npreempts, 1);
    assert_true(f->d.preempts[0].grace_s == f->cfg.default_grace_s);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_PREEMPTING);
    /* team-c's opportunistic job, team-c within its guarantee: the loans
     * preempted enough this hour stay */
    ts_job *c = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 4, 100);
    assert_int_equal(cycle(f, 2060, &c, 1, run, 3), 0);
    assert_int_equal(f->d.npreempts, 0);
    /* ... and one that was not goes back for it, young as it is */
    a[1]->preemptions_hour = 0;
    ts_job *c2 = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 4, 100);
    assert_int_equal(cycle(f, 2060, &c2, 1, run, 3), 0);
    assert_int_equal(f->d.npreempts, 1);
    assert_int_equal(f->d.preempts[0].victim, 1);
    /* with the rule off, the opportunistic job only borrows: no victim */
    f->cfg.reclaim_any_tier = false;
    remake(f, TENANTS_YAML);
    for (int k = 0; k < 3; k++)
        run_on(f, a[k], 1990, (int[]){k}, (int[]){0});
    ts_job *c3 = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 4, 100);
    assert_int_equal(cycle(f, 2060, &c3, 1, run, 3), 0);
    assert_int_equal(f->d.npreempts, 0);
}

/* A tenant owed a node's room that no loan gives gets it by a move: team-b's
 * guaranteed 1-GPU jobs on n0 and n1 and team-c's 4-GPU job on n2 leave six
 * GPUs free, at most three on a node, so team-a's 4-GPU job (within its
 * guarantee) fits nowhere and no loan can go. One of team-b's jobs is
 * stopped as a move (it fits again on the other node) and both start in
 * the next cycle. Not a job younger than reclaim_min_runtime, nor with the
 * rule off. */
static void test_guarantee_moves_smaller_job(void **state)
{
    fx *f = *state;
    double now = 5000.0;
    ts_job *b1 = job(f, TB, TS_TIER_GUARANTEED, 1, 1, 100000);
    ts_job *b2 = job(f, TB, TS_TIER_GUARANTEED, 1, 1, 100000);
    ts_job *c1 = job(f, TC, TS_TIER_GUARANTEED, 1, 4, 100000);
    ts_job *a = job(f, TA, TS_TIER_GUARANTEED, 1, 4, 1000);
    ts_job *run[] = {b1, b2, c1};
    for (int rule = 1; rule >= 0; rule--) {
        f->cfg.guarantee_moves = rule;
        remake(f, TENANTS_YAML);
        run_on(f, b1, now - 30, (int[]){N0}, (int[]){0});
        run_on(f, b2, now - 30, (int[]){N1}, (int[]){0});
        run_on(f, c1, now - 30, (int[]){N2}, (int[]){0});
        /* 30 s old: younger than reclaim_min_runtime, nothing moves yet */
        assert_int_equal(cycle(f, now, &a, 1, run, 3), 0);
        assert_int_equal(f->d.npreempts, 0);
        assert_int_equal(f->d.pending[0].reason, TS_PEND_FRAGMENTATION);
        assert_int_equal(cycle(f, now + 60, &a, 1, run, 3), 0);
        if (!rule) {
            assert_int_equal(f->d.npreempts, 0);
            continue;
        }
        assert_int_equal(f->d.npreempts, 1);
        assert_true(f->d.preempts[0].move);
        assert_false(f->d.preempts[0].time_sharing);
        int v = f->d.preempts[0].victim;
        assert_true(v == 0 || v == 1);
        assert_int_equal(f->d.pending[0].reason, TS_PEND_PREEMPTING);
        assert_non_null(strstr(f->d.pending[0].why, "moved"));
        /* the victim stopped: the job and the moved one both start */
        ts_job *moved = run[v];
        ts_err err;
        assert_int_equal(ts_sched_stop(f->s, moved, now + 61, &err), 0);
        moved->allocs = NULL;
        ts_job *w2[] = {a, moved};
        ts_job *r2[] = {run[1 - v], c1};
        assert_int_equal(cycle(f, now + 61, w2, 2, r2, 2), 0);
        assert_int_equal(f->d.nstarts, 2);
        assert_int_equal(f->d.npreempts, 0);
    }
}

#define DAY_S 86400.0

/* A guarantee is not another tenant's to hold back: team-a, over its
 * guarantee, has a starving job (three days of waiting, past the bound's
 * default two) that borrows a whole node; it holds the reservation on n1,
 * whole once team-b's small job there ends. Team-b's guaranteed job, within
 * team-b's guarantee and running past that time, fits only on n1's free
 * GPUs: it starts there (it waited as `reservation` before). */
static void test_guarantee_over_reservation(void **state)
{
    fx *f = *state;
    no_split(f);
    double now = 3 * DAY_S;
    ts_job *x1 = job(f, TA, TS_TIER_GUARANTEED, 1, 3, 2000);
    ts_job *y = job(f, TB, TS_TIER_GUARANTEED, 1, 1, 1500);
    ts_job *x2 = job(f, TC, TS_TIER_GUARANTEED, 1, 4, 1000000);
    ts_job *g = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 10000);
    g->submit_s = 0; /* past the starvation bound */
    ts_job *b = job(f, TB, TS_TIER_GUARANTEED, 1, 3, 10000);
    b->submit_s = now - 10;
    ts_job *w[] = {g, b};
    ts_job *run[] = {x1, y, x2};
    /* g would borrow: ordered by age, so it holds the reservation before
     * b's turn (with starving_borrowers_by_share b goes first anyway) */
    f->cfg.starving_borrowers_by_share = false;
    for (int rule = 1; rule >= 0; rule--) {
        f->cfg.guarantee_over_reservation = rule;
        remake(f, TENANTS_YAML);
        run_on(f, x1, now - 1000, (int[]){N0}, (int[]){0}); /* ends at now + 1000 */
        run_on(f, y, now - 1000, (int[]){N1}, (int[]){0});  /* ends at now + 500 */
        run_on(f, x2, now - 1000, (int[]){N2}, (int[]){0});
        assert_int_equal(cycle(f, now, w, 2, run, 3), 0);
        assert_int_equal(f->d.reserved, 0);
        assert_int_equal(f->d.npreempts, 0);
        if (rule) {
            assert_int_equal(f->d.nstarts, 1);
            assert_int_equal(f->d.starts[0].job, 1);
            assert_int_equal(f->d.starts[0].allocs[0].node, N1);
        } else {
            assert_int_equal(f->d.nstarts, 0);
            assert_int_equal(f->d.pending[1].reason, TS_PEND_RESERVATION);
        }
    }
}

/* A preemptor whose victims have stopped but whose room another job took
 * searches again at once, instead of waiting as `preempting` until its
 * entry runs out. */
static void test_preemptor_searches_again(void **state)
{
    fx *f = *state;
    ts_err err;
    ts_job *a1 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 100000);
    ts_job *a2 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 100000);
    ts_job *c1 = job(f, TC, TS_TIER_GUARANTEED, 1, 4, 100000);
    ts_job *b = job(f, TB, TS_TIER_GUARANTEED, 1, 4, 100000);
    ts_job *c2 = job(f, TC, TS_TIER_GUARANTEED, 1, 4, 100000);
    for (int rule = 1; rule >= 0; rule--) {
        f->cfg.preemptor_searches_again = rule;
        remake(f, TENANTS_YAML);
        run_on(f, a1, 0, (int[]){N0}, (int[]){0});
        run_on(f, a2, 0, (int[]){N1}, (int[]){0});
        run_on(f, c1, 0, (int[]){N2}, (int[]){0});
        ts_job *run[] = {a1, a2, c1};
        assert_int_equal(cycle(f, 2000, &b, 1, run, 3), 0);
        assert_int_equal(f->d.npreempts, 1);
        ts_job *v = f->d.preempts[0].victim == 0 ? a1 : a2;
        ts_job *other = v == a1 ? a2 : a1;
        /* the victim stopped; team-c's guaranteed job took its node */
        assert_int_equal(ts_sched_stop(f->s, v, 2030, &err), 0);
        run_on(f, c2, 2030, (int[]){v->allocs[0].node}, (int[]){0});
        ts_job *run2[] = {other, c1, c2};
        assert_int_equal(cycle(f, 2040, &b, 1, run2, 3), 0);
        assert_int_equal(f->d.npreempts, rule ? 1 : 0);
        if (rule)
            assert_int_equal(f->d.preempts[0].victim, 0);
        else
            assert_int_equal(f->d.pending[0].reason, TS_PEND_PREEMPTING);
    }
}

/* Two preemptors whose victims stop in different cycles: the room the
 * second one's victim freed first is kept for it, so the first waits for
 * its own victim rather than take it, and the second does not search
 * again and stop a third job (with the room not kept: three victims for
 * two jobs, and team-a below its guarantee). */
static void test_preemptor_room_is_kept_for_it(void **state)
{
    fx *f = *state;
    ts_err err;
    ts_job *a[3];
    for (int k = 0; k < 3; k++) {
        a[k] = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 100000);
        run_on(f, a[k], 0, (int[]){k}, (int[]){0});
    }
    ts_job *b = job(f, TB, TS_TIER_GUARANTEED, 1, 4, 100000);
    ts_job *c = job(f, TC, TS_TIER_GUARANTEED, 1, 4, 100000);
    ts_job *w[] = {b, c};
    assert_int_equal(cycle(f, 2000, w, 2, a, 3), 0);
    assert_int_equal(f->d.nstarts, 0);
    assert_int_equal(f->d.npreempts, 2);
    /* the second preemptor's victim stops first; the first's still stops */
    int first = f->d.preempts[0].preemptor, second = f->d.preempts[1].preemptor;
    ts_job *v1 = a[f->d.preempts[0].victim], *v2 = a[f->d.preempts[1].victim];
    ts_job *keep = a[3 - f->d.preempts[0].victim - f->d.preempts[1].victim];
    ts_job v1s = *v1;
    v1s.stopping = true;
    v1s.stop_by_s = 2060;
    assert_int_equal(ts_sched_stop(f->s, v2, 2010, &err), 0);
    ts_job *run2[] = {&v1s, keep};
    assert_int_equal(cycle(f, 2010, w, 2, run2, 2), 0);
    assert_int_equal(f->d.npreempts, 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].job, second);
    assert_int_equal(f->d.starts[0].allocs[0].node, v2->allocs[0].node);
    assert_int_equal(f->d.pending[first].reason, TS_PEND_PREEMPTING);
    /* its own victim stopped: the first starts on that room */
    assert_int_equal(ts_sched_stop(f->s, &v1s, 2020, &err), 0);
    ts_job *run3[] = {keep, w[second]};
    w[second]->allocs = f->d.starts[0].allocs;
    ts_job *w3[] = {w[first]};
    assert_int_equal(cycle(f, 2020, w3, 1, run3, 2), 0);
    assert_int_equal(f->d.npreempts, 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].allocs[0].node, v1->allocs[0].node);
    assert_int_equal(gpu_usage(f, TA), 4 * TS_MILLI_PER_GPU);
}

/* A tenant owed its guarantee while the loans in its way are younger than
 * reclaim_min_runtime: nothing is preempted yet, and its why and start
 * estimate say when the loans may go (not when they end: an hour). */
static void test_young_loans_say_when_they_may_go(void **state)
{
    fx *f = *state;
    ts_job *a[3];
    for (int k = 0; k < 3; k++) {
        a[k] = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 3600);
        run_on(f, a[k], 1000 + 10 * k, (int[]){k}, (int[]){0});
    }
    ts_job *b = job(f, TB, TS_TIER_GUARANTEED, 1, 4, 3600);
    assert_int_equal(cycle(f, 1025, &b, 1, a, 3), 0);
    assert_int_equal(f->d.npreempts, 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_CAPACITY);
    assert_non_null(strstr(f->d.pending[0].why, "the loans in its way ran under 1 min"));
    /* the youngest one enough for it reached the floor at 1060 (1000 + 60),
     * then its grace */
    double want = 1000 + f->cfg.reclaim_min_runtime_s + f->cfg.default_grace_s;
    assert_true(f->d.pending[0].estimated_s == want);
    /* at 1060 it is taken back */
    assert_int_equal(cycle(f, 1060, &b, 1, a, 3), 0);
    assert_int_equal(f->d.npreempts, 1);
}

static void test_victim_is_whole_gang_from_most_over_share(void **state)
{
    fx *f = *state;
    /* team-a: one 2-task gang on n0+n1 (2 GPUs each); team-c borrows less */
    ts_job *ga = job(f, TA, TS_TIER_OPPORTUNISTIC, 2, 2, 10000);
    run_on(f, ga, 0, (int[]){N0, N1}, (int[]){0, 0});
    ts_job *a2 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 10000);
    run_on(f, a2, 0, (int[]){N2}, (int[]){0});
    ts_job *c1 = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 2, 10000);
    run_on(f, c1, 0, (int[]){N0}, (int[]){2});
    ts_job *c2 = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 2, 10000);
    run_on(f, c2, 0, (int[]){N1}, (int[]){2});
    /* usage: a 8 (borrows 4), c 4 (borrows 0): team-a's work goes first */
    ts_job *b = job(f, TB, TS_TIER_GUARANTEED, 1, 4, 100);
    ts_job *run[] = {ga, a2, c1, c2};
    assert_int_equal(cycle(f, 5000, &b, 1, run, 4), 0);
    assert_int_equal(f->d.npreempts, 1);
    int v = f->d.preempts[0].victim;
    assert_true(v == 0 || v == 1);
    /* a 4-GPU task needs a whole node: the gang frees 2+2 on two nodes, so
     * only a2 (all of n2) makes room */
    assert_int_equal(v, 1);
}

/* ---- reservation and backfill ------------------------------------------ */

static void test_backfill_never_delays_reservation(void **state)
{
    fx *f = *state;
    use_fifo(f);
    /* n0: r1 (3 GPUs) until 100; n1: r2 (1 GPU) until 1000; n2 idle */
    ts_job *r1 = job(f, TC, TS_TIER_GUARANTEED, 1, 3, 100);
    ts_job *r2 = job(f, TC, TS_TIER_GUARANTEED, 1, 1, 1000);
    run_on(f, r1, 0, (int[]){N0}, (int[]){0});
    run_on(f, r2, 0, (int[]){N1}, (int[]){0});
    /* big: 2 x 4 GPUs inside one leaf: l0 (n0 + n1), free at 1000 */
    ts_job *big = job(f, TA, TS_TIER_OPPORTUNISTIC, 2, 4, 100);
    big->required_level = big->preferred_level = LEAF;
    big->submit_s = 0;
    ts_job *longj = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 2, 5000);  /* n2: off the plan */
    ts_job *shortj = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 2, 500);  /* ends 510 < 1000 */
    ts_job *longj2 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 2, 5000); /* would delay big */
    shortj->submit_s = longj->submit_s = longj2->submit_s = 1;
    ts_job *w[] = {big, longj, shortj, longj2};
    ts_job *run[] = {r1, r2};
    assert_int_equal(cycle(f, 10, w, 4, run, 2), 0);
    assert_int_equal(f->d.reserved, 0);
    assert_true(f->d.reserved_at_s == 1000.0);
    bool started[4] = {false};
    for (int k = 0; k < f->d.nstarts; k++) {
        started[f->d.starts[k].job] = true;
        assert_true(f->d.starts[k].backfilled);
        if (f->d.starts[k].job != 2)
            assert_int_equal(f->d.starts[k].allocs[0].node, N2);
    }
    assert_true(started[1] && started[2] && !started[3]);
    assert_int_equal(f->d.pending[3].reason, TS_PEND_RESERVATION);
    assert_non_null(strstr(f->d.pending[3].why, "reserved"));
    /* the short job, alone with free GPUs only on the plan, still backfills */
    ts_job *short2 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 3, 900);
    short2->submit_s = 2;
    ts_job *w2[] = {big, short2};
    assert_int_equal(cycle(f, 10, w2, 2, run, 2), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].allocs[0].node, N1);
}

/* ---- pending reasons -------------------------------------------------------- */

static void test_pending_reasons(void **state)
{
    fx *f = *state;
    ts_job *held = job(f, TA, TS_TIER_GUARANTEED, 1, 1, 100);
    held->held = true;
    ts_job *backoff = job(f, TA, TS_TIER_GUARANTEED, 1, 1, 100);
    backoff->eligible_s = 500;
    /* 2 tasks x 4 GPUs in one node: topology */
    ts_job *topo = job(f, TA, TS_TIER_OPPORTUNISTIC, 2, 4, 100);
    topo->required_level = topo->preferred_level = TS_GANG_LEVEL_NODE;
    ts_job *bad = job(f, TB, TS_TIER_GUARANTEED, 1, 1, 100);
    bad->priority = TS_PRIORITY_MAX + 1;
    ts_job *w[] = {held, backoff, topo, bad};
    assert_int_equal(cycle(f, 10, w, 4, NULL, 0), 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_HELD);
    assert_int_equal(f->d.pending[1].reason, TS_PEND_HELD);
    assert_non_null(strstr(f->d.pending[1].why, "backing off"));
    assert_int_equal(f->d.pending[3].reason, TS_PEND_INVALID);
    assert_non_null(strstr(f->d.pending[3].why, "priority"));
    assert_true(f->d.pending[2].reason == TS_PEND_TOPOLOGY ||
                f->d.pending[2].reason == TS_PEND_INVALID);
    assert_string_equal(ts_pending_name(TS_PEND_FRAGMENTATION), "fragmentation");
    assert_string_equal(ts_pending_name(TS_PEND_GANG), "gang");
    /* fragmentation: 1 + 1 + 2 GPUs free on n0, n1, n2: a 3-GPU task waits
     * (team-a's job only borrows here: it would take team-c's loans back
     * as a job within team-a's guarantee) */
    f->cfg.reclaim_any_tier = false;
    remake(f, TENANTS_YAML);
    ts_job *r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, i < 2 ? 3 : 2, 1000);
        run_on(f, r[i], 0, (int[]){i}, (int[]){0});
    }
    ts_job *three = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 3, 100);
    assert_int_equal(cycle(f, 10, &three, 1, r, 3), 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_FRAGMENTATION);
    /* a gang of two 2-GPU tasks: one would fit (n2), not both */
    ts_job *g = job(f, TA, TS_TIER_OPPORTUNISTIC, 2, 2, 100);
    assert_int_equal(cycle(f, 10, &g, 1, r, 3), 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_GANG);
}

/* ---- order ------------------------------------------------------------------ */

static void test_fair_share_orders_tenants(void **state)
{
    fx *f = *state;
    /* team-a used 4 GPUs for a long time; team-b nothing: b goes first */
    ts_job *old = job(f, TA, TS_TIER_GUARANTEED, 1, 4, 100000);
    run_on(f, old, 0, (int[]){N0}, (int[]){0});
    ts_job *hog = job(f, TB, TS_TIER_OPPORTUNISTIC, 1, 4, 100000);
    run_on(f, hog, 0, (int[]){N1}, (int[]){0});
    ts_err err;
    assert_int_equal(ts_sched_stop(f->s, old, 7200, &err), 0);
    /* hog keeps running; at 7200 team-a has decayed usage, team-c none */
    ts_job *a = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 100);
    ts_job *c = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 4, 100);
    a->submit_s = 0; /* older, but its tenant used more */
    c->submit_s = 7000;
    ts_job *x = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 100); /* fills after */
    ts_job *w[] = {a, c, x};
    assert_int_equal(cycle(f, 7200, w, 3, &hog, 1), 0);
    /* two nodes free (n0, n2): c first, then a; x waits */
    assert_int_equal(f->d.nstarts, 2);
    assert_int_equal(f->d.starts[0].job, 1);
    assert_int_equal(f->d.starts[1].job, 0);
    /* inside a tenant: priority class first */
    ts_job *lo = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 4, 100);
    ts_job *hi = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 4, 100);
    hi->priority = 10;
    hi->submit_s = 7100;
    ts_job *w2[] = {lo, hi};
    ts_job *run2[] = {hog};
    /* undo the starts so one node is free again */
    ts_job sa = *a, sc = *c;
    sa.allocs = f->d.starts[1].allocs;
    sc.allocs = f->d.starts[0].allocs;
    ts_job saved_a = sa, saved_c = sc;
    ts_alloc aa[1], ca[1];
    aa[0] = sa.allocs[0];
    ca[0] = sc.allocs[0];
    saved_a.allocs = aa;
    saved_c.allocs = ca;
    assert_int_equal(ts_sched_stop(f->s, &saved_c, 7300, &err), 0);
    assert_int_equal(cycle(f, 7300, w2, 2, run2, 1), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].job, 1);
    (void)saved_a;
}

/* Guaranteed work of any tenant goes before borrowing: team-a has the lower
 * share, but its job only borrows, and taking the last free node would leave
 * team-b's guaranteed job (inside its guarantee) with nothing to reclaim. */
static void test_guaranteed_before_borrowing(void **state)
{
    fx *f = *state;
    /* team-a's job only borrows: the rule that lets a job within its
     * tenant's guarantee count as guaranteed is off here */
    f->cfg.reclaim_any_tier = false;
    remake(f, TENANTS_YAML);
    ts_job *b1 = job(f, TB, TS_TIER_GUARANTEED, 1, 2, 100000);
    run_on(f, b1, 0, (int[]){N0}, (int[]){0});
    ts_job *c1 = job(f, TC, TS_TIER_GUARANTEED, 1, 4, 100000);
    run_on(f, c1, 0, (int[]){N1}, (int[]){0});
    /* team-c borrows the rest of n0, too young to be preempted */
    ts_job *c2 = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 2, 100000);
    run_on(f, c2, 3500, (int[]){N0}, (int[]){2});
    ts_job *a = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 1000);
    ts_job *b2 = job(f, TB, TS_TIER_GUARANTEED, 1, 2, 1000);
    a->submit_s = 0;
    b2->submit_s = 3600;
    assert_true(ts_quota_share(f->q, TA, 3600) < ts_quota_share(f->q, TB, 3600));
    ts_job *w[] = {a, b2};
    ts_job *run[] = {b1, c1, c2};
    assert_int_equal(cycle(f, 3600, w, 2, run, 3), 0);
    assert_int_equal(f->d.npreempts, 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].job, 1);
    assert_int_equal(f->d.starts[0].allocs[0].node, N2);
    /* the org's idle guarantee is gone: what a borrows would be b's */
    assert_int_equal(f->d.pending[0].reason, TS_PEND_QUOTA);
    assert_int_equal(f->d.pending[0].tenant_position, 0);
    assert_int_equal(f->d.pending[0].cluster_position, 1);
}

/* A starving job that would borrow waits for the guaranteed work of every
 * tenant: team-a holds its 4 and a young loan of 2 (inside the loans'
 * minimum runtime, so nobody can take it back); its 2-GPU job has waited
 * three days (the bound is two) and the last 2 free GPUs are team-b's idle guarantee. Ordered
 * first by its age, it took them and team-b's guaranteed job waited behind
 * a loan nobody could reclaim. */
static void test_starving_borrower_after_guarantees(void **state)
{
    fx *f = *state;
    no_split(f);
    double now = 3 * DAY_S;
    /* all inside min_runtime_s: no time-sharing */
    ts_job *ag = job(f, TA, TS_TIER_GUARANTEED, 1, 4, 1e6);
    run_on(f, ag, now - 300, (int[]){N0}, (int[]){0});
    ts_job *cg = job(f, TC, TS_TIER_GUARANTEED, 1, 4, 1e6);
    run_on(f, cg, now - 300, (int[]){N2}, (int[]){0});
    ts_job *al = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 2, 1e6);
    run_on(f, al, now - 10, (int[]){N1}, (int[]){0});
    ts_job *a = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 2, 1000);
    a->submit_s = 0;
    ts_job *b = job(f, TB, TS_TIER_GUARANTEED, 1, 2, 1000);
    b->submit_s = now;
    ts_job *w[] = {a, b};
    ts_job *run[] = {ag, cg, al};
    assert_int_equal(cycle(f, now, w, 2, run, 3), 0);
    assert_int_equal(f->d.npreempts, 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].job, 1);
    assert_int_equal(f->d.pending[1].cluster_position, 0);
    assert_int_equal(f->d.pending[0].cluster_position, 1);
    /* ordered by age alone, as before */
    f->cfg.starving_borrowers_by_share = false;
    remake(f, TENANTS_YAML);
    run_on(f, ag, now - 300, (int[]){N0}, (int[]){0});
    run_on(f, cg, now - 300, (int[]){N2}, (int[]){0});
    run_on(f, al, now - 10, (int[]){N1}, (int[]){0});
    assert_int_equal(cycle(f, now, w, 2, run, 3), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].job, 0);
}

/* Starving borrowers take what is lent by their tenants' shares, not by
 * age: team-a borrows 2 GPUs, team-c 1, of team-b's idle guarantee; one
 * GPU is left. team-a's starving job is the older, but team-c, holding
 * less, gets the GPU; by age alone, the tenant that borrowed most took it. */
static void test_starving_borrowers_by_share(void **state)
{
    fx *f = *state;
    no_split(f);
    double now = 3 * DAY_S;
    ts_job *run[4];
    run[0] = job(f, TA, TS_TIER_GUARANTEED, 1, 4, 1e6);
    run[1] = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 2, 1e6);
    run[2] = job(f, TC, TS_TIER_GUARANTEED, 1, 4, 1e6);
    run[3] = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 1, 1e6);
    ts_job *a = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 1, 1000);
    ts_job *c = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 1, 1000);
    a->submit_s = 0;
    c->submit_s = 10;
    ts_job *w[] = {a, c};
    for (int by_share = 1; by_share >= 0; by_share--) {
        f->cfg.starving_borrowers_by_share = by_share;
        remake(f, TENANTS_YAML);
        /* inside min_runtime_s: no time-sharing */
        run_on(f, run[0], now - 300, (int[]){N0}, (int[]){0});
        run_on(f, run[1], now - 300, (int[]){N1}, (int[]){0});
        run_on(f, run[2], now - 300, (int[]){N2}, (int[]){0});
        run_on(f, run[3], now - 300, (int[]){N1}, (int[]){2});
        assert_true(ts_quota_share(f->q, TC, now) < ts_quota_share(f->q, TA, now));
        assert_int_equal(cycle(f, now, w, 2, run, 4), 0);
        assert_int_equal(f->d.npreempts, 0);
        assert_int_equal(f->d.nstarts, 1);
        assert_int_equal(f->d.starts[0].job, by_share ? 1 : 0);
        assert_int_equal(f->d.pending[by_share ? 0 : 1].reason, TS_PEND_QUOTA);
    }
}

/* A tenant above its guarantee (its loans included) takes its own loans
 * back for its guaranteed job, not another borrower's: team-c has the higher
 * share, so before this rule its loan went first. */
static void test_reclaim_by_borrower_takes_own_loans(void **state)
{
    fx *f = *state;
    ts_job *cl = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 4, 100000);
    run_on(f, cl, 0, (int[]){N0}, (int[]){0});
    ts_job *ag = job(f, TA, TS_TIER_GUARANTEED, 1, 2, 100000);
    run_on(f, ag, 5000, (int[]){N1}, (int[]){0});
    ts_job *cg = job(f, TC, TS_TIER_GUARANTEED, 1, 2, 100000);
    run_on(f, cg, 5000, (int[]){N1}, (int[]){2});
    ts_job *al = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 100000);
    run_on(f, al, 5000, (int[]){N2}, (int[]){0});
    /* both borrow 2; team-c has the higher share */
    assert_true(ts_quota_share(f->q, TC, 6000) > ts_quota_share(f->q, TA, 6000));
    /* team-a holds 6 of its 4: its guaranteed 2-GPU job fits its guarantee
     * tier, but would have it borrow more */
    ts_job *a2 = job(f, TA, TS_TIER_GUARANTEED, 1, 2, 1000);
    ts_job *run[] = {cl, ag, cg, al};
    assert_int_equal(cycle(f, 6000, &a2, 1, run, 4), 0);
    assert_int_equal(f->d.npreempts, 1);
    assert_int_equal(f->d.preempts[0].victim, 3);
    assert_false(f->d.preempts[0].time_sharing);
    /* team-b, inside its guarantee, takes the loan of the most over share */
    ts_job *b2 = job(f, TB, TS_TIER_GUARANTEED, 1, 2, 1000);
    assert_int_equal(cycle(f, 6000, &b2, 1, run, 4), 0);
    assert_int_equal(f->d.npreempts, 1);
    assert_int_equal(f->d.preempts[0].victim, 0);
}

/* Fair reclaim: what is lent goes by weight, not by who borrowed first.
 * team-a weighs 2, the others 1. team-c borrowed early: 3 guaranteed GPUs
 * on n0 and three 1-GPU loans on n1 (6 held, 4 guaranteed); team-a holds
 * its 4 on n2; one GPU is free on n0 and one on n1 (team-b's idle
 * guarantee). team-a's 2-GPU job passes the quota (it borrows those 2) but
 * no node has 2 free. Team-a, the job started, holds 6 / 2 = 3 per unit of
 * weight, below team-c's 5 once a loan on n1 goes: the loan stops for it,
 * and the stopped loan cannot take its GPU back (team-c, 6 with it, would
 * not be below team-a's 3). With equal weights (3 against 5 becomes 6
 * against 5) or fair_reclaim off nothing moves. */
static const char FAIR_TENANTS_YAML[] =
    "tenants:\n"
    "  org:\n"
    "    guaranteed: {gpu: {H100-80GB: 12}}\n"
    "    teams:\n"
    "      team-a: {weight: 2, guaranteed: {gpu: {H100-80GB: 4}}}\n"
    "      team-b: {guaranteed: {gpu: {H100-80GB: 4}}}\n"
    "      team-c: {guaranteed: {gpu: {H100-80GB: 4}}}\n";

/* The rule's parts, on GPU milli (team-a weighs 2, team-c 1, each
 * guaranteed 4 GPUs): a margin of one more job, the loan's tenant keeps its
 * guarantee, the loan has run an hour. */
static void test_fair_reclaim_rule(void **state)
{
    fx *f = *state;
    remake(f, FAIR_TENANTS_YAML);
    /* (5 + 2 * 2) / 2 = 4.5 < (6 - 1) / 1 */
    assert_true(cycle_fair_takes(f->s, TA, 5000, 2000, TC, 6000, 1000));
    /* (6 + 2) / 2 = 4 < 5 alone, but one more job's margin: 5 < 5 fails */
    assert_false(cycle_fair_takes(f->s, TA, 6000, 2000, TC, 6000, 1000));
    /* the shares allow it ((0 + 2 * 2) / 2 = 2 < 3), but team-c would fall
     * to 3 GPUs, below its guarantee of 4 */
    assert_false(cycle_fair_takes(f->s, TA, 0, 2000, TC, 5000, 2000));
    assert_true(cycle_fair_takes(f->s, TA, 0, 2000, TC, 6000, 2000));
    /* the same tenant, or a loss above what it holds: never */
    assert_false(cycle_fair_takes(f->s, TC, 0, 1000, TC, 9000, 1000));
    assert_false(cycle_fair_takes(f->s, TA, 0, 1000, TC, 1000, 2000));
    ts_job *loan = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 1, 100000);
    loan->start_s = 1000;
    int64_t held[8] = {0};
    held[TA] = 4000;
    held[TC] = 6000;
    assert_false(cycle_fair_loan(f->s, 4599, loan, 1000, true, TA, 1000, held));
    assert_true(cycle_fair_loan(f->s, 4600, loan, 1000, true, TA, 1000, held));
    /* not when its tenant does not borrow, nor from guaranteed-tier work */
    assert_false(cycle_fair_loan(f->s, 4600, loan, 1000, false, TA, 1000, held));
    loan->tier = TS_TIER_GUARANTEED;
    assert_false(cycle_fair_loan(f->s, 4600, loan, 1000, true, TA, 1000, held));
}

static ts_job *fair_setup(fx *f, ts_job **run, int *nr)
{
    ts_job *cg = job(f, TC, TS_TIER_GUARANTEED, 1, 3, 100000);
    run_on(f, cg, 0, (int[]){N0}, (int[]){0});
    run[(*nr)++] = cg;
    ts_job *ag = job(f, TA, TS_TIER_GUARANTEED, 1, 4, 100000);
    run_on(f, ag, 0, (int[]){N2}, (int[]){0});
    run[(*nr)++] = ag;
    for (int k = 0; k < 3; k++) {
        ts_job *cl = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 1, 100000);
        run_on(f, cl, 100, (int[]){N1}, (int[]){k});
        run[(*nr)++] = cl;
    }
    assert_int_equal(free_gpus(f), 2);
    return job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 2, 1000);
}

static void test_fair_reclaim_between_borrowers(void **state)
{
    fx *f = *state;
    f->cfg.las_split_gpu_s = 0.0; /* no_split: another rule's test */
    f->cfg.fair_reclaim = true; /* the default */
    /* fair moves (test_fair_moves) would move a young loan to n0's free
     * GPU at once; this is the loan that stops after its hour */
    f->cfg.fair_moves = false;
    remake(f, FAIR_TENANTS_YAML);
    ts_job *run[8];
    int nr = 0;
    ts_job *ao = fair_setup(f, run, &nr);
    /* loans younger than an hour (past min_runtime): no victim */
    assert_int_equal(cycle(f, 3000, &ao, 1, run, nr), 0);
    assert_int_equal(f->d.npreempts, 0);
    assert_int_equal(cycle(f, 3800, &ao, 1, run, nr), 0);
    assert_int_equal(f->d.nstarts, 0);
    assert_int_equal(f->d.npreempts, 1);
    const ts_job *v = run[f->d.preempts[0].victim];
    assert_int_equal(v->tenant, TC);
    assert_int_equal(v->tier, TS_TIER_OPPORTUNISTIC);
    assert_false(f->d.preempts[0].time_sharing);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_PREEMPTING);
    assert_non_null(strstr(f->d.pending[0].why, "fair share"));
    /* the loan stops: team-a's job starts on n1 */
    ts_err err;
    assert_int_equal(ts_sched_stop(f->s, v, 3860, &err), 0);
    ts_job *run2[8];
    int nr2 = 0;
    for (int k = 0; k < nr; k++)
        if (run[k] != v)
            run2[nr2++] = run[k];
    assert_int_equal(cycle(f, 3860, &ao, 1, run2, nr2), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].allocs[0].node, N1);
    /* the cycle bound it: it runs from here */
    f->allocs[ao - f->jobs][0] = f->d.starts[0].allocs[0];
    ao->allocs = f->allocs[ao - f->jobs];
    ao->start_s = ao->last_ckpt_s = 3860;
    run2[nr2++] = ao;
    /* the stopped loan, waiting again, takes nothing back */
    ts_job *cback = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 1, 100000);
    assert_int_equal(cycle(f, 9000, &cback, 1, run2, nr2), 0);
    assert_int_equal(f->d.npreempts, 0);
    assert_int_equal(f->d.nstarts, 1); /* on n0's free GPU */
    assert_int_equal(f->d.starts[0].allocs[0].node, N0);
}

/* Fair moves (cfg.fair_moves): a tenant behind its share gets the node's
 * room that free GPUs spread over nodes would give. team-a (weight 2, no
 * guarantee) asks a 4-GPU job; team-c holds 5 GPUs (4 guaranteed), so it
 * borrows. n0: team-c's 1-GPU job and 3 free; n1: team-c's 3-GPU job and 1
 * free; n2: team-b's 2-GPU job, team-c's 1-GPU loan (younger than an hour)
 * and 1 free. No node has 4 free and no loan gives them; team-a, the job
 * started, would hold (0 + 2 * 4) / 2 = 4 GPUs per unit of weight, below
 * team-c's 5, so team-c's job on n0 moves to n1's free GPU. Nothing moves
 * with the rule off, nor with team-a weighing 1 (8 against 5), nor when
 * that job has run under 4 hours. */
static const char FAIR_MOVE_TENANTS_YAML[] =
    "tenants:\n"
    "  org:\n"
    "    guaranteed: {gpu: {H100-80GB: 12}}\n"
    "    teams:\n"
    "      team-a: {weight: %d}\n"
    "      team-b: {guaranteed: {gpu: {H100-80GB: 4}}}\n"
    "      team-c: {guaranteed: {gpu: {H100-80GB: 4}}}\n";

static void test_fair_moves(void **state)
{
    fx *f = *state;
    double now = 5.0 * 3600.0;
    ts_job *c1 = job(f, TC, TS_TIER_GUARANTEED, 1, 1, 100000);
    ts_job *c2 = job(f, TC, TS_TIER_GUARANTEED, 1, 3, 100000);
    ts_job *b1 = job(f, TB, TS_TIER_GUARANTEED, 1, 2, 100000);
    ts_job *c3 = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 1, 100000);
    ts_job *a = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 1000);
    ts_job *run[] = {c1, c2, b1, c3};
    /* the job moved has run 4 hours at least (FAIR_MOVE_MIN_AGE_S): team-c's
     * two guaranteed jobs started 3.9 hours ago move neither way */
    const struct { bool rule; int weight; double c_start; int moves; } cases[] = {
        {true, 2, 0.0, 1}, {false, 2, 0.0, 0}, {true, 1, 0.0, 0}, {true, 2, now - 3.9 * 3600, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, FAIR_MOVE_TENANTS_YAML, cases[k].weight);
        f->cfg.fair_reclaim = true;
        f->cfg.fair_moves = cases[k].rule;
        remake(f, yaml);
        run_on(f, b1, 0, (int[]){N2}, (int[]){0});
        run_on(f, c1, cases[k].c_start, (int[]){N0}, (int[]){0});
        run_on(f, c2, cases[k].c_start, (int[]){N1}, (int[]){0});
        run_on(f, c3, now - 600, (int[]){N2}, (int[]){2});
        assert_int_equal(cycle(f, now, &a, 1, run, 4), 0);
        assert_int_equal(f->d.nstarts, 0);
        assert_int_equal(f->d.npreempts, cases[k].moves);
        if (cases[k].moves == 0)
            continue;
        assert_true(f->d.preempts[0].move);
        assert_int_equal(f->d.preempts[0].victim, 0);
        assert_int_equal(f->d.pending[0].reason, TS_PEND_PREEMPTING);
        assert_non_null(strstr(f->d.pending[0].why, "moved"));
        assert_non_null(strstr(f->d.pending[0].why, "per unit of weight"));
    }
}

static void test_fair_reclaim_not_between_equals(void **state)
{
    fx *f = *state;
    f->cfg.las_split_gpu_s = 0.0; /* no_split: another rule's test */
    f->cfg.fair_reclaim = true; /* the default */
    remake(f, TENANTS_YAML);
    ts_job *run[8];
    int nr = 0;
    ts_job *ao = fair_setup(f, run, &nr);
    assert_int_equal(cycle(f, 1000, &ao, 1, run, nr), 0);
    assert_int_equal(f->d.npreempts, 0);
}

static void test_fair_reclaim_off(void **state)
{
    fx *f = *state;
    f->cfg.las_split_gpu_s = 0.0; /* no_split: another rule's test */
    f->cfg.fair_reclaim = false;
    remake(f, FAIR_TENANTS_YAML);
    ts_job *run[8];
    int nr = 0;
    ts_job *ao = fair_setup(f, run, &nr);
    assert_int_equal(cycle(f, 1000, &ao, 1, run, nr), 0);
    assert_int_equal(f->d.npreempts, 0);
}

/* Loans and guarantees go to separate nodes: n0 holds a guaranteed GPU of
 * team-b, n1 a loan of team-c, n2 nothing. A borrowing 1-GPU job goes next
 * to the loan (n1, which stays reclaimable whole), a guaranteed one next to
 * the guaranteed work (n0); before, both took n0, the lowest of the equal
 * nodes. */
static void test_loans_and_guarantees_on_separate_nodes(void **state)
{
    fx *f = *state;
    ts_job *bg = job(f, TB, TS_TIER_GUARANTEED, 1, 1, 100000);
    run_on(f, bg, 0, (int[]){N0}, (int[]){0});
    ts_job *cl = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 1, 100000);
    run_on(f, cl, 0, (int[]){N1}, (int[]){0});
    ts_job *run[] = {bg, cl};
    ts_job *ao = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 1, 1000);
    assert_int_equal(cycle(f, 100, &ao, 1, run, 2), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].allocs[0].node, N1);
    ts_job aos = *ao;
    ts_alloc aa = f->d.starts[0].allocs[0];
    aos.allocs = &aa;
    ts_err err;
    assert_int_equal(ts_sched_stop(f->s, &aos, 100, &err), 0);
    ts_job *ag = job(f, TA, TS_TIER_GUARANTEED, 1, 1, 1000);
    assert_int_equal(cycle(f, 100, &ag, 1, run, 2), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].allocs[0].node, N0);
    ts_job ags = *ag;
    ts_alloc ga = f->d.starts[0].allocs[0];
    ags.allocs = &ga;
    assert_int_equal(ts_sched_stop(f->s, &ags, 100, &err), 0);
    /* a side is a preference: with no room on its own side (n1 has 2 free,
     * n2 is guaranteed work's), a 3-GPU loan goes next to guaranteed work */
    ts_job *cl2 = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 1, 100000);
    run_on(f, cl2, 100, (int[]){N1}, (int[]){1});
    ts_job *cg = job(f, TC, TS_TIER_GUARANTEED, 1, 4, 100000);
    run_on(f, cg, 100, (int[]){N2}, (int[]){0});
    ts_job *run2[] = {bg, cl, cl2, cg};
    ts_job *o3 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 3, 1000);
    assert_int_equal(cycle(f, 100, &o3, 1, run2, 4), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].allocs[0].node, N0);
}

/* A victim search that failed is not made again for an identical job in the
 * same cycle, and costs no search: team-a's two identical jobs (which may
 * take only team-a's own, young loan) no longer use up the cycle's searches
 * before team-b's job, which can reclaim. */
static void test_failed_search_not_repeated(void **state)
{
    fx *f = *state;
    f->cfg.las_split_gpu_s = 0.0; /* no_split: another rule's test */
    f->cfg.max_preemptors_cycle = 2;
    remake(f, TENANTS_YAML);
    ts_err err;
    ts_job *co = job(f, TC, TS_TIER_OPPORTUNISTIC, 1, 4, 100000);
    run_on(f, co, 0, (int[]){N0}, (int[]){0});
    ts_job *cg = job(f, TC, TS_TIER_GUARANTEED, 1, 4, 100000);
    run_on(f, cg, 0, (int[]){N1}, (int[]){0});
    /* team-b used a node for a long time: its share is above team-a's */
    ts_job *bold = job(f, TB, TS_TIER_GUARANTEED, 1, 4, 100000);
    run_on(f, bold, 0, (int[]){N2}, (int[]){0});
    assert_int_equal(ts_sched_stop(f->s, bold, 5000, &err), 0);
    ts_job *al = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 100000);
    run_on(f, al, 5900, (int[]){N2}, (int[]){0});
    ts_job *a1 = job(f, TA, TS_TIER_GUARANTEED, 1, 2, 1000);
    ts_job *a2 = job(f, TA, TS_TIER_GUARANTEED, 1, 2, 1000);
    ts_job *b1 = job(f, TB, TS_TIER_GUARANTEED, 1, 2, 1000);
    assert_true(ts_quota_share(f->q, TA, 6000) < ts_quota_share(f->q, TB, 6000));
    ts_job *w[] = {a1, a2, b1};
    ts_job *run[] = {co, cg, al};
    assert_int_equal(cycle(f, 6000, w, 3, run, 3), 0);
    assert_int_equal(f->d.pending[2].cluster_position, 2);
    assert_int_equal(f->d.npreempts, 1);
    assert_int_equal(f->d.preempts[0].preemptor, 2);
    assert_int_equal(f->d.preempts[0].victim, 0);
}

static void test_drained_node_gets_no_work(void **state)
{
    fx *f = *state;
    ts_err err;
    assert_int_equal(ts_sched_node_set_schedulable(f->s, N0, false, &err), 0);
    assert_int_equal(ts_sched_node_set_schedulable(f->s, N1, false, &err), 0);
    assert_false(ts_sched_node_schedulable(f->s, N0));
    assert_int_equal(free_gpus(f), 4);
    /* two 4-GPU jobs: one fits on n2, the other waits; a CPU task avoids n0/n1 */
    ts_job *a = job(f, TA, TS_TIER_GUARANTEED, 1, 4, 100);
    ts_job *b = job(f, TB, TS_TIER_GUARANTEED, 1, 4, 100);
    ts_job *c = job(f, TC, TS_TIER_GUARANTEED, 1, 0, 100);
    ts_job *w[] = {a, b, c};
    assert_int_equal(cycle(f, 0, w, 3, NULL, 0), 0);
    assert_int_equal(f->d.nstarts, 2);
    for (int k = 0; k < f->d.nstarts; k++)
        assert_true(f->d.starts[k].allocs[0].node == N2 || f->d.starts[k].allocs[0].node == C0);
    assert_int_equal(ts_sched_node_set_schedulable(f->s, 99, false, &err), TS_EINVAL);
    /* every GPU node down (a controller that just started, its agents not
     * registered yet): a job that fits the cluster waits for capacity, and
     * only one that never fits it is invalid */
    assert_int_equal(ts_sched_node_set_schedulable(f->s, N2, false, &err), 0);
    ts_job *later = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 100);
    ts_job *never = job(f, TA, TS_TIER_OPPORTUNISTIC, 2, 4, 100);
    never->required_level = never->preferred_level = TS_GANG_LEVEL_NODE;
    ts_job *w2[] = {later, never};
    assert_int_equal(cycle(f, 0, w2, 2, NULL, 0), 0);
    assert_int_equal(f->d.nstarts, 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_CAPACITY);
    assert_non_null(strstr(f->d.pending[0].why, "once nodes that are down or drained"));
    assert_int_equal(f->d.pending[1].reason, TS_PEND_INVALID);
    assert_int_equal(ts_sched_node_set_schedulable(f->s, N2, true, &err), 0);
    /* back in service */
    assert_int_equal(ts_sched_node_set_schedulable(f->s, N0, true, &err), 0);
    assert_int_equal(free_gpus(f), 4);
}

/* ---- proportionality, caps, arrays ----------------------------------------- */

static void test_cpu_tasks_cannot_strand_gpus(void **state)
{
    fx *f = *state;
    int h100 = ts_gpu_model_lookup("H100-80GB");
    f->cfg.reserve_cpu_milli_per_gpu[h100] = 15000; /* 4 idle GPUs keep 60 of 64 cores */
    f->cfg.cap_cpu_milli_per_gpu[h100] = 16000;
    remake(f, TENANTS_YAML);
    /* c0 has 32 cores: a 30-core CPU job goes there; a second one cannot
     * take a GPU node's cores */
    ts_job *c1 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 0, 100);
    ts_job *c2 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 0, 100);
    f->tasks[f->njobs - 2][0].cpu_milli = 30000;
    f->tasks[f->njobs - 1][0].cpu_milli = 30000;
    ts_job *w[] = {c1, c2};
    assert_int_equal(cycle(f, 0, w, 2, NULL, 0), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(f->d.starts[0].allocs[0].node, C0);
    assert_int_equal(f->d.pending[1].reason, TS_PEND_CAPACITY);
    assert_non_null(strstr(f->d.pending[1].why, "kept for their idle GPUs"));
    /* a small CPU task fits beside the reservation (64 - 60 = 4 cores) */
    ts_job *c3 = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 0, 100);
    f->tasks[f->njobs - 1][0].cpu_milli = 3000;
    assert_int_equal(cycle(f, 0, &c3, 1, NULL, 0), 0);
    assert_int_equal(f->d.nstarts, 1);
    /* the cap: 40 cores for one GPU is refused with the field named */
    ts_job *fat = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 1, 100);
    f->tasks[f->njobs - 1][0].cpu_milli = 40000;
    ts_err err;
    assert_int_equal(ts_sched_check_job(f->s, fat, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "tasks[0].cpu_milli"));
    assert_int_equal(cycle(f, 0, &fat, 1, NULL, 0), 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_INVALID);
}

static void test_array_expands(void **state)
{
    fx *f = *state;
    ts_job *t = job(f, TA, TS_TIER_GUARANTEED, 1, 1, 100);
    ts_job arr[6];
    ts_err err;
    assert_int_equal(ts_job_array_expand(t, 6, 500, arr, &err), 0);
    assert_int_equal(arr[5].id, 505);
    assert_int_equal(ts_job_array_expand(t, 0, 500, arr, &err), TS_EINVAL);
    /* 6 one-GPU elements, team-a guaranteed 4: 4 start, 2 wait on quota */
    assert_int_equal(ts_sched_cycle(f->s, 0, arr, 6, NULL, 0, &f->d, &err), 0);
    assert_int_equal(f->d.nstarts, 4);
    assert_int_equal(f->d.pending[5].reason, TS_PEND_QUOTA);
}

/* ---- starvation bound --------------------------------------------------- */

/* team-b (weight 1000, and first on ties: always ordered first) keeps three fresh 4-GPU jobs
 * waiting, so its first blocked job holds the reservation and it takes every
 * node that frees; team-a's 12-GPU job waits for a moment when all are free.
 * Returns when it started, or -1 if not within the horizon. */
static double starving_big_job(fx *f, double starve_after_s)
{
    f->cfg.starve_after_s = starve_after_s;
    remake(f, "tenants:\n"
              "  org:\n"
              "    teams:\n"
              "      team-b: {weight: 1000}\n"
              "      team-a: {}\n");
    enum { LIMIT = 100, STEP = 10, HORIZON = 5000, SLOTS = 16, BACKLOG = 3 };
    ts_request big_task = {.cpu_milli = 1000, .mem_mib = 1024, .num_gpu = 4,
                           .gpu_milli = TS_MILLI_PER_GPU, .mig_profile = -1};
    ts_request big_tasks[3] = {big_task, big_task, big_task};
    ts_job big = {.id = 1, .tenant = 2, .tier = TS_TIER_OPPORTUNISTIC, .time_limit_s = LIMIT,
                  .tasks = big_tasks, .ntasks = 3, .required_level = TS_GANG_LEVEL_ANY,
                  .preferred_level = TS_GANG_LEVEL_ANY, .ckpt_grace_s = -1};
    ts_job jobs[SLOTS];
    ts_alloc allocs[SLOTS];
    double end[SLOTS];
    bool running[SLOTS] = {false}, used[SLOTS] = {false};
    int64_t next_id = 1000;
    for (double now = 0; now <= HORIZON; now += STEP) {
        ts_err err;
        for (int k = 0; k < SLOTS; k++)
            if (running[k] && end[k] <= now) {
                assert_int_equal(ts_sched_stop(f->s, &jobs[k], now, &err), 0);
                running[k] = used[k] = false;
            }
        int waiting_b = 0;
        for (int k = 0; k < SLOTS; k++)
            waiting_b += used[k] && !running[k];
        for (int k = 0; k < SLOTS && waiting_b < BACKLOG; k++)
            if (!used[k]) {
                jobs[k] = (ts_job){.id = next_id++, .tenant = 1, .tier = TS_TIER_OPPORTUNISTIC,
                                   .submit_s = now, .time_limit_s = LIMIT, .tasks = &big_task,
                                   .ntasks = 1, .required_level = TS_GANG_LEVEL_ANY,
                                   .preferred_level = TS_GANG_LEVEL_ANY, .ckpt_grace_s = -1};
                used[k] = true;
                waiting_b++;
            }
        ts_job w[SLOTS + 1], r[SLOTS];
        int wi[SLOTS + 1], nw = 0, nr = 0;
        w[nw] = big;
        wi[nw++] = -1;
        for (int k = 0; k < SLOTS; k++) {
            if (used[k] && !running[k]) {
                w[nw] = jobs[k];
                wi[nw++] = k;
            } else if (running[k]) {
                r[nr++] = jobs[k];
            }
        }
        assert_int_equal(ts_sched_cycle(f->s, now, w, nw, r, nr, &f->d, &err), 0);
        for (int s = 0; s < f->d.nstarts; s++) {
            int k = wi[f->d.starts[s].job];
            if (k < 0)
                return now;
            allocs[k] = f->d.starts[s].allocs[0];
            jobs[k].allocs = &allocs[k];
            jobs[k].start_s = now;
            running[k] = true;
            end[k] = now + LIMIT;
        }
    }
    return -1;
}

static void test_starvation_bound(void **state)
{
    fx *f = *state;
    enum { LIMIT = 100, STEP = 10 };
    /* without the bound the big job starves */
    assert_true(starving_big_job(f, 1e9) < 0);
    /* with it: starve_after + (0 + 1) * L, plus one cycle's step */
    double started = starving_big_job(f, 1000);
    assert_true(started >= 1000 && started <= 1000 + LIMIT + STEP);
}

/* ---- property: random workloads ----------------------------------------- */

#define PROP_CYCLES 300
#define PROP_SEED 77u

static void test_random_workloads_keep_invariants(void **state)
{
    fx *f = *state;
    ts_rng rng;
    ts_rng_seed(&rng, PROP_SEED);
    enum { SLOTS = 48 };
    ts_job jobs[SLOTS];
    ts_request tasks[SLOTS][MAX_TASKS];
    ts_alloc allocs[SLOTS][MAX_TASKS];
    double end[SLOTS];
    int state_of[SLOTS] = {0}; /* 0 free, 1 waiting, 2 running, 3 stopping */
    int64_t next_id = 1;
    int h100 = ts_gpu_model_lookup("H100-80GB");
    int starts = 0, preempts = 0;
    f->cfg.min_runtime_s = 60;
    remake(f, TENANTS_YAML);
    for (int cyc = 0; cyc < PROP_CYCLES; cyc++) {
        double now = cyc * 30.0;
        ts_err err;
        for (int k = 0; k < SLOTS; k++)
            if ((state_of[k] == 2 && end[k] <= now) ||
                (state_of[k] == 3 && jobs[k].stop_by_s <= now)) {
                assert_int_equal(ts_sched_stop(f->s, &jobs[k], now, &err), 0);
                state_of[k] = 0;
            }
        for (int k = 0; k < SLOTS; k++) {
            if (state_of[k] != 0 || ts_rng_next(&rng) % 3 != 0)
                continue;
            /* guaranteed: small and short; opportunistic: larger and longer */
            int tier = (int)(ts_rng_next(&rng) % 2);
            int nt = tier == TS_TIER_GUARANTEED ? 1 : 1 + (int)(ts_rng_next(&rng) % 3);
            int g = tier == TS_TIER_GUARANTEED ? 1 + (int)(ts_rng_next(&rng) % 2)
                                               : (int)(ts_rng_next(&rng) % 5);
            for (int t = 0; t < nt; t++)
                tasks[k][t] = (ts_request){.cpu_milli = 1000 + (int64_t)(ts_rng_next(&rng) % 8000),
                                           .mem_mib = 1024, .num_gpu = g,
                                           .gpu_milli = g ? TS_MILLI_PER_GPU : 0,
                                           .mig_profile = -1};
            jobs[k] = (ts_job){.id = next_id++, .tenant = 1 + (int)(ts_rng_next(&rng) % 3),
                               .tier = tier,
                               .priority = (int)(ts_rng_next(&rng) % 3),
                               .submit_s = now,
                               .time_limit_s = (tier == TS_TIER_GUARANTEED ? 60.0 : 600.0) +
                                               (double)(ts_rng_next(&rng) % 600),
                               .tasks = tasks[k], .ntasks = nt,
                               .required_level = ts_rng_next(&rng) % 2 ? TS_GANG_LEVEL_ANY : LEAF,
                               .preferred_level = TS_GANG_LEVEL_ANY, .ckpt_grace_s = 30};
            if (jobs[k].required_level == LEAF)
                jobs[k].preferred_level = LEAF;
            state_of[k] = 1;
        }
        ts_job w[SLOTS], r[SLOTS];
        int wi[SLOTS], ri[SLOTS], nw = 0, nr = 0;
        for (int k = 0; k < SLOTS; k++) {
            if (state_of[k] == 1) {
                w[nw] = jobs[k];
                wi[nw++] = k;
            } else if (state_of[k] >= 2) {
                r[nr] = jobs[k];
                ri[nr++] = k;
            }
        }
        assert_int_equal(ts_sched_cycle(f->s, now, w, nw, r, nr, &f->d, &err), 0);
        for (int s = 0; s < f->d.nstarts; s++) {
            int k = wi[f->d.starts[s].job];
            /* a gang starts whole */
            for (int t = 0; t < jobs[k].ntasks; t++) {
                allocs[k][t] = f->d.starts[s].allocs[t];
                assert_int_equal(allocs[k][t].ngpu, jobs[k].tasks[t].num_gpu);
            }
            jobs[k].allocs = allocs[k];
            jobs[k].start_s = now;
            jobs[k].last_ckpt_s = now;
            end[k] = now + jobs[k].time_limit_s * 0.5;
            state_of[k] = 2;
            if (f->d.pending[f->d.starts[s].job].reason != TS_PEND_NONE)
                print_error("cycle %d job %lld: %s\n", cyc, (long long)jobs[k].id,
                            f->d.pending[f->d.starts[s].job].why);
            assert_int_equal(f->d.pending[f->d.starts[s].job].reason, TS_PEND_NONE);
            starts++;
        }
        for (int p = 0; p < f->d.npreempts; p++) {
            int k = ri[f->d.preempts[p].victim];
            assert_int_equal(state_of[k], 2);
            /* guaranteed work of another tenant is never a victim; an
             * opportunistic preemptor (within its tenant's guarantee) only
             * takes other tenants' loans */
            const ts_job *pre = &w[f->d.preempts[p].preemptor];
            /* ... except a move (cfg.guarantee_moves): a one-task job with
             * fewer GPUs than its preemptor, stopped to restart elsewhere */
            bool move = f->d.preempts[p].move;
            int pre_gpus = 0;
            for (int t = 0; t < pre->ntasks; t++)
                pre_gpus += pre->tasks[t].num_gpu;
            if (move)
                assert_true(jobs[k].ntasks == 1 && jobs[k].tasks[0].num_gpu < pre_gpus);
            assert_true(move || jobs[k].tier == TS_TIER_OPPORTUNISTIC ||
                        jobs[k].tenant == pre->tenant);
            /* (las_split_cross_tier, the default: inside a split tenant the
             * levels decide, so its opportunistic job may time-share its
             * own guaranteed work) */
            bool own_split = f->cfg.las_split_cross_tier && f->cfg.las_split_gpu_s > 0.0 &&
                             jobs[k].tenant == pre->tenant && f->d.preempts[p].time_sharing;
            assert_true(move || own_split || pre->tier == TS_TIER_GUARANTEED ||
                        (jobs[k].tier == TS_TIER_OPPORTUNISTIC && jobs[k].tenant != pre->tenant));
            jobs[k].stopping = true;
            jobs[k].stop_by_s = now + f->d.preempts[p].grace_s;
            state_of[k] = 3;
            preempts++;
        }
        /* invariants: guaranteed usage within guarantees; capacity never exceeded */
        int64_t total = 0;
        for (int t = 1; t <= 3; t++) {
            assert_true(ts_quota_usage_tier(f->q, t, TS_TIER_GUARANTEED, ts_res_gpu(h100)) <= 4000);
            total += ts_quota_usage(f->q, t, ts_res_gpu(h100));
        }
        assert_true(total <= 12000);
        for (int i = 0; i < f->c->nnodes; i++) {
            const ts_node *n = &f->c->nodes[i];
            assert_true(n->cpu_used <= n->cpu_milli && n->mem_used <= n->mem_mib);
            assert_true(n->gpus_free >= 0 && n->gpus_free <= n->ngpu);
        }
        /* the index agrees with the nodes */
        int64_t free_nodes = 0;
        for (int i = 0; i < f->c->nnodes; i++)
            free_nodes += f->c->nodes[i].gpus_free;
        assert_int_equal(free_gpus(f), free_nodes);
        /* and everything the scheduler holds is what the bound jobs hold */
        ts_job held[SLOTS];
        int nh = 0;
        for (int k = 0; k < SLOTS; k++)
            if (state_of[k] >= 2)
                held[nh++] = jobs[k];
        if (ts_sched_check(f->s, held, nh, &err) != 0)
            print_error("cycle %d: %s\n", cyc, err.msg);
        assert_int_equal(ts_sched_check(f->s, held, nh, &err), 0);
        /* ... and the check sees a job the scheduler does not hold */
        if (nh > 0)
            assert_int_equal(ts_sched_check(f->s, held, nh - 1, &err), TS_EINVAL);
    }
    assert_true(starts > 50);
    assert_true(preempts > 0);
}

/* ---- attained-service order (las) and time-sharing ------------------------ */

#define LEVEL1_GPU_S (8.0 * 3600.0) /* the default first threshold */
#define NOW_S 100000.0

/* The whole cluster busy with team-a's opportunistic 4-GPU jobs that started
 * at start_s (so past level 2 by NOW_S unless start_s is recent). */
static void fill_with_team_a(fx *f, ts_job **run, double start_s)
{
    for (int n = 0; n < 3; n++) {
        run[n] = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 86400);
        run_on(f, run[n], start_s, (int[]){n}, (int[]){0});
    }
}

static int preempts_for(const fx *f, int preemptor)
{
    int n = 0;
    for (int k = 0; k < f->d.npreempts; k++)
        n += f->d.preempts[k].preemptor == preemptor;
    return n;
}

static void test_las_short_job_overtakes(void **state)
{
    fx *f = *state;
    ts_job *run[3];
    fill_with_team_a(f, run, 0);
    /* long: submitted first, already ran 2.5 GPU-h over its level-1 line;
     * fresh: submitted later, nothing attained */
    ts_job *longj = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 86400);
    longj->submit_s = NOW_S - 1000;
    longj->attained_gpu_s = LEVEL1_GPU_S + 9000;
    longj->queued_s = NOW_S - 100; /* waited far less than it ran: no promotion */
    ts_job *fresh = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 86400);
    fresh->submit_s = NOW_S - 900;
    ts_job *w[] = {longj, fresh};
    assert_int_equal(cycle(f, NOW_S, w, 2, run, 3), 0);
    assert_int_equal(f->d.pending[1].level, 0);
    assert_int_equal(f->d.pending[0].level, 1);
    assert_int_equal(f->d.pending[1].tenant_position, 0); /* fresh overtakes */
    assert_int_equal(f->d.pending[0].tenant_position, 1);
    /* the running jobs reached level 2: fresh time-shares with one of them */
    assert_true(preempts_for(f, 1) >= 1);
    for (int k = 0; k < f->d.npreempts; k++) {
        assert_true(f->d.preempts[k].time_sharing);
        assert_int_equal(f->d.preempts[k].victim_level, 2);
    }
    assert_int_equal(f->d.pending[1].reason, TS_PEND_PREEMPTING);
    assert_non_null(strstr(f->d.pending[1].why, "time-sharing"));

    /* under fifo the same queue keeps submission order and nobody time-shares */
    use_fifo(f);
    f->njobs = 0;
    fill_with_team_a(f, run, 0);
    longj = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 86400);
    longj->submit_s = NOW_S - 1000;
    longj->attained_gpu_s = LEVEL1_GPU_S + 9000;
    fresh = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 86400);
    fresh->submit_s = NOW_S - 900;
    ts_job *w2[] = {longj, fresh};
    assert_int_equal(cycle(f, NOW_S, w2, 2, run, 3), 0);
    assert_int_equal(f->d.pending[0].tenant_position, 0);
    assert_int_equal(f->d.pending[1].level, -1);
    assert_int_equal(f->d.npreempts, 0);
}

static void test_las_starving_job_is_promoted(void **state)
{
    fx *f = *state;
    no_split(f);
    ts_job *run[3];
    fill_with_team_a(f, run, NOW_S - 50); /* all within their minimum runtime */
    /* old: ran 9,000 s on 4 GPUs (level 1), has waited 10,000 s since: at the
     * default factor (1) it is promoted to level 0, before fresh by age */
    ts_job *old = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 86400);
    old->submit_s = NOW_S - 20000;
    old->attained_gpu_s = 4 * 9000.0;
    old->queued_s = NOW_S - 10000;
    ts_job *fresh = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 86400);
    fresh->submit_s = NOW_S - 900;
    ts_job *w[] = {fresh, old};
    assert_int_equal(cycle(f, NOW_S, w, 2, run, 3), 0);
    assert_int_equal(f->d.pending[1].level, 0);
    assert_int_equal(f->d.pending[1].tenant_position, 0);
    assert_int_equal(f->d.pending[0].tenant_position, 1);
    /* waited less than it ran: stays at level 1, behind fresh */
    w[1]->queued_s = NOW_S - 8000;
    assert_int_equal(cycle(f, NOW_S, w, 2, run, 3), 0);
    assert_int_equal(f->d.pending[1].level, 1);
    assert_int_equal(f->d.pending[1].tenant_position, 1);
    /* promotion off: never */
    f->cfg.las_promote_factor = 0;
    remake(f, TENANTS_YAML);
    f->njobs = 0;
    fill_with_team_a(f, run, NOW_S - 50);
    old = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 86400);
    old->attained_gpu_s = 4 * 9000.0;
    old->queued_s = 1;
    ts_job *w2[] = {old};
    assert_int_equal(cycle(f, NOW_S, w2, 1, run, 3), 0);
    assert_int_equal(f->d.pending[0].level, 1);
}

/* The starvation clock runs while a job waits, not while it runs: a job
 * (team-b's, within its guarantee, the cluster full of team-a's loans too
 * young to take back) submitted a day and 5,000 s ago that ran 9,450 s on
 * 4 GPUs and was requeued 100 s ago has waited 81,950 s in all: not
 * starving (it stays at its las level, behind a fresh job, and holds no
 * reservation); once it has waited starve_after_s it is, and goes first and
 * holds the reservation. (Counted from the submission, every long job
 * preempted after its first day went first at once, to be time-shared away
 * again by the next fresh job.) */
static void test_starvation_counts_waiting_not_running(void **state)
{
    fx *f = *state;
    f->cfg.las_promote_factor = 0; /* promotion apart: the starvation clock alone */
    remake(f, TENANTS_YAML);
    ts_job *run[3];
    fill_with_team_a(f, run, NOW_S - 50); /* loans too young to reclaim */
    ts_job *ran = job(f, TB, TS_TIER_GUARANTEED, 1, 4, 86400);
    ran->submit_s = NOW_S - f->cfg.starve_after_s - 5000;
    ran->attained_gpu_s = LEVEL1_GPU_S + 9000; /* 9,450 s on 4 GPUs */
    ran->queued_s = NOW_S - 100;
    ts_job *fresh = job(f, TB, TS_TIER_GUARANTEED, 1, 4, 86400);
    fresh->submit_s = NOW_S - 900;
    ts_job *w[] = {ran, fresh};
    assert_int_equal(cycle(f, NOW_S, w, 2, run, 3), 0);
    assert_int_equal(f->d.pending[1].cluster_position, 0);
    assert_int_equal(f->d.pending[0].cluster_position, 1);
    assert_int_equal(f->d.reserved, -1);
    /* 4,451 s more of waiting before its requeue: starving */
    ran->submit_s -= 4451;
    assert_int_equal(cycle(f, NOW_S, w, 2, run, 3), 0);
    assert_int_equal(f->d.pending[0].cluster_position, 0);
    assert_int_equal(f->d.reserved, 0);
    /* or the bound waited since its requeue alone */
    ran->queued_s = NOW_S - f->cfg.starve_after_s - 1;
    ran->submit_s = ran->queued_s - 9450; /* it never waited before its run */
    assert_int_equal(cycle(f, NOW_S, w, 2, run, 3), 0);
    assert_int_equal(f->d.pending[0].cluster_position, 0);
    assert_int_equal(f->d.reserved, 0);
}

/* Inside a level, first come first served (Tiresias' queues): of two
 * level-1 jobs, the one submitted first goes first though it attained
 * more; with las_fifo_within_level off, the one that attained less. */
static void test_las_fifo_within_level(void **state)
{
    fx *f = *state;
    for (int rule = 1; rule >= 0; rule--) {
        f->cfg.las_fifo_within_level = rule;
        remake(f, TENANTS_YAML);
        f->njobs = 0;
        ts_job *run[3];
        fill_with_team_a(f, run, NOW_S - 50); /* within their minimum runtime */
        ts_job *older = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 86400);
        older->submit_s = NOW_S - 50000;
        older->attained_gpu_s = LEVEL1_GPU_S + 20000; /* ran 12,200 s on 4 GPUs */
        older->queued_s = NOW_S - 100;                /* waited less: not promoted */
        ts_job *newer = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 86400);
        newer->submit_s = NOW_S - 20000;
        newer->attained_gpu_s = LEVEL1_GPU_S + 1000;
        newer->queued_s = NOW_S - 100;
        ts_job *w[] = {newer, older};
        assert_int_equal(cycle(f, NOW_S, w, 2, run, 3), 0);
        assert_int_equal(f->d.pending[0].level, 1);
        assert_int_equal(f->d.pending[1].level, 1);
        assert_int_equal(f->d.pending[1].tenant_position, rule ? 0 : 1); /* older */
        assert_int_equal(f->d.pending[0].tenant_position, rule ? 1 : 0);
        assert_int_equal(f->d.npreempts, 0);
    }
}

/* Victims of equal work at risk (all just checkpointed) and equal keys
 * otherwise: the fewest GPUs go, so team-b's 1-GPU guaranteed job stops one
 * of team-a's 1-GPU loans, not a 4-GPU one that attained more; with
 * victims_fewest_gpus off, the 4-GPU job goes. */
static void test_victims_fewest_gpus(void **state)
{
    fx *f = *state;
    for (int rule = 1; rule >= 0; rule--) {
        f->cfg.victims_fewest_gpus = rule;
        remake(f, TENANTS_YAML);
        f->njobs = 0;
        double start = 1000, now = start + 700; /* past the minimum runtime */
        ts_job *run[6];
        int nr = 0;
        run[nr] = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 86400);
        run_on(f, run[nr++], start, (int[]){N0}, (int[]){0});
        for (int g = 0; g < 4; g++) {
            run[nr] = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 1, 86400);
            run_on(f, run[nr++], start, (int[]){N1}, (int[]){g});
        }
        run[nr] = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 86400);
        run_on(f, run[nr++], start, (int[]){N2}, (int[]){0});
        for (int k = 0; k < nr; k++)
            run[k]->last_ckpt_s = now; /* nothing at risk anywhere */
        assert_int_equal(free_gpus(f), 0);
        ts_job *b = job(f, TB, TS_TIER_GUARANTEED, 1, 1, 3600);
        assert_int_equal(cycle(f, now, &b, 1, run, nr), 0);
        assert_int_equal(f->d.npreempts, 1);
        assert_false(f->d.preempts[0].time_sharing);
        assert_true(f->d.preempts[0].lost_gpu_s == 0.0);
        int v = f->d.preempts[0].victim;
        assert_int_equal(run[v]->tasks[0].num_gpu, rule ? 1 : 4);
        assert_int_equal(f->d.pending[0].reason, TS_PEND_PREEMPTING);
    }
}

static void test_las_victim_keeps_min_runtime(void **state)
{
    fx *f = *state;
    no_split(f);
    ts_job *run[3];
    /* level 2 by their earlier runs, but restarted 100 s ago (as after a
     * time-sharing preemption): not victims until the minimum runtime */
    fill_with_team_a(f, run, NOW_S - 100);
    for (int n = 0; n < 3; n++)
        run[n]->attained_gpu_s = 10 * LEVEL1_GPU_S;
    ts_job *fresh = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 86400);
    fresh->submit_s = NOW_S - 10;
    assert_int_equal(cycle(f, NOW_S, &fresh, 1, run, 3), 0);
    assert_int_equal(f->d.npreempts, 0);
    assert_int_not_equal(f->d.pending[0].reason, TS_PEND_PREEMPTING);
    /* past it: one of them goes */
    double later = NOW_S - 100 + f->cfg.min_runtime_s;
    assert_int_equal(cycle(f, later, &fresh, 1, run, 3), 0);
    assert_int_equal(f->d.npreempts, 1);
    assert_true(f->d.preempts[0].time_sharing);
    /* and one preempted as often as the hour allows is left alone */
    for (int n = 0; n < 3; n++)
        run[n]->preemptions_hour = f->cfg.max_preemptions_hour;
    assert_int_equal(cycle(f, later + 1, &fresh, 1, run, 3), 0);
    assert_int_equal(f->d.npreempts, 0);
}

static void test_las_plans_without_holding(void **state)
{
    fx *f = *state;
    no_split(f);
    /* n0 has 1 GPU busy until 1000; under las a 2 x 4 gang inside l0 is
     * planned (when it could start) but holds nothing: a later job still
     * takes n1 */
    ts_job *r = job(f, TC, TS_TIER_GUARANTEED, 1, 1, 1000);
    run_on(f, r, 0, (int[]){N0}, (int[]){0});
    ts_job *g = job(f, TA, TS_TIER_OPPORTUNISTIC, 2, 4, 100);
    g->required_level = g->preferred_level = LEAF;
    ts_job *small = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 5000);
    small->submit_s = 5;
    ts_job *w[] = {g, small};
    assert_int_equal(cycle(f, 10, w, 2, &r, 1), 0);
    assert_int_equal(f->d.reserved, -1);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_TOPOLOGY);
    assert_non_null(strstr(f->d.pending[0].why, "could start by t=1000s (in 17 min)"));
    assert_true(f->d.pending[0].estimated_s == 1000.0);
    assert_true(f->d.pending[1].estimated_s < 0.0); /* it started */
    assert_int_equal(f->d.nstarts, 1);
    /* a gang that no node holds is still found invalid */
    remake(f, TENANTS_YAML);
    ts_job *huge = job(f, TA, TS_TIER_OPPORTUNISTIC, 2, 4, 100);
    huge->required_level = huge->preferred_level = TS_GANG_LEVEL_NODE;
    assert_int_equal(cycle(f, 10, &huge, 1, NULL, 0), 0);
    assert_int_equal(f->d.pending[0].reason, TS_PEND_INVALID);
}

/* team-a's fresh opportunistic 4-GPU job, submitted 10 s ago, in a cycle
 * with the three running jobs */
static void fresh_job_of_a(fx *f, ts_job **run)
{
    ts_job *wa = job(f, TA, TS_TIER_OPPORTUNISTIC, 1, 4, 86400);
    wa->submit_s = NOW_S - 10;
    assert_int_equal(cycle(f, NOW_S, &wa, 1, run, 3), 0);
}

static void test_las_guaranteed_never_victim_of_other_tenant(void **state)
{
    fx *f = *state;
    /* n0: team-b's guaranteed job, n1: team-c's, n2: team-a's; all past
     * level 2 and their minimum runtime */
    ts_job *run[3];
    int tenants[3] = {TB, TC, TA};
    /* the default (split, cross tier): team-a's fresh opportunistic job
     * time-shares team-a's own guaranteed job, never the others'; without
     * the split, none of them */
    for (int split = 1; split >= 0; split--) {
        f->njobs = 0;
        if (!split)
            no_split(f);
        for (int n = 0; n < 3; n++) {
            run[n] = job(f, tenants[n], TS_TIER_GUARANTEED, 1, 4, 86400);
            run_on(f, run[n], 0, (int[]){n}, (int[]){0});
        }
        fresh_job_of_a(f, run);
        assert_int_equal(f->d.pending[0].level, 0);
        assert_int_equal(f->d.npreempts, split);
        if (split) {
            assert_int_equal(f->d.preempts[0].victim, 2);
            assert_true(f->d.preempts[0].time_sharing);
        }
    }
    /* but another tenant's opportunistic work at a higher level, yes (with
     * no guarantees anywhere, so that the quota lets it borrow) */
    f->njobs = 0;
    remake(f, "tenants:\n  org:\n    teams:\n      team-a: {}\n      team-b: {}\n"
              "      team-c: {}\n");
    run[0] = job(f, TB, TS_TIER_OPPORTUNISTIC, 1, 4, 86400);
    run_on(f, run[0], 0, (int[]){N0}, (int[]){0});
    for (int n = 1; n < 3; n++) {
        run[n] = job(f, tenants[n], TS_TIER_GUARANTEED, 1, 4, 86400);
        run_on(f, run[n], 0, (int[]){n}, (int[]){0});
    }
    fresh_job_of_a(f, run);
    assert_int_equal(f->d.npreempts, 1);
    assert_int_equal(f->d.preempts[0].victim, 0);
    assert_true(f->d.preempts[0].time_sharing);
}

/* The core decides on its own copy: a plan leaves the live cluster, quota
 * and index as they were, the apply binds its starts there, and a plan
 * never applied is forgotten at the next sync (the same decisions again). */
static void test_plan_on_copy_then_apply(void **state)
{
    fx *f = *state;
    ts_job *a = job(f, TA, TS_TIER_GUARANTEED, 1, 4, 3600);
    ts_job *b = job(f, TB, TS_TIER_GUARANTEED, 2, 2, 3600);
    ts_job wv[2] = {*a, *b};
    ts_err err;
    int free0 = free_gpus(f);
    assert_int_equal(ts_sched_sync(f->s, &err), 0);
    assert_int_equal(ts_sched_plan(f->s, 0, wv, 2, NULL, 0, &f->d, &err), 0);
    assert_int_equal(f->d.nstarts, 2);
    int64_t first_node = f->d.starts[0].allocs[0].node;
    /* nothing live moved: free GPUs, usage, the check against no job */
    assert_int_equal(free_gpus(f), free0);
    assert_int_equal(gpu_usage(f, TA), 0);
    assert_int_equal(ts_sched_check(f->s, NULL, 0, &err), 0);
    /* not applied (a write refused): the next plan decides the same */
    assert_int_equal(ts_sched_sync(f->s, &err), 0);
    assert_int_equal(ts_sched_plan(f->s, 0, wv, 2, NULL, 0, &f->d, &err), 0);
    assert_int_equal(f->d.nstarts, 2);
    assert_int_equal(f->d.starts[0].allocs[0].node, first_node);
    /* applied: bound and charged live, as the jobs holding them say */
    bool keep[2] = {true, true};
    assert_int_equal(ts_sched_apply(f->s, &f->d, wv, keep, 0, &err), 0);
    assert_int_equal(free_gpus(f), free0 - 8);
    assert_int_equal(gpu_usage(f, TA), 4 * TS_MILLI_PER_GPU);
    ts_job held[2];
    for (int k = 0; k < 2; k++) {
        held[k] = wv[f->d.starts[k].job];
        held[k].allocs = f->d.starts[k].allocs;
    }
    if (ts_sched_check(f->s, held, 2, &err) != 0)
        print_error("check: %s\n", err.msg);
    assert_int_equal(ts_sched_check(f->s, held, 2, &err), 0);
    /* the next cycle sees them: one more 4-GPU job fits on the one node left */
    ts_job *c = job(f, TC, TS_TIER_GUARANTEED, 1, 4, 3600);
    ts_job w2[1] = {*c};
    assert_int_equal(ts_sched_cycle(f->s, 1, w2, 1, held, 2, &f->d, &err), 0);
    assert_int_equal(f->d.nstarts, 1);
    assert_int_equal(free_gpus(f), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_starts_and_charges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_all_or_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quota_guarantee_and_borrowing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quota_lend_and_borrow_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reclaim_takes_least_lost_work, setup, teardown),
        cmocka_unit_test_setup_teardown(test_victims_respect_min_runtime_and_rate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_victim_is_whole_gang_from_most_over_share, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_backfill_never_delays_reservation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pending_reasons, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fair_share_orders_tenants, setup, teardown),
        cmocka_unit_test_setup_teardown(test_guaranteed_before_borrowing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_starving_borrower_after_guarantees, setup, teardown),
        cmocka_unit_test_setup_teardown(test_starving_borrowers_by_share, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fair_reclaim_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fair_reclaim_between_borrowers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fair_reclaim_not_between_equals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fair_reclaim_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fair_moves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reclaim_by_borrower_takes_own_loans, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_failed_search_not_repeated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loans_and_guarantees_on_separate_nodes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_drained_node_gets_no_work, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cpu_tasks_cannot_strand_gpus, setup, teardown),
        cmocka_unit_test_setup_teardown(test_array_expands, setup, teardown),
        cmocka_unit_test_setup_teardown(test_starvation_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_workloads_keep_invariants, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_on_copy_then_apply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loans_go_back_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_guarantee_moves_smaller_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_guarantee_over_reservation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preemptor_searches_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preemptor_room_is_kept_for_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_young_loans_say_when_they_may_go, setup, teardown),
        cmocka_unit_test_setup_teardown(test_las_short_job_overtakes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_las_fifo_within_level, setup, teardown),
        cmocka_unit_test_setup_teardown(test_victims_fewest_gpus, setup, teardown),
        cmocka_unit_test_setup_teardown(test_las_starving_job_is_promoted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_starvation_counts_waiting_not_running, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_las_victim_keeps_min_runtime, setup, teardown),
        cmocka_unit_test_setup_teardown(test_las_plans_without_holding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_las_guaranteed_never_victim_of_other_tenant, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
