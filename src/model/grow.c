/*
 * grow.c - the one growth rule of the tree's arrays (tessera/grow.h).
 */
#include "tessera/grow.h"

#include <limits.h>
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
