/* orchestrator/scenario: a scenario file (YAML) parsed and validated into a struct scenario.
 *
 * The parser reads the whole document into a small tree that remembers each value's line and
 * column, applies `--set key.path=value` overrides to that tree, and only then converts it into
 * the typed struct below. Validation therefore runs once, on the final document, and every error
 * is one line: `FILE:LINE:COL: error: what is wrong (what was expected)`.
 *
 * Units are normalised on the way in (orchestrator/units): times in microseconds, probabilities
 * in parts per million (inside struct link_params) or as fractions (training knobs), rates in bits
 * per second. The language reference is docs/scenario.md.
 *
 * The struct is plain data, owned by the scenario object: callers read it, never free parts of it.
 * Sweeps are kept unexpanded here (struct scenario_sweep); orchestrator/plan expands them. */
#ifndef STALENET_SCENARIO_H
#define STALENET_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/limits.h"
#include "lib/link_params.h"

#define SCENARIO_MAX_NODES      LIMITS_MAX_NODES /* explicit nodes or workers + servers */
#define SCENARIO_MAX_FILE_BYTES (10u << 20)     /* 10 MB */
#define SCENARIO_NODE_NAME_MAX  32              /* including the NUL */
#define SCENARIO_MAX_HIDDEN     8               /* model.hidden layers */
#define SCENARIO_TCP_MAX_INITCWND 1024          /* network.tcp.initial_cwnd, segments */
#define SCENARIO_TCP_MEM_MIN    4096ull         /* network.tcp.rmem/wmem, bytes */
#define SCENARIO_TCP_MEM_MAX    (1ull << 30)
#define SCENARIO_ERR_MAX        512             /* a comfortable err buffer size */
#define SCENARIO_MAX_RUNS       10000           /* runs one sweep may expand to (with repeat) */
#define SCENARIO_MAX_DELAY_US   60000000u       /* link delay and jitter: 60 s */
#define SCENARIO_STOP_GRACE_US     15000000ull  /* stop.grace's default: 15 s */
#define SCENARIO_STOP_GRACE_MIN_US 1000000ull   /* stop.grace: 1 s .. 1 h */
#define SCENARIO_STOP_GRACE_MAX_US 3600000000ull
#define SCENARIO_MAX_SIM_WORKERS 200000u        /* workers of a scenario with a simulation: section
						  * (a compact plan holds ~12 bytes per node) */

enum scenario_data_set { SCENARIO_DATA_FASHION_MNIST = 0, SCENARIO_DATA_MNIST };
enum scenario_partition { SCENARIO_PART_IID = 0, SCENARIO_PART_CLASSES, SCENARIO_PART_DIRICHLET,
			  SCENARIO_PART_SIZES };
enum scenario_model { SCENARIO_MODEL_SOFTMAX = 0, SCENARIO_MODEL_MLP, SCENARIO_MODEL_CNN };
enum scenario_lr_schedule { SCENARIO_LR_CONSTANT = 0, SCENARIO_LR_STEP, SCENARIO_LR_INVERSE };
enum scenario_topology { SCENARIO_TOPO_PS = 0, SCENARIO_TOPO_P2P, SCENARIO_TOPO_ALLREDUCE,
			 SCENARIO_TOPO_CENTRALIZED, SCENARIO_TOPO_FLEET };
enum scenario_barrier { SCENARIO_BARRIER_BSP = 0, SCENARIO_BARRIER_SSP, SCENARIO_BARRIER_ASP,
			SCENARIO_BARRIER_PBSP, SCENARIO_BARRIER_PSSP };
