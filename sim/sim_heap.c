/* sim/sim_heap: see sim_heap.h. A plain array heap: push sifts up, pop moves the last entry to
 * the root and sifts it down; (t_ns, seq) is a total order, so ties never depend on layout. */
#include "sim/sim_heap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

struct sim_heap {
	struct sim_event *a;
	size_t n, cap;
	uint64_t seq;
};

static bool before(const struct sim_event *x, const struct sim_event *y)
{
	return x->t_ns < y->t_ns || (x->t_ns == y->t_ns && x->seq < y->seq);
}

struct sim_heap *sim_heap_new(size_t cap)
{
	struct sim_heap *h = calloc(1, sizeof *h);

	if (!h)
		return NULL;
	h->cap = cap ? cap : 16;
	h->a = malloc(h->cap * sizeof *h->a);
	if (!h->a) {
		free(h);
		return NULL;
	}
	return h;
}

void sim_heap_destroy(struct sim_heap **p)
{
	if (!p || !*p)
		return;
	free((*p)->a);
	free(*p);
	*p = NULL;
}

int sim_heap_push(struct sim_heap *h, int64_t t_ns, uint32_t who, uint16_t kind, uint16_t gen)
{
	struct sim_event e = { .t_ns = t_ns, .seq = h->seq++, .who = who, .kind = kind, .gen = gen };
	size_t i;

	if (h->n == h->cap) {
		size_t cap = h->cap * 2;
		struct sim_event *a = realloc(h->a, cap * sizeof *a);

		if (!a)
			return -ENOMEM;
		h->a = a;
		h->cap = cap;
	}
	i = h->n++;
	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (!before(&e, &h->a[parent]))
			break;
		h->a[i] = h->a[parent];
		i = parent;
	}
	h->a[i] = e;
	return 0;
}

int sim_heap_pop(struct sim_heap *h, struct sim_event *out)
{
	struct sim_event last;
	size_t i = 0;

	if (h->n == 0)
		return 0;
	*out = h->a[0];
	last = h->a[--h->n];
	for (;;) {
		size_t l = 2 * i + 1, m;

		if (l >= h->n)
			break;
		m = l + 1 < h->n && before(&h->a[l + 1], &h->a[l]) ? l + 1 : l;
		if (!before(&h->a[m], &last))
			break;
		h->a[i] = h->a[m];
		i = m;
	}
	if (h->n > 0)
		h->a[i] = last;
	return 1;
}

const struct sim_event *sim_heap_peek(const struct sim_heap *h)
{
	return h->n ? &h->a[0] : NULL;
}

size_t sim_heap_len(const struct sim_heap *h)
{
	return h->n;
}

size_t sim_heap_bytes(const struct sim_heap *h)
{
	return sizeof *h + h->cap * sizeof *h->a;
}
