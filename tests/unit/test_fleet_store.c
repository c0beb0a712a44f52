/* node/fleet_store: versions ingested through every strategy and rebuilt bit-exactly at every
 * version against an in-memory reference (a copy of each version's model), snapshots bounding
 * the chain, resent copies recognised, the database in WAL mode, and a hostile file (flipped
 * payload, broken chain, parent loop, wrong sizes, not a regular file) refused. */
#include <criterion/criterion.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/fleet_store.h"
#include "node/rng.h"
#include "tests/support/files.h"

#define N 2000
#define VERSIONS 14
#define SNAP 4

static char dir[256], path[512];
static float base[N], ref[VERSIONS + 1][N];

static void setup(void)
{
	cr_assert_not_null(support_tmpdir(dir, sizeof dir, "fleet_store"));
	snprintf(path, sizeof path, "%s/%s", dir, FLEET_STORE_FILE);
}

static void teardown(void)
{
	support_rm_rf(dir);
}

/* device0: versions 1..VERSIONS, cycling delta, sparse, full; each a small training step on
 * the last. Keeps every version's model in ref[] as the reference. */
static void fill(struct fleet_store *s)
{
	float model[N], res[N] = { 0 }, prev[N], got[N];
	struct rng r;
	uint8_t *f;
	size_t len;
	uint32_t chain = 0;

	rng_seed(&r, 3, 4);
	for (int i = 0; i < N; i++)
		base[i] = (float)rng_normal(&r) * 0.1f;
	cr_assert_eq(fleet_store_set_meta(s, N, SNAP), 0);
	cr_assert_eq(fleet_codec_encode(FLEET_FULL, base, NULL, N, &f, &len), 0);
	cr_assert_eq(fleet_store_put_base(s, f, len), 0);
	cr_assert_eq(fleet_store_put_base(s, f, len), 0); /* the same base again: no-op */
	free(f);
	memcpy(prev, base, sizeof prev);
	memcpy(ref[0], base, sizeof base);
	for (int v = 1; v <= VERSIONS; v++) {
		struct fleet_version row;
		enum fleet_strategy st = (enum fleet_strategy)(FLEET_FULL + v % 3);

		for (int i = 0; i < N; i++)
			model[i] = prev[i] - 1e-3f * (float)rng_normal(&r);
		if (st == FLEET_SPARSE)
			cr_assert_eq(fleet_codec_encode_sparse(model, prev, res, N, N / 5, &f, &len), 0);
		else
			cr_assert_eq(fleet_codec_encode(st, model, prev, N, &f, &len), 0);
		cr_assert_eq(fleet_store_ingest(s, "device0", v, v - 1, chain, prev, f, len, v, v + 0.5,
						got, &row), 0);
		cr_assert_eq(memcmp(got, model, sizeof got), 0);
		cr_assert_leq(row.chain_len, SNAP - 1, "v%d chain %u", v, row.chain_len);
		cr_assert_eq(row.bytes_tx, len);
		/* The same copy again (a resend): recognised, not stored twice. */
		cr_assert_eq(fleet_store_ingest(s, "device0", v, v - 1, chain, prev, f, len, v, v + 1,
						got, &row), 1);
		chain = row.chain_len;
		free(f);
		memcpy(prev, model, sizeof prev);
		memcpy(ref[v], model, sizeof model);
	}
}

