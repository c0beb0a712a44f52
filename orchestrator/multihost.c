/* orchestrator/multihost: see multihost.h. */
#include "orchestrator/multihost.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "lib/clock.h"
#include "lib/clocksync.h"
#include "lib/kv.h"
#include "lib/link_params.h"
#include "lib/log.h"
#include "orchestrator/agent.h"
#include "orchestrator/agentfile.h"
#include "orchestrator/agentlink.h"
#include "orchestrator/cgroup.h"
#include "orchestrator/hostfiles.h"
#include "orchestrator/linktrace.h"
#include "orchestrator/slurm.h"
#include "orchestrator/supervise.h"
#include "orchestrator/testbed.h"
#include "collectors/csv.h"
#include "collectors/schema.h"

/* Start ssh (or srun) to host i (agentlink_start); its greeting is awaited by agentlink_ready. */
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
	/* with slurm, a job step on the host's node instead of ssh (orchestrator/slurm) */
	struct slurm_argv sa;
	char dest[HOSTS_NAME_MAX + 8];
	if (o->hosts->launcher == HOSTS_LAUNCHER_SLURM) {
		if (slurm_agent_argv(&sa, NULL, h->name, agent)) {
			snprintf(err, errlen, "host %s: the agent path must be an absolute path of letters, digits, "
				 "'/', '.', '_', '-'", h->name);
			return -EINVAL;
		}
		snprintf(dest, sizeof dest, "srun %s", h->name);
		ao.ssh_dest = dest;
		ao.launch_argv = sa.argv;
	}
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
	struct clocksync_estimate *clock; /* one per host */
	int64_t *underlay_ns;           /* [a * n + b]: base one-way delay a -> b, 0 = not measured */
	size_t hub_host;                /* the link self-check's hub (node index n_nodes), SIZE_MAX = none */
	struct clocksync_sample **cs;   /* per host: the latest clock exchanges, MULTIHOST_CLOCK_WINDOW */
	size_t *n_cs;
	int64_t *next_refresh_ns;       /* per host: when its clock is measured again during a run */
	int64_t *refresh_from_ns;       /* per host: when its background refresh began, 0 = none */
	bool *refresh_unanswered;       /* per host: its last refresh got no answer (logged once) */
	char (*prefixes)[TESTBED_PREFIX_MAX + 1];  /* per host: the prefix its share is named with */
	bool built;
	volatile sig_atomic_t *interrupted;       /* multihost_opts.interrupted */
};

#define MULTIHOST_CLOCK_DEFER_NS 1000000ll  /* the other hosts' lines wait for an answer that long */

/* A second interruption: every wait from now on is cut short. */
static bool stop_now(const volatile sig_atomic_t *interrupted)
{
	return interrupted && *interrupted >= SUPERVISE_STOP_NOW;
}

/* The next line of host h within *deadline_ms (CLOCK_MONOTONIC ms), read in slices of 0.1 s so
 * that a second interruption is seen at once: with abort it ends the wait (-EINTR), else it
 * shortens the deadline to MULTIHOST_STOP_NOW_MS from then. Returns as agentlink_recv. */
static int recv_line(struct multihost *self, size_t h, char *line, size_t len, int64_t *deadline_ms, bool abort)
{
	for (;;) {
		int64_t now = clock_now_ns() / 1000000, left = *deadline_ms - now;
		int rc;

		if (abort && stop_now(self->interrupted))
			return -EINTR;
		if (stop_now(self->interrupted) && left > MULTIHOST_STOP_NOW_MS) {
			*deadline_ms = now + MULTIHOST_STOP_NOW_MS;
			left = MULTIHOST_STOP_NOW_MS;
		}
		rc = agentlink_recv(self->links[h], line, len, left < 0 ? 0 : left > 100 ? 100 : (int)left);
		if (rc != -ETIMEDOUT || left <= 100)
			return rc;
	}
}

/* A request of the run's setup (build, probes, shaping, node configurations) to host h and its
 * one-line answer within timeout_ms. After a second interruption nothing more is set up: it
 * fails at once (-EINTR, reply ""), and so does a wait under way. Returns as agentlink_request. */
static int setup_request(struct multihost *self, size_t h, const char *req, char *reply, size_t len, int timeout_ms)
{
	int64_t deadline = clock_now_ns() / 1000000 + timeout_ms;
	int rc;

	reply[0] = 0;
	if (stop_now(self->interrupted))
		return -EINTR;
	if ((rc = agentlink_send(self->links[h], req)))
		return rc;
	return recv_line(self, h, reply, len, &deadline, true);
}

