/* node/fleet_queue: a device's durable state survives a restart (version, model, residual, the
 * unacknowledged frames), acks drop exactly what they cover, a push cut short by a crash is
 * undone at the next open, and damaged files are refused. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/fleet_codec.h"
#include "node/fleet_queue.h"
#include "tests/support/files.h"

#define N 64

static char dir[256], qdir[300];

static void setup(void)
{
	cr_assert_not_null(support_tmpdir(dir, sizeof dir, "fleet_queue"));
	snprintf(qdir, sizeof qdir, "%s/device0.fleet", dir);
}

static void teardown(void)
{
	support_rm_rf(dir);
}

static void model_of(int v, float *m)
{
	for (int i = 0; i < N; i++)
		m[i] = (float)v + (float)i / 100.0f;
}

static struct fleet_queue *open_q(void)
{
	char err[256];
	struct fleet_queue *q = fleet_queue_open(qdir, N, err, sizeof err);

	cr_assert_not_null(q, "%s", err);
	return q;
}

static void push(struct fleet_queue *q, int v)
{
	float m[N], prev[N], res[N];
	uint8_t *f;
	size_t len;

	model_of(v, m);
	model_of(v - 1, prev);
	for (int i = 0; i < N; i++)
		res[i] = (float)-v;
	cr_assert_eq(fleet_codec_encode(FLEET_DELTA, m, prev, N, &f, &len), 0);
	cr_assert_eq(fleet_queue_push(q, f, len, m, res), 0);
	free(f);
}

/* The pending frame of v decodes (against v - 1) to model v. */
static void assert_frame(struct fleet_queue *q, int v)
{
	const uint8_t *f;
	size_t len = fleet_queue_frame(q, v, &f);
	float prev[N], m[N], want[N];

	cr_assert_gt(len, 0, "v%d not pending", v);
	model_of(v - 1, prev);
	model_of(v, want);
	cr_assert_eq(fleet_codec_decode(f, len, prev, N, m), 0);
	cr_assert_eq(memcmp(m, want, sizeof m), 0);
}

Test(fleet_queue, survives_restart_and_acks, .init = setup, .fini = teardown)
{
	struct fleet_queue *q = open_q();
	float m[N], res[N], want[N];

	cr_assert_eq(fleet_queue_version(q), 0);
	cr_assert_eq(fleet_queue_pending(q), 0);
	for (int v = 1; v <= 5; v++)
		push(q, v);
	cr_assert_eq(fleet_queue_pending(q), 5);
	fleet_queue_close(&q);

	q = open_q();
	cr_assert_eq(fleet_queue_version(q), 5);
	cr_assert_eq(fleet_queue_pending(q), 5);
	cr_assert_eq(fleet_queue_first(q), 1);
	fleet_queue_state(q, m, res);
	model_of(5, want);
	cr_assert_eq(memcmp(m, want, sizeof m), 0);
	cr_assert_eq(res[3], -5.0f);
	for (int v = 1; v <= 5; v++)
		assert_frame(q, v);
	cr_assert_eq(fleet_queue_ack(q, 3), 3);
	cr_assert_eq(fleet_queue_ack(q, 2), 0); /* already gone */
	cr_assert_eq(fleet_queue_first(q), 4);
	cr_assert_eq(fleet_queue_pending(q), 2);
	fleet_queue_close(&q);

	q = open_q();
	cr_assert_eq(fleet_queue_pending(q), 2);
	cr_assert_eq(fleet_queue_first(q), 4);
	assert_frame(q, 4);
	assert_frame(q, 5);
	push(q, 6);
	cr_assert_eq(fleet_queue_ack(q, 6), 3);
	cr_assert_eq(fleet_queue_pending(q), 0);
	cr_assert_eq(fleet_queue_first(q), 0);
	fleet_queue_close(&q);
	q = open_q();
	cr_assert_eq(fleet_queue_version(q), 6);
	cr_assert_eq(fleet_queue_pending(q), 0);
	fleet_queue_close(&q);
}

Test(fleet_queue, unfinished_push_and_reset, .init = setup, .fini = teardown)
{
	struct fleet_queue *q = open_q();
	char path[400];
	const uint8_t *f;
	float m[N];

	push(q, 1);
	push(q, 2);
	fleet_queue_close(&q);
	/* A crash after the frame of version 3 was written, before the state named it. */
	snprintf(path, sizeof path, "%s/q-%020d.frame", qdir, 3);
	support_write_file(path, "junk");
	q = open_q();
	cr_assert_eq(fleet_queue_version(q), 2);
	cr_assert_eq(fleet_queue_pending(q), 2);
	cr_assert_eq(fleet_queue_frame(q, 3, &f), 0);
	cr_assert_eq(access(path, F_OK), -1, "the unfinished frame is removed");
	/* Reset to what a registry deployed. */
	model_of(9, m);
	cr_assert_eq(fleet_queue_reset(q, 9, m), 0);
	cr_assert_eq(fleet_queue_pending(q), 0);
	fleet_queue_close(&q);
	q = open_q();
	cr_assert_eq(fleet_queue_version(q), 9);
	fleet_queue_close(&q);
}

/* Reset and ack of a queue that never held a frame (no pending array at all): a no-op on the
 * queue, not a memmove from NULL (UBSan in `make asan`). */
Test(fleet_queue, reset_and_ack_when_empty, .init = setup, .fini = teardown)
{
	struct fleet_queue *q = open_q();
	float m[N], got[N], res[N];

	model_of(4, m);
	cr_assert_eq(fleet_queue_pending(q), 0);
	cr_assert_eq(fleet_queue_ack(q, 7), 0);
	cr_assert_eq(fleet_queue_reset(q, 5, m), 0);
	cr_assert_eq(fleet_queue_pending(q), 0);
	cr_assert_eq(fleet_queue_version(q), 5);
	fleet_queue_state(q, got, res);
	cr_assert_float_eq(got[N - 1], m[N - 1], 0);
	cr_assert_float_eq(res[0], 0.0f, 0);
	fleet_queue_close(&q);
}

Test(fleet_queue, damaged_state_refused, .init = setup, .fini = teardown)
{
	struct fleet_queue *q = open_q();
	char path[400], err[256];
	size_t len;
	char *b;

	push(q, 1);
	fleet_queue_close(&q);
	snprintf(path, sizeof path, "%s/state", qdir);
	b = support_read_file(path, &len);
	cr_assert_not_null(b);
	b[40] ^= 1;
	{
		FILE *fp = fopen(path, "w");

		cr_assert_not_null(fp);
		cr_assert_eq(fwrite(b, 1, len, fp), len);
		fclose(fp);
	}
	free(b);
	cr_assert_null(fleet_queue_open(qdir, N, err, sizeof err));
	cr_assert(strstr(err, "damaged"), "%s", err);
	/* Another model size: refused too. */
	cr_assert_null(fleet_queue_open(qdir, N + 1, err, sizeof err));
}
