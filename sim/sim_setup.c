/* sim/sim_setup: see sim_setup.h. */
#include "sim/sim_setup.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sim_setup_data(const struct scenario *sc, struct data_set **train, struct data_set **test, char *err,
		   size_t errlen)
{
	char img[PATH_MAX], lbl[PATH_MAX];

	if (data_paths(sc->data.path, DATA_TRAIN, img, lbl, sizeof img) < 0 ||
	    data_load(img, lbl, NULL, 0, train) < 0) {
		snprintf(err, errlen, "simulation.train real: cannot load the training set from %s", sc->data.path);
		return -1;
	}
	if (data_paths(sc->data.path, DATA_TEST, img, lbl, sizeof img) < 0 ||
	    data_load(img, lbl, NULL, 0, test) < 0) {
		snprintf(err, errlen, "simulation.train real: cannot load the test set from %s", sc->data.path);
		return -1;
	}
	return 0;
}

int sim_setup_split(const struct scenario *sc, uint32_t n, uint64_t seed, bool whole, const struct data_set *train,
		    const char *who, const char *dir, const char *const *names, struct partition **part, char *err,
		    size_t errlen)
{
	char path[PATH_MAX + 32];
	struct partition_params *pp = calloc(1, sizeof *pp);
	int rc = -1;

	if (!pp) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	*pp = (struct partition_params){ .scheme = (enum partition_scheme)sc->data.scheme, .nodes = n, .seed = seed,
					 .per_node = sc->data.per_node, .alpha = sc->data.alpha,
					 .zipf = sc->data.zipf };
	if (sc->data.n_sizes) {
		if (sc->data.n_sizes > PARTITION_MAX_FRACTIONS) {
			snprintf(err, errlen, "data.partition.sizes: too many entries");
			goto out;
		}
		pp->nfractions = sc->data.n_sizes;
		memcpy(pp->fractions, sc->data.sizes, sc->data.n_sizes * sizeof *sc->data.sizes);
	}
	if (whole)
		*pp = (struct partition_params){ .scheme = PARTITION_IID, .nodes = 1, .seed = seed };
	if (partition_build(pp, train->labels, train->n, part) < 0) {
		snprintf(err, errlen, "data.partition: cannot split %u samples over %u %s", train->n, n, who);
		goto out;
	}
	if (dir) {
		snprintf(path, sizeof path, "%s/partition.csv", dir);
		if (partition_write_csv(*part, path, names) < 0) {
			snprintf(err, errlen, "cannot write %s", path);
			goto out;
		}
	}
	rc = 0;
out:
	free(pp);
	return rc;
}

void sim_setup_model_spec(const struct scenario *sc, uint32_t rows, uint32_t cols, struct model_spec *spec)
{
	memset(spec, 0, sizeof *spec);
	spec->kind = sc->model.kind == SCENARIO_MODEL_MLP ? MODEL_MLP :
		     sc->model.kind == SCENARIO_MODEL_CNN ? MODEL_CNN : MODEL_SOFTMAX;
	spec->rows = rows;
	spec->cols = cols;
	spec->nclasses = 10;
	spec->channels = 32;
	spec->kernel = 5;
	if (spec->kind != MODEL_SOFTMAX) {
		spec->nhidden = (uint32_t)sc->model.n_hidden;
		for (size_t i = 0; i < sc->model.n_hidden && i < MODEL_MAX_HIDDEN; i++)
			spec->hidden[i] = sc->model.hidden[i];
	}
}

void sim_setup_optim(const struct scenario *sc, struct optim_params *op)
{
	*op = (struct optim_params){ .lr = sc->train.lr, .momentum = sc->train.momentum,
				     .weight_decay = sc->train.weight_decay,
				     .schedule = (enum optim_schedule)sc->train.lr_schedule,
				     .step_every = sc->train.lr_step_every, .step_gamma = sc->train.lr_step_gamma,
				     .decay = sc->train.lr_decay };
}
