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

int ts_grow(void **arr, int *cap, int need, int first, size_t size)
{
    if (need <= *cap)
        return 0;
    int n = *cap > 0 ? *cap : (first > 0 ? first : 1);
    while (n < need) {
        if (n > INT_MAX / 2)
            return TS_ENOMEM;
        n *= 2;
    }
    if (size && (size_t)n > SIZE_MAX / size)
        return TS_ENOMEM;
    void *p = realloc(*arr, (size_t)n * size);
    if (!p)
        return TS_ENOMEM;
    *arr = p;
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
