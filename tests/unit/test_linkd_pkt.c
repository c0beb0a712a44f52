/* Unit tests for netem/linkd_pkt: verdict and configuration messages byte for byte against
 * libnetfilter_queue's builders, packet messages parsed (real length of a header-only copy and of
 * a segmentation-offload packet, malformed attributes refused), and the held-id order against a
 * naive model, across the 2^32 wrap and through ring growth; batch verdicts against a simulated
 * kernel queue (none may take a packet still held). */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netem/linkd_pkt.h"

Test(linkd_pkt, verdict_matches_libnetfilter_queue)
{
	char want[256], got[256];
	uint8_t pay[37];

	for (size_t i = 0; i < sizeof pay; i++)
		pay[i] = (uint8_t)(i * 7 + 1);
	memset(want, 0, sizeof want);
	memset(got, 0x5a, sizeof got);
	struct nlmsghdr *nlh = nfq_nlmsg_put(want, NFQNL_MSG_VERDICT, 513);
	nfq_nlmsg_verdict_put(nlh, 0x01020304, NF_DROP);
	size_t n = linkd_pkt_verdict_put(got, sizeof got, 513, 0x01020304, NF_DROP, NULL, 0);
	cr_assert_eq(n, nlh->nlmsg_len);
	cr_assert_eq(n, LINKD_PKT_VERDICT_LEN);
	cr_assert_eq(memcmp(want, got, n), 0);

	memset(want, 0, sizeof want);
	nlh = nfq_nlmsg_put(want, NFQNL_MSG_VERDICT, 7);
	nfq_nlmsg_verdict_put(nlh, 99, NF_ACCEPT);
	nfq_nlmsg_verdict_put_pkt(nlh, pay, sizeof pay);
	n = linkd_pkt_verdict_put(got, sizeof got, 7, 99, NF_ACCEPT, pay, sizeof pay);
	cr_assert_eq(n, nlh->nlmsg_len);
	cr_assert_eq(n, linkd_pkt_verdict_size(sizeof pay));
	cr_assert_eq(memcmp(want, got, n), 0);

	memset(want, 0, sizeof want);
	nlh = nfq_nlmsg_put(want, NFQNL_MSG_VERDICT_BATCH, 3);
	nfq_nlmsg_verdict_put(nlh, 1234, NF_ACCEPT);
	n = linkd_pkt_batch_put(got, sizeof got, 3, 1234, NF_ACCEPT);
	cr_assert_eq(n, nlh->nlmsg_len);
	cr_assert_eq(memcmp(want, got, n), 0);

	/* no room: nothing written */
	memset(got, 0x5a, sizeof got);
	cr_assert_eq(linkd_pkt_verdict_put(got, LINKD_PKT_VERDICT_LEN - 1, 1, 1, NF_ACCEPT, NULL, 0), 0);
	cr_assert_eq(linkd_pkt_verdict_put(got, 40, 1, 1, NF_ACCEPT, pay, sizeof pay), 0);
	cr_assert_eq((uint8_t)got[0], 0x5a);
}

struct cfg_seen {
	bool params, maxlen, flags, mask;
	uint32_t range, mode, qmax, fl, mk;
};

static int cfg_attr(const struct nlattr *a, void *data)
{
	struct cfg_seen *s = data;
	switch (mnl_attr_get_type(a)) {
	case NFQA_CFG_PARAMS: {
		const struct nfqnl_msg_config_params *p = mnl_attr_get_payload(a);
		s->params = true;
		s->range = ntohl(p->copy_range);
		s->mode = p->copy_mode;
		break;
	}
	case NFQA_CFG_QUEUE_MAXLEN:
		s->maxlen = true;
		s->qmax = ntohl(mnl_attr_get_u32(a));
		break;
	case NFQA_CFG_FLAGS:
		s->flags = true;
		s->fl = ntohl(mnl_attr_get_u32(a));
		break;
	case NFQA_CFG_MASK:
		s->mask = true;
		s->mk = ntohl(mnl_attr_get_u32(a));
		break;
	}
	return MNL_CB_OK;
}

