/* sim/sim_replicas: real training of p2p peers in simulated order, for `simulation.train: real`
 * with `topology: p2p`.
 *
 * Every peer keeps what the emulated peer keeps (node/engine_common, node/engine_p2p): its
 * share of the training set (node/partition, the same split from the same seed), its replica
 * (node/model, initialised from the run seed like every peer's), its optimiser (node/optim,
 * momentum kept across merges), its minibatch order (its share shuffled by the emulated peer's
 * own stream, reshuffled every local epoch: the same minibatches), and its published replica:
 * the copy after its last step, which a PULL is answered with. A published replica is a
 * reference-counted snapshot, so a reply in flight keeps the replica as it was sent while the
 * peer steps on. The driver says when a peer steps and what a merge combines. For all-reduce,
 * whose replicas stay identical, replica 0 stands for all of them (sim_replicas_step_mean). */
#ifndef STALENET_SIM_REPLICAS_H
#define STALENET_SIM_REPLICAS_H

#include <stddef.h>
#include <stdint.h>

#include "node/eval.h"
#include "orchestrator/scenario.h"

struct sim_replicas;
struct sim_replica_snap;

/* Whose rules: the engines' peers (node/engine_common: the scenario's partition, a minibatch
 * order per peer, a train_loss sample of ENGINE_TRAIN_LOSS_SAMPLE), or the centralized trainer
 * (node/trainer: one node, the whole set, its epoch stream, TRAINER_LOSS_SAMPLE). */
enum sim_replicas_rules { SIM_REPLICAS_PEERS = 0, SIM_REPLICAS_TRAINER };

/* Load the data, split it over n peers, build n replicas and optimisers from sc and seed, by
 * `rules` (SIM_REPLICAS_TRAINER: n = 1). dir (may be NULL) gets partition.csv with the peers'
 * names. NULL with err filled on failure. */
struct sim_replicas *sim_replicas_new(const struct scenario *sc, uint32_t n, uint64_t seed,
				      enum sim_replicas_rules rules, const char *dir, const char *const *names,
				      char *err, size_t errlen);
/* Free *p (and every snapshot still referenced only by it) and set it to NULL. */
void sim_replicas_destroy(struct sim_replicas **p);

/* Peer k's step: the gradient of its next minibatch on its replica, its optimiser's step, and
 * the result published. The minibatch loss goes to *loss. 0 or negative errno. */
int sim_replicas_step(struct sim_replicas *t, uint32_t k, double *loss);
/* Peer k's process starts again (a restart): the initial replica, a fresh optimiser, its
 * minibatch order from the start of its stream, no samples, as a new emulated process has;
 * published. 0 or -ENOMEM. */
int sim_replicas_restart(struct sim_replicas *t, uint32_t k);
/* Peer k takes a pulled replica as its own (a rejoining peer's catch-up), published. 0 or
 * -ENOMEM. */
int sim_replicas_adopt(struct sim_replicas *t, uint32_t k, const struct sim_replica_snap *snap);
/* A new reference to peer k's published replica (what a MODEL reply carries). */
struct sim_replica_snap *sim_replicas_published(struct sim_replicas *t, uint32_t k);
/* Drop a reference; *s becomes NULL (NULL is fine). */
void sim_replicas_release(struct sim_replicas *t, struct sim_replica_snap **s);
/* Merge into peer k's replica: (own_w x mine + sum w[i] x snaps[i]) / (own_w + sum w), per
 * parameter in double, as node/engine_p2p's gossip. m == 0: no change. 0 or -EINVAL. */
int sim_replicas_merge(struct sim_replicas *t, uint32_t k, double own_w, struct sim_replica_snap *const *snaps,
		       const double *w, size_t m);
/* All-reduce (every replica the same): the mean of the n peers' gradients, each of its own
 * next minibatch on replica 0, summed in peer order, is one step of replica 0's optimiser, and
 * replica 0 is published (the other replicas are not used). *loss: peer 0's minibatch loss. */
int sim_replicas_step_mean(struct sim_replicas *t, double *loss);
/* Training samples of peer k's share (the weight it reports with its replica). */
uint32_t sim_replicas_share(const struct sim_replicas *t, uint32_t k);
/* Training samples peer k has consumed so far. */
uint64_t sim_replicas_samples(const struct sim_replicas *t, uint32_t k);
/* Evaluate peer k's published replica (the emulated peer evaluates right after a step) on the
 * test set, and on a fixed sample of its own share (the emulated peer's train_loss sample).
 * 0 or negative errno. */
int sim_replicas_eval(struct sim_replicas *t, uint32_t k, struct eval_result *test, struct eval_result *train);
/* Bytes of replicas, optimisers and snapshots held now. */
size_t sim_replicas_bytes(const struct sim_replicas *t);

#endif
