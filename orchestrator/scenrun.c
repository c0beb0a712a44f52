/* orchestrator/scenrun: the sections of a scenario that say how a run proceeds and ends: stop
 * (time, accuracy, steps; grace, the time nodes get after "stop" before SIGTERM), the link
 * self-check before training (linkcheck) and the evaluation period (eval). Whether some stop condition exists at all depends on the workload and the
 * topology and is checked by orchestrator/scenario. */
#include "orchestrator/scenrun.h"

#include "orchestrator/scenario.h"
#include "orchestrator/scenval.h"

int scenrun_stop(struct scenval *cv, const struct yamltree_node *m)
{
	struct scenario *sc = cv->sc;
	const struct yamltree_node *v;
	int rc;
	if ((rc = scenval_want_kind(cv, m, YAMLTREE_MAP, "stop")) ||
	    (rc = scenval_check_keys(cv, m, SCENVAL_KEYS("time", "accuracy", "steps", "grace"), "stop")))
		return rc;
	const struct yamltree_node *grace = yamltree_get(m, "grace");
	if ((v = yamltree_get(m, "time")) && (rc = scenval_time(cv, v, 30ull * 86400 * 1000000, "stop.time",
								&sc->stop_time_us)))
		return rc;
	if ((v = yamltree_get(m, "accuracy")) && (rc = scenval_fraction(cv, v, "stop.accuracy", &sc->stop_accuracy)))
		return rc;
	if ((v = yamltree_get(m, "steps")) && (rc = scenval_count(cv, v, 1, 1000000000000ull, "stop.steps",
								  &sc->stop_steps)))
		return rc;
	if (v == NULL && !grace && !sc->stop_time_us && sc->stop_accuracy == 0 && !sc->stop_steps)
		return scenval_fail(cv, m, "stop has no condition (expected time, accuracy or steps)");
	/* How long the nodes get after "stop" before SIGTERM: a slow final evaluation or upload
	 * needs more, short runs and tests less. Below 1 s a node could not even report its end
	 * through a loaded control plane; beyond 1 h a hung node would hold a sweep hostage. */
	if (grace) {
		if ((rc = scenval_time(cv, grace, SCENARIO_STOP_GRACE_MAX_US, "stop.grace", &sc->stop_grace_us)))
			return rc;
		if (sc->stop_grace_us < SCENARIO_STOP_GRACE_MIN_US)
			return scenval_fail(cv, grace, "stop.grace %s is below 1s", grace->scalar);
	}
	return 0;
}

int scenrun_linkcheck(struct scenval *cv, const struct yamltree_node *m)
{
	struct scenario *sc = cv->sc;
	int rc;
	if (m->kind == YAMLTREE_SCALAR)
		return scenval_bool(cv, m, "linkcheck", &sc->linkcheck);
	if ((rc = scenval_want_kind(cv, m, YAMLTREE_MAP, "linkcheck")) ||
	    (rc = scenval_check_keys(cv, m, SCENVAL_KEYS("probes", "interval"), "linkcheck")))
		return rc;
	const struct yamltree_node *v = yamltree_get(m, "probes");
	sc->linkcheck = true;
	if (v && (rc = scenval_u32(cv, v, 1, 1000000, "linkcheck.probes", &sc->linkcheck_probes)))
		return rc;
	/* A slower probe stream for hosts that cannot serve 200 probes a second per node without
	 * queueing them (an emulated CPU): the measurement, not the link, would be slow. */
	if ((v = yamltree_get(m, "interval"))) {
		if ((rc = scenval_time(cv, v, 1000000, "linkcheck.interval", &sc->linkcheck_interval_us)))
			return rc;
		if (sc->linkcheck_interval_us < 100)
			return scenval_fail(cv, v, "linkcheck.interval %s is below 100us", v->scalar);
	}
	return 0;
}

int scenrun_eval(struct scenval *cv, const struct yamltree_node *m)
{
	int rc;
	if ((rc = scenval_want_kind(cv, m, YAMLTREE_MAP, "eval")) || (rc = scenval_check_keys(cv, m, SCENVAL_KEYS("every"), "eval")))
		return rc;
	const struct yamltree_node *v = yamltree_get(m, "every");
	if (!v)
		return 0;
	if ((rc = scenval_time(cv, v, 86400ull * 1000000, "eval.every", &cv->sc->eval_every_us)))
		return rc;
	if (!cv->sc->eval_every_us)
		return scenval_fail(cv, v, "eval.every is 0 (expected a period > 0, e.g. 2s)");
	return 0;
}
