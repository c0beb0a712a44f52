/* netem/link_shaper: shape one direction of one node's link. The only netem/ interface the rest
 * of the project uses.
 *
 * A node's link is a veth pair: node_ifname inside the node's namespace, switch_ifname inside the
 * switch's. Direction `up` = node -> switch, `down` = switch -> node. Two backends:
 *   kernel  the netem qdisc (+ TBF child for rate) on the sending side's veth egress (libnl).
 *   nfq     stalenet-linkd holds packets at the receiving side's ingress (NFQUEUE, iptables mangle
 *           PREROUTING rule added here); rate is a TBF qdisc on the sending side's egress. The
 *           node's TCP is set to build offloaded packets of at least LINK_SHAPER_NFQ_MIN_TSO_SEGS
 *           segments (a sysctl of the node's namespace, when it is a named one): the emulator's
 *           CPU goes by packets, and loss is still drawn per wire segment.
 * Every host change (qdisc, iptables rule) is reported to the record hook BEFORE it is made, so the
 * orchestrator's teardown journal can undo it even if we crash halfway. */
#ifndef STALENET_LINK_SHAPER_H
#define STALENET_LINK_SHAPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/link_params.h"

enum link_backend { LINK_BACKEND_AUTO = 0, LINK_BACKEND_KERNEL, LINK_BACKEND_NFQ };
enum link_dir { LINK_DIR_UP = 0, LINK_DIR_DOWN };

/* nfq: net.ipv4.tcp_min_tso_segs set in the sending node's namespace when its up direction is
 * first shaped (kernel default 2). */
#define LINK_SHAPER_NFQ_MIN_TSO_SEGS 16

struct link_endpoint {
	const char *node_netns;     /* name under /run/netns ("" or NULL = current namespace) */
	const char *node_ifname;
	const char *switch_netns;
	const char *switch_ifname;
};

/* Record hook: called before each host change with a kind ("qdisc", "iptables"), the namespace
 * and an argv-style undo command (NULL-terminated; run inside that namespace it removes the
 * change). Returning < 0 aborts the change. */
typedef int (*link_record_fn)(void *ctx, const char *kind, const char *netns, const char *const *undo_argv);

struct link_shaper_opts {
	enum link_backend backend;  /* AUTO: kernel when link_shaper_probe_kernel says so, else nfq */
	const char *linkd_ctl;      /* nfq: control socket of the running stalenet-linkd */
	uint16_t queue_base;        /* nfq: first NFQUEUE number handed out (0 = 100) */
	link_record_fn record;      /* may be NULL */
	void *record_ctx;
};

struct link_counters {
	uint64_t packets, bytes;    /* sent by the qdisc / entered the queue */
	uint64_t dropped;           /* by loss or limit */
	uint64_t overlimits;        /* kernel: qdisc overlimits (rate); nfq: 0 */
	uint64_t backlog_pkts;      /* held right now */
	/* nfq: lateness of the packets released since the previous read of this direction (the
	 * emulator's interval, linkd_ctl "stats"); kernel: late_known false (the qdisc's timers
	 * are not observable), the fields 0. */
	bool late_known;
	uint64_t late_n;            /* packets released in the interval */
	double late_mean_ms, late_p99_ms, late_max_ms;
};

struct link_shaper;

/* A shaper. AUTO probes the kernel once. Returns NULL (logged, with the one-line reason) when the
 * requested backend is unavailable. */
struct link_shaper *link_shaper_new(const struct link_shaper_opts *opts);
void link_shaper_destroy(struct link_shaper **self);
enum link_backend link_shaper_backend(const struct link_shaper *self);

/* Start shaping one direction. Returns 0 or -errno (-EINVAL for invalid params, logged). */
int link_shaper_apply(struct link_shaper *self, const struct link_endpoint *ep, enum link_dir dir,
		      const struct link_params *p);
/* Shape a direction's packets exchanged with some peers differently from the rest: those whose
 * destination (up) or source (down) is one of the n_peers IPv4 addresses go to a class of their
 * own, named TAG (letters and digits, at most 16; one per direction), emulated with p instead of
 * the direction's parameters; the direction's rate (TBF at the sender) still serves them all.
 * nfq: a linkd queue per class at the receiver. kernel: a netem per class at the sender's egress
 * under a prio, or an HTB holding the rate, with u32 filters (link_kernel_plan; classes with
 * equal p share one; at most 15 distinct p per direction). The direction must be shaped first (link_shaper_apply). Calling it
 * again with the same tag changes p only (peers may then be NULL, n_peers 0). Returns 0,
 * -ENOENT (direction not shaped), -E2BIG (too many classes), -EINVAL or -errno. */
#define LINK_SHAPER_MAX_PEERS 1024
int link_shaper_apply_peers(struct link_shaper *self, const struct link_endpoint *ep, enum link_dir dir,
			    const char *tag, const uint32_t *peers_be, size_t n_peers, const struct link_params *p);
/* Change a shaped direction in place (qdisc change / linkd set; nothing is deleted). */
int link_shaper_change(struct link_shaper *self, const struct link_endpoint *ep, enum link_dir dir,
		       const struct link_params *p);
int link_shaper_counters(struct link_shaper *self, const struct link_endpoint *ep, enum link_dir dir,
			 struct link_counters *out);
/* Counters of both directions of n links at once: out[2*i + dir] and rc[2*i + dir] (0 or -errno,
 * e.g. -ENOENT for a direction not shaped) for eps[i], the same values link_shaper_counters gives.
 * nfq: ONE stats request to the emulator; both backends: one qdisc dump per namespace. Returns 0,
 * or -errno (every rc[] too) when nothing could be read. */
int link_shaper_counters_all(struct link_shaper *self, const struct link_endpoint *eps, size_t n,
			     struct link_counters *out, int *rc);
/* Stop shaping (idempotent: removing what is not there is 0). */
int link_shaper_remove(struct link_shaper *self, const struct link_endpoint *ep, enum link_dir dir);

/* 1 when this kernel has sch_netem (probed once in a scratch namespace, cached), 0 when not,
 * -errno when the probe itself failed (e.g. not root). */
int link_shaper_probe_kernel(void);

/* Human lines about both backends' availability, '\n'-separated, into buf. Returns the number
 * of available backends. */
int link_shaper_doctor(char *buf, size_t len);

#define LINK_SHAPER_NO_NETEM_MSG \
	"this kernel has no sch_netem: use --backend nfq, or run the kernel backend in the netem VM " \
	"(make check-kernel; see vagrant/)"

#endif
