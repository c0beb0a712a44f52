/* node/core_p2p against references from the definitions (node/barrier.h, docs/engines.md):
 *   exhaustive  every order in which 2 and 3 peers, each with its own core, cross 4 barriers,
 *               under BSP, SSP(1), ASP, pBSP(0), pBSP(N-1): a peer may cross exactly when the
 *               reference over the true clocks allows it (the peers it asks answer once their
 *               clock reaches the threshold), and every crossing's end agrees; BSP's spread
 *               stays <= 1, SSP's bound holds, ASP and pBSP(0) never ask anyone, pBSP(N-1)
 *               asks exactly whom BSP asks
 *   liveness    a peer that dies while asked no longer blocks the crossing; dead peers are
 *               never asked nor drawn
 *   gossip      due every H steps (never at 0, never for ensemble), partners drawn from the
 *               emulator's stream, weights; a restarted peer resumes from the slowest answer
 *   silence     a pull unanswered for dead_after ends the wait; the silent peer is never a
 *               gossip partner (still in barriers) until heard from after it went silent
 *   join        every case of 4 peers (crashed or live, reached or not, each answer's view):
 *               the join waits exactly for the unanswered peers no answer counts departed or
 *               that it reached; the skipped ones are out of barriers until reached; with
 *               no answer it asks again while a peer it waits for may answer, else alone;
 *               an answer from a peer catching up itself is none to resume from; the
 *               resume's replica pull is asked again while its owner is live, up to dead_after
 *   catching up a restarted or late peer serves no replica until it caught up; the pull
 *               answer that says so is told apart from a replica and from a bad frame */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "node/core_p2p.h"

#define MAXP 3
#define CROSS 4

struct world {
	struct core_p2p *c[MAXP];
	int64_t clock[MAXP]; /* the true clocks */
	uint32_t n;
	struct barrier_params bp;
};

static void world_init(struct world *w, uint32_t n, const struct barrier_params *bp)
{
	memset(w, 0, sizeof *w);
	w->n = n;
	w->bp = *bp;
	for (uint32_t i = 0; i < n; i++) {
		struct core_p2p_conf conf = { .n = n, .self = i, .bp = *bp, .local_steps = 1,
					      .merge = true, .fanout = 1, .seed = 11 };

		w->c[i] = core_p2p_new(&conf);
		cr_assert_not_null(w->c[i]);
	}
}

static void world_free(struct world *w)
{
	for (uint32_t i = 0; i < w->n; i++)
		core_p2p_destroy(&w->c[i]);
}

static bool ref_allowed(const struct world *w, uint32_t i)
{
	int64_t c = w->clock[i];

	if (w->bp.kind == BARRIER_ASP || (w->bp.kind == BARRIER_PBSP && w->bp.sample == 0))
		return true;
	for (uint32_t j = 0; j < w->n; j++) {
		int64_t need = w->bp.kind == BARRIER_SSP ? c - w->bp.staleness : c;

		if (j != i && w->clock[j] < need)
			return false;
	}
	return true;
}

/* Peer i tries to cross: begin, the asked peers answer if their clock reached the threshold.
 * Returns whether it can cross now; with `go`, crosses (answers reported, end, clock + 1). */
static bool try_cross(struct world *w, uint32_t i, bool go)
{
	const uint32_t *ask;
	int64_t thr;
	size_t k = core_p2p_barrier_begin(w->c[i], w->clock[i], &thr, &ask);
	bool ok = true;

	if (w->bp.kind == BARRIER_ASP || (w->bp.kind == BARRIER_PBSP && w->bp.sample == 0))
		cr_assert_eq(k, 0, "%s asked %zu peers", barrier_kind_name(w->bp.kind), k);
	for (size_t a = 0; a < k; a++) {
		cr_assert_neq(ask[a], i);
		cr_assert_lt(core_p2p_known(w->c[i], ask[a]), thr);
		if (!core_p2p_answerable(w->clock[ask[a]], thr))
			ok = false;
	}
	if (!ok || !go)
		return ok;
	for (size_t a = 0; a < k; a++)
		core_p2p_on_clock(w->c[i], ask[a], w->clock[ask[a]]);
	cr_assert(core_p2p_barrier_end(w->c[i], w->clock[i]));
	w->clock[i]++;
	return true;
}

