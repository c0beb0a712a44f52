/* node/engine_fleet: see engine_fleet.h.
 *
 * Both roles are single-threaded loops around one ZeroMQ socket. The registry's only blocking
 * work is the store's commit (fsync); a device trains between polls, so an acknowledgement
 * waits at most one minibatch (and its straggler delay) to be read. Decisions a reader needs:
 *
 * - Chain, not star: a device encodes version v against v-1 even before v-1 is acknowledged, so
 *   a device offline for minutes queues small deltas rather than ever larger ones against the
 *   last acknowledged version; the registry takes them strictly in order.
 * - A resend is a copy: the registry answers a version it already holds as a duplicate (after
 *   comparing hashes), so resending after any doubt (a reconnect, a silence of resend_s, a
 *   rejection) is always safe.
 * - Ack after commit: the reply leaves only after fleet_store_ingest returned, i.e. after the
 *   WAL was fsync'd. */
#include "node/engine_fleet.h"

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
#include "lib/rfile.h"
#include "node/data.h"
#include "node/engine_common.h"
#include "node/fleet_codec.h"
#include "node/fleet_cost.h"
#include "node/fleet_drift.h"
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
#define FLEET_DRAIN_S 5.0          /* after stop: time to deliver (device) / take (registry) */
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
};

static double run_s(const struct engine_conf *c)
{
	return (double)(clock_now_ns() - c->origin_ns) / 1e9;
}

static int conf_read(const struct kv *cfg, struct fleet_conf *fc)
{
	const char *saddrs = kv_get(cfg, "servers.addrs"), *strat = kv_get(cfg, "fleet.strategy");
	int64_t port = 7000;
	size_t alen;
	int rc;

	memset(fc, 0, sizeof *fc);
	if ((rc = engine_conf_read(cfg, &fc->ec)))
		return rc;
	rc = kv_get_i64(cfg, "fleet.sync_steps", 20, &fc->sync_steps);
	rc = rc ? rc : kv_get_double(cfg, "fleet.sync_s", 0, &fc->sync_s);
	rc = rc ? rc : kv_get_i64(cfg, "fleet.snapshot_every", 10, &fc->snapshot_every);
	rc = rc ? rc : kv_get_i64(cfg, "fleet.sparse_k", 0, &fc->sparse_k);
	rc = rc ? rc : kv_get_double(cfg, "fleet.sparse_fraction", 0.01, &fc->sparse_fraction);
	rc = rc ? rc : kv_get_i64(cfg, "fleet.base_steps", 200, &fc->base_steps);
	rc = rc ? rc : kv_get_i64(cfg, "port.data", 7000, &port);
	if (rc)
		goto fail;
	if (strat && !strcmp(strat, "auto")) {
		fc->auto_choose = true;
		fc->strategy = FLEET_REPLAY;
	} else if (fleet_strategy_parse(strat ? strat : "delta", &fc->strategy) < 0) {
		log_error("engine_fleet: fleet.strategy '%s' (expected full, delta, sparse, replay or auto)",
			  strat);
		goto fail;
	}
	if ((fc->sync_steps <= 0 && !(fc->sync_s > 0)) || fc->snapshot_every < 1 ||
	    fc->snapshot_every > FLEET_STORE_MAX_CHAIN || fc->sparse_k < 0 ||
	    !(fc->sparse_fraction >= 0 && fc->sparse_fraction <= 1)) {
		log_error("engine_fleet: bad fleet.sync_steps/sync_s/snapshot_every/sparse_k");
		goto fail;
	}
	fc->base = kv_get(cfg, "fleet.base");
	fc->base_file = kv_get(cfg, "fleet.base_file");
	if (!fc->base)
		fc->base = "init";
	alen = saddrs ? strcspn(saddrs, ",") : 0;
	if (!alen || alen >= 64) {
		log_error("engine_fleet: servers.addrs (the registry's address) is not set");
		goto fail;
	}
	snprintf(fc->registry_ep, sizeof fc->registry_ep, "tcp://%.*s:%d", (int)alen, saddrs, (int)port);
	return 0;
fail:
	engine_conf_free(&fc->ec);
	return -EINVAL;
}

