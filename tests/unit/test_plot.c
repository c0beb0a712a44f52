/* Unit tests for collectors/plot: render every figure of the recorded sweep fixture
 * (tests/data/sweep_small, recorded with `stalenet run tests/data/sweep_small.yaml`) and of a
 * single run of it, and check each file is a real PNG / SVG with non-trivial content; plot a
 * copy of it in which every string gnuplot could see tries to run a command, and check that
 * nothing ran. Needs the gnuplot binary (gnuplot-nox), which is a build dependency; the hostile
 * tests skip without it, and fail instead under STALENET_TESTS_MUST_RUN=1. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectors/plot.h"
#include "collectors/plot_data.h"
#include "tests/support/files.h"

static unsigned char *slurp(const char *path, size_t *len)
{
	return (unsigned char *)support_slurp(path, len);
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void check_png(const char *path, uint32_t min_w, uint32_t min_h)
{
	static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	size_t len;
	unsigned char *b = slurp(path, &len);

	cr_assert_geq(len, 33, "%s too short", path);
	cr_assert_eq(memcmp(b, sig, 8), 0, "%s: bad PNG signature", path);
	cr_assert_eq(be32(b + 8), 13, "%s: IHDR length", path);
	cr_assert_eq(memcmp(b + 12, "IHDR", 4), 0, "%s: first chunk is not IHDR", path);
	cr_assert_geq(be32(b + 16), min_w, "%s: width %u", path, be32(b + 16));
	cr_assert_geq(be32(b + 20), min_h, "%s: height %u", path, be32(b + 20));
	/* a blank image compresses to almost nothing; a real figure does not */
	cr_assert_gt(len, 15000, "%s: only %zu bytes", path, len);
	free(b);
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void check_svg(const char *path, size_t min_elems)
{
	size_t len;
	char *b = (char *)slurp(path, &len);
	size_t elems;

	b[len < (8u << 20) ? len : len - 1] = '\0';
	cr_assert_not_null(strstr(b, "<svg"), "%s: no <svg root", path);
	cr_assert_not_null(strstr(b, "</svg>"), "%s: not closed", path);
	elems = count(b, "<path") + count(b, "<polyline");
	cr_assert_geq(elems, min_elems, "%s: only %zu path/polyline elements", path, elems);
	free(b);
}

static void copy_tree(const char *from, const char *to)
{
	char cmd[1024];

	snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", from, to);
	cr_assert_eq(system(cmd), 0);
}

/* The fleet figures are drawn only for runs with fleet.csv / recover.csv (topology fleet). */
static bool is_fleet_figure(const char *name)
{
	return strncmp(name, "fleet_", 6) == 0;
}

static void rm_rf(const char *dir)
{
	cr_assert_eq(support_rm_rf(dir), 0);
}

/* Updates with a staleness in the workers' own traces of the runs under sweep_dir whose
 * directory matches pattern (the naive reference for the staleness histogram's counts). */
static size_t worker_updates(const char *sweep_dir, const char *pattern)
{
	char pat[900], line[512];
	size_t n = 0;
	glob_t g;

	snprintf(pat, sizeof pat, "%s/%s/nodes/worker*.csv", sweep_dir, pattern);
	cr_assert_eq(glob(pat, 0, NULL, &g), 0, "no traces match %s", pat);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		FILE *f = fopen(g.gl_pathv[i], "r");

		cr_assert_not_null(f);
		cr_assert_not_null(fgets(line, sizeof line, f)); /* header */
		while (fgets(line, sizeof line, f)) {
			char *p = line;

			/* t_s,node,step,compute_s,wait_s,staleness,... */
			for (int c = 0; c < 5 && p; c++)
				p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
			n += p && *p != ',';
		}
		fclose(f);
	}
	globfree(&g);
	return n;
}

