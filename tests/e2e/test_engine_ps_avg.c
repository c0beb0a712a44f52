/* The parameter-server engine's model averaging and worker restarts, end to end on 127.0.0.1:
 * a forked server and four workers train softmax regression on a small slice of Fashion-MNIST.
 * Checks read the traces the run wrote (nodes/<worker>.csv, eval.csv, nodes/<node>.params):
 *   averaging, BSP  step k of every worker started from the model of round (k-1)/H; only the
 *                   last step of a round pushes (staleness 0, empty otherwise); the server ends
 *                   at version = rounds and its model is exactly the mean of the workers' last
 *                   models (equal sample counts); accuracy well above chance
 *   averaging, SSP  round r started only after every worker's round r-1-s was folded in
 *   restart         a worker killed with SIGKILL is declared dead, the others go on without
 *                   it; restarted, it re-joins at the pack's clock, and the run completes */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "node/engine_ps.h"
#include "tests/support/files.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"
#include "tests/support/ports.h"

#define NW 4
#define MAXROWS 4000
#define H 5

struct row {
	double t, wait;
	long step, version, stale; /* stale -1 = empty */
};

struct trace {
	struct row r[MAXROWS];
	int n;
};

static struct trace traces[NW];
static long long origin_ns;
static int port;

typedef void (*extra_fn)(struct kv *, int);

static struct kv *node_cfg(const char *dir, const char *barrier, int i, extra_fn extra)
{
	struct kv *k = kv_new();

	cr_assert_not_null(k);
	kv_set(k, "run.dir", dir);
	kv_setf(k, "run.origin_ns", "%lld", origin_ns);
	kv_set(k, "run.seed", "11");
	kv_setf(k, "workers.count", "%d", NW);
	kv_set(k, "workers.addrs", "127.0.0.1,127.0.0.1,127.0.0.1,127.0.0.1");
	kv_set(k, "workers.names", "worker0,worker1,worker2,worker3");
	kv_set(k, "servers.addrs", "127.0.0.1");
	kv_setf(k, "port.data", "%d", port);
	kv_set(k, "model.kind", "softmax");
	/* 6000 samples, 1500 per worker, batch 30: every minibatch is full, so every round of
	 * every worker has the same sample count and the server's mean is unweighted. */
	kv_set(k, "train.batch", "30");
	kv_set(k, "train.lr", "0.05");
	kv_set(k, "train.momentum", "0.5");
	kv_set(k, "data.train_limit", "6000");
	kv_set(k, "data.test_limit", "1000");
	kv_set(k, "data.partition.scheme", "iid");
	kv_set(k, "stop.steps", "60");
	kv_set(k, "stop.time", "25");
	kv_set(k, "eval.every", "1");
	kv_set(k, "consistency.barrier", barrier);
	kv_set(k, "consistency.combine", "average");
	kv_setf(k, "consistency.local_steps", "%d", H);
	kv_set(k, "train.save_model", "true");
	if (i < 0) {
		kv_set(k, "node.name", "server0");
		kv_set(k, "node.role", "server");
		kv_set(k, "node.index", "0");
	} else {
		kv_setf(k, "node.name", "worker%d", i);
		kv_set(k, "node.role", "worker");
		kv_setf(k, "node.index", "%d", i);
	}
	if (extra)
		extra(k, i);
	return k;
}

/* Fork node i (-1 = server) with its configuration. */
static pid_t start(const char *dir, const char *barrier, int i, extra_fn extra)
{
	struct kv *k = node_cfg(dir, barrier, i, extra);
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		log_init(i < 0 ? "server0" : "worker", LOG_WARN);
		_exit((i < 0 ? engine_ps_server_run(k) : engine_ps_worker_run(k)) == 0 ? 0 : 1);
	}
	kv_destroy(&k);
	return pid;
}

static void reap(pid_t pid, const char *what)
{
	int st = 0;

	cr_assert_eq(support_wait_pid(pid, &st, 90000), 0, "%s did not end in 90 s", what);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s failed (status %d)", what, st);
}

