/* collectors/progress: see progress.h.
 *
 * The TTY block is always the same number of lines, so a redraw is "cursor up N lines" then
 * each line preceded by "erase line"; the whole frame goes out in one write so a terminal never
 * shows half a frame. The plain line is key=value-ish text meant for logs and grep. */
#include "collectors/progress.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/fdio.h"

#define BLOCK_LINES 3

struct progress_view {
	int fd;
	bool tty;
	int width;
	int drawn_lines;     /* lines of the block currently on screen */
	double last_plain_s; /* time of the last plain line; NAN before the first */
};

struct progress_view *progress_view_new(int fd, bool tty, int width)
{
	struct progress_view *self = calloc(1, sizeof *self);

	if (!self)
		return NULL;
	self->fd = fd;
	self->tty = tty;
	self->width = width < 40 ? 40 : width > 200 ? 200 : width;
	self->last_plain_s = NAN;
	return self;
}

void progress_view_destroy(struct progress_view **self)
{
	if (!self || !*self)
		return;
	free(*self);
	*self = NULL;
}

/* "mm:ss" or "h:mm:ss"; "--:--" for unknown. */
static void fmt_dur(char *buf, size_t len, double s)
{
	long t;

	if (!(s >= 0) || !isfinite(s)) {
		snprintf(buf, len, "--:--");
		return;
	}
	t = (long)(s + 0.5);
	if (t >= 3600)
		snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, len, "%02ld:%02ld", t / 60, t % 60);
}

/* Bar of n cells over [0, max_step]: '#' up to the slowest worker (steps every worker has
 * done), '=' from there to the fastest (the spread), '|' at the median. */
static void step_bar(char *out, int n, long min_step, double median, long max_step)
{
	for (int i = 0; i < n; i++)
		out[i] = ' ';
	out[n] = '\0';
	if (max_step <= 0 || n <= 0)
		return;
	int cmin = (int)((double)min_step / (double)max_step * n + 0.5);
	int cmed = (int)(median / (double)max_step * n);

	for (int i = 0; i < n; i++)
		out[i] = i < cmin ? '#' : '=';
	if (cmed >= n)
		cmed = n - 1;
	if (cmed >= 0)
		out[cmed] = '|';
}

static void append(char *buf, size_t buflen, size_t *used, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t buflen, size_t *used, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*used >= buflen)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *used, buflen - *used, fmt, ap);
	va_end(ap);
	if (n > 0)
		*used = *used + (size_t)n < buflen ? *used + (size_t)n : buflen - 1;
}

int progress_format_block(const struct progress_state *st, int width, char *buf, size_t buflen)
{
	char el[32], eta[32], bar[256];
	size_t used = 0;
	int barw;

	if (buflen == 0)
		return 0;
	buf[0] = '\0';
	width = width < 40 ? 40 : width > 200 ? 200 : width;
	fmt_dur(el, sizeof el, st->elapsed_s);
	fmt_dur(eta, sizeof eta, st->sweep_eta_s);
	/* line 1: which run, how far, sweep ETA */
	append(buf, buflen, &used, "run %d/%d %s  %s  stop: %s", st->run_index, st->run_count,
	       st->run_id ? st->run_id : "", el, st->stop ? st->stop : "-");
	if (st->stop_fraction >= 0)
		append(buf, buflen, &used, " (%.0f%%)",
		       100.0 * (st->stop_fraction > 1 ? 1 : st->stop_fraction));
	if (st->run_count > 1)
		append(buf, buflen, &used, "  sweep ETA %s", eta);
	append(buf, buflen, &used, "\n");
	/* line 2: step spread */
	barw = width - 44;
	if (barw > (int)sizeof bar - 1)
		barw = (int)sizeof bar - 1;
	step_bar(bar, barw, st->min_step, st->median_step, st->max_step);
	append(buf, buflen, &used, "steps %6ld %8.1f %6ld [%s]\n", st->min_step, st->median_step,
	       st->max_step, bar);
	/* line 3: workers, accuracy, drops */
	append(buf, buflen, &used, "workers %d/%d alive, %d waiting  acc ", st->alive, st->workers,
	       st->waiting);
	if (st->accuracy >= 0)
		append(buf, buflen, &used, "%.4f", st->accuracy);
	else
		append(buf, buflen, &used, "-");
	append(buf, buflen, &used, "  link drops %llu", st->link_drops);
	if (st->late_p99_ms > PROGRESS_LATE_WARN_MS)
		append(buf, buflen, &used, "  LATE p99 %.2f ms: delays inexact", st->late_p99_ms);
	append(buf, buflen, &used, "\n");
	return BLOCK_LINES;
}

