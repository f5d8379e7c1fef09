/*
 * array_range.c - a large array's pending elements as a range less a short
 * sorted list (array_range.h). Every operation is O(taken), which stays a
 * handful: indices are taken lowest first, and one taken out of turn leaves
 * the list once next passes it.
 */
#include "ctld/array_range.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/grow.h"

void ctld_range_fini(ctld_range *r)
{
    free(r->taken);
    r->taken = NULL;
    r->ntaken = r->cap = 0;
}

static bool in_list(const ctld_range *r, int idx)
{
    for (int i = 0; i < r->ntaken && r->taken[i] <= idx; i++)
        if (r->taken[i] == idx)
            return true;
    return false;
}

bool ctld_range_has(const ctld_range *r, int idx)
{
    return idx >= r->next && idx < r->size && !in_list(r, idx);
}

int ctld_range_count(const ctld_range *r)
{
    return r->size > r->next ? r->size - r->next - r->ntaken : 0;
}

int ctld_range_lowest(const ctld_range *r, int k, int *out)
{
    int n = 0, t = 0;
    for (int idx = r->next; idx < r->size && n < k; idx++) {
        if (t < r->ntaken && r->taken[t] == idx) {
            t++;
            continue;
        }
        out[n++] = idx;
    }
    return n;
}

int ctld_range_next_after(const ctld_range *r, int idx)
{
    if (idx != r->next)
        return r->next;
    int next = idx + 1;
    for (int t = 0; t < r->ntaken && r->taken[t] <= next; t++)
        if (r->taken[t] == next)
            next++;
    return next;
}

int ctld_range_take(ctld_range *r, int idx)
{
    assert(ctld_range_has(r, idx));
    if (idx == r->next) {
        r->next = ctld_range_next_after(r, idx);
        int drop = 0; /* the list's head that next passed */
        while (drop < r->ntaken && r->taken[drop] < r->next)
            drop++;
        if (drop > 0) {
            memmove(r->taken, r->taken + drop, (size_t)(r->ntaken - drop) * sizeof *r->taken);
            r->ntaken -= drop;
        }
        return 0;
    }
    if (ts_grow((void **)&r->taken, &r->cap, r->ntaken + 1, 8, sizeof *r->taken) != 0)
        return -1;
    int at = r->ntaken;
    while (at > 0 && r->taken[at - 1] > idx)
        at--;
    memmove(r->taken + at + 1, r->taken + at, (size_t)(r->ntaken - at) * sizeof *r->taken);
    r->taken[at] = idx;
    r->ntaken++;
    return 0;
}

/* Appends "a" or "a-b" (with a comma before all but the first). */
static void put_run(char *buf, size_t cap, size_t *len, int a, int b)
{
    char one[32];
    int m = a == b ? snprintf(one, sizeof one, "%s%d", *len ? "," : "", a)
                   : snprintf(one, sizeof one, "%s%d-%d", *len ? "," : "", a, b);
    if (cap > 0 && *len + (size_t)m < cap)
        memcpy(buf + *len, one, (size_t)m + 1);
    else if (cap > 4 && *len < cap) /* cut: say so where it still fits */
        snprintf(buf + (*len < cap - 4 ? *len : cap - 4), 4, "...");
    *len += (size_t)m;
}

size_t ctld_range_text(const ctld_range *r, char *buf, size_t cap)
{
    if (cap > 0)
        buf[0] = '\0';
    size_t len = 0;
    int start = r->next;
    for (int t = 0; t <= r->ntaken; t++) {
        int stop = t < r->ntaken ? r->taken[t] : r->size; /* the run is [start, stop) */
        if (stop > start)
            put_run(buf, cap, &len, start, stop - 1);
        start = stop + 1;
    }
    return len;
}
