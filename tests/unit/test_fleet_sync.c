/* node/fleet_sync: the summary codec (round trip, every bit flip and truncation refused, order
 * and range rules) and the repair plan, checked exhaustively on small cases against a naive
 * model: versions 1..4 of one device, each absent from the registry, held with the same hash or
 * held with another one; two holders offering every subset; pulls that fail at one holder. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "node/fleet_sync.h"
#include "node/wire.h"

static void hash_of(uint32_t device, int64_t version, int salt, uint8_t h[FLEET_HASH_BYTES])
{
	memset(h, 0, FLEET_HASH_BYTES);
	h[0] = (uint8_t)device;
	h[1] = (uint8_t)version;
	h[2] = (uint8_t)salt;
}

Test(fleet_sync, summary_roundtrip_flips_truncations)
{
	struct fleet_sync_entry e[5], g[8];
	uint8_t buf[1024];
	int len;

	for (int i = 0; i < 5; i++) {
		e[i].device = (uint32_t)(i / 2);
		e[i].version = 1 + i % 2 + 10 * i;
		hash_of(e[i].device, e[i].version, 0, e[i].hash);
	}
	len = fleet_sync_summary_encode(e, 5, buf, sizeof buf);
	cr_assert_eq(len, (int)fleet_sync_summary_bytes(5));
	cr_assert_eq(len, 8 + 5 * 44 + 8);
	cr_assert_eq(fleet_sync_summary_decode(buf, (size_t)len, 3, g, 8), 5);
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(g[i].device, e[i].device);
		cr_assert_eq(g[i].version, e[i].version);
		cr_assert_eq(memcmp(g[i].hash, e[i].hash, FLEET_HASH_BYTES), 0);
	}
	for (int i = 0; i < len; i++)
		for (int b = 0; b < 8; b++) {
			buf[i] ^= (uint8_t)(1u << b);
			cr_assert_eq(fleet_sync_summary_decode(buf, (size_t)len, 3, g, 8), -EBADMSG,
				     "flip %d.%d", i, b);
			buf[i] ^= (uint8_t)(1u << b);
		}
	for (int l = 0; l < len; l++)
		cr_assert_eq(fleet_sync_summary_decode(buf, (size_t)l, 3, g, 8), -EBADMSG, "len %d", l);
	/* device 2 with only 2 devices; more entries than the caller has room for */
	cr_assert_eq(fleet_sync_summary_decode(buf, (size_t)len, 2, g, 8), -EBADMSG);
	cr_assert_eq(fleet_sync_summary_decode(buf, (size_t)len, 3, g, 4), -EBADMSG);
	/* the encoder refuses a list out of order, a duplicate, version 0, too many entries */
	e[1] = e[0];
	cr_assert_eq(fleet_sync_summary_encode(e, 5, buf, sizeof buf), -EINVAL);
	e[1].version = 0;
	cr_assert_eq(fleet_sync_summary_encode(e + 1, 1, buf, sizeof buf), -EINVAL);
	cr_assert_eq(fleet_sync_summary_encode(e, FLEET_SYNC_CHUNK + 1, buf, sizeof buf), -EINVAL);
	cr_assert_eq(fleet_sync_summary_encode(e, 1, buf, 10), -ENOSPC);
	/* empty summary */
	len = fleet_sync_summary_encode(e, 0, buf, sizeof buf);
	cr_assert_eq(len, 16);
	cr_assert_eq(fleet_sync_summary_decode(buf, 16, 3, g, 8), 0);
}

/* A decoded summary that is well formed but out of order (a hostile holder) is refused. */
Test(fleet_sync, summary_order_checked_on_decode)
{
	struct fleet_sync_entry e[2] = { { .device = 0, .version = 1 }, { .device = 0, .version = 2 } }, g[2];
	uint8_t buf[256];
	int len = fleet_sync_summary_encode(e, 2, buf, sizeof buf);
	int64_t v = 1;
	uint64_t check;

	cr_assert_gt(len, 0);
	memcpy(buf + 8 + 44 + 4, &v, 8); /* second entry: version 1 again */
	check = wire_hash64(buf, (size_t)len - 8, 0); /* re-sealed: only the order rule refuses it */
	memcpy(buf + len - 8, &check, 8);
	cr_assert_eq(fleet_sync_summary_decode(buf, (size_t)len, 1, g, 2), -EBADMSG);
}

/* The registry's state for the exhaustive cases: per version 0 absent, 1 same hash, 2 other. */
static int reg_state[5];

static int have(void *arg, uint32_t device, int64_t version, uint8_t hash[FLEET_HASH_BYTES])
{
	(void)arg;
	if (reg_state[version] == 0)
		return 0;
	hash_of(device, version, reg_state[version] == 1 ? 0 : 9, hash);
	return 1;
}

static void offer(struct fleet_sync_plan *p, uint32_t holder, int mask, struct fleet_sync_counts *c)
{
	struct fleet_sync_entry e[4];
	size_t n = 0;

	for (int v = 1; v <= 4; v++)
		if (mask & (1 << (v - 1))) {
			e[n].device = 0;
			e[n].version = v;
			hash_of(0, v, 0, e[n].hash);
			n++;
		}
	cr_assert_eq(fleet_sync_plan_add(p, holder, e, n, have, NULL, c), 0);
}

