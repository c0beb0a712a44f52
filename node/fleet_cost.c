/* node/fleet_cost: see fleet_cost.h. */
#include "node/fleet_cost.h"

#include <math.h>

void fleet_cost_init(struct fleet_cost *c)
{
	*c = (struct fleet_cost){ .goodput_Bps = FLEET_COST_GOODPUT_INIT };
}

static double ewma(double old, double x, bool have)
{
	return have ? (1 - FLEET_COST_ALPHA) * old + FLEET_COST_ALPHA * x : x;
}

void fleet_cost_goodput(struct fleet_cost *c, double bytes, double secs)
{
	double xfer;

	if (!(bytes > 0) || !(secs > 0) || !isfinite(bytes / secs))
		return;
	if (c->floor_s == 0 || secs < c->floor_s)
		c->floor_s = secs;
	xfer = fmax(secs - c->floor_s, FLEET_COST_MIN_XFER_S);
	c->goodput_Bps = ewma(c->goodput_Bps, bytes / xfer, c->have_goodput);
	c->have_goodput = true;
}

void fleet_cost_step(struct fleet_cost *c, double secs)
{
	if (!(secs > 0) || !isfinite(secs))
		return;
	c->step_s = ewma(c->step_s, secs, c->have_step);
	c->have_step = true;
}

double fleet_cost_weights_s(const struct fleet_cost *c, size_t delta_bytes)
{
	return (double)delta_bytes / c->goodput_Bps;
}

double fleet_cost_replay_s(const struct fleet_cost *c, size_t replay_bytes, size_t steps)
{
	return (double)replay_bytes / c->goodput_Bps + (double)steps * c->step_s;
}

bool fleet_cost_prefer_replay(const struct fleet_cost *c, size_t delta_bytes, size_t replay_bytes,
			      size_t steps)
{
	return fleet_cost_replay_s(c, replay_bytes, steps) < fleet_cost_weights_s(c, delta_bytes);
}
