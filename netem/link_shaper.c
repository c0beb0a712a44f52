/* netem/link_shaper: one interface, two backends (see the header).
 *
 * Which side does what, per direction:
 *                 sender (egress)              receiver (ingress)
 *   up            node_ifname in node_netns    switch_ifname in switch_netns
 *   down          switch_ifname in switch_ns   node_ifname in node_netns
 * kernel: netem (+TBF child) at the sender's root. nfq: TBF (rate only) at the sender's root,
 * linkd queue + iptables rule at the receiver: holding packets at the sender would count them
 * against the sending socket's buffer and TCP small queues, which collapses TCP throughput.
 *
 * Counters: link_shaper_counters_all is what the orchestrator samples every second. Per direction
 * it would be one emulator connection and one full qdisc dump (netns switch + RTM_GETQDISC of the
 * whole namespace) each: 400 directions took 0.1-0.9 s, during which the supervisor reads nothing.
 * All at once it is one `stats` request and one dump per sending namespace. */
#include "netem/link_shaper.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <inttypes.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/pkt_sched.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/netns.h"
#include "netem/link_kernel.h"
#include "netem/linkd.h"

#define SHAPER_MAX_LINKS 4096

/* kernel: a per-peer class of a direction (link_shaper_apply_peers). */
struct kclass {
	char tag[17];
	uint32_t *peers_be;
	size_t n_peers;
	struct link_params p;
};
#define SHAPER_MAX_KCLASSES 64

/* kernel: a direction's classes and the tree now on its interface. */
struct kstate {
	struct kclass cls[SHAPER_MAX_KCLASSES];
	size_t n;
	struct link_kernel_plan plan;       /* plan.filter: owned */
};

struct shaped {
	char name[128];          /* nfq: receiver netns/ifname, the linkd link name; kernel: "k:" sender's */
	uint16_t qnum;
	bool tbf;                /* nfq: TBF at the sender's root */
	bool rule;               /* nfq: iptables rule added */
	bool bridged;            /* nfq: the rule matches a bridge port (physdev) */
	/* kernel: the direction's own parameters and its per-peer classes (NULL: plain netem) */
	struct link_params def;
	struct kstate *k;
};

struct link_shaper {
	enum link_backend backend;
	char linkd_ctl[108];
	uint16_t next_queue;
	link_record_fn record;
	void *record_ctx;
	struct shaped links[SHAPER_MAX_LINKS];
	size_t nlinks;
};

struct sides {
	const char *snd_ns, *snd_if, *rcv_ns, *rcv_if;
};

static void sides_of(const struct link_endpoint *ep, enum link_dir dir, struct sides *s)
{
	const char *nns = ep->node_netns ? ep->node_netns : "";
	const char *sns = ep->switch_netns ? ep->switch_netns : "";
	if (dir == LINK_DIR_UP)
		*s = (struct sides){ nns, ep->node_ifname, sns, ep->switch_ifname };
	else
		*s = (struct sides){ sns, ep->switch_ifname, nns, ep->node_ifname };
}

static int probe_cached = 2; /* 2 = not probed */

int link_shaper_probe_kernel(void)
{
	if (probe_cached == 2)
		probe_cached = link_kernel_probe();
	return probe_cached;
}

struct link_shaper *link_shaper_new(const struct link_shaper_opts *opts)
{
	enum link_backend b = opts->backend;
	if (b == LINK_BACKEND_AUTO)
		b = link_shaper_probe_kernel() == 1 ? LINK_BACKEND_KERNEL : LINK_BACKEND_NFQ;
	else if (b == LINK_BACKEND_KERNEL && link_shaper_probe_kernel() != 1) {
		log_error("%s", LINK_SHAPER_NO_NETEM_MSG);
		return NULL;
	}
	if (b == LINK_BACKEND_NFQ && (!opts->linkd_ctl || !opts->linkd_ctl[0])) {
		log_error("link_shaper: the nfq backend needs the control socket of stalenet-linkd");
		return NULL;
	}
	struct link_shaper *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->backend = b;
	if (opts->linkd_ctl)
		snprintf(s->linkd_ctl, sizeof s->linkd_ctl, "%s", opts->linkd_ctl);
	s->next_queue = opts->queue_base ? opts->queue_base : 100;
	s->record = opts->record;
	s->record_ctx = opts->record_ctx;
	return s;
}

static void kclasses_free(struct shaped *l)
{
	if (!l->k)
		return;
	for (size_t i = 0; i < l->k->n; i++)
		free(l->k->cls[i].peers_be);
	free(l->k->plan.filter);
	free(l->k);
	l->k = NULL;
}

void link_shaper_destroy(struct link_shaper **self)
{
	if (!self || !*self)
		return;
	for (size_t i = 0; i < (*self)->nlinks; i++)
		kclasses_free(&(*self)->links[i]);
	free(*self);
	*self = NULL;
}

