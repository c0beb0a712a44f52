/* Unit tests for collectors/summary, collectors/schema and collectors/meta: hand-computed
 * summary values on a tiny run, header union across runs, schema checks on good and bad
 * traces. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectors/meta.h"
#include "collectors/schema.h"
#include "collectors/summary.h"
#include "tests/support/files.h"

static char *slurp(const char *path)
{
	return support_slurp(path, NULL);
}

static void rm_rf(const char *dir)
{
	cr_assert_eq(support_rm_rf(dir), 0);
}

static void put(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f, "open %s", path);
	fputs(text, f);
	fclose(f);
}

/* A run with 3 workers, one server, two evaluating nodes; values chosen to compute by hand. */
static void make_run(const char *dir, const char *id, const char *barrier, int repeat)
{
	char meta[512], sub[512];

	mkdir(dir, 0755);
	snprintf(sub, sizeof sub, "%s/nodes", dir);
	mkdir(sub, 0755);
	snprintf(meta, sizeof meta,
		 "{\"run_id\": \"%s\", \"seed\": 7, \"backend\": \"nfq\", \"repeat\": %d, \"status\": \"complete\",\n"
		 " \"target\": 0.8, \"extra\": [1, {\"a\": null}],\n"
		 " \"sweep\": {\"consistency.barrier\": \"%s\", \"workers\": 3}}\n",
		 id, repeat, barrier);
	put(dir, "meta.json", meta);
	put(dir, "nodes/worker0.csv", TRACE_HEADER_NODE "\n"
		"1.0,worker0,1,0.5,0.5,,0,2.0,100,50,0\n"
		"2.0,worker0,2,0.5,0.5,,1,1.5,100,50,1\n"
		"3.0,worker0,3,0.5,0.5,,2,1.2,100,50,0\n");
	put(dir, "nodes/worker1.csv", TRACE_HEADER_NODE "\n"
		"1.5,worker1,1,1.0,0.0,,0,2.0,200,50,0\n"
		"3.0,worker1,2,1.0,0.0,,1,1.6,200,50,0\n");
	put(dir, "nodes/worker2.csv", TRACE_HEADER_NODE "\n"
		"2.0,worker2,1,2.0,0.0,,0,2.1,300,50,2\n");
	/* staleness 0..99 once each plus one 500: 101 values; nearest-rank p99 = ceil(99.99) =
	 * 100th smallest = 99; mean = (4950 + 500) / 101 */
	{
		char *big = malloc(1 << 16);
		size_t used = 0;

		used += (size_t)sprintf(big + used, "%s\n", TRACE_HEADER_NODE);
		for (int i = 0; i < 100; i++)
			used += (size_t)sprintf(big + used, "%d.5,server0,%d,0.001,0,%d,%d,,10,0,0\n",
						i / 10, i + 1, i, i);
		used += (size_t)sprintf(big + used, "10,server0,101,0.001,0,500,100,,10,0,0\n");
		put(dir, "nodes/server0.csv", big);
		free(big);
	}
	/* run accuracy = mean of both nodes' latest once both reported:
	 * t=2: 0.5 (a only) -> not yet; t=3: (0.5+0.7)/2 = 0.6; t=4: (0.9+0.7)/2 = 0.8 -> target;
	 * t=5: (0.9+0.6)/2 = 0.75 final; best 0.8 */
	put(dir, "eval.csv", TRACE_HEADER_EVAL "\n"
		"2,server0,10,0.1,640,0.5,1.0,\n"
		"3,peer1,12,0.1,640,0.7,1.0,\n"
		"4,server0,20,0.2,1280,0.9,0.5,0.6\n"
		"5,peer1,22,0.2,1280,0.6,0.9,\n");
	put(dir, "links.csv", TRACE_HEADER_LINKS "\n"
		"1,worker0,up,10,1000,1,0,0,0.010,0.120,0.300\n"
		"1,worker0,down,10,1000,0,0,0,,,\n"
		"2,worker0,up,20,2000,4,0,0,-0.002,0.040,0.050\n"
		"2,worker0,down,20,2000,2,0,3,0.100,0.700,1.900\n");
}

