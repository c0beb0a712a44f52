/* orchestrator/resummary and `stalenet summary` (orchestrator/cmd): the recorded sweep's
 * summary.csv rebuilt from its traces, the same traces with columns of an older schema missing
 * (each field that needs them empty, every other field as recorded), a single run directory,
 * a hostile sweep (a FIFO, a link to /dev/zero, a directory where a file belongs) refused with
 * an error naming the file and in bounded time, and the exit codes of the commands in
 * orchestrator/cmd. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectors/plot.h"
#include "collectors/summary.h"
#include "orchestrator/cli.h"
#include "orchestrator/cmd.h"
#include "orchestrator/resummary.h"
#include "tests/support/files.h"

#define FIXTURE "tests/data/sweep_small"

static char *slurp(const char *path)
{
	return support_slurp(path, NULL);
}

/* Run a shell command formatted from a literal (cp -r and rm -rf of test directories). */
#define SH(...)                                                          \
	do {                                                             \
		char cmd_[1200];                                         \
		snprintf(cmd_, sizeof cmd_, __VA_ARGS__);                \
		cr_assert_eq(system(cmd_), 0, "%s", cmd_);               \
	} while (0)

/* A copy of the fixture sweep without its summary.csv. */
static void copy_fixture(char *dir)
{
	cr_assert_not_null(support_mkdtemp(dir));
	SH("cp -r " FIXTURE "/. '%s/' && rm '%s/summary.csv'", dir, dir);
}

/* Remove the column named col from the CSV file at DIR/rel (the fixture has no quoted fields). */
static void drop_column(const char *dir, const char *rel, const char *col)
{
	char path[600], *text, *out, *line, *save = NULL;
	int idx = -1;
	size_t used = 0;

	snprintf(path, sizeof path, "%s/%s", dir, rel);
	text = slurp(path);
	out = calloc(1, strlen(text) + 1);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f = line, *next;
		int k = 0, first = 1;

		if (idx < 0) {
			for (char *p = line; p; p = strchr(p, ','), p = p ? p + 1 : NULL, k++)
				if (!strncmp(p, col, strlen(col)) && (p[strlen(col)] == ',' || !p[strlen(col)]))
					idx = k;
			cr_assert_geq(idx, 0, "%s has no column %s", rel, col);
			k = 0;
		}
		for (; f; f = next, k++) {
			next = strchr(f, ',');
			size_t len = next ? (size_t)(next - f) : strlen(f);
			if (next)
				next++;
			if (k == idx)
				continue;
			used += (size_t)sprintf(out + used, "%s%.*s", first ? "" : ",", (int)len, f);
			first = 0;
		}
		out[used++] = '\n';
	}
	FILE *w = fopen(path, "w");
	cr_assert_not_null(w);
	fputs(out, w);
	fclose(w);
	free(text);
	free(out);
}

/* Field col (0-based) of the line of csv whose field 1 (run_id) is run_id, into buf. */
static const char *field(const char *csv, const char *run_id, int col, char *buf, size_t len)
{
	char key[200];

	snprintf(key, sizeof key, ",%s,", run_id);
	const char *line = strstr(csv, key);
	cr_assert_not_null(line, "no row %s in\n%s", run_id, csv);
	while (line > csv && line[-1] != '\n')
		line--;
	for (int k = 0; k < col; k++) {
		line = strchr(line, ',');
		cr_assert_not_null(line);
		line++;
	}
	size_t n = strcspn(line, ",\n");
	snprintf(buf, len, "%.*s", (int)n, line);
	return buf;
}

/* No shadow directory is left behind. */
static void expect_no_hidden(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	cr_assert_not_null(d);
	while ((de = readdir(d)))
		cr_expect(de->d_name[0] != '.' || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."),
			  "left behind: %s", de->d_name);
	closedir(d);
}