Test(plot, sweep_fixture_all_figures, .timeout = 120)
{
	char dir[] = "/tmp/stalenet-plot-XXXXXX", sweep[600], path[700], err[1024];
	int n = 0;

	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(sweep, sizeof sweep, "%s/sweep", dir);
	copy_tree("tests/data/sweep_small", sweep);
	n = plot_dir(sweep, err, sizeof err);
	cr_assert_eq(n, 8, "plot_dir: %d %s", n, n < 0 ? err : "");
	for (size_t i = 0; PLOT_FIGURES[i]; i++) {
		if (is_fleet_figure(PLOT_FIGURES[i]))
			continue; /* no fleet run in the fixture: fleet_sweep below */
		snprintf(path, sizeof path, "%s/plots/%s.png", sweep, PLOT_FIGURES[i]);
		check_png(path, 800, 500);
		snprintf(path, sizeof path, "%s/plots/%s.svg", sweep, PLOT_FIGURES[i]);
		check_svg(path, 12);
	}
	/* the staleness histogram counts each update once (a parameter server's own trace
	 * repeats its workers' updates) */
	{
		size_t len;
		char *svg, want[64];

		snprintf(path, sizeof path, "%s/plots/staleness_hist.svg", sweep);
		svg = (char *)slurp(path, &len);
		svg[len < (8u << 20) ? len : len - 1] = '\0';
		for (int b = 0; b < 2; b++) {
			const char *name = b ? "bsp" : "asp";
			char pat[64];

			snprintf(pat, sizeof pat, "consistency.barrier=%s+*", name);
			snprintf(want, sizeof want, "%s (%zu updates)", name, worker_updates(sweep, pat));
			cr_assert_not_null(strstr(svg, want), "staleness_hist.svg lacks '%s'", want);
		}
		free(svg);
	}
	/* temporary data is cleaned up: only the 16 figures remain */
	snprintf(path, sizeof path, "ls -A '%s/plots' | wc -l | grep -qx 16", sweep);
	cr_assert_eq(system(path), 0, "plots/ holds more than the figures");
	rm_rf(dir);
}

Test(plot, single_run, .timeout = 120)
{
	char dir[] = "/tmp/stalenet-plot-XXXXXX", run[600], path[700], err[1024];
	int n;

	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(run, sizeof run, "%s/run", dir);
	copy_tree("tests/data/sweep_small/consistency.barrier=bsp+rep=1", run);
	n = plot_dir(run, err, sizeof err);
	cr_assert_eq(n, 8, "plot_dir: %d %s", n, n < 0 ? err : "");
	snprintf(path, sizeof path, "%s/plots/accuracy_time.png", run);
	check_png(path, 800, 500);
	rm_rf(dir);
}

Test(plot, missing_inputs_skip_figures, .timeout = 60)
{
	char dir[] = "/tmp/stalenet-plot-XXXXXX", path[700], err[1024];
	FILE *f;
	int n;

	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(path, sizeof path, "%s/meta.json", dir);
	f = fopen(path, "w");
	fputs("{\"run_id\":\"only-eval\"}", f);
	fclose(f);
	snprintf(path, sizeof path, "%s/eval.csv", dir);
	f = fopen(path, "w");
	fputs("t_s,node,updates,epoch,samples,test_accuracy,test_loss,train_loss\n"
	      "1,server0,10,0.1,640,0.3,1.5,\n2,server0,20,0.2,1280,0.5,1.1,\n", f);
	fclose(f);
	n = plot_dir(dir, err, sizeof err);
	cr_assert_eq(n, 2, "only the two accuracy figures: %d %s", n, n < 0 ? err : "");
	snprintf(path, sizeof path, "%s/plots/link_drops.png", dir);
	cr_assert_neq(access(path, F_OK), 0);
	rm_rf(dir);
}

Test(plot, errors_are_reported, .timeout = 60)
{
	char err[1024] = "";
	char dir[] = "/tmp/stalenet-plot-XXXXXX", path[700];
	FILE *f;
	int n;

	n = plot_dir("/nonexistent-stalenet-dir", err, sizeof err);
	cr_assert_lt(n, 0);
	cr_assert_not_null(strstr(err, "/nonexistent-stalenet-dir"));
	/* a failing gnuplot: its exit status and stderr become the error */
	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(path, sizeof path, "%s/meta.json", dir);
	f = fopen(path, "w");
	fputs("{\"run_id\":\"r\"}", f);
	fclose(f);
	snprintf(path, sizeof path, "%s/eval.csv", dir);
	f = fopen(path, "w");
	fputs("t_s,node,updates,epoch,samples,test_accuracy,test_loss,train_loss\n"
	      "1,server0,10,0.1,640,0.3,1.5,\n", f);
	fclose(f);
	setenv("GNUPLOT", "false", 1);
	n = plot_dir(dir, err, sizeof err);
	unsetenv("GNUPLOT");
	cr_assert_eq(n, -EIO, "%d %s", n, err);
	cr_assert_not_null(strstr(err, "exit 1"), "%s", err);
	cr_assert_eq(support_rm_rf(dir), 0);
}

/* ---- hostile input ------------------------------------------------------------------- */

