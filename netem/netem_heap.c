/* netem/netem_heap: binary min-heap on (t_ns, seq) beside a sorted ring for in-order pushes; see
 * the header. */
#include "netem/netem_heap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void netem_heap_init(struct netem_heap *h)
{
	*h = (struct netem_heap){ 0 };
}

void netem_heap_free(struct netem_heap *h)
{
	free(h->v);
	free(h->r);
	netem_heap_init(h);
}

static inline bool before(const struct netem_heap_entry *a, const struct netem_heap_entry *b)
{
	return a->t_ns < b->t_ns || (a->t_ns == b->t_ns && a->seq < b->seq);
}

static int heap_push(struct netem_heap *h, const struct netem_heap_entry *e)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 1024;
		struct netem_heap_entry *v = realloc(h->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = cap;
	}
	size_t i = h->n++;
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (!before(e, &h->v[parent]))
			break;
		h->v[i] = h->v[parent];
		i = parent;
	}
	h->v[i] = *e;
	return 0;
}

static void heap_pop(struct netem_heap *h, struct netem_heap_entry *out)
{
	*out = h->v[0];
	struct netem_heap_entry last = h->v[--h->n];
	size_t i = 0, n = h->n;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && before(&h->v[c + 1], &h->v[c]))
			c++;
		if (!before(&h->v[c], &last))
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (n)
		h->v[i] = last;
}

/* The ring's last entry (rn > 0). */
static inline const struct netem_heap_entry *ring_tail(const struct netem_heap *h)
{
	return &h->r[(h->rh + h->rn - 1) & (h->rcap - 1)];
}

/* Append to the ring (capacity a power of two; grown by doubling, entries kept in order). */
static int ring_push(struct netem_heap *h, const struct netem_heap_entry *e)
{
	if (h->rn == h->rcap) {
		size_t cap = h->rcap ? h->rcap * 2 : 1024;
		struct netem_heap_entry *r = malloc(cap * sizeof *r);
		if (!r)
			return -ENOMEM;
		size_t first = h->rcap - h->rh < h->rn ? h->rcap - h->rh : h->rn;
		if (h->rn) {
			memcpy(r, h->r + h->rh, first * sizeof *r);
			memcpy(r + first, h->r, (h->rn - first) * sizeof *r);
		}
		free(h->r);
		h->r = r;
		h->rh = 0;
		h->rcap = cap;
	}
	h->r[(h->rh + h->rn++) & (h->rcap - 1)] = *e;
	return 0;
}

int netem_heap_push(struct netem_heap *h, const struct netem_heap_entry *e)
{
	/* in order behind the ring's last entry (or the ring empty): O(1) */
	if (h->rn == 0 || !before(e, ring_tail(h)))
		return ring_push(h, e);
	return heap_push(h, e);
}

const struct netem_heap_entry *netem_heap_top(const struct netem_heap *h)
{
	const struct netem_heap_entry *r = h->rn ? &h->r[h->rh] : NULL;

	if (!h->n)
		return r;
	return r && before(r, &h->v[0]) ? r : &h->v[0];
}

int netem_heap_pop(struct netem_heap *h, struct netem_heap_entry *out)
{
	const struct netem_heap_entry *top = netem_heap_top(h);

	if (!top)
		return -ENOENT;
	if (h->n && top == &h->v[0]) {
		heap_pop(h, out);
	} else {
		*out = *top;
		h->rh = (h->rh + 1) & (h->rcap - 1);
		h->rn--;
	}
	return 0;
}
