/* node/core_ps: see core_ps.h.
 *
 * Every rule here was in node/engine_ps's server before it moved; the driver feeds what the
 * ROUTER received and carries the actions out in order. The rules are the plain ones (judge
 * every held request after every change); what follows only keeps that cheap for 10,000+
 * workers, and conf.reference turns it off so tests can compare the two:
 *   - BSP/SSP: a held request at clock c (the worker's own clock is >= c) may go when the
 *     smallest live clock is >= the threshold. The smallest live clock and how many live
 *     workers have it are kept; it is recounted (O(n)) only when its last holder moves on.
 *   - A release pass judges only candidates: a request just held, the waiters of a worker whose
 *     clock rose (pBSP/pSSP), or everybody after a change that can free many (the smallest
 *     clock rose, a BSP round closed, a worker came or went). Candidates are judged in index
 *     order, the order a whole pass takes.
 *   - pBSP/pSSP with a sample per crossing: a held request is linked to one sampled live
 *     worker below its threshold, the one with the smallest clock (a doubly linked list per
 *     worker over a fixed pool, no allocation); when that worker reaches the threshold the
 *     request looks at its sample again and links to the next one, or, none left, is a
 *     candidate. One link per request, not one per sampled worker (12 bytes a sampled worker
 *     took 100,000 workers over 200 bytes each).
 *   - The sample is a partial Fisher-Yates shuffle of the live others done sparsely: the
 *     candidate at position p is found in a Fenwick tree over liveness (O(log n)) and the
 *     shuffle's swaps live in a small map, so a draw costs O(beta (beta + log n)) and gives
 *     exactly what node/barrier's barrier_sample gives from the same stream (tested), the
 *     samples the emulator always drew.
 *   - The sample of a crossing is not kept: a draw depends only on the stream's state and on
 *     liveness, so the worker's stream stays at its state before the draw and the sample is
 *     drawn again from it whenever the request is looked at. The stream moves past the draw
 *     (settle: the same bounds, so the same raw values) at the worker's next draw, or before
 *     liveness changes: then every draw not yet settled is, and the samples of the requests
 *     still held are kept in a pool until they end (few: only requests held across a change).
 *     The draws and so every decision are the ones a kept sample gives (conf.reference keeps
 *     them, and the tests compare).
 *   - A sample per check (conf.draw = BARRIER_DRAW_CHECK): the plain rule draws a fresh sample
 *     for every held request at every release pass, which is O(held) per event. A check of a
 *     live request at threshold t passes with probability
 *         p = C(a, k) / C(M, k),  M = live others, k = min(beta, M), a = live others >= t,
 *     the same for every request at t, and independent between checks. So held requests are
 *     grouped by threshold (struct lvl, which counts the live workers at or above it as clocks
 *     rise), each request draws once an exponential budget E from its own stream, and each
 *     pass adds the hazard -ln(1 - p) of one check to its level's sum; a request goes when the
 *     sum since it was held reaches E. Surviving checks of probabilities p_1..p_m then has
 *     probability exp(-sum -ln(1 - p_j)) = prod (1 - p_j), the plain rule's, so the release
 *     times have exactly the plain rule's distribution (not its draws: conf.reference draws
 *     the samples literally, from a stream of (seed, worker, step, check's ordinal), and the
 *     tests compare the two in distribution). p = 0 and p = 1 are exact, so beta = 0 is ASP
 *     and beta >= the live others is BSP/SSP decision for decision. A request of a worker that
 *     is not live (its pool differs) draws literally at every pass; there are few. */
#include "node/core_ps.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The seed of worker i's sampling stream (what the emulator's server always used). */
#define CORE_PS_RNG_STREAM 0x62617272ull
/* The seed of the streams of a sample per check. */
#define CORE_PS_CHECK_STREAM 0x636865636bull

#define CORE_PS_ACT_CAP 1024 /* actions' room made at creation, at most */

struct cw {
	int64_t held_c;        /* the held request's clock */
	int64_t held_since_ns;
	int64_t pushed_on;     /* model version of its latest update (-1 = none yet) */
	int64_t last_push;     /* step of its latest push (-1 = none): a push at or below it is a
				* copy sent again after a reconnect */
	/* The latest message's time while it has not departed, then the time it departed (only
	 * the grace runs then; its next message is a return and sets it again). */
	int64_t seen_ns;
	int32_t last_ack;      /* the ACK's aux for that push (a staleness, saturated) */
	bool known : 1, left : 1, held : 1, leaving : 1, departed : 1, late : 1, cand : 1;
	unsigned held_reply : 1; /* enum core_ps_reply */
	/* Per crossing (fast path): rng is still the state before worker i's latest draw, which
	 * is regenerated from it when needed (no liveness change since; see settle). */
	bool drawn : 1;
};

/* draw = CHECK: the held requests (of live workers) with one threshold. */
struct lvl {
	int64_t need;          /* the threshold */
	uint32_t above;        /* live workers with clock >= need */
	uint32_t n, cap;       /* requests in heap */
	uint32_t *heap;        /* min-heap of worker indices by tgt[] */
	double sum;            /* hazard of the checks made since the level's requests were timed */
	double hz;             /* hazard of one check (INFINITY: it passes) */
	double lp;             /* ln p for lp_a live others above out of lp_m (lp_m 0: none) */
	uint32_t lp_a, lp_m;
	bool dirty;            /* above or live changed: hz is recomputed before use */
};

struct core_ps {
	struct core_ps_conf conf;
	bool check;            /* pBSP/pSSP with a sample per check */
	bool cross;            /* pBSP/pSSP with a sample per crossing, beta > 0, not reference:
				* samples regenerated, one waiter link per held request */
	struct lvl *lv;        /* check: levels in increasing need */
	uint32_t nlv, caplv;
	double *tgt;           /* check: the level sum at which worker i's request goes */
	uint32_t *hpos;        /* check: its place in its level's heap (NIL: none) */
	uint32_t *buf;         /* check, cross: one draw (slot entries) */
	struct cw *w;
	int64_t *clocks;       /* node/barrier's clock vector */
	bool *alive;
	/* Per worker, only where the configuration needs them (so a record stays 48 bytes): */
	uint64_t *rng;         /* per crossing: worker i's sampling stream */
	uint32_t *nsample;     /* per crossing, reference or beta 0: the size of its sample */
	uint32_t *unsat;       /* per check: draws made from the request's stream */
	uint64_t *round_samples; /* averaging: samples behind its latest model (0 = none yet) */
	uint32_t *samples;     /* reference or beta 0: worker i's sample at [i * slot, + nsample) */
	size_t slot;
	size_t *scratch;       /* reference: n indices for barrier_sample */
	uint32_t *nxt, *prv;   /* cross: waiter links, node i = worker i's held request (linked to
				* one sampled worker below its threshold), node n + j = the head of
				* worker j's list (nxt only) */
	uint32_t *mat;         /* cross: block in mpool of worker i's held sample kept over a
				* liveness change (NIL: regenerated); made at the first change */
	uint32_t *mpool;       /* cross: blocks of slot + 1 entries (count, then the sample; a
				* free block's first entry links the next free one) */
	uint32_t mcap, mfree;  /* blocks in mpool, the first free one (NIL: none) */
	uint32_t *mkey, *mval; /* the sparse shuffle's swaps (2 * slot) */
	int32_t *fen;          /* pBSP/pSSP: Fenwick tree over alive[] (1-based) */
	uint32_t fen_top;      /* highest power of two <= n */
	int64_t lmin;          /* smallest live clock (INT64_MAX: nobody live) */
	uint32_t lmin_cnt;     /* live workers at lmin */
	uint32_t *cand;        /* candidates of the next release pass */
	uint32_t ncand;
	bool rescan;           /* the next pass judges every held request */
	struct barrier_round round;
	double agg_w;          /* BSP: sum of the open round's weights */
	uint32_t live, held_live, held;
	struct core_ps_stats st;
	struct core_ps_action *act;
	size_t nact, cap;
	bool oom;              /* an action could not be stored (reported by the event) */
};

