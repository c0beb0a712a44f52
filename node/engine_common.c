/* node/engine_common: see engine_common.h.
 *
 * Every node derives the same partition and the same initial model from run.seed, so no data
 * and no initial parameters cross the network. The train-loss column of eval.csv is measured on
 * a fixed sample (ENGINE_TRAIN_LOSS_SAMPLE) of the evaluating node's own share. */
#include "node/engine_common.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "collectors/csv.h"
#include "collectors/schema.h"
#include "lib/clock.h"
#include "lib/ctl.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "lib/safefile.h"
#include "node/data.h"
#include "node/model.h"
#include "node/optim.h"
#include "node/partition.h"
#include "node/straggler.h"

#define CTL_READY_TIMEOUT_MS (10 * 60 * 1000)

static int split_addrs(const char *list, uint32_t n, char (*out)[ENGINE_ADDR_LEN])
{
	const char *p = list;

	for (uint32_t i = 0; i < n; i++) {
		size_t len = strcspn(p, ",");

		while (len > 0 && (*p == ' ' || *p == '\t'))
			p++, len--;
		while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		if (len == 0 || len >= ENGINE_ADDR_LEN)
			return -EINVAL;
		memcpy(out[i], p, len);
		out[i][len] = '\0';
		p += strcspn(p, ",");
		if (*p == ',')
			p++;
		else if (i + 1 < n)
			return -EINVAL;
	}
	return 0;
}

