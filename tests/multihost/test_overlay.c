/* A testbed across three hosts (tests/support/hostsim): each host's `stalenet agent`, reached
 * over ssh, builds its share (namespaces, bridge, veths with the MTU lowered by the VXLAN
 * overhead) and joins it to the others by one VXLAN segment over the underlay. Checked from
 * inside the nodes: the node MTU, a TCP transfer of 1500-byte writes across hosts (full-size
 * frames: a black hole would stall it) with no drops on the VXLAN devices, the round trip across
 * hosts against one inside a host, and that teardown (asked for, or the ssh connection ending) leaves
 * nothing on any host. Root; skips elsewhere (fails under STALENET_TESTS_MUST_RUN=1). */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/netns.h"
#include "orchestrator/agent.h"
#include "orchestrator/agentlink.h"
#include "orchestrator/overlay.h"
#include "tests/support/fixture.h"
#include "tests/support/hostsim.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"

static struct hostsim hs;
static char stalenet[PATH_MAX + 16];
static struct agentlink *links[3];
static char prefix[16];

static void setup(void)
{
	char why[512];
	support_require_netns("hsprobe-ovl");
	support_require_sshd();
	cr_assert(support_stalenet_path(stalenet, sizeof stalenet), "%s: build it first", stalenet);
	if (hostsim_start(&hs, "o", 3, NULL, why, sizeof why))
		support_skip_or_fail("hosts: %s", why);
	snprintf(prefix, sizeof prefix, "sm%04x-", (unsigned)getpid() & 0xffff);
}

static void teardown(void)
{
	int saved = -1;
	netns_enter(hs.ctl_ns, &saved);
	for (int i = 0; i < 3; i++)
		agentlink_close(&links[i], 10000);
	netns_restore(&saved);
	hostsim_stop(&hs);
}

TestSuite(multihost_overlay, .init = setup, .fini = teardown, .timeout = 180);

/* The pid of host i's agent (the process named stalenet in its namespace), or -1. */
static pid_t agent_pid(size_t i)
{
	pid_t pids[64];
	size_t n = hostsim_host_pids(&hs, i, pids, 64);
	for (size_t k = 0; k < n; k++) {
		char path[64], comm[32] = "";
		snprintf(path, sizeof path, "/proc/%d/comm", (int)pids[k]);
		FILE *f = fopen(path, "re");
		if (f) {
			if (!fgets(comm, sizeof comm, f))
				comm[0] = 0;
			fclose(f);
		}
		if (!strcmp(comm, "stalenet\n"))
			return pids[k];
	}
	return -1;
}

