/* collectors/meta: the few fields of a run's meta.json that summaries and plots need.
 *
 * meta.json is written by the orchestrator (docs/traces.md lists its keys) and read here with
 * jansson: the whole document is parsed (so a malformed file is an error, not a silent partial
 * read), the top-level members it knows are type-checked and kept with the flat "sweep" object,
 * and everything else is skipped. Input is bounded (META_MAX_BYTES, META_MAX_DEPTH). */
#ifndef STALENET_META_H
#define STALENET_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define META_MAX_SWEEP 16
#define META_KEY_LEN 96
#define META_VAL_LEN 96
#define META_MAX_BYTES (1 << 20) /* a larger meta.json is refused */
#define META_MAX_DEPTH 32        /* nesting of objects and arrays */
#define META_SCENARIO_MAX_BYTES (4 << 20) /* a larger scenario.yaml is refused */

struct run_meta {
	char run_id[256];   /* as long as a plan run id (PLAN_RUN_ID_MAX) */
	char backend[32];
	char status[16];     /* "complete", "interrupted", "failed", "running" ("" when absent) */
	char mode[16];       /* "simulation"; "" when absent (an emulated run writes none) */
	uint64_t seed;
	int repeat;
	bool has_target;     /* "target" present and a number */
	double target;       /* target test accuracy (fraction) for time-to-target */
	/* "host_guard" (orchestrator/hostload): fractions NAN when null or absent */
	bool has_guard;
	double runq_wait_mean, runq_wait_max, host_cpu_mean, host_cpu_max;
	bool saturated;
	size_t nsweep;
	/* sweep point: key paths in file order and values as text (strings unquoted, numbers in
	 * their shortest form (%.15g), booleans as written, lists and objects as compact JSON) */
	char sweep_key[META_MAX_SWEEP][META_KEY_LEN];
	char sweep_val[META_MAX_SWEEP][META_VAL_LEN];
};

/* Parse the JSON text in json (len bytes, need not be NUL-terminated). Requires run_id (a
 * string); seed, backend, repeat default to 0, "", 0. A known key of the wrong type is an
 * error. Returns 0, or -EINVAL / -ENOMEM with a message ("offset N: what" or "\"key\": what")
 * in err; *out is zeroed on failure. */
int meta_parse(const char *json, size_t len, struct run_meta *out, char *err, size_t errlen);

/* Read RUN_DIR/meta.json. When it has no "target", the top-level "target:" line of
 * RUN_DIR/scenario.yaml is used if there is one. Either file must be (or link to) a regular
 * file within its cap (lib/rfile: a FIFO or device is refused without blocking). Returns 0 or
 * -errno / -EINVAL with err filled ("path: what"). */
int meta_load_dir(const char *run_dir, struct run_meta *out, char *err, size_t errlen);

/* Value of sweep key, or NULL. */
const char *meta_sweep_value(const struct run_meta *m, const char *key);

/* "key=value, key=value" label of the sweep point into buf ("" when no sweep keys). */
const char *meta_sweep_label(const struct run_meta *m, char *buf, size_t buflen);

#endif
