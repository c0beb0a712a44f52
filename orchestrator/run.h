/* orchestrator/run: `stalenet run` from scenario to traces.
 *
 * One run: run directory -> journal -> testbed (namespaces, veths, bridge) -> link shaping
 * (kernel netem or the NFQUEUE emulator) -> link self-check -> node processes -> supervision
 * (control plane, timeline, stragglers' crashes, progress, link counters) -> stop -> teardown
 * (journal replayed in reverse) -> summary. A sweep does this once per planned run, skipping
 * runs that already completed in the output directory. SIGINT/SIGTERM/SIGHUP, a node's death and
 * every error path end in the same teardown. */
#ifndef STALENET_RUN_H
#define STALENET_RUN_H

#include <stdbool.h>
#include <stddef.h>

enum run_backend { RUN_BACKEND_AUTO = 0, RUN_BACKEND_KERNEL, RUN_BACKEND_NFQ };

struct run_opts {
	const char *scenario_path;
	const char *const *sets;    /* --set key.path=value, n_sets of them */
	size_t n_sets;
	const char *out_dir;        /* NULL = runs/<name>-<UTC time> */
	enum run_backend backend;
	bool strict_links;
	bool plot;
	bool quiet;
	const char *hosts_path;     /* --hosts FILE, NULL = the scenario's hosts section if any */
	const char *identity;       /* --identity FILE for ssh, NULL = the user's agent/defaults */
	const char *known_hosts;    /* --known-hosts FILE for ssh, NULL = the user's */
	const char *agent_path;     /* --agent-path PATH of stalenet on the hosts, NULL = ours */
};

/* `stalenet run`. Returns a CLI exit code (orchestrator/cli.h). */
int run_main(const struct run_opts *opts);

#endif
