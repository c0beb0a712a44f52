/* Shared test fixtures: skip-or-fail, root and namespace checks, the host-wide test lock. */
#include "tests/support/fixture.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
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
	char name[256];
	int rc;

	support_require_root();
	/* The pid makes the name this process's own: the suite's fixed name alone was taken when
	 * two tests of a suite set up at once (Criterion runs them in parallel unless -j1), or
	 * by a probe left behind by a test killed between add and delete, and netns_add refuses
	 * an existing name (EEXIST), which read as "this host cannot create namespaces". */
	snprintf(name, sizeof name, "%s-%d", probe, (int)getpid());
	rc = netns_add(name);
	if (rc < 0)
		support_skip_or_fail("cannot create a network namespace (%s): %s", name, strerror(-rc));
	netns_delete(name);
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

void support_require_dataset(const char *dir)
{
	char img[PATH_MAX], gz[PATH_MAX];

	snprintf(img, sizeof img, "%s/train-images-idx3-ubyte", dir);
	snprintf(gz, sizeof gz, "%s/train-images-idx3-ubyte.gz", dir);
	if (access(gz, R_OK) < 0 && access(img, R_OK) < 0)
		support_skip_or_fail("no Fashion-MNIST under %s", dir);
}

void support_require_sshd(void)
{
	if (access("/usr/sbin/sshd", X_OK))
		support_skip_or_fail("no /usr/sbin/sshd (apt-get install openssh-server)");
}

bool support_stalenet_path(char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

	cr_assert_gt(n, 0);
	self[n] = '\0';
	for (int up = 0; up < 3; up++) {
		char *slash = strrchr(self, '/');

		cr_assert_not_null(slash);
		*slash = '\0';
	}
	snprintf(out, len, "%s/stalenet", self);
	return access(out, X_OK) == 0;
}
