/*
 * rng.c - xoshiro256** (Blackman and Vigna's public-domain design), written
 * here from its published description; splitmix64 expands the 64-bit seed
 * into the 256-bit state so that nearby seeds give unrelated streams.
 */
#include "tessera/rng.h"

#include <string.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void ts_rng_seed(ts_rng *rng, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ts_rng_next(ts_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t ts_rng_below(ts_rng *rng, uint64_t bound)
{
    __extension__ typedef unsigned __int128 u128;
    u128 m = (u128)ts_rng_next(rng) * bound;
    uint64_t lo = (uint64_t)m;
    if (lo < bound) {
        uint64_t threshold = -bound % bound;
        while (lo < threshold) {
            m = (u128)ts_rng_next(rng) * bound;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double ts_rng_double(ts_rng *rng) { return (double)(ts_rng_next(rng) >> 11) * 0x1.0p-53; }

/* Swaps two elements in chunks, so any element size works without a
 * temporary of that size. */
static void swap_bytes(unsigned char *a, unsigned char *b, size_t size)
{
    unsigned char tmp[64];
    while (size) {
        size_t k = size < sizeof tmp ? size : sizeof tmp;
        memcpy(tmp, a, k);
        memcpy(a, b, k);
        memcpy(b, tmp, k);
        a += k;
        b += k;
        size -= k;
    }
}

void ts_rng_shuffle(ts_rng *rng, void *base, int n, int size)
{
    unsigned char *b = base;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)ts_rng_below(rng, (uint64_t)i + 1);
        if (j != i)
            swap_bytes(b + (size_t)i * (size_t)size, b + (size_t)j * (size_t)size, (size_t)size);
    }
}
