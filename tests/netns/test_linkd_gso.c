/* Segmentation-offloaded packets through the nfq backend (stalenet-linkd + link_shaper).
 *
 * A UDP socket with UDP_SEGMENT hands the stack one 64 KB datagram that leaves as 46 datagrams
 * of 1400 bytes; over a veth pair it stays one packet up to the receiver's PREROUTING, where
 * linkd's queue sees it. Checked: it crosses whole (one packet to the emulator, its true length
 * counted), a rate serialises it by its true length, a corrupting link takes it as wire-sized
 * segments (a bit flip happens to one 1400-byte datagram, not to a 64 KB send), and a lossy link
 * takes it whole unless one of its segments is lost: then it goes on segmented (the split queue,
 * netem/linkd_pkt.h) and loses just those segments.
 * Fixture: namespaces "node" and "switch" joined by one veth pair (198.18.x.1/.2), linkd in a
 * thread of this process. Skips without root; fails instead when STALENET_TESTS_MUST_RUN=1. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/netns.h"
#include "netem/link_shaper.h"
#include "netem/linkd.h"
#include "tests/support/files.h"
#include "tests/support/proc.h"
#include "tests/support/fixture.h"
#include "tests/support/wait.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

#define SEG 1400                     /* payload bytes of each datagram on the wire */
#define SEGS 46                      /* datagrams per offloaded send: 64,400 bytes */
#define IP_UDP 28                    /* IPv4 + UDP header bytes */
#define PORT 9300

static char ns_node[64], ns_sw[64], if_node[16], if_sw[16], ctl[128], tmpdir[64], link_name[96];
static struct linkd *lkd;
static pthread_t lkd_thread;
static struct link_shaper *shaper;
static struct link_endpoint ep;
static int subnet;

static void *linkd_main(void *arg)
{
	linkd_run(arg);
	return NULL;
}

static void setup(void)
{
	log_init("test", LOG_WARN);
	support_require_root();
	subnet = (getpid() % 200) + 1;
	snprintf(ns_node, sizeof ns_node, "sng%d-node", getpid());
	snprintf(ns_sw, sizeof ns_sw, "sng%d-sw", getpid());
	snprintf(if_node, sizeof if_node, "sg%dn", getpid() % 100000);
	snprintf(if_sw, sizeof if_sw, "sg%ds", getpid() % 100000);
	if (support_sh("ip netns add %s && ip netns add %s", ns_node, ns_sw) != 0 ||
	    support_sh("ip link add %s netns %s type veth peer %s netns %s", if_node, ns_node, if_sw, ns_sw) != 0 ||
	    support_sh("ip -n %s addr add 198.18.%d.1/24 dev %s && ip -n %s addr add 198.18.%d.2/24 dev %s",
		       ns_node, subnet, if_node, ns_sw, subnet, if_sw) != 0 ||
	    support_sh("ip -n %s link set %s up && ip -n %s link set %s up", ns_node, if_node, ns_sw, if_sw) != 0 ||
	    support_sh("ip -n %s neigh replace 198.18.%d.2 dev %s lladdr $(ip netns exec %s cat /sys/class/net/%s/address) nud permanent",
		       ns_node, subnet, if_node, ns_sw, if_sw) != 0) {
		support_skip_or_fail("cannot create namespaces / veth");
		return;
	}
	support_tmpdir(tmpdir, sizeof tmpdir, "linkdgso");
	snprintf(ctl, sizeof ctl, "%s/linkd.sock", tmpdir);
	lkd = linkd_new(ctl);
	cr_assert_not_null(lkd);
	linkd_set_rt_priority(lkd, 0);
	cr_assert_eq(pthread_create(&lkd_thread, NULL, linkd_main, lkd), 0);
	struct link_shaper_opts o = { .backend = LINK_BACKEND_NFQ, .linkd_ctl = ctl };
	shaper = link_shaper_new(&o);
	cr_assert_not_null(shaper);
	ep = (struct link_endpoint){ ns_node, if_node, ns_sw, if_sw };
	snprintf(link_name, sizeof link_name, "%s/%s", ns_sw, if_sw); /* the up direction's link */
}

