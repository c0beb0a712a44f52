/* netem/linkd_pkt: the NFQUEUE wire format of the emulator's packet path, without I/O.
 *
 * linkd receives one netlink message per queued packet and answers with verdict messages; this
 * module reads the former and writes the latter straight into the caller's buffers (no
 * allocation, no attribute table: the hot path walks each message's attributes once), and
 * decides what the kernel must copy to us per queue:
 * - a link that corrupts or duplicates needs whole packets (the bytes to flip or to inject) and
 *   takes them segmented, each at most one MTU (segmentation offload off for that queue);
 * - every other link needs only the headers (IPv4 and the transport's), and takes segmentation-
 *   offloaded packets whole (NFQA_CFG_F_GSO): one message and one verdict for up to 64 KB
 *   instead of one per segment. Such a packet's real length is NFQA_CAP_LEN, never the bytes
 *   copied; a lossy link's split queue (LINKD_PKT_SPLIT_BIT) takes them segmented.
 * Each packet's receive stamp (NFQA_TIMESTAMP) is parsed: the emulated delay runs from it.
 * Fail-open stays off in both: a packet the kernel cannot queue to us is dropped, as a full
 * link drops it, never passed unshaped.
 *
 * Verdicts of packets released together in arrival order can be one NFQNL_MSG_VERDICT_BATCH
 * (the kernel accepts every queued id up to the given one); linkd_pkt_order tracks which ids are
 * still held so the caller knows when a release is such a prefix. */
#ifndef STALENET_LINKD_PKT_H
#define STALENET_LINKD_PKT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of one verdict message without a payload (nlmsghdr, nfgenmsg, verdict attribute). */
#define LINKD_PKT_VERDICT_LEN 32u

/* One queued packet, as read from its NFQNL_MSG_PACKET message. Pointers are into the message. */
struct linkd_pkt {
	uint32_t id;            /* the queue's packet id (host order) */
	uint32_t len;           /* the packet's real length in bytes (IPv4 header onwards) */
	const uint8_t *data;    /* the bytes copied to us, NULL when none */
	uint32_t data_len;
	bool whole;             /* data holds the whole packet (data_len == len) */
	bool gso;               /* a segmentation-offload super-packet, passed whole */
	uint16_t qnum;          /* the queue it came from */
	int64_t rx_real_ns;     /* the kernel's receive stamp (CLOCK_REALTIME, us resolution), 0 = none */
};

/* Parse one netlink message of msg_len bytes. Returns 1 for a packet (*out filled), 0 for a
 * message of another type (skip it), -EBADMSG for a malformed one. */
int linkd_pkt_parse(const void *msg, size_t msg_len, struct linkd_pkt *out);

/* Bytes linkd_pkt_verdict_put needs for a verdict carrying payload_len bytes (0 = none). */
size_t linkd_pkt_verdict_size(uint32_t payload_len);

/* Write one verdict (NF_ACCEPT, NF_DROP) for packet id of queue qnum at buf, replacing the packet
 * by payload[0..payload_len) when payload is not NULL. Returns the bytes written (a multiple of
 * 4), or 0 when room is too small (nothing written). */
size_t linkd_pkt_verdict_put(void *buf, size_t room, uint16_t qnum, uint32_t id, uint32_t verdict,
			     const void *payload, uint32_t payload_len);

/* Write one batch verdict: verdict for every packet of queue qnum still queued with an id up to
 * max_id (in the kernel's serial order). Returns LINKD_PKT_VERDICT_LEN or 0 (no room). */
size_t linkd_pkt_batch_put(void *buf, size_t room, uint16_t qnum, uint32_t max_id,
			   uint32_t verdict);

/* Copy range for a queue: 0xffff when whole packets are needed, else the headers: an IPv4 header
 * with options and the transport header's first bytes (LINKD_PKT_HDR_COPY), enough for
 * linkd_pkt_l4_payload. */
#define LINKD_PKT_HDR_COPY 80u
uint32_t linkd_pkt_copy_range(bool whole);
/* NFQA_CFG_FLAGS value for a queue (under linkd_pkt_cfg_mask): F_GSO (segmentation-offloaded
 * packets taken whole) unless the queue must see wire-sized segments (segment: a link that
 * duplicates or corrupts, a split queue, a lossy link without one); never
 * F_FAIL_OPEN. */
uint32_t linkd_pkt_cfg_flags(bool segment);
uint32_t linkd_pkt_cfg_mask(void);
/* Write the configuration message for queue qnum: copy mode COPY_PACKET with the range of
 * linkd_pkt_copy_range(whole) and the flags of linkd_pkt_cfg_flags(segment) (whole implies
 * segment), and, when maxlen is not 0, the queue's length. Returns bytes written or 0. */
size_t linkd_pkt_config_put(void *buf, size_t room, uint16_t qnum, bool whole, bool segment,
			    uint32_t maxlen);

/* Transport payload bytes of an IPv4 TCP or UDP packet (len less the IP and transport headers),
 * from the headers copied; -1 when they were not copied or are not TCP/UDP over IPv4. */
int32_t linkd_pkt_l4_payload(const struct linkd_pkt *pk);

/* A lossy link takes offloaded packets whole at its queue and sends one that must lose some of
 * its segments on to a second queue of the same namespace, which takes packets segmented (a
 * verdict NF_QUEUE to that queue: the kernel segments it there). Its number: the link's own with
 * the top bit set, so links must use queues below LINKD_PKT_SPLIT_BIT. */
#define LINKD_PKT_SPLIT_BIT 0x8000u
/* The NF_QUEUE verdict that moves a packet to queue qnum (nf_queue's verdict encoding). */
uint32_t linkd_pkt_queue_verdict(uint16_t qnum);

/* Ids of one queue the emulator has received and not yet given a verdict, in arrival order.
 * The kernel numbers a queue's packets serially (wrapping at 2^32) and keeps them in that order;
 * a batch verdict up to id x is right only when every held id up to x is being released. A ring
 * of cap bits (a power of two, at least the queue's maxlen) starting at the oldest held id. */
struct linkd_pkt_order {
	uint64_t *bits;         /* held ids, bit (id & (cap - 1)) */
	uint32_t cap;
	uint32_t base;          /* the oldest held id (valid when n > 0) */
	uint32_t next;          /* one past the newest id received */
	uint32_t n;             /* held ids */
};

/* Allocate an empty order of cap ids (rounded up to a power of two, >= 64; it grows as needed).
 * Returns 0 or -ENOMEM. */
int linkd_pkt_order_init(struct linkd_pkt_order *o, uint32_t cap);
void linkd_pkt_order_free(struct linkd_pkt_order *o);
/* Record id as held. Ids must come in the kernel's order (an id not after the newest held one:
 * -ERANGE); the ring grows to span every held id (-ENOMEM when it cannot). On an error the
 * order no longer covers every held id: the caller must stop batching that queue. */
int linkd_pkt_order_hold(struct linkd_pkt_order *o, uint32_t id);
/* id got its verdict (or is about to). Returns true when id was the oldest held id, i.e. a
 * verdict for it may be merged into a batch verdict "up to id" with the ones before it. */
bool linkd_pkt_order_done(struct linkd_pkt_order *o, uint32_t id);

#endif
