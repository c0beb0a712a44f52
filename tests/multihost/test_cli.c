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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectors/schema.h"
#include "lib/netns.h"
#include "netem/link_shaper.h"
#include "orchestrator/multihost.h"
#include "orchestrator/supervise.h"
#include "tests/support/files.h"
#include "tests/support/fixture.h"
#include "tests/support/hostsim.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"

static struct hostsim hs;
static char stalenet[PATH_MAX + 16], scen[400], hosts_file[400], out_file[400], run_dir[400];

static void setup(void)
{
	char why[512];
	support_require_netns("hsprobe-cli");
	support_require_sshd();
	cr_assert(support_stalenet_path(stalenet, sizeof stalenet), "%s: build it first", stalenet);
	/* each host's monotonic clock far from ours: a trace not mapped onto one clock shows it */
	static const int64_t offsets[3] = { 0, 1000250000000ll, -2125000000ll };
	if (hostsim_start(&hs, "l", 3, offsets, why, sizeof why))
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

/* Start stalenet with args in the control namespace; stdout+stderr into out_file; with group,
 * in a process group of its own (its pid), as a shell's job is: a signal to the group then
 * reaches it and whatever it started there, never this test. */
static pid_t start_cli_in(const char *const *args, bool group)
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
		if (fd < 0 || netns_join(hs.ctl_ns) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0 ||
		    (group && setpgid(0, 0) < 0))
			_exit(120);
		execv(stalenet, (char *const *)argv);
		_exit(121);
	}
	/* also here, so the group exists once this returns, whichever of the two runs first */
	if (group)
		cr_assert(setpgid(pid, pid) == 0 || errno == EACCES, "setpgid: %s", strerror(errno));
	return pid;
}

static pid_t start_cli(const char *const *args)
{
	return start_cli_in(args, false);
}

