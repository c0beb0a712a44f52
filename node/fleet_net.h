/* node/fleet_net: one node/fleet_proto message over a ZeroMQ socket of topology fleet (a
 * header frame, an optional payload frame; a routing-id frame first on a ROUTER). Never
 * blocks on a send; a malformed message is consumed and counted, never returned. */
#ifndef STALENET_FLEET_NET_H
#define STALENET_FLEET_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "node/fleet_proto.h"

/* A received message: its header, the sender's routing id (ROUTER) and its payload. */
struct fleet_net_msg {
	struct fleet_msg h;
	uint8_t id[64];
	size_t idlen;
	zmq_msg_t pay;
	bool has_pay;
};

/* Release m's payload (idempotent). */
void fleet_net_msg_close(struct fleet_net_msg *m);
/* m's payload bytes (h.payload_len of them), or NULL when it has none. */
const uint8_t *fleet_net_msg_payload(struct fleet_net_msg *m);
/* Send header h and its h->payload_len payload bytes on sock (id/idlen: the routing id, ROUTER
 * only; NULL otherwise) without blocking; *bytes (may be NULL) counts what went. Returns 0 or
 * negative errno (-EAGAIN when it would block, -EHOSTUNREACH for an unknown routing id). */
int fleet_net_send(void *sock, const uint8_t *id, size_t idlen, const struct fleet_msg *h,
		   const void *payload, uint64_t *bytes);
/* Receive one whole message (waiting up to timeout_ms). 1 with *m (close it), 0 when none came,
 * negative errno on a socket error. A malformed message is consumed and counted in *bad;
 * *bytes (may be NULL) counts every frame read. */
int fleet_net_recv(void *sock, bool router, size_t max_payload, int timeout_ms,
		   struct fleet_net_msg *m, uint64_t *bad, uint64_t *bytes);

#endif
