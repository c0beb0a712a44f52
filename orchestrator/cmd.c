/* orchestrator/cmd: see cmd.h. Thin: argument checks and messages around the modules that do
 * the work (cleanup, doctor, collectors/plot, orchestrator/resummary). */
#include "orchestrator/cmd.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "collectors/plot.h"
#include "orchestrator/cleanup.h"
#include "orchestrator/cli.h"
#include "orchestrator/doctor.h"
#include "orchestrator/hosts.h"
#include "orchestrator/slurm.h"
#include "orchestrator/multihost.h"
#include "orchestrator/resummary.h"

/* `stalenet cleanup --hosts FILE ...`: every host's cleanup through its agent. */
static int cleanup_hosts(int argc, char **argv)
{
	struct multihost_opts mo = { 0 };
	const char *path = NULL;
	char err[1024];
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			fprintf(stderr, "stalenet cleanup: %s needs a value\n", argv[i]);
			return CLI_EXIT_USAGE;
		}
		if (!strcmp(argv[i], "--hosts"))
			path = v;
		else if (!strcmp(argv[i], "--identity"))
			mo.identity = v;
		else if (!strcmp(argv[i], "--known-hosts"))
			mo.known_hosts = v;
		else if (!strcmp(argv[i], "--agent-path"))
			mo.agent_path = v;
		else {
			fprintf(stderr, "stalenet cleanup: with --hosts, unknown argument '%s'\n", argv[i]);
			return CLI_EXIT_USAGE;
		}
		i++;
	}
	struct hosts *h = hosts_load(path, err, sizeof err);
	if (!h) {
		fprintf(stderr, "%s\n", err);
		return CLI_EXIT_USAGE;
	}
	if (h->launcher == HOSTS_LAUNCHER_SLURM) {
		/* inside an allocation every host's agent is a job step; outside (the job that left
		 * the leftovers is over), the same hosts over ssh, which needs their addresses */
		struct slurm_env env = slurm_env_get();
		bool listed = h->n > 0;
		for (size_t i = 0; i < h->n; i++)
			listed = listed && h->list[i].addr;
		if (slurm_in_allocation(&env) || !listed) {
			if (slurm_resolve(h, &env, err, sizeof err)) {
				fprintf(stderr, "%s\n", err);
				hosts_destroy(&h);
				return CLI_EXIT_USAGE;
			}
		} else {
			fprintf(stderr, "stalenet cleanup: not inside a Slurm allocation: reaching the hosts over ssh\n");
			h->launcher = HOSTS_LAUNCHER_SSH;
		}
	}
	mo.hosts = h;
	int rc = multihost_cleanup(&mo, stdout, stderr);
	hosts_destroy(&h);
	return rc ? CLI_EXIT_FAILED : CLI_EXIT_OK;
}

int cmd_cleanup(int argc, char **argv)
{
	struct cleanup_report rep = { 0 };
	unsigned flags = 0;
	int rc = 0, npaths = 0;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--hosts"))
			return cleanup_hosts(argc, argv);

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--dry-run"))
			flags |= CLEANUP_DRY_RUN;
		else if (argv[i][0] == '-') {
			fprintf(stderr, "stalenet cleanup: unknown option '%s'\n", argv[i]);
			return CLI_EXIT_USAGE;
		}
	if (geteuid() != 0) {
		fprintf(stderr, "stalenet cleanup: needs root\n");
		return CLI_EXIT_HOST;
	}
	for (int i = 1; i < argc; i++) {
		if (argv[i][0] == '-')
			continue;
		/* The registry is scanned once, with the first path. */
		if (cleanup_run(argv[i], flags | (npaths ? CLEANUP_NO_REGISTRY : 0), &rep) < 0)
			rc = -1;
		npaths++;
	}
	if (!npaths && cleanup_run(NULL, flags, &rep) < 0)
		rc = -1;
	printf("cleanup: %d journal(s) found, %d replayed%s, %d still running, %d already clean, %d failed\n",
	       rep.journals, rep.replayed, flags & CLEANUP_DRY_RUN ? " (dry run: nothing changed)" : "", rep.live,
	       rep.ended, rep.failed);
	return rc < 0 || rep.failed ? CLI_EXIT_FAILED : CLI_EXIT_OK;
}

#define CMD_PLOT_MAX_DIRS 16

