/* orchestrator/cgroup: see cgroup.h.
 *
 * Control files are written whole with one write(2) (the kernel parses each write as one
 * value). On v1 a cpuset cgroup starts with empty cpuset.cpus and cpuset.mems and refuses tasks
 * until both are set, so the run's parent copies the root's and each child gets its pinning list
 * (or the parent's CPUs) and the parent's memory nodes. The CFS quota is the share of one core
 * times the period: cpu 0.25 = 25 ms of CPU per 100 ms, whatever CPUs it runs on. */
#include "orchestrator/cgroup.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "lib/log.h"
#include "orchestrator/journal.h"
#include "orchestrator/units.h"

#define N_CTRL 3
#define REMOVE_TRIES 100         /* x 10 ms: tasks being killed leave within this */

static const char *const ctrl_names[N_CTRL] = { "cpu", "cpuset", "memory" };
static char trusted_root[PATH_MAX] = CGROUP_DEFAULT_ROOT;

struct cg_node {
	char name[64];
	char *path[N_CTRL];          /* v1: per controller; v2: path[0] only */
	bool mem_limited;
	uint64_t oom_base;
};

struct cgroup_run {
	char root[PATH_MAX];
	char prefix[32];
	struct cgroup_info info;
	unsigned used;               /* CGROUP_* bits in use */
	struct journal *j;
	char *parent[N_CTRL];
	struct cg_node *nodes;
	size_t n, cap;
};

/* ---- small file helpers -------------------------------------------------------------------- */

static int write_text(const char *path, const char *text)
{
	size_t len = strlen(text);
	ssize_t w;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644), rc = 0;

	if (fd < 0)
		return -errno;
	while ((w = write(fd, text, len)) < 0 && errno == EINTR)
		;
	if (w < 0)
		rc = -errno;
	else if ((size_t)w != len)
		rc = -EIO;
	close(fd);
	return rc;
}

static int read_text(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf, len - 1)) < 0 && errno == EINTR)
		;
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return (int)n;
}

static bool file_exists(const char *dir, const char *file)
{
	char p[PATH_MAX];
	struct stat st;

	return snprintf(p, sizeof p, "%s/%s", dir, file) < (int)sizeof p && stat(p, &st) == 0;
}

static int write_in(const char *dir, const char *file, const char *text)
{
	char p[PATH_MAX];
	int rc;

	if (snprintf(p, sizeof p, "%s/%s", dir, file) >= (int)sizeof p)
		return -ENAMETOOLONG;
	rc = write_text(p, text);
	if (rc < 0)
		log_error("cgroup: write '%s' to %s: %s", text, p, strerror(-rc));
	return rc;
}

static int read_in(const char *dir, const char *file, char *buf, size_t len)
{
	char p[PATH_MAX];

	if (snprintf(p, sizeof p, "%s/%s", dir, file) >= (int)sizeof p)
		return -ENAMETOOLONG;
	return read_text(p, buf, len);
}

/* The number after "key " on a line of a "key value" file. */
static bool keyed_value(const char *text, const char *key, uint64_t *out)
{
	size_t l = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, l) && p[l] == ' ') {
			*out = strtoull(p + l + 1, NULL, 10);
			return true;
		}
	return false;
}

/* ---- detection and formats ----------------------------------------------------------------- */

const char *cgroup_hierarchy_name(enum cgroup_hierarchy h)
{
	return h == CGROUP_V2 ? "v2" : h == CGROUP_V1 ? "v1" : "none";
}

static bool has_word(const char *list, const char *word)
{
	size_t l = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += l)
		if ((p == list || isspace((unsigned char)p[-1])) && (!p[l] || isspace((unsigned char)p[l])))
			return true;
	return false;
}

