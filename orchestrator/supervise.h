/* orchestrator/supervise: run a set of node processes to completion under the control plane.
 *
 * The supervisor starts the nodes (through orchestrator/launch), waits until every one said
 * "ready", starts the run's clock for all of them at once ("start ORIGIN"), and then loops:
 * control messages (status, done), child reaping, planned crashes/restarts/joins/leaves of
 * stragglers, the stop condition (time), progress.csv every 100 ms, the live view, the
 * host-saturation guard every second (orchestrator/hostload: a warning, once, when the nodes
 * have waited for a core more than 5% of their time), and a caller hook for timeline events
 * and link counters. A planned restart or join whose process cannot be started (fork, exec,
 * namespace entry, a resource limit) is logged as `start_failed` and tried again with a
 * backoff (0.1 s doubling to 2 s) until it starts or the run stops; the node counts as
 * restarted or joined only once its process runs. A node that dies unplanned is reported with
 * its name, status and log tail, logged to events.csv, and (policy `stop`) stops the run.
 * An interruption stops the run as stop.time does ("stop", then SIGTERM after stop.grace, 15 s by
 * default, SIGKILL 5 s later); a second one kills what still runs at once (SUPERVISE_STOP_NOW). Nothing here
 * touches the network: the caller owns namespaces and links. */
#ifndef STALENET_SUPERVISE_H
#define STALENET_SUPERVISE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/ctl.h"

struct csv_writer;
struct hostload;
struct launch_spec;
struct progress_state;
struct progress_view;

struct supervise_node {
	const char *name;
	const char *netns;
	const char *conf_path;
	const char *log_path;
	bool is_worker;              /* counted in progress (workers and peers) */
	bool service;                /* serves others (reflector): stopped once the rest exited */
	int64_t join_at_ns;          /* start late, relative to the origin; -1 = at start */
	int64_t crash_at_ns;         /* SIGKILL at this time; -1 = never */
	int64_t restart_at_ns;       /* start again at this time; -1 = never */
	int64_t leave_at_ns;         /* send "stop" at this time; -1 = never */
	int64_t pause_every_ns, pause_for_ns; /* planned pauses (the node takes them): logged */
	const char *straggler;       /* its straggler profile, logged at the start; NULL = none */
	bool cpu_limited;            /* under a resources cpu quota: left out of the host-saturation
					guard (a throttled thread counts as waiting for a core, but it
					waits for its own quota, which is the scenario) */
};

struct supervise_hooks {
	/* Called every loop iteration with the run's now (ns since origin; < 0 before the start).
	 * Returns the next time (ns since origin) it wants to be called, or INT64_MAX. A negative
	 * return stops the run as failed. */
	int64_t (*tick)(void *arg, int64_t now_rel_ns);
	/* Record a process before it may exec (teardown journal). */
	int (*record)(void *arg, pid_t pid, uint64_t start_time, const char *name);
	/* Move a node's process into its cgroup before it execs (launch_spec.place). NULL: none. */
	int (*place)(void *arg, pid_t pid, const char *name);
	/* Why node name died with status, if the caller knows more than the status (e.g.
	 * "oom_killed: memory limit 256MiB"): fill cause and return 1, else 0. NULL: none. */
	int (*death_cause)(void *arg, const char *name, int status, char *cause, size_t len);
	/* A child that is none of the nodes exited (the caller's own helper, such as the link
	 * emulator, reaped by the supervisor's waitpid loop). Return < 0 to stop the run as
	 * failed. NULL: such exits are ignored. */
	int (*reaped)(void *arg, pid_t pid, int status);
	/* Complete the live view's state before it is drawn: the supervisor fills steps, alive,
	 * waiting, elapsed and (with stop.time) stop_fraction; the caller adds what it knows
	 * (accuracy, link drops, the stop label, the sweep's ETA). */
	void (*status)(void *arg, struct progress_state *st);
	void *arg;
};

struct supervise_opts {
	const char *node_bin;                /* stalenet-node */
	struct ctl_server *ctl;
	const char *run_dir;                 /* events.csv, progress.csv go here */
	int64_t stop_after_ns;               /* stop.time; 0 = none */
	int64_t stop_grace_ns;               /* stop.grace: "stop" -> SIGTERM; 0 =
						SUPERVISE_STOP_GRACE_MS */
	bool write_progress;                 /* progress.csv */
	bool failures_only;                  /* events.csv: no routine start/stop rows (a phase
						before the run's clock origin, whose times would
						not line up with the rows after it); an
						interruption's stop row is still written */
	bool on_failure_continue;            /* scenario on_node_failure: continue */
	int ready_timeout_ms;
	struct progress_view *view;          /* NULL = no live view */
	struct hostload *guard;              /* host-saturation guard, sampled every second
						with the live nodes' pids (progress.csv's
						runq_wait_frac, host_cpu_frac); owned by the
						caller, NULL = none */
	const char *run_label;               /* for the live view */
	int run_index, run_count;
	volatile sig_atomic_t *interrupted;  /* the caller's count of interruptions (its signal
						handler's): 1 stops the run gracefully,
						SUPERVISE_STOP_NOW or more at once (below) */
	volatile sig_atomic_t *ended;        /* NULL, or set to 1 once the run has reached its
						end of itself (stop.time, work finished; not a
						failure, not an interruption) and winds down: the
						caller's signal handler then says an interruption
						leaves the run complete */
	struct supervise_hooks hooks;
	/* Start a node's process as launch_spawn does (returns its pid or -errno); NULL =
	 * launch_spawn. A stand-in lets tests make a start fail. */
	pid_t (*spawn)(void *arg, const struct launch_spec *ls);
	void *spawn_arg;
};

enum supervise_result { SUPERVISE_OK = 0, SUPERVISE_FAILED = 1, SUPERVISE_INTERRUPTED = 2 };

/* The interruption count (supervise_opts.interrupted) from which a stop is at once: every
 * node still running is killed (SIGKILL to its process group) instead of waited for through
 * the stop's graces, and supervise_run returns within SUPERVISE_KILL_WAIT_MS of that even
 * when a process does not go (the caller's teardown deals with it). orchestrator/multihost
 * counts interruptions the same way. */
#define SUPERVISE_STOP_NOW 2
#define SUPERVISE_KILL_WAIT_MS 2000
/* The graceful stop's bounds: a node that ignores "stop" this long (the default of
 * supervise_opts.stop_grace_ns, the scenario's stop.grace) gets SIGTERM, and SIGKILL
 * SUPERVISE_TERM_GRACE_MS after that (orchestrator/multihost bounds a stop across hosts by
 * the same figures). */
#define SUPERVISE_STOP_GRACE_MS 15000
#define SUPERVISE_TERM_GRACE_MS 5000

/* Run the nodes until all have exited. *origin_ns receives the run's clock origin (set when
 * the start is sent). Returns a supervise_result: an interruption that comes once the run has
 * already ended (stop.time reached, work finished) and is winding down changes nothing of it
 * (SUPERVISE_OK, said in the log), unless a second one cuts the wind-down short. */
enum supervise_result supervise_run(const struct supervise_opts *o, const struct supervise_node *nodes,
				    size_t n, int64_t *origin_ns);

/* Append one events.csv row (t_s,event,target,detail) under run_dir; t_s from lib/clock. */
void supervise_event(const char *run_dir, const char *event, const char *target, const char *detail);

#endif