Test(fleet_store, ingest_rebuild_every_version, .init = setup, .fini = teardown)
{
	char err[256];
	struct fleet_store *s = fleet_store_open(path, true, err, sizeof err);
	float out[N];
	uint32_t chain, n, k;
	struct fleet_version last;

	cr_assert_not_null(s, "%s", err);
	fill(s);
	fleet_store_close(&s);
	cr_assert_null(s);

	s = fleet_store_open(path, false, err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	cr_assert_eq(fleet_store_get_meta(s, &n, &k), 0);
	cr_assert_eq(n, N);
	cr_assert_eq(k, SNAP);
	for (int v = 1; v <= VERSIONS; v++) {
		memset(out, 0, sizeof out);
		cr_assert_eq(fleet_store_rebuild(s, "device0", v, out, &chain), 0, "v%d", v);
		cr_assert_eq(memcmp(out, ref[v], sizeof out), 0, "v%d differs", v);
		cr_assert_leq(chain, SNAP, "v%d replayed %u frames", v, chain);
	}
	cr_assert_eq(fleet_store_latest(s, "device0", &last), 0);
	cr_assert_eq(last.version, VERSIONS);
	cr_assert_eq(fleet_store_rebuild(s, "device0", VERSIONS + 1, out, &chain), -ENOENT);
	cr_assert_eq(fleet_store_rebuild(s, "device1", 1, out, &chain), -ENOENT);
	cr_assert_eq(fleet_store_rebuild(s, "../x", 1, out, &chain), -ENOENT);
	/* Read-only really is. */
	{
		struct fleet_version v = { .device = "device0", .version = 99, .parent = 1,
					   .strategy = FLEET_FULL };
		uint8_t b = 1;

		cr_assert_lt(fleet_store_put(s, &v, &b, 1), 0);
	}
	fleet_store_close(&s);
}

Test(fleet_store, wal_and_conflicts, .init = setup, .fini = teardown)
{
	char err[256];
	struct fleet_store *s = fleet_store_open(path, true, err, sizeof err);
	sqlite3 *db;
	sqlite3_stmt *st;
	float model[N], got[N];
	uint8_t *f;
	size_t len;

	cr_assert_not_null(s, "%s", err);
	fill(s);
	cr_assert_eq(fleet_store_set_meta(s, N, SNAP), 0);
	cr_assert_eq(fleet_store_set_meta(s, N + 1, SNAP), -EEXIST);
	/* Another model under an existing version: refused. */
	for (int i = 0; i < N; i++)
		model[i] = ref[2][i] + 1.0f;
	cr_assert_eq(fleet_codec_encode(FLEET_DELTA, model, ref[2], N, &f, &len), 0);
	cr_assert_eq(fleet_store_ingest(s, "device0", 3, 2, 0, ref[2], f, len, 0, 0, got, NULL), -EEXIST);
	/* Made against another base: -ESTALE, nothing stored. */
	cr_assert_eq(fleet_store_ingest(s, "device0", 15, 14, 0, ref[13], f, len, 0, 0, got, NULL),
		     -ESTALE);
	free(f);
	fleet_store_close(&s);
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	cr_assert_str_eq((const char *)sqlite3_column_text(st, 0), "wal");
	sqlite3_finalize(st);
	cr_assert_eq(sqlite3_prepare_v2(db, "SELECT count(*) FROM versions", -1, &st, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	cr_assert_eq(sqlite3_column_int(st, 0), VERSIONS);
	sqlite3_finalize(st);
	sqlite3_close(db);
}

/* Tamper with the file the way an attacker (or a bad disk) could, then recover read-only. */
static int tamper(const char *sql)
{
	sqlite3 *db;
	char *msg = NULL;
	int rc;

	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	cr_assert_eq(rc, SQLITE_OK, "%s: %s", sql, msg ? msg : "");
	sqlite3_close(db);
	return rc;
}

/* XOR one byte of a version's stored payload with 1. */
static void flip_payload(int64_t version, int off)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	uint8_t *copy;
	int len;

	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, "SELECT payload FROM versions WHERE version = ?1", -1, &st,
					NULL), SQLITE_OK);
	sqlite3_bind_int64(st, 1, version);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	len = sqlite3_column_bytes(st, 0);
	cr_assert_gt(len, off);
	copy = malloc((size_t)len);
	memcpy(copy, sqlite3_column_blob(st, 0), (size_t)len);
	sqlite3_finalize(st);
	copy[off] ^= 1;
	cr_assert_eq(sqlite3_prepare_v2(db, "UPDATE versions SET payload = ?1 WHERE version = ?2", -1,
					&st, NULL), SQLITE_OK);
	sqlite3_bind_blob(st, 1, copy, len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, version);
	cr_assert_eq(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(copy);
}

static int rebuild_ro(int64_t version)
{
	char err[256];
	struct fleet_store *s = fleet_store_open(path, false, err, sizeof err);
	float out[N];
	uint32_t chain;
	int rc;

	cr_assert_not_null(s, "%s", err);
	rc = fleet_store_rebuild(s, "device0", version, out, &chain);
	fleet_store_close(&s);
	return rc;
}

static void filled(void)
{
	char err[256];
	struct fleet_store *s;

	setup();
	s = fleet_store_open(path, true, err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	fill(s);
	fleet_store_close(&s);
}

Test(fleet_store, flipped_payload_byte, .init = filled, .fini = teardown)
{
	cr_assert_eq(rebuild_ro(5), 0);
	/* Flip one byte in the middle of version 5's payload. */
	flip_payload(5, 120);
	cr_assert_eq(rebuild_ro(5), -EBADMSG);
	cr_assert_eq(rebuild_ro(4), 0); /* its parent is intact */
}

Test(fleet_store, row_hash_mismatch, .init = filled, .fini = teardown)
{
	tamper("UPDATE versions SET hash = zeroblob(32) WHERE version = 4");
	cr_assert_eq(rebuild_ro(4), -EBADMSG);
}

Test(fleet_store, broken_and_looping_chains, .init = filled, .fini = teardown)
{
	struct fleet_version v;
	char err[256];
	struct fleet_store *s;

	/* Version 2 is a sparse frame on version 1 (a delta on the base). */
	s = fleet_store_open(path, false, err, sizeof err);
	cr_assert_not_null(s);
	cr_assert_eq(fleet_store_get(s, "device0", 2, &v), 0);
	fleet_store_close(&s);
	cr_assert_eq(v.strategy, FLEET_SPARSE);
	cr_assert_eq(v.parent, 1);
	cr_assert_eq(rebuild_ro(2), 0);
	tamper("DELETE FROM versions WHERE version = 1");
	cr_assert_eq(rebuild_ro(2), -EBADMSG);
	/* A parent at or above its version (a loop) is refused before it is followed. */
	tamper("UPDATE versions SET parent = 2 WHERE version = 2");
	cr_assert_eq(rebuild_ro(2), -EBADMSG);
	tamper("UPDATE meta SET value = 999999999 WHERE key = 'n'");
	cr_assert_eq(rebuild_ro(1), -EBADMSG);
}

Test(fleet_store, not_a_regular_file, .init = setup, .fini = teardown)
{
	char err[256];

	cr_assert_eq(mkfifo(path, 0600), 0);
	cr_assert_null(fleet_store_open(path, false, err, sizeof err));
	cr_assert(strstr(err, "not a regular file"), "%s", err);
	unlink(path);
	cr_assert_null(fleet_store_open(path, false, err, sizeof err));
	cr_assert_eq(fleet_store_device_ok("device12"), true);
	cr_assert_eq(fleet_store_device_ok("dev/ice"), false);
	cr_assert_eq(fleet_store_device_ok(""), false);
}

/* fleet_store_payload: every stored frame read back and ingested, in order, into a second
 * store (what a registry rebuilding from a peer's store does) gives every version bit for bit;
 * an absent version is -ENOENT. */
Test(fleet_store, payloads_rebuild_a_second_store, .init = setup, .fini = teardown)
{
	char err[256], path2[600];
	struct fleet_store *s = fleet_store_open(path, true, err, sizeof err), *t;
	float prev[N], got[N];
	uint32_t chain = 0;
	uint8_t *f;
	size_t len;

	cr_assert_not_null(s, "%s", err);
	fill(s);
	snprintf(path2, sizeof path2, "%s/second.sqlite", dir);
	t = fleet_store_open(path2, true, err, sizeof err);
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(fleet_store_set_meta(t, N, SNAP), 0);
	cr_assert_eq(fleet_codec_encode(FLEET_FULL, base, NULL, N, &f, &len), 0);
	cr_assert_eq(fleet_store_put_base(t, f, len), 0);
	free(f);
	memcpy(prev, base, sizeof prev);
	for (int v = 1; v <= VERSIONS; v++) {
		struct fleet_version row, again;

		cr_assert_eq(fleet_store_payload(s, "device0", v, &row, &f, &len), 0, "v%d", v);
		cr_assert_eq(row.version, v);
		cr_assert_eq(len, row.bytes_stored);
		cr_assert_eq(fleet_store_ingest(t, "device0", v, v - 1, chain, prev, f, len, 0, 0, got,
						&again), 0, "v%d", v);
		cr_assert_eq(memcmp(got, ref[v], sizeof got), 0, "v%d differs", v);
		cr_assert_eq(memcmp(again.hash, row.hash, FLEET_HASH_BYTES), 0);
		chain = again.chain_len;
		memcpy(prev, got, sizeof prev);
		free(f);
	}
	cr_assert_eq(fleet_store_payload(s, "device0", VERSIONS + 1, &(struct fleet_version){ 0 }, &f,
					 &len), -ENOENT);
	cr_assert_null(f);
	fleet_store_close(&t);
	fleet_store_close(&s);
}
