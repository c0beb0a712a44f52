/* bench_sim: speed and memory of the discrete-event simulator (sim/, docs/simulation.md).
 *
 *   1. the PSP experiment (scenarios/psp-sim.yaml's settings: exponential step times of mean
 *      0.5 s, 200 simulated seconds) at 10,000 workers with train none, for BSP, SSP(4),
 *      pBSP(10), pSSP(10, 4) and ASP, the sampled ones with a sample per check (the default)
 *      and per crossing: wall time, events, events per second (no files written);
 *   2. the same at 100,000 workers (ASP and pBSP(10)): wall time and memory;
 *   3. memory per simulated worker: each case runs in a fresh child that parses, plans (a
 *      compact plan, as `stalenet simulate` makes) and simulates; the growth of its peak RSS
 *      (getrusage ru_maxrss) per worker over the same case at 1,000 workers is printed, the
 *      whole process's cost of one more worker (target <= 200 bytes); also the simulation's own
 *      count of the bytes it holds;
 *   4. train real: softmax, 1,000 workers x 200 simulated seconds, pBSP(10) (needs the data
 *      set): wall time and final test accuracy.
 * Nothing is asserted: figures only (the targets are in docs/simulation.md). Each case runs in a
 * forked child so its peak RSS is its own. BENCH_SIM_QUICK=1 skips the 100k and train cases. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "orchestrator/plan.h"
#include "orchestrator/scenario.h"
#include "sim/sim.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct result {
	double wall_s, cpu_s, median, min, max;
	size_t held, state;
	unsigned long long events;
	long rss_kb;
	int ok;
};

/* In a child: parse, plan and (when simulate) simulate; the figures come back through a pipe. */
static int run_case(const char *barrier, const char *draw, unsigned workers, unsigned sample,
		    const char *train, bool simulate, const char *out_dir, struct result *res)
{
	int fd[2];
	pid_t pid;
	int st;

	memset(res, 0, sizeof *res);
	if (pipe(fd) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		char buf[2048], err[512];
		struct scenario *sc;
		struct plan *p;
		struct result r = { 0 };
		struct rusage ru;

		close(fd[0]);
		snprintf(buf, sizeof buf,
			 "name: bench\nseed: 7\nstop: {time: 200s}\nmodel: {kind: softmax}\ntrain: {batch: 64}\n"
			 "consistency: {barrier: %s, staleness: 4, sample: %u, draw: %s}\nworkers: %u\nlinkcheck: off\n"
			 "eval: {every: 10s}\nnetwork: {default: {delay: 1ms}}\n"
			 "stragglers:\n  - {nodes: workers, compute: {delay: {dist: exponential, mean: 499ms}}}\n"
			 "simulation: {train: %s, step_cost: 1ms, server_cost: 20us}\n",
			 barrier, sample, draw, workers, train);
		sc = scenario_parse(buf, strlen(buf), "bench.yaml", err, sizeof err);
		p = sc ? plan_new_compact(sc, err, sizeof err) : NULL;
		if (!p) {
			fprintf(stderr, "bench_sim: %s\n", err);
			_exit(1);
		}
		if (simulate) {
			struct sim_opts o = { .run = plan_run(p, 0), .dir = out_dir, .step_cost_ns = 1000000,
					      .server_cost_ns = 20000 };
			struct sim_result sr;
			double t0 = now_s();

			if (sim_run(&o, &sr, err, sizeof err) < 0) {
				fprintf(stderr, "bench_sim: %s\n", err);
				_exit(1);
			}
			r.wall_s = now_s() - t0;
			r.held = sr.held_bytes;
			r.state = sr.state_bytes;
			r.events = sr.events;
			r.median = sr.steps_median;
			r.min = sr.steps_min;
			r.max = sr.steps_max;
		}
		getrusage(RUSAGE_SELF, &ru);
		r.rss_kb = ru.ru_maxrss;
		r.cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
		r.ok = 1;
		if (write(fd[1], &r, sizeof r) != sizeof r)
			_exit(1);
		_exit(0);
	}
	close(fd[1]);
	if (read(fd[0], res, sizeof *res) != sizeof *res)
		res->ok = 0;
	close(fd[0]);
	waitpid(pid, &st, 0);
	return res->ok ? 0 : -1;
}

static bool barrier_sampled(const char *b)
{
	return !strcmp(b, "pbsp") || !strcmp(b, "pssp");
}

