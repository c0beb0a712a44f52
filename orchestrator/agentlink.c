/* orchestrator/agentlink: see agentlink.h. */
#include "orchestrator/agentlink.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/fdio.h"
#include "lib/ctl.h"
#include "lib/version.h"
#include "orchestrator/agent.h"

struct agentlink {
	pid_t pid;
	int to_fd, from_fd, err_fd;
	char name[64], dest[160];
	char remote_host[64];
	char prog[16];                  /* "ssh" or the launcher's program, for messages */
	char buf[AGENT_LINE_MAX];       /* bytes read: buf[off, have) not yet returned as lines */
	size_t off, have;
	char errtext[1024];             /* ssh's stderr, as much as fits */
	size_t errlen;
	char agent_path[1100];
	int timeout_ms;
	int64_t deadline_ms;            /* of the greeting */
	int64_t last_read_ns;           /* when the latest bytes from the agent were read */
	char *aside;                    /* lines set aside during clock exchanges, returned first: */
	size_t aside_off, aside_len;    /* aside[aside_off, aside_len) not yet returned */
	size_t aside_cap;
	/* bytes for the agent that its pipe did not take yet: out[out_off, out_len), written
	 * (non-blocking) before anything sent later; out_err is sticky (a line lost or the pipe
	 * broken: nothing more can be said in order) */
	char *out;
	size_t out_off, out_len, out_cap;
	int64_t out_moved_ns;           /* when the queue became non-empty or last shrank */
	int out_err;
	/* background clock exchanges (agentlink_clock_begin): the one sent and not answered yet is
	 * stamped ex_t1; ex_left more follow it, each sent when the one before is answered */
	bool ex_active, ex_pending;     /* a batch under way; an answer awaited */
	int64_t ex_t1;
	size_t ex_left, ex_got;
	struct clocksync_sample ex_s[AGENTLINK_CLOCK_BATCH_MAX];
};

#define ASIDE_MAX (4u << 20)    /* lines set aside, at most (bytes) */

static bool path_ok(const char *p)
{
	if (!p || p[0] != '/' || strlen(p) > 1024)
		return false;
	for (; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '/' || *p == '.' || *p == '_' || *p == '-'))
			return false;
	return true;
}

static int64_t now_ms(void)
{
	return clock_now_ns() / 1000000;
}

/* Whatever ssh wrote to stderr so far (non-blocking): the last sizeof errtext - 1 bytes are
 * kept for error messages, the rest read and dropped so the remote side never blocks on it. */
static void drain_stderr(struct agentlink *self)
{
	char tmp[4096];
	while (self->err_fd >= 0) {
		ssize_t r = read(self->err_fd, tmp, sizeof tmp);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		size_t cap = sizeof self->errtext - 1, n = (size_t)r;
		if (n >= cap) {
			memcpy(self->errtext, tmp + n - cap, cap);
			self->errlen = cap;
		} else {
			if (self->errlen + n > cap) {
				size_t drop = self->errlen + n - cap;
				memmove(self->errtext, self->errtext + drop, self->errlen - drop);
				self->errlen -= drop;
			}
			memcpy(self->errtext + self->errlen, tmp, n);
			self->errlen += n;
		}
	}
	self->errtext[self->errlen] = 0;
}

/* The last non-empty line of ssh's stderr, or "" */
static const char *last_err_line(struct agentlink *self)
{
	drain_stderr(self);
	char *t = self->errtext;
	size_t n = strlen(t);
	while (n && (t[n - 1] == '\n' || t[n - 1] == '\r'))
		t[--n] = 0;
	char *nl = strrchr(t, '\n');
	char *line = nl ? nl + 1 : t;
	for (char *p = line; *p; p++)
		if ((unsigned char)*p < ' ' || *p == 0x7f)
			*p = '?';
	return line;
}

/* One line from the agent into line (without newline) by deadline_ms; *t_ns = when it was
 * complete. The answers to background clock exchanges are taken on the way (never returned).
 * Returns 0, -ETIMEDOUT, -EPIPE (closed), -EPROTO (too long) or -errno. */
static int read_line_raw(struct agentlink *self, char *line, size_t len, int64_t deadline_ms, int64_t *t_ns);
static int flush_out(struct agentlink *self);
static int write_line(struct agentlink *self, const char *line, size_t len);

/* The next line: one set aside by agentlink_clock_refresh first, else from the channel. A line
 * taken moves aside_off past it (no copy of the rest: many lines set aside cost linear time). */
