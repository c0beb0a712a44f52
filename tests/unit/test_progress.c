/* Unit tests for collectors/progress: the text of the TTY block and the plain line, redraw in
 * place, and the plain-line rate limit. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectors/progress.h"

static struct progress_state sample(void)
{
	return (struct progress_state){
		.run_id = "bsp-r1", .run_index = 2, .run_count = 8, .elapsed_s = 75.4,
		.stop = "time 120 s", .stop_fraction = 75.4 / 120, .min_step = 20,
		.median_step = 60, .max_step = 80, .waiting = 3, .alive = 15, .workers = 16,
		.accuracy = 0.81234, .link_drops = 1234, .sweep_eta_s = 3723,
	};
}

Test(progress, plain_line_text)
{
	struct progress_state st = sample();
	char buf[512];
	int n = progress_format_line(&st, buf, sizeof buf);

	cr_assert_str_eq(buf, "run 2/8 bsp-r1 t=75.4s stop=time 120 s (63%) steps=20/60.0/80 "
			      "waiting=3 alive=15/16 acc=0.8123 drops=1234 eta=1:02:03\n");
	cr_assert_eq(n, (int)strlen(buf));
	st.accuracy = -1;
	st.sweep_eta_s = -1;
	st.stop_fraction = -1;
	progress_format_line(&st, buf, sizeof buf);
	cr_assert_not_null(strstr(buf, "stop=time 120 s steps"));
	cr_assert_not_null(strstr(buf, "acc=- "));
	cr_assert_not_null(strstr(buf, "eta=--:--\n"));
}

/* The bar must put the slowest worker at min/max of its width, the median marker at
 * median/max, compared against that naive computation. */
