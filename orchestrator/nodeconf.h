/* orchestrator/nodeconf: the configuration file of one node process (docs/node-config.md).
 *
 * Translates a planned run's typed scenario into the flat, unit-free keys a node reads, so the
 * node never parses YAML or units and never includes orchestrator headers. */
#ifndef STALENET_NODECONF_H
#define STALENET_NODECONF_H

#include <stdint.h>

#include "lib/kv.h"
#include "orchestrator/plan.h"

/* consistency.dead_after as every node's configuration has it, seconds (the simulator
 * configures its peers' cores the same way). */
#define NODECONF_DEAD_AFTER_S 10

/* Run-wide facts the plan does not know. */
struct nodeconf_ctx {
	const char *run_dir;        /* absolute */
	const char *ctl_endpoint;
	int64_t origin_ns;
	const char *data_path;      /* resolved data directory */
	const char *const *addrs;   /* IPv4 text per plan node (index-aligned), NULL entries allowed */
	const char *hub_addr;       /* reflector address for the link self-check, or NULL */
	uint16_t port_data;
	uint16_t port_probe;
};

/* Fill a new kv with the configuration of node i of run, in role `role_override` when not NULL
 * (the link self-check runs every node as `probe`). Returns NULL on -ENOMEM. */
struct kv *nodeconf_build(const struct plan_run *run, size_t i, const struct nodeconf_ctx *ctx,
			  const char *role_override);

#endif
