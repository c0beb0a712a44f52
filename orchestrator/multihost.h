/* orchestrator/multihost: the orchestrator's side of a run across hosts, so far: reaching and
 * checking the hosts, building and tearing down the testbed across them, and cleanup.
 *
 * multihost_connect reaches every host of the list before anything is built: ssh connects,
 * `stalenet agent` answers with this build's protocol and version and runs as root, and its
 * clock is measured against ours (lib/clocksync). Every bad host gets its own one-line error
 * (all hosts are tried, so one attempt shows every problem), then the whole attempt fails.
 * multihost_build asks every agent at once for its share of a placed run (orchestrator/agent's
 * build: nodes keep the run's addresses, one VXLAN segment), checks that all hosts agree on the
 * node MTU, and measures the underlay's base delay from the first host to every other (the
 * figure delay compensation subtracts). multihost_teardown undoes it on every host.
 * multihost_run_nodes launches the nodes through the agents and relays their control plane.
 * multihost_cleanup asks every host's agent for its `stalenet cleanup`. */
#ifndef STALENET_MULTIHOST_H
#define STALENET_MULTIHOST_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/clocksync.h"
#include "orchestrator/nodeconf.h"
#include "orchestrator/hosts.h"
#include "orchestrator/linktrace.h"
#include "orchestrator/placement.h"
#include "orchestrator/plan.h"

#define MULTIHOST_CLOCK_EXCHANGES 100
#define MULTIHOST_PROBES 200
#define MULTIHOST_MAX_NODES 4096  /* nodes of one run across hosts, at most */
#define MULTIHOST_CLOCK_WINDOW 2000     /* clock exchanges kept per host (the latest) */
#define MULTIHOST_CLOCK_REFRESH_N 20    /* exchanges per refresh */
#define MULTIHOST_CLOCK_REFRESH_NS 10000000000ll  /* refresh period while nodes run */
#define MULTIHOST_CLOCK_REFRESH_MS 5000 /* a refresh during the run ends with what came by then */
#define MULTIHOST_OUT_STALL_MS 10000    /* a host whose queued input is not taken that long is lost */
/* bytes of files sent whole (orchestrator/agentfile) one host may send in one phase of a run
 * (training, or the link self-check before it): past it the rest are refused, so a host cannot
 * fill our disk with many files of the largest size */
#define MULTIHOST_WHOLE_BUDGET (UINT64_C(8) << 30)
/* a stop at once (a second interruption): how long the nodes' kills, then the hosts' teardowns,
 * then the connections' ends are waited for, each at most */
#define MULTIHOST_STOP_NOW_MS 5000
/* a host's run files (the fetch after its nodes' ends) are awaited this long in all: a host
 * that has not sent them by then is lost (its agent tears down when its connection ends) and
 * the teardown does not wait for it */
#define MULTIHOST_FETCH_MS 60000

struct multihost_opts {
	const struct hosts *hosts;
	const char *identity;           /* ssh identity file, NULL = the user's agent or defaults */
	const char *known_hosts;        /* known-hosts file, NULL = the user's */
	const char *agent_path;         /* stalenet on the hosts (absolute), NULL = this program's path */
	int timeout_ms;                 /* per host, connection and greeting; 0 = 10 s */
	/* the caller's interruption count (see multihost_nodes_opts.interrupted): from
	 * SUPERVISE_STOP_NOW on, the build, probes and shaping stop waiting (-EINTR, nothing
	 * more set up), and the fetch, the teardown and the close wait at most
	 * MULTIHOST_STOP_NOW_MS each; NULL = never */
	volatile sig_atomic_t *interrupted;
};

struct multihost;

/* Connect and check every host (see above); one line per host to out ("host a (root@x): ok,
 * hostname a, clock offset +0.000012 s +- 0.000040 s ...") and one error line per bad host to
 * err_out. Returns the connected hosts, or NULL when any host failed. o->hosts must outlive it. */
