/* orchestrator/cgroup without privileges: CPU lists and sizes against naive models, the
 * scenario's `resources` key (values, FILE:LINE:COL errors, merging in the plan, `check`'s
 * output), the files a run writes on both hierarchies (a fake root of plain directories: v2 as
 * Debian 12 mounts it, v1 as this machine does), and the trust rules cleanup applies to a
 * journal's `cgroup` records. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orchestrator/cgroup.h"
#include "orchestrator/cleanup.h"
#include "orchestrator/journal.h"
#include "orchestrator/plan.h"
#include "orchestrator/scenario.h"
#include "tests/support/files.h"

/* Paths here are short temporary ones; the buffers are sized for them. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

/* ---- CPU lists and sizes ------------------------------------------------------------------- */

/* Naive model: the list written out CPU by CPU. */
static void naive_list(const uint64_t *mask, char *buf, size_t len)
{
	size_t pos = 0;

	buf[0] = '\0';
	for (unsigned c = 0; c < CGROUP_MAX_CPUS; c++)
		if (mask[c / 64] & (1ull << (c % 64)))
			pos += (size_t)snprintf(buf + pos, len - pos, "%s%u", pos ? "," : "", c);
}

Test(cgroup, cpu_lists_round_trip_against_a_naive_expansion)
{
	uint64_t mask[CGROUP_CPU_WORDS], back[CGROUP_CPU_WORDS];
	char text[8192], a[16384], b[16384];

	srand(7);
	for (int iter = 0; iter < 500; iter++) {
		int expect = 0;

		memset(mask, 0, sizeof mask);
		for (int k = 0; k < 1 + rand() % 20; k++) {
			unsigned c = (unsigned)(iter % 2 ? rand() % 80 : rand() % CGROUP_MAX_CPUS);

			mask[c / 64] |= 1ull << (c % 64);
		}
		for (unsigned c = 0; c < CGROUP_MAX_CPUS; c++)
			expect += !!(mask[c / 64] & (1ull << (c % 64)));
		cgroup_format_cpus(mask, text, sizeof text);
		cr_assert_eq(cgroup_parse_cpus(text, back), expect, "%s", text);
		naive_list(mask, a, sizeof a);
		naive_list(back, b, sizeof b);
		cr_assert_str_eq(a, b, "list %s", text);
	}
	cr_assert_eq(cgroup_parse_cpus("0-3,7\n", mask), 5);
	cgroup_format_cpus(mask, text, sizeof text);
	cr_assert_str_eq(text, "0-3,7");
	cr_assert_eq(cgroup_parse_cpus("3-1", mask), -EINVAL);
	cr_assert_eq(cgroup_parse_cpus("1,,2", mask), -EINVAL);
	cr_assert_eq(cgroup_parse_cpus("1024", mask), -EINVAL);
	cr_assert_eq(cgroup_parse_cpus("x", mask), -EINVAL);
	cr_assert_eq(cgroup_parse_cpus("1-", mask), -EINVAL);
}

Test(cgroup, sizes_parse_in_binary_and_decimal_units)
{
	static const struct { const char *s; uint64_t v; } ok[] = {
		{ "256MiB", 256ull << 20 }, { "1.5GiB", 3ull << 29 }, { "1KiB", 1024 }, { "16MB", 16000000 },
		{ "4096", 4096 }, { "2G", 2ull << 30 }, { "512 MiB", 512ull << 20 }, { "1TiB", 1ull << 40 },
	};
	static const char *const bad[] = { "1.5B", "12XB", "-1", "", "MiB", "1e9", "99999999999TiB" };
	uint64_t v;
	char buf[32];

	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		cr_assert_eq(cgroup_parse_size(ok[i].s, &v, NULL), 0, "%s", ok[i].s);
		cr_assert_eq(v, ok[i].v, "%s = %llu", ok[i].s, (unsigned long long)v);
		cgroup_format_size(v, buf, sizeof buf);
		cr_assert_eq(cgroup_parse_size(buf, &v, NULL), 0, "%s", buf);
		cr_assert_eq(v, ok[i].v, "format %s", buf);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		const char *why = NULL;

		cr_assert_lt(cgroup_parse_size(bad[i], &v, &why), 0, "'%s' accepted", bad[i]);
		cr_assert_not_null(why);
	}
	cgroup_format_size(256ull << 20, buf, sizeof buf);
	cr_assert_str_eq(buf, "256MiB");
}

