/* orchestrator/run: see run.h. The pipeline of one run and the sweep loop around it. */
#include "orchestrator/run.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/random.h>
#include <unistd.h>

#include "collectors/csv.h"
#include "collectors/fleet_summary.h"
#include "collectors/plot.h"
#include "collectors/progress.h"
#include "collectors/schema.h"
#include "collectors/summary.h"
#include "lib/clock.h"
#include "lib/ctl.h"
#include "lib/kv.h"
#include "lib/link_verdict.h"
#include "lib/limits.h"
#include "lib/log.h"
#include "lib/rtdir.h"
#include "lib/timerlat.h"
#include "netem/link_shaper.h"
#include "netem/linkd.h"
#include "orchestrator/cleanup.h"
#include "orchestrator/cli.h"
#include "orchestrator/cgroup.h"
#include "orchestrator/hosts.h"
#include "orchestrator/slurm.h"
#include "orchestrator/journal.h"
#include "orchestrator/launch.h"
#include "orchestrator/linkcheck_late.h"
#include "orchestrator/multihost.h"
#include "orchestrator/recover.h"
#include "orchestrator/linktrace.h"
#include "orchestrator/nodeconf.h"
#include "orchestrator/placement.h"
#include "orchestrator/plan.h"
#include "orchestrator/rundir.h"
#include "orchestrator/scenario.h"
#include "orchestrator/hostload.h"
#include "orchestrator/supervise.h"
#include "orchestrator/testbed.h"

#define RUN_DIR_MAX 2048 /* leaves room for file names under PATH_MAX */
#define RUN_PORT_DATA 7000
#define RUN_DEFAULT_DATA_DIR "/usr/share/datasets/fashion-mnist"
#define RUN_PORT_PROBE 7100
#define RUN_READY_TIMEOUT_MS 120000
#define RUN_LINKS_PERIOD_NS 1000000000LL
/* How often a training run hands the allocator's free pages back to the kernel (see
 * give_back_free_memory). */
#define RUN_TRIM_PERIOD_NS 10000000000LL

/* Interruptions (SIGINT, SIGTERM, SIGHUP) so far, counted up to SUPERVISE_STOP_NOW: the first
 * stops the run gracefully (nodes asked to stop, traces collected, teardown), the second cuts
 * every wait of that stop short (what still runs is killed; the teardown still runs whole), a
 * third and later change nothing. Each step is said at once on stderr by the handler itself,
 * with lines formatted beforehand (write(2) is all a handler may do). */
static volatile sig_atomic_t run_interrupted;
/* Set by the supervisor (supervise_opts.ended, multihost_nodes_opts.ended) once the current
 * run has reached its end of itself: a first interruption from then on leaves it complete,
 * and the handler's first line says so (run_ended_line). Cleared when the next run begins. */
static volatile sig_atomic_t run_ended;
static char run_int_line[SUPERVISE_STOP_NOW][320];
static int run_int_len[SUPERVISE_STOP_NOW];
static char run_ended_line[320];
static int run_ended_len;

static void on_signal(int sig)
{
	int saved = errno, k = run_interrupted;
	const char *line = k < SUPERVISE_STOP_NOW ? run_int_line[k] : NULL;
	int len = k < SUPERVISE_STOP_NOW ? run_int_len[k] : 0;

	(void)sig;
	if (k >= SUPERVISE_STOP_NOW)
		return;
	run_interrupted = k + 1;
	if (k == 0 && run_ended) {
		line = run_ended_line;
		len = run_ended_len;
	}
	if (len > 0) {
		ssize_t w = write(2, line, (size_t)len);

		(void)w; /* nowhere to report a failed write */
	}
	errno = saved;
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	run_int_len[0] = log_format(LOG_WARN, run_int_line[0], sizeof run_int_line[0],
				    "interrupted: stopping the run (nodes asked to stop, traces collected, host "
				    "cleaned up); interrupt again (Ctrl-C) to stop at once");
	run_int_len[1] = log_format(LOG_WARN, run_int_line[1], sizeof run_int_line[1],
				    "interrupted again: stopping at once (what still runs is killed, no more "
				    "waiting for it; the testbed is still torn down, rows written so far kept)");
	run_ended_len = log_format(LOG_WARN, run_ended_line, sizeof run_ended_line,
				   "interrupted after the run had finished: it stays complete, its files are "
				   "still collected; interrupt again (Ctrl-C) to cut that short");
	/* the three signals block each other while one is handled: the count never races */
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGTERM);
	sigaddset(&sa.sa_mask, SIGHUP);
	/* the journal replay of a teardown kills what is left at once after a second one */
	cleanup_set_interrupt(&run_interrupted, SUPERVISE_STOP_NOW);
	/* requests to the emulator (shaping, link reads) stop waiting for it too */
	linkd_request_set_interrupt(&run_interrupted, SUPERVISE_STOP_NOW);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* The user asked twice: every remaining wait is cut short. */
static bool stop_now(void)
{
	return run_interrupted >= SUPERVISE_STOP_NOW;
}

/* How many runs of plan from index from on have no complete run directory under abs_out (its
 * abs_len first bytes; single: the one run's directory is abs_out itself): what an
 * interruption between runs leaves unrun. */
static size_t runs_unrun(const char *abs_out, size_t abs_len, const struct plan *plan, bool single, size_t from)
{
	size_t left = 0;

	for (size_t j = from; j < plan_n_runs(plan); j++) {
		char d[RUN_DIR_MAX];

		if (single)
			snprintf(d, sizeof d, "%.*s", (int)abs_len, abs_out);
		else
			snprintf(d, sizeof d, "%.*s/%.*s", (int)abs_len, abs_out, PLAN_RUN_ID_MAX, plan_run(plan, j)->id);
		left += !rundir_is_complete(d);
	}
	return left;
}

/* After the runs: an interruption that came once the last run done had ended (its stop.time
 * reached; that run stays complete, its exit code stands) stops the sweep there, and makes
 * it interrupted (exit 130) only when runs are left unrun (from index next on). */
static int sweep_interrupted(int rc, const char *abs_out, size_t abs_len, const struct plan *plan, bool single,
			     size_t next)
{
	size_t left;

	if (!run_interrupted || rc == CLI_EXIT_INTERRUPTED)
		return rc;
	left = runs_unrun(abs_out, abs_len, plan, single, next);
	if (left) {
		log_warn("interrupted between runs: %zu run(s) left unrun (the same command resumes them)", left);
		return CLI_EXIT_INTERRUPTED;
	}
	log_info("interrupted after the last run had ended: every run done, none cut short");
	return rc;
}

/* Programs live beside the running stalenet (build/ or PREFIX/bin). */
static int sibling_program(const char *name, char *out, size_t outlen)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	char *slash;

	if (n <= 0)
		return -errno;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return -EINVAL;
	*slash = '\0';
	if ((size_t)snprintf(out, outlen, "%s/%s", self, name) >= outlen)
		return -ENAMETOOLONG;
	if (access(out, X_OK) < 0) {
		log_error("%s not found beside stalenet (%s)", name, out);
		return -ENOENT;
	}
	return 0;
}

/* --- one run ----------------------------------------------------------------------------- */

struct run_ctx {
	const struct run_opts *opts;
	const struct plan_run *run;
	char dir[RUN_DIR_MAX];
	char prefix[16];
	char node_bin[PATH_MAX], linkd_bin[PATH_MAX];
	struct journal *journal;
	struct testbed *tb;
	struct cgroup_run *cg;        /* per-node limits (scenario resources), NULL = none */
	struct hostload *guard;       /* host-saturation guard of the training phase */
	struct hostload_summary guard_sum;
	bool have_guard;
	struct link_shaper *shaper;
	enum link_backend backend;
	char linkd_ctl[PATH_MAX];
	pid_t linkd_pid;
	bool linkd_dead;              /* it died during the run: every later check fails */
	struct ctl_server *ctl;
	char ctl_ep[512];
	char **addrs;                 /* per plan node; index n_nodes = hub */
	struct link_endpoint *eps;    /* per plan node */
	size_t next_event;
	int64_t next_links_ns;
	int64_t next_trim_ns;         /* give_back_free_memory's next time */
	struct csv_writer *links;
	struct progress_view *view;
	int run_index, run_count;
	struct link_params *cur_up, *cur_down; /* per node, as applied now */
	struct linktrace *trace;      /* network.trace, NULL = none */
	size_t next_trace;
	double last_accuracy;         /* latest eval.csv test_accuracy, < 0 none */
	unsigned long long link_drops;/* sum over links at the last sample */
	double late_p99_ms;           /* worst link's p99 release lateness at the last sample, NAN none */
	double *lc_late;              /* link check: p99 lateness per node direction [2 i + dir], ms */
	double host_late_p99_ms;      /* the host's timer lateness under load (p99, ms), NAN unmeasured */
	struct timerlat_result timers;/* the host's timers, measured once per `stalenet run` */
	bool timers_measured;
	bool spin;                    /* this run's linkd polls to release times (network.precision) */
	char stop_label[96];          /* the run's stop condition, for the live view */
	int64_t run_t0_ns;            /* this run began (setup included) */
	int runs_left;                /* runs still to execute after this one */
	double done_s;                /* wall seconds of the runs executed so far */
	int n_done;
};

static int record_proc(void *arg, pid_t pid, uint64_t start_time, const char *name)
{
	struct run_ctx *c = arg;

	return journal_proc(c->journal, pid, start_time, name);
}

/* A node process joins its cgroup before it execs (launch_spec.place). */
static int place_node(void *arg, pid_t pid, const char *name)
{
	struct run_ctx *c = arg;
	int idx = cgroup_run_find(c->cg, name);

	return idx < 0 ? 0 : cgroup_run_attach(c->cg, idx, pid) < 0 ? -1 : 0;
}

