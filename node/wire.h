/* node/wire: the data-plane message format, framed over ZeroMQ.
 *
 * A message is one header frame of exactly WIRE_HEADER_BYTES and, when the header's payload_len
 * is non-zero, one payload frame of exactly payload_len bytes: little-endian float32 values
 * (payload_len is a multiple of 4 and at most the receiver's limit). On a ROUTER socket a
 * routing-id frame precedes them. Header layout (little-endian, no padding):
 *
 *   off size field
 *    0   4   magic          WIRE_MAGIC ("SNW1")
 *    4   2   version        WIRE_VERSION
 *    6   2   type           enum wire_type
 *    8   4   sender         sender id (worker index; WIRE_SENDER_SERVER for servers)
 *   12   4   payload_len    payload bytes (0 = no payload frame)
 *   16   8   step           sender's step / clock (int64)
 *   24   8   model_version  model version carried, or computed on (int64)
 *   32   8   aux            type-specific integer (PUSH: samples in the minibatch; ACK: staleness)
 *   40   8   value          type-specific IEEE double (PUSH: minibatch loss)
 *   48   8   checksum       wire_hash64(payload, seed = wire_hash64(bytes 0..47, 0))
 *
 * The checksum covers the header and the payload. wire_hash64 is a 4-lane multiply-rotate hash
 * (the structure of xxHash64, our own code) that runs near memory bandwidth, so checking an
 * 814 KB model costs far less than moving it. Every field is checked before the payload is
 * touched, then every payload float must be finite (NaN and infinities are rejected, denormals
 * pass); a message failing any check is counted in bad_frames and dropped, never returned.
 *
 * Zero copy: payloads can be sent from a reference-counted struct wire_buf (zmq_msg_init_data;
 * ZeroMQ drops the reference when the bytes are on the wire), and a received payload is read in
 * place from the ZeroMQ message. */
#ifndef STALENET_WIRE_H
#define STALENET_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "lib/limits.h"

#define WIRE_MAGIC 0x31574e53u /* "SNW1" as little-endian bytes */
#define WIRE_VERSION 1
#define WIRE_HEADER_BYTES 56
#define WIRE_SENDER_SERVER 0xffffffffu
/* Largest payload any socket accepts unless told otherwise: LIMITS_MAX_PARAMS floats (64 Mi). */
#define WIRE_MAX_PAYLOAD_BYTES (LIMITS_MAX_PARAMS * 4u)
#define WIRE_MAX_ID 255

enum wire_type {
	WIRE_PULL = 1,     /* worker -> server: send me the model */
	WIRE_MODEL,        /* server -> worker: model payload, model_version */
	WIRE_PUSH,         /* worker -> server: update payload, model_version it was computed on */
	WIRE_ACK,          /* server -> worker: update handled (aux = staleness, -1 if dropped) */
	WIRE_BARRIER,      /* worker -> server: may I start step `step`+1? (step = my clock) */
	WIRE_BARRIER_OK,   /* server -> worker: yes */
	WIRE_CLOCK_REQ,    /* peer -> peer: what is your clock? */
	WIRE_CLOCK_REP,    /* peer -> peer: my clock is `step` */
	WIRE_BYE,          /* either way: the run is over / I am leaving */
	WIRE_HELLO,        /* worker -> server: I am (re)joining; also a keep-alive */
	WIRE_TYPE_END
};

struct wire_header {
	uint16_t type;
	uint32_t sender;
	uint32_t payload_len;
	int64_t step;
	int64_t model_version;
	int64_t aux;
	double value;
};

/* Counters of one endpoint. bytes count header + payload frames (not routing ids). */
struct wire_stats {
	uint64_t msgs_tx, msgs_rx;
	uint64_t bytes_tx, bytes_rx;
	uint64_t bad_frames;
};

/* Reasons a decode fails (negative errno returned to the caller, counted in bad_frames). */
/* -EBADMSG: wrong size/magic/checksum; -EPROTO: wrong version or unknown type;
 * -EMSGSIZE: payload length over the limit or not a multiple of 4; -EDOM: a payload float is NaN
 * or infinite; -EINVAL: NULL arguments. */

/* The 64-bit checksum hash of len bytes with a seed. */
uint64_t wire_hash64(const void *data, size_t len, uint64_t seed);

