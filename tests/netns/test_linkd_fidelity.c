/* Fidelity of the nfq backend (stalenet-linkd engine + link_shaper) on this host.
 *
 * Fixture: two namespaces "node" and "switch" joined by one veth pair (198.18.x.1/.2), linkd in
 * a thread of this process with its control socket in a temp dir, link_shaper in nfq mode. Probes
 * are timestamped in userspace (the kernel stamps before the NFQUEUE delay). Assertions use the
 * project's tolerances through lib/link_verdict. Skips without root; fails instead when
 * STALENET_TESTS_MUST_RUN=1. */
#include <criterion/criterion.h>
#include <errno.h>
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/netns.h"
#include "netem/link_shaper.h"
#include "lib/link_verdict.h"
#include "netem/linkd.h"
#include "tests/support/files.h"
#include "tests/support/fixture.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"

/* tests/kernel/ reuses this file with the kernel backend. */
#ifndef SHAPER_TEST_BACKEND
#define SHAPER_TEST_BACKEND LINK_BACKEND_NFQ
#endif

static char ns_node[64], ns_sw[64], if_node[16], if_sw[16], ctl[128], tmpdir[64];
static struct linkd *lkd;
static pthread_t lkd_thread;
static struct link_shaper *shaper;
static struct link_endpoint ep;
static int subnet;

/* Inside the netem VM (qemu TCG) timers and the CPU run several times slower: check-kernel sets
 * STALENET_TIME_SCALE and the absolute timing tolerances and send pacing stretch by it. */
static double time_scale(void)
{
	const char *v = getenv("STALENET_TIME_SCALE");
	double x = v ? atof(v) : 1.0;
	return x >= 1.0 ? x : 1.0;
}

static void *linkd_main(void *arg)
{
	linkd_run(arg);
	return NULL;
}

static void setup(void)
{
	log_init("test", LOG_WARN);
	support_require_root();
	/* before anything is made: a skipped test's .fini does not run */
	if (SHAPER_TEST_BACKEND == LINK_BACKEND_KERNEL && link_shaper_probe_kernel() != 1)
		support_skip_or_fail("kernel has no sch_netem (run make check-kernel)");
	subnet = (getpid() % 200) + 1;
	snprintf(ns_node, sizeof ns_node, "snt%d-node", getpid());
	snprintf(ns_sw, sizeof ns_sw, "snt%d-sw", getpid());
	snprintf(if_node, sizeof if_node, "sn%dn", getpid() % 100000);
	snprintf(if_sw, sizeof if_sw, "sn%ds", getpid() % 100000);
	if (support_sh("ip netns add %s && ip netns add %s", ns_node, ns_sw) != 0 ||
	    support_sh("ip link add %s netns %s type veth peer %s netns %s", if_node, ns_node, if_sw, ns_sw) != 0 ||
	    support_sh("ip -n %s addr add 198.18.%d.1/24 dev %s && ip -n %s addr add 198.18.%d.2/24 dev %s",
	       ns_node, subnet, if_node, ns_sw, subnet, if_sw) != 0 ||
	    support_sh("ip -n %s link set %s up && ip -n %s link set %s up && ip -n %s link set lo up && ip -n %s link set lo up",
	       ns_node, if_node, ns_sw, if_sw, ns_node, ns_sw) != 0) {
		support_skip_or_fail("cannot create namespaces / veth");
		return;
	}
	/* Permanent neighbour entries: under the kernel backend ARP crosses netem too, and one lost
	 * ARP exchange (a 5% chance on a 5% loss link) leaves a burst parked in the unresolved-
	 * neighbour queue, which keeps ~150 packets and drops the rest: a test of the link must not
	 * measure ARP's retry timer. */
	if (support_sh("ip -n %s neigh replace 198.18.%d.2 dev %s lladdr $(ip netns exec %s cat /sys/class/net/%s/address) nud permanent && "
	       "ip -n %s neigh replace 198.18.%d.1 dev %s lladdr $(ip netns exec %s cat /sys/class/net/%s/address) nud permanent",
	       ns_node, subnet, if_node, ns_sw, if_sw, ns_sw, subnet, if_sw, ns_node, if_node) != 0) {
		support_skip_or_fail("cannot pin neighbour entries");
		return;
	}
	/* The probes measure the emulator, not this process's turn on a busy CPU: the measuring
	 * threads created from here on (echo, sink, stamps) and this one run real-time like linkd
	 * does (SCHED_FIFO 10 by default), below it, and the commands they run get the normal
	 * scheduler back. Without the privilege the test still runs, at normal priority. */
	{
		struct sched_param sp = { .sched_priority = 5 };

		if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) < 0)
			log_warn("test: measuring without real-time priority: %s", strerror(errno));
	}
	support_tmpdir(tmpdir, sizeof tmpdir, "linkd");
	snprintf(ctl, sizeof ctl, "%s/linkd.sock", tmpdir);
	lkd = linkd_new(ctl);
	cr_assert_not_null(lkd);
	cr_assert_eq(pthread_create(&lkd_thread, NULL, linkd_main, lkd), 0);
	struct link_shaper_opts o = { .backend = SHAPER_TEST_BACKEND, .linkd_ctl = ctl };
	shaper = link_shaper_new(&o);
	cr_assert_not_null(shaper);
	ep = (struct link_endpoint){ ns_node, if_node, ns_sw, if_sw };
}

