/* node/engine_ps: see engine_ps.h.
 *
 * The server is one thread around one zmq_poll and a shell around node/core_ps, which makes
 * every decision (apply, close a round, release a held barrier, depart, resume): a valid frame
 * becomes an event fed to the core with the time, and the core's actions are carried out at
 * once, so held requests are answered in the same pass that changed a clock, with no polling
 * loop. Routing ids, connections (the monitor's closures), the model, the optimiser and the
 * traces stay here. With test.core_log every event and action is also written to a file, one
 * line each, for the replay test. The current model
 * is published as a reference-counted snapshot (struct wire_buf) taken at most once per model
 * version and shared zero-copy by every MODEL reply of that version. */
#include "node/engine_ps.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/csv.h"
#include "lib/clock.h"
#include "lib/ctl.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "node/barrier.h"
#include "node/core_ps.h"
#include "node/data.h"
#include "node/engine_common.h"
#include "node/model.h"
#include "node/optim.h"
#include "node/straggler.h"
#include "node/wire.h"

#define PS_KEEPALIVE_NS 1000000000ll
/* HELLO aux bits: "I am (re)starting, tell me my clock" (keep-alives leave both clear), and
 * "this join was sent before, over a connection that broke": the same process asks again, so
 * it is not a restart (see on_join). */
#define PS_HELLO_JOIN 1
#define PS_HELLO_AGAIN 2
/* ZeroMQ heartbeats on the worker's connection: a peer silent this long (a black-holed link,
 * a host gone) closes the connection and ZeroMQ reconnects; the request in flight is then sent
 * again (client_await). Long enough that a full model on a slow link (814 KB at 0.2 Mbit/s)
 * never trips it: a heartbeat reply queues behind the data. */
#define PS_HEARTBEAT_IVL_MS 5000
#define PS_HEARTBEAT_TIMEOUT_MS 60000
/* A departed worker (its connection closed, or silent) may only be cut off and about to
 * reconnect: barriers go on without it at once, but the server waits this long for its return
 * before it counts it as finished and ends the run. */
#define PS_DEPARTED_GRACE_NS 5000000000ll

int engine_ps_weighting_parse(const char *name, enum engine_ps_weighting *out)
{
	if (!name || !*name || !strcmp(name, "none"))
		*out = ENGINE_PS_WEIGHT_NONE;
	else if (!strcmp(name, "inverse"))
		*out = ENGINE_PS_WEIGHT_INVERSE;
	else if (!strcmp(name, "exp"))
		*out = ENGINE_PS_WEIGHT_EXP;
	else
		return -EINVAL;
	return 0;
}

double engine_ps_weight(enum engine_ps_weighting w, int64_t staleness)
{
	return core_ps_weight((enum core_ps_weighting)w, staleness);
}

/* --- configuration shared by both roles ---------------------------------------------------- */

struct ps_conf {
	struct engine_conf ec;
	struct barrier_params bp;
	enum barrier_draw draw;
	enum engine_ps_weighting weighting;
	double dead_after_s;
	bool average;        /* model averaging: workers push models every local_steps steps */
	int64_t local_steps; /* H (1 in gradient mode) */
	char server_ep[128];
};

int engine_ps_mode_parse(const char *combine, int64_t local_steps, bool *average)
{
	if (local_steps < 1)
		return -EINVAL;
	if (!combine || !*combine || !strcmp(combine, "none"))
		*average = local_steps > 1;
	else if (!strcmp(combine, "average"))
		*average = true;
	else
		return -EINVAL; /* gossip and ensemble have no meaning with a server */
	return 0;
}

static int ps_conf_read(const struct kv *cfg, struct ps_conf *pc)
{
	const char *saddrs = kv_get(cfg, "servers.addrs"), *b = kv_get(cfg, "consistency.barrier");
	const char *combine = kv_get(cfg, "consistency.combine");
	int64_t s = 0, sample = 1, backup = 0, port = 7000;
	char addr[ENGINE_ADDR_LEN];
	int rc;

	memset(pc, 0, sizeof *pc);
	rc = engine_conf_read(cfg, &pc->ec);
	if (rc)
		return rc;
	rc = kv_get_i64(cfg, "consistency.staleness", 3, &s);
	rc = rc ? rc : kv_get_i64(cfg, "consistency.sample", 1, &sample);
	rc = rc ? rc : kv_get_i64(cfg, "consistency.backup", 0, &backup);
	rc = rc ? rc : kv_get_i64(cfg, "port.data", 7000, &port);
	rc = rc ? rc : kv_get_double(cfg, "consistency.dead_after", 0, &pc->dead_after_s);
	rc = rc ? rc : kv_get_i64(cfg, "consistency.local_steps", 1, &pc->local_steps);
	if (rc)
		goto fail;
	if (engine_ps_mode_parse(combine, pc->local_steps, &pc->average) < 0) {
		log_error("engine_ps: consistency.combine '%s' with local_steps %lld: a parameter server "
			  "takes none or average, local_steps >= 1", combine ? combine : "",
			  (long long)pc->local_steps);
		goto fail;
	}
	pc->bp.kind = BARRIER_BSP;
	if (b && *b && barrier_kind_parse(b, &pc->bp.kind) < 0) {
		log_error("engine_ps: consistency.barrier: unknown '%s'", b);
		goto fail;
	}
	/* A sample per check unless told otherwise (the scenario's default, docs/scenario.md). */
	pc->draw = BARRIER_DRAW_CHECK;
	if (kv_get(cfg, "consistency.draw") && *kv_get(cfg, "consistency.draw") &&
	    barrier_draw_parse(kv_get(cfg, "consistency.draw"), &pc->draw) < 0) {
		log_error("engine_ps: consistency.draw must be check|crossing");
		goto fail;
	}
	if (engine_ps_weighting_parse(kv_get(cfg, "consistency.weighting"), &pc->weighting) < 0) {
		log_error("engine_ps: consistency.weighting must be none|inverse|exp");
		goto fail;
	}
	if (s < 0 || sample < 0 || backup < 0 || backup >= pc->ec.n) {
		log_error("engine_ps: need staleness >= 0, sample >= 0, 0 <= backup < workers.count");
		goto fail;
	}
	pc->bp.staleness = s;
	pc->bp.sample = (uint32_t)(sample < ENGINE_MAX_NODES ? sample : ENGINE_MAX_NODES);
	pc->bp.backup = (uint32_t)backup;
	/* The server's address: first of servers.addrs, else (on the server) node.addr. */
	if (saddrs && *saddrs) {
		size_t len = strcspn(saddrs, ",");

		if (len >= sizeof addr)
			goto fail;
		memcpy(addr, saddrs, len);
		addr[len] = '\0';
	} else if (kv_get(cfg, "node.addr")) {
		snprintf(addr, sizeof addr, "%s", kv_get(cfg, "node.addr"));
	} else {
		log_error("engine_ps: servers.addrs is not set");
		goto fail;
	}
	snprintf(pc->server_ep, sizeof pc->server_ep, "tcp://%s:%d", addr, (int)port);
	return 0;
fail:
	engine_conf_free(&pc->ec);
	return -EINVAL;
}

