/* Per-node cgroup limits on this host's real hierarchy (root): the CPU share measured, pinning
 * seen in /proc/PID/status, a node the memory limit kills reported as a crash by a whole
 * `stalenet run`, and every cgroup of a run gone after its teardown and after kill -9 of the
 * orchestrator followed by `stalenet cleanup`.
 *
 * The CPU share is measured as CPU time obtained per wall time (/proc/PID/schedstat, ns on a
 * CPU), which a busy host can only lower: a node limited to 0.25 of a core must stay at or below
 * 0.25 x 1.1 whatever else runs (cpu.stat's throttled periods are printed; a saturated host may
 * never let the loop reach its quota, so they are not asserted). The figures are
 * printed (stderr) for docs/architecture.md. Skips without root or cgroups; fails instead under
 * STALENET_TESTS_MUST_RUN=1. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "orchestrator/cgroup.h"
#include "orchestrator/doctor.h"
#include "orchestrator/launch.h"
#include "tests/support/files.h"
#include "tests/support/fixture.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define MEASURE_MS 3000

static char tmpdir[64];
static char stalenet_bin[PATH_MAX];
static char prefix[16];
static struct cgroup_run *cg;
static int lock_fd = -1;

static void setup(void)
{
	struct cgroup_info ci;
	char self[PATH_MAX - 16];
	ssize_t n;

	log_init("test_cgroup", LOG_WARN);
	support_require_root();
	if (cgroup_detect(NULL, &ci) < 0 || ci.hierarchy == CGROUP_NONE ||
	    (ci.controllers & (CGROUP_CPU | CGROUP_CPUSET | CGROUP_MEMORY)) != (CGROUP_CPU | CGROUP_CPUSET | CGROUP_MEMORY))
		support_skip_or_fail("no cpu, cpuset and memory cgroup controllers under %s", CGROUP_DEFAULT_ROOT);
	n = readlink("/proc/self/exe", self, sizeof self - 1);
	cr_assert_gt(n, 0);
	self[n] = '\0';
	for (int up = 0; up < 3; up++)
		*strrchr(self, '/') = '\0';
	snprintf(stalenet_bin, sizeof stalenet_bin, "%s/stalenet", self);
	snprintf(prefix, sizeof prefix, "sncg%04x-", (unsigned)getpid() & 0xffff);
	support_tmpdir(tmpdir, sizeof tmpdir, "tcg");
}

static void fini(void)
{
	cgroup_run_destroy(&cg);
	if (tmpdir[0])
		support_rm_rf(tmpdir);
	tmpdir[0] = '\0';
	support_host_unlock(&lock_fd);
}

TestSuite(cgroup_ns, .init = setup, .fini = fini, .timeout = 180);

/* --- processes in cgroups -------------------------------------------------------------------- */

static int place(void *arg, pid_t pid, const char *name)
{
	(void)arg;
	return cgroup_run_attach(cg, cgroup_run_find(cg, name), pid);
}

static pid_t spawn(const char *name, const char *script)
{
	/* At the highest weight the loop takes a whole core on a busy host: only its limit can
	 * hold it back, so the measurement tests the limit, not the host's load. */
	const char *argv[] = { "/usr/bin/nice", "-n", "-20", "/bin/sh", "-c", script, NULL };
	struct launch_spec ls = { .name = name, .argv = argv, .place = place };
	pid_t pid = launch_spawn(&ls);

	cr_assert_gt(pid, 0, "launch %s: %s", name, strerror(-(int)pid));
	return pid;
}

static void stop(pid_t pid)
{
	kill(pid, SIGKILL);
	cr_assert_eq(support_wait_pid(pid, NULL, 5000), 0);
}

