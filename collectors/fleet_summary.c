/* collectors/fleet_summary: see fleet_summary.h.
 *
 * fleet.csv is written by the registry, one row per sync it received (docs/traces.md): its
 * bytes_tx counts what reached the registry, so a resent copy of a version already stored
 * (which writes no row) is not in bytes_tx. recover.csv is the orchestrator's verification pass
 * after the run (orchestrator/recover): a rebuild of every stored version, timed. */
#include "collectors/fleet_summary.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectors/csv.h"
#include "collectors/summary.h"
#include "collectors/table.h"
#include "lib/safefile.h"

#define MAX_DEVICES 4096

static bool is_device_csv(const char *dir, const char *name)
{
	size_t len = strlen(name);

	(void)dir;
	return strncmp(name, "device", 6) == 0 && len > 4 && strcmp(name + len - 4, ".csv") == 0;
}

/* The `stop` row of events.csv: the training time. NAN when absent. */
static double stop_time(const char *run_dir, char *err, size_t errlen)
{
	char path[4096];
	struct table *t;
	bool missing = false;
	double stop = NAN;
	int ct, ce;

	snprintf(path, sizeof path, "%s/events.csv", run_dir);
	t = table_load(path, &missing, err, errlen);
	if (!t)
		return NAN;
	ct = table_col(t, "t_s");
	ce = table_col(t, "event");
	for (size_t r = 0; ct >= 0 && ce >= 0 && r < table_rows(t); r++) {
		double v;

		if (strcmp(table_get(t, r, (size_t)ce), "stop") == 0 &&
		    table_double(t, r, (size_t)ct, &v) == 0)
			stop = v;
	}
	table_destroy(&t);
	return stop;
}

static int read_recover(const char *run_dir, struct fleet_summary_row *out, char *err, size_t errlen)
{
	char path[4096];
	struct table *t;
	bool missing = false;
	double sum = 0;
	int cs, co;

	snprintf(path, sizeof path, "%s/recover.csv", run_dir);
	t = table_load(path, &missing, err, errlen);
	if (!t)
		return missing ? 0 : -EINVAL;
	cs = table_col(t, "recover_s");
	co = table_col(t, "verify_ok");
	if (cs < 0 || co < 0) {
		snprintf(err, errlen, "%s: missing recover_s or verify_ok column", path);
		table_destroy(&t);
		return -EINVAL;
	}
	out->has_recover = true;
	out->recover_s_max = 0;
	for (size_t r = 0; r < table_rows(t); r++) {
		double s = table_double_or(t, r, (size_t)cs, 0);

		out->recover_versions++;
		out->recover_failed += table_double_or(t, r, (size_t)co, 0) != 1;
		sum += s;
		if (s > out->recover_s_max)
			out->recover_s_max = s;
	}
	out->recover_s_mean = out->recover_versions ? sum / (double)out->recover_versions : NAN;
	if (!out->recover_versions)
		out->recover_s_max = NAN;
	table_destroy(&t);
	return 0;
}