static void teardown(void)
{
	if (shaper) {
		link_shaper_remove(shaper, &ep, LINK_DIR_UP);
		link_shaper_remove(shaper, &ep, LINK_DIR_DOWN);
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

/* --- sockets inside the namespaces ------------------------------------------------------- */

struct sockreq {
	int type, fd;
	int port;
	bool bind_any;
};

static int open_sock(void *arg)
{
	struct sockreq *r = arg;
	r->fd = socket(AF_INET, r->type | SOCK_CLOEXEC, 0);
	if (r->fd < 0)
		return -errno;
	int one = 1;
	setsockopt(r->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (r->bind_any) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)r->port) };
		if (bind(r->fd, (struct sockaddr *)&a, sizeof a) < 0)
			return -errno;
	}
	return 0;
}

static int sock_in(const char *ns, int type, int port)
{
	struct sockreq r = { .type = type, .fd = -1, .port = port, .bind_any = port > 0 };
	cr_assert_eq(netns_call(ns, open_sock, &r), 0);
	return r.fd;
}

static struct sockaddr_in addr_of(int host, int port)
{
	char ip[32];
	snprintf(ip, sizeof ip, "198.18.%d.%d", subnet, host);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

struct echo {
	int fd;
	volatile bool stop;
};

static void *echo_main(void *arg)
{
	struct echo *e = arg;
	char buf[2048];
	while (!e->stop) {
		struct pollfd p = { .fd = e->fd, .events = POLLIN };
		if (poll(&p, 1, 50) <= 0)
			continue;
		struct sockaddr_in from;
		socklen_t fl = sizeof from;
		ssize_t n = recvfrom(e->fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
		if (n > 0)
			sendto(e->fd, buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
	}
	return NULL;
}

/* RTT probes node -> switch -> node, one every 500 us (pipelined: a probe does not wait for the
 * previous one, so many probes fit in little time); replies are matched by sequence number and a
 * probe not back 1 s after the last send counts as lost. */
static void rtt_probe(int n, double *mean, double *sd, double *loss)
{
	struct echo e = { .fd = sock_in(ns_sw, SOCK_DGRAM, 9000) };
	pthread_t t;
	pthread_create(&t, NULL, echo_main, &e);
	int c = sock_in(ns_node, SOCK_DGRAM, 0);
	struct sockaddr_in to = addr_of(2, 9000);
	int64_t *sent = calloc((size_t)n, sizeof *sent);
	cr_assert_not_null(sent);
	/* one untimed probe first: neighbour resolution is not part of the link's delay */
	uint32_t warm = UINT32_MAX, back;
	sendto(c, &warm, sizeof warm, 0, (struct sockaddr *)&to, sizeof to);
	struct pollfd wp = { .fd = c, .events = POLLIN };
	if (poll(&wp, 1, 2000) > 0 && recv(c, &back, sizeof back, 0) < 0)
		back = 0;
	const int64_t gap_ns = 500000;
	int64_t start = clock_now_ns(), deadline = 0;
	double s = 0, s2 = 0;
	int got = 0, next = 0;
	while (got < n) {
		int64_t now = clock_now_ns();
		if (next < n && now >= start + next * gap_ns) {
			uint32_t seq = (uint32_t)next;
			sent[next] = now;
			sendto(c, &seq, sizeof seq, 0, (struct sockaddr *)&to, sizeof to);
			if (++next == n)
				deadline = now + 1000000000LL;
			continue;
		}
		if (next == n && now >= deadline)
			break;
		int64_t until = next < n ? start + next * gap_ns : deadline;
		int64_t wait_ns = until > now ? until - now : 0;
		struct timespec ts = { wait_ns / 1000000000, wait_ns % 1000000000 };
		struct pollfd p = { .fd = c, .events = POLLIN };
		if (ppoll(&p, 1, &ts, NULL) <= 0)
			continue;
		if (recv(c, &back, sizeof back, 0) != (ssize_t)sizeof back || back >= (uint32_t)next ||
		    sent[back] == 0)
			continue;
		double ms = (clock_now_ns() - sent[back]) / 1e6;
		sent[back] = 0; /* a duplicate reply is not a second sample */
		s += ms;
		s2 += ms * ms;
		got++;
	}
	e.stop = true;
	pthread_join(t, NULL);
	close(e.fd);
	close(c);
	free(sent);
	*mean = got ? s / got : 0;
	*sd = got > 1 ? sqrt((s2 - s * s / got) / (got - 1)) : 0;
	*loss = 1.0 - (double)got / n;
}

/* Emulated CPU (qemu TCG, STALENET_TIME_SCALE > 1): the guest's timers fire late by a varying
 * millisecond or more, so only gross errors are visible there; exactness of the kernel backend
 * is checked by reading its qdiscs back (kernel_qdisc_reads_back), its timing on hardware with
 * sch_netem, where the scale is 1 and this never applies. */
static bool vm_ok(const struct link_verdict_expect *e, int n, double mean, double sd, double loss)
{
	double scale = time_scale(), se, lo, hi;
	bool ok;

	if (scale <= 1.0)
		return false;
	se = 3.29 * e->rtt_sd_ms / sqrt((double)n);
	lo = e->rtt_mean_ms - 0.5 * scale - se;
	hi = e->rtt_mean_ms + 2.0 * scale + se;
	ok = mean >= lo && mean <= hi && loss == 0 &&
	     (e->jitter_ms < 2.0 || fabs(sd - e->rtt_sd_ms) <= 0.5 * e->rtt_sd_ms);
	/* info, not warn: Criterion 2.4 exits non-zero after any warning */
	cr_log_info("VM time scale %.1f: mean in [%.2f, %.2f] ms and sd within 50%%: %s", scale, lo, hi,
		    ok ? "yes" : "no");
	return ok;
}

/* One attempt: the unshaped path's own round trip (tens of us on a host, milliseconds under
 * qemu TCG, more whenever the host is busy) measured just before the shaped one and added to the
 * expectation, then the verdict. */
static bool rtt_attempt(struct link_params up, struct link_params down, int n, char *why, size_t len)
{
	double base_mean, base_sd, base_loss, mean, sd, loss;
	struct link_verdict_expect e;
	bool ok;

	link_shaper_remove(shaper, &ep, LINK_DIR_UP);
	link_shaper_remove(shaper, &ep, LINK_DIR_DOWN);
	rtt_probe(50, &base_mean, &base_sd, &base_loss);
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &up), 0);
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_DOWN, &down), 0);
	rtt_probe(n, &mean, &sd, &loss);
	link_verdict_expect_from(&up, &down, &e);
	/* enough probes that the verdict's sampling terms stay inside the fixed targets for the
	 * configured link (the test's design; the host's own noise below is not): this asserts
	 * mean within max(0.5 ms, 2%) and sd within 15% */
	cr_assert_leq(3.29 * e.rtt_sd_ms / sqrt((double)n), fmax(0.5, 0.02 * e.rtt_mean_ms));
	cr_assert_leq(3.29 / sqrt(2.0 * (n - 1)), 0.15);
	e.rtt_mean_ms += base_mean;
	e.rtt_sd_ms = sqrt(e.rtt_sd_ms * e.rtt_sd_ms + base_sd * base_sd);
	ok = link_verdict_verdict(&e, (uint32_t)n, mean, sd, loss, why, len) ||
	     vm_ok(&e, n, mean, sd, loss);
	cr_log_info("rtt: expected %.2f/%.2f ms (base %.3f ms), measured %.2f/%.2f ms, loss %.4f",
		    e.rtt_mean_ms, e.rtt_sd_ms, base_mean, mean, sd, loss);
	return ok;
}

