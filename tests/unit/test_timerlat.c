/* Unit tests for lib/timerlat: a short real measurement is consistent (counts as asked, quantiles
 * ordered, nothing early) and the precision rule and the description follow the numbers. */
#include <criterion/criterion.h>
#include <string.h>

#include "lib/timerlat.h"

/* Timing here is only checked for consistency, never for speed: a loaded host passes too. */
Test(timerlat, measures_what_was_asked, .timeout = 60)
{
	struct timerlat_opts o = { .warm_samples = 50, .idle_samples = 3, .idle_ms = 20, .load_samples = 50,
				   .rt_prio = 0 };
	struct timerlat_result r;

	cr_assert_eq(timerlat_measure(&o, &r), 0);
	cr_assert_eq(r.warm.n, 50);
	cr_assert_eq(r.idle.n, 3);
	cr_assert_eq(r.load.n, 50);
	cr_assert_geq(r.ncpu, 1);
	cr_assert_not(r.rt, "rt_prio 0 asks for the normal scheduler");
	const struct timerlat_dist *d[] = { &r.warm, &r.idle, &r.load };
	for (int i = 0; i < 3; i++) {
		cr_assert_geq(d[i]->p50_ns, 0);
		cr_assert_leq(d[i]->p50_ns, d[i]->p99_ns);
		cr_assert_leq(d[i]->p99_ns, d[i]->max_ns);
		cr_assert_lt(d[i]->max_ns, 60000000000LL);
	}
	o = (struct timerlat_opts){ .warm_samples = 5 };
	cr_assert_eq(timerlat_measure(&o, &r), 0);
	cr_assert_eq(r.warm.n, 5);
	cr_assert_eq(r.idle.n, 0, "skipped");
	cr_assert_eq(r.load.n, 0, "skipped");
	cr_assert_eq(r.ncpu, 0);
}

Test(timerlat, precision_rule_and_description)
{
	struct timerlat_result r = { .warm = { 100, 20000, 60000, 90000 }, .idle = { 10, 30000, 90000, 95000 },
				     .load = { 100, 25000, 100000, 150000 }, .rt = true, .ncpu = 2 };
	char buf[2048];

	cr_assert_str_eq(timerlat_precision_for(&r), "timer", "100 us at p99 is within the budget");
	timerlat_describe(&r, buf, sizeof buf);
	cr_assert(strstr(buf, "timer lateness, after idle: p50 0.030 ms, p99 0.090 ms, max 0.095 ms (10 wake-ups)\n"),
		  "%s", buf);
	cr_assert(strstr(buf, "with real-time priority, 2 CPU(s) loaded"), "%s", buf);
	cr_assert(strstr(buf, "network.precision: timer"), "%s", buf);
	r.idle.p99_ns = 9700000; /* a parked vCPU */
	cr_assert_str_eq(timerlat_precision_for(&r), "spin");
	timerlat_describe(&r, buf, sizeof buf);
	cr_assert(strstr(buf, "up to 9.700 ms late (p99)"), "%s", buf);
	cr_assert(strstr(buf, "network.precision: spin"), "%s", buf);
	r.idle.p99_ns = 10000;
	r.load.p99_ns = 100001;
	cr_assert_str_eq(timerlat_precision_for(&r), "spin");
	/* unmeasured situations say so and do not count */
	struct timerlat_result none = { 0 };
	cr_assert_str_eq(timerlat_precision_for(&none), "timer");
	timerlat_describe(&none, buf, sizeof buf);
	cr_assert(strstr(buf, "after idle: not measured"), "%s", buf);
	/* a short buffer is cut, not overrun */
	char small[40];
	memset(small, 'x', sizeof small);
	timerlat_describe(&r, small, 20);
	cr_assert_eq(strlen(small), 19);
	cr_assert_eq(small[20], 'x');
}
