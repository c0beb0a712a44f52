/* netem/link_kernel: netem and TBF qdiscs through netlink (see the header). */
#include "netem/link_kernel.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/pkt_sched.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/class.h>
#include <netlink/route/classifier.h>
#include <netlink/route/cls/u32.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/qdisc/prio.h>
#include <netlink/route/qdisc/tbf.h>
#include <netlink/route/tc.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/netns.h"
#include "netem/netem_model.h"

/* libnl error -> negative errno at the module boundary. */
static int nl2errno(int nle)
{
	switch (-nle) {
	case 0: return 0;
	case NLE_OBJ_NOTFOUND: return -ENOENT;
	case NLE_EXIST: return -EEXIST;
	case NLE_PERM: return -EPERM;
	case NLE_NOMEM: return -ENOMEM;
	case NLE_INVAL: return -EINVAL;
	case NLE_RANGE: return -ERANGE;
	case NLE_BUSY: return -EBUSY;
	case NLE_OPNOTSUPP: return -EOPNOTSUPP;
	case NLE_NODEV: return -ENODEV;
	default: return -EIO;
	}
}

static struct nl_sock *route_sock(void)
{
	struct nl_sock *sk = nl_socket_alloc();
	if (!sk)
		return NULL;
	if (nl_connect(sk, NETLINK_ROUTE) < 0) {
		nl_socket_free(sk);
		return NULL;
	}
	return sk;
}

struct netem_op {
	const char *ifname;
	const struct link_params *p;
	bool change;
	int ifindex;   /* when > 0, used instead of ifname */
	uint32_t parent, handle;
	uint64_t rate_bps;
	struct link_kernel_stats *stats;
};

static int put_u32_pair(struct nl_msg *msg, int type, uint32_t a, uint32_t b)
{
	uint32_t v[2] = { a, b };
	return nla_put(msg, type, sizeof v, v);
}

static int netem_msg(struct nl_msg *msg, int ifindex, uint32_t parent, uint32_t handle, const struct link_params *p)
{
	struct tcmsg tcm = { .tcm_family = AF_UNSPEC, .tcm_ifindex = ifindex,
			     .tcm_handle = handle, .tcm_parent = parent };
	struct tc_netem_qopt qopt = {
		.limit = p->limit_pkts ? p->limit_pkts : 1000,
		.loss = p->loss_model == LINK_LOSS_RANDOM ? netem_model_scale_ppm(p->loss_ppm) : 0,
		.gap = p->reorder_ppm ? (p->gap ? p->gap : 1) : 0, /* tc: reorder without gap = gap 1 */
		.duplicate = netem_model_scale_ppm(p->dup_ppm),
	};
	int rc;
	if ((rc = nlmsg_append(msg, &tcm, sizeof tcm, NLMSG_ALIGNTO)) < 0 ||
	    (rc = nla_put_string(msg, TCA_KIND, "netem")) < 0)
		return rc;
	/* TCA_OPTIONS = qopt followed by attributes; length fixed up at the end (a nest by hand:
	 * netem's options are not a pure attribute nest). */
	struct nlmsghdr *h = nlmsg_hdr(msg);
	size_t opt_off = NLMSG_ALIGN(h->nlmsg_len);
	if ((rc = nla_put(msg, TCA_OPTIONS, sizeof qopt, &qopt)) < 0)
		return rc;
	struct tc_netem_corr corr = { netem_model_scale_ppm(p->delay_corr_ppm),
				      netem_model_scale_ppm(p->loss_corr_ppm),
				      netem_model_scale_ppm(p->dup_corr_ppm) };
	if ((rc = nla_put(msg, TCA_NETEM_CORR, sizeof corr, &corr)) < 0 ||
	    (rc = put_u32_pair(msg, TCA_NETEM_REORDER, netem_model_scale_ppm(p->reorder_ppm),
			       netem_model_scale_ppm(p->reorder_corr_ppm))) < 0 ||
	    (rc = put_u32_pair(msg, TCA_NETEM_CORRUPT, netem_model_scale_ppm(p->corrupt_ppm),
			       netem_model_scale_ppm(p->corrupt_corr_ppm))) < 0)
		return rc;
	int64_t lat = (int64_t)p->delay_us * 1000, jit = (int64_t)p->jitter_us * 1000;
	if ((rc = nla_put_s64(msg, TCA_NETEM_LATENCY64, lat)) < 0 ||
	    (rc = nla_put_s64(msg, TCA_NETEM_JITTER64, jit)) < 0)
		return rc;
	if (p->loss_model == LINK_LOSS_GEMODEL) {
		struct tc_netem_gemodel ge = { netem_model_scale_ppm(p->ge_p_ppm), netem_model_scale_ppm(p->ge_r_ppm),
					       netem_model_scale_ppm(p->ge_1h_ppm), netem_model_scale_ppm(p->ge_1k_ppm) };
		struct nlattr *loss = nla_nest_start(msg, TCA_NETEM_LOSS);
		if (!loss || (rc = nla_put(msg, NETEM_LOSS_GE, sizeof ge, &ge)) < 0)
			return rc < 0 ? rc : -NLE_NOMEM;
		nla_nest_end(msg, loss);
	}
	if (p->jitter_us && p->dist != LINK_DIST_NONE && p->dist != LINK_DIST_UNIFORM) {
		const int16_t *t;
		size_t n;
		if (netem_model_dist_table(p->dist, NULL, &t, &n) == 0 &&
		    (rc = nla_put(msg, TCA_NETEM_DELAY_DIST, (int)(n * sizeof *t), t)) < 0)
			return rc;
	}
	h = nlmsg_hdr(msg);
	struct nlattr *opt = (struct nlattr *)((char *)h + opt_off);
	opt->nla_len = (uint16_t)(h->nlmsg_len - opt_off);
	return 0;
}

