/* sim/sim_profile: see sim_profile.h. Quantiles are nearest-rank on the sorted samples
 * (q_k = the ceil(k/20 n)-th smallest, q_0 the smallest); the traces are read through
 * collectors/table (bounded, regular files only) and every number of a profile is checked on
 * the way in, since a profile is a file like any other. */
#include "sim/sim_profile.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/summary.h"
#include "collectors/table.h"
#include "lib/kv.h"

struct sim_profile {
	struct kv *kv;
	char **names;     /* "worker3.compute_s" ... */
	double (*q)[SIM_PROFILE_Q];
	size_t n;
};

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

static void put(FILE *out, const char *who, const char *what, const double *q)
{
	fprintf(out, "%s.%s =", who, what);
	for (int k = 0; k < SIM_PROFILE_Q; k++)
		fprintf(out, " %.6f", q[k]);
	fputc('\n', out);
}

static bool is_worker_trace(const char *dir, const char *name)
{
	size_t len = strlen(name);

	(void)dir;
	return len > 4 && !strcmp(name + len - 4, ".csv") && strncmp(name, "server", 6) != 0 &&
	       name[0] != '.';
}

int sim_profile_fit(const char *run_dir, FILE *out, char *err, size_t errlen)
{
	char dir[4096], path[8192];
	char **names = NULL;
	size_t nn = 0, nall = 0, capall = 0;
	double *cs = NULL, *tr = NULL, *allc = NULL, *allt = NULL;
	int rc, fitted = 0;

	snprintf(dir, sizeof dir, "%s/nodes", run_dir);
	rc = summary_list_dir(dir, is_worker_trace, NULL, &names, &nn);
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
		return rc;
	}
	fprintf(out, "# stalenet calibration profile (docs/simulation.md): per worker, quantiles 0%%, 5%%, "
		     "..., 100%% of\n# its step compute time and of its transfer time per step, seconds\n");
	fprintf(out, "profile.source = %s\n", run_dir);
	for (size_t i = 0; i < nn; i++) {
		struct table *t;
		bool missing = false;
		int ct, cc, cw;
		size_t rows, m = 0;
		char who[256];

		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		t = table_load(path, &missing, err, errlen);
		if (!t) {
			rc = -EINVAL;
			goto out;
		}
		ct = table_col(t, "t_s");
		cc = table_col(t, "compute_s");
		cw = table_col(t, "wait_s");
		rows = table_rows(t);
		if (ct < 0 || cc < 0 || cw < 0 || rows < 2) {
			table_destroy(&t);
			continue;
		}
		free(cs);
		free(tr);
		cs = malloc(rows * sizeof *cs);
		tr = malloc(rows * sizeof *tr);
		if (!cs || !tr) {
			table_destroy(&t);
			rc = -ENOMEM;
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		for (size_t r = 1; r < rows; r++) {
			double t0 = table_double_or(t, r - 1, (size_t)ct, NAN), t1 = table_double_or(t, r, (size_t)ct, NAN);
			double c = table_double_or(t, r, (size_t)cc, NAN), w = table_double_or(t, r, (size_t)cw, NAN);
			double x = t1 - t0 - c - w;

			if (!isfinite(x) || c < 0 || w < 0)
				continue;
			cs[m] = c;
			tr[m] = x > 0 ? x : 0;
			m++;
		}
		table_destroy(&t);
		if (m == 0)
			continue;
		if (nall + m > capall) {
			size_t cap = (nall + m) * 2;
			double *a = realloc(allc, cap * sizeof *a), *b;

			if (a)
				allc = a;
			b = a ? realloc(allt, cap * sizeof *b) : NULL;
			if (!a || !b) {
				rc = -ENOMEM;
				snprintf(err, errlen, "out of memory");
				goto out;
			}
			allt = b;
			capall = cap;
		}
		memcpy(allc + nall, cs, m * sizeof *cs);
		memcpy(allt + nall, tr, m * sizeof *tr);
		nall += m;
		snprintf(who, sizeof who, "%.*s", (int)(strlen(names[i]) - 4), names[i]);
		{
			double q[SIM_PROFILE_Q];

			quantiles(cs, m, q);
			put(out, who, "compute_s", q);
			quantiles(tr, m, q);
			put(out, who, "transfer_s", q);
		}
		fitted++;
	}
	if (!fitted) {
		rc = -ENOENT;
		snprintf(err, errlen, "%s: no worker trace with two rows or more", dir);
		goto out;
	}
	{
		double q[SIM_PROFILE_Q];

		quantiles(allc, nall, q);
		put(out, "all", "compute_s", q);
		quantiles(allt, nall, q);
		put(out, "all", "transfer_s", q);
	}
	fprintf(out, "profile.workers = %d\n", fitted);
	rc = fflush(out) == 0 && !ferror(out) ? fitted : -EIO;
	if (rc < 0)
		snprintf(err, errlen, "write the profile: %s", strerror(EIO));
out:
	for (size_t i = 0; i < nn; i++)
		free(names[i]);
	free(names);
	free(cs);
	free(tr);
	free(allc);
	free(allt);
	return rc;
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
		dot = strrchr(key, '.');
		if (!dot || (strcmp(dot, ".compute_s") && strcmp(dot, ".transfer_s")))
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
		while (*val == ' ' || *val == '\t')
			val++;
		if (*val) {
			snprintf(err, errlen, "%s: %s: more than %d values", path, key, SIM_PROFILE_Q);
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

double sim_profile_draw(const double *q, double u)
{
	double x = u * (SIM_PROFILE_Q - 1);
	int k = (int)x;

	if (k >= SIM_PROFILE_Q - 1)
		return q[SIM_PROFILE_Q - 1];
	if (k < 0)
		return q[0];
	return q[k] + (x - k) * (q[k + 1] - q[k]);
}