Test(resummary, fixture_rebuilds_identically)
{
	char dir[] = "/tmp/stalenet-resum-XXXXXX", path[600], err[1024] = "";
	struct resummary_report rep;

	copy_fixture(dir);
	cr_assert_eq(resummary_dir(dir, &rep, err, sizeof err), 4, "%s", err);
	cr_expect_eq(rep.runs, 4);
	/* recorded before release lateness was measured: each links.csv is of the older schema */
	cr_expect_eq(rep.adapted, 4, "%s", rep.notes);
	cr_expect(strstr(rep.notes, "consistency.barrier=asp+rep=1/links.csv: lacks late_p99_ms "
				    "(late_p99_worst_ms empty)") != NULL, "%s", rep.notes);
	snprintf(path, sizeof path, "%s/summary.csv", dir);
	char *got = slurp(path), *want = slurp(FIXTURE "/summary.csv");
	cr_expect_str_eq(got, want);
	expect_no_hidden(dir);
	free(got);
	free(want);
	SH("rm -rf '%s'", dir);
}

/* Older traces: each missing column empties exactly the fields computed from it, counters
 * included (total_steps without step is empty, not 0). Columns (with
 * the sweep key first): 1 run_id, 5 final_accuracy, 6 best_accuracy, 8 total_steps, 9-11 steps
 * min/median/max, 12 wait_fraction, 13-14 staleness, 15 bytes_moved, 17 link_drops. */
Test(resummary, older_schema_gives_empty_fields)
{
	char dir[] = "/tmp/stalenet-resum-XXXXXX", path[600], err[1024] = "", a[64], b[64];
	static const struct {
		const char *run;
		int blank[5];
	} expect[] = {
		{ "consistency.barrier=bsp+rep=1", { 12, -1 } },          /* wait_s of one worker */
		{ "consistency.barrier=asp+rep=2", { 17, -1 } },          /* links.csv's dropped */
		{ "consistency.barrier=asp+rep=1", { 8, 9, 10, 11, -1 } }, /* step of one worker */
		{ "consistency.barrier=bsp+rep=2", { 5, 6, -1 } },        /* eval.csv's test_accuracy */
	};
	struct resummary_report rep;

	copy_fixture(dir);
	drop_column(dir, "consistency.barrier=bsp+rep=1/nodes/worker1.csv", "wait_s");
	drop_column(dir, "consistency.barrier=asp+rep=2/links.csv", "dropped");
	drop_column(dir, "consistency.barrier=asp+rep=1/nodes/worker0.csv", "step");
	drop_column(dir, "consistency.barrier=bsp+rep=2/eval.csv", "test_accuracy");
	cr_assert_eq(resummary_dir(dir, &rep, err, sizeof err), 4, "%s", err);
	/* four notes of the dropped columns, and the lateness the three other links.csv lack */
	cr_expect_eq(rep.adapted, 7, "%s", rep.notes);
	cr_expect(strstr(rep.notes, "consistency.barrier=bsp+rep=1/nodes: compute_s, wait_s missing") != NULL,
		  "%s", rep.notes);
	cr_expect(strstr(rep.notes, "consistency.barrier=asp+rep=2/links.csv: lacks dropped") != NULL, "%s", rep.notes);
	snprintf(path, sizeof path, "%s/summary.csv", dir);
	char *got = slurp(path), *want = slurp(FIXTURE "/summary.csv");
	cr_expect_eq(strncmp(got, want, strcspn(want, "\n") + 1), 0, "same header");
	for (size_t r = 0; r < sizeof expect / sizeof *expect; r++)
		for (int col = 1; col <= 18; col++) {
			bool blank = false;

			for (int k = 0; k < 5 && expect[r].blank[k] >= 0; k++)
				blank |= expect[r].blank[k] == col;
			field(got, expect[r].run, col, a, sizeof a);
			if (blank)
				cr_expect_str_empty(a, "%s column %d: '%s'", expect[r].run, col, a);
			else
				cr_expect_str_eq(a, field(want, expect[r].run, col, b, sizeof b), "%s column %d",
						 expect[r].run, col);
		}
	/* the traces themselves are untouched */
	snprintf(path, sizeof path, "%s/consistency.barrier=bsp+rep=1/nodes/worker1.csv", dir);
	char *trace = slurp(path);
	cr_expect(strstr(trace, "wait_s") == NULL);
	free(trace);
	expect_no_hidden(dir);
	free(got);
	free(want);
	SH("rm -rf '%s'", dir);
}

