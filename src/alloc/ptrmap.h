/*
 * ptrmap.h - internal: a hash map from a non-zero 64-bit key (a device
 * address, a stream id, a page number) to a pointer. Open addressing with
 * linear probing and backward-shift deletion, so lookups never walk
 * tombstones; the table doubles at 50 % load. The map owns its table, not
 * the values. Not thread-safe.
 */
#ifndef TS_ALLOC_PTRMAP_H
#define TS_ALLOC_PTRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct ts_ptrmap {
    uint64_t *keys; /* 0 = empty slot */
    void **vals;
    size_t cap;     /* power of two */
    size_t n;
} ts_ptrmap;

void alloc_ptrmap_init(ts_ptrmap *m);
void alloc_ptrmap_destroy(ts_ptrmap *m);
/* Inserts or replaces; key must not be 0. Returns 0 or TS_ENOMEM. */
int alloc_ptrmap_put(ts_ptrmap *m, uint64_t key, void *val);
void *alloc_ptrmap_get(const ts_ptrmap *m, uint64_t key);
/* Removes key; returns its value (NULL if absent). */
void *alloc_ptrmap_del(ts_ptrmap *m, uint64_t key);
/* Iteration: start with *pos = 0; returns 0 when done. */
int alloc_ptrmap_next(const ts_ptrmap *m, size_t *pos, uint64_t *key, void **val);

#endif
