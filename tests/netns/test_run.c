/* Whole-program tests of `stalenet run` and `stalenet cleanup` in real namespaces (root).
 *
 * Each test writes a small scenario into its own temporary directory, runs build/stalenet
 * (found beside this test binary: build/tests/netns/test_run -> build/stalenet) through
 * fork/exec with stdout and stderr captured to files, and checks the run directory, the exit
 * code, and that the host is exactly as before: the names under /run/netns, the host's links,
 * `iptables-save` of the host, and the host-wide sysctls the testbed may touch. A run's
 * processes are checked gone through the `proc` records of its journal (pid + start time)
 * and by scanning /proc for any command line naming the run directory or the run prefix.
 *
 * Host-wide state is compared, so tests take the lock that tests/netns/test_testbed takes:
 * one test at a time touches the host, whichever suite it belongs to. Namespaces are freed by
 * the kernel asynchronously, so the comparison polls for a few seconds before it fails.
 * Skips cleanly without root or netns support; fails instead under STALENET_TESTS_MUST_RUN=1. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/netns.h"
#include "lib/sysctl.h"
#include "collectors/schema.h"
#include "node/fleet_store.h"
#include "orchestrator/cleanup.h"
#include "orchestrator/supervise.h"
#include "tests/support/files.h"
#include "tests/support/fixture.h"
#include "tests/support/wait.h"

#define SNAP_MAX 65536
#define SETTLE_MS 10000

static char tmpdir[64];
static char stalenet_bin[PATH_MAX];
/* Set by a test whose assertion times the orchestrator's own actions: the next stalenet started
 * runs its main thread SCHED_FIFO (below stalenet-linkd), its threads and children normal. */
static bool stalenet_realtime;
static int lock_fd = -1;

static const char *const host_keys[] = {
	"net.ipv4.tcp_allowed_congestion_control", "net.ipv4.neigh.default.gc_thresh1",
	"net.ipv4.neigh.default.gc_thresh2", "net.ipv4.neigh.default.gc_thresh3",
};
#define N_KEYS (sizeof host_keys / sizeof host_keys[0])

/* --- fixture ------------------------------------------------------------------------------ */

static void setup(void)
{
	log_init("test_run", LOG_WARN);
	support_require_netns("sntst-runprobe");
	if (!support_stalenet_path(stalenet_bin, sizeof stalenet_bin))
		support_skip_or_fail("build/stalenet not built");
	lock_fd = support_host_lock();
	support_tmpdir(tmpdir, sizeof tmpdir, "trun");
}

/* The temporary directory goes, unless STALENET_TESTS_KEEP=1 (to look at a failed run). */
static void fini(void)
{
	const char *keep = getenv("STALENET_TESTS_KEEP");

	if (tmpdir[0] && !(keep && !strcmp(keep, "1")))
		support_rm_rf(tmpdir);
	tmpdir[0] = '\0';
	support_host_unlock(&lock_fd);
}

TestSuite(run, .init = setup, .fini = fini, .timeout = 90);

/* --- small utilities ---------------------------------------------------------------------- */

/* Path under the test's temporary directory. */
static const char *tpath(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static const char *tpath(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(buf, len, "%s/", tmpdir);

	va_start(ap, fmt);
	vsnprintf(buf + n, len - (size_t)n, fmt, ap);
	va_end(ap);
	return buf;
}

static int64_t now_ms(void)
{
	return support_now_ms();
}

static void write_file(const char *path, const char *text)
{
	support_write_file(path, text);
}

/* Whole file into a malloc'd string ("" when missing). Caller frees. */
static char *slurp(const char *path)
{
	char *s = support_read_file(path, NULL);

	return s ? s : strdup("");
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* Number of data rows (lines after the header) of a CSV file; -1 when missing. */
static int csv_rows(const char *path)
{
	char *s;
	int lines = 0;

	if (!exists(path))
		return -1;
	s = slurp(path);
	for (char *p = s; *p; p++)
		lines += *p == '\n';
	free(s);
	return lines > 0 ? lines - 1 : 0;
}

/* --- host snapshot ------------------------------------------------------------------------ */

struct host_snapshot {
	char netns[SNAP_MAX];     /* sorted names under /run/netns, one per line */
	char links[SNAP_MAX];     /* sorted names under /sys/class/net of the host */
	char iptables[SNAP_MAX];  /* iptables-save of the host without comment lines */
	char sysctl[N_KEYS][256];
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void sorted_dir(const char *dir, char *out, size_t len)
{
	char *names[4096];
	size_t n = 0;
	struct dirent *e;
	DIR *d = opendir(dir);

	out[0] = '\0';
	if (!d)
		return;
	while ((e = readdir(d)) && n < 4096)
		if (e->d_name[0] != '.')
			names[n++] = strdup(e->d_name);
	closedir(d);
	qsort(names, n, sizeof names[0], cmp_str);
	for (size_t i = 0; i < n; i++) {
		size_t used = strlen(out);

		snprintf(out + used, len - used, "%s\n", names[i]);
		free(names[i]);
	}
}

/* Output of a shell command, lines starting with '#' dropped (iptables-save dates them). */
static void command_output(const char *cmd, char *out, size_t len)
{
	FILE *p = popen(cmd, "re");
	char line[1024];
	size_t used = 0;

	out[0] = '\0';
	cr_assert_not_null(p, "popen %s", cmd);
	while (fgets(line, sizeof line, p))
		if (line[0] != '#' && used < len - 1)
			used += (size_t)snprintf(out + used, len - used, "%s", line);
	pclose(p);
}

static void snapshot(struct host_snapshot *s)
{
	sorted_dir(NETNS_RUN_DIR, s->netns, sizeof s->netns);
	sorted_dir("/sys/class/net", s->links, sizeof s->links);
	command_output("iptables-save 2>/dev/null", s->iptables, sizeof s->iptables);
	for (size_t k = 0; k < N_KEYS; k++)
		cr_assert_eq(sysctl_read(host_keys[k], s->sysctl[k], sizeof s->sysctl[k]), 0, "%s", host_keys[k]);
}

/* True when text (lines ending in '\n') has exactly this line. */
static bool has_line(const char *text, const char *line)
{
	size_t l = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && (p[l] == '\n' || p[l] == '\0'))
			return true;
	return false;
}

/* The prefix that stands for every run prefix: "sn", four hex digits, '-' (the only shape
 * testbed_random_prefix makes). For a run that failed before it had one to report. */
#define ANY_RUN_PREFIX "snXXXX-"

static bool has_prefix(const char *line, const char *prefix)
{
	if (strcmp(prefix, ANY_RUN_PREFIX))
		return !strncmp(line, prefix, strlen(prefix));
	if (strncmp(line, "sn", 2))
		return false;
	for (int i = 2; i < 6; i++)
		if (!isxdigit((unsigned char)line[i]) || isupper((unsigned char)line[i]))
			return false;
	return line[6] == '-';
}

/* Lines of a that are not in b and start with one of the prefixes (any line when there are
 * no prefixes), joined into out. Returns how many. */
static int lines_missing(const char *a, const char *b, const char *const *prefixes, int n_prefixes, char *out,
			 size_t len)
{
	char *copy = strdup(a), *save = NULL;
	int n = 0;

	cr_assert_not_null(copy);
	out[0] = '\0';
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		bool ours = n_prefixes == 0;

		for (int i = 0; i < n_prefixes; i++)
			ours |= has_prefix(line, prefixes[i]);
		if (!ours || has_line(b, line))
			continue;
		n++;
		strncat(out, line, len - strlen(out) - 1);
		strncat(out, "\n", len - strlen(out) - 1);
	}
	free(copy);
	return n;
}

/* The host compared with the snapshot. Host-wide settings (sysctls, iptables-save of the
 * host) must be equal. Names under /run/netns and host links must be equal too when
 * n_prefixes is 0; otherwise only names carrying one of the run prefixes count, so that
 * namespaces other users make and remove meanwhile on a shared host do not fail the test
 * (a name of ours that appeared or vanished still does). */
static bool host_matches(const struct host_snapshot *before, const struct host_snapshot *after,
			 const char *const *prefixes, int n_prefixes, char *why, size_t len)
{
	char diff[4096];

	for (size_t k = 0; k < N_KEYS; k++)
		if (strcmp(before->sysctl[k], after->sysctl[k])) {
			snprintf(why, len, "%s: '%s' before, '%s' after", host_keys[k], before->sysctl[k],
				 after->sysctl[k]);
			return false;
		}
	if (strcmp(before->iptables, after->iptables)) {
		snprintf(why, len, "iptables-save of the host:\n--- before:\n%s--- after:\n%s", before->iptables,
			 after->iptables);
		return false;
	}
	if (lines_missing(after->netns, before->netns, prefixes, n_prefixes, diff, sizeof diff)) {
		snprintf(why, len, "namespaces left under /run/netns:\n%s", diff);
		return false;
	}
	if (lines_missing(before->netns, after->netns, prefixes, n_prefixes, diff, sizeof diff)) {
		snprintf(why, len, "namespaces gone from /run/netns:\n%s", diff);
		return false;
	}
	if (lines_missing(after->links, before->links, prefixes, n_prefixes, diff, sizeof diff)) {
		snprintf(why, len, "host links left:\n%s", diff);
		return false;
	}
	if (lines_missing(before->links, after->links, prefixes, n_prefixes, diff, sizeof diff)) {
		snprintf(why, len, "host links gone:\n%s", diff);
		return false;
	}
	return true;
}

struct host_cmp {
	const struct host_snapshot *before;
	const char *const *prefixes;
	int n_prefixes;
	char *why;
	size_t len;
};

static bool host_back(void *arg)
{
	static struct host_snapshot after; /* large: not on the stack */
	struct host_cmp *c = arg;

	snapshot(&after);
	return host_matches(c->before, &after, c->prefixes, c->n_prefixes, c->why, c->len);
}

/* The host matches the snapshot (see host_matches), allowing SETTLE_MS for the kernel's
 * asynchronous frees. */
static void assert_host_as(const struct host_snapshot *before, const char *const *prefixes, int n_prefixes)
{
	static char why[3 * SNAP_MAX];
	struct host_cmp c = { before, prefixes, n_prefixes, why, sizeof why };

	if (!support_wait_until(host_back, &c, SETTLE_MS))
		cr_assert_fail("host not as before: %s", why);
}

/* Processes (not zombies) whose command line contains needle. */
static int procs_mentioning(const char *needle, pid_t *first)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int count = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d))) {
		char path[300], buf[4096];
		ssize_t n;
		int fd;

		if (e->d_name[0] < '1' || e->d_name[0] > '9' || atoi(e->d_name) == getpid())
			continue;
		snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n <= 0) /* zombies and kernel threads have an empty command line */
			continue;
		for (ssize_t i = 0; i < n; i++)
			if (!buf[i])
				buf[i] = ' ';
		buf[n] = '\0';
		if (strstr(buf, needle)) {
			if (first && !count)
				*first = atoi(e->d_name);
			count++;
		}
	}
	closedir(d);
	return count;
}

static bool no_procs_mentioning(void *needle)
{
	return procs_mentioning(needle, NULL) == 0;
}

/* --- running stalenet --------------------------------------------------------------------- */

struct proc_run {
	pid_t pid;
	char out[PATH_MAX], err[PATH_MAX];
	int status;
};

/* Start build/stalenet ARGS... (NULL-terminated) with stdout and stderr into files named
 * after tag, in the temporary directory (also the working directory). */
static void start_stalenet(struct proc_run *r, const char *tag, ...)
{
	const char *argv[32] = { stalenet_bin };
	int argc = 1;
	va_list ap;

	va_start(ap, tag);
	while (argc < 31 && (argv[argc] = va_arg(ap, const char *)))
		argc++;
	va_end(ap);
	argv[argc] = NULL;
	tpath(r->out, sizeof r->out, "%s.stdout", tag);
	tpath(r->err, sizeof r->err, "%s.stderr", tag);
	r->status = -1;
	r->pid = fork();
	cr_assert_geq(r->pid, 0);
	if (r->pid == 0) {
		int o = open(r->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int e = open(r->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		/* A test killed by its timeout takes its stalenet along (which then tears down). */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0 || chdir(tmpdir) < 0)
			_exit(126);
		if (stalenet_realtime) {
			struct sched_param sp = { .sched_priority = 5 };

			if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) < 0)
				_exit(125);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
}

static bool stalenet_ended(void *arg)
{
	struct proc_run *r = arg;
	pid_t p = waitpid(r->pid, &r->status, WNOHANG);

	cr_assert_geq(p, 0, "waitpid: %s", strerror(errno));
	return p == r->pid;
}

/* Wait up to timeout_ms; returns the exit code (128 + signal when killed), -1 on timeout. */
static int wait_stalenet(struct proc_run *r, int timeout_ms)
{
	if (!support_wait_until(stalenet_ended, r, timeout_ms))
		return -1;
	return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : 128 + WTERMSIG(r->status);
}

/* Run to completion; a run that hangs is killed (SIGINT, then SIGKILL) and fails the test. */
static int run_stalenet_to_end(struct proc_run *r, int timeout_ms)
{
	int rc = wait_stalenet(r, timeout_ms);

	if (rc < 0) {
		kill(r->pid, SIGINT);
		if (wait_stalenet(r, 20000) < 0) {
			kill(r->pid, SIGKILL);
			wait_stalenet(r, 5000);
		}
		cr_assert_fail("stalenet did not finish in %d ms", timeout_ms);
	}
	return rc;
}

struct rows_wait {
	const char *path;
	int min_rows;
	struct proc_run *alive;
};

static bool rows_written(void *arg)
{
	struct rows_wait *w = arg;

	if (csv_rows(w->path) >= w->min_rows)
		return true;
	if (w->alive && waitpid(w->alive->pid, &w->alive->status, WNOHANG) == w->alive->pid)
		cr_assert_fail("stalenet exited early (status %#x); stderr:\n%s", w->alive->status,
			       slurp(w->alive->err));
	return false;
}

/* Wait until path exists and has at least min_rows CSV rows; false on timeout. */
static bool wait_rows(const char *path, int min_rows, int timeout_ms, struct proc_run *alive)
{
	struct rows_wait w = { path, min_rows, alive };

	return support_wait_until(rows_written, &w, timeout_ms);
}

/* --- run directory checks ----------------------------------------------------------------- */

/* The value of "key" in meta.json as text (quotes stripped) into out; false when absent. */
static bool meta_value(const char *dir, const char *key, char *out, size_t len)
{
	char path[PATH_MAX], pat[80], *s, *p;
	size_t n = 0;

	snprintf(path, sizeof path, "%s/meta.json", dir);
	s = slurp(path);
	snprintf(pat, sizeof pat, "\"%s\":", key);
	p = strstr(s, pat);
	if (!p) {
		free(s);
		return false;
	}
	p += strlen(pat);
	while (*p == ' ' || *p == '"')
		p++;
	while (*p && *p != '"' && *p != ',' && *p != '\n' && n < len - 1)
		out[n++] = *p++;
	out[n] = '\0';
	free(s);
	return true;
}

/* The last line of the journal (no newline). */
static void journal_last(const char *dir, char *out, size_t len)
{
	char path[PATH_MAX], *s, *end, *start;

	snprintf(path, sizeof path, "%s/journal", dir);
	s = slurp(path);
	end = s + strlen(s);
	while (end > s && end[-1] == '\n')
		*--end = '\0';
	start = strrchr(s, '\n');
	snprintf(out, len, "%s", start ? start + 1 : s);
	free(s);
}

/* Every `proc PID STARTTIME NAME` record of the journal names a process that is gone. Returns
 * how many records there were. */
static int assert_journal_procs_gone(const char *dir)
{
	char path[PATH_MAX], line[1024];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof path, "%s/journal", dir);
	f = fopen(path, "re");
	cr_assert_not_null(f, "%s", path);
	while (fgets(line, sizeof line, f)) {
		int pid;
		unsigned long long st;
		char name[256];

		if (sscanf(line, "proc %d %llu %255s", &pid, &st, name) != 3)
			continue;
		n++;
		cr_assert_not(cleanup_proc_alive(pid, st), "process %s (pid %d) of %s still alive", name, pid, dir);
	}
	fclose(f);
	return n;
}

