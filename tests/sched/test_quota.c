/*
 * test_quota.c - the tenant tree and quota accounting of tenant.h.
 *
 * Crafted cases, one rule each, on trees small enough to work by hand (the
 * arithmetic is in the comments): validation messages, borrowing from a
 * sibling, the lending limit, the borrowing limit, guaranteed work never
 * above the guarantee, reclaim of borrowed capacity, idle guarantee flowing
 * to siblings before cousins, decay halving per half-life, weighted DRF
 * ordering, request demand, bad credits. Then a bounded randomized property
 * test (fixed seed): random 2-3 level trees, thousands of random charges and
 * credits, each admission compared with an independent recursive oracle and
 * every invariant checked after every step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tessera/mig.h"
#include "tessera/model.h"
#include "tessera/rng.h"
#include "tessera/tenant.h"

#define HALF_LIFE_S 3600.0
#define UNL TS_QUOTA_UNLIMITED

static int gpu_dim(void)
{
    int m = ts_gpu_model_lookup("A100-80GB");
    assert_true(m >= 0);
    return ts_res_gpu(m);
}

/* A tenant with only a GPU quota (A100-80GB milli-GPU). */
static int add(ts_tenants *ts, const char *name, const char *parent, int64_t g, int64_t b,
               int64_t l)
{
    ts_err err;
    int t = ts_tenant_add(ts, name, parent, &err);
    assert_true(t >= 0);
    assert_int_equal(ts_tenant_set_quota(ts, t, gpu_dim(), g, b, l, &err), 0);
    return t;
}

static const int64_t *gpu(int64_t milli)
{
    static int64_t d[TS_RES_DIMS];
    memset(d, 0, sizeof d);
    d[gpu_dim()] = milli;
    return d;
}

static ts_quota *quota_of(const ts_tenants *ts)
{
    ts_quota *q = NULL;
    ts_err err;
    int rc = ts_quota_new(ts, HALF_LIFE_S, &q, &err);
    if (rc != 0)
        fail_msg("ts_quota_new: %s", err.msg);
    return q;
}

static int check(ts_quota *q, int t, int tier, int64_t milli, ts_quota_verdict *v)
{
    return ts_quota_check(q, t, tier, gpu(milli), v);
}

static void charge(ts_quota *q, int t, int tier, int64_t milli)
{
    ts_err err;
    assert_int_equal(ts_quota_charge(q, t, tier, gpu(milli), 0.0, &err), 0);
}

/* ---- the tree ----------------------------------------------------------- */

static void test_validate_messages(void **state)
{
    (void)state;
    ts_tenants *ts = ts_tenants_new();
    ts_err err;
    int org = add(ts, "org", NULL, 128000, UNL, UNL);
    int team = add(ts, "team-a", "org", 64000, UNL, UNL);
    (void)org;
    (void)team;
    add(ts, "x", "team-a", 48000, UNL, UNL);
    add(ts, "y", "team-a", 48000, UNL, UNL);
    assert_int_equal(ts_tenants_validate(ts, &err), TS_EINVAL);
    assert_string_equal(err.msg, "tenants.team-a.guaranteed.gpu[A100-80GB]: children's "
                                 "guarantees (96) exceed the parent's (64)");
    ts_quota *q = NULL;
    assert_int_equal(ts_quota_new(ts, HALF_LIFE_S, &q, &err), TS_EINVAL);
    assert_null(q);

    assert_int_equal(ts_tenant_add(ts, "x", "org", &err), TS_EEXIST);
    assert_int_equal(ts_tenant_add(ts, "z", "nobody", &err), TS_ENOENT);
    assert_string_equal(err.msg, "tenants.z.parent: no tenant named 'nobody'");
    assert_int_equal(ts_tenant_add(ts, "", NULL, &err), TS_EINVAL);
    assert_int_equal(ts_tenant_add(ts, "a b", NULL, &err), TS_EINVAL);
    assert_true(ts_tenant_add(ts, "d3", "x", &err) >= 0);     /* depth 3 */
    assert_int_equal(ts_tenant_add(ts, "d4", "d3", &err), TS_EINVAL);
    assert_int_equal(ts_tenant_set_quota(ts, 0, TS_RES_CPU, -1, UNL, UNL, &err), TS_EINVAL);
    assert_string_equal(err.msg, "tenants.org.guaranteed.cpu_milli: must be 0..100000000000000");
    assert_int_equal(ts_tenant_set_quota(ts, 0, TS_RES_MEM, 1, -5, UNL, &err), TS_EINVAL);
    assert_string_equal(err.msg, "tenants.org.borrow.mem_mib: must be 0..100000000000000 "
                                 "or unlimited");
    assert_int_equal(ts_tenant_set_weight(ts, 0, 0.0, &err), TS_EINVAL);
    assert_int_equal(ts_tenant_set_weight(ts, 0, NAN, &err), TS_EINVAL);

    /* fixed, the tree validates */
    assert_int_equal(ts_tenant_set_quota(ts, ts_tenant_find(ts, "y"), gpu_dim(), 16000, UNL,
                                         UNL, &err), 0);
    assert_int_equal(ts_tenants_validate(ts, &err), 0);
    ts_tenants_free(ts);
}

