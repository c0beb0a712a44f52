/* orchestrator/scenlink: link parameter layers of the scenario language (network.default, a
 * network.links entry, a network.timeline entry) read into struct link_params.
 *
 * Design:
 * - Link keys follow tc-netem's meaning and its cross-field rules (jitter and reorder need delay,
 *   gap needs reorder, a correlation needs its base, gemodel needs p). The rules are checked on
 *   effective parameters, i.e. after a layer is merged onto what it overrides, and reported where
 *   the field at fault was written: every layer remembers the node of each field it set.
 * - gemodel and loss_model may be written in any order: gemodel is read first. */
#include "orchestrator/scenlink.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "orchestrator/scenario.h"
#include "orchestrator/scennames.h"
#include "orchestrator/scenval.h"

static int bit_index(uint32_t bit)
{
	int i = 0;
	while (bit > 1) {
		bit >>= 1;
		i++;
	}
	return i;
}

/* Copy the fields src gave explicitly onto dst (and their positions). */
void scenlink_merge(struct link_params *dst, const struct link_params *src, struct scenlink_pos *dpos,
		    const struct scenlink_pos *spos)
{
	uint32_t s = src->set;
	if (s & LINK_F_DELAY) dst->delay_us = src->delay_us;
	if (s & LINK_F_JITTER) dst->jitter_us = src->jitter_us;
	if (s & LINK_F_DIST) dst->dist = src->dist;
	if (s & LINK_F_DELAY_CORR) dst->delay_corr_ppm = src->delay_corr_ppm;
	if (s & LINK_F_LOSS) dst->loss_ppm = src->loss_ppm;
	if (s & LINK_F_LOSS_CORR) dst->loss_corr_ppm = src->loss_corr_ppm;
	if (s & LINK_F_LOSS_MODEL) {
		dst->loss_model = src->loss_model;
		dst->ge_p_ppm = src->ge_p_ppm;
		dst->ge_r_ppm = src->ge_r_ppm;
		dst->ge_1h_ppm = src->ge_1h_ppm;
		dst->ge_1k_ppm = src->ge_1k_ppm;
	}
	if (s & LINK_F_DUP) dst->dup_ppm = src->dup_ppm;
	if (s & LINK_F_DUP_CORR) dst->dup_corr_ppm = src->dup_corr_ppm;
	if (s & LINK_F_REORDER) dst->reorder_ppm = src->reorder_ppm;
	if (s & LINK_F_REORDER_CORR) dst->reorder_corr_ppm = src->reorder_corr_ppm;
	if (s & LINK_F_GAP) dst->gap = src->gap;
	if (s & LINK_F_CORRUPT) dst->corrupt_ppm = src->corrupt_ppm;
	if (s & LINK_F_CORRUPT_CORR) dst->corrupt_corr_ppm = src->corrupt_corr_ppm;
	if (s & LINK_F_RATE) dst->rate_bps = src->rate_bps;
	if (s & LINK_F_LIMIT) dst->limit_pkts = src->limit_pkts;
	dst->set |= s;
	if (dpos && spos)
		for (int i = 0; i < SCENLINK_FIELDS; i++)
			if (s & (1u << i))
				dpos->f[i] = spos->f[i];
}

static const struct {
	uint32_t field, needs;
	const char *msg;
} link_rules[] = {
	{ LINK_F_JITTER, LINK_F_DELAY, "jitter needs delay (netem varies the delay by the jitter)" },
	{ LINK_F_DIST, LINK_F_JITTER, "delay_distribution needs jitter (the table shapes the jitter)" },
	{ LINK_F_DELAY_CORR, LINK_F_JITTER, "delay_correlation needs jitter" },
	{ LINK_F_LOSS_CORR, LINK_F_LOSS, "loss_correlation needs loss" },
	{ LINK_F_REORDER, LINK_F_DELAY, "reorder needs delay (netem reorders by sending some packets without the delay)" },
	{ LINK_F_GAP, LINK_F_REORDER, "gap needs reorder" },
	{ LINK_F_REORDER_CORR, LINK_F_REORDER, "reorder_correlation needs reorder" },
	{ LINK_F_DUP_CORR, LINK_F_DUP, "duplicate_correlation needs duplicate" },
	{ LINK_F_CORRUPT_CORR, LINK_F_CORRUPT, "corrupt_correlation needs corrupt" },
};
#define GEMODEL_RULE "gemodel needs p > 0 (the good-to-bad transition probability)"

