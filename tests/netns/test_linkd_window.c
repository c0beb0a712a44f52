/* The nfq emulator's release window and read window (netem/linkd.c, release_due and defer_reads)
 * at packet rates where the loop would otherwise wake, read and write verdicts for one or two
 * packets at a time.
 *
 * Fixture: two namespaces joined by one veth pair (198.18.x.1/.2), linkd in a thread of this
 * process at stalenet-linkd's default SCHED_FIFO priority; link_shaper in nfq mode. The sender
 * (this thread) sends bursts of BURST stamped 64-byte UDP datagrams with one sendmmsg each, a
 * receiver thread notes when each arrives; both at SCHED_FIFO 5.
 *
 * Asserted, each with the window on and off in one run of the same traffic:
 * - a 20 ms link: every packet arrives, none more than 0.5 ms early (the release window lets a
 *   packet leave 20 us early, the compensation tens of us); with the window (40 us) linkd wrote
 *   at most one verdict message per 4 packets, and fewer than without it;
 * - a link without delay at 128k packets/s: every packet arrives; with the read window
 *   linkd paused the link's reads and read at most once per 4 packets; without it, no pause.
 * How late packets arrive is printed: on a shared host it is the host's.
 * Skips without root; fails instead when STALENET_TESTS_MUST_RUN=1. */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
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
#include "netem/linkd.h"
#include "tests/support/files.h"
#include "tests/support/fixture.h"
#include "tests/support/vethpair.h"

#define BURST 32
#define PORT 9150
#define MAX_PKT 200000

static char ctl[128], tmpdir[64];
static struct support_veth_pair vp;
static struct support_linkd ld;
static struct link_shaper *shaper;
static struct link_endpoint ep;

static void start_linkd(int64_t window_ns)
{
	struct linkd *d = linkd_new(ctl);

	cr_assert_not_null(d);
	linkd_set_rt_priority(d, 10); /* stalenet-linkd's default */
	linkd_set_release_window(d, window_ns);
	linkd_set_read_window(d, window_ns);
	support_linkd_start(&ld, d);
}

static void setup(void)
{
	log_init("test", LOG_WARN);
	support_require_root();
	if (support_veth_pair_up(&vp, "w") < 0) {
		support_skip_or_fail("cannot create namespaces / veth");
		return;
	}
	struct sched_param sp = { .sched_priority = 5 };
	if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) < 0)
		support_skip_or_fail("no real-time priority for the measuring threads: %s", strerror(errno));
	support_tmpdir(tmpdir, sizeof tmpdir, "linkdwin");
	snprintf(ctl, sizeof ctl, "%s/linkd.sock", tmpdir);
	struct link_shaper_opts o = { .backend = LINK_BACKEND_NFQ, .linkd_ctl = ctl };
	shaper = link_shaper_new(&o);
	cr_assert_not_null(shaper);
	ep = (struct link_endpoint){ vp.ns_a, vp.if_a, vp.ns_b, vp.if_b };
}

static void teardown(void)
{
	if (shaper) {
		if (ld.running)
			link_shaper_remove(shaper, &ep, LINK_DIR_UP);
		link_shaper_destroy(&shaper);
	}
	support_linkd_stop(&ld);
	support_veth_pair_down(&vp);
	if (tmpdir[0])
		support_rm_rf(tmpdir);
}

struct wire {
	uint32_t seq;
	uint32_t pad;
	int64_t tx_ns;
	char fill[48];
};

struct rx {
	int fd, want, got;
	int64_t delay_ns;
	int64_t *err_ns;     /* per sequence number: one-way time less the delay, INT64_MIN = none */
	int64_t deadline_ns; /* stop receiving */
};

/* Drains the socket in batches (a datagram at a time would cost the receiver more than the
 * emulator at these rates) and polls only when it is empty. */
