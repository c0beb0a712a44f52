/* node/fleet_codec: bit-exact round trips (hash equality) of every strategy on the real
 * softmax, MLP and CNN parameter vectors, sparse error feedback keeping device and registry
 * identical and losing nothing, delta compressing a fine-tuned model, and every corruption or
 * truncation of a frame rejected. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "node/fleet_codec.h"
#include "node/model.h"
#include "node/rng.h"

/* A real model's initial parameters (the base) and a "fine-tuned" copy: every weight moved by
 * a small step, as SGD does, a few exactly unchanged. */
static size_t make_pair(enum model_kind kind, float **base, float **tuned)
{
	struct model_spec spec = { .kind = kind, .rows = 28, .cols = 28, .nclasses = 10,
				   .channels = 8, .kernel = 5 };
	struct model *m;
	struct rng r;
	size_t n;

	if (kind != MODEL_SOFTMAX) {
		spec.nhidden = 1;
		spec.hidden[0] = kind == MODEL_MLP ? 128 : 64;
	}
	m = model_new(&spec, 42);
	cr_assert_not_null(m);
	n = model_nparams(m);
	*base = malloc(n * 4);
	*tuned = malloc(n * 4);
	memcpy(*base, model_params(m), n * 4);
	rng_seed(&r, 7, (uint64_t)kind);
	for (size_t i = 0; i < n; i++)
		(*tuned)[i] = i % 17 == 0 ? (*base)[i] : (*base)[i] + 1e-3f * (float)rng_normal(&r);
	model_destroy(&m);
	return n;
}

static void assert_same_hash(const float *a, const float *b, size_t n)
{
	uint8_t ha[FLEET_HASH_BYTES], hb[FLEET_HASH_BYTES];

	cr_assert_eq(fleet_hash(a, n, ha), 0);
	cr_assert_eq(fleet_hash(b, n, hb), 0);
	cr_assert_eq(memcmp(ha, hb, sizeof ha), 0, "hashes differ");
	cr_assert_eq(memcmp(a, b, n * 4), 0, "vectors differ");
}

static void roundtrip_model(enum model_kind kind)
{
	float *base, *tuned, *out, *res, *dev;
	uint8_t *f = NULL;
	size_t n = make_pair(kind, &base, &tuned), len, full_len, delta_len;

	out = malloc(n * 4);
	/* full */
	cr_assert_eq(fleet_codec_encode(FLEET_FULL, tuned, NULL, n, &f, &len), 0);
	cr_assert_leq(len, fleet_codec_frame_max(n));
	full_len = len;
	cr_assert_eq(fleet_codec_decode(f, len, NULL, n, out), 0);
	assert_same_hash(out, tuned, n);
	free(f);
	/* delta */
	cr_assert_eq(fleet_codec_encode(FLEET_DELTA, tuned, base, n, &f, &len), 0);
	delta_len = len;
	memset(out, 0, n * 4);
	cr_assert_eq(fleet_codec_decode(f, len, base, n, out), 0);
	assert_same_hash(out, tuned, n);
	/* Against the wrong base: refused, not silently wrong. */
	cr_assert_eq(fleet_codec_decode(f, len, tuned, n, out), -ESTALE);
	cr_assert_eq(fleet_codec_decode(f, len, NULL, n, out), -ESTALE);
	free(f);
	/* Small steps change only low mantissa bits: the delta must beat the full frame. */
	cr_assert_lt(delta_len, full_len, "delta %zu >= full %zu", delta_len, full_len);
	/* sparse */
	res = calloc(n, 4);
	dev = malloc(n * 4);
	memcpy(dev, tuned, n * 4);
	cr_assert_eq(fleet_codec_encode_sparse(dev, base, res, n, n / 10, &f, &len), 0);
	cr_assert_eq(fleet_codec_decode(f, len, base, n, out), 0);
	assert_same_hash(out, dev, n);
	free(f);
	free(base);
	free(tuned);
	free(out);
	free(res);
	free(dev);
}

