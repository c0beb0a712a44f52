/* Kernel backend: per-peer classes on a direction's egress (link_shaper_apply_peers, the delay
 * compensation of paths across hosts). Runs where sch_netem exists: directly, or inside the netem
 * VM (make check-kernel).
 *
 * Fixture: namespaces "node" (198.18.S.1) and "switch" joined by one veth pair; the switch side
 * holds two addresses, .2 (a local peer) and .3 (the "remote" one). Both directions are shaped
 * with 20 ms; the class of .3 (up: to it, down: from it) has 10 ms, as a path across hosts with a
 * 10 ms underlay would. Probes to both addresses are interleaved, so a loaded host slows both
 * alike; the test compares medians. */
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
#include "tests/support/fixture.h"
#include "tests/support/proc.h"

static char ns_node[64], ns_sw[64], if_node[16], if_sw[16];
static struct link_shaper *shaper;
static struct link_endpoint ep;
static int subnet;

static double time_scale(void)
{
	const char *v = getenv("STALENET_TIME_SCALE");
	double x = v ? atof(v) : 1.0;
	return x >= 1.0 ? x : 1.0;
}

static void setup(void)
{
	log_init("test", LOG_WARN);
	support_require_root();
	/* before anything is made: a skipped test's .fini does not run */
	if (link_shaper_probe_kernel() != 1)
		support_skip_or_fail("kernel has no sch_netem (run make check-kernel)");
	subnet = (getpid() % 200) + 1;
	snprintf(ns_node, sizeof ns_node, "snk%d-node", getpid());
	snprintf(ns_sw, sizeof ns_sw, "snk%d-sw", getpid());
	snprintf(if_node, sizeof if_node, "sk%dn", getpid() % 100000);
	snprintf(if_sw, sizeof if_sw, "sk%ds", getpid() % 100000);
	if (support_sh("ip netns add %s && ip netns add %s", ns_node, ns_sw) != 0 ||
	    support_sh("ip link add %s netns %s type veth peer %s netns %s", if_node, ns_node, if_sw, ns_sw) != 0 ||
	    support_sh("ip -n %s addr add 198.18.%d.1/24 dev %s && ip -n %s addr add 198.18.%d.2/24 dev %s && "
		       "ip -n %s addr add 198.18.%d.3/24 dev %s", ns_node, subnet, if_node, ns_sw, subnet, if_sw,
		       ns_sw, subnet, if_sw) != 0 ||
	    support_sh("ip -n %s link set %s up && ip -n %s link set %s up && ip -n %s link set lo up && "
		       "ip -n %s link set lo up", ns_node, if_node, ns_sw, if_sw, ns_node, ns_sw) != 0) {
		support_skip_or_fail("cannot create namespaces / veth");
		return;
	}
	/* ARP crosses netem too: permanent neighbours keep it out of the measurement */
	if (support_sh("M=$(ip netns exec %s cat /sys/class/net/%s/address) && "
		       "ip -n %s neigh replace 198.18.%d.2 dev %s lladdr $M nud permanent && "
		       "ip -n %s neigh replace 198.18.%d.3 dev %s lladdr $M nud permanent && "
		       "ip -n %s neigh replace 198.18.%d.1 dev %s lladdr $(ip netns exec %s cat /sys/class/net/%s/address) nud permanent",
		       ns_sw, if_sw, ns_node, subnet, if_node, ns_node, subnet, if_node, ns_sw, subnet, if_sw,
		       ns_node, if_node) != 0) {
		support_skip_or_fail("cannot pin neighbour entries");
		return;
	}
	struct link_shaper_opts o = { .backend = LINK_BACKEND_KERNEL };
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
	if (ns_node[0])
		support_sh("ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", ns_node, ns_sw);
}

