/* lib/sysctl: /proc/sys access with EINTR care. One open/read or open/write per call, so a
 * value is always read in the caller's current network namespace. */
#include "lib/sysctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int sysctl_path(const char *key, char *buf, size_t len)
{
	int n;

	if (!key || !*key || strstr(key, "..") || strchr(key, '/'))
		return -EINVAL;
	n = snprintf(buf, len, "/proc/sys/%s", key);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	for (char *p = buf + strlen("/proc/sys/"); *p; p++)
		if (*p == '.')
			*p = '/';
	return 0;
}

int sysctl_read(const char *key, char *buf, size_t len)
{
	char path[256];
	ssize_t n;
	int fd, rc;

	if (len == 0)
		return -EINVAL;
	rc = sysctl_path(key, path, sizeof path);
	if (rc < 0)
		return rc;
	do
		fd = open(path, O_RDONLY | O_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return -errno;
	do
		n = read(fd, buf, len - 1);
	while (n < 0 && errno == EINTR);
	rc = n < 0 ? -errno : 0;
	close(fd);
	if (rc < 0)
		return rc;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	for (char *p = buf; *p; p++)
		if (*p == '\t')
			*p = ' ';
	return 0;
}

int sysctl_write(const char *key, const char *value)
{
	char path[256];
	size_t len = strlen(value);
	ssize_t n;
	int fd, rc;

	rc = sysctl_path(key, path, sizeof path);
	if (rc < 0)
		return rc;
	do
		fd = open(path, O_WRONLY | O_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return -errno;
	do
		n = write(fd, value, len);
	while (n < 0 && errno == EINTR);
	rc = n < 0 ? -errno : (size_t)n != len ? -EIO : 0;
	close(fd);
	return rc;
}
