/* lib/netns: named network namespaces compatible with iproute2's /run/netns convention.
 *
 * Naming is a bind mount, so the namespace outlives the thread that created it; deleting the
 * name only drops that reference. netns_name_current() creates the mount point with O_EXCL
 * before mounting, so two runs racing for one name cannot both win, and it unlinks the
 * mount point again when the mount fails (the rollback `ip netns add` does). */
#include "lib/netns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/log.h"

/* /run/netns/NAME into buf. Returns 0, or -ENAMETOOLONG / -EINVAL (name empty, has '/'). */
static int ns_path(const char *name, char *buf, size_t len)
{
	int n;

	if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	n = snprintf(buf, len, "%s/%s", NETNS_RUN_DIR, name);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* Open /run/netns/NAME (O_RDONLY|O_CLOEXEC). Returns the fd (caller closes) or -errno. */
static int ns_open(const char *name)
{
	char path[512];
	int fd, rc;

	rc = ns_path(name, path, sizeof path);
	if (rc < 0)
		return rc;
	do
		fd = open(path, O_RDONLY | O_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : fd;
}

bool netns_exists(const char *name)
{
	char path[512];

	return ns_path(name, path, sizeof path) == 0 && access(path, F_OK) == 0;
}

int netns_prepare_dir(void)
{
	if (mkdir(NETNS_RUN_DIR, 0755) < 0 && errno != EEXIST)
		return -errno;
	/* Already shared (or made so by another run): done. MS_SHARED on a non-mount-point
	 * fails with EINVAL, in which case bind it onto itself first. */
	if (mount("", NETNS_RUN_DIR, "none", MS_SHARED | MS_REC, NULL) == 0)
		return 0;
	if (errno != EINVAL) {
		log_error("make %s shared: %s", NETNS_RUN_DIR, strerror(errno));
		return -errno;
	}
	if (mount(NETNS_RUN_DIR, NETNS_RUN_DIR, "none", MS_BIND | MS_REC, NULL) < 0 ||
	    mount("", NETNS_RUN_DIR, "none", MS_SHARED | MS_REC, NULL) < 0) {
		log_error("bind %s onto itself: %s", NETNS_RUN_DIR, strerror(errno));
		return -errno;
	}
	return 0;
}

int netns_name_current(const char *name)
{
	char path[512];
	int fd, rc;

	rc = ns_path(name, path, sizeof path);
	if (rc < 0)
		return rc;
	do
		fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return -errno;
	close(fd);
	if (mount("/proc/thread-self/ns/net", path, "none", MS_BIND, NULL) < 0) {
		rc = -errno;
		log_error("bind netns onto %s: %s", path, strerror(errno));
		unlink(path);
		return rc;
	}
	return 0;
}

int netns_add(const char *name)
{
	int saved = -1, rc;

	rc = netns_prepare_dir();
	if (rc < 0)
		return rc;
	do
		saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	while (saved < 0 && errno == EINTR);
	if (saved < 0)
		return -errno;
	if (unshare(CLONE_NEWNET) < 0) {
		rc = -errno;
		close(saved);
		return rc;
	}
	rc = netns_name_current(name);
	if (netns_restore(&saved) < 0 && rc == 0)
		rc = -EIO;
	return rc;
}

int netns_delete(const char *name)
{
	char path[512];
	int rc;

	rc = ns_path(name, path, sizeof path);
	if (rc < 0)
		return rc;
	/* EINVAL: not a mount point (half-created); ENOENT: already gone. */
	if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return -errno;
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

static int enter_fd(int nsfd, int *saved)
{
	int rc;

	*saved = -1;
	do
		*saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	while (*saved < 0 && errno == EINTR);
	if (*saved < 0)
		return -errno;
	if (setns(nsfd, CLONE_NEWNET) < 0) {
		rc = -errno;
		close(*saved);
		*saved = -1;
		return rc;
	}
	return 0;
}

int netns_enter(const char *name, int *saved)
{
	int fd, rc;

	*saved = -1;
	fd = ns_open(name);
	if (fd < 0)
		return fd;
	rc = enter_fd(fd, saved);
	close(fd);
	return rc;
}

int netns_restore(int *saved)
{
	int rc = 0;

	if (*saved < 0)
		return 0;
	if (setns(*saved, CLONE_NEWNET) < 0) {
		rc = -errno;
		log_error("setns back: %s", strerror(errno));
	}
	close(*saved);
	*saved = -1;
	return rc;
}

int netns_join(const char *name)
{
	int fd = ns_open(name), rc = 0, e;

	if (fd < 0)
		return fd;
	if (setns(fd, CLONE_NEWNET) < 0)
		rc = -errno;
	e = errno;
	close(fd);
	errno = e;
	return rc;
}

int netns_call(const char *name, int (*fn)(void *arg), void *arg)
{
	int saved = -1, rc;

	if (!name || !name[0])
		return fn(arg);
	rc = netns_enter(name, &saved);
	if (rc < 0) {
		log_error("enter netns %s: %s", name, strerror(-rc));
		return rc;
	}
	rc = fn(arg);
	if (netns_restore(&saved) < 0)
		rc = -EIO;
	return rc;
}

int netns_exec(const char *name, const char *const *argv, bool quiet)
{
	int nsfd = -1, status, rc;
	pid_t pid;

	/* Open the namespace here, not in the child: a missing one is -ENOENT, not an exit code. */
	if (name && name[0]) {
		nsfd = ns_open(name);
		if (nsfd < 0)
			return nsfd;
	}
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		goto out;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (devnull >= 0) {
			dup2(devnull, 0);
			if (quiet) {
				dup2(devnull, 1);
				dup2(devnull, 2);
			}
		}
		if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) < 0)
			_exit(126);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			rc = -errno;
			goto out;
		}
	}
	rc = WIFEXITED(status) ? WEXITSTATUS(status) : -EINTR;
out:
	if (nsfd >= 0)
		close(nsfd);
	return rc;
}
