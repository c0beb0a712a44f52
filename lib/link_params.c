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

/* Field table: name, offset, width (4 or 8 bytes), the largest value a token may carry (the
 * same ranges link_params_validate enforces, so a line read from another host or a file is
 * range-checked field by field even where the reader does not validate the whole). Enums are
 * stored as uint32-sized ints. */
struct field {
	const char *name;
	size_t off;
	unsigned width;
	uint64_t max;
};
#define MAX_LIMIT_PKTS 1000000u         /* what the scenario's `limit` takes */
#define ALL_FIELD_BITS ((uint32_t)LINK_F_CORRUPT_CORR * 2u - 1u)
#define F32(x, m) { #x, offsetof(struct link_params, x), 4, m }
static const struct field FIELDS[] = {
	F32(delay_us, MAX_DELAY_US), F32(jitter_us, MAX_DELAY_US), F32(dist, LINK_DIST_PARETONORMAL),
	F32(delay_corr_ppm, LINK_PPM_MAX), F32(loss_model, LINK_LOSS_GEMODEL),
	F32(loss_ppm, LINK_PPM_MAX), F32(loss_corr_ppm, LINK_PPM_MAX), F32(ge_p_ppm, LINK_PPM_MAX),
	F32(ge_r_ppm, LINK_PPM_MAX), F32(ge_1h_ppm, LINK_PPM_MAX), F32(ge_1k_ppm, LINK_PPM_MAX),
	F32(dup_ppm, LINK_PPM_MAX), F32(dup_corr_ppm, LINK_PPM_MAX), F32(reorder_ppm, LINK_PPM_MAX),
	F32(reorder_corr_ppm, LINK_PPM_MAX), F32(gap, UINT32_MAX), F32(corrupt_ppm, LINK_PPM_MAX),
	F32(corrupt_corr_ppm, LINK_PPM_MAX),
	{ "rate_bps", offsetof(struct link_params, rate_bps), 8, LIMITS_MAX_RATE_BPS },
	F32(limit_pkts, MAX_LIMIT_PKTS), F32(set, ALL_FIELD_BITS),
};
#define N_FIELDS (sizeof FIELDS / sizeof FIELDS[0])
_Static_assert(N_FIELDS <= 32, "link_params_parse_token's seen mask has one bit per field");
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
	for (size_t i = 0; i < N_FIELDS; i++) {
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

/* s, all of it, in the canonical decimal form: digits only (no sign, no space), no leading zero
 * unless the number is 0, at most max. */
static int canonical_number(const char *s, uint64_t max, uint64_t *v)
{
	uint64_t x = 0;
	size_t n = 0;

	for (; s[n]; n++) {
		unsigned d = (unsigned char)s[n] - '0';
		if (d > 9 || d > max || x > (max - d) / 10 || (n == 1 && s[0] == '0'))
			return -EINVAL;
		x = x * 10 + d;
	}
	if (n == 0)
		return -EINVAL;
	*v = x;
	return 0;
}

int link_params_parse_token(struct link_params *p, const char *token, uint32_t *seen)
{
	const char *eq = strchr(token, '=');
	if (!eq)
		return -EINVAL;
	size_t klen = (size_t)(eq - token);
	for (size_t i = 0; i < N_FIELDS; i++) {
		const struct field *f = &FIELDS[i];
		if (strlen(f->name) != klen || strncmp(f->name, token, klen) != 0)
			continue;
		if (*seen & (1u << i))
			return -EEXIST;
		uint64_t v;
		if (canonical_number(eq + 1, f->max, &v) < 0)
			return -EINVAL;
		char *base = (char *)p + f->off;
		if (f->width == 8) {
			memcpy(base, &v, 8);
		} else {
			uint32_t v32 = (uint32_t)v;   /* every 4-byte field's max fits */
			memcpy(base, &v32, 4);
		}
		*seen |= 1u << i;
		return 0;
	}
	return -ENOENT;
}

int link_params_parse_line(struct link_params *p, const char *line)
{
	char tok[64];
	uint32_t seen = 0;
	int rc;

	*p = (struct link_params){ 0 };
	while (*line) {
		size_t n = strcspn(line, " ");
		if (n == 0 || n >= sizeof tok)
			return -EINVAL;         /* an empty token (two spaces, a leading space) or a huge one */
		memcpy(tok, line, n);
		tok[n] = '\0';
		if ((rc = link_params_parse_token(p, tok, &seen)) < 0)
			return rc;
		line += n;
		if (*line == ' ' && !*++line)
			return -EINVAL;         /* a trailing space */
	}
	return 0;
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
