/* The fleet engine end to end on 127.0.0.1: a forked registry and three devices fine-tune
 * softmax regression on slices of Fashion-MNIST and sync every few steps. The checks read what
 * the run left: the registry's store (through `stalenet recover`'s code), fleet.csv and each
 * device's durable state:
 *   delta, sparse  every version of every device is stored, 1..V without a hole, each rebuilds
 *         and verifies (recover --all exits 0), fleet.csv and eval.csv follow their schema, and
 *         the registry's latest version of a device
 *         is bit for bit the model the device holds at the end (for sparse: the model it
 *         adopted), so nothing is queued unacknowledged
 *   registry crash  the registry is killed (SIGKILL) once it has acknowledged versions, and
 *         started again: every version fleet.csv recorded before the kill is still stored, the
 *         devices' chains continue without a hole, and all of it verifies
 *   device crash  a device killed mid-run and started again resumes from its durable queue:
 *         its chain has no hole and ends at the model it holds
 *   peers  fleet.registry peers: the registry is killed, its store deleted, copies of versions
 *         corrupted and truncated in the peers' stores, and the registry started again: it rebuilds
 *         from the devices' copies of their peers' versions (refusing the damaged copies and
 *         taking another), every version acknowledged before the loss is stored again under
 *         the same hash, the chains continue without a hole and recover --all verifies all */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectors/schema.h"
#include "lib/clock.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "node/engine_common.h"
#include "node/data.h"
#include "node/engine_fleet.h"
#include "node/fleet_drift.h"
#include "node/fleet_queue.h"
#include "node/fleet_store.h"
#include "node/model.h"
#include "node/optim.h"
#include "orchestrator/cli.h"
#include "orchestrator/recover.h"
#include "tests/support/files.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"
#include "tests/support/ports.h"

#define ND 3
#define NPARAMS 7850 /* softmax on 28x28, 10 classes */

static char dir[256];
static const char *registry_lr = "0.05"; /* another value makes every replay diverge */
static const char *registry_mode = "central"; /* fleet.registry */
static bool base_trained;                /* fleet.base trained (60 steps) */
static const char *drift0;               /* fleet.drift.0: device0's drift schedule */
static int port;
static int64_t origin;

static void setup(void)
{
	cr_assert_not_null(support_tmpdir(dir, sizeof dir, "fleet_e2e"));
	port = support_free_ports(32);
	cr_assert_gt(port, 0, "no free ports");
	origin = clock_now_ns();
}

static void teardown(void)
{
	support_rm_rf(dir);
}

static struct kv *conf(int i, const char *strategy, int steps)
{
	struct kv *k = kv_new();

	kv_set(k, "run.dir", dir);
	kv_setf(k, "run.origin_ns", "%lld", (long long)origin);
	kv_set(k, "run.seed", "11");
	kv_setf(k, "workers.count", "%d", ND);
	kv_set(k, "workers.addrs", "127.0.0.1,127.0.0.1,127.0.0.1");
	kv_set(k, "workers.names", "device0,device1,device2");
	kv_set(k, "servers.addrs", "127.0.0.1");
	kv_set(k, "node.addr", "127.0.0.1");
	kv_setf(k, "port.data", "%d", port);
	kv_set(k, "model.kind", "softmax");
	kv_set(k, "train.batch", "32");
	kv_set(k, "train.lr", i < 0 ? registry_lr : "0.05");
	kv_set(k, "data.train_limit", "3000");
	kv_set(k, "data.partition.scheme", "classes");
	kv_set(k, "data.partition.per_node", "3");
	kv_setf(k, "stop.steps", "%d", steps);
	kv_set(k, "stop.time", "60");
	kv_set(k, "fleet.strategy", strategy);
	kv_set(k, "fleet.sync_steps", "5");
	kv_set(k, "fleet.snapshot_every", "3");
	kv_set(k, "fleet.sparse_fraction", "0.05");
	kv_set(k, "fleet.registry", registry_mode);
	kv_set(k, "fleet.peers", "2");
	if (drift0)
		kv_set(k, "fleet.drift.0", drift0);
	if (base_trained) {
		kv_set(k, "fleet.base", "trained");
		kv_set(k, "fleet.base_steps", "60");
	}
	if (i < 0) {
		kv_set(k, "node.name", "registry");
		kv_set(k, "node.role", "registry");
		kv_set(k, "node.index", "0");
	} else {
		kv_setf(k, "node.name", "device%d", i);
		kv_set(k, "node.role", "device");
		kv_setf(k, "node.index", "%d", i);
	}
	return k;
}

