/* orchestrator/placement: see placement.h.
 *
 * The refinement is the classic Kernighan-Lin step on a capacity-bounded partition, kept
 * simple: with deg(u, h) the number of u's neighbours on host h, moving u from A to B gains
 * deg(u, B) - deg(u, A), and swapping u (on A) with v (on B) gains the two moves' gains minus
 * twice the edges between u and v. Each pass applies the best positive move or swap; passes
 * stop when none gains, so the cut only ever decreases and the loop ends. It runs for runs of up
 * to PLACEMENT_REFINE_MAX nodes (each pass is quadratic); larger runs keep the greedy fill,
 * which is already minimal for the built-in topologies. */
#include "orchestrator/placement.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/selector.h"

#define PLACEMENT_REFINE_MAX 256

int placement_edges(enum scenario_topology topo, const enum scenario_role *roles, size_t n,
		    struct placement_edge **out, size_t *n_out)
{
	size_t cap = 0, k = 0;
	struct placement_edge *e = NULL;

	*out = NULL;
	*n_out = 0;
	if (topo == SCENARIO_TOPO_PS) {
		size_t servers = 0;
		for (size_t i = 0; i < n; i++)
			servers += roles[i] == SCENARIO_ROLE_SERVER;
		cap = servers * (n - servers);
	} else if (topo == SCENARIO_TOPO_P2P) {
		cap = n * (n - 1) / 2;
	} else if (topo == SCENARIO_TOPO_ALLREDUCE) {
		cap = n;
	}
	if (!cap)
		return 0;
	if (!(e = calloc(cap, sizeof *e)))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (roles[i] == SCENARIO_ROLE_PROBE || roles[i] == SCENARIO_ROLE_CENTRAL)
			continue;
		for (size_t j = i + 1; j < n; j++) {
			bool edge = false;
			if (topo == SCENARIO_TOPO_PS)
				edge = (roles[i] == SCENARIO_ROLE_SERVER) != (roles[j] == SCENARIO_ROLE_SERVER);
			else if (topo == SCENARIO_TOPO_P2P)
				edge = true;
			else if (topo == SCENARIO_TOPO_ALLREDUCE)
				edge = j == i + 1 || (i == 0 && j == n - 1 && n > 2);
			if (edge && k < cap)
				e[k++] = (struct placement_edge){ (uint32_t)i, (uint32_t)j };
		}
	}
	if (!k) {
		free(e);
		e = NULL;
	}
	*out = e;
	*n_out = k;
	return 0;
}

size_t placement_cut(const struct placement_edge *edges, size_t n_edges, const uint32_t *host_of)
{
	size_t c = 0;
	for (size_t i = 0; i < n_edges; i++)
		c += host_of[edges[i].a] != host_of[edges[i].b];
	return c;
}

/* Adjacency in compressed rows: the neighbours of u are nb[off[u] .. off[u+1]). */
struct adj {
	size_t *off;
	uint32_t *nb;
};

static int adj_build(struct adj *g, const struct placement_edge *e, size_t ne, size_t n)
{
	size_t *fill = NULL;
	g->off = calloc(n + 1, sizeof *g->off);
	g->nb = ne ? calloc(2 * ne, sizeof *g->nb) : NULL;
	fill = calloc(n + 1, sizeof *fill);
	if (!g->off || (ne && !g->nb) || !fill) {
		free(fill);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ne; i++) {
		g->off[e[i].a + 1]++;
		g->off[e[i].b + 1]++;
	}
	for (size_t i = 0; i < n; i++)
		g->off[i + 1] += g->off[i];
	for (size_t i = 0; i < ne; i++) {
		g->nb[g->off[e[i].a] + fill[e[i].a]++] = e[i].b;
		g->nb[g->off[e[i].b] + fill[e[i].b]++] = e[i].a;
	}
	free(fill);
	return 0;
}

static long deg_to(const struct adj *g, const uint32_t *host_of, uint32_t u, uint32_t h)
{
	long d = 0;
	for (size_t k = g->off[u]; k < g->off[u + 1]; k++)
		d += host_of[g->nb[k]] == h;
	return d;
}

static long edges_between(const struct adj *g, uint32_t u, uint32_t v)
{
	long d = 0;
	for (size_t k = g->off[u]; k < g->off[u + 1]; k++)
		d += g->nb[k] == v;
	return d;
}

