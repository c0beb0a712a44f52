/* orchestrator/testbed: namespaces, bridge, veth pairs and addresses through rtnetlink.
 *
 * Built for speed (a 200-node star in well under a second on two cores):
 * - A namespace is unshare(CLONE_NEWNET) in this thread + a bind mount for its name; while
 *   inside, we write its sysctls and open the sockets we need there (netlink, UDP), then
 *   setns back. No process per node, no `ip` commands.
 * - Messages are built with libnl-route and sent in batches: one sendmsg carries every
 *   veth request of a chunk (the kernel walks a multi-message skb in order and acks each),
 *   then the acks are collected. A veth pair is created from the switch namespace with its
 *   peer directly in the node's namespace (IFLA_NET_NS_FD), already enslaved (IFLA_MASTER),
 *   named, sized and up, so one message makes one link complete.
 * - Deleting is unmounting the names: the kernel tears each namespace (and the veths in it)
 *   down asynchronously once the last reference goes.
 * Nodes are handled in chunks of at most CHUNK so the per-node fds stay well under the
 * default RLIMIT_NOFILE at 1000+ nodes.
 *
 * Sysctls inside our own namespaces are not journaled (they die with the namespace); host
 * sysctls (neighbour gc thresholds, which are global: the ARP table is shared by all
 * namespaces and the knobs exist only in the initial one) are, with the value we set, and
 * restored only if nobody changed them since. */
#include "orchestrator/testbed.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/bridge.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/neighbour.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/netns.h"
#include "lib/sysctl.h"
#include "orchestrator/hostshare.h"
#include "orchestrator/journal.h"

#define CHUNK 128
#define NAME_MAX_LEN 48
#define NEIGH_KEYS 3
#define HOST_SYSCTLS (NEIGH_KEYS + 1)

struct tb_node {
	char name[NAME_MAX_LEN + 1];
	char netns[TESTBED_PREFIX_MAX + NAME_MAX_LEN + 1];
	char sw_ifname[IFNAMSIZ];
	char addr_str[INET_ADDRSTRLEN];
	uint32_t addr_be;
	bool created;
};

struct testbed {
	char prefix[TESTBED_PREFIX_MAX + 1];
	char sw_netns[TESTBED_PREFIX_MAX + 8];
	bool sw_created;
	int n;
	struct tb_node *nodes;
	int prefix_len;
	int mtu;
	uint32_t *pin;         /* addresses pinned in every node's neighbour table (network order) */
	int n_pin;
	struct journal *j;     /* not owned */
	/* claims on host sysctls shared with other runs (orchestrator/hostshare) */
	int n_sysctl;
	struct hostshare_claim sysctl[HOST_SYSCTLS];
	struct testbed_timing timing;
	const volatile sig_atomic_t *intr; /* spec.interrupted, .interrupt_at */
	int intr_at;
};

/* The caller asked to stop at once: every wait ends. */
static bool cut_short(const struct testbed *tb)
{
	return tb->intr && *tb->intr >= tb->intr_at;
}

static const char *const neigh_keys[NEIGH_KEYS] = {
	"net.ipv4.neigh.default.gc_thresh1", "net.ipv4.neigh.default.gc_thresh2",
	"net.ipv4.neigh.default.gc_thresh3",
};

/* ---- netlink batches ------------------------------------------------------------------------ */

struct nlbatch {
	char *buf;
	size_t len, cap;
	uint32_t seq0;  /* seq of the first message */
	int count;
};

static int batch_add(struct nlbatch *b, struct nl_msg *m)
{
	struct nlmsghdr *h = nlmsg_hdr(m);
	size_t len = NLMSG_ALIGN(h->nlmsg_len);

	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 16384;
		char *nb;

		while (cap < b->len + len)
			cap *= 2;
		nb = realloc(b->buf, cap);
		if (!nb)
			return -ENOMEM;
		b->buf = nb;
		b->cap = cap;
	}
	h->nlmsg_seq = b->seq0 + (uint32_t)b->count;
	h->nlmsg_pid = 0;
	h->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	memcpy(b->buf + b->len, h, h->nlmsg_len);
	memset(b->buf + b->len + h->nlmsg_len, 0, len - h->nlmsg_len);
	b->len += len;
	b->count++;
	return 0;
}

static void batch_reset(struct nlbatch *b, uint32_t seq0)
{
	b->len = 0;
	b->count = 0;
	b->seq0 = seq0;
}

static int nl_open(void)
{
	int one = 1, rcvbuf = 1 << 20, fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	if (fd < 0)
		return -errno;
	/* Acks without the echoed request: a chunk's acks fit the default receive buffer. */
	setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
	/* A node's batch acks every pinned neighbour too (up to TESTBED_PIN_NEIGH_MAX, about 1 KiB
	 * of buffer each): room for them all, beyond rmem_max when allowed (we are root). */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

static int batch_send(int fd, const struct nlbatch *b)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	ssize_t n;

	if (b->count == 0)
		return 0;
	do
		n = sendto(fd, b->buf, b->len, 0, (struct sockaddr *)&sa, sizeof sa);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == b->len ? 0 : -EIO;
}

/* Collect the b->count acks of a sent batch. Returns 0 when all succeeded; otherwise the
 * first error, with *bad = index of its message. */
static int batch_acks(int fd, const struct nlbatch *b, int *bad)
{
	char buf[16384] __attribute__((aligned(4)));
	int got = 0, first = 0;

	*bad = -1;
	while (got < b->count) {
		ssize_t n;

		do
			n = recv(fd, buf, sizeof buf, 0);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return -errno;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			const struct nlmsgerr *e = NLMSG_DATA(h);
			uint32_t idx = h->nlmsg_seq - b->seq0;

			if (h->nlmsg_type != NLMSG_ERROR || idx >= (uint32_t)b->count)
				continue;
			got++;
			if (e->error < 0 && first == 0) {
				first = e->error;
				*bad = (int)idx;
			}
		}
	}
	return first;
}