/* Move this thread into namespace name of host i (seen through its agent's mount namespace). */
static int enter(size_t i, const char *name)
{
	char path[256];
	snprintf(path, sizeof path, "/proc/%d/root/run/netns/%s%s", (int)agent_pid(i), prefix, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = setns(fd, CLONE_NEWNET) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

static bool ns_exists(pid_t agent, const char *name)
{
	char path[256];
	snprintf(path, sizeof path, "/proc/%d/root/run/netns/%s%s", (int)agent, prefix, name);
	return access(path, F_OK) == 0;
}

static void build_all(void)
{
	static const char *names[3] = { "server0:0,worker0:1", "worker1:2,worker2:3", "worker3:4" };
	int saved = -1;
	cr_assert_eq(netns_enter(hs.ctl_ns, &saved), 0);
	for (size_t i = 0; i < 3; i++) {
		char dest[64], err[512], req[256], reply[256], remotes[64] = "";
		snprintf(dest, sizeof dest, "root@%s", hs.host[i].address);
		struct agentlink_opts o = { .host_name = hs.host[i].name, .ssh_dest = dest, .identity = hs.identity,
					    .known_hosts = hs.known_hosts, .agent_path = stalenet, .timeout_ms = 10000 };
		links[i] = agentlink_open(&o, err, sizeof err);
		cr_assert(links[i], "%s", err);
		for (size_t k = 0; k < 3; k++)
			if (k != i)
				snprintf(remotes + strlen(remotes), sizeof remotes - strlen(remotes), "%s%s",
					 remotes[0] ? "," : "", hs.host[k].address);
		snprintf(req, sizeof req, "build %s %u %s %s %s reno 0 5", prefix, 4000 + (unsigned)getpid() % 1000,
			 hs.host[i].address, names[i], remotes);
		int64_t t0 = clock_now_ns();
		cr_assert_eq(agentlink_request(links[i], req, reply, sizeof reply, 60000), 0);
		fprintf(stderr, "host %s: build in %.0f ms: %s\n", hs.host[i].name, (clock_now_ns() - t0) / 1e6, reply);
		cr_assert(!strncmp(reply, "ok ", 3), "host %s: %s", hs.host[i].name, reply);
		char sw[64], ifn[32];
		int mtu = 0, umtu = 0;
		cr_assert_eq(sscanf(reply, "ok %63s %d %31s %d", sw, &mtu, ifn, &umtu), 4, "%s", reply);
		cr_expect_eq(umtu, 1500);
		cr_expect_eq(mtu, 1450, "node MTU = underlay 1500 - 50 of VXLAN over IPv4");
	}
	cr_assert_eq(netns_restore(&saved), 0);
}

/* In a child inside host h's node `name`: a TCP sink on port 5001 reporting the bytes it got,
 * and a UDP echo on port 5002. Returns the pid; *report reads the byte count. */
static pid_t start_sink(size_t h, const char *name, const char *addr, int *report)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	int ready[2];
	cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (enter(h, name))
			_exit(10);
		struct sockaddr_in sa = { .sin_family = AF_INET };
		inet_pton(AF_INET, addr, &sa.sin_addr);
		int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), us = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		int one = 1;
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		sa.sin_port = htons(5001);
		if (bind(ls, (void *)&sa, sizeof sa) || listen(ls, 4))
			_exit(11);
		sa.sin_port = htons(5002);
		if (bind(us, (void *)&sa, sizeof sa))
			_exit(12);
		(void)!write(ready[1], "r", 1);
		long long got = 0;
		int cs = -1;
		for (;;) {
			struct pollfd pf[2] = { { .fd = cs >= 0 ? cs : ls, .events = POLLIN }, { .fd = us, .events = POLLIN } };
			if (poll(pf, 2, 60000) <= 0)
				_exit(13);
			if (pf[1].revents & POLLIN) {
				char b[2048];
				struct sockaddr_in from;
				socklen_t fl = sizeof from;
				ssize_t r = recvfrom(us, b, sizeof b, 0, (void *)&from, &fl);
				if (r > 0)
					sendto(us, b, (size_t)r, 0, (void *)&from, fl);
			}
			if (!(pf[0].revents & (POLLIN | POLLHUP)))
				continue;
			if (cs < 0) {
				cs = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
				continue;
			}
			char b[65536];
			ssize_t r = read(cs, b, sizeof b);
			if (r <= 0)
				break;
			got += r;
		}
		(void)!write(p[1], &got, sizeof got);
		_exit(0);
	}
	close(p[1]);
	close(ready[1]);
	char c;
	cr_assert_eq(read(ready[0], &c, 1), 1, "sink in %s did not start", name);
	close(ready[0]);
	*report = p[0];
	return pid;
}

/* UDP round trips of 64-byte datagrams to addr:5002 from the current namespace; min and median
 * in microseconds. */
