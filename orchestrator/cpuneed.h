/* orchestrator/cpuneed: the CPU a run will ask of the host, estimated before it runs.
 *
 * `stalenet check` prints it so a user learns before a run, not after, that the scenario wants
 * more cores than the host has (the host-saturation guard, orchestrator/hostload, then flags
 * the run). The model's step cost is measured here, in process, with node/model on a batch of
 * the scenario's size (CPU time of this thread, so a busy host does not inflate it); each
 * worker's demand is its time on a core per step (the gradient times its straggler slowdown,
 * plus its messages) over the length of its step (plus its mean extra delay, which the node
 * sleeps, and the links' round trip); the parameter servers add the messages of every step;
 * with the nfq backend the userspace emulator's share is added from the bytes a step moves. */
#ifndef STALENET_CPUNEED_H
#define STALENET_CPUNEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "orchestrator/plan.h"

/* The emulator's CPU per CPUNEED_PACKET_BYTES carried in one shaped direction (NFQUEUE verdict
 * round trip, the kernel's delivery inside it, the release heap): not measured at check time,
 * but taken from tests/bench/bench_linkd_share.sh while training (4.4-5.1 s of emulator CPU per
 * GB carried once the nodes' TCP sends offloaded packets of >= 16 segments, netem/link_shaper;
 * 10.4-11.2 s before, docs/precision.md). */
#define CPUNEED_NFQ_PACKET_S 7e-6
#define CPUNEED_PACKET_BYTES 1448.0
/* CPU of one step's messages (push and reply: copies, checksums, the TCP stack, at both
 * ends): a floor plus a cost per byte, fitted to the step rates of one compute-bound worker on
 * unshaped links (scenarios/guard-capacity.yaml: softmax 0.94 ms a step with 63 KB of
 * messages, MLP 784-256-10 2.4 ms with 1.6 MB, of which 0.02 and 0.33 ms gradient;
 * docs/experiments.md). */
#define CPUNEED_MSG_FLOOR_S 0.85e-3
#define CPUNEED_MSG_S_PER_BYTE 0.7e-9

struct cpuneed {
	double step_cost_s;      /* measured CPU seconds of one gradient step of the model */
	double workers_cores;    /* nodes: sum over workers (peers) of their time on a core per
				    step / step length, plus servers_cores */
	double servers_cores;    /* the parameter servers' share (their messages), <= 1 each */
	double emulator_cores;   /* the nfq emulator's share (0 with the kernel backend) */
	double need_cores;       /* workers_cores + emulator_cores */
	int host_cores;          /* online CPUs */
	bool over;               /* need_cores > host_cores */
};

/* CPU seconds of one gradient step of the model of sc (model.kind, hidden, train.batch) on
 * random inputs: the median of reps steps after one warm-up step; *nparams the model's
 * parameter count. Returns 0 or -errno. */
int cpuneed_step_cost(const struct scenario *sc, int reps, double *cost_s, size_t *nparams);

/* Estimate run's demand from a measured step cost and the model's parameter count (bytes a
 * step moves). nfq: add the emulator's share. */
void cpuneed_estimate(const struct plan_run *run, double step_cost_s, size_t nparams, bool nfq,
		      int host_cores, struct cpuneed *out);

/* The estimate of run run_id as a line of `stalenet check` output, and a warning line when
 * the workers alone, or with the nfq emulator, want more than the host's cores. */
void cpuneed_print(FILE *out, const char *run_id, const struct cpuneed *e);

#endif
