/* lib/ctl: see ctl.h. The control plane is deliberately tiny and text-based: a human can watch
 * it with any ZeroMQ tool, and a node that dies mid-message cannot corrupt the orchestrator's
 * view (ROUTER drops partial multipart messages). */
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
};

struct ctl_server {
	void *zctx;
	void *sock;
	char path[256];
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
		int n, rc = zmq_poll(&it, 1, timeout_ms);

		if (rc < 0) {
			if (zmq_errno() == EINTR && !ctl_signal_stop)
				continue;
			break;
		}
		if (rc == 0)
			break;
		n = zmq_recv(self->sock, buf, sizeof buf - 1, ZMQ_DONTWAIT);
		if (n < 0)
			break;
		buf[n < (int)sizeof buf - 1 ? n : (int)sizeof buf - 1] = '\0';
		if (!strcmp(buf, "stop")) {
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

int ctl_client_status(struct ctl_client *self, int64_t step, enum ctl_state state, bool waiting)
{
	static const char *names[] = { "init", "run", "wait", "done" };
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
	snprintf(msg, sizeof msg, "status %lld %s %d", (long long)step, names[state], waiting ? 1 : 0);
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
	int linger = 0, hwm = 100000, mandatory = 0;

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
	if (zmq_bind(self->sock, endpoint) < 0) {
		log_error("control plane: bind %s: %s", endpoint, zmq_strerror(zmq_errno()));
		goto fail;
	}
	if (!strncmp(endpoint, "ipc://", 6)) {
		snprintf(self->path, sizeof self->path, "%s", endpoint + 6);
		chmod(self->path, 0600);
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

int ctl_server_recv(struct ctl_server *self, char *node, size_t nodelen, char *msg, size_t msglen,
		    int timeout_ms)
{
	zmq_pollitem_t it = { .socket = self->sock, .events = ZMQ_POLLIN };
	int rc = zmq_poll(&it, 1, timeout_ms);
	int n, more;
	size_t sz = sizeof more;

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
	n = zmq_recv(self->sock, msg, msglen - 1, 0);
	if (n < 0)
		return -zmq_errno();
	msg[(size_t)n < msglen - 1 ? (size_t)n : msglen - 1] = '\0';
	/* Discard any unexpected extra frames. */
	while (zmq_getsockopt(self->sock, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
		char junk[16];
		if (zmq_recv(self->sock, junk, sizeof junk, 0) < 0)
			break;
	}
	return 1;
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
	/* sun_path holds 108 bytes including the NUL. */
	if (strlen(run_dir) + strlen("/ctl.sock") < 100) {
		if ((size_t)snprintf(out, outlen, "ipc://%s/ctl.sock", run_dir) >= outlen)
			return -ENAMETOOLONG;
		return 0;
	}
	mkdir("/run/stalenet", 0700);
	if ((size_t)snprintf(out, outlen, "ipc:///run/stalenet/ctl-%s.sock", tag) >= outlen)
		return -ENAMETOOLONG;
	return 0;
}
