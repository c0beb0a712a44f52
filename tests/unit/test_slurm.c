/* orchestrator/slurm: Slurm's compressed host lists expanded exactly (checked against a naive
 * compressor over many generated node sets, and every malformed form refused), the CPUs per
 * node list, a host list completed from an allocation's environment (and refused outside one),
 * and the srun argv that starts an agent. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/hosts.h"
#include "orchestrator/scenario.h"
#include "orchestrator/slurm.h"

static char names[HOSTS_MAX][HOSTS_NAME_MAX];

/* Expand list; the names joined by ' ' into out; returns the rc. */
static int expand(const char *list, char *out, size_t len, char *err)
{
	size_t n = 99;
	int rc = slurm_hostlist_expand(list, names, HOSTS_MAX, &n, err, 512);
	size_t pos = 0;
	out[0] = 0;
	for (size_t i = 0; !rc && i < n; i++)
		pos += (size_t)snprintf(out + pos, len - pos, "%s%s", i ? " " : "", names[i]);
	if (rc)
		cr_expect_eq(n, 0, "%s: no names on failure", list);
	return rc;
}

Test(slurm, expands_the_forms_slurm_prints)
{
	static const struct {
		const char *list, *want;
	} cases[] = {
		{ "h0", "h0" },
		{ "h[1-3,5]", "h1 h2 h3 h5" },
		{ "node[01-03]", "node01 node02 node03" },
		{ "node[08-11]", "node08 node09 node10 node11" },
		{ "n[9-11]", "n9 n10 n11" },
		{ "n[001-002],gpu7", "n001 n002 gpu7" },
		{ "a,b,c", "a b c" },
		{ "cn[1-2]-ib", "cn1-ib cn2-ib" },
		{ "r[1-2]n[1-2]", "r1n1 r1n2 r2n1 r2n2" },
		{ "x[3],y[0-0]", "x3 y0" },
		{ "h[0-2],h[4],k", "h0 h1 h2 h4 k" },
		{ "7[1-2]", "71 72" },
		{ "h[1,3-4,10]", "h1 h3 h4 h10" },
	};
	char out[2048], err[512];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int rc = expand(cases[i].list, out, sizeof out, err);
		cr_expect_eq(rc, 0, "%s: %s", cases[i].list, err);
		cr_expect_str_eq(out, cases[i].want, "%s", cases[i].list);
	}
}

Test(slurm, refuses_every_malformed_list)
{
	static const struct {
		const char *list, *why;
	} cases[] = {
		{ "", "empty" },
		{ ",h1", "empty item" },
		{ "h1,", "empty item" },
		{ "h1,,h2", "empty item" },
		{ "h[1-3", "'[' without ']'" },
		{ "h1-3]", "']' without '['" },
		{ "h[1-[2]]", "'[' inside brackets" },
		{ "h[]", "empty range" },
		{ "h[1,]", "empty range" },
		{ "h[,1]", "empty range" },
		{ "h[3-1]", "backwards" },
		{ "h[a-b]", "not a number" },
		{ "h[1-]", "not a number" },
		{ "h[-1]", "not a number" },
		{ "h[1-2-3]", "not a number" },
		{ "h[1-4:2]", "not a number" },
		{ "h[ 1]", "not a number" },
		{ "h[1234567890]", "not a number" },
		{ "h[0-99999]", "more than" },
		{ "H1", "not usable as a host name" },
		{ "h_1", "not usable as a host name" },
		{ "-h", "not usable as a host name" },
		{ "h 1", "not usable as a host name" },
		{ "h.example", "not usable as a host name" },
		{ "h1,h1", "appears twice" },
		{ "h[1-2],h2", "appears twice" },
		{ "h[01-2],h[1-2]", NULL },     /* h01 h02 h1 h2: valid, distinct */
		{ "averyveryverylongnodenamethatistoolong[1-2]", "longer than" },
	};
	char out[2048], err[512];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		err[0] = 0;
		int rc = expand(cases[i].list, out, sizeof out, err);
		if (!cases[i].why) {
			cr_expect_eq(rc, 0, "%s: %s", cases[i].list, err);
			continue;
		}
		cr_expect_lt(rc, 0, "'%s' accepted as '%s'", cases[i].list, out);
		cr_expect(strstr(err, cases[i].why), "'%s': '%s' lacks '%s'", cases[i].list, err, cases[i].why);
	}
	/* a list longer than we read, and more nodes than the caller has room for */
	char *big = malloc(SLURM_LIST_MAX + 2);
	memset(big, 'a', SLURM_LIST_MAX + 1);
	big[SLURM_LIST_MAX + 1] = 0;
	cr_expect_lt(expand(big, out, sizeof out, err), 0);
	free(big);
	size_t n;
	cr_expect_eq(slurm_hostlist_expand("h[1-5]", names, 4, &n, err, sizeof err), -E2BIG);
	cr_expect_eq(slurm_hostlist_expand("h[1-4]", names, 4, &n, err, sizeof err), 0);
	cr_expect_eq(n, 4);
}

