/* Shared test file helpers: temporary directories, rm -rf, whole-file read and write,
 * canaries. */
#include "tests/support/files.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectors/table.h"

/* The paths this process made, removed at its exit (newest first). */
static char **tmp_paths;
static size_t tmp_n, tmp_cap;
static pid_t tmp_owner;

static void tmp_remove_all(void)
{
	int saved = errno;

	if (getpid() != tmp_owner)
		return;         /* a forked child exiting: the files are its parent's */
	while (tmp_n > 0) {
		support_rm_rf(tmp_paths[--tmp_n]);
		free(tmp_paths[tmp_n]);
	}
	errno = saved;
}

void support_tmp_track(const char *path)
{
	static bool registered;
	char *copy = strdup(path);

	if (getpid() != tmp_owner) {
		/* the first path of this process; a forked child starts its own list */
		tmp_owner = getpid();
		tmp_n = 0;
		if (!registered && atexit(tmp_remove_all) == 0)
			registered = true;
	}
	if (tmp_n == tmp_cap) {
		size_t cap = tmp_cap ? 2 * tmp_cap : 16;
		char **bigger = realloc(tmp_paths, cap * sizeof *bigger);

		if (!bigger) {
			free(copy);
			return;
		}
		tmp_paths = bigger;
		tmp_cap = cap;
	}
	if (copy)
		tmp_paths[tmp_n++] = copy;
}

char *support_mkdtemp(char *tmpl)
{
	char *dir = mkdtemp(tmpl);

	if (dir)
		support_tmp_track(dir);
	return dir;
}

int support_mkstemp(char *tmpl)
{
	int fd = mkstemp(tmpl);

	if (fd >= 0)
		support_tmp_track(tmpl);
	return fd;
}

char *support_tmpdir(char *buf, size_t len, const char *tag)
{
	int n = snprintf(buf, len, "/tmp/stalenet-%s-XXXXXX", tag);

	cr_assert(n > 0 && (size_t)n < len, "temporary directory name for %s too long", tag);
	cr_assert_not_null(support_mkdtemp(buf), "mkdtemp %s: %s", buf, strerror(errno));
	return buf;
}

static int rm_first_err;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)ftw;
	if ((flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT && !rm_first_err)
		rm_first_err = -errno;
	return 0;
}

void support_mkdirs(const char *path)
{
	char buf[4096];
	size_t n = strlen(path);

	cr_assert_lt(n, sizeof buf, "path too long: %s", path);
	memcpy(buf, path, n + 1);
	for (char *c = buf + 1;; c++) {
		if (*c != '/' && *c)
			continue;
		char end = *c;
		*c = '\0';
		cr_assert(mkdir(buf, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", buf, strerror(errno));
		if (!end)
			break;
		*c = '/';
	}
}

int support_rm_rf(const char *path)
{
	rm_first_err = 0;
	if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0 && errno != ENOENT)
		return -errno;
	return rm_first_err;
}

char *support_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rbe");
	char *buf = NULL, *bigger;
	size_t used = 0, cap = 0, n;
	int err = 0;

	if (!f)
		return NULL;
	do {
		if (cap - used < 4096) {
			cap = cap ? cap * 2 : 8192;
			bigger = realloc(buf, cap);
			if (!bigger) {
				err = ENOMEM;
				goto out;
			}
			buf = bigger;
		}
		n = fread(buf + used, 1, cap - used - 1, f);
		used += n;
	} while (n > 0);
	if (ferror(f))
		err = EIO;
	buf[used] = '\0';
	if (len)
		*len = used;
out:
	fclose(f);
	if (err) {
		free(buf);
		errno = err;
		return NULL;
	}
	return buf;
}

char *support_slurp(const char *path, size_t *len)
{
	char *s = support_read_file(path, len);

	cr_assert_not_null(s, "read %s: %s", path, strerror(errno));
	return s;
}

bool support_same_file(const char *a, const char *b, const char *file)
{
	char pa[600], pb[600];
	size_t la, lb;
	char *x, *y;
	bool same;

	snprintf(pa, sizeof pa, "%s/%s", a, file);
	snprintf(pb, sizeof pb, "%s/%s", b, file);
	x = support_slurp(pa, &la);
	y = support_slurp(pb, &lb);
	same = la == lb && memcmp(x, y, la) == 0;
	free(x);
	free(y);
	return same;
}

struct table *support_load_table(const char *dir, const char *file)
{
	char path[600], err[512];
	bool missing = false;
	struct table *t;

	snprintf(path, sizeof path, "%s/%s", dir, file);
	t = table_load(path, &missing, err, sizeof err);
	cr_assert_not_null(t, "%s", err);
	return t;
}

void support_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	cr_assert_not_null(f, "open %s: %s", path, strerror(errno));
	cr_assert_geq(fputs(text, f), 0, "write %s", path);
	cr_assert_eq(fclose(f), 0, "close %s", path);
}

#define SUPPORT_CANARY_TEXT "precious\n"

void support_canary_plant(const char *path)
{
	support_write_file(path, SUPPORT_CANARY_TEXT);
}

void support_canary_intact(const char *path)
{
	struct stat st;
	char *text;

	cr_assert_eq(lstat(path, &st), 0, "lstat %s: %s", path, strerror(errno));
	cr_assert(S_ISREG(st.st_mode), "%s is no longer a regular file", path);
	text = support_slurp(path, NULL);
	cr_assert_str_eq(text, SUPPORT_CANARY_TEXT, "canary %s changed", path);
	free(text);
}
