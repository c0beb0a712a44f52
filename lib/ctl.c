/* lib/ctl: see ctl.h. The control plane is deliberately tiny and text-based: a human can watch
 * it with any ZeroMQ tool, and a node that dies mid-message cannot corrupt the orchestrator's
 * view (ROUTER drops partial multipart messages).
 *
 * Peer credentials: for ipc:// connections libzmq (4.3) reads SO_PEERCRED when the connection is
 * made and appends ":UID:GID:PID" to the message property "Peer-Address" of everything received
 * on it (checked on Debian 12's 4.3.4). Both ends use it: the server drops messages from another
 * uid than its own, a client ignores commands from a server of another uid. The socket file is
 * already 0600 when libzmq binds and listens (umask around zmq_bind, which binds in the calling
 * thread for ipc), in the 0700 runtime directory, so the check is a second line. */
#include "lib/ctl.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/rtdir.h"

#define CTL_STATUS_MIN_NS (50 * 1000000LL)

struct ctl_client {
	void *zctx;
	void *sock;
	bool stop;
	bool rejoined;
	int64_t last_status_ns;
	int64_t last_step;
	enum ctl_state last_state;
	bool last_waiting;
	bool check_creds;       /* ipc:// endpoint: commands must come from our own uid */
	uint64_t rejected;
};

struct ctl_server {
	void *zctx;
	void *sock;
	char path[256];
	bool check_creds;
	uint64_t rejected;      /* messages dropped: sent by another uid */
};

static volatile sig_atomic_t ctl_signal_stop;

static void on_stop_signal(int sig)
{
	(void)sig;
	ctl_signal_stop = 1;
}

void ctl_client_install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
}

/* The uid of the process that sent m, from the "Peer-Address" property libzmq fills for ipc
 * peers ("ADDR:UID:GID:PID"). Returns 0, or -ENOENT when the property carries no credentials. */
static int peer_uid(zmq_msg_t *m, uid_t *uid)
{
	const char *pa = zmq_msg_gets(m, "Peer-Address");
	const char *pid_c, *gid_c, *uid_c;
	char *end;
	unsigned long v;

	if (!pa)
		return -ENOENT;
	pid_c = strrchr(pa, ':');
	gid_c = pid_c ? memrchr(pa, ':', (size_t)(pid_c - pa)) : NULL;
	uid_c = gid_c ? memrchr(pa, ':', (size_t)(gid_c - pa)) : NULL;
	if (!uid_c)
		return -ENOENT;
	errno = 0;
	v = strtoul(uid_c + 1, &end, 10);
	if (errno || end != gid_c || end == uid_c + 1)
		return -ENOENT;
	*uid = (uid_t)v;
	return 0;
}

/* True when m may be trusted: credentials are not checked on this socket, or its sender runs
 * as our effective uid. */
static bool peer_ok(bool check, zmq_msg_t *m)
{
	uid_t uid;

	return !check || (peer_uid(m, &uid) == 0 && uid == geteuid());
}

static int send_text(void *sock, const char *text, int flags)
{
	for (;;) {
		if (zmq_send(sock, text, strlen(text), flags) >= 0)
			return 0;
		if (zmq_errno() != EINTR)
			return -zmq_errno();
	}
}

struct ctl_client *ctl_client_open(const char *endpoint, const char *name)
{
	struct ctl_client *self = calloc(1, sizeof *self);
	int linger = 200, hwm = 10000;

