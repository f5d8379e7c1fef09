/*
 * test_las_split.c - the split first las level (ts_sched_config.
 * las_split_gpu_s, issue 33): a tenant with a guarantee whose waiting
 * level-0 work outgrows what it holds puts its jobs past the split step
 * (and its jobs promoted by their wait) behind its fresh ones, which go
 * fewest GPUs first and may time-share the former; other tenants, and
 * tenants with no guarantee, keep one first level.
 *
 * One node of 4 GPUs. team-a is guaranteed all 4 and runs four 1-GPU jobs
 * that have held their GPU for 2 hours (2 GPU-hours each: level 0, past the
 * 1-GPU-hour split step). Its waiting fresh 1-GPU jobs each have 8
 * GPU-hours of level 0 left; with the defaults the first level overflows
 * when they exceed half of 8 GPU-hours per GPU held (4 held, 16
 * GPU-hours): 3 jobs do, 2 do not. With the split,
 * a fresh job takes a running job's GPU by time-sharing; without it (the
 * cycle before, las_split_gpu_s 0), equals of level 0 never swap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "sched/sched_world.h"
#include "tessera/cycle.h"

static const char CLUSTER_YAML[] =
    "topology:\n"
    "  levels: [leaf, gpu]\n"
    "node_classes:\n"
    "  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}\n"
    "nodes:\n"
    "  - {name: n0, class: g4, topology: {leaf: l0}}\n";

static const char GUARANTEED_YAML[] =
    "tenants:\n"
    "  org:\n"
    "    guaranteed: {gpu: {H100-80GB: 4}}\n"
    "    teams:\n"
    "      team-a: {guaranteed: {gpu: {H100-80GB: 4}}}\n"
    "      team-b: {guaranteed: {gpu: {H100-80GB: 0}}}\n";

/* the same team with no guarantee (a cluster with one team and no quotas) */
static const char NONE_YAML[] =
    "tenants:\n"
    "  org:\n"
    "    teams:\n"
    "      team-a: {}\n"
    "      team-b: {}\n";

enum { TA = 1 };
#define NOW_S 100000.0
#define RAN_S 7200.0 /* each running job's time on its GPU */
#define MAX_JOBS 16

typedef struct world {
    ts_cluster *c;
    ts_tenants *ts;
    ts_quota *q;
    ts_sched *s;
    ts_decision d;
    ts_job jobs[MAX_JOBS];
    ts_request tasks[MAX_JOBS];
    ts_alloc allocs[MAX_JOBS];
} world;

/* What waits before the fresh 1-GPU jobs: nothing, a job that already ran 2
 * GPU-hours, one that ran 9 (level 1) and has waited longer than that
 * since (promoted), a fresh job of 2 GPUs, or a job that ran half a
 * GPU-hour. */
enum earlier { NONE, REQUEUED, PROMOTED, WIDER, PARTWAY };

/* How the running jobs and the fresh ones stand: each running job's time
 * on its GPU, its GPU-seconds attained in all (0: RAN_S), its preemptions
 * in the last hour, and the tiers. */
typedef struct shape {
    double ran_s;
    double attained_s;
    int preemptions_hour;
    int fresh_tier;
    int run_tier;   /* the running jobs' */
    bool any_cause; /* preemptions need not be time-sharing */
} shape;

static const shape DEFAULT_SHAPE = {RAN_S, 0, 0, TS_TIER_GUARANTEED, TS_TIER_GUARANTEED, false};

/* Four running jobs of team-a and nwait fresh ones waiting, plus (unless
 * NONE) one waiting job submitted before them, under cfg; one cycle.
 * Returns the preemptions decided. */
