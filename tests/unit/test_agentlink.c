/* agentlink against the real `stalenet agent` behind a stand-in for ssh (a script that drops
 * ssh's options and runs the remote command locally): greeting, version and root checks, clock
 * exchanges on one clock (offset ~0 within the bound), and one clear error for each way the
 * connection can fail (ssh's message, a missing program, a greeting that is not ours). */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/version.h"
#include "orchestrator/agent.h"
#include "orchestrator/agentlink.h"
#include "tests/support/files.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"

static char dir[256], fake_ssh[320], stalenet[PATH_MAX + 16];

static void setup(void)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	cr_assert_gt(n, 0);
	exe[n] = 0;
	/* BUILD/tests/unit/test_x -> BUILD/stalenet */
	for (int i = 0; i < 3; i++)
		*strrchr(exe, '/') = 0;
	snprintf(stalenet, sizeof stalenet, "%s/stalenet", exe);
	cr_assert_eq(access(stalenet, X_OK), 0, "%s: build it first (make all)", stalenet);
	cr_assert(support_tmpdir(dir, sizeof dir, "agentlink"));
	snprintf(fake_ssh, sizeof fake_ssh, "%s/ssh", dir);
	/* everything up to "--" and the destination is ssh's; the rest is the remote command.
	 * "burst" is an agent of this build that, after each request line, sends: 300 lines and
	 * the head of a line in one write; the line's tail; 2000 event lines then the answer to
	 * the clock exchange asked for */
	char script[4096];
	snprintf(script, sizeof script,
		 "#!/bin/sh\n"
		 "while [ \"$1\" != -- ]; do shift; done; shift\n"
		 "case \"$1\" in denied) echo 'root@h: Permission denied (publickey).' >&2; exit 255;;\n"
		 "  liar) echo 'hello there'; exit 0;;\n"
		 "  old) echo 'stalenet-agent 4 0.1.0 abc1234 0 oldhost'; exit 0;;\n"
		 "  burst) echo 'stalenet-agent %d %s %s 0 bursthost'\n"
		 "    read req; i=0; out=''\n"
		 "    while [ $i -lt 300 ]; do out=\"${out}line $i\n\"; i=$((i+1)); done\n"
		 "    printf '%%shead\\npart' \"$out\"\n"
		 "    read req; printf 'ial\\n'\n"
		 "    read req t1; i=0\n"
		 "    while [ $i -lt 2000 ]; do echo \"ev n$i status $i run 0\"; i=$((i+1)); done\n"
		 "    echo \"time $t1 5 6\"\n"
		 "    read req; exit 0;;\n"
		 /* echo answers each line; stuck never reads and leaves a child in its process
		  * group; leaver exits at quit, its child left there. The child's pid as host name */
		 "  echo) echo 'stalenet-agent %d %s %s 0 echohost'\n"
		 "    while read -r l; do [ \"$l\" = quit ] && exit 0; echo \"re $l\"; done; exit 0;;\n"
		 "  stuck) sleep 300 & echo \"stalenet-agent %d %s %s 0 $!\"; exec sleep 300;;\n"
		 "  leaver) sleep 300 & echo \"stalenet-agent %d %s %s 0 $!\"\n"
		 "    while read -r l; do [ \"$l\" = quit ] && exit 0; done; exit 0;; esac\n"
		 "shift; exec \"$@\"\n",
		 AGENT_PROTO, version_release(), version_commit(), AGENT_PROTO, version_release(), version_commit(),
		 AGENT_PROTO, version_release(), version_commit(), AGENT_PROTO, version_release(), version_commit());
	support_write_file(fake_ssh, script);
	cr_assert_eq(chmod(fake_ssh, 0700), 0);
}

static void teardown(void)
{
	support_rm_rf(dir);
}

TestSuite(agentlink, .init = setup, .fini = teardown, .timeout = 30);

static struct agentlink_opts opts(const char *dest, const char *path)
{
	return (struct agentlink_opts){ .host_name = "h1", .ssh_dest = dest, .agent_path = path,
					.ssh_program = fake_ssh, .timeout_ms = 5000 };
}