/* Run stalenet with args in the control namespace; stdout+stderr into out_file. Exit code. */
static int run_cli(const char *const *args)
{
	pid_t pid = start_cli(args);
	int st = 0;
	cr_assert_eq(support_wait_pid(pid, &st, 120000), 0, "stalenet did not finish");
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Namespaces of ours ("sn...") on host i. */
static int netns_left(size_t i)
{
	char dir[128];
	snprintf(dir, sizeof dir, "/proc/%d/root/run/netns", (int)hs.host[i].sshd_pid);
	DIR *d = opendir(dir);
	struct dirent *e;
	int left = 0;
	while (d && (e = readdir(d)))
		left += !strncmp(e->d_name, "sn", 2);
	if (d)
		closedir(d);
	return left;
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

/* The first line of dir/rel and the number of lines after it; NULL when missing. */
static char *head_of(const char *rel, int *rows)
{
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/%s", run_dir, rel);
	char *t = support_read_file(path, &len);
	if (!t)
		return NULL;
	*rows = -1;
	for (size_t i = 0; i < len; i++)
		*rows += t[i] == '\n';
	t[strcspn(t, "\n")] = 0;
	return t;
}

/* t_s of the first data row of dir/rel. */
static double first_t(const char *rel)
{
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/%s", run_dir, rel);
	char *t = support_read_file(path, &len);
	cr_assert(t, "%s", path);
	char *nl = strchr(t, '\n');
	double v = nl ? strtod(nl + 1, NULL) : -1;
	free(t);
	return v;
}

/* Over every update of worker w the server handled: the median of (the worker's t_s of that
 * step - the server's t_s of handling it). Worker and server stamp on different hosts' clocks
 * mapped onto one: the two rows of one step lie within a step's time of each other, so a
 * median beyond a fraction of a second means a wrong mapping (the hosts' clocks are 1000.25 s
 * and 2.125 s apart). Not a measure of the mapping error: the rows are not causally ordered. */
static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median_step_lag(int w)
{
	char rel[600], path[600];
	size_t len;
	snprintf(rel, sizeof rel, "%s/nodes/worker%d.csv", run_dir, w);
	char *wt = support_read_file(rel, &len);
	snprintf(path, sizeof path, "%s/nodes/server0.csv", run_dir);
	char *st = support_read_file(path, &len);
	cr_assert(wt && st);
	static double at[200000];
	long max_step = 0;
	for (char *l = strchr(wt, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
		double t = strtod(l + 1, NULL);
		char *c = strchr(l + 1, ',');
		c = c ? strchr(c + 1, ',') : NULL;
		long stp = c ? atol(c + 1) : 0;
		if (stp > 0 && stp < 200000) {
			at[stp] = t;
			max_step = stp > max_step ? stp : max_step;
		}
	}
	char who[24];   /* ",worker" + any int + "," */
	snprintf(who, sizeof who, ",worker%d,", w);
	static double lags[200000];
	size_t nl = 0;
	for (char *l = strchr(st, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
		char *c = strstr(l + 1, who), *eol = strchr(l + 1, '\n');
		if (!c || (eol && c > eol))
			continue;
		long stp = atol(c + strlen(who));
		if (stp > 0 && stp <= max_step && at[stp] > 0) {
			if (nl < 200000)
				lags[nl++] = at[stp] - strtod(l + 1, NULL);
		}
	}
	free(wt);
	free(st);
	cr_assert_gt(nl, 0, "worker%d: no matched steps", w);
	qsort(lags, nl, sizeof lags[0], cmp_d);
	return lags[nl / 2];
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
	/* the link self-check (on by default) puts its hub with the first node */
	cr_expect(strstr(t, "host h0: built server0 worker0 hub (node MTU 1450 over eth0 MTU 1500)"), "%s", t);
	cr_expect(strstr(t, "host h1: built worker1 worker2 (node MTU 1450"), "%s", t);
	cr_expect(strstr(t, "host h2: built worker3 (node MTU 1450"), "%s", t);
	cr_expect(strstr(t, "underlay h0 -> h1: base one-way delay ") && strstr(t, "underlay h0 -> h2: base one-way delay "),
		  "%s", t);
	cr_expect(strstr(t, "6 nodes ready on 3 hosts: started"), "the link self-check: %s", t);
	cr_expect(strstr(t, "5 nodes ready on 3 hosts: started"), "%s", t);
	/* one run directory with the one-host schema, from the three hosts' files */
	int rows = 0;
	char *lc = head_of("linkcheck.csv", &rows);
	cr_assert(lc, "linkcheck.csv");
	cr_expect_eq(rows, 15, "5 nodes x up, down, rtt");
	free(lc);
	char *hd = head_of("nodes/server0.csv", &rows);
	cr_assert(hd, "nodes/server0.csv (from h0)");
	cr_expect_str_eq(hd, TRACE_HEADER_SERVER);
	cr_expect_gt(rows, 10, "server0 applied updates");
	free(hd);
	for (int w = 0; w < 4; w++) {
		char rel[64];
		snprintf(rel, sizeof rel, "nodes/worker%d.csv", w);
		hd = head_of(rel, &rows);
		cr_assert(hd, "%s missing", rel);
		cr_expect_str_eq(hd, TRACE_HEADER_NODE, "%s", rel);
		cr_expect_gt(rows, 10, "%s: worker stepped (%d rows)", rel, rows);
		free(hd);
		/* streamed in chunks, yet every step once: rows 1..N */
		char p2[600];
		size_t l2;
		snprintf(p2, sizeof p2, "%s/%s", run_dir, rel);
		char *all = support_read_file(p2, &l2);
		cr_assert(all && l2 > 1);
		all[l2 - 1] = 0;
		char *last = strrchr(all, '\n');
		char *c = last ? strchr(last + 1, ',') : NULL;
		c = c ? strchr(c + 1, ',') : NULL;
		cr_expect(c && atol(c + 1) == rows, "%s: %d rows, last step %ld", rel, rows, c ? atol(c + 1) : -1);
		free(all);
		/* every host's t_s on one clock: the first step of each worker within 2 s of the origin */
		double t0 = first_t(rel);
		cr_expect(t0 >= 0 && t0 < 2.0, "%s: first t_s %.6f", rel, t0);
	}
	/* worker0 shares h0 with the server; worker1-2 on h1 (+1000.25 s), worker3 on h2 (-2.125 s) */
	for (int w = 0; w < 4; w++) {
		double lag = median_step_lag(w);
		fprintf(stderr, "worker%d: median(worker t_s - server t_s) of a step = %.1f us\n", w, lag * 1e6);
		cr_expect(lag > -0.25 && lag < 0.25, "worker%d: %.6f s", w, lag);
	}
	hd = head_of("progress.csv", &rows);
	cr_assert(hd, "progress.csv");
	cr_expect_str_eq(hd, TRACE_HEADER_PROGRESS);
	cr_expect_gt(rows, 10, "a row every 100 ms over 5 s: %d", rows);
	free(hd);
	hd = head_of("events.csv", &rows);
	cr_assert(hd, "events.csv");
	cr_expect_str_eq(hd, TRACE_HEADER_EVENTS);
	free(hd);
	hd = head_of("eval.csv", &rows);
	cr_assert(hd, "eval.csv");
	cr_expect_str_eq(hd, TRACE_HEADER_EVAL);
	cr_expect_gt(rows, 0);
	free(hd);
	size_t len;
	char path[600];
	snprintf(path, sizeof path, "%s/partition.csv", run_dir);
	char *part = support_read_file(path, &len);
	cr_assert(part, "partition.csv");
	cr_expect_eq(count(part, TRACE_HEADER_PARTITION), 1, "one header over the hosts' rows: %s", part);
	cr_expect_geq(count(part, "worker3,"), 1, "worker3's rows from h2: %s", part);
	free(part);
	snprintf(path, sizeof path, "%s/meta.json", run_dir);
	char *meta = support_read_file(path, &len);
	cr_assert(meta);
	cr_expect(strstr(meta, "\"status\": \"complete\""), "%s", meta);
	cr_expect_eq(count(meta, "\"clock_offset_ns\""), 3, "%s", meta);
	cr_expect_eq(count(meta, "\"clock_bound_ns\""), 3, "%s", meta);
	free(meta);
	snprintf(path, sizeof path, "%s/summary.csv", run_dir);
	char *sum = support_read_file(path, &len);
	cr_assert(sum, "summary.csv");
	cr_expect(strstr(sum, ",complete,"), "%s", sum);
	/* steps_min (10th column) > 0: every worker stepped */
	char *row = strchr(sum, '\n');
	cr_assert(row);
	int col = 0;
	char *p = row + 1;
	while (col < 9 && (p = strchr(p, ',')))
		p++, col++;
	cr_assert(p, "%s", sum);
	cr_expect_gt(atol(p), 0, "steps_min: %s", sum);
	free(sum);
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

static bool run_started(void *arg)
{
	(void)arg;
	size_t len;
	char *t = support_read_file(out_file, &len);
	bool yes = t && strstr(t, "nodes ready on 3 hosts: started");
	free(t);
	return yes;
}

Test(multihost_cli, killed_agent_stops_the_run)
{
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: mh\nstop: {time: 60s}\nworkers: 4\nnetwork: {cc: reno}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	pid_t pid = start_cli(args);
	cr_assert(support_wait_until(run_started, NULL, 90000), "the run did not start");
	pid_t agent = hostsim_agent_pid(&hs, 2, stalenet);
	cr_assert_gt(agent, 0, "no agent on h2");
	int64_t t_kill = support_now_ms();
	cr_assert_eq(kill(agent, SIGKILL), 0);
	int st = 0;
	cr_assert_eq(support_wait_pid(pid, &st, 90000), 0, "stalenet did not stop");
	int64_t took = support_now_ms() - t_kill;
	char *t = output();
	fprintf(stderr, "%s(stopped %lld ms after the kill)\n", t, (long long)took);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit 1: %s", t);
	cr_expect(strstr(t, "host h2: agent lost"), "%s", t);
	cr_expect_lt(took, 45000, "stopped long before the 60 s stop time");
	/* the surviving hosts were torn down by their agents; h2's share is in its journal */
	cr_expect_eq(netns_left(0), 0, "h0 torn down");
	cr_expect_eq(netns_left(1), 0, "h1 torn down");
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/meta.json", run_dir);
	char *meta = support_read_file(path, &len);
	cr_expect(meta && strstr(meta, "\"status\": \"failed\""), "%s", meta ? meta : "no meta.json");
	free(meta);
	snprintf(path, sizeof path, "%s/events.csv", run_dir);
	char *ev = support_read_file(path, &len);
	cr_expect(ev && strstr(ev, ",node_failed,worker3,host h2 lost"), "%s", ev ? ev : "no events.csv");
	free(ev);
	free(t);
	const char *cl[] = { "cleanup", "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			     hs.known_hosts, NULL };
	int rc = run_cli(cl);
	t = output();
	cr_expect_eq(rc, 0, "%s", t);
	for (size_t i = 0; i < 3; i++)
		cr_expect_eq(netns_left(i), 0, "host h%zu: namespaces left after cleanup", i);
	free(t);
}

Test(multihost_cli, p2p_across_hosts)
{
	write_hosts(hs.host[1].address, "h2");
	/* 6 peers on 2 cores each: two per host, the ring cut at every host boundary */
	support_write_file(scen, "name: mhp\nstop: {time: 5s}\ntopology: {kind: p2p}\nworkers: 6\n"
				 "consistency: {barrier: asp, fanout: 1}\nnetwork: {cc: reno}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	int rc = run_cli(args);
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect_eq(rc, 0, "%s", t);
	cr_expect(strstr(t, "6 nodes ready on 3 hosts: started"), "%s", t);
	for (int w = 0; w < 6; w++) {
		char rel[64];
		int rows = 0;
		snprintf(rel, sizeof rel, "nodes/peer%d.csv", w);
		char *hd = head_of(rel, &rows);
		cr_assert(hd, "%s missing", rel);
		cr_expect_str_eq(hd, TRACE_HEADER_NODE, "%s", rel);
		cr_expect_gt(rows, 10, "%s: peer stepped (%d rows)", rel, rows);
		free(hd);
		double t0 = first_t(rel);
		cr_expect(t0 >= 0 && t0 < 2.0, "%s: first t_s %.6f", rel, t0);
	}
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/summary.csv", run_dir);
	char *sum = support_read_file(path, &len);
	cr_expect(sum && strstr(sum, ",complete,"), "%s", sum ? sum : "no summary.csv");
	free(sum);
	free(t);
}

Test(multihost_cli, links_shaped_on_every_host)
{
	write_hosts(hs.host[1].address, "h2");
	/* 100 ms each way on every node's link: a step of a worker is at least its update's way
	 * up and the server's way down, and back: 400 ms, on whichever hosts the two are */
	support_write_file(scen, "name: mh\nstop: {time: 5s}\nworkers: 4\nnetwork: {cc: reno, default: {delay: 100ms}}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	int rc = run_cli(args);
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect_eq(rc, 0, "%s", t);
	for (int w = 0; w < 4; w++) {
		char rel[64];
		int rows = 0;
		snprintf(rel, sizeof rel, "nodes/worker%d.csv", w);
		char *hd = head_of(rel, &rows);
		cr_assert(hd, "%s", rel);
		free(hd);
		/* unshaped, the same run makes thousands of steps */
		fprintf(stderr, "%s: %d steps in 5 s, first at t_s %.3f\n", rel, rows, first_t(rel));
		cr_expect(rows >= 3 && rows <= 14, "%s: %d steps in 5 s at >= 400 ms each", rel, rows);
	}
	/* meta.json names the emulator the hosts used, as a one-host run does */
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/meta.json", run_dir);
	char *meta = support_read_file(path, &len);
	cr_assert(meta);
	cr_expect(strstr(meta, link_shaper_probe_kernel() == 1 ? "\"backend\": \"kernel\"" : "\"backend\": \"nfq\""),
		  "%s", meta);
	free(meta);
	free(t);
}

Test(multihost_cli, nfq_backend_across_hosts)
{
	write_hosts(hs.host[1].address, "h2");
	/* 20 ms each way, the emulator (stalenet-linkd) asked for on every host, whatever the kernel */
	support_write_file(scen, "name: mh\nstop: {time: 4s}\nworkers: 4\nnetwork: {cc: reno, default: {delay: 20ms}}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", "--backend", "nfq", NULL };
	int rc = run_cli(args);
	char *t = output();
	cr_expect_eq(rc, 0, "%s", t);
	/* 5 nodes and the link self-check's hub: 3 on h0, 2 on h1, 1 on h2; 22 ordered pairs cross
	 * hosts, each compensated once */
	cr_expect(strstr(t, "delay compensation: 22 path(s) across hosts"), "%s", t);
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/meta.json", run_dir);
	char *meta = support_read_file(path, &len);
	cr_assert(meta);
	cr_expect(strstr(meta, "\"backend\": \"nfq\""), "%s", meta);
	free(meta);
	int rows = 0;
	char *hd = head_of("nodes/worker3.csv", &rows);
	cr_assert(hd);
	free(hd);
	/* a step is at least 4 x 20 ms: at most ~50 in 4 s (unshaped: thousands) */
	cr_expect(rows >= 3 && rows <= 50, "worker3: %d steps", rows);
	free(t);
}

static bool worker3_streamed(void *arg)
{
	(void)arg;
	int rows = 0;
	char *hd = head_of("nodes/worker3.csv", &rows);
	free(hd);
	return hd && rows >= 10;
}

Test(multihost_cli, killed_agent_with_continue_drops_its_nodes)
{
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: mh\nstop: {time: 8s}\nworkers: 4\non_node_failure: continue\n"
				 "consistency: {barrier: asp}\nnetwork: {cc: reno}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	pid_t pid = start_cli(args);
	cr_assert(support_wait_until(run_started, NULL, 90000), "the run did not start");
	/* worker3's trace streamed from h2 while it runs: rows here before the host is lost */
	cr_assert(support_wait_until(worker3_streamed, NULL, 30000), "no streamed rows of worker3");
	pid_t agent = hostsim_agent_pid(&hs, 2, stalenet);
	cr_assert_gt(agent, 0, "no agent on h2");
	cr_assert_eq(kill(agent, SIGKILL), 0);
	int st = 0;
	cr_assert_eq(support_wait_pid(pid, &st, 90000), 0, "stalenet did not stop");
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the others went on to the stop time: %s", t);
	int w3rows = 0;
	char *w3 = head_of("nodes/worker3.csv", &w3rows);
	cr_expect(w3 && !strcmp(w3, TRACE_HEADER_NODE), "worker3's streamed trace kept");
	cr_expect_geq(w3rows, 10, "worker3's rows until its host was lost: %d", w3rows);
	free(w3);
	cr_expect(strstr(t, "host h2: agent lost"), "%s", t);
	for (int w = 0; w < 3; w++) {
		char rel[64];
		int rows = 0;
		snprintf(rel, sizeof rel, "nodes/worker%d.csv", w);
		char *hd = head_of(rel, &rows);
		cr_assert(hd, "%s", rel);
		cr_expect_gt(rows, 10, "%s kept stepping (%d rows)", rel, rows);
		free(hd);
	}
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/events.csv", run_dir);
	char *ev = support_read_file(path, &len);
	cr_expect(ev && strstr(ev, ",node_failed,worker3,host h2 lost"), "%s", ev ? ev : "no events.csv");
	cr_expect(ev && strstr(ev, ",stop,all,time"), "%s", ev ? ev : "no events.csv");
	free(ev);
	cr_expect_eq(netns_left(0), 0, "h0 torn down");
	cr_expect_eq(netns_left(1), 0, "h1 torn down");
	free(t);
	const char *cl[] = { "cleanup", "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			     hs.known_hosts, NULL };
	cr_expect_eq(run_cli(cl), 0);
	cr_expect_eq(netns_left(2), 0, "h2 cleaned");
}

Test(multihost_cli, a_sweep_runs_each_point_across_the_hosts)
{
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: mhs\nstop: {time: 3s}\nworkers: 4\nnetwork: {cc: reno}\n"
				 "sweep: {consistency.barrier: [bsp, asp]}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	int rc = run_cli(args);
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect_eq(rc, 0, "%s", t);
	cr_expect_eq(count(t, "5 nodes ready on 3 hosts: started"), 2, "%s", t);
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/summary.csv", run_dir);
	char *sum = support_read_file(path, &len);
	cr_expect(sum && count(sum, ",complete,") == 2, "two complete rows: %s", sum ? sum : "no summary.csv");
	free(sum);
	for (size_t i = 0; i < 3; i++)
		cr_expect_eq(netns_left(i), 0, "host h%zu torn down", i);
	free(t);
}

/* Training started (server0 and four workers: after the link self-check's six nodes). */
static bool training_started(void *arg)
{
	(void)arg;
	size_t len;
	char *t = support_read_file(out_file, &len);
	bool yes = t && strstr(t, "5 nodes ready on 3 hosts: started");
	free(t);
	return yes;
}

/* The link self-check across hosts has begun (the orchestrator's line before it launches the
 * probes). */
static bool linkcheck_begun(void *arg)
{
	(void)arg;
	size_t len;
	char *t = support_read_file(out_file, &len);
	bool yes = t && strstr(t, "link self-check: 100 probes per node");
	free(t);
	return yes;
}

/* An interruption during the link self-check, before training: the run stops (exit 130,
 * meta.json "interrupted"), events.csv says so (stop,all,interrupted) and names no node as
 * failed (a probe stopped before its start exits 1: that is the interruption, not a failure),
 * and every host is torn down. */
Test(multihost_cli, interrupted_self_check_is_no_node_failure)
{
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: mhi\nstop: {time: 30s}\nworkers: 4\nlinkcheck: {probes: 100}\n"
				 "network: {cc: reno}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	pid_t pid = start_cli(args);
	cr_assert(support_wait_until(linkcheck_begun, NULL, 90000), "the link self-check did not begin");
	cr_assert_eq(kill(pid, SIGINT), 0);
	int st = 0;
	cr_assert_eq(support_wait_pid(pid, &st, 90000), 0, "stalenet did not stop");
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 130, "exit 130 (interrupted): %s", t);
	cr_expect_null(strstr(t, "5 nodes ready on 3 hosts: started"), "training started: %s", t);
	cr_expect_null(strstr(t, " died: "), "%s", t);
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/events.csv", run_dir);
	char *ev = support_read_file(path, &len);
	cr_assert(ev, "no events.csv: %s", t);
	fprintf(stderr, "%s", ev);
	cr_expect_eq(count(ev, ",stop,all,interrupted"), 1, "%s", ev);
	cr_expect_null(strstr(ev, "node_failed"), "%s", ev);
	snprintf(path, sizeof path, "%s/meta.json", run_dir);
	char *meta = support_read_file(path, &len);
	cr_expect(meta && strstr(meta, "\"status\": \"interrupted\""), "%s", meta ? meta : "no meta.json");
	for (size_t i = 0; i < 3; i++)
		cr_expect_eq(netns_left(i), 0, "host h%zu torn down", i);
	free(meta);
	free(ev);
	free(t);
}

/* The one non-hidden directory of run_dir holding meta.json into name (a sweep's run). */
static int first_run_dir(char *name, size_t len)
{
	DIR *d = opendir(run_dir);
	struct dirent *e;
	int found = 0;
	while (d && (e = readdir(d))) {
		char meta[800];
		if (e->d_name[0] == '.')
			continue;
		snprintf(meta, sizeof meta, "%s/%s/meta.json", run_dir, e->d_name);
		if (access(meta, F_OK) == 0 && !found++)
			snprintf(name, len, "%s", e->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

/* An interrupted sweep across hosts run again into the same --out: the interrupted run's
 * directory is kept whole under OUT/.incomplete/ (its events.csv byte for byte, meta.json
 * "interrupted"), and the run is done again from scratch in a fresh directory (one start row:
 * nothing appended to the earlier attempt's traces), as on one host. */
Test(multihost_cli, rerun_keeps_an_interrupted_attempt_aside)
{
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: mhr\nstop: {time: 5s}\nworkers: 4\nnetwork: {cc: reno}\n"
				 "sweep: {consistency.barrier: [bsp, asp]}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	pid_t pid = start_cli(args);
	cr_assert(support_wait_until(training_started, NULL, 90000), "the training did not start");
	cr_assert_eq(kill(pid, SIGINT), 0);
	int st = 0;
	cr_assert_eq(support_wait_pid(pid, &st, 90000), 0, "stalenet did not stop");
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 130, "exit 130 (interrupted): %s", t);
	free(t);
	char name[256], path[800], kept[1200];
	size_t len, klen;
	cr_assert_eq(first_run_dir(name, sizeof name), 1, "one run directory after the interruption");
	snprintf(path, sizeof path, "%s/%s/events.csv", run_dir, name);
	char *first = support_read_file(path, &len);
	cr_assert(first && count(first, ",start,all,") == 1, "%s", first ? first : "no events.csv");

	int rc = run_cli(args);
	t = output();
	fprintf(stderr, "%s", t);
	cr_assert_eq(rc, 0, "%s", t);
	cr_expect(strstr(t, "an earlier attempt is incomplete; kept in"), "%s", t);
	/* the earlier attempt, whole, under .incomplete/ */
	snprintf(path, sizeof path, "%s/.incomplete", run_dir);
	DIR *d = opendir(path);
	cr_assert(d, "no %s", path);
	struct dirent *e;
	int n = 0;
	kept[0] = '\0';
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			n++;
			snprintf(kept, sizeof kept, "%s/%s", path, e->d_name);
			cr_expect(!strncmp(e->d_name, name, strlen(name)), "%s kept as %s", name, e->d_name);
		}
	closedir(d);
	cr_assert_eq(n, 1, "one earlier attempt kept");
	char kfile[1300];
	snprintf(kfile, sizeof kfile, "%s/events.csv", kept);
	char *old = support_read_file(kfile, &klen);
	cr_expect(old && klen == len && !memcmp(old, first, len), "the earlier events.csv kept as it was");
	snprintf(kfile, sizeof kfile, "%s/meta.json", kept);
	char *meta = support_read_file(kfile, &klen);
	cr_expect(meta && strstr(meta, "\"status\": \"interrupted\""), "%s", meta ? meta : "no meta.json");
	/* the run done again from scratch: fresh traces, complete */
	snprintf(path, sizeof path, "%s/%s/events.csv", run_dir, name);
	char *fresh = support_read_file(path, &klen);
	cr_expect(fresh && count(fresh, ",start,all,") == 1 && count(fresh, "t_s,event") == 1,
		  "fresh events.csv: %s", fresh ? fresh : "none");
	snprintf(path, sizeof path, "%s/%s/progress.csv", run_dir, name);
	char *prog = support_read_file(path, &klen);
	cr_expect(prog && count(prog, "t_s,") == 1, "one progress.csv header");
	snprintf(path, sizeof path, "%s/%s/complete", run_dir, name);
	cr_expect_eq(access(path, F_OK), 0, "the rerun completed");
	snprintf(path, sizeof path, "%s/summary.csv", run_dir);
	char *sum = support_read_file(path, &klen);
	cr_expect(sum && count(sum, ",complete,") == 2, "two complete rows: %s", sum ? sum : "no summary.csv");
	for (size_t i = 0; i < 3; i++)
		cr_expect_eq(netns_left(i), 0, "host h%zu torn down", i);
	free(sum);
	free(prog);
	free(fresh);
	free(meta);
	free(old);
	free(first);
	free(t);
}

/* ssh clients on this machine with our identity file among their arguments (the ones the
 * orchestrator starts). */
static int ssh_clients(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int found = 0;
	while (d && (e = readdir(d))) {
		char path[300], cmd[4096];
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
		FILE *f = fopen(path, "re");
		size_t r = f ? fread(cmd, 1, sizeof cmd - 1, f) : 0;
		if (f)
			fclose(f);
		cmd[r] = 0;
		bool ssh = r && !strcmp(cmd, "ssh");
		for (size_t i = 0; i < r; i++)
			cmd[i] = cmd[i] ? cmd[i] : ' ';
		found += ssh && strstr(cmd, hs.identity) != NULL;
	}
	if (d)
		closedir(d);
	return found;
}

/* Lines of nodes/NAME.csv in an agent's run directory on any host (the agents keep it after
 * teardown), -1 when no host has it. */
static int host_lines(const char *name)
{
	for (size_t i = 0; i < 3; i++) {
		char base[200];
		snprintf(base, sizeof base, "/proc/%d/root/run/stalenet", (int)hs.host[i].sshd_pid);
		DIR *d = opendir(base);
		struct dirent *e;
		int lines = -1;
		while (d && (e = readdir(d)) && lines < 0) {
			char path[600];
			size_t len;
			if (strncmp(e->d_name, "agent-", 6))
				continue;
			snprintf(path, sizeof path, "%s/%s/run/nodes/%s.csv", base, e->d_name, name);
			char *t = support_read_file(path, &len);
			if (t)
				lines = count(t, "\n");
			free(t);
		}
		if (d)
			closedir(d);
		if (lines >= 0)
			return lines;
	}
	return -1;
}

static bool no_ssh_left(void *arg)
{
	(void)arg;
	return ssh_clients() == 0;
}

/* A terminal's Ctrl-C: SIGINT to the whole foreground process group the orchestrator runs in,
 * during training. Only the orchestrator gets it (its ssh clients are in groups of their own),
 * so it stops the run over the still open connections as for a SIGINT to it alone: exit 130,
 * no host lost, every host's files fetched (each node's configuration, sent at the fetch only,
 * and its trace), every host torn down by the orchestrator before it exits, no agent and no
 * ssh client left. */
Test(multihost_cli, ctrl_c_to_the_process_group_tears_down_over_the_links)
{
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: mhc\nstop: {time: 60s}\nworkers: 4\nlinkcheck: off\nnetwork: {cc: reno}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	pid_t pid = start_cli_in(args, true);
	cr_assert(support_wait_until(training_started, NULL, 90000), "the training did not start");
	cr_assert(support_wait_until(worker3_streamed, NULL, 30000), "no rows from h2");
	int64_t t0 = support_now_ms();
	cr_assert_eq(kill(-pid, SIGINT), 0, "kill(-%d, SIGINT): %s", (int)pid, strerror(errno));
	int st = 0;
	cr_assert_eq(support_wait_pid(pid, &st, 90000), 0, "stalenet did not stop");
	fprintf(stderr, "SIGINT to the group -> stopped, fetched, torn down, exited: %lld ms\n",
		(long long)(support_now_ms() - t0));
	/* the hosts as the orchestrator left them, before their agents could do anything alone */
	int left[3];
	for (size_t i = 0; i < 3; i++)
		left[i] = netns_left(i);
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 130, "exit 130 (interrupted): %s", t);
	cr_expect_null(strstr(t, "agent lost"), "no host lost: %s", t);
	cr_expect_null(strstr(t, "could not be fetched"), "%s", t);
	cr_expect_null(strstr(t, "teardown failed"), "%s", t);
	for (size_t i = 0; i < 3; i++)
		cr_expect_eq(left[i], 0, "host h%zu: %d namespaces left when the orchestrator exited", i, left[i]);
	/* every row each node wrote on its host, its end fetched after the nodes stopped (streaming
	 * alone lags by up to half a second) */
	static const char *const nodes[] = { "server0", "worker0", "worker1", "worker2", "worker3" };
	for (size_t i = 0; i < 5; i++) {
		char rel[64];
		int rows = 0, there = host_lines(nodes[i]);
		snprintf(rel, sizeof rel, "nodes/%s.csv", nodes[i]);
		char *hd = head_of(rel, &rows);
		fprintf(stderr, "%s: %d rows here, %d on its host\n", rel, hd ? rows : -1, there - 1);
		cr_expect(hd && rows > 0 && rows == there - 1, "%s: %d rows, %d on its host", rel, hd ? rows : -1,
			  there - 1);
		free(hd);
	}
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/events.csv", run_dir);
	char *ev = support_read_file(path, &len);
	cr_expect(ev && count(ev, ",stop,all,interrupted") == 1, "%s", ev ? ev : "no events.csv");
	cr_expect(ev && !strstr(ev, "node_failed"), "%s", ev ? ev : "no events.csv");
	snprintf(path, sizeof path, "%s/meta.json", run_dir);
	char *meta = support_read_file(path, &len);
	cr_expect(meta && strstr(meta, "\"status\": \"interrupted\""), "%s", meta ? meta : "no meta.json");
	for (size_t i = 0; i < 3; i++)
		cr_expect_eq(hostsim_agent_pid(&hs, i, stalenet), 0, "host h%zu: an agent left", i);
	cr_expect(support_wait_until(no_ssh_left, NULL, 5000), "%d ssh clients left", ssh_clients());
	free(meta);
	free(ev);
	free(t);
}

static bool hosts_clean(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < 3; i++)
		if (netns_left(i) || hostsim_agent_pid(&hs, i, stalenet))
			return false;
	return true;
}

static bool stop_row_written(void *arg)
{
	(void)arg;
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/events.csv", run_dir);
	char *ev = support_read_file(path, &len);
	bool yes = ev && strstr(ev, ",stop,all,interrupted");
	free(ev);
	return yes;
}

/* Ctrl-C twice while a host hangs: h2's agent is stopped (SIGSTOP), so it answers nothing and
 * the first interruption alone would wait for its nodes' ends for ever (their kill resent every
 * 30 s), then up to 60 s a line for its files and 120 s for its teardown. The second cuts each
 * of those waits to MULTIHOST_STOP_NOW_MS: exit 130 within seconds, h0 and h1 fetched and torn
 * down by then, h2 named as not confirmed, the rows streamed before kept, the run recorded as
 * interrupted. Once h2's agent runs again it finds its connection ended and tears down: no
 * namespace, agent or ssh client left anywhere. */
Test(multihost_cli, second_ctrl_c_with_a_hung_host_stops_at_once)
{
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: mhn\nstop: {time: 60s}\nworkers: 4\nlinkcheck: off\nnetwork: {cc: reno}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	pid_t pid = start_cli_in(args, true);
	cr_assert(support_wait_until(training_started, NULL, 90000), "the training did not start");
	cr_assert(support_wait_until(worker3_streamed, NULL, 30000), "no rows from h2");
	pid_t agent = hostsim_agent_pid(&hs, 2, stalenet);
	cr_assert_gt(agent, 0, "no agent on h2");
	cr_assert_eq(kill(agent, SIGSTOP), 0, "SIGSTOP the agent of h2: %s", strerror(errno));
	/* what is here once h2 has gone silent: nothing of it may be lost */
	int before3 = 0, before0 = 0;
	free(head_of("nodes/worker3.csv", &before3));
	free(head_of("nodes/worker0.csv", &before0));
	cr_assert_eq(kill(-pid, SIGINT), 0, "kill(-%d, SIGINT): %s", (int)pid, strerror(errno));
	cr_assert(support_wait_until(stop_row_written, NULL, 10000), "the first SIGINT did not stop the run");
	int64_t t0 = support_now_ms();
	cr_assert_eq(kill(-pid, SIGINT), 0);
	kill(-pid, SIGINT);   /* a third changes nothing */
	int st = 0;
	int waited = support_wait_pid(pid, &st, 60000);
	int64_t took = support_now_ms() - t0;
	int left[3];
	for (size_t i = 0; i < 3; i++)
		left[i] = netns_left(i);
	char *t = output();
	fprintf(stderr, "%s", t);
	fprintf(stderr, "second SIGINT with h2 hung -> exited: %lld ms\n", (long long)took);
	kill(agent, SIGCONT);
	cr_assert_eq(waited, 0, "stalenet did not stop 60 s after the second SIGINT");
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 130, "exit 130 (interrupted): %s", t);
	/* the kills' wait, the teardown's and the connections' end, each cut to 5 s at most */
	cr_expect_leq(took, 20000, "exit %lld ms after the second SIGINT", (long long)took);
	cr_expect_eq(count(t, "to stop at once"), 1, "%s", t);
	cr_expect_eq(count(t, "interrupted again: stopping at once"), 1, "%s", t);
	cr_expect(strstr(t, "host h2: teardown not confirmed"), "%s", t);
	cr_expect_null(strstr(t, "host h0: teardown"), "%s", t);
	cr_expect_null(strstr(t, "host h1: teardown"), "%s", t);
	cr_expect_eq(left[0], 0, "host h0: %d namespaces left when the orchestrator exited", left[0]);
	cr_expect_eq(left[1], 0, "host h1: %d namespaces left when the orchestrator exited", left[1]);
	int after3 = 0, after0 = 0;
	free(head_of("nodes/worker3.csv", &after3));
	free(head_of("nodes/worker0.csv", &after0));
	cr_expect_geq(after3, before3, "nodes/worker3.csv: %d rows, %d before", after3, before3);
	cr_expect_geq(after0, before0, "nodes/worker0.csv: %d rows, %d before", after0, before0);
	cr_expect_gt(after3, 0, "no rows of worker3 (h2) kept");
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/events.csv", run_dir);
	char *ev = support_read_file(path, &len);
	cr_expect(ev && count(ev, ",stop,all,") == 1, "%s", ev ? ev : "no events.csv");
	cr_expect(ev && !strstr(ev, "node_failed"), "%s", ev ? ev : "no events.csv");
	snprintf(path, sizeof path, "%s/meta.json", run_dir);
	char *meta = support_read_file(path, &len);
	cr_expect(meta && strstr(meta, "\"status\": \"interrupted\""), "%s", meta ? meta : "no meta.json");
	/* h2's agent, running again, finds its input ended and tears its share down */
	cr_expect(support_wait_until(hosts_clean, NULL, 30000), "hosts not clean: namespaces %d %d %d", netns_left(0),
		  netns_left(1), netns_left(2));
	cr_expect(support_wait_until(no_ssh_left, NULL, 5000), "%d ssh clients left", ssh_clients());
	free(meta);
	free(ev);
	free(t);
}

/* The stop.grace of the scenarios whose test is about the graceful stop's bounds, not about
 * the default grace (the single-host sigint_after_the_stop_time_leaves_the_run_complete keeps
 * that): a node that ignores the stop is killed through its agent STOP_KILL_MS after it, and
 * a host that has not reported its nodes' ends is lost MULTIHOST_STOP_NOW_MS later. */
#define TEST_GRACE_MS 2000
#define STOP_KILL_MS (TEST_GRACE_MS + SUPERVISE_TERM_GRACE_MS)
/* what the bound allows on top for the connection's close, the fetch and teardown of the other
 * hosts on a loaded host; still short of the default grace's kill */
#define STOP_SLACK_MS 8000
/* the stop row is seen within a poll (64 ms) of its writing; on a loaded host allow 0.5 s */
#define STOP_SEEN_MS 500

static bool time_stop_row_written(void *arg)
{
	(void)arg;
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/events.csv", run_dir);
	char *ev = support_read_file(path, &len);
	bool yes = ev && strstr(ev, ",stop,all,time");
	free(ev);
	return yes;
}

/* The run's own end (stop.time) meets a hung host: h2's agent is stopped (SIGSTOP) before the
 * stop time, so it relays neither the stop nor its nodes' ends. The stop is bounded as on one
 * host: its nodes are killed after stop.grace + 5 s (one host's grace to SIGTERM + 5 s to
 * SIGKILL; 2 + 5 s here) and h2, not having reported their ends 5 s later, is lost: named with what to do, not fetched, its
 * connection closed; h0 and h1 fetched and torn down as usual, the rows h2 streamed before
 * kept, the run failed (worker3 node_failed, host h2 lost, as for a killed agent). The
 * orchestrator used to wait for ever (the kill resent every 30 s). Once h2's agent runs again
 * it finds its connection ended and tears down. */
Test(multihost_cli, a_hung_host_at_the_stop_time_is_lost_after_the_graceful_bounds)
{
	write_hosts(hs.host[1].address, "h2");
	char yaml[256];
	snprintf(yaml, sizeof yaml, "name: mhs\nstop: {time: 15s, grace: %dms}\nworkers: 4\nlinkcheck: off\n"
		 "network: {cc: reno}\n", TEST_GRACE_MS);
	support_write_file(scen, yaml);
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	pid_t pid = start_cli_in(args, true);
	cr_assert(support_wait_until(training_started, NULL, 90000), "the training did not start");
	cr_assert(support_wait_until(worker3_streamed, NULL, 30000), "no rows from h2");
	pid_t agent = hostsim_agent_pid(&hs, 2, stalenet);
	cr_assert_gt(agent, 0, "no agent on h2");
	cr_assert_eq(kill(agent, SIGSTOP), 0, "SIGSTOP the agent of h2: %s", strerror(errno));
	cr_assert_not(time_stop_row_written(NULL), "the stop time came before h2 hung: no test");
	int before3 = 0;
	free(head_of("nodes/worker3.csv", &before3));
	bool stopped = support_wait_until(time_stop_row_written, NULL, 30000);
	int64_t t0 = support_now_ms();
	int st = 0;
	int waited = stopped ? support_wait_pid(pid, &st, 90000) : -1;
	int64_t took = support_now_ms() - t0;
	int left[3];
	for (size_t i = 0; i < 3; i++)
		left[i] = netns_left(i);
	char *t = output();
	fprintf(stderr, "%s", t);
	fprintf(stderr, "stop time with h2 hung -> exited %lld ms after the stop row\n", (long long)took);
	kill(agent, SIGCONT);
	if (waited) {
		kill(-pid, SIGINT);
		kill(-pid, SIGINT);
		support_wait_pid(pid, NULL, 30000);
	}
	cr_assert(stopped, "no stop row at the stop time");
	cr_assert_eq(waited, 0, "stalenet did not end 90 s after the stop time");
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit 1 (failed): %s", t);
	/* within the bound: the graces to the kill and the 5 s for its report, not for ever (nor
	 * the default grace's); and not before the graceful stop's bounds */
	cr_expect_geq(took, STOP_KILL_MS + MULTIHOST_STOP_NOW_MS - STOP_SEEN_MS,
		      "exit %lld ms after the stop: h2 given less than the stop's graces", (long long)took);
	cr_expect_leq(took, STOP_KILL_MS + MULTIHOST_STOP_NOW_MS + STOP_SLACK_MS, "exit %lld ms after the stop",
		      (long long)took);
	cr_expect(strstr(t, "host h2: lost: its agent does not answer"), "%s", t);
	cr_expect(strstr(t, "stalenet cleanup --hosts"), "%s", t);
	cr_expect_null(strstr(t, "host h0: lost"), "%s", t);
	cr_expect_null(strstr(t, "host h1: lost"), "%s", t);
	cr_expect_null(strstr(t, "could not be fetched"), "%s", t);
	cr_expect_null(strstr(t, "teardown failed"), "%s", t);
	cr_expect_null(strstr(t, "teardown not confirmed"), "%s", t);
	cr_expect_eq(left[0], 0, "host h0: %d namespaces left when the orchestrator exited", left[0]);
	cr_expect_eq(left[1], 0, "host h1: %d namespaces left when the orchestrator exited", left[1]);
	int after3 = 0, after0 = 0;
	free(head_of("nodes/worker3.csv", &after3));
	char *hd0 = head_of("nodes/worker0.csv", &after0);
	cr_expect_gt(before3, 0, "no rows of worker3 (h2) before it hung");
	cr_expect_geq(after3, before3, "nodes/worker3.csv: %d rows, %d before", after3, before3);
	cr_expect(hd0 && after0 > 0, "nodes/worker0.csv (h0) not fetched");
	free(hd0);
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/events.csv", run_dir);
	char *ev = support_read_file(path, &len);
	cr_expect(ev && count(ev, ",stop,all,") == 1, "%s", ev ? ev : "no events.csv");
	cr_expect(ev && strstr(ev, ",node_failed,worker3,host h2 lost"), "%s", ev ? ev : "no events.csv");
	cr_expect(ev && count(ev, ",node_failed,") == 1, "only h2's node: %s", ev ? ev : "no events.csv");
	snprintf(path, sizeof path, "%s/meta.json", run_dir);
	char *meta = support_read_file(path, &len);
	cr_expect(meta && strstr(meta, "\"status\": \"failed\""), "%s", meta ? meta : "no meta.json");
	/* h2's agent, running again, finds its input ended and tears its share down */
	cr_expect(support_wait_until(hosts_clean, NULL, 30000), "hosts not clean: namespaces %d %d %d", netns_left(0),
		  netns_left(1), netns_left(2));
	cr_expect(support_wait_until(no_ssh_left, NULL, 5000), "%d ssh clients left", ssh_clients());
	free(meta);
	free(ev);
	free(t);
}

/* One Ctrl-C while a host hangs (h2's agent stopped): the graceful stop is bounded as at the
 * stop time: h2 lost stop.grace + 10 s after the stop (12 s here), the others fetched and torn down, exit 130, the run
 * interrupted and no node_failed row (its nodes were being stopped); h2 clean once its agent
 * runs again. */
Test(multihost_cli, one_ctrl_c_with_a_hung_host_ends_within_the_bound)
{
	write_hosts(hs.host[1].address, "h2");
	char yaml[256];
	snprintf(yaml, sizeof yaml, "name: mho\nstop: {time: 60s, grace: %dms}\nworkers: 4\nlinkcheck: off\n"
		 "network: {cc: reno}\n", TEST_GRACE_MS);
	support_write_file(scen, yaml);
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	pid_t pid = start_cli_in(args, true);
	cr_assert(support_wait_until(training_started, NULL, 90000), "the training did not start");
	cr_assert(support_wait_until(worker3_streamed, NULL, 30000), "no rows from h2");
	pid_t agent = hostsim_agent_pid(&hs, 2, stalenet);
	cr_assert_gt(agent, 0, "no agent on h2");
	cr_assert_eq(kill(agent, SIGSTOP), 0, "SIGSTOP the agent of h2: %s", strerror(errno));
	int before3 = 0;
	free(head_of("nodes/worker3.csv", &before3));
	cr_assert_eq(kill(-pid, SIGINT), 0, "kill(-%d, SIGINT): %s", (int)pid, strerror(errno));
	bool stopped = support_wait_until(stop_row_written, NULL, 10000);
	int64_t t0 = support_now_ms();
	int st = 0;
	int waited = stopped ? support_wait_pid(pid, &st, 60000) : -1;
	int64_t took = support_now_ms() - t0;
	int left[3];
	for (size_t i = 0; i < 3; i++)
		left[i] = netns_left(i);
	char *t = output();
	fprintf(stderr, "%s", t);
	fprintf(stderr, "one SIGINT with h2 hung -> exited %lld ms after the stop row\n", (long long)took);
	kill(agent, SIGCONT);
	if (waited) {
		kill(-pid, SIGINT);
		support_wait_pid(pid, NULL, 30000);
	}
	cr_assert(stopped, "the SIGINT did not stop the run");
	cr_assert_eq(waited, 0, "stalenet did not end 60 s after the SIGINT");
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 130, "exit 130 (interrupted): %s", t);
	cr_expect_geq(took, STOP_KILL_MS + MULTIHOST_STOP_NOW_MS - STOP_SEEN_MS,
		      "exit %lld ms after the stop: h2 given less than the stop's graces", (long long)took);
	cr_expect_leq(took, STOP_KILL_MS + MULTIHOST_STOP_NOW_MS + STOP_SLACK_MS, "exit %lld ms after the stop",
		      (long long)took);
	cr_expect(strstr(t, "host h2: lost: its agent does not answer"), "%s", t);
	cr_expect_null(strstr(t, "interrupted again"), "%s", t);
	cr_expect_null(strstr(t, "could not be fetched"), "%s", t);
	cr_expect_eq(left[0], 0, "host h0: %d namespaces left when the orchestrator exited", left[0]);
	cr_expect_eq(left[1], 0, "host h1: %d namespaces left when the orchestrator exited", left[1]);
	int after3 = 0;
	free(head_of("nodes/worker3.csv", &after3));
	cr_expect_gt(before3, 0, "no rows of worker3 (h2) before it hung");
	cr_expect_geq(after3, before3, "nodes/worker3.csv: %d rows, %d before", after3, before3);
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/events.csv", run_dir);
	char *ev = support_read_file(path, &len);
	cr_expect(ev && count(ev, ",stop,all,interrupted") == 1, "%s", ev ? ev : "no events.csv");
	cr_expect(ev && !strstr(ev, "node_failed"), "%s", ev ? ev : "no events.csv");
	snprintf(path, sizeof path, "%s/meta.json", run_dir);
	char *meta = support_read_file(path, &len);
	cr_expect(meta && strstr(meta, "\"status\": \"interrupted\""), "%s", meta ? meta : "no meta.json");
	cr_expect(support_wait_until(hosts_clean, NULL, 30000), "hosts not clean: namespaces %d %d %d", netns_left(0),
		  netns_left(1), netns_left(2));
	cr_expect(support_wait_until(no_ssh_left, NULL, 5000), "%d ssh clients left", ssh_clients());
	free(meta);
	free(ev);
	free(t);
}

/* The pid of node name's process on host i (stalenet-node with its configuration
 * .../nodes/NAME.conf, in the host's mount namespace), 0 when none. */
static pid_t host_node_pid(size_t i, const char *name)
{
	char path[300], want[64], got[64], suffix[96];
	snprintf(path, sizeof path, "/proc/%d/ns/mnt", (int)hs.host[i].sshd_pid);
	ssize_t wl = readlink(path, want, sizeof want - 1);
	if (wl <= 0)
		return 0;
	want[wl] = 0;
	snprintf(suffix, sizeof suffix, "/nodes/%s.conf", name);
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;
	while (d && !found && (e = readdir(d))) {
		char cmd[1024];
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/ns/mnt", e->d_name);
		ssize_t gl = readlink(path, got, sizeof got - 1);
		if (gl <= 0)
			continue;
		got[gl] = 0;
		if (strcmp(got, want))
			continue;
		snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
		FILE *f = fopen(path, "re");
		size_t r = f ? fread(cmd, 1, sizeof cmd - 1, f) : 0;
		if (f)
			fclose(f);
		cmd[r] = 0;
		size_t l0 = strlen(cmd), l1 = l0 + 1 < r ? strlen(cmd + l0 + 1) : 0;
		const char *bin = "stalenet-node";
		if (l0 >= strlen(bin) && !strcmp(cmd + l0 - strlen(bin), bin) && l1 >= strlen(suffix) &&
		    !strcmp(cmd + l0 + 1 + l1 - strlen(suffix), suffix))
			found = (pid_t)atol(e->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

/* A Ctrl-C once a run across hosts has reached its stop time, during its wind-down (worker0 on
 * h0 stopped with SIGSTOP, so it is waited for until its kill stop.grace + 5 s after the stop,
 * 7 s here): the work
 * was done, so the run stays complete, exit 0, the interruption said to have come after the
 * run's end; no host lost, every host fetched and torn down. */
Test(multihost_cli, ctrl_c_after_the_stop_time_leaves_the_run_complete)
{
	write_hosts(hs.host[1].address, "h2");
	char yaml[256], killed[128];
	snprintf(yaml, sizeof yaml, "name: mhl\nstop: {time: 8s, grace: %dms}\nworkers: 4\nlinkcheck: off\n"
		 "network: {cc: reno}\n", TEST_GRACE_MS);
	support_write_file(scen, yaml);
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	pid_t pid = start_cli_in(args, true);
	cr_assert(support_wait_until(training_started, NULL, 90000), "the training did not start");
	pid_t worker = host_node_pid(0, "worker0");
	cr_assert_gt(worker, 0, "no worker0 on h0");
	cr_assert_eq(kill(worker, SIGSTOP), 0, "SIGSTOP worker0: %s", strerror(errno));
	cr_assert_not(time_stop_row_written(NULL), "the stop time came before worker0 hung: no test");
	bool stopped = support_wait_until(time_stop_row_written, NULL, 30000);
	int64_t t0 = support_now_ms();
	if (stopped)
		cr_assert_eq(kill(-pid, SIGINT), 0, "kill(-%d, SIGINT): %s", (int)pid, strerror(errno));
	int st = 0;
	int waited = stopped ? support_wait_pid(pid, &st, 60000) : -1;
	int64_t took = support_now_ms() - t0;
	char *t = output();
	fprintf(stderr, "%s", t);
	fprintf(stderr, "SIGINT at the stop time with worker0 stopped -> exited %lld ms later\n", (long long)took);
	if (waited) {
		kill(worker, SIGKILL);
		kill(-pid, SIGINT);
		kill(-pid, SIGINT);
		support_wait_pid(pid, NULL, 30000);
	}
	cr_assert(stopped, "no stop row at the stop time");
	cr_assert_eq(waited, 0, "stalenet did not end 60 s after the SIGINT");
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit 0 (complete): %s", t);
	cr_expect(strstr(t, "interrupted after the run's end (stop.time reached): it stays complete"), "%s", t);
	/* the signal handler's own line says so too, not that the run is being stopped */
	cr_expect(strstr(t, "interrupted after the run had finished: it stays complete"), "%s", t);
	cr_expect_null(strstr(t, "interrupted: stopping the run"), "%s", t);
	snprintf(killed, sizeof killed, "node worker0 on host h0 not ended %g s after the stop: killed",
		 STOP_KILL_MS / 1000.0);
	cr_expect(strstr(t, killed), "%s", t);
	/* the wind-down lasted the graces to worker0's kill, and not the default grace's */
	cr_expect_geq(took, STOP_KILL_MS - STOP_SEEN_MS, "exit %lld ms after the stop: worker0 given less than the graces",
		      (long long)took);
	cr_expect_leq(took, STOP_KILL_MS + STOP_SLACK_MS, "exit %lld ms after the stop", (long long)took);
	cr_expect_null(strstr(t, "lost"), "%s", t);
	cr_expect_null(strstr(t, "could not be fetched"), "%s", t);
	cr_expect(strstr(t, "done: 1 run(s) across 3 hosts"), "%s", t);
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/events.csv", run_dir);
	char *ev = support_read_file(path, &len);
	cr_expect(ev && count(ev, ",stop,all,") == 1, "%s", ev ? ev : "no events.csv");
	cr_expect(ev && !strstr(ev, "interrupted"), "%s", ev ? ev : "no events.csv");
	cr_expect(ev && !strstr(ev, "node_failed"), "%s", ev ? ev : "no events.csv");
	snprintf(path, sizeof path, "%s/meta.json", run_dir);
	char *meta = support_read_file(path, &len);
	cr_expect(meta && strstr(meta, "\"status\": \"complete\""), "%s", meta ? meta : "no meta.json");
	snprintf(path, sizeof path, "%s/complete", run_dir);
	cr_expect_eq(access(path, F_OK), 0, "not marked complete");
	cr_expect(support_wait_until(hosts_clean, NULL, 10000), "hosts not clean: namespaces %d %d %d", netns_left(0),
		  netns_left(1), netns_left(2));
	free(meta);
	free(ev);
	free(t);
}

/* The orchestrator killed with SIGKILL during training, its ssh clients in groups of their own
 * that no terminal signal reaches: each dies with it (its parent-death signal), and every
 * agent, its connection ended, tears its share down and exits. */
Test(multihost_cli, kill9_of_the_orchestrator_ends_its_ssh_and_agents)
{
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: mhk\nstop: {time: 60s}\nworkers: 4\nlinkcheck: off\nnetwork: {cc: reno}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	pid_t pid = start_cli_in(args, true);
	cr_assert(support_wait_until(training_started, NULL, 90000), "the training did not start");
	int n_ssh = ssh_clients();
	cr_assert_eq(n_ssh, 3, "one ssh client per host: %d", n_ssh);
	int64_t t0 = support_now_ms();
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(support_wait_pid(pid, NULL, 10000), 0);
	bool no_ssh = support_wait_until(no_ssh_left, NULL, 10000);
	int64_t t_ssh = support_now_ms() - t0;
	bool clean = support_wait_until(hosts_clean, NULL, 30000);
	fprintf(stderr, "kill -9 -> no ssh client left: %lld ms; every host torn down, no agent left: %lld ms\n",
		(long long)t_ssh, (long long)(support_now_ms() - t0));
	cr_expect(no_ssh, "%d ssh clients left", ssh_clients());
	cr_expect(clean, "namespaces or agents left");
	for (size_t i = 0; i < 3; i++)
		cr_expect_eq(netns_left(i), 0, "host h%zu: namespaces left", i);
}

/* The link self-check across hosts: the hub on h0 with probe0 and probe3, probe1 on h1, probe2
 * on h2. Every direction of every link, local or across hosts, is judged by the same rule
 * (lib/link_verdict: the mean within max(0.5 ms, 2%) of the configured delay); the paths that
 * cross hosts are shaped with the underlay's delay taken off, and their one-way rows hold
 * through the clock mapping (the hosts' clocks are 1000 s and 2 s apart). */
Test(multihost_cli, linkcheck_across_hosts)
{
	char text[1024];
	snprintf(text, sizeof text,
		 "list:\n"
		 "  - {name: h0, address: %s, cores: 4}\n"
		 "  - {name: h1, address: %s, cores: 4}\n"
		 "  - {name: h2, address: %s, cores: 4}\n"
		 "placement: {probe0: h0, probe1: h1, probe2: h2, probe3: h0}\n",
		 hs.host[0].address, hs.host[1].address, hs.host[2].address);
	support_write_file(hosts_file, text);
	support_write_file(scen, "name: mh\nworkload: linkcheck\nlinkcheck: {probes: 300}\nworkers: 4\n"
				 "network: {cc: reno, default: {delay: 10ms}}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	int rc = run_cli(args);
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect_eq(rc, 0, "%s", t);
	/* 5 endpoints (4 probes, the hub); 14 ordered pairs cross hosts, each compensated once */
	cr_expect(strstr(t, "delay compensation: 14 path(s) across hosts"), "%s", t);
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/linkcheck.csv", run_dir);
	char *csv = support_read_file(path, &len);
	cr_assert(csv, "no linkcheck.csv: %s", t);
	int rows = 0, ok = 0;
	char *save = NULL;
	for (char *l = strtok_r(csv, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char node[32], dir[8], verdict[16];
		unsigned probes;
		double cfg, jit, cl, mean, sd, loss;
		if (!strncmp(l, "node,", 5))
			continue;
		/* node,direction,probes,cfg_delay_ms,cfg_jitter_ms,cfg_loss,rtt_mean_ms,rtt_sd_ms,loss,late_p99_ms,verdict */
		int f = sscanf(l, "%31[^,],%7[^,],%u,%lf,%lf,%lf,%lf,%lf,%lf,%*[^,],%15s", node, dir, &probes, &cfg, &jit, &cl,
			       &mean, &sd, &loss, verdict);
		if (f != 10)
			f = sscanf(l, "%31[^,],%7[^,],%u,%lf,%lf,%lf,%lf,%lf,%lf,,%15s", node, dir, &probes, &cfg, &jit, &cl,
				   &mean, &sd, &loss, verdict);
		cr_assert_eq(f, 10, "row: %s", l);
		rows++;
		bool cross = !strcmp(node, "probe1") || !strcmp(node, "probe2");
		fprintf(stderr, "%s %s %s: configured %.3f ms, measured %.3f ms (%+.3f), %s\n", cross ? "across" : "local ",
			node, dir, cfg, mean, mean - cfg, verdict);
		cr_expect_float_eq(cfg, strcmp(dir, "rtt") ? 10.0 : 20.0, 1e-9, "%s", l);
		cr_expect_eq(probes, 300u, "%s", l);
		ok += !strcmp(verdict, "ok");
	}
	cr_expect_eq(rows, 12, "4 probes x up, down, rtt:\n%s", t);
	cr_expect_eq(ok, 12, "every direction within tolerance, local or across hosts");
	free(csv);
	free(t);
}

/* meta.json's clock_KEY of host NAME (its "hosts" entry), as a double. */
static double meta_host(const char *meta, const char *name, const char *key)
{
	char want[64];
	snprintf(want, sizeof want, "\"name\": \"%s\"", name);
	const char *p = strstr(meta, want);
	cr_assert(p, "no host %s in meta.json", name);
	snprintf(want, sizeof want, "\"%s\": ", key);
	p = strstr(p, want);
	cr_assert(p, "no %s for %s", key, name);
	return strtod(p + strlen(want), NULL);
}

/* The clocks are measured again while the nodes run (every 10 s) and at the end: the estimate
 * meta.json records spans the run, its drift fitted; the offsets injected at the hosts'
 * creation are recovered within the bound it reports, and the rows mapped with the refreshed
 * estimates keep their order. */
Test(multihost_cli, clock_refreshed_during_the_run)
{
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: mh\nstop: {time: 12s}\nworkers: 4\nlinkcheck: off\nnetwork: {cc: reno}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	int rc = run_cli(args);
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect_eq(rc, 0, "%s", t);
	static const double injected_s[3] = { 0, 1000.25, -2.125 };
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/meta.json", run_dir);
	char *meta = support_read_file(path, &len);
	cr_assert(meta);
	for (int h = 0; h < 3; h++) {
		char name[16], want[64];   /* "h" + any int */
		snprintf(name, sizeof name, "h%d", h);
		/* 100 exchanges when reached, 20 at 10 s, 20 at the end: > 10 s spanned */
		snprintf(want, sizeof want, "host %s: clock offset ", name);
		const char *line = strstr(t, want);
		cr_assert(line, "no end-of-run clock line for %s: %s", name, t);
		unsigned nx = 0;
		double span = 0;
		const char *par = strstr(line, "drift ");
		cr_assert(par && (par = strchr(par, '(')) && sscanf(par, "(%u exchanges over %lf s)", &nx, &span) == 2,
			  "%.200s", line);
		cr_expect_geq(nx, 140u, "%s: %u exchanges", name, nx);
		cr_expect_geq(span, 10.0, "%s: %.1f s spanned", name, span);
		double off = meta_host(meta, name, "clock_offset_ns") / 1e9;
		double bound = meta_host(meta, name, "clock_bound_ns") / 1e9;
		double drift = meta_host(meta, name, "clock_drift_ppm");
		fprintf(stderr, "%s: offset error %+.1f us, bound %.1f us, drift %+.3f ppm (%u exchanges over %.1f s)\n",
			name, (off - injected_s[h]) * 1e6, bound * 1e6, drift, nx, span);
		cr_expect_gt(bound, 0.0);
		cr_expect_leq(fabs(off - injected_s[h]), bound, "%s: offset %.9f s, injected %.3f s, bound %.9f s", name, off,
			      injected_s[h], bound);
		/* the time namespaces share one oscillator: no true drift, so the fit finds
		 * next to none (a wrong fit over 10 s would show hundreds of ppm) */
		cr_expect_lt(fabs(drift), 20.0, "%s: drift %.3f ppm", name, drift);
	}
	/* worker3 (h2) stepped across the refreshes, its mapped t_s in order */
	snprintf(path, sizeof path, "%s/nodes/worker3.csv", run_dir);
	char *w = support_read_file(path, &len);
	cr_assert(w);
	double prev = -1, last = 0;
	int rows = 0;
	for (char *l = strchr(w, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
		double ts = strtod(l + 1, NULL);
		cr_expect_geq(ts, prev, "t_s in order: %.6f after %.6f", ts, prev);
		prev = last = ts;
		rows++;
	}
	cr_expect_gt(rows, 100);
	cr_expect(last > 10.0 && last < 13.0, "worker3's last row at %.3f s", last);
	free(w);
	free(meta);
	free(t);
}

/* progress.csv's rows (t_s, written by the orchestrator's loop every 0.1 s as it passes): the
 * last t_s, and the longest gap between two rows with t_s in [from, to]; -1 when none. */
static double progress_last_t(void)
{
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/progress.csv", run_dir);
	char *t = support_read_file(path, &len);
	double last = -1;
	for (char *l = t ? strchr(t, '\n') : NULL; l && l[1]; l = strchr(l + 1, '\n'))
		last = strtod(l + 1, NULL);
	free(t);
	return last;
}

static bool progress_at(void *arg)
{
	return progress_last_t() >= *(const double *)arg;
}

static double progress_max_gap(double from, double to, int *rows)
{
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/progress.csv", run_dir);
	char *t = support_read_file(path, &len);
	cr_assert(t, "%s", path);
	double prev = -1, gap = -1;
	*rows = 0;
	for (char *l = strchr(t, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
		double ts = strtod(l + 1, NULL);
		if (ts < from || ts > to)
			continue;
		if (prev >= 0 && ts - prev > gap)
			gap = ts - prev;
		prev = ts;
		(*rows)++;
	}
	free(t);
	return gap;
}

/* A host hung during the run (h2's agent stopped with SIGSTOP from about 2 s to 22 s) holds up
 * nothing of the others: the clock refresh at 10 s asks it and goes on (it used to wait up to
 * 5 s for the answer, every 10 s, and the loop with it: progress.csv and every host's streamed
 * rows stood still that long); it is said once that h2 does not answer, h2 is left out of the
 * refresh at 20 s, and once it runs again its late answer is dropped, the run ends as usual and
 * its clock is measured again at the end, within the bound of the truth. */
Test(multihost_cli, a_hung_host_holds_up_no_other_host)
{
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: mhg\nstop: {time: 30s}\nworkers: 4\nlinkcheck: off\nnetwork: {cc: reno}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	pid_t pid = start_cli_in(args, true);
	cr_assert(support_wait_until(training_started, NULL, 90000), "the training did not start");
	cr_assert(support_wait_until(worker3_streamed, NULL, 30000), "no rows from h2");
	pid_t agent = hostsim_agent_pid(&hs, 2, stalenet);
	cr_assert_gt(agent, 0, "no agent on h2");
	cr_assert_eq(kill(agent, SIGSTOP), 0, "SIGSTOP the agent of h2: %s", strerror(errno));
	double hung_from = progress_last_t(), until = 22.0;
	bool reached = support_wait_until(progress_at, &until, 60000);
	double hung_to = progress_last_t();
	kill(agent, SIGCONT);
	int st = 0;
	int waited = support_wait_pid(pid, &st, 90000);
	if (waited) {
		kill(-pid, SIGINT);
		kill(-pid, SIGINT);
		support_wait_pid(pid, NULL, 30000);
	}
	char *t = output();
	fprintf(stderr, "%s", t);
	int rows = 0;
	double gap = progress_max_gap(hung_from, hung_to, &rows);
	fprintf(stderr, "h2 hung from %.3f s to %.3f s: %d progress rows, longest gap %.3f s\n", hung_from, hung_to, rows,
		gap);
	cr_assert_geq(hung_from, 0.0, "no progress row before h2 hung");
	cr_assert_lt(hung_from, 9.0, "h2 hung after the first refresh (%.3f s): no test", hung_from);
	cr_assert(reached, "progress.csv did not reach %.0f s", until);
	cr_assert_eq(waited, 0, "stalenet did not end");
	cr_expect_gt(rows, 100, "%d rows over %.1f s", rows, hung_to - hung_from);
	cr_expect_leq(gap, 1.5, "the loop stood still %.3f s while h2 hung", gap);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit 0: %s", t);
	cr_expect_eq(count(t, "host h2: clock refresh: no answer within 5000 ms"), 1, "said once: %s", t);
	cr_expect_eq(count(t, "clock refresh"), 1, "%s", t);
	cr_expect_null(strstr(t, "lost"), "%s", t);
	/* the late answer dropped, the clock measured again at the end: h2's estimate is right */
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/meta.json", run_dir);
	char *meta = support_read_file(path, &len);
	cr_assert(meta);
	double off = meta_host(meta, "h2", "clock_offset_ns") / 1e9, bound = meta_host(meta, "h2", "clock_bound_ns") / 1e9;
	fprintf(stderr, "h2: offset error %+.1f us, bound %.1f us\n", (off + 2.125) * 1e6, bound * 1e6);
	cr_expect_gt(bound, 0.0);
	cr_expect_leq(fabs(off + 2.125), bound, "h2: offset %.9f s, injected -2.125 s, bound %.9f s", off, bound);
	cr_expect(strstr(t, "host h2: clock offset "), "the end-of-run refresh of h2: %s", t);
	free(meta);
	free(t);
}

/* Rows of run_dir/rel whose t_s lies in [from, to). */
static int rows_between(const char *rel, double from, double to)
{
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/%s", run_dir, rel);
	char *t = support_read_file(path, &len);
	cr_assert(t, "%s", path);
	int n = 0;
	for (char *l = strchr(t, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
		double ts = strtod(l + 1, NULL);
		n += ts >= from && ts < to;
	}
	free(t);
	return n;
}

/* A run whose links change at 3 s, from 5 ms to 50 ms each way, by `network.timeline` or by a
 * `network.trace` row: every worker, on whichever host, steps far slower after the change, and
 * events.csv says when it was applied. */
static void links_change_at_3s(const char *network, const char *event)
{
	char text[1024];
	write_hosts(hs.host[1].address, "h2");
	snprintf(text, sizeof text, "name: mh\nstop: {time: 6s}\nworkers: 4\nlinkcheck: off\n%s", network);
	support_write_file(scen, text);
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	int rc = run_cli(args);
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect_eq(rc, 0, "%s", t);
	cr_expect_null(strstr(t, "reshaped"), "every change applied: %s", t);
	for (int w = 0; w < 4; w++) {
		char rel[64];
		snprintf(rel, sizeof rel, "nodes/worker%d.csv", w);
		/* a step is at least 4 one-way delays: <= 50 a second at 5 ms, <= 5 at 50 ms */
		int before = rows_between(rel, 1.0, 3.0), after = rows_between(rel, 3.5, 5.5);
		fprintf(stderr, "%s: %d steps in [1 s, 3 s), %d in [3.5 s, 5.5 s)\n", rel, before, after);
		cr_expect_gt(before, 20, "%s: %d steps before the change", rel, before);
		cr_expect_leq(after, 11, "%s: %d steps after the change", rel, after);
		cr_expect_gt(before, 3 * after, "%s", rel);
	}
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/events.csv", run_dir);
	char *ev = support_read_file(path, &len);
	cr_assert(ev);
	cr_expect(strstr(ev, event), "%s", ev);
	cr_expect_null(strstr(ev, "FAILED"), "%s", ev);
	fprintf(stderr, "%s", ev);
	free(ev);
	free(t);
}

Test(multihost_cli, timeline_across_hosts)
{
	links_change_at_3s("network: {cc: reno, default: {delay: 5ms}, timeline: [{at: 3s, delay: 50ms}]}\n",
			   ",link_change,worker3,");
}

Test(multihost_cli, trace_across_hosts)
{
	char tr[500], net[700];
	snprintf(tr, sizeof tr, "%s/trace.csv", hs.dir);
	support_write_file(tr, "t_s,delay,loss,rate\n0,5ms,0,\n3,50ms,,\n");
	snprintf(net, sizeof net, "network: {cc: reno, default: {delay: 5ms}, trace: %s}\n", tr);
	links_change_at_3s(net, ",trace_step,all,delay 50.000ms");
}

/* Planned churn across hosts, as on one host: worker2 (h1) joins at 1.5 s, worker3 (h2) is
 * killed at 2 s and restarted at 3.5 s, worker1 (h1) leaves at 3 s; the run completes. */
Test(multihost_cli, churn_across_hosts)
{
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: mh\nstop: {time: 6s}\nworkers: 4\nlinkcheck: off\nnetwork: {cc: reno}\n"
				 "consistency: {barrier: asp}\n"
				 "stragglers:\n"
				 "  - {nodes: worker2, join: {at: 1.5s}}\n"
				 "  - {nodes: worker3, crash: {at: 2s, restart: 3.5s}}\n"
				 "  - {nodes: worker1, leave: {at: 3s}}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	int rc = run_cli(args);
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect_eq(rc, 0, "%s", t);
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/events.csv", run_dir);
	char *ev = support_read_file(path, &len);
	cr_assert(ev);
	fprintf(stderr, "%s", ev);
	cr_expect(strstr(ev, ",join,worker2,"), "%s", ev);
	cr_expect(strstr(ev, ",crash,worker3,SIGKILL"), "%s", ev);
	cr_expect(strstr(ev, ",restart,worker3,"), "%s", ev);
	cr_expect(strstr(ev, ",leave,worker1,"), "%s", ev);
	cr_expect_null(strstr(ev, "node_failed"), "%s", ev);
	/* worker2 stepped only after it joined; worker1 not after it left; worker3 before its crash
	 * and after its restart, not in between */
	cr_expect_eq(rows_between("nodes/worker2.csv", 0, 1.5), 0);
	cr_expect_gt(rows_between("nodes/worker2.csv", 1.5, 6.5), 10);
	cr_expect_gt(rows_between("nodes/worker1.csv", 0, 3.0), 10);
	cr_expect_eq(rows_between("nodes/worker1.csv", 3.2, 10), 0);
	cr_expect_gt(rows_between("nodes/worker3.csv", 0, 2.0), 10);
	cr_expect_eq(rows_between("nodes/worker3.csv", 2.1, 3.5), 0);
	cr_expect_gt(rows_between("nodes/worker3.csv", 3.5, 6.5), 10);
	free(ev);
	free(t);
}

/* The cgroup of worker3 on its host (cgroup v2: ROOT/P/Pworker3; v1: ROOT/cpu/P/Pworker3)
 * whose CPU quota is 5 ms per 100 ms and which holds a process; its path into arg. */
static bool worker3_limited(void *arg)
{
	static const char *roots[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/cpu" };
	char *found = arg;
	for (int r = 0; r < 2; r++) {
		DIR *d = opendir(roots[r]);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			char path[600], file[700];
			size_t len = 0;
			if (strncmp(e->d_name, "sn", 2))
				continue;
			snprintf(path, sizeof path, "%s/%s/%sworker3", roots[r], e->d_name, e->d_name);
			snprintf(file, sizeof file, "%s/%s", path, r ? "cpu.cfs_quota_us" : "cpu.max");
			char *q = support_read_file(file, &len);
			snprintf(file, sizeof file, "%s/%s", path, r ? "tasks" : "cgroup.procs");
			char *tasks = q ? support_read_file(file, &len) : NULL;
			bool ok = q && tasks && len > 0 && (r ? atol(q) == 5000 : !strncmp(q, "5000 100000", 11));
			free(q);
			free(tasks);
			if (ok) {
				snprintf(found, 600, "%s", path);
				closedir(d);
				return true;
			}
		}
		if (d)
			closedir(d);
	}
	return false;
}

/* resources across hosts: worker3 (h2) limited to 5% of a core by a cgroup its host's agent
 * made, holding the node while it trains, removed at the end. */
Test(multihost_cli, resources_across_hosts)
{
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: mh\nstop: {time: 6s}\nworkers: 4\nlinkcheck: off\nnetwork: {cc: reno}\n"
				 "resources:\n  - {nodes: worker3, cpu: 0.05}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	pid_t pid = start_cli(args);
	char cg[600] = "";
	cr_expect(support_wait_until(worker3_limited, cg, 60000), "no limited cgroup of worker3 holding it");
	int st = 0;
	cr_assert_eq(support_wait_pid(pid, &st, 90000), 0, "stalenet did not finish");
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", t);
	fprintf(stderr, "worker3's cgroup: %s\n", cg);
	cr_expect(cg[0] && access(cg, F_OK) != 0, "%s removed after the run", cg);
	/* the limited worker trained (under BSP it sets every worker's pace) */
	int w3 = rows_between("nodes/worker3.csv", 0, 10), w0 = rows_between("nodes/worker0.csv", 0, 10);
	fprintf(stderr, "steps: worker0 %d, worker3 (5%% of a core) %d\n", w0, w3);
	cr_expect_gt(w3, 0);
	free(t);
}

/* A delay across hosts smaller than the underlay's own (3 us each way here, the underlay about
 * 9 us one way) cannot be emulated: refused with the path, the figures and why, nothing run. */
Test(multihost_cli, delay_below_the_underlay_refused)
{
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: mh\nstop: {time: 5s}\nworkers: 4\nlinkcheck: off\n"
				 "network: {cc: reno, default: {delay: 3us}}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	int rc = run_cli(args);
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect_eq(rc, 1, "%s", t);
	cr_expect(strstr(t, "crosses hosts") && strstr(t, "its configured delay 6 us") &&
		  strstr(t, "is less than the underlay's own one-way delay"), "%s", t);
	cr_expect_null(strstr(t, "nodes ready"), "nothing launched: %s", t);
	for (size_t i = 0; i < 3; i++)
		cr_expect_eq(netns_left(i), 0, "host %zu: torn down", i);
	free(t);
}

/* A node killed by its host's kernel at its memory limit is named as on one host: worker1 (h1;
 * 2 workers, so half the data set, ~24 MB) cannot load its share under 16 MiB; the run stops
 * (on_node_failure: stop). */
Test(multihost_cli, memory_limit_kill_named_across_hosts)
{
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: mh\nstop: {time: 20s}\nworkers: 2\nlinkcheck: off\nnetwork: {cc: reno}\n"
				 "resources:\n  - {nodes: worker1, memory: 16MiB}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	int rc = run_cli(args);
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect_eq(rc, 1, "%s", t);
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/events.csv", run_dir);
	char *ev = support_read_file(path, &len);
	cr_assert(ev, "%s", t);
	fprintf(stderr, "%s", ev);
	cr_expect(strstr(ev, ",node_failed,worker1,oom_killed: memory limit 16MiB reached; host h1: exit 9 oom_killed"),
		  "%s", ev);
	free(ev);
	free(t);
}

/* Whether any regular file under dir (recursively) holds needle. */
static bool tree_holds(const char *dir, const char *needle)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	bool found = false;
	while (d && !found && (e = readdir(d))) {
		char path[1200];
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (e->d_type == DT_DIR) {
			found = tree_holds(path, needle);
		} else if (e->d_type == DT_REG) {
			size_t len;
			char *t = support_read_file(path, &len);
			found = t && memmem(t, len, needle, strlen(needle));
			if (found)
				cr_log_error("%s holds %s", path, needle);
			free(t);
		}
	}
	if (d)
		closedir(d);
	return found;
}

/* A hostile agent host: h2's agent (the real one, its output passed through a filter) also
 * sends rows for files it may not write just before each "fetched": the orchestrator's own
 * files, another host's node trace, paths out of the run directory. Every one is refused by
 * name, nothing of it lands anywhere, and the run completes with its own files intact. */
Test(multihost_cli, a_hostile_host_writes_only_its_own_files)
{
	char wrapper[600], text[3 * PATH_MAX];
	write_hosts(hs.host[1].address, "h2");
	snprintf(wrapper, sizeof wrapper, "%s/hostile-stalenet", hs.dir);
	snprintf(text, sizeof text,
		 "#!/bin/sh\n"
		 "[ \"$(hostname)\" = h2 ] || exec '%s' \"$@\"\n"
		 "'%s' \"$@\" | while IFS= read -r l; do\n"
		 "  if [ \"$l\" = fetched ]; then\n"
		 "    for f in scenario.yaml summary.csv events.csv links.csv meta.json nodes/worker0.csv \\\n"
		 "             nodes/../progress.csv ../escaped.csv '%s/escaped-abs.csv' logs/server0.log; do\n"
		 "      printf 'file %%s\\nl HACKED,%%s\\n' \"$f\" \"$f\"\n"
		 "    done\n"
		 /* whole files: names not its own, a lying length, a frame cut short, bad base64 */
		 "    for f in meta.json summary.csv nodes/worker0.params nodes/../fleet.sqlite nodes/worker3 fleet.sqlite; do\n"
		 "      printf 'whole %%s\\nb SEFDS0VE\\nend 6\\n' \"$f\"\n"
		 "    done\n"
		 "    printf 'whole nodes/worker3.lying\\nb SEFDS0VE\\nend 7\\n'\n"
		 "    printf 'whole nodes/worker3.cut\\nb SEFDS0VE\\n'\n"
		 "    printf 'whole nodes/worker3.bad\\nb SEFDS0V=\\nend 6\\n'\n"
		 "  fi\n"
		 "  printf '%%s\\n' \"$l\"\n"
		 "done\n", stalenet, stalenet, hs.dir);
	support_write_file(wrapper, text);
	cr_assert_eq(chmod(wrapper, 0755), 0);
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--agent-path", wrapper, "--out", run_dir, "--quiet", NULL };
	int rc = run_cli(args);
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect_eq(rc, 0, "the run completes: %s", t);
	static const char *const refused[] = { "scenario.yaml", "summary.csv", "events.csv", "links.csv", "meta.json",
					       "nodes/worker0.csv", "nodes/../progress.csv", "../escaped.csv",
					       "logs/server0.log" };
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		char want[200];
		snprintf(want, sizeof want, "stalenet: host h2: file %s refused", refused[i]);
		cr_expect(strstr(t, want), "missing '%s'", want);
	}
	static const char *const whole_refused[] = {
		"file meta.json refused", "file summary.csv refused", "file nodes/worker0.params refused",
		"file nodes/../fleet.sqlite refused", "file nodes/worker3 refused",
		"file fleet.sqlite refused", /* h2 holds no registry */
		"file nodes/worker3.lying refused: its length is not what came after 6 bytes",
		"file nodes/worker3.cut refused: cut short", "file nodes/worker3.bad refused: a malformed line after 0 bytes",
	};
	for (size_t i = 0; i < sizeof whole_refused / sizeof whole_refused[0]; i++) {
		char want[200];
		snprintf(want, sizeof want, "stalenet: host h2: %s", whole_refused[i]);
		cr_expect(strstr(t, want), "missing '%s'", want);
	}
	static const char *const absent[] = { "nodes/worker3.lying", "nodes/worker3.cut", "nodes/worker3.bad",
					      "nodes/worker0.params", "nodes/worker3", "fleet.sqlite" };
	for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
		char p[700];
		snprintf(p, sizeof p, "%s/%s", run_dir, absent[i]);
		cr_expect_neq(access(p, F_OK), 0, "%s written", p);
	}
	cr_expect(!tree_holds(run_dir, "HACKED"), "a refused whole file landed in the run directory");
	cr_expect(!count(t, "host h0: file") && !count(t, "host h1: file"), "a well-behaved host refused: %s", t);
	cr_expect(!tree_holds(run_dir, "HACKED"), "a refused row landed in the run directory");
	char p[700];
	snprintf(p, sizeof p, "%s/escaped.csv", hs.dir);
	cr_expect_neq(access(p, F_OK), 0, "%s written", p);
	snprintf(p, sizeof p, "%s/escaped-abs.csv", hs.dir);
	cr_expect_neq(access(p, F_OK), 0, "%s written", p);
	/* h2's own files came through */
	int rows = 0;
	char *hd = head_of("nodes/worker3.csv", &rows);
	cr_assert(hd, "nodes/worker3.csv missing");
	cr_expect_str_eq(hd, TRACE_HEADER_NODE);
	cr_expect_gt(rows, 10, "worker3 stepped (%d rows)", rows);
	free(hd);
	free(t);
}

/* dir/rel (the run directory) is byte for byte the file at ref. */
static void expect_same_bytes(const char *rel, const char *ref)
{
	char path[700];
	size_t a_len = 0, b_len = 0;
	snprintf(path, sizeof path, "%s/%s", run_dir, rel);
	char *a = support_read_file(path, &a_len), *b = support_read_file(ref, &b_len);
	cr_assert(b, "%s: the host's copy was not taken", ref);
	cr_expect(a, "%s missing", path);
	cr_expect(a && a_len == b_len && !memcmp(a, b, a_len), "%s: %zu bytes, the host's %zu bytes, not the same", rel,
		  a_len, b_len);
	free(a);
	free(b);
}

/* Entries of the run directory's sub whose name starts with '.' (a replacement's temporary). */
static int hidden_in(const char *sub)
{
	char path[700];
	snprintf(path, sizeof path, "%s/%s", run_dir, sub);
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		n += e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

/* A host that hangs after it reported its nodes' ends: h2's agent input passes through a filter
 * that swallows everything from "fetch" on (the agent never sees the fetch nor the teardown, as
 * if it hung right after its nodes' ends). The fetch of h2 is bounded in all (60 s), h2 is then
 * lost (named with the cleanup hint) and the teardown does not wait for it: the orchestrator
 * exits well before 90 s after the stop row, the run failed (exit 1), h0 and h1 fetched and
 * clean; h2's agent tears down once its input ends. It used to wait 60 s, then 120 s more for
 * h2's teardown. */
Test(multihost_cli, a_host_hung_after_its_nodes_ends_is_lost_after_the_fetch_bound)
{
	char wrapper[600], text[3 * PATH_MAX];
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: mhf\nstop: {time: 3s}\nworkers: 4\nlinkcheck: off\nnetwork: {cc: reno}\n");
	snprintf(wrapper, sizeof wrapper, "%s/fetchhang-stalenet", hs.dir);
	snprintf(text, sizeof text,
		 "#!/bin/sh\n"
		 "[ \"$(hostname)\" = h2 ] || exec '%s' \"$@\"\n"
		 "while IFS= read -r l; do\n"
		 "  if [ \"$l\" = fetch ]; then cat > /dev/null; break; fi\n"
		 "  printf '%%s\\n' \"$l\"\n"
		 "done | '%s' \"$@\"\n", stalenet, stalenet);
	support_write_file(wrapper, text);
	cr_assert_eq(chmod(wrapper, 0755), 0);
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--agent-path", wrapper, "--out", run_dir, "--quiet", NULL };
	pid_t pid = start_cli(args);
	cr_assert(support_wait_until(time_stop_row_written, NULL, 90000), "no stop at the stop time");
	int64_t t0 = support_now_ms();
	int st = 0;
	int waited = support_wait_pid(pid, &st, 150000);
	int64_t took = support_now_ms() - t0;
	int left0 = netns_left(0), left1 = netns_left(1);
	char *t = output();
	fprintf(stderr, "%s", t);
	fprintf(stderr, "h2 hung after its nodes' ends -> exited %lld ms after the stop row\n", (long long)took);
	cr_assert_eq(waited, 0, "stalenet did not end 150 s after the stop row");
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit 1 (failed): %s", t);
	cr_expect_geq(took, 60000, "h2 lost before its fetch's bound (%lld ms)", (long long)took);
	cr_expect_lt(took, 90000, "exit %lld ms after the stop row (the teardown waited for h2?)", (long long)took);
	cr_expect(strstr(t, "host h2: its run files not fetched within 60 s: host lost"), "%s", t);
	cr_expect(strstr(t, "stalenet cleanup --hosts"), "%s", t);
	cr_expect_null(strstr(t, "host h2: teardown"), "the teardown waited for h2: %s", t);
	cr_expect_null(strstr(t, "host h0: its run files"), "%s", t);
	cr_expect_null(strstr(t, "host h1: its run files"), "%s", t);
	cr_expect_eq(left0, 0, "host h0: %d namespaces left when the orchestrator exited", left0);
	cr_expect_eq(left1, 0, "host h1: %d namespaces left when the orchestrator exited", left1);
	int rows0 = 0;
	free(head_of("nodes/worker0.csv", &rows0));
	cr_expect_gt(rows0, 0, "no rows of worker0 (h0)");
	/* h2's agent, its input ended with the connection, tears its share down */
	cr_expect(support_wait_until(hosts_clean, NULL, 30000), "hosts not clean: namespaces %d %d %d", netns_left(0),
		  netns_left(1), netns_left(2));
	cr_expect(support_wait_until(no_ssh_left, NULL, 5000), "%d ssh clients left", ssh_clients());
	free(t);
}

/* Files of h2's node that are no rows appended to: just before each "fetch" reaches h2's agent
 * (its input passed through a filter), a file of random bytes (NULs, no newline at the end)
 * appears as worker3's; its .conf is replaced by a shorter file (another inode), its log
 * rewritten in place longer with other first bytes (same inode, grown), its trace cut in
 * place to its first three lines (same inode, same first bytes, shrunk). The run directory
 * ends with each byte for byte as the host has it; a stale offset would have kept the old
 * .conf and trace and appended the log's tail. */
Test(multihost_cli, binary_and_rewritten_files_come_back_whole)
{
	static const char *const files[] = { "nodes/worker3.blob", "nodes/worker3.conf", "logs/worker3.log",
					     "nodes/worker3.csv" };
	char wrapper[600], text[3 * PATH_MAX], refs[400];
	write_hosts(hs.host[1].address, "h2");
	snprintf(wrapper, sizeof wrapper, "%s/files-stalenet", hs.dir);
	snprintf(refs, sizeof refs, "%s/refs", hs.dir);
	cr_assert_eq(mkdir(refs, 0700), 0);
	snprintf(text, sizeof text,
		 "#!/bin/sh\n"
		 "[ \"$(hostname)\" = h2 ] || exec '%s' \"$@\"\n"
		 "while IFS= read -r l; do\n"
		 "  if [ \"$l\" = fetch ]; then\n"
		 "    for c in /run/stalenet/agent-*/run/nodes/worker3.conf; do\n"
		 "      [ -f \"$c\" ] || continue\n"
		 "      d=${c%%/nodes/worker3.conf}\n"
		 "      head -c 200003 /dev/urandom > \"$d/nodes/worker3.blob\"\n"
		 "      printf 'rewritten=1\\n' > \"$d/nodes/.w3\" && mv \"$d/nodes/.w3\" \"$c\"\n"
		 "      { printf 'replaced\\n'; cat \"$d/logs/worker3.log\"; } > \"$d/logs/.w3\"\n"
		 "      cat \"$d/logs/.w3\" > \"$d/logs/worker3.log\" && rm \"$d/logs/.w3\"\n"
		 "      head -n 3 \"$d/nodes/worker3.csv\" > \"$d/nodes/.w3\"\n"
		 "      cat \"$d/nodes/.w3\" > \"$d/nodes/worker3.csv\" && rm \"$d/nodes/.w3\"\n"
		 "      mkdir -p '%s/nodes' '%s/logs'\n"
		 "      for f in nodes/worker3.blob nodes/worker3.conf logs/worker3.log nodes/worker3.csv; do\n"
		 "        cp \"$d/$f\" '%s'/\"$f\"\n"
		 "      done\n"
		 "    done\n"
		 "  fi\n"
		 "  printf '%%s\\n' \"$l\"\n"
		 "done | '%s' \"$@\"\n", stalenet, refs, refs, refs, stalenet);
	support_write_file(wrapper, text);
	cr_assert_eq(chmod(wrapper, 0755), 0);
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--agent-path", wrapper, "--out", run_dir, "--quiet", NULL };
	int rc = run_cli(args);
	char *t = output();
	fprintf(stderr, "%s", t);
	cr_expect_eq(rc, 0, "the run completes: %s", t);
	cr_expect(!count(t, "refused"), "nothing refused: %s", t);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		char ref[700];
		snprintf(ref, sizeof ref, "%s/%s", refs, files[i]);
		expect_same_bytes(files[i], ref);
	}
	char path[700];
	size_t len = 0;
	snprintf(path, sizeof path, "%s/nodes/worker3.conf", run_dir);
	char *conf = support_read_file(path, &len);
	cr_assert(conf, "%s missing", path);
	cr_expect_str_eq(conf, "rewritten=1\n", "the rewritten .conf arrives as its final content");
	free(conf);
	int rows = 0;
	char *hd = head_of("nodes/worker3.csv", &rows);
	cr_assert(hd, "nodes/worker3.csv missing");
	cr_expect_str_eq(hd, TRACE_HEADER_NODE);
	cr_expect_eq(rows, 2, "the trace cut to its header and two rows");
	free(hd);
	cr_expect_eq(hidden_in("nodes") + hidden_in("logs") + hidden_in("."), 0, "a temporary file left behind");
	free(t);
}

/* Every file named like one sent whole (hostfiles_whole_allowed's shapes: *.sqlite*, nodes/
 * NAME.SUFFIX other than .csv and .conf) that the nodes of host i wrote in its agent's run
 * directory is byte for byte in ours. Returns how many were compared; adds the fleet
 * registry's stores seen to *stores. */
static int compare_host_files(size_t i, int *stores)
{
	static const char *const subs[] = { "", "nodes/" };
	char base[200], dir[600];
	int compared = 0;
	snprintf(base, sizeof base, "/proc/%d/root/run/stalenet", (int)hs.host[i].sshd_pid);
	DIR *r = opendir(base);
	struct dirent *a;
	while (r && (a = readdir(r))) {
		if (strncmp(a->d_name, "agent-", 6))
			continue;
		for (size_t k = 0; k < 2; k++) {
			snprintf(dir, sizeof dir, "%s/%s/run/%s", base, a->d_name, subs[k]);
			DIR *d = opendir(dir);
			struct dirent *e;
			while (d && (e = readdir(d))) {
				const char *dot = strchr(e->d_name, '.');
				bool whole = k ? dot && dot != e->d_name && strcmp(dot, ".csv") && strcmp(dot, ".conf")
					       : !strncmp(e->d_name, "fleet.sqlite", 12);
				if (e->d_type != DT_REG || !whole)
					continue;
				char ref[900], rel[300];
				snprintf(ref, sizeof ref, "%s%s", dir, e->d_name);
				snprintf(rel, sizeof rel, "%s%s", subs[k], e->d_name);
				struct stat sb;
				cr_log_info("host h%zu: %s (%lld bytes)", i, rel, stat(ref, &sb) ? -1LL : (long long)sb.st_size);
				expect_same_bytes(rel, ref);
				compared++;
				*stores += strstr(e->d_name, ".sqlite") != NULL;
			}
			if (d)
				closedir(d);
		}
	}
	if (r)
		closedir(r);
	return compared;
}

/* The names of dir's files (top level, nodes/, logs/), sorted, one a line, into out. */
static void list_files(const char *dir, char *out, size_t len)
{
	static const char *const subs[] = { "", "nodes/", "logs/" };
	char names[256][80];
	size_t n = 0;
	for (size_t k = 0; k < 3; k++) {
		char path[700];
		snprintf(path, sizeof path, "%s/%s", dir, subs[k]);
		DIR *d = opendir(path);
		struct dirent *e;
		while (d && (e = readdir(d)))
			if (e->d_type == DT_REG && n < 256)
				snprintf(names[n++], sizeof names[0], "%s%.70s", subs[k], e->d_name);
		if (d)
			closedir(d);
	}
	qsort(names, n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
	out[0] = 0;
	for (size_t i = 0; i < n; i++)
		snprintf(out + strlen(out), len - strlen(out), "%s\n", names[i]);
}

/* The fleet engines' SQLite stores (the registry's fleet.sqlite, each device's peers store)
 * written on other hosts are in the run directory byte for byte as each host has them: a
 * comparison of every one with the agents' own copies (left on the test hosts). Every stored
 * version is rebuilt from the fetched store (recover.csv, as on one host), and the run
 * directory holds the same files as a run of the same scenario on one host. */
Test(multihost_cli, fleet_stores_come_back_byte_for_byte)
{
	write_hosts(hs.host[1].address, "h2");
	support_write_file(scen, "name: fl\nseed: 3\nstop: {time: 5s}\nworkers: 4\ntopology: {kind: fleet}\n"
				 "fleet: {strategy: delta, sync: 20 steps, snapshot_every: 5, registry: peers, peers: 2}\n"
				 "linkcheck: off\nnetwork: {cc: reno}\n"
				 /* paced (about 40 steps/s): the stores stay within the test hosts' 16 MB /run */
				 "stragglers: [{nodes: workers, compute: {delay: {dist: constant, value: 20ms}}}]\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", NULL };
	int rc = run_cli(args);
	char *t = output();
	fprintf(stderr, "%s", t);
	if (rc) {
		char p[700];
		snprintf(p, sizeof p, "%s/logs/device0.log", run_dir);
		size_t l;
		char *lg = support_read_file(p, &l);
		cr_log_error("device0.log: %s", lg ? lg : "(none)");
		free(lg);
	}
	cr_expect_eq(rc, 0, "the run completes: %s", t);
	cr_expect(!count(t, "refused"), "nothing refused: %s", t);
	int compared = 0, stores = 0;
	for (size_t i = 0; i < 3; i++)
		compared += compare_host_files(i, &stores);
	cr_expect_geq(stores, 2, "the registry's store and a device's peers store at least (%d files compared)", compared);
	cr_expect(strstr(t, " versions verified, rebuild mean") && !strstr(t, "did not verify"),
		  "every stored version rebuilt from the fetched store: %s", t);
	cr_expect_eq(hidden_in("nodes") + hidden_in("."), 0, "a temporary file left behind");
	free(t);

	char one_dir[500], across[8192], one[8192];
	snprintf(one_dir, sizeof one_dir, "%s/one", hs.dir);
	const char *args1[] = { "run", scen, "--out", one_dir, "--quiet", NULL };
	rc = run_cli(args1);
	t = output();
	cr_expect_eq(rc, 0, "the run on one host completes: %s", t);
	free(t);
	/* but for the orchestrator's journal (across hosts each host's agent keeps its own), its
	 * links.csv and the one host's emulator log (not written across hosts) */
	list_files(run_dir, across, sizeof across);
	list_files(one_dir, one, sizeof one);
	for (const char *x = "journal\n\0links.csv\n\0logs/linkd.log\n\0"; *x; x += strlen(x) + 1) {
		char *at = strstr(one, x);
		if (at)
			memmove(at, at + strlen(x), strlen(at + strlen(x)) + 1);
	}
	cr_expect_str_eq(across, one, "the files of the run across hosts and of the run on one host differ:\n"
			 "across hosts:\n%s\none host:\n%s", across, one);
}
