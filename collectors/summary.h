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
	"bad_frames,link_drops,late_p99_worst_ms,status,runq_wait_mean,runq_wait_max,host_cpu_mean," \
	"host_cpu_max,host_saturated"
/* The fixed columns before release lateness and the host-saturation guard: a summary.csv that
 * ends with them is rewritten with today's (its old rows get the new columns empty). */
#define SUMMARY_FIXED_HEADER_V1                                                                  \
	"run_id,repeat,seed,backend,final_accuracy,best_accuracy,time_to_target_s,total_steps,"   \
	"steps_min,steps_median,steps_max,wait_fraction,staleness_mean,staleness_p99,bytes_moved," \
	"bad_frames,link_drops,status"

/* What a run's traces lacked (traces of an older schema), bits of summary_row.lacks. A node
 * column lacked by one node trace is read as empty in all of them (so no field is computed over
 * a subset of the nodes), and compute_s and wait_s go together; an eval.csv or links.csv that
 * lacks an essential column is left out (its fields empty); eval.csv's updates is no summary
 * field. Each bit makes exactly the fields computed from that column empty (docs/traces.md). */
#define SUMMARY_LACKS_STEP (1u << 0)       /* nodes: total_steps, steps_* (and workers = 0) */
#define SUMMARY_LACKS_COMPUTE_S (1u << 1)  /* nodes: wait_fraction */
#define SUMMARY_LACKS_WAIT_S (1u << 2)     /* nodes: wait_fraction */
#define SUMMARY_LACKS_STALENESS (1u << 3)  /* nodes: staleness_mean, staleness_p99 */
#define SUMMARY_LACKS_BYTES_TX (1u << 4)   /* nodes: bytes_moved */
#define SUMMARY_LACKS_BYTES_RX (1u << 5)   /* nodes: bytes_moved of a parameter-server run */
#define SUMMARY_LACKS_BAD_FRAMES (1u << 6) /* nodes: bad_frames */
#define SUMMARY_LACKS_EVAL_T_S (1u << 7)   /* eval.csv left out: accuracy fields */
#define SUMMARY_LACKS_EVAL_NODE (1u << 8)
#define SUMMARY_LACKS_EVAL_ACCURACY (1u << 9) /* test_accuracy */
#define SUMMARY_LACKS_EVAL_UPDATES (1u << 10) /* no summary field */
#define SUMMARY_LACKS_LINKS_NODE (1u << 11)   /* links.csv left out: link_drops */
#define SUMMARY_LACKS_LINKS_DIRECTION (1u << 12)
#define SUMMARY_LACKS_LINKS_DROPPED (1u << 13)
#define SUMMARY_LACKS_LINKS_LATE (1u << 14)   /* links.csv lacks late_p99_ms: late_p99_worst_ms */

/* Counters a summary_row cannot give (summary_row.unknown); written empty, never 0. */
#define SUMMARY_UNKNOWN_TOTAL_STEPS (1u << 0)
#define SUMMARY_UNKNOWN_BYTES_MOVED (1u << 1)
#define SUMMARY_UNKNOWN_BAD_FRAMES (1u << 2)

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
	double late_p99_worst_ms;             /* largest late_p99_ms of links.csv; NAN if none */
	unsigned lacks;                       /* SUMMARY_LACKS_* (0 for today's schema) */
	unsigned unknown;                     /* SUMMARY_UNKNOWN_*: counters written empty */
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

/* Compute the summary of run_dir (meta.json, nodes/NAME.csv, eval.csv, links.csv). A column
 * that a trace lacks is no error: see SUMMARY_LACKS_*. Every file is read through lib/rfile
 * (regular files only, bounded). Returns 0 or -errno with err filled ("path: what"). */
int summary_compute(const char *run_dir, struct summary_row *out, char *err, size_t errlen);

/* Add row to the summary file at path: appended when its sweep keys are already columns,
 * otherwise the file is rewritten (atomically) with the union header. A row with the same
 * run_id replaces the old one. Returns 0 or -errno with err filled. */
int summary_append(const char *path, const struct summary_row *row, char *err, size_t errlen);

/* Describe row->lacks as '\n'-separated lines into buf (truncated to len), each naming the
 * trace ("nodes: ...", "eval.csv: ...", "links.csv: ...") and what came out empty. Returns the
 * number of lines (0 when the traces lacked nothing). */
int summary_lacks_describe(const struct summary_row *row, char *buf, size_t len);

/* The names (not paths) of the entries of dir, "." and ".." aside, for which keep(dir, name)
 * holds, sorted by the qsort comparator cmp of char * (NULL: strcmp order). The caller frees
 * each name and *out. Returns 0, or -errno (of opendir, or -ENOMEM) with *out NULL, *nout 0. */
int summary_list_dir(const char *dir, bool (*keep)(const char *dir, const char *name),
		     int (*cmp)(const void *a, const void *b), char ***out, size_t *nout);

/* The runs of dir: dir itself when it holds meta.json (*single true, one name "."), else its
 * entries that hold one (hidden ones aside), in strcmp order. The caller frees each name and
 * *out. Returns 0, or -errno with *out NULL, *nout 0. */
int summary_list_runs(const char *dir, char ***out, size_t *nout, bool *single);

/* Called by summary_rebuild_each for each run, after its row is computed: name is the run's
 * subdirectory, or NULL when DIR is the run directory itself. */
typedef void summary_run_fn(void *arg, const char *name, const struct summary_row *row);

/* (Re)build DIR/summary.csv: DIR is a run directory (holding meta.json: one row) or a sweep
 * directory (every subdirectory holding a meta.json, in name order). A run whose files cannot
 * be read (not a regular file, over a cap, malformed) fails the whole rebuild with err naming
 * the file, and the old summary.csv is kept. fn (may be NULL) is told of each run. Returns the
 * number of runs summarised, or -errno with err filled. */
int summary_rebuild_each(const char *dir, summary_run_fn *fn, void *arg, char *err,
			 size_t errlen);

/* summary_rebuild_each(dir, NULL, NULL, err, errlen). */
int summary_rebuild(const char *dir, char *err, size_t errlen);

#endif
