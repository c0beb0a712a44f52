/* node/eval: accuracy and mean cross-entropy of a model on a data set, callable by any engine.
 *
 * The set is scaled to floats in chunks (EVAL_CHUNK samples), so evaluating the 10k test set
 * never holds more than one chunk of floats. Ensembles evaluate averaged probabilities with
 * eval_probs(). */
#ifndef STALENET_EVAL_H
#define STALENET_EVAL_H

#include <stddef.h>
#include <stdint.h>

struct model;
struct data_set;

#define EVAL_CHUNK 1000

struct eval_result {
	double accuracy;  /* fraction correct, 0..1 */
	double loss;      /* mean cross-entropy (natural log) */
	size_t n;         /* samples evaluated */
};

/* Evaluate m on samples idx[0..n) of ds (positions within ds); idx == NULL means all of ds
 * (n ignored). Returns 0, -EINVAL (a position >= ds->n, input size mismatch) or -ENOMEM. */
int eval_model(struct model *m, const struct data_set *ds, const uint32_t *idx, size_t n,
	       struct eval_result *out);

/* Accuracy and loss of given probabilities (n x nclasses, rows sum to ~1) against labels y.
 * Probabilities are clamped at 1e-12 before the log. Ties go to the lowest class. */
void eval_probs(const float *probs, const uint8_t *y, size_t n, unsigned nclasses,
		struct eval_result *out);

/* Choose k distinct positions out of n (deterministic from seed, ascending) into out (k slots),
 * for the fixed train-loss sample; k > n is clamped to n. Returns the number chosen. */
size_t eval_sample(uint32_t n, size_t k, uint64_t seed, uint32_t *out);

#endif