/* The reference: a naive compressor of names "PREFIX%0*u" grouped by (prefix, width), each
 * group's sorted numbers joined into ranges. */
static void compress(const unsigned *num, const int *width, const int *pfx, size_t n, char *out, size_t len)
{
	static const char *const prefixes[] = { "n", "gpu", "cn-" };
	size_t pos = 0;
	bool first = true;
	for (int p = 0; p < 3; p++)
		for (int w = 1; w <= 3; w++) {
			unsigned set[64];
			size_t k = 0;
			for (size_t i = 0; i < n; i++)
				if (pfx[i] == p && width[i] == w)
					set[k++] = num[i];
			if (!k)
				continue;
			for (size_t a = 0; a < k; a++)   /* insertion sort */
				for (size_t b = a; b > 0 && set[b - 1] > set[b]; b--) {
					unsigned t = set[b];
					set[b] = set[b - 1];
					set[b - 1] = t;
				}
			pos += (size_t)snprintf(out + pos, len - pos, "%s%s[", first ? "" : ",", prefixes[p]);
			first = false;
			for (size_t a = 0; a < k;) {
				size_t b = a;
				while (b + 1 < k && set[b + 1] == set[b] + 1)
					b++;
				if (b == a)
					pos += (size_t)snprintf(out + pos, len - pos, "%s%0*u", a ? "," : "", w, set[a]);
				else
					pos += (size_t)snprintf(out + pos, len - pos, "%s%0*u-%0*u", a ? "," : "", w,
								set[a], w, set[b]);
				a = b + 1;
			}
			pos += (size_t)snprintf(out + pos, len - pos, "]");
		}
}

Test(slurm, matches_a_naive_compressor)
{
	static const char *const prefixes[] = { "n", "gpu", "cn-" };
	static const unsigned maxv[] = { 0, 9, 99, 999 };
	unsigned seed = 12345;
	char list[4096], err[512];
	for (int round = 0; round < 2000; round++) {
		unsigned num[64];
		int width[64], pfx[64];
		size_t n = 0;
		size_t want = 1 + (seed = seed * 1103515245u + 12345u) % 40;
		while (n < want) {
			seed = seed * 1103515245u + 12345u;
			int p = (int)((seed >> 8) % 3), w = 1 + (int)((seed >> 12) % 3);
			unsigned v = (seed >> 16) % (maxv[w] + 1);
			/* width-1 numbers only below 10, so "%0*u" of a group is exactly its names */
			bool dup = false;
			for (size_t i = 0; i < n; i++)
				dup = dup || (pfx[i] == p && width[i] == w && num[i] == v);
			if (dup)
				continue;
			num[n] = v, width[n] = w, pfx[n] = p;
			n++;
		}
		compress(num, width, pfx, n, list, sizeof list);
		size_t got = 0;
		int rc = slurm_hostlist_expand(list, names, HOSTS_MAX, &got, err, sizeof err);
		cr_assert_eq(rc, 0, "%s: %s", list, err);
		cr_assert_eq(got, n, "%s: %zu names, want %zu", list, got, n);
		/* every generated name appears exactly once */
		for (size_t i = 0; i < n; i++) {
			char name[HOSTS_NAME_MAX];
			snprintf(name, sizeof name, "%s%0*u", prefixes[pfx[i]], width[i], num[i]);
			int seen = 0;
			for (size_t k = 0; k < got; k++)
				seen += !strcmp(names[k], name);
			cr_assert_eq(seen, 1, "%s: %s seen %d times", list, name, seen);
		}
	}
}

