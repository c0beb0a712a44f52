/* sim/sim_record: the traces and statistics of a simulated run whose nodes all train (p2p
 * peers, all-reduce ring members, the centralized trainer), in the emulator's schema
 * (docs/traces.md) through collectors/csv: nodes/<node>.csv (at most simulation.node_files
 * nodes), workers.csv (one row per node), progress.csv (the live nodes' clocks every 100 ms);
 * and the numbers of struct sim_result (final steps, wait fraction, staleness mean and p99).
 * The driver reports each completed step, liveness and who waits; this module keeps the sums,
 * a histogram of the live clocks (for progress's min/median/max in O(range)) and one of the
 * staleness values (for the p99). No clock: every time is the driver's simulated ns. */
#ifndef STALENET_SIM_RECORD_H
#define STALENET_SIM_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "orchestrator/plan.h"
#include "sim/sim.h"

struct sim_record;

/* Open the outputs of n nodes (node k is plan node node_of[k]; run and node_of borrowed) in dir
 * (NULL: write nothing, statistics only). Every node starts not live at clock 0. NULL with err
 * filled ("cannot open PATH", no memory). */
struct sim_record *sim_record_new(const struct plan_run *run, const char *dir, const uint32_t *node_of,
				  uint32_t n, char *err, size_t errlen);
/* Close the files and free *p; NULL and *p == NULL are fine. */
void sim_record_destroy(struct sim_record **p);

/* Node k is live (joined and not done) or not. */
void sim_record_live(struct sim_record *r, uint32_t k, bool live);
/* Node k is waiting at a barrier (counted in progress.csv's waiting) or not. */
void sim_record_waiting(struct sim_record *r, uint32_t k, bool waiting);
/* Node k completed a step at t_ns: its clock is now step; compute and wait in s; staleness < 0:
 * none; version is the trace's model_version; tx, rx bytes during the step. 0 or -EIO. */
int sim_record_step(struct sim_record *r, uint32_t k, int64_t t_ns, uint32_t step, double compute_s,
		    double wait_s, int64_t staleness, uint64_t version, uint64_t tx, uint64_t rx);
/* One progress.csv row at t_ns. 0 or -EIO. */
int sim_record_progress(struct sim_record *r, int64_t t_ns);
/* Node k's clock becomes `clock` without a step (a restarted peer resuming elsewhere). 0 or
 * -ENOMEM. */
int sim_record_set_clock(struct sim_record *r, uint32_t k, uint32_t clock);
/* Node k's clock (steps completed). */
uint32_t sim_record_clock(const struct sim_record *r, uint32_t k);

/* Write workers.csv and fill the statistics of res (events, updates, sim_end_s and held_bytes
 * are the driver's). 0 or -EIO (err names the file) or -ENOMEM. */
int sim_record_finish(struct sim_record *r, struct sim_result *res, char *err, size_t errlen);
/* Bytes of the record's own arrays. */
size_t sim_record_bytes(const struct sim_record *r);

#endif
