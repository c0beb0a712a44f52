/* Every parameter-server scheme learns: 8 workers and a server on 127.0.0.1 (unshaped), the
 * whole Fashion-MNIST training set split iid, MLP [128], batch 64, lr 0.05 (the scenario
 * default) with momentum 0.9 (harder on asynchrony than the scenario default 0); each of bsp,
 * ssp(3), asp, pbsp(3), pssp(3, 3) and model averaging (BSP and ASP, H = 10) must pass 80% test
 * accuracy within 60 s. Each run stops at 80% (stop.accuracy).
 *
 * Each scheme takes a few seconds on two cores (a minute at worst, when it fails). Prints one
 * line per scheme (time to 80%, final accuracy, model version). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "node/engine_ps.h"
#include "tests/support/files.h"
#include "tests/support/proc.h"
#include "tests/support/ports.h"

#define NW 8
#define TARGET 0.80
#define BUDGET_S 60.0

static struct kv *node_cfg(const char *dir, long long origin, int port, const char *barrier,
			   int local_steps, int i)
{
	struct kv *k = kv_new();

	cr_assert_not_null(k);
	kv_set(k, "run.dir", dir);
	kv_setf(k, "run.origin_ns", "%lld", origin);
	kv_set(k, "run.seed", "42");
	kv_setf(k, "workers.count", "%d", NW);
	kv_set(k, "workers.addrs", "127.0.0.1,127.0.0.1,127.0.0.1,127.0.0.1,127.0.0.1,127.0.0.1,"
				   "127.0.0.1,127.0.0.1");
	kv_set(k, "workers.names", "worker0,worker1,worker2,worker3,worker4,worker5,worker6,worker7");
	kv_set(k, "servers.addrs", "127.0.0.1");
	kv_setf(k, "port.data", "%d", port);
	kv_set(k, "model.kind", "mlp");
	kv_set(k, "model.hidden", "128");
	kv_set(k, "train.batch", "64");
	kv_set(k, "train.lr", "0.05");
	kv_set(k, "train.momentum", "0.9");
	kv_set(k, "data.partition.scheme", "iid");
	kv_setf(k, "stop.time", "%.1f", BUDGET_S);
	kv_setf(k, "stop.accuracy", "%.2f", TARGET);
	kv_set(k, "eval.every", "2");
	kv_set(k, "consistency.barrier", barrier);
	kv_set(k, "consistency.staleness", "3");
	kv_set(k, "consistency.sample", "3");
	kv_set(k, "consistency.dead_after", "10");
	kv_setf(k, "consistency.local_steps", "%d", local_steps);
	kv_set(k, "consistency.combine", local_steps > 1 ? "average" : "none");
	if (i < 0) {
		kv_set(k, "node.name", "server0");
		kv_set(k, "node.role", "server");
		kv_set(k, "node.index", "0");
	} else {
		kv_setf(k, "node.name", "worker%d", i);
		kv_set(k, "node.role", "worker");
		kv_setf(k, "node.index", "%d", i);
	}
	return k;
}

/* First eval.csv time at or above TARGET (-1 if never), and the last row's accuracy/version. */
static double time_to_target(const char *dir, double *final_acc, long *version)
{
	char path[512], line[512];
	double hit = -1;
	FILE *f;

	snprintf(path, sizeof path, "%s/eval.csv", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	cr_assert_not_null(fgets(line, sizeof line, f)); /* header */
	while (fgets(line, sizeof line, f)) {
		double t, epoch, acc;
		unsigned long long samples;

		/* t_s,node,updates,epoch,samples,test_accuracy,... */
		if (sscanf(line, "%lf,%*[^,],%ld,%lf,%llu,%lf", &t, version, &epoch, &samples, &acc) != 5)
			continue;
		*final_acc = acc;
		if (hit < 0 && acc >= TARGET)
			hit = t;
	}
	fclose(f);
	return hit;
}

static void learn(const char *barrier, int local_steps)
{
	char dir[64];
	long long origin;
	pid_t pids[NW + 1];
	int port = support_free_ports(NW + 2);
	double hit, acc = 0;
	long version = 0;

	cr_assert_gt(port, 0, "no free ports");
	support_tmpdir(dir, sizeof dir, "pslearn");
	origin = (long long)clock_now_ns();
	for (int i = -1; i < NW; i++) {
		struct kv *k = node_cfg(dir, origin, port, barrier, local_steps, i);
		pid_t pid = fork();

		cr_assert_geq(pid, 0);
		if (pid == 0) {
			log_init(i < 0 ? "server0" : "worker", LOG_WARN);
			_exit((i < 0 ? engine_ps_server_run(k) : engine_ps_worker_run(k)) == 0 ? 0 : 1);
		}
		pids[i + 1] = pid;
		kv_destroy(&k);
	}
	/* stop.time is BUDGET_S: nodes still running 100 s later are killed (timeout 180 s) */
	{
		int st[NW + 1];

		support_wait_children(pids, NW + 1, st, (int)(BUDGET_S * 1000) + 100000);
		for (int i = 0; i <= NW; i++)
			cr_assert(st[i] != -1 && WIFEXITED(st[i]) && WEXITSTATUS(st[i]) == 0,
				  "node %d failed (status %d)", i - 1, st[i]);
	}
	hit = time_to_target(dir, &acc, &version);
	fprintf(stderr, "ps-learn %-5s H=%-2d 8 workers mlp[128]: %s %.1f s, final accuracy %.4f, "
		"version %ld\n", barrier, local_steps, hit >= 0 ? "80% at" : "80% NOT reached, ran",
		hit >= 0 ? hit : BUDGET_S, acc, version);
	cr_assert_geq(hit, 0, "%s: accuracy %.4f after %.0f s", barrier, acc, BUDGET_S);
	cr_assert_leq(hit, BUDGET_S + 5);
	cr_assert_eq(support_rm_rf(dir), 0);
}

Test(engine_ps_learn, bsp, .timeout = 180) { learn("bsp", 1); }
Test(engine_ps_learn, ssp, .timeout = 180) { learn("ssp", 1); }
Test(engine_ps_learn, asp, .timeout = 180) { learn("asp", 1); }
Test(engine_ps_learn, pbsp, .timeout = 180) { learn("pbsp", 1); }
Test(engine_ps_learn, pssp, .timeout = 180) { learn("pssp", 1); }
Test(engine_ps_learn, averaging_bsp, .timeout = 180) { learn("bsp", 10); }
Test(engine_ps_learn, averaging_asp, .timeout = 180) { learn("asp", 10); }
