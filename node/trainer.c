/* node/trainer: see trainer.h.
 *
 * Plain minibatch SGD over a seed-shuffled order of the whole training set, reshuffled every
 * epoch. Evaluation (full test set plus train loss on a fixed sample of TRAINER_LOSS_SAMPLE
 * training samples) happens when eval.every seconds have passed since the last one, checked
 * between steps, so the step loop itself never reads the clock more than once per step. */
#include "node/trainer.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/csv.h"
#include "collectors/schema.h"
#include "lib/clock.h"
#include "lib/ctl.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "node/data.h"
#include "node/engine_common.h"
#include "node/eval.h"
#include "node/model.h"
#include "node/optim.h"
#include "node/partition.h"
#include "node/rng.h"


struct trainer_cfg {
	const char *run_dir, *node_name, *data_dir;
	int64_t seed, origin_ns, batch, epochs, stop_steps, blas_threads;
	double stop_time_s, stop_accuracy, target, eval_every_s;
};

static int read_cfg(const struct kv *cfg, struct trainer_cfg *c)
{
	int rc;

	memset(c, 0, sizeof *c);
	c->run_dir = kv_get(cfg, "run.dir");
	c->node_name = kv_get(cfg, "node.name");
	c->data_dir = kv_get(cfg, "data.path");
	if (!c->node_name || !*c->node_name)
		c->node_name = "trainer";
	if (!c->data_dir || !*c->data_dir) {
		const char *set = kv_get(cfg, "data.set");

		c->data_dir = set && strcmp(set, "mnist") == 0 ? "/usr/share/datasets/mnist"
							    : "/usr/share/datasets/fashion-mnist";
	}
	if (!c->run_dir || !*c->run_dir) {
		log_error("trainer: run.dir is not set");
		return -EINVAL;
	}
	rc = kv_get_u64(cfg, "run.seed", 1, (uint64_t *)&c->seed);
	rc = rc ? rc : kv_get_i64(cfg, "run.origin_ns", clock_now_ns(), &c->origin_ns);
	rc = rc ? rc : kv_get_i64(cfg, "train.batch", 64, &c->batch);
	rc = rc ? rc : kv_get_i64(cfg, "train.epochs", 15, &c->epochs);
	rc = rc ? rc : kv_get_i64(cfg, "train.blas_threads", 1, &c->blas_threads);
	rc = rc ? rc : kv_get_i64(cfg, "stop.steps", 0, &c->stop_steps);
	rc = rc ? rc : kv_get_double(cfg, "stop.time", 0, &c->stop_time_s);
	rc = rc ? rc : kv_get_double(cfg, "stop.accuracy", 0, &c->stop_accuracy);
	rc = rc ? rc : kv_get_double(cfg, "target", 0, &c->target);
	rc = rc ? rc : kv_get_double(cfg, "eval.every", 5.0, &c->eval_every_s);
	if (rc)
		return rc;
	/* The orchestrator writes every key; 0 means "not set" for these. */
	if (c->batch == 0)
		c->batch = 64;
	if (c->blas_threads == 0)
		c->blas_threads = 1;
	if (c->batch < 1 || c->batch > 65536 || c->epochs < 0 || c->blas_threads < 1 ||
	    c->blas_threads > 256 || c->stop_steps < 0) {
		log_error("trainer: bad train.batch %lld / train.epochs %lld / train.blas_threads %lld",
			  (long long)c->batch, (long long)c->epochs, (long long)c->blas_threads);
		return -EINVAL;
	}
	if (c->epochs == 0 && c->stop_steps == 0 && c->stop_time_s <= 0 && c->stop_accuracy <= 0) {
		log_error("trainer: no stop condition (train.epochs, stop.time, stop.steps, stop.accuracy)");
		return -EINVAL;
	}
	return 0;
}

