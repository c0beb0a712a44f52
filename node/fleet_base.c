/* node/fleet_base: see fleet_base.h. */
#include "node/fleet_base.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/rfile.h"
#include "node/model.h"
#include "node/optim.h"
#include "node/wire.h"

/* fleet.base trained: base_steps minibatch SGD steps from the seed's initial model, taken in
 * turn from each device's share (step s from device s mod N), so the base has seen every
 * class the fleet holds before it is deployed. Each share's minibatch order is the engines'
 * own (seeded by run.seed and the device index), its optimiser the scenario's: the result is a
 * function of the scenario and seed alone, so a restarted registry trains the same base
 * (fleet_store_put_base then finds it already stored). The works are private to this
 * function: the replay recomputation's per-device state starts untouched. */
static int base_train(const struct kv *cfg, const struct fleet_conf *fc, float *base, size_t n)
{
	struct engine_work **wk = calloc(fc->ec.n, sizeof *wk);
	int64_t t0 = clock_now_ns();
	double loss = 0;
	int rc = 0;

	if (!wk)
		return -ENOMEM;
	for (uint32_t i = 0; i < fc->ec.n && rc == 0; i++) {
		struct engine_conf c = fc->ec; /* a shallow copy: device i's index */

		c.index = i;
		if ((rc = engine_work_open(cfg, &c, false, &wk[i])) == 0 &&
		    model_nparams(wk[i]->model) != n)
			rc = -EINVAL;
	}
	for (int64_t s = 0; s < fc->base_steps && rc == 0; s++) {
		struct engine_work *w = wk[(uint64_t)s % fc->ec.n];
		size_t got;

		memcpy(model_params(w->model), base, n * sizeof(float));
		if ((rc = engine_work_gradient(w, &loss, &got)) == 0)
			optim_step(wk[0]->optim, base, w->grad);
	}
	if (rc == 0 && !wire_payload_finite(base, n))
		rc = -ERANGE;
	if (rc < 0)
		log_error("engine_fleet: training the base: %s", strerror(-rc));
	else
		log_info("engine_fleet: base trained %lld steps over %u shares in %.2f s (last loss %.4f)",
			 (long long)fc->base_steps, fc->ec.n, (double)(clock_now_ns() - t0) / 1e9,
			 loss);
	for (uint32_t i = 0; i < fc->ec.n; i++)
		engine_work_destroy(&wk[i]);
	free(wk);
	return rc;
}

int fleet_base_load(const struct kv *cfg, const struct fleet_conf *fc, float **out, size_t *nout)
{
	struct model_spec spec;
	struct model *m = NULL;
	float *base;
	size_t n;
	int rc;

	if ((rc = model_spec_from_kv(cfg, &spec)) < 0)
		return rc;
	*out = NULL;
	*nout = 0;
	m = model_new(&spec, fc->ec.seed);
	if (!m)
		return -ENOMEM;
	n = model_nparams(m);
	base = malloc(n * sizeof(float));
	if (!base) {
		model_destroy(&m);
		return -ENOMEM;
	}
	memcpy(base, model_params(m), n * sizeof(float));
	model_destroy(&m);
	/* from here on the caller owns base (freed with it on failure too) */
	*out = base;
	*nout = n;
	if (!strcmp(fc->base, "file")) {
		char *buf = NULL, err[512];
		size_t len = 0;

		if (!fc->base_file || (rc = rfile_read(fc->base_file, n * sizeof(float), &buf, &len,
						       err, sizeof err)) < 0) {
			log_error("engine_fleet: fleet.base_file: %s", fc->base_file ? err : "not set");
			return -EINVAL;
		}
		if (len != n * sizeof(float) || !wire_payload_finite(buf, n)) {
			log_error("engine_fleet: %s: expected %zu finite float32 values for this model",
				  fc->base_file, n);
			free(buf);
			return -EINVAL;
		}
		memcpy(base, buf, len);
		free(buf);
	} else if (!strcmp(fc->base, "trained")) {
		if (fc->base_steps < 1) {
			log_error("engine_fleet: fleet.base_steps must be at least 1");
			return -EINVAL;
		}
		return base_train(cfg, fc, base, n);
	} else if (strcmp(fc->base, "init")) {
		log_error("engine_fleet: fleet.base %s (expected init, trained or file)", fc->base);
		return -EINVAL;
	}
	return 0;
}
