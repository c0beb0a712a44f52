/* netem/linkd: NFQUEUE link emulator engine (see the header for the design).
 *
 * Hot path per wake-up: recvmmsg up to RX_BATCH packet messages from a ready queue socket, decide
 * each (drop = NF_DROP verdict now; otherwise push onto the heap, or verdict now when its release
 * time has already passed), pop every due heap entry, and send each queue's accumulated verdicts
 * with one sendto. A queue whose packets are all held at least a bound leaves the epoll wait after
 * a read that empties it, until shortly before the earliest release of what it has not read
 * (defer_reads). VERDICT_BATCH accepts every queued id up to the given one: it is used only for
 * releases that are each the oldest id the queue holds (linkd_pkt_order), never past a held one.
 * NETLINK_NO_ENOBUFS keeps the socket usable when the kernel outruns us (the kernel then drops
 * at the queue, counted by it, not by us); the receive buffer is forced large and the queue's
 * maxlen raised to the kernel's cap. */
#include "netem/linkd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/latehist.h"
#include "lib/log.h"
#include "lib/netns.h"
#include "lib/safefile.h"
#include "netem/linkd_comp.h"
#include "netem/linkd_pkt.h"
#include "netem/netem_heap.h"
#include "netem/netem_model.h"

#define MAX_QUEUES 4096
#define RX_BATCH 64
#define RX_META_BUF 1024
#define RX_PKT_BUF (65536 + 1024)
#define TX_BUF (256 * 1024)
#define QUEUE_MAXLEN 65536
#define RCVBUF_BYTES (64 * 1024 * 1024)
#define DEFAULT_LIMIT 1000
#define LINKD_TICK_NS 500000         /* wake-up period while traffic flows (next_wake) */
#define LINKD_WARM_NS 10000000000LL  /* traffic "flows" this long after the latest packet */
#define LINKD_ARRIVAL_MAX_AGE_NS 1000000000LL /* an older receive stamp is not trusted (arrival_ns) */
/* Deferred reads (defer_reads): a queue whose every packet is delayed by at least its bound is not
 * read again until shortly before the earliest release of an arrival it has not read. */
#define LINKD_DEFER_SLACK_NS 500000LL    /* resume this much earlier still (stamp skew, the flush) */
#define LINKD_DEFER_MIN_NS 500000LL      /* a shorter pause is not worth the two epoll_ctl calls */
#define LINKD_DEFER_MAX_NS 50000000LL    /* never longer: the kernel queue must hold the backlog */
#define LINKD_DEFER_PPS 300000LL         /* the receive buffer holds a pause at least at this rate */
#define LINKD_DEFER_MIN_PPS 1000LL       /* a quieter link is bounded as if at this rate */
#define LINKD_DEFER_PKT_BYTES 2048LL     /* least receive-buffer charge of one queued packet message */
#define LINKD_DEFER_TAIL_INIT_NS 2000000LL /* wake-up lateness tail assumed before one is measured */
#define LINKD_DEFER_TAIL_CAP_NS 20000000LL /* a later wake-up counts as this (deferral is off then) */
#define LINKD_DEFER_TAIL_WINDOW 512      /* timer wake-ups per window of the tail (tail_track) */
#define LINKD_DEFER_TAIL_WINDOW_NS 500000000LL /* and at most this long a window */
#define LINKD_DEFER_BUSY_MAX 0.8         /* no deferral when reading takes this share of the time */
#define LINKD_DEFER_RATE_WINDOW_NS 5000000LL /* arrival rate measured over at least this (note_rate) */
#define LINKD_READ_COST_INIT_NS 2000LL   /* per-packet read cost assumed before one is measured */
#define LINKD_FLUSH_AFTER_NS 100000LL    /* a long read writes releases decided this long ago */
#define LINKD_RELEASE_WINDOW_NS 40000LL  /* timer mode: releases gathered per wake-up (release_due) */
#define LINKD_RELEASE_WINDOW_MAX_NS 1000000LL /* either window at most */
#define LINKD_COALESCE_NS 40000LL        /* a busy link's reads gathered this long (defer_reads) */
#define LINKD_COALESCE_PPS 100000LL      /* from this arrival rate on */

enum { EV_QUEUE = 1, EV_STOP, EV_LISTEN, EV_CONN, EV_SIGNAL, EV_COUNTERS };
enum { HF_PAYLOAD = 1, HF_INJECT = 2, HF_SPLIT = 4 };
#define SPLIT_MSS_GUESS 1448u        /* segment payload before a split has shown the real one */
#define SPLIT_STALE_NS 100000000LL   /* a split whose segments never came (the kernel could not queue them) */

/* An offloaded packet of a lossy link that loses some of its segments: sent on to the link's split
 * queue, where its segments arrive in order (the kernel segments it as it queues it there) and
 * each gets its own fate. Owned by the heap entry while held, then by the link's FIFO. */
struct split_rec {
	struct split_rec *next;
	int64_t t_ns;           /* when it was sent on */
	int64_t left;           /* transport payload bytes whose segments have not come yet */
	uint64_t lost;          /* bit i: segment i is lost */
	uint32_t seen;          /* segments come so far */
};

struct evtag {
	int kind;
	int fd;
	void *ptr;
};

/* A control connection. A reply larger than one message (stats of many links) is kept in out and
 * sent as the socket takes it (EPOLLOUT), whole lines per message; requests are not read meanwhile. */
struct conn {
	struct evtag tag;       /* first: the epoll tag points at the connection */
	char *out;
	size_t outlen, outoff;
};

struct lq {
	struct evtag tag;
	char name[96], netns[64], ifname[32];
	uint16_t qnum;
	uint16_t slot;          /* index in linkd.q */
	uint32_t gen;
	struct mnl_socket *nl;
	int fd;
	int rawfd;              /* raw IPv4 socket in the namespace, for duplicates; -1 until needed */
	bool copy_packet;
	bool segment;           /* wire-sized segments, not offloaded packets (linkd_pkt_cfg_flags) */
	bool split_ok;          /* the split queue (qnum | LINKD_PKT_SPLIT_BIT) is bound */
	bool split;             /* lossy: offloaded packets whole, split only when they lose segments */
	uint32_t mss;           /* segment payload bytes, learnt from the first segment of a split */
	struct split_rec *split_head, *split_tail; /* sent to the split queue, segments pending */
	struct link_params params;
	struct netem_model model;
	uint32_t limit;
	struct linkd_counters c;
	struct latehist late;   /* release lateness since the last stats reply covering the link */
	char *tx;               /* pending verdicts */
	size_t txlen;
	bool dirty;
	struct linkd_pkt_order order; /* held ids in arrival order (for batch verdicts) */
	bool order_ok;          /* order tracks every held id; false: every verdict on its own */
	uint32_t batch_id;      /* an open batch: accept every held id up to batch_id */
	uint32_t batch_n;       /* verdicts merged into it, 0 = none open */
	struct linkd_comp *comp; /* the emulator's release compensation, fed by flush */
	struct linkd_defer_stats *ds; /* the emulator's counters (verdict writes) */
	uint32_t rel_n;         /* held packets released into tx since the last flush */
	int64_t rel_decide_ns;  /* when the first of them was decided */
	int64_t min_delay_ns;   /* no packet of the link leaves sooner after its arrival (0: unknown) */
	int64_t rcvbuf_bytes;   /* the socket's receive buffer as the kernel reports it */
	uint32_t msg_bytes;     /* the largest packet message of the latest read */
	uint64_t rate_n;        /* packets read that arrived since rate_t0 (note_rate) */
	int64_t rate_t0;
	int64_t last_arrival_ns; /* the arrival (receive stamp) of the latest packet read */
	int64_t rate_pps;       /* arrival rate seen: rises at once, falls by a quarter a window */
	uint32_t next_id;       /* the packet id the kernel gives next, when id_known (kernel_drops) */
	bool id_known;
	bool kdrop_logged;
	bool deferred;          /* its reads wait until resume_ns (defer_reads) */
	bool disarmed;          /* its socket is out of the epoll wait (set_armed) */
	bool stamp_miss;        /* a packet of the current read had no usable receive stamp */
	int64_t resume_ns;
	bool mark;              /* config reload bookkeeping */
};

struct linkd {
	int epfd, stopfd, listenfd, sigfd, cntfd;
	int stampfd;            /* holds the kernel's receive timestamps on (SO_TIMESTAMPNS), never read */
	struct evtag stop_tag, listen_tag, sig_tag, cnt_tag;
	char ctl_path[108];
	char config_path[512];
	char counters_path[512];
	struct lq *q[MAX_QUEUES];
	size_t q_hi;            /* one past the highest slot in use: the hot path looks no further */
	uint32_t next_gen;
	struct netem_heap heap;
	uint64_t seq;
	bool no_pwait2;         /* the kernel lacks epoll_pwait2: millisecond timeouts (wait_events) */
	bool defer_off;         /* linkd_set_defer_reads(false): every queue is read as packets come */
	int64_t read_lead_ns;   /* release decisions lead the due time by this (serve_queue) */
	int64_t read_cost_ns;   /* reading and deciding one packet (EWMA of batches, serve_queue) */
	int64_t wake_tail_ns;   /* the latest timer wake-up of this window and the previous one */
	int64_t wake_win_max_ns; /* the latest of the current window (tail_track) */
	uint32_t wake_win_n;
	int64_t wake_win_t0;
	struct linkd_defer_stats dstats; /* linkd_defer_stats (each field written atomically) */
	size_t n_deferred;      /* queues whose reads are deferred (defer_reads) */
	int64_t defer_next;     /* the earliest of their resume times */
	int64_t early_ns;       /* timer wake-up lateness (EWMA): the timer is armed this early */
	int64_t window_ns;      /* release window (release_due; 0 = each release at its own time) */
	int64_t coalesce_ns;    /* read window of a busy link (defer_reads; 0 = off) */
	int64_t last_rel_ns;    /* the latest wake-up that released a held packet */
	struct linkd_comp comp; /* release to delivery (linkd_comp): held packets leave this early */
	int64_t last_pkt_ns;    /* the latest packet queued to us (keeps the timer ticking) */
	int rt_prio;            /* SCHED_FIFO priority of the serving thread, 0 = normal */
	enum linkd_precision precision;
	int64_t spin_floor_ns;  /* spin: the configured margin (the host's measured lateness) */
	int64_t spin_margin_ns; /* spin: the margin in use (>= floor, grown by wake_late's p99) */
	struct latehist wake_late; /* spin: lateness of the timer's recent wake-ups */
	struct mmsghdr rx_msgs[RX_BATCH];
	struct iovec rx_iov[RX_BATCH];
	char *rx_area;          /* RX_BATCH buffers of RX_PKT_BUF */
	size_t rx_bufsz;        /* the buffer size rx_msgs are set up for, 0 = not yet */
	uint64_t seed;
	uint64_t ctl_rejected;  /* control connections from another uid, closed */
	bool stop;
};