/* Which fields are in effect (non-zero), as LINK_F_* bits. */
static uint32_t link_nonzero(const struct link_params *p)
{
	uint32_t nz = 0;
	if (p->delay_us) nz |= LINK_F_DELAY;
	if (p->jitter_us) nz |= LINK_F_JITTER;
	if (p->dist != LINK_DIST_NONE) nz |= LINK_F_DIST;
	if (p->delay_corr_ppm) nz |= LINK_F_DELAY_CORR;
	if (p->loss_ppm && p->loss_model == LINK_LOSS_RANDOM) nz |= LINK_F_LOSS;
	if (p->loss_corr_ppm) nz |= LINK_F_LOSS_CORR;
	if (p->reorder_ppm) nz |= LINK_F_REORDER;
	if (p->gap) nz |= LINK_F_GAP;
	if (p->reorder_corr_ppm) nz |= LINK_F_REORDER_CORR;
	if (p->dup_ppm) nz |= LINK_F_DUP;
	if (p->dup_corr_ppm) nz |= LINK_F_DUP_CORR;
	if (p->corrupt_ppm) nz |= LINK_F_CORRUPT;
	if (p->corrupt_corr_ppm) nz |= LINK_F_CORRUPT_CORR;
	return nz;
}

/* Index of the first broken rule (-1 = none, N = the gemodel rule). */
static int link_broken_rule(const struct link_params *p)
{
	uint32_t nz = link_nonzero(p);
	for (size_t i = 0; i < sizeof link_rules / sizeof *link_rules; i++)
		if ((nz & link_rules[i].field) && !(nz & link_rules[i].needs))
			return (int)i;
	if (p->loss_model == LINK_LOSS_GEMODEL && !p->ge_p_ppm)
		return (int)(sizeof link_rules / sizeof *link_rules);
	return -1;
}

const char *scenlink_rule(const struct link_params *p)
{
	int r = link_broken_rule(p);
	if (r < 0)
		return NULL;
	return (size_t)r < sizeof link_rules / sizeof *link_rules ? link_rules[r].msg : GEMODEL_RULE;
}

/* The rules on effective parameters p, reported where the field at fault was written (pos), or
 * at fallback when no layer we know wrote it. */
int scenlink_check(struct scenval *cv, const struct link_params *p, const struct scenlink_pos *pos,
		   const struct yamltree_node *fallback, const char *dir)
{
	int r = link_broken_rule(p);
	if (r < 0)
		return 0;
	bool ge = (size_t)r == sizeof link_rules / sizeof *link_rules;
	uint32_t field = ge ? LINK_F_LOSS_MODEL : link_rules[r].field;
	const struct yamltree_node *at = pos ? pos->f[bit_index(field)] : NULL;
	return scenval_fail(cv, at ? at : fallback, "%s%s%s", dir ? dir : "", dir ? ": " : "",
			    ge ? GEMODEL_RULE : link_rules[r].msg);
}

