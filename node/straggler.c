/* node/straggler: see straggler.h. Draws use node/rng (xoshiro256**), so every worker's delays
 * are a pure function of its seed; a restarted worker with the same seed replays them. */
#include "node/straggler.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/kv.h"
#include "lib/log.h"
#include "node/rng.h"

struct straggler {
	struct straggler_params p;
	struct rng rng;
	double *trace_s;
	size_t ntrace;
};

static const char *const dist_names[] = { "none", "constant", "uniform", "exponential",
					  "gamma", "normal", "pareto" };

int straggler_dist_parse(const char *name, enum straggler_dist *out)
{
	if (!name)
		return -EINVAL;
	for (size_t i = 0; i < sizeof dist_names / sizeof dist_names[0]; i++) {
		if (!strcmp(name, dist_names[i])) {
			*out = (enum straggler_dist)i;
			return 0;
		}
	}
	return -EINVAL;
}

static int check_params(const struct straggler_params *p)
{
	if (!(p->slowdown >= 1.0)) {
		log_error("straggler.slowdown must be >= 1 (got %g)", p->slowdown);
		return -EINVAL;
	}
	if (p->pause_every_s < 0 || p->pause_for_s < 0 ||
	    (p->pause_every_s > 0 && p->pause_for_s >= p->pause_every_s)) {
		log_error("straggler.pause: need 0 <= for < every (every %g, for %g)", p->pause_every_s,
			  p->pause_for_s);
		return -EINVAL;
	}
	switch (p->dist) {
	case STRAGGLER_NONE:
		return 0;
	case STRAGGLER_CONSTANT:
	case STRAGGLER_EXPONENTIAL:
		if (p->a < 0)
			goto bad;
		return 0;
	case STRAGGLER_UNIFORM:
		if (p->a < 0 || p->b < p->a)
			goto bad;
		return 0;
	case STRAGGLER_GAMMA:
	case STRAGGLER_PARETO:
		if (!(p->a > 0) || !(p->b > 0))
			goto bad;
		return 0;
	case STRAGGLER_NORMAL:
		if (p->b < 0)
			goto bad;
		return 0;
	}
bad:
	log_error("straggler.delay: bad parameters for %s (a %g, b %g)", dist_names[p->dist], p->a, p->b);
	return -EINVAL;
}

int straggler_params_from_kv(const struct kv *cfg, struct straggler_params *p)
{
	const char *d = kv_get(cfg, "straggler.delay.dist");

	memset(p, 0, sizeof *p);
	if (kv_get_double(cfg, "straggler.slowdown", 1.0, &p->slowdown) < 0 ||
	    kv_get_double(cfg, "straggler.delay.a", 0.0, &p->a) < 0 ||
	    kv_get_double(cfg, "straggler.delay.b", 0.0, &p->b) < 0 ||
	    kv_get_double(cfg, "straggler.pause.every", 0.0, &p->pause_every_s) < 0 ||
	    kv_get_double(cfg, "straggler.pause.for", 0.0, &p->pause_for_s) < 0)
		return -EINVAL;
	if (d && *d && straggler_dist_parse(d, &p->dist) < 0) {
		log_error("straggler.delay.dist: unknown distribution '%s'", d);
		return -EINVAL;
	}
	p->trace = kv_get(cfg, "straggler.trace");
	if (p->trace && !*p->trace)
		p->trace = NULL;
	return check_params(p);
}

