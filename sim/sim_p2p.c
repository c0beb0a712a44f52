/* sim/sim_p2p: see sim_p2p.h.
 *
 * One event loop over sim/sim_heap. Peer i's life is node/engine_p2p's training loop with the
 * waiting replaced by events; at clock c (steps completed):
 *   begin     core_p2p_barrier_begin: the peers to ask; CLOCK_REQ(threshold) to each, in
 *             index order as the engine sends them (none: straight on)
 *   answers   each CLOCK_REP goes into core_p2p_on_clock; a BYE takes its sender out
 *             (core_p2p_set_alive) and out of the answers awaited; when none is left,
 *             core_p2p_barrier_end must hold (else the run fails: the core and the driver
 *             disagree)
 *   gossip    core_p2p_gossip_due: PULL to core_p2p_gossip_partners, each MODEL reply's clock
 *             into core_p2p_on_clock; the staleness of the step is my clock minus the oldest
 *             merged replica's clock
 *   compute   sim/sim_node's step time (after a pause window), then clock c+1: the trace row,
 *             and the held CLOCK_REQs that the new clock satisfies are answered
 *             (core_p2p_answerable), in the order they came
 * A peer's service thread answers at once whatever its loop does (a CLOCK_REQ it can answer, a
 * PULL with its last published clock); a peer that said BYE answers nothing. stop.steps ends a
 * peer with a BYE to every other; a planned leave too. A crash ends a life (a generation tag
 * voids its events and the answers to its requests); a restart or a late join starts a new one
 * with the engine's catch_up, asked in the engine's rounds (CORE_P2P_JOIN_ROUND_NS) with the
 * core deciding after each (core_p2p_join_next, core_p2p_resume_asks_again). Until its catch-up
 * is over a peer's core says it serves nothing (core_p2p_serves_replica): its answers are the
 * engine's "behind" ones, a CLOCK_REP no join resumes from and a MODEL without a replica that no
 * gossip round merges. A gossip pull a partner has not answered for dead_after is given up as
 * the engine gives it up (core_p2p_pull_gives_up: silent until heard from, core_p2p_on_heard). A
 * new process's connections complete their handshakes under the loss in force (sim_net_connect:
 * SYN retries, none through a blackout), and its requests to a peer go once its connection to
 * that peer is up, as ZeroMQ queues them. Nothing runs past stop.time.
 *
 * Messages live in a pool (an event carries the message's index); a request carries the
 * requester's exchange number, so a late answer to an exchange that ended (its sender said BYE
 * meanwhile) is not taken for an answer to the next one, as the engine matches seq. */
#include "sim/sim_p2p.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/csv.h"
#include "collectors/schema.h"
#include "node/core_p2p.h"
#include "node/wire.h"
#include "orchestrator/nodeconf.h"
#include "sim/sim_heap.h"
#include "sim/sim_net.h"
#include "sim/sim_node.h"
#include "sim/sim_profile.h"
#include "sim/sim_record.h"
#include "sim/sim_replicas.h"
#include "sim/sim_status.h"

#define SIM_P2P_SAMPLE_NS 100000000ll /* progress.csv period, as the orchestrator samples */
#define SIM_P2P_SMALL WIRE_HEADER_BYTES

enum p2p_ev { EV_MSG = 1, EV_COMPUTE, EV_BEGIN, EV_SAMPLE, EV_LEAVE, EV_NET, EV_EVAL, EV_CRASH, EV_START,
	      EV_DEADLINE, EV_SILENCE };
/* M_DOWN, M_UP: not messages but a connection closing (a crash) or completing its handshake (a
 * restart, a join), noticed by the other end one propagation delay later */
enum p2p_msg { M_CLOCK_REQ = 1, M_CLOCK_REP, M_PULL, M_MODEL, M_BYE, M_DOWN, M_UP };
/* P_OFF: crashed, or not joined yet; P_CATCHUP / P_RESUME: a rejoining peer asking every peer
 * for its clock / pulling the slowest one's replica */
enum p2p_state { P_BARRIER = 1, P_GOSSIP, P_COMPUTE, P_DONE, P_OFF, P_CATCHUP, P_RESUME };

struct msg {
	int64_t value;      /* CLOCK_REQ: threshold; CLOCK_REP, MODEL: the sender's clock */
	struct sim_replica_snap *snap; /* MODEL with train real: the replica sent (a reference) */
	bool *view;         /* CLOCK_REP to a join: the responder's departed view (n, owned) */
	uint32_t from, to;
	uint32_t seq;       /* the requester's exchange number */
	uint32_t next_free;
	uint16_t gen;       /* the requester's life (a restart is a new process: new connections) */
	uint8_t type;
	bool join;          /* CLOCK_REQ of a join: the reply carries the responder's view */
	bool behind;        /* CLOCK_REP, MODEL: the sender was catching up (no clock to resume
			     * from, no replica: the engine's weight -1) */
};

struct held {              /* a CLOCK_REQ a peer holds until its clock reaches the threshold */
	int64_t threshold;
	uint32_t from, seq;
	uint16_t gen;
};

struct peer {
	struct core_p2p *core;
	struct held *held;
	uint32_t nheld, capheld;
	uint32_t clock;
	uint32_t left;      /* answers still awaited in this exchange */
	uint32_t seq;       /* exchange number */
	uint16_t gen;       /* life: a crash ends one, its events and answers are void after */
	uint8_t state;
	bool crossing;      /* the barrier of this step asked somebody */
	int64_t t0, t1;     /* the step's start (barrier) and compute start, ns */
	int64_t stale;      /* the step's staleness, -1 = no merge */
	int64_t lag;        /* the largest lag of a replica merged in this step (-1: none ahead) */
	bool merged;        /* a replica came in this step's gossip round */
	uint64_t tx, rx;    /* bytes sent and received during the step (both roles) */
	/* train real: the replicas this gossip round pulled (at most fanout) */
	struct sim_replica_snap **got;
	uint32_t *got_from;
	uint32_t ngot;
	/* rejoining (node/engine_p2p's catch_up) */
	int64_t join_t0;    /* when the join began: its rounds' waiting so far */
	int64_t pull_t0;    /* when the replica pull began */
	int64_t deadline_ns; /* the round's end */
	int64_t pull_asked_ns; /* when this gossip round's pulls went (core_p2p_pull_gives_up) */
	bool gave_up;       /* this life's core found a partner silent: what is heard is reported
			     * to it (else there is nothing to report: core_p2p_on_heard would
			     * find nobody silent, at a cache miss per message) */
	bool silence_pending; /* an EV_SILENCE of this life is queued (one at a time: a round that
			       * ends before it is due costs no event of its own) */
	int64_t resume_clock; /* the clock to go on from: the join's, then the replica's */
	uint32_t resume_from;
	bool pulled;        /* the pull was answered (a replica, or its owner is behind) */
	struct sim_replica_snap *resume_snap; /* train real: the replica the catch-up pulled */
};

