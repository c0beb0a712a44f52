/* sim/sim_loss: the loss schedule of every link direction of a simulated run whose loss changes.
 *
 * network.timeline events and network.trace rows change a direction's parameters at their
 * times; sim/sim_link needs to know, for a message's retransmissions, the loss in force at any
 * later time, not only now. This replays the changes once, in the order the drivers apply them
 * (by time; timeline events before trace rows at one instant), and keeps for each direction
 * whose loss probability changes the times and values (struct sim_link_sched). A direction whose
 * loss never changes has none, so its messages draw exactly as without schedules. Pure: no
 * clock, no I/O; the plan and the trace are borrowed and must outlive the schedules. */
#ifndef STALENET_SIM_LOSS_H
#define STALENET_SIM_LOSS_H

#include <stddef.h>

#include "orchestrator/linktrace.h"
#include "orchestrator/plan.h"
#include "sim/sim_link.h"

struct sim_loss;

/* The schedules of run's directions under its timeline and trace (may be NULL). 0 with *out
 * set, or with *out NULL when no change alters any direction's loss; -ENOMEM. */
int sim_loss_new(const struct plan_run *run, const struct linktrace *trace, struct sim_loss **out);
/* Free *p and set it to NULL; NULL and *p == NULL are fine. */
void sim_loss_destroy(struct sim_loss **p);

/* Plan node i's up (down) direction's schedule, owned by l; NULL when its loss never changes
 * (l NULL too). */
const struct sim_link_sched *sim_loss_up(const struct sim_loss *l, size_t i);
const struct sim_link_sched *sim_loss_down(const struct sim_loss *l, size_t i);
/* Bytes held (0 for NULL). */
size_t sim_loss_bytes(const struct sim_loss *l);

#endif
