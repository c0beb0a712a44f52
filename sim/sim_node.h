/* sim/sim_node: the compute side of a simulated training node, for the drivers without a
 * server (sim/sim_p2p, sim/sim_ring): how long its step k takes and when a step may start.
 *
 * The model is the one docs/simulation.md describes for a worker: step_cost x slowdown plus one
 * draw of the node's delay distribution, in a run the testbed could run too (fewer nodes than
 * its limit) the next draw of the stream its emulated node draws from (node/straggler's,
 * seeded as node/engine_common seeds it; sim_node_restart starts it anew), above from a
 * stream keyed by (run seed, node, step); either way the same step of the same node takes the
 * same time under every barrier (common random numbers);
 * a replayed compute.trace runs node/straggler's own model, seeded as the emulated node seeds
 * it; with a calibration profile (sim/sim_profile) the step is a draw of the node's fitted
 * compute time, and the time between two steps that is neither compute nor wait (publishing,
 * evaluating, the loop's own work) a draw of its fitted remainder. A pause window delays the
 * start of a step to the window's end. Pure given the plan; no I/O after construction. */
#ifndef STALENET_SIM_NODE_H
#define STALENET_SIM_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "orchestrator/plan.h"

struct sim_profile;
struct sim_node;

/* The compute model of n simulated nodes; node k is plan node node_of[k] and the emulator's
 * node.index k (node_of and run are borrowed for the model's life; profile may be NULL,
 * borrowed too). step_cost_ns > 0. NULL with err filled (a compute.trace that cannot be read,
 * no memory). */
struct sim_node *sim_node_new(const struct plan_run *run, const uint32_t *node_of, uint32_t n,
			      int64_t step_cost_ns, const struct sim_profile *profile, char *err,
			      size_t errlen);
/* Free *p and set it to NULL; NULL and *p == NULL are fine. */
void sim_node_destroy(struct sim_node **p);

/* Compute time of node k's step `step` (0-based), ns (>= 0). Called once per step, in step
 * order, as the emulated node draws its delays. */
int64_t sim_node_step_ns(struct sim_node *m, uint32_t k, uint32_t step);
/* Node k is a new process (a restart, a late join): its delay stream starts anew. */
void sim_node_restart(struct sim_node *m, uint32_t k);
/* Time node k spends between the end of step `step` (1-based) and the start of the next one
 * outside compute and waiting: a draw of the profile's remainder, 0 without a profile. ns. */
int64_t sim_node_gap_ns(const struct sim_node *m, uint32_t k, uint32_t step);
/* When a step node k wants to start at t_ns can start: after the pause window t falls in. */
int64_t sim_node_after_pause(const struct sim_node *m, uint32_t k, int64_t t_ns);

#endif
