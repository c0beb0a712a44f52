/* node/linkcheck: one row of linkcheck.csv and its verdict against the configured link.
 *
 * Tolerances (the project's fidelity targets): mean within max(0.5 ms, 2%) of the configured
 * delay; sd within 15% of the configured spread when jitter >= 2 ms; loss within the 99.9%
 * binomial interval of the configured rate over the packets that were sent. For `up` and `down`
 * rows the rtt_* columns hold one-way delays (exact: all namespaces share CLOCK_MONOTONIC); the
 * `rtt` row holds the round trip. */
#ifndef STALENET_LINKCHECK_H
#define STALENET_LINKCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LINKCHECK_CSV_HEADER \
	"node,direction,probes,cfg_delay_ms,cfg_jitter_ms,cfg_loss,rtt_mean_ms,rtt_sd_ms,loss,verdict"

struct linkcheck_row {
	const char *direction;          /* up | down | rtt */
	uint64_t probes, received;      /* packets that entered the link / came out */
	double cfg_delay_ms, cfg_jitter_ms, cfg_loss;
	const char *cfg_dist;           /* delay distribution name, NULL = normal */
	double mean_ms, sd_ms;
	bool verdict_off;               /* filled by linkcheck_row_format */
};

/* Expected sd of the delay for a jitter and distribution (uniform: jitter / sqrt 3). */
double linkcheck_expected_sd_ms(double jitter_ms, const char *dist);

/* True when measured values are within the tolerances above. reason (may be NULL) says why not. */
bool linkcheck_ok(const struct linkcheck_row *r, char *reason, size_t reasonlen);

/* Format the CSV row (without newline) for node into buf and set r->verdict_off. */
void linkcheck_row_format(struct linkcheck_row *r, const char *node, char *buf, size_t buflen);

#endif
