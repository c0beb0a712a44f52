/* Unit tests for orchestrator/supervise's planned churn when a start fails, and for an
 * interruption: the supervisor runs stand-in nodes (forked children speaking the real control
 * plane over ipc://, no namespaces, no privileges) through its spawn seam, which makes chosen
 * starts fail as fork, exec or a resource limit would. A failed restart must be an events.csv
 * row, be tried again with a growing backoff, and the node count as restarted only once its
 * process runs. An interruption is logged as one, and the nodes it stops are not failed; a
 * second one kills a node that ignores the stop at once; one that comes after the run's end
 * (its stop time) leaves the run as it ended; a node that ignores the stop gets SIGTERM after
 * the configured grace (stop.grace). */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/ctl.h"
#include "orchestrator/launch.h"
#include "orchestrator/supervise.h"
#include "tests/support/files.h"
#include "tests/support/wait.h"

static char dir[128], ep[256];

/* What the stand-in does: how many starts of node "b" fail (from its second start on; -1:
 * all of them), and whether node "a" exits as soon as it is started. */
static struct {
	int b_fail;
	bool a_quits;
	bool a_hangs;                  /* "a" ignores stop (a hung node) */
	int a_lingers_ms;              /* "a" ends this long after being told to stop */
	int b_calls;
	pid_t pids[8];                 /* every process started */
	int n_pids;
} plan;

/* A node: ready, then run until told to stop (at most 30 s); a restarted one leaves a file
 * saying it was started as a rejoin. */
static _Noreturn void stand_in(const char *name)
{
	struct ctl_client *c = ctl_client_open(ep, name);
	char path[300];
	int64_t until;

	if (!c || ctl_client_ready_wait(c, 20000) != 0)
		_exit(10);
	if (ctl_client_rejoined(c)) {
		snprintf(path, sizeof path, "%s/%s.rejoined", dir, name);
		FILE *f = fopen(path, "w");
		if (f)
			fclose(f);
	}
	if (!strcmp(name, "a") && plan.a_quits) {
		ctl_client_close(&c);
		_exit(0);
	}
	until = support_now_ms() + 30000;
	while (support_now_ms() < until && (!ctl_client_should_stop(c) || (!strcmp(name, "a") && plan.a_hangs)))
		usleep(5000); /* a node's pacing, not a wait for the test */
	if (!strcmp(name, "a") && plan.a_lingers_ms)
		usleep((useconds_t)plan.a_lingers_ms * 1000); /* its slow wind-down, the test's subject */
	ctl_client_done(c);
	ctl_client_close(&c);
	_exit(0);
}

static pid_t spawn(void *arg, const struct launch_spec *ls)
{
	(void)arg;
	if (!strcmp(ls->name, "b") && plan.b_calls++ >= 1 && (plan.b_fail < 0 || plan.b_calls - 1 <= plan.b_fail))
		return -EAGAIN;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		stand_in(ls->name);
	if (plan.n_pids < 8)
		plan.pids[plan.n_pids++] = pid;
	return pid;
}

/* events.csv rows: t_s and event,target,detail (after the first comma), at most 64. */
struct row {
	double t;
	char rest[256];
};

static int read_events(struct row *rows, int max)
{
	char path[300];
	size_t len;
	int n = 0;

	snprintf(path, sizeof path, "%s/events.csv", dir);
	char *t = support_read_file(path, &len);
	cr_assert_not_null(t, "no events.csv");
	char *save = NULL;
	strtok_r(t, "\n", &save); /* header */
	for (char *l = strtok_r(NULL, "\n", &save); l && n < max; l = strtok_r(NULL, "\n", &save)) {
		char *c = strchr(l, ',');
		cr_assert_not_null(c, "bad row %s", l);
		rows[n].t = strtod(l, NULL);
		snprintf(rows[n].rest, sizeof rows[n].rest, "%s", c + 1);
		fprintf(stderr, "  %s\n", l);
		n++;
	}
	free(t);
	return n;
}

static int find(const struct row *rows, int n, int from, const char *prefix)
{
	for (int i = from; i < n; i++)
		if (!strncmp(rows[i].rest, prefix, strlen(prefix)))
			return i;
	return -1;
}

