/* netem/netem_model: the per-packet decisions of Linux netem, as a pure state machine.
 *
 * The userspace emulator (linkd) asks this model what to do with each packet: drop it, send a
 * duplicate, corrupt it, and when to release it. The arithmetic follows net/sched/sch_netem.c so
 * that the two backends agree: probabilities are 32-bit fractions of UINT32_MAX compared against
 * a correlated uniform (get_crandom), jitter comes from the same 4096-entry int16 tables scaled by
 * NETEM_DIST_SCALE = 8192, reorder sends every gap-th packet (with probability reorder) at once.
 * No I/O except netem_model_dist_table, no clock: the caller passes times. */
#ifndef STALENET_NETEM_MODEL_H
#define STALENET_NETEM_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/link_params.h"

#define NETEM_MODEL_DIST_SCALE 8192
#define NETEM_MODEL_DIST_SIZE 4096

/* ppm (0..1e6) -> 0..UINT32_MAX, rounded, as tc's set_percent does for percentages. */
uint32_t netem_model_scale_ppm(uint32_t ppm);

/* The jitter table of dist: read from iproute2's DIR/<name>.dist (dir NULL = the usual tc
 * directories) when present, else generated. *table is static storage (do not free); *n its size.
 * Returns 0, or -ENOENT for LINK_DIST_NONE/UNIFORM (no table: uniform jitter). */
int netem_model_dist_table(enum link_dist dist, const char *dir, const int16_t **table, size_t *n);

/* Generate the table for dist into out[NETEM_MODEL_DIST_SIZE] by the project's own code (normal:
 * inverse CDF; pareto alpha 3 and 25/75 normal+pareto mix: sorted sample quantiles, standardised).
 * Returns 0 or -EINVAL. */
int netem_model_dist_generate(enum link_dist dist, int16_t *out);

/* A small, fast PRNG (xoshiro128**), seeded deterministically. */
struct netem_rng {
	uint32_t s[4];
};
void netem_model_rng_seed(struct netem_rng *rng, uint64_t seed);
uint32_t netem_model_rng_u32(struct netem_rng *rng);

/* A correlated uniform stream (netem's crndstate). */
struct netem_crnd {
	uint32_t last;
	uint32_t rho;
};

struct netem_decision {
	bool drop;            /* issue NF_DROP now (no copy survives) */
	bool dup;             /* deliver one extra copy (independent delay) */
	bool corrupt;         /* flip one payload bit */
	bool reordered;       /* sent at once, ahead of the delayed packets */
	int64_t delay_ns;     /* release after this long (>= 0) */
	int64_t dup_delay_ns; /* the copy's delay when dup */
};

struct netem_model {
	struct netem_rng rng;
	int64_t latency_ns, jitter_ns;
	uint32_t loss, dup, reorder, corrupt;   /* scaled probabilities */
	struct netem_crnd delay_cor, loss_cor, dup_cor, reorder_cor, corrupt_cor;
	enum link_loss_model loss_model;
	uint32_t ge_p, ge_r, ge_1h, ge_1k;
	bool ge_bad;
	uint32_t gap, counter;
	const int16_t *table;   /* NULL: uniform jitter */
	size_t table_n;
};

/* (Re)configure m from p; keeps the RNG and the Gilbert-Elliott/reorder state when reconfiguring
 * in place (seed is used only when fresh is true). Returns 0, or -EINVAL when p is invalid. */
int netem_model_configure(struct netem_model *m, const struct link_params *p, uint64_t seed, bool fresh);

/* Decide the fate of the next packet. */
void netem_model_decide(struct netem_model *m, struct netem_decision *d);

/* Only the loss decision of the next packet (random, correlated or Gilbert-Elliott, advancing
 * the same state netem_model_decide does): for the further wire segments of one offloaded packet,
 * which share its delay. True = lost. */
bool netem_model_lose(struct netem_model *m);

/* One jitter-distributed delay sample in ns (netem's tabledist), clamped at 0. */
int64_t netem_model_delay_ns(struct netem_model *m);

/* A lower bound, in ns, of the delay any packet netem_model_decide lets through can get from m as
 * configured (its duplicates included): the smallest delay the jitter can draw (latency less the
 * uniform half-width, or the table's most negative entry scaled as netem_model_delay_ns does),
 * clamped at 0; 0 when reordering is on (a reordered packet goes at once). Pure. */
int64_t netem_model_min_delay_ns(const struct netem_model *m);

/* Standard deviation of the delay in units of jitter for dist: 1/sqrt(3) for uniform, the
 * table's own sd otherwise (iproute2's pareto table has sd ~0.82, its normal ~1.0). */
double netem_model_dist_sd(enum link_dist dist);

/* Long-run loss fraction of a Gilbert-Elliott chain with these ppm parameters (analytic). */
double netem_model_ge_loss_rate(uint32_t p_ppm, uint32_t r_ppm, uint32_t h1_ppm, uint32_t k1_ppm);

#endif
