/* node/core_ps against references written straight from the rules (docs/engines.md,
 * node/barrier.h):
 *   exhaustive  every interleaving of the pushes of 2 and 3 workers for 3 steps each, under
 *               BSP, SSP(1), ASP, pBSP(0), pBSP(N-1), BSP with a backup worker: after every
 *               event the held requests are exactly those the barrier forbids (so the released
 *               ones are exactly those it allows), BSP's spread is at most 1 step, SSP's
 *               bound holds, ASP never holds; pBSP(0) gives ASP's actions and pBSP(N-1)
 *               BSP's releases, event for event
 *   liveness    a departed worker stops blocking at once and counts as finished after the
 *               grace; a silent one departs at dead_after; a late joiner and a restart resume
 *               at the slowest live clock
 *   updates     ASP scales by weight(staleness)/N_live; BSP rounds close on N - b updates
 *               and drop the late ones; averaging's round and fold weights
 *   log lines   events round-trip through their text form
 *   per crossing samples drawn again from the stream (and kept only over liveness changes)
 *               give the reference's decisions with 16 workers, many held at once, and churn
 *   per check   a sample drawn at every check (conf.draw = BARRIER_DRAW_CHECK): in every
 *               interleaving a request that every sample would pass is released and one no
 *               sample can pass is held; beta 0 and N-1 are ASP and BSP exactly; the fast path's
 *               release times have the literal draws' distribution (and the closed form's);
 *               the same seed gives the same actions */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "node/core_ps.h"

#define MAXW 4
#define STEPS 3

/* A driver that behaves as the engine's workers do: a worker joins, gets the model when its
 * request is released, pushes step c+1 computed on that model's version, and so on. */
struct drv {
	struct core_ps *c;
	uint32_t n;
	bool ready[MAXW];      /* released: may push */
	int64_t clock[MAXW];   /* the step its released request answered */
	int64_t ver[MAXW];     /* the version it computes on */
	int64_t pushed[MAXW];  /* reference clocks: steps pushed */
	int64_t now;
	char log[1 << 16];     /* every action, formatted, for comparisons */
	size_t loglen;
	char rel[1 << 14];     /* RELEASE actions only */
	size_t rellen;
};

static void take(struct drv *d, int rc)
{
	size_t n;
	const struct core_ps_action *a;

	cr_assert_geq(rc, 0);
	a = core_ps_actions(d->c, &n);
	cr_assert_eq((size_t)rc, n);
	for (size_t k = 0; k < n; k++) {
		char line[160];
		int len = core_ps_action_format(&a[k], line, sizeof line);

		if (d->loglen + (size_t)len + 2 < sizeof d->log) {
			memcpy(d->log + d->loglen, line, (size_t)len);
			d->loglen += (size_t)len;
			d->log[d->loglen++] = '\n';
			d->log[d->loglen] = '\0';
		}
		if (a[k].kind == CORE_PS_RELEASE) {
			uint32_t w = a[k].worker;

			cr_assert(!d->ready[w], "worker %u released twice", w);
			d->ready[w] = true;
			d->clock[w] = a[k].step;
			d->ver[w] = a[k].version;
			d->rellen += (size_t)snprintf(d->rel + d->rellen, sizeof d->rel - d->rellen,
						      "%u@%lld ", w, (long long)a[k].step);
		}
	}
}

static void drv_init(struct drv *d, uint32_t n, const struct core_ps_conf *conf)
{
	memset(d, 0, sizeof *d);
	d->n = n;
	d->c = core_ps_new(conf);
	cr_assert_not_null(d->c);
	for (uint32_t i = 0; i < n; i++) {
		d->now += 1000;
		take(d, core_ps_on_hello(d->c, i, CORE_PS_JOIN, d->now));
	}
}

static void drv_push(struct drv *d, uint32_t i)
{
	cr_assert(d->ready[i]);
	d->ready[i] = false;
	d->now += 1000;
	d->pushed[i] = d->clock[i] + 1;
	take(d, core_ps_on_push(d->c, i, d->clock[i] + 1, d->ver[i], 10, d->now));
}

/* The reference: may a worker whose request is at clock c proceed, all workers live, given
 * the clocks every worker has pushed? */
static bool ref_allowed(const struct barrier_params *bp, const int64_t *pushed, uint32_t n,
			uint32_t self, int64_t c)
{
	if (bp->kind == BARRIER_ASP || (bp->kind == BARRIER_PBSP && bp->sample == 0))
		return true;
	for (uint32_t j = 0; j < n; j++) {
		if (j == self)
			continue;
		/* pSSP with a sample of everybody is SSP (the only pSSP these tests judge exactly) */
		if ((bp->kind == BARRIER_SSP || (bp->kind == BARRIER_PSSP && bp->sample >= n - 1)) &&
		    pushed[j] < c - bp->staleness)
			return false;
		if ((bp->kind == BARRIER_BSP || bp->kind == BARRIER_PBSP) && pushed[j] < c)
			return false;
	}
	return true;
}

/* Set by the tests of a sample per check: check_state then asserts the rule's certain cases
 * (p = 1 released, p = 0 held) instead of the fixed sample's exact decision. */
static bool per_check;

/* Live others with pushed clock >= the threshold of a request at clock c, and the sample size
 * k = min(beta, N - 1): a check passes surely when they are all N - 1, never when < k. */
static void check_counts(const struct barrier_params *bp, const int64_t *pushed, uint32_t n,
			 uint32_t self, int64_t c, uint32_t *above, uint32_t *k)
{
	int64_t need = barrier_threshold(bp, c);

	*above = 0;
	for (uint32_t j = 0; j < n; j++)
		if (j != self && pushed[j] >= need)
			(*above)++;
	*k = bp->sample < n - 1 ? bp->sample : n - 1;
}

static void check_state(const struct drv *d, const struct barrier_params *bp)
{
	int64_t lo = INT64_MAX, hi = INT64_MIN;

	if (per_check && barrier_is_sampled(bp->kind)) {
		for (uint32_t i = 0; i < d->n; i++) {
			uint32_t above, k;
			bool held = core_ps_is_held(d->c, i);

			cr_assert_eq(core_ps_clock(d->c, i), d->pushed[i]);
			cr_assert_eq(held, !d->ready[i]);
			check_counts(bp, d->pushed, d->n, i, d->pushed[i], &above, &k);
			cr_assert(!(held && above == d->n - 1), "worker %u held though every draw passes", i);
			cr_assert(held || above >= k, "worker %u released though no draw can pass", i);
		}
		return;
	}

	for (uint32_t i = 0; i < d->n; i++) {
		int64_t c = d->pushed[i];

		cr_assert_eq(core_ps_clock(d->c, i), c);
		if (c < lo)
			lo = c;
		if (c > hi)
			hi = c;
		if (bp->backup == 0) {
			bool allowed = ref_allowed(bp, d->pushed, d->n, i, c);

			cr_assert_eq(core_ps_is_held(d->c, i), !allowed,
				     "%s: worker %u at %lld held %d, the barrier allows %d",
				     barrier_kind_name(bp->kind), i, (long long)c,
				     core_ps_is_held(d->c, i), allowed);
		}
		cr_assert_eq(core_ps_is_held(d->c, i), !d->ready[i]);
	}
	if (bp->kind == BARRIER_BSP && bp->backup == 0)
		cr_assert_leq(hi - lo, 1, "BSP spread %lld", (long long)(hi - lo));
	if (bp->kind == BARRIER_SSP)
		cr_assert_leq(hi - lo, bp->staleness + 1);
	if (bp->kind == BARRIER_ASP)
		cr_assert_eq(core_ps_waiting(d->c), 0);
}