int trainer_run(const struct kv *cfg)
{
	struct trainer_cfg c;
	struct model_spec spec;
	struct optim_params op;
	struct partition_params pp;
	char img[PATH_MAX], lbl[PATH_MAX], path[PATH_MAX];
	struct partition *part = NULL;
	struct data_set *train = NULL, *test = NULL;
	struct model *m = NULL;
	struct optim *opt = NULL;
	struct csv_writer *csv = NULL;
	uint8_t *labels = NULL, *y = NULL;
	uint32_t nlabels = 0, *order = NULL, *sample = NULL;
	float *x = NULL, *grad = NULL;
	size_t nsample, nidx;
	const uint32_t *idx;
	uint64_t updates = 0, samples = 0;
	int64_t last_eval_ns;
	int reached = 0, stop = 0;
	struct ctl_client *ctl = NULL;
	struct rng r;
	int rc;

	rc = read_cfg(cfg, &c);
	rc = rc ? rc : model_spec_from_kv(cfg, &spec);
	rc = rc ? rc : optim_params_from_kv(cfg, &op);
	if (rc)
		return rc;
	clock_set_origin_ns(c.origin_ns);
	model_blas_threads((int)c.blas_threads);

	/* The whole training set, as one iid "partition" of one node. */
	rc = data_paths(c.data_dir, DATA_TRAIN, img, lbl, sizeof img);
	rc = rc ? rc : data_read_labels(lbl, &labels, &nlabels);
	if (rc)
		goto out;
	memset(&pp, 0, sizeof pp);
	pp.scheme = PARTITION_IID;
	pp.nodes = 1;
	pp.seed = (uint64_t)c.seed;
	rc = partition_build(&pp, labels, nlabels, &part);
	if (rc)
		goto out;
	snprintf(path, sizeof path, "%s/partition.csv", c.run_dir);
	rc = partition_write_csv(part, path, &c.node_name);
	if (rc)
		goto out;
	idx = partition_indices(part, 0, &nidx);
	rc = data_load(img, lbl, idx, nidx, &train);
	if (rc)
		goto out;
	rc = data_paths(c.data_dir, DATA_TEST, img, lbl, sizeof img);
	rc = rc ? rc : data_load(img, lbl, NULL, 0, &test);
	if (rc)
		goto out;
	if (train->dim != (size_t)spec.rows * spec.cols) {
		spec.rows = train->rows;
		spec.cols = train->cols;
	}

	m = model_new(&spec, (uint64_t)c.seed);
	opt = m ? optim_new(model_nparams(m), &op) : NULL;
	order = malloc(train->n * sizeof *order);
	sample = malloc(TRAINER_LOSS_SAMPLE * sizeof *sample);
	x = malloc((size_t)c.batch * train->dim * sizeof *x);
	y = malloc((size_t)c.batch);
	grad = m ? malloc(model_nparams(m) * sizeof *grad) : NULL;
	if (!m || !opt || !order || !sample || !x || !y || !grad) {
		rc = m && opt ? -ENOMEM : -EINVAL;
		goto out;
	}
	nsample = eval_sample(train->n, TRAINER_LOSS_SAMPLE, (uint64_t)c.seed, sample);
	snprintf(path, sizeof path, "%s/eval.csv", c.run_dir);
	csv = csv_writer_open(path, TRACE_HEADER_EVAL);
	if (!csv) {
		rc = -EIO;
		goto out;
	}
	/* Loaded: tell the orchestrator, and start when it says so. Its "start ORIGIN" is the
	 * run's clock origin (t_s 0, stop.time counts from it), as for every other role. */
	{
		struct engine_conf ec = { .name = c.node_name, .origin_ns = c.origin_ns };

		rc = engine_ctl_start(cfg, &ec, &ctl);
		if (rc == -ECANCELED) {
			rc = 0;
			goto out;
		}
		if (rc)
			goto out;
		c.origin_ns = ec.origin_ns;
	}
	log_info("trainer: %s model, %zu parameters, %u train / %u test samples, batch %lld, lr %g",
		 model_kind_name(spec.kind), model_nparams(m), train->n, test->n,
		 (long long)c.batch, op.lr);
	for (uint32_t i = 0; i < train->n; i++)
		order[i] = i;
	rng_seed(&r, (uint64_t)c.seed, TRAINER_RNG_STREAM_EPOCH);
	last_eval_ns = clock_now_ns();

	for (int64_t epoch = 0; !stop && (c.epochs == 0 || epoch < c.epochs); epoch++) {
		rng_shuffle_u32(&r, order, train->n);
		for (size_t s = 0; !stop && s < train->n; s += (size_t)c.batch) {
			size_t len = train->n - s < (size_t)c.batch ? train->n - s : (size_t)c.batch;
			double loss;
			int64_t now;
			int do_eval;

			data_batch(train, order + s, len, x, y);
			rc = model_gradient(m, x, y, len, grad, &loss);
			if (rc)
				goto out;
			optim_step(opt, model_params(m), grad);
			updates++;
			samples += len;
			now = clock_now_ns();
			if (c.stop_steps && updates >= (uint64_t)c.stop_steps)
				stop = 1;
			if (c.stop_time_s > 0 && (double)(now - c.origin_ns) / 1e9 >= c.stop_time_s)
				stop = 1;
			if (ctl) {
				ctl_client_status(ctl, (int64_t)updates, CTL_RUN, false);
				if (ctl_client_should_stop(ctl))
					stop = 1;
			}
			do_eval = c.eval_every_s > 0 && (double)(now - last_eval_ns) / 1e9 >= c.eval_every_s;
			/* the last step of the run is evaluated after the loop */
			if (do_eval && !stop) {
				struct eval_result te, tr;

				rc = eval_model(m, test, NULL, 0, &te);
				rc = rc ? rc : eval_model(m, train, sample, nsample, &tr);
				if (rc)
					goto out;
				rc = csv_writer_row(csv, "%.3f,%s,%llu,%.4f,%llu,%.4f,%.4f,%.4f",
						    clock_run_s(), c.node_name,
						    (unsigned long long)updates,
						    (double)samples / train->n, (unsigned long long)samples,
						    te.accuracy, te.loss, tr.loss);
				if (rc)
					goto out;
				log_info("trainer: t %.1f s, epoch %.2f, test accuracy %.4f, loss %.4f",
					 clock_run_s(), (double)samples / train->n, te.accuracy, te.loss);
				if (c.target > 0 && !reached && te.accuracy >= c.target) {
					reached = 1;
					log_info("trainer: target %.4f reached at t %.3f s", c.target,
						 clock_run_s());
				}
				if (c.stop_accuracy > 0 && te.accuracy >= c.stop_accuracy)
					stop = 1;
				last_eval_ns = clock_now_ns();
			}
		}
	}
	{
		struct eval_result te, tr;

		rc = eval_model(m, test, NULL, 0, &te);
		rc = rc ? rc : eval_model(m, train, sample, nsample, &tr);
		if (rc)
			goto out;
		rc = csv_writer_row(csv, "%.3f,%s,%llu,%.4f,%llu,%.4f,%.4f,%.4f", clock_run_s(),
				    c.node_name, (unsigned long long)updates,
				    (double)samples / train->n, (unsigned long long)samples,
				    te.accuracy, te.loss, tr.loss);
		log_info("trainer: done after %llu updates (%.2f epochs): test accuracy %.4f, loss %.4f",
			 (unsigned long long)updates, (double)samples / train->n, te.accuracy, te.loss);
		if (ctl && rc == 0) {
			ctl_client_status(ctl, (int64_t)updates, CTL_DONE, false);
			ctl_client_done(ctl);
		}
	}
out:
	ctl_client_close(&ctl);
	csv_writer_close(&csv);
	free(labels);
	free(order);
	free(sample);
	free(x);
	free(y);
	free(grad);
	optim_destroy(&opt);
	model_destroy(&m);
	data_destroy(&train);
	data_destroy(&test);
	partition_destroy(&part);
	return rc;
}
