/* orchestrator/recover: `stalenet recover` on a store written through node/fleet_store: every
 * version verifies, --out writes exactly the model, a tampered version fails with exit 1, bad
 * arguments exit 2. */
#include <criterion/criterion.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "collectors/schema.h"
#include "node/fleet_store.h"
#include "node/rng.h"
#include "orchestrator/cli.h"
#include "orchestrator/recover.h"
#include "tests/support/files.h"

#define N 500

static char dir[256], path[512];
static float models[6][N];

static void setup(void)
{
	char err[256];
	struct fleet_store *s;
	struct rng r;
	uint8_t *f;
	size_t len;
	uint32_t chain = 0;
	float got[N];

	cr_assert_not_null(support_tmpdir(dir, sizeof dir, "recover"));
	snprintf(path, sizeof path, "%s/%s", dir, FLEET_STORE_FILE);
	s = fleet_store_open(path, true, err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	cr_assert_eq(fleet_store_set_meta(s, N, 3), 0);
	rng_seed(&r, 9, 9);
	for (int i = 0; i < N; i++)
		models[0][i] = (float)rng_normal(&r);
	cr_assert_eq(fleet_codec_encode(FLEET_FULL, models[0], NULL, N, &f, &len), 0);
	cr_assert_eq(fleet_store_put_base(s, f, len), 0);
	free(f);
	for (const char *dev = "device0"; dev; dev = strcmp(dev, "device0") ? NULL : "device1") {
		chain = 0;
		for (int v = 1; v <= 5; v++) {
			struct fleet_version row;

			for (int i = 0; i < N; i++)
				models[v][i] = models[v - 1][i] + 0.01f * (float)rng_normal(&r);
			cr_assert_eq(fleet_codec_encode(FLEET_DELTA, models[v], models[v - 1], N, &f, &len), 0);
			cr_assert_eq(fleet_store_ingest(s, dev, v, v - 1, chain, models[v - 1], f, len, 0, 0,
							got, &row), 0);
			chain = row.chain_len;
			free(f);
		}
	}
	fleet_store_close(&s);
}

static void teardown(void)
{
	support_rm_rf(dir);
}

static int run(const char *a1, const char *a2, const char *a3, const char *a4)
{
	char *argv[6] = { "recover", (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL };
	int argc = 1;

	while (argc < 5 && argv[argc])
		argc++;
	return recover_cmd(argc, argv);
}

Test(recover, all_one_and_out, .init = setup, .fini = teardown)
{
	char out[600];
	size_t len;
	float *got;

	cr_assert_eq(run(dir, "--all", NULL, NULL), CLI_EXIT_OK);
	snprintf(out, sizeof out, "%s/m.bin", dir);
	cr_assert_eq(run(dir, "device1@4", "--out", out), CLI_EXIT_OK);
	got = (float *)support_read_file(out, &len);
	cr_assert_not_null(got);
	cr_assert_eq(len, sizeof models[4]);
	cr_assert_eq(memcmp(got, models[4], len), 0);
	free(got);
	cr_assert_eq(run(dir, "device1", "--out", out), CLI_EXIT_OK); /* latest = 5 (models[] holds device1) */
	got = (float *)support_read_file(out, &len);
	cr_assert_eq(memcmp(got, models[5], len), 0);
	free(got);
	cr_assert_eq(run(dir, "device0@6", NULL, NULL), CLI_EXIT_FAILED);
	cr_assert_eq(run(dir, "device9", NULL, NULL), CLI_EXIT_FAILED);
}

Test(recover, tampered_and_usage, .init = setup, .fini = teardown)
{
	sqlite3 *db;

	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "UPDATE versions SET hash = zeroblob(32) WHERE device = 'device1'"
				      " AND version = 2", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	cr_assert_eq(run(dir, "device0@5", NULL, NULL), CLI_EXIT_OK);
	cr_assert_eq(run(dir, "device1@2", NULL, NULL), CLI_EXIT_FAILED);
	cr_assert_eq(run(dir, "--all", NULL, NULL), CLI_EXIT_FAILED);
	cr_assert_eq(run(dir, NULL, NULL, NULL), CLI_EXIT_USAGE);
	cr_assert_eq(run(dir, "device0@0", NULL, NULL), CLI_EXIT_USAGE);
	cr_assert_eq(run(dir, "../etc@1", NULL, NULL), CLI_EXIT_USAGE);
	cr_assert_eq(run(dir, "device0", "--all", NULL), CLI_EXIT_USAGE);
	cr_assert_eq(run("/nonexistent-run", "--all", NULL, NULL), CLI_EXIT_FAILED);
}

/* The end-of-run pass: one recover.csv row per stored version, the tampered one with
 * verify_ok 0, chains as the store made them (frames applied; a snapshot every 3: 1, 2, 1, 2, 3). */
Test(recover, verify_run_writes_recover_csv, .init = setup, .fini = teardown)
{
	struct recover_totals tot;
	char err[256], csv[600], *text;
	sqlite3 *db;
	size_t len;

	cr_assert_eq(recover_verify_run(dir, &tot, err, sizeof err), 0, "%s", err);
	cr_assert_eq(tot.versions, 10);
	cr_assert_eq(tot.verified, 10);
	cr_assert(tot.recover_s_max >= tot.recover_s_mean && tot.recover_s_mean > 0);
	snprintf(csv, sizeof csv, "%s/recover.csv", dir);
	text = support_read_file(csv, &len);
	cr_assert_not_null(text);
	cr_assert(strncmp(text, TRACE_HEADER_RECOVER "\ndevice0,1,delta,1,",
			  strlen(TRACE_HEADER_RECOVER "\ndevice0,1,delta,1,")) == 0, "%s", text);
	cr_assert(strstr(text, "\ndevice0,3,full,1,"), "%s", text);
	cr_assert(strstr(text, "\ndevice1,5,delta,3,"), "%s", text);
	free(text);

	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "UPDATE versions SET hash = zeroblob(32) WHERE device = 'device1'"
				      " AND version = 2", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	cr_assert_eq(recover_verify_run(dir, &tot, err, sizeof err), 0, "%s", err);
	cr_assert_eq(tot.versions, 10);
	cr_assert_eq(tot.verified, 9);
	text = support_read_file(csv, &len);
	cr_assert(strstr(text, "\ndevice1,2,delta,") && strstr(strstr(text, "\ndevice1,2,delta,"), ",0\n"),
		  "%s", text);
	free(text);
	cr_assert_eq(recover_verify_run("/nonexistent-run", &tot, err, sizeof err), -ENOENT);
}

/* --all on a sweep directory: every run holding a store is verified (runs are the
 * subdirectories holding meta.json); one tampered version in one run fails the whole; a sweep
 * without any store fails. */
Test(recover, all_over_a_sweep, .init = setup, .fini = teardown)
{
	char sweep[512], run_dir[600], file[700];
	sqlite3 *db;

	snprintf(sweep, sizeof sweep, "%s/sweep", dir);
	cr_assert_eq(mkdir(sweep, 0755), 0);
	cr_assert_eq(run(sweep, "--all", NULL, NULL), CLI_EXIT_FAILED, "an empty sweep verifies nothing");
	for (int k = 0; k < 2; k++) {
		size_t len;
		char *bytes;

		snprintf(run_dir, sizeof run_dir, "%s/point%d", sweep, k);
		cr_assert_eq(mkdir(run_dir, 0755), 0);
		snprintf(file, sizeof file, "%s/meta.json", run_dir);
		support_write_file(file, "{}\n");
		bytes = support_read_file(path, &len);
		cr_assert_not_null(bytes);
		snprintf(file, sizeof file, "%s/%s", run_dir, FLEET_STORE_FILE);
		FILE *f = fopen(file, "we");
		cr_assert_not_null(f);
		cr_assert_eq(fwrite(bytes, 1, len, f), len);
		fclose(f);
		free(bytes);
	}
	cr_assert_eq(run(sweep, "--all", NULL, NULL), CLI_EXIT_OK);
	snprintf(file, sizeof file, "%s/point1/%s", sweep, FLEET_STORE_FILE);
	cr_assert_eq(sqlite3_open(file, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "UPDATE versions SET hash = zeroblob(32) WHERE device = 'device0'"
				      " AND version = 3", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	cr_assert_eq(run(sweep, "--all", NULL, NULL), CLI_EXIT_FAILED);
	cr_assert_eq(run(sweep, "device0@1", NULL, NULL), CLI_EXIT_FAILED, "one version needs a run directory");
}
