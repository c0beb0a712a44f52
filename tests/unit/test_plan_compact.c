/* Compact plans (plan_new_compact): through the plan_node_* accessors every node reads exactly
 * as in the full plan of the same scenario (names, roles, links, stragglers, resources, the
 * timeline); nodes matched by the same entries share one profile; errors are the full plan's. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/plan.h"

static struct scenario *parse(const char *y)
{
	char err[SCENARIO_ERR_MAX] = "";
	struct scenario *sc = scenario_parse(y, strlen(y), "p.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	return sc;
}

static bool same_link(const struct link_params *a, const struct link_params *b)
{
	return a->set == b->set && a->delay_us == b->delay_us && a->jitter_us == b->jitter_us &&
	       a->dist == b->dist && a->delay_corr_ppm == b->delay_corr_ppm && a->loss_model == b->loss_model &&
	       a->loss_ppm == b->loss_ppm && a->loss_corr_ppm == b->loss_corr_ppm && a->ge_p_ppm == b->ge_p_ppm &&
	       a->ge_r_ppm == b->ge_r_ppm && a->ge_1h_ppm == b->ge_1h_ppm && a->ge_1k_ppm == b->ge_1k_ppm &&
	       a->dup_ppm == b->dup_ppm && a->dup_corr_ppm == b->dup_corr_ppm && a->reorder_ppm == b->reorder_ppm &&
	       a->reorder_corr_ppm == b->reorder_corr_ppm && a->gap == b->gap && a->corrupt_ppm == b->corrupt_ppm &&
	       a->corrupt_corr_ppm == b->corrupt_corr_ppm && a->rate_bps == b->rate_bps &&
	       a->limit_pkts == b->limit_pkts;
}

/* Strings of the two plans' own scenario copies: equal text. */
static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static bool same_straggler(const struct scenario_straggler *a, const struct scenario_straggler *b)
{
	return same_str(a->nodes, b->nodes) && a->pos.line == b->pos.line && a->pos.col == b->pos.col && a->set == b->set &&
	       a->slowdown == b->slowdown && a->delay_dist == b->delay_dist && a->delay_a == b->delay_a &&
	       a->delay_b == b->delay_b && same_str(a->trace, b->trace) && a->pause_every_us == b->pause_every_us &&
	       a->pause_for_us == b->pause_for_us && a->crash_at_us == b->crash_at_us &&
	       a->restart_at_us == b->restart_at_us && a->join_at_us == b->join_at_us &&
	       a->leave_at_us == b->leave_at_us;
}

static bool same_resources(const struct scenario_resources *a, const struct scenario_resources *b)
{
	return same_str(a->nodes, b->nodes) && a->pos.line == b->pos.line && a->pos.col == b->pos.col && a->set == b->set &&
	       a->cpu == b->cpu && !memcmp(a->cpus, b->cpus, sizeof a->cpus) && a->memory_bytes == b->memory_bytes;
}

/* Every run of sc: the compact plan's accessors against the full plan's nodes. Returns the
 * number of profiles of run 0 (0 when that run fell back to full nodes). */
static size_t same_as_full(const struct scenario *sc)
{
	char err[SCENARIO_ERR_MAX] = "";
	struct plan *full = plan_new(sc, err, sizeof err), *cp;
	size_t profiles;

	cr_assert_not_null(full, "%s", err);
	cp = plan_new_compact(sc, err, sizeof err);
	cr_assert_not_null(cp, "%s", err);
	cr_assert_eq(plan_n_runs(cp), plan_n_runs(full));
	for (size_t k = 0; k < plan_n_runs(full); k++) {
		const struct plan_run *f = plan_run(full, k), *c = plan_run(cp, k);

		cr_assert_str_eq(c->id, f->id);
		cr_assert_eq(c->seed, f->seed);
		cr_assert_eq(c->n_nodes, f->n_nodes);
		for (size_t i = 0; i < f->n_nodes; i++) {
			const struct plan_node *n = &f->nodes[i];
			char buf[SCENARIO_NODE_NAME_MAX];

			cr_assert_str_eq(plan_node_name(c, i, buf, sizeof buf), n->name, "node %zu", i);
			cr_assert_str_eq(plan_node_name(f, i, buf, sizeof buf), n->name);
			cr_assert_eq(plan_node_role(c, i), n->role, "%s", n->name);
			if (!c->nodes)
				cr_assert_eq(c->cnodes[i].index, n->index, "%s", n->name);
			cr_assert(same_link(plan_node_up(c, i), &n->up), "%s up", n->name);
			cr_assert(same_link(plan_node_down(c, i), &n->down), "%s down", n->name);
			cr_assert(same_straggler(plan_node_straggler(c, i), &n->straggler), "%s straggler", n->name);
			cr_assert(same_resources(plan_node_resources(c, i), &n->resources), "%s resources", n->name);
		}
		cr_assert_eq(c->n_events, f->n_events);
		for (size_t e = 0; e < f->n_events; e++)
			cr_assert(c->events[e].at_us == f->events[e].at_us && c->events[e].node == f->events[e].node &&
				  same_link(&c->events[e].up, &f->events[e].up) &&
				  same_link(&c->events[e].down, &f->events[e].down), "event %zu", e);
	}
	profiles = plan_run(cp, 0)->nodes ? 0 : plan_run(cp, 0)->n_profiles;
	plan_destroy(&full);
	plan_destroy(&cp);
	return profiles;
}

