/*
 * cycle_order.c - the sort of a cycle's order keys (cycle_order.h). Sorting
 * 100,000 waiting jobs with qsort took a sixth of the cycle: its call per
 * comparison and byte-wise moves; here the comparison is inlined and the
 * usual queue is sorted in linear time.
 */
#include <stdbool.h>
#include <string.h>

#include "sched/cycle_order.h"

/* the order past a key's group (priority, tier, level): service, then age */
static inline bool okey_tail_before(const cycle_okey *x, const cycle_okey *y)
{
    if (x->attained != y->attained)
        return x->attained < y->attained;
    if (x->submit_s != y->submit_s)
        return x->submit_s < y->submit_s;
    return x->id < y->id;
}

static inline int okey_group_cmp(const cycle_okey *x, const cycle_okey *y)
{
    if (x->tenant != y->tenant)
        return x->tenant < y->tenant ? -1 : 1;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    if (x->tier != y->tier)
        return x->tier < y->tier ? -1 : 1;
    if (x->level != y->level)
        return x->level < y->level ? -1 : 1;
    return 0;
}

static inline bool okey_before(const cycle_okey *x, const cycle_okey *y)
{
    int c = okey_group_cmp(x, y);
    return c != 0 ? c < 0 : okey_tail_before(x, y);
}

#define OKEY_RUN 16   /* runs sorted by insertion before merging */
#define OKEY_GROUPS 128 /* groups the counting pass takes (grp is a byte) */
#define OKEY_SLOTS 256  /* its hash of groups: twice as many slots */

/* A merge sort with the comparison inlined; tmp holds n. */
static void okey_merge_sort(cycle_okey *a, int n, cycle_okey *tmp)
{
    for (int lo = 0; lo < n; lo += OKEY_RUN) {
        int hi = lo + OKEY_RUN < n ? lo + OKEY_RUN : n;
        for (int i = lo + 1; i < hi; i++) {
            cycle_okey v = a[i];
            int k = i;
            for (; k > lo && okey_before(&v, &a[k - 1]); k--)
                a[k] = a[k - 1];
            a[k] = v;
        }
    }
    cycle_okey *src = a, *dst = tmp;
    for (int w = OKEY_RUN; w < n; w *= 2) {
        for (int lo = 0; lo < n; lo += 2 * w) {
            int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = okey_before(&src[j], &src[i]) ? src[j++] : src[i++];
            memcpy(dst + k, src + i, (size_t)(mid - i) * sizeof *src);
            k += mid - i;
            memcpy(dst + k, src + j, (size_t)(hi - j) * sizeof *src);
        }
        cycle_okey *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, (size_t)n * sizeof *a);
}

/* A key's group for the counting pass: its group of the order (tenant,
 * priority, tier, level) and its service, -0 read as 0. */
typedef struct okey_grp {
    uint64_t k1, k2, k3;
} okey_grp;

static inline okey_grp okey_grp_of(const cycle_okey *x)
{
    double at = x->attained + 0.0; /* -0 + 0 is +0 */
    uint64_t bits;
    memcpy(&bits, &at, sizeof bits);
    return (okey_grp){(uint64_t)(uint32_t)x->tenant << 32 | (uint32_t)x->priority,
                      (uint64_t)(uint32_t)x->tier << 32 | (uint32_t)x->level, bits};
}

static inline unsigned okey_slot(okey_grp k)
{
    uint64_t h = (k.k1 * 0x9e3779b97f4a7c15u) ^ (k.k2 * 0xc2b2ae3d27d4eb4fu) ^
                 (k.k3 * 0x165667b19e3779f9u);
    return (unsigned)(h >> 56) & (OKEY_SLOTS - 1);
}

/* The usual queue in linear time: jobs come in submission order, so the
 * jobs of one group and one service are already in order by age (always so
 * under fifo, for fresh jobs outside a split first level, whose service is
 * 0, and for a split tenant's fresh jobs, whose service is the GPUs they
 * ask, a few sizes), and a stable counting pass over those few groups sorts
 * them. False, a untouched, where they are not in order or the groups are
 * many (jobs of varied attained service); grp holds n. */
static bool okey_group_sort(cycle_okey *a, int n, cycle_okey *tmp, uint8_t *grp)
{
    okey_grp key[OKEY_GROUPS];
    int count[OKEY_GROUPS] = {0}, last[OKEY_GROUPS], first[OKEY_GROUPS], ng = 0;
    int16_t slot[OKEY_SLOTS];
    memset(slot, -1, sizeof slot);
    int g = -1;
    for (int i = 0; i < n; i++) {
        if (a[i].attained != a[i].attained)
            return false; /* no service is NaN; the merge sort takes it */
        okey_grp k = okey_grp_of(&a[i]);
        /* jobs of one group often come together: the last one's first */
        if (g < 0 || key[g].k1 != k.k1 || key[g].k2 != k.k2 || key[g].k3 != k.k3) {
            unsigned s = okey_slot(k);
            for (;; s = (s + 1) & (OKEY_SLOTS - 1)) {
                g = slot[s];
                if (g < 0 || (key[g].k1 == k.k1 && key[g].k2 == k.k2 && key[g].k3 == k.k3))
                    break;
            }
            if (g < 0) {
                if (ng == OKEY_GROUPS)
                    return false;
                g = ng++;
                slot[s] = (int16_t)g;
                key[g] = k;
                first[g] = i;
                last[g] = i;
            }
        }
        if (count[g] > 0 && okey_tail_before(&a[i], &a[last[g]]))
            return false;
        last[g] = i;
        count[g]++;
        grp[i] = (uint8_t)g;
    }
    int at[OKEY_GROUPS];
    for (int h = 0; h < ng; h++) {
        at[h] = 0;
        for (int o = 0; o < ng; o++)
            at[h] += okey_before(&a[first[o]], &a[first[h]]) ? count[o] : 0;
    }
    for (int i = 0; i < n; i++)
        tmp[at[grp[i]]++] = a[i];
    memcpy(a, tmp, (size_t)n * sizeof *a);
    return true;
}

void cycle_order_sort(cycle_okey *a, int n, cycle_okey *tmp, uint8_t *grp)
{
    if (n > 1 && !okey_group_sort(a, n, tmp, grp))
        okey_merge_sort(a, n, tmp);
}
