/* netem/netem_model: netem's per-packet decisions in userspace (see the header).
 *
 * Kernel behaviour mirrored here (net/sched/sch_netem.c, netem_enqueue): duplicate is decided
 * first, then loss removes one copy (so a duplicated packet may still arrive once), then corrupt,
 * then either the reorder path (send now, counter = 0) or a tabledist delay. */
#include "netem/netem_model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"

uint32_t netem_model_scale_ppm(uint32_t ppm)
{
	if (ppm >= LINK_PPM_MAX)
		return UINT32_MAX;
	return (uint32_t)(((uint64_t)ppm * UINT32_MAX + LINK_PPM_MAX / 2) / LINK_PPM_MAX);
}

/* --- PRNG ------------------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void netem_model_rng_seed(struct netem_rng *rng, uint64_t seed)
{
	uint64_t a = splitmix64(&seed), b = splitmix64(&seed);
	rng->s[0] = (uint32_t)a;
	rng->s[1] = (uint32_t)(a >> 32);
	rng->s[2] = (uint32_t)b;
	rng->s[3] = (uint32_t)(b >> 32) | 1u; /* never all zero */
}

static inline uint32_t rotl32(uint32_t x, int k)
{
	return (x << k) | (x >> (32 - k));
}

uint32_t netem_model_rng_u32(struct netem_rng *rng)
{
	uint32_t *s = rng->s;
	uint32_t result = rotl32(s[1] * 5, 7) * 9;
	uint32_t t = s[1] << 9;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl32(s[3], 11);
	return result;
}

/* netem's get_crandom: the next value leans on the previous one with weight rho. */
static uint32_t crandom(struct netem_crnd *st, struct netem_rng *rng)
{
	uint32_t value = netem_model_rng_u32(rng);
	if (st->rho == 0)
		return value;
	uint64_t rho = (uint64_t)st->rho + 1;
	uint32_t answer = (uint32_t)(((uint64_t)value * ((1ull << 32) - rho) + (uint64_t)st->last * rho) >> 32);
	st->last = answer;
	return answer;
}

/* --- distribution tables ----------------------------------------------------------------- */

