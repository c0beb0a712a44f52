/* Unit tests for lib/rtdir: the runtime directory ends up a real 0700 directory of ours, even
 * when pre-created 0777; a symlink or a directory owned by another uid is refused. The
 * foreign-owner case needs root (chown): it skips otherwise, and fails under
 * STALENET_TESTS_MUST_RUN=1. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/rtdir.h"
#include "tests/support/files.h"

static char base[64];

static void setup(void)
{
	support_tmpdir(base, sizeof base, "rtdir");
}

static void teardown(void)
{
	if (support_rm_rf(base) < 0)
		cr_log_warn("could not remove %s", base);
}

TestSuite(rtdir, .init = setup, .fini = teardown);

Test(rtdir, creates_0700)
{
	char p[128];
	struct stat st;

	snprintf(p, sizeof p, "%s/run", base);
	cr_assert_eq(rtdir_ensure_dir(p), 0);
	cr_assert_eq(lstat(p, &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0700);
}

Test(rtdir, precreated_0777_is_tightened)
{
	char p[128];
	struct stat st;

	snprintf(p, sizeof p, "%s/run", base);
	cr_assert_eq(mkdir(p, 0777), 0);
	cr_assert_eq(chmod(p, 01777), 0);
	cr_assert_eq(rtdir_ensure_dir(p), 0);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0700, "mode %o", st.st_mode & 07777);
}

Test(rtdir, symlink_refused)
{
	char p[128], target[128];
	struct stat st;

	snprintf(target, sizeof target, "%s/target", base);
	cr_assert_eq(mkdir(target, 0777), 0);
	cr_assert_eq(chmod(target, 0777), 0);
	snprintf(p, sizeof p, "%s/run", base);
	cr_assert_eq(symlink(target, p), 0);
	cr_assert_eq(rtdir_ensure_dir(p), -ENOTDIR);
	cr_assert_eq(stat(target, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0777, "the symlink's target was not touched");
}

Test(rtdir, foreign_owner_refused)
{
	char p[128];
	struct stat st;

	if (geteuid() != 0) {
		if (getenv("STALENET_TESTS_MUST_RUN") && !strcmp(getenv("STALENET_TESTS_MUST_RUN"), "1"))
			cr_assert_fail("needs root (STALENET_TESTS_MUST_RUN=1)");
		cr_skip_test("needs root to chown");
	}
	snprintf(p, sizeof p, "%s/run", base);
	cr_assert_eq(mkdir(p, 0777), 0);
	cr_assert_eq(chown(p, 65534, 65534), 0);
	cr_assert_eq(rtdir_ensure_dir(p), -EPERM);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_uid, 65534u);
}

Test(rtdir, file_in_the_way_refused)
{
	char p[128];
	FILE *f;

	snprintf(p, sizeof p, "%s/run", base);
	f = fopen(p, "w");
	cr_assert_not_null(f);
	fclose(f);
	cr_assert_eq(rtdir_ensure_dir(p), -ENOTDIR);
}
