/* orchestrator/scensim: the simulation section of a scenario (docs/simulation.md)
 * read into struct scenario's simulation. */
#ifndef STALENET_SCENSIM_H
#define STALENET_SCENSIM_H

#include "orchestrator/yamltree.h"

struct scenval;

/* Read the simulation mapping m into cv->sc->simulation and mark it present (defaults already
 * set by the caller). Returns 0 or -EINVAL with the message in cv->err. */
int scensim_parse(struct scenval *cv, const struct yamltree_node *m);

#endif
