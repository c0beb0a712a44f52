/* orchestrator/scensim: the simulation section of a scenario: settings of `stalenet simulate`
 * (docs/simulation.md) that `stalenet run` ignores. Its presence alone matters too: it lifts the
 * node limit to SCENARIO_MAX_SIM_WORKERS (checked with the nodes, orchestrator/scenario). */
#include "orchestrator/scensim.h"

#include "orchestrator/scenario.h"
#include "orchestrator/scennames.h"
#include "orchestrator/scenval.h"

/* simulation: settings of `stalenet simulate` (docs/simulation.md); `stalenet run` ignores them. */
int scensim_parse(struct scenval *cv, const struct yamltree_node *m)
{
	struct scenario *sc = cv->sc;
	const struct yamltree_node *v;
	int rc, idx;
	if ((rc = scenval_want_kind(cv, m, YAMLTREE_MAP, "simulation")) ||
	    (rc = scenval_check_keys(cv, m, SCENVAL_KEYS("train", "step_cost", "server_cost", "rto_min", "mss",
							 "node_files", "profile", "loss_recovery", "seed"),
				     "simulation")))
		return rc;
	sc->simulation.present = true;
	if ((v = yamltree_get(m, "train"))) {
		if ((rc = scenval_enum(cv, v, scennames_sim_train, "simulation.train", &idx)))
			return rc;
		sc->simulation.train = (enum scenario_sim_train)idx;
	}
	if ((v = yamltree_get(m, "step_cost"))) {
		if ((rc = scenval_time(cv, v, 3600ull * 1000000, "simulation.step_cost", &sc->simulation.step_cost_us)))
			return rc;
		if (!sc->simulation.step_cost_us)
			return scenval_fail(cv, v, "simulation.step_cost is 0 (expected at least 1us; leave it out to "
					    "measure the model on this host)");
	}
	if ((v = yamltree_get(m, "server_cost"))) {
		if ((rc = scenval_time(cv, v, 60ull * 1000000, "simulation.server_cost",
				       &sc->simulation.server_cost_us)))
			return rc;
		if (!sc->simulation.server_cost_us)
			return scenval_fail(cv, v,
					    "simulation.server_cost is 0 (expected at least 1us; leave it out to "
					    "measure the update on this host)");
	}
	if ((v = yamltree_get(m, "rto_min"))) {
		if ((rc = scenval_time(cv, v, 60ull * 1000000, "simulation.rto_min", &sc->simulation.rto_min_us)))
			return rc;
		if (sc->simulation.rto_min_us < 1000)
			return scenval_fail(cv, v,
					    "simulation.rto_min below 1ms (expected e.g. 200ms, Linux's default)");
	}
	if ((v = yamltree_get(m, "mss")) && (rc = scenval_u32(cv, v, 88, 65495, "simulation.mss", &sc->simulation.mss)))
		return rc;
	if ((v = yamltree_get(m, "loss_recovery"))) {
		if ((rc = scenval_enum(cv, v, scennames_sim_recovery, "simulation.loss_recovery", &idx)))
			return rc;
		sc->simulation.loss_recovery = (enum scenario_sim_recovery)idx;
	}
	if ((v = yamltree_get(m, "node_files")) &&
	    (rc = scenval_u32(cv, v, 0, SCENARIO_MAX_NODES, "simulation.node_files", &sc->simulation.node_files)))
		return rc;
	if ((v = yamltree_get(m, "profile")) && (rc = scenval_path(cv, v, "simulation.profile",
								   &sc->simulation.profile)))
		return rc;
	if ((v = yamltree_get(m, "seed")) && (rc = scenval_u32(cv, v, 0, 1000000, "simulation.seed",
							       &sc->simulation.seed)))
		return rc;
	return 0;
}
