/*
 * test_order_sort.c - the sort of a cycle's order keys (src/sched/
 * cycle_order.c) gives the order the reference comparison below states, on
 * every path: the counting pass over few groups already in order (the usual
 * queue), and the merge sort where a group is out of order, where the groups
 * are more than the counting pass takes, with ties in every field but the
 * id, and at the sizes around the merge sort's runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sched/cycle_order.h"
#include "tessera/rng.h"

/* the order, as the cycle documents it */
static int ref_cmp(const void *a, const void *b)
{
    const cycle_okey *x = a, *y = b;
    if (x->tenant != y->tenant)
        return x->tenant < y->tenant ? -1 : 1;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    if (x->tier != y->tier)
        return x->tier < y->tier ? -1 : 1;
    if (x->level != y->level)
        return x->level < y->level ? -1 : 1;
    if (x->attained != y->attained)
        return x->attained < y->attained ? -1 : 1;
    if (x->submit_s != y->submit_s)
        return x->submit_s < y->submit_s ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

typedef struct shape {
    int groups;      /* distinct priorities x tiers x levels, roughly */
    bool in_order;   /* ids and submissions rise with the index */
    int tied_every;  /* 0, or every k-th key repeats its neighbour's submission */
    bool attained;   /* random attained service */
    bool sizes;      /* service 1, 2, 4 or 8 (the GPUs of a split tenant's fresh
                      * job), or -0 and 0 */
} shape;

static void fill(cycle_okey *a, int n, const shape *sh, ts_rng *rng)
{
    for (int i = 0; i < n; i++) {
        int g = (int)ts_rng_below(rng, (uint64_t)sh->groups);
        a[i] = (cycle_okey){.tenant = 3, .priority = g % 5 - 2, .tier = g / 5 % 3,
                            .level = g / 15, .idx = i};
        a[i].id = sh->in_order ? 1000 + i : (int64_t)ts_rng_below(rng, 1u << 30) * 64 + i;
        a[i].submit_s = sh->in_order ? 0.5 * i : (double)ts_rng_below(rng, 1000);
        if (sh->tied_every && i > 0 && i % sh->tied_every == 0)
            a[i].submit_s = a[i - 1].submit_s;
        a[i].attained = sh->attained ? (double)ts_rng_below(rng, 4) * 3600.0 : 0.0;
        if (sh->sizes) {
            uint64_t r = ts_rng_below(rng, 6);
            a[i].attained = r < 4 ? (double)(1 << r) : r == 4 ? -0.0 : 0.0;
        }
    }
}

static void check_shape(const shape *sh, int n, uint64_t seed)
{
    ts_rng rng;
    ts_rng_seed(&rng, seed);
    cycle_okey *a = malloc((size_t)n * sizeof *a), *ref = malloc((size_t)n * sizeof *ref);
    cycle_okey *tmp = malloc((size_t)n * sizeof *tmp);
    uint8_t *grp = malloc((size_t)n);
    assert_non_null(a);
    assert_non_null(ref);
    assert_non_null(tmp);
    assert_non_null(grp);
    fill(a, n, sh, &rng);
    memcpy(ref, a, (size_t)n * sizeof *a);
    qsort(ref, (size_t)n, sizeof *ref, ref_cmp);
    cycle_order_sort(a, n, tmp, grp);
    for (int i = 0; i < n; i++)
        assert_int_equal(a[i].idx, ref[i].idx);
    free(a);
    free(ref);
    free(tmp);
    free(grp);
}

static const int sizes[] = {0, 1, 2, 15, 16, 17, 31, 33, 64, 100, 1000, 4097};

static void each_size(const shape *sh)
{
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (uint64_t seed = 1; seed <= 3; seed++)
            check_shape(sh, sizes[k], seed * 7919 + (uint64_t)sizes[k]);
}

/* the usual queue: few groups, each in submission order: the counting pass */
static void few_groups_in_order(void **state)
{
    (void)state;
    each_size(&(shape){.groups = 6, .in_order = true});
}

/* groups up to what the counting pass takes (128), and more: the merge
 * sort */
static void many_groups(void **state)
{
    (void)state;
    each_size(&(shape){.groups = 45, .in_order = true});
    each_size(&(shape){.groups = 128, .in_order = true});
    each_size(&(shape){.groups = 300, .in_order = true});
}

/* fresh jobs of split tenants, whose service is the GPUs they ask (-0 and
 * 0 equal), in submission order and not; with 25 groups of 5 services the
 * counting pass takes 125, with 30 of them the merge sort */
static void sizes_as_groups(void **state)
{
    (void)state;
    each_size(&(shape){.groups = 6, .in_order = true, .sizes = true});
    each_size(&(shape){.groups = 6, .in_order = false, .sizes = true});
    each_size(&(shape){.groups = 25, .in_order = true, .sizes = true});
    each_size(&(shape){.groups = 30, .in_order = true, .sizes = true});
}

/* a group out of order (random submissions and ids): the merge sort */
static void out_of_order(void **state)
{
    (void)state;
    each_size(&(shape){.groups = 6, .in_order = false});
    each_size(&(shape){.groups = 1, .in_order = false});
}

/* ties in the submission and attained service that only the id breaks,
 * in order and not */
static void ties(void **state)
{
    (void)state;
    each_size(&(shape){.groups = 6, .in_order = true, .tied_every = 3});
    each_size(&(shape){.groups = 6, .in_order = true, .attained = true});
    each_size(&(shape){.groups = 30, .in_order = false, .tied_every = 2, .attained = true});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(few_groups_in_order),
        cmocka_unit_test(many_groups),
        cmocka_unit_test(out_of_order),
        cmocka_unit_test(ties),
        cmocka_unit_test(sizes_as_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