struct p2p {
	const struct sim_opts *o;
	const struct plan_run *run;
	const struct scenario *sc;
	uint32_t n;
	uint32_t *node_of;
	struct peer *p;
	uint8_t *awaited;   /* n x n: awaited[i * n + j], peer i awaits an answer of j */
	int64_t *answered_at; /* n x n: [j * n + i], when j last answered i (the connection of i's
			       * requests: its sender's idle time, INT64_MIN = never) */
	int64_t *conn_at;   /* n x n when a peer restarts or joins late, else NULL: [i * n + j],
			     * when i's connection to j completed its handshake (i's requests to j
			     * wait for it, as ZeroMQ queues them; INT64_MAX: not within the run) */
	struct msg *msgs;
	uint32_t nmsgs, capmsgs, free_msg;
	struct sim_heap *heap;
	struct sim_net *net;
	struct sim_node *node;
	struct sim_profile *profile;
	struct sim_record *rec;
	bool *late;                 /* peers that join late: out of every core until they connect */
	struct core_p2p_conf cc;    /* every peer's core configuration (self aside) */
	struct sim_replicas *rep;   /* train real, else NULL */
	double *wbuf;               /* a merge's weights (n) */
	struct csv_writer *eval;
	bool stop_acc;              /* peer 0 reached stop.accuracy */
	int64_t last_eval_ns;
	uint64_t model_bytes, events, updates;
	size_t silence_queued;      /* EV_SILENCE events in the heap (not activity: see idle) */
	int64_t stop_ns;
	struct sim_status st;
};

static void push_gen(struct p2p *s, int64_t t, uint32_t who, enum p2p_ev kind, uint16_t gen)
{
	sim_status_push(&s->st, s->heap, t, who, (uint16_t)kind, gen);
}

static void push_ev(struct p2p *s, int64_t t, uint32_t who, enum p2p_ev kind)
{
	push_gen(s, t, who, kind, 0);
}

/* Send a message of `type` from peer a to peer b at now. Returns its index in the pool
 * (UINT32_MAX when out of memory), valid until it is delivered. */
static uint32_t send_msg(struct p2p *s, uint32_t a, uint32_t b, enum p2p_msg type, int64_t value,
			 uint32_t seq, uint16_t gen, int64_t now)
{
	/* an answer of a peer catching up says so and carries no replica (the service thread reads
	 * the core's word when it answers) */
	bool behind = (type == M_CLOCK_REP || type == M_MODEL) && !core_p2p_serves_replica(s->p[a].core);
	uint64_t bytes = type == M_MODEL && !behind ? s->model_bytes : SIM_P2P_SMALL;
	uint32_t id;
	int64_t t;

	if (s->free_msg != UINT32_MAX) {
		id = s->free_msg;
		s->free_msg = s->msgs[id].next_free;
	} else {
		if (s->nmsgs == s->capmsgs) {
			uint32_t cap = s->capmsgs ? 2 * s->capmsgs : 1024;
			struct msg *m = realloc(s->msgs, cap * sizeof *m);

			if (!m) {
				sim_status_fail(&s->st, -ENOMEM, "out of memory (messages)");
				return UINT32_MAX;
			}
			s->msgs = m;
			s->capmsgs = cap;
		}
		id = s->nmsgs++;
	}
	s->msgs[id] = (struct msg){ .value = value, .from = a, .to = b, .seq = seq, .gen = gen,
				    .type = (uint8_t)type, .behind = behind, .next_free = UINT32_MAX };
	if (type == M_MODEL && s->rep && !behind)
		s->msgs[id].snap = sim_replicas_published(s->rep, a);
	if (type == M_DOWN) { /* noticed one propagation delay later */
		push_ev(s, now + sim_net_delay_ns(s->net, s->node_of[a], s->node_of[b]), id, EV_MSG);
		return id;
	}
	if (type == M_UP) {
		/* b's connection to a completes its handshake (SYN retries under the loss in
		 * force: none through a blackout); b notices it then */
		t = sim_net_connect(s->net, s->node_of[b], s->node_of[a], now, s->stop_ns);
		if (s->conn_at)
			s->conn_at[(size_t)b * s->n + a] = t;
		if (t == INT64_MAX)
			goto unsent;
		push_ev(s, t, id, EV_MSG);
		return id;
	}
	if (s->conn_at && (type == M_CLOCK_REQ || type == M_PULL)) {
		/* a request goes once a's connection to b is up (ZeroMQ queues it until then) */
		int64_t c = s->conn_at[(size_t)a * s->n + b];

		if (c == INT64_MAX)
			goto unsent;
		if (c > now)
			now = c;
	}
	s->p[a].tx += bytes;
	/* answers go back over the requester's connection, whose sender may have been idle */
	t = sim_net_send(s->net, s->node_of[a], s->node_of[b], bytes, now, NULL,
			 type == M_CLOCK_REP || type == M_MODEL ? &s->answered_at[(size_t)a * s->n + b] : NULL);
	push_ev(s, t, id, EV_MSG);
	return id;
unsent: /* a handshake or a request (no replica in it) that never goes: back to the pool */
	s->msgs[id].next_free = s->free_msg;
	s->free_msg = id;
	return UINT32_MAX;
}

static void start_compute(struct p2p *s, uint32_t i, int64_t now);
static void after_barrier(struct p2p *s, uint32_t i, int64_t now);
static void answered(struct p2p *s, uint32_t i, uint32_t j, int64_t now);

