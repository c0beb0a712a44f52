/* node/fleet_cost: the auto strategy's choice against the formula computed by hand, the moving
 * averages, and the break-even where replay stops paying. */
#include <criterion/criterion.h>
#include <math.h>

#include "node/fleet_cost.h"

Test(fleet_cost, fast_link_prefers_weights_slow_link_replay)
{
	struct fleet_cost c;

	fleet_cost_init(&c);
	cr_assert_eq(c.goodput_Bps, FLEET_COST_GOODPUT_INIT);
	fleet_cost_step(&c, 0.002);
	/* LAN: a 2 KB replay acked in 25 ms (20 ms of it recomputation) sets the floor; a 100 KB
	 * delta acked in 26 ms says 100 MB/s. 15 KB of delta = 0.15 ms < 20 steps to redo. */
	fleet_cost_goodput(&c, 2000, 0.025);
	cr_assert_eq(c.floor_s, 0.025);
	fleet_cost_goodput(&c, 100000, 0.026);
	fleet_cost_goodput(&c, 100000, 0.026);
	cr_assert_gt(c.goodput_Bps, 50e6);
	cr_assert(!fleet_cost_prefer_replay(&c, 15000, 2500, 20));
	/* Cellular: 200 ms round trip, then 20 KB more takes 1 s more: 20 KB/s (after the average
	 * has moved there). 0.75 s of delta against 0.165 s of replay. */
	fleet_cost_init(&c);
	fleet_cost_step(&c, 0.002);
	fleet_cost_goodput(&c, 200, 0.2);
	for (int i = 0; i < 60; i++)
		fleet_cost_goodput(&c, 20200, 1.2);
	cr_assert_lt(fabs(c.goodput_Bps - 20200) / 20200, 1e-3);
	cr_assert(fleet_cost_prefer_replay(&c, 15000, 2500, 20));
	cr_assert_lt(fabs(fleet_cost_replay_s(&c, 2500, 20) - (2500 / c.goodput_Bps + 20 * 0.002)), 1e-12);
}

Test(fleet_cost, break_even_in_steps)
{
	struct fleet_cost c;
	size_t k;

	fleet_cost_init(&c);
	fleet_cost_step(&c, 0.01);
	fleet_cost_goodput(&c, 100, 0.1);   /* the floor */
	for (int i = 0; i < 60; i++)
		fleet_cost_goodput(&c, 50100, 1.1); /* 50100 B/s once the average has moved there */
	/* delta 50 KB = 0.998 s; replay of k steps at 128 B each + 10 ms each: break-even near
	 * k = 0.998 / (0.01 + 128 / 50100) = 79.5. */
	for (k = 1; k < 1000 && fleet_cost_prefer_replay(&c, 50000, k * 128, k); k++)
		;
	cr_assert_eq(k, 80);
}

Test(fleet_cost, averages_and_bad_samples)
{
	struct fleet_cost c;

	fleet_cost_init(&c);
	fleet_cost_goodput(&c, 1000, 0);
	fleet_cost_goodput(&c, -1, 1);
	fleet_cost_goodput(&c, NAN, 1);
	cr_assert(!c.have_goodput);
	fleet_cost_goodput(&c, 1000, 0.5);  /* the floor: transfer time counted as the minimum */
	cr_assert_float_eq(c.goodput_Bps, 1000 / FLEET_COST_MIN_XFER_S, 1e-6);
	fleet_cost_init(&c);
	fleet_cost_goodput(&c, 10, 0.5);
	fleet_cost_goodput(&c, 1010, 1.5);
	cr_assert_float_eq(c.goodput_Bps, 10 / FLEET_COST_MIN_XFER_S * (1 - FLEET_COST_ALPHA) +
					  1010 * FLEET_COST_ALPHA, 1e-6);
	fleet_cost_step(&c, INFINITY);
	cr_assert(!c.have_step);
	/* Ties go to the weights. */
	fleet_cost_step(&c, 0.0);
	cr_assert(!fleet_cost_prefer_replay(&c, 100, 100, 5));
}