static void rtt(const char *addr, double *min_us, double *med_us)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(5002) };
	inet_pton(AF_INET, addr, &sa.sin_addr);
	cr_assert_eq(connect(s, (void *)&sa, sizeof sa), 0);
	double v[200];
	int n = 0;
	for (int i = 0; i < 200; i++) {
		char b[64] = { (char)i };
		int64_t t0 = clock_now_ns();
		cr_assert_eq(send(s, b, sizeof b, 0), 64);
		struct pollfd pf = { .fd = s, .events = POLLIN };
		if (poll(&pf, 1, 2000) != 1)
			continue;
		if (recv(s, b, sizeof b, 0) == 64)
			v[n++] = (clock_now_ns() - t0) / 1e3;
	}
	close(s);
	cr_assert_geq(n, 190, "%d of 200 echoes came back", n);
	for (int i = 1; i < n; i++)
		for (int k = i; k > 0 && v[k - 1] > v[k]; k--) {
			double t = v[k];
			v[k] = v[k - 1];
			v[k - 1] = t;
		}
	*min_us = v[0];
	*med_us = v[n / 2];
}

static int if_mtu(const char *ifname)
{
	struct ifreq ifr = { 0 };
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc = ioctl(fd, SIOCGIFMTU, &ifr) < 0 ? -errno : ifr.ifr_mtu;
	close(fd);
	return rc;
}

/* rx/tx drops of the VXLAN device in host h's switch namespace (from /proc/self/net/dev, which
 * shows the namespace of the reading thread); tx packets into *tx. */
static long long vx_drops(size_t h, long long *tx)
{
	int orig = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	cr_assert_eq(enter(h, "sw"), 0);
	FILE *f = fopen("/proc/self/net/dev", "re");
	char line[512], want[32];
	long long drops = -1;
	snprintf(want, sizeof want, "%svx:", prefix);
	while (f && fgets(line, sizeof line, f)) {
		char *p = strstr(line, want);
		if (!p)
			continue;
		long long v[16];
		if (sscanf(p + strlen(want), "%lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1],
			   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11]) == 12) {
			drops = v[3] + v[11];   /* rx drop, tx drop */
			*tx = v[9];
		}
	}
	if (f)
		fclose(f);
	cr_assert_eq(setns(orig, CLONE_NEWNET), 0);
	close(orig);
	return drops;
}

/* 8 MiB in 1500-byte writes to the sink at addr (port 5001) from the current namespace; the
 * sink's count read from report. Returns the seconds it took. */
static double transfer(const char *addr, int report, long long *sent, long long *got, int *mss)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(5001) };
	inet_pton(AF_INET, addr, &sa.sin_addr);
	cr_assert_eq(connect(s, (void *)&sa, sizeof sa), 0, "connect to %s: %s", addr, strerror(errno));
	char buf[1500];
	memset(buf, 0x5a, sizeof buf);
	*sent = 0;
	int64_t t0 = clock_now_ns();
	while (*sent < 8ll << 20) {
		ssize_t w = write(s, buf, sizeof buf);
		cr_assert_gt(w, 0, "write: %s", strerror(errno));
		*sent += w;
	}
	socklen_t ml = sizeof *mss;
	getsockopt(s, IPPROTO_TCP, 2 /* TCP_MAXSEG */, mss, &ml);
	shutdown(s, SHUT_WR);
	cr_assert_eq(read(report, got, sizeof *got), (ssize_t)sizeof *got, "the sink reported");
	double secs = (clock_now_ns() - t0) / 1e9;
	close(s);
	return secs;
}

