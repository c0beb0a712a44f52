/* netem/linkd_ctl: the control protocol of stalenet-linkd, apart from its packet loop.
 *
 * Pure: parses request lines into a struct and formats requests, replies and stats lines back;
 * no I/O, no clock, no emulator state, so it is unit-tested and fuzzed alone. The grammar (one
 * request per line, tokens separated by blanks):
 *   set name=N netns=NS ifname=IF queue=Q [link_params tokens]   add, or change in place
 *   del name=N                                                   unbind the queue
 *   stats [name=N]        one line per link: name packets bytes dropped held dup corrupt reordered
 *   ping
 * Replies start with "ok" or "err ". Parsing is strict: an unknown token, a value too long for
 * its field, a queue that is not a number in 0..65535 or parameters link_params_validate
 * rejects make the whole request an error (nothing is truncated silently). */
#ifndef STALENET_LINKD_CTL_H
#define STALENET_LINKD_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "lib/link_params.h"

#define LINKD_CTL_NAME_MAX 96   /* buffer sizes, NUL included */
#define LINKD_CTL_NETNS_MAX 64
#define LINKD_CTL_IFNAME_MAX 32

/* Counters of one emulated link. */
struct linkd_counters {
	uint64_t packets;    /* packets that entered the queue */
	uint64_t bytes;      /* their bytes (IP length) */
	uint64_t dropped;    /* lost by the model or over the limit */
	uint64_t held;       /* held right now */
	uint64_t dup;        /* extra copies injected */
	uint64_t corrupt;    /* packets with a flipped bit */
	uint64_t reordered;  /* packets sent ahead of the delayed ones */
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

/* One stats line, "name packets bytes dropped held dup corrupt reordered\n". Returns the length
 * needed (as snprintf). */
int linkd_ctl_stats_line(const char *name, const struct linkd_counters *c, char *buf, size_t len);

/* Read a stats line back (without or with its newline). Returns 0, or -EINVAL. */
int linkd_ctl_parse_stats_line(const char *line, char *name, size_t namelen, struct linkd_counters *c);

#endif
