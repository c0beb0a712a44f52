/* orchestrator/multihost: the orchestrator's side of a run across hosts, so far: reaching and
 * checking the hosts, building and tearing down the testbed across them, and cleanup.
 *
 * multihost_connect reaches every host of the list before anything is built: ssh connects,
 * `stalenet agent` answers with this build's protocol and version and runs as root, and its
 * clock is measured against ours (lib/clocksync). Every bad host gets its own one-line error
 * (all hosts are tried, so one attempt shows every problem), then the whole attempt fails.
 * multihost_build asks every agent at once for its share of a placed run (orchestrator/agent's
 * build: nodes keep the run's addresses, one VXLAN segment), checks that all hosts agree on the
 * node MTU, and measures the underlay's base delay from the first host to every other (the
 * figure delay compensation subtracts). multihost_teardown undoes it on every host.
 * multihost_cleanup asks every host's agent for its `stalenet cleanup`. Launching the nodes
 * across hosts, the control plane and the traces are not implemented yet. */
#ifndef STALENET_MULTIHOST_H
#define STALENET_MULTIHOST_H

#include <stdint.h>
#include <stdio.h>

#include "orchestrator/hosts.h"
#include "orchestrator/placement.h"
#include "orchestrator/plan.h"

#define MULTIHOST_CLOCK_EXCHANGES 100
#define MULTIHOST_PROBES 50

struct multihost_opts {
	const struct hosts *hosts;
	const char *identity;           /* ssh identity file, NULL = the user's agent or defaults */
	const char *known_hosts;        /* known-hosts file, NULL = the user's */
	const char *agent_path;         /* stalenet on the hosts (absolute), NULL = this program's path */
	int timeout_ms;                 /* per host, connection and greeting; 0 = 10 s */
};

struct multihost;

/* Connect and check every host (see above); one line per host to out ("host a (root@x): ok,
 * hostname a, clock offset +0.000012 s +- 0.000040 s ...") and one error line per bad host to
 * err_out. Returns the connected hosts, or NULL when any host failed. o->hosts must outlive it. */
struct multihost *multihost_connect(const struct multihost_opts *o, FILE *out, FILE *err_out);

/* Build run's testbed across the hosts as placed (prefix: the run prefix "snXXXX-", vni: the
 * run's VXLAN segment), one line per host to out; then the underlay probes. Returns 0, or
 * -errno after an error line to err_out (what was built stays for multihost_teardown). */
int multihost_build(struct multihost *self, const struct plan_run *run, const struct placement *p,
		    const char *prefix, uint32_t vni, FILE *out, FILE *err_out);

/* Tear the built testbed down on every host. Returns 0 or -EIO after error lines. */
int multihost_teardown(struct multihost *self, FILE *err_out);

/* Close every agent (each tears down what it still holds); *self = NULL; accepts NULL. */
void multihost_close(struct multihost **self);

/* `stalenet cleanup` on every host through its agent; one line per host to out, errors to
 * err_out. Returns 0 when every host is clean, -EIO otherwise. */
int multihost_cleanup(const struct multihost_opts *o, FILE *out, FILE *err_out);

#endif
