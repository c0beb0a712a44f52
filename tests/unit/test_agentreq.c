/* Unit tests for orchestrator/agentreq: the agent's requests as the orchestrator writes them
 * parse to exactly their fields; every malformed field, out-of-range number, repeat and stray
 * byte is refused with a message naming the request. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "orchestrator/agentreq.h"

static char err[512];

Test(agentreq, build_as_the_orchestrator_writes_it)
{
	static struct agentreq_build b;
	cr_assert_eq(agentreq_parse_build("sn3f-  7 10.0.0.1 w0:0 - reno 0", &b, err, sizeof err), -EINVAL);
	cr_assert_eq(agentreq_parse_build("sn3f- 7 10.0.0.1 worker0:1,server:0,hub:5 10.0.0.2,10.0.0.3 cubic 1400", &b,
					  err, sizeof err), 0, "%s", err);
	cr_expect_str_eq(b.prefix, "sn3f-");
	cr_expect_eq(b.vni, 7);
	cr_expect_eq(b.local_be, inet_addr("10.0.0.1"));
	cr_assert_eq(b.n_nodes, 3);
	cr_expect_str_eq(b.names[0], "worker0");
	cr_expect_str_eq(b.names[2], "hub");
	cr_expect_eq(b.index[0], 1);
	cr_expect_eq(b.index[1], 0);
	cr_expect_eq(b.index[2], 5);
	cr_assert_eq(b.n_remotes, 2);
	cr_expect_eq(b.remotes_be[1], inet_addr("10.0.0.3"));
	cr_expect_str_eq(b.cc, "cubic");
	cr_expect_eq(b.mtu, 1400);
	cr_expect_eq(b.pin, 0, "no PIN: this host's nodes only");
	cr_assert_eq(agentreq_parse_build("ab- 5 10.0.0.1 a:0 - reno 0 65536", &b, err, sizeof err), 0, "%s", err);
	cr_expect_eq(b.pin, 65536);
	cr_assert_eq(agentreq_parse_build("ab- 16777215 192.168.1.1 a:65535 - reno 65535", &b, err, sizeof err), 0, "%s", err);
	cr_expect_eq(b.n_remotes, 0);
	cr_expect_eq(b.vni, 16777215);
}

Test(agentreq, bad_builds_name_what_is_wrong)
{
	static struct agentreq_build b;
	static const struct { const char *req, *why; } bad[] = {
		{ "", "expected" },
		{ "ab- 5 10.0.0.1 a:0 - reno", "expected" },
		{ "ab- 5 10.0.0.1 a:0 - reno 0 ", "expected" },
		{ " ab- 5 10.0.0.1 a:0 - reno 0", "expected" },
		{ "ab-\t5 10.0.0.1 a:0 - reno 0", "expected" },
		{ "ab- 5 10.0.0.1 a:0 - reno 0 8 x", "nothing after" },
		{ "ab- 5 10.0.0.1 a:0 - reno 0 x", "PIN" },
		{ "ab- 5 10.0.0.1 a:0 - reno 0 -1", "PIN" },
		{ "ab- 5 10.0.0.1 a:0 - reno 0 65537", "PIN" },
		{ "ab- 5 10.0.0.1 a:0 - reno 0 08", "PIN" },
		{ "AB- 5 10.0.0.1 a:0 - reno 0", "prefix" },
		{ "abcdefg- 5 10.0.0.1 a:0 - reno 0", "prefix" },
		{ "- 5 10.0.0.1 a:0 - reno 0", "prefix" },
		{ "ab- 0 10.0.0.1 a:0 - reno 0", "VNI" },
		{ "ab- +5 10.0.0.1 a:0 - reno 0", "VNI" },
		{ "ab- 0x5 10.0.0.1 a:0 - reno 0", "VNI" },
		{ "ab- 16777216 10.0.0.1 a:0 - reno 0", "VNI" },
		{ "ab- 99999999999999999999999 10.0.0.1 a:0 - reno 0", "VNI" },
		{ "ab- 5 10.0.0.256 a:0 - reno 0", "local address" },
		{ "ab- 5 10.1 a:0 - reno 0", "local address" },
		{ "ab- 5 010.0.0.1 a:0 - reno 0", "local address" },
		{ "ab- 5 10.0.0.1 a - reno 0", "node" },
		{ "ab- 5 10.0.0.1 a: - reno 0", "node" },
		{ "ab- 5 10.0.0.1 a:65536 - reno 0", "node" },
		{ "ab- 5 10.0.0.1 a:-1 - reno 0", "node" },
		{ "ab- 5 10.0.0.1 a:1:2 - reno 0", "node" },
		{ "ab- 5 10.0.0.1 :1 - reno 0", "node name" },
		{ "ab- 5 10.0.0.1 ../x:1 - reno 0", "node name" },
		{ "ab- 5 10.0.0.1 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1 - reno 0", "node" },
		{ "ab- 5 10.0.0.1 a:0,a:1 - reno 0", "named twice" },
		{ "ab- 5 10.0.0.1 a:0,b:0 - reno 0", "another node's" },
		{ "ab- 5 10.0.0.1 a:0,,b:1 - reno 0", "node list" },
		{ "ab- 5 10.0.0.1 ,a:0 - reno 0", "node list" },
		{ "ab- 5 10.0.0.1 a:0, - reno 0", "node list" },
		{ "ab- 5 10.0.0.1 - - reno 0", "node" },
		{ "ab- 5 10.0.0.1 a:0 10.0.0.2,10.0.0.2 reno 0", "named twice" },
		{ "ab- 5 10.0.0.1 a:0 10.0.0.1 reno 0", "this host" },
		{ "ab- 5 10.0.0.1 a:0 224.0.0.1 reno 0", "multicast" },
		{ "ab- 5 10.0.0.1 a:0 0.0.0.0 reno 0", "unspecified" },
		{ "ab- 5 10.0.0.1 a:0 255.255.255.255 reno 0", "broadcast" },
		{ "ab- 5 10.0.0.1 a:0 10.0.0.2, reno 0", "remote list" },
		{ "ab- 5 10.0.0.1 a:0 -,10.0.0.2 reno 0", "remote address" },
		{ "ab- 5 10.0.0.1 a:0 - Reno 0", "congestion control" },
		{ "ab- 5 10.0.0.1 a:0 - re;no 0", "congestion control" },
		{ "ab- 5 10.0.0.1 a:0 - aaaaaaaaaaaaaaaa 0", "congestion control" },
		{ "ab- 5 10.0.0.1 a:0 - reno 575", "MTU" },
		{ "ab- 5 10.0.0.1 a:0 - reno 65536", "MTU" },
		{ "ab- 5 10.0.0.1 a:0 - reno -1", "MTU" },
		{ "ab- 5 10.0.0.1 a:0 - reno 01400", "MTU" },
		{ "ab- 05 10.0.0.1 a:0 - reno 0", "VNI" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = 0;
		cr_expect_eq(agentreq_parse_build(bad[i].req, &b, err, sizeof err), -EINVAL, "'%s' taken", bad[i].req);
		cr_expect(!strncmp(err, "build: ", 7) && strstr(err, bad[i].why), "'%s': '%s' does not say '%s'",
			  bad[i].req, err, bad[i].why);
	}
	/* 64 nodes fit, 65 do not */
	char req[2048] = "ab- 5 10.0.0.1 ";
	for (int i = 0; i < 65; i++) {
		char one[16];
		snprintf(one, sizeof one, "%sn%d:%d", i ? "," : "", i, i);
		strcat(req, one);
		if (i == 63) {
			char ok[2100];
			snprintf(ok, sizeof ok, "%s - reno 0", req);
			cr_expect_eq(agentreq_parse_build(ok, &b, err, sizeof err), 0, "%s", err);
			cr_expect_eq(b.n_nodes, 64);
		}
	}
	strcat(req, " - reno 0");
	cr_expect_eq(agentreq_parse_build(req, &b, err, sizeof err), -EINVAL);
	cr_expect(strstr(err, "more than 64 nodes"), "%s", err);
}

