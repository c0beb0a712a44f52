/* node/model: see model.h.
 *
 * Forward pass of a batch of n samples, row-major throughout:
 *   conv:  cols (n*P x K*K, im2col of the input, P = output positions) x Wc^T -> (n*P x C),
 *          + bias, ReLU; 2x2 max-pool -> (n x Q*C), position-major with channels last; the
 *          arg-max of every pooled cell is remembered for the backward pass.
 *   dense: Z (n x out) = A (n x in) x W^T + b, ReLU on every dense layer but the last.
 *   loss:  softmax over the last layer, mean cross-entropy.
 * Backward: delta = (softmax - onehot) / n; per dense layer dW = delta^T A, db = column sums,
 * dA = delta W masked by ReLU (A > 0). The input layer never computes dA (the data has no
 * gradient), which saves the largest product of the MLP. The conv layer only ever sits on the
 * input, so it needs no col2im: dWc = dConv^T cols.
 * Large predict batches are processed in slices of PREDICT_SLICE to bound the scratch memory. */
#include "node/model.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/kv.h"
#include "lib/log.h"
#include "node/rng.h"

#define PREDICT_SLICE 256
#define RNG_STREAM_INIT 0x6d6f64656cull

struct dense {
	uint32_t in, out;
	size_t w_off, b_off;
};

struct model {
	struct model_spec spec;
	size_t nparams;
	float *params;
	size_t input_dim;

	/* conv layer (kind == MODEL_CNN) */
	int has_conv;
	uint32_t ch, k, oh, ow, ph, pw;  /* channels, kernel, conv out and pool out sizes */
	size_t cw_off, cb_off;

	unsigned ndense;
	struct dense dense[MODEL_MAX_HIDDEN + 1];
	uint32_t max_width;              /* widest dense input/output */

	/* scratch, sized for cap samples */
	size_t cap;
	float *cols, *conv, *pool;
	uint32_t *argmax;
	float *act[MODEL_MAX_HIDDEN + 1]; /* act[l] = output of dense l */
	float *delta[2];
};

static int blas_threads_set;

void model_blas_threads(int n)
{
	openblas_set_num_threads(n < 1 ? 1 : n);
	blas_threads_set = 1;
}

static const char *const kind_names[] = { "softmax", "mlp", "cnn" };

