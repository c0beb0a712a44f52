/* orchestrator/cleanup: undo what journals recorded; `stalenet cleanup`.
 *
 * It runs as root over directories other people may write, so it acts only on what a TRUSTED
 * journal proves its run created, and decides that for the whole journal before touching
 * anything (a journal with one bad record is refused, with a one-line reason naming the line):
 * - the file: opened with O_NOFOLLOW, a regular file with one link, owned by root, not writable
 *   by group or others; every directory from the journal's up to the runs directory the user
 *   named (for registry entries: up to /) owned by root and not group/other-writable, except
 *   that a directory ABOVE the run directory may be a root-owned sticky one like /tmp (nobody
 *   else can rename or replace the root-owned entries below it). The header's RUN_DIR must be
 *   the journal's real directory, its PREFIX 3-15 characters of [A-Za-z0-9_-].
 * - the records: every namespace starts with the run's prefix; an iptables rule is exactly
 *   what the link shaper adds (mangle PREROUTING, -i IF or -m physdev --physdev-in IF, -j
 *   NFQUEUE --queue-num N) inside one of the run's namespaces; a sysctl is a host key from the
 *   fixed list the testbed changes, with plausible values, restored to OLD only while the value
 *   is still the NEW one recorded; a process (pid >= 2) still alive with the recorded start
 *   time must run a stalenet program (stalenet, stalenet-node, stalenet-linkd beside this
 *   program, or cleanup_set_program_dir) whose command line names the run directory or prefix.
 *   A cgroup is a directory under the cgroup mount (cgroup_root()), ROOT[/CTRL]/PREFIX or
 *   ROOT[/CTRL]/PREFIX/PREFIXNODE, with no "." or ".." component (cgroup_path_problem).
 * Undo steps are idempotent ("already gone" is success). A process is signalled through a
 * pidfd after re-checking it, so a recycled pid is never hit. */
#ifndef STALENET_CLEANUP_H
#define STALENET_CLEANUP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "orchestrator/journal.h"

#define CLEANUP_DEFAULT_ROOT "runs"

enum cleanup_flags {
	CLEANUP_NO_REGISTRY = 1u << 0, /* do not scan the registry, only the given path */
	CLEANUP_FORCE = 1u << 1,       /* replay even when the orchestrator looks alive */
	CLEANUP_DRY_RUN = 1u << 2,     /* find, check and report, change nothing */
};

struct cleanup_report {
	int journals;        /* journals found */
	int replayed;        /* replayed (orchestrator dead) */
	int live;            /* skipped: orchestrator alive */
	int ended;           /* skipped: teardown already complete */
	int failed;          /* replays with a failed undo, unreadable or refused journals */
	int refused;         /* of failed: refused as untrusted (nothing touched) */
};

/* True when pid exists, is not a zombie, and has this start time (/proc/PID/stat field 22). */
bool cleanup_proc_alive(pid_t pid, uint64_t start_time);

/* Check every record of a parsed journal against the run its header names (the rules above;
 * reads /proc for processes still alive, changes nothing). Returns 0, or -EPERM with why =
 * "line N: reason" (one line). */
int cleanup_check(const struct journal_parsed *p, char *why, size_t whylen);

/* Directory holding the stalenet programs a recorded process may run; NULL restores the
 * default, the directory of /proc/self/exe. Not thread-safe (tests, installs). */
void cleanup_set_program_dir(const char *dir);

/* The caller's interruption count (its signal handler's): once *count reaches at, the
 * replay's processes still alive are killed (SIGKILL) instead of given SIGTERM and 3 s; every
 * other record is still undone. NULL = never (the default). Not thread-safe, like
 * cleanup_set_program_dir. */
void cleanup_set_interrupt(const volatile sig_atomic_t *count, int at);

/* Tear down a run from its own live journal: check it, replay everything recorded so far in
 * reverse, then mark it ended and unregister it. Returns 0, -EPERM (refused, nothing done) or
 * the first undo error (the journal then stays open for a retry or `stalenet cleanup`). */
int cleanup_journal(struct journal *j);

/* Scan path (a journal file, a run dir, or a directory of run dirs; NULL = CLEANUP_DEFAULT_ROOT,
 * missing is fine; trust is checked up to this path) and, unless CLEANUP_NO_REGISTRY, the
 * registry; replay the journals of dead runs that pass the checks, refuse the others (one log
 * line each). rep may be NULL. Returns 0 when nothing was refused or failed, else the first
 * error (-EPERM for a refusal). */
int cleanup_run(const char *path, unsigned flags, struct cleanup_report *rep);

#endif
