/* orchestrator/plan: sweeps x repeats -> runs; per run the nodes, their links and the timeline.
 *
 * Run order: the repetition is the outermost loop (every configuration once, then again), so a
 * slow drift of the host during a long sweep spreads over all configurations instead of biasing
 * the last ones. Within one repetition the first sweep axis varies slowest, as nested loops
 * written in file order would; a zip group counts as one axis.
 *
 * Every run's scenario is rebuilt from the document with the run's values applied (like --set),
 * so a combination that is invalid only together (sample >= workers) is reported at plan time. */
#include "orchestrator/plan.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/cgroup.h"
#include "orchestrator/selector.h"
#include "orchestrator/units.h"

struct plan {
	struct plan_run *runs;
	size_t n_runs;
};

uint64_t plan_derive_seed(uint64_t base_seed, uint64_t idx)
{
	/* splitmix64 of the base, mixed with the index and finalised again */
	uint64_t z = base_seed + 0x9e3779b97f4a7c15ull * (idx + 1);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return z ? z : 0x9e3779b97f4a7c15ull;
}

static void free_run(struct plan_run *r)
{
	struct scenario *sc = (struct scenario *)r->scenario;
	scenario_destroy(&sc);
	free(r->nodes);
	free(r->cnodes);
	free(r->profiles);
	free(r->events);
	for (size_t a = 0; a < r->n_sweep_values; a++) {
		free(r->sweep_values ? (char *)r->sweep_values[a] : NULL);
		free(r->sweep_keys ? (char *)r->sweep_keys[a] : NULL);
	}
	free(r->sweep_values);
	free(r->sweep_keys);
}

void plan_destroy(struct plan **self)
{
	if (!self || !*self)
		return;
	for (size_t i = 0; i < (*self)->n_runs; i++)
		free_run(&(*self)->runs[i]);
	free((*self)->runs);
	free(*self);
	*self = NULL;
}

size_t plan_n_runs(const struct plan *self)
{
	return self->n_runs;
}

const struct plan_run *plan_run(const struct plan *self, size_t i)
{
	return i < self->n_runs ? &self->runs[i] : NULL;
}

static void straggler_merge(struct scenario_straggler *dst, const struct scenario_straggler *src)
{
	uint32_t s = src->set;
	if (s & SCENARIO_STRAG_SLOWDOWN) dst->slowdown = src->slowdown;
	if (s & SCENARIO_STRAG_DELAY) {
		dst->delay_dist = src->delay_dist;
		dst->delay_a = src->delay_a;
		dst->delay_b = src->delay_b;
	}
	if (s & SCENARIO_STRAG_TRACE) dst->trace = src->trace;
	if (s & SCENARIO_STRAG_PAUSE) {
		dst->pause_every_us = src->pause_every_us;
		dst->pause_for_us = src->pause_for_us;
	}
	if (s & SCENARIO_STRAG_CRASH) dst->crash_at_us = src->crash_at_us;
	if (s & SCENARIO_STRAG_RESTART) dst->restart_at_us = src->restart_at_us;
	if (s & SCENARIO_STRAG_JOIN) dst->join_at_us = src->join_at_us;
	if (s & SCENARIO_STRAG_LEAVE) dst->leave_at_us = src->leave_at_us;
	dst->set |= s;
	dst->nodes = src->nodes;
	dst->pos = src->pos;
}

static void resources_merge(struct scenario_resources *dst, const struct scenario_resources *src)
{
	if (src->set & SCENARIO_RES_CPU)
		dst->cpu = src->cpu;
	if (src->set & SCENARIO_RES_CPUS)
		memcpy(dst->cpus, src->cpus, sizeof dst->cpus);
	if (src->set & SCENARIO_RES_MEMORY)
		dst->memory_bytes = src->memory_bytes;
	dst->set |= src->set;
	dst->nodes = src->nodes;
	dst->pos = src->pos;
}

struct ev_order {
	uint64_t at_us;
	size_t idx;
};

static int cmp_ev(const void *a, const void *b)
{
	const struct ev_order *x = a, *y = b;
	if (x->at_us != y->at_us)
		return x->at_us < y->at_us ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int link_error(const struct scenario *sc, struct scenario_pos pos, const char *node, const char *dir,
		      const char *rule, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s:%u:%u: error: node %s, %s: %s", sc->file, pos.line ? pos.line : 1,
		 pos.col ? pos.col : 1, node, dir, rule);
	return -EINVAL;
}

