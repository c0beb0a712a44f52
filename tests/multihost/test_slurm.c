/* The Slurm launcher for real: a Slurm cluster (slurmctld on h0, slurmd and munged on each of
 * three hosts, tests/support/slurmsim on tests/support/hostsim), `stalenet run` of a parameter
 * server scenario inside an allocation (salloc, and an sbatch batch job) reaching every host's
 * agent as a job step, with the same trace schema as the ssh path; outside an allocation one
 * error; `stalenet cleanup --hosts` through srun inside an allocation and over ssh outside
 * one; the orchestrator killed (every agent tears down), an agent killed (the run stops, its
 * host's journal replayed through srun); setup and teardown timed for 2, 4 and 8 hosts. Root,
 * openssh-server, slurm-wlm and munge; skips elsewhere (fails under STALENET_TESTS_MUST_RUN=1). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectors/schema.h"
#include "tests/support/files.h"
#include "tests/support/fixture.h"
#include "tests/support/hostsim.h"
#include "tests/support/proc.h"
#include "tests/support/slurmsim.h"
#include "tests/support/wait.h"

static struct hostsim hs;
static struct slurmsim ss;
static char stalenet[PATH_MAX + 16], scen[400], hosts_file[400], out_file[400], run_dir[400];

/* each host's monotonic clock far from the others: a trace not mapped onto one clock shows it */
static const int64_t offsets[3] = { 0, 1000250000000ll, -2125000000ll };

static void setup(void)
{
	char why[1024];
	support_require_netns("hsprobe-slurm");
	support_require_sshd();
	if (*slurmsim_missing())
		support_skip_or_fail("missing %s (apt-get install slurm-wlm munge)", slurmsim_missing());
	cr_assert(support_stalenet_path(stalenet, sizeof stalenet), "%s: build it first", stalenet);
	if (hostsim_start(&hs, "s", 3, offsets, why, sizeof why))
		support_skip_or_fail("hosts: %s", why);
	if (slurmsim_start(&ss, &hs, 4, 30000, why, sizeof why))
		support_skip_or_fail("slurm: %s", why);
	char load[64] = "";
	FILE *lf = fopen("/proc/loadavg", "re");
	if (lf) {
		if (!fgets(load, sizeof load, lf))
			load[0] = 0;
		fclose(lf);
	}
	fprintf(stderr, "slurm cluster of %zu hosts: every node idle %d ms after the daemons started; load %s",
		hs.n, ss.start_ms, load);
	snprintf(scen, sizeof scen, "%s/s.yaml", hs.dir);
	snprintf(hosts_file, sizeof hosts_file, "%s/hosts.yaml", hs.dir);
	snprintf(out_file, sizeof out_file, "%s/out.txt", hs.dir);
	snprintf(run_dir, sizeof run_dir, "%s/runs", hs.dir);
	support_write_file(scen, "name: mh\nstop: {time: 5s}\nworkers: 4\nnetwork: {cc: reno}\n");
	/* h0's address given, h1's and h2's resolved from the node names; cores spread the run */
	support_write_file(hosts_file, "launcher: slurm\nlist:\n"
				       "  - {name: h0, address: 198.18.250.1, cores: 2}\n"
				       "  - {name: h1, cores: 2}\n"
				       "  - {name: h2, cores: 2}\n");
}

static void teardown(void)
{
	/* every daemon, step and agent lives in the hosts' network namespaces */
	hostsim_stop(&hs);
}

TestSuite(slurm, .init = setup, .fini = teardown, .timeout = 240);

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
static char *head_of(const char *dir, const char *rel, int *rows)
{
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/%s", dir, rel);
	char *t = support_read_file(path, &len);
	if (!t)
		return NULL;
	*rows = count(t, "\n") - 1;
	char *nl = strchr(t, '\n');
	if (nl)
		*nl = 0;
	return t;
}

/* Namespaces of ours ("sn...") left on host i. */
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

