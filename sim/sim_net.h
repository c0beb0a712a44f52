/* sim/sim_net: the links of a simulated run for the drivers without a server (sim/sim_p2p,
 * sim/sim_ring). Every plan node has an up and a down direction (sim/sim_link) with its
 * current parameters: the plan's, then network.timeline changes and network.trace rows at
 * their times (the driver schedules them: sim_net_change_at, sim_net_apply). A message from
 * node a to node b crosses a's up direction, then b's down direction (the star through the
 * switch the testbed builds), over a path of round trip 2 (delay_a,up + delay_b,down). Messages
 * of one ordered pair are delivered in the order sent (one TCP connection: jitter does not
 * reorder what TCP delivers) when the driver asks for it, and a connection whose sender was idle
 * longer than its RTO restarts from the initial window (Linux's default
 * tcp_slow_start_after_idle) when the driver keeps its last send time. A direction whose loss
 * changes over time gets its schedule (sim/sim_link's struct sim_link_sched, from the timeline
 * and the trace), so a message retransmits through a blackout and arrives once the link is
 * back; a connection's handshake retries its SYN as Linux does under the loss in force
 * (sim_net_connect). Randomness: one stream from the run
 * seed, so the same sequence of sends gives the same times. */
#ifndef STALENET_SIM_NET_H
#define STALENET_SIM_NET_H

#include <stddef.h>
#include <stdint.h>

#include "orchestrator/plan.h"

struct sim_net;

/* The links of run (borrowed). NULL with err filled (network.trace unreadable, no memory). */
struct sim_net *sim_net_new(const struct plan_run *run, char *err, size_t errlen);
void sim_net_destroy(struct sim_net **p);

/* Number of link changes to schedule (timeline events, then trace rows), and change i's time. */
size_t sim_net_changes(const struct sim_net *net);
int64_t sim_net_change_at(const struct sim_net *net, size_t i);
/* Apply change i (in time order). */
void sim_net_apply(struct sim_net *net, size_t i);

/* A message of `bytes` from plan node a to plan node b sent at now_ns: when it has arrived.
 * *fifo (may be NULL): the arrival of the previous message on the same connection; the result
 * is never before it, and is stored back. *last_send (may be NULL: not modelled): when the
 * sender last sent on this connection (INT64_MIN: never); a sender idle for longer than the
 * path's RTO starts from the initial window (sim_link_slow_start_rounds more round trips);
 * now_ns is stored back. */
int64_t sim_net_send(struct sim_net *net, uint32_t a, uint32_t b, uint64_t bytes, int64_t now_ns,
		     int64_t *fifo, int64_t *last_send);
/* A connection from plan node a to plan node b begun at now_ns (a process starting, ZeroMQ
 * connecting): when its handshake is complete, a round trip after the first attempt that gets
 * through: SYNs at now + 0, 1, 3, 7, 15, 31, 63 s (Linux's 1 s initial SYN timeout, doubled,
 * tcp_syn_retries 6), each passing with the SYN's and the SYN-ACK's chances under the loss in
 * force then (a lossless path: now + the round trip, no draw); after 127 s connect() fails and
 * ZeroMQ begins again 100 ms later. INT64_MAX when no attempt at or before limit_ns gets
 * through, or when the path drops everything from then on (no later change). */
int64_t sim_net_connect(struct sim_net *net, uint32_t a, uint32_t b, int64_t now_ns, int64_t limit_ns);
/* The one-way propagation delay from plan node a to plan node b now (a's up, b's down), ns:
 * when a connection's closing or opening is noticed at b. */
int64_t sim_net_delay_ns(const struct sim_net *net, uint32_t a, uint32_t b);
/* Bytes of the net's own arrays. */
size_t sim_net_bytes(const struct sim_net *net);

#endif
