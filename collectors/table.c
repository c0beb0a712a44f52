/* collectors/table: see table.h.
 *
 * The text is held in one buffer and unquoted in place: a field never grows when its quotes
 * and doubled quotes are removed, so the write position never passes the read position. Each
 * field ends with a NUL written over its delimiter (or over a removed quote), and the table
 * keeps one array of pointers into the buffer, so a table is four allocations whatever its size. */
#include "collectors/table.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "lib/rfile.h"

struct table {
	char *buf;        /* file contents, fields NUL-terminated in place */
	char **fields;    /* (rows + 1) * cols pointers; row 0 is the header */
	size_t *lines;    /* file line where each data row starts */
	size_t rows, cols;
	size_t nfields, capfields, caplines;
};

static int push_field(struct table *self, char *field)
{
	if (self->nfields == self->capfields) {
		size_t cap = self->capfields ? self->capfields * 2 : 64;
		char **nf = realloc(self->fields, cap * sizeof *nf);

		if (!nf)
			return -ENOMEM;
		self->fields = nf;
		self->capfields = cap;
	}
	self->fields[self->nfields++] = field;
	return 0;
}

static int push_line(struct table *self, size_t line)
{
	if (self->rows == self->caplines) {
		size_t cap = self->caplines ? self->caplines * 2 : 64;
		size_t *nl = realloc(self->lines, cap * sizeof *nl);

		if (!nl)
			return -ENOMEM;
		self->lines = nl;
		self->caplines = cap;
	}
	self->lines[self->rows] = line;
	return 0;
}

/* Parse self->buf (len bytes, NUL at buf[len]) per RFC 4180. Returns 0 or -EINVAL / -ENOMEM
 * with err filled. */
static int parse(struct table *self, size_t len, const char *name, char *err, size_t errlen)
{
	char *b = self->buf;
	size_t i = 0, w = 0, line = 1;

	if (memchr(b, '\0', len)) {
		snprintf(err, errlen, "%s: contains a NUL byte", name);
		return -EINVAL;
	}
	if (len == 0 || b[0] == '\n' || b[0] == '\r') {
		snprintf(err, errlen, "%s:1: missing header", name);
		return -EINVAL;
	}
	/* One record per iteration; record 0 is the header. */
	for (size_t rec = 0; i < len; rec++) {
		size_t start_line = line, first = self->nfields;
		bool end = false;

		if (b[i] == '\n' || (b[i] == '\r' && (i + 1 == len || b[i + 1] == '\n'))) {
			/* A blank line: tolerated only as the very end of the text. */
			size_t j = i + (b[i] == '\r');

			if (j + 1 >= len)
				break;
			snprintf(err, errlen, "%s:%zu: empty line", name, line);
			return -EINVAL;
		}
		while (!end) {
			char *field = b + w;

			if (i < len && b[i] == '"') {
				i++;
				for (;;) {
					if (i >= len) {
						snprintf(err, errlen, "%s:%zu: unterminated quoted field",
							 name, start_line);
						return -EINVAL;
					}
					if (b[i] == '"') {
						if (i + 1 < len && b[i + 1] == '"') {
							b[w++] = '"';
							i += 2;
							continue;
						}
						i++;
						break;
					}
					line += b[i] == '\n';
					b[w++] = b[i++];
				}
				if (i < len && b[i] == '\r' && (i + 1 == len || b[i + 1] == '\n'))
					i++;
				if (i < len && b[i] != ',' && b[i] != '\n') {
					snprintf(err, errlen, "%s:%zu: text after a closing quote", name,
						 line);
					return -EINVAL;
				}
			} else {
				while (i < len && b[i] != ',' && b[i] != '\n') {
					if (b[i] == '"') {
						snprintf(err, errlen,
							 "%s:%zu: quote inside an unquoted field", name, line);
						return -EINVAL;
					}
					b[w++] = b[i++];
				}
				/* a CR before the record's end is the line end's, not the field's */
				if ((i >= len || b[i] == '\n') && w > (size_t)(field - b) &&
				    b[w - 1] == '\r')
					w--;
			}
			/* b[i] is ',', '\n' or the end: the NUL goes at w <= i. */
			end = i >= len || b[i] == '\n';
			if (i < len && b[i] == '\n')
				line++;
			i++;
			b[w++] = '\0';
			if (push_field(self, field) < 0) {
				snprintf(err, errlen, "%s: out of memory", name);
				return -ENOMEM;
			}
		}
		size_t nf = self->nfields - first;

		if (rec == 0) {
			self->cols = nf;
			continue;
		}
		if (nf != self->cols) {
			snprintf(err, errlen, "%s:%zu: %zu fields, header has %zu", name, start_line, nf,
				 self->cols);
			return -EINVAL;
		}
		if (push_line(self, start_line) < 0) {
			snprintf(err, errlen, "%s: out of memory", name);
			return -ENOMEM;
		}
		self->rows++;
	}
	return 0;
}

