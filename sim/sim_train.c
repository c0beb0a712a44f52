/* sim/sim_train: see sim_train.h.
 *
 * Snapshots: a worker that takes the model gets a reference to a copy of the server's
 * parameters at that version; the copy is made once per version (on the first take after the
 * model changed) and freed when its last holder moves on, so memory is one model per version
 * still in use, never one per worker. Minibatches follow the emulated worker's rule (its share,
 * shuffled with its own stream, reshuffled every local epoch), drawn from the very stream the
 * emulated worker uses (ENGINE_RNG_STREAM_ORDER): the same seed gives the same minibatches in the
 * same order. */
#include "sim/sim_train.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/data.h"
#include "node/engine_common.h"
#include "node/model.h"
#include "node/optim.h"
#include "node/partition.h"
#include "node/rng.h"
#include "sim/sim_setup.h"

#define SIM_TRAIN_LOSS_SAMPLE 1000 /* fixed training sample of the train_loss column */

struct snap {
	uint32_t refs;
	float p[];
};

struct sim_worker_data {
	const uint32_t *share; /* positions in the training set (the partition's, borrowed) */
	uint32_t *order;       /* this worker's shuffled order of its share */
	size_t n, pos;
	struct rng rng;
	struct snap *model;    /* the model it took */
};

struct sim_train {
	uint32_t n;
	size_t np, batch, bytes;
	struct data_set *train, *test;
	struct partition *part;
	struct model *server;  /* the server's parameters */
	struct model *scratch; /* gradients are computed here on a worker's snapshot */
	struct optim *optim;
	float *grad, *agg, *x;
	uint8_t *y;
	uint32_t *loss_idx;
	size_t nloss;
	struct snap *cur;      /* snapshot of the current version, NULL after a change */
	struct sim_worker_data *w;
	uint64_t samples;       /* in the server's model: applied updates and closed rounds */
	uint64_t round_samples; /* in the open round */
	size_t last_len;        /* samples behind the latest gradient */
};

static void snap_drop(struct sim_train *t, struct snap **s)
{
	if (*s && --(*s)->refs == 0) {
		t->bytes -= sizeof **s + t->np * sizeof(float);
		free(*s);
	}
	*s = NULL;
}

/* The model changed: the next take copies it afresh. */
static void changed(struct sim_train *t)
{
	snap_drop(t, &t->cur);
}

struct sim_train *sim_train_new(const struct scenario *sc, uint32_t n, uint64_t seed, const char *dir,
				const char *const *names, char *err, size_t errlen)
{
	struct optim_params op = { 0 };
	struct model_spec spec = { 0 };
	struct sim_train *t = calloc(1, sizeof *t);

	if (!t)
		goto nomem;
	t->n = n;
	t->batch = sc->train.batch;
	if (sim_setup_data(sc, &t->train, &t->test, err, errlen) < 0 ||
	    sim_setup_split(sc, n, seed, false, t->train, "workers", dir, names, &t->part, err, errlen) < 0)
		goto fail;
	sim_setup_model_spec(sc, t->train->rows, t->train->cols, &spec);
	model_blas_threads(1);
	t->server = model_new(&spec, seed);
	t->scratch = model_new(&spec, seed);
	if (!t->server || !t->scratch) {
		snprintf(err, errlen, "cannot build the model");
		goto fail;
	}
	t->np = model_nparams(t->server);
	sim_setup_optim(sc, &op);
	t->optim = optim_new(t->np, &op);
	t->grad = malloc(t->np * sizeof *t->grad);
	t->agg = calloc(t->np, sizeof *t->agg);
	t->x = malloc(t->batch * t->train->dim * sizeof *t->x);
	t->y = malloc(t->batch);
	t->loss_idx = malloc(SIM_TRAIN_LOSS_SAMPLE * sizeof *t->loss_idx);
	t->w = calloc(n, sizeof *t->w);
	if (!t->optim || !t->grad || !t->agg || !t->x || !t->y || !t->loss_idx || !t->w)
		goto nomem;
	t->nloss = eval_sample(t->train->n, SIM_TRAIN_LOSS_SAMPLE, seed, t->loss_idx);
	for (uint32_t i = 0; i < n; i++) {
		struct sim_worker_data *w = &t->w[i];

		w->share = partition_indices(t->part, i, &w->n);
		if (!w->n) {
			snprintf(err, errlen, "worker%u has no training samples (%u workers share %u samples)", i,
				 n, t->train->n);
			goto fail;
		}
		if (!(w->order = malloc(w->n * sizeof *w->order)))
			goto nomem;
		memcpy(w->order, w->share, w->n * sizeof *w->order);
		rng_seed(&w->rng, seed ^ ((uint64_t)i << 32), ENGINE_RNG_STREAM_ORDER);
		rng_shuffle_u32(&w->rng, w->order, w->n);
	}
	return t;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	sim_train_destroy(&t);
	return NULL;
}

