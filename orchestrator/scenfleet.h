/* orchestrator/scenfleet: the fleet section of a scenario (docs/scenario.md `fleet`)
 * read into struct scenario's fleet. */
#ifndef STALENET_SCENFLEET_H
#define STALENET_SCENFLEET_H

#include "orchestrator/yamltree.h"

struct scenval;

/* Read the fleet mapping m into cv->sc->fleet (defaults already set by the caller; the topology
 * must already be read). Returns 0 or -EINVAL with the message in cv->err. */
int scenfleet_parse(struct scenval *cv, const struct yamltree_node *m);

/* After the nodes are known: with fleet.registry peers, 1 <= fleet.peers <= devices - 1 (a
 * default above that is lowered to it). root is the document. Returns 0 or -EINVAL with the
 * message in cv->err. */
int scenfleet_check_peers(struct scenval *cv, const struct yamltree_node *root);

#endif