static void check_world(struct world *w)
{
	int64_t lo = INT64_MAX, hi = INT64_MIN;

	for (uint32_t i = 0; i < w->n; i++) {
		if (w->clock[i] < lo)
			lo = w->clock[i];
		if (w->clock[i] > hi)
			hi = w->clock[i];
		if (w->clock[i] < CROSS)
			cr_assert_eq(try_cross(w, i, false), ref_allowed(w, i),
				     "%s: peer %u at %lld", barrier_kind_name(w->bp.kind), i,
				     (long long)w->clock[i]);
	}
	if (w->bp.kind == BARRIER_BSP || (w->bp.kind == BARRIER_PBSP && w->bp.sample + 1 >= w->n))
		cr_assert_leq(hi - lo, 1);
	if (w->bp.kind == BARRIER_SSP)
		cr_assert_leq(hi - lo, w->bp.staleness + 1);
}

static uint32_t order[MAXP * CROSS];
static unsigned long leaves;

static void explore(const struct barrier_params *bp, uint32_t n, size_t len)
{
	struct world w;
	bool can[MAXP] = { false };
	bool any = false;

	world_init(&w, n, bp);
	for (size_t k = 0; k < len; k++)
		cr_assert(try_cross(&w, order[k], true));
	check_world(&w);
	for (uint32_t i = 0; i < n; i++)
		can[i] = w.clock[i] < CROSS && ref_allowed(&w, i);
	world_free(&w);
	for (uint32_t i = 0; i < n; i++) {
		if (!can[i])
			continue;
		any = true;
		order[len] = i;
		explore(bp, n, len + 1);
	}
	if (!any)
		leaves++;
}

static unsigned long count(enum barrier_kind kind, int64_t s, uint32_t beta, uint32_t n)
{
	struct barrier_params bp = { .kind = kind, .staleness = s, .sample = beta };

	leaves = 0;
	explore(&bp, n, 0);
	return leaves;
}

Test(core_p2p, exhaustive_crossings, .timeout = 120)
{
	/* ASP: every interleaving of 3 peers' 4 steps: 12! / (4!)^3. */
	cr_assert_eq(count(BARRIER_ASP, 0, 0, 3), 34650ul);
	cr_assert_eq(count(BARRIER_PBSP, 0, 0, 3), 34650ul);
	/* BSP: each of the 4 rounds in any order: (3!)^4; pBSP(N-1) the same. */
	cr_assert_eq(count(BARRIER_BSP, 0, 0, 3), 1296ul);
	cr_assert_eq(count(BARRIER_PBSP, 0, 2, 3), 1296ul);
	cr_assert_eq(count(BARRIER_BSP, 0, 0, 2), 16ul);
	cr_assert_gt(count(BARRIER_SSP, 1, 0, 3), 1296ul);
	cr_assert_lt(count(BARRIER_SSP, 1, 0, 3), 34650ul);
}

/* pBSP(N-1) asks, crossing for crossing, exactly the peers BSP asks. */
Test(core_p2p, full_sample_asks_whom_bsp_asks)
{
	struct barrier_params bsp = { .kind = BARRIER_BSP }, pbsp = { .kind = BARRIER_PBSP, .sample = 2 };
	struct world a, b;

	world_init(&a, 3, &bsp);
	world_init(&b, 3, &pbsp);
	for (int step = 0; step < 6; step++) {
		for (uint32_t i = 0; i < 3; i++) {
			const uint32_t *qa, *qb;
			int64_t ta, tb;
			size_t ka = core_p2p_barrier_begin(a.c[i], a.clock[i], &ta, &qa);
			size_t kb = core_p2p_barrier_begin(b.c[i], b.clock[i], &tb, &qb);
			bool ma[3] = { false }, mb[3] = { false };

			cr_assert_eq(ka, kb);
			cr_assert_eq(ta, tb);
			for (size_t k = 0; k < ka; k++) {
				ma[qa[k]] = true;
				mb[qb[k]] = true;
			}
			cr_assert_eq(memcmp(ma, mb, sizeof ma), 0);
			cr_assert(try_cross(&a, i, true));
			cr_assert(try_cross(&b, i, true));
		}
	}
	world_free(&a);
	world_free(&b);
}

