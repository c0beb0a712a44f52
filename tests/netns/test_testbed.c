/* Namespace tests for orchestrator/testbed + journal + cleanup (root). Each test works under
 * its own random prefix and a private registry directory, and checks that what it made is
 * gone afterwards: our /run/netns names, host links, and the host sysctls testbed touches.
 * Skips cleanly without root or netns support; fails instead under STALENET_TESTS_MUST_RUN=1. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/netns.h"
#include "lib/sysctl.h"
#include "orchestrator/cleanup.h"
#include "orchestrator/journal.h"
#include "orchestrator/launch.h"
#include "orchestrator/testbed.h"
#include "tests/support/files.h"
#include "tests/support/fixture.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"

static char tmpdir[64];
static int lock_fd = -1;
static char registry[128];

static const char *const host_keys[] = {
	"net.ipv4.tcp_allowed_congestion_control", "net.ipv4.neigh.default.gc_thresh1",
	"net.ipv4.neigh.default.gc_thresh2", "net.ipv4.neigh.default.gc_thresh3",
};
#define N_KEYS (sizeof host_keys / sizeof host_keys[0])

static void setup(void)
{
	log_init("test_testbed", LOG_WARN);
	support_require_netns("sntst-probe");
	/* The host sysctls compared before/after are global: one test at a time touches them
	 * (Criterion runs tests in parallel workers). */
	lock_fd = support_host_lock();
	support_tmpdir(tmpdir, sizeof tmpdir, "ttb");
	snprintf(registry, sizeof registry, "%s/registry", tmpdir);
	journal_set_registry_dir(registry);
}

static void restore_host(void);

static void teardown(void)
{
	restore_host();
	journal_set_registry_dir(NULL);
	if (tmpdir[0])
		support_rm_rf(tmpdir);
	tmpdir[0] = '\0';
	support_host_unlock(&lock_fd);
}

TestSuite(testbed, .init = setup, .fini = teardown, .timeout = 120);

/* Names in dir starting with prefix, joined by ' ' into out. Returns the count. */
static int list_prefixed(const char *dir, const char *prefix, char *out, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	out[0] = '\0';
	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, prefix, strlen(prefix))) {
			strncat(out, e->d_name, len - strlen(out) - 2);
			strcat(out, " ");
			n++;
		}
	closedir(d);
	return n;
}

struct host_snapshot {
	char sysctl[N_KEYS][256];
	int n_links;
};

static void snapshot(struct host_snapshot *s)
{
	char buf[8192];

	for (size_t k = 0; k < N_KEYS; k++)
		cr_assert_eq(sysctl_read(host_keys[k], s->sysctl[k], sizeof s->sysctl[k]), 0);
	s->n_links = list_prefixed("/sys/class/net", "", buf, sizeof buf);
}

static void assert_nothing_left(const char *prefix, const struct host_snapshot *before)
{
	struct host_snapshot after;
	char names[8192];

	cr_assert_eq(list_prefixed(NETNS_RUN_DIR, prefix, names, sizeof names), 0,
		     "namespaces left: %s", names);
	cr_assert_eq(list_prefixed("/sys/class/net", prefix, names, sizeof names), 0,
		     "host links left: %s", names);
	snapshot(&after);
	for (size_t k = 0; k < N_KEYS; k++)
		cr_assert_str_eq(after.sysctl[k], before->sysctl[k], "%s not restored", host_keys[k]);
}

static struct journal *new_run(const char *prefix, char *rundir, size_t len)
{
	char err[256];
	struct journal *j;

	snprintf(rundir, len, "%s/%s", tmpdir, prefix);
	cr_assert_eq(mkdir(rundir, 0755), 0);
	j = journal_create(rundir, prefix, err, sizeof err);
	cr_assert_not_null(j, "%s", err);
	return j;
}

/* Send one UDP datagram from inside node a's namespace to node b's address and receive it
 * inside b's. */
