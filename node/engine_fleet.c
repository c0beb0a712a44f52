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
#include "node/fleet_sync.h"
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
	bool peers;        /* fleet.registry peers: devices keep their peers' versions */
	int64_t npeers;    /* fleet.peers: how many each device sends its versions to */
};

static double run_s(const struct engine_conf *c)
{
	return (double)(clock_now_ns() - c->origin_ns) / 1e9;
}

/* fleet.registry central | peers, and fleet.peers 1..N-1 (peers only). */
static int conf_read_registry(const struct kv *cfg, struct fleet_conf *fc)
{
	const char *mode = kv_get(cfg, "fleet.registry");

	fc->peers = mode && !strcmp(mode, "peers");
	if (mode && !fc->peers && strcmp(mode, "central")) {
		log_error("engine_fleet: fleet.registry '%s' (expected central or peers)", mode);
		return -EINVAL;
	}
	if (fc->peers && (fc->ec.n < 2 || fc->npeers < 1 || fc->npeers > (int64_t)fc->ec.n - 1)) {
		log_error("engine_fleet: fleet.peers %lld (expected 1..%u)", (long long)fc->npeers,
			  fc->ec.n > 1 ? fc->ec.n - 1 : 0);
		return -EINVAL;
	}
	return 0;
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
	rc = rc ? rc : kv_get_i64(cfg, "fleet.peers", 2, &fc->npeers);
	if (rc)
		goto fail;
	if ((rc = conf_read_registry(cfg, fc)) < 0)
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
	struct repair *rep;  /* fleet.registry peers: the rebuild from the devices */
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

/* --- registry: rebuilding from the peers (fleet.registry peers) ----------------------------
 *
 * On every start the registry asks each device, on its first message, for a summary of the
 * versions it holds of its peers (node/fleet_sync), pulls what its own store lacks, lowest
 * version of a device first, from whichever holder offers it, and verifies each frame: its
 * decode (hash of the model it applies to and of the result) and the hash the summary
 * offered. A device is "repaired" once every device holding its versions has answered (or
 * FLEET_REPAIR_WAIT_S passed), nothing it lacks is still offered, and the registry holds every
 * version below the first one of the device's resent queue (it had acknowledged those); until
 * then the registry leaves the device's own syncs and hellos unanswered (it resends), so its
 * chain continues on top of what was rebuilt. One fleet_repair.csv row per device says what
 * it took. */

#define FLEET_REPAIR_WAIT_S 10.0 /* holders that have not answered by then are not waited for */
/* A device's resent queue says what the registry must hold (everything below its first queued
 * version); holders still receiving those versions are asked again, every FLEET_REASK_S, for
 * at most FLEET_REPAIR_MAX_S. */
#define FLEET_REASK_S 1.0
#define FLEET_REPAIR_MAX_S 60.0
#define FLEET_PULL_TIMEOUT_S 10.0 /* no answer to the oldest pull: that holder failed it */
/* Pulls in flight per device: consecutive versions from one holder, which answers them in
 * order over one connection, so a slow link costs one round trip per window, not per version. */
#define FLEET_PULL_WINDOW 8

struct rep_pull {
	int64_t v;
	uint64_t serial;       /* echoed by the holder: a late answer to a dropped pull is ignored */
	uint8_t hash[FLEET_HASH_BYTES];
};

struct rep_dev {
	bool done;
	struct rep_pull win[FLEET_PULL_WINDOW];
	size_t nwin;
	uint32_t win_h;        /* the holder every pull in the window goes to */
	double win_t;          /* last progress of the window */
	int64_t need;          /* the registry must hold up to this version (-1: not known yet) */
	double next_ask;
	int64_t cur;          /* the version cur_model is (-1: none) */
	uint32_t cur_chain;
	float *cur_model;
	uint64_t offered, pulled, bytes_pulled, bytes_summary, rejected, divergent;
};

struct repair {
	struct fleet_sync_plan *plan;
	struct rep_dev *rd;
	bool *asked, *answered;
	struct fleet_sync_entry *chunk;
	double t0;
	uint64_t serial;
	struct csv_writer *csv;
};

/* Devices holding device j's versions: the k before it on the ring (device i pushes to
 * i+1 .. i+k). */
static bool holds_for(uint32_t n, uint32_t k, uint32_t holder, uint32_t origin)
{
	uint32_t d = (holder + n - origin) % n;

	return d >= 1 && d <= k;
}

static void repair_destroy(struct repair **p, uint32_t n)
{
	struct repair *rp = p ? *p : NULL;

	if (!rp)
		return;
	fleet_sync_plan_destroy(&rp->plan);
	for (uint32_t i = 0; rp->rd && i < n; i++)
		free(rp->rd[i].cur_model);
	free(rp->rd);
	free(rp->asked);
	free(rp->answered);
	free(rp->chunk);
	csv_writer_close(&rp->csv);
	free(rp);
	*p = NULL;
}

static int repair_open(struct registry *r)
{
	struct repair *rp = calloc(1, sizeof *rp);
	uint32_t n = r->fc.ec.n;
	char path[4200];

	if (!rp)
		return -ENOMEM;
	r->rep = rp;
	rp->plan = fleet_sync_plan_new(n);
	rp->rd = calloc(n, sizeof *rp->rd);
	rp->asked = calloc(n, sizeof *rp->asked);
	rp->answered = calloc(n, sizeof *rp->answered);
	rp->chunk = calloc(FLEET_SYNC_CHUNK, sizeof *rp->chunk);
	if (!rp->plan || !rp->rd || !rp->asked || !rp->answered || !rp->chunk)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		rp->rd[i].cur = -1;
		rp->rd[i].need = -1;
	}
	snprintf(path, sizeof path, "%s/fleet_repair.csv", r->fc.ec.run_dir);
	if (!(rp->csv = csv_writer_open(path, TRACE_HEADER_FLEET_REPAIR)))
		return -EIO;
	rp->t0 = run_s(&r->fc.ec);
	return 0;
}

