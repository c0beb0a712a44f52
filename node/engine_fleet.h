/* node/engine_fleet: topology fleet, the registry and its devices (docs/fleet.md); the node
 * program's entry to its two roles.
 *
 * The layers, each a module of its own:
 *   node/fleet_conf      the fleet.* node keys both roles read, the run clock, the peers' ring
 *   node/fleet_net       a node/fleet_proto message over a ZeroMQ socket
 *   node/fleet_registry  the registry: deploys the base, takes each device's chain of versions
 *                        into its store (ack after commit), writes fleet.csv
 *   node/fleet_base      the base model it deploys (init, trained, file)
 *   node/fleet_repair    the registry rebuilding a lost store from the devices' copies
 *   node/fleet_device    a device: fine-tunes, makes versions, queues and sends them
 *   node/fleet_peers     a device keeping its peers' versions (fleet.registry peers)
 * and the pure or file-only layers under them: fleet_codec, fleet_proto, fleet_store,
 * fleet_queue, fleet_sync, fleet_cost, fleet_drift.
 *
 * Messages: node/fleet_proto over ZeroMQ (ROUTER on the registry at servers.addrs[0]:port.data,
 * a DEALER per device), on the emulated links; a device's peer endpoint is port.data + 1
 * (+ its index when devices share an address). */
#ifndef STALENET_ENGINE_FLEET_H
#define STALENET_ENGINE_FLEET_H

struct kv;

/* Run the registry (node.role registry) or one device (node.role device) until the run stops.
 * Returns 0 or negative errno (logged). */
int engine_fleet_registry_run(const struct kv *cfg);
int engine_fleet_device_run(const struct kv *cfg);

#endif