/* The run directory dir holds the one-host schema, from every host's files. */
static void check_run(const char *dir)
{
	int rows = 0;
	char *hd = head_of(dir, "nodes/server0.csv", &rows);
	cr_assert(hd, "%s/nodes/server0.csv", dir);
	cr_expect_str_eq(hd, TRACE_HEADER_SERVER);
	cr_expect_gt(rows, 10, "server0 applied updates");
	free(hd);
	for (int w = 0; w < 4; w++) {
		char rel[64];
		snprintf(rel, sizeof rel, "nodes/worker%d.csv", w);
		hd = head_of(dir, rel, &rows);
		cr_assert(hd, "%s missing", rel);
		cr_expect_str_eq(hd, TRACE_HEADER_NODE, "%s", rel);
		cr_expect_gt(rows, 10, "%s: worker stepped (%d rows)", rel, rows);
		fprintf(stderr, "%s: %d steps\n", rel, rows);
		free(hd);
	}
	static const struct {
		const char *rel, *header;
	} files[] = { { "progress.csv", TRACE_HEADER_PROGRESS }, { "events.csv", TRACE_HEADER_EVENTS },
		      { "eval.csv", TRACE_HEADER_EVAL }, { "partition.csv", TRACE_HEADER_PARTITION } };
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		hd = head_of(dir, files[i].rel, &rows);
		cr_assert(hd, "%s", files[i].rel);
		cr_expect_str_eq(hd, files[i].header, "%s", files[i].rel);
		free(hd);
	}
	char path[600];
	size_t len;
	snprintf(path, sizeof path, "%s/partition.csv", dir);
	char *part = support_read_file(path, &len);
	cr_assert(part);
	cr_expect_eq(count(part, TRACE_HEADER_PARTITION), 1, "one header over the hosts' rows: %s", part);
	cr_expect_geq(count(part, "worker3,"), 1, "worker3's rows from h2: %s", part);
	free(part);
	snprintf(path, sizeof path, "%s/meta.json", dir);
	char *meta = support_read_file(path, &len);
	cr_assert(meta);
	cr_expect(strstr(meta, "\"status\": \"complete\""), "%s", meta);
	cr_expect_eq(count(meta, "\"clock_offset_ns\""), 3, "%s", meta);
	free(meta);
	snprintf(path, sizeof path, "%s/summary.csv", dir);
	char *sum = support_read_file(path, &len);
	cr_assert(sum, "summary.csv");
	cr_expect(strstr(sum, ",complete,"), "%s", sum);
	free(sum);
	for (size_t i = 0; i < hs.n; i++)
		cr_expect_eq(netns_left(i), 0, "host h%zu: namespaces left", i);
}

/* The clock offset `run` printed for host i, in seconds (NAN when missing). */
static double printed_offset(const char *t, size_t i, double *bound)
{
	char want[96];
	snprintf(want, sizeof want, "host h%zu (root@198.18.250.%zu): ok, hostname h%zu, clock offset ", i, i + 1, i);
	const char *p = strstr(t, want);
	double off = 0.0 / 0.0;
	if (p && sscanf(p + strlen(want), "%lf s +- %lf", &off, bound) != 2)
		off = 0.0 / 0.0;
	return off;
}

