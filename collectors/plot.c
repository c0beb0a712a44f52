/* collectors/plot: see plot.h.
 *
 * Hostile input. Plots are drawn as root from directories other people wrote, and gnuplot is a
 * language: it runs `backquoted` commands on any script line (inside double-quoted strings
 * too), expands @macros and evaluates system("..."). So no byte of the plotted directory is
 * ever part of a script's text as written:
 *  - gnuplot runs with its working directory set to a fresh private temporary directory; every
 *    file a script names (data files, the output, the body it loads) is a fixed name there,
 *    and the finished figure is renamed into DIR/plots/. That directory is reached only
 *    through a descriptor, never again by its path (see plot_dir).
 *  - legend keys and axis tic labels (sweep labels, node names) travel in the data files, as a
 *    column header (`title columnheader(N)`) or a string column (`xticlabels(N)`): gnuplot
 *    reads those as text and never evaluates them. They keep the user's text except that
 *    control bytes become ' ', '"' becomes '\'' and '\\' becomes '/' (gnuplot's data reader
 *    ends a field at a quote and reads "\n" as a line break; a tab would split the field),
 *    and bytes that are not UTF-8 become '?'.
 *  - the two titles that name something from the directory (the link self-check's run id,
 *    the step figure's sweep key) pass through plot_safe_text's whitelist.
 * Text is drawn with enhanced mode off so node names and key paths with '_' print as written.
 * Data files are tab-separated with a header line. */
#include "collectors/plot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectors/plot_data.h"
#include "collectors/plot_fleet.h"
#include "lib/log.h"

const char *const PLOT_FIGURES[] = {
	"accuracy_time", "accuracy_updates", "steps_final", "steps_cdf", "progress",
	"staleness_hist", "link_drops", "linkcheck_delay", "fleet_bytes", "fleet_lag", "fleet_recover",
	NULL,
};

struct ctx {
	const struct plot_set *set;
	char plots[4096];
	char tmp[4200];
	int plotsfd, tmpfd; /* DIR/plots and the private directory, opened once (see plot_dir) */
	char *err;
	size_t errlen;
};

/* Colour-blind-safe palette (Okabe-Ito), one per sweep point. */
static const char *const COLORS[] = {
	"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
};
#define NCOLORS (sizeof COLORS / sizeof COLORS[0])

static const char *color(size_t i)
{
	return COLORS[i % NCOLORS];
}

/* Dash patterns, each visibly different from the others, and point markers (gnuplot's 1-15,
 * 7 last: the figures that always mark points use it for the unvaried look). */
static const char *const DASHES[PLOT_LOOK_NDASH] = {
	"1", "(12,6)", "(3,5)", "(12,5,3,5)", "(12,5,3,5,3,5)", "(6,6)", "(22,6)", "(22,5,3,5,3,5,3,5)",
};
static const int MARKS[] = { 0, 4, 6, 8, 10, 12, 14, 1, 2, 3, 5, 9, 11, 13, 15, 7 };
#define NMARKS (sizeof MARKS / sizeof MARKS[0])
#define MARK_EVERY 24 /* a line's markers: one per this many samples */

void plot_look_of(const struct plot_set *set, size_t p, struct plot_look *out)
{
	const struct plot_point *pt = &set->points[p];
	size_t nsrc = 1, v;

	for (size_t q = 0; q < set->npoints; q++)
		if (set->points[q].source + 1 > nsrc)
			nsrc = set->points[q].source + 1;
	v = pt->source + nsrc * (pt->style / NCOLORS);
	out->color = color(pt->style);
	out->dash = DASHES[v % PLOT_LOOK_NDASH];
	out->point = MARKS[(v / PLOT_LOOK_NDASH) % NMARKS];
	out->fill = (int)(v % 8);
}

/* Colour of point p (its style's). */
static const char *pcolor(const struct ctx *c, size_t p)
{
	return color(c->set->points[p].style);
}

/* The look of point p as a gnuplot line: "lines" or "linespoints" with its colour, width lw,
 * dash and (past the first 8 variants of its colour) markers; ends before the title. */
static void line_look(FILE *f, const struct ctx *c, size_t p, double lw)
{
	struct plot_look lk;

	plot_look_of(c->set, p, &lk);
	if (lk.point)
		fprintf(f, "with linespoints pt %d pi %d ps 1 lw %.3g lc rgb '%s' dt %s ", lk.point,
			MARK_EVERY, lw, lk.color, lk.dash);
	else
		fprintf(f, "with lines lw %.3g lc rgb '%s' dt %s ", lw, lk.color, lk.dash);
}

/* ---- text ---------------------------------------------------------------------------- */

char *plot_safe_text(char *dst, size_t dstlen, const char *src)
{
	static const char ok[] = " ._-+=:,/%()[]";
	size_t i = 0;

	for (; src[i] && i + 1 < dstlen; i++) {
		unsigned char ch = (unsigned char)src[i];
		bool keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			    (ch >= '0' && ch <= '9') || (ch && strchr(ok, ch));

		dst[i] = keep ? (char)ch : '_';
	}
	dst[i] = '\0';
	return dst;
}

/* Length of the valid UTF-8 sequence at s (1 to 4), or 0 when s does not start one (stray
 * continuation byte, overlong form, surrogate, beyond U+10FFFF, cut short). */
