/* orchestrator/testbed: the emulated network of a run, built through rtnetlink (libnl-route).
 *
 * One network namespace per node plus one switch namespace holding a Linux bridge "br0"; per
 * node a veth pair whose node end is TESTBED_NODE_IFNAME inside the node's namespace and whose
 * switch end (PREFIX "p" INDEX) is a bridge port. Addresses come from one subnet (default
 * 198.18.0.0/15, node i gets subnet + i + 1); loopback is up, the MTU and the TCP congestion
 * control are set per namespace, IPv6 is off (no DAD/MLD noise on the emulated links) unless
 * asked for. Each node's MAC follows from its address (testbed_mac_of) and every node's
 * neighbour table holds a permanent entry for every other node (up to TESTBED_PIN_NEIGH_MAX
 * nodes), so a lossy link never loses an ARP exchange. Every name starts with the run prefix (e.g. "sn1a2b-") so runs coexist; the
 * namespaces are named the `ip netns` way, so `ip netns exec sn1a2b-worker3 ...` works.
 *
 * Everything is recorded in the journal before it is created (namespaces, host sysctls); the
 * veths and the bridge live and die inside our namespaces and need no records of their own.
 * Creation ends with a real reachability check (a UDP ping-pong over the bridge from every
 * node) unless skipped. */
#ifndef STALENET_TESTBED_H
#define STALENET_TESTBED_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct journal;

#define TESTBED_NODE_IFNAME "eth0"
#define TESTBED_BRIDGE_IFNAME "br0"
#define TESTBED_DEFAULT_SUBNET 0xc6120000u  /* 198.18.0.0, host byte order */
#define TESTBED_DEFAULT_PREFIX_LEN 15
#define TESTBED_DEFAULT_MTU 1500
#define TESTBED_DEFAULT_CC "cubic"
#define TESTBED_NEIGH_AUTO_NODES 500   /* above this, neighbour thresholds are raised anyway */
#define TESTBED_PREFIX_MAX 8           /* prefix + "p" + index must fit IFNAMSIZ */
#define TESTBED_REACH_PORT 47001       /* UDP port of the reachability check, inside the nodes */
#define TESTBED_PIN_NEIGH_MAX 256      /* above this many nodes, neighbours are not pinned */

/* Transport knobs set inside every node's namespace (scenario network.tcp). The sysctls are
 * per namespace, so they die with it: nothing on the host changes and nothing is journalled. */
struct testbed_tcp {
	int slow_start_after_idle;       /* net.ipv4.tcp_slow_start_after_idle; -1 = leave */
	int ecn;                         /* net.ipv4.tcp_ecn 0/1/2; -1 = leave */
	uint32_t initial_cwnd;           /* initcwnd of the node's subnet route (segments); 0 = leave */
	uint64_t rmem[3], wmem[3];       /* net.ipv4.tcp_rmem / tcp_wmem; [2] == 0: leave */
};

struct testbed_spec {
	const char *prefix;              /* run prefix, e.g. "sn1a2b-"; NULL = a fresh random one */
	int n_nodes;                     /* >= 1 */
	const char *const *node_names;   /* n_nodes names ([A-Za-z0-9_.-], <= 48 chars, not "sw");
					    NULL = "n0", "n1", ... */
	uint32_t subnet_be;              /* network byte order; 0 = 198.18.0.0 */
	int prefix_len;                  /* 0 = 15 */
	int mtu;                         /* bytes; 0 = 1500 */
	const char *cc;                  /* net.ipv4.tcp_congestion_control in every node; NULL = cubic */
	const struct testbed_tcp *tcp;   /* more transport knobs in every node; NULL = none */
	bool raise_neigh;                /* raise the ARP gc thresholds (automatic above 500 nodes) */
	bool keep_ipv6;                  /* leave IPv6 enabled in the namespaces */
	bool skip_reach_check;           /* do not ping every node after creation */
	const uint32_t *addr_index;      /* node i gets subnet + addr_index[i] + 1 (one host's share of
					    a run across hosts keeps the run's addresses); NULL = i */
	uint32_t pin_nodes;              /* pin the neighbours subnet + 1 .. subnet + pin_nodes (a run
					    across hosts: all its nodes); 0 = this testbed's nodes */
	bool no_pin_neigh;               /* leave neighbour resolution to ARP */
	const volatile sig_atomic_t *interrupted; /* the caller's count of interruptions (its
					    signal handler's); NULL = none */
	int interrupt_at;                /* from this count on, every wait of testbed_create and
					    testbed_check_reach ends at once (-ECANCELED): the
					    user's "stop now"; 0 = 1 */
};

/* Where creation time went (nanoseconds). */
struct testbed_timing {
	int64_t netns_ns;   /* namespaces, their sysctls, sockets inside them */
	int64_t links_ns;   /* bridge and veth pairs (moved, enslaved, up) */
	int64_t addrs_ns;   /* loopback up, addresses */
	int64_t reach_ns;   /* reachability check */
	int64_t total_ns;
};

struct testbed;

/* The MAC of the node at addr_be (network order) on every testbed: 02:53 then the address. */
void testbed_mac_of(uint32_t addr_be, uint8_t mac[6]);

/* A fresh prefix "sn<4 hex>-" in buf (>= 8 bytes) that no registered run or namespace uses.
 * Returns 0 or -errno. */
int testbed_random_prefix(char *buf, size_t len);

/* Build the testbed. Needs root (CAP_SYS_ADMIN + CAP_NET_ADMIN). Records into j (which should
 * have been created with the same prefix; NULL = unrecorded, for tests of this module only).
 * Returns NULL and fills err on failure; whatever was created is removed again. Its waits (links
 * coming up, the reachability check) end at once when spec.interrupted reaches
 * spec.interrupt_at (err then says "interrupted"). */
struct testbed *testbed_create(const struct testbed_spec *spec, struct journal *j, char *err,
			       size_t errlen);

/* Delete the namespaces (their links go with them) and release the claims on host sysctls
 * taken by testbed_create (orchestrator/hostshare: restored once no other live run needs them,
 * unless changed by hand since). Frees, sets *tb = NULL, accepts NULL.
 * Returns 0 or the first error (the journal can still undo the rest). */
int testbed_destroy(struct testbed **tb);

/* Ping-pong one UDP datagram from every node to the next one (in a ring) and back, over the
 * bridge. Returns 0 when all got their answer within timeout_ms, else -EHOSTUNREACH (naming
 * the first silent node in err), -ECANCELED (interrupted: spec.interrupted reached
 * spec.interrupt_at) or -errno. */
int testbed_check_reach(struct testbed *tb, int timeout_ms, char *err, size_t errlen);

int testbed_n_nodes(const struct testbed *tb);
/* The node's namespace name (under /run/netns). */
const char *testbed_node_netns(const struct testbed *tb, int i);
/* IPv4 address, network byte order, and as dotted text. */
uint32_t testbed_node_addr(const struct testbed *tb, int i);
const char *testbed_node_addr_str(const struct testbed *tb, int i);
/* Interface names: in the node's namespace (TESTBED_NODE_IFNAME) and its bridge port in the
 * switch namespace (the link shaper needs both: egress at the node, ingress at the port). */
const char *testbed_node_ifname(const struct testbed *tb, int i);
const char *testbed_node_switch_ifname(const struct testbed *tb, int i);
const char *testbed_switch_netns(const struct testbed *tb);
/* Index of the node called name, or -ENOENT. */
int testbed_node_index(const struct testbed *tb, const char *name);
const struct testbed_timing *testbed_timing(const struct testbed *tb);

#endif