/* ---- the scenario key ------------------------------------------------------------------------ */

#define HEAD "stop: {time: 10s}\nworkers: 4\nresources:\n"

static void expect_error(const char *yaml, unsigned line, unsigned col, const char *substr)
{
	char err[SCENARIO_ERR_MAX], pos[64];
	struct scenario *sc = scenario_parse(yaml, strlen(yaml), "t.yaml", err, sizeof err);

	cr_assert_null(sc, "accepted:\n%s", yaml);
	snprintf(pos, sizeof pos, "t.yaml:%u:%u: error: ", line, col);
	cr_assert_eq(strncmp(err, pos, strlen(pos)), 0, "want %s got %s", pos, err);
	cr_assert(strstr(err, substr), "'%s' not in '%s'", substr, err);
}

Test(cgroup, bad_resources_are_refused_at_their_position)
{
	uint64_t online[CGROUP_CPU_WORDS];
	int n = cgroup_online_cpus(online), last = -1;
	char y[512];

	cr_assert_gt(n, 0);
	for (int c = 0; c < CGROUP_MAX_CPUS; c++)
		if (online[c / 64] & (1ull << (c % 64)))
			last = c;
	expect_error(HEAD "  - {nodes: worker0, cpu: 0}\n", 4, 27, "below the smallest share");
	snprintf(y, sizeof y, HEAD "  - {nodes: worker0, cpu: %d}\n", n + 1);
	expect_error(y, 4, 27, "online CPU(s) of this host");
	if (last + 1 < CGROUP_MAX_CPUS) {
		snprintf(y, sizeof y, HEAD "  - {nodes: worker0, cpus: [0, %d]}\n", last + 1);
		expect_error(y, 4, 32, "not an online CPU of this host");
	}
	expect_error(HEAD "  - {nodes: worker0, cpus: [abc]}\n", 4, 29, "not a CPU number");
	expect_error(HEAD "  - {nodes: worker0, cpus: []}\n", 4, 28, "cpus is empty");
	expect_error(HEAD "  - {nodes: worker0, memory: 1KiB}\n", 4, 30, "below the minimum of 16MiB");
	expect_error(HEAD "  - {nodes: worker0, memory: 3 apples}\n", 4, 30, "unknown unit");
	expect_error(HEAD "  - {nodes: worker9, memory: 64MiB}\n", 4, 13, "unknown node 'worker9'");
	expect_error(HEAD "  - {nodes: worker0}\n", 4, 5, "does nothing");
	expect_error(HEAD "  - {cpu: 0.5}\n", 4, 5, "without nodes");
	expect_error(HEAD "  - {nodes: worker0, cpu: 1.5, cpus: [0]}\n", 4, 27, "pinned to by cpus");
	expect_error(HEAD "  - {nodes: worker0, mem: 1GiB}\n", 4, 22, "unknown key 'mem'");
}