/* Fork node i (-1 = the registry). slow_ms: extra delay per step (a straggler), so a run lasts
 * long enough to be cut in the middle. */
static pid_t start(int i, const char *strategy, int steps, int slow_ms)
{
	struct kv *k = conf(i, strategy, steps);
	pid_t pid;

	if (slow_ms > 0) {
		kv_set(k, "straggler.delay.dist", "constant");
		kv_setf(k, "straggler.delay.a", "%.3f", slow_ms / 1000.0);
	}
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		log_init(i < 0 ? "registry" : "device", LOG_WARN);
		_exit((i < 0 ? engine_fleet_registry_run(k) : engine_fleet_device_run(k)) == 0 ? 0 : 1);
	}
	kv_destroy(&k);
	return pid;
}

static void wait_ok(const pid_t *pids, int n, int timeout_ms)
{
	int st[8];

	support_wait_children(pids, n, st, timeout_ms);
	for (int i = 0; i < n; i++)
		cr_assert(st[i] != -1 && WIFEXITED(st[i]) && WEXITSTATUS(st[i]) == 0,
			  "process %d failed (status %d)", i, st[i]);
}

struct chain_check {
	int64_t next[ND];
};

static int chain_row(const struct fleet_version *v, void *arg)
{
	struct chain_check *c = arg;
	int i = v->device[6] - '0';

	cr_assert(i >= 0 && i < ND, "device %s", v->device);
	cr_assert_eq(v->version, c->next[i] + 1, "%s: version %lld after %lld", v->device,
		     (long long)v->version, (long long)c->next[i]);
	c->next[i] = v->version;
	return 0;
}

/* Every device: versions 1..V stored without a hole, the registry's V is the device's model,
 * nothing left queued; recover --all verifies everything. Returns the total versions. */
