/* node/fleet_device: see fleet_device.h.
 *
 * Chain, not star: a device encodes version v against v-1 even before v-1 is acknowledged, so a
 * device offline for minutes queues small deltas rather than ever larger ones against the last
 * acknowledged version; the registry takes them strictly in order. */
#include "node/fleet_device.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "collectors/csv.h"
#include "collectors/schema.h"
#include "lib/clock.h"
#include "lib/ctl.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "node/data.h"
#include "node/engine_common.h"
#include "node/fleet_codec.h"
#include "node/fleet_net.h"
#include "node/fleet_peers.h"
#include "node/fleet_proto.h"
#include "node/fleet_queue.h"
#include "node/fleet_store.h"
#include "node/model.h"
#include "node/optim.h"
#include "node/wire.h"

#define FLEET_WINDOW 4             /* versions a device has in flight, at most */
/* Silence (no ack) before a device sends its in-flight versions again. TCP recovers lost
 * segments and a reconnect triggers a resend of its own (the handshake event), so this only
 * covers a registry that took a version without answering (a failed commit): long enough
 * that a slow link still delivering the window is not flooded with copies. */
#define FLEET_RESEND_MIN_S 15.0
#define FLEET_RESEND_MAX_S 60.0
#define FLEET_HEARTBEAT_IVL_MS 2000
/* A heartbeat's answer queues behind whatever the peer is sending on the same connection: a
 * 2.3 MB CNN deployment takes about 40 s on a 1 Mbit/s link with 2% loss, and a 20 s timeout
 * cut every such transfer short (the device reconnected, said hello again, and never got a
 * whole model). So the timeout allows a slow link's largest message; a dead registry is still
 * found by TCP (a reset) or by the resend timers. */
#define FLEET_HEARTBEAT_TIMEOUT_MS 120000
/* auto: a full frame is encoded too when the delta exceeds this fraction of the raw float32
 * bytes (the full frame is 92-93% of raw on every model measured) */
#define FLEET_AUTO_FULL_TRY 0.85

static double t_made_of(struct fleet_device *d, int64_t v)
{
	return v >= 0 && (size_t)v < d->t_cap && d->t_made[v] > 0 ? d->t_made[v] : fleet_conf_run_s(&d->fc.ec);
}

static double enc_s_of(struct fleet_device *d, int64_t v)
{
	return v >= 0 && (size_t)v < d->t_cap ? d->enc_s[v] : 0;
}

static void t_made_set(struct fleet_device *d, int64_t v, double t, double enc_s)
{
	if ((size_t)v >= d->t_cap) {
		size_t cap = d->t_cap ? d->t_cap : 64;
		double *p, *e;
		uint8_t **rf;
		size_t *rl;

		while (cap <= (size_t)v)
			cap *= 2;
		p = realloc(d->t_made, cap * sizeof *p);
		if (p)
			d->t_made = p;
		e = realloc(d->enc_s, cap * sizeof *e);
		if (e)
			d->enc_s = e;
		rf = realloc(d->rframe, cap * sizeof *rf);
		if (rf)
			d->rframe = rf;
		rl = realloc(d->rlen, cap * sizeof *rl);
		if (rl)
			d->rlen = rl;
		{
			double *st = realloc(d->send_t, cap * sizeof *st);
			size_t *sb;

			if (st)
				d->send_t = st;
			sb = realloc(d->send_b, cap * sizeof *sb);
			if (sb)
				d->send_b = sb;
			if (!st || !sb)
				return;
			memset(st + d->t_cap, 0, (cap - d->t_cap) * sizeof *st);
			memset(sb + d->t_cap, 0, (cap - d->t_cap) * sizeof *sb);
		}
		if (!p || !e || !rf || !rl)
			return;
		memset(p + d->t_cap, 0, (cap - d->t_cap) * sizeof *p);
		memset(e + d->t_cap, 0, (cap - d->t_cap) * sizeof *e);
		memset(rf + d->t_cap, 0, (cap - d->t_cap) * sizeof *rf);
		memset(rl + d->t_cap, 0, (cap - d->t_cap) * sizeof *rl);
		d->t_cap = cap;
	}
	d->t_made[v] = t;
	d->enc_s[v] = enc_s;
}

