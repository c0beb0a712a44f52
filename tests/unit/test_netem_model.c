/* Unit tests for netem/: parameter scaling and validation, the text form, the release-time heap
 * against a naive sorted list, the loss models against analytic rates, jitter distributions
 * (mean/sd of sampled delays), and the link self-check verdict. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/link_params.h"
#include "lib/link_verdict.h"
#include "netem/netem_heap.h"
#include "netem/netem_model.h"

Test(netem_scale, ppm_matches_tc_percent)
{
	cr_assert_eq(netem_model_scale_ppm(0), 0u);
	cr_assert_eq(netem_model_scale_ppm(1000000), UINT32_MAX);
	/* tc: 1% -> 0.01 * UINT32_MAX rounded = 42949673 */
	cr_assert_eq(netem_model_scale_ppm(10000), 42949673u);
	cr_assert_eq(netem_model_scale_ppm(500000), 2147483648u);
	for (uint32_t ppm = 0; ppm <= 1000000; ppm += 977) {
		double want = (double)ppm / 1e6 * 4294967295.0;
		cr_assert(fabs((double)netem_model_scale_ppm(ppm) - want) <= 0.5 + 1e-6, "ppm %u", ppm);
	}
}

Test(link_params, validate_cross_field_rules)
{
	struct link_params p = { .delay_us = 10000 };
	cr_assert_null(link_params_validate(&p));
	p = (struct link_params){ .reorder_ppm = 1000 };
	cr_assert_not_null(link_params_validate(&p));
	p.delay_us = 1000;
	cr_assert_null(link_params_validate(&p));
	p = (struct link_params){ .delay_us = 1000, .gap = 5 };
	cr_assert_not_null(link_params_validate(&p));
	p = (struct link_params){ .loss_corr_ppm = 250000 };
	cr_assert_not_null(link_params_validate(&p));
	p = (struct link_params){ .dup_corr_ppm = 1 };
	cr_assert_not_null(link_params_validate(&p));
	p = (struct link_params){ .corrupt_corr_ppm = 1 };
	cr_assert_not_null(link_params_validate(&p));
	p = (struct link_params){ .delay_us = 5, .delay_corr_ppm = 1 };
	cr_assert_not_null(link_params_validate(&p));
	p = (struct link_params){ .loss_ppm = 1000001 };
	cr_assert_not_null(link_params_validate(&p));
	p = (struct link_params){ .loss_model = LINK_LOSS_GEMODEL, .ge_r_ppm = 5 };
	cr_assert_not_null(link_params_validate(&p));
	p.ge_p_ppm = 10;
	cr_assert_null(link_params_validate(&p));
	p = (struct link_params){ .ge_p_ppm = 10 };
	cr_assert_not_null(link_params_validate(&p));
	p = (struct link_params){ .delay_us = 61u * 1000 * 1000 };
	cr_assert_not_null(link_params_validate(&p));
	p = (struct link_params){ .dist = LINK_DIST_NORMAL };
	cr_assert_not_null(link_params_validate(&p));
}

Test(link_params, format_parse_roundtrip)
{
	struct link_params p = { .delay_us = 20000, .jitter_us = 5000, .dist = LINK_DIST_PARETO,
				 .loss_ppm = 12345, .loss_corr_ppm = 250000, .dup_ppm = 7,
				 .reorder_ppm = 3, .gap = 4, .corrupt_ppm = 9,
				 .rate_bps = 10000000000ull, .limit_pkts = 2000, .set = 0x1f };
	char buf[512];
	int n = link_params_format(&p, buf, sizeof buf);
	cr_assert(n > 0 && (size_t)n < sizeof buf);
	cr_assert_null(strstr(buf, "ge_p_ppm"), "zero fields are omitted: %s", buf);
	struct link_params q = { 0 }, r;
	cr_assert_eq(link_params_parse_line(&r, buf), 0, "%s", buf);
	cr_assert(memcmp(&p, &r, sizeof p) == 0);
	char *save = NULL;
	uint32_t seen = 0;
	for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
		cr_assert_eq(link_params_parse_token(&q, t, &seen), 0, "token %s", t);
	cr_assert(memcmp(&p, &q, sizeof p) == 0);
	seen = 0;
	cr_assert_eq(link_params_parse_token(&q, "nosuch=1", &seen), -ENOENT);
	cr_assert_eq(link_params_parse_token(&q, "delay_us=abc", &seen), -EINVAL);
	cr_assert_eq(link_params_parse_token(&q, "delay_us=-1", &seen), -EINVAL);
	cr_assert_eq(link_params_parse_token(&q, "delay_us=4294967296", &seen), -EINVAL);
	/* snprintf contract: a short buffer reports the needed length */
	char tiny[4];
	cr_assert_eq(link_params_format(&p, tiny, sizeof tiny), n);
}

