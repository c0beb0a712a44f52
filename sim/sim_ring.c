/* sim/sim_ring: see sim_ring.h.
 *
 * Node i at step s, phase p (0 <= p < 2(N-1)) sends chunk c(i, p) to node i+1 and waits for
 * the chunk of (s, p) from node i-1; arrivals from i-1 are counted (one connection delivers in
 * order, sim/sim_net keeps it so), so the wait for (s, p) is over once s(2N-2)+p+1 chunks have
 * arrived. The chunk indices are the engine's: reduce-scatter phase k sends chunk (i - k) mod
 * N, all-gather phase k sends (i + 1 - k) mod N; its size is the engine's chunk of the model's
 * P floats. Events: COMPUTE (the gradient is done: phase 0 goes out), CHUNK (a chunk arrives at
 * who), SAMPLE, NET. */
#include "sim/sim_ring.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/csv.h"
#include "collectors/schema.h"
#include "node/data.h"
#include "node/wire.h"
#include "sim/sim_heap.h"
#include "sim/sim_net.h"
#include "sim/sim_node.h"
#include "sim/sim_profile.h"
#include "sim/sim_record.h"
#include "sim/sim_replicas.h"
#include "sim/sim_status.h"

#define SIM_RING_SAMPLE_NS 100000000ll

enum ring_ev { EV_COMPUTE = 1, EV_CHUNK, EV_SAMPLE, EV_NET, EV_EVAL };

struct rnode {
	uint64_t arrived;   /* chunks arrived from the previous node */
	int64_t fifo;       /* arrival of the last chunk sent to the next node */
	int64_t last_send;  /* when it last sent to the next node (INT64_MIN: never) */
	int64_t t0, t1;     /* the step's compute start and ring start */
	uint64_t tx, rx;
	uint32_t step;      /* steps completed */
	uint32_t phase;     /* the phase whose chunk it waits for */
	bool ringing;       /* in the ring (waiting for a chunk) */
	bool done;
};

struct ring {
	const struct plan_run *run;
	const struct scenario *sc;
	uint32_t n;
	uint32_t *node_of;
	struct rnode *r;
	size_t nparams;
	struct sim_heap *heap;
	struct sim_net *net;
	struct sim_node *node;
	struct sim_profile *profile;
	struct sim_record *rec;
	struct sim_replicas *rep;  /* allreduce with train real, else NULL */
	struct csv_writer *eval;
	bool stop_acc;
	uint64_t events, updates;
	int64_t stop_ns;
	uint32_t last_step;  /* the 0-based step some node voted the last (UINT32_MAX: none yet) */
	int64_t end_ns;      /* the last step's end */
	uint64_t max_steps;  /* centralized: train.epochs over the training set (0: none) */
	bool central;        /* centralized: node/trainer's stop rule */
	int64_t last_eval_ns;
	uint32_t done;       /* nodes that stopped: with all of them the run is over */
	struct sim_status st;
};

static void push_ev(struct ring *s, int64_t t, uint32_t who, enum ring_ev kind)
{
	sim_status_push(&s->st, s->heap, t, who, (uint16_t)kind, 0);
}

/* Bytes of the chunk node i sends in phase p (node/engine_allreduce's chunk_off). */
static uint64_t chunk_bytes(const struct ring *s, uint32_t i, uint32_t p)
{
	uint32_t n = s->n, k = p >= n - 1 ? p - (n - 1) : p;
	uint32_t c = p >= n - 1 ? (i + 1 + n - k) % n : (i + n - k) % n;
	size_t lo = (size_t)((unsigned __int128)s->nparams * c / n);
	size_t hi = (size_t)((unsigned __int128)s->nparams * (c + 1) / n);

	return (hi - lo) * sizeof(float) + WIRE_HEADER_BYTES;
}

static void start_step(struct ring *s, uint32_t i, int64_t now)
{
	struct rnode *d = &s->r[i];
	int64_t c = sim_node_step_ns(s->node, i, d->step);

	d->t0 = now;
	d->tx = d->rx = 0;
	/* the engine's stop vote before the step: stop.steps, or stop.time already reached; the
	 * vote travels with the step's chunks, so every node learns it by the step's end */
	if (d->step < s->last_step &&
	    ((s->sc->stop_steps && d->step + 1 >= s->sc->stop_steps) || now >= s->stop_ns))
		s->last_step = d->step;
	push_ev(s, sim_node_after_pause(s->node, i, now) + c, i, EV_COMPUTE);
}

