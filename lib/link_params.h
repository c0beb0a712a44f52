/* lib/link_params: what one direction of one link should do to its packets.
 *
 * A plain parameter struct shared by the scenario parser (which fills it), the plan (which
 * prints it) and both shaping backends (which apply it). Units are in the field names.
 * Probabilities are parts per million (1% = 10000 ppm), exact for every value tc accepts
 * with up to four decimals of a percent. A zero field means "off"; `set` says which fields a
 * scenario layer gave explicitly, so per-node overrides can be merged onto the default. */
#ifndef STALENET_LINK_PARAMS_H
#define STALENET_LINK_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LINK_PPM_MAX 1000000u

enum link_dist {
	LINK_DIST_NONE = 0,     /* jitter uniform in [-jitter, +jitter] as netem without a table */
	LINK_DIST_UNIFORM,
	LINK_DIST_NORMAL,
	LINK_DIST_PARETO,
	LINK_DIST_PARETONORMAL,
};

enum link_loss_model {
	LINK_LOSS_RANDOM = 0,   /* loss_ppm, optionally correlated (loss_corr_ppm) */
	LINK_LOSS_GEMODEL,      /* Gilbert-Elliott: ge_p, ge_r, ge_1h, ge_1k (ppm) */
};

/* Bits of link_params.set. */
enum link_field {
	LINK_F_DELAY = 1u << 0, LINK_F_JITTER = 1u << 1, LINK_F_DIST = 1u << 2,
	LINK_F_DELAY_CORR = 1u << 3, LINK_F_LOSS = 1u << 4, LINK_F_LOSS_CORR = 1u << 5,
	LINK_F_LOSS_MODEL = 1u << 6, LINK_F_DUP = 1u << 7, LINK_F_REORDER = 1u << 8,
	LINK_F_GAP = 1u << 9, LINK_F_CORRUPT = 1u << 10, LINK_F_RATE = 1u << 11,
	LINK_F_LIMIT = 1u << 12, LINK_F_REORDER_CORR = 1u << 13, LINK_F_DUP_CORR = 1u << 14,
	LINK_F_CORRUPT_CORR = 1u << 15,
};

struct link_params {
	uint32_t set;                   /* LINK_F_* bits given explicitly */
	uint32_t delay_us;              /* one-way base delay, <= 60 s */
	uint32_t jitter_us;             /* spread of the delay (sd for normal-like tables) */
	enum link_dist dist;
	uint32_t delay_corr_ppm;
	enum link_loss_model loss_model;
	uint32_t loss_ppm;
	uint32_t loss_corr_ppm;
	uint32_t ge_p_ppm, ge_r_ppm, ge_1h_ppm, ge_1k_ppm;  /* Gilbert-Elliott transition/loss probs */
	uint32_t dup_ppm, dup_corr_ppm;
	uint32_t reorder_ppm, reorder_corr_ppm;
	uint32_t gap;                   /* reorder every gap-th packet (netem "gap") */
	uint32_t corrupt_ppm, corrupt_corr_ppm;
	uint64_t rate_bps;              /* bits per second, 0 = unlimited */
	uint32_t limit_pkts;            /* queue limit in packets, 0 = backend default (1000) */
};

/* Check the cross-field rules tc enforces (reorder needs delay, gap needs reorder, a correlation
 * needs its base probability, Gilbert-Elliott needs p) and the ranges (ppm <= 1e6, delay <= 60 s,
 * jitter <= delay is NOT required). Pure. Returns NULL when valid, else a static message naming the
 * field (the scenario parser prefixes file:line). */
const char *link_params_validate(const struct link_params *p);

/* Write p as space-separated key=value tokens (delay_us=20000 loss_ppm=10000 ...), only non-zero
 * fields, into buf. Returns the length that was needed (as snprintf), or -EINVAL. */
int link_params_format(const struct link_params *p, char *buf, size_t len);

/* Apply one key=value token to p, only in the canonical form link_params_format writes: a known
 * key, '=', decimal digits (no sign, space or leading zero; "0" itself is taken) within the
 * field's range. *seen records the keys applied so far from one line (start it at 0 for each
 * line): a key already in it is refused, so a line cannot say a field twice. Returns 0, -ENOENT
 * for an unknown key, -EEXIST for a repeated one, -EINVAL for a malformed or out-of-range value.
 * Cross-field rules are link_params_validate's. */
int link_params_parse_token(struct link_params *p, const char *token, uint32_t *seen);

/* A whole line of tokens as link_params_format writes it (single spaces between tokens, none
 * before or after; "" is no field) into p, zeroed first. Returns as link_params_parse_token, and
 * -EINVAL for any other separator. */
int link_params_parse_line(struct link_params *p, const char *line);

/* Name of a distribution ("none", "uniform", "normal", "pareto", "paretonormal"). */
const char *link_params_dist_name(enum link_dist dist);

#endif
