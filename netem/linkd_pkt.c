/* netem/linkd_pkt: NFQUEUE messages of the emulator's packet path (see the header). */
#include "netem/linkd_pkt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN4(x) (((x) + 3u) & ~(size_t)3u)
#define HDR_LEN (ALIGN4(sizeof(struct nlmsghdr)) + ALIGN4(sizeof(struct nfgenmsg)))
#define WHOLE_RANGE 0xffffu

_Static_assert(HDR_LEN + ALIGN4(sizeof(struct nlattr)) + sizeof(struct nfqnl_msg_verdict_hdr) ==
		       LINKD_PKT_VERDICT_LEN, "verdict message layout");

static uint32_t get_be32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof v);
	return ntohl(v);
}

int linkd_pkt_parse(const void *msg, size_t msg_len, struct linkd_pkt *out)
{
	const uint8_t *m = msg;
	struct nlmsghdr nlh;
	bool have_hdr = false, have_cap = false;
	uint32_t cap_len = 0, info = 0;

	if (msg_len < sizeof nlh)
		return -EBADMSG;
	memcpy(&nlh, m, sizeof nlh);
	if (nlh.nlmsg_len < HDR_LEN || nlh.nlmsg_len > msg_len)
		return -EBADMSG;
	if (NFNL_SUBSYS_ID(nlh.nlmsg_type) != NFNL_SUBSYS_QUEUE ||
	    NFNL_MSG_TYPE(nlh.nlmsg_type) != NFQNL_MSG_PACKET)
		return 0;
	memset(out, 0, sizeof *out);
	{
		struct nfgenmsg g;

		memcpy(&g, m + ALIGN4(sizeof nlh), sizeof g);
		out->qnum = ntohs(g.res_id);
	}
	for (size_t off = HDR_LEN; off + sizeof(struct nlattr) <= nlh.nlmsg_len;) {
		struct nlattr a;
		memcpy(&a, m + off, sizeof a);
		if (a.nla_len < sizeof a || a.nla_len > nlh.nlmsg_len - off)
			return -EBADMSG;
		const uint8_t *val = m + off + sizeof a;
		uint32_t vlen = a.nla_len - (uint32_t)sizeof a;
		switch (a.nla_type & NLA_TYPE_MASK) {
		case NFQA_PACKET_HDR:
			if (vlen < sizeof(struct nfqnl_msg_packet_hdr))
				return -EBADMSG;
			out->id = get_be32(val); /* packet_id is the first member */
			have_hdr = true;
			break;
		case NFQA_PAYLOAD:
			out->data = val;
			out->data_len = vlen;
			break;
		case NFQA_CAP_LEN:
			if (vlen < 4)
				return -EBADMSG;
			cap_len = get_be32(val);
			have_cap = true;
			break;
		case NFQA_SKB_INFO:
			if (vlen < 4)
				return -EBADMSG;
			info = get_be32(val);
			break;
		case NFQA_TIMESTAMP: {
			/* struct nfqnl_msg_packet_timestamp: two big-endian 64-bit words, sec and usec */
			if (vlen < 16)
				return -EBADMSG;
			uint64_t sec = ((uint64_t)get_be32(val) << 32) | get_be32(val + 4);
			uint64_t usec = ((uint64_t)get_be32(val + 8) << 32) | get_be32(val + 12);

			if (sec > 0 && sec < (uint64_t)INT64_MAX / 1000000000 - 1 && usec < 1000000)
				out->rx_real_ns = (int64_t)(sec * 1000000000u + usec * 1000u);
			break;
		}
		default:
			break;
		}
		off += ALIGN4(a.nla_len);
	}
	if (!have_hdr)
		return -EBADMSG;
	/* The kernel sends CAP_LEN only when it copied less than the packet. */
	out->len = have_cap && cap_len > out->data_len ? cap_len : out->data_len;
	out->whole = out->data && out->data_len == out->len;
	out->gso = (info & NFQA_SKB_GSO) != 0;
	return 1;
}

size_t linkd_pkt_verdict_size(uint32_t payload_len)
{
	return LINKD_PKT_VERDICT_LEN + (payload_len ? ALIGN4(sizeof(struct nlattr) + payload_len) : 0);
}