/* ---- borrowing and lending ---------------------------------------------- */

/* org 20 = a 10 + b 10 */
static void test_borrow_from_sibling(void **state)
{
    (void)state;
    ts_tenants *ts = ts_tenants_new();
    int o = add(ts, "org", NULL, 20000, UNL, UNL);
    int a = add(ts, "a", "org", 10000, UNL, UNL);
    int b = add(ts, "b", "org", 10000, UNL, UNL);
    ts_quota *q = quota_of(ts);
    ts_quota_verdict v;
    assert_int_equal(check(q, a, TS_TIER_OPPORTUNISTIC, 15000, &v), TS_QUOTA_OK);
    charge(q, a, TS_TIER_OPPORTUNISTIC, 15000);
    assert_int_equal(ts_quota_borrowed(q, a, gpu_dim()), 5000);   /* 15 - 10 */
    assert_int_equal(ts_quota_lendable(q, b, gpu_dim()), 10000);  /* b is idle */
    assert_int_equal(ts_quota_lendable(q, o, gpu_dim()), 5000);   /* 10 - 5 left */
    assert_int_equal(ts_quota_borrowed(q, o, gpu_dim()), 0);
    assert_int_equal(ts_quota_usage(q, o, gpu_dim()), 15000);
    /* 15 + 6 = 21 > the 20 there is */
    assert_int_equal(check(q, a, TS_TIER_OPPORTUNISTIC, 6000, &v), TS_QUOTA_REFUSED);
    assert_int_equal(v.limit, TS_QLIM_IDLE);
    assert_int_equal(v.tenant, o);
    assert_int_equal(v.dim, gpu_dim());
    assert_int_equal(v.over, 1000);
    assert_int_equal(check(q, a, TS_TIER_OPPORTUNISTIC, 5000, &v), TS_QUOTA_OK);
    ts_quota_free(q);
    ts_tenants_free(ts);
}

/* org 10 = a 10 (lends at most 4) + b 0 */
static void test_lend_limit(void **state)
{
    (void)state;
    ts_tenants *ts = ts_tenants_new();
    add(ts, "org", NULL, 10000, UNL, UNL);
    int a = add(ts, "a", "org", 10000, UNL, 4000);
    int b = add(ts, "b", "org", 0, UNL, UNL);
    ts_quota *q = quota_of(ts);
    ts_quota_verdict v;
    assert_int_equal(ts_quota_lendable(q, a, gpu_dim()), 4000);
    assert_int_equal(check(q, b, TS_TIER_OPPORTUNISTIC, 4000, &v), TS_QUOTA_OK);
    assert_int_equal(check(q, b, TS_TIER_OPPORTUNISTIC, 4001, &v), TS_QUOTA_REFUSED);
    assert_int_equal(v.limit, TS_QLIM_LEND);  /* a has 10 idle but lends 4 */
    assert_int_equal(v.over, 1);
    char msg[256];
    ts_quota_explain(ts, &v, msg, sizeof msg);
    assert_string_equal(msg, "org: gpu[A100-80GB]: idle guarantee held back by lending "
                             "limits, short by 0.001 GPUs");
    charge(q, b, TS_TIER_OPPORTUNISTIC, 4000);
    assert_int_equal(ts_quota_lendable(q, a, gpu_dim()), 4000);  /* the limit, not idle */
    assert_int_equal(ts_quota_borrowed(q, b, gpu_dim()), 4000);
    /* a's own work may still use its whole guarantee less what b took */
    assert_int_equal(check(q, a, TS_TIER_GUARANTEED, 6000, &v), TS_QUOTA_OK);
    assert_int_equal(check(q, a, TS_TIER_GUARANTEED, 7000, &v), TS_QUOTA_RECLAIM);
    ts_quota_free(q);
    ts_tenants_free(ts);
}

