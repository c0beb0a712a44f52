/* netem/linkd_comp: release compensation estimator (see the header). */
#include "netem/linkd_comp.h"

void linkd_comp_init(struct linkd_comp *c, int64_t max_ns)
{
	if (max_ns < 0)
		max_ns = 0;
	if (max_ns > LINKD_COMP_STALL_NS)
		max_ns = LINKD_COMP_STALL_NS;
	*c = (struct linkd_comp){ .max_ns = max_ns };
}

int64_t linkd_comp_sample_ns(int64_t decide_ns, int64_t start_ns, int64_t end_ns, uint32_t n)
{
	if (n == 0 || start_ns < decide_ns || end_ns < start_ns)
		return -1;
	/* mean of k/n over k = 1..n is (n + 1) / (2 n) */
	int64_t d = end_ns - start_ns;

	return (start_ns - decide_ns) + (d / (2 * (int64_t)n)) * ((int64_t)n + 1) +
	       (d % (2 * (int64_t)n)) * ((int64_t)n + 1) / (2 * (int64_t)n);
}

void linkd_comp_add(struct linkd_comp *c, int64_t sample_ns)
{
	if (sample_ns < 0)
		return;
	if (sample_ns > LINKD_COMP_STALL_NS) {
		c->stalls++;
		return;
	}
	int64_t e = c->n++ == 0 ? sample_ns : c->est_ns + (sample_ns - c->est_ns) / LINKD_COMP_WEIGHT;

	if (e > c->max_ns)
		e = c->max_ns;
	if (e < 0)
		e = 0;
	/* another thread may read the estimate (linkd_compensation_ns): one untorn store */
	__atomic_store_n(&c->est_ns, e, __ATOMIC_RELAXED);
}
