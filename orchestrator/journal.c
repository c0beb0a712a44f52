/* orchestrator/journal: append-before-create records of host state, and their reverse replay.
 *
 * The writer keeps one O_APPEND fd. A record is formatted into one buffer and written with a
 * single write() followed by fdatasync(), so a crash leaves at most a torn last line, which
 * the parser ignores (its append never returned, so its thing was never created). Batches
 * exist because a 1000-node testbed would otherwise spend ~0.25 ms per fsync per record.
 *
 * The parser and the replay loop are pure (no I/O but journal_load) so the unit tests drive
 * them with a model world; the real undo steps live in orchestrator/cleanup. */
#include "orchestrator/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fdio.h"
#include "lib/log.h"
#include "orchestrator/launch.h"

#define JOURNAL_MAGIC "stalenet-journal"
#define JOURNAL_VERSION 1
#define LINE_MAX_BYTES 8192

static const char *const kind_names[JOURNAL_KIND_COUNT] = {
	[JOURNAL_NETNS] = "netns", [JOURNAL_SYSCTL] = "sysctl", [JOURNAL_IPTABLES] = "iptables",
	[JOURNAL_PROC] = "proc", [JOURNAL_CGROUP] = "cgroup", [JOURNAL_SYSCTL_RELEASED] = "sysctl-released",
};
/* Allowed field counts per kind (max -1: unbounded up to JOURNAL_MAX_FIELDS). */
static const int kind_min[JOURNAL_KIND_COUNT] = { 1, 3, 4, 3, 1, 2 };
static const int kind_max[JOURNAL_KIND_COUNT] = { 1, 5, -1, 3, 1, 2 };

static char registry_dir[PATH_MAX] = JOURNAL_REGISTRY_DIR;

struct journal {
	int fd;
	char path[PATH_MAX];
	char run_dir[PATH_MAX];
	char prefix[64];
	char reg_path[PATH_MAX];
	bool in_batch;
	bool ended;             /* "end" written: every claim is released */
	char *batch;            /* buffered lines of the open batch */
	size_t batch_len, batch_cap;
};

const char *journal_kind_name(enum journal_kind kind)
{
	return (unsigned)kind < JOURNAL_KIND_COUNT ? kind_names[kind] : NULL;
}

void journal_set_registry_dir(const char *dir)
{
	snprintf(registry_dir, sizeof registry_dir, "%s", dir ? dir : JOURNAL_REGISTRY_DIR);
}

const char *journal_registry_dir(void)
{
	return registry_dir;
}

/* ---- escaping ---------------------------------------------------------------------------- */

static bool needs_escape(unsigned char c)
{
	return c <= 0x20 || c == 0x7f || c == '%';
}

