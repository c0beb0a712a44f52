/* A sweep whose values hold commas: model.hidden: [[128], [128, 64]]. The plan's runs get
 * meta.json through rundir, traces (copied from the recorded fixture), and summary rows through
 * summary_append; summary.csv must read back with both labels whole, survive a resumed run
 * (the rewrite path re-quotes the old rows), rebuild to the same text, and plot. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectors/meta.h"
#include "collectors/plot.h"
#include "collectors/summary.h"
#include "collectors/table.h"
#include "orchestrator/plan.h"
#include "orchestrator/rundir.h"
#include "orchestrator/scenario.h"
#include "tests/support/files.h"

static const char SCENARIO[] =
	"name: hidden\n"
	"seed: 42\n"
	"target: 0.6\n"
	"stop: {time: 8s}\n"
	"data: {set: fashion-mnist, partition: {scheme: iid}}\n"
	"model: {kind: mlp, hidden: [32]}\n"
	"train: {batch: 64, lr: 0.05}\n"
	"topology: {kind: parameter-server}\n"
	"consistency: {barrier: bsp}\n"
	"workers: 3\n"
	"sweep: {model.hidden: [[128], [128, 64]]}\n";

static const char FIXTURE_RUN[] = "tests/data/sweep_small/consistency.barrier=bsp+rep=1";

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Run a shell command built like printf; it must succeed. */
static void sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static char *slurp(const char *path)
{
	return support_slurp(path, NULL);
}

/* Run r of the sweep: its directory, meta.json with status, the fixture's traces, and its
 * summary row appended to SWEEP/summary.csv. */
static void do_run(const char *sweep, const struct plan_run *r, const char *status)
{
	char dir[1024], path[1100], err[512];
	struct rundir_meta rm = { .backend = "nfq", .prefix = "sn9-", .origin_ns = 1,
				  .wall_start_ns = 1795389182316974415LL, .duration_s = 8.5,
				  .status = status };
	struct summary_row row;

	snprintf(dir, sizeof dir, "%s/%s", sweep, r->id);
	cr_assert_eq(rundir_prepare(dir, r), 0);
	sh("cd '%s' && cp -r eval.csv events.csv links.csv linkcheck.csv partition.csv progress.csv "
	   "nodes '%s'/", FIXTURE_RUN, dir);
	cr_assert_eq(rundir_write_meta(dir, r, &rm), 0);
	cr_assert_eq(summary_compute(dir, &row, err, sizeof err), 0, "%s", err);
	snprintf(path, sizeof path, "%s/summary.csv", sweep);
	cr_assert_eq(summary_append(path, &row, err, sizeof err), 0, "%s", err);
	if (strcmp(status, "complete") == 0)
		cr_assert_eq(rundir_mark_complete(dir), 0);
}

/* summary.csv has one row per run of p, in plan order, labelled with its sweep value. */
static void check_summary(const char *sweep, const struct plan *p, const char *last_status)
{
	char path[1100], err[512];
	struct table *t;
	int ck, cid, cst;

	snprintf(path, sizeof path, "%s/summary.csv", sweep);
	t = table_load(path, NULL, err, sizeof err);
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(table_rows(t), plan_n_runs(p));
	ck = table_col(t, "model.hidden");
	cid = table_col(t, "run_id");
	cst = table_col(t, "status");
	cr_assert(ck == 0 && cid == 1 && cst > cid, "columns %d %d %d", ck, cid, cst);
	cr_assert_eq(table_cols(t), 25, "one sweep key and the fixed columns");
	for (size_t i = 0; i < plan_n_runs(p); i++) {
		const struct plan_run *r = plan_run(p, i);

		cr_assert_str_eq(table_get(t, i, (size_t)ck), r->sweep_values[0]);
		cr_assert_str_eq(table_get(t, i, (size_t)cid), r->id);
		cr_assert_str_eq(table_get(t, i, (size_t)cst),
				 i + 1 == plan_n_runs(p) ? last_status : "complete");
		cr_assert_str_eq(table_get(t, i, table_col(t, "seed") >= 0 ?
						   (size_t)table_col(t, "seed") : 0),
				 (snprintf(err, sizeof err, "%llu", (unsigned long long)r->seed), err));
	}
	table_destroy(&t);
}