static void run(const char *dir, const char *barrier, extra_fn extra)
{
	pid_t pids[NW + 1];

	origin_ns = (long long)clock_now_ns();
	port = support_free_ports(NW + 2);
	cr_assert_gt(port, 0, "no free ports");
	for (int i = -1; i < NW; i++)
		pids[i + 1] = start(dir, barrier, i, extra);
	for (int i = 0; i <= NW; i++)
		reap(pids[i], i ? "worker" : "server");
}

/* Rows of nodes/worker<i>.csv; consecutive says whether steps must run 1, 2, 3... */
static void load_traces(const char *dir, bool consecutive)
{
	for (int i = 0; i < NW; i++) {
		char path[512], line[512];
		FILE *f;

		snprintf(path, sizeof path, "%s/nodes/worker%d.csv", dir, i);
		f = fopen(path, "r");
		cr_assert_not_null(f, "%s", path);
		cr_assert_not_null(fgets(line, sizeof line, f));
		traces[i].n = 0;
		while (fgets(line, sizeof line, f) && traces[i].n < MAXROWS) {
			struct row *r = &traces[i].r[traces[i].n++];
			char name[32], stale[32] = "", *p = line;
			double compute;

			/* t_s,node,step,compute_s,wait_s,staleness,model_version,loss,... */
			cr_assert_eq(sscanf(line, "%lf,%31[^,],%ld,%lf,%lf,", &r->t, name, &r->step,
					    &compute, &r->wait), 5, "%s", line);
			for (int c = 0; c < 5; c++)
				p = strchr(p, ',') + 1;
			if (*p != ',')
				sscanf(p, "%31[^,]", stale);
			r->stale = *stale ? atol(stale) : -1;
			p = strchr(p, ',') + 1;
			cr_assert_eq(sscanf(p, "%ld", &r->version), 1, "%s", line);
			if (consecutive)
				cr_assert_eq(r->step, traces[i].n, "steps are consecutive from 1");
		}
		fclose(f);
	}
}

/* Last eval.csv row: updates (model version) and test accuracy. */
static double final_eval(const char *dir, long *updates)
{
	char path[512], line[512], last[512] = "", *p;
	double t, acc = 0;
	FILE *f;

	snprintf(path, sizeof path, "%s/eval.csv", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof line, f))
		strcpy(last, line);
	fclose(f);
	/* t_s,node,updates,epoch,samples,test_accuracy,... */
	cr_assert_eq(sscanf(last, "%lf,%*[^,],%ld,", &t, updates), 2, "%s", last);
	p = last;
	for (int c = 0; c < 5; c++)
		p = strchr(p, ',') + 1;
	acc = atof(p);
	return acc;
}

