/* orchestrator/multihost: see multihost.h. */
#include "orchestrator/multihost.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/clocksync.h"
#include "orchestrator/agent.h"
#include "orchestrator/agentlink.h"

/* Start ssh to host i (agentlink_start); its greeting is awaited by agentlink_ready. */
static int start_link(const struct multihost_opts *o, size_t i, struct agentlink **out, char *err, size_t errlen)
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
	*out = agentlink_start(&ao, err, errlen);
	return *out ? 0 : -EHOSTUNREACH;
}

static int open_link(const struct multihost_opts *o, size_t i, struct agentlink **out, char *err, size_t errlen)
{
	int rc = start_link(o, i, out, err, errlen);
	return rc ? rc : agentlink_ready(out, err, errlen);
}

struct multihost {
	const struct hosts *hosts;
	struct agentlink **links;       /* one per host */
	bool built;
};

struct multihost *multihost_connect(const struct multihost_opts *o, FILE *out, FILE *err_out)
{
	struct multihost *self = calloc(1, sizeof *self);
	int bad = 0;
	if (!self || !(self->links = calloc(o->hosts->n, sizeof *self->links))) {
		fprintf(err_out, "stalenet: out of memory\n");
		free(self);
		return NULL;
	}
	self->hosts = o->hosts;
	/* every ssh started first, so the hosts' handshakes overlap; the greetings then in order */
	char **errs = calloc(o->hosts->n, sizeof *errs);
	for (size_t i = 0; errs && i < o->hosts->n; i++)
		if ((errs[i] = malloc(1024)) && start_link(o, i, &self->links[i], errs[i], 1024))
			self->links[i] = NULL;
	for (size_t i = 0; i < o->hosts->n; i++) {
		const struct hosts_host *h = &o->hosts->list[i];
		struct clocksync_estimate e;
		char err[1024];
		snprintf(err, sizeof err, "%s", errs && errs[i] ? errs[i] : "out of memory");
		if (!self->links[i] || agentlink_ready(&self->links[i], err, sizeof err) ||
		    agentlink_clock(self->links[i], MULTIHOST_CLOCK_EXCHANGES, NULL, &e, 30000, err, sizeof err)) {
			fprintf(err_out, "stalenet: %s\n", err);
			bad++;
			agentlink_close(&self->links[i], 5000);
			continue;
		}
		fprintf(out, "host %s (%s): ok, hostname %s, clock offset %+.6f s +- %.6f s (min round trip %.6f s)\n",
			h->name, h->ssh, agentlink_remote_hostname(self->links[i]), e.offset_ns / 1e9, e.bound_ns / 1e9,
			e.min_delay_ns / 1e9);
	}
	for (size_t i = 0; errs && i < o->hosts->n; i++)
		free(errs[i]);
	free(errs);
	if (bad)
		multihost_close(&self);
	return self;
}