Test(agentlink, greeting_and_clock)
{
	char err[512];
	struct agentlink_opts o = opts("root@h1", stalenet);
	struct agentlink *l = agentlink_open(&o, err, sizeof err);
	if (geteuid() != 0) {
		cr_expect_null(l);
		cr_expect(strstr(err, "not root"), "%s", err);
		return;
	}
	cr_assert(l, "%s", err);
	char host[64];
	gethostname(host, sizeof host);
	cr_expect_str_eq(agentlink_remote_hostname(l), host);
	struct clocksync_sample s[50];
	struct clocksync_estimate e;
	cr_assert_eq(agentlink_clock(l, 50, s, &e, 10000, err, sizeof err), 0, "%s", err);
	for (int i = 0; i < 50; i++)
		cr_expect(s[i].t1_ns <= s[i].t2_ns && s[i].t2_ns <= s[i].t3_ns && s[i].t3_ns <= s[i].t4_ns,
			  "one clock: stamps in order (%d)", i);
	cr_expect_leq(llabs(e.offset_ns), e.bound_ns, "same clock: offset %lld within bound %lld",
		      (long long)e.offset_ns, (long long)e.bound_ns);
	cr_expect_gt(e.bound_ns, 0);
	cr_expect_eq(agentlink_close(&l, 5000), 0, "the agent says bye and ssh exits 0");
	cr_expect_null(l);
}

Test(agentlink, one_clear_error_each)
{
	char err[512], missing[400];
	struct agentlink_opts o = opts("denied", stalenet);
	cr_expect_null(agentlink_open(&o, err, sizeof err));
	cr_expect(strstr(err, "host h1 (denied): ssh failed (exit 255): root@h: Permission denied (publickey)."),
		  "%s", err);

	snprintf(missing, sizeof missing, "%s/nothing/stalenet", dir);
	o = opts("root@h1", missing);
	cr_expect_null(agentlink_open(&o, err, sizeof err));
	cr_expect(strstr(err, "not found there"), "%s", err);

	o = opts("liar", stalenet);
	cr_expect_null(agentlink_open(&o, err, sizeof err));
	cr_expect(strstr(err, "not a stalenet agent"), "%s", err);

	/* an agent of an earlier protocol (whole files unknown to it) is refused by name */
	o = opts("old", stalenet);
	cr_expect_null(agentlink_open(&o, err, sizeof err));
	cr_expect(strstr(err, "host h1 (old): its agent speaks protocol 4, this orchestrator 5"), "%s", err);

	o = opts("root@h1", "relative/stalenet");
	cr_expect_null(agentlink_open(&o, err, sizeof err));
	cr_expect(strstr(err, "absolute paths"), "%s", err);
	o = opts("root@h1", "/bin/x;reboot");
	cr_expect_null(agentlink_open(&o, err, sizeof err));
	cr_expect(strstr(err, "absolute paths"), "%s", err);
}

/* Lines as the channel delivers them: many in one read, one cut between two reads (its head
 * held until the tail comes), and many set aside by a clock exchange, each returned whole and
 * in order */
