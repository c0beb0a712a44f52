/* Fuzz the fleet decoders: node/fleet_codec (decode and replay parse) and node/fleet_proto.
 * Input: byte 0 picks the model size n (1..64), byte 1 bit 0 whether the base hash in the
 * frame is made right, the rest is a frame. The fuzzer fixes up the frame's check (and, per
 * byte 1, its base hash) so that mutations reach the zstd payload, the byte planes, the sparse
 * index walk and the replay sizes instead of all dying at the check. Whatever decodes must hash
 * to the header's hash; whatever parses as a replay must add up. */
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "node/fleet_codec.h"
#include "node/fleet_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	float base[64], out[64];
	uint8_t h[FLEET_HASH_BYTES], *f;
	struct fleet_msg m;
	size_t n, len;
	uint32_t *sizes = NULL, *idx = NULL;
	size_t steps, k;

	if (size < 2 || sodium_init() < 0)
		return 0;
	n = 1 + data[0] % 64;
	for (size_t i = 0; i < n; i++)
		base[i] = (float)i * 0.5f - 3.0f;
	len = size - 2;
	f = malloc(len ? len : 1);
	memcpy(f, data + 2, len);
	(void)fleet_proto_decode(f, len, 1u << 20, &m);
	if (len >= FLEET_CODEC_HEADER_BYTES) {
		crypto_generichash_state st;

		if (data[1] & 1) {
			fleet_hash(base, n, h);
			memcpy(f + 24, h, FLEET_HASH_BYTES);
		}
		crypto_generichash_init(&st, NULL, 0, 16);
		crypto_generichash_update(&st, f, 88);
		crypto_generichash_update(&st, f + FLEET_CODEC_HEADER_BYTES, len - FLEET_CODEC_HEADER_BYTES);
		crypto_generichash_final(&st, f + 88, 16);
	}
	if (fleet_codec_decode(f, len, base, n, out) == 0) {
		struct fleet_frame_info in;

		if (fleet_codec_peek(f, len, &in) != 0 || fleet_hash(out, n, h) != 0 ||
		    memcmp(h, in.hash, FLEET_HASH_BYTES))
			abort();
	}
	if (fleet_codec_replay_parse(f, len, base, n, &sizes, &steps, &idx, &k) == 0) {
		size_t sum = 0;

		for (size_t s = 0; s < steps; s++) {
			if (!sizes[s])
				abort();
			sum += sizes[s];
		}
		if (sum != k)
			abort();
		free(sizes);
		free(idx);
	}
	{
		struct fleet_replay_samples smp;

		/* raw samples, when parsed: at most k, positions strictly increasing */
		if (fleet_codec_replay_parse_samples(f, len, base, n, &sizes, &steps, &idx, &k, &smp) == 0) {
			if (smp.m > k || (smp.m && (!smp.dim || smp.dim > FLEET_CODEC_SAMPLE_DIM_MAX)))
				abort();
			for (uint32_t i = 1; i < smp.m; i++)
				if (smp.pos[i] <= smp.pos[i - 1])
					abort();
			free(sizes);
			free(idx);
			fleet_codec_replay_samples_free(&smp);
		}
	}
	free(f);
	return 0;
}
