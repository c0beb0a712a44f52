/* lib/fdio: whole writes on a file descriptor.
 *
 * write(2) may write less than asked (a pipe, a socket, a signal, a file system that fills up)
 * and may be interrupted before writing anything: every writer that means "all of it" goes
 * through one loop here. */
#ifndef STALENET_FDIO_H
#define STALENET_FDIO_H

#include <stddef.h>

/* Write len bytes of buf to fd, retrying on EINTR and after short writes. *done (when not
 * NULL) = how many bytes went out, also on failure. Returns 0, or -errno of the write that
 * failed (-EIO when write(2) returned 0 for a non-empty buffer). SIGPIPE is the caller's. */
int fdio_write_all(int fd, const void *buf, size_t len, size_t *done);

#endif