static void udp_between(const struct testbed *tb, int a, int b)
{
	int saved = -1, rx = -1, tx = -1;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(47999) };
	struct sockaddr_in from;
	socklen_t fl = sizeof from;
	struct pollfd pfd;
	char msg[32] = "", got[32] = "";

	cr_assert_eq(netns_enter(testbed_node_netns(tb, b), &saved), 0);
	rx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	to.sin_addr.s_addr = testbed_node_addr(tb, b);
	cr_assert_eq(bind(rx, (struct sockaddr *)&to, sizeof to), 0, "bind %s: %s",
		     testbed_node_addr_str(tb, b), strerror(errno));
	cr_assert_eq(netns_restore(&saved), 0);
	cr_assert_eq(netns_enter(testbed_node_netns(tb, a), &saved), 0);
	tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(netns_restore(&saved), 0);
	snprintf(msg, sizeof msg, "hello %d->%d", a, b);
	pfd.fd = rx;
	pfd.events = POLLIN;
	for (int tries = 0; tries < 30; tries++) {
		sendto(tx, msg, strlen(msg), 0, (struct sockaddr *)&to, sizeof to);
		if (poll(&pfd, 1, 100) == 1)
			break;
	}
	cr_assert_gt(recvfrom(rx, got, sizeof got - 1, 0, (struct sockaddr *)&from, &fl), 0,
		     "no datagram %s -> %s", testbed_node_addr_str(tb, a), testbed_node_addr_str(tb, b));
	cr_assert_str_eq(got, msg);
	cr_assert_eq(from.sin_addr.s_addr, testbed_node_addr(tb, a), "source address");
	close(rx);
	close(tx);
}

static void create_and_teardown(int n)
{
	struct host_snapshot before;
	char prefix[16], rundir[256], err[256], cc[32];
	struct testbed_spec spec = { .n_nodes = n, .cc = "reno" };
	struct testbed *tb;
	struct journal *j;
	int saved = -1;

	snapshot(&before);
	cr_assert_eq(testbed_random_prefix(prefix, sizeof prefix), 0);
	j = new_run(prefix, rundir, sizeof rundir);
	spec.prefix = prefix;
	tb = testbed_create(&spec, j, err, sizeof err);
	cr_assert_not_null(tb, "%s", err);
	cr_assert_eq(testbed_n_nodes(tb), n);
	for (int i = 0; i < n; i++) {
		uint32_t want = htonl(0xc6120000u + (uint32_t)i + 1);

		cr_assert(netns_exists(testbed_node_netns(tb, i)));
		cr_assert_eq(testbed_node_addr(tb, i), want);
		cr_assert_str_eq(testbed_node_ifname(tb, i), "eth0");
		cr_assert_eq(strncmp(testbed_node_switch_ifname(tb, i), prefix, strlen(prefix)), 0);
	}
	/* The congestion control is set inside the nodes, not on the host. */
	cr_assert_eq(netns_enter(testbed_node_netns(tb, n - 1), &saved), 0);
	cr_assert_eq(sysctl_read("net.ipv4.tcp_congestion_control", cc, sizeof cc), 0);
	cr_assert_eq(netns_restore(&saved), 0);
	cr_assert_str_eq(cc, "reno");
	cr_assert(netns_exists(testbed_switch_netns(tb)));
	cr_assert_eq(testbed_check_reach(tb, 3000, err, sizeof err), 0, "%s", err);
	cr_assert_eq(testbed_destroy(&tb), 0);
	cr_assert_null(tb);
	cr_assert_eq(cleanup_journal(j), 0);
	journal_destroy(&j);
	assert_nothing_left(prefix, &before);
}

/* The first line of a command's output run inside netns (popen from a thread inside it: the
 * child is born there). */
static void ns_cmd(const char *netns, const char *cmd, char *out, size_t len)
{
	int saved = -1;
	FILE *p;

	cr_assert_eq(netns_enter(netns, &saved), 0);
	p = popen(cmd, "re");
	cr_assert_not_null(p);
	out[0] = '\0';
	if (!fgets(out, (int)len, p))
		out[0] = '\0';
	pclose(p);
	cr_assert_eq(netns_restore(&saved), 0);
	out[strcspn(out, "\n")] = '\0';
}

static void ns_sysctl(const char *netns, const char *key, char *out, size_t len)
{
	int saved = -1;

	cr_assert_eq(netns_enter(netns, &saved), 0);
	cr_assert_eq(sysctl_read(key, out, len), 0, "%s", key);
	cr_assert_eq(netns_restore(&saved), 0);
}

/* network.tcp and network.mtu read back inside every node; the host's own values untouched;
 * TCP still carries data between two nodes with them. */