Test(multihost_overlay, full_size_frames_cross_hosts)
{
	build_all();
	int orig = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int report, report_local;
	/* worker3 (198.18.0.5) is on h2, worker0 (198.18.0.2) on h0 with server0 (198.18.0.1) */
	pid_t sink = start_sink(2, "worker3", "198.18.0.5", &report);
	pid_t sink_local = start_sink(0, "worker0", "198.18.0.2", &report_local);
	cr_assert_eq(enter(0, "server0"), 0);
	cr_expect_eq(if_mtu("eth0"), 1450);
	/* every node of the run is a permanent neighbour, those on other hosts included */
	{
		char line[256] = "";
		FILE *ip = popen("ip -4 neigh show 198.18.0.5 dev eth0", "re");
		cr_assert_not_null(ip);
		if (!fgets(line, sizeof line, ip))
			line[0] = 0;
		pclose(ip);
		cr_expect(strstr(line, "lladdr 02:53:c6:12:00:05 PERMANENT"), "worker3 on h2: '%s'", line);
	}

	double xmin, xmed, lmin, lmed;
	rtt("198.18.0.5", &xmin, &xmed);
	rtt("198.18.0.2", &lmin, &lmed);
	char load[64] = "";
	FILE *lf = fopen("/proc/loadavg", "re");
	if (lf) {
		if (!fgets(load, sizeof load, lf))
			load[0] = 0;
		fclose(lf);
	}
	fprintf(stderr, "UDP round trip (64 B): across hosts (VXLAN) min %.1f us median %.1f us; "
		"inside a host (veth+bridge) min %.1f us median %.1f us; loadavg %s", xmin, xmed, lmin, lmed, load);

	/* 8 MiB in 1500-byte writes: every segment is a full-size frame of the 1450-byte MTU */
	long long sent = 0, got = 0;
	int mss = 0;
	double secs = transfer("198.18.0.5", report, &sent, &got, &mss);
	fprintf(stderr, "TCP across hosts: %lld bytes in %.2f s (%.0f Mbit/s), MSS %d\n", got, secs,
		got * 8 / secs / 1e6, mss);
	cr_expect_eq(got, sent);
	/* 1450 - 40 of IPv4 and TCP headers, less 12 when timestamps are on */
	cr_expect(mss == 1410 || mss == 1398, "MSS %d from the 1450-byte MTU", mss);
	/* the same transfer between two nodes of one host (veth, bridge, veth), for comparison */
	long long lsent = 0, lgot = 0;
	int lmss = 0;
	double lsecs = transfer("198.18.0.2", report_local, &lsent, &lgot, &lmss);
	fprintf(stderr, "TCP inside a host: %lld bytes in %.2f s (%.0f Mbit/s), MSS %d\n", lgot, lsecs,
		lgot * 8 / lsecs / 1e6, lmss);
	cr_expect_eq(lgot, lsent);
	cr_assert_eq(setns(orig, CLONE_NEWNET), 0);
	close(orig);
	close(report);
	support_wait_pid(sink, NULL, 10000);
	support_wait_pid(sink_local, NULL, 10000);
	close(report_local);
	for (size_t h = 0; h < 3; h += 2) {
		long long tx = 0, drops = vx_drops(h, &tx);
		cr_expect_eq(drops, 0, "host %zu: VXLAN drops %lld", h, drops);
		cr_expect_gt(tx, 1000, "host %zu: the transfer went through its VXLAN device (%lld packets)", h, tx);
	}
}

Test(multihost_overlay, underlay_probe_and_compensation)
{
	build_all();
	int saved = -1;
	char reply[256], err[256];
	cr_assert_eq(netns_enter(hs.ctl_ns, &saved), 0);
	cr_assert_eq(agentlink_request(links[0], "probe 198.18.250.3 200", reply, sizeof reply, 30000), 0);
	char addr[32];
	int got = 0;
	long long min_ns = 0, med_ns = 0;
	cr_assert_eq(sscanf(reply, "probe %31s %d %lld %lld", addr, &got, &min_ns, &med_ns), 4, "%s", reply);
	fprintf(stderr, "underlay h0 -> h2: %d of 200 round trips, min %lld ns, median %lld ns: base one-way delay "
		"%lld ns\n", got, min_ns, med_ns, min_ns / 2);
	cr_expect_geq(got, 190);
	cr_expect(min_ns > 0 && min_ns <= med_ns && min_ns < 10000000, "%s", reply);
	uint64_t shaped;
	uint64_t owd_us = (uint64_t)(min_ns / 2 + 999) / 1000;
	cr_expect_eq(overlay_compensate_delay(20000, owd_us, &shaped, err, sizeof err), 0);
	cr_expect_eq(shaped, 20000 - owd_us);
	cr_expect_eq(overlay_compensate_delay(owd_us - 1, owd_us, &shaped, err, sizeof err), -ERANGE,
		     "a link faster than the underlay is refused");
	/* a host that is not one of h0's remotes is not probed (h0 knows only h1 and h2) */
	cr_assert_eq(agentlink_request(links[0], "probe 198.18.250.254 3", reply, sizeof reply, 30000), 0);
	cr_expect(!strncmp(reply, "fail probe: no answer", 21), "%s", reply);
	cr_assert_eq(netns_restore(&saved), 0);
}

