/* Unit tests for node/eval (against a naive recount from model_predict) and a short real training
 * run: softmax regression on 5k Fashion-MNIST samples must get well above chance on 2k test
 * samples within a few seconds. The tests on the data set skip when it is not installed, and
 * fail instead under STALENET_TESTS_MUST_RUN=1. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/kv.h"
#include "node/data.h"
#include "node/eval.h"
#include "node/model.h"
#include "node/optim.h"
#include "node/partition.h"
#include "node/trainer.h"
#include "tests/support/files.h"
#include "tests/support/fixture.h"

#define FMNIST "/usr/share/datasets/fashion-mnist"

Test(eval, probs_against_naive)
{
	float probs[4 * 3] = { 0.7f, 0.2f, 0.1f,  0.1f, 0.1f, 0.8f,  0.3f, 0.3f, 0.4f,  0.5f, 0.5f, 0.0f };
	uint8_t y[4] = { 0, 1, 2, 2 };
	struct eval_result r;
	double want = -(log(0.7) + log(0.1) + log(0.4) + log(1e-12)) / 4;

	eval_probs(probs, y, 4, 3, &r);
	cr_assert_eq(r.n, 4);
	cr_assert_float_eq(r.accuracy, 0.5, 1e-12);
	cr_assert(fabs(r.loss - want) < 1e-6, "loss %g want %g", r.loss, want);
}

Test(eval, sample_distinct_sorted_deterministic)
{
	uint32_t a[500], b[500], c[500];

	cr_assert_eq(eval_sample(1000, 500, 3, a), 500);
	cr_assert_eq(eval_sample(1000, 500, 3, b), 500);
	cr_assert_eq(eval_sample(1000, 500, 4, c), 500);
	for (int i = 1; i < 500; i++)
		cr_assert_gt(a[i], a[i - 1]);
	cr_assert_lt(a[499], 1000);
	cr_assert_eq(memcmp(a, b, sizeof a), 0);
	cr_assert_neq(memcmp(a, c, sizeof a), 0);
	cr_assert_eq(eval_sample(10, 50, 3, a), 10);
	for (uint32_t i = 0; i < 10; i++)
		cr_assert_eq(a[i], i);
}

/* Skip (or fail under STALENET_TESTS_MUST_RUN=1) when the data set is not installed. */
static void require_data(void)
{
	if (access(FMNIST "/train-images-idx3-ubyte.gz", R_OK) != 0)
		support_skip_or_fail("Fashion-MNIST not installed at " FMNIST);
}

