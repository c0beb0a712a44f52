/* sim/sim_link: the parts of a message's time, each against its closed form.
 *   serialisation and FIFO queueing exact; delay exact without jitter
 *   jitter within [delay - jitter, delay + jitter]; mean of the max of k uniforms
 *   loss: the fraction of segments lost; a one-segment message costs 0, rto, 3 rto, 7 rto ...
 *   (backoff); a single loss in a longer message costs rto + ceil(log2(r + 1)) rtt, r the
 *   segments beyond the 10 in flight behind it
 *   fast recovery: 1.25 rtt for a segment with one behind it, 2 rtt for a lost tail, 1.5 rtt +
 *   200 ms for a lone segment, timeouts only for a lost retransmission; its mean against the
 *   closed form; slow start from the initial window: rounds of 10, 20, 40 ... segments
 *   a loss schedule: a message sent into a blackout arrives at the first retransmission of the
 *   backoff schedule after the link is back (not ~1,000 s later as under a constant 99.9999%),
 *   then the rest of its segments in slow start; a schedule that never changes draws exactly
 *   what the constant loss draws */
#include <criterion/criterion.h>
#include <math.h>

#include "node/rng.h"
#include "sim/sim_link.h"

static const struct sim_link_tcp TCP = { .rto_min_ns = 200000000, .mss = 1000 };

Test(sim_link, serialisation_queueing_delay)
{
	struct link_params p = { .delay_us = 5000, .rate_bps = 8000000 }; /* 1 byte per us */
	struct sim_link l = { .p = &p };
	struct sim_link_cost c;
	struct rng r;
	int64_t t1, t2;

	rng_seed(&r, 1, 0);
	t1 = sim_link_send(&l, &TCP, 10000, 1000, 0, &r, &c);
	cr_assert_eq(c.serial_ns, 10000000);
	cr_assert_eq(c.queue_ns, 0);
	cr_assert_eq(c.segments, 10);
	cr_assert_eq(t1, 1000 + 10000000 + 5000000);
	/* sent while the first is still on the wire: waits for it */
	t2 = sim_link_send(&l, &TCP, 1000, 2000, 0, &r, &c);
	cr_assert_eq(c.queue_ns, 1000 + 10000000 - 2000);
	cr_assert_eq(t2, 1000 + 10000000 + 1000000 + 5000000);
	/* no link parameters: instantaneous */
	{
		struct sim_link z = { .p = NULL };

		cr_assert_eq(sim_link_send(&z, &TCP, 123456, 77, 0, &r, NULL), 77);
	}
}

Test(sim_link, jitter_is_netem_uniform_max_of_packets)
{
	struct link_params p = { .delay_us = 10000, .jitter_us = 4000 };
	struct sim_link l = { .p = &p };
	struct sim_link_cost c;
	struct rng r;
	double sum1 = 0, sum8 = 0;
	const int N = 40000;

	rng_seed(&r, 2, 0);
	for (int i = 0; i < N; i++) {
		sim_link_send(&l, &TCP, 500, 0, 0, &r, &c); /* one packet */
		cr_assert_geq(c.prop_ns, 6000000);
		cr_assert_leq(c.prop_ns, 14000000);
		sum1 += (double)c.prop_ns;
		sim_link_send(&l, &TCP, 8000, 0, 0, &r, &c); /* 8 packets: the latest counts */
		sum8 += (double)c.prop_ns;
	}
	/* E[max of k uniforms on [-1, 1]] = (k - 1) / (k + 1) */
	cr_assert_lt(fabs(sum1 / N - 10e6), 0.03e6, "mean %g", sum1 / N);
	cr_assert_lt(fabs(sum8 / N - (10e6 + 4e6 * 7.0 / 9.0)), 0.03e6, "mean %g", sum8 / N);
}

Test(sim_link, loss_fraction_and_backoff)
{
	struct rng r;
	const int64_t rto = 1000003, rtt = 10;
	uint64_t lost = 0, segs = 0;
	int hist[5] = { 0 };
	const int N = 200000;

	rng_seed(&r, 3, 0);
	cr_assert_eq(sim_link_loss_ns(0, 100, rto, rtt, &r, NULL), 0);
	/* one-segment messages: cost = rto (2^j - 1) after j losses in a row */
	for (int i = 0; i < N; i++) {
		uint32_t l;
		int64_t c = sim_link_loss_ns(0.3, 1, rto, rtt, &r, &l);
		int64_t q = c / rto;

		cr_assert_eq(c % rto, 0, "a one-segment message has no slow start after the timeout");
		cr_assert(q == 0 || q == 1 || q == 3 || q == 7 || q == 15 || q == 31 || q == 63 || q >= 127,
			  "cost %lld rto", (long long)q);
		cr_assert_eq(l, q > 0);
		hist[q == 0 ? 0 : q == 1 ? 1 : q == 3 ? 2 : q == 7 ? 3 : 4]++;
	}
	/* P(lost j times in a row, then not) = 0.3^j 0.7 */
	cr_assert_lt(fabs(hist[0] / (double)N - 0.7), 0.005);
	cr_assert_lt(fabs(hist[1] / (double)N - 0.21), 0.005);
	cr_assert_lt(fabs(hist[2] / (double)N - 0.063), 0.003);
	/* longer messages: the fraction of segments lost is p */
	for (int i = 0; i < 20000; i++) {
		uint32_t l;

		sim_link_loss_ns(0.02, 200, rto, rtt, &r, &l);
		lost += l;
		segs += 200;
	}
	cr_assert_lt(fabs((double)lost / (double)segs - 0.02), 0.001, "fraction %g", (double)lost / segs);
}

