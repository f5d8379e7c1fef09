/*
 * grow.h - the one growth rule of the tree's arrays: an array that is
 * appended to doubles its capacity, from a first one, when it is full.
 * Written once so that every folder grows its arrays the same way (and a
 * capacity overflow is caught in one place). Arrays that are sized once and
 * live and die together (a struct of arrays) are one block instead: one
 * allocation, one failure to check, one free.
 */
#ifndef TESSERA_GROW_H
#define TESSERA_GROW_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Makes room in *arr (elements of size bytes, *cap of them allocated) for
 * need elements: the capacity, first where it is 0, is doubled until need
 * fits, and *arr reallocated. 0 (also when it fits already), or TS_ENOMEM
 * with *arr and *cap unchanged. */
int ts_grow(void **arr, int *cap, int need, int first, size_t size);

/* One array of a block: its address goes to *ptr, count elements of size
 * bytes each. */
typedef struct ts_block_part {
    void **ptr;
    size_t count;
    size_t size;
} ts_block_part;

/* A part for array p (any pointer lvalue) of n elements. */
#define TS_BLOCK_PART(p, n) {(void **)&(p), (n), sizeof *(p)}

/* Parallel arrays on one capacity (the same index in each), grown together
 * by ts_grow's rule: each part's *ptr reallocated (its count is not read:
 * TS_GROW_PART). 0, or TS_ENOMEM with *cap unchanged; a part moved before
 * the failure keeps its contents in its larger room. */
int ts_grow_parts(const ts_block_part *parts, int nparts, int *cap, int need, int first);

/* A part for ts_grow_parts: array p (any pointer lvalue). */
#define TS_GROW_PART(p) {(void **)&(p), 0, sizeof *(p)}

/* Allocates the nparts arrays as one zeroed block, each starting at a
 * multiple of alignof(max_align_t), and stores each one's address in its
 * *ptr. Returns the block, which the caller frees once (that frees every
 * part), or NULL, the *ptr untouched, when memory is short or the sizes
 * overflow. */
void *ts_block_alloc(const ts_block_part *parts, int nparts);

#ifdef __cplusplus
}
#endif

#endif
