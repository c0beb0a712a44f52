/* orchestrator/slurm: the Slurm launcher of a run across hosts (`hosts: {launcher: slurm}`).
 *
 * `stalenet run` itself runs inside a Slurm allocation (salloc, sbatch or srun); the
 * allocation's environment names the hosts: SLURM_JOB_ID, SLURM_JOB_NODELIST (or the older
 * SLURM_NODELIST) in Slurm's compressed host list syntax ("node[01-03,7],gpu2") and
 * SLURM_JOB_CPUS_PER_NODE ("4(x3),2"). Both compressed forms are expanded here, strictly: every
 * name must be a valid host name of orchestrator/hosts, and anything malformed is an error,
 * never a guess.
 *
 * slurm_resolve completes a host list for the allocation: with no `list`, every node of the
 * allocation is a host (cores from SLURM_JOB_CPUS_PER_NODE); with a list, every listed name must
 * be a node of the allocation. A host without `address` gets its node name's IPv4 address
 * (getaddrinfo; a loopback answer is refused, as Debian's "127.0.1.1 hostname" line would make
 * every host the same).
 *
 * Each host's agent is one job step of its own: `srun --nodes=1 --ntasks=1
 * --ntasks-per-node=1 --nodelist=NODE ... AGENT agent`, an argv, never a shell line. One step
 * per host rather than one step of N tasks because srun gives all tasks of a step one stdin
 * (broadcast) and one stdout (interleaved), while the agent protocol is a private, ordered
 * line channel per host: with a step per host the channel is srun's stdin/stdout exactly as it
 * is ssh's, and a host lost ends its own step only. srun runs without --unbuffered and --pty:
 * both give the task a pseudo terminal, whose line discipline rewrites bytes (echo, CR/LF);
 * over the default pipes the frames pass unchanged (the agent writes each line with one
 * write(2), so slurmstepd's line buffering delays nothing). --overlap lets the step share the
 * CPUs of a step `stalenet run` itself may be (srun stalenet run ...), --whole gives it every
 * CPU of the job on its node and --cpu-bind=none leaves the agent's nodes unpinned. */
#ifndef STALENET_SLURM_H
#define STALENET_SLURM_H

#include <stddef.h>
#include <stdint.h>

#include "orchestrator/hosts.h"

#define SLURM_LIST_MAX 4096             /* characters of a compressed list we accept */
#define SLURM_ARGV_MAX 24

/* Expand a compressed host list into at most max names (each < HOSTS_NAME_MAX characters and
 * a valid host name); *n gets their number. Returns 0, or -EINVAL / -E2BIG with a one-line
 * reason in err. */
int slurm_hostlist_expand(const char *list, char (*names)[HOSTS_NAME_MAX], size_t max, size_t *n, char *err,
			  size_t errlen);

/* Expand SLURM_JOB_CPUS_PER_NODE ("4(x3),2") into exactly n counts. Returns 0 or -EINVAL with
 * the reason in err. */
int slurm_cpus_expand(const char *s, uint32_t *cpus, size_t n, char *err, size_t errlen);

/* The allocation's environment (strings may be NULL when unset). */
struct slurm_env {
	const char *job_id;             /* SLURM_JOB_ID */
	const char *nodelist;           /* SLURM_JOB_NODELIST, else SLURM_NODELIST */
	const char *cpus_per_node;      /* SLURM_JOB_CPUS_PER_NODE */
};

/* This process's allocation environment. */
struct slurm_env slurm_env_get(void);

/* True when env names an allocation (SLURM_JOB_ID and a node list set). */
int slurm_in_allocation(const struct slurm_env *env);

/* True when hosts lists at least one host and every host has an address and cores (so it can
 * be placed, or reached over ssh, without an allocation). */
int slurm_list_complete(const struct hosts *hosts);

/* Complete hosts (launcher slurm) for the allocation env, as described above. Returns 0, or a
 * negative errno with "FILE:LINE:COL: error: ..." in err (outside an allocation: one error
 * saying so). */
int slurm_resolve(struct hosts *hosts, const struct slurm_env *env, char *err, size_t errlen);

/* The srun command line that starts `AGENT agent` on node (argv NULL-terminated; the strings
 * live in self). srun: the program ("srun" to search PATH). Returns 0, or -EINVAL when node
 * is not a valid host name or agent_path not an absolute path of [A-Za-z0-9/._-]. */
struct slurm_argv {
	const char *argv[SLURM_ARGV_MAX];
	char nodelist[HOSTS_NAME_MAX + 16];
};
int slurm_agent_argv(struct slurm_argv *self, const char *srun, const char *node, const char *agent_path);

#endif
