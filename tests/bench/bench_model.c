/* bench_model: the training workload's costs.
 *
 *   1. one SGD step (gradient + momentum update) of a 784-256-10 MLP at batch 64 through
 *      node/model + node/optim, against a bare loop of the same cblas_sgemm calls written here
 *      (the floor any implementation of this step can reach); both on one BLAS thread;
 *   2. the same for softmax regression;
 *   3. private memory of a worker holding 1/200 of Fashion-MNIST with the MLP
 *      (/proc/self/smaps_rollup Private_Clean + Private_Dirty), in a fresh child process;
 *   4. test accuracy of each model after N epochs of the centralized trainer
 *      (BENCH_EPOCHS_SOFTMAX/MLP/CNN, default 15/15/3).
 * Nothing is asserted: figures only. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "node/data.h"
#include "node/model.h"
#include "node/optim.h"
#include "node/partition.h"
#include "node/rng.h"
#include "node/trainer.h"

#define FMNIST "/usr/share/datasets/fashion-mnist"
#define B 64
#define IN 784
#define H 256
#define OUT 10

/* The bare step: the minimum work of one MLP SGD step, no abstraction at all. */
struct bare {
	float *w1, *b1, *w2, *b2;          /* parameters */
	float *g1, *gb1, *g2, *gb2;        /* gradients */
	float *v;                          /* momentum, all params */
	float *h, *z, *dh;                 /* activations */
	size_t np;
};

static void bare_init(struct bare *s)
{
	struct rng r;

	s->np = (size_t)H * IN + H + (size_t)OUT * H + OUT;
	s->w1 = calloc(s->np, sizeof(float));
	s->b1 = s->w1 + H * IN;
	s->w2 = s->b1 + H;
	s->b2 = s->w2 + OUT * H;
	s->g1 = calloc(s->np, sizeof(float));
	s->gb1 = s->g1 + H * IN;
	s->g2 = s->gb1 + H;
	s->gb2 = s->g2 + OUT * H;
	s->v = calloc(s->np, sizeof(float));
	s->h = malloc(B * H * sizeof(float));
	s->z = malloc(B * OUT * sizeof(float));
	s->dh = malloc(B * H * sizeof(float));
	rng_seed(&r, 1, 1);
	for (size_t i = 0; i < s->np; i++)
		s->w1[i] = (float)((rng_uniform(&r) - 0.5) * 0.1);
}

static void bare_step(struct bare *s, const float *x, const uint8_t *y, float lr, float mu)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, H, IN, 1, x, IN, s->w1, IN, 0, s->h, H);
	for (int i = 0; i < B; i++)
		for (int j = 0; j < H; j++) {
			float v = s->h[i * H + j] + s->b1[j];

			s->h[i * H + j] = v > 0 ? v : 0;
		}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, OUT, H, 1, s->h, H, s->w2, H, 0, s->z, OUT);
	for (int i = 0; i < B; i++) {
		float *z = s->z + i * OUT, mx = -INFINITY, sum = 0;

		for (int j = 0; j < OUT; j++) {
			z[j] += s->b2[j];
			mx = z[j] > mx ? z[j] : mx;
		}
		for (int j = 0; j < OUT; j++) {
			z[j] = expf(z[j] - mx);
			sum += z[j];
		}
		for (int j = 0; j < OUT; j++)
			z[j] = (z[j] / sum - (j == y[i])) / B;
	}
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OUT, H, B, 1, s->z, OUT, s->h, H, 0, s->g2, H);
	memset(s->gb2, 0, OUT * sizeof(float));
	for (int i = 0; i < B; i++)
		for (int j = 0; j < OUT; j++)
			s->gb2[j] += s->z[i * OUT + j];
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, H, OUT, 1, s->z, OUT, s->w2, H, 0, s->dh, H);
	for (int i = 0; i < B * H; i++)
		if (!(s->h[i] > 0))
			s->dh[i] = 0;
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, H, IN, B, 1, s->dh, H, x, IN, 0, s->g1, IN);
	memset(s->gb1, 0, H * sizeof(float));
	for (int i = 0; i < B; i++)
		for (int j = 0; j < H; j++)
			s->gb1[j] += s->dh[i * H + j];
	for (size_t i = 0; i < s->np; i++) {
		s->v[i] = mu * s->v[i] + s->g1[i];
		s->w1[i] -= lr * s->v[i];
	}
}

