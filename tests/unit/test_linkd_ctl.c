/* Unit tests for netem/linkd_ctl (the control protocol, pure) and for the control socket of
 * netem/linkd: born 0600, a connection from another uid is closed unanswered, and a client
 * refuses a listener of another uid. The uid parts fork a child that becomes 65534: they need
 * root, skip without it and fail instead under STALENET_TESTS_MUST_RUN=1. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/link_params.h"
#include "lib/log.h"
#include "netem/linkd.h"
#include "netem/linkd_ctl.h"
#include "tests/support/files.h"
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
		/* Link parameters only as link_params_format writes them, each key once. */
		"set name=a queue=1 delay_us=+5",
		"set name=a queue=1 delay_us=05",
		"set name=a queue=1 delay_us=-0",
		"set name=a queue=1 delay_us=5 delay_us=6",
		"set name=a queue=1 delay_us=5 jitter_us=1 delay_us=5",
		"set name=a queue=1 dist=9 jitter_us=5",
		"set name=a queue=1 rate_bps=17179869177",
		/* The request's own keys once too, the queue without a leading zero. */
		"set name=a name=b queue=1",
		"set name=a queue=1 queue=2",
		"set name=a netns=x netns=y queue=1",
		"set name=a ifname=x ifname=y queue=1",
		"set name=a queue=01",
		"set name=a queue=+1",
		"del name=a name=b",
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
	struct linkd_counters c = { 1, 2, 3, 4, 5, 6, UINT64_MAX, 9, -12, 40, 1500 }, back;
	char line[LINKD_CTL_STATS_LINE_MAX], name[32];

	cr_assert_eq(linkd_ctl_stats_line("a>b", &c, line, sizeof line), (int)strlen(line));
	cr_assert_str_eq(line, "a>b 1 2 3 4 5 6 18446744073709551615 9 -12 40 1500\n");
	cr_assert_eq(linkd_ctl_parse_stats_line(line, name, sizeof name, &back), 0);
	cr_assert_str_eq(name, "a>b");
	cr_assert_eq(memcmp(&c, &back, sizeof c), 0);
	/* the longest line fits LINKD_CTL_STATS_LINE_MAX */
	struct linkd_counters big = { UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX,
				      UINT64_MAX, UINT64_MAX, INT64_MIN, UINT64_MAX, UINT64_MAX };
	char longname[LINKD_CTL_NAME_MAX];
	memset(longname, 'n', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	cr_assert_lt(linkd_ctl_stats_line(longname, &big, line, sizeof line), (int)sizeof line);
	cr_assert_eq(linkd_ctl_parse_stats_line(line, longname, sizeof longname, &back), 0);
	cr_assert_eq(back.late_mean_us, INT64_MIN);
	/* the seven counters alone (an older emulator) are refused, as is anything else malformed */
	cr_assert_eq(linkd_ctl_parse_stats_line("a 1 2 3 4 5 6 7", name, sizeof name, &back), -EINVAL);
	cr_assert_eq(linkd_ctl_parse_stats_line("a 1 2 3 4 5 6 7 8 9 10", name, sizeof name, &back), -EINVAL);
	cr_assert_eq(linkd_ctl_parse_stats_line("a 1 2 3 4 5 6 7 8 9 10 11 12", name, sizeof name, &back), -EINVAL);
	cr_assert_eq(linkd_ctl_parse_stats_line("a 1 2 3 4 5 6 -7 0 0 0 0", name, sizeof name, &back), -EINVAL);
	cr_assert_eq(linkd_ctl_parse_stats_line("a 1 2 3 4 5 6 7 0 0 -1 0", name, sizeof name, &back), -EINVAL);
	cr_assert_eq(linkd_ctl_parse_stats_line("a 1 2 3 4 5 6 7 0 - 0 0", name, sizeof name, &back), -EINVAL);
	cr_assert_eq(linkd_ctl_parse_stats_line("a 1 2 3 4 5 6 7 0 +3 0 0", name, sizeof name, &back), -EINVAL);
	cr_assert_eq(linkd_ctl_parse_stats_line("a 1 2 3 4 5 6 7 0 -99999999999999999999 0 0", name, sizeof name,
						&back), -EINVAL);
	cr_assert_eq(linkd_ctl_parse_stats_line("a 1 2 3 4 5 6 99999999999999999999 0 0 0 0", name, sizeof name,
						&back), -EINVAL);
}

