/* node/fleet_codec: how one version of a device's model travels and is stored (pure: no I/O,
 * no clock).
 *
 * A frame is a fixed 104-byte header followed by one zstd frame. Header (little-endian):
 *
 *   off size field
 *    0   4   magic       FLEET_CODEC_MAGIC ("SNF1")
 *    4   1   strategy    enum fleet_strategy (full, delta, sparse)
 *    5   1   version     FLEET_CODEC_VERSION
 *    6   2   reserved    zero
 *    8   4   n           floats in the model
 *   12   4   k           sparse: entries carried; otherwise 0
 *   16   4   raw_len     bytes of the decompressed payload (4n, or 8k for sparse)
 *   20   4   comp_len    bytes of the zstd frame that follows (the rest of the frame)
 *   24  32   base_hash   BLAKE2b-256 of the base the frame applies to (zero for full)
 *   56  32   hash        BLAKE2b-256 of the model the frame decodes to
 *   88  16   check       BLAKE2b-128 of bytes 0..87 and the zstd frame (any flipped bit,
 *                        even one zstd would ignore, rejects the frame before decoding)
 *
 * Payloads: `full` is the float32 vector as is; `delta` is the XOR of each float's bit pattern
 * with the base's, split into four byte planes (all lowest bytes, then the next...), so the
 * sign/exponent plane, nearly all zero after fine-tuning, compresses apart from the noisy
 * mantissa; `sparse` is k strictly increasing indices (as gaps) then the k XOR patterns of the
 * new values, both byte-planed. Decoding is lossless for all three: the decoded vector's hash
 * must equal the header's, so any corruption the checks before it miss is caught there.
 *
 * `replay` carries no weights but how to recompute them: the minibatches of the SGD steps since
 * the base, as sample positions in the device's training share (a u32 step count, one u32
 * size per step, then the positions; k = positions). fleet_codec_decode cannot apply it (it
 * needs the data and the model): fleet_codec_replay_parse checks it and returns the steps, the
 * caller recomputes, and the header's hash says whether the recomputation is the device's model.
 * A replay may also carry raw samples the registry lacks (samples that joined the device's share
 * after deployment, node/fleet_drift): after the positions, a u32 count m, a u32 sample size
 * dim, m strictly increasing u32 share positions, m labels (bytes) and m * dim pixel bytes; the
 * recomputation takes a position listed there from the frame, any other from its own share.
 *
 * Sparse with error feedback (top-k of the delta): the device adds its residual to its model,
 * keeps the k largest changes against the base, ADOPTS base + those changes as its own model and
 * keeps what it did not send as the new residual. Registry and device then hold bit-identical
 * vectors, and nothing the device learned is dropped, only delayed. */
#ifndef STALENET_FLEET_CODEC_H
#define STALENET_FLEET_CODEC_H

#include <stddef.h>
#include <stdint.h>

#define FLEET_CODEC_MAGIC 0x31464e53u /* "SNF1" as little-endian bytes */
#define FLEET_CODEC_VERSION 1
#define FLEET_CODEC_HEADER_BYTES 104
#define FLEET_HASH_BYTES 32
#define FLEET_CODEC_SAMPLE_DIM_MAX 4096 /* bytes of one raw sample a replay may carry */

enum fleet_strategy {
	FLEET_FULL = 1,
	FLEET_DELTA,
	FLEET_SPARSE,
	FLEET_REPLAY,
	FLEET_STRATEGY_END
};

/* What a frame's header says; filled by fleet_codec_peek. */
struct fleet_frame_info {
	enum fleet_strategy strategy;
	uint32_t n, k, raw_len, comp_len;
	uint8_t base_hash[FLEET_HASH_BYTES];
	uint8_t hash[FLEET_HASH_BYTES];
};

/* "full", "delta", "sparse", "replay"; NULL for anything else. */
const char *fleet_strategy_name(enum fleet_strategy s);
/* Name -> strategy. Returns 0 or -EINVAL. */
int fleet_strategy_parse(const char *name, enum fleet_strategy *out);

/* BLAKE2b-256 of the n floats' bytes (little-endian float32) into out. Returns 0 or -EIO. */
int fleet_hash(const float *w, size_t n, uint8_t out[FLEET_HASH_BYTES]);

