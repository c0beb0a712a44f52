/* sim/sim_net: see sim_net.h. */
#include "sim/sim_net.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "node/rng.h"
#include "orchestrator/linktrace.h"
#include "sim/sim_link.h"
#include "sim/sim_loss.h"
#include "sim/sim_seed.h"

struct sim_net {
	const struct plan_run *run;
	struct link_params *cur_up, *cur_down; /* per plan node: the parameters now */
	struct sim_link *up, *down;
	struct linktrace *trace;               /* network.trace, NULL = none */
	struct sim_loss *loss;                 /* the directions' loss schedules, NULL = none */
	struct sim_link_tcp tcp;
	struct rng rng;
};

/* Handshakes: Linux's first SYN timeout (TCP_TIMEOUT_INIT), doubled for each of tcp_syn_retries
 * retries; then connect() fails and ZeroMQ connects again after its reconnect interval. */
#define SIM_NET_SYN_RTO_NS 1000000000ll
#define SIM_NET_SYN_RETRIES 6
#define SIM_NET_RECONNECT_NS 100000000ll /* ZMQ_RECONNECT_IVL's default */

void sim_net_destroy(struct sim_net **p)
{
	struct sim_net *net;

	if (!p || !*p)
		return;
	net = *p;
	sim_loss_destroy(&net->loss);
	free(net->cur_up);
	free(net->cur_down);
	free(net->up);
	free(net->down);
	linktrace_destroy(&net->trace);
	free(net);
	*p = NULL;
}

struct sim_net *sim_net_new(const struct plan_run *run, char *err, size_t errlen)
{
	const struct scenario *sc = run->scenario;
	struct sim_net *net = calloc(1, sizeof *net);
	size_t n = run->n_nodes;

	if (!net)
		goto nomem;
	net->run = run;
	net->tcp = (struct sim_link_tcp){ .rto_min_ns = (int64_t)sc->simulation.rto_min_us * 1000,
					  .mss = sc->simulation.mss,
					  .fast_recovery = sc->simulation.loss_recovery == SCENARIO_SIM_RECOVERY_FAST };
	/* the stream sim/sim uses for its links, so one seed means one link history */
	rng_seed(&net->rng, sim_seed_own(run->seed, sc->simulation.seed), 0x4c494e4bull);
	net->cur_up = calloc(n, sizeof *net->cur_up);
	net->cur_down = calloc(n, sizeof *net->cur_down);
	net->up = calloc(n, sizeof *net->up);
	net->down = calloc(n, sizeof *net->down);
	if (!net->cur_up || !net->cur_down || !net->up || !net->down)
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		net->cur_up[i] = run->nodes[i].up;
		net->cur_down[i] = run->nodes[i].down;
		net->up[i].p = &net->cur_up[i];
		net->down[i].p = &net->cur_down[i];
	}
	if (sc->network.trace && !(net->trace = linktrace_load(sc->network.trace, err, errlen))) {
		sim_net_destroy(&net);
		return NULL;
	}
	if (sim_loss_new(run, net->trace, &net->loss) < 0)
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		net->up[i].sched = sim_loss_up(net->loss, i);
		net->down[i].sched = sim_loss_down(net->loss, i);
	}
	return net;
nomem:
	snprintf(err, errlen, "out of memory");
	sim_net_destroy(&net);
	return NULL;
}

size_t sim_net_changes(const struct sim_net *net)
{
	return net->run->n_events + (net->trace ? net->trace->n : 0);
}

int64_t sim_net_change_at(const struct sim_net *net, size_t i)
{
	if (i < net->run->n_events)
		return (int64_t)net->run->events[i].at_us * 1000;
	return (int64_t)net->trace->rows[i - net->run->n_events].at_us * 1000;
}

