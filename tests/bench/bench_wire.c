/* bench_wire: throughput of node/wire against raw ZeroMQ for an 814 KB float payload (the
 * 203,530 parameters of the 784-256-10 MLP) over tcp on 127.0.0.1, unshaped.
 *
 *   stream   one-way PUSH -> PULL: raw zmq_send/zmq_msg_recv vs wire_send/wire_recv
 *            (header frame + zero-copy payload + checksum on both sides)
 *   ps       the parameter-server pattern on DEALER <-> ROUTER: PULL -> MODEL(payload),
 *            PUSH(payload) -> ACK, raw frames vs wire messages
 * Prints GB/s of payload for each and the wire/raw ratio. Nothing is asserted. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "lib/clock.h"
#include "node/wire.h"

#define NFLOATS 203530
#define PBYTES (NFLOATS * 4)

static int iters = 400;
static void *ctx;

struct peer {
	const char *ep;
	int mode; /* 0 raw, 1 wire */
};

static void *stream_rx(void *arg)
{
	struct peer *p = arg;
	void *s = zmq_socket(ctx, ZMQ_PULL);

	wire_socket_setup(s, PBYTES + 1024);
	zmq_connect(s, p->ep);
	for (int i = 0; i < iters; i++) {
		if (p->mode == 0) {
			zmq_msg_t m;

			zmq_msg_init(&m);
			zmq_msg_recv(&m, s, 0);
			zmq_msg_close(&m);
		} else {
			struct wire_msg m;

			if (wire_recv(s, false, PBYTES, -1, &m, NULL) != 1 || m.n != NFLOATS)
				abort();
			wire_msg_close(&m);
		}
	}
	zmq_close(s);
	return NULL;
}

static double stream(int mode)
{
	void *s = zmq_socket(ctx, ZMQ_PUSH);
	char ep[64];
	size_t eplen = sizeof ep;
	struct peer p = { ep, mode };
	struct wire_buf *buf = wire_buf_new(NFLOATS);
	pthread_t th;
	int64_t t0;

	for (int i = 0; i < NFLOATS; i++)
		wire_buf_data(buf)[i] = (float)i * 1e-3f;
	wire_socket_setup(s, PBYTES + 1024);
	zmq_bind(s, "tcp://127.0.0.1:*");
	zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &eplen);
	pthread_create(&th, NULL, stream_rx, &p);
	t0 = clock_now_ns();
	for (int i = 0; i < iters; i++) {
		if (mode == 0) {
			zmq_send(s, wire_buf_data(buf), PBYTES, 0);
		} else {
			struct wire_header h = { .type = WIRE_PUSH, .step = i, .payload_len = PBYTES };

			wire_send(s, NULL, 0, &h, NULL, buf, false, NULL);
		}
	}
	pthread_join(th, NULL);
	t0 = clock_now_ns() - t0;
	zmq_close(s);
	wire_buf_unref(&buf);
	return (double)iters * PBYTES / (double)t0; /* bytes per ns = GB/s */
}

/* PS pattern: the server thread owns a ROUTER, the worker (main thread) a DEALER. */
static void *ps_server(void *arg)
{
	struct peer *p = arg;
	void *s = zmq_socket(ctx, ZMQ_ROUTER);
	struct wire_buf *model = wire_buf_new(NFLOATS);

	memset(wire_buf_data(model), 0, PBYTES);
	wire_socket_setup(s, PBYTES + 1024);
	zmq_bind(s, p->ep);
	for (int i = 0; i < 2 * iters; i++) {
		if (p->mode == 0) {
			zmq_msg_t id, hd, pl;
			int more = 0;
			size_t sz = sizeof more;

			zmq_msg_init(&id);
			zmq_msg_init(&hd);
			zmq_msg_recv(&id, s, 0);
			zmq_msg_recv(&hd, s, 0);
			zmq_getsockopt(s, ZMQ_RCVMORE, &more, &sz);
			if (more) { /* a push: consume the update, answer a 1-byte ack */
				zmq_msg_init(&pl);
				zmq_msg_recv(&pl, s, 0);
				zmq_msg_close(&pl);
				zmq_msg_send(&id, s, ZMQ_SNDMORE);
				zmq_send(s, "A", 1, 0);
			} else {  /* a pull: answer the model */
				zmq_msg_send(&id, s, ZMQ_SNDMORE);
				zmq_send(s, "M", 1, ZMQ_SNDMORE);
				zmq_send(s, wire_buf_data(model), PBYTES, 0);
			}
			zmq_msg_close(&hd);
		} else {
			struct wire_msg m;
			struct wire_header h = { .sender = WIRE_SENDER_SERVER };

			if (wire_recv(s, true, PBYTES, -1, &m, NULL) != 1)
				abort();
			if (m.h.type == WIRE_PUSH) {
				h.type = WIRE_ACK;
				wire_send(s, m.id, m.idlen, &h, NULL, NULL, false, NULL);
			} else {
				h.type = WIRE_MODEL;
				h.payload_len = PBYTES;
				wire_send(s, m.id, m.idlen, &h, NULL, model, false, NULL);
			}
			wire_msg_close(&m);
		}
	}
	zmq_close(s);
	wire_buf_unref(&model);
	return NULL;
}

