/* Unit tests for orchestrator/cpuneed: the measured step cost orders the models as their
 * arithmetic does, and the estimate adds up as worked out by hand. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "orchestrator/cpuneed.h"
#include "orchestrator/plan.h"
#include "orchestrator/scenario.h"

static const char BASE[] =
	"name: cpu\n"
	"seed: 1\n"
	"stop: {time: 10s}\n"
	"data: {set: fashion-mnist, partition: {scheme: iid}}\n"
	"train: {batch: 64, lr: 0.05}\n"
	"topology: {kind: parameter-server}\n"
	"consistency: {barrier: asp}\n";

static struct scenario *load(const char *extra)
{
	char buf[2048], err[SCENARIO_ERR_MAX];
	struct scenario *sc;

	snprintf(buf, sizeof buf, "%s%s", BASE, extra);
	sc = scenario_parse(buf, strlen(buf), "cpu.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	return sc;
}

Test(cpuneed, step_cost_grows_with_the_model, .timeout = 60)
{
	struct scenario *soft = load("model: {kind: softmax}\nworkers: 2\n");
	struct scenario *mlp = load("model: {kind: mlp, hidden: [512]}\nworkers: 2\n");
	double cs = 0, cm = 0;
	size_t ns = 0, nm = 0;

	cr_assert_eq(cpuneed_step_cost(soft, 5, &cs, &ns), 0);
	cr_assert_eq(cpuneed_step_cost(mlp, 5, &cm, &nm), 0);
	cr_assert_eq(ns, 784 * 10 + 10);
	cr_assert_eq(nm, 784 * 512 + 512 + 512 * 10 + 10);
	cr_assert(cs > 0 && cm > 0, "%g %g", cs, cm);
	/* 50x the parameters: the MLP's step costs several times the softmax's (CPU time of the
	 * measuring thread, so another process's load does not blur it) */
	cr_assert(cm > 5 * cs, "softmax %g s, mlp %g s", cs, cm);
	scenario_destroy(&soft);
	scenario_destroy(&mlp);
}

Test(cpuneed, estimate_by_hand)
{
	struct scenario *sc = load("model: {kind: softmax}\nworkers: 4\n"
				   "stragglers:\n"
				   "  - {nodes: worker0, compute: {slowdown: 3}}\n"
				   "  - {nodes: worker1, compute: {delay: {dist: constant, value: 9ms}}}\n"
				   "resources: [{nodes: worker2, cpu: 0.25}]\n");
	char err[SCENARIO_ERR_MAX];
	struct plan *p = plan_new(sc, err, sizeof err);
	struct cpuneed e;

	cr_assert_not_null(p, "%s", err);
	/* step 1 ms: worker0 1/3 core, worker1 1/10, worker2 capped at 0.25, worker3 1 */
	cpuneed_estimate(plan_run(p, 0), 1e-3, 1000, false, 2, &e);
	cr_assert_float_eq(e.workers_cores, 1.0 / 3 + 0.1 + 0.25 + 1, 1e-9);
	cr_assert_float_eq(e.emulator_cores, 0, 1e-12);
	cr_assert_not(e.over);
	/* nfq: 8000 bytes a step = 6 packets, 2 directions each, at the assumed packet cost;
	 * steps/s = 333.3 + 100 + 250 + 1000 */
	cpuneed_estimate(plan_run(p, 0), 1e-3, 1000, true, 2, &e);
	cr_assert_float_eq(e.emulator_cores, (1000.0 / 3 + 100 + 250 + 1000) * 12 * CPUNEED_NFQ_PACKET_S, 1e-9);
	cr_assert_float_eq(e.need_cores, e.workers_cores + e.emulator_cores, 1e-12);
	cpuneed_estimate(plan_run(p, 0), 1e-3, 1000, false, 1, &e);
	cr_assert(e.over, "1.68 cores on 1");
	plan_destroy(&p);
	scenario_destroy(&sc);
}
