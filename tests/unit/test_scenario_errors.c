/* Malformed scenarios: each must fail with one line "FILE:LINE:COL: error: ..." at the exact
 * position of the fault and a message that says what is wrong. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orchestrator/scenario.h"
#include "tests/support/files.h"

struct bad {
	const char *yaml;
	unsigned line, col;
	const char *substr;
};

#define S "stop: {time: 10s}\n"

static const struct bad cases[] = {
	/* document level */
	{ "", 1, 1, "empty document" },
	{ "# nothing but a comment\n", 1, 1, "empty document" },
	{ "- 1\n- 2\n", 1, 1, "top level is a list" },
	{ S "---\nworkers: 4\n", 2, 1, "second document" },
	{ S "workers: 4\nworkers: 5\n", 3, 1, "duplicate key 'workers' (first at line 2)" },
	{ S "a: &x 1\n", 2, 4, "anchor '&x'" },
	{ S "workers: !!int 4\n", 2, 10, "tag" },
	{ S "stop2: {time: 10s\n", 3, 1, "YAML syntax" },
	{ S "name: ok\n\x01\n", 3, 1, "control character" },
	{ S "name: caf\xc3\n", 2, 10, "UTF-8" },
	{ S "name: \xff\n", 2, 7, "UTF-8" },
	{ "workers: 4\n", 1, 1, "no stop condition" },
	/* keys and types */
	{ S "workrs: 4\n", 2, 1, "unknown key 'workrs' in the scenario (did you mean 'workers'?)" },
	{ S "network:\n  defualt: {delay: 5ms}\n", 3, 3, "did you mean 'default'?" },
	{ S "network:\n  default: {dealy: 5ms}\n", 3, 13, "did you mean 'delay'?" },
	{ S "zzzzzz: 1\n", 2, 1, "expected one of:" },
	{ "stop: 5s\n", 1, 7, "stop is a scalar (expected a mapping)" },
	{ S "workers: [1, 2]\n", 2, 10, "workers is a list (expected a single value)" },
	{ S "workers:\n", 2, 9, "workers is empty" },
	/* numbers and units */
	{ "stop: {time: 10}\n", 1, 14, "missing unit" },
	{ "stop: {time: 10 parsecs}\n", 1, 14, "unknown unit" },
	{ "stop: {time: 10s, grace: 500ms}\n", 1, 26, "stop.grace 500ms is below 1s" },
	{ "stop: {time: 10s, grace: 61m}\n", 1, 26, "stop.grace 61m exceeds the limit of 3600s" },
	{ "stop: {time: 10s, grace: 2}\n", 1, 26, "missing unit" },
	{ "stop: {time: 10s, grace: -2s}\n", 1, 26, "stop.grace '-2s'" },
	{ "stop: {time: 10s, grace: [2s]}\n", 1, 26, "stop.grace is a list" },
	{ "stop: {time: 10s, grac: 2s}\n", 1, 19, "did you mean 'grace'?" },
	{ "stop: {grace: 2s}\n", 1, 1, "no stop condition" },
	{ "stop: {time: 10, grace: 0s}\n", 1, 14, "missing unit" }, /* the first fault in the file */
	{ S "workers: 0\n", 2, 10, "out of range" },
	{ S "workers: 5000\n", 2, 10, "out of range" },
	{ S "train: {batch: -3}\n", 2, 16, "negative" },
	{ S "train: {lr: abc}\n", 2, 13, "not a number" },
	{ S "train: {lr: nan}\n", 2, 13, "not a number" },
	{ S "target: 1.5\n", 2, 9, "above 1" },
	{ S "network:\n  default: {delay: 90s}\n", 3, 20, "exceeds the limit of 60s" },
	{ S "network:\n  default: {loss: 150%}\n", 3, 19, "above 1" },
	{ S "network:\n  default: {loss: 1.5}\n", 3, 19, "above 1" },
	{ S "network:\n  default: {rate: 100mbits}\n", 3, 19, "unknown unit" },
	{ S "network:\n  default: {loss: 0.00000001}\n", 3, 19, "resolution" },
	{ S "eval: {every: 0}\n", 2, 15, "eval.every is 0" },
	{ S "linkcheck: maybe\n", 2, 12, "not a boolean" },
	{ S "linkcheck: {interval: 50us}\n", 2, 23, "below 100us" },
	{ S "linkcheck: {interval: 2s}\n", 2, 23, "exceeds the limit" },
	/* netem cross-field rules */
	{ S "network:\n  default: {reorder: 10%}\n", 3, 22, "reorder needs delay" },
	{ S "network:\n  default: {delay: 10ms, gap: 5}\n", 3, 31, "gap needs reorder" },
	{ S "network:\n  default: {loss_correlation: 25%}\n", 3, 31, "loss_correlation needs loss" },
	{ S "network:\n  default: {jitter: 5ms}\n", 3, 21, "jitter needs delay" },
	{ S "network:\n  default: {delay: 5ms, delay_distribution: pareto}\n", 3, 45, "delay_distribution needs jitter" },
	{ S "network:\n  default: {delay: 5ms, duplicate_correlation: 5%}\n", 3, 48, "duplicate_correlation needs duplicate" },
	{ S "network:\n  default: {gemodel: {r: 10%}}\n", 3, 22, "gemodel without p" },
	{ S "network:\n  default: {loss: 1%, gemodel: {p: 1%}}\n", 3, 13, "exclude each other" },
	{ S "network:\n  default: {loss_model: gemodel}\n", 3, 25, "needs its parameters" },
	{ S "network:\n  default: {gemodel: {p: 1%, q: 2%}}\n", 3, 30, "did you mean 'p'?" },
	{ S "network:\n  default: {delay: 10ms}\n  links:\n    - {nodes: worker1, reorder: 5%, delay: 0}\n",
	  5, 33, "reorder needs delay" },
	{ S "network:\n  links:\n    - {nodes: worker1, up: {reorder: 5%}}\n", 4, 38, "up: reorder needs delay" },
	/* selectors and nodes */
	{ S "network:\n  links:\n    - {delay: 5ms}\n", 4, 7, "without nodes" },
	{ S "network:\n  links:\n    - {nodes: worker9, delay: 5ms}\n", 4, 15, "unknown node 'worker9'" },
	{ S "network:\n  links:\n    - {nodes: \"worker[0-7]\", delay: 5ms}\n", 4, 15, "unknown node 'worker4'" },
	{ S "network:\n  links:\n    - {nodes: \"peer*\", delay: 5ms}\n", 4, 15, "matches no node" },
	{ S "network:\n  links:\n    - {nodes: \"worker[3-1]\", delay: 5ms}\n", 4, 15, "empty range" },
	{ S "network:\n  timeline:\n    - {nodes: all, loss: 5%}\n", 4, 7, "without at" },
	{ S "network:\n  timeline:\n    - {at: 5s, nodes: all}\n", 4, 7, "changes nothing" },
	{ S "network:\n  timeline:\n    - {at: 5s, nodes: server7, loss: 1%}\n", 4, 23, "unknown node 'server7'" },
	{ S "stragglers:\n  - {nodes: worker1, crash: {at: 30s, restart: 20s}}\n", 3, 48, "later than crash.at" },
	{ S "stragglers:\n  - {nodes: worker1, pause: {every: 5s, for: 5s}}\n", 3, 46, "shorter than pause.every" },
	{ S "stragglers:\n  - {nodes: worker1, compute: {delay: {dist: uniform, min: 1ms}}}\n", 3, 39, "without max" },
	{ S "stragglers:\n  - {nodes: worker1, compute: {delay: {dist: normal, mean: 1ms, shape: 2}}}\n", 3, 65,
	  "unknown key 'shape'" },
	{ S "stragglers:\n  - {nodes: worker1}\n", 3, 5, "does nothing" },
	{ S "workers: 4\nnodes: [{name: a, role: worker}]\n", 2, 10, "exclude each other" },
	{ S "nodes: [{name: server0, role: server}, {name: server0, role: worker}]\n", 2, 47, "duplicate node name" },
	{ S "topology: {kind: p2p}\nnodes: [{name: s, role: server}]\n", 3, 16, "role server" },
	{ S "nodes: [{name: Bad!, role: worker}]\n", 2, 16, "not valid" },
	{ S "network: {subnet: 198.18.0.1/15}\n", 2, 19, "host bits" },
	{ S "network: {subnet: 10.0.0.0/30}\n", 2, 19, "room for 2 addresses" },
	{ S "network: {cc: \"cu bic\"}\n", 2, 15, "congestion control" },
	{ S "name: a/b\n", 2, 7, "not valid" },
	/* training sections */
	{ S "consistency: {barrier: foo}\n", 2, 24, "not one of the choices (expected bsp|ssp|asp|pbsp|pssp)" },
	{ S "consistency: {barrier: ssp, staleness: -3}\n", 2, 40, "is negative (expected a whole number >= 0)" },
	{ S "workers: 4\nconsistency: {barrier: pbsp, sample: 4}\n", 3, 38, "must be below the number of workers" },
	{ S "model: {kind: softmax, hidden: [10]}\n", 2, 32, "softmax has no hidden layer" },
	{ S "workers: 2\ndata: {partition: {scheme: sizes, sizes: [0.5, 0.4]}}\n", 3, 42, "sum to 0.9" },
	{ S "workers: 3\ndata: {partition: {scheme: sizes, sizes: [0.5, 0.5]}}\n", 3, 42, "one per worker" },
	{ S "data: {partition: {scheme: iid, alpha: 0.1}}\n", 2, 40, "alpha applies to scheme dirichlet" },
	{ S "data: {partition: {scheme: iid, zipf: 1.0}}\n", 2, 39, "zipf applies to scheme sizes" },
	{ S "workers: 2\ndata: {partition: {scheme: sizes, zipf: 1, sizes: [0.5, 0.5]}}\n", 3, 51,
	  "sizes and zipf exclude each other" },
	{ S "data: {partition: {scheme: sizes}}\n", 2, 19, "scheme sizes needs sizes or zipf" },
	{ S "topology: {kind: parameter-server, servers: 2}\n", 2, 45, "servers 2: the parameter server is one node" },
	{ S "topology: {kind: parameter-server}\nconsistency: {combine: ensemble}\n", 3, 24,
	  "combine ensemble applies to topology p2p" },
	{ S "topology: {kind: allreduce}\nconsistency: {barrier: asp}\n", 3, 24,
	  "a ring all-reduce is synchronous" },
	{ S "consistency: {barrier: pbsp, draw: always}\n", 2, 36, "consistency.draw" },
	{ S "consistency: {barrier: pbsp, draw: 1}\n", 2, 36, "consistency.draw" },
	{ S "topology: {kind: p2p}\nconsistency: {barrier: pssp, draw: check}\n", 3, 36,
	  "a peer draws its sample once per crossing" },
	{ S "network: {mtu: 100}\n", 2, 16, "out of range" },
	{ S "network: {mtu: 70000}\n", 2, 16, "out of range" },
	/* network.tcp */
	{ S "network:\n  tcp: [reno]\n", 3, 8, "network.tcp is a list (expected a mapping)" },
	{ S "network:\n  tcp: {nagle: off}\n", 3, 9, "unknown key 'nagle' in network.tcp" },
	{ S "network:\n  tcp: {ecn: maybe}\n", 3, 14, "expected off|on|passive" },
	{ S "network:\n  tcp: {slow_start_after_idle: 2}\n", 3, 32, "not a boolean" },
	{ S "network:\n  tcp: {initial_cwnd: 0}\n", 3, 23, "out of range" },
	{ S "network:\n  tcp: {initial_cwnd: 5000}\n", 3, 23, "out of range" },
	{ S "network:\n  tcp: {cc: 'bb r'}\n", 3, 13, "not a congestion control name" },
	{ S "network:\n  tcp: {cc: ''}\n", 3, 13, "not a congestion control name" },
	{ S "network:\n  cc: reno\n  tcp: {cc: cubic}\n", 4, 13, "network.tcp.cc and network.cc" },
	{ S "network:\n  tcp: {rmem: 5}\n", 3, 15, "not a list of three sizes" },
	{ S "network:\n  tcp: {rmem: [4KiB, 8KiB]}\n", 3, 15, "not a list of three sizes" },
	{ S "network:\n  tcp: {wmem: [4KiB, 2KiB, 8MiB]}\n", 3, 22, "out of range (limit: 4KiB..1GiB)" },
	{ S "network:\n  tcp: {wmem: [8KiB, 4KiB, 8MiB]}\n", 3, 22, "below the value before it" },
	{ S "network:\n  tcp: {rmem: [4KiB, 8KiB, 2GiB]}\n", 3, 28, "out of range" },
	{ S "network:\n  tcp: {rmem: [4KiB, 8 parsecs, 8MiB]}\n", 3, 22, "expected a size" },
	{ S "network: {precision: exact}\n", 2, 22, "network.precision 'exact' is not one of the choices (expected auto|timer|spin)" },
	{ S "topology: {kind: allreduce}\nstragglers:\n  - {nodes: peer1, crash: {at: 5s}}\n", 4, 13,
	  "crash with topology allreduce" },
	{ S "topology: {kind: allreduce}\nstragglers:\n  - {nodes: peer1, leave: {at: 5s}}\n", 4, 13,
	  "leave with topology allreduce: a ring all-reduce needs every peer" },
	/* sweeps */
	{ S "sweep: {workers: 4}\n", 2, 18, "expected a non-empty list" },
	{ S "sweep: {wrkers: [1, 2]}\n", 2, 9, "did you mean 'workers'?" },
	{ S "sweep: {workers: [2, 0]}\n", 2, 22, "out of range" },
	{ S "sweep: {consistency.barrier: [bsp, ssp], workers: [2, 4, 8], zip: [consistency.barrier, workers]}\n",
	  2, 89, "different lengths" },
	{ S "sweep: {consistency.barier: [bsp]}\n", 2, 9, "did you mean 'barrier'?" },
	{ S "sweep: {workers: [1, 2], repeat: 20000}\n", 2, 34, "out of range" },
};