/* Inverse standard normal CDF (Acklam's rational approximation, |rel err| < 1.2e-9). */
static double norm_inv(double p)
{
	static const double a[] = { -3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
				    1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00 };
	static const double b[] = { -5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
				    6.680131188771972e+01, -1.328068155288572e+01 };
	static const double c[] = { -7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
				    -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00 };
	static const double d[] = { 7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
				    3.754408661907416e+00 };
	const double plow = 0.02425;
	double q, r;
	if (p < plow) {
		q = sqrt(-2 * log(p));
		return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
		       ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
	}
	if (p > 1 - plow) {
		q = sqrt(-2 * log(1 - p));
		return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
		       ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
	}
	q = p - 0.5;
	r = q * q;
	return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
	       (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

static int16_t to_entry(double sd_units)
{
	double v = round(sd_units * NETEM_MODEL_DIST_SCALE);
	if (v < INT16_MIN)
		v = INT16_MIN;
	if (v > INT16_MAX)
		v = INT16_MAX;
	return (int16_t)v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int netem_model_dist_generate(enum link_dist dist, int16_t *out)
{
	const size_t n = NETEM_MODEL_DIST_SIZE;
	if (dist == LINK_DIST_NORMAL) {
		for (size_t i = 0; i < n; i++)
			out[i] = to_entry(norm_inv(((double)i + 0.5) / (double)n));
		return 0;
	}
	if (dist != LINK_DIST_PARETO && dist != LINK_DIST_PARETONORMAL)
		return -EINVAL;
	/* Sample, standardise to mean 0 / sd 1, take n evenly spaced quantiles of the sorted sample.
	 * Pareto alpha = 3, x_m = 1: mean 1.5, sd sqrt(0.75). The mix is 1/4 normal + 3/4 pareto. */
	const size_t m = 64 * n;
	double *s = malloc(m * sizeof *s);
	if (!s)
		return -ENOMEM;
	struct netem_rng rng;
	netem_model_rng_seed(&rng, 0x5eed0d157ull + (uint64_t)dist);
	double sum = 0, sum2 = 0;
	for (size_t i = 0; i < m; i++) {
		double u = ((double)netem_model_rng_u32(&rng) + 0.5) / 4294967296.0;
		double par = (pow(1 - u, -1.0 / 3.0) - 1.5) / sqrt(0.75);
		double x = par;
		if (dist == LINK_DIST_PARETONORMAL) {
			double u2 = ((double)netem_model_rng_u32(&rng) + 0.5) / 4294967296.0;
			x = 0.25 * norm_inv(u2) + 0.75 * par;
		}
		s[i] = x;
		sum += x;
		sum2 += x * x;
	}
	(void)sum;
	(void)sum2;
	/* Standardise the quantiles themselves (the sample's tail would inflate its own sd). */
	qsort(s, m, sizeof *s, cmp_double);
	double qs = 0, qs2 = 0;
	for (size_t i = 0; i < n; i++) {
		double q = s[i * (m / n) + m / n / 2];
		qs += q;
		qs2 += q * q;
	}
	double mean = qs / (double)n, sd = sqrt(qs2 / (double)n - mean * mean);
	/* Entries clip at +-4 sd (int16 / 8192); widen the scale until the clipped table has sd 1. */
	double scale = 1 / sd;
	for (int iter = 0; iter < 30; iter++) {
		double t2 = 0;
		for (size_t i = 0; i < n; i++) {
			double v = (double)to_entry((s[i * (m / n) + m / n / 2] - mean) * scale) / NETEM_MODEL_DIST_SCALE;
			t2 += v * v;
		}
		scale /= sqrt(t2 / (double)n);
	}
	for (size_t i = 0; i < n; i++)
		out[i] = to_entry((s[i * (m / n) + m / n / 2] - mean) * scale);
	free(s);
	return 0;
}

static int load_dist_file(const char *path, int16_t *out, size_t *n)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	char line[1024];
	size_t k = 0;
	int rc = 0;
	while (fgets(line, sizeof line, f)) {
		if (line[0] == '#')
			continue;
		char *p = line, *end;
		for (;;) {
			long v = strtol(p, &end, 10);
			if (end == p)
				break;
			if (k >= NETEM_MODEL_DIST_SIZE * 4 || v < INT16_MIN || v > INT16_MAX) {
				rc = -EINVAL;
				goto out;
			}
			out[k++] = (int16_t)v;
			p = end;
		}
	}
	if (k == 0)
		rc = -EINVAL;
	*n = k;
out:
	fclose(f);
	return rc;
}

int netem_model_dist_table(enum link_dist dist, const char *dir, const int16_t **table, size_t *n)
{
	static int16_t tables[LINK_DIST_PARETONORMAL + 1][NETEM_MODEL_DIST_SIZE * 4];
	static size_t sizes[LINK_DIST_PARETONORMAL + 1];
	static const char *const dirs[] = { "/usr/lib/x86_64-linux-gnu/tc", "/usr/lib/tc",
					    "/usr/lib64/tc", "/usr/local/lib/tc" };
	if (dist == LINK_DIST_NONE || dist == LINK_DIST_UNIFORM)
		return -ENOENT;
	if ((unsigned)dist > LINK_DIST_PARETONORMAL)
		return -EINVAL;
	/* The cache only holds the default lookup; an explicit dir always reads. */
	if (!dir && sizes[dist]) {
		*table = tables[dist];
		*n = sizes[dist];
		return 0;
	}
	static int16_t scratch[NETEM_MODEL_DIST_SIZE * 4];
	int16_t *dst = dir ? scratch : tables[dist];
	size_t k = 0;
	char path[512];
	for (size_t i = 0; i < (dir ? 1 : sizeof dirs / sizeof dirs[0]); i++) {
		snprintf(path, sizeof path, "%s/%s.dist", dir ? dir : dirs[i], link_params_dist_name(dist));
		if (load_dist_file(path, dst, &k) == 0)
			break;
		k = 0;
	}
	if (k == 0) {
		int rc = netem_model_dist_generate(dist, dst);
		if (rc < 0)
			return rc;
		k = NETEM_MODEL_DIST_SIZE;
		log_debug("netem: generated %s table", link_params_dist_name(dist));
	}
	if (!dir)
		sizes[dist] = k;
	*table = dst;
	*n = k;
	return 0;
}

/* --- the model --------------------------------------------------------------------------- */

int netem_model_configure(struct netem_model *m, const struct link_params *p, uint64_t seed, bool fresh)
{
	if (link_params_validate(p))
		return -EINVAL;
	const int16_t *table = NULL;
	size_t table_n = 0;
	if (p->jitter_us && netem_model_dist_table(p->dist, NULL, &table, &table_n) < 0) {
		table = NULL;
		table_n = 0;
	}
	if (fresh) {
		memset(m, 0, sizeof *m);
		netem_model_rng_seed(&m->rng, seed);
	}
	m->latency_ns = (int64_t)p->delay_us * 1000;
	m->jitter_ns = (int64_t)p->jitter_us * 1000;
	m->delay_cor.rho = netem_model_scale_ppm(p->delay_corr_ppm);
	m->loss_model = p->loss_model;
	m->loss = netem_model_scale_ppm(p->loss_ppm);
	m->loss_cor.rho = netem_model_scale_ppm(p->loss_corr_ppm);
	m->ge_p = netem_model_scale_ppm(p->ge_p_ppm);
	m->ge_r = netem_model_scale_ppm(p->ge_r_ppm);
	m->ge_1h = netem_model_scale_ppm(p->ge_1h_ppm);
	m->ge_1k = netem_model_scale_ppm(p->ge_1k_ppm);
	m->dup = netem_model_scale_ppm(p->dup_ppm);
	m->dup_cor.rho = netem_model_scale_ppm(p->dup_corr_ppm);
	m->reorder = netem_model_scale_ppm(p->reorder_ppm);
	m->reorder_cor.rho = netem_model_scale_ppm(p->reorder_corr_ppm);
	m->corrupt = netem_model_scale_ppm(p->corrupt_ppm);
	m->corrupt_cor.rho = netem_model_scale_ppm(p->corrupt_corr_ppm);
	/* tc turns "reorder P" without a gap into gap 1: every packet is a candidate. */
	m->gap = p->reorder_ppm ? (p->gap ? p->gap : 1) : 0;
	m->table = table;
	m->table_n = table_n;
	return 0;
}

/* netem's tabledist for table entry t: non-decreasing in t. */
static int64_t table_delay(int64_t mu, int64_t sigma, int64_t t)
{
	int64_t y = (sigma % NETEM_MODEL_DIST_SCALE) * t;
	y += y >= 0 ? NETEM_MODEL_DIST_SCALE / 2 : -NETEM_MODEL_DIST_SCALE / 2;
	return y / NETEM_MODEL_DIST_SCALE + (sigma / NETEM_MODEL_DIST_SCALE) * t + mu;
}

int64_t netem_model_delay_ns(struct netem_model *m)
{
	int64_t mu = m->latency_ns, sigma = m->jitter_ns, x;
	if (sigma == 0)
		return mu;
	uint32_t rnd = crandom(&m->delay_cor, &m->rng);
	if (!m->table)
		x = (int64_t)(rnd % (uint64_t)(2 * sigma)) + mu - sigma;
	else
		x = table_delay(mu, sigma, m->table[rnd % m->table_n]);
	return x < 0 ? 0 : x;
}

int64_t netem_model_min_delay_ns(const struct netem_model *m)
{
	int64_t mu = m->latency_ns, sigma = m->jitter_ns, x;

	if (m->gap)
		return 0; /* reordering: any packet may be sent at once */
	if (sigma == 0) {
		x = mu;
	} else if (!m->table) {
		x = mu - sigma;
	} else if (m->table_n == 0) {
		x = 0;
	} else {
		int64_t tmin = m->table[0];

		for (size_t i = 1; i < m->table_n; i++)
			if (m->table[i] < tmin)
				tmin = m->table[i];
		x = table_delay(mu, sigma, tmin);
	}
	return x < 0 ? 0 : x;
}

bool netem_model_lose(struct netem_model *m)
{
	if (m->loss_model == LINK_LOSS_GEMODEL) {
		/* Transition, then lose with the new state's probability: the stationary state
		 * distribution is pi_bad = p / (p + r). */
		if (!m->ge_bad) {
			if (netem_model_rng_u32(&m->rng) < m->ge_p)
				m->ge_bad = true;
		} else if (netem_model_rng_u32(&m->rng) < m->ge_r) {
			m->ge_bad = false;
		}
		uint32_t lp = m->ge_bad ? m->ge_1h : m->ge_1k;
		return lp && netem_model_rng_u32(&m->rng) < lp;
	}
	return m->loss && m->loss >= crandom(&m->loss_cor, &m->rng);
}

void netem_model_decide(struct netem_model *m, struct netem_decision *d)
{
	int count = 1;
	memset(d, 0, sizeof *d);
	if (m->dup && m->dup >= crandom(&m->dup_cor, &m->rng))
		count++;
	if (netem_model_lose(m))
		count--;
	if (count == 0) {
		d->drop = true;
		return;
	}
	d->dup = count > 1;
	if (m->corrupt && m->corrupt >= crandom(&m->corrupt_cor, &m->rng))
		d->corrupt = true;
	if (m->gap == 0 || m->counter < m->gap - 1 || m->reorder < crandom(&m->reorder_cor, &m->rng)) {
		d->delay_ns = netem_model_delay_ns(m);
		m->counter++;
	} else {
		d->reordered = true;
		d->delay_ns = 0;
		m->counter = 0;
	}
	if (d->dup)
		d->dup_delay_ns = netem_model_delay_ns(m);
}

double netem_model_dist_sd(enum link_dist dist)
{
	const int16_t *t;
	size_t n;
	if (netem_model_dist_table(dist, NULL, &t, &n) < 0)
		return 1.0 / sqrt(3.0);
	double s = 0, s2 = 0;
	for (size_t i = 0; i < n; i++) {
		s += t[i];
		s2 += (double)t[i] * t[i];
	}
	double mean = s / (double)n;
	return sqrt(s2 / (double)n - mean * mean) / NETEM_MODEL_DIST_SCALE;
}

double netem_model_ge_loss_rate(uint32_t p_ppm, uint32_t r_ppm, uint32_t h1_ppm, uint32_t k1_ppm)
{
	double p = p_ppm / 1e6, r = r_ppm / 1e6;
	if (p + r == 0)
		return k1_ppm / 1e6;
	double pi_bad = p / (p + r);
	return pi_bad * (h1_ppm / 1e6) + (1 - pi_bad) * (k1_ppm / 1e6);
}