static void teardown(void)
{
	if (shaper) {
		link_shaper_remove(shaper, &ep, LINK_DIR_UP);
		link_shaper_destroy(&shaper);
	}
	if (lkd) {
		linkd_stop(lkd);
		pthread_join(lkd_thread, NULL);
		linkd_destroy(&lkd);
	}
	if (ns_node[0])
		support_sh("ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", ns_node, ns_sw);
	if (tmpdir[0])
		support_rm_rf(tmpdir);
}

TestSuite(linkd_gso, .init = setup, .fini = teardown, .timeout = 60);

struct sockreq {
	int fd, port;
};

static int open_udp(void *arg)
{
	struct sockreq *r = arg;
	r->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (r->fd < 0)
		return -errno;
	if (r->port) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)r->port) };
		if (bind(r->fd, (struct sockaddr *)&a, sizeof a) < 0)
			return -errno;
	}
	return 0;
}

static int udp_in(const char *ns, int port)
{
	struct sockreq r = { -1, port };
	cr_assert_eq(netns_call(ns, open_udp, &r), 0);
	return r.fd;
}

struct result {
	int rx, n;
	int got[256];             /* datagrams received per send */
	int total;
	int64_t t_first, t_last;  /* kernel receive time of the first and last datagram, ns */
	uint64_t bytes_after_first;
	struct linkd_counters c;  /* the emulator's counters for the sends (warm-up excluded) */
	bool no_stamp;            /* a datagram came without its receive timestamp */
};

/* The receiver, in a thread of its own. Arrival times are the kernel's receive timestamps,
 * taken as the switch's interface receives each datagram (before the emulator's queue, after
 * the sender's rate): a busy host delaying this thread does not move them. */
static void *receive_main(void *arg)
{
	struct result *res = arg;
	while (res->total < res->n * SEGS) {
		struct pollfd p = { .fd = res->rx, .events = POLLIN };
		if (poll(&p, 1, 2000) <= 0)
			break;
		uint8_t d[SEG + 16];
		union {
			char buf[CMSG_SPACE(sizeof(struct timespec))];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = { d, sizeof d };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf,
				     .msg_controllen = sizeof cbuf.buf };
		ssize_t len = recvmsg(res->rx, &mh, 0);
		if (len != SEG || d[0] >= res->n || d[1] >= SEGS)
			continue;
		int64_t now = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
				struct timespec ts;
				memcpy(&ts, CMSG_DATA(c), sizeof ts);
				now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
			}
		if (!now) {
			res->no_stamp = true; /* asserted by the test's thread */
			continue;
		}
		if (res->total++ == 0)
			res->t_first = now;
		else
			res->bytes_after_first += (uint64_t)len;
		res->t_last = now;
		res->got[d[0]]++;
	}
	return NULL;
}

/* One datagram until one crosses (routes, sockets and the queue ready), then n offloaded sends
 * of SEGS x SEG bytes, each datagram tagged with its send and segment; everything received until
 * all came or the link was quiet for 2 s. */
