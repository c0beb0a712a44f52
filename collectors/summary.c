/* collectors/summary: see summary.h.
 *
 * Workers are the nodes/NAME.csv files whose NAME does not start with "server": parameter
 * servers write rows for the updates they apply (that is where staleness is known), but their
 * step counter is not a worker's progress. Node counters bytes_tx, bytes_rx, bad_frames are per
 * row (since the node's previous row), so a restarted node's rows still add up; links.csv
 * counters are cumulative kernel-style counters, so a link's drops are its last value. */
#include "collectors/summary.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectors/csv.h"
#include "collectors/table.h"
#include "lib/log.h"
#include "lib/safefile.h"

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double summary_median(double *v, size_t n)
{
	if (n == 0)
		return NAN;
	qsort(v, n, sizeof *v, dbl_cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

double summary_percentile(double *v, size_t n, double p)
{
	size_t rank;

	if (n == 0)
		return NAN;
	qsort(v, n, sizeof *v, dbl_cmp);
	/* ceil(p/100 * n) computed in integers where possible so 99% of 100 is rank 99, not 100
	 * through rounding error. */
	rank = (size_t)ceil(p / 100.0 * (double)n - 1e-9);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

/* ---- eval series --------------------------------------------------------------------- */

struct idx_t {
	size_t row;
	double t;
};

static int idx_cmp(const void *a, const void *b)
{
	const struct idx_t *x = a, *y = b;

	if (x->t != y->t)
		return (x->t > y->t) - (x->t < y->t);
	return (x->row > y->row) - (x->row < y->row); /* stable */
}

/* summary_eval_series; with lacks non-NULL, an eval.csv without t_s, node or test_accuracy is
 * read as having no rows, and one without updates as having them empty (0), and the missing
 * columns are added to *lacks instead of failing. */
static int eval_series(const char *run_dir, double **t_out, double **upd_out, double **acc_out,
		       size_t *n_out, unsigned *lacks, char *err, size_t errlen)
{
	struct table *t = NULL;
	struct idx_t *idx = NULL;
	char path[4096];
	const char **names = NULL;
	double *last_acc = NULL, *last_upd = NULL, *ts = NULL, *us = NULL, *as = NULL;
	size_t rows, nnames = 0, reported = 0, n = 0;
	bool missing = false;
	int ct, cn, cu, ca, rc = 0;

	*t_out = *upd_out = *acc_out = NULL;
	*n_out = 0;
	snprintf(path, sizeof path, "%s/eval.csv", run_dir);
	t = table_load(path, &missing, err, errlen);
	if (!t)
		return missing ? 0 : -EINVAL;
	ct = table_col(t, "t_s");
	cn = table_col(t, "node");
	cu = table_col(t, "updates");
	ca = table_col(t, "test_accuracy");
	if (lacks) {
		unsigned l = (ct < 0 ? SUMMARY_LACKS_EVAL_T_S : 0) |
			     (cn < 0 ? SUMMARY_LACKS_EVAL_NODE : 0) |
			     (ca < 0 ? SUMMARY_LACKS_EVAL_ACCURACY : 0);

		*lacks |= l | (cu < 0 ? SUMMARY_LACKS_EVAL_UPDATES : 0);
		if (l)
			goto out;
	}
	if (ct < 0 || cn < 0 || (cu < 0 && !lacks) || ca < 0) {
		snprintf(err, errlen, "%s: missing t_s, node, updates or test_accuracy column", path);
		rc = -EINVAL;
		goto out;
	}
	rows = table_rows(t);
	if (rows == 0)
		goto out;
	idx = calloc(rows, sizeof *idx);
	names = calloc(rows, sizeof *names);
	last_acc = calloc(rows, sizeof *last_acc);
	last_upd = calloc(rows, sizeof *last_upd);
	ts = calloc(rows, sizeof *ts);
	us = calloc(rows, sizeof *us);
	as = calloc(rows, sizeof *as);
	if (!idx || !names || !last_acc || !last_upd || !ts || !us || !as) {
		snprintf(err, errlen, "%s: out of memory", path);
		rc = -ENOMEM;
		goto out;
	}
	for (size_t r = 0; r < rows; r++) {
		const char *nm = table_get(t, r, (size_t)cn);
		size_t i;

		idx[r].row = r;
		idx[r].t = table_double_or(t, r, (size_t)ct, 0);
		for (i = 0; i < nnames; i++)
			if (strcmp(names[i], nm) == 0)
				break;
		if (i == nnames) {
			names[nnames] = nm;
			last_acc[nnames++] = NAN;
		}
	}
	qsort(idx, rows, sizeof *idx, idx_cmp);
	for (size_t k = 0; k < rows; k++) {
		size_t r = idx[k].row, i;
		double acc, sum_a = 0, sum_u = 0;

		if (table_double(t, r, (size_t)ca, &acc) < 0)
			continue;
		for (i = 0; i < nnames; i++)
			if (strcmp(names[i], table_get(t, r, (size_t)cn)) == 0)
				break;
		if (isnan(last_acc[i]))
			reported++;
		last_acc[i] = acc;
		last_upd[i] = cu >= 0 ? table_double_or(t, r, (size_t)cu, 0) : 0;
		if (reported < nnames)
			continue;
		for (i = 0; i < nnames; i++) {
			sum_a += last_acc[i];
			sum_u += last_upd[i];
		}
		/* rows at the same instant collapse into one point */
		if (n > 0 && ts[n - 1] == idx[k].t)
			n--;
		ts[n] = idx[k].t;
		us[n] = sum_u / (double)nnames;
		as[n] = sum_a / (double)nnames;
		n++;
	}
	if (n > 0) {
		*t_out = ts;
		*upd_out = us;
		*acc_out = as;
		*n_out = n;
		ts = us = as = NULL;
	}
out:
	free(idx);
	free(names);
	free(last_acc);
	free(last_upd);
	free(ts);
	free(us);
	free(as);
	table_destroy(&t);
	return rc;
}

int summary_eval_series(const char *run_dir, double **t_out, double **upd_out, double **acc_out,
			size_t *n_out, char *err, size_t errlen)
{
	return eval_series(run_dir, t_out, upd_out, acc_out, n_out, NULL, err, errlen);
}

/* ---- one run ------------------------------------------------------------------------- */

struct dvec {
	double *v;
	size_t n, cap;
};

static int dvec_push(struct dvec *d, double x)
{
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 256;
		double *nv = realloc(d->v, cap * sizeof *nv);

		if (!nv)
			return -ENOMEM;
		d->v = nv;
		d->cap = cap;
	}
	d->v[d->n++] = x;
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int summary_list_dir(const char *dir, bool (*keep)(const char *dir, const char *name),
		     int (*cmp)(const void *a, const void *b), char ***out, size_t *nout)
{
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	DIR *d = opendir(dir);
	int rc = 0;

	*out = NULL;
	*nout = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !keep(dir, de->d_name))
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof *names);
			if (!nn) {
				rc = -ENOMEM;
				break;
			}
			names = nn;
		}
		if (!(names[n] = strdup(de->d_name))) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	if (rc < 0) {
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return rc;
	}
	if (n)
		qsort(names, n, sizeof *names, cmp ? cmp : name_cmp);
	*out = names;
	*nout = n;
	return 0;
}