/* Ask every peer j with awaited[i][j] set, in index order (as the engine's exchange sends). */
static void ask_all(struct p2p *s, uint32_t i, enum p2p_msg type, int64_t threshold, int64_t now)
{
	struct peer *p = &s->p[i];

	p->seq++;
	for (uint32_t j = 0; j < s->n; j++) {
		uint32_t id;

		if (!s->awaited[(size_t)i * s->n + j])
			continue;
		id = send_msg(s, i, j, type, threshold, p->seq, p->gen, now);
		/* a join's clock request asks for the view too (node/engine_p2p's catch_up) */
		if (id != UINT32_MAX && type == M_CLOCK_REQ && p->state == P_CATCHUP)
			s->msgs[id].join = true;
	}
}

/* The barrier before step clock+1 (engine_p2p's barrier_wait). */
static void begin_step(struct p2p *s, uint32_t i, int64_t now)
{
	struct peer *p = &s->p[i];
	const uint32_t *ask;
	int64_t thr;
	size_t k;

	p->t0 = now;
	p->stale = p->lag = -1;
	p->merged = false;
	p->tx = p->rx = 0;
	p->crossing = false;
	k = core_p2p_barrier_begin(p->core, p->clock, &thr, &ask);
	if (k == 0) {
		after_barrier(s, i, now);
		return;
	}
	for (size_t a = 0; a < k; a++)
		s->awaited[(size_t)i * s->n + ask[a]] = 1;
	p->crossing = true;
	p->left = (uint32_t)k;
	p->state = P_BARRIER;
	sim_record_waiting(s->rec, i, true);
	ask_all(s, i, M_CLOCK_REQ, thr, now);
}

/* Every checked peer answered or left: the condition must hold; then gossip, if due. */
static void after_barrier(struct p2p *s, uint32_t i, int64_t now)
{
	struct peer *p = &s->p[i];
	const uint32_t *partners;
	size_t k;

	sim_record_waiting(s->rec, i, false);
	if (p->crossing && !core_p2p_barrier_end(p->core, p->clock)) {
		sim_status_fail(&s->st, -EPROTO, "peer %u: the barrier at clock %u passed without its condition", i, p->clock);
		return;
	}
	if (!core_p2p_gossip_due(p->core, p->clock) ||
	    (k = core_p2p_gossip_partners(p->core, &partners)) == 0) {
		start_compute(s, i, now);
		return;
	}
	for (size_t a = 0; a < k; a++)
		s->awaited[(size_t)i * s->n + partners[a]] = 1;
	p->left = (uint32_t)k;
	p->state = P_GOSSIP;
	p->pull_asked_ns = now;
	/* a partner silent for dead_after is given up on (node/engine_p2p's exchange checks after
	 * each poll slice; the core rules); the check that is queued moves on to this round's time
	 * when it comes */
	if (s->cc.dead_after_ns > 0 && !p->silence_pending) {
		p->silence_pending = true;
		s->silence_queued++;
		push_gen(s, now + s->cc.dead_after_ns, i, EV_SILENCE, p->gen);
	}
	ask_all(s, i, M_PULL, 0, now);
}

/* The gossip round of peer i has waited dead_after: the partners that have not answered are
 * given up on as the core says (core_p2p_pull_gives_up: silent until heard from again). */
static void silence(struct p2p *s, uint32_t i, int64_t now)
{
	struct peer *p = &s->p[i];

	for (uint32_t j = 0; j < s->n && p->state == P_GOSSIP; j++)
		if (s->awaited[(size_t)i * s->n + j] && core_p2p_pull_gives_up(p->core, j, p->pull_asked_ns, now)) {
			p->gave_up = true;
			answered(s, i, j, now);
		}
}

static void start_compute(struct p2p *s, uint32_t i, int64_t now)
{
	struct peer *p = &s->p[i];
	int64_t c = sim_node_step_ns(s->node, i, p->clock);

	/* a pause window is part of the step's compute, as the engine's straggler model sleeps */
	p->t1 = now;
	p->state = P_COMPUTE;
	push_gen(s, sim_node_after_pause(s->node, i, now) + c, i, EV_COMPUTE, p->gen);
}

/* Peer i says BYE to every other and is done. */
static void bye(struct p2p *s, uint32_t i, int64_t now)
{
	struct peer *p = &s->p[i];

	if (p->state == P_DONE)
		return;
	if (p->state == P_OFF) { /* a crashed peer that was to leave: it never comes back */
		p->state = P_DONE;
		return;
	}
	p->state = P_DONE;
	p->nheld = 0;
	sim_record_live(s->rec, i, false);
	for (uint32_t j = 0; j < s->n; j++)
		if (j != i)
			send_msg(s, i, j, M_BYE, p->clock, 0, p->gen, now);
}

/* Publish: answer the held requests the clock now satisfies (the service thread's
 * answer_pending), in the order they came. */
static void answer_held(struct p2p *s, uint32_t i, int64_t now)
{
	struct peer *p = &s->p[i];
	uint32_t k = 0;

	for (uint32_t h = 0; h < p->nheld; h++) {
		if (core_p2p_answerable(p->clock, p->held[h].threshold))
			send_msg(s, i, p->held[h].from, M_CLOCK_REP, p->clock, p->held[h].seq, p->held[h].gen, now);
		else
			p->held[k++] = p->held[h];
	}
	p->nheld = k;
}

/* The step is computed: the new clock, the row, the held requests it satisfies. */
static void step_done(struct p2p *s, uint32_t i, int64_t now)
{
	struct peer *p = &s->p[i];
	int rc;

	if (s->rep) {
		double loss;

		if ((rc = sim_replicas_step(s->rep, i, &loss)) < 0) {
			sim_status_fail(&s->st, rc, "peer %u: training step failed", i);
			return;
		}
	}
	p->clock++;
	s->updates++;
	rc = sim_record_step(s->rec, i, now, p->clock, (now - p->t1) / 1e9, (p->t1 - p->t0) / 1e9, p->stale,
			     p->clock, p->tx, p->rx);
	if (rc < 0) {
		sim_status_fail(&s->st, rc, "write the trace of peer %u failed", i);
		return;
	}
	answer_held(s, i, now);
	p->tx = p->rx = 0;
	if (s->sc->stop_steps && p->clock >= s->sc->stop_steps) {
		bye(s, i, now);
		return;
	}
	p->state = P_BARRIER;
	push_gen(s, now + sim_node_gap_ns(s->node, i, p->clock), i, EV_BEGIN, p->gen);
}

