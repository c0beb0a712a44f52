/* orchestrator/scentrain: the sections of a scenario that describe the learning job: data (set,
 * path, partition), model (kind, hidden layers, and whether it fits a message), train (batch,
 * learning rate and its schedule, epochs, BLAS threads) and consistency (barrier and its knobs).
 *
 * A key that only one choice uses (per_node for scheme classes, lr_decay for lr_schedule inverse)
 * is refused with any other choice; the consistency knobs are kept whatever the barrier, so that
 * a sweep over barriers can set them once. Checks that need the node count (sample, backup, sizes)
 * are made with the nodes (orchestrator/scenario), at the positions remembered in cv. */
#include "orchestrator/scentrain.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "lib/limits.h"
#include "orchestrator/scenario.h"
#include "orchestrator/scennames.h"
#include "orchestrator/scenval.h"

int scentrain_data(struct scenval *cv, const struct yamltree_node *m)
{
	struct scenario *sc = cv->sc;
	const struct yamltree_node *v, *p;
	int rc, idx;
	if ((rc = scenval_want_kind(cv, m, YAMLTREE_MAP, "data")) ||
	    (rc = scenval_check_keys(cv, m, SCENVAL_KEYS("set", "path", "partition"), "data")))
		return rc;
	if ((v = yamltree_get(m, "set"))) {
		if ((rc = scenval_enum(cv, v, scennames_data_set, "data.set", &idx)))
			return rc;
		sc->data.set = (enum scenario_data_set)idx;
	}
	if ((v = yamltree_get(m, "path")) && (rc = scenval_path(cv, v, "data.path", &sc->data.path)))
		return rc;
	if (!(p = yamltree_get(m, "partition")))
		return 0;
	if ((rc = scenval_want_kind(cv, p, YAMLTREE_MAP, "data.partition")) ||
	    (rc = scenval_check_keys(cv, p, SCENVAL_KEYS("scheme", "per_node", "alpha", "zipf", "sizes"),
				     "data.partition")))
		return rc;
	if ((v = yamltree_get(p, "scheme"))) {
		if ((rc = scenval_enum(cv, v, scennames_partition, "data.partition.scheme", &idx)))
			return rc;
		sc->data.scheme = (enum scenario_partition)idx;
	}
	enum scenario_partition s = sc->data.scheme;
	if ((v = yamltree_get(p, "per_node"))) {
		if (s != SCENARIO_PART_CLASSES)
			return scenval_fail(cv, v, "per_node applies to scheme classes (this partition is %s)",
					    scennames_partition[s]);
		if ((rc = scenval_u32(cv, v, 1, 10, "data.partition.per_node", &sc->data.per_node)))
			return rc;
	}
	if ((v = yamltree_get(p, "alpha"))) {
		if (s != SCENARIO_PART_DIRICHLET)
			return scenval_fail(cv, v, "alpha applies to scheme dirichlet (this partition is %s)",
					    scennames_partition[s]);
		if ((rc = scenval_real(cv, v, 0, true, 1e6, false, "data.partition.alpha", &sc->data.alpha)))
			return rc;
	}
	if ((v = yamltree_get(p, "zipf"))) {
		if (s != SCENARIO_PART_SIZES)
			return scenval_fail(cv, v, "zipf applies to scheme sizes (this partition is %s)",
					    scennames_partition[s]);
		if ((rc = scenval_real(cv, v, 0, false, 10, false, "data.partition.zipf", &sc->data.zipf)))
			return rc;
		cv->zipf_node = v;
	}
	if ((v = yamltree_get(p, "sizes"))) {
		if (s != SCENARIO_PART_SIZES)
			return scenval_fail(cv, v, "sizes applies to scheme sizes (this partition is %s)",
					    scennames_partition[s]);
		if (cv->zipf_node)
			return scenval_fail(cv, v, "sizes and zipf exclude each other (explicit fractions, or shard "
					    "sizes proportional to 1/(i+1)^zipf)");
		if ((rc = scenval_want_kind(cv, v, YAMLTREE_SEQ, "data.partition.sizes")))
			return rc;
		if (v->n == 0 || v->n > SCENARIO_MAX_NODES)
			return scenval_fail(cv, v, "data.partition.sizes has %zu entries (limit: 1..%d)", v->n,
					    SCENARIO_MAX_NODES);
		if (!(sc->data.sizes = calloc(v->n, sizeof *sc->data.sizes)))
			return scenval_fail(cv, v, "out of memory");
		sc->data.n_sizes = v->n;
		double sum = 0;
		for (size_t i = 0; i < v->n; i++) {
			if ((rc = scenval_real(cv, v->items[i].value, 0, true, 1, false, "a size", &sc->data.sizes[i])))
				return rc;
			sum += sc->data.sizes[i];
		}
		if (fabs(sum - 1) > 1e-6)
			return scenval_fail(cv, v, "data.partition.sizes sum to %g (expected fractions summing to 1)",
					    sum);
		cv->sizes_node = v;
	} else if (s == SCENARIO_PART_SIZES && !cv->zipf_node) {
		return scenval_fail(cv, p, "scheme sizes needs sizes or zipf (expected sizes: [0.5, 0.25, 0.25] "
				    "or zipf: 1.0)");
	}
	return 0;
}

