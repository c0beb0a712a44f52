/* Unit tests for node/linkcheck verdicts and node/probe's running statistics. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "node/linkcheck.h"
#include "node/probe.h"

Test(linkcheck, mean_tolerance)
{
	struct linkcheck_row r = { .direction = "up", .probes = 200, .received = 200, .cfg_delay_ms = 20,
				   .mean_ms = 20.35 };
	char buf[256];

	cr_assert(linkcheck_ok(&r, NULL, 0));   /* 0.35 < max(0.5, 0.4) */
	r.mean_ms = 20.6;
	cr_assert_not(linkcheck_ok(&r, buf, sizeof buf));
	cr_assert(strstr(buf, "mean") != NULL);
	r.cfg_delay_ms = 100, r.mean_ms = 101.9;  /* 2% of 100 = 2 ms */
	cr_assert(linkcheck_ok(&r, NULL, 0));
	r.mean_ms = 102.1;
	cr_assert_not(linkcheck_ok(&r, NULL, 0));
}

Test(linkcheck, jitter_and_distribution)
{
	struct linkcheck_row r = { .direction = "down", .probes = 500, .received = 500, .cfg_delay_ms = 50,
				   .cfg_jitter_ms = 10, .mean_ms = 50, .sd_ms = 10.9 };

	cr_assert(linkcheck_ok(&r, NULL, 0));
	r.sd_ms = 8.4;
	cr_assert_not(linkcheck_ok(&r, NULL, 0));
	r.cfg_dist = "uniform";
	r.sd_ms = 10 / sqrt(3.0);
	cr_assert(linkcheck_ok(&r, NULL, 0));
	r.cfg_jitter_ms = 1.0, r.sd_ms = 0.1; /* below 2 ms jitter the spread is not judged */
	cr_assert(linkcheck_ok(&r, NULL, 0));
}

Test(linkcheck, loss_interval)
{
	/* 5000 packets at 1%: expected 50 lost, sd ~7.04, 99.9% half-width ~23 (+1). */
	struct linkcheck_row r = { .direction = "up", .probes = 5000, .cfg_loss = 0.01 };
	char buf[512];

	r.received = 5000 - 70;
	cr_assert(linkcheck_ok(&r, NULL, 0));
	r.received = 5000 - 76;
	cr_assert_not(linkcheck_ok(&r, NULL, 0));
	r.received = 5000 - 26;
	cr_assert(linkcheck_ok(&r, NULL, 0));
	r.received = 5000 - 24;
	cr_assert_not(linkcheck_ok(&r, NULL, 0));
	r.cfg_loss = 0, r.received = 4999;   /* one packet of slack at zero loss */
	cr_assert(linkcheck_ok(&r, NULL, 0));
	r.received = 0;
	linkcheck_row_format(&r, "worker1", buf, sizeof buf);
	cr_assert(r.verdict_off);
	cr_assert(strstr(buf, "worker1,up,5000,") == buf, "%s", buf);
	cr_assert(strstr(buf, ",off") != NULL);
}

Test(probe, welford_matches_two_pass)
{
	double xs[] = { 3, 7, 7, 19, 24.5, -3 }, mean = 0, ss = 0;
	struct probe_acc a = { 0 };
	int n = sizeof xs / sizeof xs[0];

	for (int i = 0; i < n; i++) {
		probe_acc_add(&a, xs[i]);
		mean += xs[i] / n;
	}
	for (int i = 0; i < n; i++)
		ss += (xs[i] - mean) * (xs[i] - mean);
	cr_assert_float_eq(a.mean, mean, 1e-12);
	cr_assert_float_eq(probe_acc_sd(&a), sqrt(ss / (n - 1)), 1e-12);
}
