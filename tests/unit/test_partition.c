/* Unit tests for node/partition: invariants checked against a naive recount from the index
 * lists (every sample exactly once, per-node class counts, classes per node), determinism in the
 * seed, the sizes skew against its exact proportions, parameter errors and the CSV file. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/kv.h"
#include "node/data.h"
#include "node/partition.h"
#include "node/rng.h"
#include "tests/support/files.h"

#define NS 2000

static uint8_t labels[NS];

static void make_labels(void)
{
	struct rng r;

	rng_seed(&r, 11, 0);
	/* uneven classes: class c has weight c+1 */
	for (unsigned i = 0; i < NS; i++) {
		uint32_t t = rng_below(&r, 55), c = 0;

		while (t >= c + 1) {
			t -= c + 1;
			c++;
		}
		labels[i] = (uint8_t)c;
	}
}

/* Recount everything from the index lists; asserts each sample at most once, lists ascending,
 * class counts agree. Returns how many samples are assigned. */
static size_t check(const struct partition *p)
{
	uint8_t seen[NS] = { 0 };
	size_t total = 0;

	for (uint32_t k = 0; k < partition_nodes(p); k++) {
		size_t n, cnt[DATA_NCLASSES] = { 0 };
		const uint32_t *idx = partition_indices(p, k, &n);

		for (size_t j = 0; j < n; j++) {
			cr_assert_lt(idx[j], NS);
			cr_assert_eq(seen[idx[j]], 0, "sample %u twice", idx[j]);
			seen[idx[j]] = 1;
			if (j)
				cr_assert_gt(idx[j], idx[j - 1]);
			cnt[labels[idx[j]]]++;
		}
		for (unsigned c = 0; c < DATA_NCLASSES; c++)
			cr_assert_eq(partition_class_count(p, k, c), cnt[c]);
		total += n;
	}
	return total;
}

static int same_split(const struct partition *a, const struct partition *b)
{
	for (uint32_t k = 0; k < partition_nodes(a); k++) {
		size_t na, nb;
		const uint32_t *ia = partition_indices(a, k, &na), *ib = partition_indices(b, k, &nb);

		if (na != nb || memcmp(ia, ib, na * sizeof *ia))
			return 0;
	}
	return 1;
}

static void determinism(struct partition_params *pp)
{
	struct partition *a = NULL, *b = NULL, *c = NULL;

	cr_assert_eq(partition_build(pp, labels, NS, &a), 0);
	cr_assert_eq(partition_build(pp, labels, NS, &b), 0);
	pp->seed++;
	cr_assert_eq(partition_build(pp, labels, NS, &c), 0);
	pp->seed--;
	cr_assert(same_split(a, b), "same seed gave different splits");
	cr_assert(!same_split(a, c), "different seeds gave the same split");
	partition_destroy(&a);
	partition_destroy(&b);
	partition_destroy(&c);
	cr_assert_null(a);
}

TestSuite(partition, .init = make_labels);

Test(partition, iid)
{
	struct partition_params pp = { .scheme = PARTITION_IID, .nodes = 7, .seed = 3 };
	struct partition *p = NULL;
	size_t mn = NS, mx = 0;

	cr_assert_eq(partition_build(&pp, labels, NS, &p), 0);
	cr_assert_eq(check(p), NS);
	for (uint32_t k = 0; k < 7; k++) {
		size_t n;

		partition_indices(p, k, &n);
		mn = n < mn ? n : mn;
		mx = n > mx ? n : mx;
	}
	cr_assert_leq(mx - mn, 1);
	partition_destroy(&p);
	determinism(&pp);
}

