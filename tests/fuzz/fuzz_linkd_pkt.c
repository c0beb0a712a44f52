/* Fuzz the emulator's packet-message parser (netem/linkd_pkt) from raw bytes read as one netlink
 * message: a packet that parses must point inside the message, with a real length no shorter
 * than its copy and "whole" exactly when the copy is the packet; a verdict carrying that copy
 * must have the size linkd_pkt_verdict_size promises. The bytes also drive the held-id order
 * (hold / done) against a small naive list, which must agree on which id is the oldest. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netem/linkd_pkt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void order_ops(const uint8_t *data, size_t size)
{
	struct linkd_pkt_order o;
	uint32_t held[512], next = 0xfffffff0u;
	size_t n = 0;

	if (linkd_pkt_order_init(&o, 64) < 0)
		return;
	for (size_t i = 0; i < size; i++) {
		uint8_t b = data[i];
		if ((b & 1) && n < 512) {
			next += (uint32_t)(b >> 5); /* a gap: ids answered at once */
			if (linkd_pkt_order_hold(&o, next) < 0)
				abort();
			held[n++] = next++;
		} else if (n) {
			size_t k = (size_t)(b >> 1) % n;
			uint32_t id = held[k];
			bool oldest = k == 0;
			if (linkd_pkt_order_done(&o, id) != oldest)
				abort();
			memmove(held + k, held + k + 1, (n - k - 1) * sizeof held[0]);
			n--;
			if (o.n != n || (n && o.base != held[0]))
				abort();
		}
	}
	linkd_pkt_order_free(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct linkd_pkt p;
	int rc = linkd_pkt_parse(data, size, &p);

	if (rc == 1) {
		if (p.data && (p.data < data || p.data + p.data_len > data + size))
			abort();
		if (p.len < p.data_len || p.whole != (p.data && p.data_len == p.len))
			abort();
		static uint8_t out[70000];
		size_t w = linkd_pkt_verdict_put(out, sizeof out, 1, p.id, 1, p.data, p.data_len);
		if (p.data_len <= 65000 && w != linkd_pkt_verdict_size(p.data ? p.data_len : 0))
			abort();
	} else if (rc != 0 && rc != -74 /* -EBADMSG */) {
		abort();
	}
	order_ops(data, size < 4096 ? size : 4096);
	return 0;
}
