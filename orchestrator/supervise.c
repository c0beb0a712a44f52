/* orchestrator/supervise: see supervise.h. */
#include "orchestrator/supervise.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectors/csv.h"
#include "collectors/progress.h"
#include "collectors/schema.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "orchestrator/hostload.h"
#include "orchestrator/launch.h"

#define SUP_STOP_GRACE_NS (SUPERVISE_STOP_GRACE_MS * 1000000LL)   /* "stop" -> SIGTERM, default */
#define SUP_TERM_GRACE_NS (SUPERVISE_TERM_GRACE_MS * 1000000LL)    /* SIGTERM -> SIGKILL */
#define SUP_PROGRESS_NS (100 * 1000000LL)
#define SUP_GUARD_NS (1000 * 1000000LL)       /* host-saturation guard's period */
#define SUP_GUARD_WARN_AFTER 3                /* samples before the guard may warn */
#define SUP_RETRY_FIRST_NS (100 * 1000000LL)  /* a failed planned start: first retry after */
#define SUP_RETRY_MAX_NS (2000 * 1000000LL)   /* ... doubling up to this */

enum proc_state { P_PENDING, P_RUNNING, P_EXITED };

struct proc {
	const struct supervise_node *spec;
	enum proc_state state;
	pid_t pid;
	bool ready, started, done, waiting, planned_kill, restarted, left;
	int64_t step;
	int64_t next_pause;          /* index k of the next planned pause window to log */
	int64_t retry_at;            /* a failed planned start: next try (relative ns), 0 = none */
	int64_t retry_ns;            /* ... the backoff before the try after it */
	unsigned failed_starts;      /* failed tries of the planned start under way */
	int status;
};

struct sup {
	const struct supervise_opts *o;
	struct proc *p;
	size_t n;
	bool started, stopping, failed, interrupted;
	int64_t origin_ns, stop_sent_ns, term_sent_ns;
	const char *stop_why;             /* why the run is stopping (stop_all's), NULL = not yet */
	int64_t killed_ns;                /* stop now: every running process killed then, 0 = not */
	int seen_interrupts;              /* the interruption count last acted upon */
	struct csv_writer *progress;
	struct hostload_point guard_pt;   /* the guard's latest sample (NAN: none yet) */
	bool guard_warned;
};

void supervise_event(const char *run_dir, const char *event, const char *target, const char *detail)
{
	char path[4096];
	struct csv_writer *w;

	snprintf(path, sizeof path, "%s/events.csv", run_dir);
	char clean[4096], tgt[512];

	/* Free text is quoted as a CSV field where it needs it (RFC 4180, docs/traces.md); a
	 * detail too long for the buffer is cut at 2 KiB first, so its quoted form always fits. */
	char cut[2048];
	snprintf(cut, sizeof cut, "%s", detail ? detail : "");
	csv_quote(cut, clean, sizeof clean);
	csv_quote(target ? target : "", tgt, sizeof tgt);
	w = csv_writer_open(path, TRACE_HEADER_EVENTS);
	if (!w)
		return;
	csv_writer_row(w, "%.6f,%s,%s,%s", clock_run_s(), event, tgt, clean);
	csv_writer_close(&w);
}

static int64_t rel_now(const struct sup *s)
{
	return s->started ? clock_now_ns() - s->origin_ns : -1;
}

static struct proc *by_name(struct sup *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->p[i].spec->name, name))
			return &s->p[i];
	return NULL;
}

static int start_proc(struct sup *s, struct proc *p)
{
	const char *argv[] = { s->o->node_bin, p->spec->conf_path, NULL };
	struct launch_spec ls = {
		.name = p->spec->name, .netns = p->spec->netns, .argv = argv, .log_path = p->spec->log_path,
		.record = s->o->hooks.record, .record_arg = s->o->hooks.arg, .place = s->o->hooks.place,
		/* a node stopped before its exec holds no stop at once */
		.interrupted = s->o->interrupted, .interrupt_at = SUPERVISE_STOP_NOW,
	};
	pid_t pid = s->o->spawn ? s->o->spawn(s->o->spawn_arg, &ls) : launch_spawn(&ls);

	if (pid < 0)
		return (int)pid;
	p->pid = pid;
	p->state = P_RUNNING;
	p->ready = p->started = p->done = p->waiting = false;
	p->planned_kill = false;
	return 0;
}

