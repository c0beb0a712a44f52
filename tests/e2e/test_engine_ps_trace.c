/* What the parameter-server engine's traces say, checked against each other on 127.0.0.1
 * (a forked server and four workers, softmax regression on a small Fashion-MNIST slice):
 *   wait_s     a fast worker held by a BSP straggler waits from asking to proceed until the
 *              straggler's update closed the round: at least the gap between its own row and
 *              the straggler's row of the previous step; compute_s + wait_s never exceed the
 *              time between two rows
 *   server     nodes/server0.csv has one row per update received; its staleness, worker and
 *              step agree with the workers' own rows; BSP holds workers (waiting > 0), ASP never
 *   departure  a BSP worker SIGKILLed mid-run is noticed at once: rounds close on the other
 *              three, they finish their steps and the server stops long before stop.time
 *   progress   through the real orchestrator supervisor and the control plane: progress.csv
 *              counts waiting workers under BSP with a straggler, never under ASP, and the mean
 *              count matches sum(wait_s) / duration of the worker traces */
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectors/schema.h"
#include "lib/clock.h"
#include "lib/ctl.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "node/engine_ps.h"
#include "tests/support/files.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"
#include "tests/support/ports.h"
#include "orchestrator/supervise.h"

#define NW 4
#define MAXROWS 20000

struct row {
	double t, compute, wait;
	long step, version;
	long stale; /* -1 = empty */
};

struct srow {
	double t;
	int worker;
	long wstep, stale, version, updates, dropped, live, waiting;
};

static struct row wr[NW][MAXROWS];
static int nwr[NW];
static struct srow sr[MAXROWS * NW];
static int nsr;

static void base_cfg(struct kv *k, const char *dir, int port, const char *barrier)
{
	kv_set(k, "run.dir", dir);
	kv_setf(k, "run.origin_ns", "%lld", (long long)clock_now_ns());
	kv_set(k, "run.seed", "11");
	kv_setf(k, "workers.count", "%d", NW);
	kv_set(k, "workers.addrs", "127.0.0.1,127.0.0.1,127.0.0.1,127.0.0.1");
	kv_set(k, "workers.names", "worker0,worker1,worker2,worker3");
	kv_set(k, "servers.addrs", "127.0.0.1");
	kv_setf(k, "port.data", "%d", port);
	kv_set(k, "model.kind", "softmax");
	kv_set(k, "train.batch", "32");
	kv_set(k, "train.lr", "0.05");
	kv_set(k, "data.train_limit", "4000");
	kv_set(k, "data.test_limit", "500");
	kv_set(k, "data.partition.scheme", "iid");
	kv_set(k, "stop.steps", "60");
	kv_set(k, "stop.time", "40");
	kv_set(k, "eval.every", "1");
	kv_set(k, "consistency.barrier", barrier);
}

static void node_cfg(struct kv *k, int i)
{
	if (i < 0) {
		kv_set(k, "node.name", "server0");
		kv_set(k, "node.role", "server");
		kv_set(k, "node.index", "0");
	} else {
		kv_setf(k, "node.name", "worker%d", i);
		kv_set(k, "node.role", "worker");
		kv_setf(k, "node.index", "%d", i);
	}
}

static void slow3(struct kv *k, int i)
{
	if (i == 3) {
		kv_set(k, "straggler.delay.dist", "constant");
		kv_set(k, "straggler.delay.a", "0.02");
	}
}

static int test_port(int salt)
{
	static int port;

	(void)salt; /* each test runs in its own process */
	if (!port)
		port = support_free_ports(NW + 2);
	return port;
}

