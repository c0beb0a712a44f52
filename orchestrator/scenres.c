/* orchestrator/scenres: the resources section of a scenario: cgroup limits (CPU share, CPU
 * pinning, memory) of the nodes a selector matches (orchestrator/cgroup applies them).
 *
 * Limits are checked against the host the scenario is read on: a CPU share above its online CPUs
 * or a pinning to an offline CPU is refused here rather than when the cgroup is written. */
#include "orchestrator/scenres.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orchestrator/cgroup.h"
#include "orchestrator/scenario.h"
#include "orchestrator/scenval.h"

/* The host's online CPUs: limits are checked against the machine the scenario runs on. */
static int host_cpus(uint64_t *mask)
{
	int n = cgroup_online_cpus(mask);

	if (n <= 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);

		n = c < 1 ? 1 : c > CGROUP_MAX_CPUS ? CGROUP_MAX_CPUS : (int)c;
		memset(mask, 0, CGROUP_CPU_WORDS * sizeof *mask);
		for (int i = 0; i < n; i++)
			mask[i / 64] |= 1ull << (i % 64);
	}
	return n;
}

_Static_assert(SCENARIO_CPU_WORDS == CGROUP_CPU_WORDS, "one CPU mask size");

int scenres_parse(struct scenval *cv, const struct yamltree_node *m)
{
	struct scenario *sc = cv->sc;
	uint64_t online[CGROUP_CPU_WORDS];
	char list[256];
	int rc, n_online;

	if ((rc = scenval_want_kind(cv, m, YAMLTREE_SEQ, "resources")))
		return rc;
	if (m->n > 65536)
		return scenval_fail(cv, m, "resources has %zu entries (limit 65536)", m->n);
	if (m->n && !(sc->resources = calloc(m->n, sizeof *sc->resources)))
		return scenval_fail(cv, m, "out of memory");
	n_online = host_cpus(online);
	cgroup_format_cpus(online, list, sizeof list);
	for (size_t i = 0; i < m->n; i++) {
		const struct yamltree_node *e = m->items[i].value, *v;
		struct scenario_resources *re = &sc->resources[i];
		sc->n_resources = i + 1;
		if ((rc = scenval_want_kind(cv, e, YAMLTREE_MAP, "a resources entry")) ||
		    (rc = scenval_check_keys(cv, e, SCENVAL_KEYS("nodes", "cpu", "cpus", "memory"),
					     "a resources entry")))
			return rc;
		if (!(v = yamltree_get(e, "nodes")))
			return scenval_fail(cv, e, "resources entry without nodes (expected nodes: worker0)");
		if ((rc = scenval_string(cv, v, "nodes", &re->nodes)))
			return rc;
		re->pos = (struct scenario_pos){ v->line, v->col };
		if ((v = yamltree_get(e, "cpu"))) {
			if ((rc = scenval_real(cv, v, 0, false, 1e6, false, "cpu", &re->cpu)))
				return rc;
			if (re->cpu < CGROUP_MIN_CPU)
				return scenval_fail(cv, v,
						    "cpu %s is below the smallest share, %g of a core (1 ms per %u ms)",
						    v->scalar, CGROUP_MIN_CPU, CGROUP_CPU_PERIOD_US / 1000);
			if (re->cpu > n_online)
				return scenval_fail(cv, v,
						    "cpu %s is more than the %d online CPU(s) of this host (expected a share "
						    "of one core, 0.01..%d)", v->scalar, n_online, n_online);
			re->set |= SCENARIO_RES_CPU;
		}
		if ((v = yamltree_get(e, "cpus"))) {
			int count = 0;

			if ((rc = scenval_want_kind(cv, v, YAMLTREE_SEQ, "cpus")))
				return rc;
			if (!v->n)
				return scenval_fail(cv, v,
						    "cpus is empty (expected a list of CPUs, e.g. [0, 1] or [0-3])");
			for (size_t k = 0; k < v->n; k++) {
				const struct yamltree_node *c = v->items[k].value;
				const char *t = scenval_scalar(cv, c, "a cpus entry");
				uint64_t one[CGROUP_CPU_WORDS];

				if (!t)
					return -EINVAL;
				if (cgroup_parse_cpus(t, one) <= 0)
					return scenval_fail(cv, c,
							    "cpus entry '%s' is not a CPU number or range (expected e.g. 1 or "
							    "0-3, below %d)", t, CGROUP_MAX_CPUS);
				for (int w = 0; w < CGROUP_CPU_WORDS; w++) {
					if (one[w] & ~online[w])
						return scenval_fail(cv, c,
								    "cpus entry '%s' is not an online CPU of this host (online: %s)",
								    t, list);
					re->cpus[w] |= one[w];
				}
			}
			for (int w = 0; w < CGROUP_CPU_WORDS; w++)
				count += __builtin_popcountll(re->cpus[w]);
			re->set |= SCENARIO_RES_CPUS;
			if ((re->set & SCENARIO_RES_CPU) && re->cpu > count)
				return scenval_fail(cv, yamltree_get(e, "cpu"),
						    "cpu %g exceeds the %d CPU(s) the node is pinned to by cpus",
						    re->cpu, count);
		}
		if ((v = yamltree_get(e, "memory"))) {
			const char *t = scenval_scalar(cv, v, "memory"), *why = NULL;
			char min[32];

			if (!t)
				return -EINVAL;
			if (cgroup_parse_size(t, &re->memory_bytes, &why))
				return scenval_fail(cv, v, "memory '%s': %s (expected a size like 256MiB or 1GiB)", t,
						    why);
			cgroup_format_size(CGROUP_MIN_MEMORY_BYTES, min, sizeof min);
			if (re->memory_bytes < CGROUP_MIN_MEMORY_BYTES)
				return scenval_fail(cv, v,
						    "memory %s is below the minimum of %s (a node needs that much to start)",
						    t, min);
			re->set |= SCENARIO_RES_MEMORY;
		}
		if (!re->set)
			return scenval_fail(cv, e, "resources entry does nothing (expected cpu, cpus or memory)");
	}
	return 0;
}
