/* sim/sim: see sim.h.
 *
 * One event loop over sim/sim_heap. A worker's life is the emulated worker's loop
 * (node/engine_ps) with the waiting replaced by events:
 *   JOIN     -> the join travels to the server (worker's up link, server's down link)
 *   ARRIVE   -> a message reaches the server and queues (FIFO, server_cost each)
 *   HANDLE   -> the server takes it: the event goes into node/core_ps, whose actions are
 *               carried out here: ACK (the trace row, at the time the ACK reaches the
 *               worker), RELEASE (the model travels back: server's up link, worker's down
 *               link, with the ns the core held the request as the step's wait), APPLY /
 *               ROUND_ADD / ROUND_CLOSE (the training, when real)
 *   MODEL    -> the model arrived: the step starts (after a pause window, if one is open)
 *   COMPUTE  -> the step is computed: the push travels to the server
 * plus SAMPLE (progress.csv every 100 ms), EVAL (eval.csv), churn (crash, restart, leave,
 * join) and LINK (a network.timeline change). A generation tag per worker cancels the events
 * of a crashed worker's lost process. Nothing runs past stop.time.
 *
 * Memory per worker, train none: struct sim_worker (40 bytes), its plan index (4), about one
 * heap entry (24), two link directions (32, only when a transmitter can be busy or links
 * change), the last arrival from the server (8, only when a message could overtake another:
 * random delays, loss, link changes or a profile) and the core's share (node/core_ps.h). */
#include "sim/sim.h"

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectors/csv.h"
#include "collectors/schema.h"
#include "lib/log.h"
#include "node/core_ps.h"
#include "node/model.h"
#include "node/rng.h"
#include "node/straggler.h"
#include "node/wire.h"
#include "orchestrator/linktrace.h"
#include "sim/sim_heap.h"
#include "sim/sim_link.h"
#include "sim/sim_loss.h"
#include "sim/sim_p2p.h"
#include "sim/sim_profile.h"
#include "sim/sim_ring.h"
#include "sim/sim_seed.h"
#include "sim/sim_setup.h"
#include "sim/sim_status.h"
#include "sim/sim_train.h"

#define SIM_SAMPLE_NS 100000000ll /* progress.csv period, as the orchestrator samples */
#define SIM_SMALL_BYTES WIRE_HEADER_BYTES

enum sim_ev {
	EV_JOIN = 1, EV_ARRIVE, EV_HANDLE, EV_MODEL, EV_COMPUTE, EV_SAMPLE, EV_EVAL, EV_CRASH,
	EV_RESTART, EV_LEAVE, EV_LINK, EV_TRACE,
};

enum sim_msg { MSG_NONE = 0, MSG_JOIN, MSG_PUSH };
enum sim_state { W_OFF = 0, W_UP, W_DONE };

struct sim_worker {
	float compute_s, wait_s;    /* sums over the trace rows, s */
	float stale_sum;            /* of its updates that had a staleness (stale_n of them) */
	float cur_compute, cur_wait; /* the step in progress (s) */
	uint32_t step;              /* clock: steps completed */
	uint32_t version;           /* model version of the model it holds */
	uint32_t stale_max, stale_n;
	uint16_t gen;
	uint8_t msg;                /* enum sim_msg in flight to the server */
	uint8_t state;              /* enum sim_state */
};

struct sim {
	const struct sim_opts *o;
	const struct plan_run *run;
	const struct scenario *sc;
	uint32_t n;                 /* workers */
	uint32_t srv;               /* plan index of the server */
	uint32_t *node_of;          /* worker -> plan node index */
	struct sim_worker *w;
	struct sim_link *up, *down; /* per plan node; NULL when no link ever has a rate and no
				     * timeline or trace changes one: then a transmitter is never
				     * busy and the plan's parameters serve (32 bytes per node less) */
	struct linktrace *ltrace;   /* network.trace, NULL = none */
	struct sim_loss *loss;      /* the directions' loss schedules (with up/down), NULL = none */
	struct link_params *cur_up, *cur_down; /* per plan node, only with a trace: the current
					       * parameters the trace's rows change */
	struct core_ps *core;
	struct sim_heap *heap;
	struct sim_train *train;
	struct sim_profile *profile;  /* simulation.profile, NULL = none */
	struct straggler **strag;     /* per worker with a compute.trace: node/straggler's model
				       * (NULL array when no worker has one) */
	const double **prof_compute;  /* per worker: quantiles of its step time (NULL: the model) */
	const double **prof_base;     /* per worker: of its step time without the delay draws
				       * (NULL array, or NULL: prof_compute) */
	const double **prof_transfer; /* per worker: of its round trip per step (NULL: the links) */
	const double *prof_warm;      /* the profile's warm-up factors, NULL = none */
	double *prof_u;               /* calibrated: per worker the uniform of the round trip its
				       * last model reply began (NAN: none pending) */
	double *prof_z;               /* ... and the normal behind its last round trip's draw */
	double prof_ac1;              /* the profile's all.transfer_ac1 */
	int64_t *down_at;             /* per worker: when the last message from the server on its
				       * connection arrives (a later one cannot overtake it: one TCP
				       * byte stream); NULL when none can (fixed delays, no loss, no
				       * profile, no link changes) */
	struct rng *delay_rng;        /* per worker: its emulated worker's straggler stream
				       * (delay draws in step order), only when some worker's
				       * delay distribution is random or a profile has base_s;
				       * NULL = none */
	struct sim_link_tcp tcp;
	struct rng link_rng;
	int64_t srv_busy_ns, stop_ns;
	uint32_t h;                 /* local steps per push: consistency.local_steps when model
				     * averaging, else 1 */
	uint64_t model_bytes;
	/* step histogram of the live workers, for progress.csv's min/median/max */
	uint32_t *hist;
	size_t hist_len;
	uint32_t live;
	/* staleness histogram (every update's), for the mean and the p99 */
	uint32_t *stale_hist;        /* counts per staleness bucket (stale_bucket: exact below
				      * STALE_EXACT, then 128 per octave; at most ~8,900) */
	size_t stale_len;
	uint64_t stale_n;
	double stale_sum;
	double compute_sum, wait_sum;
	uint64_t bytes_moved, events;
	bool stop_acc;
	struct csv_writer **trace;  /* per worker, NULL above node_files */
	struct csv_writer *progress, *eval;
	struct sim_status st;
};

static void push_ev(struct sim *s, int64_t t, uint32_t who, enum sim_ev kind, uint16_t gen)
{
	sim_status_push(&s->st, s->heap, t, who, (uint16_t)kind, gen);
}

/* --- histograms ---------------------------------------------------------------------------- */

static int grow(void **a, size_t *len, size_t need, size_t elem)
{
	size_t n = *len ? *len : 64;
	void *p;

	while (n <= need)
		n *= 2;
	p = realloc(*a, n * elem);
	if (!p)
		return -ENOMEM;
	memset((char *)p + *len * elem, 0, (n - *len) * elem);
	*a = p;
	*len = n;
	return 0;
}