double core_ps_weight(enum core_ps_weighting w, int64_t staleness)
{
	double s = staleness > 0 ? (double)staleness : 0;

	switch (w) {
	case CORE_PS_WEIGHT_INVERSE:
		return 1.0 / (1.0 + s);
	case CORE_PS_WEIGHT_EXP:
		return exp(-s);
	case CORE_PS_WEIGHT_NONE:
	default:
		return 1.0;
	}
}

static bool is_sync(const struct core_ps *c)
{
	return c->conf.bp.kind == BARRIER_BSP;
}

static void emit(struct core_ps *c, enum core_ps_action_kind kind, uint32_t w, int64_t step,
		 int64_t aux, double x)
{
	struct core_ps_action *a;

	if (c->nact == c->cap) {
		/* Only when one event does more than the room made at creation
		 * (min(2n + 16, CORE_PS_ACT_CAP)): a BSP round of more than ~500 workers, once.
		 * By half, not double, so what stays is close to the largest event's need. */
		size_t cap = c->cap + (c->cap / 2 > CORE_PS_ACT_CAP ? c->cap / 2 : CORE_PS_ACT_CAP);
		struct core_ps_action *p = realloc(c->act, cap * sizeof *p);

		if (!p) {
			c->oom = true;
			return;
		}
		c->act = p;
		c->cap = cap;
	}
	a = &c->act[c->nact++];
	*a = (struct core_ps_action){ .kind = kind, .worker = w, .step = step,
				      .version = c->st.version, .aux = aux, .x = x };
}

#define NIL UINT32_MAX

/* --- waiter links (pBSP/pSSP) --------------------------------------------------------------- */

static void link_req(struct core_ps *c, uint32_t i, uint32_t j)
{
	uint32_t h = c->conf.n + j;

	c->prv[i] = h;
	c->nxt[i] = c->nxt[h];
	if (c->nxt[h] != NIL)
		c->prv[c->nxt[h]] = i;
	c->nxt[h] = i;
}

static void unlink_req(struct core_ps *c, uint32_t i)
{
	if (c->prv[i] == NIL)
		return;
	c->nxt[c->prv[i]] = c->nxt[i];
	if (c->nxt[i] != NIL)
		c->prv[c->nxt[i]] = c->prv[i];
	c->prv[i] = c->nxt[i] = NIL;
}

static size_t draw_sample(struct core_ps *c, uint32_t i, uint64_t *rng, uint32_t *out);

/* Worker i's latest draw is done with: its stream moves past it as the draw moved it (the
 * same bounds, so the same raw values and rejections), without making the sample. Liveness
 * must not have changed since the draw. */
static void settle(struct core_ps *c, uint32_t i)
{
	size_t cnt = c->live - (c->alive[i] ? 1 : 0);
	size_t k = c->conf.bp.sample < cnt ? c->conf.bp.sample : cnt;

	for (size_t a = 0; a < k; a++)
		(void)barrier_rng_below(&c->rng[i], cnt - a);
	c->w[i].drawn = false;
}

static void mat_free(struct core_ps *c, uint32_t i)
{
	uint32_t b;

	if (!c->mat || c->mat[i] == NIL)
		return;
	b = c->mat[i];
	c->mpool[(size_t)b * (c->slot + 1)] = c->mfree;
	c->mfree = b;
	c->mat[i] = NIL;
}

/* A free block of mpool (NIL: no memory). */
static uint32_t mat_alloc(struct core_ps *c)
{
	size_t bs = c->slot + 1;
	uint32_t b;

	if (c->mfree == NIL) {
		uint32_t cap = c->mcap ? 2 * c->mcap : 64;
		uint32_t *p = cap > c->mcap ? realloc(c->mpool, (size_t)cap * bs * sizeof *p) : NULL;

		if (!p)
			return NIL;
		for (b = c->mcap; b < cap; b++)
			p[(size_t)b * bs] = b + 1 < cap ? b + 1 : NIL;
		c->mpool = p;
		c->mfree = c->mcap;
		c->mcap = cap;
	}
	b = c->mfree;
	c->mfree = c->mpool[(size_t)b * bs];
	return b;
}

/* Liveness is about to change, and with it what a draw from a stored state would give: every
 * draw not yet settled is, and the held requests' samples are kept in mpool first (each draw
 * once: O(n) plus the draws since the previous change). */
static void keep_samples(struct core_ps *c)
{
	size_t bs = c->slot + 1;

	for (uint32_t i = 0; i < c->conf.n; i++) {
		uint32_t b;

		if (!c->w[i].drawn)
			continue;
		if (!c->w[i].held) {
			settle(c, i);
			continue;
		}
		if (!c->mat) {
			c->mat = malloc((size_t)c->conf.n * sizeof *c->mat);
			if (c->mat)
				memset(c->mat, 0xff, (size_t)c->conf.n * sizeof *c->mat);
		}
		b = c->mat ? mat_alloc(c) : NIL;
		if (b == NIL) {
			c->oom = true; /* the sample is lost: reported by the event */
			settle(c, i);
			continue;
		}
		c->mpool[(size_t)b * bs] = (uint32_t)draw_sample(c, i, &c->rng[i], c->mpool + (size_t)b * bs + 1);
		c->mat[i] = b;
		c->w[i].drawn = false;
	}
}

/* Held worker i's sample (kept, or drawn again from the state before its draw): the live
 * sampled worker below the threshold with the smallest clock (the likeliest to stay below
 * longest), or NIL when there is none and the barrier holds. */
static uint32_t blocker(struct core_ps *c, uint32_t i)
{
	int64_t need = barrier_threshold(&c->conf.bp, c->w[i].held_c);
	const uint32_t *s = c->buf;
	uint32_t best = NIL;
	size_t k;

	if (c->mat && c->mat[i] != NIL) {
		s = c->mpool + (size_t)c->mat[i] * (c->slot + 1);
		k = *s++;
	} else {
		uint64_t st = c->rng[i];

		k = draw_sample(c, i, &st, c->buf);
	}
	for (size_t a = 0; a < k; a++) {
		uint32_t j = s[a];

		if (j != i && c->alive[j] && c->clocks[j] < need &&
		    (best == NIL || c->clocks[j] < c->clocks[best]))
			best = j;
	}
	return best;
}

static void add_cand(struct core_ps *c, uint32_t i)
{
	if (c->w[i].cand)
		return;
	c->w[i].cand = true;
	c->cand[c->ncand++] = i;
}

static void lvl_rise(struct core_ps *c, int64_t old, int64_t v);
static void lvl_remove(struct core_ps *c, uint32_t i);
static void lvl_insert(struct core_ps *c, uint32_t i);
static void check_pass(struct core_ps *c, int64_t now_ns);

/* --- liveness: counters, the Fenwick tree, the smallest live clock -------------------------- */

static void fen_add(struct core_ps *c, uint32_t i, int32_t d)
{
	for (uint32_t x = i + 1; x <= c->conf.n; x += x & -x)
		c->fen[x] += d;
}

/* Live workers with index < i. */
static uint32_t fen_prefix(const struct core_ps *c, uint32_t i)
{
	int32_t s = 0;

	for (uint32_t x = i; x > 0; x -= x & -x)
		s += c->fen[x];
	return (uint32_t)s;
}