/* Two workers, neither joining late nor scheduled to crash, restart or leave. */
static const struct supervise_node two_workers[2] = {
	{ .name = "a", .is_worker = true, .join_at_ns = -1, .crash_at_ns = -1, .restart_at_ns = -1,
	  .leave_at_ns = -1 },
	{ .name = "b", .is_worker = true, .join_at_ns = -1, .crash_at_ns = -1, .restart_at_ns = -1,
	  .leave_at_ns = -1 },
};

static enum supervise_result run(int64_t stop_ns, bool on_failure_continue)
{
	const struct supervise_node nodes[2] = {
		{ .name = "a", .is_worker = true, .join_at_ns = -1, .crash_at_ns = -1, .restart_at_ns = -1,
		  .leave_at_ns = -1 },
		{ .name = "b", .is_worker = true, .join_at_ns = -1, .crash_at_ns = 200000000, .restart_at_ns = 400000000,
		  .leave_at_ns = -1 },
	};
	struct ctl_server *srv;
	int64_t origin = 0;

	support_tmpdir(dir, sizeof dir, "supervise");
	cr_assert_eq(ctl_endpoint_for(dir, "t", ep, sizeof ep), 0);
	srv = ctl_server_open(ep);
	cr_assert_not_null(srv);
	struct supervise_opts o = {
		.node_bin = "/nonexistent/stalenet-node", .ctl = srv, .run_dir = dir, .stop_after_ns = stop_ns,
		.on_failure_continue = on_failure_continue, .ready_timeout_ms = 20000, .spawn = spawn,
	};
	enum supervise_result r = supervise_run(&o, nodes, 2, &origin);
	ctl_server_close(&srv);
	return r;
}

static bool rejoined(const char *name)
{
	char path[300];

	snprintf(path, sizeof path, "%s/%s.rejoined", dir, name);
	return access(path, F_OK) == 0;
}

/* Two failed starts, then one that works: two start_failed rows (retry in 0.1 s, then 0.2 s),
 * the restart row after them, and the node really back (a rejoin start). */
Test(supervise, failed_restart_is_logged_and_retried, .timeout = 60)
{
	struct row rows[64];

	plan.b_fail = 2;
	plan.a_quits = false;
	plan.b_calls = 0;
	cr_assert_eq(run(2000000000LL, false), SUPERVISE_OK);
	int n = read_events(rows, 64);
	int crash = find(rows, n, 0, "crash,b,");
	int f1 = find(rows, n, 0, "start_failed,b,");
	int f2 = f1 < 0 ? -1 : find(rows, n, f1 + 1, "start_failed,b,");
	int re = find(rows, n, 0, "restart,b,");
	cr_assert(crash >= 0 && f1 > crash && f2 > f1 && re > f2, "crash %d, failed %d %d, restart %d", crash, f1, f2,
		  re);
	cr_expect_eq(find(rows, n, f2 + 1, "start_failed,b,"), -1, "only two failed starts");
	cr_expect(strstr(rows[f1].rest, "restart: Resource temporarily unavailable; retry in 0.100 s"), "%s",
		  rows[f1].rest);
	cr_expect(strstr(rows[f2].rest, "retry in 0.200 s"), "%s", rows[f2].rest);
	cr_expect(strstr(rows[re].rest, "after 2 failed start(s)"), "%s", rows[re].rest);
	/* the planned time, then the backoff: tries at 0.4 s, 0.5 s and 0.7 s at the earliest. The
	 * bounds are on the rows' times from the start, not on the gaps between rows: a row's time is
	 * taken after its try, and on a loaded host a late row makes the next gap look short (the
	 * backoff counts from the try: a gap under 0.095 s was seen at load). */
	cr_expect_geq(rows[f1].t, 0.4);
	cr_expect_geq(rows[f2].t, 0.4 + 0.1);
	cr_expect_geq(rows[re].t, 0.4 + 0.1 + 0.2);
	cr_expect_eq(plan.b_calls, 4, "the first start, two failed restarts, the one that worked");
	cr_expect(rejoined("b"), "the restarted b was started as a rejoin");
	cr_expect(!rejoined("a"));
	support_rm_rf(dir);
}

