/* lib/safefile: how root writes files into a directory a user may own (a run directory).
 *
 * A user who owns the directory can plant a symlink (or a hard link) where root will write,
 * hoping root truncates or rewrites its target, or pre-create the temporary name of an atomic
 * replace. So: files are opened with O_NOFOLLOW and must be regular with one link; atomic
 * replaces write to an unpredictable O_EXCL name in the same directory, then renameat over the
 * target (rename replaces a symlink, never writes through it); directories are created and then
 * opened with O_NOFOLLOW | O_DIRECTORY so a planted symlink is refused. */
#ifndef STALENET_SAFEFILE_H
#define STALENET_SAFEFILE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* open(path, flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode) for writing, refusing anything but
 * a regular file with a single link (O_TRUNC is applied only after that check). Returns the fd,
 * or -ELOOP (a symlink), -EPERM (not regular, or hard-linked) or another -errno. */
int safefile_open(const char *path, int flags, mode_t mode);

/* Like fopen(path, how) with how "w" (create or truncate) or "a" (create or append), through
 * safefile_open (mode 0644). Returns NULL with errno set on failure. */
FILE *safefile_fopen(const char *path, const char *how);

/* An atomic replacement in progress; fill it with safefile_replace_begin. */
struct safefile_tmp {
	int dirfd;      /* the target's directory */
	FILE *f;        /* the temporary file, written by the caller */
	char tmp[300];  /* its name inside dirfd */
	char base[256]; /* the target's name inside dirfd */
};

/* Start replacing path: a new file with an unpredictable name (created O_EXCL, mode mode) in
 * path's directory. Returns the stream to write, or NULL with errno set. */
FILE *safefile_replace_begin(struct safefile_tmp *t, const char *path, mode_t mode);

/* Flush, fsync and close the temporary file, then rename it over the target. Returns 0 or
 * -errno (the temporary file is removed on failure). Either way t is released. */
int safefile_replace_commit(struct safefile_tmp *t);

/* Give up: close and remove the temporary file, release t. Accepts a t never begun (dirfd -1). */
void safefile_replace_abort(struct safefile_tmp *t);

/* Replace path with len bytes of data atomically (begin + write + commit). Returns 0 or -errno. */
int safefile_replace(const char *path, const void *data, size_t len, mode_t mode);

/* Create directory path (mode, when absent) and make sure it is a real directory, not a
 * symlink. Returns 0, -ENOTDIR (a symlink or a file stands there) or another -errno. */
int safefile_mkdir(const char *path, mode_t mode);

#endif