Test(core_p2p, dead_peers_never_block)
{
	struct core_p2p_conf conf = { .n = 4, .self = 0, .bp = { .kind = BARRIER_BSP },
				      .local_steps = 1 };
	struct core_p2p *c = core_p2p_new(&conf);
	const uint32_t *ask;
	int64_t thr;
	size_t k;

	cr_assert_not_null(c);
	core_p2p_set_alive(c, 3, false);
	k = core_p2p_barrier_begin(c, 2, &thr, &ask);
	cr_assert_eq(thr, 2);
	cr_assert_eq(k, 2); /* peers 1 and 2, not the dead 3 */
	cr_assert(ask[0] == 1 && ask[1] == 2);
	core_p2p_on_clock(c, 1, 2);
	cr_assert_not(core_p2p_barrier_end(c, 2)); /* peer 2 neither answered nor died */
	k = core_p2p_barrier_begin(c, 2, &thr, &ask);
	cr_assert_eq(k, 1);
	core_p2p_set_alive(c, 2, false); /* it dies while asked */
	cr_assert(core_p2p_barrier_end(c, 2));
	/* A peer that came back during a crossing was not part of it. */
	core_p2p_set_alive(c, 2, true);
	core_p2p_set_alive(c, 3, true);
	core_p2p_on_clock(c, 2, 3);
	k = core_p2p_barrier_begin(c, 3, &thr, &ask);
	cr_assert_eq(k, 2); /* 1 (known 2) and 3 (known 0) */
	core_p2p_set_alive(c, 3, false);
	core_p2p_on_clock(c, 1, 3);
	cr_assert(core_p2p_barrier_end(c, 3));
	/* The peer itself is always live; sampled draws skip the dead. */
	core_p2p_set_alive(c, 0, false);
	cr_assert(core_p2p_is_alive(c, 0));
	core_p2p_destroy(&c);
	conf.bp = (struct barrier_params){ .kind = BARRIER_PSSP, .sample = 3, .staleness = 1 };
	c = core_p2p_new(&conf);
	core_p2p_set_alive(c, 2, false);
	k = core_p2p_barrier_begin(c, 5, &thr, &ask);
	cr_assert_eq(thr, 4);
	cr_assert_eq(k, 2);
	for (size_t i = 0; i < k; i++)
		cr_assert(ask[i] == 1 || ask[i] == 3);
	core_p2p_destroy(&c);
}

Test(core_p2p, gossip_and_resume)
{
	struct core_p2p_conf conf = { .n = 5, .self = 2, .bp = { .kind = BARRIER_ASP }, .fanout = 2,
				      .local_steps = 3, .merge = true, .weighted = true, .seed = 99 };
	struct core_p2p *c = core_p2p_new(&conf);
	uint64_t rng = 99 ^ (0x2545f4914f6cdd1dull * 3);
	size_t ref[5];
	const uint32_t *q;
	bool got[5] = { false, true, false, true, true };
	int64_t their[5] = { 0, 9, 0, 7, 12 }, lo;

	cr_assert_not_null(c);
	cr_assert_not(core_p2p_gossip_due(c, 0));
	cr_assert_not(core_p2p_gossip_due(c, 2));
	cr_assert(core_p2p_gossip_due(c, 3));
	cr_assert(core_p2p_gossip_due(c, 6));
	core_p2p_set_alive(c, 4, false);
	/* The emulator's gossip stream, draw for draw. */
	for (int r = 0; r < 20; r++) {
		bool alive[5] = { true, true, true, true, false };
		size_t k = core_p2p_gossip_partners(c, &q);
		size_t kr = barrier_sample(&rng, 5, 2, alive, 2, ref);

		cr_assert_eq(k, kr);
		for (size_t i = 0; i < k; i++) {
			cr_assert_eq(q[i], ref[i]);
			cr_assert(q[i] != 2 && q[i] != 4);
		}
	}
	cr_assert_float_eq(core_p2p_merge_weight(c, 30), 30, 1e-12);
	cr_assert_float_eq(core_p2p_merge_weight(c, -1), 1, 1e-12);
	cr_assert_float_eq(core_p2p_own_weight(c, 40), 40, 1e-12);
	/* Resume from the slowest answer ahead of my clock. */
	cr_assert_eq(core_p2p_resume_from(c, 3, got, their, &lo), 3);
	cr_assert_eq(lo, 7);
	cr_assert_eq(core_p2p_resume_from(c, 7, got, their, &lo), UINT32_MAX);
	cr_assert_eq(core_p2p_live_others(c, &q), 3);
	cr_assert(q[0] == 0 && q[1] == 1 && q[2] == 3);
	core_p2p_destroy(&c);
	conf.weighted = false;
	conf.merge = false; /* ensemble: never a gossip round */
	c = core_p2p_new(&conf);
	cr_assert_not(core_p2p_gossip_due(c, 3));
	cr_assert_float_eq(core_p2p_merge_weight(c, 30), 1, 1e-12);
	cr_assert_float_eq(core_p2p_own_weight(c, 40), 1, 1e-12);
	cr_assert(core_p2p_answerable(5, 5) && !core_p2p_answerable(4, 5));
	core_p2p_destroy(&c);
	cr_assert_null(core_p2p_new(&(struct core_p2p_conf){ .n = 2, .self = 2, .local_steps = 1 }));
	cr_assert_null(core_p2p_new(&(struct core_p2p_conf){ .n = 2, .self = 0, .local_steps = 0 }));
}

