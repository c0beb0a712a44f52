/* bench_linkd: NFQUEUE emulator throughput (packets per second per core of linkd's thread) at
 * 0 ms and 20 ms delay, and a configured-vs-measured fidelity table for the available backends:
 * for nfq once per release precision (timer, spin; netem/linkd.h), with the emulator's own p99
 * release lateness and its CPU time per row, rows whose probes each follow 1 s or 11 s of idling
 * (the first packets after a quiet period), and the CPU a link costs at 10k packets/s.
 *
 * The probe and echo threads run SCHED_FIFO 5 (below linkd's 10) as the link self-check's probes
 * do (node/probe): at normal priority a loaded host's run queue delays them by milliseconds, and
 * that was measured as link delay. STALENET_BENCH_PROBE_RT=0 measures them at normal priority.
 *
 * Two namespaces joined by a veth pair; linkd runs in a thread of this process, its CPU time read
 * from the thread's CPU clock; a sender thread blasts 64-byte UDP datagrams with sendmmsg. Needs
 * root; prints a note and exits 0 elsewhere. Nothing is asserted: the numbers are the output.
 *
 * STALENET_BENCH_PARTS picks parts (words of: pps and spinpps for the throughput rows of the timer
 * and spin modes, timer, spin and kernel for the fidelity tables, cpu; default all);
 * STALENET_BENCH_COMP=0 runs the
 * emulator without its release compensation (netem/linkd_comp), STALENET_BENCH_DEFER=0 without its
 * deferred reads (linkd_set_defer_reads), STALENET_BENCH_WINDOW_US=N with a release window of N
 * microseconds (linkd_set_release_window; 0 = off), STALENET_BENCH_READ_WINDOW_US=N with a read
 * window of N (linkd_set_read_window; 0 = off), for before/after tables from one binary. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/netns.h"
#include "netem/link_shaper.h"
#include "lib/link_verdict.h"
#include "netem/linkd.h"
#include "lib/timerlat.h"

static char ns_a[64], ns_b[64], if_a[16], if_b[16], ctl[128], tmpdir[64];
static struct linkd *lkd;
static struct link_shaper *cur_nfq; /* the shaper whose emulator is lkd (CPU time is read for it) */
static pthread_t lkd_thread;
static clockid_t lkd_clock;

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	return system(cmd);
}

static void *linkd_main(void *arg)
{
	linkd_run(arg);
	return NULL;
}

static int probe_rt_prio = 5;

/* Whether part (a word of STALENET_BENCH_PARTS) is to run: every part when it is unset. */
static bool part(const char *name)
{
	const char *p = getenv("STALENET_BENCH_PARTS");
	size_t n = strlen(name);

	if (!p || !*p)
		return true;
	for (const char *s = p; (s = strstr(s, name)); s += n)
		if ((s == p || strchr(" ,", s[-1])) && strchr(" ,", s[n]))
			return true;
	return false;
}

/* This thread SCHED_FIFO at prio, or back to the normal scheduler with 0. */
static void self_rt(int prio)
{
	struct sched_param sp = { .sched_priority = prio > 0 ? prio : 0 };

	pthread_setschedparam(pthread_self(), prio > 0 ? SCHED_FIFO : SCHED_OTHER, &sp);
}

/* A fresh emulator thread with this precision (the previous one, if any, stopped). */
static int lkd_start(enum linkd_precision prec, int64_t margin_ns)
{
	if (lkd) {
		linkd_stop(lkd);
		pthread_join(lkd_thread, NULL);
		linkd_destroy(&lkd);
	}
	lkd = linkd_new(ctl);
	if (!lkd)
		return -1;
	if (getenv("STALENET_LINKD_RT_PRIO")) /* compare with the normal scheduler: =0 */
		linkd_set_rt_priority(lkd, atoi(getenv("STALENET_LINKD_RT_PRIO")));
	linkd_set_precision(lkd, prec, margin_ns);
	if (getenv("STALENET_BENCH_COMP") && atoi(getenv("STALENET_BENCH_COMP")) == 0)
		linkd_set_compensation(lkd, 0);
	if (getenv("STALENET_BENCH_DEFER") && atoi(getenv("STALENET_BENCH_DEFER")) == 0)
		linkd_set_defer_reads(lkd, false);
	if (getenv("STALENET_BENCH_WINDOW_US")) /* the release window (default: linkd's) */
		linkd_set_release_window(lkd, (int64_t)atoi(getenv("STALENET_BENCH_WINDOW_US")) * 1000);
	if (getenv("STALENET_BENCH_READ_WINDOW_US")) /* the read window (default: linkd's) */
		linkd_set_read_window(lkd, (int64_t)atoi(getenv("STALENET_BENCH_READ_WINDOW_US")) * 1000);
	pthread_create(&lkd_thread, NULL, linkd_main, lkd);
	pthread_getcpuclockid(lkd_thread, &lkd_clock);
	return 0;
}