struct multihost *multihost_connect(const struct multihost_opts *o, FILE *out, FILE *err_out);

/* Build run's testbed across the hosts as placed (prefix: the run prefix "snXXXX-", naming the
 * first host's share, each other host's named with a random prefix of its own; vni: the run's
 * VXLAN segment; hub: also the link self-check's unshaped hub, node index n_nodes, on the
 * host of the run's first node), one line per host to out; then the underlay probes between
 * every two hosts. Returns 0, or -errno after an error line to err_out (what was built stays
 * for multihost_teardown). */
int multihost_build(struct multihost *self, const struct plan_run *run, const struct placement *p, bool hub,
		    const char *prefix, uint32_t vni, FILE *out, FILE *err_out);

/* Shape every node's links on its host (as on one host: each node's up and down on its veth
 * pair to its host's switch; a path across hosts is the sender's up, the underlay, the
 * receiver's down), with delay compensation on the paths that cross hosts (see
 * multihost_compensation): the compensating end shapes its cross-host peers in a class of their
 * own (link_shaper_apply_peers: a linkd queue with nfq, a netem band with u32 filters on the
 * sender's egress with kernel) with its delay less the underlay's. want: the backend asked of
 * every host ("nfq", "kernel", "auto"). Every path is checked before anything is shaped. Unshaped
 * directions are left alone, unless the run changes them (a timeline change of the node; trace:
 * network.trace reshapes every link). *backend: what the first host that shaped a link used. Returns 0
 * or -errno after an error line. */
int multihost_shape(struct multihost *self, const struct plan_run *run, const struct placement *p,
		    const char *want, bool trace, const char **backend, FILE *err_out);

/* Where the path node i -> node j subtracts the underlay's delay. */
enum multihost_comp {
	MULTIHOST_COMP_NONE = 0,        /* same host, or no delay configured on the path */
	MULTIHOST_COMP_RECEIVER,        /* j's down, for senders on i's host: it holds the underlay */
	MULTIHOST_COMP_SENDER,          /* else i's up, for receivers on j's host */
};

/* The path i -> j (nodes of run as placed by p): where its configured delay (i's up + j's
 * down) is reduced by the underlay's measured one-way delay between their hosts (*u_us, whole
 * microseconds; 0 on one host). The receiving end when its down delay holds it, else the
 * sending end's up. Returns 0, or -ERANGE with err when neither end alone holds it (in
 * particular when the underlay alone exceeds the configured delay). */
int multihost_compensation(const struct multihost *self, const struct plan_run *run, const struct placement *p,
			   size_t i, size_t j, enum multihost_comp *where, uint32_t *u_us, char *err, size_t errlen);

/* The measured base one-way delay of the underlay from host a to host b (ns; 0 = not measured:
 * the same host or not both in the build). */
int64_t multihost_underlay_ns(const struct multihost *self, size_t a, size_t b);

/* The nodes of a built run, launched by the agents and supervised from here. */
struct multihost_nodes_opts {
	const struct plan_run *run;
	const struct placement *p;
	const struct nodeconf_ctx *nc;  /* run.dir and ctl.endpoint are replaced by each agent's */
	const char *run_dir;            /* the orchestrator's run directory: files fetched into it */
	int64_t stop_after_ns;          /* stop.time; 0 = none */
	int64_t stop_grace_ns;          /* stop.grace: "stop" -> SIGTERM on one host; 0 =
					 * SUPERVISE_STOP_GRACE_MS */
	bool on_failure_continue;       /* a lost node or host does not stop the others */
	const struct linktrace *trace;  /* network.trace replayed on every link, NULL = none */
	bool linkcheck;                 /* the link self-check: every node a prober, the hub (built
					 * by multihost_build) the reflector, stopped when they are
					 * done; no progress.csv, no start/stop events */
	int ready_timeout_ms;
	/* interruptions so far (the caller's signal handler): 1 stops the run gracefully (nodes
	 * told to stop, as at stop.time; every host's files fetched), or, once the run has
	 * ended of itself (stop.time), changes nothing of it (said on err_out); SUPERVISE_STOP_NOW or
	 * more stops at once: every node still up killed through its agent, their exits waited
	 * for at most MULTIHOST_STOP_NOW_MS, a host that did not report them not fetched, a
	 * fetch given MULTIHOST_STOP_NOW_MS in all (the rows streamed so far stay), the nodes'
	 * configuration not waited for (returns 2 at once) */
	volatile sig_atomic_t *interrupted;
	volatile sig_atomic_t *ended;   /* NULL, or set to 1 once the run has reached stop.time
					 * (not failed, not interrupted): an interruption from then
					 * on leaves it complete (supervise_opts.ended) */
};

