/* node/fleet_device: a device of topology fleet (node.role device, docs/fleet.md).
 *
 * A device fine-tunes its copy on its own partition (the engines' data, model and optimiser) and
 * every fleet.sync (steps or seconds) makes a version: a node/fleet_codec frame against its
 * previous version (full, delta, sparse, or replay: the minibatches instead of the weights;
 * auto chooses by node/fleet_cost). The version goes into its durable queue (node/fleet_queue,
 * RUN_DIR/nodes/<device>.fleet/) before it is sent; versions stay queued until acknowledged,
 * and are sent again after a reconnect, a silence, a rejection or a restart. With
 * fleet.registry peers, node/fleet_peers also keeps the versions of the devices before it on
 * the ring.
 *
 * A single-threaded loop around one DEALER to the registry (routing id "d<index>"); it trains
 * between polls, so an acknowledgement waits at most one minibatch (and its straggler delay)
 * to be read. The device's state is public to its peers part (node/fleet_peers) only. */
#ifndef STALENET_FLEET_DEVICE_H
#define STALENET_FLEET_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/fleet_conf.h"
#include "node/fleet_cost.h"
#include "node/fleet_drift.h"

struct kv;
struct ctl_client;
struct engine_work;
struct fleet_peers;
struct fleet_queue;

struct fleet_device {
	struct fleet_conf fc;
	struct engine_work *wk;
	struct fleet_queue *q;
	float *last, *residual; /* the model of the last version made; the sparse residual */
	size_t n, k;
	void *ctx, *sock, *mon;
	uint64_t handshakes;
	int64_t next_send;      /* next version to send (pending versions are first..version) */
	int64_t acked;          /* highest version the registry acknowledged */
	double last_heard_s, resend_s;
	double *t_made;         /* by version: run seconds it was made, seconds encoding it */
	double *enc_s;
	uint8_t **rframe;       /* by version: its replay frame (strategy replay; memory only) */
	size_t *rlen;
	double *send_t;         /* by version: run seconds of its last send, and its bytes */
	size_t *send_b;
	struct fleet_cost cost; /* auto: goodput and step time */
	struct fleet_drift drift; /* fleet.drift.<index>: classes joining the share */
	uint32_t share0;        /* share size at the start: what the registry holds of it */
	uint64_t sent_replay, sent_weights;
	uint64_t replay_samples; /* raw samples carried by replay frames (positions past share0) */
	uint64_t sent_full;      /* auto: versions whose weights went as a full frame */
	uint32_t *bsizes, *bidx; /* the minibatches since the last version (strategy replay) */
	size_t nb_steps, nb_idx, cap_steps, cap_idx;
	uint64_t replay_failed;
	size_t t_cap;
	struct ctl_client *ctl;
	uint64_t bad, bytes_tx, bytes_rx, resent, rejected;
	bool bye;
	struct fleet_peers *pe;   /* fleet.registry peers (NULL: central) */
};

/* Run one device until the run stops and its queue drained (or FLEET_CONF_DRAIN_S passed).
 * Returns 0 or negative errno (logged). */
int fleet_device_run(const struct kv *cfg);

#endif
