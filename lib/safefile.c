/* lib/safefile: see safefile.h. Temporary names carry 64 random bits from getrandom, so a user
 * cannot pre-create them; O_EXCL | O_NOFOLLOW makes even a lucky guess fail instead of writing
 * through it. */
#include "lib/safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define SAFEFILE_TRIES 16

int safefile_open(const char *path, int flags, mode_t mode)
{
	struct stat st;
	int trunc = flags & O_TRUNC, fd, rc;

	do
		fd = open(path, (flags & ~O_TRUNC) | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto fail;
	}
	/* A hard link to a file elsewhere is as dangerous as a symlink (when the kernel's
	 * protected_hardlinks is off); a fifo or device would block or misbehave. */
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1) {
		rc = -EPERM;
		goto fail;
	}
	if (trunc && ftruncate(fd, 0) < 0) {
		rc = -errno;
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return rc;
}

FILE *safefile_fopen(const char *path, const char *how)
{
	int flags = O_WRONLY | O_CREAT | (how[0] == 'a' ? O_APPEND : O_TRUNC);
	int fd = safefile_open(path, flags, 0644);
	FILE *f;

	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	f = fdopen(fd, how[0] == 'a' ? "a" : "w");
	if (!f) {
		int e = errno;

		close(fd);
		errno = e;
	}
	return f;
}

/* Split path into its directory (opened, not followed if a symlink) and its last name. */
static int open_parent(const char *path, char *base, size_t baselen)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	int fd;

	if (slash) {
		size_t dlen = slash == path ? 1 : (size_t)(slash - path);

		if (dlen >= sizeof dir)
			return -ENAMETOOLONG;
		memcpy(dir, path, dlen);
		dir[dlen] = '\0';
	} else {
		strcpy(dir, ".");
	}
	if ((size_t)snprintf(base, baselen, "%s", slash ? slash + 1 : path) >= baselen || !base[0])
		return base[0] ? -ENAMETOOLONG : -EISDIR;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? -ENOTDIR : -errno;
	return fd;
}

FILE *safefile_replace_begin(struct safefile_tmp *t, const char *path, mode_t mode)
{
	int fd = -1, rc;

	t->f = NULL;
	t->tmp[0] = '\0';
	t->dirfd = open_parent(path, t->base, sizeof t->base);
	if (t->dirfd < 0) {
		rc = t->dirfd;
		goto fail;
	}
	rc = -EEXIST;
	for (int i = 0; i < SAFEFILE_TRIES && fd < 0; i++) {
		unsigned long long r;

		if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
			rc = -errno;
			goto fail;
		}
		snprintf(t->tmp, sizeof t->tmp, ".%.200s.%016llx", t->base, r);
		fd = openat(t->dirfd, t->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd < 0 && errno != EEXIST && errno != EINTR) {
			rc = -errno;
			t->tmp[0] = '\0';
			goto fail;
		}
	}
	if (fd < 0) {
		t->tmp[0] = '\0';
		goto fail;
	}
	t->f = fdopen(fd, "w");
	if (!t->f) {
		rc = -errno;
		close(fd);
		goto fail;
	}
	return t->f;
fail:
	safefile_replace_abort(t);
	errno = -rc;
	return NULL;
}

int safefile_replace_commit(struct safefile_tmp *t)
{
	int rc = 0;

	if (fflush(t->f) != 0 || ferror(t->f))
		rc = -(errno ? errno : EIO);
	if (rc == 0 && fsync(fileno(t->f)) < 0)
		rc = -errno;
	if (fclose(t->f) != 0 && rc == 0)
		rc = -errno;
	t->f = NULL;
	if (rc == 0 && renameat(t->dirfd, t->tmp, t->dirfd, t->base) < 0)
		rc = -errno;
	if (rc == 0)
		t->tmp[0] = '\0';
	safefile_replace_abort(t);
	return rc;
}

void safefile_replace_abort(struct safefile_tmp *t)
{
	if (t->f)
		fclose(t->f);
	t->f = NULL;
	if (t->dirfd >= 0) {
		if (t->tmp[0])
			unlinkat(t->dirfd, t->tmp, 0);
		close(t->dirfd);
	}
	t->dirfd = -1;
	t->tmp[0] = '\0';
}

int safefile_replace(const char *path, const void *data, size_t len, mode_t mode)
{
	struct safefile_tmp t;
	FILE *f = safefile_replace_begin(&t, path, mode);

	if (!f)
		return -errno;
	if (len && fwrite(data, 1, len, f) != len) {
		safefile_replace_abort(&t);
		return -EIO;
	}
	return safefile_replace_commit(&t);
}

int safefile_mkdir(const char *path, mode_t mode)
{
	int fd;

	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return -errno;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? -ENOTDIR : -errno;
	close(fd);
	return 0;
}