struct sockreq {
	int type, fd, port, rcvbuf;
};

static int open_sock(void *arg)
{
	struct sockreq *r = arg;
	r->fd = socket(AF_INET, r->type | SOCK_CLOEXEC, 0);
	if (r->fd < 0)
		return -errno;
	if (r->rcvbuf)
		setsockopt(r->fd, SOL_SOCKET, SO_RCVBUFFORCE, &r->rcvbuf, sizeof r->rcvbuf);
	if (r->port) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)r->port) };
		if (bind(r->fd, (struct sockaddr *)&a, sizeof a) < 0)
			return -errno;
	}
	return 0;
}

static int sock_in(const char *ns, int type, int port, int rcvbuf)
{
	struct sockreq r = { type, -1, port, rcvbuf };
	return netns_call(ns, open_sock, &r) == 0 ? r.fd : -1;
}

static struct sockaddr_in addr_b(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, "198.18.250.2", &a.sin_addr);
	return a;
}

static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(lkd_clock, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void pps(struct link_shaper *s, const struct link_endpoint *ep, uint32_t delay_us)
{
	struct link_params p = { .delay_us = delay_us, .limit_pkts = 60000 };
	if (link_shaper_apply(s, ep, LINK_DIR_UP, &p) < 0) {
		printf("apply failed\n");
		return;
	}
	int rx = sock_in(ns_b, SOCK_DGRAM, 9400, 1 << 16); /* never read: drops are cheap */
	int tx = sock_in(ns_a, SOCK_DGRAM, 0, 0);
	struct sockaddr_in to = addr_b(9400);
	enum { BATCH = 64 };
	char payload[64] = { 0 };
	struct iovec iov[BATCH];
	struct mmsghdr m[BATCH];
	for (int i = 0; i < BATCH; i++) {
		iov[i] = (struct iovec){ payload, sizeof payload };
		m[i] = (struct mmsghdr){ .msg_hdr = { .msg_name = &to, .msg_namelen = sizeof to,
						      .msg_iov = &iov[i], .msg_iovlen = 1 } };
	}
	struct link_counters c0, c1;
	/* the sender real-time too (below linkd): the row measures what the emulator can take, not
	 * how much of a loaded host's CPU the sender got (STALENET_BENCH_PROBE_RT=0: normal) */
	self_rt(probe_rt_prio);
	link_shaper_counters(s, ep, LINK_DIR_UP, &c0);
	double cpu0 = thread_cpu_s();
	int64_t t0 = clock_now_ns(), end = t0 + 3000000000LL;
	uint64_t sent = 0;
	while (clock_now_ns() < end) {
		int n = sendmmsg(tx, m, BATCH, 0);
		if (n > 0)
			sent += (uint64_t)n;
		/* pace just under the emulator's capacity: held packets stay under the limit */
		struct link_counters now;
		if ((sent & 0x3fff) < BATCH && link_shaper_counters(s, ep, LINK_DIR_UP, &now) == 0 &&
		    now.backlog_pkts > 50000)
			usleep(1000);
	}
	self_rt(0);
	usleep((delay_us + 50000) / 1000 * 1000);
	double cpu1 = thread_cpu_s();
	int64_t t1 = clock_now_ns();
	link_shaper_counters(s, ep, LINK_DIR_UP, &c1);
	uint64_t pk = c1.packets - c0.packets, dr = c1.dropped - c0.dropped;
	double wall = (t1 - t0) / 1e9, cpu = cpu1 - cpu0;
	printf("| %5.1f ms | %9lu | %9lu | %6lu | %6.2f | %6.2f | %9.0f | %9.0f |\n", delay_us / 1000.0,
	       (unsigned long)sent, (unsigned long)pk, (unsigned long)dr, wall, cpu, pk / wall,
	       cpu > 0 ? pk / cpu : 0);
	close(rx);
	close(tx);
	link_shaper_remove(s, ep, LINK_DIR_UP);
}

static const char *loadavg(void)
{
	static char buf[64];
	FILE *f = fopen("/proc/loadavg", "re");

	buf[0] = '\0';
	if (f) {
		if (!fgets(buf, sizeof buf, f))
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, " ")] = '\0'; /* the 1-minute average */
	return buf;
}