static void hist_add(struct sim *s, uint32_t step, int d)
{
	if (step >= s->hist_len && grow((void **)&s->hist, &s->hist_len, step, sizeof *s->hist) < 0) {
		sim_status_fail(&s->st, -ENOMEM, "out of memory");
		return;
	}
	s->hist[step] += (uint32_t)d;
}

/* A live worker's clock changes from a to b. */
static void set_step(struct sim *s, struct sim_worker *w, uint32_t b)
{
	if (w->state == W_UP) {
		hist_add(s, w->step, -1);
		hist_add(s, b, 1);
	}
	w->step = b;
}

static void set_state(struct sim *s, struct sim_worker *w, enum sim_state st)
{
	if (w->state == W_UP && st != W_UP) {
		hist_add(s, w->step, -1);
		s->live--;
	} else if (w->state != W_UP && st == W_UP) {
		hist_add(s, w->step, 1);
		s->live++;
	}
	w->state = (uint8_t)st;
}

/* Staleness histogram buckets: one per value below STALE_EXACT (every 200-worker run's p99 is
 * exact), then 2^STALE_SUB_BITS per octave, so the p99 of a 10,000-worker ASP run (staleness
 * up to ~260,000 versions) is within 1/128 of the truth from ~3,000 counters instead of one
 * per value (a megabyte, 100 bytes per worker). */
#define STALE_EXACT 2048u       /* a power of two, 2^STALE_EXACT_BITS */
#define STALE_EXACT_BITS 11
#define STALE_SUB_BITS 7

static size_t stale_bucket(uint64_t v)
{
	int e;

	if (v < STALE_EXACT)
		return (size_t)v;
	e = 63 - __builtin_clzll(v); /* >= STALE_EXACT_BITS */
	return STALE_EXACT + ((size_t)(e - STALE_EXACT_BITS) << STALE_SUB_BITS) +
	       (size_t)((v >> (e - STALE_SUB_BITS)) & ((1u << STALE_SUB_BITS) - 1));
}

/* The smallest staleness in bucket b. */
static uint64_t stale_bucket_low(size_t b)
{
	size_t e, sub;

	if (b < STALE_EXACT)
		return b;
	e = (b - STALE_EXACT) >> STALE_SUB_BITS;
	sub = (b - STALE_EXACT) & ((1u << STALE_SUB_BITS) - 1);
	return (uint64_t)((1u << STALE_SUB_BITS) + sub) << (e + STALE_EXACT_BITS - STALE_SUB_BITS);
}

static void stale_add(struct sim *s, uint64_t v)
{
	size_t b = stale_bucket(v);

	if (b >= s->stale_len && grow((void **)&s->stale_hist, &s->stale_len, b, sizeof *s->stale_hist) < 0) {
		sim_status_fail(&s->st, -ENOMEM, "out of memory");
		return;
	}
	s->stale_hist[b]++;
	s->stale_n++;
	s->stale_sum += (double)v;
}

/* --- time of things ------------------------------------------------------------------------ */

/* The parameters of node i's up (or down) direction now. */
static const struct link_params *lp(const struct sim *s, uint32_t i, bool up)
{
	if (s->up)
		return up ? s->up[i].p : s->down[i].p;
	return up ? plan_node_up(s->run, i) : plan_node_down(s->run, i);
}

static int64_t path_rtt(const struct sim *s, uint32_t a, uint32_t b)
{
	return 2 * ((int64_t)lp(s, a, true)->delay_us + lp(s, b, false)->delay_us) * 1000;
}

/* Which half of a calibrated round trip a message is. The measured round trip of a step is
 * the model reply that starts it plus the push that ends it: both halves of one draw, so a
 * step's transfer time has the measured distribution (two halves of independent draws would
 * have half its variance, and the workers' clocks would drift apart less than emulated ones). */
enum rt_half {
	RT_OWN,   /* a half of a draw of its own (the join) */
	RT_ACK,   /* an ACK: the half of the shortest round trip (below) */
	RT_FIRST, /* a model reply: draws the step's round trip */
	RT_SECOND /* the push that ends the step: the rest of the reply's draw */
};

/* When a message of bytes from plan node a to plan node b about worker w, sent at now, arrives
 * (before the FIFO rule of send_msg). With a calibration profile for w: half a draw of its
 * measured round trip (which draw: half), scaled by the warm-up factor of step k (1-based: the
 * step whose round trip the message is part of, the push and its replies alike; the join's
 * exchange is step 1's), and stretched by the emulated host's load over its flight
 * (host.runq_wait). An ACK takes the half of the profile's shortest round trip: the measured
 * round trip runs from one trace row (an ACK's arrival) to the next, so it already holds the
 * ACK's flight, and the reply and the push that make up a step carry all of it; a row is then
 * a fixed offset after the push's handling, and the rows' intervals have the measured
 * distribution. The shortest half also lets the model reply sent with or after the ACK arrive
 * after it, as on the emulated connection, without delaying it (send_msg's FIFO rule). */
static int64_t flight(struct sim *s, uint32_t a, uint32_t b, uint64_t bytes, int64_t now, uint32_t w,
		      uint32_t k, enum rt_half half)
{
	int64_t rtt, t;
	struct sim_link la, lb;

	if (s->prof_transfer && w < s->n && s->prof_transfer[w]) {
		double u, x;

		if (half == RT_ACK) {
			u = 0;
		} else if (half == RT_SECOND && !isnan(s->prof_u[w])) {
			u = s->prof_u[w];
			s->prof_u[w] = NAN;
		} else {
			if (half == RT_FIRST && s->prof_ac1 != 0) {
				/* successive round trips of a worker: an AR(1) of normals, each
				 * mapped to a uniform (the distribution stays the fitted one) */
				double r = s->prof_ac1;

				s->prof_z[w] = r * s->prof_z[w] + sqrt(1 - r * r) * rng_normal(&s->link_rng);
				u = 0.5 * erfc(-s->prof_z[w] / M_SQRT2);
			} else {
				u = rng_uniform(&s->link_rng);
			}
			s->prof_u[w] = half == RT_FIRST ? u : NAN;
		}
		x = sim_profile_draw(s->prof_transfer[w], u) / 2;

		/* the first step makes two round trips (the join's and the push's) where the
		 * emulated trace's first row holds both: each gets half its factor */
		if (s->prof_warm)
			x *= s->prof_warm[sim_profile_warm_bin(k)] / (k <= 1 ? 2 : 1);
		/* a quiet host's time, stretched by the emulated host's load at the time: a stall
		 * of the emulated host delays every worker's messages at once */
		x = sim_profile_host_wall(s->profile, now / 1e9, x);
		return now + (int64_t)(1e9 * x);
	}
	rtt = path_rtt(s, a, b);
	if (s->up) {
		t = sim_link_send(&s->up[a], &s->tcp, bytes, now, rtt, &s->link_rng, NULL);
		return sim_link_send(&s->down[b], &s->tcp, bytes, t, rtt, &s->link_rng, NULL);
	}
	la = (struct sim_link){ .p = lp(s, a, true) };
	lb = (struct sim_link){ .p = lp(s, b, false) };
	t = sim_link_send(&la, &s->tcp, bytes, now, rtt, &s->link_rng, NULL);
	return sim_link_send(&lb, &s->tcp, bytes, t, rtt, &s->link_rng, NULL);
}

