/* node/optim: see optim.h. */
#include "node/optim.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/kv.h"
#include "lib/log.h"

struct optim {
	struct optim_params p;
	size_t n;
	uint64_t t;
	float *v;   /* momentum buffer; NULL when momentum == 0 */
};

int optim_params_from_kv(const struct kv *cfg, struct optim_params *p)
{
	const char *s = kv_get(cfg, "train.lr_schedule");
	int64_t every;
	int rc;

	memset(p, 0, sizeof *p);
	rc = kv_get_double(cfg, "train.lr", 0.05, &p->lr);
	rc = rc ? rc : kv_get_double(cfg, "train.momentum", 0.9, &p->momentum);
	rc = rc ? rc : kv_get_double(cfg, "train.weight_decay", 0.0, &p->weight_decay);
	rc = rc ? rc : kv_get_i64(cfg, "train.lr_step_every", 1000, &every);
	rc = rc ? rc : kv_get_double(cfg, "train.lr_step_gamma", 0.5, &p->step_gamma);
	rc = rc ? rc : kv_get_double(cfg, "train.lr_decay", 1e-4, &p->decay);
	if (rc)
		return rc;
	if (!s || !*s || strcmp(s, "constant") == 0) {
		p->schedule = OPTIM_LR_CONSTANT;
	} else if (strcmp(s, "step") == 0) {
		p->schedule = OPTIM_LR_STEP;
	} else if (strcmp(s, "inverse") == 0) {
		p->schedule = OPTIM_LR_INVERSE;
	} else {
		log_error("train.lr_schedule: unknown schedule '%s' (constant|step|inverse)", s);
		return -EINVAL;
	}
	if (every == 0)
		every = 1000; /* 0 = not set in the scenario */
	if (every < 1) {
		log_error("train.lr_step_every: %lld must be >= 1", (long long)every);
		return -EINVAL;
	}
	p->step_every = (uint64_t)every;
	return 0;
}

double optim_lr_at(const struct optim_params *p, uint64_t t)
{
	switch (p->schedule) {
	case OPTIM_LR_STEP:
		return p->lr * pow(p->step_gamma, (double)(t / p->step_every));
	case OPTIM_LR_INVERSE:
		return p->lr / (1.0 + p->decay * (double)t);
	case OPTIM_LR_CONSTANT:
		break;
	}
	return p->lr;
}

struct optim *optim_new(size_t n, const struct optim_params *p)
{
	struct optim *o;

	if (!(p->lr > 0.0) || p->momentum < 0.0 || p->momentum >= 1.0 || p->weight_decay < 0.0 ||
	    (p->schedule == OPTIM_LR_STEP && (p->step_every == 0 || !(p->step_gamma > 0.0))) ||
	    (p->schedule == OPTIM_LR_INVERSE && p->decay < 0.0)) {
		log_error("optim: bad parameters (lr %g, momentum %g, weight decay %g)", p->lr,
			  p->momentum, p->weight_decay);
		return NULL;
	}
	o = calloc(1, sizeof *o);
	if (!o)
		return NULL;
	o->p = *p;
	o->n = n;
	if (p->momentum > 0.0) {
		o->v = calloc(n ? n : 1, sizeof(float));
		if (!o->v) {
			free(o);
			return NULL;
		}
	}
	return o;
}

void optim_destroy(struct optim **self)
{
	if (!self || !*self)
		return;
	free((*self)->v);
	free(*self);
	*self = NULL;
}

void optim_step(struct optim *self, float *params, const float *grad)
{
	const float lr = (float)optim_lr_at(&self->p, self->t);
	const float wd = (float)self->p.weight_decay, mu = (float)self->p.momentum;
	const size_t n = self->n;
	float *v = self->v;

	if (v && wd != 0.0f) {
		for (size_t i = 0; i < n; i++) {
			v[i] = mu * v[i] + grad[i] + wd * params[i];
			params[i] -= lr * v[i];
		}
	} else if (v) {
		for (size_t i = 0; i < n; i++) {
			v[i] = mu * v[i] + grad[i];
			params[i] -= lr * v[i];
		}
	} else {
		for (size_t i = 0; i < n; i++)
			params[i] -= lr * (grad[i] + wd * params[i]);
	}
	self->t++;
}

uint64_t optim_steps(const struct optim *self)
{
	return self->t;
}

void optim_reset_momentum(struct optim *self)
{
	if (self->v)
		memset(self->v, 0, self->n * sizeof(float));
}
