/* collectors/plot_data: see plot_data.h.
 *
 * Runs are grouped into sweep points by their sweep values (meta.json "sweep"); a point's
 * repeats are averaged on a common grid with a step-hold reading of each repeat (the value of
 * a trace at x is its latest sample at or before x; nothing after a run's last sample), and the
 * band is the min..max over the repeats present at x. Trace fields are parsed as numbers here,
 * so no field's text ever reaches a figure's data file. */
#include "collectors/plot_data.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectors/summary.h"
#include "collectors/table.h"
#include "lib/log.h"

/* ---- runs and sweep points ------------------------------------------------------------ */

/* Numbers inside names compare as numbers: worker2 before worker10, workers=5 before
 * workers=15 (legends and axes follow a sweep's values in order). */
static int str_cmp(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static bool has_meta(const char *dir)
{
	char path[8300];

	snprintf(path, sizeof path, "%s/meta.json", dir);
	return access(path, R_OK) == 0;
}

static int add_run(struct plot_set *s, const char *top, const char *dir, char *err,
		   size_t errlen)
{
	struct plot_run *r;
	char label[256];
	size_t p;
	int rc;

	if (s->nruns == PLOT_DATA_MAX_RUNS) {
		snprintf(err, errlen, "%s: more than %d runs", top, PLOT_DATA_MAX_RUNS);
		return -E2BIG;
	}
	r = &s->runs[s->nruns];
	snprintf(r->dir, sizeof r->dir, "%s", dir);
	rc = meta_load_dir(dir, &r->meta, err, errlen);
	if (rc < 0)
		return rc;
	meta_sweep_label(&r->meta, label, sizeof label);
	if (!label[0])
		snprintf(label, sizeof label, "%s",
			 s->nruns == 0 && has_meta(top) ? r->meta.run_id : "all runs");
	for (p = 0; p < s->npoints; p++)
		if (strcmp(s->points[p].label, label) == 0)
			break;
	if (p == s->npoints) {
		if (p == PLOT_DATA_MAX_POINTS) {
			snprintf(err, errlen, "%s: more than %d sweep points", top,
				 PLOT_DATA_MAX_POINTS);
			return -E2BIG;
		}
		snprintf(s->points[p].label, sizeof s->points[p].label, "%s", label);
		s->points[p].style = p;
		s->points[p].source = 0;
		s->npoints++;
	}
	s->points[p].runs[s->points[p].nruns++] = s->nruns++;
	return 0;
}

/* summary_list_dir() filter: a visible subdirectory holding a meta.json. */
static bool is_run_dir(const char *dir, const char *name)
{
	char sub[8192];

	if (name[0] == '.')
		return false;
	snprintf(sub, sizeof sub, "%s/%s", dir, name);
	return has_meta(sub);
}

int plot_data_collect(const char *dir, struct plot_set *s, char *err, size_t errlen)
{
	char **names = NULL;
	size_t n = 0;
	int rc = 0;

	memset(s, 0, sizeof *s);
	s->runs = calloc(PLOT_DATA_MAX_RUNS, sizeof *s->runs);
	s->points = calloc(PLOT_DATA_MAX_POINTS, sizeof *s->points);
	if (!s->runs || !s->points) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (has_meta(dir))
		return add_run(s, dir, dir, err, errlen);
	rc = summary_list_dir(dir, is_run_dir, str_cmp, &names, &n);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	else if (rc < 0)
		snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
	for (size_t i = 0; i < n && rc == 0; i++) {
		char sub[8192];

		snprintf(sub, sizeof sub, "%s/%s", dir, names[i]);
		rc = add_run(s, dir, sub, err, errlen);
	}
	free_names(names, n);
	if (rc == 0 && s->nruns == 0) {
		snprintf(err, errlen, "%s: neither a run dir nor a sweep dir (no meta.json)", dir);
		rc = -ENOENT;
	}
	return rc;
}

/* What a compared run shows: its sweep values without the simulation-only keys (a profile
 * per run is how a simulation is calibrated, not another experiment), the value alone when one
 * key is left, else "key=value, ..."; with no key left, its point's label. */
static void run_value(const struct plot_run *r, const char *point_label, char *out, size_t len)
{
	size_t used = 0, nkeys = 0;

	out[0] = '\0';
	for (size_t k = 0; k < r->meta.nsweep; k++)
		nkeys += strncmp(r->meta.sweep_key[k], "simulation.", 11) != 0;
	for (size_t k = 0; k < r->meta.nsweep && used < len; k++) {
		int w;

		if (!strncmp(r->meta.sweep_key[k], "simulation.", 11))
			continue;
		if (nkeys == 1)
			w = snprintf(out + used, len - used, "%s", r->meta.sweep_val[k]);
		else
			w = snprintf(out + used, len - used, "%s%s=%s", used ? ", " : "",
				     r->meta.sweep_key[k], r->meta.sweep_val[k]);
		used = w < 0 ? len : used + (size_t)w;
	}
	if (!nkeys)
		snprintf(out, len, "%s", point_label);
}

/* Append the runs of one (a directory's set) to out as points of `source`, one per value
 * (run_value), tagged. */
static int merge(struct plot_set *out, const struct plot_set *one, size_t source, const char *tag,
		 const char *dir, char *err, size_t errlen)
{
	if (out->nruns + one->nruns > PLOT_DATA_MAX_RUNS) {
		snprintf(err, errlen, "%s: more than %d runs in all", dir, PLOT_DATA_MAX_RUNS);
		return -E2BIG;
	}
	for (size_t p = 0; p < one->npoints; p++) {
		for (size_t r = 0; r < one->points[p].nruns; r++) {
			const struct plot_run *run = &one->runs[one->points[p].runs[r]];
			struct plot_point *to;
			char value[sizeof to->value];
			size_t q, styles = 0;

			run_value(run, one->points[p].label, value, sizeof value);
			for (q = 0; q < out->npoints; q++)
				if (out->points[q].source == source && !strcmp(out->points[q].value, value))
					break;
			if (q == out->npoints) {
				if (q == PLOT_DATA_MAX_POINTS) {
					snprintf(err, errlen, "%s: more than %d sweep points in all", dir,
						 PLOT_DATA_MAX_POINTS);
					return -E2BIG;
				}
				/* the colour of the first point, of any directory, showing the same
				 * value; a new value takes the next colour */
				to = &out->points[out->npoints];
				for (q = 0; q < out->npoints && strcmp(out->points[q].value, value); q++)
					if (out->points[q].style + 1 > styles)
						styles = out->points[q].style + 1;
				to->style = q < out->npoints ? out->points[q].style : styles;
				to->source = source;
				snprintf(to->value, sizeof to->value, "%s", value);
				snprintf(to->label, sizeof to->label, "%.80s: %.170s", tag, value);
				to->nruns = 0;
				out->npoints++;
			} else {
				to = &out->points[q];
			}
			out->runs[out->nruns] = *run;
			to->runs[to->nruns++] = out->nruns++;
		}
	}
	return 0;
}

int plot_data_collect_many(const char *const *dirs, const char *const *labels, size_t ndirs,
			   struct plot_set *out, char *err, size_t errlen)
{
	int rc = 0;

	memset(out, 0, sizeof *out);
	out->runs = calloc(PLOT_DATA_MAX_RUNS, sizeof *out->runs);
	out->points = calloc(PLOT_DATA_MAX_POINTS, sizeof *out->points);
	if (!out->runs || !out->points) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < ndirs && rc == 0; i++) {
		struct plot_set one;
		const char *tag;

		rc = plot_data_collect(dirs[i], &one, err, errlen);
		if (rc == 0) {
			tag = labels && labels[i] ? labels[i] :
			      one.runs[0].meta.mode[0] ? one.runs[0].meta.mode : "emulation";
			rc = merge(out, &one, i, tag, dirs[i], err, errlen);
		}
		plot_data_release(&one);
	}
	return rc;
}