static void rep_ask(struct registry *r, uint32_t h, uint32_t after_dev, int64_t after_v)
{
	struct fleet_msg q = { .type = FLEET_MSG_SUMMARY_REQ, .device = h, .version = after_v,
			       .aux = after_dev };

	reg_reply(r, h, &q, NULL);
}

static int rep_have(void *arg, uint32_t device, int64_t version, uint8_t hash[FLEET_HASH_BYTES])
{
	struct registry *r = arg;
	struct fleet_version row;
	int rc = fleet_store_get(r->store, r->fc.ec.names[device], version, &row);

	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	memcpy(hash, row.hash, FLEET_HASH_BYTES);
	return 1;
}

/* A summary chunk from holder h: plan what to pull; ask for the next chunk or mark h answered. */
static void rep_summary(struct registry *r, uint32_t h, struct rmsg *m)
{
	struct repair *rp = r->rep;
	struct fleet_sync_counts c = { 0 };
	int cnt = fleet_sync_summary_decode(rmsg_payload(m), m->h.payload_len, r->fc.ec.n, rp->chunk,
					    FLEET_SYNC_CHUNK);

	if (cnt < 0) {
		r->bad++;
		rp->answered[h] = true; /* a holder that cannot say what it holds is not waited for */
		log_warn("engine_fleet: %s sent a summary that does not check out", r->fc.ec.names[h]);
		return;
	}
	for (int e = 0; e < cnt; e++) {
		struct rep_dev *o = &rp->rd[rp->chunk[e].device];
		struct fleet_sync_counts one = { 0 };

		if (fleet_sync_plan_add(rp->plan, h, &rp->chunk[e], 1, rep_have, r, &one) < 0)
			continue;
		o->offered++;
		o->divergent += one.divergent;
		o->bytes_summary += FLEET_SYNC_ENTRY_BYTES;
		c.divergent += one.divergent;
	}
	rp->rd[h].bytes_summary += fleet_sync_summary_bytes(0);
	if (c.divergent)
		log_warn("engine_fleet: %s offers %llu versions under another hash than the stored one",
			 r->fc.ec.names[h], (unsigned long long)c.divergent);
	if (m->h.aux == 1 || cnt == 0)
		rp->answered[h] = true;
	else
		rep_ask(r, h, rp->chunk[cnt - 1].device, rp->chunk[cnt - 1].version);
}