static struct cfg_seen parse_cfg(const char *buf, size_t n, uint16_t qnum)
{
	struct cfg_seen s = { 0 };
	const struct nlmsghdr *nlh = (const struct nlmsghdr *)buf;
	cr_assert_eq(nlh->nlmsg_len, n);
	cr_assert_eq(nlh->nlmsg_type, (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_CONFIG);
	const struct nfgenmsg *g = mnl_nlmsg_get_payload(nlh);
	cr_assert_eq(ntohs(g->res_id), qnum);
	cr_assert_eq(mnl_attr_parse(nlh, sizeof *g, cfg_attr, &s), MNL_CB_OK);
	return s;
}

Test(linkd_pkt, config_per_queue)
{
	char buf[128];
	size_t n = linkd_pkt_config_put(buf, sizeof buf, 42, false, false, 65536);
	cr_assert_gt(n, 0);
	struct cfg_seen s = parse_cfg(buf, n, 42);
	cr_assert(s.params && s.maxlen && s.flags && s.mask);
	cr_assert_eq(s.mode, NFQNL_COPY_PACKET);
	cr_assert_eq(s.range, LINKD_PKT_HDR_COPY); /* the headers only */
	cr_assert_eq(s.qmax, 65536);
	cr_assert_eq(s.fl, NFQA_CFG_F_GSO);
	cr_assert_eq(s.mk & (NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN), NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN);

	/* a lossy link: the header only, but wire-sized segments */
	n = linkd_pkt_config_put(buf, sizeof buf, 7, false, true, 0);
	s = parse_cfg(buf, n, 7);
	cr_assert_eq(s.range, LINKD_PKT_HDR_COPY);
	cr_assert_eq(s.fl, 0);
	cr_assert_eq(s.mk & NFQA_CFG_F_GSO, NFQA_CFG_F_GSO);

	n = linkd_pkt_config_put(buf, sizeof buf, 9, true, false, 0);
	s = parse_cfg(buf, n, 9);
	cr_assert(s.params && !s.maxlen && s.flags && s.mask);
	cr_assert_eq(s.range, 0xffff);
	cr_assert_eq(s.fl, 0); /* segmented, whole packets; never fail-open */
	cr_assert_eq(linkd_pkt_config_put(buf, 16, 9, true, false, 0), 0);
}

/* A packet message as the kernel builds it: header, then the given attributes. */
static size_t packet_msg(char *buf, size_t room, uint32_t id, const void *pay, uint32_t plen,
			 int64_t cap_len, int64_t skb_info)
{
	memset(buf, 0, room);
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET;
	struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
	g->res_id = htons(5);
	struct nfqnl_msg_packet_hdr ph = { .packet_id = htonl(id), .hw_protocol = htons(0x0800), .hook = 0 };
	mnl_attr_put_u32(nlh, NFQA_MARK, htonl(77)); /* an attribute we do not use comes first */
	mnl_attr_put(nlh, NFQA_PACKET_HDR, sizeof ph, &ph);
	if (pay)
		mnl_attr_put(nlh, NFQA_PAYLOAD, plen, pay);
	if (cap_len >= 0)
		mnl_attr_put_u32(nlh, NFQA_CAP_LEN, htonl((uint32_t)cap_len));
	if (skb_info >= 0)
		mnl_attr_put_u32(nlh, NFQA_SKB_INFO, htonl((uint32_t)skb_info));
	return nlh->nlmsg_len;
}

Test(linkd_pkt, parse_packets)
{
	char buf[2048];
	uint8_t ip[60];
	struct linkd_pkt p;

	memset(ip, 0xab, sizeof ip);
	/* header-only copy of a 64 KB segmentation-offload packet */
	size_t n = packet_msg(buf, sizeof buf, 0xdeadbeef, ip, 20, 65226, NFQA_SKB_GSO | NFQA_SKB_CSUMNOTREADY);
	cr_assert_eq(linkd_pkt_parse(buf, n, &p), 1);
	cr_assert_eq(p.id, 0xdeadbeef);
	cr_assert_eq(p.len, 65226);
	cr_assert_eq(p.data_len, 20);
	cr_assert_eq(p.data[0], 0xab);
	cr_assert(!p.whole);
	cr_assert(p.gso);
	cr_assert_eq(p.qnum, 5);
	cr_assert_eq(p.rx_real_ns, 0); /* no timestamp attribute */

	/* a whole copy: no CAP_LEN, the copy is the packet */
	n = packet_msg(buf, sizeof buf, 3, ip, 57, -1, -1);
	cr_assert_eq(linkd_pkt_parse(buf, n, &p), 1);
	cr_assert_eq(p.len, 57);
	cr_assert_eq(p.data_len, 57);
	cr_assert(p.whole);
	cr_assert(!p.gso);

	/* metadata only */
	n = packet_msg(buf, sizeof buf, 4, NULL, 0, 1500, 0);
	cr_assert_eq(linkd_pkt_parse(buf, n, &p), 1);
	cr_assert_eq(p.len, 1500);
	cr_assert_null(p.data);
	cr_assert(!p.whole);

	/* another message type is skipped */
	struct nlmsghdr *nlh = (struct nlmsghdr *)buf;
	nlh->nlmsg_type = NLMSG_ERROR;
	cr_assert_eq(linkd_pkt_parse(buf, n, &p), 0);
}

Test(linkd_pkt, parse_refuses_malformed)
{
	char buf[512];
	uint8_t ip[20] = { 0x45 };
	struct linkd_pkt p;

	size_t n = packet_msg(buf, sizeof buf, 1, ip, sizeof ip, 100, 0);
	cr_assert_eq(linkd_pkt_parse(buf, n - 1, &p), -EBADMSG);    /* message cut short */
	cr_assert_eq(linkd_pkt_parse(buf, 8, &p), -EBADMSG);
	struct nlmsghdr *nlh = (struct nlmsghdr *)buf;
	struct nlattr *a = (struct nlattr *)((char *)nlh + NLMSG_HDRLEN + MNL_ALIGN(sizeof(struct nfgenmsg)));
	uint16_t keep = a->nla_len;
	a->nla_len = (uint16_t)(n + 4);                              /* attribute past the end */
	cr_assert_eq(linkd_pkt_parse(buf, n, &p), -EBADMSG);
	a->nla_len = 2;                                              /* shorter than its header */
	cr_assert_eq(linkd_pkt_parse(buf, n, &p), -EBADMSG);
	a->nla_len = keep;
	n = packet_msg(buf, sizeof buf, 1, NULL, 0, 100, 0);
	/* no packet header: the id is unknown */
	struct nlattr *h = (struct nlattr *)((char *)a + MNL_ALIGN(a->nla_len));
	cr_assert_eq(h->nla_type, NFQA_PACKET_HDR);
	h->nla_type = NFQA_UID;
	cr_assert_eq(linkd_pkt_parse(buf, n, &p), -EBADMSG);
	h->nla_type = NFQA_PACKET_HDR;
	h->nla_len = 4 + 3;                                          /* too short a packet header */
	cr_assert_eq(linkd_pkt_parse(buf, n, &p), -EBADMSG);
}

/* Naive model: a list of held ids in arrival order. */
struct naive {
	uint32_t v[1 << 16];
	size_t n;
};

static bool naive_done(struct naive *m, uint32_t id)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i] == id) {
			memmove(m->v + i, m->v + i + 1, (m->n - i - 1) * sizeof m->v[0]);
			m->n--;
			return i == 0;
		}
	return false;
}