/* A node its cgroup's OOM killer took: events.csv says so, not just "signal 9". */
static int node_death_cause(void *arg, const char *name, int status, char *cause, size_t len)
{
	struct run_ctx *c = arg;
	int idx = cgroup_run_find(c->cg, name);
	uint64_t kills = 0;
	char mem[32] = "?";

	(void)status;
	if (idx < 0 || cgroup_run_oom_kills(c->cg, idx, &kills) < 0 || !kills)
		return 0;
	for (size_t i = 0; i < c->run->n_nodes; i++)
		if (!strcmp(c->run->nodes[i].name, name))
			cgroup_format_size(c->run->nodes[i].resources.memory_bytes, mem, sizeof mem);
	snprintf(cause, len, "oom_killed: memory limit %s reached", mem);
	return 1;
}

/* One cgroup per node when the scenario sets any resources (orchestrator/cgroup). */
static int make_cgroups(struct run_ctx *c)
{
	const struct plan_run *r = c->run;
	unsigned need = 0;
	char err[512];

	for (size_t i = 0; i < r->n_nodes; i++) {
		uint32_t set = r->nodes[i].resources.set;

		need |= (set & SCENARIO_RES_CPU ? CGROUP_CPU : 0) | (set & SCENARIO_RES_CPUS ? CGROUP_CPUSET : 0) |
			(set & SCENARIO_RES_MEMORY ? CGROUP_MEMORY : 0);
	}
	if (!need)
		return 0;
	if (!(c->cg = cgroup_run_new(NULL, c->prefix, need, c->journal, err, sizeof err))) {
		log_error("resources: %s", err);
		return -1;
	}
	for (size_t i = 0; i < r->n_nodes; i++) {
		const struct scenario_resources *re = &r->nodes[i].resources;
		struct cgroup_limits lim = {
			.cpu = re->set & SCENARIO_RES_CPU ? re->cpu : 0,
			.cpus = re->set & SCENARIO_RES_CPUS ? re->cpus : NULL,
			.memory_bytes = re->set & SCENARIO_RES_MEMORY ? re->memory_bytes : 0,
		};

		if (cgroup_run_add(c->cg, r->nodes[i].name, &lim, err, sizeof err) < 0) {
			log_error("resources of %s: %s", r->nodes[i].name, err);
			return -1;
		}
	}
	return 0;
}

/* The shaper reports host changes before making them. iptables rules are journalled as such;
 * qdiscs live on veths inside the run's namespaces and go with them (the namespaces are
 * journalled), so they need no record of their own. */
static int record_shaping(void *arg, const char *kind, const char *netns, const char *const *undo)
{
	struct run_ctx *c = arg;
	const char *table = "filter", *chain = NULL;
	const char *rule[JOURNAL_MAX_FIELDS];
	int n = 0;

	if (strcmp(kind, "iptables"))
		return 0;
	for (int i = 1; undo[i]; i++) {
		if (!strcmp(undo[i], "-t") && undo[i + 1])
			table = undo[++i];
		else if (!strcmp(undo[i], "-D") && undo[i + 1])
			chain = undo[++i];
		else if (!strcmp(undo[i], "-w"))
			continue;
		else if (n < JOURNAL_MAX_FIELDS - 8)
			rule[n++] = undo[i];
	}
	if (!chain)
		return -EINVAL;
	return journal_iptables(c->journal, netns, table, chain, n, rule);
}

static const char *backend_name(enum link_backend b)
{
	return b == LINK_BACKEND_KERNEL ? "kernel" : "nfq";
}

#define RUN_SPIN_MARGIN_MAX_NS 1000000

/* spin's margin: the worst p99 timer lateness the host showed (busy, after idle, under load)
 * plus 50 us, at most RUN_SPIN_MARGIN_MAX_NS; 200 us when nothing was measured. */
static int64_t spin_margin_ns(const struct run_ctx *c)
{
	int64_t m = 0;

	if (!c->timers_measured)
		return 200000;
	if (c->timers.warm.p99_ns > m)
		m = c->timers.warm.p99_ns;
	if (c->timers.idle.p99_ns > m)
		m = c->timers.idle.p99_ns;
	if (c->timers.load.p99_ns > m)
		m = c->timers.load.p99_ns;
	/* at most 1 ms: a real-time thread polling for longer starves the nodes of its CPU (measured
	 * in the netem VM, where timers run milliseconds late: a 6.7 ms margin made the probes'
	 * round trips 12 ms late); what the margin does not cover is reported as lateness */
	return m + 50000 < RUN_SPIN_MARGIN_MAX_NS ? m + 50000 : RUN_SPIN_MARGIN_MAX_NS;
}

/* The precision of this run: as the scenario says, or for auto what the host's timers need. */
static bool choose_spin(const struct run_ctx *c)
{
	switch (c->run->scenario->network.precision) {
	case SCENARIO_PRECISION_SPIN:
		return true;
	case SCENARIO_PRECISION_TIMER:
		return false;
	case SCENARIO_PRECISION_AUTO:
		break;
	}
	return c->timers_measured && !strcmp(timerlat_precision_for(&c->timers), "spin");
}

static int start_linkd(struct run_ctx *c)
{
	char log_path[PATH_MAX + 16], margin[32];
	const char *argv[] = { c->linkd_bin, "--ctl", c->linkd_ctl, "--precision", c->spin ? "spin" : "timer",
			       "--spin-margin-us", margin, NULL };
	struct launch_spec ls = { .name = "linkd", .argv = argv, .log_path = log_path,
				  .record = record_proc, .record_arg = c,
				  .interrupted = &run_interrupted, .interrupt_at = SUPERVISE_STOP_NOW };
	pid_t pid;

	snprintf(log_path, sizeof log_path, "%s/logs/linkd.log", c->dir);
	snprintf(margin, sizeof margin, "%lld", (long long)(spin_margin_ns(c) / 1000));
	snprintf(c->linkd_ctl, sizeof c->linkd_ctl, "%s/linkd-%s.sock", rtdir_path(), c->prefix);
	pid = launch_spawn(&ls);
	if (pid < 0)
		return (int)pid;
	c->linkd_pid = pid;
	for (int i = 0; i < 500; i++) {
		char reply[64];
		int st;

		/* asked to stop at once: not waited for (the teardown kills it) */
		if (stop_now())
			return -ECANCELED;
		if (linkd_request(c->linkd_ctl, "ping", reply, sizeof reply, 100) == 0)
			return 0;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			log_error("stalenet-linkd exited at start (see %s)", log_path);
			c->linkd_pid = 0;
			return -EIO;
		}
		usleep(10000);
	}
	log_error("stalenet-linkd did not answer on %s", c->linkd_ctl);
	return -ETIMEDOUT;
}

