/* Unit tests for orchestrator/hostload: the /proc parsers on fixture text, the accumulator
 * against numbers worked out by hand, and one real sample of this process. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "orchestrator/hostload.h"

Test(hostload, schedstat_fixture)
{
	struct hostload_sched s;

	cr_assert_eq(hostload_parse_schedstat("675486 808007 9\n", &s), 0);
	cr_assert_eq(s.run_ns, 675486);
	cr_assert_eq(s.wait_ns, 808007);
	cr_assert_eq(s.slices, 9);
	cr_assert_eq(hostload_parse_schedstat("18446744073709551615 0 1", &s), 0);
	cr_assert_eq(s.run_ns, UINT64_MAX);
	cr_assert_eq(hostload_parse_schedstat("18446744073709551616 0 1\n", &s), -EINVAL, "overflow");
	cr_assert_eq(hostload_parse_schedstat("1 2\n", &s), -EINVAL, "two fields");
	cr_assert_eq(hostload_parse_schedstat("1 -2 3\n", &s), -EINVAL);
	cr_assert_eq(hostload_parse_schedstat("1 2 3 x\n", &s), -EINVAL);
	cr_assert_eq(hostload_parse_schedstat("", &s), -EINVAL);
}

Test(hostload, stat_fixture)
{
	struct hostload_cpu c;

	/* user nice system idle iowait irq softirq steal guest guest_nice */
	cr_assert_eq(hostload_parse_stat("cpu  8304 948 12909 28705 249 0 3729 13 7 5\n"
					 "cpu0 4000 400 6000 14000 100 0 1800 6 0 0\n", &c), 0);
	cr_assert_eq(c.total, 8304 + 948 + 12909 + 28705 + 249 + 0 + 3729 + 13, "guest not counted twice");
	cr_assert_eq(c.busy, 8304 + 948 + 12909 + 0 + 3729 + 13, "idle and iowait are not busy");
	/* a kernel of four fields */
	cr_assert_eq(hostload_parse_stat("cpu 1 2 3 4\n", &c), 0);
	cr_assert_eq(c.total, 10);
	cr_assert_eq(c.busy, 6);
	cr_assert_eq(hostload_parse_stat("cpu 1 2 3\n", &c), -EINVAL);
	cr_assert_eq(hostload_parse_stat("cpu0 1 2 3 4\n", &c), -EINVAL, "not the aggregate line");
	cr_assert_eq(hostload_parse_stat("intr 1 2 3 4\n", &c), -EINVAL);
	cr_assert_eq(hostload_parse_stat("cpu 1 2 3 4 z\n", &c), -EINVAL);
}

Test(hostload, cpu_frac)
{
	struct hostload_cpu a = { .busy = 100, .total = 400 }, b = { .busy = 250, .total = 600 };

	cr_assert_float_eq(hostload_cpu_frac(&a, &b), 0.75, 1e-12);
	cr_assert(isnan(hostload_cpu_frac(&a, &a)), "no tick passed");
	cr_assert(isnan(hostload_cpu_frac(&b, &a)), "went back");
}

