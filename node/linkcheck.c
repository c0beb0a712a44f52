/* node/linkcheck: see linkcheck.h. */
#include "node/linkcheck.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Two-sided 99.9% normal quantile. */
#define LINKCHECK_Z999 3.2905

double linkcheck_expected_sd_ms(double jitter_ms, const char *dist)
{
	if (dist && !strcmp(dist, "uniform"))
		return jitter_ms / sqrt(3.0);
	return jitter_ms;
}

bool linkcheck_ok(const struct linkcheck_row *r, char *reason, size_t reasonlen)
{
	double tol = fmax(0.5, 0.02 * r->cfg_delay_ms);
	double exp_sd = linkcheck_expected_sd_ms(r->cfg_jitter_ms, r->cfg_dist);
	double n = (double)r->probes, lost = n - (double)r->received;
	double p = r->cfg_loss;

	if (reason && reasonlen)
		reason[0] = '\0';
	if (r->received == 0) {
		if (reason)
			snprintf(reason, reasonlen, "nothing came through");
		return false;
	}
	if (fabs(r->mean_ms - r->cfg_delay_ms) > tol) {
		if (reason)
			snprintf(reason, reasonlen, "mean %.3f ms vs %.3f ms configured", r->mean_ms, r->cfg_delay_ms);
		return false;
	}
	if (r->cfg_jitter_ms >= 2.0 && fabs(r->sd_ms - exp_sd) > 0.15 * exp_sd) {
		if (reason)
			snprintf(reason, reasonlen, "sd %.3f ms vs %.3f ms expected", r->sd_ms, exp_sd);
		return false;
	}
	/* Binomial interval with a continuity correction of one packet. */
	if (fabs(lost - n * p) > LINKCHECK_Z999 * sqrt(n * p * (1.0 - p)) + 1.0) {
		if (reason)
			snprintf(reason, reasonlen, "loss %.4f vs %.4f configured", lost / n, p);
		return false;
	}
	return true;
}

void linkcheck_row_format(struct linkcheck_row *r, const char *node, char *buf, size_t buflen)
{
	double loss = r->probes ? 1.0 - (double)r->received / (double)r->probes : 0.0;

	r->verdict_off = !linkcheck_ok(r, NULL, 0);
	snprintf(buf, buflen, "%s,%s,%llu,%.3f,%.3f,%.6f,%.4f,%.4f,%.6f,%s", node, r->direction,
		 (unsigned long long)r->probes, r->cfg_delay_ms, r->cfg_jitter_ms, r->cfg_loss, r->mean_ms,
		 r->sd_ms, loss, r->verdict_off ? "off" : "ok");
}
