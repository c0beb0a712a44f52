/* node/engine_p2p: see engine_p2p.h.
 *
 * Threads. The training loop owns the DEALERs; the service thread owns the ROUTER and the pending
 * CLOCK_REQs; they share `struct shared` under one mutex and an inproc PAIR pipe on which the
 * loop says "tick" (my clock advanced: answer what is now satisfied) or "quit". ZeroMQ sockets
 * never cross threads. The published replica is a reference-counted wire_buf: the service thread
 * sends it zero-copy while the loop already trains the next step on its own copy.
 *
 * Waiting. Replies are awaited by polling the DEALERs in short slices (P2P_SLICE_MS); between
 * slices the loop re-reads the liveness learned from BYEs and the stop conditions, so a peer
 * that left never blocks anybody for longer than a slice. A gossip pull also gives up on a
 * partner that says nothing for consistency.dead_after (node/core_p2p's silence rule). */
#include "node/engine_p2p.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "collectors/csv.h"
#include "collectors/schema.h"
#include "lib/clock.h"
#include "lib/ctl.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "node/barrier.h"
#include "node/core_p2p.h"
#include "node/data.h"
#include "node/engine_common.h"
#include "node/model.h"
#include "node/optim.h"
#include "node/wire.h"

#define P2P_SLICE_MS 20
#define P2P_BYE_LINGER_MS 1000
#define P2P_MAX_PENDING 4096
#define P2P_CATCH_UP_NS CORE_P2P_JOIN_ROUND_NS /* a join's round (the simulator's too) */
#define P2P_WATCH_NS 100000000ll
/* Ensemble, peer 0: how long the final replicas are awaited once the run was stopped (every
 * peer is sending its own then): well inside the supervisor's 15 s between stop and SIGTERM. */
#define P2P_STOP_WAIT_NS 5000000000ll
/* CLOCK_REQ value of a join's request: reply with your view of who departed. */
#define P2P_JOIN_VIEW 1.0
/* MODEL weight of a pull's answer without a replica: its sender has not caught up yet. */
#define P2P_BEHIND -1.0

struct shared {
	pthread_mutex_t mu;
	int64_t clock;              /* steps completed (published) */
	struct wire_buf *published; /* replica after the last completed step */
	double weight;              /* my training samples */
	bool serving;               /* the replica is served (node/core_p2p: not while behind) */
	bool *dead;                 /* BYE seen from peer j */
	bool *departed;             /* the loop's view: peer j is out of barriers and samples */
	bool run_over;              /* a BYE carried the run-over bit */
	float **final;              /* ensemble, peer 0: last unsolicited replica of each peer */
	int64_t *final_clock;       /* ensemble, peer 0: the clock final[j] was sent at */
	int64_t *heard_ns;          /* when a valid frame from peer j last came (0: never) */
	struct wire_stats st;       /* ROUTER traffic (service thread) */
};

struct pending {
	uint8_t id[WIRE_MAX_ID];
	size_t idlen;
	int64_t threshold, seq;
	bool view;                  /* a join's request: the reply carries the departed view */
};

struct service {
	void *router, *pipe;
	uint32_t self, n;
	size_t nparams, max_bytes;
	struct shared *sh;
	struct pending *pend;
	size_t npend;
	struct wire_stats st;
};

int engine_p2p_combine_parse(const char *name, enum p2p_combine *out)
{
	if (!name || !*name || !strcmp(name, "gossip"))
		*out = P2P_GOSSIP;
	else if (!strcmp(name, "average"))
		*out = P2P_AVERAGE;
	else if (!strcmp(name, "ensemble"))
		*out = P2P_ENSEMBLE;
	else
		return -EINVAL;
	return 0;
}

/* --- service thread ------------------------------------------------------------------------ */

/* A CLOCK_REP; with view, its payload is the departed view: per peer 1.0 when this peer counts it
 * as departed, else 0.0 (left out when it would not fit in a replica's frame). */
static void reply_clock(struct service *s, const uint8_t *id, size_t idlen, int64_t clock,
			int64_t seq, bool view)
{
	struct wire_header h = { .type = WIRE_CLOCK_REP, .sender = s->self, .step = clock,
				 .model_version = clock, .aux = seq };
	float v[ENGINE_MAX_NODES];

	pthread_mutex_lock(&s->sh->mu);
	/* A process catching up has no clock of the run's yet: a join does not resume from it. */
	h.value = s->sh->serving ? 0.0 : P2P_BEHIND;
	if (view && s->n * sizeof(float) <= s->max_bytes) {
		for (uint32_t j = 0; j < s->n; j++)
			v[j] = s->sh->departed[j] ? 1.0f : 0.0f;
		h.payload_len = (uint32_t)(s->n * sizeof(float));
	}
	pthread_mutex_unlock(&s->sh->mu);
	wire_send(s->router, id, idlen, &h, h.payload_len ? v : NULL, NULL, true, &s->st);
}

static void answer_pending(struct service *s)
{
	int64_t clock;
	size_t k = 0;

	pthread_mutex_lock(&s->sh->mu);
	clock = s->sh->clock;
	pthread_mutex_unlock(&s->sh->mu);
	for (size_t i = 0; i < s->npend; i++) {
		if (core_p2p_answerable(clock, s->pend[i].threshold))
			reply_clock(s, s->pend[i].id, s->pend[i].idlen, clock, s->pend[i].seq,
				    s->pend[i].view);
		else
			s->pend[k++] = s->pend[i];
	}
	s->npend = k;
}

static void handle_request(struct service *s, struct wire_msg *m)
{
	struct shared *sh = s->sh;
	uint32_t from = m->h.sender;

	/* Only a final replica carries a payload. Anything else is counted and changes nothing
	 * (no pending entry, no liveness). */
	if (from >= s->n || from == s->self || (m->h.type != WIRE_MODEL && m->n != 0)) {
		s->st.bad_frames++;
		return;
	}
	if (sh->heard_ns) {
		int64_t now = clock_now_ns();

		pthread_mutex_lock(&sh->mu);
		sh->heard_ns[from] = now;
		pthread_mutex_unlock(&sh->mu);
	}
	switch (m->h.type) {
	case WIRE_CLOCK_REQ: {
		bool view = m->h.value == P2P_JOIN_VIEW;
		int64_t clock;

		pthread_mutex_lock(&sh->mu);
		clock = sh->clock;
		pthread_mutex_unlock(&sh->mu);
		if (core_p2p_answerable(clock, m->h.model_version)) {
			reply_clock(s, m->id, m->idlen, clock, m->h.aux, view);
		} else if (s->npend < P2P_MAX_PENDING) {
			struct pending *p = &s->pend[s->npend++];

			memcpy(p->id, m->id, m->idlen);
			p->idlen = m->idlen;
			p->threshold = m->h.model_version;
			p->seq = m->h.aux;
			p->view = view;
		}
		break;
	}
	case WIRE_PULL: {
		struct wire_header h = { .type = WIRE_MODEL, .sender = s->self, .aux = m->h.aux };
		struct wire_buf *buf;

		pthread_mutex_lock(&sh->mu);
		buf = sh->serving ? wire_buf_ref(sh->published) : NULL;
		h.step = h.model_version = sh->clock;
		h.value = sh->serving ? sh->weight : P2P_BEHIND;
		pthread_mutex_unlock(&sh->mu);
		/* A process that has not caught up answers with no replica (its model is untrained). */
		h.payload_len = buf ? (uint32_t)(s->nparams * sizeof(float)) : 0;
		wire_send(s->router, m->id, m->idlen, &h, NULL, buf, true, &s->st);
		wire_buf_unref(&buf);
		break;
	}
	case WIRE_MODEL:
		if (m->n != s->nparams || !sh->final) {
			s->st.bad_frames++;
			break;
		}
		pthread_mutex_lock(&sh->mu);
		if (!sh->final[from])
			sh->final[from] = malloc(s->nparams * sizeof(float));
		if (sh->final[from]) {
			memcpy(sh->final[from], m->payload, s->nparams * sizeof(float));
			sh->final_clock[from] = m->h.step;
		}
		pthread_mutex_unlock(&sh->mu);
		break;
	case WIRE_BYE:
		pthread_mutex_lock(&sh->mu);
		sh->dead[from] = true;
		if (m->h.aux & 1)
			sh->run_over = true;
		pthread_mutex_unlock(&sh->mu);
		break;
	default:
		s->st.bad_frames++;
		break;
	}
}