int engine_conf_read(const struct kv *cfg, struct engine_conf *c)
{
	int64_t idx = 0, n = 0, port = 0, seed = 0, batch = 0, threads = 0;
	const char *addrs, *names;
	int rc;

	memset(c, 0, sizeof *c);
	c->run_dir = kv_get(cfg, "run.dir");
	c->name = kv_get(cfg, "node.name");
	c->data_dir = kv_get(cfg, "data.path");
	if (!c->data_dir || !*c->data_dir)
		c->data_dir = "/usr/share/datasets/fashion-mnist";
	if (!c->run_dir || !*c->run_dir || !c->name || !*c->name) {
		log_error("engine: run.dir and node.name must be set");
		return -EINVAL;
	}
	rc = kv_get_i64(cfg, "node.index", -1, &idx);
	rc = rc ? rc : kv_get_i64(cfg, "workers.count", 0, &n);
	rc = rc ? rc : kv_get_i64(cfg, "port.data", 7000, &port);
	rc = rc ? rc : kv_get_u64(cfg, "run.seed", 1, (uint64_t *)&seed);
	rc = rc ? rc : kv_get_i64(cfg, "run.origin_ns", clock_origin_ns(), &c->origin_ns);
	rc = rc ? rc : kv_get_i64(cfg, "train.batch", 64, &batch);
	rc = rc ? rc : kv_get_i64(cfg, "train.blas_threads", 1, &threads);
	rc = rc ? rc : kv_get_i64(cfg, "stop.steps", 0, &c->stop_steps);
	rc = rc ? rc : kv_get_double(cfg, "stop.time", 0, &c->stop_time_s);
	rc = rc ? rc : kv_get_double(cfg, "stop.accuracy", 0, &c->stop_accuracy);
	rc = rc ? rc : kv_get_double(cfg, "eval.every", 5.0, &c->eval_every_s);
	rc = rc ? rc : kv_get_i64(cfg, "data.train_limit", 0, &c->train_limit);
	rc = rc ? rc : kv_get_i64(cfg, "data.test_limit", 0, &c->test_limit);
	rc = rc ? rc : kv_get_bool(cfg, "train.save_model", false, &c->save_model);
	if (rc)
		return rc;
	if (n > ENGINE_MAX_NODES) {
		log_error("engine: workers.count %lld above the limit of %d nodes (LIMITS_MAX_NODES)",
			  (long long)n, ENGINE_MAX_NODES);
		return -EINVAL;
	}
	if (n < 1 || idx < 0 || idx >= n) {
		log_error("engine: node.index %lld outside workers.count %lld", (long long)idx,
			  (long long)n);
		return -EINVAL;
	}
	if (port < 1 || port > 65535 || batch < 1 || batch > LIMITS_MAX_BATCH || threads < 1 || threads > LIMITS_MAX_BLAS_THREADS ||
	    c->stop_steps < 0 || c->train_limit < 0 || c->test_limit < 0) {
		log_error("engine: bad port.data / train.batch / train.blas_threads / stop.steps / "
			  "data limits");
		return -EINVAL;
	}
	if (c->stop_steps == 0 && c->stop_time_s <= 0 && c->stop_accuracy <= 0) {
		log_error("engine: no stop condition (stop.time, stop.steps, stop.accuracy)");
		return -EINVAL;
	}
	c->index = (uint32_t)idx;
	c->n = (uint32_t)n;
	c->seed = (uint64_t)seed;
	c->batch = (uint32_t)batch;
	c->blas_threads = (int)threads;
	c->port_base = (int)port;
	addrs = kv_get(cfg, "workers.addrs");
	c->addrs = calloc(c->n, sizeof *c->addrs);
	if (!c->addrs)
		return -ENOMEM;
	if (!addrs || split_addrs(addrs, c->n, c->addrs) < 0) {
		log_error("engine: workers.addrs must list %u addresses", c->n);
		engine_conf_free(c);
		return -EINVAL;
	}
	names = kv_get(cfg, "workers.names");
	if (names && *names) {
		c->names = calloc(c->n, sizeof *c->names);
		if (!c->names || split_addrs(names, c->n, c->names) < 0) {
			log_error("engine: workers.names must list %u names", c->n);
			engine_conf_free(c);
			return -EINVAL;
		}
	}
	c->late = calloc(c->n, sizeof *c->late);
	if (!c->late) {
		engine_conf_free(c);
		return -ENOMEM;
	}
	for (const char *q = kv_get(cfg, "workers.late"); q && *q;) {
		char *end;
		unsigned long i = strtoul(q, &end, 10);

		if (end == q)
			break;
		if (i < c->n)
			c->late[i] = true;
		q = *end == ',' ? end + 1 : end;
	}
	for (uint32_t i = 0; i < c->n && !c->port_stride; i++)
		for (uint32_t j = i + 1; j < c->n; j++)
			if (!strcmp(c->addrs[i], c->addrs[j])) {
				c->port_stride = true;
				break;
			}
	if (c->port_stride && c->port_base + (int)c->n - 1 > 65535) {
		log_error("engine: port.data %d + %u nodes exceeds 65535", c->port_base, c->n);
		engine_conf_free(c);
		return -EINVAL;
	}
	return 0;
}

void engine_conf_free(struct engine_conf *c)
{
	free(c->addrs);
	free(c->names);
	free(c->late);
	c->addrs = NULL;
	c->names = NULL;
	c->late = NULL;
}