Test(fleet_codec, roundtrip_softmax) { roundtrip_model(MODEL_SOFTMAX); }
Test(fleet_codec, roundtrip_mlp) { roundtrip_model(MODEL_MLP); }
Test(fleet_codec, roundtrip_cnn) { roundtrip_model(MODEL_CNN); }

Test(fleet_codec, special_values_roundtrip)
{
	float base[6] = { 0.0f, -0.0f, 1e-40f, INFINITY, -3.5f, 1.0f };
	float m[6] = { -0.0f, 0.0f, -1e-40f, -INFINITY, NAN, 1.0f }, out[6];
	uint8_t *f;
	size_t len;

	cr_assert_eq(fleet_codec_encode(FLEET_DELTA, m, base, 6, &f, &len), 0);
	cr_assert_eq(fleet_codec_decode(f, len, base, 6, out), 0);
	cr_assert_eq(memcmp(out, m, sizeof m), 0); /* -0, denormals, NaN payload: bit-exact */
	free(f);
}

/* Error feedback: after each sync the device's model is exactly what the registry decoded, and
 * model + residual is exactly what the device had learned (nothing dropped). Repeated syncs
 * with no new learning drain the residual to zero. */
Test(fleet_codec, sparse_error_feedback_converges)
{
	float *base, *tuned, *res, *reg, *next, *tmp;
	uint8_t *f;
	size_t n = make_pair(MODEL_SOFTMAX, &base, &tuned), len, k = n / 8;

	res = calloc(n, 4);
	reg = malloc(n * 4);
	next = malloc(n * 4);
	tmp = malloc(n * 4);
	memcpy(reg, base, n * 4);
	for (int round = 0; round < 9; round++) {
		float *dev = next;

		/* Round 0 syncs what the device learned; then it trains no further: its model is the
		 * one it adopted at the last sync. */
		memcpy(next, round == 0 ? tuned : reg, n * 4);
		cr_assert_eq(fleet_codec_encode_sparse(dev, reg, res, n, k, &f, &len), 0);
		cr_assert_eq(fleet_codec_decode(f, len, reg, n, tmp), 0);
		memcpy(reg, tmp, n * 4);
		free(f);
		assert_same_hash(reg, dev, n);
	}
	/* 9 rounds of k = n/8 cover every entry: the device holds exactly what it learned. */
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(res[i], 0.0f, "residual[%zu] = %g", i, (double)res[i]);
	/* Each entry is what the device learned, up to the float rounding of carrying a change
	 * in the residual ((b + r) - b need not be r): a few ulps, never the change itself. */
	for (size_t i = 0; i < n; i++)
		cr_assert_leq(fabsf(reg[i] - tuned[i]), 1e-6f * fmaxf(1.0f, fabsf(tuned[i])),
			      "entry %zu: %.9g vs %.9g", i, (double)reg[i], (double)tuned[i]);
	free(base);
	free(tuned);
	free(res);
	free(reg);
	free(next);
	free(tmp);
}

Test(fleet_codec, sparse_keeps_topk)
{
	float base[8] = { 0 }, m[8] = { 0.1f, -5, 0.2f, 3, 0, 0, 0.01f, -0.3f }, res[8] = { 0 };
	float out[8];
	uint8_t *f;
	size_t len;
	struct fleet_frame_info in;

	cr_assert_eq(fleet_codec_encode_sparse(m, base, res, 8, 3, &f, &len), 0);
	cr_assert_eq(fleet_codec_peek(f, len, &in), 0);
	cr_assert_eq(in.k, 3);
	cr_assert_eq(in.strategy, FLEET_SPARSE);
	/* Kept: -5, 3, -0.3; the rest waits in the residual. */
	float want[8] = { 0, -5, 0, 3, 0, 0, 0, -0.3f }, want_res[8] = { 0.1f, 0, 0.2f, 0, 0, 0, 0.01f, 0 };
	cr_assert_eq(memcmp(m, want, sizeof m), 0);
	cr_assert_eq(memcmp(res, want_res, sizeof res), 0);
	cr_assert_eq(fleet_codec_decode(f, len, base, 8, out), 0);
	cr_assert_eq(memcmp(out, want, sizeof out), 0);
	free(f);
}

