/* node/fleet_registry: see fleet_registry.h.
 *
 * The registry's only blocking work is the store's commit (fsync). Decisions a reader needs:
 *
 * - A resend is a copy: the registry answers a version it already holds as a duplicate (after
 *   comparing hashes), so a device resending after any doubt (a reconnect, a silence, a
 *   rejection) is always safe.
 * - Ack after commit: the reply leaves only after fleet_store_ingest returned, i.e. after the
 *   WAL was fsync'd. */
#include "node/fleet_registry.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "collectors/csv.h"
#include "collectors/schema.h"
#include "lib/ctl.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "node/data.h"
#include "node/engine_common.h"
#include "node/fleet_base.h"
#include "node/fleet_codec.h"
#include "node/fleet_net.h"
#include "node/fleet_repair.h"
#include "node/fleet_store.h"
#include "node/fleet_sync.h"
#include "node/model.h"
#include "node/optim.h"
#include "node/wire.h"

int fleet_registry_dev_load(struct fleet_registry *r, uint32_t i)
{
	struct fleet_reg_dev *d = &r->dev[i];
	struct fleet_version last;
	int rc;

	if (d->loaded)
		return 0;
	if (!d->model && !(d->model = malloc(r->n * sizeof(float))))
		return -ENOMEM;
	rc = fleet_store_latest(r->store, r->fc.ec.names[i], &last);
	if (rc == -ENOENT) {
		memcpy(d->model, r->base, r->n * sizeof(float));
		d->latest = 0;
		d->chain = 0;
	} else if (rc == 0) {
		rc = fleet_store_rebuild(r->store, r->fc.ec.names[i], last.version, d->model, NULL);
		if (rc < 0) {
			log_error("engine_fleet: %s@%lld does not rebuild from the store: %s",
				  r->fc.ec.names[i], (long long)last.version, strerror(-rc));
			return rc;
		}
		d->latest = last.version;
		d->chain = last.chain_len;
		log_info("engine_fleet: %s continues from stored version %lld", r->fc.ec.names[i],
			 (long long)last.version);
	} else {
		return rc;
	}
	d->loaded = true;
	return 0;
}

void fleet_registry_reply(struct fleet_registry *r, uint32_t i, const struct fleet_msg *h, const void *payload)
{
	struct fleet_reg_dev *d = &r->dev[i];
	int rc = fleet_net_send(r->sock, d->id, d->idlen, h, payload, &r->bytes_tx);

	if (rc < 0 && rc != -EHOSTUNREACH && rc != -EAGAIN)
		log_warn("engine_fleet: reply to %s: %s", r->fc.ec.names[i], zmq_strerror(-rc));
}

void fleet_registry_ack(struct fleet_registry *r, uint32_t i, int64_t version, enum fleet_ack_status st)
{
	struct fleet_msg a = { .type = FLEET_MSG_ACK, .device = i, .version = version,
			       .parent = r->dev[i].latest, .aux = st };

	fleet_registry_reply(r, i, &a, NULL);
}

static void reg_hello(struct fleet_registry *r, uint32_t i)
{
	struct fleet_reg_dev *d = &r->dev[i];
	struct fleet_msg m = { .type = FLEET_MSG_DEPLOY, .device = i, .version = d->latest,
			       .parent = d->latest, .aux = d->chain };
	uint8_t *frame = NULL;
	size_t len;

	if (fleet_codec_encode(FLEET_FULL, d->model, NULL, r->n, &frame, &len) < 0)
		return;
	m.payload_len = (uint32_t)len;
	fleet_registry_reply(r, i, &m, frame);
	free(frame);
}

/* Device i's share as the registry holds it: the partition deployed with it. Samples that joined
 * the device's share later (a drift, node/fleet_drift) are appended there, at positions from this
 * share's size on, and the registry does not have them: a replay that uses them carries them. */
static int reg_share_open(const struct kv *cfg, const struct engine_conf *ec, uint32_t i,
			  struct engine_work **out)
{
	struct engine_conf c = *ec; /* a shallow copy: the device's index */

	c.index = i;
	return engine_work_open(cfg, &c, false, out);
}

/* Minibatch of positions idx[0..n) into x, y: a position inside the registry's share from it,
 * any other from the raw samples the frame carried. -EBADMSG for a position in neither. */
