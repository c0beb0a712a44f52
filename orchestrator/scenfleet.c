/* orchestrator/scenfleet: the fleet section of a scenario (topology fleet, docs/fleet.md): how
 * devices send versions (strategy, sync, snapshots, sparse_k), what the registry deploys first
 * (base), who keeps whose versions (registry, peers) and when new classes join the devices' data
 * (drift).
 *
 * fleet.peers depends on the number of devices, known only once the nodes are read: it is checked
 * by scenfleet_check_peers after them. */
#include "orchestrator/scenfleet.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/limits.h"
#include "orchestrator/scenario.h"
#include "orchestrator/scennames.h"
#include "orchestrator/scenval.h"
#include "orchestrator/units.h"

/* fleet.registry central | peers and fleet.peers (1..N-1: checked against the device count
 * in scenfleet_check_peers, once the nodes are known). */
static int fleet_registry(struct scenval *cv, const struct yamltree_node *m)
{
	struct scenario *sc = cv->sc;
	const struct yamltree_node *v;
	int rc, idx;

	if ((v = yamltree_get(m, "registry"))) {
		if ((rc = scenval_enum(cv, v, scennames_fleet_registry, "fleet.registry", &idx)))
			return rc;
		sc->fleet.registry = (enum scenario_fleet_registry)idx;
		if (idx == SCENARIO_FLEET_REGISTRY_PEERS && sc->fleet.base == SCENARIO_FLEET_BASE_TRAINED)
			return scenval_fail(cv, v, "fleet.registry peers needs fleet.base init or file");
	}
	if ((v = yamltree_get(m, "peers"))) {
		if (sc->fleet.registry != SCENARIO_FLEET_REGISTRY_PEERS)
			return scenval_fail(cv, v, "fleet.peers applies to registry peers");
		if ((rc = scenval_u32(cv, v, 1, SCENARIO_MAX_NODES, "fleet.peers", &sc->fleet.peers)))
			return rc;
	}
	return 0;
}

/* fleet.drift: a list of {at: TIME | 'N steps', devices: SELECTOR, add_classes: [c, ...]}. The
 * selectors are checked against the node list in check_nodes. */
static int fleet_drift(struct scenval *cv, const struct yamltree_node *v)
{
	struct scenario *sc = cv->sc;
	int rc;

	if ((rc = scenval_want_kind(cv, v, YAMLTREE_SEQ, "fleet.drift")))
		return rc;
	if (v->n > 64)
		return scenval_fail(cv, v, "fleet.drift has %zu entries (limit 64)", v->n);
	if (v->n && !(sc->fleet.drift = calloc(v->n, sizeof *sc->fleet.drift)))
		return scenval_fail(cv, v, "out of memory");
	for (size_t i = 0; i < v->n; i++) {
		const struct yamltree_node *e = v->items[i].value, *at, *dev, *cls;
		struct scenario_fleet_drift *d = &sc->fleet.drift[i];
		const char *s;
		size_t len;

		sc->fleet.n_drift = i + 1;
		if ((rc = scenval_want_kind(cv, e, YAMLTREE_MAP, "a fleet.drift entry")) ||
		    (rc = scenval_check_keys(cv, e, SCENVAL_KEYS("at", "devices", "add_classes"),
					     "a fleet.drift entry")))
			return rc;
		if (!(at = yamltree_get(e, "at")) || !(dev = yamltree_get(e, "devices")) || !(cls = yamltree_get(e, "add_classes")))
			return scenval_fail(cv, e, "a fleet.drift entry needs at, devices and add_classes (e.g. {at: "
					    "20s, devices: device0, add_classes: [7, 8]})");
		if (!(s = scenval_scalar(cv, at, "at")))
			return -EINVAL;
		len = strlen(s);
		if (len > 6 && !strcmp(s + len - 6, " steps")) {
			char num[32];
			const char *why = NULL;

			if (len - 6 >= sizeof num)
				return scenval_fail(cv, at, "at '%s' is too long", s);
			memcpy(num, s, len - 6);
			num[len - 6] = '\0';
			if (num[0] == '-' || units_parse_count(num, &d->at_steps, &why) ||
			    d->at_steps > 100000000)
				return scenval_fail(cv, at, "at '%s': %s (expected a step count 0..100000000 like "
						    "'400 steps', or a time like 20s)", s, why ? why : "out of range");
			d->by_steps = true;
		} else if ((rc = scenval_time(cv, at, 30ull * 86400 * 1000000, "at", &d->at_us))) {
			return rc;
		}
		if ((rc = scenval_string(cv, dev, "devices", &d->devices)))
			return rc;
		d->pos = (struct scenario_pos){ dev->line, dev->col };
		if ((rc = scenval_want_kind(cv, cls, YAMLTREE_SEQ, "add_classes")))
			return rc;
		if (cls->n == 0)
			return scenval_fail(cv, cls, "add_classes is empty (expected class labels such as [7, 8])");
		for (size_t k = 0; k < cls->n; k++) {
			uint32_t c;

			if ((rc = scenval_u32(cv, cls->items[k].value, 0, 9, "a class", &c)))
				return rc;
			if (d->classes >> c & 1)
				return scenval_fail(cv, cls->items[k].value, "class %u is listed twice", c);
			d->classes |= (uint16_t)(1u << c);
		}
	}
	return 0;
}