/* Every single-bit flip anywhere in a frame and every truncation is rejected. */
static void corrupt_all(enum fleet_strategy s)
{
	float base[300], m[300], res[300] = { 0 }, out[300];
	uint8_t *f;
	size_t len;
	struct rng r;

	rng_seed(&r, 1, 2);
	for (int i = 0; i < 300; i++) {
		base[i] = (float)rng_normal(&r);
		m[i] = base[i] + 0.01f * (float)rng_normal(&r);
	}
	if (s == FLEET_SPARSE)
		cr_assert_eq(fleet_codec_encode_sparse(m, base, res, 300, 40, &f, &len), 0);
	else
		cr_assert_eq(fleet_codec_encode(s, m, base, 300, &f, &len), 0);
	cr_assert_eq(fleet_codec_decode(f, len, base, 300, out), 0);
	for (size_t byte = 0; byte < len; byte++) {
		for (int bit = 0; bit < 8; bit++) {
			f[byte] ^= (uint8_t)(1u << bit);
			int rc = fleet_codec_decode(f, len, base, 300, out);

			cr_assert(rc == -EBADMSG || rc == -ESTALE, "%s: flip %zu.%d gave %d",
				  fleet_strategy_name(s), byte, bit, rc);
			f[byte] ^= (uint8_t)(1u << bit);
		}
	}
	for (size_t cut = 0; cut < len; cut++)
		cr_assert_eq(fleet_codec_decode(f, cut, base, 300, out), -EBADMSG, "cut %zu", cut);
	/* Wrong model size. */
	cr_assert_eq(fleet_codec_decode(f, len, base, 299, out), -EBADMSG);
	free(f);
}

Test(fleet_codec, corrupt_full) { corrupt_all(FLEET_FULL); }
Test(fleet_codec, corrupt_delta) { corrupt_all(FLEET_DELTA); }
Test(fleet_codec, corrupt_sparse) { corrupt_all(FLEET_SPARSE); }

Test(fleet_codec, names)
{
	enum fleet_strategy s;

	cr_assert_eq(fleet_strategy_parse("delta", &s), 0);
	cr_assert_eq(s, FLEET_DELTA);
	cr_assert_str_eq(fleet_strategy_name(FLEET_SPARSE), "sparse");
	cr_assert_eq(fleet_strategy_parse("Delta", &s), -EINVAL);
	cr_assert_null(fleet_strategy_name(0));
}

Test(fleet_codec, replay_frames)
{
	float base[50], other[50];
	uint8_t h[FLEET_HASH_BYTES] = { 7 }, *f;
	uint32_t sizes[3] = { 4, 4, 2 }, idx[10] = { 5, 1, 9, 0, 3, 3, 2, 8, 7, 6 };
	uint32_t *gs, *gi;
	size_t len, steps, k;
	struct fleet_frame_info in;
	float out[50];

	for (int i = 0; i < 50; i++) {
		base[i] = (float)i;
		other[i] = (float)-i;
	}
	cr_assert_eq(fleet_codec_encode_replay(h, base, 50, sizes, 3, idx, 10, &f, &len), 0);
	cr_assert_eq(fleet_codec_peek(f, len, &in), 0);
	cr_assert_eq(in.strategy, FLEET_REPLAY);
	cr_assert_eq(in.k, 10);
	cr_assert_eq(memcmp(in.hash, h, sizeof h), 0);
	cr_assert_eq(fleet_codec_replay_parse(f, len, base, 50, &gs, &steps, &gi, &k), 0);
	cr_assert_eq(steps, 3);
	cr_assert_eq(k, 10);
	cr_assert_eq(memcmp(gs, sizes, sizeof sizes), 0);
	cr_assert_eq(memcmp(gi, idx, sizeof idx), 0);
	free(gs);
	free(gi);
	cr_assert_eq(fleet_codec_replay_parse(f, len, other, 50, &gs, &steps, &gi, &k), -ESTALE);
	cr_assert_eq(fleet_codec_decode(f, len, base, 50, out), -ENOTSUP);
	for (size_t byte = 0; byte < len; byte++) {
		f[byte] ^= 0x10;
		cr_assert_neq(fleet_codec_replay_parse(f, len, base, 50, &gs, &steps, &gi, &k), 0,
			      "flip at %zu accepted", byte);
		f[byte] ^= 0x10;
	}
	free(f);
	/* Sizes that do not add up, or an empty step, are not encoded. */
	sizes[2] = 3;
	cr_assert_eq(fleet_codec_encode_replay(h, base, 50, sizes, 3, idx, 10, &f, &len), -EINVAL);
	sizes[2] = 0;
	cr_assert_eq(fleet_codec_encode_replay(h, base, 50, sizes, 3, idx, 10, &f, &len), -EINVAL);
}

