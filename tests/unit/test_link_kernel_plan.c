/* netem/link_kernel: the per-peer class tree (link_kernel_plan), a pure function: which band each
 * peer's packets take, with which parameters, under which root. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>

#include "netem/link_kernel.h"

static uint32_t ip(const char *s)
{
	struct in_addr a;
	cr_assert_eq(inet_pton(AF_INET, s, &a), 1);
	return a.s_addr;
}

Test(link_kernel_plan, no_class_is_a_prio_root_with_the_default)
{
	struct link_params p = { .delay_us = 10000, .jitter_us = 1000, .loss_ppm = 5000 };
	struct link_kernel_plan_filter f[1];
	struct link_kernel_plan pl;
	cr_assert_eq(link_kernel_plan(&p, NULL, 0, true, f, 0, &pl), 0);
	cr_expect_eq(pl.rate_bps, 0);
	cr_expect_eq(pl.n_bands, 2); /* prio's minimum */
	cr_expect_eq(pl.n_filters, 0);
	cr_expect_eq(pl.band[0].classid, 0x10001u);
	cr_expect_eq(pl.band[0].netem_handle, 0x110000u);
	cr_expect_eq(pl.band[0].p.delay_us, 10000);
	cr_expect_eq(pl.band[0].p.jitter_us, 1000);
	cr_expect_eq(pl.band[0].p.loss_ppm, 5000);
}

Test(link_kernel_plan, compensated_peers_get_their_band_and_the_rest_the_default)
{
	struct link_params p = { .delay_us = 10000, .jitter_us = 2000, .rate_bps = 20000000 };
	uint32_t h1[] = { ip("198.18.0.5"), ip("198.18.0.6") }, h2[] = { ip("198.18.0.9") }, h3[] = { ip("198.18.0.12") };
	struct link_kernel_class c[3] = {
		{ h1, 2, { .delay_us = 8000, .jitter_us = 2000 } },   /* underlay 2 ms */
		{ h2, 1, { .delay_us = 7000, .jitter_us = 2000 } },   /* underlay 3 ms */
		{ h3, 1, { .delay_us = 8000, .jitter_us = 2000, .rate_bps = 1 } }, /* = h1's: shares its band */
	};
	struct link_kernel_plan_filter f[4];
	struct link_kernel_plan pl;
	cr_assert_eq(link_kernel_plan(&p, c, 3, false, f, 4, &pl), 0);
	/* the rate: one HTB class over the whole egress, the bands its children 1:11, 1:12, ... */
	cr_expect_eq(pl.rate_bps, 20000000);
	cr_expect_eq(pl.n_bands, 3);
	cr_expect_not(pl.match_dst);
	for (size_t b = 0; b < pl.n_bands; b++) {
		cr_expect_eq(pl.band[b].p.rate_bps, 0, "band %zu has a rate of its own", b);
		cr_expect_eq(pl.band[b].p.jitter_us, 2000);
		cr_expect_eq(pl.band[b].classid, 0x10011u + (uint32_t)b);
	}
	cr_expect_eq(pl.band[0].p.delay_us, 10000);
	cr_expect_eq(pl.band[1].p.delay_us, 8000);
	cr_expect_eq(pl.band[2].p.delay_us, 7000);
	cr_assert_eq(pl.n_filters, 4);
	cr_expect_eq(f[0].addr_be, h1[0]);
	cr_expect_eq(f[0].classid, 0x10012u);
	cr_expect_eq(f[1].addr_be, h1[1]);
	cr_expect_eq(f[1].classid, 0x10012u);
	cr_expect_eq(f[2].addr_be, h2[0]);
	cr_expect_eq(f[2].classid, 0x10013u);
	cr_expect_eq(f[3].addr_be, h3[0]);
	cr_expect_eq(f[3].classid, 0x10012u);
}