static void psp(unsigned workers, const char *const *barriers, const unsigned *samples,
		const char *const *draws, size_t n)
{
	struct result base, r, small;
	const unsigned n_small = 1000;

	if (run_case("asp", "check", workers, 10, "none", false, NULL, &base) < 0) {
		printf("  plan of %u workers failed\n", workers);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (run_case(barriers[i], draws[i], workers, samples[i], "none", true, NULL, &r) < 0 ||
		    run_case(barriers[i], draws[i], n_small, samples[i], "none", true, NULL, &small) < 0) {
			printf("  %-10s failed\n", barriers[i]);
			continue;
		}
		/* cpu: the child's user + system time less the plan's (what one core spends) */
		printf("  %-4s beta %-2u %-8s %6u workers: %6.2f s wall, %5.2f s cpu, %9llu events, %5.2f M events/s "
		       "of cpu; final step min %.0f median %.1f max %.0f; simulation holds %.1f MB = %.0f "
		       "bytes/worker (its own arrays %.0f; peak RSS %.1f MB, plan alone %.1f MB); peak RSS "
		       "growth per worker over %u workers: %.0f bytes\n",
		       barriers[i], samples[i], barrier_sampled(barriers[i]) ? draws[i] : "", workers, r.wall_s, r.cpu_s - base.cpu_s, r.events,
		       r.events / (r.cpu_s - base.cpu_s) / 1e6, r.min, r.median, r.max, r.held / 1048576.0,
		       (double)r.held / workers, (double)r.state / workers, r.rss_kb / 1024.0, base.rss_kb / 1024.0, n_small,
		       (double)(r.rss_kb - small.rss_kb) * 1024.0 / (workers - n_small));
	}
}

int main(void)
{
	static const char *const b5[] = { "bsp", "ssp", "pbsp", "pssp", "asp", "pbsp", "pssp" };
	static const unsigned s5[] = { 10, 10, 10, 10, 10, 10, 10 };
	static const char *const d5[] = { "check", "check", "check", "check", "check", "crossing",
					   "crossing" };
	static const char *const b2[] = { "asp", "pbsp", "pbsp" };
	static const unsigned s2[] = { 10, 10, 10 };
	static const char *const d2[] = { "check", "check", "crossing" };
	const char *quick = getenv("BENCH_SIM_QUICK");
	FILE *la = fopen("/proc/loadavg", "re");
	char load[64] = "?";

	log_init("bench_sim", LOG_WARN);
	if (la) {
		if (!fgets(load, sizeof load, la))
			load[0] = '\0';
		fclose(la);
		load[strcspn(load, "\n")] = '\0';
	}
	printf("bench_sim (load average %s)\n", load);
	printf("1. PSP experiment, 10,000 workers, 200 simulated s, train none (target <= 5 s each):\n");
	psp(10000, b5, s5, d5, 7);
	if (quick && *quick == '1')
		return 0;
	printf("2./3. 100,000 workers, 200 simulated s, train none (target <= 200 bytes/worker of peak RSS "
	       "growth):\n");
	psp(100000, b2, s2, d2, 3);
	printf("4. train real: softmax, 1,000 workers x 200 simulated s, pBSP(10) (target <= 60 s):\n");
	{
		char dir[] = "/tmp/bench-sim-XXXXXX", cmd[128], path[256];
		struct result r;

		if (!mkdtemp(dir)) {
			printf("  mkdtemp failed\n");
			return 0;
		}
		snprintf(path, sizeof path, "%s/nodes", dir);
		mkdir(path, 0755);
		if (run_case("pbsp", "check", 1000, 10, "real", true, dir, &r) == 0) {
			char line[256] = "", last[256] = "";
			FILE *f;

			snprintf(path, sizeof path, "%s/eval.csv", dir);
			f = fopen(path, "re");
			while (f && fgets(line, sizeof line, f))
				snprintf(last, sizeof last, "%s", line);
			if (f)
				fclose(f);
			printf("  %.2f s wall, %.2f s cpu, %llu events, final step median %.1f, %.1f MB held; "
			       "last eval row: %s", r.wall_s, r.cpu_s, r.events, r.median, r.held / 1048576.0,
			       last[0] ? last : "(none)\n");
		} else {
			printf("  failed (data set missing?)\n");
		}
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			printf("  could not remove %s\n", dir);
	}
	return 0;
}
