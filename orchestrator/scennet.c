/* orchestrator/scennet: the network section of a scenario: the default link, per-node links, the
 * timeline of link changes, the trace, TCP settings, the subnet, the MTU and the release precision.
 *
 * A per-node override (links, timeline) is checked merged onto network.default, since that is
 * what the node will get; the positions of the default's fields are kept for that check, so a
 * broken rule is reported where its field was written, in whichever layer. */
#include "orchestrator/scennet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/cgroup.h"
#include "orchestrator/scenario.h"
#include "orchestrator/scenlink.h"
#include "orchestrator/scennames.h"
#include "orchestrator/scenval.h"

/* An override merged on the default (written at def_upos, def_dpos) must still make sense to
 * netem. */
static int link_check_over_default(struct scenval *cv, const struct link_params *up, const struct link_params *down,
				   const struct scenlink_pos *upos, const struct scenlink_pos *dpos,
				   const struct scenlink_pos *def_upos, const struct scenlink_pos *def_dpos,
				   const struct yamltree_node *fallback)
{
	struct link_params m;
	struct scenlink_pos mp;
	int rc;
	m = cv->sc->network.up;
	mp = *def_upos;
	scenlink_merge(&m, up, &mp, upos);
	if ((rc = scenlink_check(cv, &m, &mp, fallback, "up")))
		return rc;
	m = cv->sc->network.down;
	mp = *def_dpos;
	scenlink_merge(&m, down, &mp, dpos);
	return scenlink_check(cv, &m, &mp, fallback, "down");
}

static int parse_subnet(struct scenval *cv, const struct yamltree_node *v)
{
	const char *s = scenval_scalar(cv, v, "network.subnet");
	char addr[64];
	struct in_addr in;
	if (!s)
		return -EINVAL;
	const char *slash = strchr(s, '/');
	char *end;
	if (!slash || (size_t)(slash - s) >= sizeof addr)
		return scenval_fail(cv, v, "network.subnet '%s' is not a CIDR prefix (expected e.g. 198.18.0.0/15)", s);
	memcpy(addr, s, (size_t)(slash - s));
	addr[slash - s] = 0;
	long len = strtol(slash + 1, &end, 10);
	if (inet_pton(AF_INET, addr, &in) != 1 || *end || end == slash + 1)
		return scenval_fail(cv, v, "network.subnet '%s' is not a CIDR prefix (expected e.g. 198.18.0.0/15)", s);
	if (len < 8 || len > 30)
		return scenval_fail(cv, v, "network.subnet prefix length /%ld out of range (limit: /8../30)", len);
	uint32_t a = ntohl(in.s_addr), mask = len ? ~0u << (32 - len) : 0;
	if (a & ~mask)
		return scenval_fail(cv, v, "network.subnet '%s' has host bits set (expected the network address)", s);
	cv->sc->network.subnet = a;
	cv->sc->network.prefix_len = (uint8_t)len;
	cv->subnet_node = v;
	return 0;
}

