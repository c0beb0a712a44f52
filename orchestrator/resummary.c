/* orchestrator/resummary: see resummary.h.
 *
 * Design: the summary's definitions live in collectors/summary alone; this module never computes
 * a field. It only decides which runs a directory holds and presents older traces to the summary
 * in today's schema (missing columns added empty, headers only looked at, rows copied through),
 * in a shadow directory inside DIR so the final rename is atomic and DIR's own files are never
 * written, except summary.csv. */
#include "orchestrator/resummary.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectors/summary.h"

#define MAX_COLS 256

struct ctx {
	struct resummary_report *rep;
	char *err;
	size_t errlen;
};

static void note(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct ctx *c, const char *fmt, ...)
{
	char *notes = c->rep->notes;
	size_t used = strlen(notes), room = sizeof c->rep->notes;
	va_list ap;
	int n;

	c->rep->adapted++;
	if (used + 5 >= room)
		return;
	if (used)
		notes[used++] = '\n';
	va_start(ap, fmt);
	n = vsnprintf(notes + used, room - used, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n >= room - used)
		strcpy(notes + room - 4, "...");
}

static bool has_meta(const char *dir)
{
	char path[PATH_MAX];

	if ((size_t)snprintf(path, sizeof path, "%s/meta.json", dir) >= sizeof path)
		return false;
	return access(path, R_OK) == 0;
}

/* The column names of the first line of path (split at ','); returns the count, 0 for an empty
 * file, or -errno. cols points into *line (freed by the caller). */
static int read_header(const char *path, char **line, char **cols)
{
	FILE *f = fopen(path, "re");
	size_t cap = 0;
	ssize_t n;
	int k = 0;

	*line = NULL;
	if (!f)
		return -errno;
	n = getline(line, &cap, f);
	fclose(f);
	if (n <= 0)
		return 0;
	(*line)[strcspn(*line, "\r\n")] = '\0';
	for (char *p = *line; p && k < MAX_COLS; k++) {
		cols[k] = p;
		p = strchr(p, ',');
		if (p)
			*p++ = '\0';
	}
	return k;
}

static bool has_col(char *const *cols, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(cols[i], name))
			return true;
	return false;
}

/* Copy src to dst with the columns named in hide renamed (so the summary does not find them)
 * and the columns add[0..n_add) appended, empty on every complete row. A last line without its
 * newline (a run killed mid-write) is copied as it is. */
static int write_adapted(const char *src, const char *dst, const char *const *add, size_t n_add,
			 const char *const *hide, size_t n_hide)
{
	FILE *in = fopen(src, "re"), *out = NULL;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	bool first = true;
	int rc = 0;

	if (!in)
		return -errno;
	out = fopen(dst, "wxe");
	if (!out) {
		rc = -errno;
		goto out;
	}
	while ((n = getline(&line, &cap, in)) > 0) {
		bool complete = line[n - 1] == '\n';

		if (complete)
			line[--n] = '\0';
		if (complete && n && line[n - 1] == '\r')
			line[--n] = '\0';
		if (first) {
			char *p = line;

			for (int k = 0; p; k++) {
				char *comma = strchr(p, ',');
				size_t len = comma ? (size_t)(comma - p) : strlen(p);
				bool hidden = false;

				for (size_t h = 0; h < n_hide; h++)
					hidden |= strlen(hide[h]) == len && !strncmp(p, hide[h], len);
				fprintf(out, "%s%s%.*s", k ? "," : "", hidden ? "unused_" : "", (int)len, p);
				p = comma ? comma + 1 : NULL;
			}
			for (size_t a = 0; a < n_add; a++)
				fprintf(out, ",%s", add[a]);
			fputc('\n', out);
			first = false;
			continue;
		}
		fputs(line, out);
		if (!complete)
			break;
		for (size_t a = 0; a < n_add; a++)
			fputc(',', out);
		fputc('\n', out);
	}
	if (ferror(in))
		rc = -EIO;
out:
	if (out && fclose(out) != 0 && rc == 0)
		rc = -errno;
	fclose(in);
	free(line);
	return rc;
}

/* "a, b" of the names in v[0..n). */
static const char *join(const char *const *v, size_t n, char *buf, size_t len)
{
	size_t pos = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && pos < len; i++)
		pos += (size_t)snprintf(buf + pos, len - pos, "%s%s", i ? ", " : "", v[i]);
	return buf;
}

static const char *const node_want[] = { "step", "compute_s", "wait_s", "staleness", "bytes_tx", "bytes_rx",
					 "bad_frames" };
#define N_NODE_WANT (sizeof node_want / sizeof *node_want)

/* Which of node_want the node trace at path lacks (bit i for node_want[i]); 0 for a parameter
 * server's update trace (it has `worker`; the summary does not read it) or an empty file. */
