/* tests/e2e/test_engine_p2p: whole runs of the peer-to-peer engine on loopback, one process per
 * peer on distinct ports, checked from the traces they write:
 *   BSP        no peer starts the compute of step c+1 before every peer finished step c, even
 *              when one peer starts late; accuracy rises well above chance;
 *   pBSP(0)    never waits: the early peers finish every step before the late one starts;
 *   average    H local steps then sample-weighted averaging still learns;
 *   ensemble   peers trained on disjoint class subsets: the averaged probabilities beat what
 *              any single peer can reach (a peer that saw 4 classes scores at most 0.4); a
 *              member killed (or stopped) mid-run is noticed at the end, within
 *              consistency.dead_after, and named missing in ensemble.csv;
 *   gossip     a peer SIGSTOPped mid-run (connected, silent) holds its partners' pulls for
 *              consistency.dead_after once, then is not drawn again: the others keep their
 *              pace and finish at stop.steps long before stop.time;
 *   bad replica a replica with an infinite weight is a bad frame and changes nothing. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectors/schema.h"
#include "lib/clock.h"
#include "lib/kv.h"
#include "node/engine_p2p.h"
#include "node/wire.h"
#include "tests/support/files.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"
#include "tests/support/ports.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
#define MAXN 6
#define MAXSTEPS 2000

struct opts {
	int n, steps, sample, fanout, local_steps;
	const char *barrier, *combine, *partition;
	double late_s;      /* the last peer starts this much later */
	double eval_every;
	double dead_after;  /* consistency.dead_after, 0: not written */
	double delay_s;     /* every peer's constant straggler delay per step, 0: none */
};

struct row {
	double t, compute, wait;
	int step;
	long stale; /* -1 = empty */
};

static struct row rows[MAXN][MAXSTEPS + 1];
static int nrows[MAXN];

static int base_port(void)
{
	static int port;

	if (!port)
		port = support_free_ports(16);
	return port;
}

static void write_conf(const char *dir, const struct opts *o, int i, int64_t origin)
{
	struct kv *kv = kv_new();
	char path[512], name[32], names[256] = "", addrs[512] = "";

	for (int j = 0; j < o->n; j++) {
		char w[32];

		snprintf(w, sizeof w, "%speer%d", j ? "," : "", j);
		strcat(names, w);
		strcat(addrs, j ? ",127.0.0.1" : "127.0.0.1");
	}
	snprintf(name, sizeof name, "peer%d", i);
	kv_set(kv, "run.dir", dir);
	kv_setf(kv, "run.origin_ns", "%lld", (long long)origin);
	kv_set(kv, "run.seed", "5");
	kv_set(kv, "node.name", name);
	kv_set(kv, "node.role", "peer");
	kv_setf(kv, "node.index", "%d", i);
	kv_setf(kv, "workers.count", "%d", o->n);
	kv_set(kv, "workers.names", names);
	kv_set(kv, "workers.addrs", addrs);
	kv_setf(kv, "port.data", "%d", base_port());
	kv_set(kv, "topology.kind", "p2p");
	kv_set(kv, "consistency.barrier", o->barrier);
	kv_set(kv, "consistency.staleness", "2");
	kv_setf(kv, "consistency.sample", "%d", o->sample);
	kv_setf(kv, "consistency.fanout", "%d", o->fanout);
	kv_setf(kv, "consistency.local_steps", "%d", o->local_steps ? o->local_steps : 1);
	kv_set(kv, "consistency.combine", o->combine ? o->combine : "gossip");
	kv_set(kv, "data.path", DATA_DIR);
	kv_set(kv, "data.partition.scheme", o->partition ? o->partition : "iid");
	kv_set(kv, "data.partition.per_node", "4");
	kv_set(kv, "data.train_limit", "4000");
	kv_set(kv, "data.test_limit", "2000");
	kv_set(kv, "model.kind", "softmax");
	kv_set(kv, "train.batch", "32");
	kv_set(kv, "train.lr", "0.05");
	kv_setf(kv, "stop.steps", "%d", o->steps);
	kv_set(kv, "stop.time", "60");
	kv_setf(kv, "eval.every", "%g", o->eval_every > 0 ? o->eval_every : 0.3);
	if (o->dead_after > 0)
		kv_setf(kv, "consistency.dead_after", "%g", o->dead_after);
	if (o->delay_s > 0) {
		kv_set(kv, "straggler.delay.dist", "constant");
		kv_setf(kv, "straggler.delay.a", "%g", o->delay_s);
	}
	snprintf(path, sizeof path, "%s/peer%d.conf", dir, i);
	cr_assert_eq(kv_save(kv, path), 0);
	kv_destroy(&kv);
}

