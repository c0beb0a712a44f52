/* orchestrator/scenario, topology fleet: the node list (registry, device0..), the fleet: keys
 * and their defaults, what the node configuration carries, selectors addressing devices like
 * workers, and every bad fleet: value refused at its FILE:LINE:COL. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/kv.h"
#include "orchestrator/nodeconf.h"
#include "orchestrator/plan.h"
#include "orchestrator/scenario.h"

#define HEAD "stop: {time: 30s}\ntopology: {kind: fleet}\nworkers: 3\n"

static struct scenario *parse(const char *yaml, char *err, size_t len)
{
	return scenario_parse(yaml, strlen(yaml), "f.yaml", err, len);
}

Test(scenario_fleet, nodes_and_defaults)
{
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc = parse(HEAD, err, sizeof err);
	struct scenario_node *n;
	size_t count;

	cr_assert_not_null(sc, "%s", err);
	cr_assert_eq(sc->topology.kind, SCENARIO_TOPO_FLEET);
	cr_assert_eq(sc->fleet.strategy, SCENARIO_FLEET_DELTA);
	cr_assert_eq(sc->fleet.sync_steps, 20);
	cr_assert_eq(sc->fleet.snapshot_every, 10);
	cr_assert_eq(scenario_node_list(sc, &n, &count), 0);
	cr_assert_eq(count, 4);
	cr_assert_str_eq(n[0].name, "registry");
	cr_assert_eq(n[0].role, SCENARIO_ROLE_REGISTRY);
	cr_assert_str_eq(n[3].name, "device2");
	cr_assert_eq(n[3].role, SCENARIO_ROLE_DEVICE);
	cr_assert_str_eq(scenario_role_name(SCENARIO_ROLE_DEVICE), "device");
	free(n);
	scenario_destroy(&sc);
}

Test(scenario_fleet, keys_plan_and_conf)
{
	static const char y[] = HEAD
		"fleet: {strategy: sparse, sync: 2s, snapshot_every: 4, sparse_k: 5%}\n"
		"network:\n  links:\n    - {nodes: workers, delay: 100ms}\n"
		"stragglers:\n  - {nodes: registry, crash: {at: 5s, restart: 8s}}\n"
		"  - {nodes: 'device[1-2]', compute: {slowdown: 2}}\n";
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc = parse(y, err, sizeof err);
	struct plan *p;
	struct nodeconf_ctx ctx = { .run_dir = "/tmp/r", .port_data = 7000 };
	struct kv *kv;

	cr_assert_not_null(sc, "%s", err);
	cr_assert_eq(sc->fleet.strategy, SCENARIO_FLEET_SPARSE);
	cr_assert_eq(sc->fleet.sync_us, 2000000);
	cr_assert_eq(sc->fleet.sync_steps, 0);
	cr_assert_eq(sc->fleet.sparse_ppm, 50000);
	p = plan_new(sc, err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	const struct plan_run *r = plan_run(p, 0);
	cr_assert_eq(r->n_nodes, 4);
	/* 'workers' selects the devices, not the registry. */
	cr_assert_eq(r->nodes[0].up.delay_us, 0);
	cr_assert_eq(r->nodes[1].up.delay_us, 100000);
	cr_assert(r->nodes[0].straggler.set & SCENARIO_STRAG_CRASH);
	cr_assert(r->nodes[3].straggler.set & SCENARIO_STRAG_SLOWDOWN);
	kv = nodeconf_build(r, 2, &ctx, NULL);
	cr_assert_not_null(kv);
	cr_assert_str_eq(kv_get(kv, "node.role"), "device");
	cr_assert_str_eq(kv_get(kv, "node.index"), "1");
	cr_assert_str_eq(kv_get(kv, "workers.count"), "3");
	cr_assert_str_eq(kv_get(kv, "servers.names"), "registry");
	cr_assert_str_eq(kv_get(kv, "topology.kind"), "fleet");
	cr_assert_str_eq(kv_get(kv, "fleet.strategy"), "sparse");
	cr_assert_str_eq(kv_get(kv, "fleet.sync_s"), "2.000000");
	cr_assert_str_eq(kv_get(kv, "fleet.sparse_fraction"), "0.05");
	cr_assert_str_eq(kv_get(kv, "fleet.snapshot_every"), "4");
	kv_destroy(&kv);
	plan_destroy(&p);
	scenario_destroy(&sc);
}

