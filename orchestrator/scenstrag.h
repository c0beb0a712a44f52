/* orchestrator/scenstrag: the stragglers section of a scenario (docs/scenario.md
 * `stragglers`) read into struct scenario's stragglers. */
#ifndef STALENET_SCENSTRAG_H
#define STALENET_SCENSTRAG_H

#include "orchestrator/yamltree.h"

struct scenval;

/* Read the stragglers list m into cv->sc->stragglers (n_stragglers counts the entries filled so
 * far, so the caller frees them on error too). Returns 0 or -EINVAL with the message in cv->err. */
int scenstrag_parse(struct scenval *cv, const struct yamltree_node *m);

#endif
