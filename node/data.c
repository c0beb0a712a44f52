/* node/data: see data.h. IDX format (LeCun): big-endian u32 magic 0x000008NN (NN = number of
 * dimensions), NN big-endian u32 sizes, then the ubyte payload. */
#include "node/data.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "lib/log.h"

/* An open IDX stream and how many decompressed bytes were consumed (for error offsets). */
struct idx {
	gzFile gz;
	const char *path;
	uint64_t off;
};

static int idx_open(struct idx *f, const char *path)
{
	f->path = path;
	f->off = 0;
	f->gz = gzopen(path, "rb");
	if (!f->gz) {
		int e = errno ? errno : EIO;

		log_error("open %s: %s", path, strerror(e));
		return -e;
	}
	gzbuffer(f->gz, 1 << 16);
	return 0;
}

static void idx_close(struct idx *f)
{
	if (f->gz)
		gzclose(f->gz);
	f->gz = NULL;
}

/* gzerror() text without the "path: " prefix zlib puts in front. */
static const char *zmsg(struct idx *f)
{
	int zerr;
	const char *msg = gzerror(f->gz, &zerr);
	size_t pl = strlen(f->path);

	if (strncmp(msg, f->path, pl) == 0 && msg[pl] == ':' && msg[pl + 1] == ' ')
		msg += pl + 2;
	return msg;
}

/* Read exactly len bytes or fail naming the offset where data ran out or was corrupt. */
static int idx_read(struct idx *f, void *buf, size_t len, const char *what)
{
	uint8_t *p = buf;
	size_t got = 0;

	while (got < len) {
		size_t chunk = len - got > (1u << 30) ? (1u << 30) : len - got;
		int r = gzread(f->gz, p + got, (unsigned)chunk);

		if (r < 0) {
			log_error("%s: corrupt data at byte offset %llu while reading %s: %s", f->path,
				  (unsigned long long)(f->off + got), what, zmsg(f));
			return -EINVAL;
		}
		if (r == 0) {
			int zerr;

			(void)gzerror(f->gz, &zerr);
			if (zerr != Z_OK && zerr != Z_BUF_ERROR)
				log_error("%s: corrupt data at byte offset %llu while reading %s: %s",
					  f->path, (unsigned long long)(f->off + got), what, zmsg(f));
			else
				log_error("%s: truncated at byte offset %llu while reading %s "
					  "(needed %zu more bytes)", f->path,
					  (unsigned long long)(f->off + got), what, len - got);
			return -EINVAL;
		}
		got += (size_t)r;
	}
	f->off += len;
	return 0;
}

static uint32_t be32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Read and check the header: magic, then ndims sizes into dims. */
static int idx_header(struct idx *f, uint32_t magic, uint32_t *dims, unsigned ndims)
{
	uint8_t h[16];
	uint32_t m;
	int rc;

	rc = idx_read(f, h, 4 + 4 * (size_t)ndims, "header");
	if (rc)
		return rc;
	m = be32(h);
	if (m != magic) {
		log_error("%s: bad magic 0x%08x at byte offset 0 (expected 0x%08x)", f->path, m, magic);
		return -EINVAL;
	}
	for (unsigned i = 0; i < ndims; i++)
		dims[i] = be32(h + 4 + 4 * i);
	return 0;
}