/* `stalenet plot DIR... --out OUT [--label TEXT]...`: several directories on one figure. */
static int plot_many(int argc, char **argv)
{
	const char *dirs[CMD_PLOT_MAX_DIRS], *labels[CMD_PLOT_MAX_DIRS] = { NULL };
	const char *out = NULL;
	size_t ndirs = 0, nlabels = 0;
	char err[1024];
	int figs;

	for (int i = 1; i < argc; i++) {
		bool is_out = !strcmp(argv[i], "--out"), is_label = !strcmp(argv[i], "--label");

		if (is_out || is_label) {
			if (i + 1 >= argc) {
				fprintf(stderr, "stalenet plot: %s needs a value\n", argv[i]);
				return CLI_EXIT_USAGE;
			}
			if (is_out) {
				out = argv[++i];
			} else if (nlabels == CMD_PLOT_MAX_DIRS) {
				fprintf(stderr, "stalenet plot: more than %d labels\n", CMD_PLOT_MAX_DIRS);
				return CLI_EXIT_USAGE;
			} else {
				labels[nlabels++] = argv[++i];
			}
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "stalenet plot: unknown option %s\n", argv[i]);
			return CLI_EXIT_USAGE;
		} else if (ndirs == CMD_PLOT_MAX_DIRS) {
			fprintf(stderr, "stalenet plot: more than %d directories\n", CMD_PLOT_MAX_DIRS);
			return CLI_EXIT_USAGE;
		} else {
			dirs[ndirs++] = argv[i];
		}
	}
	if (!ndirs || !out || nlabels > ndirs) {
		fprintf(stderr, "usage: stalenet plot DIR [DIR...] --out OUT [--label TEXT]...\n");
		return CLI_EXIT_USAGE;
	}
	figs = plot_compare(dirs, labels, ndirs, out, err, sizeof err);
	if (figs < 0) {
		fprintf(stderr, "stalenet plot: %s\n", err);
		return figs == -ENOENT || figs == -EINVAL || figs == -E2BIG ? CLI_EXIT_USAGE
									    : CLI_EXIT_FAILED;
	}
	printf("%d figures in %s\n", figs, out);
	return CLI_EXIT_OK;
}

int cmd_plot(int argc, char **argv)
{
	char err[1024];
	int figs;

	if (argc > 2)
		return plot_many(argc, argv);
	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: stalenet plot DIR\n       stalenet plot DIR [DIR...] --out OUT "
				"[--label TEXT]...\n");
		return CLI_EXIT_USAGE;
	}
	figs = plot_dir(argv[1], err, sizeof err);
	if (figs < 0) {
		fprintf(stderr, "stalenet plot: %s\n", err);
		return figs == -ENOENT || figs == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
	}
	printf("%d figures in %s/plots\n", figs, argv[1]);
	return CLI_EXIT_OK;
}

int cmd_doctor(int argc, char **argv)
{
	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: stalenet doctor\n");
		return CLI_EXIT_USAGE;
	}
	return doctor_report(stdout, NULL) ? CLI_EXIT_HOST : CLI_EXIT_OK;
}

int cmd_summary(int argc, char **argv)
{
	struct resummary_report rep;
	const char *dir = NULL;
	bool plot = false;
	char err[1024];
	int rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--plot"))
			plot = true;
		else if (argv[i][0] == '-' || dir) {
			fprintf(stderr, "usage: stalenet summary DIR [--plot]\n");
			return CLI_EXIT_USAGE;
		} else
			dir = argv[i];
	}
	if (!dir) {
		fprintf(stderr, "usage: stalenet summary DIR [--plot]\n");
		return CLI_EXIT_USAGE;
	}
	rc = resummary_dir(dir, &rep, err, sizeof err);
	if (rep.adapted)
		fprintf(stderr, "stalenet summary: traces of an older schema (a missing column leaves the fields "
			"computed from it empty):\n%s\n", rep.notes);
	if (rc < 0) {
		fprintf(stderr, "stalenet summary: %s\n", err);
		return rc == -ENOENT || rc == -ENOTDIR ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
	}
	printf("%d run(s) in %s/summary.csv\n", rep.runs, dir);
	if (plot) {
		int figs = plot_dir(dir, err, sizeof err);

		if (figs < 0) {
			fprintf(stderr, "stalenet plot: %s\n", err);
			return CLI_EXIT_FAILED;
		}
		printf("%d figures in %s/plots\n", figs, dir);
	}
	return CLI_EXIT_OK;
}
