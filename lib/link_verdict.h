/* lib/link_verdict: is a link doing what it was configured to do? Pure verdict for linkcheck.csv.
 *
 * A probe measures round trips (userspace timestamps: the kernel stamps before the NFQUEUE delay)
 * over one node's link; the expectation combines both directions' parameters. Tolerances:
 * mean RTT within max(0.5 ms, 2%, 3.29 standard errors of the mean) of the expected mean; RTT sd
 * within max(15%, 3.29 / sqrt(2 (n - 1))) of the expected sd when the larger jitter is >= 2 ms;
 * loss inside the two-sided 99.9% binomial interval of the expected rate for that many probes. The
 * sampling terms keep a correct link from failing by chance when few probes meet much jitter.
 *
 * Lateness: the emulator (or, for the kernel backend, the host's timers as measured before the
 * run) may release packets later than scheduled. A direction whose p99 release lateness is over
 * LINK_VERDICT_LATE_MS gets the verdict "late" whatever its averages say: 1% of its packets
 * carry an error larger than the finest delay difference an experiment may study, and a link
 * that fails the rules on such a host fails because of it. Otherwise "ok" or "off". */
#ifndef STALENET_LINK_VERDICT_H
#define STALENET_LINK_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/link_params.h"

#define LINK_VERDICT_CSV_HEADER \
	"node,direction,probes,cfg_delay_ms,cfg_jitter_ms,cfg_loss,rtt_mean_ms,rtt_sd_ms,loss,late_p99_ms,verdict"

/* p99 release lateness (ms) above which a direction's verdict is "late". */
#define LINK_VERDICT_LATE_MS 0.5

struct link_verdict_expect {
	double rtt_mean_ms;   /* sum of both one-way delays */
	double rtt_sd_ms;     /* sqrt of the sum of both delay variances */
	double jitter_ms;     /* larger configured jitter: the sd rule applies from 2 ms */
	double loss;          /* round-trip loss fraction 1 - (1 - l_up)(1 - l_down) */
};

/* Fraction of a direction's packets that netem's reorder sends at once (undelayed):
 * r / (1 + (gap - 1) r), 0 without reorder. */
double link_verdict_reorder_fraction(const struct link_params *p);

/* The stationary loss rate of p's Gilbert-Elliott model (fraction, 0..1):
 * pi_bad * (1 - h) + (1 - pi_bad) * (1 - k) in netem's terms, pi_bad = p / (p + r). */
double link_verdict_ge_loss_rate(const struct link_params *p);

/* Expected round-trip statistics of a probe crossing `up` then `down` (either may be NULL =
 * unshaped). Uniform jitter j has sd j/sqrt(3); table jitter sd j; Gilbert-Elliott loss is its
 * stationary rate; corrupted packets count as lost (the receiver's checksum drops them);
 * reordered packets (link_verdict_reorder_fraction) arrive undelayed, so each direction is a
 * mixture of delay 0 and delay + jitter. */
void link_verdict_expect_from(const struct link_params *up, const struct link_params *down,
			   struct link_verdict_expect *out);

/* Two-sided 99.9% interval [*lo, *hi] (as fractions) of the loss fraction measured over n
 * probes when the true rate is p (exact binomial quantiles). */
void link_verdict_loss_interval(double p, uint32_t n, double *lo, double *hi);

/* The verdict: true = "ok". When why is non-NULL it receives the first failed rule (or ""). */
bool link_verdict_verdict(const struct link_verdict_expect *e, uint32_t probes, double rtt_mean_ms,
		       double rtt_sd_ms, double loss, char *why, size_t whylen);

/* The verdict text with lateness taken into account: "late" when late_p99_ms exceeds
 * LINK_VERDICT_LATE_MS, else "ok" when ok, else "off". late_p99_ms NAN = not measured. */
const char *link_verdict_with_late(bool ok, double late_p99_ms);

/* One linkcheck.csv line (no newline) for a node/direction with configured one-way values;
 * late_p99_ms NAN leaves that field empty (filled in later by whoever measured it).
 * Returns the snprintf length. */
int link_verdict_csv_row(char *buf, size_t len, const char *node, const char *direction,
		      uint32_t probes, const struct link_params *cfg, const struct link_verdict_expect *e,
		      double rtt_mean_ms, double rtt_sd_ms, double loss, double late_p99_ms);

#endif
