/* netem/linkd_comp: how much earlier than its release time the emulator hands a held packet back
 * to the kernel, so that the packet is delivered at that time (pure: no clock, no I/O).
 *
 * After linkd decides to release a packet it still has to write the verdict, and the kernel
 * re-injects the packet into the stack inside that write (NFQUEUE runs the rest of the receive
 * path, up to the receiving socket, in the verdict's sendto), one packet of a batch after the
 * other. That path is systematic: on a given host and load it takes a near-constant time, which
 * used to add to every emulated delay. The emulator measures it for every verdict write (release
 * decision to the write's return, spread over the batch's positions: linkd_comp_sample_ns), keeps
 * an exponential average of the measurements (linkd_comp_add) and releases that much early.
 *
 * Bounds: the estimate is never negative and never above the caller's max_ns; a measurement over
 * LINKD_COMP_STALL_NS (a preempted emulator, a stalled host) is not the path's usual cost and is
 * not averaged in. The emulator never releases a packet before it has read it, so a delay shorter
 * than the estimate still runs from the receive time (linkd). */
#ifndef STALENET_LINKD_COMP_H
#define STALENET_LINKD_COMP_H

#include <stdint.h>

#define LINKD_COMP_MAX_NS 200000     /* the default bound of the estimate */
#define LINKD_COMP_STALL_NS 1000000  /* a longer measurement is a stall, not the path */
#define LINKD_COMP_WEIGHT 8          /* each measurement moves the average 1/8 of the way */

struct linkd_comp {
	int64_t est_ns;   /* the current estimate, in [0, max_ns] */
	int64_t max_ns;   /* its bound */
	uint64_t n;       /* measurements averaged in */
	uint64_t stalls;  /* measurements rejected as stalls */
};

/* Empty estimator (estimate 0) bounded by max_ns (clamped to [0, LINKD_COMP_STALL_NS]). */
void linkd_comp_init(struct linkd_comp *c, int64_t max_ns);

/* One verdict write's measurement: the releases were decided at decide_ns, the write began at
 * start_ns and returned at end_ns (one clock, ns), and it carried n released packets which the
 * kernel delivered one after the other during the write. Returns the mean over the n packets of
 * the time from the decision to the packet's delivery (the k-th of n taken as delivered at
 * start + (end - start) * k / n), in ns, >= 0; -1 when n is 0 or the times are out of order. */
int64_t linkd_comp_sample_ns(int64_t decide_ns, int64_t start_ns, int64_t end_ns, uint32_t n);

/* Average one measurement in (a negative one is ignored). The first sets the estimate; later
 * ones move it by 1/LINKD_COMP_WEIGHT of the difference; the result is clamped to the bound. */
void linkd_comp_add(struct linkd_comp *c, int64_t sample_ns);

/* The estimate in ns: how much earlier than its release time to write a packet's verdict. */
static inline int64_t linkd_comp_ns(const struct linkd_comp *c)
{
	return c->est_ns;
}

#endif
