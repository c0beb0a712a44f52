/* Placement: the auto partition against a brute-force minimum cut on small instances (for the
 * built-in topologies it must be optimal), capacity always respected, the refinement never worse
 * than the greedy fill on random graphs; the map's errors at their positions; check's view. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/hosts.h"
#include "orchestrator/placement.h"
#include "orchestrator/plan.h"
#include "orchestrator/scenario.h"

/* The slow, obviously right reference: every assignment within cores, the smallest cut. */
static size_t brute_min_cut(const struct placement_edge *e, size_t ne, size_t n, const uint32_t *cores,
			    size_t nh)
{
	uint32_t host_of[12], load[8];
	size_t best = (size_t)-1, total = 1;
	for (size_t i = 0; i < n; i++)
		total *= nh;
	for (size_t code = 0; code < total; code++) {
		size_t c = code;
		memset(load, 0, sizeof load);
		bool ok = true;
		for (size_t i = 0; i < n; i++) {
			host_of[i] = (uint32_t)(c % nh);
			c /= nh;
			if (++load[host_of[i]] > cores[host_of[i]])
				ok = false;
		}
		if (ok) {
			size_t cut = placement_cut(e, ne, host_of);
			if (cut < best)
				best = cut;
		}
	}
	return best;
}

static void check_capacity(const uint32_t *host_of, size_t n, const uint32_t *cores, size_t nh)
{
	uint32_t load[8] = { 0 };
	for (size_t i = 0; i < n; i++) {
		cr_assert_lt(host_of[i], nh);
		load[host_of[i]]++;
	}
	for (size_t h = 0; h < nh; h++)
		cr_assert_leq(load[h], cores[h], "host %zu holds %u > %u cores", h, load[h], cores[h]);
}

Test(placement, edges_of_topologies)
{
	enum scenario_role r[5] = { SCENARIO_ROLE_SERVER, SCENARIO_ROLE_WORKER, SCENARIO_ROLE_WORKER,
				    SCENARIO_ROLE_WORKER, SCENARIO_ROLE_WORKER };
	struct placement_edge *e;
	size_t ne;
	cr_assert_eq(placement_edges(SCENARIO_TOPO_PS, r, 5, &e, &ne), 0);
	cr_expect_eq(ne, 4);
	for (size_t i = 0; i < ne; i++)
		cr_expect(e[i].a == 0 && e[i].b == i + 1);
	free(e);
	for (int i = 0; i < 5; i++)
		r[i] = SCENARIO_ROLE_PEER;
	cr_assert_eq(placement_edges(SCENARIO_TOPO_P2P, r, 5, &e, &ne), 0);
	cr_expect_eq(ne, 10);
	free(e);
	cr_assert_eq(placement_edges(SCENARIO_TOPO_ALLREDUCE, r, 5, &e, &ne), 0);
	cr_expect_eq(ne, 5, "a ring of 5 has 5 edges");
	free(e);
	cr_assert_eq(placement_edges(SCENARIO_TOPO_ALLREDUCE, r, 2, &e, &ne), 0);
	cr_expect_eq(ne, 1, "a ring of 2 is one edge");
	free(e);
	r[0] = SCENARIO_ROLE_CENTRAL;
	cr_assert_eq(placement_edges(SCENARIO_TOPO_CENTRALIZED, r, 1, &e, &ne), 0);
	cr_expect_eq(ne, 0);
	cr_expect_null(e);
}

