/* orchestrator/cli: see cli.h. Every command has --help; a command is listed only when it works. */
#include "orchestrator/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "orchestrator/cmd.h"
#include "orchestrator/plan.h"
#include "orchestrator/run.h"
#include "orchestrator/scenario.h"
#include "orchestrator/simulate.h"
#include "sim/sim_profile.h"

static const char usage_main[] =
	"usage: stalenet <command> [options]\n"
	"\n"
	"Distributed-training testbed: real workers in network namespaces, shaped links,\n"
	"BSP/SSP/ASP/PSP barriers, convergence traces.\n"
	"\n"
	"commands:\n"
	"  check SCENARIO      validate a scenario and print the expanded plan (touches nothing)\n"
	"  run SCENARIO        build the testbed, run every planned run, collect traces (root)\n"
	"  simulate SCENARIO   discrete-event simulation of the same runs (no privileges)\n"
	"  calibrate RUN_DIR   fit a simulation profile to an emulated run's traces\n"
	"  cleanup             remove what crashed runs left behind (root)\n"
	"  doctor              what this host can do (root, netns, netem, NFQUEUE, dataset, BLAS)\n"
	"  plot DIR            draw the figures of a run or sweep directory\n"
	"  summary DIR         rebuild summary.csv of a run or sweep directory from its traces\n"
	"\n"
	"Run 'stalenet COMMAND --help' for a command's options.\n"
	"\n"
	"exit codes: 0 ok, 1 run failed, 2 invalid input, 3 host cannot do it, 130 interrupted\n";

static const char usage_check[] =
	"usage: stalenet check SCENARIO [--set key.path=value]...\n"
	"\n"
	"Parse and validate SCENARIO, then print the plan: every run of the sweep with its seed, the\n"
	"nodes and their effective links per direction, stragglers and the link timeline. Touches\n"
	"nothing on the host. Errors are printed as FILE:LINE:COL: error: ... and exit with 2.\n"
	"\n"
	"  --set key.path=value    override a scenario value (repeatable), validated as the file;\n"
	"                          a key the sweep also sets is an error: change the sweep with\n"
	"                          --set 'sweep.KEY=[v1, v2]' (after 'sweep.' the rest is one key)\n";

static const char usage_run[] =
	"usage: stalenet run SCENARIO [options]\n"
	"\n"
	"  --out DIR               run (or sweep) directory (default runs/<name>-<UTC time>)\n"
	"  --set key.path=value    override a scenario value (repeatable), validated as the file;\n"
	"                          change the sweep with --set 'sweep.KEY=[v1, v2]'\n"
	"  --backend auto|kernel|nfq  link emulation: kernel netem, or the userspace NFQUEUE\n"
	"                          emulator for kernels without sch_netem (default auto)\n"
	"  --strict-links          a link outside the self-check tolerance is fatal\n"
	"  --plot                  draw the figures at the end\n"
	"  --quiet                 no live progress\n"
	"\n"
	"Needs root. Leaves the host as it found it, also on Ctrl-C or a node crash; after a\n"
	"kill -9 of stalenet itself, run 'stalenet cleanup'.\n";

static const char usage_simulate[] =
	"usage: stalenet simulate SCENARIO [options]\n"
	"\n"
	"Simulate every planned run of SCENARIO on a virtual clock (docs/simulation.md): the same\n"
	"barrier decisions as the emulated server, links, stragglers and churn as modelled, into the\n"
	"same run directory layout (meta.json says \"mode\": \"simulation\"; t_s is simulated\n"
	"seconds). Settings of the scenario's simulation: section apply. Complete runs in the output\n"
	"directory are skipped.\n"
	"\n"
	"  --out DIR               run (or sweep) directory (default runs/<name>-<UTC time>)\n"
	"  --set key.path=value    override a scenario value (repeatable), validated as the file;\n"
	"                          change the sweep with --set 'sweep.KEY=[v1, v2]'\n"
	"  --plot                  draw the figures at the end\n"
	"  --quiet                 no per-run lines\n";