/* Visit every interleaving: choice[] is the sequence of workers that pushed so far; the run is
 * replayed from scratch for each prefix (the core has no copy, and these are tiny). */
struct explore {
	struct core_ps_conf conf;
	uint32_t n;
	uint32_t choice[MAXW * STEPS];
	unsigned long leaves;
	void (*leaf)(struct explore *e, size_t len);
};

static void replay(const struct explore *e, size_t len, struct drv *d)
{
	drv_init(d, e->n, &e->conf);
	check_state(d, &e->conf.bp);
	for (size_t k = 0; k < len; k++) {
		drv_push(d, e->choice[k]);
		check_state(d, &e->conf.bp);
	}
}

static struct drv scratch_drv;

static void explore_from(struct explore *e, size_t len)
{
	struct drv *d = &scratch_drv;
	bool any = false;
	bool ready[MAXW];
	int64_t pushed[MAXW];

	replay(e, len, d);
	memcpy(ready, d->ready, sizeof ready);
	memcpy(pushed, d->pushed, sizeof pushed);
	core_ps_destroy(&d->c);
	for (uint32_t i = 0; i < e->n; i++) {
		if (!ready[i] || pushed[i] >= STEPS)
			continue;
		any = true;
		e->choice[len] = i;
		explore_from(e, len + 1);
	}
	if (!any) {
		e->leaves++;
		if (e->leaf)
			e->leaf(e, len);
	}
}

static enum barrier_draw explore_draw;
static bool explore_reference;

static unsigned long explore(enum barrier_kind kind, int64_t s, uint32_t beta, uint32_t backup,
			     uint32_t n)
{
	struct explore e = { .n = n, .conf = { .n = n, .seed = 7, .draw = explore_draw,
					       .reference = explore_reference,
					       .bp = { .kind = kind, .staleness = s, .sample = beta,
						       .backup = backup } } };

	explore_from(&e, 0);
	return e.leaves;
}

Test(core_ps, exhaustive_interleavings, .timeout = 120)
{
	for (uint32_t n = 2; n <= 3; n++) {
		unsigned long asp = explore(BARRIER_ASP, 0, 0, 0, n);

		/* ASP never holds anyone: every interleaving of n workers' STEPS pushes. */
		cr_assert_eq(asp, n == 2 ? 20ul : 1680ul);
		cr_assert_gt(explore(BARRIER_BSP, 0, 0, 0, n), 0);
		cr_assert_gt(explore(BARRIER_SSP, 1, 0, 0, n), 0);
		cr_assert_eq(explore(BARRIER_PBSP, 0, 0, 0, n), asp);
		cr_assert_gt(explore(BARRIER_PBSP, 0, n - 1, 0, n), 0);
		cr_assert_gt(explore(BARRIER_BSP, 0, 0, 1, n), 0);
	}
	/* BSP: exactly one interleaving per round ordering (n! per round, 3 rounds). */
	cr_assert_eq(explore(BARRIER_BSP, 0, 0, 0, 3), 6ul * 6 * 6);
}

/* The same choices under two configurations: what kind b does with kind a's interleavings. */
static struct core_ps_conf other_conf;
static bool compare_all; /* whole action logs, or releases only */

static void leaf_compare(struct explore *e, size_t len)
{
	static struct drv d1, d2;

	replay(e, len, &d1);
	{
		struct explore e2 = *e;

		e2.conf = other_conf;
		drv_init(&d2, e->n, &e2.conf);
		for (size_t k = 0; k < len; k++) {
			cr_assert(d2.ready[e->choice[k]], "worker %u held under %s but not %s",
				  e->choice[k], barrier_kind_name(other_conf.bp.kind),
				  barrier_kind_name(e->conf.bp.kind));
			drv_push(&d2, e->choice[k]);
		}
	}
	if (compare_all)
		cr_assert_str_eq(d1.log, d2.log);
	else
		cr_assert_str_eq(d1.rel, d2.rel);
	core_ps_destroy(&d1.c);
	core_ps_destroy(&d2.c);
}

Test(core_ps, beta_extremes_are_asp_and_bsp_exactly, .timeout = 120)
{
	for (uint32_t n = 2; n <= 3; n++) {
		struct explore e = { .n = n, .leaf = leaf_compare,
				     .conf = { .n = n, .seed = 3, .bp = { .kind = BARRIER_PBSP } } };

		/* beta = 0: ASP, action for action (same scale, same staleness, same replies). */
		other_conf = (struct core_ps_conf){ .n = n, .seed = 3, .bp = { .kind = BARRIER_ASP } };
		compare_all = true;
		explore_from(&e, 0);
		/* beta = N-1: BSP's releases, request for request. */
		e.conf.bp.sample = n - 1;
		other_conf = (struct core_ps_conf){ .n = n, .seed = 3, .bp = { .kind = BARRIER_BSP } };
		compare_all = false;
		e.leaves = 0;
		explore_from(&e, 0);
		cr_assert_gt(e.leaves, 0);
	}
}

static const struct core_ps_action *find(const struct core_ps *c, enum core_ps_action_kind kind,
					 uint32_t w)
{
	size_t n;
	const struct core_ps_action *a = core_ps_actions(c, &n);

	for (size_t k = 0; k < n; k++)
		if (a[k].kind == kind && (w == UINT32_MAX || a[k].worker == w))
			return &a[k];
	return NULL;
}

Test(core_ps, departed_worker_stops_blocking_and_finishes_after_grace)
{
	struct core_ps_conf conf = { .n = 3, .bp = { .kind = BARRIER_BSP }, .grace_ns = 5000 };
	struct drv d;

	drv_init(&d, 3, &conf);
	drv_push(&d, 0);
	drv_push(&d, 1);
	cr_assert(core_ps_is_held(d.c, 0) && core_ps_is_held(d.c, 1));
	/* Worker 2's connection closes: the round closes on the two updates, both released. */
	d.now += 1000;
	take(&d, core_ps_on_leave(d.c, 2, CORE_PS_LEAVE_CLOSED, d.now));
	cr_assert_not_null(find(d.c, CORE_PS_DEPART, 2));
	cr_assert_not_null(find(d.c, CORE_PS_ROUND_CLOSE, UINT32_MAX));
	cr_assert(d.ready[0] && d.ready[1]);
	cr_assert_eq(core_ps_live(d.c), 2);
	/* The others go on in lockstep without it. */
	drv_push(&d, 0);
	cr_assert(core_ps_is_held(d.c, 0));
	drv_push(&d, 1);
	cr_assert(d.ready[0] && d.ready[1]);
	take(&d, core_ps_on_leave(d.c, 0, CORE_PS_LEAVE_BYE, d.now));
	take(&d, core_ps_on_leave(d.c, 1, CORE_PS_LEAVE_BYE, d.now));
	int64_t gone = d.now - 2000; /* when worker 2 departed */
	cr_assert_eq(core_ps_next_deadline(d.c), gone + 5000);
	cr_assert_not(core_ps_finished(d.c, gone + 4999));
	cr_assert(core_ps_finished(d.c, gone + 5000));
	core_ps_destroy(&d.c);
}