Test(testbed, tcp_knobs_inside_each_node)
{
	static const char *const keys[] = { "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_ecn",
					    "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem" };
	struct testbed_tcp tcp = { .slow_start_after_idle = 0, .ecn = 1, .initial_cwnd = 23,
				   .rmem = { 4096, 131072, 6291456 }, .wmem = { 8192, 65536, 4194304 } };
	struct testbed_spec spec = { .n_nodes = 3, .cc = "reno", .mtu = 9000, .tcp = &tcp };
	char prefix[16], rundir[256], err[256], v[256], host_before[4][256], host_after[4][256];
	struct host_snapshot before;
	struct testbed *tb;
	struct journal *j;

	snapshot(&before);
	for (size_t k = 0; k < 4; k++)
		cr_assert_eq(sysctl_read(keys[k], host_before[k], sizeof host_before[k]), 0);
	cr_assert_eq(testbed_random_prefix(prefix, sizeof prefix), 0);
	j = new_run(prefix, rundir, sizeof rundir);
	spec.prefix = prefix;
	tb = testbed_create(&spec, j, err, sizeof err);
	cr_assert_not_null(tb, "%s", err);
	for (int i = 0; i < 3; i++) {
		const char *ns = testbed_node_netns(tb, i);

		ns_sysctl(ns, "net.ipv4.tcp_congestion_control", v, sizeof v);
		cr_assert_str_eq(v, "reno");
		ns_sysctl(ns, keys[0], v, sizeof v);
		cr_assert_str_eq(v, "0");
		ns_sysctl(ns, keys[1], v, sizeof v);
		cr_assert_str_eq(v, "1");
		ns_sysctl(ns, keys[2], v, sizeof v);
		cr_assert_str_eq(v, "4096 131072 6291456");
		ns_sysctl(ns, keys[3], v, sizeof v);
		cr_assert_str_eq(v, "8192 65536 4194304");
		ns_cmd(ns, "ip -o route show dev eth0", v, sizeof v);
		cr_assert(strstr(v, "198.18.0.0/15") && strstr(v, "initcwnd 23"), "route: %s", v);
		ns_cmd(ns, "ip -o link show eth0", v, sizeof v);
		cr_assert(strstr(v, "mtu 9000"), "link: %s", v);
	}
	for (size_t k = 0; k < 4; k++) {
		cr_assert_eq(sysctl_read(keys[k], host_after[k], sizeof host_after[k]), 0);
		cr_assert_str_eq(host_after[k], host_before[k], "the host's %s changed", keys[k]);
	}
	cr_assert_eq(testbed_check_reach(tb, 3000, err, sizeof err), 0, "%s", err);
	cr_assert_eq(testbed_destroy(&tb), 0);
	cr_assert_eq(cleanup_journal(j), 0);
	journal_destroy(&j);
	assert_nothing_left(prefix, &before);
}

Test(testbed, create_teardown_3_leaves_nothing)
{
	create_and_teardown(3);
}

Test(testbed, create_teardown_50_leaves_nothing)
{
	create_and_teardown(50);
}

Test(testbed, nodes_reach_each_other_over_udp)
{
	char prefix[16], rundir[256], err[256];
	const char *names[] = { "server", "worker0", "worker1", "worker2" };
	struct testbed_spec spec = { .n_nodes = 4, .node_names = names, .mtu = 1400,
				     .skip_reach_check = true };
	struct host_snapshot before;
	struct testbed *tb;
	struct journal *j;

	snapshot(&before);
	cr_assert_eq(testbed_random_prefix(prefix, sizeof prefix), 0);
	j = new_run(prefix, rundir, sizeof rundir);
	spec.prefix = prefix;
	tb = testbed_create(&spec, j, err, sizeof err);
	cr_assert_not_null(tb, "%s", err);
	cr_assert_eq(testbed_node_index(tb, "worker1"), 2);
	cr_assert_eq(testbed_node_index(tb, "nobody"), -ENOENT);
	for (int a = 0; a < 4; a++)
		for (int b = 0; b < 4; b++)
			if (a != b)
				udp_between(tb, a, b);
	testbed_destroy(&tb);
	cr_assert_eq(cleanup_journal(j), 0);
	journal_destroy(&j);
	assert_nothing_left(prefix, &before);
}

