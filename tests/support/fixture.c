/* Shared test fixtures: skip-or-fail, root and namespace checks, the host-wide test lock. */
#include "tests/support/fixture.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "lib/netns.h"

/* The one lock file of every suite that compares host-wide state before and after. */
#define SUPPORT_HOST_LOCK "/run/stalenet-test-testbed.lock"

bool support_must_run(void)
{
	const char *must = getenv("STALENET_TESTS_MUST_RUN");

	return must && !strcmp(must, "1");
}

void support_skip_or_fail(const char *fmt, ...)
{
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	if (support_must_run())
		cr_assert_fail("cannot run: %s (STALENET_TESTS_MUST_RUN=1)", why);
	cr_skip_test("%s", why);
}

void support_require_root(void)
{
	if (geteuid() != 0)
		support_skip_or_fail("needs root");
}

void support_require_netns(const char *probe)
{
	support_require_root();
	if (netns_add(probe) < 0)
		support_skip_or_fail("cannot create a network namespace");
	netns_delete(probe);
}

int support_host_lock(void)
{
	int fd = open(SUPPORT_HOST_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	cr_assert_geq(fd, 0, "open %s", SUPPORT_HOST_LOCK);
	cr_assert_eq(flock(fd, LOCK_EX), 0, "flock %s", SUPPORT_HOST_LOCK);
	return fd;
}

void support_host_unlock(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}
