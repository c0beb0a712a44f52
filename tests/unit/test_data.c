/* Unit tests for node/data: IDX files generated here (gzip and plain), loaded whole and by index
 * list, and every kind of damage: truncation (header and payload), wrong magic, wrong dimensions,
 * label out of range, count mismatch, corrupt gzip stream. Errors must be -EINVAL, never a crash. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "node/data.h"
#include "tests/support/files.h"

#define N 7
#define R 3
#define C 4

static char dir[] = "/tmp/stalenet-data-XXXXXX";
static char img[256], lbl[256];

static void put32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}

static uint8_t pixel(unsigned i, unsigned j)
{
	return (uint8_t)(i * 31 + j * 7 + 1);
}

/* Build an images file: magic, n, rows, cols, then payload_len bytes of pixels. */
static size_t make_images(uint8_t *buf, uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols)
{
	put32(buf, magic);
	put32(buf + 4, n);
	put32(buf + 8, rows);
	put32(buf + 12, cols);
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = 0; j < rows * cols; j++)
			buf[16 + i * rows * cols + j] = pixel(i, j);
	return 16 + (size_t)n * rows * cols;
}

static size_t make_labels(uint8_t *buf, uint32_t magic, uint32_t n)
{
	put32(buf, magic);
	put32(buf + 4, n);
	for (unsigned i = 0; i < n; i++)
		buf[8 + i] = (uint8_t)((i * 3) % 10);
	return 8 + n;
}

static void write_gz(const char *path, const uint8_t *b, size_t len)
{
	gzFile g = gzopen(path, "wb");

	cr_assert_not_null(g);
	if (len)
		cr_assert_eq(gzwrite(g, b, (unsigned)len), (int)len);
	gzclose(g);
}

static void write_plain(const char *path, const uint8_t *b, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	fwrite(b, 1, len, f);
	fclose(f);
}

static void setup(void)
{
	uint8_t b[1024];

	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(img, sizeof img, "%s/img.gz", dir);
	snprintf(lbl, sizeof lbl, "%s/lbl.gz", dir);
	write_gz(img, b, make_images(b, DATA_IDX_IMAGES_MAGIC, N, R, C));
	write_gz(lbl, b, make_labels(b, DATA_IDX_LABELS_MAGIC, N));
}

static void teardown(void)
{
	cr_assert_eq(support_rm_rf(dir), 0);
}

TestSuite(data, .init = setup, .fini = teardown);

Test(data, load_all_and_batch)
{
	struct data_set *ds = NULL;
	float x[2 * R * C];
	uint8_t y[2];
	uint32_t pick[2] = { 6, 2 };

	cr_assert_eq(data_load(img, lbl, NULL, 0, &ds), 0);
	cr_assert_eq(ds->n, N);
	cr_assert_eq(ds->rows, R);
	cr_assert_eq(ds->cols, C);
	cr_assert_eq(ds->dim, R * C);
	for (unsigned i = 0; i < N; i++) {
		cr_assert_eq(ds->labels[i], (i * 3) % 10);
		cr_assert_eq(ds->origin[i], i);
		for (unsigned j = 0; j < R * C; j++)
			cr_assert_eq(ds->pixels[i * R * C + j], pixel(i, j));
	}
	data_batch(ds, pick, 2, x, y);
	cr_assert_eq(y[0], 8);
	cr_assert_eq(y[1], 6);
	for (unsigned j = 0; j < R * C; j++) {
		cr_assert_float_eq(x[j], pixel(6, j) / 255.0f, 1e-7);
		cr_assert_float_eq(x[R * C + j], pixel(2, j) / 255.0f, 1e-7);
	}
	data_destroy(&ds);
	cr_assert_null(ds);
	data_destroy(&ds);
}

Test(data, load_subset_keeps_only_selected)
{
	struct data_set *ds = NULL;
	uint32_t keep[3] = { 1, 4, 6 };
	uint32_t bad[2] = { 4, 4 };
	uint32_t range[1] = { N };

	cr_assert_eq(data_load(img, lbl, keep, 3, &ds), 0);
	cr_assert_eq(ds->n, 3);
	for (unsigned k = 0; k < 3; k++) {
		cr_assert_eq(ds->origin[k], keep[k]);
		cr_assert_eq(ds->labels[k], (keep[k] * 3) % 10);
		for (unsigned j = 0; j < R * C; j++)
			cr_assert_eq(ds->pixels[k * R * C + j], pixel(keep[k], j));
	}
	data_destroy(&ds);
	cr_assert_eq(data_load(img, lbl, bad, 2, &ds), -EINVAL);
	cr_assert_eq(data_load(img, lbl, range, 1, &ds), -EINVAL);
	cr_assert_null(ds);
}

