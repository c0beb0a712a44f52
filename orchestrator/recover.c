/* orchestrator/recover: see recover.h. */
#include "orchestrator/recover.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectors/schema.h"
#include "collectors/summary.h"
#include "lib/clock.h"
#include "lib/fdio.h"
#include "lib/limits.h"
#include "lib/safefile.h"
#include "node/fleet_store.h"
#include "orchestrator/cli.h"

static const char usage[] = "usage: stalenet recover RUN_DIR DEVICE[@VERSION] [--out FILE]\n"
			    "       stalenet recover RUN_DIR|SWEEP_DIR --all\n";

struct rows {
	struct fleet_version *v;
	size_t n, cap;
};

static int collect(const struct fleet_version *v, void *arg)
{
	struct rows *r = arg;

	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		struct fleet_version *p = realloc(r->v, cap * sizeof *p);

		if (!p)
			return -ENOMEM;
		r->v = p;
		r->cap = cap;
	}
	r->v[r->n++] = *v;
	return 0;
}

/* Rebuild one version and print its line. Returns 0 verified, 1 not, negative errno. */
static int one(struct fleet_store *s, const char *device, int64_t version, float *out,
	       double *secs)
{
	struct fleet_version row;
	char hex[2 * FLEET_HASH_BYTES + 1];
	uint32_t chain = 0;
	int64_t t0;
	int rc;

	if ((rc = fleet_store_get(s, device, version, &row)) < 0) {
		printf("%s@%lld FAILED %s\n", device, (long long)version,
		       rc == -ENOENT ? "no such version" : strerror(-rc));
		return 1;
	}
	t0 = clock_now_ns();
	rc = fleet_store_rebuild(s, device, version, out, &chain);
	*secs = (double)(clock_now_ns() - t0) / 1e9;
	for (int i = 0; i < FLEET_HASH_BYTES; i++)
		snprintf(hex + 2 * i, 3, "%02x", row.hash[i]);
	if (rc == -ENOMEM)
		return rc;
	printf("%s@%lld %s strategy=%s chain=%u recover_s=%.6f hash=%s%s%s\n", device,
	       (long long)version, rc == 0 ? "ok" : "FAILED", fleet_strategy_name(row.strategy), chain,
	       *secs, hex, rc ? " error=" : "", rc ? strerror(-rc) : "");
	return rc == 0 ? 0 : 1;
}

static int write_model(const char *path, const float *m, size_t n)
{
	int fd = safefile_open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int rc;

	if (fd < 0)
		return fd;
	rc = fdio_write_all(fd, m, n * sizeof(float), NULL);
	if (close(fd) < 0 && !rc)
		rc = -errno;
	return rc;
}

/* --all over one run directory's store: every version rebuilt and printed, then the closing
 * line. *versions and *bad count what was rebuilt and what failed. Returns CLI_EXIT_OK,
 * CLI_EXIT_FAILED (a version that did not verify, or no readable store). */
static int verify_all(const char *run_dir, size_t *versions, size_t *bad)
{
	char path[4096], err[512];
	struct fleet_store *s = NULL;
	struct rows rows = { 0 };
	float *model = NULL;
	double sum = 0, max = 0, secs;
	uint32_t n, k;
	int rc = CLI_EXIT_FAILED, r;

	*versions = *bad = 0;
	if ((size_t)snprintf(path, sizeof path, "%s/%s", run_dir, FLEET_STORE_FILE) >= sizeof path) {
		fprintf(stderr, "stalenet recover: %s: path too long\n", run_dir);
		return rc;
	}
	if (!(s = fleet_store_open(path, false, err, sizeof err))) {
		fprintf(stderr, "stalenet recover: %s\n", err);
		return rc;
	}
	if (fleet_store_get_meta(s, &n, &k) < 0) {
		fprintf(stderr, "stalenet recover: %s: no valid fleet store\n", path);
		goto out;
	}
	if (!(model = malloc((size_t)n * sizeof(float))))
		goto out;
	if ((r = fleet_store_each(s, collect, &rows)) < 0) {
		fprintf(stderr, "stalenet recover: %s: %s\n", path, strerror(-r));
		goto out;
	}
	for (size_t i = 0; i < rows.n; i++) {
		if ((r = one(s, rows.v[i].device, rows.v[i].version, model, &secs)) < 0)
			goto out;
		*bad += r != 0;
		sum += secs;
		if (secs > max)
			max = secs;
	}
	*versions = rows.n;
	printf("recover: %zu versions, %zu verified, %zu failed, recover_s mean %.6f max %.6f\n",
	       rows.n, rows.n - *bad, *bad, rows.n ? sum / (double)rows.n : 0.0, max);
	rc = *bad ? CLI_EXIT_FAILED : CLI_EXIT_OK;
out:
	free(rows.v);
	free(model);
	fleet_store_close(&s);
	return rc;
}