static void check_rtt(struct link_params up, struct link_params down, int n)
{
	char why[256];
	bool ok = rtt_attempt(up, down, n, why, sizeof why);

	for (int again = 1; !ok && again <= 5; again++) {
		/* More independent samples, base included, spread over about ten seconds: on a
		 * virtual machine the host can delay every timer of the guest by a millisecond or
		 * more for seconds at a time (noisy neighbours; CI once saw +0.56 ms on four samples
		 * in a row over 3 s), and a base measured in such a stall would skew every later
		 * expectation; an emulator that is really off fails every attempt. */
		cr_log_info("off (%s): measuring again (%d of 5)", why, again);
		usleep(1500 * 1000); /* spreads the attempts in time: not a wait for anything */
		ok = rtt_attempt(up, down, n, why, sizeof why);
	}
	cr_assert(ok, "%s", why);
}

TestSuite(linkd_fidelity, .init = setup, .fini = teardown, .timeout = 120);

Test(linkd_fidelity, rtt_constant_delay)
{
	check_rtt((struct link_params){ .delay_us = 10000 }, (struct link_params){ .delay_us = 10000 }, 400);
}

Test(linkd_fidelity, rtt_jitter_uniform_and_normal)
{
	check_rtt((struct link_params){ .delay_us = 10000, .jitter_us = 5000 },
		  (struct link_params){ .delay_us = 10000, .jitter_us = 5000 }, 1000);
	check_rtt((struct link_params){ .delay_us = 15000, .jitter_us = 4000, .dist = LINK_DIST_NORMAL },
		  (struct link_params){ .delay_us = 5000 }, 1000);
}

