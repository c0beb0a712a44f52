/* Unit tests for node/model and node/optim: gradients of every layer type (dense, ReLU, conv,
 * max-pool) and of the softmax cross-entropy against central finite differences of a naive
 * double-precision reference forward pass written here from the documented parameter layout;
 * the optimiser against a naive reference update; deterministic initialisation. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "node/model.h"
#include "node/optim.h"
#include "node/rng.h"

/* Naive reference: mean cross-entropy of the model described by spec with parameters p. */
static double ref_loss(const struct model_spec *s, const double *p, const float *x,
		       const uint8_t *y, size_t n)
{
	size_t dim = (size_t)s->rows * s->cols;
	double total = 0.0;
	double *a = malloc(65536 * sizeof *a), *b = malloc(65536 * sizeof *b);

	for (size_t i = 0; i < n; i++) {
		size_t off = 0, in;
		unsigned nh = s->kind == MODEL_SOFTMAX ? 0 : s->nhidden;

		if (s->kind == MODEL_CNN) {
			unsigned k = s->kernel, c = s->channels;
			unsigned oh = s->rows - k + 1, ow = s->cols - k + 1, ph = oh / 2, pw = ow / 2;
			const double *w = p, *bias = p + (size_t)c * k * k;

			/* pooled value at (py, px, ch) = max over the 2x2 window of relu(conv) */
			for (unsigned py = 0; py < ph; py++)
				for (unsigned px = 0; px < pw; px++)
					for (unsigned ch = 0; ch < c; ch++) {
						double best = -1e300;

						for (unsigned t = 0; t < 4; t++) {
							unsigned yy = 2 * py + t / 2, xx = 2 * px + t % 2;
							double v = bias[ch];

							for (unsigned dy = 0; dy < k; dy++)
								for (unsigned dx = 0; dx < k; dx++)
									v += w[ch * k * k + dy * k + dx] *
									     x[i * dim + (yy + dy) * s->cols + xx + dx];
							v = v > 0 ? v : 0;
							if (v > best)
								best = v;
						}
						a[(py * pw + px) * c + ch] = best;
					}
			off = (size_t)c * k * k + c;
			in = (size_t)ph * pw * c;
		} else {
			for (size_t j = 0; j < dim; j++)
				a[j] = x[i * dim + j];
			in = dim;
		}
		for (unsigned l = 0; l <= nh; l++) {
			size_t out = l < nh ? s->hidden[l] : s->nclasses;
			const double *w = p + off, *bias = p + off + in * out;

			for (size_t o = 0; o < out; o++) {
				double v = bias[o];

				for (size_t j = 0; j < in; j++)
					v += w[o * in + j] * a[j];
				b[o] = l < nh ? (v > 0 ? v : 0) : v;
			}
			off += in * out + out;
			memcpy(a, b, out * sizeof *a);
			in = out;
		}
		{
			double mx = a[0], sum = 0.0;

			for (size_t c = 1; c < s->nclasses; c++)
				mx = a[c] > mx ? a[c] : mx;
			for (size_t c = 0; c < s->nclasses; c++)
				sum += exp(a[c] - mx);
			total += log(sum) + mx - a[y[i]];
		}
	}
	free(a);
	free(b);
	return total / (double)n;
}