static bool has_store(const char *dir)
{
	char path[4096];

	return (size_t)snprintf(path, sizeof path, "%s/%s", dir, FLEET_STORE_FILE) < sizeof path &&
	       access(path, F_OK) == 0;
}

/* --all over a sweep directory: every run holding a fleet store, in name order, then a total.
 * A sweep without any store is a failure (nothing was verified). */
static int verify_sweep(const char *dir)
{
	char **names = NULL, sub[4096];
	size_t n = 0, runs = 0, versions = 0, bad = 0, failed_runs = 0;
	bool single = false;
	int r = summary_list_runs(dir, &names, &n, &single);

	if (r < 0) {
		fprintf(stderr, "stalenet recover: %s: %s\n", dir, strerror(-r));
		return CLI_EXIT_FAILED;
	}
	for (size_t i = 0; i < n; i++) {
		size_t v = 0, b = 0;

		if (!single && (size_t)snprintf(sub, sizeof sub, "%s/%s", dir, names[i]) < sizeof sub &&
		    has_store(sub)) {
			printf("run %s\n", names[i]);
			runs++;
			if (verify_all(sub, &v, &b) != CLI_EXIT_OK)
				failed_runs++;
			versions += v;
			bad += b;
		}
		free(names[i]);
	}
	free(names);
	if (!runs) {
		fprintf(stderr, "stalenet recover: %s: no %s here or in its runs\n", dir, FLEET_STORE_FILE);
		return CLI_EXIT_FAILED;
	}
	printf("recover: %zu runs, %zu versions, %zu verified, %zu failed\n", runs, versions,
	       versions - bad, bad);
	return failed_runs ? CLI_EXIT_FAILED : CLI_EXIT_OK;
}

int recover_cmd(int argc, char **argv)
{
	const char *run_dir = NULL, *target = NULL, *out_path = NULL;
	char path[4096], err[512], device[FLEET_STORE_DEVICE_MAX + 1];
	struct fleet_store *s = NULL;
	float *model = NULL;
	bool all = false;
	int64_t version = 0;
	uint32_t n, k;
	int rc = CLI_EXIT_USAGE;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--all"))
			all = true;
		else if (!strcmp(argv[i], "--out") && i + 1 < argc)
			out_path = argv[++i];
		else if (argv[i][0] == '-')
			goto usage;
		else if (!run_dir)
			run_dir = argv[i];
		else if (!target)
			target = argv[i];
		else
			goto usage;
	}
	if (!run_dir || all == !!target || (all && out_path))
		goto usage;
	if (target) {
		const char *at = strchr(target, '@');
		size_t dl = at ? (size_t)(at - target) : strlen(target);
		char *end;

		if (dl == 0 || dl > FLEET_STORE_DEVICE_MAX)
			goto bad_target;
		memcpy(device, target, dl);
		device[dl] = '\0';
		if (!fleet_store_device_ok(device))
			goto bad_target;
		if (at) {
			errno = 0;
			long long v = strtoll(at + 1, &end, 10);

			if (errno || end == at + 1 || *end || v < 1)
				goto bad_target;
			version = v;
		}
	}
	if (all) {
		size_t versions, bad;

		return has_store(run_dir) ? verify_all(run_dir, &versions, &bad) : verify_sweep(run_dir);
	}
	if ((size_t)snprintf(path, sizeof path, "%s/%s", run_dir, FLEET_STORE_FILE) >= sizeof path) {
		fprintf(stderr, "stalenet recover: %s: path too long\n", run_dir);
		goto out;
	}
	s = fleet_store_open(path, false, err, sizeof err);
	if (!s) {
		fprintf(stderr, "stalenet recover: %s\n", err);
		rc = CLI_EXIT_FAILED;
		goto out;
	}
	rc = CLI_EXIT_FAILED;
	if (fleet_store_get_meta(s, &n, &k) < 0) {
		fprintf(stderr, "stalenet recover: %s: no valid fleet store\n", path);
		goto out;
	}
	model = malloc((size_t)n * sizeof(float));
	if (!model)
		goto out;
	{
		struct fleet_version last;
		double secs;

		if (!version) {
			if (fleet_store_latest(s, device, &last) < 0) {
				fprintf(stderr, "stalenet recover: %s: no versions stored\n", device);
				goto out;
			}
			version = last.version;
		}
		if (one(s, device, version, model, &secs) != 0)
			goto out;
		if (out_path) {
			int w = write_model(out_path, model, n);

			if (w < 0) {
				fprintf(stderr, "stalenet recover: %s: %s\n", out_path, strerror(-w));
				goto out;
			}
		}
		rc = CLI_EXIT_OK;
	}
	goto out;