/* Blast n numbered datagrams node -> switch; count arrivals, duplicates, out-of-order ones. */
struct blast {
	uint64_t got, dups, late;
};

static void blast(int n, struct blast *b)
{
	int rx = sock_in(ns_sw, SOCK_DGRAM, 9100), tx = sock_in(ns_node, SOCK_DGRAM, 0);
	int big = 8 << 20;
	setsockopt(rx, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
	struct sockaddr_in to = addr_of(2, 9100);
	char *seen = calloc((size_t)n, 1);
	char pkt[200] = { 0 };
	/* A datagram ahead of the burst, until one has crossed the link, shows both sides' sockets
	 * and routes ready (neighbours are pinned in setup); the link may drop some, so each try
	 * waits 200 ms. seq -1 is ignored below. */
	int warm = -1;
	bool crossed = false;
	memcpy(pkt, &warm, sizeof warm);
	for (int64_t until = support_now_ms() + (int64_t)(10000 * time_scale()); !crossed && support_now_ms() < until;) {
		struct pollfd p = { .fd = rx, .events = POLLIN };
		sendto(tx, pkt, sizeof pkt, 0, (struct sockaddr *)&to, sizeof to);
		crossed = poll(&p, 1, 200) > 0;
	}
	cr_assert(crossed, "no datagram crossed the link in 10 s");
	for (int i = 0; i < n; i++) {
		memcpy(pkt, &i, sizeof i);
		sendto(tx, pkt, sizeof pkt, 0, (struct sockaddr *)&to, sizeof to);
		if (i % 200 == 199) /* pacing, not a wait: stay under the queue limit */
			usleep((useconds_t)(2000 * time_scale()));
	}
	memset(b, 0, sizeof *b);
	int maxseen = -1;
	/* The burst is over when the link has been quiet for 2 s: a loaded machine may pause the
	 * emulator for a few hundred milliseconds, which must not count as loss. */
	for (;;) {
		struct pollfd p = { .fd = rx, .events = POLLIN };
		if (poll(&p, 1, (int)(2000 * time_scale())) <= 0)
			break;
		int seq;
		if (recv(rx, pkt, sizeof pkt, 0) < (ssize_t)sizeof seq)
			continue;
		memcpy(&seq, pkt, sizeof seq);
		if (seq < 0 || seq >= n)
			continue;
		if (seen[seq]) {
			b->dups++;
			continue;
		}
		seen[seq] = 1;
		b->got++;
		if (seq < maxseen)
			b->late++;
		else
			maxseen = seq;
	}
	free(seen);
	close(rx);
	close(tx);
}

Test(linkd_fidelity, loss_random_binomial)
{
	const int n = 6000;
	struct link_params p = { .loss_ppm = 50000 };
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &p), 0);
	struct blast b;
	blast(n, &b);
	double loss = 1 - (double)b.got / n, lo, hi;
	link_verdict_loss_interval(0.05, n, &lo, &hi);
	cr_log_info("loss 5%%: measured %.4f, interval [%.4f, %.4f]", loss, lo, hi);
	cr_assert(loss >= lo && loss <= hi, "loss %.4f not in [%.4f, %.4f]", loss, lo, hi);
	struct link_counters c;
	cr_assert_eq(link_shaper_counters(shaper, &ep, LINK_DIR_UP, &c), 0);
	/* Every direction in one read (what the orchestrator samples) gives the same counters. */
	struct link_counters all[2], down;
	int rcs[2];
	cr_assert_eq(link_shaper_counters_all(shaper, &ep, 1, all, rcs), 0);
	cr_assert_eq(rcs[0], 0);
	cr_assert_eq(memcmp(&all[0], &c, sizeof c), 0, "packets %lu/%lu dropped %lu/%lu bytes %lu/%lu",
		     (unsigned long)all[0].packets, (unsigned long)c.packets, (unsigned long)all[0].dropped,
		     (unsigned long)c.dropped, (unsigned long)all[0].bytes, (unsigned long)c.bytes);
	int rd = link_shaper_counters(shaper, &ep, LINK_DIR_DOWN, &down);
	cr_assert_eq(rcs[1] < 0, rd < 0, "down: %d one by one, %d all at once", rd, rcs[1]);
	/* nfq counts every packet that entered; the netem qdisc counts what it sent */
	cr_assert_geq(c.packets + (SHAPER_TEST_BACKEND == LINK_BACKEND_KERNEL ? c.dropped : 0), (uint64_t)n);
	cr_assert(c.dropped >= (uint64_t)(n - (int)b.got) && c.dropped <= c.packets);
	/* 200-byte datagrams: 228 bytes of IPv4 (nfq), 242 with the Ethernet header (qdisc) */
	double per = c.packets ? (double)c.bytes / c.packets : 0;
	cr_assert(per >= 228 && per <= 242, "%.1f bytes per packet", per);
}