/* The emulator died with status ST: say so once, in the log and in events.csv. */
static void linkd_died(struct run_ctx *c, int st)
{
	char how[32], detail[128];

	snprintf(how, sizeof how, "%s %d", WIFEXITED(st) ? "exit status" : "signal",
		 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	snprintf(detail, sizeof detail, "the userspace link emulator died (%s)", how);
	log_error("stalenet-linkd died (%s): the run cannot go on, its links are black holes", how);
	c->linkd_pid = 0;
	c->linkd_dead = true;
	supervise_event(c->dir, "linkd_failed", "linkd", detail);
}

/* The emulator must outlive the run: if it dies its queues black-hole traffic. */
static bool linkd_alive(struct run_ctx *c)
{
	int st;

	if (c->linkd_dead)
		return false;
	if (c->linkd_pid <= 0)
		return true;
	if (waitpid(c->linkd_pid, &st, WNOHANG) == c->linkd_pid) {
		linkd_died(c, st);
		return false;
	}
	return true;
}

/* Supervisor hook: the supervisor's reaping loop collected a child that is not a node. */
static int helper_reaped(void *arg, pid_t pid, int status)
{
	struct run_ctx *c = arg;

	if (c->linkd_pid > 0 && pid == c->linkd_pid) {
		linkd_died(c, status);
		return -1;
	}
	return 0;
}

/* The test accuracy of the last complete eval.csv row (for the live view). */
static void read_last_accuracy(struct run_ctx *c)
{
	char path[PATH_MAX], buf[512];
	ssize_t n;
	off_t size;
	int fd;

	snprintf(path, sizeof path, "%s/eval.csv", c->dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	size = lseek(fd, 0, SEEK_END);
	n = pread(fd, buf, sizeof buf - 1, size > (off_t)sizeof buf - 1 ? size - (off_t)sizeof buf + 1 : 0);
	close(fd);
	if (n <= 1 || buf[n - 1] != '\n')
		return;
	buf[n - 1] = '\0';
	{
		char *line = strrchr(buf, '\n'), *field;
		int col = 0;

		line = line ? line + 1 : buf;
		/* t_s,node,updates,epoch,samples,test_accuracy,... */
		for (field = line; field && col < 5; col++) {
			field = strchr(field, ',');
			if (field)
				field++;
		}
		if (field && *field >= '0' && *field <= '9')
			c->last_accuracy = strtod(field, NULL);
	}
}

/* "time 60 s | accuracy 0.85 | steps 2000": whichever comes first stops the run. */
static void stop_label(const struct scenario *sc, char *buf, size_t len)
{
	int n = 0;

	buf[0] = '\0';
	if (sc->stop_time_us)
		n += snprintf(buf + n, len - (size_t)n, "time %g s", (double)sc->stop_time_us / 1e6);
	if (sc->stop_accuracy > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, "%saccuracy %g", n ? " | " : "", sc->stop_accuracy);
	if (sc->stop_steps && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, "%ssteps %llu", n ? " | " : "",
			 (unsigned long long)sc->stop_steps);
}

static void progress_status(void *arg, struct progress_state *st)
{
	struct run_ctx *c = arg;
	const struct scenario *sc = c->run->scenario;
	double wall = (double)(clock_now_ns() - c->run_t0_ns) / 1e9, expected = -1;

	st->accuracy = c->last_accuracy;
	st->link_drops = c->link_drops;
	st->late_p99_ms = c->late_p99_ms;
	st->stop = c->stop_label;
	/* Whichever stop condition is nearest to its end shows the run's progress. */
	if (sc->stop_steps) {
		double f = st->median_step / (double)sc->stop_steps;
		if (f > st->stop_fraction)
			st->stop_fraction = f;
	}
	if (sc->stop_accuracy > 0 && st->accuracy > 0) {
		double f = st->accuracy / sc->stop_accuracy;
		if (f > st->stop_fraction)
			st->stop_fraction = f;
	}
	/* What the run is expected to take in all: the setup it had before training plus the
	 * training time left, judged by the stop condition's progress. */
	if (st->stop_fraction > 0.02)
		expected = (wall - st->elapsed_s) + st->elapsed_s / (st->stop_fraction > 1 ? 1 : st->stop_fraction);
	st->sweep_eta_s = progress_sweep_eta_s(wall, expected, c->runs_left, c->done_s, c->n_done);
}

/* Counters of every link direction into links.csv, with ONE read of all of them (one emulator
 * request, one qdisc dump per namespace): the supervisor reads no status message meanwhile. */
static void sample_links(struct run_ctx *c, int64_t now_rel)
{
	static const char *dirs[] = { "up", "down" };
	size_t n = c->run->n_nodes;
	struct link_counters *k = malloc(2 * n * sizeof *k + 1);
	int *rc = malloc(2 * n * sizeof *rc + 1);
	unsigned long long drops = 0;
	double worst = NAN;

	if (!k || !rc) {
		log_error("sample_links: out of memory");
		goto out;
	}
	link_shaper_counters_all(c->shaper, c->eps, n, k, rc);
	for (size_t i = 0; i < n; i++) {
		for (int d = 0; d < 2; d++) {
			const struct link_counters *kd = &k[2 * i + (size_t)d];
			char late[96] = ",,";

			if (rc[2 * i + (size_t)d] < 0)
				continue;
			/* lateness of the second just passed; empty when nothing was released in it
			 * or the backend cannot tell (kernel) */
			if (kd->late_known && kd->late_n) {
				snprintf(late, sizeof late, "%.3f,%.3f,%.3f", kd->late_mean_ms, kd->late_p99_ms,
					 kd->late_max_ms);
				if (isnan(worst) || kd->late_p99_ms > worst)
					worst = kd->late_p99_ms;
			}
			csv_writer_row(c->links, "%.3f,%s,%s,%llu,%llu,%llu,%llu,%llu,%s", (double)now_rel / 1e9,
				       c->run->nodes[i].name, dirs[d], (unsigned long long)kd->packets,
				       (unsigned long long)kd->bytes, (unsigned long long)kd->dropped,
				       (unsigned long long)kd->backlog_pkts,
				       (unsigned long long)(c->backend == LINK_BACKEND_NFQ ? kd->backlog_pkts : 0), late);
			drops += kd->dropped;
		}
	}
	c->link_drops = drops;
	if (!isnan(worst) && worst > PROGRESS_LATE_WARN_MS && !(c->late_p99_ms > PROGRESS_LATE_WARN_MS))
		log_warn("links: p99 release lateness %.2f ms (> %.1f ms): emulated delays are inexact on this host",
			 worst, PROGRESS_LATE_WARN_MS);
	c->late_p99_ms = worst;
out:
	free(k);
	free(rc);
	read_last_accuracy(c);
}

/* Free heap pages back to the kernel. ZeroMQ's I/O thread allocates in its own malloc arena
 * and the supervisor's loop frees there; glibc keeps such freed pages (only the top of the
 * main heap is trimmed on its own), so over a long run of many nodes the orchestrator's
 * resident size crept up by several kB a second while its live heap stayed constant
 * (docs/reliability.md, the soak). malloc_trim(0) releases whole free pages of every arena;
 * on the soak's heap it takes well under a millisecond. */
static void give_back_free_memory(void)
{
	int64_t t0 = clock_now_ns();
	int released = malloc_trim(0);

	log_debug("malloc_trim: %s in %.3f ms", released ? "memory released" : "nothing to release",
		  (double)(clock_now_ns() - t0) / 1e6);
}

/* Supervisor tick during training: timeline changes at their time, counters every second. */
static int64_t training_tick(void *arg, int64_t now_rel)
{
	struct run_ctx *c = arg;
	const struct plan_run *r = c->run;
	int64_t next;

	if (!linkd_alive(c))
		return -1;
	/* Trace rows reshape every link: delay, loss and rate over the planned values. */
	while (c->trace && c->next_trace < c->trace->n && (int64_t)c->trace->rows[c->next_trace].at_us * 1000 <= now_rel) {
		const struct linktrace_row *row = &c->trace->rows[c->next_trace++];
		char detail[200];
		int failed = 0;

		for (size_t i = 0; i < r->n_nodes; i++) {
			linktrace_apply(row, &c->cur_up[i]);
			linktrace_apply(row, &c->cur_down[i]);
			failed += link_shaper_change(c->shaper, &c->eps[i], LINK_DIR_UP, &c->cur_up[i]) < 0;
			failed += link_shaper_change(c->shaper, &c->eps[i], LINK_DIR_DOWN, &c->cur_down[i]) < 0;
		}
		snprintf(detail, sizeof detail, "delay %.3fms loss %.4f rate %llubit; late %.2fms%s",
			 c->cur_up[0].delay_us / 1e3, c->cur_up[0].loss_ppm / 1e6,
			 (unsigned long long)c->cur_up[0].rate_bps,
			 (double)(clock_now_ns() - clock_origin_ns() - (int64_t)row->at_us * 1000) / 1e6,
			 failed ? "; FAILED" : "");
		supervise_event(c->dir, "trace_step", "all", detail);
	}
	while (c->next_event < r->n_events && (int64_t)r->events[c->next_event].at_us * 1000 <= now_rel) {
		const struct plan_event *e = &r->events[c->next_event++];
		const struct plan_node *nd = &r->nodes[e->node];
		char detail[1200], links[1100];
		int rc1 = link_shaper_change(c->shaper, &c->eps[e->node], LINK_DIR_UP, &e->up);
		int rc2 = link_shaper_change(c->shaper, &c->eps[e->node], LINK_DIR_DOWN, &e->down);
		/* Lateness of the change in force, measured after it was applied. */
		double late_ms = (double)(clock_now_ns() - clock_origin_ns() - (int64_t)e->at_us * 1000) / 1e6;

		c->cur_up[e->node] = e->up;
		c->cur_down[e->node] = e->down;

		plan_format_links(&e->up, &e->down, links, sizeof links);
		snprintf(detail, sizeof detail, "%s; late %.2fms%s", links, late_ms, rc1 || rc2 ? "; FAILED" : "");
		supervise_event(c->dir, "link_change", nd->name, detail);
	}
	if (now_rel >= c->next_links_ns) {
		sample_links(c, now_rel);
		c->next_links_ns = now_rel + RUN_LINKS_PERIOD_NS;
	}
	if (now_rel >= c->next_trim_ns) {
		give_back_free_memory();
		c->next_trim_ns = now_rel + RUN_TRIM_PERIOD_NS;
	}
	next = c->next_links_ns;
	if (c->next_trim_ns < next)
		next = c->next_trim_ns;
	if (c->next_event < r->n_events && (int64_t)r->events[c->next_event].at_us * 1000 < next)
		next = (int64_t)r->events[c->next_event].at_us * 1000;
	if (c->trace && c->next_trace < c->trace->n && (int64_t)c->trace->rows[c->next_trace].at_us * 1000 < next)
		next = (int64_t)c->trace->rows[c->next_trace].at_us * 1000;
	return next;
}

static int64_t linkcheck_tick(void *arg, int64_t now_rel)
{
	(void)now_rel;
	return linkd_alive(arg) ? INT64_MAX - 1 : -1;
}

static int write_conf(struct run_ctx *c, size_t i, const struct nodeconf_ctx *nc, const char *role,
		      char *path, size_t pathlen)
{
	struct kv *kv = nodeconf_build(c->run, i, nc, role);
	int rc;

	if (!kv)
		return -ENOMEM;
	/* The reflector tells probers apart by node.index, which is unique only within a role
	 * (server0 and worker0 are both index 0): their datagrams would be counted together and
	 * both links reported off (loss -1 and 0.5). A prober gets its plan-wide id instead. */
	if (role && kv_setf(kv, "node.index", "%zu", i) < 0) {
		kv_destroy(&kv);
		return -ENOMEM;
	}
	snprintf(path, pathlen, "%s/nodes/%s%s.conf", c->dir, c->run->nodes[i].name, role ? "-probe" : "");
	rc = kv_save(kv, path);
	kv_destroy(&kv);
	if (rc < 0)
		log_error("write %s: %s", path, strerror(-rc));
	return rc;
}

struct phase_nodes {
	struct supervise_node *nodes;
	char (*conf)[PATH_MAX];
	char (*log)[PATH_MAX];
	char (*strag)[512];           /* straggler profiles, for events.csv */
	size_t n;
};

static void phase_free(struct phase_nodes *p)
{
	free(p->nodes);
	free(p->conf);
	free(p->log);
	free(p->strag);
	memset(p, 0, sizeof *p);
}

static int phase_alloc(struct phase_nodes *p, size_t n)
{
	p->nodes = calloc(n, sizeof *p->nodes);
	p->conf = calloc(n, sizeof *p->conf);
	p->log = calloc(n, sizeof *p->log);
	p->strag = calloc(n, sizeof *p->strag);
	p->n = n;
	return p->nodes && p->conf && p->log && p->strag ? 0 : -ENOMEM;
}

static enum supervise_result run_phase(struct run_ctx *c, struct phase_nodes *ph, bool training)
{
	const struct scenario *sc = c->run->scenario;
	struct supervise_opts so = {
		.ctl = c->ctl, .run_dir = c->dir, .node_bin = c->node_bin,
		.stop_after_ns = training ? (int64_t)sc->stop_time_us * 1000 : 0,
		.stop_grace_ns = (int64_t)sc->stop_grace_us * 1000,
		.write_progress = training, .failures_only = !training,
		.on_failure_continue = sc->on_node_failure == SCENARIO_ON_FAILURE_CONTINUE,
		.ready_timeout_ms = RUN_READY_TIMEOUT_MS,
		.view = training ? c->view : NULL, .guard = training ? c->guard : NULL,
		.run_label = c->run->id,
		.run_index = c->run_index, .run_count = c->run_count,
		.interrupted = &run_interrupted, .ended = training ? &run_ended : NULL,
		.hooks = { .tick = training ? training_tick : linkcheck_tick, .record = record_proc,
			   .reaped = helper_reaped, .status = progress_status, .arg = c,
			   /* limits apply to training; the link self-check measures links, unlimited */
			   .place = training && c->cg ? place_node : NULL,
			   .death_cause = training && c->cg ? node_death_cause : NULL },
	};
	int64_t origin;

	return supervise_run(&so, ph->nodes, ph->n, &origin);
}

static int64_t us_or_none(uint64_t set_bits, uint32_t bit, uint64_t us)
{
	return (set_bits & bit) ? (int64_t)us * 1000 : -1;
}

/* The link check's lateness per node direction: nfq, the emulator's p99 over the check (read
 * once before it to start the interval: collect false); kernel, the host's timer lateness under
 * load measured before the run (the qdisc's own cannot be observed). Returns 0 or -errno. */
static int linkcheck_lateness(struct run_ctx *c, bool collect)
{
	size_t n = c->run->n_nodes;
	struct link_counters *k = NULL;
	int *rc = NULL, ret = 0;

	if (c->backend != LINK_BACKEND_NFQ) {
		if (!collect)
			return 0;
		free(c->lc_late);
		c->lc_late = malloc(2 * n * sizeof *c->lc_late + 1);
		if (!c->lc_late)
			return -ENOMEM;
		for (size_t i = 0; i < 2 * n; i++)
			c->lc_late[i] = c->host_late_p99_ms;
		return 0;
	}
	k = malloc(2 * n * sizeof *k + 1);
	rc = malloc(2 * n * sizeof *rc + 1);
	if (!k || !rc) {
		ret = -ENOMEM;
		goto out;
	}
	ret = link_shaper_counters_all(c->shaper, c->eps, n, k, rc);
	if (ret < 0 || !collect)
		goto out;
	free(c->lc_late);
	c->lc_late = malloc(2 * n * sizeof *c->lc_late + 1);
	if (!c->lc_late) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < 2 * n; i++)
		c->lc_late[i] = rc[i] == 0 && k[i].late_known ? (k[i].late_n ? k[i].late_p99_ms : 0.0) : NAN;
out:
	free(k);
	free(rc);
	return ret;
}

static double linkcheck_late_of(void *arg, const char *node, const char *direction)
{
	struct run_ctx *c = arg;

	for (size_t i = 0; c->lc_late && i < c->run->n_nodes; i++)
		if (!strcmp(c->run->nodes[i].name, node))
			return c->lc_late[2 * i + (strcmp(direction, "down") == 0 ? LINK_DIR_DOWN : LINK_DIR_UP)];
	return NAN;
}

static enum supervise_result linkcheck_phase(struct run_ctx *c, const struct nodeconf_ctx *nc)
{
	const struct plan_run *r = c->run;
	struct phase_nodes ph;
	enum supervise_result res;
	char path[PATH_MAX];
	int saved;
	struct kv *kv;
	size_t n = r->n_nodes;

	if (phase_alloc(&ph, n + 1) < 0)
		return SUPERVISE_FAILED;
	for (size_t i = 0; i < n; i++) {
		if (write_conf(c, i, nc, "probe", ph.conf[i], sizeof ph.conf[i]) < 0)
			goto fail;
		snprintf(ph.log[i], sizeof ph.log[i], "%s/logs/%s.log", c->dir, r->nodes[i].name);
		ph.nodes[i] = (struct supervise_node){
			.name = r->nodes[i].name, .netns = testbed_node_netns(c->tb, (int)i), .conf_path = ph.conf[i],
			.log_path = ph.log[i], .join_at_ns = -1, .crash_at_ns = -1, .restart_at_ns = -1,
			.leave_at_ns = -1,
		};
	}
	/* The reflector on the unshaped hub. */
	kv = kv_new();
	if (!kv)
		goto fail;
	kv_set(kv, "node.name", "hub");
	kv_set(kv, "node.role", "reflector");
	kv_set(kv, "run.dir", c->dir);
	kv_set(kv, "ctl.endpoint", c->ctl_ep);
	kv_setf(kv, "port.probe", "%u", RUN_PORT_PROBE);
	snprintf(ph.conf[n], sizeof ph.conf[n], "%s/nodes/hub.conf", c->dir);
	if ((saved = kv_save(kv, ph.conf[n])) < 0) {
		log_error("write %s: %s", ph.conf[n], strerror(-saved));
		kv_destroy(&kv);
		goto fail;
	}
	kv_destroy(&kv);
	snprintf(ph.log[n], sizeof ph.log[n], "%s/logs/hub.log", c->dir);
	ph.nodes[n] = (struct supervise_node){
		.name = "hub", .netns = testbed_node_netns(c->tb, (int)n), .conf_path = ph.conf[n], .log_path = ph.log[n],
		.service = true, .join_at_ns = -1, .crash_at_ns = -1, .restart_at_ns = -1, .leave_at_ns = -1,
	};
	log_info("link self-check: %u probes per node", r->scenario->linkcheck_probes);
	linkcheck_lateness(c, false); /* the emulator's lateness interval starts with the probes */
	res = run_phase(c, &ph, false);
	snprintf(path, sizeof path, "%s/linkcheck.csv", c->dir);
	if (res == SUPERVISE_OK && linkcheck_lateness(c, true) == 0) {
		char err[512];
		int late = 0, rc = linkcheck_late_fill(path, linkcheck_late_of, c, &late, err, sizeof err);

		if (rc < 0 && rc != -ENOENT)
			log_warn("link self-check lateness: %s", err);
	}
	free(c->lc_late);
	c->lc_late = NULL;
	phase_free(&ph);
	return res;
fail:
	phase_free(&ph);
	return SUPERVISE_FAILED;
}

/* Count the link directions judged off or late in linkcheck.csv; print them. */
static int linkcheck_off(const char *dir)
{
	char path[PATH_MAX], line[512];
	FILE *f;
	int off = 0;

	snprintf(path, sizeof path, "%s/linkcheck.csv", dir);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		size_t l = strlen(line);

		if (l > 4 && !strcmp(line + l - 5, ",off\n")) {
			off++;
			log_warn("link off: %.*s", (int)(l - 1), line);
		} else if (l > 5 && !strcmp(line + l - 6, ",late\n")) {
			off++;
			log_warn("link late (p99 release lateness over %.1f ms): %.*s", LINK_VERDICT_LATE_MS,
				 (int)(l - 1), line);
		}
	}
	fclose(f);
	return off;
}

