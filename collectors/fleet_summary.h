/* collectors/fleet_summary: one row per fleet run (fleet_summary.csv), computed from the
 * registry's fleet.csv, the end-of-run verification pass's recover.csv and events.csv.
 *
 * A file of its own rather than more columns of summary.csv: these fields exist only for
 * `topology: fleet`, so every other run would carry them empty, and summary.csv's fixed header
 * is an interface with readers of older files. The layout is summary.csv's: the union of the
 * runs' sweep keys first, then FLEET_SUMMARY_HEADER. Definitions: docs/traces.md. */
#ifndef STALENET_FLEET_SUMMARY_H
#define STALENET_FLEET_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collectors/meta.h"

#define FLEET_SUMMARY_HEADER                                                                  \
	"run_id,devices,duration_s,versions_made,versions,rejected,bytes_tx,bytes_per_device_hour," \
	"bytes_stored,stored_per_version,registry_lag_mean_s,registry_lag_max_s,"             \
	"recover_versions,recover_failed,recover_s_mean,recover_s_max,status"

/* Fields that cannot be known are NAN and written empty. */
struct fleet_summary_row {
	struct run_meta meta;
	size_t devices;          /* devices with a node trace or a fleet.csv row */
	double duration_s;       /* training time: events.csv `stop`, else the last fleet.csv t_s */
	uint64_t versions_made;  /* sum over devices of their last model_version (node traces) */
	uint64_t versions;       /* rows with verify_ok 1 (versions stored) */
	uint64_t rejected;       /* rows with verify_ok 0 */
	uint64_t bytes_tx;       /* sum of bytes_tx over all rows */
	double bytes_per_device_hour; /* bytes_tx / (devices * duration_s / 3600) */
	uint64_t bytes_stored;   /* sum of bytes_stored */
	double stored_per_version;    /* bytes_stored / versions */
	double lag_mean_s, lag_max_s; /* registry_lag_s over the stored rows */
	bool has_recover;        /* recover.csv present */
	uint64_t recover_versions, recover_failed;
	double recover_s_mean, recover_s_max;
};

/* Compute the row of run_dir. Returns 1 (a fleet run: fleet.csv present), 0 (not a fleet run:
 * *out untouched but for meta), or -errno with err filled ("path: what"). Files are read
 * through lib/rfile (regular files only, bounded). */
int fleet_summary_compute(const char *run_dir, struct fleet_summary_row *out, char *err,
			  size_t errlen);

/* (Re)write DIR/fleet_summary.csv from DIR (a run directory) or from every run directory under
 * it (a sweep), fleet runs only, in name order, replaced atomically. Returns the number of rows
 * (0: no fleet run, no file written), or -errno with err filled (the old file is kept). */
int fleet_summary_rebuild(const char *dir, char *err, size_t errlen);

#endif