/* The name scenario_node_list gives node index of role when the scenario lists no nodes. */
static void default_name(enum scenario_role role, uint32_t index, char *buf, size_t len)
{
	static const char *const prefix[] = { "server", "worker", "peer", "trainer", "probe", "registry",
					      "device" };
	bool single = role == SCENARIO_ROLE_CENTRAL || role == SCENARIO_ROLE_REGISTRY;

	if ((size_t)role >= sizeof prefix / sizeof *prefix)
		snprintf(buf, len, "?");
	else if (single)
		snprintf(buf, len, "%s", prefix[role]);
	else
		snprintf(buf, len, "%s%u", prefix[role], index);
}

/* The distinct start profiles of one run's nodes while they are resolved: prof[i] is node i's.
 * Each entry moves the nodes it matches from their profile to that profile merged with the
 * entry, so nodes matched by the same entries share one profile. */
struct interner {
	struct plan_profile *p;
	size_t n, cap;
	uint32_t *prof;                     /* per node */
	uint32_t *map;                      /* scratch: old profile -> new (or UINT32_MAX) */
	size_t n_nodes;
};

enum { MERGE_LINK, MERGE_STRAGGLER, MERGE_RESOURCES };

static int intern_apply(struct interner *in, const uint8_t *match, int kind, const void *entry)
{
	size_t before = in->n;
	uint32_t *map = realloc(in->map, (before + 1) * sizeof *map);

	if (!map)
		return -ENOMEM;
	in->map = map;
	for (size_t k = 0; k < before; k++)
		map[k] = UINT32_MAX;
	for (size_t i = 0; i < in->n_nodes; i++) {
		uint32_t old = in->prof[i];

		if (!match[i])
			continue;
		if (map[old] == UINT32_MAX) {
			if (in->n == in->cap) {
				size_t nc = in->cap * 2;
				struct plan_profile *np = realloc(in->p, nc * sizeof *np);
				if (!np)
					return -ENOMEM;
				in->p = np;
				in->cap = nc;
			}
			struct plan_profile *d = &in->p[in->n];
			*d = in->p[old];
			if (kind == MERGE_LINK) {
				const struct scenario_link *lk = entry;
				scenario_link_merge(&d->up, &lk->up);
				scenario_link_merge(&d->down, &lk->down);
			} else if (kind == MERGE_STRAGGLER) {
				straggler_merge(&d->straggler, entry);
			} else {
				resources_merge(&d->resources, entry);
			}
			map[old] = (uint32_t)in->n++;
		}
		in->prof[i] = map[old];
	}
	if (in->n == before)
		return 0;
	/* drop the profiles no node holds any more, keeping the order of the rest */
	size_t kept = 0;
	map = realloc(in->map, in->n * sizeof *map);
	if (!map)
		return -ENOMEM;
	in->map = map;
	memset(map, 0xff, in->n * sizeof *map);
	for (size_t i = 0; i < in->n_nodes; i++)
		map[in->prof[i]] = 0;
	for (size_t k = 0; k < in->n; k++)
		if (map[k] == 0) {
			if (kept != k)
				in->p[kept] = in->p[k];
			map[k] = (uint32_t)kept++;
		}
	for (size_t i = 0; i < in->n_nodes; i++)
		in->prof[i] = map[in->prof[i]];
	in->n = kept;
	return 0;
}

/* Nodes, links, stragglers and the timeline of one run: full per-node copies, or (compact) the
 * nodes' profile indices and the distinct profiles. */