/* org 10 = a 10 + b 0 (borrows at most 3) */
static void test_borrow_limit(void **state)
{
    (void)state;
    ts_tenants *ts = ts_tenants_new();
    add(ts, "org", NULL, 10000, UNL, UNL);
    add(ts, "a", "org", 10000, UNL, UNL);
    int b = add(ts, "b", "org", 0, 3000, UNL);
    ts_quota *q = quota_of(ts);
    ts_quota_verdict v;
    assert_int_equal(check(q, b, TS_TIER_OPPORTUNISTIC, 3000, &v), TS_QUOTA_OK);
    charge(q, b, TS_TIER_OPPORTUNISTIC, 3000);
    assert_int_equal(check(q, b, TS_TIER_OPPORTUNISTIC, 1, &v), TS_QUOTA_REFUSED);
    assert_int_equal(v.limit, TS_QLIM_BORROW);
    assert_int_equal(v.tenant, b);
    assert_int_equal(v.over, 1);
    char msg[256];
    ts_quota_explain(ts, &v, msg, sizeof msg);
    assert_string_equal(msg, "b: gpu[A100-80GB]: borrowing limit exceeded by 0.001 GPUs");
    /* milli-GPUs are written as GPUs: the 992750 */
    v.over = 992750;
    ts_quota_explain(ts, &v, msg, sizeof msg);
    assert_string_equal(msg, "b: gpu[A100-80GB]: borrowing limit exceeded by 992.75 GPUs");
    ts_quota_free(q);
    ts_tenants_free(ts);
}

/* org 20 = p 10 (a 6 + b 4) + c 10 */
static void test_guaranteed_within_guarantee(void **state)
{
    (void)state;
    ts_tenants *ts = ts_tenants_new();
    add(ts, "org", NULL, 20000, UNL, UNL);
    int p = add(ts, "p", "org", 10000, UNL, UNL);
    int a = add(ts, "a", "p", 6000, UNL, UNL);
    add(ts, "b", "p", 4000, UNL, UNL);
    add(ts, "c", "org", 10000, UNL, UNL);
    ts_quota *q = quota_of(ts);
    ts_quota_verdict v;
    charge(q, a, TS_TIER_GUARANTEED, 6000);
    /* plenty idle in b and c, but guaranteed work stays in a's guarantee */
    assert_int_equal(check(q, a, TS_TIER_GUARANTEED, 1, &v), TS_QUOTA_REFUSED);
    assert_int_equal(v.limit, TS_QLIM_GUARANTEE);
    assert_int_equal(v.tenant, a);
    assert_int_equal(v.over, 1);
    assert_int_equal(check(q, a, TS_TIER_OPPORTUNISTIC, 1, &v), TS_QUOTA_OK);
    /* p's own guaranteed work: 6 + 5 > p's 10, the ancestor's guarantee stops it */
    assert_int_equal(check(q, p, TS_TIER_GUARANTEED, 5000, &v), TS_QUOTA_REFUSED);
    assert_int_equal(v.tenant, p);
    assert_int_equal(v.over, 1000);
    assert_int_equal(check(q, p, TS_TIER_GUARANTEED, 4000, &v), TS_QUOTA_OK);
    assert_int_equal(ts_quota_usage_tier(q, p, TS_TIER_GUARANTEED, gpu_dim()), 6000);
    ts_quota_free(q);
    ts_tenants_free(ts);
}

/* org 20 = a 10 + b 10; b borrows 6, then a wants its guarantee back */
static void test_reclaimable(void **state)
{
    (void)state;
    ts_tenants *ts = ts_tenants_new();
    int o = add(ts, "org", NULL, 20000, UNL, UNL);
    int a = add(ts, "a", "org", 10000, UNL, UNL);
    int b = add(ts, "b", "org", 10000, UNL, UNL);
    ts_quota *q = quota_of(ts);
    ts_quota_verdict v;
    charge(q, b, TS_TIER_GUARANTEED, 10000);
    charge(q, b, TS_TIER_OPPORTUNISTIC, 6000);
    assert_int_equal(ts_quota_borrowed(q, b, gpu_dim()), 6000);
    assert_int_equal(ts_quota_borrowed(q, a, gpu_dim()), 0);
    assert_int_equal(ts_quota_borrowed(q, o, gpu_dim()), 0);
    assert_int_equal(check(q, a, TS_TIER_GUARANTEED, 10000, &v), TS_QUOTA_RECLAIM);
    assert_int_equal(v.over, 6000);  /* exactly what b borrows */
    assert_int_equal(check(q, a, TS_TIER_OPPORTUNISTIC, 10000, &v), TS_QUOTA_REFUSED);
    assert_int_equal(check(q, a, TS_TIER_GUARANTEED, 4000, &v), TS_QUOTA_OK);
    ts_err err;
    assert_int_equal(ts_quota_credit(q, b, TS_TIER_OPPORTUNISTIC, gpu(6000), 1.0, &err), 0);
    assert_int_equal(ts_quota_borrowed(q, b, gpu_dim()), 0);
    assert_int_equal(check(q, a, TS_TIER_GUARANTEED, 10000, &v), TS_QUOTA_OK);
    ts_quota_free(q);
    ts_tenants_free(ts);
}