Test(multihost_overlay, node_mtu_kept_or_refused)
{
	int saved = -1;
	char dest[64], err[512], req[256], reply[256];
	cr_assert_eq(netns_enter(hs.ctl_ns, &saved), 0);
	snprintf(dest, sizeof dest, "root@%s", hs.host[0].address);
	struct agentlink_opts o = { .host_name = "h0", .ssh_dest = dest, .identity = hs.identity,
				    .known_hosts = hs.known_hosts, .agent_path = stalenet, .timeout_ms = 10000 };
	links[0] = agentlink_open(&o, err, sizeof err);
	cr_assert(links[0], "%s", err);
	/* 1500-byte node frames do not fit a 1500-byte underlay once encapsulated */
	snprintf(req, sizeof req, "build %s 9 %s server0:0 %s reno 1500", prefix, hs.host[0].address, hs.host[1].address);
	cr_assert_eq(agentlink_request(links[0], req, reply, sizeof reply, 60000), 0);
	cr_expect_str_eq(reply, "fail build: node MTU 1500 needs an underlay MTU of 1550, eth0 has 1500");
	snprintf(req, sizeof req, "build %s 9 %s server0:0 %s reno 1400", prefix, hs.host[0].address, hs.host[1].address);
	cr_assert_eq(agentlink_request(links[0], req, reply, sizeof reply, 60000), 0);
	cr_expect(!strncmp(reply, "ok ", 3) && strstr(reply, " 1400 eth0 1500"), "%s", reply);
	cr_assert_eq(netns_restore(&saved), 0);
	int orig = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	cr_assert_eq(enter(0, "server0"), 0);
	cr_expect_eq(if_mtu("eth0"), 1400, "the scenario's MTU is kept when it fits");
	cr_assert_eq(setns(orig, CLONE_NEWNET), 0);
	close(orig);
}

Test(multihost_overlay, teardown_leaves_nothing)
{
	build_all();
	pid_t agents[3];
	for (size_t i = 0; i < 3; i++) {
		agents[i] = agent_pid(i);
		cr_assert_gt(agents[i], 0);
		cr_expect(ns_exists(agents[i], "sw"), "host %zu has its switch", i);
	}
	cr_expect(ns_exists(agents[0], "server0") && ns_exists(agents[1], "worker2") &&
		  ns_exists(agents[2], "worker3"));
	cr_expect(!ns_exists(agents[0], "worker3"), "worker3 is not on h0");
	int saved = -1;
	char reply[256];
	cr_assert_eq(netns_enter(hs.ctl_ns, &saved), 0);
	cr_assert_eq(agentlink_request(links[0], "teardown", reply, sizeof reply, 30000), 0);
	cr_expect_str_eq(reply, "ok");
	cr_expect(!ns_exists(agents[0], "server0") && !ns_exists(agents[0], "sw"), "h0 torn down on request");
	/* the connection ending (the orchestrator gone) tears the share down too: h1 and h2 are
	 * checked through their agents' namespaces before the agents exit, so look at the journal */
	for (size_t i = 1; i < 3; i++) {
		char path[256];
		snprintf(path, sizeof path, "/proc/%d/root/run/stalenet/agent-%s/journal", (int)agents[i], prefix);
		cr_expect_eq(access(path, F_OK), 0, "host %zu journals locally", i);
		agentlink_close(&links[i], 30000);
	}
	cr_assert_eq(netns_restore(&saved), 0);
}

