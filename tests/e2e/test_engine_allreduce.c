/* tests/e2e/test_engine_allreduce: the ring all-reduce against a naive mean, and whole runs of
 * the all-reduce engine on loopback (one process per node, distinct ports): replicas stay
 * bit-identical and accuracy rises well above chance; foreign messages (a rogue's, a stale one)
 * are skipped without changing the mean or stretching a phase's deadline. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "collectors/schema.h"
#include "lib/clock.h"
#include "lib/kv.h"
#include "node/engine_allreduce.h"
#include "node/rng.h"
#include "node/wire.h"
#include "tests/support/files.h"
#include "tests/support/proc.h"
#include "tests/support/ports.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
#define RING_N 4
#define RING_LEN 1003 /* not a multiple of RING_N: uneven chunks */
#define RING_STEPS 3

static int base_port(void)
{
	static int port;

	if (!port)
		port = support_free_ports(16);
	return port;
}

struct member {
	struct allreduce_ring *ring;
	float v[RING_LEN];
	bool stop;
	int rc;
};

static struct member members[RING_N];

static void *member_main(void *arg)
{
	struct member *m = arg;

	for (int s = 0; s < RING_STEPS && !m->rc; s++) {
		m->stop = (m == &members[2] && s == RING_STEPS - 1);
		m->rc = allreduce_ring_mean(m->ring, m->v, RING_LEN, s, &m->stop, 20000);
	}
	return NULL;
}

Test(allreduce_ring, mean_matches_naive_reference_and_is_identical, .timeout = 60)
{
	static float start[RING_N][RING_LEN];
	double want[RING_LEN];
	pthread_t th[RING_N];
	int port = base_port();
	struct rng r;

	rng_seed(&r, 7, 1);
	for (int i = 0; i < RING_N; i++)
		for (int j = 0; j < RING_LEN; j++)
			start[i][j] = (float)(rng_uniform(&r) * 2 - 1);
	/* Naive reference: RING_STEPS successive means of the (already equal) vectors. */
	for (int j = 0; j < RING_LEN; j++) {
		double s = 0;

		for (int i = 0; i < RING_N; i++)
			s += start[i][j];
		want[j] = s / RING_N;
	}
	for (int i = 0; i < RING_N; i++) {
		char me[64], next[64];

		snprintf(me, sizeof me, "tcp://127.0.0.1:%d", port + i);
		snprintf(next, sizeof next, "tcp://127.0.0.1:%d", port + (i + 1) % RING_N);
		members[i].ring = allreduce_ring_open(i, RING_N, me, next, RING_LEN);
		cr_assert_not_null(members[i].ring);
		memcpy(members[i].v, start[i], sizeof members[i].v);
	}
	for (int i = 0; i < RING_N; i++)
		pthread_create(&th[i], NULL, member_main, &members[i]);
	for (int i = 0; i < RING_N; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < RING_N; i++) {
		cr_assert_eq(members[i].rc, 0, "member %d: %d", i, members[i].rc);
		cr_assert(members[i].stop, "member %d did not learn member 2's stop vote", i);
		cr_assert_eq(memcmp(members[i].v, members[0].v, sizeof members[0].v), 0,
			     "member %d differs from member 0", i);
		cr_assert_gt(allreduce_ring_stats(members[i].ring)->bytes_tx, RING_LEN * 4 * RING_STEPS);
	}
	for (int j = 0; j < RING_LEN; j++)
		cr_assert_float_eq(members[0].v[j], want[j], 1e-5, "element %d: %g vs %g", j,
				   members[0].v[j], want[j]);
	for (int i = 0; i < RING_N; i++)
		allreduce_ring_close(&members[i].ring);
}

/* --- foreign messages ---------------------------------------------------------------------------- */

struct flood {
	void *sock;
	atomic_bool stop;
	uint64_t sent;
};

static void *flood_main(void *arg)
{
	struct flood *f = arg;
	uint8_t junk[WIRE_HEADER_BYTES] = { 'S', 'N', 'W', '1' };

	while (!atomic_load(&f->stop)) {
		zmq_send(f->sock, junk, sizeof junk, ZMQ_DONTWAIT);
		f->sent++;
	}
	return NULL;
}

static void *member1_step1(void *arg)
{
	struct member *m = arg;

	m->rc = allreduce_ring_mean(m->ring, m->v, RING_LEN, 1, &m->stop, 20000);
	return NULL;
}

/* A message that is not the expected one (another step, a NaN, junk), from a rogue PUSH or a
 * stale one of the ring's own, is counted and skipped: it neither fails the ring nor changes
 * the mean, and a flood of them does not keep a phase waiting past its deadline. */
