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

Test(ctl, handshake_status_stop)
{
	char dir[] = "/tmp/stalenet-ctl-XXXXXX";
	char ep[256], node[64], msg[128];
	struct ctl_server *srv;
	pid_t pid;
	int st, got_status = 0, got_done = 0;

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(ctl_endpoint_for(dir, "t", ep, sizeof ep), 0);
	srv = ctl_server_open(ep);
	cr_assert_not_null(srv);
	pid = fork();
	if (pid == 0) {
		struct ctl_client *c = ctl_client_open(ep, "worker7");
		int rc = ctl_client_ready_wait(c, 5000);
		if (rc != 0)
			_exit(10);
		for (int i = 0; i < 200 && !ctl_client_should_stop(c); i++) {
			ctl_client_status(c, i, CTL_RUN, false);
			usleep(10000);
		}
		if (!ctl_client_should_stop(c))
			_exit(11);
		ctl_client_done(c);
		ctl_client_close(&c);
		_exit(0);
	}
	cr_assert_eq(ctl_server_recv(srv, node, sizeof node, msg, sizeof msg, 5000), 1);
	cr_assert_str_eq(node, "worker7");
	cr_assert_str_eq(msg, "ready");
	cr_assert_eq(ctl_server_send(srv, "worker7", "start"), 0);
	while (!got_status)
		if (ctl_server_recv(srv, node, sizeof node, msg, sizeof msg, 5000) == 1 &&
		    !strncmp(msg, "status ", 7))
			got_status = 1;
	cr_assert(strstr(msg, " run 0") != NULL, "%s", msg);
	cr_assert_eq(ctl_server_send(srv, "worker7", "stop"), 0);
	for (int i = 0; i < 100 && !got_done; i++)
		if (ctl_server_recv(srv, node, sizeof node, msg, sizeof msg, 100) == 1 && !strcmp(msg, "done"))
			got_done = 1;
	cr_assert(got_done);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
	ctl_server_close(&srv);
	rmdir(dir);
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