int data_paths(const char *dir, enum data_split split, char *images, char *labels, size_t len)
{
	const char *pre = split == DATA_TRAIN ? "train" : "t10k";
	int a = snprintf(images, len, "%s/%s-images-idx3-ubyte.gz", dir, pre);
	int b = snprintf(labels, len, "%s/%s-labels-idx1-ubyte.gz", dir, pre);

	if (a < 0 || b < 0 || (size_t)a >= len || (size_t)b >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* The label file's payload after its header; checks every label. */
static int read_labels_open(struct idx *f, uint8_t **labels, uint32_t *n)
{
	uint32_t dim;
	uint8_t *l = NULL;
	int rc;

	rc = idx_header(f, DATA_IDX_LABELS_MAGIC, &dim, 1);
	if (rc)
		return rc;
	if (dim == 0 || dim > (1u << 28)) {
		log_error("%s: implausible label count %u at byte offset 4", f->path, dim);
		return -EINVAL;
	}
	l = malloc(dim);
	if (!l)
		return -ENOMEM;
	rc = idx_read(f, l, dim, "labels");
	if (rc)
		goto out;
	for (uint32_t i = 0; i < dim; i++) {
		if (l[i] >= DATA_NCLASSES) {
			log_error("%s: label %u out of range at byte offset %u", f->path, l[i], 8 + i);
			rc = -EINVAL;
			goto out;
		}
	}
	*labels = l;
	*n = dim;
	l = NULL;
out:
	free(l);
	return rc;
}

int data_read_labels(const char *path, uint8_t **labels, uint32_t *n)
{
	struct idx f = { 0 };
	int rc;

	rc = idx_open(&f, path);
	if (rc)
		return rc;
	rc = read_labels_open(&f, labels, n);
	idx_close(&f);
	return rc;
}

void data_destroy(struct data_set **self)
{
	if (!self || !*self)
		return;
	free((*self)->pixels);
	free((*self)->labels);
	free((*self)->origin);
	free(*self);
	*self = NULL;
}

int data_load(const char *images_path, const char *labels_path, const uint32_t *keep, size_t nkeep,
	      struct data_set **out)
{
	struct idx f = { 0 };
	struct data_set *ds = NULL;
	uint8_t *all_labels = NULL;
	uint8_t *skip = NULL;
	uint32_t nlabels = 0, dims[3];
	uint32_t n, dim;
	int rc;

	*out = NULL;
	rc = data_read_labels(labels_path, &all_labels, &nlabels);
	if (rc)
		goto out;
	rc = idx_open(&f, images_path);
	if (rc)
		goto out;
	rc = idx_header(&f, DATA_IDX_IMAGES_MAGIC, dims, 3);
	if (rc)
		goto out;
	if (dims[1] == 0 || dims[2] == 0 || dims[1] > 4096 || dims[2] > 4096) {
		log_error("%s: bad image dimensions %ux%u at byte offset 8", images_path, dims[1], dims[2]);
		rc = -EINVAL;
		goto out;
	}
	if (dims[0] != nlabels) {
		log_error("%s: %u images at byte offset 4 but %s has %u labels", images_path, dims[0],
			  labels_path, nlabels);
		rc = -EINVAL;
		goto out;
	}
	n = keep ? (uint32_t)nkeep : nlabels;
	if (keep && nkeep > nlabels) {
		log_error("%s: asked for %zu samples of %u", images_path, nkeep, nlabels);
		rc = -EINVAL;
		goto out;
	}
	for (size_t i = 0; keep && i < nkeep; i++) {
		if (keep[i] >= nlabels || (i > 0 && keep[i] <= keep[i - 1])) {
			log_error("%s: sample index list not strictly ascending within %u (entry %zu = %u)",
				  images_path, nlabels, i, keep[i]);
			rc = -EINVAL;
			goto out;
		}
	}
	dim = dims[1] * dims[2];
	ds = calloc(1, sizeof *ds);
	if (!ds) {
		rc = -ENOMEM;
		goto out;
	}
	ds->n = n;
	ds->rows = dims[1];
	ds->cols = dims[2];
	ds->dim = dim;
	ds->pixels = malloc((size_t)n * dim + 1);
	ds->labels = malloc((size_t)n + 1);
	ds->origin = malloc(((size_t)n + 1) * sizeof *ds->origin);
	skip = malloc(dim);
	if (!ds->pixels || !ds->labels || !ds->origin || !skip) {
		rc = -ENOMEM;
		goto out;
	}
	/* Stream the images once; rows not kept are read into a scratch row and dropped. */
	{
		size_t k = 0;

		for (uint32_t i = 0; i < nlabels; i++) {
			int want = keep ? (k < nkeep && keep[k] == i) : 1;
			uint8_t *dst = want ? ds->pixels + k * (size_t)dim : skip;

			if (keep && k >= nkeep)
				break; /* the rest of the file is not needed */
			rc = idx_read(&f, dst, dim, "pixels");
			if (rc)
				goto out;
			if (want) {
				ds->labels[k] = all_labels[i];
				ds->origin[k] = i;
				k++;
			}
		}
	}
	*out = ds;
	ds = NULL;
out:
	idx_close(&f);
	free(all_labels);
	free(skip);
	data_destroy(&ds);
	return rc;
}

void data_batch(const struct data_set *self, const uint32_t *idx, size_t n, float *x, uint8_t *y)
{
	const float s = 1.0f / 255.0f;
	size_t dim = self->dim;

	for (size_t i = 0; i < n; i++) {
		size_t j = idx ? idx[i] : i;
		const uint8_t *p = self->pixels + j * dim;
		float *d = x + i * dim;

		for (size_t k = 0; k < dim; k++)
			d[k] = (float)p[k] * s;
		if (y)
			y[i] = self->labels[j];
	}
}
