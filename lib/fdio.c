/* lib/fdio: see fdio.h. */
#include "lib/fdio.h"

#include <errno.h>
#include <unistd.h>

int fdio_write_all(int fd, const void *buf, size_t len, size_t *done)
{
	const char *p = buf;
	size_t out = 0;
	int rc = 0;

	while (out < len) {
		ssize_t w = write(fd, p + out, len - out);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			/* a write of 0 bytes for a non-empty buffer would loop forever */
			rc = w < 0 ? -errno : -EIO;
			break;
		}
		out += (size_t)w;
	}
	if (done)
		*done = out;
	return rc;
}