/* Only the form link_params_format writes is taken: these lines cross hosts and sit in files. */
Test(link_params, parse_token_refuses_all_but_the_canonical_form)
{
	static const char *const ok[] = {
		"delay_us=0", "delay_us=5", "delay_us=60000000", "jitter_us=60000000", "loss_ppm=1000000",
		"rate_bps=17179869176", "dist=4", "loss_model=1", "gap=4294967295", "set=65535",
		"limit_pkts=1000000",
	};
	static const char *const malformed[] = {
		"delay_us=+5", "delay_us= 5", "delay_us=\t5", "delay_us=5 ", "delay_us=5\t", "delay_us=5\n",
		"delay_us=05", "delay_us=00", "delay_us=", "delay_us=-0", "delay_us=5x", "delay_us=0x10",
		"delay_us=1e3", "delay_us=5=5", "delay_us=60000001", "jitter_us=60000001", "loss_ppm=1000001",
		"dist=5", "loss_model=2", "rate_bps=17179869177", "gap=4294967296", "set=65536",
		"limit_pkts=1000001", "delay_us=18446744073709551616", "rate_bps=18446744073709551615",
		"delay_us=999999999999999999999999", "delay_us",
	};
	static const char *const unknown[] = {
		"delay_us =5", " delay_us=5", "\tdelay_us=5", "delay_us\t=5", "Delay_us=5", "=5", "delay=5",
	};
	struct link_params p;
	uint32_t seen;

	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		p = (struct link_params){ 0 };
		seen = 0;
		cr_expect_eq(link_params_parse_token(&p, ok[i], &seen), 0, "refused %s", ok[i]);
		cr_expect_eq(__builtin_popcount(seen), 1, "%s", ok[i]);
	}
	for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
		p = (struct link_params){ 0 };
		seen = 0;
		cr_expect_eq(link_params_parse_token(&p, malformed[i], &seen), -EINVAL, "took '%s'", malformed[i]);
		cr_expect_eq(seen, 0u, "%s", malformed[i]);
		cr_expect_eq(p.delay_us, 0u, "%s changed the field", malformed[i]);
	}
	for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
		seen = 0;
		cr_expect_eq(link_params_parse_token(&p, unknown[i], &seen), -ENOENT, "took '%s'", unknown[i]);
	}
	/* A key once per line: the second is refused and the first value stays. */
	p = (struct link_params){ 0 };
	seen = 0;
	cr_assert_eq(link_params_parse_token(&p, "delay_us=5", &seen), 0);
	cr_assert_eq(link_params_parse_token(&p, "loss_ppm=7", &seen), 0);
	cr_assert_eq(link_params_parse_token(&p, "delay_us=6", &seen), -EEXIST);
	cr_assert_eq(link_params_parse_token(&p, "delay_us=5", &seen), -EEXIST);
	cr_assert_eq(p.delay_us, 5u);
	cr_assert_eq(p.loss_ppm, 7u);
	seen = 0;       /* the next line */
	cr_assert_eq(link_params_parse_token(&p, "delay_us=6", &seen), 0);
	cr_assert_eq(p.delay_us, 6u);
}

/* Against a naive reference: every value of up to four characters over digits, signs, blanks
 * and a letter is taken exactly when printing the number back gives the same text. */
Test(link_params, parse_token_matches_reference_model)
{
	static const char alphabet[] = "0159+- \tx";
	const size_t k = sizeof alphabet - 1;
	char value[8], token[32], back[32];
	size_t checked = 0, taken = 0;

	for (size_t len = 0; len <= 4; len++) {
		size_t combos = 1;
		for (size_t i = 0; i < len; i++)
			combos *= k;
		for (size_t c = 0; c < combos; c++) {
			size_t x = c;
			for (size_t i = 0; i < len; i++, x /= k)
				value[i] = alphabet[x % k];
			value[len] = '\0';
			for (int key = 0; key < 2; key++) {       /* gap: up to 2^32-1; dist: up to 4 */
				bool digits = len > 0;
				unsigned long long v = 0;
				for (size_t i = 0; i < len; i++) {
					digits = digits && value[i] >= '0' && value[i] <= '9';
					v = v * 10 + (unsigned)(value[i] - '0');
				}
				bool want = digits && (snprintf(back, sizeof back, "%llu", v), !strcmp(back, value)) &&
					    v <= (key ? 4u : UINT32_MAX);
				struct link_params p = { 0 };
				uint32_t seen = 0;
				snprintf(token, sizeof token, "%s=%s", key ? "dist" : "gap", value);
				int rc = link_params_parse_token(&p, token, &seen);
				cr_assert_eq(rc == 0, want, "'%s': %d", token, rc);
				if (want) {
					cr_assert_eq(key ? (unsigned long long)p.dist : p.gap, v, "%s", token);
					taken++;
				}
				checked++;
			}
		}
	}
	cr_assert_gt(taken, 100u);
	cr_assert_eq(checked, 2u * (1 + 9 + 81 + 729 + 6561)); /* every string of up to 4 of the 9 characters */
}