/* Append to buf at *pos (bounded); false when it did not fit. */
static bool appendf(char *buf, size_t len, size_t *pos, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool appendf(char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = *pos < len ? vsnprintf(buf + *pos, len - *pos, fmt, ap) : -1;
	va_end(ap);
	if (n < 0 || (size_t)n >= len - *pos)
		return false;
	*pos += (size_t)n;
	return true;
}

static bool host_used(const struct placement *p, size_t h)
{
	for (size_t i = 0; i < p->n_nodes; i++)
		if (p->host_of[i] == h)
			return true;
	return false;
}

int multihost_build(struct multihost *self, const struct plan_run *run, const struct placement *p,
		    const char *prefix, uint32_t vni, FILE *out, FILE *err_out)
{
	const struct hosts *hs = self->hosts;
	int rc = 0, mtu = 0;
	bool *sent = calloc(hs->n, sizeof *sent);
	if (!sent)
		return -ENOMEM;
	self->built = true;
	for (size_t h = 0; h < hs->n; h++) {
		char req[AGENT_LINE_MAX];
		size_t pos = 0, count = 0, n_rem = 0;
		if (!host_used(p, h))
			continue;       /* a host without nodes of this run takes no part */
		bool ok = appendf(req, sizeof req, &pos, "build %s %u %s", prefix, vni, hs->list[h].address);
		for (size_t i = 0; ok && i < p->n_nodes; i++)
			if (p->host_of[i] == h)
				ok = appendf(req, sizeof req, &pos, "%c%s:%zu", count++ ? ',' : ' ', run->nodes[i].name, i);
		for (size_t k = 0; ok && k < hs->n; k++)
			if (k != h && host_used(p, k))
				ok = appendf(req, sizeof req, &pos, "%c%s", n_rem++ ? ',' : ' ', hs->list[k].address);
		ok = ok && (n_rem || appendf(req, sizeof req, &pos, " -"));
		ok = ok && appendf(req, sizeof req, &pos, " %s %u", run->scenario->network.cc, run->scenario->network.mtu);
		if (!ok) {
			fprintf(err_out, "stalenet: host %s: too many nodes for one build request (not yet supported)\n",
				hs->list[h].name);
			rc = -E2BIG;
			break;
		}
		if ((rc = agentlink_send(self->links[h], req))) {
			fprintf(err_out, "stalenet: host %s: %s\n", hs->list[h].name, strerror(-rc));
			break;
		}
		sent[h] = true;
	}
	for (size_t h = 0; h < hs->n; h++) {
		char reply[AGENT_LINE_MAX], sw[64], ifn[32];
		int m = 0, um = 0, r;
		if (!sent[h])
			continue;
		if ((r = agentlink_recv(self->links[h], reply, sizeof reply, 120000))) {
			fprintf(err_out, "stalenet: host %s: build: %s\n", hs->list[h].name, strerror(-r));
			rc = rc ? rc : r;
			continue;
		}
		if (sscanf(reply, "ok %63s %d %31s %d", sw, &m, ifn, &um) != 4) {
			fprintf(err_out, "stalenet: host %s: %s\n", hs->list[h].name, reply);
			rc = rc ? rc : -EIO;
			continue;
		}
		fprintf(out, "host %s: built", hs->list[h].name);
		for (size_t i = 0; i < p->n_nodes; i++)
			if (p->host_of[i] == h)
				fprintf(out, " %s", run->nodes[i].name);
		fprintf(out, " (node MTU %d over %s MTU %d)\n", m, ifn, um);
		if (mtu && m != mtu) {
			fprintf(err_out, "stalenet: host %s: node MTU %d differs from %d of the other hosts (their "
				"underlay MTUs differ)\n", hs->list[h].name, m, mtu);
			rc = rc ? rc : -EINVAL;
		}
		mtu = m;
	}
	/* the underlay's base delay from the first host with nodes to every other */
	size_t first = hs->n;
	for (size_t h = 0; h < hs->n && first == hs->n; h++)
		if (sent[h])
			first = h;
	for (size_t h = first + 1; !rc && first < hs->n && h < hs->n; h++) {
		char req[64], reply[AGENT_LINE_MAX], a[32];
		int got = 0;
		long long mn = 0, md = 0;
		if (!sent[h])
			continue;
		snprintf(req, sizeof req, "probe %s %d", hs->list[h].address, MULTIHOST_PROBES);
		if (agentlink_request(self->links[first], req, reply, sizeof reply, 60000) ||
		    sscanf(reply, "probe %31s %d %lld %lld", a, &got, &mn, &md) != 4) {
			fprintf(err_out, "stalenet: underlay %s -> %s: %s\n", hs->list[first].name, hs->list[h].name, reply);
			rc = -EHOSTUNREACH;
			break;
		}
		fprintf(out, "underlay %s -> %s: base one-way delay %.1f us (min round trip %.1f us, median %.1f us, "
			"%d of %d)\n", hs->list[first].name, hs->list[h].name, mn / 2e3, mn / 1e3, md / 1e3, got,
			MULTIHOST_PROBES);
	}
	free(sent);
	return rc;
}

int multihost_teardown(struct multihost *self, FILE *err_out)
{
	int rc = 0;
	if (!self->built)
		return 0;
	for (size_t h = 0; h < self->hosts->n; h++)
		if (self->links[h] && agentlink_send(self->links[h], "teardown"))
			rc = -EIO;
	for (size_t h = 0; h < self->hosts->n; h++) {
		char reply[AGENT_LINE_MAX];
		if (!self->links[h])
			continue;
		if (agentlink_recv(self->links[h], reply, sizeof reply, 120000) || strcmp(reply, "ok")) {
			fprintf(err_out, "stalenet: host %s: teardown failed\n", self->hosts->list[h].name);
			rc = -EIO;
		}
	}
	self->built = false;
	return rc;
}

void multihost_close(struct multihost **self)
{
	if (!self || !*self)
		return;
	for (size_t h = 0; h < (*self)->hosts->n; h++)
		agentlink_close(&(*self)->links[h], 10000);
	free((*self)->links);
	free(*self);
	*self = NULL;
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
