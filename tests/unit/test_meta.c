/* Unit tests for meta.json: collectors/meta's reader (jansson, bounds, types, unsigned seeds)
 * and orchestrator/rundir's writer, each against the other and against the recorded fixture. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectors/meta.h"
#include "orchestrator/plan.h"
#include "orchestrator/rundir.h"
#include "orchestrator/scenario.h"
#include "tests/support/files.h"

static const char SCENARIO[] =
	"name: meta-test\n"
	"seed: 18446744073709551615\n"
	"target: 0.8\n"
	"stop: {time: 8s}\n"
	"data: {set: fashion-mnist, partition: {scheme: iid}}\n"
	"model: {kind: mlp, hidden: [32]}\n"
	"train: {batch: 64, lr: 0.05}\n"
	"topology: {kind: parameter-server}\n"
	"consistency: {barrier: bsp}\n"
	"workers: 2\n"
	"sweep: {model.hidden: [[128], [128, 64]], train.lr: [0.05, 0.1]}\n";

static void rm_rf(const char *dir)
{
	cr_assert_eq(support_rm_rf(dir), 0, "rm -rf %s", dir);
}

Test(meta, recorded_fixture_loads_exactly)
{
	struct run_meta m;
	char err[512];

	/* a seed above INT64_MAX, written by the former hand-written writer */
	cr_assert_eq(meta_load_dir("tests/data/sweep_small/consistency.barrier=bsp+rep=1", &m, err,
				   sizeof err), 0, "%s", err);
	cr_assert_str_eq(m.run_id, "consistency.barrier=bsp+rep=1");
	cr_assert_eq(m.seed, 13679457532755275413ULL);
	cr_assert_eq(m.repeat, 1);
	cr_assert_str_eq(m.backend, "nfq");
	cr_assert_str_eq(m.status, "complete");
	cr_assert(m.has_target);
	cr_assert_float_eq(m.target, 0.75, 1e-12);
	cr_assert_eq(m.nsweep, 1);
	cr_assert_str_eq(meta_sweep_value(&m, "consistency.barrier"), "bsp");
}

Test(meta, unsigned_seed_range)
{
	static const struct {
		const char *json;
		int rc;
		unsigned long long seed;
	} cases[] = {
		{ "{\"run_id\":\"a\",\"seed\":0}", 0, 0 },
		{ "{\"run_id\":\"a\",\"seed\":9223372036854775807}", 0, 9223372036854775807ULL },
		{ "{\"run_id\":\"a\",\"seed\":9223372036854775808}", 0, 9223372036854775808ULL },
		{ "{\"run_id\":\"a\", \"seed\" :\n 18446744073709551615 }", 0, 18446744073709551615ULL },
		{ "{\"run_id\":\"a\",\"seed\":18446744073709551616}", -EINVAL, 0 },
		{ "{\"run_id\":\"a\",\"seed\":-1}", -EINVAL, 0 },
		{ "{\"run_id\":\"a\",\"seed\":1.5}", -EINVAL, 0 },
		{ "{\"run_id\":\"a\",\"seed\":\"12\"}", -EINVAL, 0 },
		{ "{\"run_id\":\"a\",\"seed\":9223372036854775808.5}", -EINVAL, 0 },
		/* only a member's value is read as an unsigned integer, not a key or an element */
		{ "{18446744073709551615:1,\"run_id\":\"a\"}", -EINVAL, 0 },
		{ "{\"run_id\":\"a\",\"x\":[18446744073709551615]}", -EINVAL, 0 },
	};
	struct run_meta m;
	char err[256];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int rc = meta_parse(cases[i].json, strlen(cases[i].json), &m, err, sizeof err);

		cr_assert_eq(rc, cases[i].rc, "case %zu: %d (%s)", i, rc, rc ? err : "");
		if (rc == 0)
			cr_assert_eq(m.seed, cases[i].seed, "case %zu: %llu", i,
				     (unsigned long long)m.seed);
		else
			cr_assert_neq(err[0], '\0', "case %zu: no message", i);
	}
}

