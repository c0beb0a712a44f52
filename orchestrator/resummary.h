/* orchestrator/resummary: rebuild the summary.csv of a run or sweep directory from its traces,
 * for `stalenet summary DIR`.
 *
 * The rows are collectors/summary's (summary_rebuild over the runs, each run a subdirectory
 * holding meta.json, or DIR itself when it holds one), so a rebuilt file is what `stalenet run`
 * would have written. Traces of an older schema lack columns the summary reads; such a file is
 * not an error: the summary is computed over a shadow copy of the run (DIR/.summary-XXXXXX,
 * symlinks to every file but the adapted ones, removed afterwards) in which the missing columns
 * are empty, so the fields that depend on them come out empty rather than wrong:
 *   a column of the node traces (step, compute_s, wait_s, staleness, bytes_tx, bytes_rx,
 *     bad_frames) that one of a run's traces lacks is read as empty in all of them, so no field
 *     is computed over a subset of the nodes (steps and staleness fields come out empty; the
 *     counters total_steps, bytes_moved, bad_frames count empty as 0); wait_s and compute_s
 *     go together (wait_fraction empty, never a one-sided 0 or 1);
 *   eval.csv without t_s, node or test_accuracy: left out (accuracy fields empty);
 *     without updates: that column empty;
 *   links.csv without node, direction or dropped: left out (link_drops empty).
 * The new summary.csv replaces the old one atomically (rename within DIR). */
#ifndef STALENET_RESUMMARY_H
#define STALENET_RESUMMARY_H

#include <stddef.h>

#define RESUMMARY_NOTES_MAX 2048

struct resummary_report {
	int runs;                           /* rows written */
	int adapted;                        /* notes: a run's node traces or one of its eval.csv,
					       links.csv read with columns missing (or left out) */
	char notes[RESUMMARY_NOTES_MAX];    /* one line per note ("RUN/links.csv: lacks dropped (...)"),
					       '\n'-separated, truncated with "..." */
};

/* Rebuild DIR/summary.csv (DIR a run or a sweep directory) and fill rep. Returns the number of
 * runs summarised, -ENOENT when DIR holds no run (no meta.json in DIR or its subdirectories), or
 * another -errno; err names the directory or file at fault. */
int resummary_dir(const char *dir, struct resummary_report *rep, char *err, size_t errlen);

#endif