static unsigned node_missing(const char *path, const char *name, unsigned *present)
{
	char *cols[MAX_COLS], *line = NULL;
	int ncols = read_header(path, &line, cols);
	unsigned miss = 0;

	*present = 0;
	if (ncols > 0 && !(!strncmp(name, "server", 6) && has_col(cols, ncols, "worker")))
		for (size_t i = 0; i < N_NODE_WANT; i++) {
			if (has_col(cols, ncols, node_want[i]))
				*present |= 1u << i;
			else
				miss |= 1u << i;
		}
	free(line);
	return miss;
}

static bool is_csv_name(const char *name)
{
	size_t len = strlen(name);

	return len > 4 && !strcmp(name + len - 4, ".csv");
}

/* The node traces of a run. A column that one of them lacks is read as empty in all of them
 * (with wait_s and compute_s as a pair), so no summary field is computed over a subset of the
 * nodes. */
static int shadow_nodes(struct ctx *c, const char *src, const char *dst, const char *label)
{
	char nsrc[PATH_MAX], ndst[PATH_MAX], list[256];
	const char *add[N_NODE_WANT], *hide[N_NODE_WANT];
	unsigned blank = 0, present;
	struct dirent *ne;
	DIR *nd = opendir(src);
	int rc = 0, n_files = 0;

	if (!nd)
		return -errno;
	if (mkdir(dst, 0700) < 0) {
		rc = -errno;
		goto out;
	}
	while ((ne = readdir(nd)))
		if (ne->d_name[0] != '.' && is_csv_name(ne->d_name) &&
		    (size_t)snprintf(nsrc, sizeof nsrc, "%s/%s", src, ne->d_name) < sizeof nsrc)
			blank |= node_missing(nsrc, ne->d_name, &present);
	if (blank & (3u << 1)) /* compute_s (bit 1), wait_s (bit 2) */
		blank |= 3u << 1;
	rewinddir(nd);
	while (rc == 0 && (ne = readdir(nd))) {
		size_t n_add = 0, n_hide = 0;

		if (ne->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(nsrc, sizeof nsrc, "%s/%s", src, ne->d_name) >= sizeof nsrc ||
		    (size_t)snprintf(ndst, sizeof ndst, "%s/%s", dst, ne->d_name) >= sizeof ndst) {
			rc = -ENAMETOOLONG;
			break;
		}
		if (blank && is_csv_name(ne->d_name) && (node_missing(nsrc, ne->d_name, &present) || present)) {
			for (size_t i = 0; i < N_NODE_WANT; i++) {
				if (!(blank & (1u << i)))
					continue;
				add[n_add++] = node_want[i];
				if (present & (1u << i))
					hide[n_hide++] = node_want[i];
			}
			rc = write_adapted(nsrc, ndst, add, n_add, hide, n_hide);
			n_files++;
		} else if (symlink(nsrc, ndst) < 0) {
			rc = -errno;
		}
	}
	if (rc == 0 && blank) {
		size_t n = 0;

		for (size_t i = 0; i < N_NODE_WANT; i++)
			if (blank & (1u << i))
				add[n++] = node_want[i];
		note(c, "%s/nodes: %s missing from a node trace (read as empty in all %d)", label,
		     join(add, n, list, sizeof list), n_files);
	}
out:
	closedir(nd);
	return rc;
}

/* eval.csv or links.csv: without one of its essential columns the file is left out; eval.csv's
 * updates (not a summary field) is added empty. */
static int run_trace(struct ctx *c, const char *src, const char *dst, const char *label, const char *name)
{
	static const char *const eval_need[] = { "t_s", "node", "test_accuracy", NULL };
	static const char *const links_need[] = { "node", "direction", "dropped", NULL };
	bool eval = !strcmp(name, "eval.csv");
	const char *const *need = eval ? eval_need : links_need;
	const char *missing[4], *add[1] = { "updates" };
	size_t n_missing = 0;
	char *cols[MAX_COLS], *line = NULL, list[128];
	int ncols = read_header(src, &line, cols), rc;

	if (ncols <= 0) {
		free(line);
		return symlink(src, dst) < 0 ? -errno : 0;
	}
	for (size_t i = 0; need[i]; i++)
		if (!has_col(cols, ncols, need[i]))
			missing[n_missing++] = need[i];
	bool no_updates = eval && !has_col(cols, ncols, "updates");
	free(line);
	if (n_missing) {
		note(c, "%s/%s: lacks %s (left out: %s empty)", label, name, join(missing, n_missing, list, sizeof list),
		     eval ? "accuracy fields" : "link_drops");
		return 0;
	}
	if (!no_updates)
		return symlink(src, dst) < 0 ? -errno : 0;
	rc = write_adapted(src, dst, add, 1, NULL, 0);
	if (rc == 0)
		note(c, "%s/%s: lacks updates (read as empty)", label, name);
	return rc;
}

