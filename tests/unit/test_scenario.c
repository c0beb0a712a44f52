/* Valid scenarios: values land in the right fields with the right units, defaults hold, --set
 * overrides are validated like the file, and the re-emitted YAML parses to the same scenario. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orchestrator/scenario.h"
#include "tests/support/files.h"

static const char *full =
	"name: full\n"
	"seed: 42\n"
	"stop: {time: 2m, accuracy: 85%, steps: 10k}\n"
	"target: 0.8\n"
	"data: {set: mnist, path: /data/mnist, partition: {scheme: dirichlet, alpha: 0.3}}\n"
	"model: {kind: mlp, hidden: [256, 128]}\n"
	"train: {batch: 32, lr: 0.1, momentum: 0.9, weight_decay: 0.0001, lr_schedule: step,\n"
	"        lr_step_every: 500, lr_step_gamma: 0.5, blas_threads: 2}\n"
	"topology: {kind: parameter-server, servers: 1}\n"
	"consistency: {barrier: pssp, staleness: 4, sample: 3, backup: 1, weighting: inverse}\n"
	"workers: 8\n"
	"linkcheck: {probes: 50, interval: 20ms}\n"
	"eval: {every: 500ms}\n"
	"on_node_failure: continue\n"
	"network:\n"
	"  default: {delay: 20ms, jitter: 5ms, delay_distribution: normal, loss: 1%, rate: 100mbit,\n"
	"            queue_limit: 500}\n"
	"  links:\n"
	"    - {nodes: \"worker[0-3]\", delay: 200ms, up: {rate: 10mbit}, down: {loss: 0.5%}}\n"
	"    - {nodes: server0, gemodel: {p: 1%, r: 20%}, reorder: 5%, gap: 3}\n"
	"  timeline:\n"
	"    - {at: 60s, nodes: worker7, loss: 30%}\n"
	"  cc: reno\n"
	"  subnet: 10.20.0.0/16\n"
	"  mtu: 9000\n"
	"  precision: spin\n"
	"stragglers:\n"
	"  - {nodes: worker1, compute: {slowdown: 2.5, delay: {dist: gamma, shape: 2, scale: 10ms}}}\n"
	"  - {nodes: worker2, pause: {every: 30s, for: 5s}, crash: {at: 40s, restart: 50s}}\n"
	"  - {nodes: worker3, join: {at: 10s}, leave: {at: 100s}}\n";

static struct scenario *parse(const char *y)
{
	char err[SCENARIO_ERR_MAX] = "";
	struct scenario *sc = scenario_parse(y, strlen(y), "t.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	return sc;
}

Test(scenario, full_document)
{
	struct scenario *sc = parse(full);
	cr_expect_str_eq(sc->name, "full");
	cr_expect_eq(sc->seed, 42);
	cr_expect_eq(sc->stop_time_us, 120000000);
	cr_expect_float_eq(sc->stop_accuracy, 0.85, 1e-12);
	cr_expect_eq(sc->stop_steps, 10000);
	cr_expect_float_eq(sc->target, 0.8, 1e-12);
	cr_expect_eq(sc->data.set, SCENARIO_DATA_MNIST);
	cr_expect_str_eq(sc->data.path, "/data/mnist");
	cr_expect_eq(sc->data.scheme, SCENARIO_PART_DIRICHLET);
	cr_expect_float_eq(sc->data.alpha, 0.3, 1e-12);
	cr_expect_eq(sc->model.kind, SCENARIO_MODEL_MLP);
	cr_expect_eq(sc->model.n_hidden, 2);
	cr_expect_eq(sc->model.hidden[0], 256);
	cr_expect_eq(sc->model.hidden[1], 128);
	cr_expect_eq(sc->train.batch, 32);
	cr_expect_float_eq(sc->train.momentum, 0.9, 1e-12);
	cr_expect_eq(sc->train.lr_schedule, SCENARIO_LR_STEP);
	cr_expect_eq(sc->train.lr_step_every, 500);
	cr_expect_eq(sc->train.blas_threads, 2);
	cr_expect_eq(sc->topology.servers, 1);
	cr_expect_eq(sc->consistency.barrier, SCENARIO_BARRIER_PSSP);
	cr_expect_eq(sc->consistency.staleness, 4);
	cr_expect_eq(sc->consistency.sample, 3);
	cr_expect_eq(sc->consistency.backup, 1);
	cr_expect_eq(sc->consistency.weighting, SCENARIO_WEIGHT_INVERSE);
	cr_expect_eq(sc->workers, 8);
	cr_expect(sc->linkcheck);
	cr_expect_eq(sc->linkcheck_probes, 50);
	cr_expect_eq(sc->linkcheck_interval_us, 20000);
	cr_expect_eq(sc->eval_every_us, 500000);
	cr_expect_eq(sc->on_node_failure, SCENARIO_ON_FAILURE_CONTINUE);

	const struct link_params *d = &sc->network.up;
	cr_expect_eq(d->delay_us, 20000);
	cr_expect_eq(d->jitter_us, 5000);
	cr_expect_eq(d->dist, LINK_DIST_NORMAL);
	cr_expect_eq(d->loss_ppm, 10000);
	cr_expect_eq(d->rate_bps, 100000000);
	cr_expect_eq(d->limit_pkts, 500);
	cr_expect(d->set & LINK_F_DELAY && d->set & LINK_F_LOSS && d->set & LINK_F_RATE);
	cr_expect_eq(memcmp(&sc->network.up, &sc->network.down, sizeof *d), 0, "bare keys apply to both directions");

	cr_assert_eq(sc->network.n_links, 2);
	const struct scenario_link *l0 = &sc->network.links[0], *l1 = &sc->network.links[1];
	cr_expect_str_eq(l0->nodes, "worker[0-3]");
	cr_expect_eq(l0->pos.line, 19);
	cr_expect_eq(l0->up.delay_us, 200000);
	cr_expect_eq(l0->down.delay_us, 200000);
	cr_expect_eq(l0->up.rate_bps, 10000000);
	cr_expect(!(l0->down.set & LINK_F_RATE), "up-only key does not touch down");
	cr_expect_eq(l0->down.loss_ppm, 5000);
	cr_expect(!(l0->up.set & LINK_F_LOSS));
	cr_expect_eq(l1->up.loss_model, LINK_LOSS_GEMODEL);
	cr_expect_eq(l1->up.ge_p_ppm, 10000);
	cr_expect_eq(l1->up.ge_r_ppm, 200000);
	cr_expect_eq(l1->up.ge_1h_ppm, 1000000, "tc default 1-h = 100%%");
	cr_expect_eq(l1->up.ge_1k_ppm, 0);
	cr_expect_eq(l1->up.reorder_ppm, 50000);
	cr_expect_eq(l1->up.gap, 3);

	cr_assert_eq(sc->network.n_timeline, 1);
	cr_expect_eq(sc->network.timeline[0].at_us, 60000000);
	cr_expect_eq(sc->network.timeline[0].up.loss_ppm, 300000);
	cr_expect_str_eq(sc->network.cc, "reno");
	cr_expect_eq(sc->network.subnet, (10u << 24) | (20u << 16));
	cr_expect_eq(sc->network.prefix_len, 16);
	cr_expect_eq(sc->network.mtu, 9000);
	cr_expect_eq(sc->network.precision, SCENARIO_PRECISION_SPIN);

	cr_assert_eq(sc->n_stragglers, 3);
	const struct scenario_straggler *s0 = &sc->stragglers[0], *s1 = &sc->stragglers[1], *s2 = &sc->stragglers[2];
	cr_expect_float_eq(s0->slowdown, 2.5, 1e-12);
	cr_expect_eq(s0->delay_dist, SCENARIO_DIST_GAMMA);
	cr_expect_float_eq(s0->delay_a, 2, 1e-12);
	cr_expect_float_eq(s0->delay_b, 0.010, 1e-12);
	cr_expect_eq(s1->pause_every_us, 30000000);
	cr_expect_eq(s1->pause_for_us, 5000000);
	cr_expect_eq(s1->crash_at_us, 40000000);
	cr_expect_eq(s1->restart_at_us, 50000000);
	cr_expect(s1->set & SCENARIO_STRAG_RESTART);
	cr_expect_eq(s2->join_at_us, 10000000);
	cr_expect_eq(s2->leave_at_us, 100000000);
	scenario_destroy(&sc);
	cr_expect_null(sc);
	scenario_destroy(&sc); /* NULL is fine */
}