/* One batch on one socket, synchronously. */
static int batch_run(int fd, const struct nlbatch *b, int *bad)
{
	int rc = batch_send(fd, b);

	*bad = -1;
	return rc < 0 ? rc : batch_acks(fd, b, bad);
}

/* ---- message builders (libnl-route) --------------------------------------------------------- */

static int msg_bridge(struct nlbatch *b, const char *name, int mtu)
{
	struct rtnl_link *l = rtnl_link_bridge_alloc();
	struct nl_msg *m = NULL;
	int rc;

	if (!l)
		return -ENOMEM;
	rtnl_link_set_name(l, name);
	rtnl_link_set_mtu(l, (unsigned)mtu);
	rtnl_link_set_flags(l, IFF_UP);
	rc = rtnl_link_build_add_request(l, NLM_F_CREATE | NLM_F_EXCL, &m);
	rtnl_link_put(l);
	if (rc < 0)
		return -ENOMEM;
	rc = batch_add(b, m);
	nlmsg_free(m);
	return rc;
}

/* veth pair: local end sw_ifname enslaved to master and up; peer eth0 in nsfd. The peer
 * cannot be created up (veth_open fails with ENOTCONN before the pair is joined), so the
 * node brings it up itself. */
static int msg_veth(struct nlbatch *b, const char *sw_ifname, int master, int nsfd, int mtu,
		    uint32_t node_addr_be)
{
	struct rtnl_link *l = rtnl_link_veth_alloc(), *peer;
	struct nl_msg *m = NULL;
	struct nl_addr *mac = NULL;
	uint8_t hw[6];
	int rc;

	if (!l)
		return -ENOMEM;
	peer = rtnl_link_veth_get_peer(l); /* a reference owned by us */
	rtnl_link_set_name(l, sw_ifname);
	rtnl_link_set_master(l, master);
	rtnl_link_set_mtu(l, (unsigned)mtu);
	rtnl_link_set_flags(l, IFF_UP);
	rtnl_link_set_name(peer, TESTBED_NODE_IFNAME);
	rtnl_link_set_ns_fd(peer, nsfd);
	rtnl_link_set_mtu(peer, (unsigned)mtu);
	/* The node's MAC follows from its address, so every namespace (and every host of a run
	 * across hosts) can pin it without asking. */
	testbed_mac_of(node_addr_be, hw);
	mac = nl_addr_build(AF_LLC, hw, sizeof hw);
	if (!mac) {
		rtnl_link_put(peer);
		rtnl_link_veth_release(l);
		return -ENOMEM;
	}
	rtnl_link_set_addr(peer, mac);
	nl_addr_put(mac);
	rc = rtnl_link_build_add_request(l, NLM_F_CREATE | NLM_F_EXCL, &m);
	rtnl_link_put(peer);
	rtnl_link_veth_release(l);
	if (rc < 0)
		return -ENOMEM;
	rc = batch_add(b, m);
	nlmsg_free(m);
	return rc;
}

static int msg_link_up(struct nlbatch *b, int ifindex)
{
	struct rtnl_link *l = rtnl_link_alloc();
	struct nl_msg *m = NULL;
	int rc;

	if (!l)
		return -ENOMEM;
	rtnl_link_set_ifindex(l, ifindex);
	rtnl_link_set_flags(l, IFF_UP);
	rc = rtnl_link_build_add_request(l, 0, &m); /* no NLM_F_CREATE: change the existing one */
	rtnl_link_put(l);
	if (rc < 0)
		return -ENOMEM;
	rc = batch_add(b, m);
	nlmsg_free(m);
	return rc;
}

static int msg_addr(struct nlbatch *b, int ifindex, uint32_t addr_be, int plen)
{
	struct rtnl_addr *a = rtnl_addr_alloc();
	struct nl_addr *local = nl_addr_build(AF_INET, &addr_be, 4);
	struct nl_msg *m = NULL;
	int rc = -ENOMEM;

	if (!a || !local)
		goto out;
	nl_addr_set_prefixlen(local, plen);
	rtnl_addr_set_ifindex(a, ifindex);
	rtnl_addr_set_family(a, AF_INET);
	if (rtnl_addr_set_local(a, local) < 0)
		goto out;
	rtnl_addr_set_prefixlen(a, plen);
	if (rtnl_addr_build_add_request(a, NLM_F_EXCL, &m) < 0)
		goto out;
	rc = batch_add(b, m);
	nlmsg_free(m);
out:
	nl_addr_put(local);
	rtnl_addr_put(a);
	return rc;
}

/* ---- helpers ------------------------------------------------------------------------------- */

/* A permanent neighbour entry on ifindex: addr_be is at the MAC testbed_mac_of gives it. */
static int msg_neigh(struct nlbatch *b, int ifindex, uint32_t addr_be)
{
	struct rtnl_neigh *ne = rtnl_neigh_alloc();
	struct nl_addr *dst = nl_addr_build(AF_INET, &addr_be, 4), *ll = NULL;
	struct nl_msg *m = NULL;
	uint8_t hw[6];
	int rc = -ENOMEM;

	testbed_mac_of(addr_be, hw);
	ll = nl_addr_build(AF_LLC, hw, sizeof hw);
	if (!ne || !dst || !ll)
		goto out;
	rtnl_neigh_set_ifindex(ne, ifindex);
	rtnl_neigh_set_family(ne, AF_INET);
	rtnl_neigh_set_state(ne, NUD_PERMANENT);
	if (rtnl_neigh_set_dst(ne, dst) < 0)
		goto out;
	rtnl_neigh_set_lladdr(ne, ll);
	if (rtnl_neigh_build_add_request(ne, NLM_F_CREATE | NLM_F_REPLACE, &m) < 0) {
		rc = -EINVAL;
		goto out;
	}
	rc = batch_add(b, m);
out:
	nlmsg_free(m);
	nl_addr_put(ll);
	nl_addr_put(dst);
	rtnl_neigh_put(ne);
	return rc;
}

