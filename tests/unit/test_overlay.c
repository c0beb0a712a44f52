/* overlay's arithmetic: the node MTU under VXLAN and the delay compensation (refused when the
 * underlay alone is slower than the configured link). */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "orchestrator/overlay.h"

Test(overlay, node_mtu)
{
	cr_expect_eq(overlay_node_mtu(1500), 1450);
	cr_expect_eq(overlay_node_mtu(9000), 8950);
	cr_expect_eq(overlay_node_mtu(OVERLAY_MIN_MTU + 50), OVERLAY_MIN_MTU);
	cr_expect_eq(overlay_node_mtu(OVERLAY_MIN_MTU + 49), -EINVAL);
	cr_expect_eq(overlay_node_mtu(0), -EINVAL);
}

Test(overlay, delay_compensation)
{
	char err[256];
	uint64_t out = 99;
	cr_expect_eq(overlay_compensate_delay(20000, 150, &out, err, sizeof err), 0);
	cr_expect_eq(out, 19850);
	cr_expect_eq(overlay_compensate_delay(150, 150, &out, err, sizeof err), 0);
	cr_expect_eq(out, 0);
	out = 99;
	cr_expect_eq(overlay_compensate_delay(100, 150, &out, err, sizeof err), -ERANGE);
	cr_expect_eq(out, 99, "unchanged on refusal");
	cr_expect(strstr(err, "underlay's own one-way delay (150 us) exceeds the configured delay (100 us)"), "%s", err);
}

Test(overlay, attach_refuses_bad_spec)
{
	char err[256];
	uint32_t r = 0;
	struct overlay_spec s = { .switch_netns = "x", .bridge = "br0", .ifname = "xvx", .vni = 1u << 24,
				  .remotes_be = &r, .n_remotes = 1, .mtu = 1450 };
	cr_expect_eq(overlay_attach(&s, err, sizeof err), -EINVAL);
	s.vni = 0;
	cr_expect_eq(overlay_attach(&s, err, sizeof err), -EINVAL);
	s.vni = 5;
	s.mtu = 100;
	cr_expect_eq(overlay_attach(&s, err, sizeof err), -EINVAL);
}