Test(scenario_errors, table)
{
	size_t n = sizeof cases / sizeof *cases;
	cr_assert_geq(n, 40);
	for (size_t i = 0; i < n; i++) {
		char err[SCENARIO_ERR_MAX] = "", prefix[64];
		struct scenario *sc = scenario_parse(cases[i].yaml, strlen(cases[i].yaml), "t.yaml", err, sizeof err);
		cr_expect_null(sc, "case %zu should fail: %s", i, cases[i].yaml);
		scenario_destroy(&sc);
		snprintf(prefix, sizeof prefix, "t.yaml:%u:%u: error: ", cases[i].line, cases[i].col);
		cr_expect(!strncmp(err, prefix, strlen(prefix)), "case %zu: expected prefix '%s', got '%s'", i, prefix, err);
		cr_expect(strstr(err, cases[i].substr) != NULL, "case %zu: expected '%s' in '%s'", i, cases[i].substr, err);
		cr_expect(!strchr(err, '\n'), "case %zu: error is more than one line: %s", i, err);
	}
}

/* A document past the size limit is refused before parsing. */
Test(scenario_errors, too_large)
{
	size_t len = SCENARIO_MAX_FILE_BYTES + 100;
	char *buf = malloc(len), err[SCENARIO_ERR_MAX];
	cr_assert_not_null(buf);
	memset(buf, '#', len);
	struct scenario *sc = scenario_parse(buf, len, "big.yaml", err, sizeof err);
	cr_expect_null(sc);
	cr_expect(strstr(err, "big.yaml:1:1: error:") == err, "%s", err);
	cr_expect(strstr(err, "limit") != NULL, "%s", err);
	free(buf);
}

