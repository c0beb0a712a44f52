/* orchestrator/journal: the teardown journal, RUN_DIR/journal.
 *
 * Every piece of host state a run creates (namespace, host sysctl change, iptables rule,
 * process) is appended here, and the line fsync'd, BEFORE the thing is created. So
 * whatever happens to the orchestrator, the journal lists a superset of what exists, and a
 * teardown that replays it in reverse (cleanup_journal, `stalenet cleanup`) removes exactly
 * what the run made. Undo steps are idempotent: a missing thing is not an error.
 *
 * Text format (docs/journal.md): one record per line, fields separated by single spaces,
 * bytes <= 0x20, 0x7f and '%' inside a field written as %XX. The first line is the header
 *   stalenet-journal 1 PID STARTTIME RUN_DIR PREFIX
 * (the orchestrator's pid and its /proc/PID/stat start time, so liveness never relies on a
 * name); then records
 *   netns NAME | sysctl NS KEY OLD [NEW [ORIG]] | sysctl-released NS KEY
 *   | iptables NS TABLE CHAIN ARG... | proc PID STARTTIME NAME | cgroup PATH
 * where NS is a name under /run/netns or "-" for the host namespace; and a final "end" once
 * a teardown completed. A torn last line (no newline) is ignored: its append never returned,
 * so its thing was never created.
 *
 * Each run also registers itself as a symlink JOURNAL_REGISTRY_DIR/PREFIX -> journal, so
 * cleanup finds runs whatever --out directory they used. Only the kinds some code writes exist:
 * the parser refuses any other (the "link" and "mount" kinds of early journals were never
 * written). Whether a parsed journal may be acted upon is orchestrator/cleanup's decision. */
#ifndef STALENET_JOURNAL_H
#define STALENET_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define JOURNAL_REGISTRY_DIR "/run/stalenet"
#define JOURNAL_FILE "journal"
#define JOURNAL_MAX_FIELDS 64

enum journal_kind {
	JOURNAL_NETNS = 0,  /* NAME: umount + unlink /run/netns/NAME (testbed) */
	JOURNAL_SYSCTL,     /* NS KEY OLD [NEW [ORIG]]: 5 fields, a claim released by the rules of
			       orchestrator/hostshare; else write OLD back if the value is still NEW */
	JOURNAL_IPTABLES,   /* NS TABLE CHAIN RULE...: iptables -t TABLE -D CHAIN RULE... (shaper) */
	JOURNAL_PROC,       /* PID STARTTIME NAME: TERM then KILL, only if still that process (launch) */
	JOURNAL_CGROUP,     /* PATH: move tasks out, rmdir (orchestrator/cgroup) */
	JOURNAL_SYSCTL_RELEASED, /* NS KEY: the run's claim on KEY was released (hostshare) */
	JOURNAL_KIND_COUNT
};

/* "netns", "link", ...; NULL for an out-of-range kind. */
const char *journal_kind_name(enum journal_kind kind);

/* ---- writing ---------------------------------------------------------------------------- */

struct journal;

/* Create RUN_DIR/journal (which must not exist yet), write and sync the header for this
 * process, and register it under the registry directory as PREFIX. Returns NULL and fills
 * err on failure (-EEXIST cases: a journal already in RUN_DIR, or PREFIX already registered). */
struct journal *journal_create(const char *run_dir, const char *prefix, char *err, size_t errlen);

/* Close the file and free (the journal stays on disk and registered). Accepts NULL. */
void journal_destroy(struct journal **self);

/* Append one record and sync it (unless inside a batch); fields are escaped (any bytes but
 * NUL). ns NULL means the host namespace ("-"). Return 0, -EINVAL (empty field, bad count),
 * -E2BIG or -errno from the write. */
int journal_netns(struct journal *self, const char *name);
/* new_value is the value being set (cleanup restores only while it is still there); NULL was
 * written by older versions for tcp_allowed_congestion_control and is still read. */
