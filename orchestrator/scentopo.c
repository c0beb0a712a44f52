/* orchestrator/scentopo: the topology and nodes sections of a scenario: which engine runs
 * (parameter-server, p2p, allreduce, centralized, fleet) and, when given, the explicit node list.
 *
 * Whether the roles fit the topology is checked once everything is read (orchestrator/scenario),
 * since the workload changes which roles are allowed. */
#include "orchestrator/scentopo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/scenario.h"
#include "orchestrator/scennames.h"
#include "orchestrator/scenval.h"

int scentopo_topology(struct scenval *cv, const struct yamltree_node *m)
{
	struct scenario *sc = cv->sc;
	const struct yamltree_node *v;
	int rc, idx;
	if ((rc = scenval_want_kind(cv, m, YAMLTREE_MAP, "topology")) ||
	    (rc = scenval_check_keys(cv, m, SCENVAL_KEYS("kind", "servers"), "topology")))
		return rc;
	if ((v = yamltree_get(m, "kind"))) {
		if ((rc = scenval_enum(cv, v, scennames_topology, "topology.kind", &idx)))
			return rc;
		sc->topology.kind = (enum scenario_topology)idx;
	}
	if ((v = yamltree_get(m, "servers"))) {
		if (sc->topology.kind != SCENARIO_TOPO_PS)
			return scenval_fail(cv, v, "servers applies to kind parameter-server");
		if ((rc = scenval_u32(cv, v, 1, 256, "topology.servers", &sc->topology.servers)))
			return rc;
		if (sc->topology.servers != 1)
			return scenval_fail(cv, v, "topology.servers %u: the parameter server is one node (key-range "
					    "sharding over several servers is not implemented; expected 1)",
					    sc->topology.servers);
	}
	return 0;
}

static bool valid_node_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= SCENARIO_NODE_NAME_MAX || !(s[0] >= 'a' && s[0] <= 'z'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
			return false;
	return true;
}

int scentopo_nodes(struct scenval *cv, const struct yamltree_node *m)
{
	struct scenario *sc = cv->sc;
	int rc, idx;
	if ((rc = scenval_want_kind(cv, m, YAMLTREE_SEQ, "nodes")))
		return rc;
	if (m->n == 0 || m->n > SCENARIO_MAX_NODES)
		return scenval_fail(cv, m, "nodes has %zu entries (limit: 1..%d, SCENARIO_MAX_NODES)", m->n,
				    SCENARIO_MAX_NODES);
	if (!(sc->nodes = calloc(m->n, sizeof *sc->nodes)))
		return scenval_fail(cv, m, "out of memory");
	sc->n_nodes = m->n;
	for (size_t i = 0; i < m->n; i++) {
		const struct yamltree_node *e = m->items[i].value, *nm, *rl;
		struct scenario_node *n = &sc->nodes[i];
		if ((rc = scenval_want_kind(cv, e, YAMLTREE_MAP, "a nodes entry")) ||
		    (rc = scenval_check_keys(cv, e, SCENVAL_KEYS("name", "role"), "a nodes entry")))
			return rc;
		if (!(nm = yamltree_get(e, "name")))
			return scenval_fail(cv, e, "nodes entry without name (expected {name: worker0, role: worker})");
		if (!(rl = yamltree_get(e, "role")))
			return scenval_fail(cv, e,
					    "nodes entry without role (expected server|worker|peer|central|probe)");
		const char *s = scenval_scalar(cv, nm, "node name");
		if (!s)
			return -EINVAL;
		if (!valid_node_name(s) || !strcmp(s, "all") || !strcmp(s, "servers") || !strcmp(s, "workers"))
			return scenval_fail(cv, nm,
					    "node name '%s' is not valid (expected [a-z][a-z0-9_-]*, at most %d "
					    "characters, not all/servers/workers)", s, SCENARIO_NODE_NAME_MAX - 1);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(sc->nodes[j].name, s))
				return scenval_fail(cv, nm, "duplicate node name '%s' (first at line %u)", s,
						    sc->nodes[j].pos.line);
		snprintf(n->name, sizeof n->name, "%s", s);
		n->pos = (struct scenario_pos){ nm->line, nm->col };
		if ((rc = scenval_enum(cv, rl, scennames_role, "role", &idx)))
			return rc;
		n->role = (enum scenario_role)idx;
	}
	return 0;
}
