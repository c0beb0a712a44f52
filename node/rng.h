/* node/rng: small deterministic random numbers for partitioning, initialisation and shuffling.
 *
 * xoshiro256** (Blackman & Vigna 2018) seeded through splitmix64, so any 64-bit seed, including
 * 0, gives a well-mixed state. Identical sequences on every machine: partitions and initial
 * models computed independently on every node agree bit for bit. */
#ifndef STALENET_RNG_H
#define STALENET_RNG_H

#include <stddef.h>
#include <stdint.h>

struct rng {
	uint64_t s[4];
};

/* Seed from (seed, stream): different streams of one seed are independent sequences. */
void rng_seed(struct rng *self, uint64_t seed, uint64_t stream);

uint64_t rng_u64(struct rng *self);

/* Uniform in [0, 1) with 53 random bits. */
double rng_uniform(struct rng *self);

/* Uniform integer in [0, n), n > 0, without modulo bias (Lemire's method). */
uint32_t rng_below(struct rng *self, uint32_t n);

/* Standard normal (Box-Muller). */
double rng_normal(struct rng *self);

/* Gamma(shape, 1), shape > 0 (Marsaglia & Tsang 2000; shape < 1 by the u^(1/shape) boost). */
double rng_gamma(struct rng *self, double shape);

/* Fisher-Yates shuffle of a[0..n). */
void rng_shuffle_u32(struct rng *self, uint32_t *a, size_t n);

#endif