static struct sockaddr_in addr_of(int host, int port)
{
	char ip[32];
	snprintf(ip, sizeof ip, "198.18.%d.%d", subnet, host);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

struct sockreq {
	struct sockaddr_in at;
	bool bind;
	int fd;
};

static int open_sock(void *arg)
{
	struct sockreq *r = arg;
	r->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (r->fd < 0)
		return -errno;
	if (r->bind && bind(r->fd, (struct sockaddr *)&r->at, sizeof r->at) < 0)
		return -errno;
	return 0;
}

/* A UDP socket in ns, bound to 198.18.S.host:9000 when host > 0. */
static int sock_in(const char *ns, int host)
{
	struct sockreq r = { .at = addr_of(host, 9000), .bind = host > 0, .fd = -1 };
	cr_assert_eq(netns_call(ns, open_sock, &r), 0, "socket in %s", ns);
	return r.fd;
}

struct echo {
	int fd[2];
	volatile bool stop;
};

/* Echo on .2 and .3: each reply leaves from the address the probe was sent to. */
static void *echo_main(void *arg)
{
	struct echo *e = arg;
	char buf[64];
	while (!e->stop) {
		struct pollfd p[2] = { { .fd = e->fd[0], .events = POLLIN }, { .fd = e->fd[1], .events = POLLIN } };
		if (poll(p, 2, 50) <= 0)
			continue;
		for (int i = 0; i < 2; i++) {
			struct sockaddr_in from;
			socklen_t fl = sizeof from;
			ssize_t n = (p[i].revents & POLLIN) ? recvfrom(e->fd[i], buf, sizeof buf, 0,
								       (struct sockaddr *)&from, &fl) : -1;
			if (n > 0)
				sendto(e->fd[i], buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
		}
	}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* n round trips to .2 and n to .3, alternating, one at a time; medians in ms (-1: too few back). */
static void rtt_medians(int n, double *med2, double *med3)
{
	struct echo e = { { sock_in(ns_sw, 2), sock_in(ns_sw, 3) }, false };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, echo_main, &e), 0);
	int c = sock_in(ns_node, 0);
	double *r[2] = { calloc((size_t)n, sizeof(double)), calloc((size_t)n, sizeof(double)) };
	int got[2] = { 0, 0 };
	cr_assert(r[0] && r[1]);
	for (int k = 0; k < 2 * n + 2; k++) {
		int which = k % 2;
		struct sockaddr_in to = addr_of(2 + which, 9000);
		uint32_t seq = (uint32_t)k, back = UINT32_MAX;
		int64_t t0 = clock_now_ns(), deadline = t0 + 2000000000LL;
		sendto(c, &seq, sizeof seq, 0, (struct sockaddr *)&to, sizeof to);
		while (back != seq) {
			int64_t now = clock_now_ns();
			if (now >= deadline)
				break;
			struct pollfd p = { .fd = c, .events = POLLIN };
			if (poll(&p, 1, (int)((deadline - now) / 1000000) + 1) > 0 &&
			    recv(c, &back, sizeof back, 0) != (ssize_t)sizeof back)
				back = UINT32_MAX;
		}
		/* the first probe to each address is a warm-up (route and socket lookups) */
		if (back == seq && k >= 2)
			r[which][got[which]++] = (double)(clock_now_ns() - t0) / 1e6;
	}
	e.stop = true;
	pthread_join(t, NULL);
	close(e.fd[0]);
	close(e.fd[1]);
	close(c);
	for (int i = 0; i < 2; i++)
		qsort(r[i], (size_t)got[i], sizeof(double), cmp_double);
	*med2 = got[0] > n / 2 ? r[0][got[0] / 2] : -1;
	*med3 = got[1] > n / 2 ? r[1][got[1] / 2] : -1;
	free(r[0]);
	free(r[1]);
}

/* 20 ms each way, the class of .3 10 ms each way: the round trip to .3 is 20 ms shorter. */
static void check_compensated(uint64_t rate_bps)
{
	struct link_params dir = { .delay_us = 20000, .rate_bps = rate_bps }, cls = { .delay_us = 10000 };
	struct sockaddr_in remote = addr_of(3, 0);
	uint32_t peer = remote.sin_addr.s_addr;
	double tol = 2.0 * time_scale(), m2, m3;

	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &dir), 0);
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_DOWN, &dir), 0);
	cr_assert_eq(link_shaper_apply_peers(shaper, &ep, LINK_DIR_UP, "h1", &peer, 1, &cls), 0);
	cr_assert_eq(link_shaper_apply_peers(shaper, &ep, LINK_DIR_DOWN, "h1", &peer, 1, &cls), 0);
	rtt_medians(20, &m2, &m3);
	cr_log_info("rate %llu: median rtt to the local peer %.2f ms, to the compensated one %.2f ms (tolerance %.1f)",
		    (unsigned long long)rate_bps, m2, m3, tol);
	cr_assert_geq(m2, 40.0 - 0.5, "local peer: %.2f ms, configured 40", m2);
	cr_assert_geq(m3, 20.0 - 0.5, "compensated peer: %.2f ms, configured 20", m3);
	cr_assert_leq(m2, 40.0 + 2 * tol, "local peer: %.2f ms", m2);
	if (!(m2 - m3 > 20.0 - tol && m2 - m3 < 20.0 + tol))     /* what the kernel has, for the log */
		support_sh("ip netns exec %s tc -s qdisc show dev %s >&2; ip netns exec %s tc filter show dev %s >&2",
			   ns_node, if_node, ns_node, if_node);
	cr_assert(m2 - m3 > 20.0 - tol && m2 - m3 < 20.0 + tol, "difference %.2f ms, expected 20 +- %.1f", m2 - m3, tol);

	/* the whole tree counts: every probe and reply crossed the root of each direction */
	struct link_counters up, down;
	cr_assert_eq(link_shaper_counters(shaper, &ep, LINK_DIR_UP, &up), 0);
	cr_assert_eq(link_shaper_counters(shaper, &ep, LINK_DIR_DOWN, &down), 0);
	cr_assert_geq(up.packets, 40, "up: %llu packets", (unsigned long long)up.packets);
	cr_assert_geq(down.packets, 40, "down: %llu packets", (unsigned long long)down.packets);

	/* a change in place: the default 30 ms, the class 5 ms (as a reshape does it) */
	dir.delay_us = 30000;
	cls.delay_us = 5000;
	cr_assert_eq(link_shaper_change(shaper, &ep, LINK_DIR_UP, &dir), 0);
	cr_assert_eq(link_shaper_apply_peers(shaper, &ep, LINK_DIR_UP, "h1", NULL, 0, &cls), 0);
	rtt_medians(10, &m2, &m3);
	cr_log_info("after the change: %.2f ms and %.2f ms", m2, m3);
	cr_assert(m2 - m3 > 35.0 - tol && m2 - m3 < 35.0 + tol, "difference %.2f ms, expected 35 (50 - 15) +- %.1f", m2 - m3, tol);
}