static enum supervise_result training_phase(struct run_ctx *c, const struct nodeconf_ctx *nc)
{
	const struct plan_run *r = c->run;
	struct phase_nodes ph;
	enum supervise_result res;
	char path[PATH_MAX];

	if (phase_alloc(&ph, r->n_nodes) < 0)
		return SUPERVISE_FAILED;
	for (size_t i = 0; i < r->n_nodes; i++) {
		const struct scenario_straggler *st = &r->nodes[i].straggler;
		enum scenario_role role = r->nodes[i].role;

		if (write_conf(c, i, nc, NULL, ph.conf[i], sizeof ph.conf[i]) < 0)
			goto fail;
		snprintf(ph.log[i], sizeof ph.log[i], "%s/logs/%s.log", c->dir, r->nodes[i].name);
		ph.nodes[i] = (struct supervise_node){
			.name = r->nodes[i].name, .netns = testbed_node_netns(c->tb, (int)i), .conf_path = ph.conf[i],
			.log_path = ph.log[i],
			.is_worker = role == SCENARIO_ROLE_WORKER || role == SCENARIO_ROLE_PEER || role == SCENARIO_ROLE_CENTRAL ||
				     role == SCENARIO_ROLE_DEVICE,
			.join_at_ns = us_or_none(st->set, SCENARIO_STRAG_JOIN, st->join_at_us),
			.crash_at_ns = us_or_none(st->set, SCENARIO_STRAG_CRASH, st->crash_at_us),
			.restart_at_ns = us_or_none(st->set, SCENARIO_STRAG_RESTART, st->restart_at_us),
			.leave_at_ns = us_or_none(st->set, SCENARIO_STRAG_LEAVE, st->leave_at_us),
			.pause_every_ns = (st->set & SCENARIO_STRAG_PAUSE) ? (int64_t)st->pause_every_us * 1000 : 0,
			.pause_for_ns = (st->set & SCENARIO_STRAG_PAUSE) ? (int64_t)st->pause_for_us * 1000 : 0,
			.straggler = ph.strag[i],
			.cpu_limited = c->cg && (r->nodes[i].resources.set & SCENARIO_RES_CPU),
		};
		plan_format_straggler(st, ph.strag[i], sizeof ph.strag[i]);
	}
	snprintf(path, sizeof path, "%s/links.csv", c->dir);
	c->links = csv_writer_open(path, TRACE_HEADER_LINKS);
	c->next_event = 0;
	c->next_trace = 0;
	c->next_links_ns = 0;
	c->next_trim_ns = RUN_TRIM_PERIOD_NS;
	c->last_accuracy = -1;
	c->link_drops = 0;
	c->guard = hostload_new();
	if (!c->guard)
		log_warn("host-saturation guard: out of memory (the run is not checked)");
	c->late_p99_ms = NAN;
	res = run_phase(c, &ph, true);
	if (c->guard) {
		hostload_get_summary(c->guard, &c->guard_sum);
		c->have_guard = true;
		hostload_destroy(&c->guard);
		if (c->guard_sum.saturated)
			log_warn("run %s: host saturated (nodes waited for a core %.1f%% of their time, worst second "
				 "%.1f%%): summary.csv flags it (host_saturated = 1)", r->id,
				 100 * c->guard_sum.runq_wait_mean, 100 * c->guard_sum.runq_wait_max);
	}
	csv_writer_close(&c->links);
	phase_free(&ph);
	return res;
fail:
	phase_free(&ph);
	return SUPERVISE_FAILED;
}