static double time_bare(struct bare *s, const float *x, const uint8_t *y, int steps)
{
	int64_t t0 = clock_now_ns();

	for (int i = 0; i < steps; i++)
		bare_step(s, x + (size_t)(i % 8) * B * IN, y + (i % 8) * B, 0.01f, 0.9f);
	return (double)(clock_now_ns() - t0) / steps / 1e3;
}

static double time_model(struct model *m, struct optim *o, float *g, const float *x,
			 const uint8_t *y, int steps)
{
	int64_t t0 = clock_now_ns();
	double loss;

	for (int i = 0; i < steps; i++) {
		model_gradient(m, x + (size_t)(i % 8) * B * IN, y + (i % 8) * B, B, g, &loss);
		optim_step(o, model_params(m), g);
	}
	return (double)(clock_now_ns() - t0) / steps / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void step_times(const float *x, const uint8_t *y)
{
	struct model_spec mlp = { .kind = MODEL_MLP, .rows = 28, .cols = 28, .nclasses = 10,
				  .nhidden = 1, .hidden = { H } };
	struct model_spec sm = { .kind = MODEL_SOFTMAX, .rows = 28, .cols = 28, .nclasses = 10 };
	struct optim_params op = { .lr = 0.01, .momentum = 0.9 };
	struct model *m = model_new(&mlp, 1), *s = model_new(&sm, 1);
	struct optim *o = optim_new(model_nparams(m), &op), *os = optim_new(model_nparams(s), &op);
	float *g = malloc(model_nparams(m) * sizeof *g), *gs = malloc(model_nparams(s) * sizeof *gs);
	struct bare bs;
	enum { ROUNDS = 15, STEPS = 300 };
	double tb[ROUNDS], tm[ROUNDS], ts[ROUNDS];

	bare_init(&bs);
	time_bare(&bs, x, y, 200); /* warm up both */
	time_model(m, o, g, x, y, 200);
	/* alternate rounds so both see the same machine state; report medians */
	for (int r = 0; r < ROUNDS; r++) {
		tb[r] = time_bare(&bs, x, y, STEPS);
		tm[r] = time_model(m, o, g, x, y, STEPS);
		ts[r] = time_model(s, os, gs, x, y, STEPS);
	}
	qsort(tb, ROUNDS, sizeof *tb, cmp_d);
	qsort(tm, ROUNDS, sizeof *tm, cmp_d);
	qsort(ts, ROUNDS, sizeof *ts, cmp_d);
	printf("mlp 784-256-10 step, batch 64, 1 BLAS thread: bare sgemm loop %.1f us, node/model %.1f us "
	       "(%+.1f%%)  [median of %d x %d steps; min %.1f / %.1f us]\n",
	       tb[ROUNDS / 2], tm[ROUNDS / 2], 100.0 * (tm[ROUNDS / 2] / tb[ROUNDS / 2] - 1.0), ROUNDS,
	       STEPS, tb[0], tm[0]);
	printf("softmax 784-10 step, batch 64: %.1f us\n", ts[ROUNDS / 2]);
	free(g);
	free(gs);
	optim_destroy(&o);
	optim_destroy(&os);
	model_destroy(&m);
	model_destroy(&s);
}

static long private_kb(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	long total = 0, v;

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "Private_Clean: %ld kB", &v) == 1 ||
		    sscanf(line, "Private_Dirty: %ld kB", &v) == 1)
			total += v;
	fclose(f);
	return total;
}