static void send_phase(struct ring *s, uint32_t i, int64_t now)
{
	struct rnode *d = &s->r[i];
	uint32_t next = (i + 1) % s->n;
	uint64_t b = chunk_bytes(s, i, d->phase);
	int64_t t = sim_net_send(s->net, s->node_of[i], s->node_of[next], b, now, &d->fifo, &d->last_send);

	d->tx += b;
	push_ev(s, t, next, EV_CHUNK);
}

static void step_end(struct ring *s, uint32_t i, int64_t now)
{
	struct rnode *d = &s->r[i];

	/* train real: the ring's mean gradient is one step of the (one) model; node 0 does the
	 * arithmetic when it completes the step, every node's minibatch in it */
	if (s->rep && i == 0) {
		double loss;
		int rc = sim_replicas_step_mean(s->rep, &loss);

		if (rc < 0) {
			sim_status_fail(&s->st, rc, "training step failed");
			return;
		}
	}
	d->step++;
	s->updates++;
	/* the engine's row: compute the gradient and straggler, wait the ring, staleness 0 */
	if (sim_record_step(s->rec, i, now, d->step, (d->t1 - d->t0) / 1e9, (now - d->t1) / 1e9, 0, d->step,
			    d->tx, d->rx) < 0) {
		sim_status_fail(&s->st, -EIO, "write the trace of node %u failed", i);
		return;
	}
	/* centralized (node/trainer) checks after each step; the ring ends on the voted step */
	if (now > s->end_ns)
		s->end_ns = now;
	if (s->central ? (s->sc->stop_steps && d->step >= s->sc->stop_steps) || now >= s->stop_ns ||
			 (s->max_steps && d->step >= s->max_steps)
		      : d->step - 1 >= s->last_step) {
		d->done = true;
		s->done++;
		sim_record_live(s->rec, i, false);
		return;
	}
	start_step(s, i, now + sim_node_gap_ns(s->node, i, d->step));
}

/* Node i, in the ring, takes every chunk that has arrived for it. */
static void advance(struct ring *s, uint32_t i, int64_t now)
{
	struct rnode *d = &s->r[i];
	uint64_t per = 2 * (uint64_t)(s->n - 1);

	while (d->ringing && d->arrived > d->step * per + d->phase) {
		d->rx += chunk_bytes(s, (i + s->n - 1) % s->n, d->phase);
		if (d->phase + 1 == per) {
			d->ringing = false;
			sim_record_waiting(s->rec, i, false);
			step_end(s, i, now);
			return;
		}
		d->phase++;
		send_phase(s, i, now);
	}
}

/* train real: node 0 evaluates (eval.csv: its step, every node's samples, as the engine); a
 * reached stop.accuracy is voted into the next step, which every node completes. */
static void eval_row(struct ring *s, int64_t now)
{
	struct eval_result test, train;
	uint64_t samples = sim_replicas_samples(s->rep, 0) * s->n;
	int rc = sim_replicas_eval(s->rep, 0, &test, &train);
	const char *name = s->run->nodes[s->node_of[0]].name;
	double epoch = (double)samples / sim_replicas_share(s->rep, 0);

	if (rc < 0) {
		sim_status_fail(&s->st, rc, "evaluation failed");
		return;
	}
	s->last_eval_ns = now;
	/* node/trainer prints 4 decimals, the engines 6 */
	if (s->eval && s->central)
		rc = csv_writer_row(s->eval, "%.3f,%s,%u,%.4f,%llu,%.4f,%.4f,%.4f", now / 1e9, name, s->r[0].step,
				    epoch, (unsigned long long)samples, test.accuracy, test.loss, train.loss);
	else if (s->eval)
		rc = csv_writer_row(s->eval, "%.3f,%s,%u,%.4f,%llu,%.6f,%.6f,%.6f", now / 1e9, name, s->r[0].step,
				    epoch, (unsigned long long)samples, test.accuracy, test.loss, train.loss);
	if (rc < 0)
		sim_status_fail(&s->st, -EIO, "write eval.csv failed");
	if (s->sc->stop_accuracy > 0 && test.accuracy >= s->sc->stop_accuracy && !s->stop_acc) {
		s->stop_acc = true;
		if (s->r[0].step < s->last_step)
			s->last_step = s->r[0].step;
	}
}