/* Take ownership of buf (len bytes + a NUL) and parse it. */
static struct table *parse_owned(char *buf, size_t len, const char *name, char *err, size_t errlen)
{
	struct table *self = calloc(1, sizeof *self);

	if (!self) {
		free(buf);
		snprintf(err, errlen, "%s: out of memory", name);
		return NULL;
	}
	self->buf = buf;
	if (parse(self, len, name, err, errlen) < 0)
		table_destroy(&self);
	return self;
}

struct table *table_parse(const char *buf, size_t len, const char *name, char *err, size_t errlen)
{
	char *copy;

	if (len > TABLE_MAX_BYTES) {
		snprintf(err, errlen, "%s: larger than %zu bytes", name, TABLE_MAX_BYTES);
		return NULL;
	}
	copy = malloc(len + 1);
	if (!copy) {
		snprintf(err, errlen, "%s: out of memory", name);
		return NULL;
	}
	memcpy(copy, buf, len);
	copy[len] = '\0';
	return parse_owned(copy, len, name, err, errlen);
}

struct table *table_load(const char *path, bool *missing, char *err, size_t errlen)
{
	size_t len = 0;
	char *buf = NULL;
	int rc;

	if (missing)
		*missing = false;
	/* a FIFO, a device or a directory is refused, not waited on or read forever */
	rc = rfile_read(path, TABLE_MAX_BYTES, &buf, &len, err, errlen);
	if (rc < 0) {
		if (missing && rc == -ENOENT)
			*missing = true;
		return NULL;
	}
	return parse_owned(buf, len, path, err, errlen); /* buf's ownership moves to the table */
}

void table_destroy(struct table **self)
{
	if (!self || !*self)
		return;
	free((*self)->buf);
	free((*self)->fields);
	free((*self)->lines);
	free(*self);
	*self = NULL;
}

size_t table_rows(const struct table *self)
{
	return self->rows;
}

size_t table_cols(const struct table *self)
{
	return self->cols;
}

const char *table_colname(const struct table *self, size_t c)
{
	return self->fields[c];
}

int table_col(const struct table *self, const char *name)
{
	for (size_t c = 0; c < self->cols; c++)
		if (strcmp(self->fields[c], name) == 0)
			return (int)c;
	return -1;
}

const char *table_get(const struct table *self, size_t r, size_t c)
{
	return self->fields[(r + 1) * self->cols + c];
}

size_t table_line(const struct table *self, size_t r)
{
	return self->lines[r];
}

int table_double(const struct table *self, size_t r, size_t c, double *out)
{
	const char *s = table_get(self, r, c);
	char *end;
	double v;

	if (*s == '\0')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (*end != '\0' || end == s)
		return -EINVAL;
	if (!isfinite(v))
		return -ERANGE;
	*out = v;
	return 0;
}

double table_double_or(const struct table *self, size_t r, size_t c, double def)
{
	double v;

	return table_double(self, r, c, &v) == 0 ? v : def;
}

const char *table_header(const struct table *self, char *buf, size_t buflen)
{
	size_t used = 0;

	if (buflen == 0)
		return buf;
	buf[0] = '\0';
	for (size_t c = 0; c < self->cols; c++) {
		int n = snprintf(buf + used, buflen - used, "%s%s", c ? "," : "", self->fields[c]);
		if (n < 0 || (size_t)n >= buflen - used)
			break;
		used += (size_t)n;
	}
	return buf;
}