static int resolve(struct plan_run *r, bool compact, char *err, size_t errlen)
{
	const struct scenario *sc = r->scenario;
	struct scenario_node *sn = NULL;
	const char **names = NULL;
	enum scenario_role *roles = NULL;
	uint8_t *match = NULL, *checked = NULL;
	struct link_params *cur_up = NULL, *cur_down = NULL;
	struct ev_order *order = NULL;
	struct interner in = { 0 };
	size_t n = 0;
	uint32_t per_role[SCENARIO_ROLE_DEVICE + 1] = { 0 };
	int rc = -ENOMEM;
	char why[256];
	const char *rule;

	if (scenario_node_list(sc, &sn, &n))
		goto oom;
	names = calloc(n + 1, sizeof *names);
	roles = calloc(n + 1, sizeof *roles);
	match = calloc(n + 1, 1);
	in.prof = calloc(n + 1, sizeof *in.prof);
	in.p = calloc(in.cap = 4, sizeof *in.p);
	if (!names || !roles || !match || !in.prof || !in.p)
		goto oom;
	in.n_nodes = n;
	in.n = 1;
	in.p[0].up = sc->network.up;
	in.p[0].down = sc->network.down;
	in.p[0].straggler.slowdown = 1;
	for (size_t i = 0; i < n; i++) {
		names[i] = sn[i].name;
		roles[i] = sn[i].role;
	}
	/* network.links in file order: later entries win per field */
	for (size_t l = 0; l < sc->network.n_links; l++) {
		const struct scenario_link *lk = &sc->network.links[l];
		memset(match, 0, n);
		if ((rc = selector_match(lk->nodes, names, roles, n, match, why, sizeof why)) < 0) {
			snprintf(err, errlen, "%s:%u:%u: error: nodes '%s': %s", sc->file, lk->pos.line, lk->pos.col,
				 lk->nodes, why);
			goto out;
		}
		if (intern_apply(&in, match, MERGE_LINK, lk) < 0)
			goto oom;
	}
	/* each profile checked once, at the first node holding it (the node an error names) */
	if (!(checked = calloc(in.n + 1, 1)))
		goto oom;
	for (size_t i = 0; i < n; i++) {
		const struct plan_profile *pr = &in.p[in.prof[i]];
		if (checked[in.prof[i]])
			continue;
		checked[in.prof[i]] = 1;
		if ((rule = scenario_link_rule(&pr->up))) {
			rc = link_error(sc, sc->network.n_links ? sc->network.links[sc->network.n_links - 1].pos :
					(struct scenario_pos){ 1, 1 }, names[i], "up", rule, err, errlen);
			goto out;
		}
		if ((rule = scenario_link_rule(&pr->down))) {
			rc = link_error(sc, sc->network.n_links ? sc->network.links[sc->network.n_links - 1].pos :
					(struct scenario_pos){ 1, 1 }, names[i], "down", rule, err, errlen);
			goto out;
		}
	}
	for (size_t s = 0; s < sc->n_stragglers; s++) {
		const struct scenario_straggler *st = &sc->stragglers[s];
		memset(match, 0, n);
		if ((rc = selector_match(st->nodes, names, roles, n, match, why, sizeof why)) < 0) {
			snprintf(err, errlen, "%s:%u:%u: error: nodes '%s': %s", sc->file, st->pos.line, st->pos.col,
				 st->nodes, why);
			goto out;
		}
		if (intern_apply(&in, match, MERGE_STRAGGLER, st) < 0)
			goto oom;
	}
	for (size_t s = 0; s < sc->n_resources; s++) {
		const struct scenario_resources *re = &sc->resources[s];
		memset(match, 0, n);
		if ((rc = selector_match(re->nodes, names, roles, n, match, why, sizeof why)) < 0) {
			snprintf(err, errlen, "%s:%u:%u: error: nodes '%s': %s", sc->file, re->pos.line, re->pos.col,
				 re->nodes, why);
			goto out;
		}
		if (intern_apply(&in, match, MERGE_RESOURCES, re) < 0)
			goto oom;
	}
	/* the timeline, sorted by time (stable), each event resolved to full parameters per node */
	size_t ne = sc->network.n_timeline, total = 0, cap = 0;
	if (ne) {
		if (!(order = calloc(ne, sizeof *order)))
			goto oom;
		for (size_t e = 0; e < ne; e++)
			order[e] = (struct ev_order){ sc->network.timeline[e].at_us, e };
		qsort(order, ne, sizeof *order, cmp_ev);
		cur_up = calloc(n + 1, sizeof *cur_up);
		cur_down = calloc(n + 1, sizeof *cur_down);
		if (!cur_up || !cur_down)
			goto oom;
		for (size_t i = 0; i < n; i++) {
			cur_up[i] = in.p[in.prof[i]].up;
			cur_down[i] = in.p[in.prof[i]].down;
		}
	}
	for (size_t k = 0; k < ne; k++) {
		const struct scenario_event *ev = &sc->network.timeline[order[k].idx];
		memset(match, 0, n);
		if ((rc = selector_match(ev->nodes, names, roles, n, match, why, sizeof why)) < 0) {
			snprintf(err, errlen, "%s:%u:%u: error: nodes '%s': %s", sc->file, ev->pos.line, ev->pos.col,
				 ev->nodes, why);
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			if (!match[i])
				continue;
			scenario_link_merge(&cur_up[i], &ev->up);
			scenario_link_merge(&cur_down[i], &ev->down);
			if ((rule = scenario_link_rule(&cur_up[i])) || (rule = scenario_link_rule(&cur_down[i]))) {
				rc = link_error(sc, ev->pos, names[i], scenario_link_rule(&cur_up[i]) ? "up" : "down",
						rule, err, errlen);
				goto out;
			}
			if (total == cap) {
				size_t nc = cap ? cap * 2 : 16;
				if (nc > 4000000) {
					snprintf(err, errlen, "%s:%u:%u: error: the timeline expands to more than 4000000 "
						 "node events", sc->file, ev->pos.line, ev->pos.col);
					rc = -EINVAL;
					goto out;
				}
				struct plan_event *ne2 = realloc(r->events, nc * sizeof *ne2);
				if (!ne2)
					goto oom;
				r->events = ne2;
				cap = nc;
			}
			r->events[total++] = (struct plan_event){ ev->at_us, (uint32_t)i, cur_up[i], cur_down[i] };
			r->n_events = total;
		}
	}
	/* compact only when every name is the one (role, index) makes (or the scenario holds it), and
	 * only for a parameter server: the simulator's p2p, ring and centralized drivers (at most a
	 * few thousand nodes) read the full per-node copies */
	if (sc->topology.kind != SCENARIO_TOPO_PS)
		compact = false;
	for (size_t i = 0; compact && !sc->nodes && i < n; i++) {
		char nm[SCENARIO_NODE_NAME_MAX];
		default_name(sn[i].role, per_role[sn[i].role]++, nm, sizeof nm);
		if (strcmp(nm, sn[i].name) != 0)
			compact = false;
	}
	if (compact && sc->nodes && sc->n_nodes != n)
		compact = false;
	memset(per_role, 0, sizeof per_role);
	r->n_nodes = n;
	if (compact) {
		struct plan_profile *shrunk = realloc(in.p, in.n * sizeof *shrunk);
		if (!(r->cnodes = calloc(n + 1, sizeof *r->cnodes)))
			goto oom;
		for (size_t i = 0; i < n; i++)
			r->cnodes[i] = (struct plan_cnode){ per_role[sn[i].role]++, in.prof[i], sn[i].role };
		r->profiles = shrunk ? shrunk : in.p;
		r->n_profiles = in.n;
		in.p = NULL;
	} else {
		if (!(r->nodes = calloc(n + 1, sizeof *r->nodes)))
			goto oom;
		for (size_t i = 0; i < n; i++) {
			struct plan_node *pn = &r->nodes[i];
			const struct plan_profile *pr = &in.p[in.prof[i]];
			memcpy(pn->name, sn[i].name, sizeof pn->name);
			pn->role = sn[i].role;
			pn->index = per_role[sn[i].role]++;
			pn->up = pr->up;
			pn->down = pr->down;
			pn->straggler = pr->straggler;
			pn->resources = pr->resources;
		}
	}
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "%s:1:1: error: out of memory", sc->file);
	rc = -ENOMEM;
