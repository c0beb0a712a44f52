/* Child processes in tests: a shell command, and reaping children with a deadline. A child
 * that outlives its deadline is killed (SIGKILL) and reaped, so a failing test leaves no
 * process behind. Plain C, no Criterion: the caller asserts on the results. */
#ifndef STALENET_TESTS_SUPPORT_PROC_H
#define STALENET_TESTS_SUPPORT_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* Run the printf-formatted command through /bin/sh; returns system()'s status (0 = exit 0). */
int support_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* fork() whose child first drops every supplementary group and becomes gid and uid `uid`
 * (the caller must be root); in the child a failure to switch ends it with _exit(20).
 * Returns what fork() returns: the child's pid, 0 in the child, -1 with errno set. */
pid_t support_fork_as(uid_t uid);

/* Wait up to timeout_ms for child pid to end; its wait status into *status (may be NULL).
 * Returns 0, or -ETIMEDOUT after killing and reaping it, or -errno of waitpid. */
int support_wait_pid(pid_t pid, int *status, int timeout_ms);

/* Wait for n children under one deadline of timeout_ms; those still running then are killed
 * and reaped. Statuses into status[] when not NULL (-1 for a killed one). Returns how many
 * exited with code 0. */
int support_wait_children(const pid_t *pids, int n, int *status, int timeout_ms);

/* The start time of process pid as orchestrator/launch records it (launch_proc_start_time),
 * waiting up to timeout_ms for /proc to show it; 0 when it never does. */
uint64_t support_wait_start_time(pid_t pid, int timeout_ms);

#endif