static int epoll_add(struct linkd *d, int fd, struct evtag *tag, int kind, void *ptr)
{
	tag->kind = kind;
	tag->fd = fd;
	tag->ptr = ptr;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		log_error("epoll_ctl add: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

struct linkd *linkd_new(const char *ctl_path)
{
	struct linkd *d = calloc(1, sizeof *d);
	if (!d)
		return NULL;
	d->epfd = d->stopfd = d->listenfd = d->sigfd = d->cntfd = d->stampfd = -1;
	d->rt_prio = 10;
	d->read_cost_ns = LINKD_READ_COST_INIT_NS;
	d->wake_tail_ns = LINKD_DEFER_TAIL_INIT_NS;
	d->window_ns = LINKD_RELEASE_WINDOW_NS;
	d->coalesce_ns = LINKD_COALESCE_NS;
	linkd_comp_init(&d->comp, LINKD_COMP_MAX_NS);
	d->seed = (uint64_t)clock_now_ns() ^ ((uint64_t)getpid() << 32);
	netem_heap_init(&d->heap);
	d->rx_area = malloc((size_t)RX_BATCH * RX_PKT_BUF);
	d->epfd = epoll_create1(EPOLL_CLOEXEC);
	d->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!d->rx_area || d->epfd < 0 || d->stopfd < 0) {
		log_error("linkd: setup: %s", strerror(errno));
		goto fail;
	}
	if (epoll_add(d, d->stopfd, &d->stop_tag, EV_STOP, NULL) < 0)
		goto fail;
	/* Packets carry a receive timestamp (NFQA_TIMESTAMP) only while some socket on the host asks
	 * for timestamps (the kernel's netstamp switch is global): this one does, for the emulator's
	 * lifetime. Without it (never expected) packets are scheduled from when they are read. */
	d->stampfd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (d->stampfd >= 0) {
		int one = 1;

		if (setsockopt(d->stampfd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) < 0)
			log_info("linkd: receive timestamps: %s", strerror(errno));
	}
	if (ctl_path) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		if (strlen(ctl_path) >= sizeof sa.sun_path) {
			log_error("linkd: control path too long: %s", ctl_path);
			goto fail;
		}
		snprintf(d->ctl_path, sizeof d->ctl_path, "%s", ctl_path);
		memcpy(sa.sun_path, ctl_path, strlen(ctl_path) + 1);
		d->listenfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		unlink(ctl_path);
		/* Born 0600: with a chmod after bind another user could connect in between.
		 * umask is per process; linkd_new runs before the emulator has other threads. */
		mode_t old_mask = umask(0177);
		int brc = d->listenfd < 0 ? -1 : bind(d->listenfd, (struct sockaddr *)&sa, sizeof sa);
		int berr = errno;
		umask(old_mask);
		errno = berr;
		if (brc < 0 || listen(d->listenfd, 16) < 0) {
			log_error("linkd: control socket %s: %s", ctl_path, strerror(errno));
			goto fail;
		}
		if (epoll_add(d, d->listenfd, &d->listen_tag, EV_LISTEN, NULL) < 0)
			goto fail;
	}
	return d;
fail:
	linkd_destroy(&d);
	return NULL;
}

static void lq_close(struct lq *q)
{
	if (q->nl)
		mnl_socket_close(q->nl);
	if (q->rawfd >= 0)
		close(q->rawfd);
	free(q->tx);
	linkd_pkt_order_free(&q->order);
	while (q->split_head) {
		struct split_rec *r = q->split_head;

		q->split_head = r->next;
		free(r);
	}
	free(q);
}

void linkd_destroy(struct linkd **self)
{
	struct linkd *d = self ? *self : NULL;
	if (!d)
		return;
	for (size_t i = 0; i < MAX_QUEUES; i++)
		if (d->q[i])
			lq_close(d->q[i]);
	struct netem_heap_entry e;
	while (netem_heap_pop(&d->heap, &e) == 0)
		free(e.data);
	netem_heap_free(&d->heap);
	int fds[] = { d->epfd, d->stopfd, d->listenfd, d->sigfd, d->cntfd, d->stampfd };
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (d->listenfd >= 0 && d->ctl_path[0])
		unlink(d->ctl_path);
	free(d->rx_area);
	free(d);
	*self = NULL;
}

/* --- netlink queue setup ------------------------------------------------------------------ */

/* The queue's copy mode and flags are linkd_pkt's choice: whole, segmented packets when
 * duplicating or corrupting, else the headers of packets taken whole even when segmentation-
 * offloaded (the real length comes with each); segmented headers on the split queue. */
static int nfq_config(struct lq *q, uint16_t qnum, uint8_t cmd, bool with_params, bool segment)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = (struct nlmsghdr *)buf;
	if (with_params) {
		if (!linkd_pkt_config_put(buf, sizeof buf, qnum, q->copy_packet && qnum == q->qnum, segment,
					  QUEUE_MAXLEN))
			return -EMSGSIZE;
	} else {
		nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, qnum);
		nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, cmd);
	}
	nlh->nlmsg_flags |= NLM_F_ACK;
	if (mnl_socket_sendto(q->nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	/* Read the ack (the socket is non-blocking: wait for it). */
	struct pollfd pfd = { .fd = q->fd, .events = POLLIN };
	for (int tries = 0; tries < 100; tries++) {
		if (poll(&pfd, 1, 1000) <= 0)
			return -ETIMEDOUT;
		ssize_t n = mnl_socket_recvfrom(q->nl, buf, sizeof buf);
		if (n < 0)
			return -errno;
		struct nlmsghdr *h = (struct nlmsghdr *)buf;
		for (; mnl_nlmsg_ok(h, (int)n); h = mnl_nlmsg_next(h, (int *)&n)) {
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *err = mnl_nlmsg_get_payload(h);
				return err->error;
			}
		}
	}
	return -ETIMEDOUT;
}

static int set_copy_mode(struct lq *q)
{
	char buf[256];
	size_t n = linkd_pkt_config_put(buf, sizeof buf, q->qnum, q->copy_packet, q->segment, 0);
	if (mnl_socket_sendto(q->nl, buf, n) < 0)
		return -errno;
	return 0;
}