static int read_line(struct agentlink *self, char *line, size_t len, int64_t deadline_ms, int64_t *t_ns)
{
	if (self->aside_off < self->aside_len) {
		const char *a = self->aside + self->aside_off;
		size_t rest = self->aside_len - self->aside_off;
		const char *nl = memchr(a, '\n', rest);
		size_t l = nl ? (size_t)(nl - a) : rest;
		if (l >= len)
			return -EPROTO;
		memcpy(line, a, l);
		line[l] = 0;
		self->aside_off += l + (nl != NULL);
		if (self->aside_off == self->aside_len)
			self->aside_off = self->aside_len = 0;
		return 0;
	}
	return read_line_raw(self, line, len, deadline_ms, t_ns);
}

/* One line, as read_line_raw but for the clock answers. Lines are taken from buf by moving off
 * past them; the rest moves to the front only before a read(2), so a chunk of many lines costs
 * time linear in its size, not lines times size. While it waits, what is queued for the agent
 * is written as its pipe takes it (a request's answer may wait for the request's tail). */
static int read_line_one(struct agentlink *self, char *line, size_t len, int64_t deadline_ms, int64_t *t_ns)
{
	size_t scanned = self->off;     /* buf[off, scanned) holds no newline */
	for (;;) {
		char *nl = memchr(self->buf + scanned, '\n', self->have - scanned);
		if (nl) {
			size_t l = (size_t)(nl - (self->buf + self->off));
			if (l >= len)
				return -EPROTO;
			memcpy(line, self->buf + self->off, l);
			line[l] = 0;
			self->off += l + 1;
			if (self->off == self->have)
				self->off = self->have = 0;
			return 0;
		}
		scanned = self->have;
		if (self->off) {
			memmove(self->buf, self->buf + self->off, self->have - self->off);
			self->have -= self->off;
			scanned -= self->off;
			self->off = 0;
		}
		if (self->have == sizeof self->buf)
			return -EPROTO;
		/* past the deadline, still one look without waiting: a timeout of 0 is a try */
		int64_t left = deadline_ms - now_ms();
		if (left < 0)
			left = 0;
		/* a write error is the reader's too (the agent is gone), but the lines it sent before
		 * are still read: the error is left for the next send or agentlink_flush */
		flush_out(self);
		bool out = self->out_off < self->out_len && !self->out_err;
		struct pollfd p[3] = { { .fd = self->from_fd, .events = POLLIN }, { .fd = self->err_fd, .events = POLLIN },
				       { .fd = self->to_fd, .events = POLLOUT } };
		if (self->err_fd < 0)
			p[1].fd = -1;   /* poll skips it */
		int r = poll(p, out ? 3 : 2, (int)(left > 1000 ? 1000 : left));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0 && left == 0)
			return -ETIMEDOUT;
		if (self->err_fd >= 0 && (p[1].revents & (POLLIN | POLLHUP))) {
			size_t before = self->errlen;
			drain_stderr(self);
			if (self->errlen == before && (p[1].revents & POLLHUP)) {
				close(self->err_fd);
				self->err_fd = -1;
			}
		}
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;       /* (a writable pipe: the queue is flushed at the loop's top) */
		ssize_t got = read(self->from_fd, self->buf + self->have, sizeof self->buf - self->have);
		*t_ns = self->last_read_ns = clock_now_ns();
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return -EPIPE;
		self->have += (size_t)got;
	}
}

/* Whether line is the answer to the background exchange awaited. If so it is taken: its sample
 * kept while the batch is under way (stamped t4 at the read that brought it in, never before
 * its arrival) and the batch's next exchange sent at once. */
static bool take_clock_answer(struct agentlink *self, const char *line)
{
	int64_t t2, t3;
	if (!self->ex_pending || agentlink_parse_time(line, self->ex_t1, &t2, &t3))
		return false;
	self->ex_pending = false;
	if (self->ex_active && self->ex_got < AGENTLINK_CLOCK_BATCH_MAX)
		self->ex_s[self->ex_got++] = (struct clocksync_sample){ self->ex_t1, t2, t3, self->last_read_ns };
	if (self->ex_active && self->ex_left) {
		char req[64];
		self->ex_left--;
		self->ex_t1 = clock_now_ns();
		int l = snprintf(req, sizeof req, "time %" PRId64 "\n", self->ex_t1);
		self->ex_pending = write_line(self, req, (size_t)l) == 0;
		if (!self->ex_pending)
			self->ex_left = 0;
	}
	return true;
}