static double run_s(const struct engine_conf *c)
{
	return (double)(clock_now_ns() - c->origin_ns) / 1e9;
}

/* Total training samples the partition splits (for the epoch column). */
static uint64_t train_total(const struct engine_conf *c)
{
	char img[PATH_MAX], lbl[PATH_MAX];
	uint8_t *labels = NULL;
	uint32_t n = 0;

	if (data_paths(c->data_dir, DATA_TRAIN, img, lbl, sizeof img) < 0 ||
	    data_read_labels(lbl, &labels, &n) < 0)
		return 0;
	free(labels);
	if (c->train_limit > 0 && (uint64_t)c->train_limit < n)
		n = (uint32_t)c->train_limit;
	return n;
}

/* --- server --------------------------------------------------------------------------------- */

/* What the shell keeps per worker: the way back to it. Every decision is node/core_ps's. */
struct ps_worker {
	bool known;
	uint8_t id[WIRE_MAX_ID];
	size_t idlen;
	int fd;             /* connection its latest update came on (ZMQ_SRCFD); -1 unknown */
};

struct ps_server {
	struct ps_conf pc;
	struct engine_work *wk;
	struct core_ps *core;
	FILE *core_log;           /* test.core_log: every event fed and action taken, one a line */
	void *ctx, *sock;
	struct ctl_client *ctl;
	struct csv_writer *eval;
	struct csv_writer *trace; /* nodes/<server>.csv: one row per update received */
	void *mon;                /* PAIR on the ROUTER's monitor: connection closures */
	struct wire_stats st;
	struct ps_worker *w;
	size_t nparams;
	float *agg;         /* BSP: sum of the round's updates (averaging: weighted by samples) */
	uint64_t agg_samples;
	float *scaled;      /* async: weighted update */
	struct wire_buf *snap;
	int64_t snap_version;
	uint64_t samples;
	uint64_t total;
	bool stop;
	double last_acc;
};

/* One server-trace row for worker i's update of worker step `step`: stale < 0 = dropped;
 * waiting = barrier requests held when the update arrived (the ones it may have released).
 * Written after the update was handled: version and counters include it (docs/traces.md). */
static void trace_update(struct ps_server *s, uint32_t i, int64_t step, int64_t stale,
			 uint32_t waiting)
{
	char name[ENGINE_ADDR_LEN + 8], st[24] = "";
	struct core_ps_stats cs;

	if (!s->trace)
		return;
	core_ps_stats(s->core, &cs);
	if (s->pc.ec.names)
		snprintf(name, sizeof name, "%s", s->pc.ec.names[i]);
	else
		snprintf(name, sizeof name, "worker%u", i);
	if (stale >= 0)
		snprintf(st, sizeof st, "%lld", (long long)stale);
	csv_writer_row(s->trace, "%.6f,%s,%s,%lld,%s,%lld,%llu,%llu,%u,%u", run_s(&s->pc.ec),
		       s->pc.ec.name, name, (long long)step, st, (long long)cs.version,
		       (unsigned long long)cs.accepted, (unsigned long long)cs.dropped,
		       core_ps_live(s->core), waiting);
}

static int reply(struct ps_server *s, uint32_t i, const struct wire_header *h, struct wire_buf *buf)
{
	struct ps_worker *w = &s->w[i];
	int rc;

	if (!w->known)
		return 0;
	rc = wire_send(s->sock, w->id, w->idlen, h, NULL, buf, false, &s->st);
	if (rc < 0 && rc != -EHOSTUNREACH)
		log_warn("engine_ps: send %s to worker %u: %s", wire_type_name(h->type), i, strerror(-rc));
	return rc;
}

static int snapshot(struct ps_server *s, int64_t version, struct wire_buf **out)
{
	if (!s->snap || s->snap_version != version) {
		wire_buf_unref(&s->snap); /* replies in flight keep their own references */
		s->snap = wire_buf_new(s->nparams);
		if (!s->snap)
			return -ENOMEM;
		memcpy(wire_buf_data(s->snap), model_params(s->wk->model), s->nparams * sizeof(float));
		s->snap_version = version;
	}
	*out = s->snap;
	return 0;
}

/* Send worker i a MODEL (the current model) with the given step, version and value. */
static void send_model(struct ps_server *s, uint32_t i, int64_t step, int64_t version, double value)
{
	struct wire_header h = { .type = WIRE_MODEL, .sender = WIRE_SENDER_SERVER, .step = step,
				 .model_version = version, .value = value,
				 .payload_len = (uint32_t)(s->nparams * sizeof(float)) };
	struct wire_buf *b = NULL;

	if (snapshot(s, version, &b) < 0) {
		log_error("engine_ps: no memory for a model snapshot; worker %u not answered", i);
		return;
	}
	reply(s, i, &h, b);
}

static void apply_update(struct ps_server *s, const float *g, double scale)
{
	const float *u = g;

	if (scale != 1.0) {
		for (size_t k = 0; k < s->nparams; k++)
			s->scaled[k] = (float)(g[k] * scale);
		u = s->scaled;
	}
	optim_step(s->wk->optim, model_params(s->wk->model), u);
}

