/* Unit tests for the shared test helpers of tests/support: bounded waits end on time and as
 * soon as the condition holds, children past their deadline are killed, rm -rf removes a
 * whole tree, whole-file reads round-trip, the must-run switch reads the environment, free
 * port runs skip ports in use and stay below the ephemeral range. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/files.h"
#include "tests/support/fixture.h"
#include "tests/support/ports.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"

static bool after_calls(void *arg)
{
	int *left = arg;

	return --*left <= 0;
}

static bool never(void *arg)
{
	(*(int *)arg)++;
	return false;
}

Test(support, wait_until_returns_when_the_condition_holds, .timeout = 20)
{
	int left = 5;
	int64_t t0 = support_now_ms();

	cr_assert(support_wait_until(after_calls, &left, 10000));
	cr_assert_eq(left, 0, "called %d more times than needed", -left);
	/* 1+2+4+8 ms of pauses; far below the 10 s deadline even on a loaded machine */
	cr_assert_lt(support_now_ms() - t0, 5000);
}

Test(support, wait_until_gives_up_at_the_deadline, .timeout = 20)
{
	int calls = 0;
	int64_t t0 = support_now_ms(), took;

	cr_assert_not(support_wait_until(never, &calls, 300));
	took = support_now_ms() - t0;
	cr_assert_geq(took, 300, "gave up after %lld ms", (long long)took);
	cr_assert_lt(took, 5000, "overran the deadline: %lld ms", (long long)took);
	/* polled more than once, but with growing pauses, not in a busy loop */
	cr_assert_geq(calls, 3);
	cr_assert_lt(calls, 300, "%d calls in 300 ms", calls);
	calls = 0;
	cr_assert_not(support_wait_until(never, &calls, 0));
	cr_assert_eq(calls, 1, "a zero timeout still looks once");
}

Test(support, wait_file_sees_a_file_appear, .timeout = 20)
{
	char dir[64], path[128];
	pid_t pid;
	int st;

	support_tmpdir(dir, sizeof dir, "tsup");
	snprintf(path, sizeof path, "%s/ready", dir);
	cr_assert_not(support_wait_file(path, 50));
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		FILE *f = fopen(path, "we");

		_exit(f && fclose(f) == 0 ? 0 : 1);
	}
	cr_assert(support_wait_file(path, 10000));
	cr_assert_eq(support_wait_pid(pid, &st, 10000), 0);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cr_assert_eq(support_rm_rf(dir), 0);
}

Test(support, port_bound_tracks_a_socket, .timeout = 20)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof a;
	int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int uport, tport;

	cr_assert_geq(u, 0);
	cr_assert_geq(t, 0);
	cr_assert_eq(bind(u, (struct sockaddr *)&a, sizeof a), 0);
	cr_assert_eq(getsockname(u, (struct sockaddr *)&a, &alen), 0);
	uport = ntohs(a.sin_port);
	cr_assert(support_port_bound(SOCK_DGRAM, uport));
	a.sin_port = 0;
	cr_assert_eq(bind(t, (struct sockaddr *)&a, sizeof a), 0);
	alen = sizeof a;
	cr_assert_eq(getsockname(t, (struct sockaddr *)&a, &alen), 0);
	tport = ntohs(a.sin_port);
	cr_assert_not(support_port_bound(SOCK_STREAM, tport), "bound but not listening");
	cr_assert_eq(listen(t, 1), 0);
	cr_assert(support_wait_port(SOCK_STREAM, tport, 5000));
	close(u);
	close(t);
	cr_assert_not(support_port_bound(SOCK_DGRAM, uport));
	cr_assert_not(support_port_bound(SOCK_STREAM, tport));
}

/* A listener on 127.0.0.1 (the engines' address) at the start of the run found first: the next
 * search, from the same start, must step over it; every port found binds; all stay below the
 * kernel's ephemeral range, where outgoing connections cannot take them. */
