/* lib/kv: a flat "key = value" file, the node configuration handed from the orchestrator to
 * each stalenet-node process (RUN_DIR/nodes/<name>.conf).
 *
 * Keys are dotted paths (the scenario's own where one exists: train.batch, consistency.barrier);
 * values are normalised by the writer (seconds, fractions, bits per second), so a reader never
 * parses units. Lines starting with '#' and blank lines are ignored. Later keys override earlier. */
#ifndef STALENET_KV_H
#define STALENET_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct kv;

struct kv *kv_new(void);
void kv_destroy(struct kv **self);

#define KV_MAX_BYTES (16 << 20) /* a larger configuration file is refused */

/* Parse a file (through kv_parse; lib/rfile reads it: a regular file of at most KV_MAX_BYTES).
 * Returns NULL and fills err (one line, "path: what" or "path:line: what") on failure. */
struct kv *kv_load(const char *path, char *err, size_t errlen);

/* Parse len bytes of "key = value" lines at buf (need not be NUL-terminated); name stands for
 * the path in messages. A NUL byte, a line without '=' or an invalid key is an error. Returns
 * a new kv (the caller destroys it) or NULL with err filled. */
struct kv *kv_parse(const char *buf, size_t len, const char *name, char *err, size_t errlen);

/* Set key to value (both copied); replaces an existing key. Returns 0 or -ENOMEM/-EINVAL
 * (keys may not contain '=', whitespace or newlines; values may not contain newlines). */
int kv_set(struct kv *self, const char *key, const char *value);
int kv_setf(struct kv *self, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The value, or NULL when absent. The string is owned by self. */
const char *kv_get(const struct kv *self, const char *key);

/* Typed getters: return def when the key is absent; -EINVAL (and log an error naming the key)
 * when it is present but malformed, 0 otherwise. */
int kv_get_i64(const struct kv *self, const char *key, int64_t def, int64_t *out);
/* Unsigned 64-bit (seeds): the full range 0..UINT64_MAX. */
int kv_get_u64(const struct kv *self, const char *key, uint64_t def, uint64_t *out);
int kv_get_double(const struct kv *self, const char *key, double def, double *out);
int kv_get_bool(const struct kv *self, const char *key, bool def, bool *out);

size_t kv_count(const struct kv *self);
/* i-th entry in insertion order (for dumping). */
void kv_entry(const struct kv *self, size_t i, const char **key, const char **value);

/* Write all entries, one per line, to f. Returns 0 or -errno. */
int kv_write(const struct kv *self, FILE *f);
/* Write atomically to path (tmp file + rename). Returns 0 or -errno. */
int kv_save(const struct kv *self, const char *path);

#endif