static const char *const leave_why[] = { "bye", "connection closed", "silent" };

/* Carry out the core's actions for the event just fed; m is the message that made it (NULL
 * for a tick or a closed connection), whose payload the update actions use. */
static void execute(struct ps_server *s, const struct wire_msg *m)
{
	size_t n;
	const struct core_ps_action *a = core_ps_actions(s->core, &n);

	for (size_t j = 0; j < n; j++, a++) {
		uint32_t i = a->worker;

		if (s->core_log) {
			char line[160];

			core_ps_action_format(a, line, sizeof line);
			fprintf(s->core_log, "%s\n", line);
		}
		switch (a->kind) {
		case CORE_PS_ACK: {
			struct wire_header h = { .type = WIRE_ACK, .sender = WIRE_SENDER_SERVER,
						 .step = a->step, .model_version = a->version,
						 .aux = a->aux };

			reply(s, i, &h, NULL);
			break;
		}
		case CORE_PS_HELLO: {
			struct wire_header h = { .type = WIRE_HELLO, .sender = WIRE_SENDER_SERVER,
						 .step = a->step, .model_version = a->version };

			reply(s, i, &h, NULL);
			break;
		}
		case CORE_PS_RELEASE: {
			/* value = seconds the request was held (the barrier wait). */
			double held_s = a->aux > 0 ? (double)a->aux / 1e9 : 0;

			if (a->reply == CORE_PS_REPLY_MODEL) {
				send_model(s, i, a->step, a->version, held_s);
			} else {
				struct wire_header h = { .type = WIRE_BARRIER_OK,
							 .sender = WIRE_SENDER_SERVER, .step = a->step,
							 .model_version = a->version, .value = held_s };

				reply(s, i, &h, NULL);
			}
			break;
		}
		case CORE_PS_MODEL:
			send_model(s, i, a->step, a->version, 0);
			break;
		case CORE_PS_APPLY:
			apply_update(s, m->payload, a->x);
			s->samples += (uint64_t)(a->aux > 0 ? a->aux : 0);
			break;
		case CORE_PS_FOLD: {
			float *p = model_params(s->wk->model);

			for (size_t k = 0; k < s->nparams; k++)
				p[k] = (float)((1.0 - a->x) * p[k] + a->x * m->payload[k]);
			s->samples += (uint64_t)(a->aux > 0 ? a->aux : 0);
			break;
		}
		case CORE_PS_ROUND_ADD: {
			float wt = (float)a->x;

			for (size_t k = 0; k < s->nparams; k++)
				s->agg[k] += wt * m->payload[k];
			s->agg_samples += (uint64_t)(a->aux > 0 ? a->aux : 0);
			break;
		}
		case CORE_PS_ROUND_CLOSE:
			if (s->pc.average) {
				/* The round's models, weighted by their samples, replace the model
				 * (FedAvg's rule; no server-side optimiser). */
				float inv = (float)a->x, *p = model_params(s->wk->model);

				if (inv > 0)
					for (size_t k = 0; k < s->nparams; k++)
						p[k] = s->agg[k] * inv;
			} else {
				float inv = a->aux > 0 ? 1.0f / (float)a->aux : 0;

				for (size_t k = 0; k < s->nparams; k++)
					s->agg[k] *= inv;
				apply_update(s, s->agg, 1.0);
			}
			s->samples += s->agg_samples;
			s->agg_samples = 0;
			memset(s->agg, 0, s->nparams * sizeof *s->agg);
			break;
		case CORE_PS_LIVE:
			log_info("engine_ps: worker %u %s (%lld live)", i, a->aux ? "joined" : "left",
				 (long long)a->step);
			break;
		case CORE_PS_RESUME:
			if (a->aux == CORE_PS_RESUME_BACK)
				log_info("engine_ps: worker %u is back, at clock %lld", i, (long long)a->step);
			else
				log_info("engine_ps: worker %u %s, resumes at clock %lld", i,
					 a->aux == CORE_PS_RESUME_LATE ? "joined late" : "restarted",
					 (long long)a->step);
			break;
		case CORE_PS_DEPART:
			log_info("engine_ps: worker %u departed (%s): rounds and barriers go on with %u "
				 "live workers", i, leave_why[a->aux >= 0 && a->aux <= 2 ? a->aux : 2],
				 core_ps_live(s->core));
			break;
		default:
			break;
		}
	}
	if (s->core_log)
		fflush(s->core_log);
}

/* Feed one event to the core (logged first when test.core_log is set) and carry out its
 * actions. Returns what the core returned. */
static int feed(struct ps_server *s, const struct core_ps_event *ev, const struct wire_msg *m)
{
	int rc = core_ps_feed(s->core, ev);
	size_t n;

	/* A tick that did nothing changed nothing: not logged (the replay gives the same). */
	core_ps_actions(s->core, &n);
	if (s->core_log && (ev->kind != CORE_PS_EV_TICK || n > 0)) {
		char line[160];

		core_ps_event_format(ev, line, sizeof line);
		fprintf(s->core_log, "%s\n", line);
	}
	if (rc < 0) {
		log_warn("engine_ps: the core refused an event from worker %u: %s", ev->worker,
			 strerror(-rc));
		return rc;
	}
	execute(s, m);
	return rc;
}

static void evaluate(struct ps_server *s)
{
	struct eval_result test, train;
	double epoch = s->total ? (double)s->samples / (double)s->total : 0;
	int64_t version = core_ps_version(s->core);

	if (engine_work_eval(s->wk, s->wk->model, &test, &train) < 0)
		return;
	s->last_acc = test.accuracy;
	csv_writer_row(s->eval, "%.6f,%s,%lld,%.4f,%llu,%.6f,%.6f,%.6f", run_s(&s->pc.ec),
		       s->pc.ec.name, (long long)version, epoch, (unsigned long long)s->samples,
		       test.accuracy, test.loss, train.loss);
	log_info("engine_ps: t %.1f s version %lld acc %.4f loss %.4f", run_s(&s->pc.ec),
		 (long long)version, test.accuracy, test.loss);
	if (s->pc.ec.stop_accuracy > 0 && test.accuracy >= s->pc.ec.stop_accuracy) {
		log_info("engine_ps: reached stop.accuracy %.4f", s->pc.ec.stop_accuracy);
		s->stop = true;
	}
}

