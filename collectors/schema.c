/* collectors/schema: see schema.h.
 *
 * Each file kind is a table of (column, type). Types are deliberately narrow: counters are
 * unsigned decimal integers, fractions lie in [0, 1], directions and verdicts are closed sets,
 * and a column may be empty only where docs/traces.md says "empty when unknown". A reader of a
 * checked run never has to guess. */
#include "collectors/schema.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/table.h"

enum coltype {
	T_F,      /* finite decimal number */
	T_F_E,    /* finite decimal number, or empty */
	T_FPOS,   /* finite, >= 0 */
	T_FPOS_E, /* finite >= 0, or empty */
	T_FRAC,   /* in [0, 1] */
	T_FRAC_E, /* in [0, 1], or empty */
	T_U,      /* unsigned decimal integer */
	T_U_E,    /* unsigned integer or empty */
	T_S,      /* non-empty text */
	T_S_E,    /* text, may be empty */
	T_DIR,    /* up | down */
	T_CDIR,   /* up | down | rtt (linkcheck) */
	T_VERDICT, /* ok | off | late (lib/link_verdict's tolerances) */
	T_MEMBER  /* self | final | left | crashed | silent | late (ensemble.csv) */
};

struct colspec {
	const char *name;
	enum coltype type;
};

struct filespec {
	const char *kind;
	const char *file;   /* relative to the run dir; NULL for nodes/ *.csv */
	const char *header;
	bool has_t;         /* column 0 is t_s and must be non-decreasing */
	const char *group;  /* t_s is monotone per value of this column (NULL: whole file) */
	const char *older_of; /* an older schema of this kind's file: checked when its header is found */
	struct colspec cols[12];
};