Test(linkd_fidelity, duplicate_reorder_corrupt)
{
	const int n = 5000;
	struct link_params p = { .delay_us = 5000, .dup_ppm = 50000 };
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &p), 0);
	struct blast b;
	blast(n, &b);
	struct link_counters c;
	cr_assert_eq(link_shaper_counters(shaper, &ep, LINK_DIR_UP, &c), 0);
	cr_log_info("dup 5%%: %lu copies of %d; link: %lu packets, %lu dropped, %lu over limit", (unsigned long)b.dups, n,
		    (unsigned long)c.packets, (unsigned long)c.dropped, (unsigned long)c.overlimits);
	cr_assert(b.dups > n * 0.035 && b.dups < n * 0.065, "dups %lu", (unsigned long)b.dups);
	cr_assert_geq(b.got, (uint64_t)(n * 0.995), "got %lu of %d", (unsigned long)b.got, n);

	p = (struct link_params){ .delay_us = 5000, .reorder_ppm = 250000 };
	cr_assert_eq(link_shaper_change(shaper, &ep, LINK_DIR_UP, &p), 0);
	blast(n, &b);
	/* a reordered packet overtakes the ~5 ms of packets before it: it is never "late" itself,
	 * the ones it overtakes are; at least the configured share must arrive out of order */
	cr_log_info("reorder 25%%: %lu late of %lu", (unsigned long)b.late, (unsigned long)b.got);
	cr_assert_geq(b.got, (uint64_t)(n * 0.995), "got %lu of %d", (unsigned long)b.got, n);
	cr_assert(b.late > n * 0.15, "late %lu", (unsigned long)b.late);

	p = (struct link_params){ .corrupt_ppm = 50000 };
	cr_assert_eq(link_shaper_change(shaper, &ep, LINK_DIR_UP, &p), 0);
	blast(n, &b);
	double lost = 1 - (double)b.got / n;
	cr_log_info("corrupt 5%%: %.4f discarded by the receiver's checksum", lost);
	cr_assert(lost > 0.035 && lost < 0.065, "corrupt discarded %.4f", lost);
}

struct sink {
	int fd;
	uint64_t bytes;
	int64_t t0, t1;
};

static void *sink_main(void *arg)
{
	struct sink *s = arg;
	int c = accept(s->fd, NULL, NULL);
	static char buf[1 << 16];
	ssize_t n;
	s->t0 = 0;
	while ((n = recv(c, buf, sizeof buf, 0)) > 0) {
		if (!s->t0)
			s->t0 = clock_now_ns();
		s->bytes += (uint64_t)n;
		s->t1 = clock_now_ns();
	}
	close(c);
	return NULL;
}

