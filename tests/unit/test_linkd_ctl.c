/* Unit tests for netem/linkd_ctl (the control protocol, pure) and for the control socket of
 * netem/linkd: born 0600, a connection from another uid is closed unanswered, and a client
 * refuses a listener of another uid. The uid parts fork a child that becomes 65534: they need
 * root, skip without it and fail instead under STALENET_TESTS_MUST_RUN=1. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "netem/linkd.h"
#include "netem/linkd_ctl.h"
#include "tests/support/fixture.h"
#include "tests/support/proc.h"

static int parse(const char *line, struct linkd_ctl_req *r, char *reply, size_t len)
{
	reply[0] = '\0';
	return linkd_ctl_parse(line, r, reply, len);
}

Test(linkd_ctl, ping_and_bad_requests)
{
	struct linkd_ctl_req r;
	char reply[128];

	cr_assert_eq(parse("ping", &r, reply, sizeof reply), 0);
	cr_assert_eq(r.op, LINKD_CTL_PING);
	cr_assert_eq(parse("ping\n", &r, reply, sizeof reply), 0);
	cr_assert_eq(parse("ping extra", &r, reply, sizeof reply), -EINVAL);
	cr_assert(!strncmp(reply, "err ", 4), "%s", reply);
	cr_assert_eq(parse("", &r, reply, sizeof reply), -EINVAL);
	cr_assert_eq(parse("  \n", &r, reply, sizeof reply), -EINVAL);
	cr_assert_eq(parse("reboot now", &r, reply, sizeof reply), -EINVAL);
	cr_assert_str_eq(reply, "err unknown request reboot");
}

Test(linkd_ctl, set_parses_and_round_trips)
{
	struct linkd_ctl_req r, r2;
	char reply[128], line[512], line2[512];

	cr_assert_eq(parse("set name=n0>sw netns=snt-sw ifname=veth0 queue=7 delay_us=20000 "
			   "jitter_us=1000 loss_ppm=10000\n", &r, reply, sizeof reply), 0, "%s", reply);
	cr_assert_eq(r.op, LINKD_CTL_SET);
	cr_assert_str_eq(r.name, "n0>sw");
	cr_assert_str_eq(r.netns, "snt-sw");
	cr_assert_str_eq(r.ifname, "veth0");
	cr_assert_eq(r.queue, 7);
	cr_assert_eq(r.params.delay_us, 20000);
	cr_assert_eq(r.params.jitter_us, 1000);
	cr_assert_eq(r.params.loss_ppm, 10000);
	cr_assert_gt(linkd_ctl_format(&r, line, sizeof line), 0);
	cr_assert_eq(parse(line, &r2, reply, sizeof reply), 0, "%s: %s", line, reply);
	cr_assert_gt(linkd_ctl_format(&r2, line2, sizeof line2), 0);
	cr_assert_str_eq(line, line2);
	cr_assert_str_eq(r2.name, r.name);
	cr_assert_eq(r2.queue, r.queue);
	cr_assert_eq(r2.params.delay_us, r.params.delay_us);
	/* Empty netns (the emulator's own) survives the round trip. */
	cr_assert_eq(parse("set name=a queue=0", &r, reply, sizeof reply), 0, "%s", reply);
	cr_assert_eq(linkd_ctl_format(&r, line, sizeof line), (int)strlen("set name=a netns= ifname= queue=0"));
	cr_assert_str_eq(line, "set name=a netns= ifname= queue=0");
}

