/* netem/link_kernel: netem and TBF qdiscs through netlink (see the header). */
#include "netem/link_kernel.h"

#include <errno.h>
#include <linux/pkt_sched.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
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

static int netem_msg(struct nl_msg *msg, int ifindex, const struct link_params *p)
{
	struct tcmsg tcm = { .tcm_family = AF_UNSPEC, .tcm_ifindex = ifindex,
			     .tcm_handle = LINK_KERNEL_NETEM_HANDLE, .tcm_parent = TC_H_ROOT };
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

static int netem_in_ns(void *arg)
{
	struct netem_op *op = arg;
	struct nl_sock *sk = route_sock();
	struct nl_msg *msg = NULL;
	int rc, ifindex = ifindex_of(op);
	if (!sk) {
		rc = -ENOMEM;
		goto out;
	}
	if (ifindex <= 0) {
		rc = -ENODEV;
		goto out;
	}
	/* Room for the 8 KB jitter table: the default message size is one page. */
	msg = nlmsg_alloc_size(32768);
	if (msg && !nlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, RTM_NEWQDISC, 0,
			      NLM_F_REQUEST | (op->change ? NLM_F_REPLACE : NLM_F_CREATE | NLM_F_EXCL))) {
		nlmsg_free(msg);
		msg = NULL;
	}
	if (!msg) {
		rc = -ENOMEM;
		goto out;
	}
	rc = netem_msg(msg, ifindex, op->p);
	if (rc < 0) {
		rc = nl2errno(rc);
		goto out;
	}
	rc = nl2errno(nl_send_sync(sk, msg)); /* frees msg */
	msg = NULL;
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
	nlmsg_free(msg);
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