/* Launch every node on its host (each agent writes its configuration and starts it in its
 * namespace), relay the control plane ("ready" from all -> "start ORIGIN" with ORIGIN mapped
 * onto each host's clock by its measured offset; "stop" at stop.time), until every node has
 * exited; then copy every host's run files (node traces, eval.csv, logs) into o->run_dir. An
 * agent whose connection ends loses its nodes (exit status -1 each) and stops the run unless
 * on_failure_continue. A stop is bounded as on one host: a node that ignores "stop" for
 * stop_grace_ns + SUPERVISE_TERM_GRACE_MS is killed through its agent, and a host
 * that has not reported its nodes' ends MULTIHOST_STOP_NOW_MS after that is lost (named on
 * err_out, not fetched, its connection closed; the run failed unless interrupted). Nothing
 * of it waits on one host: its clock refreshes run in the background of its loop (a host that
 * did not answer one is left out of the next until it answers), and a host that overflows its
 * queue of requests (AGENTLINK_OUT_MAX) or takes none of it for MULTIHOST_OUT_STALL_MS is lost
 * the same way. *origin_ns: the run's origin on this clock. Returns 0 (every node exited 0), 1 (failed), 2
 * (interrupted); progress lines to err_out. */
int multihost_run_nodes(struct multihost *self, const struct multihost_nodes_opts *o, int64_t *origin_ns,
			FILE *err_out);

/* MULTIHOST_CLOCK_REFRESH_N more clock exchanges with host h (lines its agent sends meanwhile
 * are kept for the run's reads) and the estimate fitted again, offset and drift, over the
 * latest MULTIHOST_CLOCK_WINDOW exchanges (lib/clocksync's minimum-round-trip filter). Done
 * once when a run's nodes are done (waiting up to 5 s; while they run, multihost_run_nodes
 * refreshes in the background of its loop instead). Returns 0 or -errno (the estimate
 * unchanged). */
int multihost_clock_refresh(struct multihost *self, size_t h);

/* How many clock exchanges with host h the estimate has (kept), and the time they span. */
size_t multihost_clock_exchanges(const struct multihost *self, size_t h, int64_t *span_ns);

/* Host i's clock estimate (remote - local): the latest fit (multihost_connect, then refreshed). */
const struct clocksync_estimate *multihost_clock(const struct multihost *self, size_t i);

/* Tear the built testbed down on every host (each answer waited for up to 120 s; after a
 * second interruption, see multihost_opts.interrupted, up to MULTIHOST_STOP_NOW_MS: a host
 * that has not answered then tears down when its connection ends). Returns 0 or -EIO after
 * error lines. */
int multihost_teardown(struct multihost *self, FILE *err_out);

/* Close every agent (each tears down what it still holds); *self = NULL; accepts NULL. */
void multihost_close(struct multihost **self);

/* `stalenet cleanup` on every host through its agent; one line per host to out, errors to
 * err_out. Returns 0 when every host is clean, -EIO otherwise. */
int multihost_cleanup(const struct multihost_opts *o, FILE *out, FILE *err_out);

#endif
