/* lib/clocksync: one host's clock against another's, from NTP-style timestamp exchanges. Pure
 * arithmetic: no I/O, no clock reading (the caller stamps and carries the exchanges).
 *
 * One exchange: the local side stamps t1 and sends; the remote side stamps t2 on receipt and t3
 * when it answers; the local side stamps t4 on receipt (t1, t4 on the local clock; t2, t3 on the
 * remote one). As in NTP (RFC 5905, section 8), the offset remote - local is
 *     theta = ((t2 - t1) + (t3 - t4)) / 2      and the round trip   delta = (t4 - t1) - (t3 - t2).
 * Whatever the split of delta between the two directions, the true offset lies within
 * theta +- delta / 2, so the exchanges with the smallest round trip say the most: queueing and
 * scheduling only ever add delay. The estimate keeps the exchanges whose round trip is at most
 * twice the smallest (at least the CLOCKSYNC_MIN_KEEP fastest), fits offset = a + drift * (t - ref) through them by least squares
 * (ref = the mean local midpoint; the drift only when the kept exchanges span at least
 * CLOCKSYNC_DRIFT_SPAN_NS, else it is taken as 0 and the offset is their mean), and bounds its error at the samples by
 *     max_i ( |fit(t_i) - theta_i| + delta_i / 2 ),
 * which contains the truth at every kept sample when the true offset is linear in time over the
 * window (a drift that changes within it shows up as residuals and widens the bound). Away from
 * the window the error grows by the drift's own uncertainty; callers refresh the estimate. */
#ifndef STALENET_CLOCKSYNC_H
#define STALENET_CLOCKSYNC_H

#include <stddef.h>
#include <stdint.h>

#define CLOCKSYNC_MIN_KEEP 3            /* exchanges kept by the filter, at least (if given) */
#define CLOCKSYNC_MAX_SAMPLES 100000
#define CLOCKSYNC_DRIFT_SPAN_NS 1000000000ll   /* kept exchanges spanning less: drift 0 */
#define CLOCKSYNC_MAX_OFFSET_NS (1ll << 61)    /* |t2 - t1|, |t3 - t4| beyond (73 years): refused */

struct clocksync_sample {
	int64_t t1_ns, t2_ns, t3_ns, t4_ns;   /* see above */
};

struct clocksync_estimate {
	int64_t ref_ns;         /* local time the offset is given at */
	int64_t offset_ns;      /* remote - local at ref_ns */
	double drift_ppm;       /* d(remote - local)/d(local), parts per million */
	int64_t bound_ns;       /* |error| of the offset over the kept exchanges, at most */
	int64_t min_delay_ns;   /* the smallest round trip seen */
	size_t used;            /* exchanges kept by the filter */
};

/* Offset (remote - local) and round trip of one exchange. Returns 0, or -EINVAL when the
 * stamps are impossible (t4 < t1, t3 < t2, the remote time exceeds the round trip, or the
 * clocks are more than CLOCKSYNC_MAX_OFFSET_NS apart). Any stamps are safe to pass. */
int clocksync_sample_eval(const struct clocksync_sample *s, int64_t *offset_ns, int64_t *delay_ns);

/* Estimate from n exchanges (invalid ones are skipped). Returns 0, -EINVAL when no exchange is
 * valid or n > CLOCKSYNC_MAX_SAMPLES, -ENOMEM. */
int clocksync_estimate(const struct clocksync_sample *s, size_t n, struct clocksync_estimate *out);

/* remote - local at local time local_ns, by the estimate's line. */
int64_t clocksync_offset_at(const struct clocksync_estimate *e, int64_t local_ns);

/* A remote timestamp mapped onto the local clock. */
int64_t clocksync_to_local(const struct clocksync_estimate *e, int64_t remote_ns);

#endif
