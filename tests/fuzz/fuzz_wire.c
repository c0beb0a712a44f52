/* Fuzz the wire decoder from raw bytes. Input layout: 2 bytes little-endian header length h,
 * then h bytes of header frame, then the rest as the payload frame. Whatever decodes must
 * re-encode to the same header bytes (the decoder accepts exactly what the encoder emits), and
 * carry only finite floats. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "node/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_header h;
	uint8_t again[WIRE_HEADER_BYTES];
	size_t hlen, plen;
	const uint8_t *hdr, *pay;
	uint8_t *hcopy, *pcopy;

	if (size < 2)
		return 0;
	hlen = (size_t)data[0] | (size_t)data[1] << 8;
	if (hlen > size - 2)
		hlen = size - 2;
	hdr = data + 2;
	pay = hdr + hlen;
	plen = size - 2 - hlen;
	/* Exact-size heap copies so ASan sees any over-read. */
	hcopy = malloc(hlen ? hlen : 1);
	pcopy = malloc(plen ? plen : 1);
	memcpy(hcopy, hdr, hlen);
	memcpy(pcopy, pay, plen);
	if (wire_decode(hcopy, hlen, plen ? pcopy : NULL, plen, 1u << 16, &h) == 0) {
		if (h.type == 0 || h.type >= WIRE_TYPE_END || h.payload_len != plen || plen % 4)
			abort();
		for (size_t i = 0; i + 4 <= plen; i += 4) {
			float f;

			memcpy(&f, pcopy + i, 4);
			if (!isfinite(f))
				abort();
		}
		wire_header_encode(&h, plen ? pcopy : NULL, again);
		if (memcmp(again, hcopy, WIRE_HEADER_BYTES) != 0)
			abort();
	}
	free(hcopy);
	free(pcopy);
	return 0;
}
