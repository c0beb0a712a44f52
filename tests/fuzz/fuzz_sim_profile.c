/* libFuzzer target: the calibration profile that `simulation.profile` names (sim/sim_profile,
 * lib/kv text written by `stalenet calibrate`, but read from wherever the scenario points).
 * Must never crash, hang or leak. A profile that loads answers for every worker it names:
 * SIM_PROFILE_Q finite, non-negative, non-decreasing quantiles, and a draw at any u in [0, 1)
 * lies between the first and last quantile and never decreases as u grows. */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/kv.h"
#include "lib/log.h"
#include "sim/sim_profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_table(const double *q)
{
	double prev = -1;

	if (!q)
		abort();
	for (int k = 0; k < SIM_PROFILE_Q; k++)
		if (!isfinite(q[k]) || q[k] < 0 || (k && q[k] < q[k - 1]))
			abort();
	for (int i = 0; i <= 64; i++) {
		double u = i < 64 ? i / 64.0 : nextafter(1.0, 0.0);
		double d = sim_profile_draw(q, u);

		if (!(d >= q[0] && d <= q[SIM_PROFILE_Q - 1]) || d < prev)
			abort();
		prev = d;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int quiet = -1;
	char err[512];
	struct sim_profile *p;
	struct kv *kv;

	if (quiet < 0) { /* kv logs refusals; keep the run quiet */
		quiet = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (quiet >= 0)
			log_set_fd(quiet);
	}
	err[0] = 0;
	p = sim_profile_parse((const char *)data, size, "fuzz.profile", err, sizeof err);
	if (!p) {
		if (!err[0])
			abort(); /* a refusal says why */
		return 0;
	}
	kv = kv_parse((const char *)data, size, "fuzz.profile", err, sizeof err);
	if (!kv)
		abort(); /* the profile parsed, so its text does */
	for (size_t i = 0; i < kv_count(kv); i++) {
		const char *key, *val, *dot;
		char name[256];

		kv_entry(kv, i, &key, &val);
		dot = strrchr(key, '.');
		if (!dot || (size_t)(dot - key) >= sizeof name - 32)
			continue;
		memcpy(name, key, (size_t)(dot - key));
		name[dot - key] = 0;
		if (!strcmp(dot, ".compute_s"))
			check_table(sim_profile_compute(p, name));
		else if (!strcmp(dot, ".transfer_s"))
			check_table(sim_profile_transfer(p, name));
	}
	/* a worker the profile does not name: the pooled table or nothing */
	if (sim_profile_compute(p, "no-such-worker"))
		check_table(sim_profile_compute(p, "no-such-worker"));
	kv_destroy(&kv);
	sim_profile_destroy(&p);
	return 0;
}