int progress_format_line(const struct progress_state *st, char *buf, size_t buflen)
{
	char eta[32], acc[32], frac[32] = "", late[48] = "";
	int n;

	fmt_dur(eta, sizeof eta, st->sweep_eta_s);
	if (st->accuracy >= 0)
		snprintf(acc, sizeof acc, "%.4f", st->accuracy);
	else
		snprintf(acc, sizeof acc, "-");
	if (st->stop_fraction >= 0)
		snprintf(frac, sizeof frac, " (%.0f%%)",
			 100.0 * (st->stop_fraction > 1 ? 1 : st->stop_fraction));
	if (st->late_p99_ms > PROGRESS_LATE_WARN_MS)
		snprintf(late, sizeof late, " LATE_p99=%.2fms", st->late_p99_ms);
	n = snprintf(buf, buflen,
		     "run %d/%d %s t=%.1fs stop=%s%s steps=%ld/%.1f/%ld waiting=%d alive=%d/%d "
		     "acc=%s drops=%llu%s eta=%s\n",
		     st->run_index, st->run_count, st->run_id ? st->run_id : "-", st->elapsed_s,
		     st->stop ? st->stop : "-", frac, st->min_step, st->median_step, st->max_step,
		     st->waiting, st->alive, st->workers, acc, st->link_drops, late, eta);
	if (n < 0)
		return 0;
	return (size_t)n < buflen ? n : (int)buflen - 1;
}

int progress_render(struct progress_view *self, const struct progress_state *st, double now_s,
		    bool force)
{
	char block[2048], frame[4096];
	size_t used = 0;
	int rc;

	if (!self->tty) {
		if (!force && !isnan(self->last_plain_s) &&
		    now_s - self->last_plain_s < PROGRESS_PLAIN_PERIOD_S)
			return 0;
		int n = progress_format_line(st, frame, sizeof frame);

		self->last_plain_s = now_s;
		rc = fdio_write_all(self->fd, frame, (size_t)n, NULL);
		return rc < 0 ? rc : 1;
	}
	int lines = progress_format_block(st, self->width, block, sizeof block);

	if (self->drawn_lines > 0)
		append(frame, sizeof frame, &used, "\x1b[%dA", self->drawn_lines);
	for (char *line = block; *line;) {
		char *nl = strchr(line, '\n');
		int len = nl ? (int)(nl - line) : (int)strlen(line);

		if (len > self->width)
			len = self->width;
		append(frame, sizeof frame, &used, "\r\x1b[2K%.*s\n", len, line);
		line = nl ? nl + 1 : line + strlen(line);
	}
	self->drawn_lines = lines;
	rc = fdio_write_all(self->fd, frame, used, NULL);
	return rc < 0 ? rc : 1;
}

int progress_finish(struct progress_view *self)
{
	/* The cursor already sits below the block (every line ends in '\n'); forget the block so
	 * a later render starts a fresh one instead of overwriting. */
	self->drawn_lines = 0;
	return 0;
}

double progress_sweep_eta_s(double run_elapsed_s, double run_expected_s, int runs_left, double done_s,
			    int n_done)
{
	double per_run, this_left;

	if (runs_left < 0)
		runs_left = 0;
	if (run_expected_s < 0 && n_done <= 0)
		return -1;
	per_run = n_done > 0 ? done_s / n_done : run_expected_s;
	/* No better guess for this run than the others' length; it is never less than now. */
	if (run_expected_s < 0)
		run_expected_s = per_run;
	this_left = run_expected_s - run_elapsed_s;
	return (this_left > 0 ? this_left : 0) + runs_left * per_run;
}
