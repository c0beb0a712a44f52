/* A Slurm cluster on the hosts of tests/support/hostsim, for tests of the Slurm launcher.
 *
 * Debian's slurm-wlm and munge, started inside each host's own namespaces (network, mount,
 * UTS, time: entered with nsenter through the host's sshd): munged with a per-test key on the
 * host's own /run (each host has its own /run tmpfs, so the default socket path is per host),
 * slurmd with the host's name as node name, and slurmctld on the first host. The generated
 * slurm.conf (under the hostsim directory) keeps to what runs inside namespaces without
 * systemd or a cgroup of its own: ProctrackType=proctrack/pgid (processes of a step found by
 * process group), TaskPlugin=task/none (no binding, no cgroup), SelectType=select/linear
 * (whole nodes, so SLURM_JOB_CPUS_PER_NODE is every node's CPUs), no accounting, no job
 * completion log, SlurmdParameters=config_overrides (the configured CPUs count, whatever this
 * machine has). Node names resolve through a hosts file bind-mounted on /etc/hosts in every
 * host's mount namespace only. Every daemon lives in its host's network namespace, so
 * hostsim_stop (which kills every process there) removes them with the hosts; the state and
 * logs are under the hostsim directory, removed with it. Plain C, no Criterion. Needs root. */
#ifndef STALENET_TESTS_SUPPORT_SLURMSIM_H
#define STALENET_TESTS_SUPPORT_SLURMSIM_H

#include <stddef.h>
#include <sys/types.h>

#include "tests/support/hostsim.h"

struct slurmsim {
	const struct hostsim *hs;
	char conf[320];                 /* slurm.conf (SLURM_CONF for the clients) */
	char hosts_file[320];           /* bind-mounted on every host's /etc/hosts */
	int cpus;                       /* CPUs of every node */
	int start_ms;                   /* daemons started to every node idle */
};

/* The programs missing on this machine ("" when none), for a skip message. */
const char *slurmsim_missing(void);

/* Write the configuration and key, start munged, slurmctld (on host 0) and slurmd on every host
 * of hs (already started), wait (bounded by timeout_ms) until every node is idle. Returns 0 or
 * -errno with the reason (and the daemons' last log lines) in why. */
int slurmsim_start(struct slurmsim *ss, const struct hostsim *hs, int cpus, int timeout_ms, char *why,
		   size_t whylen);

/* Start argv (argv[0] an absolute path) on host i, inside its namespaces, with SLURM_CONF set,
 * the working directory the hostsim directory, stdout and stderr into out_path. Returns the
 * child's pid (the caller reaps it) or -1. */
pid_t slurmsim_spawn(const struct slurmsim *ss, size_t i, const char *const *argv, const char *out_path);

/* Run argv as slurmsim_spawn does and wait up to timeout_ms (then kill). Exit code, or -1. */
int slurmsim_run(const struct slurmsim *ss, size_t i, const char *const *argv, const char *out_path,
		 int timeout_ms);

#endif