static void *service_main(void *arg)
{
	struct service *s = arg;

	for (;;) {
		zmq_pollitem_t it[2] = { { .socket = s->pipe, .events = ZMQ_POLLIN },
					 { .socket = s->router, .events = ZMQ_POLLIN } };
		struct wire_msg m;

		if (zmq_poll(it, 2, -1) < 0) {
			if (zmq_errno() == EINTR)
				continue;
			log_error("p2p: service poll: %s", zmq_strerror(zmq_errno()));
			break;
		}
		if (it[0].revents & ZMQ_POLLIN) {
			char cmd = 0;

			if (zmq_recv(s->pipe, &cmd, 1, ZMQ_DONTWAIT) >= 0) {
				if (cmd == 'q')
					break;
				answer_pending(s);
			}
		}
		if (it[1].revents & ZMQ_POLLIN) {
			/* At most a batch per pass, so a busy ROUTER never starves the pipe. */
			for (int k = 0; k < 256 &&
					wire_recv(s->router, true, s->max_bytes, 0, &m, &s->st) == 1; k++) {
				handle_request(s, &m);
				wire_msg_close(&m);
			}
		}
		pthread_mutex_lock(&s->sh->mu);
		s->sh->st = s->st;
		pthread_mutex_unlock(&s->sh->mu);
	}
	return NULL;
}

/* --- training loop -------------------------------------------------------------------------- */

/* Ensemble, peer 0: each member's part in the final combination (ensemble.csv's state). */
enum p2p_member {
	P2P_MEMBER_WAITING = 0,     /* not accounted for yet */
	P2P_MEMBER_SELF,            /* peer 0's own replica */
	P2P_MEMBER_FINAL,           /* its final replica came: combined */
	P2P_MEMBER_LEFT,            /* said BYE without a final replica: missing */
	P2P_MEMBER_CRASHED,         /* its connection closed without a BYE: missing */
	P2P_MEMBER_SILENT,          /* nothing from it for consistency.dead_after: missing */
	P2P_MEMBER_LATE,            /* still running when the wait ended (its cap or a stop) */
};

static const char *member_name(enum p2p_member m)
{
	switch (m) {
	case P2P_MEMBER_SELF: return "self";
	case P2P_MEMBER_FINAL: return "final";
	case P2P_MEMBER_LEFT: return "left";
	case P2P_MEMBER_CRASHED: return "crashed";
	case P2P_MEMBER_SILENT: return "silent";
	case P2P_MEMBER_WAITING:
	case P2P_MEMBER_LATE: return "late";
	}
	return "late";
}

struct peer {
	struct engine_conf c;
	struct engine_work *wk;
	struct barrier_params bp;
	enum p2p_combine combine;
	int64_t local_steps;
	uint32_t fanout;
	double dead_after_s;        /* consistency.dead_after: a silent peer's end (0 = none) */
	struct ctl_client *ctl;

	void *zctx, *pipe, **dealer;
	void **mon;                 /* per dealer: its monitor (completed handshakes) */
	uint64_t *conns;            /* per dealer: handshakes so far (1 = first connection) */
	uint64_t *sent_conn;        /* per dealer: handshakes when this exchange's request went */
	uint64_t resent;            /* requests sent again after a reconnect */
	struct core_p2p *core;      /* every barrier and gossip decision (node/core_p2p) */
	int64_t watched_ns;         /* when refresh last read every connection's events */
	bool *down;                 /* per peer: its connection closed (a crash) or it has not
				     * joined yet; out of every barrier and sample until it connects */
	size_t nparams, max_bytes;
	struct shared sh;
	struct service svc;
	pthread_t thread;
	bool thread_started, mutex_ready;

	int64_t clock;
	int64_t seq;
	bool *alive;
	struct wire_stats st;       /* DEALER traffic */
	bool stop_all;              /* this peer ends the run for everybody (stop.accuracy) */
	bool joining;               /* catch_up's clock exchange: answers go to the core's join */
	bool pulling;               /* a gossip round's pull: a silent partner is given up on */
	uint64_t silenced;          /* partners given up on as silent */
	uint64_t behind;            /* pulls answered without a replica: the owner was catching up */
	enum p2p_member *member;    /* ensemble, peer 0: each peer's part in the final combination */
	int64_t *gone_ns;           /* ensemble, peer 0: when wait_for_finals first saw peer j out */
	int64_t *quiet_ns;          /* ensemble, peer 0: when peer j was found silent (0: it is not) */
	bool *view;                 /* scratch: a join answer's departed view */
	/* replies of one exchange */
	bool *asked, *got;
	float **models;
	double *weights;
	int64_t *their_clock;
};

static void watch(struct peer *p, uint32_t j);

/* Refresh alive[] from the BYEs the service thread has seen and the connections that closed or
 * came back. Returns true when the run is over for this peer (run-over bit, control-plane stop,
 * stop.time). */
static bool refresh(struct peer *p, bool check_time)
{
	bool over;

	/* Every connection's events at most every P2P_WATCH_NS (n - 1 monitors: not per step of
	 * a fast model); the peers an exchange waits for are watched on each of its slices. */
	if (clock_now_ns() - p->watched_ns >= P2P_WATCH_NS) {
		for (uint32_t j = 0; j < p->c.n; j++)
			if (j != p->c.index)
				watch(p, j);
		p->watched_ns = clock_now_ns();
	}
	pthread_mutex_lock(&p->sh.mu);
	for (uint32_t j = 0; j < p->c.n; j++) {
		p->alive[j] = j == p->c.index || (!p->sh.dead[j] && !p->down[j]);
		/* A request from a silent peer: it is back among the gossip partners. */
		if (p->sh.heard_ns[j] && core_p2p_on_heard(p->core, j, p->sh.heard_ns[j]))
			log_info("p2p: peer %u is heard from again: back among the gossip partners", j);
	}
	over = p->sh.run_over;
	pthread_mutex_unlock(&p->sh.mu);
	/* The core adds its own rule (a peer a join took out stays out until reached). */
	for (uint32_t j = 0; j < p->c.n; j++) {
		core_p2p_set_alive(p->core, j, p->alive[j]);
		p->alive[j] = core_p2p_is_alive(p->core, j);
	}
	pthread_mutex_lock(&p->sh.mu);
	for (uint32_t j = 0; j < p->c.n; j++)
		p->sh.departed[j] = !p->alive[j];
	pthread_mutex_unlock(&p->sh.mu);
	if (p->ctl && ctl_client_should_stop(p->ctl))
		over = true;
	if (check_time && p->c.stop_time_s > 0 &&
	    (double)(clock_now_ns() - p->c.origin_ns) / 1e9 >= p->c.stop_time_s)
		over = true;
	return over;
}

