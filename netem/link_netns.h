/* netem/link_netns: run a piece of code inside a named network namespace (/run/netns/NAME).
 *
 * Sockets keep the namespace they were created in, so netem opens its netlink and raw sockets
 * inside the target namespace and immediately returns: one process (and one thread) can serve
 * every namespace. setns() affects only the calling thread. */
#ifndef STALENET_LINK_NETNS_H
#define STALENET_LINK_NETNS_H

/* Call fn(arg) with the calling thread inside namespace `netns` (NULL or "" = stay where we are),
 * then switch back. Returns fn's result, or -errno when entering or leaving failed (leaving
 * failing is logged as an error: the thread is left in the wrong namespace). */
int link_netns_call(const char *netns, int (*fn)(void *arg), void *arg);

#endif
