/* lib/clock: one time base for every process of a run.
 *
 * All traces stamp t_s = (CLOCK_MONOTONIC now - run origin) / 1e9. The orchestrator reads the
 * origin once and hands it to every node (node config key origin_ns), so the t_s columns of all
 * files line up without any clock synchronisation. */
#ifndef STALENET_CLOCK_H
#define STALENET_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t clock_now_ns(void);

/* CLOCK_REALTIME in nanoseconds (only for meta.json's wall-clock start). */
int64_t clock_wall_ns(void);

/* CLOCK_REALTIME less CLOCK_MONOTONIC now, in nanoseconds, from a pair of reads that nothing
 * came between (the monotonic clock read before and after the realtime one, the tightest of a
 * few tries): a thread preempted between two plain reads would be off by the preemption. */
int64_t clock_wall_offset_ns(void);

/* Set / get this process's run origin (CLOCK_MONOTONIC ns). Default: first call's now. */
void clock_set_origin_ns(int64_t origin_ns);
int64_t clock_origin_ns(void);

/* Seconds since the run origin. */
double clock_run_s(void);

/* Sleep until CLOCK_MONOTONIC reaches t_ns (absolute); retries on EINTR. */
void clock_sleep_until_ns(int64_t t_ns);

/* Sleep for ns nanoseconds (relative); retries on EINTR. */
void clock_sleep_ns(int64_t ns);

#endif