/* Follow the connection to peer j: a completed handshake (counted: requests in flight are sent
 * again after a reconnect) makes it reachable, a closed connection (its process died: the
 * kernel closed its sockets) unreachable until ZeroMQ connects again. A peer that finished
 * said BYE before it closed. */
static void watch(struct peer *p, uint32_t j)
{
	uint16_t event;
	uint32_t value;

	while (p->mon[j] && wire_monitor_next(p->mon[j], &event, &value) == 1) {
		if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
			p->conns[j]++;
			core_p2p_on_reached(p->core, j);
			/* its process took part in the handshake: not stopped */
			if (core_p2p_on_heard(p->core, j, clock_now_ns()))
				log_info("p2p: peer %u answered a handshake: back among the gossip "
					 "partners", j);
			if (p->down[j])
				log_info("p2p: peer %u is reachable (again)", j);
			p->down[j] = false;
		} else if (event == ZMQ_EVENT_DISCONNECTED && !p->down[j]) {
			p->down[j] = true;
			log_info("p2p: connection to peer %u closed: out of barriers and samples until it "
				 "is back", j);
		}
	}
}

static int send_request(struct peer *p, uint32_t j, enum wire_type type, int64_t threshold,
			int64_t seq)
{
	struct wire_header h = { .type = (uint16_t)type, .sender = p->c.index, .step = p->clock,
				 .model_version = threshold, .aux = seq };

	if (type == WIRE_CLOCK_REQ && p->joining)
		h.value = P2P_JOIN_VIEW;
	return wire_send(p->dealer[j], NULL, 0, &h, NULL, NULL, true, &p->st);
}

/* Send `type` requests to the peers with asked[j] set and wait for every reply (or the peer's
 * BYE). threshold is the CLOCK_REQ threshold. Fills got[], their_clock[], and for MODEL
 * replies models[j] and weights[j]. Returns 0, or -ECANCELED when the run ended meanwhile. */
static int exchange_until(struct peer *p, enum wire_type type, int64_t threshold,
			  int64_t deadline_ns);

/* A join's CLOCK_REP from peer j into the core, with its departed view when it carries one. */
static void join_answer(struct peer *p, uint32_t j, const struct wire_msg *m)
{
	bool has_view = m->n == p->c.n;

	for (uint32_t k = 0; has_view && k < p->c.n; k++)
		p->view[k] = m->payload[k] != 0.0f;
	if (m->h.value < 0)
		core_p2p_join_on_behind(p->core, j, has_view ? p->view : NULL);
	else
		core_p2p_join_on_answer(p->core, j, m->h.step, has_view ? p->view : NULL);
}

static int exchange(struct peer *p, enum wire_type type, int64_t threshold)
{
	return exchange_until(p, type, threshold, 0);
}

/* exchange, giving up on the replies still missing at deadline_ns (0: never). */
static int exchange_until(struct peer *p, enum wire_type type, int64_t threshold,
			  int64_t deadline_ns)
{
	uint32_t n = p->c.n, left = 0;
	zmq_pollitem_t *items = NULL;
	uint32_t *which = NULL;
	int64_t seq = ++p->seq, sent_ns;
	int rc = 0;

	items = calloc(n, sizeof *items);
	which = calloc(n, sizeof *which);
	if (!items || !which) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t j = 0; j < n; j++) {
		p->got[j] = false;
		if (!p->asked[j])
			continue;
		watch(p, j);
		p->sent_conn[j] = p->conns[j];
		rc = send_request(p, j, type, threshold, seq);
		if (rc < 0 && rc != -EAGAIN) {
			log_error("p2p: send %s to peer %u: %s", wire_type_name(type), j,
				  zmq_strerror(-rc));
			goto out;
		}
		/* A full queue towards a peer that is not up yet: retried when it answers nothing. */
		rc = 0;
		left++;
	}
	sent_ns = clock_now_ns();
	while (left > 0) {
		uint32_t k = 0;
		int prc;

		if (refresh(p, true)) {
			rc = -ECANCELED;
			goto out;
		}
		for (uint32_t j = 0; j < n; j++) {
			if (!p->asked[j] || p->got[j])
				continue;
			watch(p, j);
			/* Left the run, or (a join) counted departed by the peers that answered and
			 * never reached: nothing to wait for. */
			if (!p->alive[j] || (p->joining && !core_p2p_join_waits_for(p->core, j))) {
				p->asked[j] = false;
				left--;
				continue;
			}
			/* What a broken connection carried is lost: after ZeroMQ reconnected, the
			 * request goes again (same seq: a second reply is ignored). */
			if (p->conns[j] >= 2 && p->conns[j] > p->sent_conn[j]) {
				p->sent_conn[j] = p->conns[j];
				p->resent++;
				log_info("p2p: reconnected to peer %u; %s sent again", j,
					 wire_type_name(type));
				if (send_request(p, j, type, threshold, seq) < 0)
					log_warn("p2p: could not send %s to peer %u again",
						 wire_type_name(type), j);
			}
			items[k] = (zmq_pollitem_t){ .socket = p->dealer[j], .events = ZMQ_POLLIN };
			which[k++] = j;
		}
		if (k == 0 || (deadline_ns > 0 && clock_now_ns() >= deadline_ns))
			break;
		prc = zmq_poll(items, (int)k, P2P_SLICE_MS);
		if (prc < 0 && zmq_errno() != EINTR) {
			rc = -zmq_errno();
			goto out;
		}
		for (uint32_t i = 0; prc > 0 && i < k; i++) {
			uint32_t j = which[i];
			struct wire_msg m;

			if (!(items[i].revents & ZMQ_POLLIN))
				continue;
			while (p->asked[j] && !p->got[j] &&
			       wire_recv(p->dealer[j], false, p->max_bytes, 0, &m, &p->st) == 1) {
				bool ok = m.h.sender == j && m.h.aux == seq &&
					  m.h.type == (type == WIRE_PULL ? WIRE_MODEL : WIRE_CLOCK_REP);

				if (ok && type == WIRE_PULL) {
					/* The answer asked for, but unusable: a replica of the wrong
					 * size or a weight that is not a finite count of samples is
					 * counted and changes nothing; the peer stays awaited. A peer
					 * that has not caught up answers without one: not waited for,
					 * nothing merged. */
					enum core_p2p_reply what = core_p2p_pull_reply(m.n, p->nparams,
										       m.h.value);

					ok = what == CORE_P2P_REPLY_REPLICA;
					if (what == CORE_P2P_REPLY_BAD)
						p->st.bad_frames++;
					if (what == CORE_P2P_REPLY_BEHIND) {
						core_p2p_on_heard(p->core, j, clock_now_ns());
						if (p->behind++ == 0)
							log_info("p2p: peer %u is catching up: its replica "
								 "is left out until it has", j);
						p->asked[j] = false;
						left--;
					}
					if (ok) {
						memcpy(p->models[j], m.payload,
						       p->nparams * sizeof(float));
						p->weights[j] = m.h.value;
					}
				}
				if (ok && type == WIRE_CLOCK_REQ && m.h.step < threshold)
					ok = false;
				if (ok) {
					p->got[j] = true;
					p->their_clock[j] = m.h.step;
					core_p2p_on_heard(p->core, j, clock_now_ns());
					core_p2p_on_clock(p->core, j, m.h.step);
					if (p->joining && type == WIRE_CLOCK_REQ)
						join_answer(p, j, &m);
					left--;
				}
				wire_msg_close(&m);
			}
		}
		/* A gossip partner that neither answered nor said anything else for
		 * consistency.dead_after (stopped, or behind a black-holed link, though its connection
		 * stands): the round goes on without it, and the core leaves it out of the draws until
		 * it is heard from. Decided after a slice's poll, so a reply already queued (this peer
		 * was the one stopped, say) is taken, not mistaken for silence. */
		for (uint32_t i = 0; p->pulling && i < k; i++) {
			uint32_t j = which[i];

			if (p->got[j] || !core_p2p_pull_gives_up(p->core, j, sent_ns, clock_now_ns()))
				continue;
			p->silenced++;
			log_warn("p2p: %s: peer %u silent for %.1f s at clock %lld: left out of the "
				 "gossip partners until it is heard from", p->c.name, j, p->dead_after_s,
				 (long long)p->clock);
			p->asked[j] = false;
			left--;
		}
	}
