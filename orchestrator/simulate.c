/* orchestrator/simulate: see simulate.h. */
#include "orchestrator/simulate.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collectors/plot.h"
#include "collectors/summary.h"
#include "lib/log.h"
#include "orchestrator/cli.h"
#include "orchestrator/plan.h"
#include "orchestrator/rundir.h"
#include "orchestrator/scenario.h"
#include "sim/sim.h"

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static int64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* The summary row: from the traces as for an emulated run, with the worker fields from the
 * simulation itself when there are no per-worker traces (more workers than node_files). */
static void summarize(const char *dir, const char *sweep_dir, const struct sim_result *r, bool node_files)
{
	struct summary_row row;
	char err[512], path[PATH_MAX + 32];

	if (summary_compute(dir, &row, err, sizeof err) < 0) {
		log_warn("summary of %s: %s", dir, err);
		return;
	}
	if (!node_files && r) {
		row.workers = r->workers;
		row.total_steps = r->total_steps;
		row.steps_min = r->steps_min;
		row.steps_median = r->steps_median;
		row.steps_max = r->steps_max;
		row.wait_fraction = r->wait_fraction;
		row.staleness_mean = r->staleness_mean;
		row.staleness_p99 = r->staleness_p99;
		row.bytes_moved = r->bytes_moved;
		row.bad_frames = 0;
		row.lacks = 0;
		row.unknown = 0;
	}
	snprintf(path, sizeof path, "%s/summary.csv", sweep_dir);
	if (summary_append(path, &row, err, sizeof err) < 0)
		log_warn("summary: %s", err);
}

static int simulate_one(const struct simulate_opts *o, const struct plan_run *run, const char *dir,
			const char *sweep_dir)
{
	const struct scenario *sc = run->scenario;
	struct rundir_meta meta = { .backend = "simulation", .prefix = "", .mode = "simulation",
				    .duration_s = -1, .status = "running" };
	struct sim_opts so = { .run = run, .dir = dir };
	struct sim_result res = { 0 };
	char err[512];
	int64_t t0 = mono_ns();
	int rc;

	if (rundir_prepare(dir, run) < 0)
		return CLI_EXIT_FAILED;
	so.step_cost_ns = (int64_t)sc->simulation.step_cost_us * 1000;
	so.server_cost_ns = (int64_t)sc->simulation.server_cost_us * 1000;
	if (!so.step_cost_ns || !so.server_cost_ns) {
		int64_t st, sv;

		if (sim_measure_costs(sc, &st, &sv) < 0) {
			log_error("simulate: cannot measure the model's step cost");
			return CLI_EXIT_FAILED;
		}
		if (!so.step_cost_ns)
			so.step_cost_ns = st;
		if (!so.server_cost_ns)
			so.server_cost_ns = sv;
		log_info("simulate: measured on this host: step %.3f ms, server %.3f ms per update "
			 "(set simulation.step_cost and server_cost for byte-identical reruns)",
			 st / 1e6, sv / 1e6);
	}
	meta.origin_ns = 0;
	meta.wall_start_ns = wall_ns();
	if (rundir_write_meta(dir, run, &meta) < 0)
		return CLI_EXIT_FAILED;
	rc = sim_run(&so, &res, err, sizeof err);
	meta.duration_s = (double)(mono_ns() - t0) / 1e9;
	meta.status = rc == 0 ? "complete" : "failed";
	if (rc < 0)
		fprintf(stderr, "%s: %s\n", sc->file, err);
	if (rundir_write_meta(dir, run, &meta) < 0 && rc == 0)
		rc = -EIO;
	if (rc == 0) {
		summarize(dir, sweep_dir, &res, res.workers <= sc->simulation.node_files);
		if (!o->quiet)
			fprintf(stderr, "  %s: %zu workers, %.0f simulated s in %.2f s wall (%llu events), final "
				"step min %.0f median %.1f max %.0f, wait fraction %.3f\n",
				run->id, res.workers, res.sim_end_s, meta.duration_s,
				(unsigned long long)res.events, res.steps_min, res.steps_median, res.steps_max,
				res.wait_fraction);
		rundir_mark_complete(dir);
		return CLI_EXIT_OK;
	}
	return rc == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
}