Test(kernel_peers, compensated_class_without_rate, .init = setup, .fini = teardown, .timeout = 120)
{
	check_compensated(0);
}

Test(kernel_peers, compensated_class_under_the_rate, .init = setup, .fini = teardown, .timeout = 120)
{
	check_compensated(50000000);
}

struct sink {
	int fd[2];
	volatile bool sending;
	uint64_t bytes[2];
	int64_t first_ns, last_ns;
	uint64_t first_len;
};

/* Count what reaches .2 and .3 until the sender is done and nothing came for 500 ms. */
static void *sink_main(void *arg)
{
	struct sink *k = arg;
	char buf[2048];
	for (;;) {
		struct pollfd p[2] = { { .fd = k->fd[0], .events = POLLIN }, { .fd = k->fd[1], .events = POLLIN } };
		int r = poll(p, 2, 500);
		if (r <= 0) {
			if (!k->sending)
				break;
			continue;
		}
		for (int i = 0; i < 2; i++) {
			ssize_t n = (p[i].revents & POLLIN) ? recv(k->fd[i], buf, sizeof buf, 0) : -1;
			if (n <= 0)
				continue;
			int64_t now = clock_now_ns();
			if (!k->first_ns) {
				k->first_ns = now;
				k->first_len = (uint64_t)n;
			}
			k->last_ns = now;
			k->bytes[i] += (uint64_t)n;
		}
	}
	return NULL;
}

