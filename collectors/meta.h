/* collectors/meta: the few fields of a run's meta.json that summaries and plots need.
 *
 * meta.json is written by the orchestrator (docs/traces.md lists its keys). This is a small,
 * strict JSON reader for it, not a general JSON library: it parses the whole document (so a
 * malformed file is an error, not a silent partial read), keeps the top-level scalars it knows
 * and the flat "sweep" object, and skips everything else. */
#ifndef STALENET_META_H
#define STALENET_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define META_MAX_SWEEP 16
#define META_KEY_LEN 96
#define META_VAL_LEN 96

struct run_meta {
	char run_id[128];
	char backend[32];
	char status[16];     /* "complete", "interrupted", "failed", "running" ("" when absent) */
	uint64_t seed;
	int repeat;
	bool has_target;     /* "target" present and a number */
	double target;       /* target test accuracy (fraction) for time-to-target */
	size_t nsweep;
	/* sweep point: key paths in file order and values as text (strings unquoted, numbers and
	 * booleans as written) */
	char sweep_key[META_MAX_SWEEP][META_KEY_LEN];
	char sweep_val[META_MAX_SWEEP][META_VAL_LEN];
};

/* Parse the JSON text in json (len bytes). Requires run_id; seed, backend, repeat default to
 * 0, "", 0. Returns 0, or -EINVAL with a message ("offset N: what") in err. */
int meta_parse(const char *json, size_t len, struct run_meta *out, char *err, size_t errlen);

/* Read RUN_DIR/meta.json. When it has no "target", the top-level "target:" line of
 * RUN_DIR/scenario.yaml is used if there is one. Returns 0 or -errno / -EINVAL with err filled. */
int meta_load_dir(const char *run_dir, struct run_meta *out, char *err, size_t errlen);

/* Value of sweep key, or NULL. */
const char *meta_sweep_value(const struct run_meta *m, const char *key);

/* "key=value, key=value" label of the sweep point into buf ("" when no sweep keys). */
const char *meta_sweep_label(const struct run_meta *m, char *buf, size_t buflen);

#endif