Test(fleet_sync, plan_exhaustive_against_naive_model)
{
	uint64_t cases = 0;

	for (int st = 0; st < 81; st++)
		for (int a = 0; a < 16; a++)
			for (int b = 0; b < 16; b++)
				for (int fail_at_a = 0; fail_at_a < 2; fail_at_a++) {
			struct fleet_sync_plan *p = fleet_sync_plan_new(2);
			struct fleet_sync_counts c = { 0 };
			uint64_t want_held = 0, want_div = 0, want_wanted = 0, want_dup = 0;
			int s = st;

			cr_assert_not_null(p);
			for (int v = 1; v <= 4; v++) {
				reg_state[v] = s % 3;
				s /= 3;
			}
			offer(p, 0, a, &c);
			offer(p, 1, b, &c);
			offer(p, 1, b, &c); /* the same summary twice: duplicates */
			for (int v = 1; v <= 4; v++) {
				int na = (a >> (v - 1)) & 1, nb = (b >> (v - 1)) & 1;

				if (reg_state[v] == 1)
					want_held += (uint64_t)(na + 2 * nb);
				else if (reg_state[v] == 2)
					want_div += (uint64_t)(na + 2 * nb);
				else {
					want_wanted += na || nb;
					want_dup += (uint64_t)nb;
				}
			}
			cr_assert_eq(c.offered, (uint64_t)(__builtin_popcount(a) + 2 * __builtin_popcount(b)));
			cr_assert_eq(c.held, want_held);
			cr_assert_eq(c.divergent, want_div);
			cr_assert_eq(c.wanted, want_wanted);
			cr_assert_eq(c.duplicate, want_dup, "st %d a %d b %d", st, a, b);
			cr_assert_eq(fleet_sync_plan_pending(p, 0), want_wanted);
			cr_assert_eq(fleet_sync_plan_pending(p, 1), 0);
			/* Pull in order. With fail_at_a, every pull from holder 0 fails and the same
			 * version goes to holder 1 when it offered it. */
			for (int v = 1; v <= 4; v++) {
				int na = (a >> (v - 1)) & 1, nb = (b >> (v - 1)) & 1;
				int64_t got;
				uint32_t h;
				uint8_t hh[FLEET_HASH_BYTES], want[FLEET_HASH_BYTES];

				if (reg_state[v] != 0 || !(na || nb))
					continue;
				cr_assert_eq(fleet_sync_plan_next(p, 0, &got, &h, hh), 1);
				cr_assert_eq(got, v);
				cr_assert_eq(h, na ? 0u : 1u);
				hash_of(0, v, 0, want);
				cr_assert_eq(memcmp(hh, want, FLEET_HASH_BYTES), 0);
				if (h == 0 && fail_at_a) {
					fleet_sync_plan_result(p, 0, v, 0, false);
					if (!nb)
						continue; /* nobody else has it: skipped */
					cr_assert_eq(fleet_sync_plan_next(p, 0, &got, &h, hh), 1);
					cr_assert_eq(got, v);
					cr_assert_eq(h, 1u);
				}
				fleet_sync_plan_result(p, 0, v, h, true);
			}
			{
				int64_t got;
				uint32_t h;
				uint8_t hh[FLEET_HASH_BYTES];

				cr_assert_eq(fleet_sync_plan_next(p, 0, &got, &h, hh), 0);
				cr_assert_eq(fleet_sync_plan_pending(p, 0), 0);
			}
			fleet_sync_plan_destroy(&p);
			cr_assert_null(p);
			cases++;
				}
	cr_assert_eq(cases, 81 * 16 * 16 * 2);
}

/* The plan refuses entries for a device it does not know. */
Test(fleet_sync, plan_refuses_unknown_device)
{
	struct fleet_sync_plan *p = fleet_sync_plan_new(1);
	struct fleet_sync_entry e = { .device = 1, .version = 1 };
	struct fleet_sync_counts c = { 0 };

	reg_state[1] = 0;
	cr_assert_eq(fleet_sync_plan_add(p, 0, &e, 1, have, NULL, &c), -EINVAL);
	fleet_sync_plan_destroy(&p);
}

/* A version whose pulls all failed (e.g. a holder could not make it full while its parent was
 * missing) is offered again once retried; a stored version is gone for good. */
Test(fleet_sync, plan_retry_after_parent)
{
	struct fleet_sync_plan *p = fleet_sync_plan_new(1);
	struct fleet_sync_entry e[2] = { { .device = 0, .version = 1 }, { .device = 0, .version = 2 } };
	struct fleet_sync_counts c = { 0 };
	int64_t v;
	uint32_t h;
	uint8_t hh[FLEET_HASH_BYTES];

	reg_state[1] = reg_state[2] = 0;
	cr_assert_eq(fleet_sync_plan_add(p, 3, e, 2, have, NULL, &c), 0);
	fleet_sync_plan_result(p, 0, 1, 3, false);
	fleet_sync_plan_result(p, 0, 2, 3, false);
	cr_assert_eq(fleet_sync_plan_next(p, 0, &v, &h, hh), 0);
	cr_assert_eq(fleet_sync_plan_pending(p, 0), 0);
	fleet_sync_plan_retry(p, 0, 2);
	cr_assert_eq(fleet_sync_plan_pending(p, 0), 1);
	cr_assert_eq(fleet_sync_plan_next(p, 0, &v, &h, hh), 1);
	cr_assert_eq(v, 2);
	cr_assert_eq(h, 3u);
	fleet_sync_plan_result(p, 0, 2, 3, true);
	fleet_sync_plan_retry(p, 0, 2);
	cr_assert_eq(fleet_sync_plan_next(p, 0, &v, &h, hh), 0);
	fleet_sync_plan_destroy(&p);
}