static int ifindex_of(const struct netem_op *op)
{
	if (op->ifindex > 0)
		return op->ifindex;
	int idx = (int)if_nametoindex(op->ifname);
	if (idx <= 0)
		log_error("no interface %s: %s", op->ifname, strerror(errno));
	return idx;
}

int link_kernel_tbf_sizes(uint64_t rate_bps, int *rate_Bps, int *bucket_bytes)
{
	uint64_t Bps = rate_bps / 8;

	/* libnl's rtnl_qdisc_tbf_set_rate takes an int and sends no TCA_TBF_RATE64: a larger
	 * rate used to be clamped here without a word. The validator refuses it (lib/limits.h). */
	if (rate_bps > LIMITS_MAX_RATE_BPS || Bps > INT32_MAX)
		return -ERANGE;
	*rate_Bps = (int)Bps;
	/* Bucket: 4 ms worth of bytes, at least a few full frames (GSO on veth sends 64 KB). */
	*bucket_bytes = (int)(Bps / 250);
	if (*bucket_bytes < 3 * 1514)
		*bucket_bytes = 3 * 1514;
	return 0;
}

static int do_tbf(struct nl_sock *sk, int ifindex, uint32_t parent, uint32_t handle, uint64_t rate_bps, bool change)
{
	struct rtnl_qdisc *q = rtnl_qdisc_alloc();
	if (!q)
		return -ENOMEM;
	rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
	rtnl_tc_set_parent(TC_CAST(q), parent);
	rtnl_tc_set_handle(TC_CAST(q), handle);
	int rc = rtnl_tc_set_kind(TC_CAST(q), "tbf");
	int Bps = 0, bucket = 0;
	if (rc == 0)
		rc = link_kernel_tbf_sizes(rate_bps, &Bps, &bucket);
	if (rc < 0) {
		log_error("link_kernel: rate %llu bit/s is above the TBF limit of %llu bit/s",
			  (unsigned long long)rate_bps, LIMITS_MAX_RATE_BPS);
		rtnl_qdisc_put(q);
		return rc;
	}
	if (rc == 0) {
		rtnl_qdisc_tbf_set_rate(q, Bps, bucket, 0);
		rc = rtnl_qdisc_tbf_set_limit_by_latency(q, 50000);
	}
	if (rc == 0)
		rc = rtnl_qdisc_add(sk, q, change ? NLM_F_REPLACE : NLM_F_CREATE | NLM_F_EXCL);
	rtnl_qdisc_put(q);
	return nl2errno(rc);
}