static int read_line_raw(struct agentlink *self, char *line, size_t len, int64_t deadline_ms, int64_t *t_ns)
{
	int rc;
	while (!(rc = read_line_one(self, line, len, deadline_ms, t_ns)) && take_clock_answer(self, line))
		;
	return rc;
}

/* One write(2) of buf, non-blocking. A write to a dead agent's pipe must be an error, not a
 * SIGPIPE that kills the orchestrator: SIGPIPE is blocked around the write and a pending one
 * consumed (the caller's disposition and mask are left as they were). Returns the bytes
 * written (0: the pipe is full) or -errno. */
static ssize_t write_some(int fd, const char *buf, size_t len)
{
	sigset_t pipe_set, old, pend;
	bool was_pending = false;
	ssize_t w;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	if (sigpending(&pend) == 0)
		was_pending = sigismember(&pend, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	while ((w = write(fd, buf, len)) < 0 && errno == EINTR)
		;
	int e = w < 0 ? errno : 0;
	if (e == EPIPE && !was_pending) {
		const struct timespec zero = { 0, 0 };
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e == EAGAIN || e == EWOULDBLOCK)
		return 0;
	return e ? -e : w;
}

/* As much of the queue as the pipe takes now. Returns 0 or the sticky error. */
static int flush_out(struct agentlink *self)
{
	if (self->out_err)
		return self->out_err;
	while (self->out_off < self->out_len) {
		ssize_t w = write_some(self->to_fd, self->out + self->out_off, self->out_len - self->out_off);
		if (w < 0)
			return self->out_err = (int)w;
		if (w == 0)
			break;
		self->out_off += (size_t)w;
		self->out_moved_ns = clock_now_ns();
	}
	if (self->out_off == self->out_len)
		self->out_off = self->out_len = 0;
	return 0;
}

/* Send line (len bytes, newline included) after what is queued: written at once when the queue
 * is empty and the pipe takes it, the rest queued. Never waits. Returns 0, -ENOBUFS (the
 * queue would pass AGENTLINK_OUT_MAX: the line is lost, so the link is broken), -EPIPE or
 * -errno; an error sticks. */
static int write_line(struct agentlink *self, const char *line, size_t len)
{
	int rc;

	if (self->to_fd < 0)
		return -EPIPE;
	if ((rc = flush_out(self)))
		return rc;
	if (self->out_len == 0) {
		ssize_t w = write_some(self->to_fd, line, len);
		if (w < 0)
			return self->out_err = (int)w;
		line += w;
		len -= (size_t)w;
		if (!len)
			return 0;
		self->out_moved_ns = clock_now_ns();
	}
	if (self->out_off) {
		memmove(self->out, self->out + self->out_off, self->out_len - self->out_off);
		self->out_len -= self->out_off;
		self->out_off = 0;
	}
	if (self->out_len + len > AGENTLINK_OUT_MAX)
		return self->out_err = -ENOBUFS;
	if (self->out_len + len > self->out_cap) {
		size_t cap = self->out_cap ? self->out_cap : 4096;
		while (cap < self->out_len + len)
			cap *= 2;
		char *o = realloc(self->out, cap);
		if (!o)
			return self->out_err = -ENOMEM;
		self->out = o;
		self->out_cap = cap;
	}
	memcpy(self->out + self->out_len, line, len);
	self->out_len += len;
	return 0;
}

/* SIGKILL to the launched program and whatever it started in its process group (its own, see
 * agentlink_start); to it alone when it has no group of its own (setpgid failed). Called only
 * before the program is reaped, so the group's number is still its and no other. */
static void kill_group(pid_t pid, bool alive)
{
	if (getpgid(pid) == pid && kill(-pid, SIGKILL) == 0)
		return;
	if (alive)
		kill(pid, SIGKILL);
}

/* Wait for ssh to end by deadline (on a pidfd, so no polling loop); kill it after. Either way
 * its process group is killed before it is reaped: it no longer shares ours, so nothing else
 * ends what it may have left there. Returns its exit code or -ETIMEDOUT. */
static int reap(pid_t pid, int timeout_ms)
{
	int st, pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd >= 0) {
		struct pollfd p = { .fd = pfd, .events = POLLIN };
		int64_t deadline = now_ms() + timeout_ms;
		for (;;) {
			int64_t left = deadline - now_ms();
			if (left <= 0 || poll(&p, 1, (int)left) != -1 || errno != EINTR)
				break;
		}
		close(pfd);
	}
	/* ended (a zombie, still holding its pid and group) or not: looked at without reaping */
	siginfo_t si;
	int r;
	memset(&si, 0, sizeof si);
	while ((r = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT)) < 0 && errno == EINTR)
		;
	if (r < 0)
		return -errno;
	bool ended = si.si_pid == pid;
	kill_group(pid, !ended);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!ended)
		return -ETIMEDOUT;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void link_free(struct agentlink *self)
{
	if (self->to_fd >= 0)
		close(self->to_fd);
	if (self->from_fd >= 0)
		close(self->from_fd);
	if (self->err_fd >= 0)
		close(self->err_fd);
	free(self->aside);
	free(self->out);
	free(self);
}

