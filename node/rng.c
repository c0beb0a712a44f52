/* node/rng: see rng.h. */
#include "node/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

void rng_seed(struct rng *self, uint64_t seed, uint64_t stream)
{
	uint64_t x = seed ^ splitmix64(&stream);

	for (int i = 0; i < 4; i++)
		self->s[i] = splitmix64(&x);
}

uint64_t rng_u64(struct rng *self)
{
	uint64_t *s = self->s;
	uint64_t r = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return r;
}

double rng_uniform(struct rng *self)
{
	return (double)(rng_u64(self) >> 11) * 0x1.0p-53;
}

uint32_t rng_below(struct rng *self, uint32_t n)
{
	uint64_t m = (uint64_t)(uint32_t)rng_u64(self) * n;
	uint32_t l = (uint32_t)m;

	if (l < n) {
		uint32_t t = (uint32_t)(-n) % n;

		while (l < t) {
			m = (uint64_t)(uint32_t)rng_u64(self) * n;
			l = (uint32_t)m;
		}
	}
	return (uint32_t)(m >> 32);
}

double rng_normal(struct rng *self)
{
	double u1 = 1.0 - rng_uniform(self); /* (0, 1] so log is finite */
	double u2 = rng_uniform(self);

	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double rng_gamma(struct rng *self, double shape)
{
	double d, c;

	if (shape < 1.0) {
		double u = 1.0 - rng_uniform(self);

		return rng_gamma(self, shape + 1.0) * pow(u, 1.0 / shape);
	}
	d = shape - 1.0 / 3.0;
	c = 1.0 / sqrt(9.0 * d);
	for (;;) {
		double x = rng_normal(self), v = 1.0 + c * x, u;

		if (v <= 0.0)
			continue;
		v = v * v * v;
		u = 1.0 - rng_uniform(self);
		if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
			return d * v;
	}
}

void rng_shuffle_u32(struct rng *self, uint32_t *a, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		uint32_t j = rng_below(self, (uint32_t)i);
		uint32_t t = a[i - 1];

		a[i - 1] = a[j];
		a[j] = t;
	}
}