/* A message of bytes from plan node a to plan node b about worker w, sent at now: when it
 * arrives (flight). One connection is one byte stream: a message from the server to worker w
 * arrives no earlier than the one sent before it (an ACK is never behind the model reply sent
 * after it, so the worker's trace rows are in time order). From the worker to the server one
 * message is in flight at a time (the join, or a push sent after the model reply to the last
 * one arrived), so that direction keeps its order by itself. */
static int64_t send_msg(struct sim *s, uint32_t a, uint32_t b, uint64_t bytes, int64_t now, uint32_t w,
			uint32_t k, enum rt_half half)
{
	int64_t t = flight(s, a, b, bytes, now, w, k, half);

	if (s->down_at && a == s->srv && w < s->n) {
		if (t < s->down_at[w])
			t = s->down_at[w];
		s->down_at[w] = t;
	}
	return t;
}

/* Whether a message on a link can arrive before one sent earlier on the same path: a random
 * delay, a loss (a retransmission timeout), or parameters that change during the run. */
static bool links_may_reorder(const struct plan_run *run)
{
	if (run->n_events || run->scenario->network.trace)
		return true;
	for (size_t i = 0; i < run->n_nodes; i++) {
		const struct link_params *p[2] = { plan_node_up(run, i), plan_node_down(run, i) };

		for (int d = 0; d < 2; d++)
			if (p[d]->jitter_us || p[d]->loss_ppm || p[d]->loss_model == LINK_LOSS_GEMODEL)
				return true;
	}
	return false;
}

/* Whether a delay distribution draws random numbers. */
static bool dist_random(const struct scenario_straggler *st)
{
	return (st->set & SCENARIO_STRAG_DELAY) && st->delay_dist != SCENARIO_DIST_NONE &&
	       st->delay_dist != SCENARIO_DIST_CONSTANT;
}

/* Compute time of worker w's step `step` (0-based), ns: step_cost x slowdown + a delay draw.
 * In a run the testbed could run too (fewer workers than its node limit) the delays are the
 * emulated worker's: the next draw of its straggler stream (called once per step, in step
 * order, as the emulated worker draws; a restart starts the stream anew, as a restarted
 * process does). Above it, a draw from a stream keyed by (seed, worker, step), which needs no
 * state per worker. Either way step k of worker i takes the same time under every barrier. */
static int64_t step_ns(struct sim *s, uint32_t w, uint32_t step)
{
	const struct scenario_straggler *st = plan_node_straggler(s->run, s->node_of[w]);
	double t = (double)s->o->step_cost_ns;

	if (s->strag && s->strag[w]) {
		/* a replayed trace: the emulator's own model (stretch to the trace's time,
		 * slowdown, one delay draw from the node's stream) on top of step_cost */
		double c = t / 1e9;

		return (int64_t)(1e9 * (c + straggler_step_extra_s(s->strag[w], step, c)));
	}
	if (s->prof_base && s->prof_base[w]) {
		/* calibrated: the emulated worker's base compute and its own delay draws, the
		 * next of its stream (step_ns is asked once per step, in order) */
		struct rng r;
		double b;

		rng_seed(&r, sim_seed_own(s->run->seed, s->sc->simulation.seed) ^ 0x53494d5354455053ull,
			 ((uint64_t)w << 32) | step);
		b = sim_profile_draw(s->prof_base[w], rng_uniform(&r));
		if ((st->set & SCENARIO_STRAG_DELAY) && st->delay_dist != SCENARIO_DIST_NONE)
			b += straggler_dist_draw((enum straggler_dist)st->delay_dist, st->delay_a, st->delay_b,
						 &s->delay_rng[w]);
		return (int64_t)(1e9 * b);
	}
	if (s->prof_compute && s->prof_compute[w]) {
		struct rng r;

		rng_seed(&r, sim_seed_own(s->run->seed, s->sc->simulation.seed) ^ 0x53494d5354455053ull,
			 ((uint64_t)w << 32) | step);
		return (int64_t)(1e9 * sim_profile_draw(s->prof_compute[w], rng_uniform(&r)));
	}
	if (st->set & SCENARIO_STRAG_SLOWDOWN)
		t *= st->slowdown;
	if ((st->set & SCENARIO_STRAG_DELAY) && st->delay_dist != SCENARIO_DIST_NONE) {
		struct rng r, *use = s->delay_rng ? &s->delay_rng[w] : &r;

		if (!s->delay_rng)
			rng_seed(&r, s->run->seed ^ 0x53494d5354455053ull, ((uint64_t)w << 32) | step);
		t += 1e9 * straggler_dist_draw((enum straggler_dist)st->delay_dist, st->delay_a, st->delay_b, use);
	}
	return t > 0 ? (int64_t)t : 0;
}

/* When a step wanted at t can start: after the pause window t falls in, if any. */
static int64_t after_pause(const struct sim *s, uint32_t w, int64_t t)
{
	const struct scenario_straggler *st = plan_node_straggler(s->run, s->node_of[w]);
	int64_t every, len, ph;

	if (!(st->set & SCENARIO_STRAG_PAUSE) || !st->pause_every_us || !st->pause_for_us)
		return t;
	every = (int64_t)st->pause_every_us * 1000;
	len = (int64_t)st->pause_for_us * 1000;
	if (t < every)
		return t;
	ph = t % every;
	return ph < len ? t - ph + len : t;
}

/* --- outputs ------------------------------------------------------------------------------- */

static void progress_row(struct sim *s, int64_t t)
{
	uint32_t lo = 0, hi = 0, seen = 0, half;
	double median = 0;
	size_t i;

	if (!s->progress)
		return;
	if (s->live) {
		for (i = 0; i < s->hist_len && !s->hist[i]; i++)
			;
		lo = (uint32_t)i;
		for (i = s->hist_len; i > 0 && !s->hist[i - 1]; i--)
			;
		hi = (uint32_t)(i - 1);
		/* median: the mean of the two middle clocks for an even count */
		half = s->live / 2;
		{
			uint32_t a = 0, b = 0;
			bool got_a = false;

			for (i = lo; i <= hi; i++) {
				uint32_t c = s->hist[i];

				if (!got_a && seen + c > (s->live % 2 ? half : half - 1)) {
					a = (uint32_t)i;
					got_a = true;
				}
				if (seen + c > half) {
					b = (uint32_t)i;
					break;
				}
				seen += c;
			}
			median = s->live % 2 ? b : (a + b) / 2.0;
		}
	}
	/* runq_wait_frac and host_cpu_frac: a simulated host has none (empty) */
	if (csv_writer_row(s->progress, "%.3f,%u,%u,%u,%g,%u,,", t / 1e9, s->live,
			   core_ps_waiting(s->core), lo, median, hi) < 0)
		sim_status_fail(&s->st, -EIO, "write progress.csv failed");
}