/* Name of a message type ("?" when unknown). */
const char *wire_type_name(int type);

/* Serialize h (for a payload of h->payload_len bytes at payload) into out, checksum included. */
void wire_header_encode(const struct wire_header *h, const void *payload,
			uint8_t out[WIRE_HEADER_BYTES]);

/* True when each of the n little-endian float32 values at payload (any alignment) is finite
 * (denormals included); false on any NaN (quiet or signalling) or infinity. One pass, no branch
 * per value. */
bool wire_payload_finite(const void *payload, size_t n);

/* Validate raw frames and fill out: hdr must be exactly WIRE_HEADER_BYTES with valid magic,
 * version and type; payload_len must be <= max_payload, a multiple of 4, and equal to plen
 * (payload may be NULL iff plen == 0); the checksum must match; every payload float must be
 * finite. Returns 0 or -errno (above). Pure: no allocation, safe on any bytes. */
int wire_decode(const void *hdr, size_t hlen, const void *payload, size_t plen,
		size_t max_payload, struct wire_header *out);

/* --- reference-counted payload buffers (zero-copy sends) -------------------------------- */

struct wire_buf;

/* A buffer of n floats (64-byte aligned), refcount 1. NULL on allocation failure. */
struct wire_buf *wire_buf_new(size_t n);
float *wire_buf_data(struct wire_buf *self);
size_t wire_buf_len(const struct wire_buf *self);
/* Take one more reference (thread-safe). Returns self. */
struct wire_buf *wire_buf_ref(struct wire_buf *self);
/* Drop a reference; frees at zero; accepts NULL; sets *self = NULL (thread-safe). */
void wire_buf_unref(struct wire_buf **self);

/* --- sockets ------------------------------------------------------------------------------ */

/* Set ZMQ_MAXMSGSIZE (max_payload bytes, at least the header size), linger 0 and large
 * socket buffers on sock. Returns 0 or -errno. */
int wire_socket_setup(void *sock, size_t max_payload);

/* Watch sock's connection events (a ZMQ_EVENT_* mask) through a PAIR socket on ctx, returned
 * in *mon (the caller closes it with zmq_close before sock). name makes the inproc endpoint
 * unique within ctx. Returns 0 or -errno. */
int wire_monitor_open(void *ctx, void *sock, int events, const char *name, void **mon);

/* The next event of a monitor without waiting: 1 with *event (ZMQ_EVENT_*) and *value (the
 * fd for connection events), 0 when there is none. */
int wire_monitor_next(void *mon, uint16_t *event, uint32_t *value);

/* Send one message. id/idlen: routing id to prepend (ROUTER sockets), or NULL. The payload is
 * either copied from `payload` (h->payload_len bytes) or, when buf is not NULL, sent zero-copy
 * from buf (the first h->payload_len bytes; a reference is taken and released by ZeroMQ).
 * Blocks unless dontwait. Returns 0 or -errno (-EAGAIN with dontwait when it would block). */
int wire_send(void *sock, const void *id, size_t idlen, const struct wire_header *h,
	      const void *payload, struct wire_buf *buf, bool dontwait, struct wire_stats *st);

/* One received message. The payload points into the received ZeroMQ frame (valid until
 * wire_msg_close), 4-byte aligned, payload_len bytes (n floats). */
struct wire_msg {
	struct wire_header h;
	const float *payload;
	size_t n;
	uint8_t id[WIRE_MAX_ID];
	size_t idlen;
	zmq_msg_t frame;       /* owns the payload bytes */
	bool has_frame;
	float *copy;           /* owns them instead when the frame was not aligned */
};

/* Receive one message on sock (router: expect a routing-id frame first). Invalid messages are
 * consumed whole, counted in st->bad_frames and skipped; the call then waits for the next, but
 * never past timeout_ms from the call (a poll, 0, skips at most one). timeout_ms: -1 forever,
 * 0 poll, else ms. Returns 1 with *m filled (close it with
 * wire_msg_close), 0 on timeout, -EINTR when interrupted, other -errno on failure. */
int wire_recv(void *sock, bool router, size_t max_payload, int timeout_ms, struct wire_msg *m,
	      struct wire_stats *st);

/* Release what m holds; safe to call twice. */
void wire_msg_close(struct wire_msg *m);

#endif
