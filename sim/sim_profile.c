/* sim/sim_profile: see sim_profile.h. Quantiles are nearest-rank on the sorted samples
 * (q_k = the ceil(k/20 n)-th smallest, q_0 the smallest); the traces are read through
 * collectors/table (bounded, regular files only) and every number of a profile is checked on
 * the way in, since a profile is a file like any other. */
#include "sim/sim_profile.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/summary.h"
#include "collectors/table.h"
#include "lib/kv.h"
#include "node/straggler.h"

/* A compute time less than the replayed delay by more than the trace's rounding (%.6f of both
 * numbers) means the trace is not that delay stream's. */
#define BASE_SLACK_S 2e-6

/* The emulated host's load (host.runq_wait): over (t[i-1], t[i]] (t[-1] = 0) the nodes waited
 * for a core f[i] of the time; after t[n-1] never. */
struct host_line {
	double *t, *f;
	size_t n, cap;
};

/* The run's progress.csv samples are a second apart (orchestrator/hostload): a sample covers
 * the second before it first shows. */
#define HOST_SAMPLE_S 1.0

struct sim_profile {
	struct kv *kv;
	char **names;     /* "worker3.compute_s" ... */
	double (*q)[SIM_PROFILE_Q + 1]; /* the quantiles, then the tail mean (NAN: none) */
	size_t n;
	double warm[SIM_PROFILE_WARM];  /* all.transfer_warmup */
	bool has_warm;
	double ac1;                     /* all.transfer_ac1 (0: none) */
	struct host_line host;          /* host.runq_wait (n = 0: none) */
};

/* --- the host's load ---------------------------------------------------------------------- */

static double avail(double f)
{
	double a = 1 - f;

	return a < SIM_PROFILE_AVAIL_MIN ? SIM_PROFILE_AVAIL_MIN : a;
}