int engine_conf_endpoint(const struct engine_conf *c, uint32_t i, char *out, size_t len)
{
	int port, w;

	if (i >= c->n)
		return -EINVAL;
	port = c->port_base + (c->port_stride ? (int)i : 0);
	w = snprintf(out, len, "tcp://%s:%d", c->addrs[i], port);
	return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

bool engine_conf_stop_reached(const struct engine_conf *c, int64_t steps)
{
	if (c->stop_steps > 0 && steps >= c->stop_steps)
		return true;
	return c->stop_time_s > 0 &&
	       (double)(clock_now_ns() - c->origin_ns) / 1e9 >= c->stop_time_s;
}

static int load_test(const struct engine_conf *c, struct data_set **out)
{
	char img[PATH_MAX], lbl[PATH_MAX];
	uint32_t *keep = NULL;
	uint8_t *labels = NULL;
	uint32_t n = 0;
	size_t nkeep = 0;
	int rc;

	rc = data_paths(c->data_dir, DATA_TEST, img, lbl, sizeof img);
	if (rc)
		return rc;
	if (c->test_limit > 0) {
		rc = data_read_labels(lbl, &labels, &n);
		if (rc)
			goto out;
		nkeep = (size_t)c->test_limit < n ? (size_t)c->test_limit : n;
		keep = malloc(nkeep * sizeof *keep);
		if (!keep) {
			rc = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < nkeep; i++)
			keep[i] = (uint32_t)i;
	}
	rc = data_load(img, lbl, keep, nkeep, out);
out:
	free(keep);
	free(labels);
	return rc;
}

int engine_work_open(const struct kv *cfg, const struct engine_conf *c, bool with_test,
		     struct engine_work **out)
{
	char img[PATH_MAX], lbl[PATH_MAX], path[PATH_MAX];
	const char **names = NULL;
	struct engine_work *w = NULL;
	struct partition_params pp;
	struct partition *part = NULL;
	struct model_spec spec;
	struct optim_params op;
	struct straggler_params sp;
	uint8_t *labels = NULL;
	uint32_t nlabels = 0;
	const uint32_t *idx;
	size_t nidx;
	int rc;

	*out = NULL;
	rc = model_spec_from_kv(cfg, &spec);
	rc = rc ? rc : optim_params_from_kv(cfg, &op);
	rc = rc ? rc : partition_params_from_kv(cfg, c->n, &pp);
	rc = rc ? rc : straggler_params_from_kv(cfg, &sp);
	if (rc)
		return rc;
	model_blas_threads(c->blas_threads);
	w = calloc(1, sizeof *w);
	if (!w)
		return -ENOMEM;
	w->batch = c->batch;
	w->straggler = straggler_new(&sp, straggler_seed(c->seed, c->index));
	if (!w->straggler) {
		rc = -EINVAL;
		goto out;
	}
	rc = data_paths(c->data_dir, DATA_TRAIN, img, lbl, sizeof img);
	rc = rc ? rc : data_read_labels(lbl, &labels, &nlabels);
	if (rc)
		goto out;
	if (c->train_limit > 0 && (uint64_t)c->train_limit < nlabels)
		nlabels = (uint32_t)c->train_limit;
	/* Only the first nlabels labels are passed, so the indices stay below the limit. */
	rc = partition_build(&pp, labels, nlabels, &part);
	if (rc)
		goto out;
	if (c->index == 0) {
		names = c->names ? calloc(c->n, sizeof *names) : NULL;
		for (uint32_t i = 0; names && i < c->n; i++)
			names[i] = c->names[i];
		snprintf(path, sizeof path, "%s/partition.csv", c->run_dir);
		rc = partition_write_csv(part, path, names);
		free(names);
		if (rc)
			goto out;
	}
	idx = partition_indices(part, c->index, &nidx);
	if (nidx == 0) {
		log_error("engine: %s has no training samples", c->name);
		rc = -EINVAL;
		goto out;
	}
	rc = data_load(img, lbl, idx, nidx, &w->train);
	if (rc)
		goto out;
	if (with_test) {
		rc = load_test(c, &w->test);
		if (rc)
			goto out;
	}
	spec.rows = w->train->rows;
	spec.cols = w->train->cols;
	w->model = model_new(&spec, c->seed);
	if (!w->model) {
		rc = -EINVAL;
		goto out;
	}
	if (model_nparams(w->model) > LIMITS_MAX_PARAMS) {
		/* Every engine sends the model whole in one message (node/wire). */
		log_error("engine: model of %zu parameters above the limit of %u (LIMITS_MAX_PARAMS)",
			  model_nparams(w->model), LIMITS_MAX_PARAMS);
		rc = -EMSGSIZE;
		goto out;
	}
	w->optim = optim_new(model_nparams(w->model), &op);
	w->grad = malloc(model_nparams(w->model) * sizeof *w->grad);
	w->order = malloc(w->train->n * sizeof *w->order);
	w->loss_idx = malloc(ENGINE_TRAIN_LOSS_SAMPLE * sizeof *w->loss_idx);
	w->x = malloc((size_t)c->batch * w->train->dim * sizeof *w->x);
	w->y = malloc(c->batch);
	if (!w->optim || !w->grad || !w->order || !w->loss_idx || !w->x || !w->y) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < w->train->n; i++)
		w->order[i] = i;
	rng_seed(&w->rng, c->seed ^ ((uint64_t)c->index << 32), ENGINE_RNG_STREAM_ORDER);
	rng_shuffle_u32(&w->rng, w->order, w->train->n);
	w->nloss_idx = eval_sample(w->train->n, ENGINE_TRAIN_LOSS_SAMPLE, c->seed, w->loss_idx);
	*out = w;
	w = NULL;
out:
	free(labels);
	partition_destroy(&part);
	engine_work_destroy(&w);
	return rc;
}

