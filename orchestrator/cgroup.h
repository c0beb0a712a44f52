/* orchestrator/cgroup: per-node CPU and memory limits of a run, through cgroups.
 *
 * Two hierarchies are met on Linux hosts. The unified one (v2; ROOT/cgroup.controllers exists):
 * one tree, controllers enabled for children through the parent's cgroup.subtree_control, limits
 * in cpu.max ("QUOTA PERIOD"), cpuset.cpus, memory.max (+ memory.swap.max 0 so the limit is one
 * on RAM, not RAM + swap), OOM kills counted by memory.events "oom_kill". The v1 layout: one
 * mount per controller, ROOT/cpu (cpu.cfs_quota_us over cpu.cfs_period_us), ROOT/cpuset
 * (cpuset.cpus and cpuset.mems, both required before a task may join), ROOT/memory
 * (memory.limit_in_bytes, memory.memsw.limit_in_bytes when swap is accounted, OOM kills in
 * memory.oom_control "oom_kill", older kernels: memory.failcnt).
 *
 * A run gets one parent named with its prefix (ROOT/PREFIX on v2, ROOT/CTRL/PREFIX on v1) and
 * one child per node, PARENT/PREFIXNODE; each directory is journalled (`cgroup PATH`) before
 * mkdir, so `stalenet cleanup` can remove it after a kill -9. Removal moves any task left to the
 * hierarchy's root (never kills: cleanup trusts only paths, and processes are the `proc`
 * records' business) and removes children before parents; a missing directory is success.
 *
 * On v2 the controllers a run needs are enabled in the root's cgroup.subtree_control when they
 * are not yet (and left so: enabling is host-wide policy systemd normally sets, and disabling it
 * would break other users' cgroups).
 *
 * The root is a parameter so tests can point the module at a directory of plain files; on a
 * plain directory the files written are created. */
#ifndef STALENET_CGROUP_H
#define STALENET_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct journal;

#define CGROUP_DEFAULT_ROOT "/sys/fs/cgroup"
#define CGROUP_CPU_PERIOD_US 100000u            /* CFS period of every limited node */
#define CGROUP_MIN_CPU 0.01                     /* 1 ms per period: the kernel's minimum quota */
#define CGROUP_MIN_MEMORY_BYTES (16ull << 20)   /* below, a node cannot even load its program */
#define CGROUP_MAX_CPUS 1024                    /* CPU numbers 0..1023 in a pinning list */
#define CGROUP_CPU_WORDS (CGROUP_MAX_CPUS / 64)

enum cgroup_hierarchy { CGROUP_NONE = 0, CGROUP_V1, CGROUP_V2 };

/* Controller bits. */
enum cgroup_controller { CGROUP_CPU = 1u << 0, CGROUP_CPUSET = 1u << 1, CGROUP_MEMORY = 1u << 2 };

struct cgroup_info {
	enum cgroup_hierarchy hierarchy;
	unsigned controllers;       /* CGROUP_* usable for limits */
	bool swap_limit;            /* v1 memory.memsw.*, v2 memory.swap.max */
};

/* What one node may use. */
struct cgroup_limits {
	double cpu;                 /* cores (0.25 = a quarter of one core); 0 = unlimited */
	const uint64_t *cpus;       /* CGROUP_CPU_WORDS words of CPU bits; NULL = any CPU */
	uint64_t memory_bytes;      /* 0 = unlimited */
};

/* Which hierarchy ROOT (NULL = CGROUP_DEFAULT_ROOT) has and its controllers. Returns 0 (out
 * filled; hierarchy CGROUP_NONE when neither is mounted there) or -errno. */
int cgroup_detect(const char *root, struct cgroup_info *out);

/* "v1", "v2", "none". */
const char *cgroup_hierarchy_name(enum cgroup_hierarchy h);

/* Parse a kernel CPU list ("0-3,7") into mask (CGROUP_CPU_WORDS words, cleared first).
 * Returns the number of CPUs set, or -EINVAL (syntax, a CPU >= CGROUP_MAX_CPUS). */
int cgroup_parse_cpus(const char *s, uint64_t *mask);

