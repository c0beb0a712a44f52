/* orchestrator/scentrain: the learning job's sections of a scenario (data, model, train,
 * consistency; docs/scenario.md) read into struct scenario. */
#ifndef STALENET_SCENTRAIN_H
#define STALENET_SCENTRAIN_H

#include "orchestrator/yamltree.h"

struct scenval;

/* Each reads its mapping m into the matching part of cv->sc (defaults already set by the
 * caller) and remembers where values the later checks report at were written.
 * Each returns 0 or -EINVAL with the message in cv->err. */
int scentrain_data(struct scenval *cv, const struct yamltree_node *m);
int scentrain_model(struct scenval *cv, const struct yamltree_node *m);
/* After scentrain_model: the model's parameter count must fit one message (LIMITS_MAX_PARAMS). */
int scentrain_model_size(struct scenval *cv, const struct yamltree_node *m);
int scentrain_train(struct scenval *cv, const struct yamltree_node *m);
int scentrain_consistency(struct scenval *cv, const struct yamltree_node *m);

#endif