/* One netem qdisc (parent, handle) with p, created or replaced in place. */
static int send_netem(struct nl_sock *sk, int ifindex, uint32_t parent, uint32_t handle, const struct link_params *p,
		      bool change)
{
	/* Room for the 8 KB jitter table: the default message size is one page. */
	struct nl_msg *msg = nlmsg_alloc_size(32768);
	int rc;
	if (msg && !nlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, RTM_NEWQDISC, 0,
			      NLM_F_REQUEST | (change ? NLM_F_REPLACE : NLM_F_CREATE | NLM_F_EXCL))) {
		nlmsg_free(msg);
		msg = NULL;
	}
	if (!msg)
		return -ENOMEM;
	rc = netem_msg(msg, ifindex, parent, handle, p);
	if (rc < 0) {
		nlmsg_free(msg);
		return nl2errno(rc);
	}
	return nl2errno(nl_send_sync(sk, msg)); /* frees msg */
}

static int netem_in_ns(void *arg)
{
	struct netem_op *op = arg;
	struct nl_sock *sk = route_sock();
	int rc, ifindex = ifindex_of(op);
	if (!sk) {
		rc = -ENOMEM;
		goto out;
	}
	if (ifindex <= 0) {
		rc = -ENODEV;
		goto out;
	}
	rc = send_netem(sk, ifindex, TC_H_ROOT, LINK_KERNEL_NETEM_HANDLE, op->p, op->change);
	if (rc < 0)
		goto out;
	/* Rate: TBF under netem's class 1:1 (netem hands released packets to its child). */
	if (op->p->rate_bps) {
		rc = do_tbf(sk, ifindex, LINK_KERNEL_NETEM_HANDLE | 1, LINK_KERNEL_TBF_HANDLE,
			    op->p->rate_bps, false);
		if (rc == -EEXIST)
			rc = do_tbf(sk, ifindex, LINK_KERNEL_NETEM_HANDLE | 1, LINK_KERNEL_TBF_HANDLE,
				    op->p->rate_bps, true);
	} else if (op->change) {
		struct rtnl_qdisc *q = rtnl_qdisc_alloc();
		if (q) {
			rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
			rtnl_tc_set_parent(TC_CAST(q), LINK_KERNEL_NETEM_HANDLE | 1);
			rtnl_tc_set_handle(TC_CAST(q), LINK_KERNEL_TBF_HANDLE);
			int d = rtnl_qdisc_delete(sk, q); /* no rate any more: drop the child */
			(void)d;
			rtnl_qdisc_put(q);
		}
	}
out:
	if (sk)
		nl_socket_free(sk);
	return rc;
}

int link_kernel_netem(const char *netns, const char *ifname, const struct link_params *p, bool change)
{
	struct netem_op op = { .ifname = ifname, .p = p, .change = change };
	if (link_params_validate(p))
		return -EINVAL;
	int rc = netns_call(netns, netem_in_ns, &op);
	if (rc < 0 && rc != -ENOENT)
		log_error("netem on %s/%s: %s", netns ? netns : "", ifname, strerror(-rc));
	return rc;
}