Test(data, plain_uncompressed_and_labels_only)
{
	uint8_t b[1024];
	char p1[300], p2[300];
	struct data_set *ds = NULL;
	uint8_t *l = NULL;
	uint32_t n = 0;

	snprintf(p1, sizeof p1, "%s/img.raw", dir);
	snprintf(p2, sizeof p2, "%s/lbl.raw", dir);
	write_plain(p1, b, make_images(b, DATA_IDX_IMAGES_MAGIC, N, R, C));
	write_plain(p2, b, make_labels(b, DATA_IDX_LABELS_MAGIC, N));
	cr_assert_eq(data_load(p1, p2, NULL, 0, &ds), 0);
	cr_assert_eq(ds->n, N);
	cr_assert_eq(ds->pixels[5 * R * C + 3], pixel(5, 3));
	data_destroy(&ds);
	cr_assert_eq(data_read_labels(p2, &l, &n), 0);
	cr_assert_eq(n, N);
	cr_assert_eq(l[4], 2);
	free(l);
}

Test(data, truncated_payload_and_header)
{
	uint8_t b[1024];
	size_t len = make_images(b, DATA_IDX_IMAGES_MAGIC, N, R, C);
	struct data_set *ds = NULL;
	uint8_t *l = NULL;
	uint32_t n;

	write_gz(img, b, len - 5);  /* last image short */
	cr_assert_eq(data_load(img, lbl, NULL, 0, &ds), -EINVAL);
	cr_assert_null(ds);
	write_gz(img, b, 10);       /* header cut */
	cr_assert_eq(data_load(img, lbl, NULL, 0, &ds), -EINVAL);
	write_gz(img, b, 0);        /* empty */
	cr_assert_eq(data_load(img, lbl, NULL, 0, &ds), -EINVAL);
	len = make_labels(b, DATA_IDX_LABELS_MAGIC, N);
	write_gz(lbl, b, len - 1);
	cr_assert_eq(data_read_labels(lbl, &l, &n), -EINVAL);
	cr_assert_null(l);
}

Test(data, wrong_magic)
{
	uint8_t b[1024];
	struct data_set *ds = NULL;

	write_gz(img, b, make_images(b, 0x00000804u, N, R, C));
	cr_assert_eq(data_load(img, lbl, NULL, 0, &ds), -EINVAL);
	write_gz(img, b, make_images(b, DATA_IDX_IMAGES_MAGIC, N, R, C));
	write_gz(lbl, b, make_images(b, DATA_IDX_IMAGES_MAGIC, N, R, C)); /* images as labels */
	cr_assert_eq(data_load(img, lbl, NULL, 0, &ds), -EINVAL);
	cr_assert_null(ds);
}

Test(data, wrong_dimensions)
{
	uint8_t b[1024];
	struct data_set *ds = NULL;

	/* one image more than labels */
	write_gz(img, b, make_images(b, DATA_IDX_IMAGES_MAGIC, N + 1, R, C));
	cr_assert_eq(data_load(img, lbl, NULL, 0, &ds), -EINVAL);
	/* zero rows */
	write_gz(img, b, make_images(b, DATA_IDX_IMAGES_MAGIC, N, 0, C));
	cr_assert_eq(data_load(img, lbl, NULL, 0, &ds), -EINVAL);
	/* header claims huge images the file does not hold */
	make_images(b, DATA_IDX_IMAGES_MAGIC, N, R, C);
	put32(b + 8, 4000);
	write_gz(img, b, 16 + N * R * C);
	cr_assert_eq(data_load(img, lbl, NULL, 0, &ds), -EINVAL);
	cr_assert_null(ds);
}

Test(data, label_out_of_range)
{
	uint8_t b[1024];
	uint8_t *l = NULL;
	uint32_t n;

	make_labels(b, DATA_IDX_LABELS_MAGIC, N);
	b[8 + 3] = 10;
	write_gz(lbl, b, 8 + N);
	cr_assert_eq(data_read_labels(lbl, &l, &n), -EINVAL);
	cr_assert_null(l);
}

Test(data, corrupt_gzip_stream)
{
	uint8_t b[4096];
	size_t len = make_images(b, DATA_IDX_IMAGES_MAGIC, 40, 8, 8);
	uint8_t *z = malloc(8192);
	FILE *f;
	size_t zl;
	struct data_set *ds = NULL;

	write_gz(img, b, len);
	write_gz(lbl, b, make_labels(b, DATA_IDX_LABELS_MAGIC, 40));
	f = fopen(img, "rb");
	zl = fread(z, 1, 8192, f);
	fclose(f);
	for (size_t i = zl / 2; i < zl - 8; i++)  /* garble the second half of the deflate data */
		z[i] ^= 0x5a;
	write_plain(img, z, zl);
	cr_assert_eq(data_load(img, lbl, NULL, 0, &ds), -EINVAL);
	cr_assert_null(ds);
	cr_assert_lt(data_load("/nonexistent/x.gz", lbl, NULL, 0, &ds), 0);
	free(z);
}

Test(data, paths)
{
	char a[128], l[128];

	cr_assert_eq(data_paths("/d", DATA_TEST, a, l, sizeof a), 0);
	cr_assert_str_eq(a, "/d/t10k-images-idx3-ubyte.gz");
	cr_assert_str_eq(l, "/d/t10k-labels-idx1-ubyte.gz");
	cr_assert_eq(data_paths("/d", DATA_TRAIN, a, l, 10), -ENAMETOOLONG);
}
