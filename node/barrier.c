/* node/barrier: see barrier.h. Pure functions over a clock vector.
 *
 * Sampling is a partial Fisher-Yates shuffle over the candidate list (live workers other than
 * self): the first k positions after k swaps are a uniform k-subset drawn without replacement,
 * in O(n) time and without rejection loops, so the cost per crossing is bounded. */
#include "node/barrier.h"

#include <errno.h>
#include <string.h>

static const char *const kind_names[] = { "bsp", "ssp", "asp", "pbsp", "pssp" };

int barrier_kind_parse(const char *name, enum barrier_kind *out)
{
	if (!name || !out)
		return -EINVAL;
	for (size_t i = 0; i < sizeof kind_names / sizeof kind_names[0]; i++) {
		if (!strcmp(name, kind_names[i])) {
			*out = (enum barrier_kind)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *barrier_kind_name(enum barrier_kind kind)
{
	if ((unsigned)kind >= sizeof kind_names / sizeof kind_names[0])
		return "?";
	return kind_names[kind];
}

static const char *const draw_names[] = { "crossing", "check" };

int barrier_draw_parse(const char *name, enum barrier_draw *out)
{
	if (!name || !out)
		return -EINVAL;
	for (size_t i = 0; i < sizeof draw_names / sizeof draw_names[0]; i++) {
		if (!strcmp(name, draw_names[i])) {
			*out = (enum barrier_draw)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *barrier_draw_name(enum barrier_draw draw)
{
	if ((unsigned)draw >= sizeof draw_names / sizeof draw_names[0])
		return "?";
	return draw_names[draw];
}

bool barrier_is_sampled(enum barrier_kind kind)
{
	return kind == BARRIER_PBSP || kind == BARRIER_PSSP;
}

int64_t barrier_threshold(const struct barrier_params *p, int64_t c)
{
	int64_t s = p->staleness > 0 ? p->staleness : 0;

	switch (p->kind) {
	case BARRIER_BSP:
	case BARRIER_PBSP:
		return c;
	case BARRIER_SSP:
	case BARRIER_PSSP:
		/* c - s, saturating: a huge staleness means "never wait". */
		return c < INT64_MIN + s ? INT64_MIN : c - s;
	case BARRIER_ASP:
	default:
		return INT64_MIN;
	}
}

uint64_t barrier_rng_next(uint64_t *state)
{
	/* splitmix64 (Steele, Lea, Flood 2014): full period 2^64, passes BigCrush. */
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t barrier_rng_below(uint64_t *state, uint64_t bound)
{
	/* Reject the top partial block so every residue is equally likely. That block starts at
	 * limit > UINT64_MAX - bound, so a value at or below that is taken without working out
	 * limit (a division less per draw; the same values and rejections). */
	uint64_t limit = 0;
	uint64_t x;

	for (;;) {
		x = barrier_rng_next(state);
		if (x <= UINT64_MAX - bound)
			break;
		if (!limit)
			limit = UINT64_MAX - UINT64_MAX % bound;
		if (x < limit)
			break;
	}
	return x % bound;
}

size_t barrier_sample(uint64_t *rng, size_t n, size_t self, const bool *alive, size_t beta,
		      size_t *out)
{
	size_t m = 0, k;

	for (size_t i = 0; i < n; i++)
		if (i != self && (!alive || alive[i]))
			out[m++] = i;
	k = beta < m ? beta : m;
	for (size_t i = 0; i < k; i++) {
		size_t j = i + (size_t)barrier_rng_below(rng, m - i);
		size_t t = out[i];

		out[i] = out[j];
		out[j] = t;
	}
	return k;
}

bool barrier_may_proceed(const struct barrier_params *p, const int64_t *clocks, const bool *alive,
			 size_t n, size_t self, int64_t c, const size_t *sample, size_t nsample)
{
	int64_t need = barrier_threshold(p, c);

	if (p->kind == BARRIER_ASP)
		return true;
	if (barrier_is_sampled(p->kind)) {
		for (size_t i = 0; i < nsample; i++) {
			size_t w = sample[i];

			if (w < n && w != self && (!alive || alive[w]) && clocks[w] < need)
				return false;
		}
		return true;
	}
	for (size_t i = 0; i < n; i++) {
		/* The worker's own entry may lag its request (c is authoritative for itself). */
		if (i == self || (alive && !alive[i]))
			continue;
		if (clocks[i] < need)
			return false;
	}
	return true;
}

bool barrier_check(const struct barrier_params *p, const int64_t *clocks, const bool *alive,
		   size_t n, size_t self, int64_t c, uint64_t *rng, size_t *scratch)
{
	size_t k = 0;

	if (barrier_is_sampled(p->kind))
		k = barrier_sample(rng, n, self, alive, p->sample, scratch);
	return barrier_may_proceed(p, clocks, alive, n, self, c, scratch, k);
}

static uint32_t round_need(uint32_t live, uint32_t backup)
{
	return live > backup + 1 ? live - backup : 1;
}

void barrier_round_init(struct barrier_round *r, int64_t version, uint32_t live, uint32_t backup)
{
	memset(r, 0, sizeof *r);
	r->version = version;
	r->live = live;
	r->backup = backup;
	r->need = round_need(live, backup);
}

enum barrier_offer barrier_round_offer(struct barrier_round *r, int64_t v)
{
	if (v < r->version) {
		r->late++;
		return BARRIER_LATE;
	}
	if (v > r->version) {
		r->invalid++;
		return BARRIER_INVALID;
	}
	if (r->got >= r->need) {
		/* Closed but not yet advanced by the caller: the update missed the round. */
		r->late++;
		return BARRIER_LATE;
	}
	r->got++;
	return r->got >= r->need ? BARRIER_CLOSE : BARRIER_ACCEPT;
}

void barrier_round_advance(struct barrier_round *r)
{
	r->version++;
	r->got = 0;
	r->need = round_need(r->live, r->backup);
}

bool barrier_round_set_live(struct barrier_round *r, uint32_t live)
{
	bool was_closed = r->got >= r->need;

	r->live = live;
	r->need = round_need(live, r->backup);
	return !was_closed && r->got > 0 && r->got >= r->need;
}
