/* collectors/progress: the live progress view of `stalenet run`, rendered to text.
 *
 * The orchestrator fills a struct progress_state (from progress samples and step reports) and
 * calls progress_render about every 100 ms; this module only formats. On a TTY it draws a
 * compact block redrawn in place with ANSI escapes (cursor up + erase line), the spread of
 * worker steps drawn as a bar; off a TTY (logs, CI) it emits one plain line every
 * PROGRESS_PLAIN_PERIOD_S seconds and nothing in between. */
#ifndef STALENET_PROGRESS_H
#define STALENET_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>

#define PROGRESS_PLAIN_PERIOD_S 5.0
/* p99 release lateness (ms) above which the view warns that emulated delays are inexact. */
#define PROGRESS_LATE_WARN_MS 0.5

struct progress_state {
	const char *run_id;          /* may be NULL */
	int run_index, run_count;    /* run i (1-based) of n in the sweep */
	double elapsed_s;            /* since this run's start */
	const char *stop;            /* stop condition, e.g. "time 120 s" or "accuracy 0.85" */
	double stop_fraction;        /* progress towards the stop condition in [0, 1]; <0 unknown */
	long min_step, max_step;     /* over alive workers */
	double median_step;
	int waiting, alive, workers; /* blocked at a barrier / alive / configured */
	double accuracy;             /* latest test accuracy; < 0 when none yet */
	unsigned long long link_drops; /* packets dropped on all links so far */
	double late_p99_ms;          /* worst link's p99 release lateness in the latest sample (ms);
					> PROGRESS_LATE_WARN_MS shows a warning; <= 0 or NAN: none */
	double sweep_eta_s;          /* estimated time to the end of the sweep; < 0 unknown */
};

struct progress_view;

/* Estimated seconds to the end of a sweep. The current run has been going for run_elapsed_s
 * (wall, setup included) and is expected to take run_expected_s in all (< 0 unknown); runs_left
 * runs follow it. Each of those is expected to last as long as the runs finished so far in this
 * invocation (done_s over n_done of them), or, before any finished, as long as this one.
 * Returns < 0 when nothing can be said yet. */
double progress_sweep_eta_s(double run_elapsed_s, double run_expected_s, int runs_left, double done_s,
			    int n_done);

/* New view writing to fd (the caller keeps the fd). tty selects the redrawn view; pass
 * isatty(fd) normally. width is the line width for the TTY view (clamped to 40..200). */
struct progress_view *progress_view_new(int fd, bool tty, int width);

/* Free; accepts NULL; sets *self = NULL. */
void progress_view_destroy(struct progress_view **self);

/* Format the TTY block (lines ending in '\n', no escapes) for st into buf. Returns the number
 * of lines. */
int progress_format_block(const struct progress_state *st, int width, char *buf, size_t buflen);

/* Format the one plain line (ending in '\n') for st into buf. Returns its length. */
int progress_format_line(const struct progress_state *st, char *buf, size_t buflen);

/* Draw st at time now_s (any monotonic seconds): on a TTY redraw the block in place; off a TTY
 * write a line when PROGRESS_PLAIN_PERIOD_S has passed since the last one (or force).
 * Returns 1 when something was written, 0 when not, -errno on a write error. */
int progress_render(struct progress_view *self, const struct progress_state *st, double now_s,
		    bool force);

/* End the view: on a TTY leave the last block on screen and move below it. */
int progress_finish(struct progress_view *self);

#endif
