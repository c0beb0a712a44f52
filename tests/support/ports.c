/* Free port runs for tests: below the ephemeral range, checked by trial binds. */
#include "tests/support/ports.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#define PORTS_LOW 10000      /* below: well-known and registered services' usual ports */
#define PORTS_EPHEMERAL 32768 /* the kernel's default lower bound, when it cannot be read */

/* The lower bound of net.ipv4.ip_local_port_range in this network namespace. */
static int ephemeral_low(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
	int lo = PORTS_EPHEMERAL, hi;

	if (f) {
		if (fscanf(f, "%d %d", &lo, &hi) != 2 || lo <= PORTS_LOW || lo > 65535)
			lo = PORTS_EPHEMERAL;
		fclose(f);
	}
	return lo;
}

/* A trial bind of one socket type on the IPv4 wildcard (a bind there conflicts with any
 * socket bound to the port on 127.0.0.1 or another address). No SO_REUSEADDR: a port whose
 * old connection still lingers in TIME_WAIT counts as taken, which is the safe side. */
static bool bindable(int type, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_ANY) };
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
	close(fd);
	return ok;
}

int support_free_ports(int count)
{
	int hi = ephemeral_low(), span;
	unsigned int start;

	if (count < 1 || count > 1000)
		return -1;
	span = hi - PORTS_LOW - count;
	if (span <= 0)
		return -1;
	start = (unsigned int)getpid() * 2654435761u;
	for (int tries = 0; tries < 4096; tries++) {
		int base = PORTS_LOW + (int)((start + (unsigned int)tries * (unsigned int)(count + 1)) %
					     (unsigned int)span);
		bool all = true;

		for (int p = base; all && p < base + count; p++)
			all = bindable(SOCK_STREAM, p) && bindable(SOCK_DGRAM, p);
		if (all)
			return base;
	}
	return -1;
}