/* The join against a reference from its definition, every case of 4 peers (self 0): each other
 * peer is live or crashed, is reached by the joiner or not (only a live one can be), and each
 * live peer that answers counts each other peer as departed or not (a crashed peer is counted
 * departed by the live ones that saw it go, i.e. by any subset). The joiner waits for a peer
 * exactly while it has not answered and (no answer counts it departed or the joiner reached
 * it); a crashed peer some answer counts departed is never waited for; at the end every asked
 * peer that neither answered nor was reached is out until reached, and the resume peer is the
 * slowest answer. */
Test(core_p2p, join_skips_only_departed_unreached_peers)
{
	const uint32_t n = 4;
	unsigned long cases = 0;

	/* crashed: bit j-1; reached (live only): bit j-1; views: 3 bits per answerer. */
	for (unsigned crashed = 0; crashed < 8; crashed++) {
		for (unsigned reached = 0; reached < 8; reached++) {
			if (reached & crashed)
				continue;
			for (unsigned views = 0; views < 512; views++) {
				struct core_p2p_conf conf = { .n = n, .self = 0,
							      .bp = { .kind = BARRIER_BSP },
							      .local_steps = 1 };
				struct core_p2p *c = core_p2p_new(&conf);
				const uint32_t *ask;
				bool departed_by_some[4] = { false }, view[4];
				int64_t clk[4] = { 0, 40, 25, 31 }, lo, want_lo = INT64_MAX;
				uint32_t want_from = UINT32_MAX, from;
				size_t k;

				cr_assert_not_null(c);
				bool skip_case = false;

				/* a view only from a live answerer; a crashed peer's bits are unused */
				for (uint32_t a = 1; a < n; a++)
					if ((crashed >> (a - 1)) & 1 && (views >> (3 * (a - 1))) & 7)
						skip_case = true;
				if (skip_case) {
					core_p2p_destroy(&c);
					continue;
				}
				cases++;
				for (uint32_t j = 1; j < n; j++)
					if ((reached >> (j - 1)) & 1)
						core_p2p_on_reached(c, j);
				k = core_p2p_join_begin(c, &ask);
				cr_assert_eq(k, 3);
				for (uint32_t j = 1; j < n; j++)
					cr_assert(core_p2p_join_waits_for(c, j));
				cr_assert_not(core_p2p_join_waits_for(c, 0));
				/* The live peers answer, in index order. */
				for (uint32_t a = 1; a < n; a++) {
					if ((crashed >> (a - 1)) & 1)
						continue;
					for (uint32_t t = 0; t < n; t++) {
						view[t] = t != 0 && t != a &&
							  (views >> (3 * (a - 1) + t - 1)) & 1;
						if (view[t])
							departed_by_some[t] = true;
					}
					core_p2p_join_on_answer(c, a, clk[a], view);
					if (clk[a] < want_lo) {
						want_lo = clk[a];
						want_from = a;
					}
					cr_assert_eq(core_p2p_known(c, a), clk[a]);
				}
				for (uint32_t j = 1; j < n; j++) {
					bool answered = !((crashed >> (j - 1)) & 1);
					bool r = (reached >> (j - 1)) & 1;
					bool want = !answered && (!departed_by_some[j] || r);

					cr_assert_eq(core_p2p_join_waits_for(c, j), want,
						     "crashed %u reached %u views %u peer %u", crashed,
						     reached, views, j);
				}
				from = core_p2p_join_end(c, 0, &lo);
				cr_assert_eq(from, want_from);
				if (from != UINT32_MAX)
					cr_assert_eq(lo, want_lo);
				for (uint32_t j = 1; j < n; j++) {
					bool answered = !((crashed >> (j - 1)) & 1);
					bool r = (reached >> (j - 1)) & 1;

					cr_assert_eq(core_p2p_is_alive(c, j), answered || r);
				}
				/* Out means out of the barrier too, and the driver's "live" does
				 * not bring it back: only a connection does. */
				for (uint32_t j = 1; j < n; j++)
					core_p2p_set_alive(c, j, true);
				{
					bool in_ask[4] = { false };
					int64_t thr;
					size_t nask = core_p2p_barrier_begin(c, 50, &thr, &ask);

					cr_assert_eq(thr, 50);
					for (size_t i = 0; i < nask; i++)
						in_ask[ask[i]] = true;
					for (uint32_t j = 1; j < n; j++)
						cr_assert_eq(in_ask[j], !((crashed >> (j - 1)) & 1) ||
									 ((reached >> (j - 1)) & 1));
				}
				for (uint32_t j = 1; j < n; j++) {
					core_p2p_on_reached(c, j);
					cr_assert(core_p2p_is_alive(c, j));
				}
				core_p2p_destroy(&c);
			}
		}
	}
	cr_assert_gt(cases, 100ul);
}