/* No live process has the run directory or the run prefix (linkd socket) on its command line. */
static void assert_no_run_procs(const char *dir, const char *prefix)
{
	char needle[PATH_MAX];
	pid_t pid = 0;

	cr_assert_eq(procs_mentioning(dir, &pid), 0, "a process (pid %d) naming %s is alive", pid, dir);
	snprintf(needle, sizeof needle, "linkd-%s", prefix);
	cr_assert_eq(procs_mentioning(needle, &pid), 0, "a process (pid %d) naming %s is alive", pid, needle);
}

/* The namespaces under /run/netns that start with prefix. */
static int netns_with_prefix(const char *prefix)
{
	DIR *d = opendir(NETNS_RUN_DIR);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += !strncmp(e->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

struct lc_row {
	char node[64], dir[8], verdict[8];
	int probes;
	double cfg_delay_ms, cfg_jitter_ms, cfg_loss, rtt_mean_ms, rtt_sd_ms, loss, late_p99_ms;
};

#define LC_HEADER \
	"node,direction,probes,cfg_delay_ms,cfg_jitter_ms,cfg_loss,rtt_mean_ms,rtt_sd_ms,loss,late_p99_ms,verdict"

/* Parse linkcheck.csv; checks the exact header. Returns the number of rows. */
static int read_linkcheck(const char *dir, struct lc_row *rows, int max)
{
	char path[PATH_MAX], line[512];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof path, "%s/linkcheck.csv", dir);
	f = fopen(path, "re");
	cr_assert_not_null(f, "no %s", path);
	cr_assert_not_null(fgets(line, sizeof line, f));
	cr_assert_str_eq(line, LC_HEADER "\n");
	while (n < max && fgets(line, sizeof line, f)) {
		struct lc_row *r = &rows[n++];

		/* late_p99_ms is filled in by the orchestrator after the probes: never empty here */
		cr_assert_eq(sscanf(line, "%63[^,],%7[^,],%d,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%7[^,\n]", r->node, r->dir,
				    &r->probes, &r->cfg_delay_ms, &r->cfg_jitter_ms, &r->cfg_loss, &r->rtt_mean_ms,
				    &r->rtt_sd_ms, &r->loss, &r->late_p99_ms, r->verdict),
			     11, "bad linkcheck row: %s", line);
	}
	fclose(f);
	return n;
}

struct lc_expect {
	const char *node;
	double delay_ms; /* one way, both directions */
};

/* Rows for every node and direction (up, down, rtt) exactly once; each with the configured
 * delay, all probes counted, no loss on these loss-free links, and a measured delay that is
 * at least the configured one and not far above it (slack_ms). */
static void assert_linkcheck(const char *dir, const struct lc_expect *want, int n_nodes, int probes, double slack_ms)
{
	static const char *dirs[] = { "up", "down", "rtt" };
	struct lc_row rows[64];
	int n = read_linkcheck(dir, rows, 64);

	cr_assert_eq(n, 3 * n_nodes, "%d linkcheck rows for %d nodes", n, n_nodes);
	for (int i = 0; i < n_nodes; i++)
		for (int d = 0; d < 3; d++) {
			double cfg = d == 2 ? 2 * want[i].delay_ms : want[i].delay_ms;
			int found = 0;

			for (int k = 0; k < n; k++) {
				const struct lc_row *r = &rows[k];

				if (strcmp(r->node, want[i].node) || strcmp(r->dir, dirs[d]))
					continue;
				found++;
				cr_expect_eq(r->probes, probes, "%s %s: %d probes", r->node, r->dir, r->probes);
				cr_expect_float_eq(r->cfg_delay_ms, cfg, 1e-3, "%s %s cfg delay %.3f", r->node, r->dir,
						   r->cfg_delay_ms);
				cr_expect_float_eq(r->loss, 0.0, 1e-9, "%s %s loss %f", r->node, r->dir, r->loss);
				cr_expect_geq(r->rtt_mean_ms, cfg - 0.2, "%s %s: %.3f ms below the configured %.3f",
					      r->node, r->dir, r->rtt_mean_ms, cfg);
				cr_expect_leq(r->rtt_mean_ms, cfg + slack_ms, "%s %s: %.3f ms, configured %.3f", r->node,
					      r->dir, r->rtt_mean_ms, cfg);
				/* the emulator's p99 lateness: known, not negative, and not beyond what the
				 * measured mean leaves room for (a late release shows in the round trip) */
				cr_expect_geq(r->late_p99_ms, 0.0, "%s %s: late_p99_ms %.3f", r->node, r->dir,
					      r->late_p99_ms);
				cr_expect_leq(r->late_p99_ms, slack_ms + 50.0, "%s %s: late_p99_ms %.3f", r->node, r->dir,
					      r->late_p99_ms);
				cr_expect(!strcmp(r->verdict, "ok") || !strcmp(r->verdict, "off") ||
					  !strcmp(r->verdict, "late"), "%s %s: verdict %s", r->node, r->dir, r->verdict);
				cr_expect_eq(!strcmp(r->verdict, "late"), r->late_p99_ms > 0.5, "%s %s: %s with p99 %.3f",
					     r->node, r->dir, r->verdict, r->late_p99_ms);
			}
			cr_assert_eq(found, 1, "%s %s: %d rows", want[i].node, dirs[d], found);
		}
}

/* The events.csv row of kind event for target (first one) into line; false when none. */
static bool find_event(const char *dir, const char *event, const char *target, char *line, size_t len)
{
	char path[PATH_MAX], pat[128];
	FILE *f;
	bool found = false;

	if (snprintf(path, sizeof path, "%s/events.csv", dir) >= (int)sizeof path ||
	    snprintf(pat, sizeof pat, ",%s,%s,", event, target) >= (int)sizeof pat)
		return false;
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, (int)len, f))
		found = strstr(line, pat) != NULL;
	fclose(f);
	return found;
}

/* --- scenarios ---------------------------------------------------------------------------- */

static const char scenario_linkcheck[] =
	"name: t-linkcheck\n"
	"seed: 1\n"
	"workload: linkcheck\n"
	"linkcheck: {probes: 100}\n"
	"stop: {time: 30s}\n"
	"workers: 4\n"
	"network:\n"
	"  default: {delay: 3ms, jitter: 1ms}\n"
	"  links:\n"
	"    - {nodes: \"probe[2-3]\", delay: 8ms, jitter: 0ms}\n";

/* A parameter server with two workers; the data path and stop time are filled in. */
static void write_training(const char *path, const char *extra_data, const char *stop, bool linkcheck,
			   const char *timeline)
{
	char text[2048];

	snprintf(text, sizeof text,
		 "name: t-train\n"
		 "seed: 5\n"
		 "stop: {time: %s}\n"
		 "%s"
		 "data: {set: fashion-mnist%s, partition: {scheme: iid}}\n"
		 "model: {kind: softmax}\n"
		 "train: {batch: 64, lr: 0.05}\n"
		 "topology: {kind: parameter-server}\n"
		 "consistency: {barrier: asp}\n"
		 "workers: 2\n"
		 "eval: {every: 500ms}\n"
		 "network:\n"
		 "  default: {delay: 2ms}\n"
		 "%s",
		 stop, linkcheck ? "linkcheck: {probes: 50}\n" : "linkcheck: false\n", extra_data,
		 timeline ? timeline : "");
	write_file(path, text);
}

/* --- 1. a linkcheck run ------------------------------------------------------------------- */

Test(run, linkcheck_run_writes_its_directory_and_leaves_the_host_as_before)
{
	static struct host_snapshot before;
	static const struct lc_expect want[] = {
		{ "probe0", 3 }, { "probe1", 3 }, { "probe2", 8 }, { "probe3", 8 },
	};
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32], prefix[32], value[128], *text;

	tpath(scen, sizeof scen, "linkcheck.yaml");
	tpath(dir, sizeof dir, "out");
	write_file(scen, scenario_linkcheck);
	snapshot(&before);

	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", NULL);
	cr_assert_eq(run_stalenet_to_end(&r, 30000), 0, "exit; stderr:\n%s", slurp(r.err));

	assert_linkcheck(dir, want, 4, 100, 4.0);
	cr_assert(meta_value(dir, "backend", value, sizeof value), "meta.json: no backend");
	cr_assert(!strcmp(value, "nfq") || !strcmp(value, "kernel"), "backend '%s'", value);
	cr_assert(meta_value(dir, "run_id", value, sizeof value) && value[0], "meta.json: no run_id");
	cr_assert(meta_value(dir, "monotonic_origin_ns", value, sizeof value), "meta.json: no origin");
	cr_assert_gt(strtoll(value, NULL, 10), 0, "monotonic_origin_ns %s", value);
	cr_assert(meta_value(dir, "status", value, sizeof value));
	cr_assert_str_eq(value, "complete");
	cr_assert(meta_value(dir, "prefix", prefix, sizeof prefix) && prefix[0], "meta.json: no prefix");

	/* The scenario as run, the journal closed, a log per node, the completion mark. */
	snprintf(path, sizeof path, "%s/scenario.yaml", dir);
	text = slurp(path);
	cr_assert(strstr(text, "t-linkcheck"), "scenario.yaml: %s", text);
	free(text);
	journal_last(dir, value, sizeof value);
	cr_assert_str_eq(value, "end");
	for (size_t i = 0; i < 4; i++) {
		struct stat st;

		snprintf(path, sizeof path, "%s/logs/%s.log", dir, want[i].node);
		cr_assert_eq(stat(path, &st), 0, "no %s", path);
		cr_assert_gt(st.st_size, 0, "%s is empty", path);
	}
	snprintf(path, sizeof path, "%s/complete", dir);
	cr_assert(exists(path));

	assert_host_as(&before, (const char *const[]){ prefix }, 1);
	cr_assert_gt(assert_journal_procs_gone(dir), 4, "the journal records the nodes and the hub");
	assert_no_run_procs(dir, prefix);
	snprintf(path, sizeof path, "/run/stalenet/%s", prefix);
	cr_assert_not(exists(path), "registry entry %s left", path);
}

/* --- 2. SIGINT mid-run -------------------------------------------------------------------- */

Test(run, sigint_mid_training_exits_130_keeps_traces_and_cleans_up)
{
	static struct host_snapshot before;
	static const struct lc_expect want[] = { { "server0", 2 }, { "worker0", 2 }, { "worker1", 2 } };
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32], prefix[32], value[64];
	int64_t t_int;
	int rc, kept = 0;

	tpath(scen, sizeof scen, "train.yaml");
	tpath(dir, sizeof dir, "out");
	write_training(scen, "", "60s", true, NULL);
	snapshot(&before);

	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", NULL);
	snprintf(path, sizeof path, "%s/progress.csv", dir);
	/* Training has run for ~3 s once progress.csv (a row per 100 ms) has 30 rows. */
	cr_assert(wait_rows(path, 30, 40000, &r), "training did not start; stderr:\n%s", slurp(r.err));
	cr_assert(meta_value(dir, "prefix", prefix, sizeof prefix));
	cr_assert_gt(netns_with_prefix(prefix), 0, "no namespaces of %s while running", prefix);

	t_int = now_ms();
	kill(r.pid, SIGINT);
	rc = wait_stalenet(&r, 10000);
	cr_assert_neq(rc, -1, "no exit 10 s after SIGINT");
	cr_assert_eq(rc, 130, "exit %d; stderr:\n%s", rc, slurp(r.err));
	cr_expect_leq(now_ms() - t_int, 5000, "exit took %lld ms", (long long)(now_ms() - t_int));

	/* The self-check ran before training: a row per node, the roles told apart. */
	assert_linkcheck(dir, want, 3, 50, 4.0);
	/* Traces written so far are kept. */
	snprintf(path, sizeof path, "%s/eval.csv", dir);
	kept += csv_rows(path) > 0;
	snprintf(path, sizeof path, "%s/nodes/worker0.csv", dir);
	kept += csv_rows(path) > 0;
	cr_assert_gt(kept, 0, "no eval.csv or nodes/*.csv rows kept");
	cr_assert(meta_value(dir, "status", value, sizeof value));
	cr_assert_str_eq(value, "interrupted");
	snprintf(path, sizeof path, "%s/complete", dir);
	cr_assert_not(exists(path), "an interrupted run is not complete");
	journal_last(dir, value, sizeof value);
	cr_assert_str_eq(value, "end");

	assert_host_as(&before, (const char *const[]){ prefix }, 1);
	assert_journal_procs_gone(dir);
	assert_no_run_procs(dir, prefix);
}

struct file_has {
	const char *path, *needle;
	struct proc_run *alive;
};

