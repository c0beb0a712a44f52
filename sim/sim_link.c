/* sim/sim_link: see sim_link.h. Lost segments are found by geometric skipping (the gap to the
 * next loss is floor(log U / log(1 - p))), so a message costs O(losses), not O(segments). One
 * walk serves constant loss and a schedule: with a constant p it draws exactly what it drew
 * before schedules existed (runs without loss changes are byte-identical). */
#include "sim/sim_link.h"

#include <math.h>
#include <stddef.h>

#include "netem/netem_model.h"
#include "node/rng.h"

#define SIM_LINK_RTO_MAX_NS 120000000000ll /* TCP_RTO_MAX */
#define SIM_LINK_MAX_RETRIES 15            /* tcp_retries2: the connection would die after it */
#define SIM_LINK_WINDOW 10                 /* segments in flight: Linux's initial window (IW10) */
#define SIM_LINK_DELACK_NS 200000000ll     /* TCP_DELACK_MAX: a lone segment's probe waits for it */

double sim_link_loss_prob(const struct link_params *p)
{
	if (!p)
		return 0;
	if (p->loss_model == LINK_LOSS_GEMODEL)
		return netem_model_ge_loss_rate(p->ge_p_ppm, p->ge_r_ppm, p->ge_1h_ppm, p->ge_1k_ppm);
	return p->loss_ppm / 1e6;
}

uint32_t sim_link_slow_start_rounds(const struct sim_link_tcp *tcp, uint64_t bytes)
{
	uint32_t mss = tcp->mss ? tcp->mss : 1448, rounds = 0;
	uint64_t k = (bytes + mss - 1) / mss, sent = SIM_LINK_WINDOW, w = SIM_LINK_WINDOW;

	while (sent < k) {
		w *= 2;
		sent += w;
		rounds++;
	}
	return rounds;
}

/* Segments passed before the next loss: geometric with success probability p (0 < p <= 1). */
static uint64_t gap(double p, struct rng *r)
{
	double u, g;

	if (p >= 1)
		return 0; /* a blackout: the next segment is lost */
	u = 1.0 - rng_uniform(r); /* (0, 1] */
	g = floor(log(u) / log1p(-p));
	return g > 1e18 ? (uint64_t)1e18 : (uint64_t)g;
}

/* The next timeout after rto: doubled, at most TCP_RTO_MAX. */
static int64_t backoff(int64_t rto)
{
	return rto * 2 > SIM_LINK_RTO_MAX_NS ? SIM_LINK_RTO_MAX_NS : rto * 2;
}

/* The loss a message meets: constant p (clamped below 1, as the model always had it), or a
 * direction's schedule, read at the time of each (re)transmission. */
struct lossy {
	double p;
	const struct sim_link_sched *s;
};

static double sched_at(const struct sim_link_sched *s, int64_t t)
{
	size_t lo = 0, hi = s->n;

	if (!s->n || t < s->at_ns[0])
		return s->base;
	while (hi - lo > 1) { /* the last change at or before t */
		size_t mid = lo + (hi - lo) / 2;

		if (s->at_ns[mid] <= t)
			lo = mid;
		else
			hi = mid;
	}
	return s->p[lo];
}

static double loss_at(const struct lossy *x, int64_t t)
{
	return x->s ? sched_at(x->s, t) : x->p;
}

/* What the loss of segment i of segments, first sent at t_ns, costs (the retransmissions' fate
 * drawn from r under the loss in force at each one's time). */
typedef int64_t (*loss_cost_fn)(const struct lossy *x, uint64_t i, uint32_t segments, int64_t rto_ns,
				int64_t rtt_ns, struct rng *r, int64_t t_ns);

/* Walk the lost segments of a message sent at t_ns and add up what each costs; the next loss is
 * drawn under the loss in force once the previous one is recovered (constant: the same draws
 * as one walk under p). */
static int64_t walk_losses(const struct lossy *x, uint32_t segments, int64_t rto_ns, int64_t rtt_ns,
			   struct rng *r, int64_t t_ns, uint32_t *lost, loss_cost_fn cost_of)
{
	int64_t cost = 0;
	uint32_t nlost = 0;
	double p = loss_at(x, t_ns);
	uint64_t i;

	if (!(p > 0) || segments == 0) {
		if (lost)
			*lost = 0;
		return 0;
	}
	for (i = gap(p, r); i < segments;) {
		nlost++;
		cost += cost_of(x, i, segments, rto_ns, rtt_ns, r, t_ns + cost);
		p = loss_at(x, t_ns + cost);
		if (!(p > 0))
			break;
		i += 1 + gap(p, r);
	}
	if (lost)
		*lost = nlost;
	return cost;
}

/* Timeout recovery: the first timeout, one more (doubled) for every retransmission lost again,
 * then slow start for what was not yet in flight. */
static int64_t rto_loss(const struct lossy *x, uint64_t i, uint32_t segments, int64_t rto_ns, int64_t rtt_ns,
			struct rng *r, int64_t t_ns)
{
	int64_t cost = 0, rto = rto_ns;
	uint32_t rest = segments - 1 - (uint32_t)i, rounds = 0;