/* Runs inside the receiving namespace. */
static int open_queue_in_ns(void *arg)
{
	struct lq *q = arg;
	int rc, one = 1, rcvbuf = RCVBUF_BYTES;
	q->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (!q->nl) {
		rc = -errno;
		log_error("linkd: netlink socket in %s: %s", q->netns, strerror(errno));
		return rc;
	}
	if (mnl_socket_bind(q->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		rc = -errno;
		log_error("linkd: bind netlink in %s: %s", q->netns, strerror(errno));
		return rc;
	}
	q->fd = mnl_socket_get_fd(q->nl);
	mnl_socket_setsockopt(q->nl, NETLINK_NO_ENOBUFS, &one, sizeof one);
	if (setsockopt(q->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0)
		setsockopt(q->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
	/* what the buffer really holds: how long reads may be deferred (defer_reads) */
	socklen_t optlen = sizeof rcvbuf;
	if (getsockopt(q->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &optlen) < 0)
		rcvbuf = 0;
	q->rcvbuf_bytes = rcvbuf;
	int sndbuf = 2 * TX_BUF; /* one batch of verdicts is one datagram: it must fit */
	if (setsockopt(q->fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf) < 0)
		setsockopt(q->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
	rc = nfq_config(q, q->qnum, NFQNL_CFG_CMD_BIND, false, false);
	if (rc == 0)
		rc = nfq_config(q, q->qnum, NFQNL_CFG_CMD_NONE, true, q->segment);
	if (rc < 0) {
		log_error("linkd: bind queue %u in %s: %s", q->qnum, q->netns, strerror(-rc));
		return rc;
	}
	/* The split queue on the same socket: headers only, offloaded packets segmented. Without it
	 * (a queue number too high, a kernel refusing) a lossy link takes every packet segmented. */
	if (q->qnum < LINKD_PKT_SPLIT_BIT) {
		uint16_t sq = (uint16_t)(q->qnum | LINKD_PKT_SPLIT_BIT);
		int src = nfq_config(q, sq, NFQNL_CFG_CMD_BIND, false, true);

		if (src == 0)
			src = nfq_config(q, sq, NFQNL_CFG_CMD_NONE, true, true);
		if (src < 0)
			log_info("linkd: split queue %u in %s: %s (lossy links take segments)", sq, q->netns,
				 strerror(-src));
		q->split_ok = src == 0;
	}
	return 0;
}

static int open_raw_in_ns(void *arg)
{
	struct lq *q = arg;
	q->rawfd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_RAW);
	if (q->rawfd < 0) {
		log_error("linkd: raw socket in %s: %s", q->netns, strerror(errno));
		return -errno;
	}
	return 0;
}

static struct lq *find(const struct linkd *d, const char *name, size_t *slot)
{
	for (size_t i = 0; i < MAX_QUEUES; i++)
		if (d->q[i] && strcmp(d->q[i]->name, name) == 0) {
			if (slot)
				*slot = i;
			return d->q[i];
		}
	return NULL;
}

static void resume_reads(struct linkd *d, struct lq *q);

static int apply_params(struct linkd *d, struct lq *q, const struct link_params *p, bool fresh)
{
	int rc = netem_model_configure(&q->model, p, d->seed + q->qnum * 7919u + q->gen, fresh);
	if (rc < 0)
		return rc;
	resume_reads(d, q); /* the pause was computed from the old parameters */
	q->params = *p;
	q->limit = p->limit_pkts ? p->limit_pkts : DEFAULT_LIMIT;
	bool want_packet = p->corrupt_ppm || p->dup_ppm;
	bool lossy = p->loss_ppm || p->loss_model == LINK_LOSS_GEMODEL;
	/* A loss, like a duplicate or a corruption, happens to a wire-sized packet: a 64 KB
	 * offloaded send lost whole would be a burst of about 45 segments at once. With a split
	 * queue a lossy link still takes offloaded packets whole and decides each of their segments'
	 * loss up front; only a packet that loses some goes through the split queue as segments. */
	bool want_segment = want_packet || (lossy && !q->split_ok);
	q->split = lossy && !want_packet && q->split_ok;
	if (want_packet && q->rawfd < 0 && p->dup_ppm) {
		rc = netns_call(q->netns, open_raw_in_ns, q);
		if (rc < 0)
			return rc;
	}
	/* segments from the split queue are due at once: such a link is read as packets come */
	q->min_delay_ns = q->split ? 0 : netem_model_min_delay_ns(&q->model);
	if (want_packet != q->copy_packet || want_segment != q->segment) {
		q->copy_packet = want_packet;
		q->segment = want_segment;
		rc = set_copy_mode(q);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int linkd_set(struct linkd *d, const char *name, const char *netns, const char *ifname,
	      uint16_t queue, const struct link_params *p)
{
	const char *why = link_params_validate(p);
	if (why) {
		log_error("linkd: %s: %s", name, why);
		return -EINVAL;
	}
	struct lq *q = find(d, name, NULL);
	if (q) {
		if (q->qnum != queue || strcmp(q->netns, netns ? netns : "") != 0) {
			log_error("linkd: %s: queue or namespace differs from the running link", name);
			return -EINVAL;
		}
		return apply_params(d, q, p, false);
	}
	size_t slot = MAX_QUEUES;
	for (size_t i = 0; i < MAX_QUEUES; i++)
		if (!d->q[i]) {
			slot = i;
			break;
		}
	if (slot == MAX_QUEUES)
		return -ENOSPC;
	int rc;
	q = calloc(1, sizeof *q);
	if (!q)
		return -ENOMEM;
	q->fd = q->rawfd = -1;
	q->tx = malloc(TX_BUF);
	q->comp = &d->comp;
	q->ds = &d->dstats;
	q->order_ok = linkd_pkt_order_init(&q->order, 4096) == 0;
	snprintf(q->name, sizeof q->name, "%s", name);
	snprintf(q->netns, sizeof q->netns, "%s", netns ? netns : "");
	snprintf(q->ifname, sizeof q->ifname, "%s", ifname ? ifname : "");
	q->qnum = queue;
	q->gen = ++d->next_gen;
	if (!q->tx) {
		rc = -ENOMEM;
		goto fail;
	}
	q->copy_packet = p->corrupt_ppm || p->dup_ppm;
	q->segment = q->copy_packet;
	rc = netns_call(q->netns, open_queue_in_ns, q);
	if (rc < 0)
		goto fail;
	q->copy_packet = !q->copy_packet; /* force apply_params to (re)send the mode */
	rc = apply_params(d, q, p, true);
	if (rc < 0)
		goto fail;
	rc = epoll_add(d, q->fd, &q->tag, EV_QUEUE, q);
	if (rc < 0)
		goto fail;
	q->slot = (uint16_t)slot;
	d->q[slot] = q;
	if (slot + 1 > d->q_hi)
		d->q_hi = slot + 1;
	log_info("linkd: %s: queue %u in %s (%s)", name, queue, q->netns[0] ? q->netns : "-", q->ifname);
	return 0;
fail:
	lq_close(q);
	return rc;
}

int linkd_del(struct linkd *d, const char *name)
{
	size_t slot;
	struct lq *q = find(d, name, &slot);
	if (!q)
		return -ENOENT;
	/* Unbinding makes the kernel drop what the queue still holds; heap entries of this
	 * generation are skipped when they come due. */
	nfq_config(q, q->qnum, NFQNL_CFG_CMD_UNBIND, false, false);
	if (q->deferred)
		d->n_deferred--;
	if (q->split_ok)
		nfq_config(q, (uint16_t)(q->qnum | LINKD_PKT_SPLIT_BIT), NFQNL_CFG_CMD_UNBIND, false, false);
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, q->fd, NULL);
	d->q[slot] = NULL;
	while (d->q_hi && !d->q[d->q_hi - 1])
		d->q_hi--;
	lq_close(q);
	return 0;
}

int linkd_counters(const struct linkd *d, const char *name, struct linkd_counters *out)
{
	const struct lq *q = find(d, name, NULL);
	if (!q)
		return -ENOENT;
	*out = q->c;
	return 0;
}

/* --- hot path ------------------------------------------------------------------------------ */

static void close_batch(struct lq *q);

static int flush(struct lq *q)
{
	close_batch(q);
	if (!q->txlen)
		return 0;
	int64_t t0 = q->rel_n ? clock_now_ns() : 0;
	ssize_t n = sendto(q->fd, q->tx, q->txlen, 0, NULL, 0);
	__atomic_store_n(&q->ds->writes, q->ds->writes + 1, __ATOMIC_RELAXED);
	if (q->rel_n) {
		/* the kernel delivered the released packets inside this write: how long after their
		 * release decision, on average over the batch (linkd_comp) */
		if (n >= 0)
			linkd_comp_add(q->comp, linkd_comp_sample_ns(q->rel_decide_ns, t0, clock_now_ns(), q->rel_n));
		q->rel_n = 0;
	}
	int rc = 0;
	if (n < 0 && errno == EMSGSIZE) {
		/* the socket would not take the batch whole: one verdict at a time (a lost verdict
		 * would hold its packet in the kernel for good) */
		int left = (int)q->txlen;
		n = 0;
		for (struct nlmsghdr *h = (struct nlmsghdr *)q->tx; mnl_nlmsg_ok(h, left);
		     h = mnl_nlmsg_next(h, &left))
			if (sendto(q->fd, h, h->nlmsg_len, 0, NULL, 0) < 0)
				n = -1;
	}
	if (n < 0) {
		rc = -errno;
		log_warn("linkd: %s: verdicts: %s", q->name, strerror(errno));
	}
	q->txlen = 0;
	q->dirty = false;
	return rc;
}

/* Append one message to q's pending verdicts (sending them first when it would not fit). */
static void put_verdict(struct lq *q, uint16_t qnum, bool batch, uint32_t id, uint32_t verdict,
			const void *pkt, uint32_t len)
{
	size_t need = linkd_pkt_verdict_size(pkt ? len : 0);
	if (q->txlen + need > TX_BUF)
		flush(q); /* no batch is open here: callers close it first */
	char *at = q->tx + q->txlen;
	size_t room = TX_BUF - q->txlen;
	size_t n = batch ? linkd_pkt_batch_put(at, room, qnum, id, verdict)
			 : linkd_pkt_verdict_put(at, room, qnum, id, verdict, pkt, len);
	q->txlen += n;
	q->dirty = q->dirty || n > 0;
}

/* Write the open batch: one verdict, or one batch verdict for all its ids. */
static void close_batch(struct lq *q)
{
	uint32_t n = q->batch_n;
	if (!n)
		return;
	q->batch_n = 0;
	put_verdict(q, q->qnum, n > 1, q->batch_id, NF_ACCEPT, NULL, 0);
}

/* A verdict of its own, after the open batch (the kernel sees them in the order decided). */
static void add_verdict(struct lq *q, uint32_t id, int verdict, const void *pkt, uint32_t len)
{
	close_batch(q);
	put_verdict(q, q->qnum, false, id, (uint32_t)verdict, pkt, len);
}

/* Release a held offloaded packet that loses some segments: on to the split queue (it leaves the
 * queue's order like any release, never inside a batch); its record waits for the segments. */
static void release_split(struct lq *q, uint32_t id, struct split_rec *r, int64_t now)
{
	if (q->order_ok)
		linkd_pkt_order_done(&q->order, id);
	close_batch(q);
	put_verdict(q, q->qnum, false, id, linkd_pkt_queue_verdict((uint16_t)(q->qnum | LINKD_PKT_SPLIT_BIT)),
		    NULL, 0);
	r->t_ns = now;
	r->next = NULL;
	if (q->split_tail)
		q->split_tail->next = r;
	else
		q->split_head = r;
	q->split_tail = r; /* ownership: the link's FIFO */
}

/* One segment from the split queue: the fate drawn for it when its packet came. */
static void handle_segment(struct lq *q, const struct linkd_pkt *pk, int64_t now)
{
	struct split_rec *r;
	int32_t pay = linkd_pkt_l4_payload(pk);
	bool lost = false;

	/* a split the kernel could not queue to us never sends its segments */
	while ((r = q->split_head) && now - r->t_ns > SPLIT_STALE_NS) {
		q->split_head = r->next;
		free(r);
	}
	if (!q->split_head)
		q->split_tail = NULL;
	if (r) {
		if (r->seen == 0 && pay > 0)
			q->mss = (uint32_t)pay; /* the first segment is full: the sender's segment size */
		else
			q->c.packets++; /* the packet itself was counted once when it came */
		lost = r->seen < 64 && ((r->lost >> r->seen) & 1u);
		r->seen++;
		r->left -= pay > 0 ? pay : r->left;
		if (r->left <= 0) {
			q->split_head = r->next;
			if (!q->split_head)
				q->split_tail = NULL;
			free(r);
		}
	} else {
		q->c.packets++;
	}
	if (lost)
		q->c.dropped++;
	close_batch(q);
	put_verdict(q, pk->qnum, false, pk->id, lost ? NF_DROP : NF_ACCEPT, NULL, 0);
}

/* The verdict of a held packet. When it is the oldest held id of its queue and accepted as it
 * came, it joins the open batch: a run of such releases costs the kernel one message. */
static void release_verdict(struct lq *q, uint32_t id, const void *pkt, uint32_t len)
{
	bool oldest = q->order_ok && linkd_pkt_order_done(&q->order, id);
	if (oldest && !pkt) {
		q->batch_id = id;
		q->batch_n++;
		q->dirty = true;
		return;
	}
	add_verdict(q, id, NF_ACCEPT, pkt, len);
}

/* The verdict of a packet accepted as it comes (no delay). With nothing of its queue held it is
 * the oldest packet the kernel holds for us (every older one has its verdict written before it),
 * so unchanged it joins the open batch: a link without delay costs the kernel one verdict message
 * per write instead of one per packet. */
static void pass_now(struct lq *q, uint32_t id, const void *pkt, uint32_t len)
{
	if (!pkt && q->order_ok && q->order.n == 0) {
		q->batch_id = id;
		q->batch_n++;
		q->dirty = true;
		return;
	}
	add_verdict(q, id, NF_ACCEPT, pkt, len);
}

static struct lq *queue_by_index(struct linkd *d, uint16_t idx, uint32_t gen)
{
	struct lq *q = idx < MAX_QUEUES ? d->q[idx] : NULL;
	return q && q->gen == gen ? q : NULL;
}

static void inject(struct lq *q, const void *pkt, uint32_t len)
{
	if (q->rawfd < 0 || len < sizeof(struct iphdr))
		return;
	const struct iphdr *ip = pkt;
	if (ip->version != 4)
		return;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr.s_addr = ip->daddr };
	if (sendto(q->rawfd, pkt, len, 0, (struct sockaddr *)&to, sizeof to) < 0)
		log_debug("linkd: %s: duplicate: %s", q->name, strerror(errno));
}

/* A held packet's verdict goes out with q's next write: the write's duration is measured from
 * the first such decision (flush, linkd_comp). */
static void note_release(struct lq *q, int64_t now)
{
	if (q->rel_n++ == 0)
		q->rel_decide_ns = now;
}

/* Timer mode gathers the releases of a busy link (d->window_ns): a wake-up releases what is due
 * within half a window after it, and the next wake-up comes a window after the last one that
 * released at the earliest (next_wake), so every packet leaves within half a window of its time,
 * early or late, and a link at 240k packets/s is served by one wake-up and one verdict write per
 * ten packets instead of per two (docs/precision.md). Spin mode releases each at its time. */
static int64_t release_half(const struct linkd *d)
{
	return d->precision == LINKD_PRECISION_SPIN ? 0 : d->window_ns / 2;
}

/* How far ahead of now a release decision reaches: the timer's early wake-up and half a release
 * window in timer mode, nothing in spin mode (never early). */
static int64_t release_lead(const struct linkd *d)
{
	return d->precision == LINKD_PRECISION_SPIN ? 0 : d->early_ns + release_half(d);
}

/* Release every held packet due by now, less the measured time from a release to the packet's
 * delivery (linkd_comp: the verdict write and the kernel's re-injection), plus the timer's
 * measured lateness, which next_wake anticipates (without it each delayed packet would leave one
 * wake-up latency late). A release's lateness counts from its time less the compensation: the
 * packet's estimated delivery against its due time. */
static int release_due(struct linkd *d, int64_t now)
{
	const struct netem_heap_entry *top;
	int released = 0;
	int64_t early = release_lead(d);
	int64_t comp = linkd_comp_ns(&d->comp);

	while ((top = netem_heap_top(&d->heap)) && top->t_ns - comp <= now + early) {
		struct netem_heap_entry e;
		netem_heap_pop(&d->heap, &e);
		struct lq *q = queue_by_index(d, e.q, e.gen);
		if (q) {
			if (e.flags & HF_INJECT) {
				inject(q, e.data, e.len);
			} else if (e.flags & HF_SPLIT) {
				release_split(q, e.id, e.data, now);
				e.data = NULL; /* the FIFO owns the record now */
				q->c.held--;
				/* not measured: the kernel queues it again, delivering nothing in the write */
				latehist_add(&q->late, now - (e.t_ns - comp));
			} else {
				release_verdict(q, e.id, (e.flags & HF_PAYLOAD) ? e.data : NULL, e.len);
				released++;
				q->c.held--;
				note_release(q, now);
				latehist_add(&q->late, now - (e.t_ns - comp));
			}
		}
		free(e.data);
	}
	if (released)
		d->last_rel_ns = now;
	return released;
}

/* When the serving thread must wake next (lib/clock ns), or -1 to block until an event: the next
 * release (less the timer's measured lateness, or the spin margin), and every LINKD_TICK_NS as
 * well while traffic flows (packets held, or one seen in the last LINKD_WARM_NS). A CPU left idle
 * for a while (above all a virtual machine's vCPU, which the hypervisor parks) delivers its timers
 * late by several milliseconds, and stays in that state while the link is merely quiet: measured
 * on the development VM, 5 ms links after a 1 s pause gave RTTs of 16-24 ms instead of 10.4 until
 * the probing stopped. The ticks keep the wake-ups exact for a few thousand cheap wake-ups a
 * second while a run has traffic; after LINKD_WARM_NS of silence the first packets may be late
 * again. The deadline is the wait's own timeout (epoll_pwait2), not a timerfd: re-arming a timerfd
 * for every release was a quarter of the emulator's CPU while training (docs/precision.md). */
static int64_t next_wake(const struct linkd *d, int64_t now)
{
	const struct netem_heap_entry *top = netem_heap_top(&d->heap);
	int64_t t, tick = now + LINKD_TICK_NS;

	if (!top && now - d->last_pkt_ns > LINKD_WARM_NS)
		return -1;
	int64_t lead = d->precision == LINKD_PRECISION_SPIN ? d->spin_margin_ns : d->early_ns;
	t = top ? top->t_ns - linkd_comp_ns(&d->comp) - lead : tick;
	if (top && release_half(d) && t < d->last_rel_ns + d->window_ns - lead)
		t = d->last_rel_ns + d->window_ns - lead; /* release_due: at most half a window late */
	return t > tick ? tick : t < now ? now : t;
}

/* epoll_pwait2 until deadline_ns (-1: no deadline). A kernel without it (before 5.11) gets
 * epoll_wait with the timeout rounded down to whole milliseconds: early, never late; the loop
 * then waits again, polling through the last millisecond. */
static int wait_events(struct linkd *d, struct epoll_event *evs, int max, int64_t deadline_ns, int64_t now)
{
	int64_t rel = deadline_ns < 0 ? -1 : deadline_ns > now ? deadline_ns - now : 0;

	if (!d->no_pwait2) {
		struct timespec ts = { (time_t)(rel / 1000000000), (long)(rel % 1000000000) };
		int n = epoll_pwait2(d->epfd, evs, max, rel < 0 ? NULL : &ts, NULL);

		if (n >= 0 || errno != ENOSYS)
			return n;
		log_info("linkd: no epoll_pwait2: release times rounded to polling within a millisecond");
		d->no_pwait2 = true;
	}
	return epoll_wait(d->epfd, evs, max, rel < 0 ? -1 : rel / 1000000 > INT32_MAX ? INT32_MAX : (int)(rel / 1000000));
}

static void flush_all(struct linkd *d)
{
	for (size_t i = 0; i < d->q_hi; i++)
		if (d->q[i] && d->q[i]->dirty)
			flush(d->q[i]);
}

static void push(struct linkd *d, struct lq *q, uint16_t idx, int64_t t, uint32_t id, uint16_t flags,
		 void *data, uint32_t len)
{
	struct netem_heap_entry e = { .t_ns = t, .seq = d->seq++, .id = id, .q = idx, .flags = flags,
				      .data = data, .len = len, .gen = q->gen };
	if (netem_heap_push(&d->heap, &e) < 0) {
		free(data);
		if (!(flags & HF_INJECT)) {
			add_verdict(q, id, NF_ACCEPT, NULL, 0); /* out of memory: let it pass */
			q->c.held--;
		}
		return;
	}
	if (!(flags & HF_INJECT) && q->order_ok && linkd_pkt_order_hold(&q->order, id) < 0) {
		/* not trackable (out of memory): no batch may cover ids from now on */
		log_warn("linkd: %s: batch verdicts off", q->name);
		q->order_ok = false;
	}
}

/* split_decide's answer for an offloaded packet that loses none of its segments. */
static struct split_rec split_none_rec;
#define SPLIT_NONE (&split_none_rec)

/* The loss of each wire segment of offloaded packet pk on a lossy link (dec: the decision
 * netem_model_decide made for the first). Returns SPLIT_NONE when none is lost (pass it whole;
 * also when its segments cannot be counted), NULL with dec->drop set when every one is lost (its
 * verdict written and the segments counted), else a new record of the lost ones with dec's delay
 * for the rest (NULL without dec->drop when out of memory: passed whole). */
static struct split_rec *split_decide(struct lq *q, const struct linkd_pkt *pk, struct netem_decision *dec)
{
	int32_t pay = linkd_pkt_l4_payload(pk);
	uint32_t mss = q->mss ? q->mss : SPLIT_MSS_GUESS, k;
	uint64_t lost, all;

	if (pay <= 0)
		return SPLIT_NONE;
	k = ((uint32_t)pay + mss - 1) / mss;
	if (k > 64)
		k = 64; /* 64 KB at a 1 KB segment size; later segments pass */
	all = k == 64 ? UINT64_MAX : ((uint64_t)1 << k) - 1;
	lost = dec->drop ? 1u : 0u;
	for (uint32_t i = 1; i < k; i++)
		if (netem_model_lose(&q->model))
			lost |= (uint64_t)1 << i;
	if (!lost)
		return SPLIT_NONE;
	if (lost == all) {
		q->c.packets += k - 1;
		q->c.dropped += k;
		add_verdict(q, pk->id, NF_DROP, NULL, 0);
		dec->drop = true;
		return NULL;
	}
	if (dec->drop) {
		/* the first segment lost, the rest not: they need the delay decide did not draw */
		dec->drop = false;
		dec->delay_ns = netem_model_delay_ns(&q->model);
	}
	struct split_rec *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->left = pay;
	r->lost = lost;
	return r;
}

/* Packets the kernel dropped before we could read them: it numbers a queue's packets in order and
 * a packet that does not fit the socket's receive buffer takes its number and is dropped (the
 * queue's maxlen refuses packets before numbering them, but that bound counts held packets as much
 * as unread ones, so reading later does not bring it nearer). A gap in the ids read is counted as
 * packets dropped, where the link's drop counters show it. */
static void kernel_drops(struct lq *q, uint32_t id)
{
	uint32_t gap = id - q->next_id;

	if (q->id_known && gap && gap < (1u << 20)) {
		q->c.packets += gap;
		q->c.dropped += gap;
		if (!q->kdrop_logged) {
			q->kdrop_logged = true;
			log_warn("linkd: %s: the kernel dropped %" PRIu32 " packets: the receive buffer was full "
				 "(counted as dropped)", q->name, gap);
		}
	}
	q->next_id = id + 1;
	q->id_known = true;
}

/* When the packet reached the queue, on the monotonic clock: the kernel's receive stamp (realtime,
 * wall_off = realtime - monotonic now) when it sent one that is plausible, else now, the time we
 * read it. Scheduling from the stamp takes the time between the queue and our read (the serving
 * thread's wake-up, a busy batch) out of the emulated delay: measured at 0.05-0.1 ms a packet. */
static int64_t arrival_ns(const struct linkd_pkt *pk, int64_t now, int64_t wall_off)
{
	int64_t a = pk->rx_real_ns - wall_off;

	return pk->rx_real_ns && a <= now && now - a < LINKD_ARRIVAL_MAX_AGE_NS ? a : now;
}

static void handle_packet(struct linkd *d, struct lq *q, uint16_t idx, const struct nlmsghdr *nlh,
			  int64_t read_ns, int64_t wall_off)
{
	struct linkd_pkt pk;
	if (linkd_pkt_parse(nlh, nlh->nlmsg_len, &pk) != 1)
		return;
	if (pk.qnum != q->qnum) {
		handle_segment(q, &pk, read_ns);
		return;
	}
	kernel_drops(q, pk.id);
	int64_t now = arrival_ns(&pk, read_ns, wall_off);
	q->last_arrival_ns = now;
	if (now == read_ns)
		q->stamp_miss = true; /* scheduled from the read: its reads must not be deferred */
	uint32_t id = pk.id, len = pk.len;
	/* only a whole copy is duplicated or mangled (not a header-only one while the mode changes) */
	const uint8_t *payload = pk.whole ? pk.data : NULL;
	uint32_t plen = pk.whole ? pk.data_len : 0;
	q->c.packets++;
	q->c.bytes += len;
	struct netem_decision dec;
	struct split_rec *split = NULL;
	netem_model_decide(&q->model, &dec);
	if (q->split && pk.gso && q->c.held < q->limit && (split = split_decide(q, &pk, &dec)) == NULL &&
	    dec.drop) {
		return; /* every segment lost: dropped whole, counted there */
	}
	if (dec.drop || q->c.held >= q->limit) {
		if (split != SPLIT_NONE)
			free(split);
		q->c.dropped++;
		add_verdict(q, id, NF_DROP, NULL, 0);
		return;
	}
	void *data = NULL;
	uint16_t flags = 0;
	if (split && split != SPLIT_NONE) {
		/* held as one packet; at its release it goes on to the split queue */
		q->c.held++;
		push(d, q, idx, now + dec.delay_ns, id, HF_SPLIT, split, 0);
		return;
	}
	if (dec.corrupt && payload && plen > sizeof(struct iphdr)) {
		/* Flip one bit past the IP header and fix nothing: the transport checksum must catch
		 * it, as with netem (the kernel marks a mangled packet CHECKSUM_NONE). */
		data = malloc(plen);
		if (data) {
			memcpy(data, payload, plen);
			uint32_t ihl = (uint32_t)(((const struct iphdr *)payload)->ihl) * 4u;
			if (ihl < sizeof(struct iphdr) || ihl >= plen)
				ihl = sizeof(struct iphdr);
			uint32_t r = netem_model_rng_u32(&q->model.rng);
			uint32_t off = ihl + r % (plen - ihl);
			((uint8_t *)data)[off] ^= (uint8_t)(1u << ((r >> 24) & 7));
			flags = HF_PAYLOAD;
			q->c.corrupt++;
		}
	}
	if (dec.dup && payload && plen) {
		void *copy = malloc(plen);
		if (copy) {
			memcpy(copy, payload, plen);
			push(d, q, idx, now + dec.dup_delay_ns, 0, HF_INJECT, copy, plen);
			q->c.dup++;
		}
	}
	if (dec.reordered)
		q->c.reordered++;
	q->c.held++;
	if (dec.delay_ns <= 0) {
		pass_now(q, id, flags ? data : NULL, flags ? plen : 0);
		free(data);
		q->c.held--;
		return;
	}
	if (now + dec.delay_ns - d->read_lead_ns < read_ns)
		__atomic_store_n(&d->dstats.late_reads, d->dstats.late_reads + 1, __ATOMIC_RELAXED);
	push(d, q, idx, now + dec.delay_ns, id, flags, data, flags ? plen : 0);
}

/* Put q's socket into the epoll wait or take it out, when it is not already so. */
static int set_armed(struct linkd *d, struct lq *q, bool on)
{
	struct epoll_event ev = { .events = on ? EPOLLIN : 0, .data.ptr = &q->tag };

	if (q->disarmed != on)
		return 0;
	if (epoll_ctl(d->epfd, EPOLL_CTL_MOD, q->fd, &ev) < 0) {
		log_warn("linkd: %s: %s reads: %s", q->name, on ? "resume" : "defer", strerror(errno));
		return -1;
	}
	q->disarmed = !on;
	return 0;
}

/* End q's pause: its socket back in the epoll wait. */
static void resume_reads(struct linkd *d, struct lq *q)
{
	if (!q->deferred)
		return;
	q->deferred = false;
	d->n_deferred--;
	set_armed(d, q, true);
}

static void serve_queue(struct linkd *d, struct lq *q);

/* Serve every queue whose pause has ended by now: it is read at once, and its socket goes back
 * into the epoll wait only when that read does not pause it again (a busy link's next pause
 * costs no epoll_ctl). d->defer_next becomes the earliest pause left. Returns whether any queue
 * was read (its verdicts are pending). */
static bool resume_due(struct linkd *d, int64_t now)
{
	int64_t next = INT64_MAX;
	bool served = false;

	for (size_t i = 0; i < d->q_hi && d->n_deferred; i++) {
		struct lq *q = d->q[i];

		if (!q || !q->deferred)
			continue;
		if (q->resume_ns <= now) {
			q->deferred = false;
			d->n_deferred--;
			serve_queue(d, q);
			served = true;
			if (!q->deferred) {
				set_armed(d, q, true);
				continue;
			}
			/* paused again: counted again in n_deferred */
		}
		if (q->resume_ns < next)
			next = q->resume_ns;
	}
	d->defer_next = next;
	return served;
}

/* The arrival rate of q: packets read over windows of at least LINKD_DEFER_RATE_WINDOW_NS of their
 * arrival times (now: the latest packet's), not of the reads, which deferral makes bursty; a
 * higher rate is taken at once, a lower one a quarter of the way a window. */
static void note_rate(struct lq *q, int n, int64_t now)
{
	if (!q->rate_t0)
		q->rate_t0 = now;
	q->rate_n += (uint64_t)n;
	if (now - q->rate_t0 < LINKD_DEFER_RATE_WINDOW_NS)
		return;
	int64_t inst = (int64_t)(q->rate_n * 1000000000ull / (uint64_t)(now - q->rate_t0));
	q->rate_pps = inst >= q->rate_pps ? inst : q->rate_pps - (q->rate_pps - inst) / 4;
	q->rate_n = 0;
	q->rate_t0 = now;
}

/* After q's socket was read empty by a read that started at t_read: every packet not read yet
 * reached the queue after about t_read (its receive stamp, from which it is scheduled, is no
 * earlier than that less the stamp's skew) and is held at least q->min_delay_ns, so none of them
 * can be due before t_read + min_delay_ns. The socket leaves the epoll wait until that time less
 * what can make the resumed read late: the latest recent timer wake-up (wake_tail_ns: a resume is
 * a timer wake-up and can be as late), the release compensation and the timer's early wake-up
 * (which move releases earlier), reading the first batch, and LINKD_DEFER_SLACK_NS. Reading the
 * backlog takes its size times the measured cost of a packet (read_cost_ns), and the backlog grows
 * with the pause at the arrival rate seen: the pause is shortened so that this reading fits too.
 * What came meanwhile is then read in batches (releases written after at most
 * LINKD_FLUSH_AFTER_NS and a batch) and scheduled from its stamps as if read at once. The loop
 * then wakes for releases and ticks only, not for every arrival. The pause is bounded so that the receive buffer
 * holds, and the link's limit is not reached by, what arrives at twice the rate seen; not deferred:
 * a read that had a packet without a usable stamp (it would be scheduled from the read), a link
 * whose reading takes LINKD_DEFER_BUSY_MAX of the time or more, and a pause too short to pay.
 *
 * A link that cannot pause so (no delay, or too little) but carries LINKD_COALESCE_PPS or more
 * pauses for the read window instead (d->coalesce_ns, linkd_set_read_window), as a network card
 * moderates its interrupts: at 250k packets/s a read otherwise finds one or two packets, and
 * each costs a wake-up, a read and a verdict write. Its packets wait in the socket up to the
 * window (plus the timer's lateness); one scheduled from its stamp with at least that much delay
 * left leaves on time all the same. */
static void defer_reads(struct linkd *d, struct lq *q, int64_t t_read, int got)
{
	/* got: packets this serve read; none (a resumed read of a quiet link): it waits in the epoll
	 * wait again, the loop does not keep waking for it */
	if (d->defer_off || !got || q->deferred || q->stamp_miss || q->split_head || q->c.held >= q->limit)
		return;
	int64_t cost = d->read_cost_ns;
	int64_t rate = q->rate_pps > LINKD_DEFER_MIN_PPS ? q->rate_pps : LINKD_DEFER_MIN_PPS;
	double busy = (double)rate * (double)cost / 1e9; /* reading a second's arrivals, in seconds */
	int64_t ahead = d->wake_tail_ns + linkd_comp_ns(&d->comp) +
			(d->precision == LINKD_PRECISION_SPIN ? d->spin_margin_ns : d->early_ns) +
			release_half(d) + LINKD_DEFER_SLACK_NS + RX_BATCH * cost;
	int64_t pause = 0;
	bool coalesce = false;

	if (q->min_delay_ns > 0 && busy < LINKD_DEFER_BUSY_MAX && q->min_delay_ns - ahead >= LINKD_DEFER_MIN_NS)
		pause = (int64_t)((double)(q->min_delay_ns - ahead) / (1.0 + busy));
	if (pause < LINKD_DEFER_MIN_NS) {
		if (!d->coalesce_ns || q->rate_pps < LINKD_COALESCE_PPS)
			return;
		pause = d->coalesce_ns;
		coalesce = true;
	}
	int64_t charge = 2 * (int64_t)q->msg_bytes > LINKD_DEFER_PKT_BYTES ? 2 * (int64_t)q->msg_bytes
									 : LINKD_DEFER_PKT_BYTES;
	int64_t buf_rate = 2 * rate > LINKD_DEFER_PPS ? 2 * rate : LINKD_DEFER_PPS;
	int64_t buf_ns = q->rcvbuf_bytes / 2 / charge * 1000000000LL / buf_rate;
	int64_t limit_ns = (int64_t)(q->limit - q->c.held) * 1000000000LL / (2 * rate);

	if (pause > buf_ns)
		pause = buf_ns;
	if (pause > limit_ns)
		pause = limit_ns;
	if (pause > LINKD_DEFER_MAX_NS)
		pause = LINKD_DEFER_MAX_NS;
	if (pause < (coalesce ? d->coalesce_ns : LINKD_DEFER_MIN_NS))
		return;
	if (set_armed(d, q, false) < 0)
		return;
	q->deferred = true;
	q->resume_ns = t_read + pause;
	if (coalesce) {
		__atomic_store_n(&d->dstats.coalesced, d->dstats.coalesced + 1, __ATOMIC_RELAXED);
	} else {
		__atomic_store_n(&d->dstats.pauses, d->dstats.pauses + 1, __ATOMIC_RELAXED);
		__atomic_store_n(&d->dstats.pause_ns, d->dstats.pause_ns + pause, __ATOMIC_RELAXED);
	}
	if (d->n_deferred++ == 0 || q->resume_ns < d->defer_next)
		d->defer_next = q->resume_ns;
}

static void serve_queue(struct linkd *d, struct lq *q)
{
	size_t idx = q->slot;
	size_t bufsz = q->copy_packet ? RX_PKT_BUF : RX_META_BUF;
	/* recvmmsg changes only msg_len and msg_flags: the headers are set up again only when the
	 * buffer size changes, not for every batch */
	if (d->rx_bufsz != bufsz) {
		for (int i = 0; i < RX_BATCH; i++) {
			d->rx_iov[i].iov_base = d->rx_area + (size_t)i * bufsz;
			d->rx_iov[i].iov_len = bufsz;
			memset(&d->rx_msgs[i].msg_hdr, 0, sizeof d->rx_msgs[i].msg_hdr);
			d->rx_msgs[i].msg_hdr.msg_iov = &d->rx_iov[i];
			d->rx_msgs[i].msg_hdr.msg_iovlen = 1;
		}
		d->rx_bufsz = bufsz;
	}
	int64_t pending_since = 0; /* releases decided and not yet written, since */
	int got = 0;               /* packet messages read */
	q->stamp_miss = false;
	d->read_lead_ns = linkd_comp_ns(&d->comp) + release_lead(d);
	for (int round = 0; round < 16; round++) {
		int64_t t_read = clock_now_ns();
		int n = recvmmsg(q->fd, d->rx_msgs, RX_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0) {
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				log_warn("linkd: %s: recv: %s", q->name, strerror(errno));
			if (n == 0 || errno == EAGAIN)
				defer_reads(d, q, t_read, got);
			break;
		}
		int64_t wall_off = clock_wall_offset_ns(), now = clock_now_ns();
		uint32_t msg_bytes = 0;
		d->last_pkt_ns = now;
		for (int i = 0; i < n; i++) {
			int len = (int)d->rx_msgs[i].msg_len;
			if ((uint32_t)len > msg_bytes)
				msg_bytes = (uint32_t)len;
			const struct nlmsghdr *nlh = (const struct nlmsghdr *)d->rx_iov[i].iov_base;
			for (; mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len)) {
				if (NFNL_MSG_TYPE(nlh->nlmsg_type) == NFQNL_MSG_PACKET)
					handle_packet(d, q, (uint16_t)idx, nlh, now, wall_off);
			}
		}
		q->msg_bytes = msg_bytes;
		note_rate(q, n, q->last_arrival_ns ? q->last_arrival_ns : now);
		if (n >= 16) {
			/* a batch's cost a packet; a preempted batch counts as at most 20 us a packet */
			int64_t c = (clock_now_ns() - t_read) / n;
			d->read_cost_ns += ((c > 20000 ? 20000 : c) - d->read_cost_ns) / 8;
		}
		/* a long backlog: releases wait for the end of the read at most LINKD_FLUSH_AFTER_NS
		 * and one batch */
		if (release_due(d, now) && !pending_since)
			pending_since = now;
		if (pending_since && clock_now_ns() - pending_since >= LINKD_FLUSH_AFTER_NS) {
			flush_all(d);
			pending_since = 0;
		}
		got += n;
		__atomic_store_n(&d->dstats.reads, d->dstats.reads + 1, __ATOMIC_RELAXED);
		if (n < RX_BATCH) {
			defer_reads(d, q, t_read, got);
			break;
		}
	}
}

/* --- control -------------------------------------------------------------------------------- */

static int do_set(struct linkd *d, const struct linkd_ctl_req *r, char *reply, size_t replylen)
{
	int rc = linkd_set(d, r->name, r->netns, r->ifname, r->queue, &r->params);
	struct lq *q;

	if (rc < 0)
		snprintf(reply, replylen, "err %s", strerror(-rc));
	else
		snprintf(reply, replylen, "ok");
	q = find(d, r->name, NULL);
	if (q)
		q->mark = true;
	return rc;
}

/* The link's counters with the lateness of its interval; the interval starts again. */
static struct linkd_counters take_counters(struct lq *q)
{
	struct linkd_counters c = q->c;

	c.late_n = q->late.n;
	c.late_mean_us = latehist_mean_ns(&q->late) / 1000;
	c.late_p99_us = (uint64_t)latehist_quantile_ns(&q->late, 0.99) / 1000;
	c.late_max_us = (uint64_t)latehist_max_ns(&q->late) / 1000;
	latehist_reset(&q->late);
	return c;
}

static int do_stats(struct linkd *d, const char *nm, char *reply, size_t replylen)
{
	size_t off = (size_t)snprintf(reply, replylen, "ok\n");
	int found = 0;

	for (size_t i = 0; i < MAX_QUEUES; i++) {
		struct lq *q = d->q[i];

		if (!q || (nm[0] && strcmp(q->name, nm) != 0))
			continue;
		if (off < replylen) {
			struct linkd_counters c = take_counters(q);

			off += (size_t)linkd_ctl_stats_line(q->name, &c, reply + off, replylen - off);
		}
		found++;
	}
	if (nm[0] && !found) {
		snprintf(reply, replylen, "err no link %s", nm);
		return -ENOENT;
	}
	if (off < replylen)
		off += (size_t)snprintf(reply + off, replylen - off, "end\n");
	if (off >= replylen) {
		/* Never a cut reply: the client would read counters that are not there. */
		snprintf(reply, replylen, "err reply too long");
		return -ENOBUFS;
	}
	return 0;
}

/* Bytes a stats reply for every link can take (see do_stats). */
static size_t stats_reply_size(const struct linkd *d)
{
	size_t n = 0;

	for (size_t i = 0; i < MAX_QUEUES; i++)
		n += d->q[i] != NULL;
	return 16 + n * LINKD_CTL_STATS_LINE_MAX;
}

int linkd_handle(struct linkd *d, const char *request, char *reply, size_t replylen)
{
	struct linkd_ctl_req r;
	int rc = linkd_ctl_parse(request, &r, reply, replylen);

	if (rc < 0)
		return rc;
	switch (r.op) {
	case LINKD_CTL_PING:
		snprintf(reply, replylen, "ok");
		return 0;
	case LINKD_CTL_SET:
		return do_set(d, &r, reply, replylen);
	case LINKD_CTL_DEL:
		rc = linkd_del(d, r.name);
		snprintf(reply, replylen, rc < 0 ? "err %s" : "ok", strerror(-rc));
		return rc;
	case LINKD_CTL_STATS:
		return do_stats(d, r.name, reply, replylen);
	}
	snprintf(reply, replylen, "err unknown request");
	return -EINVAL;
}

int linkd_load_config(struct linkd *d, const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		log_error("linkd: open %s: %s", path, strerror(errno));
		return -errno;
	}
	for (size_t i = 0; i < MAX_QUEUES; i++)
		if (d->q[i])
			d->q[i]->mark = false;
	char line[4096], reply[256];
	int lineno = 0, rc = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		char *s = line;
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '#' || *s == '\n' || *s == '\0')
			continue;
		if (strncmp(s, "set ", 4) != 0) {
			log_error("%s:%d: expected a set line", path, lineno);
			rc = -EINVAL;
			break;
		}
		if (linkd_handle(d, s, reply, sizeof reply) < 0) {
			log_error("%s:%d: %s", path, lineno, reply);
			rc = -EINVAL;
			break;
		}
	}
	fclose(f);
	if (rc == 0) {
		for (size_t i = 0; i < MAX_QUEUES; i++)
			if (d->q[i] && !d->q[i]->mark) {
				log_info("linkd: %s no longer configured: removing", d->q[i]->name);
				linkd_del(d, d->q[i]->name);
			}
	}
	return rc;
}

