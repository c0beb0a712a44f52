/* node/engine_common: what every distributed training engine does the same way.
 *
 * The node's view of its run (index, peers, data-plane endpoints, stop conditions), its share of
 * the training set with the model and optimiser it trains, and the two traces every engine
 * writes: RUN_DIR/nodes/<node>.csv (one row per completed step) and RUN_DIR/eval.csv.
 *
 * Data-plane endpoints: node i listens on tcp://ADDR_i:PORT_i with PORT_i = port.data when all
 * addresses in workers.addrs are distinct (one namespace per node), and port.data + i when some
 * addresses repeat (several nodes sharing one address, e.g. all on 127.0.0.1 in tests).
 *
 * Extra keys for small experiments and tests (absent = whole sets): data.train_limit uses only
 * the first N samples of the training file (the partition splits those), data.test_limit
 * evaluates on the first N test samples. */
#ifndef STALENET_ENGINE_COMMON_H
#define STALENET_ENGINE_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/limits.h"
#include "node/eval.h"
#include "node/rng.h"

struct kv;
struct csv_writer;
struct ctl_client;
struct data_set;
struct model;
struct optim;
struct straggler;

#define ENGINE_MAX_NODES LIMITS_MAX_NODES /* lib/limits.h: the validator refuses more */
#define ENGINE_ADDR_LEN 64
/* The train_loss column: a fixed sample of this many of the evaluating node's own share. */
#define ENGINE_TRAIN_LOSS_SAMPLE 2000
/* The stream (with run.seed ^ (index << 32)) that shuffles a node's minibatch order; the
 * simulator draws the same orders from it. */
#define ENGINE_RNG_STREAM_ORDER 0x6f72646572ull

/* The run as one node sees it; filled by engine_conf_read, plain data. */
struct engine_conf {
	const char *run_dir;        /* owned by the kv */
	const char *name;           /* this node (node.name) */
	const char *data_dir;
	uint32_t index;             /* node.index among workers.count */
	uint32_t n;                 /* workers.count */
	char (*addrs)[ENGINE_ADDR_LEN]; /* n addresses (malloc'd; engine_conf_free) */
	char (*names)[ENGINE_ADDR_LEN]; /* n node names (workers.names) or NULL when absent */
	bool *late;                 /* n flags: joins during the run (workers.late; malloc'd) */
	int port_base;              /* port.data */
	bool port_stride;           /* true: node i listens on port_base + i */
	uint64_t seed;              /* run.seed */
	int64_t origin_ns;          /* run.origin_ns */
	bool rejoined;              /* started after the run began (a restart or a late join) */
	uint32_t batch;             /* train.batch */
	int blas_threads;
	double stop_time_s;         /* 0 = not set */
	int64_t stop_steps;         /* 0 = not set */
	double stop_accuracy;       /* 0 = not set */
	double eval_every_s;        /* eval.every (default 5) */
	int64_t train_limit, test_limit; /* 0 = all */
	bool save_model;            /* train.save_model: write the final parameters */
};

/* Read the keys above from cfg (docs/node-config.md). Returns 0 or -EINVAL (logged). */
int engine_conf_read(const struct kv *cfg, struct engine_conf *c);
void engine_conf_free(struct engine_conf *c);

/* "tcp://ADDR:PORT" of node i into out. Returns 0 or -ENAMETOOLONG/-EINVAL. */
int engine_conf_endpoint(const struct engine_conf *c, uint32_t i, char *out, size_t len);

/* True when one of the stop conditions that need no evaluation holds: stop.time reached
 * (seconds since run.origin_ns) or steps >= stop.steps. */
bool engine_conf_stop_reached(const struct engine_conf *c, int64_t steps);

/* This node's training share, model and optimiser. Fields are readable by the engine. */
struct engine_work {
	struct data_set *train;     /* this node's partition */
	struct data_set *test;      /* NULL unless asked for */
	struct model *model;
	struct optim *optim;
	float *grad;                /* model_nparams floats */
	uint64_t samples;           /* training samples processed so far */
	struct straggler *straggler; /* straggler.* model of this node (NULL = none) */
	/* private: minibatch order and scratch */
	uint32_t *order, *loss_idx;
	size_t pos, nloss_idx;
	float *x;
	uint8_t *y;
	uint32_t batch;
	struct rng rng;
};