enum scenario_weighting { SCENARIO_WEIGHT_NONE = 0, SCENARIO_WEIGHT_INVERSE, SCENARIO_WEIGHT_EXP };
enum scenario_combine { SCENARIO_COMBINE_NONE = 0, SCENARIO_COMBINE_AVERAGE, SCENARIO_COMBINE_ENSEMBLE };
/* consistency.draw: when a pBSP/pSSP request draws its sample (node/barrier.h) */
enum scenario_draw { SCENARIO_DRAW_CHECK = 0, SCENARIO_DRAW_CROSSING };
enum scenario_workload { SCENARIO_WORKLOAD_TRAIN = 0, SCENARIO_WORKLOAD_LINKCHECK };
enum scenario_on_failure { SCENARIO_ON_FAILURE_STOP = 0, SCENARIO_ON_FAILURE_CONTINUE };
enum scenario_sim_train { SCENARIO_SIM_TRAIN_NONE = 0, SCENARIO_SIM_TRAIN_REAL };
enum scenario_sim_recovery { SCENARIO_SIM_RECOVERY_TIMEOUT = 0, SCENARIO_SIM_RECOVERY_FAST };
enum scenario_role { SCENARIO_ROLE_SERVER = 0, SCENARIO_ROLE_WORKER, SCENARIO_ROLE_PEER,
		     SCENARIO_ROLE_CENTRAL, SCENARIO_ROLE_PROBE, SCENARIO_ROLE_REGISTRY,
		     SCENARIO_ROLE_DEVICE };
/* topology fleet: how a device sends a version (node/fleet_codec), what the registry deploys. */
enum scenario_fleet_strategy { SCENARIO_FLEET_FULL = 0, SCENARIO_FLEET_DELTA, SCENARIO_FLEET_SPARSE,
			       SCENARIO_FLEET_REPLAY, SCENARIO_FLEET_AUTO };
enum scenario_fleet_base { SCENARIO_FLEET_BASE_INIT = 0, SCENARIO_FLEET_BASE_TRAINED,
			   SCENARIO_FLEET_BASE_FILE };
/* topology fleet: whether devices also keep their peers' versions (docs/fleet.md). */
enum scenario_fleet_registry { SCENARIO_FLEET_REGISTRY_CENTRAL = 0, SCENARIO_FLEET_REGISTRY_PEERS };
/* Extra per-step compute delay of a straggler. Parameters a, b (seconds unless noted):
 * constant {value: a}, uniform {min: a, max: b}, exponential {mean: a},
 * gamma {shape: a (dimensionless), scale: b}, normal {mean: a, sd: b},
 * pareto {scale: a, shape: b (dimensionless)}. */
enum scenario_dist { SCENARIO_DIST_NONE = 0, SCENARIO_DIST_CONSTANT, SCENARIO_DIST_UNIFORM,
		     SCENARIO_DIST_EXPONENTIAL, SCENARIO_DIST_GAMMA, SCENARIO_DIST_NORMAL,
		     SCENARIO_DIST_PARETO };

/* Where a value came from in the scenario file (1-based; 0 = not from the file). */
struct scenario_pos {
	uint32_t line, col;
};

/* One explicit node (`nodes: [{name: server0, role: server}, ...]`). */
struct scenario_node {
	char name[SCENARIO_NODE_NAME_MAX];
	enum scenario_role role;
	struct scenario_pos pos;
};

/* One `network.links` entry: overrides for the nodes its selector matches. up = node -> switch,
 * down = switch -> node; a bare key applies to both. Only fields with their `set` bit count. */
struct scenario_link {
	char *nodes;                    /* selector text (orchestrator/selector) */
	struct scenario_pos pos;        /* of the selector */
	struct link_params up, down;
};

/* One `network.timeline` entry: at at_us after the run start, apply the set fields to the
 * matching nodes' links (on top of what they had). */
struct scenario_event {
	uint64_t at_us;
	char *nodes;
	struct scenario_pos pos;
	struct link_params up, down;
};

/* Bits of scenario_straggler.set. */
enum scenario_straggler_field {
	SCENARIO_STRAG_SLOWDOWN = 1u << 0, SCENARIO_STRAG_DELAY = 1u << 1, SCENARIO_STRAG_TRACE = 1u << 2,
	SCENARIO_STRAG_PAUSE = 1u << 3, SCENARIO_STRAG_CRASH = 1u << 4, SCENARIO_STRAG_RESTART = 1u << 5,
	SCENARIO_STRAG_JOIN = 1u << 6, SCENARIO_STRAG_LEAVE = 1u << 7,
};

/* One `stragglers` entry. All times are microseconds after the run start. */
struct scenario_straggler {
	char *nodes;
	struct scenario_pos pos;
	uint32_t set;                   /* SCENARIO_STRAG_* given explicitly */
	double slowdown;                /* compute time multiplier, >= 1 (1 = none) */
	enum scenario_dist delay_dist;  /* extra per-step delay */
	double delay_a, delay_b;        /* see enum scenario_dist */
	char *trace;                    /* CSV of per-step compute times, NULL = none */
	uint64_t pause_every_us, pause_for_us;
	uint64_t crash_at_us;
	uint64_t restart_at_us;         /* absolute time of the restart, > crash_at_us */
	uint64_t join_at_us, leave_at_us;
};

