/* Unit tests for netem/linkd_comp: the per-write measurement against a naive per-packet sum, and
 * the average's convergence, bounds and stall rejection against a naive floating-point EWMA. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "netem/linkd_comp.h"

/* The naive measurement: every packet's own decision-to-delivery time, averaged. */
static double naive_sample(int64_t decide, int64_t start, int64_t end, uint32_t n)
{
	double sum = 0;

	for (uint32_t k = 1; k <= n; k++)
		sum += (double)(start - decide) + (double)(end - start) * k / n;
	return sum / n;
}

Test(linkd_comp, sample_is_the_mean_over_batch_positions)
{
	/* one packet: decision to the write's return */
	cr_assert_eq(linkd_comp_sample_ns(1000, 1500, 9500, 1), 8500);
	/* two: delivered at the middle and at the end */
	cr_assert_eq(linkd_comp_sample_ns(0, 0, 8000, 2), 6000);
	srand(11);
	for (int i = 0; i < 5000; i++) {
		int64_t decide = rand() % 1000000, start = decide + rand() % 50000, end = start + rand() % 400000;
		uint32_t n = 1 + (uint32_t)(rand() % 300);
		int64_t got = linkd_comp_sample_ns(decide, start, end, n);
		double want = naive_sample(decide, start, end, n);

		cr_assert(got >= want - 1 && got <= want + 1, "n %u: got %ld want %.1f", n, (long)got, want);
	}
}

Test(linkd_comp, sample_rejects_nonsense)
{
	cr_assert_eq(linkd_comp_sample_ns(0, 10, 20, 0), -1);
	cr_assert_eq(linkd_comp_sample_ns(100, 10, 20, 1), -1); /* write began before the decision */
	cr_assert_eq(linkd_comp_sample_ns(0, 30, 20, 1), -1);   /* returned before it began */
}

Test(linkd_comp, starts_at_zero_and_takes_the_first_sample)
{
	struct linkd_comp c;

	linkd_comp_init(&c, LINKD_COMP_MAX_NS);
	cr_assert_eq(linkd_comp_ns(&c), 0);
	linkd_comp_add(&c, 42000);
	cr_assert_eq(linkd_comp_ns(&c), 42000);
	linkd_comp_add(&c, -5); /* no measurement */
	cr_assert_eq(linkd_comp_ns(&c), 42000);
	cr_assert_eq(c.n, 1);
}

Test(linkd_comp, follows_a_naive_ewma)
{
	struct linkd_comp c;
	double ref = 0;

	linkd_comp_init(&c, LINKD_COMP_MAX_NS);
	srand(5);
	for (int i = 0; i < 20000; i++) {
		/* a level that moves now and then, with noise */
		int64_t level = (i / 2000) % 2 ? 30000 : 90000;
		int64_t s = level + rand() % 20000 - 10000;

		linkd_comp_add(&c, s);
		ref = i == 0 ? (double)s : ref + ((double)s - ref) / LINKD_COMP_WEIGHT;
		/* integer truncation drifts by at most about WEIGHT ns */
		cr_assert(llabs(linkd_comp_ns(&c) - (int64_t)ref) <= LINKD_COMP_WEIGHT + 1, "i %d: %ld vs %.0f", i,
			  (long)linkd_comp_ns(&c), ref);
	}
	/* it converged to the last level (30 us: blocks 9, 11, ... are at 30000) */
	cr_assert(llabs(linkd_comp_ns(&c) - 30000) < 6000, "%ld", (long)linkd_comp_ns(&c));
}

Test(linkd_comp, bounded_and_ignores_stalls)
{
	struct linkd_comp c;

	linkd_comp_init(&c, 50000);
	for (int i = 0; i < 100; i++)
		linkd_comp_add(&c, 120000);
	cr_assert_eq(linkd_comp_ns(&c), 50000, "never above the bound");
	linkd_comp_init(&c, LINKD_COMP_MAX_NS);
	linkd_comp_add(&c, 20000);
	for (int i = 0; i < 100; i++)
		linkd_comp_add(&c, LINKD_COMP_STALL_NS + 1);
	cr_assert_eq(linkd_comp_ns(&c), 20000, "a stall is not the path's cost");
	cr_assert_eq(c.stalls, 100);
	linkd_comp_add(&c, 0);
	cr_assert_lt(linkd_comp_ns(&c), 20000);
	cr_assert_geq(linkd_comp_ns(&c), 0);
	/* off: a zero bound keeps it at zero */
	linkd_comp_init(&c, 0);
	linkd_comp_add(&c, 30000);
	cr_assert_eq(linkd_comp_ns(&c), 0);
	/* a bound beyond the stall limit is clamped to it */
	linkd_comp_init(&c, 10 * LINKD_COMP_STALL_NS);
	cr_assert_eq(c.max_ns, LINKD_COMP_STALL_NS);
}