/* org 30 = p 20 (a 10 + b 10, b lends `lend_b`) + r 10 (c 10) */
static void flow_case(int64_t lend_b, int64_t want_p_borrows)
{
    ts_tenants *ts = ts_tenants_new();
    add(ts, "org", NULL, 30000, UNL, UNL);
    int p = add(ts, "p", "org", 20000, UNL, UNL);
    int a = add(ts, "a", "p", 10000, UNL, UNL);
    int b = add(ts, "b", "p", 10000, UNL, lend_b);
    int r = add(ts, "r", "org", 10000, UNL, UNL);
    int c = add(ts, "c", "r", 10000, UNL, UNL);
    ts_quota *q = quota_of(ts);
    ts_quota_verdict v;
    charge(q, a, TS_TIER_OPPORTUNISTIC, 15000);
    assert_int_equal(ts_quota_borrowed(q, a, gpu_dim()), 5000);
    assert_int_equal(ts_quota_borrowed(q, p, gpu_dim()), want_p_borrows);
    assert_int_equal(ts_quota_lendable(q, b, gpu_dim()), lend_b < 10000 ? lend_b : 10000);
    assert_int_equal(ts_quota_borrowed(q, r, gpu_dim()), 0);
    /* whatever p borrows comes out of c's guarantee: c's own guaranteed
     * work beyond 10 - that needs a reclaim */
    int64_t c_free = 10000 - want_p_borrows;
    assert_int_equal(check(q, c, TS_TIER_GUARANTEED, c_free, &v), TS_QUOTA_OK);
    if (want_p_borrows > 0) {
        assert_int_equal(check(q, c, TS_TIER_GUARANTEED, c_free + 1, &v), TS_QUOTA_RECLAIM);
        assert_int_equal(v.over, 1);
    }
    ts_quota_free(q);
    ts_tenants_free(ts);
}

static void test_flow_siblings_before_cousins(void **state)
{
    (void)state;
    /* b lends everything: a's 5 come from its sibling, the cousin is untouched */
    flow_case(UNL, 0);
    /* b lends 2: 2 from the sibling, then 3 from the cousin c */
    flow_case(2000, 3000);

    /* a grows to 25: b's 10 are used up first, then 5 from the cousin */
    ts_tenants *ts = ts_tenants_new();
    add(ts, "org", NULL, 30000, UNL, UNL);
    int p = add(ts, "p", "org", 20000, UNL, UNL);
    int a = add(ts, "a", "p", 10000, UNL, UNL);
    int b = add(ts, "b", "p", 10000, UNL, UNL);
    int r = add(ts, "r", "org", 10000, UNL, UNL);
    ts_quota *q = quota_of(ts);
    charge(q, a, TS_TIER_OPPORTUNISTIC, 20000);
    assert_int_equal(ts_quota_borrowed(q, p, gpu_dim()), 0);
    charge(q, a, TS_TIER_OPPORTUNISTIC, 5000);
    assert_int_equal(ts_quota_borrowed(q, a, gpu_dim()), 15000);
    assert_int_equal(ts_quota_lendable(q, b, gpu_dim()), 10000);
    assert_int_equal(ts_quota_borrowed(q, p, gpu_dim()), 5000);
    assert_int_equal(ts_quota_lendable(q, r, gpu_dim()), 10000);
    ts_quota_free(q);
    ts_tenants_free(ts);
}

/* ---- fair share ---------------------------------------------------------- */

static void test_decay_halves_per_half_life(void **state)
{
    (void)state;
    ts_tenants *ts = ts_tenants_new();
    int o = add(ts, "org", NULL, 16000, UNL, UNL);
    ts_quota *q = quota_of(ts);
    ts_err err;
    assert_int_equal(ts_quota_charge(q, o, TS_TIER_GUARANTEED, gpu(8000), 0.0, &err), 0);
    double t1 = 10 * HALF_LIFE_S;
    /* half the guarantee for 10 half-lives: 0.5 * (1 - 2^-10) */
    double s1 = ts_quota_share(q, o, t1);
    assert_true(fabs(s1 - 0.5 * (1.0 - 1.0 / 1024.0)) < 1e-9);
    assert_int_equal(ts_quota_credit(q, o, TS_TIER_GUARANTEED, gpu(8000), t1, &err), 0);
    assert_true(fabs(ts_quota_share(q, o, t1) - s1) < 1e-12);
    assert_true(fabs(ts_quota_share(q, o, t1 + HALF_LIFE_S) - s1 / 2) < 1e-12);
    assert_true(fabs(ts_quota_share(q, o, t1 + 2 * HALF_LIFE_S) - s1 / 4) < 1e-12);
    /* time does not go back */
    assert_int_equal(ts_quota_charge(q, o, TS_TIER_GUARANTEED, gpu(1), t1 - 1, &err),
                     TS_EINVAL);
    ts_quota_free(q);
    ts_tenants_free(ts);
}