/* Read the last comma-separated field of every row as seconds. */
static int load_trace(struct straggler *s, const char *path)
{
	FILE *f = fopen(path, "re");
	char line[1024];
	size_t cap = 0, lineno = 0;
	int rc = -EINVAL;

	if (!f) {
		rc = -errno;
		log_error("straggler.trace: open %s: %s", path, strerror(errno));
		return rc;
	}
	while (fgets(line, sizeof line, f)) {
		char *field = strrchr(line, ','), *end;
		double v;

		lineno++;
		field = field ? field + 1 : line;
		v = strtod(field, &end);
		while (*end == ' ' || *end == '\r' || *end == '\n' || *end == '\t')
			end++;
		if (end == field || *end) {
			if (lineno == 1)
				continue; /* header */
			if (line[strspn(line, " \t\r\n")] == '\0')
				continue; /* blank */
			log_error("straggler.trace: %s:%zu: not a number of seconds", path, lineno);
			goto out;
		}
		if (!(v >= 0) || !isfinite(v)) {
			log_error("straggler.trace: %s:%zu: negative or non-finite time", path, lineno);
			goto out;
		}
		if (s->ntrace == cap) {
			double *n = realloc(s->trace_s, (cap ? cap * 2 : 64) * sizeof *n);

			if (!n) {
				rc = -ENOMEM;
				goto out;
			}
			s->trace_s = n;
			cap = cap ? cap * 2 : 64;
		}
		s->trace_s[s->ntrace++] = v;
	}
	if (s->ntrace == 0) {
		log_error("straggler.trace: %s: no rows", path);
		goto out;
	}
	rc = 0;
out:
	fclose(f);
	return rc;
}

uint64_t straggler_seed(uint64_t run_seed, uint32_t index)
{
	return run_seed ^ (0x9e3779b97f4a7c15ull * ((uint64_t)index + 1));
}

struct straggler *straggler_new(const struct straggler_params *p, uint64_t seed)
{
	struct straggler *s = NULL;

	if (check_params(p) < 0)
		return NULL;
	s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->p = *p;
	s->p.trace = NULL;
	straggler_stream_seed(&s->rng, seed);
	if (p->trace && load_trace(s, p->trace) < 0)
		straggler_destroy(&s);
	return s;
}

void straggler_stream_seed(struct rng *r, uint64_t seed)
{
	rng_seed(r, seed, 0x5742a99e); /* a stream of its own, apart from data shuffles */
}

void straggler_destroy(struct straggler **self)
{
	if (!self || !*self)
		return;
	free((*self)->trace_s);
	free(*self);
	*self = NULL;
}

double straggler_dist_draw(enum straggler_dist dist, double a, double b, struct rng *r)
{
	double u, v;

	switch (dist) {
	case STRAGGLER_CONSTANT:
		return a;
	case STRAGGLER_UNIFORM:
		return a + (b - a) * rng_uniform(r);
	case STRAGGLER_EXPONENTIAL:
		return -a * log1p(-rng_uniform(r));
	case STRAGGLER_GAMMA:
		return b * rng_gamma(r, a);
	case STRAGGLER_NORMAL:
		v = a + b * rng_normal(r);
		return v > 0 ? v : 0;
	case STRAGGLER_PARETO:
		/* Inverse CDF: x_m / U^(1/alpha), U in (0, 1]. */
		u = 1.0 - rng_uniform(r);
		return a / pow(u, 1.0 / b);
	case STRAGGLER_NONE:
	default:
		return 0;
	}
}

double straggler_delay_s(struct straggler *self)
{
	return straggler_dist_draw(self->p.dist, self->p.a, self->p.b, &self->rng);
}

double straggler_step_extra_s(struct straggler *self, int64_t step, double compute_s)
{
	double extra = 0, c = compute_s > 0 ? compute_s : 0;

	if (self->ntrace > 0) {
		double want = self->trace_s[(size_t)(step < 0 ? 0 : step) % self->ntrace];

		if (want > c)
			extra += want - c;
		c = c > want ? c : want;
	}
	extra += (self->p.slowdown - 1.0) * c;
	extra += straggler_delay_s(self);
	return extra > 0 ? extra : 0;
}

double straggler_pause_left_s(const struct straggler *self, double t_s)
{
	double every = self->p.pause_every_s, ph;

	if (every <= 0 || self->p.pause_for_s <= 0 || t_s < every)
		return 0;
	ph = fmod(t_s, every);
	return ph < self->p.pause_for_s ? self->p.pause_for_s - ph : 0;
}

size_t straggler_trace_len(const struct straggler *self)
{
	return self->ntrace;
}

int straggler_active(const struct straggler *self)
{
	return self->p.slowdown > 1.0 || self->p.dist != STRAGGLER_NONE || self->ntrace > 0 ||
	       (self->p.pause_every_s > 0 && self->p.pause_for_s > 0);
}
