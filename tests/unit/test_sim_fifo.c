/* sim/sim: one TCP connection delivers in order. Between a worker and the server a message
 * cannot overtake an earlier one of the same direction, so the ACK of a push (which writes the
 * step's trace row) is never behind the model reply sent after it, and a worker's rows
 * (nodes/<worker>.csv) are in time order with its steps one after the other. Checked where the
 * message times spread widely: a calibration profile whose round trips are 0.05 s or 3 s, and
 * links with 19 ms of jitter on 20 ms and 5% loss (a lost segment waits for a timeout), under
 * ASP (the ACK and the model leave together) and BSP (the model leaves at the round's close). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/plan.h"
#include "orchestrator/scenario.h"
#include "sim/sim.h"
#include "sim/sim_profile.h"
#include "tests/support/files.h"
#include "tests/support/simrun.h"

enum { WORKERS = 4 };

/* Every worker's trace: t_s never decreases and the steps go 1, 2, 3, ...; at least min_rows
 * rows each. Returns the rows of all workers. */
static int check_order(const char *dir, int min_rows)
{
	int total = 0;

	for (int i = 0; i < WORKERS; i++) {
		char path[600], line[512];
		double prev = -1;
		int want = 1, rows = 0;
		FILE *f;

		snprintf(path, sizeof path, "%s/nodes/worker%d.csv", dir, i);
		f = fopen(path, "r");
		cr_assert_not_null(f, "%s", path);
		cr_assert_not_null(fgets(line, sizeof line, f)); /* the header */
		while (fgets(line, sizeof line, f)) {
			double t;
			int step;

			cr_assert_eq(sscanf(line, "%lf,%*[^,],%d", &t, &step), 2, "%s: %s", path, line);
			cr_assert_geq(t, prev, "worker%d step %d at %.6f s, after step %d at %.6f s", i, step, t,
				      step - 1, prev);
			cr_assert_eq(step, want, "worker%d: step %d after step %d", i, step, want - 1);
			prev = t;
			want++;
			rows++;
		}
		fclose(f);
		cr_assert_geq(rows, min_rows, "worker%d: %d rows", i, rows);
		total += rows;
	}
	return total;
}

/* A profile: compute 1 ms, round trips 0.05 s (first half of the quantiles) or 3 s. */
static void wide_profile(const char *path)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s", path);
	fprintf(f, "all.compute_s =");
	for (int i = 0; i < SIM_PROFILE_Q; i++)
		fprintf(f, " 0.001");
	fprintf(f, "\nall.transfer_s =");
	for (int i = 0; i < SIM_PROFILE_Q; i++)
		fprintf(f, " %s", i < SIM_PROFILE_Q / 2 ? "0.05" : "3");
	fprintf(f, "\n");
	fclose(f);
}

static void profile_run(const char *barrier)
{
	char dir[256], prof[300], text[2048], run[300];
	struct sim_result r;

	support_tmpdir(dir, sizeof dir, "fifo");
	snprintf(prof, sizeof prof, "%s/p.conf", dir);
	wide_profile(prof);
	snprintf(text, sizeof text,
		 "name: f\nseed: 7\nstop: {time: 300s}\nconsistency: {barrier: %s}\nworkers: %d\n"
		 "linkcheck: off\nsimulation: {step_cost: 1ms, server_cost: 20us, profile: '%s'}\n",
		 barrier, WORKERS, prof);
	snprintf(run, sizeof run, "%s/run", dir);
	support_simulate_text(text, run, &r);
	check_order(run, 20);
	support_rm_rf(dir);
}

Test(sim_fifo, profile_asp_rows_in_order, .timeout = 60)
{
	profile_run("asp");
}

Test(sim_fifo, profile_bsp_rows_in_order, .timeout = 60)
{
	profile_run("bsp");
}

/* The link model: 20 ms +- 19 ms and 5% loss on every link. A calibrated round trip keeps
 * the measured distribution (sim_profile's round_trip_is_one_draw); here the model itself. */
static void link_run(const char *barrier)
{
	char dir[256], text[2048];
	struct sim_result r;

	support_tmpdir(dir, sizeof dir, "fifo");
	snprintf(text, sizeof text,
		 "name: f\nseed: 9\nstop: {time: 60s}\nconsistency: {barrier: %s}\nworkers: %d\n"
		 "linkcheck: off\nnetwork: {default: {delay: 20ms, jitter: 5ms, loss: 1%%}}\n"
		 "simulation: {step_cost: 1ms, server_cost: 20us}\n",
		 barrier, WORKERS);
	support_simulate_text(text, dir, &r);
	check_order(dir, 50);
	support_rm_rf(dir);
}

Test(sim_fifo, links_asp_rows_in_order, .timeout = 60)
{
	link_run("asp");
}

Test(sim_fifo, links_bsp_rows_in_order, .timeout = 60)
{
	link_run("bsp");
}