/* --- the control socket of a running emulator ------------------------------------------- */

static void *serve(void *arg)
{
	return (void *)(intptr_t)linkd_run(arg);
}

/* Reference model for the stats reply tests: what the parse callback saw, in order. */
struct seen {
	size_t n, cap;
	char (*names)[LINKD_CTL_NAME_MAX];
	struct linkd_counters *c;
	int stop_at; /* return -ECANCELED at this line (or -1) */
};

static int collect(void *ctx, const char *name, const struct linkd_counters *c)
{
	struct seen *s = ctx;

	if ((int)s->n == s->stop_at)
		return -ECANCELED;
	cr_assert_lt(s->n, s->cap);
	snprintf(s->names[s->n], LINKD_CTL_NAME_MAX, "%s", name);
	s->c[s->n++] = *c;
	return 0;
}

static uint64_t rnd64(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* 4096 links of the longest names and counters: the reply the emulator builds for them is cut
 * into messages of whole lines no longer than LINKD_CTL_MSG_MAX, only the last is "done", and
 * the messages put back together parse to exactly the links and counters written. */
Test(linkd_ctl, stats_reply_of_4096_links_round_trips)
{
	enum { N = 4096 };
	size_t cap = 16 + (size_t)N * LINKD_CTL_STATS_LINE_MAX, off, len, msgs = 0;
	char *text = malloc(cap), *joined = malloc(cap);
	struct seen s = { 0, N, malloc(N * sizeof *s.names), malloc(N * sizeof *s.c), -1 };
	struct linkd_counters *want = malloc(N * sizeof *want);
	char(*names)[LINKD_CTL_NAME_MAX] = malloc(N * sizeof *names);
	uint64_t x = 88172645463325252ull;
	size_t jl = 0;

	cr_assert(text && joined && s.names && s.c && want && names);
	off = (size_t)snprintf(text, cap, "ok\n");
	for (int i = 0; i < N; i++) {
		/* Longest name the protocol takes, unique by its number. */
		memset(names[i], 'a' + i % 26, LINKD_CTL_NAME_MAX - 1);
		names[i][LINKD_CTL_NAME_MAX - 1] = '\0';
		snprintf(names[i], 12, "n%05u/veth", (unsigned)i % 100000u);
		names[i][11] = 'x';
		uint64_t *v[] = { &want[i].packets, &want[i].bytes, &want[i].dropped, &want[i].held,
				  &want[i].dup, &want[i].corrupt, &want[i].reordered, &want[i].late_n,
				  &want[i].late_p99_us, &want[i].late_max_us };
		for (size_t k = 0; k < 10; k++)
			*v[k] = i % 3 == 0 ? UINT64_MAX - (uint64_t)k : rnd64(&x) >> (rnd64(&x) % 64);
		want[i].late_mean_us = i % 3 == 0 ? INT64_MIN : (int64_t)rnd64(&x);
		off += (size_t)linkd_ctl_stats_line(names[i], &want[i], text + off, cap - off);
		cr_assert_lt(off, cap);
	}
	off += (size_t)snprintf(text + off, cap - off, "end\n");
	cr_assert_lt(off, cap);
	len = off;
	cr_assert_gt(len, 16 * (size_t)LINKD_CTL_MSG_MAX, "the reply needs many messages (%zu bytes)", len);
	for (off = 0; off < len;) {
		size_t m = linkd_ctl_msg_cut(text + off, len - off, LINKD_CTL_MSG_MAX);

		cr_assert_gt(m, 0);
		cr_assert_leq(m, LINKD_CTL_MSG_MAX);
		cr_assert_eq(text[off + m - 1], '\n', "message %zu ends with a whole line", msgs);
		cr_assert_eq(linkd_ctl_reply_done(text + off, m, off == 0), off + m == len,
			     "only the last message ends the reply (message %zu)", msgs);
		memcpy(joined + jl, text + off, m);
		jl += m;
		off += m;
		msgs++;
	}
	cr_assert_eq(jl, len);
	cr_assert_eq(linkd_ctl_parse_stats_reply(joined, jl, collect, &s), N);
	cr_assert_eq(s.n, (size_t)N);
	for (int i = 0; i < N; i++) {
		cr_assert_str_eq(s.names[i], names[i]);
		cr_assert_eq(memcmp(&s.c[i], &want[i], sizeof want[i]), 0, "counters of link %d", i);
	}
	/* A callback error stops the parse and is returned. */
	s.n = 0;
	s.stop_at = 7;
	cr_assert_eq(linkd_ctl_parse_stats_reply(joined, jl, collect, &s), -ECANCELED);
	cr_assert_eq(s.n, 7);
	free(text);
	free(joined);
	free(s.names);
	free(s.c);
	free(want);
	free(names);
}

Test(linkd_ctl, stats_reply_is_strict)
{
	static const struct {
		const char *text;
		int rc;
	} cases[] = {
		{ "ok\nend\n", 0 },
		{ "ok\na 1 2 3 4 5 6 7 0 0 0 0\nend\n", 1 },
		{ "err no link x", -EIO },
		{ "", -EINVAL },
		{ "ok", -EINVAL },
		{ "ok\n", -EINVAL },                           /* no end: cut short */
		{ "ok\na 1 2 3 4 5 6 7 0 0 0 0\n", -EINVAL },          /* no end: a message lost */
		{ "ok\na 1 2 3 4 5 6 7 0 0 0 0\nend", -EINVAL },       /* end without its newline */
		{ "ok\nend\nb 1 2 3 4 5 6 7 0 0 0 0\n", -EINVAL },     /* text after the end */
		{ "ok\na 1 2 3 4 5 6 7\nend\n", -EINVAL },     /* the lateness missing */
		{ "ok\na 1 2 3 4 5 6 x 0 0 0 0\nend\n", -EINVAL },
		{ "ok\na 1 2 3 4 5 6 18446744073709551616 0 0 0 0\nend\n", -EINVAL },
		{ "ok\n\nend\n", -EINVAL },
		{ "nope\nend\n", -EINVAL },
	};
	struct seen s = { 0, 4, malloc(4 * sizeof *s.names), malloc(4 * sizeof *s.c), -1 };

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		s.n = 0;
		cr_assert_eq(linkd_ctl_parse_stats_reply(cases[i].text, strlen(cases[i].text), collect, &s),
			     cases[i].rc, "case %zu: %s", i, cases[i].text);
	}
	/* A NUL inside a line is not a shorter line. */
	cr_assert_eq(linkd_ctl_parse_stats_reply("ok\na 1 2 3 4 5 6 7\0 8\nend\n", 25, collect, &s), -EINVAL);
	/* The last message: "ok" replies end with an "end" line, anything else at once. */
	cr_assert(linkd_ctl_reply_done("ok", 2, true));
	cr_assert(linkd_ctl_reply_done("err x", 5, true));
	cr_assert(linkd_ctl_reply_done("ok\nend\n", 7, true));
	cr_assert(!linkd_ctl_reply_done("ok\na 1 2 3 4 5 6 7 0 0 0 0\n", 27, true));
	cr_assert(!linkd_ctl_reply_done("a 1 2 3 4 5 6 7 0 0 0 0\n", 24, false));
	cr_assert(!linkd_ctl_reply_done("xend\n", 5, false));
	cr_assert(linkd_ctl_reply_done("end\n", 4, false));
	cr_assert(linkd_ctl_reply_done("a 1 2 3 4 5 6 7\nend\n", 20, false));
	/* Cutting: whole lines, the rest when it fits, a too long line at the limit. */
	cr_assert_eq(linkd_ctl_msg_cut("ab\ncd\nef\n", 9, 100), 9);
	cr_assert_eq(linkd_ctl_msg_cut("ab\ncd\nef\n", 9, 7), 6);
	cr_assert_eq(linkd_ctl_msg_cut("abcdefgh\n", 9, 4), 4);
	free(s.names);
	free(s.c);
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

	cr_assert_not_null(support_mkdtemp(dir));
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
	cr_assert_str_eq(reply, "ok\nend\n");
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
	cr_assert_not_null(support_mkdtemp(dir));
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

/* Name of link i (< 10000): ~80 bytes, so the reply for 4096 (~400 KB) outgrows the socket's
 * send buffer. */
static void long_name(char *buf, size_t len, unsigned i)
{
	snprintf(buf, len, "stalenet-soak-worker-%04u-of-a-long-scenario/veth-%04u-to-switch", i % 10000u,
		 i % 10000u);
}

/* Child of stats_of_4096_links_from_a_real_emulator, in a network namespace of its own (the
 * queues bound are its own): an emulator with N links, read per link (the old way, 400 of them)
 * and all at once. Exit status 0, or which step failed. */
static int many_links_child(const char *path, int N)
{
	enum { PER_LINK = 400, REPEAT = 5 };
	struct link_params p = { 0 };
	struct seen s = { 0, N, malloc(N * sizeof *s.names), malloc(N * sizeof *s.c), -1 };
	char name[LINKD_CTL_NAME_MAX], req[160], reply[512], *all = NULL;
	size_t len;
	struct linkd *d;
	pthread_t th;
	int64_t t0, t1, t2, one_by_one = INT64_MAX, all_at_once = INT64_MAX;
	int rc = 0;

	if (unshare(CLONE_NEWNET) < 0)
		return 40;
	log_init("test", LOG_WARN);
	d = linkd_new(path);
	if (!d || !s.names || !s.c)
		return 41;
	linkd_set_rt_priority(d, 0);
	for (int i = 0; i < N; i++) {
		long_name(name, sizeof name, (unsigned)i);
		if (linkd_set(d, name, "", "lo", (uint16_t)(i + 1), &p) < 0)
			return 42;
	}
	if (pthread_create(&th, NULL, serve, d) != 0)
		return 43;
	/* Best of REPEAT: the host is shared, the slowest run says little about the code. */
	for (int r = 0; r < REPEAT; r++) {
		t0 = clock_now_ns();
		for (int i = 0; i < PER_LINK; i++) {
			long_name(name, sizeof name, (unsigned)(i % N));
			snprintf(req, sizeof req, "stats name=%s", name);
			if (linkd_request(path, req, reply, sizeof reply, 5000) != 0)
				rc = 44;
		}
		t1 = clock_now_ns();
		free(all);
		all = NULL;
		s.n = 0;
		if (linkd_request_all(path, "stats", &all, &len, 5000) != 0)
			rc = 45;
		else if (linkd_ctl_parse_stats_reply(all, len, collect, &s) != N)
			rc = 46;
		t2 = clock_now_ns();
		if (t1 - t0 < one_by_one)
			one_by_one = t1 - t0;
		if (t2 - t1 < all_at_once)
			all_at_once = t2 - t1;
	}
	for (size_t i = 0; rc == 0 && i < s.n; i++) {
		long_name(name, sizeof name, (unsigned)i);
		if (strcmp(s.names[i], name) || s.c[i].packets || s.c[i].dropped)
			rc = 47;
	}
	/* The emulator still serves after the long reply (its connection state was reset). */
	if (rc == 0 && linkd_request(path, "ping", reply, sizeof reply, 5000) != 0)
		rc = 48;
	fprintf(stderr, "stats: %d links, %zu bytes; %d requests of one link: %.2f ms; one request of all: %.2f ms\n",
		N, len, PER_LINK, (double)one_by_one / 1e6, (double)all_at_once / 1e6);
	linkd_stop(d);
	pthread_join(th, NULL);
	linkd_destroy(&d);
	free(all);
	free(s.names);
	free(s.c);
	return rc;
}

static void many_links(int n)
{
	char dir[] = "/tmp/snt-linkdall-XXXXXX";
	char path[96];
	pid_t pid;
	int st;

	support_require_root();
	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(path, sizeof path, "%s/linkd.sock", dir);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(many_links_child(path, n));
	while (waitpid(pid, &st, 0) < 0)
		cr_assert_eq(errno, EINTR);
	unlink(path);
	rmdir(dir);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "emulator child status %d", st);
}

/* The one stats request the orchestrator makes per second, against an emulator serving 4096
 * queues (NFQUEUE needs root: skipped without it): every link comes back, in order, whole,
 * although the reply outgrows the socket's buffer. Also timed against 400 one-link requests. */
Test(linkd_ctl, stats_of_4096_links_from_a_real_emulator, .timeout = 120)
{
	many_links(4096);
}

/* The soak's case, 200 nodes = 400 link directions: timed both ways (stderr). */
Test(linkd_ctl, stats_of_400_links_from_a_real_emulator, .timeout = 120)
{
	many_links(400);
}
