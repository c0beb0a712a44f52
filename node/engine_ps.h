/* node/engine_ps: the parameter-server engine (topology `parameter-server`), roles `server` and
 * `worker`.
 *
 * The server binds a ZeroMQ ROUTER at tcp://SERVER_ADDR:port.data (SERVER_ADDR = the first of
 * servers.addrs, else node.addr) and holds the model, the optimiser and the workers' clock
 * vector. Each worker connects a DEALER (routing id "w<index>") and loops:
 *   barrier   BARRIER(step = my clock c) -> the server HOLDS the request until the condition
 *             of node/barrier holds (re-evaluated on every clock/version/liveness change, never
 *             polled), then BARRIER_OK. ASP sends no barrier request at all.
 *   pull      PULL -> MODEL(params, model_version)
 *   compute   gradient of the next minibatch of its shard; straggler model applied
 *   push      PUSH(grad, step = c+1, model_version computed on, aux = samples, value = loss)
 *             -> ACK(aux = staleness, or -1 when the update was dropped)
 * Update rules. BSP: synchronous rounds (node/barrier's struct barrier_round): the round of
 * version v collects updates computed on v, closes on N_live - consistency.backup of them,
 * applies their mean in one optimiser step; later updates for v are dropped and counted.
 * SSP/ASP/pBSP/pSSP: every update is applied on arrival, scaled by the staleness weight
 * (consistency.weighting: none 1, inverse 1/(1+s), exp e^-s) with s = server version at apply
 * minus the version it was computed on. For pBSP/pSSP the server evaluates a held request
 * against the sample drawn for that crossing from the requesting worker's own RNG stream.
 *
 * Liveness: a worker is live from its HELLO (or first message) until its BYE, or until it is
 * silent for consistency.dead_after seconds (0 = never; workers send a HELLO keep-alive every
 * second while they pause or sleep). A dead worker is left out of every barrier; it rejoins
 * with its next message.
 *
 * Stop: a worker stops after stop.steps steps of its own, at stop.time, on the control
 * plane's stop, or on the server's BYE, and then says BYE. The server stops at stop.time,
 * stop.accuracy (checked at each evaluation), on the control plane's stop, or when every
 * worker has said BYE; it then sends BYE to every worker and calls ctl_client_done.
 *
 * Traces: the server writes RUN_DIR/eval.csv every eval.every seconds and at the end
 * (updates = model version, samples = samples in applied updates, epoch = samples over the
 * training set); each worker writes RUN_DIR/nodes/<node>.csv, one row per completed step
 * (wait_s = time held at the barrier; staleness empty when the update was dropped). */
#ifndef STALENET_ENGINE_PS_H
#define STALENET_ENGINE_PS_H

#include <stdbool.h>
#include <stdint.h>

struct kv;

enum engine_ps_weighting { ENGINE_PS_WEIGHT_NONE = 0, ENGINE_PS_WEIGHT_INVERSE, ENGINE_PS_WEIGHT_EXP };

/* "none"|"inverse"|"exp" -> out. Returns 0 or -EINVAL. */
int engine_ps_weighting_parse(const char *name, enum engine_ps_weighting *out);

/* Scale of an update with the given staleness (>= 0): 1, 1/(1+s) or exp(-s). */
double engine_ps_weight(enum engine_ps_weighting w, int64_t staleness);

/* The update rule from consistency.combine and consistency.local_steps (H >= 1): model
 * averaging (*average = true) for combine "average", or for no combine ("none", empty, NULL)
 * with H > 1; gradient pushes for no combine with H = 1. Returns 0, or -EINVAL for H < 1 and
 * for gossip/ensemble (they have no meaning with a server). */
int engine_ps_mode_parse(const char *combine, int64_t local_steps, bool *average);

/* Role entry points (node/main.c dispatches by node.role). Return 0 on a clean finish,
 * negative errno on failure (logged). */
int engine_ps_server_run(const struct kv *cfg);
int engine_ps_worker_run(const struct kv *cfg);

#endif
