/* bench_nspath: ZeroMQ throughput over the testbed's own path (namespace -> veth -> bridge ->
 * veth -> namespace), raw frames against node/wire messages, for an 814 KB float payload (the
 * 784-256-10 MLP). The receiver binds inside node 0; a forked sender connects from node 1
 * (its ZeroMQ I/O threads start inside that namespace). Prints GB/s of payload and the wire/raw
 * ratio. Needs root; skips otherwise. Nothing is asserted. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "lib/clock.h"
#include "lib/netns.h"
#include "node/wire.h"
#include "orchestrator/testbed.h"

#define NFLOATS 203530
#define PBYTES (NFLOATS * 4)
#define PORT 7700

static int iters = 300;

static void sender(const char *ns, const char *addr, int wire)
{
	int saved = -1;
	void *ctx, *s;
	char ep[64];
	struct wire_buf *buf = wire_buf_new(NFLOATS);
	float *payload = buf ? wire_buf_data(buf) : NULL;

	if (!payload || netns_enter(ns, &saved) < 0)
		_exit(1);
	ctx = zmq_ctx_new();
	s = zmq_socket(ctx, ZMQ_PUSH);
	wire_socket_setup(s, PBYTES + 1024);
	{
		int linger = -1; /* deliver everything before zmq_ctx_term returns */

		zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
	}
	snprintf(ep, sizeof ep, "tcp://%s:%d", addr, PORT);
	zmq_connect(s, ep);
	for (int i = 0; i < iters; i++) {
		if (wire) {
			struct wire_header h = { .type = WIRE_PUSH, .step = i, .payload_len = PBYTES };

			/* Zero-copy from a shared buffer, as the engines send models. */
			if (wire_send(s, NULL, 0, &h, NULL, buf, false, NULL) < 0)
				_exit(2);
		} else if (zmq_send(s, payload, PBYTES, 0) < 0) {
			_exit(2);
		}
	}
	zmq_close(s);
	zmq_ctx_term(ctx);
	wire_buf_unref(&buf);
	_exit(0);
}

/* Receive iters messages in namespace rx_ns; returns payload GB/s. */
static double run(const char *rx_ns, const char *tx_ns, const char *rx_addr, int wire)
{
	int saved = -1, st;
	void *ctx, *s;
	char ep[64];
	int64_t t0 = 0;
	pid_t pid;

	if (netns_enter(rx_ns, &saved) < 0)
		return -1;
	ctx = zmq_ctx_new();
	s = zmq_socket(ctx, ZMQ_PULL);
	wire_socket_setup(s, PBYTES + 1024);
	{
		int tmo = 30000; /* a dead sender ends the run instead of hanging it */

		zmq_setsockopt(s, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
	}
	snprintf(ep, sizeof ep, "tcp://%s:%d", rx_addr, PORT);
	if (zmq_bind(s, ep) < 0) {
		fprintf(stderr, "bind %s: %s\n", ep, zmq_strerror(zmq_errno()));
		return -1;
	}
	netns_restore(&saved);
	pid = fork();
	if (pid == 0)
		sender(tx_ns, rx_addr, wire);
	int got = 0;

	for (int i = 0; i < iters; i++) {
		if (wire) {
			struct wire_msg m;

			if (wire_recv(s, false, PBYTES, 30000, &m, NULL) != 1)
				break;
			wire_msg_close(&m);
		} else {
			zmq_msg_t m;

			zmq_msg_init(&m);
			if (zmq_msg_recv(&m, s, 0) < 0)
				break;
			zmq_msg_close(&m);
		}
		if (i == 0)
			t0 = clock_now_ns(); /* the first message includes the connection set-up */
		got++;
	}
	{
		double secs = (double)(clock_now_ns() - t0) / 1e9;

		waitpid(pid, &st, 0);
		zmq_close(s);
		zmq_ctx_term(ctx);
		if (got < iters || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "bench_nspath: %d of %d messages, sender status %d\n", got, iters, st);
			return -1;
		}
		return (double)PBYTES * (iters - 1) / secs / 1e9;
	}
}

int main(int argc, char **argv)
{
	const char *names[] = { "rx", "tx" };
	struct testbed_spec spec = { .n_nodes = 2, .node_names = names, .skip_reach_check = false };
	struct testbed *tb;
	char err[256];
	double raw = 0, wire = 0;

	if (argc > 1)
		iters = atoi(argv[1]);
	if (geteuid() != 0) {
		printf("bench_nspath: skipped (needs root)\n");
		return 0;
	}
	tb = testbed_create(&spec, NULL, err, sizeof err);
	if (!tb) {
		fprintf(stderr, "bench_nspath: testbed: %s\n", err);
		return 1;
	}
	for (int rep = 0; rep < 3; rep++) {
		double r = run(testbed_node_netns(tb, 0), testbed_node_netns(tb, 1), testbed_node_addr_str(tb, 0), 0);
		double w = run(testbed_node_netns(tb, 0), testbed_node_netns(tb, 1), testbed_node_addr_str(tb, 0), 1);

		if (r < 0 || w < 0) {
			testbed_destroy(&tb);
			return 1;
		}
		raw = r > raw ? r : raw;
		wire = w > wire ? w : wire;
	}
	testbed_destroy(&tb);
	printf("bench_nspath: 814 KB messages over ns-veth-bridge-veth-ns, best of 3 x %d\n", iters);
	printf("  raw ZeroMQ push/pull   %.2f GB/s\n", raw);
	printf("  node/wire messages     %.2f GB/s  (%.0f%% of raw)\n", wire, raw > 0 ? 100.0 * wire / raw : 0);
	return 0;
}