/* A join with no answer yet asks again while some peer it waits for may answer: a reached one
 * (its process runs) until dead_after (without dead_after, for ever: the run's end bounds it),
 * an unreached one that no answer counts departed for reach_ns; it goes on alone only when
 * nobody is left. Any answer ends the asking: resume. */
Test(core_p2p, join_asks_again_while_a_peer_may_answer)
{
	const int64_t s = 1000000000ll, reach = 2 * s;
	struct core_p2p_conf conf = { .n = 4, .self = 0, .bp = { .kind = BARRIER_BSP },
				      .local_steps = 1, .dead_after_ns = 5 * s };
	struct core_p2p_conf unbounded = conf;
	struct core_p2p *c = core_p2p_new(&conf), *u;
	const uint32_t *ask;
	bool view[4] = { false, false, false, true };
	int64_t lo;

	cr_assert_not_null(c);
	/* Nobody reached, nobody answered: the first round's worth of waiting, then alone. */
	cr_assert_eq(core_p2p_join_begin(c, &ask), 3);
	cr_assert_eq(core_p2p_join_next(c, 0, reach), CORE_P2P_JOIN_AGAIN);
	cr_assert_eq(core_p2p_join_next(c, reach - 1, reach), CORE_P2P_JOIN_AGAIN);
	cr_assert_eq(core_p2p_join_next(c, reach, reach), CORE_P2P_JOIN_ALONE);
	/* Peer 2 reached: asked again past reach_ns, up to dead_after. */
	core_p2p_on_reached(c, 2);
	cr_assert_eq(core_p2p_join_next(c, reach, reach), CORE_P2P_JOIN_AGAIN);
	cr_assert_eq(core_p2p_join_next(c, 5 * s - 1, reach), CORE_P2P_JOIN_AGAIN);
	cr_assert_eq(core_p2p_join_next(c, 5 * s, reach), CORE_P2P_JOIN_ALONE);
	/* Its connection closed (the driver's word): nobody left. */
	core_p2p_set_alive(c, 2, false);
	cr_assert_eq(core_p2p_join_next(c, reach, reach), CORE_P2P_JOIN_ALONE);
	cr_assert_eq(core_p2p_join_next(c, 0, reach), CORE_P2P_JOIN_AGAIN, "1 and 3 may yet");
	core_p2p_set_alive(c, 1, false);
	core_p2p_set_alive(c, 3, false);
	cr_assert_eq(core_p2p_join_next(c, 0, reach), CORE_P2P_JOIN_ALONE);
	core_p2p_set_alive(c, 1, true);
	core_p2p_set_alive(c, 2, true);
	core_p2p_set_alive(c, 3, true);
	/* An answer: resume, whoever else is missing; from that answer when it is ahead. */
	core_p2p_join_on_answer(c, 1, 30, view);
	cr_assert_eq(core_p2p_join_next(c, 0, reach), CORE_P2P_JOIN_RESUME);
	cr_assert_eq(core_p2p_join_next(c, 100 * s, reach), CORE_P2P_JOIN_RESUME);
	cr_assert_eq(core_p2p_join_end(c, 0, &lo), 1);
	cr_assert_eq(lo, 30);
	cr_assert_not(core_p2p_is_alive(c, 3), "counted departed, never reached: out");
	cr_assert(core_p2p_is_alive(c, 2), "reached: in");
	core_p2p_destroy(&c);

	/* Without dead_after a reached peer is asked for as long as the run lasts (the driver's
	 * exchange ends with the run), until its connection closes. */
	unbounded.dead_after_ns = 0;
	u = core_p2p_new(&unbounded);
	cr_assert_not_null(u);
	core_p2p_on_reached(u, 3);
	cr_assert_eq(core_p2p_join_begin(u, &ask), 3);
	cr_assert_eq(core_p2p_join_next(u, 3600 * s, reach), CORE_P2P_JOIN_AGAIN);
	core_p2p_set_alive(u, 3, false);
	cr_assert_eq(core_p2p_join_next(u, 3600 * s, reach), CORE_P2P_JOIN_ALONE);
	cr_assert_eq(core_p2p_join_end(u, 0, &lo), UINT32_MAX, "alone: from its own clock");
	/* A lone peer has nobody to ask. */
	core_p2p_destroy(&u);
	unbounded.n = 1;
	u = core_p2p_new(&unbounded);
	cr_assert_not_null(u);
	cr_assert_eq(core_p2p_join_begin(u, &ask), 0);
	cr_assert_eq(core_p2p_join_next(u, 0, reach), CORE_P2P_JOIN_ALONE);
	core_p2p_destroy(&u);
}