static int reg_batch(const struct data_set *share, const struct fleet_replay_samples *smp,
		     const uint32_t *idx, size_t n, float *x, uint8_t *y)
{
	for (size_t j = 0; j < n; j++) {
		uint32_t p = idx[j];

		if (p < share->n) {
			data_batch(share, &p, 1, x + j * share->dim, y + j);
			continue;
		}
		{
			size_t lo = 0, hi = smp->m;

			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;

				if (smp->pos[mid] < p)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo == smp->m || smp->pos[lo] != p || smp->dim != share->dim)
				return -EBADMSG;
			{
				/* one carried sample, scaled exactly as data_batch scales a share's */
				struct data_set one = { .n = 1, .rows = share->rows, .cols = share->cols,
							.dim = share->dim,
							.pixels = smp->pixels + lo * smp->dim,
							.labels = smp->labels + lo };

				data_batch(&one, NULL, 1, x + j * share->dim, y + j);
			}
		}
	}
	return 0;
}

/* Recompute a replay frame on top of the device's latest model into r->scratch: its share
 * (opened once, the same deterministic partition the device trains on), the same minibatches,
 * the same optimiser rule. Returns 1 when the result has the frame's hash, 0 when it does not
 * (the device's optimiser state or schedule differs: momentum, a decayed lr), -EBADMSG for a
 * frame that does not check out, or negative errno. */
static int reg_replay(struct fleet_registry *r, uint32_t i, const uint8_t *frame, size_t len)
{
	struct fleet_reg_dev *d = &r->dev[i];
	struct fleet_frame_info in;
	struct fleet_replay_samples smp = { 0 };
	uint32_t *sizes = NULL, *idx = NULL;
	size_t steps, k, off = 0;
	uint8_t h[FLEET_HASH_BYTES];
	float *params;
	int rc;

	if ((rc = fleet_codec_peek(frame, len, &in)) < 0)
		return rc;
	if ((rc = fleet_codec_replay_parse_samples(frame, len, d->model, r->n, &sizes, &steps, &idx, &k,
						   &smp)) < 0)
		return rc == -ENOMEM ? rc : -EBADMSG;
	if (!d->wk) {
		if ((rc = reg_share_open(r->cfg, &r->fc.ec, i, &d->wk)) < 0)
			goto out;
		if (model_nparams(d->wk->model) != r->n) {
			rc = -EINVAL;
			goto out;
		}
	}
	params = model_params(d->wk->model);
	memcpy(params, d->model, r->n * sizeof(float));
	for (size_t s = 0; s < steps; s++) {
		double loss;

		rc = -EBADMSG;
		if (sizes[s] > d->wk->batch)
			goto out;
		if ((rc = reg_batch(d->wk->train, &smp, idx + off, sizes[s], d->wk->x, d->wk->y)) < 0)
			goto out;
		if ((rc = model_gradient(d->wk->model, d->wk->x, d->wk->y, sizes[s], d->wk->grad, &loss)) < 0)
			goto out;
		optim_step(d->wk->optim, params, d->wk->grad);
		off += sizes[s];
	}
	memcpy(r->scratch, params, r->n * sizeof(float));
	if ((rc = fleet_hash(r->scratch, r->n, h)) < 0)
		goto out;
	rc = memcmp(h, in.hash, FLEET_HASH_BYTES) ? 0 : 1;
out:
	fleet_codec_replay_samples_free(&smp);
	free(sizes);
	free(idx);
	return rc;
}

