/* sim/sim_setup: a scenario's training setup as the simulator's real-training modules build it.
 *
 * sim_train (parameter server), sim_replicas (p2p, allreduce, centralized) and sim's cost
 * measurement all start from the same pieces: the training and test sets of data.path, the
 * data.partition split from the run's seed (and its partition.csv), the model spec of model:
 * and the optimiser of train:. They are made here, once, exactly as the emulated nodes make
 * them. Reads the data files; writes only partition.csv. */
#ifndef STALENET_SIM_SETUP_H
#define STALENET_SIM_SETUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/data.h"
#include "node/model.h"
#include "node/optim.h"
#include "node/partition.h"
#include "orchestrator/scenario.h"

/* Load the training and the test set of sc->data.path into *train and *test. On failure what
 * was loaded stays in them for the caller to free. 0, or -1 with err filled. */
int sim_setup_data(const struct scenario *sc, struct data_set **train, struct data_set **test, char *err,
		   size_t errlen);

/* Split train over n nodes as data.partition says, from seed, into *part (the caller's to
 * free); whole: the whole set as one iid partition of one node (node/trainer's). who names the
 * nodes in the message ("workers", "peers"). dir (may be NULL) gets partition.csv with names.
 * 0, or -1 with err filled. */
int sim_setup_split(const struct scenario *sc, uint32_t n, uint64_t seed, bool whole, const struct data_set *train,
		    const char *who, const char *dir, const char *const *names, struct partition **part, char *err,
		    size_t errlen);

/* The model spec of sc's model: section for rows x cols images of 10 classes. */
void sim_setup_model_spec(const struct scenario *sc, uint32_t rows, uint32_t cols, struct model_spec *spec);

/* The optimiser parameters of sc's train: section. */
void sim_setup_optim(const struct scenario *sc, struct optim_params *op);

#endif