/* Every line a command prints inside netns, joined (at most len - 1 bytes). */
static void ns_lines(const char *netns, const char *cmd, char *out, size_t len)
{
	int saved = -1;
	size_t used = 0;
	FILE *p;

	cr_assert_eq(netns_enter(netns, &saved), 0);
	p = popen(cmd, "re");
	cr_assert_not_null(p);
	out[0] = '\0';
	while (used + 1 < len && fgets(out + used, (int)(len - used), p))
		used += strlen(out + used);
	pclose(p);
	cr_assert_eq(netns_restore(&saved), 0);
}

/* A packet socket receiving every ARP frame that reaches eth0 of the namespace. */
static int arp_watch(const char *netns)
{
	int saved = -1, fd;
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ARP) };

	cr_assert_eq(netns_enter(netns, &saved), 0);
	fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ARP));
	cr_assert_geq(fd, 0, "packet socket: %s", strerror(errno));
	sll.sll_ifindex = (int)if_nametoindex("eth0");
	cr_assert_gt(sll.sll_ifindex, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sll, sizeof sll), 0, "bind: %s", strerror(errno));
	cr_assert_eq(netns_restore(&saved), 0);
	return fd;
}

/* Every node's MAC follows from its address and every node holds a PERMANENT entry for every
 * other node: traffic between all pairs sends no ARP at all (a packet socket on a node sees
 * none, and does see the request for an address nobody pinned). */
Test(testbed, neighbours_are_pinned_and_no_arp_is_sent)
{
	const int n = 4;
	struct testbed_spec spec = { .n_nodes = n, .skip_reach_check = true };
	char prefix[16], rundir[256], err[256], v[4096], want[128];
	struct host_snapshot before;
	struct testbed *tb;
	struct journal *j;
	struct pollfd pfd;
	uint8_t frame[128];
	int fd, saved = -1, tx;

	snapshot(&before);
	cr_assert_eq(testbed_random_prefix(prefix, sizeof prefix), 0);
	j = new_run(prefix, rundir, sizeof rundir);
	spec.prefix = prefix;
	tb = testbed_create(&spec, j, err, sizeof err);
	cr_assert_not_null(tb, "%s", err);
	fd = arp_watch(testbed_node_netns(tb, n - 1));
	for (int a = 0; a < n; a++) {
		uint8_t mac[6];

		testbed_mac_of(testbed_node_addr(tb, a), mac);
		snprintf(want, sizeof want, "link/ether %02x:%02x:%02x:%02x:%02x:%02x ", mac[0], mac[1],
			 mac[2], mac[3], mac[4], mac[5]);
		ns_lines(testbed_node_netns(tb, a), "ip -o link show eth0", v, sizeof v);
		cr_assert(strstr(v, want), "node %d: want %s in: %s", a, want, v);
		ns_lines(testbed_node_netns(tb, a), "ip -4 neigh show dev eth0", v, sizeof v);
		for (int b = 0; b < n; b++) {
			char *line;

			testbed_mac_of(testbed_node_addr(tb, b), mac);
			snprintf(want, sizeof want, "%s lladdr %02x:%02x:%02x:%02x:%02x:%02x PERMANENT",
				 testbed_node_addr_str(tb, b), mac[0], mac[1], mac[2], mac[3], mac[4],
				 mac[5]);
			line = strstr(v, want);
			if (a == b)
				cr_assert_null(strstr(v, testbed_node_addr_str(tb, b)), "own: %s", v);
			else
				cr_assert_not_null(line, "node %d lacks %s in:\n%s", a, want, v);
		}
	}
	for (int a = 0; a < n; a++)
		for (int b = 0; b < n; b++)
			if (a != b)
				udp_between(tb, a, b);
	cr_assert_lt(recv(fd, frame, sizeof frame, MSG_DONTWAIT), 0, "an ARP frame was sent");
	cr_assert_eq(errno, EAGAIN);
	/* The watch works: an address no node has (inside our subnet) is resolved by ARP. */
	cr_assert_eq(netns_enter(testbed_node_netns(tb, 0), &saved), 0);
	tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(netns_restore(&saved), 0);
	{
		struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(47999),
					  .sin_addr.s_addr = htonl(0xc6120000u + 200) };

		sendto(tx, "x", 1, 0, (struct sockaddr *)&to, sizeof to);
	}
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	cr_assert_eq(poll(&pfd, 1, 3000), 1, "no ARP request seen for an unpinned address");
	close(tx);
	close(fd);
	/* after the traffic the entries are still the pinned ones */
	ns_lines(testbed_node_netns(tb, 0), "ip -4 neigh show dev eth0", v, sizeof v);
	cr_assert(strstr(v, testbed_node_addr_str(tb, 1)) && strstr(v, "PERMANENT"), "%s", v);
	testbed_destroy(&tb);
	cr_assert_eq(cleanup_journal(j), 0);
	journal_destroy(&j);
	assert_nothing_left(prefix, &before);
}

