/* node/straggler: sample moments of every delay distribution against their closed forms,
 * determinism from the seed, slowdown and trace arithmetic, pause windows, config parsing. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/kv.h"
#include "node/straggler.h"
#include "tests/support/files.h"

#define N 200000

static void moments(enum straggler_dist d, double a, double b, double *mean, double *var)
{
	struct straggler_params p = { .slowdown = 1, .dist = d, .a = a, .b = b };
	struct straggler *s = straggler_new(&p, 42);
	double sum = 0, sum2 = 0;

	cr_assert_not_null(s);
	for (int i = 0; i < N; i++) {
		double x = straggler_delay_s(s);

		cr_assert(x >= 0);
		sum += x;
		sum2 += x * x;
	}
	*mean = sum / N;
	*var = sum2 / N - *mean * *mean;
	straggler_destroy(&s);
}

/* |got - want| within k standard errors of the mean (sd/sqrt(N)), k = 5. */
static void near_mean(double got, double want, double sd)
{
	cr_assert_lt(fabs(got - want), 5 * sd / sqrt(N) + 1e-12, "mean %g want %g", got, want);
}

static void near_rel(double got, double want, double rel)
{
	cr_assert_lt(fabs(got - want), rel * want, "got %g want %g", got, want);
}

Test(straggler, constant)
{
	double m, v;

	moments(STRAGGLER_CONSTANT, 0.003, 0, &m, &v);
	cr_assert_float_eq(m, 0.003, 1e-12);
	cr_assert_lt(v, 1e-15);
}

Test(straggler, uniform)
{
	double m, v;

	moments(STRAGGLER_UNIFORM, 0.01, 0.05, &m, &v);
	near_mean(m, 0.03, 0.04 / sqrt(12));
	near_rel(v, 0.04 * 0.04 / 12, 0.03);
}

Test(straggler, exponential)
{
	double m, v;

	moments(STRAGGLER_EXPONENTIAL, 0.02, 0, &m, &v);
	near_mean(m, 0.02, 0.02);
	near_rel(v, 0.0004, 0.05);
}

Test(straggler, gamma)
{
	double m, v;

	/* shape 2.5, scale 0.01: mean 0.025, var 2.5e-4 */
	moments(STRAGGLER_GAMMA, 2.5, 0.01, &m, &v);
	near_mean(m, 0.025, sqrt(2.5e-4));
	near_rel(v, 2.5e-4, 0.05);
	/* shape < 1 goes through the boost path */
	moments(STRAGGLER_GAMMA, 0.5, 0.02, &m, &v);
	near_mean(m, 0.01, sqrt(0.5 * 0.02 * 0.02));
	near_rel(v, 0.5 * 0.02 * 0.02, 0.06);
}

Test(straggler, normal_far_from_zero)
{
	double m, v;

	/* mean 10 sd away from 0: clamping is invisible */
	moments(STRAGGLER_NORMAL, 0.1, 0.01, &m, &v);
	near_mean(m, 0.1, 0.01);
	near_rel(v, 1e-4, 0.03);
}

Test(straggler, normal_clamped_at_zero)
{
	double m, v;

	/* mean 0: half the mass clamps to 0; E[max(0,Z)] = sd / sqrt(2 pi) */
	moments(STRAGGLER_NORMAL, 0.0, 0.02, &m, &v);
	near_mean(m, 0.02 / sqrt(2 * M_PI), 0.02);
}

Test(straggler, pareto)
{
	double m, v;
	/* x_m = 0.01, alpha = 5: mean alpha x_m/(alpha-1), var x_m^2 alpha/((alpha-1)^2(alpha-2)) */
	double want_m = 5 * 0.01 / 4, want_v = 1e-4 * 5 / (16.0 * 3);

	moments(STRAGGLER_PARETO, 0.01, 5, &m, &v);
	near_mean(m, want_m, sqrt(want_v));
	near_rel(v, want_v, 0.15);
}

Test(straggler, deterministic_from_seed)
{
	struct straggler_params p = { .slowdown = 1, .dist = STRAGGLER_EXPONENTIAL, .a = 1 };
	struct straggler *a = straggler_new(&p, 9), *b = straggler_new(&p, 9), *c = straggler_new(&p, 10);
	int same = 0;

	for (int i = 0; i < 1000; i++) {
		double x = straggler_delay_s(a);

		cr_assert_eq(x, straggler_delay_s(b));
		same += x == straggler_delay_s(c);
	}
	cr_assert_lt(same, 5);
	straggler_destroy(&a);
	straggler_destroy(&b);
	straggler_destroy(&c);
	cr_assert_null(a);
}

