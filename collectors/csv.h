/* collectors/csv: append-only CSV trace files, written line by line.
 *
 * Every row is formatted into one buffer and written with one write(2) on an O_APPEND fd, so
 * a node that crashes loses nothing it had finished and concurrent writers never interleave
 * inside a row. A row cut short (full disk) is truncated away and never followed by later rows.
 * The header is written only when the file is new or empty (a restarted node
 * appends to its own trace). Columns and units of every file: docs/traces.md.
 *
 * Fields follow RFC 4180: a field holding ',', '"', CR or LF is written between double quotes
 * with each '"' doubled. Numbers never need it; strings that can hold such characters (labels,
 * sweep values, event details) go through csv_quote() before they are formatted into a row. */
#ifndef STALENET_CSV_H
#define STALENET_CSV_H

#include <stdbool.h>
#include <stddef.h>

struct csv_writer;

/* Open (create or append) path; write header (a line without '\n') if the file is empty.
 * Returns NULL and logs on failure. */
struct csv_writer *csv_writer_open(const char *path, const char *header);

/* Append one row formatted like printf; a '\n' is added. Returns 0 or -errno. A row the file
 * system took only part of (full disk, file size limit) is cut back off the file, so it always
 * ends with a whole row, and is -ENOSPC; after any failed row every later one fails the same. */
int csv_writer_row(struct csv_writer *self, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Write s as one CSV field into buf (always NUL-terminated when buflen > 0): unchanged when
 * it holds none of , " CR LF, else quoted with '"' doubled. Returns the length of the whole
 * field (without the NUL), like snprintf: the field was truncated when it is >= buflen. */
size_t csv_quote(const char *s, char *buf, size_t buflen);

/* Whether s must be quoted as a CSV field (holds ',', '"', CR or LF). */
bool csv_needs_quote(const char *s);

/* CSV text built in memory (a whole file to be replaced at once). p is NUL-terminated once
 * anything was put (malloc'd: the caller frees it), len its length. rc turns -ENOMEM when the
 * text cannot grow; every later put is then ignored, so a caller checks rc once at the end. */
struct csv_buf {
	char *p;
	size_t len, cap;
	int rc;
};

/* Append s as it is. */
void csv_buf_put(struct csv_buf *b, const char *s);
/* Append s as one CSV field (csv_quote). */
void csv_buf_field(struct csv_buf *b, const char *s);

/* Rows written through this writer since open. */
size_t csv_writer_rows(const struct csv_writer *self);

const char *csv_writer_path(const struct csv_writer *self);

/* Close and free; accepts NULL; sets *self = NULL. */
void csv_writer_close(struct csv_writer **self);

#endif
