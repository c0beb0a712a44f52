/* node/core_p2p: the peer-to-peer barrier's and gossip's decisions for one peer, pure.
 *
 * What node/engine_p2p decides, without its sockets and threads: which peers a barrier
 * crossing checks and which of them must be asked for their clock (CLOCK_REQ), whether the
 * crossing may pass once they answered, when a responder answers a held CLOCK_REQ, which peers
 * a gossip round pulls from and how their replicas are weighted, and, for a restarted or late
 * peer's join, whom it waits for, whom it takes out and from which peer it resumes, and when a
 * peer that does not answer a pull is silent. No I/O, no clock, no globals (time is passed in): the driver reports what it
 * learnt (a peer's clock, a peer's liveness) and asks; randomness comes from the two sampling
 * streams the core keeps, seeded as the emulator always seeded them, so a run draws the same
 * samples as before the core existed. No process holds the clock vector: every peer has its
 * own core with its own view (PSP's point).
 *
 * One crossing at clock c: core_p2p_barrier_begin (the peers to ask; none: go on), the driver
 * asks them and reports each answer with core_p2p_on_clock (and deaths with
 * core_p2p_set_alive), then core_p2p_barrier_end says whether the condition holds. */
#ifndef STALENET_CORE_P2P_H
#define STALENET_CORE_P2P_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/barrier.h"

/* One peer's configuration; fill with designated initialisers. merge = false: no parameter
 * exchange (ensemble); weighted = true: replicas weighted by their training samples (combine
 * average), else plain mean (gossip). local_steps (H >= 1): a gossip round every H steps. */
struct core_p2p_conf {
	uint32_t n, self;
	struct barrier_params bp;
	uint32_t fanout;
	int64_t local_steps;
	bool merge, weighted;
	uint64_t seed;
	int64_t dead_after_ns;  /* consistency.dead_after: a pull's longest wait (0: unbounded) */
	bool behind;            /* serves no replica until core_p2p_caught_up: a process before its
				 * start, a restarted or late one until its join is over */
};

struct core_p2p;

/* New core (n >= 1, self < n, local_steps >= 1); every peer starts live with clock 0 known.
 * NULL on a bad conf or no memory. */
struct core_p2p *core_p2p_new(const struct core_p2p_conf *conf);
/* Free *p and set it to NULL; NULL and *p == NULL are fine. */
void core_p2p_destroy(struct core_p2p **p);

/* Peer j is live (reachable, has not said BYE) or not. The peer itself is always live. */
void core_p2p_set_alive(struct core_p2p *c, uint32_t j, bool live);
/* Whether peer j is live in this core's view (false for j out of range). */
bool core_p2p_is_alive(const struct core_p2p *c, uint32_t j);
/* Peer j answered with clock `clock`: its known clock becomes the larger of the two. */
void core_p2p_on_clock(struct core_p2p *c, uint32_t j, int64_t clock);
/* The last clock heard from peer j (0 before any; -1 for j out of range). */
int64_t core_p2p_known(const struct core_p2p *c, uint32_t j);

/* Begin the barrier crossing before step clock+1: draws the crossing's sample (pBSP, pSSP)
 * from the barrier stream or takes every live other (BSP, SSP), and lists the checked peers
 * whose known clock is below the threshold. Returns how many (0: go on at once; always 0 for
 * ASP and a lone peer); *ask (owned by the core, valid until the next call) lists them and
 * *threshold is the clock their CLOCK_REQ asks for. */
size_t core_p2p_barrier_begin(struct core_p2p *c, int64_t clock, int64_t *threshold,
			      const uint32_t **ask);
/* End the crossing begun at clock: every asked peer answered (core_p2p_on_clock) or died
 * (core_p2p_set_alive). Whether the barrier condition holds over the peers checked that are
 * still live; a peer that came back meanwhile was not part of this crossing. */
bool core_p2p_barrier_end(struct core_p2p *c, int64_t clock);

/* Whether a responder at clock my_clock answers a CLOCK_REQ asking for threshold now (else it
 * holds it until its clock reaches the threshold). */