Test(plan_compact, links_stragglers_resources_shared)
{
	struct scenario *sc = parse(
		"stop: {steps: 10}\nworkers: 1000\n"
		"network:\n"
		"  default: {delay: 10ms, loss: 1%, rate: 100mbit}\n"
		"  links:\n"
		"    - {nodes: \"worker[0-299]\", delay: 50ms}\n"
		"    - {nodes: \"worker[200-499]\", loss: 5%, up: {rate: 1mbit}}\n"
		"    - {nodes: worker3, down: {delay: 80ms}}\n"
		"  timeline:\n"
		"    - {at: 60s, nodes: \"worker[1-2]\", loss: 30%}\n"
		"    - {at: 10s, nodes: worker7, delay: 100ms}\n"
		"stragglers:\n"
		"  - {nodes: workers, compute: {slowdown: 2}}\n"
		"  - {nodes: \"worker[0-9]\", compute: {slowdown: 5}, crash: {at: 30s}}\n"
		"resources:\n"
		"  - {nodes: \"worker[900-999]\", cpu: 0.5}\n");
	/* server0 | worker3 | worker0-2,4-9 | 10-199 | 200-299 | 300-499 | 500-899 | 900-999 */
	cr_expect_eq(same_as_full(sc), 8);
	scenario_destroy(&sc);
}

Test(plan_compact, many_workers_one_profile_each_role)
{
	struct scenario *sc = parse("stop: {steps: 10}\nworkers: 20000\nsimulation: {train: none}\n"
				    "stragglers:\n  - {nodes: workers, compute: {delay: {dist: exponential, "
				    "mean: 499ms}}}\n");
	cr_expect_eq(same_as_full(sc), 2, "the servers' and the workers'");
	scenario_destroy(&sc);
}

Test(plan_compact, other_topologies_and_sweeps)
{
	const char *const docs[] = {
		"stop: {steps: 10}\nworkers: 5\ntopology: {kind: p2p}\n",
		"stop: {steps: 10}\nworkers: 5\nworkload: linkcheck\n",
		"stop: {steps: 10}\nworkers: 4\ntopology: {kind: fleet}\n",
		"stop: {steps: 10}\ntopology: {kind: centralized}\n",
		"stop: {steps: 10}\nsweep: {workers: [2, 40], consistency.barrier: [bsp, asp], repeat: 2}\n"
		"stragglers:\n  - {nodes: worker1, compute: {slowdown: 3}}\n",
	};
	/* p2p, fleet and centralized runs are full (the simulator's p2p and ring drivers read
	 * per-node copies); a parameter server's, linkcheck's and a sweep's stay compact */
	const bool compact[] = { false, true, false, false, true };
	for (size_t d = 0; d < sizeof docs / sizeof *docs; d++) {
		struct scenario *sc = parse(docs[d]);
		if (compact[d])
			cr_expect_gt(same_as_full(sc), 0, "doc %zu stays compact", d);
		else
			cr_expect_eq(same_as_full(sc), 0, "doc %zu is a full plan", d);
		scenario_destroy(&sc);
	}
}

Test(plan_compact, listed_nodes_keep_their_names)
{
	struct scenario *sc = parse("stop: {steps: 10}\n"
				    "nodes:\n  - {name: ps, role: server}\n  - {name: alpha, role: worker}\n"
				    "  - {name: beta, role: worker}\n"
				    "network:\n  links:\n    - {nodes: beta, delay: 5ms}\n");
	cr_expect_eq(same_as_full(sc), 2);
	scenario_destroy(&sc);
}

Test(plan_compact, errors_are_the_full_plans)
{
	const char *const docs[] = {
		"stop: {steps: 10}\nworkers: 3\nnetwork:\n  links:\n    - {nodes: worker9, delay: 5ms}\n",
		"stop: {steps: 10}\nworkers: 3\nnetwork:\n  links:\n    - {nodes: worker1, reorder: 5%}\n",
	};
	for (size_t d = 0; d < sizeof docs / sizeof *docs; d++) {
		char e1[SCENARIO_ERR_MAX] = "", e2[SCENARIO_ERR_MAX] = "";
		struct scenario *sc = scenario_parse(docs[d], strlen(docs[d]), "p.yaml", e1, sizeof e1);
		struct plan *p1 = NULL, *p2 = NULL;

		if (!sc)
			continue;       /* refused at load time already: nothing for the plan to say */
		p1 = plan_new(sc, e1, sizeof e1);
		p2 = plan_new_compact(sc, e2, sizeof e2);
		cr_expect_eq(p1 == NULL, p2 == NULL, "doc %zu", d);
		cr_expect_str_eq(e2, e1, "doc %zu", d);
		plan_destroy(&p1);
		plan_destroy(&p2);
		scenario_destroy(&sc);
	}
}

Test(plan_compact, print_wants_a_full_plan)
{
	struct scenario *sc = parse("stop: {steps: 10}\nworkers: 3\n");
	char err[SCENARIO_ERR_MAX] = "";
	struct plan *p = plan_new_compact(sc, err, sizeof err);
	FILE *devnull = fopen("/dev/null", "w");

	cr_assert_not_null(p, "%s", err);
	cr_assert_not_null(devnull);
	cr_expect_null(plan_run(p, 0)->nodes);
	cr_expect_eq(plan_run(p, 0)->n_nodes, 4);
	cr_expect_eq(plan_print(devnull, p), -EINVAL);
	fclose(devnull);
	plan_destroy(&p);
	scenario_destroy(&sc);
}