out:
	free(items);
	free(which);
	return rc;
}

/* The barrier before step clock+1: node/core_p2p says whom to ask for their clock and whether
 * the answers let this peer go on. Returns 0, or -ECANCELED when the run ended meanwhile. */
static int barrier_wait(struct peer *p)
{
	const uint32_t *ask;
	int64_t thr;
	size_t k;
	int rc;

	if (p->bp.kind == BARRIER_ASP || p->c.n < 2)
		return 0;
	refresh(p, false);
	k = core_p2p_barrier_begin(p->core, p->clock, &thr, &ask);
	if (k == 0)
		return 0;
	memset(p->asked, 0, p->c.n * sizeof *p->asked);
	for (size_t i = 0; i < k; i++)
		p->asked[ask[i]] = true;
	if (p->ctl)
		ctl_client_status(p->ctl, p->clock, CTL_WAIT, true);
	rc = exchange(p, WIRE_CLOCK_REQ, thr);
	if (rc)
		return rc;
	refresh(p, false);
	/* Every checked peer has now answered with a clock >= thr, or left the run. */
	if (!core_p2p_barrier_end(p->core, p->clock)) {
		log_error("p2p: barrier at clock %lld passed without its condition",
			  (long long)p->clock);
		return -EPROTO;
	}
	return 0;
}

/* Pull `fanout` replicas and merge them into mine. *staleness gets the largest lag of a merged
 * replica behind my clock (-1 when nothing was merged). Returns 0 or negative errno. */
static int gossip(struct peer *p, int64_t *staleness)
{
	uint32_t n = p->c.n;
	float *w = model_params(p->wk->model);
	const uint32_t *partners;
	double total, mine;
	size_t k;
	int rc;

	*staleness = -1;
	refresh(p, false);
	k = core_p2p_gossip_partners(p->core, &partners);
	if (k == 0)
		return 0;
	memset(p->asked, 0, n * sizeof *p->asked);
	for (size_t i = 0; i < k; i++)
		p->asked[partners[i]] = true;
	p->pulling = true;
	rc = exchange(p, WIRE_PULL, 0);
	p->pulling = false;
	if (rc)
		return rc;
	mine = core_p2p_own_weight(p->core, p->wk->train->n);
	total = mine;
	for (uint32_t j = 0; j < n; j++) {
		if (!p->got[j])
			continue;
		p->weights[j] = core_p2p_merge_weight(p->core, p->weights[j]);
		total += p->weights[j];
		if (p->clock - p->their_clock[j] > *staleness)
			*staleness = p->clock - p->their_clock[j];
	}
	if (total == mine)
		return 0;
	for (size_t e = 0; e < p->nparams; e++) {
		double v = mine * w[e];

		for (uint32_t j = 0; j < n; j++)
			if (p->got[j])
				v += p->weights[j] * p->models[j][e];
		w[e] = (float)(v / total);
	}
	if (*staleness < 0)
		*staleness = 0;
	return 0;
}

static int publish(struct peer *p);

/* A restarted or late peer: the others went on without it. It continues from the slowest
 * answering peer's clock with that peer's replica, as a restarted parameter-server worker
 * resumes at the slowest live clock. The answers carry each peer's view of who departed:
 * node/core_p2p's join does not wait for a peer they count as departed and that this process
 * never reached (it crashed before we started), and takes it out until it is reached. The
 * others are asked in rounds of P2P_CATCH_UP_NS; while nobody answered, the join asks again as
 * long as core_p2p_join_next finds a peer that may answer (bounded by the run's end), and says
 * so each round: a peer that goes on from its own clock under BSP makes every other wait while
 * it redoes every step. Only when nobody is left to wait for does it go on alone, with a
 * warning. The replica is asked for the same way, while its owner is live and not silent. */
