/* node/fleet_cost: the cost model behind fleet.strategy auto (pure: no I/O, no clock).
 *
 * A version can travel as its weights (the lossless delta the device queues anyway) or as a
 * replay (the minibatches, recomputed by the registry). What each costs until the registry holds
 * it, in seconds:
 *
 *   weights: delta_bytes / goodput
 *   replay:  replay_bytes / goodput + steps * step_s     (the registry redoes the steps)
 *
 * goodput is the link's bandwidth as this device has seen it: a sync message's bytes over the
 * time from its send to its acknowledgement MINUS the shortest such time seen (the round trip and
 * the registry's fixed work, which every message pays and which would otherwise make a fast link
 * look slow for small messages), smoothed; step_s the device's own compute time per step (the
 * registry runs the same code on a comparable core). auto sends the cheaper one; a replay
 * that does not recompute exactly falls back to the weights. Storage is the same either way (a
 * recomputed replay is stored as its delta), so it does not enter the choice. */
#ifndef STALENET_FLEET_COST_H
#define STALENET_FLEET_COST_H

#include <stdbool.h>
#include <stddef.h>

#define FLEET_COST_GOODPUT_INIT 1e6 /* bytes/s assumed before the first acknowledgement */
#define FLEET_COST_ALPHA 0.3        /* weight of a new sample in the moving averages */
#define FLEET_COST_MIN_XFER_S 1e-4  /* transfer time floor of one message (a 1 Gbit/s link moves
				       * 12.5 KB in it) */

struct fleet_cost {
	double goodput_Bps;  /* smoothed; FLEET_COST_GOODPUT_INIT until measured */
	double floor_s;      /* shortest send-to-ack time seen (0 until one is) */
	double step_s;       /* smoothed compute seconds per step; 0 until measured */
	bool have_goodput, have_step;
};

void fleet_cost_init(struct fleet_cost *c);

/* A sync message of bytes was acknowledged secs after it was sent (ignored unless both > 0):
 * one bandwidth sample, bytes / max(secs - floor_s, FLEET_COST_MIN_XFER_S). */
void fleet_cost_goodput(struct fleet_cost *c, double bytes, double secs);

/* One training step took secs of compute (ignored unless > 0). */
void fleet_cost_step(struct fleet_cost *c, double secs);

/* Seconds until the registry holds a version sent as delta_bytes of weights, or as a replay of
 * replay_bytes and steps steps. */
double fleet_cost_weights_s(const struct fleet_cost *c, size_t delta_bytes);
double fleet_cost_replay_s(const struct fleet_cost *c, size_t replay_bytes, size_t steps);

/* True when the replay is the cheaper way (ties go to the weights: no recomputation to fail). */
bool fleet_cost_prefer_replay(const struct fleet_cost *c, size_t delta_bytes, size_t replay_bytes,
			      size_t steps);

#endif