static float *load_params(const char *dir, const char *node, size_t *n)
{
	char path[512];
	float *v;
	long len;
	FILE *f;

	snprintf(path, sizeof path, "%s/nodes/%s.params", dir, node);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	cr_assert_gt(len, 0);
	v = malloc((size_t)len);
	cr_assert_not_null(v);
	cr_assert_eq(fread(v, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	*n = (size_t)len / sizeof(float);
	return v;
}

static char *mkrun(void)
{
	static char dir[64];

	return support_tmpdir(dir, sizeof dir, "psavg");
}

static void cleanup(const char *dir)
{
	cr_assert_eq(support_rm_rf(dir), 0);
}

Test(engine_ps_avg, bsp_rounds, .timeout = 120)
{
	char *dir = mkrun();
	float *server, *w[NW];
	size_t n = 0, m;
	double maxdiff = 0, scale = 0;
	long updates = 0;
	double acc;

	run(dir, "bsp", NULL);
	load_traces(dir, true);
	for (int i = 0; i < NW; i++) {
		cr_assert_eq(traces[i].n, 60, "worker %d ran %d steps", i, traces[i].n);
		for (int k = 0; k < traces[i].n; k++) {
			const struct row *r = &traces[i].r[k];

			cr_assert_eq(r->version, (r->step - 1) / H, "worker %d step %ld on version %ld",
				     i, r->step, r->version);
			cr_assert_eq(r->stale, r->step % H == 0 ? 0 : -1, "worker %d step %ld staleness %ld",
				     i, r->step, r->stale);
		}
	}
	acc = final_eval(dir, &updates);
	cr_assert_eq(updates, 60 / H, "server at version %ld", updates);
	cr_assert_gt(acc, 0.5, "accuracy %.3f", acc);
	/* The server's final model is the mean of the models of the last round, which are the
	 * workers' final replicas. */
	server = load_params(dir, "server0", &n);
	for (int i = 0; i < NW; i++) {
		char name[24];   /* "worker" + any int */

		snprintf(name, sizeof name, "worker%d", i);
		w[i] = load_params(dir, name, &m);
		cr_assert_eq(m, n);
	}
	for (size_t k = 0; k < n; k++) {
		double mean = 0;

		for (int i = 0; i < NW; i++)
			mean += w[i][k] / (double)NW;
		if (fabs(mean - server[k]) > maxdiff)
			maxdiff = fabs(mean - server[k]);
		if (fabs(mean) > scale)
			scale = fabs(mean);
	}
	cr_assert_gt(scale, 1e-3, "parameters never moved");
	cr_assert_lt(maxdiff, 1e-5 * (1 + scale), "server differs from the mean by %g", maxdiff);
	/* ...and the replicas themselves differ (they did train apart). */
	maxdiff = 0;
	for (size_t k = 0; k < n; k++)
		if (fabs(w[0][k] - w[1][k]) > maxdiff)
			maxdiff = fabs(w[0][k] - w[1][k]);
	cr_assert_gt(maxdiff, 1e-6);
	free(server);
	for (int i = 0; i < NW; i++)
		free(w[i]);
	cleanup(dir);
}

static void ssp_slow3(struct kv *k, int i)
{
	kv_set(k, "consistency.staleness", "1");
	if (i == 3) {
		kv_set(k, "straggler.delay.dist", "constant");
		kv_set(k, "straggler.delay.a", "0.01");
	}
}

Test(engine_ps_avg, ssp_rounds, .timeout = 120)
{
	char *dir = mkrun();
	const long s = 1;
	long updates = 0, stale_max = 0;
	double acc;

	run(dir, "ssp", ssp_slow3);
	load_traces(dir, true);
	for (int i = 0; i < NW; i++) {
		cr_assert_eq(traces[i].n, 60);
		for (int k = 0; k < traces[i].n; k++) {
			const struct row *r = &traces[i].r[k];
			long round = (r->step - 1) / H + 1, mr = round - 1 - s;

			cr_assert_eq(r->stale >= 0, r->step % H == 0, "only round ends push");
			if (r->stale > stale_max)
				stale_max = r->stale;
			/* All steps of a round read the model pulled at its start. */
			if (r->step % H != 1)
				cr_assert_eq(r->version, traces[i].r[k - 1].version);
			/* Round r started after every worker's round r-1-s was folded in (its push
			 * was computed on q->version and applied on top of q->version + q->stale). */
			for (int j = 0; j < NW && mr >= 1; j++) {
				const struct row *q = &traces[j].r[mr * H - 1];

				cr_assert_geq(q->stale, 0);
				cr_assert_geq(r->version, q->version + q->stale + 1,
					      "worker %d round %ld ran before worker %d's round %ld", i,
					      round, j, mr);
			}
		}
	}
	acc = final_eval(dir, &updates);
	/* Every pushed model is folded in on arrival: one version each. */
	cr_assert_eq(updates, NW * 60 / H);
	cr_assert_gt(stale_max, 0);
	cr_assert_gt(acc, 0.5, "accuracy %.3f", acc);
	cleanup(dir);
}

/* Gradient pushes (H = 1), every step stretched to ~10 ms so the run lasts ~3 s. */
static void restart_cfg(struct kv *k, int i)
{
	(void)i;
	kv_set(k, "consistency.combine", "none");
	kv_set(k, "consistency.local_steps", "1");
	kv_set(k, "consistency.dead_after", "0.5");
	kv_set(k, "stop.steps", "300");
	kv_set(k, "straggler.delay.dist", "constant");
	kv_set(k, "straggler.delay.a", "0.01");
}

/* The trace at path has a header and 20 rows (the test needs more than 10 before the kill). */
static bool traced_rows(void *path)
{
	char line[512];
	int n = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return false;
	while (n < 21 && fgets(line, sizeof line, f))
		n++;
	fclose(f);
	return n >= 21;
}

Test(engine_ps_avg, bsp_worker_killed_and_restarted, .timeout = 120)
{
	char *dir = mkrun(), trace2[600];
	pid_t pids[NW + 1], again;
	double t_kill, t_restart;
	long before = 0, during = 0, first_after = -1, updates = 0;

	origin_ns = (long long)clock_now_ns();
	port = support_free_ports(NW + 2);
	cr_assert_gt(port, 0, "no free ports");
	for (int i = -1; i < NW; i++)
		pids[i + 1] = start(dir, "bsp", i, restart_cfg);
	/* Worker 2 is killed once it has traced a few rounds (the run is going). */
	snprintf(trace2, sizeof trace2, "%s/nodes/worker2.csv", dir);
	cr_assert(support_wait_until(traced_rows, trace2, 30000), "worker 2 never got going");
	cr_assert_eq(kill(pids[3], SIGKILL), 0); /* worker 2 */
	t_kill = (double)(clock_now_ns() - origin_ns) / 1e9;
	cr_assert_eq(support_wait_pid(pids[3], NULL, 10000), 0);
	clock_sleep_ns(1500000000ll); /* the absence under test (3 x dead_after), not a wait */
	t_restart = (double)(clock_now_ns() - origin_ns) / 1e9;
	again = start(dir, "bsp", 2, restart_cfg);
	for (int i = 0; i <= NW; i++)
		if (i != 3)
			reap(pids[i], i ? "worker" : "server");
	reap(again, "restarted worker 2");
	load_traces(dir, false);
	for (int i = 0; i < NW; i++) {
		cr_assert_eq(traces[i].r[traces[i].n - 1].step, 300, "worker %d ended at step %ld", i,
			     traces[i].r[traces[i].n - 1].step);
		if (i != 2)
			cr_assert_eq(traces[i].n, 300, "worker %d has gaps", i);
	}
	/* The others were not stalled: after the dead timeout they stepped without worker 2. */
	for (int k = 0; k < traces[0].n; k++)
		during += traces[0].r[k].t > t_kill + 0.8 && traces[0].r[k].t < t_restart;
	cr_assert_gt(during, 10, "worker 0 made %ld steps while worker 2 was dead", during);
	/* Worker 2's file: steps 1..before, then the restart continues at the pack's clock. */
	for (int k = 0; k < traces[2].n; k++) {
		const struct row *r = &traces[2].r[k];

		if (r->t < t_kill) {
			cr_assert_eq(r->step, k + 1);
			before = r->step;
		} else if (first_after < 0) {
			first_after = r->step;
		}
	}
	cr_assert_gt(before, 10);
	cr_assert_gt(first_after, before + 10, "rejoined at step %ld, killed at %ld", first_after,
		     before);
	/* Back in the BSP rounds: its updates after the restart are accepted (staleness 0). */
	for (int k = 0; k < traces[2].n; k++)
		if (traces[2].r[k].t > t_restart)
			cr_assert_eq(traces[2].r[k].stale, 0);
	cr_assert_gt(final_eval(dir, &updates), 0.5);
	cleanup(dir);
}