static pid_t spawn(const char *dir, int i)
{
	char path[512];
	pid_t pid;

	snprintf(path, sizeof path, "%s/peer%d.conf", dir, i);
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		char err[256];
		struct kv *kv = kv_load(path, err, sizeof err);

		_exit(kv && engine_p2p_run(kv) == 0 ? 0 : 1);
	}
	return pid;
}

/* Run the peers (the last one late_s late); returns how many exited 0. */
static int run_peers(const char *dir, const struct opts *o)
{
	pid_t pids[MAXN];
	int64_t origin = clock_now_ns();

	for (int i = 0; i < o->n; i++)
		write_conf(dir, o, i, origin);
	for (int i = 0; i < o->n - 1; i++)
		pids[i] = spawn(dir, i);
	usleep((useconds_t)(o->late_s * 1e6)); /* the late start under test, not a wait */
	pids[o->n - 1] = spawn(dir, o->n - 1);
	/* Peers still running after 100 s are killed (the tests' timeout is 120 s). */
	return support_wait_children(pids, o->n, NULL, 100000);
}

static void load_traces(const char *dir, int n)
{
	for (int i = 0; i < n; i++) {
		char path[600], line[512];
		FILE *f;

		snprintf(path, sizeof path, "%s/nodes/peer%d.csv", dir, i);
		f = fopen(path, "r");
		cr_assert_not_null(f, "no trace %s", path);
		nrows[i] = 0;
		while (fgets(line, sizeof line, f)) {
			struct row *r = &rows[i][nrows[i]];
			char *f_[11], *cur = line;
			int nf = 0;

			if (!strncmp(line, "t_s,", 4))
				continue;
			cr_assert_lt(nrows[i], MAXSTEPS);
			while (nf < 11 && cur)
				f_[nf++] = strsep(&cur, ",");
			cr_assert_eq(nf, 11, "%s", line);
			r->t = strtod(f_[0], NULL);
			r->step = atoi(f_[2]);
			r->compute = strtod(f_[3], NULL);
			r->wait = strtod(f_[4], NULL);
			r->stale = *f_[5] ? strtol(f_[5], NULL, 10) : -1;
			cr_assert_eq(r->step, nrows[i] + 1, "peer%d: step %d out of order", i,
				     r->step);
			nrows[i]++;
		}
		fclose(f);
	}
}

/* The last test accuracy in eval.csv (-1 when there is none). */
static double final_accuracy(const char *dir, int *nrows_out)
{
	char path[600], line[512];
	double acc = -1;
	FILE *f;
	int k = 0;

	snprintf(path, sizeof path, "%s/eval.csv", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f, "no %s", path);
	while (fgets(line, sizeof line, f)) {
		double t, epoch, a;
		unsigned long long u, s;
		char node[32];

		if (!strncmp(line, "t_s,", 4))
			continue;
		cr_assert_eq(sscanf(line, "%lf,%31[^,],%llu,%lf,%llu,%lf", &t, node, &u, &epoch, &s,
				    &a), 6, "%s", line);
		cr_assert(a >= 0 && a <= 1);
		acc = a;
		k++;
	}
	fclose(f);
	if (nrows_out)
		*nrows_out = k;
	return acc;
}

static double ensemble_state(const char *dir, const char *name, char *state, size_t len);

static double total_wait(int i)
{
	double s = 0;

	for (int k = 0; k < nrows[i]; k++)
		s += rows[i][k].wait;
	return s;
}

