/* orchestrator/scensweep: the sweep section of a scenario read into struct scenario_sweep, kept
 * unexpanded (orchestrator/plan expands it).
 *
 * A sweep key is a key path of the scenario with a list of values; the values are kept as text
 * and applied like --set when a run is built, so only the path's first segment is checked here.
 * zip groups pair lists of equal length; the number of runs is bounded (SCENARIO_MAX_RUNS)
 * before anybody expands it. Whether each value is valid is checked by orchestrator/scenario,
 * which converts a trial document per value. */
#include "orchestrator/scensweep.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/scenario.h"
#include "orchestrator/scenval.h"

int scensweep_parse(struct scenval *cv, const struct yamltree_node *m)
{
	struct scenario *sc = cv->sc;
	int rc;
	const struct yamltree_node *zip = NULL;
	static const char *const top[] = { "name", "seed", "stop", "target", "data", "model", "train", "topology",
					   "consistency", "workers", "nodes", "workload", "linkcheck", "eval",
					   "network", "stragglers", "resources", "on_node_failure", "description",
					   "fleet", "simulation", NULL };
	if ((rc = scenval_want_kind(cv, m, YAMLTREE_MAP, "sweep")))
		return rc;
	size_t n_axes = 0;
	for (size_t i = 0; i < m->n; i++)
		n_axes += strcmp(m->items[i].key, "repeat") && strcmp(m->items[i].key, "zip");
	if (n_axes > 64)
		return scenval_fail(cv, m, "sweep has %zu keys (limit 64)", n_axes);
	if (n_axes && !(sc->sweep.axes = calloc(n_axes, sizeof *sc->sweep.axes)))
		return scenval_fail(cv, m, "out of memory");
	for (size_t i = 0; i < m->n; i++) {
		const struct yamltree_entry *e = &m->items[i];
		if (!strcmp(e->key, "repeat")) {
			if ((rc = scenval_u32(cv, e->value, 1, SCENARIO_MAX_RUNS, "sweep.repeat", &sc->sweep.repeat)))
				return rc;
			continue;
		}
		if (!strcmp(e->key, "zip")) {
			zip = e->value;
			continue;
		}
		/* the first segment must be a scenario key (the rest is checked when the value is applied) */
		char first[64];
		size_t fl = strcspn(e->key, ".");
		snprintf(first, sizeof first, "%.*s", (int)(fl < 63 ? fl : 63), e->key);
		struct yamltree_node tmp = { .kind = YAMLTREE_MAP, .n = 1,
					     .items = &(struct yamltree_entry){ first, e->line, e->col, e->value } };
		if ((rc = scenval_check_keys(cv, &tmp, top, "sweep (a key path of the scenario)")))
			return rc;
		if (e->value->kind != YAMLTREE_SEQ || e->value->n == 0)
			return scenval_fail(cv, e->value, "sweep '%s' is %s (expected a non-empty list of values)",
					    e->key,
					    e->value->kind == YAMLTREE_SEQ ? "an empty list" : yamltree_kind_name(e->value->kind));
		if (e->value->n > 1000)
			return scenval_fail(cv, e->value, "sweep '%s' has %zu values (limit 1000)", e->key,
					    e->value->n);
		struct scenario_sweep_axis *ax = &sc->sweep.axes[sc->sweep.n_axes++];
		ax->zip_group = -1;
		ax->pos = (struct scenario_pos){ e->line, e->col };
		if (!(ax->key = strdup(e->key)) || !(ax->values = calloc(e->value->n, sizeof *ax->values)) ||
		    !(ax->value_pos = calloc(e->value->n, sizeof *ax->value_pos)))
			return scenval_fail(cv, m, "out of memory");
		ax->n_values = e->value->n;
		for (size_t k = 0; k < e->value->n; k++) {
			const struct yamltree_node *val = e->value->items[k].value;
			int need = yamltree_flow(val, NULL, 0);
			if (need < 0 || !(ax->values[k] = malloc((size_t)need + 1)))
				return scenval_fail(cv, val, "out of memory");
			yamltree_flow(val, ax->values[k], (size_t)need + 1);
			ax->value_pos[k] = (struct scenario_pos){ val->line, val->col };
		}
	}
	if (zip) {
		/* zip: [a, b] is one group; zip: [[a, b], [c, d]] several */
		if ((rc = scenval_want_kind(cv, zip, YAMLTREE_SEQ, "sweep.zip")))
			return rc;
		bool nested = zip->n && zip->items[0].value->kind == YAMLTREE_SEQ;
		size_t groups = nested ? zip->n : 1;
		for (size_t g = 0; g < groups; g++) {
			const struct yamltree_node *grp = nested ? zip->items[g].value : zip;
			if ((rc = scenval_want_kind(cv, grp, YAMLTREE_SEQ, "a sweep.zip group")))
				return rc;
			if (grp->n < 2)
				return scenval_fail(cv, grp, "a sweep.zip group needs at least two keys");
			size_t len = 0;
			for (size_t k = 0; k < grp->n; k++) {
				const struct yamltree_node *kn = grp->items[k].value;
				const char *key = scenval_scalar(cv, kn, "a sweep.zip key");
				if (!key)
					return -EINVAL;
				struct scenario_sweep_axis *ax = NULL;
				for (size_t a = 0; a < sc->sweep.n_axes; a++)
					if (!strcmp(sc->sweep.axes[a].key, key))
						ax = &sc->sweep.axes[a];
				if (!ax)
					return scenval_fail(cv, kn, "sweep.zip names '%s', which is not a sweep key",
							    key);
				if (ax->zip_group >= 0)
					return scenval_fail(cv, kn, "sweep.zip names '%s' twice", key);
				if (k && ax->n_values != len)
					return scenval_fail(cv, kn,
							    "sweep.zip pairs lists of different lengths ('%s' has %zu "
							    "values, expected %zu)", key, ax->n_values, len);
				len = ax->n_values;
				ax->zip_group = (int)g;
			}
		}
	}
	/* the number of runs, bounded before anybody expands it */
	double runs = sc->sweep.repeat;
	for (size_t a = 0; a < sc->sweep.n_axes; a++) {
		const struct scenario_sweep_axis *ax = &sc->sweep.axes[a];
		bool first_of_group = ax->zip_group < 0;
		for (size_t b = 0; b < a && !first_of_group; b++)
			if (sc->sweep.axes[b].zip_group == ax->zip_group)
				break;
			else if (b == a - 1)
				first_of_group = true;
		if (a == 0 && ax->zip_group >= 0)
			first_of_group = true;
		if (first_of_group)
			runs *= (double)ax->n_values;
	}
	if (runs > SCENARIO_MAX_RUNS)
		return scenval_fail(cv, m, "sweep expands to %.0f runs (limit SCENARIO_MAX_RUNS is %d)", runs,
				    SCENARIO_MAX_RUNS);
	return 0;
}
