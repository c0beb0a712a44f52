/* node/fleet_peers: see fleet_peers.h. */
#include "node/fleet_peers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "lib/kv.h"
#include "lib/log.h"
#include "lib/rfile.h"
#include "node/engine_common.h"
#include "node/fleet_codec.h"
#include "node/fleet_conf.h"
#include "node/fleet_device.h"
#include "node/fleet_net.h"
#include "node/fleet_queue.h"
#include "node/fleet_store.h"
#include "node/fleet_sync.h"
#include "node/model.h"
#include "node/wire.h"

struct fleet_peers {
	struct fleet_store *store;
	void *rsock;             /* ROUTER: versions from the devices this one holds for */
	void **out;              /* DEALERs to the k devices this one sends to */
	bool *out_full;          /* the next version to that peer goes as a full frame */
	uint32_t k;
	struct {
		bool loaded;
		int64_t latest;
		uint32_t chain;
		float *model;
	} *held;                 /* per device (only those this one holds for are used) */
	float *scratch;
	struct fleet_sync_entry *all;
	size_t nall, capall;
	uint64_t bytes_tx, bytes_rx, stored, rejected, bad, served;
};

/* The peer endpoint of device j: port.data + 1 (+ j when devices share an address). */
static int peer_endpoint(const struct engine_conf *c, uint32_t j, char *out, size_t len)
{
	int w = snprintf(out, len, "tcp://%s:%d", c->addrs[j], c->port_base + 1 + (c->port_stride ? (int)j : 0));

	return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

void fleet_peers_close(struct fleet_peers **p, uint32_t n)
{
	struct fleet_peers *pe = p ? *p : NULL;

	if (!pe)
		return;
	for (uint32_t i = 0; pe->out && i < pe->k; i++)
		if (pe->out[i]) {
			int linger = 0;

			zmq_setsockopt(pe->out[i], ZMQ_LINGER, &linger, sizeof linger);
			zmq_close(pe->out[i]);
		}
	if (pe->rsock) {
		int linger = 0;

		zmq_setsockopt(pe->rsock, ZMQ_LINGER, &linger, sizeof linger);
		zmq_close(pe->rsock);
	}
	for (uint32_t i = 0; pe->held && i < n; i++)
		free(pe->held[i].model);
	free(pe->held);
	free(pe->out);
	free(pe->out_full);
	free(pe->scratch);
	free(pe->all);
	fleet_store_close(&pe->store);
	free(pe);
	*p = NULL;
}

/* The base every chain starts from: the seed's initial model (the device's own model before
 * it trains) or fleet.base_file. */
static int peers_base(const struct fleet_device *d, const float *init, uint8_t **frame, size_t *len)
{
	const float *base = init;
	char *buf = NULL, err[512];
	size_t blen = 0;
	int rc;

	if (!strcmp(d->fc.base, "file")) {
		if (!d->fc.base_file ||
		    rfile_read(d->fc.base_file, d->n * sizeof(float), &buf, &blen, err, sizeof err) < 0 ||
		    blen != d->n * sizeof(float) || !wire_payload_finite(buf, d->n)) {
			free(buf);
			log_error("engine_fleet: fleet.base_file does not load for the peers' store");
			return -EINVAL;
		}
		base = (const float *)(void *)buf;
	} else if (strcmp(d->fc.base, "init")) {
		log_error("engine_fleet: fleet.registry peers needs fleet.base init or file");
		return -EINVAL;
	}
	rc = fleet_codec_encode(FLEET_FULL, base, NULL, d->n, frame, len);
	free(buf);
	return rc;
}

int fleet_peers_open(struct fleet_device *d, const struct kv *cfg)
{
	struct fleet_peers *pe = calloc(1, sizeof *pe);
	const struct engine_conf *c = &d->fc.ec;
	char path[4200], err[512], ep[160], rid[32];
	uint8_t *frame = NULL;
	size_t len = 0;
	const char *addr = kv_get(cfg, "node.addr");
	int rc = -ENOMEM;

	d->pe = pe;
	if (!pe)
		return -ENOMEM;
	pe->k = (uint32_t)d->fc.npeers;
	pe->held = calloc(c->n, sizeof *pe->held);
	pe->out = calloc(pe->k, sizeof *pe->out);
	pe->out_full = calloc(pe->k, sizeof *pe->out_full);
	pe->scratch = malloc(d->n * sizeof(float));
	if (!pe->held || !pe->out || !pe->out_full || !pe->scratch)
		return -ENOMEM;
	snprintf(path, sizeof path, "%s/nodes/%s.peers.sqlite", c->run_dir, c->name);
	if (!(pe->store = fleet_store_open(path, true, err, sizeof err))) {
		log_error("engine_fleet: %s", err);
		return -EIO;
	}
	if ((rc = peers_base(d, model_params(d->wk->model), &frame, &len)) < 0)
		return rc;
	if ((rc = fleet_store_set_meta(pe->store, (uint32_t)d->n, (uint32_t)d->fc.snapshot_every)) < 0 ||
	    (rc = fleet_store_put_base(pe->store, frame, len)) < 0) {
		free(frame);
		log_error("engine_fleet: %s holds another run's models", path);
		return rc;
	}
	free(frame);
	pe->rsock = zmq_socket(d->ctx, ZMQ_ROUTER);
	if (!pe->rsock || wire_socket_setup(pe->rsock, fleet_codec_frame_max(d->n)) < 0)
		return -EIO;
	{
		int on = 1;

		zmq_setsockopt(pe->rsock, ZMQ_ROUTER_HANDOVER, &on, sizeof on);
	}
	snprintf(ep, sizeof ep, "tcp://%s:%d", addr && *addr ? addr : c->addrs[c->index],
		 c->port_base + 1 + (c->port_stride ? (int)c->index : 0));
	if (zmq_bind(pe->rsock, ep) < 0) {
		rc = -zmq_errno();
		log_error("engine_fleet: bind %s: %s", ep, zmq_strerror(-rc));
		return rc;
	}
	snprintf(rid, sizeof rid, "p%u", c->index);
	for (uint32_t i = 0; i < pe->k; i++) {
		uint32_t j = (c->index + 1 + i) % c->n;

		pe->out[i] = zmq_socket(d->ctx, ZMQ_DEALER);
		if (!pe->out[i] || wire_socket_setup(pe->out[i], fleet_codec_frame_max(d->n)) < 0)
			return -EIO;
		zmq_setsockopt(pe->out[i], ZMQ_ROUTING_ID, rid, strlen(rid));
		if ((rc = peer_endpoint(c, j, ep, sizeof ep)) < 0)
			return rc;
		if (zmq_connect(pe->out[i], ep) < 0) {
			rc = -zmq_errno();
			log_error("engine_fleet: connect %s: %s", ep, zmq_strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* A version just made (frame against the previous one; params its model): to every peer. */
void fleet_peers_push(struct fleet_device *d, const uint8_t *frame, size_t len,
		      const float *params)
{
	struct fleet_peers *pe = d->pe;
	int64_t v = fleet_queue_version(d->q);
	uint8_t *full = NULL;
	size_t flen = 0;

	for (uint32_t i = 0; i < pe->k; i++) {
		struct fleet_msg m = { .type = FLEET_MSG_PEER_SYNC, .device = d->fc.ec.index, .version = v,
				       .parent = v - 1, .t_sent = fleet_conf_run_s(&d->fc.ec) };
		const uint8_t *f = frame;

		m.payload_len = (uint32_t)len;
		if (pe->out_full[i]) {
			if (!full && fleet_codec_encode(FLEET_FULL, params, NULL, d->n, &full, &flen) < 0)
				continue;
			f = full;
			m.payload_len = (uint32_t)flen;
		}
		if (fleet_net_send(pe->out[i], NULL, 0, &m, f, &pe->bytes_tx) == 0)
			pe->out_full[i] = false;
	}
	free(full);
}

static int peers_held_load(struct fleet_device *d, uint32_t o)
{
	struct fleet_peers *pe = d->pe;
	struct fleet_version last;
	const char *name = d->fc.ec.names[o];
	int rc;

	if (pe->held[o].loaded)
		return 0;
	if (!pe->held[o].model && !(pe->held[o].model = malloc(d->n * sizeof(float))))
		return -ENOMEM;
	rc = fleet_store_latest(pe->store, name, &last);
	if (rc == -ENOENT) {
		if ((rc = fleet_store_get_base(pe->store, pe->held[o].model)) < 0)
			return rc;
		pe->held[o].latest = 0;
		pe->held[o].chain = 0;
	} else if (rc == 0) {
		if ((rc = fleet_store_rebuild(pe->store, name, last.version, pe->held[o].model, NULL)) < 0)
			return rc;
		pe->held[o].latest = last.version;
		pe->held[o].chain = last.chain_len;
	} else {
		return rc;
	}
	pe->held[o].loaded = true;
	return 0;
}

/* A version from device o: stored when it continues o's chain here (or is full); otherwise
 * o is told to send the next one full. */
static void peers_take(struct fleet_device *d, struct fleet_net_msg *m)
{
	struct fleet_peers *pe = d->pe;
	uint32_t o = m->h.device;
	struct fleet_frame_info in;
	struct fleet_version row;
	int64_t v = m->h.version;
	const uint8_t *frame = fleet_net_msg_payload(m);
	char want[16];
	int rc;

	snprintf(want, sizeof want, "p%u", o);
	if (m->h.type != FLEET_MSG_PEER_SYNC || o >= d->fc.ec.n || !frame || m->idlen != strlen(want) ||
	    memcmp(m->id, want, m->idlen) || !fleet_conf_holds_for(d->fc.ec.n, pe->k, d->fc.ec.index, o) || v < 1 ||
	    fleet_codec_peek(frame, m->h.payload_len, &in) < 0 || in.n != d->n) {
		pe->bad++;
		return;
	}
	if (peers_held_load(d, o) < 0)
		return;
	if (v <= pe->held[o].latest)
		return; /* a copy (a restarted sender): what is stored stays */
	if ((v == pe->held[o].latest + 1 && m->h.parent == pe->held[o].latest) || in.strategy == FLEET_FULL) {
		rc = fleet_store_ingest(pe->store, d->fc.ec.names[o], v, v - 1, pe->held[o].chain,
					pe->held[o].model, frame, m->h.payload_len, m->h.t_sent,
					fleet_conf_run_s(&d->fc.ec), pe->scratch, &row);
		if (rc >= 0) {
			memcpy(pe->held[o].model, pe->scratch, d->n * sizeof(float));
			pe->held[o].latest = v;
			pe->held[o].chain = row.chain_len;
			pe->stored++;
			return;
		}
		pe->rejected++;
	}
	{
		struct fleet_msg a = { .type = FLEET_MSG_PEER_ACK, .device = o, .version = v,
				       .parent = pe->held[o].latest, .aux = FLEET_ACK_OUT_OF_ORDER };

		fleet_net_send(pe->rsock, m->id, m->idlen, &a, NULL, &pe->bytes_tx);
	}
}

/* Read what the peers sent (never waits). */
void fleet_peers_poll(struct fleet_device *d)
{
	struct fleet_peers *pe = d->pe;
	struct fleet_net_msg m;
	size_t maxp = fleet_codec_frame_max(d->n);

	while (fleet_net_recv(pe->rsock, true, maxp, 0, &m, &pe->bad, &pe->bytes_rx) == 1) {
		peers_take(d, &m);
		fleet_net_msg_close(&m);
	}
	for (uint32_t i = 0; i < pe->k; i++)
		while (fleet_net_recv(pe->out[i], false, maxp, 0, &m, &pe->bad, &pe->bytes_rx) == 1) {
			if (m.h.type == FLEET_MSG_PEER_ACK)
				pe->out_full[i] = true;
			fleet_net_msg_close(&m);
		}
}

static int name_index(const struct fleet_device *d, const char *name, uint32_t *out)
{
	for (uint32_t i = 0; i < d->fc.ec.n; i++)
		if (!strcmp(d->fc.ec.names[i], name)) {
			*out = i;
			return 0;
		}
	return -ENOENT;
}

static int collect_row(const struct fleet_version *v, void *arg)
{
	struct fleet_device *d = arg;
	struct fleet_peers *pe = d->pe;
	uint32_t i;

	if (name_index(d, v->device, &i) < 0)
		return 0;
	if (pe->nall == pe->capall) {
		size_t cap = pe->capall ? pe->capall * 2 : 256;
		struct fleet_sync_entry *p = realloc(pe->all, cap * sizeof *p);

		if (!p)
			return -ENOMEM;
		pe->all = p;
		pe->capall = cap;
	}
	pe->all[pe->nall].device = i;
	pe->all[pe->nall].version = v->version;
	memcpy(pe->all[pe->nall].hash, v->hash, FLEET_HASH_BYTES);
	pe->nall++;
	return 0;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct fleet_sync_entry *x = a, *y = b;

	if (x->device != y->device)
		return x->device < y->device ? -1 : 1;
	return x->version < y->version ? -1 : x->version > y->version;
}

/* The registry asks what this device holds, or for one version it holds. */
void fleet_peers_serve(struct fleet_device *d, const struct fleet_msg *h)
{
	struct fleet_peers *pe = d->pe;
	struct fleet_msg a = { .device = d->fc.ec.index };
	uint8_t *buf = NULL;
	size_t len = 0;

	if (h->type == FLEET_MSG_SUMMARY_REQ) {
		size_t from = 0, cnt;
		int w;

		pe->nall = 0;
		if (fleet_store_each(pe->store, collect_row, d) < 0)
			pe->nall = 0;
		if (pe->nall)
			qsort(pe->all, pe->nall, sizeof *pe->all, entry_cmp);
		while (from < pe->nall && (pe->all[from].device < (uint64_t)h->aux ||
					   (pe->all[from].device == (uint64_t)h->aux &&
					    pe->all[from].version <= h->version)))
			from++;
		cnt = pe->nall - from < FLEET_SYNC_CHUNK ? pe->nall - from : FLEET_SYNC_CHUNK;
		if (!(buf = malloc(fleet_sync_summary_bytes(cnt))))
			return;
		w = fleet_sync_summary_encode(pe->all + from, cnt, buf, fleet_sync_summary_bytes(cnt));
		if (w < 0) {
			free(buf);
			return;
		}
		a.type = FLEET_MSG_SUMMARY;
		a.aux = from + cnt == pe->nall;
		a.payload_len = (uint32_t)w;
	} else if (h->type == FLEET_MSG_PULL) {
		struct fleet_version row;

		a.type = FLEET_MSG_PULLED;
		a.aux = h->aux;
		a.version = h->version;
		a.t_sent = h->t_sent; /* the registry's serial of this pull */
		if (h->aux >= 0 && h->aux < (int64_t)d->fc.ec.n && h->version >= 1 &&
		    fleet_store_payload(pe->store, d->fc.ec.names[h->aux], h->version, &row, &buf, &len) == 0) {
			a.parent = row.parent;
			if (h->parent == 1 && row.strategy != FLEET_FULL) {
				/* The registry lacks the parent: the version's model, full. */
				free(buf);
				buf = NULL;
				if (fleet_store_rebuild(pe->store, d->fc.ec.names[h->aux], h->version,
							pe->scratch, NULL) < 0 ||
				    fleet_codec_encode(FLEET_FULL, pe->scratch, NULL, d->n, &buf, &len) < 0) {
					free(buf);
					buf = NULL;
					len = 0;
				}
			}
			a.payload_len = (uint32_t)len;
			pe->served += len > 0;
		}
	} else {
		return;
	}
	fleet_net_send(d->sock, NULL, 0, &a, buf, &d->bytes_tx);
	free(buf);
}

void fleet_peers_log(const struct fleet_peers *pe, const char *name)
{
	log_info("engine_fleet: %s peers: %llu versions of peers stored, %llu refused, %llu bad "
		 "messages, %llu bytes to peers, %llu versions served to the registry",
		 name, (unsigned long long)pe->stored, (unsigned long long)pe->rejected,
		 (unsigned long long)pe->bad, (unsigned long long)pe->bytes_tx,
		 (unsigned long long)pe->served);
}
