/* sim/sim_p2p and sim/sim_ring: the simulator holds the decentralised engines' invariants.
 *   p2p BSP       no peer starts the compute of step c+1 before every peer finished step c
 *                 (the engine's own lockstep test), so the clocks are never more than one
 *                 step apart
 *   p2p SSP(s)    no peer starts step c+1 before every other finished step c - s; spread <= s+1
 *   p2p ASP       no barrier ever holds anybody; without gossip (ensemble) nobody waits at all
 *   pBSP(0)       is ASP, pBSP(N-1) is BSP and pSSP(N-1, s) is SSP(s): the same files, byte
 *                 for byte (the sample is then everybody, and requests go in index order)
 *   stop.steps    every peer ends at exactly that step and says BYE; the others go on
 *   determinism   the same scenario and seed give byte-identical files
 *   allreduce     a step takes compute + 2(N-1) hops of the ring on fixed links, to the ns;
 *                 every node ends on the same step; centralized runs back to back
 *   churn         a crash does not stall the others; a restart and a late join resume at the
 *                 slowest answering clock (node/engine_p2p's catch_up), not waiting for a
 *                 peer the answers count departed
 *   rejoin        a join nobody answers asks again in the engine's 2 s rounds while the
 *                 peers it reached may answer (up to dead_after, 10 s), so a restart cut off
 *                 from every other peer after its handshakes resumes from their clock once
 *                 they are back; a restart whose handshakes fall in a blackout reaches nobody
 *                 (SYN retries at 1, 3, 7 s under the loss in force) and goes on alone; a
 *                 peer catching up answers "behind": another restart's join does not resume
 *                 from it and a gossip round merges nothing from it
 *   refusals      what is not simulated yet is refused with a message
 *   loss_recovery bad values get FILE:LINE:COL; fast recovery makes a lossy run faster
 *   train real    peer 0's replica learns, byte-identical reruns, stop.accuracy ends early
 *   delays        a peer's straggler delays are its emulated peer's (node/straggler's stream)
 *   blackout      two BSP peers cut off for 5 s resume at the first retransmission of TCP's
 *                 backoff schedule after the link is back (not ~1,000 s later); a gossip pull to
 *                 a silent peer is given up after dead_after (10 s), as the engine's core rules */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectors/schema.h"
#include "collectors/table.h"
#include "orchestrator/plan.h"
#include "orchestrator/scenario.h"
#include "node/straggler.h"
#include "sim/sim.h"
#include "tests/support/files.h"
#include "tests/support/simrun.h"

#define NPEERS 5

/* A small p2p scenario: exponential step times, a lossy jittery link on peer1, peer2 3x slower;
 * stop, combine and train as given, extra appended (after the stragglers: more of them). */