static int run_shaped(world *w, const char *tenants, const ts_sched_config *cfg, int nwait,
                      enum earlier e, shape sh)
{
    assert_int_equal(sched_world_open(CLUSTER_YAML, tenants, cfg, &w->c, &w->ts, &w->q, &w->s,
                                      &w->d),
                     0);
    ts_job run[4], wait[MAX_JOBS];
    for (int k = 0; k < 4; k++) {
        ts_job *j = &w->jobs[k];
        sched_world_job(j, k, TA, &w->tasks[k], 1, 1, 86400);
        j->tier = sh.run_tier;
        assert_int_equal(sched_world_start(w->s, j, &w->allocs[k], 0, k, NOW_S - sh.ran_s), 0);
        j->attained_gpu_s = (sh.attained_s > 0 ? sh.attained_s : RAN_S) - sh.ran_s;
        j->preemptions_hour = sh.preemptions_hour;
        run[k] = *j;
    }
    int nw = 0;
    if (e == REQUEUED || e == PARTWAY) { /* ran, stopped, waits again (not promoted) */
        ts_job *j = &w->jobs[4];
        sched_world_job(j, 4, TA, &w->tasks[4], 1, 1, 86400);
        j->submit_s = NOW_S - 3 * RAN_S;
        j->attained_gpu_s = e == REQUEUED ? RAN_S : RAN_S / 4;
        j->queued_s = NOW_S - 600;
        wait[nw++] = *j;
    } else if (e == PROMOTED) { /* ran 9 GPU-hours, has waited 10 hours since */
        ts_job *j = &w->jobs[4];
        sched_world_job(j, 4, TA, &w->tasks[4], 1, 1, 86400);
        j->submit_s = NOW_S - 20 * 3600;
        j->attained_gpu_s = 9 * 3600;
        j->queued_s = NOW_S - 10 * 3600;
        wait[nw++] = *j;
    } else if (e == WIDER) { /* fresh, submitted first, asks 2 GPUs */
        ts_job *j = &w->jobs[4];
        sched_world_job(j, 4, TA, &w->tasks[4], 1, 2, 86400);
        j->submit_s = NOW_S - 3 * RAN_S;
        wait[nw++] = *j;
    }
    for (int k = 0; k < nwait; k++) {
        ts_job *j = &w->jobs[5 + k];
        sched_world_job(j, 5 + k, TA, &w->tasks[5 + k], 1, 1, 86400);
        j->submit_s = NOW_S - 300 + k;
        j->tier = sh.fresh_tier;
        wait[nw++] = *j;
    }
    ts_err err;
    assert_int_equal(ts_sched_cycle(w->s, NOW_S, wait, nw, run, 4, &w->d, &err), 0);
    for (int p = 0; p < w->d.npreempts && !sh.any_cause; p++)
        assert_true(w->d.preempts[p].time_sharing);
    return w->d.npreempts;
}

/* The split at its strictest, from which each test below turns on one
 * rule: one step at a GPU-hour (no mid step), a backlog of half a first level per GPU,
 * the cluster's limits for a tenant's own jobs, tiers kept. The default
 * turns them all on (test_split_defaults). */
static void split_base(ts_sched_config *cfg)
{
    ts_sched_config_default(cfg);
    cfg->las_split_gpu_s = 3600.0;
    cfg->las_split_backlog = 0.5;
    cfg->las_split_mid_gpu_s = 0.0;
    cfg->las_split_min_runtime_s = -1.0;
    cfg->las_split_max_preemptions_hour = -1;
    cfg->las_split_cross_tier = false;
}

/* run_shaped with split_base but the split step, the running jobs on
 * their GPU for RAN_S. */
static int run(world *w, const char *tenants, double split_gpu_s, int nwait, enum earlier e)
{
    ts_sched_config cfg;
    split_base(&cfg);
    cfg.las_split_gpu_s = split_gpu_s;
    return run_shaped(w, tenants, &cfg, nwait, e, DEFAULT_SHAPE);
}

static void done(world *w)
{
    sched_world_close(w->c, w->ts, w->q, w->s, &w->d);
    memset(w, 0, sizeof *w);
}

static void test_overflowing_first_level_is_time_shared(void **state)
{
    (void)state;
    world w = {0};
    assert_true(run(&w, GUARANTEED_YAML, 3600.0, 9, NONE) > 0);
    /* the levels shown are the configured ones: both parts are level 0 */
    assert_int_equal(w.d.pending[0].level, 0);
    assert_int_equal(w.d.preempts[0].victim_level, 0);
    const char *why = NULL;
    for (int i = 0; i < 9; i++)
        if (w.d.pending[i].reason == TS_PEND_PREEMPTING)
            why = w.d.pending[i].why;
    assert_non_null(why);
    assert_non_null(strstr(why, "first las level overflows"));
    done(&w);
    /* the cycle before: one first level, never time-shared */
    assert_int_equal(run(&w, GUARANTEED_YAML, 0.0, 9, NONE), 0);
    done(&w);
}

