/* node/fleet_queue: see fleet_queue.h. Pending versions are contiguous (first .. version), so
 * they live in a ring indexed by version - first. */
#include "node/fleet_queue.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/limits.h"
#include "lib/rfile.h"
#include "lib/safefile.h"
#include "node/fleet_codec.h"
#include "node/wire.h"

#define STATE_MAGIC 0x31514e53u /* "SNQ1" */
#define STATE_HEAD 16           /* magic, n, version */

struct pending {
	uint8_t *frame;
	size_t len;
};

struct fleet_queue {
	char dir[4096];
	uint32_t n;
	int64_t version;      /* last made */
	int64_t first;        /* lowest pending; pending = version - first + 1 when first > 0 */
	struct pending *p;    /* p[v - first] */
	size_t cap;
	float *model, *residual;
};

static size_t npending(const struct fleet_queue *q)
{
	return q->first > 0 ? (size_t)(q->version - q->first + 1) : 0;
}

static void path_of(const struct fleet_queue *q, int64_t v, char *out, size_t len)
{
	if (v > 0)
		snprintf(out, len, "%s/q-%020lld.frame", q->dir, (long long)v);
	else
		snprintf(out, len, "%s/state", q->dir);
}

static int state_write(struct fleet_queue *q)
{
	size_t vec = (size_t)q->n * sizeof(float), len = STATE_HEAD + 2 * vec + 8;
	uint8_t *b = malloc(len);
	uint32_t magic = STATE_MAGIC;
	uint64_t check;
	char path[4200];
	int rc;

	if (!b)
		return -ENOMEM;
	memcpy(b, &magic, 4);
	memcpy(b + 4, &q->n, 4);
	memcpy(b + 8, &q->version, 8);
	memcpy(b + STATE_HEAD, q->model, vec);
	memcpy(b + STATE_HEAD + vec, q->residual, vec);
	check = wire_hash64(b, len - 8, 0);
	memcpy(b + len - 8, &check, 8);
	path_of(q, 0, path, sizeof path);
	rc = safefile_replace(path, b, len, 0600);
	free(b);
	return rc;
}

static int state_read(struct fleet_queue *q)
{
	size_t vec = (size_t)q->n * sizeof(float), want = STATE_HEAD + 2 * vec + 8, len = 0;
	char path[4200], err[256];
	char *b = NULL;
	uint32_t magic, n;
	uint64_t check;
	int64_t v;
	int rc;

	path_of(q, 0, path, sizeof path);
	if (access(path, F_OK) < 0)
		return -ENOENT;
	rc = rfile_read(path, want, &b, &len, err, sizeof err);
	if (rc < 0)
		return rc;
	rc = -EBADMSG;
	if (len != want)
		goto out;
	memcpy(&magic, b, 4);
	memcpy(&n, b + 4, 4);
	memcpy(&v, b + 8, 8);
	memcpy(&check, b + len - 8, 8);
	if (magic != STATE_MAGIC || n != q->n || v < 0 || check != wire_hash64(b, len - 8, 0))
		goto out;
	q->version = v;
	memcpy(q->model, b + STATE_HEAD, vec);
	memcpy(q->residual, b + STATE_HEAD + vec, vec);
	rc = 0;
out:
	free(b);
	return rc;
}