void plot_data_release(struct plot_set *s)
{
	free(s->runs);
	free(s->points);
	memset(s, 0, sizeof *s);
}

size_t plot_data_max_repeats(const struct plot_set *s)
{
	size_t maxrep = 0;

	for (size_t p = 0; p < s->npoints; p++)
		if (s->points[p].nruns > maxrep)
			maxrep = s->points[p].nruns;
	return maxrep;
}

double plot_data_target(const struct plot_set *s)
{
	for (size_t i = 0; i < s->nruns; i++)
		if (s->runs[i].meta.has_target)
			return s->runs[i].meta.target;
	return NAN;
}

/* ---- bands --------------------------------------------------------------------------- */

double plot_data_hold_at(const struct plot_series *s, double x)
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

void plot_data_band(const struct plot_series *s, size_t n, double xmax, struct plot_band *out)
{
	for (int g = 0; g <= PLOT_DATA_GRID; g++) {
		double x = xmax * g / PLOT_DATA_GRID, sum = 0, lo = INFINITY, hi = -INFINITY;
		size_t k = 0;

		for (size_t i = 0; i < n; i++) {
			double v = plot_data_hold_at(&s[i], x);

			if (isnan(v))
				continue;
			sum += v;
			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
			k++;
		}
		out->x[g] = x;
		out->n[g] = k;
		out->mean[g] = k ? sum / (double)k : NAN;
		out->lo[g] = k ? lo : NAN;
		out->hi[g] = k ? hi : NAN;
	}
}