/* Bits of scenario_resources.set. */
enum scenario_resource_field { SCENARIO_RES_CPU = 1u << 0, SCENARIO_RES_CPUS = 1u << 1, SCENARIO_RES_MEMORY = 1u << 2 };

#define SCENARIO_CPU_WORDS 16           /* CPUs 0..1023 of a pinning list (CGROUP_CPU_WORDS) */

/* One `resources` entry: cgroup limits of the nodes its selector matches (orchestrator/cgroup). */
struct scenario_resources {
	char *nodes;
	struct scenario_pos pos;
	uint32_t set;                   /* SCENARIO_RES_* given explicitly */
	double cpu;                     /* share of one core (0.25), 0.01 .. online CPUs */
	uint64_t cpus[SCENARIO_CPU_WORDS]; /* pinning: bit c = CPU c, each an online CPU */
	uint64_t memory_bytes;          /* hard limit, >= 16 MiB */
};

/* One sweep axis: `key.path: [v1, v2, ...]`. values are the scalars' text, applied like --set. */
struct scenario_sweep_axis {
	char *key;
	struct scenario_pos pos;
	char **values;
	struct scenario_pos *value_pos;
	size_t n_values;
	int zip_group;                  /* -1 = own axis of the cartesian product, else zip group id */
};

struct scenario_sweep {
	struct scenario_sweep_axis *axes;
	size_t n_axes;
	uint32_t repeat;                /* >= 1 */
};

struct scenario_doc;                    /* private: the parsed tree, kept for --set and re-emit */
struct hosts;                           /* orchestrator/hosts */

/* network.precision: auto = measure the host's timers at `stalenet run` and choose; timer =
 * wake on a timer a measured lateness early; spin = wake a calibrated margin early and poll the
 * clock to each release time (exact where timers are late, at the cost of CPU while packets are
 * held). */
enum scenario_precision { SCENARIO_PRECISION_AUTO = 0, SCENARIO_PRECISION_TIMER, SCENARIO_PRECISION_SPIN };

/* One fleet.drift entry: classes that join the selected devices' data at a time or a step. */
struct scenario_fleet_drift {
	uint64_t at_us;                 /* due at this run time, or */
	uint64_t at_steps;              /* after this many of the device's steps (by_steps) */
	bool by_steps;
	char *devices;                  /* selector (devices only) */
	struct scenario_pos pos;
	uint16_t classes;               /* bit c: class c (0..9) */
};

struct scenario {
	char *file;                     /* name used in error messages */
	char *name;
	uint64_t seed;

	uint64_t stop_time_us;          /* 0 = not set; at least one stop condition is required */
	double stop_accuracy;           /* 0 = not set */
	uint64_t stop_steps;            /* 0 = not set */
	uint64_t stop_grace_us;         /* stop.grace: "stop" -> SIGTERM (SCENARIO_STOP_GRACE_US) */
	double target;                  /* accuracy for time-to-target, 0 = none */

	struct {
		enum scenario_data_set set;
		char *path;             /* directory of the *-ubyte.gz files */
		enum scenario_partition scheme;
		uint32_t per_node;      /* classes per node (classes) */
		double alpha;           /* dirichlet concentration */
		double zipf;            /* 0 = equal shard sizes, else Zipf exponent of sizes */
		double *sizes;          /* explicit fractions (sizes), sum 1 */
		size_t n_sizes;
	} data;

	struct {
		enum scenario_model kind;
		uint32_t hidden[SCENARIO_MAX_HIDDEN];
		size_t n_hidden;
	} model;

	struct {
		uint32_t batch;
		double lr, momentum, weight_decay;
		enum scenario_lr_schedule lr_schedule;
		uint64_t lr_step_every;         /* steps between decays (step) */
		double lr_step_gamma;           /* factor per decay (step) */
		double lr_decay;                /* lr / (1 + lr_decay * step) (inverse) */
		uint32_t epochs;                /* centralized trainer, 0 = until stop */
		uint32_t blas_threads;
	} train;

