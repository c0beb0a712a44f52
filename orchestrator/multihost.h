/* orchestrator/multihost: the orchestrator's side of a run across hosts, so far its checks
 * and its cleanup.
 *
 * multihost_preflight reaches every host of the list before anything is built: ssh connects,
 * `stalenet agent` answers with this build's protocol and version and runs as root, and its
 * clock is measured against ours (lib/clocksync). Every bad host gets its own one-line error
 * (all hosts are tried, so one attempt shows every problem), then the whole check fails.
 * multihost_cleanup asks every host's agent for its `stalenet cleanup`. Building and running
 * the nodes across hosts (`stalenet run` with hosts) is not implemented yet. */
#ifndef STALENET_MULTIHOST_H
#define STALENET_MULTIHOST_H

#include <stdio.h>

#include "orchestrator/hosts.h"

#define MULTIHOST_CLOCK_EXCHANGES 100

struct multihost_opts {
	const struct hosts *hosts;
	const char *identity;           /* ssh identity file, NULL = the user's agent or defaults */
	const char *known_hosts;        /* known-hosts file, NULL = the user's */
	const char *agent_path;         /* stalenet on the hosts (absolute), NULL = this program's path */
	int timeout_ms;                 /* per host, connection and greeting; 0 = 10 s */
};

/* Check every host (see above); one line per host to out ("host a (root@x): ok, hostname a,
 * clock offset +0.000012 s +- 0.000040 s") and one error line per bad host to err_out.
 * Returns 0 when every host passed, -EHOSTUNREACH otherwise. */
int multihost_preflight(const struct multihost_opts *o, FILE *out, FILE *err_out);

/* `stalenet cleanup` on every host through its agent; one line per host to out, errors to
 * err_out. Returns 0 when every host is clean, -EIO otherwise. */
int multihost_cleanup(const struct multihost_opts *o, FILE *out, FILE *err_out);

#endif