static bool is_csv(const char *dir, const char *name)
{
	size_t len = strlen(name);

	(void)dir;
	return name[0] != '.' && len > 4 && strcmp(name + len - 4, ".csv") == 0;
}

/* The node-trace columns the summary reads, in SUMMARY_LACKS_* bit order (bits 0..6). */
static const char *const node_cols[] = { "step", "compute_s", "wait_s", "staleness",
					 "bytes_tx", "bytes_rx", "bad_frames" };
#define N_NODE_COLS (sizeof node_cols / sizeof *node_cols)
enum { C_STEP, C_COMPUTE, C_WAIT, C_STALE, C_TX, C_RX, C_BAD };

/* Every node trace is read; a column is summed over the traces that have it, and a column
 * that one trace lacks sets its SUMMARY_LACKS_* bit, which then empties the fields computed
 * from it (so nothing is computed over a subset of the nodes). */
static int summarise_nodes(const char *run_dir, struct summary_row *out, char *err, size_t errlen)
{
	struct dvec final = { 0 }, stale = { 0 };
	char dir[4096], path[8192];
	char **names = NULL;
	size_t nnames = 0;
	double sum_wait = 0, sum_compute = 0;
	uint64_t worker_rx = 0;
	bool ps_server = false;
	int rc;

	snprintf(dir, sizeof dir, "%s/nodes", run_dir);
	rc = summary_list_dir(dir, is_csv, NULL, &names, &nnames);
	if (rc == -ENOENT) {
		rc = 0;
		goto out;
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
		goto out;
	}
	for (size_t i = 0; i < nnames && rc == 0; i++) {
		bool worker = strncmp(names[i], "server", 6) != 0;
		struct table *t;
		int col[N_NODE_COLS];
		unsigned lacks = 0;
		double max_step = -1;

		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		t = table_load(path, NULL, err, errlen);
		if (!t) {
			rc = -EINVAL;
			break;
		}
		if (!worker && table_col(t, "worker") >= 0) {
			/* A parameter server's update trace (TRACE_HEADER_SERVER): the workers' own
			 * rows already carry every staleness; the server's sends (models) are what
			 * its workers received, added below. */
			ps_server = true;
			table_destroy(&t);
			continue;
		}
		for (size_t c = 0; c < N_NODE_COLS; c++) {
			col[c] = table_col(t, node_cols[c]);
			if (col[c] < 0)
				lacks |= 1u << c;
		}
		if (lacks == (1u << N_NODE_COLS) - 1) {
			snprintf(err, errlen, "%s: not a node trace (see docs/traces.md)", path);
			table_destroy(&t);
			rc = -EINVAL;
			break;
		}
		out->lacks |= lacks;
		for (size_t r = 0; r < table_rows(t) && rc == 0; r++) {
			double st;

			if (worker) {
				double s = col[C_STEP] < 0 ? -1 : table_double_or(t, r, (size_t)col[C_STEP], -1);

				if (s > max_step)
					max_step = s;
				if (col[C_WAIT] >= 0)
					sum_wait += table_double_or(t, r, (size_t)col[C_WAIT], 0);
				if (col[C_COMPUTE] >= 0)
					sum_compute += table_double_or(t, r, (size_t)col[C_COMPUTE], 0);
				if (col[C_RX] >= 0)
					worker_rx += (uint64_t)table_double_or(t, r, (size_t)col[C_RX], 0);
			}
			if (col[C_STALE] >= 0 && table_double(t, r, (size_t)col[C_STALE], &st) == 0)
				rc = dvec_push(&stale, st);
			if (col[C_TX] >= 0)
				out->bytes_moved += (uint64_t)table_double_or(t, r, (size_t)col[C_TX], 0);
			if (col[C_BAD] >= 0)
				out->bad_frames += (uint64_t)table_double_or(t, r, (size_t)col[C_BAD], 0);
		}
		if (rc == 0 && worker && max_step >= 0) {
			rc = dvec_push(&final, max_step);
			out->total_steps += (uint64_t)max_step;
		}
		table_destroy(&t);
		if (rc == -ENOMEM)
			snprintf(err, errlen, "%s: out of memory", path);
	}
	if (rc < 0)
		goto out;
	/* A parameter server writes no byte counts of its own; all its workers receive is
	 * from it. (Peers count what they send; a byte received is another peer's sent byte.) */
	if (ps_server)
		out->bytes_moved += worker_rx;
	/* What one trace lacks is unknown for the run: drop what the others gave. wait_s and
	 * compute_s go together, so wait_fraction is never a one-sided 0 or 1. */
	if (out->lacks & (SUMMARY_LACKS_COMPUTE_S | SUMMARY_LACKS_WAIT_S))
		out->lacks |= SUMMARY_LACKS_COMPUTE_S | SUMMARY_LACKS_WAIT_S;
	if (out->lacks & SUMMARY_LACKS_STEP) {
		final.n = 0;
		out->total_steps = 0;
		out->unknown |= SUMMARY_UNKNOWN_TOTAL_STEPS;
	}
	if (out->lacks & SUMMARY_LACKS_WAIT_S)
		sum_wait = sum_compute = 0;
	if (out->lacks & SUMMARY_LACKS_STALENESS)
		stale.n = 0;
	if ((out->lacks & SUMMARY_LACKS_BYTES_TX) ||
	    (ps_server && (out->lacks & SUMMARY_LACKS_BYTES_RX))) {
		out->bytes_moved = 0;
		out->unknown |= SUMMARY_UNKNOWN_BYTES_MOVED;
	}
	if (out->lacks & SUMMARY_LACKS_BAD_FRAMES) {
		out->bad_frames = 0;
		out->unknown |= SUMMARY_UNKNOWN_BAD_FRAMES;
	}
	out->workers = final.n;
	if (final.n) {
		out->steps_median = summary_median(final.v, final.n); /* sorts */
		out->steps_min = final.v[0];
		out->steps_max = final.v[final.n - 1];
	}
	if (sum_wait + sum_compute > 0)
		out->wait_fraction = sum_wait / (sum_wait + sum_compute);
	if (stale.n) {
		double s = 0;

		for (size_t i = 0; i < stale.n; i++)
			s += stale.v[i];
		out->staleness_mean = s / (double)stale.n;
		out->staleness_p99 = summary_percentile(stale.v, stale.n, 99);
	}
out:
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	free(final.v);
	free(stale.v);
	return rc;
}