static void test_first_level_that_fits_is_not_split(void **state)
{
    (void)state;
    world w = {0};
    assert_int_equal(run(&w, GUARANTEED_YAML, 3600.0, 2, NONE), 0);
    done(&w);
    assert_true(run(&w, GUARANTEED_YAML, 3600.0, 3, NONE) > 0); /* one more overflows it */
    done(&w);
}

static void test_tenant_without_guarantee_is_not_split(void **state)
{
    (void)state;
    world w = {0};
    assert_int_equal(run(&w, NONE_YAML, 3600.0, 9, NONE), 0);
    done(&w);
}

/* The earlier job (waiting[0]) stands after the nine fresh ones in a split
 * first level and first in one first level. */
static void check_after_fresh_only_when_split(enum earlier e)
{
    world w = {0};
    run(&w, GUARANTEED_YAML, 3600.0, 9, e);
    assert_int_equal(w.d.pending[0].level, 0); /* the configured level is shown */
    assert_int_equal(w.d.pending[0].tenant_position, 9);
    assert_int_equal(w.d.pending[1].tenant_position, 0);
    done(&w);
    run(&w, GUARANTEED_YAML, 0.0, 9, e);
    assert_int_equal(w.d.pending[0].tenant_position, 0);
    assert_int_equal(w.d.pending[1].tenant_position, 1);
    done(&w);
}

/* A job past the split step waits behind the tenant's fresh jobs although
 * it was submitted first; with one first level it goes first. */
static void test_split_orders_fresh_jobs_first(void **state)
{
    (void)state;
    check_after_fresh_only_when_split(REQUEUED);
}

/* A job promoted by its wait goes before the fresh jobs, by submission, in
 * one first level; in a split one it goes after them, with the jobs past
 * the split step: a tenant whose backlog is deep would otherwise serve its
 * long jobs' requeues before any fresh short job. */
static void test_split_orders_promoted_jobs_after_fresh_ones(void **state)
{
    (void)state;
    check_after_fresh_only_when_split(PROMOTED);
}

/* Fresh jobs of a split first level go by the GPUs they ask, fewest first
 * (then by submission): the 2-GPU job submitted first stands after the
 * nine 1-GPU ones; in one first level it goes first. */
static void test_split_orders_fresh_jobs_by_size(void **state)
{
    (void)state;
    check_after_fresh_only_when_split(WIDER);
}

/* Two tenants, 4 GPUs each on a node of their own, both split (nine fresh
 * 1-GPU jobs waiting each) and the cycle allowed one victim search. team-a's
 * running jobs started 5 minutes ago, inside the minimum runtime: no swap
 * search of team-a's can find a victim. team-b's ran 2 hours, past the split
 * step: its fresh jobs may time-share them. team-a's jobs come first in the
 * order; its search, which cannot succeed, is not made, so team-b's is. */
static const char TWO_NODES_YAML[] =
    "topology:\n"
    "  levels: [leaf, gpu]\n"
    "node_classes:\n"
    "  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}\n"
    "nodes:\n"
    "  - {name: n0, class: g4, topology: {leaf: l0}}\n"
    "  - {name: n1, class: g4, topology: {leaf: l0}}\n";

static const char TWO_TEAMS_YAML[] =
    "tenants:\n"
    "  org:\n"
    "    guaranteed: {gpu: {H100-80GB: 8}}\n"
    "    teams:\n"
    "      team-a: {guaranteed: {gpu: {H100-80GB: 4}}}\n"
    "      team-b: {guaranteed: {gpu: {H100-80GB: 4}}}\n";

enum { TB = 2 };

