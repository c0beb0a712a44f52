/* collectors/plot: see plot.h.
 *
 * Runs are grouped into sweep points by their sweep values (meta.json "sweep"); a point's
 * repeats are averaged on a common grid with a step-hold reading of each repeat (the value of
 * a trace at x is its latest sample at or before x; nothing after a run's last sample), and the
 * band is the min..max over the repeats present at x. Text is drawn with enhanced mode off so
 * node names and key paths with '_' print as written. */
#include "collectors/plot.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectors/meta.h"
#include "collectors/summary.h"
#include "collectors/table.h"
#include "lib/log.h"
#include "lib/safefile.h"

#define GRID 240
#define MAX_POINTS 32
#define MAX_RUNS 256
#define STALE_CAP 40

const char *const PLOT_FIGURES[] = {
	"accuracy_time", "accuracy_updates", "steps_final", "progress",
	"staleness_hist", "link_drops", "linkcheck_delay", NULL,
};

struct run {
	char dir[4096];
	struct run_meta meta;
};

struct point {
	char label[256];
	size_t runs[MAX_RUNS];
	size_t nruns;
};

struct ctx {
	const char *dir;
	char plots[4096];
	char tmp[4200];
	struct run *runs;
	size_t nruns;
	struct point points[MAX_POINTS];
	size_t npoints;
	char *err;
	size_t errlen;
};

/* Colour-blind-safe palette (Okabe-Ito), one per sweep point. */
static const char *const COLORS[] = {
	"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
};
#define NCOLORS (sizeof COLORS / sizeof COLORS[0])

struct series {
	double *x, *y;
	size_t n;
};

static void series_free(struct series *s)
{
	free(s->x);
	free(s->y);
	s->x = s->y = NULL;
	s->n = 0;
}

/* ---- gnuplot ------------------------------------------------------------------------- */

/* A gnuplot double-quoted string: backslash, quote and newline escaped. */
static void gp_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '\n') {
			fputs("\\n", f);
			continue;
		}
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static const char *gnuplot_bin(void)
{
	const char *g = getenv("GNUPLOT");

	return g && *g ? g : "gnuplot";
}

/* Run gnuplot on script; stderr is captured and becomes the error on failure. */
static int run_gnuplot(struct ctx *c, const char *script)
{
	char out[4096];
	size_t used = 0;
	int pipefd[2] = { -1, -1 };
	int status = 0, rc = 0;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		snprintf(c->err, c->errlen, "pipe: %s", strerror(errno));
		return -errno;
	}
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		snprintf(c->err, c->errlen, "fork: %s", strerror(errno));
		close(pipefd[0]);
		close(pipefd[1]);
		return rc;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
		}
		dup2(pipefd[1], 2);
		execlp(gnuplot_bin(), gnuplot_bin(), script, (char *)NULL);
		dprintf(2, "exec %s: %s\n", gnuplot_bin(), strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	for (;;) {
		char buf[1024];
		ssize_t n = read(pipefd[0], buf, sizeof buf);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (used < sizeof out - 1) {
			size_t k = (size_t)n < sizeof out - 1 - used ? (size_t)n : sizeof out - 1 - used;

			memcpy(out + used, buf, k);
			used += k;
		}
	}
	out[used] = '\0';
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			snprintf(c->err, c->errlen, "waitpid: %s", strerror(errno));
			return -errno;
		}
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		while (used > 0 && (out[used - 1] == '\n' || out[used - 1] == ' '))
			out[--used] = '\0';
		snprintf(c->err, c->errlen, "gnuplot %s failed (%s %d): %s", script,
			 WIFEXITED(status) ? "exit" : "signal",
			 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), out);
		return -EIO;
	}
	if (used)
		log_warn("gnuplot %s: %s", script, out);
	return 0;
}

/* Start a figure's script: returns the FILE to which the caller writes the figure body; the
 * body is written once to a .gp include file and the main script renders it with both
 * terminals. */