int model_kind_parse(const char *name, enum model_kind *out)
{
	for (unsigned i = 0; i < 3; i++) {
		if (name && strcmp(name, kind_names[i]) == 0) {
			*out = (enum model_kind)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *model_kind_name(enum model_kind kind)
{
	return (unsigned)kind < 3 ? kind_names[kind] : "?";
}

int model_spec_from_kv(const struct kv *cfg, struct model_spec *spec)
{
	const char *s = kv_get(cfg, "model.kind");
	const char *h = kv_get(cfg, "model.hidden");
	int64_t ch, k;
	int rc;

	memset(spec, 0, sizeof *spec);
	spec->kind = MODEL_MLP;
	spec->rows = 28;
	spec->cols = 28;
	spec->nclasses = 10;
	if (s && *s && model_kind_parse(s, &spec->kind)) {
		log_error("model.kind: unknown kind '%s' (softmax|mlp|cnn)", s);
		return -EINVAL;
	}
	rc = kv_get_i64(cfg, "model.channels", 32, &ch);
	rc = rc ? rc : kv_get_i64(cfg, "model.kernel", 5, &k);
	if (rc)
		return rc;
	if (ch < 1 || ch > 1024 || k < 1 || k > 27) {
		log_error("model.channels %lld / model.kernel %lld out of range", (long long)ch,
			  (long long)k);
		return -EINVAL;
	}
	spec->channels = (uint32_t)ch;
	spec->kernel = (uint32_t)k;
	if (spec->kind == MODEL_SOFTMAX)
		return 0;
	if (!h || !*h) {
		spec->nhidden = 1;
		spec->hidden[0] = spec->kind == MODEL_MLP ? 256 : 128;
		return 0;
	}
	while (*h) {
		char *end;
		long v = strtol(h, &end, 10);

		if (end == h || v < 1 || v > 1 << 16 || spec->nhidden == MODEL_MAX_HIDDEN) {
			log_error("model.hidden: bad list '%s' (up to %d sizes in 1..65536)",
				  kv_get(cfg, "model.hidden"), MODEL_MAX_HIDDEN);
			return -EINVAL;
		}
		spec->hidden[spec->nhidden++] = (uint32_t)v;
		h = end;
		while (*h == ',' || *h == ' ')
			h++;
	}
	return 0;
}

static void free_scratch(struct model *m)
{
	free(m->cols);
	free(m->conv);
	free(m->pool);
	free(m->argmax);
	m->cols = m->conv = m->pool = NULL;
	m->argmax = NULL;
	for (unsigned l = 0; l < m->ndense; l++) {
		free(m->act[l]);
		m->act[l] = NULL;
	}
	free(m->delta[0]);
	free(m->delta[1]);
	m->delta[0] = m->delta[1] = NULL;
	m->cap = 0;
}

/* Grow scratch buffers to hold n samples. */
static int reserve(struct model *m, size_t n)
{
	if (n <= m->cap)
		return 0;
	free_scratch(m);
	if (m->has_conv) {
		size_t p = (size_t)m->oh * m->ow, q = (size_t)m->ph * m->pw;

		m->cols = malloc(n * p * m->k * m->k * sizeof(float));
		m->conv = malloc(n * p * m->ch * sizeof(float));
		m->pool = malloc(n * q * m->ch * sizeof(float));
		m->argmax = malloc(n * q * m->ch * sizeof(uint32_t));
		if (!m->cols || !m->conv || !m->pool || !m->argmax)
			goto fail;
	}
	for (unsigned l = 0; l < m->ndense; l++) {
		m->act[l] = malloc(n * m->dense[l].out * sizeof(float));
		if (!m->act[l])
			goto fail;
	}
	for (int i = 0; i < 2; i++) {
		m->delta[i] = malloc(n * m->max_width * sizeof(float));
		if (!m->delta[i])
			goto fail;
	}
	m->cap = n;
	return 0;
fail:
	free_scratch(m);
	log_error("model: no memory for a batch of %zu", n);
	return -ENOMEM;
}

void model_destroy(struct model **self)
{
	if (!self || !*self)
		return;
	free_scratch(*self);
	free((*self)->params);
	free(*self);
	*self = NULL;
}

static void init_uniform(float *w, size_t len, double limit, struct rng *r)
{
	for (size_t i = 0; i < len; i++)
		w[i] = (float)((2.0 * rng_uniform(r) - 1.0) * limit);
}

struct model *model_new(const struct model_spec *spec, uint64_t seed)
{
	struct model *m;
	uint32_t in;
	size_t off = 0;
	struct rng r;

	if (!blas_threads_set)
		model_blas_threads(1);
	if (spec->rows == 0 || spec->cols == 0 || spec->nclasses < 2 ||
	    spec->nhidden > MODEL_MAX_HIDDEN || (spec->kind != MODEL_SOFTMAX &&
	    spec->kind != MODEL_MLP && spec->kind != MODEL_CNN)) {
		log_error("model: bad spec (%ux%u input, %u classes, %u hidden layers)", spec->rows,
			  spec->cols, spec->nclasses, spec->nhidden);
		return NULL;
	}
	m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	m->spec = *spec;
	if (spec->kind == MODEL_SOFTMAX)
		m->spec.nhidden = 0;
	m->input_dim = (size_t)spec->rows * spec->cols;
	in = (uint32_t)m->input_dim;
	if (spec->kind == MODEL_CNN) {
		if (spec->kernel == 0 || spec->kernel > spec->rows || spec->kernel > spec->cols ||
		    spec->channels == 0 || (spec->rows - spec->kernel + 1) < 2 ||
		    (spec->cols - spec->kernel + 1) < 2) {
			log_error("model: bad cnn spec (kernel %u, channels %u, input %ux%u)",
				  spec->kernel, spec->channels, spec->rows, spec->cols);
			free(m);
			return NULL;
		}
		m->has_conv = 1;
		m->ch = spec->channels;
		m->k = spec->kernel;
		m->oh = spec->rows - m->k + 1;
		m->ow = spec->cols - m->k + 1;
		m->ph = m->oh / 2;
		m->pw = m->ow / 2;
		m->cw_off = off;
		off += (size_t)m->ch * m->k * m->k;
		m->cb_off = off;
		off += m->ch;
		in = m->ph * m->pw * m->ch;
	}
	m->max_width = in;
	for (unsigned l = 0; l <= m->spec.nhidden; l++) {
		struct dense *d = &m->dense[l];

		d->in = in;
		d->out = l < m->spec.nhidden ? m->spec.hidden[l] : spec->nclasses;
		d->w_off = off;
		off += (size_t)d->in * d->out;
		d->b_off = off;
		off += d->out;
		in = d->out;
		if (d->out > m->max_width)
			m->max_width = d->out;
	}
	m->ndense = m->spec.nhidden + 1;
	m->nparams = off;
	m->params = calloc(off, sizeof(float));
	if (!m->params) {
		free(m);
		return NULL;
	}
	rng_seed(&r, seed, RNG_STREAM_INIT);
	if (m->has_conv)
		init_uniform(m->params + m->cw_off, (size_t)m->ch * m->k * m->k,
			     sqrt(6.0 / (m->k * m->k)), &r);
	for (unsigned l = 0; l < m->ndense; l++) {
		struct dense *d = &m->dense[l];
		int last = l + 1 == m->ndense;
		double lim = last ? sqrt(6.0 / (d->in + d->out)) : sqrt(6.0 / d->in);

		init_uniform(m->params + d->w_off, (size_t)d->in * d->out, lim, &r);
	}
	return m;
}

const struct model_spec *model_get_spec(const struct model *self)
{
	return &self->spec;
}

size_t model_nparams(const struct model *self)
{
	return self->nparams;
}

float *model_params(struct model *self)
{
	return self->params;
}

void model_set_params(struct model *self, const float *params)
{
	memcpy(self->params, params, self->nparams * sizeof(float));
}

size_t model_input_dim(const struct model *self)
{
	return self->input_dim;
}

unsigned model_nlayers(const struct model *self)
{
	return self->ndense + (self->has_conv ? 1 : 0);
}

int model_layer_view(const struct model *self, unsigned l, size_t *w_off, size_t *w_len,
		     size_t *b_off, size_t *b_len)
{
	const struct dense *d;

	if (self->has_conv) {
		if (l == 0) {
			*w_off = self->cw_off;
			*w_len = (size_t)self->ch * self->k * self->k;
			*b_off = self->cb_off;
			*b_len = self->ch;
			return 0;
		}
		l--;
	}
	if (l >= self->ndense)
		return -ENOENT;
	d = &self->dense[l];
	*w_off = d->w_off;
	*w_len = (size_t)d->in * d->out;
	*b_off = d->b_off;
	*b_len = d->out;
	return 0;
}

/* Conv + ReLU + max-pool of n samples of x into m->pool (arg-max into m->argmax). */
static void conv_forward(struct model *m, const float *x, size_t n)
{
	const uint32_t k = m->k, kk = k * k, oh = m->oh, ow = m->ow, ch = m->ch;
	const uint32_t cols_in = m->spec.cols;
	const size_t p = (size_t)oh * ow, q = (size_t)m->ph * m->pw;
	const float *wc = m->params + m->cw_off, *bc = m->params + m->cb_off;

	for (size_t i = 0; i < n; i++) {
		const float *img = x + i * m->input_dim;
		float *c = m->cols + i * p * kk;

		for (uint32_t y = 0; y < oh; y++)
			for (uint32_t xo = 0; xo < ow; xo++, c += kk)
				for (uint32_t dy = 0; dy < k; dy++)
					memcpy(c + dy * k, img + (size_t)(y + dy) * cols_in + xo,
					       k * sizeof(float));
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(n * p), (int)ch, (int)kk, 1.0f,
		    m->cols, (int)kk, wc, (int)kk, 0.0f, m->conv, (int)ch);
	for (size_t r = 0; r < n * p; r++) {
		float *row = m->conv + r * ch;

		for (uint32_t c = 0; c < ch; c++) {
			float v = row[c] + bc[c];

			row[c] = v > 0.0f ? v : 0.0f;
		}
	}
	for (size_t i = 0; i < n; i++) {
		const float *cv = m->conv + i * p * ch;
		float *po = m->pool + i * q * ch;
		uint32_t *am = m->argmax + i * q * ch;

		for (uint32_t py = 0; py < m->ph; py++) {
			for (uint32_t px = 0; px < m->pw; px++) {
				size_t cell = ((size_t)py * m->pw + px) * ch;
				uint32_t base = (2 * py * ow + 2 * px) * ch;
				uint32_t off4[4] = { base, base + ch, base + ow * ch, base + ow * ch + ch };

				for (uint32_t c = 0; c < ch; c++) {
					uint32_t best = off4[0] + c;

					for (int t = 1; t < 4; t++)
						if (cv[off4[t] + c] > cv[best])
							best = off4[t] + c;
					po[cell + c] = cv[best];
					am[cell + c] = best;
				}
			}
		}
	}
}

/* Forward pass of n <= cap samples; the last act holds logits. Returns the first dense input. */
static const float *forward(struct model *m, const float *x, size_t n)
{
	const float *a = x;

	if (m->has_conv) {
		conv_forward(m, x, n);
		a = m->pool;
	}
	for (unsigned l = 0; l < m->ndense; l++) {
		const struct dense *d = &m->dense[l];
		const float *w = m->params + d->w_off, *b = m->params + d->b_off;
		float *z = m->act[l];
		int relu = l + 1 < m->ndense;

		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)d->out, (int)d->in,
			    1.0f, a, (int)d->in, w, (int)d->in, 0.0f, z, (int)d->out);
		for (size_t i = 0; i < n; i++) {
			float *row = z + i * d->out;

			if (relu) {
				for (uint32_t o = 0; o < d->out; o++) {
					float v = row[o] + b[o];

					row[o] = v > 0.0f ? v : 0.0f;
				}
			} else {
				for (uint32_t o = 0; o < d->out; o++)
					row[o] += b[o];
			}
		}
		a = z;
	}
	return m->has_conv ? m->pool : x;
}

/* Softmax of each row of z (n x c) in place; returns the summed cross-entropy when y != NULL. */
static double softmax_rows(float *z, size_t n, uint32_t c, const uint8_t *y)
{
	double loss = 0.0;

	for (size_t i = 0; i < n; i++) {
		float *row = z + i * c;
		float mx = row[0];
		double sum = 0.0;

		for (uint32_t j = 1; j < c; j++)
			if (row[j] > mx)
				mx = row[j];
		if (y)
			loss -= (double)row[y[i]] - mx;
		for (uint32_t j = 0; j < c; j++) {
			float e = expf(row[j] - mx);

			row[j] = e;
			sum += e;
		}
		if (y)
			loss += log(sum);
		{
			float inv = (float)(1.0 / sum);

			for (uint32_t j = 0; j < c; j++)
				row[j] *= inv;
		}
	}
	return loss;
}

static void column_sums(const float *d, size_t n, uint32_t c, float *out)
{
	memset(out, 0, c * sizeof(float));
	for (size_t i = 0; i < n; i++) {
		const float *row = d + i * c;

		for (uint32_t j = 0; j < c; j++)
			out[j] += row[j];
	}
}

int model_gradient(struct model *self, const float *x, const uint8_t *y, size_t n, float *grad,
		   double *loss)
{
	struct model *m = self;
	const float *in0;
	float *delta;
	float inv_n;
	unsigned last = m->ndense - 1;
	int cur = 0;
	int rc;

	if (n == 0)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (y[i] >= m->spec.nclasses)
			return -EINVAL;
	rc = reserve(m, n);
	if (rc)
		return rc;
	in0 = forward(m, x, n);
	*loss = softmax_rows(m->act[last], n, m->dense[last].out, y) / (double)n;

	/* delta of the last layer, in place of its probabilities */
	delta = m->act[last];
	inv_n = 1.0f / (float)n;
	for (size_t i = 0; i < n; i++) {
		float *row = delta + i * m->dense[last].out;

		row[y[i]] -= 1.0f;
		for (uint32_t j = 0; j < m->dense[last].out; j++)
			row[j] *= inv_n;
	}
	for (int l = (int)last; l >= 0; l--) {
		const struct dense *d = &m->dense[l];
		const float *a = l > 0 ? m->act[l - 1] : in0;
		const float *w = m->params + d->w_off;

		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d->out, (int)d->in, (int)n,
			    1.0f, delta, (int)d->out, a, (int)d->in, 0.0f, grad + d->w_off,
			    (int)d->in);
		column_sums(delta, n, d->out, grad + d->b_off);
		if (l == 0 && !m->has_conv)
			break;
		/* dA = delta W, through the ReLU that produced a (a > 0) */
		{
			float *da = m->delta[cur];
			size_t len = n * d->in;

			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)d->in,
				    (int)d->out, 1.0f, delta, (int)d->out, w, (int)d->in, 0.0f, da,
				    (int)d->in);
			for (size_t i = 0; i < len; i++)
				if (!(a[i] > 0.0f))
					da[i] = 0.0f;
			delta = da;
			cur ^= 1;
		}
	}
	if (m->has_conv) {
		/* scatter the pooled gradient to the arg-max cells, then dWc = dConv^T cols */
		const size_t p = (size_t)m->oh * m->ow, q = (size_t)m->ph * m->pw;
		const uint32_t ch = m->ch, kk = m->k * m->k;
		float *dconv = m->conv; /* activations no longer needed */

		memset(dconv, 0, n * p * ch * sizeof(float));
		for (size_t i = 0; i < n; i++) {
			const float *dp = delta + i * q * ch;
			const uint32_t *am = m->argmax + i * q * ch;
			float *dc = dconv + i * p * ch;

			for (size_t j = 0; j < q * ch; j++)
				dc[am[j]] += dp[j];
		}
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)ch, (int)kk, (int)(n * p),
			    1.0f, dconv, (int)ch, m->cols, (int)kk, 0.0f, grad + m->cw_off, (int)kk);
		column_sums(dconv, n * p, ch, grad + m->cb_off);
	}
	return 0;
}

int model_predict(struct model *self, const float *x, size_t n, float *probs)
{
	uint32_t c = self->spec.nclasses;

	for (size_t s = 0; s < n; s += PREDICT_SLICE) {
		size_t len = n - s < PREDICT_SLICE ? n - s : PREDICT_SLICE;
		int rc = reserve(self, len);

		if (rc)
			return rc;
		forward(self, x + s * self->input_dim, len);
		softmax_rows(self->act[self->ndense - 1], len, c, NULL);
		memcpy(probs + s * c, self->act[self->ndense - 1], len * c * sizeof(float));
	}
	return 0;
}