Test(linkd_fidelity, tcp_rate_50mbit)
{
	struct link_params p = { .rate_bps = 50000000, .delay_us = 2000 };
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &p), 0);
	struct sink s = { .fd = sock_in(ns_sw, SOCK_STREAM, 9200) };
	cr_assert_eq(listen(s.fd, 1), 0);
	pthread_t t;
	pthread_create(&t, NULL, sink_main, &s);
	int c = sock_in(ns_node, SOCK_STREAM, 0);
	setsockopt(c, IPPROTO_TCP, TCP_CONGESTION, "cubic", 5);
	struct sockaddr_in to = addr_of(2, 9200);
	cr_assert_eq(connect(c, (struct sockaddr *)&to, sizeof to), 0);
	static char buf[1 << 16];
	int64_t end = clock_now_ns() + 4000000000LL;
	while (clock_now_ns() < end)
		if (send(c, buf, sizeof buf, 0) < 0)
			break;
	close(c);
	pthread_join(t, NULL);
	close(s.fd);
	double mbit = s.bytes * 8.0 / ((s.t1 - s.t0) / 1e9) / 1e6;
	/* TBF counts whole Ethernet frames: 1448 payload bytes per 1514 on the wire. */
	double want = 50.0 * 1448.0 / 1514.0;
	cr_log_info("tcp cubic over tbf 50mbit: %.2f Mbit/s goodput (expected %.2f)", mbit, want);
	/* With a TBF the bytes and overlimits are the TBF's: the one-pass read adds them the same. */
	struct link_counters one, all[2];
	int rcs[2];
	cr_assert_eq(link_shaper_counters(shaper, &ep, LINK_DIR_UP, &one), 0);
	cr_assert_eq(link_shaper_counters_all(shaper, &ep, 1, all, rcs), 0);
	cr_assert_eq(rcs[0], 0);
	cr_assert_eq(all[0].bytes, one.bytes);
	cr_assert_eq(all[0].packets, one.packets);
	cr_assert_eq(all[0].dropped, one.dropped);
	cr_assert_eq(all[0].overlimits, one.overlimits);
	/* Never above the rate. Below it by at most 5% on hardware; under qemu TCG (time scale
	 * > 1) a guest starved by a busy host may not fill the link (measured 44.6 of 47.8 Mbit/s
	 * while two busy loops and a build shared the host), so the floor stretches with the
	 * scale as the timing tolerances do: the shaper's limit is what this test is about. */
	double floor = want * (1.0 - 0.05 * time_scale());
	cr_assert(mbit <= 1.05 * want, "goodput %.2f Mbit/s above %.2f", mbit, want);
	cr_assert(mbit >= floor, "goodput %.2f Mbit/s vs %.2f (floor %.2f)", mbit, want, floor);
}

struct stamp_rx {
	int fd;
	int64_t change_done_ns;
	double first_after_ms;  /* one-way delay of the first packet sent after the change */
	volatile bool stop;
};

static void *stamp_main(void *arg)
{
	struct stamp_rx *r = arg;
	r->first_after_ms = -1;
	while (!r->stop) {
		struct pollfd p = { .fd = r->fd, .events = POLLIN };
		if (poll(&p, 1, 20) <= 0)
			continue;
		int64_t sent;
		if (recv(r->fd, &sent, sizeof sent, 0) != (ssize_t)sizeof sent)
			continue;
		int64_t done = __atomic_load_n(&r->change_done_ns, __ATOMIC_ACQUIRE);
		if (done && sent >= done && r->first_after_ms < 0) {
			double ms = (clock_now_ns() - sent) / 1e6;
			__atomic_store(&r->first_after_ms, &ms, __ATOMIC_RELEASE);
		}
	}
	return NULL;
}

static bool first_after_seen(void *arg)
{
	struct stamp_rx *r = arg;
	double ms;
	__atomic_load(&r->first_after_ms, &ms, __ATOMIC_ACQUIRE);
	return ms >= 0;
}