/* Fork the server (pids[0]) and the workers (pids[1 + i]); do not wait. */
static void start(const char *dir, const char *barrier, int port, void (*extra)(struct kv *, int),
		  pid_t pids[NW + 1])
{
	for (int i = -1; i < NW; i++) {
		struct kv *k = kv_new();
		pid_t pid;

		base_cfg(k, dir, port, barrier);
		node_cfg(k, i);
		if (extra)
			extra(k, i);
		pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			log_init(i < 0 ? "server0" : "worker", LOG_WARN);
			_exit((i < 0 ? engine_ps_server_run(k) : engine_ps_worker_run(k)) == 0 ? 0 : 1);
		}
		pids[i + 1] = pid;
		kv_destroy(&k);
	}
}

static void wait_ok(pid_t pid, const char *what)
{
	int st = 0;

	cr_assert_eq(support_wait_pid(pid, &st, 90000), 0, "%s did not end in 90 s", what);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s failed (status %d)", what, st);
}

static void load_workers(const char *dir)
{
	for (int i = 0; i < NW; i++) {
		char path[512], line[512];
		FILE *f;

		snprintf(path, sizeof path, "%s/nodes/worker%d.csv", dir, i);
		f = fopen(path, "r");
		cr_assert_not_null(f, "%s", path);
		cr_assert_not_null(fgets(line, sizeof line, f));
		nwr[i] = 0;
		while (fgets(line, sizeof line, f) && nwr[i] < MAXROWS) {
			struct row *r = &wr[i][nwr[i]++];
			char name[32], stale[32] = "";
			double loss;
			char *p = line;

			cr_assert_eq(sscanf(line, "%lf,%31[^,],%ld,%lf,%lf,", &r->t, name, &r->step,
					    &r->compute, &r->wait), 5, "%s", line);
			for (int c = 0; c < 5; c++)
				p = strchr(p, ',') + 1;
			if (*p != ',')
				sscanf(p, "%31[^,]", stale);
			r->stale = *stale ? atol(stale) : -1;
			p = strchr(p, ',') + 1;
			cr_assert_eq(sscanf(p, "%ld,%lf", &r->version, &loss), 2, "%s", line);
			cr_assert_eq(r->step, nwr[i], "steps are consecutive from 1");
		}
		fclose(f);
	}
}

