/* sim/sim_profile: quantiles of known samples, the inverse CDF between them, hostile profile
 * files refused, and a simulation calibrated on a run reproducing it (median final step within
 * 10%, wait fraction within 0.05: the bounds). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/table.h"
#include "orchestrator/plan.h"
#include "orchestrator/scenario.h"
#include "sim/sim.h"
#include "node/straggler.h"
#include "sim/sim_profile.h"
#include "tests/support/files.h"
#include "tests/support/simrun.h"

/* A run directory with one worker trace: step k (1..101) at t = k * 0.5 s, compute (k-1)/100
 * s, wait 0.1 s: transfers 0.4 - (k-1)/100 ... */
static void fake_run(const char *dir)
{
	char path[600];
	FILE *f;

	snprintf(path, sizeof path, "%s/nodes", dir);
	support_mkdirs(path);
	snprintf(path, sizeof path, "%s/nodes/worker0.csv", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "t_s,node,step,compute_s,wait_s,staleness,model_version,loss,bytes_tx,bytes_rx,bad_frames\n");
	for (int k = 0; k <= 101; k++)
		fprintf(f, "%.3f,worker0,%d,%.3f,0.100,,,,0,0,0\n", k * 0.5, k, k ? (k - 1) / 100.0 : 0.0);
	fclose(f);
	/* a server trace is not a worker's */
	snprintf(path, sizeof path, "%s/nodes/server0.csv", dir);
	support_write_file(path, "t_s,node,worker,worker_step,staleness,model_version,updates,dropped,live,waiting\n");
}

