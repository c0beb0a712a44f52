/* netem/netem_heap: a binary min-heap of packets held until their release time.
 *
 * linkd keeps every held packet of every queue in one heap ordered by (t_ns, seq); seq is a
 * global arrival counter, so packets with equal release times leave in arrival order (FIFO for
 * constant delay, like netem's tfifo). Pure data structure, no I/O.
 *
 * Most pushes come in order (a constant delay, or a jitter smaller than the gaps between
 * packets): like netem's tfifo, which appends to a list when a packet is not earlier than the
 * last one, an entry not before the latest appended one goes to a sorted ring (O(1) in and out)
 * and only the others to the binary heap; the earliest entry is the earlier of the two heads. */
#ifndef STALENET_NETEM_HEAP_H
#define STALENET_NETEM_HEAP_H

#include <stddef.h>
#include <stdint.h>

struct netem_heap_entry {
	int64_t t_ns;      /* release time, CLOCK_MONOTONIC */
	uint64_t seq;      /* tie-break: arrival order */
	uint32_t id;       /* NFQUEUE packet id */
	uint16_t q;        /* index of the owning queue */
	uint16_t flags;    /* caller-defined */
	void *data;        /* owned by the caller (e.g. a modified payload), NULL when unused */
	uint32_t len;
	uint32_t gen;      /* owner's generation, so entries of a removed queue are ignored */
};

struct netem_heap {
	struct netem_heap_entry *v;     /* the binary heap */
	size_t n, cap;
	struct netem_heap_entry *r;     /* the sorted ring: r[(rh + i) % rcap], i < rn */
	size_t rh, rn, rcap;
};

/* Empty heap; no allocation until the first push. */
void netem_heap_init(struct netem_heap *h);
/* Frees the arrays only (not entries' data). */
void netem_heap_free(struct netem_heap *h);

/* Insert a copy of *e. Returns 0 or -ENOMEM. */
int netem_heap_push(struct netem_heap *h, const struct netem_heap_entry *e);

/* The earliest entry, or NULL when empty. Valid until the next push/pop. */
const struct netem_heap_entry *netem_heap_top(const struct netem_heap *h);

/* Remove the earliest entry into *out. Returns 0, or -ENOENT when empty. */
int netem_heap_pop(struct netem_heap *h, struct netem_heap_entry *out);

static inline size_t netem_heap_size(const struct netem_heap *h)
{
	return h->n + h->rn;
}

#endif
