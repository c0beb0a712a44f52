/* tests/support/simrun: see the header. */
#include "tests/support/simrun.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "orchestrator/plan.h"
#include "orchestrator/scenario.h"
#include "tests/support/files.h"

void support_simulate_text(const char *text, const char *dir, struct sim_result *res)
{
	char err[512], path[4200];
	struct scenario *sc = scenario_parse(text, strlen(text), "c.yaml", err, sizeof err);
	struct plan *p;
	struct sim_opts o;

	cr_assert_not_null(sc, "%s", err);
	p = plan_new(sc, err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	snprintf(path, sizeof path, "%s/nodes", dir);
	support_mkdirs(path);
	o = (struct sim_opts){ .run = plan_run(p, 0), .dir = dir, .step_cost_ns = 1000000, .server_cost_ns = 20000 };
	cr_assert_eq(sim_run(&o, res, err, sizeof err), 0, "%s", err);
	plan_destroy(&p);
	scenario_destroy(&sc);
}