Test(slurm, run_inside_an_allocation)
{
	/* outside an allocation: one error, nothing contacted */
	const char *bare[] = { stalenet, "run", scen, "--hosts", hosts_file, "--out", run_dir, NULL };
	int rc = slurmsim_run(&ss, 0, bare, out_file, 30000);
	char *t = output();
	cr_expect_eq(rc, 2, "%s", t);
	cr_expect(strstr(t, "hosts.yaml:1:1: error: launcher slurm needs a Slurm allocation"), "%s", t);
	cr_expect_eq(count(t, "\n"), 1, "one line: %s", t);
	free(t);

	const char *args[] = { "/usr/bin/salloc", "-N3", stalenet, "run", scen, "--hosts", hosts_file, "--out",
			       run_dir, "--quiet", "--plot", NULL };
	int64_t t0 = support_now_ms();
	rc = slurmsim_run(&ss, 0, args, out_file, 120000);
	int64_t took = support_now_ms() - t0;
	t = output();
	fprintf(stderr, "%s", t);
	fprintf(stderr, "salloc -N3 stalenet run (5 s of training): %lld ms in all\n", (long long)took);
	cr_expect_eq(rc, 0, "the run inside the allocation completes: %s", t);
	cr_expect(strstr(t, "salloc: Granted job allocation"), "%s", t);
	for (size_t i = 0; i < 3; i++) {
		double bound = 0, off = printed_offset(t, i, &bound);
		double want = (offsets[i] - offsets[0]) / 1e9;
		cr_expect(off == off, "host h%zu: no ok line in %s", i, t);
		/* the agent is a job step of slurmd, in the host's time namespace */
		cr_expect(off - want <= bound + 1e-6 && want - off <= bound + 1e-6,
			  "host h%zu: offset %.6f s, injected %.6f s, bound %.6f s", i, off, want, bound);
		fprintf(stderr, "host h%zu: offset error %.1f us, bound %.1f us\n", i, (off - want) * 1e6, bound * 1e6);
	}
	cr_expect(strstr(t, "host h0: built server0 worker0 "), "%s", t);
	cr_expect(strstr(t, "host h1: built worker1 worker2 (node MTU 1450"), "%s", t);
	cr_expect(strstr(t, "host h2: built worker3 (node MTU 1450"), "%s", t);
	cr_expect(strstr(t, "5 nodes ready on 3 hosts: started"), "%s", t);
	free(t);
	check_run(run_dir);
	/* --plot drew the figures from the hosts' traces */
	char plots[500];
	snprintf(plots, sizeof plots, "%s/plots", run_dir);
	DIR *pd = opendir(plots);
	struct dirent *pe;
	int figs = 0;
	while (pd && (pe = readdir(pd)))
		figs += pe->d_name[0] != '.';
	if (pd)
		closedir(pd);
	cr_expect_gt(figs, 0, "no figures in %s", plots);

	/* cleanup through srun inside an allocation, on every host */
	const char *cl[] = { "/usr/bin/salloc", "-N3", stalenet, "cleanup", "--hosts", hosts_file, NULL };
	rc = slurmsim_run(&ss, 0, cl, out_file, 60000);
	t = output();
	cr_expect_eq(rc, 0, "%s", t);
	cr_expect_eq(count(t, ": cleanup journals 0 replayed 0 "), 3, "%s", t);
	free(t);

	/* outside one, over ssh: needs every address in the list */
	const char *cl_bare[] = { stalenet, "cleanup", "--hosts", hosts_file, NULL };
	rc = slurmsim_run(&ss, 0, cl_bare, out_file, 60000);
	t = output();
	cr_expect_eq(rc, 2, "%s", t);
	cr_expect(strstr(t, "needs a Slurm allocation"), "%s", t);
	free(t);
	char full[400];
	snprintf(full, sizeof full, "%s/hosts-full.yaml", hs.dir);
	support_write_file(full, "launcher: slurm\nlist:\n"
				 "  - {name: h0, address: 198.18.250.1, cores: 2}\n"
				 "  - {name: h1, address: 198.18.250.2, cores: 2}\n"
				 "  - {name: h2, address: 198.18.250.3, cores: 2}\n");
	const char *cl_ssh[] = { stalenet, "cleanup", "--hosts", full, "--identity", hs.identity, "--known-hosts",
				 hs.known_hosts, NULL };
	rc = slurmsim_run(&ss, 0, cl_ssh, out_file, 60000);
	t = output();
	cr_expect_eq(rc, 0, "%s", t);
	cr_expect(strstr(t, "not inside a Slurm allocation: reaching the hosts over ssh"), "%s", t);
	cr_expect_eq(count(t, ": cleanup journals 0 replayed 0 "), 3, "%s", t);
	free(t);
}