static int summarise_links(const char *run_dir, struct summary_row *out, char *err, size_t errlen)
{
	struct table *t = NULL;
	char path[4096];
	bool missing = false;
	const char **keys_node = NULL, **keys_dir = NULL;
	double *last = NULL;
	size_t nk = 0;
	int cn, cd, cdrop, clate, rc = 0;

	snprintf(path, sizeof path, "%s/links.csv", run_dir);
	t = table_load(path, &missing, err, errlen);
	if (!t)
		return missing ? 0 : -EINVAL;
	cn = table_col(t, "node");
	cd = table_col(t, "direction");
	cdrop = table_col(t, "dropped");
	if (cn < 0 || cd < 0 || cdrop < 0) {
		/* an older links.csv: left out, link_drops empty */
		out->lacks |= (cn < 0 ? SUMMARY_LACKS_LINKS_NODE : 0) |
			      (cd < 0 ? SUMMARY_LACKS_LINKS_DIRECTION : 0) |
			      (cdrop < 0 ? SUMMARY_LACKS_LINKS_DROPPED : 0);
		goto out;
	}
	out->has_links = true;
	clate = table_col(t, "late_p99_ms");
	if (clate < 0)
		out->lacks |= SUMMARY_LACKS_LINKS_LATE; /* measured since; the rest of the file is read */
	for (size_t r = 0; clate >= 0 && r < table_rows(t); r++) {
		double v;

		if (table_double(t, r, (size_t)clate, &v) == 0 &&
		    (isnan(out->late_p99_worst_ms) || v > out->late_p99_worst_ms))
			out->late_p99_worst_ms = v;
	}
	keys_node = calloc(table_rows(t) + 1, sizeof *keys_node);
	keys_dir = calloc(table_rows(t) + 1, sizeof *keys_dir);
	last = calloc(table_rows(t) + 1, sizeof *last);
	if (!keys_node || !keys_dir || !last) {
		rc = -ENOMEM;
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	for (size_t r = 0; r < table_rows(t); r++) {
		const char *nm = table_get(t, r, (size_t)cn), *dr = table_get(t, r, (size_t)cd);
		size_t i;

		for (i = 0; i < nk; i++)
			if (strcmp(keys_node[i], nm) == 0 && strcmp(keys_dir[i], dr) == 0)
				break;
		if (i == nk) {
			keys_node[nk] = nm;
			keys_dir[nk++] = dr;
		}
		/* cumulative counter: the largest value is the last one (and survives a row that
		 * a reader may see out of order) */
		double v = table_double_or(t, r, (size_t)cdrop, 0);
		if (v > last[i])
			last[i] = v;
	}
	for (size_t i = 0; i < nk; i++)
		out->link_drops += (uint64_t)last[i];
out:
	free(keys_node);
	free(keys_dir);
	free(last);
	table_destroy(&t);
	return rc;
}

/* A simulation above simulation.node_files workers has no worker traces but workers.csv (one row
 * per worker): the step and wait fields from it; staleness and bytes cannot be rebuilt from it
 * (empty; the row `stalenet simulate` wrote itself has them). */
static int summarise_workers_csv(const char *run_dir, struct summary_row *out, char *err, size_t errlen)
{
	char path[8192];
	struct table *t;
	bool missing = false;
	int cs, cc, cw;
	size_t rows;
	double *v = NULL, sc = 0, sw = 0;

	snprintf(path, sizeof path, "%s/workers.csv", run_dir);
	t = table_load(path, &missing, err, errlen);
	if (!t)
		return missing ? 0 : -EINVAL;
	cs = table_col(t, "final_step");
	cc = table_col(t, "compute_s");
	cw = table_col(t, "wait_s");
	rows = table_rows(t);
	if (cs < 0 || cc < 0 || cw < 0 || rows == 0 || !(v = malloc(rows * sizeof *v))) {
		table_destroy(&t);
		return 0;
	}
	out->total_steps = 0;
	for (size_t r = 0; r < rows; r++) {
		v[r] = table_double_or(t, r, (size_t)cs, 0);
		out->total_steps += (uint64_t)v[r];
		sc += table_double_or(t, r, (size_t)cc, 0);
		sw += table_double_or(t, r, (size_t)cw, 0);
	}
	out->workers = rows;
	out->steps_median = summary_median(v, rows); /* sorts v */
	out->steps_min = v[0];
	out->steps_max = v[rows - 1];
	out->wait_fraction = sw + sc > 0 ? sw / (sw + sc) : NAN;
	out->staleness_mean = out->staleness_p99 = NAN;
	out->unknown = SUMMARY_UNKNOWN_BYTES_MOVED | SUMMARY_UNKNOWN_BAD_FRAMES;
	out->lacks &= ~SUMMARY_LACKS_STEP;
	free(v);
	table_destroy(&t);
	return 0;
}

int summary_compute(const char *run_dir, struct summary_row *out, char *err, size_t errlen)
{
	double *ts = NULL, *us = NULL, *as = NULL;
	size_t n = 0;
	int rc;

	memset(out, 0, sizeof *out);
	out->final_accuracy = out->best_accuracy = out->time_to_target_s = NAN;
	out->steps_min = out->steps_median = out->steps_max = NAN;
	out->wait_fraction = out->staleness_mean = out->staleness_p99 = NAN;
	out->late_p99_worst_ms = NAN;
	rc = meta_load_dir(run_dir, &out->meta, err, errlen);
	if (rc < 0)
		return rc;
	rc = eval_series(run_dir, &ts, &us, &as, &n, &out->lacks, err, errlen);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if (isnan(out->best_accuracy) || as[i] > out->best_accuracy)
			out->best_accuracy = as[i];
		if (out->meta.has_target && isnan(out->time_to_target_s) &&
		    as[i] >= out->meta.target)
			out->time_to_target_s = ts[i];
	}
	if (n)
		out->final_accuracy = as[n - 1];
	free(ts);
	free(us);
	free(as);
	rc = summarise_nodes(run_dir, out, err, errlen);
	if (rc < 0)
		return rc;
	if (out->workers == 0 && (rc = summarise_workers_csv(run_dir, out, err, errlen)) < 0)
		return rc;
	return summarise_links(run_dir, out, err, errlen);
}