static void conn_close(struct linkd *d, struct conn *cn)
{
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, cn->tag.fd, NULL);
	close(cn->tag.fd);
	free(cn->out);
	free(cn);
}

/* Send what the socket takes of cn's pending reply, one message of whole lines at a time. Returns
 * false when the connection was closed. */
static bool conn_flush(struct linkd *d, struct conn *cn)
{
	while (cn->outoff < cn->outlen) {
		size_t m = linkd_ctl_msg_cut(cn->out + cn->outoff, cn->outlen - cn->outoff, LINKD_CTL_MSG_MAX);
		ssize_t w = send(cn->tag.fd, cn->out + cn->outoff, m, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = &cn->tag };

			if (epoll_ctl(d->epfd, EPOLL_CTL_MOD, cn->tag.fd, &ev) == 0)
				return true;
		}
		if (w < 0) {
			log_debug("linkd: control reply: %s", strerror(errno));
			conn_close(d, cn);
			return false;
		}
		cn->outoff += (size_t)w; /* SOCK_SEQPACKET: the whole message or nothing */
	}
	if (cn->outlen) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &cn->tag };

		free(cn->out);
		cn->out = NULL;
		cn->outlen = cn->outoff = 0;
		if (epoll_ctl(d->epfd, EPOLL_CTL_MOD, cn->tag.fd, &ev) < 0) {
			conn_close(d, cn);
			return false;
		}
	}
	return true;
}