Test(slurm, run_as_a_batch_job)
{
	char script[400], job_out[400], dir[400], text[6000];
	snprintf(script, sizeof script, "%s/job.sh", hs.dir);
	snprintf(job_out, sizeof job_out, "%s/job.out", hs.dir);
	snprintf(dir, sizeof dir, "%s/batch", hs.dir);
	snprintf(text, sizeof text, "#!/bin/sh\nexec %s run %s --hosts %s --out %s --quiet\n", stalenet, scen, hosts_file,
		 dir);
	support_write_file(script, text);
	cr_assert_eq(chmod(script, 0700), 0);
	char output_opt[440];
	snprintf(output_opt, sizeof output_opt, "--output=%s", job_out);
	const char *args[] = { "/usr/bin/sbatch", "--wait", "-N3", output_opt, script, NULL };
	int64_t t0 = support_now_ms();
	int rc = slurmsim_run(&ss, 0, args, out_file, 120000);
	int64_t took = support_now_ms() - t0;
	char *t = output();
	size_t len;
	char *j = support_read_file(job_out, &len);
	fprintf(stderr, "sbatch: %s\njob: %s\nsbatch --wait -N3 (5 s of training): %lld ms\n", t, j ? j : "(none)",
		(long long)took);
	cr_expect_eq(rc, 0, "the batch job completes: %s / %s", t, j ? j : "");
	cr_expect(j && strstr(j, "5 nodes ready on 3 hosts: started"), "%s", j ? j : "");
	free(j);
	free(t);
	check_run(dir);
}

struct started_arg {
	int pid;
};

/* The run's nodes started; its orchestrator's pid from its log lines ("stalenet[PID] I ..."). */
static bool run_started(void *arg)
{
	struct started_arg *a = arg;
	size_t len;
	char *t = support_read_file(out_file, &len);
	const char *p = t ? strstr(t, "stalenet[") : NULL;
	bool ok = t && strstr(t, "nodes ready on 3 hosts: started") && p && sscanf(p, "stalenet[%d]", &a->pid) == 1;
	free(t);
	return ok;
}

/* No namespace of ours and no agent left on any host. */
static bool hosts_clean(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < hs.n; i++) {
		if (netns_left(i))
			return false;
		pid_t pids[256];
		size_t k = hostsim_host_pids(&hs, i, pids, 256);
		for (size_t j = 0; j < k; j++) {
			char path[64], cmd[256] = "";
			snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pids[j]);
			FILE *f = fopen(path, "re");
			size_t n = f ? fread(cmd, 1, sizeof cmd - 1, f) : 0;
			if (f)
				fclose(f);
			cmd[n] = 0;
			if (n && strstr(cmd, "stalenet") && (n > strlen(cmd) + 1) && !strcmp(cmd + strlen(cmd) + 1, "agent"))
				return false;
		}
	}
	return true;
}

Test(slurm, orchestrator_killed_every_host_torn_down)
{
	support_write_file(scen, "name: mh\nstop: {time: 60s}\nworkers: 4\nnetwork: {cc: reno}\n");
	const char *args[] = { "/usr/bin/salloc", "-N3", stalenet, "run", scen, "--hosts", hosts_file, "--out",
			       run_dir, NULL };
	pid_t salloc = slurmsim_spawn(&ss, 0, args, out_file);
	cr_assert_gt(salloc, 0);
	struct started_arg a = { 0 };
	bool started = support_wait_until(run_started, &a, 60000);
	char *t = output();
	cr_assert(started, "the run did not start: %s", t);
	free(t);
	cr_assert_gt(a.pid, 1);
	int64_t t0 = support_now_ms();
	/* the orchestrator dies without a word: srun, its child, gets SIGTERM (parent death) and
	 * cancels its step; slurmstepd sends the agent SIGTERM, which ends its input */
	cr_assert_eq(kill(a.pid, SIGKILL), 0);
	bool clean = support_wait_until(hosts_clean, NULL, 30000);
	fprintf(stderr, "orchestrator killed -> every host torn down, no agent left: %lld ms\n",
		(long long)(support_now_ms() - t0));
	if (!clean) {
		/* what is left, for the failure message */
		for (size_t i = 0; i < hs.n; i++) {
			char p[500], tl[1500];
			snprintf(p, sizeof p, "%s/slurmd-h%zu.log", hs.dir, i);
			size_t len;
			char *l = support_read_file(p, &len);
			snprintf(tl, sizeof tl, "%s", l && len > 1400 ? l + len - 1400 : l ? l : "");
			free(l);
			fprintf(stderr, "host h%zu: %d namespaces left; slurmd log ends: %s\n", i, netns_left(i), tl);
		}
		support_sh("for p in $(ip netns pids %s); do cat /proc/$p/cmdline | tr '\\0' ' '; echo; done >&2",
			   hs.host[1].netns);
	}
	cr_expect(clean, "namespaces or agents left on the hosts");
	for (size_t i = 0; i < hs.n; i++)
		cr_expect_eq(netns_left(i), 0, "host h%zu", i);
	int st;
	cr_expect_eq(support_wait_pid(salloc, &st, 30000), 0, "salloc ends with its command");
}