int engine_work_add_samples(struct engine_work *self, const char *images, const char *labels,
			    const uint32_t *idx, size_t n)
{
	struct data_set *add = NULL, *t = self->train;
	size_t total = (size_t)t->n + n;
	uint8_t *px = NULL, *lb = NULL;
	uint32_t *org = NULL, *order = NULL;
	int rc;

	if (n == 0)
		return 0;
	if (total > UINT32_MAX)
		return -EOVERFLOW;
	if ((rc = data_load(images, labels, idx, n, &add)) < 0)
		return rc;
	if (add->dim != t->dim) {
		data_destroy(&add);
		return -EINVAL;
	}
	/* Grow each array; a failure leaves the share as it was (a larger buffer holding the
	 * same n samples is still the same share). */
	px = realloc(t->pixels, total * t->dim);
	if (px)
		t->pixels = px;
	lb = px ? realloc(t->labels, total) : NULL;
	if (lb)
		t->labels = lb;
	org = lb ? realloc(t->origin, (total + 1) * sizeof *org) : NULL;
	if (org)
		t->origin = org;
	order = org ? realloc(self->order, total * sizeof *order) : NULL;
	if (!order) {
		data_destroy(&add);
		return -ENOMEM;
	}
	self->order = order;
	memcpy(t->pixels + (size_t)t->n * t->dim, add->pixels, n * t->dim);
	memcpy(t->labels + t->n, add->labels, n);
	memcpy(t->origin + t->n, add->origin, n * sizeof *org);
	t->n = (uint32_t)total;
	for (uint32_t i = 0; i < t->n; i++)
		self->order[i] = i;
	rng_shuffle_u32(&self->rng, self->order, t->n);
	self->pos = 0;
	data_destroy(&add);
	return 0;
}

void engine_work_destroy(struct engine_work **self)
{
	struct engine_work *w;

	if (!self || !*self)
		return;
	w = *self;
	*self = NULL;
	straggler_destroy(&w->straggler);
	data_destroy(&w->train);
	data_destroy(&w->test);
	model_destroy(&w->model);
	optim_destroy(&w->optim);
	free(w->grad);
	free(w->order);
	free(w->loss_idx);
	free(w->x);
	free(w->y);
	free(w);
}

int engine_work_gradient(struct engine_work *self, double *loss, size_t *n)
{
	size_t len;

	if (self->pos >= self->train->n) {
		rng_shuffle_u32(&self->rng, self->order, self->train->n);
		self->pos = 0;
	}
	len = self->train->n - self->pos;
	if (len > self->batch)
		len = self->batch;
	data_batch(self->train, self->order + self->pos, len, self->x, self->y);
	self->pos += len;
	self->samples += len;
	*n = len;
	return model_gradient(self->model, self->x, self->y, len, self->grad, loss);
}

