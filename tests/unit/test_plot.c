/* Unit tests for collectors/plot: render every figure of the recorded sweep fixture
 * (tests/data/sweep_small, recorded with `stalenet run tests/data/sweep_small.yaml`) and of a
 * single run of it, and check each file is a real PNG / SVG with non-trivial content. Needs
 * the gnuplot binary (gnuplot-nox), which is a build dependency. */
#include <criterion/criterion.h>
#include <errno.h>
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectors/plot.h"
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

	cr_assert_not_null(mkdtemp(dir));
	snprintf(sweep, sizeof sweep, "%s/sweep", dir);
	copy_tree("tests/data/sweep_small", sweep);
	n = plot_dir(sweep, err, sizeof err);
	cr_assert_eq(n, 7, "plot_dir: %d %s", n, n < 0 ? err : "");
	for (size_t i = 0; PLOT_FIGURES[i]; i++) {
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
	/* temporary data is cleaned up: only the 14 figures remain */
	snprintf(path, sizeof path, "ls -A '%s/plots' | wc -l | grep -qx 14", sweep);
	cr_assert_eq(system(path), 0, "plots/ holds more than the figures");
	rm_rf(dir);
}

Test(plot, single_run, .timeout = 120)
{
	char dir[] = "/tmp/stalenet-plot-XXXXXX", run[600], path[700], err[1024];
	int n;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(run, sizeof run, "%s/run", dir);
	copy_tree("tests/data/sweep_small/consistency.barrier=bsp+rep=1", run);
	n = plot_dir(run, err, sizeof err);
	cr_assert_eq(n, 7, "plot_dir: %d %s", n, n < 0 ? err : "");
	snprintf(path, sizeof path, "%s/plots/accuracy_time.png", run);
	check_png(path, 800, 500);
	rm_rf(dir);
}

Test(plot, missing_inputs_skip_figures, .timeout = 60)
{
	char dir[] = "/tmp/stalenet-plot-XXXXXX", path[700], err[1024];
	FILE *f;
	int n;

	cr_assert_not_null(mkdtemp(dir));
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
	cr_assert_not_null(mkdtemp(dir));
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