Test(allreduce_ring, foreign_messages_skipped_and_deadline_kept, .timeout = 60)
{
	static struct member two[2];
	int port = base_port();
	char me[2][64];
	void *ctx = zmq_ctx_new(), *rogue = zmq_socket(ctx, ZMQ_PUSH);
	float chunk[502], nan_chunk[502];
	struct flood f = { .sock = rogue };
	pthread_t th;
	int64_t t0, took_ms;
	int rc, linger = 0;

	for (int i = 0; i < 2; i++)
		snprintf(me[i], sizeof me[i], "tcp://127.0.0.1:%d", port + i);
	for (int i = 0; i < 2; i++) {
		two[i].ring = allreduce_ring_open(i, 2, me[i], me[(i + 1) % 2], RING_LEN);
		cr_assert_not_null(two[i].ring);
		for (int j = 0; j < RING_LEN; j++)
			two[i].v[j] = (float)(i + 1) * (float)j;
	}
	zmq_setsockopt(rogue, ZMQ_LINGER, &linger, sizeof linger);
	cr_assert_eq(zmq_connect(rogue, me[0]), 0);
	/* What member 0 expects first, but of step 99; then step 0 with a NaN. */
	for (int j = 0; j < 502; j++)
		chunk[j] = nan_chunk[j] = 1.0f;
	nan_chunk[7] = NAN;
	struct wire_header h = { .type = WIRE_PUSH, .sender = 1, .step = 99, .model_version = 0,
				 .payload_len = sizeof chunk };
	cr_assert_eq(wire_send(rogue, NULL, 0, &h, chunk, NULL, false, NULL), 0);
	h.step = 0;
	cr_assert_eq(wire_send(rogue, NULL, 0, &h, nan_chunk, NULL, false, NULL), 0);

	/* Member 0 alone at step 0 (member 1 is not there yet) while junk floods in: it gives up
	 * at its deadline, having skipped all of it. */
	cr_assert_eq(pthread_create(&th, NULL, flood_main, &f), 0);
	bool stop = false;
	t0 = clock_now_ns();
	rc = allreduce_ring_mean(two[0].ring, two[0].v, RING_LEN, 0, &stop, 700);
	took_ms = (clock_now_ns() - t0) / 1000000;
	atomic_store(&f.stop, true);
	pthread_join(th, NULL);
	cr_assert_eq(rc, -ETIMEDOUT);
	cr_assert_lt(took_ms, 5000, "the phase waited %lld ms", (long long)took_ms);
	cr_assert_geq(allreduce_ring_stats(two[0].ring)->bad_frames, 2, "%llu bad frames",
		      (unsigned long long)allreduce_ring_stats(two[0].ring)->bad_frames);
	for (int j = 0; j < RING_LEN; j++)
		cr_assert_eq(two[0].v[j], (float)j, "a skipped message changed element %d", j);

	/* Step 1 together: member 1 first meets member 0's stale step-0 chunk and skips it. */
	cr_assert_eq(pthread_create(&th, NULL, member1_step1, &two[1]), 0);
	two[0].rc = allreduce_ring_mean(two[0].ring, two[0].v, RING_LEN, 1, &two[0].stop, 20000);
	pthread_join(th, NULL);
	cr_assert_eq(two[0].rc, 0);
	cr_assert_eq(two[1].rc, 0);
	cr_assert_geq(allreduce_ring_stats(two[1].ring)->bad_frames, 1);
	for (int j = 0; j < RING_LEN; j++) {
		cr_assert_float_eq(two[0].v[j], 1.5f * (float)j, 1e-3, "element %d", j);
		cr_assert_eq(two[1].v[j], two[0].v[j]);
	}
	zmq_close(rogue);
	zmq_ctx_term(ctx);
	for (int i = 0; i < 2; i++)
		allreduce_ring_close(&two[i].ring);
}

/* A member whose values are not finite says so at once (-EDOM) rather than sending what the next
 * member would skip until its deadline. */
Test(allreduce_ring, non_finite_values_refused_at_the_sender, .timeout = 30)
{
	int port = base_port();
	char me[2][64];
	struct allreduce_ring *r[2];
	static float v[RING_LEN];
	bool stop = false;

	for (int i = 0; i < 2; i++)
		snprintf(me[i], sizeof me[i], "tcp://127.0.0.1:%d", port + i);
	for (int i = 0; i < 2; i++) {
		r[i] = allreduce_ring_open(i, 2, me[i], me[(i + 1) % 2], RING_LEN);
		cr_assert_not_null(r[i]);
	}
	v[3] = NAN; /* in member 0's first chunk */
	cr_assert_eq(allreduce_ring_mean(r[0], v, RING_LEN, 0, &stop, 20000), -EDOM);
	cr_assert_eq(allreduce_ring_stats(r[0])->msgs_tx, 0, "the chunk was sent");
	for (int i = 0; i < 2; i++)
		allreduce_ring_close(&r[i]);
}

/* --- whole runs ------------------------------------------------------------------------------- */