Test(agentreq, probe)
{
	struct agentreq_probe p;
	cr_assert_eq(agentreq_parse_probe("10.0.0.2 100", &p, err, sizeof err), 0);
	cr_expect_str_eq(p.addr, "10.0.0.2");
	cr_expect_eq(p.addr_be, inet_addr("10.0.0.2"));
	cr_expect_eq(p.count, 100);
	cr_expect_eq(agentreq_parse_probe("10.0.0.2 1000", &p, err, sizeof err), 0);
	static const char *const bad[] = { "", "10.0.0.2", "10.0.0.2 0", "10.0.0.2 1001", "10.0.0.2 -1", "10.0.0.2 +5",
					   "10.0.0.2 5 6", "10.0.0.2 5 ", "10.0.0.2  5", "host 5", "10.0.0.2 5x",
					   "10.0.0.2 18446744073709551617", "10.0.0.2222 5" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_expect_eq(agentreq_parse_probe(bad[i], &p, err, sizeof err), -EINVAL, "'%s' taken", bad[i]);
		cr_expect(!strncmp(err, "probe: ", 7));
	}
}

Test(agentreq, conf)
{
	struct agentreq_conf c;
	const char *req = "worker0 data.path /usr/share/fashion mnist";
	cr_assert_eq(agentreq_parse_conf(req, &c, err, sizeof err), 0, "%s", err);
	cr_expect_str_eq(c.name, "worker0");
	cr_expect_str_eq(c.key, "data.path");
	cr_expect_str_eq(c.value, "/usr/share/fashion mnist");
	cr_expect(c.value > req && c.value < req + strlen(req), "the value points into the request");
	cr_assert_eq(agentreq_parse_conf("hub fleet.peers ", &c, err, sizeof err), 0, "an empty value");
	cr_expect_str_eq(c.value, "");
	static const char *const bad[] = { "", "worker0", "worker0 key", "worker0  key v", "w/0 key v", "worker0 Key v",
					   "worker0 .key v", "worker0 1key v", "worker0 ke-y v", "worker0 key v\tw",
					   "worker0 key v\x1b[2J", "worker0 key \x7f", " worker0 key v" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_expect_eq(agentreq_parse_conf(bad[i], &c, err, sizeof err), -EINVAL, "'%s' taken", bad[i]);
		cr_expect(!strncmp(err, "conf: ", 6));
	}
}

