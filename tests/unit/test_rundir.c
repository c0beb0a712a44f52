/* Unit tests for orchestrator/rundir_set_aside: an earlier attempt that did not complete is
 * moved whole under OUT/.incomplete/ (a second one the same second too, under another name),
 * refused when it is OUT itself, and never moved through a symlink planted as .incomplete. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orchestrator/rundir.h"
#include "tests/support/files.h"

static void touch(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

Test(rundir, set_aside_moves_an_earlier_attempt_whole)
{
	char out[128], dir[PATH_MAX], a1[PATH_MAX], a2[PATH_MAX], path[PATH_MAX + 32];
	size_t len;

	support_tmpdir(out, sizeof out, "rundir");
	snprintf(dir, sizeof dir, "%s/bsp+rep=1", out);
	/* none there: nothing to do */
	cr_assert_eq(rundir_set_aside(out, dir, "bsp+rep=1", a1, sizeof a1), 0);
	cr_assert_eq(mkdir(dir, 0755), 0);
	touch(dir, "events.csv", "first\n");
	cr_assert_eq(rundir_set_aside(out, dir, "bsp+rep=1", a1, sizeof a1), 1);
	cr_assert_neq(access(dir, F_OK), 0, "the attempt is gone from its place");
	snprintf(path, sizeof path, "%s/.incomplete/bsp+rep=1-", out);
	cr_assert(!strncmp(a1, path, strlen(path)), "%s", a1);
	snprintf(path, sizeof path, "%s/events.csv", a1);
	char *t = support_read_file(path, &len);
	cr_assert(t && !strcmp(t, "first\n"), "kept whole");
	free(t);
	/* a second attempt (the same second, as often in a test) is kept too, not merged */
	cr_assert_eq(mkdir(dir, 0755), 0);
	touch(dir, "events.csv", "second\n");
	cr_assert_eq(rundir_set_aside(out, dir, "bsp+rep=1", a2, sizeof a2), 1);
	cr_assert_str_neq(a1, a2);
	snprintf(path, sizeof path, "%s/events.csv", a2);
	t = support_read_file(path, &len);
	cr_assert(t && !strcmp(t, "second\n"));
	free(t);
	snprintf(path, sizeof path, "%s/events.csv", a1);
	t = support_read_file(path, &len);
	cr_assert(t && !strcmp(t, "first\n"), "the first one untouched");
	free(t);
	support_rm_rf(out);
}

Test(rundir, set_aside_of_out_itself_is_refused)
{
	char out[128];

	support_tmpdir(out, sizeof out, "rundir");
	cr_assert_eq(rundir_set_aside(out, out, "r", NULL, 0), 0, "an empty --out holds no attempt");
	touch(out, "meta.json", "{}\n");
	cr_assert_eq(rundir_set_aside(out, out, "r", NULL, 0), -EEXIST);
	cr_assert_eq(access(out, F_OK), 0);
	support_rm_rf(out);
}

Test(rundir, set_aside_never_through_a_symlink)
{
	char out[128], elsewhere[128], dir[PATH_MAX], link[PATH_MAX];

	support_tmpdir(out, sizeof out, "rundir");
	support_tmpdir(elsewhere, sizeof elsewhere, "rundir-x");
	snprintf(link, sizeof link, "%s/.incomplete", out);
	cr_assert_eq(symlink(elsewhere, link), 0);
	snprintf(dir, sizeof dir, "%s/r", out);
	cr_assert_eq(mkdir(dir, 0755), 0);
	cr_assert_eq(rundir_set_aside(out, dir, "r", NULL, 0), -ENOTDIR);
	cr_assert_eq(access(dir, F_OK), 0, "left in place");
	support_rm_rf(out);
	support_rm_rf(elsewhere);
}
