/* node/core_ps: the parameter server's consistency core, pure.
 *
 * Every decision of the server side of the parameter-server topology lives here: which
 * barrier requests are held and when they are released (node/barrier's rules), BSP rounds with
 * backup workers, model averaging rounds, liveness (departure, grace, a restart or late join
 * resuming at the slowest live clock), staleness and the scale of each update. No I/O, no
 * clock, no globals, no ZeroMQ: the driver (node/engine_ps over ZeroMQ, or a simulator) passes
 * the time `now_ns` with every event, and the core answers with a list of actions the driver
 * carries out in order (reply, apply an update with a scale, close a round, ...). The model
 * itself (parameters, optimiser) stays with the driver: the core only says what to do with the
 * update that came with the event and keeps the model version.
 *
 * Shape (after ngtcp2's connection core): create with a struct core_ps_conf, feed events
 * (core_ps_on_*), read the actions of that call (core_ps_actions), repeat. Actions are valid
 * until the next event. Per worker the core keeps 61 bytes (a 48-byte record: liveness, the
 * held request, the push history a reconnect needs; the clock, liveness and a candidate slot),
 * plus for pBSP/pSSP 4 (a Fenwick tree over liveness), and with a sample per crossing 20 more
 * (the sampling stream, the held request's one waiter link, the head of the requests waiting
 * on the worker: the sample itself is drawn again from the stream when needed, and kept, 4 +
 * 4 beta bytes, only for the requests held across a liveness change, with 4 per worker from
 * the first such change on), with a sample per check 16 more (a counter, a budget and a heap
 * slot) and up to 8 per held request (the heaps of its thresholds); model averaging 8
 * (samples behind each model). The actions' room is min(2n + 16, 1024) actions of 40 bytes
 * made at creation; an event that makes more (a BSP round close of more than ~500 workers)
 * grows it by half, once per new largest event. An event costs O(1) amortised for
 * BSP/SSP/ASP and O(r beta (beta + log n)) for a pBSP/pSSP crossing with a sample per
 * crossing (r: the times its sample is drawn, once and again each time the sampled worker its
 * request waits on reaches the threshold while another is still below: at most beta + 1);
 * O(n) when liveness changes (plus one draw per request held since the previous change), a
 * BSP round closes or the smallest clock rises (each once per many events). With a sample per
 * check an event costs O(levels + beta) (levels: distinct thresholds of held requests) plus
 * O(log n) per request held or released, and O(n) when a threshold is first waited at.
 *
 * Events can also be written and read back as one text line each (core_ps_event_format,
 * core_ps_event_parse), and actions likewise (core_ps_action_format), so a run's decisions can
 * be recorded and replayed through a fresh core. */
#ifndef STALENET_CORE_PS_H
#define STALENET_CORE_PS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/barrier.h"

/* Default wait, after a worker departed without a BYE, before it counts as finished. */
#define CORE_PS_GRACE_NS 5000000000ll

enum core_ps_weighting { CORE_PS_WEIGHT_NONE = 0, CORE_PS_WEIGHT_INVERSE, CORE_PS_WEIGHT_EXP };

/* Scale of an update with the given staleness (< 0 counts as 0): 1, 1/(1+s) or exp(-s). */
double core_ps_weight(enum core_ps_weighting w, int64_t staleness);

/* Configuration; fill with designated initialisers. late (NULL = none) marks the workers that
 * join during the run (workers.late); it is copied. seed seeds every worker's sampling stream
 * exactly as the emulator always did. dead_after_ns = 0: silence never departs a worker;
 * grace_ns = 0 means CORE_PS_GRACE_NS. */
struct core_ps_conf {
	uint32_t n;                  /* workers */
	struct barrier_params bp;
	enum barrier_draw draw;      /* pBSP/pSSP: a sample per crossing (the zero value) or per
				      * check; ignored by the other kinds */
	enum core_ps_weighting weighting;
	bool average;                /* model averaging (pushes are models) */
	uint64_t seed;
	int64_t dead_after_ns;
	int64_t grace_ns;
	const bool *late;
	bool reference;              /* tests: judge every held request on every change and draw
				      * samples with barrier_sample (the plain rules the fast
				      * paths must equal; for draw = CHECK, equal in distribution) */
};