Test(support, free_ports_skip_a_port_in_use, .timeout = 20)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int lo = 32768, hi, t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int first = support_free_ports(8), again;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	if (f) {
		cr_assert_eq(fscanf(f, "%d %d", &lo, &hi), 2);
		fclose(f);
	}
	cr_assert_geq(t, 0);
	cr_assert_geq(first, 10000);
	cr_assert_lt(first + 8, lo + 1);
	a.sin_port = htons((uint16_t)(first + 3));
	cr_assert_eq(bind(t, (struct sockaddr *)&a, sizeof a), 0, "port %d: %s", first + 3, strerror(errno));
	cr_assert_eq(listen(t, 1), 0);
	again = support_free_ports(8);
	cr_assert_geq(again, 10000);
	cr_assert(again + 8 <= first + 3 || again > first + 3, "run %d..%d holds the bound port %d",
		  again, again + 7, first + 3);
	for (int p = again; p < again + 8; p++) {
		int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		a.sin_port = htons((uint16_t)p);
		cr_assert_eq(bind(u, (struct sockaddr *)&a, sizeof a), 0, "port %d", p);
		close(u);
	}
	close(t);
	cr_assert_eq(support_free_ports(0), -1);
	cr_assert_eq(support_free_ports(100000), -1);
}

Test(support, children_past_the_deadline_are_killed, .timeout = 30)
{
	pid_t pids[3];
	int st[3];
	int64_t t0;

	for (int i = 0; i < 3; i++) {
		pids[i] = fork();
		cr_assert_geq(pids[i], 0);
		if (pids[i] == 0) {
			if (i == 1)
				for (;;)
					pause();
			_exit(i == 0 ? 0 : 3);
		}
	}
	t0 = support_now_ms();
	cr_assert_eq(support_wait_children(pids, 3, st, 300), 1);
	cr_assert_lt(support_now_ms() - t0, 10000);
	cr_assert(WIFEXITED(st[0]) && WEXITSTATUS(st[0]) == 0);
	cr_assert_eq(st[1], -1, "the hanging child counts as killed");
	cr_assert(WIFEXITED(st[2]) && WEXITSTATUS(st[2]) == 3);
	cr_assert_eq(kill(pids[1], 0), -1, "the hanging child was reaped");
	cr_assert_eq(errno, ESRCH);
	cr_assert_eq(support_wait_pid(pids[0], NULL, 100), -ECHILD);
}

Test(support, sh_reports_the_exit_status)
{
	int rc = support_sh("exit %d", 7);

	cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 7);
	cr_assert_eq(support_sh("true"), 0);
}

Test(support, rm_rf_removes_a_tree_and_read_file_round_trips)
{
	char dir[64], path[256], big[20000];
	struct stat st;
	size_t len = 0;
	char *s;

	support_tmpdir(dir, sizeof dir, "tsup");
	cr_assert_eq(strncmp(dir, "/tmp/stalenet-tsup-", 19), 0, "%s", dir);
	snprintf(path, sizeof path, "%s/a/b/c", dir);
	cr_assert_eq(support_sh("mkdir -p '%s' && ln -s / '%s/a/root'", path, dir), 0);
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	snprintf(path, sizeof path, "%s/a/b/c/file", dir);
	support_write_file(path, big);
	s = support_slurp(path, &len);
	cr_assert_eq(len, sizeof big - 1, "read %zu bytes", len);
	cr_assert_str_eq(s, big);
	free(s);
	snprintf(path, sizeof path, "%s/missing", dir);
	cr_assert_null(support_read_file(path, NULL));
	cr_assert_eq(errno, ENOENT);
	cr_assert_eq(support_rm_rf(dir), 0);
	cr_assert_eq(lstat(dir, &st), -1, "%s still there", dir);
	cr_assert_eq(stat("/", &st), 0, "the link was not followed");
	cr_assert_eq(support_rm_rf(dir), 0, "removing what is gone is not an error");
}