/* --- messages ------------------------------------------------------------------------------ */

struct rmsg {
	struct fleet_msg h;
	uint8_t id[64];
	size_t idlen;
	zmq_msg_t pay;
	bool has_pay;
};

static void rmsg_close(struct rmsg *m)
{
	if (m->has_pay)
		zmq_msg_close(&m->pay);
	m->has_pay = false;
}

static const uint8_t *rmsg_payload(struct rmsg *m)
{
	return m->has_pay ? zmq_msg_data(&m->pay) : NULL;
}

static int msg_send(void *sock, const uint8_t *id, size_t idlen, const struct fleet_msg *h,
		    const void *payload, uint64_t *bytes)
{
	uint8_t raw[FLEET_PROTO_HEADER_BYTES];
	int more = h->payload_len ? ZMQ_SNDMORE : 0;

	fleet_proto_encode(h, raw);
	if (id && zmq_send(sock, id, idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
		return -zmq_errno();
	if (zmq_send(sock, raw, sizeof raw, more | ZMQ_DONTWAIT) < 0)
		return -zmq_errno();
	if (more && zmq_send(sock, payload, h->payload_len, ZMQ_DONTWAIT) < 0)
		return -zmq_errno();
	if (bytes)
		*bytes += sizeof raw + h->payload_len;
	return 0;
}

/* Receive one whole message (waiting up to timeout_ms). 1 with *m (close it), 0 when none came,
 * negative errno on a socket error. A malformed message is consumed and counted in *bad. */
static int msg_recv(void *sock, bool router, size_t max_payload, int timeout_ms, struct rmsg *m,
		    uint64_t *bad, uint64_t *bytes)
{
	zmq_pollitem_t pi = { .socket = sock, .events = ZMQ_POLLIN };
	zmq_msg_t part[3];
	size_t nparts = 0, want_hdr = router ? 1 : 0;
	bool ok = true;
	int more = 0, rc;
	size_t ml = sizeof more;

	memset(m, 0, sizeof *m);
	rc = zmq_poll(&pi, 1, timeout_ms);
	if (rc < 0)
		return zmq_errno() == EINTR ? 0 : -zmq_errno();
	if (!(pi.revents & ZMQ_POLLIN))
		return 0;
	do {
		zmq_msg_t tmp;

		zmq_msg_init(&tmp);
		if (zmq_msg_recv(&tmp, sock, ZMQ_DONTWAIT) < 0) {
			int e = zmq_errno();

			zmq_msg_close(&tmp);
			for (size_t i = 0; i < nparts; i++)
				zmq_msg_close(&part[i]);
			return e == EAGAIN || e == EINTR ? 0 : -e;
		}
		zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &ml);
		if (bytes)
			*bytes += zmq_msg_size(&tmp);
		if (nparts < 3)
			part[nparts++] = tmp;
		else {
			ok = false;
			zmq_msg_close(&tmp);
		}
	} while (more);
	if (router) {
		size_t il = zmq_msg_size(&part[0]);

		if (il == 0 || il > sizeof m->id)
			ok = false;
		else {
			memcpy(m->id, zmq_msg_data(&part[0]), il);
			m->idlen = il;
		}
	}
	if (ok && nparts > want_hdr &&
	    fleet_proto_decode(zmq_msg_data(&part[want_hdr]), zmq_msg_size(&part[want_hdr]), max_payload,
			       &m->h) == 0) {
		size_t extra = nparts - want_hdr - 1;

		if (m->h.payload_len == 0 && extra == 0) {
			ok = true;
		} else if (m->h.payload_len > 0 && extra == 1 &&
			   zmq_msg_size(&part[want_hdr + 1]) == m->h.payload_len) {
			zmq_msg_init(&m->pay);
			zmq_msg_move(&m->pay, &part[want_hdr + 1]);
			m->has_pay = true;
		} else {
			ok = false;
		}
	} else {
		ok = false;
	}
	for (size_t i = 0; i < nparts; i++)
		zmq_msg_close(&part[i]);
	if (!ok) {
		rmsg_close(m);
		(*bad)++;
		return 0;
	}
	return 1;
}

/* --- registry ------------------------------------------------------------------------------- */

struct reg_dev {
	struct engine_work *wk; /* the device's share and model, to recompute replay frames */
	bool loaded, bye;
	int64_t latest;      /* last stored version (0 = the base) */
	uint32_t chain;      /* its chain_len */
	float *model;        /* its model */
	uint8_t id[64];
	size_t idlen;
};

struct registry {
	struct fleet_conf fc;
	struct fleet_store *store;
	struct reg_dev *dev;
	float *base, *scratch;
	size_t n;
	void *ctx, *sock;
	struct csv_writer *trace;
	struct ctl_client *ctl;
	uint64_t bad, stored, dups, rejected, bytes_rx, bytes_tx, replayed, replay_failed;
	const struct kv *cfg;
};

/* fleet.base trained: base_steps minibatch SGD steps from the seed's initial model, taken in
 * turn from each device's share (step s from device s mod N), so the base has seen every
 * class the fleet holds before it is deployed. Each share's minibatch order is the engines'
 * own (seeded by run.seed and the device index), its optimiser the scenario's: the result is a
 * function of the scenario and seed alone, so a restarted registry trains the same base
 * (fleet_store_put_base then finds it already stored). The works are private to this
 * function: the replay recomputation's per-device state starts untouched. */
static int base_train(struct registry *r, const struct kv *cfg)
{
	struct engine_work **wk = calloc(r->fc.ec.n, sizeof *wk);
	int64_t t0 = clock_now_ns();
	double loss = 0;
	int rc = 0;

	if (!wk)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->fc.ec.n && rc == 0; i++) {
		struct engine_conf c = r->fc.ec; /* a shallow copy: device i's index */

		c.index = i;
		if ((rc = engine_work_open(cfg, &c, false, &wk[i])) == 0 &&
		    model_nparams(wk[i]->model) != r->n)
			rc = -EINVAL;
	}
	for (int64_t s = 0; s < r->fc.base_steps && rc == 0; s++) {
		struct engine_work *w = wk[(uint64_t)s % r->fc.ec.n];
		size_t got;

		memcpy(model_params(w->model), r->base, r->n * sizeof(float));
		if ((rc = engine_work_gradient(w, &loss, &got)) == 0)
			optim_step(wk[0]->optim, r->base, w->grad);
	}
	if (rc == 0 && !wire_payload_finite(r->base, r->n))
		rc = -ERANGE;
	if (rc < 0)
		log_error("engine_fleet: training the base: %s", strerror(-rc));
	else
		log_info("engine_fleet: base trained %lld steps over %u shares in %.2f s (last loss %.4f)",
			 (long long)r->fc.base_steps, r->fc.ec.n, (double)(clock_now_ns() - t0) / 1e9,
			 loss);
	for (uint32_t i = 0; i < r->fc.ec.n; i++)
		engine_work_destroy(&wk[i]);
	free(wk);
	return rc;
}