static int ifindex_of(int sockfd, const char *name)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
	if (ioctl(sockfd, SIOCGIFINDEX, &ifr) < 0)
		return -errno;
	return ifr.ifr_ifindex;
}

static bool valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > NAME_MAX_LEN || !strcmp(s, "sw") || s[0] == '.')
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '_' || *p == '.' || *p == '-'))
			return false;
	return true;
}

/* The transport knobs of spec->tcp (we are inside a node's namespace). */
static int setup_ns_tcp(const struct testbed_tcp *t)
{
	char v[96];
	int rc = 0;

	if (t->slow_start_after_idle >= 0)
		rc = sysctl_write("net.ipv4.tcp_slow_start_after_idle", t->slow_start_after_idle ? "1" : "0");
	if (rc == 0 && t->ecn >= 0) {
		snprintf(v, sizeof v, "%d", t->ecn);
		rc = sysctl_write("net.ipv4.tcp_ecn", v);
	}
	if (rc == 0 && t->rmem[2]) {
		snprintf(v, sizeof v, "%llu %llu %llu", (unsigned long long)t->rmem[0],
			 (unsigned long long)t->rmem[1], (unsigned long long)t->rmem[2]);
		rc = sysctl_write("net.ipv4.tcp_rmem", v);
	}
	if (rc == 0 && t->wmem[2]) {
		snprintf(v, sizeof v, "%llu %llu %llu", (unsigned long long)t->wmem[0],
			 (unsigned long long)t->wmem[1], (unsigned long long)t->wmem[2]);
		rc = sysctl_write("net.ipv4.tcp_wmem", v);
	}
	return rc;
}

/* initcwnd on the node's connected route: `ip route change` of the route the kernel made for
 * its address, same key (prefix, device, proto kernel, scope link, source) plus the metric.
 * A route attribute, not a sysctl: it goes with the namespace too. */
static int set_initcwnd(const struct tb_node *nd, int plen, uint32_t cwnd)
{
	uint32_t mask = plen ? htonl(~0u << (32 - plen)) : 0;
	struct in_addr net = { .s_addr = nd->addr_be & mask };
	char dst[INET_ADDRSTRLEN + 4], cw[16];
	const char *argv[] = { "ip", "route", "change", dst, "dev", TESTBED_NODE_IFNAME, "proto", "kernel",
			       "scope", "link", "src", nd->addr_str, "initcwnd", cw, NULL };
	int rc;

	inet_ntop(AF_INET, &net, dst, INET_ADDRSTRLEN);
	snprintf(dst + strlen(dst), sizeof dst - strlen(dst), "/%d", plen);
	snprintf(cw, sizeof cw, "%u", cwnd);
	rc = netns_exec(nd->netns, argv, false);
	return rc == 0 ? 0 : rc < 0 ? rc : -EIO;
}

/* Sysctls a fresh namespace gets (we are inside it). */
static int setup_ns_sysctls(const char *cc, const struct testbed_tcp *tcp, bool keep_ipv6, bool is_node)
{
	int rc = 0;

	if (is_node) {
		rc = sysctl_write("net.ipv4.tcp_congestion_control", cc);
		if (rc == 0 && tcp)
			rc = setup_ns_tcp(tcp);
		if (rc < 0)
			return rc;
	}
	if (!keep_ipv6) {
		/* default first: devices created later inherit it. ENOENT: no IPv6 at all. */
		rc = sysctl_write("net.ipv6.conf.default.disable_ipv6", "1");
		if (rc == 0)
			rc = sysctl_write("net.ipv6.conf.all.disable_ipv6", "1");
		if (rc == -ENOENT)
			rc = 0;
	}
	return rc;
}

