/* `stalenet simulate` end to end: a small parameter-server scenario with real training, its
 * run directory (scenario.yaml, meta.json in simulation mode, the traces in the emulator's
 * schema, workers.csv, summary.csv, the figures), a resumed sweep skipping complete runs,
 * byte-identical traces from a second simulation of the same scenario, and an --out holding
 * other runs refused (no run mixed into another's directory or summary). Needs the data set
 * and build/stalenet; no privileges. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectors/schema.h"
#include "collectors/table.h"
#include "orchestrator/scenario.h"
#include "sim/sim_train.h"
#include "tests/support/files.h"
#include "tests/support/proc.h"

#define SCENARIO                                                                                 \
	"name: simtest\nseed: 3\nstop: {time: 20s}\ntarget: 0.6\n"                                \
	"model: {kind: softmax}\ntrain: {batch: 32, lr: 0.05}\n"                                 \
	"consistency: {barrier: ssp, staleness: 2}\nworkers: 4\nlinkcheck: off\neval: {every: 2s}\n" \
	"network: {default: {delay: 5ms, jitter: 1ms}}\n"                                           \
	"stragglers:\n  - {nodes: workers, compute: {delay: {dist: exponential, mean: 50ms}}}\n"    \
	"simulation: {train: real, step_cost: 2ms, server_cost: 20us}\n"                             \
	"sweep: {consistency.barrier: [ssp, asp]}\n"

static const char *bin(void)
{
	static char path[512];
	const char *b = getenv("BUILD");

	snprintf(path, sizeof path, "%s/stalenet", b && *b ? b : "build");
	return path;
}

static double last_accuracy(const char *run)
{
	char path[700], err[256];
	bool missing;
	struct table *t;
	double acc = -1;

	snprintf(path, sizeof path, "%s/eval.csv", run);
	t = table_load(path, &missing, err, sizeof err);
	cr_assert_not_null(t, "%s", err);
	cr_assert_gt(table_rows(t), 5, "eval rows");
	table_double(t, table_rows(t) - 1, (size_t)table_col(t, "test_accuracy"), &acc);
	table_destroy(&t);
	return acc;
}

Test(simulate, run_directory, .timeout = 300)
{
	char dir[256], yaml[300], out[300], out2[300], run[400], path[600], err[512];
	char *meta, *a, *b;
	size_t la, lb;

	if (access(bin(), X_OK) != 0 || access("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", R_OK) != 0)
		cr_skip_test("needs %s and the data set", bin());
	support_tmpdir(dir, sizeof dir, "simulate");
	snprintf(yaml, sizeof yaml, "%s/s.yaml", dir);
	snprintf(out, sizeof out, "%s/out", dir);
	snprintf(out2, sizeof out2, "%s/out2", dir);
	support_write_file(yaml, SCENARIO);
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s' --plot --quiet 2>'%s/log'", bin(), yaml, out, dir), 0);
	snprintf(run, sizeof run, "%s/consistency.barrier=ssp+rep=1", out);
	snprintf(path, sizeof path, "%s/meta.json", run);
	meta = support_slurp(path, NULL);
	cr_assert_not_null(strstr(meta, "\"mode\": \"simulation\""), "%s", meta);
	cr_assert_not_null(strstr(meta, "\"status\": \"complete\""), "%s", meta);
	free(meta);
	snprintf(path, sizeof path, "%s/scenario.yaml", run);
	cr_assert_eq(access(path, R_OK), 0);
	cr_assert_eq(trace_schema_check_dir(run, err, sizeof err), 0, "%s", err);
	/* real training in simulated time: the softmax model learns */
	cr_assert_gt(last_accuracy(run), 0.6);
	snprintf(path, sizeof path, "%s/workers.csv", run);
	a = support_slurp(path, NULL);
	cr_assert_eq(strncmp(a, TRACE_HEADER_WORKERS "\n", strlen(TRACE_HEADER_WORKERS) + 1), 0, "%s", a);
	free(a);
	snprintf(path, sizeof path, "%s/summary.csv", out);
	a = support_slurp(path, NULL);
	cr_assert_not_null(strstr(a, "consistency.barrier=asp+rep=1"), "%s", a);
	cr_assert_not_null(strstr(a, "simulation"), "backend column: %s", a);
	free(a);
	snprintf(path, sizeof path, "%s/plots/steps_cdf.png", out);
	cr_assert_eq(access(path, R_OK), 0, "no steps_cdf figure");
	/* resume: both runs are complete, nothing is simulated again */
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s' 2>'%s/log2'", bin(), yaml, out, dir), 0);
	cr_assert_eq(support_sh("grep -q '0 simulation(s) done, 2 skipped' '%s/log2'", dir), 0);
	/* determinism: the same scenario again into another directory, byte for byte */
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s' --quiet 2>/dev/null", bin(), yaml, out2), 0);
	for (int k = 0; k < 4; k++) {
		static const char *const f[] = { "eval.csv", "progress.csv", "workers.csv", "nodes/worker2.csv" };

		snprintf(path, sizeof path, "%s/%s", run, f[k]);
		a = support_slurp(path, &la);
		snprintf(path, sizeof path, "%s/consistency.barrier=ssp+rep=1/%s", out2, f[k]);
		b = support_slurp(path, &lb);
		cr_assert(la == lb && memcmp(a, b, la) == 0, "%s differs between two simulations", f[k]);
		free(a);
		free(b);
	}
	/* calibrate on the SSP run, simulate it again from the profile (the profile overrides the
	 * step and link models): the median final step comes back within 10% */
	cr_assert_eq(support_sh("%s calibrate '%s' 2>/dev/null && grep -q '^all.transfer_s = ' '%s/profile.conf' && "
				"grep -Eq '^(worker3.transfer_s = |# worker3.transfer_s: as all)' '%s/profile.conf'",
				bin(), run, run, run), 0);
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s/cal' --quiet --set simulation.train=none "
				"--set 'simulation.profile=%s/profile.conf' --set 'sweep.consistency.barrier=[ssp]' "
				"2>/dev/null", bin(), yaml, dir, run), 0);
	{
		char p2[700];
		double med[2];

		for (int k = 0; k < 2; k++) {
			struct table *t;
			bool missing;

			snprintf(p2, sizeof p2, "%s/summary.csv", k ? out : dir);
			if (!k)
				snprintf(p2, sizeof p2, "%s/cal/summary.csv", dir);
			t = table_load(p2, &missing, err, sizeof err);
			cr_assert_not_null(t, "%s", err);
			med[k] = table_double_or(t, 0, (size_t)table_col(t, "steps_median"), -1);
			table_destroy(&t);
		}
		cr_assert_gt(med[1], 0);
		cr_assert_lt(med[0] > med[1] ? med[0] - med[1] : med[1] - med[0], 0.1 * med[1],
			     "calibrated median %g against %g", med[0], med[1]);
	}
	cr_assert_eq(support_sh("%s calibrate '%s' --out '%s/x.conf' 2>/dev/null; test $? = 2", bin(), dir, dir), 0);
	support_rm_rf(dir);
}

