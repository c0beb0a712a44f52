/* netem/link_kernel: qdisc operations through netlink (libnl), inside a named namespace.
 *
 * netem is written as a raw RTM_NEWQDISC message built with libnl's message API: libnl-route 3.7
 * has no setter for Gilbert-Elliott, 64-bit latency or rate, and one code path for every field
 * keeps apply and change identical. The message is what tc builds: struct tc_netem_qopt followed by
 * TCA_NETEM_* attributes, probabilities scaled to 0..UINT32_MAX, delays as 64-bit nanoseconds, the
 * jitter table as int16 entries (netem_model_dist_table). TBF and the counters go through
 * libnl-route's qdisc objects. Internal to netem/: other modules use link_shaper. */
#ifndef STALENET_LINK_KERNEL_H
#define STALENET_LINK_KERNEL_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/limits.h"
#include "lib/link_params.h"

#define LINK_KERNEL_NETEM_HANDLE 0x10000u  /* 1: at the root */
#define LINK_KERNEL_TBF_HANDLE 0x20000u    /* 2: under netem's class 1:1, or at the root for nfq */

struct link_kernel_stats {
	uint64_t packets, bytes, drops, overlimits, qlen;
};

/* The TBF parameters for rate_bps: the rate in bytes/s and a bucket of 4 ms of it (at least
 * three full frames). Returns 0, or -ERANGE above LIMITS_MAX_RATE_BPS (what TBF through libnl
 * can take). Pure. */
int link_kernel_tbf_sizes(uint64_t rate_bps, int *rate_Bps, int *bucket_bytes);

/* netem at ifname's root (+ TBF 2: under 1:1 when rate_bps). change = modify in place
 * (NLM_F_REPLACE, never delete + add). Returns 0 or -errno (-ENOENT: no sch_netem,
 * -ERANGE: rate above LIMITS_MAX_RATE_BPS). */
int link_kernel_netem(const char *netns, const char *ifname, const struct link_params *p, bool change);

/* TBF with rate_bps at parent (TC_H_ROOT or a class id) with handle. change as above. */
int link_kernel_tbf(const char *netns, const char *ifname, uint32_t parent, uint32_t handle,
		    uint64_t rate_bps, bool change);

/* Delete the qdisc with handle at parent (TC_H_ROOT...). Missing = 0. */
int link_kernel_del(const char *netns, const char *ifname, uint32_t parent, uint32_t handle);

/* Counters of the qdisc with handle on ifname. Returns 0 or -ENOENT. */
int link_kernel_stats(const char *netns, const char *ifname, uint32_t handle, struct link_kernel_stats *out);

/* One qdisc to read with link_kernel_stats_many: ifname and handle in, stats and rc out. */
struct link_kernel_query {
	const char *ifname;
	uint32_t handle;
	struct link_kernel_stats stats;
	int rc;                      /* 0, -ENOENT (no such qdisc or interface), or the dump's error */
};

/* Counters of n qdiscs of one namespace from ONE dump (link_kernel_stats dumps once per qdisc).
 * Fills each q[i].stats and q[i].rc. Returns 0, or -errno when the dump failed. */
int link_kernel_stats_many(const char *netns, struct link_kernel_query *q, size_t n);

/* 1 when ifname (in netns) is enslaved to a master device (a bridge port), 0 when not, -errno. */
int link_kernel_is_bridge_port(const char *netns, const char *ifname);

/* Does this kernel have sch_netem? Forks a child in a fresh network namespace and tries netem
 * on its lo. 1 yes, 0 no, -errno when the probe could not run. */
int link_kernel_probe(void);

#endif