	struct {
		enum scenario_topology kind;
		uint32_t servers;               /* parameter-server: >= 1 */
	} topology;

	struct {
		enum scenario_barrier barrier;
		uint32_t staleness;             /* ssp, pssp */
		uint32_t sample;                /* pbsp, pssp: peers sampled (beta) */
		uint32_t backup;                /* backup workers (b) */
		enum scenario_weighting weighting;
		uint32_t local_steps;           /* model averaging period */
		uint32_t fanout;                /* gossip fanout (p2p) */
		enum scenario_combine combine;
		enum scenario_draw draw;        /* pbsp, pssp on a parameter server */
	} consistency;

	struct {                                /* topology fleet (docs/scenario.md `fleet`) */
		enum scenario_fleet_strategy strategy;
		uint64_t sync_steps;            /* sync every N training steps, or */
		uint64_t sync_us;               /* every this long (exactly one is non-zero) */
		uint32_t snapshot_every;        /* a full snapshot every K versions */
		uint64_t sparse_k;              /* sparse: entries per sync, or */
		uint32_t sparse_ppm;            /* that fraction of the parameters (one is non-zero) */
		enum scenario_fleet_base base;
		char *base_file;                /* base file: raw float32 parameters */
		uint64_t base_steps;            /* base trained: steps the registry trains first */
		enum scenario_fleet_registry registry;
		uint32_t peers;                 /* registry peers: devices each one sends to (1..N-1) */
		struct scenario_fleet_drift *drift; /* in file order (applied per device in it) */
		size_t n_drift;
	} fleet;

	uint32_t workers;                       /* count of workers (peers); with `nodes`, derived */
	struct scenario_node *nodes;            /* explicit node list, NULL = derived from counts */
	size_t n_nodes;

	enum scenario_workload workload;
	bool linkcheck;                         /* run the link self-check (linkcheck: off = false) */
	uint32_t linkcheck_probes;              /* probes per link */
	uint64_t linkcheck_interval_us;         /* between two probes of one node */
	uint64_t eval_every_us;

	struct {
		struct link_params up, down;    /* network.default */
		struct scenario_link *links;
		size_t n_links;
		struct scenario_event *timeline;    /* in file order; plan sorts by time */
		size_t n_timeline;
		char *trace;                    /* CSV of t_s,delay,loss,rate rows, NULL = none */
		char *cc;                       /* TCP congestion control, default "cubic" */
		uint32_t subnet;                /* host byte order, default 198.18.0.0 */
		uint8_t prefix_len;             /* default 15 */
		uint32_t mtu;                   /* 0 = interface default */
		/* network.tcp: set inside every node's namespace (cc is network.cc above) */
		struct {
			int slow_start_after_idle;  /* net.ipv4.tcp_slow_start_after_idle 0/1; -1 = kernel's */
			int ecn;                    /* net.ipv4.tcp_ecn 0/1/2; -1 = kernel's */
			uint32_t initial_cwnd;      /* route attribute initcwnd (segments); 0 = kernel's */
			uint64_t rmem[3], wmem[3];  /* tcp_rmem / tcp_wmem min default max (bytes); [2] == 0:
						       kernel's */
		} tcp;
		enum scenario_precision precision; /* network.precision: how linkd releases held packets */
	} network;

	struct scenario_straggler *stragglers;
	size_t n_stragglers;
	struct scenario_resources *resources;
	size_t n_resources;

	enum scenario_on_failure on_node_failure;

	/* `simulation:` (stalenet simulate only; docs/simulation.md). present: the section exists
	 * (it also lifts the node limit to SCENARIO_MAX_SIM_WORKERS). */
	struct {
		bool present;
		enum scenario_sim_train train;  /* default none */
		uint64_t step_cost_us;          /* base compute time of one step, 0 = measure */
		uint64_t server_cost_us;        /* server time per message, 0 = measure */
		uint64_t rto_min_us;            /* TCP minimum retransmission timeout, default 200 ms */
		uint32_t mss;                   /* TCP segment payload bytes, default 1448 */
		enum scenario_sim_recovery loss_recovery; /* how a lost segment is recovered, default
							   * timeout (docs/simulation.md) */
		uint32_t node_files;            /* nodes/<worker>.csv up to this many workers, default 64 */
		uint32_t seed;                  /* the simulator's own draws: 0 = the run's seed, N = the
						 * N-th other (sim/sim_seed) */
		char *profile;                  /* calibration profile (not read yet), NULL = none */
	} simulation;