Test(engine_p2p, bsp_lockstep_from_traces_and_accuracy_rises, .timeout = 120)
{
	char dir[] = "/tmp/stalenet-test-p2p-XXXXXX";
	struct opts o = { .n = 4, .steps = 150, .barrier = "bsp", .fanout = 1, .late_s = 0.5 };
	double acc;

	cr_assert_not_null(support_mkdtemp(dir));
	cr_assert_eq(run_peers(dir, &o), o.n, "every peer must finish cleanly");
	load_traces(dir, o.n);
	for (int i = 0; i < o.n; i++)
		cr_assert_eq(nrows[i], o.steps, "peer%d traced %d steps", i, nrows[i]);
	/* Step c+1's compute began at t - compute_s; every peer's step c ended at its t. */
	for (int a = 0; a < o.n; a++)
		for (int c = 1; c < o.steps; c++) {
			double start = rows[a][c].t - rows[a][c].compute;

			for (int b = 0; b < o.n; b++)
				cr_assert_geq(start + 2e-6, rows[b][c - 1].t,
					      "peer%d started step %d at %.6f before peer%d ended step "
					      "%d at %.6f", a, c + 1, start, b, c, rows[b][c - 1].t);
		}
	/* The early peers waited for the late one (the check above could fail). */
	cr_assert_gt(total_wait(0), 0.3, "peer0 waited only %.3f s", total_wait(0));
	/* Gossip merged a replica on every step after the first (on the last one the partner may
	 * have left already); under BSP a merged replica is never behind. */
	for (int i = 0; i < o.n; i++)
		for (int c = 1; c < o.steps - 1; c++)
			cr_assert(rows[i][c].stale == 0,
				  "peer%d step %d staleness %ld under BSP", i, c + 1, rows[i][c].stale);
	acc = final_accuracy(dir, NULL);
	cr_assert_gt(acc, 0.6, "final accuracy %.3f (chance is 0.1)", acc);
	{
		char err[512] = "";

		cr_assert_eq(trace_schema_check_dir(dir, err, sizeof err), 0, "%s", err);
	}
	cr_assert_eq(support_rm_rf(dir), 0);
}

Test(engine_p2p, pbsp_sample_zero_never_waits, .timeout = 120)
{
	char dir[] = "/tmp/stalenet-test-p2p-XXXXXX";
	struct opts o = { .n = 3, .steps = 100, .barrier = "pbsp", .sample = 0, .fanout = 0,
			  .late_s = 1.0 };

	cr_assert_not_null(support_mkdtemp(dir));
	cr_assert_eq(run_peers(dir, &o), o.n);
	load_traces(dir, o.n);
	for (int i = 0; i < o.n; i++) {
		cr_assert_eq(nrows[i], o.steps);
		cr_assert_lt(total_wait(i), 0.2, "peer%d waited %.3f s", i, total_wait(i));
	}
	/* The early peers did all their steps before the late one did its first. */
	for (int i = 0; i < o.n - 1; i++)
		cr_assert_lt(rows[i][o.steps - 1].t, rows[o.n - 1][0].t,
			     "peer%d ended at %.3f, after the late peer began at %.3f", i,
			     rows[i][o.steps - 1].t, rows[o.n - 1][0].t);
	cr_assert_eq(support_rm_rf(dir), 0);
}

Test(engine_p2p, ssp_bounds_the_lead, .timeout = 120)
{
	char dir[] = "/tmp/stalenet-test-p2p-XXXXXX";
	struct opts o = { .n = 3, .steps = 80, .barrier = "ssp", .fanout = 1, .late_s = 0.5 };

	cr_assert_not_null(support_mkdtemp(dir));
	cr_assert_eq(run_peers(dir, &o), o.n);
	load_traces(dir, o.n);
	/* SSP(2): step c+1 starts only once everybody ended step c - 2. */
	for (int a = 0; a < o.n; a++)
		for (int c = 3; c < o.steps; c++) {
			double start = rows[a][c].t - rows[a][c].compute;

			for (int b = 0; b < o.n; b++)
				cr_assert_geq(start + 2e-6, rows[b][c - 3].t, "peer%d step %d vs peer%d",
					      a, c + 1, b);
		}
	cr_assert_gt(total_wait(0), 0.3);
	cr_assert_eq(support_rm_rf(dir), 0);
}

