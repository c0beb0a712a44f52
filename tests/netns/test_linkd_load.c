/* The nfq emulator's deferred reads (netem/linkd.c, defer_reads) at a high packet rate through a
 * 20 ms link while linkd's CPU is taken by another real-time process for stretches of 3 ms.
 *
 * Fixture: two namespaces joined by one veth pair (198.18.x.1/.2), linkd in a thread of this
 * process at stalenet-linkd's default SCHED_FIFO priority, pinned to CPU 0; link_shaper in nfq
 * mode. A sender thread in "node" sends stamped 64-byte UDP datagrams at RATE_PPS, a receiver
 * thread in "switch" notes when each arrives; both run SCHED_FIFO 5 on CPU 1, so arrivals go on
 * while linkd waits. The load (start_load) makes linkd's wake-ups late by up to 3 ms at random
 * times, a tail that a deferral's resume must be early enough for. The same traffic runs once with
 * deferred reads off and once on.
 *
 * Asserted: every packet arrives in both, none early (the link delays); with deferral, linkd did
 * pause its reads, and at most 0.1% of the packets were read after their release time
 * (linkd_defer_stats). The resume margin of the first version (1 ms plus the timer's
 * mean lateness) read 0.7-1.3% of them late under this load (811-1570 of 120000). How late the
 * packets arrive is printed, not asserted: on a shared host it is the host's (single packets
 * 5-460 ms late with the deferral off as much as on).
 * Skips without root; fails instead when STALENET_TESTS_MUST_RUN=1. */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/netns.h"
#include "netem/link_shaper.h"
#include "netem/linkd.h"
#include "tests/support/files.h"
#include "tests/support/fixture.h"
#include "tests/support/proc.h"
#include "tests/support/vethpair.h"

#define DELAY_US 20000
#define RATE_PPS 40000          /* offered load: more leaves no CPU to the rest on a 2-CPU host */
#define SEND_S 3                /* seconds of traffic per phase */
#define NPKT (RATE_PPS * SEND_S)
#define PER_SEND (RATE_PPS / 4000)
#define PORT 9100
#define MAX_LOADERS 1
#define SEND_EVERY_NS 250000   /* the sender's period: RATE_PPS / 4000 datagrams each */

static char ctl[128], tmpdir[64];
static struct support_veth_pair vp; /* a: the node, b: the switch side */
static struct support_linkd ld;
static struct link_shaper *shaper;
static struct link_endpoint ep;

/* Pin thread t to CPU cpu when this host has that many. */
static void pin(pthread_t t, int cpu)
{
	cpu_set_t set;

	if (cpu >= sysconf(_SC_NPROCESSORS_ONLN))
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	cr_assert_eq(pthread_setaffinity_np(t, sizeof set, &set), 0);
}

static void start_linkd(bool defer)
{
	struct linkd *d = linkd_new(ctl);

	cr_assert_not_null(d);
	linkd_set_rt_priority(d, 10); /* stalenet-linkd's default */
	linkd_set_defer_reads(d, defer);
	support_linkd_start(&ld, d);
	pin(ld.thread, 0);
}

static void setup(void)
{
	log_init("test", LOG_WARN);
	support_require_root();
	if (support_veth_pair_up(&vp, "l") < 0) {
		support_skip_or_fail("cannot create namespaces / veth");
		return;
	}
	struct sched_param sp = { .sched_priority = 5 };
	if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) < 0)
		support_skip_or_fail("no real-time priority for the measuring threads: %s", strerror(errno));
	support_tmpdir(tmpdir, sizeof tmpdir, "linkdload");
	snprintf(ctl, sizeof ctl, "%s/linkd.sock", tmpdir);
	struct link_shaper_opts o = { .backend = LINK_BACKEND_NFQ, .linkd_ctl = ctl };
	shaper = link_shaper_new(&o);
	cr_assert_not_null(shaper);
	ep = (struct link_endpoint){ vp.ns_a, vp.if_a, vp.ns_b, vp.if_b };
}

static void teardown(void)
{
	if (shaper) {
		if (ld.running) {
			link_shaper_remove(shaper, &ep, LINK_DIR_UP);
			link_shaper_remove(shaper, &ep, LINK_DIR_DOWN);
		}
		link_shaper_destroy(&shaper);
	}
	support_linkd_stop(&ld);
	support_veth_pair_down(&vp);
	if (tmpdir[0])
		support_rm_rf(tmpdir);
}

/* --- traffic ---------------------------------------------------------------------------------- */

