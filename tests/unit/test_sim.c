/* sim/sim: the simulator holds the emulator's invariants, is deterministic, and its scenario
 * settings are validated.
 *   BSP       at every progress sample the spread of the workers' clocks is at most 1 (a
 *             round in flight), and every worker ends within one step of the others
 *   SSP(s)    the spread never exceeds s + 1
 *   ASP       nobody ever waits (wait_s 0 in every row, progress waiting 0)
 *   pBSP(0)   is ASP: the same trace files, byte for byte
 *   pBSP(N-1) is BSP: the same steps, waits and progress, sample for sample
 *   draw      pBSP/pSSP run with a sample per check (the default) by the tests above; with a
 *             sample per crossing pBSP(0) is ASP and pBSP(N-1) BSP too, and per check holds
 *             less than per crossing (its workers get further, wait less)
 *   determinism  the same scenario and seed give byte-identical files
 *   draws     a worker's straggler delays are its emulated worker's (node/straggler's stream,
 *             in step order); simulation.seed changes the simulator's own draws only
 *   errors    bad simulation: values get FILE:LINE:COL messages at the value
 *   blackout  a worker cut off for 5 s (timeline loss 100%) pushes again at the first
 *             retransmission of TCP's backoff schedule after its link is back */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectors/schema.h"
#include "collectors/summary.h"
#include "collectors/table.h"
#include "orchestrator/plan.h"
#include "orchestrator/scenario.h"
#include "node/straggler.h"
#include "sim/sim.h"
#include "tests/support/files.h"
#include "tests/support/simrun.h"

