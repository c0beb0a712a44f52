/* node/engine_ps: the parameter-server engine (topology `parameter-server`), roles `server` and
 * `worker`.
 *
 * The server binds a ZeroMQ ROUTER at tcp://SERVER_ADDR:port.data (SERVER_ADDR = the first of
 * servers.addrs, else node.addr) and holds the model, the optimiser and the workers' clock
 * vector. Each worker connects a DEALER (routing id "w<index>") and joins (HELLO with the join
 * bit; the server answers HELLO, step = the clock to continue from). A steady-state step is one
 * request/reply:
 *   push      PUSH(grad, step = c+1, model_version computed on, aux = samples, value = loss)
 *             -> ACK(aux = staleness, or -1 when the update was dropped), sent at once
 *   barrier   the push is also the request to start step c+2 (the join the one for the first
 *   + pull    step): the server HOLDS it until the condition of node/barrier holds
 *             (re-evaluated on every clock/version/liveness change, never polled; at once for
 *             ASP), then answers MODEL(params, model_version, step = the clock, value = seconds
 *             held = the barrier wait)
 *   compute   gradient of the next minibatch of the model received; straggler model applied
 * So a step costs one round trip instead of three (barrier, pull, push) or two (ASP). After a
 * straggler pause the worker re-pulls (PULL -> MODEL) so it never computes on a model that aged
 * during the pause. The standalone BARRIER -> BARRIER_OK and PULL -> MODEL requests are still
 * served.
 * Update rules. BSP: synchronous rounds (node/barrier's struct barrier_round): the round of
 * version v collects updates computed on v, closes on N_live - consistency.backup of them,
 * applies their mean in one optimiser step; later updates for v are dropped and counted.
 * SSP/ASP/pBSP/pSSP: every update is applied on arrival, scaled by 1/N_live (so N fresh updates
 * make one BSP round's mean step; at full size asynchrony adds implicit momentum and 8 workers
 * diverged) and by the staleness weight (consistency.weighting: none 1, inverse 1/(1+s), exp
 * e^-s) with s = server version at apply minus the version it was computed on. For pBSP/pSSP the server evaluates a held request
 * against the sample drawn for that crossing from the requesting worker's own RNG stream.
 * A sampled barrier with consistency.sample = 0 is ASP: the worker does not ask at all.
 *
 * Model averaging (local SGD) when consistency.combine = average, or when no combine is given
 * (none) and consistency.local_steps = H > 1 (engine_ps_mode_parse). A round is H local SGD steps
 * on the worker's replica (the worker's own optimiser, momentum kept across rounds); the round
 * begins with the MODEL reply (barrier + pull) and ends with PUSH(model, step = rounds done,
 * aux = samples trained on in the round), which requests the next round. Barrier clocks and
 * consistency.staleness count rounds, not steps. The server
 * keeps no optimiser: BSP closes the round of version v on N_live - backup models computed from v
 * and replaces its model by their sample-weighted mean (FedAvg). SSP/ASP/pBSP/pSSP fold each
 * model in on arrival as a moving average x <- (1 - a) x + a x_i, a = weight(staleness) * n_i /
 * (sum of n_j over live workers), so N fresh models of equal weight move x by their mean change.
 * Every accepted model makes one model version. Traces as in gradient mode, one row per local
 * step: model_version = the version pulled at the round's start, staleness only on the round's
 * last step (empty on the others); stop.steps ends with a shorter last round, stop.time drops an
 * unfinished one.
 *
 * Liveness: a worker is live from its HELLO (or first message) until its BYE, until the
 * connection its updates came on closes (a killed process: the ROUTER's socket monitor reports
 * it at once), or until it is silent for consistency.dead_after seconds (0 = never; workers send
 * a HELLO keep-alive every second while they pause, sleep or are held). A departed worker is
 * left out of every barrier and BSP round (rounds close on the remaining workers, logged) and
 * counts as finished for the server's stop; it rejoins with its next message. A restarted worker (same routing id; ZMQ_ROUTER_HANDOVER gives
 * the new connection the id) joins again: its held request is forgotten, it resumes at clock
 * max(its last clock, the slowest live other's) and re-pulls, so BSP neither stalls on it while
 * it is dead nor waits for it to replay the steps it missed. Its trace file continues. A
 * departed worker's held request stays held (not counted as waiting): a worker that was only
 * cut off gets its model when it is back, moved on like a restart to the slowest live other's
 * clock, which the MODEL's step carries; the worker continues its step count from it.
 *
 * Stop: a worker stops after stop.steps steps of its own, at stop.time, on the control
 * plane's stop, or on the server's BYE, and then says BYE. The server stops at stop.time,
 * stop.accuracy (checked at each evaluation), on the control plane's stop, or when every
 * worker has said BYE or departed; it then sends BYE to every worker and calls
 * ctl_client_done. (A worker restarted after all others finished finds no server.)
 *
 * Traces: the server writes RUN_DIR/eval.csv every eval.every seconds and at the end
 * (updates = model version, samples = samples in applied updates, epoch = samples over the
 * training set) and RUN_DIR/nodes/<server>.csv, one row per update received (worker, its step,
 * staleness, version, counters, held requests: docs/traces.md); each worker writes
 * RUN_DIR/nodes/<node>.csv, one row per completed step (wait_s = the time the server held its
 * request, transfers excluded; staleness empty when the update was dropped), and tells the control
 * plane "waiting" from its push's ACK until the MODEL that lets it proceed. With
 * train.save_model every node writes its final parameters (server: the global model). */
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