Test(summary, median_and_percentile)
{
	double a[] = { 5, 1, 3 }, b[] = { 4, 1, 3, 2 }, c[100];

	cr_assert_float_eq(summary_median(a, 3), 3.0, 1e-12);
	cr_assert_float_eq(summary_median(b, 4), 2.5, 1e-12);
	cr_assert(isnan(summary_median(a, 0)));
	for (int i = 0; i < 100; i++)
		c[i] = 100 - i; /* 1..100 */
	cr_assert_float_eq(summary_percentile(c, 100, 99), 99.0, 1e-12);
	cr_assert_float_eq(summary_percentile(c, 100, 100), 100.0, 1e-12);
	cr_assert_float_eq(summary_percentile(c, 100, 50), 50.0, 1e-12);
	cr_assert_float_eq(summary_percentile(c, 1, 99), c[0], 1e-12);
}

Test(summary, hand_computed_run)
{
	char dir[] = "/tmp/stalenet-sum-XXXXXX", run[600], err[512];
	struct summary_row row;

	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(run, sizeof run, "%s/r0", dir);
	make_run(run, "bsp-r0", "bsp", 0);
	cr_assert_eq(trace_schema_check_dir(run, err, sizeof err), 0, "%s", err);
	cr_assert_eq(summary_compute(run, &row, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(row.meta.run_id, "bsp-r0");
	cr_assert_eq(row.meta.nsweep, 2);
	cr_assert_float_eq(row.final_accuracy, 0.75, 1e-12);
	cr_assert_float_eq(row.best_accuracy, 0.8, 1e-12);
	cr_assert_float_eq(row.time_to_target_s, 4.0, 1e-12);
	cr_assert_eq(row.workers, 3);
	cr_assert_eq(row.total_steps, 6);
	cr_assert_float_eq(row.steps_min, 1, 1e-12);
	cr_assert_float_eq(row.steps_median, 2, 1e-12);
	cr_assert_float_eq(row.steps_max, 3, 1e-12);
	/* wait 1.5, compute 1.5 + 2.0 + 2.0 = 5.5 -> 1.5 / 7 */
	cr_assert_float_eq(row.wait_fraction, 1.5 / 7.0, 1e-12);
	cr_assert_float_eq(row.staleness_mean, (4950.0 + 500.0) / 101.0, 1e-9);
	cr_assert_float_eq(row.staleness_p99, 99, 1e-12);
	/* bytes_tx: 300 + 400 + 300 + 101 * 10 */
	cr_assert_eq(row.bytes_moved, 2010);
	cr_assert_eq(row.bad_frames, 3);
	cr_assert(row.has_links);
	cr_assert_eq(row.link_drops, 6);
	/* the largest late_p99_ms of any row; empty fields are no sample */
	cr_assert_float_eq(row.late_p99_worst_ms, 0.7, 1e-12);
	rm_rf(dir);
}

Test(summary, append_union_header_and_rebuild)
{
	char dir[] = "/tmp/stalenet-sum-XXXXXX", run[600], path[600], err[512];
	struct summary_row a, b;
	char *text;

	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(run, sizeof run, "%s/bsp-r0", dir);
	make_run(run, "bsp-r0", "bsp", 0);
	cr_assert_eq(summary_compute(run, &a, err, sizeof err), 0, "%s", err);
	snprintf(run, sizeof run, "%s/asp-r1", dir);
	make_run(run, "asp-r1", "asp", 1);
	/* this run adds a sweep key the first lacks */
	put(run, "meta.json", "{\"run_id\":\"asp-r1\",\"seed\":8,\"backend\":\"kernel\",\"repeat\":1,\"status\":\"failed\","
			      "\"sweep\":{\"consistency.barrier\":\"asp\",\"train.lr\":0.05}}");
	put(run, "scenario.yaml", "name: x\ntarget: 0.7\n");
	cr_assert_eq(summary_compute(run, &b, err, sizeof err), 0, "%s", err);
	cr_assert(b.meta.has_target);
	cr_assert_float_eq(b.time_to_target_s, 4.0, 1e-12); /* 0.8 >= 0.7 first at t=4 */
	snprintf(path, sizeof path, "%s/summary.csv", dir);
	cr_assert_eq(summary_append(path, &a, err, sizeof err), 0, "%s", err);
	cr_assert_eq(summary_append(path, &b, err, sizeof err), 0, "%s", err);
	cr_assert_eq(summary_append(path, &b, err, sizeof err), 0, "%s", err); /* replaces */
	text = slurp(path);
	cr_assert_str_eq(text,
		"consistency.barrier,workers,train.lr," SUMMARY_FIXED_HEADER "\n"
		"bsp,3,,bsp-r0,0,7,nfq,0.7500,0.8000,4.000,6,1,2,3,0.2143,53.960,99,2010,3,6,0.700,complete,,,,,\n"
		"asp,,0.05,asp-r1,1,8,kernel,0.7500,0.8000,4.000,6,1,2,3,0.2143,53.960,99,2010,3,6,0.700,failed,,,,,\n");
	free(text);
	cr_assert_eq(summary_rebuild(dir, err, sizeof err), 2, "%s", err);
	text = slurp(path);
	/* name order: asp-r1 first; keys in order of first appearance */
	cr_assert_str_eq(text,
		"consistency.barrier,train.lr,workers," SUMMARY_FIXED_HEADER "\n"
		"asp,0.05,,asp-r1,1,8,kernel,0.7500,0.8000,4.000,6,1,2,3,0.2143,53.960,99,2010,3,6,0.700,failed,,,,,\n"
		"bsp,,3,bsp-r0,0,7,nfq,0.7500,0.8000,4.000,6,1,2,3,0.2143,53.960,99,2010,3,6,0.700,complete,,,,,\n");
	free(text);
	rm_rf(dir);
}

Test(summary, empty_run_leaves_fields_empty)
{
	char dir[] = "/tmp/stalenet-sum-XXXXXX", err[512], path[600];
	struct summary_row row;
	char *text;

	cr_assert_not_null(support_mkdtemp(dir));
	put(dir, "meta.json", "{\"run_id\":\"x\"}");
	cr_assert_eq(summary_compute(dir, &row, err, sizeof err), 0, "%s", err);
	cr_assert(isnan(row.final_accuracy));
	cr_assert_eq(row.workers, 0);
	snprintf(path, sizeof path, "%s/s.csv", dir);
	cr_assert_eq(summary_append(path, &row, err, sizeof err), 0, "%s", err);
	text = slurp(path);
	cr_assert_str_eq(text, SUMMARY_FIXED_HEADER "\nx,0,0,,,,,0,,,,,,,0,0,,,,,,,,\n");
	free(text);
	rm_rf(dir);
}

Test(meta, parse_and_reject)
{
	struct run_meta m;
	char err[256];
	const char *ok = "{\"run_id\":\"a\\\"b\",\"seed\":123456789012,\"repeat\":2,"
			 "\"sweep\":{\"k.x\":true,\"k.y\":-1.5e3}}";

	cr_assert_eq(meta_parse(ok, strlen(ok), &m, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(m.run_id, "a\"b");
	cr_assert_eq(m.seed, 123456789012ULL);
	cr_assert_eq(m.repeat, 2);
	cr_assert_str_eq(meta_sweep_value(&m, "k.x"), "true");
	/* a number's text is its value's shortest form, not its spelling */
	cr_assert_str_eq(meta_sweep_value(&m, "k.y"), "-1500");
	cr_assert_null(meta_sweep_value(&m, "k.z"));
	const char *bad[] = { "", "{", "{\"run_id\":\"a\"", "{\"run_id\":\"a\"} x",
			      "{\"seed\":1}", "{\"run_id\":\"a\",}", "{\"run_id\":tru}" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_eq(meta_parse(bad[i], strlen(bad[i]), &m, err, sizeof err), -EINVAL,
			     "accepted %s", bad[i]);
}

/* Each bad trace must be rejected with an error naming the file and line. */
Test(schema, bad_traces)
{
	static const struct {
		const char *file, *text, *expect;
	} cases[] = {
		{ "eval.csv", "t_s,node,updates,epoch,samples,test_accuracy,test_loss\n", ":1: header" },
		{ "eval.csv", TRACE_HEADER_EVAL "\n1,s,1,0.1,10,1.5,0.3,\n", ":2: column test_accuracy" },
		{ "eval.csv", TRACE_HEADER_EVAL "\n2,s,1,0.1,10,0.5,0.3,\n1,s,2,0.1,10,0.5,0.3,\n",
		  ":3: column t_s" },
		{ "progress.csv", TRACE_HEADER_PROGRESS "\n1,4,1,2,2.5,-3,,\n", ":2: column max_step" },
		{ "progress.csv", TRACE_HEADER_PROGRESS "\n1,4,1,2,2.5,3,1.5,0.5\n", ":2: column runq_wait_frac" },
		{ "progress.csv", TRACE_HEADER_PROGRESS "\n1,4,1,2,2.5,3,0.5,x\n", ":2: column host_cpu_frac" },
		{ "progress.csv", TRACE_HEADER_PROGRESS_V1 "\n1,4,1,2,2.5,-3\n", ":2: column max_step" },
		{ "links.csv", TRACE_HEADER_LINKS "\n1,w0,sideways,1,1,0,0,0,,,\n", ":2: column direction" },
		{ "links.csv", TRACE_HEADER_LINKS "\n1,w0,up,1,1,0,0,0,0.1,-0.2,0.3\n", ":2: column late_p99_ms" },
		{ "links.csv", TRACE_HEADER_LINKS_V1 "\n1,w0,up,1,1,0,0,x\n", ":2: column held_pkts" },
		{ "linkcheck.csv", TRACE_HEADER_LINKCHECK "\nw0,up,10,20,5,0.01,20,5,0,-1,ok\n",
		  ":2: column late_p99_ms" },
		{ "linkcheck.csv", TRACE_HEADER_LINKCHECK_V1 "\nw0,up,10,20,5,0.01,20,5,0,maybe\n",
		  ":2: column verdict" },
		{ "linkcheck.csv", TRACE_HEADER_LINKCHECK "\nw0,up,10,20,5,0.01,20,5,0,,maybe\n",
		  ":2: column verdict" },
		{ "events.csv", TRACE_HEADER_EVENTS "\nnan,start,,\n", ":2: column t_s" },
		{ "partition.csv", TRACE_HEADER_PARTITION "\nw0,1\n", ":2: 2 fields" },
		{ "nodes/worker0.csv", TRACE_HEADER_NODE "\n1,worker1,1,0.1,0,,0,1,0,0,0\n",
		  ":2: column node" },
		{ "nodes/worker0.csv", TRACE_HEADER_NODE "\n1,worker0,1.5,0.1,0,,0,1,0,0,0\n",
		  ":2: column step" },
	};
	char err[512];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char dir[] = "/tmp/stalenet-schema-XXXXXX", sub[600];

		cr_assert_not_null(support_mkdtemp(dir));
		snprintf(sub, sizeof sub, "%s/nodes", dir);
		mkdir(sub, 0755);
		put(dir, cases[i].file, cases[i].text);
		err[0] = '\0';
		cr_assert_eq(trace_schema_check_dir(dir, err, sizeof err), -EINVAL, "case %zu passed", i);
		cr_assert(strstr(err, cases[i].file) && strstr(err, cases[i].expect),
			  "case %zu: error \"%s\" lacks \"%s\"", i, err, cases[i].expect);
		rm_rf(dir);
	}
}

Test(schema, per_node_monotone_and_empty_dir)
{
	char dir[] = "/tmp/stalenet-schema-XXXXXX", err[512];

	cr_assert_not_null(support_mkdtemp(dir));
	cr_assert_eq(trace_schema_check_dir(dir, err, sizeof err), -ENOENT);
	/* interleaved nodes: each node's own t_s is monotone, the file's is not */
	put(dir, "eval.csv", TRACE_HEADER_EVAL "\n2,a,1,0,1,0.5,1,\n1,b,1,0,1,0.5,1,\n3,a,2,0,1,0.6,1,\n");
	cr_assert_eq(trace_schema_check_dir(dir, err, sizeof err), 0, "%s", err);
	rm_rf(dir);
}

Test(schema, recorded_fixture_is_valid)
{
	const char *runs[] = { "consistency.barrier=bsp+rep=1", "consistency.barrier=bsp+rep=2",
			       "consistency.barrier=asp+rep=1", "consistency.barrier=asp+rep=2" };
	char path[512], err[512];

	for (size_t i = 0; i < 4; i++) {
		snprintf(path, sizeof path, "tests/data/sweep_small/%s", runs[i]);
		cr_assert_eq(trace_schema_check_dir(path, err, sizeof err), 0, "%s", err);
	}
}

/* A parameter-server run: the server's update trace (TRACE_HEADER_SERVER) repeats the
 * workers' staleness, which counts once, and it writes no bytes: what it sent is what the
 * workers received. */
Test(summary, parameter_server_trace)
{
	char dir[] = "/tmp/stalenet-sum-XXXXXX", err[512];
	struct summary_row row;

	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(err, sizeof err, "%s/nodes", dir);
	cr_assert_eq(mkdir(err, 0755), 0);
	put(dir, "meta.json", "{\"run_id\": \"ps\", \"seed\": 1, \"backend\": \"nfq\", \"repeat\": 1}");
	put(dir, "nodes/worker0.csv", TRACE_HEADER_NODE "\n"
		"1.0,worker0,1,0.5,0.0,0,0,2.0,100,1000,0\n"
		"2.0,worker0,2,0.5,0.0,1,1,1.5,100,1000,0\n");
	put(dir, "nodes/worker1.csv", TRACE_HEADER_NODE "\n"
		"1.5,worker1,1,0.5,0.0,1,0,2.0,100,1000,0\n");
	put(dir, "nodes/server0.csv", TRACE_HEADER_SERVER "\n"
		"1.0,server0,worker0,1,0,1,1,0,2,0\n"
		"1.5,server0,worker1,1,1,2,2,0,2,0\n"
		"2.0,server0,worker0,2,1,3,3,0,2,0\n");
	cr_assert_eq(trace_schema_check_dir(dir, err, sizeof err), 0, "%s", err);
	cr_assert_eq(summary_compute(dir, &row, err, sizeof err), 0, "%s", err);
	cr_assert_eq(row.workers, 2);
	cr_assert_eq(row.total_steps, 3);
	/* staleness 0, 1, 1: once each, not twice */
	cr_assert_float_eq(row.staleness_mean, 2.0 / 3.0, 1e-12);
	/* pushes 3 x 100 + models 3 x 1000 */
	cr_assert_eq(row.bytes_moved, 3300);
	rm_rf(dir);
}

/* The recorded sweep's summary.csv is what summary_rebuild computes from its traces today: a
 * change to any summary column's rule shows up here against real data. */
Test(summary, recorded_fixture_rebuilds_identically)
{
	char dir[] = "/tmp/stalenet-sum-XXXXXX", cmd[600], path[600], err[512];
	char *want, *got;

	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(cmd, sizeof cmd, "cp -r tests/data/sweep_small/. '%s/' && rm '%s/summary.csv'", dir, dir);
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(summary_rebuild(dir, err, sizeof err), 4, "%s", err);
	snprintf(path, sizeof path, "%s/summary.csv", dir);
	got = slurp(path);
	want = slurp("tests/data/sweep_small/summary.csv");
	cr_assert_str_eq(got, want, "rebuilt:\n%s\nrecorded:\n%s", got, want);
	free(got);
	free(want);
	rm_rf(dir);
}

/* Remove column col from the CSV file at DIR/rel (no quoted fields in these traces). */
static void drop_column(const char *dir, const char *rel, const char *col)
{
	char path[700], *text, *out, *line, *save = NULL;
	size_t used = 0;
	int idx = -1;

	snprintf(path, sizeof path, "%s/%s", dir, rel);
	text = slurp(path);
	out = calloc(1, strlen(text) + 2);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f = line, *next;
		int k = 0;
		bool first = true;

		for (; f; f = next, k++) {
			next = strchr(f, ',');
			size_t len = next ? (size_t)(next - f) : strlen(f);

			if (next)
				next++;
			if (idx < 0 && strlen(col) == len && !strncmp(f, col, len))
				idx = k;
			if (k == idx)
				continue;
			used += (size_t)sprintf(out + used, "%s%.*s", first ? "" : ",", (int)len, f);
			first = false;
		}
		cr_assert_geq(idx, 0, "%s has no column %s", rel, col);
		out[used++] = '\n';
	}
	put(dir, rel, out);
	free(text);
	free(out);
}

/* Field i (0-based) of the fixed part of the data line of a summary file holding one row and
 * nkeys sweep keys. */
static void fixed_field(const char *text, size_t nkeys, size_t i, char *buf, size_t len)
{
	const char *p = strchr(text, '\n') + 1;

	for (size_t k = 0; k < nkeys + i; k++) {
		p = strchr(p, ',');
		cr_assert_not_null(p);
		p++;
	}
	snprintf(buf, len, "%.*s", (int)strcspn(p, ",\n"), p);
}

/* Every column the summary reads, dropped from one trace of the hand-computed run: exactly the
 * fields computed from it come out empty (not 0), every other field as with the column, and
 * the run's lacks say which. Fixed fields: 4-6 accuracy and time to target, 7 total_steps,
 * 8-10 steps, 11 wait_fraction, 12-13 staleness, 14 bytes_moved, 15 bad_frames, 16 link_drops,
 * 17 late_p99_worst_ms. */
Test(summary, each_missing_column_empties_its_fields)
{
	static const struct {
		const char *file, *col;
		unsigned lacks;
		int blank[5];
	} cases[] = {
		{ "nodes/worker1.csv", "step", SUMMARY_LACKS_STEP, { 7, 8, 9, 10, -1 } },
		{ "nodes/worker1.csv", "compute_s", SUMMARY_LACKS_COMPUTE_S | SUMMARY_LACKS_WAIT_S, { 11, -1 } },
		{ "nodes/worker0.csv", "wait_s", SUMMARY_LACKS_COMPUTE_S | SUMMARY_LACKS_WAIT_S, { 11, -1 } },
		{ "nodes/server0.csv", "staleness", SUMMARY_LACKS_STALENESS, { 12, 13, -1 } },
		{ "nodes/worker2.csv", "bytes_tx", SUMMARY_LACKS_BYTES_TX, { 14, -1 } },
		{ "nodes/worker2.csv", "bytes_rx", SUMMARY_LACKS_BYTES_RX, { -1 } }, /* no server trace */
		{ "nodes/worker2.csv", "bad_frames", SUMMARY_LACKS_BAD_FRAMES, { 15, -1 } },
		{ "eval.csv", "t_s", SUMMARY_LACKS_EVAL_T_S, { 4, 5, 6, -1 } },
		{ "eval.csv", "node", SUMMARY_LACKS_EVAL_NODE, { 4, 5, 6, -1 } },
		{ "eval.csv", "test_accuracy", SUMMARY_LACKS_EVAL_ACCURACY, { 4, 5, 6, -1 } },
		{ "eval.csv", "updates", SUMMARY_LACKS_EVAL_UPDATES, { -1 } },
		{ "links.csv", "node", SUMMARY_LACKS_LINKS_NODE, { 16, 17, -1 } },
		{ "links.csv", "direction", SUMMARY_LACKS_LINKS_DIRECTION, { 16, 17, -1 } },
		{ "links.csv", "dropped", SUMMARY_LACKS_LINKS_DROPPED, { 16, 17, -1 } },
		{ "links.csv", "late_p99_ms", SUMMARY_LACKS_LINKS_LATE, { 17, -1 } },
	};
	char dir[] = "/tmp/stalenet-sum-XXXXXX", run[600], path[600], err[512], desc[512];
	char a[64], b[64], *full;
	struct summary_row row;

	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(run, sizeof run, "%s/r", dir);
	make_run(run, "r", "bsp", 0);
	cr_assert_eq(summary_compute(run, &row, err, sizeof err), 0, "%s", err);
	cr_assert_eq(row.lacks, 0);
	cr_assert_eq(summary_lacks_describe(&row, desc, sizeof desc), 0);
	snprintf(path, sizeof path, "%s/full.csv", dir);
	cr_assert_eq(summary_append(path, &row, err, sizeof err), 0, "%s", err);
	full = slurp(path);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *text;

		rm_rf(run);
		make_run(run, "r", "bsp", 0);
		drop_column(run, cases[i].file, cases[i].col);
		cr_assert_eq(summary_compute(run, &row, err, sizeof err), 0, "%s %s: %s", cases[i].file,
			     cases[i].col, err);
		cr_expect_eq(row.lacks, cases[i].lacks, "%s %s: lacks %#x", cases[i].file, cases[i].col,
			     row.lacks);
		cr_expect_eq(summary_lacks_describe(&row, desc, sizeof desc), 1, "%s", desc);
		cr_expect(strstr(desc, cases[i].col) && !strncmp(desc, cases[i].file, 4), "%s %s: %s",
			  cases[i].file, cases[i].col, desc);
		snprintf(path, sizeof path, "%s/s%zu.csv", dir, i);
		cr_assert_eq(summary_append(path, &row, err, sizeof err), 0, "%s", err);
		text = slurp(path);
		for (size_t f = 0; f < 19; f++) {
			bool blank = false;

			for (int k = 0; k < 5 && cases[i].blank[k] >= 0; k++)
				blank |= (size_t)cases[i].blank[k] == f;
			fixed_field(text, 2, f, a, sizeof a);
			fixed_field(full, 2, f, b, sizeof b);
			if (blank)
				cr_expect_str_empty(a, "%s %s: field %zu '%s'", cases[i].file, cases[i].col, f, a);
			else
				cr_expect_str_eq(a, b, "%s %s: field %zu", cases[i].file, cases[i].col, f);
		}
		free(text);
	}
	free(full);
	rm_rf(dir);
}

/* A parameter-server run's bytes_moved counts what the workers received: a worker trace
 * without bytes_rx leaves it empty (with bytes_rx but without its own sends, the same). */
Test(summary, parameter_server_without_bytes_rx)
{
	char dir[] = "/tmp/stalenet-sum-XXXXXX", err[512], path[600], got[64];
	struct summary_row row;
	char *text;

	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(err, sizeof err, "%s/nodes", dir);
	cr_assert_eq(mkdir(err, 0755), 0);
	put(dir, "meta.json", "{\"run_id\": \"ps\"}");
	put(dir, "nodes/worker0.csv", "t_s,node,step,compute_s,wait_s,staleness,model_version,loss,bytes_tx,bad_frames\n"
		"1.0,worker0,1,0.5,0.0,0,0,2.0,100,0\n");
	put(dir, "nodes/server0.csv", TRACE_HEADER_SERVER "\n1.0,server0,worker0,1,0,1,1,0,2,0\n");
	cr_assert_eq(summary_compute(dir, &row, err, sizeof err), 0, "%s", err);
	cr_expect_eq(row.lacks, SUMMARY_LACKS_BYTES_RX);
	cr_expect_eq(row.total_steps, 1);
	snprintf(path, sizeof path, "%s/s.csv", dir);
	cr_assert_eq(summary_append(path, &row, err, sizeof err), 0, "%s", err);
	text = slurp(path);
	fixed_field(text, 0, 14, got, sizeof got);
	cr_expect_str_empty(got, "bytes_moved '%s'", got);
	fixed_field(text, 0, 7, got, sizeof got);
	cr_expect_str_eq(got, "1");
	free(text);
	rm_rf(dir);
}

/* A symlink someone put at the old predictable temporary name (summary.csv.tmp.PID, to a
 * file of theirs or of root's) is not written through. */
Test(summary, rebuild_does_not_follow_a_planted_temporary)
{
	char dir[] = "/tmp/stalenet-sum-XXXXXX", run[600], tmp[700], victim[700], err[512];
	char *text;

	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(run, sizeof run, "%s/r0", dir);
	make_run(run, "r0", "bsp", 0);
	put(dir, "victim", "untouched\n");
	snprintf(victim, sizeof victim, "%s/victim", dir);
	snprintf(tmp, sizeof tmp, "%s/summary.csv.tmp.%d", dir, (int)getpid());
	cr_assert_eq(symlink(victim, tmp), 0);
	/* The temporary name is unpredictable (lib/safefile): the planted one is never used. */
	cr_expect_eq(summary_rebuild(dir, err, sizeof err), 1, "%s", err);
	text = slurp(victim);
	cr_expect_str_eq(text, "untouched\n");
	free(text);
	{
		struct stat st;

		cr_expect(lstat(tmp, &st) == 0 && S_ISLNK(st.st_mode), "the planted link is left as found");
	}
	unlink(tmp);
	rm_rf(dir);
}

static bool ends_csv(const char *dir, const char *name)
{
	size_t len = strlen(name);

	(void)dir;
	return len > 4 && strcmp(name + len - 4, ".csv") == 0;
}

static int by_length(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);

	return la < lb ? -1 : la > lb;
}

/* summary_list_dir: keep() decides (hidden names included, "." and ".." never reach it), the
 * order is strcmp's or the caller's, and a missing directory is -ENOENT with nothing out. */
Test(summary, list_dir_filters_and_sorts)
{
	char dir[256], path[512], **names = NULL;
	const char *files[] = { "b10.csv", "b9.csv", ".h.csv", "notes.txt", "a.csv" };
	size_t n = 99;

	support_tmpdir(dir, sizeof dir, "listdir");
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, files[i]);
		support_write_file(path, "x\n");
	}
	cr_assert_eq(summary_list_dir(dir, ends_csv, NULL, &names, &n), 0);
	cr_assert_eq(n, 4);
	cr_assert_str_eq(names[0], ".h.csv");
	cr_assert_str_eq(names[1], "a.csv");
	cr_assert_str_eq(names[2], "b10.csv");
	cr_assert_str_eq(names[3], "b9.csv");
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	cr_assert_eq(summary_list_dir(dir, ends_csv, by_length, &names, &n), 0);
	cr_assert_eq(n, 4);
	cr_assert_str_eq(names[0], "a.csv");
	cr_assert_str_eq(names[3], "b10.csv");
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	snprintf(path, sizeof path, "%s/none", dir);
	cr_assert_eq(summary_list_dir(path, ends_csv, NULL, &names, &n), -ENOENT);
	cr_assert_null(names);
	cr_assert_eq(n, 0);
	cr_assert_eq(support_rm_rf(dir), 0);
}