Test(core_ps, silent_worker_departs_at_dead_after)
{
	struct core_ps_conf conf = { .n = 2, .bp = { .kind = BARRIER_BSP }, .dead_after_ns = 10000 };
	struct drv d;

	drv_init(&d, 2, &conf); /* joins at t = 1000, 2000 */
	drv_push(&d, 0);        /* t = 3000 */
	cr_assert(core_ps_is_held(d.c, 0));
	cr_assert_eq(core_ps_next_deadline(d.c), 2000 + 10000 + 1); /* worker 1, seen at 2000 */
	take(&d, core_ps_on_tick(d.c, 12000)); /* worker 1 silent 10000 ns: not more */
	cr_assert_eq(core_ps_live(d.c), 2);
	take(&d, core_ps_on_tick(d.c, 12001));
	cr_assert_not_null(find(d.c, CORE_PS_DEPART, 1));
	cr_assert(d.ready[0]);
	/* A keep-alive brings it back, at the slowest live other's clock (1). */
	d.now = 13000;
	take(&d, core_ps_on_hello(d.c, 1, 0, d.now));
	cr_assert_not_null(find(d.c, CORE_PS_RESUME, 1));
	cr_assert_eq(core_ps_clock(d.c, 1), 1);
	cr_assert_eq(core_ps_live(d.c), 2);
	core_ps_destroy(&d.c);
}

/* Cut off while the others ran to the end: back, it continues from the clock they finished
 * at, not from its own (it would otherwise compute step 3 on the final model, version 8). */
Test(core_ps, back_after_the_others_finished_resumes_at_their_last_clock)
{
	struct core_ps_conf conf = { .n = 3, .bp = { .kind = BARRIER_BSP }, .grace_ns = 1000000 };
	struct drv d;

	drv_init(&d, 3, &conf);
	drv_push(&d, 0);
	drv_push(&d, 1);
	drv_push(&d, 2);
	d.now += 1000;
	take(&d, core_ps_on_leave(d.c, 2, CORE_PS_LEAVE_CLOSED, d.now));
	for (int k = 0; k < 4; k++) {
		drv_push(&d, 0);
		drv_push(&d, 1);
	}
	cr_assert_eq(core_ps_clock(d.c, 0), 5);
	take(&d, core_ps_on_leave(d.c, 0, CORE_PS_LEAVE_BYE, d.now));
	take(&d, core_ps_on_leave(d.c, 1, CORE_PS_LEAVE_BYE, d.now));
	cr_assert_eq(core_ps_clock(d.c, 2), 1);
	d.now += 1000;
	take(&d, core_ps_on_hello(d.c, 2, 0, d.now));
	cr_assert_not_null(find(d.c, CORE_PS_RESUME, 2));
	cr_assert_eq(core_ps_clock(d.c, 2), 5);
	core_ps_destroy(&d.c);
}

Test(core_ps, late_joiner_and_restart_resume_at_the_slowest_clock)
{
	bool late[3] = { false, false, true };
	struct core_ps_conf conf = { .n = 3, .bp = { .kind = BARRIER_BSP }, .late = late };
	struct core_ps *c = core_ps_new(&conf);
	const struct core_ps_action *a;
	struct drv d;

	/* Not waited for before it joins. */
	cr_assert_eq(core_ps_live(c), 2);
	core_ps_destroy(&c);
	memset(&d, 0, sizeof d);
	d.n = 3;
	d.c = core_ps_new(&conf);
	take(&d, core_ps_on_hello(d.c, 0, CORE_PS_JOIN, 1));
	take(&d, core_ps_on_hello(d.c, 1, CORE_PS_JOIN, 2));
	for (int k = 0; k < 4; k++) {
		drv_push(&d, 0);
		drv_push(&d, 1);
	}
	cr_assert_eq(core_ps_clock(d.c, 0), 4);
	take(&d, core_ps_on_hello(d.c, 2, CORE_PS_JOIN, d.now + 1));
	a = find(d.c, CORE_PS_HELLO, 2);
	cr_assert_not_null(a);
	cr_assert_eq(a->step, 4);
	cr_assert_eq(find(d.c, CORE_PS_RESUME, 2)->aux, CORE_PS_RESUME_LATE);
	/* It is released at once (nobody is behind clock 4) and the three go on in lockstep. */
	cr_assert(d.ready[2]);
	drv_push(&d, 2);
	drv_push(&d, 0);
	cr_assert(core_ps_is_held(d.c, 0));
	drv_push(&d, 1);
	cr_assert(d.ready[0] && d.ready[1] && d.ready[2]);
	/* Worker 1 restarts (a new process: join, known): it resumes at max(own, slowest). */
	d.ready[1] = false;
	take(&d, core_ps_on_hello(d.c, 1, CORE_PS_JOIN, d.now + 2));
	cr_assert_eq(find(d.c, CORE_PS_HELLO, 1)->step, 5);
	cr_assert_eq(find(d.c, CORE_PS_RESUME, 1)->aux, CORE_PS_RESUME_RESTART);
	/* The same join again after a reconnect: answered, clock unchanged, not a restart. */
	d.ready[1] = false;
	take(&d, core_ps_on_hello(d.c, 1, CORE_PS_JOIN | CORE_PS_AGAIN, d.now + 3));
	cr_assert_null(find(d.c, CORE_PS_RESUME, 1));
	cr_assert_eq(find(d.c, CORE_PS_HELLO, 1)->step, 5);
	core_ps_destroy(&d.c);
}