bool core_p2p_answerable(int64_t my_clock, int64_t threshold);

/* Whether a gossip round comes before step clock+1: parameters are merged, fanout > 0,
 * clock > 0 and clock is a multiple of H. */
bool core_p2p_gossip_due(const struct core_p2p *c, int64_t clock);
/* The round's partners: fanout live others that are not silent, drawn from the gossip stream
 * (with nobody silent, draw for draw as before silence existed). Returns how many;
 * *partners (owned by the core, valid until the next call) lists them. */
size_t core_p2p_gossip_partners(struct core_p2p *c, const uint32_t **partners);
/* Silence. A pull is answered at once by the responder's service thread, so a peer that has not
 * answered one for dead_after_ns is stopped or cut off though still connected (or its replica
 * takes longer than that to come: dead_after must exceed a replica's transfer time): the wait for
 * it ends, and it is silent (left out of the gossip partners, not of barriers: a held CLOCK_REQ
 * is no sign of silence) until it is heard from after that. Times are the driver's monotonic
 * ns. */

/* Something valid came from peer j at now_ns (it may be older than the latest: only a word
 * later than the finding of silence counts). Returns true when j was silent and is back. */
bool core_p2p_on_heard(struct core_p2p *c, uint32_t j, int64_t now_ns);
/* A pull sent to peer j at asked_ns is still unanswered at now_ns: whether to stop waiting for
 * it (dead_after_ns > 0 and the request is that old, whatever else came from j: the wait is
 * bounded). When so, j is silent from now_ns on. */
bool core_p2p_pull_gives_up(struct core_p2p *c, uint32_t j, int64_t asked_ns, int64_t now_ns);
/* Whether peer j is silent (false for j out of range). */
bool core_p2p_is_silent(const struct core_p2p *c, uint32_t j);

/* A restarted or late peer. Its process starts with a fresh, untrained model at clock 0, and
 * the others take it back as soon as its connection completes, before its join has pulled a
 * replica and clock from them. Until then (conf.behind, up to core_p2p_caught_up) it serves no
 * replica: it answers a pull with its word that it is behind, which the puller counts as an
 * answer that brings nothing (core_p2p_pull_reply), so no gossip round or evaluation merges the
 * untrained model into a trained one. */
bool core_p2p_serves_replica(const struct core_p2p *c);
/* Training starts: at the start for a peer that started with the run, else once its join is
 * over (resumed from a peer, or nobody was ahead or left). Serve from now on. */
void core_p2p_caught_up(struct core_p2p *c);
/* What a pull's answer is, from its payload's n floats and its weight: a replica (n == nparams,
 * weight a finite count >= 0), its owner's word that it is behind (no payload, weight < 0), or
 * bad (counted, changes nothing: the owner stays awaited). */
enum core_p2p_reply { CORE_P2P_REPLY_REPLICA, CORE_P2P_REPLY_BEHIND, CORE_P2P_REPLY_BAD };
enum core_p2p_reply core_p2p_pull_reply(size_t n, size_t nparams, double weight);

/* Weight of a pulled replica whose owner reported `reported` training samples: 1 for gossip or
 * a report that is not > 0, else the report. */
double core_p2p_merge_weight(const struct core_p2p *c, double reported);
/* Weight of my own replica in the merge, with my `samples` training samples. */
double core_p2p_own_weight(const struct core_p2p *c, uint64_t samples);

/* The live others, in index order. Returns how many; *peers is owned by the core, valid until
 * the next call. */
size_t core_p2p_live_others(struct core_p2p *c, const uint32_t **peers);
/* A restarted or late peer at clock `clock`: the peer to resume from among those that
 * answered (answered[j]) with clocks their[j]: the slowest, when it is ahead of clock. Returns
 * its index, *lo its clock; UINT32_MAX when there is nobody to resume from. */
uint32_t core_p2p_resume_from(const struct core_p2p *c, int64_t clock, const bool *answered,
			      const int64_t *their, int64_t *lo);

