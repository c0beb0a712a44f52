/* node/data: IDX image/label sets (Fashion-MNIST, MNIST) read with zlib, kept as uint8.
 *
 * Pixels stay uint8 in memory and are scaled to [0,1] floats one minibatch at a time, so a
 * worker that keeps 1/200 of the training set holds ~235 KB of pixels. Loading is streaming:
 * the labels are read first (60 KB), the partitioner chooses this node's indices, then the
 * image file is decompressed sequentially and only the selected rows are kept; the full
 * 47 MB image array never exists in a worker. Every header field, magic number, dimension
 * and length is validated; a short or corrupt file is an error naming the file and the byte
 * offset (in the decompressed stream) where reading failed. gzread() also reads plain,
 * uncompressed IDX files transparently. */
#ifndef STALENET_DATA_H
#define STALENET_DATA_H

#include <stddef.h>
#include <stdint.h>

#define DATA_NCLASSES 10
/* Magic numbers of the IDX format: 0x0000 08 (ubyte) 03 (dims) / 01. */
#define DATA_IDX_IMAGES_MAGIC 0x00000803u
#define DATA_IDX_LABELS_MAGIC 0x00000801u

/* A set of n images of rows x cols uint8 pixels with labels in [0, DATA_NCLASSES). */
struct data_set {
	uint32_t n;
	uint32_t rows, cols;
	uint32_t dim;      /* rows * cols */
	uint8_t *pixels;   /* n * dim, row-major per image; owned */
	uint8_t *labels;   /* n; owned */
	uint32_t *origin;  /* n; index of each sample in the source file (ascending); owned */
};

enum data_split { DATA_TRAIN, DATA_TEST };

/* Fill images/labels (each of len bytes) with the file paths of split under dir:
 * DIR/train-images-idx3-ubyte.gz etc. (same names for fashion-mnist and mnist).
 * Returns 0 or -ENAMETOOLONG. */
int data_paths(const char *dir, enum data_split split, char *images, char *labels, size_t len);

/* Read a whole IDX1 label file. *labels (malloc'd, caller frees) gets *n labels, each checked
 * to be < DATA_NCLASSES. Returns 0, -ENOENT/-EIO (unreadable), -EINVAL (bad magic, bad label,
 * truncated: the error is logged with the file and byte offset). */
int data_read_labels(const char *path, uint8_t **labels, uint32_t *n);

/* Load the samples whose indices are listed in keep (strictly ascending, nkeep of them) from an
 * IDX3 image file and its IDX1 label file; keep == NULL loads all. The counts of the two files
 * must agree. *out is a new set (free with data_destroy). Returns 0 or negative errno
 * (-EINVAL for malformed/truncated files or out-of-range indices, logged with offset). */
int data_load(const char *images_path, const char *labels_path, const uint32_t *keep, size_t nkeep,
	      struct data_set **out);

/* Free a set; accepts NULL; sets *self = NULL. */
void data_destroy(struct data_set **self);

/* Scale the samples idx[0..n) of self to floats in [0,1] into x (n * self->dim) and copy their
 * labels into y (n). idx holds positions within self (not file indices); idx == NULL means
 * samples 0..n-1. */
void data_batch(const struct data_set *self, const uint32_t *idx, size_t n, float *x, uint8_t *y);

#endif