/* The segment holding time t: the first i with t < h->t[i] (h->n: after the last). */
static size_t seg_of(const struct host_line *h, double t)
{
	size_t lo = 0, hi = h->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (h->t[mid] > t)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static double line_wall(const struct host_line *h, double t, double x)
{
	double t0 = t;

	for (size_t i = seg_of(h, t); x > 0 && i < h->n; i++) {
		double a = avail(h->f[i]), cap = (h->t[i] - t) * a;

		if (x <= cap)
			return t + x / a - t0;
		x -= cap;
		t = h->t[i];
	}
	return t + (x > 0 ? x : 0) - t0;
}

static double line_work(const struct host_line *h, double t0, double t1)
{
	double w = 0, t = t0;

	for (size_t i = seg_of(h, t0); t < t1 && i < h->n; i++) {
		double e = h->t[i] < t1 ? h->t[i] : t1;

		w += (e - t) * avail(h->f[i]);
		t = e;
	}
	return t < t1 ? w + t1 - t : w;
}

double sim_profile_host_wall(const struct sim_profile *p, double t_s, double x_s)
{
	return p && p->host.n ? line_wall(&p->host, t_s, x_s) : x_s;
}

double sim_profile_host_work(const struct sim_profile *p, double t0_s, double t1_s)
{
	if (!(t1_s > t0_s))
		return 0;
	return p && p->host.n ? line_work(&p->host, t0_s, t1_s) : t1_s - t0_s;
}

static void line_free(struct host_line *h)
{
	free(h->t);
	free(h->f);
	memset(h, 0, sizeof *h);
}

/* Append the segment ending at t with fraction f (merged into the last one when equal). */
static int line_add(struct host_line *h, double t, double f)
{
	if (h->n && h->f[h->n - 1] == f) {
		h->t[h->n - 1] = t;
		return 0;
	}
	if (h->n == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 64;
		double *nt = realloc(h->t, cap * sizeof *nt), *nf;

		if (!nt)
			return -ENOMEM;
		h->t = nt;
		nf = realloc(h->f, cap * sizeof *nf);
		if (!nf)
			return -ENOMEM;
		h->f = nf;
		h->cap = cap;
	}
	h->t[h->n] = t;
	h->f[h->n++] = f;
	return 0;
}

/* The host's load from run_dir/progress.csv's runq_wait_frac (each row repeats the latest
 * sample): a value covers the second before its first row, back to the previous value's first
 * row at most; a second not covered by a new value repeated the previous one. No file or no
 * column (an older run, a run across hosts): an empty line. Only the times of the rows where
 * the value changes are kept, rounded as the profile writes them (3 decimals). */
static int host_fit(const char *run_dir, struct host_line *h, char *err, size_t errlen)
{
	char path[8192];
	struct table *t;
	bool missing = false, loaded = false;
	double last_t = 0, last_v = NAN;
	int ct, cf, rc = 0;

	memset(h, 0, sizeof *h);
	snprintf(path, sizeof path, "%s/progress.csv", run_dir);
	t = table_load(path, &missing, err, errlen);
	if (!t)
		return missing ? 0 : -EINVAL;
	ct = table_col(t, "t_s");
	cf = table_col(t, "runq_wait_frac");
	for (size_t r = 0; ct >= 0 && cf >= 0 && r < table_rows(t) && !rc; r++) {
		double at = round(1000 * table_double_or(t, r, (size_t)ct, NAN)) / 1000;
		double v = table_double_or(t, r, (size_t)cf, NAN), from;

		if (!isfinite(at) || !(v >= 0 && v <= 1) || v == last_v || !(at > last_t))
			continue;
		from = round(1000 * (at - HOST_SAMPLE_S)) / 1000;
		if (from > last_t + 0.01)
			rc = line_add(h, from, isnan(last_v) ? 0 : last_v);
		if (!rc)
			rc = line_add(h, at, v);
		loaded |= v >= 0.0005;
		last_t = at;
		last_v = v;
	}
	table_destroy(&t);
	if (rc < 0)
		snprintf(err, errlen, "out of memory");
	if (rc < 0 || !loaded)
		line_free(h);
	return rc;
}

int sim_profile_warm_bin(unsigned long long k)
{
	int b = 0;

	while (k > 1 && b < SIM_PROFILE_WARM - 1) {
		k >>= 1;
		b++;
	}
	return b;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void quantiles(double *v, size_t n, double *q)
{
	qsort(v, n, sizeof *v, cmp_double);
	for (int k = 0; k < SIM_PROFILE_Q; k++) {
		size_t rank = (size_t)ceil((double)k / (SIM_PROFILE_Q - 1) * (double)n);

		q[k] = v[rank ? rank - 1 : 0];
	}
}

/* The table of sorted v[0..n): its quantiles and the mean of its top bin (the samples at or
 * above the 95% quantile). */
static void put(FILE *out, const char *who, const char *what, double *v, size_t n)
{
	double q[SIM_PROFILE_Q], sum = 0;
	size_t k = 0;

	quantiles(v, n, q);
	fprintf(out, "%s.%s =", who, what);
	for (int i = 0; i < SIM_PROFILE_Q; i++)
		fprintf(out, " %.6f", q[i]);
	for (size_t i = 0; i < n; i++)
		if (v[i] >= q[SIM_PROFILE_Q - 2]) {
			sum += v[i];
			k++;
		}
	/* rounded as the quantiles are, and so within [q95, q100] */
	fprintf(out, " %.6f\n", k ? sum / (double)k : q[SIM_PROFILE_Q - 1]);
}

static bool is_worker_trace(const char *dir, const char *name)
{
	size_t len = strlen(name);

	(void)dir;
	return len > 4 && !strcmp(name + len - 4, ".csv") && strncmp(name, "server", 6) != 0 &&
	       name[0] != '.';
}

/* Two-sample Kolmogorov-Smirnov statistic of sorted a[0..n) and b[0..m): the largest gap
 * between their empirical CDFs. */
static double ks_stat(const double *a, size_t n, const double *b, size_t m)
{
	size_t i = 0, j = 0;
	double d = 0;

	while (i < n && j < m) {
		double x = a[i] <= b[j] ? a[i] : b[j], gap;

		while (i < n && a[i] <= x)
			i++;
		while (j < m && b[j] <= x)
			j++;
		gap = fabs((double)i / (double)n - (double)j / (double)m);
		d = gap > d ? gap : d;
	}
	return d;
}

/* Whether the sorted sample v[0..n) differs from the sorted pool rest[0..m) (an empty pool:
 * it does):
 * the KS statistic above its critical value at SIM_PROFILE_KS_ALPHA. */
static bool differs(const double *v, size_t n, const double *rest, size_t m, double *d)
{
	double c = sqrt(-log(SIM_PROFILE_KS_ALPHA / 2) / 2);

	*d = ks_stat(v, n, rest, m);
	return m == 0 || *d > c * sqrt((double)(n + m) / ((double)n * (double)m));
}

/* The samples of the workers not flagged, but w, sorted, into pool; returns their count. */
static size_t pool_of(double *const *v, const size_t *n, const bool *flagged, size_t nw, size_t w,
		      double *pool)
{
	size_t m = 0;

	for (size_t k = 0; k < nw; k++)
		if (k != w && !flagged[k]) {
			memcpy(pool + m, v[k], n[k] * sizeof *pool);
			m += n[k];
		}
	qsort(pool, m, sizeof *pool, cmp_double);
	return m;
}

/* Flag the workers whose samples differ from the pool of the unflagged others, the most
 * different first and one at a time (a far outlier in the pool would otherwise hide the
 * difference, and would then be drawn by the workers falling back to the pool). d[w]: each
 * worker's last KS statistic. With one worker, it is flagged (it keeps its own table). */
static void flag_outliers(double *const *v, const size_t *n, size_t nw, bool *flagged, double *d,
			  double *pool)
{
	memset(flagged, 0, nw * sizeof *flagged);
	if (nw < 2) {
		memset(flagged, 1, nw * sizeof *flagged);
		return;
	}
	for (;;) {
		size_t worst = nw, left = 0;
		double worst_d = -1;

		for (size_t w = 0; w < nw; w++)
			left += !flagged[w];
		if (left < 2)
			return;
		for (size_t w = 0; w < nw; w++) {
			size_t m;

			if (flagged[w])
				continue;
			m = pool_of(v, n, flagged, nw, w, pool);
			if (differs(v[w], n[w], pool, m, &d[w]) && d[w] > worst_d) {
				worst = w;
				worst_d = d[w];
			}
		}
		if (worst == nw)
			return;
		flagged[worst] = true;
	}
}

/* The delays worker `name` drew, replayed: its node/straggler model built from the run's
 * nodes/<name>.conf (run.seed, node.index, straggler.*) with the seed every engine uses, one
 * draw per trace row in order, the stream restarted where the step column does not go on by
 * one (a restarted process). base[r] = c[r] minus row r's draw (at least 0; no delay
 * distribution: draws of 0). Returns 1 when every row's compute time holds its draw (the rows
 * are that stream's), 0 when the conf is missing or bad, the node replays a compute trace, or a
 * row does not hold its draw; *why says which. Reads nothing but the conf. */
static int replay_delays(const char *dir, const char *name, const double *c, const double *step,
			 size_t n, double *base, const char **why)
{
	char path[8192], err[512];
	struct kv *cfg = NULL;
	struct straggler_params sp;
	struct straggler *st = NULL;
	uint64_t seed = 0;
	int64_t idx = -1;
	int rc = 0;

	snprintf(path, sizeof path, "%s/%.*s.conf", dir, (int)(strlen(name) - 4), name);
	*why = "no readable node configuration";
	cfg = kv_load(path, err, sizeof err);
	if (!cfg)
		return 0;
	*why = "a bad run.seed, node.index or straggler.* in its configuration";
	if (kv_get_u64(cfg, "run.seed", 0, &seed) < 0 || kv_get_i64(cfg, "node.index", -1, &idx) < 0 ||
	    idx < 0 || idx > UINT32_MAX || !kv_get(cfg, "run.seed") ||
	    straggler_params_from_kv(cfg, &sp) < 0)
		goto out;
	*why = "a replayed compute trace";
	if (sp.trace)
		goto out;
	/* no delay distribution: draws of 0, the compute time is all base */
	for (size_t r = 0; r < n; r++) {
		double d;

		if (!st || (r && step[r] != step[r - 1] + 1)) {
			straggler_destroy(&st);
			st = straggler_new(&sp, straggler_seed(seed, (uint32_t)idx));
			*why = "no memory";
			if (!st)
				goto out;
		}
		d = straggler_delay_s(st);
		if (!(c[r] >= d - BASE_SLACK_S)) {
			*why = "a compute time shorter than its replayed delay (another stream)";
			goto out;
		}
		base[r] = c[r] > d ? c[r] - d : 0;
	}
	*why = NULL;
	rc = 1;
out:
	straggler_destroy(&st);
	kv_destroy(&cfg);
	return rc;
}

int sim_profile_fit(const char *run_dir, FILE *out, char *err, size_t errlen)
{
	char dir[4096], path[8192];
	char **names = NULL;
	size_t nn = 0, nall = 0, nw = 0;
	double **cs = NULL, **tr = NULL, **bs = NULL, *rest = NULL, *tmp = NULL, *d = NULL;
	double **bv = NULL, *cc_all = NULL, *step_all = NULL;
	size_t *m = NULL, *who = NULL, *bm = NULL, *bn = NULL, *bw = NULL, nb = 0, nball = 0;
	const char **bwhy = NULL;
	bool *flagged = NULL;
	double warm_sum[SIM_PROFILE_WARM] = { 0 }, later_sum = 0, ac_xy = 0, ac_xx = 0;
	size_t warm_n[SIM_PROFILE_WARM] = { 0 }, later_n = 0;
	struct host_line host = { 0 };
	int rc;

	/* the host's load first: every transfer below is taken to a quiet host's time */
	rc = host_fit(run_dir, &host, err, errlen);
	if (rc < 0)
		return rc;
	snprintf(dir, sizeof dir, "%s/nodes", run_dir);
	rc = summary_list_dir(dir, is_worker_trace, NULL, &names, &nn);
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
		line_free(&host);
		return rc;
	}
	cs = calloc(nn ? nn : 1, sizeof *cs);
	tr = calloc(nn ? nn : 1, sizeof *tr);
	m = calloc(nn ? nn : 1, sizeof *m);
	who = calloc(nn ? nn : 1, sizeof *who);
	bs = calloc(nn ? nn : 1, sizeof *bs);
	bm = calloc(nn ? nn : 1, sizeof *bm);
	bwhy = calloc(nn ? nn : 1, sizeof *bwhy);
	if (!cs || !tr || !m || !who || !bs || !bm || !bwhy)
		goto nomem;
	/* every worker's samples, sorted */
	for (size_t i = 0; i < nn; i++) {
		struct table *t;
		bool missing = false;
		int ct, cc, cw, cst;
		size_t rows, k = 0;

		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		t = table_load(path, &missing, err, errlen);
		if (!t) {
			rc = -EINVAL;
			goto out;
		}
		ct = table_col(t, "t_s");
		cc = table_col(t, "compute_s");
		cw = table_col(t, "wait_s");
		cst = table_col(t, "step");
		rows = table_rows(t);
		if (ct < 0 || cc < 0 || cw < 0 || rows < 2) {
			table_destroy(&t);
			continue;
		}
		cs[nw] = malloc(rows * sizeof **cs);
		tr[nw] = malloc(rows * sizeof **tr);
		bs[nw] = malloc(rows * sizeof **bs);
		free(cc_all);
		free(step_all);
		cc_all = malloc(rows * sizeof *cc_all);
		step_all = malloc(rows * sizeof *step_all);
		if (!cs[nw] || !tr[nw] || !bs[nw] || !cc_all || !step_all) {
			table_destroy(&t);
			nw++; /* freed at out */
			goto nomem;
		}
		/* the compute time without the delay the worker drew, where its draws replay */
		for (size_t r = 0; r < rows; r++) {
			cc_all[r] = table_double_or(t, r, (size_t)cc, NAN);
			step_all[r] = cst < 0 ? (double)r : table_double_or(t, r, (size_t)cst, NAN);
		}
		if (replay_delays(dir, names[i], cc_all, step_all, rows, bs[nw], &bwhy[nw]) == 1) {
			qsort(bs[nw], rows, sizeof **bs, cmp_double);
			bm[nw] = rows;
			nball += rows;
			nb++;
		} else {
			free(bs[nw]);
			bs[nw] = NULL;
		}
		for (size_t r = 0; r < rows; r++) {
			double t0 = r ? table_double_or(t, r - 1, (size_t)ct, NAN) : 0, t1 = table_double_or(t, r, (size_t)ct, NAN);
			double c = table_double_or(t, r, (size_t)cc, NAN), w = table_double_or(t, r, (size_t)cw, NAN);
			double x = t1 - t0 - c - w;
			int b = sim_profile_warm_bin(r + 1);

			if (!isfinite(x) || c < 0 || w < 0)
				continue;
			/* on a quiet host: scaled by the host's availability over the step */
			if (host.n && t1 > t0)
				x *= line_work(&host, t0, t1) / (t1 - t0);
			/* the warm-up by the row's place in the trace (row r is the worker's step r + 1;
			 * its first, from the run's start, holds the join too and only counts here) */
			warm_sum[b] += x > 0 ? x : 0;
			warm_n[b]++;
			if (r == 0)
				continue;
			later_sum += x > 0 ? x : 0;
			later_n++;
			cs[nw][k] = c;
			tr[nw][k] = x > 0 ? x : 0;
			k++;
		}
		table_destroy(&t);
		if (k == 0) {
			free(cs[nw]);
			free(tr[nw]);
			free(bs[nw]);
			cs[nw] = tr[nw] = bs[nw] = NULL;
			if (bm[nw]) {
				nball -= bm[nw];
				nb--;
				bm[nw] = 0;
			}
			continue;
		}
		/* successive steps' transfers, in step order, about the worker's own mean */
		if (k >= 3) {
			double mu = 0;

			for (size_t j = 0; j < k; j++)
				mu += tr[nw][j] / (double)k;
			for (size_t j = 0; j < k; j++) {
				ac_xx += (tr[nw][j] - mu) * (tr[nw][j] - mu);
				if (j + 1 < k)
					ac_xy += (tr[nw][j] - mu) * (tr[nw][j + 1] - mu);
			}
		}
		qsort(cs[nw], k, sizeof **cs, cmp_double);
		qsort(tr[nw], k, sizeof **tr, cmp_double);
		m[nw] = k;
		who[nw] = i;
		nall += k;
		nw++;
	}
	if (!nw) {
		rc = -ENOENT;
		snprintf(err, errlen, "%s: no worker trace with two rows or more", dir);
		goto out;
	}
	rest = malloc((nall > nball ? nall : nball) * sizeof *rest);
	tmp = malloc((nall > nball ? nall : nball) * sizeof *tmp);
	d = calloc(nw, sizeof *d);
	flagged = calloc(nw, sizeof *flagged);
	bv = calloc(nw, sizeof *bv);
	bn = calloc(nw, sizeof *bn);
	bw = calloc(nw, sizeof *bw);
	if (!rest || !tmp || !d || !flagged || !bv || !bn || !bw)
		goto nomem;
	fprintf(out, "# stalenet calibration profile (docs/simulation.md): per worker, quantiles 0%%, 5%%, "
		     "..., 100%% of\n# its step compute time and of its transfer time per step, seconds; a "
		     "worker whose\n# times do not differ from the other workers' (two-sample KS test, "
		     "alpha %g) draws from `all`,\n# the pool of the workers alike\n", SIM_PROFILE_KS_ALPHA);
	fprintf(out, "profile.source = %s\n", run_dir);
	for (int what = 0; what < 2; what++) {
		double *const *v = what ? tr : cs;
		const char *key = what ? "transfer_s" : "compute_s";
		size_t r;

		flag_outliers(v, m, nw, flagged, d, rest);
		for (size_t w = 0; w < nw; w++) {
			char name[256];

			snprintf(name, sizeof name, "%.*s", (int)(strlen(names[who[w]]) - 4), names[who[w]]);
			if (!flagged[w]) {
				fprintf(out, "# %s.%s: as all (KS D = %.3f)\n", name, key, d[w]);
				continue;
			}
			put(out, name, key, v[w], m[w]);
		}
		/* the pool: the workers alike (all of them when every one differs) */
		r = pool_of(v, m, flagged, nw, nw, tmp);
		if (r == 0) {
			memset(flagged, 0, nw * sizeof *flagged);
			r = pool_of(v, m, flagged, nw, nw, tmp);
		}
		put(out, "all", key, tmp, r);
	}
	/* base_s: the compute time without the replayed delay draws, of the workers whose traces
	 * hold their draws; the simulator adds the draws themselves (sim/sim.c) */
	fprintf(out, "# base_s: compute_s less the delay each step drew from the worker's straggler\n"
		     "# stream (replayed from nodes/<worker>.conf); a simulation draws the base and adds\n"
		     "# the same stream's draws\n");
	for (size_t w = 0; w < nw; w++) {
		char name[256];

		snprintf(name, sizeof name, "%.*s", (int)(strlen(names[who[w]]) - 4), names[who[w]]);
		if (!bs[w])
			fprintf(out, "# %s.base_s: none (%s)\n", name, bwhy[w] ? bwhy[w] : "?");
	}
	nb = 0;
	for (size_t w = 0; w < nw; w++)
		if (bs[w]) {
			bv[nb] = bs[w];
			bn[nb] = bm[w];
			bw[nb++] = w;
		}
	if (nb) {
		size_t r;

		flag_outliers(bv, bn, nb, flagged, d, rest);
		for (size_t k = 0; k < nb; k++) {
			char name[256];
			const char *nm = names[who[bw[k]]];

			snprintf(name, sizeof name, "%.*s", (int)(strlen(nm) - 4), nm);
			if (!flagged[k]) {
				fprintf(out, "# %s.base_s: as all (KS D = %.3f)\n", name, d[k]);
				continue;
			}
			put(out, name, "base_s", bv[k], bn[k]);
		}
		r = pool_of(bv, bn, flagged, nb, nb, tmp);
		if (r == 0) {
			memset(flagged, 0, nb * sizeof *flagged);
			r = pool_of(bv, bn, flagged, nb, nb, tmp);
		}
		put(out, "all", "base_s", tmp, r);
	}
	fprintf(out, "profile.delays_replayed = %zu\n", nb);
	/* the warm-up factors, when the steps after the first took any time at all */
	if (later_n && later_sum > 0) {
		double mean = later_sum / (double)later_n;

		fprintf(out, "# mean transfer time of steps 1, 2-3, 4-7, ..., 32-63, 64- over all steps "
			     "after the first\nall.transfer_warmup =");
		for (int b = 0; b < SIM_PROFILE_WARM; b++)
			fprintf(out, " %.6f", warm_n[b] ? warm_sum[b] / (double)warm_n[b] / mean : 1.0);
		fprintf(out, "\n");
	}
	if (ac_xx > 0) {
		double ac = ac_xy / ac_xx;

		fprintf(out, "# lag-1 autocorrelation of a worker's successive transfer times, pooled\n"
			     "all.transfer_ac1 = %.4f\n", ac < -SIM_PROFILE_AC_MAX ? -SIM_PROFILE_AC_MAX :
			     ac > SIM_PROFILE_AC_MAX ? SIM_PROFILE_AC_MAX : ac);
	}
	if (host.n) {
		fprintf(out, "# the emulated host's load (progress.csv runq_wait_frac): over (t_i-1, t_i] the\n"
			     "# nodes waited f_i of the time for a core; pairs t_i f_i; the transfer times above\n"
			     "# are a quiet host's, a simulation stretches them by this timeline\nhost.runq_wait =");
		for (size_t i = 0; i < host.n; i++)
			fprintf(out, " %.3f %.4f", host.t[i], host.f[i]);
		fprintf(out, "\n");
	}
	fprintf(out, "profile.workers = %zu\n", nw);
	rc = fflush(out) == 0 && !ferror(out) ? (int)nw : -EIO;
	if (rc < 0)
		snprintf(err, errlen, "write the profile: %s", strerror(EIO));
	goto out;
nomem:
	rc = -ENOMEM;
	snprintf(err, errlen, "out of memory");
out:
	line_free(&host);
	for (size_t i = 0; i < nn; i++)
		free(names[i]);
	free(names);
	for (size_t w = 0; w < nw; w++) {
		free(cs[w]);
		free(tr[w]);
		if (bs)
			free(bs[w]);
	}
	free(cs);
	free(tr);
	free(bs);
	free(bm);
	free(bwhy);
	free(bv);
	free(bn);
	free(bw);
	free(cc_all);
	free(step_all);
	free(m);
	free(who);
	free(rest);
	free(tmp);
	free(d);
	free(flagged);
	return rc;
}

/* host.runq_wait's value into h (empty before): pairs "t f", t increasing in (0, HOST_T_MAX], f
 * in [0, 1]. 0, or -EINVAL (h freed). */
#define HOST_T_MAX 1e7
static int parse_host(struct host_line *h, const char *val)
{
	line_free(h);
	for (;;) {
		char *end;
		double t, f;

		while (*val == ' ' || *val == '\t')
			val++;
		if (!*val)
			break;
		errno = 0;
		t = strtod(val, &end);
		if (end == val || errno || !(t > (h->n ? h->t[h->n - 1] : 0)) || t > HOST_T_MAX)
			goto bad;
		val = end;
		f = strtod(val, &end);
		if (end == val || errno || !(f >= 0 && f <= 1))
			goto bad;
		val = end;
		if (line_add(h, t, f) < 0)
			goto bad;
	}
	if (h->n)
		return 0;
bad:
	line_free(h);
	return -EINVAL;
}

/* The profile from its parsed entries; takes kv (freed on failure too). path names it. */
static struct sim_profile *from_kv(struct kv *kv, const char *path, char *err, size_t errlen)
{
	struct sim_profile *p;
	size_t n;

	if (!kv)
		return NULL;
	p = calloc(1, sizeof *p);
	if (!p) {
		snprintf(err, errlen, "out of memory");
		kv_destroy(&kv);
		return NULL;
	}
	p->kv = kv; /* owned by the profile from here on */
	n = kv_count(p->kv);
	p->names = calloc(n ? n : 1, sizeof *p->names);
	p->q = calloc(n ? n : 1, sizeof *p->q);
	if (!p->names || !p->q) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		const char *key, *val, *dot;
		char *end;
		double *q = p->q[p->n];

		kv_entry(p->kv, i, &key, &val);
		if (!strcmp(key, "all.transfer_warmup")) {
			for (int k = 0; k < SIM_PROFILE_WARM; k++) {
				errno = 0;
				p->warm[k] = strtod(val, &end);
				if (end == val || errno || !isfinite(p->warm[k]) || p->warm[k] < 0 ||
				    p->warm[k] > 1000) {
					snprintf(err, errlen, "%s: %s: expected %d factors in [0, 1000]", path, key,
						 SIM_PROFILE_WARM);
					goto fail;
				}
				val = end;
			}
			while (*val == ' ' || *val == '\t')
				val++;
			if (*val) {
				snprintf(err, errlen, "%s: %s: more than %d values", path, key, SIM_PROFILE_WARM);
				goto fail;
			}
			p->has_warm = true;
			continue;
		}
		if (!strcmp(key, "host.runq_wait")) {
			if (parse_host(&p->host, val) < 0) {
				snprintf(err, errlen, "%s: %s: expected pairs of a time in seconds (increasing, "
					 "at most %g) and a fraction in [0, 1]", path, key, HOST_T_MAX);
				goto fail;
			}
			continue;
		}
		if (!strcmp(key, "all.transfer_ac1")) {
			errno = 0;
			p->ac1 = strtod(val, &end);
			while (*end == ' ' || *end == '\t')
				end++;
			if (end == val || *end || errno || !isfinite(p->ac1) || fabs(p->ac1) > SIM_PROFILE_AC_MAX) {
				snprintf(err, errlen, "%s: %s: expected a number in [-%g, %g]", path, key,
					 SIM_PROFILE_AC_MAX, SIM_PROFILE_AC_MAX);
				goto fail;
			}
			continue;
		}
		dot = strrchr(key, '.');
		if (!dot || (strcmp(dot, ".compute_s") && strcmp(dot, ".transfer_s") && strcmp(dot, ".base_s")))
			continue;
		for (int k = 0; k < SIM_PROFILE_Q; k++) {
			errno = 0;
			q[k] = strtod(val, &end);
			if (end == val || errno || !isfinite(q[k]) || q[k] < 0 || q[k] > 86400 ||
			    (k && q[k] < q[k - 1])) {
				snprintf(err, errlen, "%s: %s: expected %d non-decreasing times in seconds", path, key,
					 SIM_PROFILE_Q);
				goto fail;
			}
			val = end;
		}
		/* optional: the mean of the top bin, within it */
		q[SIM_PROFILE_Q] = NAN;
		while (*val == ' ' || *val == '\t')
			val++;
		if (*val) {
			errno = 0;
			q[SIM_PROFILE_Q] = strtod(val, &end);
			if (end == val || errno || !(q[SIM_PROFILE_Q] >= q[SIM_PROFILE_Q - 2]) ||
			    q[SIM_PROFILE_Q] > q[SIM_PROFILE_Q - 1]) {
				snprintf(err, errlen, "%s: %s: value %d (the mean of the top 5%%) outside "
					 "[%g, %g]", path, key, SIM_PROFILE_Q + 1, q[SIM_PROFILE_Q - 2],
					 q[SIM_PROFILE_Q - 1]);
				goto fail;
			}
			val = end;
			while (*val == ' ' || *val == '\t')
				val++;
		}
		if (*val) {
			snprintf(err, errlen, "%s: %s: more than %d values", path, key, SIM_PROFILE_Q + 1);
			goto fail;
		}
		p->names[p->n++] = (char *)key;
	}
	if (!p->n) {
		snprintf(err, errlen, "%s: no *.compute_s or *.transfer_s entry", path);
		goto fail;
	}
	return p;
fail:
	sim_profile_destroy(&p);
	return NULL;
}