static void test_split_search_without_candidate_spends_no_bound(void **state)
{
    (void)state;
    ts_sched_config cfg;
    split_base(&cfg);
    cfg.max_preemptors_cycle = 1;
    ts_cluster *c;
    ts_tenants *ts;
    ts_quota *q;
    ts_sched *s;
    ts_decision d;
    assert_int_equal(sched_world_open(TWO_NODES_YAML, TWO_TEAMS_YAML, &cfg, &c, &ts, &q, &s, &d),
                     0);
    static ts_job jobs[26];
    static ts_request tasks[26];
    static ts_alloc allocs[8];
    ts_job run[8], wait[18];
    for (int n = 0; n < 8; n++) { /* started in time order: team-b's first */
        int k = (n + 4) % 8, team = k < 4 ? TA : TB;
        ts_job *j = &jobs[k];
        sched_world_job(j, k, team, &tasks[k], 1, 1, 86400);
        /* team-a's inside the minimum runtime; team-b's past the split step */
        double ran = team == TA ? 300.0 : RAN_S;
        assert_int_equal(sched_world_start(s, j, &allocs[k], k / 4, k % 4, NOW_S - ran), 0);
        j->attained_gpu_s = team == TA ? RAN_S : 0.0; /* team-a's ran before too */
        run[k] = *j;
    }
    for (int k = 0; k < 18; k++) {
        ts_job *j = &jobs[8 + k];
        sched_world_job(j, 8 + k, k < 9 ? TA : TB, &tasks[8 + k], 1, 1, 86400);
        j->submit_s = NOW_S - 300 + k;
        wait[k] = *j;
    }
    ts_err err;
    assert_int_equal(ts_sched_cycle(s, NOW_S, wait, 18, run, 8, &d, &err), 0);
    assert_int_equal(d.npreempts, 1);
    assert_true(d.preempts[0].time_sharing);
    assert_true(d.preempts[0].victim >= 4); /* one of team-b's */
    assert_int_equal(d.pending[9].reason, TS_PEND_PREEMPTING); /* team-b's first */
    sched_world_close(c, ts, q, s, &d);
}

/* A split tenant's own jobs keep the split's limits, not the cluster's:
 * running for 2 minutes (inside the 10-minute minimum runtime) or
 * preempted 3 times this hour (the default limit), team-a's running jobs
 * are past the split step and time-shared by its fresh jobs only once
 * las_split_min_runtime_s or las_split_max_preemptions_hour allows it. */
static void test_split_limits_protect_own_jobs(void **state)
{
    (void)state;
    world w = {0};
    ts_sched_config cfg;
    split_base(&cfg);
    shape young = {120.0, 0, 0, TS_TIER_GUARANTEED, TS_TIER_GUARANTEED, false};
    shape often = {RAN_S, 0, 3, TS_TIER_GUARANTEED, TS_TIER_GUARANTEED, false};
    assert_int_equal(run_shaped(&w, GUARANTEED_YAML, &cfg, 9, NONE, young), 0);
    done(&w);
    assert_int_equal(run_shaped(&w, GUARANTEED_YAML, &cfg, 9, NONE, often), 0);
    done(&w);
    cfg.las_split_min_runtime_s = 60.0;
    assert_true(run_shaped(&w, GUARANTEED_YAML, &cfg, 9, NONE, young) > 0);
    done(&w);
    assert_int_equal(run_shaped(&w, GUARANTEED_YAML, &cfg, 9, NONE, often), 0);
    done(&w);
    cfg.las_split_max_preemptions_hour = 10;
    assert_true(run_shaped(&w, GUARANTEED_YAML, &cfg, 9, NONE, often) > 0);
    done(&w);
    /* a first level that fits is not split: the cluster's limits hold */
    assert_int_equal(run_shaped(&w, GUARANTEED_YAML, &cfg, 2, NONE, young), 0);
    done(&w);
}

/* A tenant at its guarantee queues its overflow as opportunistic while its
 * running work is guaranteed: its fresh jobs time-share that work only
 * with las_split_cross_tier (there the levels decide, not the tiers). */
