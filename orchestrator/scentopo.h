/* orchestrator/scentopo: the topology and nodes sections of a scenario
 * (docs/scenario.md) read into struct scenario. */
#ifndef STALENET_SCENTOPO_H
#define STALENET_SCENTOPO_H

#include "orchestrator/yamltree.h"

struct scenval;

/* Read the topology mapping m into cv->sc->topology. Returns 0 or -EINVAL with the message in
 * cv->err. */
int scentopo_topology(struct scenval *cv, const struct yamltree_node *m);
/* Read the nodes list m into cv->sc->nodes (n_nodes counts the entries filled so far): unique,
 * valid names and roles. Returns 0 or -EINVAL with the message in cv->err. */
int scentopo_nodes(struct scenval *cv, const struct yamltree_node *m);

#endif
