/* stalenet agent's protocol against hostile and malformed requests, driven over pipes: every
 * request gets its one-line answer, a bad build is refused without touching the host, a bad
 * request or an over-long line ends the agent with an error line, quit ends it cleanly. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/version.h"
#include "orchestrator/agent.h"
#include "tests/support/proc.h"

struct conn {
	pid_t pid;
	int to, from;
	char buf[4096];
	size_t have;
};

static void start(struct conn *s)
{
	int in[2], out[2];
	cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	s->pid = fork();
	cr_assert_geq(s->pid, 0);
	if (s->pid == 0) {
		close(in[1]);
		close(out[0]);
		int rc = agent_serve(in[0], out[1]);
		_exit(rc == 0 ? 0 : rc == -EPROTO ? 2 : 1);
	}
	close(in[0]);
	close(out[1]);
	s->to = in[1];
	s->from = out[0];
	s->have = 0;
}

/* The next line from the agent (without newline), waiting at most 5 s. */
static char *next_line(struct conn *s)
{
	static char line[4096];
	for (;;) {
		char *nl = memchr(s->buf, '\n', s->have);
		if (nl) {
			size_t l = (size_t)(nl - s->buf);
			memcpy(line, s->buf, l);
			line[l] = 0;
			memmove(s->buf, nl + 1, s->have - l - 1);
			s->have -= l + 1;
			return line;
		}
		struct pollfd p = { .fd = s->from, .events = POLLIN };
		cr_assert_eq(poll(&p, 1, 5000), 1, "no answer from the agent");
		ssize_t r = read(s->from, s->buf + s->have, sizeof s->buf - s->have);
		cr_assert_gt(r, 0, "agent closed");
		s->have += (size_t)r;
	}
}

static char *ask(struct conn *s, const char *req)
{
	cr_assert_eq(write(s->to, req, strlen(req)), (ssize_t)strlen(req));
	return next_line(s);
}

static int finish(struct conn *s)
{
	close(s->to);
	int st = 0;
	cr_assert_eq(support_wait_pid(s->pid, &st, 10000), 0);
	close(s->from);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TestSuite(agent, .timeout = 30);

Test(agent, greeting_time_and_quit)
{
	struct conn s;
	start(&s);
	char *g = next_line(&s);
	char want[64];
	snprintf(want, sizeof want, "stalenet-agent %d %s %s %u ", AGENT_PROTO, version_release(), version_commit(),
		 (unsigned)geteuid());
	cr_expect(!strncmp(g, want, strlen(want)), "greeting '%s'", g);
	int64_t t1, t2, t3;
	cr_assert_eq(sscanf(ask(&s, "time 42\n"), "time %" SCNd64 " %" SCNd64 " %" SCNd64, &t1, &t2, &t3), 3);
	cr_expect_eq(t1, 42);
	cr_expect(t2 > 0 && t3 >= t2, "t2 %" PRId64 " t3 %" PRId64, t2, t3);
	cr_expect(!strncmp(ask(&s, "time -7\n"), "time -7 ", 8), "negative stamps are numbers too");
	cr_expect_str_eq(ask(&s, "teardown\n"), "ok", "nothing built: nothing to do");
	cr_expect_str_eq(ask(&s, "quit\n"), "bye");
	cr_expect_eq(finish(&s), 0);
}

Test(agent, bad_builds_refused_and_the_agent_goes_on)
{
	static const char *bad[] = {
		"build x\n",
		"build AB- 5 10.0.0.1 a:0 - reno 0\n",           /* prefix: lower case only */
		"build abcdefgh- 5 10.0.0.1 a:0 - reno 0\n",     /* prefix too long for interface names */
		"build ab 5 10.0.0.1 a:0 - reno 0\n",            /* prefix must end in '-' */
		"build ab- 0 10.0.0.1 a:0 - reno 0\n",           /* VNI 0 */
		"build ab- 16777216 10.0.0.1 a:0 - reno 0\n",    /* VNI beyond 24 bits */
		"build ab- 5 10.0.0 a:0 - reno 0\n",             /* address */
		"build ab- 5 10.0.0.1 a - reno 0\n",             /* node without its index */
		"build ab- 5 10.0.0.1 a:-1 - reno 0\n",          /* negative index */
		"build ab- 5 10.0.0.1 a:x - reno 0\n",           /* index not a number */
		"build ab- 5 10.0.0.1 a:0 10.0.0.x reno 0\n",    /* remote */
		"build ab- 5 10.0.0.1 a:0 - reno 0 extra\n",    /* PIN not a number */
		"build ab- 5 10.0.0.1 a:0 - reno 0 -1\n",       /* negative PIN */
		"build ab- 5 10.0.0.1 a:0 - reno 0 4 x\n",
		"build ab- 5 10.0.0.1 a:0 - reno 100\n",   /* MTU below the IPv4 minimum */
		"build ab- 5 10.0.0.1 a:0 - reno x\n",
		"build ab- 5 10.0.0.1 a:0 - Reno;x 0\n",   /* congestion control name */
		"build ab- 5 10.0.0.1 a:0 - 0\n",        /* no congestion control */
		"build ab- 5 203.0.113.77 a:0 - reno 0\n",       /* no interface holds this address */
		"build ab- 5 10.0.0.1 a:0,a:1 - reno 0\n",       /* a node named twice */
		"build ab- 5 10.0.0.1 a:0,b:0 - reno 0\n",       /* two nodes at one address */
		"build ab- 5 10.0.0.1 a:0, - reno 0\n",          /* an empty item */
		"build ab- 5 10.0.0.1 a:0 10.0.0.1 reno 0\n",    /* this host as its own remote */
		"build ab- 5 10.0.0.1 a:+0 - reno 0\n",          /* a sign */
		"build ab-  5 10.0.0.1 a:0 - reno 0\n",          /* two spaces */
	};
	struct conn s;
	start(&s);
	next_line(&s);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *r = ask(&s, bad[i]);
		cr_expect(!strncmp(r, "fail build: ", 12), "request %zu answered '%s'", i, r);
	}
	cr_expect_str_eq(ask(&s, "quit\n"), "bye");
	cr_expect_eq(finish(&s), 0);
}