enum core_ps_action_kind {
	CORE_PS_ACK = 1,      /* reply ACK(step, aux = staleness or -1 = dropped, version);
			       * x = requests of live workers held when the push arrived; reply = 1
			       * when it answers a copy sent again (nothing else was done) */
	CORE_PS_HELLO,        /* reply HELLO(step = clock to continue from, version) */
	CORE_PS_RELEASE,      /* answer the held request: reply `reply` (step = clock, version,
			       * aux = ns it was held) */
	CORE_PS_MODEL,        /* answer a pull: MODEL(version) */
	CORE_PS_APPLY,        /* gradient, async: apply the event's update scaled by x; version++;
			       * aux = its samples */
	CORE_PS_FOLD,         /* averaging, async: x_srv <- (1 - x) x_srv + x model; version++;
			       * aux = its samples */
	CORE_PS_ROUND_ADD,    /* BSP: add the event's update, weighted by x, to the round's sum;
			       * aux = its samples */
	CORE_PS_ROUND_CLOSE,  /* BSP: the round closes: gradient, apply sum * x as one step;
			       * averaging, the model becomes sum * x; clear the sum; version++.
			       * aux = the number of updates in the round, step = its version,
			       * worker = UINT32_MAX */
	CORE_PS_LIVE,         /* worker became live (aux 1) or not (aux 0); step = live count */
	CORE_PS_RESUME,       /* worker resumes at clock step; aux = enum core_ps_resume */
	CORE_PS_DEPART,       /* worker departed without a BYE (aux = enum core_ps_leave) */
};

enum core_ps_reply { CORE_PS_REPLY_MODEL = 0, CORE_PS_REPLY_BARRIER_OK };
enum core_ps_resume { CORE_PS_RESUME_RESTART = 0, CORE_PS_RESUME_LATE, CORE_PS_RESUME_BACK };
enum core_ps_leave { CORE_PS_LEAVE_BYE = 0, CORE_PS_LEAVE_CLOSED, CORE_PS_LEAVE_SILENT };

/* One action; plain struct. version is the model version once the action is done. */
struct core_ps_action {
	uint8_t kind;    /* enum core_ps_action_kind (a byte: a BSP round close of N workers makes
			  * N actions, and 40 bytes each, not 48, is what 10,000 workers hold) */
	uint8_t reply;   /* CORE_PS_RELEASE: enum core_ps_reply */
	uint32_t worker;
	int64_t step;
	int64_t version;
	int64_t aux;
	double x;
};

enum core_ps_event_kind {
	CORE_PS_EV_HELLO = 1, /* keep-alive (flags 0) or join (CORE_PS_JOIN, CORE_PS_AGAIN) */
	CORE_PS_EV_PUSH,      /* update for step `step` computed on `version`, `samples` behind it */
	CORE_PS_EV_PULL,
	CORE_PS_EV_BARRIER,   /* a standalone barrier request at clock step */
	CORE_PS_EV_LEAVE,     /* flags = enum core_ps_leave (BYE, or the connection closed) */
	CORE_PS_EV_TICK,      /* time passes: silence checks */
};

#define CORE_PS_JOIN 1  /* HELLO: (re)start, tell me my clock */
#define CORE_PS_AGAIN 2 /* HELLO: this join was sent before over a connection that broke */

/* One event; plain struct (what core_ps_feed takes and the log lines hold). */
struct core_ps_event {
	enum core_ps_event_kind kind;
	uint32_t worker;
	uint32_t flags;
	int64_t now_ns;
	int64_t step;
	int64_t version;
	int64_t samples;
};

/* Counters the core keeps (readable at any time through core_ps_stats). */
struct core_ps_stats {
	int64_t version;     /* model version: updates applied, folds and closed rounds */
	uint64_t updates_in; /* pushes taken (copies sent again excluded) */
	uint64_t accepted, dropped, resent_in;
	int64_t stale_sum, stale_max;
	uint64_t stale_n;
	uint64_t checks;     /* sample per check: release passes made while a request was held */
	uint64_t judged;     /* ... and the held requests they judged (one draw each) */
};

struct core_ps;

