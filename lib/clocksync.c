/* lib/clocksync: see clocksync.h. Arithmetic in int64 nanoseconds where exact, double for the
 * fit (spans of hours in ns fit a double's 53 bits to well under a nanosecond). */
#include "lib/clocksync.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

struct row {
	int64_t t_ns;           /* local midpoint (t1 + t4) / 2 */
	int64_t theta_ns;
	int64_t delta_ns;
};

/* a - b and a + b, saturated to int64's range: the times mapped may be a remote side's */
static int64_t sat_sub(int64_t a, int64_t b)
{
	int64_t r;
	return !__builtin_sub_overflow(a, b, &r) ? r : b < 0 ? INT64_MAX : INT64_MIN;
}

static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;
	return !__builtin_add_overflow(a, b, &r) ? r : b > 0 ? INT64_MAX : INT64_MIN;
}

/* a double of any size to int64, saturated (a plain cast of one beyond the range is undefined) */
static int64_t sat_round(double v)
{
	if (!(v == v))
		return 0;
	if (v >= 0x1p63)
		return INT64_MAX;
	if (v <= -0x1p63)
		return INT64_MIN;
	return (int64_t)llround(v);
}

int clocksync_sample_eval(const struct clocksync_sample *s, int64_t *offset_ns, int64_t *delay_ns)
{
	int64_t local, remote, out, back, delta;

	/* t2 and t3 come off the wire and may be any two numbers: every difference is checked
	 * for overflow, and an offset beyond CLOCKSYNC_MAX_OFFSET_NS is refused, so that the
	 * estimate's sums and differences of offsets stay inside int64 */
	if (s->t4_ns < s->t1_ns || s->t3_ns < s->t2_ns || __builtin_sub_overflow(s->t4_ns, s->t1_ns, &local) ||
	    __builtin_sub_overflow(s->t3_ns, s->t2_ns, &remote) || __builtin_sub_overflow(s->t2_ns, s->t1_ns, &out) ||
	    __builtin_sub_overflow(s->t3_ns, s->t4_ns, &back))
		return -EINVAL;
	delta = local - remote;
	if (delta < 0 || out > CLOCKSYNC_MAX_OFFSET_NS || out < -CLOCKSYNC_MAX_OFFSET_NS ||
	    back > CLOCKSYNC_MAX_OFFSET_NS || back < -CLOCKSYNC_MAX_OFFSET_NS)
		return -EINVAL;
	/* halves first: no overflow for any stamps of a monotonic clock */
	*offset_ns = out / 2 + back / 2 + (out % 2 + back % 2) / 2;
	*delay_ns = delta;
	return 0;
}

static int by_delta(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	return (x->delta_ns > y->delta_ns) - (x->delta_ns < y->delta_ns);
}

int clocksync_estimate(const struct clocksync_sample *s, size_t n, struct clocksync_estimate *out)
{
	struct row *r;
	size_t m = 0;

	if (!n || n > CLOCKSYNC_MAX_SAMPLES)
		return -EINVAL;
	if (!(r = calloc(n, sizeof *r)))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int64_t th, de;
		if (clocksync_sample_eval(&s[i], &th, &de))
			continue;
		r[m].t_ns = s[i].t1_ns + (s[i].t4_ns - s[i].t1_ns) / 2;
		r[m].theta_ns = th;
		r[m].delta_ns = de;
		m++;
	}
	if (!m) {
		free(r);
		return -EINVAL;
	}
	qsort(r, m, sizeof *r, by_delta);
	size_t keep = 0;
	while (keep < m && r[keep].delta_ns - r[0].delta_ns <= r[0].delta_ns)
		keep++;
	if (keep < CLOCKSYNC_MIN_KEEP)
		keep = m < CLOCKSYNC_MIN_KEEP ? m : CLOCKSYNC_MIN_KEEP;

	/* least squares of theta on t around the mean t (centred, so the sums stay small) */
	int64_t t0 = r[0].t_ns;
	double mt = 0, mth = 0;
	for (size_t i = 0; i < keep; i++) {
		mt += (double)(r[i].t_ns - t0);
		mth += (double)(r[i].theta_ns - r[0].theta_ns);
	}
	mt /= (double)keep;
	mth /= (double)keep;
	double sxx = 0, sxy = 0;
	for (size_t i = 0; i < keep; i++) {
		double dx = (double)(r[i].t_ns - t0) - mt;
		double dy = (double)(r[i].theta_ns - r[0].theta_ns) - mth;
		sxx += dx * dx;
		sxy += dx * dy;
	}
	/* a drift fitted over less than CLOCKSYNC_DRIFT_SPAN_NS is mostly the stamps' noise */
	int64_t lo = r[0].t_ns, hi = r[0].t_ns;
	for (size_t i = 1; i < keep; i++) {
		lo = r[i].t_ns < lo ? r[i].t_ns : lo;
		hi = r[i].t_ns > hi ? r[i].t_ns : hi;
	}
	double slope = sxx > 0 && hi - lo >= CLOCKSYNC_DRIFT_SPAN_NS ? sxy / sxx : 0;
	out->ref_ns = t0 + sat_round(mt);
	out->offset_ns = sat_add(r[0].theta_ns, sat_round(mth + slope * ((double)(out->ref_ns - t0) - mt)));
	out->drift_ppm = slope * 1e6;
	out->min_delay_ns = r[0].delta_ns;
	out->used = keep;
	double bound = 0;
	for (size_t i = 0; i < keep; i++) {
		double fit = (double)out->offset_ns + slope * (double)(r[i].t_ns - out->ref_ns);
		double e = fabs(fit - (double)r[i].theta_ns) + (double)r[i].delta_ns / 2;
		if (e > bound)
			bound = e;
	}
	out->bound_ns = sat_add(sat_round(ceil(bound)), 1);      /* +1: the halving's rounding */
	free(r);
	return 0;
}

int64_t clocksync_offset_at(const struct clocksync_estimate *e, int64_t local_ns)
{
	return sat_add(e->offset_ns, sat_round(e->drift_ppm * 1e-6 * (double)sat_sub(local_ns, e->ref_ns)));
}

int64_t clocksync_to_local(const struct clocksync_estimate *e, int64_t remote_ns)
{
	/* remote = local + offset(local); one fixed-point step is exact to well under 1 ns for
	 * drifts of ppm size */
	int64_t local = sat_sub(remote_ns, e->offset_ns);
	return sat_sub(remote_ns, clocksync_offset_at(e, local));
}