Test(engine_p2p, model_averaging_every_h_steps_learns, .timeout = 120)
{
	char dir[] = "/tmp/stalenet-test-p2p-XXXXXX";
	struct opts o = { .n = 3, .steps = 160, .barrier = "bsp", .fanout = 2, .local_steps = 4,
			  .combine = "average", .late_s = 0.0 };
	double acc;

	cr_assert_not_null(support_mkdtemp(dir));
	cr_assert_eq(run_peers(dir, &o), o.n);
	load_traces(dir, o.n);
	for (int i = 0; i < o.n; i++)
		for (int c = 0; c < o.steps; c++) {
			/* merges happen at clocks 4, 8, ...: rows 5, 9, ... (index c = 4, 8, ...) */
			bool merge = c > 0 && c % 4 == 0;

			cr_assert_eq(rows[i][c].stale >= 0, merge, "peer%d step %d stale %ld", i, c + 1,
				     rows[i][c].stale);
		}
	acc = final_accuracy(dir, NULL);
	cr_assert_gt(acc, 0.6, "final accuracy %.3f", acc);
	cr_assert_eq(support_rm_rf(dir), 0);
}

Test(engine_p2p, ensemble_beats_any_single_peer, .timeout = 120)
{
	char dir[] = "/tmp/stalenet-test-p2p-XXXXXX";
	struct opts o = { .n = 3, .steps = 200, .barrier = "asp", .fanout = 1,
			  .combine = "ensemble", .partition = "classes", .late_s = 0.2,
			  .eval_every = 0.05 };
	int nev = 0;
	double acc;

	cr_assert_not_null(support_mkdtemp(dir));
	cr_assert_eq(run_peers(dir, &o), o.n);
	load_traces(dir, o.n);
	for (int i = 0; i < o.n; i++)
		for (int c = 0; c < nrows[i]; c++)
			cr_assert_eq(rows[i][c].stale, -1, "ensemble peers never merge");
	acc = final_accuracy(dir, &nev);
	cr_assert_geq(nev, 1);
	/* Each peer saw 4 of 10 (balanced) classes, so alone it scores at most ~0.4. */
	cr_assert_gt(acc, 0.55, "ensemble accuracy %.3f", acc);
	/* every member ended normally: all combined, none taken for crashed as it closed */
	for (int i = 0; i < o.n; i++) {
		char name[16], state[32];

		snprintf(name, sizeof name, "peer%d", i);
		ensemble_state(dir, name, state, sizeof state);
		cr_assert_str_eq(state, i ? "final" : "self", "%s: %s", name, state);
	}
	cr_assert_eq(support_rm_rf(dir), 0);
}

static int trace_lines(const char *dir, int i)
{
	char path[600], line[512];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof path, "%s/nodes/peer%d.csv", dir, i);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		n++;
	fclose(f);
	return n;
}

/* Peer 3 traced 30 steps (a header and 30 rows). */
static bool peer3_got_going(void *dir)
{
	return trace_lines(dir, 3) >= 31;
}

/* A peer SIGKILLed mid-run sends no BYE: the others learn of it from the closed connection and
 * their BSP barriers go on without it (without that they would wait for it until stop.time). */
