/* sim/sim: discrete-event simulation of one planned run of a parameter-server scenario.
 *
 * Workers, links and the server are simulated on a virtual clock (ns from the run start); every
 * barrier, round, liveness and staleness decision is made by node/core_ps, the very core the
 * ZeroMQ server runs, fed with the simulated events. What is modelled (docs/simulation.md):
 *   workers   a step takes step_cost x slowdown + one draw of the straggler's delay
 *             distribution, drawn from a stream keyed by (seed, worker, step), so the same step
 *             of the same worker takes the same time under every barrier (a compute.trace:
 *             node/straggler's own model); a pause window delays the start of a step to its
 *             end; crash, restart, late join and leave; or, with simulation.profile, draws
 *             from the step times fitted to an emulated run (sim/sim_profile): where the
 *             profile has the base compute, a draw of it plus the emulated worker's own
 *             delay draws (its node/straggler stream, replayed in order)
 *   links     sim/sim_link on every node's up and down direction (timeline changes and
 *             network.trace rows applied);
 *             with a profile, half a draw of the worker's fitted round trip per message
 *   server    one FIFO queue taking server_cost per message (join, push)
 *   training  none (steps only), or real (sim/sim_train: the real model, data split and
 *             optimiser; each gradient computed on the model version the worker read)
 * Model averaging (local_steps H > 1): H local steps per round, one push per round (train
 * none only).
 * Outputs go to the run directory through collectors/csv in the emulator's schema
 * (docs/traces.md): nodes/<worker>.csv (when there are at most node_files workers),
 * workers.csv (one row per worker), progress.csv, eval.csv (train real); t_s is simulated
 * seconds. Deterministic: the same plan run and costs give byte-identical files. */
#ifndef STALENET_SIM_H
#define STALENET_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "orchestrator/plan.h"

/* What a simulation needs besides the plan run. */
struct sim_opts {
	const struct plan_run *run;   /* borrowed */
	const char *dir;              /* run directory (exists); NULL = write no files */
	int64_t step_cost_ns;         /* base compute time of one step (> 0) */
	int64_t server_cost_ns;       /* server time per message (>= 0) */
};

/* What a simulation measured (the summary's numbers computed from the whole run). */
struct sim_result {
	uint64_t events;              /* events processed */
	uint64_t updates;             /* pushes the server took */
	size_t workers;
	size_t state_bytes;           /* memory of the simulator's own arrays (workers, links, heap) */
	size_t held_bytes;            /* heap memory the whole simulation held at its end (malloc's
				       * count; includes the consistency core and, when real, training) */
	double steps_min, steps_median, steps_max;
	uint64_t total_steps;
	double wait_fraction;         /* sum wait / (sum wait + sum compute) */
	double staleness_mean, staleness_p99;  /* NAN when no update had one */
	uint64_t bytes_moved;
	double sim_end_s;             /* simulated time at the end */
	bool stopped_accuracy;        /* stop.accuracy reached (train real) */
};

/* Run the simulation. Returns 0, or -EINVAL (something the simulator does not model, message
 * in err), -ENOMEM, -EIO (a trace file could not be written; err names it). */
int sim_run(const struct sim_opts *o, struct sim_result *res, char *err, size_t errlen);

/* The parameter count of the scenario's model (0 on a bad spec). */
size_t sim_model_params(const struct scenario *sc);

/* Measure on this host: one step of the scenario's model (a gradient of train.batch samples)
 * and the server's cost of applying one update. Median of a few repetitions, ns. Returns 0 or
 * -ENOMEM. */
int sim_measure_costs(const struct scenario *sc, int64_t *step_ns, int64_t *server_ns);

#endif