/* A restart that never works is tried until the run's stop, the backoff doubling (0.1, 0.2,
 * 0.4, ...), and no restart row is written. */
Test(supervise, failing_restart_is_retried_until_the_stop, .timeout = 60)
{
	struct row rows[64];

	plan.b_fail = -1;
	plan.a_quits = false;
	plan.b_calls = 0;
	cr_assert_eq(run(1500000000LL, false), SUPERVISE_OK);
	int n = read_events(rows, 64);
	int fails = 0;
	double want = 0.1;
	for (int i = find(rows, n, 0, "start_failed,b,"); i >= 0; i = find(rows, n, i + 1, "start_failed,b,")) {
		char d[64];
		snprintf(d, sizeof d, "retry in %.3f s", want);
		cr_expect(strstr(rows[i].rest, d), "failure %d: %s (want %s)", fails, rows[i].rest, d);
		want = want * 2 > 2.0 ? 2.0 : want * 2;
		fails++;
	}
	/* 0.4 s planned, stop at 1.5 s: tries at 0.4, 0.5, 0.7, 1.1 at the earliest */
	cr_expect(fails >= 2 && fails <= 4, "%d failed starts", fails);
	cr_expect_eq(find(rows, n, 0, "restart,b,"), -1, "no restart row for a restart that did not happen");
	int stop = find(rows, n, 0, "stop,all,stop.time reached");
	cr_expect_geq(stop, 0, "the run stopped at its stop time");
	support_rm_rf(dir);
}

/* When no other node is left running, nothing would end the run: the failed restart gives up
 * at once and fails the run (on_node_failure: stop). */
Test(supervise, failed_restart_with_nothing_left_fails_the_run, .timeout = 60)
{
	struct row rows[64];

	plan.b_fail = -1;
	plan.a_quits = true;
	plan.b_calls = 0;
	cr_assert_eq(run(0, false), SUPERVISE_FAILED);
	int n = read_events(rows, 64);
	int f = find(rows, n, 0, "start_failed,b,");
	cr_assert_geq(f, 0);
	cr_expect(strstr(rows[f].rest, "no node left running, given up"), "%s", rows[f].rest);
	cr_expect_eq(find(rows, n, f + 1, "start_failed,b,"), -1, "given up after one try");
	cr_expect_geq(find(rows, n, f, "stop,all,a node could not be started"), 0);
	support_rm_rf(dir);
}

/* An interruption before the start (a Ctrl-C while the nodes come up): each node is told to
 * stop before it was started and exits 10, as a stopped prober of the link self-check does.
 * That is the interruption, not a failure: events.csv has the one stop row, even for a phase
 * that logs only failures (failures_only, the self-check), and no node_failed row. */
static void interrupted_before_start(bool failures_only)
{
	volatile sig_atomic_t interrupted = 1;
	struct ctl_server *srv;
	struct row rows[64];
	int64_t origin = 0;

	plan.b_fail = 0;
	plan.a_quits = false;
	plan.b_calls = 0;
	support_tmpdir(dir, sizeof dir, "supervise");
	cr_assert_eq(ctl_endpoint_for(dir, "t", ep, sizeof ep), 0);
	srv = ctl_server_open(ep);
	cr_assert_not_null(srv);
	struct supervise_opts o = {
		.node_bin = "/nonexistent/stalenet-node", .ctl = srv, .run_dir = dir, .failures_only = failures_only,
		.ready_timeout_ms = 20000, .spawn = spawn, .interrupted = &interrupted,
	};
	cr_assert_eq(supervise_run(&o, two_workers, 2, &origin), SUPERVISE_INTERRUPTED);
	ctl_server_close(&srv);
	int n = read_events(rows, 64);
	cr_expect_eq(n, 1, "one row, the interruption (failures_only %d)", failures_only);
	cr_expect_eq(find(rows, n, 0, "stop,all,interrupted"), 0);
	cr_expect_eq(find(rows, n, 0, "node_failed,"), -1, "a node stopped before its start is no failure");
	cr_expect_eq(find(rows, n, 0, "start,all,"), -1, "never started");
	support_rm_rf(dir);
}

Test(supervise, interruption_before_the_start_is_no_node_failure, .timeout = 60)
{
	interrupted_before_start(false);
}