struct agentlink *agentlink_start(const struct agentlink_opts *o, char *err, size_t errlen)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, er[2] = { -1, -1 };
	struct agentlink *self = calloc(1, sizeof *self);
	const char *argv[32];
	char ct[32], idopt[1100], khopt[1100];
	size_t a = 0;

	if (!self) {
		snprintf(err, errlen, "host %s: out of memory", o->host_name);
		return NULL;
	}
	self->pid = -1;
	self->to_fd = self->from_fd = self->err_fd = -1;
	snprintf(self->name, sizeof self->name, "%s", o->host_name);
	snprintf(self->dest, sizeof self->dest, "%s", o->ssh_dest);
	if (!path_ok(o->agent_path) || (o->identity && !path_ok(o->identity)) ||
	    (o->known_hosts && !path_ok(o->known_hosts)) || o->ssh_dest[0] == '-' || o->timeout_ms <= 0) {
		snprintf(err, errlen, "host %s (%s): the agent, identity and known-hosts paths must be absolute "
			 "paths of letters, digits, '/', '.', '_', '-'", self->name, self->dest);
		goto fail;
	}
	snprintf(ct, sizeof ct, "ConnectTimeout=%d", (o->timeout_ms + 999) / 1000);
	argv[a++] = o->ssh_program ? o->ssh_program : "ssh";
	argv[a++] = "-T";
	argv[a++] = "-o";
	argv[a++] = "BatchMode=yes";
	argv[a++] = "-o";
	argv[a++] = ct;
	argv[a++] = "-o";
	argv[a++] = "LogLevel=ERROR";
	if (o->identity) {
		snprintf(idopt, sizeof idopt, "IdentityFile=%s", o->identity);
		argv[a++] = "-o";
		argv[a++] = idopt;
		argv[a++] = "-o";
		argv[a++] = "IdentitiesOnly=yes";
	}
	if (o->known_hosts) {
		snprintf(khopt, sizeof khopt, "UserKnownHostsFile=%s", o->known_hosts);
		argv[a++] = "-o";
		argv[a++] = khopt;
		argv[a++] = "-o";
		argv[a++] = "StrictHostKeyChecking=yes";
	}
	argv[a++] = "--";
	argv[a++] = o->ssh_dest;
	argv[a++] = o->agent_path;
	argv[a++] = "agent";
	argv[a] = NULL;
	const char *const *run_argv = o->launch_argv ? o->launch_argv : argv;
	const char *base = strrchr(run_argv[0], '/');
	snprintf(self->prog, sizeof self->prog, "%s", base ? base + 1 : run_argv[0]);

	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(er, O_CLOEXEC | O_NONBLOCK)) {
		snprintf(err, errlen, "host %s: pipe: %s", self->name, strerror(errno));
		goto fail;
	}
	pid_t parent = getpid(), pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "host %s: fork: %s", self->name, strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		/* child: a process group of its own, so a terminal's Ctrl-C (SIGINT to the
		 * foreground group) reaches the orchestrator alone, which then stops the run over
		 * this channel, still open, as for a SIGINT sent to it alone (the parent sets the
		 * group too, so it exists whichever of the two runs first). ssh dies with us; its
		 * stdio are the three pipes. A launcher argv (srun) is not signalled: a signalled
		 * srun cancels its step, whose agent may then be killed before it tore its share
		 * down, while the end of its stdin (our pipe closes when we die) reaches the agent
		 * as end of input, as over ssh, and srun ends with the step */
		setpgid(0, 0);
		if (!o->launch_argv && (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent))
			_exit(127);
		int fl = fcntl(er[1], F_GETFL);
		if (fl >= 0)
			fcntl(er[1], F_SETFL, fl & ~O_NONBLOCK);
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(er[1], 2) < 0)
			_exit(127);
		execvp(run_argv[0], (char *const *)run_argv);
		dprintf(2, "exec %s: %s\n", run_argv[0], strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid);      /* EACCES once it has exec'd: it did so itself before */
	self->pid = pid;
	close(in[0]);
	close(out[1]);
	close(er[1]);
	in[0] = out[1] = er[1] = -1;
	self->to_fd = in[1];
	/* never a blocking write to the agent (a hung host whose pipe and channel are full would
	 * hold the orchestrator): what the pipe does not take is queued (write_line). Our end's
	 * own open file, not shared with the child's read end */
	int fl = fcntl(self->to_fd, F_GETFL);
	if (fl < 0 || fcntl(self->to_fd, F_SETFL, fl | O_NONBLOCK) < 0)
		self->out_err = -errno;
	self->from_fd = out[0];
	self->err_fd = er[0];
	in[1] = out[0] = er[0] = -1;
	snprintf(self->agent_path, sizeof self->agent_path, "%s", o->agent_path);
	self->timeout_ms = o->timeout_ms;
	self->deadline_ms = now_ms() + o->timeout_ms;
	return self;