static void need_gnuplot(void)
{
	const char *must = getenv("STALENET_TESTS_MUST_RUN");

	if (system("gnuplot --version >/dev/null 2>&1") == 0)
		return;
	if (must && strcmp(must, "1") == 0)
		cr_assert_fail("gnuplot is not installed (STALENET_TESTS_MUST_RUN=1)");
	cr_skip_test("gnuplot is not installed");
}

/* Every attempt runs `touch $STALENET_CANARY` (an environment variable, so that names which
 * cannot hold a '/' can still aim at the canary). */
#define CMD "touch $STALENET_CANARY"

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s", path);
	cr_assert_geq(fputs(text, f), 0);
	cr_assert_eq(fclose(f), 0);
}

static char *read_text(const char *path)
{
	size_t len;
	char *b = (char *)slurp(path, &len);

	b[len < (8u << 20) ? len : len - 1] = '\0';
	return b;
}

/* Replace every `from` in the file at path by `to`. */
static void replace_in(const char *path, const char *from, const char *to)
{
	char *in = read_text(path), *out = malloc(strlen(in) * 8 + strlen(to) * 256 + 1), *o = out;
	size_t fl = strlen(from), tl = strlen(to);

	for (const char *p = in; *p;) {
		if (strncmp(p, from, fl) == 0) {
			memcpy(o, to, tl);
			o += tl;
			p += fl;
		} else {
			*o++ = *p++;
		}
	}
	*o = '\0';
	write_file(path, out);
	free(in);
	free(out);
}

/* s as a JSON string literal into out. */
static void json_str(char *out, size_t outlen, const char *s)
{
	size_t n = 0;

	out[n++] = '"';
	for (; *s && n + 8 < outlen; s++) {
		if (*s == '"' || *s == '\\')
			n += (size_t)snprintf(out + n, outlen - n, "\\%c", *s);
		else if (*s == '\n')
			n += (size_t)snprintf(out + n, outlen - n, "\\n");
		else
			out[n++] = *s;
	}
	out[n++] = '"';
	out[n] = '\0';
}

static void write_meta(const char *run, const char *run_id, const char *key, const char *val)
{
	char path[1200], id[600], k[600], v[600], desc[600], text[4096];

	json_str(id, sizeof id, run_id);
	json_str(desc, sizeof desc, "desc `" CMD "` \"; system(\"" CMD "\"); \"\n@m");
	cr_assert_lt(snprintf(path, sizeof path, "%s/meta.json", run), (int)sizeof path, "%s: path too long", run);
	if (key) {
		json_str(k, sizeof k, key);
		json_str(v, sizeof v, val);
		snprintf(text, sizeof text,
			 "{\"run_id\": %s, \"description\": %s, \"target\": 0.75, \"status\": "
			 "\"complete\", \"sweep\": {%s: %s}}\n", id, desc, k, v);
	} else {
		snprintf(text, sizeof text,
			 "{\"run_id\": %s, \"description\": %s, \"target\": 0.75, \"status\": "
			 "\"complete\"}\n", id, desc);
	}
	write_file(path, text);
}

/* Node names in file names and in the CSV node columns. CSV fields hold no quote, comma or
 * newline (not the traces' format); file names hold anything but '/'. */
static void poison_nodes(const char *run)
{
	static const char *const csvs[] = { "linkcheck.csv", "links.csv", "eval.csv",
					    "partition.csv", "events.csv" };
	static const char *const files[][2] = {
		{ "worker0.csv", "worker`" CMD "`0.csv" },
		{ "worker1.csv", "worker\"; system(\"" CMD "\"); \"1.csv" },
		{ "worker2.csv", "worker\nm = 'system(\"" CMD "\")'\n@m\n2.csv" },
	};
	char a[1200], b[1200];

	for (size_t i = 0; i < sizeof csvs / sizeof csvs[0]; i++) {
		snprintf(a, sizeof a, "%s/%s", run, csvs[i]);
		if (access(a, F_OK) != 0)
			continue;
		replace_in(a, "worker1", "w`" CMD "`1");
		replace_in(a, "worker2", "w'; system('" CMD "'); '2");
		replace_in(a, "server0", "s@m;$(" CMD ")0");
		replace_in(a, "worker0", "w\xff\xfe\xc3(\xc3\xa9)0"); /* not UTF-8, then é */
	}
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(a, sizeof a, "%s/nodes/%s", run, files[i][0]);
		snprintf(b, sizeof b, "%s/nodes/%s", run, files[i][1]);
		cr_assert_eq(rename(a, b), 0, "rename %s", a);
	}
	snprintf(a, sizeof a, "%s/scenario.yaml", run);
	if (access(a, F_OK) == 0) {
		FILE *f = fopen(a, "a");

		cr_assert_not_null(f);
		fputs("description: \"`" CMD "` @m\"\n", f);
		fclose(f);
	}
}