out:
	free(sn);
	free(names);
	free(roles);
	free(match);
	free(checked);
	free(cur_up);
	free(cur_down);
	free(order);
	free(in.p);
	free(in.prof);
	free(in.map);
	return rc;
}

enum scenario_role plan_node_role(const struct plan_run *r, size_t i)
{
	return r->nodes ? r->nodes[i].role : r->cnodes[i].role;
}

const struct link_params *plan_node_up(const struct plan_run *r, size_t i)
{
	return r->nodes ? &r->nodes[i].up : &r->profiles[r->cnodes[i].profile].up;
}

const struct link_params *plan_node_down(const struct plan_run *r, size_t i)
{
	return r->nodes ? &r->nodes[i].down : &r->profiles[r->cnodes[i].profile].down;
}

const struct scenario_straggler *plan_node_straggler(const struct plan_run *r, size_t i)
{
	return r->nodes ? &r->nodes[i].straggler : &r->profiles[r->cnodes[i].profile].straggler;
}

const struct scenario_resources *plan_node_resources(const struct plan_run *r, size_t i)
{
	return r->nodes ? &r->nodes[i].resources : &r->profiles[r->cnodes[i].profile].resources;
}

const char *plan_node_name(const struct plan_run *r, size_t i, char *buf, size_t len)
{
	if (r->nodes)
		return r->nodes[i].name;
	if (r->scenario->nodes)
		return r->scenario->nodes[i].name;
	default_name(r->cnodes[i].role, r->cnodes[i].index, buf, len);
	return buf;
}

/* Keep [A-Za-z0-9._+-] (and ',' '=' between the pieces of an id); anything else becomes '_'. */
static void sanitize(char *s, bool separators)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      strchr("._+-", *s) || (separators && strchr(",=", *s))))
			*s = '_';
}

static struct plan *build(const struct scenario *sc, bool compact, char *err, size_t errlen)
{
	struct plan *p = calloc(1, sizeof *p);
	size_t n_axes = sc->sweep.n_axes;
	size_t *dim_len = calloc(n_axes + 1, sizeof *dim_len);     /* per dimension */
	int *axis_dim = calloc(n_axes + 1, sizeof *axis_dim);      /* axis -> dimension */
	size_t *digit = calloc(n_axes + 1, sizeof *digit);
	size_t *value_idx = calloc(n_axes + 1, sizeof *value_idx);
	size_t n_dims = 0, combos = 1, total = 0;

