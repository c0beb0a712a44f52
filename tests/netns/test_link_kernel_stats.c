/* Netns test for netem/link_kernel's one-pass counters: link_kernel_stats_many (one qdisc dump for
 * a namespace) against link_kernel_stats (one dump per qdisc, the reference), on 200 veths
 * with a TBF each and a known number of packets sent through each. Timed both ways (stderr).
 * Runs in a forked child in a network namespace of its own (nothing of the host is touched);
 * needs root: skipped without it, failed instead under STALENET_TESTS_MUST_RUN=1. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/pkt_sched.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/netns.h"
#include "netem/link_kernel.h"
#include "tests/support/files.h"

#define NIF 200

static void need_root(void)
{
	const char *must = getenv("STALENET_TESTS_MUST_RUN");

	if (geteuid() == 0)
		return;
	if (must && !strcmp(must, "1"))
		cr_assert_fail("needs root for a network namespace (STALENET_TESTS_MUST_RUN=1)");
	cr_skip_test("needs root for a network namespace");
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	rc = write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -EIO;
	close(fd);
	return rc;
}

/* Packets sent through interface i. */
static int sent_on(int i)
{
	return i % 7;
}

/* In the child's own namespace. Exit status 0, or which step failed. */
static int child(const char *batch)
{
	static struct link_kernel_stats one[NIF + 2];
	static struct link_kernel_query q[NIF + 2];
	static char names[NIF + 2][16];
	const char *ip[] = { "ip", "-batch", batch, NULL };
	int64_t t0, t1, t2;
	int fd;

	if (unshare(CLONE_NEWNET) < 0)
		return 50;
	log_init("test", LOG_WARN);
	/* No IPv6 chatter (router solicitations, MLD) adds packets to the counts. */
	write_file("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
	write_file("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
	if (netns_exec(NULL, ip, true) != 0)
		return 51;
	for (int i = 0; i < NIF; i++) {
		snprintf(names[i], sizeof names[i], "s%d", i);
		if (link_kernel_tbf("", names[i], TC_H_ROOT, LINK_KERNEL_TBF_HANDLE, 10000000ull * (uint64_t)(i + 1), false) < 0)
			return 52;
	}
	/* A permanent neighbour entry: a datagram routed to s_i leaves through its TBF at once (no
	 * ARP packet is counted); its veth peer has no address and drops it. */
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 53;
	for (int i = 0; i < NIF; i++)
		for (int k = 0; k < sent_on(i); k++) {
			struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(9) };

			to.sin_addr.s_addr = htonl(0xC6130000u | (uint32_t)((i / 250) << 8) | (uint32_t)(i % 250 + 1));
			if (sendto(fd, "x", 1, 0, (struct sockaddr *)&to, sizeof to) != 1)
				return 54;
		}
	close(fd);
	/* A qdisc that is not there and an interface that is not there: -ENOENT both ways. */
	snprintf(names[NIF], sizeof names[NIF], "s0");
	snprintf(names[NIF + 1], sizeof names[NIF + 1], "nosuchif");
	for (int i = 0; i < NIF + 2; i++)
		q[i] = (struct link_kernel_query){ names[i], i == NIF ? LINK_KERNEL_NETEM_HANDLE : LINK_KERNEL_TBF_HANDLE };
	t0 = clock_now_ns();
	for (int i = 0; i < NIF; i++)
		if (link_kernel_stats("", names[i], LINK_KERNEL_TBF_HANDLE, &one[i]) < 0)
			return 55;
	t1 = clock_now_ns();
	if (link_kernel_stats_many("", q, NIF + 2) < 0)
		return 56;
	t2 = clock_now_ns();
	for (int i = 0; i < NIF; i++) {
		if (q[i].rc != 0 || memcmp(&q[i].stats, &one[i], sizeof one[i]) != 0)
			return 57;
		if (q[i].stats.packets != (uint64_t)sent_on(i))
			return 58;
	}
	if (q[NIF].rc != -ENOENT || q[NIF + 1].rc != -ENOENT)
		return 59;
	fprintf(stderr, "qdisc counters of %d interfaces: one dump each %.2f ms, one dump %.2f ms\n", NIF,
		(double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6);
	return 0;
}

Test(link_kernel, stats_many_equals_one_by_one, .timeout = 120)
{
	char batch[] = "/tmp/snt-lkstats-XXXXXX";
	FILE *f;
	pid_t pid;
	int fd, st;

	need_root();
	fd = support_mkstemp(batch);
	cr_assert_geq(fd, 0);
	f = fdopen(fd, "w");
	cr_assert_not_null(f);
	fprintf(f, "link set lo up\naddr add 198.18.1.1/32 dev lo\n");
	for (int i = 0; i < NIF; i++)
		fprintf(f,
			"link add s%d type veth peer name p%d\nlink set s%d up\nlink set p%d up\n"
			"route add 198.19.%d.%d/32 dev s%d\n"
			"neigh add 198.19.%d.%d lladdr 02:00:00:00:00:01 dev s%d nud permanent\n",
			i, i, i, i, i / 250, i % 250 + 1, i, i / 250, i % 250 + 1, i);
	cr_assert_eq(fclose(f), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(child(batch));
	while (waitpid(pid, &st, 0) < 0)
		cr_assert_eq(errno, EINTR);
	unlink(batch);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
}
