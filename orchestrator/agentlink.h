/* orchestrator/agentlink: the orchestrator's end of one host's `stalenet agent`, started over
 * the system's OpenSSH client (ssh) and spoken to on the channel's stdin/stdout (protocol in
 * orchestrator/agent.h), or over another launcher's argv (srun: orchestrator/slurm).
 *
 * ssh gets an argv, never a shell line on this side: BatchMode (no password prompt can hang a
 * run), ConnectTimeout, the identity and known-hosts file when given, then "--", the
 * destination (validated by orchestrator/hosts) and the fixed remote command "PATH agent",
 * where PATH is checked to be an absolute path of [A-Za-z0-9/._-] so the remote shell sees
 * plain words only. Every wait has a deadline; a host that does not answer becomes one error
 * line that says why (ssh's own last message: refused, timed out, permission denied; the
 * program missing; a version mismatch; not root).
 *
 * ssh (or the launcher) runs in a process group of its own: a terminal's Ctrl-C, sent to the
 * whole foreground group, reaches the orchestrator only, which then stops and tears the run
 * down over the channel, still open; ssh would otherwise die of it at once and take the
 * channel with it. So nothing of ours signals that group any more: agentlink_close (and every
 * failed start) kills the group before reaping ssh, and ssh gets SIGTERM when its parent dies
 * (a launcher does not, see agentlink_start: the end of its input ends its agent).
 *
 * Nothing here waits on a write: the channel's stdin is non-blocking and what its pipe does not
 * take at once is queued (at most AGENTLINK_OUT_MAX bytes per host) and written as it takes it,
 * by every read that waits and by agentlink_flush, which a caller's event loop calls; a hung
 * agent whose pipe and ssh window are full then costs a growing queue, never a blocked
 * orchestrator. Clock exchanges can run in the background of that loop too
 * (agentlink_clock_begin): their answers are taken out of the lines as they are read. */
#ifndef STALENET_AGENTLINK_H
#define STALENET_AGENTLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/clocksync.h"

#define AGENTLINK_OUT_MAX (1u << 20)    /* bytes queued for one agent, at most */
#define AGENTLINK_CLOCK_BATCH_MAX 64    /* background clock exchanges in one batch, at most */

struct agentlink_opts {
	const char *host_name;          /* for messages */
	const char *ssh_dest;           /* [user@]host */
	const char *identity;           /* ssh -i FILE (with IdentitiesOnly), NULL = ssh's defaults */
	const char *known_hosts;        /* UserKnownHostsFile with strict checking, NULL = ssh's */
	const char *agent_path;         /* stalenet on the remote host (absolute) */
	const char *ssh_program;        /* NULL = "ssh" from PATH */
	int timeout_ms;                 /* connection and greeting, > 0 */
	const char *const *launch_argv; /* NULL = ssh as above; else the command (NULL-terminated argv)
					 * whose stdin/stdout are the agent's channel, e.g. srun
					 * (orchestrator/slurm); ssh_dest then only names it in messages */
};

struct agentlink;

/* Start ssh, wait for the agent's greeting, check protocol, version and root. Returns the
 * link or NULL with one line "host NAME (DEST): why" in err. */
struct agentlink *agentlink_open(const struct agentlink_opts *o, char *err, size_t errlen);

/* The two halves of agentlink_open, to reach several hosts at once: start ssh (NULL with err
 * on a bad option or a failed fork); then wait for and check the greeting within the
 * timeout counted from the start. agentlink_ready returns 0, or -errno after filling err and
 * freeing the link (*self = NULL). */
struct agentlink *agentlink_start(const struct agentlink_opts *o, char *err, size_t errlen);
int agentlink_ready(struct agentlink **self, char *err, size_t errlen);

/* The remote host name the agent reported. */
const char *agentlink_remote_hostname(const struct agentlink *self);

/* n clock exchanges (one at a time, each answered before the next) within timeout_ms in all,
 * then the estimate of remote - local (lib/clocksync). Raw samples into samples[] when not
 * NULL (n of them). Returns 0 or -errno with err filled. */
int agentlink_clock(struct agentlink *self, size_t n, struct clocksync_sample *samples,
		    struct clocksync_estimate *out, int timeout_ms, char *err, size_t errlen);

/* Send one request line (no newline in it) and read the one-line answer into reply within
 * timeout_ms. Returns 0, -ETIMEDOUT, -EPIPE (the agent is gone) or -errno. */
/* (Sends below queue what the pipe does not take at once, see above: 0 means queued; -ENOBUFS
 * when the queue is full, after which the link is broken and every send fails.) */
int agentlink_request(struct agentlink *self, const char *request, char *reply, size_t len, int timeout_ms);

/* The two halves of agentlink_request, to keep several hosts busy at once: send one request
 * line; read one answer line within timeout_ms (0: only what has arrived, no wait). Return 0
 * or -errno as above. */
int agentlink_send(struct agentlink *self, const char *request);
int agentlink_recv(struct agentlink *self, char *reply, size_t len, int timeout_ms);

/* Up to n more clock exchanges while the agent may be sending events (nodes running): the
 * other lines that arrive meanwhile are set aside and returned, in order, by the next
 * agentlink_recv calls. Samples into samples[]. Returns how many exchanges completed (> 0), or
 * -errno when none did (-EPIPE: the agent is gone). */