static void test_split_cross_tier(void **state)
{
    (void)state;
    world w = {0};
    ts_sched_config cfg;
    split_base(&cfg);
    shape opp = {RAN_S, 0, 0, TS_TIER_OPPORTUNISTIC, TS_TIER_GUARANTEED, false};
    assert_int_equal(run_shaped(&w, GUARANTEED_YAML, &cfg, 9, NONE, opp), 0);
    done(&w);
    cfg.las_split_cross_tier = true;
    int n = run_shaped(&w, GUARANTEED_YAML, &cfg, 9, NONE, opp);
    assert_true(n > 0);
    for (int p = 0; p < n; p++)
        assert_int_equal(w.jobs[w.d.preempts[p].victim].tier, TS_TIER_GUARANTEED);
    done(&w);
    /* only in a split tenant */
    assert_int_equal(run_shaped(&w, GUARANTEED_YAML, &cfg, 2, NONE, opp), 0);
    done(&w);
}

/* The other way round: team-a's opportunistic jobs run at level 0 (they
 * time-shared its guaranteed work, which waits past the split step). By
 * its tier the guaranteed job would take their room back, and they would
 * preempt each other in turn; with las_split_cross_tier the levels decide
 * and it waits. */
static void test_split_cross_tier_no_ping_pong(void **state)
{
    (void)state;
    world w = {0};
    ts_sched_config cfg;
    split_base(&cfg);
    cfg.las_split_backlog = 0.0; /* the requeued job's level-0 work left splits team-a */
    cfg.las_split_min_runtime_s = 60.0;
    /* on their GPUs 2 minutes, all they attained: level 0 */
    shape back = {120.0, 120.0, 0, TS_TIER_GUARANTEED, TS_TIER_OPPORTUNISTIC, true};
    assert_true(run_shaped(&w, GUARANTEED_YAML, &cfg, 0, REQUEUED, back) > 0); /* by its tier */
    done(&w);
    cfg.las_split_cross_tier = true;
    assert_int_equal(run_shaped(&w, GUARANTEED_YAML, &cfg, 0, REQUEUED, back), 0);
    done(&w);
}

/* With las_split_horizon_s the step follows the backlog: nine fresh jobs
 * on the 4 GPUs team-a holds, each at the step within an hour, step at
 * 1,600 GPU-s, under what the running jobs attained (7,200): they are time-
 * shared. Within ten hours the step would be 16,000, above it; and no step
 * is shorter than las_split_min_gpu_s. The fixed step (20,000, above the
 * running jobs) time-shares nothing. */
static void test_split_step_follows_backlog(void **state)
{
    (void)state;
    world w = {0};
    ts_sched_config cfg;
    split_base(&cfg);
    cfg.las_split_gpu_s = 20000.0;
    assert_int_equal(run_shaped(&w, GUARANTEED_YAML, &cfg, 9, NONE, DEFAULT_SHAPE), 0);
    done(&w);
    cfg.las_split_horizon_s = 3600.0;
    assert_true(run_shaped(&w, GUARANTEED_YAML, &cfg, 9, NONE, DEFAULT_SHAPE) > 0);
    done(&w);
    cfg.las_split_horizon_s = 36000.0;
    assert_int_equal(run_shaped(&w, GUARANTEED_YAML, &cfg, 9, NONE, DEFAULT_SHAPE), 0);
    done(&w);
    cfg.las_split_horizon_s = 3600.0;
    cfg.las_split_min_gpu_s = 10000.0;
    assert_int_equal(run_shaped(&w, GUARANTEED_YAML, &cfg, 9, NONE, DEFAULT_SHAPE), 0);
    done(&w);
}

/* las_split_mid_gpu_s: a second step inside a split first level. team-a's
 * only waiting job ran half a GPU-hour (past a step of 10 GPU-minutes) and
 * any waiting first-level work splits (backlog 0); its running jobs hold 2
 * GPU-hours each. With one step they are all past it, equals that never
 * swap; with a mid step at 1 GPU-hour the waiting job time-shares them. A
 * mid step above what they attained, or at the first level's top or
 * beyond, leaves one step. */