/* meta.json's host_guard fills the guard's columns; a bad one is refused. */
Test(summary, host_guard_columns)
{
	char dir[] = "/tmp/stalenet-sum-XXXXXX", err[512], path[600];
	struct summary_row row;
	char *text;

	cr_assert_not_null(support_mkdtemp(dir));
	put(dir, "meta.json", "{\"run_id\":\"g\",\"host_guard\":{\"runq_wait_mean\":0.0712,"
			      "\"runq_wait_max\":0.25,\"host_cpu_mean\":0.98,\"host_cpu_max\":1,"
			      "\"saturated\":true,\"samples\":30}}");
	cr_assert_eq(summary_compute(dir, &row, err, sizeof err), 0, "%s", err);
	cr_assert(row.meta.has_guard && row.meta.saturated);
	cr_assert_float_eq(row.meta.runq_wait_mean, 0.0712, 1e-12);
	snprintf(path, sizeof path, "%s/s.csv", dir);
	cr_assert_eq(summary_append(path, &row, err, sizeof err), 0, "%s", err);
	text = slurp(path);
	cr_assert_str_eq(text, SUMMARY_FIXED_HEADER "\ng,0,0,,,,,0,,,,,,,0,0,,,,0.0712,0.2500,0.9800,1.0000,1\n");
	free(text);
	/* a guard that measured nothing: fractions null, the flag 0 */
	put(dir, "meta.json", "{\"run_id\":\"h\",\"host_guard\":{\"runq_wait_mean\":null,"
			      "\"runq_wait_max\":null,\"host_cpu_mean\":null,\"host_cpu_max\":null,"
			      "\"saturated\":false,\"samples\":0}}");
	cr_assert_eq(summary_compute(dir, &row, err, sizeof err), 0, "%s", err);
	cr_assert(row.meta.has_guard && !row.meta.saturated && isnan(row.meta.host_cpu_max));
	cr_assert_eq(summary_append(path, &row, err, sizeof err), 0, "%s", err);
	text = slurp(path);
	cr_assert(strstr(text, "\nh,0,0,,,,,0,,,,,,,0,0,,,,,,,,0\n"), "%s", text);
	free(text);
	put(dir, "meta.json", "{\"run_id\":\"b\",\"host_guard\":{\"runq_wait_mean\":1.5,\"saturated\":true}}");
	cr_assert_eq(summary_compute(dir, &row, err, sizeof err), -EINVAL);
	cr_assert(strstr(err, "runq_wait_mean"), "%s", err);
	put(dir, "meta.json", "{\"run_id\":\"b\",\"host_guard\":{\"runq_wait_mean\":0.5}}");
	cr_assert_eq(summary_compute(dir, &row, err, sizeof err), -EINVAL);
	cr_assert(strstr(err, "saturated"), "%s", err);
	put(dir, "meta.json", "{\"run_id\":\"b\",\"host_guard\":[]}");
	cr_assert_eq(summary_compute(dir, &row, err, sizeof err), -EINVAL);
	rm_rf(dir);
}