static void send_start(struct sup *s, struct proc *p, bool rejoin)
{
	char msg[64];

	snprintf(msg, sizeof msg, "start %lld%s", (long long)s->origin_ns, rejoin ? " rejoin" : "");
	ctl_server_send(s->o->ctl, p->spec->name, msg);
	p->started = true;
}

static void stop_all(struct sup *s, const char *why)
{
	if (s->stopping)
		return;
	s->stopping = true;
	s->stop_why = why;
	/* the run's own end (stop.time, work finished: every failure and the interruption are
	 * flagged before they stop it), flagged before its stop row: the caller's signal
	 * handler's next line says so */
	if (s->o->ended && !s->failed && !s->interrupted && !s->o->failures_only)
		*s->o->ended = 1;
	s->stop_sent_ns = clock_now_ns();
	log_info("stopping the run: %s", why);
	/* an interruption is logged in every phase: what follows it is no node's failure */
	if (!s->o->failures_only || s->failed || s->interrupted)
		supervise_event(s->o->run_dir, "stop", "all", why);
	for (size_t i = 0; i < s->n; i++)
		if (s->p[i].state == P_RUNNING)
			ctl_server_send(s->o->ctl, s->p[i].spec->name, "stop");
}

static void on_exit_cb(void *arg, pid_t pid, int status)
{
	struct sup *s = arg;
	char detail[1200], tail[1024];

	for (size_t i = 0; i < s->n; i++) {
		struct proc *p = &s->p[i];

		if (p->state != P_RUNNING || p->pid != pid)
			continue;
		p->state = P_EXITED;
		p->status = status;
		if (p->planned_kill)
			return;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			return;
		/* Nodes asked to stop may be killed by our own escalation: not a failure. Nor is
		 * any end after an interruption (a node stopped before its start exits 1, a prober
		 * whose reflector stopped too). */
		if ((s->stopping && WIFSIGNALED(status)) || s->interrupted)
			return;
		launch_log_tail(p->spec->log_path, 5, tail, sizeof tail);
		if (WIFEXITED(status))
			snprintf(detail, sizeof detail, "exit status %d", WEXITSTATUS(status));
		else
			snprintf(detail, sizeof detail, "killed by signal %d (%s)", WTERMSIG(status),
				 strsignal(WTERMSIG(status)));
		/* A kill by the kernel (the node's memory limit) is named first: events.csv says why. */
		if (s->o->hooks.death_cause) {
			char cause[256], plain[sizeof detail];

			if (s->o->hooks.death_cause(s->o->hooks.arg, p->spec->name, status, cause, sizeof cause) > 0) {
				memcpy(plain, detail, sizeof plain);
				plain[sizeof plain - 1] = '\0';
				if (snprintf(detail, sizeof detail, "%s; %s", cause, plain) >= (int)sizeof detail)
					detail[sizeof detail - 1] = '\0';
			}
		}
		log_error("node %s died: %s; last lines of %s:\n%s", p->spec->name, detail, p->spec->log_path, tail);
		for (char *c = tail; *c; c++)
			if (*c == '\n')
				*c = '|';
		{
			char ev[2400];
			snprintf(ev, sizeof ev, "%s; log: %s", detail, tail);
			supervise_event(s->o->run_dir, "node_failed", p->spec->name, ev);
		}
		if (!s->o->on_failure_continue) {
			s->failed = true;
			stop_all(s, "a node failed");
		}
		return;
	}
	if (s->o->hooks.reaped && s->o->hooks.reaped(s->o->hooks.arg, pid, status) < 0) {
		s->failed = true;
		stop_all(s, "a helper process of the run died");
	}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static void sample_progress(struct sup *s, int64_t now_rel)
{
	int64_t steps[s->n ? s->n : 1];
	size_t alive = 0, waiting = 0, workers = 0, counted = 0;

	for (size_t i = 0; i < s->n; i++) {
		struct proc *p = &s->p[i];

		if (!p->spec->is_worker)
			continue;
		workers++;
		/* Steps are those of every worker that ran: one that finished keeps its count, so
		 * the spread does not collapse while the run winds down. */
		if (p->state == P_PENDING && !p->step)
			continue;
		steps[counted++] = p->step;
		if (p->state != P_RUNNING)
			continue;
		alive++;
		waiting += p->waiting;
	}
	qsort(steps, counted, sizeof steps[0], cmp_i64);
	{
		double med = counted == 0 ? 0 : (counted % 2 ? (double)steps[counted / 2]
							     : (steps[counted / 2 - 1] + steps[counted / 2]) / 2.0);
		long mn = counted ? (long)steps[0] : 0, mx = counted ? (long)steps[counted - 1] : 0;

		/* A trace that cannot be written (ENOSPC, EIO; csv logged which file) makes the run
		 * worthless: stop it as failed rather than finish with holes in every file. */
		char rq[32] = "", hc[32] = "";

		if (!isnan(s->guard_pt.runq_wait_frac))
			snprintf(rq, sizeof rq, "%.4f", s->guard_pt.runq_wait_frac);
		if (!isnan(s->guard_pt.host_cpu_frac))
			snprintf(hc, sizeof hc, "%.4f", s->guard_pt.host_cpu_frac);
		if (s->progress && csv_writer_row(s->progress, "%.3f,%zu,%zu,%ld,%.1f,%ld,%s,%s", (double)now_rel / 1e9,
						  alive, waiting, mn, med, mx, rq, hc) < 0 && !s->stopping) {
			s->failed = true;
			stop_all(s, "a trace file cannot be written");
		}
		if (s->o->view) {
			struct progress_state st = {
				.run_id = s->o->run_label, .run_index = s->o->run_index, .run_count = s->o->run_count,
				.elapsed_s = (double)now_rel / 1e9, .stop = NULL,
				.stop_fraction = s->o->stop_after_ns > 0 ? (double)now_rel / (double)s->o->stop_after_ns : -1,
				.min_step = mn, .max_step = mx, .median_step = med, .waiting = (int)waiting,
				.alive = (int)alive, .workers = (int)workers, .accuracy = -1, .sweep_eta_s = -1,
			};
			if (s->o->hooks.status)
				s->o->hooks.status(s->o->hooks.arg, &st);
			progress_render(s->o->view, &st, (double)clock_now_ns() / 1e9, false);
		}
	}
}

/* The guard's sample: every running node's main thread but those under a cpu quota (their
 * throttled time is run-queue wait in schedstat, and it is the scenario's). The warning comes once, when the
 * run-wide share (not one noisy second) first exceeds the line; the live view starts a fresh
 * block below it. */
static void sample_guard(struct sup *s)
{
	pid_t pids[s->n ? s->n : 1];
	struct hostload_summary sum;
	size_t m = 0;

	for (size_t i = 0; i < s->n; i++)
		if (s->p[i].state == P_RUNNING && !s->p[i].spec->cpu_limited)
			pids[m++] = s->p[i].pid;
	if (hostload_sample(s->o->guard, pids, m, clock_now_ns(), &s->guard_pt) < 0)
		return;
	hostload_get_summary(s->o->guard, &sum);
	if (s->guard_warned || !sum.saturated || sum.samples < SUP_GUARD_WARN_AFTER)
		return;
	s->guard_warned = true;
	if (s->o->view)
		progress_finish(s->o->view);
	log_warn("host saturated: the nodes waited for a core %.1f%% of their time (host CPU %.0f%% busy); "
		 "their timing reflects the host, not the scenario (fewer workers, or resources: limits)",
		 100 * sum.runq_wait_mean, 100 * sum.host_cpu_mean);
	supervise_event(s->o->run_dir, "host_saturated", "all", "runq wait above 5%");
}

static void handle_msg(struct sup *s, const char *node, const char *msg)
{
	struct proc *p = by_name(s, node);
	struct ctl_status st;

	if (!p) {
		log_warn("control plane: message from unknown node '%s'", node);
		return;
	}
	if (!strcmp(msg, "ready")) {
		p->ready = true;
		if (s->started && !s->stopping)
			send_start(s, p, true); /* a late joiner or a restarted node */
		else if (s->stopping)
			ctl_server_send(s->o->ctl, node, "stop");
	} else if (!strcmp(msg, "done")) {
		p->done = true;
	} else if (!ctl_parse_status(msg, &st)) {
		p->step = st.step;
		p->waiting = st.waiting;
	}
}

/* True when a node other than p (services aside) runs: the run's work is not over. */
static bool others_running(const struct sup *s, const struct proc *p)
{
	for (size_t i = 0; i < s->n; i++)
		if (&s->p[i] != p && s->p[i].state == P_RUNNING && !s->p[i].spec->service)
			return true;
	return false;
}

/* A planned join or restart of p (what: "join" | "restart"), due now. The node counts as
 * joined/restarted (p->restarted) only once its process runs: before, a start that failed
 * (fork, exec, namespace entry, a resource limit) marked it done and the event was lost
 * without a trace. A failed start is an events.csv row (start_failed) and is tried again
 * after a backoff doubling from 0.1 s to 2 s, until it works or the run stops; when no other
 * node is left running, nothing would stop the run, so it gives up and the node counts as
 * failed (the run fails unless on_node_failure: continue). */
static void planned_start(struct sup *s, struct proc *p, const char *what, int64_t now_rel)
{
	const struct supervise_node *sp = p->spec;
	char d[256];
	int rc = start_proc(s, p);

	if (rc == -ECANCELED) /* the user's stop at once came during its launch: no failure */
		return;
	if (rc == 0) {
		p->restarted = true;
		d[0] = '\0';
		if (p->failed_starts)
			snprintf(d, sizeof d, "after %u failed start(s)", p->failed_starts);
		supervise_event(s->o->run_dir, what, sp->name, d);
		p->retry_at = p->retry_ns = 0;
		p->failed_starts = 0;
		return;
	}
	p->failed_starts++;
	p->retry_ns = p->retry_ns ? p->retry_ns * 2 : SUP_RETRY_FIRST_NS;
	if (p->retry_ns > SUP_RETRY_MAX_NS)
		p->retry_ns = SUP_RETRY_MAX_NS;
	p->retry_at = now_rel + p->retry_ns;
	if (!others_running(s, p)) {
		p->restarted = true; /* given up: nothing else runs that the run would wait for */
		p->retry_at = 0;
		snprintf(d, sizeof d, "%s: %s; no node left running, given up", what, strerror(-rc));
		log_error("node %s: planned %s failed: %s; no node left running, given up", sp->name, what,
			  strerror(-rc));
		supervise_event(s->o->run_dir, "start_failed", sp->name, d);
		if (!s->o->on_failure_continue) {
			s->failed = true;
			stop_all(s, "a node could not be started");
		}
		return;
	}
	snprintf(d, sizeof d, "%s: %s; retry in %.3f s", what, strerror(-rc), (double)p->retry_ns / 1e9);
	log_warn("node %s: planned %s failed (%s): retry in %.3f s", sp->name, what, strerror(-rc),
		 (double)p->retry_ns / 1e9);
	supervise_event(s->o->run_dir, "start_failed", sp->name, d);
}

/* Planned events of stragglers; returns the next planned time (relative ns). */
static int64_t planned_events(struct sup *s, int64_t now_rel)
{
	int64_t next = INT64_MAX;

	for (size_t i = 0; i < s->n; i++) {
		struct proc *p = &s->p[i];
		const struct supervise_node *sp = p->spec;

		if (sp->join_at_ns >= 0 && p->state == P_PENDING && !p->restarted) {
			int64_t at = p->retry_at ? p->retry_at : sp->join_at_ns;

			if (now_rel >= at)
				planned_start(s, p, "join", now_rel);
			else if (at < next)
				next = at;
			if (!p->restarted && p->retry_at && p->retry_at < next)
				next = p->retry_at;
		}
		if (sp->crash_at_ns >= 0 && p->state == P_RUNNING && !p->planned_kill && !p->restarted) {
			if (now_rel >= sp->crash_at_ns) {
				p->planned_kill = true;
				kill(p->pid, SIGKILL);
				supervise_event(s->o->run_dir, "crash", sp->name, "SIGKILL");
			} else if (sp->crash_at_ns < next) {
				next = sp->crash_at_ns;
			}
		}
		if (sp->restart_at_ns >= 0 && p->planned_kill && p->state == P_EXITED && !p->restarted) {
			int64_t at = p->retry_at ? p->retry_at : sp->restart_at_ns;

			if (now_rel >= at)
				planned_start(s, p, "restart", now_rel);
			else if (at < next)
				next = at;
			if (!p->restarted && p->retry_at && p->retry_at < next)
				next = p->retry_at;
		}
		/* The node pauses on its own clock, in windows [k every, k every + for), k >= 1, at
		 * its first step boundary inside one: log each window as it opens. */
		if (sp->pause_every_ns > 0 && sp->pause_for_ns > 0 && p->state == P_RUNNING) {
			int64_t at;

			if (p->next_pause < 1)
				p->next_pause = 1;
			at = p->next_pause * sp->pause_every_ns;
			if (now_rel >= at) {
				char d[64];

				snprintf(d, sizeof d, "for %.3f s", (double)sp->pause_for_ns / 1e9);
				supervise_event(s->o->run_dir, "pause", sp->name, d);
				p->next_pause = now_rel / sp->pause_every_ns + 1;
				at = p->next_pause * sp->pause_every_ns;
			}
			if (at < next)
				next = at;
		}
		if (sp->leave_at_ns >= 0 && p->state == P_RUNNING && !p->left) {
			if (now_rel >= sp->leave_at_ns) {
				p->left = true;
				ctl_server_send(s->o->ctl, sp->name, "stop");
				supervise_event(s->o->run_dir, "leave", sp->name, "");
			} else if (sp->leave_at_ns < next) {
				next = sp->leave_at_ns;
			}
		}
	}
	return next;
}

/* Stop now (SUPERVISE_STOP_NOW): SIGKILL to every running node's process group (its own, from
 * orchestrator/launch: what the node started goes too), as the stop's escalation would do after
 * its graces. A process not yet reaped keeps its pid and group, so no other is hit. */
static void kill_all_now(struct sup *s)
{
	size_t n = 0;

	s->killed_ns = clock_now_ns();
	for (size_t i = 0; i < s->n; i++) {
		struct proc *p = &s->p[i];

		if (p->state != P_RUNNING)
			continue;
		if (kill(-p->pid, SIGKILL) < 0)
			kill(p->pid, SIGKILL); /* no group of its own (a stand-in spawn) */
		n++;
	}
	if (n)
		log_info("stopping at once: %zu node process(es) killed", n);
}

/* True when every process has exited. When only services are left, they are told to stop. */
static bool all_exited(struct sup *s)
{
	bool services_left = false;

	for (size_t i = 0; i < s->n; i++) {
		const struct proc *p = &s->p[i];

		if (p->state == P_RUNNING && p->spec->service) {
			services_left = true;
			continue;
		}
		if (p->state == P_RUNNING)
			return false;
		/* A planned restart or join still to come keeps the run alive (unless stopping). */
		if (!s->stopping && !p->restarted &&
		    ((p->state == P_PENDING && p->spec->join_at_ns >= 0) ||
		     (p->planned_kill && p->spec->restart_at_ns >= 0)))
			return false;
	}
	if (services_left) {
		if (s->started)
			stop_all(s, "work finished");
		return false;
	}
	return true;
}

enum supervise_result supervise_run(const struct supervise_opts *o, const struct supervise_node *nodes,
				    size_t n, int64_t *origin_ns)
{
	struct sup s = { .o = o, .n = n, .guard_pt = { NAN, NAN } };
	int64_t ready_deadline = clock_now_ns() + (int64_t)o->ready_timeout_ms * 1000000LL;
	int64_t next_progress = 0, hook_next = 0, next_guard = 0;
	enum supervise_result res = SUPERVISE_OK;
	char path[4096];
	const int64_t stop_grace_ns = o->stop_grace_ns > 0 ? o->stop_grace_ns : SUP_STOP_GRACE_NS;

	s.p = calloc(n ? n : 1, sizeof *s.p);
	if (!s.p)
		return SUPERVISE_FAILED;
	for (size_t i = 0; i < n; i++)
		s.p[i].spec = &nodes[i];
	if (o->write_progress) {
		snprintf(path, sizeof path, "%s/progress.csv", o->run_dir);
		s.progress = csv_writer_open(path, TRACE_HEADER_PROGRESS);
	}
	for (size_t i = 0; i < n; i++) {
		if (nodes[i].join_at_ns >= 0)
			continue;
		int rc = start_proc(&s, &s.p[i]);

		if (rc == -ECANCELED) /* the user's stop at once: the loop below stops the run */
			break;
		if (rc < 0) {
			s.failed = true;
			stop_all(&s, "a node could not be started");
			break;
		}
	}

	for (;;) {
		char node[64], msg[256];
		int64_t now = clock_now_ns(), now_rel, wake = now + 20 * 1000000LL;
		int timeout_ms, rc;

		if (o->interrupted && *o->interrupted != s.seen_interrupts) {
			/* the handler's line went below the live view: the next frame starts under it */
			if (o->view)
				progress_finish(o->view);
			/* the first once the run has ended of itself: its work is done, it stays so */
			if (!s.seen_interrupts && s.stopping && !s.failed && !s.interrupted && !o->failures_only)
				log_info("interrupted after the run's end (%s): it stays complete; its nodes' ends "
					 "and files are still awaited (interrupt again to stop at once)", s.stop_why);
			s.seen_interrupts = *o->interrupted;
		}
		if (s.seen_interrupts && !s.stopping) {
			res = SUPERVISE_INTERRUPTED;
			s.interrupted = true;
			stop_all(&s, "interrupted");
		}
		if (s.seen_interrupts >= SUPERVISE_STOP_NOW && !s.killed_ns) {
			/* also when the run was already stopping for another reason: what runs now is
			 * cut short by the user, not finished */
			if (res == SUPERVISE_OK && !s.failed)
				res = SUPERVISE_INTERRUPTED;
			s.interrupted = true;
			kill_all_now(&s);
		}
		launch_reap(on_exit_cb, &s);

		/* Start everybody at once when the last initial node is ready. */
		if (!s.started && !s.stopping) {
			bool all_ready = true;

			for (size_t i = 0; i < n; i++)
				if (nodes[i].join_at_ns < 0 && !s.p[i].ready)
					all_ready = false;
			if (all_ready) {
				s.origin_ns = clock_now_ns();
				clock_set_origin_ns(s.origin_ns);
				s.started = true;
				for (size_t i = 0; i < n; i++)
					if (s.p[i].state == P_RUNNING)
						send_start(&s, &s.p[i], false);
				if (!o->failures_only) {
					supervise_event(o->run_dir, "start", "all", "");
					for (size_t i = 0; i < n; i++)
						if (nodes[i].straggler && nodes[i].straggler[0])
							supervise_event(o->run_dir, "straggler", nodes[i].name,
									nodes[i].straggler);
				}
			} else if (now > ready_deadline) {
				s.failed = true;
				for (size_t i = 0; i < n; i++)
					if (nodes[i].join_at_ns < 0 && !s.p[i].ready)
						log_error("node %s did not become ready in %d ms (log: %s)", nodes[i].name,
							  o->ready_timeout_ms, nodes[i].log_path);
				stop_all(&s, "nodes did not become ready");
			}
		}
		now_rel = rel_now(&s);
		if (s.started && !s.stopping) {
			int64_t nx = planned_events(&s, now_rel);

			if (o->stop_after_ns > 0 && now_rel >= o->stop_after_ns)
				stop_all(&s, "stop.time reached");
			else if (o->stop_after_ns > 0 && o->stop_after_ns - now_rel < nx)
				nx = o->stop_after_ns;
			if (nx != INT64_MAX && s.origin_ns + nx < wake)
				wake = s.origin_ns + nx;
		}

		if (s.started && o->hooks.tick && now_rel >= hook_next) {
			hook_next = o->hooks.tick(o->hooks.arg, now_rel);
			if (hook_next < 0) {
				s.failed = true;
				stop_all(&s, "link emulation failed");
				hook_next = INT64_MAX;
			}
		}
		if (s.started && hook_next != INT64_MAX && s.origin_ns + hook_next < wake)
			wake = s.origin_ns + hook_next;
		if (s.started && !s.stopping && o->guard && now_rel >= next_guard) {
			sample_guard(&s);
			next_guard = now_rel + SUP_GUARD_NS;
		}
		if (s.started && !s.stopping && o->guard && s.origin_ns + next_guard < wake)
			wake = s.origin_ns + next_guard;
		if (s.started && now_rel >= next_progress) {
			sample_progress(&s, now_rel);
			next_progress = now_rel + SUP_PROGRESS_NS;
		}
		if (s.started && s.origin_ns + next_progress < wake)
			wake = s.origin_ns + next_progress;
		if (all_exited(&s))
			break;
		if (s.killed_ns) {
			bool left = false;

			/* killed: only the exits are waited for (services too), boundedly */
			for (size_t i = 0; i < n; i++)
				left |= s.p[i].state == P_RUNNING;
			if (!left)
				break;
			if (now - s.killed_ns > (int64_t)SUPERVISE_KILL_WAIT_MS * 1000000LL) {
				for (size_t i = 0; i < n; i++)
					if (s.p[i].state == P_RUNNING)
						log_error("node %s (pid %d) did not end %d ms after SIGKILL; left to the "
							  "teardown", nodes[i].name, (int)s.p[i].pid, SUPERVISE_KILL_WAIT_MS);
				break;
			}
		}
		if (s.stopping) {
			if (!s.term_sent_ns && now - s.stop_sent_ns > stop_grace_ns) {
				s.term_sent_ns = now;
				for (size_t i = 0; i < n; i++)
					if (s.p[i].state == P_RUNNING) {
						log_warn("node %s ignored stop: SIGTERM", nodes[i].name);
						kill(s.p[i].pid, SIGTERM);
					}
			} else if (s.term_sent_ns && now - s.term_sent_ns > SUP_TERM_GRACE_NS) {
				for (size_t i = 0; i < n; i++)
					if (s.p[i].state == P_RUNNING)
						kill(s.p[i].pid, SIGKILL);
			}
		}
		timeout_ms = (int)((wake - clock_now_ns()) / 1000000LL);
		if (timeout_ms < 0)
			timeout_ms = 0;
		if (timeout_ms > 20)
			timeout_ms = 20;
		rc = ctl_server_recv(o->ctl, node, sizeof node, msg, sizeof msg, timeout_ms);
		while (rc == 1) {
			handle_msg(&s, node, msg);
			rc = ctl_server_recv(o->ctl, node, sizeof node, msg, sizeof msg, 0);
		}
	}
	if (s.started) {
		sample_progress(&s, rel_now(&s));
		if (o->view)
			progress_finish(o->view);
	}
	csv_writer_close(&s.progress);
	free(s.p);
	*origin_ns = s.origin_ns;
	if (res == SUPERVISE_OK && s.failed)
		res = SUPERVISE_FAILED;
	return res;
}
