/* orchestrator/resummary: rebuild the summary.csv of a run or sweep directory from its traces,
 * for `stalenet summary DIR`.
 *
 * The rows are collectors/summary's (summary_rebuild over the runs, each run a subdirectory
 * holding meta.json, or DIR itself when it holds one), so a rebuilt file is what `stalenet run`
 * would have written, and a trace of an older schema is read as collectors/summary reads
 * one: a missing column is no error, it leaves exactly the fields computed from it empty
 * (SUMMARY_LACKS_*); each such trace gives a note. A run whose files cannot be read (a FIFO,
 * a device, a directory where a file belongs, a file over its cap) fails the whole rebuild,
 * with the error naming the file, and the old summary.csv stays.
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