	if (!self)
		return NULL;
	self->last_step = -1;
	self->zctx = zmq_ctx_new();
	if (!self->zctx)
		goto fail;
	self->sock = zmq_socket(self->zctx, ZMQ_DEALER);
	if (!self->sock)
		goto fail;
	zmq_setsockopt(self->sock, ZMQ_ROUTING_ID, name, strlen(name));
	zmq_setsockopt(self->sock, ZMQ_LINGER, &linger, sizeof linger);
	zmq_setsockopt(self->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
	self->check_creds = !strncmp(endpoint, "ipc://", 6);
	if (zmq_connect(self->sock, endpoint) < 0) {
		log_error("control plane: connect %s: %s", endpoint, zmq_strerror(zmq_errno()));
		goto fail;
	}
	return self;
fail:
	ctl_client_close(&self);
	return NULL;
}

void ctl_client_close(struct ctl_client **self)
{
	if (!self || !*self)
		return;
	if ((*self)->sock)
		zmq_close((*self)->sock);
	if ((*self)->zctx)
		zmq_ctx_term((*self)->zctx);
	free(*self);
	*self = NULL;
}

/* Drain what the orchestrator sent; returns 1 when a "start" was seen. */
static int client_drain(struct ctl_client *self, int timeout_ms)
{
	zmq_pollitem_t it = { .socket = self->sock, .events = ZMQ_POLLIN };
	int started = 0;

	for (;;) {
		char buf[64];
		zmq_msg_t m;
		int n, rc = zmq_poll(&it, 1, timeout_ms);
		bool trusted;

		if (rc < 0) {
			if (zmq_errno() == EINTR && !ctl_signal_stop)
				continue;
			break;
		}
		if (rc == 0)
			break;
		zmq_msg_init(&m);
		n = zmq_msg_recv(&m, self->sock, ZMQ_DONTWAIT);
		if (n < 0) {
			zmq_msg_close(&m);
			break;
		}
		if (n > (int)sizeof buf - 1)
			n = (int)sizeof buf - 1;
		memcpy(buf, zmq_msg_data(&m), (size_t)n);
		buf[n] = '\0';
		trusted = peer_ok(self->check_creds, &m);
		zmq_msg_close(&m);
		if (!trusted) {
			/* Not our orchestrator (a socket swapped in by another user): ignore it. */
			if (!self->rejected++)
				log_warn("control plane: ignoring commands from a peer of another uid");
		} else if (!strcmp(buf, "stop")) {
			self->stop = true;
		} else if (!strncmp(buf, "start", 5) && (buf[5] == '\0' || buf[5] == ' ')) {
			char *end = buf + 5;
			long long origin = buf[5] ? strtoll(buf + 6, &end, 10) : 0;

			/* The run's clock starts when training starts, the same instant for all. */
			if (origin > 0)
				clock_set_origin_ns(origin);
			/* "start ORIGIN rejoin": the run began without this node (it restarts or
			 * joins late). */
			if (!strcmp(end, " rejoin"))
				self->rejoined = true;
			started = 1;
		}
		if (started || self->stop)
			timeout_ms = 0;
	}
	return started;
}

int ctl_client_ready_wait(struct ctl_client *self, int timeout_ms)
{
	int64_t deadline = clock_now_ns() + (int64_t)timeout_ms * 1000000LL;
	int rc = send_text(self->sock, "ready", 0);

	if (rc < 0)
		return rc;
	for (;;) {
		int64_t left_ms = (deadline - clock_now_ns()) / 1000000LL;

		if (ctl_signal_stop)
			self->stop = true;
		if (self->stop)
			return -ECANCELED;
		if (left_ms <= 0)
			return -ETIMEDOUT;
		if (client_drain(self, left_ms > 100 ? 100 : (int)left_ms))
			return self->stop ? -ECANCELED : 0;
	}
}

static const char *const STATE_NAMES[] = { "init", "run", "wait", "done" };

const char *ctl_state_name(enum ctl_state state)
{
	return (unsigned)state < sizeof STATE_NAMES / sizeof STATE_NAMES[0] ? STATE_NAMES[state] : "?";
}

int ctl_parse_status(const char *msg, struct ctl_status *out)
{
	const char *p = msg;
	int64_t step = 0;
	size_t n = 0;
	int state = -1;

	if (strncmp(p, "status ", 7))
		return -EINVAL;
	p += 7;
	/* STEP: digits only (no sign, no blank, no overflow), then one space */
	for (; p[n] >= '0' && p[n] <= '9'; n++) {
		int d = p[n] - '0';
		if (step > (INT64_MAX - d) / 10)
			return -EINVAL;
		step = step * 10 + d;
	}
	if (!n || p[n] != ' ' || (p[0] == '0' && n > 1))
		return -EINVAL;         /* no leading zero: the writer never puts one */
	p += n + 1;
	for (size_t k = 0; k < sizeof STATE_NAMES / sizeof STATE_NAMES[0]; k++) {
		size_t l = strlen(STATE_NAMES[k]);
		if (!strncmp(p, STATE_NAMES[k], l) && p[l] == ' ') {
			state = (int)k;
			p += l + 1;
			break;
		}
	}
	if (state < 0 || (p[0] != '0' && p[0] != '1') || p[1])
		return -EINVAL;
	*out = (struct ctl_status){ .step = step, .state = (enum ctl_state)state, .waiting = p[0] == '1' };
	return 0;
}

int ctl_client_status(struct ctl_client *self, int64_t step, enum ctl_state state, bool waiting)
{
	int64_t now = clock_now_ns();
	char msg[96];
	int rc;

	if (state == self->last_state && waiting == self->last_waiting &&
	    now - self->last_status_ns < CTL_STATUS_MIN_NS)
		return 0;
	self->last_status_ns = now;
	self->last_step = step;
	self->last_state = state;
	self->last_waiting = waiting;
	snprintf(msg, sizeof msg, "status %lld %s %d", (long long)step, ctl_state_name(state), waiting ? 1 : 0);
	rc = send_text(self->sock, msg, ZMQ_DONTWAIT);
	return rc == -EAGAIN ? 0 : rc; /* a full queue only loses a progress sample */
}

int ctl_client_done(struct ctl_client *self)
{
	return send_text(self->sock, "done", 0);
}

bool ctl_client_rejoined(const struct ctl_client *self)
{
	return self->rejoined;
}

bool ctl_client_should_stop(struct ctl_client *self)
{
	if (ctl_signal_stop)
		self->stop = true;
	if (!self->stop)
		client_drain(self, 0);
	return self->stop;
}

/* --- server -------------------------------------------------------------------------- */

struct ctl_server *ctl_server_open(const char *endpoint)
{
	struct ctl_server *self = calloc(1, sizeof *self);
	int linger = 0, hwm = 100000, mandatory = 0, rc;
	mode_t old_mask = 0;
	bool ipc;