/* The base model: the seed's initial parameters, trained from them, or a file of raw float32. */
static int base_load(struct registry *r, const struct kv *cfg)
{
	struct model_spec spec;
	struct model *m = NULL;
	int rc;

	if ((rc = model_spec_from_kv(cfg, &spec)) < 0)
		return rc;
	m = model_new(&spec, r->fc.ec.seed);
	if (!m)
		return -ENOMEM;
	r->n = model_nparams(m);
	r->base = malloc(r->n * sizeof(float));
	r->scratch = malloc(r->n * sizeof(float));
	if (!r->base || !r->scratch) {
		model_destroy(&m);
		return -ENOMEM;
	}
	memcpy(r->base, model_params(m), r->n * sizeof(float));
	model_destroy(&m);
	if (!strcmp(r->fc.base, "file")) {
		char *buf = NULL, err[512];
		size_t len = 0;

		if (!r->fc.base_file || (rc = rfile_read(r->fc.base_file, r->n * sizeof(float), &buf, &len,
						       err, sizeof err)) < 0) {
			log_error("engine_fleet: fleet.base_file: %s", r->fc.base_file ? err : "not set");
			return -EINVAL;
		}
		if (len != r->n * sizeof(float) || !wire_payload_finite(buf, r->n)) {
			log_error("engine_fleet: %s: expected %zu finite float32 values for this model",
				  r->fc.base_file, r->n);
			free(buf);
			return -EINVAL;
		}
		memcpy(r->base, buf, len);
		free(buf);
	} else if (!strcmp(r->fc.base, "trained")) {
		if (r->fc.base_steps < 1) {
			log_error("engine_fleet: fleet.base_steps must be at least 1");
			return -EINVAL;
		}
		return base_train(r, cfg);
	} else if (strcmp(r->fc.base, "init")) {
		log_error("engine_fleet: fleet.base %s (expected init, trained or file)", r->fc.base);
		return -EINVAL;
	}
	return 0;
}

