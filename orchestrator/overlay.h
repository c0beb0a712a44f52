/* orchestrator/overlay: one host's end of a run's cross-host segment, a kernel VXLAN device on
 * the hosts' underlay joined to the host's testbed bridge.
 *
 * The device is created by a request issued in the host's own network namespace but placed
 * directly into the switch namespace (`ip link add NAME netns SW type vxlan ...`): the kernel
 * opens the VXLAN UDP socket in the namespace the request came from (the underlay), while the
 * device itself lives and dies with the switch namespace, so nothing is ever left in the host's
 * namespace and no journal record is needed beyond the switch namespace's own. Broadcast and
 * unknown unicast go to every other host (an all-zero forwarding entry per remote, head-end
 * replication, no multicast needed on the underlay); unicast is learnt. One VNI per run.
 *
 * MTU: VXLAN over IPv4 adds OVERLAY_VXLAN_OVERHEAD bytes (outer IPv4 20, UDP 8, VXLAN 8, inner
 * Ethernet 14), so the node interfaces get the underlay MTU minus that, and a full-size frame
 * of a node is never dropped or fragmented on the underlay.
 *
 * Delay compensation: a cross-host link already has the underlay's one-way delay, so it is
 * shaped with the configured delay minus the measured base delay; a configured delay smaller
 * than the underlay's is refused rather than silently exceeded. */
#ifndef STALENET_OVERLAY_H
#define STALENET_OVERLAY_H

#include <stddef.h>
#include <stdint.h>

#define OVERLAY_VXLAN_OVERHEAD 50
#define OVERLAY_VXLAN_PORT     4789
#define OVERLAY_MAX_REMOTES    256
#define OVERLAY_MIN_MTU        576     /* node MTU below this: refuse (IPv4 minimum) */

struct overlay_spec {
	const char *switch_netns;       /* the testbed's switch namespace (holds the bridge) */
	const char *bridge;             /* bridge name inside it ("br0") */
	const char *ifname;             /* the VXLAN device's name (run prefix + "vx") */
	uint32_t vni;                   /* 1 .. 2^24 - 1 */
	uint32_t local_be;              /* this host's underlay address */
	const uint32_t *remotes_be;     /* the other hosts' underlay addresses */
	size_t n_remotes;
	int mtu;                        /* the device's MTU: overlay_node_mtu(underlay MTU) */
};

/* The node MTU over an underlay of underlay_mtu bytes, or -EINVAL when too small. */
int overlay_node_mtu(int underlay_mtu);

/* The MTU of the interface holding the IPv4 address addr_be in the calling thread's network
 * namespace. Returns it (> 0), -ENOENT when no interface has the address, or -errno. */
int overlay_underlay_mtu(uint32_t addr_be, char *ifname, size_t ifname_len);

/* Create the device in spec->switch_netns, add the forwarding entries, enslave it, set it up.
 * Runs `ip` and `bridge` (argv, no shell) from the calling thread's namespace. Returns 0 or
 * -errno with err filled; on failure the device is removed again. */
int overlay_attach(const struct overlay_spec *spec, char *err, size_t errlen);

/* The delay to shape a cross-host link with: configured_us - underlay_us into *shaped_us.
 * Returns 0, or -ERANGE when the underlay alone exceeds the configured delay (err says so). */
int overlay_compensate_delay(uint64_t configured_us, uint64_t underlay_us, uint64_t *shaped_us, char *err,
			     size_t errlen);

#endif