/* Send pending versions from next_send while the window allows. */
static void dev_pump(struct fleet_device *d)
{
	int64_t last = fleet_queue_version(d->q), first = fleet_queue_first(d->q);

	if (!first)
		return;
	if (d->next_send < first)
		d->next_send = first;
	while (d->next_send <= last && d->next_send - first < FLEET_WINDOW) {
		const uint8_t *frame;
		size_t len = fleet_queue_frame(d->q, d->next_send, &frame);

		/* A replay frame goes first; the queued weights only if its recomputation failed. */
		if ((size_t)d->next_send < d->t_cap && d->rframe[d->next_send]) {
			frame = d->rframe[d->next_send];
			len = d->rlen[d->next_send];
		}
		struct fleet_msg m = { .type = FLEET_MSG_SYNC, .device = d->fc.ec.index,
				       .payload_len = (uint32_t)len, .version = d->next_send,
				       .parent = d->next_send - 1,
				       .t_sent = t_made_of(d, d->next_send),
				       .encode_s = enc_s_of(d, d->next_send) };

		if (!len || fleet_net_send(d->sock, NULL, 0, &m, frame, &d->bytes_tx) < 0)
			break;
		if ((size_t)d->next_send < d->t_cap) {
			d->send_t[d->next_send] = fleet_conf_run_s(&d->fc.ec);
			d->send_b[d->next_send] = len + FLEET_PROTO_HEADER_BYTES;
		}
		d->next_send++;
	}
}

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* The replay frame of the minibatches since the last version (model hash h), carrying the raw
 * samples the registry lacks: every distinct position at or past share0 (samples that joined
 * in a drift). A frame over fleet_codec_frame_max is not made (-E2BIG): the weights go instead. */
static int replay_encode(struct fleet_device *d, const uint8_t *h, uint8_t **frame, size_t *len)
{
	struct fleet_replay_samples smp = { .dim = d->wk->train->dim };
	const struct data_set *t = d->wk->train;
	uint32_t *pos = NULL;
	size_t m = 0;
	int rc;

	for (size_t j = 0; j < d->nb_idx; j++)
		m += d->bidx[j] >= d->share0;
	if (m) {
		size_t u = 0;

		if (!(pos = malloc(m * sizeof *pos)))
			return -ENOMEM;
		m = 0;
		for (size_t j = 0; j < d->nb_idx; j++)
			if (d->bidx[j] >= d->share0)
				pos[m++] = d->bidx[j];
		qsort(pos, m, sizeof *pos, u32_cmp);
		for (size_t j = 0; j < m; j++)
			if (!u || pos[j] != pos[u - 1])
				pos[u++] = pos[j];
		smp.m = (uint32_t)u;
		smp.pos = pos;
		smp.labels = malloc(u);
		smp.pixels = malloc(u * smp.dim);
		if (!smp.labels || !smp.pixels) {
			rc = -ENOMEM;
			goto out;
		}
		for (size_t j = 0; j < u; j++) {
			smp.labels[j] = t->labels[pos[j]];
			memcpy(smp.pixels + j * smp.dim, t->pixels + (size_t)pos[j] * t->dim, smp.dim);
		}
	}
	rc = fleet_codec_encode_replay_samples(h, d->last, d->n, d->bsizes, d->nb_steps, d->bidx,
					       d->nb_idx, &smp, frame, len);
	if (rc == 0 && *len > fleet_codec_frame_max(d->n)) {
		free(*frame);
		*frame = NULL;
		rc = -E2BIG;
	}
	if (rc == 0)
		d->replay_samples += smp.m;
out:
	fleet_codec_replay_samples_free(&smp);
	return rc;
}