Test(slurm, cpus_per_node)
{
	uint32_t c[8];
	char err[256];
	cr_assert_eq(slurm_cpus_expand("4(x3),2", c, 4, err, sizeof err), 0, "%s", err);
	cr_expect(c[0] == 4 && c[1] == 4 && c[2] == 4 && c[3] == 2);
	cr_assert_eq(slurm_cpus_expand("16", c, 1, err, sizeof err), 0, "%s", err);
	cr_expect_eq(c[0], 16);
	cr_assert_eq(slurm_cpus_expand("1,2(x2)", c, 3, err, sizeof err), 0, "%s", err);
	cr_expect(c[0] == 1 && c[1] == 2 && c[2] == 2);
	static const char *const bad[] = { "", "4(x4)", "4(x2)", "4(3)", "4(x0)", "0", "4,", ",4", "4(x2", "a", "4 ,2",
					   "4(x2),2,1", "99999" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_expect_lt(slurm_cpus_expand(bad[i], c, 3, err, sizeof err), 0, "'%s' accepted", bad[i]);
}

static struct hosts *hosts_of(const char *yaml, char *err)
{
	struct scenario *sc = scenario_parse(yaml, strlen(yaml), "s.yaml", err, SCENARIO_ERR_MAX);
	cr_assert(sc, "%s", err);
	struct hosts *h = sc->hosts;
	sc->hosts = NULL;               /* ours now */
	scenario_destroy(&sc);
	cr_assert(h);
	return h;
}

Test(slurm, outside_an_allocation_one_error)
{
	char err[SCENARIO_ERR_MAX];
	struct hosts *h = hosts_of("stop: {time: 1s}\nworkers: 2\nhosts:\n  launcher: slurm\n  list:\n"
				   "    - {name: h0, address: 10.0.0.1, cores: 2}\n", err);
	struct slurm_env env = { 0 };
	cr_expect_lt(slurm_resolve(h, &env, err, sizeof err), 0);
	cr_expect(strstr(err, "s.yaml:4:3: error: launcher slurm needs a Slurm allocation"), "%s", err);
	env.job_id = "77";              /* a job id alone is not an allocation */
	cr_expect_lt(slurm_resolve(h, &env, err, sizeof err), 0);
	cr_expect(strstr(err, "needs a Slurm allocation"), "%s", err);
	hosts_destroy(&h);
}

Test(slurm, no_list_means_the_allocation)
{
	char err[SCENARIO_ERR_MAX];
	struct hosts *h = hosts_of("stop: {time: 1s}\nworkers: 2\nhosts: {launcher: slurm}\n", err);
	cr_expect_eq(h->n, 0);
	/* node names that resolve to no address: the error says to give addresses */
	struct slurm_env env = { .job_id = "12", .nodelist = "stalenet-no-such-node[1-2]", .cpus_per_node = "3(x2)" };
	cr_expect_lt(slurm_resolve(h, &env, err, sizeof err), 0);
	cr_expect(strstr(err, "host 'stalenet-no-such-node1': its address cannot be resolved"), "%s", err);
	hosts_destroy(&h);

	/* localhost resolves to loopback: refused */
	h = hosts_of("stop: {time: 1s}\nworkers: 2\nhosts: {launcher: slurm}\n", err);
	env = (struct slurm_env){ .job_id = "12", .nodelist = "localhost", .cpus_per_node = "3" };
	cr_expect_lt(slurm_resolve(h, &env, err, sizeof err), 0);
	cr_expect(strstr(err, "a loopback address"), "%s", err);
	cr_expect_eq(h->n, 1);
	cr_expect_str_eq(h->list[0].name, "localhost");
	cr_expect_eq(h->list[0].cores, 3);
	hosts_destroy(&h);

	/* without CPUs per node the cores are unknown */
	h = hosts_of("stop: {time: 1s}\nworkers: 2\nhosts: {launcher: slurm}\n", err);
	env = (struct slurm_env){ .job_id = "12", .nodelist = "h[1-2]" };
	cr_expect_lt(slurm_resolve(h, &env, err, sizeof err), 0);
	cr_expect(strstr(err, "cores are unknown"), "%s", err);
	hosts_destroy(&h);

	/* a malformed node list from the environment */
	h = hosts_of("stop: {time: 1s}\nworkers: 2\nhosts: {launcher: slurm}\n", err);
	env = (struct slurm_env){ .job_id = "12", .nodelist = "h[2-1]", .cpus_per_node = "1" };
	cr_expect_lt(slurm_resolve(h, &env, err, sizeof err), 0);
	cr_expect(strstr(err, "Slurm job 12: node list 'h[2-1]': range '2-1' runs backwards"), "%s", err);
	hosts_destroy(&h);
}

Test(slurm, a_list_is_checked_against_the_allocation)
{
	char err[SCENARIO_ERR_MAX];
	const char *y = "stop: {time: 1s}\nworkers: 2\nhosts:\n  launcher: slurm\n  list:\n"
			"    - {name: h0, address: 198.18.250.1}\n"
			"    - {name: h2, address: 198.18.250.3, cores: 1}\n";
	struct hosts *h = hosts_of(y, err);
	cr_assert_eq(h->n, 2);
	cr_expect_eq(h->list[0].cores, 0, "from the allocation");
	cr_expect_not(slurm_list_complete(h), "h0 has no cores yet");
	struct slurm_env env = { .job_id = "9", .nodelist = "h[0-2]", .cpus_per_node = "4(x2),6" };
	cr_assert_eq(slurm_resolve(h, &env, err, sizeof err), 0, "%s", err);
	cr_expect_eq(h->list[0].cores, 4);
	cr_expect_eq(h->list[1].cores, 1, "the list's cores win");
	cr_expect_str_eq(h->list[1].address, "198.18.250.3");
	cr_expect_str_eq(h->list[1].ssh, "root@198.18.250.3", "the ssh fallback's destination");
	cr_expect(slurm_list_complete(h));
	hosts_destroy(&h);
	h = hosts_of("stop: {time: 1s}\nworkers: 2\nhosts: {launcher: slurm}\n", err);
	cr_expect_not(slurm_list_complete(h), "no list");
	hosts_destroy(&h);

	h = hosts_of(y, err);
	env.nodelist = "h[0-1]";
	env.cpus_per_node = "4(x2)";
	cr_expect_lt(slurm_resolve(h, &env, err, sizeof err), 0);
	cr_expect(strstr(err, "s.yaml:7:7: error: host 'h2' is not a node of Slurm job 9 (its nodes: h[0-1])"), "%s",
		  err);
	hosts_destroy(&h);

	/* with ssh, an address stays required; with slurm a placement map needs a list */
	struct scenario *sc = scenario_parse("stop: {time: 1s}\nhosts: {list: [{name: a, cores: 1}]}\n", 54, "s.yaml",
					     err, sizeof err);
	cr_expect_null(sc);
	const char *m = "stop: {time: 1s}\nworkers: 2\nhosts: {launcher: slurm, placement: {server0: a}}\n";
	sc = scenario_parse(m, strlen(m), "s.yaml", err, sizeof err);
	cr_expect_null(sc);
	cr_expect(strstr(err, "a placement map needs hosts.list"), "%s", err);
}

Test(slurm, agent_argv)
{
	struct slurm_argv a;
	cr_assert_eq(slurm_agent_argv(&a, NULL, "node-07", "/opt/stalenet/bin/stalenet"), 0);
	const char *want[] = { "srun", "--nodes=1", "--ntasks=1", "--ntasks-per-node=1", "--nodelist=node-07",
			       "--overlap", "--whole", "--cpu-bind=none", "--input=all", "--kill-on-bad-exit=1",
			       "--job-name=stalenet-agent", "--quiet", "/opt/stalenet/bin/stalenet", "agent", NULL };
	for (size_t i = 0; want[i]; i++)
		cr_expect_str_eq(a.argv[i], want[i], "argv[%zu]", i);
	cr_expect_null(a.argv[sizeof want / sizeof want[0] - 1]);
	for (size_t i = 0; a.argv[i]; i++)
		cr_expect_neq(a.argv[i][0] == '-' && strstr(a.argv[i], "pty"), 1, "no pseudo terminal: %s", a.argv[i]);
	cr_expect_eq(slurm_agent_argv(&a, "/usr/bin/srun", "n1", "/x/stalenet"), 0);
	cr_expect_str_eq(a.argv[0], "/usr/bin/srun");
	cr_expect_lt(slurm_agent_argv(&a, NULL, "-n1", "/x/stalenet"), 0);
	cr_expect_lt(slurm_agent_argv(&a, NULL, "n1,n2", "/x/stalenet"), 0);
	cr_expect_lt(slurm_agent_argv(&a, NULL, "n1", "stalenet"), 0);
	cr_expect_lt(slurm_agent_argv(&a, NULL, "n1", "/x/stale net"), 0);
	cr_expect_lt(slurm_agent_argv(&a, NULL, "n1", "/x/$(id)"), 0);
}

/* Random strings over the list alphabet: each is refused, or every name it gives is a valid,
 * distinct host name; nothing else (no crash, no name on failure). */
Test(slurm, random_lists_refused_or_valid)
{
	static const char alpha[] = "h0123456789[]-,a";
	unsigned seed = 99;
	char list[40], err[512];
	int ok = 0;
	for (int round = 0; round < 50000; round++) {
		size_t len = 1 + (seed = seed * 1103515245u + 12345u) % (sizeof list - 1);
		for (size_t i = 0; i < len; i++) {
			seed = seed * 1103515245u + 12345u;
			list[i] = alpha[(seed >> 16) % (sizeof alpha - 1)];
		}
		list[len] = 0;
		size_t n = 77;
		int rc = slurm_hostlist_expand(list, names, HOSTS_MAX, &n, err, sizeof err);
		if (rc) {
			cr_assert_eq(n, 0, "%s", list);
			cr_assert(err[0], "%s: no reason", list);
			continue;
		}
		ok++;
		cr_assert_gt(n, 0, "%s", list);
		for (size_t i = 0; i < n; i++) {
			cr_assert(names[i][0] && names[i][0] != '-' && strspn(names[i], "abcdefghijklmnopqrstuvwxyz0123456789-") ==
					  strlen(names[i]), "%s: '%s'", list, names[i]);
			for (size_t k = 0; k < i; k++)
				cr_assert_str_neq(names[i], names[k], "%s", list);
		}
	}
	cr_expect_gt(ok, 100, "some random lists are valid (%d)", ok);
}