/* Format mask as a kernel CPU list ("0-3,7"; "" when empty) into buf (as snprintf). */
int cgroup_format_cpus(const uint64_t *mask, char *buf, size_t len);

/* The host's online CPUs (/sys/devices/system/cpu/online) into mask. Returns their number
 * (>= 1) or -errno. */
int cgroup_online_cpus(uint64_t *mask);

/* A memory size: a whole number of bytes with an optional unit B, KiB MiB GiB TiB (x1024; K M
 * G T too) or kB MB GB TB (x1000), e.g. "256MiB", "1.5GiB". Returns 0, or -EINVAL/-ERANGE with
 * a short static reason in *why. */
int cgroup_parse_size(const char *s, uint64_t *bytes, const char **why);

/* Format bytes with the largest binary unit that represents it exactly ("256MiB"). */
int cgroup_format_size(uint64_t bytes, char *buf, size_t len);

/* ---- the cgroups of one run ------------------------------------------------------------- */

struct cgroup_run;

/* Detect the hierarchy under root (NULL = default), check it has the controllers in need
 * (CGROUP_* bits), record and create the run's parent(s) named prefix, and enable the
 * controllers for its children (v2). j may be NULL (tests of this module only). Returns NULL
 * with a one-line reason in err; whatever was created is removed again. */
struct cgroup_run *cgroup_run_new(const char *root, const char *prefix, unsigned need, struct journal *j,
				  char *err, size_t errlen);

/* Record and create node name's cgroup(s) and write its limits. Returns the node's index
 * (>= 0, in order of addition) or -errno with err filled. */
int cgroup_run_add(struct cgroup_run *self, const char *name, const struct cgroup_limits *lim, char *err,
		   size_t errlen);

/* Index of the node called name, or -ENOENT. */
int cgroup_run_find(const struct cgroup_run *self, const char *name);

/* Move process pid into node idx's cgroup(s) (from the parent, before the process execs).
 * Returns 0 or -errno. */
int cgroup_run_attach(struct cgroup_run *self, int idx, pid_t pid);

/* Kernel OOM kills inside node idx's cgroup since the last call, or since it was made (v2
 * memory.events oom_kill, v1 memory.oom_control oom_kill or, without it, memory.failcnt): a
 * restarted node's later death is judged on its own. Returns 0 and *kills, or -errno. */
int cgroup_run_oom_kills(struct cgroup_run *self, int idx, uint64_t *kills);

/* The directory of node idx (idx -1: the parent) in controller ctrl (one CGROUP_* bit; any on
 * v2), or NULL when that controller is not used. Owned by self. */
const char *cgroup_run_path(const struct cgroup_run *self, int idx, enum cgroup_controller ctrl);

/* Remove the children, then the parent(s) (cgroup_remove each); free; *self = NULL; accepts
 * NULL. Returns 0 or the first error (the journal still lists what is left). */
int cgroup_run_destroy(struct cgroup_run **self);

/* ---- removal and trust (teardown, `stalenet cleanup`) -------------------------------------- */

/* Move every task of the cgroup directory path (a run's parent or child, named with prefix) to
 * its hierarchy's root (the directory above the component equal to prefix), then rmdir it (a few
 * bounded retries while exiting tasks leave). Missing: 0. Under CGROUP_DEFAULT_ROOT a directory
 * not on a cgroup file system is refused (-EPERM). Returns 0 or -errno. */
int cgroup_remove(const char *path, const char *prefix);

/* Why path may not be removed for the run with this prefix, or NULL when it may: it must be
 * under the cgroup root (cgroup_root()), ROOT[/CTRL]/PREFIX or ROOT[/CTRL]/PREFIX/PREFIXNAME,
 * CTRL one of cpu, cpuset, memory, names of [A-Za-z0-9_.-], no "." or ".." component. */
const char *cgroup_path_problem(const char *path, const char *prefix);

/* The root cleanup trusts (CGROUP_DEFAULT_ROOT unless set); cgroup_set_root(NULL) restores it.
 * Not thread-safe (tests). */
const char *cgroup_root(void);
void cgroup_set_root(const char *root);

#endif
