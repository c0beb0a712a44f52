/* orchestrator/simulate: `stalenet simulate`, the run pipeline with sim/ in place of the testbed.
 *
 * The same scenario parse, --set overrides, plan (sweeps, repeats, seeds), run directory layout
 * (scenario.yaml, meta.json with "mode": "simulation" and backend "simulation") and resume
 * (complete runs are skipped) as `stalenet run`, then sim_run for each planned run and the
 * run's row in summary.csv. Needs no privileges and touches nothing on the host but the output
 * directory. */
#ifndef STALENET_SIMULATE_H
#define STALENET_SIMULATE_H

#include <stdbool.h>
#include <stddef.h>

struct simulate_opts {
	const char *scenario_path;
	const char *const *sets;    /* --set key.path=value, n_sets of them */
	size_t n_sets;
	const char *out_dir;        /* NULL = runs/<name>-<UTC time> */
	bool plot;
	bool quiet;
};

/* `stalenet simulate`. Returns a CLI exit code (orchestrator/cli.h). */
int simulate_main(const struct simulate_opts *o);

#endif