/* ---- summary.csv --------------------------------------------------------------------- */

/* Format a double with prec decimals (%g when prec < 0), or nothing for NAN. */
static void fmt_d(char *buf, size_t len, int prec, double v)
{
	if (isnan(v))
		buf[0] = '\0';
	else if (prec < 0)
		snprintf(buf, len, "%g", v);
	else
		snprintf(buf, len, "%.*f", prec, v);
}

/* The fixed part of the row (after the sweep key columns). The strings (run id, backend,
 * status) are quoted as CSV fields where they need it: a run id holds its sweep values. */
static void format_fixed(const struct summary_row *r, char *buf, size_t len)
{
	char fa[32], ba[32], tt[32], smin[32], smed[32], smax[32], wf[32], sm[32], sp[32], ld[32], lw[32];
	char ts[32] = "", bm[32] = "", bf[32] = "";
	char rqm[32], rqx[32], hcm[32], hcx[32], hs[8] = "";
	char id[2 * sizeof r->meta.run_id + 3], be[2 * sizeof r->meta.backend + 3];
	char st[2 * sizeof r->meta.status + 3];

	fmt_d(fa, sizeof fa, 4, r->final_accuracy);
	fmt_d(ba, sizeof ba, 4, r->best_accuracy);
	fmt_d(tt, sizeof tt, 3, r->time_to_target_s);
	fmt_d(smin, sizeof smin, 0, r->steps_min);
	fmt_d(smed, sizeof smed, -1, r->steps_median);
	fmt_d(smax, sizeof smax, 0, r->steps_max);
	fmt_d(wf, sizeof wf, 4, r->wait_fraction);
	fmt_d(sm, sizeof sm, 3, r->staleness_mean);
	fmt_d(sp, sizeof sp, -1, r->staleness_p99);
	fmt_d(rqm, sizeof rqm, 4, r->meta.runq_wait_mean);
	fmt_d(rqx, sizeof rqx, 4, r->meta.runq_wait_max);
	fmt_d(hcm, sizeof hcm, 4, r->meta.host_cpu_mean);
	fmt_d(hcx, sizeof hcx, 4, r->meta.host_cpu_max);
	if (r->meta.has_guard)
		snprintf(hs, sizeof hs, "%d", r->meta.saturated ? 1 : 0);
	fmt_d(lw, sizeof lw, 3, r->late_p99_worst_ms);
	if (r->has_links)
		snprintf(ld, sizeof ld, "%llu", (unsigned long long)r->link_drops);
	else
		ld[0] = '\0';
	if (!(r->unknown & SUMMARY_UNKNOWN_TOTAL_STEPS))
		snprintf(ts, sizeof ts, "%llu", (unsigned long long)r->total_steps);
	if (!(r->unknown & SUMMARY_UNKNOWN_BYTES_MOVED))
		snprintf(bm, sizeof bm, "%llu", (unsigned long long)r->bytes_moved);
	if (!(r->unknown & SUMMARY_UNKNOWN_BAD_FRAMES))
		snprintf(bf, sizeof bf, "%llu", (unsigned long long)r->bad_frames);
	/* every quoted form fits: at most two bytes per input byte plus the quotes */
	csv_quote(r->meta.run_id, id, sizeof id);
	csv_quote(r->meta.backend, be, sizeof be);
	csv_quote(r->meta.status, st, sizeof st);
	snprintf(buf, len, "%s,%d,%llu,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s",
		 id, r->meta.repeat, (unsigned long long)r->meta.seed, be,
		 fa, ba, tt, ts, smin, smed, smax, wf, sm, sp, bm, bf, ld, lw, st, rqm, rqx, hcm, hcx, hs);
}

