/* clocksync against synthetic clocks of known offset and drift: a remote clock
 * remote(t) = t + off + drift * (t - T0), exchanges with random asymmetric delays. The true
 * offset must lie within the reported bound, and the estimate must be close when a few
 * exchanges were fast. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "lib/clocksync.h"

static double urand(void)
{
	return (rand() + 0.5) / ((double)RAND_MAX + 1.0);
}

/* exponential with the given mean, plus a floor */
static int64_t delay(double floor_ns, double mean_ns)
{
	return (int64_t)(floor_ns - mean_ns * log(urand()));
}

static int64_t remote_at(int64_t t, int64_t off, double drift_ppm, int64_t t0)
{
	return t + off + (int64_t)llround(drift_ppm * 1e-6 * (double)(t - t0));
}

Test(clocksync, one_exchange)
{
	/* remote = local + 1000; 300 ns out, 100 ns back, 50 ns in the remote */
	struct clocksync_sample s = { .t1_ns = 10000, .t2_ns = 10000 + 300 + 1000, .t3_ns = 11350,
				      .t4_ns = 10000 + 300 + 50 + 100 };
	int64_t th, de;
	cr_assert_eq(clocksync_sample_eval(&s, &th, &de), 0);
	cr_expect_eq(de, 400);
	cr_expect_eq(th, 1100, "asymmetry of 200 ns shifts the estimate by half of it");
	cr_expect_leq(llabs(th - 1000), de / 2);
	struct clocksync_sample bad1 = { .t1_ns = 10, .t2_ns = 5, .t3_ns = 4, .t4_ns = 20 };
	cr_expect_eq(clocksync_sample_eval(&bad1, &th, &de), -EINVAL, "t3 before t2");
	struct clocksync_sample bad2 = { .t1_ns = 10, .t2_ns = 0, .t3_ns = 100, .t4_ns = 20 };
	cr_expect_eq(clocksync_sample_eval(&bad2, &th, &de), -EINVAL, "remote time longer than the round trip");
	struct clocksync_estimate e;
	cr_expect_eq(clocksync_estimate(&bad2, 1, &e), -EINVAL);
	cr_expect_eq(clocksync_estimate(&s, 0, &e), -EINVAL);
}

Test(clocksync, truth_within_bound_randomised)
{
	srand(3);
	for (int trial = 0; trial < 500; trial++) {
		int64_t t0 = 1000000000ll * (1 + rand() % 1000);
		int64_t off = (int64_t)((urand() - 0.5) * 2e12);         /* +- 1000 s */
		double drift = (urand() - 0.5) * 200;                     /* +- 100 ppm */
		size_t n = 1 + (size_t)(rand() % 64);
		struct clocksync_sample s[64];
		int64_t t = t0;
		for (size_t i = 0; i < n; i++) {
			int64_t out = delay(20000, 200000), back = delay(20000, 200000), proc = delay(1000, 5000);
			s[i].t1_ns = t;
			s[i].t2_ns = remote_at(t + out, off, drift, t0);
			s[i].t3_ns = s[i].t2_ns + proc;
			s[i].t4_ns = t + out + proc + back;
			t += 10000000 + rand() % 1000000;                 /* ~10 ms apart */
		}
		struct clocksync_estimate e;
		cr_assert_eq(clocksync_estimate(s, n, &e), 0);
		for (size_t i = 0; i < n; i++) {
			/* the truth at every exchange's midpoint lies within the bound (+ the drift over
			 * the filtered window, which the bound covers when the drift is linear) */
			int64_t mid = s[i].t1_ns + (s[i].t4_ns - s[i].t1_ns) / 2;
			int64_t truth = remote_at(mid, off, drift, t0) - mid;
			int64_t err = llabs(clocksync_offset_at(&e, mid) - truth);
			if (n >= 2 * CLOCKSYNC_MIN_KEEP)
				continue;       /* extrapolation beyond the kept window is not bounded */
			cr_expect_leq(err, e.bound_ns, "trial %d sample %zu: err %lld > bound %lld", trial, i,
				      (long long)err, (long long)e.bound_ns);
		}
		int64_t truth_ref = remote_at(e.ref_ns, off, drift, t0) - e.ref_ns;
		cr_expect_leq(llabs(e.offset_ns - truth_ref), e.bound_ns, "trial %d: at ref err %lld bound %lld", trial,
			      (long long)llabs(e.offset_ns - truth_ref), (long long)e.bound_ns);
		cr_expect_geq(e.min_delay_ns, 40000);
	}
}