Test(agentreq, shape_and_reshape)
{
	struct agentreq_shape s;
	cr_assert_eq(agentreq_parse_shape("shape", "worker0 up delay_us=20000 loss_ppm=10000", &s, err, sizeof err), 0,
		     "%s", err);
	cr_expect_str_eq(s.name, "worker0");
	cr_expect_eq(s.down, 0);
	cr_expect_eq(s.lp.delay_us, 20000);
	cr_expect_eq(s.lp.loss_ppm, 10000);
	/* no token: an unshaped direction that changes later ("shape NAME DIR " as written) */
	cr_assert_eq(agentreq_parse_shape("shape", "server down ", &s, err, sizeof err), 0, "%s", err);
	cr_expect_eq(s.down, 1);
	cr_expect_eq(s.lp.delay_us, 0);
	cr_expect_eq(agentreq_parse_shape("reshape", "server down", &s, err, sizeof err), 0);
	static const char *const bad[] = { "", "worker0", "worker0 sideways", "worker0 up  delay_us=1",
					   "worker0 up delay_us=1 ", "worker0 up delay_us=+1", "worker0 up delay_us= 1",
					   "worker0 up delay_us=0x10", "worker0 up delay_us=-1", "worker0 up delay_us",
					   "worker0 up =5", "worker0 up bogus=5", "worker0 up delay_us=1 delay_us=2",
					   "worker0 up delay_us=99999999999", "worker0 up loss_ppm=1000001",
					   "worker0 up delay_us=18446744073709551616", "worker0 up delay_us=05",
					   "worker0 up delay_us=1 jitter_us=1 delay_us=1", "worker0 up delay_us=1\tjitter_us=1",
					   "worker0 up delay_us=1\t", "worker0 up jitter_us=1 dist=5",
					   "worker0 up rate_bps=17179869177", "w@rker0 up" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_expect_eq(agentreq_parse_shape("reshape", bad[i], &s, err, sizeof err), -EINVAL, "'%s' taken", bad[i]);
		cr_expect(!strncmp(err, "reshape: ", 9), "%s", err);
	}
}