/* Rows of an eval.csv: model version (updates), samples and test loss. */
struct eval_rows {
	double version[256], samples[256], loss[256];
	size_t n;
};

static void eval_rows(const char *path, struct eval_rows *out)
{
	char err[256];
	bool missing;
	struct table *t = table_load(path, &missing, err, sizeof err);

	cr_assert_not_null(t, "%s", err);
	out->n = table_rows(t) < 256 ? table_rows(t) : 256;
	for (size_t r = 0; r < out->n; r++) {
		out->version[r] = table_double_or(t, r, (size_t)table_col(t, "updates"), -1);
		out->samples[r] = table_double_or(t, r, (size_t)table_col(t, "samples"), -1);
		out->loss[r] = table_double_or(t, r, (size_t)table_col(t, "test_loss"), -1);
	}
	table_destroy(&t);
}

/* The simulation trains the emulated run's model: the BSP run of the recorded fixture
 * (tests/data/sweep_small, emulated) simulated with the same seed reaches, at every model
 * version both evaluated, the same test loss (the same initial model, split and minibatches in
 * the same order, the same rounds), and counts updates and samples as the emulated server does
 * (a version is a closed round of 3 workers x 64 samples). */
Test(simulate, same_models_as_emulated_run, .timeout = 120)
{
	char dir[256], path[600];
	struct eval_rows emu, sim;
	size_t matched = 0;

	if (access(bin(), X_OK) != 0 || access("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", R_OK) != 0)
		cr_skip_test("needs %s and the data set", bin());
	support_tmpdir(dir, sizeof dir, "simulate");
	/* one BSP run, run index 0: the fixture's bsp+rep=1 seed */
	cr_assert_eq(support_sh("%s simulate tests/data/sweep_small.yaml --out '%s/o' --quiet "
				"--set simulation.train=real --set simulation.step_cost=1ms "
				"--set simulation.server_cost=20us --set 'sweep.consistency.barrier=[bsp]' "
				"--set sweep.repeat=1 2>'%s/log'", bin(), dir, dir), 0);
	eval_rows("tests/data/sweep_small/consistency.barrier=bsp+rep=1/eval.csv", &emu);
	snprintf(path, sizeof path, "%s/o/consistency.barrier=bsp+rep=1/eval.csv", dir);
	eval_rows(path, &sim);
	cr_assert_gt(sim.n, 5);
	for (size_t i = 0; i < sim.n; i++) {
		cr_assert_float_eq(sim.samples[i], sim.version[i] * 3 * 64, 1e-9,
				   "row %zu: %g samples at version %g", i, sim.samples[i], sim.version[i]);
		for (size_t j = 0; j < emu.n; j++) {
			if (emu.version[j] != sim.version[i])
				continue;
			cr_assert_float_eq(sim.loss[i], emu.loss[j], 2e-6,
					   "version %g: test loss %.6f simulated, %.6f emulated",
					   sim.version[i], sim.loss[i], emu.loss[j]);
			cr_assert_float_eq(sim.samples[i], emu.samples[j], 1e-9);
			matched++;
			break;
		}
	}
	/* versions 0, 4, 8, 12 at least (the emulated run evaluated 0, 4, 8, 12, 18, ...) */
	cr_assert_geq(matched, 4, "only %zu versions evaluated in both", matched);
	support_rm_rf(dir);
}