Test(meta, wrong_types_and_bounds)
{
	static const struct {
		const char *json, *expect;
	} cases[] = {
		{ "[]", "not a JSON object" },
		{ "{\"run_id\":7}", "run_id" },
		{ "{\"run_id\":\"\"}", "run_id" },
		{ "{\"run_id\":\"a\",\"backend\":1}", "\"backend\": not a string" },
		{ "{\"run_id\":\"a\",\"status\":null}", "\"status\": not a string" },
		{ "{\"run_id\":\"a\",\"repeat\":\"1\"}", "\"repeat\"" },
		{ "{\"run_id\":\"a\",\"repeat\":4294967296}", "\"repeat\"" },
		{ "{\"run_id\":\"a\",\"target\":\"0.8\"}", "\"target\": not a number" },
		{ "{\"run_id\":\"a\",\"sweep\":[1]}", "\"sweep\": not an object" },
		{ "{\"run_id\":\"a\",\"run_id\":\"b\"}", "duplicate" },
		{ "{\"run_id\":\"a\"} x", "offset" },
		{ "{\"run_id\":\"a\\u0000b\"}", "offset" },
	};
	struct run_meta m;
	char err[256], deep[200], many[2048];
	size_t used = 0;

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cr_assert_eq(meta_parse(cases[i].json, strlen(cases[i].json), &m, err, sizeof err),
			     -EINVAL, "case %zu accepted", i);
		cr_assert(strstr(err, cases[i].expect), "case %zu: \"%s\" lacks \"%s\"", i, err,
			  cases[i].expect);
		cr_assert_eq(m.run_id[0], '\0', "case %zu: output not cleared", i);
	}
	/* nesting: META_MAX_DEPTH levels pass, one more is refused before jansson sees it */
	used = (size_t)snprintf(deep, sizeof deep, "{\"run_id\":\"a\",\"x\":");
	for (int d = 1; d < META_MAX_DEPTH; d++)
		deep[used++] = '[';
	for (int d = 1; d < META_MAX_DEPTH; d++)
		deep[used++] = ']';
	deep[used++] = '}';
	cr_assert_eq(meta_parse(deep, used, &m, err, sizeof err), 0, "%s", err);
	memmove(deep + 1, deep, used);
	deep[0] = '[';
	deep[used + 1] = ']';
	cr_assert_eq(meta_parse(deep, used + 2, &m, err, sizeof err), -EINVAL);
	cr_assert(strstr(err, "nested deeper"), "%s", err);
	/* too many sweep keys */
	used = (size_t)snprintf(many, sizeof many, "{\"run_id\":\"a\",\"sweep\":{");
	for (int k = 0; k <= META_MAX_SWEEP; k++)
		used += (size_t)snprintf(many + used, sizeof many - used, "%s\"k%d\":%d", k ? "," : "", k, k);
	used += (size_t)snprintf(many + used, sizeof many - used, "}}");
	cr_assert_eq(meta_parse(many, used, &m, err, sizeof err), -EINVAL);
	cr_assert(strstr(err, "more than"), "%s", err);
	/* size bound */
	char *big = malloc(META_MAX_BYTES + 2);
	cr_assert_not_null(big);
	memset(big, ' ', META_MAX_BYTES + 1);
	memcpy(big, "{\"run_id\":\"a\"}", 14);
	cr_assert_eq(meta_parse(big, META_MAX_BYTES, &m, err, sizeof err), 0, "%s", err);
	cr_assert_eq(meta_parse(big, META_MAX_BYTES + 1, &m, err, sizeof err), -EINVAL);
	cr_assert(strstr(err, "larger than"), "%s", err);
	free(big);
}

Test(meta, sweep_values_as_text)
{
	const char *json = "{\"run_id\":\"r\",\"sweep\":{\"model.hidden\":\"[128, 64]\",\"n\":3,"
			   "\"x\":0.1,\"b\":false,\"z\":null,\"l\":[1, {\"a\": \"q\"}]}}";
	struct run_meta m;
	char err[256], label[512];

	cr_assert_eq(meta_parse(json, strlen(json), &m, err, sizeof err), 0, "%s", err);
	cr_assert_eq(m.nsweep, 6);
	cr_assert_str_eq(m.sweep_key[0], "model.hidden", "file order kept");
	cr_assert_str_eq(meta_sweep_value(&m, "model.hidden"), "[128, 64]");
	cr_assert_str_eq(meta_sweep_value(&m, "n"), "3");
	cr_assert_str_eq(meta_sweep_value(&m, "x"), "0.1");
	cr_assert_str_eq(meta_sweep_value(&m, "b"), "false");
	cr_assert_str_eq(meta_sweep_value(&m, "z"), "");
	cr_assert_str_eq(meta_sweep_value(&m, "l"), "[1,{\"a\":\"q\"}]");
	meta_sweep_label(&m, label, sizeof label);
	cr_assert(strncmp(label, "model.hidden=[128, 64], n=3", 27) == 0, "%s", label);
}