static void gradcheck(const struct model_spec *spec, size_t n, uint64_t seed)
{
	struct model *m = model_new(spec, seed);
	size_t np, dim;
	float *x, *g;
	uint8_t *y;
	double *p, loss, checked = 0;
	struct rng r;

	cr_assert_not_null(m);
	np = model_nparams(m);
	dim = model_input_dim(m);
	x = malloc(n * dim * sizeof *x);
	g = malloc(np * sizeof *g);
	y = malloc(n);
	p = malloc(np * sizeof *p);
	rng_seed(&r, seed, 99);
	for (size_t i = 0; i < n * dim; i++)
		x[i] = (float)rng_uniform(&r);
	for (size_t i = 0; i < n; i++)
		y[i] = (uint8_t)rng_below(&r, spec->nclasses);
	/* non-zero biases so every bias gradient path is exercised away from 0 */
	for (size_t i = 0; i < np; i++) {
		model_params(m)[i] += (float)(0.1 * (rng_uniform(&r) - 0.5));
		p[i] = model_params(m)[i];
	}
	cr_assert_eq(model_gradient(m, x, y, n, g, &loss), 0);
	cr_assert(fabs(loss - ref_loss(spec, p, x, y, n)) < 1e-5, "loss %g vs reference %g", loss,
		  ref_loss(spec, p, x, y, n));
	for (size_t i = 0; i < np; i++) {
		const double h = 1e-6;
		double save = p[i], fp, fm, fd;

		p[i] = save + h;
		fp = ref_loss(spec, p, x, y, n);
		p[i] = save - h;
		fm = ref_loss(spec, p, x, y, n);
		p[i] = save;
		fd = (fp - fm) / (2 * h);
		cr_assert(fabs(g[i] - fd) <= 1e-3 * fabs(fd) + 2e-6,
			  "param %zu of %zu: gradient %.8g vs finite difference %.8g", i, np, g[i], fd);
		checked += fabs(fd) > 1e-4;
	}
	cr_assert(checked > np / 4, "too few non-trivial gradients (%g of %zu)", checked, np);
	free(x);
	free(g);
	free(y);
	free(p);
	model_destroy(&m);
	cr_assert_null(m);
}

Test(model, gradient_softmax)
{
	struct model_spec s = { .kind = MODEL_SOFTMAX, .rows = 4, .cols = 5, .nclasses = 10 };

	gradcheck(&s, 7, 1);
}

Test(model, gradient_mlp_two_hidden)
{
	struct model_spec s = { .kind = MODEL_MLP, .rows = 4, .cols = 4, .nclasses = 10,
				.nhidden = 2, .hidden = { 9, 6 } };

	gradcheck(&s, 5, 2);
}

Test(model, gradient_cnn)
{
	struct model_spec s = { .kind = MODEL_CNN, .rows = 8, .cols = 8, .nclasses = 10,
				.nhidden = 1, .hidden = { 6 }, .channels = 3, .kernel = 3 };

	gradcheck(&s, 4, 3);
}

Test(model, gradient_cnn_odd_map_no_hidden)
{
	/* 9x9 input, kernel 3 -> 7x7 map: the pool drops the last row/column */
	struct model_spec s = { .kind = MODEL_CNN, .rows = 9, .cols = 9, .nclasses = 10,
				.nhidden = 0, .channels = 2, .kernel = 3 };

	gradcheck(&s, 3, 4);
}

Test(model, layout_views_and_init)
{
	struct model_spec s = { .kind = MODEL_CNN, .rows = 28, .cols = 28, .nclasses = 10,
				.nhidden = 1, .hidden = { 128 }, .channels = 32, .kernel = 5 };
	struct model *a = model_new(&s, 7), *b = model_new(&s, 7), *c = model_new(&s, 8);
	size_t wo, wl, bo, bl, next = 0;

	cr_assert_eq(model_nlayers(a), 3);
	for (unsigned l = 0; l < model_nlayers(a); l++) {
		cr_assert_eq(model_layer_view(a, l, &wo, &wl, &bo, &bl), 0);
		cr_assert_eq(wo, next);
		cr_assert_eq(bo, wo + wl);
		next = bo + bl;
	}
	cr_assert_eq(model_layer_view(a, 3, &wo, &wl, &bo, &bl), -ENOENT);
	cr_assert_eq(next, model_nparams(a));
	cr_assert_eq(next, 32 * 25 + 32 + 12 * 12 * 32 * 128 + 128 + 128 * 10 + 10);
	cr_assert_eq(memcmp(model_params(a), model_params(b), next * sizeof(float)), 0);
	cr_assert_neq(memcmp(model_params(a), model_params(c), next * sizeof(float)), 0);
	model_set_params(c, model_params(a));
	cr_assert_eq(memcmp(model_params(a), model_params(c), next * sizeof(float)), 0);
	model_destroy(&a);
	model_destroy(&b);
	model_destroy(&c);
}

