/* orchestrator/selector: which nodes a `nodes:` selector of a scenario means.
 *
 * A selector is a comma-separated list of terms (commas inside [...] belong to the range):
 *   worker3            an exact node name
 *   worker[0-3,7]      a name pattern with a numeric range list (prefix[ranges]suffix)
 *   worker*, peer?     a shell-style glob (fnmatch)
 *   all                every node;  servers  nodes with role server;  workers  all other nodes
 * A name or range element that names no node, and a glob that matches none, is an error: a typo
 * in a selector must never silently shape nothing. */
#ifndef STALENET_SELECTOR_H
#define STALENET_SELECTOR_H

#include <stddef.h>
#include <stdint.h>

#include "orchestrator/scenario.h"

#define SELECTOR_MAX_RANGE 4096 /* elements one [a-b] may expand to */

/* Mark the nodes sel matches: match[i] = 1 (others are left as they are). names and roles have
 * n entries. Returns the number of distinct nodes this selector matched (>= 1), or -EINVAL with
 * a reason ("unknown node 'worker9'") in why. */
int selector_match(const char *sel, const char *const *names, const enum scenario_role *roles,
		   size_t n, uint8_t *match, char *why, size_t whylen);

#endif
