/* node/fleet_sync: anti-entropy between a fleet registry that lost (part of) its store and the
 * devices that hold copies of their peers' versions (pure: bytes and lists, no sockets, no
 * store, no clock).
 *
 * A holder describes what it holds as a summary: a flat list of (device, version, hash)
 * entries, strictly increasing in (device, version). The registry feeds each holder's summary
 * into a plan, which keeps, per device, the versions the registry lacks and who offers them;
 * the registry then pulls the lowest wanted version of a device first (a delta applies only on
 * top of its parent), verifies what arrives against the offered hash, and reports the result.
 *
 * Why a flat list and not a Merkle tree: an entry is 44 bytes, against 0.6-30 KiB for the
 * version it names (softmax; hundreds of KiB for larger models), so the summary of a full
 * rebuild is well under 1% of the bytes pulled. A tree only pays when both sides already agree
 * on most versions (routine anti-entropy between intact stores); a rebuild from an empty store
 * needs every entry anyway, and the registry asks only once per start.
 *
 * Summary wire format (little-endian): magic "SNS1" (4), count (4), count entries of
 * device (4) version (8) hash (FLEET_HASH_BYTES), then wire_hash64 of everything before (8). */
#ifndef STALENET_FLEET_SYNC_H
#define STALENET_FLEET_SYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/fleet_codec.h"

#define FLEET_SYNC_MAGIC 0x31534e53u /* "SNS1" */
#define FLEET_SYNC_ENTRY_BYTES (4 + 8 + FLEET_HASH_BYTES)
#define FLEET_SYNC_CHUNK 256 /* entries in one summary message, at most */

struct fleet_sync_entry {
	uint32_t device;
	int64_t version; /* >= 1 */
	uint8_t hash[FLEET_HASH_BYTES];
};

/* Bytes of a summary of n entries; the largest summary message (FLEET_SYNC_CHUNK entries). */
size_t fleet_sync_summary_bytes(size_t n);
size_t fleet_sync_summary_max(void);

/* Encode n <= FLEET_SYNC_CHUNK entries (strictly increasing in (device, version)) into out
 * (cap bytes). Returns the bytes written, -EINVAL (order, count) or -ENOSPC. */
int fleet_sync_summary_encode(const struct fleet_sync_entry *e, size_t n, uint8_t *out, size_t cap);

/* Decode a summary from hostile bytes: size, magic, check, count <= FLEET_SYNC_CHUNK and <= cap,
 * devices < ndevices, versions >= 1, strictly increasing. Returns the entry count written to
 * out, or -EBADMSG. */
int fleet_sync_summary_decode(const uint8_t *buf, size_t len, uint32_t ndevices,
			      struct fleet_sync_entry *out, size_t cap);

struct fleet_sync_plan;

/* What the registry holds: 1 with hash filled when device@version is stored, 0 when not,
 * negative errno on failure. */
typedef int (*fleet_sync_have_fn)(void *arg, uint32_t device, int64_t version,
				  uint8_t hash[FLEET_HASH_BYTES]);

/* Counters of what summaries offered (added to by fleet_sync_plan_add). */
struct fleet_sync_counts {
	uint64_t offered;   /* entries seen */
	uint64_t held;      /* the registry holds it with the same hash: nothing to do */
	uint64_t divergent; /* the registry holds another hash under that version: refused */
	uint64_t duplicate; /* the same holder offered the same version again */
	uint64_t wanted;    /* versions newly wanted (first offer of a missing version) */
};

/* A plan for ndevices devices, empty. NULL on allocation failure. */
struct fleet_sync_plan *fleet_sync_plan_new(uint32_t ndevices);
void fleet_sync_plan_destroy(struct fleet_sync_plan **self);

/* Add holder's summary entries (decoded: devices < ndevices). Returns 0 or negative errno
 * (have's error, -ENOMEM). */
int fleet_sync_plan_add(struct fleet_sync_plan *self, uint32_t holder, const struct fleet_sync_entry *e,
			size_t n, fleet_sync_have_fn have, void *arg, struct fleet_sync_counts *c);

/* The next pull for device: its lowest wanted version that has an offer not yet tried, with
 * the holder to ask and the hash it must have. Returns 1, or 0 when none is left. */
int fleet_sync_plan_next(const struct fleet_sync_plan *self, uint32_t device, int64_t *version,
			 uint32_t *holder, uint8_t hash[FLEET_HASH_BYTES]);

/* 1 with hash filled when holder has an untried offer of device@version, else 0 (to pull a
 * run of consecutive versions from the same holder). */
int fleet_sync_plan_offer(const struct fleet_sync_plan *self, uint32_t device, int64_t version,
			  uint32_t holder, uint8_t hash[FLEET_HASH_BYTES]);

/* The outcome of pulling device@version from holder: ok (stored) drops every offer of that
 * version; not ok marks this holder's offer tried (another holder's is next). */
void fleet_sync_plan_result(struct fleet_sync_plan *self, uint32_t device, int64_t version,
			    uint32_t holder, bool ok);

/* Make every offer of device@version untried again: called when its parent was just stored,
 * since a holder that could not send it without the parent (as a full frame) may now send its
 * delta. Each stored version retries only its successor once, so retries are bounded. */
void fleet_sync_plan_retry(struct fleet_sync_plan *self, uint32_t device, int64_t version);

/* Versions of device still wanted with an untried offer. */
size_t fleet_sync_plan_pending(const struct fleet_sync_plan *self, uint32_t device);

#endif