static bool file_has(void *arg)
{
	struct file_has *w = arg;
	char *s = slurp(w->path);
	bool yes = strstr(s, w->needle) != NULL;

	free(s);
	if (!yes && w->alive && waitpid(w->alive->pid, &w->alive->status, WNOHANG) == w->alive->pid)
		cr_assert_fail("stalenet exited early (status %#x); stderr:\n%s", w->alive->status,
			       slurp(w->alive->err));
	return yes;
}

/* A SIGINT during the link self-check, before training: the probes stopped by it end as
 * stopped, not failed. The probers were started (the reflector listens only once started) and
 * send for 5 s; the reflector stops at once, so each prober's count query finds it gone and
 * the prober exits 1. The run is interrupted (exit 130, meta.json), events.csv says so
 * (stop,all,interrupted) and names no node as failed, training never starts, and the host is
 * as before. */
Test(run, sigint_during_the_link_self_check_is_no_node_failure)
{
	static struct host_snapshot before;
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32], prefix[32], value[64], *ev, *err;
	int rc;

	tpath(scen, sizeof scen, "selfcheck.yaml");
	tpath(dir, sizeof dir, "out");
	write_file(scen, "name: t-selfcheck\nseed: 5\nstop: {time: 60s}\nlinkcheck: {probes: 1000}\n"
			 "data: {set: fashion-mnist, partition: {scheme: iid}}\nmodel: {kind: softmax}\n"
			 "train: {batch: 64, lr: 0.05}\ntopology: {kind: parameter-server}\nworkers: 2\n"
			 "network: {default: {delay: 2ms}}\n");
	snapshot(&before);

	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", NULL);
	snprintf(path, sizeof path, "%s/logs/hub.log", dir);
	struct file_has w = { path, "reflector: listening", &r };
	cr_assert(support_wait_until(file_has, &w, 40000), "the self-check did not start; stderr:\n%s", slurp(r.err));
	cr_assert(meta_value(dir, "prefix", prefix, sizeof prefix));
	cr_assert_gt(netns_with_prefix(prefix), 0, "no namespaces of %s while running", prefix);

	kill(r.pid, SIGINT);
	rc = wait_stalenet(&r, 30000);
	err = slurp(r.err);
	cr_assert_neq(rc, -1, "no exit 30 s after SIGINT");
	cr_assert_eq(rc, 130, "exit %d; stderr:\n%s", rc, err);
	cr_expect_null(strstr(err, " died: "), "%s", err);

	snprintf(path, sizeof path, "%s/events.csv", dir);
	ev = slurp(path);
	const char *stop = strstr(ev, ",stop,all,interrupted\n");
	cr_expect(stop && !strstr(stop + 1, ",stop,all,"), "not one interruption row:\n%s", ev);
	cr_expect_null(strstr(ev, "node_failed"), "%s", ev);
	cr_expect_null(strstr(ev, ",start,all,"), "training started:\n%s", ev);
	snprintf(path, sizeof path, "%s/progress.csv", dir);
	cr_expect_not(exists(path), "training started: %s exists", path);
	cr_assert(meta_value(dir, "status", value, sizeof value));
	cr_assert_str_eq(value, "interrupted");
	snprintf(path, sizeof path, "%s/complete", dir);
	cr_assert_not(exists(path), "an interrupted run is not complete");
	journal_last(dir, value, sizeof value);
	cr_assert_str_eq(value, "end");

	assert_host_as(&before, (const char *const[]){ prefix }, 1);
	cr_assert_gt(assert_journal_procs_gone(dir), 3, "the journal records the probers and the hub");
	assert_no_run_procs(dir, prefix);
	free(ev);
	free(err);
}

/* The pid of the journal's `proc` record named name (the latest), 0 when none. */
static pid_t journal_pid(const char *dir, const char *name)
{
	char path[PATH_MAX], line[1024];
	pid_t found = 0;
	FILE *f;

	snprintf(path, sizeof path, "%s/journal", dir);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		int pid;
		unsigned long long st;
		char nm[256];

		if (sscanf(line, "proc %d %llu %255s", &pid, &st, nm) == 3 && !strcmp(nm, name))
			found = pid;
	}
	fclose(f);
	return found;
}

/* Directories of the run's cgroups (prefix) on either hierarchy: v2 ROOT/PREFIX, v1
 * ROOT/CONTROLLER/PREFIX. */
static int run_cgroup_dirs(const char *prefix)
{
	static const char *const where[] = { "", "cpu/", "cpuset/", "memory/" };
	int n = 0;

	for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
		char p[PATH_MAX];

		snprintf(p, sizeof p, "/sys/fs/cgroup/%s%s", where[i], prefix);
		n += exists(p);
	}
	return n;
}

static int count_of(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Ctrl-C twice while a node hangs: a worker stopped (SIGSTOP) ignores the stop, so the first
 * interruption alone would wait for it 15 s before SIGTERM and 5 s more before SIGKILL (and
 * 3 s for a stopped emulator in the teardown). The second cuts that short: the orchestrator
 * exits 130 within seconds, with the host as before (namespaces, links, iptables, sysctls,
 * cgroups: worker0 runs under a memory limit), every process of the run gone, the rows
 * written before the interruptions kept, the run recorded as interrupted. More interruptions
 * (a storm of SIGINT, SIGTERM, SIGHUP) change nothing. */
Test(run, second_sigint_stops_at_once_and_still_cleans_up, .timeout = 120)
{
	static struct host_snapshot before;
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32], prefix[32], value[64], text[2048], *err;
	int rc, progress_before, worker_before, eval_before;
	pid_t worker, linkd;
	int64_t t_int;

	tpath(scen, sizeof scen, "train.yaml");
	tpath(dir, sizeof dir, "out");
	snprintf(text, sizeof text,
		 "name: t-stopnow\nseed: 5\nstop: {time: 60s}\nlinkcheck: false\n"
		 "data: {set: fashion-mnist, partition: {scheme: iid}}\nmodel: {kind: softmax}\n"
		 "train: {batch: 64, lr: 0.05}\ntopology: {kind: parameter-server}\n"
		 "consistency: {barrier: asp}\nworkers: 2\neval: {every: 500ms}\n"
		 "network:\n  default: {delay: 2ms}\nresources:\n  - {nodes: worker0, memory: 512MiB}\n");
	write_file(scen, text);
	snapshot(&before);

	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", NULL);
	snprintf(path, sizeof path, "%s/progress.csv", dir);
	cr_assert(wait_rows(path, 30, 40000, &r), "training did not start; stderr:\n%s", slurp(r.err));
	cr_assert(meta_value(dir, "prefix", prefix, sizeof prefix));
	cr_assert_gt(run_cgroup_dirs(prefix), 0, "no cgroup of %s while running", prefix);
	worker = journal_pid(dir, "worker0");
	cr_assert_gt(worker, 0, "no proc record of worker0 in %s/journal", dir);
	/* the hang: the worker (and the userspace emulator, when the run has one) stopped */
	cr_assert_eq(kill(worker, SIGSTOP), 0, "SIGSTOP worker0 (pid %d): %s", (int)worker, strerror(errno));
	linkd = journal_pid(dir, "linkd");
	if (linkd > 0)
		cr_assert_eq(kill(linkd, SIGSTOP), 0, "SIGSTOP linkd (pid %d): %s", (int)linkd, strerror(errno));
	progress_before = csv_rows(path);
	snprintf(path, sizeof path, "%s/nodes/worker1.csv", dir);
	worker_before = csv_rows(path);
	snprintf(path, sizeof path, "%s/eval.csv", dir);
	eval_before = csv_rows(path);
	cr_assert_gt(worker_before + eval_before, 0, "no node rows before the interruptions");

	/* the first: the stop begins (its row in events.csv is the sign it was acted upon) */
	cr_assert_eq(kill(r.pid, SIGINT), 0);
	snprintf(path, sizeof path, "%s/events.csv", dir);
	struct file_has w = { path, ",stop,all,interrupted", &r };
	cr_assert(support_wait_until(file_has, &w, 10000), "the first SIGINT did not stop the run; stderr:\n%s",
		  slurp(r.err));
	/* the second, then a storm */
	t_int = now_ms();
	cr_assert_eq(kill(r.pid, SIGINT), 0);
	kill(r.pid, SIGINT);
	kill(r.pid, SIGTERM);
	kill(r.pid, SIGHUP);
	kill(r.pid, SIGINT);
	rc = wait_stalenet(&r, 30000);
	err = slurp(r.err);
	cr_assert_neq(rc, -1, "no exit 30 s after the second SIGINT; stderr:\n%s", err);
	fprintf(stderr, "second SIGINT -> killed, torn down, exited: %lld ms\n", (long long)(now_ms() - t_int));
	cr_assert_eq(rc, 130, "exit %d; stderr:\n%s", rc, err);
	/* the graceful stop alone would still be waiting for worker0 (15 s to SIGTERM) */
	cr_expect_leq(now_ms() - t_int, 8000, "exit took %lld ms after the second SIGINT",
		      (long long)(now_ms() - t_int));
	/* each step said once, the storm nothing more */
	cr_expect_eq(count_of(err, "to stop at once"), 1, "%s", err);
	cr_expect_eq(count_of(err, "interrupted again: stopping at once"), 1, "%s", err);
	cr_expect_null(strstr(err, "ignored stop"), "the graceful stop's escalation ran:\n%s", err);

	/* the rows written before are there */
	snprintf(path, sizeof path, "%s/progress.csv", dir);
	cr_expect_geq(csv_rows(path), progress_before, "progress.csv lost rows");
	snprintf(path, sizeof path, "%s/nodes/worker1.csv", dir);
	cr_expect_geq(csv_rows(path), worker_before, "nodes/worker1.csv lost rows");
	snprintf(path, sizeof path, "%s/eval.csv", dir);
	cr_expect_geq(csv_rows(path), eval_before, "eval.csv lost rows");
	/* recorded as interrupted, not complete; the teardown ran to its end */
	cr_assert(meta_value(dir, "status", value, sizeof value));
	cr_assert_str_eq(value, "interrupted");
	snprintf(path, sizeof path, "%s/complete", dir);
	cr_assert_not(exists(path), "an interrupted run is not complete");
	journal_last(dir, value, sizeof value);
	cr_assert_str_eq(value, "end");
	snprintf(path, sizeof path, "%s/events.csv", dir);
	free(err);
	err = slurp(path);
	cr_expect_eq(count_of(err, ",stop,all,"), 1, "%s", err);
	cr_expect_null(strstr(err, "node_failed"), "%s", err);

	assert_host_as(&before, (const char *const[]){ prefix }, 1);
	cr_assert_eq(run_cgroup_dirs(prefix), 0, "cgroups of %s left", prefix);
	cr_assert_gt(assert_journal_procs_gone(dir), 2, "the journal records the nodes");
	assert_no_run_procs(dir, prefix);
	snprintf(path, sizeof path, "/run/stalenet/linkd-%s.sock", prefix);
	cr_assert_not(exists(path), "emulator socket %s left", path);
	free(err);
}

/* The journal's prefix (its header's sixth field) into out, false when not yet written. */
static bool journal_prefix(const char *dir, char *out, size_t len)
{
	char path[PATH_MAX + 16], line[PATH_MAX + 128], pfx[32];
	bool ok = false;
	FILE *f;

	snprintf(path, sizeof path, "%s/journal", dir);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (fgets(line, sizeof line, f) && sscanf(line, "stalenet-journal %*s %*s %*s %*s %31s", pfx) == 1 &&
	    strlen(pfx) < len) {
		memcpy(out, pfx, strlen(pfx) + 1);
		ok = true;
	}
	fclose(f);
	return ok;
}

/* Ctrl-C twice during the setup, while the userspace link emulator hangs: stopped (SIGSTOP) as
 * soon as its process is recorded, before its exec (at_socket false: the launch awaits the
 * exec), or once its control socket exists (its start, a ping, then the shaping requests are
 * waited for: up to 55 s, 5 s per request). A first interruption leaves the setup be (the run
 * stops before its nodes start), the second ends those waits at once: exit 130 within seconds,
 * no node started, the run recorded as interrupted, the host as before. */
static void sigint_twice_during_setup(const char *tag, bool at_socket)
{
	static struct host_snapshot before;
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32], prefix[32], value[64], *err, *ev;
	pid_t linkd = 0;
	int64_t deadline, t_int, took;
	int rc;

	tpath(scen, sizeof scen, "%s.yaml", tag);
	tpath(dir, sizeof dir, "%s", tag);
	write_file(scen, "name: t-setupcut\nseed: 5\nstop: {time: 60s}\nlinkcheck: false\n"
			 "data: {set: fashion-mnist, partition: {scheme: iid}}\nmodel: {kind: softmax}\n"
			 "train: {batch: 64, lr: 0.05}\ntopology: {kind: parameter-server}\n"
			 "consistency: {barrier: asp}\nworkers: 3\nnetwork:\n  default: {delay: 2ms}\n");
	snapshot(&before);
	start_stalenet(&r, tag, "run", scen, "--out", dir, "--backend", "nfq", "--quiet", NULL);
	/* the emulator stopped the moment it is recorded (a bounded poll, 1 ms apart) */
	deadline = now_ms() + 60000;
	while (now_ms() < deadline && !(linkd = journal_pid(dir, "linkd")) && !stalenet_ended(&r))
		support_sleep_ms(1);
	cr_assert_gt(linkd, 0, "no proc record of linkd in %s/journal; stderr:\n%s", dir, slurp(r.err));
	cr_assert(journal_prefix(dir, prefix, sizeof prefix));
	snprintf(path, sizeof path, "/run/stalenet/linkd-%s.sock", prefix);
	while (at_socket && now_ms() < deadline && !exists(path) && !stalenet_ended(&r))
		support_sleep_ms(1);
	cr_assert(!at_socket || exists(path), "no emulator socket %s; stderr:\n%s", path, slurp(r.err));
	cr_assert_eq(kill(linkd, SIGSTOP), 0, "SIGSTOP linkd (pid %d): %s", (int)linkd, strerror(errno));

	/* the first: said at once by the handler; the setup goes on waiting for the emulator */
	cr_assert_eq(kill(r.pid, SIGINT), 0);
	struct file_has w = { r.err, "interrupted: stopping the run", &r };
	cr_assert(support_wait_until(file_has, &w, 10000), "the first SIGINT was not said; stderr:\n%s",
		  slurp(r.err));
	cr_assert_eq(journal_pid(dir, "worker0"), 0, "the nodes were started: the setup was over, no test");
	/* the second */
	t_int = now_ms();
	cr_assert_eq(kill(r.pid, SIGINT), 0);
	rc = wait_stalenet(&r, 30000);
	took = now_ms() - t_int;
	err = slurp(r.err);
	if (rc < 0) {
		kill(linkd, SIGCONT);
		kill(r.pid, SIGINT);
		wait_stalenet(&r, 60000);
	}
	cr_assert_neq(rc, -1, "no exit 30 s after the second SIGINT; stderr:\n%s", err);
	fprintf(stderr, "second SIGINT during the setup (emulator stopped %s) -> torn down, exited: %lld ms\n",
		at_socket ? "once listening" : "before its exec", (long long)took);
	cr_assert_eq(rc, 130, "exit %d; stderr:\n%s", rc, err);
	cr_expect_leq(took, 8000, "exit took %lld ms after the second SIGINT", (long long)took);
	cr_expect_eq(count_of(err, "interrupted again: stopping at once"), 1, "%s", err);
	cr_expect_null(strstr(err, " E "), "an error where the user stopped the setup:\n%s", err);
	/* no node was started; the run is interrupted, not failed */
	cr_expect_eq(journal_pid(dir, "worker0"), 0, "a node was started after the interruptions");
	cr_assert(meta_value(dir, "status", value, sizeof value));
	cr_assert_str_eq(value, "interrupted");
	snprintf(path, sizeof path, "%s/complete", dir);
	cr_assert_not(exists(path), "an interrupted run is not complete");
	snprintf(path, sizeof path, "%s/events.csv", dir);
	ev = slurp(path);
	cr_expect(strstr(ev, ",stop,all,interrupted"), "%s", ev);
	cr_expect_null(strstr(ev, ",start,all,"), "%s", ev);
	free(ev);
	journal_last(dir, value, sizeof value);
	cr_assert_str_eq(value, "end");
	assert_host_as(&before, (const char *const[]){ prefix }, 1);
	assert_no_run_procs(dir, prefix);
	snprintf(path, sizeof path, "/run/stalenet/linkd-%s.sock", prefix);
	cr_assert_not(exists(path), "emulator socket %s left", path);
	free(err);
}

