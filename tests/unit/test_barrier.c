/* node/barrier against a naive reference written straight from the definitions: exhaustive
 * over small clock vectors, randomized over larger ones, and the sampling distribution. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "node/barrier.h"

/* Reference: "may worker self at clock c proceed", read literally. For sampled kinds the
 * checked set is given as a membership mask. */
static bool ref_proceed(enum barrier_kind kind, int64_t s, const int64_t *clk, const bool *alive,
			size_t n, size_t self, int64_t c, const bool *checked)
{
	cr_assert(checked || (kind != BARRIER_PBSP && kind != BARRIER_PSSP), "a sampled kind needs its checked set");
	for (size_t i = 0; i < n; i++) {
		int64_t need;

		if (i == self || !alive[i])
			continue;
		switch (kind) {
		case BARRIER_ASP:
			continue;
		case BARRIER_BSP:
			need = c;
			break;
		case BARRIER_SSP:
			need = c - s;
			break;
		case BARRIER_PBSP:
			if (!checked[i])
				continue;
			need = c;
			break;
		case BARRIER_PSSP:
			if (!checked[i])
				continue;
			need = c - s;
			break;
		default:
			cr_assert_fail("kind");
		}
		if (clk[i] < need)
			return false;
	}
	return true;
}

Test(barrier, parse_names)
{
	enum barrier_kind k;
	const char *names[] = { "bsp", "ssp", "asp", "pbsp", "pssp" };

	for (int i = 0; i < 5; i++) {
		cr_assert_eq(barrier_kind_parse(names[i], &k), 0);
		cr_assert_eq((int)k, i);
		cr_assert_str_eq(barrier_kind_name(k), names[i]);
	}
	cr_assert_lt(barrier_kind_parse("BSP!", &k), 0);
	cr_assert_lt(barrier_kind_parse(NULL, &k), 0);
	cr_assert_str_eq(barrier_kind_name((enum barrier_kind)42), "?");
}

/* Every clock vector in {0..3}^4 x every alive mask x every self x every c, for the
 * deterministic kinds and s in {0,1,2}. */
Test(barrier, exhaustive_deterministic_kinds)
{
	const size_t n = 4;
	enum barrier_kind kinds[] = { BARRIER_BSP, BARRIER_SSP, BARRIER_ASP };
	long checked = 0, waits = 0;

	for (int ki = 0; ki < 3; ki++)
		for (int64_t s = 0; s <= 2; s++)
			for (int code = 0; code < 256; code++)
				for (int mask = 0; mask < 16; mask++)
					for (size_t self = 0; self < n; self++)
						for (int64_t c = 0; c <= 4; c++) {
							int64_t clk[4];
							bool alive[4];
							struct barrier_params p = { .kind = kinds[ki],
										    .staleness = s };
							bool got, want;

							for (size_t i = 0; i < n; i++) {
								clk[i] = (code >> (2 * i)) & 3;
								alive[i] = (mask >> i) & 1;
							}
							clk[self] = c;
							got = barrier_may_proceed(&p, clk, alive, n, self, c, NULL, 0);
							want = ref_proceed(kinds[ki], s, clk, alive, n, self, c, NULL);
							cr_assert_eq(got, want, "kind %d s %ld code %d mask %d self %zu c %ld",
								     ki, (long)s, code, mask, self, (long)c);
							checked++;
							waits += !got;
						}
	/* The suite must have exercised both outcomes. */
	cr_assert_gt(waits, 1000);
	cr_assert_gt(checked - waits, 1000);
}

/* Every explicit sample subset gives the reference answer for that subset. */
Test(barrier, exhaustive_sampled_kinds)
{
	const size_t n = 4;

	for (int ki = 0; ki < 2; ki++)
		for (int64_t s = 0; s <= 2; s++)
			for (int code = 0; code < 256; code++)
				for (int sub = 0; sub < 16; sub++)
					for (size_t self = 0; self < n; self++) {
						enum barrier_kind kind = ki ? BARRIER_PSSP : BARRIER_PBSP;
						struct barrier_params p = { .kind = kind, .staleness = s };
						int64_t clk[4];
						bool alive[4] = { true, true, true, true }, mem[4];
						size_t sample[4], k = 0;
						int64_t c = 2;

						for (size_t i = 0; i < n; i++) {
							clk[i] = (code >> (2 * i)) & 3;
							mem[i] = ((sub >> i) & 1) && i != self;
							if (mem[i])
								sample[k++] = i;
						}
						cr_assert_eq(barrier_may_proceed(&p, clk, alive, n, self, c, sample, k),
							     ref_proceed(kind, s, clk, alive, n, self, c, mem));
					}
}

