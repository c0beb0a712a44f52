/* Plan expansion: sweep products, zip pairs, repeats, ids and seeds; per-node link merging and
 * the timeline, each against a direct computation. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/plan.h"

static struct scenario *parse(const char *y)
{
	char err[SCENARIO_ERR_MAX] = "";
	struct scenario *sc = scenario_parse(y, strlen(y), "p.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	return sc;
}

static struct plan *mkplan(const struct scenario *sc)
{
	char err[SCENARIO_ERR_MAX] = "";
	struct plan *p = plan_new(sc, err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	return p;
}

Test(plan, single_run)
{
	struct scenario *sc = parse("stop: {steps: 10}\nseed: 5\n");
	struct plan *p = mkplan(sc);
	cr_assert_eq(plan_n_runs(p), 1);
	const struct plan_run *r = plan_run(p, 0);
	cr_expect_str_eq(r->id, "rep=1");
	cr_expect_eq(r->seed, plan_derive_seed(5, 0));
	cr_expect_eq(r->scenario->seed, r->seed, "the run's scenario carries the derived seed");
	cr_expect_eq(r->n_nodes, 5);
	cr_expect_str_eq(r->nodes[0].name, "server0");
	cr_expect_str_eq(r->nodes[4].name, "worker3");
	cr_expect_eq(r->nodes[4].index, 3);
	cr_expect_str_eq(r->nodes[3].name, "worker2");
	cr_expect_null(plan_run(p, 1));
	plan_destroy(&p);
	cr_expect_null(p);
	scenario_destroy(&sc);
}

Test(plan, cartesian_product_and_repeat)
{
	struct scenario *sc = parse("stop: {steps: 10}\n"
				    "sweep: {consistency.barrier: [bsp, ssp, pssp], workers: [2, 4], repeat: 2}\n");
	struct plan *p = mkplan(sc);
	cr_assert_eq(plan_n_runs(p), 12);
	const char *barriers[] = { "bsp", "ssp", "pssp" };
	const unsigned workers[] = { 2, 4 };
	size_t i = 0;
	/* reference: nested loops, repetition outermost, first axis slowest */
	for (unsigned rep = 1; rep <= 2; rep++)
		for (int b = 0; b < 3; b++)
			for (int w = 0; w < 2; w++, i++) {
				const struct plan_run *r = plan_run(p, i);
				char id[128];
				snprintf(id, sizeof id, "consistency.barrier=%s+workers=%u+rep=%u", barriers[b], workers[w], rep);
				cr_expect_str_eq(r->id, id);
				cr_expect_str_eq(scenario_barrier_name(r->scenario->consistency.barrier), barriers[b]);
				cr_expect_eq(r->scenario->workers, workers[w]);
				cr_expect_eq(r->n_nodes, workers[w] + 1);
				cr_expect_eq(r->rep, rep);
				cr_expect_eq(r->index, i);
				cr_expect_eq(r->scenario->sweep.n_axes, 0, "a run has no sweep of its own");
			}
	/* seeds: deterministic, pairwise distinct */
	for (size_t a = 0; a < 12; a++) {
		cr_expect_eq(plan_run(p, a)->seed, plan_derive_seed(sc->seed, a));
		for (size_t b = a + 1; b < 12; b++)
			cr_expect_neq(plan_run(p, a)->seed, plan_run(p, b)->seed);
	}
	plan_destroy(&p);
	scenario_destroy(&sc);
}

Test(plan, zip_pairs)
{
	struct scenario *sc = parse("stop: {steps: 10}\nconsistency: {barrier: ssp}\n"
				    "sweep:\n"
				    "  consistency.staleness: [1, 2, 3]\n"
				    "  train.batch: [16, 32, 64]\n"
				    "  workers: [2, 3]\n"
				    "  zip: [consistency.staleness, train.batch]\n");
	struct plan *p = mkplan(sc);
	cr_assert_eq(plan_n_runs(p), 6);
	for (size_t i = 0; i < 6; i++) {
		const struct scenario *r = plan_run(p, i)->scenario;
		cr_expect_eq(r->train.batch, 16u << (r->consistency.staleness - 1), "paired values stay together");
		cr_expect_eq(r->consistency.staleness, 1 + i / 2);
		cr_expect_eq(r->workers, 2 + i % 2);
	}
	plan_destroy(&p);
	scenario_destroy(&sc);
}