/* An ASP run's training is set by the order in which its server applied the updates: a
 * recorded emulated ASP run (tests/data/asp_order: the first 300 updates of a straggler.yaml run,
 * 8 workers, its traces cut there), replayed update by update through sim/sim_train (the order
 * from the workers' traces, a row's update being the (model_version + staleness)-th; each update
 * scaled by 1 / live as node/core_ps scales it; a worker takes the model as soon as its own
 * update is applied, as the server's reply carries it), gives the test loss of every version the
 * run evaluated. docs/simulation.md compares emulated and simulated ASP runs version by version
 * with this replay. */
#define ASP_ORDER_N 300
Test(simulate, asp_training_replayed_from_its_order, .timeout = 120)
{
	static const char run[] = "tests/data/asp_order";
	const char *names[8] = { "worker0", "worker1", "worker2", "worker3",
				 "worker4", "worker5", "worker6", "worker7" };
	char path[600], err[512];
	struct scenario *sc;
	struct sim_train *tr;
	struct eval_rows emu;
	struct table *srv;
	int order[ASP_ORDER_N], live[ASP_ORDER_N];
	size_t matched = 0, e = 0;

	if (access("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", R_OK) != 0)
		cr_skip_test("needs the data set");
	for (size_t i = 0; i < ASP_ORDER_N; i++)
		order[i] = live[i] = -1;
	/* the order, from the workers' traces; the live count at each update, from the server's */
	for (int w = 0; w < 8; w++) {
		struct table *t;

		snprintf(path, sizeof path, "%s/nodes/worker%d.csv", run, w);
		t = table_load(path, &(bool){ false }, err, sizeof err);
		cr_assert_not_null(t, "%s", err);
		for (size_t r = 0; r < table_rows(t); r++) {
			double v = table_double_or(t, r, (size_t)table_col(t, "model_version"), -1);
			double st = table_double_or(t, r, (size_t)table_col(t, "staleness"), -1);
			size_t pos = (size_t)(v + st);

			cr_assert(v >= 0 && st >= 0 && pos < ASP_ORDER_N, "worker%d row %zu", w, r);
			cr_assert_eq(order[pos], -1, "two updates at %zu", pos);
			order[pos] = w;
		}
		table_destroy(&t);
	}
	snprintf(path, sizeof path, "%s/nodes/server0.csv", run);
	srv = table_load(path, &(bool){ false }, err, sizeof err);
	cr_assert_not_null(srv, "%s", err);
	for (size_t r = 0; r < table_rows(srv); r++) {
		double v = table_double_or(srv, r, (size_t)table_col(srv, "model_version"), -1);

		if (v >= 1 && v <= ASP_ORDER_N)
			live[(size_t)v - 1] = (int)table_double_or(srv, r, (size_t)table_col(srv, "live"), -1);
	}
	table_destroy(&srv);
	snprintf(path, sizeof path, "%s/scenario.yaml", run);
	sc = scenario_load_with(path, NULL, 0, err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	snprintf(path, sizeof path, "%s/eval.csv", run);
	eval_rows(path, &emu);
	tr = sim_train_new(sc, 8, sc->seed, NULL, names, err, sizeof err);
	cr_assert_not_null(tr, "%s", err);
	for (uint32_t w = 0; w < 8; w++)
		cr_assert_eq(sim_train_take(tr, w), 0);
	for (size_t p = 0; p <= ASP_ORDER_N; p++) {
		double loss;

		for (; e < emu.n && emu.version[e] <= (double)p; e++) {
			struct eval_result test, train;

			if (emu.version[e] != (double)p)
				continue;
			cr_assert_eq(sim_train_eval(tr, &test, &train), 0);
			cr_assert_float_eq(test.loss, emu.loss[e], 2e-6, "version %zu: test loss %.6f replayed, %.6f emulated",
					   p, test.loss, emu.loss[e]);
			matched++;
		}
		if (p == ASP_ORDER_N)
			break;
		cr_assert(order[p] >= 0 && live[p] > 0, "update %zu: worker %d, live %d", p + 1, order[p], live[p]);
		cr_assert_eq(sim_train_apply(tr, (uint32_t)order[p], 1.0 / live[p], &loss), 0);
		cr_assert_eq(sim_train_take(tr, (uint32_t)order[p]), 0);
	}
	/* the run evaluated every 2 s: versions 0, 23, 57, ..., 280 */
	cr_assert_geq(matched, 12, "only %zu evaluations replayed", matched);
	sim_train_destroy(&tr);
	scenario_destroy(&sc);
}

Test(simulate, bad_input_exit_2, .timeout = 60)
{
	char dir[256], yaml[300];

	if (access(bin(), X_OK) != 0)
		cr_skip_test("needs %s", bin());
	support_tmpdir(dir, sizeof dir, "simulate");
	snprintf(yaml, sizeof yaml, "%s/s.yaml", dir);
	support_write_file(yaml, "stop: {time: 10s}\nworkers: 4\nsimulation:\n  rto_min: soon\n");
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s/o' 2>'%s/err'; test $? = 2", bin(), yaml, dir, dir), 0);
	cr_assert_eq(support_sh("grep -q 's.yaml:4:12: error: simulation.rto_min' '%s/err'", dir), 0);
	support_rm_rf(dir);
}

/* A p2p scenario through the CLI: BSP, and pBSP over every other peer (the same seed: one run
 * each), the run directories in the emulator's p2p schema, BSP in lockstep, pBSP(N-1) the same
 * run as BSP byte for byte, the summary and the figures; the scenario as an allreduce beside. */
#define P2P_SCENARIO                                                                             \
	"name: simp2p\nseed: 7\nstop: {time: 30s}\nmodel: {kind: softmax}\ntopology: {kind: p2p}\n" \
	"consistency: {barrier: bsp, sample: 3, fanout: 1}\nworkers: 4\nlinkcheck: off\n"         \
	"network: {default: {delay: 5ms, jitter: 1ms, loss: 0.5%}}\n"                               \
	"stragglers:\n  - {nodes: workers, compute: {delay: {dist: exponential, mean: 50ms}}}\n"    \
	"  - {nodes: peer3, compute: {slowdown: 2}}\n"                                              \
	"simulation: {train: none, step_cost: 2ms, server_cost: 1us}\n"

static double summary_cell(const char *out, const char *col)
{
	char path[700], err[512];
	struct table *t;
	bool missing;
	double v;

	snprintf(path, sizeof path, "%s/summary.csv", out);
	t = table_load(path, &missing, err, sizeof err);
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(table_rows(t), 1, "%s", path);
	cr_assert_geq(table_col(t, col), 0, "no column %s", col);
	v = table_double_or(t, 0, (size_t)table_col(t, col), -1);
	table_destroy(&t);
	return v;
}

Test(simulate, p2p_run_directory, .timeout = 120)
{
	char dir[256], yaml[300], a_dir[400], b_dir[400], path[700], err[512];
	char *meta;
	double lo, hi;

	if (access(bin(), X_OK) != 0)
		cr_skip_test("needs %s", bin());
	support_tmpdir(dir, sizeof dir, "simulate");
	snprintf(yaml, sizeof yaml, "%s/p.yaml", dir);
	snprintf(a_dir, sizeof a_dir, "%s/bsp", dir);
	snprintf(b_dir, sizeof b_dir, "%s/pbsp", dir);
	support_write_file(yaml, P2P_SCENARIO);
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s' --plot --quiet 2>'%s/log'", bin(), yaml, a_dir, dir), 0);
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s' --quiet --set consistency.barrier=pbsp 2>>'%s/log'",
				bin(), yaml, b_dir, dir), 0);
	snprintf(path, sizeof path, "%s/meta.json", a_dir);
	meta = support_slurp(path, NULL);
	cr_assert_not_null(strstr(meta, "\"mode\": \"simulation\""), "%s", meta);
	cr_assert_not_null(strstr(meta, "\"status\": \"complete\""), "%s", meta);
	free(meta);
	cr_assert_eq(trace_schema_check_dir(a_dir, err, sizeof err), 0, "%s", err);
	cr_assert_eq(trace_schema_check_dir(b_dir, err, sizeof err), 0, "%s", err);
	lo = summary_cell(a_dir, "steps_min");
	hi = summary_cell(a_dir, "steps_max");
	cr_assert_gt(lo, 50, "BSP steps %g", lo);
	cr_assert_leq(hi - lo, 1, "BSP spread %g..%g", lo, hi);
	cr_assert_gt(summary_cell(a_dir, "wait_fraction"), 0.2, "BSP waits for the slow peer");
	/* pbsp with sample 3 of 4 peers checks every other peer: BSP's run, byte for byte */
	cr_assert_eq(summary_cell(b_dir, "total_steps"), summary_cell(a_dir, "total_steps"));
	for (int k = 0; k < 4; k++) {
		cr_assert_eq(support_sh("cmp -s '%s/nodes/peer%d.csv' '%s/nodes/peer%d.csv'", a_dir, k, b_dir, k), 0,
			     "peer%d's trace differs between BSP and pBSP(3)", k);
	}
	cr_assert_eq(support_sh("cmp -s '%s/progress.csv' '%s/progress.csv'", a_dir, b_dir), 0);
	snprintf(path, sizeof path, "%s/plots/steps_cdf.png", a_dir);
	cr_assert_eq(access(path, R_OK), 0, "no steps_cdf figure");
	/* all-reduce: every node ends on the same step */
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s/ar' --quiet --set topology.kind=allreduce "
				"2>>'%s/log'", bin(), yaml, dir, dir), 0);
	snprintf(path, sizeof path, "%s/ar", dir);
	cr_assert_gt(summary_cell(path, "steps_min"), 50);
	cr_assert_eq(summary_cell(path, "steps_min"), summary_cell(path, "steps_max"));
	cr_assert_eq(summary_cell(path, "staleness_mean"), 0);
	support_rm_rf(dir);
}