Test(agentlink, lines_in_chunks_and_set_aside)
{
	char err[512], line[AGENT_LINE_MAX], want[64];
	struct agentlink_opts o = opts("burst", stalenet);
	struct agentlink *l = agentlink_open(&o, err, sizeof err);
	cr_assert(l, "%s", err);
	cr_expect_str_eq(agentlink_remote_hostname(l), "bursthost");

	cr_assert_eq(agentlink_send(l, "go"), 0);
	for (int i = 0; i < 300; i++) {
		cr_assert_eq(agentlink_recv(l, line, sizeof line, 5000), 0, "line %d", i);
		snprintf(want, sizeof want, "line %d", i);
		cr_assert_str_eq(line, want);
	}
	cr_assert_eq(agentlink_recv(l, line, sizeof line, 5000), 0);
	cr_expect_str_eq(line, "head");
	/* "part" came with "head" (one write); without its newline it is no line yet */
	struct agentlink *links[1] = { l };
	cr_expect_eq(agentlink_wait(links, 1, 0), 0, "a line's head alone is no line");
	cr_expect_eq(agentlink_recv(l, line, sizeof line, 0), -ETIMEDOUT);
	cr_assert_eq(agentlink_send(l, "more"), 0);
	cr_assert_eq(agentlink_recv(l, line, sizeof line, 5000), 0);
	cr_expect_str_eq(line, "partial", "the head and the tail of a line cut between reads");

	struct clocksync_sample s[1];
	cr_assert_eq(agentlink_clock_refresh(l, 1, s, 10000), 1);
	cr_expect_eq(s[0].t2_ns, 5);
	cr_expect_eq(s[0].t3_ns, 6);
	cr_expect_eq(agentlink_wait(links, 1, 0), 1, "lines set aside are ready without a read");
	for (int i = 0; i < 2000; i++) {
		cr_assert_eq(agentlink_recv(l, line, sizeof line, 0), 0, "event line %d", i);
		snprintf(want, sizeof want, "ev n%d status %d run 0", i, i);
		cr_assert_str_eq(line, want);
	}
	cr_expect_eq(agentlink_recv(l, line, sizeof line, 0), -ETIMEDOUT, "nothing more");
	cr_expect_eq(agentlink_close(&l, 5000), 0);
}

/* The agent's lines parsed apart from the link: what the other host may send is checked field
 * by field (numbers that do not fit their type were undefined behaviour through sscanf) */
Test(agentlink_lines, greeting_time_events)
{
	struct agentlink_greeting g;
	struct agentlink_event ev;
	int64_t t2, t3;
	const char *line;

	cr_assert_eq(agentlink_parse_greeting("stalenet-agent 2 0.1.0 abc1234 0 host-a.lab", &g), 0);
	cr_expect_eq(g.proto, 2);
	cr_expect_str_eq(g.version, "0.1.0");
	cr_expect_str_eq(g.commit, "abc1234");
	cr_expect_eq(g.uid, 0);
	cr_expect_str_eq(g.host, "host-a.lab");
	cr_expect_eq(agentlink_parse_greeting("stalenet-agent 2 0.1.0 abc1234 4294967296 h", &g), -EPROTO,
		     "a uid beyond 32 bits");
	cr_expect_eq(agentlink_parse_greeting("stalenet-agent 99999999999 0.1.0 abc1234 0 h", &g), -EPROTO);
	cr_expect_eq(agentlink_parse_greeting("stalenet-agent 2 0.1.0 abc1234 0", &g), -EPROTO);
	cr_expect_eq(agentlink_parse_greeting("stalenet-agent 2 0.1.0 abc\x01 0 h", &g), -EPROTO);

	cr_assert_eq(agentlink_parse_time("time 100 -5 9223372036854775807", 100, &t2, &t3), 0);
	cr_expect_eq(t2, -5);
	cr_expect_eq(t3, INT64_MAX);
	cr_expect_eq(agentlink_parse_time("time 100 1 2", 101, &t2, &t3), -EPROTO, "another exchange");
	cr_expect_eq(agentlink_parse_time("time 100 1 9223372036854775808", 100, &t2, &t3), -EPROTO);
	cr_expect_eq(agentlink_parse_time("time 100 1 2 3", 100, &t2, &t3), -EPROTO);
	cr_expect_eq(agentlink_parse_time("time 100 1x 2", 100, &t2, &t3), -EPROTO);

	cr_assert_eq(agentlink_parse_event("ev worker3 status 120 wait 1", &ev), 0);
	cr_expect_eq(ev.kind, AGENTLINK_EV_STATUS);
	cr_expect_str_eq(ev.name, "worker3");
	cr_expect_eq(ev.step, 120);
	cr_expect_str_eq(ev.state, "wait");
	cr_expect_eq(ev.waiting, 1);
	/* a status line not as lib/ctl writes it is no status (an event of no consequence) */
	static const char *const bad_status[] = { "ev w status 120 running 1", "ev w status -5 run 0", "ev w status 1 run 2",
						  "ev w status 1 run 0 x", "ev w status +1 run 0", "ev w status 1 run" };
	for (size_t i = 0; i < sizeof bad_status / sizeof bad_status[0]; i++) {
		cr_assert_eq(agentlink_parse_event(bad_status[i], &ev), 0);
		cr_expect_eq(ev.kind, AGENTLINK_EV_OTHER, "'%s' taken as a status", bad_status[i]);
		cr_expect_eq(ev.step, 0);
	}
	line = "ev worker0 exit -1 no such node here";
	cr_assert_eq(agentlink_parse_event(line, &ev), 0);
	cr_expect_eq(ev.kind, AGENTLINK_EV_EXIT);
	cr_expect_eq(ev.status, -1);
	cr_expect_eq(ev.what, line + 11);
	cr_assert_eq(agentlink_parse_event("ev ps ready", &ev), 0);
	cr_expect_eq(ev.kind, AGENTLINK_EV_READY);
	cr_assert_eq(agentlink_parse_event("ev ps launched 4242", &ev), 0);
	cr_expect_eq(ev.kind, AGENTLINK_EV_OTHER);
	cr_assert_eq(agentlink_parse_event("ev ps exit 99999999999", &ev), 0);
	cr_expect_eq(ev.kind, AGENTLINK_EV_OTHER, "a status beyond int is no exit");
	cr_assert_eq(agentlink_parse_event("ev ps status 1 a-state-name-too-long 0", &ev), 0);
	cr_expect_eq(ev.kind, AGENTLINK_EV_OTHER);
	cr_expect_eq(agentlink_parse_event("ev ps", &ev), -EPROTO);
	cr_expect_eq(agentlink_parse_event("ev 0123456789012345678901234567890123456789012345678901234567890123 ready",
					   &ev), -EPROTO, "a name of 64 characters");
}

