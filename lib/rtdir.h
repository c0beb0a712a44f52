/* lib/rtdir: the runtime directory (/run/stalenet) that holds every control socket and the
 * journal registry, made safe in one place.
 *
 * The tool runs as root; a user may have created the directory first (mode 0777, or owned by
 * them, or a symlink to somewhere else). mkdir does not fix an existing directory, so
 * rtdir_ensure opens it without following a symlink, refuses one not owned by the caller and
 * tightens its mode to 0700. Everyone who binds a socket or registers a run calls it first. */
#ifndef STALENET_RTDIR_H
#define STALENET_RTDIR_H

#define RTDIR_PATH "/run/stalenet"

/* The runtime directory: RTDIR_PATH for root; for another uid (unit tests, tools run without
 * privileges) $XDG_RUNTIME_DIR/stalenet, else /tmp/stalenet-UID. The string is static. */
const char *rtdir_path(void);

/* Make sure path is a real directory (not a symlink) owned by our effective uid with mode
 * 0700: create it when absent, chmod it when looser. Returns 0, or -ENOTDIR (symlink or not a
 * directory), -EPERM (owned by someone else) or another -errno; logs the reason. */
int rtdir_ensure_dir(const char *path);

/* rtdir_ensure_dir(rtdir_path()). */
int rtdir_ensure(void);

#endif