/* Apply the drift entries due now (in order): their classes join the share from the next
 * minibatch on. */
static int dev_drift(struct fleet_device *d, int64_t step)
{
	uint16_t cls;

	while ((cls = fleet_drift_due(&d->drift, fleet_conf_run_s(&d->fc.ec), step))) {
		size_t added;
		int rc = fleet_drift_apply(d->wk, &d->fc.ec, cls, &added);

		if (rc < 0)
			return rc;
		log_info("engine_fleet: %s drift at step %lld: classes 0x%x add %zu samples (share %u)",
			 d->fc.ec.name, (long long)step, cls, added, d->wk->train->n);
	}
	return 0;
}

/* Make a version of the current model: encode, queue durably, send. */
static void replay_drop(struct fleet_device *d, int64_t v)
{
	if (v >= 0 && (size_t)v < d->t_cap && d->rframe[v]) {
		free(d->rframe[v]);
		d->rframe[v] = NULL;
		d->rlen[v] = 0;
	}
}

/* Remember the minibatch of the step just taken (strategy replay): its positions in the share.
 * engine_work_gradient took them from order[pos - n .. pos). */
static int replay_note(struct fleet_device *d, size_t n)
{
	const uint32_t *at = d->wk->order + d->wk->pos - n;

	if (d->nb_steps == d->cap_steps) {
		size_t cap = d->cap_steps ? d->cap_steps * 2 : 64;
		uint32_t *p = realloc(d->bsizes, cap * sizeof *p);

		if (!p)
			return -ENOMEM;
		d->bsizes = p;
		d->cap_steps = cap;
	}
	if (d->nb_idx + n > d->cap_idx) {
		size_t cap = d->cap_idx ? d->cap_idx : 1024;
		uint32_t *p;

		while (cap < d->nb_idx + n)
			cap *= 2;
		p = realloc(d->bidx, cap * sizeof *p);
		if (!p)
			return -ENOMEM;
		d->bidx = p;
		d->cap_idx = cap;
	}
	d->bsizes[d->nb_steps++] = (uint32_t)n;
	memcpy(d->bidx + d->nb_idx, at, n * sizeof *at);
	d->nb_idx += n;
	return 0;
}

static int dev_version(struct fleet_device *d, enum fleet_strategy s)
{
	float *params = model_params(d->wk->model);
	uint8_t *frame = NULL, *rframe = NULL;
	size_t len, rlen = 0;
	int64_t t0 = clock_now_ns();
	double enc_s;
	size_t steps = d->nb_steps;
	int rc;

	if (s == FLEET_REPLAY) {
		/* The weights (a delta) are queued as always, for a failed recomputation or a
		 * restart; the replay frame is what is sent first. */
		uint8_t h[FLEET_HASH_BYTES];

		s = FLEET_DELTA;
		if (d->nb_steps && fleet_hash(params, d->n, h) == 0 && replay_encode(d, h, &rframe, &rlen) < 0)
			rframe = NULL;
	}
	d->nb_steps = d->nb_idx = 0;
	if (s == FLEET_SPARSE)
		rc = fleet_codec_encode_sparse(params, d->last, d->residual, d->n, d->k, &frame, &len);
	else
		rc = fleet_codec_encode(s, params, d->last, d->n, &frame, &len);
	if (rc < 0) {
		log_error("engine_fleet: encode: %s", strerror(-rc));
		return rc;
	}
	/* auto: the weights go as the smaller of the delta and the full frame (the same link, so
	 * fewer bytes arrive sooner). A full frame is tried only when the delta is not clearly
	 * smaller than raw float32: zstd gains little on raw weights (docs/fleet.md). */
	if (d->fc.auto_choose && s == FLEET_DELTA && len > FLEET_AUTO_FULL_TRY * (double)(d->n * 4)) {
		uint8_t *full = NULL;
		size_t flen;

		if (fleet_codec_encode(FLEET_FULL, params, NULL, d->n, &full, &flen) == 0 && flen < len) {
			free(frame);
			frame = full;
			len = flen;
			d->sent_full++;
		} else {
			free(full);
		}
	}
	enc_s = (double)(clock_now_ns() - t0) / 1e9;
	/* auto: keep the replay only when the cost model says it reaches the registry sooner. */
	if (rframe && d->fc.auto_choose && !fleet_cost_prefer_replay(&d->cost, len, rlen, steps)) {
		free(rframe);
		rframe = NULL;
	}
	if (rframe)
		d->sent_replay++;
	else
		d->sent_weights++;
	rc = fleet_queue_push(d->q, frame, len, params, d->residual);
	if (rc >= 0 && d->pe)
		fleet_peers_push(d, frame, len, params);
	free(frame);
	if (rc < 0) {
		free(rframe);
		log_error("engine_fleet: queue version %lld: %s", (long long)fleet_queue_version(d->q) + 1,
			  strerror(-rc));
		return rc;
	}
	memcpy(d->last, params, d->n * sizeof(float));
	t_made_set(d, fleet_queue_version(d->q), fleet_conf_run_s(&d->fc.ec), enc_s);
	if (rframe && (size_t)fleet_queue_version(d->q) < d->t_cap) {
		d->rframe[fleet_queue_version(d->q)] = rframe;
		d->rlen[fleet_queue_version(d->q)] = rlen;
	} else {
		free(rframe);
	}
	dev_pump(d);
	return 0;
}