static int catch_up(struct peer *p)
{
	uint32_t n = p->c.n, from;
	const uint32_t *peers;
	int64_t t0 = clock_now_ns(), t1;
	enum core_p2p_join_next next;
	size_t k;
	int64_t lo;
	int rc;

	refresh(p, false);
	k = core_p2p_join_begin(p->core, &peers);
	memset(p->asked, 0, n * sizeof *p->asked);
	for (size_t i = 0; i < k; i++)
		p->asked[peers[i]] = true;
	for (;;) {
		p->joining = true;
		rc = exchange_until(p, WIRE_CLOCK_REQ, 0, clock_now_ns() + P2P_CATCH_UP_NS);
		p->joining = false;
		if (rc)
			return rc;
		refresh(p, false);
		next = core_p2p_join_next(p->core, clock_now_ns() - t0, P2P_CATCH_UP_NS);
		if (next != CORE_P2P_JOIN_AGAIN)
			break;
		memset(p->asked, 0, n * sizeof *p->asked);
		for (uint32_t j = 0; j < n; j++)
			p->asked[j] = core_p2p_is_alive(p->core, j) &&
				      core_p2p_join_waits_for(p->core, j);
		log_warn("p2p: %s: no peer answered the join in %.1f s; asking again",
			 p->c.name, (double)(clock_now_ns() - t0) / 1e9);
	}
	from = core_p2p_join_end(p->core, p->clock, &lo);
	for (uint32_t j = 0; j < n; j++)
		if (j != p->c.index && !core_p2p_is_alive(p->core, j) && p->alive[j])
			log_info("p2p: peer %u did not answer the join and was never reached: out "
				 "until it is", j);
	refresh(p, false);
	log_info("p2p: join's clock exchange took %.3f s", (double)(clock_now_ns() - t0) / 1e9);
	if (next == CORE_P2P_JOIN_ALONE)
		log_warn("p2p: %s: no peer answered the join in %.1f s and none is left to wait "
			 "for: going on alone from clock %lld", p->c.name,
			 (double)(clock_now_ns() - t0) / 1e9, (long long)p->clock);
	if (from == UINT32_MAX)
		return 0;
	t1 = clock_now_ns();
	for (;;) {
		uint64_t behind = p->behind;

		memset(p->asked, 0, n * sizeof *p->asked);
		p->asked[from] = true;
		rc = exchange_until(p, WIRE_PULL, 0, clock_now_ns() + P2P_CATCH_UP_NS);
		if (rc)
			return rc;
		refresh(p, false);
		/* (a peer that answered the join as caught up does not fall behind again: a restart
		 * is a new process on new connections) */
		if (p->got[from] || p->behind > behind ||
		    !core_p2p_resume_asks_again(p->core, from, clock_now_ns() - t1))
			break;
		log_warn("p2p: %s: peer %u's replica did not come in %.1f s; asking again",
			 p->c.name, from, (double)(clock_now_ns() - t1) / 1e9);
	}
	if (p->got[from]) {
		memcpy(model_params(p->wk->model), p->models[from], p->nparams * sizeof(float));
		lo = p->their_clock[from];
		log_info("p2p: %s rejoins at clock %lld (peer %u's replica)", p->c.name,
			 (long long)lo, from);
	} else {
		log_warn("p2p: %s rejoins at clock %lld (peer %u's clock); its replica did not come "
			 "in %.1f s: training goes on from this process's own model", p->c.name,
			 (long long)lo, from, (double)(clock_now_ns() - t1) / 1e9);
	}
	p->clock = lo;
	return 0;
}

/* Make the current replica and clock visible to the service thread. */
static int publish(struct peer *p)
{
	struct wire_buf *buf = wire_buf_new(p->nparams), *old;
	char tick = 't';

	if (!buf)
		return -ENOMEM;
	memcpy(wire_buf_data(buf), model_params(p->wk->model), p->nparams * sizeof(float));
	if (!wire_payload_finite(wire_buf_data(buf), p->nparams)) {
		/* Every peer would reject it (node/wire) and wait on: say so and stop instead. */
		log_error("p2p: %s: the replica at clock %lld is not finite (the model diverged)",
			  p->c.name, (long long)p->clock);
		wire_buf_unref(&buf);
		return -EDOM;
	}
	pthread_mutex_lock(&p->sh.mu);
	old = p->sh.published;
	p->sh.published = buf;
	p->sh.clock = p->clock;
	p->sh.serving = core_p2p_serves_replica(p->core);
	pthread_mutex_unlock(&p->sh.mu);
	wire_buf_unref(&old);
	zmq_send(p->pipe, &tick, 1, ZMQ_DONTWAIT);
	return 0;
}

static int evaluate(struct peer *p, struct csv_writer *ev, bool final, double *acc)
{
	struct eval_result te, tr;
	struct model *scratch = NULL;
	const float **set = NULL;
	size_t k = 0;
	int rc;

	if (p->combine != P2P_ENSEMBLE) {
		rc = engine_work_eval(p->wk, p->wk->model, &te, &tr);
		goto row;
	}
	set = calloc(p->c.n, sizeof *set);
	scratch = model_new(model_get_spec(p->wk->model), p->c.seed);
	if (!set || !scratch) {
		rc = -ENOMEM;
		goto out;
	}
	memset(p->asked, 0, p->c.n * sizeof *p->asked);
	memset(p->got, 0, p->c.n * sizeof *p->got);
	if (!final) {
		int64_t silence_ns = (int64_t)(p->dead_after_s * 1e9), t0;

		refresh(p, false);
		pthread_mutex_lock(&p->sh.mu);
		for (uint32_t j = 0; j < p->c.n; j++) {
			/* A member that was silent is asked again once it was heard from. */
			if (p->quiet_ns[j] && p->sh.heard_ns[j] > p->quiet_ns[j])
				p->quiet_ns[j] = 0;
			p->asked[j] = j != p->c.index && p->alive[j] && !p->quiet_ns[j];
		}
		pthread_mutex_unlock(&p->sh.mu);
		t0 = clock_now_ns();
		rc = exchange_until(p, WIRE_PULL, 0, silence_ns > 0 ? t0 + silence_ns : 0);
		if (rc == -ECANCELED)
			rc = 0; /* the run is ending: evaluate what arrived */
		if (rc)
			goto out;
		/* consistency.dead_after without an answer from a member still connected (stopped, or
		 * behind a black-holed link): the evaluations go on without it, not one wait each. */
		for (uint32_t j = 0; silence_ns > 0 && j < p->c.n; j++)
			if (p->asked[j] && !p->got[j] && clock_now_ns() - t0 >= silence_ns) {
				p->quiet_ns[j] = clock_now_ns();
				log_warn("p2p: ensemble: peer %u silent for %.1f s: left out of the "
					 "evaluations until it is heard from", j, p->dead_after_s);
			}
	}
	set[k++] = model_params(p->wk->model);
	pthread_mutex_lock(&p->sh.mu);
	for (uint32_t j = 0; j < p->c.n; j++) {
		if (p->got[j])
			set[k++] = p->models[j];
		else if (p->sh.final[j] && (!final || p->member[j] == P2P_MEMBER_FINAL))
			set[k++] = p->sh.final[j];
	}
	pthread_mutex_unlock(&p->sh.mu);
	/* final[] is written only by the service thread's MODEL handler, which allocates each slot
	 * once and then copies in place; at the end every sender has said BYE after its MODEL. */
	rc = engine_work_eval_ensemble(p->wk, scratch, set, k, &te, &tr);
	log_info("p2p: ensemble of %zu replicas", k);
row:
	if (rc)
		goto out;
	*acc = te.accuracy;
	log_info("p2p: t %.1f s, clock %lld, test accuracy %.4f, loss %.4f",
		 (double)(clock_now_ns() - p->c.origin_ns) / 1e9, (long long)p->clock, te.accuracy,
		 te.loss);
	rc = engine_eval_row(ev, &p->c, p->wk, (uint64_t)p->clock, p->wk->samples, &te, &tr);
out:
	model_destroy(&scratch);
	free(set);
	return rc;
}

/* Ensemble, peer 0 at the end: wait until every other peer is accounted for, and mark each in
 * member[]: its final replica came (it sends it before its BYE), or it is gone without one: it
 * said BYE, its connection closed (a crash: no BYE will ever come), or it sent nothing for
 * consistency.dead_after seconds since the wait began (stopped, or cut off behind a black-holed
 * link). A closed connection is taken for a crash only after P2P_BYE_LINGER_MS more: a peer that
 * ends closes its sockets right after its final replica and BYE, which the service thread may
 * not have read yet when the monitor reports the close. The wait is bounded by
 * P2P_ENSEMBLE_WAIT_S, and by P2P_STOP_WAIT_NS from the control plane's stop (which every
 * member gets at once: their finals are on their way, so the stop does not end the wait at
 * once); whoever is still running then is `late`. Whatever is missing, the live members'
 * replicas are combined. */