int scentrain_model(struct scenval *cv, const struct yamltree_node *m)
{
	struct scenario *sc = cv->sc;
	const struct yamltree_node *v;
	int rc, idx;
	if ((rc = scenval_want_kind(cv, m, YAMLTREE_MAP, "model")) ||
	    (rc = scenval_check_keys(cv, m, SCENVAL_KEYS("kind", "hidden"), "model")))
		return rc;
	if ((v = yamltree_get(m, "kind"))) {
		if ((rc = scenval_enum(cv, v, scennames_model, "model.kind", &idx)))
			return rc;
		sc->model.kind = (enum scenario_model)idx;
	}
	if ((v = yamltree_get(m, "hidden"))) {
		if (sc->model.kind == SCENARIO_MODEL_SOFTMAX)
			return scenval_fail(cv, v, "hidden applies to kind mlp and cnn (softmax has no hidden layer)");
		if (v->kind == YAMLTREE_SCALAR) {
			sc->model.n_hidden = 1;
			return scenval_u32(cv, v, 1, 65536, "model.hidden", &sc->model.hidden[0]);
		}
		if ((rc = scenval_want_kind(cv, v, YAMLTREE_SEQ, "model.hidden")))
			return rc;
		if (v->n == 0 || v->n > SCENARIO_MAX_HIDDEN)
			return scenval_fail(cv, v, "model.hidden has %zu layers (limit: 1..%d)", v->n,
					    SCENARIO_MAX_HIDDEN);
		sc->model.n_hidden = v->n;
		for (size_t i = 0; i < v->n; i++)
			if ((rc = scenval_u32(cv, v->items[i].value, 1, 65536, "a hidden layer size",
					      &sc->model.hidden[i])))
				return rc;
	}
	return 0;
}

/* The model's parameter count as node/model lays it out for 28 x 28 images (both data sets)
 * and 10 classes: softmax 784 x 10 + 10; mlp dense layers (in x out + out each); cnn first a
 * 5 x 5 convolution of 32 filters (+ biases) pooled to 12 x 12 x 32 inputs. Every model goes
 * over the wire whole, so it must fit LIMITS_MAX_PARAMS floats. */
int scentrain_model_size(struct scenval *cv, const struct yamltree_node *m)
{
	const struct scenario *sc = cv->sc;
	const struct yamltree_node *at = yamltree_get(m, "hidden") ? yamltree_get(m, "hidden") : m;
	double in = 28.0 * 28.0, n = 0;

	if (sc->model.kind == SCENARIO_MODEL_CNN) {
		n += 32.0 * 5 * 5 + 32;
		in = 12.0 * 12 * 32;
	}
	for (size_t l = 0; sc->model.kind != SCENARIO_MODEL_SOFTMAX && l < sc->model.n_hidden; l++) {
		n += in * sc->model.hidden[l] + sc->model.hidden[l];
		in = sc->model.hidden[l];
	}
	n += in * 10 + 10;
	if (n > LIMITS_MAX_PARAMS)
		return scenval_fail(cv, at, "model of %.0f parameters is larger than a message can carry (limit %u "
				    "floats, LIMITS_MAX_PARAMS)", n, LIMITS_MAX_PARAMS);
	return 0;
}

