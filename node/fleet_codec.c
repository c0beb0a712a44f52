/* node/fleet_codec: see fleet_codec.h.
 *
 * Why XOR and byte planes: fine-tuning moves most weights by a few ulps, so the XOR of the old
 * and new bit patterns is zero in the sign and exponent bits and in the high mantissa bits of
 * most floats. Laying the four bytes of all words out as four planes puts those zero bytes next
 * to each other, where a general compressor finds long runs; interleaved, every fourth byte
 * would be noise and break them. The transform is exactly invertible, so the registry's copy is
 * the device's bit for bit, which the BLAKE2b hash of the result proves on every decode. */
#include "node/fleet_codec.h"

#include <errno.h>
#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "lib/limits.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "fleet_codec stores float32 in host order and assumes a little-endian host"
#endif

#define ZSTD_LEVEL 3
#define FLEET_CODEC_REPLAY_MAX (16u << 20) /* sample positions in one replay frame */

static const char *const strategy_names[FLEET_STRATEGY_END] = {
	[FLEET_FULL] = "full",
	[FLEET_DELTA] = "delta",
	[FLEET_SPARSE] = "sparse",
	[FLEET_REPLAY] = "replay",
};

const char *fleet_strategy_name(enum fleet_strategy s)
{
	if ((int)s < FLEET_FULL || s >= FLEET_STRATEGY_END)
		return NULL;
	return strategy_names[s];
}

int fleet_strategy_parse(const char *name, enum fleet_strategy *out)
{
	for (int s = FLEET_FULL; s < FLEET_STRATEGY_END; s++) {
		if (name && !strcmp(name, strategy_names[s])) {
			*out = (enum fleet_strategy)s;
			return 0;
		}
	}
	return -EINVAL;
}

int fleet_hash(const float *w, size_t n, uint8_t out[FLEET_HASH_BYTES])
{
	/* sodium_init is idempotent and thread-safe; generichash needs no keys or randomness. */
	if (sodium_init() < 0)
		return -EIO;
	if (crypto_generichash(out, FLEET_HASH_BYTES, (const unsigned char *)w,
			       (unsigned long long)n * sizeof(float), NULL, 0) != 0)
		return -EIO;
	return 0;
}

size_t fleet_codec_frame_max(size_t n)
{
	if (n == 0 || n > LIMITS_MAX_PARAMS)
		return 0;
	return FLEET_CODEC_HEADER_BYTES + ZSTD_compressBound(n * 8);
}

