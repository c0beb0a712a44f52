/* sim/sim_p2p: discrete-event simulation of one planned run of a `topology: p2p` scenario.
 *
 * Every peer runs node/engine_p2p's loop on the virtual clock, and every decision it makes
 * comes from its own node/core_p2p, the core the ZeroMQ peer runs, seeded the same way: which
 * peers a barrier crossing asks for their clock and with which threshold (BSP, SSP, ASP,
 * pBSP, pSSP), whether their answers let it go on, when a responder answers a held CLOCK_REQ,
 * when a gossip round is due and whom it pulls. Messages (CLOCK_REQ, CLOCK_REP, PULL, MODEL,
 * BYE) ride sim/sim_net. Outputs through sim/sim_record, in the emulator's p2p trace schema
 * (docs/engines.md: wait_s is barrier plus gossip, staleness the most lagging merged replica).
 * train real through sim/sim_replicas (not with combine ensemble); churn as the engine lives it: crash, restart and late join (its catch-up), leave
 * (docs/simulation.md). Called by sim_run. */
#ifndef STALENET_SIM_P2P_H
#define STALENET_SIM_P2P_H

#include <stddef.h>

#include "sim/sim.h"

/* Peers above this are refused: each peer's core keeps O(peers) state (about 32 bytes per
 * peer), so the simulation holds O(peers^2) bytes. */
#define SIM_P2P_MAX_PEERS 2048u

/* As sim_run, for a p2p run (o->server_cost_ns unused). */
int sim_p2p_run(const struct sim_opts *o, struct sim_result *res, char *err, size_t errlen);

#endif
