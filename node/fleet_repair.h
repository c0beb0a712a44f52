/* node/fleet_repair: a registry of topology fleet rebuilding its store from the devices' copies
 * of each other's versions (fleet.registry peers, docs/fleet.md; RUN_DIR/fleet_repair.csv).
 *
 * On every start the registry asks each device, on its first message, for a summary of the
 * versions it holds of its peers (node/fleet_sync), pulls what its own store lacks, lowest
 * version of a device first, from whichever holder offers it, and verifies each frame: its
 * decode (hash of the model it applies to and of the result) and the hash the summary
 * offered. A device is "repaired" once every device holding its versions has answered (or
 * FLEET_REPAIR_WAIT_S passed), nothing it lacks is still offered, and the registry holds every
 * version below the first one of the device's resent queue (it had acknowledged those); until
 * then the registry leaves the device's own syncs and hellos unanswered (it resends), so its
 * chain continues on top of what was rebuilt. One fleet_repair.csv row per device says what
 * it took.
 *
 * Part of the registry (node/fleet_registry): it reads and updates the registry's state. */
#ifndef STALENET_FLEET_REPAIR_H
#define STALENET_FLEET_REPAIR_H

#include <stdbool.h>
#include <stdint.h>

#include "node/fleet_net.h"

struct fleet_registry;
struct fleet_repair;

/* Start the rebuild of r (r->rep, owned by r; freed with fleet_repair_destroy also after a
 * failure): opens RUN_DIR/fleet_repair.csv. Returns 0 or negative errno. */
int fleet_repair_open(struct fleet_registry *r);
/* The run's clock moved (the control plane's start): the waits count from t_s (run seconds). */
void fleet_repair_restart(struct fleet_repair *rp, double t_s);
/* Free *p (n devices) and set it to NULL; NULL and *p == NULL are fine. */
void fleet_repair_destroy(struct fleet_repair **p, uint32_t n);
/* Every message from device i before the registry handles it. Returns true when the message
 * is the repair's (summary, pulled frame) or is to be left unanswered (the device's own chain
 * waits for its repair; it resends). */
bool fleet_repair_gate(struct fleet_registry *r, uint32_t i, struct fleet_net_msg *m);
/* Issue the next pulls, time out lost ones, finish repaired devices; call on every pass. */
void fleet_repair_pump(struct fleet_registry *r);

#endif