Test(core_ps, async_scale_is_weight_over_live)
{
	struct core_ps_conf conf = { .n = 2, .bp = { .kind = BARRIER_ASP },
				     .weighting = CORE_PS_WEIGHT_INVERSE };
	struct core_ps *c = core_ps_new(&conf);
	const struct core_ps_action *a;

	cr_assert_geq(core_ps_on_hello(c, 0, CORE_PS_JOIN, 1), 0);
	cr_assert_geq(core_ps_on_hello(c, 1, CORE_PS_JOIN, 2), 0);
	/* Three fresh updates of worker 0, then worker 1's, computed on version 0: 3 stale. */
	for (int k = 1; k <= 3; k++) {
		cr_assert_geq(core_ps_on_push(c, 0, k, k - 1, 5, 10 + k), 0);
		a = find(c, CORE_PS_APPLY, 0);
		cr_assert_float_eq(a->x, 0.5, 1e-15);
		cr_assert_eq(find(c, CORE_PS_ACK, 0)->aux, 0);
	}
	cr_assert_geq(core_ps_on_push(c, 1, 1, 0, 5, 20), 0);
	cr_assert_float_eq(find(c, CORE_PS_APPLY, 1)->x, 0.5 / 4.0, 1e-15);
	cr_assert_eq(find(c, CORE_PS_ACK, 1)->aux, 3);
	cr_assert_eq(core_ps_version(c), 4);
	/* A version the model never had is refused; so is a copy of step 1 applied twice. */
	cr_assert_eq(core_ps_on_push(c, 1, 2, 9, 5, 21), -EINVAL);
	cr_assert_geq(core_ps_on_push(c, 1, 1, 0, 5, 22), 0);
	cr_assert_null(find(c, CORE_PS_APPLY, UINT32_MAX));
	cr_assert_eq(find(c, CORE_PS_ACK, 1)->reply, 1);
	cr_assert_eq(core_ps_version(c), 4);
	for (int64_t s = 0; s < 20; s++) {
		cr_assert_float_eq(core_ps_weight(CORE_PS_WEIGHT_EXP, s), exp(-(double)s), 1e-15);
		cr_assert_float_eq(core_ps_weight(CORE_PS_WEIGHT_NONE, s), 1.0, 1e-15);
	}
	core_ps_destroy(&c);
}

Test(core_ps, backup_round_closes_on_n_minus_b_and_drops_late)
{
	struct core_ps_conf conf = { .n = 3, .bp = { .kind = BARRIER_BSP, .backup = 1 } };
	struct drv d;
	const struct core_ps_action *a;

	drv_init(&d, 3, &conf);
	drv_push(&d, 0);
	cr_assert_null(find(d.c, CORE_PS_ROUND_CLOSE, UINT32_MAX));
	drv_push(&d, 1);
	a = find(d.c, CORE_PS_ROUND_CLOSE, UINT32_MAX);
	cr_assert_not_null(a);
	cr_assert_eq(a->aux, 2);
	cr_assert_float_eq(a->x, 0.5, 1e-15);
	cr_assert(d.ready[0] && d.ready[1]);
	/* Worker 2's update on version 0 missed the round: dropped, still released. */
	drv_push(&d, 2);
	cr_assert_eq(find(d.c, CORE_PS_ACK, 2)->aux, -1);
	cr_assert_null(find(d.c, CORE_PS_ROUND_ADD, UINT32_MAX));
	cr_assert(d.ready[2]);
	core_ps_destroy(&d.c);
}

Test(core_ps, averaging_weights)
{
	struct core_ps_conf bsp = { .n = 2, .bp = { .kind = BARRIER_BSP }, .average = true };
	struct core_ps_conf asp = { .n = 2, .bp = { .kind = BARRIER_ASP }, .average = true };
	struct core_ps *c = core_ps_new(&bsp);

	core_ps_on_hello(c, 0, CORE_PS_JOIN, 1);
	core_ps_on_hello(c, 1, CORE_PS_JOIN, 2);
	core_ps_on_push(c, 0, 1, 0, 30, 3);
	cr_assert_float_eq(find(c, CORE_PS_ROUND_ADD, 0)->x, 30.0, 1e-12);
	core_ps_on_push(c, 1, 1, 0, 10, 4);
	cr_assert_float_eq(find(c, CORE_PS_ROUND_CLOSE, UINT32_MAX)->x, 1.0 / 40, 1e-15);
	core_ps_destroy(&c);
	c = core_ps_new(&asp);
	core_ps_on_hello(c, 0, CORE_PS_JOIN, 1);
	core_ps_on_hello(c, 1, CORE_PS_JOIN, 2);
	/* Worker 1 not heard from: counts as n_0. a = 30 / (30 + 30). */
	core_ps_on_push(c, 0, 1, 0, 30, 3);
	cr_assert_float_eq(find(c, CORE_PS_FOLD, 0)->x, 0.5, 1e-15);
	/* Worker 1: 10 / (10 + 30). */
	core_ps_on_push(c, 1, 1, 1, 10, 4);
	cr_assert_float_eq(find(c, CORE_PS_FOLD, 1)->x, 0.25, 1e-15);
	core_ps_destroy(&c);
}

