/* orchestrator/nodeconf: see nodeconf.h. */
#include "orchestrator/nodeconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/selector.h"

/* Append name (comma-separated) to a growing list. */
static int list_add(char **list, size_t *len, const char *item)
{
	size_t n = strlen(item);
	char *p = realloc(*list, *len + n + 2);

	if (!p)
		return -1;
	*list = p;
	if (*len)
		p[(*len)++] = ',';
	memcpy(p + *len, item, n + 1);
	*len += n;
	return 0;
}

static void set_role_lists(struct kv *kv, const struct plan_run *run, const struct nodeconf_ctx *ctx,
			   const char *prefix, int want_workers)
{
	char *names = NULL, *addrs = NULL, *late = NULL, key[64];
	size_t nl = 0, al = 0, ll = 0, count = 0;

	for (size_t i = 0; i < run->n_nodes; i++) {
		enum scenario_role r = run->nodes[i].role;
		int is_worker = r == SCENARIO_ROLE_WORKER || r == SCENARIO_ROLE_PEER || r == SCENARIO_ROLE_DEVICE;

		if (r == SCENARIO_ROLE_CENTRAL || r == SCENARIO_ROLE_PROBE)
			continue;
		if (is_worker != want_workers)
			continue;
		list_add(&names, &nl, run->nodes[i].name);
		list_add(&addrs, &al, ctx->addrs && ctx->addrs[i] ? ctx->addrs[i] : "");
		/* Workers that join late (stragglers' join.at): a server does not wait for them
		 * before they do. Listed by index among the workers. */
		if (want_workers && (run->nodes[i].straggler.set & SCENARIO_STRAG_JOIN)) {
			char idx[24];

			snprintf(idx, sizeof idx, "%zu", count);
			list_add(&late, &ll, idx);
		}
		count++;
	}
	if (want_workers)
		kv_set(kv, "workers.late", late ? late : "");
	free(late);
	snprintf(key, sizeof key, "%s.count", prefix);
	kv_setf(kv, key, "%zu", count);
	snprintf(key, sizeof key, "%s.names", prefix);
	kv_set(kv, key, names ? names : "");
	snprintf(key, sizeof key, "%s.addrs", prefix);
	kv_set(kv, key, addrs ? addrs : "");
	free(names);
	free(addrs);
}

static double us_to_s(uint64_t us)
{
	return (double)us / 1e6;
}

/* The configured link of one direction, for the probe's verdict (link_params text form). */
static void set_link_check(struct kv *kv, const char *dir, const struct link_params *lp)
{
	char key[64], text[1024];

	snprintf(key, sizeof key, "linkcheck.%s", dir);
	if (link_params_format(lp, text, sizeof text) >= (int)sizeof text)
		text[0] = '\0';
	kv_set(kv, key, text);
}

/* fleet.drift.<k> for every device k (the registry recomputes on every device's share; a
 * device reads its own): the scenario's entries whose selector matches the device, in file
 * order, as node/fleet_drift's text form. */
static void set_fleet_drift(struct kv *kv, const struct plan_run *run)
{
	const struct scenario *sc = run->scenario;
	const char **names = calloc(run->n_nodes + 1, sizeof *names);
	enum scenario_role *roles = calloc(run->n_nodes + 1, sizeof *roles);
	uint8_t *match = calloc(run->n_nodes + 1, 1);
	char why[128], key[48];
	uint32_t k = 0;

	if (!names || !roles || !match)
		goto out;
	for (size_t j = 0; j < run->n_nodes; j++) {
		names[j] = run->nodes[j].name;
		roles[j] = run->nodes[j].role;
	}
	for (size_t j = 0; j < run->n_nodes; j++) {
		char *list = NULL;
		size_t len = 0;

		if (roles[j] != SCENARIO_ROLE_DEVICE)
			continue;
		for (size_t e = 0; e < sc->fleet.n_drift; e++) {
			const struct scenario_fleet_drift *d = &sc->fleet.drift[e];
			char item[160];
			int pos;

			memset(match, 0, run->n_nodes);
			if (selector_match(d->devices, names, roles, run->n_nodes, match, why, sizeof why) < 0 ||
			    !match[j])
				continue;
			pos = d->by_steps ? snprintf(item, sizeof item, "s%llu:", (unsigned long long)d->at_steps)
					  : snprintf(item, sizeof item, "t%.6f:", us_to_s(d->at_us));
			for (unsigned c = 0; c < 16; c++)
				if (d->classes >> c & 1)
					pos += snprintf(item + pos, sizeof item - (size_t)pos, "%u,", c);
			item[pos - 1] = '\0'; /* the last ',' */
			/* list_add joins with ','; entries are joined with ';' */
			if (len) {
				char *p = realloc(list, len + 2);

				if (!p)
					break;
				list = p;
				list[len++] = ';';
				list[len] = '\0';
			}
			{
				size_t n = strlen(item);
				char *p = realloc(list, len + n + 1);

				if (!p)
					break;
				list = p;
				memcpy(list + len, item, n + 1);
				len += n;
			}
		}
		snprintf(key, sizeof key, "fleet.drift.%u", k++);
		kv_set(kv, key, list ? list : "");
		free(list);
	}
out:
	free(names);
	free(roles);
	free(match);
}

