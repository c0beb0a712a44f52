/* node/wire: see wire.h for the format.
 *
 * Decoding is a pure function over bytes (wire_decode), so the fuzzer drives exactly the code
 * the sockets use. wire_recv reads every frame of a message before judging it, so a malformed
 * message never leaves stray frames that would desynchronise the next one. */
#include "node/wire.h"

#include <errno.h>
#include <stdatomic.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"

/* --- hash --------------------------------------------------------------------------------- */

#define H1 0x9e3779b185ebca87ull
#define H2 0xc2b2ae3d27d4eb4full
#define H3 0x165667b19e3779f9ull
#define H4 0x85ebca77c2b2ae63ull
#define H5 0x27d4eb2f165667c5ull

static inline uint64_t rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v; /* little-endian host (x86-64, aarch64): the format is defined little-endian */
}

static inline uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static inline uint64_t lane(uint64_t acc, uint64_t in)
{
	acc += in * H2;
	acc = rotl64(acc, 31);
	return acc * H1;
}

static inline uint64_t fold(uint64_t h, uint64_t acc)
{
	h ^= lane(0, acc);
	return h * H1 + H4;
}

uint64_t wire_hash64(const void *data, size_t len, uint64_t seed)
{
	const uint8_t *p = data, *end = p + len;
	uint64_t h;

	if (len >= 32) {
		/* Four independent lanes keep four multipliers busy per 32-byte block. */
		uint64_t a = seed + H1 + H2, b = seed + H2, c = seed, d = seed - H1;
		const uint8_t *last = end - 32;

		do {
			a = lane(a, rd64(p));
			b = lane(b, rd64(p + 8));
			c = lane(c, rd64(p + 16));
			d = lane(d, rd64(p + 24));
			p += 32;
		} while (p <= last);
		h = rotl64(a, 1) + rotl64(b, 7) + rotl64(c, 12) + rotl64(d, 18);
		h = fold(h, a);
		h = fold(h, b);
		h = fold(h, c);
		h = fold(h, d);
	} else {
		h = seed + H5;
	}
	h += (uint64_t)len;
	for (; p + 8 <= end; p += 8) {
		h ^= lane(0, rd64(p));
		h = rotl64(h, 27) * H1 + H4;
	}
	if (p + 4 <= end) {
		h ^= (uint64_t)rd32(p) * H1;
		h = rotl64(h, 23) * H2 + H3;
		p += 4;
	}
	for (; p < end; p++) {
		h ^= (*p) * H5;
		h = rotl64(h, 11) * H1;
	}
	/* Final avalanche: every input bit affects every output bit. */
	h ^= h >> 33;
	h *= H2;
	h ^= h >> 29;
	h *= H3;
	h ^= h >> 32;
	return h;
}

/* --- header ------------------------------------------------------------------------------- */

static const char *const type_names[WIRE_TYPE_END] = {
	[WIRE_PULL] = "PULL", [WIRE_MODEL] = "MODEL", [WIRE_PUSH] = "PUSH",
	[WIRE_ACK] = "ACK", [WIRE_BARRIER] = "BARRIER", [WIRE_BARRIER_OK] = "BARRIER_OK",
	[WIRE_CLOCK_REQ] = "CLOCK_REQ", [WIRE_CLOCK_REP] = "CLOCK_REP", [WIRE_BYE] = "BYE",
	[WIRE_HELLO] = "HELLO",
};

const char *wire_type_name(int type)
{
	if (type <= 0 || type >= WIRE_TYPE_END)
		return "?";
	return type_names[type];
}

static void put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint64_t header_checksum(const uint8_t *hdr, const void *payload, size_t plen)
{
	uint64_t seed = wire_hash64(hdr, 48, 0);

	return wire_hash64(payload ? payload : "", payload ? plen : 0, seed);
}

void wire_header_encode(const struct wire_header *h, const void *payload,
			uint8_t out[WIRE_HEADER_BYTES])
{
	uint64_t v;

	put32(out, WIRE_MAGIC);
	put16(out + 4, WIRE_VERSION);
	put16(out + 6, h->type);
	put32(out + 8, h->sender);
	put32(out + 12, h->payload_len);
	put64(out + 16, (uint64_t)h->step);
	put64(out + 24, (uint64_t)h->model_version);
	put64(out + 32, (uint64_t)h->aux);
	memcpy(&v, &h->value, 8);
	put64(out + 40, v);
	put64(out + 48, header_checksum(out, payload, h->payload_len));
}