static void series_free(struct plot_series *s)
{
	free(s->x);
	free(s->y);
	s->x = s->y = NULL;
	s->n = 0;
}

int plot_data_accuracy(const struct plot_set *set, bool by_updates, struct plot_band *bands,
		       double *xmax, char *err, size_t errlen)
{
	struct plot_series *s = NULL;
	size_t any = 0;
	int rc = 0;

	*xmax = 0;
	s = calloc(set->nruns ? set->nruns : 1, sizeof *s);
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < set->nruns; i++) {
		double *t = NULL, *u = NULL, *a = NULL;
		size_t n = 0;

		rc = summary_eval_series(set->runs[i].dir, &t, &u, &a, &n, err, errlen);
		if (rc < 0)
			goto out;
		s[i].x = by_updates ? u : t;
		s[i].y = a;
		s[i].n = n;
		free(by_updates ? t : u);
		if (n && s[i].x[n - 1] > *xmax)
			*xmax = s[i].x[n - 1];
		any += n;
	}
	if (any == 0 || *xmax <= 0)
		goto out;
	for (size_t p = 0; p < set->npoints; p++) {
		const struct plot_point *pt = &set->points[p];
		struct plot_series rep[PLOT_DATA_MAX_RUNS];

		for (size_t k = 0; k < pt->nruns; k++)
			rep[k] = s[pt->runs[k]];
		plot_data_band(rep, pt->nruns, *xmax, &bands[p]);
	}
	rc = 1;
out:
	for (size_t i = 0; i < set->nruns; i++)
		series_free(&s[i]);
	free(s);
	return rc;
}

static int load_table(const struct plot_run *r, const char *file, struct table **out, char *err,
		      size_t errlen)
{
	char path[8192];
	bool missing = false;

	snprintf(path, sizeof path, "%s/%s", r->dir, file);
	*out = table_load(path, &missing, err, errlen);
	if (!*out)
		return missing ? 0 : -EINVAL;
	return 0;
}

/* A node trace for a figure: one that cannot be read (malformed, not a regular file, over
 * TABLE_MAX_BYTES) leaves the figure without that node, with a warning naming it; absent is
 * -ENOENT without one. */
static int load_node_table(const struct plot_run *r, const char *file, struct table **out)
{
	char err[512];
	int rc = load_table(r, file, out, err, sizeof err);

	if (rc < 0)
		log_warn("plot: %s (figures leave it out)", err);
	return rc < 0 ? rc : *out ? 0 : -ENOENT;
}

