/* node/core_p2p: see core_p2p.h. The rules are node/barrier's; this module keeps one peer's
 * view (known clocks, liveness), the crossing in progress and the sampling streams. */
#include "node/core_p2p.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct core_p2p {
	struct core_p2p_conf conf;
	int64_t *known;      /* last clock heard from each peer */
	bool *alive;
	bool *alive_at;      /* alive[] when the crossing drew its peers */
	size_t *sample;      /* the crossing's checked peers (n: barrier_sample's scratch) */
	size_t nsample;
	uint32_t *list;      /* what the last call listed */
	uint64_t brng, grng; /* barrier and gossip sampling streams */
	/* Liveness: alive[j] = live[j] (the driver's word) && !out[j] (a join took j out until
	 * reached[j]). */
	bool *live, *out, *reached;
	/* The join in progress: asked, answered (with clock), counted departed by an answer. */
	bool *j_asked, *j_answered, *j_departed;
	bool *j_behind;      /* answered, but catching up itself: no clock to resume from */
	int64_t *j_clock;
	size_t *scratch;     /* gossip draws (so a crossing's sample survives a gossip round) */
	int64_t *silent_at;  /* when each peer was found silent (0: it is not) */
	bool behind;         /* a restarted or late peer that has not caught up yet */
	bool *eligible;      /* scratch: live and not silent */
};

struct core_p2p *core_p2p_new(const struct core_p2p_conf *conf)
{
	struct core_p2p *c;
	uint32_t n = conf ? conf->n : 0;

	if (n == 0 || conf->self >= n || conf->local_steps < 1 || conf->dead_after_ns < 0)
		return NULL;
	c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->conf = *conf;
	c->known = calloc(n, sizeof *c->known);
	c->alive = calloc(n, sizeof *c->alive);
	c->alive_at = calloc(n, sizeof *c->alive_at);
	c->sample = calloc(n, sizeof *c->sample);
	c->scratch = calloc(n, sizeof *c->scratch);
	c->list = calloc(n, sizeof *c->list);
	c->live = calloc(n, sizeof *c->live);
	c->out = calloc(n, sizeof *c->out);
	c->reached = calloc(n, sizeof *c->reached);
	c->j_asked = calloc(n, sizeof *c->j_asked);
	c->j_answered = calloc(n, sizeof *c->j_answered);
	c->j_departed = calloc(n, sizeof *c->j_departed);
	c->j_behind = calloc(n, sizeof *c->j_behind);
	c->j_clock = calloc(n, sizeof *c->j_clock);
	c->silent_at = calloc(n, sizeof *c->silent_at);
	c->eligible = calloc(n, sizeof *c->eligible);
	if (!c->silent_at || !c->eligible || !c->j_behind ||
	    !c->known || !c->alive || !c->alive_at || !c->sample || !c->scratch || !c->list ||
	    !c->live || !c->out || !c->reached || !c->j_asked || !c->j_answered ||
	    !c->j_departed || !c->j_clock) {
		core_p2p_destroy(&c);
		return NULL;
	}
	for (uint32_t j = 0; j < n; j++)
		c->alive[j] = c->live[j] = true;
	c->behind = conf->behind;
	c->brng = conf->seed ^ (0xb5ad4eceda1ce2a9ull * (conf->self + 1));
	c->grng = conf->seed ^ (0x2545f4914f6cdd1dull * (conf->self + 1));
	return c;
}

void core_p2p_destroy(struct core_p2p **p)
{
	struct core_p2p *c;

	if (!p || !*p)
		return;
	c = *p;
	free(c->known);
	free(c->alive);
	free(c->alive_at);
	free(c->sample);
	free(c->scratch);
	free(c->list);
	free(c->live);
	free(c->out);
	free(c->reached);
	free(c->j_asked);
	free(c->j_answered);
	free(c->j_departed);
	free(c->j_behind);
	free(c->j_clock);
	free(c->silent_at);
	free(c->eligible);
	free(c);
	*p = NULL;
}

void core_p2p_set_alive(struct core_p2p *c, uint32_t j, bool live)
{
	if (j >= c->conf.n)
		return;
	c->live[j] = live || j == c->conf.self;
	c->alive[j] = c->live[j] && !c->out[j];
}

bool core_p2p_is_alive(const struct core_p2p *c, uint32_t j)
{
	return j < c->conf.n && c->alive[j];
}

void core_p2p_on_clock(struct core_p2p *c, uint32_t j, int64_t clock)
{
	if (j < c->conf.n && clock > c->known[j])
		c->known[j] = clock;
}