static void serve_conn(struct linkd *d, struct conn *cn, uint32_t events)
{
	char req[4096];
	size_t cap;

	if (cn->outlen) {
		if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			conn_flush(d, cn);
		return;
	}
	ssize_t n = recv(cn->tag.fd, req, sizeof req - 1, MSG_DONTWAIT);
	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		conn_close(d, cn);
		return;
	}
	req[n] = '\0';
	/* Room for a stats reply of every link; other replies (one link's stats too) are short. */
	cap = strncmp(req, "stats", 5) == 0 && !strstr(req, "name=") ? stats_reply_size(d) : 4096;
	cn->out = malloc(cap);
	if (!cn->out) {
		conn_close(d, cn);
		return;
	}
	linkd_handle(d, req, cn->out, cap);
	cn->outlen = strlen(cn->out);
	cn->outoff = 0;
	conn_flush(d, cn);
}

static void write_counters(struct linkd *d)
{
	uint64_t ticks;
	if (read(d->cntfd, &ticks, sizeof ticks) < 0)
		return;
	FILE *f = safefile_fopen(d->counters_path, "a");
	if (!f)
		return;
	double t_s = clock_run_s();
	for (size_t i = 0; i < MAX_QUEUES; i++) {
		const struct lq *q = d->q[i];
		if (q)
			fprintf(f, "%.3f,%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n",
				t_s, q->name, q->c.packets, q->c.bytes, q->c.dropped, q->c.held, q->c.dup,
				q->c.corrupt, q->c.reordered);
	}
	fclose(f);
}