/* A run directory on its own: its summary.csv beside its traces, one row. */
Test(resummary, single_run_directory)
{
	char dir[] = "/tmp/stalenet-resum-XXXXXX", path[600], err[1024] = "", a[64], b[64];
	struct resummary_report rep;

	cr_assert_not_null(support_mkdtemp(dir));
	SH("cp -r '" FIXTURE "/consistency.barrier=asp+rep=2/.' '%s/'", dir);
	cr_assert_eq(resummary_dir(dir, &rep, err, sizeof err), 1, "%s", err);
	snprintf(path, sizeof path, "%s/summary.csv", dir);
	char *got = slurp(path), *want = slurp(FIXTURE "/summary.csv");
	size_t lines = 0;
	for (const char *p = got; *p; p++)
		lines += *p == '\n';
	cr_expect_eq(lines, 2, "%s", got);
	for (int col = 0; col <= 18; col++)
		cr_expect_str_eq(field(got, "consistency.barrier=asp+rep=2", col, a, sizeof a),
				 field(want, "consistency.barrier=asp+rep=2", col, b, sizeof b), "column %d", col);
	expect_no_hidden(dir);
	free(got);
	free(want);
	SH("rm -rf '%s'", dir);
}

Test(resummary, no_run_is_an_error)
{
	char dir[] = "/tmp/stalenet-resum-XXXXXX", err[1024] = "";
	struct resummary_report rep;

	cr_assert_not_null(support_mkdtemp(dir));
	cr_expect_eq(resummary_dir(dir, &rep, err, sizeof err), -ENOENT);
	cr_expect(strstr(err, "no run in it") != NULL, "%s", err);
	expect_no_hidden(dir);
	rmdir(dir);
	cr_expect_eq(resummary_dir("/nonexistent/stalenet", &rep, err, sizeof err), -ENOENT);
}

Test(cmd, summary_exit_codes)
{
	char dir[] = "/tmp/stalenet-resum-XXXXXX", empty[] = "/tmp/stalenet-resum-XXXXXX", path[600];
	char *ok[] = { "summary", dir, NULL }, *none[] = { "summary", NULL }, *opt[] = { "summary", dir, "--bad", NULL };
	char *two[] = { "summary", dir, dir, NULL }, *noruns[] = { "summary", empty, NULL };
	struct stat st;

	copy_fixture(dir);
	cr_assert_not_null(support_mkdtemp(empty));
	cr_expect_eq(cmd_summary(1, none), CLI_EXIT_USAGE);
	cr_expect_eq(cmd_summary(3, opt), CLI_EXIT_USAGE);
	cr_expect_eq(cmd_summary(3, two), CLI_EXIT_USAGE);
	cr_expect_eq(cmd_summary(2, noruns), CLI_EXIT_USAGE);
	snprintf(path, sizeof path, "%s/summary.csv", dir);
	cr_expect_neq(stat(path, &st), 0, "usage errors write nothing");
	cr_expect_eq(cmd_summary(2, ok), CLI_EXIT_OK);
	cr_expect_eq(stat(path, &st), 0);
	SH("rm -rf '%s' '%s'", dir, empty);
}

/* The handlers moved out of the run pipeline keep their usage errors (exit 2, before any host
 * check or work). */
Test(cmd, usage_errors)
{
	char *plot_none[] = { "plot", NULL }, *plot_opt[] = { "plot", "--x", NULL };
	char *plot_missing[] = { "plot", "/nonexistent/stalenet-run", NULL };
	char *doctor_arg[] = { "doctor", "x", NULL }, *cleanup_opt[] = { "cleanup", "--bogus", NULL };

	cr_expect_eq(cmd_plot(1, plot_none), CLI_EXIT_USAGE);
	cr_expect_eq(cmd_plot(2, plot_opt), CLI_EXIT_USAGE);
	cr_expect_eq(cmd_plot(2, plot_missing), CLI_EXIT_USAGE);
	cr_expect_eq(cmd_doctor(2, doctor_arg), CLI_EXIT_USAGE);
	cr_expect_eq(cmd_cleanup(2, cleanup_opt), CLI_EXIT_USAGE);
}