/* The join's pull of the replica it resumes from, unanswered, is asked again while its owner
 * is live in the view and (with dead_after) for less than dead_after since the pull began;
 * without dead_after for as long as the owner is live. Self and out of range: never. */
Test(core_p2p, resume_pull_asks_again_while_its_owner_is_live)
{
	const int64_t s = 1000000000ll;
	struct core_p2p_conf conf = { .n = 3, .self = 0, .bp = { .kind = BARRIER_ASP },
				      .fanout = 1, .local_steps = 1, .merge = true,
				      .dead_after_ns = 10 * s, .behind = true };
	struct core_p2p *c = core_p2p_new(&conf);

	cr_assert_not_null(c);
	cr_assert(core_p2p_resume_asks_again(c, 1, 0));
	cr_assert(core_p2p_resume_asks_again(c, 1, 2 * s));
	cr_assert(core_p2p_resume_asks_again(c, 1, 10 * s - 1));
	cr_assert_not(core_p2p_resume_asks_again(c, 1, 10 * s), "dead_after since the pull began");
	core_p2p_set_alive(c, 1, false);
	cr_assert_not(core_p2p_resume_asks_again(c, 1, 0), "its connection closed");
	core_p2p_set_alive(c, 1, true);
	cr_assert(core_p2p_resume_asks_again(c, 1, 0));
	cr_assert_not(core_p2p_resume_asks_again(c, 0, 0));
	cr_assert_not(core_p2p_resume_asks_again(c, 3, 0));
	cr_assert_not(core_p2p_resume_asks_again(c, UINT32_MAX, 0));
	core_p2p_destroy(&c);
	conf.dead_after_ns = 0;
	c = core_p2p_new(&conf);
	cr_assert_not_null(c);
	cr_assert(core_p2p_resume_asks_again(c, 2, 3600 * s), "no dead_after: while it is live");
	core_p2p_set_alive(c, 2, false);
	cr_assert_not(core_p2p_resume_asks_again(c, 2, 0));
	core_p2p_destroy(&c);
}

/* A restarted or late peer serves no replica until it caught up: its pull answers say it is
 * behind and bring nothing; a peer that started with the run serves from the start. Only a
 * right-sized payload with a finite count of samples is a replica. */
Test(core_p2p, a_peer_catching_up_serves_no_replica)
{
	struct core_p2p_conf conf = { .n = 3, .self = 1, .bp = { .kind = BARRIER_ASP },
				      .fanout = 1, .local_steps = 1, .merge = true };
	struct core_p2p *c = core_p2p_new(&conf), *r;

	cr_assert_not_null(c);
	cr_assert(core_p2p_serves_replica(c));
	conf.behind = true;
	r = core_p2p_new(&conf);
	cr_assert_not_null(r);
	cr_assert_not(core_p2p_serves_replica(r));
	/* the join's steps do not make it serve; being caught up does */
	{
		const uint32_t *ask;
		int64_t lo;

		cr_assert_eq(core_p2p_join_begin(r, &ask), 2);
		core_p2p_join_on_answer(r, 0, 40, NULL);
		cr_assert_eq(core_p2p_join_end(r, 0, &lo), 0);
		cr_assert_not(core_p2p_serves_replica(r));
	}
	core_p2p_caught_up(r);
	cr_assert(core_p2p_serves_replica(r));
	core_p2p_caught_up(c);
	cr_assert(core_p2p_serves_replica(c));
	core_p2p_destroy(&c);
	core_p2p_destroy(&r);

	cr_assert_eq(core_p2p_pull_reply(10, 10, 6000), CORE_P2P_REPLY_REPLICA);
	cr_assert_eq(core_p2p_pull_reply(10, 10, 0), CORE_P2P_REPLY_REPLICA);
	cr_assert_eq(core_p2p_pull_reply(0, 10, -1), CORE_P2P_REPLY_BEHIND);
	cr_assert_eq(core_p2p_pull_reply(0, 10, 0), CORE_P2P_REPLY_BAD);
	cr_assert_eq(core_p2p_pull_reply(0, 10, NAN), CORE_P2P_REPLY_BAD);
	cr_assert_eq(core_p2p_pull_reply(10, 10, -1), CORE_P2P_REPLY_BAD, "a replica is no word");
	cr_assert_eq(core_p2p_pull_reply(9, 10, 6000), CORE_P2P_REPLY_BAD);
	cr_assert_eq(core_p2p_pull_reply(11, 10, 6000), CORE_P2P_REPLY_BAD);
	cr_assert_eq(core_p2p_pull_reply(10, 10, INFINITY), CORE_P2P_REPLY_BAD);
	cr_assert_eq(core_p2p_pull_reply(10, 10, NAN), CORE_P2P_REPLY_BAD);
}