/* Every figure is drawn, and every SVG is UTF-8 (XML) whatever bytes the names held. */
static void check_all_figures(const char *dir)
{
	char path[1200], cmd[1400];

	for (size_t i = 0; PLOT_FIGURES[i]; i++) {
		if (is_fleet_figure(PLOT_FIGURES[i]))
			continue;
		snprintf(path, sizeof path, "%s/plots/%s.png", dir, PLOT_FIGURES[i]);
		check_png(path, 800, 500);
		snprintf(path, sizeof path, "%s/plots/%s.svg", dir, PLOT_FIGURES[i]);
		check_svg(path, 12);
		cr_assert_eq(setenv("STALENET_SVG", path, 1), 0);
		snprintf(cmd, sizeof cmd, "iconv -f UTF-8 -t UTF-8 \"$STALENET_SVG\" >/dev/null");
		cr_assert_eq(system(cmd), 0, "%s is not UTF-8", path);
	}
	unsetenv("STALENET_SVG");
}

/* A sweep whose directory names, run ids, description, sweep key and values, node names (file
 * names and CSV fields) and summary fields all try to run a command: nothing runs, every
 * figure is drawn, and the keys and tics still show the user's text. */
Test(plot, hostile_sweep_runs_nothing, .timeout = 180)
{
	static const char *const runs[][2] = {
		{ "consistency.barrier=asp+rep=1", "a`" CMD "`" },
		{ "consistency.barrier=asp+rep=2", "a\"; system(\"" CMD "\"); \"" },
		{ "consistency.barrier=bsp+rep=1", "b'; system('" CMD "'); '" },
		{ "consistency.barrier=bsp+rep=2", "b\nm = 'system(\"" CMD "\")'\n@m\n" },
	};
	const char *key = "k`" CMD "`\"; system(\"" CMD "\")\n@m";
	const char *vals[2] = { "v`" CMD "`\\\"; system(\"" CMD "\"); \"A",
				"w'\nsystem('" CMD "')\n@m B" };
	char base[] = "/tmp/stalenet-plot-XXXXXX", canary[700], sweep[700], a[1400], b[1400];
	char err[1024], *svg;
	int n;

	need_gnuplot();
	cr_assert_not_null(support_mkdtemp(base));
	snprintf(canary, sizeof canary, "%s/canary", base);
	cr_assert_eq(setenv("STALENET_CANARY", canary, 1), 0);
	snprintf(sweep, sizeof sweep, "%s/s`" CMD "`'\"@m;$(" CMD ")", base);
	snprintf(a, sizeof a, "%s/sweep", base);
	copy_tree("tests/data/sweep_small", a);
	cr_assert_eq(rename(a, sweep), 0);
	for (size_t i = 0; i < 4; i++) {
		snprintf(a, sizeof a, "%s/%s", sweep, runs[i][0]);
		snprintf(b, sizeof b, "%s/%s", sweep, runs[i][1]);
		cr_assert_eq(rename(a, b), 0, "rename %s", a);
		write_meta(b, runs[i][1], key, vals[i / 2]);
		poison_nodes(b);
	}
	snprintf(a, sizeof a, "%s/summary.csv", sweep);
	replace_in(a, "complete", "`" CMD "`");
	/* the attempts are live: the same strings in a script do create the canary */
	snprintf(a, sizeof a, "%s/probe.gp", base);
	snprintf(b, sizeof b, "set title \"%s\"\n", runs[0][1]);
	write_file(a, b);
	snprintf(b, sizeof b, "gnuplot '%.1300s' >/dev/null 2>&1", a);
	cr_assert_eq(system(b), 0);
	cr_assert_eq(access(canary, F_OK), 0, "the probe did not run its command");
	cr_assert_eq(unlink(canary), 0);

	n = plot_dir(sweep, err, sizeof err);
	cr_assert_eq(n, 8, "plot_dir: %d %s", n, n < 0 ? err : "");
	cr_assert_neq(access(canary, F_OK), 0, "a string from the directory ran a command");
	check_all_figures(sweep);
	/* the keys carry the labels' text ('"' shown as '\'', '\\' as '/', newline as ' ') */
	snprintf(a, sizeof a, "%s/plots/accuracy_time.svg", sweep);
	svg = read_text(a);
	cr_assert_not_null(strstr(svg, "=v`touch $STALENET_CANARY`/'; system('touch"), "%s", a);
	cr_assert_not_null(strstr(svg, "=w' system('touch $STALENET_CANARY') @m B"), "%s", a);
	free(svg);
	/* the tics show the values, the axis the whitelisted key */
	snprintf(a, sizeof a, "%s/plots/steps_final.svg", sweep);
	svg = read_text(a);
	cr_assert_not_null(strstr(svg, ">v`touch $STALENET_CANARY`/'; system('touch"), "%s", a);
	cr_assert_not_null(strstr(svg, ">k_touch _STALENET_CANARY___ system(_touch "
				       "_STALENET_CANARY_)__m<"), "%s", a);
	free(svg);
	snprintf(a, sizeof a, "%s/plots/linkcheck_delay.svg", sweep);
	svg = read_text(a);
	cr_assert_not_null(strstr(svg, ">w`touch $STALENET_CANARY`1<"), "%s", a);
	cr_assert_not_null(strstr(svg, ">w??" "?(\xc3\xa9)0<"), "%s", a);
	free(svg);
	cr_assert_neq(access(canary, F_OK), 0);
	unsetenv("STALENET_CANARY");
	rm_rf(base);
}

