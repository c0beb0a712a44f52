/* node/engine_allreduce: see engine_allreduce.h.
 *
 * One ZeroMQ context and two sockets per node: PULL (bound, from the previous node) and PUSH
 * (connected, to the next). A PUSH/PULL pair over one TCP connection is FIFO, so the messages of
 * step s always arrive before those of step s+1 even when a neighbour races ahead; each message
 * is still checked against the expected sender, step, phase and chunk size. Sends block (the
 * next node may not have bound yet: ZeroMQ queues until it has). */
#include "node/engine_allreduce.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "collectors/csv.h"
#include "lib/clock.h"
#include "lib/ctl.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "node/data.h"
#include "node/engine_common.h"
#include "node/model.h"
#include "node/optim.h"

#define POLL_SLICE_MS 100
/* A neighbour that sends nothing for this long is taken as gone (the run cannot continue). */
#define STEP_TIMEOUT_MS (120 * 1000)

struct allreduce_ring {
	void *zctx, *rx, *tx;
	uint32_t index, n;
	size_t max_floats;
	struct wire_stats st;
};

struct allreduce_ring *allreduce_ring_open(uint32_t index, uint32_t n, const char *listen_ep,
					   const char *next_ep, size_t max_floats)
{
	struct allreduce_ring *self = calloc(1, sizeof *self);
	size_t maxb = max_floats * sizeof(float);

	if (!self)
		return NULL;
	self->index = index;
	self->n = n;
	self->max_floats = max_floats;
	if (n < 2)
		return self; /* a ring of one needs no sockets */
	self->zctx = zmq_ctx_new();
	if (!self->zctx)
		goto fail;
	self->rx = zmq_socket(self->zctx, ZMQ_PULL);
	self->tx = zmq_socket(self->zctx, ZMQ_PUSH);
	if (!self->rx || !self->tx || wire_socket_setup(self->rx, maxb) < 0 ||
	    wire_socket_setup(self->tx, maxb) < 0)
		goto fail;
	if (zmq_bind(self->rx, listen_ep) < 0) {
		log_error("allreduce: bind %s: %s", listen_ep, zmq_strerror(zmq_errno()));
		goto fail;
	}
	if (zmq_connect(self->tx, next_ep) < 0) {
		log_error("allreduce: connect %s: %s", next_ep, zmq_strerror(zmq_errno()));
		goto fail;
	}
	return self;
fail:
	allreduce_ring_close(&self);
	return NULL;
}

void allreduce_ring_close(struct allreduce_ring **self)
{
	struct allreduce_ring *r;

	if (!self || !*self)
		return;
	r = *self;
	*self = NULL;
	if (r->rx)
		zmq_close(r->rx);
	if (r->tx) {
		/* Let the last all-gather chunks reach the next node before the socket goes. */
		int linger = 2000;

		zmq_setsockopt(r->tx, ZMQ_LINGER, &linger, sizeof linger);
		zmq_close(r->tx);
	}
	if (r->zctx)
		zmq_ctx_term(r->zctx);
	free(r);
}

const struct wire_stats *allreduce_ring_stats(const struct allreduce_ring *self)
{
	return &self->st;
}

static size_t chunk_off(size_t len, uint32_t n, uint32_t k)
{
	return (size_t)((unsigned __int128)len * k / n);
}

/* Receive the message of (step, phase) from the previous node into m, waiting at most
 * timeout_ms from the call. A message that is not it (another sender, step, phase or size) is
 * counted in bad_frames and skipped, changing nothing: the wait goes on to the same deadline,
 * which no stream of such messages can push back. */