Test(partition, classes)
{
	uint32_t node_counts[] = { 5, 7, 10, 20 };

	for (unsigned t = 0; t < 4; t++) {
		for (uint32_t k = 1; k <= 10; k++) {
			struct partition_params pp = { .scheme = PARTITION_CLASSES, .nodes = node_counts[t],
						       .seed = 5, .per_node = k };
			struct partition *p = NULL;

			if (node_counts[t] * k < 10)
				continue;
			cr_assert_eq(partition_build(&pp, labels, NS, &p), 0);
			cr_assert_eq(check(p), NS, "nodes %u per_node %u", node_counts[t], k);
			for (uint32_t nd = 0; nd < pp.nodes; nd++) {
				unsigned have = 0;

				for (unsigned c = 0; c < DATA_NCLASSES; c++)
					have += partition_class_count(p, nd, c) > 0;
				cr_assert_eq(have, k, "node %u holds %u classes, want %u", nd, have, k);
			}
			partition_destroy(&p);
		}
	}
	{
		struct partition_params pp = { .scheme = PARTITION_CLASSES, .nodes = 6, .seed = 5,
					       .per_node = 2 };

		determinism(&pp);
	}
}

Test(partition, classes_too_few_nodes_leaves_classes_unused)
{
	struct partition_params pp = { .scheme = PARTITION_CLASSES, .nodes = 2, .seed = 1, .per_node = 3 };
	struct partition *p = NULL;
	size_t expect = 0;
	unsigned held = 0;

	cr_assert_eq(partition_build(&pp, labels, NS, &p), 0);
	for (unsigned c = 0; c < DATA_NCLASSES; c++) {
		size_t a = partition_class_count(p, 0, c), b = partition_class_count(p, 1, c);

		cr_assert(!(a && b));
		held += a || b;
		expect += a + b;
	}
	cr_assert_eq(held, 6);
	cr_assert_eq(check(p), expect);
	partition_destroy(&p);
}

Test(partition, dirichlet)
{
	double alphas[] = { 0.05, 0.5, 100.0 };

	for (unsigned t = 0; t < 3; t++) {
		struct partition_params pp = { .scheme = PARTITION_DIRICHLET, .nodes = 8, .seed = 9,
					       .alpha = alphas[t] };
		struct partition *p = NULL;
		double spread = 0;

		cr_assert_eq(partition_build(&pp, labels, NS, &p), 0);
		cr_assert_eq(check(p), NS);
		/* mean |share of class c on node k - 1/8| : large for small alpha, ~0 for large */
		for (unsigned c = 0; c < DATA_NCLASSES; c++) {
			size_t tot = 0;

			for (uint32_t k = 0; k < 8; k++)
				tot += partition_class_count(p, k, c);
			for (uint32_t k = 0; k < 8; k++)
				spread += fabs((double)partition_class_count(p, k, c) / tot - 0.125);
		}
		spread /= 80;
		if (alphas[t] < 0.1)
			cr_assert_gt(spread, 0.12, "alpha %g spread %g", alphas[t], spread);
		if (alphas[t] > 10)
			cr_assert_lt(spread, 0.05, "alpha %g spread %g", alphas[t], spread);
		partition_destroy(&p);
		determinism(&pp);
	}
}

Test(partition, sizes)
{
	struct partition_params pp = { .scheme = PARTITION_SIZES, .nodes = 4, .seed = 2, .zipf = 1.0 };
	struct partition *p = NULL;
	double h = 1 + 1 / 2.0 + 1 / 3.0 + 1 / 4.0;

	cr_assert_eq(partition_build(&pp, labels, NS, &p), 0);
	cr_assert_eq(check(p), NS);
	for (uint32_t k = 0; k < 4; k++) {
		size_t n;
		double want = 1 + (NS - 4) * (1.0 / (k + 1)) / h;

		partition_indices(p, k, &n);
		cr_assert(fabs((double)n - want) <= 1.0, "node %u: %zu samples, want %.1f", k, n, want);
	}
	partition_destroy(&p);
	determinism(&pp);

	pp.nfractions = 4;
	pp.fractions[0] = 0.5;
	pp.fractions[1] = 0.25;
	pp.fractions[2] = 0.125;
	pp.fractions[3] = 0.125;
	cr_assert_eq(partition_build(&pp, labels, NS, &p), 0);
	cr_assert_eq(check(p), NS);
	{
		size_t n;

		partition_indices(p, 0, &n);
		cr_assert_eq(n, 1 + (NS - 4) / 2);
		partition_indices(p, 3, &n);
		cr_assert_eq(n, 1 + (NS - 4) / 8 + 0);
	}
	partition_destroy(&p);
}

