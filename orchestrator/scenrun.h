/* orchestrator/scenrun: the stop, linkcheck and eval sections of a scenario
 * (docs/scenario.md) read into struct scenario. */
#ifndef STALENET_SCENRUN_H
#define STALENET_SCENRUN_H

#include "orchestrator/yamltree.h"

struct scenval;

/* Each reads its node m (linkcheck: a boolean or a mapping) into cv->sc (defaults already set
 * by the caller). Each returns 0 or -EINVAL with the message in cv->err. */
int scenrun_stop(struct scenval *cv, const struct yamltree_node *m);
int scenrun_linkcheck(struct scenval *cv, const struct yamltree_node *m);
int scenrun_eval(struct scenval *cv, const struct yamltree_node *m);

#endif