/* linkd's CPU for one link carrying rate_pps 64-byte datagrams delayed delay_us, for 3 s. */
static void pps_paced(struct link_shaper *s, const struct link_endpoint *ep, uint32_t delay_us, int rate_pps,
		      const char *label)
{
	struct link_params p = { .delay_us = delay_us, .limit_pkts = 60000 };
	if (link_shaper_apply(s, ep, LINK_DIR_UP, &p) < 0)
		return;
	int rx = sock_in(ns_b, SOCK_DGRAM, 9401, 1 << 20);
	int tx = sock_in(ns_a, SOCK_DGRAM, 0, 0);
	struct sockaddr_in to = addr_b(9401);
	char payload[64] = { 0 };
	struct link_counters c0, c1;
	link_shaper_counters(s, ep, LINK_DIR_UP, &c0);
	double cpu0 = thread_cpu_s();
	int64_t t0 = clock_now_ns(), end = t0 + 3000000000LL, gap = 1000000000LL / rate_pps, next = t0;
	while (next < end) {
		/* 1 ms worth per burst: the sender's own sleeps need not be precise */
		int64_t burst_end = next + 1000000;
		for (; next < burst_end && next < end; next += gap)
			sendto(tx, payload, sizeof payload, 0, (struct sockaddr *)&to, sizeof to);
		clock_sleep_until_ns(next);
	}
	usleep(delay_us + 50000);
	double cpu = thread_cpu_s() - cpu0, wall = (clock_now_ns() - t0) / 1e9;
	link_shaper_counters(s, ep, LINK_DIR_UP, &c1);
	printf("\nlinkd CPU, precision %s, one link at %d packets/s delayed %.0f ms: %.1f%% of a core "
	       "(%.2f us a packet; %lu packets; late p99 %.3f ms)\n", label, rate_pps, delay_us / 1000.0,
	       100 * cpu / wall, (c1.packets - c0.packets) ? cpu * 1e6 / (double)(c1.packets - c0.packets) : 0,
	       (unsigned long)(c1.packets - c0.packets), c1.late_p99_ms);
	close(rx);
	close(tx);
	link_shaper_remove(s, ep, LINK_DIR_UP);
}

/* RTT statistics over n sequential UDP probes through an echo in ns_b. */
struct echo {
	int fd;
	volatile int stop;
};

