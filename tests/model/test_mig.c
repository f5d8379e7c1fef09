/*
 * test_mig.c - MIG geometry: tables, validation, the mix search, start choice.
 *
 * The expected values are written out here from gpu-facts.md section 2 rather
 * than read back from the tables under test: every profile of every geometry,
 * the 77 creatable / 28 maximal mixes (checked against a brute-force oracle
 * with its own copy of the placement rules), each listed maximal mix, each
 * listed impossible request with the reason it must give, the creation-order
 * example from the MIG guide, and best_start answers worked out by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "tessera/mig.h"

#define NGEOM TS_MIG_NGEOMETRY
#define ALL_GEOMETRIES for (int g = 0; g < NGEOM; g++)

/* ---- the facts, written out independently of mig.c ---------------------- */

typedef struct expected_profile {
    int id;
    int compute;
    int mem;
    const char *starts; /* as the validation message lists them */
    uint8_t mask;
    int max;
} expected_profile;

static const expected_profile FACTS[TS_MIG_NPROFILES] = {
    {TS_MIG_P_1G, 1, 1, "0,1,2,3,4,5,6", 0x7F, 7},
    {TS_MIG_P_1G_ME, 1, 1, "0,1,2,3,4,5,6", 0x7F, 1},
    {TS_MIG_P_1G_2X, 1, 2, "0,2,4,6", 0x55, 4},
    {TS_MIG_P_2G, 2, 2, "0,2,4", 0x15, 3},
    {TS_MIG_P_3G, 3, 4, "0,4", 0x11, 2},
    {TS_MIG_P_4G, 4, 4, "0", 0x01, 1},
    {TS_MIG_P_7G, 7, 8, "0", 0x01, 1},
};

static const char *const MODEL_NAMES[NGEOM] = {"A100-40GB", "A100-80GB", "H100-80GB",
                                               "H200-141GB"};

