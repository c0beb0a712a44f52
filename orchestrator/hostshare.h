/* orchestrator/hostshare: host sysctls shared by concurrent runs (docs/reliability.md).
 *
 * Two host-wide keys are changed by the testbed: net.ipv4.tcp_allowed_congestion_control (a
 * set of names; a run adds the one it needs) and net.ipv4.neigh.default.gc_thresh1..3 (numbers;
 * a run raises them). Several runs may overlap, so each run journals a CLAIM on a key,
 *   sysctl - KEY OLD NEW ORIG
 * OLD the value it found, NEW the value it wrote (or found enough), ORIG the value before any
 * registered run changed it (inherited from another registered claim still in effect, else
 * OLD). Every read-modify-write happens under one host-wide lock (hostshare_lock). Releasing:
 *   list:   remove the names this run holds (NEW minus ORIG) that no other live claim holds;
 *   number: the last live claim out writes ORIG back; an earlier one lowers the value to the
 *           largest other live NEW; a value no claim wrote (changed by hand) is left alone.
 * The pure functions below decide; hostshare_claim_take/release do the locking and I/O. */
#ifndef STALENET_HOSTSHARE_H
#define STALENET_HOSTSHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HOSTSHARE_VALUE_MAX 256
#define HOSTSHARE_CC_KEY "net.ipv4.tcp_allowed_congestion_control"

struct journal;

/* One run's claim on a key (values NUL-terminated). new_value "" : an old journal's record
 * without it; orig "" : an old journal's record (OLD serves). */
struct hostshare_claim {
	char key[64];
	char old_value[HOSTSHARE_VALUE_MAX], new_value[HOSTSHARE_VALUE_MAX], orig[HOSTSHARE_VALUE_MAX];
};

/* ---- pure ------------------------------------------------------------------------------------ */

/* True for the key whose value is a set of names. */
bool hostshare_is_list(const char *key);

/* Fill c (key set by the caller) for a run needing `need` (a name for the list key, a minimum
 * for numbers) when the live value is cur and others (n claims of other registered runs, live
 * or not) exist. Returns 1 when c->new_value must be written, 0 when cur already serves,
 * -EINVAL for an implausible value, -ENOSPC. */
int hostshare_take(struct hostshare_claim *c, const char *cur, const char *need,
		   const struct hostshare_claim *others, size_t n);

/* What to write when `mine` is released and the live value is cur; live: claims of other
 * runs still alive. Returns 1 and out, or 0 (leave cur), or -ENOSPC. */
int hostshare_release(const struct hostshare_claim *mine, const char *cur,
		      const struct hostshare_claim *live, size_t n, char *out, size_t outlen);

/* ---- host ------------------------------------------------------------------------------------ */

/* Take the host-wide lock (flock on REGISTRY/.sysctl.lock). Returns an fd for
 * hostshare_unlock, or -errno. */
int hostshare_lock(void);
void hostshare_unlock(int fd);

/* Claims on key of the registered runs (journal registry), except the run whose journal is
 * `self_path` (may be NULL). alive_only: skip runs whose orchestrator is gone. Runs whose
 * journal ended or released the key are skipped; unreadable or implausible journals too.
 * Returns the count (>= 0) with *out malloc'd (free it), or -errno. Caller holds the lock. */
int hostshare_scan(const char *key, const char *self_path, bool alive_only,
		   bool (*alive)(pid_t pid, uint64_t start_time), struct hostshare_claim **out);

/* Parse a journal sysctl record's fields (NS KEY OLD [NEW [ORIG]]) into c. 0 or -EINVAL. */
int hostshare_from_record(struct hostshare_claim *c, int nfields, char *const *fields);

/* Under the lock: take a claim on key needing `need`, journal it in j (may be NULL) before
 * the write, write. c gets the claim. Returns 0 or -errno (err filled). */
int hostshare_claim_take(struct journal *j, const char *key, const char *need,
			 struct hostshare_claim *c, char *err, size_t errlen);
/* Under the lock: release c (journaled as released in j, which may be NULL) and write what
 * hostshare_release decides. self_path: the journal holding c (NULL: none). 0 or -errno. */
int hostshare_claim_release(struct journal *j, const char *self_path,
			    const struct hostshare_claim *c);

#endif