static void wait_for_finals(struct peer *p)
{
	int64_t start = clock_now_ns();
	int64_t deadline = start + (int64_t)P2P_ENSEMBLE_WAIT_S * 1000000000LL;
	int64_t silence_ns = (int64_t)(p->dead_after_s * 1e9);
	uint32_t n = p->c.n, missing = 0;
	bool stopped = false;

	for (;;) {
		bool all = true;
		int64_t now;

		/* BYEs seen, connections closed (or back), the core's rule; the run's stop */
		if (refresh(p, false) && !stopped) {
			stopped = true;
			if (deadline - clock_now_ns() > P2P_STOP_WAIT_NS)
				deadline = clock_now_ns() + P2P_STOP_WAIT_NS;
		}
		now = clock_now_ns();
		pthread_mutex_lock(&p->sh.mu);
		for (uint32_t j = 0; j < n; j++) {
			int64_t heard = p->sh.heard_ns[j] > start ? p->sh.heard_ns[j] : start;

			if (p->alive[j])
				p->gone_ns[j] = 0;      /* (back) connected */
			if (j == p->c.index) {
				p->member[j] = P2P_MEMBER_SELF;
			} else if (p->member[j] != P2P_MEMBER_WAITING) {
				/* decided: a final that came later than its departure changes nothing */
			} else if (p->sh.final[j] && p->sh.dead[j]) {
				p->member[j] = P2P_MEMBER_FINAL;
			} else if (p->sh.dead[j]) {
				p->member[j] = P2P_MEMBER_LEFT;
			} else if (!p->alive[j]) {
				if (!p->gone_ns[j])
					p->gone_ns[j] = now;
				if (now - p->gone_ns[j] >= (int64_t)P2P_BYE_LINGER_MS * 1000000LL)
					p->member[j] = p->sh.final[j] ? P2P_MEMBER_FINAL
								      : P2P_MEMBER_CRASHED;
				else
					all = false;
			} else if (silence_ns > 0 && now - heard > silence_ns) {
				p->member[j] = P2P_MEMBER_SILENT;
			} else {
				all = false;
			}
		}
		pthread_mutex_unlock(&p->sh.mu);
		if (all || now >= deadline)
			break;
		clock_sleep_ns(P2P_SLICE_MS * 1000000LL); /* a poll slice, as exchanges wait */
	}
	pthread_mutex_lock(&p->sh.mu);
	for (uint32_t j = 0; j < n; j++) {
		/* A final replica that came is combined even when the wait was cut short. */
		if (p->member[j] == P2P_MEMBER_WAITING)
			p->member[j] = p->sh.final[j] ? P2P_MEMBER_FINAL : P2P_MEMBER_LATE;
		if (p->member[j] != P2P_MEMBER_SELF && p->member[j] != P2P_MEMBER_FINAL) {
			missing++;
			log_warn("p2p: ensemble: peer %u is missing from the final combination (%s)", j,
				 member_name(p->member[j]));
		}
	}
	pthread_mutex_unlock(&p->sh.mu);
	log_info("p2p: ensemble: %u of %u members combined after %.3f s of waiting", n - missing, n,
		 (double)(clock_now_ns() - start) / 1e9);
}

/* Ensemble, peer 0: RUN_DIR/ensemble.csv, one row per member of the final combination. */
static int write_members(struct peer *p)
{
	char path[PATH_MAX], clock_s[24], fallback[24];
	struct csv_writer *w;
	double t = (double)(clock_now_ns() - p->c.origin_ns) / 1e9;
	int rc = 0;

	if (snprintf(path, sizeof path, "%s/ensemble.csv", p->c.run_dir) >= (int)sizeof path)
		return -ENAMETOOLONG;
	w = csv_writer_open(path, TRACE_HEADER_ENSEMBLE);
	if (!w)
		return -EIO;
	for (uint32_t j = 0; j < p->c.n && rc == 0; j++) {
		const char *name = fallback;
		int64_t clock = -1;

		if (p->c.names)
			name = p->c.names[j];
		else
			snprintf(fallback, sizeof fallback, "peer%u", j);
		if (p->member[j] == P2P_MEMBER_SELF)
			clock = p->clock;
		else if (p->member[j] == P2P_MEMBER_FINAL) {
			pthread_mutex_lock(&p->sh.mu);
			clock = p->sh.final_clock[j];
			pthread_mutex_unlock(&p->sh.mu);
		}
		clock_s[0] = '\0';
		if (clock >= 0)
			snprintf(clock_s, sizeof clock_s, "%lld", (long long)clock);
		rc = csv_writer_row(w, "%.6f,%s,%s,%s,%s", t < 0 ? 0 : t, p->c.name, name, clock_s,
				    member_name(p->member[j]));
	}
	csv_writer_close(&w);
	return rc;
}

/* Leaving: (ensemble) my final replica to peer 0, then BYE to every peer. */
static void say_bye(struct peer *p)
{
	int linger = P2P_BYE_LINGER_MS;

	for (uint32_t j = 0; j < p->c.n; j++) {
		struct wire_header h = { .type = WIRE_BYE, .sender = p->c.index, .step = p->clock,
					 .model_version = p->clock, .aux = p->stop_all ? 1 : 0 };

		if (j == p->c.index)
			continue;
		if (p->combine == P2P_ENSEMBLE && j == 0) {
			struct wire_header mh = { .type = WIRE_MODEL, .sender = p->c.index,
						  .step = p->clock, .model_version = p->clock,
						  .value = (double)p->wk->train->n,
						  .payload_len = (uint32_t)(p->nparams * sizeof(float)) };

			wire_send(p->dealer[j], NULL, 0, &mh, model_params(p->wk->model), NULL, true,
				  &p->st);
		}
		wire_send(p->dealer[j], NULL, 0, &h, NULL, NULL, true, &p->st);
		zmq_setsockopt(p->dealer[j], ZMQ_LINGER, &linger, sizeof linger);
	}
}

static int read_params(const struct kv *cfg, struct peer *p)
{
	const char *kind = kv_get(cfg, "consistency.barrier");
	int64_t stale = 0, sample = 0, fanout = 1, h = 1;
	int rc;

	memset(&p->bp, 0, sizeof p->bp);
	if (kind && *kind && barrier_kind_parse(kind, &p->bp.kind) < 0) {
		log_error("p2p: unknown consistency.barrier '%s'", kind);
		return -EINVAL;
	}
	if (!kind || !*kind)
		p->bp.kind = BARRIER_ASP;
	if (engine_p2p_combine_parse(kv_get(cfg, "consistency.combine"), &p->combine) < 0) {
		log_error("p2p: unknown consistency.combine '%s' (gossip|average|ensemble)",
			  kv_get(cfg, "consistency.combine"));
		return -EINVAL;
	}
	rc = kv_get_i64(cfg, "consistency.staleness", 0, &stale);
	rc = rc ? rc : kv_get_i64(cfg, "consistency.sample", 0, &sample);
	rc = rc ? rc : kv_get_i64(cfg, "consistency.fanout", 1, &fanout);
	rc = rc ? rc : kv_get_i64(cfg, "consistency.local_steps", 1, &h);
	rc = rc ? rc : kv_get_double(cfg, "consistency.dead_after", 0, &p->dead_after_s);
	if (rc)
		return rc;
	if (stale < 0 || sample < 0 || sample > ENGINE_MAX_NODES || fanout < 0 ||
	    fanout > ENGINE_MAX_NODES || h < 1 ||
	    !(p->dead_after_s >= 0 && p->dead_after_s <= 86400)) {
		log_error("p2p: bad consistency.staleness / sample / fanout / local_steps / dead_after");
		return -EINVAL;
	}
	p->bp.staleness = stale;
	p->bp.sample = (uint32_t)sample;
	p->fanout = (uint32_t)fanout;
	p->local_steps = h;
	return 0;
}

