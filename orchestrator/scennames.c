/* orchestrator/scennames: the names of the scenario language's enum values, as written in the file.
 *
 * Each table is indexed by its enum (orchestrator/scenario.h) and ends with NULL, so the section
 * parsers hand it to scenval_enum and the messages print the same words the file uses. */
#include "orchestrator/scennames.h"

#include <stddef.h>

const char *const scennames_data_set[] = { "fashion-mnist", "mnist", NULL };
const char *const scennames_partition[] = { "iid", "classes", "dirichlet", "sizes", NULL };
const char *const scennames_model[] = { "softmax", "mlp", "cnn", NULL };
const char *const scennames_lr_schedule[] = { "constant", "step", "inverse", NULL };
const char *const scennames_topology[] = { "parameter-server", "p2p", "allreduce", "centralized",
					   "fleet", NULL };
const char *const scennames_barrier[] = { "bsp", "ssp", "asp", "pbsp", "pssp", NULL };
const char *const scennames_weighting[] = { "none", "inverse", "exp", NULL };
const char *const scennames_combine[] = { "none", "average", "ensemble", NULL };
const char *const scennames_draw[] = { "check", "crossing", NULL };
const char *const scennames_workload[] = { "train", "linkcheck", NULL };
const char *const scennames_on_failure[] = { "stop", "continue", NULL };
const char *const scennames_sim_train[] = { "none", "real", NULL };
const char *const scennames_sim_recovery[] = { "timeout", "fast", NULL };
const char *const scennames_role[] = { "server", "worker", "peer", "central", "probe", "registry",
				       "device", NULL };
const char *const scennames_fleet_strategy[] = { "full", "delta", "sparse", "replay", "auto", NULL };
const char *const scennames_fleet_base[] = { "init", "trained", "file", NULL };
const char *const scennames_fleet_registry[] = { "central", "peers", NULL };
const char *const scennames_dist[] = { "none", "constant", "uniform", "exponential", "gamma", "normal",
				       "pareto", NULL };
const char *const scennames_precision[] = { "auto", "timer", "spin", NULL };
/* netem's delay tables; index = enum link_dist (lib/link_params.h) */
const char *const scennames_link_dist[] = { "none", "uniform", "normal", "pareto", "paretonormal", NULL };

const char *scennames_of(const char *const *names, size_t v)
{
	for (size_t i = 0; names[i]; i++)
		if (i == v)
			return names[i];
	return "?";
}