static const struct filespec SPECS[] = {
	{ "node", NULL, TRACE_HEADER_NODE, true, "node", NULL,
	  { { "t_s", T_FPOS }, { "node", T_S }, { "step", T_U }, { "compute_s", T_FPOS },
	    { "wait_s", T_FPOS }, { "staleness", T_U_E }, { "model_version", T_U_E },
	    { "loss", T_FPOS_E }, { "bytes_tx", T_U }, { "bytes_rx", T_U }, { "bad_frames", T_U } } },
	{ "server", NULL, TRACE_HEADER_SERVER, true, "node", NULL,
	  { { "t_s", T_FPOS }, { "node", T_S }, { "worker", T_S }, { "worker_step", T_U },
	    { "staleness", T_U_E }, { "model_version", T_U }, { "updates", T_U }, { "dropped", T_U },
	    { "live", T_U }, { "waiting", T_U } } },
	{ "eval", "eval.csv", TRACE_HEADER_EVAL, true, "node", NULL,
	  { { "t_s", T_FPOS }, { "node", T_S }, { "updates", T_U }, { "epoch", T_FPOS },
	    { "samples", T_U }, { "test_accuracy", T_FRAC }, { "test_loss", T_FPOS },
	    { "train_loss", T_FPOS_E } } },
	{ "progress", "progress.csv", TRACE_HEADER_PROGRESS, true, NULL, NULL,
	  { { "t_s", T_FPOS }, { "alive", T_U }, { "waiting", T_U }, { "min_step", T_U },
	    { "median_step", T_FPOS }, { "max_step", T_U }, { "runq_wait_frac", T_FRAC_E },
	    { "host_cpu_frac", T_FRAC_E } } },
	{ "progress_v1", "progress.csv", TRACE_HEADER_PROGRESS_V1, true, NULL, "progress",
	  { { "t_s", T_FPOS }, { "alive", T_U }, { "waiting", T_U }, { "min_step", T_U },
	    { "median_step", T_FPOS }, { "max_step", T_U } } },
	{ "links", "links.csv", TRACE_HEADER_LINKS, true, "node", NULL,
	  { { "t_s", T_FPOS }, { "node", T_S }, { "direction", T_DIR }, { "packets", T_U },
	    { "bytes", T_U }, { "dropped", T_U }, { "backlog_pkts", T_U }, { "held_pkts", T_U },
	    { "late_mean_ms", T_F_E }, { "late_p99_ms", T_FPOS_E }, { "late_max_ms", T_FPOS_E } } },
	{ "links_v1", "links.csv", TRACE_HEADER_LINKS_V1, true, "node", "links",
	  { { "t_s", T_FPOS }, { "node", T_S }, { "direction", T_DIR }, { "packets", T_U },
	    { "bytes", T_U }, { "dropped", T_U }, { "backlog_pkts", T_U }, { "held_pkts", T_U } } },
	{ "linkcheck", "linkcheck.csv", TRACE_HEADER_LINKCHECK, false, NULL, NULL,
	  { { "node", T_S }, { "direction", T_CDIR }, { "probes", T_U }, { "cfg_delay_ms", T_FPOS },
	    { "cfg_jitter_ms", T_FPOS }, { "cfg_loss", T_FRAC }, { "rtt_mean_ms", T_FPOS_E },
	    { "rtt_sd_ms", T_FPOS_E }, { "loss", T_FRAC }, { "late_p99_ms", T_FPOS_E },
	    { "verdict", T_VERDICT } } },
	{ "linkcheck_v1", "linkcheck.csv", TRACE_HEADER_LINKCHECK_V1, false, NULL, "linkcheck",
	  { { "node", T_S }, { "direction", T_CDIR }, { "probes", T_U }, { "cfg_delay_ms", T_FPOS },
	    { "cfg_jitter_ms", T_FPOS }, { "cfg_loss", T_FRAC }, { "rtt_mean_ms", T_FPOS_E },
	    { "rtt_sd_ms", T_FPOS_E }, { "loss", T_FRAC }, { "verdict", T_VERDICT } } },
	{ "events", "events.csv", TRACE_HEADER_EVENTS, true, NULL, NULL,
	  { { "t_s", T_FPOS }, { "event", T_S }, { "target", T_S_E }, { "detail", T_S_E } } },
	{ "partition", "partition.csv", TRACE_HEADER_PARTITION, false, NULL, NULL,
	  { { "node", T_S }, { "class", T_U }, { "samples", T_U } } },
	{ "fleet", "fleet.csv", TRACE_HEADER_FLEET, true, NULL, NULL,
	  { { "t_s", T_FPOS }, { "device", T_S }, { "version", T_U }, { "strategy", T_S },
	    { "bytes_tx", T_U }, { "bytes_stored", T_U }, { "encode_s", T_FPOS }, { "apply_s", T_FPOS },
	    { "verify_ok", T_U }, { "registry_lag_s", T_FPOS }, { "chain_len", T_U } } },
	{ "fleet_repair", "fleet_repair.csv", TRACE_HEADER_FLEET_REPAIR, true, NULL, NULL,
	  { { "t_s", T_FPOS }, { "device", T_S }, { "holders", T_U }, { "offered", T_U },
	    { "pulled", T_U }, { "bytes_summary", T_U }, { "bytes_pulled", T_U }, { "rejected", T_U },
	    { "divergent", T_U }, { "latest", T_U }, { "repair_s", T_FPOS } } },
	{ "recover", "recover.csv", TRACE_HEADER_RECOVER, false, NULL, NULL,
	  { { "device", T_S }, { "version", T_U }, { "strategy", T_S }, { "chain", T_U },
	    { "recover_s", T_FPOS }, { "verify_ok", T_U } } },
	{ "ensemble", "ensemble.csv", TRACE_HEADER_ENSEMBLE, true, NULL, NULL,
	  { { "t_s", T_FPOS }, { "node", T_S }, { "member", T_S }, { "clock", T_U_E },
	    { "state", T_MEMBER } } },
	{ "workers", "workers.csv", TRACE_HEADER_WORKERS, false, NULL, NULL,
	  { { "node", T_S }, { "final_step", T_U }, { "compute_s", T_FPOS }, { "wait_s", T_FPOS },
	    { "staleness_mean", T_FPOS_E }, { "staleness_max", T_U_E } } },
};
#define NSPECS (sizeof SPECS / sizeof SPECS[0])

