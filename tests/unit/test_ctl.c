/* Unit tests for lib/ctl: ready/start handshake, status, stop, over a real ipc:// socket. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/ctl.h"
#include "tests/support/files.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"

Test(ctl, handshake_status_stop, .timeout = 60)
{
	char dir[64];
	char ep[256], node[64], msg[128];
	struct ctl_server *srv;
	pid_t pid;
	int st, got_status = 0, got_done = 0;
	int64_t until;

	support_tmpdir(dir, sizeof dir, "ctl");
	cr_assert_eq(ctl_endpoint_for(dir, "t", ep, sizeof ep), 0);
	srv = ctl_server_open(ep);
	cr_assert_not_null(srv);
	pid = fork();
	if (pid == 0) {
		struct ctl_client *c = ctl_client_open(ep, "worker7");
		int rc = ctl_client_ready_wait(c, 20000);
		if (rc != 0)
			_exit(10);
		/* A status every 10 ms (the pacing of a node's heartbeat, not a wait) until told to
		 * stop, for 30 s at most: a count of rounds would run out sooner on a busy machine. */
		until = support_now_ms() + 30000;
		for (int i = 0; support_now_ms() < until && !ctl_client_should_stop(c); i++) {
			ctl_client_status(c, i, CTL_RUN, false);
			usleep(10000);
		}
		if (!ctl_client_should_stop(c))
			_exit(11);
		ctl_client_done(c);
		ctl_client_close(&c);
		_exit(0);
	}
	cr_assert_eq(ctl_server_recv(srv, node, sizeof node, msg, sizeof msg, 20000), 1);
	cr_assert_str_eq(node, "worker7");
	cr_assert_str_eq(msg, "ready");
	cr_assert_eq(ctl_server_send(srv, "worker7", "start"), 0);
	until = support_now_ms() + 20000;
	while (!got_status && support_now_ms() < until)
		if (ctl_server_recv(srv, node, sizeof node, msg, sizeof msg, 1000) == 1 &&
		    !strncmp(msg, "status ", 7))
			got_status = 1;
	cr_assert(got_status, "no status in 20 s");
	cr_assert(strstr(msg, " run 0") != NULL, "%s", msg);
	cr_assert_eq(ctl_server_send(srv, "worker7", "stop"), 0);
	until = support_now_ms() + 20000;
	while (!got_done && support_now_ms() < until)
		if (ctl_server_recv(srv, node, sizeof node, msg, sizeof msg, 1000) == 1 && !strcmp(msg, "done"))
			got_done = 1;
	cr_assert(got_done, "no done in 20 s");
	cr_assert_eq(support_wait_pid(pid, &st, 20000), 0, "the client did not exit");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
	ctl_server_close(&srv);
	cr_assert_eq(support_rm_rf(dir), 0);
}

Test(ctl, long_run_dir_falls_back)
{
	char ep[256], longdir[200];

	memset(longdir, 'a', sizeof longdir - 1);
	longdir[0] = '/';
	longdir[sizeof longdir - 1] = '\0';
	cr_assert_eq(ctl_endpoint_for(longdir, "abcd", ep, sizeof ep), 0);
	cr_assert_str_eq(ep, "ipc:///run/stalenet/ctl-abcd.sock");
}