int64_t core_p2p_known(const struct core_p2p *c, uint32_t j)
{
	return j < c->conf.n ? c->known[j] : -1;
}

size_t core_p2p_barrier_begin(struct core_p2p *c, int64_t clock, int64_t *threshold,
			      const uint32_t **ask)
{
	uint32_t n = c->conf.n, self = c->conf.self;
	int64_t thr = barrier_threshold(&c->conf.bp, clock);
	size_t k = 0;

	*threshold = thr;
	*ask = c->list;
	c->nsample = 0;
	if (c->conf.bp.kind == BARRIER_ASP || n < 2)
		return 0;
	if (barrier_is_sampled(c->conf.bp.kind)) {
		c->nsample = barrier_sample(&c->brng, n, self, c->alive, c->conf.bp.sample, c->sample);
	} else {
		for (uint32_t j = 0; j < n; j++)
			if (j != self && c->alive[j])
				c->sample[c->nsample++] = j;
	}
	for (size_t i = 0; i < c->nsample; i++) {
		uint32_t j = (uint32_t)c->sample[i];

		if (c->known[j] < thr)
			c->list[k++] = j;
	}
	memcpy(c->alive_at, c->alive, n * sizeof *c->alive);
	return k;
}

bool core_p2p_barrier_end(struct core_p2p *c, int64_t clock)
{
	for (uint32_t j = 0; j < c->conf.n; j++)
		c->alive_at[j] = c->alive_at[j] && c->alive[j];
	return barrier_may_proceed(&c->conf.bp, c->known, c->alive_at, c->conf.n, c->conf.self,
				   clock, c->sample, c->nsample);
}

bool core_p2p_answerable(int64_t my_clock, int64_t threshold)
{
	return threshold <= my_clock;
}

bool core_p2p_gossip_due(const struct core_p2p *c, int64_t clock)
{
	return c->conf.merge && c->conf.fanout > 0 && clock > 0 && clock % c->conf.local_steps == 0;
}

size_t core_p2p_gossip_partners(struct core_p2p *c, const uint32_t **partners)
{
	const bool *mask = c->alive;
	size_t k;

	for (uint32_t j = 0; j < c->conf.n; j++) {
		c->eligible[j] = c->alive[j] && !c->silent_at[j];
		if (c->silent_at[j])
			mask = c->eligible;
	}
	k = barrier_sample(&c->grng, c->conf.n, c->conf.self, mask, c->conf.fanout, c->scratch);

	for (size_t i = 0; i < k; i++)
		c->list[i] = (uint32_t)c->scratch[i];
	*partners = c->list;
	return k;
}

bool core_p2p_on_heard(struct core_p2p *c, uint32_t j, int64_t now_ns)
{
	bool back;

	if (j >= c->conf.n || j == c->conf.self)
		return false;
	back = c->silent_at[j] && now_ns > c->silent_at[j];
	if (back)
		c->silent_at[j] = 0;
	return back;
}

bool core_p2p_pull_gives_up(struct core_p2p *c, uint32_t j, int64_t asked_ns, int64_t now_ns)
{
	if (j >= c->conf.n || j == c->conf.self || c->conf.dead_after_ns <= 0 ||
	    now_ns - asked_ns < c->conf.dead_after_ns)
		return false;
	if (!c->silent_at[j])
		c->silent_at[j] = now_ns > 0 ? now_ns : 1;
	return true;
}

bool core_p2p_is_silent(const struct core_p2p *c, uint32_t j)
{
	return j < c->conf.n && c->silent_at[j] != 0;
}

bool core_p2p_serves_replica(const struct core_p2p *c)
{
	return !c->behind;
}

void core_p2p_caught_up(struct core_p2p *c)
{
	c->behind = false;
}

enum core_p2p_reply core_p2p_pull_reply(size_t n, size_t nparams, double weight)
{
	if (n == 0 && weight < 0)
		return CORE_P2P_REPLY_BEHIND;
	if (n == nparams && nparams > 0 && isfinite(weight) && weight >= 0)
		return CORE_P2P_REPLY_REPLICA;
	return CORE_P2P_REPLY_BAD;
}

double core_p2p_merge_weight(const struct core_p2p *c, double reported)
{
	return !c->conf.weighted || !(reported > 0) ? 1.0 : reported;
}

double core_p2p_own_weight(const struct core_p2p *c, uint64_t samples)
{
	return c->conf.weighted ? (double)samples : 1.0;
}