static int udp_open(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(TESTBED_REACH_PORT) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

/* Operational state (IF_OPER_*) of the links in a RTM_NEWLINK reply buffer: calls
 * seen(arg, ifindex, operstate) for each. */
static void parse_links(const char *buf, ssize_t n, void (*seen)(void *, int, int), void *arg)
{
	for (const struct nlmsghdr *h = (const struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
	     h = NLMSG_NEXT(h, n)) {
		const struct ifinfomsg *ifi = NLMSG_DATA(h);
		const struct rtattr *rta;
		int len, oper = -1;

		if (h->nlmsg_type != RTM_NEWLINK)
			continue;
		len = (int)IFLA_PAYLOAD(h);
		for (rta = IFLA_RTA(ifi); RTA_OK(rta, len); rta = RTA_NEXT(rta, len))
			if (rta->rta_type == IFLA_OPERSTATE)
				oper = *(const unsigned char *)RTA_DATA(rta);
		seen(arg, ifi->ifi_index, oper);
	}
}

struct oper_count {
	int up;
	int bridge;
};

static void count_up_ports(void *arg, int ifindex, int oper)
{
	struct oper_count *c = arg;

	if (ifindex != c->bridge && ifindex != 1 && oper == IF_OPER_UP)
		c->up++;
}

static void note_up(void *arg, int ifindex, int oper)
{
	(void)ifindex;
	*(bool *)arg = oper == IF_OPER_UP;
}

/* Wait until the kernel's link watcher has processed the carrier of every new pair: the
 * node ends report IF_OPER_UP and so do all bridge ports. Packets sent before that are
 * dropped (no qdisc attached yet, bridge port not forwarding), and a lost first ARP request
 * costs a whole retrans_time (1 s). Returns 0 or -ETIMEDOUT / -errno. */
static int wait_links_up(const struct testbed *tb, int swnl, int bridx, int n_ports, const int *nlfd,
			 const int *idx, int n, int timeout_ms)
{
	int64_t deadline = clock_now_ns() + (int64_t)timeout_ms * 1000000;
	bool *up = calloc((size_t)n, sizeof *up);
	char buf[32768] __attribute__((aligned(4)));
	int rc = 0, missing = n;

	if (!up)
		return -ENOMEM;
	for (;;) {
		struct oper_count c = { .up = 0, .bridge = bridx };
		struct {
			struct nlmsghdr h;
			struct ifinfomsg i;
		} req;
		bool done = false;

		/* Node ends: one request per socket, then the replies. */
		for (int k = 0; k < n; k++) {
			if (up[k])
				continue;
			memset(&req, 0, sizeof req);
			req.h.nlmsg_len = sizeof req;
			req.h.nlmsg_type = RTM_GETLINK;
			req.h.nlmsg_flags = NLM_F_REQUEST;
			req.h.nlmsg_seq = 7;
			req.i.ifi_family = AF_UNSPEC;
			req.i.ifi_index = idx[k];
			if (send(nlfd[k], &req, sizeof req, 0) < 0) {
				rc = -errno;
				goto out;
			}
		}
		for (int k = 0; k < n; k++) {
			ssize_t r;

			if (up[k])
				continue;
			do
				r = recv(nlfd[k], buf, sizeof buf, 0);
			while (r < 0 && errno == EINTR);
			if (r < 0) {
				rc = -errno;
				goto out;
			}
			parse_links(buf, r, note_up, &up[k]);
			if (up[k])
				missing--;
		}
		/* Switch ends: one dump. */
		memset(&req, 0, sizeof req);
		req.h.nlmsg_len = sizeof req;
		req.h.nlmsg_type = RTM_GETLINK;
		req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
		req.h.nlmsg_seq = 8;
		req.i.ifi_family = AF_UNSPEC;
		if (send(swnl, &req, sizeof req, 0) < 0) {
			rc = -errno;
			goto out;
		}
		while (!done) {
			ssize_t r, left;

			do
				r = recv(swnl, buf, sizeof buf, 0);
			while (r < 0 && errno == EINTR);
			if (r < 0) {
				rc = -errno;
				goto out;
			}
			left = r;
			for (const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
			     NLMSG_OK(h, (size_t)left); h = NLMSG_NEXT(h, left))
				if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR)
					done = true;
			parse_links(buf, r, count_up_ports, &c);
		}
		if (missing == 0 && c.up >= n_ports)
			break;
		if (cut_short(tb)) {
			rc = -ECANCELED;
			break;
		}
		if (clock_now_ns() >= deadline) {
			log_error("testbed: %d node links not up, %d of %d bridge ports up", missing,
				  c.up, n_ports);
			rc = -ETIMEDOUT;
			break;
		}
		clock_sleep_ns(1000000);
	}
out:
	free(up);
	return rc;
}

/* Ring ping-pong among nodes [a, b) whose UDP sockets (bound in their namespaces) are fd[]. */
static int reach_ring(struct testbed *tb, int a, int b, const int *fd, int timeout_ms, char *err,
		      size_t errlen)
{
	int n = b - a, missing = n, rc = 0;
	bool *done = calloc((size_t)n, sizeof *done);
	struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);
	int64_t deadline = clock_now_ns() + (int64_t)timeout_ms * 1000000, next_send = 0;

	if (!done || !pfd) {
		rc = -ENOMEM;
		goto out;
	}
	if (n < 2) {
		rc = 0;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		pfd[i].fd = fd[i];
		pfd[i].events = POLLIN;
	}
	while (missing > 0) {
		int64_t now = clock_now_ns();

		if (cut_short(tb)) {
			snprintf(err, errlen, "interrupted");
			rc = -ECANCELED;
			goto out;
		}
		if (now >= deadline) {
			for (int i = 0; i < n; i++)
				if (!done[i]) {
					snprintf(err, errlen, "node %s (%s) got no answer from %s",
						 tb->nodes[a + i].name, tb->nodes[a + i].addr_str,
						 tb->nodes[a + (i + 1) % n].addr_str);
					break;
				}
			rc = -EHOSTUNREACH;
			goto out;
		}
		if (now >= next_send) {
			/* (Re)send pings of the unanswered; the first may wait on ARP. */
			for (int i = 0; i < n; i++) {
				struct sockaddr_in to = { .sin_family = AF_INET,
							  .sin_port = htons(TESTBED_REACH_PORT) };
				uint32_t msg[2] = { htonl(0x50494e47u), htonl((uint32_t)i) };

				if (done[i])
					continue;
				to.sin_addr.s_addr = tb->nodes[a + (i + 1) % n].addr_be;
				sendto(fd[i], msg, sizeof msg, MSG_DONTWAIT, (struct sockaddr *)&to,
				       sizeof to);
			}
			next_send = now + 100 * 1000000LL;
		}
		if (poll(pfd, (nfds_t)n, 10) < 0 && errno != EINTR) {
			rc = -errno;
			goto out;
		}
		for (int i = 0; i < n; i++) {
			if (!(pfd[i].revents & POLLIN))
				continue;
			for (;;) {
				struct sockaddr_in from;
				socklen_t fl = sizeof from;
				uint32_t msg[2];
				ssize_t r = recvfrom(fd[i], msg, sizeof msg, MSG_DONTWAIT,
						     (struct sockaddr *)&from, &fl);

				if (r < 0)
					break;
				if (r != sizeof msg)
					continue;
				if (msg[0] == htonl(0x50494e47u)) { /* ping: answer it */
					msg[0] = htonl(0x504f4e47u);
					sendto(fd[i], msg, sizeof msg, MSG_DONTWAIT,
					       (struct sockaddr *)&from, fl);
				} else if (msg[0] == htonl(0x504f4e47u) && ntohl(msg[1]) == (uint32_t)i &&
					   from.sin_addr.s_addr == tb->nodes[a + (i + 1) % n].addr_be &&
					   !done[i]) {
					done[i] = true;
					missing--;
				}
			}
		}
	}
out:
	free(done);
	free(pfd);
	return rc;
}

