/* Test fixture: two network namespaces joined by one veth pair, and the NFQUEUE emulator in a
 * thread of the test process (the emulator tests' common setup). */
#ifndef STALENET_TESTS_SUPPORT_VETHPAIR_H
#define STALENET_TESTS_SUPPORT_VETHPAIR_H

#include <pthread.h>
#include <stdbool.h>

struct linkd;

struct support_veth_pair {
	char ns_a[64], ns_b[64]; /* "sn<tag><pid>-a" and "-b" */
	char if_a[16], if_b[16]; /* "s<tag><pid % 100000>a" and "b" */
	int subnet;              /* 198.18.<subnet>.1 in a, .2 in b (/24) */
	bool made;
};

/* Create the pair for this process: both namespaces, the veth between them, the addresses, both
 * ends up, and b's address as a permanent neighbour in a (no ARP at the first packet). tag: one or
 * two letters naming the test. Returns 0, or -1 (part of it may exist: support_veth_pair_down). */
int support_veth_pair_up(struct support_veth_pair *p, const char *tag);
/* Remove both namespaces (and with them the veth); safe to call when up failed or never ran. */
void support_veth_pair_down(struct support_veth_pair *p);
/* "198.18.<subnet>.<host>" into buf. */
const char *support_veth_pair_addr(const struct support_veth_pair *p, int host, char *buf, size_t len);
/* A UDP socket in b with 16 MiB buffers, bound to port; and one in a, connected to b's address at
 * that port (the emulator tests' traffic, a to b). Assert. */
int support_veth_pair_receiver(const struct support_veth_pair *p, int port);
int support_veth_pair_sender(const struct support_veth_pair *p, int port);

struct support_linkd {
	struct linkd *lkd;
	pthread_t thread;
	bool running;
};

/* Start linkd_run on d (made and configured by the caller) in a thread. Asserts. */
void support_linkd_start(struct support_linkd *l, struct linkd *d);
/* Stop and join the thread and destroy the emulator; nothing when not running. */
void support_linkd_stop(struct support_linkd *l);

#endif