bad_target:
	fprintf(stderr, "stalenet recover: '%s': expected DEVICE or DEVICE@VERSION (VERSION >= 1)\n",
		target);
	goto out;
usage:
	fputs(usage, stderr);
out:
	free(model);
	fleet_store_close(&s);
	return rc;
}

/* The pass behind recover.csv: the same rebuild as `recover --all`, timed per version, written
 * as a trace instead of printed. Device names are checked by the store's reader (a strict
 * alphabet), so no field needs quoting. */
int recover_verify_run(const char *run_dir, struct recover_totals *tot, char *err, size_t errlen)
{
	struct safefile_tmp tmp = { .dirfd = -1 };
	struct fleet_store *s = NULL;
	struct rows rows = { 0 };
	char path[4096];
	float *model = NULL;
	FILE *f = NULL;
	double sum = 0;
	uint32_t n, k;
	int rc;

	memset(tot, 0, sizeof *tot);
	if ((size_t)snprintf(path, sizeof path, "%s/%s", run_dir, FLEET_STORE_FILE) >= sizeof path) {
		snprintf(err, errlen, "%s: path too long", run_dir);
		return -ENAMETOOLONG;
	}
	if (access(path, F_OK) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -ENOENT;
	}
	s = fleet_store_open(path, false, err, errlen);
	if (!s)
		return -EINVAL;
	if ((rc = fleet_store_get_meta(s, &n, &k)) < 0) {
		snprintf(err, errlen, "%s: no valid fleet store", path);
		goto out;
	}
	if (!(model = malloc((size_t)n * sizeof(float)))) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if ((rc = fleet_store_each(s, collect, &rows)) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		goto out;
	}
	snprintf(path, sizeof path, "%s/recover.csv", run_dir);
	if (!(f = safefile_replace_begin(&tmp, path, 0644))) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	fputs(TRACE_HEADER_RECOVER "\n", f);
	for (size_t i = 0; i < rows.n; i++) {
		const struct fleet_version *v = &rows.v[i];
		uint32_t chain = 0;
		int64_t t0 = clock_now_ns();
		int r = fleet_store_rebuild(s, v->device, v->version, model, &chain);
		double secs = (double)(clock_now_ns() - t0) / 1e9;

		if (r == -ENOMEM) {
			rc = r;
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		fprintf(f, "%s,%lld,%s,%u,%.6f,%d\n", v->device, (long long)v->version,
			fleet_strategy_name(v->strategy), chain, secs, r == 0);
		tot->versions++;
		tot->verified += r == 0;
		sum += secs;
		if (secs > tot->recover_s_max)
			tot->recover_s_max = secs;
	}
	tot->recover_s_mean = rows.n ? sum / (double)rows.n : 0;
	f = NULL;
	if ((rc = safefile_replace_commit(&tmp)) < 0)
		snprintf(err, errlen, "write %s: %s", path, strerror(-rc));
out:
	if (f)
		safefile_replace_abort(&tmp);
	free(rows.v);
	free(model);
	fleet_store_close(&s);
	return rc;
}