/* Undo everything the journal records, in reverse (processes, rules, namespaces, sysctls). */
static int teardown(struct run_ctx *c)
{
	int rc;

	link_shaper_destroy(&c->shaper);
	/* Stop now: the emulator is killed rather than asked (the journal replay would give it
	 * seconds to end on SIGTERM), with its process group (its own, from launch). It is our
	 * unreaped child, so its pid and group are still its own; the replay then finds it gone. */
	if (stop_now() && c->linkd_pid > 0) {
		if (kill(-c->linkd_pid, SIGKILL) < 0)
			kill(c->linkd_pid, SIGKILL);
		while (waitpid(c->linkd_pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	c->linkd_pid = 0;
	if (!c->journal) {
		testbed_destroy(&c->tb);
		cgroup_run_destroy(&c->cg);
		return 0;
	}
	/* The nodes have exited (supervise waits for them). The testbed removes what it made and
	 * restores its sysctls; the journal replay then undoes everything else (the emulator
	 * process, rules) and re-checks what the testbed did, idempotently. */
	testbed_destroy(&c->tb);
	cgroup_run_destroy(&c->cg);
	rc = cleanup_journal(c->journal);
	if (rc < 0)
		log_error("teardown incomplete (%s): run 'stalenet cleanup'", strerror(-rc));
	/* An emulator killed by a signal could not remove its control socket; the replay above
	 * has made sure it is dead, so nobody listens there any more. */
	if (rc == 0 && c->linkd_ctl[0] && unlink(c->linkd_ctl) < 0 && errno != ENOENT)
		log_warn("unlink %s: %s", c->linkd_ctl, strerror(errno));
	journal_destroy(&c->journal);
	return rc;
}

/* Pick and create the shaper once per invocation (the probe costs a scratch namespace). */
/* Choose the link emulation backend once per invocation (the kernel probe costs a scratch
 * namespace). Returns 0, or -ENOTSUP when --backend kernel was asked of a kernel without netem. */
static int choose_backend(enum run_backend want, enum link_backend *out)
{
	int netem = link_shaper_probe_kernel();

	switch (want) {
	case RUN_BACKEND_KERNEL:
		if (netem != 1) {
			fprintf(stderr, "stalenet run: --backend kernel: %s\n", LINK_SHAPER_NO_NETEM_MSG);
			return -ENOTSUP;
		}
		*out = LINK_BACKEND_KERNEL;
		return 0;
	case RUN_BACKEND_NFQ:
		*out = LINK_BACKEND_NFQ;
		return 0;
	default:
		*out = netem == 1 ? LINK_BACKEND_KERNEL : LINK_BACKEND_NFQ;
		return 0;
	}
}

static struct link_shaper *make_shaper(struct run_ctx *c)
{
	struct link_shaper_opts so = { .backend = c->backend, .record = record_shaping, .record_ctx = c };

	if (so.backend == LINK_BACKEND_NFQ) {
		if (start_linkd(c) < 0)
			return NULL;
		so.linkd_ctl = c->linkd_ctl;
	}
	return link_shaper_new(&so);
}

static bool link_unshaped(const struct link_params *p)
{
	return !p->delay_us && !p->jitter_us && !p->loss_ppm && !p->dup_ppm && !p->reorder_ppm && !p->corrupt_ppm &&
	       !p->rate_bps && p->loss_model == LINK_LOSS_RANDOM;
}

static int shape_links(struct run_ctx *c)
{
	const struct plan_run *r = c->run;

	for (size_t i = 0; i < r->n_nodes; i++) {
		const struct plan_node *nd = &r->nodes[i];
		bool timeline = false;

		timeline = c->trace != NULL;
		for (size_t e = 0; e < r->n_events; e++)
			timeline |= r->events[e].node == i;
		/* An unshaped link without timeline changes costs nothing: leave it alone. */
		if (!timeline && link_unshaped(&nd->up) && link_unshaped(&nd->down))
			continue;
		/* asked to stop at once: no further request to the emulator (each may wait on it) */
		if (stop_now())
			return -ECANCELED;
		if (link_shaper_apply(c->shaper, &c->eps[i], LINK_DIR_UP, &nd->up) < 0 ||
		    link_shaper_apply(c->shaper, &c->eps[i], LINK_DIR_DOWN, &nd->down) < 0) {
			if (stop_now()) /* a request cut short by the stop at once: no failure */
				return -ECANCELED;
			log_error("shaping the link of %s failed", nd->name);
			return -EIO;
		}
	}
	return 0;
}

/* A fleet run's end: rebuild and time every stored version (RUN_DIR/recover.csv), then the
 * sweep's fleet_summary.csv. A failure is logged; the run's own status stands. */
static void fleet_finish(const char *run_dir, const char *sweep_dir)
{
	struct recover_totals tot;
	char err[512];
	int rc = recover_verify_run(run_dir, &tot, err, sizeof err);

	if (rc < 0)
		log_warn("fleet verification of %s: %s", run_dir, err);
	else if (tot.verified < tot.versions)
		log_warn("fleet: %zu of %zu stored versions did not verify (%s/recover.csv)",
			 tot.versions - tot.verified, tot.versions, run_dir);
	else
		log_info("fleet: %zu versions verified, rebuild mean %.6f s max %.6f s", tot.versions,
			 tot.recover_s_mean, tot.recover_s_max);
	if (fleet_summary_rebuild(sweep_dir, err, sizeof err) < 0)
		log_warn("fleet summary: %s", err);
}

static int exit_code_for(enum supervise_result r)
{
	return r == SUPERVISE_OK ? CLI_EXIT_OK : r == SUPERVISE_INTERRUPTED ? CLI_EXIT_INTERRUPTED : CLI_EXIT_FAILED;
}

static int run_one(struct run_ctx *c, const char *sweep_dir)
{
	const struct plan_run *r = c->run;
	const struct scenario *sc = r->scenario;
	struct rundir_meta meta = { .duration_s = -1, .status = "running",
				    .host_timers = c->timers_measured ? &c->timers : NULL };
	struct testbed_spec spec = { 0 };
	struct testbed_tcp tcp;
	const char **names = NULL;
	struct nodeconf_ctx nc = { 0 };
	enum supervise_result res = SUPERVISE_FAILED;
	char err[512], summary_path[PATH_MAX + 32];
	int rc = CLI_EXIT_FAILED, wrote;
	bool bad_input = false;
	size_t n = r->n_nodes;
	int64_t t0 = clock_now_ns();

	c->spin = choose_spin(c);
	meta.precision = c->backend == LINK_BACKEND_NFQ ? (c->spin ? "spin" : "timer") : "kernel";
	c->run_t0_ns = t0;
	run_ended = 0;
	c->have_guard = false;
	stop_label(sc, c->stop_label, sizeof c->stop_label);
	if (rundir_prepare(c->dir, r) < 0)
		return CLI_EXIT_FAILED;
	if (testbed_random_prefix(c->prefix, sizeof c->prefix) < 0)
		return CLI_EXIT_FAILED;
	/* The runtime directory (registry, control sockets) is made safe before anything goes in. */
	if (rtdir_ensure() < 0)
		return CLI_EXIT_FAILED;
	c->journal = journal_create(c->dir, c->prefix, err, sizeof err);
	if (!c->journal) {
		log_error("journal: %s", err);
		return CLI_EXIT_FAILED;
	}
	log_info("run %s: %zu nodes, prefix %s, directory %s", r->id, n, c->prefix, c->dir);

	/* Nodes plus the hub that reflects link probes (unshaped). */
	names = calloc(n + 1, sizeof *names);
	c->eps = calloc(n, sizeof *c->eps);
	c->addrs = calloc(n + 1, sizeof *c->addrs);
	c->cur_up = calloc(n, sizeof *c->cur_up);
	c->cur_down = calloc(n, sizeof *c->cur_down);
	if (!names || !c->eps || !c->addrs || !c->cur_up || !c->cur_down)
		goto out;
	for (size_t i = 0; i < n; i++) {
		c->cur_up[i] = r->nodes[i].up;
		c->cur_down[i] = r->nodes[i].down;
	}
	if (sc->network.trace) {
		c->trace = linktrace_load(sc->network.trace, err, sizeof err);
		if (!c->trace) {
			fprintf(stderr, "%s\n", err);
			rc = CLI_EXIT_USAGE;
			bad_input = true;
			goto out;
		}
	}
	for (size_t i = 0; i < n; i++)
		names[i] = r->nodes[i].name;
	names[n] = "hub";
	tcp = (struct testbed_tcp){
		.slow_start_after_idle = sc->network.tcp.slow_start_after_idle, .ecn = sc->network.tcp.ecn,
		.initial_cwnd = sc->network.tcp.initial_cwnd,
	};
	memcpy(tcp.rmem, sc->network.tcp.rmem, sizeof tcp.rmem);
	memcpy(tcp.wmem, sc->network.tcp.wmem, sizeof tcp.wmem);
	spec = (struct testbed_spec){
		.prefix = c->prefix, .n_nodes = (int)n + 1, .node_names = names,
		.subnet_be = htonl(sc->network.subnet), .prefix_len = sc->network.prefix_len,
		.mtu = (int)sc->network.mtu, .cc = sc->network.cc, .raise_neigh = n + 1 > 500,
		.tcp = &tcp, .interrupted = &run_interrupted, .interrupt_at = SUPERVISE_STOP_NOW,
	};
	/* A first interruption lets the setup finish (the phase after it stops before any node
	 * starts); a second one ends the setup's waits at once (setup_cut below). */
	c->tb = testbed_create(&spec, c->journal, err, sizeof err);
	if (!c->tb) {
		if (!stop_now())
			log_error("testbed: %s", err);
		goto setup_cut;
	}
	/* The bridge proven before anything is shaped: a broken testbed is named here, not
	 * mistaken later for a lossy link. */
	if (testbed_check_reach(c->tb, 10000, err, sizeof err) < 0) {
		if (!stop_now())
			log_error("testbed: reachability: %s", err);
		goto setup_cut;
	}
	for (size_t i = 0; i <= n; i++)
		c->addrs[i] = strdup(testbed_node_addr_str(c->tb, (int)i));
	for (size_t i = 0; i < n; i++)
		c->eps[i] = (struct link_endpoint){
			.node_netns = testbed_node_netns(c->tb, (int)i), .node_ifname = testbed_node_ifname(c->tb, (int)i),
			.switch_netns = testbed_switch_netns(c->tb),
			.switch_ifname = testbed_node_switch_ifname(c->tb, (int)i),
		};
	if (make_cgroups(c) < 0)
		goto setup_cut;
	c->shaper = make_shaper(c);
	if (!c->shaper)
		goto setup_cut;
	if (shape_links(c) < 0)
		goto setup_cut;
	if (ctl_endpoint_for(c->dir, c->prefix, c->ctl_ep, sizeof c->ctl_ep) < 0 ||
	    !(c->ctl = ctl_server_open(c->ctl_ep)))
		goto out;

	meta.backend = backend_name(c->backend);
	meta.prefix = c->prefix;
	meta.origin_ns = clock_now_ns();
	meta.wall_start_ns = clock_wall_ns();
	clock_set_origin_ns(meta.origin_ns);
	if ((wrote = rundir_write_meta(c->dir, r, &meta)) < 0) {
		log_error("write %s/meta.json: %s", c->dir, strerror(-wrote));
		goto out;
	}

	nc = (struct nodeconf_ctx){
		.run_dir = c->dir, .ctl_endpoint = c->ctl_ep, .origin_ns = meta.origin_ns,
		.data_path = sc->data.path ? sc->data.path : RUN_DEFAULT_DATA_DIR, .addrs = (const char *const *)c->addrs, .hub_addr = c->addrs[n],
		.port_data = RUN_PORT_DATA, .port_probe = RUN_PORT_PROBE,
	};
	/* Interrupted while the testbed was being built (once: the setup finished; twice: its
	 * waits were cut short): no phase is started, no node launched. */
	if (run_interrupted) {
		res = SUPERVISE_INTERRUPTED;
		supervise_event(c->dir, "stop", "all", "interrupted");
		goto out;
	}
	if (sc->linkcheck || sc->workload == SCENARIO_WORKLOAD_LINKCHECK) {
		int off;

		res = linkcheck_phase(c, &nc);
		if (res != SUPERVISE_OK)
			goto out;
		off = linkcheck_off(c->dir);
		if (off && c->opts->strict_links) {
			log_error("%d link direction(s) outside tolerance (--strict-links): see linkcheck.csv", off);
			res = SUPERVISE_FAILED;
			goto out;
		}
		if (off)
			log_warn("%d link direction(s) outside tolerance: see %s/linkcheck.csv", off, c->dir);
	}
	if (sc->workload == SCENARIO_WORKLOAD_TRAIN && run_interrupted) {
		/* interrupted between the self-check and training: training is not started */
		res = SUPERVISE_INTERRUPTED;
		supervise_event(c->dir, "stop", "all", "interrupted");
	} else if (sc->workload == SCENARIO_WORKLOAD_TRAIN) {
		res = training_phase(c, &nc);
		meta.origin_ns = clock_origin_ns();
		meta.wall_start_ns = clock_wall_ns() - (clock_now_ns() - meta.origin_ns);
	}
	goto out;
setup_cut:
	/* a setup step failed: when because the user asked to stop at once (its wait ended), the
	 * run is interrupted, not failed */
	if (stop_now()) {
		res = SUPERVISE_INTERRUPTED;
		supervise_event(c->dir, "stop", "all", "interrupted");
	}
out:
	if (c->ctl)
		ctl_server_close(&c->ctl);
	if (teardown(c) < 0 && res == SUPERVISE_OK)
		res = SUPERVISE_FAILED;
	for (size_t i = 0; c->addrs && i <= n; i++)
		free(c->addrs[i]);
	free(c->addrs);
	c->addrs = NULL;
	free(c->eps);
	c->eps = NULL;
	free(c->cur_up);
	free(c->cur_down);
	c->cur_up = c->cur_down = NULL;
	linktrace_destroy(&c->trace);
	free(names);
	rc = bad_input ? CLI_EXIT_USAGE : exit_code_for(res);
	meta.duration_s = (double)(clock_now_ns() - t0) / 1e9;
	meta.status = res == SUPERVISE_OK ? "complete" : res == SUPERVISE_INTERRUPTED ? "interrupted" : "failed";
	if (!meta.backend)
		meta.backend = c->shaper || c->backend ? backend_name(c->backend) : "";
	/* a setup cut short: the prefix its journal (and any `stalenet cleanup`) knows it by */
	if (!meta.prefix)
		meta.prefix = c->prefix;
	meta.guard = c->have_guard ? &c->guard_sum : NULL;
	if ((wrote = rundir_write_meta(c->dir, r, &meta)) < 0) {
		log_error("write %s/meta.json: %s (the run's status is not recorded)", c->dir, strerror(-wrote));
		if (rc == CLI_EXIT_OK)
			rc = CLI_EXIT_FAILED;
	}
	if (sc->workload == SCENARIO_WORKLOAD_TRAIN) {
		struct summary_row row;

		snprintf(summary_path, sizeof summary_path, "%s/summary.csv", sweep_dir);
		if (summary_compute(c->dir, &row, err, sizeof err) == 0) {
			if (summary_append(summary_path, &row, err, sizeof err) < 0)
				log_warn("summary: %s", err);
		} else {
			log_warn("summary of %s: %s", c->dir, err);
		}
	}
	/* the stores' verification rebuilds every version: not when asked to stop at once */
	if (sc->topology.kind == SCENARIO_TOPO_FLEET && !stop_now())
		fleet_finish(c->dir, sweep_dir);
	if (res == SUPERVISE_OK)
		rundir_mark_complete(c->dir);
	return rc;
}

/* An earlier attempt of a run, on one host or across hosts, that did not complete: kept aside
 * (rundir_set_aside), or, in out itself, refused. Returns 0 or < 0 (reported). */
static int set_aside(const char *out, const char *dir, const char *id)
{
	char aside[PATH_MAX + 64];
	int rc = rundir_set_aside(out, dir, id, aside, sizeof aside);

	if (rc == -EEXIST && !strcmp(dir, out))
		fprintf(stderr, "stalenet run: %s holds an earlier attempt of this run that did not complete; "
			"remove it or choose another --out\n", out);
	else if (rc == 1)
		log_info("run %s: an earlier attempt is incomplete; kept in %s", id, aside);
	return rc < 0 ? rc : 0;
}

/* What a run across hosts cannot do yet, named before any host is contacted (0 = runnable). */
static int across_hosts_unsupported(const struct plan *plan, char *why, size_t len)
{
	for (size_t k = 0; k < plan_n_runs(plan); k++) {
		const struct plan_run *r = plan_run(plan, k);
		const struct scenario *sc = r->scenario;
		if ((sc->network.subnet && sc->network.subnet != TESTBED_DEFAULT_SUBNET) ||
		    (sc->network.prefix_len && sc->network.prefix_len != 15)) {
			snprintf(why, len, "network.subnet other than 198.18.0.0/15 is not supported across hosts yet");
			return -ENOTSUP;
		}
	}
	return 0;
}

/* One run of a scenario across hosts: the testbed built by the agents (multihost_build), the
 * nodes launched and supervised through them (multihost_run_nodes), their files fetched into
 * the run directory, the summary computed as for one host. Returns a CLI exit code. */
static int run_multihost_one(const struct run_opts *o, const struct plan_run *run, const struct hosts *hosts,
			     struct multihost *mh, const char *dir, const char *sweep_dir)
{
	const struct scenario *sc = run->scenario;
	struct rundir_meta meta = { .duration_s = -1, .status = "running" };
	const char *backend = NULL;
	struct rundir_host *rh = calloc(hosts->n, sizeof *rh);
	char **addrs = calloc(run->n_nodes + 1, sizeof *addrs);
	char err[512], prefix[16];
	uint32_t vni = 0;
	int64_t t0 = clock_now_ns(), origin = 0;
	int res = 1;
	struct placement *pl = NULL;
	struct linktrace *trace = NULL;

	run_ended = 0;
	if (!rh || !addrs || rundir_prepare(dir, run) < 0)
		goto out;
	/* node i at 198.18.0.0/15 + i + 1 on whichever host it lands (as each agent builds it); the
	 * hub of the link self-check after them */
	for (size_t i = 0; i <= run->n_nodes; i++) {
		struct in_addr a = { htonl(TESTBED_DEFAULT_SUBNET + (uint32_t)i + 1) };
		char b[INET_ADDRSTRLEN];
		if (!(addrs[i] = strdup(inet_ntop(AF_INET, &a, b, sizeof b))))
			goto out;
	}
	pl = placement_new(hosts, run, err, sizeof err);
	if (!pl) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	if (testbed_random_prefix(prefix, sizeof prefix) < 0 || getrandom(&vni, sizeof vni, 0) != (ssize_t)sizeof vni)
		goto out;
	vni = (vni % ((1u << 24) - 1)) + 1;
	meta.prefix = prefix;
	meta.hosts = rh;
	meta.n_hosts = hosts->n;
	for (size_t h = 0; h < hosts->n; h++) {
		const struct clocksync_estimate *e = multihost_clock(mh, h);
		rh[h] = (struct rundir_host){ .name = hosts->list[h].name, .offset_ns = e->offset_ns,
					      .bound_ns = e->bound_ns, .drift_ppm = e->drift_ppm };
	}
	bool check = sc->linkcheck || sc->workload == SCENARIO_WORKLOAD_LINKCHECK;
	if (sc->network.trace && !(trace = linktrace_load(sc->network.trace, err, sizeof err))) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	bool ready = multihost_build(mh, run, pl, check, prefix, vni, stderr, stderr) == 0 &&
		     multihost_shape(mh, run, pl, o->backend == RUN_BACKEND_KERNEL ? "kernel" : "nfq", trace != NULL,
				     &backend, stderr) == 0;
	if (stop_now()) {
		/* interrupted twice while the testbed was being built (its waits cut short): no
		 * node is started, the teardown follows */
		res = 2;
		supervise_event(dir, "stop", "all", "interrupted");
	} else if (ready) {
		struct nodeconf_ctx nc = {
			.run_dir = dir, .ctl_endpoint = "-", .origin_ns = clock_now_ns(),
			.data_path = sc->data.path ? sc->data.path : RUN_DEFAULT_DATA_DIR,
			.addrs = (const char *const *)addrs, .hub_addr = addrs[run->n_nodes], .port_data = RUN_PORT_DATA,
			.port_probe = RUN_PORT_PROBE,
		};
		struct multihost_nodes_opts no = {
			.run = run, .p = pl, .nc = &nc, .run_dir = dir, .on_failure_continue = false, .linkcheck = true,
			.ready_timeout_ms = RUN_READY_TIMEOUT_MS, .interrupted = &run_interrupted,
			.stop_grace_ns = (int64_t)sc->stop_grace_us * 1000,
		};
		res = 0;
		if (check) {
			/* the link self-check across the hosts, cross-host paths as compensated */
			log_info("link self-check: %u probes per node", sc->linkcheck_probes);
			res = multihost_run_nodes(mh, &no, &origin, stderr);
			int off = res == 0 ? linkcheck_off(dir) : 0;
			if (off && o->strict_links) {
				log_error("%d link direction(s) outside tolerance (--strict-links): see linkcheck.csv", off);
				res = 1;
			} else if (off) {
				log_warn("%d link direction(s) outside tolerance: see %s/linkcheck.csv", off, dir);
			}
			origin = 0;
		}
		if (res == 0 && sc->workload == SCENARIO_WORKLOAD_TRAIN) {
			no = (struct multihost_nodes_opts){
				.run = run, .p = pl, .nc = &nc, .run_dir = dir,
				.stop_after_ns = (int64_t)sc->stop_time_us * 1000,
				.stop_grace_ns = (int64_t)sc->stop_grace_us * 1000,
				.on_failure_continue = sc->on_node_failure == SCENARIO_ON_FAILURE_CONTINUE,
				.ready_timeout_ms = RUN_READY_TIMEOUT_MS, .interrupted = &run_interrupted, .trace = trace,
				.ended = &run_ended,
			};
			nc.origin_ns = clock_now_ns();
			res = multihost_run_nodes(mh, &no, &origin, stderr);
		}
	}
	if (multihost_teardown(mh, stderr) < 0 && res == 0)
		res = 1;
	meta.origin_ns = origin;
	meta.wall_start_ns = clock_wall_ns() - (clock_now_ns() - origin);
	/* the estimate as refreshed through the run (offset at the origin, its bound, the drift) */
	for (size_t h = 0; origin && h < hosts->n; h++) {
		const struct clocksync_estimate *e = multihost_clock(mh, h);
		rh[h].offset_ns = clocksync_offset_at(e, origin);
		rh[h].bound_ns = e->bound_ns;
		rh[h].drift_ppm = e->drift_ppm;
	}
out:
	/* no link shaped: what this host would have used, as a one-host run reports it */
	meta.backend = backend ? backend : link_shaper_probe_kernel() == 1 ? "kernel" : "nfq";
	meta.duration_s = (double)(clock_now_ns() - t0) / 1e9;
	meta.status = res == 0 ? "complete" : res == 2 ? "interrupted" : "failed";
	if (rh && rundir_write_meta(dir, run, &meta) < 0)
		log_error("write %s/meta.json failed", dir);
	if (sc->workload == SCENARIO_WORKLOAD_TRAIN && res != 2) {
		struct summary_row row;
		char summary_path[PATH_MAX + 32];

		snprintf(summary_path, sizeof summary_path, "%s/summary.csv", sweep_dir);
		if (summary_compute(dir, &row, err, sizeof err) == 0) {
			if (summary_append(summary_path, &row, err, sizeof err) < 0)
				log_warn("summary: %s", err);
		} else {
			log_warn("summary of %s: %s", dir, err);
		}
	}
	/* the stores came whole from their hosts (orchestrator/agentfile): verified as on one host
	 * (not when asked to stop at once: the verification rebuilds every version) */
	if (sc->topology.kind == SCENARIO_TOPO_FLEET && !stop_now())
		fleet_finish(dir, sweep_dir);
	if (res == 0)
		rundir_mark_complete(dir);
	for (size_t i = 0; addrs && i <= run->n_nodes; i++)
		free(addrs[i]);
	free(addrs);
	free(rh);
	placement_destroy(&pl);
	linktrace_destroy(&trace);
	return res == 0 ? CLI_EXIT_OK : res == 2 ? CLI_EXIT_INTERRUPTED : CLI_EXIT_FAILED;
}

/* Every run of the plan across the connected hosts, one after another. */
static int run_across_hosts(const struct run_opts *o, const struct scenario *sc, const struct plan *plan,
			    const struct hosts *hosts, struct multihost *mh)
{
	char out[PATH_MAX], abs_out[PATH_MAX], dir[RUN_DIR_MAX];
	size_t nruns = plan_n_runs(plan);
	int rc = CLI_EXIT_OK;

	if (o->out_dir)
		snprintf(out, sizeof out, "%s", o->out_dir);
	else
		rundir_default(sc->name, out, sizeof out);
	if (rundir_mkdirs(out, false) < 0 || !realpath(out, abs_out) ||
	    strlen(abs_out) > RUN_DIR_MAX - PLAN_RUN_ID_MAX - 2) {
		fprintf(stderr, "stalenet run: cannot use %s\n", out);
		return CLI_EXIT_FAILED;
	}
	{
		char err[SCENARIO_ERR_MAX];

		if (rundir_check_out(abs_out, plan, nruns == 1 && sc->sweep.n_axes == 0 && sc->sweep.repeat <= 1,
				     NULL, err, sizeof err) < 0) {
			fprintf(stderr, "stalenet run: %s: not a resume of these runs; choose another --out\n", err);
			return CLI_EXIT_USAGE;
		}
	}
	bool single = nruns == 1 && sc->sweep.n_axes == 0 && sc->sweep.repeat <= 1;
	size_t i;

	for (i = 0; i < nruns && !run_interrupted; i++) {
		const struct plan_run *run = plan_run(plan, i);
		int dl;
		if (single)
			dl = snprintf(dir, sizeof dir, "%s", abs_out);
		else
			dl = snprintf(dir, sizeof dir, "%s/%.*s", abs_out, PLAN_RUN_ID_MAX, run->id);
		if (dl < 0 || dl >= (int)sizeof dir)
			return CLI_EXIT_FAILED; /* checked above: abs_out leaves room for an id */
		if (rundir_is_complete(dir))
			continue;
		if (set_aside(abs_out, dir, run->id) < 0)
			return !strcmp(dir, abs_out) ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
		int r = run_multihost_one(o, run, hosts, mh, dir, abs_out);
		if (r == CLI_EXIT_INTERRUPTED)
			return r;
		if (r != CLI_EXIT_OK)
			rc = CLI_EXIT_FAILED;
	}
	rc = sweep_interrupted(rc, abs_out, strlen(abs_out), plan, single, i);
	if (o->plot && rc != CLI_EXIT_INTERRUPTED) {
		char err[512];
		int figs = plot_dir(abs_out, err, sizeof err);
		if (figs < 0)
			log_warn("plot: %s", err);
		else
			log_info("%d figures in %s/plots", figs, abs_out);
	}
	fprintf(stderr, "%s: %zu run(s) across %zu hosts; results in %s\n",
		rc == CLI_EXIT_OK ? "done" : rc == CLI_EXIT_INTERRUPTED ? "interrupted" : "finished with failures", nruns,
		hosts->n, abs_out);
	return rc;
}

int run_main(const struct run_opts *o)
{
	char err[SCENARIO_ERR_MAX], out[PATH_MAX], abs_out[PATH_MAX];
	size_t abs_len;
	struct scenario *sc = NULL;
	struct plan *plan = NULL;
	struct run_ctx c = { .opts = o, .late_p99_ms = NAN, .host_late_p99_ms = NAN };
	int rc = CLI_EXIT_USAGE, failed = 0;
	size_t nruns, done = 0, skipped = 0;

	sc = scenario_load_with(o->scenario_path, o->sets, o->n_sets, err, sizeof err);
	if (!sc) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	plan = plan_new(sc, err, sizeof err);
	if (!plan) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	/* A simulation: section lifts the node limit for `stalenet simulate` only. */
	for (size_t i = 0; i < plan_n_runs(plan); i++)
		if (plan_run(plan, i)->n_nodes > LIMITS_MAX_NODES) {
			fprintf(stderr, "stalenet run: run %s has %zu nodes; at most %d can be emulated "
				"(use stalenet simulate)\n", plan_run(plan, i)->id, plan_run(plan, i)->n_nodes,
				LIMITS_MAX_NODES);
			goto out;
		}
	if (o->hosts_path || sc->hosts) {
		/* Multi-host: the host list and every run's placement are validated, and what cannot
		 * run across hosts yet is refused (exit 2), then every host is reached and checked
		 * (exit 3, one line per bad host) before every run is run across them. */
		struct hosts *fh = o->hosts_path ? hosts_load(o->hosts_path, err, sizeof err) : NULL;
		struct hosts *hosts = fh ? fh : sc->hosts;
		int prc = o->hosts_path && !fh ? -EINVAL : 0;
		if (!prc && hosts->launcher == HOSTS_LAUNCHER_SLURM) {
			/* the allocation names the hosts (outside one: one error, exit 2) */
			struct slurm_env env = slurm_env_get();
			prc = slurm_resolve(hosts, &env, err, sizeof err);
		}
		if (!prc)
			prc = placement_plan(hosts, plan, NULL, err, sizeof err);
		if (!prc && (prc = across_hosts_unsupported(plan, err, sizeof err))) {
			char why[sizeof err];
			snprintf(why, sizeof why, "%s", err);
			snprintf(err, sizeof err, "stalenet run: %.*s", (int)sizeof err - 16, why);
		}
		if (prc) {
			fprintf(stderr, "%s\n", err);
			hosts_destroy(&fh);
			goto out;
		}
		struct multihost_opts mo = { .hosts = hosts, .identity = o->identity, .known_hosts = o->known_hosts,
					     .agent_path = o->agent_path, .interrupted = &run_interrupted };
		rc = CLI_EXIT_HOST;
		struct multihost *mh = multihost_connect(&mo, stderr, stderr);
		if (mh) {
			install_signals();
			rc = run_across_hosts(o, sc, plan, hosts, mh);
			multihost_close(&mh);
		}
		hosts_destroy(&fh);
		goto out;
	}
	rc = CLI_EXIT_HOST;
	if (geteuid() != 0) {
		fprintf(stderr, "stalenet run: needs root (network namespaces, links, qdiscs); try: sudo %s\n",
			"stalenet run ...");
		goto out;
	}
	if (sibling_program("stalenet-node", c.node_bin, sizeof c.node_bin) < 0 ||
	    sibling_program("stalenet-linkd", c.linkd_bin, sizeof c.linkd_bin) < 0)
		goto out;
	if (choose_backend(o->backend, &c.backend) < 0)
		goto out;
	/* The first line of every run's output names the backend (also in meta.json). */
	log_info("link emulation backend: %s%s", backend_name(c.backend),
		 c.backend == LINK_BACKEND_NFQ && o->backend == RUN_BACKEND_AUTO
			 ? " (this kernel has no sch_netem: userspace emulator on NFQUEUE)" : "");
	if (o->out_dir)
		snprintf(out, sizeof out, "%s", o->out_dir);
	else
		rundir_default(sc->name, out, sizeof out);
	if (rundir_mkdirs(out, false) < 0 || !realpath(out, abs_out)) {
		fprintf(stderr, "stalenet run: cannot create %s: %s\n", out, strerror(errno));
		goto out;
	}
	abs_len = strlen(abs_out);
	if (abs_len > RUN_DIR_MAX - PLAN_RUN_ID_MAX - 2) {
		fprintf(stderr, "stalenet run: output path too long: %s\n", abs_out);
		goto out;
	}
	if (rundir_check_out(abs_out, plan, plan_n_runs(plan) == 1 && sc->sweep.n_axes == 0 &&
			     sc->sweep.repeat <= 1, NULL, err, sizeof err) < 0) {
		fprintf(stderr, "stalenet run: %s: not a resume of these runs; choose another --out\n", err);
		rc = CLI_EXIT_USAGE;
		goto out;
	}
	install_signals();
	/* The host's timers, once: meta.json's host_timers, network.precision: auto's choice and,
	 * for the kernel backend, the link check's lateness (about a second). */
	{
		struct timerlat_opts to = TIMERLAT_OPTS_QUICK;
		char text[1024];

		c.timers_measured = timerlat_measure(&to, &c.timers) == 0;
		if (c.timers_measured) {
			c.host_late_p99_ms = (double)c.timers.load.p99_ns / 1e6;
			timerlat_describe(&c.timers, text, sizeof text);
			for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n"))
				log_debug("host: %s", l);
			log_info("host timers: p99 lateness %.3f ms after idle, %.3f ms under load (%s)",
				 (double)c.timers.idle.p99_ns / 1e6, (double)c.timers.load.p99_ns / 1e6,
				 c.timers.rt ? "real-time" : "no real-time priority");
		}
	}
	nruns = plan_n_runs(plan);
	{
		/* the live view fits the terminal (a wrapped line would break its in-place redraw) */
		struct winsize ws;
		int width = ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 100;

		if (!o->quiet)
			c.view = progress_view_new(2, isatty(2), width);
	}
	c.run_count = (int)nruns;
	rc = CLI_EXIT_OK;
	size_t next = 0;

	for (size_t i = 0; i < nruns && !run_interrupted; i++) {
		int r;

		next = i + 1;
		c.run = plan_run(plan, i);
		c.run_index = (int)i + 1;
		if (nruns == 1 && sc->sweep.n_axes == 0 && sc->sweep.repeat <= 1)
			snprintf(c.dir, sizeof c.dir, "%.*s", (int)abs_len, abs_out);
		else
			snprintf(c.dir, sizeof c.dir, "%.*s/%.*s", (int)abs_len, abs_out, PLAN_RUN_ID_MAX, c.run->id);
		if (rundir_is_complete(c.dir)) {
			log_info("run %zu/%zu %s: already complete, skipped", i + 1, nruns, c.run->id);
			skipped++;
			continue;
		}
		if (set_aside(abs_out, c.dir, c.run->id) < 0) {
			rc = !strcmp(c.dir, abs_out) ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
			break;
		}
		log_info("run %zu/%zu: %s", i + 1, nruns, c.run->id);
		c.runs_left = 0;
		for (size_t j = i + 1; j < nruns; j++) {
			char later[RUN_DIR_MAX];

			snprintf(later, sizeof later, "%.*s/%.*s", (int)abs_len, abs_out, PLAN_RUN_ID_MAX,
				 plan_run(plan, j)->id);
			c.runs_left += !rundir_is_complete(later);
		}
		r = run_one(&c, abs_out);
		c.done_s += (double)(clock_now_ns() - c.run_t0_ns) / 1e9;
		c.n_done++;
		done++;
		if (r == CLI_EXIT_INTERRUPTED) {
			rc = r;
			break;
		}
		if (r != CLI_EXIT_OK) {
			failed++;
			rc = CLI_EXIT_FAILED;
		}
	}
	rc = sweep_interrupted(rc, abs_out, abs_len, plan, nruns == 1 && sc->sweep.n_axes == 0 && sc->sweep.repeat <= 1,
			       next);
	if (o->plot && rc != CLI_EXIT_INTERRUPTED) {
		int figs = plot_dir(abs_out, err, sizeof err);
		if (figs < 0)
			log_warn("plot: %s", err);
		else
			log_info("%d figures in %s/plots", figs, abs_out);
	}
	fprintf(stderr, "%s: %zu run(s) done, %zu skipped, %d failed%s; results in %s\n",
		rc == CLI_EXIT_OK ? "done" : rc == CLI_EXIT_INTERRUPTED ? "interrupted" : "finished with failures",
		done, skipped, failed, rc == CLI_EXIT_INTERRUPTED ? " (host cleaned up)" : "", abs_out);
out:
	progress_view_destroy(&c.view);
	plan_destroy(&plan);
	scenario_destroy(&sc);
	return rc;
}
