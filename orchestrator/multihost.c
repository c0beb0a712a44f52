/* orchestrator/multihost: see multihost.h. */
#include "orchestrator/multihost.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/clocksync.h"
#include "orchestrator/agentlink.h"

static int open_link(const struct multihost_opts *o, size_t i, struct agentlink **out, char *err, size_t errlen)
{
	static char self_path[PATH_MAX];
	const struct hosts_host *h = &o->hosts->list[i];
	const char *agent = o->agent_path;
	if (!agent) {
		ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
		if (n <= 0) {
			snprintf(err, errlen, "host %s: cannot find this program's path", h->name);
			return -ENOENT;
		}
		self_path[n] = 0;
		agent = self_path;
	}
	struct agentlink_opts ao = { .host_name = h->name, .ssh_dest = h->ssh, .identity = o->identity,
				     .known_hosts = o->known_hosts, .agent_path = agent,
				     .timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 10000 };
	*out = agentlink_open(&ao, err, errlen);
	return *out ? 0 : -EHOSTUNREACH;
}

int multihost_preflight(const struct multihost_opts *o, FILE *out, FILE *err_out)
{
	int bad = 0;
	for (size_t i = 0; i < o->hosts->n; i++) {
		const struct hosts_host *h = &o->hosts->list[i];
		struct agentlink *l = NULL;
		struct clocksync_estimate e;
		char err[1024];
		if (open_link(o, i, &l, err, sizeof err) ||
		    agentlink_clock(l, MULTIHOST_CLOCK_EXCHANGES, NULL, &e, 30000, err, sizeof err)) {
			fprintf(err_out, "stalenet: %s\n", err);
			bad++;
			agentlink_close(&l, 5000);
			continue;
		}
		fprintf(out, "host %s (%s): ok, hostname %s, clock offset %+.6f s +- %.6f s (min round trip %.6f s)\n",
			h->name, h->ssh, agentlink_remote_hostname(l), e.offset_ns / 1e9, e.bound_ns / 1e9,
			e.min_delay_ns / 1e9);
		agentlink_close(&l, 5000);
	}
	return bad ? -EHOSTUNREACH : 0;
}

int multihost_cleanup(const struct multihost_opts *o, FILE *out, FILE *err_out)
{
	int bad = 0;
	for (size_t i = 0; i < o->hosts->n; i++) {
		const struct hosts_host *h = &o->hosts->list[i];
		struct agentlink *l = NULL;
		char err[1024], reply[256];
		if (open_link(o, i, &l, err, sizeof err)) {
			fprintf(err_out, "stalenet cleanup: %s\n", err);
			bad++;
			continue;
		}
		int rc = agentlink_request(l, "cleanup", reply, sizeof reply, 120000);
		if (rc || strncmp(reply, "ok ", 3)) {
			fprintf(err_out, "stalenet cleanup: host %s (%s): %s\n", h->name, h->ssh,
				rc ? strerror(-rc) : reply);
			bad++;
		} else {
			fprintf(out, "host %s: cleanup %s\n", h->name, reply + 3);
		}
		agentlink_close(&l, 5000);
	}
	return bad ? -EIO : 0;
}
