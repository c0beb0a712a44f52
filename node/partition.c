/* node/partition: see partition.h. Every random choice comes from node/rng seeded with
 * (seed, a fixed stream per purpose), so the split depends on nothing but the parameters and
 * the labels. Samples of each class are taken in a seed-shuffled order, then each node's list is
 * sorted ascending. */
#include "node/partition.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/csv.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "node/data.h"
#include "node/rng.h"

enum { STREAM_SHUFFLE = 1, STREAM_CLASSES = 2, STREAM_DIRICHLET = 3 };

struct partition {
	uint32_t nodes;
	uint32_t *idx;      /* all assigned indices, node by node */
	size_t *start;      /* nodes + 1 offsets into idx */
	size_t *counts;     /* nodes * DATA_NCLASSES */
};

static const char *const scheme_names[] = { "iid", "classes", "dirichlet", "sizes" };

int partition_scheme_parse(const char *name, enum partition_scheme *out)
{
	for (unsigned i = 0; i < sizeof scheme_names / sizeof scheme_names[0]; i++) {
		if (name && strcmp(name, scheme_names[i]) == 0) {
			*out = (enum partition_scheme)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *partition_scheme_name(enum partition_scheme scheme)
{
	return (unsigned)scheme < 4 ? scheme_names[scheme] : "?";
}

int partition_params_from_kv(const struct kv *cfg, uint32_t nodes, struct partition_params *p)
{
	const char *s;
	int64_t seed, per_node;
	int rc = 0;

	memset(p, 0, sizeof *p);
	p->nodes = nodes;
	s = kv_get(cfg, "data.partition.scheme");
	if (s && *s && partition_scheme_parse(s, &p->scheme)) {
		log_error("data.partition.scheme: unknown scheme '%s' (iid|classes|dirichlet|sizes)", s);
		return -EINVAL;
	}
	rc = kv_get_u64(cfg, "run.seed", 1, (uint64_t *)&seed);
	rc = rc ? rc : kv_get_i64(cfg, "data.partition.per_node", 2, &per_node);
	rc = rc ? rc : kv_get_double(cfg, "data.partition.alpha", 0.5, &p->alpha);
	rc = rc ? rc : kv_get_double(cfg, "data.partition.zipf", 1.0, &p->zipf);
	if (rc)
		return rc;
	if (per_node < 0 || per_node > 1000) {
		log_error("data.partition.per_node: %lld out of range", (long long)per_node);
		return -EINVAL;
	}
	p->seed = (uint64_t)seed;
	p->per_node = (uint32_t)per_node;
	s = kv_get(cfg, "data.partition.sizes");
	if (s && *s) {
		const char *c = s;

		while (*c) {
			char *end;
			double v = strtod(c, &end);

			if (end == c || p->nfractions == PARTITION_MAX_FRACTIONS) {
				log_error("data.partition.sizes: bad list '%s'", s);
				return -EINVAL;
			}
			p->fractions[p->nfractions++] = v;
			c = end;
			while (*c == ' ' || *c == ',')
				c++;
		}
	}
	return 0;
}

static int check_params(const struct partition_params *p, uint32_t n)
{
	if (p->nodes == 0) {
		log_error("partition: zero nodes");
		return -EINVAL;
	}
	if (p->nodes > n) {
		log_error("partition: %u nodes but only %u samples", p->nodes, n);
		return -EINVAL;
	}
	switch (p->scheme) {
	case PARTITION_IID:
		return 0;
	case PARTITION_CLASSES:
		if (p->per_node < 1 || p->per_node > DATA_NCLASSES) {
			log_error("partition classes: per_node %u must be in 1..%d", p->per_node,
				  DATA_NCLASSES);
			return -EINVAL;
		}
		return 0;
	case PARTITION_DIRICHLET:
		if (!(p->alpha > 0.0) || !isfinite(p->alpha)) {
			log_error("partition dirichlet: alpha %g must be > 0", p->alpha);
			return -EINVAL;
		}
		return 0;
	case PARTITION_SIZES:
		if (p->nfractions == 0) {
			if (!(p->zipf >= 0.0) || !isfinite(p->zipf)) {
				log_error("partition sizes: zipf %g must be >= 0", p->zipf);
				return -EINVAL;
			}
			return 0;
		}
		if (p->nfractions != p->nodes) {
			log_error("partition sizes: %zu fractions for %u nodes", p->nfractions, p->nodes);
			return -EINVAL;
		}
		for (size_t i = 0; i < p->nfractions; i++) {
			if (!(p->fractions[i] > 0.0) || !isfinite(p->fractions[i])) {
				log_error("partition sizes: fraction %zu = %g must be > 0", i,
					  p->fractions[i]);
				return -EINVAL;
			}
		}
		return 0;
	}
	log_error("partition: unknown scheme %d", (int)p->scheme);
	return -EINVAL;
}

/* Split total items into k integer parts proportional to w (sum of parts == total): floor of the
 * exact share, then the remainders go to the largest fractional parts (ties: lowest index). */
static void apportion(const double *w, uint32_t k, size_t total, size_t *parts, double *frac)
{
	double sum = 0.0;
	size_t given = 0;

	for (uint32_t i = 0; i < k; i++)
		sum += w[i];
	for (uint32_t i = 0; i < k; i++) {
		double exact = sum > 0 ? (double)total * w[i] / sum : (double)total / k;

		parts[i] = (size_t)floor(exact);
		frac[i] = exact - (double)parts[i];
		given += parts[i];
	}
	while (given < total) {
		uint32_t best = 0;

		for (uint32_t i = 1; i < k; i++)
			if (frac[i] > frac[best])
				best = i;
		parts[best]++;
		frac[best] = -1.0;
		given++;
	}
}


void partition_destroy(struct partition **self)
{
	if (!self || !*self)
		return;
	free((*self)->idx);
	free((*self)->start);
	free((*self)->counts);
	free(*self);
	*self = NULL;
}

int partition_build(const struct partition_params *p, const uint8_t *labels, uint32_t n,
		    struct partition **out)
{
	struct partition *pt = NULL;
	uint32_t *byclass[DATA_NCLASSES] = { 0 };
	size_t ncls[DATA_NCLASSES] = { 0 };
	uint32_t *owner = NULL;     /* node of each sample, UINT32_MAX = unused */
	size_t *parts = NULL;
	double *w = NULL, *frac = NULL;
	uint32_t nodes;
	struct rng r;
	int rc;

	*out = NULL;
	rc = check_params(p, n);
	if (rc)
		return rc;
	nodes = p->nodes;
	rc = -ENOMEM;
	owner = malloc((size_t)n * sizeof *owner);
	parts = calloc(nodes, sizeof *parts);
	w = calloc(nodes, sizeof *w);
	frac = calloc(nodes, sizeof *frac);
	pt = calloc(1, sizeof *pt);
	if (!owner || !parts || !w || !frac || !pt)
		goto out;
	pt->nodes = nodes;
	pt->start = calloc((size_t)nodes + 1, sizeof *pt->start);
	pt->counts = calloc((size_t)nodes * DATA_NCLASSES, sizeof *pt->counts);
	if (!pt->start || !pt->counts)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		owner[i] = UINT32_MAX;
		if (labels[i] >= DATA_NCLASSES) {
			log_error("partition: label %u of sample %u out of range", labels[i], i);
			rc = -EINVAL;
			goto out;
		}
		ncls[labels[i]]++;
	}
	for (unsigned c = 0; c < DATA_NCLASSES; c++) {
		byclass[c] = malloc((ncls[c] + 1) * sizeof *byclass[c]);
		if (!byclass[c])
			goto out;
		ncls[c] = 0;
	}
	for (uint32_t i = 0; i < n; i++)
		byclass[labels[i]][ncls[labels[i]]++] = i;
	rng_seed(&r, p->seed, STREAM_SHUFFLE);
	for (unsigned c = 0; c < DATA_NCLASSES; c++)
		rng_shuffle_u32(&r, byclass[c], ncls[c]);

	if (p->scheme == PARTITION_IID || p->scheme == PARTITION_SIZES) {
		/* One shuffled order of all samples, cut into consecutive pieces. */
		uint32_t *all = malloc((size_t)n * sizeof *all);
		size_t pos = 0;

		if (!all)
			goto out;
		for (uint32_t i = 0; i < n; i++)
			all[i] = i;
		rng_shuffle_u32(&r, all, n);
		for (uint32_t k = 0; k < nodes; k++) {
			if (p->scheme == PARTITION_IID)
				w[k] = 1.0;
			else if (p->nfractions)
				w[k] = p->fractions[k];
			else
				w[k] = pow((double)k + 1.0, -p->zipf);
		}
		/* Every node gets at least one sample: apportion the rest. */
		apportion(w, nodes, n - nodes, parts, frac);
		for (uint32_t k = 0; k < nodes; k++)
			for (size_t j = 0; j < parts[k] + 1; j++)
				owner[all[pos++]] = k;
		free(all);
	} else if (p->scheme == PARTITION_CLASSES) {
		/* Classes in a seed-shuffled order, dealt k at a time round the nodes, so with
		 * nodes * k >= 10 every class has a holder and holders differ by at most one. */
		uint32_t order[DATA_NCLASSES];
		uint32_t holders[DATA_NCLASSES] = { 0 };
		uint8_t holds[DATA_NCLASSES];
		struct rng rc2;
		unsigned missing = 0;

		rng_seed(&rc2, p->seed, STREAM_CLASSES);
		for (unsigned c = 0; c < DATA_NCLASSES; c++)
			order[c] = c;
		rng_shuffle_u32(&rc2, order, DATA_NCLASSES);
		for (uint32_t k = 0; k < nodes; k++)
			for (uint32_t j = 0; j < p->per_node; j++)
				holders[order[((size_t)k * p->per_node + j) % DATA_NCLASSES]]++;
		for (unsigned c = 0; c < DATA_NCLASSES; c++)
			if (!holders[c] && ncls[c])
				missing++;
		if (missing)
			log_warn("partition classes: %u nodes x %u classes leave %u classes unused",
				 nodes, p->per_node, missing);
		/* Each class is split evenly among its holders, in node order. */
		for (unsigned c = 0; c < DATA_NCLASSES; c++) {
			uint32_t h = 0;
			size_t pos = 0;

			if (!holders[c])
				continue;
			for (uint32_t k = 0; k < nodes; k++) {
				memset(holds, 0, sizeof holds);
				for (uint32_t j = 0; j < p->per_node; j++)
					holds[order[((size_t)k * p->per_node + j) % DATA_NCLASSES]] = 1;
				if (!holds[c])
					continue;
				{
					size_t share = ncls[c] / holders[c] + (h < ncls[c] % holders[c]);

					for (size_t j = 0; j < share; j++)
						owner[byclass[c][pos++]] = k;
				}
				h++;
			}
		}
	} else {
		/* Dirichlet: per class, shares ~ Dir(alpha). Redraw (a bounded number of times)
		 * while some node would get no sample at all: an empty worker cannot train. */
		struct rng rd;
		size_t *cnt = calloc(nodes, sizeof *cnt);
		size_t *cparts = calloc((size_t)nodes * DATA_NCLASSES, sizeof *cparts);
		int attempt;

		if (!cnt || !cparts) {
			free(cnt);
			free(cparts);
			goto out;
		}
		rng_seed(&rd, p->seed, STREAM_DIRICHLET);
		for (attempt = 0; attempt < 100; attempt++) {
			int empty = 0;

			memset(cnt, 0, nodes * sizeof *cnt);
			for (unsigned c = 0; c < DATA_NCLASSES; c++) {
				for (uint32_t k = 0; k < nodes; k++)
					w[k] = rng_gamma(&rd, p->alpha);
				apportion(w, nodes, ncls[c], cparts + (size_t)c * nodes, frac);
				for (uint32_t k = 0; k < nodes; k++)
					cnt[k] += cparts[(size_t)c * nodes + k];
			}
			for (uint32_t k = 0; k < nodes; k++)
				empty += cnt[k] == 0;
			if (!empty)
				break;
		}
		if (attempt == 100)
			log_warn("partition dirichlet: alpha %g leaves some of %u nodes empty", p->alpha,
				 nodes);
		for (unsigned c = 0; c < DATA_NCLASSES; c++) {
			size_t pos = 0;

			for (uint32_t k = 0; k < nodes; k++)
				for (size_t j = 0; j < cparts[(size_t)c * nodes + k]; j++)
					owner[byclass[c][pos++]] = k;
		}
		free(cnt);
		free(cparts);
	}

	/* Gather: counting sort by owner keeps indices ascending within each node. */
	{
		size_t total = 0;
		size_t *fill;

		for (uint32_t i = 0; i < n; i++) {
			if (owner[i] == UINT32_MAX)
				continue;
			pt->start[owner[i] + 1]++;
			pt->counts[(size_t)owner[i] * DATA_NCLASSES + labels[i]]++;
			total++;
		}
		for (uint32_t k = 0; k < nodes; k++)
			pt->start[k + 1] += pt->start[k];
		pt->idx = malloc((total + 1) * sizeof *pt->idx);
		fill = parts; /* reuse: nodes slots */
		if (!pt->idx)
			goto out;
		for (uint32_t k = 0; k < nodes; k++)
			fill[k] = pt->start[k];
		for (uint32_t i = 0; i < n; i++)
			if (owner[i] != UINT32_MAX)
				pt->idx[fill[owner[i]]++] = i;
	}
	*out = pt;
	pt = NULL;
	rc = 0;
out:
	for (unsigned c = 0; c < DATA_NCLASSES; c++)
		free(byclass[c]);
	free(owner);
	free(parts);
	free(w);
	free(frac);
	partition_destroy(&pt);
	return rc;
}

uint32_t partition_nodes(const struct partition *self)
{
	return self->nodes;
}

const uint32_t *partition_indices(const struct partition *self, uint32_t node, size_t *n)
{
	if (node >= self->nodes) {
		*n = 0;
		return NULL;
	}
	*n = self->start[node + 1] - self->start[node];
	return self->idx + self->start[node];
}

size_t partition_class_count(const struct partition *self, uint32_t node, unsigned cls)
{
	if (node >= self->nodes || cls >= DATA_NCLASSES)
		return 0;
	return self->counts[(size_t)node * DATA_NCLASSES + cls];
}

int partition_write_csv(const struct partition *self, const char *path, const char *const *names)
{
	struct csv_writer *w = csv_writer_open(path, "node,class,samples");
	int rc = 0;

	if (!w)
		return -EIO;
	for (uint32_t k = 0; k < self->nodes && !rc; k++)
		for (unsigned c = 0; c < DATA_NCLASSES && !rc; c++)
			rc = names ? csv_writer_row(w, "%s,%u,%zu", names[k], c,
						    self->counts[(size_t)k * DATA_NCLASSES + c])
				   : csv_writer_row(w, "%u,%u,%zu", k, c,
						    self->counts[(size_t)k * DATA_NCLASSES + c]);
	csv_writer_close(&w);
	return rc;
}
