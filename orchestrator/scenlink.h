/* orchestrator/scenlink: link parameter layers of the scenario language (network.default, a
 * network.links or network.timeline entry) read from the tree into struct link_params, with
 * tc-netem's cross-field rules checked where the field at fault was written. */
#ifndef STALENET_SCENLINK_H
#define STALENET_SCENLINK_H

#include <stdint.h>

#include "lib/link_params.h"
#include "orchestrator/yamltree.h"

struct scenval;

/* The link keys of a layer (bare or under up:/down:), for key lists. */
#define SCENLINK_KEYS "delay", "jitter", "delay_distribution", "delay_correlation", "loss", "loss_correlation", \
	"loss_model", "gemodel", "duplicate", "duplicate_correlation", "reorder", "gap", \
	"reorder_correlation", "corrupt", "corrupt_correlation", "rate", "queue_limit"

#define SCENLINK_FIELDS 16              /* LINK_F_* bits */

/* Where each link field was written (NULL = not in this layer); index = bit of LINK_F_*. */
struct scenlink_pos {
	const struct yamltree_node *f[SCENLINK_FIELDS];
};

/* Copy the fields src gave explicitly (src->set) onto dst, and their positions when dpos and
 * spos are both given. */
void scenlink_merge(struct link_params *dst, const struct link_params *src, struct scenlink_pos *dpos,
		    const struct scenlink_pos *spos);

/* The first of tc-netem's cross-field rules p breaks, as a static message; NULL when they hold. */
const char *scenlink_rule(const struct link_params *p);

/* The rules on effective parameters p, reported at the field's position in pos (may be NULL) or
 * at fallback; dir ("up", "down" or NULL) prefixes the message. Returns 0 or -EINVAL. */
int scenlink_check(struct scenval *cv, const struct link_params *p, const struct scenlink_pos *pos,
		   const struct yamltree_node *fallback, const char *dir);

/* Read the link mapping map (where names it): bare keys apply to both directions, up:/down: to
 * one; the keys nodes and at are the caller's and skipped. Every key must be in allowed
 * (NULL-terminated). *up, *down are overwritten; upos, dpos receive the positions.
 * Returns 0 or -EINVAL. */
int scenlink_layer(struct scenval *cv, const struct yamltree_node *map, const char *const *allowed,
		   const char *where, struct link_params *up, struct link_params *down,
		   struct scenlink_pos *upos, struct scenlink_pos *dpos);

#endif
