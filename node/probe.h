/* node/probe: the link self-check workload (roles `probe` and `reflector`).
 *
 * Every node under test runs `probe`; one unshaped hub node runs `reflector`. A probe sends
 * timestamped UDP datagrams to the reflector, which stamps arrival and departure and echoes
 * them. All namespaces share the host's CLOCK_MONOTONIC, so each direction's one-way delay is
 * measured exactly (reflector arrival - probe departure for `up`, probe arrival - reflector
 * departure for `down`), not estimated as half an RTT. Per-direction loss comes from the
 * reflector's own count of what arrived, fetched over TCP at the end (which also proves TCP
 * connectivity through the shaped link). Results: rows of RUN_DIR/linkcheck.csv. */
#ifndef STALENET_PROBE_H
#define STALENET_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/kv.h"

#define PROBE_MAGIC 0x534e5042u /* "SNPB" */

/* One probe datagram, little-endian on the wire (all namespaces are this host). */
struct probe_pkt {
	uint32_t magic;
	uint32_t node;          /* prober's index */
	uint32_t seq;
	uint32_t flags;
	int64_t t_send_ns;      /* prober departure */
	int64_t t_hub_rx_ns;    /* reflector arrival */
	int64_t t_hub_tx_ns;    /* reflector departure */
};

/* Summary of one measured direction (or the round trip). */
struct probe_stats {
	uint32_t sent, received;
	double mean_ms, sd_ms;
};

/* Accumulate samples with Welford's method (numerically stable single pass). */
struct probe_acc {
	uint64_t n;
	double mean, m2;
};
void probe_acc_add(struct probe_acc *a, double x);
double probe_acc_sd(const struct probe_acc *a);

#define PROBE_MAX_NODES 8192     /* prober indexes 0..PROBE_MAX_NODES-1 */

/* The two lines of the loss count exchange over TCP, parsed without I/O (the other end is a
 * node: not trusted). "count INDEX", a prober's question to the reflector: INDEX digits only
 * (no sign, no blank), below PROBE_MAX_NODES. "N", the reflector's answer: digits only, at most
 * INT64_MAX. Each may end with one newline; nothing else may follow. Return 0 or -EINVAL. */
int probe_parse_count(const char *line, uint32_t *index);
int probe_parse_answer(const char *line, int64_t *count);

/* Role entry points; cfg keys in docs/node-config.md (linkcheck.*, hub.addr, port.probe).
 * Return a process exit status (0 ok). */
int probe_run(const struct kv *cfg);
int probe_reflector_run(const struct kv *cfg);

#endif
