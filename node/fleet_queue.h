/* node/fleet_queue: a fleet device's durable state: its current model (the one its last version
 * holds), the sparse residual, the last version number, and the versions the registry has not
 * acknowledged yet, kept in a directory of the run (RUN_DIR/nodes/<device>.fleet/).
 *
 * Files: `state` (magic, n, version, model, residual, a checksum) replaced atomically (write a
 * temporary file, fsync, rename) and `q-<version>.frame`, one node/fleet_codec frame per
 * unacknowledged version, written the same way BEFORE the state that names its version. A
 * device killed at any instant therefore restarts with a state whose every version up to its
 * own is either acknowledged or still queued: a frame newer than the state is an unfinished
 * push and is removed; a frame the registry acknowledged but that was not removed yet is sent
 * again and answered as a duplicate. Everything read back is checked (sizes, checksums, frame
 * headers, file names); a file that fails is not used. */
#ifndef STALENET_FLEET_QUEUE_H
#define STALENET_FLEET_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#define FLEET_QUEUE_MAX 65536 /* versions kept unacknowledged, at most */

struct fleet_queue;

/* Open (creating) dir for a model of n floats and load what it holds. Returns the queue or
 * NULL with a message in err. */
struct fleet_queue *fleet_queue_open(const char *dir, uint32_t n, char *err, size_t errlen);
void fleet_queue_close(struct fleet_queue **self);

/* The last version made (0: none yet, the device starts from what the registry deploys). When
 * it is > 0, model and residual (n floats each, may be NULL) get the state's vectors. */
int64_t fleet_queue_version(const struct fleet_queue *self);
void fleet_queue_state(const struct fleet_queue *self, float *model, float *residual);

/* Record version (= fleet_queue_version + 1) made as frame (len bytes; copied) with the
 * device's model and residual after it. Durable when it returns 0; negative errno otherwise
 * (-ENOBUFS when FLEET_QUEUE_MAX versions are pending). */
int fleet_queue_push(struct fleet_queue *self, const uint8_t *frame, size_t len, const float *model,
		     const float *residual);

/* Start over at version (what the registry deployed) with model and a zero residual: every
 * pending version is dropped. Returns 0 or negative errno. */
int fleet_queue_reset(struct fleet_queue *self, int64_t version, const float *model);

/* The registry holds every version <= version: drop them. Returns the number dropped. */
size_t fleet_queue_ack(struct fleet_queue *self, int64_t version);

/* Pending versions: count, and the frame of one (0 and *frame = NULL when not pending; the
 * bytes stay valid until the version is acknowledged or reset). The lowest pending version is
 * fleet_queue_first (0 when none). */
size_t fleet_queue_pending(const struct fleet_queue *self);
int64_t fleet_queue_first(const struct fleet_queue *self);
size_t fleet_queue_frame(const struct fleet_queue *self, int64_t version, const uint8_t **frame);

#endif
