/* orchestrator/resummary: see resummary.h.
 *
 * Design: the summary's definitions live in collectors/summary alone, and so does its
 * tolerance of older traces (a missing column empties exactly the fields computed from it);
 * this module never computes a field. It only checks that DIR holds a run, so that a mistyped
 * directory is a usage error rather than a header-only summary.csv, and turns what each run's
 * traces lacked into notes for the user. */
#include "orchestrator/resummary.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectors/fleet_summary.h"
#include "collectors/summary.h"

struct ctx {
	struct resummary_report *rep;
	const char *single; /* DIR's own name when it is a run directory */
};

static void note(struct resummary_report *rep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct resummary_report *rep, const char *fmt, ...)
{
	char *notes = rep->notes;
	size_t used = strlen(notes), room = sizeof rep->notes;
	va_list ap;
	int n;

	rep->adapted++;
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

/* summary_run_fn: one note per trace of the run that lacked columns, "RUN/what". */
static void on_run(void *arg, const char *name, const struct summary_row *row)
{
	struct ctx *c = arg;
	char lines[1024], *save = NULL;

	if (summary_lacks_describe(row, lines, sizeof lines) == 0)
		return;
	for (char *l = strtok_r(lines, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		note(c->rep, "%s/%s", name ? name : c->single, l);
}

static bool has_meta(const char *dir)
{
	char path[PATH_MAX];

	if ((size_t)snprintf(path, sizeof path, "%s/meta.json", dir) >= sizeof path)
		return false;
	return access(path, F_OK) == 0;
}

/* Whether abs is a run directory or has one as a subdirectory. */
static int holds_run(const char *abs, char *err, size_t errlen)
{
	char sub[PATH_MAX];
	struct dirent *de;
	DIR *d;
	bool any;
	int rc;

	if (has_meta(abs))
		return 1;
	d = opendir(abs);
	if (!d) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", abs, strerror(errno));
		return rc;
	}
	for (any = false; !any && (de = readdir(d));)
		any = de->d_name[0] != '.' &&
		      (size_t)snprintf(sub, sizeof sub, "%s/%s", abs, de->d_name) < sizeof sub &&
		      has_meta(sub);
	closedir(d);
	return any;
}

int resummary_dir(const char *dir, struct resummary_report *rep, char *err, size_t errlen)
{
	char abs[PATH_MAX];
	const char *base;
	struct ctx c = { .rep = rep };
	int rc, frc;

	memset(rep, 0, sizeof *rep);
	if (!realpath(dir, abs)) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
		return rc;
	}
	rc = holds_run(abs, err, errlen);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		snprintf(err, errlen, "%s: no run in it (a run directory holds meta.json; a sweep directory, "
			 "runs in its subdirectories)", abs);
		return -ENOENT;
	}
	base = strrchr(abs, '/');
	c.single = base && base[1] ? base + 1 : abs;
	rc = summary_rebuild_each(abs, on_run, &c, err, errlen);
	if (rc >= 0)
		rep->runs = rc;
	/* fleet runs also get fleet_summary.csv (none written when there is no fleet run) */
	if (rc >= 0 && (frc = fleet_summary_rebuild(abs, err, errlen)) < 0)
		rc = frc;
	return rc;
}
