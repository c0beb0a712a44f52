/* orchestrator/rundir: see rundir.h. */
#include "orchestrator/rundir.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "collectors/meta.h"
#include "collectors/table.h"
#include "lib/log.h"
#include "lib/rfile.h"
#include "lib/safefile.h"
#include "lib/version.h"
#include "orchestrator/scenario.h"

int rundir_mkdirs(const char *path, bool private_last)
{
	char buf[4096];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof buf)
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, private_last ? 0700 : 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

void rundir_default(const char *name, char *out, size_t outlen)
{
	time_t now = time(NULL);
	struct tm tm;
	char stamp[32];

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
	snprintf(out, outlen, "runs/%s-%s", name && *name ? name : "run", stamp);
}

int rundir_prepare(const char *dir, const struct plan_run *run)
{
	char path[4096];
	FILE *f;
	int rc;

	/* A new run directory is private (0700); one that exists may belong to a user, so
	 * nothing root makes in it follows a symlink planted there (lib/safefile). */
	rc = rundir_mkdirs(dir, true);
	if (rc == 0)
		rc = safefile_mkdir(dir, 0700);
	if (rc < 0) {
		log_error("mkdir %s: %s", dir, strerror(-rc));
		return rc;
	}
	const char *subs[] = { "logs", "nodes" };
	for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, subs[i]);
		rc = safefile_mkdir(path, 0755);
		if (rc < 0) {
			log_error("mkdir %s: %s", path, strerror(-rc));
			return rc;
		}
	}
	snprintf(path, sizeof path, "%s/scenario.yaml", dir);
	struct safefile_tmp t;
	f = safefile_replace_begin(&t, path, 0644);
	if (!f) {
		rc = -errno;
		log_error("open %s: %s", path, strerror(errno));
		return rc;
	}
	rc = scenario_write_yaml(run->scenario, f);
	if (rc < 0) {
		safefile_replace_abort(&t);
		return rc;
	}
	return safefile_replace_commit(&t);
}

/* jansson's integers are signed 64-bit; a seed is any unsigned 64-bit value. A seed above
 * INT64_MAX goes into the tree as a placeholder string and its digits replace the quoted
 * placeholder in the dumped text, so the file holds a plain JSON number either way (the
 * reader, collectors/meta, accepts the whole unsigned range). */
#define U64_PLACEHOLDER "\001u64:"

static json_t *u64_value(uint64_t v, unsigned slot)
{
	char ph[32];

	if (v <= (uint64_t)INT64_MAX)
		return json_integer((json_int_t)v);
	snprintf(ph, sizeof ph, U64_PLACEHOLDER "%u", slot);
	return json_string(ph);
}

/* Replace the dumped placeholder of slot by the digits of v in *text (reallocated). The
 * placeholder must occur exactly once (a string forged to look like it is refused). */
static int u64_fill(char **text, unsigned slot, uint64_t v)
{
	char needle[32], digits[24], *hit, *out;
	size_t nlen, dlen, len;

	snprintf(needle, sizeof needle, "\"\\u0001u64:%u\"", slot);
	hit = strstr(*text, needle);
	if (!hit)
		return 0; /* the value fitted in an integer */
	if (strstr(hit + 1, needle))
		return -EINVAL;
	nlen = strlen(needle);
	dlen = (size_t)snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
	len = strlen(*text);
	out = malloc(len - nlen + dlen + 1);
	if (!out)
		return -ENOMEM;
	memcpy(out, *text, (size_t)(hit - *text));
	memcpy(out + (hit - *text), digits, dlen);
	strcpy(out + (hit - *text) + dlen, hit + nlen);
	free(*text);
	*text = out;
	return 0;
}

/* Add key = value to obj (value's reference is stolen; NULL from a failed constructor counts
 * as out of memory). */
static int put(json_t *obj, const char *key, json_t *value)
{
	return value && json_object_set_new(obj, key, value) == 0 ? 0 : -ENOMEM;
}

/* A fraction rounded to 4 decimals, or null when the guard measured nothing. */
static json_t *frac_value(double v)
{
	return isnan(v) ? json_null() : json_real(round(v * 10000) / 10000);
}