static size_t utf8_len(const unsigned char *s)
{
	unsigned cp;
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1fu;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0fu;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07u;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
			return 0;
		cp = cp << 6 | (s[i] & 0x3fu);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

/* A label as a data-file field (see the file comment); bytes that are not UTF-8 become '?'
 * (an SVG holding them is not XML), and an empty label "-" (gnuplot skips an empty header). */
static void put_label(FILE *f, const char *label)
{
	const unsigned char *s = (const unsigned char *)label;

	if (!*s)
		fputc('-', f);
	while (*s) {
		size_t n = utf8_len(s);

		if (n > 1) {
			fwrite(s, 1, n, f);
			s += n;
			continue;
		}
		if (n == 0)
			fputc('?', f);
		else if (*s < 0x20 || *s == 0x7f)
			fputc(' ', f);
		else if (*s == '"')
			fputc('\'', f);
		else if (*s == '\\')
			fputc('/', f);
		else
			fputc(*s, f);
		s++;
	}
}

/* A number as a data-file field; "nan" (set datafile missing) when not a number. */
static void put_num(FILE *f, int digits, double v)
{
	if (isnan(v))
		fputs("nan", f);
	else
		fprintf(f, "%.*g", digits, v);
}

/* ---- gnuplot ------------------------------------------------------------------------- */

static const char *gnuplot_bin(void)
{
	const char *g = getenv("GNUPLOT");

	return g && *g ? g : "gnuplot";
}

/* Run gnuplot on script (a name in the private directory), in it; stderr is captured and becomes the
 * error on failure. */
static int run_gnuplot(struct ctx *c, const char *script)
{
	char out[4096];
	size_t used = 0;
	int pipefd[2] = { -1, -1 };
	int status = 0, rc = 0;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		rc = -errno;
		snprintf(c->err, c->errlen, "pipe: %s", strerror(errno));
		return rc;
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
		if (fchdir(c->tmpfd) < 0) {
			dprintf(2, "fchdir %s: %s\n", c->tmp, strerror(errno));
			_exit(127);
		}
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
			rc = -errno;
			snprintf(c->err, c->errlen, "waitpid: %s", strerror(errno));
			return rc;
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

/* A new file NAME in the private directory. */
static FILE *tmp_open(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static FILE *tmp_open(struct ctx *c, const char *fmt, ...)
{
	char name[256];
	va_list ap;
	FILE *f = NULL;
	int fd;

	va_start(ap, fmt);
	vsnprintf(name, sizeof name, fmt, ap);
	va_end(ap);
	fd = openat(c->tmpfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0 && !(f = fdopen(fd, "w")))
		close(fd);
	if (!f)
		snprintf(c->err, c->errlen, "%s/%s: %s", c->tmp, name, strerror(errno));
	return f;
}

/* Start a figure's script: returns the FILE to which the caller writes the figure body; the
 * body is written once to NAME.body.gp and the main script renders it with both terminals. */
static FILE *fig_begin(struct ctx *c, const char *name)
{
	FILE *f = tmp_open(c, "%s.body.gp", name);

	if (!f)
		return NULL;
	fprintf(f, "set termoption noenhanced\n"
		   "set grid lc rgb '#d0d0d0' lw 1\n"
		   "set border lw 1.2\n"
		   "set key outside right top vertical box opaque\n"
		   "set key autotitle columnheader\n"
		   "set style fill transparent solid 0.22 noborder\n"
		   "set datafile separator tab\n"
		   "set datafile missing 'nan'\n");
	return f;
}

/* Move NAME.EXT from the private directory into plots/ (replacing a file, or a symlink
 * itself, of that name). */
static int publish(struct ctx *c, const char *name, const char *ext)
{
	char file[256];
	int rc;

	snprintf(file, sizeof file, "%s.%s", name, ext);
	if (renameat(c->tmpfd, file, c->plotsfd, file) == 0)
		return 0;
	rc = -errno;
	snprintf(c->err, c->errlen, "rename %s/%s to %s/%s: %s", c->tmp, file, c->plots, file,
		 strerror(errno));
	return rc;
}

static int fig_end(struct ctx *c, const char *name, FILE *body, int w, int h)
{
	char script[256];
	FILE *f;
	int rc;

	if (fclose(body) != 0) {
		snprintf(c->err, c->errlen, "write %s body: %s", name, strerror(errno));
		return -EIO;
	}
	f = tmp_open(c, "%s.gp", name);
	if (!f)
		return -EIO;
	/* name is one of PLOT_FIGURES: a constant of this file */
	fprintf(f, "set terminal pngcairo size %d,%d font 'DejaVu Sans,11' linewidth 1.3\n", w, h);
	fprintf(f, "set output '%s.png'\nload '%s.body.gp'\nunset output\nreset\n", name, name);
	fprintf(f, "set terminal svg size %d,%d dynamic font 'DejaVu Sans,11' linewidth 1.3\n", w, h);
	fprintf(f, "set output '%s.svg'\nload '%s.body.gp'\nunset output\n", name, name);
	if (fclose(f) != 0) {
		snprintf(c->err, c->errlen, "write %s script: %s", name, strerror(errno));
		return -EIO;
	}
	snprintf(script, sizeof script, "%s.gp", name);
	rc = run_gnuplot(c, script);
	if (rc == 0)
		rc = publish(c, name, "png");
	if (rc == 0)
		rc = publish(c, name, "svg");
	return rc < 0 ? rc : 1;
}

static void title_repeats(FILE *f, const struct ctx *c, const char *what)
{
	size_t maxrep = plot_data_max_repeats(c->set);

	if (maxrep > 1)
		fprintf(f, "set title \"%s\\n(line: mean over repeats; band: min to max, %zu "
			   "repeats)\"\n", what, maxrep);
	else
		fprintf(f, "set title \"%s\"\n", what);
}

/* Band of point p into NAME_P.dat: header "x LABEL lo hi n" (the key reads column 2's
 * header), then one row per grid sample. */
static int write_band(struct ctx *c, const char *name, size_t p, const struct plot_band *b)
{
	FILE *d = tmp_open(c, "%s_%zu.dat", name, p);

	if (!d)
		return -EIO;
	fputs("x\t", d);
	put_label(d, c->set->points[p].label);
	fputs("\tlo\thi\tn\n", d);
	for (int g = 0; g <= PLOT_DATA_GRID; g++) {
		put_num(d, 6, b->x[g]);
		fputc('\t', d);
		put_num(d, 6, b->mean[g]);
		fputc('\t', d);
		put_num(d, 6, b->lo[g]);
		fputc('\t', d);
		put_num(d, 6, b->hi[g]);
		fprintf(d, "\t%zu\n", b->n[g]);
	}
	if (fclose(d) != 0) {
		snprintf(c->err, c->errlen, "write %s_%zu.dat: %s", name, p, strerror(errno));
		return -EIO;
	}
	return 0;
}

/* plot elements of the bands NAME_P.dat: a band when p has repeats, the mean line keyed by
 * its label */
static void plot_bands(FILE *f, const struct ctx *c, const char *name)
{
	for (size_t p = 0; p < c->set->npoints; p++) {
		if (c->set->points[p].nruns > 1)
			fprintf(f, "'%s_%zu.dat' using 1:3:4 with filledcurves lc rgb '%s' notitle, ",
				name, p, pcolor(c, p));
		fprintf(f, "'%s_%zu.dat' using 1:2 ", name, p);
		line_look(f, c, p, 2);
		fprintf(f, "title columnheader(2)");
		if (p + 1 < c->set->npoints)
			fputs(", ", f);
	}
}

/* ---- figures ------------------------------------------------------------------------- */

/* accuracy vs time (by_updates = false) or vs updates */
static int fig_accuracy(struct ctx *c, bool by_updates)
{
	const char *name = by_updates ? "accuracy_updates" : "accuracy_time";
	struct plot_band *bands = NULL;
	double xmax = 0, target = plot_data_target(c->set);
	FILE *f = NULL;
	int rc;

	bands = calloc(c->set->npoints, sizeof *bands);
	if (!bands)
		return -ENOMEM;
	rc = plot_data_accuracy(c->set, by_updates, bands, &xmax, c->err, c->errlen);
	if (rc <= 0)
		goto out;
	for (size_t p = 0; p < c->set->npoints && rc >= 0; p++)
		rc = write_band(c, name, p, &bands[p]);
	if (rc < 0)
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
	plot_bands(f, c, name);
	if (!isnan(target))
		fprintf(f, ", %.6g with lines dt 2 lw 1.5 lc rgb '#555555' title 'target %.2f'\n",
			target, target);
	else
		fprintf(f, ", NaN notitle\n");
	rc = fig_end(c, name, f, 1100, 620);
out:
	free(bands);
	return rc;
}

/* Final step of every worker of every run, per sweep point: box plot plus the points. */
static int fig_steps_final(struct ctx *c)
{
	const struct plot_set *s = c->set;
	struct plot_step *v = NULL;
	size_t n = 0, klen;
	FILE *f = NULL, *d = NULL;
	int rc;

	rc = plot_data_steps_final(s, &v, &n, c->err, c->errlen);
	if (rc < 0 || n == 0)
		goto out;
	/* columns: point, x, step, repeat */
	d = tmp_open(c, "steps_final.dat");
	if (!d) {
		rc = -EIO;
		goto out;
	}
	fputs("point\tx\tstep\trepeat\n", d);
	for (size_t i = 0; i < n; i++)
		fprintf(d, "%zu\t%.6g\t%.6g\t%zu\n", v[i].point, v[i].x, v[i].step, v[i].repeat);
	if (fclose(d) != 0) {
		d = NULL;
		rc = -EIO;
		snprintf(c->err, c->errlen, "write steps_final.dat: %s", strerror(errno));
		goto out;
	}
	/* One sweep key ("consistency.barrier=bsp", ...): the key names the axis and each tic is
	 * only a value, so neighbouring labels do not run into each other. */
	klen = plot_data_common_key_len(s);
	d = tmp_open(c, "steps_final_tics.dat");
	if (!d) {
		rc = -EIO;
		goto out;
	}
	fputs("point\ty\tlabel\n", d);
	for (size_t p = 0; p < s->npoints; p++) {
		fprintf(d, "%zu\t0\t", p);
		put_label(d, s->points[p].label + klen);
		fputc('\n', d);
	}
	if (fclose(d) != 0) {
		d = NULL;
		rc = -EIO;
		snprintf(c->err, c->errlen, "write steps_final_tics.dat: %s", strerror(errno));
		goto out;
	}
	d = NULL;
	f = fig_begin(c, "steps_final");
	if (!f) {
		rc = -EIO;
		goto out;
	}
	fprintf(f, "set title \"Steps completed by each worker at the end of the run");
	fprintf(f, "\\n(box: quartiles and median over all workers of all repeats; dot: one worker)\"\n");
	fprintf(f, "set ylabel 'steps completed (count)'\nset xlabel ");
	if (klen) {
		char key[256], safe[256];

		snprintf(key, sizeof key, "%.*s", (int)(klen - 1), s->points[0].label);
		fprintf(f, "'%s'", plot_safe_text(safe, sizeof safe, key));
	} else {
		fprintf(f, "'sweep point'");
	}
	fprintf(f, "\nset xrange [-0.6:%zu.6]\nset yrange [0:*]\nset xtics 1\n", s->npoints - 1);
	fprintf(f, "set style boxplot nooutliers\nset boxwidth 0.5\nunset key\n");
	fprintf(f, "set style fill solid 0.25 border\n");
	/* the tic labels: invisible dots (fully transparent) at y = 0 carrying the names */
	fprintf(f, "plot 'steps_final_tics.dat' using 1:2:xticlabels(3) with dots lc rgb '#FFFFFFFF' "
		   "notitle, ");
	for (size_t p = 0; p < s->npoints; p++) {
		struct plot_look lk;

		fprintf(f, "'steps_final.dat' using (%zu):($1==%zu ? $3 : NaN) with boxplot "
			   "lc rgb '%s' lw 1.5, ", p, p, pcolor(c, p));
		plot_look_of(s, p, &lk);
		fprintf(f, "'steps_final.dat' using ($1==%zu ? $2 : NaN):3 with points pt %d ps 1.1 "
			   "lc rgb '%s'%s", p, lk.point ? lk.point : 7, lk.color,
			p + 1 < s->npoints ? ", " : "\n");
	}
	rc = fig_end(c, "steps_final", f, 1000, 620);
	f = NULL;
out:
	if (d)
		fclose(d);
	if (f)
		fclose(f);
	free(v);
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The PSP chapter's form: the CDF of nodes over their final step, one line per sweep point
 * (repeats pooled). */
static int fig_steps_cdf(struct ctx *c)
{
	const struct plot_set *s = c->set;
	struct plot_step *v = NULL;
	double *xs = NULL;
	size_t n = 0;
	FILE *f = NULL, *d = NULL;
	int rc;

	rc = plot_data_steps_final(s, &v, &n, c->err, c->errlen);
	if (rc < 0 || n == 0)
		goto out;
	xs = malloc(n * sizeof *xs);
	if (!xs) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t p = 0; p < s->npoints; p++) {
		char name[64];
		size_t m = 0;

		for (size_t i = 0; i < n; i++)
			if (v[i].point == p)
				xs[m++] = v[i].step;
		qsort(xs, m, sizeof *xs, cmp_double);
		snprintf(name, sizeof name, "steps_cdf_%zu.dat", p);
		d = tmp_open(c, "steps_cdf_%zu.dat", p);
		if (!d) {
			rc = -EIO;
			goto out;
		}
		fputs("step\t", d);
		put_label(d, s->points[p].label);
		fputc('\n', d);
		/* a step function: up by 1/m at each worker's final step; one point per distinct
		 * step (the fraction at or below it), so 100,000 workers make a small file */
		for (size_t i = 0, last = 0; i < m; i++) {
			if (i + 1 < m && xs[i + 1] == xs[i])
				continue;
			/* the corner: the fraction so far, then the rise at this step */
			if (last > 0)
				fprintf(d, "%.6g\t%.6g\n", xs[i], (double)last / (double)m);
			fprintf(d, "%.6g\t%.6g\n", xs[i], (double)(i + 1) / (double)m);
			last = i + 1;
		}
		if (m == 0)
			fputs("NaN\tNaN\n", d);
		if (fclose(d) != 0) {
			d = NULL;
			rc = -EIO;
			snprintf(c->err, c->errlen, "write %s: %s", name, strerror(errno));
			goto out;
		}
		d = NULL;
	}
	f = fig_begin(c, "steps_cdf");
	if (!f) {
		rc = -EIO;
		goto out;
	}
	fprintf(f, "set title \"Distribution of the workers' final steps (CDF; repeats pooled)\"\n");
	fprintf(f, "set xlabel 'steps completed at the end of the run (count)'\n");
	fprintf(f, "set ylabel 'fraction of workers with at most x steps'\n");
	fprintf(f, "set yrange [0:1]\nset xrange [0:*]\nset key outside right top\n");
	fprintf(f, "plot ");
	for (size_t p = 0; p < s->npoints; p++) {
		/* the file holds the steps' corners: drawn as lines, it is the step function */
		fprintf(f, "'steps_cdf_%zu.dat' using 1:2 ", p);
		line_look(f, c, p, 2);
		fprintf(f, "title columnheader(2)%s", p + 1 < s->npoints ? ", " : "\n");
	}
	rc = fig_end(c, "steps_cdf", f, 1200, 620);
	f = NULL;
out:
	if (d)
		fclose(d);
	if (f)
		fclose(f);
	free(xs);
	free(v);
	return rc;
}

/* Step spread and waiting workers over time, first repeat of each sweep point. */
static int fig_progress(struct ctx *c)
{
	const struct plot_set *s = c->set;
	struct plot_progress *prog = NULL;
	double tmax = 0, win_max = 1.0;
	FILE *f = NULL;
	int rc;

	prog = calloc(s->npoints, sizeof *prog);
	if (!prog)
		return -ENOMEM;
	rc = plot_data_progress(s, prog, &tmax, &win_max, c->err, c->errlen);
	if (rc <= 0)
		goto out;
	for (size_t p = 0; p < s->npoints; p++) {
		FILE *d;

		if (!prog[p].rows)
			continue;
		d = tmp_open(c, "progress_%zu.dat", p);
		if (!d) {
			rc = -EIO;
			goto out;
		}
		/* columns: t min median max waiting_mean (steps on samples, waiting on window
		 * ends, nan otherwise); the keys read the headers of median and waiting */
		fputs("t\tmin\t", d);
		put_label(d, s->points[p].label);
		fputs("\tmax\t", d);
		put_label(d, s->points[p].label);
		fputc('\n', d);
		for (size_t i = 0; i < prog[p].nrows; i++) {
			const struct plot_progress_row *r = &prog[p].rows[i];

			fprintf(d, "%.4f\t", r->t_s);
			put_num(d, 10, r->min);
			fputc('\t', d);
			put_num(d, 10, r->median);
			fputc('\t', d);
			put_num(d, 10, r->max);
			fputc('\t', d);
			put_num(d, 4, r->waiting);
			fputc('\n', d);
		}
		if (fclose(d) != 0) {
			rc = -EIO;
			snprintf(c->err, c->errlen, "write progress_%zu.dat: %s", p, strerror(errno));
			goto out;
		}
	}
	f = fig_begin(c, "progress");
	if (!f) {
		rc = -EIO;
		goto out;
	}
	fprintf(f, "set multiplot layout 2,1 title 'Worker progress over time (first repeat of each "
		   "sweep point)'\n");
	fprintf(f, "set xrange [0:%.6g]\nset key outside right top\n", tmax);
	fprintf(f, "set lmargin 12\nset rmargin 34\n");
	fprintf(f, "set title 'Steps completed: line = median worker, band = slowest to fastest'\n");
	fprintf(f, "set ylabel 'steps completed (count)'\nset xlabel ''\nset yrange [0:*]\n");
	fprintf(f, "plot ");
	for (size_t p = 0, first = 1; p < s->npoints; p++) {
		if (!prog[p].rows)
			continue;
		fprintf(f, "%s", first ? "" : ", ");
		first = 0;
		fprintf(f, "'progress_%zu.dat' using 1:2:4 with filledcurves lc rgb '%s' notitle, ", p,
			pcolor(c, p));
		fprintf(f, "'progress_%zu.dat' using 1:3 ", p);
		line_look(f, c, p, 2);
		fprintf(f, "title columnheader(3)");
	}
	fprintf(f, "\nset title 'Workers blocked at a barrier (%.3g s mean)'\n", win_max);
	fprintf(f, "set ylabel 'workers waiting (count)'\nset xlabel 'time since run start (s)'\n");
	fprintf(f, "set yrange [0:*]\nplot ");
	for (size_t p = 0, first = 1; p < s->npoints; p++) {
		struct plot_look lk;

		if (!prog[p].rows)
			continue;
		fprintf(f, "%s", first ? "" : ", ");
		first = 0;
		plot_look_of(s, p, &lk);
		fprintf(f, "'progress_%zu.dat' using 1:5 with linespoints pt %d ps 0.5 lw 1.5 "
			   "lc rgb '%s' dt %s title columnheader(5)", p, lk.point ? lk.point : 7,
			lk.color, lk.dash);
	}
	fprintf(f, "\nunset multiplot\n");
	rc = fig_end(c, "progress", f, 1100, 820);
out:
	plot_data_progress_free(prog, s->npoints);
	free(prog);
	return rc;
}

/* Histogram of the staleness of applied updates, pooled over repeats, per sweep point. */
static int fig_staleness(struct ctx *c)
{
	const struct plot_set *s = c->set;
	struct plot_staleness *h = NULL;
	FILE *f = NULL, *d = NULL;
	double bw;
	int rc = 0;

	h = calloc(1, sizeof *h);
	if (!h)
		return -ENOMEM;
	if (plot_data_staleness(s, h) == 0)
		goto out;
	d = tmp_open(c, "staleness.dat");
	if (!d) {
		rc = -EIO;
		goto out;
	}
	/* header: the keys, "LABEL (N updates)"; then a row per bin: bin, then the fraction of
	 * each point */
	fputs("bin", d);
	for (size_t p = 0; p < s->npoints; p++) {
		fputc('\t', d);
		put_label(d, s->points[p].label);
		fprintf(d, " (%zu updates)", h->total[p]);
	}
	fputc('\n', d);
	for (int b = 0; b <= h->maxbin; b++) {
		fprintf(d, "%d", b);
		for (size_t p = 0; p < s->npoints; p++)
			fprintf(d, "\t%.6g",
				h->total[p] ? (double)h->count[p][b] / (double)h->total[p] : 0.0);
		fputc('\n', d);
	}
	if (fclose(d) != 0) {
		d = NULL;
		rc = -EIO;
		snprintf(c->err, c->errlen, "write staleness.dat: %s", strerror(errno));
		goto out;
	}
	d = NULL;
	f = fig_begin(c, "staleness_hist");
	if (!f) {
		rc = -EIO;
		goto out;
	}
	bw = 0.8 / (double)s->npoints;
	fprintf(f, "set title 'Staleness of applied updates (model versions behind when applied;"
		   " all repeats pooled)'\n");
	fprintf(f, "set xlabel 'staleness (model versions)%s'\n",
		h->maxbin == PLOT_DATA_STALE_CAP ? "; last bar: that many or more" : "");
	fprintf(f, "set ylabel 'fraction of updates'\nset yrange [0:*]\nset xrange [-0.6:%d.6]\n",
		h->maxbin);
	fprintf(f, "set boxwidth %.4f absolute\nset style fill solid 0.75 border -1\n", bw);
	fprintf(f, "set xtics 1\nset key inside top right\n");
	if (h->maxbin > 20)
		fprintf(f, "set xtics 5\n");
	fprintf(f, "plot ");
	for (size_t p = 0; p < s->npoints; p++) {
		double off = ((double)p - (double)(s->npoints - 1) / 2.0) * bw;

		struct plot_look lk;

		plot_look_of(s, p, &lk);
		if (lk.fill)
			fprintf(f, "'staleness.dat' using ($1%+.4f):%zu with boxes lc rgb '%s' "
				   "fs pattern %d border title columnheader(%zu)%s", off, p + 2,
				lk.color, lk.fill, p + 2, p + 1 < s->npoints ? ", " : "\n");
		else
			fprintf(f, "'staleness.dat' using ($1%+.4f):%zu with boxes lc rgb '%s' "
				   "title columnheader(%zu)%s", off, p + 2, lk.color, p + 2,
				p + 1 < s->npoints ? ", " : "\n");
	}
	rc = fig_end(c, "staleness_hist", f, 1000, 600);
	f = NULL;
out:
	if (d)
		fclose(d);
	if (f)
		fclose(f);
	free(h);
	return rc;
}

typedef int band_load_fn(const struct plot_set *set, struct plot_band *bands, char *err, size_t errlen);

/* The start of a figure of one band per sweep point over time: the bands loaded by load,
 * NAME_P.dat written for each, NAME's script opened and titled with what. Returns the script,
 * or NULL with *rc < 0 (failure) or 0 (nothing to plot). *bands is the caller's to free. */
static FILE *band_fig_begin(struct ctx *c, const char *name, band_load_fn *load, const char *what,
			    struct plot_band **bands, int *rc)
{
	FILE *f;

	*bands = calloc(c->set->npoints, sizeof **bands);
	if (!*bands) {
		*rc = -ENOMEM;
		return NULL;
	}
	*rc = load(c->set, *bands, c->err, c->errlen);
	if (*rc <= 0)
		return NULL;
	for (size_t p = 0; p < c->set->npoints && *rc >= 0; p++)
		*rc = write_band(c, name, p, &(*bands)[p]);
	if (*rc < 0)
		return NULL;
	f = fig_begin(c, name);
	if (!f) {
		*rc = -EIO;
		return NULL;
	}
	title_repeats(f, c, what);
	fprintf(f, "set xlabel 'time since run start (s)'\n");
	return f;
}

/* Cumulative packets dropped on all emulated links over time, per sweep point. */
static int fig_link_drops(struct ctx *c)
{
	struct plot_band *bands = NULL;
	int rc;
	FILE *f = band_fig_begin(c, "link_drops", plot_data_link_drops,
				 "Packets dropped on the emulated links (all links summed, cumulative)", &bands, &rc);

	if (f) {
		fprintf(f, "set ylabel 'packets dropped (count)'\n");
		fprintf(f, "set yrange [0:*]\nset key inside top left\nplot ");
		plot_bands(f, c, "link_drops");
		fputc('\n', f);
		rc = fig_end(c, "link_drops", f, 1000, 600);
	}
	free(bands);
	return rc;
}

/* Measured vs configured delay per link and direction, from the first run with linkcheck.csv. */
static int fig_linkcheck(struct ctx *c)
{
	static const char *const dirs[] = { "up", "down", "rtt" };
	static const char *const dcol[] = { "#0072B2", "#E69F00", "#009E73" };
	struct plot_linkcheck lc;
	FILE *f = NULL, *d[PLOT_DATA_NDIRS + 1] = { NULL };
	char safe[sizeof lc.run_id];
	int rc;

	rc = plot_data_linkcheck(c->set, &lc, c->err, c->errlen);
	if (rc <= 0)
		return rc;
	/* linkcheck_up/down/rtt.dat: x mean sd cfg off; linkcheck_tics.dat: node names */
	for (int k = 0; k <= PLOT_DATA_NDIRS; k++) {
		d[k] = k < PLOT_DATA_NDIRS ? tmp_open(c, "linkcheck_%s.dat", dirs[k])
					   : tmp_open(c, "linkcheck_tics.dat");
		if (!d[k]) {
			rc = -EIO;
			goto out;
		}
		fputs(k < PLOT_DATA_NDIRS ? "x\tmean\tsd\tcfg\toff\n" : "x\ty\tnode\n", d[k]);
	}
	for (size_t i = 0; i < lc.nrows; i++) {
		const struct plot_linkcheck_row *r = &lc.rows[i];
		FILE *o = d[r->dir];

		fprintf(o, "%.4f\t", (double)r->node + (r->dir - 1) * 0.27);
		put_num(o, 10, r->mean_ms);
		fputc('\t', o);
		put_num(o, 10, r->sd_ms);
		fputc('\t', o);
		put_num(o, 10, r->cfg_ms);
		fprintf(o, "\t%d\n", r->off ? 1 : 0);
	}
	for (size_t i = 0; i < lc.nnodes; i++) {
		fprintf(d[PLOT_DATA_NDIRS], "%zu\t0\t", i);
		put_label(d[PLOT_DATA_NDIRS], lc.nodes[i]);
		fputc('\n', d[PLOT_DATA_NDIRS]);
	}
	for (int k = 0; k <= PLOT_DATA_NDIRS; k++) {
		int e = fclose(d[k]);

		d[k] = NULL;
		if (e != 0 && rc >= 0) {
			rc = -EIO;
			snprintf(c->err, c->errlen, "write linkcheck data: %s", strerror(errno));
		}
	}
	if (rc < 0)
		goto out;
	f = fig_begin(c, "linkcheck_delay");
	if (!f) {
		rc = -EIO;
		goto out;
	}
	fprintf(f, "set title \"Link self-check of run %s: measured delay (bar, error bar = sd) vs "
		   "configured (black dash)\\nup/down: one-way delay; rtt: round trip; red X: "
		   "verdict off\"\n", plot_safe_text(safe, sizeof safe, lc.run_id));
	fprintf(f, "set ylabel 'delay (ms)'\nset xlabel 'node'\nset yrange [0:*]\n");
	fprintf(f, "set xrange [-0.6:%zu.6]\nset xtics 1\n", lc.nnodes - 1);
	fprintf(f, "set boxwidth 0.25 absolute\nset style fill solid 0.7 border -1\n");
	fprintf(f, "set key inside top left\nset bars 2\n");
	/* the tic labels: invisible dots (fully transparent) at y = 0 carrying the names */
	fprintf(f, "plot 'linkcheck_tics.dat' using 1:2:xticlabels(3) with dots lc rgb '#FFFFFFFF' "
		   "notitle, ");
	for (int k = 0; k < PLOT_DATA_NDIRS; k++)
		fprintf(f, "'linkcheck_%s.dat' using 1:2:3 with boxerrorbars lc rgb '%s' "
			   "title '%s measured', ", dirs[k], dcol[k], dirs[k]);
	for (int k = 0; k < PLOT_DATA_NDIRS; k++) {
		fprintf(f, "'linkcheck_%s.dat' using 1:4 with points pt 5 ps 0.01 lc rgb 'black' "
			   "notitle, ", dirs[k]);
		fprintf(f, "'linkcheck_%s.dat' using ($1-0.125):4:(0.25):(0) with vectors nohead "
			   "lw 3 lc rgb 'black' %s, ", dirs[k],
			k == 0 ? "title 'configured'" : "notitle");
		fprintf(f, "'linkcheck_%s.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 2 ps 2.5 "
			   "lw 2 lc rgb 'red' %s%s", dirs[k],
			k == 0 ? "title 'verdict off'" : "notitle", k < 2 ? ", " : "\n");
	}
	rc = fig_end(c, "linkcheck_delay", f, 1100, 600);
	f = NULL;
out:
	for (int k = 0; k <= PLOT_DATA_NDIRS; k++)
		if (d[k])
			fclose(d[k]);
	if (f)
		fclose(f);
	plot_data_linkcheck_free(&lc);
	return rc;
}

/* ---- fleet figures (topology fleet: fleet.csv, recover.csv) ---------------------------- */

/* Cumulative sync bytes that reached the registry, all devices, per sweep point. */
static int fig_fleet_bytes(struct ctx *c)
{
	struct plot_band *bands = NULL;
	int rc;
	FILE *f = band_fig_begin(c, "fleet_bytes", plot_fleet_bytes,
				 "Fleet sync bytes received by the registry (all devices, cumulative)", &bands, &rc);

	if (!f)
		goto out;
	fprintf(f, "set ylabel 'bytes (MiB)'\n");
	fprintf(f, "set yrange [0:*]\nset key inside top left\n");
	fprintf(f, "plot ");
	for (size_t p = 0; p < c->set->npoints; p++) {
		if (c->set->points[p].nruns > 1)
			fprintf(f, "'fleet_bytes_%zu.dat' using 1:($3/1048576):($4/1048576) with "
				   "filledcurves lc rgb '%s' notitle, ", p, color(p));
		/* past the palette, a dash pattern tells the points apart */
		fprintf(f, "'fleet_bytes_%zu.dat' using 1:($2/1048576) with lines lw 2 dt %zu lc rgb '%s' "
			   "title columnheader(2)%s", p, p / NCOLORS + 1, color(p),
			p + 1 < c->set->npoints ? ", " : "\n");
	}
	rc = fig_end(c, "fleet_bytes", f, 1000, 600);
out:
	free(bands);
	return rc;
}

/* A scatter per sweep point: NAME_P.dat with header "x LABEL". */
static int fig_fleet_scatter(struct ctx *c, enum plot_fleet_scatter what)
{
	const char *name = what == PLOT_FLEET_LAG ? "fleet_lag" : "fleet_recover";
	struct plot_series *pts = calloc(c->set->npoints, sizeof *pts);
	FILE *f = NULL;
	int rc;

	if (!pts)
		return -ENOMEM;
	rc = plot_fleet_scatter(c->set, what, pts, c->err, c->errlen);
	if (rc <= 0)
		goto out;
	for (size_t p = 0; p < c->set->npoints && rc >= 0; p++) {
		FILE *d = tmp_open(c, "%s_%zu.dat", name, p);

		if (!d) {
			rc = -EIO;
			break;
		}
		fputs("x\t", d);
		put_label(d, c->set->points[p].label);
		fputc('\n', d);
		for (size_t i = 0; i < pts[p].n; i++) {
			put_num(d, 8, pts[p].x[i]);
			fputc('\t', d);
			put_num(d, 8, pts[p].y[i]);
			fputc('\n', d);
		}
		/* gnuplot refuses a file without a data row: one missing point keeps the key */
		if (pts[p].n == 0)
			fputs("nan\tnan\n", d);
		if (fclose(d) != 0) {
			rc = -EIO;
			snprintf(c->err, c->errlen, "write %s_%zu.dat: %s", name, p, strerror(errno));
		}
	}
	if (rc < 0)
		goto out;
	f = fig_begin(c, name);
	if (!f) {
		rc = -EIO;
		goto out;
	}
	if (what == PLOT_FLEET_LAG) {
		fprintf(f, "set title \"Registry staleness: time from a device making a version to "
			   "its commit\\n(one point per stored version, devices and repeats pooled)\"\n");
		fprintf(f, "set xlabel 'commit time since run start (s)'\nset ylabel 'registry lag (s)'\n");
	} else {
		fprintf(f, "set title \"Recovery time: rebuilding each stored version from the "
			   "store, hash verified\\n(one point per version, devices and repeats pooled)\"\n");
		fprintf(f, "set xlabel 'version'\nset ylabel 'rebuild time (ms)'\n");
	}
	fprintf(f, "set yrange [0:*]\nset key inside top left\nplot ");
	for (size_t p = 0; p < c->set->npoints; p++)
		fprintf(f, "'%s_%zu.dat' using 1:(%s) with points pt %d ps 0.6 lc rgb '%s' "
			   "title columnheader(2)%s", name, p, what == PLOT_FLEET_LAG ? "$2" : "$2*1000",
			p / NCOLORS ? 5 : 7, color(p), p + 1 < c->set->npoints ? ", " : "\n");
	rc = fig_end(c, name, f, 1100, 600);
out:
	plot_fleet_free(pts, c->set->npoints);
	free(pts);
	return rc;
}

static int fig_fleet_lag(struct ctx *c)
{
	return fig_fleet_scatter(c, PLOT_FLEET_LAG);
}

static int fig_fleet_recover(struct ctx *c)
{
	return fig_fleet_scatter(c, PLOT_FLEET_RECOVER);
}

/* ---- driver -------------------------------------------------------------------------- */

/* Empty and remove the private directory. */
static void remove_tmp(struct ctx *c)
{
	struct dirent *de;
	int fd = dup(c->tmpfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			unlinkat(c->tmpfd, de->d_name, 0);
	closedir(d);
	unlinkat(c->plotsfd, strrchr(c->tmp, '/') + 1, AT_REMOVEDIR);
}

/* Draw the figures of set (compare: accuracy vs time and the CDF of final steps only) into
 * the directory plots, created when absent (one level). */
static int render(const struct plot_set *set, const char *plots, bool compare, char *err,
		  size_t errlen)
{
	struct ctx c = { .set = set, .err = err, .errlen = errlen, .plotsfd = -1, .tmpfd = -1 };
	int (*const figs[])(struct ctx *) = { fig_steps_final, fig_steps_cdf, fig_progress, fig_staleness,
					      fig_link_drops, fig_linkcheck, fig_fleet_bytes,
					      fig_fleet_lag, fig_fleet_recover };
	struct stat st;
	int rc = 0, written = 0;

	c.tmp[0] = '\0';
	snprintf(c.plots, sizeof c.plots, "%s", plots);
	if (mkdir(c.plots, 0755) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "mkdir %s: %s", c.plots, strerror(errno));
		goto out;
	}
	/* a plots/ that is a symlink would send the figures elsewhere */
	c.plotsfd = open(c.plots, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c.plotsfd < 0) {
		bool notdir = errno == ELOOP || errno == ENOTDIR;

		rc = notdir ? -ENOTDIR : -errno;
		snprintf(err, errlen, "%s: %s", c.plots,
			 notdir ? "not a directory (a symlink is refused)" : strerror(errno));
		goto out;
	}
	/* The private directory: mode 0700 under a name nobody knows, held by a descriptor. Its
	 * path is never used again (whoever owns DIR could move it and put another in its
	 * place): files are written with openat and gnuplot starts in it with fchdir. */
	snprintf(c.tmp, sizeof c.tmp, "%s/.data-XXXXXX", c.plots);
	if (!mkdtemp(c.tmp)) {
		rc = -errno;
		snprintf(err, errlen, "mkdtemp %s: %s", c.tmp, strerror(errno));
		c.tmp[0] = '\0';
		goto out;
	}
	c.tmpfd = openat(c.plotsfd, strrchr(c.tmp, '/') + 1,
			 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c.tmpfd >= 0 && (fstat(c.tmpfd, &st) < 0 || st.st_uid != geteuid() ||
			     (st.st_mode & 077) != 0)) {
		/* not the directory just made: leave it alone */
		close(c.tmpfd);
		c.tmpfd = -1;
		errno = EPERM;
	}
	if (c.tmpfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", c.tmp, strerror(errno));
		goto out;
	}
	for (int k = 0; k < (compare ? 1 : 2) && rc >= 0; k++) {
		rc = fig_accuracy(&c, k == 1);
		written += rc > 0;
	}
	if (compare) {
		if (rc >= 0) {
			rc = fig_steps_cdf(&c);
			written += rc > 0;
		}
	} else {
		for (size_t i = 0; i < sizeof figs / sizeof figs[0] && rc >= 0; i++) {
			rc = figs[i](&c);
			written += rc > 0;
		}
	}
	if (rc >= 0)
		rc = written;
out:
	if (c.tmpfd >= 0) {
		remove_tmp(&c);
		close(c.tmpfd);
	}
	if (c.plotsfd >= 0)
		close(c.plotsfd);
	return rc;
}

int plot_dir(const char *dir, char *err, size_t errlen)
{
	struct plot_set set;
	char plots[4096];
	int rc;

	rc = plot_data_collect(dir, &set, err, errlen);
	if (rc == 0) {
		snprintf(plots, sizeof plots, "%s/plots", dir);
		rc = render(&set, plots, false, err, errlen);
	}
	plot_data_release(&set);
	return rc;
}

int plot_compare(const char *const *dirs, const char *const *labels, size_t ndirs,
		 const char *out_dir, char *err, size_t errlen)
{
	struct plot_set set;
	int rc;

	rc = plot_data_collect_many(dirs, labels, ndirs, &set, err, errlen);
	if (rc == 0)
		rc = render(&set, out_dir, true, err, errlen);
	plot_data_release(&set);
	return rc;
}