Test(engine_p2p, bsp_goes_on_without_a_killed_peer, .timeout = 120)
{
	char dir[] = "/tmp/stalenet-test-p2p-XXXXXX";
	struct opts o = { .n = 4, .steps = 400, .barrier = "bsp", .fanout = 1 };
	int64_t origin = clock_now_ns(), t_kill;
	pid_t pids[4];
	int st, ok = 0, killed_at;

	cr_assert_not_null(support_mkdtemp(dir));
	for (int i = 0; i < o.n; i++)
		write_conf(dir, &o, i, origin);
	for (int i = 0; i < o.n; i++)
		pids[i] = spawn(dir, i);
	support_wait_until(peer3_got_going, dir, 30000);
	cr_assert_geq(trace_lines(dir, 3), 31, "peer3 never got going");
	cr_assert_eq(kill(pids[3], SIGKILL), 0);
	t_kill = clock_now_ns();
	cr_assert_eq(support_wait_pid(pids[3], &st, 10000), 0);
	ok = support_wait_children(pids, 3, NULL, 90000);
	cr_assert_eq(ok, 3, "the surviving peers must finish cleanly");
	cr_assert_lt((double)(clock_now_ns() - t_kill) / 1e9, 20.0,
		     "the peers went on %.1f s after the kill (stop.time is 60 s)",
		     (double)(clock_now_ns() - t_kill) / 1e9);
	load_traces(dir, 3);
	killed_at = trace_lines(dir, 3) - 1;
	cr_assert_lt(killed_at, o.steps / 2, "peer3 was killed after %d steps", killed_at);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(nrows[i], o.steps, "peer%d traced %d steps", i, nrows[i]);
	cr_assert_gt(final_accuracy(dir, NULL), 0.6);
	cr_assert_eq(support_rm_rf(dir), 0);
}

/* The t_s of the last row of nodes/peer<i>.csv (-1 when it has none). */
static double last_row_t(const char *dir, int i)
{
	char path[600], line[512];
	double t = -1;
	FILE *f;

	snprintf(path, sizeof path, "%s/nodes/peer%d.csv", dir, i);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "t_s,", 4))
			t = strtod(line, NULL);
	fclose(f);
	return t;
}

/* peer2 traced 30 steps and peer0 evaluated twice: each evaluation of an ensemble pulls every
 * live member's replica, so peer0 is connected to peer2 by then. */
static bool peer2_got_going(void *dir)
{
	char path[600], line[512];
	int evals = -1;
	FILE *f;

	snprintf(path, sizeof path, "%s/eval.csv", (const char *)dir);
	f = fopen(path, "r");
	if (!f)
		return false;
	while (fgets(line, sizeof line, f))
		evals++;
	fclose(f);
	return evals >= 2 && trace_lines(dir, 2) >= 31;
}

/* ensemble.csv's state of member `name` ("" when it has no row) and the rows' t_s; rows must
 * name peer0 as the evaluating node and each member once. */
static double ensemble_state(const char *dir, const char *name, char *state, size_t len)
{
	double t = -1;
	char path[600], line[512];
	int found = 0;
	FILE *f;

	state[0] = '\0';
	snprintf(path, sizeof path, "%s/ensemble.csv", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f, "no %s", path);
	cr_assert_not_null(fgets(line, sizeof line, f));
	cr_assert_str_eq(line, TRACE_HEADER_ENSEMBLE "\n");
	while (fgets(line, sizeof line, f)) {
		char *fld[5], *cur = line;
		int nf = 0;

		line[strcspn(line, "\n")] = '\0';
		while (nf < 5 && cur)
			fld[nf++] = strsep(&cur, ",");
		cr_assert(nf == 5 && !cur, "%s", line);
		cr_assert_str_eq(fld[1], "peer0");
		t = strtod(fld[0], NULL);
		/* a combined member's row gives the clock of its replica, a missing one's none */
		bool in = !strcmp(fld[4], "self") || !strcmp(fld[4], "final");
		cr_assert_eq(*fld[3] != '\0', in, "%s", line);
		if (!strcmp(fld[2], name)) {
			found++;
			snprintf(state, len, "%s", fld[4]);
		}
	}
	fclose(f);
	cr_assert_leq(found, 1, "%s named %d times", name, found);
	return t;
}

/* Three ensemble peers; peer2 gets `sig` after 30 steps (SIGKILL: it crashes, its connections
 * close; SIGSTOP: it stays connected and says nothing). peer0 must make its final combination
 * within consistency.dead_after (2 s) and a small bound of the last live member's end (it
 * waited P2P_ENSEMBLE_WAIT_S, 30 s), combine peer1's final replica with its own, name peer2 in
 * ensemble.csv with `want`, and exit. */