/* fleet.drift: parsed per entry, resolved per device into the node configuration (every
 * device's list in every node's configuration, entries in file order). */
Test(scenario_fleet, drift_schedule)
{
	static const char y[] = HEAD
		"fleet:\n  drift:\n"
		"    - {at: 20s, devices: device0, add_classes: [7, 8]}\n"
		"    - {at: 400 steps, devices: 'device[0-1]', add_classes: [9]}\n";
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc = parse(y, err, sizeof err);
	struct nodeconf_ctx ctx = { .run_dir = "/tmp/r", .port_data = 7000 };
	struct plan *p;
	struct kv *kv;

	cr_assert_not_null(sc, "%s", err);
	cr_assert_eq(sc->fleet.n_drift, 2);
	cr_assert_eq(sc->fleet.drift[0].at_us, 20000000);
	cr_assert(!sc->fleet.drift[0].by_steps);
	cr_assert_eq(sc->fleet.drift[0].classes, (1u << 7) | (1u << 8));
	cr_assert(sc->fleet.drift[1].by_steps);
	cr_assert_eq(sc->fleet.drift[1].at_steps, 400);
	cr_assert_eq(sc->fleet.drift[1].classes, 1u << 9);
	p = plan_new(sc, err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	kv = nodeconf_build(plan_run(p, 0), 0, &ctx, NULL); /* the registry */
	cr_assert_not_null(kv);
	cr_assert_str_eq(kv_get(kv, "fleet.drift.0"), "t20.000000:7,8;s400:9");
	cr_assert_str_eq(kv_get(kv, "fleet.drift.1"), "s400:9");
	cr_assert_str_eq(kv_get(kv, "fleet.drift.2"), "");
	kv_destroy(&kv);
	kv = nodeconf_build(plan_run(p, 0), 2, &ctx, NULL); /* device1 */
	cr_assert_str_eq(kv_get(kv, "fleet.drift.1"), "s400:9");
	kv_destroy(&kv);
	plan_destroy(&p);
	scenario_destroy(&sc);
}

struct bad {
	const char *yaml;
	unsigned line, col;
	const char *substr;
};

static const struct bad cases[] = {
	{ HEAD "fleet: {strategy: zip}\n", 4, 19, "fleet.strategy 'zip' is not one of the choices" },
	{ HEAD "fleet: {sync: 0 steps}\n", 4, 15, "step count" },
	{ HEAD "fleet: {sync: 5 stepz}\n", 4, 15, "fleet.sync" },
	{ HEAD "fleet: {sync: 1ms}\n", 4, 15, "below 10ms" },
	{ HEAD "fleet: {snapshot_every: 0}\n", 4, 25, "out of range" },
	{ HEAD "fleet: {sparse_k: 10}\n", 4, 19, "applies to strategy sparse" },
	{ HEAD "fleet: {strategy: sparse, sparse_k: 0%}\n", 4, 37, "sends nothing" },
	{ HEAD "fleet: {base: file}\n", 4, 15, "needs fleet.base_file" },
	{ HEAD "fleet: {base_steps: 5}\n", 4, 21, "applies to base trained" },
	{ HEAD "fleet: {base: trained, base_steps: 0}\n", 4, 36, "out of range" },
	{ HEAD "fleet: {stratgy: full}\n", 4, 9, "did you mean 'strategy'?" },
	{ HEAD "fleet: {registry: mesh}\n", 4, 19, "fleet.registry 'mesh' is not one of the choices" },
	{ HEAD "fleet: {peers: 1}\n", 4, 16, "applies to registry peers" },
	{ HEAD "fleet: {registry: peers, peers: 0}\n", 4, 33, "out of range" },
	{ HEAD "fleet: {registry: peers, peers: 3}\n", 4, 33, "a device has 2 peers (expected 1..2)" },
	{ "stop: {time: 30s}\ntopology: {kind: fleet}\nworkers: 1\nfleet: {registry: peers}\n", 4, 19,
	  "at least 2 devices" },
	{ HEAD "fleet: {drift: [{at: 5s, devices: device0, add_classes: [10]}]}\n", 4, 58, "out of range" },
	{ HEAD "fleet: {drift: [{at: 5s, devices: device0, add_classes: [3, 3]}]}\n", 4, 61, "listed twice" },
	{ HEAD "fleet: {drift: [{at: 5s, devices: device0, add_classes: []}]}\n", 4, 57, "is empty" },
	{ HEAD "fleet: {drift: [{at: 5s, devices: registry, add_classes: [1]}]}\n", 4, 35, "not a device" },
	{ HEAD "fleet: {drift: [{at: 5s, devices: device7, add_classes: [1]}]}\n", 4, 35, "device7" },
	{ HEAD "fleet: {drift: [{at: 5 stepz, devices: device0, add_classes: [1]}]}\n", 4, 22, "at" },
	{ HEAD "fleet: {drift: [{devices: device0, add_classes: [1]}]}\n", 4, 17, "needs at, devices and add_classes" },
	{ HEAD "fleet: {drift: [{at: 1s, device: device0, add_classes: [1]}]}\n", 4, 26, "did you mean 'devices'?" },
	{ "stop: {time: 30s}\nfleet: {strategy: full}\n", 2, 8, "applies to topology fleet" },
	{ "stop: {time: 30s}\ntopology: {kind: fleet}\nnodes:\n  - {name: a, role: device}\n", 4, 3,
	  "exactly one node with role registry" },
};

/* base trained: accepted, its step count reaches the registry's configuration. */
Test(scenario_fleet, base_trained)
{
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc = parse(HEAD "fleet: {base: trained, base_steps: 120}\n", err, sizeof err);

	cr_assert_not_null(sc, "%s", err);
	cr_assert_eq(sc->fleet.base, SCENARIO_FLEET_BASE_TRAINED);
	cr_assert_eq(sc->fleet.base_steps, 120);
	scenario_destroy(&sc);
	sc = parse(HEAD "fleet: {base: trained}\n", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	cr_assert_eq(sc->fleet.base_steps, 200);
	scenario_destroy(&sc);
}

Test(scenario_fleet, errors_at_their_position)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char err[SCENARIO_ERR_MAX], want[64];
		struct scenario *sc = parse(cases[i].yaml, err, sizeof err);

		cr_assert_null(sc, "case %zu accepted", i);
		snprintf(want, sizeof want, "f.yaml:%u:%u: error:", cases[i].line, cases[i].col);
		cr_expect(!strncmp(err, want, strlen(want)), "case %zu: '%s' (want %s)", i, err, want);
		cr_expect(strstr(err, cases[i].substr), "case %zu: '%s' lacks '%s'", i, err, cases[i].substr);
	}
}