/* train real: peer i merges the replicas its gossip round pulled, in peer order as the engine
 * sums them, weighted as its core says. */
static void merge(struct p2p *s, uint32_t i)
{
	struct peer *p = &s->p[i];
	double *w = s->wbuf;
	int rc;

	for (uint32_t a = 1; a < p->ngot; a++) /* insertion sort by sender: fanout is small */
		for (uint32_t b = a; b > 0 && p->got_from[b - 1] > p->got_from[b]; b--) {
			uint32_t f = p->got_from[b];
			struct sim_replica_snap *x = p->got[b];

			p->got_from[b] = p->got_from[b - 1];
			p->got[b] = p->got[b - 1];
			p->got_from[b - 1] = f;
			p->got[b - 1] = x;
		}
	for (uint32_t a = 0; a < p->ngot; a++)
		w[a] = core_p2p_merge_weight(p->core, sim_replicas_share(s->rep, p->got_from[a]));
	rc = sim_replicas_merge(s->rep, i, core_p2p_own_weight(p->core, sim_replicas_share(s->rep, i)), p->got, w,
				p->ngot);
	for (uint32_t a = 0; a < p->ngot; a++)
		sim_replicas_release(s->rep, &p->got[a]);
	p->ngot = 0;
	if (rc < 0)
		sim_status_fail(&s->st, rc, "peer %u: merge failed", i);
}

static void join_round_done(struct p2p *s, uint32_t i, int64_t now);
static void pull_round_done(struct p2p *s, uint32_t i, int64_t now);
static void answered(struct p2p *s, uint32_t i, uint32_t j, int64_t now);

/* A join's answers counted some awaited peers departed (node/core_p2p's join rule): those are
 * not waited for; the catch-up ends when nobody is left. */
static void join_skip(struct p2p *s, uint32_t i, int64_t now)
{
	struct peer *p = &s->p[i];

	for (uint32_t j = 0; j < s->n && p->state == P_CATCHUP; j++)
		if (s->awaited[(size_t)i * s->n + j] && !core_p2p_join_waits_for(p->core, j))
			answered(s, i, j, now);
}

/* Peer i got j's answer (or j left): one fewer awaited; the exchange ends with the last. */
static void answered(struct p2p *s, uint32_t i, uint32_t j, int64_t now)
{
	struct peer *p = &s->p[i];
	uint8_t *a = &s->awaited[(size_t)i * s->n + j];

	if (!*a)
		return;
	*a = 0;
	if (--p->left)
		return;
	if (p->state == P_BARRIER)
		after_barrier(s, i, now);
	else if (p->state == P_GOSSIP) {
		/* the engine's gossip: the most lagging merged replica, at least 0 */
		if (p->merged)
			p->stale = p->lag < 0 ? 0 : p->lag;
		if (s->rep)
			merge(s, i);
		start_compute(s, i, now);
	} else if (p->state == P_CATCHUP) {
		join_round_done(s, i, now);
	} else if (p->state == P_RESUME) {
		pull_round_done(s, i, now);
	}
}

static void on_msg(struct p2p *s, uint32_t id, int64_t now)
{
	struct msg m = s->msgs[id];
	struct peer *p = &s->p[m.to];

	s->msgs[id].next_free = s->free_msg;
	s->msgs[id].snap = NULL; /* the reference is m's now */
	s->msgs[id].view = NULL; /* so is the view */
	s->free_msg = id;
	if (m.type != M_UP && m.type != M_DOWN) /* those two carry no bytes */
		p->rx += m.type == M_MODEL && !m.behind ? s->model_bytes : SIM_P2P_SMALL;
	if (p->state == P_DONE || p->state == P_OFF) {
		if (m.snap)
			sim_replicas_release(s->rep, &m.snap);
		free(m.view);
		return; /* its sockets are closed */
	}
	/* a request or a handshake from its sender: it is heard from (back among the gossip
	 * partners if it was silent), as the engine's service thread and monitor report */
	if (p->gave_up && (m.type == M_CLOCK_REQ || m.type == M_PULL || m.type == M_UP))
		core_p2p_on_heard(p->core, m.from, now);
	switch ((enum p2p_msg)m.type) {
	case M_CLOCK_REQ:
		if (core_p2p_answerable(p->clock, m.value)) {
			uint32_t rid = send_msg(s, m.to, m.from, M_CLOCK_REP, p->clock, m.seq, m.gen, now);

			if (rid != UINT32_MAX && m.join && (s->msgs[rid].view = malloc(s->n * sizeof(bool)))) {
				/* who this peer counts as departed when it answers (the engine's
				 * service thread reads the loop's view) */
				for (uint32_t k = 0; k < s->n; k++)
					s->msgs[rid].view[k] = k != m.to && !core_p2p_is_alive(p->core, k);
			}
			break;
		}
		if (p->nheld == p->capheld) {
			uint32_t cap = p->capheld ? 2 * p->capheld : 4;
			struct held *h = realloc(p->held, cap * sizeof *h);

			if (!h) {
				sim_status_fail(&s->st, -ENOMEM, "out of memory (held requests)");
				return;
			}
			p->held = h;
			p->capheld = cap;
		}
		p->held[p->nheld++] = (struct held){ .threshold = m.value, .from = m.from, .seq = m.seq,
						     .gen = m.gen };
		break;
	case M_PULL:
		send_msg(s, m.to, m.from, M_MODEL, p->clock, m.seq, m.gen, now);
		break;
	case M_CLOCK_REP:
	case M_MODEL:
		if (m.gen != p->gen || m.seq != p->seq || !s->awaited[(size_t)m.to * s->n + m.from]) {
			if (m.snap)
				sim_replicas_release(s->rep, &m.snap);
			break;
		}
		if (p->gave_up)
			core_p2p_on_heard(p->core, m.from, now);
		/* a pull answered "behind" brings no clock (the engine counts it and merges nothing) */
		if (m.type == M_CLOCK_REP || !m.behind)
			core_p2p_on_clock(p->core, m.from, m.value);
		if (p->state == P_CATCHUP && m.type == M_CLOCK_REP) {
			if (m.behind)
				core_p2p_join_on_behind(p->core, m.from, m.view);
			else
				core_p2p_join_on_answer(p->core, m.from, m.value, m.view);
		} else if (p->state == P_RESUME && m.type == M_MODEL) {
			p->pulled = true;
			if (!m.behind)
				p->resume_clock = m.value;
			if (m.snap && !p->resume_snap) {
				p->resume_snap = m.snap; /* the reference moves to the catch-up */
				m.snap = NULL;
			}
		} else if (m.type == M_MODEL && !m.behind) {
			if (m.snap) {
				p->got[p->ngot] = m.snap; /* the reference moves to the round */
				p->got_from[p->ngot++] = m.from;
				m.snap = NULL;
			}
			p->merged = true;
			if ((int64_t)p->clock - m.value > p->lag)
				p->lag = (int64_t)p->clock - m.value;
		}
		answered(s, m.to, m.from, now);
		if (p->state == P_CATCHUP && m.gen == p->gen)
			join_skip(s, m.to, now);
		break;
	case M_UP:
		core_p2p_set_alive(p->core, m.from, true);
		core_p2p_on_reached(p->core, m.from);
		break;
	case M_BYE:
	case M_DOWN:
		core_p2p_set_alive(p->core, m.from, false);
		/* its held requests will never be wanted */
		for (uint32_t h = 0, k = 0; h <= p->nheld; h++) {
			if (h == p->nheld) {
				p->nheld = k;
				break;
			}
			if (p->held[h].from != m.from)
				p->held[k++] = p->held[h];
		}
		if (p->state != P_COMPUTE)
			answered(s, m.to, m.from, now);
		break;
	}
	if (m.snap) /* a reply nobody took */
		sim_replicas_release(s->rep, &m.snap);
	free(m.view);
}