static void eval_row(struct sim *s, int64_t t)
{
	struct eval_result test, train;
	struct core_ps_stats cs;
	uint64_t samples;
	char nm[SCENARIO_NODE_NAME_MAX];

	if (!s->train)
		return;
	if (sim_train_eval(s->train, &test, &train) < 0) {
		sim_status_fail(&s->st, -ENOMEM, "evaluation failed");
		return;
	}
	core_ps_stats(s->core, &cs);
	samples = sim_train_samples(s->train);
	if (s->eval &&
	    csv_writer_row(s->eval, "%.3f,%s,%lld,%.6f,%llu,%.6f,%.6f,%.6f", t / 1e9,
			   plan_node_name(s->run, s->srv, nm, sizeof nm), (long long)cs.version,
			   (double)samples / (double)sim_train_set_size(s->train), (unsigned long long)samples,
			   test.accuracy, test.loss, train.loss) < 0)
		sim_status_fail(&s->st, -EIO, "write eval.csv failed");
	if (s->sc->stop_accuracy > 0 && test.accuracy >= s->sc->stop_accuracy) {
		s->stop_acc = true;
		s->stop_ns = t;
	}
}

/* --- the server ---------------------------------------------------------------------------- */

/* Worker i completed a step at t (its clock is now `step`): the sums and its trace row.
 * stale < 0: none; pushed: the step ended with the push (bytes of the update, the model and
 * the ACK), else a local step of a model-averaging round. */
static void step_row(struct sim *s, uint32_t i, int64_t t, uint32_t step, int64_t stale, bool pushed)
{
	struct sim_worker *w = &s->w[i];
	uint32_t pnode = s->node_of[i];
	uint64_t tx = pushed ? s->model_bytes : 0, rx = pushed ? s->model_bytes + SIM_SMALL_BYTES : 0;

	set_step(s, w, step);
	s->compute_sum += w->cur_compute;
	s->wait_sum += w->cur_wait;
	w->compute_s += w->cur_compute;
	w->wait_s += w->cur_wait;
	s->bytes_moved += tx + rx;
	if (stale >= 0) {
		stale_add(s, (uint64_t)stale);
		w->stale_sum += (float)stale;
		w->stale_n++;
		if ((uint32_t)stale > w->stale_max)
			w->stale_max = (uint32_t)stale;
	}
	if (s->trace && s->trace[i]) {
		char st[24] = "", nm[SCENARIO_NODE_NAME_MAX];
		const char *name = plan_node_name(s->run, pnode, nm, sizeof nm);

		if (stale >= 0)
			snprintf(st, sizeof st, "%lld", (long long)stale);
		if (csv_writer_row(s->trace[i], "%.6f,%s,%u,%.6f,%.6f,%s,%u,,%llu,%llu,0", t / 1e9,
				   name, w->step, w->cur_compute, w->cur_wait, st, w->version,
				   (unsigned long long)tx, (unsigned long long)rx) < 0)
			sim_status_fail(&s->st, -EIO, "write nodes/%s.csv failed", name);
	}
	w->cur_wait = 0;
}

static void carry_out(struct sim *s, uint32_t from, int64_t now)
{
	size_t na, k;
	const struct core_ps_action *a = core_ps_actions(s->core, &na);
	uint32_t pnode = s->node_of[from];

	for (k = 0; k < na && !s->st.rc; k++) {
		const struct core_ps_action *x = &a[k];
		struct sim_worker *w = x->worker < s->n ? &s->w[x->worker] : NULL;
		double loss = 0;
		int rc = 0;

		switch (x->kind) {
		case CORE_PS_ACK: {
			int64_t t = send_msg(s, s->srv, pnode, SIM_SMALL_BYTES, now, x->worker,
					     w ? w->step / s->h + 1 : 1, RT_ACK);

			if (x->reply || !w)
				break;
			/* the trace row of the step just pushed, when its ACK is back */
			if (t > s->stop_ns || w->state != W_UP)
				break;
			step_row(s, x->worker, t, (uint32_t)(x->step * s->h), x->aux, true);
			if (s->sc->stop_steps && w->step >= s->sc->stop_steps)
				push_ev(s, t, x->worker, EV_LEAVE, w->gen);
			break;
		}
		case CORE_PS_HELLO:
			if (w && w->state == W_UP)
				set_step(s, w, (uint32_t)(x->step * s->h));
			break;
		case CORE_PS_RELEASE:
		case CORE_PS_MODEL: {
			uint32_t to = s->node_of[x->worker];
			/* the reply to the push of the worker's last step (its row is written), or
			 * to its join */
			int64_t t = send_msg(s, s->srv, to, s->model_bytes, now, x->worker,
					     w && w->step >= s->h ? w->step / s->h : 1, RT_FIRST);

			if (!w || w->state != W_UP)
				break;
			w->version = (uint32_t)x->version;
			if (x->kind == CORE_PS_RELEASE && x->reply == CORE_PS_REPLY_MODEL)
				w->cur_wait = (float)(x->aux / 1e9);
			if (s->train)
				rc = sim_train_take(s->train, x->worker);
			push_ev(s, t, x->worker, EV_MODEL, w->gen);
			break;
		}
		case CORE_PS_APPLY:
			if (s->train)
				rc = sim_train_apply(s->train, x->worker, x->x, &loss);
			break;
		case CORE_PS_ROUND_ADD:
			if (s->train)
				rc = sim_train_round_add(s->train, x->worker, x->x, &loss);
			break;
		case CORE_PS_ROUND_CLOSE:
			if (s->train)
				rc = sim_train_round_close(s->train, (double)x->aux);
			break;
		case CORE_PS_FOLD:
			if (s->train)
				rc = -EINVAL; /* refused before the run: averaging trains no real model yet */
			break;
		default:
			break;
		}
		if (rc < 0)
			sim_status_fail(&s->st, rc, "training: %s", strerror(-rc));
	}
}

static void handle(struct sim *s, uint32_t i, int64_t now)
{
	struct sim_worker *w = &s->w[i];
	int rc = 0;

	switch (w->msg) {
	case MSG_JOIN:
		rc = core_ps_on_hello(s->core, i, CORE_PS_JOIN, now);
		break;
	case MSG_PUSH:
		/* the round this push ends (averaging: H local steps; else the step) */
		rc = core_ps_on_push(s->core, i, (int64_t)(w->step / s->h) + 1, w->version,
				     (int64_t)s->sc->train.batch * s->h, now);
		break;
	default:
		return;
	}
	w->msg = MSG_NONE;
	if (rc < 0) {
		sim_status_fail(&s->st, rc, "consistency core refused an event of worker %u", i);
		return;
	}
	carry_out(s, i, now);
}