	if (!p || !dim_len || !axis_dim || !digit || !value_idx)
		goto oom;
	/* dimensions: each free axis, and each zip group once (at its first axis) */
	for (size_t a = 0; a < n_axes; a++) {
		const struct scenario_sweep_axis *ax = &sc->sweep.axes[a];
		int dim = -1;
		if (ax->zip_group >= 0)
			for (size_t b = 0; b < a; b++)
				if (sc->sweep.axes[b].zip_group == ax->zip_group)
					dim = axis_dim[b];
		if (dim < 0) {
			dim = (int)n_dims++;
			dim_len[dim] = ax->n_values;
			combos *= ax->n_values;
		}
		axis_dim[a] = dim;
		if (combos * sc->sweep.repeat > SCENARIO_MAX_RUNS) {
			snprintf(err, errlen, "%s:%u:%u: error: sweep expands to more than %d runs (limit "
				 "SCENARIO_MAX_RUNS)", sc->file, ax->pos.line, ax->pos.col, SCENARIO_MAX_RUNS);
			goto fail;
		}
	}
	total = combos * sc->sweep.repeat;
	if (!(p->runs = calloc(total, sizeof *p->runs)))
		goto oom;
	for (uint32_t rep = 1; rep <= sc->sweep.repeat; rep++) {
		memset(digit, 0, (n_axes + 1) * sizeof *digit);
		for (size_t c = 0; c < combos; c++) {
			struct plan_run *r = &p->runs[p->n_runs];
			size_t pos = 0;
			r->index = (uint32_t)p->n_runs;
			r->rep = rep;
			r->seed = plan_derive_seed(sc->seed, r->index);
			for (size_t a = 0; a < n_axes; a++) {
				const struct scenario_sweep_axis *ax = &sc->sweep.axes[a];
				value_idx[a] = digit[axis_dim[a]];
				char k[PLAN_RUN_ID_MAX], v[PLAN_RUN_ID_MAX];
				snprintf(k, sizeof k, "%s", ax->key);
				snprintf(v, sizeof v, "%s", ax->values[value_idx[a]]);
				sanitize(k, false);
				sanitize(v, false);
				/* '+' joins assignments: ids are also CSV fields and file names. */
				int w = snprintf(r->id + pos, sizeof r->id - pos, "%s=%s+", k, v);
				pos = w < 0 ? pos : pos + (size_t)w >= sizeof r->id ? sizeof r->id - 1 : pos + (size_t)w;
			}
			if (pos < sizeof r->id)
				snprintf(r->id + pos, sizeof r->id - pos, "rep=%u", rep);
			if (strlen(r->id) >= sizeof r->id - 1) {
				/* too long for a file name: keep a prefix and make it unique by index */
				snprintf(r->id + sizeof r->id - 24, 24, "...run=%u+rep=%u", r->index, rep);
			}
			sanitize(r->id, true);
			if (n_axes) {
				if (!(r->sweep_values = calloc(n_axes, sizeof *r->sweep_values)) ||
				    !(r->sweep_keys = calloc(n_axes, sizeof *r->sweep_keys)))
					goto oom;
				r->n_sweep_values = n_axes;
				for (size_t a = 0; a < n_axes; a++)
					if (!(r->sweep_values[a] = strdup(sc->sweep.axes[a].values[value_idx[a]])) ||
					    !(r->sweep_keys[a] = strdup(sc->sweep.axes[a].key)))
						goto oom;
			}
			r->scenario = scenario_sweep_run(sc, value_idx, r->seed, err, errlen);
			if (!r->scenario)
				goto fail;
			p->n_runs++;
			if (resolve(r, compact, err, errlen))
				goto fail;
			/* next combination: the last dimension varies fastest */
			for (size_t d = n_dims; d-- > 0;) {
				if (++digit[d] < dim_len[d])
					break;
				digit[d] = 0;
			}
		}
	}
	free(dim_len);
	free(axis_dim);
	free(digit);
	free(value_idx);
	return p;
oom:
	snprintf(err, errlen, "%s:1:1: error: out of memory", sc->file);
fail:
	free(dim_len);
	free(axis_dim);
	free(digit);
	free(value_idx);
	if (p && p->runs && p->n_runs < total)
		free_run(&p->runs[p->n_runs]); /* the run being built when it failed */
	plan_destroy(&p);
	return NULL;
}

