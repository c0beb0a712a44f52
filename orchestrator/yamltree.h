/* orchestrator/yamltree: one YAML document as a tree of scalars, mappings and sequences that
 * remembers where each value and key was written.
 *
 * Only the subset a configuration language needs is accepted; everything else is an error with
 * its position rather than a surprise: one document, string keys, no duplicate keys, no anchors,
 * aliases or tags (so no billion-laughs expansion), valid UTF-8 without control characters, at most
 * YAMLTREE_MAX_BYTES of input and YAMLTREE_MAX_DEPTH levels of nesting. Scalars stay text; their
 * meaning (number, time, enum) is decided by the reader that knows the key. */
#ifndef STALENET_YAMLTREE_H
#define STALENET_YAMLTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define YAMLTREE_MAX_BYTES (10u << 20)
#define YAMLTREE_MAX_DEPTH 64

enum yamltree_kind { YAMLTREE_SCALAR = 0, YAMLTREE_MAP, YAMLTREE_SEQ };

struct yamltree_node;

/* A mapping entry (key and where it was written) or a sequence element (key NULL). */
struct yamltree_entry {
	char *key;
	uint32_t line, col;
	struct yamltree_node *value;
};

struct yamltree_node {
	enum yamltree_kind kind;
	uint32_t line, col;     /* 1-based; 0 when the value did not come from a file */
	char *origin;           /* NULL = from the file; else what to name instead ("--set a.b=1") */
	char *scalar;           /* YAMLTREE_SCALAR: the text (never NULL) */
	bool plain;             /* scalar written without quotes */
	struct yamltree_entry *items;
	size_t n, cap;
};

/* Parse buf (len bytes, need not be NUL-terminated). want_map: the top level must be a mapping.
 * Returns the root (free with yamltree_free) or NULL with "NAME:LINE:COL: error: ..." in err. */
struct yamltree_node *yamltree_parse(const char *buf, size_t len, const char *name, bool want_map,
				     char *err, size_t errlen);

void yamltree_free(struct yamltree_node *node);
struct yamltree_node *yamltree_clone(const struct yamltree_node *node);

/* The value of key in a mapping (NULL if absent or node is not a mapping). */
struct yamltree_node *yamltree_get(const struct yamltree_node *map, const char *key);
/* The entry of key in a mapping (NULL if absent). */
const struct yamltree_entry *yamltree_entry_of(const struct yamltree_node *map, const char *key);

/* A plain null scalar: empty, "~" or "null" written without quotes. */
bool yamltree_is_null(const struct yamltree_node *node);

/* Set origin (copied) on node and everything below it. Returns 0 or -ENOMEM. */
int yamltree_set_origin(struct yamltree_node *node, const char *origin);

/* Replace (or create) the value at a dotted path under root, e.g. "network.links.0.delay":
 * missing mapping keys are created (written at key_line:key_col, 0 = nowhere in the file), sequence
 * elements are addressed by index. On success takes
 * ownership of value and returns 0; else returns -EINVAL with a reason in why (static) and the
 * caller keeps value. */
int yamltree_set_path(struct yamltree_node *root, const char *path, struct yamltree_node *value,
		      uint32_t key_line, uint32_t key_col, const char **why);

/* Compact one-line rendering ("ssp", "[128,64]", "{a:1}") into buf; returns the length needed. */
int yamltree_flow(const struct yamltree_node *node, char *buf, size_t len);

/* Write the tree as a YAML document to out. Returns 0 or -EIO / -ENOMEM. */
int yamltree_emit(const struct yamltree_node *root, FILE *out);

/* Kind name for messages: "a scalar", "a mapping", "a list". */
const char *yamltree_kind_name(enum yamltree_kind kind);

#endif