/* One Ctrl-C during the setup (as the link emulator is launched): the setup finishes, then the
 * run stops before any node is launched: exit 130, no node's process, no start row, the run
 * interrupted, the host as before. */
Test(run, sigint_during_setup_starts_no_node, .timeout = 120)
{
	static struct host_snapshot before;
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32], prefix[32], value[64], *err, *ev;
	int64_t deadline;
	pid_t linkd = 0;
	int rc;

	tpath(scen, sizeof scen, "setup1.yaml");
	tpath(dir, sizeof dir, "setup1");
	write_file(scen, "name: t-setup1\nseed: 5\nstop: {time: 60s}\nlinkcheck: false\n"
			 "data: {set: fashion-mnist, partition: {scheme: iid}}\nmodel: {kind: softmax}\n"
			 "train: {batch: 64, lr: 0.05}\ntopology: {kind: parameter-server}\n"
			 "consistency: {barrier: asp}\nworkers: 2\nnetwork:\n  default: {delay: 2ms}\n");
	snapshot(&before);
	start_stalenet(&r, "setup1", "run", scen, "--out", dir, "--backend", "nfq", "--quiet", NULL);
	deadline = now_ms() + 60000;
	while (now_ms() < deadline && !(linkd = journal_pid(dir, "linkd")) && !stalenet_ended(&r))
		support_sleep_ms(1);
	cr_assert_gt(linkd, 0, "no proc record of linkd in %s/journal; stderr:\n%s", dir, slurp(r.err));
	cr_assert(journal_prefix(dir, prefix, sizeof prefix));
	cr_assert_eq(kill(r.pid, SIGINT), 0);
	rc = wait_stalenet(&r, 60000);
	err = slurp(r.err);
	cr_assert_neq(rc, -1, "no exit 60 s after the SIGINT; stderr:\n%s", err);
	cr_assert_eq(rc, 130, "exit %d; stderr:\n%s", rc, err);
	cr_expect_null(strstr(err, " E "), "an error where the user stopped the setup:\n%s", err);
	cr_expect_eq(journal_pid(dir, "worker0"), 0, "a node was launched after the interruption");
	cr_expect_eq(journal_pid(dir, "server0"), 0, "a node was launched after the interruption");
	cr_assert(meta_value(dir, "status", value, sizeof value));
	cr_assert_str_eq(value, "interrupted");
	snprintf(path, sizeof path, "%s/events.csv", dir);
	ev = slurp(path);
	cr_expect_eq(count_of(ev, ",stop,all,interrupted"), 1, "%s", ev);
	cr_expect_null(strstr(ev, ",start,all,"), "%s", ev);
	free(ev);
	journal_last(dir, value, sizeof value);
	cr_assert_str_eq(value, "end");
	assert_host_as(&before, (const char *const[]){ prefix }, 1);
	assert_no_run_procs(dir, prefix);
	free(err);
}

Test(run, second_sigint_during_setup_ends_the_emulators_launch, .timeout = 120)
{
	sigint_twice_during_setup("setup-exec", false);
}

Test(run, second_sigint_during_setup_ends_the_emulators_requests, .timeout = 120)
{
	sigint_twice_during_setup("setup-ping", true);
}

/* Starts `stalenet run scen --out dir` (tag: its output files) and interrupts it once its run
 * in rdir has ended of itself: worker0 is stopped (SIGSTOP) while training, so the stop at the
 * stop time goes unheeded and the wind-down lasts the stop's graces (stop.grace to SIGTERM,
 * which a stopped process keeps pending, and 5 s more to SIGKILL); SIGINT once the stop row
 * (stop.time reached) is written, well inside them. Its prefix into prefix, the time from
 * the stop row seen to the exit into *took_ms. Returns the exit code, or -1 when it did not
 * end 60 s after the SIGINT. */
static int sigint_in_the_wind_down(struct proc_run *r, const char *tag, const char *scen, const char *dir,
				   const char *rdir, char *prefix, size_t prefix_len, int64_t *took_ms)
{
	char path[PATH_MAX + 32];
	pid_t worker;
	int rc;

	start_stalenet(r, tag, "run", scen, "--out", dir, "--quiet", NULL);
	snprintf(path, sizeof path, "%s/progress.csv", rdir);
	cr_assert(wait_rows(path, 10, 60000, r), "training did not start; stderr:\n%s", slurp(r->err));
	cr_assert(meta_value(rdir, "prefix", prefix, prefix_len));
	worker = journal_pid(rdir, "worker0");
	cr_assert_gt(worker, 0, "no proc record of worker0 in %s/journal", rdir);
	cr_assert_eq(kill(worker, SIGSTOP), 0, "SIGSTOP worker0 (pid %d): %s", (int)worker, strerror(errno));
	snprintf(path, sizeof path, "%s/events.csv", rdir);
	char *ev = slurp(path);
	cr_assert_null(strstr(ev, ",stop,all,"), "the run stopped before worker0 hung: no test\n%s", ev);
	free(ev);
	struct file_has w = { path, ",stop,all,stop.time reached", r };
	cr_assert(support_wait_until(file_has, &w, 30000), "no stop at the stop time; stderr:\n%s", slurp(r->err));
	int64_t t_stop = now_ms();
	cr_assert_eq(kill(r->pid, SIGINT), 0);
	rc = wait_stalenet(r, 60000);
	*took_ms = now_ms() - t_stop;
	if (rc < 0) {
		kill(r->pid, SIGINT);
		wait_stalenet(r, 30000);
	}
	return rc;
}

/* A Ctrl-C once the run has reached its stop time, during its wind-down (a node that does not
 * stop is waited for through the graces): the work was done, so the run stays complete and
 * the exit code is a complete run's, 0; the interruption is said to have come after the run's
 * end, events.csv has the one stop row of the stop time, and the host is as before. The
 * scenario leaves stop.grace at its default: the one test that the default graces hold (the
 * exit no sooner than their 15 + 5 s after the stop). */
Test(run, sigint_after_the_stop_time_leaves_the_run_complete, .timeout = 150)
{
	static struct host_snapshot before;
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32], prefix[32], value[64], *err, *ev;
	int64_t took = 0;
	int rc;

	tpath(scen, sizeof scen, "late.yaml");
	tpath(dir, sizeof dir, "late");
	write_file(scen, "name: t-late\nseed: 5\nstop: {time: 4s}\nlinkcheck: false\n"
			 "data: {set: fashion-mnist, partition: {scheme: iid}}\nmodel: {kind: softmax}\n"
			 "train: {batch: 64, lr: 0.05}\ntopology: {kind: parameter-server}\n"
			 "consistency: {barrier: asp}\nworkers: 2\nnetwork:\n  default: {delay: 1ms}\n");
	snapshot(&before);
	rc = sigint_in_the_wind_down(&r, "late", scen, dir, dir, prefix, sizeof prefix, &took);
	err = slurp(r.err);
	fprintf(stderr, "stop row -> exited (default stop.grace): %lld ms\n", (long long)took);
	cr_assert_neq(rc, -1, "no exit 60 s after the SIGINT; stderr:\n%s", err);
	cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, err);
	/* worker0 (stopped) goes with the SIGKILL after both default graces; the stop row is seen
	 * within a poll's 64 ms of its writing (a loaded host: 0.5 s) */
	cr_expect_geq(took, SUPERVISE_STOP_GRACE_MS + SUPERVISE_TERM_GRACE_MS - 500,
		      "exit %lld ms after the stop: less than the default graces", (long long)took);
	cr_expect(strstr(err, "interrupted after the run's end (stop.time reached): it stays complete"), "%s", err);
	cr_expect(strstr(err, "interrupted after the last run had ended"), "%s", err);
	/* the signal handler's own line says so too, not that the run is being stopped */
	cr_expect(strstr(err, "interrupted after the run had finished: it stays complete"), "%s", err);
	cr_expect_null(strstr(err, "interrupted: stopping the run"), "%s", err);
	/* the wind-down went on after the interruption: the graceful escalation ran */
	cr_expect(strstr(err, "node worker0 ignored stop: SIGTERM"), "%s", err);
	cr_assert(meta_value(dir, "status", value, sizeof value));
	cr_assert_str_eq(value, "complete");
	snprintf(path, sizeof path, "%s/complete", dir);
	cr_assert(exists(path), "a complete run is marked complete");
	snprintf(path, sizeof path, "%s/events.csv", dir);
	ev = slurp(path);
	cr_expect_eq(count_of(ev, ",stop,all,"), 1, "%s", ev);
	cr_expect_null(strstr(ev, "interrupted"), "%s", ev);
	cr_expect_null(strstr(ev, "node_failed"), "%s", ev);
	free(ev);
	snprintf(path, sizeof path, "%s/summary.csv", dir);
	ev = slurp(path);
	cr_expect_eq(count_of(ev, ",complete"), 1, "summary.csv: the run's row, complete:\n%s", ev);
	journal_last(dir, value, sizeof value);
	cr_assert_str_eq(value, "end");
	assert_host_as(&before, (const char *const[]){ prefix }, 1);
	assert_journal_procs_gone(dir);
	assert_no_run_procs(dir, prefix);
	free(ev);
	free(err);
}

/* The same in a sweep of two runs: the first stays complete, and the interruption still stops
 * the sweep: the second run is left unrun, and that makes the exit 130 (interrupted). With
 * stop.grace 2 s: the wind-down ends with worker0's SIGKILL 2 + 5 s after the stop, before
 * the default grace's SIGTERM would have come. */
Test(run, sigint_after_a_sweep_runs_stop_time_leaves_the_rest_unrun, .timeout = 150)
{
	const int grace_ms = 2000;
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], rdir[PATH_MAX + 32], path[PATH_MAX + 64], prefix[32], value[64], *err;
	char yaml[1024];
	int64_t took = 0;
	int rc;

	tpath(scen, sizeof scen, "latesweep.yaml");
	tpath(dir, sizeof dir, "latesweep");
	snprintf(yaml, sizeof yaml, "name: t-latesweep\nseed: 5\nstop: {time: 4s, grace: %dms}\nlinkcheck: false\n"
		 "data: {set: fashion-mnist, partition: {scheme: iid}}\nmodel: {kind: softmax}\n"
		 "train: {batch: 64, lr: 0.05}\ntopology: {kind: parameter-server}\n"
		 "consistency: {barrier: asp}\nworkers: 2\nnetwork:\n  default: {delay: 1ms}\n"
		 "sweep: {workers: [2, 3]}\n", grace_ms);
	write_file(scen, yaml);
	snprintf(rdir, sizeof rdir, "%s/workers=2+rep=1", dir);
	rc = sigint_in_the_wind_down(&r, "latesweep", scen, dir, rdir, prefix, sizeof prefix, &took);
	err = slurp(r.err);
	fprintf(stderr, "stop row -> exited (stop.grace %d ms): %lld ms\n", grace_ms, (long long)took);
	cr_assert_neq(rc, -1, "no exit 60 s after the SIGINT; stderr:\n%s", err);
	cr_assert_eq(rc, 130, "exit %d; stderr:\n%s", rc, err);
	cr_expect(strstr(err, "node worker0 ignored stop: SIGTERM"), "%s", err);
	cr_expect_geq(took, grace_ms + SUPERVISE_TERM_GRACE_MS - 500, "exit %lld ms after the stop: less than the graces",
		      (long long)took);
	cr_expect_lt(took, SUPERVISE_STOP_GRACE_MS, "exit %lld ms after the stop: stop.grace %d ms not applied",
		     (long long)took, grace_ms);
	cr_expect(strstr(err, "interrupted between runs: 1 run(s) left unrun"), "%s", err);
	cr_assert(meta_value(rdir, "status", value, sizeof value));
	cr_expect_str_eq(value, "complete");
	snprintf(path, sizeof path, "%s/complete", rdir);
	cr_expect(exists(path), "the first run is marked complete");
	snprintf(path, sizeof path, "%s/workers=3+rep=1/meta.json", dir);
	cr_expect_not(exists(path), "the second run was started");
	assert_journal_procs_gone(rdir);
	assert_no_run_procs(rdir, prefix);
	free(err);
}

/* --- 3. kill -9, then cleanup ------------------------------------------------------------- */

