/* lib/rtdir: see rtdir.h. The checks run on an fd opened with O_NOFOLLOW | O_DIRECTORY, so what
 * is checked and what is chmod-ed is the same inode, whatever happens to the name meanwhile. */
#include "lib/rtdir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"

int rtdir_ensure_dir(const char *path)
{
	struct stat st;
	int fd = -1, rc = 0;

	if (mkdir(path, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		log_error("runtime directory %s: mkdir: %s", path, strerror(errno));
		goto out;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		/* ELOOP: a symlink stands where the directory should be. */
		rc = errno == ELOOP || errno == ENOTDIR ? -ENOTDIR : -errno;
		log_error("runtime directory %s: %s", path,
			  rc == -ENOTDIR ? "not a directory (a symlink?): refused" : strerror(errno));
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		log_error("runtime directory %s: fstat: %s", path, strerror(errno));
		goto out;
	}
	if (st.st_uid != geteuid()) {
		/* Its owner could swap sockets inside it: do not use it, do not take it over. */
		rc = -EPERM;
		log_error("runtime directory %s is owned by uid %u, not %u: refused (remove it)", path,
			  (unsigned)st.st_uid, (unsigned)geteuid());
		goto out;
	}
	if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0) {
		rc = -errno;
		log_error("runtime directory %s: chmod 0700: %s", path, strerror(errno));
		goto out;
	}
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

const char *rtdir_path(void)
{
	static char path[256];
	const char *xdg;

	if (geteuid() == 0)
		return RTDIR_PATH;
	xdg = getenv("XDG_RUNTIME_DIR");
	/* Short enough that a socket name fits in sun_path; else the /tmp fallback, whose owner
	 * rtdir_ensure_dir checks (a squatter only makes it fail). */
	if (xdg && xdg[0] == '/' && strlen(xdg) < 48)
		snprintf(path, sizeof path, "%s/stalenet", xdg);
	else
		snprintf(path, sizeof path, "/tmp/stalenet-%u", (unsigned)geteuid());
	return path;
}

int rtdir_ensure(void)
{
	return rtdir_ensure_dir(rtdir_path());
}