/* Setup and teardown against the number of hosts: a cluster of n hosts, `salloc -N n stalenet
 * run` of a parameter server with 2 nodes per host and no host list (the allocation's nodes,
 * their CPUs, addresses from the node names), timed from the output as it appears. */
struct seen_arg {
	const char *path, *needle;
	int times;
};

static bool seen(void *arg)
{
	const struct seen_arg *a = arg;
	size_t len;
	char *t = support_read_file(a->path, &len);
	bool ok = t && count(t, a->needle) >= a->times;
	free(t);
	return ok;
}

static void scale_one(size_t n)
{
	char why[1024], sc[400], out[400], dir[400], text[256];
	struct hostsim h;
	struct slurmsim s;
	if (hostsim_start(&h, "z", n, NULL, why, sizeof why))
		support_skip_or_fail("hosts: %s", why);
	if (slurmsim_start(&s, &h, 2, 60000, why, sizeof why)) {
		hostsim_stop(&h);
		support_skip_or_fail("slurm: %s", why);
	}
	snprintf(sc, sizeof sc, "%s/s.yaml", h.dir);
	snprintf(out, sizeof out, "%s/out.txt", h.dir);
	snprintf(dir, sizeof dir, "%s/runs", h.dir);
	snprintf(text, sizeof text, "name: scale\nstop: {time: 2s}\nworkers: %zu\nnetwork: {cc: reno}\n"
				    "hosts: {launcher: slurm}\n", 2 * n - 1);
	support_write_file(sc, text);
	char nodes[16];
	snprintf(nodes, sizeof nodes, "-N%zu", n);
	const char *args[] = { "/usr/bin/salloc", nodes, stalenet, "run", sc, "--out", dir, "--quiet", NULL };
	int64_t t0 = support_now_ms(), t_ok = -1, t_started = -1, t_done = -1;
	pid_t pid = slurmsim_spawn(&s, 0, args, out);
	cr_assert_gt(pid, 0);
	struct seen_arg ok = { out, "ok, hostname", (int)n }, st = { out, "started", 1 }, dn = { out, "done:", 1 };
	if (support_wait_until(seen, &ok, 60000))
		t_ok = support_now_ms() - t0;
	if (support_wait_until(seen, &st, 60000))
		t_started = support_now_ms() - t0;
	if (support_wait_until(seen, &dn, 60000))
		t_done = support_now_ms() - t0;
	int status = 0;
	int rc = support_wait_pid(pid, &status, 60000);
	int64_t t_end = support_now_ms() - t0;
	char load[64] = "";
	FILE *f = fopen("/proc/loadavg", "re");
	if (f) {
		if (!fgets(load, sizeof load, f))
			load[0] = 0;
		fclose(f);
	}
	char *t = support_read_file(out, &(size_t){ 0 });
	fprintf(stderr, "slurm %zu hosts x 2 nodes: cluster idle %d ms; salloc -> every agent ok %lld ms; "
		"-> nodes started %lld ms; stop (2 s) -> done %lld ms; salloc ended %lld ms; load %s",
		n, s.start_ms, (long long)t_ok, (long long)(t_started - t_ok), (long long)(t_done - t_started - 2000),
		(long long)t_end, load);
	cr_expect(rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "%zu hosts: %s", n, t ? t : "");
	cr_expect(t_ok > 0 && t_started > 0 && t_done > 0, "%zu hosts: %s", n, t ? t : "");
	char want[64];
	snprintf(want, sizeof want, "%zu nodes ready on %zu hosts: started", 2 * n, n);
	cr_expect(t && strstr(t, want), "%s", t ? t : "");
	free(t);
	for (size_t i = 0; i < n; i++) {
		char p[128];
		snprintf(p, sizeof p, "/proc/%d/root/run/netns", (int)h.host[i].sshd_pid);
		DIR *d = opendir(p);
		struct dirent *e;
		int left = 0;
		while (d && (e = readdir(d)))
			left += !strncmp(e->d_name, "sn", 2);
		if (d)
			closedir(d);
		cr_expect_eq(left, 0, "%zu hosts: host %zu has %d namespaces left", n, i, left);
	}
	hostsim_stop(&h);
}