/* Cumulative drops of run r summed over its links into *s (empty without links.csv). */
static int link_drops_series(const struct plot_run *r, struct plot_series *s, char *err,
			     size_t errlen)
{
	struct table *t = NULL;
	char (*keys)[96] = NULL;
	double *last = NULL;
	size_t rows, nk = 0;
	int ct, cn, cdir, cd, rc;

	rc = load_table(r, "links.csv", &t, err, errlen);
	if (rc < 0 || !t)
		return rc;
	ct = table_col(t, "t_s");
	cn = table_col(t, "node");
	cdir = table_col(t, "direction");
	cd = table_col(t, "dropped");
	rows = table_rows(t);
	s->x = calloc(rows + 1, sizeof(double));
	s->y = calloc(rows + 1, sizeof(double));
	/* per-link last value, summed at each sample instant */
	keys = calloc(rows + 1, sizeof *keys);
	last = calloc(rows + 1, sizeof *last);
	if (!s->x || !s->y || !keys || !last || ct < 0 || cn < 0 || cdir < 0 || cd < 0) {
		series_free(s);
		goto out;
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
		if (s->n > 0 && s->x[s->n - 1] == ts)
			s->n--;
		s->x[s->n] = ts;
		s->y[s->n++] = sum;
	}
out:
	free(keys);
	free(last);
	table_destroy(&t);
	return 0;
}

int plot_data_link_drops(const struct plot_set *set, struct plot_band *bands, char *err,
			 size_t errlen)
{
	struct plot_series s[PLOT_DATA_MAX_RUNS];
	double xmax = 0;
	size_t any = 0;
	int rc = 0;

	memset(s, 0, sizeof s);
	for (size_t p = 0; p < set->npoints; p++) {
		const struct plot_point *pt = &set->points[p];

		for (size_t k = 0; k < pt->nruns; k++) {
			rc = link_drops_series(&set->runs[pt->runs[k]], &s[k], err, errlen);
			if (rc < 0)
				goto out;
			for (size_t i = 0; i < s[k].n; i++)
				xmax = s[k].x[i] > xmax ? s[k].x[i] : xmax;
			any += s[k].n;
		}
		/* the grid of a point spans the times seen so far (this point's and the ones
		 * before it) */
		plot_data_band(s, pt->nruns, xmax > 0 ? xmax : 1, &bands[p]);
		for (size_t k = 0; k < pt->nruns; k++)
			series_free(&s[k]);
	}
	rc = any > 0;
out:
	for (size_t k = 0; k < PLOT_DATA_MAX_RUNS; k++)
		series_free(&s[k]);
	return rc;
}

/* ---- final steps --------------------------------------------------------------------- */

/* summary_list_dir() filter: a worker trace, NAME.csv with NAME not starting with "server". */
static bool is_worker_trace(const char *dir, const char *name)
{
	size_t len = strlen(name);

	(void)dir;
	return len > 4 && strcmp(name + len - 4, ".csv") == 0 && strncmp(name, "server", 6) != 0;
}

/* Worker trace names (nodes/NAME.csv), sorted; none when there is no nodes/. The caller
 * frees each name and the array. */
static int worker_files(const struct plot_run *r, char ***out, size_t *nout)
{
	char dir[8192];
	int rc;

	snprintf(dir, sizeof dir, "%s/nodes", r->dir);
	rc = summary_list_dir(dir, is_worker_trace, str_cmp, out, nout);
	return rc == -ENOENT ? 0 : rc;
}

static int add_step(struct plot_step **v, size_t *n, size_t *cap, size_t p, size_t k, size_t i, double last)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		struct plot_step *nv = realloc(*v, nc * sizeof *nv);

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = (struct plot_step){
		.point = p,
		.repeat = k,
		.x = (double)p + ((double)((i * 7 + k * 3) % 11) / 10.0 - 0.5) * 0.36,
		.step = last,
	};
	return 0;
}