static void test_split_mid_step(void **state)
{
    (void)state;
    world w = {0};
    ts_sched_config cfg;
    split_base(&cfg);
    cfg.las_split_gpu_s = 600.0;
    cfg.las_split_backlog = 0.0;
    assert_int_equal(run_shaped(&w, GUARANTEED_YAML, &cfg, 0, PARTWAY, DEFAULT_SHAPE), 0);
    done(&w);
    cfg.las_split_mid_gpu_s = 3600.0;
    assert_int_equal(run_shaped(&w, GUARANTEED_YAML, &cfg, 0, PARTWAY, DEFAULT_SHAPE), 1);
    done(&w);
    cfg.las_split_mid_gpu_s = 10000.0;
    assert_int_equal(run_shaped(&w, GUARANTEED_YAML, &cfg, 0, PARTWAY, DEFAULT_SHAPE), 0);
    done(&w);
    cfg.las_split_mid_gpu_s = cfg.las_level_gpu_s;
    assert_int_equal(run_shaped(&w, GUARANTEED_YAML, &cfg, 0, PARTWAY, DEFAULT_SHAPE), 0);
    done(&w);
}

/* The default: a split at 120 GPU-s as soon as a fresh job waits, a mid
 * step at a GPU-hour, and a split tenant's own jobs time-shared after a
 * minute of run, up to 10 times an hour, across its tiers. */
static void test_split_defaults(void **state)
{
    (void)state;
    world w = {0};
    ts_sched_config cfg;
    ts_sched_config_default(&cfg);
    assert_true(cfg.las_split_gpu_s == 120.0 && cfg.las_split_backlog == 0.0);
    assert_true(cfg.las_split_mid_gpu_s == 3600.0 && cfg.las_split_min_runtime_s == 60.0);
    assert_int_equal(cfg.las_split_max_preemptions_hour, 10);
    assert_true(cfg.las_split_cross_tier && cfg.fair_reclaim && cfg.fair_moves);
    shape young = {120.0, 0, 0, TS_TIER_GUARANTEED, TS_TIER_GUARANTEED, false};
    shape often = {RAN_S, 0, 3, TS_TIER_GUARANTEED, TS_TIER_GUARANTEED, false};
    shape opp = {RAN_S, 0, 0, TS_TIER_OPPORTUNISTIC, TS_TIER_GUARANTEED, false};
    assert_true(run_shaped(&w, GUARANTEED_YAML, &cfg, 9, NONE, young) > 0);
    done(&w);
    assert_true(run_shaped(&w, GUARANTEED_YAML, &cfg, 9, NONE, often) > 0);
    done(&w);
    assert_true(run_shaped(&w, GUARANTEED_YAML, &cfg, 9, NONE, opp) > 0);
    done(&w);
    /* one fresh job is backlog enough */
    assert_true(run_shaped(&w, GUARANTEED_YAML, &cfg, 1, NONE, young) > 0);
    done(&w);
    /* never a tenant's jobs run under a minute, nor another tenant's */
    shape fresh = {30.0, 0, 0, TS_TIER_GUARANTEED, TS_TIER_GUARANTEED, false};
    assert_int_equal(run_shaped(&w, GUARANTEED_YAML, &cfg, 9, NONE, fresh), 0);
    done(&w);
    assert_int_equal(run_shaped(&w, NONE_YAML, &cfg, 9, NONE, young), 0);
    done(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_overflowing_first_level_is_time_shared),
        cmocka_unit_test(test_first_level_that_fits_is_not_split),
        cmocka_unit_test(test_tenant_without_guarantee_is_not_split),
        cmocka_unit_test(test_split_orders_fresh_jobs_first),
        cmocka_unit_test(test_split_orders_promoted_jobs_after_fresh_ones),
        cmocka_unit_test(test_split_orders_fresh_jobs_by_size),
        cmocka_unit_test(test_split_search_without_candidate_spends_no_bound),
        cmocka_unit_test(test_split_limits_protect_own_jobs),
        cmocka_unit_test(test_split_cross_tier),
        cmocka_unit_test(test_split_cross_tier_no_ping_pong),
        cmocka_unit_test(test_split_step_follows_backlog),
        cmocka_unit_test(test_split_mid_step),
        cmocka_unit_test(test_split_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