/* Index of the r-th (0-based) live worker; r < live. */
static uint32_t fen_select(const struct core_ps *c, uint32_t r)
{
	uint32_t pos = 0;
	int32_t left = (int32_t)r + 1;

	for (uint32_t step = c->fen_top; step > 0; step >>= 1)
		if (pos + step <= c->conf.n && c->fen[pos + step] < left) {
			pos += step;
			left -= c->fen[pos];
		}
	return pos; /* 1-based pos + 1 is the answer; 0-based it is pos */
}

static void recount_min(struct core_ps *c)
{
	int64_t old = c->lmin;

	c->lmin = INT64_MAX;
	c->lmin_cnt = 0;
	for (uint32_t j = 0; j < c->conf.n; j++) {
		if (!c->alive[j])
			continue;
		if (c->clocks[j] < c->lmin) {
			c->lmin = c->clocks[j];
			c->lmin_cnt = 1;
		} else if (c->clocks[j] == c->lmin) {
			c->lmin_cnt++;
		}
	}
	/* Only BSP/SSP requests wait for the smallest clock (pBSP/pSSP ones for their links). */
	if (c->lmin > old && !barrier_is_sampled(c->conf.bp.kind))
		c->rescan = true;
}

static void min_add(struct core_ps *c, int64_t v)
{
	if (v < c->lmin) {
		c->lmin = v;
		c->lmin_cnt = 1;
	} else if (v == c->lmin) {
		c->lmin_cnt++;
	}
}

static void min_remove(struct core_ps *c, int64_t v)
{
	if (v == c->lmin && --c->lmin_cnt == 0)
		recount_min(c);
}

/* Worker i's clock rises to v (never falls): the smallest live clock may rise, and the
 * requests held on i (pBSP/pSSP) that it now satisfies lose a link. */
static void raise_clock(struct core_ps *c, uint32_t i, int64_t v)
{
	int64_t old = c->clocks[i];

	if (v <= old)
		return;
	c->clocks[i] = v;
	if (c->alive[i]) {
		/* the new value first, so the recount never sees nobody at the minimum */
		min_add(c, v);
		min_remove(c, old);
	}
	if (c->check && c->alive[i] && !c->conf.reference)
		lvl_rise(c, old, v);
	if (c->cross) {
		/* the requests waiting on i: those it now satisfies look for another blocker */
		uint32_t h = c->nxt[c->conf.n + i];

		while (h != NIL) {
			uint32_t next = c->nxt[h], b;

			if (v >= barrier_threshold(&c->conf.bp, c->w[h].held_c)) {
				unlink_req(c, h);
				b = blocker(c, h);
				if (b == NIL)
					add_cand(c, h);
				else
					link_req(c, h, b);
			}
			h = next;
		}
	}
}

static void set_held(struct core_ps *c, uint32_t i, bool held)
{
	if (c->w[i].held == held)
		return;
	c->w[i].held = held;
	c->held += held ? 1 : (uint32_t)-1;
	if (c->alive[i])
		c->held_live += held ? 1 : (uint32_t)-1;
	if (!held && c->cross) {
		unlink_req(c, i);
		mat_free(c, i);
	}
	if (!held && c->check)
		lvl_remove(c, i);
}

static void set_alive(struct core_ps *c, uint32_t i, bool live)
{
	if (c->cross)
		keep_samples(c);
	c->alive[i] = live;
	c->live += live ? 1 : (uint32_t)-1;
	if (c->w[i].held)
		c->held_live += live ? 1 : (uint32_t)-1;
	if (c->fen)
		fen_add(c, i, live ? 1 : -1);
	if (live)
		min_add(c, c->clocks[i]);
	else
		min_remove(c, c->clocks[i]);
	/* Who waits for whom changed: the next pass judges (and relinks) everybody. */
	c->rescan = true;
}

/* The barrier decision for held worker i at clock cl (its own clock is >= cl). */
static bool may_proceed(struct core_ps *c, uint32_t i, int64_t cl)
{
	const struct cw *w = &c->w[i];
	const struct barrier_params *bp = &c->conf.bp;

	if (is_sync(c)) {
		/* The round this worker's latest update went into must have closed, so no worker
		 * ever contributes twice to one round. Without backup workers every live worker's
		 * update is in each round, and that is "every live worker has clock >= c"; with
		 * them, the round closing is the whole condition. */
		if (c->st.version <= w->pushed_on)
			return false;
		if (bp->backup > 0)
			return true;
	}
	if (bp->kind == BARRIER_ASP)
		return true;
	if (barrier_is_sampled(bp->kind)) {
		/* node/barrier's rule for the drawn sample: dead workers are never checked. */
		int64_t need = barrier_threshold(bp, cl);

		if (c->cross)
			return blocker(c, i) == NIL;
		for (size_t k = 0; c->nsample && k < c->nsample[i]; k++) {
			uint32_t j = c->samples[i * c->slot + k];

			if (j != i && c->alive[j] && c->clocks[j] < need)
				return false;
		}
		return true;
	}
	if (c->conf.reference)
		return barrier_may_proceed(bp, c->clocks, c->alive, c->conf.n, i, cl, NULL, 0);
	/* BSP/SSP: "every live other >= threshold" is "the smallest live clock >= threshold",
	 * since i's own clock is >= cl >= the threshold (or i is not live). */
	return c->lmin >= barrier_threshold(bp, cl);
}

