/* node/fleet_registry: the registry of topology fleet (node.role registry, docs/fleet.md).
 *
 * It deploys the base model (node/fleet_base) to every device and keeps every version each
 * device sends in its store (node/fleet_store, RUN_DIR/fleet.sqlite). It answers a version only
 * after the store committed it, so an acknowledged version survives any crash; it writes
 * RUN_DIR/fleet.csv (one row per sync it received, docs/traces.md). Versions form one chain per
 * device: it takes version v only on top of v-1 and answers anything else with the version to
 * continue from; a replay frame is recomputed on the device's share and stored as the delta it
 * yields. With fleet.registry peers, node/fleet_repair rebuilds a lost store from the devices'
 * copies first.
 *
 * A single-threaded loop around one ROUTER (servers.addrs[0]:port.data; a device's routing id
 * is "d<index>"). The registry's state is public to its repair part (node/fleet_repair) only. */
#ifndef STALENET_FLEET_REGISTRY_H
#define STALENET_FLEET_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/fleet_conf.h"
#include "node/fleet_proto.h"

struct kv;
struct csv_writer;
struct ctl_client;
struct engine_work;
struct fleet_repair;
struct fleet_store;

/* What the registry knows of one device. */
struct fleet_reg_dev {
	struct engine_work *wk; /* the device's share and model, to recompute replay frames */
	bool loaded, bye;
	int64_t latest;      /* last stored version (0 = the base) */
	uint32_t chain;      /* its chain_len */
	float *model;        /* its model */
	uint8_t id[64];
	size_t idlen;
};

struct fleet_registry {
	struct fleet_conf fc;
	struct fleet_store *store;
	struct fleet_reg_dev *dev;
	float *base, *scratch;
	size_t n;
	void *ctx, *sock;
	struct csv_writer *trace;
	struct ctl_client *ctl;
	uint64_t bad, stored, dups, rejected, bytes_rx, bytes_tx, replayed, replay_failed;
	const struct kv *cfg;
	struct fleet_repair *rep;  /* fleet.registry peers: the rebuild from the devices */
};

/* Run the registry until the run stops (every device said bye, or FLEET_CONF_DRAIN_S after the
 * control plane's stop). Returns 0 or negative errno (logged). */
int fleet_registry_run(const struct kv *cfg);
/* Device i's latest stored version and model into r->dev[i], from the store on first use (a
 * restarted registry rebuilds it). Returns 0 or negative errno. */
int fleet_registry_dev_load(struct fleet_registry *r, uint32_t i);
/* Send h (and its payload) to device i, if it ever connected; a failure is logged. */
void fleet_registry_reply(struct fleet_registry *r, uint32_t i, const struct fleet_msg *h,
			  const void *payload);
/* Acknowledge version `version` of device i with status st (the parent field carries the
 * device's latest stored version). */
void fleet_registry_ack(struct fleet_registry *r, uint32_t i, int64_t version,
			enum fleet_ack_status st);

#endif
