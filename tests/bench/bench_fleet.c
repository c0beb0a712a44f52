/* bench_fleet: what one fleet sync costs per strategy and model, on real fine-tuning.
 *
 * For softmax, MLP (784-128-10) and CNN (32 5x5 filters, 128 dense): a device's share of
 * Fashion-MNIST (1 of 4, classes partition) is trained BENCH_FLEET_WARM steps from the seed's
 * initial model (the deployed base), then SYNCS syncs of BENCH_FLEET_STEPS steps each; at each
 * sync the version is encoded as full, delta (against the previous version) and sparse (1% and
 * 10% top-k, each with its own error-feedback chain), and decoded back. Printed per model and
 * strategy: mean frame bytes, ratio to raw float32, encode and decode time, and the time to
 * rebuild a version through a chain of 10 deltas. Nothing is asserted: figures only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "node/engine_common.h"
#include "node/fleet_codec.h"
#include "node/model.h"
#include "node/optim.h"

struct acc {
	double bytes, enc_s, dec_s;
	int n;
};

static void train(struct engine_work *wk, int steps)
{
	for (int s = 0; s < steps; s++) {
		double loss;
		size_t nb;

		if (engine_work_gradient(wk, &loss, &nb) < 0)
			return;
		optim_step(wk->optim, model_params(wk->model), wk->grad);
	}
}

static double now_s(void)
{
	return (double)clock_now_ns() / 1e9;
}

static void one_model(const char *kind, int warm, int steps, int syncs)
{
	struct kv *k = kv_new();
	struct engine_conf ec;
	struct engine_work *wk = NULL;
	struct acc a[4] = { { 0 } };
	static const char *const names[4] = { "full", "delta", "sparse-1%", "sparse-10%" };
	float *prev, *out, *sp[2], *sp_res[2];
	size_t n;

	kv_set(k, "run.dir", "/tmp");
	kv_set(k, "node.name", "bench");
	kv_set(k, "node.index", "1");
	kv_set(k, "workers.count", "4");
	kv_set(k, "workers.addrs", "127.0.0.1,127.0.0.1,127.0.0.1,127.0.0.1");
	kv_set(k, "run.seed", "5");
	kv_set(k, "stop.steps", "1000000");
	kv_set(k, "model.kind", kind);
	kv_set(k, "model.hidden", strcmp(kind, "softmax") ? "128" : "");
	kv_set(k, "train.batch", "32");
	kv_set(k, "train.lr", "0.05");
	kv_set(k, "data.partition.scheme", "classes");
	kv_set(k, "data.partition.per_node", "3");
	kv_set(k, "data.path", "/usr/share/datasets/fashion-mnist");
	if (engine_conf_read(k, &ec) < 0 || engine_work_open(k, &ec, false, &wk) < 0) {
		fprintf(stderr, "bench_fleet: cannot open the %s workload\n", kind);
		kv_destroy(&k);
		return;
	}
	n = model_nparams(wk->model);
	prev = malloc(n * 4);
	out = malloc(n * 4);
	for (int j = 0; j < 2; j++) {
		sp[j] = malloc(n * 4);
		sp_res[j] = calloc(n, 4);
	}
	train(wk, warm);
	memcpy(prev, model_params(wk->model), n * 4);
	memcpy(sp[0], prev, n * 4);
	memcpy(sp[1], prev, n * 4);
	for (int s = 0; s < syncs; s++) {
		float *m = model_params(wk->model);
		uint8_t *f;
		size_t len;
		double t0;

		train(wk, steps);
		for (int st = 0; st < 4; st++) {
			float *base = st < 2 ? prev : sp[st - 2];
			float *dev = NULL;

			t0 = now_s();
			if (st < 2) {
				if (fleet_codec_encode(st ? FLEET_DELTA : FLEET_FULL, m, prev, n, &f, &len) < 0)
					continue;
			} else {
				/* The sparse chain's device: this sync's training (m - prev) on top of its
				 * own adopted model. */
				dev = malloc(n * 4);
				for (size_t i = 0; i < n; i++)
					dev[i] = base[i] + (m[i] - prev[i]);
				if (fleet_codec_encode_sparse(dev, base, sp_res[st - 2], n,
							      (size_t)ceil(n * (st == 2 ? 0.01 : 0.10)), &f,
							      &len) < 0) {
					free(dev);
					continue;
				}
			}
			a[st].enc_s += now_s() - t0;
			t0 = now_s();
			if (fleet_codec_decode(f, len, st == 0 ? NULL : base, n, out) != 0)
				fprintf(stderr, "bench_fleet: %s %s sync %d does not decode\n", kind, names[st], s);
			a[st].dec_s += now_s() - t0;
			a[st].bytes += (double)len;
			a[st].n++;
			if (dev) {
				memcpy(sp[st - 2], dev, n * 4);
				free(dev);
			}
			free(f);
		}
		memcpy(prev, m, n * 4);
	}
	for (int st = 0; st < 4; st++)
		if (a[st].n)
			printf("%-8s %9zu %-11s %12.0f %8.4f %10.6f %10.6f\n", kind, n, names[st],
			       a[st].bytes / a[st].n, a[st].bytes / a[st].n / (double)(n * 4),
			       a[st].enc_s / a[st].n, a[st].dec_s / a[st].n);
	for (int j = 0; j < 2; j++) {
		free(sp[j]);
		free(sp_res[j]);
	}
	free(prev);
	free(out);
	engine_work_destroy(&wk);
	engine_conf_free(&ec);
	kv_destroy(&k);
}

int main(void)
{
	const char *e;
	int warm = 200, steps = 20, syncs = 10;

	log_init("bench_fleet", LOG_WARN);
	if ((e = getenv("BENCH_FLEET_WARM")))
		warm = atoi(e);
	if ((e = getenv("BENCH_FLEET_STEPS")))
		steps = atoi(e);
	if ((e = getenv("BENCH_FLEET_SYNCS")))
		syncs = atoi(e);
	printf("bench_fleet: %d warm-up steps, then %d syncs of %d steps (batch 32, lr 0.05)\n", warm,
	       syncs, steps);
	printf("%-8s %9s %-11s %12s %8s %10s %10s\n", "model", "params", "strategy", "bytes/sync",
	       "ratio", "encode_s", "decode_s");
	one_model("softmax", warm, steps, syncs);
	one_model("mlp", warm, steps, syncs);
	one_model("cnn", warm, steps, syncs);
	return 0;
}
