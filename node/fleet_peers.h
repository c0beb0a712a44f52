/* node/fleet_peers: a device of topology fleet keeping its peers' versions (fleet.registry
 * peers, docs/fleet.md).
 *
 * Device i sends each version it makes to the next fleet.peers devices on the ring (i+1 ..
 * i+k), over its own link, and keeps the versions of the k devices before it in its own store
 * (RUN_DIR/nodes/<device>.peers.sqlite, the registry's node/fleet_store format: WAL, verified
 * by decoding, snapshots every fleet.snapshot_every). A peer that cannot take a version (it
 * missed the one before) says so, and the next version goes to it as a full frame. For a
 * registry that lost its store, the device answers summary requests and pulls from that
 * store.
 *
 * Part of the device (node/fleet_device): it reads the device's state and owns d->pe. */
#ifndef STALENET_FLEET_PEERS_H
#define STALENET_FLEET_PEERS_H

#include <stddef.h>
#include <stdint.h>

#include "node/fleet_proto.h"

struct kv;
struct fleet_device;
struct fleet_peers;

/* Open d->pe (owned by d; freed with fleet_peers_close also after a failure): the store of the
 * held versions, the ROUTER at port.data + 1 (+ index when devices share an address) and a
 * DEALER to each of the fleet.peers devices after d on the ring. Needs d->fc, d->n, d->wk (its
 * model before training is the base unless fleet.base file) and d->ctx. Returns 0 or negative
 * errno (logged). */
int fleet_peers_open(struct fleet_device *d, const struct kv *cfg);
/* Close *p (n devices in the run) and set it to NULL; NULL and *p == NULL are fine. */
void fleet_peers_close(struct fleet_peers **p, uint32_t n);
/* The version d just queued (frame against the one before; params its model): to every peer,
 * full to a peer that said it missed one. */
void fleet_peers_push(struct fleet_device *d, const uint8_t *frame, size_t len,
		      const float *params);
/* Take what the peers sent (stored when it continues a chain) and their answers; never waits. */
void fleet_peers_poll(struct fleet_device *d);
/* The registry's summary request or pull h: answered on d->sock. */
void fleet_peers_serve(struct fleet_device *d, const struct fleet_msg *h);
/* Log pe's totals for device `name` (at the end of its run). */
void fleet_peers_log(const struct fleet_peers *pe, const char *name);

#endif
