/* node/fleet_repair: see fleet_repair.h. */
#include "node/fleet_repair.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/csv.h"
#include "collectors/schema.h"
#include "lib/log.h"
#include "node/fleet_codec.h"
#include "node/fleet_registry.h"
#include "node/fleet_store.h"
#include "node/fleet_sync.h"

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

struct fleet_repair {
	struct fleet_sync_plan *plan;
	struct rep_dev *rd;
	bool *asked, *answered;
	struct fleet_sync_entry *chunk;
	double t0;
	uint64_t serial;
	struct csv_writer *csv;
};

void fleet_repair_destroy(struct fleet_repair **p, uint32_t n)
{
	struct fleet_repair *rp = p ? *p : NULL;

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

int fleet_repair_open(struct fleet_registry *r)
{
	struct fleet_repair *rp = calloc(1, sizeof *rp);
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
	rp->t0 = fleet_conf_run_s(&r->fc.ec);
	return 0;
}

static void rep_ask(struct fleet_registry *r, uint32_t h, uint32_t after_dev, int64_t after_v)
{
	struct fleet_msg q = { .type = FLEET_MSG_SUMMARY_REQ, .device = h, .version = after_v,
			       .aux = after_dev };

	fleet_registry_reply(r, h, &q, NULL);
}

static int rep_have(void *arg, uint32_t device, int64_t version, uint8_t hash[FLEET_HASH_BYTES])
{
	struct fleet_registry *r = arg;
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
static void rep_summary(struct fleet_registry *r, uint32_t h, struct fleet_net_msg *m)
{
	struct fleet_repair *rp = r->rep;
	struct fleet_sync_counts c = { 0 };
	int cnt = fleet_sync_summary_decode(fleet_net_msg_payload(m), m->h.payload_len, r->fc.ec.n, rp->chunk,
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
static int rep_parent(struct fleet_registry *r, uint32_t j, int64_t v)
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

static void rep_done(struct fleet_registry *r, uint32_t j)
{
	struct rep_dev *o = &r->rep->rd[j];
	struct fleet_reg_dev *d = &r->dev[j];
	uint32_t holders = 0;
	double now = fleet_conf_run_s(&r->fc.ec);

	o->done = true;
	for (uint32_t h = 0; h < r->fc.ec.n; h++)
		holders += fleet_conf_holds_for(r->fc.ec.n, (uint32_t)r->fc.npeers, h, j) && r->rep->answered[h];
	if (fleet_registry_dev_load(r, j) < 0)
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
		fleet_registry_ack(r, j, d->latest + 1, FLEET_ACK_OUT_OF_ORDER);
	free(o->cur_model);
	o->cur_model = NULL;
	o->cur = -1;
}

/* Issue the next pull of each device, time out lost ones, finish repaired devices. */
void fleet_repair_pump(struct fleet_registry *r)
{
	struct fleet_repair *rp = r->rep;
	double now = fleet_conf_run_s(&r->fc.ec);
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

			if (fleet_registry_dev_load(r, j) < 0)
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
				fleet_registry_reply(r, o->win_h, &q, NULL);
			}
			o->win_t = now;
			continue;
		}
		for (uint32_t h = 0; h < n; h++)
			waiting |= fleet_conf_holds_for(n, (uint32_t)r->fc.npeers, h, j) && !rp->answered[h];
		if (waiting && now - rp->t0 < FLEET_REPAIR_WAIT_S)
			continue;
		if (o->need > 0 && now - rp->t0 < FLEET_REPAIR_MAX_S && fleet_registry_dev_load(r, j) == 0 &&
		    r->dev[j].latest < o->need) {
			/* The device's queue starts above what was rebuilt: the holders may still be
			 * receiving those versions. Ask them again for what lies above. */
			if (now >= o->next_ask) {
				for (uint32_t h = 0; h < n; h++)
					if (fleet_conf_holds_for(n, (uint32_t)r->fc.npeers, h, j) && r->dev[h].idlen)
						rep_ask(r, h, j, r->dev[j].latest);
				o->next_ask = now + FLEET_REASK_S;
			}
			continue;
		}
		rep_done(r, j);
	}
}

/* A pulled frame from holder h. */
static void rep_pulled(struct fleet_registry *r, uint32_t h, struct fleet_net_msg *m)
{
	struct fleet_repair *rp = r->rep;
	uint32_t j = (uint32_t)m->h.aux;
	struct rep_dev *o;
	struct fleet_reg_dev *d;
	struct fleet_frame_info in;
	struct fleet_version row;
	struct rep_pull pl;
	const uint8_t *frame = fleet_net_msg_payload(m);
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
	o->win_t = fleet_conf_run_s(&r->fc.ec);
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
					fleet_conf_run_s(&r->fc.ec), fleet_conf_run_s(&r->fc.ec), r->scratch, &row);
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
	if (fleet_registry_dev_load(r, j) == 0 && v > d->latest) {
		memcpy(d->model, r->scratch, r->n * sizeof(float));
		d->latest = v;
		d->chain = row.chain_len;
	}
}

/* Peers mode: called for every message from device i before it is handled. Returns true when
 * the message is to be left unanswered (the device's own chain waits for its repair). */
bool fleet_repair_gate(struct fleet_registry *r, uint32_t i, struct fleet_net_msg *m)
{
	struct fleet_repair *rp = r->rep;

	if (!rp->asked[i]) {
		rp->asked[i] = true;
		rep_ask(r, i, 0, 0);
	}
	switch (m->h.type) {
	case FLEET_MSG_SUMMARY:
		rep_summary(r, i, m);
		fleet_repair_pump(r);
		return true;
	case FLEET_MSG_PULLED:
		rep_pulled(r, i, m);
		fleet_repair_pump(r);
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

void fleet_repair_restart(struct fleet_repair *rp, double t_s)
{
	rp->t0 = t_s;
}