Test(multihost_overlay, kill9_leftovers_cleaned_on_every_host)
{
	build_all();
	pid_t sshd[3];
	for (size_t i = 0; i < 3; i++) {
		pid_t a = agent_pid(i);
		cr_assert_gt(a, 0);
		sshd[i] = hs.host[i].sshd_pid;
		cr_assert_eq(kill(a, SIGKILL), 0);
	}
	int saved = -1;
	cr_assert_eq(netns_enter(hs.ctl_ns, &saved), 0);
	for (size_t i = 0; i < 3; i++)
		agentlink_close(&links[i], 10000);
	/* the agents died without teardown: their shares are still there */
	for (size_t i = 0; i < 3; i++)
		cr_expect(ns_exists(sshd[i], "sw"), "host %zu keeps its switch after kill -9", i);
	for (size_t i = 0; i < 3; i++) {
		char dest[64], err[512], reply[256];
		snprintf(dest, sizeof dest, "root@%s", hs.host[i].address);
		struct agentlink_opts o = { .host_name = hs.host[i].name, .ssh_dest = dest, .identity = hs.identity,
					    .known_hosts = hs.known_hosts, .agent_path = stalenet, .timeout_ms = 10000 };
		links[i] = agentlink_open(&o, err, sizeof err);
		cr_assert(links[i], "%s", err);
		cr_assert_eq(agentlink_request(links[i], "cleanup", reply, sizeof reply, 60000), 0);
		fprintf(stderr, "host %s: %s\n", hs.host[i].name, reply);
		cr_expect(!strncmp(reply, "ok journals 1 replayed 1 ", 25), "host %zu: %s", i, reply);
		cr_expect(!ns_exists(sshd[i], "sw"), "host %zu: switch removed by cleanup", i);
	}
	cr_expect(!ns_exists(sshd[0], "server0") && !ns_exists(sshd[2], "worker3"));
	cr_assert_eq(netns_restore(&saved), 0);
}

struct gone_arg {
	pid_t sshd[3];
};

static bool all_gone(void *p)
{
	const struct gone_arg *g = p;
	for (int i = 0; i < 3; i++)
		if (ns_exists(g->sshd[i], "sw") || ns_exists(g->sshd[i], "server0") || ns_exists(g->sshd[i], "worker3"))
			return false;
	return true;
}