static void refine(const struct adj *g, size_t n, const uint32_t *cores, size_t n_hosts, uint32_t *host_of,
		   uint32_t *load)
{
	for (size_t pass = 0; pass < 4 * n + 8; pass++) {
		long best = 0;
		uint32_t bu = 0, bv = 0, bh = 0;
		bool swap = false;
		for (uint32_t u = 0; u < n; u++) {
			uint32_t a = host_of[u];
			long du_a = deg_to(g, host_of, u, a);
			for (uint32_t h = 0; h < n_hosts; h++) {
				if (h == a || load[h] >= cores[h])
					continue;
				long gain = deg_to(g, host_of, u, h) - du_a;
				if (gain > best) {
					best = gain;
					bu = u;
					bh = h;
					swap = false;
				}
			}
			for (uint32_t v = u + 1; v < n; v++) {
				uint32_t b = host_of[v];
				if (b == a)
					continue;
				long gain = deg_to(g, host_of, u, b) - du_a + deg_to(g, host_of, v, a) -
					    deg_to(g, host_of, v, b) - 2 * edges_between(g, u, v);
				if (gain > best) {
					best = gain;
					bu = u;
					bv = v;
					swap = true;
				}
			}
		}
		if (best <= 0)
			return;
		if (swap) {
			uint32_t t = host_of[bu];
			host_of[bu] = host_of[bv];
			host_of[bv] = t;
		} else {
			load[host_of[bu]]--;
			load[bh]++;
			host_of[bu] = bh;
		}
	}
}

int placement_auto(const struct placement_edge *edges, size_t n_edges, const enum scenario_role *roles,
		   size_t n, const uint32_t *cores, size_t n_hosts, uint32_t *host_of)
{
	uint32_t *order = NULL, *load = NULL;
	struct adj g = { 0 };
	uint64_t total = 0;
	int rc = 0;

	for (size_t h = 0; h < n_hosts; h++)
		total += cores[h];
	if (n > total)
		return -ENOSPC;
	if (!n)
		return 0;
	order = calloc(n_hosts, sizeof *order);
	load = calloc(n_hosts, sizeof *load);
	if (!order || !load) {
		rc = -ENOMEM;
		goto out;
	}
	/* hosts by decreasing cores, stable (insertion sort: lists are short) */
	for (size_t h = 0; h < n_hosts; h++) {
		size_t k = h;
		while (k > 0 && cores[order[k - 1]] < cores[h]) {
			order[k] = order[k - 1];
			k--;
		}
		order[k] = (uint32_t)h;
	}
	size_t hi = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < n; i++) {
			if ((roles[i] == SCENARIO_ROLE_SERVER) != (pass == 0))
				continue;
			while (load[order[hi]] >= cores[order[hi]])
				hi++;   /* n <= total: a host with room remains */
			host_of[i] = order[hi];
			load[order[hi]]++;
		}
	}
	if (n_edges && n <= PLACEMENT_REFINE_MAX) {
		if ((rc = adj_build(&g, edges, n_edges, n)))
			goto out;
		refine(&g, n, cores, n_hosts, host_of, load);
	}
out:
	free(g.off);
	free(g.nb);
	free(order);
	free(load);
	return rc;
}