double engine_work_straggle(struct engine_work *self, const struct engine_conf *c, int64_t step,
			    double compute_s)
{
	double extra, pause;

	if (!self->straggler || !straggler_active(self->straggler))
		return 0;
	extra = straggler_step_extra_s(self->straggler, step, compute_s);
	pause = straggler_pause_left_s(self->straggler,
				       (double)(clock_now_ns() - c->origin_ns) / 1e9 + extra);
	if (extra + pause > 0)
		clock_sleep_ns((int64_t)((extra + pause) * 1e9));
	return extra + pause;
}

int engine_work_eval(struct engine_work *self, struct model *m, struct eval_result *test,
		     struct eval_result *train)
{
	int rc;

	if (!self->test)
		return -EINVAL;
	rc = eval_model(m, self->test, NULL, 0, test);
	return rc ? rc : eval_model(m, self->train, self->loss_idx, self->nloss_idx, train);
}

/* Averaged probabilities of the models over samples idx[0..n) of ds (idx NULL = all). */
static int ensemble_on(struct model *m, const float *const *params, size_t nmodels,
		       const struct data_set *ds, const uint32_t *idx, size_t n,
		       struct eval_result *out)
{
	unsigned nc = model_get_spec(m)->nclasses;
	size_t chunk = n < EVAL_CHUNK ? n : EVAL_CHUNK;
	float *x = NULL, *p = NULL, *acc = NULL;
	uint8_t *y = NULL;
	double correct = 0, loss = 0;
	int rc = 0;

	x = malloc(chunk * ds->dim * sizeof *x);
	p = malloc(chunk * nc * sizeof *p);
	acc = malloc(chunk * nc * sizeof *acc);
	y = malloc(chunk);
	if (!x || !p || !acc || !y) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t s = 0; s < n; s += chunk) {
		size_t len = n - s < chunk ? n - s : chunk;
		struct eval_result part;

		if (idx) {
			data_batch(ds, idx + s, len, x, y);
		} else {
			uint32_t first[EVAL_CHUNK];

			for (size_t i = 0; i < len; i++)
				first[i] = (uint32_t)(s + i);
			data_batch(ds, first, len, x, y);
		}
		memset(acc, 0, len * nc * sizeof *acc);
		for (size_t k = 0; k < nmodels; k++) {
			model_set_params(m, params[k]);
			rc = model_predict(m, x, len, p);
			if (rc)
				goto out;
			for (size_t i = 0; i < len * nc; i++)
				acc[i] += p[i] / (float)nmodels;
		}
		eval_probs(acc, y, len, nc, &part);
		correct += part.accuracy * (double)len;
		loss += part.loss * (double)len;
	}
	out->n = n;
	out->accuracy = n ? correct / (double)n : 0;
	out->loss = n ? loss / (double)n : 0;
out:
	free(x);
	free(p);
	free(acc);
	free(y);
	return rc;
}

int engine_work_eval_ensemble(struct engine_work *self, struct model *m, const float *const *params,
			      size_t nmodels, struct eval_result *test, struct eval_result *train)
{
	int rc;

	if (!self->test || nmodels == 0)
		return -EINVAL;
	rc = ensemble_on(m, params, nmodels, self->test, NULL, self->test->n, test);
	return rc ? rc
		  : ensemble_on(m, params, nmodels, self->train, self->loss_idx, self->nloss_idx,
				train);
}

static struct csv_writer *trace_open(const struct engine_conf *c, const char *header)
{
	char path[PATH_MAX];

	snprintf(path, sizeof path, "%s/nodes", c->run_dir);
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		log_error("engine: mkdir %s: %s", path, strerror(errno));
		return NULL;
	}
	if (snprintf(path, sizeof path, "%s/nodes/%s.csv", c->run_dir, c->name) >= (int)sizeof path)
		return NULL;
	return csv_writer_open(path, header);
}

struct csv_writer *engine_trace_open(const struct engine_conf *c)
{
	return trace_open(c, TRACE_HEADER_NODE);
}