/* Shadow of the run directory run (absolute) at shadow: every entry a symlink but the traces
 * the summary reads, which go through node_trace / run_trace. */
static int shadow_run(struct ctx *c, const char *run, const char *shadow, const char *label)
{
	char src[PATH_MAX], dst[PATH_MAX];
	DIR *d = NULL;
	struct dirent *de;
	int rc = 0;

	if (!(d = opendir(run)) || mkdir(shadow, 0700) < 0) {
		rc = -errno;
		snprintf(c->err, c->errlen, "%s: %s", d ? shadow : run, strerror(-rc));
		goto out;
	}
	while (rc == 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(src, sizeof src, "%s/%s", run, de->d_name) >= sizeof src ||
		    (size_t)snprintf(dst, sizeof dst, "%s/%s", shadow, de->d_name) >= sizeof dst) {
			rc = -ENAMETOOLONG;
			break;
		}
		if (!strcmp(de->d_name, "eval.csv") || !strcmp(de->d_name, "links.csv"))
			rc = run_trace(c, src, dst, label, de->d_name);
		else if (!strcmp(de->d_name, "nodes") && de->d_type != DT_REG && de->d_type != DT_LNK)
			rc = shadow_nodes(c, src, dst, label);
		else if (symlink(src, dst) < 0)
			rc = -errno;
		if (rc < 0)
			snprintf(c->err, c->errlen, "%s: %s", src, strerror(-rc));
	}
out:
	if (d)
		closedir(d);
	return rc;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* In err, name the real directory instead of the shadow (errors from the summary name files). */
static void unshadow(char *err, size_t errlen, const char *shadow, const char *real)
{
	char *at = strstr(err, shadow), tail[1024];

	if (!at)
		return;
	snprintf(tail, sizeof tail, "%s", at + strlen(shadow));
	snprintf(at, errlen - (size_t)(at - err), "%s%s", real, tail);
}

int resummary_dir(const char *dir, struct resummary_report *rep, char *err, size_t errlen)
{
	struct ctx c = { .rep = rep, .err = err, .errlen = errlen };
	char abs[PATH_MAX], shadow[PATH_MAX], src[PATH_MAX + 16], dst[PATH_MAX + 16];
	bool made = false, single;
	DIR *d = NULL;
	struct dirent *de;
	int rc = 0, n = 0;

	memset(rep, 0, sizeof *rep);
	if (!realpath(dir, abs)) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
		return rc;
	}
	if ((size_t)snprintf(shadow, sizeof shadow, "%s/.summary-XXXXXX", abs) >= sizeof shadow - 300) {
		snprintf(err, errlen, "%s: path too long", abs);
		return -ENAMETOOLONG;
	}
	if (!(d = opendir(abs)) || !mkdtemp(shadow)) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", abs, strerror(-rc));
		goto out;
	}
	made = true;
	single = has_meta(abs);
	if (single) {
		/* A run directory: the summary of its one run, beside its traces (as `run` does). */
		snprintf(dst, sizeof dst, "%s/run", shadow);
		const char *base = strrchr(abs, '/');
		rc = shadow_run(&c, abs, dst, base && base[1] ? base + 1 : abs);
		n = rc == 0;
	}
	while (!single && rc == 0 && (de = readdir(d))) {
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(src, sizeof src, "%s/%s", abs, de->d_name) >= sizeof src ||
		    (size_t)snprintf(dst, sizeof dst, "%s/%s", shadow, de->d_name) >= sizeof dst ||
		    stat(src, &st) < 0 || !S_ISDIR(st.st_mode) || !has_meta(src))
			continue;
		rc = shadow_run(&c, src, dst, de->d_name);
		n += rc == 0;
	}
	if (rc < 0)
		goto out;
	if (n == 0) {
		rc = -ENOENT;
		snprintf(err, errlen, "%s: no run in it (a run directory holds meta.json; a sweep directory, "
			 "runs in its subdirectories)", abs);
		goto out;
	}
	rc = summary_rebuild(shadow, err, errlen);
	if (rc < 0) {
		if (single) {
			snprintf(dst, sizeof dst, "%s/run", shadow);
			unshadow(err, errlen, dst, abs);
		} else {
			unshadow(err, errlen, shadow, abs);
		}
		goto out;
	}
	rep->runs = rc;
	snprintf(src, sizeof src, "%s/summary.csv", shadow);
	snprintf(dst, sizeof dst, "%s/summary.csv", abs);
	if (rename(src, dst) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", dst, strerror(-rc));
	}
out:
	if (d)
		closedir(d);
	if (made)
		nftw(shadow, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	return rc;
}