static int tbf_in_ns(void *arg)
{
	struct netem_op *op = arg;
	struct nl_sock *sk = route_sock();
	int rc = -ENOMEM, ifindex = ifindex_of(op);
	if (sk && ifindex > 0)
		rc = do_tbf(sk, ifindex, op->parent, op->handle, op->rate_bps, op->change);
	else if (sk)
		rc = -ENODEV;
	if (sk)
		nl_socket_free(sk);
	return rc;
}

int link_kernel_tbf(const char *netns, const char *ifname, uint32_t parent, uint32_t handle,
		    uint64_t rate_bps, bool change)
{
	struct netem_op op = { .ifname = ifname, .parent = parent, .handle = handle,
			       .rate_bps = rate_bps, .change = change };
	int rc = netns_call(netns, tbf_in_ns, &op);
	if (rc < 0)
		log_error("tbf on %s/%s: %s", netns ? netns : "", ifname, strerror(-rc));
	return rc;
}

static int del_in_ns(void *arg)
{
	struct netem_op *op = arg;
	struct nl_sock *sk = route_sock();
	int rc = -ENOMEM, ifindex = (int)if_nametoindex(op->ifname);
	if (ifindex <= 0) {
		rc = 0; /* interface gone: so is its qdisc */
		goto out;
	}
	if (!sk)
		goto out;
	struct rtnl_qdisc *q = rtnl_qdisc_alloc();
	if (!q)
		goto out;
	rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
	rtnl_tc_set_parent(TC_CAST(q), op->parent);
	rtnl_tc_set_handle(TC_CAST(q), op->handle);
	rc = nl2errno(rtnl_qdisc_delete(sk, q));
	rtnl_qdisc_put(q);
	if (rc == -ENOENT || rc == -EINVAL)
		rc = 0;
out:
	if (sk)
		nl_socket_free(sk);
	return rc;
}

int link_kernel_del(const char *netns, const char *ifname, uint32_t parent, uint32_t handle)
{
	struct netem_op op = { .ifname = ifname, .parent = parent, .handle = handle };
	return netns_call(netns, del_in_ns, &op);
}

static int stats_in_ns(void *arg)
{
	struct netem_op *op = arg;
	struct nl_sock *sk = route_sock();
	struct nl_cache *cache = NULL;
	int rc = -ENOMEM, ifindex = ifindex_of(op);
	if (!sk)
		goto out;
	rc = nl2errno(rtnl_qdisc_alloc_cache(sk, &cache));
	if (rc < 0)
		goto out;
	struct rtnl_qdisc *q = rtnl_qdisc_get(cache, ifindex, op->handle);
	if (!q) {
		rc = -ENOENT;
		goto out;
	}
	op->stats->packets = rtnl_tc_get_stat(TC_CAST(q), RTNL_TC_PACKETS);
	op->stats->bytes = rtnl_tc_get_stat(TC_CAST(q), RTNL_TC_BYTES);
	op->stats->drops = rtnl_tc_get_stat(TC_CAST(q), RTNL_TC_DROPS);
	op->stats->overlimits = rtnl_tc_get_stat(TC_CAST(q), RTNL_TC_OVERLIMITS);
	op->stats->qlen = rtnl_tc_get_stat(TC_CAST(q), RTNL_TC_QLEN);
	rtnl_qdisc_put(q);
	rc = 0;
out:
	if (cache)
		nl_cache_free(cache);
	if (sk)
		nl_socket_free(sk);
	return rc;
}

int link_kernel_stats(const char *netns, const char *ifname, uint32_t handle, struct link_kernel_stats *out)
{
	struct netem_op op = { .ifname = ifname, .handle = handle, .stats = out };
	memset(out, 0, sizeof *out);
	return netns_call(netns, stats_in_ns, &op);
}

struct stats_batch {
	struct link_kernel_query *q;
	size_t n;
};

