/* node/engine_p2p: decentralised training (topology `p2p`, role `peer`): every peer holds a
 * replica of the model; there is no server and no process holds global state.
 *
 * Sockets. Peer i binds a ROUTER on its data-plane endpoint (node/engine_common: port.data, or
 * port.data + i when addresses repeat) served by a service thread, and connects one DEALER to
 * every other peer. The service thread answers at once, whatever the training loop is doing:
 *   CLOCK_REQ(step = asker's clock, model_version = threshold t, aux = seq)
 *        -> CLOCK_REP(step = my clock, aux = seq), HELD until my clock >= t (no polling);
 *   PULL(step = asker's clock, aux = seq)
 *        -> MODEL(step = model_version = my clock, aux = seq, value = my training samples,
 *                 payload = my replica as published after my last completed step);
 *   MODEL without a request (ensemble: a peer's final replica, sent to peer 0 at its end);
 *   BYE(aux bit 0 = the run is over): the sender has left (it is dead for every barrier and
 *        sample from now on); with bit 0 the receiver stops too (peer 0's stop.accuracy).
 *
 * One step of peer i at clock c (c = steps completed):
 *   barrier  t = node/barrier's threshold for c; the peers to check are drawn per crossing:
 *            all live others for BSP/SSP, none for ASP, `consistency.sample` live others for
 *            pBSP/pSSP (barrier_sample). Each checked peer whose last known clock is below t
 *            gets a CLOCK_REQ and answers when it reaches t (or is known dead from its BYE).
 *   combine  `gossip` (default): every `consistency.local_steps` (H, default 1) steps, PULL
 *            the replicas of `consistency.fanout` (default 1) live peers drawn uniformly and
 *            replace mine by the plain mean of mine and theirs. `average`: the same with every
 *            replica weighted by its peer's number of training samples (model averaging /
 *            local SGD with H local steps). `ensemble`: never exchange parameters.
 *   compute  gradient of the next minibatch, SGD step (momentum kept across merges),
 *            straggler model applied.
 *   publish  trace row, then clock = c+1 and the new replica become visible to other peers.
 * Pull-based gossip means a peer only ever writes its own replica: no locks across peers.
 *
 * Trace columns (RUN_DIR/nodes/<node>.csv, one row per completed step): t_s = end of the step;
 * compute_s = gradient + update (+ emulated straggling); wait_s = barrier + model exchange, both
 * before the compute, so t_s - compute_s is when the step's compute began; staleness = how many
 * steps the most lagging merged replica was behind my clock c (my clock minus its clock, at
 * least 0), empty on steps without a merge; model_version = my clock after the step.
 *
 * Evaluation: peer 0 evaluates every eval.every s and at the end into RUN_DIR/eval.csv
 * (updates and samples are peer 0's own). With `ensemble`, peer 0 PULLs every live peer's
 * replica at each evaluation (not waiting more than consistency.dead_after for one), and at the
 * end waits for the final replicas the others send before their BYE, for each until it has come
 * or the member is gone (BYE, closed connection, dead_after of silence), at most
 * P2P_ENSEMBLE_WAIT_S (5 s once the run is stopped); it evaluates the average of the combined replicas' class probabilities
 * and names each member's part (combined, or why missing) in RUN_DIR/ensemble.csv.
 * Stop: stop.time, stop.steps (own steps), the control plane's stop, peer 0's stop.accuracy
 * (spread by BYE with the run-over bit).
 *
 * Which combination applies where: barrier kinds and combine modes all apply to `p2p`; the
 * `allreduce` topology (node/engine_allreduce) is always BSP and exchanges gradients, not
 * models; the parameter server (node/engine_ps) has its own update rules. */
#ifndef STALENET_ENGINE_P2P_H
#define STALENET_ENGINE_P2P_H

struct kv;

#define P2P_ENSEMBLE_WAIT_S 30

enum p2p_combine { P2P_GOSSIP = 0, P2P_AVERAGE, P2P_ENSEMBLE };

/* "gossip" | "average" | "ensemble" -> out. Returns 0 or -EINVAL. */
int engine_p2p_combine_parse(const char *name, enum p2p_combine *out);

/* Run this peer as configured (docs/node-config.md). Returns 0 or negative errno (logged). */
int engine_p2p_run(const struct kv *cfg);

#endif