int cgroup_detect(const char *root, struct cgroup_info *out)
{
	static const char *const v1_probe[N_CTRL] = { "cpu/cpu.cfs_quota_us", "cpuset/cpuset.cpus",
						      "memory/memory.limit_in_bytes" };
	char buf[1024];
	int rc;

	if (!root)
		root = CGROUP_DEFAULT_ROOT;
	memset(out, 0, sizeof *out);
	rc = read_in(root, "cgroup.controllers", buf, sizeof buf);
	if (rc >= 0) {
		out->hierarchy = CGROUP_V2;
		for (int c = 0; c < N_CTRL; c++)
			if (has_word(buf, ctrl_names[c]))
				out->controllers |= 1u << c;
		/* memory.swap.max exists in every non-root cgroup of a kernel accounting swap */
		out->swap_limit = has_word(buf, "memory");
		return 0;
	}
	if (rc != -ENOENT && rc != -ENOTDIR)
		return rc;
	for (int c = 0; c < N_CTRL; c++)
		if (file_exists(root, v1_probe[c]))
			out->controllers |= 1u << c;
	if (out->controllers)
		out->hierarchy = CGROUP_V1;
	out->swap_limit = file_exists(root, "memory/memory.memsw.limit_in_bytes");
	return 0;
}

int cgroup_parse_cpus(const char *s, uint64_t *mask)
{
	int count = 0;

	memset(mask, 0, CGROUP_CPU_WORDS * sizeof *mask);
	while (*s && *s != '\n') {
		char *end;
		unsigned long a, b;

		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		a = strtoul(s, &end, 10);
		b = a;
		if (*end == '-') {
			if (!isdigit((unsigned char)end[1]))
				return -EINVAL;
			b = strtoul(end + 1, &end, 10);
		}
		if (b < a || b >= CGROUP_MAX_CPUS)
			return -EINVAL;
		for (unsigned long c = a; c <= b; c++) {
			if (!(mask[c / 64] & (1ull << (c % 64))))
				count++;
			mask[c / 64] |= 1ull << (c % 64);
		}
		s = end;
		if (*s == ',')
			s++;
		else if (*s && *s != '\n')
			return -EINVAL;
	}
	return count;
}

static bool bit(const uint64_t *mask, unsigned c)
{
	return mask[c / 64] & (1ull << (c % 64));
}

int cgroup_format_cpus(const uint64_t *mask, char *buf, size_t len)
{
	size_t pos = 0;

	if (len)
		buf[0] = '\0';
	for (unsigned c = 0; c < CGROUP_MAX_CPUS; c++) {
		unsigned e = c;
		int n;

		if (!bit(mask, c))
			continue;
		while (e + 1 < CGROUP_MAX_CPUS && bit(mask, e + 1))
			e++;
		n = e == c ? snprintf(buf + (pos < len ? pos : len), pos < len ? len - pos : 0, "%s%u", pos ? "," : "", c)
			   : snprintf(buf + (pos < len ? pos : len), pos < len ? len - pos : 0, "%s%u-%u", pos ? "," : "", c, e);
		pos += (size_t)n;
		c = e;
	}
	return (int)pos;
}

int cgroup_online_cpus(uint64_t *mask)
{
	char buf[4096];
	int rc = read_text("/sys/devices/system/cpu/online", buf, sizeof buf);

	if (rc < 0)
		return rc;
	rc = cgroup_parse_cpus(buf, mask);
	return rc == 0 ? -EINVAL : rc;
}