Test(plan, sweep_of_lists_and_unsafe_ids)
{
	struct scenario *sc = parse("stop: {steps: 10}\nmodel: {kind: mlp}\n"
				    "sweep: {model.hidden: [[64], [128, 64]], network.default.delay: [5ms, 1.5s]}\n");
	struct plan *p = mkplan(sc);
	cr_assert_eq(plan_n_runs(p), 4);
	const struct plan_run *r = plan_run(p, 2);
	cr_expect_eq(r->scenario->model.n_hidden, 2);
	cr_assert_eq(r->n_sweep_values, 2);
	cr_expect_str_eq(r->sweep_keys[0], "model.hidden");
	cr_expect_str_eq(r->sweep_values[0], "[128,64]");
	cr_expect_str_eq(r->sweep_values[1], "5ms");
	cr_expect_eq(r->scenario->network.up.delay_us, 5000);
	cr_expect_str_eq(r->id, "model.hidden=_128_64_+network.default.delay=5ms+rep=1");
	for (size_t i = 0; i < plan_n_runs(p); i++)
		for (const char *c = plan_run(p, i)->id; *c; c++)
			cr_expect(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._,=+-", *c) != NULL);
	plan_destroy(&p);
	scenario_destroy(&sc);
}

/* An invalid combination only shows when the values meet: reported at plan time. */
Test(plan, invalid_combination)
{
	struct scenario *sc = parse("stop: {steps: 10}\nconsistency: {barrier: pbsp, sample: 1}\nworkers: 8\n"
				    "sweep: {workers: [8, 2], consistency.sample: [1, 3]}\n");
	char err[SCENARIO_ERR_MAX] = "";
	struct plan *p = plan_new(sc, err, sizeof err);
	cr_expect_null(p);
	cr_expect(strstr(err, "p.yaml:") == err, "%s", err);
	cr_expect(strstr(err, "must be below the number of workers") != NULL, "%s", err);
	scenario_destroy(&sc);
	/* a value that is invalid on its own is reported by the parser, at the value */
	const char *y = "stop: {steps: 10}\nconsistency: {barrier: pbsp, sample: 3}\nworkers: 8\nsweep: {workers: [8, 2]}\n";
	sc = scenario_parse(y, strlen(y), "p.yaml", err, sizeof err);
	cr_expect_null(sc);
	cr_expect(strstr(err, "p.yaml:2:38: error: consistency.sample 3 must be below the number of workers (2)") == err,
		  "%s", err);
}

/* Effective links: default, then every matching override in file order; up and down apart. */
Test(plan, link_merge_order)
{
	struct scenario *sc = parse(
		"stop: {steps: 10}\nworkers: 6\n"
		"network:\n"
		"  default: {delay: 10ms, loss: 1%, rate: 100mbit}\n"
		"  links:\n"
		"    - {nodes: \"worker[0-3]\", delay: 50ms}\n"
		"    - {nodes: \"worker[2-5]\", loss: 5%, up: {rate: 1mbit}}\n"
		"    - {nodes: worker3, down: {delay: 80ms}}\n");
	struct plan *p = mkplan(sc);
	const struct plan_run *r = plan_run(p, 0);
	/* reference, written out by hand for each worker */
	const struct { uint32_t up_delay, down_delay, loss; uint64_t up_rate; } want[6] = {
		{ 50000, 50000, 10000, 100000000 }, { 50000, 50000, 10000, 100000000 },
		{ 50000, 50000, 50000, 1000000 }, { 50000, 80000, 50000, 1000000 },
		{ 10000, 10000, 50000, 1000000 }, { 10000, 10000, 50000, 1000000 },
	};
	for (int w = 0; w < 6; w++) {
		const struct plan_node *n = &r->nodes[1 + w];
		cr_expect_eq(n->up.delay_us, want[w].up_delay, "worker%d up delay", w);
		cr_expect_eq(n->down.delay_us, want[w].down_delay, "worker%d down delay", w);
		cr_expect_eq(n->up.loss_ppm, want[w].loss, "worker%d loss", w);
		cr_expect_eq(n->down.loss_ppm, want[w].loss, "worker%d loss", w);
		cr_expect_eq(n->up.rate_bps, want[w].up_rate, "worker%d up rate", w);
		cr_expect_eq(n->down.rate_bps, 100000000, "worker%d down rate", w);
	}
	cr_expect_eq(r->nodes[0].up.delay_us, 10000, "server0 keeps the default");
	plan_destroy(&p);
	scenario_destroy(&sc);
}

Test(plan, timeline_sorted_and_cumulative)
{
	struct scenario *sc = parse(
		"stop: {steps: 10}\nworkers: 3\n"
		"network:\n"
		"  default: {delay: 10ms}\n"
		"  timeline:\n"
		"    - {at: 60s, nodes: worker1, loss: 30%}\n"
		"    - {at: 10s, nodes: \"worker[0-1]\", delay: 100ms}\n"
		"    - {at: 60s, nodes: worker1, up: {rate: 1mbit}}\n"
		"    - {at: 90s, loss: 0}\n");
	struct plan *p = mkplan(sc);
	const struct plan_run *r = plan_run(p, 0);
	cr_assert_eq(r->n_events, 2 + 1 + 1 + 4);
	uint64_t last = 0;
	for (size_t i = 0; i < r->n_events; i++) {
		cr_expect_geq(r->events[i].at_us, last);
		last = r->events[i].at_us;
	}
	/* 10 s: worker0 and worker1 get 100 ms */
	cr_expect_eq(r->events[0].at_us, 10000000);
	cr_expect_str_eq(r->nodes[r->events[0].node].name, "worker0");
	cr_expect_eq(r->events[1].up.delay_us, 100000);
	/* 60 s, file order kept: loss then rate, each on top of what came before */
	cr_expect_str_eq(r->nodes[r->events[2].node].name, "worker1");
	cr_expect_eq(r->events[2].up.loss_ppm, 300000);
	cr_expect_eq(r->events[2].up.delay_us, 100000);
	cr_expect_eq(r->events[3].up.rate_bps, 1000000);
	cr_expect_eq(r->events[3].up.loss_ppm, 300000);
	cr_expect_eq(r->events[3].down.rate_bps, 0);
	/* 90 s: everyone's loss back to 0, other fields kept */
	for (size_t i = 4; i < 8; i++) {
		cr_expect_eq(r->events[i].at_us, 90000000);
		cr_expect_eq(r->events[i].up.loss_ppm, 0);
	}
	cr_expect_eq(r->events[6].up.rate_bps, 1000000, "worker1 keeps its rate");
	cr_expect_eq(r->events[6].up.delay_us, 100000);
	plan_destroy(&p);
	scenario_destroy(&sc);
}

Test(plan, stragglers_merged_per_node)
{
	struct scenario *sc = parse(
		"stop: {steps: 10}\nworkers: 3\n"
		"stragglers:\n"
		"  - {nodes: workers, compute: {slowdown: 2}}\n"
		"  - {nodes: worker1, compute: {slowdown: 5}, crash: {at: 30s}}\n");
	struct plan *p = mkplan(sc);
	const struct plan_run *r = plan_run(p, 0);
	cr_expect_eq(r->nodes[0].straggler.set, 0, "the server is not a straggler");
	cr_expect_float_eq(r->nodes[0].straggler.slowdown, 1, 1e-12);
	cr_expect_float_eq(r->nodes[1].straggler.slowdown, 2, 1e-12);
	cr_expect_float_eq(r->nodes[2].straggler.slowdown, 5, 1e-12);
	cr_expect(r->nodes[2].straggler.set & SCENARIO_STRAG_CRASH);
	cr_expect_eq(r->nodes[2].straggler.crash_at_us, 30000000);
	cr_expect(!(r->nodes[3].straggler.set & SCENARIO_STRAG_CRASH));
	plan_destroy(&p);
	scenario_destroy(&sc);
}

Test(plan, print)
{
	struct scenario *sc = parse("stop: {time: 1m}\nworkers: 2\nnetwork: {default: {delay: 20ms, rate: 10mbit}, "
				    "timeline: [{at: 5s, nodes: worker0, loss: 2%}]}\n"
				    "sweep: {consistency.barrier: [bsp, asp]}\n");
	struct plan *p = mkplan(sc);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_eq(plan_print(f, p), 0);
	fclose(f);
	cr_expect(strstr(buf, "2 runs") != NULL, "%s", buf);
	cr_expect(strstr(buf, "consistency.barrier=asp+rep=1") != NULL, "%s", buf);
	cr_expect(strstr(buf, "worker1") != NULL, "%s", buf);
	cr_expect(strstr(buf, "delay 20ms rate 10mbit") != NULL, "%s", buf);
	cr_expect(strstr(buf, "at 5s") != NULL && strstr(buf, "loss 2%") != NULL, "%s", buf);
	cr_expect(strstr(buf, "grace") == NULL, "the default stop.grace is not shown: %s", buf);
	free(buf);
	plan_destroy(&p);
	scenario_destroy(&sc);

	/* a stop.grace other than the default is shown with the stop */
	sc = parse("stop: {time: 1m, grace: 2500ms}\nworkers: 2\n");
	p = mkplan(sc);
	buf = NULL;
	f = open_memstream(&buf, &len);
	cr_assert_eq(plan_print(f, p), 0);
	fclose(f);
	cr_expect(strstr(buf, "stop: time 60s (grace 2500ms)") != NULL, "%s", buf);
	free(buf);
	plan_destroy(&p);
	scenario_destroy(&sc);
}

Test(plan, derive_seed)
{
	cr_expect_neq(plan_derive_seed(0, 0), 0);
	cr_expect_eq(plan_derive_seed(42, 7), plan_derive_seed(42, 7));
	cr_expect_neq(plan_derive_seed(42, 7), plan_derive_seed(43, 7));
	cr_expect_neq(plan_derive_seed(42, 7), plan_derive_seed(42, 8));
}

/* --set sweep.<key> changes the plan exactly as the same sweep written in the file would. */
Test(plan, set_sweep_like_the_file)
{
	struct scenario *set = parse("stop: {steps: 10}\nsweep: {consistency.barrier: [bsp, asp]}\n");
	struct scenario *file = parse("stop: {steps: 10}\n"
				      "sweep: {consistency.barrier: [ssp, pssp, asp], workers: [2, 3], repeat: 2}\n");
	char err[SCENARIO_ERR_MAX] = "";

	cr_assert_eq(scenario_set(set, "sweep.consistency.barrier=[ssp, pssp, asp]", err, sizeof err), 0, "%s", err);
	cr_assert_eq(scenario_set(set, "sweep.workers=[2, 3]", err, sizeof err), 0, "%s", err);
	cr_assert_eq(scenario_set(set, "sweep.repeat=2", err, sizeof err), 0, "%s", err);
	struct plan *a = mkplan(set), *b = mkplan(file);
	cr_assert_eq(plan_n_runs(a), 12);
	cr_assert_eq(plan_n_runs(b), 12);
	for (size_t i = 0; i < 12; i++) {
		cr_expect_str_eq(plan_run(a, i)->id, plan_run(b, i)->id);
		cr_expect_eq(plan_run(a, i)->scenario->consistency.barrier, plan_run(b, i)->scenario->consistency.barrier);
		cr_expect_eq(plan_run(a, i)->scenario->workers, plan_run(b, i)->scenario->workers);
	}
	cr_expect_str_eq(plan_run(a, 2)->id, "consistency.barrier=pssp+workers=2+rep=1");
	plan_destroy(&a);
	plan_destroy(&b);
	scenario_destroy(&set);
	scenario_destroy(&file);
}