/* A lone run (its run id is the key) in a hostile directory. */
Test(plot, hostile_run_runs_nothing, .timeout = 120)
{
	char base[] = "/tmp/stalenet-plot-XXXXXX", canary[700], run[700], a[1400], err[1024];
	const char *id = "r`" CMD "`\"; system(\"" CMD "\"); \"\n@m";
	char *svg;
	int n;

	need_gnuplot();
	cr_assert_not_null(support_mkdtemp(base));
	snprintf(canary, sizeof canary, "%s/canary", base);
	cr_assert_eq(setenv("STALENET_CANARY", canary, 1), 0);
	snprintf(run, sizeof run, "%s/`" CMD "`\n@m\"'", base);
	snprintf(a, sizeof a, "%s/run", base);
	copy_tree("tests/data/sweep_small/consistency.barrier=bsp+rep=1", a);
	cr_assert_eq(rename(a, run), 0);
	write_meta(run, id, NULL, NULL);
	poison_nodes(run);
	n = plot_dir(run, err, sizeof err);
	cr_assert_eq(n, 8, "plot_dir: %d %s", n, n < 0 ? err : "");
	cr_assert_neq(access(canary, F_OK), 0, "a string from the directory ran a command");
	check_all_figures(run);
	snprintf(a, sizeof a, "%s/plots/linkcheck_delay.svg", run);
	svg = read_text(a);
	cr_assert_not_null(strstr(svg, "run r_touch _STALENET_CANARY___ system(_touch "
				       "_STALENET_CANARY_)_ ___m:"), "%s", a);
	free(svg);
	unsetenv("STALENET_CANARY");
	rm_rf(base);
}

/* Two directories on one figure: the keys name each directory's lines by its label (a
 * hostile one is drawn as text, never run), the lines of one directory share a dash, and the
 * output holds only the two figures. */
Test(plot, compare_overlays_directories, .timeout = 120)
{
	char base[] = "/tmp/stalenet-plot-XXXXXX", canary[700], sim[700], out[700], a[1400];
	const char *dirs[2] = { "tests/data/sweep_small", sim };
	const char *labels[2] = { NULL, "sim`" CMD "`\"; system(\"" CMD "\")" };
	char err[1024], *svg;
	int n;

	need_gnuplot();
	cr_assert_not_null(support_mkdtemp(base));
	snprintf(canary, sizeof canary, "%s/canary", base);
	cr_assert_eq(setenv("STALENET_CANARY", canary, 1), 0);
	snprintf(sim, sizeof sim, "%s/sim", base);
	snprintf(out, sizeof out, "%s/cmp", base);
	copy_tree("tests/data/sweep_small", sim);
	n = plot_compare(dirs, labels, 2, out, err, sizeof err);
	cr_assert_eq(n, 2, "plot_compare: %d %s", n, n < 0 ? err : "");
	cr_assert_neq(access(canary, F_OK), 0, "a label ran a command");
	snprintf(a, sizeof a, "%s/accuracy_time.png", out);
	check_png(a, 800, 500);
	snprintf(a, sizeof a, "%s/steps_cdf.png", out);
	check_png(a, 800, 500);
	snprintf(a, sizeof a, "%s/steps_cdf.svg", out);
	check_svg(a, 12);
	snprintf(a, sizeof a, "%s/accuracy_time.svg", out);
	check_svg(a, 12);
	svg = read_text(a);
	cr_assert_not_null(strstr(svg, ">emulation: asp<"), "%s", a);
	cr_assert_not_null(strstr(svg, ">emulation: bsp<"), "%s", a);
	cr_assert_not_null(strstr(svg, ">sim`touch $STALENET_CANARY`'; system('touch "
				       "$STALENET_CANARY'): bsp<"), "%s", a);
	/* the second directory's lines are dashed, the first's solid */
	cr_assert_not_null(strstr(svg, "stroke-dasharray"), "%s: no dashed line", a);
	free(svg);
	snprintf(a, sizeof a, "ls -A '%s' | wc -l | grep -qx 4", out);
	cr_assert_eq(system(a), 0, "the output holds more than the figures");
	/* nothing to compare: a usage error, nothing written */
	dirs[1] = "/nonexistent/stalenet";
	n = plot_compare(dirs, NULL, 2, out, err, sizeof err);
	cr_assert_lt(n, 0);
	cr_assert_neq(access(canary, F_OK), 0);
	unsetenv("STALENET_CANARY");
	rm_rf(base);
}

