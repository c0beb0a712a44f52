/* node/fleet_proto: see fleet_proto.h. */
#include "node/fleet_proto.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "node/wire.h"

static const char *const names[FLEET_MSG_TYPE_END] = {
	[FLEET_MSG_HELLO] = "hello", [FLEET_MSG_DEPLOY] = "deploy", [FLEET_MSG_SYNC] = "sync",
	[FLEET_MSG_ACK] = "ack",     [FLEET_MSG_BYE] = "bye",
	[FLEET_MSG_PEER_SYNC] = "peer_sync", [FLEET_MSG_PEER_ACK] = "peer_ack",
	[FLEET_MSG_SUMMARY_REQ] = "summary_req", [FLEET_MSG_SUMMARY] = "summary",
	[FLEET_MSG_PULL] = "pull", [FLEET_MSG_PULLED] = "pulled",
};

const char *fleet_proto_type_name(int type)
{
	return type >= FLEET_MSG_HELLO && type < FLEET_MSG_TYPE_END ? names[type] : "?";
}

void fleet_proto_encode(const struct fleet_msg *m, uint8_t out[FLEET_PROTO_HEADER_BYTES])
{
	uint32_t magic = FLEET_PROTO_MAGIC;
	uint16_t zero = 0;
	uint64_t check;

	memcpy(out, &magic, 4);
	memcpy(out + 4, &m->type, 2);
	memcpy(out + 6, &zero, 2);
	memcpy(out + 8, &m->device, 4);
	memcpy(out + 12, &m->payload_len, 4);
	memcpy(out + 16, &m->version, 8);
	memcpy(out + 24, &m->parent, 8);
	memcpy(out + 32, &m->aux, 8);
	memcpy(out + 40, &m->t_sent, 8);
	memcpy(out + 48, &m->encode_s, 8);
	check = wire_hash64(out, 56, 0);
	memcpy(out + 56, &check, 8);
}

int fleet_proto_decode(const uint8_t *buf, size_t len, size_t max_payload, struct fleet_msg *m)
{
	struct fleet_msg d;
	uint32_t magic;
	uint16_t reserved;
	uint64_t check;

	if (!buf || len != FLEET_PROTO_HEADER_BYTES)
		return -EBADMSG;
	memcpy(&magic, buf, 4);
	memcpy(&check, buf + 56, 8);
	if (magic != FLEET_PROTO_MAGIC || check != wire_hash64(buf, 56, 0))
		return -EBADMSG;
	memcpy(&d.type, buf + 4, 2);
	memcpy(&reserved, buf + 6, 2);
	memcpy(&d.device, buf + 8, 4);
	memcpy(&d.payload_len, buf + 12, 4);
	memcpy(&d.version, buf + 16, 8);
	memcpy(&d.parent, buf + 24, 8);
	memcpy(&d.aux, buf + 32, 8);
	memcpy(&d.t_sent, buf + 40, 8);
	memcpy(&d.encode_s, buf + 48, 8);
	if (reserved || d.type < FLEET_MSG_HELLO || d.type >= FLEET_MSG_TYPE_END ||
	    d.payload_len > max_payload || d.version < 0 || d.parent < 0 || !isfinite(d.t_sent) ||
	    !isfinite(d.encode_s))
		return -EBADMSG;
	*m = d;
	return 0;
}