/* ns this process has spent on a CPU (/proc/PID/schedstat field 1). */
static uint64_t cpu_ns(pid_t pid)
{
	char p[64], buf[256];
	unsigned long long v = 0;
	FILE *f;

	snprintf(p, sizeof p, "/proc/%d/schedstat", (int)pid);
	f = fopen(p, "re");
	cr_assert_not_null(f, "%s", p);
	cr_assert(fgets(buf, sizeof buf, f));
	fclose(f);
	sscanf(buf, "%llu", &v);
	return v;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* CPU time per wall time of a busy loop over MEASURE_MS. */
static double cpu_per_wall(pid_t pid)
{
	uint64_t c0 = cpu_ns(pid);
	int64_t t0 = mono_ns();

	support_sleep_ms(MEASURE_MS); /* the measurement window, not a synchronisation */
	return (double)(cpu_ns(pid) - c0) / (double)(mono_ns() - t0);
}

static uint64_t throttled(int idx)
{
	char p[PATH_MAX], *s;
	unsigned long long v = 0;

	snprintf(p, sizeof p, "%s/cpu.stat", cgroup_run_path(cg, idx, CGROUP_CPU));
	s = support_slurp(p, NULL);
	if (strstr(s, "nr_throttled "))
		sscanf(strstr(s, "nr_throttled ") + 13, "%llu", &v);
	free(s);
	return v;
}

Test(cgroup_ns, a_quarter_core_gets_at_most_a_quarter_of_the_cpu)
{
	struct cgroup_limits quarter = { .cpu = 0.25 }, free_ = { 0 };
	char err[512];
	double limited, unlimited;
	pid_t pid;

	cg = cgroup_run_new(NULL, prefix, CGROUP_CPU, NULL, err, sizeof err);
	cr_assert_not_null(cg, "%s", err);
	cr_assert_eq(cgroup_run_add(cg, "quarter", &quarter, err, sizeof err), 0, "%s", err);
	cr_assert_eq(cgroup_run_add(cg, "free", &free_, err, sizeof err), 1, "%s", err);

	pid = spawn("free", "while :; do :; done");
	unlimited = cpu_per_wall(pid);
	stop(pid);
	pid = spawn("quarter", "while :; do :; done");
	limited = cpu_per_wall(pid);
	stop(pid);
	fprintf(stderr, "cpu share: limited 0.25 -> %.3f CPU s per wall s (throttled in %llu periods), "
		"unlimited %.3f (ratio %.2f)\n", limited, (unsigned long long)throttled(0), unlimited,
		limited > 0 ? unlimited / limited : 0);
	cr_assert_leq(limited, 0.25 * 1.1, "cpu 0.25 got %.3f of a core", limited);
	cr_assert_geq(limited, 0.05, "the limited loop hardly ran (%.3f): not measured", limited);
	/* A saturated host may give the loop less than its quota in every period, so throttling is
	 * not asserted; the quota written is, and an unlimited node is never throttled. */
	{
		char p[PATH_MAX], *q;

		snprintf(p, sizeof p, "%s/cpu.cfs_quota_us", cgroup_run_path(cg, 0, CGROUP_CPU));
		q = support_slurp(p, NULL);
		cr_assert_eq(strtol(q, NULL, 10), 25000, "quota %s", q);
		free(q);
	}
	cr_assert_eq(throttled(1), 0, "an unlimited node was throttled");
	cr_assert_eq(cgroup_run_destroy(&cg), 0);
}

Test(cgroup_ns, a_pinned_node_runs_only_on_its_cpus)
{
	uint64_t online[CGROUP_CPU_WORDS], pin[CGROUP_CPU_WORDS] = { 0 };
	struct cgroup_limits lim = { .cpus = pin };
	char err[512], p[64], want[16], *status, *line;
	int last = -1;
	pid_t pid;

	cr_assert_gt(cgroup_online_cpus(online), 0);
	for (int c = 0; c < CGROUP_MAX_CPUS; c++)
		if (online[c / 64] & (1ull << (c % 64)))
			last = c;
	pin[last / 64] = 1ull << (last % 64);
	cg = cgroup_run_new(NULL, prefix, CGROUP_CPUSET, NULL, err, sizeof err);
	cr_assert_not_null(cg, "%s", err);
	cr_assert_eq(cgroup_run_add(cg, "pinned", &lim, err, sizeof err), 0, "%s", err);
	pid = spawn("pinned", "read x");
	snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
	status = support_slurp(p, NULL);
	line = strstr(status, "Cpus_allowed_list:");
	cr_assert_not_null(line);
	snprintf(want, sizeof want, "%d\n", last);
	line += strlen("Cpus_allowed_list:");
	line += strspn(line, " \t");
	cr_assert_eq(strncmp(line, want, strlen(want)), 0, "Cpus_allowed_list: %.20s, want %d", line, last);
	fprintf(stderr, "pinning: cpus [%d] -> Cpus_allowed_list %d\n", last, last);
	free(status);
	stop(pid);
	cr_assert_eq(cgroup_run_destroy(&cg), 0);
	/* the directories are gone, parent included */
	snprintf(p, sizeof p, "%s/cpuset/%s", CGROUP_DEFAULT_ROOT, prefix);
	cr_assert_eq(access(p, F_OK), -1, "%s left", p);
}

/* --- whole runs -------------------------------------------------------------------------------- */

struct proc_run {
	pid_t pid;
	char out[PATH_MAX], err[PATH_MAX];
};

static void start_stalenet(struct proc_run *r, const char *tag, const char *const *args)
{
	const char *argv[16] = { stalenet_bin };
	int n = 1;

	while (*args && n < 15)
		argv[n++] = *args++;
	argv[n] = NULL;
	snprintf(r->out, sizeof r->out, "%s/%s.out", tmpdir, tag);
	snprintf(r->err, sizeof r->err, "%s/%s.err", tmpdir, tag);
	r->pid = fork();
	cr_assert_geq(r->pid, 0);
	if (r->pid == 0) {
		int o = open(r->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		int e = open(r->err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0 || chdir(tmpdir) < 0)
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
}

static int wait_stalenet(struct proc_run *r, int timeout_ms)
{
	int st = 0;

	cr_assert_eq(support_wait_pid(r->pid, &st, timeout_ms), 0, "stalenet did not end in %d ms; stderr:\n%s",
		     timeout_ms, support_read_file(r->err, NULL));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The run prefix from the journal's header ("stalenet-journal 1 PID ST DIR PREFIX"). */
static void journal_prefix(const char *dir, char *out, size_t len)
{
	char p[PATH_MAX], *s, *nl, *sp;

	snprintf(p, sizeof p, "%s/journal", dir);
	s = support_slurp(p, NULL);
	nl = strchr(s, '\n');
	cr_assert_not_null(nl);
	*nl = '\0';
	sp = strrchr(s, ' ');
	cr_assert_not_null(sp);
	snprintf(out, len, "%s", sp + 1);
	free(s);
}

/* cgroup directories (parents and children) named with pfx under the three controllers. */
static int run_cgroups(const char *pfx)
{
	static const char *const ctrl[] = { "cpu", "cpuset", "memory" };
	int count = 0;

	for (int c = 0; c < 3; c++) {
		char p[PATH_MAX];
		DIR *d;
		struct dirent *e;

		snprintf(p, sizeof p, "%s/%s/%s", CGROUP_DEFAULT_ROOT, ctrl[c], pfx);
		if (!(d = opendir(p)))
			continue;
		count++;
		while ((e = readdir(d)))
			count += e->d_type == DT_DIR && !strncmp(e->d_name, pfx, strlen(pfx));
		closedir(d);
	}
	return count;
}

static void write_scenario(const char *path, const char *stop_time, const char *resources)
{
	char text[2048];

	snprintf(text, sizeof text,
		 "name: cgtest\nstop: {time: %s}\nworkers: 2\nlinkcheck: off\nresources:\n%s", stop_time, resources);
	support_write_file(path, text);
}

static void require_data(void)
{
	if (access("/usr/share/datasets/fashion-mnist", R_OK) < 0)
		support_skip_or_fail("the fashion-mnist data set is not installed");
	if (access(stalenet_bin, X_OK) < 0)
		support_skip_or_fail("%s not built", stalenet_bin);
	lock_fd = support_host_lock();
}

Test(cgroup_ns, a_node_over_its_memory_is_a_crash_and_teardown_leaves_no_cgroup)
{
	char scen[PATH_MAX], dir[PATH_MAX], p[PATH_MAX + 16], pfx[32], *ev;
	struct proc_run r;
	int rc;

	require_data();
	snprintf(scen, sizeof scen, "%s/oom.yaml", tmpdir);
	snprintf(dir, sizeof dir, "%s/oom", tmpdir);
	/* The data set alone is ~47 MB: worker1 cannot load it under 16 MiB. */
	write_scenario(scen, "30s", "  - {nodes: worker1, memory: 16MiB}\n  - {nodes: worker0, cpu: 0.5}\n");
	start_stalenet(&r, "oom", (const char *const[]){ "run", scen, "--out", dir, "--quiet", NULL });
	rc = wait_stalenet(&r, 120000);
	cr_assert_neq(rc, 0, "the run succeeded though worker1 cannot fit its memory");
	snprintf(p, sizeof p, "%s/events.csv", dir);
	ev = support_slurp(p, NULL);
	fprintf(stderr, "memory limit: events.csv:\n%s", ev);
	cr_assert(strstr(ev, ",node_failed,worker1,oom_killed: memory limit 16MiB reached; killed by signal 9"),
		  "events.csv:\n%s", ev);
	cr_assert(strstr(ev, ",stop,all,a node failed"), "on_node_failure stop did not apply:\n%s", ev);
	free(ev);
	journal_prefix(dir, pfx, sizeof pfx);
	snprintf(p, sizeof p, "%s/journal", dir);
	ev = support_slurp(p, NULL);
	cr_assert(strstr(ev, "\ncgroup /sys/fs/cgroup/memory/"), "no cgroup records:\n%s", ev);
	free(ev);
	cr_assert_eq(run_cgroups(pfx), 0, "cgroups of %s left after teardown", pfx);
}

static bool nodes_started(void *arg)
{
	char *s = support_read_file(arg, NULL);
	bool ok = s && strstr(s, "\nproc ") && strstr(s, " worker1\n");

	free(s);
	return ok;
}

Test(cgroup_ns, kill9_then_cleanup_removes_every_cgroup)
{
	char scen[PATH_MAX], dir[PATH_MAX], p[PATH_MAX + 16], pfx[32], *out;
	struct proc_run r, cl;
	int rc, before;

	require_data();
	snprintf(scen, sizeof scen, "%s/k9.yaml", tmpdir);
	snprintf(dir, sizeof dir, "%s/k9", tmpdir);
	write_scenario(scen, "90s", "  - {nodes: workers, cpu: 0.5, memory: 512MiB}\n  - {nodes: server0, cpus: [0]}\n");
	start_stalenet(&r, "k9", (const char *const[]){ "run", scen, "--out", dir, "--quiet", NULL });
	snprintf(p, sizeof p, "%s/journal", dir);
	cr_assert(support_wait_until(nodes_started, p, 60000), "nodes not started; stderr:\n%s",
		  support_read_file(r.err, NULL));
	kill(r.pid, SIGKILL);
	cr_assert_eq(wait_stalenet(&r, 5000), 128 + SIGKILL);
	journal_prefix(dir, pfx, sizeof pfx);
	before = run_cgroups(pfx);
	/* 3 parents + 3 nodes in each of cpu, cpuset, memory */
	cr_assert_eq(before, 12, "cgroups of %s before cleanup: %d", pfx, before);

	start_stalenet(&cl, "cleanup", (const char *const[]){ "cleanup", dir, NULL });
	rc = wait_stalenet(&cl, 60000);
	out = support_slurp(cl.out, NULL);
	cr_assert_eq(rc, 0, "cleanup exit %d: %s\nstderr:\n%s", rc, out, support_read_file(cl.err, NULL));
	cr_assert(strstr(out, "1 replayed"), "cleanup said: %s", out);
	free(out);
	cr_assert_eq(run_cgroups(pfx), 0, "cgroups of %s left after cleanup", pfx);
	fprintf(stderr, "kill -9: %d cgroups of %s before cleanup, 0 after\n", before, pfx);
}

Test(cgroup_ns, doctor_names_the_hierarchy_and_its_controllers)
{
	struct cgroup_info ci;
	char *text = NULL, want[128];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cr_assert_eq(cgroup_detect(NULL, &ci), 0);
	doctor_report(f, NULL);
	fclose(f);
	snprintf(want, sizeof want, "ok    cgroups: %s hierarchy (%s), controllers: cpu cpuset memory;",
		 cgroup_hierarchy_name(ci.hierarchy), ci.hierarchy == CGROUP_V2 ? "unified" : "per controller");
	cr_assert(strstr(text, want), "doctor said:\n%s", text);
	free(text);
}

Test(cgroup_ns, removal_refuses_a_directory_that_is_no_cgroup)
{
	struct statfs fs;
	char p[PATH_MAX];

	/* v1 layout: the mount points live on a tmpfs at the root; a directory there is no cgroup */
	cr_assert_eq(statfs(CGROUP_DEFAULT_ROOT, &fs), 0);
	if (fs.f_type == CGROUP2_SUPER_MAGIC)
		cr_skip_test("the root is itself a cgroup2 mount: nothing that is no cgroup to find there");
	snprintf(p, sizeof p, "%s/%s", CGROUP_DEFAULT_ROOT, prefix);
	cr_assert_eq(mkdir(p, 0755), 0, "mkdir %s: %s", p, strerror(errno));
	cr_assert_null(cgroup_path_problem(p, prefix), "the path itself is a run's");
	cr_expect_eq(cgroup_remove(p, prefix), -EPERM);
	cr_expect_eq(access(p, F_OK), 0, "%s removed", p);
	cr_assert_eq(rmdir(p), 0);
}