static void send_offloaded(int n, struct result *res)
{
	cr_assert_leq(n, 256);
	int rx = udp_in(ns_sw, PORT), tx = udp_in(ns_node, 0);
	int big = 16 << 20, small = 40000, seg = SEG;
	setsockopt(rx, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
	int one = 1;
	cr_assert_eq(setsockopt(rx, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one), 0);
	/* a blocking sender with room for about one 64 KB send in flight: it goes at the link's
	 * pace and never overfills a rate's queue */
	setsockopt(tx, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	char ip[32];
	snprintf(ip, sizeof ip, "198.18.%d.2", subnet);
	inet_pton(AF_INET, ip, &to.sin_addr);
	cr_assert_eq(connect(tx, (struct sockaddr *)&to, sizeof to), 0);
	static uint8_t buf[SEGS * SEG];
	bool crossed = false;
	memset(buf, 0xff, 8);
	for (int64_t until = support_now_ms() + 10000; !crossed && support_now_ms() < until;) {
		struct pollfd p = { .fd = rx, .events = POLLIN };
		send(tx, buf, 64, 0);
		crossed = poll(&p, 1, 200) > 0;
	}
	cr_assert(crossed, "no datagram crossed the link in 10 s");
	while (recv(rx, buf, sizeof buf, MSG_DONTWAIT) > 0)
		;
	memset(res, 0, sizeof *res);
	res->rx = rx;
	res->n = n;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, receive_main, res), 0);
	struct linkd_counters c0;
	cr_assert_eq(linkd_counters(lkd, link_name, &c0), 0);
	cr_assert_eq(setsockopt(tx, IPPROTO_UDP, UDP_SEGMENT, &seg, sizeof seg), 0);
	for (int i = 0; i < n; i++) {
		for (int s = 0; s < SEGS; s++) {
			buf[s * SEG] = (uint8_t)i;
			buf[s * SEG + 1] = (uint8_t)s;
		}
		cr_assert_eq(send(tx, buf, sizeof buf, 0), (ssize_t)sizeof buf, "send %d: %s", i, strerror(errno));
	}
	pthread_join(t, NULL);
	cr_assert(!res->no_stamp, "a datagram without a receive timestamp");
	struct linkd_counters c1;
	cr_assert_eq(linkd_counters(lkd, link_name, &c1), 0);
	res->c = (struct linkd_counters){ .packets = c1.packets - c0.packets, .bytes = c1.bytes - c0.bytes,
					  .dropped = c1.dropped - c0.dropped };
	close(rx);
	close(tx);
}

Test(linkd_gso, offloaded_packet_passes_whole)
{
	const int n = 20;
	struct link_params p = { .delay_us = 2000 };
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &p), 0);
	struct result r;
	send_offloaded(n, &r);
	cr_log_info("offloaded: %lu packets, %lu bytes to the emulator; %d datagrams received",
		    (unsigned long)r.c.packets, (unsigned long)r.c.bytes, r.total);
	cr_assert_eq(r.total, n * SEGS);
	/* one packet per send, counted at its true length (not the 20 bytes copied) */
	cr_assert_eq(r.c.packets, (uint64_t)n);
	cr_assert_eq(r.c.bytes, (uint64_t)n * (SEGS * SEG + IP_UDP));
	cr_assert_eq(r.c.dropped, 0);
}

Test(linkd_gso, rate_serialises_true_length)
{
	const int n = 40;
	const double rate = 50e6;
	struct link_params p = { .delay_us = 2000, .rate_bps = (uint64_t)rate };
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &p), 0);
	struct result r;
	send_offloaded(n, &r);
	cr_assert_eq(r.total, n * SEGS, "received %d of %d", r.total, n * SEGS);
	double secs = (double)(r.t_last - r.t_first) / 1e9;
	double goodput = (double)r.bytes_after_first * 8 / secs;
	/* the rate counts Ethernet frames: 1400 bytes of payload in 1442 */
	double want = rate * SEG / (SEG + IP_UDP + 14);
	cr_log_info("50 mbit: %.2f Mbit/s of payload (expected %.2f); emulator: %lu packets, %lu bytes",
		    goodput / 1e6, want / 1e6, (unsigned long)r.c.packets, (unsigned long)r.c.bytes);
	cr_assert(goodput > 0.9 * want && goodput < 1.1 * want, "goodput %.2f Mbit/s", goodput / 1e6);
	/* whole or segmented by the rate's queue, the emulator counts each packet's true length */
	cr_assert_eq(r.c.bytes, (uint64_t)n * SEGS * SEG + r.c.packets * IP_UDP);
}