	if (!self)
		return NULL;
	self->zctx = zmq_ctx_new();
	if (!self->zctx)
		goto fail;
	self->sock = zmq_socket(self->zctx, ZMQ_ROUTER);
	if (!self->sock)
		goto fail;
	zmq_setsockopt(self->sock, ZMQ_LINGER, &linger, sizeof linger);
	zmq_setsockopt(self->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
	zmq_setsockopt(self->sock, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory);
	ipc = !strncmp(endpoint, "ipc://", 6);
	/* libzmq binds and listens inside zmq_bind for ipc: the file must be born 0600, or a
	 * local user could connect between bind and a later chmod. umask is per process; the
	 * orchestrator binds before it starts any thread of its own. */
	if (ipc)
		old_mask = umask(0177);
	rc = zmq_bind(self->sock, endpoint);
	if (ipc)
		umask(old_mask);
	if (rc < 0) {
		log_error("control plane: bind %s: %s", endpoint, zmq_strerror(zmq_errno()));
		goto fail;
	}
	if (ipc) {
		snprintf(self->path, sizeof self->path, "%s", endpoint + 6);
		self->check_creds = true;
	}
	return self;
fail:
	ctl_server_close(&self);
	return NULL;
}

void ctl_server_close(struct ctl_server **self)
{
	if (!self || !*self)
		return;
	if ((*self)->sock)
		zmq_close((*self)->sock);
	if ((*self)->zctx)
		zmq_ctx_term((*self)->zctx);
	if ((*self)->path[0])
		unlink((*self)->path);
	free(*self);
	*self = NULL;
}

/* Receive and discard what is left of a multipart message. */
static void drain_frames(void *sock)
{
	int more = 0;
	size_t sz = sizeof more;

	while (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
		char junk[16];

		if (zmq_recv(sock, junk, sizeof junk, 0) < 0)
			break;
	}
}

int ctl_server_recv(struct ctl_server *self, char *node, size_t nodelen, char *msg, size_t msglen,
		    int timeout_ms)
{
	zmq_pollitem_t it = { .socket = self->sock, .events = ZMQ_POLLIN };
	int64_t deadline = clock_now_ns() + (int64_t)timeout_ms * 1000000LL;

	for (;;) {
		int wait_ms = timeout_ms, rc, n, more = 0;
		size_t sz = sizeof more;
		zmq_msg_t body;
		bool trusted;

		if (timeout_ms > 0) {
			int64_t left = deadline - clock_now_ns();

			wait_ms = left <= 0 ? 0 : (int)((left + 999999) / 1000000);
		}
		rc = zmq_poll(&it, 1, wait_ms);
		if (rc < 0)
			return -zmq_errno();
		if (rc == 0)
			return 0;
		n = zmq_recv(self->sock, node, nodelen - 1, ZMQ_DONTWAIT);
		if (n < 0)
			return -zmq_errno();
		node[(size_t)n < nodelen - 1 ? (size_t)n : nodelen - 1] = '\0';
		zmq_getsockopt(self->sock, ZMQ_RCVMORE, &more, &sz);
		if (!more)
			return 0;
		/* The body frame carries the connection's metadata (the identity frame ROUTER
		 * makes up for a peer that set its own routing id has none). */
		zmq_msg_init(&body);
		n = zmq_msg_recv(&body, self->sock, 0);
		if (n < 0) {
			rc = -zmq_errno();
			zmq_msg_close(&body);
			return rc;
		}
		trusted = peer_ok(self->check_creds, &body);
		if ((size_t)n > msglen - 1)
			n = (int)(msglen - 1);
		memcpy(msg, zmq_msg_data(&body), (size_t)n);
		msg[n] = '\0';
		zmq_msg_close(&body);
		/* Discard any unexpected extra frames. */
		drain_frames(self->sock);
		if (trusted)
			return 1;
		/* Only root can reach the socket (0600 in a 0700 directory); anyone else got
		 * there through a mistake: drop what they say, and say so once. */
		if (!self->rejected++)
			log_warn("control plane: dropping messages from a peer of another uid "
				 "(as node '%s')", node);
		node[0] = msg[0] = '\0';
		if (timeout_ms == 0)
			return 0;
	}
}

uint64_t ctl_server_rejected(const struct ctl_server *self)
{
	return self->rejected;
}

int ctl_server_send(struct ctl_server *self, const char *node, const char *msg)
{
	int rc = zmq_send(self->sock, node, strlen(node), ZMQ_SNDMORE | ZMQ_DONTWAIT);

	if (rc < 0)
		return -zmq_errno();
	return send_text(self->sock, msg, ZMQ_DONTWAIT);
}

int ctl_endpoint_for(const char *run_dir, const char *tag, char *out, size_t outlen)
{
	uint32_t h = 2166136261u;
	int rc = rtdir_ensure();

	if (rc < 0)
		return rc;
	/* FNV-1a of the run directory: two runs that share a tag cannot share a socket. */
	for (const char *p = run_dir; p && *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	/* sun_path holds 108 bytes including the NUL. */
	if (strlen(rtdir_path()) + strlen("/ctl--12345678.sock") + strlen(tag) >= 108)
		return -ENAMETOOLONG;
	if ((size_t)snprintf(out, outlen, "ipc://%s/ctl-%s-%08x.sock", rtdir_path(), tag, h) >= outlen)
		return -ENAMETOOLONG;
	return 0;
}
