/* node/eval: see eval.h. */
#include "node/eval.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "node/data.h"
#include "node/model.h"
#include "node/rng.h"

#define RNG_STREAM_SAMPLE 0x6576616cull

void eval_probs(const float *probs, const uint8_t *y, size_t n, unsigned nclasses,
		struct eval_result *out)
{
	size_t correct = 0;
	double loss = 0.0;

	for (size_t i = 0; i < n; i++) {
		const float *row = probs + i * nclasses;
		unsigned best = 0;
		double p;

		for (unsigned c = 1; c < nclasses; c++)
			if (row[c] > row[best])
				best = c;
		correct += best == y[i];
		p = row[y[i]];
		loss -= log(p > 1e-12 ? p : 1e-12);
	}
	out->n = n;
	out->accuracy = n ? (double)correct / (double)n : 0.0;
	out->loss = n ? loss / (double)n : 0.0;
}

int eval_model(struct model *m, const struct data_set *ds, const uint32_t *idx, size_t n,
	       struct eval_result *out)
{
	unsigned nc = model_get_spec(m)->nclasses;
	size_t dim = ds->dim, total = idx ? n : ds->n;
	size_t correct = 0;
	double loss = 0.0;
	float *x = NULL, *probs = NULL;
	uint8_t *y = NULL;
	int rc = 0;

	if (dim != model_input_dim(m))
		return -EINVAL;
	for (size_t i = 0; idx && i < n; i++)
		if (idx[i] >= ds->n)
			return -EINVAL;
	x = malloc(EVAL_CHUNK * dim * sizeof *x);
	probs = malloc(EVAL_CHUNK * (size_t)nc * sizeof *probs);
	y = malloc(EVAL_CHUNK);
	if (!x || !probs || !y) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t s = 0; s < total; s += EVAL_CHUNK) {
		size_t len = total - s < EVAL_CHUNK ? total - s : EVAL_CHUNK;
		struct eval_result r;

		if (idx) {
			data_batch(ds, idx + s, len, x, y);
		} else {
			uint32_t tmp[EVAL_CHUNK];

			for (size_t i = 0; i < len; i++)
				tmp[i] = (uint32_t)(s + i);
			data_batch(ds, tmp, len, x, y);
		}
		rc = model_predict(m, x, len, probs);
		if (rc)
			goto out;
		eval_probs(probs, y, len, nc, &r);
		correct += (size_t)llround(r.accuracy * (double)len);
		loss += r.loss * (double)len;
	}
	out->n = total;
	out->accuracy = total ? (double)correct / (double)total : 0.0;
	out->loss = total ? loss / (double)total : 0.0;
out:
	free(x);
	free(probs);
	free(y);
	return rc;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

size_t eval_sample(uint32_t n, size_t k, uint64_t seed, uint32_t *out)
{
	struct rng r;

	if (k > n)
		k = n;
	rng_seed(&r, seed, RNG_STREAM_SAMPLE);
	/* Floyd's algorithm: exactly k draws, each a new position; a bitmap marks taken ones. */
	{
		uint8_t *taken = calloc(n ? n : 1, 1);
		size_t got = 0;

		if (!taken)
			return 0;
		for (uint32_t j = n - (uint32_t)k; j < n; j++) {
			uint32_t t = rng_below(&r, j + 1);

			if (taken[t])
				t = j;
			taken[t] = 1;
			out[got++] = t;
		}
		free(taken);
	}
	qsort(out, k, sizeof *out, cmp_u32);
	return k;
}
