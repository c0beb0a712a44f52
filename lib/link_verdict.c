/* lib/link_verdict: expected round-trip statistics and the ok/off verdict (see the header). */
#include "lib/link_verdict.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The standard deviation, in units of the jitter, of each of netem's delay distribution tables
 * (normal, pareto, paretonormal), as netem/netem_model tabulates them; here as constants so the
 * verdict, which node/probe uses, needs nothing from netem/. tests/unit/test_netem_model checks
 * them against netem_model_dist_sd. Without a table the jitter is uniform: 1/sqrt(3). */
static double dist_sd(enum link_dist dist)
{
	switch (dist) {
	case LINK_DIST_NORMAL:
		return 1.0000527111303688;
	case LINK_DIST_PARETO:
		return 0.81967722288684153;
	case LINK_DIST_PARETONORMAL:
		return 0.83394452575340872;
	default:
		return 0.57735026918962584;
	}
}

double link_verdict_ge_loss_rate(const struct link_params *p)
{
	double gp = p->ge_p_ppm / 1e6, gr = p->ge_r_ppm / 1e6, bad;

	if (gp + gr == 0)
		return p->ge_1k_ppm / 1e6;
	bad = gp / (gp + gr); /* the stationary share of the bad state */
	return bad * (p->ge_1h_ppm / 1e6) + (1 - bad) * (p->ge_1k_ppm / 1e6);
}

static double oneway_loss(const struct link_params *p)
{
	if (p->loss_model == LINK_LOSS_GEMODEL)
		return link_verdict_ge_loss_rate(p);
	return p->loss_ppm / 1e6;
}

static double oneway_var_ms2(const struct link_params *p)
{
	double j = p->jitter_us / 1000.0;
	if (p->dist == LINK_DIST_NONE || p->dist == LINK_DIST_UNIFORM) {
		/* netem reduces the correlated 32-bit value modulo 2*jitter (ns), which spreads it
		 * uniformly again: the correlation leaves the spread as it is. */
		return j * j / 3.0;
	}
	double sd = dist_sd(p->dist) * j;
	return sd * sd;
}

/* Fraction of packets netem sends at once instead of delaying them ("reorder"): after each
 * such packet the next gap - 1 are delayed, then each goes at once with probability r, so one
 * cycle lasts gap - 1 + 1/r packets on average (tc makes a missing gap 1). */
double link_verdict_reorder_fraction(const struct link_params *p)
{
	double r = p->reorder_ppm / 1e6, gap = p->gap ? p->gap : 1;

	if (r <= 0)
		return 0;
	return r / (1 + (gap - 1) * r);
}

void link_verdict_expect_from(const struct link_params *up, const struct link_params *down,
			   struct link_verdict_expect *out)
{
	const struct link_params *d[2] = { up, down };
	double keep = 1, var = 0;
	memset(out, 0, sizeof *out);
	for (int i = 0; i < 2; i++) {
		if (!d[i])
			continue;
		/* A mixture: fraction f leaves at once (delay 0), the rest sees delay + jitter. */
		double f = link_verdict_reorder_fraction(d[i]), mu = d[i]->delay_us / 1000.0;
		double var1 = oneway_var_ms2(d[i]), mean = (1 - f) * mu;

		out->rtt_mean_ms += mean;
		var += (1 - f) * (var1 + mu * mu) - mean * mean;
		/* A corrupted probe fails the receiver's checksum: to the probe it is lost. */
		keep *= (1 - oneway_loss(d[i])) * (1 - d[i]->corrupt_ppm / 1e6);
		if (d[i]->jitter_us / 1000.0 > out->jitter_ms)
			out->jitter_ms = d[i]->jitter_us / 1000.0;
	}
	out->rtt_sd_ms = sqrt(var);
	out->loss = 1 - keep;
}