Test(link_params, parse_line_takes_only_single_spaces_and_each_key_once)
{
	struct link_params p;

	cr_assert_eq(link_params_parse_line(&p, ""), 0);
	cr_assert_eq(p.delay_us, 0u);
	cr_assert_eq(link_params_parse_line(&p, "delay_us=5 loss_ppm=7"), 0);
	cr_assert_eq(p.delay_us, 5u);
	cr_assert_eq(p.loss_ppm, 7u);
	cr_assert_eq(link_params_parse_line(&p, "delay_us=5 delay_us=5"), -EEXIST);
	cr_assert_eq(link_params_parse_line(&p, "delay_us=5 loss_ppm=7 delay_us=6"), -EEXIST);
	static const char *const bad[] = {
		"delay_us=5  loss_ppm=7", " delay_us=5", "delay_us=5 ", "delay_us=5\tloss_ppm=7", " ",
		"delay_us=+5", "delay_us=05 loss_ppm=7",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_expect_lt(link_params_parse_line(&p, bad[i]), 0, "took '%s'", bad[i]);
}

static int cmp_entry(const void *a, const void *b)
{
	const struct netem_heap_entry *x = a, *y = b;
	if (x->t_ns != y->t_ns)
		return x->t_ns < y->t_ns ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

Test(netem_heap, matches_sorted_reference)
{
	struct netem_heap h;
	netem_heap_init(&h);
	enum { N = 20000 };
	struct netem_heap_entry *ref = calloc(N, sizeof *ref);
	size_t nref = 0;
	uint64_t seq = 0;
	srand(7);
	for (int round = 0; round < N; round++) {
		int op = rand() % 3;
		if (op < 2 && nref < N) {
			/* few distinct times: exercises the seq tie-break */
			struct netem_heap_entry e = { .t_ns = rand() % 50, .seq = seq++, .id = (uint32_t)round };
			cr_assert_eq(netem_heap_push(&h, &e), 0);
			ref[nref++] = e;
		} else {
			struct netem_heap_entry got;
			if (nref == 0) {
				cr_assert_eq(netem_heap_pop(&h, &got), -ENOENT);
				continue;
			}
			qsort(ref, nref, sizeof *ref, cmp_entry);
			cr_assert_eq(netem_heap_top(&h)->seq, ref[0].seq);
			cr_assert_eq(netem_heap_pop(&h, &got), 0);
			cr_assert_eq(got.seq, ref[0].seq);
			cr_assert_eq(got.t_ns, ref[0].t_ns);
			memmove(ref, ref + 1, (--nref) * sizeof *ref);
		}
		cr_assert_eq(netem_heap_size(&h), nref);
	}
	free(ref);
	netem_heap_free(&h);
}

/* Pushes mostly in order (a constant delay with rare earlier ones, as jitter makes): the sorted
 * ring takes most, the heap the rest; pops interleave so the ring wraps and grows. */
Test(netem_heap, mostly_in_order_matches_sorted_reference)
{
	struct netem_heap h;
	netem_heap_init(&h);
	enum { N = 30000 };
	struct netem_heap_entry *ref = calloc(N, sizeof *ref);
	size_t nref = 0, pushes = 0;
	uint64_t seq = 0;
	int64_t t = 0;
	srand(9);
	for (int round = 0; round < 3 * N; round++) {
		/* bursts of pushes then of pops: the ring fills past its first size and wraps */
		bool pushing = (round / 3000) % 2 == 0 ? rand() % 10 < 8 : rand() % 10 < 3;
		if (pushing && nref < N) {
			t += rand() % 3;
			struct netem_heap_entry e = { .t_ns = rand() % 20 ? t : t - rand() % 100, .seq = seq++ };
			cr_assert_eq(netem_heap_push(&h, &e), 0);
			ref[nref++] = e;
			pushes++;
		} else if (nref) {
			struct netem_heap_entry got;
			size_t best = 0;
			for (size_t i = 1; i < nref; i++)
				if (cmp_entry(&ref[i], &ref[best]) < 0)
					best = i;
			cr_assert_eq(netem_heap_top(&h)->seq, ref[best].seq);
			cr_assert_eq(netem_heap_pop(&h, &got), 0);
			cr_assert_eq(got.seq, ref[best].seq);
			cr_assert_eq(got.t_ns, ref[best].t_ns);
			ref[best] = ref[--nref];
		}
		cr_assert_eq(netem_heap_size(&h), nref);
	}
	cr_assert_gt(pushes, 20000);
	free(ref);
	netem_heap_free(&h);
}

static void model(struct netem_model *m, struct link_params p)
{
	cr_assert_eq(netem_model_configure(m, &p, 12345, true), 0);
}

/* |x - p| within 5 binomial sigmas */
static void assert_rate(uint64_t k, uint64_t n, double p, const char *what)
{
	double sd = sqrt(p * (1 - p) / (double)n);
	double x = (double)k / (double)n;
	cr_assert(fabs(x - p) <= 5 * sd + 1e-9, "%s: %.5f vs %.5f", what, x, p);
}

Test(netem_model, random_loss_with_and_without_correlation)
{
	struct netem_model m;
	struct netem_decision d;
	const uint64_t n = 400000;
	uint32_t rates[] = { 10000, 50000, 200000 };
	for (int i = 0; i < 3; i++) {
		model(&m, (struct link_params){ .loss_ppm = rates[i] });
		uint64_t lost = 0;
		for (uint64_t k = 0; k < n; k++) {
			netem_model_decide(&m, &d);
			lost += d.drop;
		}
		assert_rate(lost, n, rates[i] / 1e6, "loss");
	}
	/* Correlation makes losses burstier: P(loss | previous loss) rises above the base rate. */
	model(&m, (struct link_params){ .loss_ppm = 200000, .loss_corr_ppm = 900000 });
	uint64_t lost = 0, pairs = 0, prev_lost = 0;
	bool prev = false;
	for (uint64_t k = 0; k < n; k++) {
		netem_model_decide(&m, &d);
		lost += d.drop;
		if (prev) {
			prev_lost++;
			pairs += d.drop;
		}
		prev = d.drop;
	}
	cr_assert(prev_lost > 0);
	cr_assert((double)pairs / (double)prev_lost > 1.5 * ((double)lost / (double)n),
		  "conditional %.3f vs %.3f", (double)pairs / (double)prev_lost, (double)lost / (double)n);
}

Test(netem_model, gilbert_elliott_stationary_rate)
{
	struct { uint32_t p, r, h1, k1; } c[] = {
		{ 10000, 300000, 1000000, 0 }, { 50000, 100000, 700000, 10000 }, { 200000, 500000, 500000, 50000 },
	};
	for (int i = 0; i < 3; i++) {
		struct netem_model m;
		model(&m, (struct link_params){ .loss_model = LINK_LOSS_GEMODEL, .ge_p_ppm = c[i].p,
						.ge_r_ppm = c[i].r, .ge_1h_ppm = c[i].h1, .ge_1k_ppm = c[i].k1 });
		double want = netem_model_ge_loss_rate(c[i].p, c[i].r, c[i].h1, c[i].k1);
		/* Hand-computed for the first case: pi_bad = 0.01 / 0.31. */
		if (i == 0)
			cr_assert_float_eq(want, 0.01 / 0.31, 1e-12);
		const uint64_t n = 2000000;
		uint64_t lost = 0;
		struct netem_decision d;
		for (uint64_t k = 0; k < n; k++) {
			netem_model_decide(&m, &d);
			lost += d.drop;
		}
		/* Bursty chain: variance is inflated by the burst length; allow 3% relative. */
		double got = (double)lost / (double)n;
		cr_assert(fabs(got - want) <= 0.03 * want, "case %d: %.5f vs %.5f", i, got, want);
	}
}

static void delay_stats(struct netem_model *m, int n, double *mean_ms, double *sd_ms)
{
	double s = 0, s2 = 0;
	for (int i = 0; i < n; i++) {
		double x = netem_model_delay_ns(m) / 1e6;
		s += x;
		s2 += x * x;
	}
	*mean_ms = s / n;
	*sd_ms = sqrt(s2 / n - *mean_ms * *mean_ms);
}

Test(netem_model, jitter_distributions_mean_and_sd)
{
	struct netem_model m;
	double mean, sd;
	model(&m, (struct link_params){ .delay_us = 50000, .jitter_us = 10000 });
	delay_stats(&m, 200000, &mean, &sd);
	cr_assert_float_eq(mean, 50.0, 0.1);
	cr_assert_float_eq(sd, 10.0 / sqrt(3.0), 0.1);
	enum link_dist dists[] = { LINK_DIST_NORMAL, LINK_DIST_PARETO, LINK_DIST_PARETONORMAL };
	for (int i = 0; i < 3; i++) {
		model(&m, (struct link_params){ .delay_us = 50000, .jitter_us = 10000, .dist = dists[i] });
		delay_stats(&m, 200000, &mean, &sd);
		cr_assert(fabs(mean - 50.0) < 0.5, "%s mean %.3f", link_params_dist_name(dists[i]), mean);
		double want = 10.0 * netem_model_dist_sd(dists[i]);
		cr_assert(want > 7.5 && want < 10.5, "table sd %.3f", want);
		cr_assert(fabs(sd - want) < 0.03 * want, "%s sd %.3f vs %.3f", link_params_dist_name(dists[i]), sd, want);
	}
	/* Clamped at zero: jitter larger than the delay never gives a negative delay. */
	model(&m, (struct link_params){ .delay_us = 1000, .jitter_us = 5000 });
	for (int i = 0; i < 10000; i++)
		cr_assert_geq(netem_model_delay_ns(&m), 0);
	/* As in netem, the correlated value is taken modulo 2*jitter, which leaves the marginal
	 * uniform: mean and spread do not change. */
	model(&m, (struct link_params){ .delay_us = 50000, .jitter_us = 10000, .delay_corr_ppm = 500000 });
	delay_stats(&m, 400000, &mean, &sd);
	cr_assert_float_eq(mean, 50.0, 0.1);
	cr_assert_float_eq(sd, 10.0 / sqrt(3.0), 0.1);
}

Test(netem_model, generated_tables_match_the_moments)
{
	static int16_t t[NETEM_MODEL_DIST_SIZE];
	enum link_dist dists[] = { LINK_DIST_NORMAL, LINK_DIST_PARETO, LINK_DIST_PARETONORMAL };
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(netem_model_dist_generate(dists[k], t), 0);
		double s = 0, s2 = 0;
		for (int i = 0; i < NETEM_MODEL_DIST_SIZE; i++) {
			s += t[i];
			s2 += (double)t[i] * t[i];
			if (i)
				cr_assert_leq(t[i - 1], t[i], "table sorted");
		}
		double mean = s / NETEM_MODEL_DIST_SIZE / NETEM_MODEL_DIST_SCALE;
		double sd = sqrt(s2 / NETEM_MODEL_DIST_SIZE) / NETEM_MODEL_DIST_SCALE;
		cr_assert(fabs(mean) < 0.1, "mean %f", mean); /* clipping the long tail pulls it a little below 0 */
		/* clipping at +-4 sd trims a little of the pareto tail */
		cr_assert(sd > 0.85 && sd < 1.05, "sd %f", sd);
	}
	/* The normal table agrees with iproute2's where that file exists. */
	const int16_t *file;
	size_t n;
	if (netem_model_dist_table(LINK_DIST_NORMAL, "/usr/lib/x86_64-linux-gnu/tc", &file, &n) == 0) {
		cr_assert_eq(netem_model_dist_generate(LINK_DIST_NORMAL, t), 0);
		cr_assert_eq(n, (size_t)NETEM_MODEL_DIST_SIZE);
		for (int i = 100; i < NETEM_MODEL_DIST_SIZE - 100; i += 50)
			cr_assert(abs(file[i] - t[i]) < 120, "entry %d: %d vs %d", i, file[i], t[i]);
	}
}

Test(netem_model, duplicate_corrupt_reorder_rates)
{
	struct netem_model m;
	struct netem_decision d;
	const uint64_t n = 300000;
	model(&m, (struct link_params){ .delay_us = 10000, .dup_ppm = 50000, .corrupt_ppm = 20000,
					.reorder_ppm = 250000 });
	uint64_t dup = 0, cor = 0, reo = 0;
	for (uint64_t k = 0; k < n; k++) {
		netem_model_decide(&m, &d);
		cr_assert(!d.drop);
		dup += d.dup;
		cor += d.corrupt;
		reo += d.reordered;
		cr_assert_eq(d.delay_ns, d.reordered ? 0 : 10000000);
	}
	assert_rate(dup, n, 0.05, "dup");
	assert_rate(cor, n, 0.02, "corrupt");
	assert_rate(reo, n, 0.25, "reorder");
	/* gap 5: packets 1-4 of each run are delayed, the 5th is a candidate with probability p. */
	model(&m, (struct link_params){ .delay_us = 10000, .reorder_ppm = 1000000, .gap = 5 });
	for (int k = 0; k < 50; k++) {
		netem_model_decide(&m, &d);
		cr_assert_eq(d.reordered, k % 5 == 4, "packet %d", k);
	}
	/* loss and dup together: a duplicated packet that loses one copy still arrives once */
	model(&m, (struct link_params){ .dup_ppm = 1000000, .loss_ppm = 1000000 });
	netem_model_decide(&m, &d);
	cr_assert(!d.drop && !d.dup);
}

Test(netem_model, reconfigure_in_place_keeps_state)
{
	struct netem_model m;
	model(&m, (struct link_params){ .delay_us = 1000 });
	struct netem_rng before = m.rng;
	struct link_params q = { .delay_us = 5000 };
	cr_assert_eq(netem_model_configure(&m, &q, 999, false), 0);
	cr_assert(memcmp(&before, &m.rng, sizeof before) == 0);
	cr_assert_eq(netem_model_delay_ns(&m), 5000000);
	q.gap = 3;
	cr_assert_eq(netem_model_configure(&m, &q, 0, false), -EINVAL);
}

Test(link_verdict, tolerances)
{
	struct link_params up = { .delay_us = 10000, .jitter_us = 5000, .loss_ppm = 10000 };
	struct link_params down = { .delay_us = 10000, .jitter_us = 5000, .loss_ppm = 10000 };
	struct link_verdict_expect e;
	link_verdict_expect_from(&up, &down, &e);
	cr_assert_float_eq(e.rtt_mean_ms, 20.0, 1e-9);
	cr_assert_float_eq(e.rtt_sd_ms, sqrt(2 * 25.0 / 3), 1e-9);
	cr_assert_float_eq(e.loss, 1 - 0.99 * 0.99, 1e-12);
	double sd = e.rtt_sd_ms, l = e.loss;
	cr_assert(link_verdict_verdict(&e, 5000, 20.3, sd, l, NULL, 0));
	cr_assert(link_verdict_verdict(&e, 5000, 20.49, sd, l, NULL, 0));
	cr_assert_not(link_verdict_verdict(&e, 5000, 20.51, sd, l, NULL, 0));
	cr_assert(link_verdict_verdict(&e, 5000, 20, sd * 1.14, l, NULL, 0));
	char why[128];
	cr_assert_not(link_verdict_verdict(&e, 5000, 20, sd * 1.16, l, why, sizeof why));
	cr_assert_not_null(strstr(why, "sd"));
	/* 2% rule above 25 ms */
	struct link_params big = { .delay_us = 100000 };
	link_verdict_expect_from(&big, &big, &e);
	cr_assert(link_verdict_verdict(&e, 200, 203.9, 0, 0, NULL, 0));
	cr_assert_not(link_verdict_verdict(&e, 200, 204.1, 0, 0, NULL, 0));
	/* few probes against much jitter: the band widens to 3.29 standard errors of the mean
	 * (sd 4.08 ms over 300 probes: 0.775 ms) and of the sd (50 probes: 33%) */
	link_verdict_expect_from(&up, &down, &e);
	double se = 3.29 * e.rtt_sd_ms / sqrt(300.0);
	cr_assert(link_verdict_verdict(&e, 300, 20 + se - 0.01, e.rtt_sd_ms, l, NULL, 0));
	cr_assert_not(link_verdict_verdict(&e, 300, 20 + se + 0.01, e.rtt_sd_ms, l, NULL, 0));
	cr_assert(link_verdict_verdict(&e, 50, 20, e.rtt_sd_ms * 1.30, 0.02, NULL, 0));
	cr_assert_not(link_verdict_verdict(&e, 50, 20, e.rtt_sd_ms * 1.36, 0.02, NULL, 0));
	/* sd is ignored below 2 ms jitter */
	struct link_params small = { .delay_us = 1000, .jitter_us = 1000 };
	link_verdict_expect_from(&small, NULL, &e);
	cr_assert(link_verdict_verdict(&e, 200, 1.0, 5.0, 0, NULL, 0));
}

/* The self-check's expectation against the emulator's own per-packet decisions: reorder
 * (with and without gap) sends packets undelayed, corrupt loses them to the checksum. */
Test(link_verdict, expectation_matches_the_packet_model)
{
	static const struct link_params cases[] = {
		{ .delay_us = 10000, .jitter_us = 2000, .reorder_ppm = 50000 },
		{ .delay_us = 10000, .jitter_us = 2000, .reorder_ppm = 250000, .gap = 5 },
		{ .delay_us = 20000, .corrupt_ppm = 20000, .loss_ppm = 10000 },
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		struct netem_model m;
		struct link_verdict_expect e;
		const int n = 400000;
		double s = 0, s2 = 0;
		int got = 0;

		model(&m, cases[c]);
		for (int i = 0; i < n; i++) {
			struct netem_decision d;
			netem_model_decide(&m, &d);
			if (d.drop || d.corrupt)
				continue;
			double ms = d.reordered ? 0 : d.delay_ns / 1e6;
			s += ms;
			s2 += ms * ms;
			got++;
		}
		link_verdict_expect_from(&cases[c], NULL, &e);
		double mean = s / got, sd = sqrt((s2 - s * s / got) / (got - 1));
		cr_assert_float_eq(mean, e.rtt_mean_ms, 0.01 * e.rtt_mean_ms + 0.02, "case %zu: mean %.3f, expected %.3f",
				   c, mean, e.rtt_mean_ms);
		cr_assert_float_eq(sd, e.rtt_sd_ms, 0.02 * e.rtt_sd_ms + 0.02, "case %zu: sd %.3f, expected %.3f", c,
				   sd, e.rtt_sd_ms);
		cr_assert_float_eq(1.0 - (double)got / n, e.loss, 0.002, "case %zu: loss %.4f, expected %.4f", c,
				   1.0 - (double)got / n, e.loss);
	}
}

/* The exact interval against a naive reference: brute-force the binomial CDF in doubles. */
Test(link_verdict, binomial_interval)
{
	double lo, hi;
	link_verdict_loss_interval(0.01, 5000, &lo, &hi);
	/* normal approximation: 0.01 +- 3.29 * sqrt(0.01*0.99/5000) = [0.00537, 0.01463] */
	cr_assert(lo > 0.0050 && lo < 0.0060, "lo %f", lo);
	cr_assert(hi > 0.0140 && hi < 0.0152, "hi %f", hi);
	link_verdict_loss_interval(0.2, 50, &lo, &hi);
	double c = 0, pk = pow(0.8, 50);
	int klo = -1, khi = -1;
	for (int k = 0; k <= 50; k++) {
		c += pk;
		if (klo < 0 && c > 0.0005)
			klo = k;
		if (khi < 0 && c >= 0.9995)
			khi = k;
		pk = pk * (50 - k) / (k + 1) * 0.25;
	}
	cr_assert_float_eq(lo, klo / 50.0, 1e-12);
	cr_assert_float_eq(hi, khi / 50.0, 1e-12);
	link_verdict_loss_interval(0, 1000, &lo, &hi);
	cr_assert(lo == 0 && hi == 0);
}

/* lib/link_verdict keeps netem's table spreads and the Gilbert-Elliott rate as its own (node/
 * does not include netem/): they must agree with the model the emulator runs. */
Test(netem_model, verdict_constants_agree_with_the_model)
{
	enum link_dist dists[] = { LINK_DIST_NONE, LINK_DIST_UNIFORM, LINK_DIST_NORMAL, LINK_DIST_PARETO,
				   LINK_DIST_PARETONORMAL };
	for (int i = 0; i < 5; i++) {
		struct link_params up = { .delay_us = 50000, .jitter_us = 10000, .dist = dists[i] };
		struct link_verdict_expect e;

		link_verdict_expect_from(&up, NULL, &e);
		cr_assert_float_eq(e.rtt_sd_ms, 10.0 * netem_model_dist_sd(dists[i]), 1e-9, "%s",
				   link_params_dist_name(dists[i]));
	}
	uint32_t c[][4] = { { 10000, 300000, 1000000, 0 }, { 50000, 100000, 700000, 10000 },
			    { 0, 0, 500000, 50000 } };
	for (int i = 0; i < 3; i++) {
		struct link_params p = { .loss_model = LINK_LOSS_GEMODEL, .ge_p_ppm = c[i][0],
					 .ge_r_ppm = c[i][1], .ge_1h_ppm = c[i][2], .ge_1k_ppm = c[i][3] };

		cr_assert_float_eq(link_verdict_ge_loss_rate(&p),
				   netem_model_ge_loss_rate(c[i][0], c[i][1], c[i][2], c[i][3]), 1e-15);
	}
}

/* The loss decision alone (the further segments of an offloaded packet) keeps the configured rate,
 * interleaved with whole decisions as the emulator interleaves them, and for Gilbert-Elliott too. */
Test(netem_model, lose_alone_keeps_the_rate)
{
	struct netem_model m;
	struct netem_decision d;
	const uint64_t n = 400000;
	uint64_t lost = 0;

	model(&m, (struct link_params){ .loss_ppm = 30000, .delay_us = 1000 });
	for (uint64_t k = 0; k < n; k++) {
		if (k % 46 == 0) {
			netem_model_decide(&m, &d);
			lost += d.drop;
		} else {
			lost += netem_model_lose(&m);
		}
	}
	assert_rate(lost, n, 0.03, "loss");
	model(&m, (struct link_params){ .loss_model = LINK_LOSS_GEMODEL, .ge_p_ppm = 10000, .ge_r_ppm = 300000,
					.ge_1h_ppm = 1000000, .ge_1k_ppm = 0 });
	lost = 0;
	for (uint64_t k = 0; k < n; k++)
		lost += netem_model_lose(&m);
	assert_rate(lost, n, netem_model_ge_loss_rate(10000, 300000, 1000000, 0), "GE loss");
}

/* The delay lower bound: exact for constant and uniform delays, the table's smallest draw for the
 * others (no sampled delay falls below it, and sampling comes close to it), 0 with reordering or
 * jitter larger than the delay. */
Test(netem_model, min_delay_bounds_every_draw)
{
	struct netem_model m;
	struct netem_decision d;

	model(&m, (struct link_params){ .delay_us = 20000 });
	cr_assert_eq(netem_model_min_delay_ns(&m), 20000000);
	model(&m, (struct link_params){ .delay_us = 20000, .jitter_us = 5000 });
	cr_assert_eq(netem_model_min_delay_ns(&m), 15000000);
	model(&m, (struct link_params){ .delay_us = 1000, .jitter_us = 5000 });
	cr_assert_eq(netem_model_min_delay_ns(&m), 0);
	model(&m, (struct link_params){ .delay_us = 20000, .reorder_ppm = 10000 });
	cr_assert_eq(netem_model_min_delay_ns(&m), 0);
	model(&m, (struct link_params){});
	cr_assert_eq(netem_model_min_delay_ns(&m), 0);
	struct link_params ps[] = {
		{ .delay_us = 20000, .jitter_us = 5000 },
		{ .delay_us = 20000, .jitter_us = 5000, .delay_corr_ppm = 500000 },
		{ .delay_us = 20000, .jitter_us = 3000, .dist = LINK_DIST_NORMAL },
		{ .delay_us = 20000, .jitter_us = 3000, .dist = LINK_DIST_PARETO },
		{ .delay_us = 20000, .jitter_us = 3000, .dist = LINK_DIST_PARETONORMAL },
		{ .delay_us = 20000, .jitter_us = 3001, .dist = LINK_DIST_NORMAL, .dup_ppm = 300000,
		  .loss_ppm = 100000 },
	};
	for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
		model(&m, ps[k]);
		int64_t lb = netem_model_min_delay_ns(&m), seen = INT64_MAX;

		cr_assert_gt(lb, 20000000 - 5 * (int64_t)ps[k].jitter_us * 1000, "case %zu: %lld", k, (long long)lb);
		cr_assert_lt(lb, 20000000 - (int64_t)ps[k].jitter_us * 1000 / 2, "case %zu: %lld", k, (long long)lb);
		for (int i = 0; i < 200000; i++) {
			netem_model_decide(&m, &d);
			if (d.drop)
				continue;
			cr_assert_geq(d.delay_ns, lb, "case %zu", k);
			if (d.dup)
				cr_assert_geq(d.dup_delay_ns, lb, "case %zu", k);
			if (d.delay_ns < seen)
				seen = d.delay_ns;
		}
		/* the bound is tight: some draw comes within a tenth of the jitter of it */
		cr_assert_lt(seen - lb, (int64_t)ps[k].jitter_us * 100 + 1, "case %zu: seen %lld bound %lld", k,
			     (long long)seen, (long long)lb);
	}
}