/* --- churn ---------------------------------------------------------------------------------- */

static void end_exchange(struct p2p *s, uint32_t i)
{
	memset(&s->awaited[(size_t)i * s->n], 0, s->n);
	s->p[i].left = 0;
}

static void catch_up_free(struct p2p *s, struct peer *p)
{
	if (p->resume_snap)
		sim_replicas_release(s->rep, &p->resume_snap);
}

/* Peer i's process dies: its connections close, which every other peer notices. */
static void crash(struct p2p *s, uint32_t i, int64_t now)
{
	struct peer *p = &s->p[i];

	if (p->state == P_OFF || p->state == P_DONE)
		return;
	sim_record_live(s->rec, i, false);
	p->state = P_OFF;
	p->gen++;
	p->silence_pending = false; /* its queued check is void */
	p->nheld = 0;
	end_exchange(s, i);
	catch_up_free(s, p);
	for (uint32_t a = 0; a < p->ngot; a++)
		sim_replicas_release(s->rep, &p->got[a]);
	p->ngot = 0;
	for (uint32_t j = 0; j < s->n; j++)
		if (j != i)
			send_msg(s, i, j, M_DOWN, 0, 0, p->gen, now);
}

/* One round of a rejoining peer's asking (node/engine_p2p's exchange_until with a deadline of
 * CORE_P2P_JOIN_ROUND_NS): the awaited set is made and left counted; answers until the
 * round's end, EV_DEADLINE. A new round is a new exchange number: a late answer to an earlier
 * round is not taken for one of this round, as the engine matches seq. */
static void catch_up_ask(struct p2p *s, uint32_t i, enum p2p_msg type, int64_t now)
{
	struct peer *p = &s->p[i];

	p->deadline_ns = now + CORE_P2P_JOIN_ROUND_NS;
	push_gen(s, p->deadline_ns, i, EV_DEADLINE, p->gen);
	ask_all(s, i, type, 0, now);
}

/* The catch-up is over: the peer trains and serves from now on (the engine's
 * core_p2p_caught_up after catch_up), and its publish answers the held requests its clock
 * now satisfies, as caught up. */
static void caught_up(struct p2p *s, uint32_t i, int64_t now)
{
	struct peer *p = &s->p[i];

	catch_up_free(s, p);
	core_p2p_caught_up(p->core);
	answer_held(s, i, now);
	p->state = P_BARRIER;
	begin_step(s, i, now);
}

/* A new process for peer i (a restart, a late join): a fresh core that serves nothing until it
 * caught up (late joiners out of it, as the engine starts them down), connections the others
 * notice, then node/engine_p2p's catch_up: every peer it deems live is asked for its clock and
 * its view of who departed, in rounds, and it resumes from the slowest answer ahead of it,
 * pulling that peer's replica, in rounds too. */
static void start(struct p2p *s, uint32_t i, int64_t now)
{
	struct peer *p = &s->p[i];
	struct core_p2p_conf cc = s->cc;
	const uint32_t *peers;
	size_t k;

	if (p->state != P_OFF)
		return;
	p->gen++;
	p->silence_pending = false;
	p->gave_up = false; /* a new core */
	sim_node_restart(s->node, i);
	core_p2p_destroy(&p->core);
	cc.self = i;
	cc.behind = true;
	if (!(p->core = core_p2p_new(&cc))) {
		sim_status_fail(&s->st, -ENOMEM, "out of memory (consistency core)");
		return;
	}
	for (uint32_t j = 0; j < s->n; j++) {
		if (j != i && s->late[j])
			core_p2p_set_alive(p->core, j, false);
		/* new connections both ways: slow start from the initial window */
		s->answered_at[(size_t)i * s->n + j] = INT64_MIN;
		s->answered_at[(size_t)j * s->n + i] = INT64_MIN;
	}
	p->clock = 0;
	p->nheld = 0;
	if (s->rep && sim_replicas_restart(s->rep, i) < 0) {
		sim_status_fail(&s->st, -ENOMEM, "out of memory");
		return;
	}
	sim_record_set_clock(s->rec, i, 0);
	sim_record_live(s->rec, i, true);
	/* its connections complete their handshakes: the running peers see it come up, and it
	 * sees them (a peer it starts out, one joining late, comes into its view so) */
	for (uint32_t j = 0; j < s->n; j++) {
		if (j == i)
			continue;
		send_msg(s, i, j, M_UP, 0, 0, p->gen, now);
		if (s->p[j].state != P_OFF && s->p[j].state != P_DONE)
			send_msg(s, j, i, M_UP, 0, 0, p->gen, now);
	}
	p->t0 = p->join_t0 = now;
	p->state = P_CATCHUP;
	k = core_p2p_join_begin(p->core, &peers);
	if (k == 0) {
		join_round_done(s, i, now);
		return;
	}
	for (size_t a = 0; a < k; a++)
		s->awaited[(size_t)i * s->n + peers[a]] = 1;
	p->left = (uint32_t)k;
	catch_up_ask(s, i, M_CLOCK_REQ, now);
}