static FILE *fig_begin(struct ctx *c, const char *name)
{
	char path[8192];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s.body.gp", c->tmp, name);
	f = safefile_fopen(path, "w");
	if (!f) {
		snprintf(c->err, c->errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	fprintf(f, "set termoption noenhanced\n"
		   "set grid lc rgb '#d0d0d0' lw 1\n"
		   "set border lw 1.2\n"
		   "set key outside right top vertical box opaque\n"
		   "set style fill transparent solid 0.22 noborder\n"
		   "set datafile separator whitespace\n"
		   "set datafile missing 'nan'\n");
	return f;
}

static int fig_end(struct ctx *c, const char *name, FILE *body, int w, int h)
{
	char path[8192], bpath[8192];
	FILE *f;
	int rc;

	if (fclose(body) != 0) {
		snprintf(c->err, c->errlen, "write %s body: %s", name, strerror(errno));
		return -EIO;
	}
	snprintf(bpath, sizeof bpath, "%s/%s.body.gp", c->tmp, name);
	snprintf(path, sizeof path, "%s/%s.gp", c->tmp, name);
	f = safefile_fopen(path, "w");
	if (!f) {
		snprintf(c->err, c->errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	fprintf(f, "set terminal pngcairo size %d,%d font 'DejaVu Sans,11' linewidth 1.3\n", w, h);
	fprintf(f, "set output ");
	snprintf(path, sizeof path, "%s/%s.png", c->tmp, name);
	gp_str(f, path);
	fprintf(f, "\nload ");
	gp_str(f, bpath);
	fprintf(f, "\nunset output\nreset\n");
	fprintf(f, "set terminal svg size %d,%d dynamic font 'DejaVu Sans,11' linewidth 1.3\n", w, h);
	fprintf(f, "set output ");
	snprintf(path, sizeof path, "%s/%s.svg", c->tmp, name);
	gp_str(f, path);
	fprintf(f, "\nload ");
	gp_str(f, bpath);
	fprintf(f, "\nunset output\n");
	if (fclose(f) != 0) {
		snprintf(c->err, c->errlen, "write %s script: %s", name, strerror(errno));
		return -EIO;
	}
	snprintf(path, sizeof path, "%s/%s.gp", c->tmp, name);
	rc = run_gnuplot(c, path);
	/* gnuplot follows symlinks when it opens its output: it writes into the private
	 * temporary directory, and rename puts the figures in place (replacing, never writing
	 * through, whatever a user put at those names in plots/). */
	for (int k = 0; k < 2 && rc >= 0; k++) {
		const char *ext = k ? "svg" : "png";

		snprintf(bpath, sizeof bpath, "%s/%s.%s", c->tmp, name, ext);
		snprintf(path, sizeof path, "%s/%s.%s", c->plots, name, ext);
		if (rename(bpath, path) < 0) {
			rc = -errno;
			snprintf(c->err, c->errlen, "rename %s: %s", path, strerror(errno));
		}
	}
	return rc < 0 ? rc : 1;
}

static FILE *dat_open(struct ctx *c, char *path, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static FILE *dat_open(struct ctx *c, char *path, size_t len, const char *fmt, ...)
{
	char name[256];
	va_list ap;
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(name, sizeof name, fmt, ap);
	va_end(ap);
	snprintf(path, len, "%s/%s", c->tmp, name);
	f = safefile_fopen(path, "w");
	if (!f)
		snprintf(c->err, c->errlen, "%s: %s", path, strerror(errno));
	return f;
}

/* ---- data helpers -------------------------------------------------------------------- */

/* Step-hold value of s at x: latest sample at or before x; NAN before the first and after the
 * last sample. */
static double hold_at(const struct series *s, double x)
{
	size_t lo = 0, hi = s->n;

	if (s->n == 0 || x < s->x[0] || x > s->x[s->n - 1])
		return NAN;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;

		if (s->x[mid] <= x)
			lo = mid;
		else
			hi = mid;
	}
	return s->y[lo];
}

/* Write "x mean lo hi n" rows over [0, xmax] for the repeats in s[0..n). */
static void write_band(FILE *f, const struct series *s, size_t n, double xmax)
{
	for (int g = 0; g <= GRID; g++) {
		double x = xmax * g / GRID, sum = 0, lo = INFINITY, hi = -INFINITY;
		size_t k = 0;

		for (size_t i = 0; i < n; i++) {
			double v = hold_at(&s[i], x);

			if (isnan(v))
				continue;
			sum += v;
			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
			k++;
		}
		if (k)
			fprintf(f, "%.6g %.6g %.6g %.6g %zu\n", x, sum / (double)k, lo, hi, k);
		else
			fprintf(f, "%.6g nan nan nan 0\n", x);
	}
}

static int load_table(struct ctx *c, const struct run *r, const char *file, struct table **out)
{
	char path[8192];
	bool missing = false;

	snprintf(path, sizeof path, "%s/%s", r->dir, file);
	*out = table_load(path, &missing, c->err, c->errlen);
	if (!*out)
		return missing ? 0 : -EINVAL;
	return 0;
}

static const char *color(size_t i)
{
	return COLORS[i % NCOLORS];
}

static void title_repeats(FILE *f, const struct ctx *c, const char *what)
{
	size_t maxrep = 0;

	for (size_t p = 0; p < c->npoints; p++)
		if (c->points[p].nruns > maxrep)
			maxrep = c->points[p].nruns;
	fprintf(f, "set title ");
	if (maxrep > 1) {
		char t[512];

		snprintf(t, sizeof t, "%s\n(line: mean over repeats; band: min to max, %zu repeats)",
			 what, maxrep);
		gp_str(f, t);
	} else {
		gp_str(f, what);
	}
	fputc('\n', f);
}

/* ---- figures ------------------------------------------------------------------------- */

static double target_of(const struct ctx *c)
{
	for (size_t i = 0; i < c->nruns; i++)
		if (c->runs[i].meta.has_target)
			return c->runs[i].meta.target;
	return NAN;
}

/* accuracy vs time (by_updates = false) or vs updates */
static int fig_accuracy(struct ctx *c, bool by_updates)
{
	const char *name = by_updates ? "accuracy_updates" : "accuracy_time";
	struct series *s = NULL;
	double xmax = 0, target = target_of(c);
	char path[8192];
	size_t any = 0;
	FILE *f = NULL, *d = NULL;
	int rc = 0;

	s = calloc(MAX_RUNS, sizeof *s);
	if (!s)
		return -ENOMEM;
	/* first pass: range */
	for (size_t p = 0; p < c->npoints && rc == 0; p++) {
		for (size_t k = 0; k < c->points[p].nruns; k++) {
			double *t = NULL, *u = NULL, *a = NULL;
			size_t n = 0;

			rc = summary_eval_series(c->runs[c->points[p].runs[k]].dir, &t, &u, &a, &n,
						 c->err, c->errlen);
			if (rc < 0)
				break;
			if (n && (by_updates ? u : t)[n - 1] > xmax)
				xmax = (by_updates ? u : t)[n - 1];
			any += n;
			free(t);
			free(u);
			free(a);
		}
	}
	if (rc < 0 || any == 0 || xmax <= 0)
		goto out;
	f = fig_begin(c, name);
	if (!f) {
		rc = -EIO;
		goto out;
	}
	title_repeats(f, c, by_updates ? "Test accuracy vs model updates applied"
				       : "Test accuracy vs time");
	fprintf(f, "set xlabel %s\nset ylabel 'test accuracy (fraction of test set)'\n",
		by_updates ? "'model updates applied (count)'" : "'time since run start (s)'");
	fprintf(f, "set yrange [0:1]\nset xrange [0:%.6g]\n", xmax);
	fprintf(f, "set key bottom right inside\n");
	fprintf(f, "plot ");
	for (size_t p = 0; p < c->npoints; p++) {
		struct point *pt = &c->points[p];

		for (size_t k = 0; k < pt->nruns; k++) {
			double *t = NULL, *u = NULL, *a = NULL;
			size_t n = 0;

			rc = summary_eval_series(c->runs[pt->runs[k]].dir, &t, &u, &a, &n, c->err,
						 c->errlen);
			if (rc < 0)
				goto out;
			s[k].x = by_updates ? u : t;
			s[k].y = a;
			s[k].n = n;
			free(by_updates ? t : u);
		}
		d = dat_open(c, path, sizeof path, "%s_%zu.dat", name, p);
		if (!d) {
			rc = -EIO;
			goto out;
		}
		write_band(d, s, pt->nruns, xmax);
		fclose(d);
		d = NULL;
		for (size_t k = 0; k < pt->nruns; k++)
			series_free(&s[k]);
		if (pt->nruns > 1) {
			gp_str(f, path);
			fprintf(f, " using 1:3:4 with filledcurves lc rgb '%s' notitle, ", color(p));
		}
		gp_str(f, path);
		fprintf(f, " using 1:2 with lines lw 2 lc rgb '%s' title ", color(p));
		gp_str(f, pt->label);
		fprintf(f, ", ");
	}
	if (!isnan(target))
		fprintf(f, "%.6g with lines dt 2 lw 1.5 lc rgb '#555555' title 'target %.2f'\n",
			target, target);
	else
		fprintf(f, "NaN notitle\n");
	rc = fig_end(c, name, f, 1100, 620);
	f = NULL;
out:
	if (f)
		fclose(f);
	for (size_t k = 0; k < MAX_RUNS; k++)
		series_free(&s[k]);
	free(s);
	return rc;
}

/* Numbers inside names compare as numbers: worker2 before worker10, workers=5 before
 * workers=15 (legends and axes follow a sweep's values in order). */
static int str_cmp(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

/* Worker trace names (nodes/NAME.csv, NAME not starting with "server"), sorted. The caller
 * frees each name and the array. */
static int worker_files(const struct run *r, char ***out, size_t *nout)
{
	char dir[8192];
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	DIR *d;

	*out = NULL;
	*nout = 0;
	snprintf(dir, sizeof dir, "%s/nodes", r->dir);
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (len <= 4 || strcmp(de->d_name + len - 4, ".csv") != 0 ||
		    strncmp(de->d_name, "server", 6) == 0)
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof *nn);

			if (!nn)
				break;
			names = nn;
		}
		if (!(names[n] = strdup(de->d_name)))
			break;
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof *names, str_cmp);
	*out = names;
	*nout = n;
	return 0;
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Final step of every worker of every run, per sweep point: box plot plus the points. */
static int fig_steps_final(struct ctx *c)
{
	char path[8192];
	size_t total = 0;
	FILE *f = NULL, *d = NULL;
	int rc = 0;

	d = dat_open(c, path, sizeof path, "steps_final.dat");
	if (!d)
		return -EIO;
	for (size_t p = 0; p < c->npoints; p++) {
		struct point *pt = &c->points[p];

		for (size_t k = 0; k < pt->nruns; k++) {
			const struct run *r = &c->runs[pt->runs[k]];
			char **names = NULL;
			size_t n = 0;

			rc = worker_files(r, &names, &n);
			if (rc < 0) {
				snprintf(c->err, c->errlen, "%s/nodes: %s", r->dir, strerror(-rc));
				goto out;
			}
			for (size_t i = 0; i < n; i++) {
				char file[512];
				struct table *t = NULL;
				double last = -1;
				int cs;

				snprintf(file, sizeof file, "nodes/%s", names[i]);
				rc = load_table(c, r, file, &t);
				if (rc < 0 || !t)
					continue;
				cs = table_col(t, "step");
				for (size_t row = 0; cs >= 0 && row < table_rows(t); row++) {
					double v = table_double_or(t, row, (size_t)cs, -1);

					last = v > last ? v : last;
				}
				table_destroy(&t);
				if (last < 0)
					continue;
				/* spread the points of one sweep point sideways so equal values stay
				 * visible: deterministic offset by worker and repeat */
				double jitter = ((double)((i * 7 + k * 3) % 11) / 10.0 - 0.5) * 0.36;
				fprintf(d, "%zu %.6g %.6g %zu\n", p, p + jitter, last, k);
				total++;
			}
			free_names(names, n);
		}
	}
	fclose(d);
	d = NULL;
	rc = 0;
	if (total == 0)
		goto out;
	f = fig_begin(c, "steps_final");
	if (!f) {
		rc = -EIO;
		goto out;
	}
	fprintf(f, "set title \"Steps completed by each worker at the end of the run");
	fprintf(f, "\\n(box: quartiles and median over all workers of all repeats; dot: one worker)\"\n");
	/* One sweep key ("consistency.barrier=bsp", ...): the key names the axis and each tic is
	 * only a value, so neighbouring labels do not run into each other. */
	size_t klen = 0;
	{
		const char *first = c->points[0].label, *eq = strchr(first, '=');

		klen = eq && !strstr(first, ", ") ? (size_t)(eq - first) + 1 : 0;
		for (size_t p = 1; p < c->npoints && klen; p++)
			if (strncmp(c->points[p].label, first, klen) != 0 || strstr(c->points[p].label, ", "))
				klen = 0;
	}
	fprintf(f, "set ylabel 'steps completed (count)'\nset xlabel ");
	if (klen) {
		char key[256];

		snprintf(key, sizeof key, "%.*s", (int)(klen - 1), c->points[0].label);
		gp_str(f, key);
	} else {
		gp_str(f, "sweep point");
	}
	fprintf(f, "\nset xrange [-0.6:%zu.6]\nset yrange [0:*]\nset xtics (", c->npoints - 1);
	for (size_t p = 0; p < c->npoints; p++) {
		fprintf(f, "%s", p ? ", " : "");
		gp_str(f, c->points[p].label + klen);
		fprintf(f, " %zu", p);
	}
	fprintf(f, ")\nset style boxplot nooutliers\nset boxwidth 0.5\nunset key\n");
	fprintf(f, "set style fill solid 0.25 border\n");
	fprintf(f, "plot ");
	for (size_t p = 0; p < c->npoints; p++) {
		gp_str(f, path);
		fprintf(f, " using (%zu):($1==%zu ? $3 : NaN) with boxplot lc rgb '%s' lw 1.5, ", p, p,
			color(p));
		gp_str(f, path);
		fprintf(f, " using ($1==%zu ? $2 : NaN):3 with points pt 7 ps 1.1 lc rgb '%s'%s", p,
			color(p), p + 1 < c->npoints ? ", " : "\n");
	}
	rc = fig_end(c, "steps_final", f, 1000, 620);
	f = NULL;
out:
	if (d)
		fclose(d);
	if (f)
		fclose(f);
	return rc;
}

/* Rows a and b of progress.csv have the same min, median and max step. */
static bool same_steps(const struct table *t, size_t a, size_t b, int cmin, int cmed, int cmax)
{
	const int cols[3] = { cmin, cmed, cmax };

	for (size_t k = 0; k < 3; k++)
		if (strcmp(table_get(t, a, (size_t)cols[k]), table_get(t, b, (size_t)cols[k])) != 0)
			return false;
	return true;
}

/* Step spread and waiting workers over time, first repeat of each sweep point. */
static int fig_progress(struct ctx *c)
{
	char path[MAX_POINTS][8192];
	bool have[MAX_POINTS] = { false };
	double tmax = 0, win_max = 1.0;
	size_t nhave = 0;
	FILE *f = NULL;
	int rc = 0;

	for (size_t p = 0; p < c->npoints; p++) {
		const struct run *r = &c->runs[c->points[p].runs[0]];
		struct table *t = NULL;
		int ct, ca, cw, cmin, cmed, cmax;
		double win_start = 0, win_sum = 0, min_gap, t_kept, win;
		size_t win_n = 0;
		FILE *d;

		rc = load_table(c, r, "progress.csv", &t);
		if (rc < 0)
			return rc;
		if (!t)
			continue;
		ct = table_col(t, "t_s");
		ca = table_col(t, "alive");
		cw = table_col(t, "waiting");
		cmin = table_col(t, "min_step");
		cmed = table_col(t, "median_step");
		cmax = table_col(t, "max_step");
		if (ct < 0 || ca < 0 || cw < 0 || cmin < 0 || cmed < 0 || cmax < 0 ||
		    table_rows(t) == 0) {
			table_destroy(&t);
			continue;
		}
		d = dat_open(c, path[p], sizeof path[p], "progress_%zu.dat", p);
		if (!d) {
			table_destroy(&t);
			return -EIO;
		}
		min_gap = (table_double_or(t, table_rows(t) - 1, (size_t)ct, 0) -
			   table_double_or(t, 0, (size_t)ct, 0)) / 400;
		/* waiting: means over 1 s, or 1/100 of a longer run (a marker each) */
		win = min_gap * 4 > 1.0 ? min_gap * 4 : 1.0;
		win_max = win > win_max ? win : win_max;
		t_kept = -INFINITY;
		/* columns: t min median max waiting_mean (only on window ends, else nan) */
		for (size_t row = 0; row < table_rows(t); row++) {
			double ts = table_double_or(t, row, (size_t)ct, NAN);
			double w = table_double_or(t, row, (size_t)cw, 0);
			char wbuf[32] = "nan";

			if (isnan(ts))
				continue;
			if (ts - win_start >= win || row + 1 == table_rows(t)) {
				win_sum += w;
				win_n++;
				snprintf(wbuf, sizeof wbuf, "%.4g", win_sum / (double)win_n);
				fprintf(d, "%.4f %s %s %s %s\n", win_start + (ts - win_start) / 2,
					"nan", "nan", "nan", wbuf);
				win_start = ts;
				win_sum = 0;
				win_n = 0;
			} else {
				win_sum += w;
				win_n++;
			}
			/* A figure is 1100 px wide: samples closer than 1/400 of the run add
			 * nothing to it but size (a 300 s run has 3000). Between those, a sample is
			 * kept only where the curve bends (it differs from its neighbour before or
			 * after); the first and the last always. */
			if (row == 0 || row + 1 == table_rows(t) ||
			    (ts - t_kept >= min_gap &&
			     (!same_steps(t, row, row - 1, cmin, cmed, cmax) ||
			      !same_steps(t, row, row + 1, cmin, cmed, cmax)))) {
				fprintf(d, "%.4f %s %s %s nan\n", ts, table_get(t, row, (size_t)cmin),
					table_get(t, row, (size_t)cmed), table_get(t, row, (size_t)cmax));
				t_kept = ts;
			}
			tmax = ts > tmax ? ts : tmax;
		}
		fclose(d);
		table_destroy(&t);
		have[p] = true;
		nhave++;
	}
	if (nhave == 0)
		return 0;
	f = fig_begin(c, "progress");
	if (!f)
		return -EIO;
	fprintf(f, "set multiplot layout 2,1 title 'Worker progress over time (first repeat of each "
		   "sweep point)'\n");
	fprintf(f, "set xrange [0:%.6g]\nset key outside right top\n", tmax);
	fprintf(f, "set lmargin 12\nset rmargin 34\n");
	fprintf(f, "set title 'Steps completed: line = median worker, band = slowest to fastest'\n");
	fprintf(f, "set ylabel 'steps completed (count)'\nset xlabel ''\nset yrange [0:*]\n");
	fprintf(f, "plot ");
	for (size_t p = 0, first = 1; p < c->npoints; p++) {
		if (!have[p])
			continue;
		fprintf(f, "%s", first ? "" : ", ");
		first = 0;
		gp_str(f, path[p]);
		fprintf(f, " using 1:2:4 with filledcurves lc rgb '%s' notitle, ", color(p));
		gp_str(f, path[p]);
		fprintf(f, " using 1:3 with lines lw 2 lc rgb '%s' title ", color(p));
		gp_str(f, c->points[p].label);
	}
	fprintf(f, "\nset title 'Workers blocked at a barrier (%.3g s mean)'\n", win_max);
	fprintf(f, "set ylabel 'workers waiting (count)'\nset xlabel 'time since run start (s)'\n");
	fprintf(f, "set yrange [0:*]\nplot ");
	for (size_t p = 0, first = 1; p < c->npoints; p++) {
		if (!have[p])
			continue;
		fprintf(f, "%s", first ? "" : ", ");
		first = 0;
		gp_str(f, path[p]);
		fprintf(f, " using 1:5 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb '%s' title ", color(p));
		gp_str(f, c->points[p].label);
	}
	fprintf(f, "\nunset multiplot\n");
	rc = fig_end(c, "progress", f, 1100, 820);
	return rc;
}

/* Histogram of the staleness of applied updates, pooled over repeats, per sweep point. */
static int fig_staleness(struct ctx *c)
{
	char path[8192];
	double (*frac)[STALE_CAP + 1] = NULL;
	size_t total[MAX_POINTS] = { 0 }, any = 0;
	int maxbin = 0, rc = 0;
	FILE *f = NULL, *d = NULL;

	frac = calloc(MAX_POINTS, sizeof *frac);
	if (!frac)
		return -ENOMEM;
	for (size_t p = 0; p < c->npoints; p++) {
		for (size_t k = 0; k < c->points[p].nruns; k++) {
			const struct run *r = &c->runs[c->points[p].runs[k]];
			char dir[8192];
			struct dirent *de;
			DIR *dd;

			snprintf(dir, sizeof dir, "%s/nodes", r->dir);
			dd = opendir(dir);
			if (!dd)
				continue;
			while ((de = readdir(dd))) {
				size_t len = strlen(de->d_name);
				char file[512];
				struct table *t = NULL;
				int cs;

				if (len <= 4 || strcmp(de->d_name + len - 4, ".csv") != 0)
					continue;
				snprintf(file, sizeof file, "nodes/%s", de->d_name);
				if (load_table(c, r, file, &t) < 0 || !t)
					continue;
				/* A parameter server's update trace repeats what its workers' rows
				 * say (one row per update): count each update once. */
				if (table_col(t, "worker_step") >= 0) {
					table_destroy(&t);
					continue;
				}
				cs = table_col(t, "staleness");
				for (size_t row = 0; cs >= 0 && row < table_rows(t); row++) {
					double v;

					if (table_double(t, row, (size_t)cs, &v) < 0 || v < 0)
						continue;
					int b = v >= STALE_CAP ? STALE_CAP : (int)v;
					frac[p][b] += 1;
					total[p]++;
					maxbin = b > maxbin ? b : maxbin;
				}
				table_destroy(&t);
			}
			closedir(dd);
		}
		any += total[p];
	}
	if (any == 0)
		goto out;
	d = dat_open(c, path, sizeof path, "staleness.dat");
	if (!d) {
		rc = -EIO;
		goto out;
	}
	/* row per bin: bin, then fraction of each point */
	for (int b = 0; b <= maxbin; b++) {
		fprintf(d, "%d", b);
		for (size_t p = 0; p < c->npoints; p++)
			fprintf(d, " %.6g", total[p] ? frac[p][b] / (double)total[p] : 0.0);
		fputc('\n', d);
	}
	fclose(d);
	d = NULL;
	f = fig_begin(c, "staleness_hist");
	if (!f) {
		rc = -EIO;
		goto out;
	}
	{
		double bw = 0.8 / (double)c->npoints;

		fprintf(f, "set title 'Staleness of applied updates (model versions behind when applied;"
			   " all repeats pooled)'\n");
		fprintf(f, "set xlabel 'staleness (model versions)%s'\n",
			maxbin == STALE_CAP ? "; last bar: that many or more" : "");
		fprintf(f, "set ylabel 'fraction of updates'\nset yrange [0:*]\nset xrange [-0.6:%d.6]\n",
			maxbin);
		fprintf(f, "set boxwidth %.4f absolute\nset style fill solid 0.75 border -1\n", bw);
		fprintf(f, "set xtics 1\nset key inside top right\n");
		if (maxbin > 20)
			fprintf(f, "set xtics 5\n");
		fprintf(f, "plot ");
		for (size_t p = 0; p < c->npoints; p++) {
			double off = ((double)p - (double)(c->npoints - 1) / 2.0) * bw;
			char t[320];

			gp_str(f, path);
			fprintf(f, " using ($1%+.4f):%zu with boxes lc rgb '%s' title ", off, p + 2,
				color(p));
			snprintf(t, sizeof t, "%s (%zu updates)", c->points[p].label, total[p]);
			gp_str(f, t);
			fprintf(f, "%s", p + 1 < c->npoints ? ", " : "\n");
		}
	}
	rc = fig_end(c, "staleness_hist", f, 1000, 600);
	f = NULL;
out:
	if (d)
		fclose(d);
	if (f)
		fclose(f);
	free(frac);
	return rc;
}

/* Cumulative packets dropped on all emulated links over time, per sweep point. */
static int fig_link_drops(struct ctx *c)
{
	struct series s[MAX_RUNS];
	char path[8192];
	double xmax = 0;
	size_t any = 0;
	FILE *f = NULL, *d = NULL;
	int rc = 0;

	memset(s, 0, sizeof s);
	f = fig_begin(c, "link_drops");
	if (!f)
		return -EIO;
	title_repeats(f, c, "Packets dropped on the emulated links (all links summed, cumulative)");
	fprintf(f, "set xlabel 'time since run start (s)'\nset ylabel 'packets dropped (count)'\n");
	fprintf(f, "set yrange [0:*]\nset key inside top left\nplot ");
	for (size_t p = 0; p < c->npoints; p++) {
		struct point *pt = &c->points[p];

		for (size_t k = 0; k < pt->nruns; k++) {
			struct table *t = NULL;
			int ct, cn, cdir, cd;

			rc = load_table(c, &c->runs[pt->runs[k]], "links.csv", &t);
			if (rc < 0)
				goto out;
			if (!t)
				continue;
			ct = table_col(t, "t_s");
			cn = table_col(t, "node");
			cdir = table_col(t, "direction");
			cd = table_col(t, "dropped");
			size_t rows = table_rows(t);
			s[k].x = calloc(rows + 1, sizeof(double));
			s[k].y = calloc(rows + 1, sizeof(double));
			/* per-link last value, summed at each sample instant */
			char (*keys)[96] = calloc(rows + 1, sizeof *keys);
			double *last = calloc(rows + 1, sizeof *last);
			size_t nk = 0;

			if (!s[k].x || !s[k].y || !keys || !last || ct < 0 || cn < 0 || cdir < 0 ||
			    cd < 0) {
				free(keys);
				free(last);
				table_destroy(&t);
				continue;
			}
			for (size_t row = 0; row < rows; row++) {
				char key[96];
				size_t i;
				double sum = 0, ts = table_double_or(t, row, (size_t)ct, 0);

				snprintf(key, sizeof key, "%.60s/%.20s", table_get(t, row, (size_t)cn),
					 table_get(t, row, (size_t)cdir));
				for (i = 0; i < nk; i++)
					if (strcmp(keys[i], key) == 0)
						break;
				if (i == nk)
					memcpy(keys[nk++], key, sizeof key);
				last[i] = table_double_or(t, row, (size_t)cd, last[i]);
				for (size_t j = 0; j < nk; j++)
					sum += last[j];
				if (s[k].n > 0 && s[k].x[s[k].n - 1] == ts)
					s[k].n--;
				s[k].x[s[k].n] = ts;
				s[k].y[s[k].n++] = sum;
				xmax = ts > xmax ? ts : xmax;
			}
			any += s[k].n;
			free(keys);
			free(last);
			table_destroy(&t);
		}
		d = dat_open(c, path, sizeof path, "link_drops_%zu.dat", p);
		if (!d) {
			rc = -EIO;
			goto out;
		}
		/* the grid needs xmax of all points; use this point's own range, rewritten below */
		write_band(d, s, pt->nruns, xmax > 0 ? xmax : 1);
		fclose(d);
		d = NULL;
		for (size_t k = 0; k < pt->nruns; k++)
			series_free(&s[k]);
		if (pt->nruns > 1) {
			gp_str(f, path);
			fprintf(f, " using 1:3:4 with filledcurves lc rgb '%s' notitle, ", color(p));
		}
		gp_str(f, path);
		fprintf(f, " using 1:2 with lines lw 2 lc rgb '%s' title ", color(p));
		gp_str(f, pt->label);
		fprintf(f, "%s", p + 1 < c->npoints ? ", " : "\n");
	}
	if (any == 0) {
		rc = 0;
		goto out;
	}
	rc = fig_end(c, "link_drops", f, 1000, 600);
	f = NULL;
out:
	if (f)
		fclose(f);
	for (size_t k = 0; k < MAX_RUNS; k++)
		series_free(&s[k]);
	return rc;
}

/* Measured vs configured delay per link and direction, from the first run with linkcheck.csv. */
static int fig_linkcheck(struct ctx *c)
{
	static const char *const dirs[] = { "up", "down", "rtt" };
	static const char *const dcol[] = { "#0072B2", "#E69F00", "#009E73" };
	struct table *t = NULL;
	const struct run *r = NULL;
	char path[3][8192], nodes[64][64];
	size_t nn = 0;
	FILE *f = NULL, *d[3] = { NULL };
	int rc = 0;

	for (size_t i = 0; i < c->nruns && !t; i++) {
		rc = load_table(c, &c->runs[i], "linkcheck.csv", &t);
		if (rc < 0)
			return rc;
		r = &c->runs[i];
	}
	if (!t || table_rows(t) == 0)
		goto out;
	int cn = table_col(t, "node"), cdir = table_col(t, "direction"),
	    cm = table_col(t, "rtt_mean_ms"), csd = table_col(t, "rtt_sd_ms"),
	    ccfg = table_col(t, "cfg_delay_ms"), cv = table_col(t, "verdict");
	if (cn < 0 || cdir < 0 || cm < 0 || csd < 0 || ccfg < 0 || cv < 0)
		goto out;
	for (int k = 0; k < 3; k++) {
		d[k] = dat_open(c, path[k], sizeof path[k], "linkcheck_%s.dat", dirs[k]);
		if (!d[k]) {
			rc = -EIO;
			goto out;
		}
	}
	for (size_t row = 0; row < table_rows(t); row++) {
		const char *nm = table_get(t, row, (size_t)cn), *dr = table_get(t, row, (size_t)cdir);
		size_t i;
		int k;

		for (k = 0; k < 3; k++)
			if (strcmp(dr, dirs[k]) == 0)
				break;
		if (k == 3)
			continue;
		for (i = 0; i < nn; i++)
			if (strcmp(nodes[i], nm) == 0)
				break;
		if (i == nn) {
			if (nn == 64)
				continue;
			snprintf(nodes[nn++], sizeof nodes[0], "%.63s", nm);
		}
		fprintf(d[k], "%.4f %s %s %s %s\n", (double)i + (k - 1) * 0.27,
			*table_get(t, row, (size_t)cm) ? table_get(t, row, (size_t)cm) : "nan",
			*table_get(t, row, (size_t)csd) ? table_get(t, row, (size_t)csd) : "0",
			table_get(t, row, (size_t)ccfg),
			strcmp(table_get(t, row, (size_t)cv), "ok") == 0 ? "0" : "1");
	}
	for (int k = 0; k < 3; k++) {
		fclose(d[k]);
		d[k] = NULL;
	}
	f = fig_begin(c, "linkcheck_delay");
	if (!f) {
		rc = -EIO;
		goto out;
	}
	{
		char title[512];

		snprintf(title, sizeof title,
			 "Link self-check of run %s: measured delay (bar, error bar = sd) vs configured "
			 "(black dash)\nup/down: one-way delay; rtt: round trip; red X: verdict off",
			 r->meta.run_id);
		fprintf(f, "set title ");
		gp_str(f, title);
	}
	fprintf(f, "\nset ylabel 'delay (ms)'\nset xlabel 'node'\nset yrange [0:*]\n");
	fprintf(f, "set xrange [-0.6:%zu.6]\nset xtics (", nn - 1);
	for (size_t i = 0; i < nn; i++) {
		fprintf(f, "%s", i ? ", " : "");
		gp_str(f, nodes[i]);
		fprintf(f, " %zu", i);
	}
	fprintf(f, ")\nset boxwidth 0.25 absolute\nset style fill solid 0.7 border -1\n");
	fprintf(f, "set key inside top left\nset bars 2\nplot ");
	for (int k = 0; k < 3; k++) {
		gp_str(f, path[k]);
		fprintf(f, " using 1:2:3 with boxerrorbars lc rgb '%s' title '%s measured', ", dcol[k],
			dirs[k]);
	}
	for (int k = 0; k < 3; k++) {
		gp_str(f, path[k]);
		fprintf(f, " using 1:4 with points pt 5 ps 0.01 lc rgb 'black' notitle, ");
		gp_str(f, path[k]);
		fprintf(f, " using ($1-0.125):4:(0.25):(0) with vectors nohead lw 3 lc rgb 'black' %s, ",
			k == 0 ? "title 'configured'" : "notitle");
		gp_str(f, path[k]);
		fprintf(f, " using 1:($5 > 0 ? $2 : NaN) with points pt 2 ps 2.5 lw 2 lc rgb 'red' %s%s",
			k == 0 ? "title 'verdict off'" : "notitle", k < 2 ? ", " : "\n");
	}
	rc = fig_end(c, "linkcheck_delay", f, 1100, 600);
	f = NULL;
out:
	for (int k = 0; k < 3; k++)
		if (d[k])
			fclose(d[k]);
	if (f)
		fclose(f);
	table_destroy(&t);
	return rc;
}

/* ---- driver -------------------------------------------------------------------------- */

static bool has_meta(const char *dir)
{
	char path[8300];

	snprintf(path, sizeof path, "%s/meta.json", dir);
	return access(path, R_OK) == 0;
}

static int add_run(struct ctx *c, const char *dir)
{
	struct run *r;
	char label[256];
	size_t p;
	int rc;

	if (c->nruns == MAX_RUNS) {
		snprintf(c->err, c->errlen, "%s: more than %d runs", c->dir, MAX_RUNS);
		return -E2BIG;
	}
	r = &c->runs[c->nruns];
	snprintf(r->dir, sizeof r->dir, "%s", dir);
	rc = meta_load_dir(dir, &r->meta, c->err, c->errlen);
	if (rc < 0)
		return rc;
	meta_sweep_label(&r->meta, label, sizeof label);
	if (!label[0])
		snprintf(label, sizeof label, "%s", c->nruns == 0 && has_meta(c->dir) ? r->meta.run_id
										 : "all runs");
	for (p = 0; p < c->npoints; p++)
		if (strcmp(c->points[p].label, label) == 0)
			break;
	if (p == c->npoints) {
		if (p == MAX_POINTS) {
			snprintf(c->err, c->errlen, "%s: more than %d sweep points", c->dir, MAX_POINTS);
			return -E2BIG;
		}
		snprintf(c->points[p].label, sizeof c->points[p].label, "%s", label);
		c->npoints++;
	}
	c->points[p].runs[c->points[p].nruns++] = c->nruns++;
	return 0;
}

static int collect_runs(struct ctx *c)
{
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	DIR *d;
	int rc = 0;

	if (has_meta(c->dir))
		return add_run(c, c->dir);
	d = opendir(c->dir);
	if (!d) {
		snprintf(c->err, c->errlen, "%s: %s", c->dir, strerror(errno));
		return -errno;
	}
	while ((de = readdir(d))) {
		char sub[8192];

		if (de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof sub, "%s/%s", c->dir, de->d_name);
		if (!has_meta(sub))
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof *nn);

			if (!nn) {
				rc = -ENOMEM;
				break;
			}
			names = nn;
		}
		if (!(names[n] = strdup(sub))) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof *names, str_cmp);
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = add_run(c, names[i]);
	free_names(names, n);
	if (rc == 0 && c->nruns == 0) {
		snprintf(c->err, c->errlen, "%s: neither a run dir nor a sweep dir (no meta.json)", c->dir);
		rc = -ENOENT;
	}
	return rc;
}

static void remove_tmp(const char *tmp)
{
	struct dirent *de;
	DIR *d = opendir(tmp);

	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[8192];

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", tmp, de->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(tmp);
}

int plot_dir(const char *dir, char *err, size_t errlen)
{
	struct ctx c = { .dir = dir, .err = err, .errlen = errlen };
	int (*const figs[])(struct ctx *) = { fig_steps_final, fig_progress, fig_staleness,
					      fig_link_drops, fig_linkcheck };
	int rc = 0, written = 0;

	c.tmp[0] = '\0';
	c.runs = calloc(MAX_RUNS, sizeof *c.runs);
	if (!c.runs) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = collect_runs(&c);
	if (rc < 0)
		goto out;
	snprintf(c.plots, sizeof c.plots, "%s/plots", dir);
	rc = safefile_mkdir(c.plots, 0755);
	if (rc < 0) {
		snprintf(err, errlen, "mkdir %s: %s", c.plots, strerror(-rc));
		goto out;
	}
	snprintf(c.tmp, sizeof c.tmp, "%s/.data-XXXXXX", c.plots);
	if (!mkdtemp(c.tmp)) {
		rc = -errno;
		snprintf(err, errlen, "mkdtemp %s: %s", c.tmp, strerror(errno));
		c.tmp[0] = '\0';
		goto out;
	}
	for (int k = 0; k < 2 && rc >= 0; k++) {
		rc = fig_accuracy(&c, k == 1);
		written += rc > 0;
	}
	for (size_t i = 0; i < sizeof figs / sizeof figs[0] && rc >= 0; i++) {
		rc = figs[i](&c);
		written += rc > 0;
	}
	if (rc >= 0)
		rc = written;
out:
	if (c.tmp[0])
		remove_tmp(c.tmp);
	free(c.runs);
	return rc;
}