Test(model, predict_matches_gradient_forward)
{
	struct model_spec s = { .kind = MODEL_MLP, .rows = 6, .cols = 6, .nclasses = 10,
				.nhidden = 1, .hidden = { 16 } };
	struct model *m = model_new(&s, 5);
	size_t n = 600; /* more than one internal predict slice */
	float *x = malloc(n * 36 * sizeof *x), *pr = malloc(n * 10 * sizeof *pr);
	float *g = malloc(model_nparams(m) * sizeof *g);
	uint8_t *y = malloc(n);
	double loss, ce = 0.0;
	struct rng r;

	rng_seed(&r, 5, 1);
	for (size_t i = 0; i < n * 36; i++)
		x[i] = (float)rng_uniform(&r);
	for (size_t i = 0; i < n; i++)
		y[i] = (uint8_t)rng_below(&r, 10);
	cr_assert_eq(model_predict(m, x, n, pr), 0);
	for (size_t i = 0; i < n; i++) {
		double sum = 0;

		for (int c = 0; c < 10; c++) {
			cr_assert(pr[i * 10 + c] >= 0.0f);
			sum += pr[i * 10 + c];
		}
		cr_assert(fabs(sum - 1.0) < 1e-5);
		ce -= log(pr[i * 10 + y[i]]);
	}
	cr_assert_eq(model_gradient(m, x, y, n, g, &loss), 0);
	cr_assert(fabs(loss - ce / n) < 1e-4, "loss %g vs -log p %g", loss, ce / n);
	y[3] = 10;
	cr_assert_eq(model_gradient(m, x, y, n, g, &loss), -EINVAL);
	free(x);
	free(pr);
	free(g);
	free(y);
	model_destroy(&m);
}

Test(optim, matches_reference_update)
{
	struct optim_params p = { .lr = 0.1, .momentum = 0.9, .weight_decay = 0.01,
				  .schedule = OPTIM_LR_STEP, .step_every = 2, .step_gamma = 0.5 };
	struct optim *o = optim_new(5, &p);
	float w[5] = { 1, -2, 0.5f, 3, 0 }, g[5];
	double rw[5], rv[5] = { 0 };

	for (int i = 0; i < 5; i++)
		rw[i] = w[i];
	for (int t = 0; t < 7; t++) {
		double lr = 0.1 * pow(0.5, t / 2);

		for (int i = 0; i < 5; i++) {
			g[i] = (float)(0.3 * (i - 2) + 0.1 * t);
			rv[i] = 0.9 * rv[i] + g[i] + 0.01 * rw[i];
			rw[i] -= lr * rv[i];
		}
		optim_step(o, w, g);
		for (int i = 0; i < 5; i++)
			cr_assert(fabs(w[i] - rw[i]) < 1e-5, "step %d elem %d: %g vs %g", t, i, w[i], rw[i]);
	}
	cr_assert_eq(optim_steps(o), 7);
	optim_destroy(&o);
	cr_assert_null(o);
}

Test(optim, schedules)
{
	struct optim_params c = { .lr = 0.2 };
	struct optim_params s = { .lr = 0.2, .schedule = OPTIM_LR_STEP, .step_every = 10, .step_gamma = 0.1 };
	struct optim_params v = { .lr = 0.2, .schedule = OPTIM_LR_INVERSE, .decay = 0.5 };
	struct optim_params bad = { .lr = 0.2, .momentum = 1.0 };

	cr_assert_float_eq(optim_lr_at(&c, 1000), 0.2, 1e-12);
	cr_assert_float_eq(optim_lr_at(&s, 9), 0.2, 1e-12);
	cr_assert_float_eq(optim_lr_at(&s, 10), 0.02, 1e-12);
	cr_assert_float_eq(optim_lr_at(&s, 25), 0.002, 1e-12);
	cr_assert_float_eq(optim_lr_at(&v, 4), 0.2 / 3.0, 1e-12);
	cr_assert_null(optim_new(3, &bad));
}