/* The pull of the replica of the peer the join resumes from: one round (a peer already gone
 * is not asked: the engine's exchange drops it on its first slice). */
static void pull_round(struct p2p *s, uint32_t i, int64_t now)
{
	struct peer *p = &s->p[i];

	if (!core_p2p_is_alive(p->core, p->resume_from)) {
		pull_round_done(s, i, now);
		return;
	}
	s->awaited[(size_t)i * s->n + p->resume_from] = 1;
	p->left = 1;
	p->state = P_RESUME;
	catch_up_ask(s, i, M_PULL, now);
}

/* A round of the join's clock exchange is over (every asked peer answered or is not waited
 * for, or the round's time passed): the core says whether to ask again (the peers it still
 * waits for that are live), to resume from the slowest answer ahead, or to go on alone. */
static void join_round_done(struct p2p *s, uint32_t i, int64_t now)
{
	struct peer *p = &s->p[i];
	int64_t lo;
	uint32_t from, k = 0;

	end_exchange(s, i);
	if (core_p2p_join_next(p->core, now - p->join_t0, CORE_P2P_JOIN_ROUND_NS) == CORE_P2P_JOIN_AGAIN) {
		for (uint32_t j = 0; j < s->n; j++)
			if (core_p2p_is_alive(p->core, j) && core_p2p_join_waits_for(p->core, j)) {
				s->awaited[(size_t)i * s->n + j] = 1;
				k++;
			}
		p->left = k; /* >= 1: the core asks again only for such a peer */
		catch_up_ask(s, i, M_CLOCK_REQ, now);
		return;
	}
	/* the join's end: peers neither answered nor reached are out until reached */
	from = core_p2p_join_end(p->core, p->clock, &lo);
	if (from == UINT32_MAX) {
		caught_up(s, i, now);
		return;
	}
	p->resume_from = from;
	p->resume_clock = lo; /* kept if its replica does not come */
	p->pull_t0 = now;
	p->pulled = false;
	pull_round(s, i, now);
}

/* A round of the replica pull is over: asked again while nothing came and the core says so;
 * else continue at that peer's clock, with its replica when it came. */
static void pull_round_done(struct p2p *s, uint32_t i, int64_t now)
{
	struct peer *p = &s->p[i];

	end_exchange(s, i);
	if (!p->pulled && core_p2p_resume_asks_again(p->core, p->resume_from, now - p->pull_t0)) {
		pull_round(s, i, now);
		return;
	}
	p->clock = (uint32_t)p->resume_clock;
	/* the engine copies the replica that came (its optimiser stays the new process's) */
	if (p->resume_snap && sim_replicas_adopt(s->rep, i, p->resume_snap) < 0) {
		sim_status_fail(&s->st, -ENOMEM, "out of memory");
		return;
	}
	if (sim_record_set_clock(s->rec, i, p->clock) < 0) {
		sim_status_fail(&s->st, -ENOMEM, "out of memory");
		return;
	}
	caught_up(s, i, now);
}

/* train real: peer 0 evaluates its replica (eval.csv: its own clock and samples, as the engine
 * writes them); stop.accuracy reached ends the run, as peer 0's run-over BYE does. */
static void eval_row(struct p2p *s, int64_t now)
{
	struct eval_result test, train;
	uint64_t samples = sim_replicas_samples(s->rep, 0);
	int rc = sim_replicas_eval(s->rep, 0, &test, &train);

	if (rc < 0) {
		sim_status_fail(&s->st, rc, "evaluation failed");
		return;
	}
	s->last_eval_ns = now;
	if (s->eval && csv_writer_row(s->eval, "%.3f,%s,%u,%.4f,%llu,%.6f,%.6f,%.6f", now / 1e9,
				      s->run->nodes[s->node_of[0]].name, s->p[0].clock,
				      (double)samples / sim_replicas_share(s->rep, 0), (unsigned long long)samples,
				      test.accuracy, test.loss, train.loss) < 0)
		sim_status_fail(&s->st, -EIO, "write eval.csv failed");
	if (s->sc->stop_accuracy > 0 && test.accuracy >= s->sc->stop_accuracy) {
		s->stop_acc = true;
		s->stop_ns = now;
	}
}

/* Only the periodic samples and evaluations are pending, and silence checks of gossip rounds
 * that ended (a round still waiting is a peer not done): nothing will change any more. */
static bool idle(const struct p2p *s)
{
	size_t periodic = 1 + (s->rep != NULL); /* EV_SAMPLE, EV_EVAL (one of them is being handled) */

	return sim_heap_len(s->heap) + 1 <= periodic + s->silence_queued;
}

