/* sim/sim_loss: see sim_loss.h. Direction k is node k's up (k < n) or node k - n's down. */
#include "sim/sim_loss.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

struct sim_loss {
	size_t n;                    /* plan nodes */
	struct sim_link_sched *sched; /* 2n */
	int64_t **at;                /* 2n, each grown by doubling */
	double **p;
	size_t entries;
};

void sim_loss_destroy(struct sim_loss **pp)
{
	struct sim_loss *l;

	if (!pp || !*pp)
		return;
	l = *pp;
	for (size_t k = 0; l->at && l->p && k < 2 * l->n; k++) {
		free(l->at[k]);
		free(l->p[k]);
	}
	free(l->sched);
	free(l->at);
	free(l->p);
	free(l);
	*pp = NULL;
}

/* Direction k's loss becomes v at t (ns): a new entry, or the last one's value when it is at t
 * too (the later of two changes at one instant wins, as they are applied). */
static int set(struct sim_loss *l, size_t k, int64_t t, double v, double *cur)
{
	struct sim_link_sched *s = &l->sched[k];

	if (v == cur[k])
		return 0;
	cur[k] = v;
	if (s->n && l->at[k][s->n - 1] == t) {
		l->p[k][s->n - 1] = v;
		return 0;
	}
	if ((s->n & (s->n - 1)) == 0) { /* 0, 1, 2, 4, ...: grow to the next power of two */
		size_t cap = s->n ? 2 * s->n : 1;
		int64_t *at = realloc(l->at[k], cap * sizeof *at);
		double *pv;

		if (!at)
			return -ENOMEM;
		l->at[k] = at;
		if (!(pv = realloc(l->p[k], cap * sizeof *pv)))
			return -ENOMEM;
		l->p[k] = pv;
	}
	l->at[k][s->n] = t;
	l->p[k][s->n++] = v;
	l->entries++;
	return 0;
}

int sim_loss_new(const struct plan_run *run, const struct linktrace *trace, struct sim_loss **out)
{
	size_t n = run->n_nodes, ne = run->n_events, nt = trace ? trace->n : 0, a = 0, b = 0;
	struct sim_loss *l = NULL;
	double *cur = NULL;
	int rc = -ENOMEM;

	*out = NULL;
	if (ne + nt == 0)
		return 0;
	l = calloc(1, sizeof *l);
	cur = malloc(2 * n * sizeof *cur);
	if (!l || !cur)
		goto out;
	l->n = n;
	l->sched = calloc(2 * n, sizeof *l->sched);
	l->at = calloc(2 * n, sizeof *l->at);
	l->p = calloc(2 * n, sizeof *l->p);
	if (!l->sched || !l->at || !l->p)
		goto out;
	for (size_t i = 0; i < n; i++) {
		cur[i] = l->sched[i].base = sim_link_loss_prob(plan_node_up(run, i));
		cur[n + i] = l->sched[n + i].base = sim_link_loss_prob(plan_node_down(run, i));
	}
	while (a < ne || b < nt) {
		if (b >= nt || (a < ne && run->events[a].at_us <= trace->rows[b].at_us)) {
			const struct plan_event *pe = &run->events[a++];
			int64_t t = (int64_t)pe->at_us * 1000;

			if ((rc = set(l, pe->node, t, sim_link_loss_prob(&pe->up), cur)) < 0 ||
			    (rc = set(l, n + pe->node, t, sim_link_loss_prob(&pe->down), cur)) < 0)
				goto out;
		} else {
			const struct linktrace_row *row = &trace->rows[b++];

			for (size_t k = 0; row->has_loss && k < 2 * n; k++)
				if ((rc = set(l, k, (int64_t)row->at_us * 1000, row->loss_ppm / 1e6, cur)) < 0)
					goto out;
		}
	}
	rc = 0;
	if (!l->entries)
		goto out; /* nothing changes: no schedules */
	for (size_t k = 0; k < 2 * n; k++) {
		l->sched[k].at_ns = l->at[k];
		l->sched[k].p = l->p[k];
	}
	*out = l; /* the caller's now */
	l = NULL;
out:
	sim_loss_destroy(&l);
	free(cur);
	return rc;
}

const struct sim_link_sched *sim_loss_up(const struct sim_loss *l, size_t i)
{
	return l && i < l->n && l->sched[i].n ? &l->sched[i] : NULL;
}

const struct sim_link_sched *sim_loss_down(const struct sim_loss *l, size_t i)
{
	return l && i < l->n && l->sched[l->n + i].n ? &l->sched[l->n + i] : NULL;
}

size_t sim_loss_bytes(const struct sim_loss *l)
{
	if (!l)
		return 0;
	return sizeof *l + 2 * l->n * (sizeof *l->sched + sizeof *l->at + sizeof *l->p) +
	       l->entries * (sizeof(int64_t) + sizeof(double));
}