static void *rx_main(void *arg)
{
	enum { RB = 64 };
	struct rx *r = arg;
	static _Thread_local struct wire w[RB];
	struct iovec iov[RB];
	struct mmsghdr m[RB];

	for (int i = 0; i < RB; i++) {
		iov[i] = (struct iovec){ &w[i], sizeof w[i] };
		m[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
	}
	while (r->got < r->want && clock_now_ns() < r->deadline_ns) {
		int n = recvmmsg(r->fd, m, RB, MSG_DONTWAIT, NULL);
		int64_t at = clock_now_ns();
		if (n <= 0) {
			struct pollfd p = { .fd = r->fd, .events = POLLIN };
			poll(&p, 1, 20);
			continue;
		}
		for (int i = 0; i < n; i++) {
			if (m[i].msg_len != sizeof w[i] || (int)w[i].seq >= r->want || r->err_ns[w[i].seq] != INT64_MIN)
				continue;
			r->err_ns[w[i].seq] = at - w[i].tx_ns - r->delay_ns;
			r->got++;
		}
	}
	return NULL;
}

struct result {
	int sent, got;
	struct linkd_defer_stats ds;
	double min_ms, p50_ms, p99_ms, max_ms;
};

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* One phase: linkd with window_ns, one direction of delay_us, bursts every gap_ns for span_ns. */
static struct result phase(int64_t window_ns, uint32_t delay_us, int64_t gap_ns, int64_t span_ns)
{
	struct result res = { 0 };
	struct link_params lp = { .delay_us = delay_us, .limit_pkts = MAX_PKT };
	int bursts = (int)(span_ns / gap_ns), want = bursts * BURST;

	cr_assert_leq(want, MAX_PKT);
	start_linkd(window_ns);
	cr_assert_eq(link_shaper_apply(shaper, &ep, LINK_DIR_UP, &lp), 0);
	int rfd = support_veth_pair_receiver(&vp, PORT), sfd = support_veth_pair_sender(&vp, PORT);

	struct rx r = { .fd = rfd, .want = want, .delay_ns = (int64_t)delay_us * 1000,
			.err_ns = malloc((size_t)want * sizeof(int64_t)) };
	cr_assert_not_null(r.err_ns);
	for (int i = 0; i < want; i++)
		r.err_ns[i] = INT64_MIN;
	r.deadline_ns = clock_now_ns() + 10000000000LL;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, rx_main, &r), 0);

	struct wire w[BURST];
	struct iovec iov[BURST];
	struct mmsghdr m[BURST];
	memset(w, 0, sizeof w);
	int64_t start = clock_now_ns();
	for (int b = 0; b < bursts; b++) {
		int64_t at = start + (int64_t)b * gap_ns;
		struct timespec until = { (time_t)(at / 1000000000), (long)(at % 1000000000) };
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL);
		int64_t now = clock_now_ns();
		for (int k = 0; k < BURST; k++) {
			w[k].seq = (uint32_t)(b * BURST + k);
			w[k].tx_ns = now;
			iov[k] = (struct iovec){ &w[k], sizeof w[k] };
			m[k] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[k], .msg_iovlen = 1 } };
		}
		for (int done = 0; done < BURST;) {
			int n = sendmmsg(sfd, m + done, (unsigned)(BURST - done), 0);
			if (n <= 0)
				break;
			done += n;
			res.sent += n;
		}
	}
	pthread_join(t, NULL);
	linkd_defer_stats(ld.lkd, &res.ds);
	close(sfd);
	close(rfd);
	link_shaper_remove(shaper, &ep, LINK_DIR_UP);
	support_linkd_stop(&ld);

	int64_t *v = malloc((size_t)want * sizeof(int64_t));
	cr_assert_not_null(v);
	int n = 0;
	for (int i = 0; i < want; i++)
		if (r.err_ns[i] != INT64_MIN)
			v[n++] = r.err_ns[i];
	qsort(v, (size_t)n, sizeof *v, cmp_i64);
	res.got = n;
	if (n) {
		res.min_ms = v[0] / 1e6;
		res.p50_ms = v[n / 2] / 1e6;
		res.p99_ms = v[(int)((n - 1) * 0.99)] / 1e6;
		res.max_ms = v[n - 1] / 1e6;
	}
	free(v);
	free(r.err_ns);
	cr_log_info("window %.0f us, delay %u us: %d of %d packets; %" PRIu64 " reads, %" PRIu64
		    " verdict writes, %" PRIu64 " read-window pauses; error min %.3f p50 %.3f p99 %.3f max %.3f ms",
		    window_ns / 1e3, delay_us, n, res.sent, res.ds.reads, res.ds.writes, res.ds.coalesced,
		    res.min_ms, res.p50_ms, res.p99_ms, res.max_ms);
	return res;
}

TestSuite(linkd_window, .init = setup, .fini = teardown, .timeout = 120);

Test(linkd_window, release_window_gathers_verdicts_of_a_delayed_link)
{
	struct result off, on;

	/* Up to three attempts: a sender preempted inside its bursts spreads them out, and a
	 * window then gathers fewer packets. */
	for (int attempt = 1;; attempt++) {
		off = phase(0, 20000, 1000000, 1000000000);
		on = phase(40000, 20000, 1000000, 1000000000);
		if ((on.ds.writes * 4 <= (uint64_t)on.sent && on.ds.writes < off.ds.writes) || attempt == 3)
			break;
		cr_log_info("attempt %d: %" PRIu64 " writes with the window, %" PRIu64 " without", attempt,
			    on.ds.writes, off.ds.writes);
	}
	cr_assert_eq(off.got, off.sent);
	cr_assert_eq(on.got, on.sent);
	cr_assert_geq(off.min_ms, -0.5, "a packet %.3f ms early without the window", -off.min_ms);
	cr_assert_geq(on.min_ms, -0.5, "a packet %.3f ms early with the window", -on.min_ms);
	cr_assert_leq(on.ds.writes * 4, (uint64_t)on.sent, "%" PRIu64 " verdict writes for %d packets",
		      on.ds.writes, on.sent);
	cr_assert_lt(on.ds.writes, off.ds.writes);
}

Test(linkd_window, read_window_gathers_reads_of_a_busy_link_without_delay)
{
	struct result off, on;

	/* bursts of 32 every 250 us for 0.6 s: 128k packets/s */
	for (int attempt = 1;; attempt++) {
		off = phase(0, 0, 250000, 600000000);
		on = phase(40000, 0, 250000, 600000000);
		if ((on.ds.coalesced > 0 && on.ds.reads * 4 <= (uint64_t)on.sent) || attempt == 3)
			break;
		cr_log_info("attempt %d: %" PRIu64 " reads with the window, %" PRIu64 " pauses", attempt,
			    on.ds.reads, on.ds.coalesced);
	}
	cr_assert_eq(off.got, off.sent);
	cr_assert_eq(on.got, on.sent);
	cr_assert_eq(off.ds.coalesced, 0);
	cr_assert_gt(on.ds.coalesced, 0);
	cr_assert_leq(on.ds.reads * 4, (uint64_t)on.sent, "%" PRIu64 " reads for %d packets", on.ds.reads, on.sent);
}