/* One link key into p (and pos). */
static int link_key(struct scenval *cv, const struct yamltree_entry *e, struct link_params *p, struct scenlink_pos *pos)
{
	const struct yamltree_node *v = e->value;
	const char *k = e->key;
	uint64_t u64;
	uint32_t bit = 0;
	int rc = 0, idx;

	if (!strcmp(k, "delay") || !strcmp(k, "jitter")) {
		rc = scenval_time(cv, v, SCENARIO_MAX_DELAY_US, k, &u64);
		if (k[0] == 'd') {
			p->delay_us = (uint32_t)u64;
			bit = LINK_F_DELAY;
		} else {
			p->jitter_us = (uint32_t)u64;
			bit = LINK_F_JITTER;
		}
	} else if (!strcmp(k, "delay_distribution")) {
		rc = scenval_enum(cv, v, scennames_link_dist, k, &idx);
		if (!rc && idx == LINK_DIST_NONE)
			rc = scenval_fail(cv, v,
					  "delay_distribution 'none' (expected uniform|normal|pareto|paretonormal; "
					  "leave the key out for netem's default)");
		p->dist = (enum link_dist)idx;
		bit = LINK_F_DIST;
	} else if (!strcmp(k, "delay_correlation")) {
		rc = scenval_prob(cv, v, k, &p->delay_corr_ppm);
		bit = LINK_F_DELAY_CORR;
	} else if (!strcmp(k, "loss")) {
		rc = scenval_prob(cv, v, k, &p->loss_ppm);
		if (p->set & LINK_F_LOSS_MODEL && p->loss_model == LINK_LOSS_GEMODEL)
			return scenval_fail_key(cv, e,
						"loss and gemodel exclude each other (gemodel sets the loss pattern)");
		p->loss_model = LINK_LOSS_RANDOM;
		p->ge_p_ppm = p->ge_r_ppm = p->ge_1h_ppm = p->ge_1k_ppm = 0;
		bit = LINK_F_LOSS | LINK_F_LOSS_MODEL;
		if (!rc && pos)
			pos->f[bit_index(LINK_F_LOSS_MODEL)] = v;
	} else if (!strcmp(k, "loss_correlation")) {
		rc = scenval_prob(cv, v, k, &p->loss_corr_ppm);
		bit = LINK_F_LOSS_CORR;
	} else if (!strcmp(k, "loss_model")) {
		static const char *const lm[] = { "random", "gemodel", NULL };
		rc = scenval_enum(cv, v, lm, k, &idx);
		if (rc)
			return rc;
		/* gemodel's parameters come from the gemodel key, read after this one */
		if (idx == LINK_LOSS_RANDOM && (p->set & LINK_F_LOSS_MODEL) && p->loss_model == LINK_LOSS_GEMODEL)
			return scenval_fail(cv, v, "loss_model random contradicts the gemodel key");
		if (idx == LINK_LOSS_GEMODEL && !(p->set & LINK_F_LOSS_MODEL && p->loss_model == LINK_LOSS_GEMODEL))
			return scenval_fail(cv, v, "loss_model gemodel needs its parameters "
					    "(expected gemodel: {p: 1%%, r: 10%%, 1-h: 100%%, 1-k: 0%%})");
		p->loss_model = (enum link_loss_model)idx;
		bit = LINK_F_LOSS_MODEL;
	} else if (!strcmp(k, "gemodel")) {
		static const char *const gk[] = { "p", "r", "1-h", "1-k", NULL };
		if ((rc = scenval_want_kind(cv, v, YAMLTREE_MAP, "gemodel")) || (rc = scenval_check_keys(cv, v, gk, "gemodel")))
			return rc;
		if (p->set & LINK_F_LOSS)
			return scenval_fail_key(cv, e,
						"loss and gemodel exclude each other (gemodel sets the loss pattern)");
		const struct yamltree_node *gp = yamltree_get(v, "p"), *gr = yamltree_get(v, "r"),
					   *gh = yamltree_get(v, "1-h"), *gk1 = yamltree_get(v, "1-k");
		if (!gp)
			return scenval_fail(cv, v, "gemodel without p (expected gemodel: {p: 1%%, ...})");
		/* tc's defaults: r = 1 - p, 1-h = 100% (all lost in the bad state), 1-k = 0 */
		if ((rc = scenval_prob(cv, gp, "gemodel.p", &p->ge_p_ppm)))
			return rc;
		p->ge_r_ppm = LINK_PPM_MAX - p->ge_p_ppm;
		p->ge_1h_ppm = LINK_PPM_MAX;
		p->ge_1k_ppm = 0;
		if ((gr && (rc = scenval_prob(cv, gr, "gemodel.r", &p->ge_r_ppm))) ||
		    (gh && (rc = scenval_prob(cv, gh, "gemodel.1-h", &p->ge_1h_ppm))) ||
		    (gk1 && (rc = scenval_prob(cv, gk1, "gemodel.1-k", &p->ge_1k_ppm))))
			return rc;
		p->loss_model = LINK_LOSS_GEMODEL;
		p->loss_ppm = 0;
		bit = LINK_F_LOSS_MODEL;
	} else if (!strcmp(k, "duplicate")) {
		rc = scenval_prob(cv, v, k, &p->dup_ppm);
		bit = LINK_F_DUP;
	} else if (!strcmp(k, "duplicate_correlation")) {
		rc = scenval_prob(cv, v, k, &p->dup_corr_ppm);
		bit = LINK_F_DUP_CORR;
	} else if (!strcmp(k, "reorder")) {
		rc = scenval_prob(cv, v, k, &p->reorder_ppm);
		bit = LINK_F_REORDER;
	} else if (!strcmp(k, "gap")) {
		rc = scenval_u32(cv, v, 1, 1000000, k, &p->gap);
		bit = LINK_F_GAP;
	} else if (!strcmp(k, "reorder_correlation")) {
		rc = scenval_prob(cv, v, k, &p->reorder_corr_ppm);
		bit = LINK_F_REORDER_CORR;
	} else if (!strcmp(k, "corrupt")) {
		rc = scenval_prob(cv, v, k, &p->corrupt_ppm);
		bit = LINK_F_CORRUPT;
	} else if (!strcmp(k, "corrupt_correlation")) {
		rc = scenval_prob(cv, v, k, &p->corrupt_corr_ppm);
		bit = LINK_F_CORRUPT_CORR;
	} else if (!strcmp(k, "rate")) {
		rc = scenval_rate(cv, v, k, &p->rate_bps);
		bit = LINK_F_RATE;
	} else if (!strcmp(k, "queue_limit")) {
		rc = scenval_u32(cv, v, 1, 1000000, k, &p->limit_pkts);
		bit = LINK_F_LIMIT;
	} else {
		return scenval_fail_key(cv, e, "unknown link key '%s'", k); /* filtered by check_keys before */
	}
	if (rc)
		return rc;
	p->set |= bit;
	if (pos)
		for (int i = 0; i < SCENLINK_FIELDS; i++)
			if (bit & (1u << i))
				pos->f[i] = v;
	return 0;
}

