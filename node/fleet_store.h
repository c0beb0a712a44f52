/* node/fleet_store: the fleet registry's store, every version of every device's model, in one
 * SQLite database under the run directory (RUN_DIR/fleet.sqlite).
 *
 * Tables: `meta` (key/value: format, n = floats per model, snapshot_every), `base` (the model
 * deployed to every device, one full fleet_codec frame, version 0 of every device) and
 * `versions` (device, version, parent, hash, strategy, bytes_tx, bytes_stored, t_sent,
 * t_stored, chain_len, payload): the payload is the fleet_codec frame that turns the parent's
 * model into this version's; parent 0 is the base; chain_len counts the non-full frames since
 * the last full one (a full frame or the base: 0).
 *
 * Durability: the writer opens the database in WAL mode with synchronous=FULL, so a version is
 * on disk when fleet_store_put returns; the registry acknowledges a version only after that.
 * A killed writer loses at most the transaction it was in, never a committed one.
 *
 * The reader (`stalenet recover`) opens the file read-only and treats it as hostile: the file
 * must be a regular file, the schema is never executed from the file (trusted_schema off,
 * defensive mode), blob sizes are bounded by the model size the meta table gives (itself at most
 * LIMITS_MAX_PARAMS), a chain must strictly descend in version and is at most
 * FLEET_STORE_MAX_CHAIN long, and every decoded step must match both its frame's and its row's
 * hash. */
#ifndef STALENET_FLEET_STORE_H
#define STALENET_FLEET_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/fleet_codec.h"

#define FLEET_STORE_FILE "fleet.sqlite"
#define FLEET_STORE_DEVICE_MAX 63     /* bytes of a device name: [A-Za-z0-9_.-] */
#define FLEET_STORE_MAX_CHAIN 65536   /* frames applied to rebuild one version, at most */

struct fleet_store;

/* One stored version's row without its payload. */
struct fleet_version {
	char device[FLEET_STORE_DEVICE_MAX + 1];
	int64_t version;        /* >= 1 */
	int64_t parent;         /* < version; 0 = the base */
	uint8_t hash[FLEET_HASH_BYTES];
	enum fleet_strategy strategy;
	uint64_t bytes_tx;      /* bytes of the frame the device sent */
	uint64_t bytes_stored;  /* bytes of the stored payload */
	double t_sent, t_stored; /* run seconds: device encoded it / commit */
	uint32_t chain_len;
};

/* Open (creating when writable) the store at path. writable: WAL, synchronous=FULL, tables
 * created. Read-only: the file must exist and be a regular file. Returns the store or NULL
 * with a message in err. */
struct fleet_store *fleet_store_open(const char *path, bool writable, char *err, size_t errlen);
void fleet_store_close(struct fleet_store **self);

/* The model size and snapshot period: set once by the writer (a second call with other values
 * fails with -EEXIST), read by anyone (-ENOENT when unset). */
int fleet_store_set_meta(struct fleet_store *self, uint32_t n, uint32_t snapshot_every);
int fleet_store_get_meta(struct fleet_store *self, uint32_t *n, uint32_t *snapshot_every);

/* Store the base model as a full frame (once; the same hash again is a no-op, another one
 * -EEXIST). Reading it back decodes and verifies it into out (n floats). */
int fleet_store_put_base(struct fleet_store *self, const uint8_t *frame, size_t len);
int fleet_store_get_base(struct fleet_store *self, float *out);

/* Commit one version (its row and payload) in one transaction. A version already stored with
 * the same hash is a no-op returning 1 (a resent copy); with another hash -EEXIST. Returns 0
 * when stored, or negative errno. */
int fleet_store_put(struct fleet_store *self, const struct fleet_version *v, const uint8_t *payload,
		    size_t len);

/* The registry's ingest of one received frame: version `version` of device, made against
 * `parent` (0 = the base) whose model is parent_model (n floats) and whose chain_len is
 * parent_chain. Decodes it (verified) into model_out, then stores the frame as received, or a
 * full frame of the model instead when the frame is full or the chain would reach the
 * snapshot period; *row gets the stored row. t_sent/t_now: run seconds. Returns 0 (stored and
 * committed), 1 (this exact version was already stored: a resent copy), -EBADMSG/-ESTALE (frame
 * corrupt or made against another base: nothing stored), -EEXIST (another model under this
 * version), or negative errno. */
int fleet_store_ingest(struct fleet_store *self, const char *device, int64_t version, int64_t parent,
		       uint32_t parent_chain, const float *parent_model, const uint8_t *frame,
		       size_t len, double t_sent, double t_now, float *model_out,
		       struct fleet_version *row);

/* The row of device@version (-ENOENT when absent) or of the device's latest version. */
int fleet_store_get(struct fleet_store *self, const char *device, int64_t version,
		    struct fleet_version *out);
int fleet_store_latest(struct fleet_store *self, const char *device, struct fleet_version *out);

/* Rebuild device@version into out (n floats): walk parents back to a full frame or the base,
 * then decode forward, checking each step's hash. *chain gets the frames applied. Returns 0,
 * -ENOENT (no such version), -EBADMSG (a frame or hash does not check out, a broken chain),
 * -ENOMEM. */
int fleet_store_rebuild(struct fleet_store *self, const char *device, int64_t version, float *out,
			uint32_t *chain);

/* The stored payload of device@version (a fleet_codec frame against its parent, or a full one)
 * into *out (malloc'd, the caller frees) and *len; *row gets its row. Returns 0, -ENOENT, or
 * -EBADMSG (a row or blob that does not check out). */
int fleet_store_payload(struct fleet_store *self, const char *device, int64_t version,
			struct fleet_version *row, uint8_t **out, size_t *len);

/* Call fn for every stored version row, ordered by device then version; stops at and returns
 * fn's first non-zero return. Returns 0 or negative errno. */
int fleet_store_each(struct fleet_store *self,
		     int (*fn)(const struct fleet_version *v, void *arg), void *arg);

/* True when name is a valid device name (1..63 bytes of [A-Za-z0-9_.-]). */
bool fleet_store_device_ok(const char *name);

#endif