static void test_drf_order_with_weights(void **state)
{
    (void)state;
    ts_tenants *ts = ts_tenants_new();
    ts_err err;
    int x = add(ts, "x", NULL, 1000, UNL, UNL);
    int y = add(ts, "y", NULL, 1000, UNL, UNL);
    int z = add(ts, "z", NULL, 1000, UNL, UNL);
    for (int t = 0; t < 3; t++)
        assert_int_equal(ts_tenant_set_quota(ts, t, TS_RES_CPU, 1000, UNL, UNL, &err), 0);
    assert_int_equal(ts_tenant_set_weight(ts, x, 2.0, &err), 0);
    ts_quota *q = quota_of(ts);
    /* capacity: cpu 3000, gpu 3000. x: gpu 1500 (0.5, dominant); y: cpu 900
     * (0.3); z: nothing. One half-life later each reads half of it: x 0.25 / 2
     * = 0.125, y 0.15, z 0. Unweighted, x (0.25) would come after y. */
    int64_t d[TS_RES_DIMS] = {0};
    d[gpu_dim()] = 1500;
    assert_int_equal(ts_quota_charge(q, x, TS_TIER_OPPORTUNISTIC, d, 0.0, &err), 0);
    memset(d, 0, sizeof d);
    d[TS_RES_CPU] = 900;
    assert_int_equal(ts_quota_charge(q, y, TS_TIER_GUARANTEED, d, 0.0, &err), 0);
    assert_true(fabs(ts_quota_share(q, x, HALF_LIFE_S) - 0.125) < 1e-12);
    assert_true(fabs(ts_quota_share(q, y, HALF_LIFE_S) - 0.15) < 1e-12);
    int order[3] = {y, x, z};
    assert_int_equal(ts_quota_order(q, HALF_LIFE_S, order, 3), 0);
    assert_int_equal(order[0], z);
    assert_int_equal(order[1], x);
    assert_int_equal(order[2], y);
    int bad[1] = {7};
    assert_int_equal(ts_quota_order(q, HALF_LIFE_S, bad, 1), TS_EINVAL);
    ts_quota_free(q);
    ts_tenants_free(ts);
}

/* ---- requests and bad input --------------------------------------------- */

static void test_demand_of_request(void **state)
{
    (void)state;
    int m = ts_gpu_model_lookup("A100-80GB");
    int64_t d[TS_RES_DIMS];
    ts_err err;
    ts_request r = {.cpu_milli = 4000, .mem_mib = 8192, .num_gpu = 2, .gpu_milli = 1000,
                    .mig_profile = -1};
    assert_int_equal(ts_quota_demand(&r, m, d, &err), 0);
    assert_int_equal(d[TS_RES_CPU], 4000);
    assert_int_equal(d[TS_RES_MEM], 8192);
    assert_int_equal(d[ts_res_gpu(m)], 2000);
    assert_int_equal(ts_quota_demand(&r, -1, d, &err), TS_EINVAL);
    ts_request share = {.cpu_milli = 1, .num_gpu = 1, .gpu_milli = 250, .mig_profile = -1};
    assert_int_equal(ts_quota_demand(&share, m, d, &err), 0);
    assert_int_equal(d[ts_res_gpu(m)], 250);
    int geo = ts_gpu_model_get(m)->mig_geometry;
    int prof = ts_mig_profile_parse(geo, "3g.40gb", NULL);
    assert_true(prof >= 0);
    ts_request mig = {.cpu_milli = 1, .num_gpu = 1, .gpu_milli = 0, .mig_profile = prof};
    assert_int_equal(ts_quota_demand(&mig, m, d, &err), 0);
    assert_int_equal(d[ts_res_gpu(m)], 500);  /* 4 of 8 memory slices */
    ts_request cpu = {.cpu_milli = 500, .mig_profile = -1};
    assert_int_equal(ts_quota_demand(&cpu, -1, d, &err), 0);
    assert_int_equal(d[TS_RES_CPU], 500);
    assert_int_equal(d[ts_res_gpu(m)], 0);
}