Test(agentlink, build_and_probe_answers_are_checked)
{
	struct agentlink_built b;
	struct agentlink_probe p;

	cr_assert_eq(agentlink_parse_built("ok sn3f-sw 1450 eth0 1500", &b), 0);
	cr_expect_str_eq(b.switch_netns, "sn3f-sw");
	cr_expect_eq(b.node_mtu, 1450);
	cr_expect_str_eq(b.underlay_if, "eth0");
	cr_expect_eq(b.underlay_mtu, 1500);
	cr_expect_eq(agentlink_parse_built("ok sw 65485 lo 65536", &b), 0, "lo's MTU is 65536");
	static const char *const bad_built[] = {
		"ok", "ok sw 1450 eth0", "ok sw 1450 eth0 1500 x", "ok sw 1450 eth0 1500 ", "ok sw  1450 eth0 1500",
		"ok sw 1450 eth0 1400",            /* the node's MTU above the underlay's */
		"ok sw 100 eth0 1500", "ok sw 70000 eth0 80000", "ok sw -1 eth0 1500", "ok sw +1450 eth0 1500",
		"ok sw 1450 eth0/x 1500", "ok sw 1450 averyveryverylongname 1500", "ok s;w 1450 eth0 1500",
		"ok sw 1450 eth0 99999999999", "fail build: no", "ok sw 1450.5 eth0 1500",
	};
	for (size_t i = 0; i < sizeof bad_built / sizeof bad_built[0]; i++)
		cr_expect_eq(agentlink_parse_built(bad_built[i], &b), -EPROTO, "'%s' taken", bad_built[i]);

	cr_assert_eq(agentlink_parse_probe("probe 10.0.0.2 100 80000 95000", "10.0.0.2", 100, &p), 0);
	cr_expect_eq(p.got, 100);
	cr_expect_eq(p.min_ns, 80000);
	cr_expect_eq(p.median_ns, 95000);
	static const char *const bad_probe[] = {
		"probe 10.0.0.3 100 80000 95000",  /* another host's */
		"probe 10.0.0.2 101 80000 95000",  /* more answers than asked */
		"probe 10.0.0.2 0 80000 95000", "probe 10.0.0.2 100 0 95000", "probe 10.0.0.2 100 -5 95000",
		"probe 10.0.0.2 100 95000 80000",  /* median below the minimum */
		"probe 10.0.0.2 100 80000 60000000001", "probe 10.0.0.2 100 80000", "probe 10.0.0.2 100 80000 95000 ",
		"probe 10.0.0.2 100 80000 95000 1", "fail probe: no answer from 10.0.0.2", "probe  10.0.0.2 100 80000 95000",
	};
	for (size_t i = 0; i < sizeof bad_probe / sizeof bad_probe[0]; i++)
		cr_expect_eq(agentlink_parse_probe(bad_probe[i], "10.0.0.2", 100, &p), -EPROTO, "'%s' taken", bad_probe[i]);
	int64_t t2, t3;
	cr_expect_eq(agentlink_parse_time("time 5 6 7", 5, &t2, &t3), 0);
	cr_expect_eq(agentlink_parse_time("time 5 6 7 ", 5, &t2, &t3), -EPROTO);
}