int linkd_counters_every(struct linkd *d, const char *path, int period_ms)
{
	if (period_ms <= 0)
		return -EINVAL;
	snprintf(d->counters_path, sizeof d->counters_path, "%s", path);
	/* The run directory may belong to a user: no symlink or hard link is written through. */
	FILE *f = safefile_fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "t_s,link,packets,bytes,dropped,held,dup,corrupt,reordered\n");
	fclose(f);
	d->cntfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (d->cntfd < 0)
		return -errno;
	struct itimerspec its = { .it_interval = { period_ms / 1000, (period_ms % 1000) * 1000000L } };
	its.it_value = its.it_interval;
	timerfd_settime(d->cntfd, 0, &its, NULL);
	return epoll_add(d, d->cntfd, &d->cnt_tag, EV_COUNTERS, NULL);
}

int linkd_watch_signals(struct linkd *d, const char *config_path)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	d->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (d->sigfd < 0)
		return -errno;
	snprintf(d->config_path, sizeof d->config_path, "%s", config_path ? config_path : "");
	return epoll_add(d, d->sigfd, &d->sig_tag, EV_SIGNAL, NULL);
}

static void serve_signal(struct linkd *d)
{
	struct signalfd_siginfo si;
	while (read(d->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
		if (si.ssi_signo == SIGHUP && d->config_path[0]) {
			log_info("linkd: SIGHUP: re-reading %s", d->config_path);
			linkd_load_config(d, d->config_path);
		} else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
			d->stop = true;
		}
	}
}