struct plan *plan_new(const struct scenario *sc, char *err, size_t errlen)
{
	return build(sc, false, err, errlen);
}

struct plan *plan_new_compact(const struct scenario *sc, char *err, size_t errlen)
{
	return build(sc, true, err, errlen);
}

static const char *dist_name(enum link_dist d)
{
	static const char *const names[] = { "none", "uniform", "normal", "pareto", "paretonormal" };
	return (size_t)d < sizeof names / sizeof *names ? names[d] : "?";
}

static void fmt_link(const struct link_params *l, char *buf, size_t len)
{
	size_t pos = 0;
	char v[48];
#define ADD(...) do { int w_ = snprintf(buf + pos, len - pos, __VA_ARGS__); \
	if (w_ > 0) pos = pos + (size_t)w_ < len ? pos + (size_t)w_ : len - 1; } while (0)
	buf[0] = 0;
	if (l->delay_us) { units_format_time(l->delay_us, v, sizeof v); ADD(" delay %s", v); }
	if (l->jitter_us) { units_format_time(l->jitter_us, v, sizeof v); ADD(" jitter %s", v); }
	if (l->dist != LINK_DIST_NONE) ADD(" distribution %s", dist_name(l->dist));
	if (l->delay_corr_ppm) { units_format_prob(l->delay_corr_ppm, v, sizeof v); ADD(" delay_corr %s", v); }
	if (l->loss_model == LINK_LOSS_GEMODEL) {
		char a[16], b[16], c[16], d[16];
		units_format_prob(l->ge_p_ppm, a, sizeof a);
		units_format_prob(l->ge_r_ppm, b, sizeof b);
		units_format_prob(l->ge_1h_ppm, c, sizeof c);
		units_format_prob(l->ge_1k_ppm, d, sizeof d);
		ADD(" gemodel p %s r %s 1-h %s 1-k %s", a, b, c, d);
	} else if (l->loss_ppm) {
		units_format_prob(l->loss_ppm, v, sizeof v);
		ADD(" loss %s", v);
	}
	if (l->loss_corr_ppm) { units_format_prob(l->loss_corr_ppm, v, sizeof v); ADD(" loss_corr %s", v); }
	if (l->dup_ppm) { units_format_prob(l->dup_ppm, v, sizeof v); ADD(" duplicate %s", v); }
	if (l->reorder_ppm) { units_format_prob(l->reorder_ppm, v, sizeof v); ADD(" reorder %s", v); }
	if (l->gap) ADD(" gap %u", l->gap);
	if (l->corrupt_ppm) { units_format_prob(l->corrupt_ppm, v, sizeof v); ADD(" corrupt %s", v); }
	if (l->rate_bps) { units_format_rate(l->rate_bps, v, sizeof v); ADD(" rate %s", v); }
	if (l->limit_pkts) ADD(" limit %u", l->limit_pkts);
	if (!pos)
		ADD(" (unshaped)");
#undef ADD
}

static bool same_link(const struct link_params *a, const struct link_params *b)
{
	struct link_params x = *a, y = *b;
	x.set = y.set = 0;
	return !memcmp(&x, &y, sizeof x);
}

void plan_format_links(const struct link_params *up, const struct link_params *down, char *buf, size_t len)
{
	char u[512], d[512];
	fmt_link(up, u, sizeof u);
	if (same_link(up, down)) {
		snprintf(buf, len, "both:%s", u);
		return;
	}
	fmt_link(down, d, sizeof d);
	snprintf(buf, len, "up:%s | down:%s", u, d);
}

void plan_format_resources(const struct scenario_resources *r, char *buf, size_t len)
{
	char cpus[512] = "", mem[32] = "";
	int n = 0;

	if (len)
		buf[0] = '\0';
	if (r->set & SCENARIO_RES_CPUS)
		cgroup_format_cpus(r->cpus, cpus, sizeof cpus);
	if (r->set & SCENARIO_RES_MEMORY)
		cgroup_format_size(r->memory_bytes, mem, sizeof mem);
	if (r->set & SCENARIO_RES_CPU)
		n += snprintf(buf + n, len - (size_t)n, "cpu %g", r->cpu);
	if ((r->set & SCENARIO_RES_CPUS) && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, "%scpus %s", n ? " " : "", cpus);
	if ((r->set & SCENARIO_RES_MEMORY) && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, "%smemory %s", n ? " " : "", mem);
}