static void test_bad_credit_changes_nothing(void **state)
{
    (void)state;
    ts_tenants *ts = ts_tenants_new();
    int o = add(ts, "org", NULL, 10000, UNL, UNL);
    ts_quota *q = quota_of(ts);
    ts_err err;
    charge(q, o, TS_TIER_OPPORTUNISTIC, 3000);
    assert_int_equal(ts_quota_credit(q, o, TS_TIER_GUARANTEED, gpu(1), 0.0, &err), TS_EINVAL);
    assert_int_equal(ts_quota_credit(q, o, TS_TIER_OPPORTUNISTIC, gpu(3001), 0.0, &err),
                     TS_EINVAL);
    assert_string_equal(err.msg, "quota: org.gpu[A100-80GB]: credit of 3001 exceeds the "
                                 "3000 charged");
    assert_int_equal(ts_quota_usage(q, o, gpu_dim()), 3000);
    assert_int_equal(ts_quota_charge(q, 5, TS_TIER_GUARANTEED, gpu(1), 0.0, &err), TS_EINVAL);
    assert_int_equal(ts_quota_charge(q, o, 7, gpu(1), 0.0, &err), TS_EINVAL);
    assert_int_equal(ts_quota_charge(q, o, TS_TIER_GUARANTEED, gpu(-1), 0.0, &err), TS_EINVAL);
    ts_quota_verdict v;
    assert_int_equal(ts_quota_check(q, o, TS_TIER_GUARANTEED, gpu(-1), &v), TS_EINVAL);
    ts_quota_free(q);
    ts_tenants_free(ts);
}

/* ---- property: random trees, random charges and credits ---------------- */

#define P_DIMS 3
#define P_MAX_T 48
#define P_STEPS 4000
#define P_TREES 4
#define P_MAX_LIVE 512

static int p_dim(int i)
{
    return i == 0 ? TS_RES_CPU : i == 1 ? TS_RES_MEM : gpu_dim();
}

struct live {
    int t, tier;
    int64_t d[TS_RES_DIMS];
};

/* The oracle: recomputes everything from the ledger, recursively from the
 * organisations down, sharing no code with quota.c. */
struct oracle {
    int64_t own[P_MAX_T][TS_TIERS][P_DIMS];
    int64_t use[P_MAX_T][P_DIMS], use_g[P_MAX_T][P_DIMS];
    int64_t need[P_MAX_T][P_DIMS], avail[P_MAX_T][P_DIMS];
    int64_t root_net[P_DIMS], ruse[P_DIMS], cap[P_DIMS];
};

static void o_visit(const ts_tenants *ts, struct oracle *o, int t, int i)
{
    int k = p_dim(i);
    const ts_tenant *tt = &ts->t[t];
    int64_t net = tt->guaranteed[k] - o->own[t][0][i] - o->own[t][1][i];
    o->use[t][i] = o->own[t][0][i] + o->own[t][1][i];
    o->use_g[t][i] = o->own[t][0][i];
    for (int c = 0; c < ts->n; c++) {
        if (ts->t[c].parent != t)
            continue;
        o_visit(ts, o, c, i);
        net += o->avail[c][i] - o->need[c][i] - ts->t[c].guaranteed[k];
        o->use[t][i] += o->use[c][i];
        o->use_g[t][i] += o->use_g[c][i];
    }
    o->need[t][i] = net < 0 ? -net : 0;
    o->avail[t][i] = net < 0 ? 0 : net < tt->lend_limit[k] ? net : tt->lend_limit[k];
}

static void o_eval(const ts_tenants *ts, struct oracle *o)
{
    for (int i = 0; i < P_DIMS; i++) {
        o->root_net[i] = o->ruse[i] = o->cap[i] = 0;
        for (int t = 0; t < ts->n; t++) {
            if (ts->t[t].parent >= 0)
                continue;
            o_visit(ts, o, t, i);
            o->root_net[i] += o->avail[t][i] - o->need[t][i];
            o->ruse[i] += o->use[t][i];
            o->cap[i] += ts->t[t].guaranteed[p_dim(i)];
        }
    }
}

/* Does the oracle's state keep every limit? */
static bool o_fits(const ts_tenants *ts, const struct oracle *o)
{
    for (int i = 0; i < P_DIMS; i++) {
        if (o->root_net[i] < 0)
            return false;
        for (int t = 0; t < ts->n; t++)
            if (o->need[t][i] > ts->t[t].borrow_limit[p_dim(i)])
                return false;
    }
    return true;
}

static bool o_guarantee_ok(const ts_tenants *ts, const struct oracle *o)
{
    for (int i = 0; i < P_DIMS; i++)
        for (int t = 0; t < ts->n; t++)
            if (o->use_g[t][i] > ts->t[t].guaranteed[p_dim(i)])
                return false;
    return true;
}

