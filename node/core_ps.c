/* node/core_ps: see core_ps.h.
 *
 * Every rule here was in node/engine_ps's server before it moved; the driver feeds what the
 * ROUTER received and carries the actions out in order. Two things keep an event cheap:
 *   - a release pass (after anything a held request depends on changed) computes the smallest
 *     and second-smallest live clock once, so each non-sampled held request is judged in O(1):
 *     "every live other has clock >= t" is "the smallest live clock but mine is >= t";
 *   - the counters a driver reads on every update (live, held and live) are kept, not counted.
 * pBSP/pSSP draw each crossing's sample with node/barrier's barrier_sample from the worker's own
 * stream, so a run draws exactly the samples it drew before the core existed. */
#include "node/core_ps.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The seed of worker i's sampling stream (what the emulator's server always used). */
#define CORE_PS_RNG_STREAM 0x62617272ull

struct cw {
	int64_t held_c;        /* the held request's clock */
	int64_t held_since_ns;
	int64_t pushed_on;     /* model version of its latest update (-1 = none yet) */
	int64_t last_push;     /* step of its latest push (-1 = none): a push at or below it is a
				* copy sent again after a reconnect */
	int64_t last_ack;      /* the ACK's aux for that push */
	int64_t last_seen_ns;
	int64_t departed_ns;
	uint64_t rng;          /* this worker's sampling stream */
	uint64_t round_samples; /* averaging: samples behind its latest model (0 = none yet) */
	uint32_t nsample;
	bool known, left, held, leaving, departed, late;
	uint8_t held_reply;    /* enum core_ps_reply */
};