/* Whether m (wire-valid: checksum right, floats finite) is also a request this server can take,
 * judged before any state changes: a known sender with a routing id, a type workers send, no
 * payload but on a push, and on a push a whole model's worth of floats computed on a version
 * that exists, for a step >= 1 and a sample count >= 0. Clocks are never negative. */
static bool request_valid(const struct ps_server *s, const struct wire_msg *m)
{
	const struct wire_header *h = &m->h;

	if (h->sender >= s->pc.ec.n || m->idlen == 0 || h->step < 0)
		return false;
	switch (h->type) {
	case WIRE_PUSH:
		return m->n == s->nparams && h->model_version >= 0 &&
		       h->model_version <= core_ps_version(s->core) && h->step >= 1 && h->aux >= 0;
	case WIRE_HELLO:
	case WIRE_PULL:
	case WIRE_BARRIER:
	case WIRE_BYE:
		return h->payload_len == 0;
	default:
		return false;
	}
}

/* Receive frame -> validate -> feed the event -> carry out the actions. */
static void handle(struct ps_server *s, struct wire_msg *m)
{
	uint32_t i = m->h.sender;
	struct ps_worker *w;
	struct core_ps_event ev = { .worker = i, .now_ns = clock_now_ns(), .step = m->h.step };

	if (!request_valid(s, m)) {
		/* Dropped before anything is touched: not a sign of life, not a routing id, not a
		 * step, not a clock. */
		s->st.bad_frames++;
		log_debug("engine_ps: dropped an invalid %s from sender %u", wire_type_name(m->h.type),
			  m->h.sender);
		return;
	}
	w = &s->w[i];
	/* The routing id of the latest message is the way back (a restarted worker has a new
	 * connection). */
	memcpy(w->id, m->id, m->idlen);
	w->idlen = m->idlen;
	w->known = true;
	if (m->h.type == WIRE_PUSH && m->has_frame) {
		/* Updates carry a payload frame, which knows the connection it came on: the one
		 * whose closure means this worker's process is gone (drain_monitor). */
		w->fd = zmq_msg_get(&m->frame, ZMQ_SRCFD);
	} else if (m->h.type == WIRE_HELLO && (m->h.aux & PS_HELLO_JOIN)) {
		w->fd = -1; /* a (re)start: the old connection's closure is no news */
	}
	switch (m->h.type) {
	case WIRE_HELLO:
		ev.kind = CORE_PS_EV_HELLO;
		ev.flags = (m->h.aux & PS_HELLO_JOIN ? CORE_PS_JOIN : 0) |
			   (m->h.aux & PS_HELLO_AGAIN ? CORE_PS_AGAIN : 0);
		break;
	case WIRE_PULL:
		ev.kind = CORE_PS_EV_PULL;
		break;
	case WIRE_PUSH:
		ev.kind = CORE_PS_EV_PUSH;
		ev.version = m->h.model_version;
		ev.samples = m->h.aux;
		break;
	case WIRE_BARRIER:
		ev.kind = CORE_PS_EV_BARRIER;
		break;
	case WIRE_BYE:
		ev.kind = CORE_PS_EV_LEAVE;
		ev.flags = CORE_PS_LEAVE_BYE;
		break;
	default:
		return; /* request_valid took only the types above */
	}
	if (ev.kind == CORE_PS_EV_PUSH) {
		uint32_t waiting;
		size_t n;
		const struct core_ps_action *a;

		if (feed(s, &ev, m) < 0)
			return;
		/* The server trace's row for a push taken (not for a copy sent again). */
		a = core_ps_actions(s->core, &n);
		for (size_t j = 0; j < n; j++) {
			if (a[j].kind != CORE_PS_ACK || a[j].worker != i || a[j].reply)
				continue;
			waiting = (uint32_t)a[j].x;
			trace_update(s, i, a[j].step, a[j].aux, waiting);
		}
		return;
	}
	feed(s, &ev, m);
}

/* Connection closures reported by the ROUTER's monitor (ZMQ_EVENT_DISCONNECTED, value = the
 * fd). A worker is departed when the closed connection is the one its latest update came on:
 * a SIGKILLed process's socket is closed by the kernel, so this is immediate, while a restart
 * (new connection, ZMQ_ROUTER_HANDOVER) or a cut link (no FIN) are left to the other rules. */
static void drain_monitor(struct ps_server *s)
{
	uint16_t event;
	uint32_t value;

	while (wire_monitor_next(s->mon, &event, &value) == 1) {
		if (event != ZMQ_EVENT_DISCONNECTED)
			continue;
		for (uint32_t i = 0; i < s->pc.ec.n; i++) {
			struct core_ps_event ev = { .kind = CORE_PS_EV_LEAVE, .worker = i,
						    .flags = CORE_PS_LEAVE_CLOSED };

			if (!s->w[i].known || s->w[i].fd < 0 || (uint32_t)s->w[i].fd != value)
				continue;
			s->w[i].fd = -1;
			ev.now_ns = clock_now_ns();
			feed(s, &ev, NULL);
		}
	}
}

static void server_free(struct ps_server *s)
{
	core_ps_destroy(&s->core);
	if (s->core_log)
		fclose(s->core_log);
	free(s->w);
	free(s->agg);
	free(s->scaled);
	wire_buf_unref(&s->snap);
	if (s->mon)
		zmq_close(s->mon);
	if (s->sock)
		zmq_close(s->sock);
	if (s->ctx)
		zmq_ctx_term(s->ctx);
	csv_writer_close(&s->eval);
	csv_writer_close(&s->trace);
	ctl_client_close(&s->ctl);
	engine_work_destroy(&s->wk);
	engine_conf_free(&s->pc.ec);
}