struct csv_writer *engine_server_trace_open(const struct engine_conf *c)
{
	return trace_open(c, TRACE_HEADER_SERVER);
}

struct csv_writer *engine_eval_open(const struct engine_conf *c)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof path, "%s/eval.csv", c->run_dir) >= (int)sizeof path)
		return NULL;
	return csv_writer_open(path, TRACE_HEADER_EVAL);
}

int engine_trace_row(struct csv_writer *w, const struct engine_conf *c, int64_t t_ns, int64_t step,
		     double compute_s, double wait_s, int64_t staleness, int64_t model_version,
		     double loss, uint64_t bytes_tx, uint64_t bytes_rx, uint64_t bad_frames)
{
	char stale[24] = "";
	double t = (double)(t_ns - c->origin_ns) / 1e9;

	if (staleness >= 0)
		snprintf(stale, sizeof stale, "%lld", (long long)staleness);
	return csv_writer_row(w, "%.6f,%s,%lld,%.6f,%.6f,%s,%lld,%.6f,%llu,%llu,%llu",
			      t < 0 ? 0 : t, c->name, (long long)step,
			      compute_s < 0 ? 0 : compute_s, wait_s < 0 ? 0 : wait_s, stale,
			      (long long)model_version, loss, (unsigned long long)bytes_tx,
			      (unsigned long long)bytes_rx, (unsigned long long)bad_frames);
}

int engine_eval_row(struct csv_writer *w, const struct engine_conf *c, const struct engine_work *wk,
		    uint64_t updates, uint64_t samples, const struct eval_result *test,
		    const struct eval_result *train)
{
	double t = (double)(clock_now_ns() - c->origin_ns) / 1e9;

	return csv_writer_row(w, "%.6f,%s,%llu,%.4f,%llu,%.6f,%.6f,%.6f", t < 0 ? 0 : t, c->name,
			      (unsigned long long)updates, (double)samples / wk->train->n,
			      (unsigned long long)samples, test->accuracy, test->loss, train->loss);
}

int engine_save_params(const struct engine_conf *c, const float *params, size_t n)
{
	char path[PATH_MAX];
	FILE *f;
	int rc = 0;

	if (!c->save_model)
		return 0;
	if (snprintf(path, sizeof path, "%s/nodes/%s.params", c->run_dir, c->name) >= (int)sizeof path)
		return -ENAMETOOLONG;
	f = safefile_fopen(path, "w"); /* the run directory may belong to a user */
	if (!f) {
		rc = -errno;
		log_error("engine: open %s: %s", path, strerror(errno));
		return rc;
	}
	/* x86-64 and arm64 are little-endian: the bytes in memory are the file format. */
	if (fwrite(params, sizeof *params, n, f) != n)
		rc = -EIO;
	if (fclose(f) != 0 && !rc)
		rc = -EIO;
	if (rc)
		log_error("engine: write %s: %s", path, strerror(-rc));
	return rc;
}

int engine_ctl_start(const struct kv *cfg, struct engine_conf *c, struct ctl_client **out)
{
	const char *ep = kv_get(cfg, "ctl.endpoint");
	int rc;

	*out = NULL;
	if (!ep || !*ep)
		return 0;
	*out = ctl_client_open(ep, c->name);
	if (!*out)
		return -EIO;
	ctl_client_install_signals();
	rc = ctl_client_ready_wait(*out, CTL_READY_TIMEOUT_MS);
	if (rc < 0 && rc != -ECANCELED)
		log_error("engine: %s: no start from the control plane: %s", c->name, strerror(-rc));
	/* "start ORIGIN" moved the run's clock to the instant training starts (run.origin_ns was
	 * handed out before the link self-check and data loading): stop.time and the t columns
	 * count from it, as the orchestrator's events.csv and progress.csv do. */
	if (rc == 0) {
		c->origin_ns = clock_origin_ns();
		c->rejoined = ctl_client_rejoined(*out);
	}
	return rc;
}
