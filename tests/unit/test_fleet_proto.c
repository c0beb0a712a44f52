/* node/fleet_proto: round trip at the documented offsets, every single-bit flip and every
 * wrong size refused, field rules. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "node/fleet_proto.h"

Test(fleet_proto, roundtrip_and_flips)
{
	struct fleet_msg m = { .type = FLEET_MSG_SYNC, .device = 7, .payload_len = 1234, .version = 42,
			       .parent = 41, .aux = -3, .t_sent = 12.5, .encode_s = 0.25 }, g;
	uint8_t raw[FLEET_PROTO_HEADER_BYTES];
	int64_t v;

	fleet_proto_encode(&m, raw);
	cr_assert_eq(memcmp(raw, "SNP1", 4), 0);
	memcpy(&v, raw + 16, 8);
	cr_assert_eq(v, 42);
	cr_assert_eq(fleet_proto_decode(raw, sizeof raw, 1 << 20, &g), 0);
	cr_assert_eq(g.type, m.type);
	cr_assert_eq(g.device, 7);
	cr_assert_eq(g.payload_len, 1234);
	cr_assert_eq(g.parent, 41);
	cr_assert_eq(g.aux, -3);
	cr_assert_eq(g.t_sent, 12.5);
	cr_assert_eq(g.encode_s, 0.25);
	for (size_t i = 0; i < sizeof raw; i++)
		for (int b = 0; b < 8; b++) {
			raw[i] ^= (uint8_t)(1u << b);
			cr_assert_eq(fleet_proto_decode(raw, sizeof raw, 1 << 20, &g), -EBADMSG,
				     "flip %zu.%d", i, b);
			raw[i] ^= (uint8_t)(1u << b);
		}
	cr_assert_eq(fleet_proto_decode(raw, sizeof raw - 1, 1 << 20, &g), -EBADMSG);
	cr_assert_eq(fleet_proto_decode(raw, sizeof raw, 1233, &g), -EBADMSG); /* payload too big */
	cr_assert_str_eq(fleet_proto_type_name(FLEET_MSG_ACK), "ack");
	cr_assert_str_eq(fleet_proto_type_name(99), "?");
}

Test(fleet_proto, field_rules)
{
	uint8_t raw[FLEET_PROTO_HEADER_BYTES];
	struct fleet_msg g, bad[] = {
		{ .type = 0 },
		{ .type = FLEET_MSG_TYPE_END },
		{ .type = FLEET_MSG_SYNC, .version = -1 },
		{ .type = FLEET_MSG_SYNC, .parent = -1 },
		{ .type = FLEET_MSG_SYNC, .t_sent = NAN },
		{ .type = FLEET_MSG_SYNC, .encode_s = INFINITY },
	};

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		fleet_proto_encode(&bad[i], raw);
		cr_assert_eq(fleet_proto_decode(raw, sizeof raw, 100, &g), -EBADMSG, "case %zu", i);
	}
}