static void ensemble_without_peer2(int sig, const char *want)
{
	char dir[] = "/tmp/stalenet-test-p2p-XXXXXX", state[32];
	struct opts o = { .n = 3, .steps = 1500, .barrier = "asp", .fanout = 1,
			  .combine = "ensemble", .partition = "classes", .dead_after = 2.0,
			  .eval_every = 0.2, .delay_s = 0.002 };
	const double bound_s = 3.0;
	int64_t origin = clock_now_ns();
	double t_exit0, t_end, t_comb;
	pid_t pids[3];
	int st;

	cr_assert_not_null(support_mkdtemp(dir));
	for (int i = 0; i < o.n; i++)
		write_conf(dir, &o, i, origin);
	for (int i = 0; i < o.n; i++)
		pids[i] = spawn(dir, i);
	support_wait_until(peer2_got_going, dir, 30000);
	cr_assert(peer2_got_going(dir), "peer2 never got going");
	cr_assert_eq(kill(pids[2], sig), 0);
	cr_assert_eq(support_wait_pid(pids[0], &st, 90000), 0);
	t_exit0 = (double)(clock_now_ns() - origin) / 1e9;
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "peer0 failed (status %d)", st);
	cr_assert_eq(support_wait_pid(pids[1], &st, 30000), 0);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "peer1 failed (status %d)", st);
	if (sig != SIGKILL)
		kill(pids[2], SIGKILL);
	cr_assert_eq(support_wait_pid(pids[2], &st, 10000), 0);
	cr_assert_lt(trace_lines(dir, 2) - 1, o.steps, "peer2 finished before the %s", strsignal(sig));
	cr_assert_eq(trace_lines(dir, 0) - 1, o.steps);
	cr_assert_eq(trace_lines(dir, 1) - 1, o.steps);
	t_end = fmax(last_row_t(dir, 0), last_row_t(dir, 1));
	t_comb = ensemble_state(dir, "peer0", state, sizeof state);
	cr_log_info("%s: peer0 combined %.2f s and exited %.2f s after the last live member's last "
		    "step", strsignal(sig), t_comb - t_end, t_exit0 - t_end);
	cr_assert_lt(t_comb - t_end, o.dead_after + bound_s,
		     "peer0 combined %.1f s after the last live member's last step (dead_after %.0f s)",
		     t_comb - t_end, o.dead_after);
	/* then it says BYE and lingers at most P2P_BYE_LINGER_MS for its frames to go */
	cr_assert_lt(t_exit0 - t_comb, 1.0 + bound_s, "peer0 exited %.1f s after combining",
		     t_exit0 - t_comb);
	cr_assert_str_eq(state, "self");
	ensemble_state(dir, "peer1", state, sizeof state);
	cr_assert_str_eq(state, "final");
	ensemble_state(dir, "peer2", state, sizeof state);
	cr_assert_str_eq(state, want);
	{
		char path[600], err[512];

		snprintf(path, sizeof path, "%s/ensemble.csv", dir);
		cr_assert_eq(trace_schema_check_file(path, "ensemble", err, sizeof err), 0, "%s", err);
	}
	cr_assert_gt(final_accuracy(dir, NULL), 0.3);
	cr_assert_eq(support_rm_rf(dir), 0);
}

Test(engine_p2p, ensemble_ends_without_a_killed_member, .timeout = 120)
{
	ensemble_without_peer2(SIGKILL, "crashed");
}

Test(engine_p2p, ensemble_ends_without_a_silent_member, .timeout = 120)
{
	ensemble_without_peer2(SIGSTOP, "silent");
}

/* --- a stopped gossip partner ------------------------------------------------------------------ */

/* The host's 1-minute load average, for the log of a timing measurement ("?" unknown). */
static const char *loadavg(void)
{
	static char buf[32];
	FILE *f = fopen("/proc/loadavg", "r");

	snprintf(buf, sizeof buf, "?");
	if (f) {
		if (fscanf(f, "%31s", buf) != 1)
			snprintf(buf, sizeof buf, "?");
		fclose(f);
	}
	return buf;
}

/* Peer 3 traced 30 steps and peer 0..2 each 30: every peer is gossiping. */
static bool all4_got_going(void *dir)
{
	for (int i = 0; i < 4; i++)
		if (trace_lines(dir, i) < 31)
			return false;
	return true;
}

