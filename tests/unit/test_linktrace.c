/* Unit tests for orchestrator/linktrace: units, empty cells, header, and every error path. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orchestrator/linktrace.h"
#include "tests/support/files.h"

static char path[64];

static const char *write_tmp(const char *text)
{
	int fd;
	FILE *f;

	strcpy(path, "/tmp/stalenet-trace-XXXXXX");
	fd = support_mkstemp(path);
	f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
	return path;
}

Test(linktrace, parses_units_and_keeps_empty_cells)
{
	char err[256];
	struct linktrace *t = linktrace_load(
		write_tmp("t_s,delay,loss,rate\n0,20ms,1%,10mbit\n# comment\n\n2.5,,0.05,\n10,100ms,0,0\n"), err,
		sizeof err);
	struct link_params p = { .jitter_us = 5000, .delay_us = 1 };

	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(t->n, 3);
	cr_assert_eq(t->rows[0].at_us, 0);
	cr_assert_eq(t->rows[0].delay_us, 20000);
	cr_assert_eq(t->rows[0].loss_ppm, 10000);
	cr_assert_eq(t->rows[0].rate_bps, 10000000);
	cr_assert_eq(t->rows[1].at_us, 2500000);
	cr_assert_not(t->rows[1].has_delay);
	cr_assert_eq(t->rows[1].loss_ppm, 50000);
	cr_assert_not(t->rows[1].has_rate);
	linktrace_apply(&t->rows[0], &p);
	linktrace_apply(&t->rows[1], &p);
	cr_assert_eq(p.delay_us, 20000);   /* kept from row 0 */
	cr_assert_eq(p.jitter_us, 5000);   /* untouched */
	cr_assert_eq(p.loss_ppm, 50000);
	cr_assert_eq(p.rate_bps, 10000000);
	linktrace_apply(&t->rows[2], &p);
	cr_assert_eq(p.rate_bps, 0);
	cr_assert_eq(p.loss_ppm, 0);
	linktrace_destroy(&t);
	cr_assert_null(t);
	unlink(path);
}

static void expect_error(const char *text, const char *what)
{
	char err[256];
	struct linktrace *t = linktrace_load(write_tmp(text), err, sizeof err);

	cr_assert_null(t, "accepted: %s", text);
	cr_assert(strstr(err, what) != NULL, "'%s' not in '%s'", what, err);
	unlink(path);
}

Test(linktrace, errors_name_the_line)
{
	expect_error("0,20ms,1%\n", ":1: error: expected 4 columns");
	expect_error("0,20ms,1%,1mbit\n1,20xs,1%,1mbit\n", ":2: error: delay '20xs'");
	expect_error("0,61s,0,0\n", ":1: error: delay '61s'");
	expect_error("0,1ms,150%,0\n", ":1: error: loss '150%'");
	expect_error("0,1ms,1%,fast\n", ":1: error: rate 'fast'");
	expect_error("5,1ms,0,0\n4,1ms,0,0\n", ":2: error: time goes backwards");
	expect_error("x,1ms,0,0\n", ":1: error: t_s 'x'");
	expect_error("# only a comment\n", "no rows");
	expect_error("0,1ms,0,0,extra\n", "expected 4 columns");
}

Test(linktrace, missing_file)
{
	char err[256];

	cr_assert_null(linktrace_load("/nonexistent/trace.csv", err, sizeof err));
	cr_assert(strstr(err, "No such file") != NULL, "%s", err);
}
