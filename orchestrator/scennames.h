/* orchestrator/scennames: the names of the scenario language's enum values, as written in the
 * file ("parameter-server", "pssp", ...). Each table is indexed by its enum in
 * orchestrator/scenario.h and NULL-terminated. */
#ifndef STALENET_SCENNAMES_H
#define STALENET_SCENNAMES_H

#include <stddef.h>

extern const char *const scennames_data_set[];
extern const char *const scennames_partition[];
extern const char *const scennames_model[];
extern const char *const scennames_lr_schedule[];
extern const char *const scennames_topology[];
extern const char *const scennames_barrier[];
extern const char *const scennames_weighting[];
extern const char *const scennames_combine[];
extern const char *const scennames_draw[];
extern const char *const scennames_workload[];
extern const char *const scennames_on_failure[];
extern const char *const scennames_sim_train[];
extern const char *const scennames_sim_recovery[];
extern const char *const scennames_role[];
extern const char *const scennames_fleet_strategy[];
extern const char *const scennames_fleet_base[];
extern const char *const scennames_fleet_registry[];
extern const char *const scennames_dist[];
extern const char *const scennames_precision[];
extern const char *const scennames_link_dist[];

/* names[v], or "?" when v is past the end of the table. */
const char *scennames_of(const char *const *names, size_t v);

#endif