Test(support, must_run_reads_the_environment)
{
	const char *was = getenv("STALENET_TESTS_MUST_RUN");
	char *saved = was ? strdup(was) : NULL;

	setenv("STALENET_TESTS_MUST_RUN", "1", 1);
	cr_assert(support_must_run());
	setenv("STALENET_TESTS_MUST_RUN", "0", 1);
	cr_assert_not(support_must_run());
	unsetenv("STALENET_TESTS_MUST_RUN");
	cr_assert_not(support_must_run());
	if (saved)
		setenv("STALENET_TESTS_MUST_RUN", saved, 1);
	free(saved);
}

Test(support, start_time_of_a_child, .timeout = 20)
{
	pid_t pid = fork();
	int st;

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		pause();
		_exit(0);
	}
	cr_assert_gt(support_wait_start_time(pid, 5000), 0);
	cr_assert_eq(support_wait_pid(pid, &st, 0), -ETIMEDOUT, "a paused child is killed at once");
	cr_assert_eq(support_wait_start_time(pid, 50), 0, "a reaped child has no start time");
}

/* The temporary files of a test are gone after it, also when an assertion failed in it. The
 * test below runs this binary again on one test made to fail (support_tmp/failing_test, which
 * does nothing unless STALENET_TMP_RECORD names where to write the paths it made) and checks
 * that the directory and the file it made are gone; a child the test forked exited first
 * without taking them. */
Test(support_tmp, failing_test, .timeout = 20)
{
	const char *record = getenv("STALENET_TMP_RECORD");
	char dir[64], file[] = "/tmp/stalenet-tsupf-XXXXXX", text[256];
	int fd;
	pid_t pid;

	if (!record)
		return; /* only when run by the test below */
	support_tmpdir(dir, sizeof dir, "tsupd");
	fd = support_mkstemp(file);
	cr_assert_geq(fd, 0);
	close(fd);
	snprintf(text, sizeof text, "%s\n%s\n", dir, file);
	support_write_file(record, text);
	/* a forked child that exits (running the exit handlers) leaves its parent's files */
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		exit(0);
	cr_assert_eq(support_wait_pid(pid, NULL, 10000), 0);
	cr_assert_eq(access(dir, F_OK), 0, "a child's exit removed its parent's %s", dir);
	cr_assert_eq(access(file, F_OK), 0);
	cr_assert_fail("fails on purpose: its files must go all the same");
}

Test(support_tmp, files_of_a_failed_test_are_removed, .timeout = 30)
{
	char exe[4096], record_dir[64], record[128], line_dir[256], line_file[256];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	int status = 0;
	pid_t pid;
	FILE *f;

	cr_assert_gt(n, 0);
	exe[n] = '\0';
	support_tmpdir(record_dir, sizeof record_dir, "tsupr");
	snprintf(record, sizeof record, "%s/paths", record_dir);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

		/* BXFI_MAP marks Criterion's own test processes: without it this is a new runner */
		if (null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 || setenv("STALENET_TMP_RECORD", record, 1) ||
		    unsetenv("BXFI_MAP"))
			_exit(120);
		execl(exe, exe, "--filter", "support_tmp/failing_test", (char *)NULL);
		_exit(121);
	}
	cr_assert_eq(support_wait_pid(pid, &status, 20000), 0);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) < 120,
		  "the test made to fail did not fail (status %#x)", status);
	f = fopen(record, "re");
	cr_assert_not_null(f, "%s: the test made to fail wrote no paths", record);
	cr_assert(fgets(line_dir, sizeof line_dir, f) && fgets(line_file, sizeof line_file, f));
	fclose(f);
	line_dir[strcspn(line_dir, "\n")] = '\0';
	line_file[strcspn(line_file, "\n")] = '\0';
	cr_assert_eq(strncmp(line_dir, "/tmp/stalenet-tsupd-", 20), 0, "%s", line_dir);
	cr_expect_eq(access(line_dir, F_OK), -1, "%s left behind", line_dir);
	cr_expect_eq(access(line_file, F_OK), -1, "%s left behind", line_file);
}