struct multihost *multihost_connect(const struct multihost_opts *o, FILE *out, FILE *err_out)
{
	struct multihost *self = calloc(1, sizeof *self);
	int bad = 0;
	if (!self || !(self->links = calloc(o->hosts->n, sizeof *self->links)) ||
	    !(self->clock = calloc(o->hosts->n, sizeof *self->clock)) ||
	    !(self->underlay_ns = calloc(o->hosts->n * o->hosts->n, sizeof *self->underlay_ns)) ||
	    !(self->cs = calloc(o->hosts->n, sizeof *self->cs)) || !(self->n_cs = calloc(o->hosts->n, sizeof *self->n_cs)) ||
	    !(self->next_refresh_ns = calloc(o->hosts->n, sizeof *self->next_refresh_ns)) ||
	    !(self->refresh_from_ns = calloc(o->hosts->n, sizeof *self->refresh_from_ns)) ||
	    !(self->refresh_unanswered = calloc(o->hosts->n, sizeof *self->refresh_unanswered)) ||
	    !(self->prefixes = calloc(o->hosts->n, sizeof *self->prefixes))) {
		fprintf(err_out, "stalenet: out of memory\n");
		if (self) {
			free(self->links);
			free(self->clock);
			free(self->underlay_ns);
			free(self->cs);
			free(self->n_cs);
			free(self->next_refresh_ns);
			free(self->refresh_from_ns);
			free(self->refresh_unanswered);
		}
		free(self);
		return NULL;
	}
	self->hosts = o->hosts;
	self->hub_host = SIZE_MAX;
	self->interrupted = o->interrupted;
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
		if (!(self->cs[i] = calloc(MULTIHOST_CLOCK_WINDOW, sizeof *self->cs[i])))
			snprintf(err, sizeof err, "out of memory");
		if (!self->cs[i] || !self->links[i] || agentlink_ready(&self->links[i], err, sizeof err) ||
		    agentlink_clock(self->links[i], MULTIHOST_CLOCK_EXCHANGES, self->cs[i], &e, 30000, err, sizeof err)) {
			fprintf(err_out, "stalenet: %s\n", err);
			bad++;
			agentlink_close(&self->links[i], 5000);
			continue;
		}
		self->clock[i] = e;
		self->n_cs[i] = MULTIHOST_CLOCK_EXCHANGES;
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

int multihost_build(struct multihost *self, const struct plan_run *run, const struct placement *p, bool hub,
		    const char *prefix, uint32_t vni, FILE *out, FILE *err_out)
{
	const struct hosts *hs = self->hosts;
	int rc = 0, mtu = 0;
	bool *sent = calloc(hs->n, sizeof *sent);
	if (!sent)
		return -ENOMEM;
	bool used_before = false;
	self->built = true;
	/* the hub goes with the first node (its host's links to the others cross hosts) */
	self->hub_host = hub && p->n_nodes ? p->host_of[0] : SIZE_MAX;
	for (size_t h = 0; h < hs->n; h++) {
		char req[AGENT_LINE_MAX];
		size_t pos = 0, count = 0, n_rem = 0;
		if (!host_used(p, h))
			continue;       /* a host without nodes of this run takes no part */
		if (!self->links[h]) {
			fprintf(err_out, "stalenet: host %s: its agent was lost in an earlier run\n", hs->list[h].name);
			rc = -EHOSTDOWN;
			break;
		}
		/* each host's share is named with a prefix of its own (the first host's is the run's):
		 * hosts that share anything host-wide, such as the test hosts this machine's one
		 * cgroup tree, never meet each other's names */
		char hp[TESTBED_PREFIX_MAX + 1];
		snprintf(hp, sizeof hp, "%s", prefix);
		for (bool clash = used_before; clash;) {
			if (testbed_random_prefix(hp, sizeof hp) < 0)
				break;
			clash = !strcmp(hp, prefix);
			for (size_t k = 0; k < h; k++)
				clash = clash || (sent[k] && !strcmp(hp, self->prefixes[k]));
		}
		snprintf(self->prefixes[h], sizeof self->prefixes[h], "%s", hp);
		used_before = true;
		bool ok = appendf(req, sizeof req, &pos, "build %s %u %s", hp, vni, hs->list[h].address);
		for (size_t i = 0; ok && i < p->n_nodes; i++)
			if (p->host_of[i] == h)
				ok = appendf(req, sizeof req, &pos, "%c%s:%zu", count++ ? ',' : ' ', run->nodes[i].name, i);
		if (ok && self->hub_host == h)
			ok = appendf(req, sizeof req, &pos, ",hub:%zu", p->n_nodes);
		for (size_t k = 0; ok && k < hs->n; k++)
			if (k != h && host_used(p, k))
				ok = appendf(req, sizeof req, &pos, "%c%s", n_rem++ ? ',' : ' ', hs->list[k].address);
		ok = ok && (n_rem || appendf(req, sizeof req, &pos, " -"));
		ok = ok && appendf(req, sizeof req, &pos, " %s %u", run->scenario->network.cc, run->scenario->network.mtu);
		/* every host pins every node of the run (and the hub) as a neighbour */
		ok = ok && appendf(req, sizeof req, &pos, " %zu", p->n_nodes + (self->hub_host != SIZE_MAX));
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
		char reply[AGENT_LINE_MAX];
		struct agentlink_built bt;
		int r;
		if (!sent[h])
			continue;
		int64_t deadline = clock_now_ns() / 1000000 + 120000;
		if ((r = recv_line(self, h, reply, sizeof reply, &deadline, true))) {
			if (r != -EINTR)
				fprintf(err_out, "stalenet: host %s: build: %s\n", hs->list[h].name, strerror(-r));
			rc = rc ? rc : r;
			continue;
		}
		if (agentlink_parse_built(reply, &bt)) {
			fprintf(err_out, "stalenet: host %s: %s%.200s\n", hs->list[h].name,
				strncmp(reply, "fail ", 5) ? "bad build answer: " : "", reply);
			rc = rc ? rc : -EIO;
			continue;
		}
		fprintf(out, "host %s: built", hs->list[h].name);
		for (size_t i = 0; i < p->n_nodes; i++)
			if (p->host_of[i] == h)
				fprintf(out, " %s", run->nodes[i].name);
		if (self->hub_host == h)
			fprintf(out, " hub");
		int m = bt.node_mtu;
		fprintf(out, " (node MTU %d over %s MTU %d)\n", m, bt.underlay_if, bt.underlay_mtu);
		if (mtu && m != mtu) {
			fprintf(err_out, "stalenet: host %s: node MTU %d differs from %d of the other hosts (their "
				"underlay MTUs differ)\n", hs->list[h].name, m, mtu);
			rc = rc ? rc : -EINVAL;
		}
		mtu = m;
	}
	/* the underlay's base delay between every two hosts with nodes (each pair probed from the
	 * first of the two; the path is taken as symmetric) */
	memset(self->underlay_ns, 0, hs->n * hs->n * sizeof *self->underlay_ns);
	for (size_t a = 0; !rc && a < hs->n; a++)
		for (size_t h = a + 1; !rc && sent[a] && h < hs->n; h++) {
			char req[64], reply[AGENT_LINE_MAX] = "no answer";
			struct agentlink_probe pr;
			if (!sent[h])
				continue;
			snprintf(req, sizeof req, "probe %s %d", hs->list[h].address, MULTIHOST_PROBES);
			int r = setup_request(self, a, req, reply, sizeof reply, 60000);
			if (r || agentlink_parse_probe(reply, hs->list[h].address, MULTIHOST_PROBES, &pr)) {
				if (r == -EINTR) {
					rc = r;
					break;
				}
				fprintf(err_out, "stalenet: underlay %s -> %s: %.200s\n", hs->list[a].name, hs->list[h].name,
					reply);
				rc = -EHOSTUNREACH;
				break;
			}
			long long mn = pr.min_ns, md = pr.median_ns;
			int got = pr.got;
			self->underlay_ns[a * hs->n + h] = self->underlay_ns[h * hs->n + a] = mn / 2;
			fprintf(out, "underlay %s -> %s: base one-way delay %.1f us (min round trip %.1f us, median %.1f us, "
				"%d of %d)\n", hs->list[a].name, hs->list[h].name, mn / 2e3, mn / 1e3, md / 1e3, got,
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
	/* one deadline for all (they tear down at once); the lines a host sent before its answer
	 * (its nodes' last events after a stop at once, the rest of a fetch cut short) are passed
	 * over: the answer is the one line "ok" */
	int64_t deadline = clock_now_ns() / 1000000 + 120000;
	for (size_t h = 0; h < self->hosts->n; h++) {
		char reply[AGENT_LINE_MAX];
		int r;
		if (!self->links[h])
			continue;
		while (!(r = recv_line(self, h, reply, sizeof reply, &deadline, false)) && strcmp(reply, "ok"))
			;
		if (r == -ETIMEDOUT && stop_now(self->interrupted)) {
			fprintf(err_out, "stalenet: host %s: teardown not confirmed within %d ms (stopping at once); "
				"its agent tears down when its connection ends, else: stalenet cleanup --hosts\n",
				self->hosts->list[h].name, MULTIHOST_STOP_NOW_MS);
			rc = -EIO;
		} else if (r) {
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
		agentlink_close(&(*self)->links[h], stop_now((*self)->interrupted) ? 1000 : 10000);
	free((*self)->links);
	free((*self)->clock);
	free((*self)->underlay_ns);
	for (size_t h = 0; (*self)->cs && h < (*self)->hosts->n; h++)
		free((*self)->cs[h]);
	free((*self)->cs);
	free((*self)->n_cs);
	free((*self)->next_refresh_ns);
	free((*self)->refresh_from_ns);
	free((*self)->refresh_unanswered);
	free((*self)->prefixes);
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

int64_t multihost_underlay_ns(const struct multihost *self, size_t a, size_t b)
{
	return a < self->hosts->n && b < self->hosts->n ? self->underlay_ns[a * self->hosts->n + b] : 0;
}

/* The underlay's one-way delay a -> b in whole microseconds (what compensation subtracts). */
static uint32_t underlay_us(const struct multihost *self, size_t a, size_t b)
{
	return (uint32_t)((multihost_underlay_ns(self, a, b) + 500) / 1000);
}

/* The endpoints of a built run: its nodes, then the hub (unshaped) when the build has one. */
static size_t ep_count(const struct multihost *self, const struct plan_run *run)
{
	return run->n_nodes + (self->hub_host != SIZE_MAX);
}

static size_t ep_host(const struct multihost *self, const struct placement *p, size_t k)
{
	return k < p->n_nodes ? p->host_of[k] : self->hub_host;
}

static const char *ep_name(const struct plan_run *run, size_t k)
{
	return k < run->n_nodes ? run->nodes[k].name : "hub";
}

int multihost_compensation(const struct multihost *self, const struct plan_run *run, const struct placement *p,
			   size_t i, size_t j, enum multihost_comp *where, uint32_t *u_us, char *err, size_t errlen)
{
	size_t hi = ep_host(self, p, i), hj = ep_host(self, p, j);
	uint32_t up = i < run->n_nodes ? run->nodes[i].up.delay_us : 0;
	uint32_t down = j < run->n_nodes ? run->nodes[j].down.delay_us : 0;
	*where = MULTIHOST_COMP_NONE;
	*u_us = 0;
	if (i >= ep_count(self, run) || j >= ep_count(self, run))
		return -EINVAL;
	if (hi == hj || i == j)
		return 0;
	*u_us = underlay_us(self, hi, hj);
	if (!*u_us || (uint64_t)up + down == 0)
		return 0;       /* no delay configured on this path: nothing to emulate or subtract */
	if (down >= *u_us)
		*where = MULTIHOST_COMP_RECEIVER;
	else if (up >= *u_us)
		*where = MULTIHOST_COMP_SENDER;
	else {
		const char *host_i = self->hosts->list[hi].name, *host_j = self->hosts->list[hj].name;
		if ((uint64_t)up + down < *u_us)
			snprintf(err, errlen, "link %s -> %s crosses hosts %s -> %s: its configured delay %u us (%s up %u + "
				 "%s down %u) is less than the underlay's own one-way delay, %u us, measured between them",
				 ep_name(run, i), ep_name(run, j), host_i, host_j, up + down, ep_name(run, i), up,
				 ep_name(run, j), down, *u_us);
		else
			snprintf(err, errlen, "link %s -> %s crosses hosts %s -> %s: neither its %s up delay (%u us) nor its "
				 "%s down delay (%u us) alone holds the underlay's one-way delay of %u us (the compensation "
				 "is taken from one end; place the two on one host or give one end at least that)",
				 ep_name(run, i), ep_name(run, j), host_i, host_j, ep_name(run, i), up,
				 ep_name(run, j), down, *u_us);
		return -ERANGE;
	}
	return 0;
}

/* One request answered "ok..." by host h, else an error line. */
static int request_ok(struct multihost *self, size_t h, const char *req, char *reply, size_t len, FILE *err_out)
{
	int rc = setup_request(self, h, req, reply, len, 30000);
	if (rc == -EINTR)
		return rc;      /* stopping at once: no error of the host's */
	if (rc || strncmp(reply, "ok", 2)) {
		fprintf(err_out, "stalenet: host %s: %s\n", self->hosts->list[h].name, rc ? strerror(-rc) : reply);
		return rc ? rc : -EIO;
	}
	return 0;
}

/* Node i's class for its peers on host g in direction d (up: the peers it sends to whose
 * receiving end does not compensate; down: every sender on g), when it compensates for any:
 * "shapepeers NAME DIR hG ADDRS UNDERLAY_US TOKENS". 0 = none needed,
 * 1 = req written, -errno. */
static int peer_class(const struct multihost *self, const struct plan_run *run, const struct placement *p, size_t i,
		      int d, size_t g, char *req, size_t len)
{
	size_t pos = 0, n = 0;
	uint32_t u = 0;
	const struct link_params *own = d ? &run->nodes[i].down : &run->nodes[i].up;
	int w = snprintf(req, len, "shapepeers %s %s h%zu", run->nodes[i].name, d ? "down" : "up", g);
	if (w < 0 || (size_t)w >= len)
		return -E2BIG;
	pos = (size_t)w;
	for (size_t j = 0; j < ep_count(self, run); j++) {
		enum multihost_comp where;
		char err[16];
		if (ep_host(self, p, j) != g || g == p->host_of[i])
			continue;
		if (multihost_compensation(self, run, p, d ? j : i, d ? i : j, &where, &u, err, sizeof err) < 0)
			return -ERANGE;
		if (where != (d ? MULTIHOST_COMP_RECEIVER : MULTIHOST_COMP_SENDER))
			continue;
		struct in_addr a = { htonl(TESTBED_DEFAULT_SUBNET + (uint32_t)j + 1) };
		char b[INET_ADDRSTRLEN];
		if (!appendf(req, len, &pos, "%c%s", n++ ? ',' : ' ', inet_ntop(AF_INET, &a, b, sizeof b)))
			return -E2BIG;
	}
	if (!n)
		return 0;
	/* the direction's own parameters and the underlay's delay: the agent subtracts it, now and
	 * at every reshape (u <= delay: multihost_compensation chose this end for it) */
	char tokens[1024];
	int t = link_params_format(own, tokens, sizeof tokens);
	if (t < 0 || (size_t)t >= sizeof tokens || !appendf(req, len, &pos, " %u %s", u, t ? tokens : ""))
		return -E2BIG;
	return 1;
}

int multihost_shape(struct multihost *self, const struct plan_run *run, const struct placement *p,
		    const char *want, bool trace, const char **backend, FILE *err_out)
{
	char reply[AGENT_LINE_MAX], req[AGENT_LINE_MAX];
	size_t n_comp = 0;
	uint32_t u_min = UINT32_MAX, u_max = 0;
	/* every path across hosts checked before anything is shaped */
	for (size_t i = 0; i < ep_count(self, run); i++)
		for (size_t j = 0; j < ep_count(self, run); j++) {
			enum multihost_comp where;
			uint32_t u;
			char err[512];
			if (multihost_compensation(self, run, p, i, j, &where, &u, err, sizeof err) < 0) {
				fprintf(err_out, "stalenet: %s\n", err);
				return -ERANGE;
			}
			if (where != MULTIHOST_COMP_NONE) {
				n_comp++;
				u_min = u < u_min ? u : u_min;
				u_max = u > u_max ? u : u_max;
			}
		}
	if (n_comp)
		fprintf(err_out, "stalenet: delay compensation: %zu path(s) across hosts shaped %u..%u us less (the "
			"underlay's one-way delay)\n", n_comp, u_min, u_max);
	for (size_t h = 0; h < self->hosts->n; h++) {
		snprintf(req, sizeof req, "shaper %s", want);
		if (host_used(p, h) && request_ok(self, h, req, reply, sizeof reply, err_out))
			return -EIO;
	}
	for (size_t i = 0; i < run->n_nodes; i++) {
		const struct link_params *dirs[2] = { &run->nodes[i].up, &run->nodes[i].down };
		size_t h = p->host_of[i];
		for (int d = 0; d < 2; d++) {
			char tokens[1024];
			int n = link_params_format(dirs[d], tokens, sizeof tokens), rc;
			if (n < 0 || (size_t)n >= sizeof tokens)
				return -EINVAL;
			bool changes = trace;
			for (size_t e = 0; e < run->n_events; e++)
				changes = changes || run->events[e].node == i;
			if (n == 0 && !changes)
				continue;       /* unshaped and never changed: left alone, as on one host */
			snprintf(req, sizeof req, "shape %s %s %s", run->nodes[i].name, d ? "down" : "up", tokens);
			if ((rc = request_ok(self, h, req, reply, sizeof reply, err_out)))
				return rc;
			const char *b = !strcmp(reply + 3, "nfq") ? "nfq" : "kernel";
			if (*backend && strcmp(*backend, b))
				fprintf(err_out, "stalenet: host %s shapes links with %s, others with %s (meta.json says %s)\n",
					self->hosts->list[h].name, b, *backend, *backend);
			else
				*backend = b;
			/* the paths to and from other hosts: their delay less the underlay's */
			for (size_t g = 0; g < self->hosts->n; g++) {
				if (g == h || !host_used(p, g))
					continue;
				if ((rc = peer_class(self, run, p, i, d, g, req, sizeof req)) < 0) {
					fprintf(err_out, "stalenet: node %s: too many peers for one request\n", run->nodes[i].name);
					return rc;
				}
				if (rc && (rc = request_ok(self, h, req, reply, sizeof reply, err_out)))
					return rc;
			}
		}
	}
	return 0;
}

const struct clocksync_estimate *multihost_clock(const struct multihost *self, size_t i)
{
	return &self->clock[i];
}

/* Host h's CLOCK_MONOTONIC at our t (ns), by its measured offset and drift. */
static int64_t to_host_clock(const struct multihost *self, size_t h, int64_t t)
{
	return t + clocksync_offset_at(&self->clock[h], t);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* got fresh exchanges with host h into its window, the estimate fitted again. */
static int fold_clock(struct multihost *self, size_t h, const struct clocksync_sample *fresh, size_t got)
{
	struct clocksync_estimate e;
	if (log_get_level() >= LOG_DEBUG && got) {
		/* the exchanges' round trips (what the estimate's filter and bound are made of) */
		int64_t rt[MULTIHOST_CLOCK_REFRESH_N];
		size_t k = got < MULTIHOST_CLOCK_REFRESH_N ? got : MULTIHOST_CLOCK_REFRESH_N;
		for (size_t i = 0; i < k; i++)
			rt[i] = (fresh[i].t4_ns - fresh[i].t1_ns) - (fresh[i].t3_ns - fresh[i].t2_ns);
		qsort(rt, k, sizeof rt[0], cmp_i64);
		log_debug("host %s: clock refresh: %zu exchanges, round trip min %.1f us, median %.1f us, max %.1f us",
			  self->hosts->list[h].name, k, rt[0] / 1e3, rt[k / 2] / 1e3, rt[k - 1] / 1e3);
	}
	/* the window keeps the latest exchanges: a drift that changes over hours is followed */
	size_t n = self->n_cs[h], add = got;
	if (n + add > MULTIHOST_CLOCK_WINDOW) {
		size_t drop = n + add - MULTIHOST_CLOCK_WINDOW;
		memmove(self->cs[h], self->cs[h] + drop, (n - drop) * sizeof *self->cs[h]);
		n -= drop;
	}
	memcpy(self->cs[h] + n, fresh, add * sizeof *fresh);
	self->n_cs[h] = n + add;
	int rc = clocksync_estimate(self->cs[h], self->n_cs[h], &e);
	if (rc == 0)
		self->clock[h] = e;
	return rc;
}

int multihost_clock_refresh(struct multihost *self, size_t h)
{
	struct clocksync_sample fresh[MULTIHOST_CLOCK_REFRESH_N];
	if (h >= self->hosts->n || !self->links[h] || !self->cs[h])
		return -EHOSTDOWN;
	int got = agentlink_clock_refresh(self->links[h], MULTIHOST_CLOCK_REFRESH_N, fresh, 5000);
	if (got < 0)
		return got;
	return fold_clock(self, h, fresh, (size_t)got);
}

/* Host h's background refresh ended: the exchanges answered by now folded in; none answered
 * (the host did not answer within MULTIHOST_CLOCK_REFRESH_MS) is said once, and the host is
 * left out of the refreshes until it answers (refresh_tick). */
static void refresh_end(struct multihost *self, size_t h, FILE *err_out)
{
	struct clocksync_sample fresh[MULTIHOST_CLOCK_REFRESH_N];
	size_t got = agentlink_clock_end(self->links[h], fresh, MULTIHOST_CLOCK_REFRESH_N);
	self->refresh_from_ns[h] = 0;
	if (got) {
		int r = fold_clock(self, h, fresh, got);
		if (r < 0)
			fprintf(err_out, "stalenet: host %s: clock refresh: %s\n", self->hosts->list[h].name, strerror(-r));
	} else if (!self->refresh_unanswered[h]) {
		self->refresh_unanswered[h] = true;
		fprintf(err_out, "stalenet: host %s: clock refresh: no answer within %d ms; its clock is not measured "
			"again until it answers (the estimate so far is kept)\n", self->hosts->list[h].name,
			MULTIHOST_CLOCK_REFRESH_MS);
	}
}

/* Host h's clock refresh during a run, never waiting: begun when due (refresh is false once the
 * run stops) and no other host's is under way, unless its last exchange is still unanswered;
 * ended when every exchange is answered or MULTIHOST_CLOCK_REFRESH_MS after its beginning,
 * whatever came by then kept. The answers are read with the host's other lines (agentlink). */
static void refresh_tick(struct multihost *self, size_t h, bool refresh, int64_t now, FILE *err_out)
{
	struct agentlink *l = self->links[h];
	if (self->refresh_from_ns[h]) {
		if (!agentlink_clock_busy(l) || now - self->refresh_from_ns[h] >= (int64_t)MULTIHOST_CLOCK_REFRESH_MS * 1000000)
			refresh_end(self, h, err_out);
		return;
	}
	if (!refresh || now < self->next_refresh_ns[h])
		return;
	/* one host at a time, as the refreshes used to be: exchanges of several hosts at once
	 * share the cores with those hosts' agents and ssh, and their round trips widen */
	for (size_t k = 0; k < self->hosts->n; k++)
		if (self->refresh_from_ns[k])
			return;
	self->next_refresh_ns[h] = now + MULTIHOST_CLOCK_REFRESH_NS;
	if (agentlink_clock_busy(l))
		return;         /* the last one's answer still due: left out (said when it ended) */
	self->refresh_unanswered[h] = false;
	int r = agentlink_clock_begin(l, MULTIHOST_CLOCK_REFRESH_N);
	if (r == 0)
		self->refresh_from_ns[h] = now;
	else if (r != -EPIPE)
		fprintf(err_out, "stalenet: host %s: clock refresh: %s\n", self->hosts->list[h].name, strerror(-r));
}

size_t multihost_clock_exchanges(const struct multihost *self, size_t h, int64_t *span_ns)
{
	size_t n = h < self->hosts->n ? self->n_cs[h] : 0;
	*span_ns = n ? self->cs[h][n - 1].t1_ns - self->cs[h][0].t1_ns : 0;
	return n;
}

/* Where one host's streamed file lines go: the file being written and its first line. */
struct sink {
	FILE *f;
	bool first_row;                 /* the next row is the first of this chunk */
	bool map_t;                     /* the file's first column is t_s: mapped onto our clock */
	char first[AGENT_LINE_MAX];     /* the file's first line when the chunk began, "" if new */
	int64_t origin_ns;              /* the run's origin on our clock, 0 = not started */
	int64_t origin_host_ns;         /* the same instant on the host's clock, as its nodes got it */
	const struct clocksync_estimate *clock;  /* the host's current estimate */
	const char **names;             /* the host's endpoints: the files it may write (hostfiles) */
	size_t n_names;
	bool registry;                  /* it holds the fleet's registry: it may send its store */
	/* a file coming whole (orchestrator/agentfile) into a temporary file, renamed over the
	 * copy when all of it came: rep.fd >= 0 while one is open */
	struct hostfiles_replace rep;
	struct agentfile_rx rx;
	char whole_rel[HOSTFILES_REL_MAX + 1];
	uint64_t whole_bytes;           /* received whole so far (MULTIHOST_WHOLE_BUDGET) */
};

/* A row's leading t_s (seconds from the origin on the host's clock) onto our clock, by the
 * host's current offset and drift estimate; the row is written to f, the decimals kept. */
static void write_mapped(const struct sink *k, const char *row)
{
	char *end;
	double t = strtod(row, &end);
	const char *dot = memchr(row, '.', (size_t)(end - row));
	if (end == row || *end != ',' || !k->origin_ns || !(t >= 0 && t <= 1e8)) {
		fprintf(k->f, "%s\n", row);
		return;
	}
	int decimals = dot ? (int)(end - dot - 1) : 0;
	int64_t host_ns = k->origin_host_ns + (int64_t)(t * 1e9 + 0.5);
	double mapped = (double)(clocksync_to_local(k->clock, host_ns) - k->origin_ns) / 1e9;
	fprintf(k->f, "%.*f%s\n", decimals > 9 ? 9 : decimals, mapped, end);
}

/* The name from the other host shown without its control characters (it is its text, on our
 * terminal). */
static void shown_name(const char *rel, char *shown, size_t len)
{
	size_t i = 0;
	for (; rel[i] && i < len - 1; i++)
		shown[i] = (unsigned char)rel[i] < ' ' || rel[i] == 0x7f ? '?' : rel[i];
	shown[i] = 0;
}

/* A whole file in progress dropped (its copy stays as it was), saying why. */
static void whole_refuse(struct multihost *self, size_t h, struct sink *k, const char *why, FILE *err_out)
{
	if (k->rep.fd < 0)
		return;
	k->whole_bytes += k->rx.got;
	hostfiles_replace_end(&k->rep, false);
	fprintf(err_out, "stalenet: host %s: file %s refused: %s\n", self->hosts->list[h].name, k->whole_rel, why);
}

/* The text file being appended to closed; a whole file still open was cut short. */
static void sink_close(struct multihost *self, size_t h, struct sink *k, FILE *err_out)
{
	if (k->f)
		fclose(k->f);
	k->f = NULL;
	whole_refuse(self, h, k, "cut short", err_out);
}

/* A line of a whole file ("b DATA", "end SIZE") while one is open: the bytes into the
 * temporary file; at "end", the copy replaced when SIZE is what came, else refused. */
static void whole_line(struct multihost *self, size_t h, struct sink *k, const char *line, FILE *err_out)
{
	int rc = agentfile_rx_line(&k->rx, line);
	char why[96];
	if (rc == 1)
		return;
	if (rc == 0) {
		k->whole_bytes += k->rx.got;
		if ((rc = hostfiles_replace_end(&k->rep, true)) < 0)
			fprintf(err_out, "stalenet: host %s: %s: %s\n", self->hosts->list[h].name, k->whole_rel, strerror(-rc));
		return;
	}
	snprintf(why, sizeof why, "%s after %llu bytes",
		 rc == -EFBIG && k->rx.max < AGENTFILE_MAX ? "past the bytes a host may send whole in a run" :
		 rc == -EFBIG ? "larger than a file may be" : rc == -EBADMSG ? "its length is not what came" :
		 rc == -EPROTO ? "a malformed line" : strerror(-rc), (unsigned long long)k->rx.got);
	whole_refuse(self, h, k, why, err_out);
}

/* A "file REL" or "l LINE" line of host h into the run directory dirfd (appended: the host
 * streams each file's new rows in chunks). Returns true when the line was one of those. */
static bool sink_line(struct multihost *self, size_t h, struct sink *k, int dirfd, const char *line, FILE *err_out)
{
	if (k->rep.fd >= 0) {
		if (agentfile_frame_line(line)) {
			whole_line(self, h, k, line, err_out);
			return true;
		}
		whole_refuse(self, h, k, "cut short", err_out);  /* then the line is what it is */
	} else if (agentfile_frame_line(line)) {
		return true;    /* the rest of a refused whole file: nowhere */
	}
	if (!strncmp(line, "whole ", 6)) {
		const char *rel = line + 6;
		char shown[81];
		int rc;
		sink_close(self, h, k, err_out);
		if (!hostfiles_allowed(rel, k->names, k->n_names) &&
		    !hostfiles_whole_allowed(rel, k->names, k->n_names, k->registry)) {
			shown_name(rel, shown, sizeof shown);
			fprintf(err_out, "stalenet: host %s: file %s refused\n", self->hosts->list[h].name, shown);
			return true;
		}
		snprintf(k->whole_rel, sizeof k->whole_rel, "%s", rel);        /* fits: allowed */
		if ((rc = hostfiles_replace_begin(dirfd, rel, &k->rep)) < 0) {
			fprintf(err_out, "stalenet: host %s: %s: %s\n", self->hosts->list[h].name, rel, strerror(-rc));
			return true;
		}
		uint64_t left = k->whole_bytes < MULTIHOST_WHOLE_BUDGET ? MULTIHOST_WHOLE_BUDGET - k->whole_bytes : 0;
		k->rx = (struct agentfile_rx){ .fd = k->rep.fd, .max = left < AGENTFILE_MAX ? left : AGENTFILE_MAX };
		return true;
	}
	if (!strncmp(line, "l ", 2)) {
		/* a header row is written once: a second host's rows of the same file
		 * (partition.csv has a writer on every host) go under the first one's header */
		bool header = k->first_row && ((k->first[0] && !strcmp(line + 2, k->first)) || !k->first[0]);
		if (k->first_row && !k->first[0])
			k->map_t = !strncmp(line + 2, "t_s,", 4);    /* a new file: its header */
		if (k->f && !(k->first_row && k->first[0] && !strcmp(line + 2, k->first))) {
			if (k->map_t && !header)
				write_mapped(k, line + 2);
			else
				fprintf(k->f, "%s\n", line + 2);
		}
		k->first_row = false;
		return true;
	}
	if (strncmp(line, "file ", 5))
		return false;
	sink_close(self, h, k, err_out);
	const char *rel = line + 5;
	if (!hostfiles_allowed(rel, k->names, k->n_names)) {
		/* the rows that follow go nowhere (k->f is NULL) */
		char shown[81];
		shown_name(rel, shown, sizeof shown);
		fprintf(err_out, "stalenet: host %s: file %s refused\n", self->hosts->list[h].name, shown);
		return true;
	}
	k->first[0] = 0;
	int fd = hostfiles_open(dirfd, rel, O_RDONLY, 0);
	FILE *ex = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (fd >= 0 && !ex)
		close(fd);
	if (ex) {
		if (!fgets(k->first, sizeof k->first, ex))
			k->first[0] = 0;
		k->first[strcspn(k->first, "\n")] = 0;
		fclose(ex);
	}
	k->map_t = !strncmp(k->first, "t_s,", 4);
	fd = hostfiles_open(dirfd, rel, O_WRONLY | O_APPEND | O_CREAT, 0644);
	if (fd < 0 || !(k->f = fdopen(fd, "a"))) {
		int e = fd < 0 ? -fd : errno;
		if (fd >= 0)
			close(fd);
		fprintf(err_out, "stalenet: host %s: %s: %s\n", self->hosts->list[h].name, rel, strerror(e));
	}
	k->first_row = true;
	return true;
}

/* The rest of host h's run files into dirfd: "fetch", then file lines until "fetched". */
static int fetch_host(struct multihost *self, size_t h, struct sink *k, int dirfd, FILE *err_out)
{
	char line[AGENT_LINE_MAX];
	int rc;
	if ((rc = agentlink_send(self->links[h], "fetch")))
		return rc;
	/* up to MULTIHOST_FETCH_MS for the whole fetch (-ETIMEDOUT: the caller loses the host);
	 * after a second interruption it gets MULTIHOST_STOP_NOW_MS from then, and what has not
	 * come by then stays on the host (the rest of its lines are passed over by the teardown) */
	int64_t cut = INT64_MAX, whole = clock_now_ns() / 1000000 + MULTIHOST_FETCH_MS;
	for (;;) {
		int64_t now = clock_now_ns() / 1000000, deadline = whole;
		if (stop_now(self->interrupted) && cut == INT64_MAX)
			cut = now + MULTIHOST_STOP_NOW_MS;
		if (deadline > cut)
			deadline = cut;
		if ((rc = recv_line(self, h, line, sizeof line, &deadline, false)) || !strcmp(line, "fetched"))
			break;
		sink_line(self, h, k, dirfd, line, err_out);
	}
	if (rc == -ETIMEDOUT && cut != INT64_MAX)
		rc = -EINTR;
	sink_close(self, h, k, err_out);
	return rc;
}

/* One progress.csv row, as a one-host run writes it: the workers' (and peers') steps. */
static void progress_row(struct csv_writer *w, const struct plan_run *run, const int64_t *step, const bool *waiting,
			 const bool *up, int64_t now_rel)
{
	int64_t steps[MULTIHOST_MAX_NODES];
	size_t counted = 0, alive = 0, nwait = 0;
	for (size_t i = 0; i < run->n_nodes && counted < MULTIHOST_MAX_NODES; i++) {
		enum scenario_role r = run->nodes[i].role;
		if (r != SCENARIO_ROLE_WORKER && r != SCENARIO_ROLE_PEER && r != SCENARIO_ROLE_CENTRAL)
			continue;
		steps[counted++] = step[i];
		if (up[i]) {
			alive++;
			nwait += waiting[i];
		}
	}
	qsort(steps, counted, sizeof steps[0], cmp_i64);
	double med = !counted ? 0 : counted % 2 ? (double)steps[counted / 2] : (steps[counted / 2 - 1] + steps[counted / 2]) / 2.0;
	/* runq_wait_frac and host_cpu_frac empty: the host guard samples one host's scheduler only */
	csv_writer_row(w, "%.3f,%zu,%zu,%ld,%.1f,%ld,,", (double)now_rel / 1e9, alive, nwait, counted ? (long)steps[0] : 0,
		       med, counted ? (long)steps[counted - 1] : 0);
}

/* Node i's two directions as they are now (cur[2i], cur[2i+1]) sent to its host ("reshape";
 * the agent reshapes the per-peer classes with them). Returns how many could not be sent. */
static int reshape(struct multihost *self, const struct placement *p, const struct plan_run *run, size_t i,
		   const struct link_params *cur, const bool *host_lost)
{
	size_t h = p->host_of[i];
	int failed = 0;
	for (int d = 0; d < 2; d++) {
		char tokens[1024], req[AGENT_LINE_MAX];
		int t = link_params_format(&cur[2 * i + d], tokens, sizeof tokens);
		if (host_lost[h] || t < 0 || (size_t)t >= sizeof tokens) {
			failed++;
			continue;
		}
		snprintf(req, sizeof req, "reshape %s %s %s", run->nodes[i].name, d ? "down" : "up", tokens);
		failed += agentlink_send(self->links[h], req) != 0;
	}
	return failed;
}

/* The events.csv row of a planned join or restart (kind) that did not start: the agent refused
 * its launch (why: its "exit -1 WHY") or could not be asked. Not tried again. */
static void start_failed(const char *run_dir, const char *node, const char *kind, const char *host, const char *why)
{
	char d[240];
	snprintf(d, sizeof d, "%s: host %.31s: %.100s; given up", kind, host, why);
	supervise_event(run_dir, "start_failed", node, d);
}

/* Host h lost during a run (its agent's connection ended, or it stopped answering): the file it
 * was sending cut short, its connection closed within close_ms (what it built stays in its
 * journal there, removed by its agent when it finds the connection ended, else by `stalenet
 * cleanup --hosts`), its endpoints still up (of n) counted out, each a node_failed row ("host
 * NAME lost") unless the run was interrupted (they were being stopped, not failing). Returns
 * how many were up. */
static size_t lose_host(struct multihost *self, const struct multihost_nodes_opts *o, size_t n, size_t h,
			struct sink *k, bool *up, bool interrupted, int close_ms, FILE *err_out)
{
	size_t lost = 0;

	sink_close(self, h, k, err_out);
	agentlink_close(&self->links[h], close_ms);
	self->refresh_from_ns[h] = 0;
	for (size_t i = 0; i < n; i++)
		if (ep_host(self, o->p, i) == h && up[i]) {
			char d[96];
			snprintf(d, sizeof d, "host %s lost", self->hosts->list[h].name);
			if (!interrupted)
				supervise_event(o->run_dir, "node_failed", ep_name(o->run, i), d);
			up[i] = false;
			lost++;
		}
	return lost;
}

int multihost_run_nodes(struct multihost *self, const struct multihost_nodes_opts *o, int64_t *origin_ns,
			FILE *err_out)
{
	const struct plan_run *run = o->run;
	const struct hosts *hs = self->hosts;
	/* n: the endpoints launched, the run's nodes and, for the link self-check, the hub */
	size_t n = run->n_nodes + (o->linkcheck && self->hub_host != SIZE_MAX), alive = 0, ready = 0;
	int result = 0;
	bool started = false, stopping = false;
	char line[AGENT_LINE_MAX];
	bool *up = calloc(n, sizeof *up), *is_ready = calloc(n, sizeof *is_ready), *host_lost = calloc(hs->n, sizeof *host_lost);
	bool *waiting = calloc(n, sizeof *waiting);
	int64_t *step = calloc(n, sizeof *step), next_progress = 0;
	struct csv_writer *progress = NULL;
	struct sink *sinks = calloc(hs->n, sizeof *sinks);
	if (!up || !is_ready || !host_lost || !waiting || !step || !sinks || n > MULTIHOST_MAX_NODES ||
	    (o->linkcheck && self->hub_host == SIZE_MAX)) {
		free(sinks);
		free(up);
		free(is_ready);
		free(host_lost);
		free(waiting);
		free(step);
		return 1;
	}
	for (size_t h = 0; h < hs->n; h++)
		sinks[h].rep = (struct hostfiles_replace){ .parentfd = -1, .fd = -1 };
	*origin_ns = 0;
	/* planned churn (join, crash, restart, leave), relative to the origin; -1 = none */
	int64_t (*plan_ns)[4] = calloc(n + 1, sizeof *plan_ns);
	unsigned char *churn = calloc(n + 1, 1);   /* CH_* flags: what of the plan has happened */
	/* a join or restart counts once the host's agent answers its launch ("launched PID"):
	 * until then CH_LAUNCHING; a refusal ("exit -1 WHY") makes it a failed start (CH_FAILED),
	 * not tried again */
	enum { CH_JOINED = 1, CH_KILLED = 2, CH_RESTARTED = 4, CH_LEFT = 8, CH_LAUNCHING = 16, CH_FAILED = 32 };
	for (size_t i = 0; plan_ns && i < n; i++) {
		const struct scenario_straggler *st = i < run->n_nodes && !o->linkcheck ? &run->nodes[i].straggler : NULL;
		static const unsigned bits[4] = { SCENARIO_STRAG_JOIN, SCENARIO_STRAG_CRASH, SCENARIO_STRAG_RESTART,
						  SCENARIO_STRAG_LEAVE };
		for (int k = 0; k < 4; k++)
			plan_ns[i][k] = st && (st->set & bits[k]) ?
				(int64_t)(k == 0 ? st->join_at_us : k == 1 ? st->crash_at_us : k == 2 ? st->restart_at_us
											   : st->leave_at_us) * 1000 : -1;
	}
	if (!plan_ns || !churn)
		result = 1;
	/* the links as they are now, for the changes during the run (timeline, trace) */
	struct link_params *cur = calloc(2 * run->n_nodes + 1, sizeof *cur);
	size_t next_event = 0, next_trace = 0;
	for (size_t i = 0; cur && i < run->n_nodes; i++) {
		cur[2 * i] = run->nodes[i].up;
		cur[2 * i + 1] = run->nodes[i].down;
	}
	if (!cur)
		result = 1;
	/* the files each host may write (hostfiles): its endpoints' own, in the run directory
	 * opened once (every host file is opened relative to it, no symlink followed) */
	size_t stride = run->n_nodes + 1;
	const char **epn = calloc(hs->n * stride, sizeof *epn);
	for (size_t i = 0; epn && i < ep_count(self, run); i++) {
		struct sink *k = &sinks[ep_host(self, o->p, i)];
		if (!k->names)
			k->names = epn + ep_host(self, o->p, i) * stride;
		k->names[k->n_names++] = ep_name(run, i);
		k->registry |= i < run->n_nodes && run->nodes[i].role == SCENARIO_ROLE_REGISTRY;
	}
	int dirfd = open(o->run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!epn || dirfd < 0) {
		fprintf(err_out, "stalenet: %s: %s\n", o->run_dir, epn ? strerror(errno) : "out of memory");
		result = 1;
	}
	/* configurations, then every node launched */
	for (size_t i = 0; i < n && !result; i++) {
		size_t h = ep_host(self, o->p, i);
		char reply[AGENT_LINE_MAX];
		struct kv *kv = i < run->n_nodes ? nodeconf_build(run, i, o->nc, o->linkcheck ? "probe" : NULL) : kv_new();
		snprintf(line, sizeof line, "unconf %s", ep_name(run, i));
		if (setup_request(self, h, line, reply, sizeof reply, 30000) || strcmp(reply, "ok"))
			result = 1;
		if (kv && i == run->n_nodes) {
			/* the reflector on the unshaped hub, as on one host */
			kv_set(kv, "node.name", "hub");
			kv_set(kv, "node.role", "reflector");
			kv_setf(kv, "port.probe", "%u", o->nc->port_probe);
		} else if (kv && o->linkcheck) {
			/* a prober's plan-wide id (see run.c's write_conf), and the hub's clock against
			 * this host's, so its one-way delays hold across hosts */
			kv_setf(kv, "node.index", "%zu", i);
			int64_t now = clock_now_ns();
			kv_setf(kv, "linkcheck.hub_offset_ns", "%lld",
				(long long)(clocksync_offset_at(&self->clock[self->hub_host], now) -
					    clocksync_offset_at(&self->clock[h], now)));
		}
		for (size_t k = 0; kv && k < kv_count(kv) && !result; k++) {
			const char *key, *val;
			char mapped[32];
			kv_entry(kv, k, &key, &val);
			if (!strcmp(key, "run.origin_ns")) {
				/* the provisional origin (before start) on the node's host's clock */
				snprintf(mapped, sizeof mapped, "%lld", (long long)to_host_clock(self, h, o->nc->origin_ns));
				val = mapped;
			}
			if ((size_t)snprintf(line, sizeof line, "conf %s %s %s", ep_name(run, i), key, val) >= sizeof line ||
			    strchr(val, '\n')) {
				fprintf(err_out, "stalenet: node %s: configuration key %s too long for a host\n",
					ep_name(run, i), key);
				result = 1;
				break;
			}
			if (setup_request(self, h, line, reply, sizeof reply, 30000) || strcmp(reply, "ok")) {
				fprintf(err_out, "stalenet: host %s: node %s: %s\n", hs->list[h].name, ep_name(run, i), reply);
				result = 1;
			}
		}
		if (!kv)
			result = 1;
		kv_destroy(&kv);
	}
	/* resources: each node's cgroup on its host, for training (the link self-check runs
	 * unlimited, as on one host) */
	unsigned need = 0;
	for (size_t i = 0; !o->linkcheck && i < run->n_nodes; i++) {
		uint32_t set = run->nodes[i].resources.set;
		need |= (set & SCENARIO_RES_CPU ? CGROUP_CPU : 0) | (set & SCENARIO_RES_CPUS ? CGROUP_CPUSET : 0) |
			(set & SCENARIO_RES_MEMORY ? CGROUP_MEMORY : 0);
	}
	for (size_t i = 0; need && i < run->n_nodes && !result; i++) {
		const struct scenario_resources *re = &run->nodes[i].resources;
		char cpus[1024] = "-", reply[AGENT_LINE_MAX];
		size_t h = o->p->host_of[i];
		if (!re->set)
			continue;
		if ((re->set & SCENARIO_RES_CPUS) && cgroup_format_cpus(re->cpus, cpus, sizeof cpus) <= 0)
			snprintf(cpus, sizeof cpus, "-");
		snprintf(line, sizeof line, "limit %s %u %.4f %s %llu", run->nodes[i].name, need,
			 re->set & SCENARIO_RES_CPU ? re->cpu : 0.0, cpus,
			 (unsigned long long)(re->set & SCENARIO_RES_MEMORY ? re->memory_bytes : 0));
		if (setup_request(self, h, line, reply, sizeof reply, 30000) || strcmp(reply, "ok")) {
			fprintf(err_out, "stalenet: host %s: node %s: %s\n", hs->list[h].name, run->nodes[i].name, reply);
			result = 1;
		}
	}
	for (size_t i = 0; i < n && !result; i++) {
		if (plan_ns[i][0] >= 0)
			continue;       /* joins later */
		snprintf(line, sizeof line, "launch %s", ep_name(run, i));
		if (agentlink_send(self->links[ep_host(self, o->p, i)], line))
			result = 1;
		else
			up[i] = true, alive++;
	}
	/* a setup cut short by a second interruption is the interruption, not a failure */
	if (result && stop_now(o->interrupted))
		result = 2;
	if (result)
		stopping = true;
	/* grace_kill: when the nodes that ignored stop were killed (the graceful stop's bound) */
	int64_t t_launch = clock_now_ns(), stop_sent = 0, killed_at = 0, grace_kill = 0;
	/* the graceful stop's bound across hosts: stop.grace and the SIGTERM's grace, as on one host */
	const int64_t grace_ns = (o->stop_grace_ns > 0 ? o->stop_grace_ns : (int64_t)SUPERVISE_STOP_GRACE_MS * 1000000) +
				 (int64_t)SUPERVISE_TERM_GRACE_MS * 1000000;
	bool told_late = false;
	for (;;) {
		int64_t now = clock_now_ns();
		/* the run goes on while a node runs, or a planned join or restart is still to come */
		size_t planned = 0;
		for (size_t i = 0; !stopping && i < n; i++)
			planned += (plan_ns[i][0] >= 0 && !(churn[i] & (CH_JOINED | CH_FAILED))) ||
				   (plan_ns[i][2] >= 0 && (churn[i] & CH_KILLED) && !(churn[i] & (CH_RESTARTED | CH_FAILED)));
		if (!alive && !planned)
			break;
		/* planned churn at its time, as on one host (orchestrator/supervise) */
		for (size_t i = 0; started && !stopping && i < n; i++) {
			int64_t rel = now - *origin_ns;
			size_t h = ep_host(self, o->p, i);
			const char *nm = ep_name(run, i);
			if (host_lost[h])
				continue;
			if (plan_ns[i][0] >= 0 && !(churn[i] & (CH_JOINED | CH_LAUNCHING | CH_FAILED)) && rel >= plan_ns[i][0]) {
				snprintf(line, sizeof line, "launch %s", nm);
				if (!agentlink_send(self->links[h], line)) {
					churn[i] |= CH_LAUNCHING;
					up[i] = true, alive++;
				} else {
					/* the agent is gone (its loss is reported below) */
					churn[i] |= CH_FAILED;
					start_failed(o->run_dir, nm, "join", hs->list[h].name, "the request could not be sent");
				}
			}
			if (plan_ns[i][1] >= 0 && up[i] && !(churn[i] & (CH_KILLED | CH_RESTARTED)) && rel >= plan_ns[i][1]) {
				churn[i] |= CH_KILLED;
				snprintf(line, sizeof line, "kill %s", nm);
				agentlink_send(self->links[h], line);
				supervise_event(o->run_dir, "crash", nm, "SIGKILL");
			}
			if (plan_ns[i][2] >= 0 && !up[i] && (churn[i] & CH_KILLED) &&
			    !(churn[i] & (CH_RESTARTED | CH_LAUNCHING | CH_FAILED)) && rel >= plan_ns[i][2]) {
				is_ready[i] = false;
				snprintf(line, sizeof line, "launch %s", nm);
				if (!agentlink_send(self->links[h], line)) {
					churn[i] |= CH_LAUNCHING;
					up[i] = true, alive++;
				} else {
					churn[i] |= CH_FAILED;
					start_failed(o->run_dir, nm, "restart", hs->list[h].name, "the request could not be sent");
				}
			}
			if (plan_ns[i][3] >= 0 && up[i] && !(churn[i] & CH_LEFT) && rel >= plan_ns[i][3]) {
				churn[i] |= CH_LEFT;
				snprintf(line, sizeof line, "send %s stop", nm);
				agentlink_send(self->links[h], line);
				supervise_event(o->run_dir, "leave", nm, "");
			}
		}
		if (started && progress && now - *origin_ns >= next_progress) {
			progress_row(progress, run, step, waiting, up, now - *origin_ns);
			next_progress = now - *origin_ns + 100000000;
		}
		/* the link self-check: every prober done, the hub (a service) is stopped */
		if (o->linkcheck && started && !stopping && alive == (up[n - 1] ? 1u : 0u))
			stopping = true;
		if (o->interrupted && *o->interrupted && !told_late) {
			/* the first once the run has ended of itself (stop.time): its work is done, it
			 * stays so */
			told_late = true;
			if (stopping && started && !result && !o->linkcheck)
				fprintf(err_out, "stalenet: interrupted after the run's end (stop.time reached): it stays "
					"complete; its nodes' ends and files are still awaited (interrupt again to stop "
					"at once)\n");
		}
		if (!stopping && ((o->interrupted && *o->interrupted) ||
				  (!started && now - t_launch > (int64_t)o->ready_timeout_ms * 1000000) ||
				  (started && o->stop_after_ns && now - *origin_ns >= o->stop_after_ns))) {
			if (o->interrupted && *o->interrupted)
				result = 2;
			else if (!started) {
				fprintf(err_out, "stalenet: nodes not ready within %d ms\n", o->ready_timeout_ms);
				result = 1;
			}
			stopping = true;
		}
		if (o->ended && !*o->ended && stopping && started && !result && !o->linkcheck)
			*o->ended = 1;
		if (stop_now(o->interrupted) && !killed_at) {
			/* stop at once: every node still up killed by its agent (SIGKILL), the exits
			 * waited for a bounded time below; what runs on a host that does not answer
			 * goes with its teardown */
			killed_at = now;
			if (!result)
				result = 2;
			stopping = true;        /* (the stop row follows, when not yet written) */
			for (size_t i = 0; i < n; i++)
				if (up[i] && !host_lost[ep_host(self, o->p, i)]) {
					snprintf(line, sizeof line, "kill %s", ep_name(run, i));
					agentlink_send(self->links[ep_host(self, o->p, i)], line);
				}
		}
		if (killed_at && now - killed_at > (int64_t)MULTIHOST_STOP_NOW_MS * 1000000) {
			for (size_t h = 0; h < hs->n; h++) {
				size_t left = 0;
				for (size_t i = 0; i < n; i++)
					left += up[i] && ep_host(self, o->p, i) == h;
				if (left && !host_lost[h])
					fprintf(err_out, "stalenet: host %s: %zu node(s) not reported ended %d ms after "
						"their kill; they go with the host's teardown\n", hs->list[h].name, left,
						MULTIHOST_STOP_NOW_MS);
			}
			break;
		}
		if (stopping && !stop_sent) {
			stop_sent = now;
			/* an interruption is logged in every phase (the link self-check, before the
			 * start): what follows it is no node's failure */
			if (result == 2 || (started && !o->linkcheck))
				supervise_event(o->run_dir, "stop", "all", result == 2 ? "interrupted" : result ? "failure" : "time");
			for (size_t i = 0; i < n; i++)
				if (up[i] && !host_lost[ep_host(self, o->p, i)]) {
					snprintf(line, sizeof line, "send %s stop", ep_name(run, i));
					agentlink_send(self->links[ep_host(self, o->p, i)], line);
				}
		}
		if (stop_sent && !killed_at && !grace_kill &&
		    now - stop_sent > grace_ns) {
			/* the graceful stop's bound, as on one host: a node that ignores stop that long is
			 * killed (no SIGTERM step in between across hosts: the kill comes when one host's
			 * SIGKILL does) */
			grace_kill = now;
			for (size_t i = 0; i < n; i++)
				if (up[i] && !host_lost[ep_host(self, o->p, i)]) {
					fprintf(err_out, "stalenet: node %s on host %s not ended %g s after the stop: killed\n",
						ep_name(run, i), hs->list[ep_host(self, o->p, i)].name,
						(double)grace_ns / 1e9);
					snprintf(line, sizeof line, "kill %s", ep_name(run, i));
					agentlink_send(self->links[ep_host(self, o->p, i)], line);
				}
		}
		if (grace_kill && !killed_at && now - grace_kill > (int64_t)MULTIHOST_STOP_NOW_MS * 1000000) {
			/* a host that has not reported those ends MULTIHOST_STOP_NOW_MS after their kill
			 * does not answer (its agent stopped, hung or cut off): it is lost, so that the
			 * run ends; the other hosts are fetched and torn down as usual */
			for (size_t h = 0; h < hs->n; h++) {
				size_t left = 0;
				for (size_t i = 0; i < n; i++)
					left += up[i] && ep_host(self, o->p, i) == h;
				if (!left || host_lost[h])
					continue;
				host_lost[h] = true;
				fprintf(err_out, "stalenet: host %s: lost: its agent does not answer (%zu node(s) not reported "
					"ended %g s after the stop, %d s after their kill); its run files not fetched (the "
					"rows it streamed are kept); its agent removes its share once it finds its "
					"connection ended, else run: stalenet cleanup --hosts\n", hs->list[h].name, left,
					(double)(grace_ns + (int64_t)MULTIHOST_STOP_NOW_MS * 1000000) / 1e9,
					MULTIHOST_STOP_NOW_MS / 1000);
				alive -= lose_host(self, o, n, h, &sinks[h], up, result == 2, 1000, err_out);
				if (!result)
					result = 1;
			}
		}
		/* what is queued for each host written as far as its pipe takes it; a host that
		 * overflowed its queue or takes none of it for MULTIHOST_OUT_STALL_MS does not read
		 * its input (hung, or its channel stuck): lost, as one that does not answer */
		for (size_t h = 0; h < hs->n; h++) {
			if (host_lost[h] || !host_used(o->p, h))
				continue;
			int fr = agentlink_flush(self->links[h]);
			int64_t stalled = agentlink_out_stalled_ms(self->links[h]);
			if (fr != -ENOBUFS && stalled < MULTIHOST_OUT_STALL_MS)
				continue;       /* (a broken pipe: the agent's end is read below) */
			char why[96];
			if (fr == -ENOBUFS)
				snprintf(why, sizeof why, "more than %u bytes queued", AGENTLINK_OUT_MAX);
			else
				snprintf(why, sizeof why, "%zu bytes queued, none of it taken for %d s",
					 agentlink_out_pending(self->links[h]), MULTIHOST_OUT_STALL_MS / 1000);
			host_lost[h] = true;
			fprintf(err_out, "stalenet: host %s: lost: its agent does not take its input (%s); its nodes are "
				"lost; its run files not fetched (the rows it streamed are kept); its agent removes its "
				"share once it finds its connection ended, else run: stalenet cleanup --hosts\n",
				hs->list[h].name, why);
			alive -= lose_host(self, o, n, h, &sinks[h], up, result == 2, 1000, err_out);
			if (!o->on_failure_continue && !stopping) {
				result = 1;
				stopping = true;
			}
		}
		/* up to 1 ms for any host to say something (the schedule above is checked at least
		 * that often), then what every host has sent, a bounded number of lines each. The
		 * host whose clock is being measured comes first: an answer read late only widens
		 * its exchange's round trip, but the filter then keeps fewer of them. For up to
		 * MULTIHOST_CLOCK_DEFER_NS after an exchange is sent, the others' lines wait (an
		 * answer comes within a round trip, about 0.1 ms; a host that does not answer
		 * defers them that long once), then they are read a few at a time */
		size_t first = 0;
		while (first < hs->n && !self->refresh_from_ns[first])
			first++;
		int64_t sent = first < hs->n ? agentlink_clock_sent_ns(self->links[first]) : 0;
		bool defer = sent && clock_now_ns() - sent < MULTIHOST_CLOCK_DEFER_NS;
		if (defer)
			agentlink_wait(&self->links[first], 1, 1);
		else
			agentlink_wait(self->links, hs->n, 1);
		for (size_t k = 0; k < hs->n; k++) {
			size_t h = (first + k) % hs->n;
			if (host_lost[h] || !host_used(o->p, h))
				continue;
			int rc = -ETIMEDOUT, lines = 0, budget = first < hs->n && k ? (defer ? 0 : 8) : 512;
			while (lines++ < budget && !(rc = agentlink_recv(self->links[h], line, sizeof line, 0))) {
				struct agentlink_event ev;
				if (sink_line(self, h, &sinks[h], dirfd, line, err_out) ||
				    agentlink_parse_event(line, &ev))
					continue;
				const char *name = ev.name, *what = ev.what;
				size_t i = 0;
				while (i < n && (ep_host(self, o->p, i) != h || strcmp(ep_name(run, i), name)))
					i++;
				if (i == n)
					continue;
				if (!strncmp(what, "launched ", 9) && (churn[i] & CH_LAUNCHING)) {
					/* the agent started it: now it has joined (or restarted) */
					bool join = !(churn[i] & CH_JOINED) && plan_ns[i][0] >= 0;
					churn[i] = (unsigned char)((churn[i] & ~CH_LAUNCHING) | (join ? CH_JOINED : CH_RESTARTED));
					supervise_event(o->run_dir, join ? "join" : "restart", name, "");
				} else if (ev.kind == AGENTLINK_EV_EXIT && (churn[i] & CH_LAUNCHING) && up[i]) {
					/* the agent refused the launch ("exit -1 WHY"): a failed start */
					bool join = !(churn[i] & CH_JOINED) && plan_ns[i][0] >= 0;
					churn[i] = (unsigned char)((churn[i] & ~CH_LAUNCHING) | CH_FAILED);
					up[i] = false;
					alive--;
					start_failed(o->run_dir, name, join ? "join" : "restart", hs->list[h].name, what);
					fprintf(err_out, "stalenet: node %s on host %s: planned %s failed: %s\n", name,
						hs->list[h].name, join ? "join" : "restart", what);
					if (!o->on_failure_continue && !stopping) {
						result = 1;
						stopping = true;
					}
				} else if (!strncmp(what, "reshaped ", 9)) {
					if (strstr(what, " fail ") || strstr(what, "; "))
						fprintf(err_out, "stalenet: host %s: node %s %s\n", hs->list[h].name, name, what);
				} else if (ev.kind == AGENTLINK_EV_READY && !is_ready[i]) {
					is_ready[i] = true;
					ready++;
					if (started && !stopping) {
						/* a late joiner or a restarted node: the run's origin, as on one host */
						snprintf(line, sizeof line, "send %s start %lld rejoin", name,
							 (long long)to_host_clock(self, h, *origin_ns));
						agentlink_send(self->links[h], line);
					} else if (stopping) {
						snprintf(line, sizeof line, "send %s stop", name);
						agentlink_send(self->links[h], line);
					}
				} else if (ev.kind == AGENTLINK_EV_STATUS) {
					step[i] = ev.step;
					waiting[i] = ev.waiting != 0;
				} else if (ev.kind == AGENTLINK_EV_EXIT && up[i]) {
					int st = ev.status;
					up[i] = false;
					alive--;
					/* a planned crash is no failure; nor a kill after stop, nor any end after
					 * an interruption (a node stopped before its start exits 1) */
					bool planned_kill = (churn[i] & CH_KILLED) && !(churn[i] & CH_RESTARTED);
					if (st != 0 && !planned_kill && result != 2 && !(stopping && WIFSIGNALED(st))) {
						char d[240], mem[32] = "?";
						if (i < run->n_nodes && strstr(what, " oom_killed")) {
							/* named first, as on one host */
							cgroup_format_size(run->nodes[i].resources.memory_bytes, mem, sizeof mem);
							snprintf(d, sizeof d, "oom_killed: memory limit %s reached; host %.31s: %.100s",
								 mem, hs->list[h].name, what);
						} else {
							snprintf(d, sizeof d, "host %.31s: %.100s", hs->list[h].name, what);
						}
						supervise_event(o->run_dir, "node_failed", name, d);
						fprintf(err_out, "stalenet: node %s on host %s died: %s\n", name, hs->list[h].name, what);
						if (!o->on_failure_continue && !stopping) {
							result = 1;
							stopping = true;
						}
					}
				}
			}
			if (lines > budget)
				rc = -ETIMEDOUT;        /* more next time round */
			if (rc != -ETIMEDOUT) {
				/* the agent is gone: its nodes with it (they die with it) */
				host_lost[h] = true;
				fprintf(err_out, "stalenet: host %s: agent lost (%s); its nodes are lost\n", hs->list[h].name,
					strerror(-rc));
				alive -= lose_host(self, o, n, h, &sinks[h], up, result == 2, 5000, err_out);
				if (!o->on_failure_continue && !stopping) {
					result = 1;
					stopping = true;
				}
			}
		}
		/* link changes at their time (timeline, then trace rows), sent to the node's host */
		while (started && !stopping && !o->linkcheck && next_event < run->n_events &&
		       clock_now_ns() - *origin_ns >= (int64_t)run->events[next_event].at_us * 1000) {
			const struct plan_event *e = &run->events[next_event++];
			char links[1100], detail[1200];
			cur[2 * e->node] = e->up;
			cur[2 * e->node + 1] = e->down;
			int failed = reshape(self, o->p, run, e->node, cur, host_lost);
			plan_format_links(&e->up, &e->down, links, sizeof links);
			snprintf(detail, sizeof detail, "%s; late %.2fms%s", links,
				 (double)(clock_now_ns() - *origin_ns - (int64_t)e->at_us * 1000) / 1e6, failed ? "; FAILED" : "");
			supervise_event(o->run_dir, "link_change", run->nodes[e->node].name, detail);
		}
		while (started && !stopping && !o->linkcheck && o->trace && next_trace < o->trace->n &&
		       clock_now_ns() - *origin_ns >= (int64_t)o->trace->rows[next_trace].at_us * 1000) {
			const struct linktrace_row *row = &o->trace->rows[next_trace++];
			char detail[200];
			int failed = 0;
			for (size_t i = 0; i < run->n_nodes; i++) {
				linktrace_apply(row, &cur[2 * i]);
				linktrace_apply(row, &cur[2 * i + 1]);
				failed += reshape(self, o->p, run, i, cur, host_lost);
			}
			snprintf(detail, sizeof detail, "delay %.3fms loss %.4f rate %llubit; late %.2fms%s",
				 cur[0].delay_us / 1e3, cur[0].loss_ppm / 1e6, (unsigned long long)cur[0].rate_bps,
				 (double)(clock_now_ns() - *origin_ns - (int64_t)row->at_us * 1000) / 1e6,
				 failed ? "; FAILED" : "");
			supervise_event(o->run_dir, "trace_step", "all", detail);
		}
		/* each host's clock measured again every MULTIHOST_CLOCK_REFRESH_NS while the nodes
		 * run, in the background: the answers come with the host's other lines */
		for (size_t h = 0; started && h < hs->n; h++)
			if (!host_lost[h] && host_used(o->p, h))
				refresh_tick(self, h, !stopping, clock_now_ns(), err_out);
		size_t initial = 0;
		for (size_t i = 0; i < n; i++)
			initial += plan_ns[i][0] < 0;
		if (!started && !stopping && ready == initial) {
			/* one origin on our clock, each host's node told it on its own clock */
			started = true;
			*origin_ns = clock_now_ns();
			clock_set_origin_ns(*origin_ns);
			char path[PATH_MAX];
			snprintf(path, sizeof path, "%.3000s/progress.csv", o->run_dir);
			if (!o->linkcheck) {
				progress = csv_writer_open(path, TRACE_HEADER_PROGRESS);
				supervise_event(o->run_dir, "start", "all", "");
			}
			for (size_t h = 0; h < hs->n; h++) {
				/* rows streamed from now on are mapped from the host's clock onto ours */
				sinks[h].origin_ns = *origin_ns;
				sinks[h].origin_host_ns = to_host_clock(self, h, *origin_ns);
				sinks[h].clock = &self->clock[h];
				self->next_refresh_ns[h] = *origin_ns + MULTIHOST_CLOCK_REFRESH_NS;
			}
			for (size_t i = 0; i < n; i++) {
				size_t h = ep_host(self, o->p, i);
				if (!up[i])
					continue;       /* a later joiner gets it when ready */
				snprintf(line, sizeof line, "send %s start %lld", ep_name(run, i),
					 (long long)to_host_clock(self, h, *origin_ns));
				agentlink_send(self->links[h], line);
			}
			fprintf(err_out, "stalenet: %zu nodes ready on %zu hosts: started\n", n, hs->n);
		}
	}
	if (progress)
		progress_row(progress, run, step, waiting, up, clock_now_ns() - *origin_ns);
	csv_writer_close(&progress);
	/* a background refresh under way ends with what came */
	for (size_t h = 0; h < hs->n; h++)
		if (!host_lost[h] && self->links[h] && self->refresh_from_ns[h])
			refresh_end(self, h, err_out);
	for (size_t h = 0; h < hs->n; h++) {
		int r = -EINTR;
		bool answering = true;
		if (host_lost[h] || !host_used(o->p, h))
			continue;
		/* stopping at once, a host that did not report its nodes' ends is not asked */
		for (size_t i = 0; killed_at && i < n; i++)
			answering &= !(up[i] && ep_host(self, o->p, i) == h);
		if (answering)
			r = fetch_host(self, h, &sinks[h], dirfd, err_out);
		if (r == -EINTR) {
			/* the rows it streamed during the run are here; the rest stays on the host */
			fprintf(err_out, "stalenet: host %s: its run files not fetched in full (stopping at once); the "
				"rows streamed during the run are kept\n", hs->list[h].name);
		} else if (r == -ETIMEDOUT) {
			/* hung after its nodes' ends: lost, so that the teardown does not wait for it */
			fprintf(err_out, "stalenet: host %s: its run files not fetched within %d s: host lost; the rows "
				"streamed during the run are kept; its agent removes its testbed when its connection "
				"ends, else: stalenet cleanup --hosts\n", hs->list[h].name, MULTIHOST_FETCH_MS / 1000);
			lose_host(self, o, n, h, &sinks[h], up, result == 2, 1000, err_out);
			host_lost[h] = true;
			result = result ? result : 1;
		} else if (r) {
			fprintf(err_out, "stalenet: host %s: its run files could not be fetched\n", hs->list[h].name);
			result = result ? result : 1;
		}
	}
	/* the clocks once more at the end of a training run: the estimate meta.json records spans it */
	for (size_t h = 0; started && !o->linkcheck && !stop_now(o->interrupted) && h < hs->n; h++) {
		int64_t span = 0;
		if (host_lost[h] || !host_used(o->p, h) || multihost_clock_refresh(self, h) < 0)
			continue;
		const struct clocksync_estimate *e = &self->clock[h];
		size_t nx = multihost_clock_exchanges(self, h, &span);
		fprintf(err_out, "stalenet: host %s: clock offset %+.6f s +- %.6f s, drift %+.3f ppm (%zu exchanges over "
			"%.1f s)\n", hs->list[h].name, clocksync_offset_at(e, *origin_ns) / 1e9, e->bound_ns / 1e9,
			e->drift_ppm, nx, span / 1e9);
	}
	free(cur);
	free(plan_ns);
	free(churn);
	free(up);
	free(is_ready);
	free(host_lost);
	for (size_t h = 0; h < hs->n; h++)
		sink_close(self, h, &sinks[h], err_out);
	free(sinks);
	free(epn);
	if (dirfd >= 0)
		close(dirfd);
	free(waiting);
	free(step);
	return result;
}