static int peer_setup(struct peer *p)
{
	uint32_t n = p->c.n;
	char ep[160], pipe_ep[64];

	p->nparams = model_nparams(p->wk->model);
	p->max_bytes = p->nparams * sizeof(float);
	p->alive = calloc(n, sizeof *p->alive);
	p->asked = calloc(n, sizeof *p->asked);
	p->got = calloc(n, sizeof *p->got);
	p->weights = calloc(n, sizeof *p->weights);
	p->their_clock = calloc(n, sizeof *p->their_clock);
	p->models = calloc(n, sizeof *p->models);
	p->dealer = calloc(n, sizeof *p->dealer);
	p->mon = calloc(n, sizeof *p->mon);
	p->conns = calloc(n, sizeof *p->conns);
	p->sent_conn = calloc(n, sizeof *p->sent_conn);
	p->down = calloc(n, sizeof *p->down);
	{
		struct core_p2p_conf cc = { .n = n, .self = p->c.index, .bp = p->bp,
					    .fanout = p->fanout, .local_steps = p->local_steps,
					    .merge = p->combine != P2P_ENSEMBLE,
					    .weighted = p->combine == P2P_AVERAGE, .seed = p->c.seed,
					    .dead_after_ns = (int64_t)(p->dead_after_s * 1e9),
					    /* whether this process is a restart is known at its
					     * start: nothing is served before */
					    .behind = true };

		p->core = core_p2p_new(&cc);
	}
	p->sh.dead = calloc(n, sizeof *p->sh.dead);
	p->sh.departed = calloc(n, sizeof *p->sh.departed);
	p->view = calloc(n, sizeof *p->view);
	p->sh.heard_ns = calloc(n, sizeof *p->sh.heard_ns);
	if (p->combine == P2P_ENSEMBLE && p->c.index == 0) {
		p->sh.final = calloc(n, sizeof(float *));
		p->sh.final_clock = calloc(n, sizeof *p->sh.final_clock);
		p->member = calloc(n, sizeof *p->member);
		p->gone_ns = calloc(n, sizeof *p->gone_ns);
		p->quiet_ns = calloc(n, sizeof *p->quiet_ns);
	}
	if (!p->core || !p->alive || !p->asked || !p->got || !p->weights ||
	    !p->their_clock || !p->models || !p->dealer || !p->mon || !p->conns || !p->sent_conn ||
	    !p->down ||
	    !p->sh.dead || !p->sh.departed || !p->view || !p->sh.heard_ns ||
	    (p->combine == P2P_ENSEMBLE && p->c.index == 0 &&
	     (!p->sh.final || !p->sh.final_clock || !p->member || !p->gone_ns ||
	      !p->quiet_ns)))
		return -ENOMEM;
	for (uint32_t j = 0; j < n; j++) {
		if (j == p->c.index)
			continue;
		p->models[j] = malloc(p->max_bytes);
		if (!p->models[j])
			return -ENOMEM;
	}
	if (pthread_mutex_init(&p->sh.mu, NULL))
		return -ENOMEM;
	p->mutex_ready = true;
	p->sh.weight = (double)p->wk->train->n;
	p->zctx = zmq_ctx_new();
	if (!p->zctx)
		return -ENOMEM;
	/* Per other peer a DEALER, its monitor PAIR and libzmq's monitor socket. */
	zmq_ctx_set(p->zctx, ZMQ_MAX_SOCKETS, (int)(3 * n + 64));
	/* The ROUTER is bound before anybody is told we are ready. */
	p->svc.router = zmq_socket(p->zctx, ZMQ_ROUTER);
	if (!p->svc.router || wire_socket_setup(p->svc.router, p->max_bytes) < 0)
		return -EIO;
	if (engine_conf_endpoint(&p->c, p->c.index, ep, sizeof ep) < 0)
		return -EINVAL;
	if (zmq_bind(p->svc.router, ep) < 0) {
		log_error("p2p: bind %s: %s", ep, zmq_strerror(zmq_errno()));
		return -zmq_errno();
	}
	for (uint32_t j = 0; j < n; j++) {
		if (j == p->c.index)
			continue;
		char name[32];

		p->dealer[j] = zmq_socket(p->zctx, ZMQ_DEALER);
		if (!p->dealer[j] || wire_socket_setup(p->dealer[j], p->max_bytes) < 0)
			return -EIO;
		snprintf(name, sizeof name, "p2p-%u", j);
		if (wire_monitor_open(p->zctx, p->dealer[j],
				      ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED, name,
				      &p->mon[j]) < 0) {
			log_error("p2p: socket monitor: %s", zmq_strerror(zmq_errno()));
			return -EIO;
		}
		if (engine_conf_endpoint(&p->c, j, ep, sizeof ep) < 0 ||
		    zmq_connect(p->dealer[j], ep) < 0) {
			log_error("p2p: connect %s: %s", ep, zmq_strerror(zmq_errno()));
			return -EIO;
		}
	}
	snprintf(pipe_ep, sizeof pipe_ep, "inproc://p2p-service-%u", p->c.index);
	p->pipe = zmq_socket(p->zctx, ZMQ_PAIR);
	p->svc.pipe = zmq_socket(p->zctx, ZMQ_PAIR);
	if (!p->pipe || !p->svc.pipe || zmq_bind(p->pipe, pipe_ep) < 0 ||
	    zmq_connect(p->svc.pipe, pipe_ep) < 0)
		return -EIO;
	p->svc.self = p->c.index;
	p->svc.n = n;
	p->svc.nparams = p->nparams;
	p->svc.max_bytes = p->max_bytes;
	p->svc.sh = &p->sh;
	p->svc.pend = calloc(P2P_MAX_PENDING, sizeof *p->svc.pend);
	if (!p->svc.pend)
		return -ENOMEM;
	if (publish(p) < 0)
		return -ENOMEM;
	if (pthread_create(&p->thread, NULL, service_main, &p->svc))
		return -EAGAIN;
	p->thread_started = true;
	return 0;
}