struct keyset {
	char (*k)[META_KEY_LEN];
	size_t n, cap;
};

static int keyset_add(struct keyset *ks, const char *key)
{
	for (size_t i = 0; i < ks->n; i++)
		if (strcmp(ks->k[i], key) == 0)
			return 0;
	if (ks->n == ks->cap) {
		size_t cap = ks->cap ? ks->cap * 2 : 8;
		char (*nk)[META_KEY_LEN] = realloc(ks->k, cap * sizeof *nk);

		if (!nk)
			return -ENOMEM;
		ks->k = nk;
		ks->cap = cap;
	}
	snprintf(ks->k[ks->n++], META_KEY_LEN, "%.*s", META_KEY_LEN - 1, key);
	return 1;
}

static void header_line(const struct keyset *ks, struct csv_buf *b)
{
	for (size_t i = 0; i < ks->n; i++) {
		csv_buf_field(b, ks->k[i]);
		csv_buf_put(b, ",");
	}
	csv_buf_put(b, SUMMARY_FIXED_HEADER "\n");
}

static void row_line(const struct keyset *ks, const struct summary_row *r, struct csv_buf *b)
{
	char fixed[2048];

	for (size_t i = 0; i < ks->n; i++) {
		const char *v = meta_sweep_value(&r->meta, ks->k[i]);

		csv_buf_field(b, v ? v : "");
		csv_buf_put(b, ",");
	}
	format_fixed(r, fixed, sizeof fixed);
	csv_buf_put(b, fixed);
	csv_buf_put(b, "\n");
}