static void dispatch(struct p2p *s, const struct sim_event *e)
{
	int64_t now = e->t_ns;

	switch ((enum p2p_ev)e->kind) {
	case EV_MSG:
		on_msg(s, e->who, now);
		break;
	case EV_COMPUTE:
		if (s->p[e->who].state == P_COMPUTE && e->gen == s->p[e->who].gen)
			step_done(s, e->who, now);
		break;
	case EV_BEGIN:
		if (s->p[e->who].state == P_BARRIER && e->gen == s->p[e->who].gen)
			begin_step(s, e->who, now);
		break;
	case EV_CRASH:
		crash(s, e->who, now);
		break;
	case EV_START:
		start(s, e->who, now);
		break;
	case EV_DEADLINE: {
		struct peer *p = &s->p[e->who];

		if (e->gen != p->gen || now != p->deadline_ns || (p->state != P_CATCHUP && p->state != P_RESUME))
			break;
		if (p->state == P_CATCHUP)
			join_round_done(s, e->who, now);
		else
			pull_round_done(s, e->who, now);
		break;
	}
	case EV_SILENCE: {
		struct peer *p = &s->p[e->who];
		int64_t due = p->pull_asked_ns + s->cc.dead_after_ns;

		s->silence_queued--;
		if (e->gen != p->gen)
			break;
		p->silence_pending = false;
		if (p->state != P_GOSSIP)
			break;
		if (now >= due) {
			silence(s, e->who, now);
		} else { /* queued for an earlier round: this round's time */
			p->silence_pending = true;
			s->silence_queued++;
			push_gen(s, due, e->who, EV_SILENCE, p->gen);
		}
		break;
	}
	case EV_LEAVE:
		bye(s, e->who, now);
		break;
	case EV_SAMPLE:
		if (sim_record_progress(s->rec, now) < 0)
			sim_status_fail(&s->st, -EIO, "write progress.csv failed");
		/* nothing else pending (every peer done or gone for good): the run is over */
		if (now + SIM_P2P_SAMPLE_NS <= s->stop_ns && !idle(s))
			push_ev(s, now + SIM_P2P_SAMPLE_NS, 0, EV_SAMPLE);
		break;
	case EV_NET:
		sim_net_apply(s->net, e->who);
		break;
	case EV_EVAL:
		eval_row(s, now);
		if (!s->stop_acc && now + (int64_t)s->sc->eval_every_us * 1000 <= s->stop_ns && !idle(s))
			push_ev(s, now + (int64_t)s->sc->eval_every_us * 1000, 0, EV_EVAL);
		break;
	}
}

static const char *unsupported(const struct plan_run *run)
{
	const struct scenario *sc = run->scenario;

	if (sc->simulation.train == SCENARIO_SIM_TRAIN_REAL && sc->consistency.combine == SCENARIO_COMBINE_ENSEMBLE)
		return "topology p2p: combine ensemble with simulation.train real is not simulated yet (its "
		       "evaluation pulls every replica; train none counts its steps)";
	return NULL;
}

/* train real: the replicas, each peer's gossip buffer and eval.csv. 0 or the failure in s. */
static int open_training(struct p2p *s)
{
	const char **names = calloc(s->n, sizeof *names);
	char path[4096];

	for (uint32_t i = 0; names && i < s->n; i++)
		names[i] = s->run->nodes[s->node_of[i]].name;
	s->rep = names ? sim_replicas_new(s->sc, s->n, s->run->seed, SIM_REPLICAS_PEERS, s->o->dir, names, s->st.err,
					   s->st.errlen) : NULL;
	free(names);
	if (!s->rep) {
		if (!s->st.err[0])
			return sim_status_fail(&s->st, -ENOMEM, "out of memory");
		s->st.rc = -EINVAL; /* sim_replicas_new said why in err */
		return s->st.rc;
	}
	if (!(s->wbuf = calloc(s->n, sizeof *s->wbuf)))
		return sim_status_fail(&s->st, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < s->n; i++) {
		uint32_t cap = s->sc->consistency.fanout < s->n ? s->sc->consistency.fanout : s->n;

		s->p[i].got = calloc(cap ? cap : 1, sizeof *s->p[i].got);
		s->p[i].got_from = calloc(cap ? cap : 1, sizeof *s->p[i].got_from);
		if (!s->p[i].got || !s->p[i].got_from)
			return sim_status_fail(&s->st, -ENOMEM, "out of memory");
	}
	if (s->o->dir) {
		snprintf(path, sizeof path, "%s/eval.csv", s->o->dir);
		if (!(s->eval = csv_writer_open(path, TRACE_HEADER_EVAL)))
			return sim_status_fail(&s->st, -EIO, "cannot open %s", path);
	}
	return 0;
}

