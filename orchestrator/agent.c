/* orchestrator/agent: see agent.h. One request at a time, answered before the next is read:
 * the orchestrator waits for each answer, so there is never more than one line in flight and
 * the T2 stamp is taken right after the read that completed the line. */
#include "orchestrator/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <sys/wait.h>

#include "lib/clock.h"
#include "lib/fdio.h"
#include "lib/ctl.h"
#include "lib/kv.h"
#include "lib/log.h"
#include "lib/rtdir.h"
#include "lib/version.h"
#include "lib/link_params.h"
#include "netem/link_shaper.h"
#include "netem/linkd.h"
#include "orchestrator/agentfile.h"
#include "orchestrator/agentreq.h"
#include "orchestrator/cgroup.h"
#include "orchestrator/launch.h"
#include "orchestrator/cleanup.h"
#include "orchestrator/hostfiles.h"
#include "orchestrator/journal.h"
#include "orchestrator/overlay.h"
#include "orchestrator/testbed.h"

#define AGENT_MAX_NODES AGENTREQ_MAX_NODES  /* nodes of one host in one build request */
_Static_assert(AGENTREQ_MAX_REMOTES == OVERLAY_MAX_REMOTES, "a build's remotes are the overlay's");
_Static_assert(AGENTREQ_MAX_PEERS == LINK_SHAPER_MAX_PEERS, "a class's peers are the shaper's");
#define AGENT_MAX_CLASSES (AGENT_MAX_NODES * 2 * 16)  /* per-peer classes of one build */
/* files of the nodes' run directory followed: up to 64 nodes of a fleet with 7 each (trace,
 * configuration, log, queue, peers store with its -wal and -shm), the top-level ones beside */
#define AGENT_MAX_STREAMS 1024
#define AGENT_STREAM_NS 500000000LL

#define AGENT_STREAM_HEAD 64     /* a text file's first bytes kept to see it rewritten in place */

/* One file of the nodes' run directory as far as it was sent: a text file's rows up to off of
 * the file that was then at dev/ino and began with head; a whole file as it was then (size,
 * mtime). */
