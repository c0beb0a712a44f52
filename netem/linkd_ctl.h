/* netem/linkd_ctl: the control protocol of stalenet-linkd, apart from its packet loop.
 *
 * Pure: parses request lines into a struct and formats requests, replies and stats lines back;
 * no I/O, no clock, no emulator state, so it is unit-tested and fuzzed alone. The grammar (one
 * request per line, tokens separated by blanks):
 *   set name=N netns=NS ifname=IF queue=Q [link_params tokens]   add, or change in place
 *   del name=N                                                   unbind the queue
 *   stats [name=N]        "ok", one line per link: name packets bytes dropped held dup corrupt
 *                         reordered late_n late_mean_us late_p99_us late_max_us, then "end".
 *                         The late_* fields describe the packets released since the previous
 *                         stats reply that covered the link (an interval; the counters before
 *                         them are cumulative): how late each left against its scheduled time. A reply for every link (4096 of them: ~1 MB)
 *                         does not fit one SOCK_SEQPACKET message: it comes as several messages
 *                         of whole lines, each at most LINKD_CTL_MSG_MAX bytes, the last one
 *                         ending with the "end" line (an "err" reply is one message, no "end").
 *   ping
 * Replies start with "ok" or "err ". Parsing is strict: an unknown token, a key given twice, a
 * value too long for its field, a queue that is not a number in 0..65535 written as
 * linkd_ctl_format writes it, a link parameter not in link_params_format's form or parameters
 * link_params_validate rejects make the whole request an error (nothing is truncated
 * silently). */
#ifndef STALENET_LINKD_CTL_H
#define STALENET_LINKD_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/link_params.h"

#define LINKD_CTL_NAME_MAX 96   /* buffer sizes, NUL included */
#define LINKD_CTL_NETNS_MAX 64
#define LINKD_CTL_IFNAME_MAX 32
/* Longest stats line: name, 11 numbers of up to 20 digits and a sign with a blank each, newline,
 * NUL. */
#define LINKD_CTL_STATS_LINE_MAX (LINKD_CTL_NAME_MAX + 11 * 22 + 2)
/* Largest control message: well under any unix socket's send buffer (net.core.wmem_default). */
#define LINKD_CTL_MSG_MAX 16384

/* Counters of one emulated link. */
struct linkd_counters {
	uint64_t packets;    /* packets that entered the queue */
	uint64_t bytes;      /* their bytes (IP length) */
	uint64_t dropped;    /* lost by the model or over the limit */
	uint64_t held;       /* held right now */
	uint64_t dup;        /* extra copies injected */
	uint64_t corrupt;    /* packets with a flipped bit */
	uint64_t reordered;  /* packets sent ahead of the delayed ones */
	/* Lateness of the held packets released in the interval (see "stats" above), in us:
	 * actual release (verdict) time minus scheduled time. mean is signed (early < 0); p99 and
	 * max count an early release as 0; all 0 when late_n is 0. */
	uint64_t late_n;
	int64_t late_mean_us;
	uint64_t late_p99_us;
	uint64_t late_max_us;
};

enum linkd_ctl_op { LINKD_CTL_PING = 1, LINKD_CTL_SET, LINKD_CTL_DEL, LINKD_CTL_STATS };

/* One parsed request. Fields not used by op are zero/empty. */
struct linkd_ctl_req {
	enum linkd_ctl_op op;
	char name[LINKD_CTL_NAME_MAX];     /* set, del: required; stats: filter, "" = every link */
	char netns[LINKD_CTL_NETNS_MAX];   /* set: "" = the emulator's own namespace */
	char ifname[LINKD_CTL_IFNAME_MAX]; /* set */
	uint16_t queue;                    /* set: NFQUEUE number */
	struct link_params params;         /* set: validated */
};

/* Parse one request line (a trailing newline is allowed). Returns 0 and fills req, or -EINVAL
 * and writes the "err ..." reply for the client into reply. */
int linkd_ctl_parse(const char *line, struct linkd_ctl_req *req, char *reply, size_t replylen);

/* Format req as a request line (no newline) that linkd_ctl_parse reads back to the same request.
 * Returns the length needed (as snprintf), or -EINVAL for an unknown op. */
int linkd_ctl_format(const struct linkd_ctl_req *req, char *buf, size_t len);

/* One stats line, "name packets bytes dropped held dup corrupt reordered late_n late_mean_us
 * late_p99_us late_max_us\n". Returns the length needed (as snprintf). */
int linkd_ctl_stats_line(const char *name, const struct linkd_counters *c, char *buf, size_t len);

/* Read a stats line back (without or with its newline). Returns 0, or -EINVAL. */
int linkd_ctl_parse_stats_line(const char *line, char *name, size_t namelen, struct linkd_counters *c);

/* Called by linkd_ctl_parse_stats_reply for each link; a negative return stops the parse. */
typedef int (*linkd_ctl_stats_fn)(void *ctx, const char *name, const struct linkd_counters *c);

/* Parse a whole stats reply (its messages concatenated, len bytes, no NUL needed): "ok\n", stats
 * lines, "end\n" and nothing after. Calls fn(ctx, ...) per line in order. Returns the number of
 * lines, -EIO for an "err" reply, -EINVAL when malformed or unterminated, or fn's error. */
int linkd_ctl_parse_stats_reply(const char *text, size_t len, linkd_ctl_stats_fn fn, void *ctx);

/* Size of the next message of a reply text[0..len): the longest run of whole lines that fits in
 * max bytes (the whole rest when it fits; a single line longer than max is cut at max). */
size_t linkd_ctl_msg_cut(const char *text, size_t len, size_t max);

/* Whether a received message of len bytes is the last of a reply: any message of a reply that
 * does not start with "ok" (first = this is the reply's first message), or one whose last line is
 * "end". */
bool linkd_ctl_reply_done(const char *msg, size_t len, bool first);

#endif
