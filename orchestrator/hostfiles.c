/* orchestrator/hostfiles: see hostfiles.h. An allow-list rather than a deny-list: a name the
 * nodes do not write is refused even when nothing of ours is called so today, so a file the
 * orchestrator adds later is protected without anyone remembering to list it here. */
#include "orchestrator/hostfiles.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
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

/* SUFFIX of nodes/NAME.SUFFIX sent whole: 1..24 of [a-z0-9] in words joined by single '.' or
 * '-' (so no "..", no leading or trailing separator), and not one of the text files. */
static bool whole_suffix(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 24 || !strcmp(s, "csv") || !strcmp(s, "conf"))
		return false;
	for (size_t i = 0; i < n; i++) {
		bool word = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9');
		bool sep = s[i] == '.' || s[i] == '-';
		if (!word && !(sep && i > 0 && i + 1 < n && s[i - 1] != '.' && s[i - 1] != '-'))
			return false;
	}
	return true;
}

bool hostfiles_whole_allowed(const char *rel, const char *const *names, size_t n, bool registry)
{
	static const char *const top[] = { "fleet.sqlite", "fleet.sqlite-wal", "fleet.sqlite-shm" };
	if (!rel || strlen(rel) > HOSTFILES_REL_MAX)
		return false;
	for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
		if (!strcmp(rel, top[i]))
			return registry;
	if (strncmp(rel, "nodes/", 6))
		return false;
	const char *name = rel + 6, *dot = strchr(name, '.');
	if (!dot || !whole_suffix(dot + 1))
		return false;
	for (size_t i = 0; i < n; i++)
		if (names[i] && strlen(names[i]) == (size_t)(dot - name) && !strncmp(name, names[i], (size_t)(dot - name)))
			return true;
	return false;
}

/* REL's subdirectory (nodes/, logs/; not followed if a symlink) or dirfd itself duplicated;
 * *last gets REL's last component. Returns the descriptor or -errno. */
static int open_parent(int dirfd, const char *rel, const char **last)
{
	const char *slash = strchr(rel, '/');
	char sub[16];
	int fd;
	if (!slash) {
		*last = rel;
		fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
		return fd < 0 ? -errno : fd;
	}
	if ((size_t)(slash - rel) >= sizeof sub || strchr(slash + 1, '/') || !slash[1])
		return -EINVAL;
	memcpy(sub, rel, (size_t)(slash - rel));
	sub[slash - rel] = 0;
	do
		fd = openat(dirfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return errno == ELOOP ? -ENOTDIR : -errno;
	*last = slash + 1;
	return fd;
}

int hostfiles_replace_begin(int dirfd, const char *rel, struct hostfiles_replace *r)
{
	const char *last = NULL;
	uint64_t rnd;
	int rc;

	*r = (struct hostfiles_replace){ .parentfd = -1, .fd = -1 };
	if (strlen(rel) > HOSTFILES_REL_MAX)
		return -ENAMETOOLONG;
	if ((rc = open_parent(dirfd, rel, &last)) < 0)
		return rc;
	r->parentfd = rc;
	snprintf(r->name, sizeof r->name, "%s", last);
	for (int tries = 0; tries < 8; tries++) {
		if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
			rc = -EIO;
			break;
		}
		snprintf(r->tmp, sizeof r->tmp, ".%s.%016llx", r->name, (unsigned long long)rnd);
		do
			r->fd = openat(r->parentfd, r->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);
		while (r->fd < 0 && errno == EINTR);
		if (r->fd >= 0)
			return 0;
		rc = -errno;
		if (rc != -EEXIST)
			break;
	}
	close(r->parentfd);
	r->parentfd = -1;
	return rc;
}

int hostfiles_replace_end(struct hostfiles_replace *r, bool commit)
{
	int rc = 0;
	if (r->fd < 0 && r->parentfd < 0)
		return 0;
	if (r->fd >= 0 && close(r->fd) < 0 && commit)
		rc = -errno;
	r->fd = -1;
	if (commit && !rc && renameat(r->parentfd, r->tmp, r->parentfd, r->name) < 0)
		rc = -errno;
	if (!commit || rc)
		unlinkat(r->parentfd, r->tmp, 0);
	close(r->parentfd);
	r->parentfd = -1;
	return rc;
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
