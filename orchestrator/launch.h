/* orchestrator/launch: start node processes inside their namespaces and supervise them.
 *
 * fork -> (child) setns into /run/netns/NAME, stdout+stderr to the node's log, die with the
 * orchestrator (PR_SET_PDEATHSIG), wait for the parent's go -> exec. The parent records the
 * process (pid + start time) through the caller's hook BEFORE letting the child exec, so a
 * teardown can always find what was started, and never kills a recycled pid. */
#ifndef STALENET_LAUNCH_H
#define STALENET_LAUNCH_H

#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

struct launch_spec {
	const char *name;            /* node name, for messages */
	const char *netns;           /* namespace name under /run/netns, NULL = stay in the caller's */
	const char *const *argv;     /* program and arguments, NULL-terminated */
	const char *log_path;        /* stdout+stderr appended here; NULL = inherit */
	const char *cwd;             /* NULL = inherit */
	/* Called in the parent after fork, before the child may exec; a non-zero return kills
	 * the child and fails the launch. */
	int (*record)(void *arg, pid_t pid, uint64_t start_time, const char *name);
	void *record_arg;
	/* Called in the parent after record, before the child may exec (e.g. to move it into its
	 * cgroup, so the program starts under its limits); non-zero kills the child and fails the
	 * launch. NULL: none. Gets record_arg. */
	int (*place)(void *arg, pid_t pid, const char *name);
	/* The caller's interruption count (its signal handler's), NULL = none: from
	 * *interrupted >= interrupt_at (0 = 1) on, the child's exec is no longer awaited (the
	 * child is killed, -ECANCELED, not logged). */
	const volatile sig_atomic_t *interrupted;
	int interrupt_at;
};

/* How long launch_spawn awaits the child's exec: a child that does not get there (stopped
 * before it, say) is killed and the launch fails (-ETIMEDOUT, logged). */
#define LAUNCH_EXEC_WAIT_MS 30000

/* Start a process. Returns its pid, or -errno (the reason logged). */
pid_t launch_spawn(const struct launch_spec *spec);

/* The start time of pid in clock ticks since boot (/proc/PID/stat field 22), 0 if gone. */
uint64_t launch_proc_start_time(pid_t pid);

/* Reap every exited child without blocking. For each, calls on_exit(arg, pid, status) where
 * status is as from waitpid. Returns the number reaped. */
int launch_reap(void (*on_exit)(void *arg, pid_t pid, int status), void *arg);

/* Last n lines of a text file into buf (for "node X died: ..." reports). */
void launch_log_tail(const char *path, int n, char *buf, size_t buflen);

#endif
