/* Unit tests for lib/latehist: bucket bounds, and mean/quantile/max against a naive model that
 * keeps every sample and sorts them. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "lib/latehist.h"

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

Test(latehist, buckets_cover_every_value_once)
{
	for (uint64_t us = 0; us < 300000; us += 1 + us / 97) {
		unsigned i = latehist_bucket(us);
		cr_assert_lt(i, LATEHIST_NBUCKETS);
		cr_assert_leq(latehist_bucket_lo_us(i), us, "us %lu bucket %u", (unsigned long)us, i);
		cr_assert_gt(latehist_bucket_hi_us(i), us, "us %lu bucket %u", (unsigned long)us, i);
		/* width at most 1/16 of the value past the linear part */
		if (us >= LATEHIST_LINEAR_US)
			cr_assert_leq((latehist_bucket_hi_us(i) - latehist_bucket_lo_us(i)) * 16, us);
	}
	for (unsigned i = 0; i + 1 < LATEHIST_NBUCKETS; i++)
		cr_assert_eq(latehist_bucket_hi_us(i), latehist_bucket_lo_us(i + 1), "bucket %u", i);
	cr_assert_eq(latehist_bucket(UINT64_MAX / 2), LATEHIST_NBUCKETS - 1);
	cr_assert_eq(latehist_bucket(63), 63);
	cr_assert_eq(latehist_bucket(64), 64);
}

Test(latehist, empty_is_zero)
{
	struct latehist h;

	latehist_reset(&h);
	cr_assert_eq(latehist_mean_ns(&h), 0);
	cr_assert_eq(latehist_quantile_ns(&h, 0.99), 0);
	cr_assert_eq(latehist_max_ns(&h), 0);
}

/* The histogram's p99 is the naive one rounded up to its bucket's bound: never below it, and
 * above it by less than a bucket (1 us, or 1/16 of the value). */
static void check_against_model(const int64_t *v, size_t n)
{
	struct latehist h;
	int64_t *s = malloc(n * sizeof *s), sum = 0, max = 0;

	cr_assert_not_null(s);
	latehist_reset(&h);
	for (size_t i = 0; i < n; i++) {
		latehist_add(&h, v[i]);
		sum += v[i];
		s[i] = v[i] > 0 ? v[i] : 0;
		if (s[i] > max)
			max = s[i];
	}
	qsort(s, n, sizeof *s, cmp_i64);
	cr_assert_eq(h.n, n);
	cr_assert_eq(latehist_mean_ns(&h), sum / (int64_t)n);
	cr_assert_eq(latehist_max_ns(&h), max);
	const double qs[] = { 0.5, 0.9, 0.99, 0.999, 1.0 };
	for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
		size_t rank = (size_t)__builtin_ceil(qs[k] * (double)n);
		int64_t want = s[rank - 1], got = latehist_quantile_ns(&h, qs[k]);
		int64_t slack = want < 64000 ? 1000 : want / 16 + 1000;
		cr_assert_geq(got, want, "q %g: %ld < %ld", qs[k], (long)got, (long)want);
		cr_assert_leq(got, want + slack, "q %g: %ld vs %ld", qs[k], (long)got, (long)want);
		cr_assert_leq(got, max);
	}
	free(s);
}

Test(latehist, matches_naive_model)
{
	enum { N = 20000 };
	int64_t *v = malloc(N * sizeof *v);
	unsigned seed = 7;

	cr_assert_not_null(v);
	for (int round = 0; round < 4; round++) {
		for (size_t i = 0; i < N; i++) {
			int64_t r = rand_r(&seed);
			switch (round) {
			case 0: v[i] = r % 50000; break;                 /* 0-50 us */
			case 1: v[i] = (r % 100 == 0) ? 2000000 + r % 8000000 : r % 30000; break; /* rare stalls */
			case 2: v[i] = r % 40000 - 20000; break;         /* early and late */
			default: v[i] = (int64_t)(r % 1000) * (r % 1000) * 10; break;
			}
		}
		check_against_model(v, N);
	}
	int64_t one = 1234567;
	check_against_model(&one, 1);
	free(v);
}

Test(latehist, merge_equals_adding_all)
{
	struct latehist a, b, all;

	latehist_reset(&a);
	latehist_reset(&b);
	latehist_reset(&all);
	for (int64_t i = 0; i < 5000; i++) {
		int64_t x = (i * 7919) % 3000000 - 1000;
		latehist_add(i % 3 ? &a : &b, x);
		latehist_add(&all, x);
	}
	latehist_merge(&a, &b);
	cr_assert_eq(a.n, all.n);
	cr_assert_eq(a.sum_ns, all.sum_ns);
	cr_assert_eq(a.max_ns, all.max_ns);
	cr_assert_eq(latehist_quantile_ns(&a, 0.99), latehist_quantile_ns(&all, 0.99));
	for (unsigned i = 0; i < LATEHIST_NBUCKETS; i++)
		cr_assert_eq(a.b[i], all.b[i]);
}