Test(cgroup, the_plan_merges_entries_in_order_and_check_prints_them)
{
	const char *yaml = HEAD "  - {nodes: workers, cpu: 0.5, memory: 256MiB}\n"
			   "  - {nodes: \"worker[2-3]\", cpu: 0.25, cpus: [0]}\n";
	char err[SCENARIO_ERR_MAX], *text = NULL;
	size_t len = 0;
	struct scenario *sc = scenario_parse(yaml, strlen(yaml), "t.yaml", err, sizeof err);
	struct plan *pl;
	const struct plan_run *r;
	FILE *f;

	cr_assert_not_null(sc, "%s", err);
	cr_assert_eq(sc->n_resources, 2);
	pl = plan_new(sc, err, sizeof err);
	cr_assert_not_null(pl, "%s", err);
	r = plan_run(pl, 0);
	for (size_t i = 0; i < r->n_nodes; i++) {
		const struct scenario_resources *re = &r->nodes[i].resources;

		if (r->nodes[i].role == SCENARIO_ROLE_SERVER) {
			cr_assert_eq(re->set, 0, "%s", r->nodes[i].name);
			continue;
		}
		cr_assert_eq(re->memory_bytes, 256ull << 20);
		if (r->nodes[i].index >= 2) {
			cr_assert_eq(re->set, SCENARIO_RES_CPU | SCENARIO_RES_CPUS | SCENARIO_RES_MEMORY);
			cr_assert_float_eq(re->cpu, 0.25, 1e-12);
			cr_assert_eq(re->cpus[0], 1);
		} else {
			cr_assert_eq(re->set, SCENARIO_RES_CPU | SCENARIO_RES_MEMORY);
			cr_assert_float_eq(re->cpu, 0.5, 1e-12);
		}
	}
	f = open_memstream(&text, &len);
	cr_assert_eq(plan_print(f, pl), 0);
	fclose(f);
	cr_assert(strstr(text, "resources: cpu 0.25 cpus 0 memory 256MiB"), "%s", text);
	cr_assert(strstr(text, "resources: cpu 0.5 memory 256MiB"), "%s", text);
	free(text);
	plan_destroy(&pl);
	scenario_destroy(&sc);
}

/* ---- files written, on fake roots ------------------------------------------------------------ */

static char *file_in(const char *dir, const char *name)
{
	char p[4096];
	char *s;

	snprintf(p, sizeof p, "%s/%s", dir, name);
	s = support_read_file(p, NULL);
	return s ? s : strdup("<missing>");
}

static void expect_file(const char *dir, const char *name, const char *want)
{
	char *s = file_in(dir, name);

	cr_assert_str_eq(s, want, "%s/%s", dir, name);
	free(s);
}

static void put(const char *dir, const char *name, const char *text)
{
	char p[4096];

	snprintf(p, sizeof p, "%s/%s", dir, name);
	support_write_file(p, text);
}

