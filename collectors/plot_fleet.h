/* collectors/plot_fleet: the numbers behind the fleet figures (topology fleet), as plain
 * structs, from each run's fleet.csv and recover.csv (docs/traces.md). Like plot_data, it
 * writes no file and knows nothing of gnuplot; runs without those files add nothing. */
#ifndef STALENET_PLOT_FLEET_H
#define STALENET_PLOT_FLEET_H

#include <stddef.h>

#include "collectors/plot_data.h"

/* Sync bytes that reached the registry (fleet.csv bytes_tx, all devices, cumulative) over time,
 * one band over the repeats per sweep point into bands[0..npoints), each over [0, the largest
 * time seen in it and the points before it]. Returns 1, 0 when no run has fleet.csv rows, or
 * -errno with err filled. */
int plot_fleet_bytes(const struct plot_set *set, struct plot_band *bands, char *err, size_t errlen);

enum plot_fleet_scatter {
	PLOT_FLEET_LAG,     /* x: fleet.csv t_s, y: registry_lag_s of each stored version */
	PLOT_FLEET_RECOVER, /* x: recover.csv version, y: recover_s */
};

/* One scatter per sweep point into pts[0..npoints) (repeats and devices pooled, in file order;
 * arrays malloc'ed, free with plot_fleet_free). Returns the number of samples over all points
 * (0: nothing to draw), or -errno with err filled. */
int plot_fleet_scatter(const struct plot_set *set, enum plot_fleet_scatter what,
		       struct plot_series *pts, char *err, size_t errlen);

/* Free the arrays of s[0..n); idempotent. */
void plot_fleet_free(struct plot_series *s, size_t n);

#endif
