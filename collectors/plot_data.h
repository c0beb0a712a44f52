/* collectors/plot_data: the numbers behind the figures of a run or a sweep, as plain structs.
 *
 * This module reads a run or sweep directory (meta.json, eval.csv, nodes/NAME.csv,
 * progress.csv, links.csv, linkcheck.csv) and computes what each figure shows: runs grouped
 * into sweep points, bands over repeats, final steps, progress samples, staleness histograms,
 * link drops, link self-check rows. It writes no file and knows nothing of gnuplot;
 * collectors/plot turns these structs into data files and scripts. Strings it returns (labels,
 * run ids, node names) are the directory's own bytes, untrusted. */
#ifndef STALENET_PLOT_DATA_H
#define STALENET_PLOT_DATA_H

#include <stdbool.h>
#include <stddef.h>

#include "collectors/meta.h"

#define PLOT_DATA_GRID 240       /* a band has GRID + 1 samples over [0, xmax] */
#define PLOT_DATA_MAX_POINTS 32  /* sweep points of one directory */
#define PLOT_DATA_MAX_RUNS 256   /* runs of one directory */
#define PLOT_DATA_STALE_CAP 40   /* staleness histogram: last bin holds this or more */
#define PLOT_DATA_MAX_NODES 64   /* nodes of the link self-check figure */

struct plot_run {
	char dir[4096];
	struct run_meta meta;
};

/* A sweep point: runs with equal sweep values (its repeats), in directory-name order. */
struct plot_point {
	char label[256]; /* "key=value, key=value", the run id of a lone run, or "all runs";
			  * compared: "TAG: value" (see plot_data_collect_many) */
	char value[256]; /* compared: the label without its tag ("" otherwise) */
	size_t style;    /* colour: the point's index; compared: equal values share one */
	size_t source;   /* compared: index of the directory it came from (line dash), else 0 */
	size_t runs[PLOT_DATA_MAX_RUNS];
	size_t nruns;
};

struct plot_set {
	struct plot_run *runs;     /* nruns, owned */
	size_t nruns;
	struct plot_point *points; /* npoints, owned */
	size_t npoints;
};

/* Runs of dir: dir itself when it holds meta.json, else its subdirectories holding one,
 * grouped into sweep points. Returns 0 or -errno with err filled; release with
 * plot_data_release (also after a failure). */
int plot_data_collect(const char *dir, struct plot_set *out, char *err, size_t errlen);

/* Runs of several directories (each as plot_data_collect reads it) in one set, to be drawn
 * over each other: every point of dirs[i] is labelled "TAG: value", TAG labels[i] (labels or
 * labels[i] NULL: the runs' meta mode, "simulation", or "emulation" when meta.json has none),
 * value a run's sweep values without the simulation-only keys (`simulation.*`: a profile per
 * run calibrates, it is not another experiment), the value alone when one key is left. The
 * runs of one directory with equal values are one point (its repeats). Points with equal
 * values share a style (colour), each directory has its own source (dash). Returns 0 or
 * -errno with err filled (-E2BIG beyond PLOT_DATA_MAX_POINTS or _RUNS in all); release with
 * plot_data_release (also after a failure). */
int plot_data_collect_many(const char *const *dirs, const char *const *labels, size_t ndirs,
			   struct plot_set *out, char *err, size_t errlen);

/* Free what plot_data_collect allocated; idempotent. */
void plot_data_release(struct plot_set *set);

/* Most repeats of any sweep point. */
size_t plot_data_max_repeats(const struct plot_set *set);

/* Target accuracy of the first run that has one (fraction), or NAN. */
double plot_data_target(const struct plot_set *set);

/* One trace: n samples (x ascending). */
struct plot_series {
	double *x, *y;
	size_t n;
};

/* Step-hold value of s at x: the latest sample at or before x; NAN before the first and
 * after the last sample. */
double plot_data_hold_at(const struct plot_series *s, double x);

/* Repeats on a common grid: x = xmax * g / GRID; mean, lo, hi over the repeats holding a value
 * at x (NAN where none does), n how many do. */
struct plot_band {
	double x[PLOT_DATA_GRID + 1], mean[PLOT_DATA_GRID + 1], lo[PLOT_DATA_GRID + 1],
		hi[PLOT_DATA_GRID + 1];
	size_t n[PLOT_DATA_GRID + 1];
};

