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
#include <sys/stat.h>
#include <unistd.h>

#include "orchestrator/agentlink.h"
#include "tests/support/files.h"

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
	/* everything up to "--" and the destination is ssh's; the rest is the remote command */
	support_write_file(fake_ssh, "#!/bin/sh\n"
				     "while [ \"$1\" != -- ]; do shift; done; shift\n"
				     "case \"$1\" in denied) echo 'root@h: Permission denied (publickey).' >&2; exit 255;;\n"
				     "  liar) echo 'hello there'; exit 0;; esac\n"
				     "shift; exec \"$@\"\n");
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

	o = opts("root@h1", "relative/stalenet");
	cr_expect_null(agentlink_open(&o, err, sizeof err));
	cr_expect(strstr(err, "absolute paths"), "%s", err);
	o = opts("root@h1", "/bin/x;reboot");
	cr_expect_null(agentlink_open(&o, err, sizeof err));
	cr_expect(strstr(err, "absolute paths"), "%s", err);
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

	cr_assert_eq(agentlink_parse_event("ev worker3 status 120 running 1", &ev), 0);
	cr_expect_eq(ev.kind, AGENTLINK_EV_STATUS);
	cr_expect_str_eq(ev.name, "worker3");
	cr_expect_eq(ev.step, 120);
	cr_expect_str_eq(ev.state, "running");
	cr_expect_eq(ev.waiting, 1);
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