static const char usage_calibrate[] =
	"usage: stalenet calibrate RUN_DIR [--out FILE]\n"
	"\n"
	"Fit step-time and message-time distributions to the worker traces of an emulated run\n"
	"(RUN_DIR/nodes/*.csv), per worker and pooled, and write them as a profile (default\n"
	"RUN_DIR/profile.conf) that 'stalenet simulate' draws from with simulation.profile: FILE\n"
	"(docs/simulation.md).\n";

static const char usage_cleanup[] =
	"usage: stalenet cleanup [--dry-run] [RUNS_DIR...]\n"
	"\n"
	"Find the teardown journals of runs whose stalenet process is dead (checked by pid and\n"
	"start time) and undo what they record: processes, iptables rules, namespaces, sysctls.\n"
	"Never touches anything a journal does not record.\n";

static const char usage_doctor[] =
	"usage: stalenet doctor\n"
	"\n"
	"Report what this host can do: root, network namespaces, the kernel's sch_netem, the\n"
	"iptables NFQUEUE target, the data set, BLAS threads, neighbour-table limits.\n";

static const char usage_plot[] =
	"usage: stalenet plot DIR\n"
	"\n"
	"Draw the figures of a run or sweep directory into DIR/plots/ (PNG and SVG).\n";

static const char usage_summary[] =
	"usage: stalenet summary DIR [--plot]\n"
	"\n"
	"Rebuild DIR/summary.csv from the traces of a run or sweep directory (one row per run\n"
	"directory holding meta.json), replacing it atomically; --plot then draws the figures.\n"
	"Traces of an older schema are read as they are: a missing column leaves the fields that\n"
	"need it empty (each such file is named on stderr). Needs no privileges. Exit 2 when DIR\n"
	"holds no run.\n";

static int want_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return 1;
	return 0;
}

static int cmd_check(int argc, char **argv)
{
	static const struct option opts[] = { { "set", required_argument, NULL, 's' }, { 0 } };
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc = NULL;
	struct plan *plan = NULL;
	const char **sets = calloc((size_t)argc, sizeof *sets);
	size_t n_sets = 0;
	int c, rc = CLI_EXIT_USAGE;

	if (!sets)
		return CLI_EXIT_FAILED;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 's') {
			fputs(usage_check, stderr);
			goto out;
		}
		sets[n_sets++] = optarg;
	}
	if (optind != argc - 1) {
		fputs(usage_check, stderr);
		goto out;
	}
	sc = scenario_load_with(argv[optind], sets, n_sets, err, sizeof err);
	if (!sc) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	plan = plan_new(sc, err, sizeof err);
	if (!plan) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	rc = plan_print(stdout, plan) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILED;
out:
	plan_destroy(&plan);
	scenario_destroy(&sc);
	free(sets);
	return rc;
}

static int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "set", required_argument, NULL, 's' },      { "out", required_argument, NULL, 'o' },
		{ "backend", required_argument, NULL, 'b' },  { "strict-links", no_argument, NULL, 'S' },
		{ "plot", no_argument, NULL, 'p' },           { "quiet", no_argument, NULL, 'q' },
		{ 0 },
	};
	struct run_opts o = { .backend = RUN_BACKEND_AUTO };
	const char **sets = calloc((size_t)argc, sizeof *sets);
	int c, rc = CLI_EXIT_USAGE;

	if (!sets)
		return CLI_EXIT_FAILED;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			sets[o.n_sets++] = optarg;
			break;
		case 'o':
			o.out_dir = optarg;
			break;
		case 'b':
			if (!strcmp(optarg, "auto"))
				o.backend = RUN_BACKEND_AUTO;
			else if (!strcmp(optarg, "kernel"))
				o.backend = RUN_BACKEND_KERNEL;
			else if (!strcmp(optarg, "nfq"))
				o.backend = RUN_BACKEND_NFQ;
			else {
				fprintf(stderr, "stalenet run: --backend %s: expected auto, kernel or nfq\n", optarg);
				goto out;
			}
			break;
		case 'S':
			o.strict_links = true;
			break;
		case 'p':
			o.plot = true;
			break;
		case 'q':
			o.quiet = true;
			break;
		default:
			fputs(usage_run, stderr);
			goto out;
		}
	}
	if (optind != argc - 1) {
		fputs(usage_run, stderr);
		goto out;
	}
	o.scenario_path = argv[optind];
	o.sets = sets;
	rc = run_main(&o);
