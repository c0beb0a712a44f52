/* orchestrator/scenario: the scenario language, from a file to a validated struct scenario.
 *
 * Design:
 * - The tree (orchestrator/yamltree) is the source of truth; the struct is derived from it by
 *   convert(). --set edits the tree (orchestrator/scenset) and converts again, so an override is
 *   validated exactly like the file, and scenario_write_yaml re-emits the tree with overrides
 *   applied.
 * - Conversion stops at the first error and reports it at the position of the value (or key)
 *   at fault (orchestrator/scenval). Values that came from --set carry an origin string instead
 *   of a position.
 * - This file walks the top level and hands each section to its reader: scenrun (stop,
 *   linkcheck, eval), scentrain (data, model, train, consistency), scentopo (topology, nodes),
 *   scenfleet, scennet (with scenlink for link parameters), scenstrag, scenres, scensim,
 *   scensweep, and orchestrator/hosts for `hosts`. Sections are read in a fixed order, since
 *   some keys only apply to a choice made in an earlier section (fleet to topology fleet).
 * - What needs several sections is checked here, once they are all read: roles against the
 *   topology and workload, counts against barriers and partitions, every node selector against
 *   the node list, and each sweep value on its own (a trial conversion per value). */
#include "orchestrator/scenario.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/hosts.h"
#include "orchestrator/scenfleet.h"
#include "orchestrator/scenlink.h"
#include "orchestrator/scennames.h"
#include "orchestrator/scennet.h"
#include "orchestrator/scenres.h"
#include "orchestrator/scenrun.h"
#include "orchestrator/scenset.h"
#include "orchestrator/scensim.h"
#include "orchestrator/scenstrag.h"
#include "orchestrator/scensweep.h"
#include "orchestrator/scentopo.h"
#include "orchestrator/scentrain.h"
#include "orchestrator/scenval.h"
#include "orchestrator/selector.h"
#include "orchestrator/yamltree.h"

struct scenario_doc {
	struct yamltree_node *root;
	char *basedir;          /* directory of the scenario file, for relative paths; NULL = cwd */
};

/* --- enum names ---------------------------------------------------------------------------- */

const char *scenario_role_name(enum scenario_role r) { return scennames_of(scennames_role, r); }
const char *scenario_barrier_name(enum scenario_barrier b) { return scennames_of(scennames_barrier, b); }
const char *scenario_topology_name(enum scenario_topology k) { return scennames_of(scennames_topology, k); }
const char *scenario_model_name(enum scenario_model k) { return scennames_of(scennames_model, k); }
const char *scenario_partition_name(enum scenario_partition s) { return scennames_of(scennames_partition, s); }
const char *scenario_data_set_name(enum scenario_data_set s) { return scennames_of(scennames_data_set, s); }
const char *scenario_lr_schedule_name(enum scenario_lr_schedule s) { return scennames_of(scennames_lr_schedule, s); }
const char *scenario_weighting_name(enum scenario_weighting w) { return scennames_of(scennames_weighting, w); }
const char *scenario_combine_name(enum scenario_combine c) { return scennames_of(scennames_combine, c); }
const char *scenario_draw_name(enum scenario_draw d) { return scennames_of(scennames_draw, d); }
const char *scenario_dist_name(enum scenario_dist d) { return scennames_of(scennames_dist, d); }
const char *scenario_fleet_strategy_name(enum scenario_fleet_strategy s) { return scennames_of(scennames_fleet_strategy, s); }
const char *scenario_fleet_base_name(enum scenario_fleet_base b) { return scennames_of(scennames_fleet_base, b); }
const char *scenario_fleet_registry_name(enum scenario_fleet_registry r) { return scennames_of(scennames_fleet_registry, r); }
const char *scenario_sim_train_name(enum scenario_sim_train t) { return scennames_of(scennames_sim_train, t); }

/* --- link parameters --------------------------------------------------------------------- */

void scenario_link_merge(struct link_params *dst, const struct link_params *src)
{
	scenlink_merge(dst, src, NULL, NULL);
}

const char *scenario_link_rule(const struct link_params *p)
{
	return scenlink_rule(p);
}

/* --- nodes and cross-section checks -------------------------------------------------------- */

