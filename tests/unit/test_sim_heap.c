/* sim/sim_heap against a naive reference: a list kept sorted by (time, insertion order). Random
 * interleavings of pushes and pops, many equal times (ties must come out in push order). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "node/rng.h"
#include "sim/sim_heap.h"

struct ref {
	int64_t t;
	uint64_t order;
	uint32_t who;
};

static size_t ref_min(const struct ref *r, size_t n)
{
	size_t m = 0;

	for (size_t i = 1; i < n; i++)
		if (r[i].t < r[m].t || (r[i].t == r[m].t && r[i].order < r[m].order))
			m = i;
	return m;
}

Test(sim_heap, matches_reference)
{
	enum { N = 20000 };
	struct ref *r = calloc(N, sizeof *r);
	struct sim_heap *h = sim_heap_new(4); /* grows */
	struct rng g;
	size_t n = 0;
	uint64_t order = 0;

	cr_assert_not_null(r);
	cr_assert_not_null(h);
	rng_seed(&g, 42, 0);
	for (int k = 0; k < 3 * N; k++) {
		bool push = n == 0 || (n < N && rng_uniform(&g) < 0.55);

		if (push) {
			int64_t t = (int64_t)rng_below(&g, 50); /* many ties */
			uint32_t who = (uint32_t)k;

			cr_assert_eq(sim_heap_push(h, t, who, (uint16_t)(k & 7), (uint16_t)(k >> 3)), 0);
			r[n++] = (struct ref){ .t = t, .order = order++, .who = who };
		} else {
			struct sim_event e;
			size_t m = ref_min(r, n);

			cr_assert_eq(sim_heap_peek(h)->who, r[m].who);
			cr_assert_eq(sim_heap_pop(h, &e), 1);
			cr_assert_eq(e.t_ns, r[m].t);
			cr_assert_eq(e.who, r[m].who, "tie order: got %u want %u at t %lld", e.who, r[m].who,
				     (long long)e.t_ns);
			cr_assert_eq(e.kind, (uint16_t)(e.who & 7));
			cr_assert_eq(e.gen, (uint16_t)(e.who >> 3));
			r[m] = r[--n];
		}
		cr_assert_eq(sim_heap_len(h), n);
	}
	while (n) {
		struct sim_event e;
		size_t m = ref_min(r, n);

		cr_assert_eq(sim_heap_pop(h, &e), 1);
		cr_assert_eq(e.who, r[m].who);
		r[m] = r[--n];
	}
	{
		struct sim_event e;

		cr_assert_eq(sim_heap_pop(h, &e), 0);
		cr_assert_null(sim_heap_peek(h));
	}
	cr_assert_gt(sim_heap_bytes(h), 0);
	sim_heap_destroy(&h);
	cr_assert_null(h);
	sim_heap_destroy(&h);
	free(r);
}
