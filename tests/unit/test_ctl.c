/* Unit tests for lib/ctl: ready/start handshake, status, stop, over a real ipc:// socket; the
 * endpoint lives in the 0700 runtime directory; the socket is born 0600; a peer of another uid
 * is not heard, on either side (root only: forks a child that becomes uid 65534; skips without
 * root, fails instead under STALENET_TESTS_MUST_RUN=1). */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "lib/ctl.h"
#include "lib/rtdir.h"
#include "tests/support/fixture.h"
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

Test(ctl, endpoint_in_runtime_dir)
{
	char ep[256], ep2[256], longdir[200], want[128];
	struct stat st;

	memset(longdir, 'a', sizeof longdir - 1);
	longdir[0] = '/';
	longdir[sizeof longdir - 1] = '\0';
	cr_assert_eq(ctl_endpoint_for(longdir, "abcd", ep, sizeof ep), 0);
	snprintf(want, sizeof want, "ipc://%s/ctl-abcd-", rtdir_path());
	cr_assert(!strncmp(ep, want, strlen(want)), "%s", ep);
	cr_assert_lt(strlen(ep) - 6, 108);
	/* The run directory picks the name: two runs with one tag do not share a socket. */
	cr_assert_eq(ctl_endpoint_for("/tmp/run-a", "abcd", ep2, sizeof ep2), 0);
	cr_assert_str_neq(ep, ep2);
	cr_assert_eq(ctl_endpoint_for(longdir, "abcd", ep2, sizeof ep2), 0);
	cr_assert_str_eq(ep, ep2);
	cr_assert_eq(lstat(rtdir_path(), &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0700, "mode %o", st.st_mode & 07777);
	cr_assert_eq(st.st_uid, geteuid());
}

/* The socket file is 0600 from the moment it exists, whatever the process umask, and the
 * umask is given back. */
Test(ctl, socket_born_0600)
{
	char dir[] = "/tmp/snt-ctlmode-XXXXXX";
	char ep[128], path[96];
	struct ctl_server *srv;
	struct stat st;
	mode_t old;

	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(path, sizeof path, "%s/s.sock", dir);
	snprintf(ep, sizeof ep, "ipc://%s", path);
	old = umask(0);
	srv = ctl_server_open(ep);
	cr_assert_eq(umask(old), 0, "the umask was restored");
	cr_assert_not_null(srv);
	cr_assert_eq(lstat(path, &st), 0);
	cr_assert(S_ISSOCK(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0600, "mode %o", st.st_mode & 07777);
	ctl_server_close(&srv);
	cr_assert_neq(access(path, F_OK), 0);
	rmdir(dir);
}

/* Even when the socket is reachable (a mistake: 0666 in a 0711 directory), a process of
 * another uid is not heard; a root peer is. */
Test(ctl, foreign_uid_peer_refused, .timeout = 30)
{
	char dir[] = "/tmp/snt-ctlcred-XXXXXX";
	char ep[128], path[96], node[64], msg[64];
	struct ctl_server *srv;
	pid_t pid;
	int st, rc;

	support_require_root();
	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(path, sizeof path, "%s/s.sock", dir);
	snprintf(ep, sizeof ep, "ipc://%s", path);
	srv = ctl_server_open(ep);
	cr_assert_not_null(srv);
	cr_assert_eq(chmod(dir, 0711), 0);
	cr_assert_eq(chmod(path, 0666), 0);
	pid = support_fork_as(65534);
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct ctl_client *c;

		c = ctl_client_open(ep, "intruder");
		if (!c)
			_exit(21);
		/* Nobody answers it: it must time out. */
		rc = ctl_client_ready_wait(c, 3000);
		ctl_client_close(&c);
		_exit(rc == -ETIMEDOUT ? 0 : 22);
	}
	for (int i = 0; i < 100 && ctl_server_rejected(srv) == 0; i++) {
		rc = ctl_server_recv(srv, node, sizeof node, msg, sizeof msg, 100);
		cr_assert_neq(rc, 1, "a message from uid 65534 got through: %s %s", node, msg);
	}
	cr_assert_geq(ctl_server_rejected(srv), 1);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "intruder status %d", st);

	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct ctl_client *c = ctl_client_open(ep, "worker1");

		rc = c ? ctl_client_ready_wait(c, 5000) : -1;
		ctl_client_close(&c);
		_exit(rc == -ECANCELED ? 0 : 23);
	}
	cr_assert_eq(ctl_server_recv(srv, node, sizeof node, msg, sizeof msg, 5000), 1);
	cr_assert_str_eq(node, "worker1");
	cr_assert_str_eq(msg, "ready");
	cr_assert_eq(ctl_server_send(srv, "worker1", "stop"), 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker status %d", st);
	cr_assert_eq(ctl_server_rejected(srv), 1);
	ctl_server_close(&srv);
	rmdir(dir);
}

