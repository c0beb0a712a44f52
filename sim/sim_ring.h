/* sim/sim_ring: discrete-event simulation of one planned run of a `topology: allreduce` or
 * `centralized` scenario.
 *
 * All-reduce is node/engine_allreduce's ring, message for message: every step each node
 * computes its gradient, then the ring averages by reduce-scatter (N-1 phases) and all-gather
 * (N-1 phases); in each phase a node sends one chunk (floats [kP/N, (k+1)P/N) of the chunk the
 * engine sends) to the next node and waits for the chunk of the same phase from the previous
 * one; sends never wait (ZeroMQ queues them), and one connection delivers in order. A node's
 * step ends with its last receive: the trace's compute_s is the gradient (and straggler), its
 * wait_s the ring. Every node stops at the same step (the engine's stop vote: a node starting a
 * step at or after stop.time votes it the last, so the run ends a little after stop.time, as
 * the emulated ring does). Centralized is one trainer stepping back to back, no network, that
 * stops after the step that reaches stop.time. train real (allreduce only) through
 * sim/sim_replicas: one model, the mean of every node's gradient per step. Called by sim_run. */
#ifndef STALENET_SIM_RING_H
#define STALENET_SIM_RING_H

#include <stddef.h>

#include "sim/sim.h"

/* As sim_run, for an allreduce or centralized run (o->server_cost_ns unused). */
int sim_ring_run(const struct sim_opts *o, struct sim_result *res, char *err, size_t errlen);

#endif
