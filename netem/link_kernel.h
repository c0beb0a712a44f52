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

/* --- per-destination shaping on one egress (the kernel backend's per-peer classes) ----------
 *
 * The packets to (or from) some peer addresses take a netem of their own, e.g. the paths that
 * cross hosts with the underlay's delay subtracted. The tree, all handles fixed:
 *   no rate:   prio 1: (root)        -> band k (class 1:k): netem (0x10+k):
 *   rate:      HTB 1: (root) -> class 1:1 (the direction's rate, ceil the same)
 *                            -> class 1:(0x10+k) (rate/n guaranteed, ceil the rate) -> netem (0x10+k):
 * Band 1 is the default (prio: every priority maps to it; HTB: its default class), with the
 * direction's own parameters; bands 2.. are the classes, one per distinct parameter set; u32
 * filters on 1: match the IPv4 destination (or source) address of each peer and steer it to its
 * band. With a rate the bands share it through HTB's round robin (no band starves another: a
 * prio under one rate would serve band 1 first), the whole egress never above it. Without one
 * the device is never the bottleneck and the prio's order does not matter. The root (1:) counts
 * every packet, byte and drop of the tree: the counters read handle 1: as for the plain tree. */
#define LINK_KERNEL_MAX_BANDS 16           /* TCQ_PRIO_BANDS: the default + 15 classes */

struct link_kernel_class {
	const uint32_t *peers_be;      /* IPv4 addresses, network order */
	size_t n_peers;
	struct link_params p;          /* rate_bps ignored: the tree's rate is the default's */
};

struct link_kernel_plan_band {
	uint32_t classid;              /* 1:k (prio) or 1:(0x10+k) (HTB) */
	uint32_t netem_handle;         /* (0x10+k):0 */
	struct link_params p;          /* rate_bps 0 */
};

struct link_kernel_plan_filter {
	uint32_t addr_be;
	uint32_t classid;
};

struct link_kernel_plan {
	uint64_t rate_bps;             /* 0: prio at the root, else HTB */
	bool match_dst;                /* filters on the destination (else the source) address */
	size_t n_bands;                /* >= 2 (prio's minimum, also kept with HTB); band 1 the default */
	struct link_kernel_plan_band band[LINK_KERNEL_MAX_BANDS];
	size_t n_filters;
	struct link_kernel_plan_filter *filter;   /* caller's array */
};

/* The tree for a default p and n classes c (classes with the same parameters share a band).
 * filters: room for max_filters entries (the sum of n_peers is enough). Returns 0, -E2BIG (more
 * than 15 distinct parameter sets or filters), -EINVAL (a peer in two classes, a class without
 * peers, invalid parameters). Pure. */
int link_kernel_plan(const struct link_params *p, const struct link_kernel_class *c, size_t n, bool match_dst,
		     struct link_kernel_plan_filter *filters, size_t max_filters, struct link_kernel_plan *out);

/* Same tree layout (rate or not, bands, filters): a change of parameters only, in place. Pure. */
bool link_kernel_plan_same_layout(const struct link_kernel_plan *a, const struct link_kernel_plan *b);

/* Build plan on ifname, replacing whatever was at the root (rebuild), or change the rate and the
 * bands' netem parameters in place (!rebuild: the tree must have plan's layout). Returns 0 or
 * -errno (-ENOENT: no sch_netem/sch_prio/cls_u32). */
int link_kernel_apply_plan(const char *netns, const char *ifname, const struct link_kernel_plan *plan, bool rebuild);

/* Does this kernel have sch_netem? Forks a child in a fresh network namespace and tries netem
 * on its lo. 1 yes, 0 no, -errno when the probe could not run. */
int link_kernel_probe(void);

#endif
