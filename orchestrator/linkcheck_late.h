/* orchestrator/linkcheck_late: linkcheck.csv completed with the release lateness of each link.
 *
 * The probes (node/probe) measure round trips but cannot see the emulator's lateness: they write
 * late_p99_ms empty and a verdict judged on the averages alone. After the probes finish, the
 * orchestrator asks the emulator (nfq) for every direction's p99 lateness over the check, or
 * takes the host's measured timer lateness (kernel), and this module rewrites the file: the
 * empty late_p99_ms fields filled (an `rtt` row takes the worse of its two directions) and the
 * verdict re-judged with lib/link_verdict's lateness rule. Rows whose late_p99_ms is already
 * set are kept as they are. */
#ifndef STALENET_LINKCHECK_LATE_H
#define STALENET_LINKCHECK_LATE_H

#include <stddef.h>

/* The p99 lateness in ms of node's direction ("up" or "down"), NAN when not known. */
typedef double linkcheck_late_fn(void *arg, const char *node, const char *direction);

/* Rewrite the linkcheck.csv at path (atomically, lib/safefile) with lookup's lateness. *n_late
 * (may be NULL) receives the number of rows judged "late". Returns 0; -ENOENT when there is no
 * file; -EINVAL when its header is not TRACE_HEADER_LINKCHECK (err says why); other -errno. */
int linkcheck_late_fill(const char *path, linkcheck_late_fn *lookup, void *arg, int *n_late, char *err,
			size_t errlen);

#endif