static void order_vs_naive(uint32_t start, uint32_t cap, unsigned seed, int steps)
{
	static struct naive m;
	struct linkd_pkt_order o;
	uint32_t next = start;

	m.n = 0;
	srand(seed);
	cr_assert_eq(linkd_pkt_order_init(&o, cap), 0);
	for (int s = 0; s < steps; s++) {
		int r = rand() % 100;
		if (r < 50 && m.n < 4000) {
			next += (uint32_t)(rand() % 3); /* gaps: ids answered at once are never held */
			cr_assert_eq(linkd_pkt_order_hold(&o, next), 0);
			m.v[m.n++] = next++;
		} else if (m.n) {
			/* mostly the oldest few (a delay line), sometimes any (jitter) */
			size_t i = rand() % 4 ? (size_t)(rand() % (m.n < 3 ? m.n : 3)) : (size_t)rand() % m.n;
			uint32_t id = m.v[i];
			cr_assert_eq(linkd_pkt_order_done(&o, id), naive_done(&m, id), "step %d id %u", s, id);
			cr_assert_eq(o.n, m.n);
			if (m.n)
				cr_assert_eq(o.base, m.v[0]);
		}
		/* not held: never the oldest */
		cr_assert(!linkd_pkt_order_done(&o, next + 5));
	}
	while (m.n) {
		uint32_t id = m.v[m.n - 1];
		cr_assert_eq(linkd_pkt_order_done(&o, id), m.n == 1);
		m.n--;
	}
	cr_assert(!linkd_pkt_order_done(&o, start));
	linkd_pkt_order_free(&o);
}

Test(linkd_pkt, order_matches_naive_model)
{
	order_vs_naive(1, 1 << 16, 1, 100000);
	order_vs_naive(0xfffff000u, 1 << 16, 2, 100000);   /* across the wrap */
	order_vs_naive(0xffffffc0u, 64, 3, 100000);        /* from the smallest ring, grown */
}