/* Answer worker i's held request. */
static void release(struct core_ps *c, uint32_t i, int64_t now_ns)
{
	struct cw *w = &c->w[i];
	size_t k = c->nact;

	set_held(c, i, false);
	emit(c, CORE_PS_RELEASE, i, w->held_c, now_ns - w->held_since_ns, 0);
	if (k < c->nact)
		c->act[k].reply = w->held_reply;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* Release every held request its barrier now allows (after anything the decision depends on
 * changed), in index order. */
static void release_held(struct core_ps *c, int64_t now_ns)
{
	if (c->check) {
		check_pass(c, now_ns);
		return;
	}
	if (c->rescan || c->conf.reference) {
		for (uint32_t i = 0; i < c->conf.n; i++) {
			struct cw *w = &c->w[i];

			w->cand = false;
			if (!w->held)
				continue;
			if (c->cross) {
				uint32_t b;

				unlink_req(c, i); /* relinked: who waits for whom changed */
				b = blocker(c, i);
				if (b == NIL)
					release(c, i, now_ns);
				else
					link_req(c, i, b);
			} else if (may_proceed(c, i, w->held_c)) {
				release(c, i, now_ns);
			}
		}
		c->ncand = 0;
		c->rescan = false;
		return;
	}
	if (c->ncand > 1)
		qsort(c->cand, c->ncand, sizeof *c->cand, cmp_u32);
	for (uint32_t k = 0; k < c->ncand; k++) {
		uint32_t i = c->cand[k];

		c->w[i].cand = false;
		/* cross: a candidate was judged when it became one (an unlinked request has no
		 * blocker; nothing but a liveness change, which rescans, can give it one) */
		if (c->w[i].held &&
		    (c->cross ? c->prv[i] == NIL : may_proceed(c, i, c->w[i].held_c)))
			release(c, i, now_ns);
	}
	c->ncand = 0;
}

static void set_live(struct core_ps *c, uint32_t i, bool live, int64_t now_ns);

static void close_round(struct core_ps *c, int64_t now_ns)
{
	double x;

	/* Gradients: their mean; averaging: the sample-weighted mean of the models (FedAvg). A
	 * round never closes empty (need >= 1), so agg_w > 0 when it closes. */
	if (c->conf.average)
		x = c->agg_w > 0 ? 1.0 / c->agg_w : 0;
	else
		x = c->round.got ? 1.0 / (double)c->round.got : 0;
	c->st.version++;
	c->rescan = true; /* requests waiting for this round may go */
	emit(c, CORE_PS_ROUND_CLOSE, UINT32_MAX, c->round.version, c->round.got, x);
	c->agg_w = 0;
	barrier_round_advance(&c->round);
	for (uint32_t i = 0; i < c->conf.n; i++)
		if (c->w[i].leaving)
			set_live(c, i, false, now_ns);
}

static void set_live(struct core_ps *c, uint32_t i, bool live, int64_t now_ns)
{
	struct cw *w = &c->w[i];

	if (live)
		w->leaving = false;
	if (c->alive[i] == live)
		return;
	if (!live && is_sync(c) && w->pushed_on == c->round.version && c->round.got > 0) {
		/* Its update is in the open round: it still counts there. A departure must not
		 * shrink the round it contributed to (that would close it on fewer updates). */
		w->leaving = true;
		return;
	}
	w->leaving = false;
	set_alive(c, i, live);
	emit(c, CORE_PS_LIVE, i, c->live, live, 0);
	if (is_sync(c) && barrier_round_set_live(&c->round, c->live))
		close_round(c, now_ns);
	release_held(c, now_ns);
}

/* Position p of the candidate list barrier_sample shuffles: the live workers but i, in index
 * order, with the swaps made so far (mkey/mval, m entries) applied. */
static uint32_t cand_at(const struct core_ps *c, uint32_t i, uint32_t p, size_t m)
{
	for (size_t k = 0; k < m; k++)
		if (c->mkey[k] == p)
			return c->mval[k];
	if (c->live == c->conf.n) /* everybody live: no tree walk */
		return p < i ? p : p + 1;
	if (c->alive[i] && p >= fen_prefix(c, i))
		p++;
	return fen_select(c, p);
}

static void map_set(struct core_ps *c, uint32_t p, uint32_t v, size_t *m)
{
	for (size_t k = 0; k < *m; k++)
		if (c->mkey[k] == p) {
			c->mval[k] = v;
			return;
		}
	c->mkey[*m] = p;
	c->mval[*m] = v;
	(*m)++;
}

/* Draw worker i's sample for this crossing into its slot from its own stream: exactly what
 * barrier_sample(&rng, n, i, alive, beta, out) draws (a partial Fisher-Yates shuffle of the
 * live others), without building the n-long candidate list. Returns how many. */
static size_t draw_sample(struct core_ps *c, uint32_t i, uint64_t *rng, uint32_t *out)
{
	size_t m = 0, k, cnt;

	if (c->conf.reference) {
		k = barrier_sample(rng, c->conf.n, i, c->alive, c->conf.bp.sample, c->scratch);
		for (size_t a = 0; a < k; a++)
			out[a] = (uint32_t)c->scratch[a];
		return k;
	}
	cnt = c->live - (c->alive[i] ? 1 : 0);
	k = c->conf.bp.sample < cnt ? c->conf.bp.sample : cnt;
	for (size_t a = 0; a < k; a++) {
		uint32_t j = (uint32_t)(a + barrier_rng_below(rng, cnt - a));
		uint32_t va = cand_at(c, i, (uint32_t)a, m), vj = cand_at(c, i, j, m);

		map_set(c, (uint32_t)a, vj, &m);
		map_set(c, j, va, &m);
		out[a] = vj;
	}
	return k;
}

/* --- a sample per check ------------------------------------------------------------------------ */

/* The stream of worker i's request at clock cl, draw number ord: what its ord-th check draws
 * (reference, or a worker that is not live) or, from ord 0, its budget. */
static uint64_t check_stream(const struct core_ps *c, uint32_t i, int64_t cl, uint32_t ord)
{
	uint64_t st = c->conf.seed ^ (CORE_PS_CHECK_STREAM << 20) ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull);

	barrier_rng_next(&st);
	st ^= (uint64_t)cl * 0xbf58476d1ce4e5b9ull;
	barrier_rng_next(&st);
	st ^= (uint64_t)ord * 0x94d049bb133111ebull;
	return barrier_rng_next(&st);
}

/* One literal check of held worker i: a fresh sample from its stream; true when every drawn
 * live worker has reached the threshold. */
static bool check_draw(struct core_ps *c, uint32_t i)
{
	struct cw *w = &c->w[i];
	uint64_t st = check_stream(c, i, w->held_c, c->unsat[i]++);
	int64_t need = barrier_threshold(&c->conf.bp, w->held_c);
	size_t k = draw_sample(c, i, &st, c->buf);

	for (size_t a = 0; a < k; a++) {
		uint32_t j = c->buf[a];

		if (j != i && c->alive[j] && c->clocks[j] < need)
			return false;
	}
	return true;
}

