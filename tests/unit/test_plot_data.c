/* Unit tests for collectors/plot_data: the numbers of every figure, computed without gnuplot,
 * against naive readings of the recorded sweep fixture (tests/data/sweep_small) and against a
 * slow reference of the step-hold band. */
#include <criterion/criterion.h>
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/plot_data.h"
#include "tests/support/files.h"

#define FIXTURE "tests/data/sweep_small"

/* Field col (0-based) of a comma-separated line into out. */
static void field(const char *line, int col, char *out, size_t outlen)
{
	const char *p = line;
	size_t n = 0;

	for (int c = 0; c < col && p; c++)
		p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
	for (; p && *p && *p != ',' && *p != '\n' && n + 1 < outlen; p++)
		out[n++] = *p;
	out[n] = '\0';
}

static struct plot_set collect(void)
{
	struct plot_set s;
	char err[512];
	int rc = plot_data_collect(FIXTURE, &s, err, sizeof err);

	cr_assert_eq(rc, 0, "collect: %d %s", rc, err);
	return s;
}

Test(plot_data, collect_groups_repeats)
{
	struct plot_set s = collect();

	cr_assert_eq(s.nruns, 4);
	cr_assert_eq(s.npoints, 2);
	cr_assert_str_eq(s.points[0].label, "consistency.barrier=asp");
	cr_assert_str_eq(s.points[1].label, "consistency.barrier=bsp");
	for (size_t p = 0; p < 2; p++) {
		cr_assert_eq(s.points[p].nruns, 2);
		for (size_t k = 0; k < 2; k++)
			cr_assert_eq(s.points[p].runs[k], 2 * p + k);
	}
	cr_assert_eq(plot_data_max_repeats(&s), 2);
	cr_assert_float_eq(plot_data_target(&s), 0.75, 1e-12);
	cr_assert_eq(plot_data_common_key_len(&s), strlen("consistency.barrier="));
	plot_data_release(&s);
	plot_data_release(&s); /* idempotent */
}

/* Several directories in one set: tags from --label or meta's mode, equal values share a
 * colour, each directory its own dash. The second directory is one run of the fixture
 * marked as a simulation. */
