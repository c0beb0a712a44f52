/* node/probe: see probe.h. */
#include "node/probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "collectors/csv.h"
#include "lib/clock.h"
#include "lib/ctl.h"
#include "lib/log.h"
#include "lib/link_params.h"
#include "lib/link_verdict.h"

#define PROBE_PORT_DEFAULT 7100
/* Digits only (1..19 of them, no sign, no blank, no leading zero), at most max, then one
 * optional newline and the end. */
static int digits(const char *s, uint64_t max, uint64_t *v)
{
	uint64_t x = 0;
	size_t n = 0;

	for (; s[n] >= '0' && s[n] <= '9'; n++) {
		if (n >= 19)
			return -EINVAL;
		x = x * 10 + (uint64_t)(s[n] - '0');
	}
	if (!n || x > max || (s[0] == '0' && n > 1) || (s[n] && !(s[n] == '\n' && !s[n + 1])))
		return -EINVAL;
	*v = x;
	return 0;
}

int probe_parse_count(const char *line, uint32_t *index)
{
	uint64_t v;

	if (strncmp(line, "count ", 6) || digits(line + 6, PROBE_MAX_NODES - 1, &v))
		return -EINVAL;
	*index = (uint32_t)v;
	return 0;
}

int probe_parse_answer(const char *line, int64_t *count)
{
	uint64_t v;

	if (digits(line, INT64_MAX, &v))
		return -EINVAL;
	*count = (int64_t)v;
	return 0;
}

/* SCHED_FIFO priority of the measuring thread: below stalenet-linkd's (10 by default), so the
 * emulator serving the link still runs first. */
#define PROBE_RT_PRIO 5

/* Run the calling thread (the one that timestamps packets) real-time when permitted, so that a
 * busy host's run queue does not add to the delay measured; its children get the normal policy.
 * Both loops sleep in poll() between packets, so the thread never holds a core. */
static void probe_realtime(const char *who)
{
	struct sched_param sp = { .sched_priority = PROBE_RT_PRIO };

	if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) < 0)
		log_info("%s: running without real-time priority: %s", who, strerror(errno));
}

void probe_acc_add(struct probe_acc *a, double x)
{
	double d = x - a->mean;

	a->n++;
	a->mean += d / (double)a->n;
	a->m2 += d * (x - a->mean);
}

double probe_acc_sd(const struct probe_acc *a)
{
	return a->n > 1 ? sqrt(a->m2 / (double)(a->n - 1)) : 0.0;
}

static int sockaddr_for(const char *addr, int port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof *sa);
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, addr, &sa->sin_addr) != 1) {
		log_error("bad IPv4 address '%s'", addr);
		return -EINVAL;
	}
	return 0;
}

/* Ask the reflector over TCP how many of our datagrams it saw. Returns the count or -errno. */
static long fetch_count(const struct sockaddr_in *hub, uint32_t index, double *connect_ms)
{
	char line[64];
	int fd = -1, n, len = 0;
	long count = -ETIMEDOUT;
	int64_t t0;
	struct pollfd pfd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	t0 = clock_now_ns();
	while (connect(fd, (const struct sockaddr *)hub, sizeof *hub) < 0) {
		if (errno == EINTR)
			continue;
		count = -errno;
		goto out;
	}
	*connect_ms = (double)(clock_now_ns() - t0) / 1e6;
	n = snprintf(line, sizeof line, "count %u\n", index);
	if (write(fd, line, (size_t)n) != n) {
		count = -EIO;
		goto out;
	}
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	while (len < (int)sizeof line - 1 && poll(&pfd, 1, 30000) > 0) {
		n = (int)read(fd, line + len, sizeof line - 1 - (size_t)len);
		if (n <= 0)
			break;
		len += n;
		if (memchr(line, '\n', (size_t)len))
			break;
	}
	line[len] = '\0';
	int64_t got;
	if (len > 0 && line[len - 1] == '\n')
		count = probe_parse_answer(line, &got) ? -EPROTO : (long)got;   /* long: 64 bits here */
out:
	close(fd);
	return count;
}

/* The configured link of one direction: linkcheck.up / linkcheck.down hold the
 * link_params_format text the orchestrator wrote. */