/* A simulation's workers.csv (one row per worker, final_step): 1 when it gave the run's
 * workers, 0 when the run has none (or it lacks the column), -ENOMEM. */
static int steps_from_workers(const struct plot_run *r, size_t p, size_t k, struct plot_step **v,
			      size_t *n, size_t *cap)
{
	char path[8192];
	struct table *t = NULL;
	int cs, rc = 0;

	snprintf(path, sizeof path, "%s/workers.csv", r->dir);
	if (access(path, F_OK) != 0 || load_node_table(r, "workers.csv", &t) < 0)
		return 0;
	cs = table_col(t, "final_step");
	for (size_t row = 0; cs >= 0 && row < table_rows(t) && rc == 0; row++) {
		double x = table_double_or(t, row, (size_t)cs, -1);

		if (x >= 0)
			rc = add_step(v, n, cap, p, k, row, x);
	}
	table_destroy(&t);
	return rc < 0 ? rc : cs >= 0;
}

int plot_data_steps_final(const struct plot_set *set, struct plot_step **out, size_t *nout,
			  char *err, size_t errlen)
{
	struct plot_step *v = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	*out = NULL;
	*nout = 0;
	for (size_t p = 0; p < set->npoints; p++) {
		const struct plot_point *pt = &set->points[p];

		for (size_t k = 0; k < pt->nruns; k++) {
			const struct plot_run *r = &set->runs[pt->runs[k]];
			char **names = NULL;
			size_t nn = 0;

			rc = steps_from_workers(r, p, k, &v, &n, &cap);
			if (rc < 0) {
				snprintf(err, errlen, "out of memory");
				goto out;
			}
			if (rc == 1) {
				rc = 0;
				continue;
			}
			rc = worker_files(r, &names, &nn);
			if (rc < 0) {
				snprintf(err, errlen, "%s/nodes: %s", r->dir, strerror(-rc));
				free_names(names, nn);
				goto out;
			}
			for (size_t i = 0; i < nn; i++) {
				char file[512];
				struct table *t = NULL;
				double last = -1;
				int cs;

				snprintf(file, sizeof file, "nodes/%s", names[i]);
				if (load_node_table(r, file, &t) < 0)
					continue;
				cs = table_col(t, "step");
				for (size_t row = 0; cs >= 0 && row < table_rows(t); row++) {
					double x = table_double_or(t, row, (size_t)cs, -1);

					last = x > last ? x : last;
				}
				table_destroy(&t);
				if (last < 0)
					continue;
				if (add_step(&v, &n, &cap, p, k, i, last) < 0) {
					snprintf(err, errlen, "out of memory");
					free_names(names, nn);
					rc = -ENOMEM;
					goto out;
				}
			}
			free_names(names, nn);
		}
	}
out:
	if (rc < 0) {
		free(v);
		return rc;
	}
	*out = v;
	*nout = n;
	return 0;
}

size_t plot_data_common_key_len(const struct plot_set *set)
{
	const char *first, *eq;
	size_t klen;

	if (set->npoints == 0)
		return 0;
	first = set->points[0].label;
	eq = strchr(first, '=');
	klen = eq && !strstr(first, ", ") ? (size_t)(eq - first) + 1 : 0;
	for (size_t p = 1; p < set->npoints && klen; p++)
		if (strncmp(set->points[p].label, first, klen) != 0 ||
		    strstr(set->points[p].label, ", "))
			klen = 0;
	return klen;
}

/* ---- progress ------------------------------------------------------------------------ */

/* Rows a and b of progress.csv have the same min, median and max step. */
static bool same_steps(const struct table *t, size_t a, size_t b, const int cols[3])
{
	for (size_t k = 0; k < 3; k++)
		if (strcmp(table_get(t, a, (size_t)cols[k]), table_get(t, b, (size_t)cols[k])) != 0)
			return false;
	return true;
}

