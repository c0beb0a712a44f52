/* lib/timerlat: how late this host's timers fire, measured, for `stalenet doctor`, for the
 * choice of network.precision and for meta.json's host_timers.
 *
 * A thread asks to wake at an absolute CLOCK_MONOTONIC time (clock_nanosleep TIMER_ABSTIME,
 * 1 ns timer slack) and records how late it woke, in three situations:
 *   warm   1 ms sleeps back to back (a busy emulator's wake-ups);
 *   idle   a 10 ms sleep right after the thread (and maybe its CPU) idled idle_ms: what the
 *          first delayed packets after a quiet period meet. On virtual machines whose vCPUs the
 *          hypervisor parks, this is where milliseconds are lost;
 *   load   1 ms sleeps while one busy-looping thread per CPU competes for the cores.
 * The measuring thread runs SCHED_FIFO at rt_prio when that is allowed (as the emulator does;
 * result.rt says whether it did), so `load` measures the scheduler's latency for a real-time
 * thread, not the run queue of normal ones. No output, no exit: results only. */
#ifndef STALENET_TIMERLAT_H
#define STALENET_TIMERLAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct timerlat_opts {
	int warm_samples;   /* 1 ms sleeps (0 = skip) */
	int idle_samples;   /* 10 ms sleeps after idle_ms of idling (0 = skip) */
	int idle_ms;
	int load_samples;   /* 1 ms sleeps under load (0 = skip) */
	int rt_prio;        /* SCHED_FIFO priority of the measuring thread, 0 = normal */
};

/* Quick defaults for `stalenet run` (about 1 s) and thorough ones for `stalenet doctor`. */
#define TIMERLAT_OPTS_QUICK { .warm_samples = 200, .idle_samples = 6, .idle_ms = 100, .load_samples = 300, .rt_prio = 10 }
#define TIMERLAT_OPTS_DOCTOR { .warm_samples = 1000, .idle_samples = 20, .idle_ms = 250, .load_samples = 1000, .rt_prio = 10 }

struct timerlat_dist {
	int n;                        /* samples taken (0: not measured) */
	int64_t p50_ns, p99_ns, max_ns;
};

struct timerlat_result {
	struct timerlat_dist warm, idle, load;
	bool rt;                      /* the measuring thread ran SCHED_FIFO */
	int ncpu;                     /* CPUs loaded for `load` */
};

/* Measure (blocks for about warm + idle_samples * (idle_ms + 10) + load ms). Returns 0, or
 * -errno when a thread could not be started (what was measured is kept). */
int timerlat_measure(const struct timerlat_opts *opts, struct timerlat_result *out);

/* The precision mode a host with these timers needs: "spin" when the p99 lateness after idle
 * or under load exceeds 100 us (the emulator's error budget), else "timer". */
const char *timerlat_precision_for(const struct timerlat_result *r);

/* One human line per situation plus what it means for emulated delays, into buf ('\n'
 * separated). Returns the snprintf length. */
int timerlat_describe(const struct timerlat_result *r, char *buf, size_t len);

#endif