Test(testbed, two_testbeds_do_not_disturb_each_other)
{
	char pa[16], pb[16], ra[256], rb[256], err[256];
	struct testbed_spec spec = { .n_nodes = 5 };
	struct host_snapshot before;
	struct testbed *a, *b;
	struct journal *ja, *jb;

	snapshot(&before);
	cr_assert_eq(testbed_random_prefix(pa, sizeof pa), 0);
	ja = new_run(pa, ra, sizeof ra);
	do
		cr_assert_eq(testbed_random_prefix(pb, sizeof pb), 0);
	while (!strcmp(pa, pb));
	jb = new_run(pb, rb, sizeof rb);
	spec.prefix = pa;
	a = testbed_create(&spec, ja, err, sizeof err);
	cr_assert_not_null(a, "%s", err);
	spec.prefix = pb;
	b = testbed_create(&spec, jb, err, sizeof err);
	cr_assert_not_null(b, "%s", err);
	/* Same addresses, separate networks: both work. */
	cr_assert_eq(testbed_node_addr(a, 0), testbed_node_addr(b, 0));
	cr_assert_eq(testbed_check_reach(a, 3000, err, sizeof err), 0, "%s", err);
	cr_assert_eq(testbed_check_reach(b, 3000, err, sizeof err), 0, "%s", err);
	/* Tearing a down (through its journal) leaves b working and whole. */
	cr_assert_eq(cleanup_journal(ja), 0);
	testbed_destroy(&a);
	for (int i = 0; i < 5; i++)
		cr_assert(netns_exists(testbed_node_netns(b, i)));
	cr_assert_eq(testbed_check_reach(b, 3000, err, sizeof err), 0, "%s", err);
	udp_between(b, 0, 4);
	/* A cleanup scan while b's orchestrator (us) lives does not touch b. */
	{
		struct cleanup_report rep = { 0 };

		cr_assert_eq(cleanup_run(tmpdir, 0, &rep), 0);
		cr_assert_eq(rep.live, 1);
		cr_assert_eq(rep.replayed, 0);
		cr_assert(netns_exists(testbed_switch_netns(b)));
	}
	testbed_destroy(&b);
	cr_assert_eq(cleanup_journal(jb), 0);
	journal_destroy(&ja);
	journal_destroy(&jb);
	assert_nothing_left(pa, &before);
	assert_nothing_left(pb, &before);
}

/* A child builds a testbed (raising host sysctls too) and is SIGKILLed; cleanup finds the
 * dead run through the registry and removes everything, but not a namespace with the same
 * prefix that no journal lists. */
