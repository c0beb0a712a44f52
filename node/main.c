/* stalenet-node: one node process of a run, started by `stalenet run` inside the node's network
 * namespace with its configuration file (docs/node-config.md). Only dispatch lives here: the
 * role's module does the work. Exit status: 0 done, 1 failure while running, 2 bad config. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "node/engine_allreduce.h"
#include "node/engine_fleet.h"
#include "node/engine_p2p.h"
#include "node/engine_ps.h"
#include "node/probe.h"
#include "node/trainer.h"

struct node_role {
	const char *name;
	int (*run)(const struct kv *cfg);
};

/* A peer runs the decentralized engine its topology names. */
static int peer_run(const struct kv *cfg)
{
	const char *topo = kv_get(cfg, "topology.kind");

	if (topo && !strcmp(topo, "allreduce"))
		return engine_allreduce_run(cfg);
	return engine_p2p_run(cfg);
}

static int worker_run(const struct kv *cfg)
{
	const char *topo = kv_get(cfg, "topology.kind");

	if (topo && !strcmp(topo, "allreduce"))
		return engine_allreduce_run(cfg);
	return engine_ps_worker_run(cfg);
}

static const struct node_role roles[] = {
	{ "probe", probe_run },
	{ "reflector", probe_reflector_run },
	{ "central", trainer_run },
	{ "server", engine_ps_server_run },
	{ "worker", worker_run },
	{ "peer", peer_run },
	{ "registry", engine_fleet_registry_run },
	{ "device", engine_fleet_device_run },
};

int main(int argc, char **argv)
{
	char err[512];
	struct kv *cfg;
	const char *role, *name;
	int64_t origin;
	int rc = 2;

	log_init("node", LOG_INFO);
	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: stalenet-node NODE_CONFIG\n"
				"  One node of a run; started by 'stalenet run', not by hand.\n"
				"  NODE_CONFIG: key = value file (docs/node-config.md).\n");
		return 2;
	}
	cfg = kv_load(argv[1], err, sizeof err);
	if (!cfg) {
		log_error("%s", err);
		return 2;
	}
	role = kv_get(cfg, "node.role");
	name = kv_get(cfg, "node.name");
	if (name)
		log_init(name, LOG_INFO);
	if (kv_get_i64(cfg, "run.origin_ns", 0, &origin) < 0)
		goto out;
	if (origin > 0)
		clock_set_origin_ns(origin);
	for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
		if (role && !strcmp(role, roles[i].name)) {
			int r = roles[i].run(cfg);

			/* Roles return 0, a small exit status, or a negative errno. */
			rc = r < 0 ? 1 : r;
			goto out;
		}
	}
	log_error("%s: unknown node.role '%s'", argv[1], role ? role : "(missing)");
out:
	kv_destroy(&cfg);
	return rc;
}