/* Largest frame a model of n floats can encode to (any strategy); 0 when n is too large. */
size_t fleet_codec_frame_max(size_t n);

/* Encode model (n floats) as FLEET_FULL or FLEET_DELTA (against base, n floats; unused for
 * full). *frame gets a malloc'd frame the caller frees, *len its size. Returns 0, -EINVAL
 * (bad strategy, n 0 or over LIMITS_MAX_PARAMS, delta without base), -ENOMEM or -EIO. */
int fleet_codec_encode(enum fleet_strategy s, const float *model, const float *base, size_t n,
		       uint8_t **frame, size_t *len);

/* Sparse encode with error feedback: t = model + residual; the k entries where |t - base| is
 * largest (ties by lower index) get t, the others keep base; model becomes that vector (the one
 * the frame decodes to) and residual becomes t - model. k is clamped to n. Returns like
 * fleet_codec_encode. */
int fleet_codec_encode_sparse(float *model, const float *base, float *residual, size_t n, size_t k,
			      uint8_t **frame, size_t *len);

/* A replay frame for a model of n floats whose hash is `hash`, made against base (n floats):
 * steps minibatches, sizes[s] positions each, positions idx (k = the sum of sizes). Returns like
 * fleet_codec_encode. */
int fleet_codec_encode_replay(const uint8_t hash[FLEET_HASH_BYTES], const float *base, size_t n,
			      const uint32_t *sizes, size_t steps, const uint32_t *idx, size_t k,
			      uint8_t **frame, size_t *len);

/* Raw samples carried by a replay frame: m samples of dim bytes at share positions pos[]
 * (strictly increasing), their labels and pixels (row-major). */
struct fleet_replay_samples {
	uint32_t m, dim;
	uint32_t *pos;
	uint8_t *labels, *pixels;
};

/* Release what fleet_codec_replay_parse_samples allocated in *s; idempotent. */
void fleet_codec_replay_samples_free(struct fleet_replay_samples *s);

/* fleet_codec_encode_replay with raw samples (smp NULL or smp->m 0: none). -EINVAL also for
 * positions not strictly increasing, dim 0 or above FLEET_CODEC_SAMPLE_DIM_MAX. */
int fleet_codec_encode_replay_samples(const uint8_t hash[FLEET_HASH_BYTES], const float *base,
				      size_t n, const uint32_t *sizes, size_t steps, const uint32_t *idx,
				      size_t k, const struct fleet_replay_samples *smp, uint8_t **frame,
				      size_t *len);

/* fleet_codec_replay_parse that also returns the raw samples into *smp (malloc'd arrays, free
 * with fleet_codec_replay_samples_free; m 0 when the frame carries none). A samples section
 * that does not add up is -EBADMSG. */
int fleet_codec_replay_parse_samples(const uint8_t *frame, size_t len, const float *base, size_t n,
				     uint32_t **sizes, size_t *steps, uint32_t **idx, size_t *k,
				     struct fleet_replay_samples *smp);

/* Check a replay frame against base (n floats) and return its steps: *sizes (steps entries)
 * and *idx (the positions), both malloc'd (the caller frees them); raw samples, if the frame
 * carries any, are checked and dropped. Returns 0, -EBADMSG (corrupt,
 * not a replay frame, sizes that do not add up or a step of 0 samples), -ESTALE (another base),
 * -ENOMEM. */
int fleet_codec_replay_parse(const uint8_t *frame, size_t len, const float *base, size_t n,
			     uint32_t **sizes, size_t *steps, uint32_t **idx, size_t *k);

/* Check and parse a frame's header (sizes consistent with len). Returns 0 or -EBADMSG. */
int fleet_codec_peek(const uint8_t *frame, size_t len, struct fleet_frame_info *info);

/* Decode a frame of a model of n floats into out (n floats) against base (n floats; may be
 * NULL for a full frame). Returns 0; -EBADMSG when the frame is corrupt, truncated or for
 * another size; -ESTALE when base is not the base the frame was made against; -ENOTSUP for a
 * replay frame (see fleet_codec_replay_parse); -ENOMEM. out is garbage on failure. */
int fleet_codec_decode(const uint8_t *frame, size_t len, const float *base, size_t n, float *out);

#endif