struct sim_profile *sim_profile_load(const char *path, char *err, size_t errlen)
{
	return from_kv(kv_load(path, err, errlen), path, err, errlen);
}

struct sim_profile *sim_profile_parse(const char *buf, size_t len, const char *name, char *err, size_t errlen)
{
	return from_kv(kv_parse(buf, len, name, err, errlen), name, err, errlen);
}

void sim_profile_destroy(struct sim_profile **pp)
{
	struct sim_profile *p;

	if (!pp || !*pp)
		return;
	p = *pp;
	*pp = NULL;
	line_free(&p->host);
	free(p->names);
	free(p->q);
	kv_destroy(&p->kv);
	free(p);
}

static const double *find(const struct sim_profile *p, const char *name, const char *what)
{
	char key[300];

	for (int pass = 0; pass < 2; pass++) {
		snprintf(key, sizeof key, "%s.%s", pass ? "all" : name, what);
		for (size_t i = 0; i < p->n; i++)
			if (!strcmp(p->names[i], key))
				return p->q[i];
	}
	return NULL;
}

const double *sim_profile_compute(const struct sim_profile *p, const char *name)
{
	return find(p, name, "compute_s");
}

const double *sim_profile_transfer(const struct sim_profile *p, const char *name)
{
	return find(p, name, "transfer_s");
}