/* Every float of the payload is finite. A float is NaN or infinite exactly when its exponent
 * bits are all ones. Each of 16 lanes ORs in "exponent all ones" for its floats (fixed-size
 * blocks of compares and ORs, which the compiler turns into vector instructions at -O2; no
 * branch per value) and the lanes are folded once at the end: it costs about what the
 * checksum over the same bytes costs (an 814 KB model: ~0.1 ms each). Denormals and zeros
 * pass. */
bool wire_payload_finite(const void *payload, size_t n)
{
	const uint8_t *p = payload;
	uint32_t lanes[16] = { 0 }, bad = 0;
	size_t i = 0;

	for (; i + 16 <= n; i += 16)
		for (int k = 0; k < 16; k++)
			lanes[k] |= (rd32(p + 4 * (i + k)) & 0x7f800000u) == 0x7f800000u;
	for (; i < n; i++)
		bad |= (rd32(p + 4 * i) & 0x7f800000u) == 0x7f800000u;
	for (int k = 0; k < 16; k++)
		bad |= lanes[k];
	return !bad;
}

int wire_decode(const void *hdr, size_t hlen, const void *payload, size_t plen,
		size_t max_payload, struct wire_header *out)
{
	const uint8_t *b = hdr;
	uint16_t ver, type;
	uint32_t len;
	uint64_t v;

	if (!hdr || !out)
		return -EINVAL;
	if (hlen != WIRE_HEADER_BYTES || rd32(b) != WIRE_MAGIC)
		return -EBADMSG;
	memcpy(&ver, b + 4, 2);
	memcpy(&type, b + 6, 2);
	if (ver != WIRE_VERSION || type == 0 || type >= WIRE_TYPE_END)
		return -EPROTO;
	len = rd32(b + 12);
	if (len > max_payload || len > WIRE_MAX_PAYLOAD_BYTES || len % 4 != 0)
		return -EMSGSIZE;
	if ((size_t)len != plen || (plen > 0 && !payload))
		return -EBADMSG;
	if (rd64(b + 48) != header_checksum(b, plen ? payload : NULL, plen))
		return -EBADMSG;
	if (plen > 0 && !wire_payload_finite(payload, plen / 4))
		return -EDOM;
	out->type = type;
	out->sender = rd32(b + 8);
	out->payload_len = len;
	out->step = (int64_t)rd64(b + 16);
	out->model_version = (int64_t)rd64(b + 24);
	out->aux = (int64_t)rd64(b + 32);
	v = rd64(b + 40);
	memcpy(&out->value, &v, 8);
	return 0;
}

/* --- buffers ------------------------------------------------------------------------------ */

struct wire_buf {
	atomic_int refs;
	size_t n;
	float *data;
};

struct wire_buf *wire_buf_new(size_t n)
{
	struct wire_buf *b = calloc(1, sizeof *b);
	size_t bytes = (n * sizeof(float) + 63) / 64 * 64;

	if (!b)
		return NULL;
	b->data = aligned_alloc(64, bytes ? bytes : 64);
	if (!b->data) {
		free(b);
		return NULL;
	}
	atomic_init(&b->refs, 1);
	b->n = n;
	return b;
}

float *wire_buf_data(struct wire_buf *self)
{
	return self->data;
}

size_t wire_buf_len(const struct wire_buf *self)
{
	return self->n;
}

struct wire_buf *wire_buf_ref(struct wire_buf *self)
{
	atomic_fetch_add_explicit(&self->refs, 1, memory_order_relaxed);
	return self;
}

void wire_buf_unref(struct wire_buf **self)
{
	struct wire_buf *b;

	if (!self || !*self)
		return;
	b = *self;
	*self = NULL;
	if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
		free(b->data);
		free(b);
	}
}

/* Called by a ZeroMQ I/O thread once a zero-copy frame is sent. */
static void buf_release(void *data, void *hint)
{
	struct wire_buf *b = hint;

	(void)data;
	wire_buf_unref(&b);
}

/* --- sockets ------------------------------------------------------------------------------ */

int wire_socket_setup(void *sock, size_t max_payload)
{
	int64_t maxsz = (int64_t)(max_payload < WIRE_HEADER_BYTES ? WIRE_HEADER_BYTES : max_payload);
	int linger = 0, bufsz = 4 << 20;

	if (zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &maxsz, sizeof maxsz) ||
	    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger) ||
	    zmq_setsockopt(sock, ZMQ_SNDBUF, &bufsz, sizeof bufsz) ||
	    zmq_setsockopt(sock, ZMQ_RCVBUF, &bufsz, sizeof bufsz)) {
		int e = zmq_errno();

		log_error("wire: setsockopt: %s", zmq_strerror(e));
		return -e;
	}
	return 0;
}