Test(multihost_overlay, orchestrator_death_tears_down_every_host)
{
	/* an orchestrator (a child here) builds on every host, then dies by SIGKILL: its ssh
	 * clients die with it, every agent reads the end of its connection and tears its share down */
	int ready[2];
	cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
	pid_t orch = fork();
	cr_assert_geq(orch, 0);
	if (orch == 0) {
		static const char *names[3] = { "server0:0,worker0:1", "worker1:2,worker2:3", "worker3:4" };
		struct agentlink *l[3];
		close(ready[0]);
		if (netns_join(hs.ctl_ns) < 0)
			_exit(10);
		for (size_t i = 0; i < 3; i++) {
			char dest[64], err[512], req[256], reply[256], remotes[64] = "";
			snprintf(dest, sizeof dest, "root@%s", hs.host[i].address);
			struct agentlink_opts o = { .host_name = hs.host[i].name, .ssh_dest = dest,
						    .identity = hs.identity, .known_hosts = hs.known_hosts,
						    .agent_path = stalenet, .timeout_ms = 10000 };
			if (!(l[i] = agentlink_open(&o, err, sizeof err)))
				_exit(11);
			for (size_t k = 0; k < 3; k++)
				if (k != i)
					snprintf(remotes + strlen(remotes), sizeof remotes - strlen(remotes), "%s%s",
						 remotes[0] ? "," : "", hs.host[k].address);
			snprintf(req, sizeof req, "build %s %u %s %s %s reno 0", prefix, 5000 + (unsigned)getpid() % 1000,
				 hs.host[i].address, names[i], remotes);
			if (agentlink_request(l[i], req, reply, sizeof reply, 60000) || strncmp(reply, "ok ", 3))
				_exit(12);
		}
		(void)!write(ready[1], "b", 1);
		for (;;)
			pause();
	}
	close(ready[1]);
	struct pollfd p = { .fd = ready[0], .events = POLLIN };
	char c = 0;
	cr_assert_eq(poll(&p, 1, 90000), 1, "the orchestrator did not build in time");
	cr_assert_eq(read(ready[0], &c, 1), 1, "the orchestrator failed to build");
	close(ready[0]);
	struct gone_arg g;
	for (int i = 0; i < 3; i++) {
		g.sshd[i] = hs.host[i].sshd_pid;
		cr_assert(ns_exists(g.sshd[i], "sw"), "host %d built", i);
	}
	cr_assert_eq(kill(orch, SIGKILL), 0);
	cr_assert_eq(support_wait_pid(orch, NULL, 10000), 0);
	cr_expect(support_wait_until(all_gone, &g, 30000), "every host tore its share down after the orchestrator died");
}

/* Setup and teardown against the number of hosts (4 nodes each, every build and teardown sent
 * to all agents at once), with a round trip from the first host's first node to the last
 * host's last node as proof the segment spans them all. Figures printed, only correctness
 * asserted. */
static struct agentlink *scale_links[HOSTSIM_MAX];

static void scale_fini(void)
{
	int saved = -1;
	if (hs.n)
		netns_enter(hs.ctl_ns, &saved);
	for (size_t i = 0; i < HOSTSIM_MAX; i++)
		agentlink_close(&scale_links[i], 10000);
	netns_restore(&saved);
	hostsim_stop(&hs);
}

TestSuite(multihost_scale, .fini = scale_fini);