static volatile sig_atomic_t got_sigint;

static void on_sigint(int sig)
{
	(void)sig;
	got_sigint = 1;
}

/* A terminal's Ctrl-C is SIGINT to the whole foreground process group. ssh (here the stand-in
 * for it) is in a group of its own: the orchestrator's group gets the signal, and the channel
 * still works afterwards (before: ssh died of it, the request met a closed channel). Run in a
 * child leading a group of its own, so nothing else gets the signal. */
Test(agentlink, sigint_to_the_callers_group_spares_the_channel)
{
	pid_t child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		char err[512], reply[64];
		struct sigaction sa = { .sa_handler = on_sigint };
		sigemptyset(&sa.sa_mask);
		if (setpgid(0, 0) < 0 || sigaction(SIGINT, &sa, NULL) < 0)
			_exit(10);
		struct agentlink_opts o = opts("echo", stalenet);
		struct agentlink *l = agentlink_open(&o, err, sizeof err);
		if (!l)
			_exit(11);
		if (kill(0, SIGINT) < 0 || !got_sigint)
			_exit(12);
		int rc = agentlink_request(l, "ping", reply, sizeof reply, 5000);
		if (rc)
			_exit(rc == -EPIPE ? 13 : 14);
		if (strcmp(reply, "re ping"))
			_exit(15);
		_exit(agentlink_close(&l, 5000) == 0 ? 0 : 16);
	}
	int st = 0;
	cr_assert_eq(support_wait_pid(child, &st, 15000), 0);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "exit %d (13: the channel closed by the signal)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static bool gone(void *arg)
{
	pid_t pid = *(const pid_t *)arg;
	char path[64], stat[256];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return true;
	size_t n = fread(stat, 1, sizeof stat - 1, f);
	fclose(f);
	stat[n] = 0;
	const char *paren = strrchr(stat, ')');
	return paren && paren[1] == ' ' && paren[2] == 'Z';     /* a zombie not yet reaped by init */
}

static bool stalled_200ms(void *arg)
{
	return agentlink_out_stalled_ms(arg) >= 200;
}

/* What the program left in its process group ends with the link, whether it had to be killed
 * (stuck: no answer to quit) or exited (leaver): that group no longer gets the signals ours
 * gets, so nothing else would end it. */
Test(agentlink, close_ends_the_whole_process_group)
{
	static const char *const dests[] = { "stuck", "leaver" };
	static const int want[] = { -ETIMEDOUT, 0 };
	for (int k = 0; k < 2; k++) {
		char err[512];
		struct agentlink_opts o = opts(dests[k], stalenet);
		struct agentlink *l = agentlink_open(&o, err, sizeof err);
		cr_assert(l, "%s: %s", dests[k], err);
		pid_t left = (pid_t)atoi(agentlink_remote_hostname(l));
		cr_assert_gt(left, 1, "%s: %s", dests[k], agentlink_remote_hostname(l));
		cr_assert_eq(kill(left, 0), 0, "%s: its child runs", dests[k]);
		int rc = agentlink_close(&l, 300);
		cr_expect_eq(rc, want[k], "%s: %d", dests[k], rc);
		bool ended = support_wait_until(gone, &left, 5000);
		if (!ended)
			kill(left, SIGKILL);
		cr_expect(ended, "%s: its child %d outlived the link", dests[k], (int)left);
	}
}