/* Index of the first level with need >= t (nlv if none). */
static uint32_t lvl_lower(const struct core_ps *c, int64_t t)
{
	uint32_t lo = 0, hi = c->nlv;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (c->lv[mid].need < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* A live worker's clock rose from old to v: it is now above the levels in (old, v]. */
static void lvl_rise(struct core_ps *c, int64_t old, int64_t v)
{
	for (uint32_t k = lvl_lower(c, old + 1); k < c->nlv && c->lv[k].need <= v; k++) {
		c->lv[k].above++;
		c->lv[k].dirty = true;
	}
}

static bool hp_less(const struct core_ps *c, uint32_t a, uint32_t b)
{
	/* Ties (equal budgets are rare but possible) by index, so the order is total. */
	return c->tgt[a] < c->tgt[b] || (c->tgt[a] == c->tgt[b] && a < b);
}

static void hp_set(struct core_ps *c, struct lvl *l, uint32_t pos, uint32_t i)
{
	l->heap[pos] = i;
	c->hpos[i] = pos;
}

static void hp_up(struct core_ps *c, struct lvl *l, uint32_t pos)
{
	uint32_t i = l->heap[pos];

	while (pos > 0 && hp_less(c, i, l->heap[(pos - 1) / 2])) {
		hp_set(c, l, pos, l->heap[(pos - 1) / 2]);
		pos = (pos - 1) / 2;
	}
	hp_set(c, l, pos, i);
}

static void hp_down(struct core_ps *c, struct lvl *l, uint32_t pos)
{
	uint32_t i = l->heap[pos];

	for (;;) {
		uint32_t ch = 2 * pos + 1;

		if (ch >= l->n)
			break;
		if (ch + 1 < l->n && hp_less(c, l->heap[ch + 1], l->heap[ch]))
			ch++;
		if (!hp_less(c, l->heap[ch], i))
			break;
		hp_set(c, l, pos, l->heap[ch]);
		pos = ch;
	}
	hp_set(c, l, pos, i);
}

/* Take out the request at pos of level l. */
static void hp_del(struct core_ps *c, struct lvl *l, uint32_t pos)
{
	uint32_t last = l->heap[--l->n];

	c->hpos[l->heap[pos]] = NIL;
	if (pos < l->n) {
		hp_set(c, l, pos, last);
		hp_up(c, l, pos);
		hp_down(c, l, c->hpos[last]);
	}
}

/* The level of threshold t, made (its count O(n), once per threshold reached) when missing.
 * NULL: no memory. */
static struct lvl *lvl_get(struct core_ps *c, int64_t t)
{
	uint32_t k = lvl_lower(c, t);
	struct lvl *l;

	if (k < c->nlv && c->lv[k].need == t)
		return &c->lv[k];
	if (c->nlv == c->caplv) {
		uint32_t cap = c->caplv ? 2 * c->caplv : 16;
		struct lvl *p = realloc(c->lv, cap * sizeof *p);

		if (!p)
			return NULL;
		c->lv = p;
		c->caplv = cap;
	}
	memmove(&c->lv[k + 1], &c->lv[k], (c->nlv - k) * sizeof *c->lv);
	c->nlv++;
	l = &c->lv[k];
	*l = (struct lvl){ .need = t, .dirty = true };
	for (uint32_t j = 0; j < c->conf.n; j++)
		if (c->alive[j] && c->clocks[j] >= t)
			l->above++;
	return l;
}

/* Held live worker i joins its threshold's level with a fresh budget; a threshold at or below
 * the smallest live clock (or beta 0) passes every check: a candidate of this pass. */
static void lvl_insert(struct core_ps *c, uint32_t i)
{
	struct cw *w = &c->w[i];
	int64_t t = barrier_threshold(&c->conf.bp, w->held_c);
	uint64_t st;
	struct lvl *l;

	if (!c->alive[i])
		return; /* judged by literal draws */
	if (t <= c->lmin || c->conf.bp.sample == 0) {
		add_cand(c, i); /* every check passes: no level needed */
		return;
	}
	l = lvl_get(c, t);
	if (l && l->n == l->cap) {
		uint32_t cap = l->cap ? 2 * l->cap : 8;
		uint32_t *p = realloc(l->heap, cap * sizeof *p);

		if (p) {
			l->heap = p;
			l->cap = cap;
		}
	}
	if (!l || l->n == l->cap) {
		c->oom = true;
		return;
	}
	/* E ~ exponential(1): -ln of a uniform in (0, 1]. */
	st = check_stream(c, i, w->held_c, c->unsat[i]++);
	c->tgt[i] = l->sum - log((double)((barrier_rng_next(&st) >> 11) + 1) * 0x1p-53);
	l->n++;
	hp_set(c, l, l->n - 1, i);
	hp_up(c, l, l->n - 1);
}

static void lvl_remove(struct core_ps *c, uint32_t i)
{
	uint32_t k;

	if (c->hpos[i] == NIL)
		return;
	k = lvl_lower(c, barrier_threshold(&c->conf.bp, c->w[i].held_c));
	if (k < c->nlv && c->hpos[i] < c->lv[k].n && c->lv[k].heap[c->hpos[i]] == i)
		hp_del(c, &c->lv[k], c->hpos[i]);
	c->hpos[i] = NIL;
}

/* The hazard -ln(1 - p) of one check at level l (see the file comment). ln p is kept: when
 * only workers arrived at the level since (the usual change), each adds
 * ln(p(a) / p(a - 1)) = ln(a / (a - k)), one logarithm instead of k. */
static double lvl_hazard(const struct core_ps *c, struct lvl *l)
{
	uint32_t m = c->live ? c->live - 1 : 0, a = l->above ? l->above - 1 : 0;
	uint32_t k = c->conf.bp.sample < m ? c->conf.bp.sample : m;

	if (k == 0 || a >= m || a < k) {
		l->lp_m = 0;
		return a < k && k > 0 ? 0 : INFINITY;
	}
	if (l->lp_m == m && l->lp_a <= a) {
		for (uint32_t x = l->lp_a + 1; x <= a; x++)
			l->lp += log((double)x / (double)(x - k));
	} else {
		l->lp = 0;
		for (uint32_t x = 0; x < k; x++)
			l->lp += log((double)(a - x) / (double)(m - x));
	}
	l->lp_a = a;
	l->lp_m = m;
	return -log1p(-exp(l->lp));
}

/* After a liveness change or a threshold moved: every level recounted, every held live
 * request timed afresh (the hazard is memoryless, so a new budget changes no distribution). */
static void regroup(struct core_ps *c)
{
	for (uint32_t k = 0; k < c->nlv; k++) {
		struct lvl *l = &c->lv[k];

		for (uint32_t x = 0; x < l->n; x++)
			c->hpos[l->heap[x]] = NIL;
		l->n = 0;
		l->above = 0;
		l->sum = 0;
		l->dirty = true;
	}
	for (uint32_t j = 0; j < c->conf.n; j++) {
		uint32_t k;

		if (!c->alive[j])
			continue;
		k = lvl_lower(c, c->clocks[j] + 1); /* levels [0, k) have need <= clock */
		if (k > 0)
			c->lv[k - 1].above++;
	}
	for (uint32_t k = c->nlv; k-- > 1;)
		c->lv[k - 1].above += c->lv[k].above;
	for (uint32_t i = 0; i < c->conf.n; i++)
		if (c->w[i].held && c->alive[i])
			lvl_insert(c, i);
}

/* One release pass with a sample per check: every held request gets one check. */
static void check_pass(struct core_ps *c, int64_t now_ns)
{
	uint32_t drop = 0;

	if (c->held > 0) {
		c->st.checks++;
		c->st.judged += c->held;
	}
	if (c->conf.reference) {
		for (uint32_t i = 0; i < c->conf.n; i++)
			if (c->w[i].held && check_draw(c, i))
				release(c, i, now_ns);
		c->rescan = false;
		return;
	}
	if (c->rescan) {
		c->rescan = false;
		regroup(c);
	}
	for (uint32_t k = 0; k < c->nlv; k++) {
		struct lvl *l = &c->lv[k];

		if (l->n == 0)
			continue;
		if (l->dirty) {
			l->hz = lvl_hazard(c, l);
			l->dirty = false;
		}
		if (l->hz == 0)
			continue;
		l->sum += l->hz;
		while (l->n > 0 && (isinf(l->hz) || c->tgt[l->heap[0]] <= l->sum)) {
			uint32_t i = l->heap[0];

			hp_del(c, l, 0);
			add_cand(c, i);
		}
	}
	if (c->held > c->held_live)
		for (uint32_t i = 0; i < c->conf.n; i++)
			if (c->w[i].held && !c->alive[i] && check_draw(c, i))
				add_cand(c, i);
	if (c->ncand > 1)
		qsort(c->cand, c->ncand, sizeof *c->cand, cmp_u32);
	for (uint32_t k = 0; k < c->ncand; k++) {
		uint32_t i = c->cand[k];

		c->w[i].cand = false;
		if (c->w[i].held)
			release(c, i, now_ns);
	}
	c->ncand = 0;
	/* Levels nobody can wait at any more (at or below the smallest live clock: a check there
	 * passes, so they are empty now) go; they are the first ones. */
	while (drop < c->nlv && c->lv[drop].need <= c->lmin && c->lv[drop].n == 0)
		free(c->lv[drop++].heap);
	if (drop > 0) {
		memmove(c->lv, c->lv + drop, (c->nlv - drop) * sizeof *c->lv);
		c->nlv -= drop;
	}
}

/* Worker i asks to start the step after clock cl: held until the barrier holds. A sampled kind
 * draws the crossing's sample now, from the worker's own stream. */
static void hold_request(struct core_ps *c, uint32_t i, int64_t cl, enum core_ps_reply reply,
			 int64_t now_ns)
{
	struct cw *w = &c->w[i];

	/* A clock the core moved on (resume_at_slowest) is where the worker continues: held
	 * there, and the reply's step tells the worker so. */
	if (cl < c->clocks[i])
		cl = c->clocks[i];
	set_held(c, i, false); /* a request held again: its old sample's links go */
	raise_clock(c, i, cl);
	set_held(c, i, true);
	w->held_c = cl;
	w->held_reply = (uint8_t)reply;
	w->held_since_ns = now_ns;
	if (c->nsample)
		c->nsample[i] = 0;
	if (c->unsat)
		c->unsat[i] = 0;
	if (c->check) {
		if (!c->conf.reference)
			lvl_insert(c, i);
	} else if (c->cross) {
		/* The sample is not kept: its draw is made again from the state before it. */
		uint32_t b;

		if (w->drawn)
			settle(c, i);
		w->drawn = true;
		b = blocker(c, i);
		if (b != NIL)
			link_req(c, i, b);
	} else if (barrier_is_sampled(c->conf.bp.kind) && c->slot > 0) {
		c->nsample[i] = (uint32_t)draw_sample(c, i, &c->rng[i], c->samples + (size_t)i * c->slot);
	}
	if (!c->check)
		add_cand(c, i);
	/* A clock moved: others may be released too. */
	release_held(c, now_ns);
}

/* A request that came again after a reconnect: held again at clock cl, unless one at cl or
 * later is held already (its answer will come). */
static void hold_again(struct core_ps *c, uint32_t i, int64_t cl, int64_t now_ns)
{
	if (!(c->w[i].held && c->w[i].held_c >= cl))
		hold_request(c, i, cl, CORE_PS_REPLY_MODEL, now_ns);
}

/* The slowest clock among the other live workers that have not left. When none is left (the
 * others finished while worker i was cut off), the furthest clock any other reached: the model
 * it gets back holds their rounds, so its step count continues from there (in a BSP run every
 * step k is computed on version k - 1) and, at stop.steps, it is done. INT64_MAX: no other. */
static int64_t slowest_other(const struct core_ps *c, uint32_t i)
{
	int64_t lo = INT64_MAX, hi = INT64_MIN;

	for (uint32_t j = 0; j < c->conf.n; j++) {
		if (j == i)
			continue;
		if (c->alive[j] && !c->w[j].left && c->clocks[j] < lo)
			lo = c->clocks[j];
		if (c->clocks[j] > hi)
			hi = c->clocks[j];
	}
	return lo != INT64_MAX || hi == INT64_MIN ? lo : hi;
}

/* Worker i missed rounds (a restart, a late join, a cut connection): it goes on from the
 * slowest live other's clock, so nobody waits for it to redo them; a request still held moves
 * there too. Otherwise it would go on counting from its old step, which never reaches the
 * clock the others wait for (BSP: they wait for its clock, it for their updates: deadlock). */
static void resume_at_slowest(struct core_ps *c, uint32_t i)
{
	int64_t lo = slowest_other(c, i);

	if (lo != INT64_MAX && lo > c->clocks[i])
		raise_clock(c, i, lo);
	if (c->w[i].held && c->w[i].held_c < c->clocks[i]) {
		if (c->check)
			lvl_remove(c, i); /* found by its threshold: out before it moves */
		c->w[i].held_c = c->clocks[i];
		c->rescan = true; /* its threshold moved: relinked by the next pass */
	}
}

/* Every message but a BYE is a sign of life: a departed worker is back (at the slowest live
 * other's clock, as after a restart), a worker that left lives again. */
static void sign_of_life(struct core_ps *c, uint32_t i, int64_t now_ns)
{
	struct cw *w = &c->w[i];

	w->known = true;
	w->seen_ns = now_ns;
	if (w->departed) {
		resume_at_slowest(c, i);
		emit(c, CORE_PS_RESUME, i, c->clocks[i], CORE_PS_RESUME_BACK, 0);
	}
	w->departed = false;
	w->left = false;
	set_live(c, i, true, now_ns);
}

static int begin(struct core_ps *c, uint32_t w)
{
	c->nact = 0;
	c->oom = false;
	return w < c->conf.n ? 0 : -EINVAL;
}

static int end(const struct core_ps *c)
{
	return c->oom ? -ENOMEM : (int)c->nact;
}

int core_ps_on_hello(struct core_ps *c, uint32_t i, uint32_t flags, int64_t now_ns)
{
	struct cw *w;
	bool restart, late;

	if (begin(c, i) < 0)
		return -EINVAL;
	w = &c->w[i];
	restart = w->known;
	sign_of_life(c, i, now_ns);
	if (!(flags & CORE_PS_JOIN))
		return end(c); /* a keep-alive */
	if ((flags & CORE_PS_AGAIN) && restart) {
		/* The same process asking again after a reconnect: its clock stands; the answer
		 * is sent again, the request held again unless it still is. */
		c->st.resent_in++;
		emit(c, CORE_PS_HELLO, i, c->clocks[i], 0, 0);
		hold_again(c, i, c->clocks[i], now_ns);
		return end(c);
	}
	/* A request its previous process left held died with it. A restarted worker (known
	 * before) re-pulls the current model, so it resumes at max(its last clock, the slowest
	 * live other's); a late joiner likewise; a first join keeps clock 0. */
	late = w->late && !restart;
	if (late) {
		restart = true;
		w->late = false;
	}
	set_held(c, i, false);
	if (restart) {
		resume_at_slowest(c, i);
		emit(c, CORE_PS_RESUME, i, c->clocks[i],
		     late ? CORE_PS_RESUME_LATE : CORE_PS_RESUME_RESTART, 0);
	}
	emit(c, CORE_PS_HELLO, i, c->clocks[i], 0, 0);
	/* The join is also the request for the first round (barrier, then the model). */
	hold_request(c, i, c->clocks[i], CORE_PS_REPLY_MODEL, now_ns);
	return end(c);
}

/* Averaging, asynchronous kinds: the mixing weight of worker i's model,
 *   a = weight(staleness) * n_i / (n_i + sum of n_j, live j != i)
 * with n_j the samples behind worker j's latest model (n_i for workers not heard from yet).
 * With equal workers a = 1/N: N fresh models move the server's by their mean change, as one
 * synchronous round would (Xie et al., "Asynchronous Federated Optimization", 2019). */
static double fold_weight(struct core_ps *c, uint32_t i, int64_t samples, double wstale)
{
	double ni = samples > 0 ? (double)samples : 1.0, tot = ni, a;

	c->round_samples[i] = (uint64_t)ni;
	for (uint32_t j = 0; j < c->conf.n; j++)
		if (j != i && c->alive[j])
			tot += c->round_samples[j] ? (double)c->round_samples[j] : ni;
	a = wstale * ni / tot;
	return a > 1 ? 1 : a;
}

int core_ps_on_push(struct core_ps *c, uint32_t i, int64_t step, int64_t version, int64_t samples,
		    int64_t now_ns)
{
	struct cw *w;
	int64_t stale, aux;
	uint32_t waiting;
	size_t k;

	if (begin(c, i) < 0 || step < 1 || version < 0 || version > c->st.version || samples < 0)
		return -EINVAL;
	w = &c->w[i];
	sign_of_life(c, i, now_ns);
	waiting = c->held_live;
	if (step <= w->last_push) {
		/* Sent again after a reconnect: the first copy was handled, or this is the one
		 * that arrived. Not applied twice; answered again (reply = 1), as the answers to
		 * the first may be what the broken connection lost. */
		c->st.resent_in++;
		k = c->nact;
		emit(c, CORE_PS_ACK, i, step, step == w->last_push ? w->last_ack : -1, waiting);
		if (k < c->nact)
			c->act[k].reply = 1;
		hold_again(c, i, step, now_ns);
		return end(c);
	}
	stale = c->st.version - version;
	c->st.updates_in++;
	raise_clock(c, i, step);
	if (version > w->pushed_on)
		w->pushed_on = version;
	if (is_sync(c)) {
		enum barrier_offer o = barrier_round_offer(&c->round, version);

		if (o == BARRIER_ACCEPT || o == BARRIER_CLOSE) {
			double wt = c->conf.average ? (samples > 0 ? (double)samples : 1.0) : 1.0;

			emit(c, CORE_PS_ROUND_ADD, i, step, samples, wt);
			c->agg_w += wt;
			aux = stale = 0;
			if (o == BARRIER_CLOSE)
				close_round(c, now_ns);
		} else {
			c->st.dropped++;
			aux = -1;
		}
	} else if (c->conf.average) {
		double a = fold_weight(c, i, samples, core_ps_weight(c->conf.weighting, stale));

		c->st.version++;
		emit(c, CORE_PS_FOLD, i, step, samples, a);
		aux = stale;
	} else {
		/* 1/N_live: N fresh updates move the model as one synchronous round of N does.
		 * Applied at full size, asynchrony adds an implicit momentum of about 1 - 1/N
		 * (Mitliagkas et al., "Asynchrony begets momentum", 2016): ASP and pBSP with 8
		 * workers, MLP, lr 0.05 and momentum 0.9 diverged. */
		double x = core_ps_weight(c->conf.weighting, stale) / (double)(c->live ? c->live : 1);

		c->st.version++;
		emit(c, CORE_PS_APPLY, i, step, samples, x);
		aux = stale;
	}
	if (aux >= 0) {
		c->st.accepted++;
		c->st.stale_sum += stale;
		c->st.stale_n++;
		if (stale > c->st.stale_max)
			c->st.stale_max = stale;
	}
	w->last_push = step;
	w->last_ack = aux > INT32_MAX ? INT32_MAX : (int32_t)aux;
	emit(c, CORE_PS_ACK, i, step, aux, waiting);
	/* The push is also the request for the next round: held until its barrier holds (at
	 * once for ASP), then answered with the model. */
	hold_request(c, i, step, CORE_PS_REPLY_MODEL, now_ns);
	return end(c);
}

int core_ps_on_pull(struct core_ps *c, uint32_t i, int64_t now_ns)
{
	if (begin(c, i) < 0)
		return -EINVAL;
	sign_of_life(c, i, now_ns);
	emit(c, CORE_PS_MODEL, i, 0, 0, 0);
	return end(c);
}

int core_ps_on_barrier(struct core_ps *c, uint32_t i, int64_t step, int64_t now_ns)
{
	if (begin(c, i) < 0 || step < 0)
		return -EINVAL;
	sign_of_life(c, i, now_ns);
	hold_request(c, i, step, CORE_PS_REPLY_BARRIER_OK, now_ns);
	return end(c);
}

/* Worker i is gone without a BYE: out of every barrier and round from now on, and finished as
 * far as stopping goes once the grace has passed. Its next message makes it live again. */
static void depart(struct core_ps *c, uint32_t i, enum core_ps_leave why, int64_t now_ns)
{
	struct cw *w = &c->w[i];

	if (w->departed || w->left)
		return;
	w->departed = true;
	w->seen_ns = now_ns;
	/* A held request stays: a worker that was only cut off gets its answer. */
	set_live(c, i, false, now_ns);
	emit(c, CORE_PS_DEPART, i, c->clocks[i], why, 0);
}

int core_ps_on_leave(struct core_ps *c, uint32_t i, enum core_ps_leave why, int64_t now_ns)
{
	struct cw *w;

	if (begin(c, i) < 0)
		return -EINVAL;
	w = &c->w[i];
	if (why != CORE_PS_LEAVE_BYE) {
		depart(c, i, why, now_ns);
		return end(c);
	}
	/* A BYE is a message: the worker is known and was seen; it is finished. */
	w->known = true;
	w->seen_ns = now_ns;
	w->departed = false;
	w->left = true;
	set_held(c, i, false);
	set_live(c, i, false, now_ns);
	return end(c);
}

int core_ps_on_tick(struct core_ps *c, int64_t now_ns)
{
	begin(c, 0);
	/* Held workers send keep-alives too, so silence means a crash or a cut link even while a
	 * request is held (a crashed held worker must not stall BSP forever). */
	if (c->conf.dead_after_ns > 0)
		for (uint32_t i = 0; i < c->conf.n; i++)
			if (c->alive[i] && c->w[i].known && !c->w[i].left &&
			    now_ns - c->w[i].seen_ns > c->conf.dead_after_ns)
				depart(c, i, CORE_PS_LEAVE_SILENT, now_ns);
	return end(c);
}

int core_ps_feed(struct core_ps *c, const struct core_ps_event *ev)
{
	switch (ev->kind) {
	case CORE_PS_EV_HELLO:
		return core_ps_on_hello(c, ev->worker, ev->flags, ev->now_ns);
	case CORE_PS_EV_PUSH:
		return core_ps_on_push(c, ev->worker, ev->step, ev->version, ev->samples, ev->now_ns);
	case CORE_PS_EV_PULL:
		return core_ps_on_pull(c, ev->worker, ev->now_ns);
	case CORE_PS_EV_BARRIER:
		return core_ps_on_barrier(c, ev->worker, ev->step, ev->now_ns);
	case CORE_PS_EV_LEAVE:
		if (ev->flags > CORE_PS_LEAVE_SILENT)
			return -EINVAL;
		return core_ps_on_leave(c, ev->worker, (enum core_ps_leave)ev->flags, ev->now_ns);
	case CORE_PS_EV_TICK:
		return core_ps_on_tick(c, ev->now_ns);
	default:
		return -EINVAL;
	}
}

const struct core_ps_action *core_ps_actions(const struct core_ps *c, size_t *n)
{
	*n = c->nact;
	return c->act;
}

bool core_ps_finished(const struct core_ps *c, int64_t now_ns)
{
	int64_t grace = c->conf.grace_ns > 0 ? c->conf.grace_ns : CORE_PS_GRACE_NS;

	for (uint32_t i = 0; i < c->conf.n; i++)
		if (!c->w[i].left && !(c->w[i].departed && now_ns - c->w[i].seen_ns >= grace))
			return false;
	return true;
}

int64_t core_ps_next_deadline(const struct core_ps *c)
{
	int64_t grace = c->conf.grace_ns > 0 ? c->conf.grace_ns : CORE_PS_GRACE_NS, t = INT64_MAX;

	for (uint32_t i = 0; i < c->conf.n; i++) {
		const struct cw *w = &c->w[i];
		int64_t d = INT64_MAX;

		if (w->left)
			continue;
		if (w->departed)
			d = w->seen_ns + grace;
		else if (c->conf.dead_after_ns > 0 && c->alive[i] && w->known)
			d = w->seen_ns + c->conf.dead_after_ns + 1; /* "more than" dead_after */
		if (d < t)
			t = d;
	}
	return t;
}

int64_t core_ps_version(const struct core_ps *c)
{
	return c->st.version;
}

uint32_t core_ps_live(const struct core_ps *c)
{
	return c->live;
}

uint32_t core_ps_waiting(const struct core_ps *c)
{
	return c->held_live;
}

int64_t core_ps_clock(const struct core_ps *c, uint32_t w)
{
	return w < c->conf.n ? c->clocks[w] : -1;
}

bool core_ps_is_live(const struct core_ps *c, uint32_t w)
{
	return w < c->conf.n && c->alive[w];
}

bool core_ps_is_held(const struct core_ps *c, uint32_t w)
{
	return w < c->conf.n && c->w[w].held;
}

bool core_ps_has_left(const struct core_ps *c, uint32_t w)
{
	return w < c->conf.n && c->w[w].left;
}

void core_ps_stats(const struct core_ps *c, struct core_ps_stats *out)
{
	*out = c->st;
}

struct core_ps *core_ps_new(const struct core_ps_conf *conf)
{
	struct core_ps *c = NULL;
	uint32_t n = conf ? conf->n : 0;

	if (n == 0 || conf->bp.backup >= n)
		return NULL;
	c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->conf = *conf;
	c->conf.late = NULL; /* copied into the workers' flags */
	c->w = calloc(n, sizeof *c->w);
	c->clocks = calloc(n, sizeof *c->clocks);
	c->alive = calloc(n, sizeof *c->alive);
	/* Room for every action of an event of up to ~500 workers; a larger run (a simulation
	 * of thousands) grows it on the first event that needs more, rather than holding 96
	 * bytes per worker for a BSP round close it may never have. */
	c->cap = 2 * (size_t)n + 16 < CORE_PS_ACT_CAP ? 2 * (size_t)n + 16 : CORE_PS_ACT_CAP;
	c->act = calloc(c->cap, sizeof *c->act);
	c->cand = calloc(n, sizeof *c->cand);
	if (barrier_is_sampled(conf->bp.kind)) {
		/* The sample never holds more than the other workers. */
		size_t nodes;

		c->slot = conf->bp.sample < n - 1 ? conf->bp.sample : n - 1;
		c->check = conf->draw == BARRIER_DRAW_CHECK;
		c->fen = calloc((size_t)n + 1, sizeof *c->fen);
		if (!c->fen)
			goto fail;
		c->mkey = calloc(2 * c->slot + 1, sizeof *c->mkey);
		c->mval = calloc(2 * c->slot + 1, sizeof *c->mval);
		c->scratch = conf->reference ? calloc(n, sizeof *c->scratch) : NULL;
		if (!c->mkey || !c->mval || (conf->reference && !c->scratch))
			goto fail;
		c->cross = !c->check && !conf->reference && c->slot > 0;
		c->mfree = NIL;
		c->buf = calloc(c->slot + 1, sizeof *c->buf);
		if (!c->buf)
			goto fail;
		if (c->check) {
			c->unsat = calloc(n, sizeof *c->unsat);
			c->tgt = calloc(n, sizeof *c->tgt);
			c->hpos = malloc((size_t)n * sizeof *c->hpos);
			if (!c->unsat || !c->tgt || !c->hpos)
				goto fail;
			memset(c->hpos, 0xff, (size_t)n * sizeof *c->hpos);
		} else if (c->cross) {
			/* 20 bytes a worker: the stream, its request's link, its list's head */
			nodes = 2 * (size_t)n;
			c->rng = calloc(n, sizeof *c->rng);
			c->nxt = malloc(nodes * sizeof *c->nxt);
			c->prv = malloc((size_t)n * sizeof *c->prv);
			if (!c->rng || !c->nxt || !c->prv)
				goto fail;
			memset(c->nxt, 0xff, nodes * sizeof *c->nxt);
			memset(c->prv, 0xff, (size_t)n * sizeof *c->prv);
		} else {
			c->rng = calloc(n, sizeof *c->rng);
			c->nsample = calloc(n, sizeof *c->nsample);
			c->samples = calloc((size_t)n * c->slot + 1, sizeof *c->samples);
			if (!c->rng || !c->nsample || !c->samples)
				goto fail;
		}
	}
	if (conf->average && !(c->round_samples = calloc(n, sizeof *c->round_samples)))
		goto fail;
	if (!c->w || !c->clocks || !c->alive || !c->act || !c->cand)
		goto fail;
	for (c->fen_top = 1; c->fen_top * 2 <= n; c->fen_top *= 2)
		;
	c->lmin = INT64_MAX;
	for (uint32_t i = 0; i < n; i++) {
		struct cw *w = &c->w[i];

		/* Every worker starts live, so a synchronous run waits for all of them to join,
		 * except those planned to join later: the others go on without them. */
		w->late = conf->late && conf->late[i];
		if (!w->late) {
			c->alive[i] = true;
			c->live++;
			if (c->fen)
				fen_add(c, i, 1);
			min_add(c, 0);
		}
		w->pushed_on = -1;
		w->last_push = -1;
		if (c->rng)
			c->rng[i] = conf->seed ^ (CORE_PS_RNG_STREAM << 20) ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull);
	}
	barrier_round_init(&c->round, 0, c->live, conf->bp.backup);
	return c;
fail:
	core_ps_destroy(&c);
	return NULL;
}

void core_ps_destroy(struct core_ps **p)
{
	struct core_ps *c;

	if (!p || !*p)
		return;
	c = *p;
	free(c->w);
	free(c->clocks);
	free(c->alive);
	free(c->samples);
	free(c->rng);
	free(c->nsample);
	free(c->unsat);
	free(c->round_samples);
	free(c->scratch);
	for (uint32_t k = 0; k < c->nlv; k++)
		free(c->lv[k].heap);
	free(c->lv);
	free(c->tgt);
	free(c->hpos);
	free(c->buf);
	free(c->nxt);
	free(c->prv);
	free(c->mat);
	free(c->mpool);
	free(c->mkey);
	free(c->mval);
	free(c->fen);
	free(c->cand);
	free(c->act);
	free(c);
	*p = NULL;
}

int core_ps_event_format(const struct core_ps_event *ev, char *buf, size_t len)
{
	return snprintf(buf, len, "E %d %" PRIu32 " %" PRIu32 " %" PRId64 " %" PRId64 " %" PRId64
			" %" PRId64, (int)ev->kind, ev->worker, ev->flags, ev->now_ns, ev->step,
			ev->version, ev->samples);
}

/* A decimal integer at *p within [lo, hi]: an optional '-' only when lo < 0, then 1..19 digits
 * (no '+', no blank, no overflow), ended by one space (passed; more must follow) or by the end
 * of the line (last). */
static int ev_field(const char **p, int64_t lo, int64_t hi, bool last, int64_t *v)
{
	const char *s = *p;
	bool neg = *s == '-' && lo < 0;
	uint64_t x = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	size_t n = 0;

	s += neg;
	for (; s[n] >= '0' && s[n] <= '9'; n++) {
		if (n >= 19)
			return -EINVAL;
		x = x * 10 + (uint64_t)(s[n] - '0');
	}
	if (!n || x > lim || (s[0] == '0' && (n > 1 || neg)))
		return -EINVAL;         /* no leading zero, no "-0": the writer never puts one */
	int64_t y = neg ? (x == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)x) : (int64_t)x;
	if (y < lo || y > hi)
		return -EINVAL;
	if (last ? !(s[n] == 0 || (s[n] == '\n' && !s[n + 1])) : s[n] != ' ')
		return -EINVAL;
	*p = s + n + !last;
	*v = y;
	return 0;
}

