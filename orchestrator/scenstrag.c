/* orchestrator/scenstrag: the stragglers section of a scenario: per-node compute slowdowns and
 * delay distributions, pauses, crashes with restarts, joins and leaves.
 *
 * The node selectors are kept as text here; they are checked against the node list with the
 * other cross-section checks (orchestrator/scenario). All times are after the run start. */
#include "orchestrator/scenstrag.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "orchestrator/scenario.h"
#include "orchestrator/scennames.h"
#include "orchestrator/scenval.h"

/* Delay parameter keys per distribution; index = enum scenario_dist. "*" marks a time. */
static const char *const dist_keys[][3] = {
	[SCENARIO_DIST_NONE] = { NULL, NULL, NULL },
	[SCENARIO_DIST_CONSTANT] = { "*value", NULL, NULL },
	[SCENARIO_DIST_UNIFORM] = { "*min", "*max", NULL },
	[SCENARIO_DIST_EXPONENTIAL] = { "*mean", NULL, NULL },
	[SCENARIO_DIST_GAMMA] = { "shape", "*scale", NULL },
	[SCENARIO_DIST_NORMAL] = { "*mean", "*sd", NULL },
	[SCENARIO_DIST_PARETO] = { "*scale", "shape", NULL },
};

static int straggler_delay(struct scenval *cv, const struct yamltree_node *m, struct scenario_straggler *st)
{
	int rc, idx;
	const struct yamltree_node *v;
	if ((rc = scenval_want_kind(cv, m, YAMLTREE_MAP, "compute.delay")))
		return rc;
	if (!(v = yamltree_get(m, "dist")))
		return scenval_fail(cv, m,
				    "compute.delay without dist (expected constant|uniform|exponential|gamma|normal|pareto)");
	if ((rc = scenval_enum(cv, v, scennames_dist, "compute.delay.dist", &idx)))
		return rc;
	if (idx == SCENARIO_DIST_NONE)
		return scenval_fail(cv, v, "compute.delay.dist none (leave compute.delay out instead)");
	st->delay_dist = (enum scenario_dist)idx;
	const char *allowed[4] = { "dist", NULL, NULL, NULL };
	for (int i = 0; i < 2 && dist_keys[idx][i]; i++)
		allowed[i + 1] = dist_keys[idx][i] + (dist_keys[idx][i][0] == '*');
	char where[64];
	snprintf(where, sizeof where, "compute.delay (dist %s)", scennames_dist[idx]);
	if ((rc = scenval_check_keys(cv, m, allowed, where)))
		return rc;
	for (int i = 0; i < 2 && dist_keys[idx][i]; i++) {
		const char *key = dist_keys[idx][i];
		bool is_time = key[0] == '*';
		key += is_time;
		double *out = i ? &st->delay_b : &st->delay_a;
		if (!(v = yamltree_get(m, key)))
			return scenval_fail(cv, m, "compute.delay (dist %s) without %s", scennames_dist[idx], key);
		if (is_time) {
			uint64_t us;
			if ((rc = scenval_time(cv, v, 3600ull * 1000000, key, &us)))
				return rc;
			*out = us / 1e6;
		} else if ((rc = scenval_real(cv, v, 0, true, 1e6, false, key, out))) {
			return rc;
		}
	}
	if (idx == SCENARIO_DIST_UNIFORM && st->delay_a > st->delay_b)
		return scenval_fail(cv, yamltree_get(m, "min"), "compute.delay min is above max");
	if ((idx == SCENARIO_DIST_EXPONENTIAL || idx == SCENARIO_DIST_GAMMA || idx == SCENARIO_DIST_PARETO) &&
	    (st->delay_a <= 0 || st->delay_b < 0))
		return scenval_fail(cv, m, "compute.delay (dist %s) parameters must be > 0", scennames_dist[idx]);
	st->set |= SCENARIO_STRAG_DELAY;
	return 0;
}