/* A small PS scenario: n workers with exponential step times, a lossy jittery link on one. */
static struct scenario *scen(const char *barrier, unsigned n, unsigned sample, unsigned staleness,
			     const char *extra)
{
	char buf[4096], err[SCENARIO_ERR_MAX];
	struct scenario *sc;

	snprintf(buf, sizeof buf,
		 "name: t\nseed: 11\nstop: {time: 30s}\nmodel: {kind: softmax}\n"
		 "consistency: {barrier: %s, staleness: %u, sample: %u}\nworkers: %u\nlinkcheck: off\n"
		 "network:\n  default: {delay: 2ms, jitter: 1ms, rate: 100mbit}\n"
		 "  links:\n    - {nodes: worker1, delay: 20ms, loss: 2%%}\n"
		 "stragglers:\n  - {nodes: workers, compute: {delay: {dist: exponential, mean: 100ms}}}\n"
		 "  - {nodes: worker2, compute: {slowdown: 3}}\n"
		 "simulation: {train: none, step_cost: 5ms, server_cost: 50us, node_files: 64}\n%s",
		 barrier, staleness, sample, n, extra ? extra : "");
	sc = scenario_parse(buf, strlen(buf), "t.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	return sc;
}

/* Simulate sc into dir (created), results in *res; from a compact plan (as `stalenet simulate`)
 * or a full one. */
static void simulate_plan(const struct scenario *sc, const char *dir, struct sim_result *res, bool compact)
{
	char err[512], path[600];
	struct plan *p = compact ? plan_new_compact(sc, err, sizeof err) : plan_new(sc, err, sizeof err);
	struct sim_opts o;
	int rc;

	cr_assert_not_null(p, "%s", err);
	snprintf(path, sizeof path, "%s/nodes", dir);
	support_mkdirs(path);
	o = (struct sim_opts){ .run = plan_run(p, 0), .dir = dir,
			       .step_cost_ns = (int64_t)sc->simulation.step_cost_us * 1000,
			       .server_cost_ns = (int64_t)sc->simulation.server_cost_us * 1000 };
	rc = sim_run(&o, res, err, sizeof err);
	cr_assert_eq(rc, 0, "sim_run: %s", err);
	plan_destroy(&p);
}

static void simulate(const struct scenario *sc, const char *dir, struct sim_result *res)
{
	simulate_plan(sc, dir, res, false);
}

static double cell(const struct table *t, size_t r, const char *col)
{
	double v = NAN;
	int c = table_col(t, col);

	cr_assert_geq(c, 0, "no column %s", col);
	table_double(t, r, (size_t)c, &v);
	return v;
}

/* max over progress samples of (max_step - min_step); *waited = any sample with waiting > 0 */
static double max_spread(const char *dir, bool *waited)
{
	struct table *t = support_load_table(dir, "progress.csv");
	double m = 0;

	*waited = false;
	cr_assert_gt(table_rows(t), 250);
	for (size_t r = 0; r < table_rows(t); r++) {
		double s = cell(t, r, "max_step") - cell(t, r, "min_step");

		m = s > m ? s : m;
		*waited |= cell(t, r, "waiting") > 0;
	}
	table_destroy(&t);
	return m;
}

Test(sim, bsp_spread_at_most_one_round, .timeout = 60)
{
	char dir[256], err[512];
	struct scenario *sc = scen("bsp", 6, 2, 0, NULL);
	struct sim_result r;
	bool waited;

	support_tmpdir(dir, sizeof dir, "sim");
	simulate(sc, dir, &r);
	cr_assert_leq(r.steps_max - r.steps_min, 1);
	cr_assert_gt(r.steps_min, 20, "steps %g", r.steps_min);
	cr_assert_leq(max_spread(dir, &waited), 1);
	cr_assert(waited);
	cr_assert_gt(r.wait_fraction, 0.2);
	cr_assert_eq(r.staleness_mean, 0);
	cr_assert_eq(trace_schema_check_dir(dir, err, sizeof err), 0, "%s", err);
	scenario_destroy(&sc);
	support_rm_rf(dir);
}

Test(sim, ssp_bound, .timeout = 60)
{
	char dir[256];
	struct sim_result r;
	bool waited;

	for (unsigned s = 0; s <= 3; s++) {
		struct scenario *sc = scen("ssp", 6, 2, s, NULL);
		double spread;

		support_tmpdir(dir, sizeof dir, "sim");
		simulate(sc, dir, &r);
		spread = max_spread(dir, &waited);
		cr_assert_leq(spread, s + 1, "SSP(%u): spread %g", s, spread);
		cr_assert(waited, "SSP(%u) never held anybody (slowdown 3 on worker2)", s);
		scenario_destroy(&sc);
		support_rm_rf(dir);
	}
}

Test(sim, asp_never_waits, .timeout = 60)
{
	char dir[256];
	struct scenario *sc = scen("asp", 6, 2, 0, NULL);
	struct sim_result r;
	struct table *t;
	bool waited;

	support_tmpdir(dir, sizeof dir, "sim");
	simulate(sc, dir, &r);
	max_spread(dir, &waited);
	cr_assert_not(waited);
	cr_assert_eq(r.wait_fraction, 0);
	t = support_load_table(dir, "nodes/worker3.csv");
	cr_assert_gt(table_rows(t), 50);
	for (size_t i = 0; i < table_rows(t); i++)
		cr_assert_eq(cell(t, i, "wait_s"), 0);
	table_destroy(&t);
	/* the slowed worker falls far behind: nothing holds the others back */
	cr_assert_gt(r.steps_max - r.steps_min, 20);
	scenario_destroy(&sc);
	support_rm_rf(dir);
}

Test(sim, pbsp0_is_asp, .timeout = 60)
{
	char a[256], b[256];
	struct scenario *x = scen("asp", 5, 0, 0, NULL), *y = scen("pbsp", 5, 0, 0, NULL);
	struct sim_result ra, rb;
	static const char *const files[] = { "progress.csv", "workers.csv", "nodes/worker0.csv",
					     "nodes/worker1.csv", "nodes/worker4.csv" };

	support_tmpdir(a, sizeof a, "sim");
	support_tmpdir(b, sizeof b, "sim");
	simulate(x, a, &ra);
	simulate(y, b, &rb);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		cr_assert(support_same_file(a, b, files[i]), "%s differs", files[i]);
	cr_assert_eq(ra.events, rb.events);
	scenario_destroy(&x);
	scenario_destroy(&y);
	support_rm_rf(a);
	support_rm_rf(b);
}

Test(sim, pbsp_all_is_bsp, .timeout = 60)
{
	char a[256], b[256];
	struct scenario *x = scen("bsp", 5, 4, 0, NULL), *y = scen("pbsp", 5, 4, 0, NULL);
	struct sim_result ra, rb;
	struct table *ta, *tb;

	support_tmpdir(a, sizeof a, "sim");
	support_tmpdir(b, sizeof b, "sim");
	simulate(x, a, &ra);
	simulate(y, b, &rb);
	cr_assert(support_same_file(a, b, "progress.csv"), "progress.csv differs");
	ta = support_load_table(a, "workers.csv");
	tb = support_load_table(b, "workers.csv");
	cr_assert_eq(table_rows(ta), 5);
	cr_assert_eq(table_rows(tb), 5);
	for (size_t i = 0; i < 5; i++) {
		cr_assert_eq(cell(ta, i, "final_step"), cell(tb, i, "final_step"));
		cr_assert_eq(cell(ta, i, "wait_s"), cell(tb, i, "wait_s"));
		cr_assert_eq(cell(ta, i, "compute_s"), cell(tb, i, "compute_s"));
	}
	table_destroy(&ta);
	table_destroy(&tb);
	cr_assert_eq(ra.steps_median, rb.steps_median);
	scenario_destroy(&x);
	scenario_destroy(&y);
	support_rm_rf(a);
	support_rm_rf(b);
}

Test(sim, draw_rules, .timeout = 60)
{
	char a[256], b[256], c[256];
	/* the barrier string carries the key into the consistency mapping */
	struct scenario *asp = scen("asp", 5, 0, 0, NULL), *bsp = scen("bsp", 5, 4, 0, NULL);
	struct scenario *p0 = scen("pbsp, draw: crossing", 5, 0, 0, NULL);
	struct scenario *pall = scen("pbsp, draw: crossing", 5, 4, 0, NULL);
	struct scenario *cross = scen("pbsp, draw: crossing", 16, 3, 0, NULL);
	struct scenario *check = scen("pbsp, draw: check", 16, 3, 0, NULL);
	struct sim_result ra, rb, rc;

	cr_assert_eq(p0->consistency.draw, SCENARIO_DRAW_CROSSING);
	cr_assert_eq(check->consistency.draw, SCENARIO_DRAW_CHECK);
	support_tmpdir(a, sizeof a, "sim");
	support_tmpdir(b, sizeof b, "sim");
	support_tmpdir(c, sizeof c, "sim");
	simulate(asp, a, &ra);
	simulate(p0, b, &rb);
	cr_assert(support_same_file(a, b, "workers.csv") && support_same_file(a, b, "progress.csv"),
		  "pBSP(0) per crossing is not ASP");
	/* fresh directories: a run's files are not meant to be written over */
	support_rm_rf(a);
	support_rm_rf(c);
	support_tmpdir(a, sizeof a, "sim");
	support_tmpdir(c, sizeof c, "sim");
	simulate(bsp, a, &ra);
	simulate(pall, c, &rc);
	cr_assert(support_same_file(a, c, "progress.csv"), "pBSP(N-1) per crossing is not BSP");
	support_rm_rf(b);
	support_rm_rf(c);
	support_tmpdir(b, sizeof b, "sim");
	support_tmpdir(c, sizeof c, "sim");
	simulate(cross, b, &rb);
	simulate(check, c, &rc);
	cr_assert_gt(rc.steps_median, rb.steps_median + 5, "check %.1f, crossing %.1f",
		     rc.steps_median, rb.steps_median);
	cr_assert_lt(rc.wait_fraction, rb.wait_fraction);
	scenario_destroy(&asp);
	scenario_destroy(&bsp);
	scenario_destroy(&p0);
	scenario_destroy(&pall);
	scenario_destroy(&cross);
	scenario_destroy(&check);
	support_rm_rf(a);
	support_rm_rf(b);
	support_rm_rf(c);
}

/* Memory: at most 200 bytes per simulated worker without training (what the simulation holds
 * at its end, by malloc's count) for every barrier, pBSP/pSSP with a sample per check (their
 * default) and per crossing; 5,000 workers for 20 simulated seconds (the fixed costs, the
 * actions' first room among them, are then 10 bytes per worker or less). */
Test(sim, memory_per_worker, .timeout = 60)
{
	static const char *const barriers[] = { "bsp", "ssp", "asp", "pbsp", "pssp",
						"pbsp, draw: crossing", "pssp, draw: crossing" };

	for (size_t k = 0; k < sizeof barriers / sizeof barriers[0]; k++) {
		char buf[1024], err[SCENARIO_ERR_MAX], dir[256];
		struct scenario *sc;
		struct sim_result r;

		snprintf(buf, sizeof buf,
			 "name: m\nseed: 3\nstop: {time: 20s}\nmodel: {kind: softmax}\n"
			 "consistency: {barrier: %s, staleness: 4, sample: 10}\nworkers: 5000\n"
			 "linkcheck: off\nnetwork: {default: {delay: 1ms}}\n"
			 "stragglers:\n  - {nodes: workers, compute: {delay: {dist: exponential, mean: 499ms}}}\n"
			 "simulation: {train: none, step_cost: 1ms, server_cost: 20us, node_files: 0}\n",
			 barriers[k]);
		sc = scenario_parse(buf, strlen(buf), "m.yaml", err, sizeof err);
		cr_assert_not_null(sc, "%s", err);
		support_tmpdir(dir, sizeof dir, "sim");
		simulate(sc, dir, &r);
		cr_assert_gt(r.held_bytes, 5000u * 60, "%s: %zu bytes held", barriers[k], r.held_bytes);
		cr_assert_leq(r.held_bytes, 5000u * 200, "%s: %.1f bytes per worker", barriers[k],
			      r.held_bytes / 5000.0);
		scenario_destroy(&sc);
		support_rm_rf(dir);
	}
}

Test(sim, deterministic, .timeout = 60)
{
	char a[256], b[256];
	struct scenario *sc = scen("pssp", 12, 3, 2,
				   "  # churn\n");
	struct sim_result ra, rb;
	static const char *const files[] = { "progress.csv", "workers.csv", "nodes/worker0.csv",
					     "nodes/worker1.csv", "nodes/worker11.csv" };

	support_tmpdir(a, sizeof a, "sim");
	support_tmpdir(b, sizeof b, "sim");
	simulate(sc, a, &ra);
	simulate(sc, b, &rb);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		cr_assert(support_same_file(a, b, files[i]), "%s differs", files[i]);
	cr_assert_eq(ra.events, rb.events);
	scenario_destroy(&sc);
	support_rm_rf(a);
	support_rm_rf(b);
}

Test(sim, churn_crash_restart_late_join_leave, .timeout = 60)
{
	char dir[256];
	struct scenario *sc = scen("ssp", 6, 2, 2,
				   "  # (stragglers below are merged in order)\n");
	struct sim_result r;
	struct table *t;
	char buf[4096], err[SCENARIO_ERR_MAX];

	scenario_destroy(&sc);
	snprintf(buf, sizeof buf,
		 "name: t\nseed: 5\nstop: {time: 30s}\nconsistency: {barrier: ssp, staleness: 2}\nworkers: 6\n"
		 "linkcheck: off\nnetwork: {default: {delay: 1ms}}\n"
		 "stragglers:\n  - {nodes: workers, compute: {delay: {dist: exponential, mean: 100ms}}}\n"
		 "  - {nodes: worker1, crash: {at: 5s, restart: 10s}}\n"
		 "  - {nodes: worker2, join: {at: 8s}}\n  - {nodes: worker3, leave: {at: 12s}}\n"
		 "simulation: {step_cost: 5ms, server_cost: 50us}\n");
	sc = scenario_parse(buf, strlen(buf), "c.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	support_tmpdir(dir, sizeof dir, "sim");
	simulate(sc, dir, &r);
	t = support_load_table(dir, "workers.csv");
	/* the others went on without the crashed worker and the one that left, and were not held
	 * for ever by the late one: about 30 s / 105 ms */
	cr_assert_gt(cell(t, 0, "final_step"), 200);
	/* worker3 left at 12 s: about 12 s worth of steps */
	cr_assert_lt(cell(t, 3, "final_step"), 0.6 * cell(t, 0, "final_step"));
	/* the late joiner resumed at the slowest clock, so it is within the SSP bound at the end */
	cr_assert_geq(cell(t, 2, "final_step"), cell(t, 0, "final_step") - 4);
	cr_assert_geq(cell(t, 1, "final_step"), cell(t, 0, "final_step") - 4);
	table_destroy(&t);
	scenario_destroy(&sc);
	support_rm_rf(dir);
}

Test(sim, many_workers_use_workers_csv, .timeout = 60)
{
	char dir[256], path[300];
	struct scenario *sc = scen("pbsp", 100, 5, 0, "");
	struct sim_result r;
	struct table *t;

	cr_assert_eq(scenario_set(sc, "simulation.node_files=10", path, sizeof path), 0, "%s", path);
	support_tmpdir(dir, sizeof dir, "sim");
	simulate(sc, dir, &r);
	snprintf(path, sizeof path, "%s/nodes/worker0.csv", dir);
	cr_assert_neq(access(path, F_OK), 0, "100 workers > node_files 10: no per-worker trace");
	t = support_load_table(dir, "workers.csv");
	cr_assert_eq(table_rows(t), 100);
	cr_assert_eq(r.workers, 100);
	table_destroy(&t);
	/* the summary is rebuilt from workers.csv (steps and wait; staleness is not in it) */
	{
		char err[512], meta[400];
		struct summary_row row;

		snprintf(meta, sizeof meta, "%s/meta.json", dir);
		support_write_file(meta, "{\"run_id\": \"r\", \"status\": \"complete\"}\n");
		cr_assert_eq(summary_compute(dir, &row, err, sizeof err), 0, "%s", err);
		cr_assert_eq(row.workers, 100);
		cr_assert_eq(row.steps_median, r.steps_median);
		cr_assert_eq(row.steps_min, r.steps_min);
		cr_assert_eq(row.total_steps, r.total_steps);
		cr_assert_lt(fabs(row.wait_fraction - r.wait_fraction), 1e-4);
		cr_assert(isnan(row.staleness_mean));
	}
	scenario_destroy(&sc);
	support_rm_rf(dir);
}

Test(sim, model_averaging_rounds, .timeout = 60)
{
	char dir[256], buf[2048], err[SCENARIO_ERR_MAX];
	struct scenario *sc;
	struct sim_result r;
	struct table *t;
	size_t waits = 0;

	support_tmpdir(dir, sizeof dir, "sim");
	snprintf(buf, sizeof buf,
		 "stop: {time: 30s}\nconsistency: {barrier: bsp, local_steps: 4}\nworkers: 5\nlinkcheck: off\n"
		 "network: {default: {delay: 2ms}}\n"
		 "stragglers:\n  - {nodes: workers, compute: {delay: {dist: exponential, mean: 50ms}}}\n"
		 "simulation: {step_cost: 1ms, server_cost: 10us}\n");
	sc = scenario_parse(buf, strlen(buf), "t.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	simulate(sc, dir, &r);
	/* a round is 4 local steps; BSP holds every worker to the same round */
	cr_assert_gt(r.steps_min, 40);
	cr_assert_leq(r.steps_max - r.steps_min, 4);
	t = support_load_table(dir, "nodes/worker2.csv");
	for (size_t i = 0; i < table_rows(t); i++) {
		double step = cell(t, i, "step");
		bool push = fmod(step, 4) == 0;

		/* only a round's first step waits, only its last moves the models */
		if (cell(t, i, "wait_s") > 0) {
			cr_assert_eq(fmod(step, 4), 1, "step %g waited", step);
			waits++;
		}
		cr_assert_eq(cell(t, i, "bytes_tx") > 0, push, "step %g", step);
	}
	cr_assert_gt(waits, 5);
	table_destroy(&t);
	scenario_destroy(&sc);
	support_rm_rf(dir);
}

Test(sim, compute_trace_replayed, .timeout = 60)
{
	char dir[256], trace[300], buf[2048], err[SCENARIO_ERR_MAX];
	struct scenario *sc;
	struct sim_result r;
	struct table *t;

	support_tmpdir(dir, sizeof dir, "sim");
	snprintf(trace, sizeof trace, "%s/trace.csv", dir);
	support_write_file(trace, "step,compute_s\n0,0.25\n1,0.5\n2,0.75\n");
	snprintf(buf, sizeof buf,
		 "stop: {time: 20s}\nconsistency: {barrier: asp}\nworkers: 2\nlinkcheck: off\n"
		 "stragglers:\n  - {nodes: worker0, compute: {trace: '%s', slowdown: 2}}\n"
		 "simulation: {step_cost: 10ms, server_cost: 10us}\n", trace);
	sc = scenario_parse(buf, strlen(buf), "t.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	simulate(sc, dir, &r);
	t = support_load_table(dir, "nodes/worker0.csv");
	cr_assert_gt(table_rows(t), 10);
	/* the trace's times, cyclically, stretched by the slowdown: 0.5, 1.0, 1.5, 0.5, ... */
	for (size_t i = 0; i < table_rows(t); i++)
		cr_assert_float_eq(cell(t, i, "compute_s"), 0.5 * (double)(i % 3 + 1), 1e-5, "row %zu: %g", i,
				   cell(t, i, "compute_s"));
	table_destroy(&t);
	t = support_load_table(dir, "nodes/worker1.csv");
	cr_assert_float_eq(cell(t, 0, "compute_s"), 0.01, 1e-6);
	table_destroy(&t);
	scenario_destroy(&sc);
	support_rm_rf(dir);
}

Test(sim, network_trace_changes_every_link, .timeout = 60)
{
	char dir[256], trace[300], buf[2048], err[SCENARIO_ERR_MAX];
	struct scenario *sc;
	struct sim_result r;
	struct table *t;
	double before = 0, after = 0;
	size_t nb = 0, na = 0;

	support_tmpdir(dir, sizeof dir, "sim");
	snprintf(trace, sizeof trace, "%s/net.csv", dir);
	/* 5 ms one way for 10 s, then 100 ms: a step's round trip goes from ~20 ms to ~400 ms
	 * (four link directions) */
	support_write_file(trace, "t_s,delay,loss,rate\n0,5ms,,\n10,100ms,,\n");
	snprintf(buf, sizeof buf,
		 "stop: {time: 20s}\nconsistency: {barrier: asp}\nworkers: 2\nlinkcheck: off\n"
		 "network: {default: {delay: 1ms}, trace: '%s'}\n"
		 "simulation: {step_cost: 10ms, server_cost: 10us}\n", trace);
	sc = scenario_parse(buf, strlen(buf), "t.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	simulate(sc, dir, &r);
	t = support_load_table(dir, "nodes/worker0.csv");
	for (size_t i = 1; i < table_rows(t); i++) {
		double t0 = cell(t, i - 1, "t_s"), dt = cell(t, i, "t_s") - t0;

		if (t0 > 1 && t0 < 9) {
			before += dt;
			nb++;
		} else if (t0 > 11) {
			after += dt;
			na++;
		}
	}
	table_destroy(&t);
	cr_assert_gt(nb, 50);
	cr_assert_gt(na, 5);
	cr_assert_lt(fabs(before / nb - 0.030), 0.003, "step %g s before", before / nb);
	cr_assert_lt(fabs(after / na - 0.410), 0.01, "step %g s after", after / na);
	scenario_destroy(&sc);
	support_rm_rf(dir);
}

/* --- input errors -------------------------------------------------------------------------- */

/* Every worker's delay per step is the next draw of the stream its emulated worker draws
 * from (node/straggler seeded as node/engine_common seeds it): gamma draws take a varying
 * number of uniforms, so a per-step key would not match past the first rejection. */
Test(sim, delays_from_the_emulated_stream, .timeout = 60)
{
	static const char text[] =
		"name: d\nseed: 5\nstop: {time: 30s}\nconsistency: {barrier: ssp, staleness: 1}\nworkers: 3\n"
		"linkcheck: off\nnetwork: {default: {delay: 3ms, jitter: 2ms, loss: 1%}}\n"
		"stragglers:\n  - {nodes: workers, compute: {delay: {dist: gamma, shape: 0.7, scale: 200ms}}}\n"
		"simulation: {step_cost: 1ms, server_cost: 10us}\n";
	char dir[256], path[600], err[SCENARIO_ERR_MAX];
	struct scenario *sc = scenario_parse(text, sizeof text - 1, "d.yaml", err, sizeof err);
	struct plan *p;
	struct sim_opts o;
	struct sim_result r;

	cr_assert_not_null(sc, "%s", err);
	p = plan_new(sc, err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	support_tmpdir(dir, sizeof dir, "sim");
	snprintf(path, sizeof path, "%s/nodes", dir);
	support_mkdirs(path);
	o = (struct sim_opts){ .run = plan_run(p, 0), .dir = dir, .step_cost_ns = 1000000, .server_cost_ns = 10000 };
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), 0, "%s", err);
	for (uint32_t i = 0; i < 3; i++) {
		struct straggler_params sp = { .slowdown = 1, .dist = STRAGGLER_GAMMA, .a = 0.7, .b = 0.2 };
		struct straggler *st = straggler_new(&sp, plan_run(p, 0)->seed ^ (0x9e3779b97f4a7c15ull * (i + 1)));
		struct table *t;
		char name[64];

		cr_assert_not_null(st);
		snprintf(name, sizeof name, "nodes/worker%u.csv", i);
		t = support_load_table(dir, name);
		cr_assert_gt(table_rows(t), 20, "worker%u: %zu steps", i, table_rows(t));
		for (size_t k = 0; k < table_rows(t); k++) {
			double want = 0.001 + straggler_step_extra_s(st, (int64_t)k, 0.001);

			cr_assert_float_eq(cell(t, k, "compute_s"), want, 2e-6, "worker%u step %zu: %g, the emulated "
					   "stream draws %g", i, k + 1, cell(t, k, "compute_s"), want);
		}
		table_destroy(&t);
		straggler_destroy(&st);
	}
	plan_destroy(&p);
	scenario_destroy(&sc);
	support_rm_rf(dir);
}

/* simulation.seed: 0 is the run's seed (the same files as without the key); another value
 * draws other links (other step times here) but the same straggler delays. */
Test(sim, own_seed, .timeout = 60)
{
	char d0[256], d1[256], d2[256];
	static const char base[] =
		"name: t\nseed: 11\nstop: {time: 30s}\nconsistency: {barrier: asp}\nworkers: 4\nlinkcheck: off\n"
		"network:\n  default: {delay: 2ms, jitter: 1ms}\n  links:\n    - {nodes: worker1, delay: 20ms, loss: 2%%}\n"
		"stragglers:\n  - {nodes: workers, compute: {delay: {dist: exponential, mean: 100ms}}}\n"
		"simulation: {step_cost: 5ms, server_cost: 50us%s}\n";
	char text[1024], err[SCENARIO_ERR_MAX];
	struct scenario *a, *b, *c;
	struct sim_result r;
	struct table *t0, *t2;
	size_t n, same_compute = 0, same_time = 0;

	snprintf(text, sizeof text, base, "");
	a = scenario_parse(text, strlen(text), "t.yaml", err, sizeof err);
	snprintf(text, sizeof text, base, ", seed: 0");
	b = scenario_parse(text, strlen(text), "t.yaml", err, sizeof err);
	snprintf(text, sizeof text, base, ", seed: 2");
	c = scenario_parse(text, strlen(text), "t.yaml", err, sizeof err);
	cr_assert(a && b && c, "%s", err);
	cr_assert_eq(c->simulation.seed, 2);
	support_tmpdir(d0, sizeof d0, "sim");
	support_tmpdir(d1, sizeof d1, "sim");
	support_tmpdir(d2, sizeof d2, "sim");
	simulate(a, d0, &r);
	simulate(b, d1, &r);
	simulate(c, d2, &r);
	cr_assert(support_same_file(d0, d1, "nodes/worker1.csv"), "seed 0 is the run's seed");
	t0 = support_load_table(d0, "nodes/worker1.csv");
	t2 = support_load_table(d2, "nodes/worker1.csv");
	n = table_rows(t0) < table_rows(t2) ? table_rows(t0) : table_rows(t2);
	cr_assert_gt(n, 50);
	for (size_t k = 0; k < n; k++) {
		same_compute += cell(t0, k, "compute_s") == cell(t2, k, "compute_s");
		same_time += cell(t0, k, "t_s") == cell(t2, k, "t_s");
	}
	cr_expect_eq(same_compute, n, "the delays are the emulated worker's whatever simulation.seed says");
	cr_expect_lt(same_time, n / 10, "%zu of %zu step times alike: the links drew the same", same_time, n);
	table_destroy(&t0);
	table_destroy(&t2);
	scenario_destroy(&a);
	scenario_destroy(&b);
	scenario_destroy(&c);
	support_rm_rf(d0);
	support_rm_rf(d1);
	support_rm_rf(d2);
}

static void bad(const char *sim, const char *want_pos, const char *want)
{
	char buf[2048], err[SCENARIO_ERR_MAX];
	struct scenario *sc;

	snprintf(buf, sizeof buf, "stop: {time: 10s}\nworkers: 4\n%s", sim);
	sc = scenario_parse(buf, strlen(buf), "s.yaml", err, sizeof err);
	cr_assert_null(sc, "accepted: %s", sim);
	cr_assert_not_null(strstr(err, want_pos), "'%s' lacks position %s", err, want_pos);
	cr_assert_not_null(strstr(err, want), "'%s' lacks '%s'", err, want);
}

Test(sim, bad_input)
{
	bad("simulation: {trian: real}\n", "s.yaml:3:14:", "did you mean 'train'");
	bad("simulation: {train: maybe}\n", "s.yaml:3:21:", "simulation.train");
	bad("simulation:\n  step_cost: 0\n", "s.yaml:4:14:", "simulation.step_cost is 0");
	bad("simulation:\n  step_cost: fast\n", "s.yaml:4:14:", "simulation.step_cost");
	bad("simulation:\n  server_cost: -1ms\n", "s.yaml:4:16:", "simulation.server_cost");
	bad("simulation:\n  rto_min: 10us\n", "s.yaml:4:12:", "below 1ms");
	bad("simulation:\n  mss: 10\n", "s.yaml:4:8:", "out of range");
	bad("simulation:\n  node_files: 5000\n", "s.yaml:4:15:", "out of range");
	bad("simulation: [none]\n", "s.yaml:3:13:", "simulation");
	bad("simulation:\n  seed: -1\n", "s.yaml:4:9:", "simulation.seed");
	bad("simulation:\n  seed: 2000000\n", "s.yaml:4:9:", "out of range");
	/* without a simulation: section the emulation limit holds */
	{
		char err[SCENARIO_ERR_MAX];
		const char *t = "stop: {time: 10s}\nworkers: 5000\n";
		struct scenario *sc = scenario_parse(t, strlen(t), "w.yaml", err, sizeof err);

		cr_assert_null(sc);
		cr_assert_not_null(strstr(err, "w.yaml:2:10:"), "%s", err);
		t = "stop: {time: 10s}\nworkers: 5000\nsimulation: {}\n";
		sc = scenario_parse(t, strlen(t), "w.yaml", err, sizeof err);
		cr_assert_not_null(sc, "%s", err);
		cr_assert_eq(sc->workers, 5000);
		cr_assert_eq(sc->simulation.rto_min_us, 200000);
		cr_assert_eq(sc->simulation.mss, 1448);
		cr_assert_eq(sc->simulation.node_files, 64);
		cr_assert_eq(sc->simulation.train, SCENARIO_SIM_TRAIN_NONE);
		scenario_destroy(&sc);
		t = "stop: {time: 10s}\nworkers: 300000\nsimulation: {}\n";
		sc = scenario_parse(t, strlen(t), "w.yaml", err, sizeof err);
		cr_assert_null(sc);
		cr_assert_not_null(strstr(err, "w.yaml:2:10:"), "%s", err);
	}
}

Test(sim, unsupported_is_named)
{
	char buf[512], err[512];
	struct scenario *sc;
	struct plan *p;
	struct sim_opts o;
	struct sim_result r;

	snprintf(buf, sizeof buf, "stop: {time: 10s}\nworkers: 4\ntopology: {kind: fleet}\n"
				  "linkcheck: off\nsimulation: {}\n");
	sc = scenario_parse(buf, strlen(buf), "p.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	p = plan_new(sc, err, sizeof err);
	cr_assert_not_null(p);
	o = (struct sim_opts){ .run = plan_run(p, 0), .step_cost_ns = 1000000 };
	cr_assert_eq(sim_run(&o, &r, err, sizeof err), -EINVAL);
	cr_assert_not_null(strstr(err, "fleet"), "%s", err);
	plan_destroy(&p);
	scenario_destroy(&sc);
}

/* A compact plan (shared profiles, generated names) simulates byte for byte as the full one. */
Test(sim, compact_plan_same_outputs, .timeout = 60)
{
	char a[256], b[256];
	struct scenario *sc = scen("pssp", 12, 3, 2, NULL);
	struct sim_result ra, rb;
	static const char *const files[] = { "progress.csv", "workers.csv", "nodes/worker0.csv",
					     "nodes/worker1.csv", "nodes/worker2.csv", "nodes/worker11.csv" };

	support_tmpdir(a, sizeof a, "sim");
	support_tmpdir(b, sizeof b, "sim");
	simulate_plan(sc, a, &ra, false);
	simulate_plan(sc, b, &rb, true);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		cr_assert(support_same_file(a, b, files[i]), "%s differs", files[i]);
	cr_assert_eq(ra.events, rb.events);
	cr_assert_gt(ra.events, 1000);
	scenario_destroy(&sc);
	support_rm_rf(a);
	support_rm_rf(b);
}

/* worker1's links drop everything from 5 s to 10 s. The push it sends into the blackout is
 * retransmitted at t + rto (2^k - 1), rto = 8 ms + 200 ms, and the server gets it at the first
 * of those at or after 10 s: worker1's next row comes then (not ~1,000 s later, as when 100%
 * counted as 99.9999%), and BSP held worker0 meanwhile. */
Test(sim, blackout_push_arrives_at_the_first_retransmission_after, .timeout = 60)
{
	const char *text =
		"name: psblackout\nseed: 3\nstop: {time: 20s}\nmodel: {kind: softmax}\n"
		"topology: {kind: parameter-server}\nconsistency: {barrier: bsp}\nworkers: 2\nlinkcheck: off\n"
		"network:\n  default: {delay: 2ms}\n  timeline:\n"
		"    - {at: 5s, nodes: worker1, loss: 100%}\n    - {at: 10s, nodes: worker1, loss: 0%}\n"
		"simulation: {train: none, step_cost: 5ms, server_cost: 50us}\n"
		"stragglers:\n  - {nodes: workers, compute: {delay: {dist: constant, value: 20ms}}}\n";
	const double rto = 0.008 + 0.2;
	double last = -1, next = -1, expect;
	char dir[256];
	struct sim_result r;
	struct table *t;
	int k = 1;

	support_tmpdir(dir, sizeof dir, "simps");
	support_simulate_text(text, dir, &r);
	t = support_load_table(dir, "nodes/worker1.csv");
	for (size_t i = 0; i < table_rows(t) && next < 0; i++) {
		double ts = cell(t, i, "t_s");

		if (ts < 5)
			last = ts;
		else
			next = ts;
	}
	table_destroy(&t);
	cr_assert_geq(next, 10, "worker1's first row after the cut at %g s", next);
	/* its push went with its last row before the cut (the row is the step's end) */
	expect = last;
	while (expect < 10)
		expect = last + rto * ((1 << k++) - 1);
	cr_assert_geq(next, expect, "worker1 at %g s, before the retransmission at %g s", next, expect);
	cr_assert_lt(next, expect + 0.05, "worker1 at %g s, the retransmission was at %g s", next, expect);
	cr_assert_gt(r.steps_min, 250, "both trained on after the blackout (%u)", (unsigned)r.steps_min);
	support_rm_rf(dir);
}