/* A device's latest stored version and model, from the store on first use (a restarted
 * registry rebuilds it). */
static int dev_load(struct registry *r, uint32_t i)
{
	struct reg_dev *d = &r->dev[i];
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

static void reg_reply(struct registry *r, uint32_t i, const struct fleet_msg *h, const void *payload)
{
	struct reg_dev *d = &r->dev[i];
	int rc = msg_send(r->sock, d->id, d->idlen, h, payload, &r->bytes_tx);

	if (rc < 0 && rc != -EHOSTUNREACH && rc != -EAGAIN)
		log_warn("engine_fleet: reply to %s: %s", r->fc.ec.names[i], zmq_strerror(-rc));
}

static void reg_ack(struct registry *r, uint32_t i, int64_t version, enum fleet_ack_status st)
{
	struct fleet_msg a = { .type = FLEET_MSG_ACK, .device = i, .version = version,
			       .parent = r->dev[i].latest, .aux = st };

	reg_reply(r, i, &a, NULL);
}

static void reg_hello(struct registry *r, uint32_t i)
{
	struct reg_dev *d = &r->dev[i];
	struct fleet_msg m = { .type = FLEET_MSG_DEPLOY, .device = i, .version = d->latest,
			       .parent = d->latest, .aux = d->chain };
	uint8_t *frame = NULL;
	size_t len;

	if (fleet_codec_encode(FLEET_FULL, d->model, NULL, r->n, &frame, &len) < 0)
		return;
	m.payload_len = (uint32_t)len;
	reg_reply(r, i, &m, frame);
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
static int reg_replay(struct registry *r, uint32_t i, const uint8_t *frame, size_t len)
{
	struct reg_dev *d = &r->dev[i];
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

static void reg_sync(struct registry *r, uint32_t i, struct rmsg *m)
{
	struct reg_dev *d = &r->dev[i];
	const char *name = r->fc.ec.names[i];
	const uint8_t *frame = rmsg_payload(m);
	size_t len = m->h.payload_len;
	struct fleet_frame_info in;
	struct fleet_version row;
	double t0, apply_s, now;
	int64_t v = m->h.version;
	int rc;

	if (!frame || fleet_codec_peek(frame, len, &in) < 0 || in.n != r->n || v < 1) {
		r->rejected++;
		reg_ack(r, i, v, FLEET_ACK_REJECTED);
		return;
	}
	if (v <= d->latest) {
		/* A copy of a version already stored: the same model, or a conflict. */
		rc = fleet_store_get(r->store, name, v, &row);
		if (rc == 0 && !memcmp(row.hash, in.hash, FLEET_HASH_BYTES)) {
			r->dups++;
			reg_ack(r, i, v, FLEET_ACK_DUPLICATE);
		} else {
			log_warn("engine_fleet: %s@%lld: another model than the one stored", name,
				 (long long)v);
			reg_ack(r, i, v, FLEET_ACK_CONFLICT);
		}
		return;
	}
	/* In order: on top of the latest; a full frame stands on its own (a device that lost
	 * what lies between, e.g. after this store was lost, starts a new chain with one). */
	if (!(v == d->latest + 1 && m->h.parent == d->latest) && in.strategy != FLEET_FULL) {
		reg_ack(r, i, v, FLEET_ACK_OUT_OF_ORDER);
		return;
	}
	t0 = run_s(&r->fc.ec);
	if (in.strategy == FLEET_REPLAY) {
		uint8_t *delta = NULL;
		size_t dlen;

		if (!(v == d->latest + 1 && m->h.parent == d->latest)) {
			reg_ack(r, i, v, FLEET_ACK_OUT_OF_ORDER);
			return;
		}
		rc = reg_replay(r, i, frame, len);
		if (rc <= 0) {
			now = run_s(&r->fc.ec);
			r->replay_failed += rc == 0;
			r->rejected += rc < 0;
			csv_writer_row(r->trace, "%.6f,%s,%lld,replay,%zu,0,%.6f,%.6f,0,%.6f,%u", now, name,
				       (long long)v, len + FLEET_PROTO_HEADER_BYTES, fmax(m->h.encode_s, 0),
				       now - t0, fmax(now - m->h.t_sent, 0), d->chain);
			reg_ack(r, i, v, rc == 0 ? FLEET_ACK_REPLAY_FAILED : FLEET_ACK_REJECTED);
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
	now = run_s(&r->fc.ec);
	apply_s = now - t0;
	if (rc == -EBADMSG || rc == -ESTALE || rc == -EINVAL) {
		r->rejected++;
		csv_writer_row(r->trace, "%.6f,%s,%lld,%s,%zu,0,%.6f,%.6f,0,%.6f,%u", now, name, (long long)v,
			       fleet_strategy_name(in.strategy), len + FLEET_PROTO_HEADER_BYTES,
			       fmax(m->h.encode_s, 0), apply_s, fmax(now - m->h.t_sent, 0), d->chain);
		reg_ack(r, i, v, FLEET_ACK_REJECTED);
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
	reg_ack(r, i, v, rc == 1 ? FLEET_ACK_DUPLICATE : FLEET_ACK_STORED);
}

static void reg_handle(struct registry *r, struct rmsg *m)
{
	uint32_t i = m->h.device;
	struct reg_dev *d;
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
	if (dev_load(r, i) < 0)
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

static bool all_bye(const struct registry *r)
{
	for (uint32_t i = 0; i < r->fc.ec.n; i++)
		if (!r->dev[i].bye)
			return false;
	return true;
}

int engine_fleet_registry_run(const struct kv *cfg)
{
	struct registry r;
	char path[4200], err[512];
	uint8_t *frame = NULL;
	size_t len, maxp;
	double stop_at = -1;
	int rc;

	memset(&r, 0, sizeof r);
	r.cfg = cfg;
	if ((rc = conf_read(cfg, &r.fc)))
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
	if ((rc = base_load(&r, cfg)) < 0)
		goto out;
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
	for (;;) {
		struct rmsg m;
		double now;

		rc = msg_recv(r.sock, true, maxp, 100, &m, &r.bad, &r.bytes_rx);
		if (rc < 0) {
			log_error("engine_fleet: recv: %s", zmq_strerror(-rc));
			goto out;
		}
		if (rc == 1) {
			reg_handle(&r, &m);
			rmsg_close(&m);
		}
		now = run_s(&r.fc.ec);
		if (r.ctl) {
			ctl_client_status(r.ctl, (int64_t)r.stored, CTL_RUN, false);
			if (stop_at < 0 && ctl_client_should_stop(r.ctl))
				stop_at = now;
		}
		/* Without a control plane (a hand-written conf), stop.time ends it. */
		if (!r.ctl && stop_at < 0 && r.fc.ec.stop_time_s > 0 && now >= r.fc.ec.stop_time_s)
			stop_at = now;
		/* Every device said bye (finished and drained): done. After a stop, keep taking the
		 * devices' last versions until each said bye, or FLEET_DRAIN_S. */
		if (all_bye(&r) || (stop_at >= 0 && now - stop_at >= FLEET_DRAIN_S))
			break;
	}
	for (uint32_t i = 0; i < r.fc.ec.n; i++) {
		struct fleet_msg bye = { .type = FLEET_MSG_BYE, .device = i };

		if (r.dev[i].idlen && !r.dev[i].bye)
			reg_reply(&r, i, &bye, NULL);
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

/* --- device --------------------------------------------------------------------------------- */

struct device {
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
};

static double t_made_of(struct device *d, int64_t v)
{
	return v >= 0 && (size_t)v < d->t_cap && d->t_made[v] > 0 ? d->t_made[v] : run_s(&d->fc.ec);
}

static double enc_s_of(struct device *d, int64_t v)
{
	return v >= 0 && (size_t)v < d->t_cap ? d->enc_s[v] : 0;
}

static void t_made_set(struct device *d, int64_t v, double t, double enc_s)
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
static void dev_pump(struct device *d)
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

		if (!len || msg_send(d->sock, NULL, 0, &m, frame, &d->bytes_tx) < 0)
			break;
		if ((size_t)d->next_send < d->t_cap) {
			d->send_t[d->next_send] = run_s(&d->fc.ec);
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
static int replay_encode(struct device *d, const uint8_t *h, uint8_t **frame, size_t *len)
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
static int dev_drift(struct device *d, int64_t step)
{
	uint16_t cls;

	while ((cls = fleet_drift_due(&d->drift, run_s(&d->fc.ec), step))) {
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
static void replay_drop(struct device *d, int64_t v)
{
	if (v >= 0 && (size_t)v < d->t_cap && d->rframe[v]) {
		free(d->rframe[v]);
		d->rframe[v] = NULL;
		d->rlen[v] = 0;
	}
}

/* Remember the minibatch of the step just taken (strategy replay): its positions in the share.
 * engine_work_gradient took them from order[pos - n .. pos). */
static int replay_note(struct device *d, size_t n)
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

static int dev_version(struct device *d, enum fleet_strategy s)
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
	free(frame);
	if (rc < 0) {
		free(rframe);
		log_error("engine_fleet: queue version %lld: %s", (long long)fleet_queue_version(d->q) + 1,
			  strerror(-rc));
		return rc;
	}
	memcpy(d->last, params, d->n * sizeof(float));
	t_made_set(d, fleet_queue_version(d->q), run_s(&d->fc.ec), enc_s);
	if (rframe && (size_t)fleet_queue_version(d->q) < d->t_cap) {
		d->rframe[fleet_queue_version(d->q)] = rframe;
		d->rlen[fleet_queue_version(d->q)] = rlen;
	} else {
		free(rframe);
	}
	dev_pump(d);
	return 0;
}

static void dev_ack(struct device *d, const struct fleet_msg *h)
{
	int64_t latest = h->parent;

	d->last_heard_s = run_s(&d->fc.ec);
	d->resend_s = FLEET_RESEND_MIN_S;
	switch (h->aux) {
	case FLEET_ACK_STORED:
	case FLEET_ACK_DUPLICATE:
		if (h->aux == FLEET_ACK_STORED && h->version >= 0 && (size_t)h->version < d->t_cap &&
		    d->send_t[h->version] > 0)
			fleet_cost_goodput(&d->cost, (double)d->send_b[h->version],
					   run_s(&d->fc.ec) - d->send_t[h->version]);
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
static int dev_poll(struct device *d, int timeout_ms)
{
	struct rmsg m;
	uint16_t ev;
	uint32_t val;
	int rc;

	while ((rc = msg_recv(d->sock, false, fleet_codec_frame_max(d->n), timeout_ms, &m, &d->bad,
			      &d->bytes_rx)) == 1) {
		timeout_ms = 0;
		if (m.h.type == FLEET_MSG_ACK)
			dev_ack(d, &m.h);
		else if (m.h.type == FLEET_MSG_BYE)
			d->bye = true;
		rmsg_close(&m);
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
	    run_s(&d->fc.ec) - d->last_heard_s > d->resend_s) {
		d->next_send = fleet_queue_first(d->q);
		d->last_heard_s = run_s(&d->fc.ec);
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
static int dev_join(struct device *d)
{
	double next_hello = -1, hello_ivl = FLEET_RESEND_MIN_S;

	for (;;) {
		struct rmsg m;
		double now = run_s(&d->fc.ec);
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

			msg_send(d->sock, NULL, 0, &h, NULL, &d->bytes_tx);
			next_hello = now + hello_ivl;
			hello_ivl = fmin(hello_ivl * 2, FLEET_RESEND_MAX_S);
		}
		rc = msg_recv(d->sock, false, fleet_codec_frame_max(d->n), 200, &m, &d->bad, &d->bytes_rx);
		if (rc < 0)
			return rc;
		if (rc == 0)
			continue;
		if (m.h.type == FLEET_MSG_DEPLOY && rmsg_payload(&m)) {
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
				rc = fleet_codec_decode(rmsg_payload(&m), m.h.payload_len, NULL, d->n, params);
				if (rc == 0)
					rc = fleet_queue_reset(d->q, m.h.version, params);
				if (rc < 0) {
					d->bad++;
					rmsg_close(&m);
					continue;
				}
				memset(d->residual, 0, d->n * sizeof(float));
				d->acked = m.h.version;
				if (m.h.version > 0)
					log_info("engine_fleet: %s takes the registry's version %lld",
						 d->fc.ec.name, (long long)m.h.version);
			}
			memcpy(d->last, params, d->n * sizeof(float));
			rmsg_close(&m);
			return 1;
		}
		if (m.h.type == FLEET_MSG_BYE) {
			rmsg_close(&m);
			return 0;
		}
		rmsg_close(&m);
	}
}

/* One eval.csv row: this device's own model (for sparse, the model it adopted, which is the
 * registry's copy) on the test set and a sample of its share. */
static void dev_eval(struct device *d, struct csv_writer *ev, int64_t step)
{
	struct eval_result te, tr;

	if (ev && engine_work_eval(d->wk, d->wk->model, &te, &tr) == 0)
		engine_eval_row(ev, &d->fc.ec, d->wk, (uint64_t)step, d->wk->samples, &te, &tr);
}

int engine_fleet_device_run(const struct kv *cfg)
{
	struct device d;
	struct csv_writer *trace = NULL, *ev = NULL;
	double next_eval_s;
	char path[4200], err[512], rid[32];
	int64_t step = 0, since = 0;
	uint64_t row_tx = 0, row_rx = 0, row_bad = 0;
	double next_sync_s;
	int rc;

	memset(&d, 0, sizeof d);
	if ((rc = conf_read(cfg, &d.fc)))
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
	d.last_heard_s = run_s(&d.fc.ec);
	dev_pump(&d); /* what a restart found queued */
	next_sync_s = run_s(&d.fc.ec) + d.fc.sync_s;
	next_eval_s = run_s(&d.fc.ec) + d.fc.ec.eval_every_s;
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
		    (d.fc.sync_s > 0 && run_s(&d.fc.ec) >= next_sync_s)) {
			if ((rc = dev_version(&d, d.fc.strategy)) < 0)
				break;
			since = 0;
			next_sync_s = run_s(&d.fc.ec) + d.fc.sync_s;
		}
		if ((rc = dev_poll(&d, 0)) < 0)
			break;
		engine_trace_row(trace, &d.fc.ec, clock_now_ns(), step, compute_s, 0, -1,
				 fleet_queue_version(d.q), loss, d.bytes_tx - row_tx, d.bytes_rx - row_rx,
				 d.bad - row_bad);
		row_tx = d.bytes_tx;
		row_rx = d.bytes_rx;
		row_bad = d.bad;
		if (d.fc.ec.eval_every_s > 0 && run_s(&d.fc.ec) >= next_eval_s) {
			dev_eval(&d, ev, step);
			next_eval_s = run_s(&d.fc.ec) + d.fc.ec.eval_every_s;
		}
	}
	if (rc < 0)
		goto done;
	/* The last steps become a version too, then the queue gets FLEET_DRAIN_S to drain. */
	if (since > 0 && !d.bye)
		dev_version(&d, d.fc.strategy);
	dev_eval(&d, ev, step);
	{
		double until = run_s(&d.fc.ec) + FLEET_DRAIN_S;

		while (fleet_queue_pending(d.q) && !d.bye && run_s(&d.fc.ec) < until)
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

		msg_send(d.sock, NULL, 0, &bye, NULL, &d.bytes_tx);
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
	if (d.ctl && rc == 0) {
		ctl_client_status(d.ctl, step, CTL_DONE, false);
		ctl_client_done(d.ctl);
	}
out:
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