int wire_monitor_open(void *ctx, void *sock, int events, const char *name, void **mon)
{
	char ep[96];
	void *pair;

	*mon = NULL;
	snprintf(ep, sizeof ep, "inproc://wire-monitor-%s", name);
	if (zmq_socket_monitor(sock, ep, events) < 0)
		return -zmq_errno();
	pair = zmq_socket(ctx, ZMQ_PAIR);
	if (!pair)
		return -zmq_errno();
	if (zmq_connect(pair, ep) < 0) {
		int e = zmq_errno();

		zmq_close(pair);
		return -e;
	}
	*mon = pair;
	return 0;
}

int wire_monitor_next(void *mon, uint16_t *event, uint32_t *value)
{
	zmq_msg_t ev;
	int more = 0;
	size_t ml = sizeof more;

	zmq_msg_init(&ev);
	if (zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(&ev);
		return 0;
	}
	*event = 0;
	*value = 0;
	if (zmq_msg_size(&ev) >= 6) {
		memcpy(event, zmq_msg_data(&ev), 2);
		memcpy(value, (const uint8_t *)zmq_msg_data(&ev) + 2, 4);
	}
	zmq_msg_close(&ev);
	/* The second frame names the endpoint; not needed. */
	while (zmq_getsockopt(mon, ZMQ_RCVMORE, &more, &ml) == 0 && more) {
		zmq_msg_init(&ev);
		zmq_msg_recv(&ev, mon, 0);
		zmq_msg_close(&ev);
	}
	return 1;
}

static int send_frame(void *sock, zmq_msg_t *msg, int flags)
{
	for (;;) {
		if (zmq_msg_send(msg, sock, flags) >= 0)
			return 0;
		if (zmq_errno() != EINTR)
			return -zmq_errno();
	}
}

int wire_send(void *sock, const void *id, size_t idlen, const struct wire_header *h,
	      const void *payload, struct wire_buf *buf, bool dontwait, struct wire_stats *st)
{
	uint8_t hdr[WIRE_HEADER_BYTES];
	const void *src = buf ? (const void *)buf->data : payload;
	int dw = dontwait ? ZMQ_DONTWAIT : 0;
	bool more = h->payload_len > 0;
	zmq_msg_t m;
	int rc;

	if (buf && h->payload_len > buf->n * sizeof(float))
		return -EINVAL;
	if (more && !src)
		return -EINVAL;
	wire_header_encode(h, src, hdr);
	if (id) {
		zmq_msg_init_size(&m, idlen);
		memcpy(zmq_msg_data(&m), id, idlen);
		rc = send_frame(sock, &m, ZMQ_SNDMORE | dw);
		if (rc < 0) {
			zmq_msg_close(&m);
			return rc;
		}
	}
	/* After the first frame ZeroMQ sends the rest of a message atomically: no DONTWAIT. */
	zmq_msg_init_size(&m, sizeof hdr);
	memcpy(zmq_msg_data(&m), hdr, sizeof hdr);
	rc = send_frame(sock, &m, (more ? ZMQ_SNDMORE : 0) | (id ? 0 : dw));
	if (rc < 0) {
		zmq_msg_close(&m);
		return rc;
	}
	if (more) {
		if (buf) {
			/* Ownership: ZeroMQ holds this reference until buf_release. */
			wire_buf_ref(buf);
			if (zmq_msg_init_data(&m, buf->data, h->payload_len, buf_release, buf)) {
				wire_buf_unref(&buf);
				return -ENOMEM;
			}
		} else {
			zmq_msg_init_size(&m, h->payload_len);
			memcpy(zmq_msg_data(&m), payload, h->payload_len);
		}
		rc = send_frame(sock, &m, 0);
		if (rc < 0) {
			zmq_msg_close(&m);
			return rc;
		}
	}
	if (st) {
		st->msgs_tx++;
		st->bytes_tx += sizeof hdr + h->payload_len;
	}
	return 0;
}

void wire_msg_close(struct wire_msg *m)
{
	if (m->has_frame)
		zmq_msg_close(&m->frame);
	m->has_frame = false;
	free(m->copy);
	m->copy = NULL;
	m->payload = NULL;
	m->n = 0;
}

/* Receive one frame, retrying on EINTR only when asked to wait forever. */
static int recv_frame(void *sock, zmq_msg_t *f, int flags)
{
	for (;;) {
		if (zmq_msg_recv(f, sock, flags) >= 0)
			return 0;
		if (zmq_errno() != EINTR || flags)
			return -zmq_errno();
	}
}