Test(clocksync, min_rtt_filter_beats_mean)
{
	/* 200 exchanges, 90% of them queued behind up to 5 ms in one direction only: the mean of
	 * all thetas is off by ~1 ms, the filtered estimate by far less */
	srand(5);
	const int64_t off = 123456789, t0 = 5000000000ll;
	struct clocksync_sample s[200];
	double mean = 0;
	for (int i = 0; i < 200; i++) {
		int64_t t = t0 + i * 5000000ll;
		int64_t out = 30000 + (rand() % 10 ? rand() % 5000000 : 0), back = 30000;
		s[i] = (struct clocksync_sample){ t, t + out + off, t + out + off + 2000, t + out + 2000 + back };
		int64_t th, de;
		cr_assert_eq(clocksync_sample_eval(&s[i], &th, &de), 0);
		mean += (double)th / 200;
	}
	struct clocksync_estimate e;
	cr_assert_eq(clocksync_estimate(s, 200, &e), 0);
	cr_expect(e.used >= 10 && e.used <= 30, "used %zu", e.used);
	cr_expect_gt(fabs(mean - (double)off), 500000);
	cr_expect_lt(llabs(e.offset_ns - off), 100000, "filtered error %lld", (long long)llabs(e.offset_ns - off));
	cr_expect_leq(llabs(e.offset_ns - off), e.bound_ns);
	cr_expect_lt(fabs(e.drift_ppm), 50);
}

Test(clocksync, drift_recovered_and_mapping)
{
	/* symmetric fixed delays: the line is exact */
	const int64_t off = -7000000000ll, t0 = 1000000000ll;
	const double drift = 50.0;
	struct clocksync_sample s[40];
	for (int i = 0; i < 40; i++) {
		int64_t t = t0 + i * 100000000ll;                   /* 4 s of exchanges */
		s[i].t1_ns = t;
		s[i].t2_ns = remote_at(t + 50000, off, drift, t0);
		s[i].t3_ns = s[i].t2_ns + 1000;
		s[i].t4_ns = t + 50000 + 1000 + 50000;
	}
	struct clocksync_estimate e;
	cr_assert_eq(clocksync_estimate(s, 40, &e), 0);
	cr_expect_lt(fabs(e.drift_ppm - drift), 1.0, "drift %f", e.drift_ppm);
	cr_expect_leq(e.bound_ns, 60000, "bound %lld", (long long)e.bound_ns);
	int64_t local = t0 + 200000000;
	int64_t remote = remote_at(local, off, drift, t0);
	cr_expect_lt(llabs(clocksync_to_local(&e, remote) - local), 1000, "mapped %lld want %lld",
		     (long long)clocksync_to_local(&e, remote), (long long)local);
}

Test(clocksync, hostile_remote_stamps)
{
	/* t2 and t3 are whatever the other side answered: stamps whose differences overflow int64
	 * (found by fuzz_clocksync) or put the clocks absurdly far apart are refused, and the
	 * mappings saturate instead of wrapping */
	struct clocksync_sample wrap = { .t1_ns = 6917529027645027168ll, .t2_ns = INT64_MIN + 820,
					 .t3_ns = INT64_MIN + 900, .t4_ns = 6917529027645027168ll + 1000 };
	struct clocksync_sample far = { .t1_ns = 1000, .t2_ns = 1000 + CLOCKSYNC_MAX_OFFSET_NS + 1,
					.t3_ns = 1000 + CLOCKSYNC_MAX_OFFSET_NS + 2, .t4_ns = 1010 };
	struct clocksync_sample edge = { .t1_ns = 1000, .t2_ns = 1000 + CLOCKSYNC_MAX_OFFSET_NS,
					 .t3_ns = 1000 + CLOCKSYNC_MAX_OFFSET_NS, .t4_ns = 1000 };
	struct clocksync_sample both[2] = { wrap, edge };
	struct clocksync_estimate e;
	int64_t th, de;

	cr_expect_eq(clocksync_sample_eval(&wrap, &th, &de), -EINVAL);
	cr_expect_eq(clocksync_sample_eval(&far, &th, &de), -EINVAL);
	cr_assert_eq(clocksync_sample_eval(&edge, &th, &de), 0);
	cr_expect_eq(th, CLOCKSYNC_MAX_OFFSET_NS);
	cr_expect_eq(de, 0);
	cr_assert_eq(clocksync_estimate(both, 2, &e), 0, "the one sane exchange is used");
	cr_expect_eq(e.used, 1);
	cr_expect_eq(e.offset_ns, CLOCKSYNC_MAX_OFFSET_NS);
	cr_expect_eq(clocksync_to_local(&e, INT64_MIN + 5), INT64_MIN, "saturates, never wraps");
	e.drift_ppm = 1e6;
	cr_expect_eq(clocksync_offset_at(&e, INT64_MAX), INT64_MAX);
	cr_expect_eq(clocksync_offset_at(&e, INT64_MIN), INT64_MIN + CLOCKSYNC_MAX_OFFSET_NS);
}