int scenario_node_list(const struct scenario *sc, struct scenario_node **out, size_t *n)
{
	size_t count;
	struct scenario_node *nodes;
	*out = NULL;
	*n = 0;
	if (sc->nodes) {
		if (!(nodes = calloc(sc->n_nodes, sizeof *nodes)))
			return -ENOMEM;
		memcpy(nodes, sc->nodes, sc->n_nodes * sizeof *nodes);
		*out = nodes;
		*n = sc->n_nodes;
		return 0;
	}
	size_t servers = 0;
	const char *prefix;
	enum scenario_role role;
	if (sc->workload == SCENARIO_WORKLOAD_LINKCHECK) {
		prefix = "probe";
		role = SCENARIO_ROLE_PROBE;
		count = sc->workers;
	} else if (sc->topology.kind == SCENARIO_TOPO_CENTRALIZED) {
		prefix = NULL;
		role = SCENARIO_ROLE_CENTRAL;
		count = 1;
	} else if (sc->topology.kind == SCENARIO_TOPO_PS) {
		prefix = "worker";
		role = SCENARIO_ROLE_WORKER;
		servers = sc->topology.servers;
		count = sc->workers;
	} else if (sc->topology.kind == SCENARIO_TOPO_FLEET) {
		prefix = "device";
		role = SCENARIO_ROLE_DEVICE;
		servers = 1;
		count = sc->workers;
	} else {
		prefix = "peer";
		role = SCENARIO_ROLE_PEER;
		count = sc->workers;
	}
	if (!(nodes = calloc(servers + count + 1, sizeof *nodes)))
		return -ENOMEM;
	for (size_t i = 0; i < servers; i++) {
		if (sc->topology.kind == SCENARIO_TOPO_FLEET) {
			snprintf(nodes[i].name, sizeof nodes[i].name, "registry");
			nodes[i].role = SCENARIO_ROLE_REGISTRY;
			continue;
		}
		snprintf(nodes[i].name, sizeof nodes[i].name, "server%zu", i);
		nodes[i].role = SCENARIO_ROLE_SERVER;
	}
	for (size_t i = 0; i < count; i++) {
		struct scenario_node *nd = &nodes[servers + i];
		if (prefix)
			snprintf(nd->name, sizeof nd->name, "%s%zu", prefix, i);
		else
			snprintf(nd->name, sizeof nd->name, "trainer");
		nd->role = role;
	}
	*out = nodes;
	*n = servers + count;
	return 0;
}

static int check_selector(struct scenval *cv, const char *sel, struct scenario_pos pos, const char *origin,
			  const char *const *names, const enum scenario_role *roles, size_t n, uint8_t *scratch)
{
	char why[256];
	memset(scratch, 0, n);
	int rc = selector_match(sel, names, roles, n, scratch, why, sizeof why);
	if (rc == -ENOMEM) {
		struct yamltree_node at = { .line = pos.line, .col = pos.col };
		return scenval_fail(cv, &at, "out of memory");
	}
	if (rc < 0) {
		struct yamltree_node at = { .line = pos.line, .col = pos.col, .origin = (char *)origin };
		return scenval_fail(cv, &at, "nodes '%s': %s", sel, why);
	}
	return 0;
}

/* Origin of a selector value given by --set (so the message names it), else NULL. */
static const char *sel_origin(const struct yamltree_node *root, const char *section, size_t i, bool in_list)
{
	const struct yamltree_node *n = root;
	if (!strcmp(section, "stragglers") || !strcmp(section, "resources"))
		n = yamltree_get(n, section);
	else
		n = yamltree_get(yamltree_get(n, "network"), section);
	if (!n || !in_list || n->kind != YAMLTREE_SEQ || i >= n->n)
		return NULL;
	n = yamltree_get(n->items[i].value, "nodes");
	return n ? n->origin : NULL;
}

