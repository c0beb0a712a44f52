/* orchestrator/scensweep: the sweep section of a scenario (docs/scenario.md `sweep`)
 * read into struct scenario's sweep. */
#ifndef STALENET_SCENSWEEP_H
#define STALENET_SCENSWEEP_H

#include "orchestrator/yamltree.h"

struct scenval;

/* Read the sweep mapping m into cv->sc->sweep (axes in file order, zip groups, repeat).
 * Returns 0 or -EINVAL with the message in cv->err. */
int scensweep_parse(struct scenval *cv, const struct yamltree_node *m);

#endif
