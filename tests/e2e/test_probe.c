/* The probe and reflector roles over loopback: rows written, verdicts ok on an unshaped path,
 * `off` when the configuration claims a delay the path does not have, and the probe's
 * measuring thread real-time when permitted. */
#include <criterion/criterion.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/kv.h"
#include "node/probe.h"
#include "tests/support/files.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"
#include "tests/support/ports.h"

static void run_probe(const char *dir, int port, const char *claimed_delay, const char *expect)
{
	struct kv *refl = kv_new(), *p = kv_new();
	char path[512], portbuf[16];
	pid_t pid;
	char *csv;

	snprintf(portbuf, sizeof portbuf, "%d", port);
	kv_set(refl, "node.name", "hub");
	kv_set(refl, "port.probe", portbuf);
	pid = fork();
	if (pid == 0)
		_exit(probe_reflector_run(refl));
	/* The reflector is ready once its UDP port is bound. */
	cr_assert(support_wait_port(SOCK_DGRAM, port, 10000), "the reflector did not bind port %d", port);
	kv_set(p, "node.name", "worker0");
	kv_set(p, "node.index", "0");
	kv_set(p, "run.dir", dir);
	kv_set(p, "hub.addr", "127.0.0.1");
	kv_set(p, "port.probe", portbuf);
	kv_set(p, "linkcheck.probes", "300");
	kv_set(p, "linkcheck.interval", "0.001");
	kv_set(p, "linkcheck.up", claimed_delay);
	cr_assert_eq(probe_run(p), 0);
	kill(pid, SIGKILL);
	support_wait_pid(pid, NULL, 10000);
	snprintf(path, sizeof path, "%s/linkcheck.csv", dir);
	csv = support_slurp(path, NULL);
	cr_assert(strncmp(csv, "node,direction,probes,cfg_delay_ms,", 35) == 0, "%s", csv);
	cr_assert(strstr(csv, "worker0,up,300,") != NULL, "%s", csv);
	cr_assert(strstr(csv, "worker0,down,300,") != NULL, "%s", csv);
	cr_assert(strstr(csv, "worker0,rtt,300,") != NULL, "%s", csv);
	cr_assert(strstr(csv, expect) != NULL, "expected '%s' in:\n%s", expect, csv);
	free(csv);
	unlink(path);
	kv_destroy(&refl);
	kv_destroy(&p);
}

Test(probe, loopback_ok, .timeout = 30)
{
	char dir[] = "/tmp/stalenet-probe-XXXXXX";

	cr_assert_not_null(support_mkdtemp(dir));
	run_probe(dir, support_free_ports(1), "", "worker0,up,300,0.000,0.000,0.000000,");
	rmdir(dir);
}

/* The probe timestamps from a real-time thread when permitted (root here), so a busy host's run
 * queue is not measured as link delay; its children would get the normal policy back. Without
 * the permission it runs on at the normal policy. */
Test(probe, measures_at_real_time_priority_when_permitted, .timeout = 30)
{
	char dir[] = "/tmp/stalenet-probe-XXXXXX";
	struct sched_param normal = { .sched_priority = 0 }, sp;
	int policy;

	cr_assert_not_null(support_mkdtemp(dir));
	run_probe(dir, support_free_ports(1), "", "worker0,up,300,0.000,0.000,0.000000,");
	rmdir(dir);
	policy = sched_getscheduler(0);
	cr_assert_eq(sched_getparam(0, &sp), 0);
	if (geteuid() == 0) {
		cr_assert_eq(policy, SCHED_FIFO | SCHED_RESET_ON_FORK, "policy %d", policy);
		cr_assert_gt(sp.sched_priority, 0);
	} else {
		cr_assert_eq(policy, SCHED_OTHER, "policy %d", policy);
	}
	cr_assert_eq(sched_setscheduler(0, SCHED_OTHER, &normal), 0);
}

Test(probe, claimed_delay_is_off, .timeout = 30)
{
	char dir[] = "/tmp/stalenet-probe-XXXXXX";

	cr_assert_not_null(support_mkdtemp(dir));
	/* The config claims 10 ms up but loopback has none: the up row must be judged off. */
	run_probe(dir, support_free_ports(1), "delay_us=10000", ",off\n");
	rmdir(dir);
}

Test(probe, welford_matches_two_pass)
{
	double xs[] = { 3, 7, 7, 19, 24.5, -3 }, mean = 0, ss = 0;
	struct probe_acc a = { 0 };
	int n = sizeof xs / sizeof xs[0];

	for (int i = 0; i < n; i++) {
		probe_acc_add(&a, xs[i]);
		mean += xs[i] / n;
	}
	for (int i = 0; i < n; i++)
		ss += (xs[i] - mean) * (xs[i] - mean);
	cr_assert_float_eq(a.mean, mean, 1e-12);
	cr_assert_float_eq(probe_acc_sd(&a), sqrt(ss / (n - 1)), 1e-12);
}
