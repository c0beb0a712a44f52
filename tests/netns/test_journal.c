/* Namespace tests for the real undo steps (orchestrator/cleanup) of every journal record
 * kind, each run twice to show idempotence, in a throwaway namespace (root). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/link/bridge.h>

#include "lib/log.h"
#include "lib/netns.h"
#include "lib/sysctl.h"
#include "orchestrator/cleanup.h"
#include "orchestrator/journal.h"
#include "orchestrator/launch.h"
#include "tests/support/fixture.h"
#include "tests/support/proc.h"

static char ns[32];

static void setup(void)
{
	log_init("test_journal", LOG_WARN);
	snprintf(ns, sizeof ns, "sntj%d-ns", (int)getpid());
	support_require_root();
	if (netns_add(ns) < 0)
		support_skip_or_fail("cannot create network namespace %s", ns);
}

static void teardown(void)
{
	netns_delete(ns);
}

TestSuite(journal_undo, .init = setup, .fini = teardown, .timeout = 60);

/* Build a record from fields (fields are copied into a static-lifetime array per call). */
static struct journal_record rec(enum journal_kind kind, int n, const char *const *f)
{
	static char store[16][128];
	static char *ptrs[16];
	struct journal_record r = { .kind = kind, .nfields = n, .fields = ptrs };

	for (int i = 0; i < n; i++) {
		snprintf(store[i], sizeof store[i], "%s", f[i]);
		ptrs[i] = store[i];
	}
	return r;
}

static void undo_twice(struct journal_record r)
{
	cr_assert_eq(cleanup_undo(&r), 0, "first undo of %s", journal_kind_name(r.kind));
	cr_assert_eq(cleanup_undo(&r), 0, "second undo of %s", journal_kind_name(r.kind));
}

static void read_in_ns(const char *key, char *buf, size_t len)
{
	int saved;

	cr_assert_eq(netns_enter(ns, &saved), 0);
	cr_assert_eq(sysctl_read(key, buf, len), 0);
	cr_assert_eq(netns_restore(&saved), 0);
}

static void write_in_ns(const char *key, const char *v)
{
	int saved;

	cr_assert_eq(netns_enter(ns, &saved), 0);
	cr_assert_eq(sysctl_write(key, v), 0);
	cr_assert_eq(netns_restore(&saved), 0);
}

Test(journal_undo, sysctl_restored_unless_changed_since)
{
	const char *f[] = { ns, "net.ipv4.ip_forward", "0", "1" };
	char v[16];

	write_in_ns("net.ipv4.ip_forward", "1");
	undo_twice(rec(JOURNAL_SYSCTL, 4, f));
	read_in_ns("net.ipv4.ip_forward", v, sizeof v);
	cr_assert_str_eq(v, "0");
	/* Somebody else set another value after us: left alone. */
	write_in_ns("net.ipv4.ip_default_ttl", "33");
	{
		const char *g[] = { ns, "net.ipv4.ip_default_ttl", "64", "50" };

		undo_twice(rec(JOURNAL_SYSCTL, 4, g));
	}
	read_in_ns("net.ipv4.ip_default_ttl", v, sizeof v);
	cr_assert_str_eq(v, "33");
	/* A vanished namespace: nothing to restore. */
	{
		const char *h[] = { "sntj-no-such-ns", "net.ipv4.ip_forward", "0" };

		undo_twice(rec(JOURNAL_SYSCTL, 3, h));
	}
}

Test(journal_undo, link_deleted)
{
	const char *f[] = { ns, "sntjv0" };
	struct nl_sock *sk;
	int saved, idx;


	cr_assert_eq(netns_enter(ns, &saved), 0);
	sk = nl_socket_alloc();
	cr_assert_eq(nl_connect(sk, NETLINK_ROUTE), 0);
	cr_assert_eq(rtnl_link_bridge_add(sk, "sntjv0"), 0);
	idx = (int)if_nametoindex("sntjv0");
	cr_assert_gt(idx, 0);
	cr_assert_eq(netns_restore(&saved), 0);
	undo_twice(rec(JOURNAL_LINK, 2, f));
	cr_assert_eq(netns_enter(ns, &saved), 0);
	cr_assert_eq(if_nametoindex("sntjv0"), 0, "link still there");
	cr_assert_eq(netns_restore(&saved), 0);
	nl_socket_free(sk);
}

static int iptables_in_ns(const char *op)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		int saved, devnull = open("/dev/null", O_WRONLY);

		dup2(devnull, 1);
		dup2(devnull, 2);
		if (netns_enter(ns, &saved) < 0)
			_exit(100);
		execlp("iptables", "iptables", "-w", "5", "-t", "mangle", op, "PREROUTING", "-i",
		       "eth0", "-m", "comment", "--comment", "stalenet test rule", "-j", "ACCEPT",
		       (char *)NULL);
		_exit(127);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

Test(journal_undo, iptables_rule_deleted_in_its_namespace)
{
	const char *f[] = { ns, "mangle", "PREROUTING", "-i", "eth0", "-m", "comment", "--comment",
			    "stalenet test rule", "-j", "ACCEPT" };

	if (iptables_in_ns("-A") == 127)
		support_skip_or_fail("no iptables binary");
	cr_assert_eq(iptables_in_ns("-C"), 0);
	undo_twice(rec(JOURNAL_IPTABLES, 11, f));
	cr_assert_eq(iptables_in_ns("-C"), 1, "rule still present");
}

Test(journal_undo, proc_killed_only_with_matching_start_time)
{
	pid_t pid = fork();
	uint64_t st = 0;
	char p[16], s[24], wrong[24];
	int status;

	if (pid == 0) {
		execlp("sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	st = support_wait_start_time(pid, 5000);
	cr_assert_gt(st, 0, "no start time for pid %d", (int)pid);
	snprintf(p, sizeof p, "%d", (int)pid);
	snprintf(s, sizeof s, "%llu", (unsigned long long)st);
	snprintf(wrong, sizeof wrong, "%llu", (unsigned long long)st + 1);
	{
		const char *f[] = { p, wrong, "sleep" };

		undo_twice(rec(JOURNAL_PROC, 3, f));
		cr_assert(cleanup_proc_alive(pid, st), "a pid with another start time was killed");
	}
	{
		const char *f[] = { p, s, "sleep" };

		/* Our own child turns zombie, which counts as gone. */
		undo_twice(rec(JOURNAL_PROC, 3, f));
	}
	cr_assert_eq(support_wait_pid(pid, &status, 10000), 0, "the process outlived its undo");
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
}

Test(journal_undo, mount_and_netns_removed)
{
	char dir[] = "/tmp/stalenet-tjm-XXXXXX";
	const char *f[] = { dir };
	const char *g[] = { ns };

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(mount("tmpfs", dir, "tmpfs", 0, "size=64k"), 0);
	undo_twice(rec(JOURNAL_MOUNT, 1, f));
	cr_assert_eq(umount2(dir, 0), -1, "still mounted");
	rmdir(dir);
	cr_assert(netns_exists(ns));
	undo_twice(rec(JOURNAL_NETNS, 1, g));
	cr_assert_not(netns_exists(ns));
}