/* Load this node's partition (node 0 also writes RUN_DIR/partition.csv), the test set when
 * with_test, and build the model (initialised from run.seed: identical on every node) and its
 * optimiser. Returns 0 and *out, or negative errno (logged). Free with engine_work_destroy. */
int engine_work_open(const struct kv *cfg, const struct engine_conf *c, bool with_test,
		     struct engine_work **out);
void engine_work_destroy(struct engine_work **self);

/* Append the training-file samples at source positions idx[0..n) (strictly ascending) of the
 * files images/labels to self's share: positions already in the share keep their samples (the
 * new ones take positions train->n ..), and the minibatch order is drawn afresh over the grown
 * share from self's own generator (so the new samples appear from the next minibatch on; the
 * same calls give the same order). Returns 0 or negative errno; on failure self is unchanged. */
int engine_work_add_samples(struct engine_work *self, const char *images, const char *labels,
			    const uint32_t *idx, size_t n);

/* Gradient of the next minibatch (reshuffled every local epoch) at the current parameters into
 * self->grad; *loss gets the minibatch loss, *n its size. Returns 0 or negative errno. */
int engine_work_gradient(struct engine_work *self, double *loss, size_t *n);

/* Emulated slowness after step `step` whose compute took compute_s (node/straggler: slowdown,
 * delay, trace stretch, periodic pause): sleeps, returns the seconds slept. */
double engine_work_straggle(struct engine_work *self, const struct engine_conf *c, int64_t step,
			    double compute_s);

/* Evaluate parameters m (any model of the same spec) on the test set and on a fixed sample of
 * this node's training share. Requires the test set. Returns 0 or negative errno. */
int engine_work_eval(struct engine_work *self, struct model *m, struct eval_result *test,
		     struct eval_result *train);

/* Ensemble evaluation: average the class probabilities of nmodels parameter vectors (each
 * model_nparams floats; the scratch model m is overwritten) on the test set and on the fixed
 * training sample. Returns 0 or negative errno. */
int engine_work_eval_ensemble(struct engine_work *self, struct model *m, const float *const *params,
			      size_t nmodels, struct eval_result *test, struct eval_result *train);

/* Open RUN_DIR/nodes/<node>.csv (creating the directory) with the node trace header, or
 * RUN_DIR/eval.csv with the eval header. NULL (logged) on failure. */
struct csv_writer *engine_trace_open(const struct engine_conf *c);
struct csv_writer *engine_eval_open(const struct engine_conf *c);

/* Open RUN_DIR/nodes/<node>.csv with the parameter-server trace header (TRACE_HEADER_SERVER,
 * docs/traces.md) instead of the node trace header. NULL (logged) on failure. */
struct csv_writer *engine_server_trace_open(const struct engine_conf *c);

/* One node-trace row stamped t_ns (CLOCK_MONOTONIC, the step's end). staleness < 0 writes an
 * empty cell (nothing merged this step). */
int engine_trace_row(struct csv_writer *w, const struct engine_conf *c, int64_t t_ns, int64_t step,
		     double compute_s, double wait_s, int64_t staleness, int64_t model_version,
		     double loss, uint64_t bytes_tx, uint64_t bytes_rx, uint64_t bad_frames);

/* One eval row for the evaluator's own progress (updates, samples over its share). */
int engine_eval_row(struct csv_writer *w, const struct engine_conf *c, const struct engine_work *wk,
		    uint64_t updates, uint64_t samples, const struct eval_result *test,
		    const struct eval_result *train);

/* When train.save_model is set, write params (n floats, little-endian float32, no header) to
 * RUN_DIR/nodes/<node>.params; otherwise do nothing. Returns 0 or negative errno. */
int engine_save_params(const struct engine_conf *c, const float *params, size_t n);

/* Open the control plane when ctl.endpoint is set (else *out = NULL), tell it this node is
 * ready and wait for start; on start c->origin_ns becomes the origin the start names.
 * Returns 0, -ECANCELED (stopped before start) or negative errno. */
int engine_ctl_start(const struct kv *cfg, struct engine_conf *c, struct ctl_client **out);

#endif