int fleet_summary_compute(const char *run_dir, struct fleet_summary_row *out, char *err,
			  size_t errlen)
{
	const char **names = NULL;
	char path[4096], **files = NULL;
	struct table *t = NULL;
	bool missing = false;
	size_t nnames = 0, nfiles = 0;
	double lag_sum = 0, t_last = NAN, *vmax = NULL;
	int ct, cd, cv, ctx, cst, cok, clag, rc;

	memset(out, 0, sizeof *out);
	out->duration_s = out->bytes_per_device_hour = out->stored_per_version = NAN;
	out->lag_mean_s = out->lag_max_s = out->recover_s_mean = out->recover_s_max = NAN;
	if ((rc = meta_load_dir(run_dir, &out->meta, err, errlen)) < 0)
		return rc;
	snprintf(path, sizeof path, "%s/fleet.csv", run_dir);
	t = table_load(path, &missing, err, errlen);
	if (!t)
		return missing ? 0 : -EINVAL;
	ct = table_col(t, "t_s");
	cd = table_col(t, "device");
	cv = table_col(t, "version");
	ctx = table_col(t, "bytes_tx");
	cst = table_col(t, "bytes_stored");
	cok = table_col(t, "verify_ok");
	clag = table_col(t, "registry_lag_s");
	if (ct < 0 || cd < 0 || cv < 0 || ctx < 0 || cst < 0 || cok < 0 || clag < 0) {
		snprintf(err, errlen, "%s: not a fleet trace (see docs/traces.md)", path);
		rc = -EINVAL;
		goto out;
	}
	names = calloc(table_rows(t) + 1, sizeof *names);
	vmax = calloc(table_rows(t) + 1, sizeof *vmax);
	if (!names || !vmax) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t r = 0; r < table_rows(t); r++) {
		const char *dev = table_get(t, r, (size_t)cd);
		double ts, lag;
		size_t i;

		for (i = 0; i < nnames; i++)
			if (strcmp(names[i], dev) == 0)
				break;
		if (i == nnames && nnames < MAX_DEVICES)
			names[nnames++] = dev;
		if (i < nnames && table_double_or(t, r, (size_t)cok, 0) == 1 &&
		    table_double_or(t, r, (size_t)cv, 0) > vmax[i])
			vmax[i] = table_double_or(t, r, (size_t)cv, 0);
		if (table_double(t, r, (size_t)ct, &ts) == 0 && (isnan(t_last) || ts > t_last))
			t_last = ts;
		out->bytes_tx += (uint64_t)table_double_or(t, r, (size_t)ctx, 0);
		if (table_double_or(t, r, (size_t)cok, 0) != 1) {
			out->rejected++;
			continue;
		}
		out->versions++;
		out->bytes_stored += (uint64_t)table_double_or(t, r, (size_t)cst, 0);
		lag = table_double_or(t, r, (size_t)clag, 0);
		lag_sum += lag;
		if (isnan(out->lag_max_s) || lag > out->lag_max_s)
			out->lag_max_s = lag;
	}
	out->devices = nnames;
	snprintf(path, sizeof path, "%s/nodes", run_dir);
	if (summary_list_dir(path, is_device_csv, NULL, &files, &nfiles) == 0 && nfiles > out->devices)
		out->devices = nfiles;
	for (size_t i = 0; i < nfiles; i++) {
		char p2[8192];
		struct table *nt;
		double last = 0;
		int cmv;

		snprintf(p2, sizeof p2, "%s/nodes/%s", run_dir, files[i]);
		if (!(nt = table_load(p2, NULL, err, errlen))) {
			rc = -EINVAL;
			goto out;
		}
		cmv = table_col(nt, "model_version");
		for (size_t r = 0; cmv >= 0 && r < table_rows(nt); r++) {
			double v = table_double_or(nt, r, (size_t)cmv, 0);

			if (v > last)
				last = v;
		}
		/* the version made from the last steps at the stop has no trace row: the registry's
		 * latest stored version of the device stands for it */
		for (size_t k = 0; k < nnames; k++)
			if (strlen(files[i]) == strlen(names[k]) + 4 &&
			    !strncmp(files[i], names[k], strlen(names[k])) && vmax[k] > last)
				last = vmax[k];
		out->versions_made += (uint64_t)last;
		table_destroy(&nt);
	}
	out->duration_s = stop_time(run_dir, err, errlen);
	if (isnan(out->duration_s))
		out->duration_s = t_last;
	if (out->devices && out->duration_s > 0)
		out->bytes_per_device_hour = (double)out->bytes_tx /
					     ((double)out->devices * out->duration_s / 3600.0);
	if (out->versions) {
		out->stored_per_version = (double)out->bytes_stored / (double)out->versions;
		out->lag_mean_s = lag_sum / (double)out->versions;
	}
	rc = read_recover(run_dir, out, err, errlen);
	if (rc == 0)
		rc = 1;
out:
	for (size_t i = 0; i < nfiles; i++)
		free(files[i]);
	free(files);
	free(names);
	free(vmax);
	table_destroy(&t);
	return rc;
}

/* ---- fleet_summary.csv ---------------------------------------------------------------- */

static void put_num(struct csv_buf *b, int prec, double v)
{
	char s[64] = "";

	if (!isnan(v))
		snprintf(s, sizeof s, "%.*f", prec, v);
	csv_buf_put(b, s);
}