Test(plot_data, collect_many_tags_and_styles)
{
	char dir[] = "/tmp/stalenet-plotdata-XXXXXX", run[600], cmd[1400], err[512];
	const char *dirs[2] = { FIXTURE, run };
	const char *labels[2] = { NULL, "sim, calibrated" };
	struct plot_set s;
	int rc;

	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(run, sizeof run, "%s/run", dir);
	snprintf(cmd, sizeof cmd,
		 "cp -r '%s/consistency.barrier=bsp+rep=2' '%s' && "
		 "sed -i 's/^{/{\"mode\": \"simulation\",/' '%s/meta.json'", FIXTURE, run, run);
	cr_assert_eq(system(cmd), 0);

	rc = plot_data_collect_many(dirs, NULL, 2, &s, err, sizeof err);
	cr_assert_eq(rc, 0, "collect_many: %d %s", rc, err);
	cr_assert_eq(s.nruns, 5);
	cr_assert_eq(s.npoints, 3);
	cr_assert_str_eq(s.points[0].label, "emulation: asp");
	cr_assert_str_eq(s.points[1].label, "emulation: bsp");
	/* a lone run is labelled by its sweep point, without the key */
	cr_assert_str_eq(s.points[2].label, "simulation: bsp");
	cr_assert_eq(s.points[0].source, 0);
	cr_assert_eq(s.points[1].source, 0);
	cr_assert_eq(s.points[2].source, 1);
	cr_assert_eq(s.points[0].style, 0);
	cr_assert_eq(s.points[1].style, 1);
	cr_assert_eq(s.points[2].style, 1); /* bsp: emulated bsp's colour */
	cr_assert_eq(s.points[2].nruns, 1);
	cr_assert_eq(s.points[2].runs[0], 4);
	cr_assert_str_eq(s.runs[4].meta.mode, "simulation");
	cr_assert_str_eq(s.runs[0].meta.mode, "");
	plot_data_release(&s);

	/* the same sweep twice: the second copy's points take the first's colours */
	dirs[1] = FIXTURE;
	rc = plot_data_collect_many(dirs, labels, 2, &s, err, sizeof err);
	cr_assert_eq(rc, 0, "collect_many: %d %s", rc, err);
	cr_assert_eq(s.nruns, 8);
	cr_assert_eq(s.npoints, 4);
	cr_assert_str_eq(s.points[2].label, "sim, calibrated: asp");
	cr_assert_str_eq(s.points[3].label, "sim, calibrated: bsp");
	cr_assert_eq(s.points[2].style, s.points[0].style);
	cr_assert_eq(s.points[3].style, s.points[1].style);
	cr_assert_eq(s.points[3].source, 1);
	cr_assert_eq(s.points[3].nruns, 2);
	cr_assert_eq(s.points[3].runs[0], 6);
	plot_data_release(&s);

	/* runs told apart only by a simulation-only key (a profile each) are one point */
	snprintf(cmd, sizeof cmd,
		 "mkdir '%s/cal' && for r in bsp+rep=1 bsp+rep=2 asp+rep=1; do "
		 "cp -r '%s/consistency.barrier='$r '%s/cal/'$r && "
		 "sed -i 's|\"consistency.barrier\": \"\\(...\\)\"|&, \"simulation.profile\": \"/p/'$r'\"|' "
		 "'%s/cal/'$r/meta.json; done", dir, FIXTURE, dir, dir);
	cr_assert_eq(system(cmd), 0);
	snprintf(run, sizeof run, "%s/cal", dir);
	dirs[1] = run;
	rc = plot_data_collect_many(dirs, NULL, 2, &s, err, sizeof err);
	cr_assert_eq(rc, 0, "collect_many: %d %s", rc, err);
	cr_assert_eq(s.nruns, 7);
	cr_assert_eq(s.npoints, 4);
	cr_assert_str_eq(s.runs[4].meta.sweep_key[1], "simulation.profile");
	cr_assert_str_eq(s.points[2].label, "emulation: asp");
	cr_assert_eq(s.points[2].nruns, 1);
	cr_assert_str_eq(s.points[3].label, "emulation: bsp");
	cr_assert_eq(s.points[3].nruns, 2);
	cr_assert_eq(s.points[3].style, s.points[1].style);
	plot_data_release(&s);

	/* a bad directory fails the whole set */
	dirs[1] = "/nonexistent/stalenet";
	rc = plot_data_collect_many(dirs, NULL, 2, &s, err, sizeof err);
	cr_assert_lt(rc, 0);
	plot_data_release(&s);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

Test(plot_data, collect_errors)
{
	struct plot_set s;
	char err[512] = "";

	cr_assert_eq(plot_data_collect("/nonexistent-stalenet", &s, err, sizeof err), -ENOENT);
	cr_assert_not_null(strstr(err, "/nonexistent-stalenet"));
	plot_data_release(&s);
	cr_assert_eq(plot_data_collect("tests/unit", &s, err, sizeof err), -ENOENT);
	cr_assert_not_null(strstr(err, "no meta.json"));
	plot_data_release(&s);
}

/* The slow reference: scan every sample. */
static double naive_hold(const struct plot_series *s, double x)
{
	double v = NAN;

	if (s->n == 0 || x > s->x[s->n - 1])
		return NAN;
	for (size_t i = 0; i < s->n; i++)
		if (s->x[i] <= x)
			v = s->y[i];
	return v;
}

Test(plot_data, band_matches_reference)
{
	struct plot_series s[5];
	struct plot_band *b = calloc(1, sizeof *b);

	srand(7);
	for (size_t i = 0; i < 5; i++) {
		double t = (double)(rand() % 5);

		s[i].n = (size_t)(rand() % 40);
		s[i].x = malloc((s[i].n + 1) * sizeof(double));
		s[i].y = malloc((s[i].n + 1) * sizeof(double));
		for (size_t j = 0; j < s[i].n; j++) {
			t += (double)(rand() % 3); /* repeated times too */
			s[i].x[j] = t;
			s[i].y[j] = (double)(rand() % 1000) / 10.0;
		}
	}
	plot_data_band(s, 5, 80, b);
	for (int g = 0; g <= PLOT_DATA_GRID; g++) {
		double x = 80.0 * g / PLOT_DATA_GRID, sum = 0, lo = INFINITY, hi = -INFINITY;
		size_t k = 0;

		cr_assert_float_eq(b->x[g], x, 1e-12);
		for (size_t i = 0; i < 5; i++) {
			double v = naive_hold(&s[i], x);

			cr_assert(isnan(v) == isnan(plot_data_hold_at(&s[i], x)));
			if (!isnan(v))
				cr_assert_float_eq(plot_data_hold_at(&s[i], x), v, 0);
			if (isnan(v))
				continue;
			sum += v;
			lo = fmin(lo, v);
			hi = fmax(hi, v);
			k++;
		}
		cr_assert_eq(b->n[g], k, "g %d", g);
		if (k == 0) {
			cr_assert(isnan(b->mean[g]) && isnan(b->lo[g]) && isnan(b->hi[g]));
			continue;
		}
		cr_assert_float_eq(b->mean[g], sum / (double)k, 1e-9);
		cr_assert_float_eq(b->lo[g], lo, 0);
		cr_assert_float_eq(b->hi[g], hi, 0);
	}
	for (size_t i = 0; i < 5; i++) {
		free(s[i].x);
		free(s[i].y);
	}
	free(b);
}

/* Last line's first field of path, as a number. */
static double last_t(const char *path)
{
	char line[512], last[512] = "", f0[64];
	FILE *f = fopen(path, "r");

	cr_assert_not_null(f, "%s", path);
	while (fgets(line, sizeof line, f))
		strcpy(last, line);
	fclose(f);
	field(last, 0, f0, sizeof f0);
	return strtod(f0, NULL);
}

Test(plot_data, accuracy_bands)
{
	struct plot_set s = collect();
	struct plot_band *b = calloc(s.npoints, sizeof *b);
	double xmax = 0, want = 0;
	char err[512];
	glob_t g;

	cr_assert_eq(plot_data_accuracy(&s, false, b, &xmax, err, sizeof err), 1, "%s", err);
	cr_assert_eq(glob(FIXTURE "/*/eval.csv", 0, NULL, &g), 0);
	for (size_t i = 0; i < g.gl_pathc; i++)
		want = fmax(want, last_t(g.gl_pathv[i]));
	globfree(&g);
	cr_assert_float_eq(xmax, want, 1e-9);
	for (size_t p = 0; p < s.npoints; p++) {
		cr_assert_eq(b[p].n[0], 0, "nothing before the first evaluation");
		for (int k = 0; k <= PLOT_DATA_GRID; k++) {
			cr_assert_leq(b[p].n[k], 2);
			if (b[p].n[k] == 0)
				continue;
			cr_assert_leq(b[p].lo[k], b[p].mean[k] + 1e-12);
			cr_assert_leq(b[p].mean[k], b[p].hi[k] + 1e-12);
			cr_assert(b[p].lo[k] >= 0 && b[p].hi[k] <= 1);
		}
	}
	/* at the last grid sample only the run that ends last still has a value */
	cr_assert_eq(b[0].n[PLOT_DATA_GRID] + b[1].n[PLOT_DATA_GRID], 1);
	free(b);
	plot_data_release(&s);
}

/* Workers' last steps, the naive way: the largest `step` of each nodes/worker*.csv. */
Test(plot_data, steps_final_matches_traces)
{
	struct plot_set s = collect();
	struct plot_step *v = NULL;
	size_t n = 0, found = 0;
	char err[512];

	cr_assert_eq(plot_data_steps_final(&s, &v, &n, err, sizeof err), 0, "%s", err);
	cr_assert_eq(n, 12, "3 workers x 4 runs: %zu", n);
	for (size_t r = 0; r < s.nruns; r++) {
		char pat[4200], line[512], f2[64];
		glob_t g;

		snprintf(pat, sizeof pat, "%s/nodes/worker*.csv", s.runs[r].dir);
		cr_assert_eq(glob(pat, 0, NULL, &g), 0);
		for (size_t i = 0; i < g.gl_pathc; i++) {
			FILE *f = fopen(g.gl_pathv[i], "r");
			double last = -1;
			bool match = false;

			cr_assert_not_null(f);
			cr_assert_not_null(fgets(line, sizeof line, f));
			while (fgets(line, sizeof line, f)) {
				field(line, 2, f2, sizeof f2);
				last = fmax(last, strtod(f2, NULL));
			}
			fclose(f);
			/* run r is repeat r % 2 of point r / 2 */
			for (size_t j = 0; j < n; j++)
				if (v[j].point == r / 2 && v[j].repeat == r % 2 && v[j].step == last)
					match = true;
			cr_assert(match, "%s: last step %g not found", g.gl_pathv[i], last);
			found++;
		}
		globfree(&g);
	}
	cr_assert_eq(found, n);
	for (size_t j = 0; j < n; j++)
		cr_assert(fabs(v[j].x - (double)v[j].point) <= 0.18 + 1e-12);
	free(v);
	plot_data_release(&s);
}

Test(plot_data, progress_keeps_ends_and_windows)
{
	struct plot_set s = collect();
	struct plot_progress prog[2];
	double tmax = 0, win = 0, want = 0;
	char err[512], path[4200];
	int rc;

	rc = plot_data_progress(&s, prog, &tmax, &win, err, sizeof err);
	cr_assert_eq(rc, 2, "%d %s", rc, err);
	for (size_t p = 0; p < 2; p++) {
		const struct plot_run *r = &s.runs[s.points[p].runs[0]];
		char line[512], first[512] = "", f0[64];
		size_t lines = 0, samples = 0, windows = 0;
		double end;
		FILE *f;

		snprintf(path, sizeof path, "%s/progress.csv", r->dir);
		f = fopen(path, "r");
		cr_assert_not_null(f);
		cr_assert_not_null(fgets(line, sizeof line, f));
		while (fgets(line, sizeof line, f)) {
			if (!lines)
				strcpy(first, line);
			lines++;
		}
		fclose(f);
		end = last_t(path);
		want = fmax(want, end);
		field(first, 0, f0, sizeof f0);
		for (size_t i = 0; i < prog[p].nrows; i++) {
			const struct plot_progress_row *row = &prog[p].rows[i];

			if (isnan(row->min)) {
				windows++;
				cr_assert(!isnan(row->waiting) && row->waiting >= 0);
				continue;
			}
			samples++;
			cr_assert(row->min <= row->median && row->median <= row->max);
		}
		/* thinned, but the first and last samples are always there */
		cr_assert_leq(samples, lines);
		cr_assert_gt(samples, 1);
		cr_assert_gt(windows, 1);
		cr_assert_float_eq(prog[p].rows[0].t_s, strtod(f0, NULL), 1e-9);
		cr_assert_float_eq(prog[p].rows[prog[p].nrows - 1].t_s, end, 1e-9);
	}
	cr_assert_float_eq(tmax, want, 1e-9);
	cr_assert_float_eq(win, 1.0, 0, "an 8 s run averages over 1 s");
	plot_data_progress_free(prog, 2);
	plot_data_release(&s);
}

/* Rows of the workers' traces with a staleness (naive: field 5 non-empty). */
static size_t naive_updates(const struct plot_set *s, size_t p, size_t *bin0)
{
	size_t n = 0;

	*bin0 = 0;
	for (size_t k = 0; k < s->points[p].nruns; k++) {
		char pat[4200], line[512], f5[64];
		glob_t g;

		snprintf(pat, sizeof pat, "%s/nodes/worker*.csv", s->runs[s->points[p].runs[k]].dir);
		cr_assert_eq(glob(pat, 0, NULL, &g), 0);
		for (size_t i = 0; i < g.gl_pathc; i++) {
			FILE *f = fopen(g.gl_pathv[i], "r");

			cr_assert_not_null(fgets(line, sizeof line, f));
			while (fgets(line, sizeof line, f)) {
				field(line, 5, f5, sizeof f5);
				if (!*f5)
					continue;
				n++;
				*bin0 += strtod(f5, NULL) == 0;
			}
			fclose(f);
		}
		globfree(&g);
	}
	return n;
}

Test(plot_data, staleness_counts_each_update_once)
{
	struct plot_set s = collect();
	struct plot_staleness *h = calloc(1, sizeof *h);
	size_t all = plot_data_staleness(&s, h), sum = 0;

	for (size_t p = 0; p < s.npoints; p++) {
		size_t bin0, want = naive_updates(&s, p, &bin0), bins = 0;

		cr_assert_eq(h->total[p], want, "point %zu: %zu vs %zu", p, h->total[p], want);
		cr_assert_eq(h->count[p][0], bin0);
		for (int b = 0; b <= PLOT_DATA_STALE_CAP; b++) {
			bins += h->count[p][b];
			if (b > h->maxbin)
				cr_assert_eq(h->count[p][b], 0);
		}
		cr_assert_eq(bins, h->total[p]);
		sum += want;
	}
	cr_assert_eq(all, sum);
	cr_assert_gt(h->maxbin, 0, "ASP has stale updates");
	free(h);
	plot_data_release(&s);
}

Test(plot_data, linkcheck_rows)
{
	struct plot_set s = collect();
	struct plot_linkcheck lc;
	char err[512], path[4200], line[512], node[64], dir[16], mean[32], verdict[16];
	size_t i = 0;
	FILE *f;

	cr_assert_eq(plot_data_linkcheck(&s, &lc, err, sizeof err), 1, "%s", err);
	cr_assert_str_eq(lc.run_id, s.runs[0].meta.run_id);
	cr_assert_eq(lc.nrows, 12);
	cr_assert_eq(lc.nnodes, 4);
	snprintf(path, sizeof path, "%s/linkcheck.csv", s.runs[0].dir);
	f = fopen(path, "r");
	cr_assert_not_null(fgets(line, sizeof line, f));
	while (fgets(line, sizeof line, f)) {
		const struct plot_linkcheck_row *r = &lc.rows[i++];
		static const char *const dirs[] = { "up", "down", "rtt" };

		field(line, 0, node, sizeof node);
		field(line, 1, dir, sizeof dir);
		field(line, 6, mean, sizeof mean);
		field(line, 9, verdict, sizeof verdict);
		cr_assert_str_eq(lc.nodes[r->node], node);
		cr_assert_str_eq(dirs[r->dir], dir);
		cr_assert_float_eq(r->mean_ms, strtod(mean, NULL), 1e-9);
		cr_assert_eq(r->off, strcmp(verdict, "ok") != 0);
	}
	fclose(f);
	cr_assert_eq(i, lc.nrows);
	plot_data_linkcheck_free(&lc);
	plot_data_linkcheck_free(&lc);
	plot_data_release(&s);
}

/* Naive reading of run's links.csv: the sum over links (node, direction) of their last
 * `dropped`; *end the last t_s. */
static double naive_drops(const char *run, double *end)
{
	char path[4200], line[512], key[128][160], f[4][64];
	double last[128] = { 0 }, sum = 0;
	size_t nk = 0;
	FILE *fp;

	snprintf(path, sizeof path, "%s/links.csv", run);
	fp = fopen(path, "r");
	cr_assert_not_null(fp);
	cr_assert_not_null(fgets(line, sizeof line, fp));
	while (fgets(line, sizeof line, fp)) {
		size_t i;

		field(line, 0, f[0], sizeof f[0]);
		field(line, 1, f[1], sizeof f[1]);
		field(line, 2, f[2], sizeof f[2]);
		field(line, 5, f[3], sizeof f[3]);
		snprintf(key[nk], sizeof key[0], "%s/%s", f[1], f[2]);
		for (i = 0; i < nk && strcmp(key[i], key[nk]) != 0; i++)
			;
		nk += i == nk;
		cr_assert_lt(nk, 128);
		last[i] = strtod(f[3], NULL);
		*end = strtod(f[0], NULL);
	}
	fclose(fp);
	for (size_t i = 0; i < nk; i++)
		sum += last[i];
	return sum;
}

/* links.csv: cumulative drops summed over links; the first point's grid ends at its last
 * sample, where only the run that ends last holds a value: its links' final counters. */
Test(plot_data, link_drops_sum_links)
{
	struct plot_set s = collect();
	struct plot_band *b = calloc(s.npoints, sizeof *b);
	double end0, end1, d0, d1;
	char err[512];

	cr_assert_eq(plot_data_link_drops(&s, b, err, sizeof err), 1, "%s", err);
	for (size_t p = 0; p < s.npoints; p++) {
		double prev = 0;

		for (int g = 0; g <= PLOT_DATA_GRID; g++) {
			if (b[p].n[g] == 0)
				continue;
			/* cumulative counters: the mean never falls */
			cr_assert_geq(b[p].mean[g], prev - 1e-9);
			prev = b[p].mean[g];
		}
		cr_assert_gt(prev, 0);
	}
	d0 = naive_drops(s.runs[s.points[0].runs[0]].dir, &end0);
	d1 = naive_drops(s.runs[s.points[0].runs[1]].dir, &end1);
	cr_assert_float_eq(b[0].x[PLOT_DATA_GRID], fmax(end0, end1), 1e-9);
	cr_assert_float_eq(b[0].hi[PLOT_DATA_GRID], end0 >= end1 ? d0 : d1, 1e-9);
	free(b);
	plot_data_release(&s);
}