/* Names and nominal GB per geometry, in FACTS order. */
static const char *const NAMES[NGEOM][TS_MIG_NPROFILES] = {
    {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"},
    {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
    {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
    {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"},
};
static const int NOMINAL_GB[NGEOM][TS_MIG_NPROFILES] = {
    {5, 5, 10, 10, 20, 20, 40},
    {10, 10, 20, 20, 40, 40, 80},
    {10, 10, 20, 20, 40, 40, 80},
    {18, 18, 35, 35, 71, 71, 141},
};

static const expected_profile *fact(int id)
{
    for (int r = 0; r < TS_MIG_NPROFILES; r++)
        if (FACTS[r].id == id)
            return &FACTS[r];
    return NULL;
}

/* Oracle: is the multiset creatable? Plain recursion over FACTS' starts. */
static bool oracle_place(const int *ids, int n, int k, unsigned used)
{
    if (k == n)
        return true;
    const expected_profile *f = fact(ids[k]);
    for (int s = 0; s + f->mem <= 8; s++) {
        unsigned bits = ((1u << f->mem) - 1u) << s;
        if ((f->mask & (1u << s)) && !(used & bits) && oracle_place(ids, n, k + 1, used | bits))
            return true;
    }
    return false;
}

static bool oracle_creatable(const int *ids, int n)
{
    if (n > 7)
        return false;
    for (int i = 0; i < n; i++) {
        int same = 0;
        for (int j = 0; j < n; j++)
            same += ids[j] == ids[i];
        if (same > fact(ids[i])->max)
            return false;
    }
    return oracle_place(ids, n, 0, 0);
}

static ts_mig_layout layout_of(int n, const int (*pairs)[2])
{
    ts_mig_layout l = {.n = n};
    for (int i = 0; i < n; i++)
        l.inst[i] = (ts_mig_instance){(int8_t)pairs[i][0], (int8_t)pairs[i][1], 0};
    return l;
}

static void assert_contains(const char *msg, const char *want)
{
    if (!strstr(msg, want))
        fail_msg("message \"%s\" lacks \"%s\"", msg, want);
}

static int compute_of(int g, const ts_mig_layout *l)
{
    int c = 0;
    for (int i = 0; i < l->n; i++)
        c += ts_mig_profile_get(g, l->inst[i].profile_id)->compute_slices;
    return c;
}

/* ---- geometry and tables ------------------------------------------------ */

static void test_geometry_of_model_names(void **state)
{
    (void)state;
    ALL_GEOMETRIES {
        assert_int_equal(ts_mig_geometry_of(MODEL_NAMES[g]), g);
        assert_string_equal(ts_mig_geometry_name(g), MODEL_NAMES[g]);
    }
    const char *not_mig[] = {"A100", "a100-40gb", "H100", "H100-94GB", "T4", "", "A100-40GB "};
    for (size_t i = 0; i < sizeof not_mig / sizeof *not_mig; i++)
        assert_int_equal(ts_mig_geometry_of(not_mig[i]), TS_MIG_NONE);
    assert_int_equal(ts_mig_geometry_of(NULL), TS_MIG_NONE);
    assert_non_null(ts_mig_geometry_name(TS_MIG_NONE));
    assert_non_null(ts_mig_geometry_name(NGEOM));
}

static void test_every_profile_of_every_geometry(void **state)
{
    (void)state;
    ALL_GEOMETRIES {
        const ts_mig_profile *table = ts_mig_profiles(g);
        assert_non_null(table);
        for (int r = 0; r < TS_MIG_NPROFILES; r++) {
            const expected_profile *f = &FACTS[r];
            const ts_mig_profile *p = ts_mig_profile_get(g, f->id);
            assert_non_null(p);
            assert_ptr_equal(p, &table[r]);
            assert_int_equal(p->id, f->id);
            assert_string_equal(p->name, NAMES[g][r]);
            assert_int_equal(p->compute_slices, f->compute);
            assert_int_equal(p->mem_slices, f->mem);
            assert_int_equal(p->start_mask, f->mask);
            assert_int_equal(p->max_count, f->max);
            assert_int_equal(p->mem_mib, (int64_t)NOMINAL_GB[g][r] * 1024);

            /* Alone on a GPU it is creatable, and valid exactly at its starts. */
            ts_mig_layout l;
            assert_int_equal(ts_mig_layout_from_profiles(g, &f->id, 1, &l, NULL), 0);
            assert_int_equal(l.n, 1);
            assert_true(f->mask & (1u << l.inst[0].start));
            for (int s = -1; s <= 8; s++) {
                ts_mig_layout one = {.n = 1, .inst = {{(int8_t)f->id, (int8_t)s, 0}}};
                bool allowed = s >= 0 && s < 8 && (f->mask & (1u << s));
                assert_int_equal(ts_mig_layout_validate(g, &one, NULL) == 0, allowed);
                ts_mig_layout empty = {0};
                assert_int_equal(ts_mig_can_place(g, &empty, f->id, s), allowed);
            }
            ts_err err;
            assert_int_equal(ts_mig_profile_parse(g, NAMES[g][r], &err), f->id);
        }
        assert_null(ts_mig_profile_get(g, 1));
        assert_null(ts_mig_profile_get(g, 21));
        assert_null(ts_mig_profile_get(g, -1));
    }
    assert_null(ts_mig_profiles(TS_MIG_NONE));
    assert_null(ts_mig_profiles(NGEOM));
    assert_null(ts_mig_profile_get(TS_MIG_NONE, TS_MIG_P_1G));
    /* Same name, different profile: 1g.10gb is double-memory on a 40 GB A100. */
    assert_int_equal(ts_mig_profile_parse(TS_MIG_A100_40GB, "1g.10gb", NULL), TS_MIG_P_1G_2X);
    assert_int_equal(ts_mig_profile_parse(TS_MIG_A100_80GB, "1g.10gb", NULL), TS_MIG_P_1G);
}

/* ---- the 77 / 28 enumeration -------------------------------------------- */

/*
 * gpu-facts 2.3: "Enumerating all multisets gives 77 creatable mixes, 28 of
 * them maximal". The set that gives these numbers is the six profiles of the
 * maximal-mix table, {19, 15, 14, 9, 5, 0} WITHOUT the +me profile 20, and
 * the empty mix is not counted (78 with it). With +me included the same walk
 * gives 127 non-empty mixes and 44 maximal ones; checked below as well, so
 * the +me rules cannot drift unnoticed. Maximal: creatable, and adding any
 * one more profile of the set makes it not creatable.
 */
typedef struct enum_counts {
    int creatable;
    int maximal;
} enum_counts;

static void enum_rec(int g, const int *set, int nset, int from, int *mix, int n,
                     enum_counts *c)
{
    if (n > 0) {
        bool want = oracle_creatable(mix, n);
        ts_mig_layout l;
        ts_err err = {0};
        int rc = ts_mig_layout_from_profiles(g, mix, n, &l, &err);
        if ((rc == 0) != want)
            fail_msg("mix of %d: library says %d (%s), oracle says %d", n, rc, err.msg, want);
        if (rc == 0) {
            assert_int_equal(ts_mig_layout_validate(g, &l, NULL), 0);
            assert_true(compute_of(g, &l) <= 7);
            for (int i = 0; i < n; i++)
                assert_int_equal(l.inst[i].profile_id, mix[i]);
            c->creatable++;
            bool maximal = true;
            for (int k = 0; k < nset && maximal; k++) {
                mix[n] = set[k];
                maximal = !oracle_creatable(mix, n + 1);
            }
            c->maximal += maximal;
        } else {
            assert_int_equal(rc, TS_EINVAL);
            assert_int_equal(l.n, 0);
            assert_true(strlen(err.msg) > 0);
            /* Every refusal names a specific cause, never only the fallback. */
            if (strstr(err.msg, "no non-overlapping placement"))
                fail_msg("vague refusal: %s", err.msg);
        }
    }
    if (n == 8)
        return;
    for (int k = from; k < nset; k++) {
        mix[n] = set[k];
        enum_rec(g, set, nset, k, mix, n + 1, c);
    }
}

static void test_enumeration_77_creatable_28_maximal(void **state)
{
    (void)state;
    const int six[] = {TS_MIG_P_1G, TS_MIG_P_1G_2X, TS_MIG_P_2G, TS_MIG_P_3G, TS_MIG_P_4G,
                       TS_MIG_P_7G};
    const int seven[] = {TS_MIG_P_1G, TS_MIG_P_1G_ME, TS_MIG_P_1G_2X, TS_MIG_P_2G,
                         TS_MIG_P_3G, TS_MIG_P_4G, TS_MIG_P_7G};
    ALL_GEOMETRIES {
        int mix[9];
        enum_counts c = {0, 0};
        /* Walks mixes of up to 8 instances so that "8" refusals are covered. */
        enum_rec(g, six, 6, 0, mix, 0, &c);
        assert_int_equal(c.creatable, 77);
        assert_int_equal(c.maximal, 28);
        enum_counts cme = {0, 0};
        enum_rec(g, seven, 7, 0, mix, 0, &cme);
        assert_int_equal(cme.creatable, 127);
        assert_int_equal(cme.maximal, 44);
    }
}

/* ---- the listed maximal mixes ------------------------------------------- */

typedef struct listed_mix {
    int n1, n1x2, n2, n3, n4, n7;
    int compute;
} listed_mix;

/* gpu-facts 2.3 "Maximal mixes", in the order printed there. */
static const listed_mix MAXIMAL[28] = {
    {0, 0, 0, 0, 0, 1, 7}, {0, 0, 0, 1, 1, 0, 7}, {1, 0, 1, 0, 1, 0, 7},
    {0, 1, 1, 0, 1, 0, 7}, {3, 0, 0, 0, 1, 0, 7}, {2, 1, 0, 0, 1, 0, 7},
    {0, 2, 0, 0, 1, 0, 6}, {0, 0, 0, 2, 0, 0, 6}, {0, 0, 2, 1, 0, 0, 7},
    {2, 0, 1, 1, 0, 0, 7}, {0, 1, 1, 1, 0, 0, 6}, {4, 0, 0, 1, 0, 0, 7},
    {2, 1, 0, 1, 0, 0, 6}, {0, 2, 0, 1, 0, 0, 5}, {1, 0, 3, 0, 0, 0, 7},
    {0, 1, 3, 0, 0, 0, 7}, {3, 0, 2, 0, 0, 0, 7}, {2, 1, 2, 0, 0, 0, 7},
    {0, 2, 2, 0, 0, 0, 6}, {5, 0, 1, 0, 0, 0, 7}, {4, 1, 1, 0, 0, 0, 7},
    {2, 2, 1, 0, 0, 0, 6}, {0, 3, 1, 0, 0, 0, 5}, {7, 0, 0, 0, 0, 0, 7},
    {6, 1, 0, 0, 0, 0, 7}, {4, 2, 0, 0, 0, 0, 6}, {2, 3, 0, 0, 0, 0, 5},
    {0, 4, 0, 0, 0, 0, 4},
};

/* Smallest first, the order a careless caller (or the driver) would use. */
static int listed_ids(const listed_mix *m, int *ids)
{
    int n = 0;
    for (int i = 0; i < m->n1; i++)
        ids[n++] = TS_MIG_P_1G;
    for (int i = 0; i < m->n1x2; i++)
        ids[n++] = TS_MIG_P_1G_2X;
    for (int i = 0; i < m->n2; i++)
        ids[n++] = TS_MIG_P_2G;
    for (int i = 0; i < m->n3; i++)
        ids[n++] = TS_MIG_P_3G;
    for (int i = 0; i < m->n4; i++)
        ids[n++] = TS_MIG_P_4G;
    for (int i = 0; i < m->n7; i++)
        ids[n++] = TS_MIG_P_7G;
    return n;
}

static void test_each_listed_maximal_mix_accepted(void **state)
{
    (void)state;
    const int others[] = {TS_MIG_P_1G, TS_MIG_P_1G_2X, TS_MIG_P_2G, TS_MIG_P_3G, TS_MIG_P_4G,
                          TS_MIG_P_7G};
    ALL_GEOMETRIES {
        for (int m = 0; m < 28; m++) {
            int ids[8], rev[8];
            int n = listed_ids(&MAXIMAL[m], ids);
            for (int i = 0; i < n; i++)
                rev[i] = ids[n - 1 - i];
            ts_mig_layout l, lr;
            ts_err err = {0};
            if (ts_mig_layout_from_profiles(g, ids, n, &l, &err) != 0)
                fail_msg("maximal mix %d refused: %s", m, err.msg);
            assert_int_equal(ts_mig_layout_from_profiles(g, rev, n, &lr, NULL), 0);
            assert_int_equal(ts_mig_layout_validate(g, &l, NULL), 0);
            assert_int_equal(compute_of(g, &l), MAXIMAL[m].compute);
            /* Maximal: no other profile (the +me aside) fits anywhere. */
            for (size_t k = 0; k < sizeof others / sizeof *others; k++)
                for (int s = 0; s < 8; s++)
                    assert_false(ts_mig_can_place(g, &l, others[k], s));
        }
    }
}

/* ---- impossible requests ------------------------------------------------ */

static void refuse(int g, const int *ids, int n, const char *why)
{
    ts_mig_layout l;
    ts_err err = {0};
    int rc = ts_mig_layout_from_profiles(g, ids, n, &l, &err);
    if (rc == 0)
        fail_msg("mix accepted, expected refusal containing \"%s\"", why);
    assert_int_equal(rc, TS_EINVAL);
    assert_int_equal(err.code, TS_EINVAL);
    assert_contains(err.msg, "no placement for ");
    assert_contains(err.msg, why);
}

static void test_listed_impossible_requests_refused_with_reason(void **state)
{
    (void)state;
    enum { G1 = TS_MIG_P_1G, ME = TS_MIG_P_1G_ME, X2 = TS_MIG_P_1G_2X, G2 = TS_MIG_P_2G,
           G3 = TS_MIG_P_3G, G4 = TS_MIG_P_4G, G7 = TS_MIG_P_7G };
    const int g = TS_MIG_A100_80GB;

    refuse(g, (int[]){G4, G4}, 2, "4g.40gb x2: at most 1 4g.40gb per GPU, 2 requested "
                                  "(4g may start only at slot 0)");
    const int anything[] = {G1, ME, X2, G2, G3, G4, G7};
    for (size_t k = 0; k < sizeof anything / sizeof *anything; k++) {
        int a = anything[k];
        const char *too_big = a == G7 ? "7g.80gb takes the whole GPU"
                                      : "memory slices, a GPU has 8";
        refuse(g, (int[]){G3, G3, a}, 3, a == G3 ? "at most 2 3g.40gb per GPU" : too_big);
        refuse(g, (int[]){G4, G3, a}, 3,
               a == G4 ? "at most 1 4g.40gb" : a == G3 ? "need 12 memory slices" : too_big);
        refuse(g, (int[]){a, G7}, 2,
               a == G7 ? "at most 1 7g.80gb" : "7g.80gb takes the whole GPU");
    }
    refuse(g, (int[]){G2, G2, G2, G2}, 4, "2g.20gb x4: at most 3 2g.20gb per GPU, 4 requested "
                                          "(2g may start only at slots 0,2,4)");
    refuse(g, (int[]){G1, G1, G1, G1, G1, G1, G1, G1}, 8,
           "1g.10gb x8: at most 7 instances per GPU, 8 requested");
    refuse(g, (int[]){ME, G1, ME}, 3, "at most one +me instance per GPU, 2 requested");
    refuse(g, (int[]){X2, X2, X2, X2, X2}, 5, "1g.20gb x5: at most 4 1g.20gb per GPU, 5 "
                                              "requested (1gx2 may start only at slots 0,2,4,6)");
    /* Eight memory slices, but slot 7 is out of reach of 2g and 1g. */
    refuse(g, (int[]){G2, G4, G2}, 3, "4g.40gb + 2g.20gb x2: they need all 8 memory slices "
                                      "but none of them can use slot 7");
    refuse(g, (int[]){G1, G1, G1, G1, G1, G1, G2}, 7, "slot 7");
    ts_err perr = {0};
    ts_mig_layout pl;
    assert_int_equal(ts_mig_layout_from_profiles(g, (int[]){G1, 30}, 2, &pl, &perr), TS_EINVAL);
    assert_contains(perr.msg, "profiles[1]: profile id 30 is not a MIG profile of A100-80GB");
    /* H200 names appear in its messages. */
    refuse(TS_MIG_H200_141GB, (int[]){G4, G4}, 2, "at most 1 4g.71gb per GPU");

    /* 3g at slot 0 with a 4g: a given layout, refused by validation. */
    ts_mig_layout l = layout_of(2, (const int[][2]){{G4, 0}, {G3, 0}});
    ts_err err = {0};
    assert_int_equal(ts_mig_layout_validate(g, &l, &err), TS_EINVAL);
    assert_contains(err.msg, "instances 0 and 1 overlap at slot 0");
    assert_contains(err.msg, "4g.40gb at slots 0-3");
    assert_contains(err.msg, "3g.40gb at slots 0-3");
    /* ...while the mix itself is fine with the 3g at 4. */
    assert_int_equal(ts_mig_layout_from_profiles(g, (int[]){G3, G4}, 2, &l, NULL), 0);
    assert_int_equal(l.inst[0].start, 4);
    assert_int_equal(l.inst[1].start, 0);
}

/* ---- validation messages ------------------------------------------------ */

static void expect_invalid(const ts_mig_layout *l, const char *want)
{
    ts_err err = {0};
    assert_int_equal(ts_mig_layout_validate(TS_MIG_A100_80GB, l, &err), TS_EINVAL);
    assert_int_equal(err.code, TS_EINVAL);
    assert_contains(err.msg, want);
}

static void test_validate_messages(void **state)
{
    (void)state;
    ts_mig_layout l = layout_of(3, (const int[][2]){{19, 0}, {19, 1}, {9, 2}});
    expect_invalid(&l, "instance 2 (3g.40gb) at slot 2: 3g may start only at slots 0,4");
    l = layout_of(1, (const int[][2]){{14, 6}});
    expect_invalid(&l, "instance 0 (2g.20gb) at slot 6: 2g may start only at slots 0,2,4");
    l = layout_of(1, (const int[][2]){{5, 4}});
    expect_invalid(&l, "instance 0 (4g.40gb) at slot 4: 4g may start only at slot 0");
    l = layout_of(1, (const int[][2]){{19, 7}});
    expect_invalid(&l, "1g may start only at slots 0,1,2,3,4,5,6");
    l = layout_of(1, (const int[][2]){{19, -1}});
    expect_invalid(&l, "at slot -1");
    l = layout_of(3, (const int[][2]){{19, 0}, {14, 2}, {19, 3}});
    expect_invalid(&l, "instances 1 and 2 overlap at slot 3");
    l = layout_of(2, (const int[][2]){{9, 4}, {15, 6}});
    expect_invalid(&l, "instances 0 and 1 overlap at slot 6");
    l = layout_of(4, (const int[][2]){{14, 0}, {14, 2}, {14, 4}, {14, 6}});
    /* The bad start is reported before the count. */
    expect_invalid(&l, "instance 3 (2g.20gb) at slot 6");
    l = layout_of(2, (const int[][2]){{9, 0}, {9, 0}});
    expect_invalid(&l, "instances 0 and 1 overlap at slot 0");
    l = layout_of(3, (const int[][2]){{9, 0}, {9, 4}, {9, 4}});
    expect_invalid(&l, "instance 2 (3g.40gb): too many 3g.40gb instances (at most 2 per GPU)");
    l = layout_of(2, (const int[][2]){{20, 0}, {20, 1}});
    expect_invalid(&l, "instance 1 (1g.10gb+me): two +me instances");
    l = layout_of(2, (const int[][2]){{19, 0}, {3, 1}});
    expect_invalid(&l, "instance 1: profile id 3 is not a MIG profile of A100-80GB");
    l = layout_of(7, (const int[][2]){{19, 0}, {19, 1}, {19, 2}, {19, 3}, {19, 4}, {19, 5},
                                      {19, 6}});
    assert_int_equal(ts_mig_layout_validate(TS_MIG_A100_80GB, &l, NULL), 0);
    l.n = 8;
    expect_invalid(&l, "more than 7 instances");
    l.n = -1;
    expect_invalid(&l, "negative");
    assert_int_equal(ts_mig_layout_validate(TS_MIG_A100_80GB, NULL, NULL), TS_EINVAL);
    assert_int_equal(ts_mig_layout_validate(TS_MIG_NONE, &l, NULL), TS_EINVAL);

    /* busy is bookkeeping only. */
    l = layout_of(2, (const int[][2]){{5, 0}, {9, 4}});
    l.inst[0].busy = 1;
    l.inst[1].busy = 1;
    assert_int_equal(ts_mig_layout_validate(TS_MIG_A100_80GB, &l, NULL), 0);
    l = layout_of(2, (const int[][2]){{5, 0}, {9, 0}});
    l.inst[1].busy = 1;
    expect_invalid(&l, "overlap at slot 0");
}

/* ---- creation order ----------------------------------------------------- */

static void test_creation_order_does_not_matter(void **state)
{
    (void)state;
    /* The MIG guide's `-cgi 19,19,14,9` fails on the driver's own placement;
     * the search must succeed for every order of that mix. */
    int ids[4] = {19, 19, 14, 9};
    int perm[24][4];
    int np = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++)
                for (int d = 0; d < 4; d++)
                    if (a != b && a != c && a != d && b != c && b != d && c != d) {
                        perm[np][0] = ids[a], perm[np][1] = ids[b];
                        perm[np][2] = ids[c], perm[np][3] = ids[d];
                        np++;
                    }
    assert_int_equal(np, 24);
    ALL_GEOMETRIES {
        for (int p = 0; p < np; p++) {
            ts_mig_layout l;
            ts_err err = {0};
            if (ts_mig_layout_from_profiles(g, perm[p], 4, &l, &err) != 0)
                fail_msg("order %d: %s", p, err.msg);
            assert_int_equal(ts_mig_layout_validate(g, &l, NULL), 0);
            for (int i = 0; i < 4; i++)
                assert_int_equal(l.inst[i].profile_id, perm[p][i]);
            /* The 3g must take a half the smaller ones leave free. */
            for (int i = 0; i < 4; i++)
                if (perm[p][i] == 9)
                    assert_true(l.inst[i].start == 0 || l.inst[i].start == 4);
        }
    }
    ts_mig_layout l;
    assert_int_equal(ts_mig_layout_from_profiles(0, NULL, 0, &l, NULL), 0);
    assert_int_equal(l.n, 0);
    assert_int_equal(ts_mig_layout_from_profiles(0, NULL, 2, &l, NULL), TS_EINVAL);
    assert_int_equal(ts_mig_layout_from_profiles(0, ids, -1, &l, NULL), TS_EINVAL);
    assert_int_equal(ts_mig_layout_from_profiles(TS_MIG_NONE, ids, 4, &l, NULL), TS_EINVAL);
}

/* ---- best start and free placements ------------------------------------- */

static void test_best_start_worked_by_hand(void **state)
{
    (void)state;
    const int g = TS_MIG_H100_80GB;
    ts_mig_layout empty = {0};

    /* 1g on an empty GPU. Larger profiles: 1gx2 {0,2,4,6}, 2g {0,2,4}, 3g
     * {0,4}, 4g {0}, 7g {0}. A 1g at s kills one 1gx2 start (its pair) and
     * always the 7g. Remaining larger placements:
     *   s=0..3: 1gx2 3 + 2g 2 + 3g@4 1 + 4g 0 = 6
     *   s=4,5:  1gx2 3 + 2g 2 + 3g@0 1 + 4g 1 = 7
     *   s=6:    1gx2 3 + 2g 3 + 3g@0 1 + 4g 1 = 8   <- slot 6 wins */
    assert_int_equal(ts_mig_best_start(g, &empty, TS_MIG_P_1G), 6);
    assert_int_equal(ts_mig_best_start(g, &empty, TS_MIG_P_1G_ME), 6);
    /* 1gx2: larger are 2g, 3g, 4g, 7g.
     *   s=0: 2g@2,4 + 3g@4 = 3;  s=2: 2g@0,4 + 3g@4 = 3
     *   s=4: 2g@0,2 + 3g@0 + 4g = 4;  s=6: 2g@0,2,4 + 3g@0 + 4g = 5 <- 6 */
    assert_int_equal(ts_mig_best_start(g, &empty, TS_MIG_P_1G_2X), 6);
    /* 2g: larger are 3g, 4g, 7g. s=0,2: 3g@4 = 1; s=4: 3g@0 + 4g = 2 <- 4 */
    assert_int_equal(ts_mig_best_start(g, &empty, TS_MIG_P_2G), 4);
    /* 3g: larger are 4g, 7g. s=0: 0; s=4: 4g = 1 <- 4 */
    assert_int_equal(ts_mig_best_start(g, &empty, TS_MIG_P_3G), 4);
    assert_int_equal(ts_mig_best_start(g, &empty, TS_MIG_P_4G), 0);
    assert_int_equal(ts_mig_best_start(g, &empty, TS_MIG_P_7G), 0);

    /* With a 4g at 0, a 1g may go to 4, 5 or 6.
     *   s=4: 1gx2@6 = 1;  s=5: 1gx2@6 = 1
     *   s=6: 1gx2@4 + 2g@4 = 2 (3g@4 is blocked everywhere) <- 6 */
    ts_mig_layout l = layout_of(1, (const int[][2]){{TS_MIG_P_4G, 0}});
    assert_int_equal(ts_mig_best_start(g, &l, TS_MIG_P_1G), 6);

    /* With a 3g at 4, a 1g may go to 0..3. The second 3g (at 0) and the 4g
     * die whatever s is; one 1gx2 and one 2g survive for every s: a tie of
     * 2 everywhere, so the lowest start, 0. */
    l = layout_of(1, (const int[][2]){{TS_MIG_P_3G, 4}});
    assert_int_equal(ts_mig_best_start(g, &l, TS_MIG_P_1G), 0);

    /* With 1g at 6 and a 2g at 4, a second 1g: starts 0..3. s=0,1 leave
     * 1gx2@2 + 2g@2 = 2; s=2,3 leave 1gx2@0 + 2g@0 = 2; 3g@0 and 4g need
     * slots 0-3 and die for every s: tie, lowest start 0. */
    l = layout_of(2, (const int[][2]){{TS_MIG_P_1G, 6}, {TS_MIG_P_2G, 4}});
    assert_int_equal(ts_mig_best_start(g, &l, TS_MIG_P_1G), 0);

    /* A seventh instance leaves nothing larger for any start: lowest start. */
    l = layout_of(6, (const int[][2]){{19, 1}, {19, 2}, {19, 3}, {19, 4}, {19, 5}, {19, 6}});
    assert_int_equal(ts_mig_best_start(g, &l, TS_MIG_P_1G), 0);
    l = layout_of(7, (const int[][2]){{19, 0}, {19, 1}, {19, 2}, {19, 3}, {19, 4}, {19, 5},
                                      {19, 6}});
    assert_int_equal(ts_mig_best_start(g, &l, TS_MIG_P_1G_2X), TS_ENOSPC);

    /* Full or blocked: no space. */
    l = layout_of(1, (const int[][2]){{TS_MIG_P_7G, 0}});
    assert_int_equal(ts_mig_best_start(g, &l, TS_MIG_P_1G), TS_ENOSPC);
    l = layout_of(1, (const int[][2]){{TS_MIG_P_3G, 0}});
    assert_int_equal(ts_mig_best_start(g, &l, TS_MIG_P_4G), TS_ENOSPC);
    assert_int_equal(ts_mig_best_start(g, &l, 42), TS_EINVAL);
    assert_int_equal(ts_mig_best_start(g, NULL, TS_MIG_P_1G), TS_EINVAL);

    /* Filling a GPU with 1g by best_start keeps the 4g possible longest:
     * 6, then 4 and 5 (each still leaves 4g@0), then 0..3. */
    l = (ts_mig_layout){0};
    const int expect[7] = {6, 4, 5, 0, 1, 2, 3};
    for (int i = 0; i < 7; i++) {
        int s = ts_mig_best_start(g, &l, TS_MIG_P_1G);
        assert_int_equal(s, expect[i]);
        assert_int_equal(ts_mig_layout_add(g, &l, TS_MIG_P_1G, s, NULL), 0);
    }
    assert_int_equal(ts_mig_best_start(g, &l, TS_MIG_P_1G), TS_ENOSPC);
}

static void test_free_placements(void **state)
{
    (void)state;
    ALL_GEOMETRIES {
        ts_mig_layout l = {0};
        /* 7 (1g) + 7 (+me) + 4 (1gx2) + 3 (2g) + 2 (3g) + 1 (4g) + 1 (7g) */
        assert_int_equal(ts_mig_free_placements(g, &l), 25);
        /* 4g at 0: 1g 4,5,6; +me 4,5,6; 1gx2 4,6; 2g 4; 3g 4 = 10 */
        l = layout_of(1, (const int[][2]){{TS_MIG_P_4G, 0}});
        assert_int_equal(ts_mig_free_placements(g, &l), 10);
        /* +me taken: no second +me; 1g at 0..6 except 3 = 6; 1gx2 0,4,6;
         * 2g 0,4; 3g 4 = 12 */
        l = layout_of(1, (const int[][2]){{TS_MIG_P_1G_ME, 3}});
        assert_int_equal(ts_mig_free_placements(g, &l), 12);
        l = layout_of(1, (const int[][2]){{TS_MIG_P_7G, 0}});
        assert_int_equal(ts_mig_free_placements(g, &l), 0);
        /* An invalid layout has no room at all. */
        l = layout_of(2, (const int[][2]){{TS_MIG_P_4G, 0}, {TS_MIG_P_3G, 0}});
        assert_int_equal(ts_mig_free_placements(g, &l), 0);
    }
    assert_int_equal(ts_mig_free_placements(TS_MIG_NONE, &(ts_mig_layout){0}), 0);
}

static void test_layout_add(void **state)
{
    (void)state;
    const int g = TS_MIG_A100_40GB;
    ts_mig_layout l = {0};
    ts_err err = {0};
    assert_int_equal(ts_mig_layout_add(g, &l, TS_MIG_P_3G, 4, &err), 0);
    assert_int_equal(ts_mig_layout_add(g, &l, TS_MIG_P_3G, 4, &err), TS_ENOSPC);
    assert_int_equal(err.code, TS_ENOSPC);
    assert_contains(err.msg, "instances 0 and 1 overlap at slot 4");
    assert_int_equal(l.n, 1);
    assert_int_equal(ts_mig_layout_add(g, &l, TS_MIG_P_2G, 6, &err), TS_EINVAL);
    assert_contains(err.msg, "2g.10gb at slot 6: 2g may start only at slots 0,2,4");
    assert_int_equal(ts_mig_layout_add(g, &l, 99, 0, &err), TS_EINVAL);
    assert_contains(err.msg, "profile id 99");
    assert_int_equal(ts_mig_layout_add(g, &l, TS_MIG_P_2G, 0, &err), 0);
    assert_int_equal(ts_mig_layout_add(g, &l, TS_MIG_P_1G_ME, 2, &err), 0);
    assert_int_equal(ts_mig_layout_add(g, &l, TS_MIG_P_1G_ME, 3, &err), TS_ENOSPC);
    assert_contains(err.msg, "two +me instances");
    assert_int_equal(l.n, 3);
    assert_int_equal(l.inst[2].profile_id, TS_MIG_P_1G_ME);
    assert_int_equal(l.inst[2].start, 2);
    /* The 4g fits beside the 3g at 4 but not beside the 2g at 0. */
    assert_int_equal(ts_mig_layout_add(g, &l, TS_MIG_P_4G, 0, &err), TS_ENOSPC);
    assert_contains(err.msg, "overlap at slot 0");
    ts_mig_layout bad = {.n = 2, .inst = {{TS_MIG_P_4G, 0, 0}, {TS_MIG_P_3G, 0, 0}}};
    assert_int_equal(ts_mig_layout_add(g, &bad, TS_MIG_P_1G, 6, &err), TS_EINVAL);
    assert_contains(err.msg, "MIG layout before adding: instances 0 and 1 overlap");
    l = layout_of(7, (const int[][2]){{19, 0}, {19, 1}, {19, 2}, {19, 3}, {19, 4}, {19, 5},
                                      {15, 6}});
    assert_int_equal(ts_mig_layout_add(g, &l, TS_MIG_P_1G, 6, &err), TS_ENOSPC);
    assert_contains(err.msg, "already has 7 instances");
}

/* ---- parsing ------------------------------------------------------------ */

static void test_profile_parse(void **state)
{
    (void)state;
    const char *shorts[TS_MIG_NPROFILES] = {"1g", "1g+me", "1gx2", "2g", "3g", "4g", "7g"};
    ALL_GEOMETRIES {
        for (int r = 0; r < TS_MIG_NPROFILES; r++) {
            assert_int_equal(ts_mig_profile_parse(g, shorts[r], NULL), FACTS[r].id);
            assert_int_equal(ts_mig_profile_parse(g, NAMES[g][r], NULL), FACTS[r].id);
        }
        assert_int_equal(ts_mig_profile_parse(g, "3G", NULL), TS_MIG_P_3G);
    }
    assert_int_equal(ts_mig_profile_parse(TS_MIG_H200_141GB, "1G.18GB+ME", NULL),
                     TS_MIG_P_1G_ME);

    ts_err err = {0};
    assert_int_equal(ts_mig_profile_parse(TS_MIG_A100_40GB, "3g.40gb", &err), TS_EINVAL);
    assert_contains(err.msg, "\"3g.40gb\": a A100-80GB profile, not one of A100-40GB");
    assert_contains(err.msg, "use 3g.20gb or the short form 3g");
    assert_int_equal(ts_mig_profile_parse(TS_MIG_H200_141GB, "5g", &err), TS_EINVAL);
    assert_contains(err.msg, "\"5g\": not a profile of H200-141GB");
    assert_contains(err.msg, "1g.18gb, 1g.18gb+me, 1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb, 7g.141gb");
    assert_int_equal(ts_mig_profile_parse(TS_MIG_H200_141GB, "1g.18gb ", &err), TS_EINVAL);
    assert_int_equal(ts_mig_profile_parse(TS_MIG_H200_141GB, "1g.18gb+me+me", &err),
                     TS_EINVAL);
    assert_int_equal(ts_mig_profile_parse(TS_MIG_A100_80GB, "", &err), TS_EINVAL);
    assert_contains(err.msg, "must not be empty");
    assert_int_equal(ts_mig_profile_parse(TS_MIG_A100_80GB, NULL, &err), TS_EINVAL);
    assert_int_equal(ts_mig_profile_parse(TS_MIG_NONE, "1g", &err), TS_EINVAL);
    assert_contains(err.msg, "not a MIG geometry");
    assert_int_equal(ts_mig_profile_parse(TS_MIG_A100_80GB, "x", NULL), TS_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_geometry_of_model_names),
        cmocka_unit_test(test_every_profile_of_every_geometry),
        cmocka_unit_test(test_enumeration_77_creatable_28_maximal),
        cmocka_unit_test(test_each_listed_maximal_mix_accepted),
        cmocka_unit_test(test_listed_impossible_requests_refused_with_reason),
        cmocka_unit_test(test_validate_messages),
        cmocka_unit_test(test_creation_order_does_not_matter),
        cmocka_unit_test(test_best_start_worked_by_hand),
        cmocka_unit_test(test_free_placements),
        cmocka_unit_test(test_layout_add),
        cmocka_unit_test(test_profile_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