/* "host_guard": the host-saturation guard's figures of the run (orchestrator/hostload). */
static json_t *guard_doc(const struct hostload_summary *g)
{
	json_t *o = json_object();
	int rc = 0;

	if (!o)
		return NULL;
	rc |= put(o, "runq_wait_mean", frac_value(g->runq_wait_mean));
	rc |= put(o, "runq_wait_max", frac_value(g->runq_wait_max));
	rc |= put(o, "host_cpu_mean", frac_value(g->host_cpu_mean));
	rc |= put(o, "host_cpu_max", frac_value(g->host_cpu_max));
	rc |= put(o, "saturated", json_boolean(g->saturated));
	rc |= put(o, "samples", json_integer((json_int_t)g->samples));
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* {"n": .., "p50_ms": .., "p99_ms": .., "max_ms": ..} of one timer lateness distribution. */
static json_t *dist_doc(const struct timerlat_dist *d)
{
	json_t *o = json_object();
	int rc = 0;

	if (!o)
		return NULL;
	rc |= put(o, "n", json_integer(d->n));
	rc |= put(o, "p50_ms", json_real((double)d->p50_ns / 1e6));
	rc |= put(o, "p99_ms", json_real((double)d->p99_ns / 1e6));
	rc |= put(o, "max_ms", json_real((double)d->max_ns / 1e6));
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *timers_doc(const struct timerlat_result *r)
{
	json_t *o = json_object();
	int rc = 0;

	if (!o)
		return NULL;
	rc |= put(o, "realtime", json_boolean(r->rt));
	rc |= put(o, "cpus_loaded", json_integer(r->ncpu));
	rc |= put(o, "busy", dist_doc(&r->warm));
	rc |= put(o, "after_idle", dist_doc(&r->idle));
	rc |= put(o, "under_load", dist_doc(&r->load));
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* The meta.json document of run; the keys in the order the file has always had. */
static json_t *meta_doc(const struct plan_run *run, const struct rundir_meta *m)
{
	struct utsname u;
	time_t secs = (time_t)(m->wall_start_ns / 1000000000LL);
	struct tm tm;
	char stamp[64];
	json_t *root = json_object(), *sweep = json_object();
	int rc = 0;

	if (!root || !sweep) {
		json_decref(root);
		json_decref(sweep);
		return NULL;
	}
	uname(&u);
	gmtime_r(&secs, &tm);
	strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
	rc |= put(root, "run_id", json_string(run->id));
	rc |= put(root, "run_index", json_integer(run->index));
	rc |= put(root, "repeat", json_integer(run->rep));
	rc |= put(root, "seed", u64_value(run->seed, 0));
	rc |= put(root, "base_seed", u64_value(run->scenario->seed, 1));
	rc |= put(root, "scenario", json_string(run->scenario->name));
	rc |= put(root, "backend", json_string(m->backend ? m->backend : ""));
	rc |= put(root, "prefix", json_string(m->prefix ? m->prefix : ""));
	if (run->scenario->target > 0)
		rc |= put(root, "target", json_real(run->scenario->target));
	rc |= put(root, "stalenet_version", json_string(version_release()));
	rc |= put(root, "stalenet_commit", json_string(version_commit()));
	rc |= put(root, "kernel", json_string(u.release));
	rc |= put(root, "host", json_string(u.nodename));
	rc |= put(root, "start_utc", json_string(stamp));
	rc |= put(root, "wall_start_ns", json_integer(m->wall_start_ns));
	rc |= put(root, "monotonic_origin_ns", json_integer(m->origin_ns));
	rc |= put(root, "nodes", json_integer((json_int_t)run->n_nodes));
	if (m->precision)
		rc |= put(root, "precision", json_string(m->precision));
	if (m->host_timers)
		rc |= put(root, "host_timers", timers_doc(m->host_timers));
	/* The sweep point, from the plan: {"key.path": "value as written", ...}. */
	for (size_t a = 0; a < run->n_sweep_values; a++)
		rc |= put(sweep, run->sweep_keys[a], json_string(run->sweep_values[a]));
	rc |= put(root, "sweep", sweep);
	if (m->duration_s >= 0)
		rc |= put(root, "duration_s", json_real(round(m->duration_s * 1000) / 1000));
	if (m->guard)
		rc |= put(root, "host_guard", guard_doc(m->guard));
	rc |= put(root, "status", json_string(m->status ? m->status : "running"));
	if (m->hosts) {
		json_t *hs = json_array();
		for (size_t h = 0; hs && h < m->n_hosts; h++) {
			json_t *o = json_object();
			rc |= o ? 0 : -ENOMEM;
			if (!o)
				break;
			rc |= put(o, "name", json_string(m->hosts[h].name));
			rc |= put(o, "clock_offset_ns", json_integer(m->hosts[h].offset_ns));
			rc |= put(o, "clock_bound_ns", json_integer(m->hosts[h].bound_ns));
			rc |= put(o, "clock_drift_ppm", json_real(m->hosts[h].drift_ppm));
			rc |= json_array_append_new(hs, o) ? -ENOMEM : 0;
		}
		rc |= put(root, "hosts", hs);
	}
	if (m->mode)
		rc |= put(root, "mode", json_string(m->mode));
	if (rc) {
		json_decref(root);
		return NULL;
	}
	return root;
}

int rundir_write_meta(const char *dir, const struct plan_run *run, const struct rundir_meta *m)
{
	char path[4096];
	struct safefile_tmp t;
	json_t *doc = NULL;
	char *text = NULL;
	FILE *f;
	int rc = 0;

	/* Strings that are not UTF-8 (a host name, a run id) make jansson refuse them: -EINVAL. */
	doc = meta_doc(run, m);
	if (!doc)
		return -EINVAL;
	text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
	json_decref(doc);
	if (!text)
		return -ENOMEM;
	rc = u64_fill(&text, 0, run->seed);
	if (rc == 0)
		rc = u64_fill(&text, 1, run->scenario->seed);
	if (rc < 0)
		goto out;
	snprintf(path, sizeof path, "%s/meta.json", dir);
	f = safefile_replace_begin(&t, path, 0644);
	if (!f) {
		rc = -errno;
		goto out;
	}
	fputs(text, f);
	fputc('\n', f);
	rc = safefile_replace_commit(&t);
out:
	free(text);
	return rc;
}

int rundir_mark_complete(const char *dir)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof path, "%s/complete", dir);
	fd = safefile_open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return fd;
	fsync(fd);
	close(fd);
	return 0;
}

bool rundir_is_complete(const char *dir)
{
	char path[4096];

	snprintf(path, sizeof path, "%s/complete", dir);
	return access(path, F_OK) == 0;
}

int rundir_set_aside(const char *out, const char *dir, const char *id, char *aside, size_t len)
{
	char old[4096], meta[4096];
	struct stat st;
	long now = (long)time(NULL);
	int n;

	if (!strcmp(dir, out)) {
		snprintf(meta, sizeof meta, "%s/meta.json", dir);
		return access(meta, F_OK) == 0 ? -EEXIST : 0;
	}
	if (lstat(dir, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	n = snprintf(old, sizeof old, "%s/.incomplete", out);
	if (n < 0 || n >= (int)sizeof old)
		return -ENAMETOOLONG;
	if (mkdir(old, 0755) < 0 && errno != EEXIST) {
		int e = errno;

		log_error("mkdir %s: %s", old, strerror(e));
		return -e;
	}
	/* a symlink planted there would move the attempt elsewhere: only a real directory */
	if (lstat(old, &st) < 0 || !S_ISDIR(st.st_mode)) {
		log_error("%s is not a directory", old);
		return -ENOTDIR;
	}
	for (int k = 1; k <= 100; k++) {
		n = k == 1 ? snprintf(old, sizeof old, "%s/.incomplete/%s-%ld", out, id, now)
			   : snprintf(old, sizeof old, "%s/.incomplete/%s-%ld-%d", out, id, now, k);
		if (n < 0 || n >= (int)sizeof old)
			return -ENAMETOOLONG;
		if (lstat(old, &st) == 0)
			continue;
		if (rename(dir, old) < 0) {
			int e = errno;

			log_error("run %s: cannot move the earlier attempt aside to %s: %s", id, old, strerror(e));
			return -e;
		}
		if (aside)
			snprintf(aside, len, "%s", old);
		return 1;
	}
	log_error("run %s: too many earlier attempts kept in %s/.incomplete", id, out);
	return -EEXIST;
}

/* --- an existing --out ------------------------------------------------------------------------- */

/* dir holds a run's files (an attempt, complete or not): meta.json, scenario.yaml or complete. */
static bool holds_run(const char *dir)
{
	static const char *const files[] = { "meta.json", "scenario.yaml", "complete" };
	char path[4096];
	struct stat st;

	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		if (snprintf(path, sizeof path, "%s/%s", dir, files[i]) >= (int)sizeof path)
			return true;    /* cannot even name it: not ours to take */
		if (lstat(path, &st) == 0)
			return true;
	}
	return false;
}

/* The attempt in dir is of run: its scenario.yaml is what rundir_prepare writes for run, its
 * meta.json (when written) of the same mode. Returns 0, or -EEXIST with err saying how not. */
static int same_run(const char *dir, const struct plan_run *run, const char *mode, char *err, size_t errlen)
{
	char path[4096], why[512];
	char *have = NULL, *want = NULL;
	size_t have_len = 0, want_len = 0;
	struct run_meta meta;
	FILE *f = NULL;
	int rc;

	snprintf(path, sizeof path, "%s/scenario.yaml", dir);
	rc = rfile_read(path, META_SCENARIO_MAX_BYTES, &have, &have_len, why, sizeof why);
	if (rc == -ENOENT) {
		rc = 0;         /* an attempt that ended before it wrote one */
	} else if (rc < 0) {
		snprintf(err, errlen, "%s", why);
		goto out;
	} else {
		f = open_memstream(&want, &want_len);
		if (!f || scenario_write_yaml(run->scenario, f) < 0 || fflush(f) != 0) {
			rc = -ENOMEM;
			snprintf(err, errlen, "%s: cannot compare with this run's scenario", path);
			goto out;
		}
		if (have_len != want_len || memcmp(have, want, have_len) != 0) {
			rc = -EEXIST;
			snprintf(err, errlen, "%s holds run %s of another scenario (its scenario.yaml differs "
				 "from this run's)", dir, run->id);
			goto out;
		}
	}
	snprintf(path, sizeof path, "%s/meta.json", dir);
	if (access(path, F_OK) == 0) {
		rc = meta_load_dir(dir, &meta, why, sizeof why);
		if (rc < 0) {
			snprintf(err, errlen, "%s", why);
			goto out;
		}
		if (strcmp(meta.mode, mode ? mode : "") != 0) {
			rc = -EEXIST;
			snprintf(err, errlen, "%s holds %s attempt of run %s, not %s one", dir,
				 !*meta.mode ? "an emulated" : !strcmp(meta.mode, "simulation") ? "a simulated"
								  : "another mode's",
				 run->id, mode ? "a simulated" : "an emulated");
			goto out;
		}
	}
out:
	if (f)
		fclose(f);
	free(want);
	free(have);
	return rc;
}

/* The plan's run named id, or NULL. */
static const struct plan_run *run_named(const struct plan *plan, const char *id)
{
	for (size_t i = 0; i < plan_n_runs(plan); i++)
		if (strcmp(plan_run(plan, i)->id, id) == 0)
			return plan_run(plan, i);
	return NULL;
}

int rundir_check_out(const char *out, const struct plan *plan, bool single, const char *mode, char *err,
		     size_t errlen)
{
	char path[4096], why[512];
	struct table *t = NULL;
	struct dirent *de;
	bool missing = false;
	DIR *d = NULL;
	int rc = 0;

	if (single && holds_run(out)) {
		rc = same_run(out, plan_run(plan, 0), mode, err, errlen);
		if (rc < 0)
			goto out;
	} else if (!single && holds_run(out)) {
		rc = -EEXIST;
		snprintf(err, errlen, "%s holds a single run, not a sweep's runs", out);
		goto out;
	}
	d = opendir(out);
	if (!d) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", out, strerror(errno));
		goto out;
	}
	while ((de = readdir(d))) {
		const struct plan_run *run;
		struct stat st;

		/* hidden entries (.incomplete/: earlier attempts kept aside) are no runs */
		if (de->d_name[0] == '.')
			continue;
		if (snprintf(path, sizeof path, "%s/%s", out, de->d_name) >= (int)sizeof path ||
		    lstat(path, &st) < 0 || !S_ISDIR(st.st_mode) || !holds_run(path))
			continue;
		run = single ? NULL : run_named(plan, de->d_name);
		if (!run) {
			rc = -EEXIST;
			snprintf(err, errlen, "%s holds run %s, %s", out, de->d_name,
				 single ? "a sweep's run, not this single run" : "which is not one of this sweep's runs");
			goto out;
		}
		rc = same_run(path, run, mode, err, errlen);
		if (rc < 0)
			goto out;
	}
	/* A summary row of another run would be averaged and plotted with these. */
	snprintf(path, sizeof path, "%s/summary.csv", out);
	t = table_load(path, &missing, why, sizeof why);
	if (!t && !missing) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s", why);
		goto out;
	}
	for (size_t r = 0; t && r < table_rows(t); r++) {
		int c = table_col(t, "run_id");
		const char *id = c >= 0 ? table_get(t, r, (size_t)c) : "";

		if (single ? strcmp(id, plan_run(plan, 0)->id) != 0 : !run_named(plan, id)) {
			rc = -EEXIST;
			snprintf(err, errlen, "%s has a row of run '%.*s', which is not one of these runs", path,
				 PLAN_RUN_ID_MAX, id);
			goto out;
		}
	}
out:
	table_destroy(&t);
	if (d)
		closedir(d);
	return rc;
}