static int64_t check_store(void)
{
	char path[512], err[256];
	struct fleet_store *s;
	struct chain_check c = { { 0 } };
	int64_t total = 0;
	char *argv[] = { "recover", dir, "--all", NULL };

	snprintf(path, sizeof path, "%s/%s", dir, FLEET_STORE_FILE);
	s = fleet_store_open(path, false, err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	cr_assert_eq(fleet_store_each(s, chain_row, &c), 0);
	for (int i = 0; i < ND; i++) {
		char name[24], qdir[512];
		float *reg = malloc(NPARAMS * 4), *dev = malloc(NPARAMS * 4);
		struct fleet_queue *q;

		snprintf(name, sizeof name, "device%d", i);
		snprintf(qdir, sizeof qdir, "%s/nodes/%s.fleet", dir, name);
		q = fleet_queue_open(qdir, NPARAMS, err, sizeof err);
		cr_assert_not_null(q, "%s", err);
		cr_assert_gt(c.next[i], 2, "%s stored only %lld versions", name, (long long)c.next[i]);
		cr_assert_eq(fleet_queue_version(q), c.next[i], "%s made %lld, registry holds %lld", name,
			     (long long)fleet_queue_version(q), (long long)c.next[i]);
		cr_assert_eq(fleet_queue_pending(q), 0);
		fleet_queue_state(q, dev, NULL);
		cr_assert_eq(fleet_store_rebuild(s, name, c.next[i], reg, NULL), 0);
		cr_assert_eq(memcmp(reg, dev, NPARAMS * 4), 0, "%s: registry and device differ", name);
		total += c.next[i];
		fleet_queue_close(&q);
		free(reg);
		free(dev);
	}
	fleet_store_close(&s);
	cr_assert_eq(recover_cmd(3, argv), CLI_EXIT_OK);
	snprintf(path, sizeof path, "%s/fleet.csv", dir);
	cr_assert_eq(trace_schema_check_file(path, "fleet", err, sizeof err), 0, "%s", err);
	/* Each device evaluated its own model at its end (eval.csv). */
	snprintf(path, sizeof path, "%s/eval.csv", dir);
	cr_assert_eq(trace_schema_check_file(path, "eval", err, sizeof err), 0, "%s", err);
	return total;
}

static void plain_run(const char *strategy)
{
	pid_t pids[ND + 1];

	pids[0] = start(-1, strategy, 40, 0);
	for (int i = 0; i < ND; i++)
		pids[i + 1] = start(i, strategy, 40, 20);
	wait_ok(pids, ND + 1, 100000);
	/* 40 steps, a version every 5: 8 versions per device. */
	cr_assert_eq(check_store(), ND * 8);
}

Test(engine_fleet, delta, .init = setup, .fini = teardown, .timeout = 150) { plain_run("delta"); }
Test(engine_fleet, sparse, .init = setup, .fini = teardown, .timeout = 150) { plain_run("sparse"); }
Test(engine_fleet, full, .init = setup, .fini = teardown, .timeout = 150) { plain_run("full"); }

/* fleet.csv rows of a strategy with verify_ok ok (1 stored, 0 not). */
static int rows_of(const char *strategy, int ok)
{
	char path[512], want[32];
	size_t len;
	char *text, *line, *save = NULL;
	int rows = 0;

	snprintf(path, sizeof path, "%s/fleet.csv", dir);
	text = support_slurp(path, &len);
	snprintf(want, sizeof want, ",%s,", strategy);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *at = strstr(line, want);
		int col = 0;

		if (!at)
			continue;
		/* verify_ok is column 9 (1-based) */
		for (const char *c = line; *c && col < 8; c++)
			if (*c == ',' && ++col == 8 && atoi(c + 1) == ok)
				rows++;
	}
	free(text);
	return rows;
}

/* replay: the registry recomputes every version from the minibatches (plain SGD, the same
 * share): every version arrives as a replay and verifies; nothing falls back. */
Test(engine_fleet, replay, .init = setup, .fini = teardown, .timeout = 150)
{
	plain_run("replay");
	cr_assert_eq(rows_of("replay", 1), ND * 8);
	cr_assert_eq(rows_of("replay", 0), 0);
}

/* auto on 127.0.0.1: every version is stored (as a replay or as weights, whichever the cost
 * model picked) and verifies. */
Test(engine_fleet, auto_strategy, .init = setup, .fini = teardown, .timeout = 150)
{
	plain_run("auto");
	cr_assert_eq(rows_of("replay", 1) + rows_of("delta", 1) + rows_of("full", 1), ND * 8);
}

/* A forced divergence (the registry recomputes with another learning rate): every replay is
 * detected as not matching, and the device sends the version's weights instead. */
Test(engine_fleet, replay_diverges_falls_back, .init = setup, .fini = teardown, .timeout = 150)
{
	registry_lr = "0.07";
	plain_run("replay");
	registry_lr = "0.05";
	cr_assert_eq(rows_of("replay", 1), 0);
	/* Every version's replay failed at least once (a replay already in flight behind a failed
	 * one is answered out of order and sent again), and every version was stored as weights. */
	cr_assert_geq(rows_of("replay", 0), ND * 8, "%d replay rows", rows_of("replay", 0));
	cr_assert_eq(rows_of("delta", 1), ND * 8, "%d delta rows", rows_of("delta", 1));
}