/* Every invariant, after every step. */
static void p_invariants(const ts_tenants *ts, const ts_quota *q, const struct oracle *o)
{
    assert_true(o_fits(ts, o));
    assert_true(o_guarantee_ok(ts, o));
    for (int i = 0; i < P_DIMS; i++) {
        int k = p_dim(i);
        assert_true(o->ruse[i] <= o->cap[i]);
        for (int t = 0; t < ts->n; t++) {
            const ts_tenant *tt = &ts->t[t];
            /* usage sums up the tree, as the library keeps it */
            assert_int_equal(ts_quota_usage(q, t, k), o->use[t][i]);
            assert_int_equal(ts_quota_usage_tier(q, t, TS_TIER_GUARANTEED, k), o->use_g[t][i]);
            assert_int_equal(ts_quota_borrowed(q, t, k), o->need[t][i]);
            assert_int_equal(ts_quota_lendable(q, t, k), o->avail[t][i]);
            /* nobody above guarantee + borrowing limit */
            if (tt->borrow_limit[k] != UNL)
                assert_true(o->use[t][i] <= tt->guaranteed[k] + tt->borrow_limit[k]);
            /* nobody lends beyond its limit: everyone outside t's subtree
             * together uses at most their guarantees plus what t may lend */
            if (tt->lend_limit[k] != UNL)
                assert_true(o->ruse[i] - o->use[t][i] <=
                            o->cap[i] - tt->guaranteed[k] + tt->lend_limit[k]);
        }
    }
}

static void p_build_tree(ts_tenants *ts, ts_rng *rng)
{
    char name[48];
    int norg = 2 + (int)ts_rng_below(rng, 2);
    for (int g = 0; g < norg; g++) {
        snprintf(name, sizeof name, "o%d", g);
        assert_true(ts_tenant_add(ts, name, NULL, NULL) >= 0);
        int nteam = (int)ts_rng_below(rng, 4);
        for (int j = 0; j < nteam; j++) {
            char team[48];
            snprintf(team, sizeof team, "o%d.t%d", g, j);
            assert_true(ts_tenant_add(ts, team, name, NULL) >= 0);
            int nsub = (int)ts_rng_below(rng, 3);
            for (int s = 0; s < nsub; s++) {
                char sub[96];
                snprintf(sub, sizeof sub, "o%d.t%d.s%d", g, j, s);
                assert_true(ts_tenant_add(ts, sub, team, NULL) >= 0);
            }
        }
    }
    assert_true(ts->n <= P_MAX_T);
    /* guarantees top down (parents first by index), children within parent */
    int64_t left[P_MAX_T][P_DIMS];
    for (int t = 0; t < ts->n; t++) {
        for (int i = 0; i < P_DIMS; i++) {
            int p = ts->t[t].parent;
            int64_t g = p < 0 ? (int64_t)ts_rng_below(rng, 101)
                              : (int64_t)ts_rng_below(rng, (uint64_t)left[p][i] + 1);
            if (p >= 0)
                left[p][i] -= g;
            left[t][i] = g;
            int64_t b = ts_rng_below(rng, 3) == 0 ? UNL : (int64_t)ts_rng_below(rng, 50);
            int64_t l = ts_rng_below(rng, 3) == 0 ? UNL : (int64_t)ts_rng_below(rng, 50);
            assert_int_equal(ts_tenant_set_quota(ts, t, p_dim(i), g, b, l, NULL), 0);
        }
        if (ts_rng_below(rng, 2))
            assert_int_equal(ts_tenant_set_weight(ts, t, 0.5 + ts_rng_double(rng), NULL), 0);
    }
}

static void p_snapshot(const ts_tenants *ts, const ts_quota *q, int64_t *s)
{
    for (int t = 0; t < ts->n; t++)
        for (int i = 0; i < P_DIMS; i++) {
            *s++ = ts_quota_usage(q, t, p_dim(i));
            *s++ = ts_quota_usage_tier(q, t, TS_TIER_GUARANTEED, p_dim(i));
            *s++ = ts_quota_borrowed(q, t, p_dim(i));
            *s++ = ts_quota_lendable(q, t, p_dim(i));
        }
}