int journal_escape(const char *in, char *out, size_t outlen)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		if (needs_escape(*p)) {
			if (o + 3 >= outlen)
				return -ENOSPC;
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		} else {
			if (o + 1 >= outlen)
				return -ENOSPC;
			out[o++] = (char)*p;
		}
	}
	if (o >= outlen)
		return -ENOSPC;
	out[o] = '\0';
	return (int)o;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int journal_unescape(const char *in, size_t inlen, char *out, size_t outlen)
{
	size_t o = 0;

	for (size_t i = 0; i < inlen; i++) {
		char c = in[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= inlen)
				return -EINVAL;
			hi = hexval(in[i + 1]);
			lo = hexval(in[i + 2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -EINVAL;
			c = (char)(hi << 4 | lo);
			i += 2;
		} else if (needs_escape((unsigned char)c)) {
			return -EINVAL;
		}
		if (o + 1 >= outlen)
			return -ENOSPC;
		out[o++] = c;
	}
	if (o >= outlen)
		return -ENOSPC;
	out[o] = '\0';
	return (int)o;
}

/* ---- writing ----------------------------------------------------------------------------- */

static int sync_fd(int fd)
{
	while (fdatasync(fd) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

static int sync_dir_of(const char *path)
{
	char dir[PATH_MAX], *slash;
	int fd, rc = 0;

	snprintf(dir, sizeof dir, "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* Write one finished line (with its '\n') now, or into the open batch. */
static int emit_line(struct journal *self, const char *line, size_t len)
{
	int rc;

	if (self->in_batch) {
		if (self->batch_len + len > self->batch_cap) {
			size_t cap = self->batch_cap ? self->batch_cap * 2 : 4096;
			char *nb;

			while (cap < self->batch_len + len)
				cap *= 2;
			nb = realloc(self->batch, cap);
			if (!nb)
				return -ENOMEM;
			self->batch = nb;
			self->batch_cap = cap;
		}
		memcpy(self->batch + self->batch_len, line, len);
		self->batch_len += len;
		return 0;
	}
	rc = fdio_write_all(self->fd, line, len, NULL);
	if (rc == 0)
		rc = sync_fd(self->fd);
	if (rc < 0)
		log_error("journal %s: append: %s", self->path, strerror(-rc));
	return rc;
}

struct journal *journal_create(const char *run_dir, const char *prefix, char *err, size_t errlen)
{
	struct journal *self = NULL;
	char line[LINE_MAX_BYTES], erun[PATH_MAX * 3], epre[200], abs_run[PATH_MAX];
	uint64_t st = launch_proc_start_time(getpid());
	bool registered = false;
	int n, rc;

	if (!run_dir || !prefix || !*prefix || strchr(prefix, '/')) {
		snprintf(err, errlen, "journal: bad run dir or prefix");
		return NULL;
	}
	if (!realpath(run_dir, abs_run)) {
		snprintf(err, errlen, "journal: %s: %s", run_dir, strerror(errno));
		return NULL;
	}
	self = calloc(1, sizeof *self);
	if (!self) {
		snprintf(err, errlen, "journal: out of memory");
		return NULL;
	}
	self->fd = -1;
	snprintf(self->run_dir, sizeof self->run_dir, "%s", abs_run);
	snprintf(self->prefix, sizeof self->prefix, "%s", prefix);
	n = snprintf(self->path, sizeof self->path, "%s/%s", abs_run, JOURNAL_FILE);
	if (n < 0 || (size_t)n >= sizeof self->path ||
	    journal_escape(abs_run, erun, sizeof erun) < 0 || journal_escape(prefix, epre, sizeof epre) < 0) {
		snprintf(err, errlen, "journal: run dir or prefix too long");
		goto fail;
	}
	/* The journal and its header first, registered after: a registry entry always leads to a
	 * whole header (pid, run, prefix), so a run killed at any instant is either unregistered
	 * with nothing recorded or found by cleanup with its liveness known. A prefix clash still
	 * fails before any host state exists. */
	self->fd = open(self->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (self->fd < 0) {
		snprintf(err, errlen, "journal: create %s: %s", self->path, strerror(errno));
		goto fail;
	}
	n = snprintf(line, sizeof line, "%s %d %d %llu %s %s\n", JOURNAL_MAGIC, JOURNAL_VERSION,
		     (int)getpid(), (unsigned long long)st, erun, epre);
	if (n < 0 || (size_t)n >= sizeof line) {
		snprintf(err, errlen, "journal: header too long");
		goto fail;
	}
	rc = fdio_write_all(self->fd, line, (size_t)n, NULL);
	if (rc == 0)
		rc = sync_fd(self->fd);
	if (rc == 0)
		rc = sync_dir_of(self->path);
	if (rc < 0) {
		snprintf(err, errlen, "journal: write %s: %s", self->path, strerror(-rc));
		goto fail;
	}
	if (mkdir(registry_dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "journal: mkdir %s: %s", registry_dir, strerror(errno));
		goto fail;
	}
	n = snprintf(self->reg_path, sizeof self->reg_path, "%s/%s", registry_dir, prefix);
	if (n < 0 || (size_t)n >= sizeof self->reg_path) {
		snprintf(err, errlen, "journal: registry path too long");
		goto fail;
	}
	if (symlink(self->path, self->reg_path) < 0) {
		snprintf(err, errlen, "journal: register %s: %s", self->reg_path, strerror(errno));
		goto fail;
	}
	registered = true;
	return self;
fail:
	if (self->fd >= 0) {
		close(self->fd);
		unlink(self->path);
	}
	if (registered)
		unlink(self->reg_path);
	free(self);
	return NULL;
}

void journal_destroy(struct journal **self)
{
	if (!self || !*self)
		return;
	if ((*self)->in_batch)
		log_warn("journal %s: destroyed inside an uncommitted batch", (*self)->path);
	if ((*self)->fd >= 0)
		close((*self)->fd);
	free((*self)->batch);
	free(*self);
	*self = NULL;
}

static bool count_ok(enum journal_kind kind, int n)
{
	if ((unsigned)kind >= JOURNAL_KIND_COUNT || n < kind_min[kind])
		return false;
	return kind_max[kind] < 0 ? n <= JOURNAL_MAX_FIELDS : n <= kind_max[kind];
}

/* One record from n fields, each escaped. */
static int append_fields(struct journal *self, enum journal_kind kind, int n, const char *const *fields)
{
	char line[LINE_MAX_BYTES];
	size_t len;
	int rc;

	if (!count_ok(kind, n))
		return -EINVAL;
	len = (size_t)snprintf(line, sizeof line, "%s", kind_names[kind]);
	for (int i = 0; i < n; i++) {
		if (!fields[i] || !*fields[i])
			return -EINVAL;
		if (len + 2 >= sizeof line)
			return -E2BIG;
		line[len++] = ' ';
		rc = journal_escape(fields[i], line + len, sizeof line - len - 1);
		if (rc < 0)
			return -E2BIG;
		len += (size_t)rc;
	}
	line[len++] = '\n';
	return emit_line(self, line, len);
}

int journal_netns(struct journal *self, const char *name)
{
	const char *f[] = { name };

	return append_fields(self, JOURNAL_NETNS, 1, f);
}

int journal_sysctl(struct journal *self, const char *ns, const char *key, const char *old_value,
		   const char *new_value)
{
	const char *f[] = { ns ? ns : "-", key, old_value, new_value };

	return append_fields(self, JOURNAL_SYSCTL, new_value ? 4 : 3, f);
}

int journal_sysctl_claim(struct journal *self, const char *key, const char *old_value,
			 const char *new_value, const char *orig)
{
	const char *f[] = { "-", key, old_value, new_value, orig };

	return append_fields(self, JOURNAL_SYSCTL, 5, f);
}

int journal_sysctl_released(struct journal *self, const char *key)
{
	const char *f[] = { "-", key };

	if (self->ended)
		return 0; /* "end" says it already, and nothing may follow it */
	return append_fields(self, JOURNAL_SYSCTL_RELEASED, 2, f);
}

int journal_iptables(struct journal *self, const char *ns, const char *table, const char *chain,
		     int n, const char *const *rule)
{
	const char *f[JOURNAL_MAX_FIELDS];

	if (n < 1 || n + 3 > JOURNAL_MAX_FIELDS)
		return -EINVAL;
	f[0] = ns ? ns : "-";
	f[1] = table;
	f[2] = chain;
	for (int i = 0; i < n; i++)
		f[3 + i] = rule[i];
	return append_fields(self, JOURNAL_IPTABLES, n + 3, f);
}

int journal_proc(struct journal *self, pid_t pid, uint64_t start_time, const char *name)
{
	char p[24], s[24];
	const char *f[] = { p, s, name && *name ? name : "?" };

	snprintf(p, sizeof p, "%d", (int)pid);
	snprintf(s, sizeof s, "%llu", (unsigned long long)start_time);
	return append_fields(self, JOURNAL_PROC, 3, f);
}

int journal_cgroup(struct journal *self, const char *path)
{
	const char *f[] = { path };

	return append_fields(self, JOURNAL_CGROUP, 1, f);
}

int journal_batch_begin(struct journal *self)
{
	if (self->in_batch)
		return -EBUSY;
	self->in_batch = true;
	self->batch_len = 0;
	return 0;
}

int journal_batch_commit(struct journal *self)
{
	int rc = 0;

	if (!self->in_batch)
		return -EINVAL;
	self->in_batch = false;
	if (self->batch_len == 0)
		return 0;
	rc = fdio_write_all(self->fd, self->batch, self->batch_len, NULL);
	if (rc == 0)
		rc = sync_fd(self->fd);
	if (rc < 0)
		log_error("journal %s: batch append: %s", self->path, strerror(-rc));
	self->batch_len = 0;
	return rc;
}

int journal_mark_ended(struct journal *self)
{
	int rc;

	if (self->in_batch)
		return -EBUSY;
	rc = emit_line(self, "end\n", 4);
	if (rc == 0)
		self->ended = true;
	if (unlink(self->reg_path) < 0 && errno != ENOENT && rc == 0)
		rc = -errno;
	return rc;
}

const char *journal_path(const struct journal *self)
{
	return self->path;
}

/* ---- parsing ------------------------------------------------------------------------------ */

void journal_parsed_free(struct journal_parsed **p)
{
	if (!p || !*p)
		return;
	for (size_t i = 0; i < (*p)->n; i++) {
		for (int k = 0; k < (*p)->recs[i].nfields; k++)
			free((*p)->recs[i].fields[k]);
		free((*p)->recs[i].fields);
	}
	free((*p)->recs);
	free((*p)->run_dir);
	free((*p)->prefix);
	free(*p);
	*p = NULL;
}

/* Split line [s, s+len) on single spaces into unescaped fields. Returns the count or -EINVAL. */
static int split_fields(const char *s, size_t len, char **out, int max)
{
	int n = 0;
	size_t i = 0;

	if (len == 0)
		return -EINVAL;
	while (i <= len) {
		size_t j = i;
		char *f;
		int rc;

		while (j < len && s[j] != ' ')
			j++;
		if (j == i || n == max)
			goto bad;
		f = malloc(j - i + 1);
		if (!f)
			goto bad;
		rc = journal_unescape(s + i, j - i, f, j - i + 1);
		if (rc < 0) {
			free(f);
			goto bad;
		}
		out[n++] = f;
		i = j + 1;
	}
	return n;
bad:
	while (n > 0)
		free(out[--n]);
	return -EINVAL;
}

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;
	unsigned long long x;

	if (!*s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || *end)
		return false;
	*v = x;
	return true;
}

int journal_parse(const char *text, size_t len, struct journal_parsed **out, char *err,
		  size_t errlen)
{
	struct journal_parsed *p = NULL;
	char *f[JOURNAL_MAX_FIELDS + 1];
	size_t pos = 0, cap = 0;
	int line = 0, rc = -EINVAL, nf;

	*out = NULL;
	p = calloc(1, sizeof *p);
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	while (pos < len) {
		const char *s = text + pos, *nl = memchr(s, '\n', len - pos);
		size_t l;
		enum journal_kind kind = JOURNAL_KIND_COUNT;

		if (!nl)
			break; /* torn last line: its append never returned */
		l = (size_t)(nl - s);
		pos += l + 1;
		line++;
		if (memchr(s, '\0', l)) {
			snprintf(err, errlen, "line %d: NUL byte", line);
			goto out;
		}
		nf = split_fields(s, l, f, JOURNAL_MAX_FIELDS + 1);
		if (nf < 0) {
			snprintf(err, errlen, "line %d: malformed fields", line);
			goto out;
		}
		if (line == 1) {
			uint64_t ver, pid, st;
			bool ok = nf == 6 && !strcmp(f[0], JOURNAL_MAGIC) && parse_u64(f[1], &ver) &&
				  ver == JOURNAL_VERSION && parse_u64(f[2], &pid) && pid > 0 &&
				  pid <= INT_MAX && parse_u64(f[3], &st);

			if (ok) {
				p->pid = (pid_t)pid;
				p->start_time = st;
				p->run_dir = f[4];
				p->prefix = f[5];
				f[4] = f[5] = NULL;
			}
			for (int k = 0; k < nf; k++)
				free(f[k]);
			if (!ok) {
				snprintf(err, errlen, "line 1: not a stalenet journal v%d header",
					 JOURNAL_VERSION);
				goto out;
			}
			continue;
		}
		if (nf == 1 && !strcmp(f[0], "end")) {
			free(f[0]);
			p->ended = true;
			continue;
		}
		for (int k = 0; k < JOURNAL_KIND_COUNT; k++)
			if (!strcmp(f[0], kind_names[k]))
				kind = (enum journal_kind)k;
		if (kind == JOURNAL_KIND_COUNT || !count_ok(kind, nf - 1)) {
			snprintf(err, errlen, "line %d: %s '%s'", line,
				 kind == JOURNAL_KIND_COUNT ? "unknown record" : "wrong field count for",
				 f[0]);
			for (int k = 0; k < nf; k++)
				free(f[k]);
			goto out;
		}
		if (kind == JOURNAL_PROC) {
			uint64_t pid, st;

			if (!parse_u64(f[1], &pid) || pid == 0 || pid > INT_MAX || !parse_u64(f[2], &st)) {
				snprintf(err, errlen, "line %d: bad pid or start time", line);
				for (int k = 0; k < nf; k++)
					free(f[k]);
				goto out;
			}
		}
		if (p->n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct journal_record *nr = realloc(p->recs, ncap * sizeof *nr);

			if (!nr) {
				for (int k = 0; k < nf; k++)
					free(f[k]);
				rc = -ENOMEM;
				snprintf(err, errlen, "out of memory");
				goto out;
			}
			p->recs = nr;
			cap = ncap;
		}
		free(f[0]);
		p->recs[p->n].kind = kind;
		p->recs[p->n].line = line;
		p->recs[p->n].nfields = nf - 1;
		p->recs[p->n].fields = malloc((size_t)(nf - 1) * sizeof(char *));
		if (!p->recs[p->n].fields) {
			for (int k = 1; k < nf; k++)
				free(f[k]);
			rc = -ENOMEM;
			goto out;
		}
		memcpy(p->recs[p->n].fields, f + 1, (size_t)(nf - 1) * sizeof(char *));
		p->n++;
		/* "end" counts only as the last record: anything after it reopens the run. */
		p->ended = false;
	}
	if (line == 0) {
		/* No whole header line: the run was stopped while creating its journal, before
		 * anything it could record existed. */
		snprintf(err, errlen, "line 1: empty journal");
		rc = -ENODATA;
		goto out;
	}
	rc = 0;
out:
	if (rc == 0)
		*out = p;
	else
		journal_parsed_free(&p);
	return rc;
}

int journal_read_fd(int fd, char **text, size_t *len)
{
	char *buf = NULL;
	size_t n_read = 0, cap = 0;

	*text = NULL;
	*len = 0;
	for (;;) {
		ssize_t n;

		if (n_read == cap) {
			char *nb = realloc(buf, cap ? cap * 2 : 65536);

			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap = cap ? cap * 2 : 65536;
		}
		n = read(fd, buf + n_read, cap - n_read);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			free(buf);
			return -e;
		}
		if (n == 0)
			break;
		n_read += (size_t)n;
	}
	*text = buf;
	*len = n_read;
	return 0;
}

int journal_load(const char *path, struct journal_parsed **out, char *err, size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	rc = journal_read_fd(fd, &buf, &len);
	if (rc == 0)
		rc = journal_parse(buf, len, out, err, errlen);
	else if (rc != -ENOMEM)
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
	close(fd);
	free(buf);
	return rc;
}

int journal_replay(const struct journal_parsed *p, const struct journal_ops *ops, int *n_failed)
{
	int first = 0, failed = 0;

	for (size_t i = p->n; i-- > 0;) {
		int rc = ops->undo(ops->arg, &p->recs[i]);

		if (rc < 0) {
			failed++;
			if (first == 0)
				first = rc;
		}
	}
	if (n_failed)
		*n_failed = failed;
	return first;
}
