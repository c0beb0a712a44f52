/* orchestrator/rundir: see rundir.h. */
#include "orchestrator/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"

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

	/* The run directory holds the control socket: private to root. */
	rc = rundir_mkdirs(dir, true);
	if (rc < 0) {
		log_error("mkdir %s: %s", dir, strerror(-rc));
		return rc;
	}
	chmod(dir, 0700);
	snprintf(path, sizeof path, "%s/logs", dir);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	snprintf(path, sizeof path, "%s/nodes", dir);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	snprintf(path, sizeof path, "%s/scenario.yaml", dir);
	f = fopen(path, "we");
	if (!f) {
		rc = -errno;
		log_error("open %s: %s", path, strerror(errno));
		return rc;
	}
	rc = scenario_write_yaml(run->scenario, f);
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* Minimal JSON string escaping for names and values we generate. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* The sweep point of a run, from the plan: {"key.path": "value", ...}. */
static void write_sweep(FILE *f, const struct plan_run *run)
{
	fputs("  \"sweep\": {", f);
	for (size_t a = 0; a < run->n_sweep_values; a++) {
		fprintf(f, "%s\n    ", a ? "," : "");
		json_str(f, run->sweep_keys[a]);
		fputs(": ", f);
		json_str(f, run->sweep_values[a]);
	}
	fputs(run->n_sweep_values ? "\n  },\n" : "},\n", f);
}

int rundir_write_meta(const char *dir, const struct plan_run *run, const struct rundir_meta *m)
{
	char path[4096], tmp[4200], stamp[64];
	struct utsname u;
	time_t secs = (time_t)(m->wall_start_ns / 1000000000LL);
	struct tm tm;
	FILE *f;
	int rc = 0;

	snprintf(path, sizeof path, "%s/meta.json", dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	uname(&u);
	gmtime_r(&secs, &tm);
	strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
	fputs("{\n  \"run_id\": ", f);
	json_str(f, run->id);
	fprintf(f, ",\n  \"run_index\": %u,\n  \"repeat\": %u,\n  \"seed\": %llu,\n  \"base_seed\": %llu,\n",
		run->index, run->rep, (unsigned long long)run->seed,
		(unsigned long long)run->scenario->seed);
	fputs("  \"scenario\": ", f);
	json_str(f, run->scenario->name);
	fputs(",\n  \"backend\": ", f);
	json_str(f, m->backend ? m->backend : "");
	fputs(",\n  \"prefix\": ", f);
	json_str(f, m->prefix ? m->prefix : "");
	if (run->scenario->target > 0)
		fprintf(f, ",\n  \"target\": %.6g", run->scenario->target);
	fputs(",\n  \"stalenet_version\": ", f);
	json_str(f, STALENET_VERSION);
	fputs(",\n  \"stalenet_commit\": ", f);
	json_str(f, STALENET_COMMIT);
	fputs(",\n  \"kernel\": ", f);
	json_str(f, u.release);
	fputs(",\n  \"host\": ", f);
	json_str(f, u.nodename);
	fputs(",\n  \"start_utc\": ", f);
	json_str(f, stamp);
	fprintf(f, ",\n  \"wall_start_ns\": %lld,\n  \"monotonic_origin_ns\": %lld,\n", (long long)m->wall_start_ns,
		(long long)m->origin_ns);
	fprintf(f, "  \"nodes\": %zu,\n", run->n_nodes);
	write_sweep(f, run);
	if (m->duration_s >= 0)
		fprintf(f, "  \"duration_s\": %.3f,\n", m->duration_s);
	fputs("  \"status\": ", f);
	json_str(f, m->status ? m->status : "running");
	fputs("\n}\n", f);
	if (fclose(f) != 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	return rc;
}

int rundir_mark_complete(const char *dir)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof path, "%s/complete", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
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