static void to_server(struct sim *s, uint32_t i, enum sim_msg m, uint64_t bytes, int64_t now)
{
	struct sim_worker *w = &s->w[i];

	w->msg = (uint8_t)m;
	push_ev(s, send_msg(s, s->node_of[i], s->srv, bytes, now, i, w->step / s->h + 1,
			    m == MSG_PUSH ? RT_SECOND : RT_OWN),
		i, EV_ARRIVE, w->gen);
}

static void leave(struct sim *s, uint32_t i, enum core_ps_leave why, int64_t now)
{
	struct sim_worker *w = &s->w[i];

	if (w->state != W_UP)
		return;
	set_state(s, w, why == CORE_PS_LEAVE_BYE ? W_DONE : W_OFF);
	w->gen++;
	w->msg = MSG_NONE;
	if (core_ps_on_leave(s->core, i, why, now) < 0)
		sim_status_fail(&s->st, -EINVAL, "consistency core refused the leave of worker %u", i);
	else
		carry_out(s, i, now);
}

static void start(struct sim *s, uint32_t i, int64_t now)
{
	struct sim_worker *w = &s->w[i];

	if (w->state == W_UP)
		return;
	set_state(s, w, W_UP);
	w->gen++;
	if (s->down_at)
		s->down_at[i] = 0; /* a new connection */
	if (s->delay_rng)
		straggler_stream_seed(&s->delay_rng[i], straggler_seed(s->run->seed, i));
	to_server(s, i, MSG_JOIN, SIM_SMALL_BYTES, now);
}

/* --- the loop ------------------------------------------------------------------------------ */

/* Worker i starts a step at now (after a pause window it falls in). */
static void local_step(struct sim *s, uint32_t i, int64_t now)
{
	struct sim_worker *w = &s->w[i];
	int64_t t0 = after_pause(s, i, now), c = step_ns(s, i, w->step);

	w->cur_compute = (float)(c / 1e9);
	push_ev(s, t0 + c, i, EV_COMPUTE, w->gen);
}

static void dispatch(struct sim *s, const struct sim_event *e)
{
	struct sim_worker *w = e->who < s->n ? &s->w[e->who] : NULL;
	int64_t now = e->t_ns;

	switch ((enum sim_ev)e->kind) {
	case EV_JOIN:
		start(s, e->who, now);
		break;
	case EV_ARRIVE: {
		int64_t done;

		if (w->gen != e->gen || w->state != W_UP)
			break;
		done = (now > s->srv_busy_ns ? now : s->srv_busy_ns) + s->o->server_cost_ns;
		s->srv_busy_ns = done;
		push_ev(s, done, e->who, EV_HANDLE, e->gen);
		break;
	}
	case EV_HANDLE:
		if (w->gen == e->gen && w->state == W_UP)
			handle(s, e->who, now);
		break;
	case EV_MODEL:
		/* the model arrived: a round starts (averaging: its first local step) */
		if (w->gen == e->gen && w->state == W_UP)
			local_step(s, e->who, now);
		break;
	case EV_COMPUTE: {
		bool last;

		if (w->gen != e->gen || w->state != W_UP)
			break;
		last = (w->step + 1) % s->h == 0 || (s->sc->stop_steps && w->step + 1 >= s->sc->stop_steps);
		if (last) {
			to_server(s, e->who, MSG_PUSH, s->model_bytes, now);
			break;
		}
		/* a local step of an averaging round: its row, then the next one at once */
		step_row(s, e->who, now, w->step + 1, -1, false);
		local_step(s, e->who, now);
		break;
	}
	case EV_SAMPLE:
		progress_row(s, now);
		if (now + SIM_SAMPLE_NS <= s->stop_ns)
			push_ev(s, now + SIM_SAMPLE_NS, 0, EV_SAMPLE, 0);
		break;
	case EV_EVAL:
		eval_row(s, now);
		if (!s->stop_acc && now + (int64_t)s->sc->eval_every_us * 1000 <= s->stop_ns)
			push_ev(s, now + (int64_t)s->sc->eval_every_us * 1000, 0, EV_EVAL, 0);
		break;
	case EV_CRASH:
		leave(s, e->who, CORE_PS_LEAVE_CLOSED, now);
		break;
	case EV_RESTART:
		if (w->state != W_OFF)
			break;
		start(s, e->who, now); /* its delay stream starts again, as a new process's */
		break;
	case EV_LEAVE:
		if (e->gen == w->gen || e->gen == UINT16_MAX)
			leave(s, e->who, CORE_PS_LEAVE_BYE, now);
		break;
	case EV_LINK: {
		const struct plan_event *pe = &s->run->events[e->who];

		if (s->cur_up) {
			s->cur_up[pe->node] = pe->up;
			s->cur_down[pe->node] = pe->down;
		} else {
			s->up[pe->node].p = &pe->up;
			s->down[pe->node].p = &pe->down;
		}
		break;
	}
	case EV_TRACE:
		/* a network.trace row: delay, loss and rate of every link, both directions, as
		 * the orchestrator applies it */
		for (size_t i = 0; i < s->run->n_nodes; i++) {
			linktrace_apply(&s->ltrace->rows[e->who], &s->cur_up[i]);
			linktrace_apply(&s->ltrace->rows[e->who], &s->cur_down[i]);
		}
		break;
	}
}

/* --- setup --------------------------------------------------------------------------------- */

