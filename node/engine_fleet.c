/* node/engine_fleet: see engine_fleet.h. The two roles are node/fleet_registry and
 * node/fleet_device; this module is their entry from the node program. */
#include "node/engine_fleet.h"

#include "node/fleet_device.h"
#include "node/fleet_registry.h"

int engine_fleet_registry_run(const struct kv *cfg)
{
	return fleet_registry_run(cfg);
}

int engine_fleet_device_run(const struct kv *cfg)
{
	return fleet_device_run(cfg);
}