static void dispatch(struct ring *s, const struct sim_event *e)
{
	int64_t now = e->t_ns;
	struct rnode *d = e->who < s->n ? &s->r[e->who] : NULL;

	switch ((enum ring_ev)e->kind) {
	case EV_COMPUTE:
		if (s->n < 2) {
			d->t1 = now;
			step_end(s, e->who, now);
			break;
		}
		d->t1 = now;
		d->phase = 0;
		d->ringing = true;
		sim_record_waiting(s->rec, e->who, true);
		send_phase(s, e->who, now);
		advance(s, e->who, now);
		break;
	case EV_CHUNK:
		d->arrived++;
		advance(s, e->who, now);
		break;
	case EV_SAMPLE:
		/* the samples and the evaluations end with the run (every node stopped) */
		if (sim_record_progress(s->rec, now) < 0)
			sim_status_fail(&s->st, -EIO, "write progress.csv failed");
		if (s->done < s->n && now + SIM_RING_SAMPLE_NS <= s->stop_ns)
			push_ev(s, now + SIM_RING_SAMPLE_NS, 0, EV_SAMPLE);
		break;
	case EV_NET:
		sim_net_apply(s->net, e->who);
		break;
	case EV_EVAL:
		if (s->done == s->n)
			break;
		eval_row(s, now);
		if (!s->stop_acc && now + (int64_t)s->sc->eval_every_us * 1000 <= s->stop_ns)
			push_ev(s, now + (int64_t)s->sc->eval_every_us * 1000, 0, EV_EVAL);
		break;
	}
}

static const char *unsupported(const struct plan_run *run)
{
	for (size_t i = 0; i < run->n_nodes; i++)
		if (run->nodes[i].straggler.set & (SCENARIO_STRAG_CRASH | SCENARIO_STRAG_RESTART |
						   SCENARIO_STRAG_JOIN | SCENARIO_STRAG_LEAVE))
			return "topologies allreduce and centralized: churn (crash, restart, join, leave) is "
			       "not simulated (the ring has no repair: it would stall to stop.time)";
	return NULL;
}