static void dev_ack(struct fleet_device *d, const struct fleet_msg *h)
{
	int64_t latest = h->parent;

	d->last_heard_s = fleet_conf_run_s(&d->fc.ec);
	d->resend_s = FLEET_RESEND_MIN_S;
	switch (h->aux) {
	case FLEET_ACK_STORED:
	case FLEET_ACK_DUPLICATE:
		if (h->aux == FLEET_ACK_STORED && h->version >= 0 && (size_t)h->version < d->t_cap &&
		    d->send_t[h->version] > 0)
			fleet_cost_goodput(&d->cost, (double)d->send_b[h->version],
					   fleet_conf_run_s(&d->fc.ec) - d->send_t[h->version]);
		fleet_queue_ack(d->q, h->version);
		for (int64_t v = d->acked + 1; v <= h->version; v++)
			replay_drop(d, v);
		if (h->version > d->acked)
			d->acked = h->version;
		break;
	case FLEET_ACK_REPLAY_FAILED:
		d->replay_failed++;
		replay_drop(d, h->version);
		if (h->version < d->next_send)
			d->next_send = h->version;
		break;
	case FLEET_ACK_REJECTED:
		d->rejected++;
		if (h->version < d->next_send)
			d->next_send = h->version;
		break;
	case FLEET_ACK_OUT_OF_ORDER:
		fleet_queue_ack(d->q, latest);
		if (latest >= d->acked)
			d->acked = latest;
		if (fleet_queue_first(d->q) && latest + 1 < fleet_queue_first(d->q)) {
			/* The registry lacks versions no longer queued here (its store was lost):
			 * start a new chain with a full version of the current model. */
			log_warn("engine_fleet: registry holds %lld, below this device's queue: "
				 "sending a full version", (long long)latest);
			fleet_queue_ack(d->q, fleet_queue_version(d->q));
			dev_version(d, FLEET_FULL);
		}
		d->next_send = latest + 1;
		break;
	case FLEET_ACK_CONFLICT:
		log_error("engine_fleet: the registry holds another model under version %lld",
			  (long long)h->version);
		fleet_queue_ack(d->q, h->version);
		break;
	default:
		d->bad++;
	}
	dev_pump(d);
}