void sim_train_destroy(struct sim_train **p)
{
	struct sim_train *t;

	if (!p || !*p)
		return;
	t = *p;
	*p = NULL;
	for (uint32_t i = 0; t->w && i < t->n; i++) {
		snap_drop(t, &t->w[i].model);
		free(t->w[i].order);
	}
	snap_drop(t, &t->cur);
	free(t->w);
	data_destroy(&t->train);
	data_destroy(&t->test);
	partition_destroy(&t->part);
	model_destroy(&t->server);
	model_destroy(&t->scratch);
	optim_destroy(&t->optim);
	free(t->grad);
	free(t->agg);
	free(t->x);
	free(t->y);
	free(t->loss_idx);
	free(t);
}

int sim_train_take(struct sim_train *t, uint32_t w)
{
	if (!t->cur) {
		t->cur = malloc(sizeof *t->cur + t->np * sizeof(float));
		if (!t->cur)
			return -ENOMEM;
		t->cur->refs = 1;
		memcpy(t->cur->p, model_params(t->server), t->np * sizeof(float));
		t->bytes += sizeof *t->cur + t->np * sizeof(float);
	}
	snap_drop(t, &t->w[w].model);
	t->cur->refs++;
	t->w[w].model = t->cur;
	return 0;
}

/* Worker w's next minibatch gradient on the model it took, into t->grad. */
static int gradient(struct sim_train *t, uint32_t w, double *loss)
{
	struct sim_worker_data *d = &t->w[w];
	size_t len;

	if (!d->model)
		return -EINVAL;
	if (d->pos >= d->n) {
		rng_shuffle_u32(&d->rng, d->order, d->n);
		d->pos = 0;
	}
	len = d->n - d->pos < t->batch ? d->n - d->pos : t->batch;
	data_batch(t->train, d->order + d->pos, len, t->x, t->y);
	d->pos += len;
	t->last_len = len;
	model_set_params(t->scratch, d->model->p);
	return model_gradient(t->scratch, t->x, t->y, len, t->grad, loss);
}

int sim_train_apply(struct sim_train *t, uint32_t w, double x, double *loss)
{
	int rc = gradient(t, w, loss);

	if (rc < 0)
		return rc;
	if (x != 1.0)
		for (size_t k = 0; k < t->np; k++)
			t->grad[k] = (float)(t->grad[k] * x);
	optim_step(t->optim, model_params(t->server), t->grad);
	t->samples += t->last_len;
	changed(t);
	return 0;
}

int sim_train_round_add(struct sim_train *t, uint32_t w, double x, double *loss)
{
	int rc = gradient(t, w, loss);
	float wt = (float)x;

	if (rc < 0)
		return rc;
	for (size_t k = 0; k < t->np; k++)
		t->agg[k] += wt * t->grad[k];
	t->round_samples += t->last_len;
	return 0;
}

int sim_train_round_close(struct sim_train *t, double count)
{
	float inv = count > 0 ? (float)(1.0 / count) : 0;

	for (size_t k = 0; k < t->np; k++)
		t->agg[k] *= inv;
	optim_step(t->optim, model_params(t->server), t->agg);
	memset(t->agg, 0, t->np * sizeof *t->agg);
	t->samples += t->round_samples;
	t->round_samples = 0;
	changed(t);
	return 0;
}

int sim_train_eval(struct sim_train *t, struct eval_result *test, struct eval_result *train)
{
	int rc = eval_model(t->server, t->test, NULL, 0, test);

	return rc ? rc : eval_model(t->server, t->train, t->loss_idx, t->nloss, train);
}

uint64_t sim_train_samples(const struct sim_train *t)
{
	return t->samples;
}

size_t sim_train_set_size(const struct sim_train *t)
{
	return t->train->n;
}

size_t sim_train_bytes(const struct sim_train *t)
{
	return t->bytes;
}
