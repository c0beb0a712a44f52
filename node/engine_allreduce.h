/* node/engine_allreduce: synchronous data-parallel SGD by ring all-reduce of the gradients.
 *
 * Topology `allreduce`: node i (node.index among workers.count) binds a PULL socket on its own
 * data-plane endpoint (node/engine_common) and connects a PUSH socket to node i+1 mod N, so every
 * byte travels between ring neighbours only and no process holds global state. Each step every
 * node computes the gradient of its own minibatch, then the ring averages the N gradients:
 *   reduce-scatter  N-1 phases: in phase k node i sends chunk (i-k) mod N to i+1 and adds the
 *                   chunk (i-k-1) mod N it receives from i-1; node i then owns the full sum of
 *                   chunk (i+1) mod N and divides it by N;
 *   all-gather      N-1 phases: in phase k node i sends chunk (i+1-k) mod N and stores the chunk
 *                   (i-k) mod N it receives.
 * Chunk k is floats [k*P/N, (k+1)*P/N) of the P-float vector. Every node ends with the same bytes
 * (each chunk's final value is computed once and copied), and every node starts from the same
 * seed-initialised model and runs the same optimiser, so replicas stay bit-identical.
 * The barrier is inherently BSP; consistency.* is ignored (a warning names it).
 *
 * Wire use: every chunk is a WIRE_PUSH message with sender = node index, step = step,
 * model_version = phase (0 .. 2N-3), aux = stop vote (bit 0), payload = the chunk.
 * Stopping together: a node votes to stop (stop.time, ctl stop, node 0's stop.accuracy) at the
 * start of a step; every message carries the OR of the votes its sender has seen, and after
 * 2(N-1) >= N-1 hops every vote has reached every node, so all nodes finish the same step.
 *
 * Traces: RUN_DIR/nodes/<node>.csv per step (compute_s = gradient, wait_s = the all-reduce,
 * staleness 0, model_version = steps applied); node 0 evaluates its replica every eval.every s
 * and at the end into RUN_DIR/eval.csv (samples = samples of all nodes, N x its own). */
#ifndef STALENET_ENGINE_ALLREDUCE_H
#define STALENET_ENGINE_ALLREDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/wire.h"

struct kv;

/* Run the all-reduce engine as configured (docs/node-config.md). Returns 0 or negative errno. */
int engine_allreduce_run(const struct kv *cfg);

/* --- the ring itself (also used directly by tests) ----------------------------------------- */

struct allreduce_ring;

/* A ring member: index of n, listening on listen_ep (bind) and sending to next_ep (connect).
 * max_floats bounds one chunk. NULL (logged) on failure. */
struct allreduce_ring *allreduce_ring_open(uint32_t index, uint32_t n, const char *listen_ep,
					   const char *next_ep, size_t max_floats);
void allreduce_ring_close(struct allreduce_ring **self);

/* Replace v[0..len) by the mean over the ring of every member's v (same len everywhere) for
 * step `step`. *stop is this member's vote on entry and the OR of all votes on return.
 * Gives up with -ETIMEDOUT when the message of a phase has not come timeout_ms after that phase
 * began; a message that does not match the expected sender, step, phase or size is counted in
 * bad_frames and skipped (it changes nothing and does not extend the wait). Returns 0 or
 * negative errno (-EDOM when this member's own values are not finite: nobody would take them). */
int allreduce_ring_mean(struct allreduce_ring *self, float *v, size_t len, int64_t step,
			bool *stop, int timeout_ms);

/* Traffic counters of this member (both sockets). */
const struct wire_stats *allreduce_ring_stats(const struct allreduce_ring *self);

#endif