/* With fleet.registry peers: 1 <= fleet.peers <= devices - 1. */
int scenfleet_check_peers(struct scenval *cv, const struct yamltree_node *root)
{
	struct scenario *sc = cv->sc;
	const struct yamltree_node *f = yamltree_get(root, "fleet"), *v;

	if (sc->topology.kind != SCENARIO_TOPO_FLEET || sc->fleet.registry != SCENARIO_FLEET_REGISTRY_PEERS)
		return 0;
	v = f && yamltree_get(f, "peers") ? yamltree_get(f, "peers") : f && yamltree_get(f, "registry") ? yamltree_get(f, "registry") : root;
	if (sc->workers < 2)
		return scenval_fail(cv, v, "fleet.registry peers needs at least 2 devices (there are %u)", sc->workers);
	if (sc->fleet.peers > sc->workers - 1) {
		if (!(f && yamltree_get(f, "peers")))
			sc->fleet.peers = sc->workers - 1; /* the default, for a fleet of 2 */
		else
			return scenval_fail(cv, v, "fleet.peers %u: a device has %u peers (expected 1..%u)",
					    sc->fleet.peers, sc->workers - 1, sc->workers - 1);
	}
	return 0;
}

/* fleet: {strategy, sync, snapshot_every, sparse_k, base, base_file, base_steps, registry, peers, drift}. */
int scenfleet_parse(struct scenval *cv, const struct yamltree_node *m)
{
	struct scenario *sc = cv->sc;
	const struct yamltree_node *v;
	const char *s;
	int rc, idx;

	if ((rc = scenval_want_kind(cv, m, YAMLTREE_MAP, "fleet")) ||
	    (rc = scenval_check_keys(cv, m, SCENVAL_KEYS("strategy", "sync", "snapshot_every", "sparse_k", "base",
							 "base_file", "base_steps", "registry", "peers", "drift"), "fleet")))
		return rc;
	if (sc->topology.kind != SCENARIO_TOPO_FLEET)
		return scenval_fail(cv, m, "fleet applies to topology fleet (topology: {kind: fleet})");
	if ((v = yamltree_get(m, "strategy"))) {
		if ((rc = scenval_enum(cv, v, scennames_fleet_strategy, "fleet.strategy", &idx)))
			return rc;
		sc->fleet.strategy = (enum scenario_fleet_strategy)idx;
	}
	if ((v = yamltree_get(m, "sync"))) {
		size_t len;

		if (!(s = scenval_scalar(cv, v, "fleet.sync")))
			return -EINVAL;
		len = strlen(s);
		if (len > 6 && !strcmp(s + len - 6, " steps")) {
			char num[32];
			const char *why = NULL;
			uint64_t steps;

			if (len - 6 >= sizeof num)
				return scenval_fail(cv, v, "fleet.sync '%s' is too long", s);
			memcpy(num, s, len - 6);
			num[len - 6] = '\0';
			if (units_parse_count(num, &steps, &why) || steps < 1 || steps > 100000000)
				return scenval_fail(cv, v, "fleet.sync '%s': %s (expected a step count 1..100000000 "
						    "like '20 steps', or a time like 5s)", s, why ? why : "out of range");
			sc->fleet.sync_steps = steps;
			sc->fleet.sync_us = 0;
		} else {
			uint64_t us;

			if ((rc = scenval_time(cv, v, 86400ull * 1000000, "fleet.sync", &us)))
				return rc;
			if (us < 10000)
				return scenval_fail(cv, v,
						    "fleet.sync %s is below 10ms (expected e.g. '20 steps' or 5s)", s);
			sc->fleet.sync_us = us;
			sc->fleet.sync_steps = 0;
		}
	}
	if ((v = yamltree_get(m, "snapshot_every")) &&
	    (rc = scenval_u32(cv, v, 1, 65536, "fleet.snapshot_every", &sc->fleet.snapshot_every)))
		return rc;
	if ((v = yamltree_get(m, "sparse_k"))) {
		if (!(s = scenval_scalar(cv, v, "fleet.sparse_k")))
			return -EINVAL;
		if (strchr(s, '%')) {
			if ((rc = scenval_prob(cv, v, "fleet.sparse_k", &sc->fleet.sparse_ppm)))
				return rc;
			if (!sc->fleet.sparse_ppm)
				return scenval_fail(cv, v,
						    "fleet.sparse_k %s sends nothing (expected a count >= 1 or a "
						    "percentage above 0%%)", s);
			sc->fleet.sparse_k = 0;
		} else {
			if ((rc = scenval_count(cv, v, 1, LIMITS_MAX_PARAMS, "fleet.sparse_k", &sc->fleet.sparse_k)))
				return rc;
			sc->fleet.sparse_ppm = 0;
		}
		if (sc->fleet.strategy != SCENARIO_FLEET_SPARSE)
			return scenval_fail(cv, v, "fleet.sparse_k applies to strategy sparse");
	}
	if ((v = yamltree_get(m, "base"))) {
		if ((rc = scenval_enum(cv, v, scennames_fleet_base, "fleet.base", &idx)))
			return rc;
		sc->fleet.base = (enum scenario_fleet_base)idx;
	}
	if ((v = yamltree_get(m, "base_file"))) {
		if (sc->fleet.base != SCENARIO_FLEET_BASE_FILE)
			return scenval_fail(cv, v, "fleet.base_file applies to base file");
		if ((rc = scenval_path(cv, v, "fleet.base_file", &sc->fleet.base_file)))
			return rc;
	} else if (sc->fleet.base == SCENARIO_FLEET_BASE_FILE) {
		return scenval_fail(cv, yamltree_get(m, "base"), "fleet.base file needs fleet.base_file (raw float32 "
				    "parameters, as train.save_model writes them)");
	}
	if ((rc = fleet_registry(cv, m)))
		return rc;
	if ((v = yamltree_get(m, "base_steps"))) {
		if (sc->fleet.base != SCENARIO_FLEET_BASE_TRAINED)
			return scenval_fail(cv, v, "fleet.base_steps applies to base trained");
		if ((rc = scenval_count(cv, v, 1, 10000000, "fleet.base_steps", &sc->fleet.base_steps)))
			return rc;
	}
	if ((v = yamltree_get(m, "drift")) && (rc = fleet_drift(cv, v)))
		return rc;
	return 0;
}