out:
	free(sets);
	return rc;
}

static int cmd_simulate(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "set", required_argument, NULL, 's' }, { "out", required_argument, NULL, 'o' },
		{ "plot", no_argument, NULL, 'p' },      { "quiet", no_argument, NULL, 'q' },
		{ 0 },
	};
	struct simulate_opts o = { 0 };
	const char **sets = calloc((size_t)argc, sizeof *sets);
	int c, rc = CLI_EXIT_USAGE;

	if (!sets)
		return CLI_EXIT_FAILED;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			sets[o.n_sets++] = optarg;
			break;
		case 'o':
			o.out_dir = optarg;
			break;
		case 'p':
			o.plot = true;
			break;
		case 'q':
			o.quiet = true;
			break;
		default:
			fputs(usage_simulate, stderr);
			goto out;
		}
	}
	if (optind != argc - 1) {
		fputs(usage_simulate, stderr);
		goto out;
	}
	o.scenario_path = argv[optind];
	o.sets = sets;
	rc = simulate_main(&o);
out:
	free(sets);
	return rc;
}

static int cmd_calibrate(int argc, char **argv)
{
	static const struct option opts[] = { { "out", required_argument, NULL, 'o' }, { 0 } };
	const char *out = NULL;
	char path[4200], err[1024];
	FILE *f;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 'o') {
			fputs(usage_calibrate, stderr);
			return CLI_EXIT_USAGE;
		}
		out = optarg;
	}
	if (optind != argc - 1) {
		fputs(usage_calibrate, stderr);
		return CLI_EXIT_USAGE;
	}
	snprintf(path, sizeof path, "%s/profile.conf", argv[optind]);
	if (!out)
		out = path;
	f = fopen(out, "we");
	if (!f) {
		fprintf(stderr, "stalenet calibrate: %s: %s\n", out, strerror(errno));
		return CLI_EXIT_FAILED;
	}
	rc = sim_profile_fit(argv[optind], f, err, sizeof err);
	if (fclose(f) != 0 && rc >= 0)
		rc = -EIO;
	if (rc < 0) {
		fprintf(stderr, "stalenet calibrate: %s\n", err);
		unlink(out);
		return rc == -ENOENT || rc == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
	}
	fprintf(stderr, "stalenet calibrate: %d workers fitted; profile in %s\n", rc, out);
	return CLI_EXIT_OK;
}

struct command {
	const char *name;
	const char *usage;
	int (*run)(int argc, char **argv);
};

static const struct command commands[] = {
	{ "check", usage_check, cmd_check },
	{ "run", usage_run, cmd_run },
	{ "simulate", usage_simulate, cmd_simulate },
	{ "calibrate", usage_calibrate, cmd_calibrate },
	{ "cleanup", usage_cleanup, cmd_cleanup },
	{ "doctor", usage_doctor, cmd_doctor },
	{ "plot", usage_plot, cmd_plot },
	{ "summary", usage_summary, cmd_summary },
};

int cli_main(int argc, char **argv)
{
	log_init("stalenet", LOG_INFO);
	if (argc < 2) {
		fputs(usage_main, stderr);
		return CLI_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		fputs(usage_main, stdout);
		return CLI_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("stalenet %s (%s)\n", STALENET_VERSION, STALENET_COMMIT);
		return CLI_EXIT_OK;
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
		if (strcmp(argv[1], commands[i].name))
			continue;
		if (want_help(argc - 1, argv + 1)) {
			fputs(commands[i].usage, stdout);
			return CLI_EXIT_OK;
		}
		return commands[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "stalenet: unknown command '%s' (see 'stalenet --help')\n", argv[1]);
	return CLI_EXIT_USAGE;
}
