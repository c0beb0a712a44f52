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

#include "lib/log.h"
#include "lib/safefile.h"

struct csv_writer {
	int fd;
	size_t rows;
	char *path;
};

static int write_all(int fd, const char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, buf, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += w;
		n -= (size_t)w;
	}
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
		memcpy(line, header, n);
		line[n] = '\n';
		rc = write_all(fd, line, n + 1);
		free(line);
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
	int n, rc;

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
	rc = write_all(self->fd, buf, (size_t)n + 1);
	if (buf != stackbuf)
		free(buf);
	if (rc < 0) {
		log_error("write %s: %s", self->path, strerror(-rc));
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