/* The nlmsghdr + nfgenmsg of a request of the queue subsystem; returns HDR_LEN. */
static size_t put_header(uint8_t *b, uint16_t msg_type, uint16_t qnum, uint32_t len)
{
	struct nlmsghdr nlh = {
		.nlmsg_len = len,
		.nlmsg_type = (uint16_t)((NFNL_SUBSYS_QUEUE << 8) | msg_type),
		.nlmsg_flags = NLM_F_REQUEST,
	};
	struct nfgenmsg g = { .nfgen_family = AF_UNSPEC, .version = NFNETLINK_V0, .res_id = htons(qnum) };
	memset(b, 0, HDR_LEN);
	memcpy(b, &nlh, sizeof nlh);
	memcpy(b + ALIGN4(sizeof nlh), &g, sizeof g);
	return HDR_LEN;
}

/* One attribute of type t with vlen bytes of v at b; returns its aligned size. */
static size_t put_attr(uint8_t *b, uint16_t t, const void *v, uint32_t vlen)
{
	struct nlattr a = { .nla_len = (uint16_t)(sizeof a + vlen), .nla_type = t };
	size_t total = ALIGN4(sizeof a + vlen);
	memcpy(b, &a, sizeof a);
	if (vlen)
		memcpy(b + sizeof a, v, vlen);
	memset(b + sizeof a + vlen, 0, total - sizeof a - vlen);
	return total;
}

static size_t put_verdict(void *buf, size_t room, uint16_t type, uint16_t qnum, uint32_t id,
			  uint32_t verdict, const void *payload, uint32_t payload_len)
{
	size_t need = linkd_pkt_verdict_size(payload ? payload_len : 0);
	uint8_t *b = buf;

	if (need > room || (payload && sizeof(struct nlattr) + payload_len > UINT16_MAX))
		return 0;
	size_t off = put_header(b, type, qnum, (uint32_t)need);
	struct nfqnl_msg_verdict_hdr vh = { .verdict = htonl(verdict), .id = htonl(id) };
	off += put_attr(b + off, NFQA_VERDICT_HDR, &vh, sizeof vh);
	if (payload && payload_len)
		off += put_attr(b + off, NFQA_PAYLOAD, payload, payload_len);
	return off;
}

size_t linkd_pkt_verdict_put(void *buf, size_t room, uint16_t qnum, uint32_t id, uint32_t verdict,
			     const void *payload, uint32_t payload_len)
{
	return put_verdict(buf, room, NFQNL_MSG_VERDICT, qnum, id, verdict, payload, payload_len);
}

size_t linkd_pkt_batch_put(void *buf, size_t room, uint16_t qnum, uint32_t max_id,
			   uint32_t verdict)
{
	return put_verdict(buf, room, NFQNL_MSG_VERDICT_BATCH, qnum, max_id, verdict, NULL, 0);
}

uint32_t linkd_pkt_copy_range(bool whole)
{
	return whole ? WHOLE_RANGE : LINKD_PKT_HDR_COPY;
}

int32_t linkd_pkt_l4_payload(const struct linkd_pkt *pk)
{
	const uint8_t *d = pk->data;
	uint32_t ihl, thl;

	if (!d || pk->data_len < 20 || (d[0] >> 4) != 4)
		return -1;
	ihl = (uint32_t)(d[0] & 15u) * 4u;
	if (ihl < 20 || pk->data_len < ihl)
		return -1;
	if (d[9] == 17) {                       /* UDP */
		thl = 8;
	} else if (d[9] == 6) {                 /* TCP: data offset, byte 12 */
		if (pk->data_len < ihl + 13)
			return -1;
		thl = (uint32_t)(d[ihl + 12] >> 4) * 4u;
		if (thl < 20)
			return -1;
	} else {
		return -1;
	}
	return pk->len >= ihl + thl && pk->len - ihl - thl <= INT32_MAX ? (int32_t)(pk->len - ihl - thl) : -1;
}

uint32_t linkd_pkt_queue_verdict(uint16_t qnum)
{
	return NF_QUEUE | ((uint32_t)qnum << 16);
}

uint32_t linkd_pkt_cfg_flags(bool segment)
{
	return segment ? 0 : NFQA_CFG_F_GSO;
}

uint32_t linkd_pkt_cfg_mask(void)
{
	return NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN;
}