/* The sample: the right size, distinct, live, never self, and in range. */
Test(barrier, sample_properties)
{
	uint64_t rng = 7;
	size_t out[16];
	bool alive[16];

	for (int trial = 0; trial < 20000; trial++) {
		size_t n = 1 + barrier_rng_below(&rng, 16), self = barrier_rng_below(&rng, n);
		size_t beta = barrier_rng_below(&rng, 18), live_others = 0, k;
		bool seen[16] = { false };

		for (size_t i = 0; i < n; i++) {
			alive[i] = barrier_rng_below(&rng, 4) != 0;
			live_others += alive[i] && i != self;
		}
		k = barrier_sample(&rng, n, self, alive, beta, out);
		cr_assert_eq(k, beta < live_others ? beta : live_others);
		for (size_t i = 0; i < k; i++) {
			cr_assert_lt(out[i], n);
			cr_assert_neq(out[i], self);
			cr_assert(alive[out[i]]);
			cr_assert_not(seen[out[i]], "duplicate %zu", out[i]);
			seen[out[i]] = true;
		}
	}
}

/* Uniformity: n = 5, self = 0, beta = 2 -> 6 equally likely pairs of {1,2,3,4}. Chi-square
 * over 60000 draws with 5 degrees of freedom; 20.5 is the 0.999 quantile. */
Test(barrier, sample_uniform_pairs)
{
	uint64_t rng = 12345;
	long count[5][5] = { { 0 } };
	const int draws = 60000;
	double chi = 0, expect = draws / 6.0;
	size_t out[5];

	for (int t = 0; t < draws; t++) {
		size_t k = barrier_sample(&rng, 5, 0, NULL, 2, out);
		size_t a = out[0] < out[1] ? out[0] : out[1], b = out[0] ^ out[1] ^ a;

		cr_assert_eq(k, 2);
		count[a][b]++;
	}
	for (int a = 1; a < 5; a++)
		for (int b = a + 1; b < 5; b++)
			chi += (count[a][b] - expect) * (count[a][b] - expect) / expect;
	cr_assert_lt(chi, 20.5, "chi2 = %f", chi);
}

/* Same seed, same samples: a run replays. Different seeds differ. */
Test(barrier, sample_deterministic)
{
	uint64_t r1 = 99, r2 = 99, r3 = 100;
	size_t a[10], b[10], c[10];
	int differ = 0;

	for (int t = 0; t < 100; t++) {
		barrier_sample(&r1, 10, 3, NULL, 4, a);
		barrier_sample(&r2, 10, 3, NULL, 4, b);
		barrier_sample(&r3, 10, 3, NULL, 4, c);
		cr_assert_arr_eq(a, b, 4 * sizeof a[0]);
		differ += memcmp(a, c, 4 * sizeof a[0]) != 0;
	}
	cr_assert_gt(differ, 50);
}