int engine_ps_server_run(const struct kv *cfg)
{
	struct ps_server s;
	int64_t next_eval_ns, eval_every_ns;
	size_t maxp;
	const char *core_log;
	int rc;

	memset(&s, 0, sizeof s);
	rc = ps_conf_read(cfg, &s.pc);
	if (rc)
		return rc;
	/* Train-loss sample from the last worker's share: worker 0 writes partition.csv. */
	if (s.pc.ec.n > 1)
		s.pc.ec.index = s.pc.ec.n - 1;
	rc = engine_work_open(cfg, &s.pc.ec, true, &s.wk);
	if (rc)
		goto out;
	s.total = train_total(&s.pc.ec);
	s.nparams = model_nparams(s.wk->model);
	s.w = calloc(s.pc.ec.n, sizeof *s.w);
	s.agg = calloc(s.nparams, sizeof *s.agg);
	s.scaled = calloc(s.nparams, sizeof *s.scaled);
	{
		struct core_ps_conf cc = {
			.n = s.pc.ec.n, .bp = s.pc.bp, .draw = s.pc.draw, .average = s.pc.average,
			.weighting = (enum core_ps_weighting)s.pc.weighting, .seed = s.pc.ec.seed,
			.dead_after_ns = (int64_t)(s.pc.dead_after_s * 1e9),
			.grace_ns = PS_DEPARTED_GRACE_NS, .late = s.pc.ec.late,
		};

		s.core = core_ps_new(&cc);
	}
	if (!s.w || !s.agg || !s.scaled || !s.core) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < s.pc.ec.n; i++)
		s.w[i].fd = -1;
	core_log = kv_get(cfg, "test.core_log");
	if (core_log && *core_log) {
		s.core_log = fopen(core_log, "we");
		if (!s.core_log) {
			rc = -errno;
			log_error("engine_ps: open %s: %s", core_log, strerror(-rc));
			goto out;
		}
	}
	s.eval = engine_eval_open(&s.pc.ec);
	s.trace = engine_server_trace_open(&s.pc.ec);
	if (!s.eval || !s.trace) {
		rc = -EIO;
		goto out;
	}
	maxp = s.nparams * sizeof(float);
	s.ctx = zmq_ctx_new();
	s.sock = s.ctx ? zmq_socket(s.ctx, ZMQ_ROUTER) : NULL;
	if (!s.sock || wire_socket_setup(s.sock, maxp) < 0) {
		rc = -EIO;
		goto out;
	}
	{
		int on = 1;

		/* A restarted worker reuses its routing id: let the new connection take it over. */
		zmq_setsockopt(s.sock, ZMQ_ROUTER_HANDOVER, &on, sizeof on);
	}
	rc = wire_monitor_open(s.ctx, s.sock, ZMQ_EVENT_DISCONNECTED, "ps-server", &s.mon);
	if (rc < 0) {
		log_error("engine_ps: socket monitor: %s", zmq_strerror(-rc));
		goto out;
	}
	if (zmq_bind(s.sock, s.pc.server_ep) < 0) {
		rc = -zmq_errno();
		log_error("engine_ps: bind %s: %s", s.pc.server_ep, zmq_strerror(-rc));
		goto out;
	}
	log_info("engine_ps: server on %s, %u workers, %s (s=%lld beta=%u b=%u, a sample per %s), "
		 "%zu params", s.pc.server_ep, s.pc.ec.n, barrier_kind_name(s.pc.bp.kind),
		 (long long)s.pc.bp.staleness, s.pc.bp.sample, s.pc.bp.backup,
		 barrier_draw_name(s.pc.draw), s.nparams);
	rc = engine_ctl_start(cfg, &s.pc.ec, &s.ctl);
	if (rc == -ECANCELED) {
		rc = 0;
		goto out;
	}
	if (rc)
		goto out;
	eval_every_ns = (int64_t)(s.pc.ec.eval_every_s * 1e9);
	next_eval_ns = clock_now_ns() + eval_every_ns;
	evaluate(&s);
	while (!s.stop) {
		struct wire_msg m;
		struct core_ps_event tick = { .kind = CORE_PS_EV_TICK };
		int64_t now = clock_now_ns();
		int timeout = (int)((next_eval_ns - now) / 1000000);

		if (timeout > 100)
			timeout = 100;
		if (timeout < 0)
			timeout = 0;
		rc = wire_recv(s.sock, true, maxp, timeout, &m, &s.st);
		if (rc < 0 && rc != -EINTR) {
			log_error("engine_ps: recv: %s", strerror(-rc));
			goto out;
		}
		if (rc == 1) {
			handle(&s, &m);
			wire_msg_close(&m);
		}
		now = clock_now_ns();
		/* Silence checks (consistency.dead_after): a departed held worker's request stays
		 * held, so a worker that was only cut off gets its answer when it is back. */
		tick.now_ns = now;
		feed(&s, &tick, NULL);
		drain_monitor(&s);
		if (now >= next_eval_ns) {
			evaluate(&s);
			next_eval_ns = clock_now_ns() + eval_every_ns;
		}
		if (s.ctl) {
			ctl_client_status(s.ctl, core_ps_version(s.core), CTL_RUN, false);
			if (ctl_client_should_stop(s.ctl))
				s.stop = true;
		}
		if (s.pc.ec.stop_time_s > 0 && run_s(&s.pc.ec) >= s.pc.ec.stop_time_s)
			s.stop = true;
		if (core_ps_finished(s.core, now)) {
			log_info("engine_ps: every worker has finished");
			s.stop = true;
		}
	}
	/* Tell everyone it is over (workers that already left ignore it). */
	for (uint32_t i = 0; i < s.pc.ec.n; i++) {
		struct wire_header bye = { .type = WIRE_BYE, .sender = WIRE_SENDER_SERVER,
					   .model_version = core_ps_version(s.core) };

		if (!core_ps_has_left(s.core, i))
			reply(&s, i, &bye, NULL);
	}
	evaluate(&s);
	engine_save_params(&s.pc.ec, model_params(s.wk->model), s.nparams);
	{
		struct core_ps_stats cs;

		core_ps_stats(s.core, &cs);
		log_info("engine_ps: done: version %lld, %llu updates received, %llu dropped, staleness "
			 "mean %.2f max %lld, %llu bad frames, %llu requests sent again after reconnects",
			 (long long)cs.version, (unsigned long long)cs.updates_in,
			 (unsigned long long)cs.dropped,
			 cs.stale_n ? (double)cs.stale_sum / (double)cs.stale_n : 0.0,
			 (long long)cs.stale_max, (unsigned long long)s.st.bad_frames,
			 (unsigned long long)cs.resent_in);
	}
	if (s.ctl) {
		ctl_client_status(s.ctl, core_ps_version(s.core), CTL_DONE, false);
		ctl_client_done(s.ctl);
	}
	rc = 0;