/* Band of the nseries repeats s over [0, xmax] into out. */
void plot_data_band(const struct plot_series *s, size_t nseries, double xmax,
		    struct plot_band *out);

/* Accuracy (eval.csv) vs time (by_updates false, s) or vs model updates applied: one band per
 * sweep point into bands[0..npoints), over [0, *xmax], xmax the largest last x. Returns 1,
 * 0 when there is nothing to draw, or -errno with err filled. */
int plot_data_accuracy(const struct plot_set *set, bool by_updates, struct plot_band *bands,
		       double *xmax, char *err, size_t errlen);

/* Packets dropped on all links (links.csv: per link and direction, the latest `dropped`,
 * summed at each sample) per sweep point; a point's band spans [0, the largest time seen in
 * it and the points before it]. Returns 1, 0 when no run has links.csv rows, or -errno. */
int plot_data_link_drops(const struct plot_set *set, struct plot_band *bands, char *err,
			 size_t errlen);

/* One worker's last step (nodes/NAME.csv, NAME not starting with "server"; or, when the run
 * has one, a simulation's workers.csv final_step, one row per worker). x is the point's
 * index plus a deterministic sideways offset (by worker and repeat) so equal values stay
 * visible. */
struct plot_step {
	size_t point, repeat;
	double x, step;
};

/* Final step of every worker of every run into *out (malloc'ed, owned by the caller; NULL
 * when *n == 0). Returns 0 or -errno with err filled. */
int plot_data_steps_final(const struct plot_set *set, struct plot_step **out, size_t *n,
			  char *err, size_t errlen);

/* Length of the "key=" prefix shared by every point's label when the sweep has one key (the
 * key names the axis, each tic shows only the value), else 0. */
size_t plot_data_common_key_len(const struct plot_set *set);

/* A progress sample: steps (min, median, max over workers) at t, or (steps NAN) the mean
 * number of waiting workers over a window centred on t. */
struct plot_progress_row {
	double t_s, min, median, max, waiting;
};

struct plot_progress {
	struct plot_progress_row *rows; /* nrows, owned; NULL when the point has no progress.csv */
	size_t nrows;
};

/* progress.csv of the first repeat of each point into prog[0..npoints): samples thinned to
 * 1/400 of the run (bends kept), waiting averaged over max(1 s, run/100) windows. *t_max is
 * the last time seen, *win_max_s the longest window. Returns the points with rows, or -errno.
 * Free with plot_data_progress_free. */
int plot_data_progress(const struct plot_set *set, struct plot_progress *prog, double *t_max,
		       double *win_max_s, char *err, size_t errlen);

/* Free the rows of prog[0..n). */
void plot_data_progress_free(struct plot_progress *prog, size_t n);

/* Staleness of applied updates, pooled over repeats (a parameter server's own trace, which
 * repeats its workers' rows, is not counted). */
struct plot_staleness {
	size_t count[PLOT_DATA_MAX_POINTS][PLOT_DATA_STALE_CAP + 1];
	size_t total[PLOT_DATA_MAX_POINTS];
	int maxbin; /* highest non-empty bin */
};

/* Fill *out. Returns the number of updates counted over all points. */
size_t plot_data_staleness(const struct plot_set *set, struct plot_staleness *out);

enum { PLOT_DATA_UP, PLOT_DATA_DOWN, PLOT_DATA_RTT, PLOT_DATA_NDIRS };

struct plot_linkcheck_row {
	size_t node;                  /* index into nodes */
	int dir;                      /* PLOT_DATA_UP / DOWN / RTT */
	double mean_ms, sd_ms, cfg_ms; /* mean NAN when unmeasured, sd 0 when absent */
	bool off;                     /* verdict other than "ok" */
};

struct plot_linkcheck {
	char run_id[256];   /* as long as a plan run id (PLAN_RUN_ID_MAX) */
	char nodes[PLOT_DATA_MAX_NODES][64]; /* in order of first appearance */
	size_t nnodes;
	struct plot_linkcheck_row *rows;     /* nrows, owned */
	size_t nrows;
};

/* Rows of the first run having a linkcheck.csv into *out. Returns 1, 0 when no run has one
 * (or it lacks columns or rows), or -errno. Free with plot_data_linkcheck_free. */
int plot_data_linkcheck(const struct plot_set *set, struct plot_linkcheck *out, char *err,
			size_t errlen);

/* Free out's rows; idempotent. */
void plot_data_linkcheck_free(struct plot_linkcheck *out);

#endif
