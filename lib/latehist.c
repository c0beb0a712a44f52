/* lib/latehist: fixed-bucket lateness histogram (see the header).
 *
 * The bucket layout is the one of an HDR histogram with 4 significant bits: exact below 64 us
 * (where a precise emulator lives), logarithmic above (where only the order of magnitude of a
 * stall matters). Adding a sample is a few shifts and an increment: cheap enough for every
 * released packet. */
#include "lib/latehist.h"

#include <math.h>
#include <string.h>

void latehist_reset(struct latehist *h)
{
	memset(h, 0, sizeof *h);
}

unsigned latehist_bucket(uint64_t us)
{
	if (us < LATEHIST_LINEAR_US)
		return (unsigned)us;
	unsigned e = 63u - (unsigned)__builtin_clzll(us); /* 2^e <= us < 2^(e+1), e >= 6 */
	if (e > 30)
		return LATEHIST_NBUCKETS - 1;
	unsigned sub = (unsigned)((us >> (e - 4)) & (LATEHIST_SUB - 1));
	return LATEHIST_LINEAR_US + (e - 6) * LATEHIST_SUB + sub;
}

uint64_t latehist_bucket_lo_us(unsigned i)
{
	if (i < LATEHIST_LINEAR_US)
		return i;
	unsigned e = 6 + (i - LATEHIST_LINEAR_US) / LATEHIST_SUB;
	unsigned sub = (i - LATEHIST_LINEAR_US) % LATEHIST_SUB;
	return (1ull << e) + ((uint64_t)sub << (e - 4));
}

uint64_t latehist_bucket_hi_us(unsigned i)
{
	if (i < LATEHIST_LINEAR_US)
		return (uint64_t)i + 1;
	unsigned e = 6 + (i - LATEHIST_LINEAR_US) / LATEHIST_SUB;
	return latehist_bucket_lo_us(i) + (1ull << (e - 4));
}

static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

void latehist_add(struct latehist *h, int64_t late_ns)
{
	int64_t pos = late_ns > 0 ? late_ns : 0;
	unsigned i = latehist_bucket((uint64_t)pos / 1000);

	h->n++;
	h->sum_ns = sat_add(h->sum_ns, late_ns);
	if (pos > h->max_ns)
		h->max_ns = pos;
	if (h->b[i] != UINT32_MAX)
		h->b[i]++;
}

void latehist_merge(struct latehist *dst, const struct latehist *src)
{
	dst->n += src->n;
	dst->sum_ns = sat_add(dst->sum_ns, src->sum_ns);
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
	for (unsigned i = 0; i < LATEHIST_NBUCKETS; i++) {
		uint64_t s = (uint64_t)dst->b[i] + src->b[i];
		dst->b[i] = s > UINT32_MAX ? UINT32_MAX : (uint32_t)s;
	}
}

int64_t latehist_mean_ns(const struct latehist *h)
{
	return h->n ? h->sum_ns / (int64_t)h->n : 0;
}

int64_t latehist_max_ns(const struct latehist *h)
{
	return h->max_ns;
}

int64_t latehist_quantile_ns(const struct latehist *h, double q)
{
	uint64_t total = 0, rank, seen = 0;

	for (unsigned i = 0; i < LATEHIST_NBUCKETS; i++)
		total += h->b[i];
	if (!total)
		return 0;
	if (!(q > 0))
		q = 1e-12;
	if (q > 1)
		q = 1;
	rank = (uint64_t)ceil(q * (double)total);
	if (rank < 1)
		rank = 1;
	for (unsigned i = 0; i < LATEHIST_NBUCKETS; i++) {
		seen += h->b[i];
		if (seen >= rank) {
			int64_t hi = (int64_t)latehist_bucket_hi_us(i) * 1000;
			return hi < h->max_ns ? hi : h->max_ns;
		}
	}
	return h->max_ns;
}