static int grow(struct fleet_queue *q, size_t need)
{
	struct pending *p;
	size_t cap = q->cap ? q->cap : 16;

	if (need <= q->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	p = realloc(q->p, cap * sizeof *p);
	if (!p)
		return -ENOMEM;
	memset(p + q->cap, 0, (cap - q->cap) * sizeof *p);
	q->p = p;
	q->cap = cap;
	return 0;
}

/* Parse "q-<20 digits>.frame"; 0 for any other name. */
static int64_t frame_version(const char *name)
{
	int64_t v = 0;

	if (strncmp(name, "q-", 2) || strlen(name) != 2 + 20 + 6 || strcmp(name + 22, ".frame"))
		return 0;
	for (int i = 2; i < 22; i++) {
		if (name[i] < '0' || name[i] > '9' || v > (INT64_MAX - 9) / 10)
			return 0;
		v = v * 10 + (name[i] - '0');
	}
	return v;
}

/* Load the frames <= q->version (the longest contiguous run ending at it); remove the rest. */
static int frames_load(struct fleet_queue *q)
{
	DIR *d = opendir(q->dir);
	struct dirent *e;
	int64_t lo = q->version + 1;
	size_t max = fleet_codec_frame_max(q->n);
	char path[4200], err[256];
	int rc = 0;

	if (!d)
		return -errno;
	/* First pass: remove what is newer than the state; find the lowest frame. */
	while ((e = readdir(d))) {
		int64_t v = frame_version(e->d_name);

		if (!v)
			continue;
		if (v > q->version) {
			path_of(q, v, path, sizeof path);
			unlink(path);
		} else if (v < lo) {
			lo = v;
		}
	}
	closedir(d);
	/* Keep the contiguous run that ends at version: walk down from it. */
	for (int64_t v = q->version; v >= lo && v > 0; v--) {
		char *b = NULL;
		size_t len = 0;
		struct fleet_frame_info in;

		path_of(q, v, path, sizeof path);
		if (access(path, F_OK) < 0)
			break;
		if (rfile_read(path, max, &b, &len, err, sizeof err) < 0 ||
		    fleet_codec_peek((uint8_t *)b, len, &in) < 0 || in.n != q->n) {
			free(b);
			rc = -EBADMSG; /* a damaged frame: what is below it cannot be sent in order */
			break;
		}
		if (npending(q) + 1 > FLEET_QUEUE_MAX || grow(q, npending(q) + 1) < 0) {
			free(b);
			rc = -ENOMEM;
			break;
		}
		/* Prepend: shift up by one (loading happens once, at start). */
		memmove(q->p + 1, q->p, npending(q) * sizeof *q->p);
		q->p[0] = (struct pending){ .frame = (uint8_t *)b, .len = len };
		q->first = v;
	}
	return rc;
}

struct fleet_queue *fleet_queue_open(const char *dir, uint32_t n, char *err, size_t errlen)
{
	struct fleet_queue *q = calloc(1, sizeof *q);
	int rc;

	if (!q || n == 0 || n > LIMITS_MAX_PARAMS) {
		snprintf(err, errlen, "%s: %s", dir, q ? "bad model size" : "out of memory");
		free(q);
		return NULL;
	}
	q->n = n;
	if ((size_t)snprintf(q->dir, sizeof q->dir, "%s", dir) >= sizeof q->dir) {
		snprintf(err, errlen, "%s: path too long", dir);
		goto fail;
	}
	q->model = calloc(n, sizeof(float));
	q->residual = calloc(n, sizeof(float));
	if (!q->model || !q->residual) {
		snprintf(err, errlen, "%s: out of memory", dir);
		goto fail;
	}
	if ((rc = safefile_mkdir(dir, 0700)) < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
		goto fail;
	}
	rc = state_read(q);
	if (rc < 0 && rc != -ENOENT) {
		snprintf(err, errlen, "%s/state: %s", dir, rc == -EBADMSG ? "damaged" : strerror(-rc));
		goto fail;
	}
	if ((rc = frames_load(q)) < 0 && rc != -EBADMSG) {
		snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
		goto fail;
	}
	return q;
fail:
	fleet_queue_close(&q);
	return NULL;
}

void fleet_queue_close(struct fleet_queue **p)
{
	struct fleet_queue *q = p ? *p : NULL;

	if (!q)
		return;
	for (size_t i = 0; i < npending(q); i++)
		free(q->p[i].frame);
	free(q->p);
	free(q->model);
	free(q->residual);
	free(q);
	*p = NULL;
}

int64_t fleet_queue_version(const struct fleet_queue *q)
{
	return q->version;
}

void fleet_queue_state(const struct fleet_queue *q, float *model, float *residual)
{
	if (model)
		memcpy(model, q->model, (size_t)q->n * sizeof(float));
	if (residual)
		memcpy(residual, q->residual, (size_t)q->n * sizeof(float));
}

int fleet_queue_push(struct fleet_queue *q, const uint8_t *frame, size_t len, const float *model,
		     const float *residual)
{
	size_t k = npending(q);
	char path[4200];
	uint8_t *copy;
	int rc;

	if (k >= FLEET_QUEUE_MAX)
		return -ENOBUFS;
	if ((rc = grow(q, k + 1)) < 0)
		return rc;
	copy = malloc(len);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, frame, len);
	path_of(q, q->version + 1, path, sizeof path);
	if ((rc = safefile_replace(path, frame, len, 0600)) < 0) {
		free(copy);
		return rc;
	}
	q->version++;
	memcpy(q->model, model, (size_t)q->n * sizeof(float));
	memcpy(q->residual, residual, (size_t)q->n * sizeof(float));
	if ((rc = state_write(q)) < 0) {
		/* The frame file is newer than the state now: undone here, or at the next load. */
		unlink(path);
		q->version--;
		free(copy);
		return rc;
	}
	if (!q->first)
		q->first = q->version;
	q->p[k] = (struct pending){ .frame = copy, .len = len };
	return 0;
}

static void drop_front(struct fleet_queue *q, size_t count)
{
	size_t k = npending(q);
	char path[4200];

	for (size_t i = 0; i < count; i++) {
		path_of(q, q->first + (int64_t)i, path, sizeof path);
		unlink(path);
		free(q->p[i].frame);
	}
	if (k > count) /* q->p is NULL while nothing was ever queued */
		memmove(q->p, q->p + count, (k - count) * sizeof *q->p);
	q->first = k == count ? 0 : q->first + (int64_t)count;
}

int fleet_queue_reset(struct fleet_queue *q, int64_t version, const float *model)
{
	drop_front(q, npending(q));
	q->version = version;
	memcpy(q->model, model, (size_t)q->n * sizeof(float));
	memset(q->residual, 0, (size_t)q->n * sizeof(float));
	return state_write(q);
}

size_t fleet_queue_ack(struct fleet_queue *q, int64_t version)
{
	size_t count;

	if (!q->first || version < q->first)
		return 0;
	count = version >= q->version ? npending(q) : (size_t)(version - q->first + 1);
	drop_front(q, count);
	return count;
}

size_t fleet_queue_pending(const struct fleet_queue *q)
{
	return npending(q);
}

int64_t fleet_queue_first(const struct fleet_queue *q)
{
	return q->first;
}

size_t fleet_queue_frame(const struct fleet_queue *q, int64_t version, const uint8_t **frame)
{
	*frame = NULL;
	if (!q->first || version < q->first || version > q->version)
		return 0;
	*frame = q->p[version - q->first].frame;
	return q->p[version - q->first].len;
}
