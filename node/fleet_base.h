/* node/fleet_base: the base model the registry of topology fleet deploys to every device
 * (fleet.base, docs/fleet.md): the seed's initial parameters (init), those trained for
 * fleet.base_steps minibatch steps over every device's share in turn (trained), or a file of
 * raw float32 (file). A function of the scenario and seed alone: a restarted registry gets
 * the same base. */
#ifndef STALENET_FLEET_BASE_H
#define STALENET_FLEET_BASE_H

#include <stddef.h>

#include "node/fleet_conf.h"

struct kv;

/* The base of fc's model (model.* in cfg) into *base (malloc'd, *n floats; the caller frees it,
 * also after a failure). Returns 0, -EINVAL for a bad fleet.base / base_file / base_steps
 * (logged), or negative errno. */
int fleet_base_load(const struct kv *cfg, const struct fleet_conf *fc, float **base, size_t *n);

#endif