/* A summary.csv written before the guard's columns: appending rewrites it with today's header
 * and the old rows get the guard's columns empty. */
Test(summary, append_to_older_header)
{
	char dir[] = "/tmp/stalenet-sum-XXXXXX", err[512], path[600];
	struct summary_row row;
	char *text;

	cr_assert_not_null(support_mkdtemp(dir));
	put(dir, "s.csv", SUMMARY_FIXED_HEADER_V1 "\nold,1,2,nfq,0.5,0.5,,3,1,1,1,0.1,,,10,0,,complete\n");
	put(dir, "meta.json", "{\"run_id\":\"new\",\"host_guard\":{\"runq_wait_mean\":0.01,"
			      "\"runq_wait_max\":0.02,\"host_cpu_mean\":0.5,\"host_cpu_max\":0.6,"
			      "\"saturated\":false}}");
	cr_assert_eq(summary_compute(dir, &row, err, sizeof err), 0, "%s", err);
	snprintf(path, sizeof path, "%s/s.csv", dir);
	cr_assert_eq(summary_append(path, &row, err, sizeof err), 0, "%s", err);
	text = slurp(path);
	cr_assert_str_eq(text, SUMMARY_FIXED_HEADER "\n"
			 "old,1,2,nfq,0.5,0.5,,3,1,1,1,0.1,,,10,0,,,complete,,,,,\n"
			 "new,0,0,,,,,0,,,,,,,0,0,,,,0.0100,0.0200,0.5000,0.6000,0\n");
	free(text);
	rm_rf(dir);
}
