/* collectors/table: read a whole trace CSV into memory, for checks, summaries and plots.
 *
 * Trace files are small (one row per step or per sample period), so a run's files are read
 * whole rather than streamed. The format is the one collectors/csv writes and docs/traces.md
 * fixes: RFC 4180, a header record, then records of comma-separated fields; a field may be
 * quoted ("a, b" with '""' for a quote, and line breaks inside quotes belong to the field);
 * '\n' record ends, a '\r' before it is tolerated. Fields are kept as strings (unquoted);
 * numeric getters parse on demand. */
#ifndef STALENET_TABLE_H
#define STALENET_TABLE_H

#include <stdbool.h>
#include <stddef.h>

struct table;

/* A trace larger than this is not a trace: refuse it rather than exhaust memory. */
#define TABLE_MAX_BYTES ((size_t)1 << 30)

/* Read path (lib/rfile: a symlink is followed, but only to a regular file; a FIFO, device or
 * directory is refused without blocking). Returns NULL and fills err ("path: what" or
 * "path:line: what") when the file cannot be read, is not a regular file, holds more than
 * TABLE_MAX_BYTES or a row has a different number of fields than the header. Sets *missing
 * (when non-NULL) to true if the file does not exist, so callers can treat absence apart. */
struct table *table_load(const char *path, bool *missing, char *err, size_t errlen);

/* Parse len bytes of CSV text at buf (need not be NUL-terminated; buf is copied). name is
 * used in messages in place of a path. Returns NULL with err filled ("name:line: what") when
 * the text is malformed: unterminated quote, text after a closing quote, a quote inside an
 * unquoted field, a NUL byte, an empty record, or a record whose field count is not the header's. */
struct table *table_parse(const char *buf, size_t len, const char *name, char *err, size_t errlen);

/* Free; accepts NULL; sets *self = NULL. */
void table_destroy(struct table **self);

size_t table_rows(const struct table *self);
size_t table_cols(const struct table *self);

/* Header name of column c. Owned by self. */
const char *table_colname(const struct table *self, size_t c);

/* Index of the column named name, or -1. */
int table_col(const struct table *self, const char *name);

/* Field (row r, column c), owned by self; "" for an empty field. */
const char *table_get(const struct table *self, size_t r, size_t c);

/* 1-based line number in the file where row r starts (the header starts on line 1; a quoted
 * field holding line breaks makes a record span several lines). */
size_t table_line(const struct table *self, size_t r);

/* Parse field (r, c) as a finite double. Returns 0, or -EINVAL (empty or malformed), or
 * -ERANGE (not finite). */
int table_double(const struct table *self, size_t r, size_t c, double *out);

/* Field (r, c) as double, or def when empty or malformed (for tolerant readers). */
double table_double_or(const struct table *self, size_t r, size_t c, double def);

/* The column names joined with ',' (as parsed, not re-quoted) into buf (truncated to buflen).
 * Returns buf. */
const char *table_header(const struct table *self, char *buf, size_t buflen);

#endif
