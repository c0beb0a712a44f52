/* sim/sim_heap: the simulator's event queue, a binary min-heap of timed events.
 *
 * Events are ordered by time, then by the order they were pushed (a sequence number the heap
 * assigns), so two events at the same simulated instant always come out in the same order:
 * the simulation is a pure function of its inputs. An entry is 24 bytes; the heap grows by
 * doubling and never shrinks. No clock, no I/O. */
#ifndef STALENET_SIM_HEAP_H
#define STALENET_SIM_HEAP_H

#include <stddef.h>
#include <stdint.h>

/* One event: what happens (kind, a generation tag for cancelling by staleness) to whom (who)
 * at t_ns. The meaning of kind, gen and who is the caller's. */
struct sim_event {
	int64_t t_ns;
	uint64_t seq;        /* assigned by sim_heap_push */
	uint32_t who;
	uint16_t kind;
	uint16_t gen;
};

struct sim_heap;

/* A new empty heap with room for cap events (grown on demand). NULL on no memory. */
struct sim_heap *sim_heap_new(size_t cap);
/* Free *p and set it to NULL; NULL and *p == NULL are fine. */
void sim_heap_destroy(struct sim_heap **p);

/* Add an event (its seq is set here). Returns 0 or -ENOMEM. */
int sim_heap_push(struct sim_heap *h, int64_t t_ns, uint32_t who, uint16_t kind, uint16_t gen);
/* Remove the earliest event into *out. Returns 1, or 0 when the heap is empty. */
int sim_heap_pop(struct sim_heap *h, struct sim_event *out);
/* The earliest event without removing it, or NULL when empty. */
const struct sim_event *sim_heap_peek(const struct sim_heap *h);
size_t sim_heap_len(const struct sim_heap *h);
/* Bytes held by the heap's storage. */
size_t sim_heap_bytes(const struct sim_heap *h);

#endif