Test(sweep_hidden, summary_resume_rebuild_plot, .timeout = 180)
{
	char tmp[] = "/tmp/stalenet-hidden-XXXXXX", sweep[600], path[1200], err[1024];
	char *appended, *rebuilt;
	struct scenario *sc;
	struct plan *p;

	cr_assert_not_null(support_mkdtemp(tmp));
	snprintf(sweep, sizeof sweep, "%s/sweep", tmp);
	cr_assert_eq(rundir_mkdirs(sweep, false), 0);
	sc = scenario_parse(SCENARIO, strlen(SCENARIO), "hidden.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	p = plan_new(sc, err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	cr_assert_eq(plan_n_runs(p), 2);
	cr_assert_eq(plan_run(p, 1)->n_sweep_values, 1);
	cr_assert_str_eq(plan_run(p, 1)->sweep_keys[0], "model.hidden");
	cr_assert_not_null(strchr(plan_run(p, 1)->sweep_values[0], ','),
			   "the value under test holds a comma: %s", plan_run(p, 1)->sweep_values[0]);

	/* first pass: the second run is interrupted */
	do_run(sweep, plan_run(p, 0), "complete");
	do_run(sweep, plan_run(p, 1), "interrupted");
	check_summary(sweep, p, "interrupted");
	appended = slurp((snprintf(path, sizeof path, "%s/summary.csv", sweep), path));
	cr_assert_not_null(strstr(appended, "\"[128, 64]\"") ? appended : strstr(appended, "\"[128,64]\""),
			   "the comma-holding value is quoted:\n%s", appended);
	free(appended);

	/* resume: what the summary and the markers say is done is skipped, the rest is run again
	 * and its row replaced (summary_append rewrites the file) */
	for (size_t i = 0; i < plan_n_runs(p); i++) {
		snprintf(path, sizeof path, "%s/%s", sweep, plan_run(p, i)->id);
		if (rundir_is_complete(path)) {
			cr_assert_eq(i, 0);
			continue;
		}
		cr_assert_eq(i, 1);
		do_run(sweep, plan_run(p, i), "complete");
	}
	check_summary(sweep, p, "complete");
	snprintf(path, sizeof path, "%s/summary.csv", sweep);
	appended = slurp(path);

	/* a rebuild from the run directories gives the same file */
	cr_assert_eq(summary_rebuild(sweep, err, sizeof err), 2, "%s", err);
	rebuilt = slurp(path);
	cr_assert_str_eq(rebuilt, appended);
	free(rebuilt);
	free(appended);

	/* plots: the runs are two sweep points labelled by their values */
	if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
		int n = plot_dir(sweep, err, sizeof err);

		cr_assert_gt(n, 0, "plot_dir: %d %s", n, n < 0 ? err : "");
		snprintf(path, sizeof path, "%s/plots/accuracy_time.svg", sweep);
		if (access(path, R_OK) == 0) {
			char *svg = slurp(path);

			cr_assert(strstr(svg, "128, 64") || strstr(svg, "128,64"),
				  "no label of the second point in %s", path);
			free(svg);
		}
	}

	/* the command-line check accepts the scenario */
	if (access("build/stalenet", X_OK) == 0) {
		FILE *f;

		snprintf(path, sizeof path, "%s/hidden.yaml", tmp);
		f = fopen(path, "w");
		cr_assert_not_null(f);
		fputs(SCENARIO, f);
		fclose(f);
		sh("build/stalenet check '%s' >/dev/null", path);
	}
	plan_destroy(&p);
	scenario_destroy(&sc);
	sh("rm -rf '%s'", tmp);
}
