/* `stalenet run --hosts` and `stalenet cleanup --hosts` against three hosts on this machine
 * (tests/support/hostsim), run from the control namespace as a user would: every host reached
 * and checked (hostname, clock) before anything is built, the run's testbed then built across
 * them and torn down (nothing left on any host); a bad host list gives one clear error
 * per bad host (wrong key, unreachable, missing program) or one FILE:LINE:COL error (duplicate
 * names) without any ssh. Root; skips elsewhere (fails under STALENET_TESTS_MUST_RUN=1). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/netns.h"
#include "tests/support/files.h"
#include "tests/support/fixture.h"
#include "tests/support/hostsim.h"
#include "tests/support/proc.h"

static struct hostsim hs;
static char stalenet[PATH_MAX + 16], scen[400], hosts_file[400], out_file[400], run_dir[400];

static void setup(void)
{
	char exe[PATH_MAX], why[512];
	support_require_netns("hsprobe-cli");
	if (access("/usr/sbin/sshd", X_OK))
		support_skip_or_fail("no /usr/sbin/sshd (apt-get install openssh-server)");
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	cr_assert_gt(n, 0);
	exe[n] = 0;
	for (int i = 0; i < 3; i++)
		*strrchr(exe, '/') = 0;
	snprintf(stalenet, sizeof stalenet, "%s/stalenet", exe);
	cr_assert_eq(access(stalenet, X_OK), 0, "%s: build it first", stalenet);
	if (hostsim_start(&hs, "l", 3, NULL, why, sizeof why))
		support_skip_or_fail("hosts: %s", why);
	snprintf(scen, sizeof scen, "%s/s.yaml", hs.dir);
	snprintf(hosts_file, sizeof hosts_file, "%s/hosts.yaml", hs.dir);
	snprintf(out_file, sizeof out_file, "%s/out.txt", hs.dir);
	snprintf(run_dir, sizeof run_dir, "%s/runs", hs.dir);
	/* reno: always allowed, and the test hosts (network namespaces) cannot change the
	 * host-wide list of allowed congestion controls */
	support_write_file(scen, "name: mh\nstop: {time: 5s}\nworkers: 4\nnetwork: {cc: reno}\n");
}

static void teardown(void)
{
	hostsim_stop(&hs);
}

TestSuite(multihost_cli, .init = setup, .fini = teardown, .timeout = 180);

static void write_hosts(const char *h1_address, const char *h2_name)
{
	char text[1024];
	snprintf(text, sizeof text,
		 "list:\n"
		 "  - {name: h0, address: %s, cores: 2}\n"
		 "  - {name: h1, address: %s, cores: 2}\n"
		 "  - {name: %s, address: %s, cores: 2}\n",
		 hs.host[0].address, h1_address, h2_name, hs.host[2].address);
	support_write_file(hosts_file, text);
}

/* Run stalenet with args in the control namespace; stdout+stderr into out_file. Exit code. */
static int run_cli(const char *const *args)
{
	const char *argv[24];
	size_t a = 0;
	argv[a++] = stalenet;
	for (size_t i = 0; args[i]; i++)
		argv[a++] = args[i];
	argv[a] = NULL;
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int fd = open(out_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || netns_join(hs.ctl_ns) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(120);
		execv(stalenet, (char *const *)argv);
		_exit(121);
	}
	int st = 0;
	cr_assert_eq(support_wait_pid(pid, &st, 120000), 0, "stalenet did not finish");
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *output(void)
{
	size_t len;
	char *t = support_read_file(out_file, &len);
	cr_assert(t);
	return t;
}

static int count(const char *text, const char *needle)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void system_ls(const char *dir)
{
	char cmd[2400];
	snprintf(cmd, sizeof cmd, "ls -lR %s >&2; cat %s/meta.json %s/summary.csv >&2; head -3 %s/nodes/*.csv >&2", dir, dir, dir, dir);
	if (system(cmd) < 0)
		cr_log_warn("ls failed");
}

Test(multihost_cli, run_checks_every_host_then_stops)
{
	write_hosts(hs.host[1].address, "h2");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	int rc = run_cli(args);
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect_eq(rc, 0, "the run across hosts completes: %s", t);
	for (int i = 0; i < 3; i++) {
		char want[128];
		snprintf(want, sizeof want, "host h%d (root@198.18.250.%d): ok, hostname h%d, clock offset", i, i + 1, i);
		cr_expect(strstr(t, want), "missing '%s' in %s", want, t);
	}
	cr_expect(strstr(t, "host h0: built server0 worker0 (node MTU 1450 over eth0 MTU 1500)"), "%s", t);
	cr_expect(strstr(t, "host h1: built worker1 worker2 (node MTU 1450"), "%s", t);
	cr_expect(strstr(t, "host h2: built worker3 (node MTU 1450"), "%s", t);
	cr_expect(strstr(t, "underlay h0 -> h1: base one-way delay ") && strstr(t, "underlay h0 -> h2: base one-way delay "),
		  "%s", t);
	cr_expect(strstr(t, "5 nodes ready on 3 hosts: started"), "%s", t);
	system_ls(run_dir);
	for (size_t i = 0; i < 3; i++) {
		char dir[128];
		snprintf(dir, sizeof dir, "/proc/%d/root/run/netns", (int)hs.host[i].sshd_pid);
		DIR *d = opendir(dir);
		struct dirent *e;
		int left = 0;
		while (d && (e = readdir(d)))
			left += !strncmp(e->d_name, "sn", 2);
		if (d)
			closedir(d);
		cr_expect_eq(left, 0, "host h%zu: %d namespaces left", i, left);
	}
	free(t);

	const char *cl[] = { "cleanup", "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			     hs.known_hosts, NULL };
	rc = run_cli(cl);
	t = output();
	cr_expect_eq(rc, 0, "%s", t);
	cr_expect_eq(count(t, ": cleanup journals 0 replayed 0 "), 3, "%s", t);
	free(t);
}

Test(multihost_cli, bad_hosts_one_error_each)
{
	/* h1 unreachable; and with the wrong key every host refuses */
	write_hosts("198.18.250.99", "h2");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.wrong_identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	int rc = run_cli(args);
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect_eq(rc, 3, "%s", t);
	cr_expect_eq(count(t, "Permission denied"), 2, "h0 and h2 refuse the key: %s", t);
	cr_expect(strstr(t, "stalenet: host h1 (root@198.18.250.99): "), "%s", t);
	cr_expect_eq(count(t, "stalenet: host "), 3, "one line per bad host: %s", t);
	cr_expect(!strstr(t, "ready"), "%s", t);
	free(t);

	/* a missing program on the hosts */
	write_hosts(hs.host[1].address, "h2");
	const char *miss[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--agent-path", "/nonexistent/stalenet", "--quiet", NULL };
	rc = run_cli(miss);
	t = output();
	cr_expect_eq(rc, 3, "%s", t);
	cr_expect_eq(count(t, "/nonexistent/stalenet not found there"), 3, "%s", t);
	free(t);

	/* duplicate names: a FILE:LINE:COL error, exit 2, no ssh at all */
	write_hosts(hs.host[1].address, "h1");
	rc = run_cli(args);
	t = output();
	char want[512];
	snprintf(want, sizeof want, "%s:4:5: error: duplicate host name 'h1' (first at line 3)", hosts_file);
	cr_expect_eq(rc, 2, "%s", t);
	cr_expect(strstr(t, want), "want %s in %s", want, t);
	cr_expect(!strstr(t, "Permission denied"), "nothing was contacted: %s", t);
	free(t);
}