/* One qdisc dump for every query of the namespace (rtnl_qdisc_alloc_cache dumps them all). */
static int stats_many_in_ns(void *arg)
{
	struct stats_batch *b = arg;
	struct nl_sock *sk = route_sock();
	struct nl_cache *cache = NULL;
	int rc = -ENOMEM;

	if (!sk)
		goto out;
	rc = nl2errno(rtnl_qdisc_alloc_cache(sk, &cache));
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < b->n; i++) {
		struct link_kernel_query *q = &b->q[i];
		int ifindex = (int)if_nametoindex(q->ifname);
		struct rtnl_qdisc *qd = ifindex > 0 ? rtnl_qdisc_get(cache, ifindex, q->handle) : NULL;

		memset(&q->stats, 0, sizeof q->stats);
		if (!qd) {
			q->rc = -ENOENT;
			continue;
		}
		q->stats.packets = rtnl_tc_get_stat(TC_CAST(qd), RTNL_TC_PACKETS);
		q->stats.bytes = rtnl_tc_get_stat(TC_CAST(qd), RTNL_TC_BYTES);
		q->stats.drops = rtnl_tc_get_stat(TC_CAST(qd), RTNL_TC_DROPS);
		q->stats.overlimits = rtnl_tc_get_stat(TC_CAST(qd), RTNL_TC_OVERLIMITS);
		q->stats.qlen = rtnl_tc_get_stat(TC_CAST(qd), RTNL_TC_QLEN);
		q->rc = 0;
		rtnl_qdisc_put(qd);
	}
	rc = 0;
out:
	if (cache)
		nl_cache_free(cache);
	if (sk)
		nl_socket_free(sk);
	return rc;
}

int link_kernel_stats_many(const char *netns, struct link_kernel_query *q, size_t n)
{
	struct stats_batch b = { q, n };
	int rc;

	for (size_t i = 0; i < n; i++)
		q[i].rc = -ENOENT;
	rc = n ? netns_call(netns, stats_many_in_ns, &b) : 0;
	if (rc < 0)
		for (size_t i = 0; i < n; i++)
			q[i].rc = rc;
	return rc;
}

static int master_in_ns(void *arg)
{
	struct netem_op *op = arg;
	struct nl_sock *sk = route_sock();
	struct rtnl_link *link = NULL;
	int rc;
	if (!sk)
		return -ENOMEM;
	rc = nl2errno(rtnl_link_get_kernel(sk, 0, op->ifname, &link));
	if (rc == 0) {
		rc = rtnl_link_get_master(link) > 0 ? 1 : 0;
		rtnl_link_put(link);
	}
	nl_socket_free(sk);
	return rc;
}

int link_kernel_is_bridge_port(const char *netns, const char *ifname)
{
	struct netem_op op = { .ifname = ifname };
	return netns_call(netns, master_in_ns, &op);
}

/* --- per-destination shaping (see the header) ------------------------------------------------ */

/* Band k's class: prio's 1:k, or HTB's 1:(0x10+k) (1:1 is HTB's parent class, the rate). */
static uint32_t band_classid(const struct link_kernel_plan *pl, size_t k)
{
	return LINK_KERNEL_NETEM_HANDLE | (uint32_t)(pl->rate_bps ? 0x10 + k : k);
}

/* The class band (2..) whose canonical parameters are tok, or 0. */
static size_t band_of(const struct link_kernel_plan *pl, const char *tok, char (*toks)[1024])
{
	for (size_t b = 1; b < pl->n_bands; b++)
		if (strcmp(toks[b], tok) == 0)
			return b + 1;
	return 0;
}

int link_kernel_plan(const struct link_params *p, const struct link_kernel_class *c, size_t n, bool match_dst,
		     struct link_kernel_plan_filter *filters, size_t max_filters, struct link_kernel_plan *out)
{
	char toks[LINK_KERNEL_MAX_BANDS][1024]; /* canonical parameters of each band */
	struct link_params q;

