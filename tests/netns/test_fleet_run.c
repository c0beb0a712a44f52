/* A whole fleet run through `stalenet run --plot` (root, namespaces): a registry and three
 * devices with a trained base, a drift on device0 and replay, over shaped links. What the run
 * leaves must agree with itself: recover.csv (the end-of-run verification) has one verified row
 * per version fleet.csv stored, fleet_summary.csv counts the same, the fleet figures exist, and
 * `stalenet recover OUT --all` exits 0. Skips without namespaces or the data set, fails instead
 * under STALENET_TESTS_MUST_RUN=1. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectors/schema.h"
#include "collectors/table.h"
#include "lib/log.h"
#include "tests/support/files.h"
#include "tests/support/fixture.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"

static char tmpdir[64];
static char stalenet_bin[PATH_MAX];
static int lock_fd = -1;

static void setup(void)
{
	log_init("test_fleet_run", LOG_WARN);
	support_require_netns("sntst-fleetprobe");
	support_require_dataset(DATA_DIR);
	if (!support_stalenet_path(stalenet_bin, sizeof stalenet_bin))
		support_skip_or_fail("build/stalenet not built");
	lock_fd = support_host_lock();
	support_tmpdir(tmpdir, sizeof tmpdir, "tfleet");
}

static void teardown(void)
{
	if (tmpdir[0])
		support_rm_rf(tmpdir);
	tmpdir[0] = '\0';
	support_host_unlock(&lock_fd);
}

/* Run stalenet with args (NULL-terminated, after the program name) to its end, bounded;
 * returns its exit status. */
static int stalenet(const char *log, char *const *args)
{
	char *argv[16] = { stalenet_bin };
	int status = -1, i = 1;
	pid_t pid;

	for (; args[i - 1] && i < 15; i++)
		argv[i] = args[i - 1];
	argv[i] = NULL;
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		execv(stalenet_bin, argv);
		_exit(127);
	}
	cr_assert_eq(support_wait_pid(pid, &status, 200000), 0, "stalenet %s did not end in 200 s", args[0]);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static struct table *load(const char *dir, const char *name)
{
	char path[256], err[256];
	struct table *t;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	t = table_load(path, NULL, err, sizeof err);
	cr_assert_not_null(t, "%s", err);
	return t;
}

Test(fleet_run, run_plot_recover, .init = setup, .fini = teardown, .timeout = 400)
{
	static const char yaml[] =
		"name: fleet-run-test\nseed: 5\nstop: {time: 10s}\n"
		"data: {set: fashion-mnist, partition: {scheme: classes, per_node: 3}}\n"
		"model: {kind: softmax}\ntrain: {batch: 32, lr: 0.05}\ntopology: {kind: fleet}\n"
		"fleet:\n  strategy: replay\n  sync: 10 steps\n  snapshot_every: 4\n"
		"  base: trained\n  base_steps: 30\n"
		"  drift:\n    - {at: 50 steps, devices: device0, add_classes: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
		"workers: 3\nlinkcheck: off\n"
		"network:\n  default: {delay: 5ms, rate: 20mbit}\n"
		"stragglers:\n  - {nodes: workers, compute: {delay: {dist: constant, value: 10ms}}}\n";
	char scen[128], out[128], log[128], err[256], path[256];
	char *run[] = { "run", scen, "--out", out, "--quiet", "--plot", NULL };
	char *rec[] = { "recover", out, "--all", NULL };
	struct table *fleet, *recov, *sum;
	size_t stored = 0;
	int c;

	snprintf(scen, sizeof scen, "%s/fleet.yaml", tmpdir);
	snprintf(out, sizeof out, "%s/out", tmpdir);
	snprintf(log, sizeof log, "%s/stalenet.log", tmpdir);
	support_write_file(scen, yaml);
	cr_assert_eq(stalenet(log, run), 0, "stalenet run failed (log %s)", log);

	snprintf(path, sizeof path, "%s/recover.csv", out);
	cr_assert_eq(trace_schema_check_file(path, "recover", err, sizeof err), 0, "%s", err);
	snprintf(path, sizeof path, "%s/fleet.csv", out);
	cr_assert_eq(trace_schema_check_file(path, "fleet", err, sizeof err), 0, "%s", err);
	fleet = load(out, "fleet.csv");
	c = table_col(fleet, "verify_ok");
	for (size_t r = 0; r < table_rows(fleet); r++)
		stored += strcmp(table_get(fleet, r, (size_t)c), "1") == 0;
	cr_assert_geq(stored, 9, "only %zu versions stored", stored);
	recov = load(out, "recover.csv");
	cr_assert_eq(table_rows(recov), stored);
	c = table_col(recov, "verify_ok");
	for (size_t r = 0; r < table_rows(recov); r++)
		cr_assert_str_eq(table_get(recov, r, (size_t)c), "1", "recover.csv row %zu", r);
	sum = load(out, "fleet_summary.csv");
	cr_assert_eq(table_rows(sum), 1);
	cr_assert_eq(strtoull(table_get(sum, 0, (size_t)table_col(sum, "versions")), NULL, 10), stored);
	cr_assert_eq(strtoull(table_get(sum, 0, (size_t)table_col(sum, "recover_versions")), NULL, 10), stored);
	cr_assert_str_eq(table_get(sum, 0, (size_t)table_col(sum, "recover_failed")), "0");
	cr_assert_str_eq(table_get(sum, 0, (size_t)table_col(sum, "devices")), "3");
	table_destroy(&fleet);
	table_destroy(&recov);
	table_destroy(&sum);
	for (int i = 0; i < 3; i++) {
		static const char *const figs[] = { "fleet_bytes", "fleet_lag", "fleet_recover" };

		snprintf(path, sizeof path, "%s/plots/%s.png", out, figs[i]);
		cr_assert_eq(access(path, R_OK), 0, "%s missing", path);
	}
	cr_assert_eq(stalenet(log, rec), 0, "stalenet recover --all failed (log %s)", log);
}
