/* orchestrator/hosts: the machines a run spreads over, from a scenario's `hosts:` section or a
 * separate `--hosts FILE`, validated with FILE:LINE:COL errors.
 *
 *   hosts:
 *     launcher: ssh                     # ssh (default) | slurm
 *     list:
 *       - {name: a, address: 198.18.200.1, ssh: root@a.lab, cores: 8}
 *     placement: auto                   # auto (default) | {NODE-SELECTOR: HOST, ...}
 *
 * A host's `address` is its IPv4 underlay address (cross-host links are VXLAN over it), `ssh`
 * the destination handed to the system's ssh client (default root@ADDRESS), `cores` how many
 * nodes it may hold. With `launcher: slurm` the list, an entry's address and its cores may be
 * left out: orchestrator/slurm fills them from the allocation (so n may be 0 and a host's
 * addr 0 until slurm_resolve). Names, addresses and ssh destinations are checked here so that nothing
 * read from the file can reach ssh as an option (a leading '-') or a remote shell as syntax:
 * the accepted alphabets are small and fixed. Which nodes a placement map names is checked
 * against each run's node list by orchestrator/placement. */
#ifndef STALENET_HOSTS_H
#define STALENET_HOSTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct yamltree_node;

#define HOSTS_MAX         256           /* hosts in one list */
#define HOSTS_NAME_MAX    32            /* host name, including the NUL */
#define HOSTS_SSH_MAX     128           /* user@host, including the NUL */
#define HOSTS_MAX_CORES   4096u
#define HOSTS_FILE_MAX    (1u << 20)    /* a --hosts file */

enum hosts_launcher { HOSTS_LAUNCHER_SSH = 0, HOSTS_LAUNCHER_SLURM };

struct hosts_host {
	char name[HOSTS_NAME_MAX];
	char address[16];               /* dotted IPv4, as validated */
	uint32_t addr;                  /* the same, host byte order */
	char ssh[HOSTS_SSH_MAX];        /* [user@]host for ssh */
	uint32_t cores;                 /* >= 1 */
	uint32_t line, col;             /* of the list entry */
};

/* One `placement` map entry: the nodes sel matches go to host (index into list). */
struct hosts_map_entry {
	char *nodes;                    /* selector text (orchestrator/selector) */
	uint32_t host;
	uint32_t line, col;             /* of the key */
	char *origin;                   /* --set origin of the entry, NULL = from the file */
};

struct hosts {
	char *file;                     /* name used in error messages */
	enum hosts_launcher launcher;
	struct hosts_host *list;
	size_t n;
	uint32_t line, col;             /* of the hosts mapping */
	struct hosts_map_entry *map;    /* NULL with n_map 0: placement auto */
	size_t n_map;
};

/* Validate a `hosts` mapping of the tree read from file (its name for messages). Returns a new
 * struct hosts (hosts_destroy) or NULL with "FILE:LINE:COL: error: ..." in err. */
struct hosts *hosts_from_tree(const struct yamltree_node *m, const char *file, char *err, size_t errlen);

/* Read a --hosts FILE: a YAML mapping that is either the hosts section itself or holds it
 * under a `hosts` key. Returns a new struct hosts or NULL with a one-line error in err. */
struct hosts *hosts_load(const char *path, char *err, size_t errlen);
/* The same from the text buf[0..len) (name for messages); hosts_load reads the file into it. */
struct hosts *hosts_parse(const char *buf, size_t len, const char *name, char *err, size_t errlen);

/* Index of the host named name, or -1. */
int hosts_find(const struct hosts *self, const char *name);

/* Sum of the hosts' cores. */
uint64_t hosts_total_cores(const struct hosts *self);

const char *hosts_launcher_name(enum hosts_launcher l);

void hosts_destroy(struct hosts **self);

#endif
