/*
 * body.c - an HTTP answer's body gathered in memory with a bound
 * (io/body.h). Each piece curl hands over is appended with one realloc: the
 * answers gathered this way are small (a sync answer, a key set), so the
 * few copies cost less than a capacity to keep.
 */
#include "io/body.h"

#include <stdlib.h>
#include <string.h>

size_t io_body_sink(char *data, size_t size, size_t n, void *body)
{
    io_body *b = body;
    size_t k = size * n;
    if (k > b->max - b->len) {
        b->too_big = true;
        return 0;
    }
    char *np = realloc(b->p, b->len + k + 1);
    if (!np)
        return 0;
    memcpy(np + b->len, data, k);
    b->p = np;
    b->len += k;
    b->p[b->len] = '\0';
    return k;
}
