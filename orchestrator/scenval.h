/* orchestrator/scenval: the state of one conversion of a scenario tree (orchestrator/yamltree)
 * into a struct scenario, and the readers that take typed, range-checked values out of the tree.
 *
 * Every function that can fail writes one "FILE:LINE:COL: error: ..." line into the conversion's
 * err (at the value's position, or naming its --set origin) and returns -EINVAL; -ENOMEM is
 * reported as "out of memory" and returned as -EINVAL too. Units are those of orchestrator/units. */
#ifndef STALENET_SCENVAL_H
#define STALENET_SCENVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "orchestrator/yamltree.h"

struct scenario;

/* One conversion. The section parsers fill sc and remember where some values were written, so
 * that the checks across sections (orchestrator/scenario) report at the line that matters. */
struct scenval {
	const char *file;               /* name in messages */
	char *err;                      /* the message, errlen bytes (may be NULL) */
	size_t errlen;
	struct scenario *sc;            /* being filled */
	const char *basedir;            /* relative paths are resolved against it; NULL = as written */
	bool check_sweep;               /* expand-check the sweep (off for a run's own document) */
	const struct yamltree_node *workers_node, *nodes_node, *subnet_node, *sizes_node;
	const struct yamltree_node *sample_node, *backup_node;
	const struct yamltree_node *barrier_node, *combine_node, *zipf_node, *draw_node;
};

/* A NULL-terminated key list literal: SCENVAL_KEYS("time", "steps"). */
#define SCENVAL_KEYS(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* Report an error at node at (NULL: line 1) or at a mapping key. Return -EINVAL. */
int scenval_fail(struct scenval *cv, const struct yamltree_node *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int scenval_fail_key(struct scenval *cv, const struct yamltree_entry *e, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Every key of map must be in allowed (NULL-terminated); else an error naming where ("network")
 * and the closest allowed key. Returns 0 or -EINVAL. */
int scenval_check_keys(struct scenval *cv, const struct yamltree_node *map, const char *const *allowed,
		       const char *where);
/* The node must be of kind; what names it in the message. Returns 0 or -EINVAL. */
int scenval_want_kind(struct scenval *cv, const struct yamltree_node *n, enum yamltree_kind kind,
		      const char *what);
/* The text of a non-empty scalar, or NULL after reporting. */
const char *scenval_scalar(struct scenval *cv, const struct yamltree_node *n, const char *what);

/* Typed readers: each stores the value in *out only when it returns 0. */
/* a whole number min..max, with an optional k/m/g suffix */
int scenval_count(struct scenval *cv, const struct yamltree_node *n, uint64_t min, uint64_t max,
		  const char *what, uint64_t *out);
int scenval_u32(struct scenval *cv, const struct yamltree_node *n, uint32_t min, uint32_t max,
		const char *what, uint32_t *out);
/* a real number; min/max inclusive unless the *_open flag says otherwise */
int scenval_real(struct scenval *cv, const struct yamltree_node *n, double min, bool min_open, double max,
		 bool max_open, const char *what, double *out);
/* a fraction in [0, 1], written as 0.85 or 85% */
int scenval_fraction(struct scenval *cv, const struct yamltree_node *n, const char *what, double *out);
/* a probability in parts per million */
int scenval_prob(struct scenval *cv, const struct yamltree_node *n, const char *what, uint32_t *ppm);
/* a time in microseconds, at most max_us */
int scenval_time(struct scenval *cv, const struct yamltree_node *n, uint64_t max_us, const char *what,
		 uint64_t *us);
/* a rate in bits per second, at most LIMITS_MAX_RATE_BPS */
int scenval_rate(struct scenval *cv, const struct yamltree_node *n, const char *what, uint64_t *bps);
/* the index of the scalar in names (NULL-terminated) */
int scenval_enum(struct scenval *cv, const struct yamltree_node *n, const char *const *names, const char *what,
		 int *out);
int scenval_bool(struct scenval *cv, const struct yamltree_node *n, const char *what, bool *out);
/* a copy of the text (at most 4096 characters); frees the previous *out */
int scenval_string(struct scenval *cv, const struct yamltree_node *n, const char *what, char **out);
/* as scenval_string, a relative path prefixed with cv->basedir */
int scenval_path(struct scenval *cv, const struct yamltree_node *n, const char *what, char **out);

#endif
