/* orchestrator/agentreq: the agent's request lines (orchestrator/agent.h lists the protocol),
 * parsed without I/O into checked fields.
 *
 * The agent runs as root and its requests come over ssh from whoever can reach it; a request is
 * taken only when every field has the exact form the orchestrator writes: fields separated by
 * single spaces, decimal numbers of digits only within their range (no sign, no leading blanks,
 * no overflow), names of [A-Za-z0-9_-], dotted IPv4 addresses, comma lists without empty items
 * or repeats, nothing after the last field. Anything else is refused with a message that goes
 * back to the orchestrator as "fail WHY". Each parser takes the request's arguments (the line
 * after the request word) and returns 0, or -EINVAL with err filled. */
#ifndef STALENET_AGENTREQ_H
#define STALENET_AGENTREQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/link_params.h"

#define AGENTREQ_MAX_NODES   64        /* nodes of one host in one build request */
#define AGENTREQ_MAX_REMOTES 256       /* other hosts of a build (OVERLAY_MAX_REMOTES) */
#define AGENTREQ_MAX_PEERS   1024      /* addresses of one shapepeers class (LINK_SHAPER_MAX_PEERS) */
#define AGENTREQ_NAME_MAX    32        /* a node name: 1..31 of [A-Za-z0-9_-] */
#define AGENTREQ_KEY_MAX     128       /* a configuration key: 1..127 of [a-z0-9._], a letter first */
#define AGENTREQ_MAX_UNDERLAY_US 60000000u
#define AGENTREQ_MAX_PROBES  1000

/* "build PREFIX VNI LOCAL NODES REMOTES CC MTU [PIN]". Addresses in network byte order. PIN: the run's node
 * count, whose addresses every node of this host holds as permanent neighbours (0 when absent). */
struct agentreq_build {
	char prefix[8];                 /* 1..6 of [a-z0-9], then '-' (TESTBED_PREFIX_MAX) */
	uint32_t vni;                   /* 1..2^24-1 */
	uint32_t local_be;
	size_t n_nodes;                 /* 1..AGENTREQ_MAX_NODES, names and indexes all distinct */
	char names[AGENTREQ_MAX_NODES][AGENTREQ_NAME_MAX];
	uint32_t index[AGENTREQ_MAX_NODES];     /* 0..65535 */
	size_t n_remotes;               /* 0..AGENTREQ_MAX_REMOTES ("-"), distinct, none LOCAL */
	uint32_t remotes_be[AGENTREQ_MAX_REMOTES];
	char cc[16];                    /* 1..15 of [a-z0-9_] */
	uint32_t mtu;                   /* 0 (the underlay's) or OVERLAY_MIN_MTU..65535 */
	uint32_t pin;                   /* 0..65536 */
};
int agentreq_parse_build(const char *args, struct agentreq_build *b, char *err, size_t errlen);

/* "probe ADDR COUNT": COUNT 1..AGENTREQ_MAX_PROBES. */
struct agentreq_probe {
	char addr[16];                  /* as given (dotted quad) */
	uint32_t addr_be;
	uint32_t count;
};
int agentreq_parse_probe(const char *args, struct agentreq_probe *p, char *err, size_t errlen);

/* "conf NAME KEY VALUE": VALUE the rest of the line (may hold spaces, no control characters,
 * may be empty); value points into args. */
struct agentreq_conf {
	char name[AGENTREQ_NAME_MAX];
	char key[AGENTREQ_KEY_MAX];
	const char *value;
};
int agentreq_parse_conf(const char *args, struct agentreq_conf *c, char *err, size_t errlen);

/* "shape NAME up|down TOKEN..." and "reshape NAME up|down TOKEN...": TOKENs key=value as
 * link_params_format writes them, each key once, the result valid (link_params_validate); no
 * token (an unshaped direction that changes later) is "NAME DIR" or "NAME DIR ". what names
 * the request in err ("shape", "reshape"). */
struct agentreq_shape {
	char name[AGENTREQ_NAME_MAX];
	int down;                       /* 0 up, 1 down */
	struct link_params lp;
};
int agentreq_parse_shape(const char *what, const char *args, struct agentreq_shape *s, char *err, size_t errlen);

/* "shapepeers NAME up|down TAG ADDRS UNDERLAY_US TOKEN...": TAG 1..16 of [a-z0-9]; ADDRS a comma
 * list of distinct addresses inside 198.18.0.0/15; UNDERLAY_US 0..AGENTREQ_MAX_UNDERLAY_US and
 * no more than the tokens' delay. */
struct agentreq_peers {
	struct agentreq_shape s;
	char tag[17];
	size_t n_peers;
	uint32_t peers_be[AGENTREQ_MAX_PEERS];
	uint32_t underlay_us;
};
int agentreq_parse_peers(const char *args, struct agentreq_peers *p, char *err, size_t errlen);

/* "limit NAME NEED CPU CPUS MEMORY": NEED 1..7 (CGROUP_* bits), CPU a decimal number of cores
 * 0..CGROUP_MAX_CPUS ("1", "0.5000"), CPUS "-" or a CPU list (cgroup_parse_cpus), MEMORY bytes. */
struct agentreq_limit {
	char name[AGENTREQ_NAME_MAX];
	unsigned need;
	double cpu;
	char cpus[1024];                /* "-" = any CPU */
	uint64_t memory_bytes;
};
int agentreq_parse_limit(const char *args, struct agentreq_limit *l, char *err, size_t errlen);

/* "send NAME MSG": MSG the rest of the line (no control characters, not empty), pointing into
 * args. */
struct agentreq_send {
	char name[AGENTREQ_NAME_MAX];
	const char *msg;
};
int agentreq_parse_send(const char *args, struct agentreq_send *s, char *err, size_t errlen);

/* Whether s is a node name: 1..31 of [A-Za-z0-9_-]. Pure. */
bool agentreq_valid_name(const char *s);

#endif