/* ---- public -------------------------------------------------------------------------------- */

int testbed_random_prefix(char *buf, size_t len)
{
	for (int tries = 0; tries < 64; tries++) {
		uint16_t r;
		char reg[512], sw[64];

		if (getrandom(&r, sizeof r, 0) != sizeof r)
			return -errno;
		if (len < 8)
			return -ENOSPC;
		snprintf(buf, len, "sn%04x-", r);
		snprintf(reg, sizeof reg, "%s/%s", journal_registry_dir(), buf);
		snprintf(sw, sizeof sw, "%ssw", buf);
		if (access(reg, F_OK) < 0 && !netns_exists(sw))
			return 0;
	}
	return -EEXIST;
}

static int raise_neigh(struct testbed *tb, int n_nodes, char *err, size_t errlen)
{
	/* Each node typically resolves a handful of neighbours (a server: all of them); size the
	 * global table for a mesh of 8 per node with plenty of slack. */
	long want[NEIGH_KEYS] = { 4L * n_nodes, 16L * n_nodes, 32L * n_nodes };

	for (int k = 0; k < NEIGH_KEYS; k++) {
		char need[32];
		int rc;

		snprintf(need, sizeof need, "%ld", want[k]);
		/* journaled before the write; released at teardown by the rules of hostshare */
		rc = hostshare_claim_take(tb->j, neigh_keys[k], need, &tb->sysctl[tb->n_sysctl], err,
					  errlen);
		if (rc < 0)
			return rc;
		tb->n_sysctl++;
	}
	return 0;
}

/* A namespace other than the initial one may only pick a congestion control listed in the
 * (global) net.ipv4.tcp_allowed_congestion_control; add cc there when missing. Other runs may
 * need the same name at the same time: the claim keeps it listed until the last one is gone. */
static int allow_cc(struct testbed *tb, const char *cc, char *err, size_t errlen)
{
	int rc = hostshare_claim_take(tb->j, HOSTSHARE_CC_KEY, cc, &tb->sysctl[tb->n_sysctl], err,
				      errlen);

	if (rc < 0)
		return rc;
	tb->n_sysctl++;
	return 0;
}

/* Create and name a namespace and leave the thread in it; the caller switches back. */
static int enter_new_ns(const char *name, const char *what, char *err, size_t errlen)
{
	int rc;

	if (unshare(CLONE_NEWNET) < 0) {
		rc = -errno;
		snprintf(err, errlen, "unshare for %s: %s", what, strerror(errno));
		return rc;
	}
	rc = netns_name_current(name);
	if (rc < 0)
		snprintf(err, errlen, "name namespace %s: %s", name, strerror(-rc));
	return rc;
}

/* The addresses every node pins (tb->pin): spec->pin_nodes addresses from the subnet's first,
 * or the testbed's own nodes; none above TESTBED_PIN_NEIGH_MAX (n^2 entries kernel-wide). */
static int plan_pins(struct testbed *tb, const struct testbed_spec *spec, uint32_t base,
		     char *err, size_t errlen)
{
	int n = spec->pin_nodes ? (int)spec->pin_nodes : tb->n;

	if (spec->pin_nodes > (1u << (32 - tb->prefix_len)) - 2) {
		snprintf(err, errlen, "%u pinned neighbours do not fit a /%d", spec->pin_nodes,
			 tb->prefix_len);
		return -EINVAL;
	}
	if (spec->no_pin_neigh || n < 2)
		return 0;
	if (n > TESTBED_PIN_NEIGH_MAX) {
		log_info("testbed: %d nodes: neighbours not pinned (more than %d)", n,
			 TESTBED_PIN_NEIGH_MAX);
		return 0;
	}
	tb->pin = calloc((size_t)n, sizeof *tb->pin);
	if (!tb->pin) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (int q = 0; q < n; q++)
		tb->pin[q] = spec->pin_nodes ? htonl(base + (uint32_t)q + 1) : tb->nodes[q].addr_be;
	tb->n_pin = n;
	return 0;
}

/* How many entries node i pins (all but its own address). */
static int pins_of(const struct testbed *tb, int i)
{
	int k = 0;

	for (int q = 0; q < tb->n_pin; q++)
		k += tb->pin[q] != tb->nodes[i].addr_be;
	return k;
}

void testbed_mac_of(uint32_t addr_be, uint8_t mac[6])
{
	/* 02: locally administered unicast; 0x53 ('S'); then the IPv4 address. Unique on a
	 * segment, whose addresses are. */
	mac[0] = 0x02;
	mac[1] = 0x53;
	memcpy(mac + 2, &addr_be, 4);
}

