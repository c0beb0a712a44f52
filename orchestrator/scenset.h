/* orchestrator/scenset: `--set key.path=value` overrides applied to a scenario tree
 * (orchestrator/yamltree) before conversion, and their conflicts with the tree's sweep. */
#ifndef STALENET_SCENSET_H
#define STALENET_SCENSET_H

#include <stddef.h>

#include "orchestrator/yamltree.h"

/* Apply one `key.path=value` (list elements by index; `sweep.<key>=[...]` sets one sweep key,
 * dots included) to root. Returns 0, or -EINVAL / -ENOMEM with "--set ...: error: ..." in err. */
int scenset_apply(struct yamltree_node *root, const char *assignment, char *err, size_t errlen);

/* Refuse a set of sets (already applied) that changes a path the sweep of root also sets (equal,
 * parent or child), naming the sweep key (FILE:LINE:COL, file being the scenario's name).
 * Sets of sweep.* are never in conflict. Returns 0 or -EINVAL with the message in err. */
int scenset_check_conflicts(const struct yamltree_node *root, const char *const *sets, size_t n_sets,
			    const char *file, char *err, size_t errlen);

#endif