/* Read what arrived (up to timeout_ms for the first). */
static int dev_poll(struct fleet_device *d, int timeout_ms)
{
	struct fleet_net_msg m;
	uint16_t ev;
	uint32_t val;
	int rc;

	if (d->pe)
		fleet_peers_poll(d);
	while ((rc = fleet_net_recv(d->sock, false, fleet_codec_frame_max(d->n), timeout_ms, &m, &d->bad,
			      &d->bytes_rx)) == 1) {
		timeout_ms = 0;
		if (m.h.type == FLEET_MSG_ACK)
			dev_ack(d, &m.h);
		else if (d->pe && (m.h.type == FLEET_MSG_SUMMARY_REQ || m.h.type == FLEET_MSG_PULL))
			fleet_peers_serve(d, &m.h);
		else if (m.h.type == FLEET_MSG_BYE)
			d->bye = true;
		fleet_net_msg_close(&m);
	}
	/* A new connection lost what the old one carried: send the queue again. */
	while (d->mon && wire_monitor_next(d->mon, &ev, &val) == 1) {
		if (ev == ZMQ_EVENT_HANDSHAKE_SUCCEEDED && ++d->handshakes > 1 &&
		    fleet_queue_pending(d->q)) {
			d->next_send = fleet_queue_first(d->q);
			d->resent++;
		}
	}
	/* Silence with versions in flight: send them again, backing off. */
	if (fleet_queue_pending(d->q) && d->next_send > fleet_queue_first(d->q) &&
	    fleet_conf_run_s(&d->fc.ec) - d->last_heard_s > d->resend_s) {
		d->next_send = fleet_queue_first(d->q);
		d->last_heard_s = fleet_conf_run_s(&d->fc.ec);
		d->resend_s = fmin(d->resend_s * 2, FLEET_RESEND_MAX_S);
		d->resent++;
	}
	dev_pump(d);
	return rc < 0 ? rc : 0;
}

/* HELLO until the registry deploys: adopt its model unless this device's own state is at least
 * as new. The registry answers every hello with the whole model, so a hello is sent again only
 * when a new connection may have lost the answer (a handshake after the first), or after a
 * silence of FLEET_RESEND_MIN_S doubling to FLEET_RESEND_MAX_S: on a slow link a deployment
 * takes longer than any fixed period, and each copy would queue behind the last. A hello sent
 * before the registry listens waits in the socket's queue for the connection. Returns 1
 * deployed, 0 stopped first, negative errno. */
static int dev_join(struct fleet_device *d)
{
	double next_hello = -1, hello_ivl = FLEET_RESEND_MIN_S;

	for (;;) {
		struct fleet_net_msg m;
		double now = fleet_conf_run_s(&d->fc.ec);
		uint16_t ev;
		uint32_t val;
		int rc;

		if (d->ctl && ctl_client_should_stop(d->ctl))
			return 0;
		while (d->mon && wire_monitor_next(d->mon, &ev, &val) == 1)
			if (ev == ZMQ_EVENT_HANDSHAKE_SUCCEEDED && ++d->handshakes > 1)
				next_hello = now;
		if (now >= next_hello) {
			struct fleet_msg h = { .type = FLEET_MSG_HELLO, .device = d->fc.ec.index,
					       .version = fleet_queue_version(d->q) };

			fleet_net_send(d->sock, NULL, 0, &h, NULL, &d->bytes_tx);
			next_hello = now + hello_ivl;
			hello_ivl = fmin(hello_ivl * 2, FLEET_RESEND_MAX_S);
		}
		if (d->pe)
			fleet_peers_poll(d);
		rc = fleet_net_recv(d->sock, false, fleet_codec_frame_max(d->n), 200, &m, &d->bad, &d->bytes_rx);
		if (rc < 0)
			return rc;
		if (rc == 0)
			continue;
		if (d->pe && (m.h.type == FLEET_MSG_SUMMARY_REQ || m.h.type == FLEET_MSG_PULL)) {
			fleet_peers_serve(d, &m.h);
			fleet_net_msg_close(&m);
			continue;
		}
		if (m.h.type == FLEET_MSG_DEPLOY && fleet_net_msg_payload(&m)) {
			float *params = model_params(d->wk->model);
			int64_t mine = fleet_queue_version(d->q);

			if (mine >= m.h.version && mine > 0) {
				/* Continue from this device's own last version; what the registry
				 * holds is acknowledged. */
				fleet_queue_state(d->q, params, d->residual);
				fleet_queue_ack(d->q, m.h.version);
				d->acked = m.h.version;
				log_info("engine_fleet: %s resumes at version %lld (registry holds %lld, "
					 "%zu queued)", d->fc.ec.name, (long long)mine, (long long)m.h.version,
					 fleet_queue_pending(d->q));
			} else {
				rc = fleet_codec_decode(fleet_net_msg_payload(&m), m.h.payload_len, NULL, d->n, params);
				if (rc == 0)
					rc = fleet_queue_reset(d->q, m.h.version, params);
				if (rc < 0) {
					d->bad++;
					fleet_net_msg_close(&m);
					continue;
				}
				memset(d->residual, 0, d->n * sizeof(float));
				d->acked = m.h.version;
				if (m.h.version > 0)
					log_info("engine_fleet: %s takes the registry's version %lld",
						 d->fc.ec.name, (long long)m.h.version);
			}
			memcpy(d->last, params, d->n * sizeof(float));
			fleet_net_msg_close(&m);
			return 1;
		}
		if (m.h.type == FLEET_MSG_BYE) {
			fleet_net_msg_close(&m);
			return 0;
		}
		fleet_net_msg_close(&m);
	}
}