enum link_backend link_shaper_backend(const struct link_shaper *self)
{
	return self->backend;
}

static int record(struct link_shaper *s, const char *kind, const char *netns, const char *const *argv)
{
	return s->record ? s->record(s->record_ctx, kind, netns, argv) : 0;
}

/* nfq: the sending node's TCP is asked for segmentation-offload packets of at least
 * LINK_SHAPER_NFQ_MIN_TSO_SEGS segments (net.ipv4.tcp_min_tso_segs, a sysctl of the node's own
 * namespace: it goes with the namespace, nothing to record). TCP sizes its offloaded packets to
 * about a millisecond of its pacing rate, at least 2 segments; on the emulated links of a
 * training run (a few MB/s per flow) that is 2-3 segments, so the emulator handled a packet
 * (and the receiver sent an ACK) for every ~3 KB. Without a pacing qdisc TCP sends what its
 * window allows back to back either way, and the emulator draws loss per wire segment (linkd's
 * split queue); the segments of one packet share one delay draw (docs/precision.md). Only the
 * nfq backend does this: sch_netem drops an offloaded packet whole. */
static int write_min_tso_segs(void *arg)
{
	const char *v = arg;
	int fd = open("/proc/sys/net/ipv4/tcp_min_tso_segs", O_WRONLY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, v, strlen(v)) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

static void set_min_tso_segs(const char *netns)
{
	char v[16];
	int rc;

	if (!netns || !*netns)
		return; /* not a namespace of ours (the caller's own): the host's TCP is not ours to change */
	snprintf(v, sizeof v, "%d", LINK_SHAPER_NFQ_MIN_TSO_SEGS);
	if ((rc = netns_call(netns, write_min_tso_segs, v)) < 0)
		log_warn("link_shaper: %s: net.ipv4.tcp_min_tso_segs: %s (the emulator handles smaller packets)",
			 netns, strerror(-rc));
}

/* Run argv in netns (lib/netns); the tool's output is discarded unless debugging. */
static int run_in_ns(const char *netns, const char *const *argv)
{
	int rc = netns_exec(netns, argv, log_get_level() < LOG_DEBUG);

	return rc < 0 ? rc : rc ? -EIO : 0;
}

static struct shaped *lookup(struct link_shaper *s, const char *name, bool create)
{
	for (size_t i = 0; i < s->nlinks; i++)
		if (strcmp(s->links[i].name, name) == 0)
			return &s->links[i];
	if (!create || s->nlinks == SHAPER_MAX_LINKS)
		return NULL;
	struct shaped *l = &s->links[s->nlinks++];
	memset(l, 0, sizeof *l);
	snprintf(l->name, sizeof l->name, "%s", name);
	l->qnum = s->next_queue++;
	return l;
}

static void link_name(const struct sides *sd, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", sd->rcv_ns[0] ? sd->rcv_ns : "-", sd->rcv_if);
}

/* kernel: a direction is known by its sending side (where its qdiscs are). */
static void kname(const struct sides *sd, char *buf, size_t len)
{
	snprintf(buf, len, "k:%s/%s", sd->snd_ns[0] ? sd->snd_ns : "-", sd->snd_if);
}

/* kernel: plan the direction's tree (its parameters + classes) and make it so: built anew when
 * its layout (rate or not, bands, filters) differs from the one on the interface, else changed in
 * place. On failure the previous plan stays recorded. */
static int kernel_tree(const struct sides *sd, enum link_dir dir, struct shaped *l)
{
	struct link_kernel_class c[SHAPER_MAX_KCLASSES];
	struct link_kernel_plan plan;
	struct link_kernel_plan_filter *f;
	size_t nf = 0;
	int rc;

	for (size_t i = 0; i < l->k->n; i++) {
		c[i] = (struct link_kernel_class){ l->k->cls[i].peers_be, l->k->cls[i].n_peers, l->k->cls[i].p };
		nf += l->k->cls[i].n_peers;
	}
	if (!(f = malloc((nf ? nf : 1) * sizeof *f)))
		return -ENOMEM;
	/* up: the packets TO the peers (the node's egress); down: those FROM them (the switch's) */
	rc = link_kernel_plan(&l->def, c, l->k->n, dir == LINK_DIR_UP, f, nf, &plan);
	if (rc < 0) {
		log_error("link_shaper: per-peer classes on %s: %s", l->name + 2,
			  rc == -E2BIG ? "more than 15 distinct parameter sets" : strerror(-rc));
		free(f);
		return rc;
	}
	bool rebuild = !l->k->plan.filter || !link_kernel_plan_same_layout(&l->k->plan, &plan);
	rc = link_kernel_apply_plan(sd->snd_ns, sd->snd_if, &plan, rebuild);
	if (rc < 0) {
		free(f);
		if (rebuild) {          /* half a tree: the next call builds it anew */
			free(l->k->plan.filter);
			l->k->plan.filter = NULL;
		}
		return rc;
	}
	free(l->k->plan.filter);
	l->k->plan = plan;
	return 0;
}

static int linkd_set_params(struct link_shaper *s, const struct sides *sd, const struct shaped *l,
			    const struct link_params *p)
{
	char req[2048], params[1024], reply[256];
	struct link_params q = *p;
	q.rate_bps = 0; /* the rate is TBF's job */
	if (link_params_format(&q, params, sizeof params) < 0)
		return -EINVAL;
	snprintf(req, sizeof req, "set name=%s netns=%s ifname=%s queue=%u %s", l->name, sd->rcv_ns,
		 sd->rcv_if, l->qnum, params);
	int rc = linkd_request(s->linkd_ctl, req, reply, sizeof reply, 5000);
	if (rc < 0 && rc != -ECANCELED) /* -ECANCELED: the caller's stop at once, not an error */
		log_error("link_shaper: linkd %s: %s", l->name, rc == -EIO ? reply : strerror(-rc));
	return rc;
}

static int nfq_rate(struct link_shaper *s, const struct sides *sd, struct shaped *l, uint64_t rate_bps)
{
	int rc = 0;
	if (rate_bps && !l->tbf) {
		const char *undo[] = { "tc", "qdisc", "del", "dev", sd->snd_if, "root", NULL };
		if ((rc = record(s, "qdisc", sd->snd_ns, undo)) < 0)
			return rc;
		rc = link_kernel_tbf(sd->snd_ns, sd->snd_if, TC_H_ROOT, LINK_KERNEL_TBF_HANDLE, rate_bps, false);
		l->tbf = rc == 0;
	} else if (rate_bps && l->tbf) {
		rc = link_kernel_tbf(sd->snd_ns, sd->snd_if, TC_H_ROOT, LINK_KERNEL_TBF_HANDLE, rate_bps, true);
	} else if (!rate_bps && l->tbf) {
		rc = link_kernel_del(sd->snd_ns, sd->snd_if, TC_H_ROOT, LINK_KERNEL_TBF_HANDLE);
		l->tbf = false;
	}
	return rc;
}

/* The rule that sends a direction's packets to its queue. `down` arrives on the node's own
 * interface (routed: -i). `up` arrives on a bridge port in the switch namespace: bridged frames
 * reach iptables only with bridge-nf-call-iptables on in that namespace, and only a physdev
 * match names the port (-i would say br0). */
#define RULE_ARGC 15
static void rule_argv(const char **argv, const char *op, const char *ifname, bool bridged, char *qbuf,
		      size_t qlen, uint16_t q)
{
	snprintf(qbuf, qlen, "%u", q);
	if (bridged) {
		const char *v[RULE_ARGC] = { "iptables", "-w", "-t", "mangle", op, "PREROUTING", "-m", "physdev",
					     "--physdev-in", ifname, "-j", "NFQUEUE", "--queue-num", qbuf, NULL };
		memcpy(argv, v, sizeof v);
	} else {
		const char *v[RULE_ARGC] = { "iptables", "-w", "-t", "mangle", op, "PREROUTING", "-i", ifname,
					     "-j", "NFQUEUE", "--queue-num", qbuf, NULL };
		memcpy(argv, v, sizeof v);
	}
}

int link_shaper_apply(struct link_shaper *s, const struct link_endpoint *ep, enum link_dir dir,
		      const struct link_params *p)
{
	struct sides sd;
	const char *why = link_params_validate(p);
	if (why) {
		log_error("link_shaper: %s", why);
		return -EINVAL;
	}
	sides_of(ep, dir, &sd);
	if (s->backend == LINK_BACKEND_KERNEL) {
		const char *undo[] = { "tc", "qdisc", "del", "dev", sd.snd_if, "root", NULL };
		char kn[128];
		kname(&sd, kn, sizeof kn);
		struct shaped *l = lookup(s, kn, true);
		int rc = record(s, "qdisc", sd.snd_ns, undo);
		if (rc < 0 || (rc = link_kernel_netem(sd.snd_ns, sd.snd_if, p, false)) < 0)
			return rc;
		if (l) {                /* remembered for the per-peer classes (link_shaper_apply_peers) */
			kclasses_free(l);
			l->def = *p;
		}
		return 0;
	}
	char name[128];
	link_name(&sd, name, sizeof name);
	struct shaped *l = lookup(s, name, true);
	if (!l)
		return -ENOSPC;
	/* Bind the queue before the rule exists: a rule without a reader drops everything. */
	int rc = linkd_set_params(s, &sd, l, p);
	if (rc < 0)
		return rc;
	if (!l->rule) {
		const char *add[RULE_ARGC], *del[RULE_ARGC];
		/* Bridged only when the receiving interface really is a bridge port (a point-to-point
		 * veth, as in the test fixtures, is routed and matched with -i). */
		bool bridged = dir == LINK_DIR_UP && link_kernel_is_bridge_port(sd.rcv_ns, sd.rcv_if) == 1;
		l->bridged = bridged;
		char qb[16];

		if (bridged) {
			/* A sysctl of our own switch namespace: it goes with the namespace. */
			const char *on[] = { "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1", NULL };
			if ((rc = run_in_ns(sd.rcv_ns, on)) < 0) {
				log_error("link_shaper: cannot enable bridge netfilter in %s", sd.rcv_ns);
				return rc;
			}
		}
		rule_argv(add, "-A", sd.rcv_if, bridged, qb, sizeof qb, l->qnum);
		rule_argv(del, "-D", sd.rcv_if, bridged, qb, sizeof qb, l->qnum);
		if ((rc = record(s, "iptables", sd.rcv_ns, del)) < 0)
			return rc;
		rc = run_in_ns(sd.rcv_ns, add);
		if (rc < 0) {
			log_error("link_shaper: iptables NFQUEUE rule in %s on %s failed", sd.rcv_ns, sd.rcv_if);
			return rc;
		}
		l->rule = true;
		if (dir == LINK_DIR_UP)
			set_min_tso_segs(sd.snd_ns);
	}
	return nfq_rate(s, &sd, l, p->rate_bps);
}

int link_shaper_change(struct link_shaper *s, const struct link_endpoint *ep, enum link_dir dir,
		       const struct link_params *p)
{
	struct sides sd;
	const char *why = link_params_validate(p);
	if (why) {
		log_error("link_shaper: %s", why);
		return -EINVAL;
	}
	sides_of(ep, dir, &sd);
	if (s->backend == LINK_BACKEND_KERNEL) {
		char kn[128];
		kname(&sd, kn, sizeof kn);
		struct shaped *l = lookup(s, kn, false);
		if (!l || !l->k) {
			int rc = link_kernel_netem(sd.snd_ns, sd.snd_if, p, true);
			if (rc == 0 && l)
				l->def = *p;
			return rc;
		}
		/* the default band; the classes keep theirs until link_shaper_apply_peers changes them */
		struct link_params old = l->def;
		l->def = *p;
		int rc = kernel_tree(&sd, dir, l);
		if (rc < 0)
			l->def = old;
		return rc;
	}
	char name[128];
	link_name(&sd, name, sizeof name);
	struct shaped *l = lookup(s, name, false);
	if (!l)
		return -ENOENT;
	int rc = linkd_set_params(s, &sd, l, p);
	return rc < 0 ? rc : nfq_rate(s, &sd, l, p->rate_bps);
}

/* The peer class of a direction (link_shaper_apply_peers): its own linkd link and queue, named
 * after the direction's with the class tag, and one iptables rule per peer address inserted
 * ahead of the direction's own rule so that the peers' packets take the class's queue. */
#define PEER_RULE_ARGC 19
static void peer_rule_argv(const char **argv, const char *op, const char *ifname, bool bridged, enum link_dir dir,
			   const char *addrs, char *qbuf, size_t qlen, uint16_t q)
{
	const char *match = dir == LINK_DIR_UP ? "-d" : "-s";  /* up: to the peers; down: from them */
	snprintf(qbuf, qlen, "%u", q);
	if (bridged) {
		const char *v[PEER_RULE_ARGC] = { "iptables", "-w", "-t", "mangle", op, "PREROUTING", "-m", "physdev",
						  "--physdev-in", ifname, match, addrs, "-j", "NFQUEUE", "--queue-num",
						  qbuf, NULL };
		memcpy(argv, v, sizeof v);
	} else {
		const char *v[PEER_RULE_ARGC] = { "iptables", "-w", "-t", "mangle", op, "PREROUTING", "-i", ifname,
						  match, addrs, "-j", "NFQUEUE", "--queue-num", qbuf, NULL };
		memcpy(argv, v, sizeof v);
	}
}

/* kernel: the class TAG of a direction (see link_shaper_apply_peers): added to or changed in the
 * direction's tree (link_kernel_plan). */
static int kernel_peers(struct link_shaper *s, const struct sides *sd, enum link_dir dir, const char *tag,
			const uint32_t *peers_be, size_t n_peers, const struct link_params *p)
{
	char kn[128];
	struct kclass *c = NULL;
	int rc;

	kname(sd, kn, sizeof kn);
	struct shaped *l = lookup(s, kn, false);
	if (!l)
		return -ENOENT;         /* the direction is shaped first: its parameters are the default */
	if (!l->k && !(l->k = calloc(1, sizeof *l->k)))
		return -ENOMEM;
	for (size_t i = 0; i < l->k->n; i++)
		if (strcmp(l->k->cls[i].tag, tag) == 0)
			c = &l->k->cls[i];
	if (c) {                        /* an existing class: its parameters only */
		struct link_params old = c->p;
		c->p = *p;
		if ((rc = kernel_tree(sd, dir, l)) < 0)
			c->p = old;
		return rc;
	}
	if (!n_peers)
		return -EINVAL;         /* a new class needs its peers */
	if (l->k->n == SHAPER_MAX_KCLASSES)
		return -E2BIG;
	c = &l->k->cls[l->k->n];
	*c = (struct kclass){ .n_peers = n_peers, .p = *p };
	snprintf(c->tag, sizeof c->tag, "%s", tag);
	if (!(c->peers_be = malloc(n_peers * sizeof *peers_be)))
		return -ENOMEM;
	memcpy(c->peers_be, peers_be, n_peers * sizeof *peers_be);
	l->k->n++;
	if ((rc = kernel_tree(sd, dir, l)) < 0) {
		free(c->peers_be);
		l->k->n--;
	}
	return rc;
}

int link_shaper_apply_peers(struct link_shaper *s, const struct link_endpoint *ep, enum link_dir dir,
			    const char *tag, const uint32_t *peers_be, size_t n_peers, const struct link_params *p)
{
	struct sides sd;
	const char *why = link_params_validate(p);
	if (why) {
		log_error("link_shaper: %s", why);
		return -EINVAL;
	}
	if (n_peers > LINK_SHAPER_MAX_PEERS || !tag || !*tag || strlen(tag) > 16 || strpbrk(tag, " /=\n"))
		return -EINVAL;
	sides_of(ep, dir, &sd);
	if (s->backend == LINK_BACKEND_KERNEL)
		return kernel_peers(s, &sd, dir, tag, peers_be, n_peers, p);
	char name[128], own[128];
	link_name(&sd, own, sizeof own);
	struct shaped *base = lookup(s, own, false);
	if (!base || !base->rule)
		return -ENOENT;         /* the class goes ahead of the direction's own rule */
	if ((size_t)snprintf(name, sizeof name, "%s~%s", own, tag) >= sizeof name)
		return -ENAMETOOLONG;
	bool fresh = !lookup(s, name, false);
	if (fresh && !n_peers)
		return -EINVAL;         /* a new class needs its peers; an existing one keeps them */
	struct shaped *l = lookup(s, name, true);
	if (!l)
		return -ENOSPC;
	struct link_params q = *p;
	q.rate_bps = 0;                 /* the direction's TBF at the sender serves every class */
	int rc = linkd_set_params(s, &sd, l, &q);
	if (rc < 0 || !fresh)
		return rc;
	char *addrs = malloc(n_peers * 16 + 1);
	if (!addrs)
		return -ENOMEM;
	size_t pos = 0;
	for (size_t i = 0; i < n_peers; i++) {
		struct in_addr a = { peers_be[i] };
		char b[INET_ADDRSTRLEN];
		pos += (size_t)sprintf(addrs + pos, "%s%s", i ? "," : "", inet_ntop(AF_INET, &a, b, sizeof b));
	}
	const char *add[PEER_RULE_ARGC], *del[PEER_RULE_ARGC];
	char qb[16];
	l->bridged = base->bridged;
	peer_rule_argv(add, "-I", sd.rcv_if, l->bridged, dir, addrs, qb, sizeof qb, l->qnum);
	peer_rule_argv(del, "-D", sd.rcv_if, l->bridged, dir, addrs, qb, sizeof qb, l->qnum);
	if ((rc = record(s, "iptables", sd.rcv_ns, del)) == 0 && (rc = run_in_ns(sd.rcv_ns, add)) < 0)
		log_error("link_shaper: iptables NFQUEUE peer rule in %s on %s failed", sd.rcv_ns, sd.rcv_if);
	l->rule = rc == 0;
	free(addrs);
	return rc;
}

/* One direction's counters from the emulator's stats line (lateness in us -> ms). */
static void fill_from_linkd(struct link_counters *out, const struct linkd_counters *c)
{
	*out = (struct link_counters){ .packets = c->packets, .bytes = c->bytes, .dropped = c->dropped,
				       .backlog_pkts = c->held, .late_known = true, .late_n = c->late_n,
				       .late_mean_ms = (double)c->late_mean_us / 1000.0,
				       .late_p99_ms = (double)c->late_p99_us / 1000.0,
				       .late_max_ms = (double)c->late_max_us / 1000.0 };
}

int link_shaper_counters(struct link_shaper *s, const struct link_endpoint *ep, enum link_dir dir,
			 struct link_counters *out)
{
	struct sides sd;
	struct link_kernel_stats ks;
	memset(out, 0, sizeof *out);
	sides_of(ep, dir, &sd);
	if (s->backend == LINK_BACKEND_KERNEL) {
		int rc = link_kernel_stats(sd.snd_ns, sd.snd_if, LINK_KERNEL_NETEM_HANDLE, &ks);
		if (rc < 0)
			return rc;
		*out = (struct link_counters){ ks.packets, ks.bytes, ks.drops, ks.overlimits, ks.qlen };
		if (link_kernel_stats(sd.snd_ns, sd.snd_if, LINK_KERNEL_TBF_HANDLE, &ks) == 0) {
			out->dropped += ks.drops;
			out->overlimits += ks.overlimits;
		}
		return 0;
	}
	char name[128], req[200], reply[512];
	link_name(&sd, name, sizeof name);
	struct shaped *l = lookup(s, name, false);
	if (!l)
		return -ENOENT;
	snprintf(req, sizeof req, "stats name=%s", name);
	int rc = linkd_request(s->linkd_ctl, req, reply, sizeof reply, 2000);
	if (rc < 0)
		return rc;
	char nm[LINKD_CTL_NAME_MAX];
	struct linkd_counters lc;
	const char *line = strchr(reply, '\n');
	char *eol = line ? strchr(line + 1, '\n') : NULL;
	if (!eol)
		return -EIO;
	*eol = '\0';
	if (linkd_ctl_parse_stats_line(line + 1, nm, sizeof nm, &lc) < 0)
		return -EIO;
	fill_from_linkd(out, &lc);
	if (l->tbf && link_kernel_stats(sd.snd_ns, sd.snd_if, LINK_KERNEL_TBF_HANDLE, &ks) == 0) {
		out->dropped += ks.drops;
		out->overlimits = ks.overlimits;
		out->bytes = ks.bytes; /* linkd copies no payload: the sender's TBF knows the bytes */
	}
	return 0;
}

/* --- every direction at once (link_shaper_counters_all) ------------------------------------ */

/* One qdisc read of a direction, sorted by namespace so each namespace is dumped once. */
struct kjob {
	const char *ns;
	size_t dir;                 /* index into out[] */
	struct link_kernel_query q;
};

static int kjob_cmp(const void *a, const void *b)
{
	return strcmp(((const struct kjob *)a)->ns, ((const struct kjob *)b)->ns);
}

/* Run the reads of jobs[0..n), one link_kernel_stats_many per namespace. */
static void kjobs_run(struct kjob *jobs, size_t n)
{
	struct link_kernel_query *qs;

	if (!n)
		return;
	qs = malloc(n * sizeof *qs);
	if (!qs) {
		for (size_t i = 0; i < n; i++)
			jobs[i].q.rc = -ENOMEM;
		return;
	}
	qsort(jobs, n, sizeof *jobs, kjob_cmp);
	for (size_t i = 0; i < n;) {
		size_t j = i;

		while (j < n && strcmp(jobs[j].ns, jobs[i].ns) == 0) {
			qs[j - i] = jobs[j].q;
			j++;
		}
		link_kernel_stats_many(jobs[i].ns, qs, j - i);
		for (size_t k = i; k < j; k++)
			jobs[k].q = qs[k - i];
		i = j;
	}
	free(qs);
}

/* A direction's linkd link name and where its reply counters go (nfq). */
struct nfq_want {
	char name[128];
	size_t dir;
	const struct shaped *l;
};

static int shaped_cmp(const void *a, const void *b)
{
	return strcmp((*(const struct shaped *const *)a)->name, (*(const struct shaped *const *)b)->name);
}

static int want_cmp(const void *a, const void *b)
{
	return strcmp(((const struct nfq_want *)a)->name, ((const struct nfq_want *)b)->name);
}

struct nfq_fill {
	struct nfq_want *w;
	size_t nw;
	struct link_counters *out;
	int *rc;
};

/* linkd_ctl_parse_stats_reply callback: counters of one linkd link into its direction(s). */
static int nfq_fill_one(void *ctx, const char *name, const struct linkd_counters *c)
{
	struct nfq_fill *f = ctx;
	struct nfq_want key;
	struct nfq_want *hit;

	snprintf(key.name, sizeof key.name, "%s", name);
	hit = bsearch(&key, f->w, f->nw, sizeof *f->w, want_cmp);
	if (!hit)
		return 0; /* a link of someone else's or removed meanwhile */
	/* Same name twice among the directions: walk back to the first, then fill all. */
	while (hit > f->w && want_cmp(hit - 1, &key) == 0)
		hit--;
	for (; hit < f->w + f->nw && want_cmp(hit, &key) == 0; hit++) {
		fill_from_linkd(&f->out[hit->dir], c);
		f->rc[hit->dir] = 0;
	}
	return 0;
}

static int counters_all_kernel(const struct link_endpoint *eps, size_t n, struct link_counters *out, int *rc)
{
	struct kjob *jobs = malloc(4 * n * sizeof *jobs);

	if (!jobs)
		return -ENOMEM;
	for (size_t i = 0; i < 2 * n; i++) {
		struct sides sd;

		sides_of(&eps[i / 2], (enum link_dir)(i % 2), &sd);
		jobs[2 * i] = (struct kjob){ sd.snd_ns, i, { sd.snd_if, LINK_KERNEL_NETEM_HANDLE } };
		jobs[2 * i + 1] = (struct kjob){ sd.snd_ns, i, { sd.snd_if, LINK_KERNEL_TBF_HANDLE } };
	}
	kjobs_run(jobs, 4 * n);
	/* netem first: a direction without netem has no counters; TBF, when there, adds to them
	 * (as link_shaper_counters). */
	for (size_t k = 0; k < 4 * n; k++) {
		const struct kjob *j = &jobs[k];
		const struct link_kernel_stats *ks = &j->q.stats;

		if (j->q.handle == LINK_KERNEL_NETEM_HANDLE) {
			rc[j->dir] = j->q.rc;
			if (j->q.rc == 0)
				out[j->dir] = (struct link_counters){ ks->packets, ks->bytes, ks->drops, ks->overlimits,
								      ks->qlen };
		}
	}
	for (size_t k = 0; k < 4 * n; k++) {
		const struct kjob *j = &jobs[k];

		if (j->q.handle == LINK_KERNEL_TBF_HANDLE && j->q.rc == 0 && rc[j->dir] == 0) {
			out[j->dir].dropped += j->q.stats.drops;
			out[j->dir].overlimits += j->q.stats.overlimits;
		}
	}
	free(jobs);
	return 0;
}

static int counters_all_nfq(struct link_shaper *s, const struct link_endpoint *eps, size_t n,
			    struct link_counters *out, int *rc)
{
	struct nfq_want *w = malloc(2 * n * sizeof *w);
	struct kjob *jobs = malloc(2 * n * sizeof *jobs);
	const struct shaped **byname = malloc((s->nlinks + 1) * sizeof *byname);
	struct nfq_fill fill = { w, 0, out, rc };
	char *reply = NULL;
	size_t len, nj = 0;
	int r;

	if (!w || !jobs || !byname) {
		r = -ENOMEM;
		goto out;
	}
	/* Directions -> shaped links by name in O(n log n): 4096 linear lookups would not be. */
	for (size_t i = 0; i < s->nlinks; i++)
		byname[i] = &s->links[i];
	qsort(byname, s->nlinks, sizeof *byname, shaped_cmp);
	for (size_t i = 0; i < 2 * n; i++) {
		struct sides sd;
		struct shaped key;
		const struct shaped *kp = &key, **hit;

		sides_of(&eps[i / 2], (enum link_dir)(i % 2), &sd);
		link_name(&sd, key.name, sizeof key.name);
		hit = bsearch(&kp, byname, s->nlinks, sizeof *byname, shaped_cmp);
		if (hit) {
			memcpy(w[fill.nw].name, key.name, sizeof key.name);
			w[fill.nw].dir = i;
			w[fill.nw].l = *hit;
			fill.nw++;
		}
	}
	qsort(w, fill.nw, sizeof *w, want_cmp);
	/* ONE request for every link: the emulator answers in messages of whole lines. */
	r = linkd_request_all(s->linkd_ctl, "stats", &reply, &len, 2000);
	if (r == 0)
		r = linkd_ctl_parse_stats_reply(reply, len, nfq_fill_one, &fill);
	if (r < 0) {
		log_error("link_shaper: linkd stats: %s", r == -EIO && reply ? reply : strerror(-r));
		goto out;
	}
	/* The rate is TBF's, at the sender: one qdisc dump per sending namespace. */
	for (size_t k = 0; k < fill.nw; k++) {
		struct sides sd;
		size_t i = w[k].dir;

		if (rc[i] < 0 || !w[k].l->tbf)
			continue;
		sides_of(&eps[i / 2], (enum link_dir)(i % 2), &sd);
		jobs[nj++] = (struct kjob){ sd.snd_ns, i, { sd.snd_if, LINK_KERNEL_TBF_HANDLE } };
	}
	kjobs_run(jobs, nj);
	for (size_t k = 0; k < nj; k++) {
		struct link_counters *o = &out[jobs[k].dir];

		if (jobs[k].q.rc < 0)
			continue;
		o->dropped += jobs[k].q.stats.drops;
		o->overlimits = jobs[k].q.stats.overlimits;
		o->bytes = jobs[k].q.stats.bytes; /* linkd copies no payload: the sender's TBF knows the bytes */
	}
	r = 0;
out:
	free(reply);
	free(byname);
	free(jobs);
	free(w);
	return r;
}

int link_shaper_counters_all(struct link_shaper *s, const struct link_endpoint *eps, size_t n,
			     struct link_counters *out, int *rc)
{
	int r;

	memset(out, 0, 2 * n * sizeof *out);
	for (size_t i = 0; i < 2 * n; i++)
		rc[i] = -ENOENT;
	r = s->backend == LINK_BACKEND_KERNEL ? counters_all_kernel(eps, n, out, rc)
					      : counters_all_nfq(s, eps, n, out, rc);
	if (r < 0)
		for (size_t i = 0; i < 2 * n; i++)
			rc[i] = r;
	return r;
}

int link_shaper_remove(struct link_shaper *s, const struct link_endpoint *ep, enum link_dir dir)
{
	struct sides sd;
	sides_of(ep, dir, &sd);
	if (s->backend == LINK_BACKEND_KERNEL) {
		char kn[128];
		kname(&sd, kn, sizeof kn);
		struct shaped *l = lookup(s, kn, false);
		if (l) {
			kclasses_free(l);
			*l = s->links[--s->nlinks];
		}
		return link_kernel_del(sd.snd_ns, sd.snd_if, TC_H_ROOT, LINK_KERNEL_NETEM_HANDLE);
	}
	char name[128], req[200], reply[256];
	link_name(&sd, name, sizeof name);
	struct shaped *l = lookup(s, name, false);
	if (!l)
		return 0;
	if (l->rule) {
		const char *del[RULE_ARGC];
		char qb[16];
		rule_argv(del, "-D", sd.rcv_if, l->bridged, qb, sizeof qb, l->qnum);
		run_in_ns(sd.rcv_ns, del);
		l->rule = false;
	}
	snprintf(req, sizeof req, "del name=%s", name);
	linkd_request(s->linkd_ctl, req, reply, sizeof reply, 2000);
	if (l->tbf)
		link_kernel_del(sd.snd_ns, sd.snd_if, TC_H_ROOT, LINK_KERNEL_TBF_HANDLE);
	*l = s->links[--s->nlinks];
	return 0;
}

/* Can this host bind an NFQUEUE and add the iptables target? Tried in a scratch namespace. */
static int probe_nfq(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (unshare(CLONE_NEWNET) < 0)
			_exit(2);
		struct mnl_socket *nl = mnl_socket_open(NETLINK_NETFILTER);
		if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
			_exit(3);
		char buf[MNL_SOCKET_BUFFER_SIZE];
		struct nlmsghdr *nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, 1);
		nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, NFQNL_CFG_CMD_BIND);
		nlh->nlmsg_flags |= NLM_F_ACK;
		if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
			_exit(3);
		ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
		if (n <= 0 || mnl_cb_run(buf, (size_t)n, 0, 0, NULL, NULL) < 0)
			_exit(3);
		const char *argv[] = { "iptables", "-w", "-t", "mangle", "-A", "PREROUTING", "-i", "lo",
				       "-j", "NFQUEUE", "--queue-num", "1", NULL };
		_exit(run_in_ns(NULL, argv) == 0 ? 0 : 4);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 5;
}

