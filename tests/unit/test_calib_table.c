/* scripts/calibrate-table.py: the time to target of the side-by-side tables, on a made-up
 * comparison whose crossings are known.
 *   first evaluation   the first eval.csv row at or above the target
 *   --interp           the straight line between the rows around the crossing
 *   seeds              OUT/calibrated.seedN are more runs of the same points, averaged
 *   pooled             several OUTs are repeats of the same points; --only leaves points out
 *   between            one comparison's emulated runs held to the bounds against another's */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/files.h"

#define SUMMARY_HEAD "consistency.barrier,seed,steps_min,steps_median,steps_max,wait_fraction,staleness_mean," \
		     "staleness_p99,final_accuracy\n"

/* One run directory dir/name of barrier b, plan index idx and seed, whose test accuracy is
 * acc[k] at t = 2k s. */
static void run(const char *dir, const char *name, const char *b, int idx, int seed, const double *acc, int n)
{
	char path[700], text[2048];
	size_t len = 0;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	support_mkdirs(path);
	snprintf(path, sizeof path, "%s/%s/meta.json", dir, name);
	snprintf(text, sizeof text,
		 "{\"run_index\": %d, \"seed\": %d, \"status\": \"complete\", \"target\": 0.5, "
		 "\"sweep\": {\"consistency.barrier\": \"%s\"}}\n", idx, seed, b);
	support_write_file(path, text);
	len = (size_t)snprintf(text, sizeof text, "t_s,node,updates,epoch,samples,test_accuracy,test_loss,train_loss\n");
	for (int k = 0; k < n; k++)
		len += (size_t)snprintf(text + len, sizeof text - len, "%d.000,server0,%d,0,0,%.4f,1,1\n", 2 * k, k, acc[k]);
	snprintf(path, sizeof path, "%s/%s/eval.csv", dir, name);
	support_write_file(path, text);
}

static void summary(const char *dir, const char *rows)
{
	char path[700], text[1024];

	snprintf(path, sizeof path, "%s/summary.csv", dir);
	snprintf(text, sizeof text, "%s%s", SUMMARY_HEAD, rows);
	support_write_file(path, text);
}

/* The output of calibrate-table.py with args (its subcommand first), in buf. */
static void script(const char *args, char *buf, size_t len)
{
	char cmd[1024];
	FILE *p;
	size_t n;

	snprintf(cmd, sizeof cmd, "python3 scripts/calibrate-table.py %s 2>&1", args);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	n = fread(buf, 1, len - 1, p);
	buf[n] = '\0';
	cr_assert_eq(pclose(p), 0, "%s:\n%s", cmd, buf);
}

static void table(const char *args, char *buf, size_t len)
{
	char full[1024];

	snprintf(full, sizeof full, "table %s", args);
	script(full, buf, len);
}

/* OUT with one emulated asp run crossing 0.5 at 5 s (0.4 at 4 s, 0.6 at 6 s) and calibrated
 * simulations of it crossing at 5 s (seed 0) and 7 s (seed 1: 0.4 at 6 s, 0.6 at 8 s); and one
 * bsp run crossing at 7 s (0.45 at 6 s, 0.55 at 8 s) in all three. */
static void make_out(const char *out, int seed_base)
{
	static const double e[] = { 0.1, 0.2, 0.4, 0.6, 0.7 }, s1[] = { 0.1, 0.2, 0.3, 0.4, 0.6, 0.7 },
			    b[] = { 0.1, 0.2, 0.3, 0.45, 0.55, 0.6 };
	static const char *const kinds[] = { "emulated", "calibrated", "calibrated.seed1" };
	char dir[600], rows[512];

	for (int k = 0; k < 3; k++) {
		snprintf(dir, sizeof dir, "%s/%s", out, kinds[k]);
		run(dir, "asp", "asp", 0, seed_base, k == 2 ? s1 : e, k == 2 ? 6 : 5);
		run(dir, "bsp", "bsp", 1, seed_base + 1, b, 6);
		snprintf(rows, sizeof rows, "asp,%d,10,20,30,0,1,2,0.7\nbsp,%d,20,20,20,0.5,0,0,0.6\n", seed_base,
			 seed_base + 1);
		summary(dir, rows);
	}
}