/* A join answered by a peer that is catching up itself (two restarts at about the same time):
 * that answer ends the wait for it and its view counts, but its clock (0: a fresh process) is
 * none to resume from, so the join resumes from the peers that trained on, and with nobody else
 * it is alone rather than resumed. */
Test(core_p2p, a_join_does_not_resume_from_a_peer_catching_up)
{
	const int64_t s = 1000000000ll;
	struct core_p2p_conf conf = { .n = 4, .self = 0, .bp = { .kind = BARRIER_BSP },
				      .local_steps = 1, .behind = true };
	struct core_p2p *c = core_p2p_new(&conf);
	const uint32_t *ask;
	bool view[4] = { false, false, false, true };
	int64_t lo;

	cr_assert_not_null(c);
	core_p2p_on_reached(c, 1);
	core_p2p_on_reached(c, 2);
	cr_assert_eq(core_p2p_join_begin(c, &ask), 3);
	/* peer 1 is behind, and counts peer 3 departed */
	core_p2p_join_on_behind(c, 1, view);
	cr_assert_not(core_p2p_join_waits_for(c, 1));
	cr_assert_not(core_p2p_join_waits_for(c, 3), "its view counts");
	cr_assert(core_p2p_join_waits_for(c, 2));
	cr_assert_eq(core_p2p_join_next(c, 3 * s, 2 * s), CORE_P2P_JOIN_AGAIN,
		     "a behind answer is no resume: peer 2 may answer");
	core_p2p_join_on_answer(c, 2, 57, NULL);
	cr_assert_eq(core_p2p_join_next(c, 3 * s, 2 * s), CORE_P2P_JOIN_RESUME);
	cr_assert_eq(core_p2p_join_end(c, 0, &lo), 2, "resumed from the peer that trained on");
	cr_assert_eq(lo, 57);
	cr_assert(core_p2p_is_alive(c, 1));
	cr_assert_not(core_p2p_is_alive(c, 3));

	/* Only a behind answer and nobody else: alone, from its own clock. */
	cr_assert_eq(core_p2p_join_begin(c, &ask), 2);
	core_p2p_join_on_behind(c, 1, NULL);
	core_p2p_set_alive(c, 2, false);
	cr_assert_eq(core_p2p_join_next(c, 0, 2 * s), CORE_P2P_JOIN_ALONE);
	cr_assert_eq(core_p2p_join_end(c, 0, &lo), UINT32_MAX);
	/* A behind answer followed by a real one (it caught up meanwhile): resume from that. */
	core_p2p_set_alive(c, 2, true);
	cr_assert_eq(core_p2p_join_begin(c, &ask), 2);
	core_p2p_join_on_behind(c, 1, NULL);
	core_p2p_join_on_answer(c, 1, 12, NULL);
	core_p2p_join_on_behind(c, 1, NULL);
	cr_assert_eq(core_p2p_join_next(c, 0, 2 * s), CORE_P2P_JOIN_RESUME);
	cr_assert_eq(core_p2p_join_end(c, 0, &lo), 1);
	cr_assert_eq(lo, 12);
	core_p2p_destroy(&c);
}

/* Silence: a pull unanswered for dead_after (counted from the request, whatever else came from
 * the peer: every wait is bounded) ends the wait and makes the peer silent: never drawn as a gossip
 * partner, still live for barriers, until something from it comes after it was found silent.
 * Without dead_after a pull waits for ever; with nobody silent the draws are the old stream's. */
