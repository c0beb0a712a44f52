/* sim/sim_node: see sim_node.h. */
#include "sim/sim_node.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "node/rng.h"
#include "node/straggler.h"
#include "sim/sim_profile.h"
#include "sim/sim_seed.h"

/* Stream tags of the keyed draws (step time; the gap between steps). */
#define SIM_NODE_STEP_TAG 0x53494d5354455053ull
#define SIM_NODE_GAP_TAG 0x53494d4741505321ull

struct sim_node {
	const struct plan_run *run;
	const uint32_t *node_of;
	uint32_t n;
	int64_t step_cost_ns;
	struct straggler **strag;    /* per node with a compute.trace (NULL array: none) */
	const double **prof_compute; /* per node: fitted step times (NULL array: no profile) */
	const double **prof_gap;     /* per node: fitted remainder per step */
	struct rng *delay_rng;       /* per node: its emulated node's straggler stream, when some
				      * node's delay is random and n < the testbed's node limit */
};

void sim_node_restart(struct sim_node *m, uint32_t k)
{
	if (m->delay_rng && k < m->n)
		straggler_stream_seed(&m->delay_rng[k], straggler_seed(m->run->seed, k));
}

void sim_node_destroy(struct sim_node **p)
{
	struct sim_node *m;

	if (!p || !*p)
		return;
	m = *p;
	for (uint32_t k = 0; m->strag && k < m->n; k++)
		straggler_destroy(&m->strag[k]);
	free(m->strag);
	free(m->prof_compute);
	free(m->prof_gap);
	free(m->delay_rng);
	free(m);
	*p = NULL;
}

struct sim_node *sim_node_new(const struct plan_run *run, const uint32_t *node_of, uint32_t n,
			      int64_t step_cost_ns, const struct sim_profile *profile, char *err,
			      size_t errlen)
{
	struct sim_node *m = calloc(1, sizeof *m);

	if (!m)
		goto nomem;
	*m = (struct sim_node){ .run = run, .node_of = node_of, .n = n, .step_cost_ns = step_cost_ns };
	for (uint32_t k = 0; k < n; k++) {
		const struct scenario_straggler *st = &run->nodes[node_of[k]].straggler;
		struct straggler_params sp;

		if (!(st->set & SCENARIO_STRAG_TRACE) || !st->trace)
			continue;
		if (!m->strag && !(m->strag = calloc(n, sizeof *m->strag)))
			goto nomem;
		sp = (struct straggler_params){
			.slowdown = (st->set & SCENARIO_STRAG_SLOWDOWN) ? st->slowdown : 1.0,
			.dist = (st->set & SCENARIO_STRAG_DELAY) ? (enum straggler_dist)st->delay_dist
								 : STRAGGLER_NONE,
			.a = st->delay_a, .b = st->delay_b, .trace = st->trace };
		/* seeded as the emulated node seeds its model (node/engine_common) */
		m->strag[k] = straggler_new(&sp, straggler_seed(run->seed, k));
		if (!m->strag[k]) {
			snprintf(err, errlen, "%s: stragglers compute.trace %s cannot be read",
				 run->nodes[node_of[k]].name, st->trace);
			sim_node_destroy(&m);
			return NULL;
		}
	}
	for (uint32_t k = 0; k < n && n < SCENARIO_MAX_NODES && !m->delay_rng; k++) {
		const struct scenario_straggler *st = &run->nodes[node_of[k]].straggler;

		if ((st->set & SCENARIO_STRAG_DELAY) && st->delay_dist != SCENARIO_DIST_NONE &&
		    st->delay_dist != SCENARIO_DIST_CONSTANT) {
			if (!(m->delay_rng = calloc(n, sizeof *m->delay_rng)))
				goto nomem;
			for (uint32_t j = 0; j < n; j++)
				sim_node_restart(m, j);
		}
	}
	if (profile) {
		m->prof_compute = calloc(n, sizeof *m->prof_compute);
		m->prof_gap = calloc(n, sizeof *m->prof_gap);
		if (!m->prof_compute || !m->prof_gap)
			goto nomem;
		for (uint32_t k = 0; k < n; k++) {
			m->prof_compute[k] = sim_profile_compute(profile, run->nodes[node_of[k]].name);
			m->prof_gap[k] = sim_profile_transfer(profile, run->nodes[node_of[k]].name);
		}
	}
	return m;
nomem:
	snprintf(err, errlen, "out of memory");
	sim_node_destroy(&m);
	return NULL;
}

int64_t sim_node_step_ns(struct sim_node *m, uint32_t k, uint32_t step)
{
	const struct scenario_straggler *st = &m->run->nodes[m->node_of[k]].straggler;
	double t = (double)m->step_cost_ns;
	struct rng r;

	if (m->strag && m->strag[k]) {
		double c = t / 1e9;

		return (int64_t)(1e9 * (c + straggler_step_extra_s(m->strag[k], step, c)));
	}
	if (m->prof_compute && m->prof_compute[k]) {
		rng_seed(&r, sim_seed_own(m->run->seed, m->run->scenario->simulation.seed) ^ SIM_NODE_STEP_TAG,
			 ((uint64_t)k << 32) | step);
		return (int64_t)(1e9 * sim_profile_draw(m->prof_compute[k], rng_uniform(&r)));
	}
	if (st->set & SCENARIO_STRAG_SLOWDOWN)
		t *= st->slowdown;
	if ((st->set & SCENARIO_STRAG_DELAY) && st->delay_dist != SCENARIO_DIST_NONE) {
		if (!m->delay_rng)
			rng_seed(&r, m->run->seed ^ SIM_NODE_STEP_TAG, ((uint64_t)k << 32) | step);
		t += 1e9 * straggler_dist_draw((enum straggler_dist)st->delay_dist, st->delay_a,
					       st->delay_b, m->delay_rng ? &m->delay_rng[k] : &r);
	}
	return t > 0 ? (int64_t)t : 0;
}

int64_t sim_node_gap_ns(const struct sim_node *m, uint32_t k, uint32_t step)
{
	struct rng r;

	if (!m->prof_gap || !m->prof_gap[k])
		return 0;
	rng_seed(&r, sim_seed_own(m->run->seed, m->run->scenario->simulation.seed) ^ SIM_NODE_GAP_TAG,
		 ((uint64_t)k << 32) | step);
	return (int64_t)(1e9 * sim_profile_draw(m->prof_gap[k], rng_uniform(&r)));
}

int64_t sim_node_after_pause(const struct sim_node *m, uint32_t k, int64_t t_ns)
{
	const struct scenario_straggler *st = &m->run->nodes[m->node_of[k]].straggler;
	int64_t every, len, ph;

	if (!(st->set & SCENARIO_STRAG_PAUSE) || !st->pause_every_us || !st->pause_for_us)
		return t_ns;
	every = (int64_t)st->pause_every_us * 1000;
	len = (int64_t)st->pause_for_us * 1000;
	if (t_ns < every)
		return t_ns;
	ph = t_ns % every;
	return ph < len ? t_ns - ph + len : t_ns;
}
