/* orchestrator/hostfiles: see hostfiles.h. An allow-list rather than a deny-list: a name the
 * nodes do not write is refused even when nothing of ours is called so today, so a file the
 * orchestrator adds later is protected without anyone remembering to list it here. */
#include "orchestrator/hostfiles.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The top-level files nodes write (node/engine_common, node/trainer, node/probe,
 * node/engine_fleet). */
static const char *const TOP[] = { "eval.csv", "partition.csv", "linkcheck.csv", "fleet.csv", "fleet_repair.csv",
				   "ensemble.csv" };

/* s is NAME followed by exactly suffix, NAME one of names[0..n). */
static bool named(const char *s, const char *suffix, const char *const *names, size_t n)
{
	size_t sl = strlen(s), xl = strlen(suffix);
	if (sl <= xl || strcmp(s + sl - xl, suffix))
		return false;
	for (size_t i = 0; i < n; i++)
		if (names[i] && strlen(names[i]) == sl - xl && !strncmp(s, names[i], sl - xl))
			return true;
	return false;
}

bool hostfiles_allowed(const char *rel, const char *const *names, size_t n)
{
	if (!rel || strlen(rel) > HOSTFILES_REL_MAX)
		return false;
	for (size_t i = 0; i < sizeof TOP / sizeof TOP[0]; i++)
		if (!strcmp(rel, TOP[i]))
			return true;
	if (!strncmp(rel, "nodes/", 6))
		return named(rel + 6, ".csv", names, n) || named(rel + 6, ".conf", names, n);
	if (!strncmp(rel, "logs/", 5))
		return !strcmp(rel + 5, "linkd.log") || named(rel + 5, ".log", names, n);
	return false;
}

int hostfiles_open(int dirfd, const char *rel, int flags, mode_t mode)
{
	const char *slash = strchr(rel, '/');
	char sub[16];
	int subfd = -1, fd = -1, rc;
	struct stat st;

	if (slash) {
		/* one level only (nodes/, logs/): the subdirectory is not followed if a symlink */
		if ((size_t)(slash - rel) >= sizeof sub || strchr(slash + 1, '/') || !slash[1])
			return -EINVAL;
		memcpy(sub, rel, (size_t)(slash - rel));
		sub[slash - rel] = 0;
		do
			subfd = openat(dirfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		while (subfd < 0 && errno == EINTR);
		if (subfd < 0)
			return errno == ELOOP ? -ENOTDIR : -errno;
		rel = slash + 1;
	}
	/* O_NONBLOCK: opening a planted fifo must not hang the run; cleared below */
	do
		fd = openat(slash ? subfd : dirfd, rel, flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, mode);
	while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	/* a hard link to a file elsewhere is as dangerous as a symlink */
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1) {
		rc = -EPERM;
		goto out;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		rc = -errno;
		goto out;
	}
	rc = fd;
	fd = -1;
out:
	if (fd >= 0)
		close(fd);
	if (subfd >= 0)
		close(subfd);
	return rc;
}
