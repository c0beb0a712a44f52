/* collectors/csv: see csv.h. */
#include "collectors/csv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fdio.h"
#include "lib/log.h"
#include "lib/safefile.h"

struct csv_writer {
	int fd;
	size_t rows;
	int broken;     /* 0, or the -errno every later row returns (a row failed to be written) */
	char *path;
};

/* A row was cut short (the file system had room for `done` bytes of it, then ENOSPC or EFBIG):
 * cut the file back to where the row began so it still ends with a whole row. On an O_APPEND
 * fd the offset after a write is the end of what that write appended, so the row's start is
 * the current offset minus done. Returns 0 or -errno when the file cannot be cut back. */
static int unwrite(int fd, size_t done)
{
	off_t end = lseek(fd, 0, SEEK_CUR);

	if (end < 0)
		return -errno;
	if ((off_t)done > end)
		return -EIO;
	while (ftruncate(fd, end - (off_t)done) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

struct csv_writer *csv_writer_open(const char *path, const char *header)
{
	struct csv_writer *self = NULL;
	struct stat st;
	int fd = -1;

	/* Traces live in run directories a user may own: never write through a planted link. */
	fd = safefile_open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0) {
		log_error("open %s: %s", path, strerror(-fd));
		goto fail;
	}
	/* Several processes may open one file at once (every prober appends to linkcheck.csv,
	 * every worker to partition.csv): without the lock two of them can both see it empty and
	 * both write the header. The lock is held only until the header is written. */
	while (flock(fd, LOCK_EX) < 0 && errno == EINTR)
		;
	if (fstat(fd, &st) < 0) {
		log_error("stat %s: %s", path, strerror(errno));
		goto fail;
	}
	if (st.st_size == 0 && header) {
		size_t n = strlen(header);
		char *line = malloc(n + 2);
		int rc;

		if (!line)
			goto fail;
		size_t done;
		int urc;

		memcpy(line, header, n);
		line[n] = '\n';
		rc = fdio_write_all(fd, line, n + 1, &done);
		free(line);
		if (rc < 0 && done > 0 && (urc = unwrite(fd, done)) < 0)
			log_error("truncate %s back to empty: %s", path, strerror(-urc));
		if (rc < 0) {
			log_error("write %s: %s", path, strerror(-rc));
			goto fail;
		}
	}
	flock(fd, LOCK_UN);
	self = calloc(1, sizeof *self);
	if (!self || !(self->path = strdup(path))) {
		free(self);
		self = NULL;
		goto fail;
	}
	self->fd = fd; /* ownership of fd moves into the writer */
	return self;
fail:
	if (fd >= 0)
		close(fd);
	return NULL;
}

int csv_writer_row(struct csv_writer *self, const char *fmt, ...)
{
	char stackbuf[1024], *buf = stackbuf;
	va_list ap;
	size_t done = 0;
	int n, rc;

	if (self->broken)
		return self->broken;
	va_start(ap, fmt);
	n = vsnprintf(stackbuf, sizeof stackbuf - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= sizeof stackbuf - 1) {
		buf = malloc((size_t)n + 2);
		if (!buf)
			return -ENOMEM;
		va_start(ap, fmt);
		vsnprintf(buf, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	buf[n] = '\n';
	rc = fdio_write_all(self->fd, buf, (size_t)n + 1, &done);
	if (buf != stackbuf)
		free(buf);
	if (rc < 0) {
		int urc = done ? unwrite(self->fd, done) : 0;

		/* A short write means the disk (or the file size limit) is full: said as ENOSPC. */
		if (done)
			rc = -ENOSPC;
		log_error("write %s: %s%s%s", self->path, strerror(-rc), urc < 0 ? "; cutting the partial row: " : "",
			  urc < 0 ? strerror(-urc) : "");
		/* Later rows fail too: the trace never goes on after a lost or partial row. */
		self->broken = rc;
		return rc;
	}
	self->rows++;
	return 0;
}

bool csv_needs_quote(const char *s)
{
	return s && s[strcspn(s, ",\"\r\n")] != '\0';
}

size_t csv_quote(const char *s, char *buf, size_t buflen)
{
	size_t n = 0;
	bool quote = csv_needs_quote(s);

	/* n counts the whole field; bytes go to buf only while they fit before the NUL. */
#define PUT(ch)                                  \
	do {                                     \
		if (n + 1 < buflen)              \
			buf[n] = (ch);           \
		n++;                             \
	} while (0)
	if (quote)
		PUT('"');
	for (; s && *s; s++) {
		if (*s == '"')
			PUT('"');
		PUT(*s);
	}
	if (quote)
		PUT('"');
#undef PUT
	if (buflen > 0)
		buf[n < buflen ? n : buflen - 1] = '\0';
	return n;
}

size_t csv_writer_rows(const struct csv_writer *self)
{
	return self->rows;
}

const char *csv_writer_path(const struct csv_writer *self)
{
	return self->path;
}

void csv_writer_close(struct csv_writer **self)
{
	if (!self || !*self)
		return;
	close((*self)->fd);
	free((*self)->path);
	free(*self);
	*self = NULL;
}

void csv_buf_put(struct csv_buf *b, const char *s)
{
	size_t n = strlen(s);

	if (b->rc < 0)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *np;

		while (cap < b->len + n + 1)
			cap *= 2;
		if (!(np = realloc(b->p, cap))) {
			b->rc = -ENOMEM;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n + 1);
	b->len += n;
}

void csv_buf_field(struct csv_buf *b, const char *s)
{
	char stackbuf[512], *q = stackbuf;
	size_t n = csv_quote(s, stackbuf, sizeof stackbuf);

	if (n >= sizeof stackbuf) {
		q = malloc(n + 1);
		if (!q) {
			b->rc = -ENOMEM;
			return;
		}
		csv_quote(s, q, n + 1);
	}
	csv_buf_put(b, q);
	if (q != stackbuf)
		free(q);
}