/* The file path of scenario_load_with applies the same limit while reading. */
Test(scenario_errors, too_large_file)
{
	char path[] = "/tmp/stalenet-test-big-XXXXXX", err[SCENARIO_ERR_MAX];
	int fd = support_mkstemp(path);
	cr_assert_geq(fd, 0);
	FILE *f = fdopen(fd, "w");
	for (size_t written = 0; written <= SCENARIO_MAX_FILE_BYTES + 1000; written += 32)
		fputs("# padding padding padding pad..\n", f); /* 32 bytes a line */
	fclose(f);
	struct scenario *sc = scenario_load_with(path, NULL, 0, err, sizeof err);
	unlink(path);
	cr_expect_null(sc);
	cr_expect(strstr(err, ":1:1: error: file is larger than") != NULL, "%s", err);
}

/* Billion laughs: refused at the first anchor, nothing is expanded. */
Test(scenario_errors, billion_laughs)
{
	const char *y = S
		"a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
		"b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
		"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
		"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
		"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n";
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc = scenario_parse(y, strlen(y), "lol.yaml", err, sizeof err);
	cr_expect_null(sc);
	cr_expect(strstr(err, "lol.yaml:2:4: error: anchor '&a'") == err, "%s", err);
}

/* An alias without an anchor of its own is refused at the alias. */
Test(scenario_errors, alias)
{
	const char *y = S "name: *x\n";
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc = scenario_parse(y, strlen(y), "a.yaml", err, sizeof err);
	cr_expect_null(sc);
	/* libyaml reports an undefined alias as a syntax error or an alias event; either way line 2 */
	cr_expect(strstr(err, "a.yaml:2:") == err, "%s", err);
}