static void reg_sync(struct fleet_registry *r, uint32_t i, struct fleet_net_msg *m)
{
	struct fleet_reg_dev *d = &r->dev[i];
	const char *name = r->fc.ec.names[i];
	const uint8_t *frame = fleet_net_msg_payload(m);
	size_t len = m->h.payload_len;
	struct fleet_frame_info in;
	struct fleet_version row;
	double t0, apply_s, now;
	int64_t v = m->h.version;
	int rc;

	if (!frame || fleet_codec_peek(frame, len, &in) < 0 || in.n != r->n || v < 1) {
		r->rejected++;
		fleet_registry_ack(r, i, v, FLEET_ACK_REJECTED);
		return;
	}
	if (v <= d->latest) {
		/* A copy of a version already stored: the same model, or a conflict. */
		rc = fleet_store_get(r->store, name, v, &row);
		if (rc == 0 && !memcmp(row.hash, in.hash, FLEET_HASH_BYTES)) {
			r->dups++;
			fleet_registry_ack(r, i, v, FLEET_ACK_DUPLICATE);
		} else {
			log_warn("engine_fleet: %s@%lld: another model than the one stored", name,
				 (long long)v);
			fleet_registry_ack(r, i, v, FLEET_ACK_CONFLICT);
		}
		return;
	}
	/* In order: on top of the latest; a full frame stands on its own (a device that lost
	 * what lies between, e.g. after this store was lost, starts a new chain with one). */
	if (!(v == d->latest + 1 && m->h.parent == d->latest) && in.strategy != FLEET_FULL) {
		fleet_registry_ack(r, i, v, FLEET_ACK_OUT_OF_ORDER);
		return;
	}
	t0 = fleet_conf_run_s(&r->fc.ec);
	if (in.strategy == FLEET_REPLAY) {
		uint8_t *delta = NULL;
		size_t dlen;

		if (!(v == d->latest + 1 && m->h.parent == d->latest)) {
			fleet_registry_ack(r, i, v, FLEET_ACK_OUT_OF_ORDER);
			return;
		}
		rc = reg_replay(r, i, frame, len);
		if (rc <= 0) {
			now = fleet_conf_run_s(&r->fc.ec);
			r->replay_failed += rc == 0;
			r->rejected += rc < 0;
			csv_writer_row(r->trace, "%.6f,%s,%lld,replay,%zu,0,%.6f,%.6f,0,%.6f,%u", now, name,
				       (long long)v, len + FLEET_PROTO_HEADER_BYTES, fmax(m->h.encode_s, 0),
				       now - t0, fmax(now - m->h.t_sent, 0), d->chain);
			fleet_registry_ack(r, i, v, rc == 0 ? FLEET_ACK_REPLAY_FAILED : FLEET_ACK_REJECTED);
			return;
		}
		/* Recomputed exactly: store it as the delta from its parent (recover then needs
		 * neither the data nor the recomputation). */
		r->replayed++;
		rc = fleet_codec_encode(FLEET_DELTA, r->scratch, d->model, r->n, &delta, &dlen);
		if (rc == 0)
			rc = fleet_store_ingest(r->store, name, v, d->latest, d->chain, d->model, delta, dlen,
						m->h.t_sent, t0, r->scratch, &row);
		free(delta);
	} else {
		rc = fleet_store_ingest(r->store, name, v, d->latest, d->chain, d->model, frame, len,
					m->h.t_sent, t0, r->scratch, &row);
	}
	now = fleet_conf_run_s(&r->fc.ec);
	apply_s = now - t0;
	if (rc == -EBADMSG || rc == -ESTALE || rc == -EINVAL) {
		r->rejected++;
		csv_writer_row(r->trace, "%.6f,%s,%lld,%s,%zu,0,%.6f,%.6f,0,%.6f,%u", now, name, (long long)v,
			       fleet_strategy_name(in.strategy), len + FLEET_PROTO_HEADER_BYTES,
			       fmax(m->h.encode_s, 0), apply_s, fmax(now - m->h.t_sent, 0), d->chain);
		fleet_registry_ack(r, i, v, FLEET_ACK_REJECTED);
		return;
	}
	if (rc < 0) {
		/* The store failed (full disk...): no ack; the device sends it again later. */
		log_error("engine_fleet: store %s@%lld: %s", name, (long long)v, strerror(-rc));
		return;
	}
	memcpy(d->model, r->scratch, r->n * sizeof(float));
	d->latest = v;
	d->chain = row.chain_len;
	r->stored++;
	csv_writer_row(r->trace, "%.6f,%s,%lld,%s,%zu,%llu,%.6f,%.6f,1,%.6f,%u", now, name, (long long)v,
		       fleet_strategy_name(in.strategy), len + FLEET_PROTO_HEADER_BYTES,
		       (unsigned long long)row.bytes_stored, fmax(m->h.encode_s, 0), apply_s,
		       fmax(now - m->h.t_sent, 0), row.chain_len);
	fleet_registry_ack(r, i, v, rc == 1 ? FLEET_ACK_DUPLICATE : FLEET_ACK_STORED);
}