/* The burst agent up to its clock exchange: 300 lines, "head", the request "more", "partial". */
static struct agentlink *burst_to_the_clock(void)
{
	char err[512], line[AGENT_LINE_MAX];
	struct agentlink_opts o = opts("burst", stalenet);
	struct agentlink *l = agentlink_open(&o, err, sizeof err);
	cr_assert(l, "%s", err);
	cr_assert_eq(agentlink_send(l, "go"), 0);
	for (int i = 0; i < 301; i++)
		cr_assert_eq(agentlink_recv(l, line, sizeof line, 5000), 0, "line %d", i);
	cr_assert_eq(agentlink_send(l, "more"), 0);
	cr_assert_eq(agentlink_recv(l, line, sizeof line, 5000), 0);
	cr_assert_str_eq(line, "partial");
	return l;
}

/* A clock exchange in the background of the reads: the 2000 event lines the agent sends
 * before its answer come out of agentlink_recv whole and in order, the answer never does; the
 * sample is stamped with the agent's t2, t3 and ours around them. */
Test(agentlink, background_clock_answer_taken_out_of_the_lines)
{
	char line[AGENT_LINE_MAX], want[64];
	struct agentlink *l = burst_to_the_clock();
	int64_t before = clock_now_ns();
	cr_assert_eq(agentlink_clock_begin(l, 1), 0);
	cr_expect(agentlink_clock_busy(l));
	cr_expect_eq(agentlink_clock_begin(l, 1), -EBUSY, "one exchange at a time");
	for (int i = 0; i < 2000; i++) {
		cr_assert_eq(agentlink_recv(l, line, sizeof line, 5000), 0, "event line %d", i);
		snprintf(want, sizeof want, "ev n%d status %d run 0", i, i);
		cr_assert_str_eq(line, want);
	}
	/* the answer follows the last event: taken by the next read, not returned */
	cr_expect_eq(agentlink_recv(l, line, sizeof line, 2000), -ETIMEDOUT, "the answer is no line: %s", line);
	cr_expect_not(agentlink_clock_busy(l));
	struct clocksync_sample s[4];
	cr_assert_eq(agentlink_clock_end(l, s, 4), 1);
	cr_expect_geq(s[0].t1_ns, before);
	cr_expect_eq(s[0].t2_ns, 5);
	cr_expect_eq(s[0].t3_ns, 6);
	cr_expect_geq(s[0].t4_ns, s[0].t1_ns);
	cr_expect_leq(s[0].t4_ns, clock_now_ns());
	cr_expect_eq(agentlink_close(&l, 5000), 0);
}

/* A batch ended before its answer came (the host did not answer in time): the late answer is
 * still taken out of the lines, dropped, and until it comes no other exchange begins. */
Test(agentlink, late_background_clock_answer_dropped)
{
	char line[AGENT_LINE_MAX];
	struct agentlink *l = burst_to_the_clock();
	struct clocksync_sample s[4];
	cr_assert_eq(agentlink_clock_begin(l, 3), 0);
	cr_expect_eq(agentlink_clock_end(l, s, 4), 0, "nothing answered yet");
	cr_expect(agentlink_clock_busy(l), "its answer is still due");
	cr_expect_eq(agentlink_clock_begin(l, 1), -EBUSY);
	for (int i = 0; i < 2000; i++)
		cr_assert_eq(agentlink_recv(l, line, sizeof line, 5000), 0, "event line %d", i);
	cr_expect_eq(agentlink_recv(l, line, sizeof line, 2000), -ETIMEDOUT, "the late answer is no line: %s", line);
	cr_expect_not(agentlink_clock_busy(l), "answered");
	cr_expect_eq(agentlink_clock_end(l, s, 4), 0, "the late answer is not kept");
	cr_expect_eq(agentlink_close(&l, 5000), 0, "the batch's other exchanges were never sent (the agent "
		     "takes the next line as the end)");
}

/* An agent that never reads (stuck): no send waits; what its pipe does not take is queued up
 * to AGENTLINK_OUT_MAX, then the send that would pass it fails with -ENOBUFS, and so does every
 * later one (a line is lost: the link is broken). The queue's stall is measured, and closing
 * the link is bounded though the pipe is full. */