/* The model of version v-1 of device j into rd->cur_model, for a delta of v to apply on.
 * Returns 0, or negative when the registry does not hold it. */
static int rep_parent(struct registry *r, uint32_t j, int64_t v)
{
	struct rep_dev *o = &r->rep->rd[j];
	struct fleet_version row;
	uint32_t chain = 0;
	int rc;

	if (o->cur == v - 1)
		return 0;
	if (!o->cur_model && !(o->cur_model = malloc(r->n * sizeof(float))))
		return -ENOMEM;
	o->cur = -1;
	if (v - 1 == 0) {
		memcpy(o->cur_model, r->base, r->n * sizeof(float));
		o->cur_chain = 0;
	} else {
		if ((rc = fleet_store_get(r->store, r->fc.ec.names[j], v - 1, &row)) < 0 ||
		    (rc = fleet_store_rebuild(r->store, r->fc.ec.names[j], v - 1, o->cur_model, &chain)) < 0)
			return rc;
		o->cur_chain = row.chain_len;
	}
	o->cur = v - 1;
	return 0;
}

static void rep_done(struct registry *r, uint32_t j)
{
	struct rep_dev *o = &r->rep->rd[j];
	struct reg_dev *d = &r->dev[j];
	uint32_t holders = 0;
	double now = run_s(&r->fc.ec);

	o->done = true;
	for (uint32_t h = 0; h < r->fc.ec.n; h++)
		holders += holds_for(r->fc.ec.n, (uint32_t)r->fc.npeers, h, j) && r->rep->answered[h];
	if (dev_load(r, j) < 0)
		return;
	csv_writer_row(r->rep->csv, "%.6f,%s,%u,%llu,%llu,%llu,%llu,%llu,%llu,%lld,%.6f", now,
		       r->fc.ec.names[j], holders, (unsigned long long)o->offered,
		       (unsigned long long)o->pulled, (unsigned long long)o->bytes_summary,
		       (unsigned long long)o->bytes_pulled, (unsigned long long)o->rejected,
		       (unsigned long long)o->divergent, (long long)d->latest, now - r->rep->t0);
	if (o->pulled)
		log_info("engine_fleet: %s rebuilt from its peers: %llu versions pulled (%llu bytes, "
			 "%llu rejected), latest %lld, after %.3f s", r->fc.ec.names[j],
			 (unsigned long long)o->pulled, (unsigned long long)o->bytes_pulled,
			 (unsigned long long)o->rejected, (long long)d->latest, now - r->rep->t0);
	/* The device continues on top of what was rebuilt (its queue below it is acknowledged). */
	if (d->idlen)
		reg_ack(r, j, d->latest + 1, FLEET_ACK_OUT_OF_ORDER);
	free(o->cur_model);
	o->cur_model = NULL;
	o->cur = -1;
}

/* Issue the next pull of each device, time out lost ones, finish repaired devices. */
static void rep_pump(struct registry *r)
{
	struct repair *rp = r->rep;
	double now = run_s(&r->fc.ec);
	uint32_t n = r->fc.ec.n;

	for (uint32_t j = 0; j < n; j++) {
		struct rep_dev *o = &rp->rd[j];
		bool waiting = false;

		if (o->done)
			continue;
		if (o->nwin && now - o->win_t > FLEET_PULL_TIMEOUT_S) {
			fleet_sync_plan_result(rp->plan, j, o->win[0].v, o->win_h, false);
			o->nwin = 0;
		}
		if (o->nwin)
			continue;
		if (fleet_sync_plan_next(rp->plan, j, &o->win[0].v, &o->win_h, o->win[0].hash) == 1) {
			bool full;

			if (dev_load(r, j) < 0)
				continue;
			/* Only the first may need a full frame: the rest apply on their predecessor. */
			full = rep_parent(r, j, o->win[0].v) < 0;
			o->nwin = 1;
			while (o->nwin < FLEET_PULL_WINDOW &&
			       fleet_sync_plan_offer(rp->plan, j, o->win[0].v + (int64_t)o->nwin, o->win_h,
						     o->win[o->nwin].hash) == 1) {
				o->win[o->nwin].v = o->win[0].v + (int64_t)o->nwin;
				o->nwin++;
			}
			for (size_t w = 0; w < o->nwin; w++) {
				struct fleet_msg q = { .type = FLEET_MSG_PULL, .device = o->win_h,
						       .version = o->win[w].v, .aux = j,
						       .parent = w == 0 && full };

				o->win[w].serial = ++rp->serial;
				q.t_sent = (double)o->win[w].serial;
				reg_reply(r, o->win_h, &q, NULL);
			}
			o->win_t = now;
			continue;
		}
		for (uint32_t h = 0; h < n; h++)
			waiting |= holds_for(n, (uint32_t)r->fc.npeers, h, j) && !rp->answered[h];
		if (waiting && now - rp->t0 < FLEET_REPAIR_WAIT_S)
			continue;
		if (o->need > 0 && now - rp->t0 < FLEET_REPAIR_MAX_S && dev_load(r, j) == 0 &&
		    r->dev[j].latest < o->need) {
			/* The device's queue starts above what was rebuilt: the holders may still be
			 * receiving those versions. Ask them again for what lies above. */
			if (now >= o->next_ask) {
				for (uint32_t h = 0; h < n; h++)
					if (holds_for(n, (uint32_t)r->fc.npeers, h, j) && r->dev[h].idlen)
						rep_ask(r, h, j, r->dev[j].latest);
				o->next_ask = now + FLEET_REASK_S;
			}
			continue;
		}
		rep_done(r, j);
	}
}

