/* sim/sim_replicas: see sim_replicas.h. */
#include "sim/sim_replicas.h"

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
#include "node/trainer.h"
#include "sim/sim_setup.h"

struct sim_replica_snap {
	uint32_t refs;
	float p[];
};

struct peer_data {
	const uint32_t *share;          /* positions in the training set (the partition's) */
	uint32_t *order;                /* the emulated peer's order of its share (positions in it) */
	uint32_t *loss_idx;             /* the train_loss sample (positions in the training set) */
	size_t n, pos, nloss;
	uint64_t samples;
	struct rng rng;
	struct model *model;
	struct optim *optim;
	struct sim_replica_snap *published;
};

struct sim_replicas {
	uint32_t n;
	size_t np, batch, bytes;
	struct data_set *train, *test;
	struct partition *part;
	struct peer_data *p;
	struct model *scratch;          /* evaluations of a published replica */
	float *grad, *sum, *x;
	uint8_t *y;
	uint32_t *idx;                  /* a minibatch's positions in the training set */
	double *acc;                    /* a merge's sums */
	/* what a restarted peer starts from again */
	struct model_spec spec;
	struct optim_params op;
	uint64_t seed;
	bool trainer;
};

void sim_replicas_release(struct sim_replicas *t, struct sim_replica_snap **s)
{
	if (*s && --(*s)->refs == 0) {
		t->bytes -= sizeof **s + t->np * sizeof(float);
		free(*s);
	}
	*s = NULL;
}

/* Peer k publishes its replica. 0 or -ENOMEM. */
static int publish(struct sim_replicas *t, uint32_t k)
{
	struct sim_replica_snap *s = malloc(sizeof *s + t->np * sizeof(float));

	if (!s)
		return -ENOMEM;
	s->refs = 1;
	memcpy(s->p, model_params(t->p[k].model), t->np * sizeof(float));
	t->bytes += sizeof *s + t->np * sizeof(float);
	sim_replicas_release(t, &t->p[k].published);
	t->p[k].published = s;
	return 0;
}

/* Peer k's minibatch order from the start of its stream. */
static void order_init(struct sim_replicas *t, uint32_t k)
{
	struct peer_data *d = &t->p[k];

	for (uint32_t i = 0; i < d->n; i++)
		d->order[i] = i;
	if (t->trainer)
		rng_seed(&d->rng, t->seed, TRAINER_RNG_STREAM_EPOCH);
	else
		rng_seed(&d->rng, t->seed ^ ((uint64_t)k << 32), ENGINE_RNG_STREAM_ORDER);
	rng_shuffle_u32(&d->rng, d->order, (size_t)d->n);
	d->pos = 0;
}

void sim_replicas_destroy(struct sim_replicas **pp)
{
	struct sim_replicas *t;

	if (!pp || !*pp)
		return;
	t = *pp;
	*pp = NULL;
	for (uint32_t k = 0; t->p && k < t->n; k++) {
		sim_replicas_release(t, &t->p[k].published);
		free(t->p[k].order);
		free(t->p[k].loss_idx);
		model_destroy(&t->p[k].model);
		optim_destroy(&t->p[k].optim);
	}
	free(t->p);
	model_destroy(&t->scratch);
	data_destroy(&t->train);
	data_destroy(&t->test);
	partition_destroy(&t->part);
	free(t->grad);
	free(t->sum);
	free(t->x);
	free(t->y);
	free(t->idx);
	free(t->acc);
	free(t);
}

struct sim_replicas *sim_replicas_new(const struct scenario *sc, uint32_t n, uint64_t seed,
				      enum sim_replicas_rules rules, const char *dir, const char *const *names,
				      char *err, size_t errlen)
{
	bool trainer = rules == SIM_REPLICAS_TRAINER;
	size_t nloss = trainer ? TRAINER_LOSS_SAMPLE : ENGINE_TRAIN_LOSS_SAMPLE;
	struct optim_params op;
	struct model_spec spec = { 0 };
	struct sim_replicas *t = calloc(1, sizeof *t);

	if (!t)
		goto nomem;
	t->n = n;
	t->batch = sc->train.batch;
	/* trainer (node/trainer): the whole set as one iid "partition" of one node */
	if (sim_setup_data(sc, &t->train, &t->test, err, errlen) < 0 ||
	    sim_setup_split(sc, n, seed, trainer, t->train, "peers", dir, names, &t->part, err, errlen) < 0)
		goto fail;
	sim_setup_model_spec(sc, t->train->rows, t->train->cols, &spec);
	sim_setup_optim(sc, &op);
	model_blas_threads(1);
	t->spec = spec;
	t->op = op;
	t->seed = seed;
	t->trainer = trainer;
	t->p = calloc(n, sizeof *t->p);
	t->x = malloc(t->batch * t->train->dim * sizeof *t->x);
	t->y = malloc(t->batch);
	t->idx = malloc(t->batch * sizeof *t->idx);
	if (!t->p || !t->x || !t->y || !t->idx)
		goto nomem;
	for (uint32_t k = 0; k < n; k++) {
		struct peer_data *d = &t->p[k];

		d->share = partition_indices(t->part, k, &d->n);
		if (!d->n) {
			snprintf(err, errlen, "peer%u has no training samples (%u peers share %u samples)", k, n,
				 t->train->n);
			goto fail;
		}
		/* every peer starts from the same model, as every emulated peer seeds it */
		if (!(d->model = model_new(&spec, seed))) {
			snprintf(err, errlen, "cannot build the model");
			goto fail;
		}
		t->np = model_nparams(d->model);
		d->optim = optim_new(t->np, &op);
		d->order = malloc(d->n * sizeof *d->order);
		d->loss_idx = malloc(nloss * sizeof *d->loss_idx);
		if (!d->optim || !d->order || !d->loss_idx)
			goto nomem;
		/* node/engine_common's order: its stream, its shuffle of its share's positions;
		 * node/trainer's: its epoch stream, a shuffle at the start of every epoch (the same
		 * sequence of shuffles as one now and one at every wrap) */
		order_init(t, k);
		d->nloss = eval_sample((uint32_t)d->n, nloss, seed, d->loss_idx);
		for (size_t i = 0; i < d->nloss; i++)
			d->loss_idx[i] = d->share[d->loss_idx[i]];
		if (publish(t, k) < 0)
			goto nomem;
	}
	t->grad = malloc(t->np * sizeof *t->grad);
	t->sum = malloc(t->np * sizeof *t->sum);
	t->acc = malloc(t->np * sizeof *t->acc);
	t->scratch = model_new(&spec, seed);
	if (!t->grad || !t->sum || !t->acc || !t->scratch)
		goto nomem;
	return t;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	sim_replicas_destroy(&t);
	return NULL;
}