static const char *type_name(enum coltype t)
{
	switch (t) {
	case T_F: return "a number";
	case T_FPOS: return "a number >= 0";
	case T_FPOS_E: return "a number >= 0 or empty";
	case T_FRAC: return "a fraction in [0,1]";
	case T_FRAC_E: return "a fraction in [0,1] or empty";
	case T_U: return "an unsigned integer";
	case T_U_E: return "an unsigned integer or empty";
	case T_S: return "non-empty text";
	case T_S_E: return "text";
	case T_DIR: return "up or down";
	case T_CDIR: return "up, down or rtt";
	case T_F_E: return "a number or empty";
	case T_VERDICT: return "ok, off or late";
	case T_MEMBER: return "self, final, left, crashed, silent or late";
	}
	return "?";
}

static const char *const MEMBER_STATES[] = { "self", "final", "left", "crashed", "silent", "late" };

static bool is_uint(const char *s)
{
	if (!*s || strlen(s) > 19)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

static bool field_ok(const struct table *t, size_t r, size_t c, enum coltype type)
{
	const char *s = table_get(t, r, c);
	double v = 0;

	switch (type) {
	case T_F_E:
		if (!*s)
			return true;
		/* fall through */
	case T_F:
		return table_double(t, r, c, &v) == 0;
	case T_FPOS_E:
		if (!*s)
			return true;
		/* fall through */
	case T_FPOS:
		return table_double(t, r, c, &v) == 0 && v >= 0;
	case T_FRAC_E:
		if (!*s)
			return true;
		/* fall through */
	case T_FRAC:
		return table_double(t, r, c, &v) == 0 && v >= 0 && v <= 1;
	case T_U_E:
		return !*s || is_uint(s);
	case T_U:
		return is_uint(s);
	case T_S:
		return *s != '\0';
	case T_S_E:
		return true;
	case T_DIR:
		return strcmp(s, "up") == 0 || strcmp(s, "down") == 0;
	case T_CDIR:
		return strcmp(s, "up") == 0 || strcmp(s, "down") == 0 || strcmp(s, "rtt") == 0;
	case T_VERDICT:
		return strcmp(s, "ok") == 0 || strcmp(s, "off") == 0 || strcmp(s, "late") == 0;
	case T_MEMBER:
		for (size_t i = 0; i < sizeof MEMBER_STATES / sizeof MEMBER_STATES[0]; i++)
			if (!strcmp(s, MEMBER_STATES[i]))
				return true;
		return false;
	}
	return false;
}

struct last_t {
	char name[64];
	double t;
};

static int check_table(const char *path, const struct filespec *spec, const char *expect_node,
		       char *err, size_t errlen)
{
	struct table *t = NULL;
	struct last_t *last = NULL;
	size_t nlast = 0, ncols = 0;
	char hdr[512];
	bool missing = false;
	int group = -1, rc = 0;

	t = table_load(path, &missing, err, errlen);
	if (!t) {
		rc = missing ? -ENOENT : -EINVAL;
		goto out;
	}
	table_header(t, hdr, sizeof hdr);
	/* A file of an older schema of this kind is checked against that schema. */
	for (size_t i = 0; i < NSPECS && strcmp(hdr, spec->header) != 0; i++)
		if (SPECS[i].older_of && strcmp(SPECS[i].older_of, spec->kind) == 0 &&
		    strcmp(hdr, SPECS[i].header) == 0)
			spec = &SPECS[i];
	if (strcmp(hdr, spec->header) != 0) {
		snprintf(err, errlen, "%s:1: header is \"%s\", expected \"%s\"", path, hdr, spec->header);
		rc = -EINVAL;
		goto out;
	}
	while (ncols < 12 && spec->cols[ncols].name)
		ncols++;
	if (spec->group)
		group = table_col(t, spec->group);
	last = calloc(table_rows(t) + 1, sizeof *last);
	if (!last) {
		rc = -ENOMEM;
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	for (size_t r = 0; r < table_rows(t); r++) {
		for (size_t c = 0; c < ncols; c++) {
			if (!field_ok(t, r, c, spec->cols[c].type)) {
				snprintf(err, errlen, "%s:%zu: column %s: \"%s\" is not %s", path,
					 table_line(t, r), spec->cols[c].name, table_get(t, r, c),
					 type_name(spec->cols[c].type));
				rc = -EINVAL;
				goto out;
			}
		}
		if (expect_node && strcmp(table_get(t, r, 1), expect_node) != 0) {
			snprintf(err, errlen, "%s:%zu: column node: \"%s\" in the file of node %s", path,
				 table_line(t, r), table_get(t, r, 1), expect_node);
			rc = -EINVAL;
			goto out;
		}
		if (!spec->has_t)
			continue;
		const char *g = group >= 0 ? table_get(t, r, (size_t)group) : "";
		double tv = table_double_or(t, r, 0, 0);
		size_t i;

		for (i = 0; i < nlast; i++)
			if (strncmp(last[i].name, g, sizeof last[i].name - 1) == 0)
				break;
		if (i == nlast) {
			snprintf(last[i].name, sizeof last[i].name, "%.63s", g);
			last[i].t = tv;
			nlast++;
		} else if (tv < last[i].t) {
			snprintf(err, errlen, "%s:%zu: column t_s: %s goes back in time (previous %g%s%s)",
				 path, table_line(t, r), table_get(t, r, 0), last[i].t,
				 *g ? " for node " : "", g);
			rc = -EINVAL;
			goto out;
		} else {
			last[i].t = tv;
		}
	}
out:
	free(last);
	table_destroy(&t);
	return rc;
}

static const struct filespec *find_spec(const char *kind)
{
	for (size_t i = 0; i < NSPECS; i++)
		if (strcmp(SPECS[i].kind, kind) == 0)
			return &SPECS[i];
	return NULL;
}

int trace_schema_check_file(const char *path, const char *kind, char *err, size_t errlen)
{
	const struct filespec *spec = find_spec(kind);

	if (!spec) {
		snprintf(err, errlen, "unknown trace kind \"%s\"", kind);
		return -EINVAL;
	}
	return check_table(path, spec, NULL, err, errlen);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A parameter server's nodes/NAME.csv has the server header; every other one the node header. */
static const struct filespec *node_spec(const char *path)
{
	static const char hdr[] = TRACE_HEADER_SERVER;
	char line[sizeof hdr + 2] = "";
	FILE *f = fopen(path, "re");

	if (f) {
		if (!fgets(line, sizeof line, f))
			line[0] = '\0';
		fclose(f);
	}
	line[strcspn(line, "\r\n")] = '\0';
	return strcmp(line, hdr) == 0 ? find_spec("server") : &SPECS[0];
}

/* nodes/ *.csv in name order (so the first error reported is stable). */
static int check_nodes(const char *run_dir, size_t *found, char *err, size_t errlen)
{
	char path[4096], node[256];
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = NULL;
	int rc = 0;

	snprintf(path, sizeof path, "%s/nodes", run_dir);
	d = opendir(path);
	if (!d) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (len <= 4 || strcmp(de->d_name + len - 4, ".csv") != 0)
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof *names);
			if (!nn) {
				rc = -ENOMEM;
				goto out;
			}
			names = nn;
		}
		if (!(names[n] = strdup(de->d_name))) {
			rc = -ENOMEM;
			goto out;
		}
		n++;
	}
	if (n)
		qsort(names, n, sizeof *names, name_cmp);
	for (size_t i = 0; i < n && rc == 0; i++) {
		size_t len = strlen(names[i]) - 4;

		snprintf(node, sizeof node, "%.*s", (int)(len < 255 ? len : 255), names[i]);
		snprintf(path, sizeof path, "%s/nodes/%s", run_dir, names[i]);
		rc = check_table(path, node_spec(path), node, err, errlen);
		(*found)++;
	}
out:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "%s/nodes: out of memory", run_dir);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return rc;
}

int trace_schema_check_dir(const char *run_dir, char *err, size_t errlen)
{
	char path[4096];
	size_t found = 0;
	int rc;

	rc = check_nodes(run_dir, &found, err, errlen);
	if (rc < 0)
		return rc;
	for (size_t i = 1; i < NSPECS; i++) {
		if (!SPECS[i].file || SPECS[i].older_of)
			continue;
		snprintf(path, sizeof path, "%s/%s", run_dir, SPECS[i].file);
		rc = check_table(path, &SPECS[i], NULL, err, errlen);
		if (rc == -ENOENT)
			continue;
		if (rc < 0)
			return rc;
		found++;
	}
	if (found == 0) {
		snprintf(err, errlen, "%s: no trace files (nodes/NAME.csv, eval.csv, ...)", run_dir);
		return -ENOENT;
	}
	return 0;
}