static void peer_teardown(struct peer *p)
{
	if (p->thread_started) {
		char q = 'q';

		zmq_send(p->pipe, &q, 1, 0);
		pthread_join(p->thread, NULL);
	}
	if (p->svc.router)
		zmq_close(p->svc.router);
	if (p->svc.pipe)
		zmq_close(p->svc.pipe);
	if (p->pipe)
		zmq_close(p->pipe);
	for (uint32_t j = 0; p->mon && j < p->c.n; j++)
		if (p->mon[j])
			zmq_close(p->mon[j]);
	for (uint32_t j = 0; p->dealer && j < p->c.n; j++)
		if (p->dealer[j])
			zmq_close(p->dealer[j]);
	if (p->zctx)
		zmq_ctx_term(p->zctx);
	for (uint32_t j = 0; j < p->c.n; j++) {
		if (p->models)
			free(p->models[j]);
		if (p->sh.final)
			free(p->sh.final[j]);
	}
	wire_buf_unref(&p->sh.published);
	if (p->mutex_ready)
		pthread_mutex_destroy(&p->sh.mu);
	free(p->svc.pend);
	free(p->sh.final);
	free(p->sh.final_clock);
	free(p->sh.heard_ns);
	free(p->member);
	free(p->gone_ns);
	free(p->quiet_ns);
	free(p->sh.dead);
	free(p->sh.departed);
	free(p->view);
	free(p->models);
	free(p->dealer);
	free(p->mon);
	free(p->conns);
	free(p->sent_conn);
	free(p->down);
	core_p2p_destroy(&p->core);
	free(p->alive);
	free(p->asked);
	free(p->got);
	free(p->weights);
	free(p->their_clock);
}

int engine_p2p_run(const struct kv *cfg)
{
	struct peer *p = calloc(1, sizeof *p);
	struct csv_writer *trace = NULL, *ev = NULL;
	int64_t last_eval_ns;
	bool over = false;
	double acc = 0;
	int rc;

	if (!p)
		return -ENOMEM;
	rc = engine_conf_read(cfg, &p->c);
	if (rc) {
		free(p);
		return rc;
	}
	rc = read_params(cfg, p);
	rc = rc ? rc : engine_work_open(cfg, &p->c, p->c.index == 0, &p->wk);
	rc = rc ? rc : peer_setup(p);
	if (rc)
		goto out;
	/* Peers that join late (workers.late) are out of every barrier until they connect. */
	for (uint32_t j = 0; j < p->c.n; j++)
		p->down[j] = p->c.late[j] && j != p->c.index;
	refresh(p, false); /* the departed view the service thread answers joins with */
	trace = engine_trace_open(&p->c);
	ev = p->c.index == 0 ? engine_eval_open(&p->c) : NULL;
	if (!trace || (p->c.index == 0 && !ev)) {
		rc = -EIO;
		goto out;
	}
	rc = engine_ctl_start(cfg, &p->c, &p->ctl);
	if (rc == -ECANCELED) {
		rc = 0;
		goto bye;
	}
	if (rc)
		goto out;
	if (p->c.rejoined) {
		rc = catch_up(p);
		if (rc == -ECANCELED) {
			rc = 0;
			goto bye;
		}
		if (rc)
			goto out;
	}
	/* Started, and a restart caught up (or alone): the replica is this run's from now on. */
	core_p2p_caught_up(p->core);
	rc = publish(p);
	if (rc)
		goto out;
	log_info("p2p: %s peer %u of %u, %s barrier, combine %d, fanout %u, H %lld, %u samples",
		 p->c.name, p->c.index, p->c.n, barrier_kind_name(p->bp.kind), (int)p->combine,
		 p->fanout, (long long)p->local_steps, p->wk->train->n);
	last_eval_ns = clock_now_ns();
	while (!over) {
		uint64_t tx0, rx0, bad0, tx1, rx1, bad1;
		int64_t t0, t1, t2, t3, stale = -1;
		double loss;
		size_t nb;

		if (engine_conf_stop_reached(&p->c, p->clock) || refresh(p, true))
			break;
		pthread_mutex_lock(&p->sh.mu);
		tx0 = p->st.bytes_tx + p->sh.st.bytes_tx;
		rx0 = p->st.bytes_rx + p->sh.st.bytes_rx;
		bad0 = p->st.bad_frames + p->sh.st.bad_frames;
		pthread_mutex_unlock(&p->sh.mu);
		t0 = clock_now_ns();
		rc = barrier_wait(p);
		if (rc == 0 && core_p2p_gossip_due(p->core, p->clock))
			rc = gossip(p, &stale);
		if (rc == -ECANCELED) {
			rc = 0;
			break;
		}
		if (rc)
			goto out;
		if (p->ctl)
			ctl_client_status(p->ctl, p->clock, CTL_RUN, false);
		t1 = clock_now_ns();
		rc = engine_work_gradient(p->wk, &loss, &nb);
		if (rc)
			goto out;
		optim_step(p->wk->optim, model_params(p->wk->model), p->wk->grad);
		t2 = clock_now_ns();
		engine_work_straggle(p->wk, &p->c, p->clock, (double)(t2 - t1) / 1e9);
		t3 = clock_now_ns();
		p->clock++;
		pthread_mutex_lock(&p->sh.mu);
		tx1 = p->st.bytes_tx + p->sh.st.bytes_tx;
		rx1 = p->st.bytes_rx + p->sh.st.bytes_rx;
		bad1 = p->st.bad_frames + p->sh.st.bad_frames;
		pthread_mutex_unlock(&p->sh.mu);
		/* The row before the publish: a row's t_s never follows the moment others see it. */
		rc = engine_trace_row(trace, &p->c, t3, p->clock, (double)(t3 - t1) / 1e9,
				      (double)(t1 - t0) / 1e9, stale, p->clock, loss, tx1 - tx0,
				      rx1 - rx0, bad1 - bad0);
		rc = rc ? rc : publish(p);
		if (rc)
			goto out;
		if (ev && p->c.eval_every_s > 0 &&
		    (double)(clock_now_ns() - last_eval_ns) / 1e9 >= p->c.eval_every_s &&
		    !engine_conf_stop_reached(&p->c, p->clock)) {
			rc = evaluate(p, ev, false, &acc);
			if (rc)
				goto out;
			if (p->c.stop_accuracy > 0 && acc >= p->c.stop_accuracy) {
				log_info("p2p: stop.accuracy %.4f reached", p->c.stop_accuracy);
				p->stop_all = true;
				over = true;
			}
			last_eval_ns = clock_now_ns();
		}
	}
	if (ev) {
		if (p->combine == P2P_ENSEMBLE)
			wait_for_finals(p);
		rc = evaluate(p, ev, true, &acc);
		if (rc == 0 && p->combine == P2P_ENSEMBLE)
			rc = write_members(p);
		if (rc)
			goto out;
	}
	rc = engine_save_params(&p->c, model_params(p->wk->model), p->nparams);
	if (rc)
		goto out;
	log_info("p2p: %s done after %lld steps (%llu requests sent again after reconnects, %llu "
		 "gossip partners given up on as silent, %llu pulls answered by a peer catching up)",
		 p->c.name, (long long)p->clock, (unsigned long long)p->resent,
		 (unsigned long long)p->silenced, (unsigned long long)p->behind);
	if (p->ctl) {
		ctl_client_status(p->ctl, p->clock, CTL_DONE, false);
		ctl_client_done(p->ctl);
	}
bye:
	say_bye(p);
out:
	if (rc)
		log_error("p2p: %s stopped at clock %lld: %s", p->c.name, (long long)p->clock,
			  strerror(-rc));
	csv_writer_close(&trace);
	csv_writer_close(&ev);
	ctl_client_close(&p->ctl);
	peer_teardown(p);
	engine_work_destroy(&p->wk);
	engine_conf_free(&p->c);
	free(p);
	return rc;
}
