/* orchestrator/multihost: see multihost.h. */
#include "orchestrator/multihost.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/clocksync.h"
#include "lib/kv.h"
#include "lib/link_params.h"
#include "orchestrator/agent.h"
#include "orchestrator/agentlink.h"
#include "orchestrator/slurm.h"
#include "orchestrator/supervise.h"
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
	bool built;
};

struct multihost *multihost_connect(const struct multihost_opts *o, FILE *out, FILE *err_out)
{
	struct multihost *self = calloc(1, sizeof *self);
	int bad = 0;
	if (!self || !(self->links = calloc(o->hosts->n, sizeof *self->links)) ||
	    !(self->clock = calloc(o->hosts->n, sizeof *self->clock))) {
		fprintf(err_out, "stalenet: out of memory\n");
		if (self)
			free(self->links);
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
		self->clock[i] = e;
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
		if (!self->links[h]) {
			fprintf(err_out, "stalenet: host %s: its agent was lost in an earlier run\n", hs->list[h].name);
			rc = -EHOSTDOWN;
			break;
		}
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
	free((*self)->clock);
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

int multihost_shape(struct multihost *self, const struct plan_run *run, const struct placement *p,
		    const char **backend, FILE *err_out)
{
	for (size_t i = 0; i < run->n_nodes; i++) {
		const struct link_params *dirs[2] = { &run->nodes[i].up, &run->nodes[i].down };
		for (int d = 0; d < 2; d++) {
			char tokens[1024], req[AGENT_LINE_MAX], reply[AGENT_LINE_MAX];
			int n = link_params_format(dirs[d], tokens, sizeof tokens);
			if (n < 0 || (size_t)n >= sizeof tokens)
				return -EINVAL;
			if (n == 0)
				continue;       /* unshaped: left alone, as on one host */
			size_t h = p->host_of[i];
			snprintf(req, sizeof req, "shape %s %s %s", run->nodes[i].name, d ? "down" : "up", tokens);
			int rc = agentlink_request(self->links[h], req, reply, sizeof reply, 30000);
			if (rc || strncmp(reply, "ok ", 3)) {
				fprintf(err_out, "stalenet: host %s: %s\n", self->hosts->list[h].name, rc ? strerror(-rc) : reply);
				return rc ? rc : -EIO;
			}
			const char *b = !strcmp(reply + 3, "nfq") ? "nfq" : "kernel";
			if (*backend && strcmp(*backend, b))
				fprintf(err_out, "stalenet: host %s shapes links with %s, others with %s (meta.json says %s)\n",
					self->hosts->list[h].name, b, *backend, *backend);
			else
				*backend = b;
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

/* Where a fetched file goes: REL is "NAME", "nodes/NAME" or "logs/NAME" with a safe NAME. */
static bool safe_rel(const char *rel)
{
	const char *n = !strncmp(rel, "nodes/", 6) ? rel + 6 : !strncmp(rel, "logs/", 5) ? rel + 5 : rel;
	if (!*n || n[0] == '.' || strlen(n) > 100)
		return false;
	for (const char *q = n; *q; q++)
		if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_' ||
		      *q == '-' || *q == '.'))
			return false;
	/* the orchestrator's own files are not overwritten by a host's */
	return strcmp(n, "meta.json") && strcmp(n, "journal") && strcmp(n, "events.csv") && strcmp(n, "progress.csv");
}

/* Where one host's streamed file lines go: the file being written and its first line. */
struct sink {
	FILE *f;
	bool first_row;                 /* the next row is the first of this chunk */
	char first[AGENT_LINE_MAX];     /* the file's first line when the chunk began, "" if new */
};

static void sink_close(struct sink *k)
{
	if (k->f)
		fclose(k->f);
	k->f = NULL;
}

/* A "file REL" or "l LINE" line of host h into dir (appended: the host streams each file's new
 * rows in chunks). Returns true when the line was one of those. */
static bool sink_line(struct multihost *self, size_t h, struct sink *k, const char *dir, const char *line, FILE *err_out)
{
	if (!strncmp(line, "l ", 2)) {
		/* a header row is written once: a second host's rows of the same file
		 * (partition.csv has a writer on every host) go under the first one's header */
		if (k->f && !(k->first_row && k->first[0] && !strcmp(line + 2, k->first)))
			fprintf(k->f, "%s\n", line + 2);
		k->first_row = false;
		return true;
	}
	if (strncmp(line, "file ", 5))
		return false;
	sink_close(k);
	if (!safe_rel(line + 5)) {
		fprintf(err_out, "stalenet: host %s: file %s refused\n", self->hosts->list[h].name, line + 5);
		return true;
	}
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%.3000s/%.200s", dir, line + 5);
	k->first[0] = 0;
	FILE *ex = fopen(path, "re");
	if (ex) {
		if (!fgets(k->first, sizeof k->first, ex))
			k->first[0] = 0;
		k->first[strcspn(k->first, "\n")] = 0;
		fclose(ex);
	}
	if (!(k->f = fopen(path, "ae")))
		fprintf(err_out, "stalenet: %s: %s\n", path, strerror(errno));
	k->first_row = true;
	return true;
}

/* The rest of host h's run files into dir: "fetch", then file lines until "fetched". */
static int fetch_host(struct multihost *self, size_t h, struct sink *k, const char *dir, FILE *err_out)
{
	char line[AGENT_LINE_MAX];
	int rc;
	if ((rc = agentlink_send(self->links[h], "fetch")))
		return rc;
	while (!(rc = agentlink_recv(self->links[h], line, sizeof line, 60000)) && strcmp(line, "fetched"))
		sink_line(self, h, k, dir, line, err_out);
	sink_close(k);
	return rc;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
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
	csv_writer_row(w, "%.3f,%zu,%zu,%ld,%.1f,%ld", (double)now_rel / 1e9, alive, nwait, counted ? (long)steps[0] : 0,
		       med, counted ? (long)steps[counted - 1] : 0);
}

int multihost_run_nodes(struct multihost *self, const struct multihost_nodes_opts *o, int64_t *origin_ns,
			FILE *err_out)
{
	const struct plan_run *run = o->run;
	const struct hosts *hs = self->hosts;
	size_t n = run->n_nodes, alive = 0, ready = 0;
	int result = 0;
	bool started = false, stopping = false;
	char line[AGENT_LINE_MAX];
	bool *up = calloc(n, sizeof *up), *is_ready = calloc(n, sizeof *is_ready), *host_lost = calloc(hs->n, sizeof *host_lost);
	bool *waiting = calloc(n, sizeof *waiting);
	int64_t *step = calloc(n, sizeof *step), next_progress = 0;
	struct csv_writer *progress = NULL;
	struct sink *sinks = calloc(hs->n, sizeof *sinks);
	if (!up || !is_ready || !host_lost || !waiting || !step || !sinks || n > MULTIHOST_MAX_NODES) {
		free(sinks);
		free(up);
		free(is_ready);
		free(host_lost);
		free(waiting);
		free(step);
		return 1;
	}
	*origin_ns = 0;
	/* configurations, then every node launched */
	for (size_t i = 0; i < n && !result; i++) {
		size_t h = o->p->host_of[i];
		struct kv *kv = nodeconf_build(run, i, o->nc, NULL);
		for (size_t k = 0; kv && k < kv_count(kv) && !result; k++) {
			const char *key, *val;
			char mapped[32];
			kv_entry(kv, k, &key, &val);
			if (!strcmp(key, "run.origin_ns")) {
				/* the provisional origin (before start) on the node's host's clock */
				snprintf(mapped, sizeof mapped, "%lld", (long long)to_host_clock(self, h, o->nc->origin_ns));
				val = mapped;
			}
			if ((size_t)snprintf(line, sizeof line, "conf %s %s %s", run->nodes[i].name, key, val) >= sizeof line ||
			    strchr(val, '\n')) {
				fprintf(err_out, "stalenet: node %s: configuration key %s too long for a host\n",
					run->nodes[i].name, key);
				result = 1;
				break;
			}
			char reply[AGENT_LINE_MAX];
			if (agentlink_request(self->links[h], line, reply, sizeof reply, 30000) || strcmp(reply, "ok")) {
				fprintf(err_out, "stalenet: host %s: node %s: %s\n", hs->list[h].name, run->nodes[i].name, reply);
				result = 1;
			}
		}
		if (!kv)
			result = 1;
		kv_destroy(&kv);
	}
	for (size_t i = 0; i < n && !result; i++) {
		snprintf(line, sizeof line, "launch %s", run->nodes[i].name);
		if (agentlink_send(self->links[o->p->host_of[i]], line))
			result = 1;
		else
			up[i] = true, alive++;
	}
	if (result)
		stopping = true;
	int64_t t_launch = clock_now_ns(), stop_sent = 0;
	while (alive) {
		int64_t now = clock_now_ns();
		if (started && progress && now - *origin_ns >= next_progress) {
			progress_row(progress, run, step, waiting, up, now - *origin_ns);
			next_progress = now - *origin_ns + 100000000;
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
		if (stopping && !stop_sent) {
			stop_sent = now;
			if (started)
				supervise_event(o->run_dir, "stop", "all", result == 2 ? "interrupted" : result ? "failure" : "time");
			for (size_t i = 0; i < n; i++)
				if (up[i] && !host_lost[o->p->host_of[i]]) {
					snprintf(line, sizeof line, "send %s stop", run->nodes[i].name);
					agentlink_send(self->links[o->p->host_of[i]], line);
				}
		}
		if (stop_sent && now - stop_sent > 30000000000LL) {
			/* a node that ignores stop for 30 s is killed */
			for (size_t i = 0; i < n; i++)
				if (up[i] && !host_lost[o->p->host_of[i]]) {
					snprintf(line, sizeof line, "kill %s", run->nodes[i].name);
					agentlink_send(self->links[o->p->host_of[i]], line);
				}
			stop_sent = now;
		}
		for (size_t h = 0; h < hs->n; h++) {
			if (host_lost[h] || !host_used(o->p, h))
				continue;
			int rc;
			while (!(rc = agentlink_recv(self->links[h], line, sizeof line, 2))) {
				struct agentlink_event ev;
				if (sink_line(self, h, &sinks[h], o->run_dir, line, err_out) ||
				    agentlink_parse_event(line, &ev))
					continue;
				const char *name = ev.name, *what = ev.what;
				size_t i = 0;
				while (i < n && (o->p->host_of[i] != h || strcmp(run->nodes[i].name, name)))
					i++;
				if (i == n)
					continue;
				if (ev.kind == AGENTLINK_EV_READY && !is_ready[i]) {
					is_ready[i] = true;
					ready++;
				} else if (ev.kind == AGENTLINK_EV_STATUS) {
					step[i] = ev.step;
					waiting[i] = ev.waiting != 0;
				} else if (ev.kind == AGENTLINK_EV_EXIT && up[i]) {
					up[i] = false;
					alive--;
					if (ev.status != 0) {
						char d[160];
						snprintf(d, sizeof d, "host %.31s: %.100s", hs->list[h].name, what);
						supervise_event(o->run_dir, "node_failed", name, d);
						fprintf(err_out, "stalenet: node %s on host %s died: %s\n", name, hs->list[h].name, what);
						if (!o->on_failure_continue && !stopping) {
							result = 1;
							stopping = true;
						}
					}
				}
			}
			if (rc != -ETIMEDOUT) {
				/* the agent is gone: its nodes with it (they die with it) */
				host_lost[h] = true;
				sink_close(&sinks[h]);
				fprintf(err_out, "stalenet: host %s: agent lost (%s); its nodes are lost\n", hs->list[h].name,
					strerror(-rc));
				/* what it built stays in its journal there, for `stalenet cleanup --hosts` */
				agentlink_close(&self->links[h], 5000);
				for (size_t i = 0; i < n; i++)
					if (o->p->host_of[i] == h && up[i]) {
						char d[96];
						snprintf(d, sizeof d, "host %s lost", hs->list[h].name);
						supervise_event(o->run_dir, "node_failed", run->nodes[i].name, d);
						up[i] = false;
						alive--;
					}
				if (!o->on_failure_continue && !stopping) {
					result = 1;
					stopping = true;
				}
			}
		}
		if (!started && !stopping && ready == n) {
			/* one origin on our clock, each host's node told it on its own clock */
			started = true;
			*origin_ns = clock_now_ns();
			clock_set_origin_ns(*origin_ns);
			char path[PATH_MAX];
			snprintf(path, sizeof path, "%.3000s/progress.csv", o->run_dir);
			progress = csv_writer_open(path, TRACE_HEADER_PROGRESS);
			supervise_event(o->run_dir, "start", "all", "");
			for (size_t i = 0; i < n; i++) {
				size_t h = o->p->host_of[i];
				snprintf(line, sizeof line, "send %s start %lld", run->nodes[i].name,
					 (long long)to_host_clock(self, h, *origin_ns));
				agentlink_send(self->links[h], line);
			}
			fprintf(err_out, "stalenet: %zu nodes ready on %zu hosts: started\n", n, hs->n);
		}
	}
	if (progress)
		progress_row(progress, run, step, waiting, up, clock_now_ns() - *origin_ns);
	csv_writer_close(&progress);
	for (size_t h = 0; h < hs->n; h++)
		if (!host_lost[h] && host_used(o->p, h) && fetch_host(self, h, &sinks[h], o->run_dir, err_out)) {
			fprintf(err_out, "stalenet: host %s: its run files could not be fetched\n", hs->list[h].name);
			result = result ? result : 1;
		}
	free(up);
	free(is_ready);
	free(host_lost);
	for (size_t h = 0; h < hs->n; h++)
		sink_close(&sinks[h]);
	free(sinks);
	free(waiting);
	free(step);
	return result;
}