Test(link_kernel_plan, a_class_equal_to_the_default_still_names_its_peers)
{
	struct link_params p = { .delay_us = 5000 };
	uint32_t a[] = { ip("198.18.0.2") };
	struct link_kernel_class c = { a, 1, { .delay_us = 5000 } };
	struct link_kernel_plan_filter f[1];
	struct link_kernel_plan pl;
	cr_assert_eq(link_kernel_plan(&p, &c, 1, true, f, 1, &pl), 0);
	cr_expect_eq(pl.n_bands, 2);
	cr_expect_eq(pl.n_filters, 1);
	cr_expect_eq(f[0].classid, LINK_KERNEL_NETEM_HANDLE | 2);
}

Test(link_kernel_plan, refuses_what_the_tree_cannot_hold)
{
	struct link_params p = { .delay_us = 20000 };
	uint32_t a[] = { ip("198.18.0.2"), ip("198.18.0.3") }, dup[] = { ip("198.18.0.3") };
	struct link_kernel_plan_filter f[32];
	struct link_kernel_plan pl;
	struct link_kernel_class c[16];

	/* a peer in two classes: which delay would it get? */
	c[0] = (struct link_kernel_class){ a, 2, { .delay_us = 1000 } };
	c[1] = (struct link_kernel_class){ dup, 1, { .delay_us = 2000 } };
	cr_expect_eq(link_kernel_plan(&p, c, 2, true, f, 32, &pl), -EINVAL);
	/* a class without peers */
	c[1].n_peers = 0;
	cr_expect_eq(link_kernel_plan(&p, c, 2, true, f, 32, &pl), -EINVAL);
	/* no room for the filters */
	cr_expect_eq(link_kernel_plan(&p, c, 1, true, f, 1, &pl), -E2BIG);
	/* invalid parameters */
	struct link_params bad = { .delay_us = 1000, .loss_ppm = 2000000 };
	cr_expect_eq(link_kernel_plan(&bad, NULL, 0, true, f, 32, &pl), -EINVAL);
	/* 15 distinct classes fit (16 prio bands), 16 do not */
	uint32_t one[16];
	for (int i = 0; i < 16; i++) {
		one[i] = htonl(0xc6120000u + 10 + (uint32_t)i);
		c[i] = (struct link_kernel_class){ &one[i], 1, { .delay_us = 100u * (uint32_t)(i + 1) } };
	}
	cr_expect_eq(link_kernel_plan(&p, c, 15, true, f, 32, &pl), 0);
	cr_expect_eq(pl.n_bands, 16);
	cr_expect_eq(link_kernel_plan(&p, c, 16, true, f, 32, &pl), -E2BIG);
}

Test(link_kernel_plan, same_layout_only_for_a_change_of_parameters)
{
	struct link_params p = { .delay_us = 20000 };
	uint32_t a[] = { ip("198.18.0.2") }, b2[] = { ip("198.18.0.2"), ip("198.18.0.3") };
	struct link_kernel_class c = { a, 1, { .delay_us = 15000 } };
	struct link_kernel_plan_filter f1[2], f2[2];
	struct link_kernel_plan x, y;
	cr_assert_eq(link_kernel_plan(&p, &c, 1, true, f1, 2, &x), 0);
	/* a reshape: other delays, same peers */
	p.delay_us = 30000;
	c.p.delay_us = 25000;
	cr_assert_eq(link_kernel_plan(&p, &c, 1, true, f2, 2, &y), 0);
	cr_expect(link_kernel_plan_same_layout(&x, &y));
	cr_expect_eq(y.band[1].p.delay_us, 25000);
	/* a rate appears: HTB at the root, the tree is another */
	p.rate_bps = 1000000;
	cr_assert_eq(link_kernel_plan(&p, &c, 1, true, f2, 2, &y), 0);
	cr_expect_not(link_kernel_plan_same_layout(&x, &y));
	/* one more peer */
	p.rate_bps = 0;
	c = (struct link_kernel_class){ b2, 2, { .delay_us = 15000 } };
	cr_assert_eq(link_kernel_plan(&p, &c, 1, true, f2, 2, &y), 0);
	cr_expect_not(link_kernel_plan_same_layout(&x, &y));
}