out:
	server_free(&s);
	return rc;
}

/* --- worker --------------------------------------------------------------------------------- */

/* The request whose answers a worker awaits: sent again, as it was, when the connection to
 * the server was re-established after it went out (what the old connection carried is lost). */
struct ps_request {
	bool on;
	uint16_t type;
	int64_t step, version, aux;
	double value;
	const float *payload; /* valid until the answer came (the gradient, or the model) */
	uint32_t len;
	uint64_t conn;        /* handshakes seen when it went out */
};

struct ps_client {
	struct ps_conf pc;
	void *ctx, *sock;
	void *mon;            /* PAIR on the DEALER's monitor: completed handshakes */
	uint64_t handshakes;  /* 1 after the first connection, +1 per reconnect */
	uint64_t resent;
	struct ps_request req;
	struct ctl_client *ctl;
	struct wire_stats st;
	size_t maxp;
	bool bye;
	int64_t last_tx_ns;
};

static int client_send(struct ps_client *c, uint16_t type, int64_t step, int64_t version,
		       int64_t aux, double value, const float *payload, uint32_t len)
{
	struct wire_header h = { .type = type, .sender = c->pc.ec.index, .payload_len = len,
				 .step = step, .model_version = version, .aux = aux, .value = value };
	int rc = wire_send(c->sock, NULL, 0, &h, payload, NULL, false, &c->st);

	c->last_tx_ns = clock_now_ns();
	return rc;
}

/* Send a request that expects answers, and remember it for client_await. */
static int client_request(struct ps_client *c, uint16_t type, int64_t step, int64_t version,
			  int64_t aux, double value, const float *payload, uint32_t len)
{
	c->req = (struct ps_request){ .on = true, .type = type, .step = step, .version = version,
				      .aux = aux, .value = value, .payload = payload, .len = len,
				      .conn = c->handshakes };
	return client_send(c, type, step, version, aux, value, payload, len);
}

/* Count completed handshakes; when the connection came back after the request in flight went
 * out, send it again (a join says so: PS_HELLO_AGAIN). The server answers a copy of what it
 * already handled without applying it twice (on_push, on_join). */
static void client_watch(struct ps_client *c)
{
	uint16_t event;
	uint32_t value;
	struct ps_request *r = &c->req;

	while (c->mon && wire_monitor_next(c->mon, &event, &value) == 1)
		if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
			c->handshakes++;
	/* The first handshake delivers what was queued before it: nothing to send again. */
	if (!r->on || c->handshakes < 2 || c->handshakes <= r->conn)
		return;
	if (r->type == WIRE_HELLO)
		r->aux |= PS_HELLO_AGAIN;
	r->conn = c->handshakes;
	c->resent++;
	log_info("engine_ps: %s reconnected to the server; %s of step %lld sent again", c->pc.ec.name,
		 wire_type_name(r->type), (long long)r->step);
	client_send(c, r->type, r->step, r->version, r->aux, r->value, r->payload, r->len);
}

static bool client_should_stop(struct ps_client *c)
{
	return c->bye || (c->ctl && ctl_client_should_stop(c->ctl)) ||
	       (c->pc.ec.stop_time_s > 0 && run_s(&c->pc.ec) >= c->pc.ec.stop_time_s);
}

/* Whether an awaited answer can be taken: a MODEL carries exactly the model (checked here so a
 * bad one changes nothing), HELLO a clock >= 0, ACK a staleness >= -1. */
static bool reply_valid(const struct ps_client *c, const struct wire_msg *m)
{
	switch (m->h.type) {
	case WIRE_MODEL:
		return m->n * sizeof(float) == c->maxp && m->h.model_version >= 0;
	case WIRE_HELLO:
		return m->h.step >= 0 && m->n == 0;
	case WIRE_ACK:
		return m->h.aux >= -1 && m->n == 0;
	default:
		return true;
	}
}

/* Wait for a message of type `want` answering step `want_step` (-1: any step; a MODEL also
 * answers with a later step: the server moved this worker's clock on after a cut, see
 * resume_at_slowest; other messages are ignored, among them the second answer to a request
 * sent twice, whose step is never later than the request in flight; BYE ends the run). Returns
 * 1 with *m filled, 0 when the run is over (BYE, stop), negative errno on failure. Sends a
 * keep-alive HELLO every second of waiting so the server does not take a held worker for dead,
 * and the request in flight again after a reconnect (client_watch). `barrier`: the awaited reply
 * answers a barrier request (the control plane hears "waiting"). */
static int client_await(struct ps_client *c, uint16_t want, int64_t want_step, struct wire_msg *m,
			int64_t step, bool barrier)
{
	for (;;) {
		int rc;

		if (client_should_stop(c))
			return 0;
		client_watch(c);
		rc = wire_recv(c->sock, false, c->maxp, 100, m, &c->st);
		if (rc < 0 && rc != -EINTR)
			return rc;
		if (rc == 1) {
			if (m->h.type == WIRE_BYE) {
				c->bye = true;
				wire_msg_close(m);
				return 0;
			}
			if (m->h.type == want && (want_step < 0 || m->h.step == want_step ||
						  (want == WIRE_MODEL && m->h.step > want_step))) {
				if (reply_valid(c, m))
					return 1;
				/* Not taken: counted, the wait goes on (until stop) for a good one. */
				c->st.bad_frames++;
			}
			wire_msg_close(m);
		} else if (c->ctl) {
			/* Only a held barrier request is "waiting" (progress.csv, the barrier part
			 * of the step that wait_s measures); a pull or push in flight is data-plane
			 * transfer. */
			ctl_client_status(c->ctl, step, barrier ? CTL_WAIT : CTL_RUN, barrier);
		}
		/* Also while other messages keep coming: they are no reason to fall silent. */
		if (clock_now_ns() - c->last_tx_ns >= PS_KEEPALIVE_NS)
			client_send(c, WIRE_HELLO, step, 0, 0, 0, NULL, 0);
	}
}

