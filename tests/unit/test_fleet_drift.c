/* node/fleet_drift: the schedule's text form (good and bad strings), entries applied strictly
 * in order once due, and the selection of samples against a naive reference over random
 * labels. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "node/fleet_drift.h"
#include "node/rng.h"

Test(fleet_drift, parse)
{
	struct fleet_drift d;

	cr_assert_eq(fleet_drift_parse(NULL, &d), 0);
	cr_assert_eq(d.n, 0);
	cr_assert_eq(fleet_drift_parse("", &d), 0);
	cr_assert_eq(d.n, 0);
	cr_assert_eq(fleet_drift_parse("t20.5:7,8;s400:9;t0:0", &d), 0);
	cr_assert_eq(d.n, 3);
	cr_assert(!d.e[0].by_steps);
	cr_assert_float_eq(d.e[0].at_s, 20.5, 1e-12);
	cr_assert_eq(d.e[0].classes, (1u << 7) | (1u << 8));
	cr_assert(d.e[1].by_steps);
	cr_assert_eq(d.e[1].at_steps, 400);
	cr_assert_eq(d.e[1].classes, 1u << 9);
	cr_assert_eq(d.e[2].classes, 1u);
	static const char *const bad[] = { "x1:2", "t:2", "t1", "t1:", "t1:16", "t1:-1", "s-3:1",
					   "t1:2;;", "t1:2,", "t1:2x", "tnan:1", "t-1:1", "s1.5:2" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		cr_assert_eq(fleet_drift_parse(bad[i], &d), -EINVAL, "'%s' accepted", bad[i]);
}

Test(fleet_drift, due_in_order)
{
	struct fleet_drift d;

	cr_assert_eq(fleet_drift_parse("s10:1;t5:2;s3:3", &d), 0);
	/* the second entry is due by time but waits for the first */
	cr_assert_eq(fleet_drift_due(&d, 6.0, 9), 0);
	cr_assert_eq(fleet_drift_due(&d, 6.0, 10), 1u << 1);
	cr_assert_eq(fleet_drift_due(&d, 6.0, 10), 1u << 2);
	cr_assert_eq(fleet_drift_due(&d, 6.0, 10), 1u << 3); /* s3: long due */
	cr_assert_eq(fleet_drift_due(&d, 100.0, 1000), 0);
	cr_assert_eq(d.next, 3);
}

Test(fleet_drift, select_matches_reference)
{
	enum { N = 5000 };
	uint8_t *labels = malloc(N);
	struct rng r;

	rng_seed(&r, 3, 1);
	for (int i = 0; i < N; i++)
		labels[i] = (uint8_t)(rng_u64(&r) % 10);
	for (uint32_t ndev = 1; ndev <= 4; ndev++)
		for (uint32_t index = 0; index < ndev; index++) {
			uint16_t classes = (uint16_t)((1u << 2) | (1u << 7) | (1u << (index + 3)));
			uint16_t held = 1u << 7;
			uint32_t *idx;
			size_t n, k = 0;

			cr_assert_eq(fleet_drift_select(labels, N, index, ndev, classes, held, &idx, &n), 0);
			for (uint32_t p = 0; p < N; p++) {
				bool want = p % ndev == index && (classes >> labels[p] & 1) &&
					    !(held >> labels[p] & 1);

				if (!want)
					continue;
				cr_assert_lt(k, n);
				cr_assert_eq(idx[k], p, "device %u of %u: %zu-th is %u, want %u", index,
					     ndev, k, idx[k], p);
				k++;
			}
			cr_assert_eq(k, n);
			cr_assert_gt(n, 100);
			free(idx);
		}
	/* only held classes: nothing */
	{
		uint32_t *idx;
		size_t n;

		cr_assert_eq(fleet_drift_select(labels, N, 0, 2, 1u << 4, 1u << 4, &idx, &n), 0);
		cr_assert_eq(n, 0);
		cr_assert_null(idx);
	}
	free(labels);
}