static int check_nodes(struct scenval *cv, const struct yamltree_node *root)
{
	struct scenario *sc = cv->sc;
	struct scenario_node *nodes = NULL;
	const char **names = NULL;
	enum scenario_role *roles = NULL;
	uint8_t *scratch = NULL;
	size_t n = 0, data_nodes = 0, servers = 0;
	int rc = 0;

	if (sc->nodes) {
		/* roles must fit the topology and workload */
		for (size_t i = 0; i < sc->n_nodes; i++) {
			enum scenario_role r = sc->nodes[i].role;
			bool ok;
			if (sc->workload == SCENARIO_WORKLOAD_LINKCHECK)
				ok = r == SCENARIO_ROLE_PROBE;
			else if (sc->topology.kind == SCENARIO_TOPO_PS)
				ok = r == SCENARIO_ROLE_SERVER || r == SCENARIO_ROLE_WORKER;
			else if (sc->topology.kind == SCENARIO_TOPO_CENTRALIZED)
				ok = r == SCENARIO_ROLE_CENTRAL;
			else if (sc->topology.kind == SCENARIO_TOPO_FLEET)
				ok = r == SCENARIO_ROLE_REGISTRY || r == SCENARIO_ROLE_DEVICE;
			else
				ok = r == SCENARIO_ROLE_PEER;
			if (!ok) {
				struct yamltree_node at = { .line = sc->nodes[i].pos.line, .col = sc->nodes[i].pos.col };
				return scenval_fail(cv, &at, "node '%s' has role %s, which %s does not use",
						    sc->nodes[i].name, scennames_role[r],
						    sc->workload == SCENARIO_WORKLOAD_LINKCHECK ? "workload linkcheck"
						    : scennames_topology[sc->topology.kind]);
			}
			servers += r == SCENARIO_ROLE_SERVER || r == SCENARIO_ROLE_REGISTRY;
		}
		if (sc->topology.kind == SCENARIO_TOPO_FLEET && sc->workload == SCENARIO_WORKLOAD_TRAIN &&
		    (servers != 1 || servers == sc->n_nodes))
			return scenval_fail(cv, cv->nodes_node,
					    "fleet needs exactly one node with role registry and at "
					    "least one with role device in nodes");
		if (sc->topology.kind == SCENARIO_TOPO_PS && sc->workload == SCENARIO_WORKLOAD_TRAIN &&
		    (servers == 0 || servers == sc->n_nodes))
			return scenval_fail(cv, cv->nodes_node,
					    "parameter-server needs at least one server and one worker "
					    "in nodes");
		if (sc->topology.kind == SCENARIO_TOPO_PS && servers > 1)
			return scenval_fail(cv, cv->nodes_node,
					    "nodes name %zu servers: the parameter server is one node "
					    "(sharding over several is not implemented; expected one role server)", servers);
		if (sc->topology.kind == SCENARIO_TOPO_CENTRALIZED && sc->n_nodes != 1)
			return scenval_fail(cv, cv->nodes_node, "centralized has exactly one node (role central)");
		sc->workers = (uint32_t)(sc->n_nodes - servers);
		sc->topology.servers = (uint32_t)servers;
	} else if (sc->workers + (sc->topology.kind == SCENARIO_TOPO_PS ? sc->topology.servers :
				  sc->topology.kind == SCENARIO_TOPO_FLEET ? 1 : 0) >
		   (sc->simulation.present ? SCENARIO_MAX_SIM_WORKERS : SCENARIO_MAX_NODES)) {
		if (sc->simulation.present)
			return scenval_fail(cv, cv->workers_node,
					    "workers %u + servers %u exceed the limit of %u nodes "
					    "of a simulation (SCENARIO_MAX_SIM_WORKERS)", sc->workers,
					    sc->topology.servers, SCENARIO_MAX_SIM_WORKERS);
		return scenval_fail(cv, cv->workers_node, "workers %u + servers %u exceed the limit of %d nodes "
				    "(SCENARIO_MAX_NODES)", sc->workers, sc->topology.servers, SCENARIO_MAX_NODES);
	}
	data_nodes = sc->topology.kind == SCENARIO_TOPO_CENTRALIZED ? 1 : sc->workers;

	/* What an engine would refuse at run time is refused here, at its line. */
	if (sc->topology.kind == SCENARIO_TOPO_PS && sc->consistency.combine == SCENARIO_COMBINE_ENSEMBLE)
		return scenval_fail(cv, cv->combine_node, "combine ensemble applies to topology p2p (a parameter "
				    "server holds one model; expected none or average)");
	/* Churn the engines cannot survive: a ring all-reduce needs every peer at every step. */
	for (size_t i = 0; i < sc->n_stragglers; i++) {
		const struct scenario_straggler *st = &sc->stragglers[i];
		uint32_t bad = 0;
		const char *why = NULL;

		if (sc->workload != SCENARIO_WORKLOAD_TRAIN)
			break;
		if (sc->topology.kind == SCENARIO_TOPO_ALLREDUCE) {
			bad = st->set & (SCENARIO_STRAG_CRASH | SCENARIO_STRAG_JOIN | SCENARIO_STRAG_LEAVE);
			why = "a ring all-reduce needs every peer at every step (crash, join and leave "
			      "apply to parameter-server)";
		}
		if (bad) {
			struct yamltree_node at = { .line = st->pos.line, .col = st->pos.col };
			return scenval_fail(cv, &at, "%s with topology %s: %s",
					    bad & SCENARIO_STRAG_CRASH ? "crash" : bad & SCENARIO_STRAG_JOIN ? "join" : "leave",
					    scennames_topology[sc->topology.kind], why);
		}
	}
	/* A p2p peer asks its sampled peers for their clocks and waits for their answers: there is
	 * no point at which a held request is judged again, so it draws once per crossing. */
	if (sc->topology.kind == SCENARIO_TOPO_P2P && cv->draw_node && sc->consistency.draw == SCENARIO_DRAW_CHECK &&
	    (sc->consistency.barrier == SCENARIO_BARRIER_PBSP || sc->consistency.barrier == SCENARIO_BARRIER_PSSP))
		return scenval_fail(cv, cv->draw_node, "consistency.draw check with topology p2p: a peer draws its "
				    "sample once per crossing (expected crossing)");
	if (sc->topology.kind == SCENARIO_TOPO_ALLREDUCE && sc->consistency.barrier != SCENARIO_BARRIER_BSP)
		return scenval_fail(cv, cv->barrier_node, "barrier %s with topology allreduce: a ring all-reduce is "
				    "synchronous (expected bsp)", scennames_barrier[sc->consistency.barrier]);

	/* the default sample adapts to small runs; an explicit one must fit */
	if (!cv->sample_node && sc->consistency.sample >= data_nodes)
		sc->consistency.sample = data_nodes ? (uint32_t)data_nodes - 1 : 0;
	if ((sc->consistency.barrier == SCENARIO_BARRIER_PBSP || sc->consistency.barrier == SCENARIO_BARRIER_PSSP) &&
	    sc->consistency.sample >= data_nodes && sc->topology.kind != SCENARIO_TOPO_CENTRALIZED)
		return scenval_fail(cv, cv->sample_node ? cv->sample_node : cv->workers_node,
				    "consistency.sample %u must be below the number of workers (%zu): "
				    "a worker samples the others", sc->consistency.sample, data_nodes);
	if (sc->consistency.backup && sc->consistency.backup >= data_nodes)
		return scenval_fail(cv, cv->backup_node ? cv->backup_node : cv->workers_node,
				    "consistency.backup %u must be below the number of workers (%zu)",
				    sc->consistency.backup, data_nodes);
	if (sc->data.n_sizes && sc->data.n_sizes != data_nodes && sc->workload == SCENARIO_WORKLOAD_TRAIN)
		return scenval_fail(cv, cv->sizes_node,
				    "data.partition.sizes has %zu entries for %zu workers (expected one "
				    "per worker)", sc->data.n_sizes, data_nodes);

	if ((rc = scenario_node_list(sc, &nodes, &n)))
		return scenval_fail(cv, NULL, "out of memory");
	uint64_t hosts = (1ull << (32 - sc->network.prefix_len)) - 2;
	if (n + 1 > hosts) {
		rc = scenval_fail(cv, cv->subnet_node, "network.subnet /%u has room for %llu addresses, %zu needed",
				  sc->network.prefix_len, (unsigned long long)hosts, n + 1);
		goto out;
	}
	names = calloc(n + 1, sizeof *names);
	roles = calloc(n + 1, sizeof *roles);
	scratch = calloc(n + 1, 1);
	if (!names || !roles || !scratch) {
		rc = scenval_fail(cv, NULL, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		names[i] = nodes[i].name;
		roles[i] = nodes[i].role;
	}
	for (size_t i = 0; i < sc->network.n_links && !rc; i++)
		rc = check_selector(cv, sc->network.links[i].nodes, sc->network.links[i].pos,
				    sel_origin(root, "links", i, true), names, roles, n, scratch);
	for (size_t i = 0; i < sc->network.n_timeline && !rc; i++)
		rc = check_selector(cv, sc->network.timeline[i].nodes, sc->network.timeline[i].pos,
				    sel_origin(root, "timeline", i, true), names, roles, n, scratch);
	for (size_t i = 0; i < sc->n_stragglers && !rc; i++)
		rc = check_selector(cv, sc->stragglers[i].nodes, sc->stragglers[i].pos,
				    sel_origin(root, "stragglers", i, true), names, roles, n, scratch);
	for (size_t i = 0; i < sc->n_resources && !rc; i++)
		rc = check_selector(cv, sc->resources[i].nodes, sc->resources[i].pos,
				    sel_origin(root, "resources", i, true), names, roles, n, scratch);
	/* fleet.drift selects devices only */
	for (size_t i = 0; i < sc->fleet.n_drift && !rc; i++) {
		const struct scenario_fleet_drift *d = &sc->fleet.drift[i];

		rc = check_selector(cv, d->devices, d->pos, NULL, names, roles, n, scratch);
		for (size_t k = 0; k < n && !rc; k++)
			if (scratch[k] && roles[k] != SCENARIO_ROLE_DEVICE) {
				struct yamltree_node at = { .line = d->pos.line, .col = d->pos.col };

				rc = scenval_fail(cv, &at, "devices '%s' selects %s, which is not a device", d->devices,
						  names[k]);
			}
	}
out:
	free(nodes);
	free(names);
	free(roles);
	free(scratch);
	return rc;
}

/* --- the whole document --------------------------------------------------------------------- */

#define GET(map, key) yamltree_get(map, key)

static void free_contents(struct scenario *sc)
{
	free(sc->file);
	free(sc->name);
	free(sc->data.path);
	free(sc->data.sizes);
	free(sc->nodes);
	for (size_t i = 0; i < sc->network.n_links; i++)
		free(sc->network.links[i].nodes);
	free(sc->network.links);
	for (size_t i = 0; i < sc->network.n_timeline; i++)
		free(sc->network.timeline[i].nodes);
	free(sc->network.timeline);
	free(sc->network.trace);
	free(sc->simulation.profile);
	free(sc->network.cc);
	for (size_t i = 0; i < sc->n_stragglers; i++) {
		free(sc->stragglers[i].nodes);
		free(sc->stragglers[i].trace);
	}
	free(sc->stragglers);
	for (size_t i = 0; i < sc->n_resources; i++)
		free(sc->resources[i].nodes);
	free(sc->resources);
	for (size_t i = 0; i < sc->fleet.n_drift; i++)
		free(sc->fleet.drift[i].devices);
	free(sc->fleet.drift);
	free(sc->fleet.base_file);
	for (size_t i = 0; i < sc->sweep.n_axes; i++) {
		for (size_t k = 0; k < sc->sweep.axes[i].n_values; k++)
			free(sc->sweep.axes[i].values[k]);
		free(sc->sweep.axes[i].values);
		free(sc->sweep.axes[i].value_pos);
		free(sc->sweep.axes[i].key);
	}
	free(sc->sweep.axes);
	hosts_destroy(&sc->hosts);
	if (sc->doc) {
		yamltree_free(sc->doc->root);
		free(sc->doc->basedir);
		free(sc->doc);
	}
	memset(sc, 0, sizeof *sc);
}

void scenario_destroy(struct scenario **self)
{
	if (!self || !*self)
		return;
	free_contents(*self);
	free(*self);
	*self = NULL;
}

static char *default_name(const char *file)
{
	const char *b = strrchr(file, '/');
	b = b ? b + 1 : file;
	size_t len = strcspn(b, ".");
	char *s = strndup(b, len ? len : strlen(b));
	if (!s)
		return NULL;
	for (char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '-' || *p == '_'))
			*p = '_';
	if (!*s) {
		free(s);
		s = strdup("scenario");
	}
	return s;
}