static void put_u(struct csv_buf *b, uint64_t v)
{
	char s[32];

	snprintf(s, sizeof s, "%llu", (unsigned long long)v);
	csv_buf_put(b, s);
}

static void put_row(struct csv_buf *b, const struct fleet_summary_row *r)
{
	csv_buf_field(b, r->meta.run_id);
	csv_buf_put(b, ",");
	put_u(b, r->devices);
	csv_buf_put(b, ",");
	put_num(b, 3, r->duration_s);
	csv_buf_put(b, ",");
	put_u(b, r->versions_made);
	csv_buf_put(b, ",");
	put_u(b, r->versions);
	csv_buf_put(b, ",");
	put_u(b, r->rejected);
	csv_buf_put(b, ",");
	put_u(b, r->bytes_tx);
	csv_buf_put(b, ",");
	put_num(b, 0, r->bytes_per_device_hour);
	csv_buf_put(b, ",");
	put_u(b, r->bytes_stored);
	csv_buf_put(b, ",");
	put_num(b, 1, r->stored_per_version);
	csv_buf_put(b, ",");
	put_num(b, 3, r->lag_mean_s);
	csv_buf_put(b, ",");
	put_num(b, 3, r->lag_max_s);
	csv_buf_put(b, ",");
	if (r->has_recover) {
		put_u(b, r->recover_versions);
		csv_buf_put(b, ",");
		put_u(b, r->recover_failed);
	} else {
		csv_buf_put(b, ",");
	}
	csv_buf_put(b, ",");
	put_num(b, 6, r->recover_s_mean);
	csv_buf_put(b, ",");
	put_num(b, 6, r->recover_s_max);
	csv_buf_put(b, ",");
	csv_buf_field(b, r->meta.status);
	csv_buf_put(b, "\n");
}

int fleet_summary_rebuild(const char *dir, char *err, size_t errlen)
{
	struct fleet_summary_row *rows = NULL;
	char keys[META_MAX_SWEEP * 4][META_KEY_LEN];
	char **names = NULL, path[4096];
	struct csv_buf b = { 0 };
	size_t nnames = 0, nrows = 0, nkeys = 0;
	bool single;
	int rc;

	rc = summary_list_runs(dir, &names, &nnames, &single);
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
		return rc;
	}
	rows = calloc(nnames + 1, sizeof *rows);
	if (!rows) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < nnames; i++) {
		struct fleet_summary_row *r = &rows[nrows];

		if (single)
			snprintf(path, sizeof path, "%s", dir);
		else
			snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		rc = fleet_summary_compute(path, r, err, errlen);
		if (rc < 0)
			goto out;
		if (rc == 0)
			continue;
		nrows++;
		for (size_t k = 0; k < r->meta.nsweep; k++) {
			size_t j;

			for (j = 0; j < nkeys; j++)
				if (strcmp(keys[j], r->meta.sweep_key[k]) == 0)
					break;
			if (j == nkeys && nkeys < sizeof keys / sizeof keys[0])
				snprintf(keys[nkeys++], META_KEY_LEN, "%s", r->meta.sweep_key[k]);
		}
	}
	rc = 0;
	if (nrows == 0)
		goto out;
	for (size_t k = 0; k < nkeys; k++) {
		csv_buf_field(&b, keys[k]);
		csv_buf_put(&b, ",");
	}
	csv_buf_put(&b, FLEET_SUMMARY_HEADER "\n");
	for (size_t i = 0; i < nrows; i++) {
		for (size_t k = 0; k < nkeys; k++) {
			const char *v = meta_sweep_value(&rows[i].meta, keys[k]);

			csv_buf_field(&b, v ? v : "");
			csv_buf_put(&b, ",");
		}
		put_row(&b, &rows[i]);
	}
	if (b.rc < 0) {
		rc = b.rc;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	snprintf(path, sizeof path, "%s/fleet_summary.csv", dir);
	rc = safefile_replace(path, b.p, b.len, 0644);
	if (rc < 0)
		snprintf(err, errlen, "write %s: %s", path, strerror(-rc));
	else
		rc = (int)nrows;
out:
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	free(rows);
	free(b.p);
	return rc;
}
