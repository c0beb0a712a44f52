/* node/fleet_sync: see fleet_sync.h.
 *
 * The plan keeps, per device, an array of offers sorted by (version, holder); the arrays stay
 * small (versions a registry lacks times the holders of each, k), so an insertion sort on
 * add and linear scans are enough. */
#include "node/fleet_sync.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "node/wire.h"

size_t fleet_sync_summary_bytes(size_t n)
{
	return 8 + n * FLEET_SYNC_ENTRY_BYTES + 8;
}

size_t fleet_sync_summary_max(void)
{
	return fleet_sync_summary_bytes(FLEET_SYNC_CHUNK);
}

static bool before(const struct fleet_sync_entry *a, const struct fleet_sync_entry *b)
{
	return a->device < b->device || (a->device == b->device && a->version < b->version);
}

int fleet_sync_summary_encode(const struct fleet_sync_entry *e, size_t n, uint8_t *out, size_t cap)
{
	uint32_t magic = FLEET_SYNC_MAGIC, count = (uint32_t)n;
	size_t len = fleet_sync_summary_bytes(n), off = 8;
	uint64_t check;

	if (n > FLEET_SYNC_CHUNK)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (e[i].version < 1 || (i && !before(&e[i - 1], &e[i])))
			return -EINVAL;
	if (len > cap)
		return -ENOSPC;
	memcpy(out, &magic, 4);
	memcpy(out + 4, &count, 4);
	for (size_t i = 0; i < n; i++) {
		memcpy(out + off, &e[i].device, 4);
		memcpy(out + off + 4, &e[i].version, 8);
		memcpy(out + off + 12, e[i].hash, FLEET_HASH_BYTES);
		off += FLEET_SYNC_ENTRY_BYTES;
	}
	check = wire_hash64(out, off, 0);
	memcpy(out + off, &check, 8);
	return (int)len;
}

int fleet_sync_summary_decode(const uint8_t *buf, size_t len, uint32_t ndevices,
			      struct fleet_sync_entry *out, size_t cap)
{
	uint32_t magic, count;
	uint64_t check;
	size_t off = 8;

	if (!buf || len < fleet_sync_summary_bytes(0))
		return -EBADMSG;
	memcpy(&magic, buf, 4);
	memcpy(&count, buf + 4, 4);
	if (magic != FLEET_SYNC_MAGIC || count > FLEET_SYNC_CHUNK || count > cap ||
	    len != fleet_sync_summary_bytes(count))
		return -EBADMSG;
	memcpy(&check, buf + len - 8, 8);
	if (check != wire_hash64(buf, len - 8, 0))
		return -EBADMSG;
	for (uint32_t i = 0; i < count; i++) {
		memcpy(&out[i].device, buf + off, 4);
		memcpy(&out[i].version, buf + off + 4, 8);
		memcpy(out[i].hash, buf + off + 12, FLEET_HASH_BYTES);
		off += FLEET_SYNC_ENTRY_BYTES;
		if (out[i].device >= ndevices || out[i].version < 1 || (i && !before(&out[i - 1], &out[i])))
			return -EBADMSG;
	}
	return (int)count;
}

struct offer {
	int64_t version;
	uint32_t holder;
	bool tried;
	uint8_t hash[FLEET_HASH_BYTES];
};

struct offers {
	struct offer *o;
	size_t n, cap;
};

struct fleet_sync_plan {
	uint32_t ndevices;
	struct offers *dev;
};

struct fleet_sync_plan *fleet_sync_plan_new(uint32_t ndevices)
{
	struct fleet_sync_plan *self = calloc(1, sizeof *self);

	if (!self)
		return NULL;
	self->ndevices = ndevices;
	self->dev = calloc(ndevices ? ndevices : 1, sizeof *self->dev);
	if (!self->dev) {
		free(self);
		return NULL;
	}
	return self;
}

void fleet_sync_plan_destroy(struct fleet_sync_plan **p)
{
	struct fleet_sync_plan *self = p ? *p : NULL;

	if (!self)
		return;
	for (uint32_t i = 0; i < self->ndevices; i++)
		free(self->dev[i].o);
	free(self->dev);
	free(self);
	*p = NULL;
}