/* --out takes a new directory or the earlier attempt of these very runs (resume): a directory
 * holding runs of another scenario (another --set, a sweep where one run was, one run where a
 * sweep was, a sweep of other points) is refused with exit 2, and nothing in it changes, so no
 * summary.csv mixes rows of two scenarios. */
#define SMALL_SCENARIO                                                                           \
	"name: simout\nseed: 3\nstop: {time: 5s}\nmodel: {kind: softmax}\nworkers: 4\n"          \
	"linkcheck: off\nnetwork: {default: {delay: 5ms}}\n"                                      \
	"simulation: {train: none, step_cost: 2ms, server_cost: 20us}\n"

static size_t summary_rows(const char *out)
{
	char path[700], err[512];
	struct table *t;
	bool missing;
	size_t n;

	snprintf(path, sizeof path, "%s/summary.csv", out);
	t = table_load(path, &missing, err, sizeof err);
	cr_assert_not_null(t, "%s", err);
	n = table_rows(t);
	table_destroy(&t);
	return n;
}

Test(simulate, out_dir_of_other_runs_is_refused, .timeout = 120)
{
	char dir[256], yaml[300], one[300], sweep[300], path[700];
	char *before, *after;

	if (access(bin(), X_OK) != 0)
		cr_skip_test("needs %s", bin());
	support_tmpdir(dir, sizeof dir, "simulate");
	snprintf(yaml, sizeof yaml, "%s/s.yaml", dir);
	snprintf(one, sizeof one, "%s/one", dir);
	snprintf(sweep, sizeof sweep, "%s/sweep", dir);
	support_write_file(yaml, SMALL_SCENARIO);
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s' --quiet 2>'%s/log'", bin(), yaml, one, dir), 0);
	cr_assert_eq(summary_rows(one), 1);
	snprintf(path, sizeof path, "%s/summary.csv", one);
	before = support_slurp(path, NULL);
	/* the same scenario again: a resume, nothing to do */
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s' 2>'%s/log'", bin(), yaml, one, dir), 0);
	cr_assert_eq(support_sh("grep -q '0 simulation(s) done, 1 skipped' '%s/log'", dir), 0);
	/* another scenario into the complete run: it was taken as done ("skipped") */
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s' --quiet --set workers=8 2>'%s/log'; test $? = 2",
				bin(), yaml, one, dir), 0, "another scenario taken into %s", one);
	cr_assert_eq(support_sh("grep -q 'not a resume' '%s/log'", dir), 0);
	/* a sweep into the run: its runs and rows were mixed into the run's directory */
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s' --quiet --set 'sweep.workers=[2, 3]' 2>'%s/log'; "
				"test $? = 2", bin(), yaml, one, dir), 0, "a sweep taken into the run %s", one);
	cr_assert_eq(support_sh("grep -q 'not a resume' '%s/log'", dir), 0);
	snprintf(path, sizeof path, "%s/workers=2+rep=1", one);
	cr_assert_neq(access(path, F_OK), 0, "a sweep run was made in %s", one);
	snprintf(path, sizeof path, "%s/summary.csv", one);
	after = support_slurp(path, NULL);
	cr_assert_str_eq(after, before, "the run's summary.csv changed");
	free(before);
	free(after);
	/* a sweep; then one run into it, and a sweep of other points */
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s' --quiet --set 'sweep.workers=[2, 3]' 2>'%s/log'",
				bin(), yaml, sweep, dir), 0);
	cr_assert_eq(summary_rows(sweep), 2);
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s' --quiet 2>'%s/log'; test $? = 2", bin(), yaml, sweep, dir),
		     0, "one run taken into the sweep %s", sweep);
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s' --quiet --set 'sweep.workers=[2, 5]' 2>'%s/log'; "
				"test $? = 2", bin(), yaml, sweep, dir), 0, "other points taken into the sweep");
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s' --quiet --set 'sweep.workers=[2, 3]' --set seed=4 "
				"2>'%s/log'; test $? = 2", bin(), yaml, sweep, dir), 0, "another seed taken into the sweep");
	cr_assert_eq(summary_rows(sweep), 2, "the sweep's summary.csv changed");
	snprintf(path, sizeof path, "%s/meta.json", sweep);
	cr_assert_neq(access(path, F_OK), 0, "a run was written at the top of the sweep");
	snprintf(path, sizeof path, "%s/workers=5+rep=1", sweep);
	cr_assert_neq(access(path, F_OK), 0, "a foreign sweep point was run in the sweep");
	/* and the sweep itself resumes: an incomplete run is run again, complete ones skipped */
	snprintf(path, sizeof path, "%s/workers=3+rep=1/complete", sweep);
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(support_sh("%s simulate '%s' --out '%s' --set 'sweep.workers=[2, 3]' 2>'%s/log'", bin(), yaml,
				sweep, dir), 0);
	cr_assert_eq(support_sh("grep -q '1 simulation(s) done, 1 skipped' '%s/log'", dir), 0);
	cr_assert_eq(summary_rows(sweep), 2, "the run done again has one row, not two");
	/* an emulated run of the same scenario is no earlier attempt of a simulation */
	cr_assert_eq(support_sh("sed -i 's/\"mode\": \"simulation\"/\"mode\": \"\"/' '%s/meta.json' && "
				"%s simulate '%s' --out '%s' --quiet 2>'%s/log'; test $? = 2", one, bin(), yaml, one, dir), 0);
	cr_assert_eq(support_sh("grep -q 'an emulated attempt' '%s/log'", dir), 0);
	support_rm_rf(dir);
}
