/* libFuzzer target: the lines a host's agent sends the orchestrator (orchestrator/agentlink:
 * the greeting, the clock answer, the node events, the answers to a build and to an underlay
 * probe), read from raw bytes, one line per newline. The other host is not trusted: must never
 * crash, hang or leak. Whatever parses holds only checked fields (printable words of bounded
 * length, numbers in their type's range) and, written again as the agent writes it, parses to
 * the same fields. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/agentlink.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_word(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (!n || n > max)
		abort();
	for (; *s; s++)
		if (*s <= ' ' || *s > '~')
			abort();
}

static void one(const char *line)
{
	struct agentlink_greeting g, g2;
	struct agentlink_event ev, ev2;
	char buf[8192];
	int64_t t1 = 0, t2, t3, u2, u3;

	if (agentlink_parse_greeting(line, &g) == 0) {
		check_word(g.version, 63);
		check_word(g.commit, 63);
		check_word(g.host, 63);
		snprintf(buf, sizeof buf, "stalenet-agent %d %s %s %u %s", g.proto, g.version, g.commit, g.uid, g.host);
		if (agentlink_parse_greeting(buf, &g2) || g.proto != g2.proto || g.uid != g2.uid ||
		    strcmp(g.version, g2.version) || strcmp(g.commit, g2.commit) || strcmp(g.host, g2.host))
			abort();
	}
	if (!strncmp(line, "time ", 5))
		t1 = strtoll(line + 5, NULL, 10);
	if (agentlink_parse_time(line, t1, &t2, &t3) == 0) {
		snprintf(buf, sizeof buf, "time %" PRId64 " %" PRId64 " %" PRId64, t1, t2, t3);
		if (agentlink_parse_time(buf, t1, &u2, &u3) || u2 != t2 || u3 != t3)
			abort();
		if (t1 != INT64_MAX && agentlink_parse_time(buf, t1 + 1, &u2, &u3) == 0)
			abort(); /* an answer to another exchange */
	}
	struct agentlink_built b, b2;
	if (agentlink_parse_built(line, &b) == 0) {
		if (b.node_mtu < 576 || b.node_mtu > 65535 || b.node_mtu > b.underlay_mtu)
			abort();
		check_word(b.switch_netns, 63);
		check_word(b.underlay_if, 15);
		snprintf(buf, sizeof buf, "ok %s %d %s %d", b.switch_netns, b.node_mtu, b.underlay_if, b.underlay_mtu);
		if (agentlink_parse_built(buf, &b2) || memcmp(&b, &b2, sizeof b))
			abort();
	}
	struct agentlink_probe pr, pr2;
	if (agentlink_parse_probe(line, "10.0.0.2", 100, &pr) == 0) {
		if (pr.got < 1 || pr.got > 100 || pr.min_ns < 1 || pr.median_ns < pr.min_ns || pr.median_ns > 60000000000LL)
			abort();
		snprintf(buf, sizeof buf, "probe 10.0.0.2 %d %" PRId64 " %" PRId64, pr.got, pr.min_ns, pr.median_ns);
		if (agentlink_parse_probe(buf, "10.0.0.2", 100, &pr2) || memcmp(&pr, &pr2, sizeof pr) ||
		    !agentlink_parse_probe(buf, "10.0.0.3", 100, &pr2))
			abort();
	}
	if (agentlink_parse_event(line, &ev) == 0) {
		check_word(ev.name, 63);
		if (!ev.what || ev.what < line || ev.what >= line + strlen(line) || !*ev.what)
			abort();
		switch (ev.kind) {
		case AGENTLINK_EV_STATUS:
			check_word(ev.state, 15);
			if (ev.step < 0 || (ev.waiting != 0 && ev.waiting != 1))
				abort();
			snprintf(buf, sizeof buf, "ev %s status %" PRId64 " %s %d", ev.name, ev.step, ev.state, ev.waiting);
			break;
		case AGENTLINK_EV_EXIT:
			snprintf(buf, sizeof buf, "ev %s exit %d", ev.name, ev.status);
			break;
		case AGENTLINK_EV_READY:
			snprintf(buf, sizeof buf, "ev %s ready", ev.name);
			break;
		default:
			snprintf(buf, sizeof buf, "ev %s %s", ev.name, ev.what);
			break;
		}
		if (agentlink_parse_event(buf, &ev2) || ev2.kind != ev.kind || strcmp(ev.name, ev2.name) ||
		    ev2.step != ev.step || ev2.waiting != ev.waiting || ev2.status != ev.status ||
		    strcmp(ev.state, ev2.state))
			abort();
	}
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