Test(agentlink, sends_to_an_agent_that_never_reads_never_block)
{
	char err[512], big[3001];
	struct agentlink_opts o = opts("stuck", stalenet);
	struct agentlink *l = agentlink_open(&o, err, sizeof err);
	cr_assert(l, "%s", err);
	pid_t left = (pid_t)atoi(agentlink_remote_hostname(l));
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = 0;
	cr_expect_eq(agentlink_out_pending(l), 0);
	cr_expect_eq(agentlink_out_stalled_ms(l), 0, "nothing queued: no stall");
	size_t sent = 0;
	int rc = 0, sends = 0;
	int64_t t0 = clock_now_ns(), slowest = 0;
	while (sends < 10000) {
		int64_t a = clock_now_ns();
		rc = agentlink_send(l, big);
		int64_t took = clock_now_ns() - a;
		slowest = took > slowest ? took : slowest;
		sends++;
		if (rc)
			break;
		sent += sizeof big;     /* the line and its newline */
	}
	int64_t all_ns = clock_now_ns() - t0;
	fprintf(stderr, "stuck agent: %d sends, %zu bytes accepted (%zu queued), slowest send %.3f ms, all %.1f ms\n",
		sends, sent, agentlink_out_pending(l), slowest / 1e6, all_ns / 1e6);
	cr_expect_eq(rc, -ENOBUFS, "overflow reported: %d", rc);
	size_t queued = agentlink_out_pending(l);
	cr_expect_leq(queued, AGENTLINK_OUT_MAX);
	cr_expect_gt(queued + sizeof big, AGENTLINK_OUT_MAX, "the queue filled: %zu", queued);
	cr_expect_geq(sent, queued + 4096, "the pipe took its share first: %zu sent, %zu queued", sent, queued);
	cr_expect_lt(slowest, 100000000ll, "a send took %.1f ms", slowest / 1e6);
	cr_expect_eq(agentlink_send(l, "x"), -ENOBUFS, "broken for good");
	cr_expect_eq(agentlink_flush(l), -ENOBUFS);
	cr_expect(support_wait_until(stalled_200ms, l, 5000), "stalled %lld ms", (long long)agentlink_out_stalled_ms(l));
	int64_t c0 = clock_now_ns();
	cr_expect_eq(agentlink_close(&l, 300), -ETIMEDOUT);
	cr_expect_lt(clock_now_ns() - c0, 2000000000ll, "close bounded with a full pipe: %.0f ms",
		     (clock_now_ns() - c0) / 1e6);
	bool ended = support_wait_until(gone, &left, 5000);
	if (!ended)
		kill(left, SIGKILL);
}

/* An agent that reads slower than it is sent to (echo, a shell loop), while its answers are not
 * read: the queue holds what its pipe does not take, and the reads that wait for the answers
 * write it, so every line arrives whole and in order. */
Test(agentlink, queued_lines_reach_a_slow_agent_in_order)
{
	char err[512], line[AGENT_LINE_MAX], big[2001], want[2100];
	struct agentlink_opts o = opts("echo", stalenet);
	struct agentlink *l = agentlink_open(&o, err, sizeof err);
	cr_assert(l, "%s", err);
	memset(big, 'y', sizeof big - 1);
	big[sizeof big - 1] = 0;
	size_t most = 0;
	for (int i = 0; i < 150; i++) {
		snprintf(big, 8, "%06u", (unsigned)i % 1000000u);
		big[6] = 'y';
		cr_assert_eq(agentlink_send(l, big), 0, "send %d", i);
		most = agentlink_out_pending(l) > most ? agentlink_out_pending(l) : most;
	}
	cr_expect_gt(most, 0, "the pipe took 300 KB at once: no queue tested");
	for (int i = 0; i < 150; i++) {
		cr_assert_eq(agentlink_recv(l, line, sizeof line, 10000), 0, "answer %d", i);
		snprintf(big, 8, "%06u", (unsigned)i % 1000000u);
		big[6] = 'y';
		snprintf(want, sizeof want, "re %s", big);
		cr_assert_str_eq(line, want, "answer %d", i);
	}
	cr_expect_eq(agentlink_out_pending(l), 0);
	cr_expect_eq(agentlink_close(&l, 5000), 0);
}