Test(scenario_errors, deep_nesting)
{
	char y[512];
	int n = snprintf(y, sizeof y, S "x: ");
	for (int i = 0; i < 100; i++)
		y[n++] = '[';
	y[n] = 0;
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc = scenario_parse(y, strlen(y), "d.yaml", err, sizeof err);
	cr_expect_null(sc);
	cr_expect(strstr(err, "nested deeper than 64") != NULL || strstr(err, "YAML syntax") != NULL, "%s", err);
	cr_expect(strstr(err, "d.yaml:2:") == err, "%s", err);
}

Test(scenario_errors, missing_file)
{
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc = scenario_load_with("/nonexistent/x.yaml", NULL, 0, err, sizeof err);
	cr_expect_null(sc);
	cr_expect(strstr(err, "/nonexistent/x.yaml:1:1: error: cannot open") == err, "%s", err);
}

/* --set of a value the sweep also sets: an error at the sweep key naming both and the way out,
 * for the same key, a parent or a child path, and a zipped key; sweep.* sets are never refused. */
Test(scenario_errors, set_conflicts_with_sweep)
{
	static const char doc[] = S "model: {kind: mlp}\n"
				  "sweep:\n  consistency.barrier: [bsp, asp]\n  model.hidden: [[64], [128, 64]]\n"
				  "  train.batch: [32, 64]\n  consistency.staleness: [1, 4]\n"
				  "  zip: [train.batch, consistency.staleness]\n";
	static const struct {
		const char *set, *msg;
	} bad[] = {
		{ "consistency.barrier=ssp",
		  "t.yaml:4:3: error: --set consistency.barrier=ssp conflicts with the sweep key consistency.barrier: "
		  "the sweep sets it for every run; to change what the sweep sets use --set "
		  "'sweep.consistency.barrier=[bsp,asp]' with the values you want, or remove consistency.barrier "
		  "from the sweep" },
		{ "model={kind: mlp, hidden: [8]}",
		  "t.yaml:5:3: error: --set model={kind: mlp, hidden: [8]} conflicts with the sweep key model.hidden: "
		  "the sweep sets model.hidden, inside it, for every run; to change what the sweep sets use --set "
		  "'sweep.model.hidden=[[64],[128,64]]' with the values you want, or remove model.hidden from the "
		  "sweep" },
		{ "model.hidden.0=16",
		  "t.yaml:5:3: error: --set model.hidden.0=16 conflicts with the sweep key model.hidden: the sweep "
		  "sets model.hidden, which holds it, for every run;" },
		{ "consistency.staleness=2",
		  "t.yaml:7:3: error: --set consistency.staleness=2 conflicts with the sweep key "
		  "consistency.staleness: the sweep sets it for every run; to change what the sweep sets use --set "
		  "'sweep.consistency.staleness=[1,4]' with the values you want (zipped with train.batch: keep the "
		  "list's length), or remove consistency.staleness from the sweep" },
	};
	char err[SCENARIO_ERR_MAX] = "";
	struct scenario *sc = scenario_parse(doc, strlen(doc), "t.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		err[0] = 0;
		cr_expect_eq(scenario_set(sc, bad[i].set, err, sizeof err), -EINVAL, "%s", bad[i].set);
		cr_expect(!strncmp(err, bad[i].msg, strlen(bad[i].msg)), "expected '%s', got '%s'", bad[i].msg, err);
	}
	/* neighbours that only share a prefix of characters are not the same path */
	cr_expect_eq(scenario_set(sc, "consistency.barrierx=1", err, sizeof err), -EINVAL);
	cr_expect(strstr(err, "conflicts") == NULL, "%s", err);
	cr_expect_eq(scenario_set(sc, "train.lr=0.1", err, sizeof err), 0, "%s", err);
	cr_expect_eq(scenario_set(sc, "sweep.consistency.barrier=[ssp]", err, sizeof err), 0, "%s", err);
	scenario_destroy(&sc);
}