Test(linkd_ctl, set_is_strict)
{
	struct linkd_ctl_req r;
	char reply[128], longname[200], line[300];
	const char *bad[] = {
		"set name=a",                       /* no queue */
		"set queue=1",                      /* no name */
		"set name= queue=1",                /* empty name */
		"set name=a queue=65536",
		"set name=a queue=-1",
		"set name=a queue=12abc",
		"set name=a queue=",
		"set name=a queue=1 colour=blue",
		"set name=a queue=1 delay_us=abc",
		"set name=a queue=1 loss_ppm=2000000", /* over 100% */
		"set name=a queue=1 reorder_ppm=1000", /* reorder needs delay */
	};

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(parse(bad[i], &r, reply, sizeof reply), -EINVAL, "accepted: %s", bad[i]);
		cr_assert(!strncmp(reply, "err ", 4), "%s -> %s", bad[i], reply);
	}
	/* Too long for its field: an error, not a silently truncated (other) link name. */
	memset(longname, 'x', LINKD_CTL_NAME_MAX);
	longname[LINKD_CTL_NAME_MAX] = '\0';
	snprintf(line, sizeof line, "set name=%s queue=1", longname);
	cr_assert_eq(parse(line, &r, reply, sizeof reply), -EINVAL);
	longname[LINKD_CTL_NAME_MAX - 1] = '\0';
	snprintf(line, sizeof line, "set name=%s queue=1", longname);
	cr_assert_eq(parse(line, &r, reply, sizeof reply), 0, "%s", reply);
	cr_assert_eq(strlen(r.name), LINKD_CTL_NAME_MAX - 1);
	snprintf(line, sizeof line, "set name=a queue=1 ifname=%.40s", longname);
	cr_assert_eq(parse(line, &r, reply, sizeof reply), -EINVAL);
	/* A tiny reply buffer is never overrun. */
	{
		char tiny[6] = "zzzzz";

		cr_assert_eq(linkd_ctl_parse("nope", &r, tiny, 5), -EINVAL);
		cr_assert_eq(tiny[4], '\0');
		cr_assert_eq(tiny[5], '\0');
	}
}

Test(linkd_ctl, del_and_stats)
{
	struct linkd_ctl_req r;
	char reply[128];

	cr_assert_eq(parse("del name=x", &r, reply, sizeof reply), 0);
	cr_assert_eq(r.op, LINKD_CTL_DEL);
	cr_assert_str_eq(r.name, "x");
	cr_assert_eq(parse("del", &r, reply, sizeof reply), -EINVAL);
	cr_assert_eq(parse("del name=x queue=1", &r, reply, sizeof reply), -EINVAL);
	cr_assert_eq(parse("stats", &r, reply, sizeof reply), 0);
	cr_assert_eq(r.op, LINKD_CTL_STATS);
	cr_assert_str_eq(r.name, "");
	cr_assert_eq(parse("stats name=n1>sw", &r, reply, sizeof reply), 0);
	cr_assert_str_eq(r.name, "n1>sw");
}

Test(linkd_ctl, stats_line_round_trip)
{
	struct linkd_counters c = { 1, 2, 3, 4, 5, 6, UINT64_MAX }, back;
	char line[256], name[32];

	cr_assert_eq(linkd_ctl_stats_line("a>b", &c, line, sizeof line), (int)strlen(line));
	cr_assert_str_eq(line, "a>b 1 2 3 4 5 6 18446744073709551615\n");
	cr_assert_eq(linkd_ctl_parse_stats_line(line, name, sizeof name, &back), 0);
	cr_assert_str_eq(name, "a>b");
	cr_assert_eq(memcmp(&c, &back, sizeof c), 0);
	cr_assert_eq(linkd_ctl_parse_stats_line("a 1 2 3 4 5 6", name, sizeof name, &back), -EINVAL);
	cr_assert_eq(linkd_ctl_parse_stats_line("a 1 2 3 4 5 6 7 8", name, sizeof name, &back), -EINVAL);
	cr_assert_eq(linkd_ctl_parse_stats_line("a 1 2 3 4 5 6 -7", name, sizeof name, &back), -EINVAL);
	cr_assert_eq(linkd_ctl_parse_stats_line("a 1 2 3 4 5 6 99999999999999999999", name, sizeof name,
						&back), -EINVAL);
}

/* --- the control socket of a running emulator ------------------------------------------- */

static void *serve(void *arg)
{
	return (void *)(intptr_t)linkd_run(arg);
}

static int connect_seqpacket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