static int read_dir_cfg(const struct kv *cfg, const char *dir, struct link_params *p)
{
	char key[64];
	const char *text;
	int rc;

	memset(p, 0, sizeof *p);
	snprintf(key, sizeof key, "linkcheck.%s", dir);
	text = kv_get(cfg, key);
	if (!text || !*text)
		return 0;
	if ((rc = link_params_parse_line(p, text)) < 0)
		log_error("probe: %s: not a link parameter list as the orchestrator writes it: '%.200s'", key, text);
	return rc;
}

/* One linkcheck.csv row; warns when the direction is off. Returns the csv result. */
static int write_row(struct csv_writer *w, const char *node, const char *direction, uint32_t probes,
		     const struct link_params *cfg, const struct link_verdict_expect *e,
		     const struct probe_acc *acc, uint64_t received)
{
	double loss = probes ? 1.0 - (double)received / (double)probes : 0.0;
	char line[512], why[160];

	/* late_p99_ms stays empty here: the orchestrator, which asks the emulator, fills it in */
	link_verdict_csv_row(line, sizeof line, node, direction, probes, cfg, e, acc->mean, probe_acc_sd(acc), loss,
			     NAN);
	if (!link_verdict_verdict(e, probes, acc->mean, probe_acc_sd(acc), loss, why, sizeof why))
		log_warn("probe: link %s %s is off: %s", node, direction, why);
	return csv_writer_row(w, "%s", line);
}