Test(supervise, interruption_of_a_failures_only_phase_is_logged, .timeout = 60)
{
	interrupted_before_start(true);
}

/* The interruptions as a user makes them, from the tick hook: the first once the run is 0.3 s
 * old, the second 0.2 s later. */
static volatile sig_atomic_t twice;
/* supervise_opts.ended of the interruption tests */
static volatile sig_atomic_t ended;
static int64_t t_second_ms;

static int64_t interrupt_twice(void *arg, int64_t now_rel)
{
	(void)arg;
	if (now_rel >= 300000000 && twice == 0)
		twice = 1;
	if (now_rel >= 500000000 && twice == 1) {
		twice = SUPERVISE_STOP_NOW;
		t_second_ms = support_now_ms();
	}
	return now_rel + 10000000;
}

/* A node that ignores the stop would hold a single interruption for the stop's graces (15 s
 * to SIGTERM, 5 s more to SIGKILL); the second interruption kills it at once: the run ends
 * interrupted well within SUPERVISE_KILL_WAIT_MS, both processes reaped, one stop row and no
 * node failure. */
Test(supervise, second_interruption_kills_a_hung_node_at_once, .timeout = 60)
{
	struct ctl_server *srv;
	struct row rows[64];
	int64_t origin = 0, took_ms;

	memset(&plan, 0, sizeof plan);
	plan.a_hangs = true;
	twice = 0;
	support_tmpdir(dir, sizeof dir, "supervise");
	cr_assert_eq(ctl_endpoint_for(dir, "t", ep, sizeof ep), 0);
	srv = ctl_server_open(ep);
	cr_assert_not_null(srv);
	struct supervise_opts o = {
		.node_bin = "/nonexistent/stalenet-node", .ctl = srv, .run_dir = dir, .ready_timeout_ms = 20000,
		.spawn = spawn, .interrupted = &twice, .ended = &ended, .hooks = { .tick = interrupt_twice },
	};
	ended = 0;
	cr_assert_eq(supervise_run(&o, two_workers, 2, &origin), SUPERVISE_INTERRUPTED);
	cr_expect_eq(ended, 0, "an interrupted run flagged as ended of itself");
	took_ms = support_now_ms() - t_second_ms;
	ctl_server_close(&srv);
	cr_assert_eq(twice, SUPERVISE_STOP_NOW, "the second interruption was never made");
	fprintf(stderr, "second interruption -> supervise_run returned: %lld ms\n", (long long)took_ms);
	cr_expect_lt(took_ms, SUPERVISE_KILL_WAIT_MS, "returned %lld ms after the second interruption",
		     (long long)took_ms);
	cr_assert_eq(plan.n_pids, 2);
	for (int i = 0; i < plan.n_pids; i++)
		cr_expect(kill(plan.pids[i], 0) < 0 && errno == ESRCH, "process %d not reaped", (int)plan.pids[i]);
	int n = read_events(rows, 64);
	cr_expect_geq(find(rows, n, 0, "stop,all,interrupted"), 0);
	cr_expect_eq(find(rows, n, 0, "node_failed,"), -1, "a node killed by the user's stop is no failure");
	support_rm_rf(dir);
}

/* An interruption from the tick hook once the run has reached its stop time (0.3 s), while "a"
 * still winds down (it ends 2 s after its stop): whether "a" still ran then. */
static volatile sig_atomic_t late;
static bool a_ran_then;
static int ended_then = -1, ended_before_stop = -1;

static int64_t interrupt_after_the_stop(void *arg, int64_t now_rel)
{
	(void)arg;
	if (now_rel < 250000000)
		ended_before_stop = ended;
	if (now_rel >= 400000000 && late == 0) {
		/* what a signal handler would read of the run's end as the interruption comes */
		ended_then = ended;
		late = 1;
		a_ran_then = plan.n_pids > 0 && kill(plan.pids[0], 0) == 0;
	}
	return now_rel + 10000000;
}

/* The run ended of itself (stop.time reached) and is winding down when the interruption comes:
 * its work is done, so it stays SUPERVISE_OK (not interrupted), with the one stop row of its
 * stop time and no node failure. */
