/* Each limit of lib/limits.h, at the validator and where it is enforced: a scenario at the limit
 * is accepted, one past it refused with "FILE:LINE:COL: error: ..." naming the limit; the
 * engines and the kernel shaper take exactly what the validator accepts. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/kv.h"
#include "lib/limits.h"
#include "netem/link_kernel.h"
#include "node/engine_common.h"
#include "node/model.h"
#include "node/wire.h"
#include "orchestrator/scenario.h"

#define S "stop: {time: 10s}\n"

/* Parse yaml; expect success (pos == NULL) or an error at "t.yaml:pos: error: " containing
 * each of the substrings. */
static void expect(const char *yaml, const char *pos, const char *sub1, const char *sub2)
{
	char err[SCENARIO_ERR_MAX] = "", prefix[64];
	struct scenario *sc = scenario_parse(yaml, strlen(yaml), "t.yaml", err, sizeof err);

	if (!pos) {
		cr_assert_not_null(sc, "refused: %s\n%s", err, yaml);
		scenario_destroy(&sc);
		return;
	}
	cr_assert_null(sc, "accepted:\n%s", yaml);
	snprintf(prefix, sizeof prefix, "t.yaml:%s: error: ", pos);
	cr_assert(strncmp(err, prefix, strlen(prefix)) == 0, "'%s' does not start with '%s'", err, prefix);
	cr_assert(strstr(err, sub1), "'%s' lacks '%s'", err, sub1);
	if (sub2)
		cr_assert(strstr(err, sub2), "'%s' lacks '%s'", err, sub2);
}

static char lim[32], over[32];

static void numbers(unsigned long long limit)
{
	snprintf(lim, sizeof lim, "%llu", limit);
	snprintf(over, sizeof over, "%llu", limit + 1);
}

Test(scenario_limits, nodes_parameter_server)
{
	char y[256];

	/* workers + the one server */
	numbers(LIMITS_MAX_NODES);
	snprintf(y, sizeof y, S "workers: %d\n", LIMITS_MAX_NODES - 1);
	expect(y, NULL, NULL, NULL);
	snprintf(y, sizeof y, S "workers: %d\n", LIMITS_MAX_NODES);
	expect(y, "2:10", "exceed the limit of", lim);
}

Test(scenario_limits, nodes_p2p)
{
	char y[256];

	numbers(LIMITS_MAX_NODES);
	snprintf(y, sizeof y, S "topology: {kind: p2p}\nworkers: %d\n", LIMITS_MAX_NODES);
	expect(y, NULL, NULL, NULL);
	snprintf(y, sizeof y, S "topology: {kind: p2p}\nworkers: %d\n", LIMITS_MAX_NODES + 1);
	expect(y, "3:10", "out of range", lim);
}

Test(scenario_limits, sample_and_fanout)
{
	char y[256];

	/* A worker samples the others: at most LIMITS_MAX_NODES - 1 of them. */
	numbers(LIMITS_MAX_NODES);
	snprintf(y, sizeof y, S "topology: {kind: p2p}\nworkers: %d\nconsistency: {barrier: pbsp, sample: %d}\n",
		 LIMITS_MAX_NODES, LIMITS_MAX_NODES - 1);
	expect(y, NULL, NULL, NULL);
	snprintf(y, sizeof y, S "topology: {kind: p2p}\nworkers: 4\nconsistency: {barrier: pbsp, sample: %d}\n",
		 LIMITS_MAX_NODES + 1);
	expect(y, "4:38", "consistency.sample", lim);
	snprintf(y, sizeof y, S "topology: {kind: p2p}\nworkers: %d\nconsistency: {fanout: %d}\n",
		 LIMITS_MAX_NODES, LIMITS_MAX_NODES - 1);
	expect(y, NULL, NULL, NULL);
	snprintf(y, sizeof y, S "topology: {kind: p2p}\nworkers: 4\nconsistency: {fanout: %d}\n",
		 LIMITS_MAX_NODES + 1);
	expect(y, "4:23", "consistency.fanout", lim);
}

Test(scenario_limits, rate)
{
	char y[256];

	numbers(LIMITS_MAX_RATE_BPS);
	snprintf(y, sizeof y, S "workers: 2\nnetwork:\n  default: {rate: %llubit}\n", LIMITS_MAX_RATE_BPS);
	expect(y, NULL, NULL, NULL);
	snprintf(y, sizeof y, S "workers: 2\nnetwork:\n  default: {rate: %llubit}\n", LIMITS_MAX_RATE_BPS + 8);
	expect(y, "4:19", "exceeds the largest rate", lim);
	/* The kernel backend takes what the validator accepts and refuses the rest (it used to
	 * clamp silently to ~17 Gbit/s). */
	int Bps = 0, bucket = 0;
	cr_assert_eq(link_kernel_tbf_sizes(LIMITS_MAX_RATE_BPS, &Bps, &bucket), 0);
	cr_assert_eq((unsigned long long)Bps * 8, LIMITS_MAX_RATE_BPS);
	cr_assert_gt(bucket, 0);
	cr_assert_eq(link_kernel_tbf_sizes(LIMITS_MAX_RATE_BPS + 8, &Bps, &bucket), -ERANGE);
	cr_assert_eq(link_kernel_tbf_sizes(100000000000ull, &Bps, &bucket), -ERANGE);
	struct link_params p = { .rate_bps = LIMITS_MAX_RATE_BPS };
	cr_assert_null(link_params_validate(&p));
	p.rate_bps++;
	cr_assert_not_null(link_params_validate(&p));
	cr_assert_eq(link_kernel_tbf_sizes(8000, &Bps, &bucket), 0);
	cr_assert_eq(Bps, 1000);
	cr_assert_eq(bucket, 3 * 1514);
}

