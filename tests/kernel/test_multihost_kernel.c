/* The kernel backend across hosts: `stalenet run --hosts --backend kernel` with the link
 * self-check on two hosts made here (tests/support/hostsim), the paths that cross hosts shaped
 * with the underlay's delay taken off by per-peer netem classes on each sender's egress
 * (link_shaper_apply_peers). Needs sch_netem: runs in the netem VM (make check-kernel) or where
 * the kernel has it; root and openssh-server; skips elsewhere (fails under
 * STALENET_TESTS_MUST_RUN=1). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/netns.h"
#include "netem/link_shaper.h"
#include "tests/support/files.h"
#include "tests/support/fixture.h"
#include "tests/support/hostsim.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"

static struct hostsim hs;
static char stalenet[PATH_MAX + 16], scen[400], hosts_file[400], out_file[400], run_dir[400];

static double time_scale(void)
{
	const char *v = getenv("STALENET_TIME_SCALE");
	double x = v ? atof(v) : 1.0;
	return x >= 1.0 ? x : 1.0;
}

static void setup(void)
{
	char exe[PATH_MAX], why[512];
	support_require_netns("hsprobe-kmh");
	if (link_shaper_probe_kernel() != 1)
		support_skip_or_fail("kernel has no sch_netem (run make check-kernel)");
	if (access("/usr/sbin/sshd", X_OK))
		support_skip_or_fail("no /usr/sbin/sshd (apt-get install openssh-server)");
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	cr_assert_gt(n, 0);
	exe[n] = 0;
	for (int i = 0; i < 3; i++)
		*strrchr(exe, '/') = 0;
	snprintf(stalenet, sizeof stalenet, "%s/stalenet", exe);
	cr_assert_eq(access(stalenet, X_OK), 0, "%s: build it first", stalenet);
	/* two hosts: under the VM's emulated CPU three ssh handshakes at once outlast the
	 * orchestrator's 10 s connection timeout */
	static const int64_t offsets[2] = { 0, 0 };
	if (hostsim_start(&hs, "k", 2, offsets, why, sizeof why))
		support_skip_or_fail("hosts: %s", why);
	snprintf(scen, sizeof scen, "%s/s.yaml", hs.dir);
	snprintf(hosts_file, sizeof hosts_file, "%s/hosts.yaml", hs.dir);
	snprintf(out_file, sizeof out_file, "%s/out.txt", hs.dir);
	snprintf(run_dir, sizeof run_dir, "%s/runs", hs.dir);
}

static void teardown(void)
{
	hostsim_stop(&hs);
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
	cr_assert_eq(support_wait_pid(pid, &st, 400000), 0, "stalenet did not finish");
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The hub on h0 with probe0, probe1 on h1, 10 ms links: every direction
 * measured, local or across hosts, within the same band (the verdict at time scale 1; under the
 * VM's emulated CPU the band of tests/netns/test_linkd_fidelity, 0.5 x scale below to 2 x scale
 * above). */
Test(multihost_kernel, linkcheck_across_hosts_compensated, .init = setup, .fini = teardown, .timeout = 480)
{
	char text[1024];
	double scale = time_scale();
	snprintf(text, sizeof text,
		 "list:\n"
		 "  - {name: h0, address: %s, cores: 4}\n"
		 "  - {name: h1, address: %s, cores: 4}\n"
		 "placement: {probe0: h0, probe1: h1}\n",
		 hs.host[0].address, hs.host[1].address);
	support_write_file(hosts_file, text);
	support_write_file(scen, "name: mh\nworkload: linkcheck\nlinkcheck: {probes: 100}\nworkers: 2\n"
				 "network: {cc: reno, default: {delay: 10ms}}\n");
	const char *args[] = { "run", scen, "--hosts", hosts_file, "--identity", hs.identity, "--known-hosts",
			       hs.known_hosts, "--out", run_dir, "--quiet", "--backend", "kernel", NULL };
	int rc = run_cli(args);
	size_t len;
	char *t = support_read_file(out_file, &len);
	cr_assert(t);
	fprintf(stderr, "%s", t);
	cr_assert_eq(rc, 0, "%s", t);
	/* 3 endpoints (2 probes, the hub); 4 ordered pairs cross hosts (probe1 with the hub and
	 * probe0), each compensated once: every "shapepeers" answered ok by the kernel backend, or
	 * the run would have stopped */
	cr_expect(strstr(t, "delay compensation: 4 path(s) across hosts"), "%s", t);
	char path[600];
	snprintf(path, sizeof path, "%s/meta.json", run_dir);
	char *meta = support_read_file(path, &len);
	cr_assert(meta);
	cr_expect(strstr(meta, "\"backend\": \"kernel\""), "%s", meta);
	free(meta);
	snprintf(path, sizeof path, "%s/linkcheck.csv", run_dir);
	char *csv = support_read_file(path, &len);
	cr_assert(csv, "no linkcheck.csv: %s", t);
	/* a one-way time across hosts is only as exact as the two clocks: the run reports each
	 * host's offset bound ("clock offset X s +- B s"), and under the VM's emulated CPU it can
	 * exceed the band (a 10 ms ssh round trip gave +- 14.6 ms once); the round trip needs
	 * no clock */
	double clock_ms = 0;
	for (const char *c = strstr(t, "clock offset "); c; c = strstr(c + 1, "clock offset ")) {
		double off, bound;
		if (sscanf(c, "clock offset %lf s +- %lf s", &off, &bound) == 2 && bound * 1e3 > clock_ms)
			clock_ms = bound * 1e3;
	}
	int rows = 0, ok = 0;
	char *save = NULL;
	for (char *l = strtok_r(csv, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char node[32], dir[8], verdict[16];
		unsigned probes;
		double cfg, jit, cl, mean, sd, loss;
		if (!strncmp(l, "node,", 5))
			continue;
		int f = sscanf(l, "%31[^,],%7[^,],%u,%lf,%lf,%lf,%lf,%lf,%lf,%*[^,],%15s", node, dir, &probes, &cfg, &jit, &cl,
			       &mean, &sd, &loss, verdict);
		if (f != 10)
			f = sscanf(l, "%31[^,],%7[^,],%u,%lf,%lf,%lf,%lf,%lf,%lf,,%15s", node, dir, &probes, &cfg, &jit, &cl,
				   &mean, &sd, &loss, verdict);
		cr_assert_eq(f, 10, "row: %s", l);
		rows++;
		bool cross = !strcmp(node, "probe1");
		fprintf(stderr, "%s %s %s: configured %.3f ms, measured %.3f ms (%+.3f), %s\n", cross ? "across" : "local ",
			node, dir, cfg, mean, mean - cfg, verdict);
		cr_expect_float_eq(cfg, strcmp(dir, "rtt") ? 10.0 : 20.0, 1e-9, "%s", l);
		double slack = cross && strcmp(dir, "rtt") ? clock_ms : 0;
		if (scale > 1.0)
			ok += mean >= cfg - 0.5 * scale - slack && mean <= cfg + 2.0 * scale + slack;
		else
			ok += !strcmp(verdict, "ok");
	}
	cr_expect_eq(rows, 6, "2 probes x up, down, rtt:\n%s", t);
	cr_expect_eq(ok, 6, "every direction within its band, local or across hosts (time scale %.1f, clock bound %.3f ms)",
		     scale, clock_ms);
	free(csv);
	free(t);
}
