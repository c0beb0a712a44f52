/* sim/sim_status: the sticky outcome of one simulated run.
 *
 * A simulator keeps going through many small steps that can each fail (no memory, a write
 * error, a core refusing an event); the first failure wins: its code and message stay, later
 * ones are dropped, and the event loop stops when it sees rc set. Pushing an event onto the
 * run's queue is the most common such step, so it lives here too. No I/O. */
#ifndef STALENET_SIM_STATUS_H
#define STALENET_SIM_STATUS_H

#include <stddef.h>
#include <stdint.h>

struct sim_heap;

struct sim_status {
	char *err;      /* the caller's message buffer (errlen bytes) */
	size_t errlen;
	int rc;         /* 0, or the first failure's negative errno */
};

/* Record a failure unless one is recorded already: the message into st->err, rc into st->rc.
 * Returns st->rc (the first failure's code). */
int sim_status_fail(struct sim_status *st, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Push an event onto h; when the queue cannot grow, record -ENOMEM in st. */
void sim_status_push(struct sim_status *st, struct sim_heap *h, int64_t t_ns, uint32_t who, uint16_t kind,
		     uint16_t gen);

#endif