int probe_run(const struct kv *cfg)
{
	const char *hub_addr = kv_get(cfg, "hub.addr");
	const char *name = kv_get(cfg, "node.name");
	const char *run_dir = kv_get(cfg, "run.dir");
	int64_t nprobes, port, index, hub_off_ns;
	double interval_s, drain_s;
	struct link_params up, down, both;
	struct link_verdict_expect e_up, e_down, e_rtt;
	struct probe_acc acc_up = { 0 }, acc_down = { 0 }, acc_rtt = { 0 };
	struct sockaddr_in hub;
	struct csv_writer *w = NULL;
	struct ctl_client *ctl = NULL;
	char path[4096];
	uint8_t *seen = NULL;
	int fd = -1, rc = 1;
	long hub_count;
	double connect_ms = 0;

	if (!hub_addr || !name || !run_dir) {
		log_error("probe: config lacks hub.addr, node.name or run.dir");
		return 2;
	}
	if (kv_get_i64(cfg, "linkcheck.probes", 200, &nprobes) || kv_get_i64(cfg, "port.probe", PROBE_PORT_DEFAULT, &port) ||
	    kv_get_i64(cfg, "node.index", 0, &index) || kv_get_double(cfg, "linkcheck.interval", 0.005, &interval_s) ||
	    kv_get_i64(cfg, "linkcheck.hub_offset_ns", 0, &hub_off_ns))
		return 2;
	if (nprobes < 1 || nprobes > 10000000 || index < 0 || index >= PROBE_MAX_NODES) {
		log_error("probe: linkcheck.probes %lld or node.index %lld out of range", (long long)nprobes,
			  (long long)index);
		return 2;
	}
	if (read_dir_cfg(cfg, "up", &up) < 0 || read_dir_cfg(cfg, "down", &down) < 0)
		return 2;
	link_verdict_expect_from(&up, NULL, &e_up);
	link_verdict_expect_from(NULL, &down, &e_down);
	link_verdict_expect_from(&up, &down, &e_rtt);
	if (sockaddr_for(hub_addr, (int)port, &hub) < 0)
		return 2;
	if (kv_get(cfg, "ctl.endpoint")) {
		ctl = ctl_client_open(kv_get(cfg, "ctl.endpoint"), name);
		if (!ctl || ctl_client_ready_wait(ctl, 60000) != 0) {
			log_error("probe: no start from the orchestrator");
			goto out;
		}
	}
	probe_realtime("probe");
	seen = calloc((size_t)nprobes, 1);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (!seen || fd < 0 || connect(fd, (struct sockaddr *)&hub, sizeof hub) < 0) {
		log_error("probe: socket to %s:%lld: %s", hub_addr, (long long)port, strerror(errno));
		goto out;
	}

	/* Send on a fixed schedule; read replies in between. Drain long enough for the slowest
	 * reply: both delays plus a generous jitter tail. */
	drain_s = 1.0 + 2.0 * (up.delay_us + down.delay_us + 6.0 * (up.jitter_us + down.jitter_us)) / 1e6;
	{
		int64_t t_start = clock_now_ns(), interval_ns = (int64_t)(interval_s * 1e9);
		int64_t next = t_start, end = -1;
		uint32_t sent = 0;

		for (;;) {
			int64_t now = clock_now_ns();
			struct pollfd pfd = { .fd = fd, .events = POLLIN };
			int timeout_ms;

			if (sent < (uint32_t)nprobes && now >= next) {
				struct probe_pkt p = { .magic = PROBE_MAGIC, .node = (uint32_t)index, .seq = sent,
						       .t_send_ns = now };
				if (send(fd, &p, sizeof p, 0) < 0 && errno != ECONNREFUSED && errno != ENOBUFS)
					log_warn("probe: send: %s", strerror(errno));
				sent++;
				next += interval_ns;
				if (sent == (uint32_t)nprobes)
					end = now + (int64_t)(drain_s * 1e9);
				continue;
			}
			if (end >= 0 && now >= end)
				break;
			timeout_ms = (int)(((sent < (uint32_t)nprobes ? next : end) - now) / 1000000LL) + 1;
			if (poll(&pfd, 1, timeout_ms) > 0) {
				struct probe_pkt p;
				ssize_t n = recv(fd, &p, sizeof p, MSG_DONTWAIT);
				int64_t t_rx = clock_now_ns();

				if (n != (ssize_t)sizeof p || p.magic != PROBE_MAGIC || p.node != (uint32_t)index ||
				    p.seq >= (uint32_t)nprobes || seen[p.seq])
					continue; /* malformed, foreign or duplicated: not a sample */
				seen[p.seq] = 1;
				/* the reflector's stamps onto this clock (0 on one host; across hosts the
				 * measured offset of its host's clock to ours) */
				probe_acc_add(&acc_up, (double)(p.t_hub_rx_ns - hub_off_ns - p.t_send_ns) / 1e6);
				probe_acc_add(&acc_down, (double)(t_rx - (p.t_hub_tx_ns - hub_off_ns)) / 1e6);
				probe_acc_add(&acc_rtt, (double)((t_rx - p.t_send_ns) - (p.t_hub_tx_ns - p.t_hub_rx_ns)) / 1e6);
			}
			if (ctl) {
				ctl_client_status(ctl, (int64_t)sent, CTL_RUN, false);
				/* told to stop: the self-check is being aborted (an interruption); a
				 * finished check stops only the reflector */
				if (ctl_client_should_stop(ctl)) {
					log_info("probe: stopped after %u of %lld probes", sent, (long long)nprobes);
					rc = 0;
					goto out;
				}
			}
		}
	}
	hub_count = fetch_count(&hub, (uint32_t)index, &connect_ms);
	if (hub_count > nprobes)
		hub_count = -ERANGE;    /* more arrived than were sent: not our reflector's count */
	if (hub_count < 0) {
		log_error("probe: TCP query to reflector %s:%lld failed: %s", hub_addr, (long long)port,
			  strerror((int)-hub_count));
		goto out;
	}
	log_info("probe: %lld sent, %ld reached the reflector, %llu came back; TCP connect %.2f ms",
		 (long long)nprobes, hub_count, (unsigned long long)acc_rtt.n, connect_ms);

	snprintf(path, sizeof path, "%s/linkcheck.csv", run_dir);
	w = csv_writer_open(path, LINK_VERDICT_CSV_HEADER);
	if (!w)
		goto out;
	/* The round trip's configured columns: both delays, the combined spread and loss. */
	both = up;
	both.delay_us = up.delay_us + down.delay_us;
	both.jitter_us = (uint32_t)(e_rtt.rtt_sd_ms * 1000.0 + 0.5);
	both.dist = LINK_DIST_NORMAL;
	both.loss_model = LINK_LOSS_RANDOM;
	both.loss_ppm = (uint32_t)(e_rtt.loss * 1e6 + 0.5);
	rc = 0;
	if (write_row(w, name, "up", (uint32_t)nprobes, &up, &e_up, &acc_up, (uint64_t)hub_count) < 0 ||
	    write_row(w, name, "down", (uint32_t)hub_count, &down, &e_down, &acc_down, acc_down.n) < 0 ||
	    write_row(w, name, "rtt", (uint32_t)nprobes, &both, &e_rtt, &acc_rtt, acc_rtt.n) < 0)
		rc = 1;
out:
	if (ctl) {
		ctl_client_done(ctl);
		ctl_client_close(&ctl);
	}
	csv_writer_close(&w);
	free(seen);
	if (fd >= 0)
		close(fd);
	return rc;
}