/* A plots/ that is a symlink is refused: the figures would land where it points. */
Test(plot, plots_symlink_refused, .timeout = 60)
{
	char base[] = "/tmp/stalenet-plot-XXXXXX", run[700], target[700], a[1400], err[1024];
	int n;

	cr_assert_not_null(support_mkdtemp(base));
	snprintf(run, sizeof run, "%s/run", base);
	snprintf(target, sizeof target, "%s/elsewhere", base);
	copy_tree("tests/data/sweep_small/consistency.barrier=bsp+rep=1", run);
	cr_assert_eq(mkdir(target, 0755), 0);
	snprintf(a, sizeof a, "%s/plots", run);
	cr_assert_eq(symlink(target, a), 0);
	n = plot_dir(run, err, sizeof err);
	cr_assert_eq(n, -ENOTDIR, "%d %s", n, err);
	cr_assert_not_null(strstr(err, "symlink is refused"), "%s", err);
	snprintf(a, sizeof a, "ls -A '%s' | wc -l | grep -qx 0", target);
	cr_assert_eq(system(a), 0, "something was written through the symlink");
	rm_rf(base);
}

/* The whitelist against a naive reference: each byte kept or replaced alone. */
Test(plot, safe_text_whitelist)
{
	char src[256], dst[256], small[5];

	for (int ch = 1; ch < 256; ch++) {
		bool keep = isalnum(ch) && ch < 128;

		keep = keep || (ch && strchr(" ._-+=:,/%()[]", ch));
		src[0] = 'a';
		src[1] = (char)ch;
		src[2] = '\0';
		plot_safe_text(dst, sizeof dst, src);
		cr_assert_eq(strlen(dst), 2);
		cr_assert_eq(dst[0], 'a');
		cr_assert_eq(dst[1], keep ? (char)ch : '_', "byte %d", ch);
	}
	cr_assert_str_eq(plot_safe_text(dst, sizeof dst, "workers=5, link.delay=10ms (up) [1]"),
			 "workers=5, link.delay=10ms (up) [1]");
	cr_assert_str_eq(plot_safe_text(small, sizeof small, "`abcdef"), "_abc");
}

/* ---- fleet figures ------------------------------------------------------------------- */

/* A fleet run's traces: three devices syncing every second for 20 s, each version
 * bytes_per_sync bytes, the lag growing by 0.1 s a version; recover.csv 20 versions a device. */
static void fleet_run(const char *run, const char *run_id, const char *strategy, int bytes_per_sync)
{
	char path[1200], text[65536], meta[1024];
	size_t off;

	cr_assert_eq(mkdir(run, 0755), 0);
	snprintf(meta, sizeof meta, "{\"run_id\": \"%s\", \"status\": \"complete\", "
		 "\"sweep\": {\"fleet.strategy\": \"%s\"}}\n", run_id, strategy);
	snprintf(path, sizeof path, "%s/meta.json", run);
	write_file(path, meta);
	off = (size_t)snprintf(text, sizeof text, "t_s,device,version,strategy,bytes_tx,bytes_stored,"
			       "encode_s,apply_s,verify_ok,registry_lag_s,chain_len\n");
	for (int v = 1; v <= 20; v++)
		for (int d = 0; d < 3; d++)
			off += (size_t)snprintf(text + off, sizeof text - off,
						"%d.%d,device%d,%d,%s,%d,%d,0.001,0.002,1,%.1f,%d\n", v, d, d,
						v, strategy, bytes_per_sync, bytes_per_sync, 0.1 * v, v % 10);
	snprintf(path, sizeof path, "%s/fleet.csv", run);
	write_file(path, text);
	off = (size_t)snprintf(text, sizeof text, "device,version,strategy,chain,recover_s,verify_ok\n");
	for (int d = 0; d < 3; d++)
		for (int v = 1; v <= 20; v++)
			off += (size_t)snprintf(text + off, sizeof text - off, "device%d,%d,%s,%d,%.6f,1\n",
						d, v, strategy, v % 10 + 1, 0.0005 * (v % 10 + 1));
	snprintf(path, sizeof path, "%s/recover.csv", run);
	write_file(path, text);
}