/* Four gossiping peers (ASP, fanout 1); peer3 is SIGSTOPped mid-run: it stays connected and
 * answers nothing. Every live peer draws it as its partner within a few rounds (1 in 3 per
 * round); before the fix that pull waited until stop.time (60 s), so a live peer made a handful
 * of steps after the stop and none finished. Now the pull gives up after consistency.dead_after
 * (1 s) and peer3 is not drawn again: each live peer loses about dead_after once, finishes at
 * stop.steps well before stop.time, and its step rate after the stop is bounded below by
 *   remaining steps / (2 x remaining x its own step interval before the stop + dead_after + 2 s)
 * (twice its own pace, one bounded wait, 2 s for a loaded host), and in any case > 20 steps/s
 * (without the fix: a few steps in 60 s, < 1 step/s). Its longest wait after the stop is about
 * dead_after: the bounded wait did happen, and did not last longer. Continued then, peer3
 * finishes too. */
Test(engine_p2p, gossip_goes_on_without_a_stopped_peer, .timeout = 120)
{
	char dir[] = "/tmp/stalenet-test-p2p-XXXXXX";
	struct opts o = { .n = 4, .steps = 800, .barrier = "asp", .fanout = 1, .dead_after = 1.0,
			  .delay_s = 0.002 };
	int64_t origin = clock_now_ns();
	double t_stop, t_done;
	pid_t pids[4];
	int st, stopped_at;

	cr_assert_not_null(support_mkdtemp(dir));
	for (int i = 0; i < o.n; i++)
		write_conf(dir, &o, i, origin);
	for (int i = 0; i < o.n; i++)
		pids[i] = spawn(dir, i);
	support_wait_until(all4_got_going, dir, 30000);
	cr_assert(all4_got_going(dir), "the peers never got going");
	cr_assert_eq(kill(pids[3], SIGSTOP), 0);
	t_stop = (double)(clock_now_ns() - origin) / 1e9;
	cr_assert_eq(support_wait_children(pids, 3, NULL, 90000), 3,
		     "the peers that were not stopped must finish cleanly");
	t_done = (double)(clock_now_ns() - origin) / 1e9;
	stopped_at = trace_lines(dir, 3) - 1;
	cr_assert_lt(stopped_at, o.steps, "peer3 finished before it was stopped");
	/* Continued, peer3 reads the BYEs that came meanwhile and finishes alone. */
	cr_assert_eq(kill(pids[3], SIGCONT), 0);
	if (support_wait_pid(pids[3], &st, 30000) != 0) {
		kill(pids[3], SIGKILL);
		support_wait_pid(pids[3], &st, 10000);
		cr_assert_fail("peer3 did not finish after it was continued");
	}
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "peer3 failed (status %d)", st);
	cr_assert_eq(trace_lines(dir, 3) - 1, o.steps);
	cr_assert_lt(t_done, 30.0, "the live peers finished %.1f s into the run (stop.time 60 s)",
		     t_done);
	load_traces(dir, 3);
	for (int i = 0; i < 3; i++) {
		int before = 0, after;
		double pace, rate, span, max_wait = 0, bound;

		cr_assert_eq(nrows[i], o.steps, "peer%d traced %d steps", i, nrows[i]);
		while (before < nrows[i] && rows[i][before].t <= t_stop)
			before++;
		after = nrows[i] - before;
		cr_assert(before >= 30 && after > 0, "peer%d: %d steps before the stop", i, before);
		pace = rows[i][before - 1].t / before;
		span = rows[i][nrows[i] - 1].t - t_stop;
		rate = after / span;
		for (int c = before; c < nrows[i]; c++)
			max_wait = fmax(max_wait, rows[i][c].wait);
		bound = after / (2.0 * after * pace + o.dead_after + 2.0);
		cr_log_info("peer%d: %d steps before the stop (%.2f ms each), %d after in %.2f s "
			    "(%.0f steps/s, bound %.0f), longest wait after %.3f s (load %s)", i,
			    before, pace * 1e3, after, span, rate, bound, max_wait,
			    loadavg());
		cr_assert_gt(rate, bound, "peer%d: %.1f steps/s after the stop", i, rate);
		cr_assert_gt(rate, 20.0, "peer%d: %.1f steps/s after the stop", i, rate);
		cr_assert_lt(max_wait, o.dead_after + 1.0, "peer%d waited %.2f s for a step", i,
			     max_wait);
	}
	/* At least one live peer drew peer3 and gave up on it after dead_after. */
	{
		double longest = 0;

		for (int i = 0; i < 3; i++)
			for (int c = 0; c < nrows[i]; c++)
				if (rows[i][c].t > t_stop)
					longest = fmax(longest, rows[i][c].wait);
		cr_assert_geq(longest, o.dead_after - 0.05, "no peer ever waited for peer3 (%.3f s)",
			      longest);
	}
	cr_assert_gt(final_accuracy(dir, NULL), 0.6);
	cr_assert_eq(support_rm_rf(dir), 0);
}