Test(core_p2p, silent_peer_leaves_the_gossip_draw_until_heard)
{
	const int64_t s = 1000000000ll;
	struct core_p2p_conf conf = { .n = 4, .self = 0, .bp = { .kind = BARRIER_BSP }, .fanout = 1,
				      .local_steps = 1, .merge = true, .seed = 7,
				      .dead_after_ns = 2 * s };
	struct core_p2p *c = core_p2p_new(&conf);
	uint64_t rng = 7 ^ (0x2545f4914f6cdd1dull * 1);
	bool all[4] = { true, true, true, true }, no2[4] = { true, true, false, true };
	const uint32_t *q;
	int64_t thr;
	size_t ref[4], k;
	int seen[4] = { 0 };

	cr_assert_not_null(c);
	/* Asked at 10 s: not before 12 s. */
	cr_assert_not(core_p2p_pull_gives_up(c, 2, 10 * s, 10 * s));
	cr_assert_not(core_p2p_pull_gives_up(c, 2, 10 * s, 12 * s - 1));
	cr_assert_not(core_p2p_is_silent(c, 2));
	/* A word from it at 11 s (it pulled from us) does not prolong the wait. */
	cr_assert_not(core_p2p_on_heard(c, 2, 11 * s));
	cr_assert(core_p2p_pull_gives_up(c, 2, 10 * s, 12 * s));
	cr_assert(core_p2p_pull_gives_up(c, 2, 10 * s, 13 * s), "silent stays silent");
	cr_assert(core_p2p_is_silent(c, 2));
	cr_assert(core_p2p_is_alive(c, 2), "silence is not a departure");
	cr_assert_not(core_p2p_is_silent(c, 1));
	/* Still in every barrier. */
	cr_assert_eq(core_p2p_barrier_begin(c, 1, &thr, &q), 3);
	/* Out of the draws: the gossip stream over the others. */
	for (int r = 0; r < 60; r++) {
		k = core_p2p_gossip_partners(c, &q);
		cr_assert_eq(k, 1);
		cr_assert_eq(barrier_sample(&rng, 4, 0, no2, 1, ref), 1);
		cr_assert_eq(q[0], ref[0]);
		cr_assert_neq(q[0], 2, "a silent peer was drawn");
		seen[q[0]]++;
	}
	cr_assert(seen[1] > 0 && seen[3] > 0);
	/* Something it sent before it was found silent does not bring it back. */
	cr_assert_not(core_p2p_on_heard(c, 2, 12 * s - 1));
	cr_assert_not(core_p2p_on_heard(c, 2, 12 * s));
	cr_assert(core_p2p_is_silent(c, 2));
	/* Heard after: back in the draws. */
	cr_assert(core_p2p_on_heard(c, 2, 14 * s));
	cr_assert_not(core_p2p_is_silent(c, 2));
	cr_assert_not(core_p2p_on_heard(c, 2, 15 * s), "back only once");
	memset(seen, 0, sizeof seen);
	for (int r = 0; r < 60; r++) {
		cr_assert_eq(core_p2p_gossip_partners(c, &q), 1);
		cr_assert_eq(barrier_sample(&rng, 4, 0, all, 1, ref), 1);
		cr_assert_eq(q[0], ref[0]);
		seen[q[0]]++;
	}
	cr_assert_gt(seen[2], 0);
	/* A new pull to it: dead_after from its request. */
	cr_assert_not(core_p2p_pull_gives_up(c, 2, 16 * s, 18 * s - 1));
	cr_assert_not(core_p2p_is_silent(c, 2));
	cr_assert(core_p2p_pull_gives_up(c, 2, 16 * s, 18 * s));
	cr_assert(core_p2p_is_silent(c, 2));
	cr_assert(core_p2p_on_heard(c, 2, 19 * s));
	/* Every peer silent but one: it is the only partner; all silent: nobody. */
	cr_assert(core_p2p_pull_gives_up(c, 1, 0, 30 * s));
	cr_assert(core_p2p_pull_gives_up(c, 2, 20 * s, 30 * s));
	cr_assert_eq(core_p2p_gossip_partners(c, &q), 1);
	cr_assert_eq(q[0], 3);
	cr_assert(core_p2p_pull_gives_up(c, 3, 0, 30 * s));
	cr_assert_eq(core_p2p_gossip_partners(c, &q), 0);
	/* Out of range and self: never silent. */
	cr_assert_not(core_p2p_pull_gives_up(c, 0, 0, 100 * s));
	cr_assert_not(core_p2p_pull_gives_up(c, 4, 0, 100 * s));
	cr_assert_not(core_p2p_is_silent(c, 4));
	core_p2p_destroy(&c);
	/* No dead_after: a pull is waited for however long. */
	conf.dead_after_ns = 0;
	c = core_p2p_new(&conf);
	cr_assert_not(core_p2p_pull_gives_up(c, 2, 0, 1000 * s));
	cr_assert_not(core_p2p_is_silent(c, 2));
	core_p2p_destroy(&c);
	conf.dead_after_ns = -1;
	cr_assert_null(core_p2p_new(&conf));
}