Test(scenario, tcp_knobs)
{
	struct scenario *sc = parse("stop: {steps: 100}\nnetwork:\n  mtu: 1400\n  tcp: {cc: reno, "
				    "slow_start_after_idle: off, ecn: passive, initial_cwnd: 20, "
				    "rmem: [4KiB, 128KiB, 6MiB], wmem: [8192, 64KiB, 4MiB]}\n");

	cr_expect_str_eq(sc->network.cc, "reno");
	cr_expect_eq(sc->network.mtu, 1400);
	cr_expect_eq(sc->network.tcp.slow_start_after_idle, 0);
	cr_expect_eq(sc->network.tcp.ecn, 2);
	cr_expect_eq(sc->network.tcp.initial_cwnd, 20);
	cr_expect_eq(sc->network.tcp.rmem[0], 4096);
	cr_expect_eq(sc->network.tcp.rmem[1], 131072);
	cr_expect_eq(sc->network.tcp.rmem[2], 6291456);
	cr_expect_eq(sc->network.tcp.wmem[0], 8192);
	cr_expect_eq(sc->network.tcp.wmem[2], 4194304);
	scenario_destroy(&sc);
	sc = parse("stop: {steps: 100}\nnetwork: {tcp: {slow_start_after_idle: on, ecn: true}}\n");
	cr_expect_eq(sc->network.tcp.slow_start_after_idle, 1);
	cr_expect_eq(sc->network.tcp.ecn, 1);
	scenario_destroy(&sc);
	/* --set reaches the knobs */
	const char *sets[] = { "network.tcp.ecn=off" };
	char err[SCENARIO_ERR_MAX];
	char path[] = "/tmp/stalenet-tcp-XXXXXX";
	int fd = support_mkstemp(path);
	const char text[] = "stop: {steps: 100}\nnetwork: {tcp: {ecn: on}}\n";

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
	close(fd);
	sc = scenario_load_with(path, sets, 1, err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	cr_expect_eq(sc->network.tcp.ecn, 0);
	scenario_destroy(&sc);
	unlink(path);
}

Test(scenario, defaults)
{
	struct scenario *sc = parse("stop: {steps: 100}\n");
	cr_expect_str_eq(sc->name, "t");
	cr_expect_eq(sc->seed, 1);
	cr_expect_eq(sc->workers, 4);
	cr_expect_eq(sc->topology.kind, SCENARIO_TOPO_PS);
	cr_expect_eq(sc->topology.servers, 1);
	cr_expect_eq(sc->consistency.barrier, SCENARIO_BARRIER_BSP);
	cr_expect_eq(sc->consistency.draw, SCENARIO_DRAW_CHECK);
	cr_expect_eq(sc->model.kind, SCENARIO_MODEL_SOFTMAX);
	cr_expect_eq(sc->data.set, SCENARIO_DATA_FASHION_MNIST);
	cr_expect_str_eq(sc->data.path, "/usr/share/datasets/fashion-mnist");
	cr_expect_str_eq(sc->network.cc, "cubic");
	cr_expect_eq(sc->network.subnet, (198u << 24) | (18u << 16));
	cr_expect_eq(sc->network.prefix_len, 15);
	cr_expect_eq(sc->network.tcp.slow_start_after_idle, -1, "the kernel's");
	cr_expect_eq(sc->network.tcp.ecn, -1);
	cr_expect_eq(sc->network.tcp.initial_cwnd, 0);
	cr_expect_eq(sc->network.tcp.rmem[2], 0);
	cr_expect_eq(sc->network.tcp.wmem[2], 0);
	cr_expect_eq(sc->network.up.set, 0);
	cr_expect_eq(sc->eval_every_us, 2000000);
	cr_expect_eq(sc->linkcheck_interval_us, 5000);
	cr_expect_eq(sc->sweep.repeat, 1);
	cr_expect_eq(sc->on_node_failure, SCENARIO_ON_FAILURE_STOP);
	scenario_destroy(&sc);

	sc = parse("stop: {steps: 100}\nmodel: {kind: mlp}\nlinkcheck: off\n");
	cr_expect_eq(sc->model.n_hidden, 1);
	cr_expect_eq(sc->model.hidden[0], 128);
	cr_expect(!sc->linkcheck);
	scenario_destroy(&sc);
	/* linkcheck workload needs no stop; centralized with epochs neither */
	sc = parse("workload: linkcheck\nworkers: 3\n");
	scenario_destroy(&sc);
	sc = parse("topology: {kind: centralized}\ntrain: {epochs: 2}\n");
	scenario_destroy(&sc);
	/* consistency.draw: kept whatever the barrier; crossing is p2p's rule */
	sc = parse("stop: {steps: 1}\nconsistency: {barrier: pssp, draw: crossing}\n");
	cr_expect_eq(sc->consistency.draw, SCENARIO_DRAW_CROSSING);
	cr_expect_str_eq(scenario_draw_name(sc->consistency.draw), "crossing");
	scenario_destroy(&sc);
	sc = parse("stop: {steps: 1}\nconsistency: {barrier: bsp, draw: check}\n");
	cr_expect_eq(sc->consistency.draw, SCENARIO_DRAW_CHECK);
	scenario_destroy(&sc);
	sc = parse("stop: {steps: 1}\ntopology: {kind: p2p}\nconsistency: {barrier: pbsp, draw: crossing}\n");
	cr_expect_eq(sc->consistency.draw, SCENARIO_DRAW_CROSSING);
	scenario_destroy(&sc);
}

Test(scenario, node_lists)
{
	struct scenario *sc = parse("stop: {steps: 1}\ntopology: {kind: p2p}\nworkers: 3\n");
	struct scenario_node *n;
	size_t cnt;
	cr_assert_eq(scenario_node_list(sc, &n, &cnt), 0);
	cr_assert_eq(cnt, 3);
	cr_expect_str_eq(n[2].name, "peer2");
	cr_expect_eq(n[2].role, SCENARIO_ROLE_PEER);
	free(n);
	scenario_destroy(&sc);

	sc = parse("stop: {steps: 1}\nnodes: [{name: ps, role: server}, {name: a, role: worker}, {name: b, role: worker}]\n");
	cr_expect_eq(sc->workers, 2);
	cr_expect_eq(sc->topology.servers, 1);
	cr_assert_eq(scenario_node_list(sc, &n, &cnt), 0);
	cr_assert_eq(cnt, 3);
	cr_expect_str_eq(n[0].name, "ps");
	cr_expect_eq(n[0].pos.line, 2);
	free(n);
	scenario_destroy(&sc);

	sc = parse("workload: linkcheck\nworkers: 2\n");
	cr_assert_eq(scenario_node_list(sc, &n, &cnt), 0);
	cr_expect_eq(cnt, 2);
	cr_expect_str_eq(n[1].name, "probe1");
	free(n);
	scenario_destroy(&sc);

	sc = parse("stop: {steps: 1}\ntopology: {kind: centralized}\n");
	cr_assert_eq(scenario_node_list(sc, &n, &cnt), 0);
	cr_expect_eq(cnt, 1);
	cr_expect_str_eq(n[0].name, "trainer");
	free(n);
	scenario_destroy(&sc);
}

/* stop.grace: 15 s unless set, 1 s .. 1 h, settable with --set, shown by the plan when not the
 * default; it alone is no stop condition, but the workloads that need none accept it. */
Test(scenario, stop_grace)
{
	char err[SCENARIO_ERR_MAX] = "";
	struct scenario *sc = parse("stop: {steps: 100}\n");
	cr_expect_eq(sc->stop_grace_us, 15000000);
	cr_expect_eq(SCENARIO_STOP_GRACE_US, 15000000);
	cr_expect_eq(scenario_set(sc, "stop.grace=30s", err, sizeof err), 0, "%s", err);
	cr_expect_eq(sc->stop_grace_us, 30000000);
	cr_expect_eq(sc->stop_steps, 100, "the other stop keys stay");
	cr_expect_neq(scenario_set(sc, "stop.grace=0s", err, sizeof err), 0);
	cr_expect(strstr(err, "--set stop.grace=0s: error: stop.grace 0s is below 1s") == err, "%s", err);
	cr_expect_eq(sc->stop_grace_us, 30000000, "a failed --set leaves the scenario unchanged");
	scenario_destroy(&sc);

	sc = parse("stop: {time: 10s, grace: 2s}\n");
	cr_expect_eq(sc->stop_grace_us, 2000000);
	cr_expect_eq(sc->stop_time_us, 10000000);
	scenario_destroy(&sc);
	sc = parse("stop: {accuracy: 0.5, grace: 1s}\n");
	cr_expect_eq(sc->stop_grace_us, 1000000, "the lower bound is allowed");
	scenario_destroy(&sc);
	sc = parse("stop: {steps: 5, grace: 1.5s}\n");
	cr_expect_eq(sc->stop_grace_us, 1500000);
	scenario_destroy(&sc);
	sc = parse("stop: {steps: 5, grace: 60m}\n");
	cr_expect_eq(sc->stop_grace_us, 3600000000ull, "the upper bound is allowed");
	scenario_destroy(&sc);
	sc = parse("workload: linkcheck\nworkers: 3\nstop: {grace: 3s}\n");
	cr_expect_eq(sc->stop_grace_us, 3000000);
	scenario_destroy(&sc);
	sc = parse("topology: {kind: centralized}\ntrain: {epochs: 2}\nstop: {grace: 4s}\n");
	cr_expect_eq(sc->stop_grace_us, 4000000);
	scenario_destroy(&sc);
}

Test(scenario, set_overrides)
{
	struct scenario *sc = parse(full);
	char err[SCENARIO_ERR_MAX] = "";
	cr_expect_eq(scenario_set(sc, "network.default.delay=5ms", err, sizeof err), 0, "%s", err);
	cr_expect_eq(sc->network.up.delay_us, 5000);
	cr_expect_eq(scenario_set(sc, "network.links.0.delay=7ms", err, sizeof err), 0, "%s", err);
	cr_expect_eq(sc->network.links[0].up.delay_us, 7000);
	cr_expect_eq(scenario_set(sc, "workers=12", err, sizeof err), 0, "%s", err);
	cr_expect_eq(sc->workers, 12);
	cr_expect_eq(scenario_set(sc, "model.hidden=[64,32,16]", err, sizeof err), 0, "%s", err);
	cr_expect_eq(sc->model.n_hidden, 3);
	cr_expect_eq(sc->model.hidden[2], 16);
	cr_expect_eq(scenario_set(sc, "consistency.backup=12", err, sizeof err), -EINVAL, "backup must be below workers");
	cr_expect(strstr(err, "--set consistency.backup=12: error: consistency.backup 12 must be below the number of "
			 "workers (12)") == err, "%s", err);
	cr_expect_eq(sc->consistency.barrier, SCENARIO_BARRIER_PSSP, "a failed --set leaves the scenario unchanged");
	/* a new key below an existing mapping */
	cr_expect_eq(scenario_set(sc, "train.epochs=3", err, sizeof err), 0, "%s", err);
	cr_expect_eq(sc->train.epochs, 3);

	const struct { const char *set, *msg; } bad[] = {
		{ "network.default.delay=90s", "--set network.default.delay=90s: error: delay 90s exceeds the limit of 60s" },
		{ "network.defualt.delay=5ms", "--set network.defualt.delay=5ms: error: unknown key 'defualt' in network (did you mean 'default'?)" },
		{ "network.links.5.delay=5ms", "--set network.links.5.delay=5ms: error: list index out of range" },
		{ "workers.count=3", "--set workers.count=3: error: a scalar value has no keys below it" },
		{ "workers", "--set workers: error: expected key.path=value" },
		{ "workers=", "--set workers=: error: workers is empty" },
		{ "network.links.0.nodes=worker99", "--set network.links.0.nodes=worker99: error: nodes 'worker99': unknown node 'worker99'" },
		{ "model.hidden=[1,", "--set model.hidden=[1,: error: value:" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		err[0] = 0;
		cr_expect_neq(scenario_set(sc, bad[i].set, err, sizeof err), 0, "%s", bad[i].set);
		cr_expect(!strncmp(err, bad[i].msg, strlen(bad[i].msg)), "expected '%s', got '%s'", bad[i].msg, err);
	}
	cr_expect_eq(sc->network.up.delay_us, 5000);
	scenario_destroy(&sc);
}

Test(scenario, load_with_sets)
{
	char path[] = "/tmp/stalenet-test-scn-XXXXXX", err[SCENARIO_ERR_MAX] = "";
	int fd = support_mkstemp(path);
	cr_assert_geq(fd, 0);
	FILE *f = fdopen(fd, "w");
	fputs("stop: {time: 10s}\nnetwork: {trace: tr.csv}\n", f);
	fclose(f);
	const char *sets[] = { "workers=6", "network.default.loss=2%" };
	struct scenario *sc = scenario_load_with(path, sets, 2, err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	cr_expect_eq(sc->workers, 6);
	cr_expect_eq(sc->network.down.loss_ppm, 20000);
	cr_expect_str_eq(sc->network.trace, "/tmp/tr.csv", "relative paths are relative to the scenario file");
	scenario_destroy(&sc);
	const char *bad[] = { "workers=0" };
	sc = scenario_load_with(path, bad, 1, err, sizeof err);
	cr_expect_null(sc);
	cr_expect(strstr(err, "--set workers=0: error: workers 0 out of range") == err, "%s", err);
	unlink(path);
}

/* Write the document back and parse it again: every field of the struct must survive. */
static void expect_same(const struct scenario *a, const struct scenario *b)
{
	cr_expect_str_eq(a->name, b->name);
	cr_expect_eq(a->seed, b->seed);
	cr_expect_eq(a->stop_time_us, b->stop_time_us);
	cr_expect_eq(a->workers, b->workers);
	cr_expect_eq(memcmp(&a->network.up, &b->network.up, sizeof a->network.up), 0);
	cr_expect_eq(memcmp(&a->network.down, &b->network.down, sizeof a->network.down), 0);
	cr_assert_eq(a->network.n_links, b->network.n_links);
	for (size_t i = 0; i < a->network.n_links; i++) {
		cr_expect_eq(memcmp(&a->network.links[i].up, &b->network.links[i].up, sizeof(struct link_params)), 0);
		cr_expect_eq(memcmp(&a->network.links[i].down, &b->network.links[i].down, sizeof(struct link_params)), 0);
	}
	cr_assert_eq(a->n_stragglers, b->n_stragglers);
	for (size_t i = 0; i < a->n_stragglers; i++) {
		cr_expect_eq(a->stragglers[i].set, b->stragglers[i].set);
		cr_expect_eq(a->stragglers[i].crash_at_us, b->stragglers[i].crash_at_us);
		cr_expect_float_eq(a->stragglers[i].delay_b, b->stragglers[i].delay_b, 1e-15);
	}
	cr_expect_eq(a->model.n_hidden, b->model.n_hidden);
	cr_expect_eq(a->consistency.sample, b->consistency.sample);
}

Test(scenario, write_yaml_round_trip)
{
	struct scenario *sc = parse(full);
	char err[SCENARIO_ERR_MAX] = "";
	cr_assert_eq(scenario_set(sc, "network.default.delay=5ms", err, sizeof err), 0, "%s", err);
	cr_assert_eq(scenario_set(sc, "name=with \"quotes\" and: colon", err, sizeof err), -EINVAL);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_eq(scenario_write_yaml(sc, f), 0);
	fclose(f);
	cr_expect(strstr(buf, "delay: 5ms") != NULL, "override is in the output:\n%s", buf);
	struct scenario *back = scenario_parse(buf, len, "t.yaml", err, sizeof err);
	cr_assert_not_null(back, "%s\n%s", err, buf);
	expect_same(sc, back);
	cr_expect_eq(back->network.up.delay_us, 5000);
	scenario_destroy(&back);
	free(buf);

	scenario_destroy(&sc);
}

/* Quoted strings stay strings through the re-emit (a quoted "off" is not a boolean). */
Test(scenario, quoting_survives)
{
	struct scenario *sc = parse("stop: {steps: 1}\ndescription: \"a: b # c\"\nname: \"x1\"\n");
	char *buf = NULL, err[SCENARIO_ERR_MAX];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_eq(scenario_write_yaml(sc, f), 0);
	fclose(f);
	struct scenario *back = scenario_parse(buf, len, "t.yaml", err, sizeof err);
	cr_assert_not_null(back, "%s\n%s", err, buf);
	cr_expect(strstr(buf, "\"a: b # c\"") != NULL, "%s", buf);
	scenario_destroy(&back);
	scenario_destroy(&sc);
	free(buf);
}

Test(scenario, enum_names)
{
	cr_expect_str_eq(scenario_barrier_name(SCENARIO_BARRIER_PSSP), "pssp");
	cr_expect_str_eq(scenario_topology_name(SCENARIO_TOPO_PS), "parameter-server");
	cr_expect_str_eq(scenario_role_name(SCENARIO_ROLE_CENTRAL), "central");
	cr_expect_str_eq(scenario_dist_name(SCENARIO_DIST_PARETO), "pareto");
	cr_expect_str_eq(scenario_partition_name(SCENARIO_PART_SIZES), "sizes");
}

/* Every scenario shipped in scenarios/ is valid. */
Test(scenario, shipped_scenarios)
{
	FILE *p = popen("ls scenarios/*.yaml 2>/dev/null", "r");
	char path[512], err[SCENARIO_ERR_MAX];
	int n = 0;
	cr_assert_not_null(p);
	while (fgets(path, sizeof path, p)) {
		path[strcspn(path, "\n")] = 0;
		struct scenario *sc = scenario_load_with(path, NULL, 0, err, sizeof err);
		cr_expect_not_null(sc, "%s", err);
		scenario_destroy(&sc);
		n++;
	}
	pclose(p);
	cr_expect_gt(n, 0, "run from the repository root");
}

/* --set sweep.<key>: the rest after "sweep." is one key of the sweep, dots included. A key
 * already swept is replaced in place (its zip group still names it), a new key is appended, and
 * a scenario without a sweep gets one. */
Test(scenario, set_sweep_keys)
{
	struct scenario *sc = parse("stop: {time: 10s}\nconsistency: {barrier: bsp}\nmodel: {kind: mlp, hidden: [16]}\n"
				    "sweep:\n  consistency.barrier: [bsp, asp]\n  train.batch: [32, 64]\n"
				    "  consistency.staleness: [1, 4]\n  zip: [train.batch, consistency.staleness]\n");
	char err[SCENARIO_ERR_MAX] = "";

	cr_assert_eq(sc->sweep.n_axes, 3);
	cr_assert_eq(scenario_set(sc, "sweep.consistency.barrier=[bsp, ssp, pssp]", err, sizeof err), 0, "%s", err);
	cr_assert_eq(sc->sweep.n_axes, 3);
	cr_assert_str_eq(sc->sweep.axes[0].key, "consistency.barrier", "replaced in place, not appended");
	cr_assert_eq(sc->sweep.axes[0].n_values, 3);
	cr_expect_str_eq(sc->sweep.axes[0].values[2], "pssp");
	cr_expect_eq(sc->consistency.barrier, SCENARIO_BARRIER_BSP, "the base value is untouched");
	/* a zipped key: the group keeps it, so the lists stay paired */
	cr_assert_eq(scenario_set(sc, "sweep.train.batch=[16, 128]", err, sizeof err), 0, "%s", err);
	cr_expect_eq(sc->sweep.axes[1].zip_group, 0);
	cr_expect_str_eq(sc->sweep.axes[1].values[1], "128");
	cr_expect_eq(scenario_set(sc, "sweep.train.batch=[16, 128, 256]", err, sizeof err), -EINVAL);
	cr_expect(strstr(err, "different lengths") != NULL, "%s", err);
	/* a new key (with a list element in its path) and the sweep's own keys */
	cr_assert_eq(scenario_set(sc, "sweep.model.hidden.0=[32, 64]", err, sizeof err), 0, "%s", err);
	cr_assert_eq(sc->sweep.n_axes, 4);
	cr_expect_str_eq(sc->sweep.axes[3].key, "model.hidden.0");
	cr_assert_eq(scenario_set(sc, "sweep.repeat=3", err, sizeof err), 0, "%s", err);
	cr_expect_eq(sc->sweep.repeat, 3);
	cr_assert_eq(scenario_set(sc, "sweep.zip=[[consistency.barrier, model.hidden.0]]", err, sizeof err), -EINVAL,
		     "3 barriers and 2 widths cannot be zipped");
	scenario_destroy(&sc);

	sc = parse("stop: {time: 10s}\n");
	cr_assert_eq(scenario_set(sc, "sweep.workers=[2, 4]", err, sizeof err), 0, "%s", err);
	cr_assert_eq(sc->sweep.n_axes, 1);
	cr_expect_str_eq(sc->sweep.axes[0].key, "workers");
	cr_expect_str_eq(sc->sweep.axes[0].values[1], "4");
	scenario_destroy(&sc);
}

/* The same through the CLI's entry, with --set order free: a sweep added by one --set and the
 * base value changed by another conflict whichever comes first. */
Test(scenario, load_with_sweep_sets)
{
	char path[] = "/tmp/stalenet-test-scn-XXXXXX", err[SCENARIO_ERR_MAX] = "";
	int fd = support_mkstemp(path);
	cr_assert_geq(fd, 0);
	FILE *f = fdopen(fd, "w");
	fputs("stop: {time: 10s}\nsweep: {consistency.barrier: [bsp, asp]}\n", f);
	fclose(f);
	const char *ok[] = { "sweep.consistency.barrier=[ssp, pssp]", "consistency.staleness=5" };
	struct scenario *sc = scenario_load_with(path, ok, 2, err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	cr_expect_str_eq(sc->sweep.axes[0].values[0], "ssp");
	cr_expect_eq(sc->consistency.staleness, 5);
	scenario_destroy(&sc);
	const char *bad[][2] = { { "workers=8", "sweep.workers=[2, 4]" }, { "sweep.workers=[2, 4]", "workers=8" } };
	for (size_t i = 0; i < 2; i++) {
		sc = scenario_load_with(path, bad[i], 2, err, sizeof err);
		cr_expect_null(sc);
		cr_expect_str_eq(err, "--set sweep.workers=[2, 4]: error: --set workers=8 conflicts with the sweep key "
				 "workers: the sweep sets it for every run; to change what the sweep sets use --set "
				 "'sweep.workers=[2,4]' with the values you want, or remove workers from the sweep");
		scenario_destroy(&sc);
	}
	unlink(path);
}