void sim_net_apply(struct sim_net *net, size_t i)
{
	if (i < net->run->n_events) {
		const struct plan_event *pe = &net->run->events[i];

		net->cur_up[pe->node] = pe->up;
		net->cur_down[pe->node] = pe->down;
		return;
	}
	/* a network.trace row: every link, both directions, as the orchestrator applies it */
	for (size_t k = 0; k < net->run->n_nodes; k++) {
		linktrace_apply(&net->trace->rows[i - net->run->n_events], &net->cur_up[k]);
		linktrace_apply(&net->trace->rows[i - net->run->n_events], &net->cur_down[k]);
	}
}

int64_t sim_net_send(struct sim_net *net, uint32_t a, uint32_t b, uint64_t bytes, int64_t now_ns,
		     int64_t *fifo, int64_t *last_send)
{
	int64_t rtt = 2 * ((int64_t)net->cur_up[a].delay_us + net->cur_down[b].delay_us) * 1000;
	int64_t t = sim_link_send(&net->up[a], &net->tcp, bytes, now_ns, rtt, &net->rng, NULL);

	t = sim_link_send(&net->down[b], &net->tcp, bytes, t, rtt, &net->rng, NULL);
	if (last_send) {
		/* the RTO the sender's idle time is measured against: as sim/sim_link bounds it */
		int64_t j = 4000 * (int64_t)(net->cur_up[a].jitter_us > net->cur_down[b].jitter_us
						     ? net->cur_up[a].jitter_us : net->cur_down[b].jitter_us);
		int64_t rto = rtt + (net->tcp.rto_min_ns > j ? net->tcp.rto_min_ns : j);

		if (*last_send == INT64_MIN || now_ns - *last_send > rto)
			t += (int64_t)sim_link_slow_start_rounds(&net->tcp, bytes) * rtt;
		*last_send = now_ns;
	}
	if (fifo) {
		if (t < *fifo)
			t = *fifo;
		*fifo = t;
	}
	return t;
}

int64_t sim_net_delay_ns(const struct sim_net *net, uint32_t a, uint32_t b)
{
	return ((int64_t)net->cur_up[a].delay_us + net->cur_down[b].delay_us) * 1000;
}

/* The last change of a direction's loss (INT64_MIN: none). */
static int64_t last_change(const struct sim_link *l)
{
	return l->sched && l->sched->n ? l->sched->at_ns[l->sched->n - 1] : INT64_MIN;
}

/* Whether a handshake begun at t gets through: the SYN over a's up and b's down, the SYN-ACK
 * back, each under the loss in force (no draw when none is lossy, or one drops everything).
 * *never: it fails, and so will every later one (the loss drops everything and changes no
 * more). */
static bool handshake_passes(struct sim_net *net, uint32_t a, uint32_t b, int64_t t, bool *never)
{
	const struct sim_link *d[4] = { &net->up[a], &net->down[b], &net->up[b], &net->down[a] };
	double q = 1;
	int64_t last = INT64_MIN;

	for (int k = 0; k < 4; k++) {
		q *= 1 - sim_link_loss_at(d[k], t);
		if (last_change(d[k]) > last)
			last = last_change(d[k]);
	}
	*never = q <= 0 && t >= last;
	if (q >= 1)
		return true;
	if (q <= 0)
		return false;
	return rng_uniform(&net->rng) < q;
}

int64_t sim_net_connect(struct sim_net *net, uint32_t a, uint32_t b, int64_t now_ns, int64_t limit_ns)
{
	int64_t t = now_ns;

	for (;;) {
		int64_t at = t, rto = SIM_NET_SYN_RTO_NS;

		for (int k = 0; k <= SIM_NET_SYN_RETRIES; k++) {
			bool never;

			if (at > limit_ns)
				return INT64_MAX;
			if (handshake_passes(net, a, b, at, &never))
				return at + 2 * sim_net_delay_ns(net, a, b);
			if (never)
				return INT64_MAX;
			at += rto;
			rto *= 2;
		}
		/* connect() timed out (127 s): ZeroMQ connects again */
		t = at + SIM_NET_RECONNECT_NS;
	}
}

size_t sim_net_bytes(const struct sim_net *net)
{
	return sizeof *net + net->run->n_nodes * 2 * (sizeof *net->cur_up + sizeof *net->up) +
	       sim_loss_bytes(net->loss);
}