/* Thinned rows of one progress table into *pr; *win_s is the waiting window used. */
static int progress_rows(const struct table *t, const int cols[3], int ct, int cw,
			 struct plot_progress *pr, double *t_max, double *win_s)
{
	size_t rows = table_rows(t);
	double win_start = 0, win_sum = 0, min_gap, t_kept = -INFINITY;
	size_t win_n = 0;

	/* at most one window row and one sample row per table row */
	pr->rows = calloc(2 * rows, sizeof *pr->rows);
	pr->nrows = 0;
	if (!pr->rows)
		return -ENOMEM;
	min_gap = (table_double_or(t, rows - 1, (size_t)ct, 0) - table_double_or(t, 0, (size_t)ct, 0)) /
		  400;
	/* waiting: means over 1 s, or 1/100 of a longer run (a marker each) */
	*win_s = min_gap * 4 > 1.0 ? min_gap * 4 : 1.0;
	for (size_t row = 0; row < rows; row++) {
		double ts = table_double_or(t, row, (size_t)ct, NAN);
		double w = table_double_or(t, row, (size_t)cw, 0);

		if (isnan(ts))
			continue;
		win_sum += w;
		win_n++;
		if (ts - win_start >= *win_s || row + 1 == rows) {
			pr->rows[pr->nrows++] = (struct plot_progress_row){
				.t_s = win_start + (ts - win_start) / 2,
				.min = NAN, .median = NAN, .max = NAN,
				.waiting = win_sum / (double)win_n,
			};
			win_start = ts;
			win_sum = 0;
			win_n = 0;
		}
		/* A figure is 1100 px wide: samples closer than 1/400 of the run add nothing
		 * to it but size (a 300 s run has 3000). Between those, a sample is kept only
		 * where the curve bends (it differs from its neighbour before or after); the
		 * first and the last always. */
		if (row == 0 || row + 1 == rows ||
		    (ts - t_kept >= min_gap &&
		     (!same_steps(t, row, row - 1, cols) || !same_steps(t, row, row + 1, cols)))) {
			pr->rows[pr->nrows++] = (struct plot_progress_row){
				.t_s = ts,
				.min = table_double_or(t, row, (size_t)cols[0], NAN),
				.median = table_double_or(t, row, (size_t)cols[1], NAN),
				.max = table_double_or(t, row, (size_t)cols[2], NAN),
				.waiting = NAN,
			};
			t_kept = ts;
		}
		*t_max = ts > *t_max ? ts : *t_max;
	}
	return 0;
}

int plot_data_progress(const struct plot_set *set, struct plot_progress *prog, double *t_max,
		       double *win_max_s, char *err, size_t errlen)
{
	int have = 0, rc = 0;

	*t_max = 0;
	*win_max_s = 1.0;
	memset(prog, 0, set->npoints * sizeof *prog);
	for (size_t p = 0; p < set->npoints; p++) {
		const struct plot_run *r = &set->runs[set->points[p].runs[0]];
		struct table *t = NULL;
		int cols[3], ct, ca, cw;
		double win;

		rc = load_table(r, "progress.csv", &t, err, errlen);
		if (rc < 0)
			goto fail;
		if (!t)
			continue;
		ct = table_col(t, "t_s");
		ca = table_col(t, "alive");
		cw = table_col(t, "waiting");
		cols[0] = table_col(t, "min_step");
		cols[1] = table_col(t, "median_step");
		cols[2] = table_col(t, "max_step");
		if (ct < 0 || ca < 0 || cw < 0 || cols[0] < 0 || cols[1] < 0 || cols[2] < 0 ||
		    table_rows(t) == 0) {
			table_destroy(&t);
			continue;
		}
		rc = progress_rows(t, cols, ct, cw, &prog[p], t_max, &win);
		table_destroy(&t);
		if (rc < 0) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		*win_max_s = win > *win_max_s ? win : *win_max_s;
		have++;
	}
	return have;
fail:
	plot_data_progress_free(prog, set->npoints);
	return rc;
}

void plot_data_progress_free(struct plot_progress *prog, size_t n)
{
	for (size_t p = 0; p < n; p++) {
		free(prog[p].rows);
		prog[p].rows = NULL;
		prog[p].nrows = 0;
	}
}