static int write_atomic(const char *path, const char *data, size_t len, char *err, size_t errlen)
{
	/* An unpredictable temporary name, renamed over path (lib/safefile). */
	int rc = safefile_replace(path, data, len, 0644);

	if (rc < 0)
		snprintf(err, errlen, "write %s: %s", path, strerror(-rc));
	return rc;
}

/* Whether the columns of t from c on are exactly those of header (SUMMARY_FIXED_HEADER or
 * an older one; compared name by name: a sweep key before them may hold anything). */
static bool fixed_header_at(const struct table *t, size_t c, const char *header)
{
	const char *p = header;

	for (; c < table_cols(t); c++) {
		const char *name = table_colname(t, c);
		size_t n = strlen(name);

		if (strncmp(p, name, n) != 0 || (p[n] != ',' && p[n] != '\0'))
			return false;
		p += n;
		if (*p == '\0')
			return c + 1 == table_cols(t);
		p++;
	}
	return false;
}

int summary_append(const char *path, const struct summary_row *row, char *err, size_t errlen)
{
	struct keyset ks = { 0 };
	struct table *t = NULL;
	struct csv_buf b = { 0 };
	size_t nold = 0;
	bool missing = false, grown = false, replace = false, old = false;
	int crun = -1, rc = 0;

	t = table_load(path, &missing, err, errlen);
	if (!t && !missing)
		return -EINVAL;
	if (t) {
		crun = table_col(t, "run_id");
		old = crun >= 0 && fixed_header_at(t, (size_t)crun, SUMMARY_FIXED_HEADER_V1);
		if (crun < 0 || (!old && !fixed_header_at(t, (size_t)crun, SUMMARY_FIXED_HEADER))) {
			snprintf(err, errlen, "%s: header does not end with the summary columns", path);
			rc = -EINVAL;
			goto out;
		}
		nold = (size_t)crun;
		for (size_t c = 0; c < nold && rc >= 0; c++)
			rc = keyset_add(&ks, table_colname(t, c));
		for (size_t r = 0; r < table_rows(t); r++)
			if (strcmp(table_get(t, r, (size_t)crun), row->meta.run_id) == 0)
				replace = true;
	}
	for (size_t i = 0; i < row->meta.nsweep && rc >= 0; i++) {
		rc = keyset_add(&ks, row->meta.sweep_key[i]);
		grown |= rc == 1;
	}
	if (rc < 0)
		goto out;
	rc = 0;
	if (t && !grown && !replace && !old) {
		struct csv_writer *w = csv_writer_open(path, NULL);

		row_line(&ks, row, &b);
		if (b.rc == 0 && b.len > 0)
			b.p[b.len - 1] = '\0'; /* the writer adds the newline */
		if (!w || b.rc < 0) {
			snprintf(err, errlen, "%s: cannot append", path);
			rc = b.rc < 0 ? b.rc : -EIO;
		} else {
			rc = csv_writer_row(w, "%s", b.p);
			if (rc < 0)
				snprintf(err, errlen, "%s: write failed", path);
		}
		csv_writer_close(&w);
		goto out;
	}
	/* Rewrite: union header, old rows remapped by column name, then the new row. */
	header_line(&ks, &b);
	for (size_t r = 0; t && r < table_rows(t); r++) {
		if (strcmp(table_get(t, r, (size_t)crun), row->meta.run_id) == 0)
			continue;
		for (size_t i = 0; i < ks.n; i++) {
			int c = table_col(t, ks.k[i]);

			csv_buf_field(&b, c >= 0 && c < crun ? table_get(t, r, (size_t)c) : "");
			csv_buf_put(&b, ",");
		}
		for (size_t c = (size_t)crun; c < table_cols(t); c++) {
			/* a row of the older header: late_p99_worst_ms (before status) unknown */
			if (old && c + 1 == table_cols(t))
				csv_buf_put(&b, ",");
			csv_buf_field(&b, table_get(t, r, c));
			csv_buf_put(&b, c + 1 < table_cols(t) ? "," : "");
		}
		/* ... and the guard's columns (after status) */
		csv_buf_put(&b, old ? ",,,,,\n" : "\n");
	}
	row_line(&ks, row, &b);
	if (b.rc < 0) {
		rc = b.rc;
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	rc = write_atomic(path, b.p, b.len, err, errlen);
out:
	free(ks.k);
	free(b.p);
	table_destroy(&t);
	return rc;
}

/* ---- lacks ---------------------------------------------------------------------------- */

/* "a, b" of the column names of the bits of mask from bit first on, names[i] for bit first+i. */
static const char *col_list(unsigned mask, unsigned first, const char *const *names, size_t n,
			    char *buf, size_t len)
{
	size_t pos = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++)
		if ((mask & (1u << (first + i))) && pos < len)
			pos += (size_t)snprintf(buf + pos, len - pos, "%s%s", pos ? ", " : "",
						names[i]);
	return buf;
}

