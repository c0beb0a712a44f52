/* orchestrator/hostload: the host-saturation guard's measurements.
 *
 * Every node of a run shares the host's cores. When they want more CPU than there is, a node's
 * step time includes the time it sat in a run queue, and the run measures the host rather than
 * the scenario. Two figures say how much of that happened:
 *   - runq_wait_frac: over the live nodes, the time their main thread was runnable but not
 *     running (the second field of /proc/PID/schedstat, the scheduler's run_delay) divided by
 *     the wall time that passed for them. A node's main thread is the one that computes and
 *     waits at the barrier, so this is the share of its measured step time owed to the host.
 *   - host_cpu_frac: the host's busy share of all cores from /proc/stat (every process, not
 *     only the run's), so a run slowed by someone else's work is told apart.
 * A run whose nodes waited more than HOSTLOAD_SATURATED_FRAC of their time is flagged.
 *
 * The parsers and the accumulator (hostload_feed) are pure: tests feed them fixture text and
 * numbers. hostload_sample is the one function that reads /proc. */
#ifndef STALENET_HOSTLOAD_H
#define STALENET_HOSTLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Nodes that spent more than this share of their time runnable but not running: their
 * timing reflects the host (a run-wide mean above it flags the run). */
#define HOSTLOAD_SATURATED_FRAC 0.05

/* One thread's scheduler statistics (/proc/PID/schedstat: on-CPU ns, run-queue wait ns,
 * timeslices). */
struct hostload_sched {
	uint64_t run_ns, wait_ns, slices;
};

/* The host's CPU time in clock ticks (/proc/stat's aggregate "cpu" line): busy = total
 * minus idle and iowait. guest and guest_nice are already inside user and nice, so they are
 * not added again. */
struct hostload_cpu {
	uint64_t busy, total;
};

/* Parse the text of /proc/PID/schedstat ("RUN WAIT SLICES\n"). Returns 0 or -EINVAL. */
int hostload_parse_schedstat(const char *text, struct hostload_sched *out);

/* Parse the text of /proc/stat (its first "cpu " line). Returns 0 or -EINVAL. */
int hostload_parse_stat(const char *text, struct hostload_cpu *out);

/* The busy share of the host's cores between two readings, in [0, 1]; NAN when no tick
 * passed or a counter went back. */
double hostload_cpu_frac(const struct hostload_cpu *prev, const struct hostload_cpu *cur);

/* One live node's reading at a sample. */
struct hostload_obs {
	pid_t pid;
	struct hostload_sched sched;
};

/* What one sample measured since the previous one; NAN when it cannot say yet (the first
 * sample of a process only sets its baseline). */
struct hostload_point {
	double runq_wait_frac, host_cpu_frac;
};

/* The run's figures so far. runq_wait_mean is time-weighted (all wait ns over all wall ns of
 * every sample), host_cpu_mean the mean of the samples; the maxima are over samples. NAN when
 * no sample measured anything. saturated: runq_wait_mean > HOSTLOAD_SATURATED_FRAC. */
struct hostload_summary {
	double runq_wait_mean, runq_wait_max, host_cpu_mean, host_cpu_max;
	bool saturated;
	size_t samples;
};

struct hostload;

/* New accumulator (no sample yet). Returns NULL on out of memory. */
struct hostload *hostload_new(void);

/* Free; accepts NULL; sets *self = NULL. */
void hostload_destroy(struct hostload **self);

/* Account one sample taken at now_ns (CLOCK_MONOTONIC): obs[0..n) the live nodes' readings,
 * cpu the host's (NULL: unknown). A pid seen for the first time (or whose counters went back:
 * another process under a reused pid) only sets its baseline; pids absent from obs are
 * forgotten. Fills *out (may be NULL). Returns 0 or -ENOMEM. */
int hostload_feed(struct hostload *self, const struct hostload_obs *obs, size_t n,
		  const struct hostload_cpu *cpu, int64_t now_ns, struct hostload_point *out);

/* Read /proc/PID/schedstat of each of pids[0..n) (a pid that has gone is left out) and
 * /proc/stat, then hostload_feed. Returns 0, or -ENOMEM. */
int hostload_sample(struct hostload *self, const pid_t *pids, size_t n, int64_t now_ns,
		    struct hostload_point *out);

/* The run's figures so far (see struct hostload_summary). */
void hostload_get_summary(const struct hostload *self, struct hostload_summary *out);

#endif
