/* node/wire: header round trips, every single-bit corruption detected, each validation rule,
 * and messages over real ZeroMQ sockets (inproc and tcp on 127.0.0.1), including bad frames
 * that must be counted and skipped. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "lib/clock.h"
#include "node/wire.h"

static struct wire_header sample_header(uint32_t len)
{
	return (struct wire_header){ .type = WIRE_PUSH, .sender = 3, .payload_len = len, .step = 41,
				     .model_version = -7, .aux = 64, .value = 2.25 };
}

Test(wire, roundtrip_and_layout)
{
	float pay[5] = { 1, -2, 3.5f, 0, 1e-30f };
	struct wire_header h = sample_header(sizeof pay), g;
	uint8_t raw[WIRE_HEADER_BYTES];
	uint32_t magic, len;
	int64_t step;

	wire_header_encode(&h, pay, raw);
	/* The documented offsets. */
	memcpy(&magic, raw, 4);
	memcpy(&len, raw + 12, 4);
	memcpy(&step, raw + 16, 8);
	cr_assert_eq(magic, WIRE_MAGIC);
	cr_assert_eq(memcmp(raw, "SNW1", 4), 0);
	cr_assert_eq(len, sizeof pay);
	cr_assert_eq(step, 41);
	cr_assert_eq(wire_decode(raw, sizeof raw, pay, sizeof pay, 1 << 20, &g), 0);
	cr_assert_eq(g.type, h.type);
	cr_assert_eq(g.sender, h.sender);
	cr_assert_eq(g.payload_len, h.payload_len);
	cr_assert_eq(g.step, h.step);
	cr_assert_eq(g.model_version, h.model_version);
	cr_assert_eq(g.aux, h.aux);
	cr_assert_eq(g.value, h.value);
}