int cgroup_parse_size(const char *s, uint64_t *bytes, const char **why)
{
	static const struct { const char *name; uint64_t mult; } units[] = {
		{ "", 1 }, { "B", 1 }, { "K", 1ull << 10 }, { "KiB", 1ull << 10 }, { "M", 1ull << 20 },
		{ "MiB", 1ull << 20 }, { "G", 1ull << 30 }, { "GiB", 1ull << 30 }, { "T", 1ull << 40 },
		{ "TiB", 1ull << 40 }, { "kB", 1000 }, { "KB", 1000 }, { "MB", 1000000 },
		{ "GB", 1000000000 }, { "TB", 1000000000000ull },
	};
	const char *dummy;
	uint64_t mant, mult = 0;
	unsigned scale;
	int n;

	if (!why)
		why = &dummy;
	n = units_parse_decimal(s ? s : "", &mant, &scale);
	if (n < 0) {
		*why = n == -ERANGE ? "too many digits" : "not a size";
		return n;
	}
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (!strcmp(s + n + (s[n] == ' '), units[i].name))
			mult = units[i].mult;
	if (!mult) {
		*why = "unknown unit (expected B, KiB, MiB, GiB, TiB or kB, MB, GB, TB)";
		return -EINVAL;
	}
	{
		unsigned __int128 v = (unsigned __int128)mant * mult, den = 1;

		while (scale--)
			den *= 10;
		if (v % den) {
			*why = "not a whole number of bytes";
			return -EINVAL;
		}
		v /= den;
		if (v > (unsigned __int128)INT64_MAX) {
			*why = "value too large";
			return -ERANGE;
		}
		*bytes = (uint64_t)v;
	}
	return 0;
}

int cgroup_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int k = 0;

	while (k < 4 && bytes && !(bytes % 1024)) {
		bytes /= 1024;
		k++;
	}
	return snprintf(buf, len, "%llu%s", (unsigned long long)bytes, u[k]);
}

/* ---- trust ------------------------------------------------------------------------------------ */

const char *cgroup_root(void)
{
	return trusted_root;
}

void cgroup_set_root(const char *root)
{
	snprintf(trusted_root, sizeof trusted_root, "%s", root ? root : CGROUP_DEFAULT_ROOT);
}

#define NAMECH "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"

static bool good_component(const char *s, size_t n)
{
	size_t k = 0;

	while (k < n && strchr(NAMECH ".", s[k]) && s[k])
		k++;
	return n >= 1 && k == n && !(n == 1 && s[0] == '.') && !(n == 2 && s[0] == '.' && s[1] == '.');
}

const char *cgroup_path_problem(const char *path, const char *prefix)
{
	const char *root = cgroup_root(), *comp[4];
	size_t rl = strlen(root), pl = strlen(prefix), len[4], nc = 0, first = 0;

	if (pl < 3 || pl > 15 || strspn(prefix, NAMECH) != pl)
		return "implausible run prefix";
	if (strncmp(path, root, rl) || path[rl] != '/')
		return "cgroup outside the cgroup mount";
	for (const char *p = path + rl + 1;; ) {
		const char *slash = strchr(p, '/');
		size_t l = slash ? (size_t)(slash - p) : strlen(p);

		if (nc == 4)
			return "cgroup nested deeper than a run's";
		if (!good_component(p, l))
			return "cgroup path with an empty, '.', '..' or unusual component";
		comp[nc] = p;
		len[nc++] = l;
		if (!slash)
			break;
		p = slash + 1;
	}
	for (int c = 0; c < N_CTRL; c++)
		if (len[0] == strlen(ctrl_names[c]) && !strncmp(comp[0], ctrl_names[c], len[0]))
			first = 1;
	if (nc - first < 1 || nc - first > 2)
		return "cgroup not a run's parent or node";
	if (len[first] != pl || strncmp(comp[first], prefix, pl))
		return "cgroup without the run prefix";
	if (nc - first == 2 && (len[first + 1] <= pl || strncmp(comp[first + 1], prefix, pl)))
		return "node cgroup without the run prefix";
	return NULL;
}

/* ---- removal ----------------------------------------------------------------------------------- */