	struct scenario_sweep sweep;
	struct hosts *hosts;                    /* `hosts` section (orchestrator/hosts), NULL = this host */

	struct scenario_doc *doc;               /* private */
};

/* Read a scenario file, apply n_sets `key.path=value` overrides (in order; none: sets may be
 * NULL), then validate. Returns a new scenario (free with scenario_destroy) or NULL with a
 * one-line "FILE:LINE:COL: error: ..." message in err. The CLI's entry.
 * `sweep.<key>=[...]` sets one sweep key (the rest after "sweep." is the key, dots included); a
 * --set of a path the sweep also sets (equal, parent or child) is an error at the sweep key. */
struct scenario *scenario_load_with(const char *path, const char *const *sets, size_t n_sets,
				    char *err, size_t errlen);

/* The same from a memory buffer without overrides (need not be NUL-terminated); name is used
 * in messages (the parser's entry for the fuzzer and the tests). */
struct scenario *scenario_parse(const char *buf, size_t len, const char *name, char *err, size_t errlen);

/* Apply one `key.path=value` override (list elements by index: network.links.0.delay=5ms;
 * sweep keys as in scenario_load_with) and re-validate the whole scenario. On error self is
 * unchanged, err says "--set KEY: ..." (or names the sweep key it conflicts with).
 * Returns 0, -EINVAL (invalid) or -ENOMEM. */
int scenario_set(struct scenario *self, const char *assignment, char *err, size_t errlen);

/* One run of a sweep (for orchestrator/plan): a copy of self without the sweep, with value
 * value_idx[a] of each sweep axis a applied as --set would, and seed replaced by seed; validated
 * again. Returns NULL with the error (at the sweep value's position) in err. */
struct scenario *scenario_sweep_run(const struct scenario *self, const size_t *value_idx, uint64_t seed,
				    char *err, size_t errlen);

/* Write the scenario as YAML (the parsed document with overrides applied) to out, e.g. for
 * RUN_DIR/scenario.yaml. Returns 0 or -errno. */
int scenario_write_yaml(const struct scenario *self, FILE *out);

/* Free the scenario and set *self to NULL; accepts NULL and *self == NULL. */
void scenario_destroy(struct scenario **self);

/* The scenario's node list: the explicit `nodes`, or derived from the topology and counts
 * (server0.., worker0..; peer0.. for p2p and allreduce; trainer for centralized; registry and
 * device0.. for fleet; probe0.. for the linkcheck workload). *out is malloc'd, the caller frees it. Returns 0 or -ENOMEM. */
int scenario_node_list(const struct scenario *self, struct scenario_node **out, size_t *n);

/* Copy the fields src gave explicitly (src->set) onto dst, as a per-node override layers onto
 * the default. */
void scenario_link_merge(struct link_params *dst, const struct link_params *src);

/* tc-netem's cross-field rules (jitter needs delay, reorder needs delay, gap needs reorder, a
 * correlation needs its base, gemodel needs p) on effective parameters. NULL when they hold,
 * else a static message. */
const char *scenario_link_rule(const struct link_params *p);

/* Names of enum values as written in the file ("parameter-server", "pssp", ...). */
const char *scenario_role_name(enum scenario_role role);
const char *scenario_barrier_name(enum scenario_barrier barrier);
const char *scenario_topology_name(enum scenario_topology kind);
const char *scenario_model_name(enum scenario_model kind);
const char *scenario_partition_name(enum scenario_partition scheme);
const char *scenario_data_set_name(enum scenario_data_set set);
const char *scenario_lr_schedule_name(enum scenario_lr_schedule s);
const char *scenario_weighting_name(enum scenario_weighting w);
const char *scenario_combine_name(enum scenario_combine c);
const char *scenario_draw_name(enum scenario_draw d);
const char *scenario_dist_name(enum scenario_dist d);
const char *scenario_fleet_strategy_name(enum scenario_fleet_strategy s);
const char *scenario_fleet_base_name(enum scenario_fleet_base b);
const char *scenario_fleet_registry_name(enum scenario_fleet_registry r);
const char *scenario_sim_train_name(enum scenario_sim_train t);

#endif