/* A replay carrying raw samples: they come back exactly (positions, labels, pixels), the plain
 * parser still reads its steps, any flipped bit or truncation is refused, and positions that do
 * not increase are not encoded. */
Test(fleet_codec, replay_with_raw_samples)
{
	float base[50];
	uint8_t h[FLEET_HASH_BYTES] = { 9 }, *f, labels[3] = { 7, 8, 7 }, pixels[3 * 6];
	uint32_t sizes[2] = { 3, 2 }, idx[5] = { 1, 40, 2, 41, 43 }, pos[3] = { 40, 41, 43 };
	struct fleet_replay_samples smp = { .m = 3, .dim = 6, .pos = pos, .labels = labels,
					    .pixels = pixels }, got;
	uint32_t *gs, *gi;
	size_t len, steps, k;

	for (int i = 0; i < 50; i++)
		base[i] = (float)i * 0.5f;
	for (int i = 0; i < 18; i++)
		pixels[i] = (uint8_t)(i * 13);
	cr_assert_eq(fleet_codec_encode_replay_samples(h, base, 50, sizes, 2, idx, 5, &smp, &f, &len), 0);
	cr_assert_eq(fleet_codec_replay_parse_samples(f, len, base, 50, &gs, &steps, &gi, &k, &got), 0);
	cr_assert_eq(steps, 2);
	cr_assert_eq(k, 5);
	cr_assert_eq(memcmp(gi, idx, sizeof idx), 0);
	cr_assert_eq(got.m, 3);
	cr_assert_eq(got.dim, 6);
	cr_assert_eq(memcmp(got.pos, pos, sizeof pos), 0);
	cr_assert_eq(memcmp(got.labels, labels, sizeof labels), 0);
	cr_assert_eq(memcmp(got.pixels, pixels, sizeof pixels), 0);
	free(gs);
	free(gi);
	fleet_codec_replay_samples_free(&got);
	cr_assert_null(got.pos);
	cr_assert_eq(fleet_codec_replay_parse(f, len, base, 50, &gs, &steps, &gi, &k), 0);
	free(gs);
	free(gi);
	for (size_t byte = 0; byte < len; byte++) {
		f[byte] ^= 0x04;
		cr_assert_neq(fleet_codec_replay_parse_samples(f, len, base, 50, &gs, &steps, &gi, &k, &got),
			      0, "flip at %zu accepted", byte);
		cr_assert_null(got.pos);
		f[byte] ^= 0x04;
	}
	for (size_t cut = 0; cut < len; cut++)
		cr_assert_neq(fleet_codec_replay_parse_samples(f, cut, base, 50, &gs, &steps, &gi, &k, &got),
			      0, "truncated to %zu accepted", cut);
	free(f);
	pos[2] = 41;
	cr_assert_eq(fleet_codec_encode_replay_samples(h, base, 50, sizes, 2, idx, 5, &smp, &f, &len),
		     -EINVAL);
}