Test(scenario_limits, batch_and_blas_threads)
{
	char y[256];

	numbers(LIMITS_MAX_BATCH);
	snprintf(y, sizeof y, S "workers: 2\ntrain: {batch: %d}\n", LIMITS_MAX_BATCH);
	expect(y, NULL, NULL, NULL);
	snprintf(y, sizeof y, S "workers: 2\ntrain: {batch: %d}\n", LIMITS_MAX_BATCH + 1);
	expect(y, "3:16", "train.batch", lim);
	numbers(LIMITS_MAX_BLAS_THREADS);
	snprintf(y, sizeof y, S "workers: 2\ntrain: {blas_threads: %d}\n", LIMITS_MAX_BLAS_THREADS);
	expect(y, NULL, NULL, NULL);
	snprintf(y, sizeof y, S "workers: 2\ntrain: {blas_threads: %d}\n", LIMITS_MAX_BLAS_THREADS + 1);
	expect(y, "3:23", "train.blas_threads", lim);
}

/* The engines read the node configuration with the same limits. */
static int engine_conf(long workers, long batch, long threads)
{
	struct kv *k = kv_new();
	struct engine_conf c;
	char *addrs = calloc((size_t)workers, 16);
	size_t len = 0;
	int rc;

	/* As nodeconf writes them: the testbed's addresses, 198.18.0.1 on. */
	cr_assert_not_null(addrs);
	for (long i = 0; i < workers; i++)
		len += (size_t)sprintf(addrs + len, "%s198.18.%ld.%ld", i ? "," : "", (i + 1) / 256,
				       (i + 1) % 256);
	kv_set(k, "workers.addrs", addrs);
	free(addrs);

	kv_set(k, "run.dir", "/tmp");
	kv_set(k, "node.name", "w0");
	kv_set(k, "node.index", "0");
	kv_setf(k, "workers.count", "%ld", workers);
	kv_setf(k, "train.batch", "%ld", batch);
	kv_setf(k, "train.blas_threads", "%ld", threads);
	kv_set(k, "stop.steps", "1");
	rc = engine_conf_read(k, &c);
	if (rc == 0)
		engine_conf_free(&c);
	kv_destroy(&k);
	return rc;
}

Test(scenario_limits, engines_take_what_the_validator_accepts)
{
	cr_assert_eq(engine_conf(LIMITS_MAX_NODES, LIMITS_MAX_BATCH, LIMITS_MAX_BLAS_THREADS), 0);
	cr_assert_eq(engine_conf(LIMITS_MAX_NODES + 1, 32, 1), -EINVAL);
	cr_assert_eq(engine_conf(4, LIMITS_MAX_BATCH + 1, 1), -EINVAL);
	cr_assert_eq(engine_conf(4, 32, LIMITS_MAX_BLAS_THREADS + 1), -EINVAL);
}

/* node/model's parameter count, the naive way, for 28 x 28 inputs and 10 classes. */
static double params_of(int cnn, const unsigned *hidden, int nh)
{
	double in = cnn ? 12.0 * 12 * 32 : 784, n = cnn ? 32.0 * 25 + 32 : 0;

	for (int l = 0; l < nh; l++) {
		n += in * hidden[l] + hidden[l];
		in = hidden[l];
	}
	return n + in * 10 + 10;
}

Test(scenario_limits, model_floats)
{
	char y[256];
	unsigned at[2] = { 65536, 238 }, past[2] = { 65536, 239 };

	/* The validator's count is node/model's (small models, built for real). */
	unsigned small[2] = { 128, 64 };
	for (int kind = 0; kind < 3; kind++) {
		struct model_spec spec = { .kind = kind == 0 ? MODEL_SOFTMAX : kind == 1 ? MODEL_MLP : MODEL_CNN,
					   .rows = 28, .cols = 28, .nclasses = 10,
					   .nhidden = kind ? 2 : 0, .hidden = { 128, 64 },
					   .channels = 32, .kernel = 5 };
		struct model *m = model_new(&spec, 1);

		cr_assert_not_null(m);
		cr_assert_eq((double)model_nparams(m), params_of(kind == 2, small, kind ? 2 : 0), "kind %d", kind);
		model_destroy(&m);
	}
	cr_assert_leq(params_of(0, at, 2), LIMITS_MAX_PARAMS);
	cr_assert_gt(params_of(0, past, 2), LIMITS_MAX_PARAMS);
	numbers(LIMITS_MAX_PARAMS);
	snprintf(y, sizeof y, S "workers: 2\nmodel: {kind: mlp, hidden: [%u, %u]}\n", at[0], at[1]);
	expect(y, NULL, NULL, NULL);
	snprintf(y, sizeof y, S "workers: 2\nmodel: {kind: mlp, hidden: [%u, %u]}\n", past[0], past[1]);
	expect(y, "3:28", "larger than a message can carry", lim);
	cr_assert_eq(WIRE_MAX_PAYLOAD_BYTES, (size_t)LIMITS_MAX_PARAMS * 4);
}