Test(linkd_gso, lossy_link_takes_segments)
{
	const int n = 40;
	struct link_params p = { .delay_us = 1000, .loss_ppm = 300000 };
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &p), 0);
	struct result r;
	send_offloaded(n, &r);
	int partial = 0;
	for (int i = 0; i < n; i++)
		partial += r.got[i] > 0 && r.got[i] < SEGS;
	cr_log_info("loss 30%%: emulator %lu packets, dropped %lu; %d of %d datagrams received, %d of %d "
		    "sends partly", (unsigned long)r.c.packets, (unsigned long)r.c.dropped, r.total,
		    n * SEGS, partial, n);
	/* each datagram decided on its own: at 30% every send loses some, so the emulator saw every
	 * segment, dropped what did not arrive, and the losses spread over the sends instead of
	 * taking them whole */
	cr_assert_eq(r.c.packets, (uint64_t)n * SEGS);
	cr_assert_eq(r.c.dropped + (uint64_t)r.total, (uint64_t)n * SEGS);
	/* binomial(1840, 0.3): 552 +- 19.7; +- 5 sd */
	cr_assert(r.c.dropped >= 453 && r.c.dropped <= 651, "dropped %lu of %d", (unsigned long)r.c.dropped,
		  n * SEGS);
	cr_assert_geq(partial, n - 1, "losses taking whole sends: %d of %d partly received", partial, n);
}

Test(linkd_gso, lossy_link_splits_only_sends_that_lose)
{
	const int n = 200;
	struct link_params p = { .delay_us = 1000, .loss_ppm = 10000 };
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &p), 0);
	struct result r;
	send_offloaded(n, &r);
	int whole = 0, partial = 0, none = 0;
	for (int i = 0; i < n; i++) {
		whole += r.got[i] == SEGS;
		partial += r.got[i] > 0 && r.got[i] < SEGS;
		none += r.got[i] == 0;
	}
	cr_log_info("loss 1%%: emulator %lu packets, dropped %lu; %d of %d datagrams received; sends whole %d, "
		    "partly %d, lost %d", (unsigned long)r.c.packets, (unsigned long)r.c.dropped, r.total,
		    n * SEGS, whole, partial, none);
	cr_assert_eq(r.c.dropped + (uint64_t)r.total, (uint64_t)n * SEGS);
	/* binomial(9200, 0.01): 92 +- 9.5; +- 5 sd */
	cr_assert(r.c.dropped >= 45 && r.c.dropped <= 140, "dropped %lu of %d", (unsigned long)r.c.dropped,
		  n * SEGS);
	/* a send loses a segment with probability 1 - 0.99^46 = 37%: the others crossed as one
	 * packet each (binomial(200, 0.63): 126 +- 6.8, +- 5 sd), the split ones as their segments */
	cr_assert(whole >= 92 && whole <= 160, "%d sends whole", whole);
	cr_assert_eq(none, 0, "a loss took a whole send");
	cr_assert_eq(r.c.packets, (uint64_t)whole + (uint64_t)partial * SEGS);
}

Test(linkd_gso, corrupting_link_takes_segments)
{
	const int n = 10;
	struct link_params p = { .delay_us = 1000, .corrupt_ppm = 500000 };
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &p), 0);
	struct result r;
	send_offloaded(n, &r);
	cr_log_info("corrupt 50%%: emulator %lu packets, %lu bytes; %d of %d datagrams passed the checksum",
		    (unsigned long)r.c.packets, (unsigned long)r.c.bytes, r.total, n * SEGS);
	/* corruption flips a bit of one datagram, not of a 64 KB send: the queue takes segments */
	cr_assert_eq(r.c.packets, (uint64_t)n * SEGS);
	cr_assert_eq(r.c.bytes, (uint64_t)n * SEGS * (SEG + IP_UDP));
	cr_assert(r.total > n * SEGS * 35 / 100 && r.total < n * SEGS * 65 / 100, "%d passed", r.total);
}
