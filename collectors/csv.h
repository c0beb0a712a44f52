/* collectors/csv: append-only CSV trace files, written line by line.
 *
 * Every row is formatted into one buffer and written with one write(2) on an O_APPEND fd, so
 * a node that crashes loses nothing it had finished and concurrent writers never interleave
 * inside a row. The header is written only when the file is new or empty (a restarted node
 * appends to its own trace). Columns and units of every file: docs/traces.md. */
#ifndef STALENET_CSV_H
#define STALENET_CSV_H

#include <stddef.h>

struct csv_writer;

/* Open (create or append) path; write header (a line without '\n') if the file is empty.
 * Returns NULL and logs on failure. */
struct csv_writer *csv_writer_open(const char *path, const char *header);

/* Append one row formatted like printf; a '\n' is added. Returns 0 or -errno. */
int csv_writer_row(struct csv_writer *self, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Rows written through this writer since open. */
size_t csv_writer_rows(const struct csv_writer *self);

const char *csv_writer_path(const struct csv_writer *self);

/* Close and free; accepts NULL; sets *self = NULL. */
void csv_writer_close(struct csv_writer **self);

#endif