void linkd_stop(struct linkd *d)
{
	uint64_t one = 1;
	if (write(d->stopfd, &one, sizeof one) < 0) {
		/* the counter is already non-zero: a stop is pending anyway */
	}
}

/* Timer wake-ups come late by the scheduler's latency (tens of microseconds idle, more under
 * load); an exponential average of it (weight 1/16, capped at 300 us) moves the timer earlier. */
static void track_lateness(struct linkd *d, int64_t late_ns)
{
	if (late_ns < 0)
		late_ns = 0;
	if (late_ns > 2000000)
		return; /* a stall (stopped process, overloaded host): not the timer's usual latency */
	d->early_ns += (late_ns - d->early_ns) / 16;
	if (d->early_ns > 300000)
		d->early_ns = 300000;
}

void linkd_set_precision(struct linkd *d, enum linkd_precision p, int64_t margin_ns)
{
	if (margin_ns < LINKD_SPIN_MARGIN_MIN_NS)
		margin_ns = LINKD_SPIN_MARGIN_MIN_NS;
	if (margin_ns > LINKD_SPIN_MARGIN_MAX_NS)
		margin_ns = LINKD_SPIN_MARGIN_MAX_NS;
	d->precision = p;
	d->spin_floor_ns = d->spin_margin_ns = margin_ns;
	latehist_reset(&d->wake_late);
}

/* spin: each wake-up's lateness; every 256 of them the margin becomes their p99 + 20 us (never
 * below the configured floor): a host whose timers run later than measured is caught up with. */
static void spin_track(struct linkd *d, int64_t late_ns)
{
	latehist_add(&d->wake_late, late_ns);
	if (d->wake_late.n < 256)
		return;
	int64_t m = latehist_quantile_ns(&d->wake_late, 0.99) + 20000;

	if (m < d->spin_floor_ns)
		m = d->spin_floor_ns;
	if (m > LINKD_SPIN_MARGIN_MAX_NS)
		m = LINKD_SPIN_MARGIN_MAX_NS;
	d->spin_margin_ns = m;
	latehist_reset(&d->wake_late);
}

/* The timer's recent lateness tail for deferred reads: the latest wake-up of the current window of
 * LINKD_DEFER_TAIL_WINDOW wake-ups (or of LINKD_DEFER_TAIL_WINDOW_NS, whichever ends first: a loop
 * that arrivals wake seldom waits for its timer) and of the one before (a later one raises it at
 * once). The maximum, not a quantile: a CPU taken by other work for a stretch delays the one wake-up that
 * falls in it while the ticks outside it come on time, so a per-wake-up p99 understates what a
 * resume can meet (measured under a 3 ms busy stretch every 5-15 ms: 1.6% of wake-ups 1 ms late
 * or more, about one a stretch, so a p99 falls among the lesser of those). */
