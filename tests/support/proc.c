/* Shared child-process helpers: shell commands and reaping with a deadline. */
#include "tests/support/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <grp.h>
#include <sys/wait.h>

#include "orchestrator/launch.h"
#include "tests/support/wait.h"

int support_sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof cmd)
		return -1;
	return system(cmd);
}

pid_t support_fork_as(uid_t uid)
{
	pid_t pid = fork();

	if (pid == 0 && (setgroups(0, NULL) < 0 || setgid((gid_t)uid) < 0 || setuid(uid) < 0))
		_exit(20);
	return pid;
}

struct reap {
	pid_t pid;
	int *status;
	int err;
};

static bool reaped(void *arg)
{
	struct reap *r = arg;
	pid_t p;

	do
		p = waitpid(r->pid, r->status, WNOHANG);
	while (p < 0 && errno == EINTR);
	if (p < 0)
		r->err = -errno;
	return p != 0;
}

int support_wait_pid(pid_t pid, int *status, int timeout_ms)
{
	int st = 0;
	struct reap r = { pid, &st, 0 };

	if (!support_wait_until(reaped, &r, timeout_ms < 0 ? 0 : timeout_ms)) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (status)
			*status = -1;
		return -ETIMEDOUT;
	}
	if (status)
		*status = st;
	return r.err;
}

int support_wait_children(const pid_t *pids, int n, int *status, int timeout_ms)
{
	int64_t deadline = support_now_ms() + timeout_ms;
	int ok = 0;

	for (int i = 0; i < n; i++) {
		int st = -1;

		if (support_wait_pid(pids[i], &st, (int)(deadline - support_now_ms())) == 0)
			ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
		else
			st = -1;
		if (status)
			status[i] = st;
	}
	return ok;
}

static bool start_time_known(void *pid)
{
	return launch_proc_start_time(*(pid_t *)pid) > 0;
}

uint64_t support_wait_start_time(pid_t pid, int timeout_ms)
{
	if (!support_wait_until(start_time_known, &pid, timeout_ms))
		return 0;
	return launch_proc_start_time(pid);
}