int sim_ring_run(const struct sim_opts *o, struct sim_result *res, char *err, size_t errlen)
{
	const struct plan_run *run = o->run;
	const struct scenario *sc = run->scenario;
	struct ring s = { .run = run, .sc = sc, .st = { .err = err, .errlen = errlen }, .last_step = UINT32_MAX,
			  .last_eval_ns = -1 };
	struct sim_event e;
	enum scenario_role role = sc->topology.kind == SCENARIO_TOPO_CENTRALIZED ? SCENARIO_ROLE_CENTRAL
										  : SCENARIO_ROLE_PEER;
	const char *why;
	size_t held0;
	uint32_t k = 0;

	{
		struct mallinfo2 mi = mallinfo2();

		held0 = mi.uordblks + mi.hblkhd;
	}
	if ((why = unsupported(run))) {
		snprintf(err, errlen, "%s", why);
		return -EINVAL;
	}
	for (size_t i = 0; i < run->n_nodes; i++)
		if (run->nodes[i].role == role)
			s.n++;
	if (!s.n) {
		snprintf(err, errlen, "an %s run needs training nodes",
			 role == SCENARIO_ROLE_CENTRAL ? "centralized" : "allreduce");
		return -EINVAL;
	}
	s.nparams = sim_model_params(sc);
	if (!s.nparams) {
		snprintf(err, errlen, "cannot build the model");
		return -EINVAL;
	}
	s.stop_ns = sc->stop_time_us ? (int64_t)sc->stop_time_us * 1000 : INT64_MAX / 4;
	s.central = role == SCENARIO_ROLE_CENTRAL;
	if (s.central && sc->train.epochs) {
		/* node/trainer stops after train.epochs passes over the training set */
		char img[PATH_MAX], lbl[PATH_MAX];
		uint8_t *labels = NULL;
		uint32_t nl = 0;
		uint64_t batch = sc->train.batch ? sc->train.batch : 1;

		if (data_paths(sc->data.path, DATA_TRAIN, img, lbl, sizeof img) < 0 ||
		    data_read_labels(lbl, &labels, &nl) < 0 || !nl) {
			free(labels);
			snprintf(err, errlen, "train.epochs %u: the training set's size is needed and its labels "
				 "under %s cannot be read", sc->train.epochs, sc->data.path ? sc->data.path : "?");
			return -EINVAL;
		}
		free(labels);
		s.max_steps = (uint64_t)sc->train.epochs * ((nl + batch - 1) / batch);
	}
	s.node_of = calloc(s.n, sizeof *s.node_of);
	s.r = calloc(s.n, sizeof *s.r);
	s.heap = sim_heap_new((size_t)s.n * 2 + 64);
	if (!s.node_of || !s.r || !s.heap) {
		sim_status_fail(&s.st, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < run->n_nodes; i++)
		if (run->nodes[i].role == role)
			s.node_of[k++] = (uint32_t)i;
	if (!(s.net = sim_net_new(run, err, errlen))) {
		s.st.rc = -EINVAL;
		goto out;
	}
	if (sc->simulation.profile && !(s.profile = sim_profile_load(sc->simulation.profile, err, errlen))) {
		s.st.rc = -EINVAL;
		goto out;
	}
	if (!(s.node = sim_node_new(run, s.node_of, s.n, o->step_cost_ns, s.profile, err, errlen)) ||
	    !(s.rec = sim_record_new(run, o->dir, s.node_of, s.n, err, errlen))) {
		s.st.rc = -EINVAL;
		goto out;
	}
	if (sc->simulation.train == SCENARIO_SIM_TRAIN_REAL) {
		const char **names = calloc(s.n, sizeof *names);
		char path[4096];

		for (uint32_t i = 0; names && i < s.n; i++)
			names[i] = run->nodes[s.node_of[i]].name;
		s.rep = names ? sim_replicas_new(sc, s.n, run->seed,
						  s.central ? SIM_REPLICAS_TRAINER : SIM_REPLICAS_PEERS, o->dir,
						  names, err, errlen) : NULL;
		free(names);
		if (!s.rep) {
			s.st.rc = -EINVAL;
			goto out;
		}
		snprintf(path, sizeof path, "%s/eval.csv", o->dir ? o->dir : "");
		if (o->dir && !(s.eval = csv_writer_open(path, TRACE_HEADER_EVAL))) {
			sim_status_fail(&s.st, -EIO, "cannot open %s", path);
			goto out;
		}
		push_ev(&s, 0, 0, EV_EVAL);
	}
	for (uint32_t i = 0; i < s.n; i++) {
		s.r[i].last_send = INT64_MIN;
		sim_record_live(s.rec, i, true);
		start_step(&s, i, 0);
	}
	for (size_t i = 0; i < sim_net_changes(s.net); i++)
		push_ev(&s, sim_net_change_at(s.net, i), (uint32_t)i, EV_NET);
	push_ev(&s, 0, 0, EV_SAMPLE);
	/* no stop at stop.time: the nodes end on the step they voted the last, as the engine's */
	while (!s.st.rc && sim_heap_pop(s.heap, &e) == 1) {
		s.events++;
		dispatch(&s, &e);
	}
	/* the engines and the trainer evaluate once more at the end */
	if (!s.st.rc && s.rep && s.last_eval_ns != s.end_ns)
		eval_row(&s, s.end_ns);
	if (!s.st.rc) {
		struct mallinfo2 mi;

		memset(res, 0, sizeof *res);
		s.st.rc = sim_record_finish(s.rec, res, err, errlen);
		mi = mallinfo2();
		res->events = s.events;
		res->updates = s.updates;
		res->sim_end_s = s.end_ns / 1e9;
		res->stopped_accuracy = s.stop_acc;
		res->state_bytes = sizeof s + s.n * (sizeof *s.r + sizeof *s.node_of) + sim_heap_bytes(s.heap) +
				   sim_net_bytes(s.net) + sim_record_bytes(s.rec);
		res->held_bytes = mi.uordblks + mi.hblkhd > held0 ? mi.uordblks + mi.hblkhd - held0 : 0;
	}
out:
	csv_writer_close(&s.eval);
	sim_replicas_destroy(&s.rep);
	sim_record_destroy(&s.rec);
	sim_node_destroy(&s.node);
	sim_profile_destroy(&s.profile);
	sim_net_destroy(&s.net);
	sim_heap_destroy(&s.heap);
	free(s.r);
	free(s.node_of);
	return s.st.rc;
}