size_t sim_model_params(const struct scenario *sc)
{
	struct model_spec spec;
	struct model *m;
	size_t n;

	sim_setup_model_spec(sc, 28, 28, &spec);
	m = model_new(&spec, 1);
	n = m ? model_nparams(m) : 0;
	model_destroy(&m);
	return n;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

int sim_measure_costs(const struct scenario *sc, int64_t *step_ns_out, int64_t *server_ns_out)
{
	struct model_spec spec;
	struct model *m = NULL;
	float *x = NULL, *g = NULL, *p;
	uint8_t *y = NULL;
	size_t np, dim, batch = sc->train.batch ? sc->train.batch : 64;
	int64_t t[7], u[7];
	struct rng r;
	double loss;
	int rc = -ENOMEM;

	sim_setup_model_spec(sc, 28, 28, &spec);
	m = model_new(&spec, 1);
	if (!m)
		goto out;
	np = model_nparams(m);
	dim = model_input_dim(m);
	x = malloc(batch * dim * sizeof *x);
	y = malloc(batch);
	g = malloc(np * sizeof *g);
	if (!x || !y || !g)
		goto out;
	rng_seed(&r, 1, 0);
	for (size_t i = 0; i < batch * dim; i++)
		x[i] = (float)rng_uniform(&r);
	for (size_t i = 0; i < batch; i++)
		y[i] = (uint8_t)rng_below(&r, 10);
	model_gradient(m, x, y, batch, g, &loss); /* warm up */
	p = model_params(m);
	for (int k = 0; k < 7; k++) {
		int64_t t0 = now_ns();

		if (model_gradient(m, x, y, batch, g, &loss) < 0)
			goto out;
		t[k] = now_ns() - t0;
		t0 = now_ns();
		for (size_t i = 0; i < np; i++)
			p[i] -= 1e-9f * g[i];
		u[k] = now_ns() - t0;
	}
	qsort(t, 7, sizeof t[0], cmp_i64);
	qsort(u, 7, sizeof u[0], cmp_i64);
	*step_ns_out = t[3] > 0 ? t[3] : 1;
	*server_ns_out = u[3] > 0 ? u[3] : 1;
	rc = 0;
out:
	free(x);
	free(y);
	free(g);
	model_destroy(&m);
	return rc;
}

static const char *unsupported(const struct plan_run *run)
{
	const struct scenario *sc = run->scenario;

	if (sc->workload != SCENARIO_WORKLOAD_TRAIN)
		return "workload linkcheck is not simulated (expected train)";
	if (sc->topology.kind != SCENARIO_TOPO_PS)
		return "topology fleet is not simulated (parameter-server, p2p, allreduce and centralized "
		       "are)";
	if ((sc->consistency.combine == SCENARIO_COMBINE_AVERAGE || sc->consistency.local_steps > 1) &&
	    sc->simulation.train == SCENARIO_SIM_TRAIN_REAL)
		return "model averaging with simulation.train real is not simulated yet (train none counts "
		       "its steps)";
	if (!sc->stop_time_us && !sc->stop_steps)
		return "a simulation needs stop.time or stop.steps (stop.accuracy alone might never end)";
	return NULL;
}

static int open_outputs(struct sim *s)
{
	char path[4096];
	uint32_t nf = s->sc->simulation.node_files;

	if (!s->o->dir)
		return 0;
	snprintf(path, sizeof path, "%s/progress.csv", s->o->dir);
	if (!(s->progress = csv_writer_open(path, TRACE_HEADER_PROGRESS)))
		return sim_status_fail(&s->st, -EIO, "cannot open %s", path);
	if (s->train) {
		snprintf(path, sizeof path, "%s/eval.csv", s->o->dir);
		if (!(s->eval = csv_writer_open(path, TRACE_HEADER_EVAL)))
			return sim_status_fail(&s->st, -EIO, "cannot open %s", path);
	}
	if (s->n > nf)
		return 0;
	if (!(s->trace = calloc(s->n, sizeof *s->trace)))
		return sim_status_fail(&s->st, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < s->n; i++) {
		char nm[SCENARIO_NODE_NAME_MAX];

		snprintf(path, sizeof path, "%s/nodes/%s.csv", s->o->dir,
			 plan_node_name(s->run, s->node_of[i], nm, sizeof nm));
		if (!(s->trace[i] = csv_writer_open(path, TRACE_HEADER_NODE)))
			return sim_status_fail(&s->st, -EIO, "cannot open %s", path);
	}
	return 0;
}

static int write_workers(struct sim *s)
{
	char path[4096];
	struct csv_writer *f;

	if (!s->o->dir)
		return 0;
	snprintf(path, sizeof path, "%s/workers.csv", s->o->dir);
	if (!(f = csv_writer_open(path, TRACE_HEADER_WORKERS)))
		return sim_status_fail(&s->st, -EIO, "cannot open %s", path);
	for (uint32_t i = 0; i < s->n && !s->st.rc; i++) {
		const struct sim_worker *w = &s->w[i];
		char mean[32] = "", max[16] = "", nm[SCENARIO_NODE_NAME_MAX];

		if (w->stale_n) {
			snprintf(mean, sizeof mean, "%.4f", (double)w->stale_sum / w->stale_n);
			snprintf(max, sizeof max, "%u", w->stale_max);
		}
		if (csv_writer_row(f, "%s,%u,%.4f,%.4f,%s,%s", plan_node_name(s->run, s->node_of[i], nm, sizeof nm), w->step,
				   w->compute_s, w->wait_s, mean, max) < 0)
			sim_status_fail(&s->st, -EIO, "write %s failed", path);
	}
	csv_writer_close(&f);
	return s->st.rc;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static void fill_result(struct sim *s, struct sim_result *res)
{
	uint32_t *v = malloc(s->n * sizeof *v);
	struct core_ps_stats cs;

	memset(res, 0, sizeof *res);
	core_ps_stats(s->core, &cs);
	res->events = s->events;
	res->updates = cs.updates_in;
	res->workers = s->n;
	res->total_steps = 0;
	for (uint32_t i = 0; i < s->n; i++)
		res->total_steps += s->w[i].step;
	res->steps_min = res->steps_median = res->steps_max = NAN;
	if (v) {
		for (uint32_t i = 0; i < s->n; i++)
			v[i] = s->w[i].step;
		qsort(v, s->n, sizeof *v, cmp_u32);
		res->steps_min = v[0];
		res->steps_max = v[s->n - 1];
		res->steps_median = s->n % 2 ? v[s->n / 2] : (v[s->n / 2 - 1] + (double)v[s->n / 2]) / 2;
		free(v);
	}
	res->wait_fraction = s->wait_sum + s->compute_sum > 0 ? s->wait_sum / (s->wait_sum + s->compute_sum) : NAN;
	res->staleness_mean = res->staleness_p99 = NAN;
	if (s->stale_n) {
		uint64_t rank = (uint64_t)ceil(0.99 * (double)s->stale_n), seen = 0;

		res->staleness_mean = s->stale_sum / (double)s->stale_n;
		for (size_t k = 0; k < s->stale_len; k++) {
			seen += s->stale_hist[k];
			if (seen >= rank) {
				res->staleness_p99 = (double)stale_bucket_low(k);
				break;
			}
		}
	}
	res->bytes_moved = s->bytes_moved;
	res->stopped_accuracy = s->stop_acc;
	res->state_bytes = sizeof *s + s->n * (sizeof *s->w + sizeof *s->node_of) +
			   (s->down_at ? s->n * sizeof *s->down_at : 0) +
			   (s->up ? 2 * s->run->n_nodes * sizeof *s->up : 0) + sim_loss_bytes(s->loss) +
			   sim_heap_bytes(s->heap) +
			   s->hist_len * sizeof *s->hist + s->stale_len * sizeof *s->stale_hist;
}

int sim_run(const struct sim_opts *o, struct sim_result *res, char *err, size_t errlen)
{
	const struct plan_run *run = o->run;
	const struct scenario *sc = run->scenario;
	struct sim s = { .o = o, .run = run, .sc = sc, .st = { .err = err, .errlen = errlen } };
	struct core_ps_conf cc;
	bool *late = NULL;
	const char *why;
	struct sim_event e;
	size_t np;
	uint32_t k;

	size_t held0;

	{
		struct mallinfo2 mi = mallinfo2();

		held0 = mi.uordblks + mi.hblkhd;
	}
	if (errlen)
		err[0] = '\0';
	/* the topologies without a server have drivers of their own */
	if (sc->workload == SCENARIO_WORKLOAD_TRAIN &&
	    (sc->stop_time_us || sc->stop_steps ||
	     (sc->topology.kind == SCENARIO_TOPO_CENTRALIZED && sc->train.epochs))) {
		if (sc->topology.kind == SCENARIO_TOPO_P2P)
			return sim_p2p_run(o, res, err, errlen);
		if (sc->topology.kind == SCENARIO_TOPO_ALLREDUCE || sc->topology.kind == SCENARIO_TOPO_CENTRALIZED)
			return sim_ring_run(o, res, err, errlen);
	}
	if ((why = unsupported(run))) {
		snprintf(err, errlen, "%s", why);
		return -EINVAL;
	}
	np = sim_model_params(sc);
	if (!np) {
		snprintf(err, errlen, "cannot build the model");
		return -EINVAL;
	}
	s.model_bytes = np * sizeof(float) + WIRE_HEADER_BYTES;
	s.tcp = (struct sim_link_tcp){ .rto_min_ns = (int64_t)sc->simulation.rto_min_us * 1000,
				       .mss = sc->simulation.mss,
				       .fast_recovery = sc->simulation.loss_recovery == SCENARIO_SIM_RECOVERY_FAST };
	s.stop_ns = sc->stop_time_us ? (int64_t)sc->stop_time_us * 1000 : INT64_MAX / 4;
	rng_seed(&s.link_rng, sim_seed_own(run->seed, sc->simulation.seed), 0x4c494e4bull);
	s.n = 0;
	s.srv = UINT32_MAX;
	for (size_t i = 0; i < run->n_nodes; i++) {
		if (plan_node_role(run, i) == SCENARIO_ROLE_WORKER)
			s.n++;
		else if (plan_node_role(run, i) == SCENARIO_ROLE_SERVER && s.srv == UINT32_MAX)
			s.srv = (uint32_t)i;
	}
	if (!s.n || s.srv == UINT32_MAX) {
		snprintf(err, errlen, "a parameter-server run needs a server and workers");
		return -EINVAL;
	}
	s.node_of = calloc(s.n, sizeof *s.node_of);
	s.w = calloc(s.n, sizeof *s.w);
	{
		bool links = run->n_events || sc->network.trace;

		for (size_t i = 0; i < run->n_nodes && !links; i++)
			links = plan_node_up(run, i)->rate_bps || plan_node_down(run, i)->rate_bps;
		if (links) {
			s.up = calloc(run->n_nodes, sizeof *s.up);
			s.down = calloc(run->n_nodes, sizeof *s.down);
			if (!s.up || !s.down) {
				sim_status_fail(&s.st, -ENOMEM, "out of memory");
				goto out;
			}
		}
	}
	late = calloc(s.n, sizeof *late);
	/* a worker has one event pending at a time (its churn aside): n + a few, grown if not */
	s.heap = sim_heap_new((size_t)s.n + 64);
	if (!s.node_of || !s.w || !late || !s.heap) {
		sim_status_fail(&s.st, -ENOMEM, "out of memory");
		goto out;
	}
	if (sc->network.trace) {
		s.ltrace = linktrace_load(sc->network.trace, err, errlen);
		s.cur_up = calloc(run->n_nodes, sizeof *s.cur_up);
		s.cur_down = calloc(run->n_nodes, sizeof *s.cur_down);
		if (!s.ltrace || !s.cur_up || !s.cur_down) {
			s.st.rc = s.ltrace ? -ENOMEM : -EINVAL;
			goto out;
		}
	}
	/* a timeline or trace that changes a loss: each retransmission under the loss then */
	if (s.up && sim_loss_new(run, s.ltrace, &s.loss) < 0) {
		sim_status_fail(&s.st, -ENOMEM, "out of memory");
		goto out;
	}
	k = 0;
	for (size_t i = 0; i < run->n_nodes; i++) {
		if (s.up) {
			s.up[i].p = plan_node_up(run, i);
			s.down[i].p = plan_node_down(run, i);
			s.up[i].sched = sim_loss_up(s.loss, i);
			s.down[i].sched = sim_loss_down(s.loss, i);
		}
		if (s.cur_up) {
			s.cur_up[i] = *plan_node_up(run, i);
			s.cur_down[i] = *plan_node_down(run, i);
			s.up[i].p = &s.cur_up[i];
			s.down[i].p = &s.cur_down[i];
		}
		if (plan_node_role(run, i) == SCENARIO_ROLE_WORKER) {
			s.node_of[k] = (uint32_t)i;
			late[k] = (plan_node_straggler(run, i)->set & SCENARIO_STRAG_JOIN) != 0;
			k++;
		}
	}
	s.h = sc->consistency.combine == SCENARIO_COMBINE_AVERAGE || sc->consistency.local_steps > 1
		       ? (sc->consistency.local_steps ? sc->consistency.local_steps : 1) : 1;
	cc = (struct core_ps_conf){
		.n = s.n,
		.average = s.h > 1 || sc->consistency.combine == SCENARIO_COMBINE_AVERAGE,
		.bp = { .kind = (enum barrier_kind)sc->consistency.barrier, .staleness = sc->consistency.staleness,
			.sample = sc->consistency.sample, .backup = sc->consistency.backup },
		.draw = sc->consistency.draw == SCENARIO_DRAW_CROSSING ? BARRIER_DRAW_CROSSING : BARRIER_DRAW_CHECK,
		.weighting = (enum core_ps_weighting)sc->consistency.weighting,
		.seed = run->seed, .late = late,
	};
	s.core = core_ps_new(&cc);
	if (!s.core) {
		sim_status_fail(&s.st, -EINVAL, "consistency core: bad configuration");
		goto out;
	}
	for (uint32_t i = 0; i < s.n; i++) {
		const struct scenario_straggler *st = plan_node_straggler(run, s.node_of[i]);
		struct straggler_params sp;
		char nm[SCENARIO_NODE_NAME_MAX];

		if (!(st->set & SCENARIO_STRAG_TRACE) || !st->trace)
			continue;
		if (!s.strag && !(s.strag = calloc(s.n, sizeof *s.strag))) {
			sim_status_fail(&s.st, -ENOMEM, "out of memory");
			goto out;
		}
		sp = (struct straggler_params){ .slowdown = (st->set & SCENARIO_STRAG_SLOWDOWN) ? st->slowdown : 1.0,
						.dist = (st->set & SCENARIO_STRAG_DELAY) ? (enum straggler_dist)st->delay_dist
											   : STRAGGLER_NONE,
						.a = st->delay_a, .b = st->delay_b, .trace = st->trace };
		/* seeded as the emulated worker seeds its model (node/engine_common) */
		s.strag[i] = straggler_new(&sp, straggler_seed(run->seed, i));
		if (!s.strag[i]) {
			sim_status_fail(&s.st, -EINVAL, "%s: stragglers compute.trace %s cannot be read", plan_node_name(run, s.node_of[i], nm, sizeof nm),
			     st->trace);
			goto out;
		}
	}
	/* the emulated workers' delay streams (32 bytes per worker) where an emulated run could
	 * exist; above the testbed's node limit a stream keyed by (seed, worker, step), no state */
	for (uint32_t i = 0; i < s.n && s.n < SCENARIO_MAX_NODES && !s.delay_rng; i++)
		if (dist_random(plan_node_straggler(run, s.node_of[i])) &&
		    !(s.delay_rng = calloc(s.n, sizeof *s.delay_rng))) {
			sim_status_fail(&s.st, -ENOMEM, "out of memory");
			goto out;
		}
	if (sc->simulation.profile) {
		s.profile = sim_profile_load(sc->simulation.profile, err, errlen);
		s.prof_compute = calloc(s.n, sizeof *s.prof_compute);
		s.prof_transfer = calloc(s.n, sizeof *s.prof_transfer);
		s.prof_u = malloc(s.n * sizeof *s.prof_u);
		s.prof_z = calloc(s.n, sizeof *s.prof_z);
		if (!s.profile || !s.prof_compute || !s.prof_transfer || !s.prof_u || !s.prof_z) {
			s.st.rc = -EINVAL;
			goto out;
		}
		for (uint32_t i = 0; i < s.n; i++)
			s.prof_u[i] = NAN;
		for (uint32_t i = 0; i < s.n; i++) {
			char nm[SCENARIO_NODE_NAME_MAX];
			const char *name = plan_node_name(run, s.node_of[i], nm, sizeof nm);

			s.prof_compute[i] = sim_profile_compute(s.profile, name);
			s.prof_transfer[i] = sim_profile_transfer(s.profile, name);
			if (!sim_profile_base(s.profile, name))
				continue;
			/* the base plus the emulated worker's own delay draws (seeded in start) */
			if ((!s.prof_base && !(s.prof_base = calloc(s.n, sizeof *s.prof_base))) ||
			    (!s.delay_rng && !(s.delay_rng = calloc(s.n, sizeof *s.delay_rng)))) {
				sim_status_fail(&s.st, -ENOMEM, "out of memory");
				goto out;
			}
			s.prof_base[i] = sim_profile_base(s.profile, name);
		}
		s.prof_warm = sim_profile_warmup(s.profile);
		s.prof_ac1 = sim_profile_transfer_ac1(s.profile);
	}
	if ((s.prof_transfer || links_may_reorder(run)) && !(s.down_at = calloc(s.n, sizeof *s.down_at))) {
		sim_status_fail(&s.st, -ENOMEM, "out of memory");
		goto out;
	}
	if (sc->simulation.train == SCENARIO_SIM_TRAIN_REAL) {
		const char **names = calloc(s.n, sizeof *names);
		char (*nm)[SCENARIO_NODE_NAME_MAX] = calloc(s.n, sizeof *nm);

		for (uint32_t i = 0; names && nm && i < s.n; i++)
			names[i] = plan_node_name(run, s.node_of[i], nm[i], sizeof nm[i]);
		s.train = names && nm ? sim_train_new(sc, s.n, run->seed, o->dir, names, err, errlen) : NULL;
		free(names);
		free(nm);
		if (!s.train) {
			s.st.rc = -EINVAL;
			goto out;
		}
	}
	if (open_outputs(&s) < 0)
		goto out;

	/* t = 0: every worker not joining late joins; churn and link changes as planned */
	for (uint32_t i = 0; i < s.n; i++) {
		const struct scenario_straggler *st = plan_node_straggler(run, s.node_of[i]);

		if (st->set & SCENARIO_STRAG_JOIN)
			push_ev(&s, (int64_t)st->join_at_us * 1000, i, EV_JOIN, 0);
		else
			push_ev(&s, 0, i, EV_JOIN, 0);
		if (st->set & SCENARIO_STRAG_CRASH) {
			push_ev(&s, (int64_t)st->crash_at_us * 1000, i, EV_CRASH, 0);
			if (st->set & SCENARIO_STRAG_RESTART)
				push_ev(&s, (int64_t)st->restart_at_us * 1000, i, EV_RESTART, 0);
		}
		if (st->set & SCENARIO_STRAG_LEAVE)
			push_ev(&s, (int64_t)st->leave_at_us * 1000, i, EV_LEAVE, UINT16_MAX);
	}
	for (size_t i = 0; i < run->n_events; i++)
		push_ev(&s, (int64_t)run->events[i].at_us * 1000, (uint32_t)i, EV_LINK, 0);
	for (size_t i = 0; s.ltrace && i < s.ltrace->n; i++)
		push_ev(&s, (int64_t)s.ltrace->rows[i].at_us * 1000, (uint32_t)i, EV_TRACE, 0);
	push_ev(&s, 0, 0, EV_SAMPLE, 0);
	if (s.train)
		push_ev(&s, 0, 0, EV_EVAL, 0);
	/* A pBSP/pSSP (or SSP) crossing releases in the order the core says; EV_SAMPLE and
	 * EV_EVAL at equal times come after the workers' events pushed before them. */
	while (!s.st.rc && sim_heap_pop(s.heap, &e) == 1) {
		if (e.t_ns > s.stop_ns)
			break;
		s.events++;
		dispatch(&s, &e);
		if (s.stop_acc)
			break;
	}
	if (!s.st.rc)
		write_workers(&s);
	if (!s.st.rc) {
		struct mallinfo2 mi = mallinfo2();

		fill_result(&s, res);
		res->sim_end_s = (s.stop_ns < INT64_MAX / 4 ? s.stop_ns : e.t_ns) / 1e9;
		/* everything the simulation holds at its end (it only grows): the core, workers,
		 * links, the event heap, histograms, output buffers and, when real, training */
		res->held_bytes = mi.uordblks + mi.hblkhd > held0 ? mi.uordblks + mi.hblkhd - held0 : 0;
	}
out:
	if (s.trace)
		for (uint32_t i = 0; i < s.n; i++)
			csv_writer_close(&s.trace[i]);
	free(s.trace);
	csv_writer_close(&s.progress);
	csv_writer_close(&s.eval);
	sim_train_destroy(&s.train);
	sim_profile_destroy(&s.profile);
	for (uint32_t i = 0; s.strag && i < s.n; i++)
		straggler_destroy(&s.strag[i]);
	free(s.strag);
	free(s.prof_base);
	free(s.prof_compute);
	free(s.prof_transfer);
	free(s.prof_u);
	free(s.prof_z);
	free(s.down_at);
	free(s.delay_rng);
	core_ps_destroy(&s.core);
	sim_heap_destroy(&s.heap);
	free(s.node_of);
	free(s.w);
	free(s.up);
	sim_loss_destroy(&s.loss);
	free(s.down);
	free(s.cur_up);
	free(s.cur_down);
	linktrace_destroy(&s.ltrace);
	free(late);
	free(s.hist);
	free(s.stale_hist);
	return s.st.rc;
}