int summary_lacks_describe(const struct summary_row *row, char *buf, size_t len)
{
	static const char *const eval_cols[] = { "t_s", "node", "test_accuracy" };
	static const char *const link_cols[] = { "node", "direction", "dropped" };
	const unsigned node_mask = (1u << N_NODE_COLS) - 1;
	const unsigned eval_need = SUMMARY_LACKS_EVAL_T_S | SUMMARY_LACKS_EVAL_NODE |
				   SUMMARY_LACKS_EVAL_ACCURACY;
	const unsigned link_need = SUMMARY_LACKS_LINKS_NODE | SUMMARY_LACKS_LINKS_DIRECTION |
				   SUMMARY_LACKS_LINKS_DROPPED;
	unsigned l = row->lacks;
	char list[128];
	size_t pos = 0;
	int lines = 0;

#define LINE(...)                                                                             \
	do {                                                                                  \
		if (pos < len)                                                                \
			pos += (size_t)snprintf(buf + pos, len - pos, "%s", lines ? "\n" : ""); \
		if (pos < len)                                                                \
			pos += (size_t)snprintf(buf + pos, len - pos, __VA_ARGS__);           \
		lines++;                                                                      \
	} while (0)

	if (len)
		buf[0] = '\0';
	if (l & node_mask)
		LINE("nodes: %s missing from a node trace (read as empty in all of them)",
		     col_list(l, 0, node_cols, N_NODE_COLS, list, sizeof list));
	if (l & eval_need)
		LINE("eval.csv: lacks %s (left out: accuracy fields empty)",
		     col_list(l, 7, eval_cols, 3, list, sizeof list));
	else if (l & SUMMARY_LACKS_EVAL_UPDATES)
		LINE("eval.csv: lacks updates (read as empty)");
	if (l & link_need)
		LINE("links.csv: lacks %s (left out: link_drops, late_p99_worst_ms empty)",
		     col_list(l, 11, link_cols, 3, list, sizeof list));
	else if (l & SUMMARY_LACKS_LINKS_LATE)
		LINE("links.csv: lacks late_p99_ms (late_p99_worst_ms empty)");
#undef LINE
	return lines;
}