static void *echo_main(void *arg)
{
	struct echo *e = arg;
	char buf[256];
	self_rt(probe_rt_prio);
	while (!e->stop) {
		struct pollfd p = { .fd = e->fd, .events = POLLIN };
		if (poll(&p, 1, 50) <= 0)
			continue;
		struct sockaddr_in from;
		socklen_t fl = sizeof from;
		ssize_t n = recvfrom(e->fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
		if (n > 0)
			sendto(e->fd, buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
	}
	return NULL;
}

/* n sequential probes (each after idle_ms of silence when > 0); a probe is lost after wait_ms.
 * Mean and sd of the round trips in ms; returns the number answered. */
static int probe_series(int c, const struct sockaddr_in *to, int n, int idle_ms, int64_t wait_ms, double *mean,
			double *sd)
{
	double sum = 0, sum2 = 0;
	int got = 0;

	for (int i = 0; i < n; i++) {
		if (idle_ms > 0) {
			struct timespec ts = { idle_ms / 1000, (idle_ms % 1000) * 1000000L };
			nanosleep(&ts, NULL);
		}
		int64_t t0 = clock_now_ns();
		uint32_t seq = (uint32_t)i, back = UINT32_MAX;
		sendto(c, &seq, sizeof seq, 0, (const struct sockaddr *)to, sizeof *to);
		for (;;) {
			struct pollfd pf = { .fd = c, .events = POLLIN };
			int64_t left = wait_ms - (clock_now_ns() - t0) / 1000000;
			if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
				break;
			if (recv(c, &back, sizeof back, 0) == (ssize_t)sizeof back && back == seq)
				break;
		}
		if (back == seq) {
			double ms = (clock_now_ns() - t0) / 1e6;
			sum += ms;
			sum2 += ms * ms;
			got++;
		}
	}
	*mean = got ? sum / got : 0;
	*sd = got > 1 ? sqrt(fmax(0, (sum2 - sum * sum / got) / (got - 1))) : 0;
	return got;
}

/* One row: the unshaped path's own round trip first (base: sockets, veth, the echo's wake-up;
 * added to the expectation as tests/netns/test_linkd_fidelity does), then n probes through the
 * shaped link. Errors are one-way: half the round trip's mean error, the sd's over sqrt 2. */
static void fidelity_row(struct link_shaper *s, const struct link_endpoint *ep, struct link_params p, int n,
			 int idle_ms)
{
	struct echo e = { .fd = sock_in(ns_b, SOCK_DGRAM, 9500, 0) };
	pthread_t t;
	pthread_create(&t, NULL, echo_main, &e);
	int c = sock_in(ns_a, SOCK_DGRAM, 0, 0);
	struct sockaddr_in to = addr_b(9500);
	double base = 0, base_sd = 0, mean, sd;

	probe_series(c, &to, 50, 0, 1000, &base, &base_sd);
	if (link_shaper_apply(s, ep, LINK_DIR_UP, &p) < 0 || link_shaper_apply(s, ep, LINK_DIR_DOWN, &p) < 0) {
		printf("| %5.1f | %5.1f | %-6s | %5.2f%% | this backend could not shape the link (see the log) |\n",
		       p.delay_us / 1000.0, p.jitter_us / 1000.0, link_params_dist_name(p.dist), p.loss_ppm / 1e4);
		goto out;
	}
	struct link_verdict_expect ex;
	link_verdict_expect_from(&p, &p, &ex);
	/* a probe is lost once it is 4 expected RTTs (+ 50 ms) late */
	int64_t wait_ms = (int64_t)(4 * (ex.rtt_mean_ms + 3 * ex.rtt_sd_ms)) + 50;
	struct link_counters lc;
	link_shaper_counters(s, ep, LINK_DIR_UP, &lc); /* the emulator's lateness interval starts here */
	link_shaper_counters(s, ep, LINK_DIR_DOWN, &lc);
	double cpu0 = s == cur_nfq ? thread_cpu_s() : 0;
	int64_t w0 = clock_now_ns();
	int got = probe_series(c, &to, n, idle_ms, wait_ms, &mean, &sd);
	double cpu_ms_per_s = s == cur_nfq ? (thread_cpu_s() - cpu0) * 1e3 / ((clock_now_ns() - w0) / 1e9) : NAN;
	double late = NAN, late_mean = NAN;
	if (link_shaper_counters(s, ep, LINK_DIR_UP, &lc) == 0 && lc.late_known) {
		late = lc.late_p99_ms;
		late_mean = lc.late_mean_ms;
	}
	if (link_shaper_counters(s, ep, LINK_DIR_DOWN, &lc) == 0 && lc.late_known) {
		if (!(lc.late_p99_ms <= late))
			late = lc.late_p99_ms;
		late_mean = isnan(late_mean) ? lc.late_mean_ms : (late_mean + lc.late_mean_ms) / 2;
	}
	double loss = 1 - (double)got / n;
	struct link_verdict_expect eb = ex;
	eb.rtt_mean_ms += base;
	eb.rtt_sd_ms = sqrt(ex.rtt_sd_ms * ex.rtt_sd_ms + base_sd * base_sd);
	bool ok = link_verdict_verdict(&eb, (uint32_t)n, mean, sd, loss, NULL, 0);
	double mean_err = (mean - eb.rtt_mean_ms) / 2, sd_err = (sd - eb.rtt_sd_ms) / sqrt(2);
	printf("| %5.1f | %5.1f | %-6s | %5.2f%% | %-5s | %5.3f | %7.2f | %6.2f | %7.2f | %6.2f | %+6.3f | %+6.3f | %6.2f%% | %6.2f%% | %+6.3f | %6.3f | %5.1f | %6.3f | %s |\n",
	       p.delay_us / 1000.0, p.jitter_us / 1000.0, link_params_dist_name(p.dist), p.loss_ppm / 1e4,
	       idle_ms >= 10000 ? "11 s" : idle_ms ? "1 s" : "-", base, ex.rtt_mean_ms, ex.rtt_sd_ms, mean, sd, mean_err, sd_err, ex.loss * 100,
	       loss * 100, late_mean, late, cpu_ms_per_s, s == cur_nfq ? linkd_compensation_ns(lkd) / 1e6 : NAN,
	       ok ? "ok" : "off");
	link_shaper_remove(s, ep, LINK_DIR_UP);
	link_shaper_remove(s, ep, LINK_DIR_DOWN);
out:
	e.stop = 1;
	pthread_join(t, NULL);
	close(e.fd);
	close(c);
}

int main(void)
{
	log_init("bench", LOG_WARN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0) {
		printf("bench_linkd: needs root (namespaces, NFQUEUE): skipped\n");
		return 0;
	}
	snprintf(ns_a, sizeof ns_a, "snb%d-a", getpid());
	snprintf(ns_b, sizeof ns_b, "snb%d-b", getpid());
	snprintf(if_a, sizeof if_a, "snb%da", getpid() % 100000);
	snprintf(if_b, sizeof if_b, "snb%db", getpid() % 100000);
	int rc = 1;
	struct link_shaper *s = NULL;
	if (sh("ip netns add %s && ip netns add %s && ip link add %s netns %s type veth peer %s netns %s",
	       ns_a, ns_b, if_a, ns_a, if_b, ns_b) != 0 ||
	    sh("ip -n %s addr add 198.18.250.1/24 dev %s && ip -n %s addr add 198.18.250.2/24 dev %s && "
	       "ip -n %s link set %s up && ip -n %s link set %s up",
	       ns_a, if_a, ns_b, if_b, ns_a, if_a, ns_b, if_b) != 0) {
		fprintf(stderr, "bench_linkd: cannot create namespaces\n");
		goto out;
	}
	snprintf(tmpdir, sizeof tmpdir, "/tmp/snb-linkd-XXXXXX");
	if (!mkdtemp(tmpdir))
		goto out;
	snprintf(ctl, sizeof ctl, "%s/linkd.sock", tmpdir);
	if (getenv("STALENET_BENCH_PROBE_RT"))
		probe_rt_prio = atoi(getenv("STALENET_BENCH_PROBE_RT"));
	if (lkd_start(LINKD_PRECISION_TIMER, 0) < 0)
		goto out;
	struct link_endpoint ep = { ns_a, if_a, ns_b, if_b };
	struct link_shaper_opts o = { .backend = LINK_BACKEND_NFQ, .linkd_ctl = ctl };
	s = link_shaper_new(&o);
	if (!s)
		goto out;
	cur_nfq = s;
	if (part("pps")) {
		printf("\nnfq backend throughput (64-byte UDP, 3 s, one linkd thread; load %s)\n\n", loadavg());
		printf("| delay | sent | verdicted | dropped | wall s | cpu s | pkts/s | pkts/s per core |\n");
		printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
		pps(s, &ep, 0);
		pps(s, &ep, 20000);
	}

	struct link_params rows[] = {
		{ .delay_us = 10000 }, { .delay_us = 10000, .jitter_us = 5000 },
		{ .delay_us = 50000 }, { .delay_us = 50000, .jitter_us = 5000, .dist = LINK_DIST_NORMAL },
		{ .delay_us = 20000, .loss_ppm = 10000 }, { .delay_us = 5000, .loss_ppm = 50000 },
	};
	int kernel = link_shaper_probe_kernel() == 1;
	struct timerlat_opts to = TIMERLAT_OPTS_QUICK;
	struct timerlat_result tr;
	timerlat_measure(&to, &tr);
	int64_t margin = tr.warm.p99_ns;
	if (tr.idle.p99_ns > margin)
		margin = tr.idle.p99_ns;
	if (tr.load.p99_ns > margin)
		margin = tr.load.p99_ns;
	margin += 50000;
	printf("\nhost timers (lib/timerlat, %s): p99 busy %.3f ms, after idle %.3f ms, under load %.3f ms; "
	       "spin margin %.3f ms\n", tr.rt ? "real-time" : "no real-time priority", tr.warm.p99_ns / 1e6,
	       tr.idle.p99_ns / 1e6, tr.load.p99_ns / 1e6, margin / 1e6);
	static const char *const prec_names[] = { "timer", "spin" };
	for (int b = 0; b < 2 + kernel; b++) {
		struct link_shaper *fs = s;
		bool fid = part(b == 2 ? "kernel" : prec_names[b]);

		if (!fid && !(b < 2 && part("cpu")) && !(b == 1 && part("spinpps")))
			continue;
		if (b == 2) {
			struct link_shaper_opts ko = { .backend = LINK_BACKEND_KERNEL };
			fs = link_shaper_new(&ko);
			if (!fs)
				break;
		} else {
			link_shaper_destroy(&s);
			if (lkd_start(b ? LINKD_PRECISION_SPIN : LINKD_PRECISION_TIMER, margin) < 0)
				goto out;
			s = link_shaper_new(&o);
			if (!s)
				goto out;
			cur_nfq = fs = s;
		}
		if (!fid)
			goto after_rows;
		printf("\n%s backend fidelity%s%s: both directions shaped, RTT over UDP probes (userspace clock, "
		       "probes %s), load %s\n\n", b == 2 ? "kernel" : "nfq", b < 2 ? ", precision " : "",
		       b < 2 ? prec_names[b] : "", probe_rt_prio > 0 ? "SCHED_FIFO" : "normal priority", loadavg());
		printf("| delay ms | jitter ms | dist | loss | idle before | base RTT | exp RTT | exp sd | RTT | sd | one-way mean err | one-way sd err | exp loss | loss | linkd late mean ms | linkd late p99 ms | linkd cpu ms/s | linkd comp ms | verdict |\n");
		printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
		self_rt(probe_rt_prio);
		for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
			fidelity_row(fs, &ep, rows[i], rows[i].loss_ppm ? 2000 : 200, 0);
		/* the first packets after a quiet period: 1 s, and 11 s (longer than the emulator's
		 * LINKD_WARM_NS of wake-ups after the latest packet: its timer starts cold) */
		fidelity_row(fs, &ep, rows[0], 20, 1000);
		fidelity_row(fs, &ep, rows[0], 5, 11000);
		self_rt(0);
after_rows:
		if (b < 2 && part("cpu"))
			pps_paced(s, &ep, 20000, 10000, prec_names[b]);
		if (b == 1 && part("spinpps")) {
			printf("\nnfq backend throughput, precision spin (load %s)\n\n", loadavg());
			printf("| delay | sent | verdicted | dropped | wall s | cpu s | pkts/s | pkts/s per core |\n");
			printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
			pps(s, &ep, 0);
			pps(s, &ep, 20000);
		}
		if (b == 2)
			link_shaper_destroy(&fs);
	}
	if (!kernel)
		printf("\nkernel backend: %s\n", LINK_SHAPER_NO_NETEM_MSG);
	rc = 0;
out:
	link_shaper_destroy(&s);
	if (lkd) {
		linkd_stop(lkd);
		pthread_join(lkd_thread, NULL);
		linkd_destroy(&lkd);
	}
	sh("ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", ns_a, ns_b);
	if (tmpdir[0])
		sh("rm -rf %s", tmpdir);
	return rc;
}