Test(agent, node_requests_without_a_build_are_refused)
{
	struct conn s;
	start(&s);
	next_line(&s);
	cr_expect_str_eq(ask(&s, "conf worker0 node.name worker0\n"), "fail conf: no such node here");
	cr_expect_str_eq(ask(&s, "conf worker0 ../x 1\n"), "fail conf: bad key '../x'");
	cr_expect_str_eq(ask(&s, "conf worker0\n"), "fail conf: expected NAME KEY VALUE");
	cr_expect_str_eq(ask(&s, "launch worker0\n"), "ev worker0 exit -1 no such node here");
	cr_expect_str_eq(ask(&s, "launch ../../bin/sh\n"), "ev ? exit -1 no such node here");
	/* the shaping, limit and phase requests of a run across hosts: refused, the agent goes on */
	cr_expect(!strncmp(ask(&s, "shaper nfq\n"), "fail shaper: ", 13), "no build: no shaper");
	cr_expect(!strncmp(ask(&s, "shaper bogus\n"), "fail shaper: ", 13));
	cr_expect(!strncmp(ask(&s, "shape worker0 up delay_us=1000\n"), "fail shape: ", 12));
	cr_expect(!strncmp(ask(&s, "shapepeers worker0 up h1 198.18.0.2 9 delay_us=1000\n"), "fail shapepeers: ", 17));
	cr_expect_str_eq(ask(&s, "reshape worker0 up delay_us=1000\n"), "ev ? reshaped ? fail no such node here");
	cr_expect_str_eq(ask(&s, "reshape worker0 sideways delay_us=1000\n"),
			 "ev ? reshaped ? fail reshape: expected NAME up|down TOKEN...");
	cr_expect(!strncmp(ask(&s, "limit worker0 1 nan - 0\n"), "fail limit: ", 12));
	cr_expect(!strncmp(ask(&s, "limit worker0 1 0.5 - 0\n"), "fail limit: ", 12), "no such node");
	cr_expect_str_eq(ask(&s, "unconf worker0\n"), "fail unconf: no such node here");
	/* relays to unknown nodes are dropped without an answer; the agent goes on */
	static const char relays[] = "send worker0 stop\nkill worker0\nsend x\n";
	cr_expect_eq(write(s.to, relays, sizeof relays - 1), (ssize_t)sizeof relays - 1);
	cr_expect_str_eq(ask(&s, "fetch\n"), "fetched");
	cr_expect_str_eq(ask(&s, "quit\n"), "bye");
	cr_expect_eq(finish(&s), 0);
}

Test(agent, unknown_request_ends_the_agent)
{
	struct conn s;
	start(&s);
	next_line(&s);
	cr_expect_str_eq(ask(&s, "rm -rf /\n"), "error unknown request");
	cr_expect_eq(finish(&s), 2);

	start(&s);
	next_line(&s);
	char longline[AGENT_LINE_MAX + 10];
	memset(longline, 'a', sizeof longline);
	cr_assert_eq(write(s.to, longline, sizeof longline), (ssize_t)sizeof longline);
	cr_expect_str_eq(next_line(&s), "error line too long");
	cr_expect_eq(finish(&s), 2);
}

Test(agent, end_of_input_is_a_clean_end)
{
	struct conn s;
	start(&s);
	next_line(&s);
	cr_expect_eq(finish(&s), 0);
}
