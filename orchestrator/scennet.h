/* orchestrator/scennet: the network section of a scenario (docs/scenario.md `network`) read into
 * struct scenario's network. */
#ifndef STALENET_SCENNET_H
#define STALENET_SCENNET_H

#include "orchestrator/yamltree.h"

struct scenval;

/* Read the network mapping m into cv->sc->network (defaults already set by the caller) and
 * remember where the subnet was written. Returns 0 or -EINVAL with the message in cv->err. */
int scennet_parse(struct scenval *cv, const struct yamltree_node *m);

#endif