Test(linkd_ctl, socket_0600_and_foreign_uid_refused, .timeout = 30)
{
	char dir[] = "/tmp/snt-linkdctl-XXXXXX";
	char path[96], reply[256];
	struct linkd *d;
	struct stat st;
	pthread_t th;
	mode_t old;
	pid_t pid;
	int stt;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/linkd.sock", dir);
	old = umask(0);
	d = linkd_new(path);
	cr_assert_eq(umask(old), 0, "the umask was restored");
	cr_assert_not_null(d);
	cr_assert_eq(lstat(path, &st), 0);
	cr_assert(S_ISSOCK(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0600, "mode %o", st.st_mode & 07777);
	linkd_set_rt_priority(d, 0);
	cr_assert_eq(pthread_create(&th, NULL, serve, d), 0);
	cr_assert_eq(linkd_request(path, "ping", reply, sizeof reply, 5000), 0, "%s", reply);
	cr_assert_eq(linkd_request(path, "stats", reply, sizeof reply, 5000), 0);
	cr_assert_str_eq(reply, "ok\n");
	cr_assert_eq(linkd_request(path, "set name=a", reply, sizeof reply, 5000), -EIO);
	cr_assert_str_eq(reply, "err set needs name= and queue=");

	if (geteuid() == 0) {
		/* A mistake makes the socket reachable: uid 65534 still gets no answer. */
		cr_assert_eq(chmod(dir, 0711), 0);
		cr_assert_eq(chmod(path, 0666), 0);
		pid = support_fork_as(65534);
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			struct pollfd pfd;
			char buf[64];
			ssize_t n;
			int fd, pr;

			fd = connect_seqpacket(path);
			if (fd < 0)
				_exit(21);
			if (send(fd, "ping", 4, MSG_NOSIGNAL) < 0 && errno != EPIPE && errno != ECONNRESET)
				_exit(22);
			pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
			pr = poll(&pfd, 1, 10000);
			if (pr <= 0)
				_exit(23); /* neither closed nor answered */
			n = recv(fd, buf, sizeof buf, 0);
			_exit(n <= 0 ? 0 : 24); /* closed: fine; an answer: refused access failed */
		}
		cr_assert_eq(waitpid(pid, &stt, 0), pid);
		cr_assert(WIFEXITED(stt) && WEXITSTATUS(stt) == 0, "foreign client status %d", stt);
		cr_assert_eq(linkd_ctl_rejected(d), 1);
		cr_assert_eq(linkd_request(path, "ping", reply, sizeof reply, 5000), 0);
		cr_assert_eq(linkd_ctl_rejected(d), 1);
	}
	linkd_stop(d);
	cr_assert_eq(pthread_join(th, NULL), 0);
	linkd_destroy(&d);
	cr_assert_neq(access(path, F_OK), 0);
	rmdir(dir);
	support_require_root();
}

/* A listener of another uid put where the emulator's socket should be gets no request. */
Test(linkd_ctl, client_refuses_foreign_listener, .timeout = 30)
{
	char dir[] = "/tmp/snt-linkdsrv-XXXXXX";
	char path[96], reply[64] = "";
	int ready[2], done[2], st;
	pid_t pid;
	char b;

	support_require_root();
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(chmod(dir, 0777), 0);
	snprintf(path, sizeof path, "%s/linkd.sock", dir);
	cr_assert_eq(pipe(ready), 0);
	cr_assert_eq(pipe(done), 0);
	pid = support_fork_as(65534);
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		struct pollfd pfd = { .fd = -1, .events = POLLIN };
		char buf[64];
		int l, c;

		close(ready[0]);
		close(done[1]);
		umask(0);
		snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
		l = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(l, 4) < 0)
			_exit(30);
		if (write(ready[1], "r", 1) != 1)
			_exit(31);
		c = accept(l, NULL, NULL);
		if (c < 0)
			_exit(32);
		/* The client must hang up without sending: EOF, not a request. */
		pfd.fd = c;
		if (poll(&pfd, 1, 10000) <= 0)
			_exit(33);
		_exit(recv(c, buf, sizeof buf, 0) == 0 ? 0 : 34);
	}
	close(ready[1]);
	close(done[0]);
	cr_assert_eq(read(ready[0], &b, 1), 1);
	cr_assert_eq(linkd_request(path, "del name=victim", reply, sizeof reply, 2000), -EPERM);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "listener status %d", st);
	close(done[1]);
	close(ready[0]);
	unlink(path);
	rmdir(dir);
}