int cgroup_remove(const char *path, const char *prefix)
{
	char top[PATH_MAX], procs[65536];
	const char *p = path;
	size_t pl = strlen(prefix);
	int rc;

	/* The hierarchy's root: the directory above the component that is the prefix. */
	top[0] = '\0';
	while ((p = strchr(p, '/'))) {
		p++;
		if (!strncmp(p, prefix, pl) && (p[pl] == '/' || !p[pl])) {
			snprintf(top, sizeof top, "%.*s", (int)(p - 1 - path), path);
			break;
		}
	}
	if (!top[0])
		return -EINVAL;
	/* Under the real mount only a cgroup file system is ours to rmdir in (the tmpfs holding
	 * the v1 mount points is not); a missing directory is already gone. */
	if (!strncmp(path, CGROUP_DEFAULT_ROOT "/", sizeof CGROUP_DEFAULT_ROOT)) {
		struct statfs fs;

		if (statfs(path, &fs) < 0)
			return errno == ENOENT ? 0 : -errno;
		if (fs.f_type != CGROUP_SUPER_MAGIC && fs.f_type != CGROUP2_SUPER_MAGIC) {
			log_error("cgroup: %s is not on a cgroup file system: left alone", path);
			return -EPERM;
		}
	}
	for (int tries = 0;; tries++) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return 0;
		rc = -errno;
		if (rc != -EBUSY || tries >= REMOVE_TRIES)
			break;
		/* Tasks left (a grandchild, or processes still exiting): out to the root. */
		if (read_in(path, "cgroup.procs", procs, sizeof procs) > 0) {
			char *save = NULL;

			for (char *t = strtok_r(procs, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
				char tp[PATH_MAX];

				if (snprintf(tp, sizeof tp, "%s/cgroup.procs", top) < (int)sizeof tp)
					(void)write_text(tp, t);
			}
		}
		usleep(10000);
	}
	log_error("cgroup: rmdir %s: %s", path, strerror(-rc));
	return rc;
}

/* ---- the run ----------------------------------------------------------------------------------- */

/* Record path, then create it. An existing directory is not ours: refused before recording. */
static int make_dir(struct cgroup_run *self, const char *path, char *err, size_t errlen)
{
	struct stat st;
	int rc;

	if (lstat(path, &st) == 0) {
		snprintf(err, errlen, "cgroup %s exists already", path);
		return -EEXIST;
	}
	if (self->j && (rc = journal_cgroup(self->j, path)) < 0) {
		snprintf(err, errlen, "journal cgroup %s: %s", path, strerror(-rc));
		return rc;
	}
	if (mkdir(path, 0755) < 0) {
		rc = -errno;
		snprintf(err, errlen, "mkdir %s: %s", path, strerror(-rc));
		return rc;
	}
	return 0;
}

static const char *ctrl_dir(const struct cgroup_run *self, int c, char *buf, size_t len)
{
	if (self->info.hierarchy == CGROUP_V2)
		snprintf(buf, len, "%s", self->root);
	else
		if (snprintf(buf, len, "%s/%s", self->root, ctrl_names[c]) >= (int)len)
			buf[0] = '\0';
	return buf;
}

/* v2: "+cpu +memory" for the used controllers not yet in dir's cgroup.subtree_control. */
static int enable_v2(struct cgroup_run *self, const char *dir, char *err, size_t errlen)
{
	char cur[1024] = "", want[64] = "";
	int rc;

	(void)read_in(dir, "cgroup.subtree_control", cur, sizeof cur);
	for (int c = 0; c < N_CTRL; c++)
		if ((self->used & (1u << c)) && !has_word(cur, ctrl_names[c]))
			snprintf(want + strlen(want), sizeof want - strlen(want), "%s+%s", want[0] ? " " : "",
				 ctrl_names[c]);
	if (!want[0])
		return 0;
	if ((rc = write_in(dir, "cgroup.subtree_control", want)) < 0)
		snprintf(err, errlen, "enable %s in %s/cgroup.subtree_control: %s", want, dir, strerror(-rc));
	return rc;
}

