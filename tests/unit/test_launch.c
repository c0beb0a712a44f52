/* Unit tests for orchestrator/launch (no namespaces): record-before-exec, exit statuses,
 * exec failures reported as errors, log tails. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orchestrator/launch.h"
#include "tests/support/files.h"
#include "tests/support/wait.h"

struct rec {
	pid_t pid;
	uint64_t st;
	int calls;
};

static int record(void *arg, pid_t pid, uint64_t st, const char *name)
{
	struct rec *r = arg;

	(void)name;
	r->pid = pid;
	r->st = st;
	r->calls++;
	return 0;
}

static void on_exit_cb(void *arg, pid_t pid, int status)
{
	int *out = arg;

	(void)pid;
	*out = status;
}

static bool reaped_one(void *status)
{
	return launch_reap(on_exit_cb, status) != 0;
}

Test(launch, record_exit_status_and_log, .timeout = 30)
{
	char log[] = "/tmp/stalenet-launch-XXXXXX";
	const char *argv[] = { "/bin/sh", "-c", "echo one; echo two; echo three; exit 3", NULL };
	struct rec r = { 0 };
	struct launch_spec s = { .name = "t", .argv = argv, .record = record, .record_arg = &r };
	int fd = support_mkstemp(log), status = -1;
	char tail[256];
	pid_t pid;

	close(fd);
	s.log_path = log;
	pid = launch_spawn(&s);
	cr_assert_gt(pid, 0);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.pid, pid);
	cr_assert_gt(r.st, 0);
	cr_assert(support_wait_until(reaped_one, &status, 10000), "the child was not reaped in 10 s");
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 3);
	launch_log_tail(log, 2, tail, sizeof tail);
	cr_assert_str_eq(tail, "two\nthree");
	unlink(log);
}

Test(launch, exec_failure_is_an_error)
{
	const char *argv[] = { "/nonexistent/stalenet-node", NULL };
	struct launch_spec s = { .name = "t", .argv = argv };

	cr_assert_eq(launch_spawn(&s), -ENOENT);
}

Test(launch, missing_netns_is_an_error)
{
	const char *argv[] = { "/bin/true", NULL };
	struct launch_spec s = { .name = "t", .netns = "stalenet-no-such-namespace", .argv = argv };

	cr_assert_eq(launch_spawn(&s), -ENOENT);
}

Test(launch, start_time_of_self)
{
	cr_assert_gt(launch_proc_start_time(getpid()), 0);
	cr_assert_eq(launch_proc_start_time(999999999), 0);
}
