/* orchestrator/rundir: the run directory and its descriptive files.
 *
 * RUN_DIR/ holds scenario.yaml (the resolved scenario, after --set and the sweep point),
 * meta.json (version, commit, kernel, backend, seeds, sweep point, wall-clock start, monotonic
 * origin), logs/, nodes/, and a `complete` marker written last, so an interrupted sweep can be
 * resumed by skipping the runs that have one. */
#ifndef STALENET_RUNDIR_H
#define STALENET_RUNDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/timerlat.h"
#include "orchestrator/hostload.h"
#include "orchestrator/plan.h"

/* Make path and its parents (mode 0755; the last component 0700 when private). */
int rundir_mkdirs(const char *path, bool private_last);

/* Default output directory: runs/<name>-<UTC yyyymmddThhmmssZ> into out. */
void rundir_default(const char *name, char *out, size_t outlen);

/* Create RUN_DIR with logs/ and nodes/, write scenario.yaml. Returns 0 or -errno (logged). */
int rundir_prepare(const char *dir, const struct plan_run *run);

/* One host of a run across hosts: its clock against the orchestrator's (remote - local). */
struct rundir_host {
	const char *name;
	int64_t offset_ns;              /* at the run's origin */
	int64_t bound_ns;               /* |error| of the offset, at most */
	double drift_ppm;
};

struct rundir_meta {
	const char *backend;            /* kernel | nfq */
	const char *prefix;             /* host object prefix of this run */
	int64_t origin_ns;              /* CLOCK_MONOTONIC origin of t_s */
	int64_t wall_start_ns;          /* CLOCK_REALTIME at the origin */
	double duration_s;              /* < 0 while running */
	const char *status;             /* running | complete | failed | interrupted */
	const struct hostload_summary *guard; /* "host_guard" of a trained run; NULL = none */
	const char *precision;          /* network.precision in force (timer | spin), NULL = none */
	const struct timerlat_result *host_timers; /* measured at the start, NULL = not measured */
	const struct rundir_host *hosts; /* a run across hosts: "hosts": [{name, clock_offset_ns,
					    clock_bound_ns, clock_drift_ppm}]; NULL = one host */
	size_t n_hosts;
	const char *mode;               /* NULL: emulation (no key); "simulation" (stalenet simulate) */
};

/* Write RUN_DIR/meta.json atomically. Returns 0 or -errno. */
int rundir_write_meta(const char *dir, const struct plan_run *run, const struct rundir_meta *m);

/* Mark a run complete / ask whether it is. */
int rundir_mark_complete(const char *dir);
bool rundir_is_complete(const char *dir);

/* Before a run goes into dir (out itself, or out/<run id>): an earlier attempt of it there
 * that did not complete is kept aside, so traces (appended to) never mix two attempts' rows.
 * dir below out: moved to out/.incomplete/ID-UNIXTIME (a -N suffix when that exists), its new
 * path into aside (when not NULL), returns 1. dir out itself (it cannot move into itself):
 * an earlier attempt there (meta.json) returns -EEXIST, for the caller to refuse. Returns 0
 * when there is none, -errno (logged) when the move failed. Call it on runs not complete. */
int rundir_set_aside(const char *out, const char *dir, const char *id, char *aside, size_t len);

/* Whether the output directory out (it exists) may take the runs of plan: it holds no run
 * output, or only earlier attempts of these very runs, which `run` and `simulate` then resume
 * (complete ones skipped). single: the plan's one run goes into out itself, else each run into
 * out/<run id>. Earlier attempts are the same runs when each run directory found (out itself,
 * or a subdirectory, holding meta.json, scenario.yaml or the complete marker) is one of the
 * plan's, with this run's scenario.yaml byte for byte (the resolved scenario: every value, the
 * derived seed) and its meta.json mode (mode: NULL for an emulated run, "simulation"), and
 * every row of out/summary.csv names one of them. Anything else is refused, so no run is
 * skipped as done that was another scenario's, and no summary mixes rows of two. Returns 0,
 * or -EEXIST (err: what is in the way, "OUT holds ...") or another -errno (err filled). */
int rundir_check_out(const char *out, const struct plan *plan, bool single, const char *mode, char *err,
		     size_t errlen);

#endif