Test(sim_link, window_collapse_after_a_timeout)
{
	struct rng r;
	int singles = 0, hist[7] = { 0 };

	rng_seed(&r, 4, 0);
	for (int i = 0; i < 200000 && singles < 2000; i++) {
		uint32_t l;
		const int64_t rto = 1000003, rtt = 10;
		int64_t c = sim_link_loss_ns(0.005, 64, rto, rtt, &r, &l);

		if (l != 1 || c >= 2 * rto)
			continue; /* one segment lost once */
		singles++;
		cr_assert_geq(c, rto);
		/* the rest of the message beyond the window (0..53 segments) in slow start: 0..6
		 * round trips */
		cr_assert_eq((c - rto) % rtt, 0);
		cr_assert_leq((c - rto) / rtt, 6);
		hist[(c - rto) / rtt]++;
	}
	cr_assert_gt(singles, 500);
	/* a loss among the last 11 segments leaves nothing beyond the window: no extra round
	 * trip (11 of 64 positions); one among the first leaves 53: 6 round trips */
	cr_assert_gt(hist[0], singles * 11 / 64 / 2);
	cr_assert_lt(hist[0], singles * 11 / 64 * 2);
	cr_assert_gt(hist[6], 0);
	/* a loss at the very first of 64 segments: 63 left = 6 rounds (1+2+4+8+16+32 = 63) */
	{
		struct link_params p = { .loss_ppm = 1000000 };

		cr_assert_gt(sim_link_loss_prob(&p), 0.99);
	}
}

Test(sim_link, fast_recovery_costs)
{
	const int64_t rtt = 40000000, rto = 240000000;
	struct rng r;
	uint32_t lost;

	rng_seed(&r, 7, 0);
	/* certain loss (p = 1 - 1e-6): a lone segment's probe, then every retransmission lost
	 * too: 15 timeouts of 240 ms doubled each time, at most 120 s (the fixed seed makes the
	 * one-in-a-million escape impossible here) */
	{
		int64_t want = rtt + rtt / 2 + 200000000, t = rto;

		for (int k = 0; k < 15; k++) {
			want += t;
			t = 2 * t > 120000000000ll ? 120000000000ll : 2 * t;
		}
		cr_assert_eq(sim_link_loss_fast_ns(0.999999, 1, rto, rtt, &r, &lost), want);
		cr_assert_eq(lost, 1);
	}
	/* rare loss: the mean cost of a 22-segment message against the closed form
	 * sum_i p (base_i + p rto + ...), base 1.25 rtt for the 21 first segments, 2 rtt for the last */
	{
		const double p = 0.01;
		const int n = 400000;
		double sum = 0, want = p * (21 * 1.25 * rtt + 2.0 * rtt) + 22 * p * p * rto;
		double fast_mean, slow_sum = 0;

		for (int k = 0; k < n; k++)
			sum += (double)sim_link_loss_fast_ns(p, 22, rto, rtt, &r, NULL);
		fast_mean = sum / n;
		cr_assert_float_eq(fast_mean, want, 0.03 * want, "mean %g ns, closed form %g", fast_mean, want);
		/* the timeout model costs several times more on the same message */
		for (int k = 0; k < n; k++)
			slow_sum += (double)sim_link_loss_ns(p, 22, rto, rtt, &r, NULL);
		cr_assert_gt(slow_sum / n, 3 * fast_mean);
	}
	cr_assert_eq(sim_link_loss_fast_ns(0, 22, rto, rtt, &r, &lost), 0);
	cr_assert_eq(lost, 0);
}