	memset(out, 0, sizeof *out);
	if (link_params_validate(p))
		return -EINVAL;
	out->rate_bps = p->rate_bps;
	out->match_dst = match_dst;
	out->filter = filters;
	q = *p;
	q.rate_bps = 0;
	out->band[0] = (struct link_kernel_plan_band){ band_classid(out, 1), (0x10u + 1) << 16, q };
	if (link_params_format(&q, toks[0], sizeof toks[0]) < 0)
		return -EINVAL;
	out->n_bands = 1;
	for (size_t i = 0; i < n; i++) {
		char tok[1024];
		size_t b;
		q = c[i].p;
		q.rate_bps = 0;
		if (!c[i].n_peers || link_params_validate(&q) || link_params_format(&q, tok, sizeof tok) < 0)
			return -EINVAL;
		/* a class equal to the default still gets a band of its own: its peers are named */
		b = band_of(out, tok, toks);
		if (!b) {
			if (out->n_bands == LINK_KERNEL_MAX_BANDS)
				return -E2BIG;
			b = ++out->n_bands;
			out->band[b - 1] = (struct link_kernel_plan_band){ band_classid(out, b),
									   (0x10u + (uint32_t)b) << 16, q };
			memcpy(toks[b - 1], tok, sizeof tok);
		}
		for (size_t k = 0; k < c[i].n_peers; k++) {
			for (size_t f = 0; f < out->n_filters; f++)
				if (filters[f].addr_be == c[i].peers_be[k])
					return -EINVAL;
			if (out->n_filters == max_filters)
				return -E2BIG;
			filters[out->n_filters++] = (struct link_kernel_plan_filter){ c[i].peers_be[k],
										      band_classid(out, b) };
		}
	}
	if (out->n_bands < 2) {         /* prio takes at least two bands: the second stays empty */
		out->band[1] = (struct link_kernel_plan_band){ band_classid(out, 2), (0x10u + 2) << 16, out->band[0].p };
		out->n_bands = 2;
	}
	return 0;
}

bool link_kernel_plan_same_layout(const struct link_kernel_plan *a, const struct link_kernel_plan *b)
{
	if (!a->rate_bps != !b->rate_bps || a->n_bands != b->n_bands || a->n_filters != b->n_filters ||
	    a->match_dst != b->match_dst)
		return false;
	for (size_t f = 0; f < a->n_filters; f++)
		if (a->filter[f].addr_be != b->filter[f].addr_be || a->filter[f].classid != b->filter[f].classid)
			return false;
	return true;
}

struct plan_op {
	const char *ifname;
	const struct link_kernel_plan *plan;
	bool rebuild;
};

static int prio_add(struct nl_sock *sk, int ifindex, uint32_t parent, uint32_t handle, size_t bands)
{
	struct rtnl_qdisc *q = rtnl_qdisc_alloc();
	uint8_t map[TC_PRIO_MAX + 1] = { 0 };     /* every priority to band 1, the default */
	int rc;
	if (!q)
		return -ENOMEM;
	rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
	rtnl_tc_set_parent(TC_CAST(q), parent);
	rtnl_tc_set_handle(TC_CAST(q), handle);
	rc = rtnl_tc_set_kind(TC_CAST(q), "prio");
	if (rc == 0) {
		rtnl_qdisc_prio_set_bands(q, (int)bands);
		rc = rtnl_qdisc_prio_set_priomap(q, map, (int)sizeof map);
	}
	if (rc == 0)
		rc = rtnl_qdisc_add(sk, q, NLM_F_CREATE | NLM_F_EXCL);
	rtnl_qdisc_put(q);
	return nl2errno(rc);
}

/* HTB 1: at the root, unclassified packets to class 1:defcls. */
static int htb_root(struct nl_sock *sk, int ifindex, uint32_t defcls)
{
	struct rtnl_qdisc *q = rtnl_qdisc_alloc();
	int rc;
	if (!q)
		return -ENOMEM;
	rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
	rtnl_tc_set_parent(TC_CAST(q), TC_H_ROOT);
	rtnl_tc_set_handle(TC_CAST(q), LINK_KERNEL_NETEM_HANDLE);
	rc = rtnl_tc_set_kind(TC_CAST(q), "htb");
	if (rc == 0)
		rc = rtnl_htb_set_defcls(q, defcls);
	if (rc == 0)
		rc = rtnl_qdisc_add(sk, q, NLM_F_CREATE | NLM_F_EXCL);
	rtnl_qdisc_put(q);
	return nl2errno(rc);
}