size_t core_p2p_live_others(struct core_p2p *c, const uint32_t **peers)
{
	size_t k = 0;

	for (uint32_t j = 0; j < c->conf.n; j++)
		if (j != c->conf.self && c->alive[j])
			c->list[k++] = j;
	*peers = c->list;
	return k;
}

uint32_t core_p2p_resume_from(const struct core_p2p *c, int64_t clock, const bool *answered,
			      const int64_t *their, int64_t *lo)
{
	uint32_t from = UINT32_MAX;

	*lo = INT64_MAX;
	for (uint32_t j = 0; j < c->conf.n; j++)
		if (answered[j] && their[j] < *lo) {
			*lo = their[j];
			from = j;
		}
	if (from == UINT32_MAX || *lo <= clock)
		return UINT32_MAX;
	return from;
}

/* --- join ---------------------------------------------------------------------------------- */

size_t core_p2p_join_begin(struct core_p2p *c, const uint32_t **ask)
{
	size_t k = core_p2p_live_others(c, ask);
	size_t n = c->conf.n;

	memset(c->j_asked, 0, n * sizeof *c->j_asked);
	memset(c->j_answered, 0, n * sizeof *c->j_answered);
	memset(c->j_departed, 0, n * sizeof *c->j_departed);
	memset(c->j_behind, 0, n * sizeof *c->j_behind);
	for (size_t i = 0; i < k; i++)
		c->j_asked[(*ask)[i]] = true;
	return k;
}

void core_p2p_join_on_answer(struct core_p2p *c, uint32_t j, int64_t clock, const bool *departed)
{
	if (j >= c->conf.n || j == c->conf.self)
		return;
	core_p2p_on_clock(c, j, clock);
	if (!c->j_answered[j] || c->j_behind[j] || clock > c->j_clock[j])
		c->j_clock[j] = clock;
	c->j_answered[j] = true;
	c->j_behind[j] = false;
	for (uint32_t k = 0; departed && k < c->conf.n; k++)
		if (departed[k] && k != j && k != c->conf.self)
			c->j_departed[k] = true;
}

void core_p2p_join_on_behind(struct core_p2p *c, uint32_t j, const bool *departed)
{
	if (j >= c->conf.n || j == c->conf.self || (c->j_answered[j] && !c->j_behind[j]))
		return;
	c->j_answered[j] = true;
	c->j_behind[j] = true;
	for (uint32_t k = 0; departed && k < c->conf.n; k++)
		if (departed[k] && k != j && k != c->conf.self)
			c->j_departed[k] = true;
}

bool core_p2p_join_waits_for(const struct core_p2p *c, uint32_t j)
{
	if (j >= c->conf.n || !c->j_asked[j] || c->j_answered[j])
		return false;
	/* A peer we reached is alive whatever a stale view says: wait for its answer. */
	return !c->j_departed[j] || c->reached[j];
}

uint32_t core_p2p_join_end(struct core_p2p *c, int64_t clock, int64_t *lo)
{
	for (uint32_t j = 0; j < c->conf.n; j++) {
		if (c->j_asked[j] && !c->j_answered[j] && !c->reached[j]) {
			c->out[j] = true;
			c->alive[j] = false;
		}
		/* (eligible is the gossip draw's scratch) */
		c->eligible[j] = c->j_answered[j] && !c->j_behind[j];
	}
	return core_p2p_resume_from(c, clock, c->eligible, c->j_clock, lo);
}

void core_p2p_on_reached(struct core_p2p *c, uint32_t j)
{
	if (j >= c->conf.n)
		return;
	c->reached[j] = true;
	c->out[j] = false;
	c->alive[j] = c->live[j];
}

enum core_p2p_join_next core_p2p_join_next(const struct core_p2p *c, int64_t waited_ns,
					   int64_t reach_ns)
{
	bool again = false;

	for (uint32_t j = 0; j < c->conf.n; j++) {
		if (c->j_answered[j] && !c->j_behind[j])
			return CORE_P2P_JOIN_RESUME;
		if (!c->alive[j] || !core_p2p_join_waits_for(c, j))
			continue;
		if (c->reached[j])
			again |= c->conf.dead_after_ns == 0 || waited_ns < c->conf.dead_after_ns;
		else
			again |= waited_ns < reach_ns;
	}
	return again ? CORE_P2P_JOIN_AGAIN : CORE_P2P_JOIN_ALONE;
}

bool core_p2p_resume_asks_again(const struct core_p2p *c, uint32_t from, int64_t waited_ns)
{
	return from != c->conf.self && core_p2p_is_alive(c, from) &&
	       (c->conf.dead_after_ns == 0 || waited_ns < c->conf.dead_after_ns);
}