/* beta = 0 is ASP and beta >= N-1 is BSP/SSP, on random clock vectors via barrier_check. */
Test(barrier, beta_extremes_equal_asp_and_bsp)
{
	uint64_t rng = 2024, srng = 1;
	size_t scratch[12];
	int waits = 0;

	for (int t = 0; t < 50000; t++) {
		size_t n = 2 + barrier_rng_below(&rng, 10), self = barrier_rng_below(&rng, n);
		int64_t clk[12], c = (int64_t)barrier_rng_below(&rng, 8), s = (int64_t)barrier_rng_below(&rng, 3);
		bool alive[12];
		struct barrier_params pb = { .kind = BARRIER_PBSP, .sample = 0 };
		struct barrier_params ps = { .kind = BARRIER_PSSP, .sample = 0, .staleness = s };
		struct barrier_params bsp = { .kind = BARRIER_BSP }, ssp = { .kind = BARRIER_SSP, .staleness = s };
		struct barrier_params asp = { .kind = BARRIER_ASP };

		for (size_t i = 0; i < n; i++) {
			clk[i] = (int64_t)barrier_rng_below(&rng, 9);
			alive[i] = barrier_rng_below(&rng, 5) != 0;
		}
		clk[self] = c;
		/* beta = 0 */
		cr_assert_eq(barrier_check(&pb, clk, alive, n, self, c, &srng, scratch),
			     barrier_check(&asp, clk, alive, n, self, c, &srng, scratch));
		cr_assert(barrier_check(&ps, clk, alive, n, self, c, &srng, scratch));
		/* beta = N - 1 (and larger: clamped) */
		pb.sample = (uint32_t)(n - 1 + barrier_rng_below(&rng, 3));
		ps.sample = (uint32_t)(n - 1);
		bool want_b = barrier_check(&bsp, clk, alive, n, self, c, &srng, scratch);
		bool want_s = barrier_check(&ssp, clk, alive, n, self, c, &srng, scratch);
		cr_assert_eq(barrier_check(&pb, clk, alive, n, self, c, &srng, scratch), want_b);
		cr_assert_eq(barrier_check(&ps, clk, alive, n, self, c, &srng, scratch), want_s);
		cr_assert_eq(want_b, ref_proceed(BARRIER_BSP, 0, clk, alive, n, self, c, NULL));
		waits += !want_b;
	}
	cr_assert_gt(waits, 1000);
}

/* Randomized comparison of barrier_check for pBSP/pSSP with a replayed RNG: the reference
 * redraws the same sample and checks membership. Also checks the pass rate of pBSP sits
 * between BSP's and ASP's. */
Test(barrier, randomized_sampled_vs_reference)
{
	uint64_t rng = 77;
	size_t scratch[16], sample[16];
	long pass_p = 0, pass_b = 0, total = 0;

	for (int t = 0; t < 50000; t++) {
		size_t n = 2 + barrier_rng_below(&rng, 14), self = barrier_rng_below(&rng, n);
		int64_t clk[16], c = 3, s = (int64_t)barrier_rng_below(&rng, 3);
		bool alive[16], mem[16] = { false };
		enum barrier_kind kind = barrier_rng_below(&rng, 2) ? BARRIER_PSSP : BARRIER_PBSP;
		struct barrier_params p = { .kind = kind, .staleness = s,
					    .sample = (uint32_t)barrier_rng_below(&rng, n + 1) };
		struct barrier_params bsp = { .kind = kind == BARRIER_PSSP ? BARRIER_SSP : BARRIER_BSP,
					      .staleness = s };
		uint64_t seed = barrier_rng_next(&rng), replay = seed;
		bool got;
		size_t k;

		for (size_t i = 0; i < n; i++) {
			clk[i] = (int64_t)barrier_rng_below(&rng, 6);
			alive[i] = barrier_rng_below(&rng, 6) != 0;
		}
		got = barrier_check(&p, clk, alive, n, self, c, &seed, scratch);
		k = barrier_sample(&replay, n, self, alive, p.sample, sample);
		cr_assert_eq(seed, replay, "check must consume exactly one sample's draws");
		for (size_t i = 0; i < k; i++)
			mem[sample[i]] = true;
		cr_assert_eq(got, ref_proceed(kind, s, clk, alive, n, self, c, mem));
		pass_p += got;
		pass_b += barrier_may_proceed(&bsp, clk, alive, n, self, c, NULL, 0);
		total++;
	}
	cr_assert_gt(pass_p, pass_b, "sampling must pass more often than the full barrier");
	cr_assert_lt(pass_p, total);
}

Test(barrier, threshold_saturates)
{
	struct barrier_params p = { .kind = BARRIER_SSP, .staleness = INT64_MAX };

	cr_assert_eq(barrier_threshold(&p, -5), INT64_MIN);
	p.staleness = 3;
	cr_assert_eq(barrier_threshold(&p, 10), 7);
	p.kind = BARRIER_ASP;
	cr_assert_eq(barrier_threshold(&p, 10), INT64_MIN);
}

