/* orchestrator/scenres: the resources section of a scenario (docs/scenario.md
 * `resources`) read into struct scenario's resources. */
#ifndef STALENET_SCENRES_H
#define STALENET_SCENRES_H

#include "orchestrator/yamltree.h"

struct scenval;

/* Read the resources list m into cv->sc->resources (n_resources counts the entries filled so
 * far). Returns 0 or -EINVAL with the message in cv->err. */
int scenres_parse(struct scenval *cv, const struct yamltree_node *m);

#endif