static int recv_phase(struct allreduce_ring *self, int64_t step, int64_t phase, size_t want,
		      int timeout_ms, struct wire_msg *m)
{
	uint32_t prev = (self->index + self->n - 1) % self->n;
	int64_t deadline = clock_now_ns() + (int64_t)timeout_ms * 1000000;
	uint64_t skipped = 0;

	for (;;) {
		int64_t left_ms = (deadline - clock_now_ns()) / 1000000;
		int rc;

		if (left_ms <= 0) {
			log_error("allreduce: step %lld phase %lld: nothing from node %u in %d ms (%llu "
				  "other messages skipped)", (long long)step, (long long)phase, prev,
				  timeout_ms, (unsigned long long)skipped);
			return -ETIMEDOUT;
		}
		rc = wire_recv(self->rx, false, self->max_floats * sizeof(float),
			       (int)(left_ms < POLL_SLICE_MS ? left_ms : POLL_SLICE_MS), m, &self->st);
		if (rc == -EINTR || rc == 0)
			continue;
		if (rc < 0)
			return rc;
		if (m->h.type != WIRE_PUSH || m->h.sender != prev || m->h.step != step ||
		    m->h.model_version != phase || m->n != want) {
			log_debug("allreduce: expected step %lld phase %lld (%zu floats) from %u, got "
				  "%s step %lld phase %lld (%zu floats) from %u: skipped",
				  (long long)step, (long long)phase, want, prev,
				  wire_type_name(m->h.type), (long long)m->h.step,
				  (long long)m->h.model_version, m->n, m->h.sender);
			self->st.bad_frames++;
			skipped++;
			wire_msg_close(m);
			continue;
		}
		return 0;
	}
}

int allreduce_ring_mean(struct allreduce_ring *self, float *v, size_t len, int64_t step,
			bool *stop, int timeout_ms)
{
	uint32_t n = self->n, i = self->index;
	int64_t vote = *stop ? 1 : 0;

	if (n < 2)
		return 0;
	if (len / n + 1 > self->max_floats)
		return -EMSGSIZE;
	for (uint32_t phase = 0; phase < 2 * (n - 1); phase++) {
		bool gather = phase >= n - 1;
		uint32_t k = gather ? phase - (n - 1) : phase;
		uint32_t send_c = gather ? (i + 1 + n - k) % n : (i + n - k) % n;
		uint32_t recv_c = gather ? (i + n - k) % n : (i + 2 * n - k - 1) % n;
		size_t so = chunk_off(len, n, send_c), sl = chunk_off(len, n, send_c + 1) - so;
		size_t ro = chunk_off(len, n, recv_c), rl = chunk_off(len, n, recv_c + 1) - ro;
		struct wire_header h = { .type = WIRE_PUSH, .sender = i, .step = step,
					 .model_version = phase, .aux = vote,
					 .payload_len = (uint32_t)(sl * sizeof(float)) };
		struct wire_msg m;
		int rc;

		if (!wire_payload_finite(v + so, sl)) {
			/* The next node would skip it and time out: say so here instead. */
			log_error("allreduce: step %lld: values that are not finite (the model diverged)",
				  (long long)step);
			return -EDOM;
		}
		rc = wire_send(self->tx, NULL, 0, &h, v + so, NULL, false, &self->st);
		if (rc < 0) {
			log_error("allreduce: send: %s", zmq_strerror(-rc));
			return rc;
		}
		rc = recv_phase(self, step, phase, rl, timeout_ms, &m);
		if (rc < 0)
			return rc;
		vote |= m.h.aux & 1;
		if (!gather) {
			for (size_t j = 0; j < rl; j++)
				v[ro + j] += m.payload[j];
			if (phase == n - 2) {
				/* v now holds the full sum of chunk recv_c = (i+1) mod n. */
				for (size_t j = 0; j < rl; j++)
					v[ro + j] /= (float)n;
			}
		} else if (rl) {
			memcpy(v + ro, m.payload, rl * sizeof(float));
		}
		wire_msg_close(&m);
	}
	*stop = vote != 0;
	return 0;
}

/* --- the engine ------------------------------------------------------------------------------ */

static int evaluate(struct engine_work *wk, const struct engine_conf *c, struct csv_writer *ev,
		    uint64_t steps, double *acc)
{
	struct eval_result te, tr;
	int rc = engine_work_eval(wk, wk->model, &te, &tr);

	if (rc)
		return rc;
	*acc = te.accuracy;
	log_info("allreduce: t %.1f s, step %llu, test accuracy %.4f, loss %.4f",
		 (double)(clock_now_ns() - c->origin_ns) / 1e9, (unsigned long long)steps,
		 te.accuracy, te.loss);
	return engine_eval_row(ev, c, wk, steps, wk->samples * c->n, &te, &tr);
}