Test(placement, optimal_on_builtin_topologies)
{
	srand(7);
	enum scenario_topology topos[] = { SCENARIO_TOPO_PS, SCENARIO_TOPO_P2P, SCENARIO_TOPO_ALLREDUCE };
	for (int iter = 0; iter < 300; iter++) {
		size_t nh = 2 + (size_t)(rand() % 2), n = 2 + (size_t)(rand() % 7);
		uint32_t cores[4], total = 0;
		for (size_t h = 0; h < nh; h++)
			total += cores[h] = 1 + (uint32_t)(rand() % 5);
		if (n > total)
			n = total;
		enum scenario_topology t = topos[iter % 3];
		enum scenario_role roles[12];
		size_t servers = t == SCENARIO_TOPO_PS ? 1 + (size_t)(rand() % 2) : 0;
		if (servers >= n)
			servers = 1;
		for (size_t i = 0; i < n; i++)
			roles[i] = t != SCENARIO_TOPO_PS ? SCENARIO_ROLE_PEER :
				   i < servers ? SCENARIO_ROLE_SERVER : SCENARIO_ROLE_WORKER;
		struct placement_edge *e;
		size_t ne;
		uint32_t host_of[12];
		cr_assert_eq(placement_edges(t, roles, n, &e, &ne), 0);
		cr_assert_eq(placement_auto(e, ne, roles, n, cores, nh, host_of), 0);
		check_capacity(host_of, n, cores, nh);
		size_t want = brute_min_cut(e, ne, n, cores, nh);
		cr_expect_eq(placement_cut(e, ne, host_of), want, "iter %d topo %d n %zu hosts %zu: cut %zu, min %zu",
			     iter, t, n, nh, placement_cut(e, ne, host_of), want);
		free(e);
	}
}

Test(placement, refinement_never_worse_on_random_graphs)
{
	srand(11);
	for (int iter = 0; iter < 200; iter++) {
		size_t n = 4 + (size_t)(rand() % 7), nh = 2 + (size_t)(rand() % 2);
		uint32_t cores[4] = { 0 }, total = 0;
		for (size_t h = 0; h < nh; h++)
			total += cores[h] = 2 + (uint32_t)(rand() % 4);
		if (n > total)
			n = total;
		struct placement_edge e[64];
		size_t ne = 0;
		for (uint32_t a = 0; a < n; a++)
			for (uint32_t b = a + 1; b < n; b++)
				if (rand() % 3 == 0 && ne < 64)
					e[ne++] = (struct placement_edge){ a, b };
		enum scenario_role roles[12];
		for (size_t i = 0; i < n; i++)
			roles[i] = SCENARIO_ROLE_PEER;
		uint32_t refined[12], greedy[12];
		cr_assert_eq(placement_auto(e, ne, roles, n, cores, nh, refined), 0);
		cr_assert_eq(placement_auto(NULL, 0, roles, n, cores, nh, greedy), 0);
		check_capacity(refined, n, cores, nh);
		cr_expect_leq(placement_cut(e, ne, refined), placement_cut(e, ne, greedy), "iter %d", iter);
		cr_expect_geq(placement_cut(e, ne, refined), brute_min_cut(e, ne, n, cores, nh));
	}
}

Test(placement, too_many_nodes)
{
	enum scenario_role roles[5] = { 0 };
	uint32_t cores[2] = { 2, 2 }, host_of[5];
	cr_expect_eq(placement_auto(NULL, 0, roles, 5, cores, 2, host_of), -ENOSPC);
}

/* a scenario with hosts -> its plan's first run placed */
static struct placement *place(const char *y, char *err, struct scenario **sc, struct plan **plan)
{
	*sc = scenario_parse(y, strlen(y), "p.yaml", err, SCENARIO_ERR_MAX);
	cr_assert(*sc, "%s", err);
	*plan = plan_new(*sc, err, SCENARIO_ERR_MAX);
	cr_assert(*plan, "%s", err);
	cr_assert((*sc)->hosts);
	return placement_new((*sc)->hosts, plan_run(*plan, 0), err, SCENARIO_ERR_MAX);
}

#define HOSTS3 "hosts:\n  list:\n" \
	"    - {name: a, address: 198.18.200.1, cores: 2}\n" \
	"    - {name: b, address: 198.18.200.2, cores: 4}\n" \
	"    - {name: c, address: 198.18.200.3, cores: 3}\n"