Test(core_ps, event_lines_round_trip)
{
	struct core_ps_event ev = { .kind = CORE_PS_EV_PUSH, .worker = 3, .flags = 2,
				    .now_ns = 123456789012345, .step = 17, .version = 16,
				    .samples = 32 }, back;
	char line[160];

	core_ps_event_format(&ev, line, sizeof line);
	cr_assert_eq(core_ps_event_parse(line, &back), 0);
	cr_assert(back.kind == ev.kind && back.worker == ev.worker && back.flags == ev.flags &&
		  back.now_ns == ev.now_ns && back.step == ev.step && back.version == ev.version &&
		  back.samples == ev.samples);
	cr_assert_eq(core_ps_event_parse("E 9 0 0 0 0 0 0", &back), -EINVAL);
	cr_assert_eq(core_ps_event_parse("E 2 0 0 0 0 0", &back), -EINVAL);
	cr_assert_eq(core_ps_event_parse("E 2 0 0 0 0 0 0 junk", &back), -EINVAL);
	/* a recorded event file is hostile input: only the exact written form */
	static const char *const bad[] = {
		"E 2 0 0 0 0 0 0 ", "E 2 0 0 0 0 0 0\n\n", "E 2  0 0 0 0 0 0", " E 2 0 0 0 0 0 0", "E 2 +0 0 0 0 0 0",
		"E 2 -1 0 0 0 0 0", "E 2 4294967296 0 0 0 0 0", "E 2 0 4294967296 0 0 0 0", "E 0 0 0 0 0 0 0",
		"E -2 0 0 0 0 0 0", "E 2 0 0 9223372036854775808 0 0 0", "E 2 0 0 0 -9223372036854775809 0 0",
		"E 2 0 0 0 0 0 99999999999999999999", "E 2 0 0 0x10 0 0 0", "E 2 0 0 0 0 0 1.5", "E 2 0 0 0 0 0 -",
		"E\t2 0 0 0 0 0 0", "E 2 0 0 0 0 0 0\r", "A 2 0 0 0 0 0 0", "", "E 02 0 0 0 0 0 0", "E 2 0 0 -0 0 0 0",
		"E 2 0 0 0 0 0 -01",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_expect_eq(core_ps_event_parse(bad[i], &back), -EINVAL, "'%s' taken", bad[i]);
	cr_assert_eq(core_ps_event_parse("E 6 4294967295 4294967295 -9223372036854775808 -1 9223372036854775807 0\n",
					 &back), 0);
	cr_expect_eq(back.kind, CORE_PS_EV_TICK);
	cr_expect_eq(back.worker, UINT32_MAX);
	cr_expect_eq(back.flags, UINT32_MAX);
	cr_expect_eq(back.now_ns, INT64_MIN);
	cr_expect_eq(back.step, -1);
	cr_expect_eq(back.version, INT64_MAX);
	cr_assert_null(core_ps_new(&(struct core_ps_conf){ .n = 0 }));
	cr_assert_null(core_ps_new(&(struct core_ps_conf){ .n = 2, .bp = { .backup = 2 } }));
}

/* --- the fast paths against the plain rules --------------------------------------------------- */

/* A sample per check, after any event: a held request of a live worker that every draw would
 * pass (all live others at or above its threshold) has been released. */
static void check_certain(struct core_ps *c, uint32_t n, const struct barrier_params *bp)
{
	for (uint32_t i = 0; i < n; i++) {
		int64_t need;
		bool all = true;

		if (!core_ps_is_held(c, i) || !core_ps_is_live(c, i))
			continue;
		/* The held request's clock: the worker's own (a held request is at its clock). */
		need = barrier_threshold(bp, core_ps_clock(c, i));
		for (uint32_t j = 0; j < n; j++)
			if (j != i && core_ps_is_live(c, j) && core_ps_clock(c, j) < need)
				all = false;
		cr_assert(bp->sample > 0, "worker %u held with beta 0", i);
		cr_assert_not(all, "worker %u held though every draw passes", i);
	}
}

/* Random event sequences (pushes on the released model or an older one, copies sent again,
 * keep-alives, joins and restarts, standalone barriers, pulls, BYEs, closed connections,
 * silence) fed to a core and to its reference twin (conf.reference: every held request judged
 * on every change, samples from barrier_sample): the actions must be identical, line for line. */
/* One random event of the kinds a server sees (pushes on the released model or an older one,
 * copies sent again, keep-alives, joins and restarts, standalone barriers, pulls, BYEs, closed
 * connections, silence); clock[] and ver[] are what the driver learnt from the replies. */
static void random_event(uint64_t *rng, uint32_t n, const int64_t *clock, const int64_t *ver,
			 int64_t *now, struct core_ps_event *ev)
{
	uint32_t i = (uint32_t)barrier_rng_below(rng, n);
	uint64_t r = barrier_rng_below(rng, 100);

	*ev = (struct core_ps_event){ .worker = i };
	*now += (int64_t)barrier_rng_below(rng, 3000);
	ev->now_ns = *now;
	if (r < 55) {
		ev->kind = CORE_PS_EV_PUSH;
		ev->step = clock[i] + 1;
		ev->version = ver[i];
		ev->samples = (int64_t)barrier_rng_below(rng, 40);
		if (r < 4 && clock[i] > 0)
			ev->step = clock[i]; /* a copy sent again */
	} else if (r < 65) {
		ev->kind = CORE_PS_EV_HELLO;
	} else if (r < 72) {
		ev->kind = CORE_PS_EV_HELLO;
		ev->flags = CORE_PS_JOIN | (r < 69 ? CORE_PS_AGAIN : 0);
	} else if (r < 77) {
		ev->kind = CORE_PS_EV_BARRIER;
		ev->step = clock[i];
	} else if (r < 82) {
		ev->kind = CORE_PS_EV_PULL;
	} else if (r < 86) {
		ev->kind = CORE_PS_EV_LEAVE;
		ev->flags = r < 84 ? CORE_PS_LEAVE_BYE : CORE_PS_LEAVE_CLOSED;
	} else {
		ev->kind = CORE_PS_EV_TICK;
	}
}

/* The driver follows the replies: a worker computes on what it got. */
static void follow(const struct core_ps_action *a, size_t na, int64_t *clock, int64_t *ver)
{
	for (size_t k = 0; k < na; k++) {
		if (a[k].kind == CORE_PS_RELEASE || a[k].kind == CORE_PS_HELLO) {
			clock[a[k].worker] = a[k].step;
			ver[a[k].worker] = a[k].version;
		} else if (a[k].kind == CORE_PS_ACK && !a[k].reply) {
			clock[a[k].worker] = a[k].step;
		}
	}
}

static void differential_twin(uint32_t n, const struct core_ps_conf *base, uint64_t seed,
			      int events, bool twin_reference)
{
	struct core_ps_conf cf = *base, cr = *base;
	struct core_ps *fast, *ref;
	int64_t ver[MAXW * 4] = { 0 }, clock[MAXW * 4] = { 0 }, now = 0;
	uint64_t rng = seed;

	cf.reference = false;
	cr.reference = twin_reference;
	fast = core_ps_new(&cf);
	ref = core_ps_new(&cr);
	cr_assert(fast && ref);
	for (int e = 0; e < events; e++) {
		struct core_ps_event ev;
		int rf, rr;
		size_t nf, nr;
		const struct core_ps_action *af, *ar;

		random_event(&rng, n, clock, ver, &now, &ev);
		rf = core_ps_feed(fast, &ev);
		rr = core_ps_feed(ref, &ev);
		cr_assert_eq(rf, rr, "event %d: %d vs %d", e, rf, rr);
		af = core_ps_actions(fast, &nf);
		ar = core_ps_actions(ref, &nr);
		for (size_t k = 0; rf >= 0 && k < nf && k < nr; k++) {
			char lf[160], lr[160];

			core_ps_action_format(&af[k], lf, sizeof lf);
			core_ps_action_format(&ar[k], lr, sizeof lr);
			cr_assert_str_eq(lf, lr, "n %u %s seed %llu event %d action %zu", n,
					 barrier_kind_name(base->bp.kind), (unsigned long long)seed, e, k);
		}
		cr_assert_eq(nf, nr, "n %u %s seed %llu event %d: %zu actions vs %zu", n,
			     barrier_kind_name(base->bp.kind), (unsigned long long)seed, e, nf, nr);
		if (rf >= 0)
			follow(af, nf, clock, ver);
		for (uint32_t j = 0; j < n; j++) {
			cr_assert_eq(core_ps_is_held(fast, j), core_ps_is_held(ref, j));
			cr_assert_eq(core_ps_clock(fast, j), core_ps_clock(ref, j));
		}
		cr_assert_eq(core_ps_waiting(fast), core_ps_waiting(ref));
		cr_assert_eq(core_ps_finished(fast, now), core_ps_finished(ref, now));
		if (base->draw == BARRIER_DRAW_CHECK)
			check_certain(fast, n, &base->bp);
	}
	core_ps_destroy(&fast);
	core_ps_destroy(&ref);
}

static void differential(uint32_t n, const struct core_ps_conf *base, uint64_t seed, int events)
{
	differential_twin(n, base, seed, events, true);
}

Test(core_ps, fast_paths_equal_the_plain_rules, .timeout = 120)
{
	static const struct barrier_params kinds[] = {
		{ .kind = BARRIER_BSP }, { .kind = BARRIER_BSP, .backup = 1 },
		{ .kind = BARRIER_SSP, .staleness = 1 }, { .kind = BARRIER_SSP, .staleness = 3 },
		{ .kind = BARRIER_ASP }, { .kind = BARRIER_PBSP, .sample = 1 },
		{ .kind = BARRIER_PBSP, .sample = 2 }, { .kind = BARRIER_PSSP, .sample = 2, .staleness = 1 },
		{ .kind = BARRIER_PSSP, .sample = 5, .staleness = 2 }, { .kind = BARRIER_PBSP, .sample = 0 },
	};
	bool late[MAXW * 4] = { false, true, false, false, false, true };

	for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
		for (uint32_t n = 2; n <= 12; n += 5)
			for (uint64_t seed = 1; seed <= 12; seed++) {
				struct core_ps_conf conf = { .n = n, .bp = kinds[k], .seed = seed,
							     .average = seed % 3 == 0,
							     .weighting = (enum core_ps_weighting)(seed % 3),
							     .dead_after_ns = seed % 2 ? 20000 : 0,
							     .grace_ns = 50000,
							     .late = seed % 4 == 1 ? late : NULL };

				if (kinds[k].backup >= n)
					continue;
				differential(n, &conf, seed * 7919 + k, 1500);
			}
}

/* A sample per crossing is not kept but drawn again from its stream's state before the draw,
 * and kept only over a liveness change: with 16 workers, many held at once and churn (BYEs,
 * closed connections, silence, restarts), the fast path still takes every decision the
 * reference takes from the samples it stored. */
Test(core_ps, crossing_samples_drawn_again_equal_the_kept_ones, .timeout = 120)
{
	static const struct barrier_params kinds[] = {
		{ .kind = BARRIER_PBSP, .sample = 3 }, { .kind = BARRIER_PBSP, .sample = 15 },
		{ .kind = BARRIER_PSSP, .sample = 6, .staleness = 1 },
	};
	bool late[MAXW * 4] = { false, true, false, false, true };

	for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
		for (uint64_t seed = 1; seed <= 16; seed++) {
			struct core_ps_conf conf = { .n = 16, .bp = kinds[k], .seed = seed,
						     .dead_after_ns = seed % 2 ? 20000 : 0,
						     .grace_ns = 50000,
						     .late = seed % 4 == 1 ? late : NULL };

			differential(16, &conf, seed * 104729 + k, 4000);
		}
}

/* Many workers: a BSP and a pSSP(10, 4) run of 2,000 workers, 20 steps each, pushed in
 * lockstep order: under BSP everybody is held until the round's last push and then released
 * at once; under pSSP nobody is ever more than one step behind, so nobody is ever held. */
Test(core_ps, many_workers, .timeout = 60)
{
	static const struct barrier_params kinds[] = {
		{ .kind = BARRIER_BSP }, { .kind = BARRIER_PSSP, .sample = 10, .staleness = 4 },
	};

	for (size_t k = 0; k < 2; k++) {
		uint32_t n = 2000;
		struct core_ps_conf conf = { .n = n, .bp = kinds[k], .seed = 5 };
		struct core_ps *c = core_ps_new(&conf);
		bool bsp = kinds[k].kind == BARRIER_BSP;
		struct core_ps_stats st;

		cr_assert_not_null(c);
		for (uint32_t i = 0; i < n; i++)
			cr_assert_geq(core_ps_on_hello(c, i, CORE_PS_JOIN, i), 0);
		for (int64_t s = 1; s <= 20; s++) {
			int64_t v = bsp ? s - 1 : core_ps_version(c);

			for (uint32_t i = 0; i < n; i++) {
				int rc;

				cr_assert_not(core_ps_is_held(c, i));
				rc = core_ps_on_push(c, i, s, v, 1, s * n + i);
				cr_assert_geq(rc, 0);
				if (bsp && i + 1 < n)
					cr_assert_eq(core_ps_waiting(c), i + 1);
			}
			cr_assert_eq(core_ps_waiting(c), 0);
			if (bsp)
				cr_assert_eq(core_ps_version(c), s);
		}
		core_ps_stats(c, &st);
		cr_assert_eq(st.updates_in, 20ull * n);
		cr_assert_eq(st.accepted, 20ull * n);
		core_ps_destroy(&c);
	}
}

/* --- a sample per check ------------------------------------------------------------------------ */

Test(core_ps, check_rule_exhaustive_interleavings, .timeout = 240)
{
	per_check = true;
	explore_draw = BARRIER_DRAW_CHECK;
	for (int ref = 0; ref <= 1; ref++) {
		explore_reference = ref;
		for (uint32_t n = 2; n <= 3; n++) {
			unsigned long asp = explore(BARRIER_ASP, 0, 0, 0, n);

			cr_assert_eq(explore(BARRIER_PBSP, 0, 0, 0, n), asp);
			cr_assert_gt(explore(BARRIER_PBSP, 0, 1, 0, n), 0);
			cr_assert_gt(explore(BARRIER_PSSP, 1, 1, 0, n), 0);
			cr_assert_gt(explore(BARRIER_PBSP, 0, n - 1, 0, n), 0);
		}
		/* pBSP(N-1) draws everybody: BSP's interleavings exactly. */
		cr_assert_eq(explore(BARRIER_PBSP, 0, 2, 0, 3), 6ul * 6 * 6);
	}
	explore_reference = false;
	explore_draw = BARRIER_DRAW_CROSSING;
	per_check = false;
}

Test(core_ps, check_rule_beta_extremes_are_asp_and_bsp_exactly, .timeout = 120)
{
	/* pSSP(N-1, s) is SSP(s) under both rules: the releases, request for request. */
	for (int draw = 0; draw <= 1; draw++)
		for (uint32_t n = 2; n <= 3; n++) {
			struct explore e = { .n = n, .leaf = leaf_compare,
					     .conf = { .n = n, .seed = 5, .draw = (enum barrier_draw)draw,
						       .bp = { .kind = BARRIER_PSSP, .sample = n - 1,
							       .staleness = 1 } } };

			other_conf = (struct core_ps_conf){ .n = n, .seed = 5,
							    .bp = { .kind = BARRIER_SSP, .staleness = 1 } };
			compare_all = false;
			explore_from(&e, 0);
			cr_assert_gt(e.leaves, 0);
		}
	for (int ref = 0; ref <= 1; ref++)
		for (uint32_t n = 2; n <= 3; n++) {
			struct explore e = { .n = n, .leaf = leaf_compare,
					     .conf = { .n = n, .seed = 3, .draw = BARRIER_DRAW_CHECK,
						       .reference = ref, .bp = { .kind = BARRIER_PBSP } } };

			other_conf = (struct core_ps_conf){ .n = n, .seed = 3, .bp = { .kind = BARRIER_ASP } };
			compare_all = true;
			explore_from(&e, 0);
			e.conf.bp.sample = n - 1;
			other_conf = (struct core_ps_conf){ .n = n, .seed = 3, .bp = { .kind = BARRIER_BSP } };
			compare_all = false;
			e.leaves = 0;
			explore_from(&e, 0);
			cr_assert_gt(e.leaves, 0);
		}
}

/* Checks until worker 0's request goes, with p known: 6 workers, pBSP(2); worker 0 pushes step
 * 1 (held: nobody else is there, p = 0), then workers 1 and 2 push step 1 (from then on a check
 * of worker 0 passes when both drawn are among {1, 2}: p = 1 / C(5, 2) = 0.1; workers 1 and 2
 * hold at p = 0.1 too), then worker 3 asks for barriers at clock 0 (always released: each is
 * one more check of everybody and changes no clock). Returns the number of checks (the push of
 * worker 2 is the first). */
static int checks_until_release(uint64_t seed, bool reference)
{
	struct core_ps_conf conf = { .n = 6, .seed = seed, .draw = BARRIER_DRAW_CHECK,
				     .reference = reference, .bp = { .kind = BARRIER_PBSP, .sample = 2 } };
	struct core_ps *c = core_ps_new(&conf);
	int64_t now = 0;
	int checks;

	cr_assert_not_null(c);
	for (uint32_t i = 0; i < 6; i++)
		cr_assert_geq(core_ps_on_hello(c, i, CORE_PS_JOIN, ++now), 0);
	for (uint32_t i = 0; i < 6; i++)
		cr_assert_not(core_ps_is_held(c, i));
	cr_assert_geq(core_ps_on_push(c, 0, 1, 0, 1, ++now), 0);
	cr_assert(core_ps_is_held(c, 0));
	cr_assert_geq(core_ps_on_push(c, 1, 1, 0, 1, ++now), 0);
	cr_assert(core_ps_is_held(c, 0)); /* one other at 1 < k = 2: p = 0 */
	cr_assert_geq(core_ps_on_push(c, 2, 1, 0, 1, ++now), 0);
	for (checks = 1; core_ps_is_held(c, 0) && checks < 100000; checks++)
		cr_assert_geq(core_ps_on_barrier(c, 3, 0, ++now), 0);
	cr_assert_not(core_ps_is_held(c, 3));
	core_ps_destroy(&c);
	return checks;
}

Test(core_ps, check_rule_release_times_have_the_plain_distribution, .timeout = 60)
{
	enum { RUNS = 4000 };
	double sum[2] = { 0 };
	int first[2] = { 0 };

	for (int ref = 0; ref <= 1; ref++)
		for (uint64_t seed = 1; seed <= RUNS; seed++) {
			int k = checks_until_release(seed * 2654435761u, ref);

			sum[ref] += k;
			first[ref] += k == 1;
		}
	/* Geometric(0.1): mean 10 (sd of the mean over 4000 runs 0.15), P(1) = 0.1 (sd 0.005). */
	for (int ref = 0; ref <= 1; ref++) {
		double mean = sum[ref] / RUNS, p1 = (double)first[ref] / RUNS;

		cr_assert(fabs(mean - 10.0) < 0.6, "%s: mean checks %.3f, expected 10",
			  ref ? "reference" : "fast", mean);
		cr_assert(fabs(p1 - 0.1) < 0.02, "%s: P(first check) %.4f, expected 0.1",
			  ref ? "reference" : "fast", p1);
	}
}

/* The same seed gives the same actions (two fast cores on random event sequences with churn),
 * and after every event no held live request is one every draw would pass. */
Test(core_ps, check_rule_deterministic_and_certain_cases, .timeout = 120)
{
	static const struct barrier_params kinds[] = {
		{ .kind = BARRIER_PBSP, .sample = 1 }, { .kind = BARRIER_PBSP, .sample = 2 },
		{ .kind = BARRIER_PSSP, .sample = 2, .staleness = 1 },
		{ .kind = BARRIER_PSSP, .sample = 5, .staleness = 2 }, { .kind = BARRIER_PBSP, .sample = 0 },
	};
	bool late[MAXW * 4] = { false, true, false, false, false, true };

	for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
		for (uint32_t n = 2; n <= 12; n += 5)
			for (uint64_t seed = 1; seed <= 12; seed++) {
				struct core_ps_conf conf = { .n = n, .bp = kinds[k], .seed = seed,
							     .draw = BARRIER_DRAW_CHECK,
							     .dead_after_ns = seed % 2 ? 20000 : 0,
							     .grace_ns = 50000,
							     .late = seed % 4 == 1 ? late : NULL };

				differential_twin(n, &conf, seed * 7919 + k, 1500, false);
			}
}

/* The sample per check at scale: 2,000 workers under pBSP(10), pushed in lockstep order; each
 * step every worker is released (the last ones of a step find everybody at their clock) and
 * the clocks never spread beyond one step. */
Test(core_ps, check_rule_many_workers, .timeout = 60)
{
	uint32_t n = 2000;
	struct core_ps_conf conf = { .n = n, .seed = 5, .draw = BARRIER_DRAW_CHECK,
				     .bp = { .kind = BARRIER_PBSP, .sample = 10 } };
	struct core_ps *c = core_ps_new(&conf);
	uint32_t held_mid = 0;

	cr_assert_not_null(c);
	for (uint32_t i = 0; i < n; i++)
		cr_assert_geq(core_ps_on_hello(c, i, CORE_PS_JOIN, i), 0);
	for (int64_t s = 1; s <= 20; s++) {
		for (uint32_t i = 0; i < n; i++) {
			if (core_ps_is_held(c, i))
				continue; /* still held from this step: pushes the next round late */
			cr_assert_geq(core_ps_on_push(c, i, core_ps_clock(c, i) + 1, core_ps_version(c), 1,
						      s * n + i), 0);
			if (i == n / 2)
				held_mid += core_ps_waiting(c);
		}
	}
	/* Half-way through a step about half the workers are at the new clock: a check then
	 * passes with p ~ 2^-10, so most of them are held (not a stub that releases all). */
	cr_assert_gt(held_mid, 20u * n / 4);
	core_ps_destroy(&c);
}

/* The fast path against the literal draws in distribution, on random event sequences with
 * joins, restarts, departures, silence and late joiners (so levels are regrouped and departed
 * requests drawn literally): over many runs the number of releases and the mean time a
 * released request was held agree within 4 standard errors. */
static void release_stats(const struct core_ps_conf *conf, uint64_t seed, int events, double *rel,
			  double *held)
{
	struct core_ps *c = core_ps_new(conf);
	int64_t ver[MAXW * 4] = { 0 }, clock[MAXW * 4] = { 0 }, now = 0;
	uint64_t rng = seed;
	double n = 0, sum = 0;

	cr_assert_not_null(c);
	for (int e = 0; e < events; e++) {
		struct core_ps_event ev;
		const struct core_ps_action *a;
		size_t na;
		int rc;

		random_event(&rng, conf->n, clock, ver, &now, &ev);
		rc = core_ps_feed(c, &ev);
		if (rc < 0)
			continue;
		a = core_ps_actions(c, &na);
		for (size_t k = 0; k < na; k++)
			if (a[k].kind == CORE_PS_RELEASE) {
				n++;
				sum += (double)a[k].aux;
			}
		follow(a, na, clock, ver);
	}
	*rel = n;
	*held = n > 0 ? sum / n : 0;
	core_ps_destroy(&c);
}

Test(core_ps, check_rule_fast_equals_literal_in_distribution, .timeout = 120)
{
	static const struct barrier_params kinds[] = {
		{ .kind = BARRIER_PBSP, .sample = 3 }, { .kind = BARRIER_PSSP, .sample = 2, .staleness = 1 },
	};
	bool late[MAXW * 4] = { false, true, false, false, false, true };
	enum { RUNS = 600 };

	for (size_t k = 0; k < 2; k++) {
		double m[2][2] = { { 0 } }, q[2][2] = { { 0 } };

		for (int ref = 0; ref <= 1; ref++)
			for (uint64_t r = 0; r < RUNS; r++) {
				struct core_ps_conf conf = { .n = 7, .bp = kinds[k], .seed = 1000 + r,
							     .draw = BARRIER_DRAW_CHECK, .reference = ref,
							     .dead_after_ns = 20000, .grace_ns = 50000,
							     .late = r % 2 ? late : NULL };
				double v[2];

				/* the same event stream for both (per r); the cores' draws differ */
				release_stats(&conf, 77 + r, 400, &v[0], &v[1]);
				for (int x = 0; x < 2; x++) {
					m[ref][x] += v[x];
					q[ref][x] += v[x] * v[x];
				}
			}
		for (int x = 0; x < 2; x++) {
			double mf = m[0][x] / RUNS, mr = m[1][x] / RUNS;
			double vf = q[0][x] / RUNS - mf * mf, vr = q[1][x] / RUNS - mr * mr;
			double se = sqrt((vf + vr) / RUNS);

			cr_assert_gt(mf, 0);
			cr_assert(fabs(mf - mr) < 4 * se + 1e-9, "%s %s: fast %.3f, literal %.3f (se %.3f)",
				  barrier_kind_name(kinds[k].kind), x ? "mean held ns" : "releases", mf, mr, se);
		}
	}
}

/* The two shells feed the core different message streams: the emulator's server also hands it
 * every keep-alive (a HELLO without JOIN) and every PULL, the simulator only the joins and the
 * pushes. Under a sample per check each check is a fresh draw, so a shell that made more
 * checks would release sooner. Pinned here: a check is made by a join or a push only (one pass
 * each, judging every held request once), keep-alives and pulls make none, so both streams give
 * the same releases, event for event, and the same counts. The schedule is straggler.yaml's
 * shape: 8 workers, worker 7 four times slower, pSSP(2, 3). */
#define SH_N 8
#define SH_END_NS 60000000000ll

struct sh_out {
	char rel[1 << 16];
	size_t len;
	uint64_t requests, holds;
	struct core_ps_stats st;
};

static void shell_run(bool chatty, struct sh_out *o)
{
	struct core_ps_conf conf = { .n = SH_N, .bp = { .kind = BARRIER_PSSP, .staleness = 3, .sample = 2 },
				     .draw = BARRIER_DRAW_CHECK, .seed = 62 };
	struct core_ps *c = core_ps_new(&conf);
	int64_t next[SH_N], step[SH_N], chat = 13000000; /* the next push of a released worker */
	uint64_t jit = 0x9e3779b97f4a7c15ull;

	cr_assert_not_null(c);
	memset(o, 0, sizeof *o);
	for (uint32_t i = 0; i < SH_N; i++) {
		next[i] = -1;
		step[i] = 0;
	}
	for (;;) {
		int64_t now = INT64_MAX;
		uint32_t w = SH_N;
		int rc;
		size_t n;
		const struct core_ps_action *a;

		for (uint32_t i = 0; i < SH_N; i++)
			if (next[i] >= 0 && next[i] < now) {
				now = next[i];
				w = i;
			}
		if (o->requests < SH_N) {
			/* the joins first, at t = i ms */
			w = (uint32_t)o->requests;
			now = (int64_t)w * 1000000;
			rc = core_ps_on_hello(c, w, CORE_PS_JOIN, now);
		} else if (chatty && chat < now) {
			/* a keep-alive and a pull from every held worker (what the emulator's server
			 * also feeds the core), between the pushes */
			for (uint32_t i = 0; i < SH_N; i++) {
				if (!core_ps_is_held(c, i))
					continue;
				cr_assert_eq(core_ps_on_hello(c, i, 0, chat), 0);
				cr_assert_eq(core_ps_on_pull(c, i, chat), 1);
			}
			chat += 13000000;
			continue;
		} else {
			if (w == SH_N || now > SH_END_NS)
				break;
			next[w] = -1;
			rc = core_ps_on_push(c, w, step[w] + 1, core_ps_version(c), 64, now);
		}
		o->requests++;
		a = core_ps_actions(c, &n);
		cr_assert_geq(rc, 0);
		for (size_t k = 0; k < n; k++) {
			uint32_t i = a[k].worker;
			int64_t period;

			if (a[k].kind != CORE_PS_RELEASE)
				continue;
			o->holds += a[k].aux > 0;
			o->len += (size_t)snprintf(o->rel + o->len, sizeof o->rel - o->len, "%u@%lld+%lld ",
						   i, (long long)a[k].step, (long long)a[k].aux);
			cr_assert_lt(o->len, sizeof o->rel);
			/* the model arrives, the step is computed, the push arrives: 0.55-0.75 s
			 * (worker 7: 4x), from a stream that both runs share */
			jit = jit * 6364136223846793005ull + 1442695040888963407ull;
			period = 550000000 + (int64_t)((jit >> 33) % 200000000);
			step[i] = a[k].step;
			next[i] = now + (i == SH_N - 1 ? 4 * period : period);
		}
	}
	core_ps_stats(c, &o->st);
	core_ps_destroy(&c);
}

Test(core_ps, check_rule_checks_come_from_joins_and_pushes_only, .timeout = 30)
{
	static struct sh_out emu, sim;

	shell_run(true, &emu);
	shell_run(false, &sim);
	/* one check per request (a join or a push), none per keep-alive or pull */
	cr_assert_eq(emu.st.checks, emu.requests, "%llu checks for %llu requests",
		     (unsigned long long)emu.st.checks, (unsigned long long)emu.requests);
	cr_assert_eq(sim.st.checks, sim.requests);
	cr_assert_eq(emu.st.checks, sim.st.checks);
	cr_assert_eq(emu.st.judged, sim.st.judged);
	cr_assert_str_eq(emu.rel, sim.rel, "the releases differ");
	/* not a stub: the slow worker made fast ones wait, some more than one check long */
	cr_assert_gt(sim.requests, 500);
	cr_assert_gt(sim.holds, sim.requests / 10, "%llu holds", (unsigned long long)sim.holds);
	cr_assert_gt(sim.st.judged, sim.requests + sim.holds, "judged %llu",
		     (unsigned long long)sim.st.judged);
}