int probe_reflector_run(const struct kv *cfg)
{
	const char *name = kv_get(cfg, "node.name");
	int64_t port;
	struct sockaddr_in any = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	struct ctl_client *ctl = NULL;
	uint64_t *counts = NULL;
	int ufd = -1, tfd = -1, one = 1, rc = 1;

	if (kv_get_i64(cfg, "port.probe", PROBE_PORT_DEFAULT, &port))
		return 2;
	any.sin_port = htons((uint16_t)port);
	counts = calloc(PROBE_MAX_NODES, sizeof *counts);
	ufd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	tfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!counts || ufd < 0 || tfd < 0)
		goto out;
	setsockopt(tfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	{
		int buf = 8 << 20;
		setsockopt(ufd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
	}
	if (bind(ufd, (struct sockaddr *)&any, sizeof any) < 0 || bind(tfd, (struct sockaddr *)&any, sizeof any) < 0 ||
	    listen(tfd, 1024) < 0) {
		log_error("reflector: bind port %lld: %s", (long long)port, strerror(errno));
		goto out;
	}
	if (kv_get(cfg, "ctl.endpoint")) {
		ctl = ctl_client_open(kv_get(cfg, "ctl.endpoint"), name ? name : "hub");
		if (!ctl || ctl_client_ready_wait(ctl, 60000) != 0)
			goto out;
	}
	probe_realtime("reflector");
	log_info("reflector: listening on UDP and TCP port %lld", (long long)port);
	while (!ctl || !ctl_client_should_stop(ctl)) {
		struct pollfd pfd[2] = { { .fd = ufd, .events = POLLIN }, { .fd = tfd, .events = POLLIN } };

		if (poll(pfd, 2, 50) <= 0)
			continue;
		if (pfd[0].revents & POLLIN) {
			/* Drain the socket: every datagram is stamped at its own arrival. */
			for (;;) {
				struct probe_pkt p;
				struct sockaddr_in from;
				socklen_t fl = sizeof from;
				ssize_t n = recvfrom(ufd, &p, sizeof p, MSG_DONTWAIT, (struct sockaddr *)&from, &fl);

				if (n < 0)
					break;
				if (n != (ssize_t)sizeof p || p.magic != PROBE_MAGIC || p.node >= PROBE_MAX_NODES)
					continue;
				p.t_hub_rx_ns = clock_now_ns();
				counts[p.node]++;
				p.t_hub_tx_ns = clock_now_ns();
				sendto(ufd, &p, sizeof p, 0, (struct sockaddr *)&from, fl);
			}
		}
		if (pfd[1].revents & POLLIN) {
			int c = accept4(tfd, NULL, NULL, SOCK_CLOEXEC);
			char line[64];
			int len = 0;
			struct pollfd cp;
			uint32_t idx;

			if (c < 0)
				continue;
			cp = (struct pollfd){ .fd = c, .events = POLLIN };
			while (len < (int)sizeof line - 1 && poll(&cp, 1, 2000) > 0) {
				ssize_t n = read(c, line + len, sizeof line - 1 - (size_t)len);
				if (n <= 0)
					break;
				len += (int)n;
				if (memchr(line, '\n', (size_t)len))
					break;
			}
			line[len] = '\0';
			if (!probe_parse_count(line, &idx)) {
				int n = snprintf(line, sizeof line, "%llu\n", (unsigned long long)counts[idx]);
				if (write(c, line, (size_t)n) != n)
					log_warn("reflector: short write to a prober");
			}
			close(c);
		}
	}
	rc = 0;
out:
	if (ctl) {
		ctl_client_done(ctl);
		ctl_client_close(&ctl);
	}
	free(counts);
	if (ufd >= 0)
		close(ufd);
	if (tfd >= 0)
		close(tfd);
	return rc;
}
