/* Unit tests for lib/safefile: a symlink or hard link planted where root writes, and a
 * pre-created temporary name, are never written through; the writes succeed safely or fail. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/safefile.h"
#include "tests/support/files.h"

static char dir[64], canary[128];

static void setup(void)
{
	support_tmpdir(dir, sizeof dir, "safefile");
	snprintf(canary, sizeof canary, "%s/canary", dir);
	support_canary_plant(canary);
}

static void teardown(void)
{
	if (support_rm_rf(dir) < 0)
		cr_log_warn("could not remove %s", dir);
}

static void read_file(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n;

	cr_assert_not_null(f, "%s", path);
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
}

TestSuite(safefile, .init = setup, .fini = teardown);

Test(safefile, open_refuses_symlink_and_hardlink)
{
	char p[160], h[160];

	snprintf(p, sizeof p, "%s/trace.csv", dir);
	cr_assert_eq(symlink(canary, p), 0);
	cr_assert_eq(safefile_open(p, O_WRONLY | O_CREAT | O_APPEND, 0644), -ELOOP);
	cr_assert_eq(safefile_open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644), -ELOOP);
	cr_assert_null(safefile_fopen(p, "w"));
	cr_assert_eq(errno, ELOOP);
	snprintf(h, sizeof h, "%s/hard.csv", dir);
	cr_assert_eq(link(canary, h), 0);
	cr_assert_eq(safefile_open(h, O_WRONLY | O_CREAT | O_TRUNC, 0644), -EPERM);
	support_canary_intact(canary);
}

Test(safefile, open_creates_appends_truncates)
{
	char p[160], buf[64];
	FILE *f;

	snprintf(p, sizeof p, "%s/a.txt", dir);
	f = safefile_fopen(p, "w");
	cr_assert_not_null(f);
	fputs("one\n", f);
	fclose(f);
	f = safefile_fopen(p, "a");
	cr_assert_not_null(f);
	fputs("two\n", f);
	fclose(f);
	read_file(p, buf, sizeof buf);
	cr_assert_str_eq(buf, "one\ntwo\n");
	f = safefile_fopen(p, "w");
	cr_assert_not_null(f);
	fputs("three\n", f);
	fclose(f);
	read_file(p, buf, sizeof buf);
	cr_assert_str_eq(buf, "three\n");
}

Test(safefile, replace_over_symlink_replaces_the_link)
{
	char p[160], buf[64];
	struct stat st;

	snprintf(p, sizeof p, "%s/meta.json", dir);
	cr_assert_eq(symlink(canary, p), 0);
	cr_assert_eq(safefile_replace(p, "{}\n", 3, 0644), 0);
	support_canary_intact(canary);
	cr_assert_eq(lstat(p, &st), 0);
	cr_assert(S_ISREG(st.st_mode), "the symlink itself was replaced");
	cr_assert_eq(st.st_mode & 0777, 0644);
	read_file(p, buf, sizeof buf);
	cr_assert_str_eq(buf, "{}\n");
}

/* The names the old writers used (path.tmp, path.tmp.PID) are planted as symlinks: they are
 * not used at all, and nothing but the target is left behind. */
Test(safefile, predictable_temp_names_are_not_followed)
{
	const char *names[] = { "meta.json.tmp", "x.conf.tmp", "summary.csv.tmp.1" };
	char p[160], t[200], buf[64];
	int n = 0;

	for (size_t i = 0; i < 3; i++) {
		snprintf(t, sizeof t, "%s/%s", dir, names[i]);
		cr_assert_eq(symlink(canary, t), 0);
	}
	snprintf(p, sizeof p, "%s/x.conf", dir);
	cr_assert_eq(safefile_replace(p, "a = 1\n", 6, 0600), 0);
	read_file(p, buf, sizeof buf);
	cr_assert_str_eq(buf, "a = 1\n");
	support_canary_intact(canary);
	/* No temporary file stays behind: canary + 3 planted + x.conf. */
	{
		DIR *d = opendir(dir);
		struct dirent *e;

		cr_assert_not_null(d);
		while ((e = readdir(d)))
			n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
		closedir(d);
	}
	cr_assert_eq(n, 5, "%d entries", n);
}

Test(safefile, replace_refuses_symlinked_directory)
{
	char sub[160], p[200], target[160];

	snprintf(target, sizeof target, "%s/elsewhere", dir);
	cr_assert_eq(mkdir(target, 0755), 0);
	snprintf(sub, sizeof sub, "%s/nodes", dir);
	cr_assert_eq(symlink(target, sub), 0);
	snprintf(p, sizeof p, "%s/n0.conf", sub);
	cr_assert_eq(safefile_replace(p, "x", 1, 0644), -ENOTDIR);
	cr_assert_eq(safefile_mkdir(sub, 0755), -ENOTDIR);
	snprintf(p, sizeof p, "%s/n0.conf", target);
	cr_assert_neq(access(p, F_OK), 0);
	snprintf(sub, sizeof sub, "%s/plots", dir);
	cr_assert_eq(safefile_mkdir(sub, 0755), 0);
	cr_assert_eq(safefile_mkdir(sub, 0755), 0);
}

Test(safefile, abort_leaves_target_untouched)
{
	struct safefile_tmp t;
	char p[160], buf[64];
	FILE *f;

	snprintf(p, sizeof p, "%s/s.csv", dir);
	cr_assert_eq(safefile_replace(p, "old\n", 4, 0644), 0);
	f = safefile_replace_begin(&t, p, 0644);
	cr_assert_not_null(f);
	fputs("new\n", f);
	safefile_replace_abort(&t);
	read_file(p, buf, sizeof buf);
	cr_assert_str_eq(buf, "old\n");
}
