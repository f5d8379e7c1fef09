/*
 * array_range.h - the pending elements of a large array that are not jobs
 * yet, as Slurm keeps an array's pending tasks in one record: the indices
 * [next, size) less a short sorted list of those taken out of order (an
 * element a user acted on before its turn). Elements are taken lowest
 * first, so the list stays short: an index leaves it as soon as next passes
 * it. Pure data, no locks: the owner (array_lazy.c) guards it.
 *
 * Ownership: a ctld_range is a value; ctld_range_fini frees its list.
 */
#ifndef TS_CTLD_ARRAY_RANGE_H
#define TS_CTLD_ARRAY_RANGE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ctld_range {
    int size;   /* the array's elements */
    int next;   /* every index below it is taken */
    int *taken; /* sorted, each in (next, size) */
    int ntaken, cap;
} ctld_range;

void ctld_range_fini(ctld_range *r);
/* Whether index idx is still pending (not taken). */
bool ctld_range_has(const ctld_range *r, int idx);
/* How many indices are still pending. */
int ctld_range_count(const ctld_range *r);
/* The lowest k pending indices (fewer if there are fewer), ascending, into
 * out; their count. Changes nothing. */
int ctld_range_lowest(const ctld_range *r, int k, int *out);
/* The next that taking idx would leave (idx pending). */
int ctld_range_next_after(const ctld_range *r, int idx);
/* Takes idx (pending); -1 when out of memory (nothing changed). */
int ctld_range_take(ctld_range *r, int idx);
/* Writes the pending indices as Slurm prints them ("5-9,11,13-99999"),
 * cut with "..." where cap is short; the length it needed. */
size_t ctld_range_text(const ctld_range *r, char *buf, size_t cap);

#endif