struct agent_stream {
	char rel[160];
	off_t off;
	char head[AGENT_STREAM_HEAD];   /* the first head_len bytes sent (head_len <= off) */
	size_t head_len;
	bool known;                     /* dev, ino, size, mtime are those last sent */
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

/* What the agent built on this host: its journal (in its own run directory under the runtime
 * directory, so `stalenet cleanup` on this host finds it) and its share of the testbed. */
struct agent_state {
	struct journal *j;
	struct testbed *tb;
	char rundir[128];
	char prefix[TESTBED_PREFIX_MAX];
	char bindir[PATH_MAX - 32];     /* where this program is: stalenet-node, stalenet-linkd */
	int echo_fd;                    /* UDP on LOCAL:AGENT_PROBE_PORT after a build, else -1 */
	uint32_t remotes[OVERLAY_MAX_REMOTES];  /* the only sources the echo answers */
	size_t n_remotes;
	/* the nodes of the build: their configuration (from "conf"), process, control relay */
	char names[AGENT_MAX_NODES][32];
	struct kv *conf[AGENT_MAX_NODES];
	pid_t pid[AGENT_MAX_NODES];
	size_t n_nodes;
	struct ctl_server *ctl;
	struct link_shaper *shaper;     /* this host's node links, NULL = none shaped yet */
	enum link_backend want;         /* "shaper": AUTO (kernel when it has netem), KERNEL, NFQ */
	struct agent_class { int node; int dir; char tag[17]; uint32_t underlay_us; } classes[AGENT_MAX_CLASSES];
	size_t n_classes;               /* the per-peer classes of the build ("shapepeers") */
	struct cgroup_run *cg;          /* the nodes' limits on this host ("limit"), NULL = none */
	pid_t linkd_pid;                /* the userspace emulator (no sch_netem here), 0 = none */
	char linkd_ctl[256];
	char ctl_ep[512];
	struct agent_stream streams[AGENT_MAX_STREAMS];  /* files sent so far */
	size_t n_streams;
	bool streams_full;              /* AGENT_MAX_STREAMS reached (logged once) */
	int64_t next_stream_ns;         /* while nodes run: files streamed every AGENT_STREAM_NS */
	char node_bin[PATH_MAX];
	char linkd_bin[PATH_MAX];
	int out_fd;
};

#define PROBE_MAGIC "snprobe1"
#define PROBE_LEN 32

/* A decimal int64 that is the whole of s (optional '-'), else -EINVAL. */
static int parse_i64(const char *s, int64_t *out)
{
	char *end;
	if (!*s || (*s != '-' && (*s < '0' || *s > '9')))
		return -EINVAL;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

static void teardown(struct agent_state *st)
{
	for (size_t i = 0; i < st->n_nodes; i++) {
		if (st->pid[i] > 0) {
			kill(st->pid[i], SIGKILL);
			waitpid(st->pid[i], NULL, 0);
			st->pid[i] = 0;
		}
		kv_destroy(&st->conf[i]);
	}
	st->n_nodes = 0;
	st->n_streams = 0;
	st->streams_full = false;
	cgroup_run_destroy(&st->cg);    /* the nodes are gone: their cgroups are empty */
	link_shaper_destroy(&st->shaper);
	st->want = LINK_BACKEND_AUTO;
	st->n_classes = 0;
	if (st->linkd_pid > 0) {
		/* its rules are gone with the shaper: nothing of it to flush */
		kill(st->linkd_pid, SIGKILL);
		waitpid(st->linkd_pid, NULL, 0);
		st->linkd_pid = 0;
	}
	ctl_server_close(&st->ctl);
	if (st->echo_fd >= 0)
		close(st->echo_fd);
	st->echo_fd = -1;
	st->n_remotes = 0;
	testbed_destroy(&st->tb);
	if (st->j) {
		journal_mark_ended(st->j);
		journal_destroy(&st->j);
	}
}

/* "build PREFIX VNI LOCAL NODES REMOTES CC MTU [PIN]": this host's nodes (NODES: a comma list of NAME:INDEX,
 * node INDEX of the run getting address subnet + INDEX + 1), the switch bridge and the VXLAN segment VNI to the REMOTES
 * (comma list of underlay addresses, "-" for none), LOCAL being this host's. PIN: the run's node count, whose
 * addresses every node here holds as permanent neighbours (orchestrator/testbed; absent: this host's nodes only).
 * Journalled. */
static int build(struct agent_state *st, const char *args, char *msg, size_t len)
{
	static struct agentreq_build rq;       /* one request at a time (agent_serve) */
	char ifname[32], vx[16];
	const char *names[AGENTREQ_MAX_NODES];
	int rc;
	if ((rc = agentreq_parse_build(args, &rq, msg, len)) < 0)
		return rc;
	for (size_t i = 0; i < rq.n_nodes; i++)
		names[i] = rq.names[i];
	int n_names = (int)rq.n_nodes, n_rem = (int)rq.n_remotes;
	int64_t want_mtu = rq.mtu;
	uint32_t local = rq.local_be, *remotes = rq.remotes_be, *index = rq.index;
	const char *f0 = rq.prefix, *cc = rq.cc;
	char f2[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &local, f2, sizeof f2);
	if (st->tb) {
		snprintf(msg, len, "build: already built");
		return -EBUSY;
	}
	int umtu = overlay_underlay_mtu(local, ifname, sizeof ifname);
	int mtu = umtu > 0 ? overlay_node_mtu(umtu) : umtu;
	if (umtu < 0 || mtu < 0) {
		snprintf(msg, len, "build: underlay %s: %s", f2, umtu < 0 ? strerror(-umtu) : "MTU too small");
		return umtu < 0 ? umtu : mtu;
	}
	if (want_mtu > mtu) {
		/* a full-size frame would not fit the encapsulation: refuse rather than drop */
		snprintf(msg, len, "build: node MTU %d needs an underlay MTU of %d, %s has %d", (int)want_mtu,
			 (int)want_mtu + OVERLAY_VXLAN_OVERHEAD, ifname, umtu);
		return -EMSGSIZE;
	}
	if (want_mtu)
		mtu = (int)want_mtu;
	if ((rc = rtdir_ensure()) < 0) {
		snprintf(msg, len, "build: runtime directory: %s", strerror(-rc));
		return rc;
	}
	snprintf(st->rundir, sizeof st->rundir, "%s/agent-%s", rtdir_path(), f0);
	if (mkdir(st->rundir, 0700) < 0 && errno != EEXIST) {
		snprintf(msg, len, "build: mkdir %s: %s", st->rundir, strerror(errno));
		return -errno;
	}
	if (!(st->j = journal_create(st->rundir, f0, msg, len)))
		return -EIO;
	struct testbed_spec spec = { .prefix = f0, .n_nodes = n_names, .node_names = names,
				     .mtu = mtu, .addr_index = index, .cc = cc, .pin_nodes = rq.pin };
	if (!(st->tb = testbed_create(&spec, st->j, msg, len))) {
		teardown(st);
		return -EIO;
	}
	snprintf(vx, sizeof vx, "%svx", f0);
	struct overlay_spec o = { .switch_netns = testbed_switch_netns(st->tb), .bridge = TESTBED_BRIDGE_IFNAME,
				  .ifname = vx, .vni = rq.vni, .local_be = local, .remotes_be = remotes,
				  .n_remotes = (size_t)n_rem, .mtu = mtu };
	if (n_rem && (rc = overlay_attach(&o, msg, len))) {
		teardown(st);
		return rc;
	}
	/* the underlay probe's echo, answering the other hosts only */
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(AGENT_PROBE_PORT), .sin_addr = { local } };
	st->echo_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (st->echo_fd < 0 || bind(st->echo_fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		rc = -errno;
		snprintf(msg, len, "build: probe echo on %s:%d: %s", f2, AGENT_PROBE_PORT, strerror(errno));
		teardown(st);
		return rc;
	}
	memcpy(st->remotes, remotes, (size_t)n_rem * sizeof remotes[0]);
	st->n_remotes = (size_t)n_rem;
	/* the nodes' run directory and their control socket, in this host's runtime directory */
	char d[sizeof st->rundir + 16];
	snprintf(d, sizeof d, "%s/run", st->rundir);
	mkdir(d, 0700);
	snprintf(d, sizeof d, "%s/run/nodes", st->rundir);
	mkdir(d, 0700);
	snprintf(d, sizeof d, "%s/run/logs", st->rundir);
	mkdir(d, 0700);
	if (ctl_endpoint_for(st->rundir, f0, st->ctl_ep, sizeof st->ctl_ep) < 0 ||
	    !(st->ctl = ctl_server_open(st->ctl_ep))) {
		snprintf(msg, len, "build: control socket");
		teardown(st);
		return -EIO;
	}
	snprintf(st->prefix, sizeof st->prefix, "%s", f0);
	for (int i = 0; i < n_names; i++) {
		snprintf(st->names[i], sizeof st->names[i], "%s", names[i]);
		st->pid[i] = 0;
	}
	st->n_nodes = (size_t)n_names;
	snprintf(msg, len, "ok %s %d %s %d", testbed_switch_netns(st->tb), mtu, ifname, umtu);
	return 0;
}

static void echo_once(struct agent_state *st)
{
	char b[PROBE_LEN + 1];
	struct sockaddr_in from;
	socklen_t fl = sizeof from;
	for (;;) {
		ssize_t r = recvfrom(st->echo_fd, b, sizeof b, 0, (struct sockaddr *)&from, &fl);
		if (r < 0)
			return;         /* EAGAIN: drained */
		bool known = false;
		for (size_t i = 0; i < st->n_remotes && !known; i++)
			known = from.sin_addr.s_addr == st->remotes[i];
		if (known && r == PROBE_LEN && !memcmp(b, PROBE_MAGIC, sizeof PROBE_MAGIC - 1))
			sendto(st->echo_fd, b, (size_t)r, 0, (struct sockaddr *)&from, fl);
	}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* "probe ADDR COUNT": COUNT UDP round trips to the agent of the host at ADDR (one of the
 * remotes), each waited for at most 1 s -> "probe ADDR GOT MIN_NS MEDIAN_NS". */
static int probe(struct agent_state *st, const char *args, char *msg, size_t len)
{
	struct agentreq_probe rq;
	int rc = agentreq_parse_probe(args, &rq, msg, len);
	if (rc < 0)
		return rc;
	if (st->echo_fd < 0) {
		snprintf(msg, len, "probe: no build yet");
		return -EINVAL;
	}
	const char *addr = rq.addr;
	int64_t count = rq.count;
	uint32_t a = rq.addr_be;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(AGENT_PROBE_PORT), .sin_addr = { a } };
	struct sockaddr_in me = { .sin_family = AF_INET };
	socklen_t ml = sizeof me;
	/* from our underlay address (any port), so the peer's echo knows us */
	int ok = fd >= 0 && getsockname(st->echo_fd, (struct sockaddr *)&me, &ml) == 0;
	me.sin_port = 0;
	if (!ok || bind(fd, (struct sockaddr *)&me, sizeof me) < 0 || connect(fd, (struct sockaddr *)&to, sizeof to) < 0) {
		snprintf(msg, len, "probe: socket: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	int64_t *rtt = calloc((size_t)count, sizeof *rtt);
	int got = 0;
	for (int64_t i = 0; rtt && i < count; i++) {
		char b[PROBE_LEN] = PROBE_MAGIC;
		memcpy(b + 16, &i, sizeof i);
		int64_t t0 = clock_now_ns();
		if (send(fd, b, sizeof b, 0) != (ssize_t)sizeof b)
			break;
		for (;;) {
			int64_t left = 1000 - (clock_now_ns() - t0) / 1000000;
			struct pollfd p = { .fd = fd, .events = POLLIN };
			if (left <= 0 || poll(&p, 1, (int)left) <= 0)
				break;
			char r[PROBE_LEN];
			if (recv(fd, r, sizeof r, 0) == (ssize_t)sizeof r && !memcmp(r, b, sizeof b)) {
				rtt[got++] = clock_now_ns() - t0;
				break;
			}
		}
	}
	close(fd);
	if (!rtt || !got) {
		free(rtt);
		snprintf(msg, len, "probe: no answer from %s", addr);
		return -EHOSTUNREACH;
	}
	qsort(rtt, (size_t)got, sizeof *rtt, cmp_i64);
	snprintf(msg, len, "probe %s %d %" PRId64 " %" PRId64, addr, got, rtt[0], rtt[got / 2]);
	free(rtt);
	return 0;
}

static int node_of(const struct agent_state *st, const char *name)
{
	for (size_t i = 0; i < st->n_nodes; i++)
		if (!strcmp(st->names[i], name))
			return (int)i;
	return -1;
}

/* An event line to the orchestrator: "ev NAME WHAT" (control characters made spaces). */
static int event(struct agent_state *st, const char *name, const char *what)
{
	char buf[AGENT_LINE_MAX];
	int n = snprintf(buf, sizeof buf, "ev %s %s", name, what);
	if (n < 0)
		return -EIO;
	if ((size_t)n >= sizeof buf - 1)
		n = (int)sizeof buf - 2;
	for (int i = 0; i < n; i++)
		if ((unsigned char)buf[i] < ' ')
			buf[i] = ' ';
	buf[n++] = '\n';
	return fdio_write_all(st->out_fd, buf, (size_t)n, NULL);
}

/* "conf NAME KEY VALUE": one key of node NAME's configuration. */
static int conf(struct agent_state *st, const char *args, char *msg, size_t len)
{
	struct agentreq_conf rq;
	int rc = agentreq_parse_conf(args, &rq, msg, len);
	if (rc < 0)
		return rc;
	int i = node_of(st, rq.name);
	if (i < 0 || st->pid[i]) {
		snprintf(msg, len, "conf: %s", i < 0 ? "no such node here" : "node running");
		return -EINVAL;
	}
	if (!st->conf[i] && !(st->conf[i] = kv_new()))
		return -ENOMEM;
	if (kv_set(st->conf[i], rq.key, rq.value) < 0) {
		snprintf(msg, len, "conf: bad value");
		return -EINVAL;
	}
	snprintf(msg, len, "ok");
	return 0;
}

/* "unconf NAME": node NAME's configuration dropped (it is not running), so the next phase's
 * keys (the link self-check's probe, then training) start from nothing. */
static int unconf(struct agent_state *st, const char *name, char *msg, size_t len)
{
	int i = node_of(st, name);
	if (i < 0 || st->pid[i] > 0) {
		snprintf(msg, len, "unconf: %s", i < 0 ? "no such node here" : "node running");
		return -EINVAL;
	}
	kv_destroy(&st->conf[i]);
	snprintf(msg, len, "ok");
	return 0;
}

static int record_node(void *arg, pid_t pid, uint64_t start_time, const char *name)
{
	struct agent_state *st = arg;
	return journal_proc(st->j, pid, start_time, name);
}

/* "limit NAME NEED CPU CPUS MEMORY": node NAME's cgroup on this host (orchestrator/cgroup, as
 * a one-host run makes them), applied when it is launched. NEED: the run's CGROUP_* bits (the
 * controllers the first request sets up); CPU: cores (0 = no quota); CPUS: a CPU list or "-";
 * MEMORY: bytes (0 = no limit). */
static int limit(struct agent_state *st, const char *args, char *msg, size_t len)
{
	struct agentreq_limit rq;
	uint64_t mask[CGROUP_CPU_WORDS];
	int rc = agentreq_parse_limit(args, &rq, msg, len);
	if (rc < 0)
		return rc;
	int i = node_of(st, rq.name);
	if (i < 0 || st->pid[i] > 0) {
		snprintf(msg, len, "limit: %s", i < 0 ? "no such node here" : "node running");
		return -EINVAL;
	}
	if (strcmp(rq.cpus, "-"))
		cgroup_parse_cpus(rq.cpus, mask);      /* checked by the parser */
	char err[512];
	if (!st->cg && !(st->cg = cgroup_run_new(NULL, st->prefix, rq.need, st->j, err, sizeof err))) {
		snprintf(msg, len, "limit: %s", err);
		return -EIO;
	}
	if (cgroup_run_find(st->cg, rq.name) >= 0) {
		snprintf(msg, len, "ok");       /* made for an earlier phase: kept */
		return 0;
	}
	struct cgroup_limits lim = { .cpu = rq.cpu, .cpus = strcmp(rq.cpus, "-") ? mask : NULL,
				     .memory_bytes = rq.memory_bytes };
	if (cgroup_run_add(st->cg, rq.name, &lim, err, sizeof err) < 0) {
		snprintf(msg, len, "limit: %s", err);
		return -EIO;
	}
	snprintf(msg, len, "ok");
	return 0;
}

/* A node process joins its cgroup before it execs (launch_spec.place). */
static int place_node(void *arg, pid_t pid, const char *name)
{
	struct agent_state *st = arg;
	int idx = st->cg ? cgroup_run_find(st->cg, name) : -1;
	return idx < 0 ? 0 : cgroup_run_attach(st->cg, idx, pid) < 0 ? -1 : 0;
}

/* "launch NAME": start node NAME (its "conf" keys, with this host's run directory and control
 * socket) in its namespace. Answered by events: "ev NAME launched PID" or "ev NAME exit -1 WHY". */
static int launch(struct agent_state *st, const char *name)
{
	char path[PATH_MAX], logp[PATH_MAX], what[128];
	int i = node_of(st, name);
	if (i < 0 || !st->conf[i] || st->pid[i] > 0)
		return event(st, agentreq_valid_name(name) ? name : "?", i < 0 ? "exit -1 no such node here" :
							    !st->conf[i] ? "exit -1 no configuration" : "exit -1 running");
	snprintf(path, sizeof path, "%s/run", st->rundir);
	kv_set(st->conf[i], "run.dir", path);
	kv_set(st->conf[i], "ctl.endpoint", st->ctl_ep);
	snprintf(path, sizeof path, "%s/run/nodes/%s.conf", st->rundir, st->names[i]);
	snprintf(logp, sizeof logp, "%s/run/logs/%s.log", st->rundir, st->names[i]);
	int rc = kv_save(st->conf[i], path);
	if (rc < 0 || access(st->node_bin, X_OK) < 0) {
		snprintf(what, sizeof what, "exit -1 %s", rc < 0 ? "cannot write its configuration" : "stalenet-node not found");
		return event(st, name, what);
	}
	const char *argv[] = { st->node_bin, path, NULL };
	struct launch_spec ls = { .name = name, .netns = testbed_node_netns(st->tb, i), .argv = argv, .log_path = logp,
				  .record = record_node, .record_arg = st, .place = place_node };
	pid_t pid = launch_spawn(&ls);
	if (pid < 0) {
		snprintf(what, sizeof what, "exit -1 launch: %s", strerror((int)-pid));
		return event(st, name, what);
	}
	st->pid[i] = pid;
	snprintf(what, sizeof what, "launched %d", (int)pid);
	return event(st, name, what);
}

/* Journal the iptables rules of the userspace emulator (their undo), as a one-host run does. */
static int record_shaping(void *arg, const char *kind, const char *netns, const char *const *undo)
{
	struct agent_state *st = arg;
	const char *table = "filter", *chain = NULL, *rule[JOURNAL_MAX_FIELDS];
	int n = 0;
	if (strcmp(kind, "iptables"))
		return 0;
	for (int i = 1; undo[i]; i++) {
		if (!strcmp(undo[i], "-t") && undo[i + 1])
			table = undo[++i];
		else if (!strcmp(undo[i], "-D") && undo[i + 1])
			chain = undo[++i];
		else if (strcmp(undo[i], "-w") && n < JOURNAL_MAX_FIELDS - 8)
			rule[n++] = undo[i];
	}
	return chain ? journal_iptables(st->j, netns, table, chain, n, rule) : -EINVAL;
}

/* This host's shaper: kernel netem when the kernel has it, else stalenet-linkd (beside this
 * program) on NFQUEUE, started and journalled here. */
static int make_shaper(struct agent_state *st, const char *prefix, char *msg, size_t len)
{
	struct link_shaper_opts so = { .backend = LINK_BACKEND_KERNEL, .record = record_shaping, .record_ctx = st };
	if (st->want == LINK_BACKEND_KERNEL && link_shaper_probe_kernel() != 1) {
		snprintf(msg, len, "shape: this host's kernel has no sch_netem (the kernel backend was asked for)");
		return -ENOTSUP;
	}
	if (st->want == LINK_BACKEND_NFQ || link_shaper_probe_kernel() != 1) {
		char logp[PATH_MAX];
		const char *bin = st->linkd_bin;
		snprintf(st->linkd_ctl, sizeof st->linkd_ctl, "%s/linkd-%s.sock", rtdir_path(), prefix);
		snprintf(logp, sizeof logp, "%s/run/logs/linkd.log", st->rundir);
		const char *argv[] = { bin, "--ctl", st->linkd_ctl, NULL };
		struct launch_spec ls = { .name = "linkd", .argv = argv, .log_path = logp, .record = record_node,
					  .record_arg = st };
		pid_t pid = launch_spawn(&ls);
		if (pid < 0) {
			snprintf(msg, len, "shape: stalenet-linkd: %s", strerror((int)-pid));
			return (int)pid;
		}
		st->linkd_pid = pid;
		int64_t deadline = clock_now_ns() + 10000000000LL;
		char reply[64];
		while (linkd_request(st->linkd_ctl, "ping", reply, sizeof reply, 100) != 0) {
			if (waitpid(pid, NULL, WNOHANG) == pid || clock_now_ns() > deadline) {
				st->linkd_pid = waitpid(pid, NULL, WNOHANG) == 0 ? pid : 0;
				snprintf(msg, len, "shape: stalenet-linkd did not start (see its log)");
				return -EIO;
			}
			poll(NULL, 0, 10);      /* it is binding its socket */
		}
		so.backend = LINK_BACKEND_NFQ;
		so.linkd_ctl = st->linkd_ctl;
	}
	if (!(st->shaper = link_shaper_new(&so))) {
		snprintf(msg, len, "shape: no link emulation on this host");
		return -ENOTSUP;
	}
	return 0;
}

static struct link_endpoint endpoint_of(const struct agent_state *st, int i)
{
	return (struct link_endpoint){ .node_netns = testbed_node_netns(st->tb, i), .node_ifname = testbed_node_ifname(st->tb, i),
				       .switch_netns = testbed_switch_netns(st->tb),
				       .switch_ifname = testbed_node_switch_ifname(st->tb, i) };
}

/* "shaper auto|kernel|nfq": the backend of this build's shaping (before its first "shape"). */
static int shaper(struct agent_state *st, const char *args, char *msg, size_t len)
{
	enum link_backend b = !strcmp(args, "kernel") ? LINK_BACKEND_KERNEL : !strcmp(args, "nfq") ? LINK_BACKEND_NFQ
			      : LINK_BACKEND_AUTO;
	if (!st->tb || st->shaper || (b == LINK_BACKEND_AUTO && strcmp(args, "auto"))) {
		snprintf(msg, len, "shaper: expected auto|kernel|nfq after a build, before any shape");
		return -EINVAL;
	}
	st->want = b;
	snprintf(msg, len, "ok");
	return 0;
}

/* "shape NAME up|down TOKEN...": node NAME's link in that direction shaped (kernel netem, as
 * one host shapes it: on the node's veth pair to its host's switch) with the link_params
 * tokens (link_params_format). */
static int shape(struct agent_state *st, const char *args, char *msg, size_t len)
{
	struct agentreq_shape rq;
	int rc = agentreq_parse_shape("shape", args, &rq, msg, len);
	if (rc < 0)
		return rc;
	int i = node_of(st, rq.name);
	const char *name = rq.name, *dir = rq.down ? "down" : "up";
	struct link_params lp = rq.lp;
	if (i < 0) {
		snprintf(msg, len, "shape: %s is no node of the build", name);
		return -EINVAL;
	}
	if (!st->shaper && (rc = make_shaper(st, st->prefix, msg, len)) < 0)
		return rc;
	struct link_endpoint ep = endpoint_of(st, i);
	rc = link_shaper_apply(st->shaper, &ep, strcmp(dir, "up") ? LINK_DIR_DOWN : LINK_DIR_UP, &lp);
	if (rc < 0) {
		snprintf(msg, len, "shape: %s %s: %s", name, dir, strerror(-rc));
		return rc;
	}
	snprintf(msg, len, "ok %s", link_shaper_backend(st->shaper) == LINK_BACKEND_NFQ ? "nfq" : "kernel");
	return 0;
}

/* "shapepeers NAME up|down TAG ADDRS UNDERLAY_US TOKEN...": within node NAME's shaped
 * direction, the packets to (up) or from (down) the node addresses ADDRS (a comma list inside
 * the testbed's 198.18.0.0/15) get a class TAG of their own with the direction's parameters
 * TOKENs but UNDERLAY_US less delay (link_shaper_apply_peers): the cross-host paths. The class
 * is remembered, so a "reshape" of the direction reshapes it too. */
static int shape_peers(struct agent_state *st, const char *args, char *msg, size_t len)
{
	static struct agentreq_peers rq;       /* one request at a time (agent_serve) */
	int rc = agentreq_parse_peers(args, &rq, msg, len);
	if (rc < 0)
		return rc;
	int i = node_of(st, rq.s.name);
	const char *name = rq.s.name, *dir = rq.s.down ? "down" : "up", *tag = rq.tag;
	const uint32_t *peers = rq.peers_be;
	size_t n = rq.n_peers;
	int64_t u = rq.underlay_us;
	struct link_params lp = rq.s.lp;
	if (i < 0 || st->n_classes == AGENT_MAX_CLASSES) {
		snprintf(msg, len, "shapepeers: %s", i < 0 ? "no such node here" : "too many classes");
		return -EINVAL;
	}
	if (!st->shaper) {
		snprintf(msg, len, "shapepeers: %s %s is not shaped", name, dir);
		return -ENOENT;
	}
	lp.delay_us -= (uint32_t)u;     /* at least u: checked by the parser */
	struct link_endpoint ep = endpoint_of(st, i);
	int d = strcmp(dir, "up") ? LINK_DIR_DOWN : LINK_DIR_UP;
	rc = link_shaper_apply_peers(st->shaper, &ep, d, tag, peers, n, &lp);
	if (rc < 0) {
		snprintf(msg, len, "shapepeers: %s %s: %s", name, dir,
			 rc == -E2BIG ? "more than 15 distinct delays across hosts in one direction (the kernel backend's "
					"prio bands)" : strerror(-rc));
		return rc;
	}
	struct agent_class *c = &st->classes[st->n_classes++];
	*c = (struct agent_class){ .node = i, .dir = d, .underlay_us = (uint32_t)u };
	snprintf(c->tag, sizeof c->tag, "%s", tag);
	snprintf(msg, len, "ok");
	return 0;
}

/* "reshape NAME up|down TOKEN...": a shaped direction changed in place during the run (a
 * timeline change, a trace row), its per-peer classes with it (their delay the new one less
 * the underlay's, at least 0). No answer line: "ev NAME reshaped DIR ok|fail WHY". */
static int reshape(struct agent_state *st, const char *args)
{
	char msg[256], what[320];
	struct agentreq_shape rq;
	int rc = agentreq_parse_shape("reshape", args, &rq, msg, sizeof msg), clipped = 0;
	/* a bad token list is still reported under its node's name (the parser got that far) */
	int i = rq.name[0] ? node_of(st, rq.name) : -1;
	const char *dir = rq.down ? "down" : "up";
	struct link_params lp = rq.lp;
	if (i < 0) {
		snprintf(what, sizeof what, "reshaped ? fail %s", rc ? msg : "no such node here");
		return event(st, "?", what);
	}
	if (!rc && !st->shaper) {
		snprintf(msg, sizeof msg, "not shaped");
		rc = -ENOENT;
	}
	struct link_endpoint ep = endpoint_of(st, i);
	int d = strcmp(dir, "up") ? LINK_DIR_DOWN : LINK_DIR_UP;
	if (!rc && (rc = link_shaper_change(st->shaper, &ep, d, &lp)) < 0)
		snprintf(msg, sizeof msg, "%s", strerror(-rc));
	for (size_t k = 0; !rc && k < st->n_classes; k++) {
		const struct agent_class *c = &st->classes[k];
		if (c->node != i || c->dir != d)
			continue;
		struct link_params q = lp;
		clipped += q.delay_us < c->underlay_us;
		q.delay_us = q.delay_us > c->underlay_us ? q.delay_us - c->underlay_us : 0;
		if ((rc = link_shaper_apply_peers(st->shaper, &ep, d, c->tag, NULL, 0, &q)) < 0)
			snprintf(msg, sizeof msg, "class %s: %s", c->tag, strerror(-rc));
	}
	if (!rc && clipped)
		snprintf(msg, sizeof msg, "ok; across hosts the underlay's delay exceeds it");
	if (rc)
		snprintf(what, sizeof what, "reshaped %s fail %s", dir, msg);
	else
		snprintf(what, sizeof what, "reshaped %s %s", dir, clipped ? msg : "ok");
	return event(st, st->names[i], what);
}

/* "send NAME MSG": relay a control message (start, stop) to node NAME; no answer. */
static void relay_send(struct agent_state *st, const char *args)
{
	struct agentreq_send rq;
	char err[128];
	if (!agentreq_parse_send(args, &rq, err, sizeof err) && node_of(st, rq.name) >= 0 && st->ctl)
		ctl_server_send(st->ctl, rq.name, rq.msg);
}

/* "kill NAME": SIGKILL node NAME (a planned crash); its exit comes as an event. */
static void relay_kill(struct agent_state *st, const char *name)
{
	int i = node_of(st, name);
	if (i >= 0 && st->pid[i] > 0)
		kill(st->pid[i], SIGKILL);
}

static void on_node_exit(void *arg, pid_t pid, int status)
{
	struct agent_state *st = arg;
	for (size_t i = 0; i < st->n_nodes; i++)
		if (st->pid[i] == pid) {
			char what[96];
			uint64_t kills = 0;
			int idx = st->cg ? cgroup_run_find(st->cg, st->names[i]) : -1;
			st->pid[i] = 0;
			/* a kill by the kernel at the node's memory limit is named, as on one host */
			bool oom = status != 0 && idx >= 0 && cgroup_run_oom_kills(st->cg, idx, &kills) == 0 && kills;
			snprintf(what, sizeof what, "exit %d%s", status, oom ? " oom_killed" : "");
			event(st, st->names[i], what);
		}
}

/* Node messages to the orchestrator as events, and node exits. */
static void relay_nodes(struct agent_state *st)
{
	char node[64], m[AGENT_LINE_MAX - 128];
	while (st->ctl && ctl_server_recv(st->ctl, node, sizeof node, m, sizeof m, 0) == 1)
		if (node_of(st, node) >= 0)
			event(st, node, m);
	launch_reap(on_node_exit, st);
}

/* The stream record of REL (a new one at offset 0), or NULL when AGENT_MAX_STREAMS are
 * followed already (the rest are not sent). */
static struct agent_stream *stream_of(struct agent_state *st, const char *rel)
{
	size_t k = 0;
	while (k < st->n_streams && strcmp(st->streams[k].rel, rel))
		k++;
	if (k == st->n_streams) {
		if (k == AGENT_MAX_STREAMS) {
			if (!st->streams_full)
				log_error("agent: more than %d files in the nodes' run directory: %s and later ones not sent",
					  AGENT_MAX_STREAMS, rel);
			st->streams_full = true;
			return NULL;
		}
		st->streams[k] = (struct agent_stream){ .off = 0, .head_len = 0 };
		snprintf(st->streams[k].rel, sizeof st->streams[k].rel, "%s", rel);
		st->n_streams++;
	}
	return &st->streams[k];
}

/* REL under base opened for reading (no symlink followed) and its status; -1 when it is not
 * a regular file (any more). */
static int open_stream(const char *base, const char *rel, struct stat *sb)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%.3000s/%.200s", base, rel);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd >= 0 && (fstat(fd, sb) < 0 || !S_ISREG(sb->st_mode))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Where the last complete line of fd's first size bytes ends (0: none). */
static off_t complete_lines(int fd, off_t size)
{
	char buf[4096];
	off_t end = size;
	while (end > 0) {
		size_t want = end < (off_t)sizeof buf ? (size_t)end : sizeof buf;
		ssize_t r = pread(fd, buf, want, end - (off_t)want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r != (ssize_t)want)
			return 0;
		for (size_t i = want; i > 0; i--)
			if (buf[i - 1] == '\n')
				return end - (off_t)want + (off_t)i;
		end -= (off_t)want;
	}
	return 0;
}

/* Whether fd still begins with the bytes of it already sent (a file truncated and written
 * again in place, as long as before or longer, is another file for all its inode says). */
static bool same_head(const struct agent_stream *s, int fd)
{
	char now[AGENT_STREAM_HEAD];
	if (!s->head_len)
		return true;
	ssize_t r;
	do
		r = pread(fd, now, s->head_len, 0);
	while (r < 0 && errno == EINTR);
	return r == (ssize_t)s->head_len && !memcmp(now, s->head, s->head_len);
}

/* Keep the first bytes of fd just sent whole (up to s->off). */
static void keep_head(struct agent_stream *s, int fd)
{
	size_t want = s->off < (off_t)AGENT_STREAM_HEAD ? (size_t)s->off : AGENT_STREAM_HEAD;
	ssize_t r;
	do
		r = pread(fd, s->head, want, 0);
	while (r < 0 && errno == EINTR);
	s->head_len = r == (ssize_t)want ? want : 0;
}

/* Send what text file REL (under the nodes' run directory) gained since last time: "file REL"
 * then "l LINE" per complete line; an unfinished last line waits for the next time. A file
 * that shrank or is another file now (rewritten, not appended to: a node's .conf between
 * phases) is sent whole instead, up to its last complete line (orchestrator/agentfile), so the
 * orchestrator's copy is replaced rather than appended to from a stale offset. */
static int stream_file(struct agent_state *st, const char *base, const char *rel)
{
	char line[AGENT_LINE_MAX];
	struct agent_stream *s = stream_of(st, rel);
	struct stat sb;
	if (!s)
		return 0;
	int fd = open_stream(base, rel, &sb);
	if (fd < 0)
		return 0;
	int rc = 0;
	if (s->known && (sb.st_dev != s->dev || sb.st_ino != s->ino || sb.st_size < s->off || !same_head(s, fd))) {
		off_t upto = complete_lines(fd, sb.st_size);
		uint64_t sent = 0;
		rc = agentfile_send(st->out_fd, rel, fd, (uint64_t)upto, &sent);
		s->off = (off_t)sent;
		s->dev = sb.st_dev;
		s->ino = sb.st_ino;
		s->head_len = 0;
		keep_head(s, fd);
		close(fd);
		return rc;
	}
	s->known = true;
	s->dev = sb.st_dev;
	s->ino = sb.st_ino;
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return 0;
	}
	if (fseeko(f, s->off, SEEK_SET) < 0) {
		fclose(f);
		return 0;
	}
	bool announced = false;
	line[0] = 'l';
	line[1] = ' ';
	while (!rc && fgets(line + 2, (int)sizeof line - 2, f)) {
		size_t l = strlen(line);
		if (line[l - 1] != '\n')
			break;          /* unfinished (or overlong) row: not yet */
		if (!announced) {
			char hdr[200];
			int n = snprintf(hdr, sizeof hdr, "file %s\n", rel);
			if ((rc = fdio_write_all(st->out_fd, hdr, (size_t)n, NULL)))
				break;
			announced = true;
		}
		if ((rc = fdio_write_all(st->out_fd, line, l, NULL)))
			break;
		if (s->head_len == (size_t)s->off && s->head_len < AGENT_STREAM_HEAD) {
			/* the first bytes as they were sent */
			size_t add = AGENT_STREAM_HEAD - s->head_len < l - 2 ? AGENT_STREAM_HEAD - s->head_len : l - 2;
			memcpy(s->head + s->head_len, line + 2, add);
			s->head_len += add;
		}
		s->off += (off_t)(l - 2);
	}
	fclose(f);
	return rc;
}

/* Send file REL whole (orchestrator/agentfile) unless it is as it was when last sent (same
 * file, size and modification time). A file larger than AGENTFILE_MAX is not sent (logged). */
static int stream_whole(struct agent_state *st, const char *base, const char *rel)
{
	struct agent_stream *s = stream_of(st, rel);
	struct stat sb;
	uint64_t sent = 0;
	if (!s)
		return 0;
	int fd = open_stream(base, rel, &sb);
	if (fd < 0)
		return 0;
	if (s->known && sb.st_dev == s->dev && sb.st_ino == s->ino && sb.st_size == s->size &&
	    sb.st_mtim.tv_sec == s->mtime.tv_sec && sb.st_mtim.tv_nsec == s->mtime.tv_nsec) {
		close(fd);
		return 0;
	}
	if ((uint64_t)sb.st_size > AGENTFILE_MAX) {
		log_error("agent: %s: %lld bytes, more than the %llu a file may have: not sent", rel,
			  (long long)sb.st_size, (unsigned long long)AGENTFILE_MAX);
		close(fd);
		return 0;
	}
	int rc = agentfile_send(st->out_fd, rel, fd, (uint64_t)sb.st_size, &sent);
	close(fd);
	*s = (struct agent_stream){ .off = (off_t)sent, .known = true, .dev = sb.st_dev, .ino = sb.st_ino,
				    .size = sb.st_size, .mtime = sb.st_mtim };
	snprintf(s->rel, sizeof s->rel, "%s", rel);
	return rc;
}

/* Every file of the nodes' run directory (top level, nodes/, logs/): what the text files
 * gained; with whole, the other files the nodes wrote (saved parameters, SQLite stores), each
 * sent whole. Those are sent on "fetch" only, once every node has exited: while a node runs
 * its store changes all the time, and a copy of a half-written file is no use. */
static int stream_all(struct agent_state *st, bool whole)
{
	static const char *const subs[] = { "", "nodes/", "logs/" };
	char dir[PATH_MAX], base[PATH_MAX];
	int rc = 0;
	if (!st->tb)
		return 0;
	snprintf(base, sizeof base, "%s/run", st->rundir);
	/* only the files the orchestrator takes (orchestrator/hostfiles): the others would be refused */
	const char *names[AGENT_MAX_NODES];
	for (size_t i = 0; i < st->n_nodes; i++)
		names[i] = st->names[i];
	for (size_t k = 0; !rc && k < sizeof subs / sizeof subs[0]; k++) {
		snprintf(dir, sizeof dir, "%s/run/%s", st->rundir, subs[k]);
		DIR *d = opendir(dir);
		struct dirent *e;
		while (!rc && d && (e = readdir(d))) {
			char rel[160];
			if (e->d_type != DT_REG || snprintf(rel, sizeof rel, "%s%s", subs[k], e->d_name) >= (int)sizeof rel)
				continue;
			if (hostfiles_allowed(rel, names, st->n_nodes))
				rc = stream_file(st, base, rel) ? -EIO : 0;
			else if (whole && hostfiles_whole_allowed(rel, names, st->n_nodes, true))  /* its nodes wrote it */
				rc = stream_whole(st, base, rel) ? -EIO : 0;
		}
		if (d)
			closedir(d);
	}
	return rc;
}

/* "fetch": what the files gained since they were last streamed, then "fetched". */
static int fetch(struct agent_state *st)
{
	int rc = stream_all(st, true);
	return rc ? rc : fdio_write_all(st->out_fd, "fetched\n", 8, NULL);
}

/* Answer one request line (without its newline). 1 = quit, 0 = go on, <0 = error. */
static int answer(struct agent_state *st, int out_fd, char *line, int64_t t2)
{
	char buf[AGENT_LINE_MAX];
	int64_t t1;
	if (!strncmp(line, "probe ", 6)) {
		char msg[AGENT_LINE_MAX - 8];
		if (probe(st, line + 6, msg, sizeof msg) < 0) {
			char why[AGENT_LINE_MAX - 16];
			msg[sizeof why - 1] = 0;
			memcpy(why, msg, sizeof why);
			snprintf(msg, sizeof msg, "fail %s", why);
		}
		int n = snprintf(buf, sizeof buf, "%s\n", msg);
		return fdio_write_all(out_fd, buf, (size_t)n, NULL);
	}
	if (!strncmp(line, "conf ", 5) || !strncmp(line, "unconf ", 7) || !strncmp(line, "limit ", 6)) {
		char msg[AGENT_LINE_MAX - 8];
		if ((line[0] == 'c' ? conf(st, line + 5, msg, sizeof msg) : line[0] == 'u' ? unconf(st, line + 7, msg, sizeof msg)
							: limit(st, line + 6, msg, sizeof msg)) < 0) {
			char why[AGENT_LINE_MAX - 16];
			msg[sizeof why - 1] = 0;
			memcpy(why, msg, sizeof why);
			snprintf(msg, sizeof msg, "fail %s", why);
		}
		int n = snprintf(buf, sizeof buf, "%s\n", msg);
		return fdio_write_all(out_fd, buf, (size_t)n, NULL);
	}
	if (!strncmp(line, "shape ", 6) || !strncmp(line, "shapepeers ", 11) || !strncmp(line, "shaper ", 7)) {
		char msg[AGENT_LINE_MAX - 8];
		int src = line[5] == ' ' ? shape(st, line + 6, msg, sizeof msg)
			  : line[5] == 'p' ? shape_peers(st, line + 11, msg, sizeof msg) : shaper(st, line + 7, msg, sizeof msg);
		if (src < 0) {
			char why[AGENT_LINE_MAX - 16];
			msg[sizeof why - 1] = 0;
			memcpy(why, msg, sizeof why);
			snprintf(msg, sizeof msg, "fail %s", why);
		}
		int n = snprintf(buf, sizeof buf, "%s\n", msg);
		return fdio_write_all(out_fd, buf, (size_t)n, NULL);
	}
	if (!strncmp(line, "launch ", 7))
		return launch(st, line + 7);
	if (!strncmp(line, "reshape ", 8))
		return reshape(st, line + 8);
	if (!strncmp(line, "send ", 5)) {
		relay_send(st, line + 5);
		return 0;
	}
	if (!strncmp(line, "kill ", 5)) {
		relay_kill(st, line + 5);
		return 0;
	}
	if (!strcmp(line, "fetch"))
		return fetch(st);
	if (!strcmp(line, "cleanup")) {
		struct cleanup_report rep = { 0 };
		int rc = cleanup_run(NULL, 0, &rep);
		int n = snprintf(buf, sizeof buf, "%s journals %d replayed %d live %d ended %d failed %d\n",
				 rc < 0 || rep.failed ? "fail" : "ok", rep.journals, rep.replayed, rep.live, rep.ended,
				 rep.failed);
		return fdio_write_all(out_fd, buf, (size_t)n, NULL);
	}
	if (!strncmp(line, "build ", 6) || !strcmp(line, "teardown")) {
		char msg[AGENT_LINE_MAX - 8];
		if (line[0] == 'b') {
			if (build(st, line + 6, msg, sizeof msg) < 0) {
				char why[AGENT_LINE_MAX - 16];
				msg[sizeof why - 1] = 0;
				memcpy(why, msg, sizeof why);
				snprintf(msg, sizeof msg, "fail %s", why);
			}
		} else {
			teardown(st);
			snprintf(msg, sizeof msg, "ok");
		}
		for (char *p = msg; *p; p++)
			if (*p == '\n' || *p == '\r')
				*p = ' ';
		int n = snprintf(buf, sizeof buf, "%s\n", msg);
		return fdio_write_all(out_fd, buf, (size_t)n, NULL);
	}
	if (!strncmp(line, "time ", 5) && !parse_i64(line + 5, &t1)) {
		int n = snprintf(buf, sizeof buf, "time %" PRId64 " %" PRId64 " ", t1, t2);
		int m = snprintf(buf + n, sizeof buf - (size_t)n, "%" PRId64 "\n", clock_now_ns());
		return fdio_write_all(out_fd, buf, (size_t)(n + m), NULL);
	}
	if (!strcmp(line, "quit")) {
		int rc = fdio_write_all(out_fd, "bye\n", 4, NULL);
		return rc ? rc : 1;
	}
	fdio_write_all(out_fd, "error unknown request\n", 22, NULL);
	return -EPROTO;
}

static int serve(struct agent_state *st, int in_fd, int out_fd, char *buf, size_t *havep);

int agent_serve(int in_fd, int out_fd)
{
	char hello[AGENT_LINE_MAX], host[64] = "?", buf[AGENT_LINE_MAX];
	struct agent_state st = { .echo_fd = -1, .out_fd = out_fd };
	char self[PATH_MAX];
	ssize_t sn = readlink("/proc/self/exe", self, sizeof self - 1);
	char *slash = sn > 0 ? (self[sn] = 0, strrchr(self, '/')) : NULL;
	if (slash) {
		*slash = 0;
		snprintf(st.bindir, sizeof st.bindir, "%.*s", (int)sizeof st.bindir - 1, self);
		snprintf(st.node_bin, sizeof st.node_bin, "%s/stalenet-node", st.bindir);
		snprintf(st.linkd_bin, sizeof st.linkd_bin, "%s/stalenet-linkd", st.bindir);
	}
	size_t have = 0;
	int rc;

	if (gethostname(host, sizeof host - 1) < 0)
		snprintf(host, sizeof host, "?");
	for (char *p = host; *p; p++)
		if (*p <= ' ' || *p > '~')
			*p = '?';
	int n = snprintf(hello, sizeof hello, "stalenet-agent %d %s %s %u %s\n", AGENT_PROTO, version_release(),
			 version_commit(), (unsigned)geteuid(), host);
	if ((rc = fdio_write_all(out_fd, hello, (size_t)n, NULL)))
		return rc;
	rc = serve(&st, in_fd, out_fd, buf, &have);
	/* whatever ended the connection (quit, end of input: the orchestrator or its ssh died, a bad
	 * request), this host's share goes */
	teardown(&st);
	return rc;
}

static int serve(struct agent_state *st, int in_fd, int out_fd, char *buf, size_t *havep)
{
	size_t have = *havep;
	int rc;
	for (;;) {
		/* requests, and the other hosts' underlay probes once built */
		struct pollfd p[2] = { { .fd = in_fd, .events = POLLIN }, { .fd = st->echo_fd, .events = POLLIN } };
		/* with nodes running, their control messages and exits are relayed every 5 ms */
		bool relay = st->ctl != NULL;
		int pr = poll(p, st->echo_fd >= 0 ? 2 : 1, relay ? 5 : -1);
		if (pr < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (relay) {
			relay_nodes(st);
			bool running = false;
			for (size_t i = 0; i < st->n_nodes && !running; i++)
				running = st->pid[i] > 0;
			if (running && clock_now_ns() >= st->next_stream_ns) {
				/* the traces as they grow: a host lost later loses only the last moments */
				if (stream_all(st, false))
					return -EIO;
				st->next_stream_ns = clock_now_ns() + AGENT_STREAM_NS;
			}
		}
		if (pr == 0)
			continue;
		if (st->echo_fd >= 0 && (p[1].revents & POLLIN))
			echo_once(st);
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		ssize_t r = read(in_fd, buf + have, AGENT_LINE_MAX - have);
		int64_t t2 = clock_now_ns();
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return 0;
		have += (size_t)r;
		char *nl;
		while ((nl = memchr(buf, '\n', have))) {
			*nl = 0;
			rc = answer(st, out_fd, buf, t2);
			if (rc)
				return rc > 0 ? 0 : rc;
			size_t used = (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, have - used);
			have -= used;
		}
		if (have == AGENT_LINE_MAX) {
			fdio_write_all(out_fd, "error line too long\n", 20, NULL);
			return -EPROTO;
		}
	}
}