Test(run, kill9_then_cleanup_restores_the_host)
{
	static struct host_snapshot before;
	struct proc_run r, cl;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32], prefix[32], value[64], *out;
	int rc;

	tpath(scen, sizeof scen, "train.yaml");
	tpath(dir, sizeof dir, "out");
	write_training(scen, "", "60s", false, NULL);
	snapshot(&before);

	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", NULL);
	snprintf(path, sizeof path, "%s/progress.csv", dir);
	cr_assert(wait_rows(path, 10, 40000, &r), "training did not start; stderr:\n%s", slurp(r.err));
	cr_assert(meta_value(dir, "prefix", prefix, sizeof prefix));
	kill(r.pid, SIGKILL);
	cr_assert_eq(wait_stalenet(&r, 5000), 128 + SIGKILL);

	/* Nodes and the emulator die with the orchestrator (PDEATHSIG)... Up to 20 s for them to
	 * be gone, not 3: on a loaded host the exits of several processes that each hold the
	 * data set can take seconds, and the wait ends as soon as they are gone. Still far from
	 * proving nothing: without PDEATHSIG they would run to the 60 s stop time. */
	support_wait_until(no_procs_mentioning, dir, 20000);
	assert_no_run_procs(dir, prefix);
	/* ...but its namespaces stay until cleanup. */
	cr_assert_gt(netns_with_prefix(prefix), 0, "namespaces of %s gone before cleanup", prefix);
	journal_last(dir, value, sizeof value);
	cr_assert_str_neq(value, "end");

	start_stalenet(&cl, "cleanup", "cleanup", dir, NULL);
	rc = run_stalenet_to_end(&cl, 30000);
	out = slurp(cl.out);
	cr_assert_eq(rc, 0, "cleanup exit %d; stderr:\n%s", rc, slurp(cl.err));
	cr_assert(strstr(out, "1 replayed"), "cleanup said: %s", out);
	free(out);

	assert_host_as(&before, (const char *const[]){ prefix }, 1);
	assert_journal_procs_gone(dir);
	journal_last(dir, value, sizeof value);
	cr_assert_str_eq(value, "end");
	snprintf(path, sizeof path, "/run/stalenet/%s", prefix);
	cr_assert_not(exists(path), "registry entry %s left", path);
	snprintf(path, sizeof path, "/run/stalenet/linkd-%s.sock", prefix);
	cr_assert_not(exists(path), "emulator socket %s left", path);

	/* A second cleanup finds the run already clean. */
	start_stalenet(&cl, "cleanup2", "cleanup", dir, NULL);
	cr_assert_eq(run_stalenet_to_end(&cl, 30000), 0);
	out = slurp(cl.out);
	cr_assert(strstr(out, "0 replayed"), "second cleanup said: %s", out);
	free(out);
	assert_host_as(&before, (const char *const[]){ prefix }, 1);
}

/* --- 4. two runs at once ------------------------------------------------------------------ */

Test(run, two_runs_at_once_do_not_disturb_each_other)
{
	static struct host_snapshot before;
	static const struct lc_expect want_a[] = { { "probe0", 3 }, { "probe1", 3 }, { "probe2", 8 }, { "probe3", 8 } };
	static const struct lc_expect want_b[] = { { "probe0", 15 }, { "probe1", 15 }, { "probe2", 15 } };
	struct proc_run a, b;
	char scen_a[PATH_MAX], scen_b[PATH_MAX], dir_a[PATH_MAX], dir_b[PATH_MAX];
	char prefix_a[32], prefix_b[32], id[64];
	int rc_a, rc_b;

	tpath(scen_a, sizeof scen_a, "a.yaml");
	tpath(scen_b, sizeof scen_b, "b.yaml");
	tpath(dir_a, sizeof dir_a, "out-a");
	tpath(dir_b, sizeof dir_b, "out-b");
	write_file(scen_a, scenario_linkcheck);
	write_file(scen_b, "name: t-linkcheck-b\n"
			   "seed: 2\n"
			   "workload: linkcheck\n"
			   "linkcheck: {probes: 100}\n"
			   "stop: {time: 30s}\n"
			   "workers: 3\n"
			   "network:\n"
			   "  default: {delay: 15ms}\n");
	snapshot(&before);

	start_stalenet(&a, "a", "run", scen_a, "--out", dir_a, "--quiet", NULL);
	start_stalenet(&b, "b", "run", scen_b, "--out", dir_b, "--quiet", NULL);
	rc_a = run_stalenet_to_end(&a, 40000);
	rc_b = run_stalenet_to_end(&b, 40000);
	cr_assert_eq(rc_a, 0, "run a: exit %d; stderr:\n%s", rc_a, slurp(a.err));
	cr_assert_eq(rc_b, 0, "run b: exit %d; stderr:\n%s", rc_b, slurp(b.err));

	/* Each run measured its own links: same node names, different delays, no cross-talk. */
	assert_linkcheck(dir_a, want_a, 4, 100, 4.0);
	assert_linkcheck(dir_b, want_b, 3, 100, 4.0);
	cr_assert(meta_value(dir_a, "prefix", prefix_a, sizeof prefix_a));
	cr_assert(meta_value(dir_b, "prefix", prefix_b, sizeof prefix_b));
	cr_assert_str_neq(prefix_a, prefix_b, "both runs used prefix %s", prefix_a);
	cr_assert(meta_value(dir_a, "scenario", id, sizeof id));
	cr_assert_str_eq(id, "t-linkcheck");
	cr_assert(meta_value(dir_b, "scenario", id, sizeof id));
	cr_assert_str_eq(id, "t-linkcheck-b");

	assert_host_as(&before, (const char *const[]){ prefix_a, prefix_b }, 2);
	assert_journal_procs_gone(dir_a);
	assert_journal_procs_gone(dir_b);
	assert_no_run_procs(dir_a, prefix_a);
	assert_no_run_procs(dir_b, prefix_b);
}

/* --- 5. cleanup and what is not its own --------------------------------------------------- */

Test(run, cleanup_leaves_a_foreign_namespace_alone)
{
	static struct host_snapshot before;
	const char *foreign = "snffff-foreign";
	struct proc_run cl;
	char path[PATH_MAX];
	int rc;

	snapshot(&before);
	if (netns_exists(foreign))
		netns_delete(foreign);
	cr_assert_eq(system("ip netns add snffff-foreign"), 0);
	cr_assert(netns_exists(foreign));

	start_stalenet(&cl, "cleanup", "cleanup", NULL);
	rc = run_stalenet_to_end(&cl, 30000);
	cr_expect_eq(rc, 0, "cleanup exit %d; stderr:\n%s", rc, slurp(cl.err));
	cr_expect(netns_exists(foreign), "cleanup removed %s, which no journal names", foreign);
	snprintf(path, sizeof path, "%s/%s", NETNS_RUN_DIR, foreign);
	cr_expect(exists(path));

	cr_assert_eq(system("ip netns del snffff-foreign"), 0);
	assert_host_as(&before, (const char *const[]){ "snffff-" }, 1);
}

/* `stalenet cleanup` while a run is live must leave that run alone: its namespaces, its
 * emulator and the emulator's control socket (a timeline change after the cleanup goes
 * through it). */
Test(run, cleanup_during_a_live_run_leaves_it_alone)
{
	static struct host_snapshot before;
	struct proc_run r, cl;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32], prefix[32], line[1024], *out;
	int n_ns, rc;

	tpath(scen, sizeof scen, "train.yaml");
	tpath(dir, sizeof dir, "out");
	write_training(scen, "", "5s", false, "  timeline:\n    - {at: 3s, nodes: worker1, delay: 6ms}\n");
	snapshot(&before);

	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", NULL);
	snprintf(path, sizeof path, "%s/progress.csv", dir);
	cr_assert(wait_rows(path, 5, 40000, &r), "training did not start; stderr:\n%s", slurp(r.err));
	cr_assert(meta_value(dir, "prefix", prefix, sizeof prefix));
	n_ns = netns_with_prefix(prefix);
	cr_assert_eq(n_ns, 5, "namespaces of %s: %d", prefix, n_ns); /* server, 2 workers, hub, switch */

	start_stalenet(&cl, "cleanup", "cleanup", dir, NULL);
	rc = run_stalenet_to_end(&cl, 30000);
	out = slurp(cl.out);
	cr_assert_eq(rc, 0, "cleanup exit %d; stderr:\n%s", rc, slurp(cl.err));
	/* Other runs on this host may be live too: at least ours is. */
	{
		int found, replayed, live;

		cr_assert_eq(sscanf(out, "cleanup: %d journal(s) found, %d replayed, %d still running", &found,
				    &replayed, &live), 3, "cleanup said: %s", out);
		cr_assert_geq(live, 1, "cleanup said: %s", out);
	}
	free(out);
	cr_assert_eq(netns_with_prefix(prefix), n_ns, "cleanup touched the live run's namespaces");

	rc = run_stalenet_to_end(&r, 30000);
	cr_assert_eq(rc, 0, "run exit %d; stderr:\n%s", rc, slurp(r.err));
	cr_assert(find_event(dir, "link_change", "worker1", line, sizeof line), "no link_change row");
	cr_assert_null(strstr(line, "FAILED"), "the change after the cleanup failed: %s", line);
	assert_host_as(&before, (const char *const[]){ prefix }, 1);
	assert_journal_procs_gone(dir);
	assert_no_run_procs(dir, prefix);
}

/* --- 6. invalid input --------------------------------------------------------------------- */

Test(run, invalid_scenario_exits_2_with_position_and_creates_nothing)
{
	static struct host_snapshot before;
	static const struct {
		const char *text;
		int line, col;
	} cases[] = {
		{ "name: bad\nworkers: 2\nstop: {time: 5x}\n", 3, 14 },
		{ "name: bad\nworkers: 2\nstop: {time: 5s}\nnetwork:\n  default: {delay: 5ms, colour: red}\n", 5, 25 },
	};
	char reg_before[SNAP_MAX], reg_after[SNAP_MAX];

	snapshot(&before);
	sorted_dir("/run/stalenet", reg_before, sizeof reg_before);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct proc_run r;
		char scen[PATH_MAX], dir[PATH_MAX], want[PATH_MAX + 64], *err;
		int rc;

		tpath(scen, sizeof scen, "bad%zu.yaml", i);
		tpath(dir, sizeof dir, "out%zu", i);
		write_file(scen, cases[i].text);
		start_stalenet(&r, "bad", "run", scen, "--out", dir, NULL);
		rc = run_stalenet_to_end(&r, 10000);
		err = slurp(r.err);
		cr_assert_eq(rc, 2, "case %zu: exit %d; stderr:\n%s", i, rc, err);
		snprintf(want, sizeof want, "%s:%d:%d: error:", scen, cases[i].line, cases[i].col);
		cr_assert(!strncmp(err, want, strlen(want)), "case %zu: want '%s...', stderr:\n%s", i, want, err);
		cr_assert_not(exists(dir), "case %zu: %s was created", i, dir);
		free(err);
	}
	/* Anything the failed runs made would carry a run prefix, whatever it was; namespaces
	 * and links of other names are other suites' (the host is shared), not these runs'. */
	assert_host_as(&before, (const char *const[]){ ANY_RUN_PREFIX }, 1);
	sorted_dir("/run/stalenet", reg_after, sizeof reg_after);
	cr_assert_str_eq(reg_after, reg_before, "registry changed");
}

/* An --out holding other runs (here simulated ones of the same scenario, and a sweep's where one
 * run goes) is refused with exit 2 before the host is touched, as `simulate` refuses it: the
 * same rule (rundir_check_out). */
Test(run, an_out_of_other_runs_exits_2_and_touches_nothing)
{
	static struct host_snapshot before;
	static const char *const sets[] = { NULL, "sweep.workers=[2, 3]" };
	char reg_before[SNAP_MAX], reg_after[SNAP_MAX];
	char scen[PATH_MAX];

	tpath(scen, sizeof scen, "other.yaml");
	write_file(scen, "name: other\nworkers: 2\nstop: {time: 5s}\nlinkcheck: off\n"
			 "simulation: {train: none, step_cost: 1ms, server_cost: 10us}\n");
	snapshot(&before);
	sorted_dir("/run/stalenet", reg_before, sizeof reg_before);
	for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
		struct proc_run r;
		char dir[PATH_MAX], summary[PATH_MAX + 32], *err, *sum_before, *sum_after;
		int rc;

		tpath(dir, sizeof dir, "other%zu", i);
		if (sets[i])
			start_stalenet(&r, "sim", "simulate", scen, "--out", dir, "--quiet", "--set", sets[i], NULL);
		else
			start_stalenet(&r, "sim", "simulate", scen, "--out", dir, "--quiet", NULL);
		cr_assert_eq(run_stalenet_to_end(&r, 30000), 0, "the simulation failed");
		snprintf(summary, sizeof summary, "%s/summary.csv", dir);
		sum_before = slurp(summary);
		cr_assert(*sum_before, "no %s", summary);
		start_stalenet(&r, "run", "run", scen, "--out", dir, NULL);
		rc = run_stalenet_to_end(&r, 10000);
		err = slurp(r.err);
		cr_assert_eq(rc, 2, "case %zu: exit %d; stderr:\n%s", i, rc, err);
		cr_assert_not_null(strstr(err, "not a resume of these runs"), "case %zu: stderr:\n%s", i, err);
		sum_after = slurp(summary);
		cr_assert_str_eq(sum_after, sum_before, "case %zu: summary.csv changed", i);
		free(err);
		free(sum_before);
		free(sum_after);
	}
	assert_host_as(&before, NULL, 0);
	sorted_dir("/run/stalenet", reg_after, sizeof reg_after);
	cr_assert_str_eq(reg_after, reg_before, "registry changed");
}

/* A sweep interrupted during its first run, run again into the same --out: the interrupted
 * run's directory is kept whole under OUT/.incomplete/ and the run is done from scratch in a
 * fresh directory (its events.csv has one start row, not the first attempt's rows too). */