Test(progress, block_text_and_bar)
{
	struct progress_state st = sample();
	char buf[2048], line2[256];
	int width = 84, lines = progress_format_block(&st, width, buf, sizeof buf);
	const char *l1 = buf, *l2 = strchr(l1, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
	const char *open, *close;
	int barw, hashes = 0, bar_pipe = -1;

	cr_assert_eq(lines, 3);
	cr_assert_eq(strncmp(l1, "run 2/8 bsp-r1  01:15  stop: time 120 s (63%)  sweep ETA 1:02:03\n",
			     (size_t)(l2 - l1)), 0, "%s", l1);
	cr_assert_eq(strncmp(l3, "workers 15/16 alive, 3 waiting  acc 0.8123  link drops 1234\n",
			     strlen(l3)), 0, "%s", l3);
	snprintf(line2, sizeof line2, "%.*s", (int)(l3 - l2 - 1), l2);
	cr_assert_eq(strncmp(line2, "steps     20     60.0     80 [", 30), 0, "%s", line2);
	open = strchr(line2, '[');
	close = strrchr(line2, ']');
	barw = (int)(close - open - 1);
	cr_assert_eq(barw, width - 44);
	for (int i = 0; i < barw; i++) {
		hashes += open[1 + i] == '#';
		if (open[1 + i] == '|')
			bar_pipe = i;
		cr_assert(strchr("#=|", open[1 + i]), "bad bar char '%c'", open[1 + i]);
	}
	cr_assert_eq(hashes, (int)(20.0 / 80 * barw + 0.5));
	cr_assert_eq(bar_pipe, (int)(60.0 / 80 * barw));
	cr_assert_leq((int)strlen(line2), width);
}

static char *read_pipe(int fd)
{
	char *buf = calloc(1, 1 << 14);
	ssize_t n = read(fd, buf, (1 << 14) - 1);

	cr_assert_geq(n, 0);
	return buf;
}

Test(progress, tty_redraws_in_place)
{
	struct progress_state st = sample();
	struct progress_view *v;
	int fds[2];
	char *out;

	cr_assert_eq(pipe(fds), 0);
	v = progress_view_new(fds[1], true, 100);
	cr_assert_eq(progress_render(v, &st, 0.0, false), 1);
	out = read_pipe(fds[0]);
	cr_assert_null(strstr(out, "\x1b[3A"), "first frame must not move up");
	cr_assert_eq(strncmp(out, "\r\x1b[2Krun 2/8", 11), 0);
	free(out);
	st.min_step = 21;
	cr_assert_eq(progress_render(v, &st, 0.1, false), 1); /* TTY: every call draws */
	out = read_pipe(fds[0]);
	cr_assert_eq(strncmp(out, "\x1b[3A\r\x1b[2Krun", 12), 0, "second frame moves up 3 lines");
	cr_assert_not_null(strstr(out, "steps     21"));
	free(out);
	progress_finish(v);
	progress_view_destroy(&v);
	cr_assert_null(v);
	close(fds[0]);
	close(fds[1]);
}

Test(progress, plain_rate_limited)
{
	struct progress_state st = sample();
	struct progress_view *v;
	int fds[2];
	char *out;

	cr_assert_eq(pipe(fds), 0);
	v = progress_view_new(fds[1], false, 80);
	cr_assert_eq(progress_render(v, &st, 10.0, false), 1);
	cr_assert_eq(progress_render(v, &st, 10.1, false), 0);
	cr_assert_eq(progress_render(v, &st, 10.0 + PROGRESS_PLAIN_PERIOD_S - 0.01, false), 0);
	cr_assert_eq(progress_render(v, &st, 12.0, true), 1);
	cr_assert_eq(progress_render(v, &st, 12.0 + PROGRESS_PLAIN_PERIOD_S, false), 1);
	close(fds[1]);
	out = read_pipe(fds[0]);
	cr_assert_null(strchr(out, '\x1b'), "no escapes off a TTY");
	int lines = 0;
	for (char *p = out; (p = strchr(p, '\n')); p++)
		lines++;
	cr_assert_eq(lines, 3);
	free(out);
	progress_view_destroy(&v);
	close(fds[0]);
}

/* The sweep's ETA: this run's remainder plus the runs left at the mean length of those done
 * (or, before any is done, at this run's expected length). */
Test(progress, sweep_eta)
{
	/* 10 s into a run expected to take 40 s, 3 more runs, none done: 30 + 3 x 40 */
	cr_assert_float_eq(progress_sweep_eta_s(10, 40, 3, 0, 0), 150, 1e-9);
	/* two runs done in 90 s: the rest are 45 s each */
	cr_assert_float_eq(progress_sweep_eta_s(10, 40, 3, 90, 2), 30 + 3 * 45, 1e-9);
	/* the current run's length unknown: as long as the others */
	cr_assert_float_eq(progress_sweep_eta_s(10, -1, 1, 90, 2), 35 + 45, 1e-9);
	/* overdue runs do not count backwards */
	cr_assert_float_eq(progress_sweep_eta_s(50, 40, 0, 0, 0), 0, 1e-9);
	/* nothing known yet */
	cr_assert_lt(progress_sweep_eta_s(3, -1, 4, 0, 0), 0);
}

/* p99 release lateness over PROGRESS_LATE_WARN_MS is shown in both views; at or under it, or
 * unknown (NAN), nothing is said. */
Test(progress, lateness_warning)
{
	struct progress_state st = sample();
	char buf[1024];

	st.late_p99_ms = 0.5;
	progress_format_line(&st, buf, sizeof buf);
	cr_assert_null(strstr(buf, "LATE"), "%s", buf);
	progress_format_block(&st, 100, buf, sizeof buf);
	cr_assert_null(strstr(buf, "LATE"), "%s", buf);
	st.late_p99_ms = __builtin_nan("");
	progress_format_line(&st, buf, sizeof buf);
	cr_assert_null(strstr(buf, "LATE"), "%s", buf);
	st.late_p99_ms = 2.345;
	progress_format_line(&st, buf, sizeof buf);
	cr_assert_not_null(strstr(buf, " drops=1234 LATE_p99=2.35ms eta="), "%s", buf);
	progress_format_block(&st, 100, buf, sizeof buf);
	cr_assert_not_null(strstr(buf, "link drops 1234  LATE p99 2.35 ms: delays inexact\n"), "%s", buf);
}