static void tail_track(struct linkd *d, int64_t late_ns, int64_t now)
{
	if (late_ns > LINKD_DEFER_TAIL_CAP_NS)
		late_ns = LINKD_DEFER_TAIL_CAP_NS;
	if (late_ns > d->wake_win_max_ns)
		d->wake_win_max_ns = late_ns;
	if (late_ns > d->wake_tail_ns)
		d->wake_tail_ns = late_ns;
	if (++d->wake_win_n < LINKD_DEFER_TAIL_WINDOW && now - d->wake_win_t0 < LINKD_DEFER_TAIL_WINDOW_NS)
		return;
	d->wake_tail_ns = d->wake_win_max_ns; /* the window before this one drops out */
	d->wake_win_max_ns = 0;
	d->wake_win_n = 0;
	d->wake_win_t0 = now;
}

/* spin: whether the next release is within the margin (then the loop polls instead of
 * sleeping). */
static bool spinning(const struct linkd *d, int64_t now)
{
	const struct netem_heap_entry *top = netem_heap_top(&d->heap);

	return d->precision == LINKD_PRECISION_SPIN && top &&
	       top->t_ns - linkd_comp_ns(&d->comp) - now <= d->spin_margin_ns;
}

void linkd_set_defer_reads(struct linkd *d, bool on)
{
	d->defer_off = !on;
}

static int64_t window_clamp(int64_t ns)
{
	return ns < 0 ? 0 : ns > LINKD_RELEASE_WINDOW_MAX_NS ? LINKD_RELEASE_WINDOW_MAX_NS : ns;
}

void linkd_set_release_window(struct linkd *d, int64_t window_ns)
{
	d->window_ns = window_clamp(window_ns);
}

void linkd_set_read_window(struct linkd *d, int64_t window_ns)
{
	d->coalesce_ns = window_clamp(window_ns);
}

void linkd_set_compensation(struct linkd *d, int64_t max_ns)
{
	linkd_comp_init(&d->comp, max_ns);
}

void linkd_defer_stats(const struct linkd *d, struct linkd_defer_stats *out)
{
	out->pauses = __atomic_load_n(&d->dstats.pauses, __ATOMIC_RELAXED);
	out->pause_ns = __atomic_load_n(&d->dstats.pause_ns, __ATOMIC_RELAXED);
	out->late_reads = __atomic_load_n(&d->dstats.late_reads, __ATOMIC_RELAXED);
	out->coalesced = __atomic_load_n(&d->dstats.coalesced, __ATOMIC_RELAXED);
	out->reads = __atomic_load_n(&d->dstats.reads, __ATOMIC_RELAXED);
	out->writes = __atomic_load_n(&d->dstats.writes, __ATOMIC_RELAXED);
}

int64_t linkd_compensation_ns(const struct linkd *d)
{
	return __atomic_load_n(&d->comp.est_ns, __ATOMIC_RELAXED);
}

void linkd_set_rt_priority(struct linkd *d, int prio)
{
	d->rt_prio = prio < 0 ? 0 : prio > 99 ? 99 : prio;
}

/* True when the process at the other end of unix socket fd runs as our effective uid. */
static bool peer_is_self(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof cr;

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && len == sizeof cr &&
	       cr.uid == geteuid();
}

uint64_t linkd_ctl_rejected(const struct linkd *d)
{
	return d->ctl_rejected;
}

int linkd_run(struct linkd *d)
{
	struct epoll_event evs[64];
	/* Timers of this thread fire at their time, not up to 50 us later (default slack). */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	if (d->rt_prio > 0) {
		struct sched_param sp = { .sched_priority = d->rt_prio };
		int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
		if (rc != 0)
			log_info("linkd: running without real-time priority: %s", strerror(rc));
	}
	while (!d->stop) {
		int64_t now = clock_now_ns();
		if (d->n_deferred && now >= d->defer_next && resume_due(d, now)) {
			release_due(d, clock_now_ns());
			flush_all(d);
			now = clock_now_ns();
		}
		int64_t wake = spinning(d, now) ? now : next_wake(d, now);
		if (d->n_deferred && (wake < 0 || d->defer_next < wake))
			wake = d->defer_next > now ? d->defer_next : now;
		int n = wait_events(d, evs, 64, wake, now);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("linkd: epoll_wait: %s", strerror(errno));
			return -errno;
		}
		if (n == 0 && wake > now) {
			/* the deadline passed: how late the wake-up came */
			int64_t woke = clock_now_ns(), late = woke - wake;

			track_lateness(d, late);
			tail_track(d, late, woke);
			if (d->precision == LINKD_PRECISION_SPIN)
				spin_track(d, late);
		}
		for (int i = 0; i < n; i++) {
			struct evtag *tag = evs[i].data.ptr;
			switch (tag->kind) {
			case EV_QUEUE:
				serve_queue(d, tag->ptr);
				break;
			case EV_STOP:
				d->stop = true;
				break;
			case EV_LISTEN: {
				int c = accept4(d->listenfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
				if (c >= 0 && !peer_is_self(c)) {
					if (!d->ctl_rejected++)
						log_warn("linkd: control connection from another uid refused");
					close(c);
				} else if (c >= 0) {
					struct conn *cn = calloc(1, sizeof *cn);
					if (!cn || epoll_add(d, c, &cn->tag, EV_CONN, cn) < 0) {
						free(cn);
						close(c);
					}
				}
				break;
			}
			case EV_CONN:
				serve_conn(d, tag->ptr, evs[i].events);
				break;
			case EV_SIGNAL:
				serve_signal(d);
				break;
			case EV_COUNTERS:
				write_counters(d);
				break;
			}
		}
		release_due(d, clock_now_ns());
		flush_all(d);
	}
	return 0;
}

/* Connect to the emulator's control socket and send request. Returns the fd or -errno. */
static int ctl_send(const char *ctl_path, const char *request)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = -1, rc;

	if (strlen(ctl_path) >= sizeof sa.sun_path)
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, ctl_path, strlen(ctl_path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		rc = -errno;
		goto fail;
	}
	/* The listener's credentials (SO_PEERCRED on a connected socket): a socket another user
	 * put in the emulator's place gets no request. */
	if (!peer_is_self(fd)) {
		log_error("linkd: %s is served by another uid: refused", ctl_path);
		rc = -EPERM;
		goto fail;
	}
	if (send(fd, request, strlen(request), MSG_NOSIGNAL) < 0) {
		rc = -errno;
		goto fail;
	}
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* linkd_request_set_interrupt */
static const volatile sig_atomic_t *request_intr;
static int request_intr_at;

void linkd_request_set_interrupt(const volatile sig_atomic_t *count, int at)
{
	request_intr = count;
	request_intr_at = at > 0 ? at : 1;
}

/* Wait until fd is readable or deadline_ns (lib/clock) passes, in slices of at most 50 ms while
 * an interruption count is watched (a stop at once ends the wait: -ECANCELED). Returns 0 or
 * -errno. */
static int wait_readable(int fd, int64_t deadline_ns)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int pr;

	do {
		int64_t left_ms = (deadline_ns - clock_now_ns() + 999999) / 1000000;

		if (request_intr && *request_intr >= request_intr_at)
			return -ECANCELED;
		if (request_intr && left_ms > 50)
			left_ms = 50;
		pr = poll(&pfd, 1, left_ms < 0 ? 0 : left_ms > INT32_MAX ? INT32_MAX : (int)left_ms);
	} while ((pr < 0 && errno == EINTR) || (pr == 0 && request_intr && clock_now_ns() < deadline_ns));
	return pr == 0 ? -ETIMEDOUT : pr < 0 ? -errno : 0;
}

int linkd_request(const char *ctl_path, const char *request, char *reply, size_t replylen,
		  int timeout_ms)
{
	int fd = ctl_send(ctl_path, request), rc;

	if (fd < 0)
		return fd;
	rc = wait_readable(fd, clock_now_ns() + (int64_t)timeout_ms * 1000000);
	if (rc < 0)
		goto out;
	ssize_t n = recv(fd, reply, replylen - 1, 0);
	if (n < 0) {
		rc = -errno;
		goto out;
	}
	reply[n] = '\0';
	rc = strncmp(reply, "ok", 2) == 0 ? 0 : -EIO;
out:
	close(fd);
	return rc;
}

int linkd_request_all(const char *ctl_path, const char *request, char **reply, size_t *len,
		      int timeout_ms)
{
	int64_t deadline = clock_now_ns() + (int64_t)timeout_ms * 1000000;
	char *buf = NULL;
	size_t cap = 0, used = 0;
	bool first = true;
	int fd = ctl_send(ctl_path, request), rc;

	*reply = NULL;
	*len = 0;
	if (fd < 0)
		return fd;
	for (;;) {
		if (cap - used < LINKD_CTL_MSG_MAX + 1) {
			size_t ncap = cap ? cap * 2 : 4 * LINKD_CTL_MSG_MAX;
			char *nb = realloc(buf, ncap);

			if (!nb) {
				rc = -ENOMEM;
				goto out;
			}
			buf = nb;
			cap = ncap;
		}
		if ((rc = wait_readable(fd, deadline)) < 0)
			goto out;
		/* MSG_TRUNC: the real length, so a message longer than the room is seen, not cut. */
		ssize_t n = recv(fd, buf + used, cap - used - 1, MSG_TRUNC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		if (n == 0) {
			rc = -ECONNRESET; /* closed before the reply's end */
			goto out;
		}
		if ((size_t)n > cap - used - 1) {
			rc = -EMSGSIZE;
			goto out;
		}
		bool done = linkd_ctl_reply_done(buf + used, (size_t)n, first);

		used += (size_t)n;
		first = false;
		if (done)
			break;
	}
	buf[used] = '\0';
	rc = strncmp(buf, "ok", 2) == 0 ? 0 : -EIO;
	*reply = buf; /* ownership moves to the caller */
	*len = used;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return rc;
}