static bool has_more(void *sock)
{
	int more = 0;
	size_t sz = sizeof more;

	zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz);
	return more != 0;
}

/* Drain the rest of a multipart message; returns the frames drained. */
static int drain(void *sock, struct wire_stats *st)
{
	int n = 0;

	while (has_more(sock)) {
		zmq_msg_t f;

		zmq_msg_init(&f);
		if (recv_frame(sock, &f, 0) < 0) {
			zmq_msg_close(&f);
			break;
		}
		if (st)
			st->bytes_rx += zmq_msg_size(&f);
		zmq_msg_close(&f);
		n++;
	}
	return n;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int wire_recv(void *sock, bool router, size_t max_payload, int timeout_ms, struct wire_msg *m,
	      struct wire_stats *st)
{
	/* The wait is bounded by a deadline fixed here: a stream of bad messages (each consumed
	 * and skipped) shortens what is left of it and never starts it again. */
	int64_t deadline = timeout_ms > 0 ? mono_ms() + timeout_ms : 0;
	bool first = true;

	memset(m, 0, sizeof *m);
	for (;;) {
		zmq_pollitem_t it = { .socket = sock, .events = ZMQ_POLLIN };
		zmq_msg_t hf;
		size_t plen = 0;
		const void *pdata = NULL;
		long left = timeout_ms;
		int rc;

		if (!first && timeout_ms >= 0) {
			/* After a skipped message: only what remains of the wait (a poll, timeout 0,
			 * reads at most one message). */
			left = timeout_ms > 0 ? (long)(deadline - mono_ms()) : 0;
			if (left <= 0)
				return 0;
		}
		first = false;
		rc = zmq_poll(&it, 1, left);
		if (rc < 0)
			return -zmq_errno();
		if (rc == 0)
			return 0;
		if (router) {
			zmq_msg_t idf;

			zmq_msg_init(&idf);
			rc = recv_frame(sock, &idf, ZMQ_DONTWAIT);
			if (rc < 0) {
				zmq_msg_close(&idf);
				if (rc == -EAGAIN)
					continue;
				return rc;
			}
			m->idlen = zmq_msg_size(&idf) <= WIRE_MAX_ID ? zmq_msg_size(&idf) : 0;
			memcpy(m->id, zmq_msg_data(&idf), m->idlen);
			zmq_msg_close(&idf);
			if (!has_more(sock)) {
				if (st)
					st->bad_frames++;
				continue;
			}
		}
		zmq_msg_init(&hf);
		rc = recv_frame(sock, &hf, router ? 0 : ZMQ_DONTWAIT);
		if (rc < 0) {
			zmq_msg_close(&hf);
			if (rc == -EAGAIN)
				continue;
			return rc;
		}
		if (st)
			st->bytes_rx += zmq_msg_size(&hf);
		if (has_more(sock)) {
			zmq_msg_init(&m->frame);
			m->has_frame = true;
			rc = recv_frame(sock, &m->frame, 0);
			if (rc < 0) {
				zmq_msg_close(&hf);
				wire_msg_close(m);
				return rc;
			}
			plen = zmq_msg_size(&m->frame);
			pdata = zmq_msg_data(&m->frame);
			if (st)
				st->bytes_rx += plen;
			/* Anything beyond header + payload is malformed. */
			if (drain(sock, st) > 0)
				pdata = NULL, plen = SIZE_MAX;
		}
		rc = (plen == SIZE_MAX) ? -EBADMSG
					: wire_decode(zmq_msg_data(&hf), zmq_msg_size(&hf), pdata, plen,
						      max_payload, &m->h);
		zmq_msg_close(&hf);
		if (rc < 0) {
			log_debug("wire: dropped bad message (%s)", strerror(-rc));
			if (st)
				st->bad_frames++;
			wire_msg_close(m);
			continue;
		}
		if (plen > 0) {
			if ((uintptr_t)pdata % sizeof(float) != 0) {
				/* Small frames live inside zmq_msg_t and may be unaligned. */
				m->copy = malloc(plen);
				if (!m->copy) {
					wire_msg_close(m);
					return -ENOMEM;
				}
				memcpy(m->copy, pdata, plen);
				m->payload = m->copy;
			} else {
				m->payload = pdata;
			}
			m->n = plen / sizeof(float);
		}
		if (st)
			st->msgs_rx++;
		return 1;
	}
}