Test(linkd_pkt, order_refuses_old_ids_and_grows)
{
	struct linkd_pkt_order o;
	cr_assert_eq(linkd_pkt_order_init(&o, 10), 0);
	cr_assert_eq(o.cap, 64);
	cr_assert_eq(linkd_pkt_order_hold(&o, 100), 0);
	cr_assert_eq(linkd_pkt_order_hold(&o, 100), -ERANGE);
	cr_assert_eq(linkd_pkt_order_hold(&o, 99), -ERANGE);
	cr_assert_eq(linkd_pkt_order_hold(&o, 100 + 1000), 0);
	cr_assert_geq(o.cap, 1024);
	cr_assert(!linkd_pkt_order_done(&o, 1100));
	cr_assert(linkd_pkt_order_done(&o, 100));
	cr_assert_eq(o.n, 0);
	linkd_pkt_order_free(&o);
}

/* The kernel's side of batch verdicts, simulated: its queue holds every id not yet given a
 * verdict, in id order; a batch verdict up to x takes every queued id up to x. The emulator's
 * rule (as in netem/linkd): a release joins the open batch when linkd_pkt_order_done says it
 * was the oldest held id; any other verdict first closes the batch. No id may ever leave the
 * kernel's queue before the emulator released or dropped it. */
struct kq {
	uint32_t id[8192];
	size_t n;
	char state[8192];  /* by id - first: 'h' held, 'r' released or dropped, 'g' gone from the kernel */
	uint32_t first;
	uint64_t batches, batched;
};

static void kq_verdict(struct kq *k, uint32_t id)
{
	for (size_t i = 0; i < k->n; i++)
		if (k->id[i] == id) {
			cr_assert_eq(k->state[id - k->first], 'r', "id %u got a verdict while held", id);
			k->state[id - k->first] = 'g';
			memmove(k->id + i, k->id + i + 1, (k->n - i - 1) * sizeof k->id[0]);
			k->n--;
			return;
		}
	cr_assert_fail("verdict for id %u not queued", id);
}

static void kq_batch(struct kq *k, uint32_t max_id)
{
	size_t i = 0;
	while (i < k->n && (int32_t)(k->id[i] - max_id) <= 0) {
		cr_assert_eq(k->state[k->id[i] - k->first], 'r', "batch up to %u takes held id %u", max_id, k->id[i]);
		k->state[k->id[i] - k->first] = 'g';
		i++;
	}
	memmove(k->id, k->id + i, (k->n - i) * sizeof k->id[0]);
	k->n -= i;
	k->batches++;
	k->batched += i;
}

struct batcher {
	uint32_t id, n;
};

static void close_batch(struct kq *k, struct batcher *b)
{
	if (b->n > 1)
		kq_batch(k, b->id);
	else if (b->n == 1)
		kq_verdict(k, b->id);
	b->n = 0;
}

static void batch_sim(uint32_t first, int jitter_pct, unsigned seed)
{
	static struct kq k;
	static uint32_t held[8192];
	size_t nheld = 0;
	struct linkd_pkt_order o;
	struct batcher b = { 0 };
	uint32_t next = first;

	memset(&k, 0, sizeof k);
	k.first = first;
	srand(seed);
	cr_assert_eq(linkd_pkt_order_init(&o, 64), 0);
	for (int step = 0; step < 16000; step++) {
		int r = rand() % 100;
		if (r < 45 && next - first < 8000) {           /* a packet arrives */
			uint32_t id = next++;
			k.id[k.n++] = id;
			if (rand() % 10 == 0) {                     /* dropped at once */
				k.state[id - first] = 'r';
				close_batch(&k, &b);
				kq_verdict(&k, id);
			} else {
				k.state[id - first] = 'h';
				cr_assert_eq(linkd_pkt_order_hold(&o, id), 0);
				held[nheld++] = id;
			}
		} else if (r < 95 && nheld) {                   /* a held packet is due */
			size_t i = rand() % 100 < jitter_pct ? (size_t)rand() % nheld : 0;
			uint32_t id = held[i];
			memmove(held + i, held + i + 1, (nheld - i - 1) * sizeof held[0]);
			nheld--;
			k.state[id - first] = 'r';
			bool corrupt = rand() % 20 == 0;            /* a verdict with a payload never joins */
			if (linkd_pkt_order_done(&o, id) && !corrupt) {
				b.id = id;
				b.n++;
			} else {
				close_batch(&k, &b);
				kq_verdict(&k, id);
			}
		} else {                                        /* the wake-up ends: send */
			close_batch(&k, &b);
		}
	}
	close_batch(&k, &b);
	while (nheld) {
		uint32_t id = held[--nheld];
		k.state[id - first] = 'r';
		linkd_pkt_order_done(&o, id);
		kq_verdict(&k, id);
	}
	cr_assert_eq(k.n, 0);
	cr_log_info("jitter %d%%: %lu batch verdicts for %lu packets", jitter_pct, (unsigned long)k.batches,
		    (unsigned long)k.batched);
	if (jitter_pct == 0)
		cr_assert_gt(k.batched, 2 * k.batches, "in-order releases must batch");
	linkd_pkt_order_free(&o);
}