Test(run, rerun_keeps_an_interrupted_attempt_aside, .timeout = 180)
{
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 64], kept[2 * PATH_MAX];
	char *first, *again, *err;
	int rc, n = 0;

	tpath(scen, sizeof scen, "again.yaml");
	tpath(dir, sizeof dir, "again");
	write_file(scen, "name: again\nseed: 3\nstop: {time: 3s}\nlinkcheck: false\n"
			 "data: {set: fashion-mnist, partition: {scheme: iid}}\nmodel: {kind: softmax}\n"
			 "train: {batch: 64, lr: 0.05}\nworkers: 2\nnetwork: {default: {delay: 1ms}}\n"
			 "sweep: {workers: [2, 3]}\n");
	start_stalenet(&r, "again1", "run", scen, "--out", dir, "--quiet", NULL);
	snprintf(path, sizeof path, "%s/workers=2+rep=1/progress.csv", dir);
	cr_assert(wait_rows(path, 2, 60000, &r), "the first run did not start training");
	kill(r.pid, SIGINT);
	rc = wait_stalenet(&r, 30000);
	cr_assert_eq(rc, 130, "exit %d; stderr:\n%s", rc, slurp(r.err));
	snprintf(path, sizeof path, "%s/workers=2+rep=1/events.csv", dir);
	first = slurp(path);
	cr_assert(strstr(first, ",start,all,"), "%s", first);

	start_stalenet(&r, "again2", "run", scen, "--out", dir, "--quiet", NULL);
	rc = run_stalenet_to_end(&r, 90000);
	err = slurp(r.err);
	cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, err);
	cr_expect(strstr(err, "an earlier attempt is incomplete; kept in"), "%s", err);
	snprintf(path, sizeof path, "%s/.incomplete", dir);
	DIR *d = opendir(path);
	cr_assert(d, "no %s", path);
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.') {
			n++;
			snprintf(kept, sizeof kept, "%s/%s/events.csv", path, e->d_name);
			cr_expect(!strncmp(e->d_name, "workers=2+rep=1-", 16), "kept as %s", e->d_name);
		}
	closedir(d);
	cr_assert_eq(n, 1, "one earlier attempt kept");
	char *old = slurp(kept);
	cr_expect_str_eq(old, first, "the earlier events.csv kept as it was");
	snprintf(path, sizeof path, "%s/workers=2+rep=1/events.csv", dir);
	again = slurp(path);
	const char *p1 = strstr(again, ",start,all,");
	cr_expect(p1 && !strstr(p1 + 1, ",start,all,"), "one start row in the fresh events.csv:\n%s", again);
	snprintf(path, sizeof path, "%s/workers=2+rep=1/complete", dir);
	cr_expect(exists(path), "the run done again completed");
	snprintf(path, sizeof path, "%s/summary.csv", dir);
	cr_expect_eq(csv_rows(path), 2, "one summary row per run");
	free(old);
	free(again);
	free(first);
	free(err);
}

/* --- 7. a node that dies ------------------------------------------------------------------ */

Test(run, a_node_that_dies_stops_the_run_with_its_name_and_log)
{
	static struct host_snapshot before;
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], empty[256], data[512], line[4096], path[PATH_MAX + 32];
	char prefix[32], value[64], *err;
	const char *nodes[] = { "server0", "worker0", "worker1" }, *dead = NULL;
	int rc;

	tpath(empty, sizeof empty, "no-data");
	cr_assert_eq(mkdir(empty, 0755), 0);
	snprintf(data, sizeof data, ", path: %s", empty);
	tpath(scen, sizeof scen, "train.yaml");
	tpath(dir, sizeof dir, "out");
	write_training(scen, data, "60s", false, NULL);
	snapshot(&before);

	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", NULL);
	rc = run_stalenet_to_end(&r, 40000);
	err = slurp(r.err);
	cr_assert_eq(rc, 1, "exit %d; stderr:\n%s", rc, err);

	for (size_t i = 0; i < 3 && !dead; i++)
		if (find_event(dir, "node_failed", nodes[i], line, sizeof line))
			dead = nodes[i];
	cr_assert_not_null(dead, "no node_failed row in events.csv");
	cr_assert(strstr(line, "exit status"), "node_failed detail: %s", line);
	cr_assert(strstr(line, empty), "the log tail (naming %s) is not in the detail: %s", empty, line);
	{
		char want[128];

		snprintf(want, sizeof want, "node %s died", dead);
		cr_assert(strstr(err, want), "stderr does not say '%s':\n%s", want, err);
	}
	/* The tail of the node's log: the line about the missing data file. */
	snprintf(data, sizeof data, "%s/train-", empty);
	cr_assert(strstr(err, data), "stderr lacks the log tail naming %s:\n%s", data, err);
	free(err);
	cr_assert(meta_value(dir, "status", value, sizeof value));
	cr_assert_str_eq(value, "failed");
	snprintf(path, sizeof path, "%s/complete", dir);
	cr_assert_not(exists(path));

	cr_assert(meta_value(dir, "prefix", prefix, sizeof prefix));
	assert_host_as(&before, (const char *const[]){ prefix }, 1);
	assert_journal_procs_gone(dir);
	assert_no_run_procs(dir, prefix);
}

/* --- the link emulator dies ---------------------------------------------------------------- */

Test(run, a_dead_link_emulator_stops_the_run)
{
	static struct host_snapshot before;
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32], prefix[32], value[64], needle[64];
	char line[512], *err;
	pid_t linkd = 0;
	int64_t t_kill;
	int rc;

	tpath(scen, sizeof scen, "train.yaml");
	tpath(dir, sizeof dir, "out");
	write_training(scen, "", "60s", false, NULL);
	snapshot(&before);

	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", "--backend", "nfq", NULL);
	snprintf(path, sizeof path, "%s/progress.csv", dir);
	cr_assert(wait_rows(path, 20, 40000, &r), "training did not start; stderr:\n%s", slurp(r.err));
	cr_assert(meta_value(dir, "prefix", prefix, sizeof prefix));
	/* Its control socket is named after the run's prefix. */
	snprintf(needle, sizeof needle, "linkd-%s.sock", prefix);
	cr_assert_eq(procs_mentioning(needle, &linkd), 1, "no stalenet-linkd of %s", prefix);
	t_kill = now_ms();
	cr_assert_eq(kill(linkd, SIGKILL), 0);
	rc = wait_stalenet(&r, 20000);
	cr_assert_neq(rc, -1, "stalenet still runs 20 s after its link emulator died");
	err = slurp(r.err);
	cr_assert_eq(rc, 1, "exit %d; stderr:\n%s", rc, err);
	cr_assert(strstr(err, "stalenet-linkd died"), "stderr does not say so:\n%s", err);
	free(err);
	cr_expect_leq(now_ms() - t_kill, 10000, "the run took %lld ms to stop",
		      (long long)(now_ms() - t_kill));
	cr_assert(find_event(dir, "linkd_failed", "linkd", line, sizeof line),
		  "no linkd_failed row in events.csv");
	cr_assert(strstr(line, "signal 9"), "linkd_failed detail: %s", line);
	cr_assert(meta_value(dir, "status", value, sizeof value));
	cr_assert_str_eq(value, "failed");
	/* What was collected before is kept. */
	snprintf(path, sizeof path, "%s/nodes/worker0.csv", dir);
	cr_assert_gt(csv_rows(path), 0, "the traces written before the failure are gone");
	assert_host_as(&before, (const char *const[]){ prefix }, 1);
	assert_journal_procs_gone(dir);
	assert_no_run_procs(dir, prefix);
}

/* Last value of the first column (t_s) of a CSV file; -1 when it has no rows. */
static double last_t(const char *path)
{
	char *s = slurp(path), *end, *line;
	double t = -1;

	end = s + strlen(s);
	while (end > s && end[-1] == '\n')
		*--end = '\0';
	line = strrchr(s, '\n');
	if (line && sscanf(line + 1, "%lf,", &t) != 1)
		t = -1;
	free(s);
	return t;
}

/* stop.time counts from the start of training on the clock every trace shares, also when a
 * link self-check and data loading came first: the orchestrator's progress.csv and the
 * nodes' traces end at about stop.time, not earlier by the time spent before the start. */
Test(run, training_lasts_stop_time_on_the_shared_clock)
{
	static struct host_snapshot before;
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32], prefix[32];
	double t_progress, t_worker, t_eval;
	int rc;

	tpath(scen, sizeof scen, "train.yaml");
	tpath(dir, sizeof dir, "out");
	/* (appended after network: a top-level key) */
	write_training(scen, "", "3s", true, "stragglers:\n  - {nodes: worker1, pause: {every: 1s, for: 200ms}}\n");
	snapshot(&before);

	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", NULL);
	rc = run_stalenet_to_end(&r, 40000);
	cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, slurp(r.err));

	/* The straggler profile and each planned pause are in events.csv. */
	{
		char line[512];
		double t_pause;

		cr_assert(find_event(dir, "straggler", "worker1", line, sizeof line), "no straggler row");
		cr_assert(strstr(line, "pause 200ms every 1s"), "row: %s", line);
		cr_assert(find_event(dir, "pause", "worker1", line, sizeof line), "no pause row");
		cr_assert_eq(sscanf(line, "%lf,", &t_pause), 1, "row: %s", line);
		cr_assert(t_pause >= 1.0 && t_pause < 1.05, "first pause logged at %.3f s", t_pause);
	}

	snprintf(path, sizeof path, "%s/progress.csv", dir);
	t_progress = last_t(path);
	snprintf(path, sizeof path, "%s/nodes/worker0.csv", dir);
	t_worker = last_t(path);
	snprintf(path, sizeof path, "%s/eval.csv", dir);
	t_eval = last_t(path);
	cr_expect_geq(t_progress, 2.8, "progress.csv ends at %.3f s of a 3 s run", t_progress);
	cr_expect_geq(t_worker, 2.8, "worker0.csv ends at %.3f s of a 3 s run", t_worker);
	cr_expect_leq(t_worker, t_progress + 0.5, "worker0.csv ends at %.3f s, progress.csv at %.3f s", t_worker,
		      t_progress);
	cr_expect_geq(t_eval, 2.8, "eval.csv ends at %.3f s", t_eval);
	cr_expect_leq(t_eval, t_progress + 0.5, "eval.csv ends at %.3f s, progress.csv at %.3f s", t_eval, t_progress);

	/* Every trace of a real run is there and follows docs/traces.md (headers, types, time
	 * order per node, events included: the self-check before the origin adds no rows). */
	{
		static const char *const files[] = { "nodes/worker0.csv", "nodes/worker1.csv",
						     "nodes/server0.csv", "eval.csv", "progress.csv",
						     "links.csv", "linkcheck.csv", "events.csv",
						     "partition.csv", "summary.csv", "meta.json" };
		char err[512];

		for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
			snprintf(path, sizeof path, "%s/%s", dir, files[i]);
			cr_assert(exists(path), "no %s in the run directory", files[i]);
		}
		cr_assert_eq(trace_schema_check_dir(dir, err, sizeof err), 0, "%s", err);
	}
	/* The emulator's release lateness per link and second: the shaped links carried training
	 * traffic, so some rows have it, each with mean <= max and p99 <= max. */
	{
		char line[512];
		int with = 0;
		FILE *f;

		snprintf(path, sizeof path, "%s/links.csv", dir);
		f = fopen(path, "re");
		cr_assert_not_null(f);
		while (fgets(line, sizeof line, f)) {
			double mean, p99, max;
			char *p = line;

			for (int k = 0; k < 8 && p; k++)
				p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
			if (!p || sscanf(p, "%lf,%lf,%lf", &mean, &p99, &max) != 3)
				continue;
			with++;
			cr_expect_geq(p99, 0.0, "%s", line);
			cr_expect_leq(p99, max + 1e-9, "%s", line);
			cr_expect_leq(mean, max + 1e-9, "%s", line);
			cr_expect_lt(max, 1000.0, "%s", line);
		}
		fclose(f);
		if (meta_value(dir, "backend", prefix, sizeof prefix) && !strcmp(prefix, "nfq"))
			cr_expect_gt(with, 0, "no links.csv row with lateness");
	}

	cr_assert(meta_value(dir, "prefix", prefix, sizeof prefix));
	assert_host_as(&before, (const char *const[]){ prefix }, 1);
}

/* --- the centralized baseline --------------------------------------------------------------- */

/* The trainer takes part in the control plane like every role: it says ready once loaded,
 * starts on the orchestrator's origin (stop.time counts from it), and reports its steps. */
Test(run, centralized_trainer_follows_the_control_plane)
{
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32], value[64], *text, *last;
	double t_eval;
	long max_step = 0;
	int rc;

	tpath(scen, sizeof scen, "central.yaml");
	tpath(dir, sizeof dir, "out");
	write_file(scen, "name: t-central\nseed: 3\nstop: {time: 2s}\nlinkcheck: off\n"
			 "data: {set: fashion-mnist}\nmodel: {kind: softmax}\n"
			 "train: {batch: 64, lr: 0.05, epochs: 1000}\ntopology: {kind: centralized}\n"
			 "eval: {every: 500ms}\n");
	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", NULL);
	rc = run_stalenet_to_end(&r, 60000);
	cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, slurp(r.err));
	cr_assert(meta_value(dir, "status", value, sizeof value));
	cr_assert_str_eq(value, "complete");
	snprintf(path, sizeof path, "%s/eval.csv", dir);
	t_eval = last_t(path);
	cr_assert(t_eval >= 1.9 && t_eval <= 3.0, "eval.csv ends at %.3f s of a 2 s run", t_eval);
	snprintf(path, sizeof path, "%s/progress.csv", dir);
	text = slurp(path);
	for (char *line = strtok_r(text, "\n", &last); line; line = strtok_r(NULL, "\n", &last)) {
		long mx;

		/* t_s,alive,waiting,min_step,median_step,max_step */
		if (sscanf(line, "%*f,%*d,%*d,%*d,%*f,%ld", &mx) == 1 && mx > max_step)
			max_step = mx;
	}
	free(text);
	cr_assert_gt(max_step, 100, "progress.csv never saw the trainer's steps (max %ld)", max_step);
}

/* --- 8. a timeline event ------------------------------------------------------------------ */