static void reg_handle(struct fleet_registry *r, struct fleet_net_msg *m)
{
	uint32_t i = m->h.device;
	struct fleet_reg_dev *d;
	char want[16];

	/* The routing id names the device ("d<index>"): a message claiming another is refused. */
	snprintf(want, sizeof want, "d%u", i);
	if (i >= r->fc.ec.n || m->idlen != strlen(want) || memcmp(m->id, want, m->idlen)) {
		r->bad++;
		return;
	}
	d = &r->dev[i];
	memcpy(d->id, m->id, m->idlen);
	d->idlen = m->idlen;
	if (fleet_registry_dev_load(r, i) < 0)
		return;
	if (r->rep && fleet_repair_gate(r, i, m))
		return;
	switch (m->h.type) {
	case FLEET_MSG_HELLO:
		d->bye = false;
		reg_hello(r, i);
		break;
	case FLEET_MSG_SYNC:
		reg_sync(r, i, m);
		break;
	case FLEET_MSG_BYE:
		d->bye = true;
		break;
	default:
		r->bad++;
	}
}

static bool all_bye(const struct fleet_registry *r)
{
	for (uint32_t i = 0; i < r->fc.ec.n; i++)
		if (!r->dev[i].bye)
			return false;
	return true;
}

int fleet_registry_run(const struct kv *cfg)
{
	struct fleet_registry r;
	char path[4200], err[512];
	uint8_t *frame = NULL;
	size_t len, maxp;
	double stop_at = -1;
	int rc;

	memset(&r, 0, sizeof r);
	r.cfg = cfg;
	if ((rc = fleet_conf_read(cfg, &r.fc)))
		return rc;
	if (!r.fc.ec.names) {
		log_error("engine_fleet: workers.names (the devices) is not set");
		rc = -EINVAL;
		goto out;
	}
	for (uint32_t i = 0; i < r.fc.ec.n; i++)
		if (!fleet_store_device_ok(r.fc.ec.names[i])) {
			log_error("engine_fleet: device name '%s' is not valid", r.fc.ec.names[i]);
			rc = -EINVAL;
			goto out;
		}
	if ((rc = fleet_base_load(cfg, &r.fc, &r.base, &r.n)) < 0)
		goto out;
	if (!(r.scratch = malloc(r.n * sizeof(float)))) {
		rc = -ENOMEM;
		goto out;
	}
	r.dev = calloc(r.fc.ec.n, sizeof *r.dev);
	if (!r.dev) {
		rc = -ENOMEM;
		goto out;
	}
	snprintf(path, sizeof path, "%s/%s", r.fc.ec.run_dir, FLEET_STORE_FILE);
	r.store = fleet_store_open(path, true, err, sizeof err);
	if (!r.store) {
		log_error("engine_fleet: %s", err);
		rc = -EIO;
		goto out;
	}
	if ((rc = fleet_store_set_meta(r.store, (uint32_t)r.n, (uint32_t)r.fc.snapshot_every)) < 0 ||
	    (rc = fleet_codec_encode(FLEET_FULL, r.base, NULL, r.n, &frame, &len)) < 0 ||
	    (rc = fleet_store_put_base(r.store, frame, len)) < 0) {
		log_error("engine_fleet: %s: this store holds another run's models (%s)", path,
			  strerror(-rc));
		goto out;
	}
	snprintf(path, sizeof path, "%s/fleet.csv", r.fc.ec.run_dir);
	r.trace = csv_writer_open(path, TRACE_HEADER_FLEET);
	if (!r.trace) {
		rc = -EIO;
		goto out;
	}
	maxp = fleet_codec_frame_max(r.n);
	if (maxp < fleet_sync_summary_max())
		maxp = fleet_sync_summary_max();
	if (r.fc.peers && (rc = fleet_repair_open(&r)) < 0)
		goto out;
	r.ctx = zmq_ctx_new();
	r.sock = r.ctx ? zmq_socket(r.ctx, ZMQ_ROUTER) : NULL;
	if (!r.sock || wire_socket_setup(r.sock, maxp) < 0) {
		rc = -EIO;
		goto out;
	}
	{
		int on = 1;

		/* A restarted device reuses its routing id: the new connection takes it over. */
		zmq_setsockopt(r.sock, ZMQ_ROUTER_HANDOVER, &on, sizeof on);
	}
	{
		char ep[160];
		const char *addr = kv_get(cfg, "node.addr");
		int64_t port = 7000;

		kv_get_i64(cfg, "port.data", 7000, &port);
		snprintf(ep, sizeof ep, "tcp://%s:%d", addr && *addr ? addr : "127.0.0.1", (int)port);
		if (zmq_bind(r.sock, ep) < 0) {
			rc = -zmq_errno();
			log_error("engine_fleet: bind %s: %s", ep, zmq_strerror(-rc));
			goto out;
		}
		log_info("engine_fleet: registry on %s, %u devices, %zu params, snapshot every %lld",
			 ep, r.fc.ec.n, r.n, (long long)r.fc.snapshot_every);
	}
	/* replay: each device's share is loaded now, not at its first version (a blocked
	 * registry answers no one). */
	for (uint32_t i = 0; r.fc.strategy == FLEET_REPLAY && i < r.fc.ec.n; i++)
		if ((rc = reg_share_open(cfg, &r.fc.ec, i, &r.dev[i].wk)) < 0)
			goto out;
	rc = engine_ctl_start(cfg, &r.fc.ec, &r.ctl);
	if (rc == -ECANCELED) {
		rc = 0;
		goto out;
	}
	if (rc)
		goto out;
	if (r.rep) /* the control plane's start moved the run's clock */
		fleet_repair_restart(r.rep, fleet_conf_run_s(&r.fc.ec));
	for (;;) {
		struct fleet_net_msg m;
		double now;

		rc = fleet_net_recv(r.sock, true, maxp, 100, &m, &r.bad, &r.bytes_rx);
		if (rc < 0) {
			log_error("engine_fleet: recv: %s", zmq_strerror(-rc));
			goto out;
		}
		if (rc == 1) {
			reg_handle(&r, &m);
			fleet_net_msg_close(&m);
		}
		if (r.rep)
			fleet_repair_pump(&r);
		now = fleet_conf_run_s(&r.fc.ec);
		if (r.ctl) {
			ctl_client_status(r.ctl, (int64_t)r.stored, CTL_RUN, false);
			if (stop_at < 0 && ctl_client_should_stop(r.ctl))
				stop_at = now;
		}
		/* Without a control plane (a hand-written conf), stop.time ends it. */
		if (!r.ctl && stop_at < 0 && r.fc.ec.stop_time_s > 0 && now >= r.fc.ec.stop_time_s)
			stop_at = now;
		/* Every device said bye (finished and drained): done. After a stop, keep taking the
		 * devices' last versions until each said bye, or FLEET_CONF_DRAIN_S. */
		if (all_bye(&r) || (stop_at >= 0 && now - stop_at >= FLEET_CONF_DRAIN_S))
			break;
	}
	for (uint32_t i = 0; i < r.fc.ec.n; i++) {
		struct fleet_msg bye = { .type = FLEET_MSG_BYE, .device = i };

		if (r.dev[i].idlen && !r.dev[i].bye)
			fleet_registry_reply(&r, i, &bye, NULL);
	}
	log_info("engine_fleet: registry done: %llu versions stored, %llu duplicates, %llu rejected, "
		 "%llu bad messages, %llu bytes in, %llu replays recomputed, %llu replays that did not "
		 "match", (unsigned long long)r.stored,
		 (unsigned long long)r.dups, (unsigned long long)r.rejected, (unsigned long long)r.bad,
		 (unsigned long long)r.bytes_rx, (unsigned long long)r.replayed,
		 (unsigned long long)r.replay_failed);
	if (r.ctl) {
		ctl_client_status(r.ctl, (int64_t)r.stored, CTL_DONE, false);
		ctl_client_done(r.ctl);
	}
	rc = 0;
out:
	free(frame);
	if (r.sock)
		zmq_close(r.sock);
	if (r.ctx)
		zmq_ctx_term(r.ctx);
	csv_writer_close(&r.trace);
	ctl_client_close(&r.ctl);
	fleet_repair_destroy(&r.rep, r.fc.ec.n);
	fleet_store_close(&r.store);
	for (uint32_t i = 0; r.dev && i < r.fc.ec.n; i++) {
		free(r.dev[i].model);
		engine_work_destroy(&r.dev[i].wk);
	}
	free(r.dev);
	free(r.base);
	free(r.scratch);
	engine_conf_free(&r.fc.ec);
	return rc;
}
