/* sim/sim_record: see sim_record.h. */
#include "sim/sim_record.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/csv.h"
#include "collectors/schema.h"

struct rec_node {
	double compute_s, wait_s, stale_sum;
	uint32_t step, stale_n, stale_max;
	bool live, waiting;
};

struct sim_record {
	const struct plan_run *run;
	const char *dir;
	const uint32_t *node_of;
	uint32_t n, live, waiting;
	struct rec_node *nd;
	uint32_t *hist;              /* live nodes per clock value */
	size_t hist_len;
	uint32_t *stale_hist;        /* updates per staleness value */
	size_t stale_len;
	uint64_t stale_n;
	double stale_sum, compute_sum, wait_sum;
	uint64_t bytes;
	struct csv_writer **trace;   /* per node, NULL above node_files */
	struct csv_writer *progress;
};

static int grow(uint32_t **a, size_t *len, size_t need)
{
	size_t n = *len ? *len : 64;
	uint32_t *p;

	while (n <= need)
		n *= 2;
	p = realloc(*a, n * sizeof *p);
	if (!p)
		return -ENOMEM;
	memset(p + *len, 0, (n - *len) * sizeof *p);
	*a = p;
	*len = n;
	return 0;
}

void sim_record_destroy(struct sim_record **p)
{
	struct sim_record *r;

	if (!p || !*p)
		return;
	r = *p;
	for (uint32_t k = 0; r->trace && k < r->n; k++)
		csv_writer_close(&r->trace[k]);
	free(r->trace);
	csv_writer_close(&r->progress);
	free(r->nd);
	free(r->hist);
	free(r->stale_hist);
	free(r);
	*p = NULL;
}