Test(eval, model_matches_naive_and_short_training_learns, .timeout = 120)
{
	char img[256], lbl[256];
	struct data_set *train = NULL, *test = NULL;
	uint32_t *keep = malloc(5000 * sizeof *keep);
	struct model_spec spec = { .kind = MODEL_SOFTMAX, .rows = 28, .cols = 28, .nclasses = 10 };
	struct optim_params op = { .lr = 0.05, .momentum = 0.9 };
	struct model *m;
	struct optim *o;
	struct eval_result before, after, tr;
	float *x = malloc(64 * 784 * sizeof *x), *g, *pr;
	uint8_t y[64];
	size_t correct = 0;
	double loss = 0;

	require_data();
	for (uint32_t i = 0; i < 5000; i++)
		keep[i] = i * 12;  /* every 12th training sample */
	cr_assert_eq(data_paths(FMNIST, DATA_TRAIN, img, lbl, sizeof img), 0);
	cr_assert_eq(data_load(img, lbl, keep, 5000, &train), 0);
	cr_assert_eq(data_paths(FMNIST, DATA_TEST, img, lbl, sizeof img), 0);
	cr_assert_eq(data_load(img, lbl, keep, 834, &test), 0);  /* indices < 10000 */
	m = model_new(&spec, 1);
	o = optim_new(model_nparams(m), &op);
	g = malloc(model_nparams(m) * sizeof *g);

	/* eval_model vs a naive pass over model_predict */
	cr_assert_eq(eval_model(m, test, NULL, 0, &before), 0);
	pr = malloc(test->n * 10 * sizeof *pr);
	{
		float *all = malloc((size_t)test->n * 784 * sizeof *all);
		uint8_t *yy = malloc(test->n);

		data_batch(test, NULL, test->n, all, yy);
		cr_assert_eq(model_predict(m, all, test->n, pr), 0);
		for (uint32_t i = 0; i < test->n; i++) {
			unsigned best = 0;

			for (unsigned c = 1; c < 10; c++)
				if (pr[i * 10 + c] > pr[i * 10 + best])
					best = c;
			correct += best == yy[i];
			loss -= log(pr[i * 10 + yy[i]]);
		}
		free(all);
		free(yy);
	}
	cr_assert_eq(before.n, test->n);
	cr_assert_float_eq(before.accuracy, (double)correct / test->n, 1e-9);
	cr_assert(fabs(before.loss - loss / test->n) < 1e-4);

	for (int epoch = 0; epoch < 3; epoch++) {
		for (uint32_t s = 0; s + 64 <= train->n; s += 64) {
			uint32_t idx[64];
			double l;

			for (int i = 0; i < 64; i++)
				idx[i] = (s + (uint32_t)i * 79u + (uint32_t)epoch * 13u) % train->n;
			data_batch(train, idx, 64, x, y);
			cr_assert_eq(model_gradient(m, x, y, 64, g, &l), 0);
			optim_step(o, model_params(m), g);
		}
	}
	cr_assert_eq(eval_model(m, test, NULL, 0, &after), 0);
	cr_assert_eq(eval_model(m, train, keep, 1000, &tr), -EINVAL); /* file indices, not positions */
	for (uint32_t i = 0; i < 1000; i++)
		keep[i] = i * 5;
	cr_assert_eq(eval_model(m, train, keep, 1000, &tr), 0);
	cr_assert_gt(after.accuracy, 0.70, "accuracy %.3f after 3 epochs on 5k samples", after.accuracy);
	cr_assert_lt(after.loss, before.loss * 0.5);
	cr_assert_lt(tr.loss, 1.0);
	free(keep);
	free(x);
	free(g);
	free(pr);
	optim_destroy(&o);
	model_destroy(&m);
	data_destroy(&train);
	data_destroy(&test);
}

Test(eval, trainer_writes_eval_and_partition, .timeout = 120)
{
	char dir[] = "/tmp/stalenet-trainer-XXXXXX", path[300], line[256];
	struct kv *cfg = kv_new();
	FILE *f;
	int rows = 0;
	double t, ep, acc, tl, trl;
	unsigned long long upd, smp;
	char node[64];

	require_data();
	cr_assert_not_null(support_mkdtemp(dir));
	kv_set(cfg, "run.dir", dir);
	kv_set(cfg, "node.name", "trainer");
	kv_set(cfg, "model.kind", "softmax");
	kv_set(cfg, "model.hidden", "");
	kv_set(cfg, "train.epochs", "0");
	kv_set(cfg, "stop.steps", "300");
	kv_set(cfg, "eval.every", "0");
	cr_assert_eq(trainer_run(cfg), 0);
	snprintf(path, sizeof path, "%s/eval.csv", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(line, sizeof line, f));
	cr_assert_str_eq(line, "t_s,node,updates,epoch,samples,test_accuracy,test_loss,train_loss\n");
	while (fgets(line, sizeof line, f)) {
		cr_assert_eq(sscanf(line, "%lf,%63[^,],%llu,%lf,%llu,%lf,%lf,%lf", &t, node, &upd, &ep,
				    &smp, &acc, &tl, &trl), 8);
		rows++;
	}
	fclose(f);
	cr_assert_eq(rows, 1);
	cr_assert_str_eq(node, "trainer");
	cr_assert_eq(upd, 300);
	cr_assert_eq(smp, 300 * 64);
	cr_assert_float_eq(ep, 300 * 64 / 60000.0, 1e-4);
	cr_assert_gt(acc, 0.6);
	snprintf(path, sizeof path, "%s/partition.csv", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	rows = 0;
	while (fgets(line, sizeof line, f))
		rows++;
	fclose(f);
	cr_assert_eq(rows, 11);
	/* no stop condition at all is refused */
	kv_set(cfg, "stop.steps", "0");
	cr_assert_eq(trainer_run(cfg), -EINVAL);
	cr_assert_eq(support_rm_rf(dir), 0);
	kv_destroy(&cfg);
}