Test(partition, bad_parameters)
{
	struct partition_params pp = { .scheme = PARTITION_CLASSES, .nodes = 4, .per_node = 11 };
	struct partition *p = NULL;

	cr_assert_eq(partition_build(&pp, labels, NS, &p), -EINVAL);
	pp.per_node = 0;
	cr_assert_eq(partition_build(&pp, labels, NS, &p), -EINVAL);
	pp.scheme = PARTITION_DIRICHLET;
	pp.alpha = 0;
	cr_assert_eq(partition_build(&pp, labels, NS, &p), -EINVAL);
	pp.alpha = -1;
	cr_assert_eq(partition_build(&pp, labels, NS, &p), -EINVAL);
	pp.scheme = PARTITION_IID;
	pp.nodes = NS + 1;
	cr_assert_eq(partition_build(&pp, labels, NS, &p), -EINVAL);
	pp.nodes = 0;
	cr_assert_eq(partition_build(&pp, labels, NS, &p), -EINVAL);
	pp.scheme = PARTITION_SIZES;
	pp.nodes = 3;
	pp.nfractions = 2;
	pp.fractions[0] = pp.fractions[1] = 0.5;
	cr_assert_eq(partition_build(&pp, labels, NS, &p), -EINVAL);
	pp.nfractions = 3;
	pp.fractions[2] = 0;
	cr_assert_eq(partition_build(&pp, labels, NS, &p), -EINVAL);
	cr_assert_null(p);
	/* exactly as many nodes as samples is fine: one each */
	pp.scheme = PARTITION_IID;
	pp.nodes = 10;
	cr_assert_eq(partition_build(&pp, labels, 10, &p), 0);
	partition_destroy(&p);
}

Test(partition, from_kv)
{
	struct kv *cfg = kv_new();
	struct partition_params pp;

	kv_set(cfg, "data.partition.scheme", "sizes");
	kv_set(cfg, "data.partition.sizes", "0.5,0.3, 0.2");
	kv_set(cfg, "run.seed", "77");
	cr_assert_eq(partition_params_from_kv(cfg, 3, &pp), 0);
	cr_assert_eq(pp.scheme, PARTITION_SIZES);
	cr_assert_eq(pp.nodes, 3);
	cr_assert_eq(pp.seed, 77);
	cr_assert_eq(pp.nfractions, 3);
	cr_assert_float_eq(pp.fractions[1], 0.3, 1e-12);
	kv_set(cfg, "data.partition.scheme", "bogus");
	cr_assert_eq(partition_params_from_kv(cfg, 3, &pp), -EINVAL);
	kv_destroy(&cfg);
}

Test(partition, csv)
{
	struct partition_params pp = { .scheme = PARTITION_CLASSES, .nodes = 5, .seed = 1, .per_node = 2 };
	struct partition *p = NULL;
	char path[] = "/tmp/stalenet-part-XXXXXX";
	const char *names[5] = { "worker0", "worker1", "worker2", "worker3", "worker4" };
	char line[128];
	int fd = support_mkstemp(path);
	FILE *f;
	unsigned rows = 0;
	size_t sum = 0;

	close(fd);
	cr_assert_eq(partition_build(&pp, labels, NS, &p), 0);
	cr_assert_eq(partition_write_csv(p, path, names), 0);
	f = fopen(path, "r");
	cr_assert_not_null(fgets(line, sizeof line, f));
	cr_assert_str_eq(line, "node,class,samples\n");
	while (fgets(line, sizeof line, f)) {
		unsigned k, c;
		size_t n;

		cr_assert_eq(sscanf(line, "worker%u,%u,%zu", &k, &c, &n), 3, "row '%s'", line);
		cr_assert_eq(n, partition_class_count(p, k, c));
		sum += n;
		rows++;
	}
	fclose(f);
	cr_assert_eq(rows, 50);
	cr_assert_eq(sum, NS);
	unlink(path);
	partition_destroy(&p);
}