Test(straggler, slowdown_and_trace)
{
	char path[] = "/tmp/stalenet-trace-XXXXXX";
	int fd = support_mkstemp(path);
	FILE *f = fdopen(fd, "w");
	struct straggler_params p = { .slowdown = 3 };
	struct straggler *s = straggler_new(&p, 1);

	cr_assert_float_eq(straggler_step_extra_s(s, 0, 0.010), 0.020, 1e-12);
	cr_assert_float_eq(straggler_step_extra_s(s, 5, 0), 0, 1e-12);
	straggler_destroy(&s);

	fprintf(f, "step,compute_s\n0,0.050\n1,0.001\n2,0.020\n");
	fclose(f);
	p = (struct straggler_params){ .slowdown = 1, .trace = path };
	s = straggler_new(&p, 1);
	cr_assert_not_null(s);
	cr_assert_eq(straggler_trace_len(s), 3);
	cr_assert_float_eq(straggler_step_extra_s(s, 0, 0.010), 0.040, 1e-12);
	cr_assert_float_eq(straggler_step_extra_s(s, 1, 0.010), 0.0, 1e-12); /* never shortened */
	cr_assert_float_eq(straggler_step_extra_s(s, 5, 0.010), 0.010, 1e-12); /* cyclic: row 2 */
	straggler_destroy(&s);
	/* trace and slowdown compose: stretched to 0.05, then x2 */
	p.slowdown = 2;
	s = straggler_new(&p, 1);
	cr_assert_float_eq(straggler_step_extra_s(s, 3, 0.010), 0.040 + 0.050, 1e-12);
	straggler_destroy(&s);

	f = fopen(path, "w");
	fprintf(f, "compute_s\n0.1\nabc\n");
	fclose(f);
	cr_assert_null(straggler_new(&p, 1));
	unlink(path);
	p.trace = "/nonexistent/trace.csv";
	cr_assert_null(straggler_new(&p, 1));
}

Test(straggler, pause_windows)
{
	struct straggler_params p = { .slowdown = 1, .pause_every_s = 10, .pause_for_s = 2 };
	struct straggler *s = straggler_new(&p, 1);

	cr_assert_eq(straggler_pause_left_s(s, 0.5), 0);       /* no pause at t = 0 */
	cr_assert_float_eq(straggler_pause_left_s(s, 10.0), 2.0, 1e-9);
	cr_assert_float_eq(straggler_pause_left_s(s, 11.5), 0.5, 1e-9);
	cr_assert_eq(straggler_pause_left_s(s, 12.0), 0);
	cr_assert_eq(straggler_pause_left_s(s, 19.9), 0);
	cr_assert_float_eq(straggler_pause_left_s(s, 31.0), 1.0, 1e-9);
	/* fraction of time paused over a long span: 2/10 after the first period */
	long paused = 0, total = 0;
	for (double t = 10; t < 1010; t += 0.01, total++)
		paused += straggler_pause_left_s(s, t) > 0;
	near_rel((double)paused / total, 0.2, 0.01);
	straggler_destroy(&s);
}

Test(straggler, params_from_kv)
{
	struct kv *cfg = kv_new();
	struct straggler_params p;

	cr_assert_eq(straggler_params_from_kv(cfg, &p), 0);
	cr_assert_eq(p.slowdown, 1.0);
	cr_assert_eq(p.dist, STRAGGLER_NONE);
	kv_set(cfg, "straggler.slowdown", "2.5");
	kv_set(cfg, "straggler.delay.dist", "gamma");
	kv_set(cfg, "straggler.delay.a", "2");
	kv_set(cfg, "straggler.delay.b", "0.01");
	kv_set(cfg, "straggler.pause.every", "30");
	kv_set(cfg, "straggler.pause.for", "5");
	cr_assert_eq(straggler_params_from_kv(cfg, &p), 0);
	cr_assert_eq(p.dist, STRAGGLER_GAMMA);
	cr_assert_eq(p.slowdown, 2.5);
	cr_assert_eq(p.pause_for_s, 5);
	kv_set(cfg, "straggler.delay.dist", "lognormal");
	cr_assert_eq(straggler_params_from_kv(cfg, &p), -EINVAL);
	kv_set(cfg, "straggler.delay.dist", "gamma");
	kv_set(cfg, "straggler.delay.a", "0");
	cr_assert_eq(straggler_params_from_kv(cfg, &p), -EINVAL);
	kv_set(cfg, "straggler.delay.a", "1");
	kv_set(cfg, "straggler.slowdown", "0.5");
	cr_assert_eq(straggler_params_from_kv(cfg, &p), -EINVAL);
	kv_set(cfg, "straggler.slowdown", "1");
	kv_set(cfg, "straggler.pause.for", "30");
	cr_assert_eq(straggler_params_from_kv(cfg, &p), -EINVAL);
	kv_destroy(&cfg);
}