size_t linkd_pkt_config_put(void *buf, size_t room, uint16_t qnum, bool whole, bool segment,
			    uint32_t maxlen)
{
	uint8_t *b = buf;
	size_t need = HDR_LEN + ALIGN4(sizeof(struct nlattr) + sizeof(struct nfqnl_msg_config_params)) +
		      (maxlen ? 8 : 0) + 8 + 8;

	if (need > room)
		return 0;
	size_t off = put_header(b, NFQNL_MSG_CONFIG, qnum, (uint32_t)need);
	struct nfqnl_msg_config_params p = { .copy_range = htonl(linkd_pkt_copy_range(whole)),
					     .copy_mode = NFQNL_COPY_PACKET };
	off += put_attr(b + off, NFQA_CFG_PARAMS, &p, sizeof p);
	if (maxlen) {
		uint32_t v = htonl(maxlen);
		off += put_attr(b + off, NFQA_CFG_QUEUE_MAXLEN, &v, sizeof v);
	}
	uint32_t flags = htonl(linkd_pkt_cfg_flags(whole || segment)), mask = htonl(linkd_pkt_cfg_mask());
	off += put_attr(b + off, NFQA_CFG_FLAGS, &flags, sizeof flags);
	off += put_attr(b + off, NFQA_CFG_MASK, &mask, sizeof mask);
	return off;
}

/* --- held ids in arrival order -------------------------------------------------------------- */

static bool bit_get(const struct linkd_pkt_order *o, uint32_t id)
{
	uint32_t i = id & (o->cap - 1);
	return (o->bits[i / 64] >> (i % 64)) & 1u;
}

static void bit_set(struct linkd_pkt_order *o, uint32_t id, bool on)
{
	uint32_t i = id & (o->cap - 1);
	uint64_t m = (uint64_t)1 << (i % 64);
	if (on)
		o->bits[i / 64] |= m;
	else
		o->bits[i / 64] &= ~m;
}

int linkd_pkt_order_init(struct linkd_pkt_order *o, uint32_t cap)
{
	uint32_t c = 64;
	while (c < cap && c < (1u << 31))
		c <<= 1;
	memset(o, 0, sizeof *o);
	o->bits = calloc(c / 64, sizeof *o->bits);
	if (!o->bits)
		return -ENOMEM;
	o->cap = c;
	return 0;
}

void linkd_pkt_order_free(struct linkd_pkt_order *o)
{
	free(o->bits);
	memset(o, 0, sizeof *o);
}

/* Double the ring until ids base..base+span fit; the held bits move to their new places. */
static int grow(struct linkd_pkt_order *o, uint32_t span)
{
	uint32_t c = o->cap;
	while (c <= span) {
		if (c >= (1u << 31))
			return -ERANGE;
		c <<= 1;
	}
	struct linkd_pkt_order n = { .cap = c, .base = o->base, .next = o->next, .n = o->n };
	n.bits = calloc(c / 64, sizeof *n.bits);
	if (!n.bits)
		return -ENOMEM;
	for (uint32_t id = o->base; id != o->next; id++)
		if (bit_get(o, id))
			bit_set(&n, id, true);
	free(o->bits);
	*o = n;
	return 0;
}

int linkd_pkt_order_hold(struct linkd_pkt_order *o, uint32_t id)
{
	if (o->n == 0) {
		o->base = id;
		o->next = id;
	}
	uint32_t span = id - o->base; /* serial arithmetic: ids wrap at 2^32 */
	if (span >= (1u << 31) || id - o->next >= (1u << 31))
		return -ERANGE; /* older than what we hold: not the kernel's order */
	if (span >= o->cap) {
		int rc = grow(o, span);
		if (rc < 0)
			return rc;
	}
	bit_set(o, id, true);
	o->n++;
	o->next = id + 1;
	return 0;
}

bool linkd_pkt_order_done(struct linkd_pkt_order *o, uint32_t id)
{
	if (o->n == 0 || id - o->base >= o->next - o->base || !bit_get(o, id))
		return false;
	bit_set(o, id, false);
	o->n--;
	if (id != o->base)
		return false;
	if (o->n == 0) {
		o->base = o->next;
		return true;
	}
	/* The next held id: scan word by word (held ids exist before next). */
	uint32_t x = id + 1;
	for (;;) {
		uint32_t i = x & (o->cap - 1);
		uint64_t w = o->bits[i / 64] >> (i % 64);
		if (w) {
			x += (uint32_t)__builtin_ctzll(w);
			break;
		}
		x += 64 - i % 64;
	}
	o->base = x;
	return true;
}