/* A congestion control name (network.cc, network.tcp.cc): the kernel's module names. */
static int get_cc(struct scenval *cv, const struct yamltree_node *v, const char *what)
{
	struct scenario *sc = cv->sc;
	int rc = scenval_string(cv, v, what, &sc->network.cc);
	const char *s;
	bool ok;

	if (rc)
		return rc;
	s = sc->network.cc;
	ok = *s && strlen(s) <= 15;
	for (; *s && ok; s++)
		ok = (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_';
	if (!ok)
		return scenval_fail(cv, v, "%s '%s' is not a congestion control name (expected e.g. cubic, reno)", what,
				    sc->network.cc);
	return 0;
}

/* tcp_rmem / tcp_wmem: [min, default, max] sizes, min <= default <= max. */
static int get_tcp_mem(struct scenval *cv, const struct yamltree_node *v, const char *what, uint64_t out[3])
{
	if (v->kind != YAMLTREE_SEQ || v->n != 3)
		return scenval_fail(cv, v, "%s is not a list of three sizes (expected [min, default, max], e.g. "
				    "[4KiB, 128KiB, 6MiB])", what);
	for (size_t i = 0; i < 3; i++) {
		const struct yamltree_node *e = v->items[i].value;
		const char *t = scenval_scalar(cv, e, what), *why = NULL;

		if (!t)
			return -EINVAL;
		if (cgroup_parse_size(t, &out[i], &why))
			return scenval_fail(cv, e, "%s '%s': %s (expected a size like 4KiB or 6MiB)", what, t, why);
		if (out[i] < SCENARIO_TCP_MEM_MIN || out[i] > SCENARIO_TCP_MEM_MAX)
			return scenval_fail(cv, e, "%s %s out of range (limit: 4KiB..1GiB)", what, t);
		if (i && out[i] < out[i - 1])
			return scenval_fail(cv, e,
					    "%s %s is below the value before it (expected min <= default <= max)",
					    what, t);
	}
	return 0;
}

/* network.tcp: transport knobs set inside every node's namespace. cc_alias is network.cc
 * (NULL when absent): both set is ambiguous. */
static int sec_tcp(struct scenval *cv, const struct yamltree_node *m, const struct yamltree_node *cc_alias)
{
	struct scenario *sc = cv->sc;
	const struct yamltree_node *v;
	bool b;
	int rc;

	if ((rc = scenval_want_kind(cv, m, YAMLTREE_MAP, "network.tcp")) ||
	    (rc = scenval_check_keys(cv, m, SCENVAL_KEYS("cc", "slow_start_after_idle", "ecn", "initial_cwnd",
							 "rmem", "wmem"), "network.tcp")))
		return rc;
	if ((v = yamltree_get(m, "cc"))) {
		if (cc_alias)
			return scenval_fail(cv, v, "network.tcp.cc and network.cc are the same setting: give one");
		if ((rc = get_cc(cv, v, "network.tcp.cc")))
			return rc;
	}
	if ((v = yamltree_get(m, "slow_start_after_idle"))) {
		if ((rc = scenval_bool(cv, v, "network.tcp.slow_start_after_idle", &b)))
			return rc;
		sc->network.tcp.slow_start_after_idle = b;
	}
	if ((v = yamltree_get(m, "ecn"))) {
		/* the sysctl's values: off, on (ask and accept), passive (accept when asked) */
		static const char *const names[] = { "off", "on", "passive", NULL };
		const char *t = scenval_scalar(cv, v, "network.tcp.ecn");

		if (!t)
			return -EINVAL;
		if (!strcmp(t, "false") || !strcmp(t, "true")) {
			sc->network.tcp.ecn = t[0] == 't';
		} else if ((rc = scenval_enum(cv, v, names, "network.tcp.ecn", &sc->network.tcp.ecn))) {
			return rc;
		}
	}
	if ((v = yamltree_get(m, "initial_cwnd")) &&
	    (rc = scenval_u32(cv, v, 1, SCENARIO_TCP_MAX_INITCWND, "network.tcp.initial_cwnd",
			      &sc->network.tcp.initial_cwnd)))
		return rc;
	if ((v = yamltree_get(m, "rmem")) && (rc = get_tcp_mem(cv, v, "network.tcp.rmem", sc->network.tcp.rmem)))
		return rc;
	if ((v = yamltree_get(m, "wmem")) && (rc = get_tcp_mem(cv, v, "network.tcp.wmem", sc->network.tcp.wmem)))
		return rc;
	return 0;
}

int scennet_parse(struct scenval *cv, const struct yamltree_node *m)
{
	struct scenario *sc = cv->sc;
	const struct yamltree_node *v;
	int rc;
	static const char *const def_keys[] = { SCENLINK_KEYS, "up", "down", NULL };
	static const char *const link_keys[] = { SCENLINK_KEYS, "up", "down", "nodes", NULL };
	static const char *const ev_keys[] = { SCENLINK_KEYS, "up", "down", "nodes", "at", NULL };
	struct scenlink_pos def_up = { 0 }, def_down = { 0 };  /* where network.default wrote each field */

	if ((rc = scenval_want_kind(cv, m, YAMLTREE_MAP, "network")) ||
	    (rc = scenval_check_keys(cv, m, SCENVAL_KEYS("default", "links", "timeline", "trace", "cc", "tcp",
							 "subnet", "mtu", "precision"), "network")))
		return rc;
	if ((v = yamltree_get(m, "default"))) {
		if ((rc = scenlink_layer(cv, v, def_keys, "network.default", &sc->network.up, &sc->network.down,
					 &def_up, &def_down)) ||
		    (rc = scenlink_check(cv, &sc->network.up, &def_up, v, "up")) ||
		    (rc = scenlink_check(cv, &sc->network.down, &def_down, v, "down")))
			return rc;
	}
	if ((v = yamltree_get(m, "links"))) {
		if ((rc = scenval_want_kind(cv, v, YAMLTREE_SEQ, "network.links")))
			return rc;
		if (v->n > 65536)
			return scenval_fail(cv, v, "network.links has %zu entries (limit 65536)", v->n);
		if (v->n && !(sc->network.links = calloc(v->n, sizeof *sc->network.links)))
			return scenval_fail(cv, v, "out of memory");
		for (size_t i = 0; i < v->n; i++) {
			const struct yamltree_node *e = v->items[i].value, *nodes;
			struct scenario_link *l = &sc->network.links[i];
			struct scenlink_pos up = { 0 }, dn = { 0 };
			sc->network.n_links = i + 1;
			if ((rc = scenlink_layer(cv, e, link_keys, "a network.links entry", &l->up, &l->down, &up,
						 &dn)))
				return rc;
			if (!(nodes = yamltree_get(e, "nodes")))
				return scenval_fail(cv, e,
						    "network.links entry without nodes (expected nodes: \"worker[0-3]\")");
			if ((rc = scenval_string(cv, nodes, "nodes", &l->nodes)))
				return rc;
			l->pos = (struct scenario_pos){ nodes->line, nodes->col };
			if ((rc = link_check_over_default(cv, &l->up, &l->down, &up, &dn, &def_up, &def_down, e)))
				return rc;
		}
	}
	if ((v = yamltree_get(m, "timeline"))) {
		if ((rc = scenval_want_kind(cv, v, YAMLTREE_SEQ, "network.timeline")))
			return rc;
		if (v->n > 65536)
			return scenval_fail(cv, v, "network.timeline has %zu entries (limit 65536)", v->n);
		if (v->n && !(sc->network.timeline = calloc(v->n, sizeof *sc->network.timeline)))
			return scenval_fail(cv, v, "out of memory");
		for (size_t i = 0; i < v->n; i++) {
			const struct yamltree_node *e = v->items[i].value, *nodes, *at;
			struct scenario_event *t = &sc->network.timeline[i];
			struct scenlink_pos up = { 0 }, dn = { 0 };
			sc->network.n_timeline = i + 1;
			if ((rc = scenlink_layer(cv, e, ev_keys, "a network.timeline entry", &t->up, &t->down, &up,
						 &dn)))
				return rc;
			if (!(at = yamltree_get(e, "at")))
				return scenval_fail(cv, e, "network.timeline entry without at (expected at: 60s)");
			if ((rc = scenval_time(cv, at, 30ull * 86400 * 1000000, "at", &t->at_us)))
				return rc;
			if ((nodes = yamltree_get(e, "nodes"))) {
				if ((rc = scenval_string(cv, nodes, "nodes", &t->nodes)))
					return rc;
				t->pos = (struct scenario_pos){ nodes->line, nodes->col };
			} else if (!(t->nodes = strdup("all"))) {
				return scenval_fail(cv, e, "out of memory");
			} else {
				t->pos = (struct scenario_pos){ e->line, e->col };
			}
			if (!t->up.set && !t->down.set)
				return scenval_fail(cv, e, "network.timeline entry changes nothing (expected link keys "
						    "such as loss: 30%%)");
			if ((rc = link_check_over_default(cv, &t->up, &t->down, &up, &dn, &def_up, &def_down, e)))
				return rc;
		}
	}
	if ((v = yamltree_get(m, "trace")) && (rc = scenval_path(cv, v, "network.trace", &sc->network.trace)))
		return rc;
	if ((v = yamltree_get(m, "cc")) && (rc = get_cc(cv, v, "network.cc")))
		return rc;
	if ((v = yamltree_get(m, "tcp")) && (rc = sec_tcp(cv, v, yamltree_get(m, "cc"))))
		return rc;
	if ((v = yamltree_get(m, "subnet")) && (rc = parse_subnet(cv, v)))
		return rc;
	if ((v = yamltree_get(m, "mtu")) && (rc = scenval_u32(cv, v, 576, 65535, "network.mtu", &sc->network.mtu)))
		return rc;
	if ((v = yamltree_get(m, "precision"))) {
		int idx;

		if ((rc = scenval_enum(cv, v, scennames_precision, "network.precision", &idx)))
			return rc;
		sc->network.precision = (enum scenario_precision)idx;
	}
	return 0;
}
