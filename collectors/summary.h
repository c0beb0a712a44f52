/* collectors/summary: one row per run (summary.csv), computed from the run's traces.
 *
 * Column names, units and exact definitions (median of an even count, nearest-rank p99, wait
 * fraction, time to target) are in docs/traces.md, "summary.csv". A sweep's OUT/summary.csv
 * has the union of the sweep keys of its runs as its first columns, then SUMMARY_FIXED_HEADER;
 * a run that lacks a key leaves it empty. */
#ifndef STALENET_SUMMARY_H
#define STALENET_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collectors/meta.h"

#define SUMMARY_FIXED_HEADER                                                                     \
	"run_id,repeat,seed,backend,final_accuracy,best_accuracy,time_to_target_s,total_steps,"   \
	"steps_min,steps_median,steps_max,wait_fraction,staleness_mean,staleness_p99,bytes_moved," \
	"bad_frames,link_drops,status"

/* Fields that can be unknown are NAN (doubles) or flagged (counters); they are written empty. */
struct summary_row {
	struct run_meta meta;
	double final_accuracy, best_accuracy; /* fraction; NAN without eval.csv rows */
	double time_to_target_s;              /* NAN when never reached or no target */
	size_t workers;                       /* worker trace files with at least one row */
	uint64_t total_steps;                 /* sum over workers of their last step */
	double steps_min, steps_median, steps_max; /* over workers; NAN without workers */
	double wait_fraction;                 /* sum wait_s / (sum wait_s + sum compute_s) */
	double staleness_mean, staleness_p99; /* over all rows with a staleness; NAN if none */
	uint64_t bytes_moved, bad_frames;     /* sums over every node's rows */
	bool has_links;                       /* links.csv present */
	uint64_t link_drops;                  /* sum over links of the last `dropped` counter */
};

/* Median of v[0..n) (sorts v in place; mean of the two middle values when n is even).
 * NAN when n == 0. */
double summary_median(double *v, size_t n);

/* Nearest-rank percentile p in (0, 100] of v[0..n): the ceil(p/100 * n)-th smallest value
 * (sorts v in place). NAN when n == 0. */
double summary_percentile(double *v, size_t n, double p);

/* The run's accuracy over time from RUN_DIR/eval.csv. With several evaluating nodes, the run's
 * value at each eval row is the mean over nodes of each node's latest row, counted from the
 * first time every node has reported. Arrays are malloc'ed and owned by the caller (NULL when
 * n == 0). Returns 0 (n = 0 when eval.csv is absent or empty) or -errno with err filled. */
int summary_eval_series(const char *run_dir, double **t_s, double **updates, double **accuracy,
			size_t *n, char *err, size_t errlen);

/* Compute the summary of run_dir (meta.json, nodes/NAME.csv, eval.csv, links.csv).
 * Returns 0 or -errno with err filled. */
int summary_compute(const char *run_dir, struct summary_row *out, char *err, size_t errlen);

/* Add row to the summary file at path: appended when its sweep keys are already columns,
 * otherwise the file is rewritten (atomically) with the union header. A row with the same
 * run_id replaces the old one. Returns 0 or -errno with err filled. */
int summary_append(const char *path, const struct summary_row *row, char *err, size_t errlen);

/* (Re)build SWEEP_DIR/summary.csv from every subdirectory holding a meta.json, in name order.
 * Returns the number of runs summarised, or -errno with err filled. */
int summary_rebuild(const char *sweep_dir, char *err, size_t errlen);

#endif