/* A pulled frame from holder h. */
static void rep_pulled(struct registry *r, uint32_t h, struct rmsg *m)
{
	struct repair *rp = r->rep;
	uint32_t j = (uint32_t)m->h.aux;
	struct rep_dev *o;
	struct reg_dev *d;
	struct fleet_frame_info in;
	struct fleet_version row;
	struct rep_pull pl;
	const uint8_t *frame = rmsg_payload(m);
	size_t len = m->h.payload_len;
	int64_t v = m->h.version;
	bool ok = false;
	int rc;

	if (m->h.aux < 0 || m->h.aux >= (int64_t)r->fc.ec.n) {
		r->bad++;
		return;
	}
	o = &rp->rd[j];
	d = &r->dev[j];
	if (o->done || !o->nwin || o->win_h != h || o->win[0].v != v ||
	    (double)o->win[0].serial != m->h.t_sent)
		return; /* late or unasked: ignored */
	pl = o->win[0];
	memmove(o->win, o->win + 1, (o->nwin - 1) * sizeof *o->win);
	o->nwin--;
	o->win_t = run_s(&r->fc.ec);
	o->bytes_pulled += len + FLEET_PROTO_HEADER_BYTES;
	if (!frame) {
		/* Not held after all: try another holder; the rest of the window applied on it. */
		fleet_sync_plan_result(rp->plan, j, v, h, false);
		o->nwin = 0;
		return;
	}
	if (fleet_codec_peek(frame, len, &in) < 0 || in.n != r->n || in.strategy == FLEET_REPLAY ||
	    memcmp(in.hash, pl.hash, FLEET_HASH_BYTES) ||
	    (in.strategy != FLEET_FULL && (o->cur != v - 1 || m->h.parent != v - 1))) {
		rc = -EBADMSG;
	} else {
		rc = fleet_store_ingest(r->store, r->fc.ec.names[j], v, v - 1, o->cur_chain,
					in.strategy == FLEET_FULL ? NULL : o->cur_model, frame, len,
					run_s(&r->fc.ec), run_s(&r->fc.ec), r->scratch, &row);
		ok = rc >= 0;
	}
	if (!ok) {
		o->rejected++;
		log_warn("engine_fleet: %s@%lld pulled from %s does not verify (%s)", r->fc.ec.names[j],
			 (long long)v, r->fc.ec.names[h], strerror(-rc));
		fleet_sync_plan_result(rp->plan, j, v, h, false);
		o->nwin = 0;
		return;
	}
	o->pulled++;
	fleet_sync_plan_result(rp->plan, j, v, h, true);
	fleet_sync_plan_retry(rp->plan, j, v + 1);
	if (!o->cur_model && !(o->cur_model = malloc(r->n * sizeof(float))))
		return;
	memcpy(o->cur_model, r->scratch, r->n * sizeof(float));
	o->cur = v;
	o->cur_chain = row.chain_len;
	if (dev_load(r, j) == 0 && v > d->latest) {
		memcpy(d->model, r->scratch, r->n * sizeof(float));
		d->latest = v;
		d->chain = row.chain_len;
	}
}