fail:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
		if (er[i] >= 0)
			close(er[i]);
	}
	link_free(self);
	return NULL;
}

/* A word of [!-~] (at most len - 1 characters, else -EPROTO unless truncate) at *p into out;
 * *p moves past it and one following space. */
static int word(const char **p, char *out, size_t len, bool truncate)
{
	const char *s = *p;
	size_t n = 0;

	while (s[n] > ' ' && s[n] <= '~')
		n++;
	if (!n || (n >= len && !truncate) || (s[n] && s[n] != ' '))
		return -EPROTO;
	snprintf(out, len, "%.*s", (int)n, s);
	*p = s + n + (s[n] == ' ');
	return 0;
}

/* A decimal integer in [lo, hi] at *p, ended by a space (passed) or the end of the line. */
static int integer(const char **p, int64_t lo, int64_t hi, int64_t *v)
{
	const char *s = *p;
	char *end;
	long long x;

	if (!((*s >= '0' && *s <= '9') || (*s == '-' && s[1] >= '0' && s[1] <= '9')))
		return -EPROTO;
	errno = 0;
	x = strtoll(s, &end, 10);
	if (errno || x < lo || x > hi || (*end && *end != ' '))
		return -EPROTO;
	*v = x;
	*p = end + (*end == ' ');
	return 0;
}

int agentlink_parse_greeting(const char *line, struct agentlink_greeting *g)
{
	const char *p = line;
	int64_t proto, uid;

	memset(g, 0, sizeof *g);
	if (strncmp(p, "stalenet-agent ", 15))
		return -EPROTO;
	p += 15;
	if (integer(&p, INT32_MIN, INT32_MAX, &proto) || word(&p, g->version, sizeof g->version, false) ||
	    word(&p, g->commit, sizeof g->commit, false) || integer(&p, 0, UINT32_MAX, &uid) ||
	    word(&p, g->host, sizeof g->host, true))
		return -EPROTO;
	g->proto = (int)proto;
	g->uid = (unsigned)uid;
	return 0;
}

int agentlink_parse_time(const char *line, int64_t t1, int64_t *t2, int64_t *t3)
{
	const char *p = line;
	int64_t e1;

	if (strncmp(p, "time ", 5))
		return -EPROTO;
	p += 5;
	if (integer(&p, INT64_MIN, INT64_MAX, &e1) || e1 != t1 || integer(&p, INT64_MIN, INT64_MAX, t2) ||
	    integer(&p, INT64_MIN, INT64_MAX, t3) || *p || p[-1] == ' ')
		return -EPROTO;
	return 0;
}

/* A word of [A-Za-z0-9_.-] (an interface or namespace name), at most len - 1 characters. */
static int name_word(const char **p, char *out, size_t len)
{
	if (word(p, out, len, false))
		return -EPROTO;
	for (const char *c = out; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
		      *c == '.' || *c == '-'))
			return -EPROTO;
	return 0;
}

