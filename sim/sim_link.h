/* sim/sim_link: the time a message takes to cross one direction of an emulated link.
 *
 * The model (docs/simulation.md, "Links") follows what the emulator's links do to a TCP
 * connection carrying a message of B bytes, cut into k = ceil(B / mss) segments:
 *   queueing + serialisation  the link sends one message at a time at rate_bps (FIFO: a
 *                             message waits until the one before it has left; rate 0 = none)
 *   propagation               delay plus jitter drawn as netem draws it: uniform in
 *                             [delay - jitter, delay + jitter] per packet (no table), so the
 *                             message is complete when the latest of its k packets arrives
 *                             (max of k uniforms); other distributions: one normal draw with
 *                             sd = jitter. Never below 0.
 *   loss as TCP sees it       each segment is lost with p (loss, or the long-run rate of a
 *                             Gilbert-Elliott chain); a lost segment is recovered only by a
 *                             retransmission timeout RTO = rtt + max(rto_min, 4 jitter) (how
 *                             Linux bounds its RTO), each further loss of the same segment
 *                             doubling it (exponential backoff, at most 120 s, as TCP_RTO_MAX);
 *                             after a timeout the congestion window is 1: the segments already
 *                             in flight behind the lost one (a window of 10, Linux's initial
 *                             window) wait in the receiver's buffer, and the r segments beyond
 *                             them need ceil(log2(r + 1)) more round trips of slow start
 *                             (window collapse). Fast retransmit is not modelled.
 *   loss that changes         a direction whose loss changes over time (network.timeline,
 *                             network.trace) carries its schedule (struct sim_link_sched): a
 *                             segment is lost under the loss in force when it is sent, and each
 *                             retransmission under the loss in force at its own time on the
 *                             backoff schedule above, so a message sent into a blackout (100%)
 *                             arrives at the first retransmission after the link is back, not
 *                             never; after tcp_retries2 (15) lost retransmissions the model stops
 *                             there (the connection would be reset).
 * Pure apart from the link's own "busy until" time; randomness comes from the caller's rng. */
#ifndef STALENET_SIM_LINK_H
#define STALENET_SIM_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/link_params.h"

struct rng;

/* TCP settings of the model. */
struct sim_link_tcp {
	int64_t rto_min_ns;  /* simulation.rto_min (Linux: 200 ms) */
	uint32_t mss;        /* bytes of payload per segment (1448 on Ethernet with timestamps) */
	bool fast_recovery;  /* simulation.loss_recovery fast: sim_link_loss_fast_ns, else
			      * sim_link_loss_ns (timeouts) */
};

/* How one direction's loss changes over time: from at_ns[k] on each segment is lost with
 * probability p[k] (at_ns ascending), before at_ns[0] with base. p may be 1 (a blackout). */
struct sim_link_sched {
	double base;
	const int64_t *at_ns;
	const double *p;
	size_t n;
};

/* One direction of a link: its parameters (borrowed; a timeline change swaps the pointer), the
 * time its transmitter is free again, and its loss schedule (borrowed; NULL: the loss of p,
 * constant; the model then draws exactly as it did before schedules existed). */
struct sim_link {
	const struct link_params *p;
	int64_t busy_ns;
	const struct sim_link_sched *sched;
};

/* What sim_link_send spent (for tests and calibration); all ns. */
struct sim_link_cost {
	int64_t queue_ns, serial_ns, prop_ns, loss_ns;
	uint32_t segments, lost;
};

/* Loss cost of one message of `segments` segments on a link losing each with probability p
 * (0 <= p < 1; p >= 1 counts as 0.999999): retransmission timeouts with backoff plus slow start
 * after each, as above. rto_ns is the first timeout, rtt_ns the round trip. *lost (may be NULL)
 * gets the number of segments lost at least once. */
int64_t sim_link_loss_ns(double p, uint32_t segments, int64_t rto_ns, int64_t rtt_ns, struct rng *r,
			 uint32_t *lost);

/* Loss cost as Linux's SACK/RACK and tail loss probe recover it (simulation.loss_recovery
 * fast): a lost segment with a segment of the message behind it is detected when that one is
 * acknowledged and retransmitted after a reordering window of a quarter round trip (1.25
 * rtt); a lost last segment by a probe after 2 rtt (a one-segment message: 1.5 rtt plus the
 * 200 ms delayed-ACK allowance); a retransmission lost again waits for the timeout rto_ns,
 * doubled each time. The window is halved, not collapsed: no slow start after. *lost as
 * sim_link_loss_ns. */
int64_t sim_link_loss_fast_ns(double p, uint32_t segments, int64_t rto_ns, int64_t rtt_ns, struct rng *r,
			      uint32_t *lost);

/* Round trips beyond the first that a message of `bytes` needs when its sender starts from the
 * initial window of 10 segments (a new connection, or one whose sender was idle for longer than
 * its RTO: Linux's tcp_slow_start_after_idle): slow start sends 10, 20, 40, ... segments per
 * round trip. 0 for a message that fits the initial window. */
uint32_t sim_link_slow_start_rounds(const struct sim_link_tcp *tcp, uint64_t bytes);

/* The per-segment loss probability of p's loss settings (random loss, or Gilbert-Elliott's
 * long-run rate). */
double sim_link_loss_prob(const struct link_params *p);

/* The per-segment loss probability of direction l at t_ns: its schedule's, else its
 * parameters' (sim_link_loss_prob). In [0, 1]. */
double sim_link_loss_at(const struct sim_link *l, int64_t t_ns);

/* Send `bytes` into l at now_ns over a path of round trip rtt_ns: returns the time the message
 * has crossed the link (>= now_ns) and advances l->busy_ns. cost (may be NULL) gets the parts. */
int64_t sim_link_send(struct sim_link *l, const struct sim_link_tcp *tcp, uint64_t bytes, int64_t now_ns,
		      int64_t rtt_ns, struct rng *r, struct sim_link_cost *cost);

#endif