static void write_conf(const char *dir, int i, int n, int port, int64_t steps)
{
	struct kv *kv = kv_new();
	char path[512], name[32], names[256] = "", addrs[512] = "";

	for (int j = 0; j < n; j++) {
		char w[32];

		snprintf(w, sizeof w, "%sworker%d", j ? "," : "", j);
		strcat(names, w);
		strcat(addrs, j ? ",127.0.0.1" : "127.0.0.1");
	}
	snprintf(name, sizeof name, "worker%d", i);
	kv_set(kv, "run.dir", dir);
	kv_setf(kv, "run.origin_ns", "%lld", (long long)clock_now_ns());
	kv_set(kv, "run.seed", "11");
	kv_set(kv, "node.name", name);
	kv_set(kv, "node.role", "worker");
	kv_setf(kv, "node.index", "%d", i);
	kv_setf(kv, "workers.count", "%d", n);
	kv_set(kv, "workers.names", names);
	kv_set(kv, "workers.addrs", addrs);
	kv_setf(kv, "port.data", "%d", port);
	kv_set(kv, "topology.kind", "allreduce");
	kv_set(kv, "data.path", DATA_DIR);
	kv_set(kv, "data.train_limit", "3000");
	kv_set(kv, "data.test_limit", "2000");
	kv_set(kv, "model.kind", "softmax");
	kv_set(kv, "train.batch", "32");
	kv_set(kv, "train.lr", "0.05");
	kv_setf(kv, "stop.steps", "%lld", (long long)steps);
	kv_set(kv, "eval.every", "0.2");
	kv_set(kv, "train.save_model", "1");
	snprintf(path, sizeof path, "%s/worker%d.conf", dir, i);
	cr_assert_eq(kv_save(kv, path), 0);
	kv_destroy(&kv);
}

/* Run n nodes as child processes; returns how many exited 0 (others are killed at 75 s). */
static int run_nodes(const char *dir, int n)
{
	pid_t pids[8];

	for (int i = 0; i < n; i++) {
		char path[512];

		snprintf(path, sizeof path, "%s/worker%d.conf", dir, i);
		pids[i] = fork();
		cr_assert_neq(pids[i], -1);
		if (pids[i] == 0) {
			char err[256];
			struct kv *kv = kv_load(path, err, sizeof err);

			_exit(kv && engine_allreduce_run(kv) == 0 ? 0 : 1);
		}
	}
	return support_wait_children(pids, n, NULL, 75000);
}

Test(engine_allreduce, replicas_identical_and_accuracy_rises, .timeout = 90)
{
	char dir[] = "/tmp/stalenet-test-ar-XXXXXX";
	const int n = 3, steps = 120;
	char path[600], *p0, *pi, *ev, *line, *last = NULL;
	size_t l0, li, le;
	double first_acc = -1, last_acc = -1;

	cr_assert_not_null(support_mkdtemp(dir));
	for (int i = 0; i < n; i++)
		write_conf(dir, i, n, base_port(), steps);
	cr_assert_eq(run_nodes(dir, n), n, "every node must finish cleanly");

	snprintf(path, sizeof path, "%s/nodes/worker0.params", dir);
	p0 = support_slurp(path, &l0);
	cr_assert_eq(l0, 7850 * sizeof(float), "softmax 784x10 + 10");
	for (int i = 1; i < n; i++) {
		snprintf(path, sizeof path, "%s/nodes/worker%d.params", dir, i);
		pi = support_slurp(path, &li);
		cr_assert_eq(li, l0);
		cr_assert_eq(memcmp(p0, pi, l0), 0, "replica %d differs from replica 0", i);
		free(pi);
	}
	/* Each node traced every step exactly once, in order. */
	for (int i = 0; i < n; i++) {
		char *t, *save = NULL;
		int expect = 1;

		snprintf(path, sizeof path, "%s/nodes/worker%d.csv", dir, i);
		t = support_slurp(path, &li);
		for (line = strtok_r(t, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			double ts;
			char node[32];
			int step;

			if (!strncmp(line, "t_s,", 4))
				continue;
			cr_assert_eq(sscanf(line, "%lf,%31[^,],%d", &ts, node, &step), 3, "%s", line);
			cr_assert_eq(step, expect++, "worker%d: %s", i, line);
		}
		cr_assert_eq(expect, steps + 1, "worker%d traced %d steps", i, expect - 1);
		free(t);
	}
	snprintf(path, sizeof path, "%s/eval.csv", dir);
	ev = support_slurp(path, &le);
	for (char *save = NULL, *l = strtok_r(ev, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		double t, epoch, acc;
		unsigned long long upd, smp;
		char node[32];

		if (!strncmp(l, "t_s,", 4))
			continue;
		cr_assert_eq(sscanf(l, "%lf,%31[^,],%llu,%lf,%llu,%lf", &t, node, &upd, &epoch, &smp,
				    &acc), 6, "%s", l);
		if (first_acc < 0)
			first_acc = acc;
		last_acc = acc;
		last = l;
	}
	cr_assert_not_null(last, "eval.csv has rows");
	cr_assert_gt(last_acc, 0.6, "final accuracy %.3f (chance is 0.1)", last_acc);
	{
		char err[512] = "";

		cr_assert_eq(trace_schema_check_dir(dir, err, sizeof err), 0, "%s", err);
	}
	free(p0);
	free(ev);
}