/* New core for conf (n >= 1, backup < n). NULL on a bad conf or no memory. Every worker starts
 * live except the late ones; the first BSP round collects version 0. */
struct core_ps *core_ps_new(const struct core_ps_conf *conf);
/* Free *p and set it to NULL; NULL and *p == NULL are fine. */
void core_ps_destroy(struct core_ps **p);

/* Events. Each returns the number of actions it produced (then read with core_ps_actions), or
 * -EINVAL for a worker out of range or a push the core cannot take (step < 1, version < 0 or
 * newer than the model: the driver should have dropped it). Every event but a LEAVE and a TICK
 * is a sign of life: a departed worker is back, a worker that said BYE lives again. */
int core_ps_on_hello(struct core_ps *c, uint32_t w, uint32_t flags, int64_t now_ns);
int core_ps_on_push(struct core_ps *c, uint32_t w, int64_t step, int64_t version, int64_t samples,
		    int64_t now_ns);
int core_ps_on_pull(struct core_ps *c, uint32_t w, int64_t now_ns);
int core_ps_on_barrier(struct core_ps *c, uint32_t w, int64_t step, int64_t now_ns);
/* Worker w is gone: said BYE (CORE_PS_LEAVE_BYE: finished) or its connection closed
 * (CORE_PS_LEAVE_CLOSED: departed; its held request stays for a return). */
int core_ps_on_leave(struct core_ps *c, uint32_t w, enum core_ps_leave why, int64_t now_ns);
/* Time passes: workers silent for more than dead_after_ns depart (CORE_PS_LEAVE_SILENT). */
int core_ps_on_tick(struct core_ps *c, int64_t now_ns);
/* Dispatch one event struct to the calls above. */
int core_ps_feed(struct core_ps *c, const struct core_ps_event *ev);

/* The actions of the latest event, *n of them; owned by the core, valid until the next event. */
const struct core_ps_action *core_ps_actions(const struct core_ps *c, size_t *n);

/* True when every worker said BYE or departed at least grace_ns before now_ns (the run is over
 * for the server). */
bool core_ps_finished(const struct core_ps *c, int64_t now_ns);

/* The earliest time after which core_ps_on_tick may depart a silent worker or
 * core_ps_finished may turn true by a grace running out (INT64_MAX: none), so a driver with
 * its own clock (a simulator) knows when to tick. O(n). */
int64_t core_ps_next_deadline(const struct core_ps *c);

/* Current model version. */
int64_t core_ps_version(const struct core_ps *c);
/* Number of live workers. */
uint32_t core_ps_live(const struct core_ps *c);
/* Requests held now of live workers (a departed worker's request stays but holds nobody). */
uint32_t core_ps_waiting(const struct core_ps *c);
/* Worker w's clock (steps, or rounds when averaging), or -1 for w out of range. */
int64_t core_ps_clock(const struct core_ps *c, uint32_t w);
/* Whether worker w is live / has a held request. False for w out of range. */
bool core_ps_is_live(const struct core_ps *c, uint32_t w);
bool core_ps_is_held(const struct core_ps *c, uint32_t w);
/* Whether worker w said BYE (and has not come back since). False for w out of range. */
bool core_ps_has_left(const struct core_ps *c, uint32_t w);
/* Copy the counters to *out. */
void core_ps_stats(const struct core_ps *c, struct core_ps_stats *out);

/* One event as a line without newline ("E kind worker flags now step version samples") into
 * buf (len bytes). Returns the length snprintf would write. */
int core_ps_event_format(const struct core_ps_event *ev, char *buf, size_t len);
/* Parse a line written by core_ps_event_format (an optional newline after it): single spaces,
 * kind one of the enum, worker and flags 0..UINT32_MAX, the rest int64, decimal digits only (a
 * '-' but no '+', no blank, no overflow), nothing after. A recorded file is input like any
 * other. Returns 0 or -EINVAL (*ev zeroed). */
int core_ps_event_parse(const char *line, struct core_ps_event *ev);
/* One action as a line without newline ("A kind worker reply step version aux x"). Returns the
 * length snprintf would write. */
int core_ps_action_format(const struct core_ps_action *a, char *buf, size_t len);

#endif