/* Rows of fleet.csv with verify_ok 1: (device, version) pairs the registry committed. */
static int committed(int64_t *max_version)
{
	char path[512];
	size_t len;
	char *text, *line, *save = NULL;
	int rows = 0;

	snprintf(path, sizeof path, "%s/fleet.csv", dir);
	text = support_read_file(path, &len);
	for (int i = 0; i < ND; i++)
		max_version[i] = 0;
	if (!text)
		return 0;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int dev;
		long long v;
		int ok;
		char strat[16];

		if (sscanf(line, "%*[^,],device%d,%lld,%15[^,],%*[^,],%*[^,],%*[^,],%*[^,],%d", &dev, &v,
			   strat, &ok) == 4 && ok == 1 && dev >= 0 && dev < ND) {
			rows++;
			if (v > max_version[dev])
				max_version[dev] = v;
		}
	}
	free(text);
	return rows;
}

static bool some_committed(void *arg)
{
	int64_t mv[ND];

	return committed(mv) >= *(int *)arg;
}

Test(engine_fleet, registry_crash_loses_nothing, .init = setup, .fini = teardown, .timeout = 200)
{
	pid_t reg, devs[ND];
	int want = 6, st;
	int64_t before[ND];
	char path[512], err[256];
	struct fleet_store *s;

	reg = start(-1, "delta", 60, 0);
	for (int i = 0; i < ND; i++)
		devs[i] = start(i, "delta", 60, 100);
	cr_assert(support_wait_until(some_committed, &want, 60000), "no versions committed in 60 s");
	kill(reg, SIGKILL);
	cr_assert_eq(support_wait_pid(reg, &st, 10000), 0);
	committed(before);
	/* What the registry committed before the kill is in the store, read from disk now. */
	snprintf(path, sizeof path, "%s/%s", dir, FLEET_STORE_FILE);
	s = fleet_store_open(path, false, err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	for (int i = 0; i < ND; i++) {
		char name[24];
		struct fleet_version v;

		snprintf(name, sizeof name, "device%d", i);
		for (int64_t k = 1; k <= before[i]; k++)
			cr_assert_eq(fleet_store_get(s, name, k, &v), 0, "%s@%lld lost", name, (long long)k);
	}
	fleet_store_close(&s);
	reg = start(-1, "delta", 60, 0);
	{
		pid_t all[ND + 1] = { reg, devs[0], devs[1], devs[2] };

		wait_ok(all, ND + 1, 150000);
	}
	/* 60 steps, a version every 5: 12 each, all stored after the restart. */
	cr_assert_eq(check_store(), ND * 12);
}

static bool device1_committed(void *arg)
{
	int64_t mv[ND];

	committed(mv);
	return mv[1] >= *(int *)arg;
}

Test(engine_fleet, device_crash_resumes, .init = setup, .fini = teardown, .timeout = 200)
{
	pid_t reg, devs[ND];
	int want = 2, st;
	int64_t before[ND];

	reg = start(-1, "sparse", 40, 0);
	for (int i = 0; i < ND; i++)
		devs[i] = start(i, "sparse", 40, i == 1 ? 60 : 0);
	cr_assert(support_wait_until(device1_committed, &want, 60000),
		  "device1 committed no 2 versions in 60 s");
	kill(devs[1], SIGKILL);
	cr_assert_eq(support_wait_pid(devs[1], &st, 10000), 0);
	/* Started again: it resumes at its last version (its step count restarts: 40 more). */
	devs[1] = start(1, "sparse", 40, 0);
	{
		pid_t all[ND + 1] = { reg, devs[0], devs[1], devs[2] };

		wait_ok(all, ND + 1, 150000);
	}
	/* device1 made >= 2 versions before the kill, then 8 more (40 steps): its chain goes on
	 * from where its queue was, without a hole (check_store). */
	committed(before);
	cr_assert_geq(before[1], 10, "device1 ends at version %lld", (long long)before[1]);
	cr_assert_geq(check_store(), ND * 8 + 2);
}

/* The (device, version, hash) rows of a store. */
struct rows {
	struct fleet_version v[4096];
	size_t n;
};

static int rows_add(const struct fleet_version *v, void *arg)
{
	struct rows *r = arg;

	cr_assert_lt(r->n, 4096);
	r->v[r->n++] = *v;
	return 0;
}

static void store_rows(const char *path, struct rows *out)
{
	char err[256];
	struct fleet_store *s = fleet_store_open(path, false, err, sizeof err);

	cr_assert_not_null(s, "%s", err);
	out->n = 0;
	cr_assert_eq(fleet_store_each(s, rows_add, out), 0);
	fleet_store_close(&s);
}

/* Damage the stored payload of device@version in a peer store: flip one byte in its middle,
 * or (truncate) cut its second half off. */
static void corrupt_payload(const char *path, const char *device, int64_t version, bool truncate)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	uint8_t *copy;
	int len;

	cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	cr_assert_eq(sqlite3_prepare_v2(db, "SELECT payload FROM versions WHERE device = ?1 AND version = ?2",
					-1, &st, NULL), SQLITE_OK);
	sqlite3_bind_text(st, 1, device, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, version);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s has no %s@%lld", path, device, (long long)version);
	len = sqlite3_column_bytes(st, 0);
	cr_assert_gt(len, 100);
	copy = malloc((size_t)len);
	memcpy(copy, sqlite3_column_blob(st, 0), (size_t)len);
	sqlite3_finalize(st);
	if (truncate)
		len /= 2;
	else
		copy[len / 2] ^= 0x40;
	cr_assert_eq(sqlite3_prepare_v2(db, "UPDATE versions SET payload = ?3 WHERE device = ?1 AND version = ?2",
					-1, &st, NULL), SQLITE_OK);
	sqlite3_bind_text(st, 1, device, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, version);
	sqlite3_bind_blob(st, 3, copy, len, SQLITE_TRANSIENT);
	cr_assert_eq(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(copy);
}

/* fleet_repair.csv: the sums of pulled and rejected over the rows of a restart. */
static void repair_sums(uint64_t *pulled, uint64_t *rejected, uint64_t *bytes, int *rows)
{
	char path[512];
	size_t len;
	char *text, *line, *save = NULL;

	*pulled = *rejected = *bytes = 0;
	*rows = 0;
	snprintf(path, sizeof path, "%s/fleet_repair.csv", dir);
	text = support_read_file(path, &len);
	cr_assert_not_null(text, "no fleet_repair.csv");
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long p, b, rj;

		/* t_s,device,holders,offered,pulled,bytes_summary,bytes_pulled,rejected,... */
		if (sscanf(line, "%*[^,],%*[^,],%*[^,],%*[^,],%llu,%*[^,],%llu,%llu", &p, &b, &rj) == 3) {
			*pulled += p;
			*bytes += b;
			*rejected += rj;
			(*rows)++;
		}
	}
	free(text);
}