Test(run, timeline_change_is_logged_on_time)
{
	static struct host_snapshot before;
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], line[1024], prefix[32], *late;
	double t_s, late_ms;
	int rc;

	tpath(scen, sizeof scen, "train.yaml");
	tpath(dir, sizeof dir, "out");
	write_training(scen, "", "4s", false, "  timeline:\n    - {at: 2s, nodes: worker1, delay: 10ms}\n");
	snapshot(&before);

	/* The lateness is the supervisor's own: measured at real-time priority, it is the
	 * supervisor's schedule, not the busy host's run queue (the nodes run normal). */
	stalenet_realtime = geteuid() == 0;
	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", NULL);
	stalenet_realtime = false;
	rc = run_stalenet_to_end(&r, 40000);
	cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, slurp(r.err));

	cr_assert(find_event(dir, "link_change", "worker1", line, sizeof line), "no link_change row for worker1");
	cr_assert_eq(sscanf(line, "%lf,", &t_s), 1, "row: %s", line);
	cr_assert_geq(t_s, 2.0, "change logged at %.6f s, before its time", t_s);
	cr_assert_leq(t_s, 2.05, "change logged at %.6f s", t_s);
	/* the link as it now is, in the scenario's units (the default delay was 2ms) */
	cr_assert(strstr(line, ",both: delay 10ms; late"), "row: %s", line);
	cr_assert_null(strstr(line, "FAILED"), "row: %s", line);
	late = strstr(line, "late ");
	cr_assert_not_null(late, "no lateness in: %s", line);
	cr_assert_eq(sscanf(late, "late %lfms", &late_ms), 1, "row: %s", line);
	cr_assert_geq(late_ms, 0.0, "row: %s", line);
	cr_assert_leq(late_ms, 5.0, "lateness %.2f ms", late_ms);
	/* Only the planned node changed. */
	cr_assert_not(find_event(dir, "link_change", "worker0", line, sizeof line), "unplanned change: %s", line);
	cr_assert_not(find_event(dir, "link_change", "server0", line, sizeof line), "unplanned change: %s", line);
	cr_assert(meta_value(dir, "prefix", prefix, sizeof prefix));
	assert_host_as(&before, (const char *const[]){ prefix }, 1);
}

/* --- p2p churn through the orchestrator -------------------------------------------------------- */

/* Largest gap between consecutive rows' t_s (first column) in a CSV file, among gaps that
 * begin in [t_from, t_to) s. */
static double max_gap_between(const char *path, double t_from, double t_to)
{
	char line[512];
	double t, t_prev = -1, gap = 0;
	FILE *f = fopen(path, "r");

	cr_assert_not_null(f, "%s", path);
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "%lf,", &t) != 1)
			continue;
		if (t_prev >= t_from && t_prev < t_to && t - t_prev > gap)
			gap = t - t_prev;
		t_prev = t;
	}
	fclose(f);
	return gap;
}

/* Largest gap between consecutive steps' t_s in a node trace, among steps after t_from s. */
static double max_step_gap_after(const char *path, double t_from)
{
	return max_gap_between(path, t_from, 1e300);
}

/* A node trace's step at time t: the step of its last row with t_s <= t (0: none yet). */
static long step_at(const char *path, double t)
{
	char line[512];
	double tr;
	long step, at = 0;
	FILE *f = fopen(path, "r");

	cr_assert_not_null(f, "%s", path);
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "%lf,%*[^,],%ld,", &tr, &step) == 2 && tr <= t)
			at = step;
	fclose(f);
	return at;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median time between consecutive steps of a node trace (s); 0 with fewer than two rows. */
static double median_step_gap(const char *path)
{
	char line[512];
	double t, t_prev = -1, *gaps = NULL, med = 0;
	size_t n = 0, cap = 0;
	FILE *f = fopen(path, "r");

	cr_assert_not_null(f, "%s", path);
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "%lf,", &t) != 1)
			continue;
		if (t_prev >= 0) {
			if (n == cap) {
				cap = cap ? 2 * cap : 256;
				gaps = realloc(gaps, cap * sizeof *gaps);
				cr_assert_not_null(gaps);
			}
			gaps[n++] = t - t_prev;
		}
		t_prev = t;
	}
	fclose(f);
	if (n > 0) {
		qsort(gaps, n, sizeof *gaps, cmp_double);
		med = gaps[n / 2];
	}
	free(gaps);
	return med;
}

/* A BSP peer SIGKILLed at 2 s and restarted at 3.5 s: the others go on without it once its
 * connections close, take it back when it connects again, and the restarted process (told
 * "start ... rejoin") continues from the others' clock with a pulled replica instead of making
 * everybody wait while it redoes its steps from 0.
 *
 * Nothing here assumes how fast the host steps: a busy host makes every step slower (the
 * barrier waits for the slowest of four processes) and the restarted process's start slower
 * (it loads its share of the data set again before it connects). What is checked is measured
 * against peer0's own trace: BSP lets a peer be at most one step ahead of any peer in its
 * barrier, so peer0 stepping two past peer3's last step means it went on without peer3, and
 * peer3's first step after the restart reaching the clock peer0 had at the restart means peer3
 * skipped the steps it missed. Those clocks are taken at the planned times (the kill comes no
 * earlier than 2 s, the new process no earlier than 3.5 s), not at events.csv's rows, which a
 * busy supervisor may write a little later. The run lasts 10 s, so a restart that takes seconds
 * on a loaded host still leaves peer3 time to step (with 7 s, restarts that took 3.5 s left it
 * none). */
Test(run, p2p_peer_crashes_restarts_and_catches_up)
{
	static struct host_snapshot before;
	const double crash_s = 2, restart_s = 3.5, stop_s = 10;
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], path0[PATH_MAX + 32], path3[PATH_MAX + 32], prefix[32];
	char pathp[PATH_MAX + 32], line[512];
	double t_crash = 0, t_restart = 0, t_last0, t_first_after = -1, gap0, held, t;
	long step, last_before = 0, first_after = 0, c0_crash, c0_restart;
	FILE *f;
	int rc;

	tpath(scen, sizeof scen, "p2p.yaml");
	tpath(dir, sizeof dir, "out");
	write_file(scen, "name: t-p2p-churn\n"
			 "seed: 5\n"
			 "stop: {time: 10s}\n"
			 "linkcheck: false\n"
			 "data: {set: fashion-mnist, partition: {scheme: iid}}\n"
			 "model: {kind: softmax}\n"
			 "train: {batch: 64, lr: 0.05}\n"
			 "topology: {kind: p2p}\n"
			 "consistency: {barrier: bsp, fanout: 1}\n"
			 "workers: 4\n"
			 "eval: {every: 1s}\n"
			 "network:\n"
			 "  default: {delay: 1ms}\n"
			 "stragglers:\n"
			 "  - {nodes: workers, compute: {delay: {dist: constant, value: 10ms}}}\n"
			 "  - {nodes: peer3, crash: {at: 2s, restart: 3500ms}}\n");
	snapshot(&before);
	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", NULL);
	rc = run_stalenet_to_end(&r, 60000);
	cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, slurp(r.err));
	cr_assert(find_event(dir, "crash", "peer3", line, sizeof line), "no crash row");
	cr_assert_eq(sscanf(line, "%lf,", &t_crash), 1);
	cr_assert_geq(t_crash, crash_s, "crash row at %.3f s", t_crash);
	cr_assert(find_event(dir, "restart", "peer3", line, sizeof line), "no restart row");
	cr_assert_eq(sscanf(line, "%lf,", &t_restart), 1);
	cr_assert_geq(t_restart, restart_s, "restart row at %.3f s", t_restart);
	snprintf(path0, sizeof path0, "%s/nodes/peer0.csv", dir);
	snprintf(path3, sizeof path3, "%s/nodes/peer3.csv", dir);
	/* peer3's trace: the rows of its first life (it was dead from the crash to the restart),
	 * then the restarted process's */
	f = fopen(path3, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "%lf,%*[^,],%ld,", &t, &step) != 2)
			continue;
		if (t <= restart_s)
			last_before = step;
		else if (t_first_after < 0) {
			t_first_after = t;
			first_after = step;
		}
	}
	fclose(f);
	c0_crash = step_at(path0, crash_s);
	c0_restart = step_at(path0, restart_s);
	t_last0 = last_t(path0);
	gap0 = median_step_gap(path0);
	/* The orchestrator writes progress.csv every 0.1 s: a longer gap before the stop is time
	 * the host did not run it, and held every node as much. */
	snprintf(pathp, sizeof pathp, "%s/progress.csv", dir);
	held = max_gap_between(pathp, restart_s, stop_s) - 0.1;
	if (held < 0)
		held = 0;
	cr_log_info("crash at %.3f s (peer0 at step %ld at %.1f s, peer3 at %ld), restart at %.3f s "
		    "(peer0 at step %ld at %.1f s); peer3's first step after it: %ld at %.3f s; peer0's "
		    "median step %.3f s, last step at %.3f s; the host held the orchestrator up to %.3f s",
		    t_crash, c0_crash, crash_s, last_before, t_restart, c0_restart, restart_s, first_after,
		    t_first_after, gap0, t_last0, held);
	/* peer3 trained in step with the others until its crash */
	cr_assert_geq(last_before, 10, "peer3 did %ld steps before the crash", last_before);
	cr_assert_geq(last_before, c0_crash - 1, "peer3 left at step %ld, peer0 at %ld at %.1f s",
		      last_before, c0_crash, crash_s);
	/* the others went on without it: past the one step BSP allows ahead of a member */
	cr_assert_geq(c0_restart, last_before + 2, "peer0 at step %ld at %.1f s, peer3 left at %ld",
		      c0_restart, restart_s, last_before);
	/* the restarted process stepped, and from the others' clock, not from its own or from 0 */
	cr_assert_gt(t_first_after, 0, "the restarted peer3 took no step in the %.1f s after its "
		     "restart", stop_s - t_restart);
	cr_assert_geq(first_after, c0_restart, "peer3 restarted at step %ld after %ld; peer0 was at "
		      "%ld", first_after, last_before, c0_restart);
	/* peer0 kept stepping to the end: its last step is no further from the stop than 0.5 s or,
	 * on a host that slows every step, four of its own typical steps, plus the longest time
	 * the host held the orchestrator (it held the nodes too) */
	cr_assert_geq(t_last0, stop_s - (4 * gap0 > 0.5 ? 4 * gap0 : 0.5) - held,
		      "peer0's last step at %.2f s of %.0f (median step %.3f s, host held %.3f s)",
		      t_last0, stop_s, gap0, held);
	cr_assert_eq(trace_schema_check_dir(dir, line, sizeof line), 0, "%s", line);
	cr_assert(meta_value(dir, "prefix", prefix, sizeof prefix));
	assert_host_as(&before, (const char *const[]){ prefix }, 1);
}

/* An ensemble ended by stop.time: every peer gets the stop at once and sends its final replica
 * when its step ends (peers 1 and 2 sleep 300 ms in each), and peer 0 waits for them (it
 * stopped waiting at the stop itself, and combined its own replica alone). */
Test(run, p2p_ensemble_at_stop_time_combines_every_member)
{
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32], err[512], *ens;
	int rc;

	tpath(scen, sizeof scen, "ensemble.yaml");
	tpath(dir, sizeof dir, "out");
	write_file(scen, "name: ens\nseed: 5\nstop: {time: 4s}\nmodel: {kind: softmax}\n"
			 "topology: {kind: p2p}\nconsistency: {barrier: asp, combine: ensemble}\nworkers: 3\n"
			 "eval: {every: 1s}\nlinkcheck: off\nnetwork:\n  default: {delay: 2ms}\n"
			 "stragglers:\n  - {nodes: \"peer[1-2]\", compute: {delay: {dist: constant, value: 300ms}}}\n");
	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", NULL);
	rc = run_stalenet_to_end(&r, 40000);
	cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, slurp(r.err));
	snprintf(path, sizeof path, "%s/ensemble.csv", dir);
	ens = slurp(path);
	for (int i = 0; i < 3; i++) {
		char want[64];

		snprintf(want, sizeof want, ",peer0,peer%d,", i);
		cr_assert_not_null(strstr(ens, want), "no row of peer%d:\n%s", i, ens);
	}
	{
		int self = 0, final = 0;

		for (const char *l = ens; (l = strchr(l, ',')); l++) {
			self += !strncmp(l, ",self\n", 6);
			final += !strncmp(l, ",final\n", 7);
		}
		cr_assert(self == 1 && final == 2, "not every member combined:\n%s", ens);
	}
	cr_assert_eq(trace_schema_check_dir(dir, err, sizeof err), 0, "%s", err);
	free(ens);
}

/* How long the restarted process's join waited for the others' clocks, from its log ("join's
 * clock exchange took X s"); -1 when the log does not say. */
static double join_exchange_s(const char *dir, const char *node)
{
	char path[PATH_MAX + 32], *log, *at;
	double s = -1;

	snprintf(path, sizeof path, "%s/logs/%s.log", dir, node);
	log = slurp(path);
	at = strstr(log, "join's clock exchange took ");
	if (at && sscanf(at + strlen("join's clock exchange took "), "%lf", &s) != 1)
		s = -1;
	free(log);
	return s;
}

/* A BSP peer restarts while another is crashed for good: the restarted process's join does
 * not wait for the crashed peer (the answers of the live ones count it as departed), nor does
 * any barrier after it, so no peer stalls: peer0 steps to the end with no gap near the 2 s the
 * join used to wait, let alone the rest of the run its barriers used to wait for peer3.
 *
 * As in the churn test above, nothing assumes how fast the host steps. The survivors do stall
 * while the restarted peer catches up (from its first handshake they wait for it at every
 * barrier, and it answers once it has pulled a replica and taken a step), and on a loaded host
 * that takes a second or more. So the join itself is measured where it happens: the restarted
 * peer logs how long its clock exchange took, a round trip to two live peers whose service
 * threads answer at once, and which used to last the 2 s it waited for peer3: it is held to 1 s
 * plus two of peer0's typical steps (a host that slows every step slows the round trip about
 * as much: 0.2-0.5 s with steps of 0.2-0.5 s) plus the longest time the host held the
 * orchestrator (it held the nodes as much). peer0's stall is held to 1.5 s plus four of its own
 * typical steps plus that hold. The 2 s wait still fails both on an idle host (1.04 s and
 * 1.58 s bounds), and a stall for the rest of the run fails the second on any host. The restart comes at 2.5 s of an 11 s
 * run, so a restarted process that takes seconds to load its data on a busy host (6-7 s with
 * the test's processes held to 7% of a core) still joins and steps before the stop. */