int agentlink_parse_built(const char *line, struct agentlink_built *b)
{
	const char *p = line;
	int64_t m, um;

	memset(b, 0, sizeof *b);
	if (strncmp(p, "ok ", 3))
		return -EPROTO;
	p += 3;
	if (name_word(&p, b->switch_netns, sizeof b->switch_netns) || integer(&p, 576, 65535, &m) ||
	    name_word(&p, b->underlay_if, sizeof b->underlay_if) || integer(&p, 576, INT32_MAX, &um) || *p ||
	    p[-1] == ' ' || m > um)
		return -EPROTO;
	b->node_mtu = (int)m;
	b->underlay_mtu = (int)um;
	return 0;
}

int agentlink_parse_probe(const char *line, const char *addr, int count, struct agentlink_probe *pr)
{
	const char *p = line;
	char a[16];
	int64_t got;

	memset(pr, 0, sizeof *pr);
	if (strncmp(p, "probe ", 6))
		return -EPROTO;
	p += 6;
	if (word(&p, a, sizeof a, false) || strcmp(a, addr) || integer(&p, 1, count, &got) ||
	    integer(&p, 1, 60000000000LL, &pr->min_ns) || integer(&p, pr->min_ns, 60000000000LL, &pr->median_ns) ||
	    *p || p[-1] == ' ')
		return -EPROTO;
	pr->got = (int)got;
	return 0;
}

int agentlink_parse_event(const char *line, struct agentlink_event *ev)
{
	const char *p = line, *w;
	int64_t v;

	memset(ev, 0, sizeof *ev);
	if (strncmp(p, "ev ", 3))
		return -EPROTO;
	p += 3;
	if (word(&p, ev->name, sizeof ev->name, false) || !*p)
		return -EPROTO;
	ev->what = w = p;
	if (!strcmp(w, "ready")) {
		ev->kind = AGENTLINK_EV_READY;
	} else if (!strncmp(w, "status ", 7)) {
		/* "status STEP STATE W": the node's own line (lib/ctl), relayed */
		struct ctl_status st;
		if (!ctl_parse_status(w, &st)) {
			ev->kind = AGENTLINK_EV_STATUS;
			ev->step = st.step;
			ev->waiting = st.waiting;
			snprintf(ev->state, sizeof ev->state, "%s", ctl_state_name(st.state));
		}
	} else if (!strncmp(w, "exit ", 5)) {
		/* "exit STATUS" or "exit -1 WHY" */
		w += 5;
		if (!integer(&w, INT32_MIN, INT32_MAX, &v)) {
			ev->kind = AGENTLINK_EV_EXIT;
			ev->status = (int)v;
		}
	}
	return 0;
}

int agentlink_ready(struct agentlink **selfp, char *err, size_t errlen)
{
	struct agentlink *self = *selfp;
	char line[AGENT_LINE_MAX];
	int64_t t;
	int rc = read_line(self, line, sizeof line, self->deadline_ms, &t);
	if (rc) {
		const char *why = last_err_line(self);
		if (rc == -ETIMEDOUT) {
			kill_group(self->pid, true);
			reap(self->pid, 1000);
			snprintf(err, errlen, "host %s (%s): no answer within %d ms%s%s", self->name, self->dest,
				 self->timeout_ms, *why ? ": " : "", why);
		} else {
			int code = reap(self->pid, 2000);
			if (code == 127 || strstr(why, "not found") || strstr(why, "No such file"))
				snprintf(err, errlen, "host %s (%s): %s not found there (%s)", self->name, self->dest,
					 self->agent_path, *why ? why : "exit 127");
			else
				snprintf(err, errlen, "host %s (%s): %s failed (exit %d)%s%s", self->name, self->dest, self->prog,
					 code, *why ? ": " : "", why);
		}
		self->pid = -1;
		goto fail_free;
	}
	struct agentlink_greeting g;
	if (agentlink_parse_greeting(line, &g)) {
		snprintf(err, errlen, "host %s (%s): not a stalenet agent of protocol %d (it said: %.80s)", self->name,
			 self->dest, AGENT_PROTO, line);
		goto fail_kill;
	}
	if (g.proto != AGENT_PROTO) {
		/* an older or newer agent would misread the other's lines (protocol 5 sends files whole) */
		snprintf(err, errlen, "host %s (%s): its agent speaks protocol %d, this orchestrator %d (stalenet %s there, "
			 "%s here): install the same build on every host", self->name, self->dest, g.proto, AGENT_PROTO,
			 g.version, version_release());
		goto fail_kill;
	}
	if (strcmp(g.version, version_release()) || strcmp(g.commit, version_commit())) {
		snprintf(err, errlen, "host %s (%s): version mismatch: agent %s (%s), here %s (%s)", self->name, self->dest,
			 g.version, g.commit, version_release(), version_commit());
		goto fail_kill;
	}
	if (g.uid != 0) {
		snprintf(err, errlen, "host %s (%s): the agent runs as uid %u, not root (it builds namespaces)",
			 self->name, self->dest, g.uid);
		goto fail_kill;
	}
	snprintf(self->remote_host, sizeof self->remote_host, "%s", g.host);
	return 0;

fail_kill:
	kill_group(self->pid, true);
	reap(self->pid, 1000);
	self->pid = -1;
	rc = -EPROTO;
fail_free:
	link_free(self);
	*selfp = NULL;
	return rc ? rc : -EPROTO;
}