Test(linkd_pkt, batch_verdicts_never_take_a_held_packet)
{
	batch_sim(1, 0, 11);              /* constant delay: releases in arrival order */
	batch_sim(0xfffff000u, 30, 12);   /* jitter, across the id wrap */
	batch_sim(77, 100, 13);           /* any order */
}

Test(linkd_pkt, timestamp_in_realtime_ns)
{
	char buf[512];
	uint8_t ip[20] = { 0x45 };
	struct linkd_pkt p;
	size_t n = packet_msg(buf, sizeof buf, 9, ip, sizeof ip, 100, 0);
	struct nlmsghdr *nlh = (struct nlmsghdr *)buf;
	/* the kernel's nfqnl_msg_packet_timestamp: be64 seconds, be64 microseconds */
	uint8_t ts[16] = { 0, 0, 0, 0, 0x69, 0x26, 0x0a, 0x51, 0, 0, 0, 0, 0, 0x0b, 0x71, 0xb0 };

	mnl_attr_put(nlh, NFQA_TIMESTAMP, sizeof ts, ts);
	n = nlh->nlmsg_len;
	cr_assert_eq(linkd_pkt_parse(buf, n, &p), 1);
	cr_assert_eq(p.rx_real_ns, 0x69260a51LL * 1000000000LL + 750000LL * 1000LL);
	/* a short timestamp is malformed */
	n = packet_msg(buf, sizeof buf, 9, ip, sizeof ip, 100, 0);
	mnl_attr_put(nlh, NFQA_TIMESTAMP, 8, ts);
	cr_assert_eq(linkd_pkt_parse(buf, nlh->nlmsg_len, &p), -EBADMSG);
}

/* An IPv4 header (ihl words) and, for TCP, a header of doff words. */
static void l4_hdrs(uint8_t *b, unsigned ihl, uint8_t proto, unsigned doff)
{
	memset(b, 0, 128);
	b[0] = (uint8_t)(0x40 | ihl);
	b[9] = proto;
	b[ihl * 4 + 12] = (uint8_t)(doff << 4);
}

Test(linkd_pkt, l4_payload_from_headers)
{
	uint8_t h[128];
	struct linkd_pkt p = { .data = h, .data_len = LINKD_PKT_HDR_COPY, .len = 65226 };

	l4_hdrs(h, 5, 6, 8);                    /* TCP with timestamps: 20 + 32 bytes of headers */
	cr_assert_eq(linkd_pkt_l4_payload(&p), 65226 - 52);
	l4_hdrs(h, 15, 6, 15);                  /* both headers at their longest: still in the copy */
	cr_assert_eq(linkd_pkt_l4_payload(&p), 65226 - 120);
	l4_hdrs(h, 5, 17, 0);                   /* UDP */
	cr_assert_eq(linkd_pkt_l4_payload(&p), 65226 - 28);
	l4_hdrs(h, 5, 1, 0);                    /* ICMP: not segmented by us */
	cr_assert_eq(linkd_pkt_l4_payload(&p), -1);
	l4_hdrs(h, 5, 6, 4);                    /* a TCP data offset below 5 words */
	cr_assert_eq(linkd_pkt_l4_payload(&p), -1);
	l4_hdrs(h, 5, 6, 5);
	p.data_len = 24;                        /* the TCP header not copied */
	cr_assert_eq(linkd_pkt_l4_payload(&p), -1);
	p.data_len = LINKD_PKT_HDR_COPY;
	p.len = 30;                             /* shorter than its headers */
	cr_assert_eq(linkd_pkt_l4_payload(&p), -1);
	h[0] = 0x65;                            /* IPv6 */
	p.len = 1500;
	cr_assert_eq(linkd_pkt_l4_payload(&p), -1);
	p.data = NULL;
	cr_assert_eq(linkd_pkt_l4_payload(&p), -1);
}

Test(linkd_pkt, queue_verdict_encoding)
{
	cr_assert_eq(linkd_pkt_queue_verdict(0x8064), NF_QUEUE_NR(0x8064));
	cr_assert_eq(linkd_pkt_queue_verdict(7) & NF_VERDICT_MASK, NF_QUEUE);
	cr_assert_eq(linkd_pkt_queue_verdict(7) >> 16, 7);
}
