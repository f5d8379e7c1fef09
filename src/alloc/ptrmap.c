/*
 * ptrmap.c - the hash map of ptrmap.h. Keys are mixed with a 64-bit
 * finaliser (device addresses share their low bits and their high bits).
 */
#include "alloc/ptrmap.h"

#include <stdlib.h>

#include "tessera/error.h"

#define PTRMAP_MIN_CAP 64

static size_t slot_of(uint64_t k, size_t cap)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

void alloc_ptrmap_init(ts_ptrmap *m)
{
    m->keys = NULL;
    m->vals = NULL;
    m->cap = 0;
    m->n = 0;
}

void alloc_ptrmap_destroy(ts_ptrmap *m)
{
    free(m->keys);
    free(m->vals);
    alloc_ptrmap_init(m);
}

static int grow(ts_ptrmap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : PTRMAP_MIN_CAP;
    uint64_t *nk = calloc(ncap, sizeof *nk);
    void **nv = calloc(ncap, sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return TS_ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t s = slot_of(m->keys[i], ncap);
        while (nk[s])
            s = (s + 1) & (ncap - 1);
        nk[s] = m->keys[i];
        nv[s] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
    return 0;
}

int alloc_ptrmap_put(ts_ptrmap *m, uint64_t key, void *val)
{
    if ((m->n + 1) * 2 > m->cap && grow(m) != 0)
        return TS_ENOMEM;
    size_t s = slot_of(key, m->cap);
    while (m->keys[s] && m->keys[s] != key)
        s = (s + 1) & (m->cap - 1);
    if (!m->keys[s])
        m->n++;
    m->keys[s] = key;
    m->vals[s] = val;
    return 0;
}

void *alloc_ptrmap_get(const ts_ptrmap *m, uint64_t key)
{
    if (!m->cap)
        return NULL;
    size_t s = slot_of(key, m->cap);
    while (m->keys[s]) {
        if (m->keys[s] == key)
            return m->vals[s];
        s = (s + 1) & (m->cap - 1);
    }
    return NULL;
}

void *alloc_ptrmap_del(ts_ptrmap *m, uint64_t key)
{
    if (!m->cap)
        return NULL;
    size_t mask = m->cap - 1;
    size_t s = slot_of(key, m->cap);
    while (m->keys[s] && m->keys[s] != key)
        s = (s + 1) & mask;
    if (!m->keys[s])
        return NULL;
    void *val = m->vals[s];
    /* backward shift: pull later entries of the probe run into the hole */
    size_t hole = s, j = s;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->keys[j])
            break;
        size_t home = slot_of(m->keys[j], m->cap);
        /* j may move to hole if its home is not in (hole, j] cyclically */
        int between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!between) {
            m->keys[hole] = m->keys[j];
            m->vals[hole] = m->vals[j];
            hole = j;
        }
    }
    m->keys[hole] = 0;
    m->vals[hole] = NULL;
    m->n--;
    return val;
}

int alloc_ptrmap_next(const ts_ptrmap *m, size_t *pos, uint64_t *key, void **val)
{
    while (*pos < m->cap) {
        size_t i = (*pos)++;
        if (m->keys[i]) {
            *key = m->keys[i];
            if (val)
                *val = m->vals[i];
            return 1;
        }
    }
    return 0;
}