int link_shaper_doctor(char *buf, size_t len)
{
	int avail = 0, k = link_shaper_probe_kernel();
	size_t off = 0;
	if (k == 1) {
		avail++;
		off += (size_t)snprintf(buf + off, len - off, "netem kernel backend: available (sch_netem, libnl-route)\n");
	} else if (k == 0) {
		off += (size_t)snprintf(buf + off, len - off, "netem kernel backend: unavailable: %s\n",
					LINK_SHAPER_NO_NETEM_MSG);
	} else {
		off += (size_t)snprintf(buf + off, len - off, "netem kernel backend: probe failed: %s\n",
					strerror(-k));
	}
	if (off >= len)
		return avail;
	int q = probe_nfq();
	static const char *const why[] = { "", "", "cannot create a network namespace (root?)",
					   "nfnetlink_queue bind failed (CONFIG_NETFILTER_NETLINK_QUEUE?)",
					   "iptables NFQUEUE target missing", "probe crashed" };
	if (q == 0) {
		avail++;
		snprintf(buf + off, len - off, "netem nfq backend: available (iptables NFQUEUE + stalenet-linkd)\n");
	} else {
		snprintf(buf + off, len - off, "netem nfq backend: unavailable: %s\n",
			 q > 0 && q < 6 ? why[q] : strerror(-q));
	}
	return avail;
}