Test(linkd_fidelity, change_in_place_within_10ms)
{
	struct link_params slow = { .delay_us = 80000 }, fast = { .delay_us = 2000 };
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &slow), 0);
	struct stamp_rx r = { .fd = sock_in(ns_sw, SOCK_DGRAM, 9300), .first_after_ms = -1 };
	pthread_t t;
	pthread_create(&t, NULL, stamp_main, &r);
	int c = sock_in(ns_node, SOCK_DGRAM, 0);
	struct sockaddr_in to = addr_of(2, 9300);
	int64_t t_change = 0, t_done = 0;
	for (int i = 0; i < 400; i++) {
		int64_t now = clock_now_ns();
		sendto(c, &now, sizeof now, 0, (struct sockaddr *)&to, sizeof to);
		if (i == 150) {
			t_change = clock_now_ns();
			cr_assert_eq(link_shaper_change(shaper, &ep, LINK_DIR_UP, &fast), 0);
			t_done = clock_now_ns();
			__atomic_store_n(&r.change_done_ns, t_done, __ATOMIC_RELEASE);
		}
		usleep(500); /* the probe stream's pacing: 2 packets a millisecond */
	}
	/* The first packet sent after the change has arrived (80 ms in flight at most). */
	support_wait_until(first_after_seen, &r, (int)(10000 * time_scale()));
	r.stop = true;
	pthread_join(t, NULL);
	close(c);
	close(r.fd);
	double took_ms = (t_done - t_change) / 1e6, best_ms = took_ms;
	/* Four more changes, back and forth: a change is in place when one of them is quick (a single
	 * one can meet a stall of the whole host: 66 ms measured once in the netem VM at load 10) */
	for (int i = 0; i < 4; i++) {
		int64_t t0 = clock_now_ns();
		cr_assert_eq(link_shaper_change(shaper, &ep, LINK_DIR_UP, i % 2 ? &fast : &slow), 0);
		double ms = (clock_now_ns() - t0) / 1e6;
		if (ms < best_ms)
			best_ms = ms;
	}
	cr_log_info("change took %.3f ms (the quickest of five %.3f ms); first packet after it: %.3f ms one-way",
		    took_ms, best_ms, r.first_after_ms);
	/* STALENET_TIME_SCALE stretches this bound where everything runs slower (the netem VM under
	 * qemu TCG sets 5); on real hardware it is 1. */
	double scale = time_scale();
	cr_assert(best_ms <= 10.0 * scale, "changes took %.3f ms at the quickest (the first %.3f ms)", best_ms, took_ms);
	cr_assert(r.first_after_ms >= 0 && r.first_after_ms <= 2.0 + 10.0 * scale, "first after %.3f ms",
		  r.first_after_ms);
}

#ifdef SHAPER_TEST_KERNEL
/* The qdiscs the kernel holds, as tc prints them, carry exactly the configured parameters. */
static void tc_show(const char *ns, const char *ifname, char *out, size_t len)
{
	char cmd[256];
	snprintf(cmd, sizeof cmd, "tc -n %s qdisc show dev %s", ns, ifname);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t n = fread(out, 1, len - 1, f);
	out[n] = '\0';
	pclose(f);
	/* tc pads some fields with two spaces: fold runs of blanks */
	char *w = out;
	for (const char *r = out; *r; r++)
		if (!(*r == ' ' && w > out && w[-1] == ' '))
			*w++ = *r == '\n' ? ' ' : *r;
	*w = '\0';
}

Test(linkd_fidelity, kernel_qdisc_reads_back)
{
	struct link_params p = { .delay_us = 12000, .jitter_us = 3000, .loss_ppm = 10000,
				 .dup_ppm = 20000, .corrupt_ppm = 5000, .reorder_ppm = 250000,
				 .rate_bps = 50000000 };
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &p), 0);
	struct link_params d = { .delay_us = 7000 };
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_DOWN, &d), 0);
	char up[4096], down[4096];
	tc_show(ns_node, if_node, up, sizeof up);
	tc_show(ns_sw, if_sw, down, sizeof down);
	cr_log_info("up: %s", up);
	cr_log_info("down: %s", down);
	const char *want_up[] = { "netem", "delay 12ms 3ms", "loss 1%", "duplicate 2%", "reorder 25%",
				  "corrupt 0.5%", "tbf", "rate 50Mbit" };
	for (size_t i = 0; i < sizeof want_up / sizeof *want_up; i++)
		cr_expect_not_null(strstr(up, want_up[i]), "up qdisc lacks \"%s\": %s", want_up[i], up);
	cr_expect_not_null(strstr(down, "delay 7ms"), "down qdisc: %s", down);
	cr_expect_null(strstr(down, "loss"), "down qdisc: %s", down);
	/* a change rewrites the same qdisc in place */
	p = (struct link_params){ .delay_us = 2000, .loss_ppm = 100000 };
	cr_assert_eq(link_shaper_change(shaper, &ep, LINK_DIR_UP, &p), 0);
	tc_show(ns_node, if_node, up, sizeof up);
	cr_expect_not_null(strstr(up, "delay 2ms"), "after change: %s", up);
	cr_expect_not_null(strstr(up, "loss 10%"), "after change: %s", up);
}
#endif

