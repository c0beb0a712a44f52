/* libFuzzer target: the clock estimate of lib/clocksync from exchanges whose remote stamps came
 * off the wire. Input: records of 32 bytes (t1, t2, t3, t4 as little-endian int64). The remote
 * stamps t2 and t3 are taken as they are (a hostile or broken agent can answer any two
 * numbers); the local ones are made what CLOCK_MONOTONIC gives: t1 in [0, 2^62), t4 no earlier
 * than t1 and at most 2^40 ns (18 min) later. Must never crash or hit undefined behaviour. An
 * estimate exists exactly when one exchange evaluates; it keeps at most n exchanges, its bound
 * is positive; mapping a time back and forth
 * stays within the rounding plus drift^2 times the distance from the reference. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clocksync.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return (int64_t)v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t n = size / 32;
	struct clocksync_sample *s;
	struct clocksync_estimate e;
	int64_t th, de, min_delay = INT64_MAX;
	size_t valid = 0;

	if (!n || n > 4096)
		return 0;
	s = calloc(n, sizeof *s);
	if (!s)
		abort();
	for (size_t i = 0; i < n; i++) {
		const uint8_t *p = data + 32 * i;

		s[i].t1_ns = (int64_t)((uint64_t)get64(p) & ((1ull << 62) - 1));
		s[i].t2_ns = get64(p + 8);
		s[i].t3_ns = get64(p + 16);
		s[i].t4_ns = s[i].t1_ns + (int64_t)((uint64_t)get64(p + 24) & ((1ull << 40) - 1));
		if (clocksync_sample_eval(&s[i], &th, &de) == 0) {
			if (de < 0 || de > s[i].t4_ns - s[i].t1_ns)
				abort();
			valid++;
			min_delay = de < min_delay ? de : min_delay;
		}
	}
	int rc = clocksync_estimate(s, n, &e);
	if ((rc == 0) != (valid > 0))
		abort();
	if (rc == 0) {
		if (e.used < 1 || e.used > valid || e.bound_ns < 1 || e.min_delay_ns != min_delay)
			abort();
		(void)clocksync_offset_at(&e, s[0].t1_ns);
		(void)clocksync_to_local(&e, s[0].t2_ns);
		if (e.drift_ppm > -1000 && e.drift_ppm < 1000 && e.ref_ns >= 0 && e.ref_ns < (1ll << 62) &&
		    e.offset_ns > -(1ll << 61) && e.offset_ns < (1ll << 61)) {
			int64_t local = s[0].t1_ns, remote = local + clocksync_offset_at(&e, local);
			int64_t back = clocksync_to_local(&e, remote);

			double d = e.drift_ppm * 1e-6, span = (double)local - (double)e.ref_ns;
			double tol = 3 + 2 * d * d * (span < 0 ? -span : span);

			if ((double)(back - local) > tol || (double)(local - back) > tol)
				abort();
		}
	}
	free(s);
	return 0;
}