/* Install the model carried by m (closing m) as the worker's parameters; its version goes to
 * *version. Averaging keeps the local momentum across rounds, as local SGD does. Returns 1, or
 * -EPROTO for a model of the wrong size. */
static int take_model(struct engine_work *wk, struct wire_msg *m, size_t nparams, int64_t *version)
{
	if (m->n != nparams) {
		log_error("engine_ps: model of %zu floats, expected %zu", m->n, nparams);
		wire_msg_close(m);
		return -EPROTO;
	}
	model_set_params(wk->model, m->payload);
	*version = m->h.model_version;
	wire_msg_close(m);
	return 1;
}

/* Sleep ns, in slices, sending keep-alives and watching for stop. */
static void client_sleep(struct ps_client *c, int64_t ns, int64_t step)
{
	int64_t end = clock_now_ns() + ns;

	while (!client_should_stop(c)) {
		int64_t now = clock_now_ns(), slice = end - now;

		if (slice <= 0)
			return;
		if (slice > 200000000)
			slice = 200000000;
		clock_sleep_ns(slice);
		if (clock_now_ns() - c->last_tx_ns >= PS_KEEPALIVE_NS)
			client_send(c, WIRE_HELLO, step, 0, 0, 0, NULL, 0);
	}
}

int engine_ps_worker_run(const struct kv *cfg)
{
	struct ps_client c;
	struct engine_work *wk = NULL;
	struct straggler *strag;
	struct csv_writer *trace = NULL;
	struct wire_msg m;
	char rid[32];
	int64_t step = 0, version = 0, h_steps, t_asked = 0;
	int64_t want_model = 0; /* the step the next round's MODEL answers (the request's clock) */
	uint64_t row_tx = 0, row_rx = 0, row_bad = 0; /* counters at the previous trace row */
	uint64_t round_samples = 0;
	size_t nparams;
	bool barrier;
	int rc;

	memset(&c, 0, sizeof c);
	rc = ps_conf_read(cfg, &c.pc);
	if (rc)
		return rc;
	/* Averaging: the barrier clock and the server's clocks count rounds of H local steps;
	 * the trace's step column counts local steps. */
	h_steps = c.pc.average ? c.pc.local_steps : 1;
	barrier = c.pc.bp.kind != BARRIER_ASP &&
		  !(barrier_is_sampled(c.pc.bp.kind) && c.pc.bp.sample == 0);
	rc = engine_work_open(cfg, &c.pc.ec, false, &wk);
	if (rc)
		goto out;
	strag = wk->straggler; /* owned by wk; the sleeping is done here, with keep-alives */
	nparams = model_nparams(wk->model);
	c.maxp = nparams * sizeof(float);
	trace = engine_trace_open(&c.pc.ec);
	if (!trace) {
		rc = -EIO;
		goto out;
	}
	c.ctx = zmq_ctx_new();
	c.sock = c.ctx ? zmq_socket(c.ctx, ZMQ_DEALER) : NULL;
	if (!c.sock || wire_socket_setup(c.sock, c.maxp) < 0) {
		rc = -EIO;
		goto out;
	}
	snprintf(rid, sizeof rid, "w%u", c.pc.ec.index);
	zmq_setsockopt(c.sock, ZMQ_ROUTING_ID, rid, strlen(rid));
	{
		int ivl = PS_HEARTBEAT_IVL_MS, tmo = PS_HEARTBEAT_TIMEOUT_MS;

		zmq_setsockopt(c.sock, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
		zmq_setsockopt(c.sock, ZMQ_HEARTBEAT_TIMEOUT, &tmo, sizeof tmo);
	}
	rc = wire_monitor_open(c.ctx, c.sock, ZMQ_EVENT_HANDSHAKE_SUCCEEDED, "ps-worker", &c.mon);
	if (rc < 0) {
		log_error("engine_ps: socket monitor: %s", zmq_strerror(-rc));
		goto out;
	}
	if (zmq_connect(c.sock, c.pc.server_ep) < 0) {
		rc = -zmq_errno();
		log_error("engine_ps: connect %s: %s", c.pc.server_ep, zmq_strerror(-rc));
		goto out;
	}
	rc = engine_ctl_start(cfg, &c.pc.ec, &c.ctl);
	if (rc == -ECANCELED) {
		rc = 0;
		goto out;
	}
	if (rc)
		goto out;
	/* Join: the server answers with the clock to continue from (0 on a first start; a
	 * restarted worker continues where the server last saw it, see on_join) and takes the
	 * join as the first round's request: the model follows once the barrier holds. */
	rc = client_request(&c, WIRE_HELLO, 0, 0, PS_HELLO_JOIN, 0, NULL, 0);
	rc = rc < 0 ? rc : client_await(&c, WIRE_HELLO, -1, &m, 0, false);
	if (rc <= 0)
		goto done;
	t_asked = clock_now_ns();
	step = m.h.step > 0 ? m.h.step * h_steps : 0;
	want_model = m.h.step;
	wire_msg_close(&m);
	if (step > 0)
		log_info("engine_ps: %s rejoins at step %lld", c.pc.ec.name, (long long)step);
	while (!client_should_stop(&c) &&
	       !(c.pc.ec.stop_steps > 0 && step >= c.pc.ec.stop_steps)) {
		int64_t t0, t1;
		double compute_s, wait_s = 0, loss = 0, pause;
		int64_t stale = -1;
		bool first = step % h_steps == 0, last;
		size_t nb = 0;

		/* A round starts with the reply to the request that went out with the previous
		 * push (or the join): MODEL, sent by the server once the barrier of node/barrier
		 * lets this worker start round step/H + 1 (at once for ASP and an empty sample).
		 * wait_s is the time the server held the request (docs/traces.md), bounded by the
		 * time this worker actually spent waiting for the reply. The control plane hears
		 * "waiting" for this interval, so progress.csv's count and wait_s agree. */
		if (first) {
			if (c.ctl && barrier)
				ctl_client_status(c.ctl, step, CTL_WAIT, true);
			rc = client_await(&c, WIRE_MODEL, want_model, &m, step, barrier);
			if (rc > 0 && m.h.step > want_model) {
				/* Cut off while the others went on: the server moved this worker's
				 * clock to the slowest live other's (as for a restart); its step count
				 * continues from there, or it would never reach the clock they wait
				 * for. The trace's step column jumps. */
				log_info("engine_ps: %s was cut off at step %lld, resumes at step %lld",
					 c.pc.ec.name, (long long)step, (long long)(m.h.step * h_steps));
				want_model = m.h.step;
				step = m.h.step * h_steps;
				if (c.pc.ec.stop_steps > 0 && step >= c.pc.ec.stop_steps) {
					rc = take_model(wk, &m, nparams, &version);
					break; /* done already: the model is the run's result */
				}
			}
			if (rc > 0 && barrier) {
				double local_s = (double)(clock_now_ns() - t_asked) / 1e9;

				wait_s = isfinite(m.h.value) && m.h.value > 0 ? m.h.value : 0;
				if (wait_s > local_s)
					wait_s = local_s;
			}
			if (rc > 0)
				rc = take_model(wk, &m, nparams, &version);
			if (rc <= 0)
				break;
			round_samples = 0;
		}
		if (c.ctl)
			ctl_client_status(c.ctl, step, CTL_RUN, false);
		pause = strag ? straggler_pause_left_s(strag, run_s(&c.pc.ec)) : 0;
		if (pause > 0) {
			if (c.ctl)
				ctl_client_status(c.ctl, step, CTL_WAIT, false);
			client_sleep(&c, (int64_t)(pause * 1e9), step);
			if (c.ctl)
				ctl_client_status(c.ctl, step, CTL_RUN, false);
			/* The model taken before the pause is old by now: a round starts from a
			 * fresh one (the barrier already let us through; clocks only grow). */
			if (first && !client_should_stop(&c)) {
				rc = client_request(&c, WIRE_PULL, step, 0, 0, 0, NULL, 0);
				rc = rc < 0 ? rc : client_await(&c, WIRE_MODEL, -1, &m, step, false);
				if (rc > 0)
					rc = take_model(wk, &m, nparams, &version);
				if (rc <= 0)
					break;
			}
		}
		/* Compute (averaging: and take the local step), then stretch by the straggler model. */
		t0 = clock_now_ns();
		rc = engine_work_gradient(wk, &loss, &nb);
		if (rc < 0)
			break;
		if (c.pc.average)
			optim_step(wk->optim, model_params(wk->model), wk->grad);
		round_samples += nb;
		t1 = clock_now_ns();
		compute_s = (double)(t1 - t0) / 1e9;
		{
			double extra = strag ? straggler_step_extra_s(strag, step, compute_s) : 0;

			if (extra > 0) {
				client_sleep(&c, (int64_t)(extra * 1e9), step);
				compute_s += extra;
			}
		}
		/* A round ends after H steps, or early on the last step of stop.steps. Push the
		 * gradient (H = 1) or the model with the samples behind it; the ACK says how stale
		 * the update was (or that it was dropped). A round cut by stop.time is not pushed. */
		last = (step + 1) % h_steps == 0 ||
		       (c.pc.ec.stop_steps > 0 && step + 1 >= c.pc.ec.stop_steps);
		if (last) {
			const float *up = c.pc.average ? model_params(wk->model) : wk->grad;

			if (!wire_payload_finite(up, nparams)) {
				/* The server would drop it as a bad frame and this worker wait for
				 * its answer until the end: say so and stop instead. */
				log_error("engine_ps: %s: the update of step %lld is not finite (the model "
					  "diverged)", c.pc.ec.name, (long long)step);
				rc = -EDOM;
				break;
			}
			want_model = step / h_steps + 1;
			rc = client_request(&c, WIRE_PUSH, want_model, version, (int64_t)round_samples,
					    loss, up, (uint32_t)(nparams * sizeof(float)));
			rc = rc < 0 ? rc : client_await(&c, WIRE_ACK, want_model, &m, step, false);
			if (rc <= 0)
				break;
			t_asked = clock_now_ns();
			stale = m.h.aux;
			wire_msg_close(&m);
		}
		step++;
		/* Trace rows count bytes and bad frames of this step only (docs/traces.md). */
		engine_trace_row(trace, &c.pc.ec, clock_now_ns(), step, compute_s, wait_s, stale, version, loss,
				 c.st.bytes_tx - row_tx, c.st.bytes_rx - row_rx, c.st.bad_frames - row_bad);
		row_tx = c.st.bytes_tx;
		row_rx = c.st.bytes_rx;
		row_bad = c.st.bad_frames;
	}
done:
	if (rc > 0)
		rc = 0;
	if (rc == 0)
		engine_save_params(&c.pc.ec, model_params(wk->model), nparams);
	if (rc == 0 && !c.bye)
		client_send(&c, WIRE_BYE, step, 0, 0, 0, NULL, 0);
	log_info("engine_ps: %s finished after %lld steps (%llu bad frames, %llu requests sent again "
		 "after reconnects)", c.pc.ec.name, (long long)step, (unsigned long long)c.st.bad_frames,
		 (unsigned long long)c.resent);
	if (c.ctl && rc == 0) {
		ctl_client_status(c.ctl, step, CTL_DONE, false);
		ctl_client_done(c.ctl);
	}
out:
	if (c.mon)
		zmq_close(c.mon);
	if (c.sock) {
		/* Let the BYE leave before the socket goes. */
		int linger = 1000;

		zmq_setsockopt(c.sock, ZMQ_LINGER, &linger, sizeof linger);
		zmq_close(c.sock);
	}
	if (c.ctx)
		zmq_ctx_term(c.ctx);
	csv_writer_close(&trace);
	ctl_client_close(&c.ctl);
	engine_work_destroy(&wk);
	engine_conf_free(&c.pc.ec);
	return rc;
}