struct testbed *testbed_create(const struct testbed_spec *spec, struct journal *j, char *err,
			       size_t errlen)
{
	struct testbed *tb = NULL;
	struct nlbatch sb = { 0 }, *nb = NULL;
	int orig = -1, swnl = -1, swudp = -1, bridx, rc = 0, plen, bad;
	int nsfd[CHUNK], nlfd[CHUNK], udpfd[CHUNK], ifidx[CHUNK], nchunks, csize;
	uint32_t subnet, base;
	const char *cc = spec->cc ? spec->cc : TESTBED_DEFAULT_CC;
	int64_t t0 = clock_now_ns(), t;
	char prefix[TESTBED_PREFIX_MAX + 1];

	for (int i = 0; i < CHUNK; i++)
		nsfd[i] = nlfd[i] = udpfd[i] = -1;
	snprintf(err, errlen, "no error");
	plen = spec->prefix_len ? spec->prefix_len : TESTBED_DEFAULT_PREFIX_LEN;
	if (spec->n_nodes < 1 || plen < 8 || plen > 30 ||
	    (uint64_t)spec->n_nodes + 2 > (1ull << (32 - plen))) {
		snprintf(err, errlen, "%d nodes do not fit a /%d", spec->n_nodes, plen);
		return NULL;
	}
	if (spec->mtu && (spec->mtu < 576 || spec->mtu > 65535)) {
		snprintf(err, errlen, "mtu %d out of range [576, 65535]", spec->mtu);
		return NULL;
	}
	if (strlen(cc) >= 16 || strchr(cc, '\n')) {
		snprintf(err, errlen, "bad congestion control name");
		return NULL;
	}
	if (spec->prefix) {
		if (strlen(spec->prefix) > TESTBED_PREFIX_MAX || !*spec->prefix ||
		    strchr(spec->prefix, '/')) {
			snprintf(err, errlen, "prefix '%s' must be 1..%d characters", spec->prefix,
				 TESTBED_PREFIX_MAX);
			return NULL;
		}
		snprintf(prefix, sizeof prefix, "%s", spec->prefix);
	} else if (testbed_random_prefix(prefix, sizeof prefix) < 0) {
		snprintf(err, errlen, "no free run prefix");
		return NULL;
	}

	tb = calloc(1, sizeof *tb);
	if (!tb || !(tb->nodes = calloc((size_t)spec->n_nodes, sizeof *tb->nodes)) ||
	    !(nb = calloc(1, sizeof *nb))) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	tb->n = spec->n_nodes;
	tb->j = j;
	tb->intr = spec->interrupted;
	tb->intr_at = spec->interrupt_at > 0 ? spec->interrupt_at : 1;
	tb->prefix_len = plen;
	tb->mtu = spec->mtu ? spec->mtu : TESTBED_DEFAULT_MTU;
	snprintf(tb->prefix, sizeof tb->prefix, "%s", prefix);
	snprintf(tb->sw_netns, sizeof tb->sw_netns, "%ssw", prefix);
	subnet = spec->subnet_be ? ntohl(spec->subnet_be) : TESTBED_DEFAULT_SUBNET;
	base = subnet & (plen ? ~0u << (32 - plen) : 0);
	for (int i = 0; i < tb->n; i++) {
		struct tb_node *nd = &tb->nodes[i];

		if (spec->node_names) {
			if (!spec->node_names[i] || !valid_name(spec->node_names[i])) {
				snprintf(err, errlen, "bad node name '%s'",
					 spec->node_names[i] ? spec->node_names[i] : "(null)");
				rc = -EINVAL;
				goto fail;
			}
			snprintf(nd->name, sizeof nd->name, "%s", spec->node_names[i]);
			for (int k = 0; k < i; k++)
				if (!strcmp(tb->nodes[k].name, nd->name)) {
					snprintf(err, errlen, "duplicate node name '%s'", nd->name);
					rc = -EINVAL;
					goto fail;
				}
		} else {
			snprintf(nd->name, sizeof nd->name, "n%d", i);
		}
		snprintf(nd->netns, sizeof nd->netns, "%s%s", prefix, nd->name);
		if (snprintf(nd->sw_ifname, sizeof nd->sw_ifname, "%sp%d", prefix, i) >=
		    (int)sizeof nd->sw_ifname) {
			snprintf(err, errlen, "prefix '%s' too long for %d ports", prefix, tb->n);
			rc = -ENAMETOOLONG;
			goto fail;
		}
		nd->addr_be = htonl(base + (spec->addr_index ? spec->addr_index[i] : (uint32_t)i) + 1);
		inet_ntop(AF_INET, &nd->addr_be, nd->addr_str, sizeof nd->addr_str);
	}
	rc = plan_pins(tb, spec, base, err, errlen);
	if (rc < 0)
		goto fail;

	rc = netns_prepare_dir();
	if (rc < 0) {
		snprintf(err, errlen, "prepare %s: %s", NETNS_RUN_DIR, strerror(-rc));
		goto fail;
	}
	if (spec->raise_neigh || tb->n > TESTBED_NEIGH_AUTO_NODES) {
		rc = raise_neigh(tb, tb->n, err, errlen);
		if (rc < 0)
			goto fail;
	}
	rc = allow_cc(tb, cc, err, errlen);
	if (rc < 0)
		goto fail;
	orig = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (orig < 0) {
		rc = -errno;
		snprintf(err, errlen, "open own netns: %s", strerror(errno));
		goto fail;
	}

	/* The switch: a namespace holding the bridge. */
	if (j && (rc = journal_netns(j, tb->sw_netns)) < 0) {
		snprintf(err, errlen, "journal: %s", strerror(-rc));
		goto fail;
	}
	rc = enter_new_ns(tb->sw_netns, "the switch", err, errlen);
	if (rc == 0) {
		tb->sw_created = true;
		rc = setup_ns_sysctls(cc, NULL, spec->keep_ipv6, false);
		if (rc < 0)
			snprintf(err, errlen, "switch sysctls: %s", strerror(-rc));
	}
	if (rc == 0 && (swnl = nl_open()) < 0) {
		rc = swnl;
		snprintf(err, errlen, "netlink socket: %s", strerror(-rc));
	}
	if (rc == 0 && (swudp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) {
		rc = -errno;
		snprintf(err, errlen, "socket: %s", strerror(errno));
	}
	if (setns(orig, CLONE_NEWNET) < 0 && rc == 0) {
		rc = -errno;
		snprintf(err, errlen, "setns back: %s", strerror(errno));
	}
	if (rc < 0)
		goto fail;
	batch_reset(&sb, 1);
	rc = msg_bridge(&sb, TESTBED_BRIDGE_IFNAME, tb->mtu);
	if (rc == 0)
		rc = batch_run(swnl, &sb, &bad);
	if (rc < 0 || (rc = bridx = ifindex_of(swudp, TESTBED_BRIDGE_IFNAME)) < 0) {
		snprintf(err, errlen, "create bridge: %s", strerror(-rc));
		goto fail;
	}
	rc = 0;
	tb->timing.netns_ns += clock_now_ns() - t0;

	/* Nodes, in balanced chunks of at most CHUNK (each >= 2 nodes when n >= 2, so every
	 * ring in the reachability check crosses the bridge). */
	nchunks = (tb->n + CHUNK - 1) / CHUNK;
	csize = (tb->n + nchunks - 1) / nchunks;
	for (int a = 0; a < tb->n; a += csize) {
		if (cut_short(tb)) {
			rc = -ECANCELED;
			snprintf(err, errlen, "interrupted");
			goto fail;
		}
		int b = a + csize < tb->n ? a + csize : tb->n;

		/* 1. namespaces: recorded (one fsync for the chunk), then made. */
		t = clock_now_ns();
		if (j) {
			journal_batch_begin(j);
			for (int i = a; i < b && rc == 0; i++)
				rc = journal_netns(j, tb->nodes[i].netns);
			if (rc == 0)
				rc = journal_batch_commit(j);
			else
				journal_batch_commit(j);
			if (rc < 0) {
				snprintf(err, errlen, "journal: %s", strerror(-rc));
				goto fail;
			}
		}
		for (int i = a; i < b; i++) {
			int k = i - a;

			rc = enter_new_ns(tb->nodes[i].netns, tb->nodes[i].name, err, errlen);
			if (rc == 0) {
				tb->nodes[i].created = true;
				rc = setup_ns_sysctls(cc, spec->tcp, spec->keep_ipv6, true);
				if (rc < 0)
					snprintf(err, errlen, "%s: sysctls (cc %s%s): %s",
						 tb->nodes[i].name, cc, spec->tcp ? ", network.tcp" : "",
						 strerror(-rc));
			}
			if (rc == 0 && (nsfd[k] = open("/proc/thread-self/ns/net",
						       O_RDONLY | O_CLOEXEC)) < 0)
				rc = -errno;
			if (rc == 0 && (nlfd[k] = nl_open()) < 0)
				rc = nlfd[k];
			if (rc == 0 && (udpfd[k] = udp_open()) < 0)
				rc = udpfd[k];
			if (rc < 0 && strcmp(err, "no error") == 0)
				snprintf(err, errlen, "%s: sockets: %s", tb->nodes[i].name,
					 strerror(-rc));
			if (setns(orig, CLONE_NEWNET) < 0) {
				rc = -errno;
				snprintf(err, errlen, "setns back: %s", strerror(errno));
			}
			if (rc < 0)
				goto fail;
		}
		tb->timing.netns_ns += clock_now_ns() - t;

		/* 2. veth pairs, one batch from the switch. */
		t = clock_now_ns();
		batch_reset(&sb, 1000 + (uint32_t)a);
		for (int i = a; i < b && rc == 0; i++)
			rc = msg_veth(&sb, tb->nodes[i].sw_ifname, bridx, nsfd[i - a], tb->mtu,
				      tb->nodes[i].addr_be);
		if (rc == 0)
			rc = batch_run(swnl, &sb, &bad);
		if (rc < 0) {
			snprintf(err, errlen, "veth for %s: %s", bad >= 0 ? tb->nodes[a + bad].name : "?",
				 strerror(-rc));
			goto fail;
		}
		tb->timing.links_ns += clock_now_ns() - t;

		/* 3. loopback up + address + pinned neighbours, pipelined over the nodes' own
		 * sockets. */
		t = clock_now_ns();
		for (int i = a; i < b; i++) {
			int k = i - a, idx = ifindex_of(udpfd[k], TESTBED_NODE_IFNAME);

			batch_reset(nb, 1);
			rc = idx < 0 ? idx : msg_link_up(nb, 1);
			if (rc == 0)
				rc = msg_link_up(nb, idx);
			if (rc == 0)
				rc = msg_addr(nb, idx, tb->nodes[i].addr_be, plen);
			for (int q = 0; q < tb->n_pin && rc == 0; q++)
				if (tb->pin[q] != tb->nodes[i].addr_be)
					rc = msg_neigh(nb, idx, tb->pin[q]);
			if (rc == 0)
				rc = batch_send(nlfd[k], nb);
			if (rc < 0) {
				snprintf(err, errlen, "%s: address: %s", tb->nodes[i].name, strerror(-rc));
				goto fail;
			}
		}
		for (int i = a; i < b; i++) {
			ifidx[i - a] = ifindex_of(udpfd[i - a], TESTBED_NODE_IFNAME);
			nb->count = 3 + pins_of(tb, i);
			nb->seq0 = 1;
			rc = batch_acks(nlfd[i - a], nb, &bad);
			if (rc < 0) {
				snprintf(err, errlen, "%s: %s: %s", tb->nodes[i].name,
					 bad == 0 ? "lo up" : bad == 1 ? "eth0 up" :
					 bad == 2 ? "address" : "pinned neighbour",
					 strerror(-rc));
				goto fail;
			}
		}
		rc = wait_links_up(tb, swnl, bridx, b, nlfd, ifidx, b - a, 5000);
		if (rc < 0) {
			if (rc == -ECANCELED)
				snprintf(err, errlen, "interrupted");
			else
				snprintf(err, errlen, "links did not come up: %s", strerror(-rc));
			goto fail;
		}
		for (int i = a; i < b && spec->tcp && spec->tcp->initial_cwnd; i++) {
			rc = set_initcwnd(&tb->nodes[i], plen, spec->tcp->initial_cwnd);
			if (rc < 0) {
				snprintf(err, errlen, "%s: initcwnd %u on its route: %s", tb->nodes[i].name,
					 spec->tcp->initial_cwnd, strerror(-rc));
				goto fail;
			}
		}
		tb->timing.addrs_ns += clock_now_ns() - t;

		/* 4. real traffic over the bridge. */
		t = clock_now_ns();
		if (!spec->skip_reach_check) {
			rc = reach_ring(tb, a, b, udpfd, 5000, err, errlen);
			if (rc < 0)
				goto fail;
		}
		tb->timing.reach_ns += clock_now_ns() - t;
		for (int k = 0; k < b - a; k++) {
			close(nsfd[k]);
			close(nlfd[k]);
			close(udpfd[k]);
			nsfd[k] = nlfd[k] = udpfd[k] = -1;
		}
	}
	tb->timing.total_ns = clock_now_ns() - t0;
	log_debug("testbed %s: %d nodes in %.3f s", tb->prefix, tb->n, tb->timing.total_ns / 1e9);
	goto out;
fail:
	if (rc != -ECANCELED) /* the caller's stop at once: no error of the testbed */
		log_error("testbed: %s", err);
	if (orig >= 0 && setns(orig, CLONE_NEWNET) < 0)
		log_error("testbed: cannot return to the original namespace: %s", strerror(errno));
	testbed_destroy(&tb);
out:
	for (int k = 0; k < CHUNK; k++) {
		if (nsfd[k] >= 0)
			close(nsfd[k]);
		if (nlfd[k] >= 0)
			close(nlfd[k]);
		if (udpfd[k] >= 0)
			close(udpfd[k]);
	}
	if (orig >= 0)
		close(orig);
	if (swnl >= 0)
		close(swnl);
	if (swudp >= 0)
		close(swudp);
	free(sb.buf);
	if (nb)
		free(nb->buf);
	free(nb);
	return tb;
}

int testbed_destroy(struct testbed **ptb)
{
	struct testbed *tb;
	int first = 0, rc;

	if (!ptb || !*ptb)
		return 0;
	tb = *ptb;
	for (int i = 0; tb->nodes && i < tb->n; i++) {
		if (!tb->nodes[i].created)
			continue;
		rc = netns_delete(tb->nodes[i].netns);
		if (rc < 0 && first == 0) {
			log_error("testbed: delete %s: %s", tb->nodes[i].netns, strerror(-rc));
			first = rc;
		}
	}
	if (tb->sw_created && (rc = netns_delete(tb->sw_netns)) < 0 && first == 0)
		first = rc;
	for (int k = tb->n_sysctl - 1; k >= 0; k--) {
		rc = hostshare_claim_release(tb->j, tb->j ? journal_path(tb->j) : NULL, &tb->sysctl[k]);
		if (rc < 0 && first == 0)
			first = rc;
	}
	free(tb->nodes);
	free(tb->pin);
	free(tb);
	*ptb = NULL;
	return first;
}

int testbed_check_reach(struct testbed *tb, int timeout_ms, char *err, size_t errlen)
{
	int nchunks = (tb->n + CHUNK - 1) / CHUNK, csize = (tb->n + nchunks - 1) / nchunks;
	int fds[CHUNK], rc = 0;

	for (int a = 0; a < tb->n && rc == 0; a += csize) {
		int b = a + csize < tb->n ? a + csize : tb->n, got = 0;

		for (int i = a; i < b && rc == 0; i++) {
			int saved = -1;

			rc = netns_enter(tb->nodes[i].netns, &saved);
			if (rc == 0) {
				fds[got] = udp_open();
				if (fds[got] < 0)
					rc = fds[got];
				else
					got++;
			}
			if (netns_restore(&saved) < 0 && rc == 0)
				rc = -EIO;
			if (rc < 0)
				snprintf(err, errlen, "%s: %s", tb->nodes[i].netns, strerror(-rc));
		}
		if (rc == 0)
			rc = reach_ring(tb, a, b, fds, timeout_ms, err, errlen);
		while (got > 0)
			close(fds[--got]);
	}
	return rc;
}

int testbed_n_nodes(const struct testbed *tb)
{
	return tb->n;
}

const char *testbed_node_netns(const struct testbed *tb, int i)
{
	return i >= 0 && i < tb->n ? tb->nodes[i].netns : NULL;
}

uint32_t testbed_node_addr(const struct testbed *tb, int i)
{
	return i >= 0 && i < tb->n ? tb->nodes[i].addr_be : 0;
}

const char *testbed_node_addr_str(const struct testbed *tb, int i)
{
	return i >= 0 && i < tb->n ? tb->nodes[i].addr_str : NULL;
}

const char *testbed_node_ifname(const struct testbed *tb, int i)
{
	return i >= 0 && i < tb->n ? TESTBED_NODE_IFNAME : NULL;
}

const char *testbed_node_switch_ifname(const struct testbed *tb, int i)
{
	return i >= 0 && i < tb->n ? tb->nodes[i].sw_ifname : NULL;
}

const char *testbed_switch_netns(const struct testbed *tb)
{
	return tb->sw_netns;
}

int testbed_node_index(const struct testbed *tb, const char *name)
{
	for (int i = 0; i < tb->n; i++)
		if (!strcmp(tb->nodes[i].name, name))
			return i;
	return -ENOENT;
}

const struct testbed_timing *testbed_timing(const struct testbed *tb)
{
	return &tb->timing;
}
