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
 * a name that is refused. */
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

/* Open REL (already allowed) under the directory dirfd: its subdirectory (nodes/, logs/) and the
 * file itself are opened without following symlinks; the file must be a regular file with one
 * link (else -EPERM; a fifo is refused without blocking). flags as for open (O_RDONLY, or
 * O_WRONLY | O_APPEND | O_CREAT); O_CLOEXEC | O_NOFOLLOW are added. Returns the fd (the caller
 * closes it) or -errno (-ENOENT when it does not exist and O_CREAT is not given). */
int hostfiles_open(int dirfd, const char *rel, int flags, mode_t mode);

#endif