Test(cgroup, v2_writes_cpu_max_cpuset_and_memory_max_and_journals_first)
{
	char root[64], reg[4096], run[4096], err[512], node[4096];
	uint64_t cpus[CGROUP_CPU_WORDS] = { 1ull << 1 }, kills = 1;
	struct cgroup_limits lim = { .cpu = 0.25, .cpus = cpus, .memory_bytes = 256ull << 20 }, none = { 0 };
	struct cgroup_info ci;
	struct journal *j;
	struct cgroup_run *cg;
	char *jt;

	support_tmpdir(root, sizeof root, "cgv2");
	put(root, "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
	put(root, "cgroup.subtree_control", "memory\n");
	cr_assert_eq(cgroup_detect(root, &ci), 0);
	cr_assert_eq(ci.hierarchy, CGROUP_V2);
	cr_assert_eq(ci.controllers, CGROUP_CPU | CGROUP_CPUSET | CGROUP_MEMORY);
	snprintf(reg, sizeof reg, "%s/registry", root);
	snprintf(run, sizeof run, "%s/run", root);
	cr_assert_eq(mkdir(reg, 0700), 0);
	cr_assert_eq(mkdir(run, 0700), 0);
	journal_set_registry_dir(reg);
	j = journal_create(run, "sntst-", err, sizeof err);
	cr_assert_not_null(j, "%s", err);

	cg = cgroup_run_new(root, "sntst-", CGROUP_CPU | CGROUP_CPUSET | CGROUP_MEMORY, j, err, sizeof err);
	cr_assert_not_null(cg, "%s", err);
	/* memory was enabled already: only the missing ones are asked for at the root */
	expect_file(root, "cgroup.subtree_control", "+cpu +cpuset");
	expect_file(root, "sntst-/cgroup.subtree_control", "+cpu +cpuset +memory");
	cr_assert_eq(cgroup_run_add(cg, "worker0", &lim, err, sizeof err), 0, "%s", err);
	cr_assert_eq(cgroup_run_add(cg, "server0", &none, err, sizeof err), 1, "%s", err);
	snprintf(node, sizeof node, "%s/sntst-/sntst-worker0", root);
	cr_assert_str_eq(cgroup_run_path(cg, 0, CGROUP_MEMORY), node);
	expect_file(node, "cpu.max", "25000 100000");
	expect_file(node, "cpuset.cpus", "1");
	expect_file(node, "memory.max", "268435456");
	snprintf(node, sizeof node, "%s/sntst-/sntst-server0", root);
	expect_file(node, "cpu.max", "max 100000");
	expect_file(node, "memory.max", "max");
	expect_file(node, "cpuset.cpus", "<missing>");
	cr_assert_eq(cgroup_run_attach(cg, 1, 4321), 0);
	expect_file(node, "cgroup.procs", "4321");
	cr_assert_eq(cgroup_run_find(cg, "server0"), 1);
	cr_assert_eq(cgroup_run_find(cg, "worker7"), -ENOENT);

	/* the kernel's counter, as memory.events shows it after a kill */
	snprintf(node, sizeof node, "%s/sntst-/sntst-worker0", root);
	cr_assert_eq(cgroup_run_oom_kills(cg, 0, &kills), -ENOENT);
	put(node, "memory.events", "oom 0\noom_kill 0\n");
	cr_assert_eq(cgroup_run_oom_kills(cg, 0, &kills), 0);
	cr_assert_eq(kills, 0);
	put(node, "memory.events", "low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 0\n");
	cr_assert_eq(cgroup_run_oom_kills(cg, 0, &kills), 0);
	cr_assert_eq(kills, 2);
	/* counted once: a restarted node's next death is judged on its own */
	cr_assert_eq(cgroup_run_oom_kills(cg, 0, &kills), 0);
	cr_assert_eq(kills, 0);

	/* every directory journalled, parent before children */
	snprintf(reg, sizeof reg, "%s/journal", run);
	jt = support_slurp(reg, NULL);
	snprintf(node, sizeof node, "cgroup %s/sntst-\ncgroup %s/sntst-/sntst-worker0\ncgroup %s/sntst-/sntst-server0\n",
		 root, root, root);
	cr_assert(strstr(jt, node), "journal:\n%s", jt);
	free(jt);
	/* a plain directory full of files is no cgroup: removal fails, the test cleans up */
	cgroup_run_destroy(&cg);
	cr_assert_null(cg);
	journal_destroy(&j);
	journal_set_registry_dir(NULL);
	support_rm_rf(root);
}

Test(cgroup, v1_writes_quota_cpuset_and_limit_per_controller)
{
	char root[64], d[4096], err[512], node[4096];
	uint64_t cpus[CGROUP_CPU_WORDS] = { 1ull << 2 }, kills = 9;
	struct cgroup_limits lim = { .cpu = 1.5, .cpus = cpus, .memory_bytes = 64ull << 20 }, none = { 0 };
	struct cgroup_info ci;
	struct cgroup_run *cg;

	support_tmpdir(root, sizeof root, "cgv1");
	for (int i = 0; i < 3; i++) {
		snprintf(d, sizeof d, "%s/%s", root, (const char *[]){ "cpu", "cpuset", "memory" }[i]);
		cr_assert_eq(mkdir(d, 0755), 0);
	}
	put(root, "cpu/cpu.cfs_quota_us", "-1\n");
	put(root, "cpuset/cpuset.cpus", "0-3\n");
	put(root, "cpuset/cpuset.mems", "0\n");
	put(root, "memory/memory.limit_in_bytes", "9223372036854771712\n");
	cr_assert_eq(cgroup_detect(root, &ci), 0);
	cr_assert_eq(ci.hierarchy, CGROUP_V1);
	cr_assert_eq(ci.controllers, CGROUP_CPU | CGROUP_CPUSET | CGROUP_MEMORY);
	cr_assert_not(ci.swap_limit);

	/* only the controllers in need are used */
	cg = cgroup_run_new(root, "sntst-", CGROUP_CPU | CGROUP_CPUSET | CGROUP_MEMORY, NULL, err, sizeof err);
	cr_assert_not_null(cg, "%s", err);
	expect_file(root, "cpuset/sntst-/cpuset.cpus", "0-3\n");
	expect_file(root, "cpuset/sntst-/cpuset.mems", "0\n");
	cr_assert_eq(cgroup_run_add(cg, "w0", &lim, err, sizeof err), 0, "%s", err);
	cr_assert_eq(cgroup_run_add(cg, "w1", &none, err, sizeof err), 1, "%s", err);
	snprintf(node, sizeof node, "%s/cpu/sntst-/sntst-w0", root);
	cr_assert_str_eq(cgroup_run_path(cg, 0, CGROUP_CPU), node);
	expect_file(node, "cpu.cfs_period_us", "100000");
	expect_file(node, "cpu.cfs_quota_us", "150000");
	snprintf(node, sizeof node, "%s/cpuset/sntst-/sntst-w0", root);
	expect_file(node, "cpuset.cpus", "2");
	expect_file(node, "cpuset.mems", "0\n");
	snprintf(node, sizeof node, "%s/memory/sntst-/sntst-w0", root);
	expect_file(node, "memory.limit_in_bytes", "67108864");
	expect_file(root, "cpu/sntst-/sntst-w1/cpu.cfs_quota_us", "-1");
	expect_file(root, "cpuset/sntst-/sntst-w1/cpuset.cpus", "0-3\n");
	expect_file(root, "memory/sntst-/sntst-w1/memory.limit_in_bytes", "<missing>");
	cr_assert_eq(cgroup_run_attach(cg, 0, 777), 0);
	expect_file(root, "cpu/sntst-/sntst-w0/cgroup.procs", "777");
	expect_file(root, "cpuset/sntst-/sntst-w0/cgroup.procs", "777");
	expect_file(root, "memory/sntst-/sntst-w0/cgroup.procs", "777");
	put(node, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
	cr_assert_eq(cgroup_run_oom_kills(cg, 0, &kills), 0);
	cr_assert_eq(kills, 1);
	cgroup_run_destroy(&cg);
	support_rm_rf(root);
}

Test(cgroup, a_missing_controller_fails_the_run_and_leaves_nothing)
{
	char root[64], err[512], d[4096];
	struct cgroup_info ci;
	struct cgroup_run *cg;

	support_tmpdir(root, sizeof root, "cgnone");
	cr_assert_eq(cgroup_detect(root, &ci), 0);
	cr_assert_eq(ci.hierarchy, CGROUP_NONE);
	cr_assert_null(cgroup_run_new(root, "sntst-", CGROUP_CPU, NULL, err, sizeof err));
	cr_assert(strstr(err, "no hierarchy"), "%s", err);
	snprintf(d, sizeof d, "%s/cpu", root);
	cr_assert_eq(mkdir(d, 0755), 0);
	put(root, "cpu/cpu.cfs_quota_us", "-1\n");
	cg = cgroup_run_new(root, "sntst-", CGROUP_CPU | CGROUP_MEMORY, NULL, err, sizeof err);
	cr_assert_null(cg);
	cr_assert(strstr(err, "memory"), "%s", err);
	snprintf(d, sizeof d, "%s/cpu/sntst-", root);
	cr_assert_eq(access(d, F_OK), -1, "parent made though the run failed");
	/* removal: an empty directory goes, a missing one is success, a path without the prefix
	 * is refused */
	cr_assert_eq(mkdir(d, 0755), 0);
	cr_assert_eq(cgroup_remove(d, "sntst-"), 0);
	cr_assert_eq(access(d, F_OK), -1);
	cr_assert_eq(cgroup_remove(d, "sntst-"), 0);
	cr_assert_eq(cgroup_remove(d, "snzzz-"), -EINVAL);
	support_rm_rf(root);
}

/* ---- trust ------------------------------------------------------------------------------------ */

Test(cgroup, cleanup_trusts_only_run_cgroups_under_the_mount)
{
	static const char *const ok[] = {
		"/sys/fs/cgroup/cpu/sn1a2b-", "/sys/fs/cgroup/cpuset/sn1a2b-/sn1a2b-worker0",
		"/sys/fs/cgroup/memory/sn1a2b-/sn1a2b-server0", "/sys/fs/cgroup/sn1a2b-",
		"/sys/fs/cgroup/sn1a2b-/sn1a2b-peer3", "/sys/fs/cgroup/sn1a2b-/sn1a2b-a.b",
	};
	static const char *const bad[] = {
		"/sys/fs/cgroup/cpu/sn1a2b-/../../../etc", "/sys/fs/cgroup/cpu/sn1a2b-/..",
		"/sys/fs/cgroup/cpu/other", "/sys/fs/cgroup/cpu/sn1a2b-/worker0", "/tmp/sn1a2b-",
		"/sys/fs/cgroup/cpu//sn1a2b-", "/sys/fs/cgroup/cpu/sn1a2b-/sn1a2b-w/x",
		"/sys/fs/cgroupX/sn1a2b-", "/sys/fs/cgroup/cpu/sn1a2b-/", "/sys/fs/cgroup", "/sys/fs/cgroup/",
		"sys/fs/cgroup/cpu/sn1a2b-", "/sys/fs/cgroup/cpu/sn1a2b-/sn1a2b-", "/sys/fs/cgroup/./sn1a2b-",
		"/sys/fs/cgroup/cpu/sn1a2b-x/sn1a2b-w", "/sys/fs/cgroup/unified/sn1a2b-", "/sys/fs/cgroup/sn1a2b- x",
		"/sys/fs/cgroup/cpu/cpu/sn1a2b-", "/sys/fs/cgroup/memory",
	};
	char text[8192], why[256];
	struct journal_parsed *p = NULL;

	cgroup_set_root(NULL);
	cr_assert_str_eq(cgroup_root(), "/sys/fs/cgroup");
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		cr_assert_null(cgroup_path_problem(ok[i], "sn1a2b-"), "%s refused: %s", ok[i],
			       cgroup_path_problem(ok[i], "sn1a2b-"));
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_not_null(cgroup_path_problem(bad[i], "sn1a2b-"), "%s accepted", bad[i]);
	cr_assert_not_null(cgroup_path_problem("/sys/fs/cgroup/cpu/x", "x"), "short prefix accepted");

	/* the same through a journal: good records pass, one bad one refuses the whole journal */
	snprintf(text, sizeof text, "stalenet-journal 1 999999 1 /tmp/run sn1a2b-\n");
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		snprintf(text + strlen(text), sizeof text - strlen(text), "cgroup %s\n", ok[i]);
	cr_assert_eq(journal_parse(text, strlen(text), &p, why, sizeof why), 0, "%s", why);
	cr_assert_eq(p->recs[0].kind, JOURNAL_CGROUP);
	cr_assert_str_eq(journal_kind_name(JOURNAL_CGROUP), "cgroup");
	cr_assert_eq(cleanup_check(p, why, sizeof why), 0, "%s", why);
	journal_parsed_free(&p);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char t[1024], esc[512], line[32];

		if (journal_escape(bad[i], esc, sizeof esc) < 0)
			continue;
		snprintf(t, sizeof t, "stalenet-journal 1 999999 1 /tmp/run sn1a2b-\ncgroup %s\ncgroup %s\n", ok[0], esc);
		cr_assert_eq(journal_parse(t, strlen(t), &p, why, sizeof why), 0, "%s: %s", bad[i], why);
		cr_assert_eq(cleanup_check(p, why, sizeof why), -EPERM, "%s passed", bad[i]);
		snprintf(line, sizeof line, "line 3: ");
		cr_assert_eq(strncmp(why, line, strlen(line)), 0, "%s: %s", bad[i], why);
		journal_parsed_free(&p);
	}
	/* one path per record */
	snprintf(text, sizeof text, "stalenet-journal 1 999999 1 /tmp/run sn1a2b-\ncgroup /a /b\n");
	cr_assert_eq(journal_parse(text, strlen(text), &p, why, sizeof why), -EINVAL);
	cr_assert(strstr(why, "line 2"), "%s", why);
}