/* ---- staleness ----------------------------------------------------------------------- */

size_t plot_data_staleness(const struct plot_set *set, struct plot_staleness *out)
{
	size_t any = 0;

	memset(out, 0, sizeof *out);
	for (size_t p = 0; p < set->npoints; p++) {
		for (size_t k = 0; k < set->points[p].nruns; k++) {
			const struct plot_run *r = &set->runs[set->points[p].runs[k]];
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
				if (load_node_table(r, file, &t) < 0)
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
					int b;

					if (table_double(t, row, (size_t)cs, &v) < 0 || v < 0)
						continue;
					b = v >= PLOT_DATA_STALE_CAP ? PLOT_DATA_STALE_CAP : (int)v;
					out->count[p][b]++;
					out->total[p]++;
					out->maxbin = b > out->maxbin ? b : out->maxbin;
				}
				table_destroy(&t);
			}
			closedir(dd);
		}
		any += out->total[p];
	}
	return any;
}

/* ---- link self-check ----------------------------------------------------------------- */

int plot_data_linkcheck(const struct plot_set *set, struct plot_linkcheck *out, char *err,
			size_t errlen)
{
	static const char *const dirs[PLOT_DATA_NDIRS] = { "up", "down", "rtt" };
	struct table *t = NULL;
	const struct plot_run *r = NULL;
	int rc = 0;

	memset(out, 0, sizeof *out);
	for (size_t i = 0; i < set->nruns && !t; i++) {
		rc = load_table(&set->runs[i], "linkcheck.csv", &t, err, errlen);
		if (rc < 0)
			return rc;
		r = &set->runs[i];
	}
	if (!t || table_rows(t) == 0)
		goto out;
	int cn = table_col(t, "node"), cdir = table_col(t, "direction"),
	    cm = table_col(t, "rtt_mean_ms"), csd = table_col(t, "rtt_sd_ms"),
	    ccfg = table_col(t, "cfg_delay_ms"), cv = table_col(t, "verdict");
	if (cn < 0 || cdir < 0 || cm < 0 || csd < 0 || ccfg < 0 || cv < 0)
		goto out;
	out->rows = calloc(table_rows(t), sizeof *out->rows);
	if (!out->rows) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	snprintf(out->run_id, sizeof out->run_id, "%s", r->meta.run_id);
	for (size_t row = 0; row < table_rows(t); row++) {
		const char *nm = table_get(t, row, (size_t)cn), *dr = table_get(t, row, (size_t)cdir);
		size_t i;
		int k;

		for (k = 0; k < PLOT_DATA_NDIRS; k++)
			if (strcmp(dr, dirs[k]) == 0)
				break;
		if (k == PLOT_DATA_NDIRS)
			continue;
		for (i = 0; i < out->nnodes; i++)
			if (strncmp(out->nodes[i], nm, sizeof out->nodes[0] - 1) == 0)
				break;
		if (i == out->nnodes) {
			if (out->nnodes == PLOT_DATA_MAX_NODES)
				continue;
			snprintf(out->nodes[out->nnodes++], sizeof out->nodes[0], "%.63s", nm);
		}
		out->rows[out->nrows++] = (struct plot_linkcheck_row){
			.node = i,
			.dir = k,
			.mean_ms = table_double_or(t, row, (size_t)cm, NAN),
			.sd_ms = table_double_or(t, row, (size_t)csd, 0),
			.cfg_ms = table_double_or(t, row, (size_t)ccfg, NAN),
			.off = strcmp(table_get(t, row, (size_t)cv), "ok") != 0,
		};
	}
	rc = out->nrows > 0;
out:
	table_destroy(&t);
	if (rc <= 0)
		plot_data_linkcheck_free(out);
	return rc;
}

void plot_data_linkcheck_free(struct plot_linkcheck *out)
{
	free(out->rows);
	out->rows = NULL;
	out->nrows = 0;
}