struct wire {
	uint32_t seq;
	uint32_t pad;
	int64_t tx_real_ns;
	char fill[48];
};

struct rx {
	int fd;
	int64_t *err_ns;        /* per sequence number: one-way time less the delay, INT64_MIN = none */
	int64_t deadline_ns;    /* lib/clock: stop receiving */
	int got;
};

static int64_t real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Userspace receive times: the kernel's receive stamp is taken before the NFQUEUE hold. The
 * thread drains the socket and polls only when it is empty. */
static void *rx_main(void *arg)
{
	struct rx *r = arg;
	struct wire w;

	while (r->got < NPKT && clock_now_ns() < r->deadline_ns) {
		ssize_t n = recv(r->fd, &w, sizeof w, MSG_DONTWAIT);
		int64_t at = real_ns();
		if (n < 0) {
			struct pollfd p = { .fd = r->fd, .events = POLLIN };
			poll(&p, 1, 20);
			continue;
		}
		if (n != (ssize_t)sizeof w || w.seq >= NPKT || r->err_ns[w.seq] != INT64_MIN)
			continue;
		r->err_ns[w.seq] = at - w.tx_real_ns - DELAY_US * 1000LL;
		r->got++;
	}
	return NULL;
}

/* The load: a process pinned to linkd's CPU (0), SCHED_FIFO above linkd (as another real-time
 * process sharing its CPU would be), busy for BUSY_NS at the start of periods of 5-15 ms (random,
 * so that linkd's pauses cannot fall into step with them) and asleep for the rest; it ends by
 * itself after limit_s. A wake-up of linkd that falls in a busy stretch comes up to BUSY_NS late
 * (a third of them by chance): the sender, the receiver and the kernel's queueing go on meanwhile
 * on the other CPU. */
#define PERIOD_NS 10000000LL
#define BUSY_NS 3000000LL
#define LOAD_PRIO 20

static int start_load(pid_t *pids, int limit_s)
{
	int64_t t0 = clock_now_ns();
	pid_t p = fork();

	cr_assert_geq(p, 0);
	if (p == 0) {
		cpu_set_t set;
		struct sched_param sp = { .sched_priority = LOAD_PRIO };
		int64_t end = t0 + (int64_t)limit_s * 1000000000LL;
		volatile uint64_t x = 0;

		CPU_ZERO(&set);
		CPU_SET(0, &set);
		sched_setaffinity(0, sizeof set, &set);
		if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
			_exit(3);
		uint64_t rnd = 88172645463325252ull;
		for (int64_t per = t0; per < end; per += PERIOD_NS / 2 + (int64_t)(rnd % PERIOD_NS)) {
			rnd ^= rnd << 13;
			rnd ^= rnd >> 7;
			rnd ^= rnd << 17;
			struct timespec ts = { (time_t)(per / 1000000000), (long)(per % 1000000000) };
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
			while (clock_now_ns() < per + BUSY_NS)
				x++;
		}
		_exit(0);
	}
	pids[0] = p;
	return 1;
}