Test(sim_link, fast_recovery_in_send)
{
	struct sim_link_tcp fast = TCP;
	struct link_params p = { .delay_us = 10000, .loss_ppm = 999999 };
	struct sim_link l = { .p = &p };
	struct sim_link_cost c;
	struct rng r;

	fast.fast_recovery = true;
	rng_seed(&r, 3, 0);
	/* two segments, both lost, and every retransmission too: 1.25 rtt for the first, 2 rtt
	 * for the tail, and each 15 timeouts from rto = rtt + rto_min = 240 ms */
	{
		int64_t want = 50000000 + 80000000, t = 240000000;

		for (int k = 0; k < 15; k++) {
			want += 2 * t;
			t = 2 * t > 120000000000ll ? 120000000000ll : 2 * t;
		}
		sim_link_send(&l, &fast, 2000, 0, 40000000, &r, &c);
		cr_assert_eq(c.lost, 2);
		cr_assert_eq(c.loss_ns, want);
	}
}

Test(sim_link, slow_start_rounds)
{
	static const struct { uint64_t bytes; uint32_t rounds; } cases[] = {
		{ 1, 0 }, { 10000, 0 }, { 10001, 1 }, { 30000, 1 }, { 30001, 2 }, { 70000, 2 }, { 70001, 3 },
		{ 31456, 2 },
	};

	/* mss 1000: 10 segments in the first round trip, 20 in the second, 40 in the third */
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		cr_assert_eq(sim_link_slow_start_rounds(&TCP, cases[i].bytes), cases[i].rounds, "%llu bytes",
			     (unsigned long long)cases[i].bytes);
}

/* 100% loss from 0 to 5 s, none after: a one-segment message sent at 1 s is retransmitted at
 * 1 s + rto (2^k - 1) and arrives at the first of those at or after 5 s; a 100-segment one
 * loses its first segment the same way, then sends the 89 beyond the 10 in flight in slow
 * start (7 round trips). Sent after the blackout: no loss at all. */
Test(sim_link, blackout_schedule_retransmits_until_the_link_is_back)
{
	static const int64_t at[] = { 0, 5000000000ll };
	static const double pv[] = { 1.0, 0.0 };
	const struct sim_link_sched sched = { .base = 0, .at_ns = at, .p = pv, .n = 2 };
	struct link_params p = { .delay_us = 1000, .loss_ppm = 0 };
	struct sim_link l = { .p = &p, .sched = &sched };
	const int64_t rtt = 4000000, rto = rtt + TCP.rto_min_ns, t0 = 1000000000ll;
	int64_t expect = t0, k = 1, t;
	struct sim_link_cost c;
	struct rng r;

	rng_seed(&r, 9, 0);
	while (expect < 5000000000ll)
		expect = t0 + rto * ((1ll << k++) - 1);
	t = sim_link_send(&l, &TCP, 500, t0, rtt, &r, &c);
	cr_assert_eq(c.lost, 1);
	cr_assert_eq(t, expect + 1000000, "arrived at %lld, the schedule says %lld", (long long)t,
		     (long long)(expect + 1000000));
	cr_assert_lt(t - 5000000000ll, 5000000000ll - t0 + rto, "later than the backoff bound");
	t = sim_link_send(&l, &TCP, 100000, t0, rtt, &r, &c);
	cr_assert_eq(c.segments, 100);
	cr_assert_eq(c.lost, 1, "after the blackout the rest goes through");
	cr_assert_eq(c.loss_ns, expect - t0 + 7 * rtt);
	t = sim_link_send(&l, &TCP, 100000, 6000000000ll, rtt, &r, &c);
	cr_assert_eq(c.lost, 0);
	cr_assert_eq(t, 6000000000ll + 1000000);
	cr_assert_float_eq(sim_link_loss_at(&l, 4999999999ll), 1.0, 1e-12);
	cr_assert_float_eq(sim_link_loss_at(&l, 5000000000ll), 0.0, 1e-12);
}

/* A schedule that never changes (2% throughout) draws what the constant 2% draws: the same
 * times, message for message (runs without loss changes stay byte-identical). */
Test(sim_link, unchanging_schedule_draws_as_constant_loss)
{
	const struct sim_link_sched sched = { .base = 0.02 };
	struct link_params p = { .delay_us = 1000, .jitter_us = 300, .loss_ppm = 20000 };
	struct sim_link a = { .p = &p }, b = { .p = &p, .sched = &sched };
	struct rng ra, rb;
	uint32_t lost = 0;

	rng_seed(&ra, 4, 0);
	rng_seed(&rb, 4, 0);
	for (int i = 0; i < 2000; i++) {
		struct sim_link_cost c;
		int64_t ta = sim_link_send(&a, &TCP, 1000 + 977 * (uint64_t)i, i * 1000000ll, 3000000, &ra, &c);

		lost += c.lost;
		cr_assert_eq(sim_link_send(&b, &TCP, 1000 + 977 * (uint64_t)i, i * 1000000ll, 3000000, &rb, NULL), ta,
			     "message %d", i);
	}
	cr_assert_gt(lost, 100, "the loss was exercised (%u)", lost);
}
