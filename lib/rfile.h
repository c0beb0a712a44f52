/* lib/rfile: read a whole file of a directory that someone else may have written, bounded.
 *
 * A run directory is input like any other: its eval.csv may be a FIFO (an open waits for a
 * writer forever), a trace a symlink to /dev/zero (a read never ends), meta.json a directory.
 * Symlinks are followed (a user may link traces in from elsewhere), but only to a regular file:
 * the path is stat'ed first (a device seen there is not opened: opening some arms or rewinds
 * them), then opened with O_NONBLOCK (so a FIFO swapped in between does not block the open) and
 * the descriptor's fstat must show the same regular file. Reads stop at a cap given by the
 * caller. A pipe (`<(...)`, /dev/stdin) is refused like any FIFO. */
#ifndef STALENET_RFILE_H
#define STALENET_RFILE_H

#include <stddef.h>

/* Open path for reading (O_CLOEXEC, blocking reads) if it is, or links to, a regular file.
 * Returns the descriptor, or -ENOENT (absent), -EISDIR (a directory), -EINVAL (a FIFO, device
 * or socket: err says which), or another -errno; err is filled on failure ("path: what"). */
int rfile_open(const char *path, char *err, size_t errlen);

/* Read all of the regular file at path (as rfile_open) into *buf (malloc'ed, owned by the
 * caller, NUL-terminated; *len bytes before the NUL). Returns 0, rfile_open's errors, or -EFBIG
 * when the file holds more than max_bytes, -EIO / -ENOMEM; err filled on failure. */
int rfile_read(const char *path, size_t max_bytes, char **buf, size_t *len, char *err,
	       size_t errlen);

#endif