/* rundir writes what meta reads back: every run of a plan whose sweep values hold commas and
 * whose base seed is above INT64_MAX. The file is also checked for the fixed key order. */
Test(meta, rundir_writer_roundtrip)
{
	char dir[] = "/tmp/stalenet-meta-XXXXXX", path[600], err[512];
	struct scenario *sc;
	struct plan *p;
	size_t big_seeds = 0;

	cr_assert_not_null(support_mkdtemp(dir));
	sc = scenario_parse(SCENARIO, strlen(SCENARIO), "meta.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	p = plan_new(sc, err, sizeof err);
	cr_assert_not_null(p, "%s", err);
	cr_assert_eq(plan_n_runs(p), 4);
	for (size_t i = 0; i < plan_n_runs(p); i++) {
		const struct plan_run *r = plan_run(p, i);
		struct rundir_meta rm = { .backend = "kernel", .prefix = "sn1-", .origin_ns = 5,
					  .wall_start_ns = 1795389182316974415LL,
					  .duration_s = i ? 10.2954 : -1,
					  .status = i ? "complete" : NULL };
		struct run_meta m;
		char *text;
		size_t len = 0;
		FILE *f;

		snprintf(path, sizeof path, "%s/%s", dir, r->id);
		cr_assert_eq(rundir_prepare(path, r), 0);
		cr_assert_eq(rundir_write_meta(path, r, &rm), 0);
		cr_assert_eq(meta_load_dir(path, &m, err, sizeof err), 0, "%s", err);
		cr_assert_str_eq(m.run_id, r->id);
		cr_assert_eq(m.seed, r->seed);
		cr_assert_eq(m.repeat, (int)r->rep);
		cr_assert_str_eq(m.backend, "kernel");
		cr_assert_str_eq(m.status, i ? "complete" : "running");
		cr_assert(m.has_target);
		cr_assert_float_eq(m.target, 0.8, 1e-12);
		cr_assert_eq(m.nsweep, r->n_sweep_values);
		for (size_t a = 0; a < r->n_sweep_values; a++)
			cr_assert_str_eq(meta_sweep_value(&m, r->sweep_keys[a]), r->sweep_values[a]);
		/* the text: keys in the historical order, unsigned seeds as plain numbers */
		snprintf(path, sizeof path, "%s/%s/meta.json", dir, r->id);
		f = fopen(path, "r");
		cr_assert_not_null(f);
		text = calloc(1, 1 << 16);
		len = fread(text, 1, (1 << 16) - 1, f);
		fclose(f);
		cr_assert_gt(len, 0);
		char want[64];

		snprintf(want, sizeof want, "\"seed\": %llu,", (unsigned long long)r->seed);
		cr_assert(strstr(text, want), "%s", text);
		big_seeds += r->seed > (uint64_t)INT64_MAX;
		cr_assert(strstr(text, "\"scenario\": \"meta-test\""), "%s", text);
		const char *order[] = { "\"run_id\"", "\"run_index\"", "\"repeat\"", "\"seed\"",
					"\"base_seed\"", "\"scenario\"", "\"backend\"", "\"prefix\"",
					"\"target\"", "\"stalenet_version\"", "\"stalenet_commit\"",
					"\"kernel\"", "\"host\"", "\"start_utc\"", "\"wall_start_ns\"",
					"\"monotonic_origin_ns\"", "\"nodes\"", "\"sweep\"",
					"\"status\"" };
		const char *at = text;
		for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
			const char *hit = strstr(at, order[k]);

			cr_assert_not_null(hit, "%s missing or out of order:\n%s", order[k], text);
			at = hit;
		}
		cr_assert_eq(strstr(text, "\"duration_s\"") != NULL, i != 0);
		if (i)
			cr_assert(strstr(text, "\"duration_s\": 10.295,"), "%s", text);
		cr_assert(strstr(text, "\"start_utc\": \"2026-11-22T23:13:02Z\""), "%s", text);
		free(text);
	}
	cr_assert_gt(big_seeds, 0, "no seed above INT64_MAX was exercised");
	plan_destroy(&p);
	scenario_destroy(&sc);
	rm_rf(dir);
}
