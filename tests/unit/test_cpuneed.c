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
	/* step 1 ms of gradient, 1000 parameters (8000 bytes of messages a step: m seconds on a
	 * core); worker0 3 ms + m, worker1 1 ms + m on a core of 10 ms + m, worker2 capped at
	 * 0.25, worker3 busy all the time; the server handles m per step of every worker */
	const double m = CPUNEED_MSG_FLOOR_S + 8000 * CPUNEED_MSG_S_PER_BYTE;
	double w1 = (1e-3 + m) / (10e-3 + m), w2 = 0.25;
	double steps = 1 / (3e-3 + m) + w1 / (1e-3 + m) + w2 / (1e-3 + m) + 1 / (1e-3 + m);

	cpuneed_estimate(plan_run(p, 0), 1e-3, 1000, false, 2, &e);
	cr_assert_float_eq(e.servers_cores, steps * m, 1e-9);
	cr_assert_float_eq(e.workers_cores, 1 + w1 + w2 + 1 + steps * m, 1e-9);
	cr_assert_float_eq(e.emulator_cores, 0, 1e-12);
	cr_assert(e.over, "%g cores on 2", e.need_cores);
	/* nfq, unshaped links: the emulator sees none of it */
	cpuneed_estimate(plan_run(p, 0), 1e-3, 1000, true, 8, &e);
	cr_assert_float_eq(e.emulator_cores, 0, 1e-12);
	plan_destroy(&p);
	scenario_destroy(&sc);
	/* the same with 1% loss (no delay: the same step lengths) on every link: 8000 bytes a
	 * step = 6 packets, 2 directions each, at the assumed packet cost */
	sc = load("model: {kind: softmax}\nworkers: 4\nnetwork: {default: {loss: 1%}}\n"
		  "stragglers:\n"
		  "  - {nodes: worker0, compute: {slowdown: 3}}\n"
		  "  - {nodes: worker1, compute: {delay: {dist: constant, value: 9ms}}}\n"
		  "resources: [{nodes: worker2, cpu: 0.25}]\n");
	p = plan_new(sc, err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	cpuneed_estimate(plan_run(p, 0), 1e-3, 1000, true, 8, &e);
	cr_assert_float_eq(e.emulator_cores, steps * 12 * CPUNEED_NFQ_PACKET_S, 1e-9);
	cr_assert_float_eq(e.need_cores, e.workers_cores + e.emulator_cores, 1e-12);
	cr_assert_not(e.over);
	plan_destroy(&p);
	scenario_destroy(&sc);
}
