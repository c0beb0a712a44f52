/* netem/link_netns: enter a named network namespace for one call (see the header). */
#include "netem/link_netns.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"

int link_netns_call(const char *netns, int (*fn)(void *arg), void *arg)
{
	int self = -1, target = -1, rc;
	char path[PATH_MAX];
	if (!netns || !netns[0])
		return fn(arg);
	snprintf(path, sizeof path, "/run/netns/%s", netns);
	self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0) {
		rc = -errno;
		log_error("open own netns: %s", strerror(errno));
		goto out;
	}
	target = open(path, O_RDONLY | O_CLOEXEC);
	if (target < 0) {
		rc = -errno;
		log_error("open %s: %s", path, strerror(errno));
		goto out;
	}
	if (setns(target, CLONE_NEWNET) < 0) {
		rc = -errno;
		log_error("setns %s: %s", path, strerror(errno));
		goto out;
	}
	rc = fn(arg);
	if (setns(self, CLONE_NEWNET) < 0) {
		log_error("setns back from %s: %s", path, strerror(errno));
		rc = -errno;
	}
out:
	if (self >= 0)
		close(self);
	if (target >= 0)
		close(target);
	return rc;
}