Test(run, p2p_restart_while_another_peer_is_down_does_not_stall)
{
	static struct host_snapshot before;
	const double restart_s = 2.5, stop_s = 11;
	struct proc_run r;
	char scen[PATH_MAX], dir[PATH_MAX], path0[PATH_MAX + 32], path2[PATH_MAX + 32];
	char pathp[PATH_MAX + 32], prefix[32], line[512];
	double t_restart = 0, t_last0, t_last2, gap0, gap2, med0, slack, held, join_s;
	int rc;

	tpath(scen, sizeof scen, "p2p.yaml");
	tpath(dir, sizeof dir, "out");
	write_file(scen, "name: t-p2p-join-down\n"
			 "seed: 5\n"
			 "stop: {time: 11s}\n"
			 "linkcheck: false\n"
			 "data: {set: fashion-mnist, partition: {scheme: iid}}\n"
			 "model: {kind: softmax}\n"
			 "train: {batch: 64, lr: 0.05}\n"
			 "topology: {kind: p2p}\n"
			 "consistency: {barrier: bsp, fanout: 1}\n"
			 "workers: 4\n"
			 "network:\n"
			 "  default: {delay: 1ms}\n"
			 "stragglers:\n"
			 "  - {nodes: workers, compute: {delay: {dist: constant, value: 10ms}}}\n"
			 "  - {nodes: peer3, crash: {at: 1s}}\n"
			 "  - {nodes: peer2, crash: {at: 1500ms, restart: 2500ms}}\n");
	snapshot(&before);
	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", NULL);
	rc = run_stalenet_to_end(&r, 60000);
	cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, slurp(r.err));
	cr_assert(find_event(dir, "restart", "peer2", line, sizeof line), "no restart row");
	cr_assert_eq(sscanf(line, "%lf,", &t_restart), 1);
	cr_assert_geq(t_restart, restart_s, "restart row at %.3f s", t_restart);
	snprintf(path0, sizeof path0, "%s/nodes/peer0.csv", dir);
	snprintf(path2, sizeof path2, "%s/nodes/peer2.csv", dir);
	snprintf(pathp, sizeof pathp, "%s/progress.csv", dir);
	t_last0 = last_t(path0);
	t_last2 = last_t(path2);
	gap0 = max_step_gap_after(path0, restart_s);
	gap2 = max_step_gap_after(path2, t_restart + 0.001);
	med0 = median_step_gap(path0);
	/* The orchestrator writes progress.csv every 0.1 s: a longer gap is time the host did not
	 * run it, and held every node as much. */
	held = max_gap_between(pathp, restart_s, stop_s) - 0.1;
	if (held < 0)
		held = 0;
	join_s = join_exchange_s(dir, "peer2");
	slack = 4 * med0 > 0.5 ? 4 * med0 : 0.5;
	cr_log_info("restart at %.3f s; restarted peer2's join exchange %.3f s, last step %.3f s, "
		    "largest gap %.3f s; peer0: median step %.3f s, largest gap after the restart "
		    "%.3f s, last step %.3f s; the host held the orchestrator up to %.3f s", t_restart,
		    join_s, t_last2, gap2, med0, gap0, t_last0, held);
	/* The join did not wait for peer3 (it used to wait 2 s, every other peer waiting with it). */
	cr_assert_geq(join_s, 0, "the restarted peer2 finished no join before the stop (last step at "
		      "%.2f s; a host that did not let it load its data share in %.1f s?)", t_last2,
		      stop_s - t_restart);
	cr_assert_lt(join_s, 1.0 + 2 * med0 + held, "peer2's join waited %.3f s for the others' "
		     "clocks (peer0's median step %.3f s, host held %.3f s)", join_s, med0, held);
	/* The survivors went on: no stall beyond the restarted peer's catching up */
	cr_assert_lt(gap0, 1.5 + 4 * med0 + held, "peer0 stalled %.3f s after the restart (median "
		     "step %.3f s, host held %.3f s)", gap0, med0, held);
	/* ... to the end, and the restarted peer with them */
	cr_assert_geq(t_last0, stop_s - slack - held, "peer0's last step at %.2f s of %.0f (median "
		      "step %.3f s, host held %.3f s)", t_last0, stop_s, med0, held);
	cr_assert_geq(t_last2, stop_s - slack - held, "restarted peer2's last step at %.2f s of %.0f "
		      "(peer0's median step %.3f s, host held %.3f s)", t_last2, stop_s, med0, held);
	cr_assert_eq(trace_schema_check_dir(dir, line, sizeof line), 0, "%s", line);
	cr_assert(meta_value(dir, "prefix", prefix, sizeof prefix));
	assert_host_as(&before, (const char *const[]){ prefix }, 1);
}

/* topology fleet in namespaces over a lossy link, its registry killed (planned crash) and
 * restarted mid-run: the run completes, `stalenet recover --all` rebuilds and verifies every
 * stored version, and every version fleet.csv recorded as committed before the crash (the
 * registry acknowledges only after the commit) is among them. */
Test(run, fleet_registry_crash_loses_no_acknowledged_version, .timeout = 120)
{
	static struct host_snapshot before;
	struct proc_run r, rec;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32], prefix[32], line[512];
	double t_crash = 0, t;
	char *out;
	FILE *f;
	int rc, committed_before = 0;
	unsigned verified = 0, total = 0, failed = 1;

	tpath(scen, sizeof scen, "fleet.yaml");
	tpath(dir, sizeof dir, "out");
	write_file(scen, "name: t-fleet-crash\n"
			 "seed: 9\n"
			 "stop: {time: 9s}\n"
			 "linkcheck: false\n"
			 "data: {set: fashion-mnist, partition: {scheme: classes, per_node: 3}}\n"
			 "model: {kind: softmax}\n"
			 "train: {batch: 32, lr: 0.05}\n"
			 "topology: {kind: fleet}\n"
			 "fleet: {strategy: delta, sync: 10 steps, snapshot_every: 4}\n"
			 "workers: 3\n"
			 "eval: {every: 2s}\n"
			 "network:\n"
			 "  default: {delay: 20ms, loss: 2%}\n"
			 "stragglers:\n"
			 "  - {nodes: workers, compute: {delay: {dist: constant, value: 10ms}}}\n"
			 "  - {nodes: registry, crash: {at: 3s, restart: 4500ms}}\n");
	snapshot(&before);
	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", NULL);
	rc = run_stalenet_to_end(&r, 90000);
	cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, slurp(r.err));
	cr_assert(find_event(dir, "crash", "registry", line, sizeof line), "no crash row");
	cr_assert_eq(sscanf(line, "%lf,", &t_crash), 1);
	cr_assert(find_event(dir, "restart", "registry", line, sizeof line), "no restart row");
	start_stalenet(&rec, "recover", "recover", dir, "--all", NULL);
	rc = run_stalenet_to_end(&rec, 60000);
	out = slurp(rec.out);
	cr_assert_eq(rc, 0, "recover exit %d:\n%s", rc, out);
	{
		const char *sum = strstr(out, "recover: ");

		cr_assert_not_null(sum, "%s", out);
		cr_assert_eq(sscanf(sum, "recover: %u versions, %u verified, %u failed", &total, &verified,
				    &failed), 3);
	}
	cr_assert_eq(failed, 0);
	cr_assert_eq(verified, total);
	/* Versions committed before the kill: each is rebuilt and verified now. */
	snprintf(path, sizeof path, "%s/fleet.csv", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof line, f)) {
		char dev[32], want[64];
		long long v;
		int ok;

		if (sscanf(line, "%lf,%31[^,],%lld,%*[^,],%*[^,],%*[^,],%*[^,],%*[^,],%d", &t, dev, &v,
			   &ok) != 4 || ok != 1 || t >= t_crash)
			continue;
		snprintf(want, sizeof want, "%s@%lld ok ", dev, v);
		cr_assert_not_null(strstr(out, want), "%s@%lld was committed before the crash and is "
			      "not recovered", dev, v);
		committed_before++;
	}
	fclose(f);
	cr_assert_gt(committed_before, 3, "only %d versions committed before the crash",
		     committed_before);
	/* And the devices' chains went on after the restart. */
	cr_assert_gt(total, (unsigned)committed_before + 3, "%u versions in all, %d before the crash",
		     total, committed_before);
	free(out);
	cr_assert_eq(trace_schema_check_dir(dir, line, sizeof line), 0, "%s", line);
	cr_assert(meta_value(dir, "prefix", prefix, sizeof prefix));
	assert_host_as(&before, (const char *const[]){ prefix }, 1);
}

/* The rows a registry's store holds: "device@version " and "hash=HEX" to look for in
 * recover's output. */
struct fleet_row_text {
	char name[96];
	char hash[2 * FLEET_HASH_BYTES + 8];
};

struct fleet_rows {
	struct fleet_row_text *v;
	size_t n, cap;
};

static int fleet_row(const struct fleet_version *v, void *arg)
{
	struct fleet_rows *r = arg;
	int w;

	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 256;
		r->v = realloc(r->v, r->cap * sizeof *r->v);
		cr_assert_not_null(r->v);
	}
	snprintf(r->v[r->n].name, sizeof r->v[r->n].name, "\n%s@%lld ", v->device, (long long)v->version);
	w = snprintf(r->v[r->n].hash, sizeof r->v[r->n].hash, "hash=");
	for (int i = 0; i < FLEET_HASH_BYTES; i++)
		w += snprintf(r->v[r->n].hash + w, sizeof r->v[r->n].hash - (size_t)w, "%02x", v->hash[i]);
	r->n++;
	return 0;
}

struct crash_wait {
	const char *dir;
	struct proc_run *alive;
};

static bool registry_crashed(void *arg)
{
	struct crash_wait *w = arg;
	char line[256];

	if (waitpid(w->alive->pid, &w->alive->status, WNOHANG) == w->alive->pid)
		cr_assert_fail("stalenet exited early (status %#x); stderr:\n%s", w->alive->status,
			       slurp(w->alive->err));
	return find_event(w->dir, "crash", "registry", line, sizeof line);
}

/* fleet.registry peers in namespaces over lossy links: the registry is killed (planned crash)
 * and its store deleted while it is down; restarted, it rebuilds from the devices' copies of
 * their peers' versions. Every version it had acknowledged before the loss is stored again
 * with the same hash and verifies (`stalenet recover --all`), and fleet_repair.csv says the
 * versions came back by pulls. */
Test(run, fleet_peers_rebuild_a_lost_registry_store, .timeout = 150)
{
	static struct host_snapshot before;
	struct proc_run r, rec;
	struct fleet_rows held = { 0 };
	struct crash_wait cw;
	char scen[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32], prefix[32], line[512], err[256];
	struct fleet_store *st;
	unsigned long long pulled = 0;
	int rebuilt = 0;
	char *out, *text;
	FILE *f;
	int rc;

	tpath(scen, sizeof scen, "fleet-peers.yaml");
	tpath(dir, sizeof dir, "out");
	write_file(scen, "name: t-fleet-peers\n"
			 "seed: 9\n"
			 "stop: {time: 22s}\n"
			 "linkcheck: false\n"
			 "data: {set: fashion-mnist, partition: {scheme: classes, per_node: 3}}\n"
			 "model: {kind: softmax}\n"
			 "train: {batch: 32, lr: 0.05}\n"
			 "topology: {kind: fleet}\n"
			 "fleet: {strategy: delta, sync: 20 steps, snapshot_every: 4, registry: peers, peers: 2}\n"
			 "workers: 3\n"
			 "eval: {every: 2s}\n"
			 "network:\n"
			 "  default: {delay: 20ms, loss: 2%}\n"
			 "stragglers:\n"
			 "  - {nodes: workers, compute: {delay: {dist: constant, value: 20ms}}}\n"
			 "  - {nodes: registry, crash: {at: 4s, restart: 7s}}\n");
	snapshot(&before);
	start_stalenet(&r, "run", "run", scen, "--out", dir, "--quiet", NULL);
	cw.dir = dir;
	cw.alive = &r;
	cr_assert(support_wait_until(registry_crashed, &cw, 60000), "the registry did not crash");
	/* The registry is down (it restarts at 7 s): list what it acknowledged, then lose it. */
	snprintf(path, sizeof path, "%s/%s", dir, FLEET_STORE_FILE);
	st = fleet_store_open(path, false, err, sizeof err);
	cr_assert_not_null(st, "%s", err);
	cr_assert_eq(fleet_store_each(st, fleet_row, &held), 0);
	fleet_store_close(&st);
	cr_assert_eq(unlink(path), 0);
	snprintf(path, sizeof path, "%s/%s-wal", dir, FLEET_STORE_FILE);
	unlink(path);
	snprintf(path, sizeof path, "%s/%s-shm", dir, FLEET_STORE_FILE);
	unlink(path);
	cr_assert(!find_event(dir, "restart", "registry", line, sizeof line),
		  "the registry restarted before its store was deleted (host too slow for this test)");
	cr_assert_gt(held.n, 3, "only %zu versions acknowledged before the crash", held.n);
	rc = run_stalenet_to_end(&r, 100000);
	cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, slurp(r.err));
	start_stalenet(&rec, "recover", "recover", dir, "--all", NULL);
	rc = run_stalenet_to_end(&rec, 60000);
	out = slurp(rec.out);
	cr_assert_eq(rc, 0, "recover exit %d:\n%s", rc, out);
	/* recover prints "DEVICE@V ok strategy=... hash=HEX" per version, a line each */
	text = malloc(strlen(out) + 2);
	cr_assert_not_null(text);
	text[0] = '\n';
	strcpy(text + 1, out);
	for (size_t i = 0; i < held.n; i++) {
		char *at = strstr(text, held.v[i].name), *eol;

		cr_assert_not_null(at, "%s was acknowledged before the loss and is not recovered",
				   held.v[i].name + 1);
		eol = strchr(at + 1, '\n');
		if (eol)
			*eol = '\0';
		cr_assert(strstr(at, " ok ") && strstr(at, held.v[i].hash), "%s: not the model acknowledged "
			  "before the loss: %s", held.v[i].name + 1, at + 1);
		if (eol)
			*eol = '\n';
	}
	/* The rebuild pulled them, and every device's rebuild ended within the run (15 s after the
	 * restart: a rebuild takes 2.5-6 s here, more on a loaded host): fleet_repair.csv has a row
	 * per device after the restart. */
	snprintf(path, sizeof path, "%s/fleet_repair.csv", dir);
	f = fopen(path, "re");
	cr_assert_not_null(f);
	while (fgets(line, sizeof line, f)) {
		unsigned long long p;
		double t;

		if (sscanf(line, "%lf,%*[^,],%*[^,],%*[^,],%llu,", &t, &p) == 2 && t > 7.0) {
			pulled += p;
			rebuilt++;
		}
	}
	fclose(f);
	cr_assert_eq(rebuilt, 3, "%d of 3 devices rebuilt after the restart", rebuilt);
	cr_assert_geq(pulled, held.n, "pulled %llu versions, %zu were acknowledged", pulled, held.n);
	free(out);
	free(text);
	free(held.v);
	cr_assert_eq(trace_schema_check_dir(dir, line, sizeof line), 0, "%s", line);
	cr_assert(meta_value(dir, "prefix", prefix, sizeof prefix));
	assert_host_as(&before, (const char *const[]){ prefix }, 1);
}
