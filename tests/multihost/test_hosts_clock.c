/* Three hosts on this machine (tests/support/hostsim: own network, mount, UTS and time
 * namespaces, OpenSSH server each): the orchestrator's ssh path reaches `stalenet agent` on
 * every host, sees each host's own hostname, and recovers each host's injected CLOCK_MONOTONIC
 * offset within the reported error bound; bad hosts (wrong key, unreachable address) get one
 * clear error each. Root; skips elsewhere (fails under STALENET_TESTS_MUST_RUN=1). */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/clocksync.h"
#include "lib/netns.h"
#include "orchestrator/agentlink.h"
#include "tests/support/fixture.h"
#include "tests/support/hostsim.h"

static struct hostsim hs;
static char stalenet[PATH_MAX + 16];
static const int64_t offsets[3] = { 1000250000000ll, 7500000000ll, -2125000000ll };

static void setup(void)
{
	char why[512];
	support_require_netns("hsprobe-clock");
	support_require_sshd();
	cr_assert(support_stalenet_path(stalenet, sizeof stalenet), "%s: build it first", stalenet);
	int rc = hostsim_start(&hs, "c", 3, offsets, why, sizeof why);
	if (rc)
		support_skip_or_fail("hosts: %s", why);
}

static void teardown(void)
{
	hostsim_stop(&hs);
}

TestSuite(multihost_clock, .init = setup, .fini = teardown, .timeout = 120);

static struct agentlink_opts opts(size_t i, char *dest, size_t len)
{
	snprintf(dest, len, "root@%s", hs.host[i].address);
	return (struct agentlink_opts){ .host_name = hs.host[i].name, .ssh_dest = dest, .identity = hs.identity,
					.known_hosts = hs.known_hosts, .agent_path = stalenet, .timeout_ms = 10000 };
}

Test(multihost_clock, offsets_recovered_within_bound)
{
	int saved = -1;
	cr_assert_eq(netns_enter(hs.ctl_ns, &saved), 0);
	for (size_t i = 0; i < hs.n; i++) {
		char dest[64], err[512];
		struct agentlink_opts o = opts(i, dest, sizeof dest);
		struct agentlink *l = agentlink_open(&o, err, sizeof err);
		cr_assert(l, "%s", err);
		cr_expect_str_eq(agentlink_remote_hostname(l), hs.host[i].name, "each host has its own hostname");
		struct clocksync_estimate e;
		cr_assert_eq(agentlink_clock(l, 200, NULL, &e, 30000, err, sizeof err), 0, "%s", err);
		int64_t error = e.offset_ns - hs.host[i].mono_offset_ns;
		fprintf(stderr, "host %s: injected %+.9f s, estimated %+.9f s, error %+lld ns, bound %lld ns, "
			"min rtt %lld ns, drift %+.3f ppm, %zu of 200 exchanges kept\n", hs.host[i].name,
			hs.host[i].mono_offset_ns / 1e9, e.offset_ns / 1e9, (long long)error, (long long)e.bound_ns,
			(long long)e.min_delay_ns, e.drift_ppm, e.used);
		cr_expect_leq(llabs(error), e.bound_ns, "host %s: error %lld ns beyond the bound %lld ns",
			      hs.host[i].name, (long long)error, (long long)e.bound_ns);
		cr_expect_lt(e.bound_ns, 5000000, "a bound under 5 ms on one machine (got %lld ns)",
			     (long long)e.bound_ns);
		cr_expect_eq(agentlink_close(&l, 5000), 0);
	}
	cr_assert_eq(netns_restore(&saved), 0);
}

Test(multihost_clock, bad_hosts_one_error_each)
{
	int saved = -1;
	char dest[64], err[512];
	cr_assert_eq(netns_enter(hs.ctl_ns, &saved), 0);

	struct agentlink_opts o = opts(0, dest, sizeof dest);
	o.identity = hs.wrong_identity;
	cr_expect_null(agentlink_open(&o, err, sizeof err));
	cr_expect(strstr(err, "host h0 (root@198.18.250.1): ssh failed (exit 255)") && strstr(err, "Permission denied"),
		  "wrong key: %s", err);

	o = opts(1, dest, sizeof dest);
	snprintf(dest, sizeof dest, "root@198.18.250.99");      /* on the underlay, nobody there */
	o.timeout_ms = 3000;
	cr_expect_null(agentlink_open(&o, err, sizeof err));
	cr_expect(strstr(err, "host h1 (root@198.18.250.99): ") &&
		  (strstr(err, "No route to host") || strstr(err, "timed out") || strstr(err, "no answer")),
		  "unreachable: %s", err);

	o = opts(2, dest, sizeof dest);
	o.agent_path = "/nonexistent/stalenet";
	cr_expect_null(agentlink_open(&o, err, sizeof err));
	cr_expect(strstr(err, "host h2 (root@198.18.250.3): /nonexistent/stalenet not found there"), "missing: %s", err);
	cr_assert_eq(netns_restore(&saved), 0);
}

Test(multihost_clock, hosts_are_separate)
{
	/* each host's /run is its own: a file made in one is absent from another and from here */
	char p0[64], p1[64];
	snprintf(p0, sizeof p0, "/proc/%d/root/run/sshd", (int)hs.host[0].sshd_pid);
	cr_expect_eq(access(p0, F_OK), 0, "h0 has /run/sshd");
	cr_expect_neq(access("/run/sshd", F_OK), 0, "this host's /run has no /run/sshd of theirs");
	snprintf(p1, sizeof p1, "/proc/%d/ns/time", (int)hs.host[1].sshd_pid);
	char a[64] = "", b[64] = "";
	cr_assert_gt(readlink(p1, a, sizeof a - 1), 0);
	cr_assert_gt(readlink("/proc/self/ns/time", b, sizeof b - 1), 0);
	cr_expect_str_neq(a, b, "host h1 has its own time namespace");
}