Test(supervise, interruption_after_the_stop_time_leaves_the_run_ok, .timeout = 60)
{
	struct ctl_server *srv;
	struct row rows[64];
	int64_t origin = 0;

	memset(&plan, 0, sizeof plan);
	plan.a_lingers_ms = 2000;
	late = ended = 0;
	ended_then = ended_before_stop = -1;
	a_ran_then = false;
	support_tmpdir(dir, sizeof dir, "supervise");
	cr_assert_eq(ctl_endpoint_for(dir, "t", ep, sizeof ep), 0);
	srv = ctl_server_open(ep);
	cr_assert_not_null(srv);
	struct supervise_opts o = {
		.node_bin = "/nonexistent/stalenet-node", .ctl = srv, .run_dir = dir, .ready_timeout_ms = 20000,
		.stop_after_ns = 300000000, .spawn = spawn, .interrupted = &late, .ended = &ended,
		.hooks = { .tick = interrupt_after_the_stop },
	};
	enum supervise_result res = supervise_run(&o, two_workers, 2, &origin);
	ctl_server_close(&srv);
	cr_assert_eq(late, 1, "the interruption was never made");
	cr_assert(a_ran_then, "the interruption came after the wind-down: no test");
	cr_expect_eq(res, SUPERVISE_OK, "result %d: an interruption after the run's end changed it", (int)res);
	/* the run's end was flagged before the interruption came (the handler's line chosen by
	 * it), not before the stop time */
	cr_expect_eq(ended_before_stop, 0, "the run's end flagged before the stop time");
	cr_expect_eq(ended_then, 1, "the run's end not flagged when the interruption came");
	cr_expect_eq(ended, 1);
	int n = read_events(rows, 64);
	cr_expect_geq(find(rows, n, 0, "stop,all,stop.time reached"), 0);
	cr_expect_eq(find(rows, n, 0, "stop,all,interrupted"), -1);
	cr_expect_eq(find(rows, n, 0, "node_failed,"), -1);
	support_rm_rf(dir);
}

/* supervise_opts.stop_grace_ns (the scenario's stop.grace) replaces the default 15 s before
 * SIGTERM: "a" ignores the stop at the stop time (0.3 s) and goes with the SIGTERM that comes
 * a grace (1 s) later, so the run ends after stop time + grace and before the SIGKILL's
 * further SUPERVISE_TERM_GRACE_MS, far from the default's 15 s. */
Test(supervise, stop_grace_sets_the_time_to_sigterm, .timeout = 60)
{
	const int64_t stop_ms = 300, grace_ms = 1000;
	struct ctl_server *srv;
	int64_t origin = 0;

	memset(&plan, 0, sizeof plan);
	plan.a_hangs = true;
	support_tmpdir(dir, sizeof dir, "supervise");
	cr_assert_eq(ctl_endpoint_for(dir, "t", ep, sizeof ep), 0);
	srv = ctl_server_open(ep);
	cr_assert_not_null(srv);
	struct supervise_opts o = {
		.node_bin = "/nonexistent/stalenet-node", .ctl = srv, .run_dir = dir, .ready_timeout_ms = 20000,
		.stop_after_ns = stop_ms * 1000000, .stop_grace_ns = grace_ms * 1000000, .spawn = spawn,
	};
	supervise_run(&o, two_workers, 2, &origin);
	int64_t took_ms = support_now_ms() - origin / 1000000;
	ctl_server_close(&srv);
	fprintf(stderr, "origin -> supervise_run returned: %lld ms (stop %lld ms, grace %lld ms)\n",
		(long long)took_ms, (long long)stop_ms, (long long)grace_ms);
	cr_assert_gt(origin, 0, "the run never started");
	cr_expect_geq(took_ms, stop_ms + grace_ms, "SIGTERM before the grace was over");
	cr_expect_lt(took_ms, stop_ms + grace_ms + SUPERVISE_TERM_GRACE_MS, "SIGTERM not at the grace");
	cr_assert_eq(plan.n_pids, 2);
	for (int i = 0; i < plan.n_pids; i++)
		cr_expect(kill(plan.pids[i], 0) < 0 && errno == ESRCH, "process %d not reaped", (int)plan.pids[i]);
	support_rm_rf(dir);
}