/* A node ignores commands from a server of another uid (a socket swapped in by a user). */
Test(ctl, client_ignores_foreign_server, .timeout = 30)
{
	char dir[] = "/tmp/snt-ctlsrv-XXXXXX";
	char ep[128];
	struct ctl_client *c;
	int go[2], st, rc;
	pid_t pid;

	support_require_root();
	cr_assert_not_null(support_mkdtemp(dir));
	cr_assert_eq(chmod(dir, 0777), 0);
	snprintf(ep, sizeof ep, "ipc://%s/s.sock", dir);
	cr_assert_eq(pipe(go), 0);
	pid = support_fork_as(65534);
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		void *ctx, *r;
		char id[64], m[64];
		int n, mode = 0666;
		struct pollfd pfd = { .fd = go[0], .events = POLLIN };

		close(go[1]);
		ctx = zmq_ctx_new();
		r = zmq_socket(ctx, ZMQ_ROUTER);
		(void)mode;
		umask(0);
		if (zmq_bind(r, ep) < 0)
			_exit(30);
		n = zmq_recv(r, id, sizeof id, 0);
		if (n <= 0 || zmq_recv(r, m, sizeof m, 0) < 0)
			_exit(31);
		zmq_send(r, id, (size_t)n, ZMQ_SNDMORE);
		zmq_send(r, "stop", 4, 0);
		poll(&pfd, 1, 20000); /* stay until the client is done */
		zmq_close(r);
		zmq_ctx_term(ctx);
		_exit(0);
	}
	close(go[0]);
	c = ctl_client_open(ep, "worker2");
	cr_assert_not_null(c);
	rc = ctl_client_ready_wait(c, 2000);
	cr_assert_eq(rc, -ETIMEDOUT, "the stop of a foreign server was obeyed (%d)", rc);
	cr_assert_not(ctl_client_should_stop(c));
	ctl_client_close(&c);
	close(go[1]);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server status %d", st);
	unlink(ep + 6);
	rmdir(dir);
}

Test(ctl_status, only_the_form_the_node_writes)
{
	struct ctl_status st = { .step = 77 };

	cr_assert_eq(ctl_parse_status("status 0 init 0", &st), 0);
	cr_expect_eq(st.step, 0);
	cr_expect_eq(st.state, CTL_INIT);
	cr_expect_eq(st.waiting, false);
	cr_assert_eq(ctl_parse_status("status 9223372036854775807 done 1", &st), 0);
	cr_expect_eq(st.step, INT64_MAX);
	cr_expect_eq(st.state, CTL_DONE);
	cr_expect_eq(st.waiting, true);
	cr_assert_eq(ctl_parse_status("status 12 wait 1", &st), 0);
	cr_expect_eq(st.state, CTL_WAIT);
	cr_expect_eq(st.step, 12);
	static const char *const bad[] = {
		"", "status", "status ", "status 1", "status 1 run", "status 1 run ",            /* missing fields */
		"status -1 run 0", "status +1 run 0", "status  1 run 0", "status 1  run 0",     /* sign, blanks */
		"status 9223372036854775808 run 0", "status 99999999999999999999999 run 0",      /* overflow */
		"status 1 running 0", "status 1 runn 0", "status 1 RUN 0", "status 1 aaaaaaaaaaaaaaaaaaaaaaaa 0",
		"status 1 run 2", "status 1 run -1", "status 1 run 01", "status 1 run 0 ", "status 1 run 0 junk",
		"status 1 run 0\n", "status 0x10 run 0", "status 1.5 run 0", "Status 1 run 0", "ready",
		"status 060 wait 1", "status 00 run 0",                                          /* leading zeros */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		st = (struct ctl_status){ .step = 77 };
		cr_expect_eq(ctl_parse_status(bad[i], &st), -EINVAL, "'%s' taken", bad[i]);
		cr_expect_eq(st.step, 77, "'%s' touched the result", bad[i]);
	}
	/* what ctl_client_status writes parses back, for every state */
	for (int s = CTL_INIT; s <= CTL_DONE; s++) {
		char msg[96];
		snprintf(msg, sizeof msg, "status %d %s %d", 1000 + s, ctl_state_name((enum ctl_state)s), s & 1);
		cr_assert_eq(ctl_parse_status(msg, &st), 0, "%s", msg);
		cr_expect_eq(st.step, 1000 + s);
		cr_expect_eq((int)st.state, s);
		cr_expect_eq(st.waiting, (s & 1) != 0);
	}
	cr_expect_str_eq(ctl_state_name((enum ctl_state)9), "?");
}