void plan_format_straggler(const struct scenario_straggler *s, char *buf, size_t len)
{
	size_t pos = 0;
	char a[32], b[32];
#define ADD(...) do { int w_ = snprintf(buf + pos, len - pos, __VA_ARGS__); \
	if (w_ > 0) pos = pos + (size_t)w_ < len ? pos + (size_t)w_ : len - 1; } while (0)
	buf[0] = 0;
	if (s->set & SCENARIO_STRAG_SLOWDOWN) ADD(" slowdown x%g", s->slowdown);
	if (s->set & SCENARIO_STRAG_DELAY) ADD(" delay %s(%g, %g)", scenario_dist_name(s->delay_dist), s->delay_a, s->delay_b);
	if (s->set & SCENARIO_STRAG_TRACE) ADD(" trace %s", s->trace);
	if (s->set & SCENARIO_STRAG_PAUSE) {
		units_format_time(s->pause_every_us, a, sizeof a);
		units_format_time(s->pause_for_us, b, sizeof b);
		ADD(" pause %s every %s", b, a);
	}
	if (s->set & SCENARIO_STRAG_CRASH) {
		units_format_time(s->crash_at_us, a, sizeof a);
		ADD(" crash at %s", a);
		if (s->set & SCENARIO_STRAG_RESTART) {
			units_format_time(s->restart_at_us, b, sizeof b);
			ADD(", restart at %s", b);
		}
	}
	if (s->set & SCENARIO_STRAG_JOIN) { units_format_time(s->join_at_us, a, sizeof a); ADD(" join at %s", a); }
	if (s->set & SCENARIO_STRAG_LEAVE) { units_format_time(s->leave_at_us, a, sizeof a); ADD(" leave at %s", a); }
#undef ADD
	if (buf[0] == ' ') /* every piece was added with its separator in front */
		memmove(buf, buf + 1, strlen(buf));
}