Test(testbed, crash_then_cleanup_leaves_nothing_but_foreign)
{
	char prefix[16], rundir[256], foreign[64], bin[512], sock[300];
	struct { pid_t pid; uint64_t st; } info = { 0 };
	struct host_snapshot before;
	struct cleanup_report rep = { 0 };
	struct journal_parsed *p = NULL;
	int pipefd[2], status;
	pid_t pid;

	snapshot(&before);
	cr_assert_eq(testbed_random_prefix(prefix, sizeof prefix), 0);
	snprintf(rundir, sizeof rundir, "%s/%s", tmpdir, prefix);
	cr_assert_eq(mkdir(rundir, 0755), 0);
	{
		/* stalenet-linkd lives in build/, three levels above this test. */
		ssize_t n = readlink("/proc/self/exe", bin, sizeof bin - 32);
		char *slash;

		cr_assert_gt(n, 0);
		bin[n] = '\0';
		for (int i = 0; i < 3 && (slash = strrchr(bin, '/')); i++)
			*slash = '\0';
		cleanup_set_program_dir(bin);
		strcat(bin, "/stalenet-linkd");
		snprintf(sock, sizeof sock, "%s/linkd.sock", rundir);
	}
	cr_assert_eq(pipe2(pipefd, O_CLOEXEC), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char err[256];
		struct testbed_spec spec = { .n_nodes = 6, .prefix = prefix, .raise_neigh = true,
					     .cc = "cubic" };
		struct journal *j = journal_create(rundir, prefix, err, sizeof err);
		struct testbed *tb = j ? testbed_create(&spec, j, err, sizeof err) : NULL;

		if (!tb)
			_exit(3);
		/* A process and an iptables rule in a node, recorded the way launch and the
		 * shaper do: before they exist. */
		{
			const char *rule[] = { "-i", "eth0", "-j", "NFQUEUE", "--queue-num", "9" };
			const char *ns = testbed_node_netns(tb, 1);
			int st, gate[2];
			pid_t ipt, sl;

			if (pipe2(gate, O_CLOEXEC) < 0)
				_exit(5);
			sl = fork();
			if (sl == 0) {
				char go;

				close(gate[1]);
				if (read(gate[0], &go, 1) != 1)
					_exit(1);
				/* A stalenet program of this run (cleanup kills no other). */
				execl(bin, bin, "--ctl", sock, (char *)NULL);
				_exit(127);
			}
			close(gate[0]);
			info.st = support_wait_start_time(sl, 5000);
			info.pid = sl;
			if (journal_proc(j, sl, info.st, "linkd") < 0 || write(gate[1], "g", 1) != 1)
				_exit(6);
			if (journal_iptables(j, ns, "mangle", "PREROUTING", 6, rule) < 0)
				_exit(7);
			ipt = fork();
			if (ipt == 0) {
				int saved;

				if (netns_enter(ns, &saved) < 0)
					_exit(1);
				execlp("iptables", "iptables", "-w", "5", "-t", "mangle", "-A", "PREROUTING",
				       "-i", "eth0", "-j", "NFQUEUE", "--queue-num", "9", (char *)NULL);
				_exit(127);
			}
			if (waitpid(ipt, &st, 0) != ipt || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
				_exit(8);
			if (write(pipefd[1], &info, sizeof info) != sizeof info)
				_exit(4);
		}
		pause();
		_exit(0);
	}
	close(pipefd[1]);
	cr_assert_eq(read(pipefd[0], &info, sizeof info), (ssize_t)sizeof info,
		     "child failed to build its testbed");
	cr_assert(cleanup_proc_alive(info.pid, info.st));
	close(pipefd[0]);
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	snprintf(foreign, sizeof foreign, "%sforeign", prefix);
	cr_assert_eq(netns_add(foreign), 0);
	{
		char sw[64];

		snprintf(sw, sizeof sw, "%ssw", prefix);
		cr_assert(netns_exists(sw), "the crashed run's switch should still exist");
	}
	/* Registry scan only (path "/nonexistent"): finds the run from any --out dir. */
	cr_assert_eq(cleanup_run("/nonexistent", 0, &rep), 0);
	cr_assert_eq(rep.replayed, 1);
	cr_assert_eq(rep.failed, 0);
	cr_assert_not(cleanup_proc_alive(info.pid, info.st), "the run's process must be gone");
	cr_assert(netns_exists(foreign), "a namespace no journal lists must stay");
	cr_assert_eq(netns_delete(foreign), 0);
	assert_nothing_left(prefix, &before);
	{
		char path[512], err[256];

		snprintf(path, sizeof path, "%s/journal", rundir);
		cr_assert_eq(journal_load(path, &p, err, sizeof err), 0, "%s", err);
		cr_assert(p->ended);
		journal_parsed_free(&p);
	}
	/* Idempotent: a second scan finds nothing to do. */
	memset(&rep, 0, sizeof rep);
	cr_assert_eq(cleanup_run(rundir, 0, &rep), 0);
	cr_assert_eq(rep.ended, 1);
	cr_assert_eq(rep.replayed, 0);
}

/* Host values a test lowered on purpose, put back by teardown even when an assert failed. */
static bool host_lowered;
static struct host_snapshot host_orig;

static void restore_host(void)
{
	if (!host_lowered)
		return;
	for (size_t k = 0; k < N_KEYS; k++)
		if (sysctl_write(host_keys[k], host_orig.sysctl[k]) < 0)
			cr_log_error("could not restore %s", host_keys[k]);
	host_lowered = false;
}

static bool listed(const char *name)
{
	char cur[256], *save, *tok;

	cr_assert_eq(sysctl_read(host_keys[0], cur, sizeof cur), 0);
	for (tok = strtok_r(cur, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
		if (!strcmp(tok, name))
			return true;
	return false;
}

static long thresh3(void)
{
	char cur[64];

	cr_assert_eq(sysctl_read(host_keys[3], cur, sizeof cur), 0);
	return strtol(cur, NULL, 10);
}

/* Overlapping runs share the host sysctls: A (cubic, 5 nodes) and B (bbr, 8 nodes) start,
 * A leaves while B lives, C (cubic) starts and is killed -9, B leaves, `stalenet cleanup`
 * replays C: the allowed list and the gc thresholds end exactly as they started. The host
 * values are lowered first so that every run has something to add, and put back after. */
Test(testbed, overlapping_runs_leave_host_sysctls_as_found)
{
	char pa[16], pb[16], pc[16], ra[256], rb[256], rc_[256], err[256];
	struct testbed_spec spec = { .raise_neigh = true, .skip_reach_check = true };
	struct host_snapshot orig, before, after;
	struct cleanup_report rep = { 0 };
	struct testbed *a, *b;
	struct journal *ja, *jb;
	int pipefd[2], status;
	pid_t pid;
	char ok;

	snapshot(&orig);
	host_orig = orig;
	host_lowered = true;
	cr_assert_eq(sysctl_write(host_keys[0], "reno"), 0);
	cr_assert_eq(sysctl_write(host_keys[1], "10"), 0);
	cr_assert_eq(sysctl_write(host_keys[2], "40"), 0);
	cr_assert_eq(sysctl_write(host_keys[3], "80"), 0);
	snapshot(&before);
	cr_assert_eq(testbed_random_prefix(pa, sizeof pa), 0);
	ja = new_run(pa, ra, sizeof ra);
	do
		cr_assert_eq(testbed_random_prefix(pb, sizeof pb), 0);
	while (!strcmp(pa, pb));
	jb = new_run(pb, rb, sizeof rb);
	spec.prefix = pa;
	spec.n_nodes = 5;
	spec.cc = "cubic";
	a = testbed_create(&spec, ja, err, sizeof err);
	cr_assert_not_null(a, "%s", err);
	spec.prefix = pb;
	spec.n_nodes = 8;
	spec.cc = "bbr";
	b = testbed_create(&spec, jb, err, sizeof err);
	cr_assert_not_null(b, "%s", err);
	cr_assert(listed("cubic") && listed("bbr") && listed("reno"));
	cr_assert_eq(thresh3(), 32 * 8);
	/* A leaves: its name goes, B's stays, the thresholds stay what B needs. */
	testbed_destroy(&a);
	cr_assert_eq(cleanup_journal(ja), 0);
	cr_assert_not(listed("cubic"));
	cr_assert(listed("bbr"));
	cr_assert_eq(thresh3(), 32 * 8);
	/* C starts while B lives and dies without a teardown. */
	do
		cr_assert_eq(testbed_random_prefix(pc, sizeof pc), 0);
	while (!strcmp(pc, pb) || !strcmp(pc, pa));
	snprintf(rc_, sizeof rc_, "%s/%s", tmpdir, pc);
	cr_assert_eq(mkdir(rc_, 0755), 0);
	cr_assert_eq(pipe2(pipefd, O_CLOEXEC), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct testbed_spec cs = { .n_nodes = 6, .prefix = pc, .raise_neigh = true,
					   .cc = "cubic", .skip_reach_check = true };
		struct journal *j = journal_create(rc_, pc, err, sizeof err);
		struct testbed *tb = j ? testbed_create(&cs, j, err, sizeof err) : NULL;

		if (!tb || write(pipefd[1], "k", 1) != 1)
			_exit(3);
		pause();
		_exit(0);
	}
	close(pipefd[1]);
	cr_assert_eq(read(pipefd[0], &ok, 1), 1, "the third run failed to build its testbed");
	close(pipefd[0]);
	cr_assert(listed("cubic"));
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	/* B leaves: C is dead, so nothing holds bbr or the raised thresholds any more. */
	testbed_destroy(&b);
	cr_assert_eq(cleanup_journal(jb), 0);
	cr_assert_not(listed("bbr"));
	journal_destroy(&ja);
	journal_destroy(&jb);
	/* The cleanup of the killed run takes out its name. */
	cr_assert_eq(cleanup_run("/nonexistent", 0, &rep), 0);
	cr_assert_eq(rep.replayed, 1);
	cr_assert_eq(rep.failed, 0);
	snapshot(&after);
	for (size_t k = 0; k < N_KEYS; k++)
		cr_assert_str_eq(after.sysctl[k], before.sysctl[k], "%s not restored", host_keys[k]);
	restore_host();
	assert_nothing_left(pc, &orig);
}

/* The interruption count of the tests below, raised by a timer's signal as a user's second
 * Ctrl-C would be by the orchestrator's handler. */
static volatile sig_atomic_t tb_interrupts;

static void on_alarm(int sig)
{
	(void)sig;
	tb_interrupts = 2;
}

/* A reachability check that cannot succeed (worker0's interface down) would wait its whole
 * 10 s; the caller's interruption count reaching the testbed's mark 300 ms into it ends it at
 * once (-ECANCELED, "interrupted"); the testbed is then torn down as usual. */
Test(testbed, interruption_ends_the_reachability_check_at_once)
{
	char prefix[16], rundir[256], err[256], cmd[256];
	const char *names[] = { "server", "worker0", "worker1" };
	struct testbed_spec spec = { .n_nodes = 3, .node_names = names, .skip_reach_check = true,
				     .interrupted = &tb_interrupts, .interrupt_at = 2 };
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval it = { .it_value = { .tv_usec = 300000 } };
	struct host_snapshot before;
	struct testbed *tb;
	struct journal *j;
	int64_t t0, took;
	int rc;

	snapshot(&before);
	tb_interrupts = 0;
	cr_assert_eq(testbed_random_prefix(prefix, sizeof prefix), 0);
	j = new_run(prefix, rundir, sizeof rundir);
	spec.prefix = prefix;
	tb = testbed_create(&spec, j, err, sizeof err);
	cr_assert_not_null(tb, "%s", err);
	snprintf(cmd, sizeof cmd, "ip -n %s link set %s down", testbed_node_netns(tb, 1), testbed_node_ifname(tb, 1));
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
	t0 = support_now_ms();
	cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
	rc = testbed_check_reach(tb, 10000, err, sizeof err);
	took = support_now_ms() - t0;
	signal(SIGALRM, SIG_DFL);
	fprintf(stderr, "reachability check, interrupted after 300 ms: %lld ms\n", (long long)took);
	cr_assert_eq(tb_interrupts, 2, "the interruption never came");
	cr_assert_eq(rc, -ECANCELED, "rc %d (%s)", rc, err);
	cr_assert_str_eq(err, "interrupted");
	cr_expect_lt(took, 2000, "the check took %lld ms", (long long)took);
	testbed_destroy(&tb);
	cr_assert_eq(cleanup_journal(j), 0);
	journal_destroy(&j);
	assert_nothing_left(prefix, &before);
}

/* Interrupted (the count at the mark) before the creation: nothing is built, NULL with
 * "interrupted", nothing left on the host. */
Test(testbed, creation_interrupted_builds_nothing)
{
	char prefix[16], rundir[256], err[256];
	struct testbed_spec spec = { .n_nodes = 3, .interrupted = &tb_interrupts, .interrupt_at = 2 };
	struct host_snapshot before;
	struct journal *j;

	snapshot(&before);
	tb_interrupts = 2;
	cr_assert_eq(testbed_random_prefix(prefix, sizeof prefix), 0);
	j = new_run(prefix, rundir, sizeof rundir);
	spec.prefix = prefix;
	cr_assert_null(testbed_create(&spec, j, err, sizeof err));
	cr_assert_str_eq(err, "interrupted");
	cr_assert_eq(cleanup_journal(j), 0);
	journal_destroy(&j);
	assert_nothing_left(prefix, &before);
}
