/* Unit tests for orchestrator/launch (no namespaces): record-before-exec, exit statuses,
 * exec failures reported as errors, log tails, a child stopped before its exec given up on
 * when the caller is interrupted. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
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

/* The child stopped (SIGSTOP) between its record and its exec: the launch would await an exec
 * that never comes. Here the caller's interruption count reaches its mark 200 ms into that
 * wait (from a timer's signal, as a user's second Ctrl-C): the launch ends at once, -ECANCELED,
 * the child killed and reaped. */
static volatile sig_atomic_t launch_interrupts;

static void on_alarm(int sig)
{
	(void)sig;
	launch_interrupts = 2;
}

static int record_and_stop(void *arg, pid_t pid, uint64_t st, const char *name)
{
	record(arg, pid, st, name);
	return kill(pid, SIGSTOP);
}

Test(launch, child_stopped_before_exec_is_given_up_on_interruption, .timeout = 30)
{
	const char *argv[] = { "/bin/true", NULL };
	struct rec r = { 0 };
	struct launch_spec ls = { .name = "t", .argv = argv, .record = record_and_stop, .record_arg = &r,
				  .interrupted = &launch_interrupts, .interrupt_at = 2 };
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval it = { .it_value = { .tv_usec = 200000 } };
	int64_t t0, took;
	pid_t pid;

	launch_interrupts = 0;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
	t0 = support_now_ms();
	cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
	pid = launch_spawn(&ls);
	took = support_now_ms() - t0;
	signal(SIGALRM, SIG_DFL);
	cr_assert_eq(launch_interrupts, 2, "the interruption never came");
	cr_assert_eq(pid, -ECANCELED, "launch returned %d", (int)pid);
	cr_expect_lt(took, 5000, "the launch took %lld ms", (long long)took);
	cr_assert_eq(r.calls, 1);
	/* killed and reaped: no such process any more */
	cr_assert(kill(r.pid, 0) < 0 && errno == ESRCH, "child %d left", (int)r.pid);
}
