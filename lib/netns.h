/* lib/netns: named network namespaces, the way `ip netns` keeps them.
 *
 * A named namespace is a bind mount of a namespace file (/proc/thread-self/ns/net) onto
 * /run/netns/NAME, with /run/netns itself a shared mount so the name is visible from every
 * mount namespace; `ip netns exec NAME ...` therefore works on ours for debugging. Entering
 * and leaving is per thread (setns affects the calling thread only). Every fd is O_CLOEXEC and
 * every syscall that can be interrupted is retried on EINTR. */
#ifndef STALENET_NETNS_H
#define STALENET_NETNS_H

#include <stdbool.h>
#include <stddef.h>

#define NETNS_RUN_DIR "/run/netns"

/* True when /run/netns/NAME exists. */
bool netns_exists(const char *name);

/* Make sure /run/netns exists and is a shared mount (bind-mounting it onto itself first when
 * it is not a mount point), as `ip netns add` does. Idempotent. Returns 0 or -errno. */
int netns_prepare_dir(void);

/* Give the calling thread's current network namespace the name NAME (bind mount). Fails with
 * -EEXIST when the name is taken; on any failure nothing is left behind. Returns 0 or -errno. */
int netns_name_current(const char *name);

/* Create a new namespace called NAME (prepare /run/netns, unshare in this thread, name it,
 * switch back), as `ip netns add` does on a host that never had a named namespace. The calling
 * thread ends in the namespace it started in. Returns 0 or -errno. */
int netns_add(const char *name);

/* Remove the name NAME (lazy unmount + unlink). The kernel frees the namespace when its last
 * user (process, socket, open fd) goes. A missing name is not an error. Returns 0 or -errno. */
int netns_delete(const char *name);

/* Switch the calling thread into namespace NAME. *saved receives an fd of the namespace left
 * (pass it to netns_restore). Returns 0 or -errno (then *saved is -1). */
int netns_enter(const char *name, int *saved);

/* Switch back to *saved and close it; sets *saved = -1. A no-op for -1. Returns 0 or -errno. */
int netns_restore(int *saved);

/* Move the calling thread into NAME for good (a child between fork and exec: no saved fd, no
 * allocation, no logging; errno is kept for the caller). Returns 0 or -errno. */
int netns_join(const char *name);

/* Call fn(arg) with the calling thread inside NAME (NULL or "" = where it is), then switch
 * back. Returns fn's result, or -errno when entering or leaving failed (logged; a failed
 * return leaves the thread in the wrong namespace). The one way code runs in a namespace. */
int netns_call(const char *name, int (*fn)(void *arg), void *arg);

/* Run the program argv (argv[0] searched in PATH) inside NAME (NULL or "" = here) and wait for
 * it; stdin is /dev/null, and stdout/stderr too when quiet. Returns its exit status (0-255),
 * -ENOENT when NAME does not exist, -EINTR when a signal ended it, or -errno. The one way a
 * command runs in a namespace. */
int netns_exec(const char *name, const char *const *argv, bool quiet);

#endif