static void stop_load(pid_t *pids, int n)
{
	int st;
	for (int i = 0; i < n; i++)
		kill(pids[i], SIGKILL);
	cr_assert_eq(support_wait_children(pids, n, &st, 10000), 0);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

struct summary {
	int got;
	struct linkd_defer_stats ds;
	double min_ms, p50_ms, p99_ms, p999_ms, max_ms;
};

/* One phase: linkd with or without deferred reads, the 20 ms link, the load, the traffic. */
static struct summary phase(bool defer)
{
	struct summary s = { 0 };
	pid_t pids[MAX_LOADERS];
	struct link_params lp = { .delay_us = DELAY_US, .limit_pkts = 100000 };

	start_linkd(defer);
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &lp), 0);
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_DOWN, &lp), 0);
	int rfd = support_veth_pair_receiver(&vp, PORT), sfd = support_veth_pair_sender(&vp, PORT);

	struct rx r = { .fd = rfd, .err_ns = malloc(NPKT * sizeof(int64_t)) };
	cr_assert_not_null(r.err_ns);
	for (int i = 0; i < NPKT; i++)
		r.err_ns[i] = INT64_MIN;
	int nload = start_load(pids, SEND_S + 10);
	r.deadline_ns = clock_now_ns() + (SEND_S + 5) * 1000000000LL;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, rx_main, &r), 0);
	pin(t, 1);
	pin(pthread_self(), 1);

	/* the sender: PER_SEND datagrams every SEND_EVERY_NS */
	struct wire w = { 0 };
	int64_t start = clock_now_ns();
	for (int tick = 0; tick < NPKT / PER_SEND; tick++) {
		struct timespec until = { 0 };
		int64_t at = start + (int64_t)tick * SEND_EVERY_NS;
		until.tv_sec = at / 1000000000;
		until.tv_nsec = at % 1000000000;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL);
		for (int k = 0; k < PER_SEND; k++) {
			w.seq = (uint32_t)(tick * PER_SEND + k);
			w.tx_real_ns = real_ns();
			if (send(sfd, &w, sizeof w, 0) < 0)
				cr_log_info("send: %s", strerror(errno));
		}
	}
	pthread_join(t, NULL);
	stop_load(pids, nload);
	linkd_defer_stats(ld.lkd, &s.ds);
	close(sfd);
	close(rfd);
	link_shaper_remove(shaper, &ep, LINK_DIR_UP);
	link_shaper_remove(shaper, &ep, LINK_DIR_DOWN);
	support_linkd_stop(&ld);

	int64_t *v = malloc(NPKT * sizeof(int64_t));
	cr_assert_not_null(v);
	int n = 0;
	for (int i = 0; i < NPKT; i++)
		if (r.err_ns[i] != INT64_MIN)
			v[n++] = r.err_ns[i];
	qsort(v, (size_t)n, sizeof *v, cmp_i64);
	s.got = n;
	if (n) {
		s.min_ms = v[0] / 1e6;
		s.p50_ms = v[n / 2] / 1e6;
		s.p99_ms = v[(int)((n - 1) * 0.99)] / 1e6;
		s.p999_ms = v[(int)((n - 1) * 0.999)] / 1e6;
		s.max_ms = v[n - 1] / 1e6;
	}
	free(v);
	free(r.err_ns);
	cr_log_info("deferred reads %s: %d of %d packets; %" PRIu64 " pauses (mean %.2f ms), %" PRIu64
		    " packets read late; error min %.3f p50 %.3f p99 %.3f p99.9 %.3f max %.3f ms",
		    defer ? "on " : "off", n, NPKT, s.ds.pauses,
		    s.ds.pauses ? s.ds.pause_ns / 1e6 / (double)s.ds.pauses : 0.0, s.ds.late_reads, s.min_ms, s.p50_ms, s.p99_ms, s.p999_ms, s.max_ms);
	return s;
}

TestSuite(linkd_load, .init = setup, .fini = teardown, .timeout = 180);

Test(linkd_load, deferred_reads_no_later_than_reading_at_once)
{
	char la[128] = "";
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (!fgets(la, sizeof la, f))
			la[0] = '\0';
		fclose(f);
	}
	cr_log_info("load average at start: %s", la);
	struct summary off, on;

	/* Up to three attempts: a stall of the whole host longer than every wake-up linkd saw in
	 * the second before (a virtual machine's vCPU parked for tens of ms) makes one resume late
	 * beyond any margin; a margin that is too small is late in every attempt (the one of the
	 * first version was: 811-1570 packets read late each time). */
	for (int attempt = 1;; attempt++) {
		off = phase(false);
		on = phase(true);
		if (on.ds.late_reads <= NPKT / 1000 || attempt == 3)
			break;
		cr_log_info("%" PRIu64 " packets read late: measuring again (%d of 3)", on.ds.late_reads, attempt + 1);
	}
	cr_assert_eq(off.got, NPKT);
	cr_assert_eq(on.got, NPKT);
	/* the link delays every packet by its 20 ms, less the release compensation (tens of us) at
	 * most: no packet early. How late they are is the host's as much as linkd's (medians of
	 * 0.05-2.3 ms and single packets up to 460 ms late measured at load 4-9, either mode), so
	 * that side is printed, not asserted. */
	cr_assert_geq(off.min_ms, -0.5, "a packet %.3f ms early without deferral", -off.min_ms);
	cr_assert_geq(on.min_ms, -0.5, "a packet %.3f ms early with deferral", -on.min_ms);
	cr_assert_eq(off.ds.pauses, 0);
	/* the deferral is in use under this load (not switched off by it) ... */
	cr_assert_geq(on.ds.pauses, SEND_S * 20, "deferred reads: only %" PRIu64 " pauses", on.ds.pauses);
	/* ... and its resumes come before the backlog's releases: 0.1% of the packets at most */
	cr_assert_leq(on.ds.late_reads, NPKT / 1000,
		      "deferred reads: %" PRIu64 " of %d packets read after their release time", on.ds.late_reads, NPKT);
}