/* ---- rebuild ------------------------------------------------------------------------- */

static bool is_run_dir(const char *dir, const char *name)
{
	char path[4096];

	if (name[0] == '.')
		return false;
	snprintf(path, sizeof path, "%s/%s/meta.json", dir, name);
	return access(path, F_OK) == 0;
}

int summary_list_runs(const char *dir, char ***out, size_t *nout, bool *single)
{
	char path[4096];

	*out = NULL;
	*nout = 0;
	/* A run directory holds meta.json (whatever it is: meta_load_dir says what is wrong). */
	snprintf(path, sizeof path, "%s/meta.json", dir);
	*single = access(path, F_OK) == 0;
	if (!*single)
		return summary_list_dir(dir, is_run_dir, NULL, out, nout);
	*out = calloc(1, sizeof **out);
	if (!*out || !((*out)[0] = strdup("."))) {
		free(*out);
		*out = NULL;
		return -ENOMEM;
	}
	*nout = 1;
	return 0;
}

int summary_rebuild(const char *dir, char *err, size_t errlen)
{
	return summary_rebuild_each(dir, NULL, NULL, err, errlen);
}

int summary_rebuild_each(const char *dir, summary_run_fn *fn, void *arg, char *err,
			 size_t errlen)
{
	struct summary_row *rows = NULL;
	struct keyset ks = { 0 };
	char **names = NULL, path[4096];
	struct csv_buf b = { 0 };
	size_t nnames = 0;
	bool single;
	int rc;

	rc = summary_list_runs(dir, &names, &nnames, &single);
	if (rc < 0) {
		if (single)
			snprintf(err, errlen, "out of memory");
		else
			snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
		return rc;
	}
	rows = calloc(nnames + 1, sizeof *rows);
	if (!rows) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < nnames; i++) {
		if (single)
			snprintf(path, sizeof path, "%s", dir);
		else
			snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		rc = summary_compute(path, &rows[i], err, errlen);
		if (rc < 0)
			goto out;
		if (fn)
			fn(arg, single ? NULL : names[i], &rows[i]);
		for (size_t k = 0; k < rows[i].meta.nsweep && rc >= 0; k++)
			rc = keyset_add(&ks, rows[i].meta.sweep_key[k]);
		if (rc < 0) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	header_line(&ks, &b);
	for (size_t i = 0; i < nnames; i++)
		row_line(&ks, &rows[i], &b);
	if (b.rc < 0) {
		rc = b.rc;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	snprintf(path, sizeof path, "%s/summary.csv", dir);
	rc = write_atomic(path, b.p, b.len, err, errlen);
	if (rc == 0)
		rc = (int)nnames;
out:
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	free(rows);
	free(ks.k);
	free(b.p);
	return rc;
}