int journal_sysctl(struct journal *self, const char *ns, const char *key, const char *old_value,
		   const char *new_value);
/* A host-namespace claim on a shared sysctl (orchestrator/hostshare): the value found, the
 * value written, the value before any registered run changed it. */
int journal_sysctl_claim(struct journal *self, const char *key, const char *old_value,
			 const char *new_value, const char *orig);
/* The claim on key was released (its restore is done; replay skips it). Nothing is written
 * once the journal is marked ended. */
int journal_sysctl_released(struct journal *self, const char *key);
/* The rule as it will be given after `-A CHAIN` (argv of n strings). */
int journal_iptables(struct journal *self, const char *ns, const char *table, const char *chain,
		     int n, const char *const *rule);
int journal_proc(struct journal *self, pid_t pid, uint64_t start_time, const char *name);
/* A cgroup directory (absolute path) about to be made. */
int journal_cgroup(struct journal *self, const char *path);

/* Batch: appends between begin and commit are buffered and written with one write + one
 * fsync at commit. The caller must commit BEFORE creating any of the batch's things.
 * Batches do not nest. Returns 0 or -errno (commit). */
int journal_batch_begin(struct journal *self);
int journal_batch_commit(struct journal *self);

/* Append "end" (teardown complete) and remove the registry entry. Returns 0 or -errno. */
int journal_mark_ended(struct journal *self);

/* RUN_DIR/journal (absolute), owned by self. */
const char *journal_path(const struct journal *self);

/* ---- reading and replaying (pure) ---------------------------------------------------------- */

struct journal_record {
	enum journal_kind kind;
	int line;              /* 1-based line number in the file */
	int nfields;
	char **fields;         /* unescaped; owned by the journal_parsed */
};

struct journal_parsed {
	pid_t pid;             /* orchestrator */
	uint64_t start_time;   /* its /proc/PID/stat field 22 */
	char *run_dir;
	char *prefix;
	bool ended;            /* a teardown completed ("end" is the last record) */
	size_t n;
	struct journal_record *recs;
};

/* Parse a journal text of len bytes. Returns 0 and *out (free with journal_parsed_free),
 * -ENODATA for a text without a whole header line (a run stopped while creating its journal:
 * nothing of it exists), or -EINVAL with err = "line N: what" (unknown kind, wrong field count,
 * bad escape, bad header). */
int journal_parse(const char *text, size_t len, struct journal_parsed **out, char *err,
		  size_t errlen);
/* Read fd from where it stands to its end (EINTR retried) into *text (malloc'd, not
 * NUL-terminated; the caller frees) and its length into *len. The caller opens, checks and
 * closes fd. Returns 0, or -errno (-ENOMEM) with *text NULL. */
int journal_read_fd(int fd, char **text, size_t *len);
/* Read and parse a journal file. Returns 0 or -errno / -EINVAL (err filled). */
int journal_load(const char *path, struct journal_parsed **out, char *err, size_t errlen);
void journal_parsed_free(struct journal_parsed **p);

/* How to undo one record; returns 0 when the thing is gone (including: was never there),
 * else -errno. */
struct journal_ops {
	int (*undo)(void *arg, const struct journal_record *rec);
	void *arg;
};

/* Undo every record, last first. Continues past failures. Returns 0 when every undo returned
 * 0, else the first error; *n_failed (may be NULL) gets the number of failed records. */
int journal_replay(const struct journal_parsed *p, const struct journal_ops *ops, int *n_failed);

/* Escape / unescape one field (the %XX scheme above). Return the output length, or -ENOSPC
 * (output too small) / -EINVAL (bad escape). out is NUL-terminated. Pure. */
int journal_escape(const char *in, char *out, size_t outlen);
int journal_unescape(const char *in, size_t inlen, char *out, size_t outlen);

/* Override the registry directory (tests). NULL restores the default. Not thread-safe. */
void journal_set_registry_dir(const char *dir);
const char *journal_registry_dir(void);

#endif