Test(agentreq, shapepeers)
{
	static struct agentreq_peers p;
	cr_assert_eq(agentreq_parse_peers("worker0 down h2 198.18.0.3,198.19.255.254 800 delay_us=20000", &p, err,
					  sizeof err), 0, "%s", err);
	cr_expect_str_eq(p.s.name, "worker0");
	cr_expect_eq(p.s.down, 1);
	cr_expect_str_eq(p.tag, "h2");
	cr_assert_eq(p.n_peers, 2);
	cr_expect_eq(p.peers_be[1], inet_addr("198.19.255.254"));
	cr_expect_eq(p.underlay_us, 800);
	cr_expect_eq(p.s.lp.delay_us, 20000);
	cr_expect_eq(agentreq_parse_peers("worker0 up h1 198.18.0.2 0 ", &p, err, sizeof err), 0, "%s", err);
	static const char *const bad[] = {
		"worker0 up h1 198.18.0.2", "worker0 up H1 198.18.0.2 0", "worker0 up h1 10.0.0.2 0",
		"worker0 up h1 198.20.0.2 0", "worker0 up h1 198.18.0.2,198.18.0.2 0", "worker0 up h1 198.18.0.2, 0",
		"worker0 up h1 - 0", "worker0 up h1 198.18.0.2 60000001 delay_us=70000000",
		"worker0 up h1 198.18.0.2 -1", "worker0 up aaaaaaaaaaaaaaaaa 198.18.0.2 0",
		"worker0 up h1 198.18.0.2 0 delay_us=1 delay_us=1",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_expect_eq(agentreq_parse_peers(bad[i], &p, err, sizeof err), -EINVAL, "'%s' taken", bad[i]);
		cr_expect(!strncmp(err, "shapepeers: ", 12), "%s", err);
	}
	/* the underlay's delay larger than the path's: nothing left to emulate */
	cr_expect_eq(agentreq_parse_peers("worker0 up h1 198.18.0.2 900 delay_us=800", &p, err, sizeof err), -ERANGE);
}

Test(agentreq, limit_and_send)
{
	struct agentreq_limit l;
	cr_assert_eq(agentreq_parse_limit("worker0 7 0.5000 0-3,7 268435456", &l, err, sizeof err), 0, "%s", err);
	cr_expect_eq(l.need, 7);
	cr_expect_float_eq(l.cpu, 0.5, 1e-12);
	cr_expect_str_eq(l.cpus, "0-3,7");
	cr_expect_eq(l.memory_bytes, 268435456);
	cr_assert_eq(agentreq_parse_limit("worker0 1 2 - 0", &l, err, sizeof err), 0, "%s", err);
	cr_expect_float_eq(l.cpu, 2.0, 1e-12);
	cr_assert_eq(agentreq_parse_limit("worker0 1 0.0500 - 0", &l, err, sizeof err), 0, "%s", err);
	cr_expect_float_eq(l.cpu, 0.05, 1e-12);
	static const char *const bad[] = { "worker0 1 nan - 0", "worker0 1 inf - 0", "worker0 1 -1 - 0", "worker0 1 1e3 - 0",
					   "worker0 1 0x1 - 0", "worker0 1 1025 - 0", "worker0 1 .5 - 0", "worker0 1 5. - 0",
					   "worker0 0 1 - 0", "worker0 8 1 - 0", "worker0 1 1 x - 0", "worker0 1 1 - -5",
					   "worker0 1 1 - 9223372036854775808", "worker0 1 1 2000 0", "worker0 1 1 - 0 x" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_expect_eq(agentreq_parse_limit(bad[i], &l, err, sizeof err), -EINVAL, "'%s' taken", bad[i]);
		cr_expect(!strncmp(err, "limit: ", 7), "%s", err);
	}
	struct agentreq_send s;
	cr_assert_eq(agentreq_parse_send("worker0 start 123 rejoin", &s, err, sizeof err), 0);
	cr_expect_str_eq(s.name, "worker0");
	cr_expect_str_eq(s.msg, "start 123 rejoin");
	cr_expect_eq(agentreq_parse_send("worker0", &s, err, sizeof err), -EINVAL);
	cr_expect_eq(agentreq_parse_send("worker0 ", &s, err, sizeof err), -EINVAL);
	cr_expect_eq(agentreq_parse_send("worker0 st\x01op", &s, err, sizeof err), -EINVAL);
	cr_expect_eq(agentreq_parse_send("../x stop", &s, err, sizeof err), -EINVAL);
}
