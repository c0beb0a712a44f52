/* collectors/plot_fleet: see plot_fleet.h.
 *
 * fleet.csv rows are in the registry's commit order (t_s non-decreasing; the schema checks
 * it), so a cumulative sum in file order is a series in time. A rejected row still counts its
 * bytes: they crossed the link. */
#include "collectors/plot_fleet.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/table.h"

static int push(struct plot_series *s, size_t *cap, double x, double y)
{
	if (s->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 256;
		double *nx = realloc(s->x, nc * sizeof *nx), *ny;

		if (!nx)
			return -ENOMEM;
		s->x = nx;
		if (!(ny = realloc(s->y, nc * sizeof *ny)))
			return -ENOMEM;
		s->y = ny;
		*cap = nc;
	}
	s->x[s->n] = x;
	s->y[s->n] = y;
	s->n++;
	return 0;
}

void plot_fleet_free(struct plot_series *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(s[i].x);
		free(s[i].y);
		s[i].x = s[i].y = NULL;
		s[i].n = 0;
	}
}

/* Append the (xcol, ycol) pairs of RUN/file to s; with only_ok, rows whose verify_ok is not 1
 * are left out; with cumulative, y is the running sum. A missing file, or one without the
 * columns, adds nothing. */
static int read_pairs(const struct plot_run *r, const char *file, const char *xcol, const char *ycol,
		      int only_ok, int cumulative, struct plot_series *s, size_t *cap, char *err,
		      size_t errlen)
{
	char path[8192];
	struct table *t;
	bool missing = false;
	double sum = 0;
	int cx, cy, cok, rc = 0;

	snprintf(path, sizeof path, "%s/%s", r->dir, file);
	t = table_load(path, &missing, err, errlen);
	if (!t)
		return missing ? 0 : -EINVAL;
	cx = table_col(t, xcol);
	cy = table_col(t, ycol);
	cok = table_col(t, "verify_ok");
	for (size_t i = 0; cx >= 0 && cy >= 0 && i < table_rows(t) && rc == 0; i++) {
		double x, y;

		if (table_double(t, i, (size_t)cx, &x) < 0 || table_double(t, i, (size_t)cy, &y) < 0)
			continue;
		if (only_ok && cok >= 0 && table_double_or(t, i, (size_t)cok, 0) != 1)
			continue;
		sum += y;
		rc = push(s, cap, x, cumulative ? sum : y);
	}
	if (rc == -ENOMEM)
		snprintf(err, errlen, "%s: out of memory", path);
	table_destroy(&t);
	return rc;
}

int plot_fleet_bytes(const struct plot_set *set, struct plot_band *bands, char *err, size_t errlen)
{
	struct plot_series s[PLOT_DATA_MAX_RUNS];
	double xmax = 0;
	size_t any = 0;
	int rc = 0;

	memset(s, 0, sizeof s);
	for (size_t p = 0; p < set->npoints; p++) {
		const struct plot_point *pt = &set->points[p];

		for (size_t k = 0; k < pt->nruns; k++) {
			size_t cap = 0;

			/* the origin: nothing sent at t = 0 */
			rc = push(&s[k], &cap, 0, 0);
			if (rc == 0)
				rc = read_pairs(&set->runs[pt->runs[k]], "fleet.csv", "t_s", "bytes_tx", 0,
						1, &s[k], &cap, err, errlen);
			if (rc < 0)
				goto out;
			if (s[k].n > 1)
				any += s[k].n - 1;
			for (size_t i = 0; i < s[k].n; i++)
				xmax = s[k].x[i] > xmax ? s[k].x[i] : xmax;
		}
		plot_data_band(s, pt->nruns, xmax > 0 ? xmax : 1, &bands[p]);
		plot_fleet_free(s, pt->nruns);
	}
	rc = any > 0;
out:
	plot_fleet_free(s, PLOT_DATA_MAX_RUNS);
	return rc;
}

int plot_fleet_scatter(const struct plot_set *set, enum plot_fleet_scatter what,
		       struct plot_series *pts, char *err, size_t errlen)
{
	size_t total = 0;
	int rc = 0;

	for (size_t p = 0; p < set->npoints; p++) {
		const struct plot_point *pt = &set->points[p];
		size_t cap = 0;

		pts[p] = (struct plot_series){ 0 };
		for (size_t k = 0; k < pt->nruns && rc == 0; k++) {
			const struct plot_run *r = &set->runs[pt->runs[k]];

			if (what == PLOT_FLEET_LAG)
				rc = read_pairs(r, "fleet.csv", "t_s", "registry_lag_s", 1, 0, &pts[p], &cap,
						err, errlen);
			else
				rc = read_pairs(r, "recover.csv", "version", "recover_s", 0, 0, &pts[p],
						&cap, err, errlen);
		}
		if (rc < 0) {
			plot_fleet_free(pts, p + 1);
			return rc;
		}
		total += pts[p].n;
	}
	return (int)(total > INT32_MAX ? INT32_MAX : total);
}