void link_verdict_loss_interval(double p, uint32_t n, double *lo, double *hi)
{
	const double tail = 0.0005;
	if (n == 0) {
		*lo = 0;
		*hi = 1;
		return;
	}
	if (p <= 0 || p >= 1) {
		*lo = *hi = p <= 0 ? 0 : 1;
		return;
	}
	/* Walk the pmf (log space: lgamma) accumulating the CDF. */
	double cdf = 0, lp = log(p), lq = log1p(-p), lgn = lgamma((double)n + 1);
	uint32_t klo = 0, khi = n;
	bool have_lo = false;
	for (uint32_t k = 0; k <= n; k++) {
		double pmf = exp(lgn - lgamma((double)k + 1) - lgamma((double)(n - k) + 1) + k * lp +
				 (double)(n - k) * lq);
		cdf += pmf;
		if (!have_lo && cdf > tail) {
			klo = k;
			have_lo = true;
		}
		if (cdf >= 1 - tail) {
			khi = k;
			break;
		}
	}
	*lo = (double)klo / n;
	*hi = (double)khi / n;
}

bool link_verdict_verdict(const struct link_verdict_expect *e, uint32_t probes, double rtt_mean_ms,
		       double rtt_sd_ms, double loss, char *why, size_t whylen)
{
	char dummy[8];
	if (!why) {
		why = dummy;
		whylen = sizeof dummy;
	}
	why[0] = '\0';
	/* 3.29 standard errors: the two-sided 99.9% band of a mean of `probes` samples */
	double n = probes > 1 ? (double)probes : 2.0;
	double tol = fmax(fmax(0.5, 0.02 * e->rtt_mean_ms), 3.29 * e->rtt_sd_ms / sqrt(n));
	double sd_tol = fmax(0.15, 3.29 / sqrt(2.0 * (n - 1)));
	if (!(fabs(rtt_mean_ms - e->rtt_mean_ms) <= tol)) {
		snprintf(why, whylen, "rtt mean %.3f ms, expected %.3f +- %.3f", rtt_mean_ms,
			 e->rtt_mean_ms, tol);
		return false;
	}
	if (e->jitter_ms >= 2.0 && !(fabs(rtt_sd_ms - e->rtt_sd_ms) <= sd_tol * e->rtt_sd_ms)) {
		snprintf(why, whylen, "rtt sd %.3f ms, expected %.3f +- %.0f%%", rtt_sd_ms, e->rtt_sd_ms,
			 100 * sd_tol);
		return false;
	}
	double lo, hi;
	link_verdict_loss_interval(e->loss, probes, &lo, &hi);
	if (!(loss >= lo - 1e-12 && loss <= hi + 1e-12)) {
		snprintf(why, whylen, "loss %.4f outside [%.4f, %.4f]", loss, lo, hi);
		return false;
	}
	return true;
}

const char *link_verdict_with_late(bool ok, double late_p99_ms)
{
	if (late_p99_ms > LINK_VERDICT_LATE_MS) /* false for NAN */
		return "late";
	return ok ? "ok" : "off";
}

int link_verdict_csv_row(char *buf, size_t len, const char *node, const char *direction,
		      uint32_t probes, const struct link_params *cfg, const struct link_verdict_expect *e,
		      double rtt_mean_ms, double rtt_sd_ms, double loss, double late_p99_ms)
{
	bool ok = link_verdict_verdict(e, probes, rtt_mean_ms, rtt_sd_ms, loss, NULL, 0);
	char late[32] = "";

	if (!isnan(late_p99_ms))
		snprintf(late, sizeof late, "%.3f", late_p99_ms);
	return snprintf(buf, len, "%s,%s,%u,%.3f,%.3f,%.6f,%.3f,%.3f,%.6f,%s,%s", node, direction, probes,
			cfg->delay_us / 1000.0, cfg->jitter_us / 1000.0, oneway_loss(cfg), rtt_mean_ms,
			rtt_sd_ms, loss, late, link_verdict_with_late(ok, late_p99_ms));
}
