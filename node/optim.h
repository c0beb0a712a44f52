/* node/optim: SGD with momentum, weight decay and a learning-rate schedule, applied to a flat
 * parameter vector (model_params).
 *
 * Update, per element (PyTorch's convention, so lr can change without rescaling v):
 *   g' = g + weight_decay * w;  v = momentum * v + g';  w -= lr(t) * v
 * Schedules, with t the number of updates applied so far:
 *   constant  lr(t) = lr
 *   step      lr(t) = lr * step_gamma^floor(t / step_every)
 *   inverse   lr(t) = lr / (1 + decay * t) */
#ifndef STALENET_OPTIM_H
#define STALENET_OPTIM_H

#include <stddef.h>
#include <stdint.h>

struct kv;

enum optim_schedule { OPTIM_LR_CONSTANT, OPTIM_LR_STEP, OPTIM_LR_INVERSE };

struct optim_params {
	double lr;
	double momentum;        /* 0 = plain SGD */
	double weight_decay;    /* L2 coefficient */
	enum optim_schedule schedule;
	uint64_t step_every;    /* step: updates between decays */
	double step_gamma;      /* step: factor per decay */
	double decay;           /* inverse: decay per update */
};

struct optim;

/* Fill p from train.lr, train.momentum, train.weight_decay, train.lr_schedule
 * (constant|step|inverse), train.lr_step_every, train.lr_step_gamma, train.lr_decay.
 * Defaults: lr 0.05, momentum 0.9, weight_decay 0, constant, every 1000, gamma 0.5, decay 1e-4.
 * Returns 0 or -EINVAL (logged). */
int optim_params_from_kv(const struct kv *cfg, struct optim_params *p);

/* Learning rate after t updates. */
double optim_lr_at(const struct optim_params *p, uint64_t t);

/* An optimiser for vectors of n floats (momentum buffer zeroed). NULL on bad params / no memory. */
struct optim *optim_new(size_t n, const struct optim_params *p);
void optim_destroy(struct optim **self);

/* Apply one update with grad to params (both n floats); advances t. */
void optim_step(struct optim *self, float *params, const float *grad);

/* Updates applied so far. */
uint64_t optim_steps(const struct optim *self);

/* Zero the momentum buffer (e.g. after params were replaced wholesale). */
void optim_reset_momentum(struct optim *self);

#endif
