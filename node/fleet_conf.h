/* node/fleet_conf: what the registry and the devices of topology fleet read from their node
 * configuration (docs/fleet.md, docs/node-config.md), and the few rules both roles share: the
 * run clock, the ring of peer copies, the drain after a stop. */
#ifndef STALENET_FLEET_CONF_H
#define STALENET_FLEET_CONF_H

#include <stdbool.h>
#include <stdint.h>

#include "node/engine_common.h"
#include "node/fleet_codec.h"

struct kv;

#define FLEET_CONF_DRAIN_S 5.0 /* after stop: time to deliver (device) / take (registry) */

struct fleet_conf {
	struct engine_conf ec;
	enum fleet_strategy strategy; /* auto: FLEET_REPLAY with auto_choose */
	bool auto_choose;
	int64_t sync_steps;
	double sync_s;
	int64_t snapshot_every;
	int64_t sparse_k;
	double sparse_fraction;
	const char *base, *base_file;
	int64_t base_steps;           /* base trained: SGD steps on the registry before deploying */
	char registry_ep[128];
	bool peers;        /* fleet.registry peers: devices keep their peers' versions */
	int64_t npeers;    /* fleet.peers: how many each device sends its versions to */
};

/* Fill *fc from cfg (engine_conf_read, then fleet.*, servers.addrs, port.data). Returns 0 or
 * -EINVAL (logged); on success the caller frees fc->ec with engine_conf_free. */
int fleet_conf_read(const struct kv *cfg, struct fleet_conf *fc);
/* Seconds since the run's origin (c->origin_ns) now. */
double fleet_conf_run_s(const struct engine_conf *c);
/* fleet.registry peers: whether device holder keeps device origin's versions (holder is one of
 * the k devices after origin on the ring of n: device i pushes to i+1 .. i+k). */
bool fleet_conf_holds_for(uint32_t n, uint32_t k, uint32_t holder, uint32_t origin);

#endif