int core_ps_event_parse(const char *line, struct core_ps_event *ev)
{
	const char *p = line;
	int64_t kind, worker, flags;

	/* a recorded event file is replayed: read as hostile, in exactly the form
	 * core_ps_event_format writes (an optional newline at the end) */
	memset(ev, 0, sizeof *ev);
	if (strncmp(p, "E ", 2))
		return -EINVAL;
	p += 2;
	if (ev_field(&p, CORE_PS_EV_HELLO, CORE_PS_EV_TICK, false, &kind) ||
	    ev_field(&p, 0, UINT32_MAX, false, &worker) || ev_field(&p, 0, UINT32_MAX, false, &flags) ||
	    ev_field(&p, INT64_MIN, INT64_MAX, false, &ev->now_ns) || ev_field(&p, INT64_MIN, INT64_MAX, false, &ev->step) ||
	    ev_field(&p, INT64_MIN, INT64_MAX, false, &ev->version) ||
	    ev_field(&p, INT64_MIN, INT64_MAX, true, &ev->samples)) {
		memset(ev, 0, sizeof *ev);
		return -EINVAL;
	}
	ev->kind = (enum core_ps_event_kind)kind;
	ev->worker = (uint32_t)worker;
	ev->flags = (uint32_t)flags;
	return 0;
}

int core_ps_action_format(const struct core_ps_action *a, char *buf, size_t len)
{
	return snprintf(buf, len, "A %d %" PRIu32 " %u %" PRId64 " %" PRId64 " %" PRId64 " %.17g",
			(int)a->kind, a->worker, (unsigned)a->reply, a->step, a->version, a->aux, a->x);
}