struct kv *nodeconf_build(const struct plan_run *run, size_t i, const struct nodeconf_ctx *ctx,
			  const char *role_override)
{
	const struct scenario *sc = run->scenario;
	const struct plan_node *n = &run->nodes[i];
	const struct scenario_straggler *st = &n->straggler;
	struct kv *kv = kv_new();
	char buf[256];
	size_t len = 0;

	if (!kv)
		return NULL;
	kv_set(kv, "run.dir", ctx->run_dir);
	kv_set(kv, "run.id", run->id);
	kv_setf(kv, "run.origin_ns", "%lld", (long long)ctx->origin_ns);
	kv_setf(kv, "run.seed", "%llu", (unsigned long long)run->seed);
	if (ctx->ctl_endpoint)
		kv_set(kv, "ctl.endpoint", ctx->ctl_endpoint);
	kv_set(kv, "node.name", n->name);
	kv_set(kv, "node.role", role_override ? role_override : scenario_role_name(n->role));
	kv_setf(kv, "node.index", "%u", n->index);
	kv_setf(kv, "node.id", "%zu", i);
	if (ctx->addrs && ctx->addrs[i])
		kv_set(kv, "node.addr", ctx->addrs[i]);
	set_role_lists(kv, run, ctx, "workers", 1);
	set_role_lists(kv, run, ctx, "servers", 0);
	kv_setf(kv, "port.data", "%u", ctx->port_data);
	kv_setf(kv, "port.probe", "%u", ctx->port_probe);
	if (ctx->hub_addr)
		kv_set(kv, "hub.addr", ctx->hub_addr);

	kv_setf(kv, "stop.time", "%.6f", us_to_s(sc->stop_time_us));
	kv_setf(kv, "stop.accuracy", "%.6f", sc->stop_accuracy);
	kv_setf(kv, "stop.steps", "%llu", (unsigned long long)sc->stop_steps);
	kv_setf(kv, "target", "%.6f", sc->target);
	kv_setf(kv, "eval.every", "%.6f", us_to_s(sc->eval_every_us));

	kv_set(kv, "data.set", scenario_data_set_name(sc->data.set));
	kv_set(kv, "data.path", ctx->data_path ? ctx->data_path : (sc->data.path ? sc->data.path : ""));
	kv_set(kv, "data.partition.scheme", scenario_partition_name(sc->data.scheme));
	kv_setf(kv, "data.partition.per_node", "%u", sc->data.per_node);
	kv_setf(kv, "data.partition.alpha", "%.9g", sc->data.alpha);
	kv_setf(kv, "data.partition.zipf", "%.9g", sc->data.zipf);
	buf[0] = '\0';
	for (size_t k = 0; k < sc->data.n_sizes && len < sizeof buf - 24; k++)
		len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%.9g", k ? "," : "", sc->data.sizes[k]);
	if (sc->data.n_sizes)
		kv_set(kv, "data.partition.sizes", buf);

	kv_set(kv, "model.kind", scenario_model_name(sc->model.kind));
	len = 0;
	buf[0] = '\0';
	for (size_t k = 0; k < sc->model.n_hidden; k++)
		len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%u", k ? "," : "", sc->model.hidden[k]);
	kv_set(kv, "model.hidden", buf);

	kv_setf(kv, "train.batch", "%u", sc->train.batch);
	kv_setf(kv, "train.lr", "%.9g", sc->train.lr);
	kv_setf(kv, "train.momentum", "%.9g", sc->train.momentum);
	kv_setf(kv, "train.weight_decay", "%.9g", sc->train.weight_decay);
	kv_set(kv, "train.lr_schedule", scenario_lr_schedule_name(sc->train.lr_schedule));
	kv_setf(kv, "train.lr_step_every", "%llu", (unsigned long long)sc->train.lr_step_every);
	kv_setf(kv, "train.lr_step_gamma", "%.9g", sc->train.lr_step_gamma);
	kv_setf(kv, "train.lr_decay", "%.9g", sc->train.lr_decay);
	kv_setf(kv, "train.epochs", "%u", sc->train.epochs);
	kv_setf(kv, "train.blas_threads", "%u", sc->train.blas_threads);

	kv_set(kv, "topology.kind", scenario_topology_name(sc->topology.kind));
	kv_set(kv, "consistency.barrier", scenario_barrier_name(sc->consistency.barrier));
	kv_setf(kv, "consistency.staleness", "%u", sc->consistency.staleness);
	kv_setf(kv, "consistency.sample", "%u", sc->consistency.sample);
	kv_setf(kv, "consistency.backup", "%u", sc->consistency.backup);
	kv_set(kv, "consistency.weighting", scenario_weighting_name(sc->consistency.weighting));
	kv_set(kv, "consistency.draw", scenario_draw_name(sc->consistency.draw));
	kv_setf(kv, "consistency.local_steps", "%u", sc->consistency.local_steps);
	kv_setf(kv, "consistency.fanout", "%u", sc->consistency.fanout);
	/* Without a combine rule, peers gossip (plain mean of fanout replicas). */
	kv_set(kv, "consistency.combine",
	       sc->consistency.combine == SCENARIO_COMBINE_NONE && sc->topology.kind == SCENARIO_TOPO_P2P
		       ? "gossip" : scenario_combine_name(sc->consistency.combine));
	/* A worker silent this long counts as dead for the barriers (a crashed straggler must not
	 * stall BSP forever); live workers send keep-alives every second while they wait. */
	kv_setf(kv, "consistency.dead_after", "%d", NODECONF_DEAD_AFTER_S);
	kv_set(kv, "on_node_failure", sc->on_node_failure == SCENARIO_ON_FAILURE_STOP ? "stop" : "continue");

	if (sc->topology.kind == SCENARIO_TOPO_FLEET) {
		kv_set(kv, "fleet.strategy", scenario_fleet_strategy_name(sc->fleet.strategy));
		kv_setf(kv, "fleet.sync_steps", "%llu", (unsigned long long)sc->fleet.sync_steps);
		kv_setf(kv, "fleet.sync_s", "%.6f", us_to_s(sc->fleet.sync_us));
		kv_setf(kv, "fleet.snapshot_every", "%u", sc->fleet.snapshot_every);
		kv_setf(kv, "fleet.sparse_k", "%llu", (unsigned long long)sc->fleet.sparse_k);
		kv_setf(kv, "fleet.sparse_fraction", "%.9g", sc->fleet.sparse_ppm / 1e6);
		kv_set(kv, "fleet.base", scenario_fleet_base_name(sc->fleet.base));
		if (sc->fleet.base_file)
			kv_set(kv, "fleet.base_file", sc->fleet.base_file);
		kv_setf(kv, "fleet.base_steps", "%llu", (unsigned long long)sc->fleet.base_steps);
		kv_set(kv, "fleet.registry", scenario_fleet_registry_name(sc->fleet.registry));
		kv_setf(kv, "fleet.peers", "%u", sc->fleet.peers);
		if (sc->fleet.n_drift)
			set_fleet_drift(kv, run);
	}

	kv_setf(kv, "linkcheck.probes", "%u", sc->linkcheck_probes);
	kv_setf(kv, "linkcheck.interval", "%.6f", (double)sc->linkcheck_interval_us / 1e6);
	set_link_check(kv, "up", &n->up);
	set_link_check(kv, "down", &n->down);

	if (st->set & SCENARIO_STRAG_SLOWDOWN)
		kv_setf(kv, "straggler.slowdown", "%.9g", st->slowdown);
	if (st->set & SCENARIO_STRAG_DELAY) {
		kv_set(kv, "straggler.delay.dist", scenario_dist_name(st->delay_dist));
		kv_setf(kv, "straggler.delay.a", "%.9g", st->delay_a);
		kv_setf(kv, "straggler.delay.b", "%.9g", st->delay_b);
	}
	if (st->set & SCENARIO_STRAG_PAUSE) {
		kv_setf(kv, "straggler.pause.every", "%.6f", us_to_s(st->pause_every_us));
		kv_setf(kv, "straggler.pause.for", "%.6f", us_to_s(st->pause_for_us));
	}
	if ((st->set & SCENARIO_STRAG_TRACE) && st->trace)
		kv_set(kv, "straggler.trace", st->trace);
	return kv;
}