/* Both holders of device0 (device1, device2) store its version 3. */
static bool holders_have_3(void *arg)
{
	(void)arg;
	for (int h = 1; h <= 2; h++) {
		char path[600], err[256];
		struct fleet_store *s;
		struct fleet_version v;
		int rc;

		snprintf(path, sizeof path, "%s/nodes/device%d.peers.sqlite", dir, h);
		if (!(s = fleet_store_open(path, false, err, sizeof err)))
			return false;
		rc = fleet_store_get(s, "device0", 3, &v);
		fleet_store_close(&s);
		if (rc < 0)
			return false;
	}
	return true;
}

Test(engine_fleet, peers_rebuild_lost_registry, .init = setup, .fini = teardown, .timeout = 240)
{
	pid_t reg, devs[ND];
	int want = 9, st, rows;
	char path[512], side[600];
	struct rows *before = malloc(sizeof *before), *after = malloc(sizeof *after);
	uint64_t pulled, rejected, bytes;

	registry_mode = "peers";
	reg = start(-1, "delta", 60, 0);
	for (int i = 0; i < ND; i++)
		devs[i] = start(i, "delta", 60, 100);
	cr_assert(support_wait_until(some_committed, &want, 60000), "no versions committed in 60 s");
	cr_assert(support_wait_until(holders_have_3, NULL, 60000), "device0@3 not at both peers in 60 s");
	kill(reg, SIGKILL);
	cr_assert_eq(support_wait_pid(reg, &st, 10000), 0);
	/* What the registry acknowledged before the loss. */
	snprintf(path, sizeof path, "%s/%s", dir, FLEET_STORE_FILE);
	store_rows(path, before);
	cr_assert_geq(before->n, (size_t)want);
	/* The store is lost: the database and its WAL. */
	cr_assert_eq(unlink(path), 0);
	snprintf(side, sizeof side, "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof side, "%s-shm", path);
	unlink(side);
	/* device1 and device2 hold device0's versions (the ring: device0 sends to both). device1's
	 * copies of versions 1 and 3 are corrupted (a flipped byte) and device2's of version 2 is
	 * truncated: the registry pulls each version from the lowest holder that has answered, so
	 * in whatever order the two answer it meets a damaged copy, must refuse it and take the
	 * other holder's. */
	snprintf(side, sizeof side, "%s/nodes/device1.peers.sqlite", dir);
	corrupt_payload(side, "device0", 1, false);
	corrupt_payload(side, "device0", 3, false);
	snprintf(side, sizeof side, "%s/nodes/device2.peers.sqlite", dir);
	corrupt_payload(side, "device0", 2, true);
	reg = start(-1, "delta", 60, 0);
	{
		pid_t all[ND + 1] = { reg, devs[0], devs[1], devs[2] };

		wait_ok(all, ND + 1, 200000);
	}
	registry_mode = "central";
	/* Every version again, without a hole, equal to the devices' models, verified. */
	cr_assert_eq(check_store(), ND * 12);
	store_rows(path, after);
	for (size_t b = 0; b < before->n; b++) {
		bool found = false;

		for (size_t a = 0; a < after->n && !found; a++)
			if (!strcmp(after->v[a].device, before->v[b].device) &&
			    after->v[a].version == before->v[b].version) {
				found = true;
				cr_assert_eq(memcmp(after->v[a].hash, before->v[b].hash, FLEET_HASH_BYTES), 0,
					     "%s@%lld has another hash after the rebuild", before->v[b].device,
					     (long long)before->v[b].version);
			}
		cr_assert(found, "%s@%lld acknowledged before the loss is missing", before->v[b].device,
			  (long long)before->v[b].version);
	}
	/* The rebuild is in fleet_repair.csv: a row per device and restart, everything pulled
	 * that was acknowledged before (at least), the corrupt copy refused. */
	snprintf(path, sizeof path, "%s/fleet_repair.csv", dir);
	{
		char err[256];

		cr_assert_eq(trace_schema_check_file(path, "fleet_repair", err, sizeof err), 0, "%s", err);
	}
	repair_sums(&pulled, &rejected, &bytes, &rows);
	{
		size_t len;
		char *text = support_read_file(path, &len);

		cr_log_info("fleet_repair.csv:\n%s", text ? text : "");
		free(text);
	}
	cr_assert_eq(rows, 2 * ND, "%d repair rows (a row per device at each of the two starts)", rows);
	cr_assert_geq(pulled, before->n, "pulled %llu of %zu", (unsigned long long)pulled, before->n);
	cr_assert_geq(rejected, 1, "the corrupted copy was not refused");
	cr_assert_gt(bytes, 0);
	free(before);
	free(after);
}

/* fleet.base trained: the registry deploys the model trained 60 steps round robin over the
 * devices' shares (step s on device s mod 3), computed here independently from the same shares
 * and optimiser; it is not the initial model; the devices fine-tune from it (replay recomputes
 * on top of it, so every version matching proves the devices adopted exactly this base). */
Test(engine_fleet, base_trained, .init = setup, .fini = teardown, .timeout = 150)
{
	struct engine_work *wk[ND];
	struct engine_conf c;
	struct fleet_store *s;
	struct kv *k;
	char path[512], err[256];
	float *ref = malloc(NPARAMS * 4), *base = malloc(NPARAMS * 4), *init = malloc(NPARAMS * 4);

	base_trained = true;
	plain_run("replay");
	base_trained = false;
	cr_assert_eq(rows_of("replay", 1), ND * 8);

	k = conf(-1, "replay", 40);
	kv_set(k, "fleet.base", "trained");
	cr_assert_eq(engine_conf_read(k, &c), 0);
	for (int i = 0; i < ND; i++) {
		struct engine_conf ci = c;

		ci.index = (uint32_t)i;
		cr_assert_eq(engine_work_open(k, &ci, false, &wk[i]), 0);
	}
	memcpy(ref, model_params(wk[0]->model), NPARAMS * 4);
	memcpy(init, ref, NPARAMS * 4);
	for (int st = 0; st < 60; st++) {
		struct engine_work *w = wk[st % ND];
		double loss;
		size_t got;

		memcpy(model_params(w->model), ref, NPARAMS * 4);
		cr_assert_eq(engine_work_gradient(w, &loss, &got), 0);
		optim_step(wk[0]->optim, ref, w->grad);
	}
	for (int i = 0; i < ND; i++)
		engine_work_destroy(&wk[i]);
	engine_conf_free(&c);
	kv_destroy(&k);

	snprintf(path, sizeof path, "%s/%s", dir, FLEET_STORE_FILE);
	s = fleet_store_open(path, false, err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	cr_assert_eq(fleet_store_get_base(s, base), 0);
	fleet_store_close(&s);
	cr_assert_neq(memcmp(base, init, NPARAMS * 4), 0, "the base is the initial model");
	cr_assert_eq(memcmp(base, ref, NPARAMS * 4), 0, "the base is not the 60-step round robin");
	free(ref);
	free(base);
	free(init);
}

/* The drift itself on a share: every class device0 lacks joins it; the samples it held keep
 * their positions and bytes; the new ones are exactly the selection's, all of the added classes;
 * the minibatch order covers the grown share once. */
Test(engine_fleet, drift_grows_the_share, .init = setup, .fini = teardown, .timeout = 60)
{
	struct kv *k = conf(0, "replay", 40);
	struct engine_work *w;
	struct engine_conf c;
	uint32_t n0, dim;
	uint16_t held = 0;
	uint8_t *px0, *lb0, *seen;
	size_t added;

	cr_assert_eq(engine_conf_read(k, &c), 0);
	cr_assert_eq(engine_work_open(k, &c, false, &w), 0);
	n0 = w->train->n;
	dim = w->train->dim;
	px0 = malloc((size_t)n0 * dim);
	lb0 = malloc(n0);
	memcpy(px0, w->train->pixels, (size_t)n0 * dim);
	memcpy(lb0, w->train->labels, n0);
	for (uint32_t i = 0; i < n0; i++)
		held |= (uint16_t)(1u << lb0[i]);
	cr_assert_neq(held, 0x3ff, "device0 already holds every class");
	cr_assert_eq(fleet_drift_apply(w, &c, 0x3ff, &added), 0);
	cr_assert_gt(added, 50);
	cr_assert_eq(w->train->n, n0 + added);
	cr_assert_eq(memcmp(w->train->pixels, px0, (size_t)n0 * dim), 0);
	cr_assert_eq(memcmp(w->train->labels, lb0, n0), 0);
	for (uint32_t i = n0; i < w->train->n; i++) {
		cr_assert(!(held >> w->train->labels[i] & 1), "sample %u of a held class", i);
		cr_assert_eq(w->train->origin[i] % ND, 0, "sample %u from source %u", i, w->train->origin[i]);
	}
	seen = calloc(w->train->n, 1);
	for (uint32_t i = 0; i < w->train->n; i++) {
		cr_assert_lt(w->order[i], w->train->n);
		cr_assert_eq(seen[w->order[i]]++, 0);
	}
	/* a second drift of the same classes adds nothing: they are held now */
	cr_assert_eq(fleet_drift_apply(w, &c, 0x3ff, &added), 0);
	cr_assert_eq(added, 0);
	free(seen);
	free(px0);
	free(lb0);
	engine_work_destroy(&w);
	engine_conf_free(&c);
	kv_destroy(&k);
}

/* The latest stored model of a device into out. */
static void latest_model(const char *name, float *out)
{
	char path[512], err[256];
	struct fleet_store *s;
	struct fleet_version v;

	snprintf(path, sizeof path, "%s/%s", dir, FLEET_STORE_FILE);
	s = fleet_store_open(path, false, err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	cr_assert_eq(fleet_store_latest(s, name, &v), 0);
	cr_assert_eq(fleet_store_rebuild(s, name, v.version, out, NULL), 0);
	fleet_store_close(&s);
}

/* The largest bytes_tx of a device's stored rows in fleet.csv. */
static long max_bytes(const char *device)
{
	char path[512], *text, *line, *save = NULL, want[32];
	size_t len;
	long best = 0;

	snprintf(path, sizeof path, "%s/fleet.csv", dir);
	snprintf(want, sizeof want, ",%s,", device);
	text = support_slurp(path, &len);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		long b;

		if (strstr(line, want) && sscanf(strstr(line, want) + strlen(want), "%*[^,],%*[^,],%ld", &b) == 1 &&
		    b > best)
			best = b;
	}
	free(text);
	return best;
}

/* A drift during a run (device0: every class after 10 steps): the registry does not have the
 * new samples, so device0's replays carry them raw (its frames grow several-fold); every version
 * of every device still recomputes exactly; and against the same run without the drift,
 * device0's model differs while device1's (no drift) is bit for bit the same. */
Test(engine_fleet, drift_replays_exactly, .init = setup, .fini = teardown, .timeout = 200)
{
	float *plain0 = malloc(NPARAMS * 4), *plain1 = malloc(NPARAMS * 4);
	float *drift_0 = malloc(NPARAMS * 4), *drift_1 = malloc(NPARAMS * 4);

	plain_run("replay");
	latest_model("device0", plain0);
	latest_model("device1", plain1);
	cr_assert_eq(support_rm_rf(dir), 0);
	cr_assert_not_null(support_tmpdir(dir, sizeof dir, "fleet_e2e"));
	/* Ports checked free now, for the second run: port + 50 was never checked, and a port
	 * of the first run still in TIME_WAIT counts as taken here. */
	port = support_free_ports(32);
	cr_assert_gt(port, 0, "no free ports");
	drift0 = "s10:0,1,2,3,4,5,6,7,8,9";
	plain_run("replay");
	drift0 = NULL;
	cr_assert_eq(rows_of("replay", 1), ND * 8);
	cr_assert_eq(rows_of("replay", 0), 0);
	cr_assert_gt(max_bytes("device0"), 5 * max_bytes("device1"), "device0 %ld bytes, device1 %ld",
		     max_bytes("device0"), max_bytes("device1"));
	latest_model("device0", drift_0);
	latest_model("device1", drift_1);
	cr_assert_neq(memcmp(plain0, drift_0, NPARAMS * 4), 0, "device0 did not drift");
	cr_assert_eq(memcmp(plain1, drift_1, NPARAMS * 4), 0, "device1 changed without a drift");
	free(plain0);
	free(plain1);
	free(drift_0);
	free(drift_1);
}