/* Errors of --set sweep.<key> name the --set (the value has no line in the file). */
Test(scenario_errors, set_sweep_errors)
{
	static const struct {
		const char *set, *msg;
	} bad[] = {
		{ "sweep.consistency.barrier=[bsp, xsp]", "--set sweep.consistency.barrier=[bsp, xsp]: error: "
		  "consistency.barrier 'xsp' is not one of the choices" },
		{ "sweep.workers=4", "--set sweep.workers=4: error: sweep 'workers' is a scalar (expected a non-empty "
		  "list of values)" },
		{ "sweep.workers=[]", "--set sweep.workers=[]: error: sweep 'workers' is an empty list" },
		{ "sweep.netwrk.delay=[1ms]", "--set sweep.netwrk.delay=[1ms]: error: unknown key 'netwrk' in sweep" },
		{ "sweep.zip.0=[workers]", "--set sweep.zip.0=[workers]: error: sweep.zip is set whole" },
		{ "sweep.model.hidden=[[8], [0]]", "--set sweep.model.hidden=[[8], [0]]: error: " },
		{ "sweep.workers=[2, 4", "--set sweep.workers=[2, 4: error: value:" },
	};
	static const char doc[] = S "sweep: {consistency.barrier: [bsp, asp]}\n";
	char err[SCENARIO_ERR_MAX] = "";
	struct scenario *sc = scenario_parse(doc, strlen(doc), "t.yaml", err, sizeof err);
	cr_assert_not_null(sc, "%s", err);
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		err[0] = 0;
		cr_expect_neq(scenario_set(sc, bad[i].set, err, sizeof err), 0, "%s", bad[i].set);
		cr_expect(!strncmp(err, bad[i].msg, strlen(bad[i].msg)), "expected '%s', got '%s'", bad[i].msg, err);
		cr_expect(!strchr(err, '\n'), "%s", err);
	}
	cr_expect_eq(sc->sweep.n_axes, 1, "a refused --set leaves the scenario unchanged");
	scenario_destroy(&sc);
}