/* One HTB class: rate and ceil in bytes/s, bursts of bucket bytes, one frame a round. */
static int htb_class(struct nl_sock *sk, int ifindex, uint32_t parent, uint32_t classid, uint32_t rate_Bps,
		     uint32_t ceil_Bps, uint32_t bucket, bool change)
{
	struct rtnl_class *c = rtnl_class_alloc();
	int rc;
	if (!c)
		return -ENOMEM;
	rtnl_tc_set_ifindex(TC_CAST(c), ifindex);
	rtnl_tc_set_parent(TC_CAST(c), parent);
	rtnl_tc_set_handle(TC_CAST(c), classid);
	rc = rtnl_tc_set_kind(TC_CAST(c), "htb");
	if (rc == 0)
		rc = rtnl_htb_set_rate(c, rate_Bps);
	if (rc == 0)
		rc = rtnl_htb_set_ceil(c, ceil_Bps);
	if (rc == 0)
		rc = rtnl_htb_set_rbuffer(c, bucket);
	if (rc == 0)
		rc = rtnl_htb_set_cbuffer(c, bucket);
	if (rc == 0)
		rc = rtnl_htb_set_quantum(c, 1514);
	if (rc == 0)
		rc = rtnl_class_add(sk, c, change ? NLM_F_REPLACE : NLM_F_CREATE | NLM_F_EXCL);
	rtnl_class_put(c);
	return nl2errno(rc);
}

/* The rate's classes: 1:1 with the whole rate (the egress never above it), and under it one
 * class per band with an equal guaranteed share and the whole rate as ceiling (a band alone
 * may use it all; backlogged bands share it round robin). Bursts as the plain tree's TBF. */
static int htb_classes(struct nl_sock *sk, int ifindex, const struct link_kernel_plan *pl, bool change)
{
	int Bps = 0, bucket = 0, rc = link_kernel_tbf_sizes(pl->rate_bps, &Bps, &bucket);
	if (rc < 0)
		return rc;
	uint32_t share = (uint32_t)Bps / (uint32_t)pl->n_bands;
	rc = htb_class(sk, ifindex, LINK_KERNEL_NETEM_HANDLE, LINK_KERNEL_NETEM_HANDLE | 1, (uint32_t)Bps,
		       (uint32_t)Bps, (uint32_t)bucket, change);
	for (size_t b = 0; rc == 0 && b < pl->n_bands; b++)
		rc = htb_class(sk, ifindex, LINK_KERNEL_NETEM_HANDLE | 1, pl->band[b].classid, share ? share : 1,
			       (uint32_t)Bps, (uint32_t)bucket, change);
	return rc;
}

static int u32_add(struct nl_sock *sk, int ifindex, uint32_t parent, bool match_dst,
		   const struct link_kernel_plan_filter *f)
{
	struct rtnl_cls *cls = rtnl_cls_alloc();
	int rc;
	if (!cls)
		return -ENOMEM;
	rtnl_tc_set_ifindex(TC_CAST(cls), ifindex);
	rtnl_tc_set_parent(TC_CAST(cls), parent);
	rtnl_cls_set_protocol(cls, ETH_P_IP);
	rtnl_cls_set_prio(cls, 1);
	rc = rtnl_tc_set_kind(TC_CAST(cls), "u32");
	/* the IPv4 header's source address is at byte 12, the destination at 16; terminal: a match
	 * decides the class (without it u32 would go on to the next node) */
	struct in_addr a = { f->addr_be };
	if (rc == 0)
		rc = rtnl_u32_add_key_in_addr(cls, &a, 32, match_dst ? 16 : 12, 0);
	if (rc == 0)
		rc = rtnl_u32_set_cls_terminal(cls);
	if (rc == 0)
		rc = rtnl_u32_set_classid(cls, f->classid);
	if (rc == 0)
		rc = rtnl_cls_add(sk, cls, NLM_F_CREATE);
	rtnl_cls_put(cls);
	return nl2errno(rc);
}