int scentrain_train(struct scenval *cv, const struct yamltree_node *m)
{
	struct scenario *sc = cv->sc;
	const struct yamltree_node *v;
	int rc, idx;
	if ((rc = scenval_want_kind(cv, m, YAMLTREE_MAP, "train")) ||
	    (rc = scenval_check_keys(cv, m, SCENVAL_KEYS("batch", "lr", "momentum", "weight_decay", "lr_schedule",
							 "lr_step_every", "lr_step_gamma", "lr_decay", "epochs",
							 "blas_threads"), "train")))
		return rc;
	if ((v = yamltree_get(m, "batch")) && (rc = scenval_u32(cv, v, 1, LIMITS_MAX_BATCH, "train.batch",
								&sc->train.batch)))
		return rc;
	if ((v = yamltree_get(m, "lr")) && (rc = scenval_real(cv, v, 0, true, 100, false, "train.lr", &sc->train.lr)))
		return rc;
	if ((v = yamltree_get(m, "momentum")) &&
	    (rc = scenval_real(cv, v, 0, false, 1, true, "train.momentum", &sc->train.momentum)))
		return rc;
	if ((v = yamltree_get(m, "weight_decay")) &&
	    (rc = scenval_real(cv, v, 0, false, 1, false, "train.weight_decay", &sc->train.weight_decay)))
		return rc;
	if ((v = yamltree_get(m, "lr_schedule"))) {
		if ((rc = scenval_enum(cv, v, scennames_lr_schedule, "train.lr_schedule", &idx)))
			return rc;
		sc->train.lr_schedule = (enum scenario_lr_schedule)idx;
	}
	enum scenario_lr_schedule ls = sc->train.lr_schedule;
	if ((v = yamltree_get(m, "lr_step_every"))) {
		if (ls != SCENARIO_LR_STEP)
			return scenval_fail(cv, v, "lr_step_every applies to lr_schedule step");
		if ((rc = scenval_count(cv, v, 1, 1000000000, "train.lr_step_every", &sc->train.lr_step_every)))
			return rc;
	}
	if ((v = yamltree_get(m, "lr_step_gamma"))) {
		if (ls != SCENARIO_LR_STEP)
			return scenval_fail(cv, v, "lr_step_gamma applies to lr_schedule step");
		if ((rc = scenval_real(cv, v, 0, true, 1, false, "train.lr_step_gamma", &sc->train.lr_step_gamma)))
			return rc;
	}
	if ((v = yamltree_get(m, "lr_decay"))) {
		if (ls != SCENARIO_LR_INVERSE)
			return scenval_fail(cv, v, "lr_decay applies to lr_schedule inverse");
		if ((rc = scenval_real(cv, v, 0, false, 1e6, false, "train.lr_decay", &sc->train.lr_decay)))
			return rc;
	}
	if ((v = yamltree_get(m, "epochs")) && (rc = scenval_u32(cv, v, 0, 1000000, "train.epochs", &sc->train.epochs)))
		return rc;
	if ((v = yamltree_get(m, "blas_threads")) &&
	    (rc = scenval_u32(cv, v, 1, LIMITS_MAX_BLAS_THREADS, "train.blas_threads", &sc->train.blas_threads)))
		return rc;
	return 0;
}

int scentrain_consistency(struct scenval *cv, const struct yamltree_node *m)
{
	struct scenario *sc = cv->sc;
	const struct yamltree_node *v;
	int rc, idx;
	if ((rc = scenval_want_kind(cv, m, YAMLTREE_MAP, "consistency")) ||
	    (rc = scenval_check_keys(cv, m, SCENVAL_KEYS("barrier", "staleness", "sample", "backup", "weighting",
							 "local_steps", "fanout", "combine", "draw"), "consistency")))
		return rc;
	if ((v = yamltree_get(m, "barrier"))) {
		if ((rc = scenval_enum(cv, v, scennames_barrier, "consistency.barrier", &idx)))
			return rc;
		sc->consistency.barrier = (enum scenario_barrier)idx;
		cv->barrier_node = v;
	}
	enum scenario_barrier b = sc->consistency.barrier;
	/* staleness and sample are kept whatever the barrier: a sweep over barriers sets them once
	 * for the schemes that use them (ssp/pssp, pbsp/pssp); the others ignore them. */
	(void)b;
	if ((v = yamltree_get(m, "staleness"))) {
		if ((rc = scenval_u32(cv, v, 0, 1000000, "consistency.staleness", &sc->consistency.staleness)))
			return rc;
	}
	if ((v = yamltree_get(m, "sample"))) {
		if ((rc = scenval_u32(cv, v, 0, SCENARIO_MAX_NODES, "consistency.sample", &sc->consistency.sample)))
			return rc;
		cv->sample_node = v;
	}
	if ((v = yamltree_get(m, "backup"))) {
		if ((rc = scenval_u32(cv, v, 0, SCENARIO_MAX_NODES, "consistency.backup", &sc->consistency.backup)))
			return rc;
		cv->backup_node = v;
	}
	if ((v = yamltree_get(m, "weighting"))) {
		if ((rc = scenval_enum(cv, v, scennames_weighting, "consistency.weighting", &idx)))
			return rc;
		sc->consistency.weighting = (enum scenario_weighting)idx;
	}
	if ((v = yamltree_get(m, "local_steps")) &&
	    (rc = scenval_u32(cv, v, 1, 1000000, "consistency.local_steps", &sc->consistency.local_steps)))
		return rc;
	if ((v = yamltree_get(m, "fanout")) &&
	    (rc = scenval_u32(cv, v, 1, SCENARIO_MAX_NODES, "consistency.fanout", &sc->consistency.fanout)))
		return rc;
	if ((v = yamltree_get(m, "combine"))) {
		if ((rc = scenval_enum(cv, v, scennames_combine, "consistency.combine", &idx)))
			return rc;
		sc->consistency.combine = (enum scenario_combine)idx;
		cv->combine_node = v;
	}
	/* Kept whatever the barrier, like staleness and sample: only pbsp/pssp draw samples. */
	if ((v = yamltree_get(m, "draw"))) {
		if ((rc = scenval_enum(cv, v, scennames_draw, "consistency.draw", &idx)))
			return rc;
		sc->consistency.draw = (enum scenario_draw)idx;
		cv->draw_node = v;
	}
	return 0;
}