static void load_server(const char *dir)
{
	char path[512], line[512];
	FILE *f;

	snprintf(path, sizeof path, "%s/nodes/server0.csv", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: no server trace", path);
	cr_assert_not_null(fgets(line, sizeof line, f));
	line[strcspn(line, "\n")] = '\0';
	cr_assert_str_eq(line, TRACE_HEADER_SERVER);
	nsr = 0;
	while (fgets(line, sizeof line, f) && nsr < MAXROWS * NW) {
		struct srow *r = &sr[nsr++];
		char node[32], stale[32] = "";
		char *p = line;

		/* t_s,node,worker,worker_step,staleness,model_version,updates,dropped,live,waiting */
		cr_assert_eq(sscanf(line, "%lf,%31[^,],worker%d,%ld,", &r->t, node, &r->worker, &r->wstep),
			     4, "%s", line);
		cr_assert_str_eq(node, "server0");
		for (int c = 0; c < 4; c++)
			p = strchr(p, ',') + 1;
		if (*p != ',')
			sscanf(p, "%31[^,]", stale);
		r->stale = *stale ? atol(stale) : -1;
		p = strchr(p, ',') + 1;
		cr_assert_eq(sscanf(p, "%ld,%ld,%ld,%ld,%ld", &r->version, &r->updates, &r->dropped,
				    &r->live, &r->waiting), 5, "%s", line);
	}
	fclose(f);
}

static char *mkrun(void)
{
	static char dir[64];

	return support_tmpdir(dir, sizeof dir, "pstrace");
}

static void cleanup(const char *dir)
{
	cr_assert_eq(support_rm_rf(dir), 0);
}

static void schema_ok(const char *dir)
{
	char err[512] = "";

	cr_assert_eq(trace_schema_check_dir(dir, err, sizeof err), 0, "%s", err);
}

/* Every server row matches the worker's own row for that step (the naive reference: the ACK
 * the worker got carried the same staleness), and the counters add up. */
static void server_matches_workers(void)
{
	long accepted = 0, dropped = 0, prev_version = 0;
	int seen[NW] = { 0 };

	for (int k = 0; k < nsr; k++) {
		const struct srow *r = &sr[k];

		cr_assert(r->worker >= 0 && r->worker < NW, "worker %d", r->worker);
		cr_assert(r->wstep >= 1 && r->wstep <= nwr[r->worker], "worker %d step %ld of %d",
			  r->worker, r->wstep, nwr[r->worker]);
		cr_assert_eq(r->stale, wr[r->worker][r->wstep - 1].stale,
			     "server row %d: worker %d step %ld staleness %ld, the worker saw %ld", k,
			     r->worker, r->wstep, r->stale, wr[r->worker][r->wstep - 1].stale);
		accepted += r->stale >= 0;
		dropped += r->stale < 0;
		cr_assert_eq(r->updates, accepted, "row %d", k);
		cr_assert_eq(r->dropped, dropped, "row %d", k);
		cr_assert_geq(r->version, prev_version);
		prev_version = r->version;
		cr_assert(r->waiting >= 0 && r->waiting <= r->live && r->live <= NW);
		seen[r->worker]++;
	}
	for (int i = 0; i < NW; i++)
		cr_assert_eq(seen[i], nwr[i], "worker %d: %d server rows for %d steps", i, seen[i], nwr[i]);
}

Test(engine_ps_trace, bsp_wait_and_server_trace, .timeout = 120)
{
	char *dir = mkrun();
	pid_t pids[NW + 1];
	double gap = 0, waited = 0;
	long held_rows = 0;

	start(dir, "bsp", test_port(1), slow3, pids);
	for (int i = 0; i <= NW; i++)
		wait_ok(pids[i], "node");
	load_workers(dir);
	load_server(dir);
	schema_ok(dir);
	for (int i = 0; i < NW; i++)
		cr_assert_eq(nwr[i], 60);
	for (int i = 0; i < 3; i++)
		for (int k = 1; k < 60; k++) {
			const struct row *r = &wr[i][k], *p = &wr[i][k - 1];

			/* The step's compute and barrier wait both lie between the two rows. */
			cr_assert_leq(r->compute + r->wait, r->t - p->t + 2e-6,
				      "worker %d step %ld: compute %.6f + wait %.6f > %.6f", i, r->step,
				      r->compute, r->wait, r->t - p->t);
			waited += r->wait;
		}
	/* How far the straggler was behind, on the server's clock alone (arrival of each round's
	 * updates, so a busy host delaying the workers' own rows does not blur it): a fast
	 * worker's request for round k + 1 rides on its round-k push and is released only once
	 * the straggler's round-k update closed the round. Rounds 1..59 (the last has no next). */
	for (int k = 1; k < 60; k++) {
		double ts = -1, tf[3] = { -1, -1, -1 };

		for (int j = 0; j < nsr; j++)
			if (sr[j].wstep == k) {
				if (sr[j].worker == 3)
					ts = sr[j].t;
				else
					tf[sr[j].worker] = sr[j].t;
			}
		cr_assert(ts >= 0, "no server row for the straggler's round %d", k);
		for (int i = 0; i < 3; i++) {
			cr_assert(tf[i] >= 0, "no server row for worker %d round %d", i, k);
			gap += ts > tf[i] ? ts - tf[i] : 0;
		}
	}
	cr_assert_gt(gap, 3 * 59 * 0.005, "the straggler was not behind (gap %.3f s)", gap);
	cr_log_info("fast workers: waited %.3f s, straggler gap %.3f s", waited, gap);
	cr_assert_geq(waited, 0.8 * gap, "fast workers waited %.3f s, the straggler kept them %.3f s",
		      waited, gap);
	/* BSP: 4 x 60 updates, one model version per round, none stale. */
	cr_assert_eq(nsr, 4 * 60);
	server_matches_workers();
	for (int k = 0; k < nsr; k++) {
		cr_assert_eq(sr[k].stale, 0);
		if (sr[k].wstep < 60) /* in the last round workers say BYE one by one */
			cr_assert_eq(sr[k].live, NW);
		held_rows += sr[k].waiting > 0;
	}
	cr_assert_eq(sr[nsr - 1].version, 60);
	/* The straggler's update arrives while the three fast workers are held: nearly every
	 * round has such a row. */
	cr_assert_gt(held_rows, 45, "the server held fast workers in only %ld of %d rows", held_rows,
		     nsr);
	cleanup(dir);
}

Test(engine_ps_trace, asp_server_trace, .timeout = 120)
{
	char *dir = mkrun();
	pid_t pids[NW + 1];
	long stale_pos = 0;

	start(dir, "asp", test_port(2), slow3, pids);
	for (int i = 0; i <= NW; i++)
		wait_ok(pids[i], "node");
	load_workers(dir);
	load_server(dir);
	schema_ok(dir);
	cr_assert_eq(nsr, 4 * 60);
	server_matches_workers();
	for (int k = 0; k < nsr; k++) {
		const struct row *w = &wr[sr[k].worker][sr[k].wstep - 1];

		/* Every update is applied on arrival: one version each, nobody ever held. */
		cr_assert_eq(sr[k].version, sr[k].updates);
		cr_assert_eq(sr[k].waiting, 0);
		/* Its staleness is the number of versions applied between the model it was computed
		 * on (the worker's model_version) and its own (the server's version before it). */
		cr_assert_eq(sr[k].stale, sr[k].version - 1 - w->version,
			     "server row %d: staleness %ld, versions in between %ld", k, sr[k].stale,
			     sr[k].version - 1 - w->version);
		stale_pos += sr[k].stale > 0;
	}
	for (int i = 0; i < NW; i++)
		for (int k = 0; k < nwr[i]; k++)
			cr_assert_eq(wr[i][k].wait, 0.0);
	cr_assert_gt(stale_pos, 0);
	cleanup(dir);
}

static void long_run_slow3(struct kv *k, int i)
{
	kv_set(k, "stop.steps", "200");
	kv_set(k, "stop.time", "40");
	if (i == 3) {
		kv_set(k, "straggler.delay.dist", "constant");
		kv_set(k, "straggler.delay.a", "0.01");
	}
}

static int count_lines(const char *path)
{
	char line[512];
	int n = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		n++;
	fclose(f);
	return n;
}

static bool twenty_steps(void *path)
{
	return count_lines(path) >= 21;
}

Test(engine_ps_trace, bsp_killed_worker_departs, .timeout = 120)
{
	char *dir = mkrun(), path[512];
	pid_t pids[NW + 1];
	int64_t t_kill, t_end;
	long kill_step, last_live4 = -1, first_live3 = -1;
	int st = 0;

	start(dir, "bsp", test_port(3), long_run_slow3, pids);
	snprintf(path, sizeof path, "%s/nodes/worker3.csv", dir);
	/* Kill worker 3 after its 20th step, mid-run (200 steps take a few seconds). */
	support_wait_until(twenty_steps, path, 30000);
	cr_assert_geq(count_lines(path), 21, "worker 3 never got going");
	t_kill = clock_now_ns();
	cr_assert_eq(kill(pids[4], SIGKILL), 0);
	cr_assert_eq(support_wait_pid(pids[4], &st, 10000), 0);
	cr_assert(WIFSIGNALED(st));
	for (int i = 0; i < 3; i++)
		wait_ok(pids[1 + i], "fast worker");
	wait_ok(pids[0], "server");
	t_end = clock_now_ns();
	/* Without noticing the departure the round after the kill never closes: everyone would
	 * sit at the barrier until stop.time (40 s). */
	cr_assert_lt((double)(t_end - t_kill) / 1e9, 15.0, "the run went on %.1f s after the kill",
		     (double)(t_end - t_kill) / 1e9);
	load_workers(dir);
	load_server(dir);
	schema_ok(dir);
	kill_step = nwr[3];
	for (int i = 0; i < 3; i++)
		cr_assert_eq(nwr[i], 200, "worker %d ran %d of 200 steps", i, nwr[i]);
	cr_assert_lt(kill_step, 150);
	for (int k = 0; k < nsr; k++) {
		if (sr[k].live == NW)
			last_live4 = k;
		else if (first_live3 < 0)
			first_live3 = k;
		/* Until the last round (after which the three say BYE one by one) only worker 3
		 * ever leaves. */
		if (sr[k].wstep < 200)
			cr_assert(sr[k].live == NW || sr[k].live == NW - 1, "row %d: live %ld", k,
				  sr[k].live);
	}
	cr_assert_geq(first_live3, 0, "the server never saw worker 3 go");
	cr_assert_lt(last_live4, first_live3, "worker 3 came back to life");
	/* Rounds went on closing on the three: one version per round, every step of theirs. */
	cr_assert_eq(sr[nsr - 1].version, 200);
	for (int k = first_live3; k < nsr; k++)
		cr_assert_neq(sr[k].worker, 3);
	cleanup(dir);
}

/* --- through the orchestrator's supervisor: progress.csv ---------------------------------- */

static void node_bin(char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	char *slash;

	cr_assert_gt(n, 0);
	exe[n] = '\0';
	/* BUILD/tests/e2e/test_x -> BUILD/stalenet-node */
	for (int up = 0; up < 3; up++) {
		slash = strrchr(exe, '/');
		cr_assert_not_null(slash);
		*slash = '\0';
	}
	cr_assert_lt(strlen(exe) + sizeof "/stalenet-node", len);
	memcpy(out, exe, strlen(exe));
	memcpy(out + strlen(exe), "/stalenet-node", sizeof "/stalenet-node");
	cr_assert_eq(access(out, X_OK), 0, "%s not built (make all)", out);
}

struct prow {
	double t;
	long alive, waiting;
};

static struct prow pr[4000];
static int npr;

static void supervised_run(const char *dir, const char *barrier, int salt)
{
	struct supervise_node nodes[NW + 1];
	char conf[NW + 1][512], logp[NW + 1][512], names[NW + 1][32], bin[PATH_MAX], ep[256];
	struct ctl_server *ctl;
	struct supervise_opts o = { 0 };
	int64_t origin = 0;
	int port = test_port(salt);

	node_bin(bin, sizeof bin);
	cr_assert_eq(ctl_endpoint_for(dir, "pstrace", ep, sizeof ep), 0);
	ctl = ctl_server_open(ep);
	cr_assert_not_null(ctl);
	snprintf(conf[0], sizeof conf[0], "%s/nodes", dir);
	cr_assert_eq(mkdir(conf[0], 0755), 0);
	for (int i = -1; i < NW; i++) {
		struct kv *k = kv_new();
		int j = i + 1;

		base_cfg(k, dir, port, barrier);
		node_cfg(k, i);
		slow3(k, i);
		kv_set(k, "stop.steps", "150"); /* a few seconds: a few dozen progress samples */
		kv_set(k, "ctl.endpoint", ep);
		snprintf(names[j], sizeof names[j], "%s", kv_get(k, "node.name"));
		snprintf(conf[j], sizeof conf[j], "%s/nodes/%s.conf", dir, names[j]);
		snprintf(logp[j], sizeof logp[j], "%s/%s.log", dir, names[j]);
		cr_assert_eq(kv_save(k, conf[j]), 0);
		kv_destroy(&k);
		nodes[j] = (struct supervise_node){ .name = names[j], .conf_path = conf[j],
						    .log_path = logp[j], .is_worker = i >= 0,
						    .join_at_ns = -1, .crash_at_ns = -1,
						    .restart_at_ns = -1, .leave_at_ns = -1 };
	}
	o.node_bin = bin;
	o.ctl = ctl;
	o.run_dir = dir;
	o.stop_after_ns = 40000000000ll;
	o.write_progress = true;
	o.ready_timeout_ms = 30000;
	cr_assert_eq(supervise_run(&o, nodes, NW + 1, &origin), SUPERVISE_OK);
	ctl_server_close(&ctl);
}

static void load_progress(const char *dir)
{
	char path[512], line[256];
	FILE *f;

	snprintf(path, sizeof path, "%s/progress.csv", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	cr_assert_not_null(fgets(line, sizeof line, f));
	npr = 0;
	while (fgets(line, sizeof line, f) && npr < 4000) {
		struct prow *r = &pr[npr];

		cr_assert_eq(sscanf(line, "%lf,%ld,%ld,", &r->t, &r->alive, &r->waiting), 3, "%s", line);
		npr++;
	}
	fclose(f);
}

/* Mean number of workers waiting over the samples taken while all four were training, and the
 * same number from the traces: sum of wait_s over the window / window length. */
static void waiting_both_ways(double *progress_mean, double *trace_mean)
{
	double t0 = INFINITY, t1 = 0, sum_wait = 0;
	long n = 0, sum = 0;

	for (int i = 0; i < NW; i++) {
		cr_assert_gt(nwr[i], 0);
		if (wr[i][0].t < t0)
			t0 = wr[i][0].t;
	}
	t1 = wr[0][nwr[0] - 1].t;
	for (int i = 1; i < NW; i++)
		if (wr[i][nwr[i] - 1].t < t1)
			t1 = wr[i][nwr[i] - 1].t;
	for (int i = 0; i < NW; i++)
		for (int k = 1; k < nwr[i]; k++)
			if (wr[i][k].t <= t1)
				sum_wait += wr[i][k].wait;
	for (int k = 0; k < npr; k++)
		if (pr[k].t >= t0 && pr[k].t <= t1) {
			sum += pr[k].waiting;
			n++;
		}
	cr_assert_gt(n, 5, "only %ld progress samples in [%.2f, %.2f]", n, t0, t1);
	*progress_mean = (double)sum / (double)n;
	*trace_mean = sum_wait / (t1 - t0);
}

Test(engine_ps_trace, progress_waiting_bsp_matches_wait_s, .timeout = 180)
{
	char *dir = mkrun();
	double pm, tm;
	long maxw = 0;

	supervised_run(dir, "bsp", 4);
	load_progress(dir);
	load_workers(dir);
	for (int k = 0; k < npr; k++)
		if (pr[k].waiting > maxw)
			maxw = pr[k].waiting;
	cr_assert_gt(maxw, 0, "BSP with a straggler: progress.csv never counted a waiting worker");
	cr_assert_leq(maxw, NW);
	waiting_both_ways(&pm, &tm);
	/* About three fast workers held while the straggler computes; sampling every 100 ms. */
	cr_assert_gt(tm, 1.5, "traces: %.2f workers waiting on average", tm);
	cr_log_info("BSP: progress.csv %.2f, traces %.2f workers waiting on average", pm, tm);
	cr_assert_lt(fabs(pm - tm), 0.75, "progress.csv %.2f vs traces %.2f workers waiting", pm, tm);
	cleanup(dir);
}

Test(engine_ps_trace, progress_waiting_asp_zero, .timeout = 180)
{
	char *dir = mkrun();

	supervised_run(dir, "asp", 5);
	load_progress(dir);
	load_workers(dir);
	cr_assert_gt(npr, 3);
	for (int k = 0; k < npr; k++)
		cr_assert_eq(pr[k].waiting, 0, "t %.3f: %ld workers waiting under ASP", pr[k].t,
			     pr[k].waiting);
	for (int i = 0; i < NW; i++)
		for (int k = 0; k < nwr[i]; k++)
			cr_assert_eq(wr[i][k].wait, 0.0);
	cleanup(dir);
}