struct cgroup_run *cgroup_run_new(const char *root, const char *prefix, unsigned need, struct journal *j,
				  char *err, size_t errlen)
{
	struct cgroup_run *self = calloc(1, sizeof *self);
	char dir[PATH_MAX], path[PATH_MAX], buf[4096];
	int rc;

	if (!self) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(self->root, sizeof self->root, "%s", root ? root : CGROUP_DEFAULT_ROOT);
	snprintf(self->prefix, sizeof self->prefix, "%s", prefix);
	self->j = j;
	if ((rc = cgroup_detect(self->root, &self->info)) < 0) {
		snprintf(err, errlen, "cgroups under %s: %s", self->root, strerror(-rc));
		goto fail;
	}
	if (self->info.hierarchy == CGROUP_NONE || (need & ~self->info.controllers)) {
		snprintf(err, errlen, "resources need the %s%s%s controller(s), %s has %s hierarchy%s%s%s%s",
			 (need & CGROUP_CPU) ? "cpu " : "", (need & CGROUP_CPUSET) ? "cpuset " : "",
			 (need & CGROUP_MEMORY) ? "memory" : "", self->root,
			 self->info.hierarchy == CGROUP_NONE ? "no" : cgroup_hierarchy_name(self->info.hierarchy),
			 self->info.controllers ? " with" : "", (self->info.controllers & CGROUP_CPU) ? " cpu" : "",
			 (self->info.controllers & CGROUP_CPUSET) ? " cpuset" : "",
			 (self->info.controllers & CGROUP_MEMORY) ? " memory" : "");
		goto fail;
	}
	self->used = need;
	if (self->info.hierarchy == CGROUP_V2 && enable_v2(self, self->root, err, errlen) < 0)
		goto fail;
	for (int c = 0; c < N_CTRL; c++) {
		if (!(need & (1u << c)) || (self->info.hierarchy == CGROUP_V2 && self->parent[0]))
			continue;
		ctrl_dir(self, c, dir, sizeof dir);
		if (snprintf(path, sizeof path, "%s/%s", dir, prefix) >= (int)sizeof path) {
			snprintf(err, errlen, "cgroup root %s: path too long", self->root);
			goto fail;
		}
		if (make_dir(self, path, err, errlen) < 0)
			goto fail;
		if (!(self->parent[self->info.hierarchy == CGROUP_V2 ? 0 : c] = strdup(path))) {
			cgroup_remove(path, prefix);
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		/* A v1 cpuset parent starts empty: it gets the root's CPUs and memory nodes. */
		if (self->info.hierarchy == CGROUP_V1 && c == 1) {
			if (read_in(dir, "cpuset.cpus", buf, sizeof buf) < 0 || write_in(path, "cpuset.cpus", buf) < 0 ||
			    read_in(dir, "cpuset.mems", buf, sizeof buf) < 0 || write_in(path, "cpuset.mems", buf) < 0) {
				snprintf(err, errlen, "cpuset of %s: cannot copy the root's cpus and mems", path);
				goto fail;
			}
		}
	}
	if (self->info.hierarchy == CGROUP_V2 && enable_v2(self, self->parent[0], err, errlen) < 0)
		goto fail;
	return self;
fail:
	cgroup_run_destroy(&self);
	return NULL;
}

static int add_v2(struct cgroup_run *self, struct cg_node *nd, const struct cgroup_limits *lim, char *err,
		  size_t errlen)
{
	char path[PATH_MAX], v[4096];
	int rc = 0;

	if (snprintf(path, sizeof path, "%s/%s%s", self->parent[0], self->prefix, nd->name) >= (int)sizeof path)
		return -ENAMETOOLONG;
	if ((rc = make_dir(self, path, err, errlen)) < 0)
		return rc;
	if (!(nd->path[0] = strdup(path)))
		return -ENOMEM;
	if (self->used & CGROUP_CPU) {
		if (lim->cpu > 0)
			snprintf(v, sizeof v, "%llu %u", (unsigned long long)(lim->cpu * CGROUP_CPU_PERIOD_US + 0.5),
				 CGROUP_CPU_PERIOD_US);
		else
			snprintf(v, sizeof v, "max %u", CGROUP_CPU_PERIOD_US);
		if ((rc = write_in(path, "cpu.max", v)) < 0)
			goto out;
	}
	if ((self->used & CGROUP_CPUSET) && lim->cpus) {
		cgroup_format_cpus(lim->cpus, v, sizeof v);
		if ((rc = write_in(path, "cpuset.cpus", v)) < 0)
			goto out;
	}
	if (self->used & CGROUP_MEMORY) {
		if (lim->memory_bytes)
			snprintf(v, sizeof v, "%llu", (unsigned long long)lim->memory_bytes);
		else
			snprintf(v, sizeof v, "max");
		if ((rc = write_in(path, "memory.max", v)) < 0)
			goto out;
		/* Without this a limited node swaps instead of being killed at its limit. */
		if (lim->memory_bytes && file_exists(path, "memory.swap.max") &&
		    (rc = write_in(path, "memory.swap.max", "0")) < 0)
			goto out;
	}
out:
	if (rc < 0)
		snprintf(err, errlen, "limits of %s: %s", path, strerror(-rc));
	return rc;
}

static int add_v1(struct cgroup_run *self, struct cg_node *nd, const struct cgroup_limits *lim, char *err,
		  size_t errlen)
{
	char path[PATH_MAX], v[4096];
	int rc = 0;

	for (int c = 0; c < N_CTRL; c++) {
		if (!(self->used & (1u << c)))
			continue;
		if (snprintf(path, sizeof path, "%s/%s%s", self->parent[c], self->prefix, nd->name) >= (int)sizeof path)
			return -ENAMETOOLONG;
		if ((rc = make_dir(self, path, err, errlen)) < 0)
			return rc;
		if (!(nd->path[c] = strdup(path)))
			return -ENOMEM;
		switch (c) {
		case 0:
			snprintf(v, sizeof v, "%u", CGROUP_CPU_PERIOD_US);
			if ((rc = write_in(path, "cpu.cfs_period_us", v)) < 0)
				goto out;
			if (lim->cpu > 0)
				snprintf(v, sizeof v, "%llu", (unsigned long long)(lim->cpu * CGROUP_CPU_PERIOD_US + 0.5));
			else
				snprintf(v, sizeof v, "-1");
			if ((rc = write_in(path, "cpu.cfs_quota_us", v)) < 0)
				goto out;
			break;
		case 1:
			if (lim->cpus)
				cgroup_format_cpus(lim->cpus, v, sizeof v);
			else if ((rc = read_in(self->parent[c], "cpuset.cpus", v, sizeof v)) < 0)
				goto out;
			if ((rc = write_in(path, "cpuset.cpus", v)) < 0 ||
			    (rc = read_in(self->parent[c], "cpuset.mems", v, sizeof v)) < 0 ||
			    (rc = write_in(path, "cpuset.mems", v)) < 0)
				goto out;
			break;
		default:
			if (!lim->memory_bytes)
				break;
			snprintf(v, sizeof v, "%llu", (unsigned long long)lim->memory_bytes);
			if ((rc = write_in(path, "memory.limit_in_bytes", v)) < 0)
				goto out;
			/* RAM + swap capped at the same value: the limit is on RAM (memsw >= limit,
			 * so it is written after the limit). */
			if (file_exists(path, "memory.memsw.limit_in_bytes") &&
			    (rc = write_in(path, "memory.memsw.limit_in_bytes", v)) < 0)
				goto out;
			break;
		}
	}
out:
	if (rc < 0)
		snprintf(err, errlen, "limits of %s: %s", path, strerror(-rc));
	return rc;
}

int cgroup_run_add(struct cgroup_run *self, const char *name, const struct cgroup_limits *lim, char *err,
		   size_t errlen)
{
	struct cg_node *nd;
	int rc;

	if (strlen(name) >= sizeof nd->name || !good_component(name, strlen(name))) {
		snprintf(err, errlen, "node name '%s' unusable in a cgroup path", name);
		return -EINVAL;
	}
	if (self->n == self->cap) {
		size_t cap = self->cap ? self->cap * 2 : 16;
		struct cg_node *nn = realloc(self->nodes, cap * sizeof *nn);

		if (!nn) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		self->nodes = nn;
		self->cap = cap;
	}
	nd = &self->nodes[self->n++];
	memset(nd, 0, sizeof *nd);
	snprintf(nd->name, sizeof nd->name, "%s", name);
	nd->mem_limited = lim->memory_bytes > 0;
	rc = self->info.hierarchy == CGROUP_V2 ? add_v2(self, nd, lim, err, errlen) : add_v1(self, nd, lim, err, errlen);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	if (rc < 0)
		return rc;
	/* Counters start at 0 in a new cgroup; read anyway (the baseline is what it says now). */
	if (lim->memory_bytes) {
		uint64_t ignored;

		(void)cgroup_run_oom_kills(self, (int)(self->n - 1), &ignored);
	}
	return (int)(self->n - 1);
}

int cgroup_run_find(const struct cgroup_run *self, const char *name)
{
	for (size_t i = 0; self && i < self->n; i++)
		if (!strcmp(self->nodes[i].name, name))
			return (int)i;
	return -ENOENT;
}

int cgroup_run_attach(struct cgroup_run *self, int idx, pid_t pid)
{
	char v[24];
	int rc;

	if (idx < 0 || (size_t)idx >= self->n)
		return -EINVAL;
	snprintf(v, sizeof v, "%d", (int)pid);
	for (int c = 0; c < N_CTRL; c++)
		if (self->nodes[idx].path[c] && (rc = write_in(self->nodes[idx].path[c], "cgroup.procs", v)) < 0)
			return rc;
	return 0;
}

int cgroup_run_oom_kills(struct cgroup_run *self, int idx, uint64_t *kills)
{
	struct cg_node *nd;
	const char *dir;
	char buf[4096];
	uint64_t v = 0;
	int rc;

	if (idx < 0 || (size_t)idx >= self->n)
		return -EINVAL;
	nd = &self->nodes[idx];
	*kills = 0;
	dir = nd->path[self->info.hierarchy == CGROUP_V2 ? 0 : 2];
	if (!dir || !(self->used & CGROUP_MEMORY))
		return 0;
	if (self->info.hierarchy == CGROUP_V2) {
		if ((rc = read_in(dir, "memory.events", buf, sizeof buf)) < 0)
			return rc;
		keyed_value(buf, "oom_kill", &v);
	} else if ((rc = read_in(dir, "memory.oom_control", buf, sizeof buf)) < 0 || !keyed_value(buf, "oom_kill", &v)) {
		/* Kernels before 4.13 count no kills: the limit having been hit stands for it. */
		if ((rc = read_in(dir, "memory.failcnt", buf, sizeof buf)) < 0)
			return rc;
		v = strtoull(buf, NULL, 10);
	}
	*kills = v >= nd->oom_base ? v - nd->oom_base : 0;
	nd->oom_base = v;
	return 0;
}

const char *cgroup_run_path(const struct cgroup_run *self, int idx, enum cgroup_controller ctrl)
{
	int c = ctrl == CGROUP_CPU ? 0 : ctrl == CGROUP_CPUSET ? 1 : 2;

	if (self->info.hierarchy == CGROUP_V2)
		c = 0;
	if (idx < 0)
		return self->parent[c];
	return (size_t)idx < self->n ? self->nodes[idx].path[c] : NULL;
}

int cgroup_run_destroy(struct cgroup_run **pself)
{
	struct cgroup_run *self = pself ? *pself : NULL;
	int rc = 0, r;

	if (!self)
		return 0;
	for (size_t i = self->n; i-- > 0;)
		for (int c = 0; c < N_CTRL; c++) {
			if (self->nodes[i].path[c] && (r = cgroup_remove(self->nodes[i].path[c], self->prefix)) < 0 && !rc)
				rc = r;
			free(self->nodes[i].path[c]);
		}
	for (int c = 0; c < N_CTRL; c++) {
		if (self->parent[c] && (r = cgroup_remove(self->parent[c], self->prefix)) < 0 && !rc)
			rc = r;
		free(self->parent[c]);
	}
	free(self->nodes);
	free(self);
	*pself = NULL;
	return rc;
}