static int convert(struct scenval *cv, const struct yamltree_node *root);

/* Validate every value of every sweep axis on its own (bounded), so a bad sweep value is reported
 * by `check` at its own line rather than when that run comes up. */
static int check_sweep_values(struct scenval *cv, const struct yamltree_node *root)
{
	const struct yamltree_node *sw = yamltree_get(root, "sweep");
	size_t budget = 256;
	for (size_t i = 0; sw && i < sw->n; i++) {
		const struct yamltree_entry *e = &sw->items[i];
		if (!strcmp(e->key, "repeat") || !strcmp(e->key, "zip"))
			continue;
		for (size_t k = 0; k < e->value->n && budget; k++, budget--) {
			struct yamltree_node *doc = yamltree_clone(root), *val = yamltree_clone(e->value->items[k].value);
			const char *why = NULL;
			int rc;
			if (!doc || !val) {
				yamltree_free(doc);
				yamltree_free(val);
				return scenval_fail(cv, e->value, "out of memory");
			}
			if ((rc = yamltree_set_path(doc, e->key, val, e->line, e->col, &why))) {
				yamltree_free(val);
				rc = scenval_fail_key(cv, e, "sweep key '%s': %s", e->key, why);
			} else {
				/* drop the sweep from the trial document */
				for (size_t j = 0; j < doc->n; j++)
					if (!strcmp(doc->items[j].key, "sweep")) {
						free(doc->items[j].key);
						yamltree_free(doc->items[j].value);
						doc->items[j] = doc->items[--doc->n];
						break;
					}
				struct scenario trial = { 0 };
				struct scenval sub = *cv;
				sub.sc = &trial;
				sub.check_sweep = false;
				rc = convert(&sub, doc);
				free_contents(&trial);
			}
			yamltree_free(doc);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static int convert(struct scenval *cv, const struct yamltree_node *root)
{
	struct scenario *sc = cv->sc;
	const struct yamltree_node *v;
	int rc, idx;
	static const char *const top[] = { "name", "description", "seed", "stop", "target", "data", "model", "train",
					   "topology", "consistency", "workers", "nodes", "workload", "linkcheck",
					   "eval", "network", "stragglers", "resources", "on_node_failure", "simulation",
					   "sweep", "hosts", "fleet", NULL };

	/* defaults (docs/scenario.md lists them) */
	sc->seed = 1;
	sc->data.set = SCENARIO_DATA_FASHION_MNIST;
	sc->data.scheme = SCENARIO_PART_IID;
	sc->data.per_node = 2;
	sc->data.alpha = 0.5;
	sc->model.kind = SCENARIO_MODEL_SOFTMAX;
	sc->train.batch = 64;
	sc->train.lr = 0.05;
	sc->train.lr_schedule = SCENARIO_LR_CONSTANT;
	sc->train.lr_step_every = 1000;
	sc->train.lr_step_gamma = 0.5;
	sc->train.lr_decay = 0.001;
	sc->train.blas_threads = 1;
	sc->topology.kind = SCENARIO_TOPO_PS;
	sc->topology.servers = 1;
	sc->consistency.barrier = SCENARIO_BARRIER_BSP;
	sc->consistency.staleness = 3;
	sc->consistency.sample = 2;
	sc->consistency.local_steps = 1;
	sc->consistency.fanout = 1;
	sc->workers = 4;
	sc->fleet.strategy = SCENARIO_FLEET_DELTA;
	sc->fleet.sync_steps = 20;
	sc->fleet.snapshot_every = 10;
	sc->fleet.sparse_ppm = 10000; /* 1% */
	sc->fleet.base = SCENARIO_FLEET_BASE_INIT;
	sc->fleet.base_steps = 200;
	sc->fleet.registry = SCENARIO_FLEET_REGISTRY_CENTRAL;
	sc->fleet.peers = 2;
	sc->workload = SCENARIO_WORKLOAD_TRAIN;
	sc->linkcheck = true;
	sc->linkcheck_probes = 100;
	sc->linkcheck_interval_us = 5000;
	sc->eval_every_us = 2000000;
	sc->stop_grace_us = SCENARIO_STOP_GRACE_US;
	sc->network.subnet = (198u << 24) | (18u << 16);
	sc->network.prefix_len = 15;
	sc->network.tcp.slow_start_after_idle = -1;
	sc->network.tcp.ecn = -1;
	sc->sweep.repeat = 1;
	sc->simulation.rto_min_us = 200000;
	sc->simulation.mss = 1448;
	sc->simulation.node_files = 64;

	if ((rc = scenval_check_keys(cv, root, top, "the scenario")))
		return rc;
	if (!(sc->file = strdup(cv->file)))
		return scenval_fail(cv, root, "out of memory");
	if ((v = GET(root, "name"))) {
		if ((rc = scenval_string(cv, v, "name", &sc->name)))
			return rc;
		for (const char *p = sc->name; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
			      *p == '-' || *p == '_' || *p == '.') || strlen(sc->name) > 64)
				return scenval_fail(cv, v,
						    "name '%s' is not valid (expected letters, digits, '-', '_', '.', at "
						    "most 64 characters: it names the run directory)", sc->name);
	} else if (!(sc->name = default_name(cv->file))) {
		return scenval_fail(cv, root, "out of memory");
	}
	if ((v = GET(root, "description")) && !scenval_scalar(cv, v, "description"))
		return -EINVAL;
	if ((v = GET(root, "seed")) && (rc = scenval_count(cv, v, 0, UINT64_MAX, "seed", &sc->seed)))
		return rc;
	if ((v = GET(root, "workload"))) {
		if ((rc = scenval_enum(cv, v, scennames_workload, "workload", &idx)))
			return rc;
		sc->workload = (enum scenario_workload)idx;
	}
	if ((v = GET(root, "stop")) && (rc = scenrun_stop(cv, v)))
		return rc;
	if ((v = GET(root, "target")) && (rc = scenval_fraction(cv, v, "target", &sc->target)))
		return rc;
	if ((v = GET(root, "data")) && (rc = scentrain_data(cv, v)))
		return rc;
	if (!sc->data.path && !(sc->data.path = strdup(sc->data.set == SCENARIO_DATA_MNIST ?
						       "/usr/share/datasets/mnist" :
						       "/usr/share/datasets/fashion-mnist")))
		return scenval_fail(cv, root, "out of memory");
	if ((v = GET(root, "model")) && ((rc = scentrain_model(cv, v)) || (rc = scentrain_model_size(cv, v))))
		return rc;
	if (sc->model.kind != SCENARIO_MODEL_SOFTMAX && !sc->model.n_hidden) {
		sc->model.n_hidden = 1;
		sc->model.hidden[0] = 128;
	}
	if ((v = GET(root, "train")) && (rc = scentrain_train(cv, v)))
		return rc;
	if ((v = GET(root, "topology")) && (rc = scentopo_topology(cv, v)))
		return rc;
	if ((v = GET(root, "consistency")) && (rc = scentrain_consistency(cv, v)))
		return rc;
	if ((v = GET(root, "fleet")) && (rc = scenfleet_parse(cv, v)))
		return rc;
	if ((v = GET(root, "workers"))) {
		if (GET(root, "nodes"))
			return scenval_fail(cv, v, "workers and nodes exclude each other (nodes lists every node)");
		/* a simulation takes far more workers than a host can emulate */
		if ((rc = scenval_u32(cv, v, 1, GET(root, "simulation") ? SCENARIO_MAX_SIM_WORKERS : SCENARIO_MAX_NODES,
				      "workers", &sc->workers)))
			return rc;
		cv->workers_node = v;
	}
	if ((v = GET(root, "nodes"))) {
		cv->nodes_node = v;
		if ((rc = scentopo_nodes(cv, v)))
			return rc;
	}
	if ((v = GET(root, "linkcheck")) && (rc = scenrun_linkcheck(cv, v)))
		return rc;
	if ((v = GET(root, "eval")) && (rc = scenrun_eval(cv, v)))
		return rc;
	if ((v = GET(root, "network")) && (rc = scennet_parse(cv, v)))
		return rc;
	if (!sc->network.cc && !(sc->network.cc = strdup("cubic")))
		return scenval_fail(cv, root, "out of memory");
	if ((v = GET(root, "stragglers")) && (rc = scenstrag_parse(cv, v)))
		return rc;
	if ((v = GET(root, "resources")) && (rc = scenres_parse(cv, v)))
		return rc;
	if ((v = GET(root, "on_node_failure"))) {
		if ((rc = scenval_enum(cv, v, scennames_on_failure, "on_node_failure", &idx)))
			return rc;
		sc->on_node_failure = (enum scenario_on_failure)idx;
	}
	if ((v = GET(root, "simulation")) && (rc = scensim_parse(cv, v)))
		return rc;
	if ((v = GET(root, "sweep")) && (rc = scensweep_parse(cv, v)))
		return rc;
	if ((v = GET(root, "hosts")) && !(sc->hosts = hosts_from_tree(v, cv->file, cv->err, cv->errlen)))
		return -EINVAL;

	if (sc->workload == SCENARIO_WORKLOAD_TRAIN && !sc->stop_time_us && sc->stop_accuracy == 0 &&
	    !sc->stop_steps && !(sc->topology.kind == SCENARIO_TOPO_CENTRALIZED && sc->train.epochs))
		return scenval_fail(cv, root, "no stop condition (expected stop: {time: 120s} and/or accuracy, steps)");
	if ((rc = check_nodes(cv, root)))
		return rc;
	if ((rc = scenfleet_check_peers(cv, root)))
		return rc;
	if (cv->check_sweep && sc->sweep.n_axes && (rc = check_sweep_values(cv, root)))
		return rc;
	return 0;
}

/* Build a scenario from a tree; takes ownership of root (and basedir) in every case. */
static struct scenario *build(struct yamltree_node *root, char *basedir, const char *file, bool check_sweep,
			      char *err, size_t errlen)
{
	struct scenario *sc = calloc(1, sizeof *sc);
	struct scenario_doc *doc = calloc(1, sizeof *doc);
	if (!sc || !doc) {
		snprintf(err, errlen, "%s:1:1: error: out of memory", file);
		free(sc);
		free(doc);
		yamltree_free(root);
		free(basedir);
		return NULL;
	}
	struct scenval cv = { .file = file, .err = err, .errlen = errlen, .sc = sc, .basedir = basedir,
			 .check_sweep = check_sweep };
	doc->root = root;
	doc->basedir = basedir;
	int rc = convert(&cv, root);
	sc->doc = doc;
	if (rc) {
		scenario_destroy(&sc);
		return NULL;
	}
	return sc;
}

struct scenario *scenario_parse(const char *buf, size_t len, const char *name, char *err, size_t errlen)
{
	if (!name)
		name = "<scenario>";
	struct yamltree_node *root = yamltree_parse(buf, len, name, true, err, errlen);
	if (!root)
		return NULL;
	return build(root, NULL, name, true, err, errlen);
}

static char *read_file(const char *path, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rbe");
	char *buf = NULL;
	if (!f) {
		snprintf(err, errlen, "%s:1:1: error: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	size_t cap = 65536, n = 0;
	buf = malloc(cap);
	while (buf) {
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (n > SCENARIO_MAX_FILE_BYTES) {
			snprintf(err, errlen, "%s:1:1: error: file is larger than %u bytes (limit "
				 "SCENARIO_MAX_FILE_BYTES)", path, SCENARIO_MAX_FILE_BYTES);
			free(buf);
			buf = NULL;
			goto out;
		}
		if (got == 0)
			break;
		if (n == cap) {
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	if (!buf) {
		snprintf(err, errlen, "%s:1:1: error: out of memory", path);
		goto out;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s:1:1: error: read: %s", path, strerror(errno));
		free(buf);
		buf = NULL;
		goto out;
	}
	*len = n;
out:
	fclose(f);
	return buf;
}

struct scenario *scenario_load_with(const char *path, const char *const *sets, size_t n_sets, char *err,
				    size_t errlen)
{
	size_t len = 0;
	char *buf = read_file(path, &len, err, errlen);
	if (!buf)
		return NULL;
	struct yamltree_node *root = yamltree_parse(buf, len, path, true, err, errlen);
	free(buf);
	if (!root)
		return NULL;
	for (size_t i = 0; i < n_sets; i++)
		if (scenset_apply(root, sets[i], err, errlen)) {
			yamltree_free(root);
			return NULL;
		}
	if (scenset_check_conflicts(root, sets, n_sets, path, err, errlen)) {
		yamltree_free(root);
		return NULL;
	}
	char *basedir = NULL;
	const char *slash = strrchr(path, '/');
	if (slash && !(basedir = strndup(path, (size_t)(slash - path + (slash == path))))) {
		yamltree_free(root);
		snprintf(err, errlen, "%s:1:1: error: out of memory", path);
		return NULL;
	}
	return build(root, basedir, path, true, err, errlen);
}

int scenario_set(struct scenario *self, const char *assignment, char *err, size_t errlen)
{
	struct yamltree_node *root = yamltree_clone(self->doc->root);
	char *basedir = self->doc->basedir ? strdup(self->doc->basedir) : NULL;
	if (!root || (self->doc->basedir && !basedir)) {
		yamltree_free(root);
		free(basedir);
		return -ENOMEM;
	}
	int rc = scenset_apply(root, assignment, err, errlen);
	if (!rc)
		rc = scenset_check_conflicts(root, &assignment, 1, self->file, err, errlen);
	if (rc) {
		yamltree_free(root);
		free(basedir);
		return rc;
	}
	struct scenario *fresh = build(root, basedir, self->file, true, err, errlen);
	if (!fresh)
		return -EINVAL;
	free_contents(self);
	*self = *fresh;         /* the contents move; the shell is freed */
	free(fresh);
	return 0;
}

int scenario_write_yaml(const struct scenario *self, FILE *out)
{
	return yamltree_emit(self->doc->root, out);
}

struct scenario *scenario_sweep_run(const struct scenario *self, const size_t *value_idx, uint64_t seed,
				    char *err, size_t errlen)
{
	struct yamltree_node *root = yamltree_clone(self->doc->root), *sv = NULL, *sw = NULL;
	char *basedir = self->doc->basedir ? strdup(self->doc->basedir) : NULL;
	const char *why = NULL;
	char num[32];
	if (!root || (self->doc->basedir && !basedir))
		goto oom;
	for (size_t j = 0; j < root->n; j++)
		if (!strcmp(root->items[j].key, "sweep")) {
			/* detach the sweep: its values are applied below */
			sw = root->items[j].value;
			free(root->items[j].key);
			memmove(&root->items[j], &root->items[j + 1], (root->n - j - 1) * sizeof *root->items);
			root->n--;
			break;
		}
	size_t a = 0;
	for (size_t i = 0; sw && i < sw->n; i++) {
		const struct yamltree_entry *e = &sw->items[i];
		if (!strcmp(e->key, "repeat") || !strcmp(e->key, "zip"))
			continue;
		if (a >= self->sweep.n_axes || value_idx[a] >= e->value->n) {
			snprintf(err, errlen, "%s:%u:%u: error: sweep value index out of range", self->file, e->line, e->col);
			goto fail;
		}
		struct yamltree_node *val = yamltree_clone(e->value->items[value_idx[a]].value);
		if (!val)
			goto oom;
		if (yamltree_set_path(root, e->key, val, e->line, e->col, &why)) {
			snprintf(err, errlen, "%s:%u:%u: error: sweep key '%s': %s", self->file, e->line, e->col,
				 e->key, why);
			yamltree_free(val);
			goto fail;
		}
		a++;
	}
	yamltree_free(sw);
	sw = NULL;
	snprintf(num, sizeof num, "%llu", (unsigned long long)seed);
	if (!(sv = calloc(1, sizeof *sv)) || !(sv->scalar = strdup(num)))
		goto oom;
	sv->kind = YAMLTREE_SCALAR;
	sv->plain = true;
	const struct yamltree_entry *old = yamltree_entry_of(root, "seed");
	if (old) {
		sv->line = old->value->line;
		sv->col = old->value->col;
	}
	if (yamltree_set_path(root, "seed", sv, 0, 0, &why))
		goto oom;
	return build(root, basedir, self->file, false, err, errlen);
oom:
	snprintf(err, errlen, "%s:1:1: error: out of memory", self->file);
fail:
	yamltree_free(sv);
	yamltree_free(sw);
	yamltree_free(root);
	free(basedir);
	return NULL;
}
