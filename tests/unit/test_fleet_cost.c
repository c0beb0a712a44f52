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
	/* LAN, 100 MB/s: 15 KB of delta = 0.15 ms; 20 steps to redo = 40 ms. */
	fleet_cost_goodput(&c, 100e6, 1.0);
	cr_assert(!fleet_cost_prefer_replay(&c, 15000, 2500, 20));
	/* Cellular, 20 KB/s (after the average has moved there): 0.75 s against 0.165 s. */
	for (int i = 0; i < 60; i++)
		fleet_cost_goodput(&c, 20000, 1.0);
	cr_assert_lt(fabs(c.goodput_Bps - 20000) / 20000, 1e-3);
	cr_assert(fleet_cost_prefer_replay(&c, 15000, 2500, 20));
	cr_assert_lt(fabs(fleet_cost_replay_s(&c, 2500, 20) - (2500 / c.goodput_Bps + 20 * 0.002)), 1e-12);
}

Test(fleet_cost, break_even_in_steps)
{
	struct fleet_cost c;
	size_t k;

	fleet_cost_init(&c);
	fleet_cost_step(&c, 0.01);
	fleet_cost_goodput(&c, 50000, 1.0);
	/* delta 50 KB = 1 s; replay of k steps at 128 B each + 10 ms each: break-even near
	 * k = 1 / (0.01 + 128 / 50000) = 79.6. */
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
	fleet_cost_goodput(&c, 1000, 1);
	cr_assert_eq(c.goodput_Bps, 1000); /* the first sample replaces the guess */
	fleet_cost_goodput(&c, 2000, 1);
	cr_assert_float_eq(c.goodput_Bps, 1000 * (1 - FLEET_COST_ALPHA) + 2000 * FLEET_COST_ALPHA, 1e-9);
	fleet_cost_step(&c, INFINITY);
	cr_assert(!c.have_step);
	/* Ties go to the weights. */
	fleet_cost_step(&c, 0.0);
	cr_assert(!fleet_cost_prefer_replay(&c, 100, 100, 5));
}