	for (int k = 0; k < SIM_LINK_MAX_RETRIES; k++) {
		cost += rto;
		rto = backoff(rto);
		if (rng_uniform(r) >= loss_at(x, t_ns + cost))
			break;
	}
	/* window collapse: the segments that were already in flight when the loss happened
	 * (a window of SIM_LINK_WINDOW after it) arrived and wait in the receiver's buffer;
	 * the rest of the message goes in slow start from one segment, the window doubling
	 * each round trip: r segments take ceil(log2(r + 1)) of them */
	rest = rest > SIM_LINK_WINDOW ? rest - SIM_LINK_WINDOW : 0;
	while (rounds < 32 && ((1ull << rounds) - 1) < (uint64_t)rest)
		rounds++;
	return cost + (int64_t)rounds * rtt_ns;
}

/* SACK/RACK recovery and tail loss probes; timeouts only when a retransmission is lost again. */
static int64_t fast_loss(const struct lossy *x, uint64_t i, uint32_t segments, int64_t rto_ns, int64_t rtt_ns,
			 struct rng *r, int64_t t_ns)
{
	int64_t cost, rto = rto_ns;

	if (i + 1 < segments)
		cost = rtt_ns + rtt_ns / 4;              /* RACK: a later segment was SACKed */
	else if (segments > 1)
		cost = 2 * rtt_ns;                       /* tail loss probe */
	else
		cost = rtt_ns + rtt_ns / 2 + SIM_LINK_DELACK_NS; /* probe of a lone segment */
	/* the retransmission lost again: timeouts, doubled each time */
	for (int k = 0; k < SIM_LINK_MAX_RETRIES && rng_uniform(r) < loss_at(x, t_ns + cost); k++) {
		cost += rto;
		rto = backoff(rto);
	}
	return cost;
}

static double clamp(double p)
{
	return p > 0.999999 ? 0.999999 : p;
}

int64_t sim_link_loss_ns(double p, uint32_t segments, int64_t rto_ns, int64_t rtt_ns, struct rng *r,
			 uint32_t *lost)
{
	struct lossy x = { .p = clamp(p) };

	return walk_losses(&x, segments, rto_ns, rtt_ns, r, 0, lost, rto_loss);
}

int64_t sim_link_loss_fast_ns(double p, uint32_t segments, int64_t rto_ns, int64_t rtt_ns, struct rng *r,
			      uint32_t *lost)
{
	struct lossy x = { .p = clamp(p) };

	return walk_losses(&x, segments, rto_ns, rtt_ns, r, 0, lost, fast_loss);
}

double sim_link_loss_at(const struct sim_link *l, int64_t t_ns)
{
	double p = l->sched ? sched_at(l->sched, t_ns) : sim_link_loss_prob(l->p);

	return p < 0 ? 0 : p > 1 ? 1 : p;
}

int64_t sim_link_send(struct sim_link *l, const struct sim_link_tcp *tcp, uint64_t bytes, int64_t now_ns,
		      int64_t rtt_ns, struct rng *r, struct sim_link_cost *cost)
{
	const struct link_params *p = l->p;
	uint32_t mss = tcp->mss ? tcp->mss : 1448, k = (uint32_t)((bytes + mss - 1) / mss), lost = 0;
	int64_t start = now_ns > l->busy_ns ? now_ns : l->busy_ns, serial = 0, prop = 0, loss = 0;
	int64_t jitter = p ? (int64_t)p->jitter_us * 1000 : 0, rto;
	struct lossy x;

	if (k == 0)
		k = 1;
	if (p && p->rate_bps)
		serial = (int64_t)((double)bytes * 8e9 / (double)p->rate_bps);
	l->busy_ns = start + serial;
	if (p) {
		prop = (int64_t)p->delay_us * 1000;
		if (jitter > 0) {
			double z;

			if (p->dist == LINK_DIST_NONE || p->dist == LINK_DIST_UNIFORM)
				z = 2.0 * pow(rng_uniform(r), 1.0 / k) - 1.0; /* max of k uniforms on [-1, 1] */
			else
				z = rng_normal(r);
			prop += (int64_t)(z * (double)jitter);
			if (prop < 0)
				prop = 0;
		}
		rto = rtt_ns + (tcp->rto_min_ns > 4 * jitter ? tcp->rto_min_ns : 4 * jitter);
		/* the segments go out from start, each retransmission at its time on the backoff
		 * schedule: under a schedule, the loss in force then */
		x = (struct lossy){ .p = clamp(sim_link_loss_prob(p)), .s = l->sched };
		loss = walk_losses(&x, k, rto, rtt_ns, r, start, &lost,
				   tcp->fast_recovery ? fast_loss : rto_loss);
	}
	if (cost)
		*cost = (struct sim_link_cost){ .queue_ns = start - now_ns, .serial_ns = serial, .prop_ns = prop,
						.loss_ns = loss, .segments = k, .lost = lost };
	return start + serial + prop + loss;
}
