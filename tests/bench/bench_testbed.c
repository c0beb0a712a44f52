/* Bench: create and delete an N-node star testbed (namespaces, veths, bridge, addresses,
 * links up, UDP reachability checked) and report the times against Mininet's published
 * 200-node figures (3.38 s create, 5.38 s delete). Then 1000 nodes with the neighbour
 * thresholds raised. Everything goes through a journal in a temporary run directory, and the
 * journal is replayed at the end, so the bench leaves nothing behind even when it fails.
 *
 * Usage: bench_testbed [N ...]   (default: 200 200 200 1000). Needs root; skips otherwise.
 * An N written "uN" builds N nodes without pinned neighbours (the cost of pinning: N^2 entries).
 *
 * "Delete" is the time until every namespace name is gone and the host sysctls are restored;
 * the kernel frees the namespaces asynchronously after that, which the next round's create
 * time would show. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "orchestrator/cleanup.h"
#include "orchestrator/journal.h"
#include "orchestrator/testbed.h"

static int run_one(int n, bool pin, const char *dir, int round)
{
	char prefix[16], err[256], rdir[512];
	struct journal *j = NULL;
	struct testbed *tb = NULL;
	struct testbed_spec spec = { .n_nodes = n, .raise_neigh = n > 500 };
	const struct testbed_timing *tm;
	struct testbed_timing timing;
	int64_t t0, t_create, t_delete;
	int rc = 0;

	if (testbed_random_prefix(prefix, sizeof prefix) < 0)
		return -1;
	snprintf(rdir, sizeof rdir, "%s/run%d", dir, round);
	mkdir(rdir, 0755);
	j = journal_create(rdir, prefix, err, sizeof err);
	if (!j) {
		fprintf(stderr, "journal: %s\n", err);
		return -1;
	}
	spec.prefix = prefix;
	spec.no_pin_neigh = !pin;
	t0 = clock_now_ns();
	tb = testbed_create(&spec, j, err, sizeof err);
	t_create = clock_now_ns() - t0;
	if (!tb) {
		fprintf(stderr, "create %d nodes: %s\n", n, err);
		rc = -1;
		goto out;
	}
	timing = *testbed_timing(tb);
	tm = &timing;
	t0 = clock_now_ns();
	testbed_destroy(&tb);
	t_delete = clock_now_ns() - t0;
	printf("%5d nodes%s: create %.3f s (netns %.3f, links %.3f, addrs %.3f, reach %.3f)  "
	       "delete %.3f s",
	       n, pin ? "" : " (unpinned)", t_create / 1e9, tm->netns_ns / 1e9, tm->links_ns / 1e9, tm->addrs_ns / 1e9,
	       tm->reach_ns / 1e9, t_delete / 1e9);
	if (n == 200)
		printf("   [Mininet: 3.38 s / 5.38 s]");
	printf("\n");
out:
	if (cleanup_journal(j) < 0)
		rc = -1;
	journal_destroy(&j);
	return rc;
}

int main(int argc, char **argv)
{
	static const int defaults[] = { 200, 200, 200, 1000 };
	char dir[] = "/tmp/stalenet-bench-XXXXXX";
	int fail = 0;

	log_init("bench_testbed", LOG_WARN);
	if (geteuid() != 0) {
		printf("bench_testbed: skipped (needs root for namespaces)\n");
		return 0;
	}
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			fail |= run_one(atoi(argv[i] + (argv[i][0] == 'u')), argv[i][0] != 'u', dir,
					i) < 0;
	} else {
		for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
			fail |= run_one(defaults[i], true, dir, (int)i) < 0;
	}
	return fail;
}
