/* sim/sim_train: real training in simulated order, for `simulation.train: real`.
 *
 * The simulator says when each worker takes the server's model and when each of its updates is
 * applied; this module does the arithmetic with the emulator's own pieces: node/data (the
 * training and test sets), node/partition (the same split from the same seed), node/model,
 * node/optim (the server's optimiser, as the parameter server applies gradients) and node/eval.
 * A worker's gradient is computed on exactly the model version it took (a reference-counted
 * snapshot shared by every worker that took that version), on its own next minibatch, and
 * applied when the simulated server handles the push: the staleness of every update is the
 * simulated one. Only the gradient mode of the parameter server (not model averaging). */
#ifndef STALENET_SIM_TRAIN_H
#define STALENET_SIM_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "node/eval.h"
#include "orchestrator/scenario.h"

struct sim_train;

/* Load the data, split it over n workers, build the model and the server's optimiser from
 * sc and seed. dir (may be NULL) gets partition.csv with the workers' names (n of them). NULL
 * with err filled on failure. */
struct sim_train *sim_train_new(const struct scenario *sc, uint32_t n, uint64_t seed, const char *dir,
				const char *const *names, char *err, size_t errlen);
void sim_train_destroy(struct sim_train **p);

/* Worker w takes the server's current model (drops the one it held). 0 or -ENOMEM. */
int sim_train_take(struct sim_train *t, uint32_t w);
/* Worker w's gradient (its next minibatch, on the model it took); the loss goes to *loss.
 * Applied at once scaled by x (asynchronous), or added to the open round with weight x.
 * 0 or negative errno. */
int sim_train_apply(struct sim_train *t, uint32_t w, double x, double *loss);
int sim_train_round_add(struct sim_train *t, uint32_t w, double x, double *loss);
/* The round closes: apply its sum scaled by x as one step. */
int sim_train_round_close(struct sim_train *t, double x);
/* Evaluate the server's model on the test set and a fixed training sample. */
int sim_train_eval(struct sim_train *t, struct eval_result *test, struct eval_result *train);
/* Training samples in the server's model so far (applied updates and closed rounds, as the
 * emulated server counts them), and the training set size. */
uint64_t sim_train_samples(const struct sim_train *t);
size_t sim_train_set_size(const struct sim_train *t);
/* Bytes of model snapshots and buffers held now. */
size_t sim_train_bytes(const struct sim_train *t);

#endif