Test(slurm_scale, setup_and_teardown_against_hosts, .timeout = 600)
{
	support_require_netns("hsprobe-slurmz");
	support_require_sshd();
	if (*slurmsim_missing())
		support_skip_or_fail("missing %s (apt-get install slurm-wlm munge)", slurmsim_missing());
	support_stalenet_path(stalenet, sizeof stalenet);
	static const size_t sizes[] = { 2, 4, 8 };
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
		scale_one(sizes[k]);
}

Test(slurm, killed_agent_stops_the_run_and_cleanup_clears_its_host)
{
	support_write_file(scen, "name: mh\nstop: {time: 60s}\nworkers: 4\nnetwork: {cc: reno}\n");
	const char *args[] = { "/usr/bin/salloc", "-N3", stalenet, "run", scen, "--hosts", hosts_file, "--out",
			       run_dir, "--quiet", NULL };
	pid_t salloc = slurmsim_spawn(&ss, 0, args, out_file);
	cr_assert_gt(salloc, 0);
	struct started_arg a = { 0 };
	cr_assert(support_wait_until(run_started, &a, 60000), "the run did not start");
	pid_t agent = hostsim_agent_pid(&hs, 2, stalenet);
	cr_assert_gt(agent, 0, "no agent on h2");
	int64_t t_kill = support_now_ms();
	cr_assert_eq(kill(agent, SIGKILL), 0);
	int st = 0;
	cr_assert_eq(support_wait_pid(salloc, &st, 60000), 0, "the run did not stop");
	int64_t took = support_now_ms() - t_kill;
	char *t = output();
	fprintf(stderr, "%s(stopped %lld ms after the kill)\n", t, (long long)took);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit 1 (salloc passes the run's code on): %s", t);
	cr_expect(strstr(t, "host h2: agent lost"), "%s", t);
	cr_expect_eq(netns_left(0), 0, "h0 torn down");
	cr_expect_eq(netns_left(1), 0, "h1 torn down");
	cr_expect_gt(netns_left(2), 0, "h2's share is left, in its journal");
	free(t);
	/* its journal, replayed through an srun step on h2 */
	const char *cl[] = { "/usr/bin/salloc", "-N3", stalenet, "cleanup", "--hosts", hosts_file, NULL };
	int rc = slurmsim_run(&ss, 0, cl, out_file, 60000);
	t = output();
	fprintf(stderr, "%s", t);
	cr_expect_eq(rc, 0, "%s", t);
	cr_expect(strstr(t, "host h2: cleanup journals 1 replayed 1 "), "%s", t);
	for (size_t i = 0; i < hs.n; i++)
		cr_expect_eq(netns_left(i), 0, "host h%zu: namespaces left after cleanup", i);
	free(t);
}