/* In a fresh child: a worker's view, 1/200 of the training set plus an MLP with its optimiser. */
static void memory_of_shard(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		char img[256], lbl[256];
		struct partition_params pp = { .scheme = PARTITION_IID, .nodes = 200, .seed = 1 };
		struct model_spec mlp = { .kind = MODEL_MLP, .rows = 28, .cols = 28, .nclasses = 10,
					  .nhidden = 1, .hidden = { H } };
		struct optim_params op = { .lr = 0.01, .momentum = 0.9 };
		struct partition *p = NULL;
		struct data_set *ds = NULL;
		uint8_t *labels = NULL;
		uint32_t n;
		size_t nidx;
		const uint32_t *idx;
		long base, after_data, after_model;
		struct model *m;
		struct optim *o;
		float *g, *x;
		uint8_t y[B];
		double loss;

		model_blas_threads(1);
		base = private_kb();
		data_paths(FMNIST, DATA_TRAIN, img, lbl, sizeof img);
		if (data_read_labels(lbl, &labels, &n) || partition_build(&pp, labels, n, &p))
			_exit(1);
		free(labels);
		idx = partition_indices(p, 17, &nidx);
		if (data_load(img, lbl, idx, nidx, &ds))
			_exit(1);
		partition_destroy(&p);
		after_data = private_kb();
		m = model_new(&mlp, 1);
		o = optim_new(model_nparams(m), &op);
		g = malloc(model_nparams(m) * sizeof *g);
		x = malloc(B * IN * sizeof *x);
		for (int s = 0; s < 20; s++) {
			data_batch(ds, NULL, B, x, y);
			model_gradient(m, x, y, B, g, &loss);
			optim_step(o, model_params(m), g);
		}
		after_model = private_kb();
		printf("worker with 1/200 of the data (%u samples, %u KB pixels): private memory %ld KB "
		       "at start, %ld KB with data (+%ld KB), %ld KB with MLP + optimiser after 20 steps\n",
		       ds->n, ds->n * ds->dim / 1024, base, after_data, after_data - base, after_model);
		fflush(stdout);
		_exit(0);
	}
	waitpid(pid, NULL, 0);
}

static void accuracy_after(const char *kind, const char *hidden, const char *lr, const char *env)
{
	char dir[] = "/tmp/stalenet-bench-XXXXXX", path[300], line[512] = "", last[512] = "";
	struct kv *cfg = kv_new();
	const char *e = getenv(env);
	long epochs = e ? atol(e) : (strcmp(kind, "cnn") == 0 ? 3 : 15);
	int64_t t0;
	FILE *f;

	if (!mkdtemp(dir))
		return;
	kv_set(cfg, "run.dir", dir);
	kv_set(cfg, "run.seed", "42");
	kv_setf(cfg, "run.origin_ns", "%lld", (long long)clock_now_ns());
	kv_set(cfg, "model.kind", kind);
	kv_set(cfg, "model.hidden", hidden);
	kv_set(cfg, "train.lr", lr);
	kv_set(cfg, "train.momentum", "0.9");
	kv_set(cfg, "train.lr_schedule", "step");
	kv_set(cfg, "train.lr_step_every", "4690");
	kv_set(cfg, "train.lr_step_gamma", "0.5");
	kv_setf(cfg, "train.epochs", "%ld", epochs);
	kv_set(cfg, "eval.every", "0");
	t0 = clock_now_ns();
	if (trainer_run(cfg) == 0) {
		snprintf(path, sizeof path, "%s/eval.csv", dir);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof line, f))
			memcpy(last, line, sizeof last);
		if (f)
			fclose(f);
		{
			double t, ep, acc, tl, trl;
			unsigned long long upd, smp;
			char node[64];

			if (sscanf(last, "%lf,%63[^,],%llu,%lf,%llu,%lf,%lf,%lf", &t, node, &upd, &ep, &smp,
				   &acc, &tl, &trl) == 8)
				printf("%-7s after %ld epochs (lr %s, momentum 0.9, batch 64): test accuracy "
				       "%.2f%%, test loss %.4f, train loss %.4f, %.1f s\n", kind, epochs, lr,
				       100 * acc, tl, trl, (double)(clock_now_ns() - t0) / 1e9);
		}
	}
	snprintf(path, sizeof path, "rm -rf %s", dir);
	if (system(path) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	kv_destroy(&cfg);
}

int main(void)
{
	char img[256], lbl[256];
	struct data_set *ds = NULL;
	float *x = malloc((size_t)8 * B * IN * sizeof *x);
	uint8_t y[8 * B];

	log_init("bench", LOG_WARN);
	model_blas_threads(1);
	data_paths(FMNIST, DATA_TEST, img, lbl, sizeof img);
	if (data_load(img, lbl, NULL, 0, &ds)) {
		fprintf(stderr, "bench_model: needs Fashion-MNIST in %s\n", FMNIST);
		return 1;
	}
	data_batch(ds, NULL, 8 * B, x, y);
	data_destroy(&ds);
	setvbuf(stdout, NULL, _IOLBF, 0);
	step_times(x, y);
	memory_of_shard();
	accuracy_after("softmax", "", "0.01", "BENCH_EPOCHS_SOFTMAX");
	accuracy_after("mlp", "256", "0.02", "BENCH_EPOCHS_MLP");
	accuracy_after("cnn", "128", "0.02", "BENCH_EPOCHS_CNN");
	free(x);
	return 0;
}