struct agentlink *agentlink_open(const struct agentlink_opts *o, char *err, size_t errlen)
{
	struct agentlink *self = agentlink_start(o, err, errlen);
	if (self && agentlink_ready(&self, err, errlen))
		return NULL;
	return self;
}

const char *agentlink_remote_hostname(const struct agentlink *self)
{
	return self->remote_host;
}

int agentlink_clock(struct agentlink *self, size_t n, struct clocksync_sample *samples,
		    struct clocksync_estimate *out, int timeout_ms, char *err, size_t errlen)
{
	struct clocksync_sample *s = samples ? samples : calloc(n ? n : 1, sizeof *s);
	int64_t deadline = now_ms() + timeout_ms;
	char req[64], line[AGENT_LINE_MAX];
	int rc = 0;

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int64_t t1 = clock_now_ns(), t4 = 0, e2, e3;
		int l = snprintf(req, sizeof req, "time %" PRId64 "\n", t1);
		if ((rc = write_line(self, req, (size_t)l)) || (rc = read_line(self, line, sizeof line, deadline, &t4))) {
			snprintf(err, errlen, "host %s (%s): clock exchange %zu: %s", self->name, self->dest, i,
				 rc == -ETIMEDOUT ? "no answer in time" : strerror(-rc));
			goto out;
		}
		if (agentlink_parse_time(line, t1, &e2, &e3)) {
			snprintf(err, errlen, "host %s (%s): bad clock answer '%.80s'", self->name, self->dest, line);
			rc = -EPROTO;
			goto out;
		}
		s[i] = (struct clocksync_sample){ t1, e2, e3, t4 };
	}
	if ((rc = clocksync_estimate(s, n, out)))
		snprintf(err, errlen, "host %s (%s): no valid clock exchange", self->name, self->dest);
out:
	if (s != samples)
		free(s);
	return rc;
}

/* Append line and a newline to the lines set aside. The lines already returned are dropped
 * first (only the first append after agentlink_recv took some moves the rest); the buffer
 * grows by doubling. Returns 0, -ENOBUFS (ASIDE_MAX reached) or -ENOMEM. */
static int aside_put(struct agentlink *self, const char *line)
{
	size_t ll = strlen(line), need;
	if (self->aside_off) {
		memmove(self->aside, self->aside + self->aside_off, self->aside_len - self->aside_off);
		self->aside_len -= self->aside_off;
		self->aside_off = 0;
	}
	need = self->aside_len + ll + 1;
	if (need > ASIDE_MAX)
		return -ENOBUFS;
	if (need > self->aside_cap) {
		size_t cap = self->aside_cap ? self->aside_cap : 4096;
		while (cap < need)
			cap *= 2;
		char *a = realloc(self->aside, cap);
		if (!a)
			return -ENOMEM;
		self->aside = a;
		self->aside_cap = cap;
	}
	memcpy(self->aside + self->aside_len, line, ll);
	self->aside[self->aside_len + ll] = '\n';
	self->aside_len += ll + 1;
	return 0;
}

int agentlink_clock_refresh(struct agentlink *self, size_t n, struct clocksync_sample *samples, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	char req[64], line[AGENT_LINE_MAX];
	size_t got = 0;
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		int64_t t1 = clock_now_ns(), t4 = 0, e2, e3;
		int l = snprintf(req, sizeof req, "time %" PRId64 "\n", t1);
		if ((rc = write_line(self, req, (size_t)l)))
			break;
		for (;;) {
			if ((rc = read_line_raw(self, line, sizeof line, deadline, &t4)))
				break;
			if (!agentlink_parse_time(line, t1, &e2, &e3))
				break;
			/* an event or file line: kept for agentlink_recv, in order */
			if ((rc = aside_put(self, line)))
				break;
		}
		if (rc)
			break;
		/* the read that brought the answer, or a later one: never before its arrival */
		t4 = self->last_read_ns;
		samples[got++] = (struct clocksync_sample){ t1, e2, e3, t4 };
	}
	return got ? (int)got : rc ? rc : -ETIMEDOUT;
}