Test(sim_profile, fit_and_draw)
{
	char dir[256], path[300], err[512];
	FILE *f;
	struct sim_profile *p;
	const double *c, *t;

	support_tmpdir(dir, sizeof dir, "prof");
	fake_run(dir);
	snprintf(path, sizeof path, "%s/p.conf", dir);
	f = fopen(path, "w");
	cr_assert_eq(sim_profile_fit(dir, f, err, sizeof err), 1, "%s", err);
	fclose(f);
	p = sim_profile_load(path, err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	c = sim_profile_compute(p, "worker0");
	t = sim_profile_transfer(p, "worker0");
	cr_assert_not_null(c);
	cr_assert_not_null(t);
	/* rows 1..101 give compute 0.00 .. 1.00 (the first row has no previous t_s) */
	cr_assert_float_eq(c[0], 0.0, 1e-9);
	cr_assert_float_eq(c[SIM_PROFILE_Q - 1], 1.0, 1e-9);
	cr_assert_float_eq(c[10], 0.5, 1e-9, "median %g", c[10]);
	/* transfer = 0.5 - compute - 0.1, clamped at 0 */
	cr_assert_float_eq(t[0], 0.0, 1e-9);
	cr_assert_float_eq(t[SIM_PROFILE_Q - 1], 0.4, 1e-6);
	/* inverse CDF: linear between quantiles */
	cr_assert_float_eq(sim_profile_draw(c, 0.525), (c[10] + c[11]) / 2, 1e-9);
	cr_assert_float_eq(sim_profile_draw(c, 0.0), c[0], 1e-12);
	cr_assert_float_eq(sim_profile_draw(c, 0.999999), c[SIM_PROFILE_Q - 1], 1e-4);
	/* another worker falls back to the pooled table */
	cr_assert_eq(sim_profile_compute(p, "worker9")[10], sim_profile_compute(p, "all")[10]);
	sim_profile_destroy(&p);
	cr_assert_null(p);
	support_rm_rf(dir);
}

/* Workers alike draw from one pool; a worker unlike them keeps its own table, and the pool
 * holds none of its samples. Five workers step in 0.10 + i/1000 s (i = 0..99, in a different
 * order each), worker4 in 0.40 + i/1000 s; each waits 0.1 s and has a 0.05 s transfer. */
Test(sim_profile, alike_workers_pooled_outlier_kept)
{
	char dir[256], path[600], err[512], *text;
	struct sim_profile *p;
	FILE *f;

	support_tmpdir(dir, sizeof dir, "prof");
	snprintf(path, sizeof path, "%s/nodes", dir);
	support_mkdirs(path);
	for (int w = 0; w < 6; w++) {
		double t = 0;

		snprintf(path, sizeof path, "%s/nodes/worker%d.csv", dir, w);
		f = fopen(path, "w");
		cr_assert_not_null(f);
		fprintf(f, "t_s,node,step,compute_s,wait_s,staleness,model_version,loss,bytes_tx,bytes_rx,bad_frames\n");
		for (int k = 0; k <= 100; k++) {
			double c = (w == 4 ? 0.40 : 0.10) + ((k * (7 + 2 * w)) % 100) / 1000.0;

			if (k)
				t += c + 0.1 + 0.05;
			fprintf(f, "%.6f,worker%d,%d,%.6f,0.100,,,,0,0,0\n", t, w, k, c);
		}
		fclose(f);
	}
	snprintf(path, sizeof path, "%s/p.conf", dir);
	f = fopen(path, "w");
	cr_assert_eq(sim_profile_fit(dir, f, err, sizeof err), 6, "%s", err);
	fclose(f);
	text = support_slurp(path, NULL);
	for (int w = 0; w < 6; w++) {
		char key[64];

		snprintf(key, sizeof key, "\nworker%d.compute_s = ", w);
		cr_assert_eq(strstr(text, key) != NULL, w == 4, "worker%d: %s", w, text);
		snprintf(key, sizeof key, "\n# worker%d.transfer_s: as all", w);
		cr_assert_not_null(strstr(text, key), "worker%d: %s", w, text);
	}
	free(text);
	p = sim_profile_load(path, err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	/* the pool: 0.100 .. 0.199, none of worker4's 0.4 s */
	cr_assert_float_eq(sim_profile_compute(p, "all")[0], 0.100, 1e-9);
	cr_assert_float_eq(sim_profile_compute(p, "all")[SIM_PROFILE_Q - 1], 0.199, 1e-9);
	cr_assert_eq(sim_profile_compute(p, "worker2"), sim_profile_compute(p, "all"));
	cr_assert_float_eq(sim_profile_compute(p, "worker4")[0], 0.400, 1e-9);
	cr_assert_float_eq(sim_profile_transfer(p, "worker4")[10], 0.05, 1e-5);
	sim_profile_destroy(&p);
	support_rm_rf(dir);
}

/* The top 5% of a draw keeps the samples' mean there (against a numerical integral), stays
 * within [q95, q100], and is the straight line without a tail mean. */
Test(sim_profile, tail_mean_kept)
{
	double q[SIM_PROFILE_Q + 1], sum = 0;
	const int n = 200000;

	for (int k = 0; k < SIM_PROFILE_Q; k++)
		q[k] = k < SIM_PROFILE_Q - 1 ? 0.1 * k : 7.9; /* q95 = 1.9, q100 = 7.9 */
	q[SIM_PROFILE_Q] = 2.9;                             /* an exponential's: q95 + 1 */
	for (int i = 0; i < n; i++) {
		double x = sim_profile_draw(q, 0.95 + 0.05 * (i + 0.5) / n);

		cr_assert(x >= 1.9 - 1e-12 && x <= 7.9 + 1e-12, "%g", x);
		sum += x;
	}
	cr_assert_float_eq(sum / n, 2.9, 1e-3, "top-bin mean %g", sum / n);
	/* below the top bin: linear as before */
	cr_assert_float_eq(sim_profile_draw(q, 0.525), 1.05, 1e-12);
	q[SIM_PROFILE_Q] = NAN;
	cr_assert_float_eq(sim_profile_draw(q, 0.975), (1.9 + 7.9) / 2, 1e-9);
}

Test(sim_profile, hostile_files_refused)
{
	static const char *const bad[] = {
		"worker0.compute_s = 1 2 3\n",
		"worker0.compute_s = 3 2 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\n",
		"worker0.compute_s = -1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		"worker0.compute_s = nan 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		"worker0.compute_s = 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 7\n",
		"worker0.compute_s = 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 2 0.5\n",
		"worker0.compute_s = 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 2 1.5 1\n",
		"# nothing\nprofile.source = x\n",
	};
	char dir[256], path[300], err[512];

	support_tmpdir(dir, sizeof dir, "prof");
	snprintf(path, sizeof path, "%s/p.conf", dir);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		support_write_file(path, bad[i]);
		cr_assert_null(sim_profile_load(path, err, sizeof err), "accepted: %s", bad[i]);
		cr_assert_not_null(strstr(err, path), "%s", err);
	}
	snprintf(path, sizeof path, "%s/none", dir);
	cr_assert_null(sim_profile_load(path, err, sizeof err));
	support_rm_rf(dir);
}

Test(sim_profile, parse_from_text)
{
	/* sim_profile_parse is sim_profile_load without the file: the same checks, the text's
	 * name in the messages, and the pooled table for a worker the profile does not name */
	static const char ok[] = "profile.workers = 1\n"
				 "all.compute_s = 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\n"
				 "worker1.transfer_s = 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 "
				 "0.5 0.5 0.5 0.5 0.5 0.5\n";
	static const char bad[] = "worker0.compute_s = inf 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
	char err[512];
	struct sim_profile *p = sim_profile_parse(ok, sizeof ok - 1, "mem.profile", err, sizeof err);
	const double *q;

	cr_assert_not_null(p, "%s", err);
	q = sim_profile_compute(p, "worker7");
	cr_assert_not_null(q, "the pooled table");
	cr_expect_float_eq(sim_profile_draw(q, 0.5), 10.0, 1e-12);
	q = sim_profile_transfer(p, "worker1");
	cr_assert_not_null(q);
	cr_expect_float_eq(sim_profile_draw(q, 0.3), 0.5, 1e-12);
	cr_expect_null(sim_profile_transfer(p, "worker0"), "no own table and no pooled one");
	sim_profile_destroy(&p);
	cr_expect_null(p);
	cr_assert_null(sim_profile_parse(bad, sizeof bad - 1, "mem.profile", err, sizeof err));
	cr_expect_not_null(strstr(err, "mem.profile"), "%s", err);
}

Test(sim_profile, calibrated_simulation_reproduces_its_source, .timeout = 60)
{
	char src[256], dst[256], prof[300], text[2048], err[512];
	struct sim_result a, b;
	FILE *f;
#define BASE "name: c\nseed: 4\nstop: {time: 120s}\nconsistency: {barrier: ssp, staleness: 2}\n"         \
	     "workers: 8\nlinkcheck: off\nnetwork: {default: {delay: 20ms, jitter: 5ms, loss: 1%%}}\n"     \
	     "stragglers:\n  - {nodes: workers, compute: {delay: {dist: constant, value: 100ms}}}\n"       \
	     "  - {nodes: worker7, compute: {delay: {dist: constant, value: 400ms}}}\n"                     \
	     "simulation: {step_cost: 1ms, server_cost: 20us%s}\n"

	support_tmpdir(src, sizeof src, "prof");
	support_tmpdir(dst, sizeof dst, "prof");
	snprintf(text, sizeof text, BASE, "");
	support_simulate_text(text, src, &a);
	snprintf(prof, sizeof prof, "%s/profile.conf", src);
	f = fopen(prof, "w");
	cr_assert_eq(sim_profile_fit(src, f, err, sizeof err), 8, "%s", err);
	fclose(f);
	{
		char extra[400];

		snprintf(extra, sizeof extra, ", profile: '%s', rto_min: 1s", prof);
		snprintf(text, sizeof text, BASE, extra);
	}
	/* a very different loss model (rto_min 1 s) is ignored: the profile's times replace it */
	support_simulate_text(text, dst, &b);
	cr_assert_lt(fabs(b.steps_median - a.steps_median), 0.10 * a.steps_median, "median %g against %g",
		     b.steps_median, a.steps_median);
	cr_assert_lt(fabs(b.wait_fraction - a.wait_fraction), 0.05, "wait %g against %g", b.wait_fraction,
		     a.wait_fraction);
	support_rm_rf(src);
	support_rm_rf(dst);
}

/* Final step of a worker trace, and its compute_s column (at most max rows) into c. */
static int read_trace(const char *path, double *c, int max, int *rows)
{
	char line[512];
	int last = 0, n = 0;
	FILE *f = fopen(path, "r");

	cr_assert_not_null(f, "%s", path);
	while (fgets(line, sizeof line, f)) {
		double t, x;
		int step;

		if (sscanf(line, "%lf,%*[^,],%d,%lf", &t, &step, &x) != 3)
			continue;
		if (n < max)
			c[n] = x;
		n++;
		last = step;
	}
	fclose(f);
	*rows = n;
	return last;
}

/* The delays an emulated worker draws (node/straggler seeded by straggler_seed, as every engine
 * seeds it) are the ones calibration takes out of its compute times and a calibrated simulation
 * adds back: a hand-made emulated ASP run of 4 workers, each step 2 ms of compute plus the
 * worker's own gamma(1, 1 s) draws and a 3 ms round trip; calibrated; simulated with the
 * profile and the run's seed. Every simulated step's compute time is 2 ms plus the emulated
 * worker's draw for that step, and every worker ends on its emulated final step (within one:
 * the simulated server adds its 20 us per message). worker3's configuration names another
 * seed: its draws do not replay, the profile says so, and the simulation still draws the
 * run's stream for it (the pooled base plus its own delays). */
Test(sim_profile, replayed_delays_follow_the_emulated_stream, .timeout = 60)
{
	enum { W = 4, MAXROWS = 200 };
	char src[256], dst[256], path[600], text[2048], err[512], *prof_text;
	double want[W][MAXROWS], got[MAXROWS];
	int emu_final[W];
	struct scenario *sc;
	struct plan *p;
	struct sim_result res;
	struct sim_profile *prof;
	uint64_t seed;
	FILE *f;
#define REPLAY "name: c\nseed: 9\nstop: {time: 30s}\nconsistency: {barrier: asp}\nworkers: 4\n"         \
	       "linkcheck: off\nnetwork: {default: {delay: 1ms}}\nstragglers:\n"                         \
	       "  - {nodes: workers, compute: {delay: {dist: gamma, shape: 1, scale: 1s}}}\n"           \
	       "simulation: {step_cost: 1ms, server_cost: 20us%s}\n"

	snprintf(text, sizeof text, REPLAY, "");
	sc = scenario_parse(text, strlen(text), "c.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	p = plan_new(sc, err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	seed = plan_run(p, 0)->seed;
	plan_destroy(&p);
	scenario_destroy(&sc);

	support_tmpdir(src, sizeof src, "replay");
	support_tmpdir(dst, sizeof dst, "replay");
	snprintf(path, sizeof path, "%s/nodes", src);
	support_mkdirs(path);
	for (int w = 0; w < W; w++) {
		struct straggler_params sp = { .slowdown = 1, .dist = STRAGGLER_GAMMA, .a = 1, .b = 1 };
		struct straggler *st = straggler_new(&sp, straggler_seed(seed, (uint32_t)w));
		double t = 0.003; /* the join's round trip */
		int k = 0;

		cr_assert_not_null(st);
		snprintf(path, sizeof path, "%s/nodes/worker%d.conf", src, w);
		f = fopen(path, "w");
		cr_assert_not_null(f);
		fprintf(f, "run.seed = %llu\nnode.index = %d\nstraggler.delay.dist = gamma\n"
			   "straggler.delay.a = 1\nstraggler.delay.b = 1\n",
			(unsigned long long)(w == 3 ? seed + 1 : seed), w);
		fclose(f);
		snprintf(path, sizeof path, "%s/nodes/worker%d.csv", src, w);
		f = fopen(path, "w");
		cr_assert_not_null(f);
		fprintf(f, "t_s,node,step,compute_s,wait_s,staleness,model_version,loss,bytes_tx,bytes_rx,bad_frames\n");
		for (;;) {
			double c = 0.002 + straggler_delay_s(st);

			if (t + c + 0.003 > 30 || k == MAXROWS)
				break;
			t += c + 0.003;
			want[w][k++] = c;
			fprintf(f, "%.6f,worker%d,%d,%.6f,0.000000,0,0,,0,0,0\n", t, w, k, c);
		}
		fclose(f);
		emu_final[w] = k;
		cr_assert_gt(k, 10);
		straggler_destroy(&st);
	}
	snprintf(path, sizeof path, "%s/profile.conf", src);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	cr_assert_eq(sim_profile_fit(src, f, err, sizeof err), W, "%s", err);
	fclose(f);
	prof_text = support_slurp(path, NULL);
	cr_assert_not_null(strstr(prof_text, "profile.delays_replayed = 3\n"), "%s", prof_text);
	cr_assert_not_null(strstr(prof_text, "# worker3.base_s: none (a compute time shorter"), "%s", prof_text);
	free(prof_text);
	prof = sim_profile_load(path, err, sizeof err);
	cr_assert_not_null(prof, "%s", err);
	for (int k = 0; k < SIM_PROFILE_Q; k++)
		cr_assert_float_eq(sim_profile_base(prof, "worker3")[k], 0.002, 2e-6, "base q%d %g", 5 * k,
				   sim_profile_base(prof, "worker3")[k]);
	sim_profile_destroy(&prof);

	{
		char extra[700];

		snprintf(extra, sizeof extra, ", profile: '%s'", path);
		snprintf(text, sizeof text, REPLAY, extra);
	}
	support_simulate_text(text, dst, &res);
	for (int w = 0; w < W; w++) {
		int n, fin;

		snprintf(path, sizeof path, "%s/nodes/worker%d.csv", dst, w);
		fin = read_trace(path, got, MAXROWS, &n);
		cr_assert_geq(n, emu_final[w] - 1, "worker%d: %d rows against %d", w, n, emu_final[w]);
		for (int k = 0; k < n && k < emu_final[w]; k++)
			cr_assert_float_eq(got[k], want[w][k], 2e-6, "worker%d step %d: %.6f against %.6f", w,
					   k + 1, got[k], want[w][k]);
		cr_assert_leq(abs(fin - emu_final[w]), 1, "worker%d: final step %d against %d", w, fin,
			      emu_final[w]);
	}
	support_rm_rf(src);
	support_rm_rf(dst);
}

/* A restarted worker is a new process whose straggler stream starts again: the calibrated
 * simulation restarts the stream at the restart (the first step after it draws the stream's
 * first delay again), and the calibration, replaying a trace with a restart (the step column
 * jumps), restarts its replay there and finds every row's draw. */
Test(sim_profile, replayed_delays_restart_with_the_process, .timeout = 60)
{
	enum { MAXROWS = 200 };
	char dir[256], path[600], text[2048], err[512], *prof_text;
	double d[MAXROWS], got[MAXROWS], base[SIM_PROFILE_Q];
	struct scenario *sc;
	struct plan *p;
	struct sim_result res;
	struct straggler_params sp = { .slowdown = 1, .dist = STRAGGLER_GAMMA, .a = 1, .b = 1 };
	struct straggler *st;
	uint64_t seed;
	int n, jump = -1, prev = 0, step;
	FILE *f;
#define RESTART "name: c\nseed: 5\nstop: {time: 40s}\nconsistency: {barrier: asp}\nworkers: 2\n"          \
		"linkcheck: off\nnetwork: {default: {delay: 1ms}}\nstragglers:\n"                        \
		"  - {nodes: workers, compute: {delay: {dist: gamma, shape: 1, scale: 1s}}}\n"          \
		"  - {nodes: worker1, crash: {at: 10s, restart: 15s}}\n"                                 \
		"simulation: {step_cost: 1ms, server_cost: 20us%s}\n"

	support_tmpdir(dir, sizeof dir, "restart");
	snprintf(path, sizeof path, "%s/given.conf", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "all.base_s =");
	for (int k = 0; k < SIM_PROFILE_Q; k++)
		fprintf(f, " 0.002");
	fprintf(f, "\nall.transfer_s =");
	for (int k = 0; k < SIM_PROFILE_Q; k++)
		fprintf(f, " 0.003");
	fprintf(f, "\n");
	fclose(f);
	{
		char extra[700];

		snprintf(extra, sizeof extra, ", profile: '%s'", path);
		snprintf(text, sizeof text, RESTART, extra);
	}
	sc = scenario_parse(text, strlen(text), "c.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	p = plan_new(sc, err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	seed = plan_run(p, 0)->seed;
	plan_destroy(&p);
	scenario_destroy(&sc);
	snprintf(path, sizeof path, "%s/run", dir);
	support_simulate_text(text, path, &res);

	/* worker1's delays: the stream from its start, and again from the restart */
	st = straggler_new(&sp, straggler_seed(seed, 1));
	cr_assert_not_null(st);
	for (int k = 0; k < MAXROWS; k++)
		d[k] = straggler_delay_s(st);
	straggler_destroy(&st);
	snprintf(path, sizeof path, "%s/run/nodes/worker1.csv", dir);
	read_trace(path, got, MAXROWS, &n);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	{
		char line[512];
		int r = 0;

		while (fgets(line, sizeof line, f))
			if (sscanf(line, "%*[^,],%*[^,],%d,", &step) == 1) {
				if (r && step != prev + 1 && jump < 0)
					jump = r;
				prev = step;
				r++;
			}
	}
	fclose(f);
	cr_assert_gt(jump, 2, "no restart in worker1's trace");
	cr_assert_lt(jump, n - 2);
	for (int r = 0; r < n; r++) {
		double want = 0.002 + (r < jump ? d[r] : d[r - jump]);

		cr_assert_float_eq(got[r], want, 2e-6, "row %d (restart at row %d): %.6f against %.6f", r, jump,
				   got[r], want);
	}

	/* calibrated on that run as on an emulated one: the replay restarts with the process */
	for (int w = 0; w < 2; w++) {
		snprintf(path, sizeof path, "%s/run/nodes/worker%d.conf", dir, w);
		f = fopen(path, "w");
		cr_assert_not_null(f);
		fprintf(f, "run.seed = %llu\nnode.index = %d\nstraggler.delay.dist = gamma\n"
			   "straggler.delay.a = 1\nstraggler.delay.b = 1\n", (unsigned long long)seed, w);
		fclose(f);
	}
	snprintf(path, sizeof path, "%s/run/profile.conf", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	snprintf(text, sizeof text, "%s/run", dir);
	cr_assert_eq(sim_profile_fit(text, f, err, sizeof err), 2, "%s", err);
	fclose(f);
	prof_text = support_slurp(path, NULL);
	cr_assert_not_null(strstr(prof_text, "profile.delays_replayed = 2\n"), "%s", prof_text);
	{
		const char *q = strstr(prof_text, "all.base_s =");

		cr_assert_not_null(q, "%s", prof_text);
		q += strlen("all.base_s =");
		for (int k = 0; k < SIM_PROFILE_Q; k++) {
			char *end;

			base[k] = strtod(q, &end);
			cr_assert(end != q);
			q = end;
			cr_assert_float_eq(base[k], 0.002, 2e-6, "base q%d %g", 5 * k, base[k]);
		}
	}
	free(prof_text);
	support_rm_rf(dir);
}

/* The warm-up: step k of two workers takes transfer 0.5 s (k = 1, the join's exchange too),
 * 0.1 s (k = 2, 3) and 0.3 s (k >= 4), compute 0.1 s, no wait; the factors are the bins' means
 * over the mean of every step after the first. */
Test(sim_profile, warmup_fitted)
{
	char dir[256], path[600], err[512];
	struct sim_profile *p;
	const double *f;
	double mean = (2 * 0.1 + 97 * 0.3) / 99;
	FILE *out;

	support_tmpdir(dir, sizeof dir, "prof");
	snprintf(path, sizeof path, "%s/nodes", dir);
	support_mkdirs(path);
	for (int w = 0; w < 2; w++) {
		double t = 0;

		snprintf(path, sizeof path, "%s/nodes/worker%d.csv", dir, w);
		out = fopen(path, "w");
		cr_assert_not_null(out);
		fprintf(out, "t_s,node,step,compute_s,wait_s,staleness,model_version,loss,bytes_tx,bytes_rx,bad_frames\n");
		for (int k = 1; k <= 100; k++) {
			t += 0.1 + (k == 1 ? 0.5 : k <= 3 ? 0.1 : 0.3);
			fprintf(out, "%.6f,worker%d,%d,0.100000,0.000000,0,0,,0,0,0\n", t, w, k);
		}
		fclose(out);
	}
	snprintf(path, sizeof path, "%s/p.conf", dir);
	out = fopen(path, "w");
	cr_assert_eq(sim_profile_fit(dir, out, err, sizeof err), 2, "%s", err);
	fclose(out);
	p = sim_profile_load(path, err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	f = sim_profile_warmup(p);
	cr_assert_not_null(f);
	cr_expect_float_eq(f[0], 0.5 / mean, 1e-5, "step 1: %g", f[0]);
	cr_expect_float_eq(f[1], 0.1 / mean, 1e-5, "steps 2-3: %g", f[1]);
	for (int b = 2; b < SIM_PROFILE_WARM; b++)
		cr_expect_float_eq(f[b], 0.3 / mean, 1e-5, "bin %d: %g", b, f[b]);
	sim_profile_destroy(&p);
	support_rm_rf(dir);
}

Test(sim_profile, warm_bins)
{
	cr_expect_eq(sim_profile_warm_bin(0), 0);
	cr_expect_eq(sim_profile_warm_bin(1), 0);
	cr_expect_eq(sim_profile_warm_bin(2), 1);
	cr_expect_eq(sim_profile_warm_bin(3), 1);
	cr_expect_eq(sim_profile_warm_bin(4), 2);
	cr_expect_eq(sim_profile_warm_bin(63), 5);
	cr_expect_eq(sim_profile_warm_bin(64), 6);
	cr_expect_eq(sim_profile_warm_bin(1000000), 6);
}

Test(sim_profile, warmup_hostile_refused)
{
	static const char *const bad[] = {
		"all.transfer_warmup = 1 1 1 1 1 1\n",
		"all.transfer_warmup = 1 1 1 1 1 1 1 1\n",
		"all.transfer_warmup = 1 1 1 -1 1 1 1\n",
		"all.transfer_warmup = 1 1 1 nan 1 1 1\n",
		"all.transfer_warmup = 1 1 1 1e9 1 1 1\n",
		"all.transfer_warmup = 1 1 1 x 1 1 1\n",
	};
	static const char tab[] = "all.transfer_s = 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\n";
	char text[512], err[512];

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(text, sizeof text, "%s%s", tab, bad[i]);
		cr_expect_null(sim_profile_parse(text, strlen(text), "mem.profile", err, sizeof err), "accepted: %s",
			       bad[i]);
	}
}

/* A simulation scales every transfer draw of step k by its bin's factor: one worker, ASP,
 * constant compute 0.1 s and transfer 0.4 s, factors 2, 0.25, 0.5, 1, ...: step 1 takes
 * 0.8 s of transfer (two round trips of 0.4 each), steps 2-3 0.1 s, 4-7 0.2 s, 8 on 0.4 s. */
Test(sim_profile, warmup_applied, .timeout = 30)
{
	char dir[256], prof[300], text[2048], path[600];
	struct sim_result r;
	struct table *t;
	FILE *f;
	double prev = 0;

	support_tmpdir(dir, sizeof dir, "prof");
	snprintf(prof, sizeof prof, "%s/w.conf", dir);
	f = fopen(prof, "w");
	cr_assert_not_null(f);
	fprintf(f, "all.compute_s =");
	for (int i = 0; i < SIM_PROFILE_Q; i++)
		fprintf(f, " 0.1");
	fprintf(f, "\nall.transfer_s =");
	for (int i = 0; i < SIM_PROFILE_Q; i++)
		fprintf(f, " 0.4");
	fprintf(f, "\nall.transfer_warmup = 2 0.25 0.5 1 1 1 1\n");
	fclose(f);
	snprintf(text, sizeof text,
		 "name: w\nseed: 3\nstop: {time: 20s}\nconsistency: {barrier: asp}\nworkers: 1\nlinkcheck: off\n"
		 "simulation: {step_cost: 1ms, server_cost: 1us, profile: '%s'}\n", prof);
	snprintf(path, sizeof path, "%s/run", dir);
	support_simulate_text(text, path, &r);
	snprintf(path, sizeof path, "%s/run/nodes/worker0.csv", dir);
	t = table_load(path, &(bool){ false }, text, sizeof text);
	cr_assert_not_null(t, "%s", text);
	cr_assert_geq(table_rows(t), 10);
	for (size_t k = 1; k <= 10; k++) {
		double ts = table_double_or(t, k - 1, (size_t)table_col(t, "t_s"), NAN);
		double want = 0.1 + (k == 1 ? 0.8 : k <= 3 ? 0.1 : k <= 7 ? 0.2 : 0.4);

		cr_expect_float_eq(ts - prev, want, 1e-4, "step %zu took %g, want %g", k, ts - prev, want);
		prev = ts;
	}
	table_destroy(&t);
	support_rm_rf(dir);
}

/* A step's measured round trip (the model reply that starts it and the push that ends it) is
 * one draw, split in halves: two halves of independent draws would give the steps half the
 * measured variance, and under a barrier the workers would drift apart less than the emulated
 * ones. Transfers of 0.2 or 0.6 s (variance 0.04): a row is the ACK's arrival, a fixed half of
 * the shortest round trip after the push is handled, so var(d) + 2 cov(d_k, d_k+1) is the
 * variance of a step's transfer: 0.04 (0.02 with independent halves). */
Test(sim_profile, round_trip_is_one_draw, .timeout = 30)
{
	char dir[256], prof[300], text[2048], path[600];
	struct sim_result r;
	struct table *t;
	FILE *f;
	double d[1000], m = 0, v = 0, c1 = 0;
	size_t n = 0;

	support_tmpdir(dir, sizeof dir, "prof");
	snprintf(prof, sizeof prof, "%s/w.conf", dir);
	f = fopen(prof, "w");
	cr_assert_not_null(f);
	fprintf(f, "all.compute_s =");
	for (int i = 0; i < SIM_PROFILE_Q; i++)
		fprintf(f, " 0.1");
	fprintf(f, "\nall.transfer_s =");
	for (int i = 0; i < SIM_PROFILE_Q; i++)
		fprintf(f, " %s", i < SIM_PROFILE_Q / 2 ? "0.2" : "0.6");
	fprintf(f, "\n");
	fclose(f);
	snprintf(text, sizeof text,
		 "name: w\nseed: 5\nstop: {time: 400s}\nconsistency: {barrier: asp}\nworkers: 1\nlinkcheck: off\n"
		 "simulation: {step_cost: 1ms, server_cost: 1us, profile: '%s'}\n", prof);
	snprintf(path, sizeof path, "%s/run", dir);
	support_simulate_text(text, path, &r);
	snprintf(path, sizeof path, "%s/run/nodes/worker0.csv", dir);
	t = table_load(path, &(bool){ false }, text, sizeof text);
	cr_assert_not_null(t, "%s", text);
	cr_assert_geq(table_rows(t), 300);
	for (size_t k = 1; k < table_rows(t) && n < 1000; k++)
		d[n++] = table_double_or(t, k, (size_t)table_col(t, "t_s"), NAN) -
			 table_double_or(t, k - 1, (size_t)table_col(t, "t_s"), NAN);
	table_destroy(&t);
	for (size_t k = 0; k < n; k++)
		m += d[k] / (double)n;
	for (size_t k = 0; k < n; k++) {
		v += (d[k] - m) * (d[k] - m) / (double)n;
		if (k + 1 < n)
			c1 += (d[k] - m) * (d[k + 1] - m) / (double)(n - 1);
	}
	cr_assert_float_eq(m, 0.1 + 0.4, 0.03, "mean step %g", m);
	cr_assert(v + 2 * c1 > 0.032 && v + 2 * c1 < 0.048, "var %g + 2 cov %g: %g, want 0.04", v, c1, v + 2 * c1);
	support_rm_rf(dir);
}

/* all.transfer_ac1: fitted from a trace whose transfers are an AR(1) of coefficient 0.5,
 * refused out of range, and reproduced by a simulation: the variance of the time of 10 steps
 * in a row is about 3 times 10 steps' variance with a coefficient of 0.6, 1 time without. */
static double block_ratio(const char *dir, const char *prof, const char *extra, const char *run)
{
	char text[2048], path[600];
	struct sim_result r;
	struct table *t;
	FILE *f;
	double s[400], m = 0, v = 0, q = 0.4 * 0.4 / 12;
	size_t nb = 0;

	f = fopen(prof, "w");
	cr_assert_not_null(f);
	fprintf(f, "all.compute_s =");
	for (int i = 0; i < SIM_PROFILE_Q; i++)
		fprintf(f, " 0.1");
	fprintf(f, "\nall.transfer_s =");
	for (int i = 0; i < SIM_PROFILE_Q; i++)
		fprintf(f, " %.3f", 0.2 + 0.4 * i / (SIM_PROFILE_Q - 1));
	fprintf(f, "\n%s", extra);
	fclose(f);
	snprintf(text, sizeof text,
		 "name: w\nseed: 5\nstop: {time: 2000s}\nconsistency: {barrier: asp}\nworkers: 1\nlinkcheck: off\n"
		 "simulation: {step_cost: 1ms, server_cost: 1us, profile: '%s'}\n", prof);
	snprintf(path, sizeof path, "%s/%s", dir, run);
	support_simulate_text(text, path, &r);
	snprintf(path, sizeof path, "%s/%s/nodes/worker0.csv", dir, run);
	t = table_load(path, &(bool){ false }, text, sizeof text);
	cr_assert_not_null(t, "%s", text);
	cr_assert_geq(table_rows(t), 3000);
	for (size_t k = 10; k + 10 < table_rows(t) && nb < 400; k += 10)
		s[nb++] = table_double_or(t, k + 10, (size_t)table_col(t, "t_s"), NAN) -
			  table_double_or(t, k, (size_t)table_col(t, "t_s"), NAN);
	table_destroy(&t);
	for (size_t k = 0; k < nb; k++)
		m += s[k] / (double)nb;
	for (size_t k = 0; k < nb; k++)
		v += (s[k] - m) * (s[k] - m) / (double)(nb - 1);
	cr_assert(fabs(m - 10 * 0.5) < 0.2, "10 steps: %g s", m);
	return v / (10 * q);
}

Test(sim_profile, transfer_autocorrelation, .timeout = 60)
{
	char dir[256], prof[300], path[600], err[512], *text;
	struct sim_profile *p;
	FILE *f;
	double x = 0, t = 0, ac, lo, hi;
	uint64_t st = 12345;
	const char *ok = "all.transfer_ac1 = 0.3\n", *bad[] = { "all.transfer_ac1 = 0.99\n",
		"all.transfer_ac1 = nan\n", "all.transfer_ac1 = 0.5 1\n", "all.transfer_ac1 =\n" };
	size_t len;

	support_tmpdir(dir, sizeof dir, "prof");
	/* the fit */
	snprintf(path, sizeof path, "%s/nodes", dir);
	support_mkdirs(path);
	snprintf(path, sizeof path, "%s/nodes/worker0.csv", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "t_s,node,step,compute_s,wait_s,staleness,model_version,loss,bytes_tx,bytes_rx,bad_frames\n");
	for (int k = 0; k <= 3000; k++) {
		double u1, u2;

		st = st * 6364136223846793005ull + 1442695040888963407ull;
		u1 = ((double)(st >> 11) + 1) * 0x1p-53;
		st = st * 6364136223846793005ull + 1442695040888963407ull;
		u2 = (double)(st >> 11) * 0x1p-53;
		x = 0.5 * x + sqrt(1 - 0.25) * sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
		t += 0.1 + 0.4 + 0.05 * x;
		fprintf(f, "%.6f,worker0,%d,0.100000,0.000000,,,,0,0,0\n", t, k + 1);
	}
	fclose(f);
	snprintf(prof, sizeof prof, "%s/p.conf", dir);
	f = fopen(prof, "w");
	cr_assert_eq(sim_profile_fit(dir, f, err, sizeof err), 1, "%s", err);
	fclose(f);
	text = support_slurp(prof, &len);
	cr_assert_not_null(strstr(text, "all.transfer_ac1 = "), "%s", text);
	ac = strtod(strstr(text, "all.transfer_ac1 = ") + strlen("all.transfer_ac1 = "), NULL);
	cr_assert(ac > 0.42 && ac < 0.58, "fitted %g, want 0.5", ac);
	free(text);
	/* the file (with a table: a profile needs one) */
	{
		char buf[1024];
		size_t o = (size_t)snprintf(buf, sizeof buf, "all.transfer_s =");

		for (int i = 0; i < SIM_PROFILE_Q; i++)
			o += (size_t)snprintf(buf + o, sizeof buf - o, " 0.4");
		snprintf(buf + o, sizeof buf - o, "\n%s", ok);
		p = sim_profile_parse(buf, strlen(buf), "m", err, sizeof err);
		cr_assert_not_null(p, "%s", err);
		cr_assert_float_eq(sim_profile_transfer_ac1(p), 0.3, 1e-12);
		sim_profile_destroy(&p);
		for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
			snprintf(buf + o, sizeof buf - o, "\n%s", bad[k]);
			p = sim_profile_parse(buf, strlen(buf), "m", err, sizeof err);
			cr_expect_null(p, "'%s' taken", bad[k]);
			sim_profile_destroy(&p);
		}
	}
	/* the simulation */
	lo = block_ratio(dir, prof, "", "iid");
	hi = block_ratio(dir, prof, "all.transfer_ac1 = 0.6\n", "ar");
	cr_assert(lo > 0.7 && lo < 1.5, "independent: ratio %g, want 1", lo);
	cr_assert(hi > 2.2 && hi < 4.5, "ac1 0.6: ratio %g, want about 3", hi);
	support_rm_rf(dir);
}

/* host.runq_wait: the wall time of x s of work begun at t against a naive reference (the
 * availability summed in steps of 10 us), the work as its inverse, no timeline = no stretch. */
static double naive_wall(const double *t, const double *f, size_t n, double t0, double x)
{
	const double dt = 1e-5;
	double s = t0, done = 0, a = 1;

	while (done < x) {
		a = 1;
		for (size_t i = 0; i < n; i++)
			if (s < t[i]) {
				a = 1 - f[i] < SIM_PROFILE_AVAIL_MIN ? SIM_PROFILE_AVAIL_MIN : 1 - f[i];
				break;
			}
		done += a * dt;
		s += dt;
	}
	return s - t0 - (done - x) / a; /* less the last step's overshoot */
}

Test(sim_profile, host_load_stretch)
{
	static const double t[] = { 1, 3, 4, 5 }, f[] = { 0, 0.5, 0.75, 1 };
	char buf[1024], err[512];
	size_t o = (size_t)snprintf(buf, sizeof buf, "all.transfer_s =");
	struct sim_profile *p;

	for (int i = 0; i < SIM_PROFILE_Q; i++)
		o += (size_t)snprintf(buf + o, sizeof buf - o, " 0.4");
	snprintf(buf + o, sizeof buf - o, "\nhost.runq_wait = 1 0 3 0.5 4 0.75 5 1\n");
	p = sim_profile_parse(buf, strlen(buf), "m", err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	/* by hand: 1 s of work from 0.5: 0.5 s at full speed, then 0.5 s of work at half speed */
	cr_expect_float_eq(sim_profile_host_wall(p, 0.5, 1.0), 1.5, 1e-9);
	cr_expect_float_eq(sim_profile_host_wall(p, 0.5, 0.2), 0.2, 1e-9);
	/* past the end: full speed again; from 2: 0.5 + 0.25 + 0.05 of work by 5, then 0.2 */
	cr_expect_float_eq(sim_profile_host_wall(p, 2.0, 1.0), 3.2, 1e-9);
	cr_expect_float_eq(sim_profile_host_wall(p, 6.0, 1.0), 1.0, 1e-12);
	cr_expect_float_eq(sim_profile_host_work(p, 0.5, 2.0), 1.0, 1e-9);
	cr_expect_float_eq(sim_profile_host_work(p, 4.5, 4.5), 0.0, 1e-12);
	for (double t0 = 0; t0 < 6; t0 += 0.37)
		for (double x = 0.01; x < 4; x *= 1.9) {
			double w = sim_profile_host_wall(p, t0, x);

			cr_expect_float_eq(w, naive_wall(t, f, 4, t0, x), 1e-4, "wall(%g, %g) = %g", t0, x, w);
			cr_expect_float_eq(sim_profile_host_work(p, t0, t0 + w), x, 1e-9, "work of wall(%g, %g)",
					   t0, x);
		}
	cr_expect_float_eq(sim_profile_host_wall(NULL, 2.0, 1.0), 1.0, 1e-12);
	sim_profile_destroy(&p);
	/* hostile timelines */
	{
		static const char *const bad[] = { "1 0 1 0.5", "2 0 1 0.5", "1 0 3", "1 -0.1", "1 1.5",
						   "0 0.5", "-1 0.5", "1 nan", "x 0", "", "1e9 0.5" };

		for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
			snprintf(buf + o, sizeof buf - o, "\nhost.runq_wait = %s\n", bad[k]);
			p = sim_profile_parse(buf, strlen(buf), "m", err, sizeof err);
			cr_expect_null(p, "'%s' taken", bad[k]);
			sim_profile_destroy(&p);
		}
	}
}

/* The fit takes the host's load out: two workers step in 0.5 s (0.1 compute, 0.4 transfer) on a
 * quiet host and in 0.9 s (the transfer at half speed) while progress.csv says the nodes waited
 * half their time for a core; the fitted transfer table is 0.4 s throughout, with the load in
 * host.runq_wait. Without progress.csv the slow steps stay in the table. */
static void loaded_run(const char *dir, bool with_progress)
{
	char path[600];
	FILE *f;

	snprintf(path, sizeof path, "%s/nodes", dir);
	support_mkdirs(path);
	for (int w = 0; w < 2; w++) {
		double t = 0;

		snprintf(path, sizeof path, "%s/nodes/worker%d.csv", dir, w);
		f = fopen(path, "w");
		cr_assert_not_null(f);
		fprintf(f, "t_s,node,step,compute_s,wait_s,staleness,model_version,loss,bytes_tx,bytes_rx,bad_frames\n");
		for (int k = 1; t < 40; k++) {
			t += 0.1 + (t >= 10 - 1e-9 && t < 19.9 - 1e-9 ? 0.8 : 0.4);
			fprintf(f, "%.6f,worker%d,%d,0.100000,0.000000,0,0,,0,0,0\n", t, w, k);
		}
		fclose(f);
	}
	if (!with_progress)
		return;
	snprintf(path, sizeof path, "%s/progress.csv", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	/* a sample a second (the first at 1 s), each row repeating the latest */
	fprintf(f, "t_s,alive,waiting,min_step,median_step,max_step,runq_wait_frac,host_cpu_frac\n");
	for (int r = 0; r <= 400; r++) {
		double t = r / 10.0;
		int s = r / 10;

		if (s < 1)
			fprintf(f, "%.3f,2,0,0,0,0,,\n", t);
		else
			fprintf(f, "%.3f,2,0,0,0,0,%.4f,0.5\n", t, s >= 11 && s <= 20 ? 0.5 : 0.0);
	}
	fclose(f);
}

Test(sim_profile, host_load_fitted)
{
	char dir[256], path[600], err[512];
	struct sim_profile *p;
	const double *q;
	FILE *out;

	for (int with = 1; with >= 0; with--) {
		support_tmpdir(dir, sizeof dir, "prof");
		loaded_run(dir, with);
		snprintf(path, sizeof path, "%s/p.conf", dir);
		out = fopen(path, "w");
		cr_assert_eq(sim_profile_fit(dir, out, err, sizeof err), 2, "%s", err);
		fclose(out);
		p = sim_profile_load(path, err, sizeof err);
		cr_assert_not_null(p, "%s", err);
		q = sim_profile_transfer(p, "worker0");
		cr_assert_not_null(q);
		if (with) {
			/* the load: half over (10, 20], none before or after */
			cr_expect_float_eq(sim_profile_host_work(p, 12, 14), 1.0, 1e-6);
			cr_expect_float_eq(sim_profile_host_work(p, 0, 10), 10.0, 1e-6);
			cr_expect_float_eq(sim_profile_host_work(p, 21, 30), 9.0, 1e-6);
			for (int k = 1; k < SIM_PROFILE_Q - 1; k++)
				cr_expect_float_eq(q[k], 0.4, 2e-3, "q%d %g", 5 * k, q[k]);
		} else {
			cr_expect_float_eq(sim_profile_host_work(p, 12, 14), 2.0, 1e-12);
			cr_expect_float_eq(q[SIM_PROFILE_Q - 2], 0.8, 2e-3, "q95 %g", q[SIM_PROFILE_Q - 2]);
		}
		sim_profile_destroy(&p);
		support_rm_rf(dir);
	}
}

/* A simulation stretches every worker's messages by the host's load at once: four ASP workers,
 * compute 0.1 s, a round trip of 0.4 s, the host at half speed over (10, 20]: every worker's
 * steps inside the window take 0.9 s, outside 0.5 s, so the workers' slow steps coincide. */
Test(sim_profile, host_load_stalls_every_worker, .timeout = 30)
{
	char dir[256], prof[300], text[2048], path[600];
	struct sim_result r;
	FILE *f;

	support_tmpdir(dir, sizeof dir, "prof");
	snprintf(prof, sizeof prof, "%s/h.conf", dir);
	f = fopen(prof, "w");
	cr_assert_not_null(f);
	fprintf(f, "all.compute_s =");
	for (int i = 0; i < SIM_PROFILE_Q; i++)
		fprintf(f, " 0.1");
	fprintf(f, "\nall.transfer_s =");
	for (int i = 0; i < SIM_PROFILE_Q; i++)
		fprintf(f, " 0.4");
	fprintf(f, "\nhost.runq_wait = 10 0 20 0.5\n");
	fclose(f);
	snprintf(text, sizeof text,
		 "name: h\nseed: 3\nstop: {time: 30s}\nconsistency: {barrier: asp}\nworkers: 4\nlinkcheck: off\n"
		 "simulation: {step_cost: 1ms, server_cost: 1us, profile: '%s'}\n", prof);
	snprintf(path, sizeof path, "%s/run", dir);
	support_simulate_text(text, path, &r);
	for (int w = 0; w < 4; w++) {
		struct table *t;
		size_t in = 0, out = 0;

		snprintf(path, sizeof path, "%s/run/nodes/worker%d.csv", dir, w);
		t = table_load(path, &(bool){ false }, text, sizeof text);
		cr_assert_not_null(t, "%s", text);
		for (size_t k = 1; k < table_rows(t); k++) {
			double t0 = table_double_or(t, k - 1, (size_t)table_col(t, "t_s"), NAN);
			double t1 = table_double_or(t, k, (size_t)table_col(t, "t_s"), NAN);

			if (t0 > 10.5 && t1 < 19.5) {
				cr_expect_float_eq(t1 - t0, 0.9, 1e-3, "worker%d step %zu in the load: %g s", w, k,
						   t1 - t0);
				in++;
			} else if (t0 > 20.5 || t1 < 9.5) {
				cr_expect_float_eq(t1 - t0, 0.5, 1e-3, "worker%d step %zu: %g s", w, k, t1 - t0);
				out++;
			}
		}
		cr_expect_geq(in, 8, "worker%d: %zu steps in the load", w, in);
		cr_expect_geq(out, 35, "worker%d: %zu steps outside", w, out);
		table_destroy(&t);
	}
	support_rm_rf(dir);
}
