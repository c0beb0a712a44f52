/* lib/link_params: validation and text form of struct link_params.
 *
 * The text form (key=value tokens, the struct's own field names) is what the orchestrator sends
 * to stalenet-linkd and what linkd's configuration file holds, so one parser serves both and a
 * field added to the struct needs one line in the table below. */
#include "lib/link_params.h"
#include "lib/limits.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DELAY_US (60u * 1000u * 1000u)

const char *link_params_validate(const struct link_params *p)
{
	if (p->delay_us > MAX_DELAY_US)
		return "delay must be at most 60 s";
	if (p->jitter_us > MAX_DELAY_US)
		return "jitter must be at most 60 s";
	const uint32_t ppm[] = { p->delay_corr_ppm, p->loss_ppm, p->loss_corr_ppm, p->ge_p_ppm,
				 p->ge_r_ppm, p->ge_1h_ppm, p->ge_1k_ppm, p->dup_ppm, p->dup_corr_ppm,
				 p->reorder_ppm, p->reorder_corr_ppm, p->corrupt_ppm,
				 p->corrupt_corr_ppm };
	for (size_t i = 0; i < sizeof ppm / sizeof ppm[0]; i++)
		if (ppm[i] > LINK_PPM_MAX)
			return "a probability must be between 0% and 100%";
	if ((unsigned)p->dist > LINK_DIST_PARETONORMAL)
		return "unknown delay distribution";
	if (p->dist != LINK_DIST_NONE && p->jitter_us == 0)
		return "a delay distribution needs jitter";
	if (p->delay_corr_ppm && p->jitter_us == 0)
		return "delay correlation needs jitter";
	if (p->reorder_ppm && p->delay_us == 0)
		return "reordering needs a delay (reorder sends some packets early)";
	if (p->gap && p->reorder_ppm == 0)
		return "gap needs reorder";
	if (p->reorder_corr_ppm && p->reorder_ppm == 0)
		return "reorder correlation needs reorder";
	if (p->dup_corr_ppm && p->dup_ppm == 0)
		return "duplicate correlation needs duplicate";
	if (p->corrupt_corr_ppm && p->corrupt_ppm == 0)
		return "corrupt correlation needs corrupt";
	if (p->loss_model == LINK_LOSS_RANDOM) {
		if (p->loss_corr_ppm && p->loss_ppm == 0)
			return "loss correlation needs loss";
		if (p->ge_p_ppm || p->ge_r_ppm || p->ge_1h_ppm || p->ge_1k_ppm)
			return "Gilbert-Elliott parameters need loss model gemodel";
	} else if (p->loss_model == LINK_LOSS_GEMODEL) {
		if (p->loss_ppm || p->loss_corr_ppm)
			return "loss model gemodel takes p, r, 1-h, 1-k instead of a loss rate";
		if (p->ge_p_ppm == 0)
			return "gemodel needs p > 0";
	} else {
		return "unknown loss model";
	}
	if (p->rate_bps && p->rate_bps < 8000)
		return "rate must be at least 8 kbit/s";
	if (p->rate_bps > LIMITS_MAX_RATE_BPS)
		return "rate above LIMITS_MAX_RATE_BPS (what the kernel's TBF takes through libnl)";
	return NULL;
}

/* Field table: name, offset, width (4 or 8 bytes). Enums are stored as uint32-sized ints. */
struct field {
	const char *name;
	size_t off;
	unsigned width;
};
#define F32(x) { #x, offsetof(struct link_params, x), 4 }
static const struct field FIELDS[] = {
	F32(delay_us), F32(jitter_us), F32(dist), F32(delay_corr_ppm), F32(loss_model),
	F32(loss_ppm), F32(loss_corr_ppm), F32(ge_p_ppm), F32(ge_r_ppm), F32(ge_1h_ppm),
	F32(ge_1k_ppm), F32(dup_ppm), F32(dup_corr_ppm), F32(reorder_ppm), F32(reorder_corr_ppm),
	F32(gap), F32(corrupt_ppm), F32(corrupt_corr_ppm),
	{ "rate_bps", offsetof(struct link_params, rate_bps), 8 }, F32(limit_pkts), F32(set),
};
_Static_assert(sizeof(enum link_dist) == 4 && sizeof(enum link_loss_model) == 4, "enum width");

static uint64_t field_get(const struct link_params *p, const struct field *f)
{
	const char *base = (const char *)p + f->off;
	if (f->width == 8) {
		uint64_t v;
		memcpy(&v, base, 8);
		return v;
	}
	uint32_t v;
	memcpy(&v, base, 4);
	return v;
}

int link_params_format(const struct link_params *p, char *buf, size_t len)
{
	size_t used = 0;
	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < sizeof FIELDS / sizeof FIELDS[0]; i++) {
		uint64_t v = field_get(p, &FIELDS[i]);
		if (v == 0)
			continue;
		int n = snprintf(used < len ? buf + used : NULL, used < len ? len - used : 0,
				 "%s%s=%" PRIu64, used ? " " : "", FIELDS[i].name, v);
		if (n < 0)
			return -EINVAL;
		used += (size_t)n;
	}
	return (int)used;
}

int link_params_parse_token(struct link_params *p, const char *token)
{
	const char *eq = strchr(token, '=');
	if (!eq)
		return -EINVAL;
	size_t klen = (size_t)(eq - token);
	for (size_t i = 0; i < sizeof FIELDS / sizeof FIELDS[0]; i++) {
		const struct field *f = &FIELDS[i];
		if (strlen(f->name) != klen || strncmp(f->name, token, klen) != 0)
			continue;
		char *end = NULL;
		errno = 0;
		unsigned long long v = strtoull(eq + 1, &end, 10);
		if (errno || end == eq + 1 || *end != '\0' || eq[1] == '-')
			return -EINVAL;
		char *base = (char *)p + f->off;
		if (f->width == 8) {
			uint64_t v64 = v;
			memcpy(base, &v64, 8);
		} else {
			if (v > UINT32_MAX)
				return -EINVAL;
			uint32_t v32 = (uint32_t)v;
			memcpy(base, &v32, 4);
		}
		return 0;
	}
	return -ENOENT;
}

const char *link_params_dist_name(enum link_dist dist)
{
	switch (dist) {
	case LINK_DIST_NONE: return "none";
	case LINK_DIST_UNIFORM: return "uniform";
	case LINK_DIST_NORMAL: return "normal";
	case LINK_DIST_PARETO: return "pareto";
	case LINK_DIST_PARETONORMAL: return "paretonormal";
	}
	return "?";
}
