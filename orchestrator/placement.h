/* orchestrator/placement: which host each node of a run lives on, and which node pairs then talk
 * across hosts. Pure: no I/O except placement_print's FILE.
 *
 * The communication graph comes from the topology: parameter server = every worker with every
 * server; p2p = every peer with every other (a peer may sample any peer); all-reduce = the ring
 * peer i -> peer i+1; centralized and the linkcheck workload = no edges between nodes.
 *
 * `placement: auto` fills hosts in decreasing order of `cores` (stable in list order), servers
 * first then the other nodes in index order, never more nodes than a host has cores; then a
 * Kernighan-Lin style refinement swaps pairs of nodes (or moves one into spare room) while that
 * cuts fewer edges. For the three topologies above the greedy fill is already a minimum cut (a
 * star keeps as many workers with its server as fit; a complete graph is cut least when packed;
 * contiguous ring blocks cut one edge per boundary); the refinement keeps that true for any edge
 * list the code is given. A map places the nodes its selectors match; every node must be matched
 * exactly once and no host may exceed its cores. */
#ifndef STALENET_PLACEMENT_H
#define STALENET_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "orchestrator/hosts.h"
#include "orchestrator/plan.h"
#include "orchestrator/scenario.h"

struct placement_edge {
	uint32_t a, b;                  /* node indices, a < b */
};

/* The communication edges of n nodes of the given roles under topology topo (see above).
 * *out is malloc'd (NULL when none). Returns 0 or -ENOMEM. */
int placement_edges(enum scenario_topology topo, const enum scenario_role *roles, size_t n,
		    struct placement_edge **out, size_t *n_out);

/* How many edges join nodes on different hosts. */
size_t placement_cut(const struct placement_edge *edges, size_t n_edges, const uint32_t *host_of);

/* The auto placement of n nodes over n_hosts hosts of cores[h] each: host_of[i] filled.
 * Returns 0, -ENOSPC when n exceeds the sum of cores, or -ENOMEM. */
int placement_auto(const struct placement_edge *edges, size_t n_edges, const enum scenario_role *roles,
		   size_t n, const uint32_t *cores, size_t n_hosts, uint32_t *host_of);

struct placement {
	size_t n_nodes;
	uint32_t *host_of;              /* host index of each node of the run */
	struct placement_edge *edges;   /* the communication graph */
	size_t n_edges;
	size_t n_cross;                 /* edges whose ends are on different hosts */
};

/* Place run's nodes on hosts (auto or the map). Returns a new placement (placement_destroy) or
 * NULL with "FILE:LINE:COL: error: ..." in err (unknown node in the map, a node matched twice
 * or never, more nodes than cores). */
struct placement *placement_new(const struct hosts *hosts, const struct plan_run *run, char *err, size_t errlen);

/* `stalenet check`'s view: each host with its nodes, then the edges that cross hosts.
 * Returns 0 or -EIO. */
int placement_print(FILE *out, const struct placement *self, const struct hosts *hosts,
		    const struct plan_run *run);

/* Place every run of plan (each run's node list may differ in a sweep); with out, print each
 * run's placement under a "run ID" line. Returns 0, or -EINVAL/-ENOMEM with the first run's
 * error in err. */
int placement_plan(const struct hosts *hosts, const struct plan *plan, FILE *out, char *err, size_t errlen);

void placement_destroy(struct placement **self);

#endif