Test(placement, ps_keeps_server_with_most_workers)
{
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc;
	struct plan *plan;
	struct placement *p = place("stop: {time: 10s}\nworkers: 6\n" HOSTS3, err, &sc, &plan);
	cr_assert(p, "%s", err);
	const struct plan_run *run = plan_run(plan, 0);
	cr_assert_eq(p->n_nodes, 7);
	cr_assert_str_eq(run->nodes[0].name, "server0");
	cr_expect_eq(p->host_of[0], 1, "the server goes to the host with most cores");
	size_t with_server = 0;
	for (size_t i = 1; i < 7; i++)
		with_server += p->host_of[i] == 1;
	cr_expect_eq(with_server, 3, "3 workers fill the server's 4 cores");
	cr_expect_eq(p->n_edges, 6);
	cr_expect_eq(p->n_cross, 3);

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_eq(placement_print(f, p, sc->hosts, run), 0);
	fclose(f);
	cr_expect(strstr(buf, "host b 198.18.200.2 (root@198.18.200.2, 4 cores): 4 nodes server0 worker0 worker1 worker2\n"),
		  "%s", buf);
	cr_expect(strstr(buf, "cross-host links: 3 of 6\n"), "%s", buf);
	cr_expect(strstr(buf, "      server0 (b) - worker3 (c)\n"), "%s", buf);
	free(buf);
	placement_destroy(&p);
	cr_expect_null(p);
	plan_destroy(&plan);
	scenario_destroy(&sc);
}

Test(placement, map_places_and_counts)
{
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc;
	struct plan *plan;
	struct placement *p = place("stop: {time: 10s}\nworkers: 4\n" HOSTS3
				    "  placement: {server0: a, 'worker[0-1]': b, 'worker[2-3]': c}\n", err, &sc, &plan);
	cr_assert(p, "%s", err);
	uint32_t want[5] = { 0, 1, 1, 2, 2 };
	for (int i = 0; i < 5; i++)
		cr_expect_eq(p->host_of[i], want[i], "node %d", i);
	cr_expect_eq(p->n_cross, 4);
	placement_destroy(&p);
	plan_destroy(&plan);
	scenario_destroy(&sc);
}

static void map_error(const char *placement, const char *want_prefix, const char *substr)
{
	char err[SCENARIO_ERR_MAX], y[1024];
	struct scenario *sc;
	struct plan *plan;
	snprintf(y, sizeof y, "stop: {time: 10s}\nworkers: 4\n" HOSTS3 "%s", placement);
	struct placement *p = place(y, err, &sc, &plan);
	cr_expect_null(p);
	cr_expect(!strncmp(err, want_prefix, strlen(want_prefix)), "want %s got %s", want_prefix, err);
	cr_expect(strstr(err, substr), "want '%s' in %s", substr, err);
	placement_destroy(&p);
	plan_destroy(&plan);
	scenario_destroy(&sc);
}

Test(placement, map_errors)
{
	map_error("  placement: {server0: a, worker9: b}\n", "p.yaml:8:27: error: ", "unknown node 'worker9'");
	map_error("  placement: {server0: a, workers: b, worker3: c}\n", "p.yaml:8:39: error: ",
		  "places node worker3 again (already on host 'b' by 'workers'");
	map_error("  placement: {server0: a, 'worker[0-2]': b}\n", "p.yaml:4:3: error: ",
		  "places no host for node worker3");
	map_error("  placement: {'server0,worker0,worker1': a, 'worker[2-3]': b}\n", "p.yaml:5:7: error: ",
		  "puts 3 nodes on host 'a', which has 2 cores");
}

Test(placement, more_nodes_than_cores)
{
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc;
	struct plan *plan;
	struct placement *p = place("stop: {time: 10s}\nworkers: 9\n" HOSTS3, err, &sc, &plan);
	cr_expect_null(p);
	cr_expect(strstr(err, "p.yaml:4:3: error: run") && strstr(err, "has 10 nodes but the hosts have 9 cores"),
		  "%s", err);
	plan_destroy(&plan);
	scenario_destroy(&sc);
}