struct core_ps {
	struct core_ps_conf conf;
	struct cw *w;
	int64_t *clocks;       /* node/barrier's clock vector */
	bool *alive;
	size_t *samples;       /* worker i's sample at [i * slot, i * slot + nsample) */
	size_t slot;
	size_t *scratch;       /* n indices for barrier_sample */
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
		/* Only when one event does more than the room made at creation (2n + 16). */
		size_t cap = c->cap * 2;
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

static void set_held(struct core_ps *c, uint32_t i, bool held)
{
	if (c->w[i].held == held)
		return;
	c->w[i].held = held;
	c->held += held ? 1 : (uint32_t)-1;
	if (c->alive[i])
		c->held_live += held ? 1 : (uint32_t)-1;
}

static void set_alive(struct core_ps *c, uint32_t i, bool live)
{
	c->alive[i] = live;
	c->live += live ? 1 : (uint32_t)-1;
	if (c->w[i].held)
		c->held_live += live ? 1 : (uint32_t)-1;
}

/* Smallest live clock (and whose) and the second smallest, for the O(1) judgements. */
struct mins {
	int64_t m1, m2;
	uint32_t i1;
};

static void live_mins(const struct core_ps *c, struct mins *m)
{
	m->m1 = m->m2 = INT64_MAX;
	m->i1 = UINT32_MAX;
	for (uint32_t j = 0; j < c->conf.n; j++) {
		int64_t v = c->clocks[j];

		if (!c->alive[j])
			continue;
		if (v < m->m1) {
			m->m2 = m->m1;
			m->m1 = v;
			m->i1 = j;
		} else if (v < m->m2) {
			m->m2 = v;
		}
	}
}

/* The barrier decision for worker i at clock cl with its stored sample. */
static bool may_proceed(const struct core_ps *c, uint32_t i, int64_t cl, const struct mins *m)
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
	if (barrier_is_sampled(bp->kind))
		return barrier_may_proceed(bp, c->clocks, c->alive, c->conf.n, i, cl,
					   c->samples + (size_t)i * c->slot, w->nsample);
	/* BSP/SSP: node/barrier's "every live other >= threshold", from the precomputed minima. */
	return (m->i1 == i ? m->m2 : m->m1) >= barrier_threshold(bp, cl);
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

/* Re-evaluate every held request (after anything the decision depends on changed). */
static void release_held(struct core_ps *c, int64_t now_ns)
{
	struct mins m;

	if (!c->held)
		return;
	live_mins(c, &m);
	for (uint32_t i = 0; i < c->conf.n; i++)
		if (c->w[i].held && may_proceed(c, i, c->w[i].held_c, &m))
			release(c, i, now_ns);
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
	c->clocks[i] = cl;
	set_held(c, i, true);
	w->held_c = cl;
	w->held_reply = (uint8_t)reply;
	w->held_since_ns = now_ns;
	w->nsample = 0;
	if (barrier_is_sampled(c->conf.bp.kind) && c->slot > 0) {
		size_t k = barrier_sample(&w->rng, c->conf.n, i, c->alive, c->conf.bp.sample,
					  c->scratch);

		memcpy(c->samples + (size_t)i * c->slot, c->scratch, k * sizeof *c->scratch);
		w->nsample = (uint32_t)k;
	}
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

/* The slowest clock among the other live workers that have not left (INT64_MAX: none). */
static int64_t slowest_other(const struct core_ps *c, uint32_t i)
{
	int64_t lo = INT64_MAX;

	for (uint32_t j = 0; j < c->conf.n; j++)
		if (j != i && c->alive[j] && !c->w[j].left && c->clocks[j] < lo)
			lo = c->clocks[j];
	return lo;
}

/* Worker i missed rounds (a restart, a late join, a cut connection): it goes on from the
 * slowest live other's clock, so nobody waits for it to redo them; a request still held moves
 * there too. Otherwise it would go on counting from its old step, which never reaches the
 * clock the others wait for (BSP: they wait for its clock, it for their updates: deadlock). */
static void resume_at_slowest(struct core_ps *c, uint32_t i)
{
	int64_t lo = slowest_other(c, i);

	if (lo != INT64_MAX && lo > c->clocks[i])
		c->clocks[i] = lo;
	if (c->w[i].held && c->w[i].held_c < c->clocks[i])
		c->w[i].held_c = c->clocks[i];
}

/* Every message but a BYE is a sign of life: a departed worker is back (at the slowest live
 * other's clock, as after a restart), a worker that left lives again. */
static void sign_of_life(struct core_ps *c, uint32_t i, int64_t now_ns)
{
	struct cw *w = &c->w[i];

	w->known = true;
	w->last_seen_ns = now_ns;
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

	c->w[i].round_samples = (uint64_t)ni;
	for (uint32_t j = 0; j < c->conf.n; j++)
		if (j != i && c->alive[j])
			tot += c->w[j].round_samples ? (double)c->w[j].round_samples : ni;
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
	if (step > c->clocks[i])
		c->clocks[i] = step;
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
	w->last_ack = aux;
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
	w->departed_ns = now_ns;
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
	w->last_seen_ns = now_ns;
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
			    now_ns - c->w[i].last_seen_ns > c->conf.dead_after_ns)
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
		if (!c->w[i].left && !(c->w[i].departed && now_ns - c->w[i].departed_ns >= grace))
			return false;
	return true;
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
	c->cap = 2 * (size_t)n + 16;
	c->act = calloc(c->cap, sizeof *c->act);
	if (barrier_is_sampled(conf->bp.kind)) {
		/* The sample never holds more than the other workers. */
		c->slot = conf->bp.sample < n - 1 ? conf->bp.sample : n - 1;
		c->samples = calloc((size_t)n * c->slot + 1, sizeof *c->samples);
		c->scratch = calloc(n, sizeof *c->scratch);
		if (!c->samples || !c->scratch)
			goto fail;
	}
	if (!c->w || !c->clocks || !c->alive || !c->act)
		goto fail;
	for (uint32_t i = 0; i < n; i++) {
		struct cw *w = &c->w[i];

		/* Every worker starts live, so a synchronous run waits for all of them to join,
		 * except those planned to join later: the others go on without them. */
		w->late = conf->late && conf->late[i];
		c->alive[i] = !w->late;
		c->live += c->alive[i];
		w->pushed_on = -1;
		w->last_push = -1;
		w->rng = conf->seed ^ (CORE_PS_RNG_STREAM << 20) ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull);
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
	free(c->scratch);
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

int core_ps_event_parse(const char *line, struct core_ps_event *ev)
{
	int kind, used = 0;

	memset(ev, 0, sizeof *ev);
	if (sscanf(line, "E %d %" SCNu32 " %" SCNu32 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64
		   "%n", &kind, &ev->worker, &ev->flags, &ev->now_ns, &ev->step, &ev->version,
		   &ev->samples, &used) != 7 || used == 0)
		return -EINVAL;
	if (line[used] != '\0' && line[used] != '\n')
		return -EINVAL;
	if (kind < CORE_PS_EV_HELLO || kind > CORE_PS_EV_TICK)
		return -EINVAL;
	ev->kind = (enum core_ps_event_kind)kind;
	return 0;
}

int core_ps_action_format(const struct core_ps_action *a, char *buf, size_t len)
{
	return snprintf(buf, len, "A %d %" PRIu32 " %u %" PRId64 " %" PRId64 " %" PRId64 " %.17g",
			(int)a->kind, a->worker, (unsigned)a->reply, a->step, a->version, a->aux, a->x);
}
