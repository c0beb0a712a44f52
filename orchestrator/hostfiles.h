/* orchestrator/hostfiles: which files of a run directory a host's agent may write, and how the
 * orchestrator opens them.
 *
 * During a run across hosts each agent streams the files its nodes wrote ("file REL" then its
 * rows; orchestrator/agent, orchestrator/multihost) and the orchestrator, running as root,
 * appends them to the same names in its run directory. The other host is not trusted: it
 * could name the orchestrator's own files (summary.csv, meta.json, events.csv...), another
 * host's node, a path that climbs out, or the run directory's owner could have planted a
 * symlink or a fifo where the file goes. So REL must be one of an allow-list of exactly the
 * names nodes write (hostfiles_allowed), and the file is opened relative to the run
 * directory's descriptor, never following a symlink in its last two components
 * (hostfiles_open). The agent filters with the same list, so a well-behaved agent never sends
 * a name that is refused.
 *
 * A file that travels whole (orchestrator/agentfile: a binary file, or a text file the node
 * rewrote) replaces the orchestrator's copy: it is written to a fresh temporary name beside it
 * (created exclusively, random, starting with '.', so no allowed name) and renamed over the
 * copy only once the whole of it has arrived and checked out (hostfiles_replace_*). */
#ifndef STALENET_HOSTFILES_H
#define STALENET_HOSTFILES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Longest REL accepted ("nodes/" + a 31-character node name + ".conf"). */
#define HOSTFILES_REL_MAX 64

/* Whether a host whose endpoints (nodes, and "hub" when it holds the link self-check's hub) are
 * names[0..n) may write REL into the run directory. Exactly these, nothing else:
 *   eval.csv partition.csv linkcheck.csv fleet.csv fleet_repair.csv
 *   ensemble.csv                                                      (written by nodes)
 *   nodes/NAME.csv nodes/NAME.conf logs/NAME.log                      (NAME one of names)
 *   logs/linkd.log                                                    (the host's emulator)
 * Pure. */
bool hostfiles_allowed(const char *rel, const char *const *names, size_t n);

/* Whether such a host may send REL whole (orchestrator/agentfile), beside the text files above
 * (which may come whole too, when rewritten):
 *   nodes/NAME.SUFFIX   NAME one of names (names have no '.', so NAME is unambiguous), SUFFIX
 *                       1..24 of [a-z0-9] in words joined by single '.' or '-', other than
 *                       csv and conf (the text files): NAME.params, NAME.peers.sqlite,
 *                       NAME.fleet, NAME.peers.sqlite-wal...
 *   fleet.sqlite fleet.sqlite-wal fleet.sqlite-shm    only when registry: the host holds the
 *                       fleet's registry, the one writer of its store (no other host may
 *                       replace it)
 * Pure. */
bool hostfiles_whole_allowed(const char *rel, const char *const *names, size_t n, bool registry);

/* A replacement of one file in progress: write the content to fd, then end it. */
struct hostfiles_replace {
	int parentfd;                           /* the directory REL is in (owned), -1 when idle */
	int fd;                                 /* the temporary file (owned), -1 when idle */
	char name[HOSTFILES_REL_MAX + 1];       /* REL's last component */
	char tmp[HOSTFILES_REL_MAX + 24];       /* the temporary name beside it */
};

/* Begin replacing REL (already allowed) under dirfd: its subdirectory opened without following
 * a symlink, a temporary file ".NAME.XXXXXXXXXXXXXXXX" (64 random bits) created in it with
 * O_EXCL | O_NOFOLLOW, mode 0644. Returns 0 (r->fd ready) or -errno (r left idle). */
int hostfiles_replace_begin(int dirfd, const char *rel, struct hostfiles_replace *r);

/* End a replacement: commit renames the temporary file over NAME (atomically: a reader sees
 * the old copy or the new one, never a part; a symlink there is replaced, not followed); else
 * (or when the rename fails) it is removed and the old copy stays. Returns 0 or -errno. Leaves
 * r idle; accepts an idle r (returns 0). */
int hostfiles_replace_end(struct hostfiles_replace *r, bool commit);

/* Open REL (already allowed) under the directory dirfd: its subdirectory (nodes/, logs/) and the
 * file itself are opened without following symlinks; the file must be a regular file with one
 * link (else -EPERM; a fifo is refused without blocking). flags as for open (O_RDONLY, or
 * O_WRONLY | O_APPEND | O_CREAT); O_CLOEXEC | O_NOFOLLOW are added. Returns the fd (the caller
 * closes it) or -errno (-ENOENT when it does not exist and O_CREAT is not given). */
int hostfiles_open(int dirfd, const char *rel, int flags, mode_t mode);

#endif