const double *sim_profile_base(const struct sim_profile *p, const char *name)
{
	return find(p, name, "base_s");
}

const double *sim_profile_warmup(const struct sim_profile *p)
{
	return p->has_warm ? p->warm : NULL;
}

double sim_profile_transfer_ac1(const struct sim_profile *p)
{
	return p->ac1;
}

double sim_profile_draw(const double *q, double u)
{
	double x = u * (SIM_PROFILE_Q - 1);
	int k = (int)x;
	double lo, hi, tail;

	if (k >= SIM_PROFILE_Q - 1)
		return q[SIM_PROFILE_Q - 1];
	if (k < 0)
		return q[0];
	if (k < SIM_PROFILE_Q - 2 || isnan(q[SIM_PROFILE_Q]))
		return q[k] + (x - k) * (q[k + 1] - q[k]);
	/* The top bin: lo + (hi - lo) v^a has the mean lo + (hi - lo) / (a + 1), the samples' mean
	 * when a = (hi - lo) / (tail - lo) - 1. A straight line there would put its mean halfway
	 * to the largest sample, far above it for a long tail (an exponential's top 5% from 2700
	 * steps: 5.2 against 4.0 mean steps), and the slowest of many workers lands in it. */
	lo = q[SIM_PROFILE_Q - 2];
	hi = q[SIM_PROFILE_Q - 1];
	tail = q[SIM_PROFILE_Q];
	if (hi <= lo || tail <= lo)
		return lo;
	return lo + (hi - lo) * pow(x - k, (hi - lo) / (tail - lo) - 1);
}
