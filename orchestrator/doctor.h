/* orchestrator/doctor: what this host can do, for `stalenet doctor`.
 *
 * Checks (each one line "ok|warn|fail  what: detail"): root, network namespaces, the kernel's
 * sch_netem and the NFQUEUE path (through netem/link_shaper's probes), the data set, the BLAS
 * library and its threads, the cgroup hierarchy and its cpu/cpuset/memory controllers (scenario
 * `resources`), the neighbour-table limits (a 1000-node testbed needs them raised;
 * `stalenet run` does so and restores them), the default TCP congestion control, and the
 * host's timer lateness when busy, after idle and under load (lib/timerlat: p50, p99, max, what
 * it means for emulated delays and the network.precision auto would choose; a few seconds). */
#ifndef STALENET_DOCTOR_H
#define STALENET_DOCTOR_H

#include <stdio.h>

/* Print the report to out. Returns the number of failed checks (0 = this host runs
 * scenarios with at least one link backend). */
int doctor_report(FILE *out, const char *data_dir);

#endif