/* Read a link mapping: bare keys apply to both directions, `up:`/`down:` to one. Other keys
 * (nodes, at) are the caller's and skipped here. The gemodel/loss_model pair is order-free:
 * gemodel is read before loss_model. */
int scenlink_layer(struct scenval *cv, const struct yamltree_node *map, const char *const *allowed,
		   const char *where, struct link_params *up, struct link_params *down,
		   struct scenlink_pos *upos, struct scenlink_pos *dpos)
{
	static const char *const dir_keys[] = { SCENLINK_KEYS, NULL };
	int rc;
	struct link_params both = { 0 };
	struct scenlink_pos bpos = { 0 };

	if ((rc = scenval_want_kind(cv, map, YAMLTREE_MAP, where)) || (rc = scenval_check_keys(cv, map, allowed, where)))
		return rc;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < map->n; i++) {
			const struct yamltree_entry *e = &map->items[i];
			if (!strcmp(e->key, "up") || !strcmp(e->key, "down") || !strcmp(e->key, "nodes") ||
			    !strcmp(e->key, "at"))
				continue;
			if ((pass == 0) != (!strcmp(e->key, "gemodel")))
				continue;
			if ((rc = link_key(cv, e, &both, &bpos)))
				return rc;
		}
	*up = (struct link_params){ 0 };
	*down = (struct link_params){ 0 };
	scenlink_merge(up, &both, upos, &bpos);
	scenlink_merge(down, &both, dpos, &bpos);
	for (int d = 0; d < 2; d++) {
		const char *dk = d ? "down" : "up";
		const struct yamltree_node *dm = yamltree_get(map, dk);
		if (!dm)
			continue;
		char w[96];
		snprintf(w, sizeof w, "%s.%s", where, dk);
		if ((rc = scenval_want_kind(cv, dm, YAMLTREE_MAP, w)) || (rc = scenval_check_keys(cv, dm, dir_keys, w)))
			return rc;
		struct link_params one = { 0 };
		struct scenlink_pos opos = { 0 };
		for (int pass = 0; pass < 2; pass++)
			for (size_t i = 0; i < dm->n; i++) {
				if ((pass == 0) != (!strcmp(dm->items[i].key, "gemodel")))
					continue;
				if ((rc = link_key(cv, &dm->items[i], &one, &opos)))
					return rc;
			}
		scenlink_merge(d ? down : up, &one, d ? dpos : upos, &opos);
	}
	return 0;
}
