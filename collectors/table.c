/* collectors/table: see table.h.
 *
 * The file is read into one buffer; commas and newlines are replaced by NULs in place and each
 * row keeps an array of pointers into the buffer, so a table is three allocations whatever its
 * size. */
#include "collectors/table.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"

struct table {
	char *buf;        /* file contents, fields NUL-terminated in place */
	char **fields;    /* (rows + 1) * cols pointers; row 0 is the header */
	size_t *lines;    /* file line of each data row */
	size_t rows, cols;
};

static char *slurp(const char *path, size_t *len, int *err_out)
{
	FILE *f = NULL;
	char *buf = NULL, *nbuf;
	size_t cap = 0, n = 0;

	f = fopen(path, "re");
	if (!f) {
		*err_out = -errno;
		return NULL;
	}
	for (;;) {
		if (cap - n < 4096) {
			cap = cap ? cap * 2 : 16384;
			nbuf = realloc(buf, cap + 1);
			if (!nbuf) {
				*err_out = -ENOMEM;
				free(buf);
				buf = NULL;
				goto out;
			}
			buf = nbuf;
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0) {
			if (ferror(f)) {
				*err_out = -EIO;
				free(buf);
				buf = NULL;
			}
			break;
		}
	}
	if (buf)
		buf[n] = '\0';
	*len = n;
out:
	fclose(f);
	return buf;
}

/* Split one line (NUL-terminated, without '\n') at commas; store up to max pointers. Returns the
 * number of fields. */
static size_t split(char *line, char **out, size_t max)
{
	size_t n = 0;
	char *p = line;
	size_t len = strlen(line);

	if (len > 0 && line[len - 1] == '\r')
		line[len - 1] = '\0';
	for (;;) {
		char *c = strchr(p, ',');

		if (n < max)
			out[n] = p;
		n++;
		if (!c)
			break;
		*c = '\0';
		p = c + 1;
	}
	return n;
}

struct table *table_load(const char *path, bool *missing, char *err, size_t errlen)
{
	struct table *self = NULL;
	size_t len = 0, nlines = 0, lineno = 0;
	char *p, *next;
	int rc = 0;

	if (missing)
		*missing = false;
	self = calloc(1, sizeof *self);
	if (!self) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	self->buf = slurp(path, &len, &rc);
	if (!self->buf) {
		if (missing && rc == -ENOENT)
			*missing = true;
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		goto fail;
	}
	if (memchr(self->buf, '\0', len)) {
		snprintf(err, errlen, "%s: contains a NUL byte", path);
		goto fail;
	}
	for (size_t i = 0; i < len; i++)
		nlines += self->buf[i] == '\n';
	nlines++;
	if (len == 0 || self->buf[0] == '\n' || self->buf[0] == '\r') {
		snprintf(err, errlen, "%s:1: missing header", path);
		goto fail;
	}
	/* Header: count columns first so every row can be checked against it. */
	next = strchr(self->buf, '\n');
	if (next)
		*next = '\0';
	self->cols = 1;
	for (p = self->buf; *p; p++)
		self->cols += *p == ',';
	self->fields = calloc(nlines * self->cols, sizeof *self->fields);
	self->lines = calloc(nlines, sizeof *self->lines);
	if (!self->fields || !self->lines) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	split(self->buf, self->fields, self->cols);
	lineno = 1;
	while (next) {
		char *line = next + 1;

		lineno++;
		next = strchr(line, '\n');
		if (next)
			*next = '\0';
		if (*line == '\0' || (line[0] == '\r' && line[1] == '\0')) {
			if (!next)
				break; /* the newline that ends the last row */
			snprintf(err, errlen, "%s:%zu: empty line", path, lineno);
			goto fail;
		}
		size_t nf = split(line, self->fields + (self->rows + 1) * self->cols, self->cols);
		if (nf != self->cols) {
			snprintf(err, errlen, "%s:%zu: %zu fields, header has %zu", path, lineno, nf,
				 self->cols);
			goto fail;
		}
		self->lines[self->rows++] = lineno;
	}
	return self;
fail:
	table_destroy(&self);
	return NULL;
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