Test(multihost_scale, build_and_teardown_vs_hosts, .timeout = 900)
{
	/* STALENET_SCALE_HOSTS="1,2,3,4" (the benchmark's list) replaces the default 2, 4, 8 */
	size_t counts[HOSTSIM_MAX] = { 2, 4, 8 }, n_counts = 3;
	const char *env = getenv("STALENET_SCALE_HOSTS");
	if (env && *env) {
		n_counts = 0;
		for (char *e = (char *)env; *e && n_counts < HOSTSIM_MAX;) {
			long v = strtol(e, &e, 10);
			cr_assert(v >= 1 && v <= HOSTSIM_MAX, "STALENET_SCALE_HOSTS: %s", env);
			counts[n_counts++] = (size_t)v;
			if (*e == ',')
				e++;
			else
				break;
		}
	}
	char why[512];
	support_require_netns("hsprobe-scale");
	support_require_sshd();
	support_stalenet_path(stalenet, sizeof stalenet);
	snprintf(prefix, sizeof prefix, "sk%04x-", (unsigned)getpid() & 0xffff);
	for (size_t c = 0; c < n_counts; c++) {
		size_t nh = counts[c];
		struct agentlink **l = scale_links;
		int64_t t0 = clock_now_ns();
		if (hostsim_start(&hs, "s", nh, NULL, why, sizeof why))
			support_skip_or_fail("hosts: %s", why);
		int64_t t_hosts = clock_now_ns();
		int saved = -1;
		cr_assert_eq(netns_enter(hs.ctl_ns, &saved), 0);
		for (size_t i = 0; i < nh; i++) {
			char dest[64], err[512];
			snprintf(dest, sizeof dest, "root@%s", hs.host[i].address);
			struct agentlink_opts o = { .host_name = hs.host[i].name, .ssh_dest = dest, .identity = hs.identity,
						    .known_hosts = hs.known_hosts, .agent_path = stalenet, .timeout_ms = 20000 };
			l[i] = agentlink_start(&o, err, sizeof err);      /* all handshakes at once */
			cr_assert(l[i], "%s", err);
		}
		for (size_t i = 0; i < nh; i++) {
			char err[512];
			cr_assert_eq(agentlink_ready(&l[i], err, sizeof err), 0, "%s", err);
		}
		int64_t t_links = clock_now_ns();
		for (size_t i = 0; i < nh; i++) {
			char req[AGENT_LINE_MAX], names[128] = "", remotes[160] = "";
			for (int k = 0; k < 4; k++)
				snprintf(names + strlen(names), sizeof names - strlen(names), "%sn%zu:%zu", k ? "," : "",
					 i * 4 + (size_t)k, i * 4 + (size_t)k);
			for (size_t k = 0; k < nh; k++)
				if (k != i)
					snprintf(remotes + strlen(remotes), sizeof remotes - strlen(remotes), "%s%s",
						 remotes[0] ? "," : "", hs.host[k].address);
			snprintf(req, sizeof req, "build %s 77 %s %s %s reno 0", prefix, hs.host[i].address, names,
				 remotes[0] ? remotes : "-");
			cr_assert_eq(agentlink_send(l[i], req), 0);
		}
		for (size_t i = 0; i < nh; i++) {
			char reply[256];
			cr_assert_eq(agentlink_recv(l[i], reply, sizeof reply, 120000), 0);
			cr_assert(!strncmp(reply, "ok ", 3), "host %zu: %s", i, reply);
		}
		int64_t t_built = clock_now_ns();
		cr_assert_eq(netns_restore(&saved), 0);

		char last[32], dst[40];
		snprintf(last, sizeof last, "n%zu", nh * 4 - 1);
		snprintf(dst, sizeof dst, "198.18.0.%zu", nh * 4);
		int report;
		pid_t sink = start_sink(nh - 1, last, dst, &report);
		int orig = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
		cr_assert_eq(enter(0, "n0"), 0);
		double mn, md;
		rtt(dst, &mn, &md);
		cr_assert_eq(setns(orig, CLONE_NEWNET), 0);
		close(orig);
		kill(sink, SIGKILL);
		support_wait_pid(sink, NULL, 10000);
		close(report);

		cr_assert_eq(netns_enter(hs.ctl_ns, &saved), 0);
		int64_t t_td0 = clock_now_ns();
		for (size_t i = 0; i < nh; i++)
			cr_assert_eq(agentlink_send(l[i], "teardown"), 0);
		for (size_t i = 0; i < nh; i++) {
			char reply[64];
			cr_assert_eq(agentlink_recv(l[i], reply, sizeof reply, 120000), 0);
			cr_expect_str_eq(reply, "ok");
		}
		int64_t t_td = clock_now_ns();
		for (size_t i = 0; i < nh; i++)
			agentlink_close(&l[i], 10000);
		cr_assert_eq(netns_restore(&saved), 0);
		hostsim_stop(&hs);
		char load[64] = "";
		FILE *lf = fopen("/proc/loadavg", "re");
		if (lf) {
			if (!fgets(load, sizeof load, lf))
				load[0] = 0;
			fclose(lf);
		}
		fprintf(stderr, "scale: %zu hosts x 4 nodes: test hosts %.0f ms, ssh+agents (all at once) %.0f ms, build (all at once) "
			"%.0f ms, round trip n0 -> %s min %.1f us, teardown %.0f ms, test hosts removed %.0f ms; loadavg %s",
			nh, (t_hosts - t0) / 1e6, (t_links - t_hosts) / 1e6, (t_built - t_links) / 1e6, last, mn,
			(t_td - t_td0) / 1e6, (clock_now_ns() - t_td) / 1e6, load);
	}
}