int plan_print(FILE *out, const struct plan *self)
{
	char buf[1200], t[32];
	if (!self->n_runs)
		return fprintf(out, "no runs\n") < 0 ? -EIO : 0;
	for (size_t i = 0; i < self->n_runs; i++)
		if (!self->runs[i].nodes && self->runs[i].n_nodes)
			return -EINVAL;     /* a compact plan: printed from a full one only */
	const struct scenario *first = self->runs[0].scenario;
	fprintf(out, "scenario %s (%s): %zu run%s\n", first->name, first->file, self->n_runs,
		self->n_runs == 1 ? "" : "s");
	for (size_t i = 0; i < self->n_runs; i++) {
		const struct plan_run *r = &self->runs[i];
		const struct scenario *sc = r->scenario;
		fprintf(out, "\nrun %zu/%zu  %s  seed %llu\n", i + 1, self->n_runs, r->id, (unsigned long long)r->seed);
		fprintf(out, "  workload  %s", sc->workload == SCENARIO_WORKLOAD_LINKCHECK ? "linkcheck" : "train");
		if (sc->workload == SCENARIO_WORKLOAD_TRAIN) {
			fprintf(out, ", stop:");
			if (sc->stop_time_us) {
				units_format_time(sc->stop_time_us, t, sizeof t);
				fprintf(out, " time %s", t);
			}
			if (sc->stop_accuracy > 0)
				fprintf(out, " accuracy %g", sc->stop_accuracy);
			if (sc->stop_steps)
				fprintf(out, " steps %llu", (unsigned long long)sc->stop_steps);
			if (sc->train.epochs)
				fprintf(out, " epochs %u", sc->train.epochs);
			if (sc->stop_grace_us != SCENARIO_STOP_GRACE_US) {
				units_format_time(sc->stop_grace_us, t, sizeof t);
				fprintf(out, " (grace %s)", t);
			}
			if (sc->target > 0)
				fprintf(out, ", target %g", sc->target);
		}
		fprintf(out, ", linkcheck %s", sc->linkcheck ? "on" : "off");
		if (sc->linkcheck)
			fprintf(out, " (%u probes)", sc->linkcheck_probes);
		fprintf(out, "\n  training  %s", scenario_topology_name(sc->topology.kind));
		if (sc->topology.kind == SCENARIO_TOPO_FLEET) {
			/* A fleet has no barrier: its devices sync to the registry on their own. */
			fprintf(out, " strategy %s, sync ", scenario_fleet_strategy_name(sc->fleet.strategy));
			if (sc->fleet.sync_steps)
				fprintf(out, "%llu steps", (unsigned long long)sc->fleet.sync_steps);
			else
				fprintf(out, "%.3gs", (double)sc->fleet.sync_us / 1e6);
			fprintf(out, ", snapshot every %u, base %s", sc->fleet.snapshot_every,
				scenario_fleet_base_name(sc->fleet.base));
			if (sc->fleet.registry == SCENARIO_FLEET_REGISTRY_PEERS)
				fprintf(out, ", registry peers (%u each)", sc->fleet.peers);
		} else {
			fprintf(out, ", barrier %s", scenario_barrier_name(sc->consistency.barrier));
			if (sc->consistency.barrier == SCENARIO_BARRIER_SSP || sc->consistency.barrier == SCENARIO_BARRIER_PSSP)
				fprintf(out, " staleness %u", sc->consistency.staleness);
			if (sc->consistency.barrier == SCENARIO_BARRIER_PBSP || sc->consistency.barrier == SCENARIO_BARRIER_PSSP)
				fprintf(out, " sample %u per %s", sc->consistency.sample,
					sc->topology.kind == SCENARIO_TOPO_P2P ? "crossing"
										: scenario_draw_name(sc->consistency.draw));
			if (sc->consistency.backup)
				fprintf(out, " backup %u", sc->consistency.backup);
		}
		fprintf(out, ", model %s", scenario_model_name(sc->model.kind));
		for (size_t h = 0; h < sc->model.n_hidden; h++)
			fprintf(out, "%s%u%s", h ? "," : " [", sc->model.hidden[h], h + 1 == sc->model.n_hidden ? "]" : "");
		fprintf(out, ", data %s %s, batch %u, lr %g\n", scenario_data_set_name(sc->data.set),
			scenario_partition_name(sc->data.scheme), sc->train.batch, sc->train.lr);
		struct in_addr_str { char s[20]; } sub;
		snprintf(sub.s, sizeof sub.s, "%u.%u.%u.%u", sc->network.subnet >> 24, (sc->network.subnet >> 16) & 255,
			 (sc->network.subnet >> 8) & 255, sc->network.subnet & 255);
		fprintf(out, "  network   %s/%u, cc %s", sub.s, sc->network.prefix_len, sc->network.cc);
		if (sc->network.mtu)
			fprintf(out, ", mtu %u", sc->network.mtu);
		if (sc->network.precision != SCENARIO_PRECISION_AUTO)
			fprintf(out, ", precision %s", sc->network.precision == SCENARIO_PRECISION_SPIN ? "spin" : "timer");
		if (sc->network.trace)
			fprintf(out, ", trace %s", sc->network.trace);
		if (sc->network.tcp.slow_start_after_idle >= 0)
			fprintf(out, ", slow_start_after_idle %s", sc->network.tcp.slow_start_after_idle ? "on" : "off");
		if (sc->network.tcp.ecn >= 0)
			fprintf(out, ", ecn %s", (const char *[]){ "off", "on", "passive" }[sc->network.tcp.ecn]);
		if (sc->network.tcp.initial_cwnd)
			fprintf(out, ", initial_cwnd %u", sc->network.tcp.initial_cwnd);
		if (sc->network.tcp.rmem[2])
			fprintf(out, ", rmem %llu %llu %llu", (unsigned long long)sc->network.tcp.rmem[0],
				(unsigned long long)sc->network.tcp.rmem[1], (unsigned long long)sc->network.tcp.rmem[2]);
		if (sc->network.tcp.wmem[2])
			fprintf(out, ", wmem %llu %llu %llu", (unsigned long long)sc->network.tcp.wmem[0],
				(unsigned long long)sc->network.tcp.wmem[1], (unsigned long long)sc->network.tcp.wmem[2]);
		fprintf(out, "\n  nodes (%zu):\n", r->n_nodes);
		for (size_t k = 0; k < r->n_nodes; k++) {
			const struct plan_node *n = &r->nodes[k];
			plan_format_links(&n->up, &n->down, buf, sizeof buf);
			fprintf(out, "    %-12s %-7s %s\n", n->name, scenario_role_name(n->role), buf);
			if (n->straggler.set) {
				plan_format_straggler(&n->straggler, buf, sizeof buf);
				fprintf(out, "    %-12s %-7s straggler: %s\n", "", "", buf);
			}
			if (n->resources.set) {
				plan_format_resources(&n->resources, buf, sizeof buf);
				fprintf(out, "    %-12s %-7s resources: %s\n", "", "", buf);
			}
		}
		if (r->n_events) {
			fprintf(out, "  timeline (%zu):\n", r->n_events);
			for (size_t e = 0; e < r->n_events; e++) {
				const struct plan_event *ev = &r->events[e];
				units_format_time(ev->at_us, t, sizeof t);
				plan_format_links(&ev->up, &ev->down, buf, sizeof buf);
				fprintf(out, "    at %-8s %-12s %s\n", t, r->nodes[ev->node].name, buf);
			}
		}
	}
	return ferror(out) ? -EIO : 0;
}