/* Backup workers: a reference simulation of rounds over random arrival orders. */
Test(barrier, rounds_with_backup_workers)
{
	uint64_t rng = 5;

	for (int t = 0; t < 2000; t++) {
		uint32_t n = 1 + (uint32_t)barrier_rng_below(&rng, 8);
		uint32_t b = (uint32_t)barrier_rng_below(&rng, n + 1);
		uint32_t need = n - b > 0 ? n - b : 1;
		struct barrier_round r;
		uint64_t late = 0;

		barrier_round_init(&r, 0, n, b);
		cr_assert_eq(r.need, need);
		for (int64_t v = 0; v < 5; v++) {
			/* all n workers push for version v; the first `need` count, the rest are late */
			for (uint32_t i = 0; i < n; i++) {
				enum barrier_offer o = barrier_round_offer(&r, v);

				if (i + 1 < need)
					cr_assert_eq(o, BARRIER_ACCEPT);
				else if (i + 1 == need)
					cr_assert_eq(o, BARRIER_CLOSE);
				else {
					cr_assert_eq(o, BARRIER_LATE);
					late++;
				}
			}
			barrier_round_advance(&r);
			/* one straggler from the previous version is late, a future one invalid */
			cr_assert_eq(barrier_round_offer(&r, v), BARRIER_LATE);
			cr_assert_eq(barrier_round_offer(&r, v + 2), BARRIER_INVALID);
			late++;
		}
		cr_assert_eq(r.late, late);
		cr_assert_eq(r.invalid, 5);
		cr_assert_eq(r.version, 5);
	}
}

/* A death while a round is open closes it when the survivors have all contributed. */
Test(barrier, round_closes_on_death)
{
	struct barrier_round r;

	barrier_round_init(&r, 10, 4, 0);
	cr_assert_eq(barrier_round_offer(&r, 10), BARRIER_ACCEPT);
	cr_assert_eq(barrier_round_offer(&r, 10), BARRIER_ACCEPT);
	cr_assert_eq(barrier_round_offer(&r, 10), BARRIER_ACCEPT);
	cr_assert_not(barrier_round_set_live(&r, 4));
	cr_assert(barrier_round_set_live(&r, 3));
	barrier_round_advance(&r);
	cr_assert_eq(r.need, 3);
	/* no updates yet: a death does not close an empty round */
	cr_assert_not(barrier_round_set_live(&r, 2));
	cr_assert_eq(barrier_round_offer(&r, 11), BARRIER_ACCEPT);
	cr_assert_eq(barrier_round_offer(&r, 11), BARRIER_CLOSE);
}

/* barrier_rng_below against the rule read literally (reject at or above the largest multiple
 * of bound, then the residue): the same value and the same state after, for small bounds and
 * for bounds near 2^64, where a third of the raw values or more are rejected. */
static uint64_t ref_rejected;

static uint64_t ref_below(uint64_t *state, uint64_t bound)
{
	uint64_t limit = UINT64_MAX - UINT64_MAX % bound, x;

	while ((x = barrier_rng_next(state)) >= limit)
		ref_rejected++;
	return x % bound;
}

Test(barrier, rng_below_equals_the_literal_rule)
{
	static const uint64_t bounds[] = { 1, 2, 3, 7, 10, 99999, 1ull << 32, (1ull << 63) + 1,
					   UINT64_MAX / 3 * 2, UINT64_MAX - 1, UINT64_MAX };
	uint64_t a = 12345, b = 12345;

	for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++)
		for (int r = 0; r < 20000; r++) {
			uint64_t x = barrier_rng_below(&a, bounds[k]);

			cr_assert_eq(x, ref_below(&b, bounds[k]), "bound %llu draw %d",
				     (unsigned long long)bounds[k], r);
			cr_assert_eq(a, b);
			cr_assert_lt(x, bounds[k]);
		}
	cr_assert_gt(ref_rejected, 1000, "the rejection path was not taken (%llu)",
		     (unsigned long long)ref_rejected);
}