static int fail_at(char *err, size_t errlen, const char *file, const char *origin, uint32_t line, uint32_t col,
		   const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static int fail_at(char *err, size_t errlen, const char *file, const char *origin, uint32_t line, uint32_t col,
		   const char *fmt, ...)
{
	va_list ap;
	int n = origin ? snprintf(err, errlen, "%s: error: ", origin) :
		snprintf(err, errlen, "%s:%u:%u: error: ", file, line ? line : 1, col ? col : 1);
	if (n < 0 || (size_t)n >= errlen)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int place_map(const struct hosts *hosts, const struct plan_run *run, const char *const *names,
		     const enum scenario_role *roles, uint32_t *host_of, char *err, size_t errlen)
{
	size_t n = run->n_nodes;
	uint8_t *match = calloc(n ? n : 1, 1);
	int32_t *from = calloc(n ? n : 1, sizeof *from);
	uint32_t *load = calloc(hosts->n, sizeof *load);
	char why[256];
	int rc = 0;

	if (!match || !from || !load) {
		rc = -ENOMEM;
		snprintf(err, errlen, "%s:1:1: error: out of memory", hosts->file);
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		from[i] = -1;
	for (size_t m = 0; m < hosts->n_map; m++) {
		const struct hosts_map_entry *e = &hosts->map[m];
		memset(match, 0, n);
		int r = selector_match(e->nodes, names, roles, n, match, why, sizeof why);
		if (r < 0) {
			rc = fail_at(err, errlen, hosts->file, e->origin, e->line, e->col, "placement '%s': %s",
				     e->nodes, why);
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			if (!match[i])
				continue;
			if (from[i] >= 0) {
				rc = fail_at(err, errlen, hosts->file, e->origin, e->line, e->col,
					     "placement '%s' places node %s again (already on host '%s' by '%s', "
					     "line %u)", e->nodes, names[i], hosts->list[host_of[i]].name,
					     hosts->map[from[i]].nodes, hosts->map[from[i]].line);
				goto out;
			}
			from[i] = (int32_t)m;
			host_of[i] = e->host;
			load[e->host]++;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (from[i] < 0) {
			rc = fail_at(err, errlen, hosts->file, NULL, hosts->line, hosts->col,
				     "placement map places no host for node %s (run %s)", names[i], run->id);
			goto out;
		}
	for (size_t h = 0; h < hosts->n; h++)
		if (load[h] > hosts->list[h].cores) {
			rc = fail_at(err, errlen, hosts->file, NULL, hosts->list[h].line, hosts->list[h].col,
				     "placement puts %u nodes on host '%s', which has %u cores (run %s)",
				     load[h], hosts->list[h].name, hosts->list[h].cores, run->id);
			goto out;
		}
out:
	free(match);
	free(from);
	free(load);
	return rc;
}

struct placement *placement_new(const struct hosts *hosts, const struct plan_run *run, char *err, size_t errlen)
{
	struct placement *self = calloc(1, sizeof *self);
	size_t n = run->n_nodes;
	const char **names = calloc(n ? n : 1, sizeof *names);
	enum scenario_role *roles = calloc(n ? n : 1, sizeof *roles);
	uint32_t *cores = calloc(hosts->n, sizeof *cores);
	int rc = -ENOMEM;

	if (!self || !names || !roles || !cores || !(self->host_of = calloc(n ? n : 1, sizeof *self->host_of)))
		goto out;
	self->n_nodes = n;
	for (size_t i = 0; i < n; i++) {
		names[i] = run->nodes[i].name;
		roles[i] = run->nodes[i].role;
	}
	for (size_t h = 0; h < hosts->n; h++)
		cores[h] = hosts->list[h].cores;
	enum scenario_topology topo = run->scenario->workload == SCENARIO_WORKLOAD_LINKCHECK ?
		SCENARIO_TOPO_CENTRALIZED : run->scenario->topology.kind;
	if ((rc = placement_edges(topo, roles, n, &self->edges, &self->n_edges)))
		goto out;
	if (hosts->n_map) {
		if ((rc = place_map(hosts, run, names, roles, self->host_of, err, errlen)))
			goto done;
	} else {
		rc = placement_auto(self->edges, self->n_edges, roles, n, cores, hosts->n, self->host_of);
		if (rc == -ENOSPC) {
			fail_at(err, errlen, hosts->file, NULL, hosts->line, hosts->col,
				"run %s has %zu nodes but the hosts have %llu cores in all (a node needs a core)",
				run->id, n, (unsigned long long)hosts_total_cores(hosts));
			goto done;
		}
		if (rc)
			goto out;
	}
	self->n_cross = placement_cut(self->edges, self->n_edges, self->host_of);
out:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "%s:1:1: error: out of memory", hosts->file);
done:
	free(names);
	free(roles);
	free(cores);
	if (rc)
		placement_destroy(&self);
	return self;
}

int placement_print(FILE *out, const struct placement *self, const struct hosts *hosts,
		    const struct plan_run *run)
{
	fprintf(out, "  placement (%s, launcher %s):\n", hosts->n_map ? "map" : "auto",
		hosts_launcher_name(hosts->launcher));
	for (size_t h = 0; h < hosts->n; h++) {
		const struct hosts_host *hh = &hosts->list[h];
		size_t cnt = 0;
		for (size_t i = 0; i < self->n_nodes; i++)
			cnt += self->host_of[i] == h;
		fprintf(out, "    host %s %s (%s, %u cores): %zu nodes", hh->name, hh->address, hh->ssh, hh->cores, cnt);
		for (size_t i = 0; i < self->n_nodes; i++)
			if (self->host_of[i] == h)
				fprintf(out, " %s", run->nodes[i].name);
		fputc('\n', out);
	}
	fprintf(out, "    cross-host links: %zu of %zu\n", self->n_cross, self->n_edges);
	for (size_t k = 0; k < self->n_edges; k++) {
		const struct placement_edge *e = &self->edges[k];
		uint32_t ha = self->host_of[e->a], hb = self->host_of[e->b];
		if (ha != hb)
			fprintf(out, "      %s (%s) - %s (%s)\n", run->nodes[e->a].name, hosts->list[ha].name,
				run->nodes[e->b].name, hosts->list[hb].name);
	}
	return ferror(out) ? -EIO : 0;
}

int placement_plan(const struct hosts *hosts, const struct plan *plan, FILE *out, char *err, size_t errlen)
{
	for (size_t i = 0; i < plan_n_runs(plan); i++) {
		const struct plan_run *run = plan_run(plan, i);
		struct placement *p = placement_new(hosts, run, err, errlen);
		if (!p)
			return -EINVAL;
		int rc = 0;
		if (out) {
			fprintf(out, "run %s\n", run->id);
			rc = placement_print(out, p, hosts, run);
		}
		placement_destroy(&p);
		if (rc) {
			snprintf(err, errlen, "write: %s", strerror(-rc));
			return rc;
		}
	}
	return 0;
}

void placement_destroy(struct placement **self)
{
	if (!self || !*self)
		return;
	free((*self)->host_of);
	free((*self)->edges);
	free(*self);
	*self = NULL;
}
