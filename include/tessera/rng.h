/*
 * rng.h - the seeded random source the core is handed by its caller.
 *
 * The core never reads a clock or a global RNG: every random choice (random
 * scores, tie-breaking, shuffles) draws from a ts_rng the caller seeded, so a
 * run is a function of its input and seed on every machine. The generator is
 * xoshiro256** seeded through splitmix64; ts_rng_below uses Lemire's
 * multiply-and-reject so bounded draws carry no modulo bias.
 */
#ifndef TESSERA_RNG_H
#define TESSERA_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ts_rng {
    uint64_t s[4];
} ts_rng;

void ts_rng_seed(ts_rng *rng, uint64_t seed);
uint64_t ts_rng_next(ts_rng *rng);
/* Uniform in [0, bound); bound > 0. */
uint64_t ts_rng_below(ts_rng *rng, uint64_t bound);
/* Uniform in [0, 1) with 53 random bits. */
double ts_rng_double(ts_rng *rng);
/* Fisher-Yates shuffle of n elements of size bytes each. */
void ts_rng_shuffle(ts_rng *rng, void *base, int n, int size);

#ifdef __cplusplus
}
#endif
#endif