/* The rate is the direction's, over its whole egress: datagrams sent as fast as they go to the
 * local and the compensated peer at once arrive at the rate in total, not twice it (a limit per
 * band would let each class have the whole rate), and the two classes share it. */
Test(kernel_peers, classes_share_the_rate, .init = setup, .fini = teardown, .timeout = 120)
{
	const uint64_t rate = 4000000;
	struct link_params dir = { .delay_us = 20000, .rate_bps = rate }, cls = { .delay_us = 10000 };
	struct sockaddr_in remote = addr_of(3, 0);
	uint32_t peer = remote.sin_addr.s_addr;
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &dir), 0);
	cr_assert_eq(link_shaper_apply_peers(shaper, &ep, LINK_DIR_UP, "h1", &peer, 1, &cls), 0);

	struct sink k = { { sock_in(ns_sw, 2), sock_in(ns_sw, 3) }, true, { 0, 0 }, 0, 0, 0 };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, sink_main, &k), 0);
	int c = sock_in(ns_node, 0);
	char payload[1200];
	memset(payload, 'x', sizeof payload);
	struct sockaddr_in to[2] = { addr_of(2, 9000), addr_of(3, 9000) };
	int64_t end = clock_now_ns() + 3000000000LL;
	uint64_t sent = 0;
	while (clock_now_ns() < end) {
		/* a full queue answers ENOBUFS or drops: the sender just goes on */
		if (sendto(c, payload, sizeof payload, MSG_DONTWAIT, (struct sockaddr *)&to[sent % 2], sizeof to[0]) > 0)
			sent++;
		else {
			struct pollfd p = { .fd = c, .events = POLLOUT };
			poll(&p, 1, 10);
		}
	}
	k.sending = false;
	pthread_join(t, NULL);
	close(k.fd[0]);
	close(k.fd[1]);
	close(c);
	uint64_t total = k.bytes[0] + k.bytes[1];
	double secs = (double)(k.last_ns - k.first_ns) / 1e9;
	cr_assert_gt(secs, 1.0, "datagrams arrived over %.3f s only", secs);
	/* payload bit rate; the TBF counts the frame (1200 + 42 bytes of headers) */
	double bps = (double)(total - k.first_len) * 8.0 / secs, cap = (double)rate * 1200.0 / 1242.0;
	struct link_counters up;
	cr_assert_eq(link_shaper_counters(shaper, &ep, LINK_DIR_UP, &up), 0);
	cr_log_info("sent %llu datagrams; received %.3f mbit/s of payload over %.2f s (cap %.3f), %llu + %llu bytes; "
		    "root: %llu packets, %llu dropped, %llu overlimits", (unsigned long long)sent, bps / 1e6, secs, cap / 1e6,
		    (unsigned long long)k.bytes[0], (unsigned long long)k.bytes[1], (unsigned long long)up.packets,
		    (unsigned long long)up.dropped, (unsigned long long)up.overlimits);
	cr_assert_leq(bps, cap * 1.1, "%.3f mbit/s through a %.3f mbit/s egress", bps / 1e6, cap / 1e6);
	cr_assert_geq(bps, cap * 0.7, "%.3f mbit/s through a %.3f mbit/s egress", bps / 1e6, cap / 1e6);
	/* sent alternately, shared round robin: about half each (a strict priority of the default
	 * band would leave the compensated peer what the local one does not take) */
	cr_assert_geq(k.bytes[0], total * 2 / 5, "the local peer got %llu of %llu bytes", (unsigned long long)k.bytes[0],
		      (unsigned long long)total);
	cr_assert_geq(k.bytes[1], total * 2 / 5, "the compensated peer got %llu of %llu bytes",
		      (unsigned long long)k.bytes[1], (unsigned long long)total);
	cr_assert_gt(up.dropped + up.overlimits, 0, "a saturated egress drops or throttles: the root counts it");
}
