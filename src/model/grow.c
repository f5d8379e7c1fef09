/*
 * grow.c - the one growth rule of the tree's arrays, and the one block of
 * arrays sized once (tessera/grow.h).
 */
#include "tessera/grow.h"

#include <limits.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "tessera/error.h"

/* The capacity need grows cap to (first where cap is 0, doubled until need
 * fits); 0 where it would pass INT_MAX. */
static int grow_capacity(int cap, int need, int first)
{
    int n = cap > 0 ? cap : (first > 0 ? first : 1);
    while (n < need) {
        if (n > INT_MAX / 2)
            return 0;
        n *= 2;
    }
    return n;
}

/* *arr reallocated to n elements of size bytes; false, *arr kept, if not. */
static bool grow_to(void **arr, int n, size_t size)
{
    if (size && (size_t)n > SIZE_MAX / size)
        return false;
    void *p = realloc(*arr, (size_t)n * size);
    if (!p)
        return false;
    *arr = p;
    return true;
}

int ts_grow(void **arr, int *cap, int need, int first, size_t size)
{
    if (need <= *cap)
        return 0;
    int n = grow_capacity(*cap, need, first);
    if (n == 0 || !grow_to(arr, n, size))
        return TS_ENOMEM;
    *cap = n;
    return 0;
}

int ts_grow_parts(const ts_block_part *parts, int nparts, int *cap, int need, int first)
{
    if (need <= *cap)
        return 0;
    int n = grow_capacity(*cap, need, first);
    for (int i = 0; i < nparts; i++)
        if (n == 0 || !grow_to(parts[i].ptr, n, parts[i].size))
            return TS_ENOMEM;
    *cap = n;
    return 0;
}

/* part's bytes rounded up to the block's alignment; 0 on overflow (a part
 * of no bytes takes none either, and cannot overflow) */
static size_t grow_part_bytes(const ts_block_part *part, bool *overflow)
{
    const size_t align = alignof(max_align_t);
    if (part->size && part->count > SIZE_MAX / part->size)
        *overflow = true;
    size_t bytes = part->count * part->size;
    if (bytes > SIZE_MAX - (align - 1))
        *overflow = true;
    return *overflow ? 0 : (bytes + align - 1) / align * align;
}

void *ts_block_alloc(const ts_block_part *parts, int nparts)
{
    size_t total = 0;
    bool overflow = false;
    for (int i = 0; i < nparts; i++) {
        size_t bytes = grow_part_bytes(&parts[i], &overflow);
        if (overflow || bytes > SIZE_MAX - total)
            return NULL;
        total += bytes;
    }
    char *block = calloc(1, total > 0 ? total : 1);
    if (!block)
        return NULL;
    size_t off = 0;
    for (int i = 0; i < nparts; i++) {
        *parts[i].ptr = block + off;
        off += grow_part_bytes(&parts[i], &overflow);
    }
    return block;
}