int scenstrag_parse(struct scenval *cv, const struct yamltree_node *m)
{
	struct scenario *sc = cv->sc;
	int rc;
	const uint64_t tmax = 30ull * 86400 * 1000000;
	if ((rc = scenval_want_kind(cv, m, YAMLTREE_SEQ, "stragglers")))
		return rc;
	if (m->n > 65536)
		return scenval_fail(cv, m, "stragglers has %zu entries (limit 65536)", m->n);
	if (m->n && !(sc->stragglers = calloc(m->n, sizeof *sc->stragglers)))
		return scenval_fail(cv, m, "out of memory");
	for (size_t i = 0; i < m->n; i++) {
		const struct yamltree_node *e = m->items[i].value, *v, *w;
		struct scenario_straggler *st = &sc->stragglers[i];
		sc->n_stragglers = i + 1;
		st->slowdown = 1;
		if ((rc = scenval_want_kind(cv, e, YAMLTREE_MAP, "a stragglers entry")) ||
		    (rc = scenval_check_keys(cv, e, SCENVAL_KEYS("nodes", "compute", "pause", "crash", "join", "leave"),
					     "a stragglers entry")))
			return rc;
		if (!(v = yamltree_get(e, "nodes")))
			return scenval_fail(cv, e, "stragglers entry without nodes (expected nodes: worker9)");
		if ((rc = scenval_string(cv, v, "nodes", &st->nodes)))
			return rc;
		st->pos = (struct scenario_pos){ v->line, v->col };
		if ((v = yamltree_get(e, "compute"))) {
			if ((rc = scenval_want_kind(cv, v, YAMLTREE_MAP, "compute")) ||
			    (rc = scenval_check_keys(cv, v, SCENVAL_KEYS("slowdown", "delay", "trace"), "compute")))
				return rc;
			if ((w = yamltree_get(v, "slowdown"))) {
				if ((rc = scenval_real(cv, w, 1, false, 1000, false, "compute.slowdown",
						       &st->slowdown)))
					return rc;
				st->set |= SCENARIO_STRAG_SLOWDOWN;
			}
			if ((w = yamltree_get(v, "delay")) && (rc = straggler_delay(cv, w, st)))
				return rc;
			if ((w = yamltree_get(v, "trace"))) {
				if ((rc = scenval_path(cv, w, "compute.trace", &st->trace)))
					return rc;
				st->set |= SCENARIO_STRAG_TRACE;
			}
		}
		if ((v = yamltree_get(e, "pause"))) {
			const struct yamltree_node *ev, *fo;
			if ((rc = scenval_want_kind(cv, v, YAMLTREE_MAP, "pause")) ||
			    (rc = scenval_check_keys(cv, v, SCENVAL_KEYS("every", "for"), "pause")))
				return rc;
			if (!(ev = yamltree_get(v, "every")) || !(fo = yamltree_get(v, "for")))
				return scenval_fail(cv, v,
						    "pause needs every and for (expected pause: {every: 30s, for: 5s})");
			if ((rc = scenval_time(cv, ev, tmax, "pause.every", &st->pause_every_us)) ||
			    (rc = scenval_time(cv, fo, tmax, "pause.for", &st->pause_for_us)))
				return rc;
			if (!st->pause_for_us || st->pause_for_us >= st->pause_every_us)
				return scenval_fail(cv, fo, "pause.for must be > 0 and shorter than pause.every");
			st->set |= SCENARIO_STRAG_PAUSE;
		}
		if ((v = yamltree_get(e, "crash"))) {
			if ((rc = scenval_want_kind(cv, v, YAMLTREE_MAP, "crash")) ||
			    (rc = scenval_check_keys(cv, v, SCENVAL_KEYS("at", "restart"), "crash")))
				return rc;
			if (!(w = yamltree_get(v, "at")))
				return scenval_fail(cv, v, "crash without at (expected crash: {at: 30s})");
			if ((rc = scenval_time(cv, w, tmax, "crash.at", &st->crash_at_us)))
				return rc;
			st->set |= SCENARIO_STRAG_CRASH;
			if ((w = yamltree_get(v, "restart"))) {
				if ((rc = scenval_time(cv, w, tmax, "crash.restart", &st->restart_at_us)))
					return rc;
				if (st->restart_at_us <= st->crash_at_us)
					return scenval_fail(cv, w,
							    "crash.restart must be later than crash.at (it is the time "
							    "of the restart, not a duration)");
				st->set |= SCENARIO_STRAG_RESTART;
			}
		}
		for (int k = 0; k < 2; k++) {
			const char *key = k ? "leave" : "join";
			if (!(v = yamltree_get(e, key)))
				continue;
			if ((rc = scenval_want_kind(cv, v, YAMLTREE_MAP, key)) || (rc = scenval_check_keys(cv, v, SCENVAL_KEYS("at"), key)))
				return rc;
			if (!(w = yamltree_get(v, "at")))
				return scenval_fail(cv, v, "%s without at (expected %s: {at: 30s})", key, key);
			if ((rc = scenval_time(cv, w, tmax, k ? "leave.at" : "join.at",
					       k ? &st->leave_at_us : &st->join_at_us)))
				return rc;
			st->set |= k ? SCENARIO_STRAG_LEAVE : SCENARIO_STRAG_JOIN;
		}
		if ((st->set & SCENARIO_STRAG_JOIN) && (st->set & SCENARIO_STRAG_LEAVE) && st->leave_at_us <= st->join_at_us)
			return scenval_fail(cv, yamltree_get(e, "leave"), "leave.at must be later than join.at");
		if (!st->set)
			return scenval_fail(cv, e,
					    "stragglers entry does nothing (expected compute, pause, crash, join or leave)");
	}
	return 0;
}