Test(hostload, feed_by_hand)
{
	struct hostload *h = hostload_new();
	struct hostload_point pt;
	struct hostload_summary sum;
	struct hostload_cpu c0 = { 0, 1000 }, c1 = { 100, 1200 }, c2 = { 250, 1400 };
	const int64_t S = 1000000000LL;

	cr_assert(h);
	hostload_get_summary(h, &sum);
	cr_assert(isnan(sum.runq_wait_mean) && isnan(sum.host_cpu_max) && !sum.saturated);
	/* t = 0: baselines only */
	struct hostload_obs o0[] = { { 10, { 0, 1000, 0 } }, { 11, { 0, 5000, 0 } } };
	cr_assert_eq(hostload_feed(h, o0, 2, &c0, 0, &pt), 0);
	cr_assert(isnan(pt.runq_wait_frac) && isnan(pt.host_cpu_frac));
	/* t = 1 s: pid 10 waited 0.1 s, pid 11 0.02 s; 100 busy ticks of 200 */
	struct hostload_obs o1[] = { { 10, { 0, 1000 + S / 10, 0 } }, { 11, { 0, 5000 + S / 50, 0 } } };
	cr_assert_eq(hostload_feed(h, o1, 2, &c1, S, &pt), 0);
	cr_assert_float_eq(pt.runq_wait_frac, (0.1 + 0.02) / 2, 1e-9);
	cr_assert_float_eq(pt.host_cpu_frac, 0.5, 1e-12);
	/* t = 3 s: pid 11 gone, pid 12 new (baseline), pid 10 waited 0.02 s over 2 s */
	struct hostload_obs o2[] = { { 10, { 0, 1000 + S / 10 + S / 50, 0 } }, { 12, { 0, 7 * S, 0 } } };
	cr_assert_eq(hostload_feed(h, o2, 2, &c2, 3 * S, &pt), 0);
	cr_assert_float_eq(pt.runq_wait_frac, 0.01, 1e-9);
	cr_assert_float_eq(pt.host_cpu_frac, 0.75, 1e-12);
	/* t = 4 s: pid 12 waited 1.5 s in 1 s (impossible: clamped to the wall time), pid 10
	 * reused by another process whose counter is lower: baseline again */
	struct hostload_obs o3[] = { { 10, { 0, 3, 0 } }, { 12, { 0, 7 * S + 3 * S / 2, 0 } } };
	cr_assert_eq(hostload_feed(h, o3, 2, NULL, 4 * S, &pt), 0);
	cr_assert_float_eq(pt.runq_wait_frac, 1.0, 1e-9);
	cr_assert(isnan(pt.host_cpu_frac));
	hostload_get_summary(h, &sum);
	/* time-weighted: (0.12 + 0.02 + 1.0) s of waits over (2 + 2 + 1) s of wall */
	cr_assert_float_eq(sum.runq_wait_mean, 1.14 / 5.0, 1e-9);
	cr_assert_float_eq(sum.runq_wait_max, 1.0, 1e-9);
	cr_assert_float_eq(sum.host_cpu_mean, 0.625, 1e-9);
	cr_assert_float_eq(sum.host_cpu_max, 0.75, 1e-9);
	cr_assert(sum.saturated);
	cr_assert_eq(sum.samples, 3);
	hostload_destroy(&h);
	cr_assert_null(h);
	hostload_destroy(&h);
}

Test(hostload, below_threshold_not_saturated)
{
	struct hostload *h = hostload_new();
	struct hostload_summary sum;
	const int64_t S = 1000000000LL;

	for (int64_t t = 0; t <= 10; t++) {
		/* 4% of each second waiting: under the 5% line */
		struct hostload_obs o = { 42, { 0, (uint64_t)(t * S / 25), 0 } };
		struct hostload_cpu c = { (uint64_t)t * 50, (uint64_t)t * 200 };

		cr_assert_eq(hostload_feed(h, &o, 1, &c, t * S, NULL), 0);
	}
	hostload_get_summary(h, &sum);
	cr_assert_float_eq(sum.runq_wait_mean, 0.04, 1e-9);
	cr_assert_float_eq(sum.host_cpu_mean, 0.25, 1e-9);
	cr_assert_not(sum.saturated);
	hostload_destroy(&h);
}

/* This process's own schedstat and /proc/stat parse, and a second sample measures something. */
Test(hostload, real_sample_of_self, .timeout = 10)
{
	struct hostload *h = hostload_new();
	struct hostload_point pt;
	struct timespec ts;
	pid_t self = getpid(), gone = 0x3ffffff0;
	pid_t pids[] = { self, gone };
	int64_t t0, t;
	volatile double x = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = ts.tv_sec * 1000000000LL + ts.tv_nsec;
	cr_assert_eq(hostload_sample(h, pids, 2, t0, &pt), 0);
	/* burn CPU for 50 ms of wall time so a tick of /proc/stat passes */
	do {
		for (int i = 0; i < 100000; i++)
			x += i;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		t = ts.tv_sec * 1000000000LL + ts.tv_nsec;
	} while (t - t0 < 50000000LL);
	cr_assert_eq(hostload_sample(h, pids, 2, t, &pt), 0);
	cr_assert(pt.runq_wait_frac >= 0 && pt.runq_wait_frac <= 1, "%g", pt.runq_wait_frac);
	cr_assert(pt.host_cpu_frac > 0 && pt.host_cpu_frac <= 1, "we were busy: %g", pt.host_cpu_frac);
	hostload_destroy(&h);
}
