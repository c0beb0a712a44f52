/* lib/latehist: a fixed-bucket histogram of lateness (how long after its scheduled time an event
 * happened), with exact count, mean and maximum and a bucketed p99. Pure: no clock, no I/O, no
 * allocation, so the emulator's release path can feed it per packet and the host timer probe per
 * wake-up.
 *
 * Buckets: 1 us wide below 64 us, then 16 per power of two (each at most 1/16 = 6.25% of its
 * value wide) up to 2^31 us (~36 min); values beyond land in the last bucket. A quantile is the
 * upper bound of the bucket holding the nearest-rank sample, capped by the exact maximum, so it
 * never understates. Negative lateness (an early event) counts in the mean as it is and as 0 in
 * the buckets and the maximum. */
#ifndef STALENET_LATEHIST_H
#define STALENET_LATEHIST_H

#include <stdint.h>

#define LATEHIST_LINEAR_US 64        /* 1-us buckets below this */
#define LATEHIST_SUB 16              /* buckets per power of two above */
#define LATEHIST_NBUCKETS (LATEHIST_LINEAR_US + (31 - 6) * LATEHIST_SUB)

struct latehist {
	uint64_t n;                        /* samples */
	int64_t sum_ns;                    /* signed sum (saturates rather than wraps) */
	int64_t max_ns;                    /* largest sample, >= 0 */
	uint32_t b[LATEHIST_NBUCKETS];     /* counts per bucket (saturate at UINT32_MAX) */
};

/* Empty the histogram. */
void latehist_reset(struct latehist *h);

/* Record one sample of late_ns nanoseconds (negative = early). */
void latehist_add(struct latehist *h, int64_t late_ns);

/* Add every sample of src to dst. */
void latehist_merge(struct latehist *dst, const struct latehist *src);

/* Mean of the samples in ns (signed), 0 when empty. */
int64_t latehist_mean_ns(const struct latehist *h);

/* Nearest-rank quantile q in (0, 1] in ns: the upper bound of the bucket of the ceil(q n)-th
 * smallest sample, at most the maximum. 0 when empty. */
int64_t latehist_quantile_ns(const struct latehist *h, double q);

/* Largest sample in ns (early samples count as 0), 0 when empty. */
int64_t latehist_max_ns(const struct latehist *h);

/* Bucket index of a lateness of us microseconds (>= 0), and the bucket's bounds [lo, hi) in us.
 * Exposed for the tests. */
unsigned latehist_bucket(uint64_t us);
uint64_t latehist_bucket_lo_us(unsigned i);
uint64_t latehist_bucket_hi_us(unsigned i);

#endif
