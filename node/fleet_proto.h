/* node/fleet_proto: the messages between a fleet's devices and its registry (pure: encode and
 * validate bytes, no sockets).
 *
 * A message is one header frame of exactly FLEET_PROTO_HEADER_BYTES and, when payload_len is
 * non-zero, one payload frame of exactly that many bytes (a node/fleet_codec frame, which checks
 * itself). On the registry's ROUTER socket a routing-id frame precedes them. Header
 * (little-endian, no padding):
 *
 *   off size field
 *    0   4   magic        FLEET_PROTO_MAGIC ("SNP1")
 *    4   2   type         enum fleet_msg_type
 *    6   2   reserved     zero
 *    8   4   device       device index
 *   12   4   payload_len  bytes of the payload frame (0 = none)
 *   16   8   version      HELLO: the device's last version; DEPLOY: the version the payload is;
 *                         SYNC: the version sent; ACK: the version answered (the peer messages
 *                         below say what their fields carry)
 *   24   8   parent       SYNC: the version it was made against; ACK/DEPLOY: the registry's
 *                         latest stored version of the device
 *   32   8   aux          ACK: enum fleet_ack_status; DEPLOY: chain length of that version
 *   40   8   t_sent       SYNC: run seconds when the device made the version
 *   48   8   encode_s     SYNC: seconds the device spent encoding it
 *   56   8   check        wire_hash64 of bytes 0..55
 *
 * The payload's own checks (fleet_codec) cover its bytes; the header's check covers the
 * rest, so a flipped bit anywhere is caught. */
#ifndef STALENET_FLEET_PROTO_H
#define STALENET_FLEET_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define FLEET_PROTO_MAGIC 0x31504e53u /* "SNP1" as little-endian bytes */
#define FLEET_PROTO_HEADER_BYTES 64

enum fleet_msg_type {
	FLEET_MSG_HELLO = 1, /* device -> registry: I am (re)starting; send my model */
	FLEET_MSG_DEPLOY,    /* registry -> device: your latest stored model (a full frame) */
	FLEET_MSG_SYNC,      /* device -> registry: one version (a frame against `parent`) */
	FLEET_MSG_ACK,       /* registry -> device: what became of version `version` */
	FLEET_MSG_BYE,       /* either way: the run is over */
	/* fleet.registry peers (docs/fleet.md): */
	FLEET_MSG_PEER_SYNC, /* device -> peer device: one of the sender's versions (as SYNC) */
	FLEET_MSG_PEER_ACK,  /* peer -> device: version not taken (out of order); parent = the
			      * peer's latest of the sender: the next version goes full */
	FLEET_MSG_SUMMARY_REQ, /* registry -> device: list what you hold of your peers, from the
				* entry after (aux = device, version) */
	FLEET_MSG_SUMMARY,   /* device -> registry: a node/fleet_sync summary chunk; aux 1 = last */
	FLEET_MSG_PULL,      /* registry -> device: send device aux's version `version`; parent 1 =
			      * as a full frame (the registry lacks its parent) */
	FLEET_MSG_PULLED,    /* device -> registry: aux = the device it belongs to, version, parent
			      * (the version the frame applies to), payload the frame (none: not held) */
	FLEET_MSG_TYPE_END
};

enum fleet_ack_status {
	FLEET_ACK_STORED = 0,   /* committed to the store now */
	FLEET_ACK_DUPLICATE,    /* committed before (a resent copy) */
	FLEET_ACK_REJECTED,     /* the frame did not verify: send it again */
	FLEET_ACK_OUT_OF_ORDER, /* not the next version: send from parent + 1 (the registry's latest) */
	FLEET_ACK_CONFLICT,     /* another model is stored under this version */
	FLEET_ACK_REPLAY_FAILED, /* recomputing a replay frame did not give its hash: send the
				  * version's weights (its queued frame) instead */
	FLEET_ACK_END
};

struct fleet_msg {
	uint16_t type;
	uint32_t device;
	uint32_t payload_len;
	int64_t version, parent, aux;
	double t_sent, encode_s;
};

/* Serialize m into out (check included). */
void fleet_proto_encode(const struct fleet_msg *m, uint8_t out[FLEET_PROTO_HEADER_BYTES]);

/* Validate a header frame of len bytes: size, magic, reserved, type, check, payload_len <=
 * max_payload, versions >= 0, finite times. Returns 0 with *m filled, or -EBADMSG. */
int fleet_proto_decode(const uint8_t *buf, size_t len, size_t max_payload, struct fleet_msg *m);

/* "hello", "deploy", ...; "?" for an unknown type. */
const char *fleet_proto_type_name(int type);

#endif
