/* The writers root uses in a run directory a user may own, each against a symlink planted at its
 * target and at the temporary names the writers used to use (meta.json.tmp, x.conf.tmp,
 * summary.csv.tmp.PID) pointing at a canary file outside: the canary never changes, and the
 * write either replaces the symlink itself or fails with an error. Also the run directory's
 * subdirectories and the figures gnuplot renders. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectors/csv.h"
#include "collectors/plot.h"
#include "collectors/summary.h"
#include "lib/kv.h"
#include "orchestrator/plan.h"
#include "orchestrator/rundir.h"
#include "orchestrator/scenario.h"
#include "tests/support/files.h"

static char base[64], canary[128], run[128];

static void setup(void)
{
	support_tmpdir(base, sizeof base, "rootw");
	snprintf(canary, sizeof canary, "%s/canary", base);
	support_canary_plant(canary);
	snprintf(run, sizeof run, "%s/run", base);
	cr_assert_eq(mkdir(run, 0777), 0);
}

static void teardown(void)
{
	if (support_rm_rf(base) < 0)
		cr_log_warn("could not remove %s", base);
}

TestSuite(rootwrites, .init = setup, .fini = teardown);

/* Plant RUN/rel -> canary. */
static void plant(const char *dir, const char *rel)
{
	char p[256];

	snprintf(p, sizeof p, "%s/%s", dir, rel);
	cr_assert_eq(symlink(canary, p), 0, "symlink %s", p);
}

static void is_regular(const char *dir, const char *rel)
{
	char p[256];
	struct stat st;

	snprintf(p, sizeof p, "%s/%s", dir, rel);
	cr_assert_eq(lstat(p, &st), 0, "%s", p);
	cr_assert(S_ISREG(st.st_mode), "%s is not a regular file", p);
}

Test(rootwrites, kv_save)
{
	struct kv *kv = kv_new();
	char p[256], err[256];
	struct kv *back;

	cr_assert_eq(mkdir(strcat(strcpy(p, run), "/nodes"), 0777), 0);
	plant(run, "nodes/x.conf");
	plant(run, "nodes/x.conf.tmp");
	cr_assert_eq(kv_set(kv, "train.batch", "64"), 0);
	snprintf(p, sizeof p, "%s/nodes/x.conf", run);
	cr_assert_eq(kv_save(kv, p), 0);
	support_canary_intact(canary);
	is_regular(run, "nodes/x.conf");
	back = kv_load(p, err, sizeof err);
	cr_assert_not_null(back, "%s", err);
	cr_assert_str_eq(kv_get(back, "train.batch"), "64");
	kv_destroy(&back);
	kv_destroy(&kv);
}

Test(rootwrites, trace_file)
{
	char p[256];

	plant(run, "events.csv");
	snprintf(p, sizeof p, "%s/events.csv", run);
	cr_assert_null(csv_writer_open(p, "t_s,what"));
	support_canary_intact(canary);
	snprintf(p, sizeof p, "%s/hard.csv", run);
	cr_assert_eq(link(canary, p), 0);
	cr_assert_null(csv_writer_open(p, "t_s,what"));
	support_canary_intact(canary);
}

Test(rootwrites, meta_json_and_complete)
{
	struct scenario sc = { .name = "s", .seed = 1 };
	struct plan_run r = { .id = "r1", .scenario = &sc, .n_nodes = 2 };
	struct rundir_meta m = { .duration_s = -1, .status = "running", .backend = "nfq", .prefix = "ab" };
	char p[256], buf[256] = "";
	FILE *f;

	plant(run, "meta.json");
	plant(run, "meta.json.tmp");
	cr_assert_eq(rundir_write_meta(run, &r, &m), 0);
	support_canary_intact(canary);
	is_regular(run, "meta.json");
	snprintf(p, sizeof p, "%s/meta.json", run);
	f = fopen(p, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(buf, sizeof buf, f));
	fclose(f);
	cr_assert_str_eq(buf, "{\n");
	plant(run, "complete");
	cr_assert_lt(rundir_mark_complete(run), 0);
	support_canary_intact(canary);
}

Test(rootwrites, run_subdirectory_symlink_refused)
{
	struct plan_run r = { .id = "r1" };
	char elsewhere[160], p[256];

	snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", base);
	cr_assert_eq(mkdir(elsewhere, 0777), 0);
	snprintf(p, sizeof p, "%s/nodes", run);
	cr_assert_eq(symlink(elsewhere, p), 0);
	cr_assert_eq(rundir_prepare(run, &r), -ENOTDIR);
	snprintf(p, sizeof p, "%s/scenario.yaml", elsewhere);
	cr_assert_neq(access(p, F_OK), 0);
	snprintf(p, sizeof p, "%s/scenario.yaml", run);
	cr_assert_neq(access(p, F_OK), 0);
}

Test(rootwrites, summary_csv)
{
	char cmd[1024], p[256], err[256], tmpname[64];

	snprintf(p, sizeof p, "%s/sweep", base);
	snprintf(cmd, sizeof cmd, "cp -r tests/data/sweep_small '%s'", p);
	cr_assert_eq(system(cmd), 0);
	snprintf(cmd, sizeof cmd, "%s/summary.csv", p);
	cr_assert_eq(unlink(cmd), 0);
	plant(p, "summary.csv");
	snprintf(tmpname, sizeof tmpname, "summary.csv.tmp.%d", (int)getpid());
	plant(p, tmpname);
	cr_assert_eq(summary_rebuild(p, err, sizeof err), 4, "%s", err);
	support_canary_intact(canary);
	is_regular(p, "summary.csv");
}

Test(rootwrites, plot_figures, .timeout = 120)
{
	char cmd[1024], p[256], err[256], fig[96];
	int n;

	snprintf(p, sizeof p, "%s/sweep", base);
	snprintf(cmd, sizeof cmd, "cp -r tests/data/sweep_small '%s' && mkdir '%s/plots'", p, p);
	cr_assert_eq(system(cmd), 0);
	for (size_t i = 0; PLOT_FIGURES[i]; i++) {
		snprintf(fig, sizeof fig, "plots/%s.svg", PLOT_FIGURES[i]);
		plant(p, fig);
		snprintf(fig, sizeof fig, "plots/%s.png", PLOT_FIGURES[i]);
		plant(p, fig);
	}
	n = plot_dir(p, err, sizeof err);
	cr_assert_gt(n, 0, "plot_dir: %d %s", n, n < 0 ? err : "");
	support_canary_intact(canary);
	snprintf(fig, sizeof fig, "plots/%s.svg", PLOT_FIGURES[0]);
	is_regular(p, fig);
}
