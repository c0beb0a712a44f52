/* orchestrator/overlay: see overlay.h. */
#include "orchestrator/overlay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/netns.h"

int overlay_node_mtu(int underlay_mtu)
{
	int m = underlay_mtu - OVERLAY_VXLAN_OVERHEAD;
	return m >= OVERLAY_MIN_MTU ? m : -EINVAL;
}

int overlay_underlay_mtu(uint32_t addr_be, char *ifname, size_t ifname_len)
{
	struct ifaddrs *ifa = NULL;
	int rc = -ENOENT;
	if (getifaddrs(&ifa) < 0)
		return -errno;
	for (struct ifaddrs *p = ifa; p; p = p->ifa_next) {
		if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET ||
		    ((struct sockaddr_in *)(void *)p->ifa_addr)->sin_addr.s_addr != addr_be)
			continue;
		struct ifreq ifr = { 0 };
		snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", p->ifa_name);
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			break;
		}
		rc = ioctl(fd, SIOCGIFMTU, &ifr) < 0 ? -errno : ifr.ifr_mtu;
		close(fd);
		if (ifname)
			snprintf(ifname, ifname_len, "%s", p->ifa_name);
		break;
	}
	freeifaddrs(ifa);
	return rc;
}

static int run(const char *const *argv, char *err, size_t errlen)
{
	int rc = netns_exec(NULL, argv, true);
	if (rc == 0)
		return 0;
	size_t n = (size_t)snprintf(err, errlen, "%s failed (%s%d):", argv[0], rc < 0 ? "errno " : "exit ",
				    rc < 0 ? -rc : rc);
	for (size_t i = 1; argv[i] && n < errlen; i++)
		n += (size_t)snprintf(err + n, errlen - n, " %s", argv[i]);
	return rc < 0 ? rc : -EIO;
}

int overlay_attach(const struct overlay_spec *s, char *err, size_t errlen)
{
	char vni[16], local[INET_ADDRSTRLEN], port[8], mtu[16], remote[INET_ADDRSTRLEN];
	int rc;

	if (!s->vni || s->vni >= (1u << 24) || s->n_remotes > OVERLAY_MAX_REMOTES || s->mtu < OVERLAY_MIN_MTU) {
		snprintf(err, errlen, "overlay: VNI %u or MTU %d out of range, or %zu remotes", s->vni, s->mtu,
			 s->n_remotes);
		return -EINVAL;
	}
	snprintf(vni, sizeof vni, "%u", s->vni);
	snprintf(port, sizeof port, "%d", OVERLAY_VXLAN_PORT);
	snprintf(mtu, sizeof mtu, "%d", s->mtu);
	inet_ntop(AF_INET, &s->local_be, local, sizeof local);
	const char *add[] = { "ip", "link", "add", s->ifname, "netns", s->switch_netns, "mtu", mtu, "type", "vxlan",
			      "id", vni, "local", local, "dstport", port, NULL };
	if ((rc = run(add, err, errlen)))
		return rc;
	for (size_t i = 0; i < s->n_remotes; i++) {
		inet_ntop(AF_INET, &s->remotes_be[i], remote, sizeof remote);
		const char *fdb[] = { "bridge", "-n", s->switch_netns, "fdb", "append", "00:00:00:00:00:00", "dev",
				      s->ifname, "dst", remote, NULL };
		if ((rc = run(fdb, err, errlen)))
			goto fail;
	}
	const char *up[] = { "ip", "-n", s->switch_netns, "link", "set", s->ifname, "master", s->bridge, "up", NULL };
	if ((rc = run(up, err, errlen)))
		goto fail;
	return 0;
fail:;
	const char *del[] = { "ip", "-n", s->switch_netns, "link", "del", s->ifname, NULL };
	netns_exec(NULL, del, true);
	return rc;
}

int overlay_compensate_delay(uint64_t configured_us, uint64_t underlay_us, uint64_t *shaped_us, char *err,
			     size_t errlen)
{
	if (underlay_us > configured_us) {
		snprintf(err, errlen, "the underlay's own one-way delay (%llu us) exceeds the configured delay "
			 "(%llu us): a cross-host link cannot be that fast", (unsigned long long)underlay_us,
			 (unsigned long long)configured_us);
		return -ERANGE;
	}
	*shaped_us = configured_us - underlay_us;
	return 0;
}