int agentlink_clock_begin(struct agentlink *self, size_t n)
{
	char req[64];
	if (n < 1 || n > AGENTLINK_CLOCK_BATCH_MAX)
		return -EINVAL;
	if (self->ex_pending)
		return -EBUSY;
	self->ex_t1 = clock_now_ns();
	int l = snprintf(req, sizeof req, "time %" PRId64 "\n", self->ex_t1);
	int rc = write_line(self, req, (size_t)l);
	if (rc)
		return rc;
	self->ex_active = self->ex_pending = true;
	self->ex_left = n - 1;
	self->ex_got = 0;
	return 0;
}

bool agentlink_clock_busy(const struct agentlink *self)
{
	return self->ex_pending;
}

int64_t agentlink_clock_sent_ns(const struct agentlink *self)
{
	return self->ex_pending ? self->ex_t1 : 0;
}

size_t agentlink_clock_end(struct agentlink *self, struct clocksync_sample *samples, size_t max)
{
	size_t n = self->ex_got < max ? self->ex_got : max;
	memcpy(samples, self->ex_s, n * sizeof *samples);
	self->ex_active = false;
	self->ex_left = self->ex_got = 0;
	return n;
}

int agentlink_flush(struct agentlink *self)
{
	return flush_out(self);
}

size_t agentlink_out_pending(const struct agentlink *self)
{
	return self->out_len - self->out_off;
}

int64_t agentlink_out_stalled_ms(const struct agentlink *self)
{
	return self->out_len > self->out_off ? (clock_now_ns() - self->out_moved_ns) / 1000000 : 0;
}

int agentlink_wait(struct agentlink *const *links, size_t n, int timeout_ms)
{
	struct pollfd p[256];
	size_t k = 0;
	for (size_t i = 0; i < n && k < sizeof p / sizeof p[0]; i++) {
		const struct agentlink *l = links[i];
		if (!l)
			continue;
		if (l->aside_off < l->aside_len || memchr(l->buf + l->off, '\n', l->have - l->off))
			return 1;       /* a line is there already */
		p[k++] = (struct pollfd){ .fd = l->from_fd, .events = POLLIN };
	}
	int r = poll(p, k, timeout_ms);
	return r < 0 ? (errno == EINTR ? 0 : -errno) : r;
}

int64_t agentlink_last_read_ns(const struct agentlink *self)
{
	return self->last_read_ns;
}

int agentlink_send(struct agentlink *self, const char *request)
{
	char req[AGENT_LINE_MAX];
	int n = snprintf(req, sizeof req, "%s\n", request);
	if (n < 0 || (size_t)n >= sizeof req || strchr(request, '\n'))
		return -EINVAL;
	return write_line(self, req, (size_t)n);
}

int agentlink_recv(struct agentlink *self, char *reply, size_t len, int timeout_ms)
{
	int64_t t;
	return read_line(self, reply, len, now_ms() + timeout_ms, &t);
}

int agentlink_request(struct agentlink *self, const char *request, char *reply, size_t len, int timeout_ms)
{
	int rc = agentlink_send(self, request);
	return rc ? rc : agentlink_recv(self, reply, len, timeout_ms);
}

int agentlink_close(struct agentlink **self, int timeout_ms)
{
	if (!self || !*self)
		return 0;
	struct agentlink *l = *self;
	int64_t deadline = now_ms() + timeout_ms;
	/* quit after what is queued, as long as the pipe takes it within the timeout: a hung
	 * agent's full pipe holds nothing but its own end */
	if (l->to_fd >= 0 && !write_line(l, "quit\n", 5)) {
		while (!flush_out(l) && l->out_len) {
			int64_t left = deadline - now_ms();
			struct pollfd p = { .fd = l->to_fd, .events = POLLOUT };
			if (left <= 0 || (poll(&p, 1, (int)left) < 0 && errno != EINTR))
				break;
		}
	}
	if (l->to_fd >= 0)
		close(l->to_fd);
	l->to_fd = -1;
	int64_t left = deadline - now_ms();
	int rc = l->pid > 0 ? reap(l->pid, left > 0 ? (int)left : 0) : 0;
	link_free(l);
	*self = NULL;
	return rc;
}