static double ps(int mode, int port)
{
	char ep[64];
	struct peer p = { ep, mode };
	void *s = zmq_socket(ctx, ZMQ_DEALER);
	struct wire_buf *grad = wire_buf_new(NFLOATS);
	pthread_t th;
	int64_t t0;

	memset(wire_buf_data(grad), 0, PBYTES);
	snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
	wire_socket_setup(s, PBYTES + 1024);
	pthread_create(&th, NULL, ps_server, &p);
	zmq_connect(s, ep);
	t0 = clock_now_ns();
	for (int i = 0; i < iters; i++) {
		if (mode == 0) {
			zmq_msg_t m;

			zmq_send(s, "P", 1, 0);
			zmq_msg_init(&m);
			zmq_msg_recv(&m, s, 0);
			zmq_msg_recv(&m, s, 0);
			zmq_send(s, "U", 1, ZMQ_SNDMORE);
			zmq_send(s, wire_buf_data(grad), PBYTES, 0);
			zmq_msg_recv(&m, s, 0);
			zmq_msg_close(&m);
		} else {
			struct wire_header h = { .type = WIRE_PULL, .sender = 0, .step = i };
			struct wire_msg m;

			wire_send(s, NULL, 0, &h, NULL, NULL, false, NULL);
			if (wire_recv(s, false, PBYTES, -1, &m, NULL) != 1 || m.n != NFLOATS)
				abort();
			wire_msg_close(&m);
			h.type = WIRE_PUSH;
			h.payload_len = PBYTES;
			wire_send(s, NULL, 0, &h, NULL, grad, false, NULL);
			if (wire_recv(s, false, PBYTES, -1, &m, NULL) != 1 || m.h.type != WIRE_ACK)
				abort();
			wire_msg_close(&m);
		}
	}
	t0 = clock_now_ns() - t0;
	pthread_join(th, NULL);
	zmq_close(s);
	wire_buf_unref(&grad);
	return 2.0 * iters * PBYTES / (double)t0;
}

int main(int argc, char **argv)
{
	double raw, wire, best_raw = 0, best_wire = 0;
	int port = 27000 + (int)(clock_now_ns() / 1000 % 2000);

	if (argc > 1)
		iters = atoi(argv[1]);
	ctx = zmq_ctx_new();
	/* Interleave and keep the best of three, so a noisy neighbour does not decide the ratio. */
	for (int r = 0; r < 3; r++) {
		raw = stream(0);
		wire = stream(1);
		best_raw = raw > best_raw ? raw : best_raw;
		best_wire = wire > best_wire ? wire : best_wire;
	}
	printf("stream  payload %d B x %d: raw zmq %.2f GB/s, wire %.2f GB/s, ratio %.2f\n", PBYTES,
	       iters, best_raw, best_wire, best_wire / best_raw);
	best_raw = best_wire = 0;
	for (int r = 0; r < 3; r++) {
		raw = ps(0, port++);
		wire = ps(1, port++);
		best_raw = raw > best_raw ? raw : best_raw;
		best_wire = wire > best_wire ? wire : best_wire;
	}
	printf("ps      pull+push %d B x %d: raw zmq %.2f GB/s, wire %.2f GB/s, ratio %.2f\n", PBYTES,
	       iters, best_raw, best_wire, best_wire / best_raw);
	zmq_ctx_term(ctx);
	return 0;
}