int agentlink_clock_refresh(struct agentlink *self, size_t n, struct clocksync_sample *samples, int timeout_ms);

/* Start n (1..AGENTLINK_CLOCK_BATCH_MAX) clock exchanges in the background: one is sent now,
 * each next one as soon as the answer to the one before is read (by agentlink_recv, or any
 * read here: answers are never returned as lines); an answer is stamped at the read that
 * brought it in. Returns 0, -EBUSY (an earlier exchange is still unanswered: the agent has not
 * answered it), -EINVAL, or a send's error. */
int agentlink_clock_begin(struct agentlink *self, size_t n);

/* Whether a background exchange is sent and not answered yet. */
bool agentlink_clock_busy(const struct agentlink *self);

/* When (CLOCK_MONOTONIC ns) the background exchange awaited was sent; 0 when none is. */
int64_t agentlink_clock_sent_ns(const struct agentlink *self);

/* End the background batch: the exchanges answered so far (at most max) into samples, in
 * order; no more are sent. An answer still due is taken (and dropped) when it comes, and
 * agentlink_clock_busy stays true until then. Returns how many. */
size_t agentlink_clock_end(struct agentlink *self, struct clocksync_sample *samples, size_t max);

/* Write what is queued for the agent as far as its pipe takes it now (never waits). Returns 0,
 * or the link's sticky send error: -ENOBUFS (the queue overflowed: a line was lost), -EPIPE
 * (the agent is gone) or -errno. */
int agentlink_flush(struct agentlink *self);

/* Bytes queued for the agent, not yet taken by its pipe. */
size_t agentlink_out_pending(const struct agentlink *self);

/* How long (ms) the queue has been non-empty without the pipe taking any of it; 0 when empty. */
int64_t agentlink_out_stalled_ms(const struct agentlink *self);

/* Wait up to timeout_ms until any of the n links (NULL entries skipped; at most 256) has
 * something to read. Returns > 0 (then agentlink_recv with timeout 0 does not wait), 0 on
 * timeout, or -errno. */
int agentlink_wait(struct agentlink *const *links, size_t n, int timeout_ms);

/* CLOCK_MONOTONIC (ns) of the latest read from the agent: no earlier than the arrival of any
 * line agentlink_recv has returned, so a clock answer stamped with it brackets the truth. */
int64_t agentlink_last_read_ns(const struct agentlink *self);

/* The lines an agent sends, parsed without I/O (the other side is not trusted: every field is
 * checked, numbers must fit their type, nothing is truncated silently but the host name). */
struct agentlink_greeting {
	int proto;
	char version[64], commit[64];
	unsigned uid;
	char host[64];                  /* the agent's host name, at most 63 characters of it */
};

/* "stalenet-agent PROTO VERSION COMMIT EUID HOSTNAME" into g. Returns 0 or -EPROTO. */
int agentlink_parse_greeting(const char *line, struct agentlink_greeting *g);

/* "time T1 T2 T3", the answer to the exchange stamped t1: T2 and T3 out. Returns 0 or -EPROTO
 * (not such a line, or T1 is not t1). */
int agentlink_parse_time(const char *line, int64_t t1, int64_t *t2, int64_t *t3);

/* "ok SWITCH_NETNS NODE_MTU UNDERLAY_IF UNDERLAY_MTU", the answer to a build: SWITCH_NETNS 1..63
 * of [A-Za-z0-9_.-], UNDERLAY_IF 1..15 of them (an interface name), NODE_MTU 576..65535 and no
 * larger than UNDERLAY_MTU (an int; lo has 65536). Returns 0 or -EPROTO. */
struct agentlink_built {
	char switch_netns[64];
	int node_mtu;
	char underlay_if[16];
	int underlay_mtu;
};
int agentlink_parse_built(const char *line, struct agentlink_built *b);

/* "probe ADDR GOT MIN_NS MEDIAN_NS", the answer to "probe ADDR COUNT": ADDR the one asked for,
 * GOT 1..count, 0 < MIN_NS <= MEDIAN_NS <= 60 s. Returns 0 or -EPROTO. */
struct agentlink_probe {
	int got;
	int64_t min_ns, median_ns;
};
int agentlink_parse_probe(const char *line, const char *addr, int count, struct agentlink_probe *pr);

enum agentlink_event_kind {
	AGENTLINK_EV_OTHER = 0,         /* launched, done, a node's own message */
	AGENTLINK_EV_READY,
	AGENTLINK_EV_STATUS,            /* step, state, waiting */
	AGENTLINK_EV_EXIT,              /* status (waitpid's, or -1 and a reason) */
};

struct agentlink_event {
	char name[64];                  /* the node */
	const char *what;               /* the rest of the line (points into it) */
	enum agentlink_event_kind kind;
	int64_t step;
	char state[16];
	int waiting;
	int status;
};

/* "ev NAME WHAT" into ev. Returns 0, or -EPROTO when the line is not an event (or its name
 * is longer than 63 characters). */
int agentlink_parse_event(const char *line, struct agentlink_event *ev);

/* Say quit (after what is queued, as far as the pipe takes it within timeout_ms), wait up to
 * the rest of timeout_ms for ssh to end (then kill it), kill what is left in its
 * process group, reap it, free; *self = NULL. Returns ssh's exit code, or -ETIMEDOUT when it
 * had to be killed. Accepts NULL. */
int agentlink_close(struct agentlink **self, int timeout_ms);

#endif
