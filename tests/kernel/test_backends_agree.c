/* Both link backends agree: the same scenario's link self-check under `--backend kernel` (netem
 * qdiscs) and `--backend nfq` (stalenet-linkd) gives, on every link direction, the same mean and
 * sd of the delay and the same loss within the verdict's tolerances (lib/link_verdict) applied to
 * the difference of two measurements. Needs sch_netem: runs in the netem VM (make check-kernel)
 * or on a host that has it; skips elsewhere and fails instead under STALENET_TESTS_MUST_RUN=1.
 * Prints the table of differences (docs/backends.md keeps one). */
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "netem/link_shaper.h"
#include "tests/support/files.h"
#include "tests/support/fixture.h"
#include "tests/support/proc.h"

static char stalenet_bin[PATH_MAX], tmpdir[256];

static double time_scale(void)
{
	const char *s = getenv("STALENET_TIME_SCALE");
	double v = s ? atof(s) : 1.0;

	return v >= 1.0 ? v : 1.0;
}

static void setup(void)
{
	char self[PATH_MAX - 16];
	ssize_t n;

	log_init("test_backends", LOG_WARN);
	support_require_root();
	if (link_shaper_probe_kernel() != 1) {
		support_skip_or_fail("kernel has no sch_netem (run make check-kernel)");
		return;
	}
	n = readlink("/proc/self/exe", self, sizeof self - 1);
	cr_assert_gt(n, 0);
	self[n] = '\0';
	for (int up = 0; up < 3; up++)
		*strrchr(self, '/') = '\0';
	snprintf(stalenet_bin, sizeof stalenet_bin, "%s/stalenet", self);
	if (access(stalenet_bin, X_OK) < 0)
		support_skip_or_fail("build/stalenet not built");
	support_tmpdir(tmpdir, sizeof tmpdir, "tbackends");
}

static void teardown(void)
{
	if (tmpdir[0])
		support_rm_rf(tmpdir);
}

struct row {
	char node[64], dir[8];
	int probes;
	double cfg_delay, cfg_jitter, cfg_loss, mean, sd, loss;
};

/* linkcheck.csv of the run under out (one run) into rows; returns the count. */
static int read_rows(const char *out, struct row *rows, int max)
{
	char cmd[PATH_MAX * 2], path[PATH_MAX], line[512];
	FILE *f;
	int n = 0;

	snprintf(cmd, sizeof cmd, "find '%s' -name linkcheck.csv | head -1", out);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(path, sizeof path, f), "no linkcheck.csv under %s", out);
	pclose(f);
	path[strcspn(path, "\n")] = '\0';
	f = fopen(path, "re");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(line, sizeof line, f));
	while (n < max && fgets(line, sizeof line, f)) {
		struct row *r = &rows[n];

		if (sscanf(line, "%63[^,],%7[^,],%d,%lf,%lf,%lf,%lf,%lf,%lf,", r->node, r->dir, &r->probes, &r->cfg_delay,
			   &r->cfg_jitter, &r->cfg_loss, &r->mean, &r->sd, &r->loss) == 9)
			n++;
	}
	fclose(f);
	return n;
}

static void run_backend(const char *backend, const char *scen, char *out, size_t outlen)
{
	snprintf(out, outlen, "%s/%s", tmpdir, backend);
	cr_assert_eq(support_sh("'%s' run '%s' --backend %s --out '%s' --quiet >'%s.log' 2>&1", stalenet_bin, scen,
				backend, out, out),
		     0, "stalenet run --backend %s failed (see %s.log)", backend, out);
}

Test(backends, kernel_and_nfq_link_checks_agree, .init = setup, .fini = teardown, .timeout = 900)
{
	char scen[PATH_MAX], out_k[PATH_MAX], out_n[PATH_MAX];
	struct row k[32], q[32];
	double scale = time_scale();
	int nk, nq, bad = 0;

	snprintf(scen, sizeof scen, "%s/agree.yaml", tmpdir);
	support_write_file(scen, "name: t-agree\nworkload: linkcheck\nlinkcheck: {probes: 400}\nstop: {time: 600s}\n"
				 "workers: 2\nnetwork:\n  default: {delay: 10ms, loss: 2%}\n  links:\n"
				 "    - {nodes: worker1, delay: 20ms, jitter: 4ms, delay_distribution: normal, loss: 0%}\n");
	run_backend("kernel", scen, out_k, sizeof out_k);
	run_backend("nfq", scen, out_n, sizeof out_n);
	nk = read_rows(out_k, k, 32);
	nq = read_rows(out_n, q, 32);
	cr_assert_gt(nk, 0);
	cr_assert_eq(nk, nq, "%d kernel rows, %d nfq rows", nk, nq);
	printf("| node | direction | cfg delay ms | kernel mean ms | nfq mean ms | diff ms | tol ms | kernel sd | nfq sd | "
	       "kernel loss | nfq loss | agree |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
	for (int i = 0; i < nk; i++) {
		const struct row *a = &k[i], *b = NULL;

		for (int j = 0; j < nq; j++)
			if (!strcmp(q[j].node, a->node) && !strcmp(q[j].dir, a->dir))
				b = &q[j];
		cr_assert_not_null(b, "%s %s: no nfq row", a->node, a->dir);
		double na = a->probes * (1 - a->loss), nb = b->probes * (1 - b->loss);
		/* the verdict's rules on a difference of two measurements: mean within max(0.5 ms, 2%,
		 * 3.29 standard errors of the difference), sd within max(15%, 3.29/sqrt(2(n-1))) of the
		 * larger when jitter >= 2 ms, loss within 3.29 standard errors of the difference of two
		 * binomial fractions; the VM's slow timers widen the time terms by its scale */
		double se = sqrt(a->sd * a->sd / fmax(na, 1) + b->sd * b->sd / fmax(nb, 1));
		double tol = fmax(fmax(0.5 * scale, 0.02 * a->cfg_delay), 3.29 * se);
		double sd_tol = fmax(0.15, 3.29 / sqrt(2.0 * (fmin(na, nb) - 1))) * fmax(a->sd, b->sd) + 0.1 * (scale - 1);
		double p = (a->loss + b->loss) / 2;
		double loss_tol = 3.29 * sqrt(fmax(p * (1 - p), 1e-6) * (1.0 / a->probes + 1.0 / b->probes)) + 1e-9;
		bool ok = fabs(a->mean - b->mean) <= tol && fabs(a->loss - b->loss) <= loss_tol &&
			  (a->cfg_jitter < 2.0 || fabs(a->sd - b->sd) <= sd_tol);
		printf("| %s | %s | %.1f | %.3f | %.3f | %+.3f | %.3f | %.3f | %.3f | %.4f | %.4f | %s |\n", a->node, a->dir,
		       a->cfg_delay, a->mean, b->mean, b->mean - a->mean, tol, a->sd, b->sd, a->loss, b->loss,
		       ok ? "yes" : "NO");
		bad += !ok;
	}
	fflush(stdout);
	cr_assert_eq(bad, 0, "%d link direction(s) where the backends disagree (table above)", bad);
}