/* --- a replica it cannot take ---------------------------------------------------------------------- */

/* A real peer0 gossiping with a fake peer1 that answers each PULL first with a replica whose
 * weight is infinite, then with a good one: the first is a bad frame (counted in the trace) and
 * changes nothing, so the averaged model stays finite (an infinite weight made it NaN). */
Test(engine_p2p, a_replica_with_an_infinite_weight_is_skipped, .timeout = 120)
{
	char dir[] = "/tmp/stalenet-p2p-inf-XXXXXX", ep[64], path[600], line[1024];
	struct opts o = { .n = 2, .steps = 5, .sample = 0, .fanout = 1, .barrier = "asp",
			  .combine = "average" };
	void *ctx = zmq_ctx_new(), *router = zmq_socket(ctx, ZMQ_ROUTER);
	const size_t nfl = 784 * 10 + 10;
	float *replica = calloc(nfl, sizeof *replica);
	int64_t end = clock_now_ns() + 60000000000ll;
	long pulls = 0, rows_n = 0, bad = 0;
	pid_t pid;
	int st = -1;
	FILE *f;

	cr_assert_not_null(support_mkdtemp(dir));
	cr_assert_not_null(replica);
	snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", base_port() + 1);
	cr_assert_eq(wire_socket_setup(router, 64u << 20), 0);
	cr_assert_eq(zmq_bind(router, ep), 0);
	write_conf(dir, &o, 0, clock_now_ns());
	pid = spawn(dir, 0);
	while (clock_now_ns() < end) {
		struct wire_msg m;

		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
		if (wire_recv(router, true, 64u << 20, 100, &m, NULL) != 1)
			continue;
		if (m.h.type == WIRE_PULL) {
			struct wire_header h = { .type = WIRE_MODEL, .sender = 1, .aux = m.h.aux,
						 .step = m.h.step, .model_version = m.h.step,
						 .value = INFINITY,
						 .payload_len = (uint32_t)(nfl * sizeof(float)) };

			cr_assert_eq(wire_send(router, m.id, m.idlen, &h, replica, NULL, false, NULL), 0);
			h.value = 4000;
			cr_assert_eq(wire_send(router, m.id, m.idlen, &h, replica, NULL, false, NULL), 0);
			pulls++;
		}
		wire_msg_close(&m);
	}
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "peer0 failed (status %d)", st);
	cr_assert_geq(pulls, 3, "%ld pulls", pulls);
	snprintf(path, sizeof path, "%s/nodes/peer0.csv", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	cr_assert_not_null(fgets(line, sizeof line, f));
	while (fgets(line, sizeof line, f)) {
		char *p = line;

		/* t_s,node,step,compute_s,wait_s,staleness,model_version,loss,... */
		for (int c = 0; c < 7; c++)
			p = strchr(p, ',') + 1;
		cr_assert(isfinite(atof(p)), "loss not finite: %s", line);
		bad += atol(strrchr(line, ',') + 1);
		rows_n++;
	}
	fclose(f);
	cr_assert_eq(rows_n, 5);
	cr_assert_eq(bad, pulls, "%ld bad frames in the trace, %ld pulls answered", bad, pulls);
	free(replica);
	zmq_close(router);
	zmq_ctx_term(ctx);
	cr_assert_eq(support_rm_rf(dir), 0);
}