/* One eval.csv row: this device's own model (for sparse, the model it adopted, which is the
 * registry's copy) on the test set and a sample of its share. */
static void dev_eval(struct fleet_device *d, struct csv_writer *ev, int64_t step)
{
	struct eval_result te, tr;

	if (ev && engine_work_eval(d->wk, d->wk->model, &te, &tr) == 0)
		engine_eval_row(ev, &d->fc.ec, d->wk, (uint64_t)step, d->wk->samples, &te, &tr);
}

int fleet_device_run(const struct kv *cfg)
{
	struct fleet_device d;
	struct csv_writer *trace = NULL, *ev = NULL;
	double next_eval_s;
	char path[4200], err[512], rid[32];
	int64_t step = 0, since = 0;
	uint64_t row_tx = 0, row_rx = 0, row_bad = 0;
	double next_sync_s;
	int rc;

	memset(&d, 0, sizeof d);
	if ((rc = fleet_conf_read(cfg, &d.fc)))
		return rc;
	if ((rc = engine_work_open(cfg, &d.fc.ec, true, &d.wk)))
		goto out;
	{
		char key[48];

		snprintf(key, sizeof key, "fleet.drift.%u", d.fc.ec.index);
		if (fleet_drift_parse(kv_get(cfg, key), &d.drift) < 0) {
			log_error("engine_fleet: %s is malformed", key);
			rc = -EINVAL;
			goto out;
		}
	}
	d.n = model_nparams(d.wk->model);
	d.share0 = d.wk->train->n;
	d.k = d.fc.sparse_k > 0 ? (size_t)d.fc.sparse_k : (size_t)ceil(d.fc.sparse_fraction * (double)d.n);
	if (d.k < 1)
		d.k = 1;
	d.last = calloc(d.n, sizeof(float));
	d.residual = calloc(d.n, sizeof(float));
	if (!d.last || !d.residual) {
		rc = -ENOMEM;
		goto out;
	}
	/* The trace's open makes RUN_DIR/nodes/, where the queue lives. */
	trace = engine_trace_open(&d.fc.ec);
	ev = engine_eval_open(&d.fc.ec);
	if (!trace || !ev) {
		rc = -EIO;
		goto out;
	}
	snprintf(path, sizeof path, "%s/nodes/%s.fleet", d.fc.ec.run_dir, d.fc.ec.name);
	d.q = fleet_queue_open(path, (uint32_t)d.n, err, sizeof err);
	if (!d.q) {
		log_error("engine_fleet: %s", err);
		rc = -EIO;
		goto out;
	}
	d.ctx = zmq_ctx_new();
	d.sock = d.ctx ? zmq_socket(d.ctx, ZMQ_DEALER) : NULL;
	if (!d.sock || wire_socket_setup(d.sock, fleet_codec_frame_max(d.n)) < 0) {
		rc = -EIO;
		goto out;
	}
	snprintf(rid, sizeof rid, "d%u", d.fc.ec.index);
	zmq_setsockopt(d.sock, ZMQ_ROUTING_ID, rid, strlen(rid));
	{
		int ivl = FLEET_HEARTBEAT_IVL_MS, tmo = FLEET_HEARTBEAT_TIMEOUT_MS;

		zmq_setsockopt(d.sock, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
		zmq_setsockopt(d.sock, ZMQ_HEARTBEAT_TIMEOUT, &tmo, sizeof tmo);
	}
	if ((rc = wire_monitor_open(d.ctx, d.sock, ZMQ_EVENT_HANDSHAKE_SUCCEEDED, "fleet-device", &d.mon)) < 0)
		goto out;
	if (d.fc.peers && (rc = fleet_peers_open(&d, cfg)) < 0)
		goto out;
	if (zmq_connect(d.sock, d.fc.registry_ep) < 0) {
		rc = -zmq_errno();
		log_error("engine_fleet: connect %s: %s", d.fc.registry_ep, zmq_strerror(-rc));
		goto out;
	}
	rc = engine_ctl_start(cfg, &d.fc.ec, &d.ctl);
	if (rc == -ECANCELED) {
		rc = 0;
		goto out;
	}
	if (rc)
		goto out;
	d.resend_s = FLEET_RESEND_MIN_S;
	fleet_cost_init(&d.cost);
	rc = dev_join(&d);
	if (rc <= 0)
		goto done;
	d.last_heard_s = fleet_conf_run_s(&d.fc.ec);
	dev_pump(&d); /* what a restart found queued */
	next_sync_s = fleet_conf_run_s(&d.fc.ec) + d.fc.sync_s;
	next_eval_s = fleet_conf_run_s(&d.fc.ec) + d.fc.ec.eval_every_s;
	while (!(d.ctl && ctl_client_should_stop(d.ctl)) && !d.bye &&
	       !engine_conf_stop_reached(&d.fc.ec, step)) {
		double loss = 0, compute_s;
		size_t nb = 0;
		int64_t t0 = clock_now_ns();

		if (d.ctl)
			ctl_client_status(d.ctl, step, CTL_RUN, false);
		if ((rc = dev_drift(&d, step)) < 0)
			break;
		if ((rc = engine_work_gradient(d.wk, &loss, &nb)) < 0)
			break;
		if (d.fc.strategy == FLEET_REPLAY && (rc = replay_note(&d, nb)) < 0)
			break;
		optim_step(d.wk->optim, model_params(d.wk->model), d.wk->grad);
		compute_s = (double)(clock_now_ns() - t0) / 1e9;
		fleet_cost_step(&d.cost, compute_s); /* what the registry would redo */
		compute_s += engine_work_straggle(d.wk, &d.fc.ec, step, compute_s);
		step++;
		since++;
		if ((d.fc.sync_steps > 0 && step % d.fc.sync_steps == 0) ||
		    (d.fc.sync_s > 0 && fleet_conf_run_s(&d.fc.ec) >= next_sync_s)) {
			if ((rc = dev_version(&d, d.fc.strategy)) < 0)
				break;
			since = 0;
			next_sync_s = fleet_conf_run_s(&d.fc.ec) + d.fc.sync_s;
		}
		if ((rc = dev_poll(&d, 0)) < 0)
			break;
		engine_trace_row(trace, &d.fc.ec, clock_now_ns(), step, compute_s, 0, -1,
				 fleet_queue_version(d.q), loss, d.bytes_tx - row_tx, d.bytes_rx - row_rx,
				 d.bad - row_bad);
		row_tx = d.bytes_tx;
		row_rx = d.bytes_rx;
		row_bad = d.bad;
		if (d.fc.ec.eval_every_s > 0 && fleet_conf_run_s(&d.fc.ec) >= next_eval_s) {
			dev_eval(&d, ev, step);
			next_eval_s = fleet_conf_run_s(&d.fc.ec) + d.fc.ec.eval_every_s;
		}
	}
	if (rc < 0)
		goto done;
	/* The last steps become a version too, then the queue gets FLEET_CONF_DRAIN_S to drain. */
	if (since > 0 && !d.bye)
		dev_version(&d, d.fc.strategy);
	dev_eval(&d, ev, step);
	{
		double until = fleet_conf_run_s(&d.fc.ec) + FLEET_CONF_DRAIN_S;

		while (fleet_queue_pending(d.q) && !d.bye && fleet_conf_run_s(&d.fc.ec) < until)
			if ((rc = dev_poll(&d, 100)) < 0)
				break;
		if (fleet_queue_pending(d.q))
			log_warn("engine_fleet: %s stops with %zu versions unacknowledged (kept in its "
				 "queue for a restart)", d.fc.ec.name, fleet_queue_pending(d.q));
	}
	rc = 0;
done:
	if (rc > 0)
		rc = 0;
	if (d.sock) {
		struct fleet_msg bye = { .type = FLEET_MSG_BYE, .device = d.fc.ec.index };

		fleet_net_send(d.sock, NULL, 0, &bye, NULL, &d.bytes_tx);
	}
	log_info("engine_fleet: %s done after %lld steps: version %lld, acknowledged %lld, %zu queued, "
		 "%llu resends, %llu rejected, %llu replays not matched, %llu bad messages, %llu bytes out, "
		 "%llu versions sent as replay (carrying %llu raw samples), %llu as weights (%llu full)",
		 d.fc.ec.name,
		 (long long)step, (long long)(d.q ? fleet_queue_version(d.q) : 0), (long long)d.acked,
		 d.q ? fleet_queue_pending(d.q) : 0, (unsigned long long)d.resent,
		 (unsigned long long)d.rejected, (unsigned long long)d.replay_failed,
		 (unsigned long long)d.bad, (unsigned long long)d.bytes_tx,
		 (unsigned long long)d.sent_replay, (unsigned long long)d.replay_samples,
		 (unsigned long long)d.sent_weights, (unsigned long long)d.sent_full);
	if (d.pe)
		fleet_peers_log(d.pe, d.fc.ec.name);
	if (d.ctl && rc == 0) {
		ctl_client_status(d.ctl, step, CTL_DONE, false);
		ctl_client_done(d.ctl);
	}
out:
	fleet_peers_close(&d.pe, d.fc.ec.n);
	if (d.mon)
		zmq_close(d.mon);
	if (d.sock) {
		int linger = 1000; /* let the BYE leave */

		zmq_setsockopt(d.sock, ZMQ_LINGER, &linger, sizeof linger);
		zmq_close(d.sock);
	}
	if (d.ctx)
		zmq_ctx_term(d.ctx);
	csv_writer_close(&trace);
	csv_writer_close(&ev);
	ctl_client_close(&d.ctl);
	fleet_queue_close(&d.q);
	engine_work_destroy(&d.wk);
	free(d.last);
	free(d.residual);
	for (size_t v = 0; v < d.t_cap; v++)
		free(d.rframe[v]);
	free(d.rframe);
	free(d.rlen);
	free(d.send_t);
	free(d.send_b);
	free(d.bsizes);
	free(d.bidx);
	free(d.t_made);
	free(d.enc_s);
	engine_conf_free(&d.fc.ec);
	return rc;
}