/* Run directories written by someone else, read as root: eval.csv a FIFO (an open would wait
 * for a writer), a node trace a link to /dev/zero (a read would never end), meta.json a
 * directory. summary_rebuild, resummary_dir and `stalenet summary` fail at once with an error
 * naming the file, and the summary.csv already there is kept. plot_dir fails the same way on a
 * run's own files (eval.csv, meta.json) and leaves an unreadable node trace out of its figures
 * with a warning. The timeout is the test that nothing blocks. */
Test(resummary, hostile_run_files_are_refused, .timeout = 120)
{
	static const struct {
		const char *rel;    /* under the sweep */
		int kind;           /* 0 FIFO, 1 link to /dev/zero, 2 directory */
		const char *what;
		bool plot_fails;
	} cases[] = {
		{ "consistency.barrier=bsp+rep=1/eval.csv", 0, "a FIFO", true },
		{ "consistency.barrier=asp+rep=1/nodes/worker0.csv", 1, "a character device", false },
		{ "consistency.barrier=bsp+rep=2/meta.json", 2, "a directory", true },
		{ "consistency.barrier=asp+rep=2/scenario.yaml", 0, "a FIFO", false },
	};
	char err[1024], path[700];
	struct resummary_report rep;

	/* a plot that succeeds needs gnuplot (a build dependency); one that fails stops before it */
	bool gnuplot = system("gnuplot --version >/dev/null 2>&1") == 0;

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char dir[] = "/tmp/stalenet-resum-XXXXXX", *cmd[] = { "summary", dir, NULL };
		char *before, *after;

		cr_assert_not_null(support_mkdtemp(dir));
		SH("cp -r " FIXTURE "/. '%s/'", dir);
		snprintf(path, sizeof path, "%s/%s", dir, cases[i].rel);
		cr_assert_eq(unlink(path), 0, "%s", path);
		if (cases[i].kind == 0)
			cr_assert_eq(mkfifo(path, 0644), 0);
		else if (cases[i].kind == 1)
			cr_assert_eq(symlink("/dev/zero", path), 0);
		else
			cr_assert_eq(mkdir(path, 0755), 0);
		snprintf(path, sizeof path, "%s/summary.csv", dir);
		before = slurp(path);

		err[0] = '\0';
		if (strstr(cases[i].rel, "scenario.yaml")) {
			/* read only for a run whose meta.json lacks "target": this one has it */
			cr_expect_eq(summary_rebuild(dir, err, sizeof err), 4, "%s", err);
			if (gnuplot)
				cr_expect_geq(plot_dir(dir, err, sizeof err), 0, "%s", err);
			SH("rm -rf '%s'", dir);
			free(before);
			continue;
		}
		cr_expect_lt(summary_rebuild(dir, err, sizeof err), 0, "%s", cases[i].rel);
		cr_expect(strstr(err, cases[i].rel) && strstr(err, "not a regular file") &&
			  strstr(err, cases[i].what), "summary_rebuild: %s", err);
		err[0] = '\0';
		cr_expect_lt(resummary_dir(dir, &rep, err, sizeof err), 0, "%s", cases[i].rel);
		cr_expect(strstr(err, cases[i].rel) && strstr(err, "not a regular file"),
			  "resummary_dir: %s", err);
		cr_expect_eq(cmd_summary(2, cmd), CLI_EXIT_FAILED);
		after = slurp(path);
		cr_expect_str_eq(after, before, "the old summary.csv is kept");
		free(after);
		err[0] = '\0';
		if (cases[i].plot_fails) {
			cr_expect_lt(plot_dir(dir, err, sizeof err), 0, "%s", cases[i].rel);
			cr_expect(strstr(err, cases[i].rel) && strstr(err, "not a regular file"),
				  "plot_dir: %s", err);
		} else if (gnuplot) {
			cr_expect_geq(plot_dir(dir, err, sizeof err), 0, "%s", err);
		}
		SH("rm -rf '%s'", dir);
		free(before);
	}
}
