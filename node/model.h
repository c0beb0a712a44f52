/* node/model: the classifiers every engine trains: softmax regression, MLP (ReLU hidden layers
 * of any sizes), and a small CNN (conv 5x5 -> ReLU -> 2x2 max-pool -> dense ReLU layers ->
 * dense). Loss: softmax cross-entropy, mean over the minibatch.
 *
 * All parameters live in ONE contiguous float32 vector (model_params), so engines ship, average
 * and apply it as a flat array. Layout, layer by layer in forward order: weights then bias;
 * a dense layer's weights are out x in row-major (W[o*in + i]); the conv layer's weights are
 * channels x (k*k) row-major (filter c, tap dy*k+dx). Every matrix product is cblas_sgemm
 * (the conv through im2col); BLAS threads are set explicitly with model_blas_threads().
 * Initialisation is deterministic from the seed (He-uniform weights, zero biases).
 * A model object also holds the scratch buffers of forward/backward, grown to the largest batch
 * seen, so one model must not be used from two threads at once. */
#ifndef STALENET_MODEL_H
#define STALENET_MODEL_H

#include <stddef.h>
#include <stdint.h>

struct kv;

enum model_kind { MODEL_SOFTMAX, MODEL_MLP, MODEL_CNN };

#define MODEL_MAX_HIDDEN 8

struct model_spec {
	enum model_kind kind;
	uint32_t rows, cols;        /* input image size (28 x 28) */
	uint32_t nclasses;          /* 10 */
	uint32_t nhidden;           /* mlp/cnn: number of hidden dense layers */
	uint32_t hidden[MODEL_MAX_HIDDEN];
	uint32_t channels;          /* cnn: conv filters (default 32) */
	uint32_t kernel;            /* cnn: conv kernel size (default 5) */
};

struct model;

/* Parse "softmax" | "mlp" | "cnn". Returns 0 or -EINVAL. */
int model_kind_parse(const char *name, enum model_kind *out);
const char *model_kind_name(enum model_kind kind);

/* Fill spec from model.kind, model.hidden (comma list), model.channels, model.kernel; input
 * 28x28, 10 classes. Defaults: mlp, hidden 256 for mlp and 128 for cnn (softmax: none),
 * channels 32, kernel 5. Returns 0 or -EINVAL (logged). */
int model_spec_from_kv(const struct kv *cfg, struct model_spec *spec);

/* A new model with parameters initialised from seed. NULL (logged) on a bad spec or no memory. */
struct model *model_new(const struct model_spec *spec, uint64_t seed);
void model_destroy(struct model **self);

const struct model_spec *model_get_spec(const struct model *self);

/* Length of the parameter vector. */
size_t model_nparams(const struct model *self);

/* The parameter vector (model_nparams floats), owned by self; callers may read and write it. */
float *model_params(struct model *self);

/* Replace all parameters by a copy of params (model_nparams floats). */
void model_set_params(struct model *self, const float *params);

/* Input size of one sample (rows * cols). */
size_t model_input_dim(const struct model *self);

/* Gradient of the mean cross-entropy over the minibatch x (n x input_dim, row-major, scaled
 * floats), y (n labels) at the current parameters, written to grad (model_nparams floats,
 * overwritten; no weight decay - that is the optimiser's job). *loss gets the mean loss.
 * Returns 0, -EINVAL (n == 0, label out of range), -ENOMEM. */
int model_gradient(struct model *self, const float *x, const uint8_t *y, size_t n, float *grad,
		   double *loss);

/* Class probabilities for x (n x input_dim) into probs (n x nclasses). Returns 0 or -ENOMEM. */
int model_predict(struct model *self, const float *x, size_t n, float *probs);

/* Offset and length (in floats) of layer l's weights and bias inside the parameter vector;
 * l counts parametrised layers (conv, then dense) from 0. Returns 0 or -ENOENT. */
int model_layer_view(const struct model *self, unsigned l, size_t *w_off, size_t *w_len,
		     size_t *b_off, size_t *b_len);

/* Number of parametrised layers. */
unsigned model_nlayers(const struct model *self);

/* Set the OpenBLAS thread count of this process (n >= 1). Call once at start; the default
 * applied by model_new when never called is 1. */
void model_blas_threads(int n);

#endif
