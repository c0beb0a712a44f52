/* lib/rfile: see rfile.h.
 *
 * The stat before the open and the fstat after it are compared by device and inode: between
 * the two someone may replace the file, and only the descriptor's own fstat tells what was
 * opened. O_NONBLOCK is cleared once the file is known to be regular (it means nothing for a
 * regular file, but a caller must not inherit it). The size from fstat is only a hint for the
 * first allocation: a file may grow while it is read, so the cap is enforced on the bytes read. */
#include "lib/rfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	return "of an unknown type";
}

static int not_regular(const char *path, mode_t m, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s: not a regular file (%s)", path, kind(m));
	return S_ISDIR(m) ? -EISDIR : -EINVAL;
}

int rfile_open(const char *path, char *err, size_t errlen)
{
	struct stat before, st;
	int fd = -1, flags, rc;

	if (stat(path, &before) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	if (!S_ISREG(before.st_mode))
		return not_regular(path, before.st_mode, err, errlen);
	do
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = not_regular(path, st.st_mode, err, errlen);
		goto fail;
	}
	if (st.st_dev != before.st_dev || st.st_ino != before.st_ino) {
		rc = -EAGAIN;
		snprintf(err, errlen, "%s: replaced while being opened", path);
		goto fail;
	}
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return rc;
}

int rfile_read(const char *path, size_t max_bytes, char **buf_out, size_t *len_out, char *err,
	       size_t errlen)
{
	struct stat st;
	char *buf = NULL, *nbuf;
	size_t cap, len = 0;
	int fd, rc = 0;

	*buf_out = NULL;
	*len_out = 0;
	fd = rfile_open(path, err, errlen);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if ((unsigned long long)st.st_size > max_bytes) {
		rc = -EFBIG;
		goto out;
	}
	/* one byte beyond the cap tells a file at the cap from a larger one */
	cap = (size_t)st.st_size + 1;
	if (cap < 4096)
		cap = 4096;
	for (;;) {
		ssize_t r;

		if (len == cap || !buf) {
			if (buf)
				cap = cap > max_bytes / 2 ? max_bytes + 1 : cap * 2;
			nbuf = realloc(buf, cap + 1);
			if (!nbuf) {
				rc = -ENOMEM;
				snprintf(err, errlen, "%s: out of memory", path);
				goto out;
			}
			buf = nbuf;
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -EIO;
			snprintf(err, errlen, "%s: read: %s", path, strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len > max_bytes) {
			rc = -EFBIG;
			goto out;
		}
	}
	buf[len] = '\0';
	*buf_out = buf;
	*len_out = len;
	buf = NULL;
out:
	if (rc == -EFBIG)
		snprintf(err, errlen, "%s: larger than %zu bytes", path, max_bytes);
	free(buf);
	close(fd);
	return rc;
}