/* Peers mode: called for every message from device i before it is handled. Returns true when
 * the message is to be left unanswered (the device's own chain waits for its repair). */
static bool rep_gate(struct registry *r, uint32_t i, struct rmsg *m)
{
	struct repair *rp = r->rep;

	if (!rp->asked[i]) {
		rp->asked[i] = true;
		rep_ask(r, i, 0, 0);
	}
	switch (m->h.type) {
	case FLEET_MSG_SUMMARY:
		rep_summary(r, i, m);
		rep_pump(r);
		return true;
	case FLEET_MSG_PULLED:
		rep_pulled(r, i, m);
		rep_pump(r);
		return true;
	case FLEET_MSG_SYNC:
		/* A device sends its queue from its first unacknowledged version: the registry had
		 * acknowledged everything below it. */
		if (!rp->rd[i].done && m->h.version >= 1 &&
		    (rp->rd[i].need < 0 || m->h.version - 1 < rp->rd[i].need))
			rp->rd[i].need = m->h.version - 1;
		return !rp->rd[i].done;
	case FLEET_MSG_HELLO:
		/* A device that never made a version has none anywhere: nothing to wait for (a
		 * fresh run does not wait for late or dead holders). */
		if (!rp->rd[i].done && m->h.version == 0 && !rp->rd[i].nwin &&
		    !fleet_sync_plan_pending(rp->plan, i))
			rep_done(r, i);
		return !rp->rd[i].done;
	default:
		return false;
	}
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
	if (r->rep && rep_gate(r, i, m))
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
	if (maxp < fleet_sync_summary_max())
		maxp = fleet_sync_summary_max();
	if (r.fc.peers && (rc = repair_open(&r)) < 0)
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
	if (r.rep)
		r.rep->t0 = run_s(&r.fc.ec); /* the control plane's start moved the run's clock */
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
		if (r.rep)
			rep_pump(&r);
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
	repair_destroy(&r.rep, r.fc.ec.n);
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
	struct dev_peers *pe;   /* fleet.registry peers (NULL: central) */
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

/* --- device: keeping the versions of peers (fleet.registry peers) ---------------------------
 *
 * Device i sends each version it makes to the next fleet.peers devices on the ring (i+1 ..
 * i+k), over its own link, and keeps the versions of the k devices before it in its own store
 * (RUN_DIR/nodes/<device>.peers.sqlite, the registry's node/fleet_store format: WAL, verified
 * by decoding, snapshots every fleet.snapshot_every). A peer that cannot take a version (it
 * missed the one before) says so, and the next version goes to it as a full frame. For a
 * registry that lost its store, the device answers summary requests and pulls from that
 * store. */

struct dev_peers {
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

static void peers_close(struct dev_peers **p, uint32_t n)
{
	struct dev_peers *pe = p ? *p : NULL;

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
static int peers_base(const struct device *d, const float *init, uint8_t **frame, size_t *len)
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

static int peers_open(struct device *d, const struct kv *cfg)
{
	struct dev_peers *pe = calloc(1, sizeof *pe);
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
static void peers_push(struct device *d, const uint8_t *frame, size_t len, const float *params)
{
	struct dev_peers *pe = d->pe;
	int64_t v = fleet_queue_version(d->q);
	uint8_t *full = NULL;
	size_t flen = 0;

	for (uint32_t i = 0; i < pe->k; i++) {
		struct fleet_msg m = { .type = FLEET_MSG_PEER_SYNC, .device = d->fc.ec.index, .version = v,
				       .parent = v - 1, .t_sent = run_s(&d->fc.ec) };
		const uint8_t *f = frame;

		m.payload_len = (uint32_t)len;
		if (pe->out_full[i]) {
			if (!full && fleet_codec_encode(FLEET_FULL, params, NULL, d->n, &full, &flen) < 0)
				continue;
			f = full;
			m.payload_len = (uint32_t)flen;
		}
		if (msg_send(pe->out[i], NULL, 0, &m, f, &pe->bytes_tx) == 0)
			pe->out_full[i] = false;
	}
	free(full);
}

static int peers_held_load(struct device *d, uint32_t o)
{
	struct dev_peers *pe = d->pe;
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
static void peers_take(struct device *d, struct rmsg *m)
{
	struct dev_peers *pe = d->pe;
	uint32_t o = m->h.device;
	struct fleet_frame_info in;
	struct fleet_version row;
	int64_t v = m->h.version;
	const uint8_t *frame = rmsg_payload(m);
	char want[16];
	int rc;

	snprintf(want, sizeof want, "p%u", o);
	if (m->h.type != FLEET_MSG_PEER_SYNC || o >= d->fc.ec.n || !frame || m->idlen != strlen(want) ||
	    memcmp(m->id, want, m->idlen) || !holds_for(d->fc.ec.n, pe->k, d->fc.ec.index, o) || v < 1 ||
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
					run_s(&d->fc.ec), pe->scratch, &row);
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

		msg_send(pe->rsock, m->id, m->idlen, &a, NULL, &pe->bytes_tx);
	}
}

/* Read what the peers sent (never waits). */
static void peers_poll(struct device *d)
{
	struct dev_peers *pe = d->pe;
	struct rmsg m;
	size_t maxp = fleet_codec_frame_max(d->n);

	while (msg_recv(pe->rsock, true, maxp, 0, &m, &pe->bad, &pe->bytes_rx) == 1) {
		peers_take(d, &m);
		rmsg_close(&m);
	}
	for (uint32_t i = 0; i < pe->k; i++)
		while (msg_recv(pe->out[i], false, maxp, 0, &m, &pe->bad, &pe->bytes_rx) == 1) {
			if (m.h.type == FLEET_MSG_PEER_ACK)
				pe->out_full[i] = true;
			rmsg_close(&m);
		}
}

static int name_index(const struct device *d, const char *name, uint32_t *out)
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
	struct device *d = arg;
	struct dev_peers *pe = d->pe;
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
static void peers_serve(struct device *d, const struct fleet_msg *h)
{
	struct dev_peers *pe = d->pe;
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
	msg_send(d->sock, NULL, 0, &a, buf, &d->bytes_tx);
	free(buf);
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
	if (rc >= 0 && d->pe)
		peers_push(d, frame, len, params);
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

	if (d->pe)
		peers_poll(d);
	while ((rc = msg_recv(d->sock, false, fleet_codec_frame_max(d->n), timeout_ms, &m, &d->bad,
			      &d->bytes_rx)) == 1) {
		timeout_ms = 0;
		if (m.h.type == FLEET_MSG_ACK)
			dev_ack(d, &m.h);
		else if (d->pe && (m.h.type == FLEET_MSG_SUMMARY_REQ || m.h.type == FLEET_MSG_PULL))
			peers_serve(d, &m.h);
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
		if (d->pe)
			peers_poll(d);
		rc = msg_recv(d->sock, false, fleet_codec_frame_max(d->n), 200, &m, &d->bad, &d->bytes_rx);
		if (rc < 0)
			return rc;
		if (rc == 0)
			continue;
		if (d->pe && (m.h.type == FLEET_MSG_SUMMARY_REQ || m.h.type == FLEET_MSG_PULL)) {
			peers_serve(d, &m.h);
			rmsg_close(&m);
			continue;
		}
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
	if (d.fc.peers && (rc = peers_open(&d, cfg)) < 0)
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
	if (d.pe)
		log_info("engine_fleet: %s peers: %llu versions of peers stored, %llu refused, %llu bad "
			 "messages, %llu bytes to peers, %llu versions served to the registry",
			 d.fc.ec.name, (unsigned long long)d.pe->stored, (unsigned long long)d.pe->rejected,
			 (unsigned long long)d.pe->bad, (unsigned long long)d.pe->bytes_tx,
			 (unsigned long long)d.pe->served);
	if (d.ctl && rc == 0) {
		ctl_client_status(d.ctl, step, CTL_DONE, false);
		ctl_client_done(d.ctl);
	}
out:
	peers_close(&d.pe, d.fc.ec.n);
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