static uint32_t bits_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float float_of(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* Word j's byte b goes to plane b: out[b * n + j]. */
static void planes_split(const uint32_t *w, size_t n, uint8_t *out)
{
	for (size_t j = 0; j < n; j++) {
		out[j] = (uint8_t)w[j];
		out[n + j] = (uint8_t)(w[j] >> 8);
		out[2 * n + j] = (uint8_t)(w[j] >> 16);
		out[3 * n + j] = (uint8_t)(w[j] >> 24);
	}
}

static void planes_join(const uint8_t *in, size_t n, uint32_t *w)
{
	for (size_t j = 0; j < n; j++)
		w[j] = (uint32_t)in[j] | (uint32_t)in[n + j] << 8 | (uint32_t)in[2 * n + j] << 16 |
		       (uint32_t)in[3 * n + j] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

/* The frame check: BLAKE2b-128 of the first 88 header bytes and the compressed payload. */
static int frame_check(const uint8_t *f, const uint8_t *payload, size_t comp_len, uint8_t out[16])
{
	crypto_generichash_state st;

	if (sodium_init() < 0 || crypto_generichash_init(&st, NULL, 0, 16) ||
	    crypto_generichash_update(&st, f, 88) ||
	    crypto_generichash_update(&st, payload, comp_len) || crypto_generichash_final(&st, out, 16))
		return -EIO;
	return 0;
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* Compress raw (raw_len bytes) behind a header into a new frame. */
static int frame_build(enum fleet_strategy s, uint32_t n, uint32_t k, const uint8_t *raw,
		       size_t raw_len, const uint8_t *base_hash, const uint8_t *hash, uint8_t **frame,
		       size_t *len)
{
	size_t cap = FLEET_CODEC_HEADER_BYTES + ZSTD_compressBound(raw_len);
	uint8_t *f = malloc(cap);
	size_t c;

	if (!f)
		return -ENOMEM;
	c = ZSTD_compress(f + FLEET_CODEC_HEADER_BYTES, cap - FLEET_CODEC_HEADER_BYTES, raw, raw_len,
			  ZSTD_LEVEL);
	if (ZSTD_isError(c)) {
		free(f);
		return -EIO;
	}
	put32(f, FLEET_CODEC_MAGIC);
	f[4] = (uint8_t)s;
	f[5] = FLEET_CODEC_VERSION;
	f[6] = f[7] = 0;
	put32(f + 8, n);
	put32(f + 12, k);
	put32(f + 16, (uint32_t)raw_len);
	put32(f + 20, (uint32_t)c);
	if (base_hash)
		memcpy(f + 24, base_hash, FLEET_HASH_BYTES);
	else
		memset(f + 24, 0, FLEET_HASH_BYTES);
	memcpy(f + 56, hash, FLEET_HASH_BYTES);
	if (frame_check(f, f + FLEET_CODEC_HEADER_BYTES, c, f + 88) < 0) {
		free(f);
		return -EIO;
	}
	*frame = f;
	*len = FLEET_CODEC_HEADER_BYTES + c;
	return 0;
}

int fleet_codec_encode(enum fleet_strategy s, const float *model, const float *base, size_t n,
		       uint8_t **frame, size_t *len)
{
	uint8_t hash[FLEET_HASH_BYTES], base_hash[FLEET_HASH_BYTES];
	uint32_t *x = NULL;
	uint8_t *raw = NULL;
	int rc;

	if (n == 0 || n > LIMITS_MAX_PARAMS || (s != FLEET_FULL && s != FLEET_DELTA) ||
	    (s == FLEET_DELTA && !base))
		return -EINVAL;
	if ((rc = fleet_hash(model, n, hash)) < 0)
		return rc;
	if (s == FLEET_FULL)
		return frame_build(s, (uint32_t)n, 0, (const uint8_t *)model, n * 4, NULL, hash, frame,
				   len);
	if ((rc = fleet_hash(base, n, base_hash)) < 0)
		return rc;
	x = malloc(n * 4);
	raw = malloc(n * 4);
	rc = -ENOMEM;
	if (!x || !raw)
		goto out;
	for (size_t i = 0; i < n; i++)
		x[i] = bits_of(model[i]) ^ bits_of(base[i]);
	planes_split(x, n, raw);
	rc = frame_build(s, (uint32_t)n, 0, raw, n * 4, base_hash, hash, frame, len);
out:
	free(x);
	free(raw);
	return rc;
}

struct mag {
	float m;
	uint32_t i;
};

/* Largest magnitude first; equal magnitudes by lower index (a total order: deterministic). */
static int mag_cmp(const void *a, const void *b)
{
	const struct mag *x = a, *y = b;

	if (x->m != y->m)
		return x->m > y->m ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static int idx_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int fleet_codec_encode_sparse(float *model, const float *base, float *residual, size_t n, size_t k,
			      uint8_t **frame, size_t *len)
{
	uint8_t hash[FLEET_HASH_BYTES], base_hash[FLEET_HASH_BYTES];
	struct mag *mags = NULL;
	uint32_t *idx = NULL, *words = NULL;
	uint8_t *raw = NULL;
	int rc;

	if (n == 0 || n > LIMITS_MAX_PARAMS || !base || !residual)
		return -EINVAL;
	if (k > n)
		k = n;
	if ((rc = fleet_hash(base, n, base_hash)) < 0)
		return rc;
	mags = malloc(n * sizeof *mags);
	idx = malloc((k ? k : 1) * 4);
	words = malloc((k ? k : 1) * 8);
	raw = malloc((k ? k : 1) * 8);
	rc = -ENOMEM;
	if (!mags || !idx || !words || !raw)
		goto out;
	for (size_t i = 0; i < n; i++) {
		float t = model[i] + residual[i], d = fabsf(t - base[i]);

		/* A non-finite change is sent first rather than kept forever in the residual. */
		mags[i] = (struct mag){ .m = isnan(d) ? INFINITY : d, .i = (uint32_t)i };
	}
	qsort(mags, n, sizeof *mags, mag_cmp);
	for (size_t j = 0; j < k; j++)
		idx[j] = mags[j].i;
	qsort(idx, k, 4, idx_cmp);
	/* model := base + the k kept changes; residual := what was not sent. */
	for (size_t i = 0, j = 0; i < n; i++) {
		float t = model[i] + residual[i];

		if (j < k && idx[j] == i) {
			model[i] = t;
			j++;
		} else {
			model[i] = base[i];
		}
		residual[i] = t - model[i];
	}
	for (size_t j = 0; j < k; j++) {
		words[j] = j ? idx[j] - idx[j - 1] : idx[0];
		words[k + j] = bits_of(model[idx[j]]) ^ bits_of(base[idx[j]]);
	}
	planes_split(words, k, raw);
	planes_split(words + k, k, raw + 4 * k);
	if ((rc = fleet_hash(model, n, hash)) < 0)
		goto out;
	rc = frame_build(FLEET_SPARSE, (uint32_t)n, (uint32_t)k, raw, k * 8, base_hash, hash, frame,
			 len);
out:
	free(mags);
	free(idx);
	free(words);
	free(raw);
	return rc;
}

int fleet_codec_peek(const uint8_t *f, size_t len, struct fleet_frame_info *info)
{
	struct fleet_frame_info in;
	uint8_t check[16];

	if (!f || len < FLEET_CODEC_HEADER_BYTES || get32(f) != FLEET_CODEC_MAGIC ||
	    f[5] != FLEET_CODEC_VERSION || f[6] || f[7])
		return -EBADMSG;
	if (f[4] < FLEET_FULL || f[4] >= FLEET_STRATEGY_END)
		return -EBADMSG;
	in.strategy = (enum fleet_strategy)f[4];
	in.n = get32(f + 8);
	in.k = get32(f + 12);
	in.raw_len = get32(f + 16);
	in.comp_len = get32(f + 20);
	memcpy(in.base_hash, f + 24, FLEET_HASH_BYTES);
	memcpy(in.hash, f + 56, FLEET_HASH_BYTES);
	if (in.n == 0 || in.n > LIMITS_MAX_PARAMS || in.comp_len != len - FLEET_CODEC_HEADER_BYTES)
		return -EBADMSG;
	if (in.strategy == FLEET_SPARSE) {
		if (in.k > in.n || (uint64_t)in.raw_len != (uint64_t)in.k * 8)
			return -EBADMSG;
	} else if (in.strategy == FLEET_REPLAY) {
		/* steps <= k: every step has at least one sample; raw samples: at most k of them
		 * (each one a position some step uses), FLEET_CODEC_SAMPLE_DIM_MAX bytes each. */
		if (in.raw_len < 4 || in.k > FLEET_CODEC_REPLAY_MAX ||
		    (uint64_t)in.raw_len > 12 + 8 * (uint64_t)in.k +
						   (uint64_t)in.k * (5 + FLEET_CODEC_SAMPLE_DIM_MAX))
			return -EBADMSG;
	} else if (in.k != 0 || (uint64_t)in.raw_len != (uint64_t)in.n * 4) {
		return -EBADMSG;
	}
	if (frame_check(f, f + FLEET_CODEC_HEADER_BYTES, in.comp_len, check) < 0 ||
	    memcmp(check, f + 88, 16))
		return -EBADMSG;
	*info = in;
	return 0;
}

int fleet_codec_decode(const uint8_t *frame, size_t len, const float *base, size_t n, float *out)
{
	static const uint8_t zero[FLEET_HASH_BYTES];
	struct fleet_frame_info in;
	uint8_t h[FLEET_HASH_BYTES];
	const uint8_t *payload = frame + FLEET_CODEC_HEADER_BYTES;
	uint8_t *raw = NULL;
	uint32_t *words = NULL;
	unsigned long long content;
	size_t got;
	int rc;

	if ((rc = fleet_codec_peek(frame, len, &in)) < 0)
		return rc;
	if (in.n != n)
		return -EBADMSG;
	if (in.strategy == FLEET_REPLAY)
		return -ENOTSUP;
	if (in.strategy == FLEET_FULL) {
		if (memcmp(in.base_hash, zero, FLEET_HASH_BYTES))
			return -EBADMSG;
	} else {
		if (!base)
			return -ESTALE;
		if ((rc = fleet_hash(base, n, h)) < 0)
			return rc;
		if (memcmp(h, in.base_hash, FLEET_HASH_BYTES))
			return -ESTALE;
	}
	/* Sizes first: the zstd frame must say exactly raw_len and span exactly comp_len. */
	content = ZSTD_getFrameContentSize(payload, in.comp_len);
	if (content != in.raw_len || ZSTD_findFrameCompressedSize(payload, in.comp_len) != in.comp_len)
		return -EBADMSG;
	raw = malloc(in.raw_len ? in.raw_len : 1);
	words = malloc(in.strategy == FLEET_FULL ? 1 : (in.raw_len ? in.raw_len : 1));
	rc = -ENOMEM;
	if (!raw || !words)
		goto out;
	rc = -EBADMSG;
	got = ZSTD_decompress(raw, in.raw_len ? in.raw_len : 1, payload, in.comp_len);
	if (ZSTD_isError(got) || got != in.raw_len)
		goto out;
	switch (in.strategy) {
	case FLEET_FULL:
		memcpy(out, raw, (size_t)n * 4);
		break;
	case FLEET_DELTA:
		planes_join(raw, n, words);
		for (size_t i = 0; i < n; i++)
			out[i] = float_of(bits_of(base[i]) ^ words[i]);
		break;
	case FLEET_SPARSE: {
		uint64_t at = 0;

		planes_join(raw, in.k, words);
		planes_join(raw + 4 * (size_t)in.k, in.k, words + in.k);
		memcpy(out, base, (size_t)n * 4);
		for (size_t j = 0; j < in.k; j++) {
			if (j && words[j] == 0)
				goto out; /* indices strictly increase */
			at += words[j];
			if (at >= n)
				goto out;
			out[at] = float_of(bits_of(base[at]) ^ words[in.k + j]);
		}
		break;
	}
	default:
		goto out;
	}
	if ((rc = fleet_hash(out, n, h)) < 0)
		goto out;
	rc = memcmp(h, in.hash, FLEET_HASH_BYTES) ? -EBADMSG : 0;
out:
	free(raw);
	free(words);
	return rc;
}

void fleet_codec_replay_samples_free(struct fleet_replay_samples *s)
{
	free(s->pos);
	free(s->labels);
	free(s->pixels);
	memset(s, 0, sizeof *s);
}

int fleet_codec_encode_replay(const uint8_t hash[FLEET_HASH_BYTES], const float *base, size_t n,
			      const uint32_t *sizes, size_t steps, const uint32_t *idx, size_t k,
			      uint8_t **frame, size_t *len)
{
	return fleet_codec_encode_replay_samples(hash, base, n, sizes, steps, idx, k, NULL, frame, len);
}

int fleet_codec_encode_replay_samples(const uint8_t hash[FLEET_HASH_BYTES], const float *base,
				      size_t n, const uint32_t *sizes, size_t steps, const uint32_t *idx,
				      size_t k, const struct fleet_replay_samples *smp, uint8_t **frame,
				      size_t *len)
{
	uint8_t base_hash[FLEET_HASH_BYTES];
	uint8_t *raw;
	size_t sum = 0, words, extra = 0, m = smp ? smp->m : 0;
	uint32_t w;
	int rc;

	if (n == 0 || n > LIMITS_MAX_PARAMS || !base || steps == 0 || steps > k ||
	    k > FLEET_CODEC_REPLAY_MAX || m > k)
		return -EINVAL;
	for (size_t s = 0; s < steps; s++) {
		if (!sizes[s])
			return -EINVAL;
		sum += sizes[s];
	}
	if (sum != k)
		return -EINVAL;
	if (m) {
		if (smp->dim == 0 || smp->dim > FLEET_CODEC_SAMPLE_DIM_MAX)
			return -EINVAL;
		for (size_t i = 1; i < m; i++)
			if (smp->pos[i] <= smp->pos[i - 1])
				return -EINVAL;
		extra = 8 + m * (4 + 1 + (size_t)smp->dim);
	}
	if ((rc = fleet_hash(base, n, base_hash)) < 0)
		return rc;
	words = 1 + steps + k;
	raw = malloc(words * 4 + extra);
	if (!raw)
		return -ENOMEM;
	w = (uint32_t)steps;
	memcpy(raw, &w, 4);
	memcpy(raw + 4, sizes, steps * 4);
	memcpy(raw + 4 + steps * 4, idx, k * 4);
	if (m) {
		uint8_t *p = raw + words * 4;
		uint32_t hd[2] = { (uint32_t)m, smp->dim };

		memcpy(p, hd, 8);
		memcpy(p + 8, smp->pos, m * 4);
		memcpy(p + 8 + m * 4, smp->labels, m);
		memcpy(p + 8 + m * 5, smp->pixels, m * smp->dim);
	}
	rc = frame_build(FLEET_REPLAY, (uint32_t)n, (uint32_t)k, raw, words * 4 + extra, base_hash, hash,
			 frame, len);
	free(raw);
	return rc;
}

int fleet_codec_replay_parse(const uint8_t *frame, size_t len, const float *base, size_t n,
			     uint32_t **sizes, size_t *steps, uint32_t **idx, size_t *k)
{
	struct fleet_replay_samples smp;
	int rc = fleet_codec_replay_parse_samples(frame, len, base, n, sizes, steps, idx, k, &smp);

	fleet_codec_replay_samples_free(&smp);
	return rc;
}

int fleet_codec_replay_parse_samples(const uint8_t *frame, size_t len, const float *base, size_t n,
				     uint32_t **sizes, size_t *steps, uint32_t **idx, size_t *k,
				     struct fleet_replay_samples *smp)
{
	struct fleet_frame_info in;
	struct fleet_replay_samples out = { 0 };
	uint8_t h[FLEET_HASH_BYTES];
	const uint8_t *payload = frame + FLEET_CODEC_HEADER_BYTES;
	uint8_t *raw = NULL;
	uint32_t *sz = NULL, *ix = NULL, ns32;
	uint64_t sum = 0, words;
	size_t got, ns;
	int rc;

	memset(smp, 0, sizeof *smp);
	if ((rc = fleet_codec_peek(frame, len, &in)) < 0)
		return rc;
	if (in.strategy != FLEET_REPLAY || in.n != n)
		return -EBADMSG;
	if (!base)
		return -ESTALE;
	if ((rc = fleet_hash(base, n, h)) < 0)
		return rc;
	if (memcmp(h, in.base_hash, FLEET_HASH_BYTES))
		return -ESTALE;
	if (in.raw_len < 4 || ZSTD_getFrameContentSize(payload, in.comp_len) != in.raw_len ||
	    ZSTD_findFrameCompressedSize(payload, in.comp_len) != in.comp_len)
		return -EBADMSG;
	raw = malloc(in.raw_len);
	if (!raw)
		return -ENOMEM;
	rc = -EBADMSG;
	got = ZSTD_decompress(raw, in.raw_len, payload, in.comp_len);
	if (ZSTD_isError(got) || got != in.raw_len)
		goto out;
	memcpy(&ns32, raw, 4);
	ns = ns32;
	words = 1 + (uint64_t)ns + in.k;
	if (ns == 0 || ns > in.k || words * 4 > in.raw_len ||
	    (words * 4 < in.raw_len && in.raw_len - words * 4 < 8))
		goto out;
	if (words * 4 < in.raw_len) {
		/* the raw samples section, exactly: m, dim, positions, labels, pixels */
		const uint8_t *p = raw + words * 4;
		uint64_t left = in.raw_len - words * 4;
		uint32_t hd[2];

		if (left < 8)
			goto out;
		memcpy(hd, p, 8);
		out.m = hd[0];
		out.dim = hd[1];
		if (out.m == 0 || out.m > in.k || out.dim == 0 ||
		    out.dim > FLEET_CODEC_SAMPLE_DIM_MAX ||
		    8 + (uint64_t)out.m * (5 + (uint64_t)out.dim) != left)
			goto out;
		out.pos = malloc((size_t)out.m * 4);
		out.labels = malloc(out.m);
		out.pixels = malloc((size_t)out.m * out.dim);
		if (!out.pos || !out.labels || !out.pixels) {
			rc = -ENOMEM;
			goto out;
		}
		memcpy(out.pos, p + 8, (size_t)out.m * 4);
		memcpy(out.labels, p + 8 + (size_t)out.m * 4, out.m);
		memcpy(out.pixels, p + 8 + (size_t)out.m * 5, (size_t)out.m * out.dim);
		for (uint32_t i = 1; i < out.m; i++)
			if (out.pos[i] <= out.pos[i - 1])
				goto out;
	}
	sz = malloc(ns * 4);
	ix = malloc((size_t)in.k * 4);
	if (!sz || !ix) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(sz, raw + 4, ns * 4);
	memcpy(ix, raw + 4 + ns * 4, (size_t)in.k * 4);
	for (size_t s = 0; s < ns; s++) {
		if (!sz[s])
			goto out;
		sum += sz[s];
	}
	if (sum != in.k)
		goto out;
	*sizes = sz;
	*idx = ix;
	*steps = ns;
	*k = in.k;
	*smp = out;
	memset(&out, 0, sizeof out);
	sz = ix = NULL;
	rc = 0;
out:
	free(raw);
	free(sz);
	free(ix);
	fleet_codec_replay_samples_free(&out);
	return rc;
}
