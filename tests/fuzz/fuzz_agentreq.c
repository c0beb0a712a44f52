/* libFuzzer target: the agent's requests (orchestrator/agentreq), read from raw bytes, one
 * request per newline, each given to every parser. The orchestrator's side is not trusted by
 * the agent: must never crash, hang or leak. Whatever parses holds only checked fields (names
 * of [A-Za-z0-9_-], distinct nodes, indexes, remotes and peers, numbers in range) and, written
 * again as the orchestrator writes it, parses to the same fields. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/link_params.h"
#include "orchestrator/agentreq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char err[512], buf[16384];

static void check_name(const char *s)
{
	if (!agentreq_valid_name(s))
		abort();
}

static void addr(uint32_t be, char *out)
{
	struct in_addr a = { be };
	inet_ntop(AF_INET, &a, out, 16);
}

static void build(const char *line)
{
	static struct agentreq_build b, b2;
	size_t pos;
	char a[16];

	if (agentreq_parse_build(line, &b, err, sizeof err))
		return;
	if (!b.vni || b.vni >= 1u << 24 || !b.n_nodes || b.n_nodes > AGENTREQ_MAX_NODES ||
	    b.n_remotes > AGENTREQ_MAX_REMOTES || (b.mtu && (b.mtu < 576 || b.mtu > 65535)) || !b.cc[0])
		abort();
	for (size_t i = 0; i < b.n_nodes; i++) {
		check_name(b.names[i]);
		if (b.index[i] > 65535)
			abort();
		for (size_t j = 0; j < i; j++)
			if (!strcmp(b.names[i], b.names[j]) || b.index[i] == b.index[j])
				abort();
	}
	for (size_t i = 0; i < b.n_remotes; i++)
		for (size_t j = 0; j < i; j++)
			if (b.remotes_be[i] == b.remotes_be[j] || b.remotes_be[i] == b.local_be)
				abort();
	addr(b.local_be, a);
	pos = (size_t)snprintf(buf, sizeof buf, "%s %u %s", b.prefix, b.vni, a);
	for (size_t i = 0; i < b.n_nodes; i++)
		pos += (size_t)snprintf(buf + pos, sizeof buf - pos, "%c%s:%u", i ? ',' : ' ', b.names[i], b.index[i]);
	for (size_t i = 0; i < b.n_remotes; i++) {
		addr(b.remotes_be[i], a);
		pos += (size_t)snprintf(buf + pos, sizeof buf - pos, "%c%s", i ? ',' : ' ', a);
	}
	pos += (size_t)snprintf(buf + pos, sizeof buf - pos, "%s %s %u", b.n_remotes ? "" : " -", b.cc, b.mtu);
	if (b.pin) /* absent and 0 read alike */
		snprintf(buf + pos, sizeof buf - pos, " %u", b.pin);
	if (agentreq_parse_build(buf, &b2, err, sizeof err) || memcmp(&b, &b2, sizeof b))
		abort();
}

static void shape(const char *line)
{
	struct agentreq_shape s, s2;
	static struct agentreq_peers p, p2;
	char tok[1024], a[16];

	if (!agentreq_parse_shape("shape", line, &s, err, sizeof err)) {
		check_name(s.name);
		if (link_params_validate(&s.lp) || link_params_format(&s.lp, tok, sizeof tok) < 0)
			abort();
		snprintf(buf, sizeof buf, "%s %s %s", s.name, s.down ? "down" : "up", tok);
		if (agentreq_parse_shape("shape", buf, &s2, err, sizeof err) || memcmp(&s, &s2, sizeof s))
			abort();
	}
	if (!agentreq_parse_peers(line, &p, err, sizeof err)) {
		size_t pos;
		check_name(p.s.name);
		if (!p.n_peers || p.n_peers > AGENTREQ_MAX_PEERS || p.underlay_us > p.s.lp.delay_us ||
		    link_params_format(&p.s.lp, tok, sizeof tok) < 0)
			abort();
		pos = (size_t)snprintf(buf, sizeof buf, "%s %s %s", p.s.name, p.s.down ? "down" : "up", p.tag);
		for (size_t i = 0; i < p.n_peers; i++) {
			if ((ntohl(p.peers_be[i]) & 0xfffe0000u) != 0xc6120000u)
				abort();
			addr(p.peers_be[i], a);
			pos += (size_t)snprintf(buf + pos, sizeof buf - pos, "%c%s", i ? ',' : ' ', a);
		}
		snprintf(buf + pos, sizeof buf - pos, " %u %s", p.underlay_us, tok);
		if (agentreq_parse_peers(buf, &p2, err, sizeof err) || memcmp(&p, &p2, sizeof p))
			abort();
	}
}

static void others(const char *line)
{
	struct agentreq_probe pr;
	struct agentreq_conf c;
	struct agentreq_limit l;
	struct agentreq_send s;

	if (!agentreq_parse_probe(line, &pr, err, sizeof err) && (!pr.count || pr.count > AGENTREQ_MAX_PROBES))
		abort();
	if (!agentreq_parse_conf(line, &c, err, sizeof err)) {
		check_name(c.name);
		if (!c.key[0] || c.value < line || c.value > line + strlen(line))
			abort();
		for (const char *v = c.value; *v; v++)
			if ((unsigned char)*v < ' ' || *v == 0x7f)
				abort();
	}
	if (!agentreq_parse_limit(line, &l, err, sizeof err)) {
		check_name(l.name);
		if (!l.need || l.need > 7 || !(l.cpu >= 0 && l.cpu <= 1024) || l.memory_bytes > INT64_MAX)
			abort();
	}
	if (!agentreq_parse_send(line, &s, err, sizeof err)) {
		check_name(s.name);
		if (!*s.msg)
			abort();
	}
}

static void one(const char *line)
{
	build(line);
	shape(line);
	others(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), *line, *save = NULL;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	one(text);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		one(line);
	free(text);
	return 0;
}
