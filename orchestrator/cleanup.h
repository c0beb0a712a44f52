/* orchestrator/cleanup: undo what journals recorded; `stalenet cleanup`.
 *
 * The undo of each record kind (orchestrator/journal.h) done for real: kill processes whose
 * pid AND start time still match, delete iptables rules inside their namespace (iptables -C
 * then -D), delete links, restore sysctls, unmount, delete namespaces. Each step treats
 * "already gone" as success, so teardown can be re-run after a partial one.
 *
 * cleanup_run() finds journals (RUN_DIR/journal under a runs root, plus the registry
 * /run/stalenet/PREFIX symlinks) whose orchestrator is dead (its pid is gone or now has another
 * start time) and replays them. It acts only on what a journal lists, so a namespace carrying
 * our prefix that no journal mentions is left alone. */
#ifndef STALENET_CLEANUP_H
#define STALENET_CLEANUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "orchestrator/journal.h"

#define CLEANUP_DEFAULT_ROOT "runs"

enum cleanup_flags {
	CLEANUP_NO_REGISTRY = 1u << 0, /* do not scan the registry, only the given path */
	CLEANUP_FORCE = 1u << 1,       /* replay even when the orchestrator looks alive */
	CLEANUP_DRY_RUN = 1u << 2,     /* find and report, change nothing */
};

struct cleanup_report {
	int journals;        /* journals found */
	int replayed;        /* replayed (orchestrator dead) */
	int live;            /* skipped: orchestrator alive */
	int ended;           /* skipped: teardown already complete */
	int failed;          /* replays with at least one failed undo, or unreadable journals */
};

/* Undo one record on this host. Returns 0 when the thing is gone, else -errno (logged). */
int cleanup_undo(const struct journal_record *rec);

/* journal_ops whose undo is cleanup_undo. */
const struct journal_ops *cleanup_ops(void);

/* True when pid exists, is not a zombie, and has this start time (/proc/PID/stat field 22). */
bool cleanup_proc_alive(pid_t pid, uint64_t start_time);

/* Tear down a run from its own live journal: replay everything recorded so far in reverse,
 * then mark the journal ended and unregister it. Returns 0 or the first undo error (the
 * journal then stays open for a retry or for `stalenet cleanup`). */
int cleanup_journal(struct journal *j);

/* Replay one journal file if its orchestrator is dead (or CLEANUP_FORCE), then append "end"
 * and drop its registry entry. Counts into rep (may be NULL). Returns 0 or -errno. */
int cleanup_journal_file(const char *path, unsigned flags, struct cleanup_report *rep);

/* Scan path (a journal file, a run dir, or a directory of run dirs; NULL = CLEANUP_DEFAULT_ROOT,
 * missing is fine) and, unless CLEANUP_NO_REGISTRY, the registry; replay dead runs' journals.
 * rep may be NULL. Returns 0 when every replay succeeded, else the first error. */
int cleanup_run(const char *path, unsigned flags, struct cleanup_report *rep);

#endif