/* The join of a restarted or late peer. It asks every live other for its clock and for its
 * view of who departed (core_p2p_join_begin), reports each answer (core_p2p_join_on_answer) and
 * waits while core_p2p_join_waits_for says so: for a peer that has not answered, unless an
 * answer counts it as departed and this peer never reached it (no connection of ours to it
 * completed: core_p2p_on_reached). So a join does not wait for a peer that crashed before it
 * started. core_p2p_join_end (all answered or skipped, or the driver's deadline passed) takes
 * every asked peer that neither answered nor was reached out of every barrier and sample until
 * it is reached, and names the peer to resume from. */

/* Begin a join: forgets any earlier one and lists the peers to ask (the live others, in index
 * order; *ask owned by the core, valid until the next call). Returns how many. */
size_t core_p2p_join_begin(struct core_p2p *c, const uint32_t **ask);
/* Peer j answered the join with clock `clock` (also core_p2p_on_clock) and, unless departed is
 * NULL (it sent no view), departed[k] for each of the n peers k it counts as departed. */
void core_p2p_join_on_answer(struct core_p2p *c, uint32_t j, int64_t clock, const bool *departed);
/* Peer j answered the join, but it is catching up itself (a restart at about the same time):
 * the join does not wait for it, its view counts, its clock is none to resume from. */
void core_p2p_join_on_behind(struct core_p2p *c, uint32_t j, const bool *departed);
/* Whether the join still waits for peer j: j was asked, has not answered, and either no answer
 * counts it as departed or this peer reached it. */
bool core_p2p_join_waits_for(const struct core_p2p *c, uint32_t j);
/* End the join at clock `clock`: the asked peers that neither answered nor were reached are out
 * (core_p2p_is_alive false) until core_p2p_on_reached. Returns the peer to resume from (the
 * slowest answer, when it is ahead of clock) with *lo its clock, else UINT32_MAX. */
uint32_t core_p2p_join_end(struct core_p2p *c, int64_t clock, int64_t *lo);
/* A connection of ours to peer j completed (a handshake): j counts as reached from now on, and
 * is back in if a join had taken it out. */
void core_p2p_on_reached(struct core_p2p *c, uint32_t j);

/* What a join does when its exchange ends with answers still missing. */
enum core_p2p_join_next {
	CORE_P2P_JOIN_RESUME,   /* a peer answered: core_p2p_join_end names whom to resume from */
	CORE_P2P_JOIN_AGAIN,    /* nobody answered, but a peer it waits for may yet: ask again */
	CORE_P2P_JOIN_ALONE,    /* nobody answered and nobody is left to wait for: the peer goes
				 * on from its own clock (core_p2p_join_end) and says so */
};
/* The join has waited waited_ns in all and no answer may have come. It asks again while it
 * waits for a peer that is live in this view (core_p2p_join_waits_for, core_p2p_is_alive) and
 * either reached (its connection completed: its process runs) and not silent for dead_after_ns
 * (0: no bound but the run's end), or not reached yet and waited for less than reach_ns (a peer
 * that never accepts a connection in that time has crashed or ended). So a restarted peer never
 * starts over from its own clock while a peer that could answer exists. */
enum core_p2p_join_next core_p2p_join_next(const struct core_p2p *c, int64_t waited_ns,
					   int64_t reach_ns);
/* The join's pull of the replica of the peer it resumes from (from, core_p2p_join_end) has had
 * no answer, neither a replica nor the word that its owner is behind, for waited_ns in all:
 * whether to ask again. While from is live in this view and dead_after_ns (when > 0) has not
 * passed since the pull began; else the peer goes on from from's clock with its own model. */
bool core_p2p_resume_asks_again(const struct core_p2p *c, uint32_t from, int64_t waited_ns);

/* How long one round of a join's asking lasts, ns: the clock exchange and the replica pull are
 * each asked in rounds of this (core_p2p_join_next, core_p2p_resume_asks_again decide after
 * each), and it is the reach_ns of core_p2p_join_next. node/engine_p2p and the simulator
 * (sim/sim_p2p) ask in the same rounds. */
#define CORE_P2P_JOIN_ROUND_NS 2000000000ll

#endif