int engine_allreduce_run(const struct kv *cfg)
{
	struct engine_conf c;
	struct engine_work *wk = NULL;
	struct allreduce_ring *ring = NULL;
	struct csv_writer *trace = NULL, *ev = NULL;
	struct ctl_client *ctl = NULL;
	char listen_ep[128], next_ep[128];
	const char *barrier;
	int64_t step = 0, last_eval_ns;
	bool acc_reached = false;
	int rc;

	rc = engine_conf_read(cfg, &c);
	if (rc)
		return rc;
	barrier = kv_get(cfg, "consistency.barrier");
	if (barrier && *barrier && strcmp(barrier, "bsp"))
		log_warn("allreduce: consistency.barrier %s ignored: a ring all-reduce is BSP",
			 barrier);
	rc = engine_work_open(cfg, &c, c.index == 0, &wk);
	if (rc)
		goto out;
	rc = engine_conf_endpoint(&c, c.index, listen_ep, sizeof listen_ep);
	rc = rc ? rc : engine_conf_endpoint(&c, (c.index + 1) % c.n, next_ep, sizeof next_ep);
	if (rc)
		goto out;
	/* Bind the data plane before telling the control plane we are ready. */
	ring = allreduce_ring_open(c.index, c.n, listen_ep, next_ep,
				   model_nparams(wk->model) / c.n + 1);
	trace = engine_trace_open(&c);
	ev = c.index == 0 ? engine_eval_open(&c) : NULL;
	if (!ring || !trace || (c.index == 0 && !ev)) {
		rc = -EIO;
		goto out;
	}
	rc = engine_ctl_start(cfg, &c, &ctl);
	if (rc == -ECANCELED) {
		rc = 0;
		goto out;
	}
	if (rc)
		goto out;
	log_info("allreduce: %s node %u of %u, %zu parameters, %u samples", c.name, c.index, c.n,
		 model_nparams(wk->model), wk->train->n);
	last_eval_ns = clock_now_ns();
	for (bool stop = false; !stop;) {
		const struct wire_stats *st = allreduce_ring_stats(ring);
		uint64_t tx0 = st->bytes_tx, rx0 = st->bytes_rx, bad0 = st->bad_frames;
		int64_t t0, t1, t2;
		double loss;
		size_t nb;

		/* Vote "this is the last step" before it; everybody learns the OR during it. */
		stop = engine_conf_stop_reached(&c, step + 1) || acc_reached ||
		       (ctl && ctl_client_should_stop(ctl));
		if (ctl)
			ctl_client_status(ctl, step, CTL_RUN, false);
		t0 = clock_now_ns();
		rc = engine_work_gradient(wk, &loss, &nb);
		if (rc)
			goto out;
		engine_work_straggle(wk, &c, step, (double)(clock_now_ns() - t0) / 1e9);
		t1 = clock_now_ns();
		rc = allreduce_ring_mean(ring, wk->grad, model_nparams(wk->model), step, &stop,
					 STEP_TIMEOUT_MS);
		if (rc)
			goto out;
		optim_step(wk->optim, model_params(wk->model), wk->grad);
		t2 = clock_now_ns();
		step++;
		rc = engine_trace_row(trace, &c, t2, step, (double)(t1 - t0) / 1e9,
				      (double)(t2 - t1) / 1e9, 0, step, loss, st->bytes_tx - tx0,
				      st->bytes_rx - rx0, st->bad_frames - bad0);
		if (rc)
			goto out;
		if (ev && !stop && c.eval_every_s > 0 &&
		    (double)(clock_now_ns() - last_eval_ns) / 1e9 >= c.eval_every_s) {
			double acc;

			rc = evaluate(wk, &c, ev, (uint64_t)step, &acc);
			if (rc)
				goto out;
			if (c.stop_accuracy > 0 && acc >= c.stop_accuracy)
				acc_reached = true;
			last_eval_ns = clock_now_ns();
		}
	}
	if (ev) {
		double acc;

		rc = evaluate(wk, &c, ev, (uint64_t)step, &acc);
		if (rc)
			goto out;
	}
	rc = engine_save_params(&c, model_params(wk->model), model_nparams(wk->model));
	if (rc)
		goto out;
	log_info("allreduce: %s done after %lld steps", c.name, (long long)step);
	if (ctl) {
		ctl_client_status(ctl, step, CTL_DONE, false);
		ctl_client_done(ctl);
	}
out:
	if (rc)
		log_error("allreduce: %s stopped at step %lld: %s", c.name, (long long)step,
			  strerror(-rc));
	ctl_client_close(&ctl);
	allreduce_ring_close(&ring);
	csv_writer_close(&trace);
	csv_writer_close(&ev);
	engine_work_destroy(&wk);
	engine_conf_free(&c);
	return rc;
}