struct sim_record *sim_record_new(const struct plan_run *run, const char *dir, const uint32_t *node_of,
				  uint32_t n, char *err, size_t errlen)
{
	struct sim_record *r = calloc(1, sizeof *r);
	char path[4096];

	if (!r || !(r->nd = calloc(n, sizeof *r->nd)) || grow(&r->hist, &r->hist_len, 0) < 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	r->run = run;
	r->dir = dir;
	r->node_of = node_of;
	r->n = n;
	r->hist[0] = 0;
	if (!dir)
		return r;
	snprintf(path, sizeof path, "%s/progress.csv", dir);
	if (!(r->progress = csv_writer_open(path, TRACE_HEADER_PROGRESS))) {
		snprintf(err, errlen, "cannot open %s", path);
		goto fail;
	}
	if (n > run->scenario->simulation.node_files)
		return r;
	if (!(r->trace = calloc(n, sizeof *r->trace))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (uint32_t k = 0; k < n; k++) {
		snprintf(path, sizeof path, "%s/nodes/%s.csv", dir, run->nodes[node_of[k]].name);
		if (!(r->trace[k] = csv_writer_open(path, TRACE_HEADER_NODE))) {
			snprintf(err, errlen, "cannot open %s", path);
			goto fail;
		}
	}
	return r;
fail:
	sim_record_destroy(&r);
	return NULL;
}

void sim_record_live(struct sim_record *r, uint32_t k, bool live)
{
	struct rec_node *d = &r->nd[k];

	if (d->live == live)
		return;
	d->live = live;
	if (live) {
		r->live++;
		r->hist[d->step]++; /* the slot exists: the clock only reached it through the hist */
	} else {
		r->live--;
		r->hist[d->step]--;
		sim_record_waiting(r, k, false);
	}
}

void sim_record_waiting(struct sim_record *r, uint32_t k, bool waiting)
{
	struct rec_node *d = &r->nd[k];

	if (d->waiting == waiting)
		return;
	d->waiting = waiting;
	if (waiting)
		r->waiting++;
	else
		r->waiting--;
}

int sim_record_set_clock(struct sim_record *r, uint32_t k, uint32_t clock)
{
	struct rec_node *d = &r->nd[k];

	if (clock >= r->hist_len && grow(&r->hist, &r->hist_len, clock) < 0)
		return -ENOMEM;
	if (d->live) {
		r->hist[d->step]--;
		r->hist[clock]++;
	}
	d->step = clock;
	return 0;
}

uint32_t sim_record_clock(const struct sim_record *r, uint32_t k)
{
	return r->nd[k].step;
}

int sim_record_step(struct sim_record *r, uint32_t k, int64_t t_ns, uint32_t step, double compute_s,
		    double wait_s, int64_t staleness, uint64_t version, uint64_t tx, uint64_t rx)
{
	struct rec_node *d = &r->nd[k];

	if (step >= r->hist_len && grow(&r->hist, &r->hist_len, step) < 0)
		return -ENOMEM;
	if (d->live) {
		r->hist[d->step]--;
		r->hist[step]++;
	}
	d->step = step;
	d->compute_s += compute_s;
	d->wait_s += wait_s;
	r->compute_sum += compute_s;
	r->wait_sum += wait_s;
	r->bytes += tx + rx;
	if (staleness >= 0) {
		if ((size_t)staleness >= r->stale_len &&
		    grow(&r->stale_hist, &r->stale_len, (size_t)staleness) < 0)
			return -ENOMEM;
		r->stale_hist[staleness]++;
		r->stale_n++;
		r->stale_sum += (double)staleness;
		d->stale_sum += (double)staleness;
		d->stale_n++;
		if ((uint32_t)staleness > d->stale_max)
			d->stale_max = (uint32_t)staleness;
	}
	if (r->trace && r->trace[k]) {
		char st[24] = "";

		if (staleness >= 0)
			snprintf(st, sizeof st, "%lld", (long long)staleness);
		if (csv_writer_row(r->trace[k], "%.6f,%s,%u,%.6f,%.6f,%s,%llu,,%llu,%llu,0", t_ns / 1e9,
				   r->run->nodes[r->node_of[k]].name, step, compute_s, wait_s, st,
				   (unsigned long long)version, (unsigned long long)tx,
				   (unsigned long long)rx) < 0)
			return -EIO;
	}
	return 0;
}

/* The clock at rank `rank` (0-based) of the live nodes. */
static uint32_t rank_clock(const struct sim_record *r, uint32_t rank)
{
	uint32_t seen = 0;

	for (size_t i = 0; i < r->hist_len; i++) {
		seen += r->hist[i];
		if (seen > rank)
			return (uint32_t)i;
	}
	return 0;
}

int sim_record_progress(struct sim_record *r, int64_t t_ns)
{
	uint32_t lo = 0, hi = 0;
	double median = 0;

	if (!r->progress)
		return 0;
	if (r->live) {
		lo = rank_clock(r, 0);
		hi = rank_clock(r, r->live - 1);
		median = r->live % 2 ? rank_clock(r, r->live / 2)
				     : (rank_clock(r, r->live / 2 - 1) + (double)rank_clock(r, r->live / 2)) / 2;
	}
	/* runq_wait_frac and host_cpu_frac: a simulated host has none (empty) */
	return csv_writer_row(r->progress, "%.3f,%u,%u,%u,%g,%u,,", t_ns / 1e9, r->live, r->waiting, lo,
			      median, hi) < 0 ? -EIO : 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

int sim_record_finish(struct sim_record *r, struct sim_result *res, char *err, size_t errlen)
{
	uint32_t *v = malloc(r->n * sizeof *v);
	char path[4096];
	struct csv_writer *f = NULL;

	if (!v) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	res->workers = r->n;
	res->total_steps = 0;
	for (uint32_t k = 0; k < r->n; k++) {
		v[k] = r->nd[k].step;
		res->total_steps += v[k];
	}
	qsort(v, r->n, sizeof *v, cmp_u32);
	res->steps_min = v[0];
	res->steps_max = v[r->n - 1];
	res->steps_median = r->n % 2 ? v[r->n / 2] : (v[r->n / 2 - 1] + (double)v[r->n / 2]) / 2;
	free(v);
	res->wait_fraction = r->wait_sum + r->compute_sum > 0 ? r->wait_sum / (r->wait_sum + r->compute_sum)
							      : NAN;
	res->staleness_mean = res->staleness_p99 = NAN;
	if (r->stale_n) {
		uint64_t rank = (uint64_t)ceil(0.99 * (double)r->stale_n), seen = 0;

		res->staleness_mean = r->stale_sum / (double)r->stale_n;
		for (size_t s = 0; s < r->stale_len; s++) {
			seen += r->stale_hist[s];
			if (seen >= rank) {
				res->staleness_p99 = (double)s;
				break;
			}
		}
	}
	res->bytes_moved = r->bytes;
	if (!r->dir)
		return 0;
	snprintf(path, sizeof path, "%s/workers.csv", r->dir);
	if (!(f = csv_writer_open(path, TRACE_HEADER_WORKERS))) {
		snprintf(err, errlen, "cannot open %s", path);
		return -EIO;
	}
	for (uint32_t k = 0; k < r->n; k++) {
		const struct rec_node *d = &r->nd[k];
		char mean[32] = "", max[16] = "";

		if (d->stale_n) {
			snprintf(mean, sizeof mean, "%.4f", d->stale_sum / d->stale_n);
			snprintf(max, sizeof max, "%u", d->stale_max);
		}
		if (csv_writer_row(f, "%s,%u,%.4f,%.4f,%s,%s", r->run->nodes[r->node_of[k]].name, d->step,
				   d->compute_s, d->wait_s, mean, max) < 0) {
			snprintf(err, errlen, "write %s failed", path);
			csv_writer_close(&f);
			return -EIO;
		}
	}
	csv_writer_close(&f);
	return 0;
}

size_t sim_record_bytes(const struct sim_record *r)
{
	return sizeof *r + r->n * sizeof *r->nd + (r->hist_len + r->stale_len) * sizeof(uint32_t);
}