/* The three fleet figures of a two-point fleet sweep: real PNG/SVG, one key per strategy, the
 * right totals on the bytes figure's axis; a hostile strategy value runs nothing. */
Test(plot, fleet_sweep, .timeout = 120)
{
	char base[] = "/tmp/stalenet-plot-XXXXXX", run[700], path[900], err[1024], canary[700];
	static const char *const figs[] = { "fleet_bytes", "fleet_lag", "fleet_recover" };
	const char *hostile = "delta`" CMD "`";
	size_t len;
	char *svg;
	int n;

	need_gnuplot();
	cr_assert_not_null(support_mkdtemp(base));
	snprintf(canary, sizeof canary, "%s/canary", base);
	cr_assert_eq(setenv("STALENET_CANARY", canary, 1), 0);
	snprintf(run, sizeof run, "%s/a", base);
	fleet_run(run, "a", "full", 30000);
	snprintf(run, sizeof run, "%s/b", base);
	fleet_run(run, "b", hostile, 1000);
	n = plot_dir(base, err, sizeof err);
	cr_assert_eq(n, 3, "only the fleet figures: %d %s", n, n < 0 ? err : "");
	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof path, "%s/plots/%s.png", base, figs[i]);
		check_png(path, 800, 500);
		snprintf(path, sizeof path, "%s/plots/%s.svg", base, figs[i]);
		check_svg(path, 12);
		svg = (char *)slurp(path, &len);
		svg[len - 1] = '\0';
		cr_assert_not_null(strstr(svg, "fleet.strategy=full"), "%s: no key for full", figs[i]);
		cr_assert_not_null(strstr(svg, "fleet.strategy=delta`touch"), "%s: no key for delta", figs[i]);
		free(svg);
	}
	/* full: 60 syncs of 30000 bytes = 1.72 MiB at the end; the y axis reaches past 1.6 */
	snprintf(path, sizeof path, "%s/plots/fleet_bytes.svg", base);
	svg = (char *)slurp(path, &len);
	svg[len - 1] = '\0';
	cr_assert(strstr(svg, "<text> 1.6</text>") || strstr(svg, "<text> 1.8</text>"), "no 1.6 or 1.8 MiB tic");
	free(svg);
	cr_assert_neq(access(canary, F_OK), 0, "a string from the directory ran a command");
	unsetenv("STALENET_CANARY");
	rm_rf(base);
}

/* Every (style, source) pair up to 32 x 32 is drawn differently (colour, dash, marker); a sweep's
 * first 8 points are plain solid lines in 8 colours; a comparison's directory keeps one dash
 * while it has at most 8 values; dashes are built-in patterns only. */