int simulate_main(const struct simulate_opts *o)
{
	char err[SCENARIO_ERR_MAX], out[PATH_MAX], abs_out[PATH_MAX], dir[PATH_MAX + PLAN_RUN_ID_MAX + 2];
	struct scenario *sc = NULL;
	struct plan *plan = NULL;
	int rc = CLI_EXIT_USAGE, failed = 0;
	size_t nruns, done = 0, skipped = 0;
	bool single;

	sc = scenario_load_with(o->scenario_path, o->sets, o->n_sets, err, sizeof err);
	if (!sc) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	plan = plan_new_compact(sc, err, sizeof err);
	if (!plan) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	if (o->out_dir)
		snprintf(out, sizeof out, "%s", o->out_dir);
	else
		rundir_default(sc->name, out, sizeof out);
	if (rundir_mkdirs(out, false) < 0 || !realpath(out, abs_out)) {
		fprintf(stderr, "stalenet simulate: cannot create %s: %s\n", out, strerror(errno));
		goto out;
	}
	nruns = plan_n_runs(plan);
	single = nruns == 1 && sc->sweep.n_axes == 0 && sc->sweep.repeat <= 1;
	if (rundir_check_out(abs_out, plan, single, "simulation", err, sizeof err) < 0) {
		fprintf(stderr, "stalenet simulate: %s: not a resume of these runs; choose another --out\n", err);
		goto out;
	}
	rc = CLI_EXIT_OK;
	for (size_t i = 0; i < nruns; i++) {
		const struct plan_run *run = plan_run(plan, i);
		int r;

		if (single)
			snprintf(dir, sizeof dir, "%s", abs_out);
		else
			snprintf(dir, sizeof dir, "%s/%s", abs_out, run->id);
		if (rundir_is_complete(dir)) {
			log_info("run %zu/%zu %s: already complete, skipped", i + 1, nruns, run->id);
			skipped++;
			continue;
		}
		/* an earlier attempt that did not complete: kept aside (or refused), as `run` does */
		int ra = rundir_set_aside(abs_out, dir, run->id, NULL, 0);
		if (ra == -EEXIST && !strcmp(dir, abs_out)) {
			fprintf(stderr, "stalenet simulate: %s holds an earlier attempt of this run that "
				"did not complete; remove it or choose another --out\n", abs_out);
			rc = CLI_EXIT_USAGE;
			break;
		}
		if (ra < 0) {
			rc = CLI_EXIT_FAILED;
			break;
		}
		if (!o->quiet)
			log_info("simulation %zu/%zu: %s", i + 1, nruns, run->id);
		r = simulate_one(o, run, dir, abs_out);
		if (r == CLI_EXIT_OK) {
			done++;
			continue;
		}
		failed++;
		if (r == CLI_EXIT_USAGE) {
			/* bad input (a profile that cannot be read, ...): every later run has it too */
			rc = r;
			break;
		}
		rc = CLI_EXIT_FAILED;
	}
	if (o->plot && rc == CLI_EXIT_OK) {
		int figs = plot_dir(abs_out, err, sizeof err);

		if (figs < 0)
			log_warn("plot: %s", err);
		else
			log_info("%d figures in %s/plots", figs, abs_out);
	}
	fprintf(stderr, "%s: %zu simulation(s) done, %zu skipped, %d failed; results in %s\n",
		rc == CLI_EXIT_OK ? "done" : rc == CLI_EXIT_USAGE ? "stopped on bad input" : "finished with failures",
		done, skipped, failed, abs_out);
out:
	plan_destroy(&plan);
	scenario_destroy(&sc);
	return rc;
}