/* The emulator's release lateness: every probe held in each direction is counted in the stats
 * of that direction, with mean <= max and p99 <= max; the interval starts again after each read.
 * In spin precision a packet is never released before its time, so the mean is not negative. */
static void lateness_of(int n, bool spin)
{
	struct link_params p = { .delay_us = 10000 };
	struct link_counters up, down;
	double mean, sd, loss;

	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &p), 0);
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_DOWN, &p), 0);
	cr_assert_eq(link_shaper_counters(shaper, &ep, LINK_DIR_UP, &up), 0);   /* interval starts */
	cr_assert_eq(link_shaper_counters(shaper, &ep, LINK_DIR_DOWN, &down), 0);
	rtt_probe(n, &mean, &sd, &loss);
	cr_assert_eq(link_shaper_counters(shaper, &ep, LINK_DIR_UP, &up), 0);
	cr_assert_eq(link_shaper_counters(shaper, &ep, LINK_DIR_DOWN, &down), 0);
	const struct link_counters *c[] = { &up, &down };
	for (int i = 0; i < 2; i++) {
		cr_assert(c[i]->late_known);
		cr_assert_geq(c[i]->late_n, (uint64_t)((1.0 - loss) * n), "%s: %lu released", i ? "down" : "up",
			      (unsigned long)c[i]->late_n);
		cr_assert_leq(c[i]->late_n, (uint64_t)n + 2); /* the probes and the untimed first one */
		cr_assert_geq(c[i]->late_p99_ms, 0.0);
		cr_assert_leq(c[i]->late_p99_ms, c[i]->late_max_ms);
		cr_assert_leq(c[i]->late_mean_ms, c[i]->late_max_ms);
		/* the round trip holds both releases: their lateness cannot exceed what it measured */
		cr_assert_lt(c[i]->late_mean_ms, mean - 20.0 + 1.0, "mean lateness %.3f ms, rtt %.3f ms",
			     c[i]->late_mean_ms, mean);
		if (spin)
			cr_assert_geq(c[i]->late_mean_ms, 0.0, "spin released early: %.3f ms", c[i]->late_mean_ms);
		cr_log_info("%s %s: %lu released, lateness mean %.3f p99 %.3f max %.3f ms (rtt %.3f ms)",
			    spin ? "spin" : "timer", i ? "down" : "up", (unsigned long)c[i]->late_n,
			    c[i]->late_mean_ms, c[i]->late_p99_ms, c[i]->late_max_ms, mean);
	}
	/* read again at once: nothing was released in between */
	cr_assert_eq(link_shaper_counters(shaper, &ep, LINK_DIR_UP, &up), 0);
	cr_assert_eq(up.late_n, 0);
	cr_assert_eq(up.late_max_ms, 0.0);
	link_shaper_remove(shaper, &ep, LINK_DIR_UP);
	link_shaper_remove(shaper, &ep, LINK_DIR_DOWN);
}

Test(linkd_fidelity, lateness_counted_per_direction_timer_and_spin)
{
	if (SHAPER_TEST_BACKEND != LINK_BACKEND_NFQ)
		return; /* the kernel's qdisc timers are not observable */
	lateness_of(200, false);
	/* the same link on an emulator in spin precision */
	link_shaper_destroy(&shaper);
	linkd_stop(lkd);
	pthread_join(lkd_thread, NULL);
	linkd_destroy(&lkd);
	lkd = linkd_new(ctl);
	cr_assert_not_null(lkd);
	linkd_set_precision(lkd, LINKD_PRECISION_SPIN, 200000);
	cr_assert_eq(pthread_create(&lkd_thread, NULL, linkd_main, lkd), 0);
	struct link_shaper_opts o = { .backend = LINK_BACKEND_NFQ, .linkd_ctl = ctl };
	shaper = link_shaper_new(&o);
	cr_assert_not_null(shaper);
	lateness_of(200, true);
}