Test(calib_table, crossings, .timeout = 60)
{
	char dir[256], out[300], out2[300], args[900], buf[16384];

	support_tmpdir(dir, sizeof dir, "calt");
	snprintf(out, sizeof out, "%s/a", dir);
	make_out(out, 7);
	/* the first evaluation at the target: emulated asp 6 s, simulated (6 + 8) / 2 */
	snprintf(args, sizeof args, "%s --target 0.5", out);
	table(args, buf, sizeof buf);
	cr_expect_not_null(strstr(buf, "| asp | emulated | 1 |"), "%s", buf);
	cr_expect_not_null(strstr(buf, "| 6.0 s |"), "%s", buf);
	cr_expect_not_null(strstr(buf, "| asp | simulated, calibrated | 2 |"), "two seeds averaged:\n%s", buf);
	cr_expect_not_null(strstr(buf, "| 7.0 s |"), "%s", buf);
	cr_expect_not_null(strstr(buf, "+16.7% NOT met"), "%s", buf);
	/* interpolated: emulated 5 s, simulated (5 + 7) / 2 = 6 s; bsp 7 s in both */
	snprintf(args, sizeof args, "%s --target 0.5 --interp", out);
	table(args, buf, sizeof buf);
	cr_expect_not_null(strstr(buf, "| 5.0 s |"), "%s", buf);
	cr_expect_not_null(strstr(buf, "| 6.0 s |"), "%s", buf);
	cr_expect_not_null(strstr(buf, "| 7.0 s |"), "%s", buf);
	cr_expect_not_null(strstr(buf, "+20.0% NOT met"), "%s", buf);
	cr_expect_not_null(strstr(buf, "+0.0% met"), "bsp alike:\n%s", buf);
	cr_expect_null(strstr(buf, "warning"), "%s", buf);
	/* pooled with a second comparison of the same points (other seeds); --only asp */
	snprintf(out2, sizeof out2, "%s/b", dir);
	make_out(out2, 70);
	snprintf(args, sizeof args, "%s %s --only asp --target 0.5 --interp", out, out2);
	table(args, buf, sizeof buf);
	cr_expect_not_null(strstr(buf, "| asp | emulated | 2 |"), "%s", buf);
	cr_expect_not_null(strstr(buf, "| asp | simulated, calibrated | 4 |"), "%s", buf);
	cr_expect_not_null(strstr(buf, "5.0 s (5, 5)"), "one bracket per emulated run:\n%s", buf);
	cr_expect_not_null(strstr(buf, "6.0 s (6, 6)"), "the seeds of a run averaged:\n%s", buf);
	cr_expect_null(strstr(buf, "| bsp |"), "--only asp:\n%s", buf);
	/* the testbed against itself: b's emulated asp run made to cross at 7 s (interpolated) and
	 * 8 s (first evaluation) against a's 5 s and 6 s; bsp alike in both */
	snprintf(args, sizeof args, "%s/emulated", out2);
	{
		static const double late[] = { 0.1, 0.2, 0.3, 0.4, 0.6, 0.7 };

		run(args, "asp", "asp", 0, 70, late, 6);
	}
	snprintf(args, sizeof args, "between %s %s --target 0.5 --interp", out, out2);
	script(args, buf, sizeof buf);
	cr_expect_not_null(strstr(buf, "| asp | +0.0% met | +0.0 steps met | +0.000 met | +40.0% NOT met |"), "%s", buf);
	cr_expect_not_null(strstr(buf, "| bsp | +0.0% met | +0.0 steps met | +0.000 met | +0.0% met |"), "%s", buf);
	snprintf(args, sizeof args, "between %s %s --target 0.5", out, out2);
	script(args, buf, sizeof buf);
	cr_expect_not_null(strstr(buf, "+33.3% NOT met"), "first evaluations 8 s against 6 s:\n%s", buf);
	snprintf(args, sizeof args, "between %s %s --only bsp --target 0.5", out, out2);
	script(args, buf, sizeof buf);
	cr_expect_null(strstr(buf, "| asp |"), "--only bsp:\n%s", buf);
	support_rm_rf(dir);
}
