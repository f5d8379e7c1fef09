/*
 * grow.h - the one growth rule of the tree's arrays: an array that is
 * appended to doubles its capacity, from a first one, when it is full.
 * Written once so that every folder grows its arrays the same way (and a
 * capacity overflow is caught in one place).
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

#ifdef __cplusplus
}
#endif

#endif
