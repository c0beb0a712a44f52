/* tests/support/vethpair: see the header. */
#include "tests/support/vethpair.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/netns.h"
#include "netem/linkd.h"
#include "tests/support/proc.h"

int support_veth_pair_up(struct support_veth_pair *p, const char *tag)
{
	int pid = (int)getpid();

	p->subnet = pid % 200 + 1;
	snprintf(p->ns_a, sizeof p->ns_a, "sn%s%d-a", tag, pid);
	snprintf(p->ns_b, sizeof p->ns_b, "sn%s%d-b", tag, pid);
	snprintf(p->if_a, sizeof p->if_a, "s%s%da", tag, pid % 100000);
	snprintf(p->if_b, sizeof p->if_b, "s%s%db", tag, pid % 100000);
	p->made = true;
	if (support_sh("ip netns add %s && ip netns add %s", p->ns_a, p->ns_b) != 0 ||
	    support_sh("ip link add %s netns %s type veth peer %s netns %s", p->if_a, p->ns_a, p->if_b, p->ns_b) != 0 ||
	    support_sh("ip -n %s addr add 198.18.%d.1/24 dev %s && ip -n %s addr add 198.18.%d.2/24 dev %s", p->ns_a,
		       p->subnet, p->if_a, p->ns_b, p->subnet, p->if_b) != 0 ||
	    support_sh("ip -n %s link set %s up && ip -n %s link set %s up", p->ns_a, p->if_a, p->ns_b, p->if_b) != 0 ||
	    support_sh("ip -n %s neigh replace 198.18.%d.2 dev %s lladdr "
		       "$(ip netns exec %s cat /sys/class/net/%s/address) nud permanent",
		       p->ns_a, p->subnet, p->if_a, p->ns_b, p->if_b) != 0)
		return -1;
	return 0;
}

void support_veth_pair_down(struct support_veth_pair *p)
{
	if (!p->made)
		return;
	support_sh("ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", p->ns_a, p->ns_b);
	p->made = false;
}

const char *support_veth_pair_addr(const struct support_veth_pair *p, int host, char *buf, size_t len)
{
	snprintf(buf, len, "198.18.%d.%d", p->subnet, host);
	return buf;
}

struct udp_req {
	int fd, port;
};

/* In the namespace: the socket, its buffers, its port (0: none). */
static int open_udp(void *arg)
{
	struct udp_req *r = arg;
	int big = 16 << 20;

	r->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (r->fd < 0)
		return -errno;
	setsockopt(r->fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
	setsockopt(r->fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big);
	if (r->port) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)r->port) };
		if (bind(r->fd, (struct sockaddr *)&a, sizeof a) < 0)
			return -errno;
	}
	return 0;
}

int support_veth_pair_receiver(const struct support_veth_pair *p, int port)
{
	struct udp_req r = { -1, port };

	cr_assert_eq(netns_call(p->ns_b, open_udp, &r), 0, "UDP socket in %s", p->ns_b);
	return r.fd;
}

int support_veth_pair_sender(const struct support_veth_pair *p, int port)
{
	struct udp_req r = { -1, 0 };
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	char ip[32];

	cr_assert_eq(netns_call(p->ns_a, open_udp, &r), 0, "UDP socket in %s", p->ns_a);
	inet_pton(AF_INET, support_veth_pair_addr(p, 2, ip, sizeof ip), &to.sin_addr);
	cr_assert_eq(connect(r.fd, (struct sockaddr *)&to, sizeof to), 0);
	return r.fd;
}

static void *linkd_thread(void *arg)
{
	linkd_run(arg);
	return NULL;
}

void support_linkd_start(struct support_linkd *l, struct linkd *d)
{
	cr_assert_not_null(d);
	l->lkd = d;
	cr_assert_eq(pthread_create(&l->thread, NULL, linkd_thread, d), 0);
	l->running = true;
}

void support_linkd_stop(struct support_linkd *l)
{
	if (!l->running)
		return;
	linkd_stop(l->lkd);
	pthread_join(l->thread, NULL);
	linkd_destroy(&l->lkd);
	l->running = false;
}