static int plan_in_ns(void *arg)
{
	struct plan_op *op = arg;
	const struct link_kernel_plan *pl = op->plan;
	struct nl_sock *sk = route_sock();
	int rc = 0, ifindex = (int)if_nametoindex(op->ifname);
	if (!sk)
		return -ENOMEM;
	if (ifindex <= 0) {
		rc = -ENODEV;
		goto out;
	}
	if (!op->rebuild) {
		/* in place: the rate, then each band's netem (NLM_F_REPLACE, nothing deleted) */
		if (pl->rate_bps)
			rc = htb_classes(sk, ifindex, pl, true);
		for (size_t b = 0; rc == 0 && b < pl->n_bands; b++)
			rc = send_netem(sk, ifindex, pl->band[b].classid, pl->band[b].netem_handle, &pl->band[b].p, true);
		goto out;
	}
	/* a new tree: whatever is at the root goes (with its filters), then root to leaves */
	struct rtnl_qdisc *old = rtnl_qdisc_alloc();
	if (!old) {
		rc = -ENOMEM;
		goto out;
	}
	rtnl_tc_set_ifindex(TC_CAST(old), ifindex);
	rtnl_tc_set_parent(TC_CAST(old), TC_H_ROOT);
	rc = nl2errno(rtnl_qdisc_delete(sk, old));
	rtnl_qdisc_put(old);
	if (rc == -ENOENT || rc == -EINVAL)
		rc = 0;
	if (rc == 0 && pl->rate_bps) {
		rc = htb_root(sk, ifindex, 0x10 + 1);
		if (rc == 0)
			rc = htb_classes(sk, ifindex, pl, false);
	} else if (rc == 0) {
		rc = prio_add(sk, ifindex, TC_H_ROOT, LINK_KERNEL_NETEM_HANDLE, pl->n_bands);
	}
	for (size_t b = 0; rc == 0 && b < pl->n_bands; b++)
		rc = send_netem(sk, ifindex, pl->band[b].classid, pl->band[b].netem_handle, &pl->band[b].p, false);
	for (size_t f = 0; rc == 0 && f < pl->n_filters; f++)
		rc = u32_add(sk, ifindex, LINK_KERNEL_NETEM_HANDLE, pl->match_dst, &pl->filter[f]);
out:
	nl_socket_free(sk);
	return rc;
}

int link_kernel_apply_plan(const char *netns, const char *ifname, const struct link_kernel_plan *plan, bool rebuild)
{
	struct plan_op op = { ifname, plan, rebuild };
	int rc = netns_call(netns, plan_in_ns, &op);
	if (rc < 0)
		log_error("per-peer classes on %s/%s: %s", netns ? netns : "", ifname, strerror(-rc));
	return rc;
}

int link_kernel_probe(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* A scratch namespace: nothing of the host is touched, and it vanishes with us. */
		if (unshare(CLONE_NEWNET) < 0)
			_exit(2);
		struct link_params p = { .delay_us = 1000 };
		struct netem_op op = { .ifindex = 1 /* lo */, .p = &p };
		int rc = netem_in_ns(&op);
		_exit(rc == 0 ? 0 : rc == -ENOENT ? 1 : 3);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status))
		return -EIO;
	switch (WEXITSTATUS(status)) {
	case 0: return 1;
	case 1: return 0;
	case 2: return -EPERM;
	default: return -EIO;
	}
}