static struct scenario *scen_with(const char *barrier, unsigned n, unsigned sample, unsigned staleness,
				  const char *stop, const char *combine, const char *train, const char *extra)
{
	char buf[4096], err[SCENARIO_ERR_MAX];
	struct scenario *sc;

	snprintf(buf, sizeof buf,
		 "name: t\nseed: 23\nstop: {%s}\nmodel: {kind: softmax}\ntopology: {kind: p2p}\n"
		 "consistency: {barrier: %s, staleness: %u, sample: %u, combine: %s}\nworkers: %u\n"
		 "linkcheck: off\n"
		 "network:\n  default: {delay: 2ms, jitter: 1ms, rate: 100mbit}\n"
		 "  links:\n    - {nodes: peer1, delay: 10ms, loss: 2%%}\n"
		 "simulation: {train: %s, step_cost: 5ms, server_cost: 1us, node_files: 64}\n"
		 "stragglers:\n  - {nodes: workers, compute: {delay: {dist: exponential, mean: 50ms}}}\n"
		 "  - {nodes: peer2, compute: {slowdown: 3}}\n%s",
		 stop, barrier, staleness, sample, combine, n, train, extra ? extra : "");
	sc = scenario_parse(buf, strlen(buf), "t.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	return sc;
}

static struct scenario *scen(const char *barrier, unsigned n, unsigned sample, unsigned staleness,
			     const char *extra)
{
	return scen_with(barrier, n, sample, staleness, "time: 20s", "none", "none", extra);
}

static int run_sim(const struct scenario *sc, const char *dir, struct sim_result *res, char *err, size_t errlen)
{
	char path[600];
	struct plan *p = plan_new(sc, err, errlen);
	struct sim_opts o;
	int rc;

	cr_assert_not_null(p, "%s", err);
	if (dir) {
		snprintf(path, sizeof path, "%s/nodes", dir);
		support_mkdirs(path);
	}
	o = (struct sim_opts){ .run = plan_run(p, 0), .dir = dir,
			       .step_cost_ns = (int64_t)sc->simulation.step_cost_us * 1000,
			       .server_cost_ns = (int64_t)sc->simulation.server_cost_us * 1000 };
	rc = sim_run(&o, res, err, errlen);
	plan_destroy(&p);
	return rc;
}

static void simulate(const struct scenario *sc, const char *dir, struct sim_result *res)
{
	char err[512];
	int rc = run_sim(sc, dir, res, err, sizeof err);

	cr_assert_eq(rc, 0, "sim_run: %s", err);
	if (dir)
		cr_assert_eq(trace_schema_check_dir(dir, err, sizeof err), 0, "%s", err);
}

static double cell(const struct table *t, size_t r, const char *col)
{
	double v = NAN;
	int c = table_col(t, col);

	cr_assert_geq(c, 0, "no column %s", col);
	cr_assert_eq(table_double(t, r, (size_t)c, &v), 0, "row %zu column %s", r, col);
	return v;
}

/* The rows of every peer's trace: end[i][c-1] is when peer i finished step c, start[i][c-1]
 * when it began computing it; *rows[i] how many. */
struct traces {
	double *end[NPEERS + 1], *start[NPEERS + 1], *wait[NPEERS + 1];
	size_t rows[NPEERS + 1];
	unsigned n;
};

static void traces_load(const char *dir, unsigned n, struct traces *tr)
{
	memset(tr, 0, sizeof *tr);
	tr->n = n;
	for (unsigned i = 0; i < n; i++) {
		char f[64];
		struct table *t;

		snprintf(f, sizeof f, "nodes/peer%u.csv", i);
		t = support_load_table(dir, f);
		tr->rows[i] = table_rows(t);
		tr->end[i] = calloc(tr->rows[i] + 1, sizeof(double));
		tr->start[i] = calloc(tr->rows[i] + 1, sizeof(double));
		tr->wait[i] = calloc(tr->rows[i] + 1, sizeof(double));
		for (size_t r = 0; r < tr->rows[i]; r++) {
			cr_assert_eq(cell(t, r, "step"), (double)(r + 1));
			tr->end[i][r] = cell(t, r, "t_s");
			tr->start[i][r] = tr->end[i][r] - cell(t, r, "compute_s");
			tr->wait[i][r] = cell(t, r, "wait_s");
		}
		table_destroy(&t);
	}
}

static void traces_free(struct traces *tr)
{
	for (unsigned i = 0; i < tr->n; i++) {
		free(tr->end[i]);
		free(tr->start[i]);
		free(tr->wait[i]);
	}
}

/* Every peer's compute of step c+1 begins after every other peer finished step c - s (the rows
 * print us; 2 us of slack for the rounding of two subtractions). Returns how many crossings
 * found the condition already met by a margin (none: the check saw nothing). */
static size_t check_bound(const struct traces *tr, unsigned s)
{
	size_t checked = 0;

	for (unsigned i = 0; i < tr->n; i++)
		for (size_t c = s + 1; c < tr->rows[i]; c++) /* row c is step c+1, clock c */
			for (unsigned j = 0; j < tr->n; j++) {
				if (j == i || c - s > tr->rows[j])
					continue;
				cr_assert_geq(tr->start[i][c] + 2e-6, tr->end[j][c - s - 1],
					      "peer%u began step %zu at %.6f before peer%u finished step %zu "
					      "at %.6f (s = %u)", i, c + 1, tr->start[i][c], j, c - s,
					      tr->end[j][c - s - 1], s);
				checked++;
			}
	return checked;
}

/* max over progress samples of max_step - min_step; *waited: a sample with waiting > 0 */
static double max_spread(const char *dir, bool *waited)
{
	struct table *t = support_load_table(dir, "progress.csv");
	double m = 0;

	*waited = false;
	cr_assert_gt(table_rows(t), 150);
	for (size_t r = 0; r < table_rows(t); r++) {
		double d = cell(t, r, "max_step") - cell(t, r, "min_step");

		m = d > m ? d : m;
		*waited |= cell(t, r, "waiting") > 0;
	}
	table_destroy(&t);
	return m;
}

static void assert_same_runs(const char *a, const char *b, unsigned n)
{
	cr_assert(support_same_file(a, b, "progress.csv"), "progress.csv differs");
	cr_assert(support_same_file(a, b, "workers.csv"), "workers.csv differs");
	for (unsigned i = 0; i < n; i++) {
		char f[64];

		snprintf(f, sizeof f, "nodes/peer%u.csv", i);
		cr_assert(support_same_file(a, b, f), "%s differs", f);
	}
}

Test(sim_p2p, bsp_lockstep, .timeout = 60)
{
	char dir[256];
	struct scenario *sc = scen("bsp", NPEERS, 0, 0, NULL);
	struct sim_result r;
	struct traces tr;
	bool waited;

	support_tmpdir(dir, sizeof dir, "simp2p");
	simulate(sc, dir, &r);
	traces_load(dir, NPEERS, &tr);
	cr_assert_gt(check_bound(&tr, 0), 100);
	traces_free(&tr);
	cr_assert_leq(r.steps_max - r.steps_min, 1);
	cr_assert_gt(r.steps_min, 20, "steps %g", r.steps_min);
	cr_assert_leq(max_spread(dir, &waited), 1);
	cr_assert(waited);
	cr_assert_gt(r.wait_fraction, 0.2);
	/* gossip: a merged replica is never behind under BSP (the engine's test says so too) */
	cr_assert_eq(r.staleness_mean, 0);
	scenario_destroy(&sc);
	support_rm_rf(dir);
}

Test(sim_p2p, ssp_bound, .timeout = 60)
{
	char dir[256];
	struct sim_result r;
	struct traces tr;
	bool waited;

	for (unsigned s = 1; s <= 3; s++) {
		struct scenario *sc = scen("ssp", NPEERS, 0, s, NULL);
		double spread;

		support_tmpdir(dir, sizeof dir, "simp2p");
		simulate(sc, dir, &r);
		traces_load(dir, NPEERS, &tr);
		cr_assert_gt(check_bound(&tr, s), 100);
		traces_free(&tr);
		spread = max_spread(dir, &waited);
		cr_assert_leq(spread, s + 1, "SSP(%u): spread %g", s, spread);
		cr_assert_geq(spread, s, "SSP(%u): spread %g: the slow peer should pull the bound tight", s, spread);
		cr_assert(waited, "SSP(%u) never held anybody (slowdown 3 on peer2)", s);
		scenario_destroy(&sc);
		support_rm_rf(dir);
	}
}

Test(sim_p2p, asp_never_waits, .timeout = 60)
{
	char dir[256];
	struct scenario *sc = scen("asp", NPEERS, 0, 0, NULL),
			*ens = scen_with("asp", NPEERS, 0, 0, "time: 20s", "ensemble", "none", NULL);
	struct sim_result r;
	struct traces tr;
	bool waited;

	/* gossip: the pull is the only wait; no barrier ever holds anybody */
	support_tmpdir(dir, sizeof dir, "simp2p");
	simulate(sc, dir, &r);
	max_spread(dir, &waited);
	cr_assert_not(waited);
	cr_assert_gt(r.steps_max - r.steps_min, 20, "the slowed peer falls far behind");
	cr_assert_gt(r.staleness_mean, 1, "gossip merges lagging replicas: %g", r.staleness_mean);
	support_rm_rf(dir);
	/* no parameter exchange: nobody waits at all */
	support_tmpdir(dir, sizeof dir, "simp2p");
	simulate(ens, dir, &r);
	cr_assert_eq(r.wait_fraction, 0);
	traces_load(dir, NPEERS, &tr);
	for (unsigned i = 0; i < NPEERS; i++) {
		cr_assert_gt(tr.rows[i], 50);
		for (size_t c = 0; c < tr.rows[i]; c++)
			cr_assert_eq(tr.wait[i][c], 0);
	}
	traces_free(&tr);
	scenario_destroy(&sc);
	scenario_destroy(&ens);
	support_rm_rf(dir);
}

Test(sim_p2p, pbsp0_is_asp, .timeout = 60)
{
	char a[256], b[256];
	struct scenario *x = scen("asp", NPEERS, 0, 0, NULL), *y = scen("pbsp", NPEERS, 0, 0, NULL);
	struct sim_result ra, rb;

	support_tmpdir(a, sizeof a, "simp2p");
	support_tmpdir(b, sizeof b, "simp2p");
	simulate(x, a, &ra);
	simulate(y, b, &rb);
	assert_same_runs(a, b, NPEERS);
	cr_assert_eq(ra.total_steps, rb.total_steps);
	scenario_destroy(&x);
	scenario_destroy(&y);
	support_rm_rf(a);
	support_rm_rf(b);
}

Test(sim_p2p, full_sample_is_bsp_and_ssp, .timeout = 60)
{
	char a[256], b[256];
	struct sim_result ra, rb;

	for (unsigned s = 0; s <= 2; s += 2) {
		struct scenario *x = scen(s ? "ssp" : "bsp", NPEERS, 0, s, NULL),
				*y = scen(s ? "pssp" : "pbsp", NPEERS, NPEERS - 1, s, NULL);

		support_tmpdir(a, sizeof a, "simp2p");
		support_tmpdir(b, sizeof b, "simp2p");
		simulate(x, a, &ra);
		simulate(y, b, &rb);
		assert_same_runs(a, b, NPEERS);
		cr_assert_eq(ra.total_steps, rb.total_steps);
		scenario_destroy(&x);
		scenario_destroy(&y);
		support_rm_rf(a);
		support_rm_rf(b);
	}
}

Test(sim_p2p, pbsp_between_asp_and_bsp, .timeout = 60)
{
	struct sim_result asp, p1, bsp;
	struct scenario *x = scen("asp", NPEERS, 0, 0, NULL), *y = scen("pbsp", NPEERS, 1, 0, NULL),
			*z = scen("bsp", NPEERS, 0, 0, NULL);

	simulate(x, NULL, &asp);
	simulate(y, NULL, &p1);
	simulate(z, NULL, &bsp);
	/* a sample of one binds each peer to a random other: fewer steps than ASP's median, more
	 * than BSP's, and the spread lies between theirs */
	cr_assert_lt(p1.steps_median, asp.steps_median);
	cr_assert_gt(p1.steps_median, bsp.steps_median);
	cr_assert_gt(p1.wait_fraction, 0);
	cr_assert_lt(p1.wait_fraction, bsp.wait_fraction);
	scenario_destroy(&x);
	scenario_destroy(&y);
	scenario_destroy(&z);
}

Test(sim_p2p, stop_steps_and_bye, .timeout = 60)
{
	char dir[256];
	/* no stop.time: the run ends with its peers */
	struct scenario *sc = scen_with("bsp", NPEERS, 0, 0, "steps: 40", "none", "none", NULL);
	struct sim_result r;
	struct table *t;

	support_tmpdir(dir, sizeof dir, "simp2p");
	simulate(sc, dir, &r);
	cr_assert_eq(r.steps_min, 40);
	cr_assert_eq(r.steps_max, 40);
	cr_assert_eq(r.total_steps, 40 * NPEERS);
	/* everybody said BYE: the last progress sample has nobody live */
	t = support_load_table(dir, "progress.csv");
	cr_assert_eq(cell(t, table_rows(t) - 1, "alive"), 0);
	table_destroy(&t);
	scenario_destroy(&sc);
	support_rm_rf(dir);
}

Test(sim_p2p, deterministic, .timeout = 60)
{
	char a[256], b[256];
	struct scenario *sc = scen("pssp", NPEERS, 2, 1, NULL);
	struct sim_result ra, rb;

	support_tmpdir(a, sizeof a, "simp2p");
	support_tmpdir(b, sizeof b, "simp2p");
	simulate(sc, a, &ra);
	simulate(sc, b, &rb);
	assert_same_runs(a, b, NPEERS);
	cr_assert_eq(ra.events, rb.events);
	cr_assert_gt(ra.events, 1000);
	scenario_destroy(&sc);
	support_rm_rf(a);
	support_rm_rf(b);
}

/* A ring of 4 on fixed 3 ms links without jitter, rate or loss, constant 20 ms steps: every
 * hop takes 6 ms (up + down), a step 20 ms + 2(4-1) x 6 ms = 56 ms, to the ns. Step 179 begins
 * at 9.968 s, before stop.time, step 180 at 10.024 s: it is voted the last, and every node
 * ends there (the engine's stop vote). */
Test(sim_ring, allreduce_step_is_compute_plus_ring, .timeout = 60)
{
	char dir[256], err[SCENARIO_ERR_MAX];
	static const char text[] =
		"name: r\nseed: 5\nstop: {time: 10s}\nmodel: {kind: softmax}\ntopology: {kind: allreduce}\n"
		"workers: 4\nlinkcheck: off\nnetwork:\n  default: {delay: 3ms}\n"
		"simulation: {train: none, step_cost: 20ms, server_cost: 1us}\n";
	struct scenario *sc = scenario_parse(text, strlen(text), "r.yaml", err, sizeof err);
	struct sim_result r;
	struct table *t;

	cr_assert_not_null(sc, "%s", err);
	support_tmpdir(dir, sizeof dir, "simring");
	simulate(sc, dir, &r);
	cr_assert_eq(r.steps_min, 180, "10 s / 56 ms: %g", r.steps_min);
	cr_assert_eq(r.steps_max, 180);
	cr_assert_float_eq(r.sim_end_s, 10.080, 1e-9);
	for (unsigned i = 0; i < 4; i++) {
		char f[64];

		snprintf(f, sizeof f, "nodes/peer%u.csv", i);
		t = support_load_table(dir, f);
		cr_assert_eq(table_rows(t), 180);
		for (size_t k = 0; k < table_rows(t); k++) {
			cr_assert_float_eq(cell(t, k, "t_s"), 0.056 * (double)(k + 1), 1e-6);
			cr_assert_float_eq(cell(t, k, "compute_s"), 0.020, 1e-9);
			cr_assert_float_eq(cell(t, k, "wait_s"), 0.036, 1e-9);
		}
		/* 2(N-1) chunks of a quarter of the model each way */
		cr_assert_gt(cell(t, 0, "bytes_tx"), 6 * (7850 / 4) * 4);
		table_destroy(&t);
	}
	scenario_destroy(&sc);
	support_rm_rf(dir);
}

/* The ring waits for its slowest member every step: one node 3x slower sets everybody's pace. */
Test(sim_ring, allreduce_is_bsp, .timeout = 60)
{
	char err[SCENARIO_ERR_MAX];
	static const char text[] =
		"name: r\nseed: 5\nstop: {time: 20s}\nmodel: {kind: softmax}\ntopology: {kind: allreduce}\n"
		"workers: 5\nlinkcheck: off\nnetwork:\n  default: {delay: 1ms, jitter: 1ms, rate: 100mbit}\n"
		"stragglers:\n  - {nodes: workers, compute: {delay: {dist: exponential, mean: 30ms}}}\n"
		"  - {nodes: peer3, compute: {slowdown: 3}}\n"
		"simulation: {train: none, step_cost: 10ms, server_cost: 1us}\n";
	struct scenario *sc = scenario_parse(text, strlen(text), "r.yaml", err, sizeof err);
	struct sim_result r;

	cr_assert_not_null(sc, "%s", err);
	simulate(sc, NULL, &r);
	cr_assert_leq(r.steps_max - r.steps_min, 1);
	cr_assert_gt(r.wait_fraction, 0.1);
	cr_assert_lt(r.steps_max, 20 / 0.060, "paced by the slow node's 60 ms: %g", r.steps_max);
	cr_assert_eq(r.staleness_mean, 0);
	scenario_destroy(&sc);
}

Test(sim_ring, centralized_back_to_back, .timeout = 60)
{
	char err[SCENARIO_ERR_MAX];
	static const char text[] =
		"name: c\nseed: 5\nstop: {time: 10s}\nmodel: {kind: softmax}\ntopology: {kind: centralized}\n"
		"linkcheck: off\nsimulation: {train: none, step_cost: 4ms, server_cost: 1us}\n";
	struct scenario *sc = scenario_parse(text, strlen(text), "c.yaml", err, sizeof err);
	struct sim_result r;

	cr_assert_not_null(sc, "%s", err);
	simulate(sc, NULL, &r);
	cr_assert_eq(r.workers, 1);
	cr_assert_eq(r.steps_max, 2500); /* the step ending at 10 s is the last */
	cr_assert_eq(r.wait_fraction, 0);
	scenario_destroy(&sc);
}

Test(sim_p2p, refusals, .timeout = 60)
{
	char err[512];
	struct sim_result r;
	struct scenario *real = scen_with("bsp", 3, 0, 0, "time: 20s", "ensemble", "real", NULL),
			*crash = scen_with("bsp", 3, 0, 0, "time: 20s", "none", "none",
					   "  - {nodes: peer1, crash: {at: 5s}}\n");

	cr_assert_eq(run_sim(real, NULL, &r, err, sizeof err), -EINVAL);
	cr_assert(strstr(err, "ensemble"), "%s", err);
	/* a crash without a restart is simulated: its peers go on without it */
	cr_assert_eq(run_sim(crash, NULL, &r, err, sizeof err), 0, "%s", err);

	scenario_destroy(&real);
	scenario_destroy(&crash);
}

Test(sim_p2p, loss_recovery_key, .timeout = 60)
{
	char err[SCENARIO_ERR_MAX];
	static const char bad[] = "stop: {time: 10s}\nworkers: 4\nsimulation:\n  loss_recovery: quick\n";
	struct scenario *sc = scenario_parse(bad, strlen(bad), "s.yaml", err, sizeof err);
	struct scenario *slow = scen("asp", NPEERS, 0, 0, NULL),
			*fast = scen("asp", NPEERS, 0, 0, NULL);
	struct sim_result a, b;

	cr_assert_null(sc);
	cr_assert(strstr(err, "s.yaml:4:18: error: simulation.loss_recovery"), "%s", err);
	cr_assert_eq(slow->simulation.loss_recovery, SCENARIO_SIM_RECOVERY_TIMEOUT);
	scenario_destroy(&fast);
	/* (the train value is spliced into the simulation: map) */
	fast = scen_with("asp", NPEERS, 0, 0, "time: 20s", "none", "none, loss_recovery: fast", NULL);
	cr_assert_eq(fast->simulation.loss_recovery, SCENARIO_SIM_RECOVERY_FAST);
	/* peer1's 2% loss costs it far less when SACK and probes recover it */
	simulate(slow, NULL, &a);
	simulate(fast, NULL, &b);
	cr_assert_gt(b.total_steps, a.total_steps);
	cr_assert_lt(b.wait_fraction, a.wait_fraction);
	scenario_destroy(&slow);
	scenario_destroy(&fast);
}

/* train real: every peer's replica trains on its own share and gossip merges them; peer 0's
 * accuracy rises, the files are the same twice, stop.accuracy ends the run early. */
Test(sim_p2p, train_real, .timeout = 120)
{
	char a[256], b[256];
	struct scenario *sc, *stop;
	struct sim_result ra, rb, rs;
	struct table *t;
	double last;

	if (access("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", R_OK) != 0)
		cr_skip_test("needs the data set");
	sc = scen_with("ssp", 4, 0, 2, "time: 20s", "none", "real", NULL);
	stop = scen_with("ssp", 4, 0, 2, "time: 20s, accuracy: 0.6", "none", "real", NULL);
	support_tmpdir(a, sizeof a, "simp2p");
	support_tmpdir(b, sizeof b, "simp2p");
	simulate(sc, a, &ra);
	simulate(sc, b, &rb);
	cr_assert(support_same_file(a, b, "eval.csv"), "eval.csv differs between two simulations");
	assert_same_runs(a, b, 4);
	cr_assert(support_same_file(a, b, "partition.csv"));
	t = support_load_table(a, "eval.csv");
	cr_assert_gt(table_rows(t), 10);
	last = cell(t, table_rows(t) - 1, "test_accuracy");
	cr_assert_gt(last, 0.65, "peer0's replica after 20 s: %g", last);
	cr_assert_lt(cell(t, 0, "test_accuracy"), 0.3, "the initial model should not know the classes");
	table_destroy(&t);
	simulate(stop, NULL, &rs);
	cr_assert_lt(rs.sim_end_s, 20, "stop.accuracy 0.6 should end the run early: %g s", rs.sim_end_s);
	cr_assert_lt(rs.total_steps, ra.total_steps);
	scenario_destroy(&sc);
	scenario_destroy(&stop);
	support_rm_rf(a);
	support_rm_rf(b);
}

/* train real on the ring: one model, the mean of every node's gradient per step; it learns,
 * and a reached stop.accuracy ends every node on the same, next step. */
Test(sim_ring, allreduce_train_real, .timeout = 120)
{
	char err[SCENARIO_ERR_MAX];
	static const char text[] =
		"name: r\nseed: 5\nstop: {time: 20s, accuracy: 0.7}\nmodel: {kind: softmax}\n"
		"train: {batch: 32, lr: 0.05}\ntopology: {kind: allreduce}\nworkers: 4\nlinkcheck: off\n"
		"eval: {every: 1s}\nnetwork:\n  default: {delay: 3ms, jitter: 1ms}\n"
		"simulation: {train: real, step_cost: 20ms, server_cost: 1us}\n";
	struct scenario *sc;
	struct sim_result r;

	if (access("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", R_OK) != 0)
		cr_skip_test("needs the data set");
	sc = scenario_parse(text, strlen(text), "r.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	simulate(sc, NULL, &r);
	cr_assert(r.stopped_accuracy, "0.7 not reached in 20 s");
	cr_assert_lt(r.sim_end_s, 19);
	cr_assert_eq(r.steps_min, r.steps_max);
	cr_assert_gt(r.steps_min, 10);
	scenario_destroy(&sc);
}

/* Churn under BSP: peer1 crashes at 5 s and restarts at 10 s, peer4 joins at 8 s. The others go
 * on without the crashed peer; the restarted and the joining peer resume at the slowest
 * answering clock instead of redoing steps; the joining peer does not wait for the crashed
 * one (the answers count it departed: node/core_p2p's join), so nobody stalls between the join
 * and the restart; lockstep again once all are back. */
Test(sim_p2p, churn_crash_restart_join, .timeout = 60)
{
	char dir[256];
	struct scenario *sc = scen_with("bsp", NPEERS, 0, 0, "time: 30s", "none", "none",
					"  - {nodes: peer1, crash: {at: 5s, restart: 10s}}\n"
					"  - {nodes: peer4, join: {at: 8s}}\n");
	struct sim_result r;
	struct table *t;
	size_t during = 0, after_join = 0;
	double max_wait = 0, last_before = 0, first_after = -1, join_t = -1, join_step = -1;

	support_tmpdir(dir, sizeof dir, "simp2p");
	simulate(sc, dir, &r);
	t = support_load_table(dir, "nodes/peer0.csv");
	for (size_t k = 0; k < table_rows(t); k++) {
		double ts = cell(t, k, "t_s");

		during += ts > 5.5 && ts < 7.9;
		after_join += ts > 8.5 && ts < 9.9;
		if (ts > 8 && ts < 9.9 && cell(t, k, "wait_s") > max_wait)
			max_wait = cell(t, k, "wait_s");
	}
	table_destroy(&t);
	cr_assert_gt(during, 10, "peer0 stalled while peer1 was down (%zu steps)", during);
	/* the join used to hold everybody for its 2 s deadline (and BSP then waited for the crashed
	 * peer until its restart): now peer0 steps on between the join and the restart */
	cr_assert_gt(after_join, 5, "peer0 stalled after the join (%zu steps in 8.5-9.9 s)", after_join);
	cr_assert_lt(max_wait, 1.0, "peer0 waited %g s after the join", max_wait);
	t = support_load_table(dir, "nodes/peer1.csv");
	for (size_t k = 0; k < table_rows(t); k++) {
		if (cell(t, k, "t_s") < 5)
			last_before = cell(t, k, "step");
		else if (first_after < 0)
			first_after = cell(t, k, "step");
	}
	table_destroy(&t);
	cr_assert_gt(first_after, last_before + 10, "peer1 resumed at %g after %g", first_after, last_before);
	t = support_load_table(dir, "nodes/peer4.csv");
	join_t = cell(t, 0, "t_s");
	join_step = cell(t, 0, "step");
	table_destroy(&t);
	cr_assert_geq(join_t, 8);
	cr_assert_lt(join_t, 8.5, "peer4's first step at %g s: its join waited", join_t);
	cr_assert_gt(join_step, 30, "peer4 began at step %g (the others were near 40)", join_step);
	/* everybody back: lockstep */
	t = support_load_table(dir, "progress.csv");
	for (size_t k = 0; k < table_rows(t); k++)
		if (cell(t, k, "t_s") >= 12)
			cr_assert_leq(cell(t, k, "max_step") - cell(t, k, "min_step"), 1, "at %g s",
				      cell(t, k, "t_s"));
	table_destroy(&t);
	cr_assert_leq(r.steps_max - r.steps_min, 1);
	scenario_destroy(&sc);
	support_rm_rf(dir);
}

/* centralized stops after train.epochs passes over the training set, as node/trainer */
Test(sim_ring, centralized_epochs, .timeout = 60)
{
	char err[SCENARIO_ERR_MAX];
	static const char text[] =
		"name: c\nseed: 5\nstop: {time: 100s}\nmodel: {kind: softmax}\ntopology: {kind: centralized}\n"
		"train: {batch: 600, epochs: 2}\nlinkcheck: off\nsimulation: {train: none, step_cost: 4ms, server_cost: 1us}\n";
	struct scenario *sc;
	struct sim_result r;

	if (access("/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz", R_OK) != 0)
		cr_skip_test("needs the data set");
	sc = scenario_parse(text, strlen(text), "c.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	simulate(sc, NULL, &r);
	cr_assert_eq(r.steps_max, 200, "2 epochs of 60,000 samples in batches of 600: %g", r.steps_max);
	cr_assert_float_eq(r.sim_end_s, 0.8, 1e-9);
	scenario_destroy(&sc);
}

/* A connection idle for longer than its RTO starts from the initial window: a ring of 2 on 3 ms
 * links sends chunks of 11 segments (half of 7,850 floats), which need a second round trip
 * then. The first step opens new connections (24 ms of ring); after a 100 ms compute the
 * connection is still warm (RTO = 12 ms + 200 ms), 12 ms; after 300 ms it is cold again, 24 ms. */
Test(sim_ring, idle_restart, .timeout = 60)
{
	static const char *const cost[] = { "100ms", "300ms" };
	static const double ring_s[] = { 0.012, 0.024 };

	for (int c = 0; c < 2; c++) {
		char text[512], err[SCENARIO_ERR_MAX], dir[256];
		struct scenario *sc;
		struct sim_result r;
		struct table *t;

		snprintf(text, sizeof text,
			 "name: r\nseed: 5\nstop: {steps: 10, time: 100s}\nmodel: {kind: softmax}\n"
			 "topology: {kind: allreduce}\nworkers: 2\nlinkcheck: off\nnetwork:\n  default: {delay: 3ms}\n"
			 "simulation: {train: none, step_cost: %s, server_cost: 1us}\n", cost[c]);
		sc = scenario_parse(text, strlen(text), "r.yaml", err, sizeof err);
		cr_assert_not_null(sc, "%s", err);
		support_tmpdir(dir, sizeof dir, "simring");
		simulate(sc, dir, &r);
		t = support_load_table(dir, "nodes/peer0.csv");
		cr_assert_eq(table_rows(t), 10);
		cr_assert_float_eq(cell(t, 0, "wait_s"), 0.024, 1e-9);
		for (size_t k = 1; k < table_rows(t); k++)
			cr_assert_float_eq(cell(t, k, "wait_s"), ring_s[c], 1e-9, "%s: step %zu", cost[c], k + 1);
		table_destroy(&t);
		scenario_destroy(&sc);
		support_rm_rf(dir);
	}
}

/* train real with churn: a restarted peer starts a new replica and optimiser, adopts the
 * replica of the peer it resumes from, and trains on; reruns are byte-identical. */
Test(sim_p2p, train_real_with_restart, .timeout = 120)
{
	char a[256], b[256];
	struct scenario *sc;
	struct sim_result ra, rb;
	struct table *t;

	if (access("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", R_OK) != 0)
		cr_skip_test("needs the data set");
	sc = scen_with("ssp", 4, 0, 2, "time: 20s", "none", "real",
		       "  - {nodes: peer0, crash: {at: 6s, restart: 9s}}\n");
	support_tmpdir(a, sizeof a, "simp2p");
	support_tmpdir(b, sizeof b, "simp2p");
	simulate(sc, a, &ra);
	simulate(sc, b, &rb);
	cr_assert(support_same_file(a, b, "eval.csv"));
	assert_same_runs(a, b, 4);
	/* peer 0 evaluates its replica: after the restart it is the adopted one, not a fresh model */
	t = support_load_table(a, "eval.csv");
	for (size_t k = 0; k < table_rows(t); k++)
		if (cell(t, k, "t_s") >= 10)
			cr_assert_gt(cell(t, k, "test_accuracy"), 0.5, "at %g s", cell(t, k, "t_s"));
	table_destroy(&t);
	scenario_destroy(&sc);
	support_rm_rf(a);
	support_rm_rf(b);
}

/* Every peer's delay per step is the next draw of the stream its emulated peer draws from
 * (node/straggler seeded as node/engine_common seeds it). */
Test(sim_p2p, delays_from_the_emulated_stream, .timeout = 60)
{
	char dir[256], err[512];
	struct scenario *sc = scen("ssp", 4, 0, 1, NULL);
	struct plan *p = plan_new(sc, err, sizeof err);
	uint64_t seed;
	struct sim_result r;

	cr_assert_not_null(p, "%s", err);
	seed = plan_run(p, 0)->seed;
	plan_destroy(&p);
	support_tmpdir(dir, sizeof dir, "simp");
	simulate(sc, dir, &r);
	for (uint32_t i = 0; i < 4; i++) {
		struct straggler_params sp = { .slowdown = 1, .dist = STRAGGLER_EXPONENTIAL, .a = 0.05 };
		struct straggler *st = straggler_new(&sp, seed ^ (0x9e3779b97f4a7c15ull * (i + 1)));
		double base = i == 2 ? 0.015 : 0.005; /* peer2: slowdown 3 */
		struct table *t;
		char name[64];

		cr_assert_not_null(st);
		snprintf(name, sizeof name, "nodes/peer%u.csv", i);
		t = support_load_table(dir, name);
		cr_assert_gt(table_rows(t), 20);
		for (size_t k = 0; k < table_rows(t); k++) {
			double want = base + straggler_delay_s(st);

			cr_assert_float_eq(cell(t, k, "compute_s"), want, 2e-6, "peer%u step %zu: %g, the emulated "
					   "stream draws %g", i, k + 1, cell(t, k, "compute_s"), want);
		}
		table_destroy(&t);
		straggler_destroy(&st);
	}
	scenario_destroy(&sc);
	support_rm_rf(dir);
}

/* The first row of nodes/<peer>.csv at or after t_s: its step and time (-1, -1: none). */
static void first_row_after(const char *dir, const char *peer, double t_s, double *step, double *at)
{
	char f[64];
	struct table *t;

	snprintf(f, sizeof f, "nodes/%s.csv", peer);
	t = support_load_table(dir, f);
	*step = *at = -1;
	for (size_t k = 0; k < table_rows(t) && *at < 0; k++)
		if (cell(t, k, "t_s") >= t_s) {
			*step = cell(t, k, "step");
			*at = cell(t, k, "t_s");
		}
	table_destroy(&t);
}

/* The step a peer had completed at t_s (its last row before it; 0 without one). */
static double step_at(const char *dir, const char *peer, double t_s)
{
	char f[64];
	struct table *t;
	double step = 0;

	snprintf(f, sizeof f, "nodes/%s.csv", peer);
	t = support_load_table(dir, f);
	for (size_t k = 0; k < table_rows(t) && cell(t, k, "t_s") < t_s; k++)
		step = cell(t, k, "step");
	table_destroy(&t);
	return step;
}

/* peer0 crashes at 5 s and restarts at 6 s; from `cut` until `back` every message to or from
 * peer1 and peer2 is lost. Cut at 6.009 s: peer0's new connections completed their handshakes
 * (SYN at 6 s, complete at 6.008 s) and its join's requests, sent then, are lost on the way in
 * (peer1's and peer2's down links from 6.010 s): its join waits for peers it reached that do not
 * answer, as the engine's does for peers stopped or cut off after the handshake. Cut at 5.5 s:
 * the handshakes themselves fall in the blackout. ASP without gossip: the others train on
 * meanwhile. */
static void rejoin_text_cut(char *buf, size_t len, const char *cut, const char *back, const char *stop)
{
	snprintf(buf, len,
		 "name: rejoin\nseed: 5\nstop: {time: %s}\nmodel: {kind: softmax}\ntopology: {kind: p2p}\n"
		 "consistency: {barrier: asp, combine: ensemble}\nworkers: 3\nlinkcheck: off\n"
		 "network:\n  default: {delay: 2ms}\n  timeline:\n"
		 "    - {at: %s, nodes: 'peer1,peer2', loss: 100%%}\n"
		 "    - {at: %s, nodes: 'peer1,peer2', loss: 0%%}\n"
		 "simulation: {train: none}\n"
		 "stragglers:\n  - {nodes: workers, compute: {delay: {dist: constant, value: 20ms}}}\n"
		 "  - {nodes: peer0, crash: {at: 5s, restart: 6s}}\n", stop, cut, back);
}

static void rejoin_text(char *buf, size_t len, const char *back, const char *stop)
{
	rejoin_text_cut(buf, len, "6009ms", back, stop);
}

/* A restart whose join nobody answers for longer than a round (2 s) asks again, round after
 * round, while the peers it reached may answer (node/engine_p2p's catch_up with
 * core_p2p_join_next): once the links are back (9 s) it resumes from the others' clock, not
 * from 0 (a simulator that gave up after one round started peer0 over at 8 s). The second
 * round's requests (8 s) are retransmitted at 8 s + rto (2^k - 1), rto = 8 ms + 200 ms: the
 * third, at 9.456 s, is the first after the links are back (a simulator that lost whatever
 * was sent during a blackout for ~1,000 s resumed only with the round of 10 s). Bounded as in
 * the emulator: the orchestrator's dead_after (10 s) after the join began, nobody having
 * answered, it goes on alone from its own clock. Reruns are byte-identical. */
Test(sim_p2p, rejoin_asks_again_until_the_others_are_back, .timeout = 60)
{
	char a[256], b[256], text[2048];
	struct sim_result ra, rb;
	double step, at, others;

	rejoin_text(text, sizeof text, "9s", "14s");
	support_tmpdir(a, sizeof a, "simp2p");
	support_tmpdir(b, sizeof b, "simp2p");
	support_simulate_text(text, a, &ra);
	support_simulate_text(text, b, &rb);
	assert_same_runs(a, b, 3);
	first_row_after(a, "peer0", 5.5, &step, &at);
	others = step_at(a, "peer1", at) < step_at(a, "peer2", at) ? step_at(a, "peer1", at)
								   : step_at(a, "peer2", at);
	cr_assert_gt(others, 300, "peer1 and peer2 trained on (%g)", others);
	/* the second round's (8 s) third retransmission, 9.456 s, then the answer and a step */
	cr_assert_geq(at, 8 + 0.208 * 7, "peer0's first step after its restart at %g s (step %g)", at, step);
	cr_assert_lt(at, 8 + 0.208 * 7 + 0.1, "peer0's first step after its restart at %g s", at);
	cr_assert_geq(step, others - 2, "peer0 resumed at step %g, the others were at %g", step, others);
	support_rm_rf(a);
	support_rm_rf(b);

	/* cut off for good: rounds at 6, 8, 10, 12 and 14 s, then alone at 16 s, from step 1 */
	rejoin_text(text, sizeof text, "30s", "20s");
	support_tmpdir(a, sizeof a, "simp2p");
	support_simulate_text(text, a, &ra);
	first_row_after(a, "peer0", 5.5, &step, &at);
	cr_assert_eq(step, 1, "alone: from its own clock (step %g at %g s)", step, at);
	cr_assert_geq(at, 16, "peer0 went on alone at %g s, before dead_after", at);
	cr_assert_lt(at, 16.5, "peer0 went on alone at %g s", at);
	support_rm_rf(a);
}

/* peer1 and peer2 crash at 5 s and restart together at 8 s. Each one's join finds the other
 * catching up: its answer says so ("behind"), so the join resumes from peer0, the only peer
 * that trained on, not from the other's clock 0 (which made both start over). Then the same
 * with 300 ms links on peer1 and peer2, so that their catch-up lasts over a second: peer0's
 * gossip round pulls from both while they catch up (its pulls answered at once, without a
 * replica: bytes_rx of three headers), and no round merges a fresh process's replica (whose
 * staleness would be peer0's whole clock). */
Test(sim_p2p, restart_beside_a_peer_catching_up, .timeout = 60)
{
	static const char *const links[] = { "", "  links:\n    - {nodes: 'peer1,peer2', delay: 300ms}\n" };
	char dir[256], text[2048];
	struct sim_result r;

	for (int v = 0; v < 2; v++) {
		struct table *t;
		double c0, worst = -1, step, at;
		size_t behind = 0;
		int col;

		snprintf(text, sizeof text,
			 "name: behind\nseed: 7\nstop: {time: 16s}\nmodel: {kind: softmax}\ntopology: {kind: p2p}\n"
			 "consistency: {barrier: asp, fanout: 2}\nworkers: 3\nlinkcheck: off\n"
			 "network:\n  default: {delay: 2ms}\n%s"
			 "simulation: {train: none}\n"
			 "stragglers:\n  - {nodes: workers, compute: {delay: {dist: constant, value: 20ms}}}\n"
			 "  - {nodes: 'peer1,peer2', crash: {at: 5s, restart: 8s}}\n", links[v]);
		support_tmpdir(dir, sizeof dir, "simp2p");
		support_simulate_text(text, dir, &r);
		c0 = step_at(dir, "peer0", 8);
		cr_assert_gt(c0, 100, "peer0 trained on while the others were down (%g)", c0);
		for (unsigned i = 1; i <= 2; i++) {
			char name[16];

			snprintf(name, sizeof name, "peer%u", i);
			first_row_after(dir, name, 5, &step, &at);
			cr_assert_geq(at, 8, "%s stepped while down", name);
			/* 300 ms links: the join's requests wait for the handshakes (a round trip of 0.6 s
			 * to peer0, 1.2 s between peer1 and peer2), the replica's pull its slow start */
			cr_assert_lt(at, v ? 14 : 8.5, "%s's first step after its restart at %g s", name, at);
			cr_assert_geq(step, c0, "%s resumed at step %g, peer0 was at %g (links %d)", name, step,
				      c0, v);
		}
		/* peer0's gossip: never a replica far behind it */
		t = support_load_table(dir, "nodes/peer0.csv");
		col = table_col(t, "staleness");
		cr_assert_geq(col, 0);
		for (size_t k = 0; k < table_rows(t); k++) {
			double st = table_double_or(t, k, (size_t)col, -1);

			worst = st > worst ? st : worst;
			behind += cell(t, k, "t_s") > 8 && cell(t, k, "wait_s") > 0.1 && st < 0 &&
				  cell(t, k, "bytes_rx") < 1000;
		}
		table_destroy(&t);
		cr_assert_geq(worst, 0, "peer0 merged replicas");
		cr_assert_lt(worst, 10, "peer0 merged a replica %g steps behind it (links %d)", worst, v);
		if (v == 1)
			cr_assert_gt(behind, 0, "no pull of peer0 was answered while the others caught up");
		support_rm_rf(dir);
	}
}

/* Two BSP peers cut off from each other (100% loss both ways) from 5 s to 10 s. The barrier
 * request a peer sends into the blackout is retransmitted at t + rto (2^k - 1), rto = 8 ms +
 * 200 ms (as sim/sim_link bounds Linux's RTO); it gets through at the first of those at or
 * after 10 s and the peers resume a round trip and a step later: never during the blackout,
 * and less than (10 - 5) s + rto after the link is back (the backoff schedule's bound). The
 * model that took 100% loss for 99.9999% delivered it ~1,000 s later: no step after 5 s. */
Test(sim_p2p, blackout_bsp_resumes_at_the_first_retransmission_after, .timeout = 60)
{
	const char *text =
		"name: blackout\nseed: 3\nstop: {time: 20s}\nmodel: {kind: softmax}\ntopology: {kind: p2p}\n"
		"consistency: {barrier: bsp, combine: ensemble}\nworkers: 2\nlinkcheck: off\n"
		"network:\n  default: {delay: 2ms}\n  timeline:\n"
		"    - {at: 5s, nodes: 'peer0,peer1', loss: 100%}\n"
		"    - {at: 10s, nodes: 'peer0,peer1', loss: 0%}\n"
		"simulation: {train: none, step_cost: 5ms}\n"
		"stragglers:\n  - {nodes: workers, compute: {delay: {dist: constant, value: 20ms}}}\n";
	const double rto = 0.008 + 0.2;
	char dir[256];
	struct sim_result r;

	support_tmpdir(dir, sizeof dir, "simp2p");
	support_simulate_text(text, dir, &r);
	for (unsigned i = 0; i < 2; i++) {
		char name[16];
		double last, stalled, at, step, expect;
		int k = 1;

		snprintf(name, sizeof name, "peer%u", i);
		last = step_at(dir, name, 10);
		first_row_after(dir, name, 5, &step, &stalled); /* the last step before the stall */
		first_row_after(dir, name, 5.1, &step, &at);
		cr_assert_geq(at, 0, "%s never stepped after the blackout", name);
		cr_assert_geq(at, 10, "%s stepped during the blackout (%g s)", name, at);
		cr_assert_eq(step, last + 1, "%s: step %g after %g", name, step, last);
		/* its barrier began when that last step ended; its request's retransmissions */
		expect = stalled;
		while (expect < 10)
			expect = stalled + rto * ((1 << k++) - 1);
		cr_assert_geq(at, expect, "%s resumed at %g s, before the retransmission at %g s", name, at, expect);
		cr_assert_lt(at, expect + 0.05, "%s resumed at %g s, the retransmission was at %g s", name, at, expect);
		cr_assert_lt(at - 10, (10 - 5) + rto + 0.05, "%s resumed %g s after the link was back", name, at - 10);
	}
	cr_assert_gt(r.steps_min, 300, "both trained on after the blackout (%u)", (unsigned)r.steps_min);
	support_rm_rf(dir);
}

/* Gossip into a black hole: peer1's links drop everything from 5 s on. peer0's pull (fanout 1,
 * its only partner) is given up after consistency.dead_after (10 s, as the orchestrator
 * configures every peer) exactly as node/engine_p2p gives it up (core_p2p_pull_gives_up); peer1
 * is then silent, out of the gossip partners, and peer0 trains on without pulling. A simulator
 * that never gave up waited for the reply for ever. */
Test(sim_p2p, gossip_pull_to_a_silent_peer_is_given_up, .timeout = 60)
{
	const char *text =
		"name: silent\nseed: 4\nstop: {time: 30s}\nmodel: {kind: softmax}\ntopology: {kind: p2p}\n"
		"consistency: {barrier: asp, fanout: 1}\nworkers: 2\nlinkcheck: off\n"
		"network:\n  default: {delay: 2ms}\n  timeline:\n"
		"    - {at: 5s, nodes: peer1, loss: 100%}\n"
		"simulation: {train: none, step_cost: 5ms}\n"
		"stragglers:\n  - {nodes: workers, compute: {delay: {dist: constant, value: 20ms}}}\n";
	char dir[256];
	struct sim_result r;
	struct table *t;
	size_t after = 0, gave_up = 0;
	double given_at = -1;

	support_tmpdir(dir, sizeof dir, "simp2p");
	support_simulate_text(text, dir, &r);
	t = support_load_table(dir, "nodes/peer0.csv");
	for (size_t k = 0; k < table_rows(t); k++) {
		double ts = cell(t, k, "t_s"), w = cell(t, k, "wait_s");

		if (w > 1) {
			gave_up++;
			given_at = ts;
			/* the round waited dead_after to the ns (wait_s is rounded to the us) */
			cr_assert_float_eq(w, 10.0, 1e-6, "peer0 waited %g s for the silent peer", w);
		} else if (gave_up) {
			after++;
			cr_assert_float_eq(w, 0, 1e-9, "peer0 pulled from the silent peer again at %g s", ts);
		}
	}
	table_destroy(&t);
	cr_assert_eq(gave_up, 1, "peer0 gave up %zu pulls", gave_up);
	cr_assert_gt(given_at, 15, "given up at %g s", given_at);
	cr_assert_lt(given_at, 15.1, "given up at %g s", given_at);
	cr_assert_gt(after, 400, "peer0 trained on alone (%zu steps after %g s)", after, given_at);
	support_rm_rf(dir);
}

/* peer0 restarts at 6 s while peer1 and peer2 are cut off (5.5 s to 8.5 s). Its connections'
 * SYNs at 6 and 7 s are lost, so its join reaches nobody within its first round (the engine's
 * ZeroMQ connects no faster): core_p2p_join_next sends it on alone from its own clock at 8 s,
 * as the engine's does. A simulator whose handshake ignored loss counted both as reached and
 * waited for them, resuming from their clock at 10 s. Their connections complete with the SYN
 * of 9 s: from then on peer0 is in their view again. */
Test(sim_p2p, handshake_in_a_blackout_reaches_nobody, .timeout = 60)
{
	char dir[256], text[2048];
	struct sim_result r;
	double step, at;

	rejoin_text_cut(text, sizeof text, "5500ms", "8500ms", "14s");
	support_tmpdir(dir, sizeof dir, "simp2p");
	support_simulate_text(text, dir, &r);
	first_row_after(dir, "peer0", 5.5, &step, &at);
	cr_assert_eq(step, 1, "peer0 resumed at step %g at %g s: its join reached somebody", step, at);
	cr_assert_geq(at, 8, "peer0 went on alone at %g s, before its first round was over", at);
	cr_assert_lt(at, 8.1, "peer0 went on alone at %g s", at);
	support_rm_rf(dir);
}