/* fleet.registry peers: parsed, the default of 2 peers (1 in a fleet of 2), carried to every
 * node's configuration; central by default. */
Test(scenario_fleet, registry_peers)
{
	static const char y[] = HEAD "fleet: {registry: peers}\n";
	static const char y2[] = "stop: {time: 30s}\ntopology: {kind: fleet}\nworkers: 2\n"
				 "fleet: {registry: peers}\n";
	static const char y3[] = HEAD "fleet: {registry: peers, peers: 1}\n";
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc = parse(HEAD, err, sizeof err);
	struct nodeconf_ctx ctx = { .run_dir = "/tmp/r", .port_data = 7000 };
	struct plan *p;
	struct kv *kv;

	cr_assert_not_null(sc, "%s", err);
	cr_assert_eq(sc->fleet.registry, SCENARIO_FLEET_REGISTRY_CENTRAL);
	scenario_destroy(&sc);
	sc = parse(y, err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	cr_assert_eq(sc->fleet.registry, SCENARIO_FLEET_REGISTRY_PEERS);
	cr_assert_eq(sc->fleet.peers, 2);
	p = plan_new(sc, err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	kv = nodeconf_build(plan_run(p, 0), 0, &ctx, NULL);
	cr_assert_not_null(kv);
	cr_assert_str_eq(kv_get(kv, "fleet.registry"), "peers");
	cr_assert_str_eq(kv_get(kv, "fleet.peers"), "2");
	kv_destroy(&kv);
	plan_destroy(&p);
	scenario_destroy(&sc);
	sc = parse(y2, err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	cr_assert_eq(sc->fleet.peers, 1);
	scenario_destroy(&sc);
	sc = parse(y3, err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	cr_assert_eq(sc->fleet.peers, 1);
	scenario_destroy(&sc);
}
