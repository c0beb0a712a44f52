/* The hosts section: parsed from a scenario and from a --hosts file; every malformed host list
 * fails with one FILE:LINE:COL error at the fault; no hosts section leaves sc->hosts NULL. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orchestrator/hosts.h"
#include "orchestrator/scenario.h"
#include "tests/support/files.h"

#define S "stop: {time: 10s}\n"

static struct scenario *parse(const char *y, char *err)
{
	return scenario_parse(y, strlen(y), "h.yaml", err, SCENARIO_ERR_MAX);
}

Test(hosts, absent_means_one_host)
{
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc = parse(S "workers: 3\n", err);
	cr_assert(sc, "%s", err);
	cr_expect_null(sc->hosts);
	scenario_destroy(&sc);
}

Test(hosts, full_section)
{
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc = parse(S "workers: 3\n"
				      "hosts:\n"
				      "  launcher: ssh\n"
				      "  list:\n"
				      "    - {name: a, address: 198.18.200.1, ssh: admin@lab-a.example, cores: 8}\n"
				      "    - {name: b-2, address: 198.18.200.2, cores: 2}\n"
				      "  placement: {server0: a, 'worker[0-2]': b-2}\n", err);
	cr_assert(sc, "%s", err);
	const struct hosts *h = sc->hosts;
	cr_assert(h);
	cr_expect_eq(h->launcher, HOSTS_LAUNCHER_SSH);
	cr_assert_eq(h->n, 2);
	cr_expect_str_eq(h->list[0].name, "a");
	cr_expect_eq(h->list[0].addr, (198u << 24) | (18u << 16) | (200u << 8) | 1u);
	cr_expect_str_eq(h->list[0].ssh, "admin@lab-a.example");
	cr_expect_eq(h->list[0].cores, 8);
	cr_expect_str_eq(h->list[1].ssh, "root@198.18.200.2", "default ssh destination");
	cr_expect_eq(h->list[1].line, 7);
	cr_assert_eq(h->n_map, 2);
	cr_expect_str_eq(h->map[1].nodes, "worker[0-2]");
	cr_expect_eq(h->map[1].host, 1);
	cr_expect_eq(h->map[1].line, 8);
	cr_expect_eq(hosts_total_cores(h), 10);
	cr_expect_eq(hosts_find(h, "b-2"), 1);
	cr_expect_eq(hosts_find(h, "c"), -1);
	scenario_destroy(&sc);
}

struct bad {
	const char *yaml;
	unsigned line, col;
	const char *substr;
};

#define H "hosts:\n  list:\n"
#define A "    - {name: a, address: 198.18.200.1, cores: 2}\n"

static const struct bad cases[] = {
	{ S "hosts: 3\n", 2, 8, "hosts is a scalar" },
	{ S "hosts: {launcher: ssh}\n", 2, 8, "hosts has no list" },
	{ S "hosts: {list: []}\n", 2, 15, "empty" },
	{ S "hosts: {launcher: mpi, list: []}\n", 2, 19, "expected ssh|slurm" },
	{ S "hosts: {lists: []}\n", 2, 9, "unknown key 'lists' in hosts" },
	{ S H A "    - {name: a, address: 198.18.200.2, cores: 2}\n", 5, 7, "duplicate host name 'a' (first at line 4)" },
	{ S H A "    - {name: b, address: 198.18.200.1, cores: 2}\n", 5, 7, "has the address 198.18.200.1 of host 'a'" },
	{ S H "    - {name: a, address: 300.1.1.1, cores: 2}\n", 4, 26, "not an IPv4 address" },
	{ S H "    - {name: a, address: lab-a, cores: 2}\n", 4, 26, "not an IPv4 address" },
	{ S H "    - {name: a, address: 224.0.0.5, cores: 2}\n", 4, 26, "not a unicast address" },
	{ S H "    - {name: a, address: 0.0.0.0, cores: 2}\n", 4, 26, "not a unicast address" },
	{ S H "    - {name: A_1, address: 198.18.200.1, cores: 2}\n", 4, 14, "host name 'A_1' is not valid" },
	{ S H "    - {name: a, address: 198.18.200.1, ssh: -oProxyCommand=sh, cores: 2}\n", 4, 45,
	  "is not a destination" },
	{ S H "    - {name: a, address: 198.18.200.1, ssh: 'root@h;reboot', cores: 2}\n", 4, 45,
	  "is not a destination" },
	{ S H "    - {name: a, address: 198.18.200.1, ssh: 'root@-x', cores: 2}\n", 4, 45, "is not a destination" },
	{ S H "    - {name: a, address: 198.18.200.1, cores: 0}\n", 4, 47, "cores '0' is not a whole number" },
	{ S H "    - {name: a, address: 198.18.200.1}\n", 4, 7, "has no cores" },
	{ S H "    - {name: a, cores: 1}\n", 4, 7, "has no address" },
	{ S H "    - {address: 198.18.200.1, cores: 1}\n", 4, 7, "without a name" },
	{ S H "    - {name: a, address: 198.18.200.1, cores: 1, user: x}\n", 4, 50, "unknown key 'user'" },
	{ S H A "  placement: spread\n", 5, 14, "placement 'spread' is not valid" },
	{ S H A "  placement: {server0: b}\n", 5, 24, "host 'b', which is not in hosts.list" },
	{ S H A "  placement: {}\n", 5, 14, "placement map is empty" },
};

Test(hosts, errors_at_the_fault)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char err[SCENARIO_ERR_MAX], want[64];
		struct scenario *sc = parse(cases[i].yaml, err);
		cr_expect_null(sc, "case %zu parsed", i);
		if (sc) {
			scenario_destroy(&sc);
			continue;
		}
		snprintf(want, sizeof want, "h.yaml:%u:%u: error: ", cases[i].line, cases[i].col);
		cr_expect(!strncmp(err, want, strlen(want)), "case %zu: want %s got %s", i, want, err);
		cr_expect(strstr(err, cases[i].substr), "case %zu: want '%s' in %s", i, cases[i].substr, err);
		cr_expect_null(strchr(err, '\n'), "case %zu: one line", i);
	}
}

Test(hosts, file_with_or_without_wrapper)
{
	char dir[256], path[300], err[SCENARIO_ERR_MAX];
	cr_assert(support_tmpdir(dir, sizeof dir, "hosts"));
	snprintf(path, sizeof path, "%s/hosts.yaml", dir);

	support_write_file(path, "launcher: slurm\nlist:\n  - {name: n1, address: 10.0.0.1, cores: 4}\n");
	struct hosts *h = hosts_load(path, err, sizeof err);
	cr_assert(h, "%s", err);
	cr_expect_eq(h->launcher, HOSTS_LAUNCHER_SLURM);
	cr_expect_eq(h->n, 1);
	hosts_destroy(&h);
	cr_expect_null(h);

	support_write_file(path, "hosts:\n  list:\n    - {name: n1, address: 10.0.0.1, cores: 4}\n"
				 "    - {name: n1, address: 10.0.0.2, cores: 4}\n");
	h = hosts_load(path, err, sizeof err);
	cr_expect_null(h);
	char want[400];
	snprintf(want, sizeof want, "%s:4:7: error: duplicate host name 'n1'", path);
	cr_expect(!strncmp(err, want, strlen(want)), "got %s", err);

	snprintf(path, sizeof path, "%s/missing.yaml", dir);
	cr_expect_null(hosts_load(path, err, sizeof err));
	cr_expect(strstr(err, "cannot open"), "%s", err);
	support_rm_rf(dir);
}

Test(hosts, parse_from_text)
{
	/* hosts_parse is hosts_load without the file: the same wrapper rule, the text's name in
	 * FILE:LINE:COL errors */
	static const char ok[] = "hosts:\n  list:\n    - {name: n1, address: 10.0.0.1, cores: 4}\n"
				 "    - {name: n2, address: 10.0.0.2, ssh: admin@n2.lab, cores: 2}\n";
	static const char bad[] = "list:\n  - {name: n1, address: 10.0.0.1, cores: 0}\n";
	char err[SCENARIO_ERR_MAX];
	struct hosts *h = hosts_parse(ok, sizeof ok - 1, "mem.yaml", err, sizeof err);

	cr_assert(h, "%s", err);
	cr_expect_eq(h->launcher, HOSTS_LAUNCHER_SSH);
	cr_assert_eq(h->n, 2);
	cr_expect_str_eq(h->list[1].ssh, "admin@n2.lab");
	cr_expect_str_eq(h->list[0].ssh, "root@10.0.0.1");
	cr_expect_eq(hosts_total_cores(h), 6);
	hosts_destroy(&h);
	cr_expect_null(hosts_parse(bad, sizeof bad - 1, "mem.yaml", err, sizeof err));
	cr_expect(!strncmp(err, "mem.yaml:2:", 11), "got %s", err);
}
