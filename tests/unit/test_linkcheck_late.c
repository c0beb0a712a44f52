/* Unit tests for the link check's lateness: lib/link_verdict's rule (a p99 release lateness
 * over LINK_VERDICT_LATE_MS makes a direction "late") and orchestrator/linkcheck_late, which
 * fills linkcheck.csv's late_p99_ms and re-judges each row. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/schema.h"
#include "lib/link_verdict.h"
#include "orchestrator/linkcheck_late.h"
#include "tests/support/files.h"

Test(link_verdict, lateness_rule)
{
	cr_assert_str_eq(link_verdict_with_late(true, NAN), "ok");
	cr_assert_str_eq(link_verdict_with_late(false, NAN), "off");
	cr_assert_str_eq(link_verdict_with_late(true, 0.0), "ok");
	cr_assert_str_eq(link_verdict_with_late(true, LINK_VERDICT_LATE_MS), "ok");
	cr_assert_str_eq(link_verdict_with_late(false, 0.2), "off");
	cr_assert_str_eq(link_verdict_with_late(true, LINK_VERDICT_LATE_MS + 0.001), "late");
	cr_assert_str_eq(link_verdict_with_late(false, 9.7), "late");
}

Test(link_verdict, csv_row_carries_lateness_before_the_verdict)
{
	struct link_params p = { .delay_us = 10000 };
	struct link_verdict_expect e;
	char row[512];

	link_verdict_expect_from(&p, NULL, &e);
	link_verdict_csv_row(row, sizeof row, "w0", "up", 100, &p, &e, 10.1, 0.05, 0, NAN);
	cr_assert_str_eq(row, "w0,up,100,10.000,0.000,0.000000,10.100,0.050,0.000000,,ok");
	link_verdict_csv_row(row, sizeof row, "w0", "up", 100, &p, &e, 10.1, 0.05, 0, 0.25);
	cr_assert_str_eq(row, "w0,up,100,10.000,0.000,0.000000,10.100,0.050,0.000000,0.250,ok");
	/* the averages pass, the tail does not */
	link_verdict_csv_row(row, sizeof row, "w0", "up", 100, &p, &e, 10.1, 0.05, 0, 1.5);
	cr_assert_str_eq(row, "w0,up,100,10.000,0.000,0.000000,10.100,0.050,0.000000,1.500,late");
	/* 12 ms measured for 10: off, and with lateness the cause is named */
	link_verdict_csv_row(row, sizeof row, "w0", "up", 100, &p, &e, 12.0, 0.05, 0, 0.1);
	cr_assert_str_eq(row, "w0,up,100,10.000,0.000,0.000000,12.000,0.050,0.000000,0.100,off");
	link_verdict_csv_row(row, sizeof row, "w0", "up", 100, &p, &e, 12.0, 0.05, 0, 2.0);
	cr_assert_str_eq(row, "w0,up,100,10.000,0.000,0.000000,12.000,0.050,0.000000,2.000,late");
}

/* w0: up 0.1 ms, down 0.9 ms; w1: up 0.2, down unknown; w2 unknown. */
static double lookup(void *arg, const char *node, const char *dir)
{
	int *calls = arg;

	(*calls)++;
	if (!strcmp(node, "w0"))
		return !strcmp(dir, "up") ? 0.1 : 0.9;
	if (!strcmp(node, "w1"))
		return !strcmp(dir, "up") ? 0.2 : NAN;
	return NAN;
}

Test(linkcheck_late, fills_and_rejudges)
{
	char dir[256], path[300], err[512] = "";
	int calls = 0, late = -1;

	cr_assert_not_null(support_tmpdir(dir, sizeof dir, "lclate"));
	snprintf(path, sizeof path, "%s/linkcheck.csv", dir);
	support_write_file(path, TRACE_HEADER_LINKCHECK "\n"
				 "w0,up,100,10.000,0.000,0.000000,10.100,0.050,0.000000,,ok\n"
				 "w0,down,100,10.000,0.000,0.000000,10.100,0.050,0.000000,,ok\n"
				 "w0,rtt,100,20.000,0.000,0.000000,20.200,0.050,0.000000,,ok\n"
				 "w1,up,100,10.000,0.000,0.000000,13.000,0.050,0.000000,,off\n"
				 "w1,down,100,10.000,0.000,0.000000,10.000,0.050,0.000000,,ok\n"
				 "w1,rtt,100,20.000,0.000,0.000000,23.000,0.050,0.000000,,off\n"
				 "w2,up,100,10.000,0.000,0.000000,10.000,0.050,0.000000,,ok\n"
				 "w3,up,100,10.000,0.000,0.000000,10.000,0.050,0.000000,3.000,late\n");
	cr_assert_eq(linkcheck_late_fill(path, lookup, &calls, &late, err, sizeof err), 0, "%s", err);
	cr_assert_eq(late, 3, "w0 down, w0 rtt (the worse direction) and w3 as it was");
	char *got = support_slurp(path, NULL);
	cr_assert_str_eq(got, TRACE_HEADER_LINKCHECK "\n"
			      "w0,up,100,10.000,0.000,0.000000,10.100,0.050,0.000000,0.100,ok\n"
			      "w0,down,100,10.000,0.000,0.000000,10.100,0.050,0.000000,0.900,late\n"
			      "w0,rtt,100,20.000,0.000,0.000000,20.200,0.050,0.000000,0.900,late\n"
			      "w1,up,100,10.000,0.000,0.000000,13.000,0.050,0.000000,0.200,off\n"
			      "w1,down,100,10.000,0.000,0.000000,10.000,0.050,0.000000,,ok\n"
			      "w1,rtt,100,20.000,0.000,0.000000,23.000,0.050,0.000000,0.200,off\n"
			      "w2,up,100,10.000,0.000,0.000000,10.000,0.050,0.000000,,ok\n"
			      "w3,up,100,10.000,0.000,0.000000,10.000,0.050,0.000000,3.000,late\n");
	free(got);
	char cerr[512] = "";
	cr_assert_eq(trace_schema_check_file(path, "linkcheck", cerr, sizeof cerr), 0, "%s", cerr);
	/* an older file is not rewritten, nor a missing one */
	support_write_file(path, TRACE_HEADER_LINKCHECK_V1 "\nw0,up,100,10,0,0,10.1,0.05,0,ok\n");
	cr_assert_eq(linkcheck_late_fill(path, lookup, &calls, &late, err, sizeof err), -EINVAL);
	cr_assert(strstr(err, "header") != NULL, "%s", err);
	snprintf(path, sizeof path, "%s/none.csv", dir);
	cr_assert_eq(linkcheck_late_fill(path, lookup, &calls, &late, err, sizeof err), -ENOENT);
	support_rm_rf(dir);
}
