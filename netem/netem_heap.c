/* netem/netem_heap: binary min-heap on (t_ns, seq); see the header. */
#include "netem/netem_heap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

void netem_heap_init(struct netem_heap *h)
{
	h->v = NULL;
	h->n = h->cap = 0;
}

void netem_heap_free(struct netem_heap *h)
{
	free(h->v);
	netem_heap_init(h);
}

static inline bool before(const struct netem_heap_entry *a, const struct netem_heap_entry *b)
{
	return a->t_ns < b->t_ns || (a->t_ns == b->t_ns && a->seq < b->seq);
}

int netem_heap_push(struct netem_heap *h, const struct netem_heap_entry *e)
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

const struct netem_heap_entry *netem_heap_top(const struct netem_heap *h)
{
	return h->n ? &h->v[0] : NULL;
}

int netem_heap_pop(struct netem_heap *h, struct netem_heap_entry *out)
{
	if (h->n == 0)
		return -ENOENT;
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
	return 0;
}
