/* node/straggler: how a worker is made slow, deterministically from the run's seed.
 *
 * Four mechanisms, combined per step (straggler_step_extra_s):
 *   slowdown x    the step's compute takes x times as long: sleep (x - 1) * measured compute
 *   delay dist    an extra per-step delay drawn from constant(a) | uniform(a, b) |
 *                 exponential(mean a) | gamma(shape a, scale b) | normal(mean a, sd b; clamped
 *                 at 0) | pareto(scale a, shape b), all in seconds
 *   trace         a replayed per-step compute time (CSV, the last column of each row in
 *                 seconds; a non-numeric first row is a header; rows repeat cyclically): the
 *                 step is stretched to the trace's time (never shortened)
 *   pause         periodic pause: for `for` seconds starting at every multiple k >= 1 of
 *                 `every` seconds of run time (straggler_pause_left_s)
 * Config keys (docs/node-config.md): straggler.slowdown, straggler.delay.dist,
 * straggler.delay.a, straggler.delay.b, straggler.pause.every, straggler.pause.for,
 * straggler.trace. The sleeping itself is the caller's job: this module only computes. */
#ifndef STALENET_STRAGGLER_H
#define STALENET_STRAGGLER_H

#include <stddef.h>
#include <stdint.h>

struct kv;
struct rng;

enum straggler_dist {
	STRAGGLER_NONE = 0,
	STRAGGLER_CONSTANT,
	STRAGGLER_UNIFORM,
	STRAGGLER_EXPONENTIAL,
	STRAGGLER_GAMMA,
	STRAGGLER_NORMAL,
	STRAGGLER_PARETO,
};

struct straggler_params {
	double slowdown;          /* >= 1; 1 = none */
	enum straggler_dist dist;
	double a, b;              /* distribution parameters (seconds / shape), see above */
	double pause_every_s;     /* 0 = no pause */
	double pause_for_s;
	const char *trace;        /* CSV path or NULL; borrowed until straggler_new returns */
};

/* "none"|"constant"|"uniform"|"exponential"|"gamma"|"normal"|"pareto". 0 or -EINVAL. */
int straggler_dist_parse(const char *name, enum straggler_dist *out);

/* Fill p from cfg (trace points into cfg's storage). Defaults: no straggling. Checks ranges
 * (slowdown >= 1, b >= a for uniform, positive shapes/scales, pause_for < pause_every).
 * Returns 0 or -EINVAL (logged with the key). */
int straggler_params_from_kv(const struct kv *cfg, struct straggler_params *p);

struct straggler;

/* The seed of the straggler model of the node with index `index` among its role (node.index) in
 * a run seeded run_seed: what every engine passes to straggler_new, so the simulator and the
 * calibration can replay a node's delay draws (docs/simulation.md, Calibration). */
uint64_t straggler_seed(uint64_t run_seed, uint32_t index);

/* A straggler model drawing from seed (straggler_seed for a node of a run). Loads the
 * trace if any. NULL (logged) on a bad trace file or no memory. */
struct straggler *straggler_new(const struct straggler_params *p, uint64_t seed);
void straggler_destroy(struct straggler **self);

/* Seed r as straggler_new(p, seed) seeds its own stream: the k-th draw of
 * straggler_dist_draw(.., r) is then the k-th delay of that model (the simulator draws a
 * worker's delays from the stream its emulated worker uses). */
void straggler_stream_seed(struct rng *r, uint64_t seed);

/* One draw from dist with parameters a, b (as straggler_params) using r: the distributions
 * of straggler_delay_s, for a caller that keeps its own random stream (the simulator). */
double straggler_dist_draw(enum straggler_dist dist, double a, double b, struct rng *r);

/* One draw of the per-step extra delay, seconds (0 for STRAGGLER_NONE). */
double straggler_delay_s(struct straggler *self);

/* The extra seconds to sleep after step `step` (0-based) whose compute took compute_s:
 * slowdown share + trace stretch + one delay draw. Always >= 0. */
double straggler_step_extra_s(struct straggler *self, int64_t step, double compute_s);

/* Seconds left in the current periodic pause at run time t_s (0 when not paused). */
double straggler_pause_left_s(const struct straggler *self, double t_s);

/* Rows in the replayed trace (0 without one). */
size_t straggler_trace_len(const struct straggler *self);

/* True when the model can ever add time (any mechanism configured). */
int straggler_active(const struct straggler *self);

#endif