/* Insert keeping (version, holder) order. */
static int offer_insert(struct offers *s, const struct offer *x)
{
	size_t at;

	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct offer *p = realloc(s->o, cap * sizeof *p);

		if (!p)
			return -ENOMEM;
		s->o = p;
		s->cap = cap;
	}
	at = s->n;
	while (at > 0 && (s->o[at - 1].version > x->version ||
			  (s->o[at - 1].version == x->version && s->o[at - 1].holder > x->holder)))
		at--;
	memmove(s->o + at + 1, s->o + at, (s->n - at) * sizeof *s->o);
	s->o[at] = *x;
	s->n++;
	return 0;
}

int fleet_sync_plan_add(struct fleet_sync_plan *self, uint32_t holder, const struct fleet_sync_entry *e,
			size_t n, fleet_sync_have_fn have, void *arg, struct fleet_sync_counts *c)
{
	for (size_t i = 0; i < n; i++) {
		struct offers *s;
		struct offer x = { .version = e[i].version, .holder = holder };
		uint8_t h[FLEET_HASH_BYTES];
		bool known = false, dup = false;
		int rc;

		if (e[i].device >= self->ndevices || e[i].version < 1)
			return -EINVAL;
		c->offered++;
		rc = have(arg, e[i].device, e[i].version, h);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			if (memcmp(h, e[i].hash, FLEET_HASH_BYTES))
				c->divergent++;
			else
				c->held++;
			continue;
		}
		s = &self->dev[e[i].device];
		for (size_t j = 0; j < s->n; j++)
			if (s->o[j].version == e[i].version) {
				known = true;
				dup |= s->o[j].holder == holder;
			}
		if (dup) {
			c->duplicate++;
			continue;
		}
		memcpy(x.hash, e[i].hash, FLEET_HASH_BYTES);
		if ((rc = offer_insert(s, &x)) < 0)
			return rc;
		c->wanted += !known;
	}
	return 0;
}

int fleet_sync_plan_next(const struct fleet_sync_plan *self, uint32_t device, int64_t *version,
			 uint32_t *holder, uint8_t hash[FLEET_HASH_BYTES])
{
	const struct offers *s;

	if (device >= self->ndevices)
		return 0;
	s = &self->dev[device];
	for (size_t j = 0; j < s->n; j++)
		if (!s->o[j].tried) {
			*version = s->o[j].version;
			*holder = s->o[j].holder;
			memcpy(hash, s->o[j].hash, FLEET_HASH_BYTES);
			return 1;
		}
	return 0;
}

int fleet_sync_plan_offer(const struct fleet_sync_plan *self, uint32_t device, int64_t version,
			  uint32_t holder, uint8_t hash[FLEET_HASH_BYTES])
{
	if (device >= self->ndevices)
		return 0;
	for (size_t j = 0; j < self->dev[device].n; j++) {
		const struct offer *o = &self->dev[device].o[j];

		if (o->version == version && o->holder == holder && !o->tried) {
			memcpy(hash, o->hash, FLEET_HASH_BYTES);
			return 1;
		}
	}
	return 0;
}

void fleet_sync_plan_result(struct fleet_sync_plan *self, uint32_t device, int64_t version,
			    uint32_t holder, bool ok)
{
	struct offers *s;
	size_t w = 0;

	if (device >= self->ndevices)
		return;
	s = &self->dev[device];
	for (size_t j = 0; j < s->n; j++) {
		if (s->o[j].version == version && (ok || s->o[j].holder == holder)) {
			if (ok)
				continue; /* dropped */
			s->o[j].tried = true;
		}
		s->o[w++] = s->o[j];
	}
	s->n = w;
}

void fleet_sync_plan_retry(struct fleet_sync_plan *self, uint32_t device, int64_t version)
{
	if (device >= self->ndevices)
		return;
	for (size_t j = 0; j < self->dev[device].n; j++)
		if (self->dev[device].o[j].version == version)
			self->dev[device].o[j].tried = false;
}

size_t fleet_sync_plan_pending(const struct fleet_sync_plan *self, uint32_t device)
{
	const struct offers *s;
	size_t count = 0;
	int64_t last = 0;

	if (device >= self->ndevices)
		return 0;
	s = &self->dev[device];
	for (size_t j = 0; j < s->n; j++)
		if (!s->o[j].tried && s->o[j].version != last) {
			count++;
			last = s->o[j].version;
		}
	return count;
}
