/* node/fleet_net: see fleet_net.h. */
#include "node/fleet_net.h"

#include <errno.h>
#include <string.h>

void fleet_net_msg_close(struct fleet_net_msg *m)
{
	if (m->has_pay)
		zmq_msg_close(&m->pay);
	m->has_pay = false;
}

const uint8_t *fleet_net_msg_payload(struct fleet_net_msg *m)
{
	return m->has_pay ? zmq_msg_data(&m->pay) : NULL;
}

int fleet_net_send(void *sock, const uint8_t *id, size_t idlen, const struct fleet_msg *h,
		    const void *payload, uint64_t *bytes)
{
	uint8_t raw[FLEET_PROTO_HEADER_BYTES];
	int more = h->payload_len ? ZMQ_SNDMORE : 0;

	fleet_proto_encode(h, raw);
	if (id && zmq_send(sock, id, idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
		return -zmq_errno();
	if (zmq_send(sock, raw, sizeof raw, more | ZMQ_DONTWAIT) < 0)
		return -zmq_errno();
	if (more && zmq_send(sock, payload, h->payload_len, ZMQ_DONTWAIT) < 0)
		return -zmq_errno();
	if (bytes)
		*bytes += sizeof raw + h->payload_len;
	return 0;
}

int fleet_net_recv(void *sock, bool router, size_t max_payload, int timeout_ms, struct fleet_net_msg *m,
		    uint64_t *bad, uint64_t *bytes)
{
	zmq_pollitem_t pi = { .socket = sock, .events = ZMQ_POLLIN };
	zmq_msg_t part[3];
	size_t nparts = 0, want_hdr = router ? 1 : 0;
	bool ok = true;
	int more = 0, rc;
	size_t ml = sizeof more;

	memset(m, 0, sizeof *m);
	rc = zmq_poll(&pi, 1, timeout_ms);
	if (rc < 0)
		return zmq_errno() == EINTR ? 0 : -zmq_errno();
	if (!(pi.revents & ZMQ_POLLIN))
		return 0;
	do {
		zmq_msg_t tmp;

		zmq_msg_init(&tmp);
		if (zmq_msg_recv(&tmp, sock, ZMQ_DONTWAIT) < 0) {
			int e = zmq_errno();

			zmq_msg_close(&tmp);
			for (size_t i = 0; i < nparts; i++)
				zmq_msg_close(&part[i]);
			return e == EAGAIN || e == EINTR ? 0 : -e;
		}
		zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &ml);
		if (bytes)
			*bytes += zmq_msg_size(&tmp);
		if (nparts < 3)
			part[nparts++] = tmp;
		else {
			ok = false;
			zmq_msg_close(&tmp);
		}
	} while (more);
	if (router) {
		size_t il = zmq_msg_size(&part[0]);

		if (il == 0 || il > sizeof m->id)
			ok = false;
		else {
			memcpy(m->id, zmq_msg_data(&part[0]), il);
			m->idlen = il;
		}
	}
	if (ok && nparts > want_hdr &&
	    fleet_proto_decode(zmq_msg_data(&part[want_hdr]), zmq_msg_size(&part[want_hdr]), max_payload,
			       &m->h) == 0) {
		size_t extra = nparts - want_hdr - 1;

		if (m->h.payload_len == 0 && extra == 0) {
			ok = true;
		} else if (m->h.payload_len > 0 && extra == 1 &&
			   zmq_msg_size(&part[want_hdr + 1]) == m->h.payload_len) {
			zmq_msg_init(&m->pay);
			zmq_msg_move(&m->pay, &part[want_hdr + 1]);
			m->has_pay = true;
		} else {
			ok = false;
		}
	} else {
		ok = false;
	}
	for (size_t i = 0; i < nparts; i++)
		zmq_msg_close(&part[i]);
	if (!ok) {
		fleet_net_msg_close(m);
		(*bad)++;
		return 0;
	}
	return 1;
}
