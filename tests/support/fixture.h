/* Test fixtures shared by every suite: skip-or-fail when a test cannot run here, root and
 * network-namespace checks, and the lock that serialises tests touching host-wide state.
 *
 * A test that cannot run (no root, no namespaces, no data set) skips, except under
 * STALENET_TESTS_MUST_RUN=1 (CI), where it fails instead: there a skip would hide a broken
 * setup. These call Criterion, so they are for the test process, not for forked children. */
#ifndef STALENET_TESTS_SUPPORT_FIXTURE_H
#define STALENET_TESTS_SUPPORT_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>

/* True when STALENET_TESTS_MUST_RUN=1: a test that cannot run must fail, not skip. */
bool support_must_run(void);

/* Skip the current test with the printf-style reason, or fail it under
 * STALENET_TESTS_MUST_RUN=1. Does not return. */
_Noreturn void support_skip_or_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Skip (or fail, see above) unless the test runs as root. */
void support_require_root(void);

/* Skip (or fail) unless this host lets us create a network namespace: probe-<pid> is added
 * and deleted again (probe: a name unique to the suite). Implies support_require_root(). */
void support_require_netns(const char *probe);

/* Skip (or fail) unless the training images of the data set under dir are there (gzipped or
 * not). */
void support_require_dataset(const char *dir);

/* Skip (or fail) unless /usr/sbin/sshd is installed (every simulated host runs one). */
void support_require_sshd(void);

/* Write the path of the stalenet binary of this build into out (len bytes): BUILD/stalenet for
 * a test binary BUILD/tests/SUITE/test_x. Returns whether it is executable there. */
bool support_stalenet_path(char *out, size_t len);

/* Take the host-wide test lock (blocking): one test at a time touches host-wide state
 * (sysctls, iptables, /run/netns listings), whichever suite it belongs to. Returns the fd to
 * give to support_host_unlock(). Fails the test when the lock cannot be taken. */
int support_host_lock(void);

/* Release the lock taken by support_host_lock() and set *fd to -1; accepts -1. */
void support_host_unlock(int *fd);

#endif