int sim_p2p_run(const struct sim_opts *o, struct sim_result *res, char *err, size_t errlen)
{
	const struct plan_run *run = o->run;
	const struct scenario *sc = run->scenario;
	struct p2p s = { .o = o, .run = run, .sc = sc, .st = { .err = err, .errlen = errlen }, .free_msg = UINT32_MAX,
			 .last_eval_ns = -1 };
	struct sim_event e = { 0 };
	const char *why;
	size_t held0, np;
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
		if (run->nodes[i].role == SCENARIO_ROLE_PEER)
			s.n++;
	if (!s.n) {
		snprintf(err, errlen, "a p2p run needs peers");
		return -EINVAL;
	}
	if (s.n > SIM_P2P_MAX_PEERS) {
		snprintf(err, errlen, "topology p2p: %u peers, at most %u are simulated (every peer keeps a "
			 "view of every other)", s.n, SIM_P2P_MAX_PEERS);
		return -EINVAL;
	}
	np = sim_model_params(sc);
	if (!np) {
		snprintf(err, errlen, "cannot build the model");
		return -EINVAL;
	}
	s.model_bytes = np * sizeof(float) + WIRE_HEADER_BYTES;
	s.stop_ns = sc->stop_time_us ? (int64_t)sc->stop_time_us * 1000 : INT64_MAX / 4;
	s.node_of = calloc(s.n, sizeof *s.node_of);
	s.p = calloc(s.n, sizeof *s.p);
	s.awaited = calloc((size_t)s.n * s.n, 1);
	s.late = calloc(s.n, sizeof *s.late);
	s.answered_at = malloc((size_t)s.n * s.n * sizeof *s.answered_at);
	s.heap = sim_heap_new((size_t)s.n * 4 + 64);
	if (!s.node_of || !s.p || !s.awaited || !s.late || !s.answered_at || !s.heap) {
		sim_status_fail(&s.st, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < (size_t)s.n * s.n; i++)
		s.answered_at[i] = INT64_MIN;
	for (size_t i = 0; i < run->n_nodes; i++)
		if (run->nodes[i].role == SCENARIO_ROLE_PEER)
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
	if (sc->simulation.train == SCENARIO_SIM_TRAIN_REAL && open_training(&s) < 0)
		goto out;
	/* the peers' engine configuration (orchestrator/nodeconf, node/engine_p2p) */
	s.cc = (struct core_p2p_conf){
		.n = s.n,
		.bp = { .kind = (enum barrier_kind)sc->consistency.barrier, .staleness = sc->consistency.staleness,
			.sample = sc->consistency.sample },
		.fanout = sc->consistency.fanout,
		.local_steps = sc->consistency.local_steps ? sc->consistency.local_steps : 1,
		.merge = sc->consistency.combine != SCENARIO_COMBINE_ENSEMBLE,
		.weighted = sc->consistency.combine == SCENARIO_COMBINE_AVERAGE,
		.seed = run->seed,
		/* the join's and the replica pull's bound (core_p2p_join_next,
		 * core_p2p_resume_asks_again), as every node's configuration has it */
		.dead_after_ns = (int64_t)NODECONF_DEAD_AFTER_S * 1000000000ll };
	for (uint32_t i = 0; i < s.n; i++) {
		unsigned set = run->nodes[s.node_of[i]].straggler.set;

		s.late[i] = (set & SCENARIO_STRAG_JOIN) != 0;
		/* connections made during the run: their handshakes are timed */
		if ((set & (SCENARIO_STRAG_JOIN | SCENARIO_STRAG_RESTART)) && !s.conn_at &&
		    !(s.conn_at = calloc((size_t)s.n * s.n, sizeof *s.conn_at))) {
			sim_status_fail(&s.st, -ENOMEM, "out of memory");
			goto out;
		}
	}
	for (uint32_t i = 0; i < s.n; i++) {
		struct core_p2p_conf cc = s.cc;

		cc.self = i;
		if (!(s.p[i].core = core_p2p_new(&cc))) {
			sim_status_fail(&s.st, -ENOMEM, "consistency core: bad configuration or out of memory");
			goto out;
		}
		/* peers that join late are out of every barrier until they connect */
		for (uint32_t j = 0; j < s.n; j++)
			if (j != i && s.late[j])
				core_p2p_set_alive(s.p[i].core, j, false);
	}
	/* t = 0: every peer not joining late starts; churn and link changes as planned */
	for (uint32_t i = 0; i < s.n; i++) {
		const struct scenario_straggler *st = &run->nodes[s.node_of[i]].straggler;

		if (s.late[i]) {
			s.p[i].state = P_OFF;
			push_ev(&s, (int64_t)st->join_at_us * 1000, i, EV_START);
		} else {
			sim_record_live(s.rec, i, true);
			s.p[i].state = P_BARRIER;
			push_ev(&s, 0, i, EV_BEGIN);
		}
		if (st->set & SCENARIO_STRAG_CRASH) {
			push_ev(&s, (int64_t)st->crash_at_us * 1000, i, EV_CRASH);
			if (st->set & SCENARIO_STRAG_RESTART)
				push_ev(&s, (int64_t)st->restart_at_us * 1000, i, EV_START);
		}
		if (st->set & SCENARIO_STRAG_LEAVE)
			push_ev(&s, (int64_t)st->leave_at_us * 1000, i, EV_LEAVE);
	}
	for (size_t i = 0; i < sim_net_changes(s.net); i++)
		push_ev(&s, sim_net_change_at(s.net, i), (uint32_t)i, EV_NET);
	push_ev(&s, 0, 0, EV_SAMPLE);
	if (s.rep)
		push_ev(&s, 0, 0, EV_EVAL);
	while (!s.st.rc && sim_heap_pop(s.heap, &e) == 1) {
		if (e.t_ns > s.stop_ns)
			break;
		s.events++;
		dispatch(&s, &e);
		if (s.stop_acc)
			break;
	}
	/* peer 0 evaluates once more at the end, as the engine does */
	if (!s.st.rc && s.rep && !s.stop_acc) {
		int64_t end = s.stop_ns < INT64_MAX / 4 ? s.stop_ns : e.t_ns;

		if (end != s.last_eval_ns)
			eval_row(&s, end);
	}
	if (!s.st.rc) {
		struct mallinfo2 mi;

		memset(res, 0, sizeof *res);
		s.st.rc = sim_record_finish(s.rec, res, err, errlen);
		mi = mallinfo2();
		res->events = s.events;
		res->updates = s.updates;
		res->sim_end_s = (s.stop_ns < INT64_MAX / 4 ? s.stop_ns : e.t_ns) / 1e9;
		res->stopped_accuracy = s.stop_acc;
		res->state_bytes = sizeof s + s.n * (sizeof *s.p + sizeof *s.node_of) +
				   (size_t)s.n * s.n * (1 + sizeof *s.answered_at) +
				   (s.conn_at ? (size_t)s.n * s.n * sizeof *s.conn_at : 0) +
				   s.capmsgs * sizeof *s.msgs + sim_heap_bytes(s.heap) + sim_net_bytes(s.net) +
				   sim_record_bytes(s.rec);
		res->held_bytes = mi.uordblks + mi.hblkhd > held0 ? mi.uordblks + mi.hblkhd - held0 : 0;
	}
out:
	for (uint32_t i = 0; s.p && i < s.n; i++) {
		for (uint32_t a = 0; a < s.p[i].ngot; a++)
			sim_replicas_release(s.rep, &s.p[i].got[a]);
		free(s.p[i].got);
		free(s.p[i].got_from);
		catch_up_free(&s, &s.p[i]);
		core_p2p_destroy(&s.p[i].core);
		free(s.p[i].held);
	}
	for (uint32_t id = 0; s.msgs && id < s.nmsgs; id++) {
		if (s.msgs[id].snap) /* replies still in flight */
			sim_replicas_release(s.rep, &s.msgs[id].snap);
		free(s.msgs[id].view);
	}
	csv_writer_close(&s.eval);
	sim_replicas_destroy(&s.rep);
	free(s.wbuf);
	sim_record_destroy(&s.rec);
	sim_node_destroy(&s.node);
	sim_profile_destroy(&s.profile);
	sim_net_destroy(&s.net);
	sim_heap_destroy(&s.heap);
	free(s.msgs);
	free(s.awaited);
	free(s.late);
	free(s.answered_at);
	free(s.conn_at);
	free(s.p);
	free(s.node_of);
	return s.st.rc;
}