/* Peer k's next minibatch gradient on model m into t->grad. */
static int gradient(struct sim_replicas *t, uint32_t k, struct model *m, double *loss)
{
	struct peer_data *d = &t->p[k];
	size_t len;

	if (d->pos >= d->n) {
		rng_shuffle_u32(&d->rng, d->order, d->n);
		d->pos = 0;
	}
	len = d->n - d->pos < t->batch ? d->n - d->pos : t->batch;
	for (size_t i = 0; i < len; i++)
		t->idx[i] = d->share[d->order[d->pos + i]];
	data_batch(t->train, t->idx, len, t->x, t->y);
	d->pos += len;
	d->samples += len;
	return model_gradient(m, t->x, t->y, len, t->grad, loss);
}

int sim_replicas_step(struct sim_replicas *t, uint32_t k, double *loss)
{
	int rc = gradient(t, k, t->p[k].model, loss);

	if (rc < 0)
		return rc;
	optim_step(t->p[k].optim, model_params(t->p[k].model), t->grad);
	return publish(t, k);
}

int sim_replicas_step_mean(struct sim_replicas *t, double *loss)
{
	double l;
	int rc;

	memset(t->sum, 0, t->np * sizeof *t->sum);
	for (uint32_t k = 0; k < t->n; k++) {
		if ((rc = gradient(t, k, t->p[0].model, k ? &l : loss)) < 0)
			return rc;
		for (size_t e = 0; e < t->np; e++)
			t->sum[e] += t->grad[e];
	}
	for (size_t e = 0; e < t->np; e++)
		t->sum[e] /= (float)t->n;
	optim_step(t->p[0].optim, model_params(t->p[0].model), t->sum);
	return publish(t, 0);
}

int sim_replicas_restart(struct sim_replicas *t, uint32_t k)
{
	struct peer_data *d = &t->p[k];
	struct model *m = model_new(&t->spec, t->seed);
	struct optim *o = optim_new(t->np, &t->op);

	if (!m || !o) {
		model_destroy(&m);
		optim_destroy(&o);
		return -ENOMEM;
	}
	model_destroy(&d->model);
	optim_destroy(&d->optim);
	d->model = m;
	d->optim = o;
	d->samples = 0;
	order_init(t, k);
	return publish(t, k);
}

int sim_replicas_adopt(struct sim_replicas *t, uint32_t k, const struct sim_replica_snap *snap)
{
	model_set_params(t->p[k].model, snap->p);
	return publish(t, k);
}

struct sim_replica_snap *sim_replicas_published(struct sim_replicas *t, uint32_t k)
{
	t->p[k].published->refs++;
	return t->p[k].published;
}

int sim_replicas_merge(struct sim_replicas *t, uint32_t k, double own_w, struct sim_replica_snap *const *snaps,
		       const double *w, size_t m)
{
	float *mine = model_params(t->p[k].model);
	double total = own_w;

	if (m == 0)
		return 0;
	for (size_t i = 0; i < m; i++) {
		if (!snaps[i])
			return -EINVAL;
		total += w[i];
	}
	if (!(total > 0))
		return -EINVAL;
	for (size_t e = 0; e < t->np; e++)
		t->acc[e] = own_w * mine[e];
	for (size_t i = 0; i < m; i++)
		for (size_t e = 0; e < t->np; e++)
			t->acc[e] += w[i] * snaps[i]->p[e];
	for (size_t e = 0; e < t->np; e++)
		mine[e] = (float)(t->acc[e] / total);
	return 0;
}

uint32_t sim_replicas_share(const struct sim_replicas *t, uint32_t k)
{
	return (uint32_t)t->p[k].n;
}

uint64_t sim_replicas_samples(const struct sim_replicas *t, uint32_t k)
{
	return t->p[k].samples;
}

int sim_replicas_eval(struct sim_replicas *t, uint32_t k, struct eval_result *test, struct eval_result *train)
{
	int rc;

	/* the published replica: the emulated peer evaluates right after a step */
	model_set_params(t->scratch, t->p[k].published->p);
	rc = eval_model(t->scratch, t->test, NULL, 0, test);
	return rc ? rc : eval_model(t->scratch, t->train, t->p[k].loss_idx, t->p[k].nloss, train);
}

size_t sim_replicas_bytes(const struct sim_replicas *t)
{
	return t->bytes + (size_t)t->n * 3 * t->np * sizeof(float);
}