static void p_run_tree(uint64_t seed)
{
    static struct live live[P_MAX_LIVE];
    static struct oracle o;
    static int64_t snap0[P_MAX_T * P_DIMS * 4], snap1[P_MAX_T * P_DIMS * 4];
    ts_rng rng;
    ts_rng_seed(&rng, seed);
    ts_tenants *ts = ts_tenants_new();
    p_build_tree(ts, &rng);
    ts_quota *q = quota_of(ts);
    memset(&o, 0, sizeof o);
    int nlive = 0;
    double now = 0.0;
    int admitted = 0, refused = 0;
    o_eval(ts, &o);
    p_snapshot(ts, q, snap0);
    for (int step = 0; step < P_STEPS; step++) {
        now += ts_rng_double(&rng) * 60.0;
        ts_err err;
        if (nlive > 0 && (nlive == P_MAX_LIVE || ts_rng_below(&rng, 5) < 2)) {
            int j = (int)ts_rng_below(&rng, (uint64_t)nlive);
            struct live *l = &live[j];
            assert_int_equal(ts_quota_credit(q, l->t, l->tier, l->d, now, &err), 0);
            for (int i = 0; i < P_DIMS; i++)
                o.own[l->t][l->tier][i] -= l->d[p_dim(i)];
            live[j] = live[--nlive];
        } else {
            struct live l;
            memset(&l, 0, sizeof l);
            l.t = (int)ts_rng_below(&rng, (uint64_t)ts->n);
            l.tier = (int)ts_rng_below(&rng, 2);
            for (int i = 0; i < P_DIMS; i++)
                l.d[p_dim(i)] = ts_rng_below(&rng, 3) == 0 ? 0 : (int64_t)ts_rng_below(&rng, 25);
            ts_quota_verdict v;
            int st = ts_quota_check(q, l.t, l.tier, l.d, &v);
            /* the oracle's answer for the same request */
            for (int i = 0; i < P_DIMS; i++)
                o.own[l.t][l.tier][i] += l.d[p_dim(i)];
            o_eval(ts, &o);
            int want = TS_QUOTA_OK;
            if (l.tier == TS_TIER_GUARANTEED && !o_guarantee_ok(ts, &o))
                want = TS_QUOTA_REFUSED;
            else if (!o_fits(ts, &o))
                want = l.tier == TS_TIER_GUARANTEED ? TS_QUOTA_RECLAIM : TS_QUOTA_REFUSED;
            assert_int_equal(st, want);
            if (st == TS_QUOTA_OK) {
                assert_int_equal(ts_quota_charge(q, l.t, l.tier, l.d, now, &err), 0);
                live[nlive++] = l;
                admitted++;
            } else {
                assert_true(v.dim >= 0 && v.over > 0);
                for (int i = 0; i < P_DIMS; i++)
                    o.own[l.t][l.tier][i] -= l.d[p_dim(i)];
                refused++;
            }
        }
        o_eval(ts, &o);
        p_invariants(ts, q, &o);
        /* a charge and its credit leave no trace */
        if (step % 97 == 0) {
            int t = (int)ts_rng_below(&rng, (uint64_t)ts->n);
            int64_t d[TS_RES_DIMS] = {0};
            d[TS_RES_CPU] = 1 + (int64_t)ts_rng_below(&rng, 1000);
            d[gpu_dim()] = (int64_t)ts_rng_below(&rng, 1000);
            p_snapshot(ts, q, snap1);
            assert_int_equal(ts_quota_charge(q, t, TS_TIER_OPPORTUNISTIC, d, now, &err), 0);
            assert_int_equal(ts_quota_credit(q, t, TS_TIER_OPPORTUNISTIC, d, now, &err), 0);
            int64_t snap2[P_MAX_T * P_DIMS * 4];
            p_snapshot(ts, q, snap2);
            assert_memory_equal(snap1, snap2, sizeof(int64_t) * (size_t)ts->n * P_DIMS * 4);
        }
    }
    /* both outcomes were exercised */
    assert_true(admitted > P_STEPS / 10);
    assert_true(refused > P_STEPS / 50);
    /* credits undo charges exactly: back to the empty state */
    while (nlive > 0) {
        struct live *l = &live[--nlive];
        assert_int_equal(ts_quota_credit(q, l->t, l->tier, l->d, now, NULL), 0);
    }
    p_snapshot(ts, q, snap1);
    assert_memory_equal(snap0, snap1, sizeof(int64_t) * (size_t)ts->n * P_DIMS * 4);
    ts_quota_free(q);
    ts_tenants_free(ts);
}

static void test_property_random_trees(void **state)
{
    (void)state;
    for (int i = 0; i < P_TREES; i++)
        p_run_tree(0x5eed0000u + (uint64_t)i);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validate_messages),
        cmocka_unit_test(test_borrow_from_sibling),
        cmocka_unit_test(test_lend_limit),
        cmocka_unit_test(test_borrow_limit),
        cmocka_unit_test(test_guaranteed_within_guarantee),
        cmocka_unit_test(test_reclaimable),
        cmocka_unit_test(test_flow_siblings_before_cousins),
        cmocka_unit_test(test_decay_halves_per_half_life),
        cmocka_unit_test(test_drf_order_with_weights),
        cmocka_unit_test(test_demand_of_request),
        cmocka_unit_test(test_bad_credit_changes_nothing),
        cmocka_unit_test(test_property_random_trees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