Test(plot, looks_are_distinct_past_the_palette)
{
	struct plot_set set = { 0 };
	struct plot_look *lk;
	size_t n = 32 * 32;

	set.points = calloc(n, sizeof *set.points);
	lk = calloc(n, sizeof *lk);
	cr_assert(set.points && lk);
	/* a sweep of 32 points */
	set.npoints = 32;
	for (size_t p = 0; p < 32; p++)
		set.points[p].style = p;
	for (size_t p = 0; p < 32; p++)
		plot_look_of(&set, p, &lk[p]);
	for (size_t p = 0; p < 8; p++) {
		cr_assert_str_eq(lk[p].dash, "1");
		cr_assert_eq(lk[p].point, 0);
		cr_assert_eq(lk[p].fill, 0);
		for (size_t q = 0; q < p; q++)
			cr_assert_str_neq(lk[p].color, lk[q].color);
	}
	for (size_t p = 0; p < 32; p++)
		for (size_t q = 0; q < p; q++)
			cr_assert(strcmp(lk[p].color, lk[q].color) || strcmp(lk[p].dash, lk[q].dash) ||
				  lk[p].point != lk[q].point,
				  "sweep points %zu and %zu look alike", q, p);
	/* the 9th point shares the 1st's colour, not its line, and its bars are not solid */
	cr_assert_str_eq(lk[8].color, lk[0].color);
	cr_assert_str_neq(lk[8].dash, lk[0].dash);
	cr_assert_neq(lk[8].fill, 0);
	/* every style against every source */
	set.npoints = n;
	for (size_t p = 0; p < n; p++) {
		set.points[p].style = p % 32;
		set.points[p].source = p / 32;
	}
	for (size_t p = 0; p < n; p++) {
		plot_look_of(&set, p, &lk[p]);
		cr_assert_eq(strspn(lk[p].dash, "0123456789,()"), strlen(lk[p].dash), "%s", lk[p].dash);
		cr_assert(lk[p].point >= 0 && lk[p].point <= 15);
		cr_assert(lk[p].color[0] == '#' && strlen(lk[p].color) == 7);
	}
	for (size_t p = 0; p < n; p++)
		for (size_t q = 0; q < p; q++)
			cr_assert(strcmp(lk[p].color, lk[q].color) || strcmp(lk[p].dash, lk[q].dash) ||
				  lk[p].point != lk[q].point,
				  "(style %zu, source %zu) and (style %zu, source %zu) look alike",
				  q % 32, q / 32, p % 32, p / 32);
	/* a comparison of 3 directories with 5 values: a directory is one dash, no markers */
	set.npoints = 15;
	for (size_t p = 0; p < 15; p++) {
		set.points[p].style = p % 5;
		set.points[p].source = p / 5;
	}
	for (size_t p = 0; p < 15; p++) {
		struct plot_look first;

		plot_look_of(&set, p, &lk[p]);
		plot_look_of(&set, (p / 5) * 5, &first);
		cr_assert_str_eq(lk[p].dash, first.dash);
		cr_assert_eq(lk[p].point, 0);
		if (p >= 5)
			cr_assert_str_neq(lk[p].dash, lk[p - 5].dash);
	}
	free(lk);
	free(set.points);
}

/* A sweep of 10 points drawn: the 9th line has the 1st's colour but a dash (gnuplot's SVG
 * stroke-dasharray) in the band and CDF figures; the steps' corners are in the CDF. */
Test(plot, ten_points_drawn_apart, .timeout = 120)
{
	char base[] = "/tmp/stalenet-plot-XXXXXX", dir[700], path[900], err[1024], *meta, *at;
	static const char *const figs[] = { "accuracy_time", "steps_cdf", "progress" };
	size_t len;
	int n;

	need_gnuplot();
	cr_assert_not_null(support_mkdtemp(base));
	for (int i = 0; i < 10; i++) {
		snprintf(dir, sizeof dir, "%s/p%d", base, i);
		copy_tree("tests/data/sweep_small/consistency.barrier=asp+rep=1", dir);
		snprintf(path, sizeof path, "%s/meta.json", dir);
		meta = (char *)slurp(path, &len);
		meta[len - 1] = '\0';
		at = strstr(meta, "\"consistency.barrier\": \"asp\"");
		cr_assert_not_null(at);
		at[strlen("\"consistency.barrier\": \"")] = 'v';
		at[strlen("\"consistency.barrier\": \"") + 1] = (char)('0' + i);
		at[strlen("\"consistency.barrier\": \"") + 2] = ' ';
		write_file(path, meta);
		free(meta);
	}
	n = plot_dir(base, err, sizeof err);
	cr_assert_geq(n, 3, "plot_dir: %d %s", n, n < 0 ? err : "");
	for (size_t k = 0; k < 3; k++) {
		char *svg, *p;
		size_t solid = 0, dashed = 0;

		snprintf(path, sizeof path, "%s/plots/%s.svg", base, figs[k]);
		svg = (char *)slurp(path, &len);
		svg[len - 1] = '\0';
		for (p = svg; (p = strstr(p, "stroke='rgb(  0, 114, 178)'")); p++) {
			char *end = strchr(p, '>');

			cr_assert_not_null(end);
			if (memmem(p, (size_t)(end - p), "stroke-dasharray", 16))
				dashed++;
			else
				solid++;
		}
		cr_assert_gt(solid, 0, "%s: no solid line of the first colour", figs[k]);
		cr_assert_gt(dashed, 0, "%s: the 9th point's line is not dashed", figs[k]);
		free(svg);
	}
	rm_rf(base);
}
