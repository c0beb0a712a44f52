/* orchestrator/plan: a validated scenario expanded into the runs it asks for.
 *
 * Sweeps become runs: the cartesian product of the independent axes, with axes of one zip group
 * advancing together, times `repeat`. Each run is a full scenario (the base with the run's sweep
 * values applied exactly like --set, then validated again), its node list, each node's effective
 * link parameters per direction (network.default merged with every matching network.links entry,
 * in file order) and the link timeline sorted by time.
 *
 * Run ids are the run's sweep assignments, e.g. `consistency.barrier=ssp+workers=4+rep=1`, made
 * filesystem-safe; a run's seed is a hash of the base seed and the run index, so reruns of the
 * same plan are identical and runs of one plan differ. */
#ifndef STALENET_PLAN_H
#define STALENET_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/link_params.h"
#include "orchestrator/scenario.h"

#define PLAN_RUN_ID_MAX 256     /* including the NUL */

struct plan_node {
	char name[SCENARIO_NODE_NAME_MAX];  /* server0.., worker0.., peer0.., trainer, probe0.. */
	enum scenario_role role;
	uint32_t index;                     /* among the nodes of its role */
	struct link_params up, down;        /* effective at the run start */
	struct scenario_straggler straggler;/* matching stragglers entries merged in order
					       (set == 0: none); nodes/trace point into the scenario */
	struct scenario_resources resources;/* matching resources entries merged in order (set == 0:
					       unlimited, no cgroup limits); nodes points into the scenario */
};

/* A compact plan's node (plan_new_compact): its role, index among its role and profile. */
struct plan_cnode {
	uint32_t index;
	uint32_t profile;                   /* index into plan_run.profiles */
	enum scenario_role role;
};

/* What a node starts with, shared by every node that the same entries of network.links,
 * stragglers and resources match (compact plans). */
struct plan_profile {
	struct link_params up, down;
	struct scenario_straggler straggler;
	struct scenario_resources resources;
};

/* A link change: from at_us on, node's links are up/down (the full effective parameters). */
struct plan_event {
	uint64_t at_us;
	uint32_t node;                      /* index into plan_run.nodes */
	struct link_params up, down;
};

struct plan_run {
	char id[PLAN_RUN_ID_MAX];
	uint32_t index;                     /* 0-based position in the plan */
	uint32_t rep;                       /* 1-based repetition */
	uint64_t seed;                      /* derived: plan_derive_seed(base seed, index) */
	const struct scenario *scenario;    /* this run's scenario (seed already the derived one) */
	struct plan_node *nodes;            /* NULL in a compact plan: use the plan_node_* accessors */
	size_t n_nodes;
	/* Compact plans only (NULL otherwise): per node its role, index and profile; the distinct
	 * profiles; node names made from (role, index) unless the scenario lists its nodes. */
	struct plan_cnode *cnodes;
	struct plan_profile *profiles;
	size_t n_profiles;
	struct plan_event *events;          /* sorted by at_us, stable within equal times */
	size_t n_events;
	/* The sweep point: sweep_values[a] is the value (as written) of the a-th sweep axis;
	 * NULL when the scenario has no sweep axes. sweep_keys[a] is that axis' key path.
	 * Owned by the plan. */
	const char **sweep_keys;
	const char **sweep_values;
	size_t n_sweep_values;
};

struct plan;

/* Expand sc. sc is only read (the plan holds its own copies). Returns NULL with a one-line error
 * (naming the sweep value's or selector's file:line:col) in err. */
struct plan *plan_new(const struct scenario *sc, char *err, size_t errlen);

/* The same plan with compact runs: no per-node copies of names, links, stragglers and
 * resources (about 12 bytes per node instead of about 800); nodes sharing their matching entries
 * share one profile. For the simulator; read the nodes only through the plan_node_* accessors
 * (plan_print needs a full plan). Falls back to a full plan for a run whose node names do not
 * follow the generated pattern. */
struct plan *plan_new_compact(const struct scenario *sc, char *err, size_t errlen);

void plan_destroy(struct plan **self);

/* Node i (< r->n_nodes) of a full or compact run. */
enum scenario_role plan_node_role(const struct plan_run *r, size_t i);
const struct link_params *plan_node_up(const struct plan_run *r, size_t i);
const struct link_params *plan_node_down(const struct plan_run *r, size_t i);
const struct scenario_straggler *plan_node_straggler(const struct plan_run *r, size_t i);
const struct scenario_resources *plan_node_resources(const struct plan_run *r, size_t i);
/* Its name: the stored one, or made in buf (len >= SCENARIO_NODE_NAME_MAX) and returned. */
const char *plan_node_name(const struct plan_run *r, size_t i, char *buf, size_t len);

size_t plan_n_runs(const struct plan *self);
/* The i-th run (i < plan_n_runs), owned by the plan. */
const struct plan_run *plan_run(const struct plan *self, size_t i);

/* The seed of run index idx derived from a base seed (splitmix64 mixing; never 0). */
uint64_t plan_derive_seed(uint64_t base_seed, uint64_t idx);

/* Print the plan readably (runs, nodes with their links, stragglers and resources, timeline): the output of
 * `stalenet check`. Returns 0 or -errno (-EINVAL for a compact plan). */
int plan_print(FILE *out, const struct plan *self);

/* One link's two directions in scenario units, as plan_print shows them: "both: delay 10ms
 * jitter 2ms loss 20%", or "up: ... | down: ..." when they differ (no commas). */
void plan_format_links(const struct link_params *up, const struct link_params *down, char *buf, size_t len);

/* A node's resources as plan_print shows them ("cpu 0.25 cpus 1 memory 256MiB"); "" when none. */
void plan_format_resources(const struct scenario_resources *r, char *buf, size_t len);

/* A straggler profile as plan_print shows it ("delay constant(0.4, 0) pause 5s every 30s");
 * "" when the profile sets nothing. */
void plan_format_straggler(const struct scenario_straggler *s, char *buf, size_t len);

#endif
