/* node/engine_fleet: topology fleet, the registry and its devices (docs/fleet.md).
 *
 * The registry deploys a base model to every device and keeps every version each device sends
 * in its store (node/fleet_store, RUN_DIR/fleet.sqlite). It answers a version only after the
 * store committed it, so an acknowledged version survives any crash; it writes RUN_DIR/fleet.csv
 * (one row per sync it received, docs/traces.md).
 *
 * A device fine-tunes its copy on its own partition (the engines' data, model and optimiser) and
 * every fleet.sync (steps or seconds) makes a version: a node/fleet_codec frame against its
 * previous version (full, delta or sparse). The version goes into its durable queue
 * (node/fleet_queue, RUN_DIR/nodes/<device>.fleet/) before it is sent; versions stay queued
 * until acknowledged, and are sent again after a reconnect, a silence, a rejection or a
 * restart. Versions form one chain per device: the registry takes version v only on top of v-1
 * and answers anything else with the version to continue from.
 *
 * With fleet.registry peers, each device also sends its versions to the next fleet.peers
 * devices on the ring, over its own link, and keeps theirs in RUN_DIR/nodes/<device>.peers.sqlite;
 * a registry that starts without its store rebuilds it from those copies (node/fleet_sync,
 * RUN_DIR/fleet_repair.csv). The peer endpoint of device i is port.data + 1 (+ i when devices
 * share an address).
 *
 * Messages: node/fleet_proto over ZeroMQ (ROUTER on the registry at servers.addrs[0]:port.data,
 * a DEALER per device), on the emulated links. */
#ifndef STALENET_ENGINE_FLEET_H
#define STALENET_ENGINE_FLEET_H

struct kv;

/* Run the registry (node.role registry) or one device (node.role device) until the run stops.
 * Returns 0 or negative errno (logged). */
int engine_fleet_registry_run(const struct kv *cfg);
int engine_fleet_device_run(const struct kv *cfg);

#endif