/* Flipping any single bit of the header or the payload must be rejected. */
Test(wire, every_bit_flip_rejected)
{
	float pay[16];
	struct wire_header h = sample_header(sizeof pay), g;
	uint8_t raw[WIRE_HEADER_BYTES];

	for (int i = 0; i < 16; i++)
		pay[i] = (float)i * 0.5f;
	wire_header_encode(&h, pay, raw);
	for (size_t bit = 0; bit < 8 * sizeof raw; bit++) {
		raw[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		cr_assert_lt(wire_decode(raw, sizeof raw, pay, sizeof pay, 1 << 20, &g), 0, "hdr bit %zu", bit);
		raw[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	for (size_t bit = 0; bit < 8 * sizeof pay; bit++) {
		uint8_t *p = (uint8_t *)pay;

		p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		cr_assert_eq(wire_decode(raw, sizeof raw, pay, sizeof pay, 1 << 20, &g), -EBADMSG);
		p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	cr_assert_eq(wire_decode(raw, sizeof raw, pay, sizeof pay, 1 << 20, &g), 0);
}

/* Re-encode a header with one field forced, with a valid checksum, and expect the given error. */
static int decode_forced(size_t off, const void *val, size_t vlen, size_t plen, size_t max)
{
	uint8_t raw[WIRE_HEADER_BYTES], pay[64] = { 0 };
	struct wire_header h = sample_header((uint32_t)plen), g;
	uint64_t seed, sum;

	wire_header_encode(&h, pay, raw);
	memcpy(raw + off, val, vlen);
	/* recompute the checksum exactly as documented */
	seed = wire_hash64(raw, 48, 0);
	sum = wire_hash64(pay, plen, seed);
	memcpy(raw + 48, &sum, 8);
	return wire_decode(raw, sizeof raw, plen ? pay : NULL, plen, max, &g);
}

Test(wire, field_validation)
{
	uint32_t bad_magic = 0x12345678, len6 = 6, len_big = 1u << 30;
	uint16_t ver2 = 2, type0 = 0, type_end = WIRE_TYPE_END, type_ok = WIRE_BYE;

	cr_assert_eq(decode_forced(0, &bad_magic, 4, 8, 64), -EBADMSG);
	cr_assert_eq(decode_forced(4, &ver2, 2, 8, 64), -EPROTO);
	cr_assert_eq(decode_forced(6, &type0, 2, 8, 64), -EPROTO);
	cr_assert_eq(decode_forced(6, &type_end, 2, 8, 64), -EPROTO);
	cr_assert_eq(decode_forced(6, &type_ok, 2, 8, 64), 0);
	cr_assert_eq(decode_forced(12, &len6, 4, 6, 64), -EMSGSIZE);     /* not a multiple of 4 */
	cr_assert_eq(decode_forced(12, &len_big, 4, 8, SIZE_MAX), -EMSGSIZE);
	cr_assert_eq(decode_forced(0, &bad_magic, 0, 32, 16), -EMSGSIZE); /* over the receiver's max */
	cr_assert_eq(decode_forced(0, &bad_magic, 0, 16, 16), 0);
}

Test(wire, size_mismatch_rejected)
{
	float pay[4] = { 1, 2, 3, 4 };
	struct wire_header h = sample_header(sizeof pay), g;
	uint8_t raw[WIRE_HEADER_BYTES + 1];

	wire_header_encode(&h, pay, raw);
	cr_assert_eq(wire_decode(raw, WIRE_HEADER_BYTES, pay, 12, 1 << 20, &g), -EBADMSG);
	cr_assert_eq(wire_decode(raw, WIRE_HEADER_BYTES, NULL, 0, 1 << 20, &g), -EBADMSG);
	cr_assert_eq(wire_decode(raw, WIRE_HEADER_BYTES - 1, pay, 16, 1 << 20, &g), -EBADMSG);
	cr_assert_eq(wire_decode(raw, WIRE_HEADER_BYTES + 1, pay, 16, 1 << 20, &g), -EBADMSG);
	cr_assert_eq(wire_decode(NULL, 0, NULL, 0, 1 << 20, &g), -EINVAL);
}

static float bits_to_float(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* A payload float that is NaN (quiet or signalling, either sign) or infinite is rejected with
 * -EDOM wherever it sits, although the checksum is right; denormals, zeros and the largest
 * finite values pass. */
Test(wire, non_finite_payload_rejected)
{
	static const uint32_t bad[] = { 0x7fc00000u /* quiet NaN */, 0xffc00000u /* -qNaN */,
					0x7f800001u /* signalling NaN */, 0xffa00000u /* -sNaN */,
					0x7fffffffu, 0x7f800000u /* +Inf */, 0xff800000u /* -Inf */ };
	static const uint32_t good[] = { 0x00000001u /* smallest denormal */,
					 0x807fffffu /* largest negative denormal */,
					 0x80000000u /* -0 */, 0x7f7fffffu /* FLT_MAX */,
					 0xff7fffffu /* -FLT_MAX */, 0x00800000u /* FLT_MIN */ };
	float pay[37];
	struct wire_header h = sample_header(sizeof pay), g;
	uint8_t raw[WIRE_HEADER_BYTES];

	for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
		for (size_t at = 0; at < 37; at += 6) {
			for (size_t i = 0; i < 37; i++)
				pay[i] = (float)i - 18.5f;
			pay[at] = bits_to_float(bad[b]);
			wire_header_encode(&h, pay, raw);
			cr_assert_eq(wire_decode(raw, sizeof raw, pay, sizeof pay, 1 << 20, &g), -EDOM,
				     "0x%08x at %zu", bad[b], at);
		}
	}
	for (size_t i = 0; i < 37; i++)
		pay[i] = bits_to_float(good[i % (sizeof good / sizeof *good)]);
	wire_header_encode(&h, pay, raw);
	cr_assert_eq(wire_decode(raw, sizeof raw, pay, sizeof pay, 1 << 20, &g), 0);
	cr_assert_eq(g.payload_len, sizeof pay);
}

/* wire_payload_finite against isfinite() on every float of random bit patterns (a quarter of
 * them forced to the all-ones exponent), at every alignment of the bytes. */
Test(wire, payload_finite_matches_isfinite)
{
	uint8_t bytes[4 * 64 + 3];
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (int round = 0; round < 2000; round++) {
		size_t off = (size_t)round % 4, n = (size_t)round % 65;
		bool want = true;

		for (size_t i = 0; i < n; i++) {
			uint32_t u;
			float f;

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			u = (uint32_t)x;
			if ((x >> 40) % 4 == 0)
				u |= 0x7f800000u;
			else if ((x >> 40) % 4 == 1)
				u &= 0x807fffffu; /* zero exponent: denormal or zero */
			/* Most rounds all finite: a non-finite value only in every 8th round. */
			if (round % 8 != 0)
				u = (u & 0x7f800000u) == 0x7f800000u ? u & ~0x00800000u : u;
			memcpy(bytes + off + 4 * i, &u, 4);
			memcpy(&f, &u, 4);
			want = want && isfinite(f);
		}
		cr_assert_eq(wire_payload_finite(bytes + off, n), want, "round %d", round);
	}
}

/* The hash: deterministic, seed-sensitive, length-sensitive (trailing zeros), and every length
 * 0..100 hits each code path. Distinct inputs in a small family all hash differently. */
Test(wire, hash_properties)
{
	uint8_t buf[128] = { 0 };
	uint64_t seen[101];

	for (size_t len = 0; len <= 100; len++) {
		seen[len] = wire_hash64(buf, len, 0);
		cr_assert_eq(seen[len], wire_hash64(buf, len, 0));
		cr_assert_neq(seen[len], wire_hash64(buf, len, 1));
		for (size_t j = 0; j < len; j++)
			cr_assert_neq(seen[j], seen[len], "zeros of %zu and %zu collide", j, len);
	}
	/* Byte position matters (a plain sum would not notice a swap). */
	buf[0] = 1;
	buf[40] = 2;
	uint64_t a = wire_hash64(buf, 64, 0);
	buf[0] = 2;
	buf[40] = 1;
	cr_assert_neq(a, wire_hash64(buf, 64, 0));
}

Test(wire, buf_refcount)
{
	struct wire_buf *b = wire_buf_new(1000), *c;

	cr_assert_not_null(b);
	cr_assert_eq(wire_buf_len(b), 1000);
	cr_assert_eq((uintptr_t)wire_buf_data(b) % 64, 0);
	c = wire_buf_ref(b);
	wire_buf_unref(&b);
	cr_assert_null(b);
	wire_buf_data(c)[999] = 1.0f; /* still alive */
	wire_buf_unref(&c);
	wire_buf_unref(&c); /* NULL-safe */
}

/* Real sockets: DEALER -> ROUTER over tcp, copy and zero-copy payloads, bad frames skipped. */
Test(wire, sockets_router_dealer, .timeout = 20)
{
	void *ctx = zmq_ctx_new();
	void *router = zmq_socket(ctx, ZMQ_ROUTER), *dealer = zmq_socket(ctx, ZMQ_DEALER);
	char ep[64];
	size_t eplen = sizeof ep;
	struct wire_stats ss = { 0 }, rs = { 0 }, ds = { 0 };
	struct wire_msg m;
	struct wire_buf *buf = wire_buf_new(203500);
	const size_t maxp = 4u << 20;
	uint8_t junk[WIRE_HEADER_BYTES] = { 'S', 'N', 'W', '1' };

	cr_assert_eq(wire_socket_setup(router, maxp), 0);
	cr_assert_eq(wire_socket_setup(dealer, maxp), 0);
	cr_assert_eq(zmq_bind(router, "tcp://127.0.0.1:*"), 0);
	zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, ep, &eplen);
	cr_assert_eq(zmq_connect(dealer, ep), 0);

	for (size_t i = 0; i < 203500; i++)
		wire_buf_data(buf)[i] = (float)i;
	/* 1: header only */
	struct wire_header h = { .type = WIRE_PULL, .sender = 2, .step = 5 };
	cr_assert_eq(wire_send(dealer, NULL, 0, &h, NULL, NULL, false, &ss), 0);
	/* 2: junk single frame (bad checksum), 3: three frames, 4: a valid zero-copy payload */
	cr_assert_eq(zmq_send(dealer, junk, sizeof junk, 0), (int)sizeof junk);
	zmq_send(dealer, "a", 1, ZMQ_SNDMORE);
	zmq_send(dealer, "b", 1, ZMQ_SNDMORE);
	zmq_send(dealer, "c", 1, 0);
	h = (struct wire_header){ .type = WIRE_PUSH, .sender = 2, .step = 6, .model_version = 9,
				  .payload_len = 203500 * 4 };
	cr_assert_eq(wire_send(dealer, NULL, 0, &h, NULL, buf, false, &ss), 0);
	wire_buf_unref(&buf); /* ZeroMQ keeps its own reference while sending */

	cr_assert_eq(wire_recv(router, true, maxp, 5000, &m, &rs), 1);
	cr_assert_eq(m.h.type, WIRE_PULL);
	cr_assert_eq(m.n, 0);
	cr_assert_gt(m.idlen, 0);
	uint8_t id[WIRE_MAX_ID];
	size_t idlen = m.idlen;
	memcpy(id, m.id, idlen);
	wire_msg_close(&m);

	cr_assert_eq(wire_recv(router, true, maxp, 5000, &m, &rs), 1);
	cr_assert_eq(m.h.type, WIRE_PUSH);
	cr_assert_eq(m.h.model_version, 9);
	cr_assert_eq(m.n, 203500);
	for (size_t i = 0; i < m.n; i += 997)
		cr_assert_eq(m.payload[i], (float)i);
	wire_msg_close(&m);
	cr_assert_eq(rs.bad_frames, 2, "junk and the 3-frame message must be counted");
	cr_assert_eq(rs.msgs_rx, 2);
	cr_assert_eq(ss.msgs_tx, 2);
	cr_assert_eq(ss.bytes_tx, 2 * WIRE_HEADER_BYTES + 203500 * 4);

	/* Reply through the routing id, copied payload. */
	float small[3] = { 7, 8, 9 };
	h = (struct wire_header){ .type = WIRE_MODEL, .sender = WIRE_SENDER_SERVER,
				  .model_version = 10, .payload_len = sizeof small };
	cr_assert_eq(wire_send(router, id, idlen, &h, small, NULL, false, &rs), 0);
	cr_assert_eq(wire_recv(dealer, false, maxp, 5000, &m, &ds), 1);
	cr_assert_eq(m.h.type, WIRE_MODEL);
	cr_assert_eq(m.n, 3);
	cr_assert_eq(m.payload[2], 9.0f);
	wire_msg_close(&m);

	/* Timeout when nothing comes. */
	cr_assert_eq(wire_recv(dealer, false, maxp, 50, &m, &ds), 0);
	zmq_close(router);
	zmq_close(dealer);
	zmq_ctx_term(ctx);
}

/* ZMQ_MAXMSGSIZE: a peer sending a frame over the limit is disconnected, never delivered. */
Test(wire, oversize_not_delivered, .timeout = 20)
{
	void *ctx = zmq_ctx_new();
	void *pull = zmq_socket(ctx, ZMQ_PULL), *push = zmq_socket(ctx, ZMQ_PUSH);
	char ep[64];
	size_t eplen = sizeof ep;
	struct wire_stats st = { 0 };
	struct wire_msg m;
	static float big[1 << 16];

	cr_assert_eq(wire_socket_setup(pull, 1024), 0);
	cr_assert_eq(zmq_bind(pull, "tcp://127.0.0.1:*"), 0);
	zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, ep, &eplen);
	cr_assert_eq(zmq_connect(push, ep), 0);
	struct wire_header h = { .type = WIRE_PUSH, .payload_len = sizeof big };
	cr_assert_eq(wire_send(push, NULL, 0, &h, big, NULL, false, NULL), 0);
	cr_assert_eq(wire_recv(pull, false, 1024, 500, &m, &st), 0);
	int linger = 0;
	zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
	zmq_close(push);
	zmq_close(pull);
	zmq_ctx_term(ctx);
}

/* A sender that floods a PULL socket with bad messages (junk header frames, and valid-checksum
 * pushes carrying a NaN) until told to stop. */
struct flood {
	void *ctx;
	const char *ep;
	atomic_bool stop;
	atomic_bool started;
};

static void *flood_main(void *arg)
{
	struct flood *f = arg;
	void *push = zmq_socket(f->ctx, ZMQ_PUSH);
	uint8_t junk[WIRE_HEADER_BYTES] = { 'S', 'N', 'W', '1' };
	float nan_pay[4] = { 1, NAN, 2, 3 };
	struct wire_header h = { .type = WIRE_PUSH, .payload_len = sizeof nan_pay };
	int linger = 0;

	zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
	zmq_connect(push, f->ep);
	for (uint64_t k = 0; !atomic_load(&f->stop); k++) {
		if (k % 2)
			zmq_send(push, junk, sizeof junk, ZMQ_DONTWAIT);
		else
			wire_send(push, NULL, 0, &h, nan_pay, NULL, true, NULL);
		atomic_store(&f->started, true);
	}
	zmq_close(push);
	return NULL;
}

/* A stream of bad messages cannot keep wire_recv past its timeout (each used to restart it),
 * and a poll (timeout 0) skips at most one of them. */
Test(wire, bad_stream_does_not_stretch_the_wait, .timeout = 30)
{
	struct flood f = { .ctx = zmq_ctx_new(), .ep = "inproc://wire-flood" };
	void *pull = zmq_socket(f.ctx, ZMQ_PULL);
	struct wire_stats st = { 0 };
	struct wire_msg m;
	pthread_t th;
	int64_t t0, took_ms;
	int rc;

	cr_assert_eq(wire_socket_setup(pull, 1024), 0);
	cr_assert_eq(zmq_bind(pull, f.ep), 0);
	cr_assert_eq(pthread_create(&th, NULL, flood_main, &f), 0);
	/* Wait (bounded by the test's timeout) until bad messages are arriving. */
	while (!atomic_load(&f.started))
		clock_sleep_ns(1000000);
	t0 = clock_now_ns();
	rc = wire_recv(pull, false, 1024, 300, &m, &st);
	took_ms = (clock_now_ns() - t0) / 1000000;
	cr_assert_eq(rc, 0, "no valid message came: a timeout");
	cr_assert_gt(st.bad_frames, 1, "the flood was read and counted");
	/* 300 ms plus scheduling slack on a loaded machine; the flood goes on meanwhile. */
	cr_assert_lt(took_ms, 2000, "the wait lasted %lld ms", (long long)took_ms);

	uint64_t before = st.bad_frames;
	cr_assert_eq(wire_recv(pull, false, 1024, 0, &m, &st), 0);
	cr_assert_leq(st.bad_frames - before, 1, "a poll skips at most one bad message");
	atomic_store(&f.stop, true);
	pthread_join(th, NULL);
	zmq_close(pull);
	zmq_ctx_term(f.ctx);
}
