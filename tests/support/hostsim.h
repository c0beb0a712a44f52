/* Several "hosts" on this one machine, for tests of runs across hosts.
 *
 * Each host is a network namespace joined to an underlay bridge (198.18.250.0/24, host i at
 * .i+1) and runs Debian's OpenSSH server (/usr/sbin/sshd) listening on its underlay address
 * only, inside its own mount, UTS and time namespaces: its own hostname (the host's name), its
 * own /run (a tmpfs, so its /run/netns and /run/stalenet are its own) and a CLOCK_MONOTONIC
 * offset set when the time namespace is made. A control namespace on the same bridge (.254)
 * is where the orchestrator under test runs its ssh client. One client key (identity) is
 * authorised on every host, a second one (wrong_identity) on none; known_hosts lists every
 * host's key. hostsim_stop kills every process left in the hosts' namespaces and removes every
 * namespace and file it made. Plain C, no Criterion: the caller asserts. Needs root. */
#ifndef STALENET_TESTS_SUPPORT_HOSTSIM_H
#define STALENET_TESTS_SUPPORT_HOSTSIM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HOSTSIM_MAX 8

struct hostsim_host {
	char name[16];                  /* h0, h1, ... (also its hostname) */
	char netns[64];
	char address[16];
	int64_t mono_offset_ns;         /* the time namespace's CLOCK_MONOTONIC offset */
	pid_t init_pid;                 /* our child that waits for sshd (in the host's namespaces) */
	pid_t sshd_pid;
};

struct hostsim {
	char prefix[24];
	char dir[256];                  /* keys, configs, sshd logs */
	char underlay_ns[64], ctl_ns[64];
	char identity[320], wrong_identity[320], known_hosts[320];
	size_t n;
	struct hostsim_host host[HOSTSIM_MAX];
};

/* Make n hosts (n <= HOSTSIM_MAX) with the given monotonic offsets (NULL = none), tag naming
 * the namespaces; wait (bounded) until every sshd listens. Returns 0, or -errno with the
 * reason in why; whatever was made by then is removed again. */
int hostsim_start(struct hostsim *hs, const char *tag, size_t n, const int64_t *offsets_ns, char *why,
		  size_t whylen);

/* Remove everything hostsim_start made (idempotent; hs may be partly made). */
void hostsim_stop(struct hostsim *hs);

/* Pids of processes whose network namespace is the host's (up to max); their count. */
size_t hostsim_host_pids(const struct hostsim *hs, size_t i, pid_t *pids, size_t max);

/* The agent serving host i: a process in its namespace running "stalenet agent" (argv[0] the
 * binary stalenet, argv[1] "agent"), or 0 when there is none. */
pid_t hostsim_agent_pid(const struct hostsim *hs, size_t i, const char *stalenet);

#endif
