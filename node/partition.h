/* node/partition: deterministic split of a training set across nodes.
 *
 * The split is a pure function of (labels, seed, nodes, scheme parameters): every node computes
 * the same partition from the label file alone and keeps only its own indices, so no node ever
 * ships data to another. Schemes:
 *   iid        shuffle, deal round-robin (sizes differ by at most one);
 *   classes    each node sees only per_node of the 10 classes; a class shared by several nodes
 *              is split evenly among them (McMahan et al. 2017, "pathological non-IID");
 *   dirichlet  for each class, node shares ~ Dir(alpha) (Hsu et al. 2019); small alpha = skew;
 *   sizes      iid content, skewed sizes: fraction of node i proportional to 1/(i+1)^zipf, or
 *              an explicit list of fractions (normalised).
 * Every sample goes to exactly one node for every scheme, except `classes` when
 * nodes * per_node < 10: classes no node holds are then unused (logged as a warning).
 * Index lists are sorted ascending, the order data_load() wants. */
#ifndef STALENET_PARTITION_H
#define STALENET_PARTITION_H

#include <stddef.h>
#include <stdint.h>

struct kv;

enum partition_scheme { PARTITION_IID, PARTITION_CLASSES, PARTITION_DIRICHLET, PARTITION_SIZES };

#define PARTITION_MAX_FRACTIONS 1024

struct partition_params {
	enum partition_scheme scheme;
	uint32_t nodes;
	uint64_t seed;
	uint32_t per_node;      /* classes: classes per node, 1..10 */
	double alpha;           /* dirichlet: concentration, > 0 */
	double zipf;            /* sizes: zipf exponent s >= 0 (used when nfractions == 0) */
	size_t nfractions;      /* sizes: explicit fractions, one per node (0 = use zipf) */
	double fractions[PARTITION_MAX_FRACTIONS];
};

struct partition;

/* Parse a scheme name ("iid", "classes", "dirichlet", "sizes"). Returns 0 or -EINVAL. */
int partition_scheme_parse(const char *name, enum partition_scheme *out);
const char *partition_scheme_name(enum partition_scheme scheme);

/* Fill p from node config keys data.partition.{scheme,per_node,alpha,zipf,sizes} and run.seed,
 * with nodes given by the caller (workers.count for workers; 1 for the centralized trainer).
 * Defaults: iid, per_node 2, alpha 0.5, zipf 1. Returns 0 or -EINVAL (logged). */
int partition_params_from_kv(const struct kv *cfg, uint32_t nodes, struct partition_params *p);

/* Split n samples with the given labels. Returns 0 and *out, or -EINVAL with the reason logged
 * (per_node outside 1..10, alpha <= 0, zipf < 0, fraction count != nodes or fraction <= 0,
 * nodes == 0, more nodes than samples), -ENOMEM. */
int partition_build(const struct partition_params *p, const uint8_t *labels, uint32_t n,
		    struct partition **out);

void partition_destroy(struct partition **self);

uint32_t partition_nodes(const struct partition *self);

/* The ascending file indices of node's samples; *n gets their count. Owned by self. */
const uint32_t *partition_indices(const struct partition *self, uint32_t node, size_t *n);

/* Number of node's samples with label cls. */
size_t partition_class_count(const struct partition *self, uint32_t node, unsigned cls);

/* Write path as CSV "node,class,samples" (one row per node and class, zeros included). The node
 * column is names[node] (e.g. the workers.names list); names NULL gives the bare index.
 * Returns 0 or negative errno. */
int partition_write_csv(const struct partition *self, const char *path, const char *const *names);

#endif
