/* orchestrator/cli: see cli.h. Every command has --help; a command is listed only when it works. */
#include "orchestrator/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/version.h"
#include "orchestrator/agent.h"
#include "orchestrator/cmd.h"
#include "orchestrator/cpuneed.h"
#include "orchestrator/hosts.h"
#include "orchestrator/slurm.h"
#include "orchestrator/placement.h"
#include "orchestrator/plan.h"
#include "orchestrator/recover.h"
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
	"  plot DIR...         draw the figures of a run or sweep directory, or overlay several\n"
	"  summary DIR         rebuild summary.csv of a run or sweep directory from its traces\n"
	"  agent               a host's end of a run across hosts (started over ssh, not by hand)\n"
	"  recover RUN_DIR ... rebuild and verify a fleet device's model from the registry's store\n"
	"\n"
	"Run 'stalenet COMMAND --help' for a command's options.\n"
	"\n"
	"exit codes: 0 ok, 1 run failed, 2 invalid input, 3 host cannot do it, 130 interrupted\n";

static const char usage_check[] =
	"usage: stalenet check SCENARIO [--set key.path=value]... [--hosts FILE]\n"
	"\n"
	"Parse and validate SCENARIO, then print the plan: every run of the sweep with its seed, the\n"
	"nodes and their effective links per direction, stragglers and the link timeline; then each\n"
	"run's CPU estimate (the model's step measured here, times the workers, plus the nfq\n"
	"emulator's share) against the host's cores, with a warning when it exceeds them. Touches\n"
	"nothing on the host. Errors are printed as FILE:LINE:COL: error: ... and exit with 2.\n"
	"With hosts (the scenario's hosts section or --hosts), also each run's placement: the\n"
	"nodes of every host and the links that cross hosts.\n"
	"\n"
	"  --hosts FILE            the hosts to spread over (replaces the scenario's hosts section)\n"
	"  --set key.path=value    override a scenario value (repeatable), validated as the file;\n"
	"                          a key the sweep also sets is an error: change the sweep with\n"
	"                          --set 'sweep.KEY=[v1, v2]' (after 'sweep.' the rest is one key)\n";

static const char usage_run[] =
	"usage: stalenet run SCENARIO [options]\n"
	"\n"
	"  --out DIR               run (or sweep) directory (default runs/<name>-<UTC time>): a\n"
	"                          new one, or one of earlier attempts of the same runs (resumed:\n"
	"                          complete runs skipped); one holding other runs is refused\n"
	"  --set key.path=value    override a scenario value (repeatable), validated as the file;\n"
	"                          change the sweep with --set 'sweep.KEY=[v1, v2]'\n"
	"  --backend auto|kernel|nfq  link emulation: kernel netem, or the userspace NFQUEUE\n"
	"                          emulator for kernels without sch_netem (default auto)\n"
	"  --strict-links          a link outside the self-check tolerance is fatal\n"
	"  --plot                  draw the figures at the end\n"
	"  --quiet                 no live progress\n"
	"  --hosts FILE            hosts to spread the run over (replaces the scenario's hosts);\n"
	"                          validated, placed, every host checked over ssh (reachable,\n"
	"                          same stalenet, root, clock offset) and the first run's testbed\n"
	"                          built across them and torn down; nodes are not launched yet\n"
	"  --identity FILE         ssh identity for the hosts (default: the user's agent or keys)\n"
	"  --known-hosts FILE      ssh known-hosts file for the hosts (default: the user's)\n"
	"  --agent-path PATH       stalenet on the hosts (default: this program's path)\n"
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
	"directory are skipped; an output directory holding other runs is refused, as by run.\n"
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
	"       stalenet cleanup --hosts FILE [--identity FILE] [--known-hosts FILE] [--agent-path PATH]\n"
	"\n"
	"Find the teardown journals of runs whose stalenet process is dead (checked by pid and\n"
	"start time) and undo what they record: processes, iptables rules, namespaces, sysctls.\n"
	"Never touches anything a journal does not record. With --hosts, do that on every host of\n"
	"the list through its 'stalenet agent' (over ssh; with launcher slurm, a job step started\n"
	"by srun inside an allocation, or ssh to each host's address outside one), for what runs\n"
	"across hosts left there.\n";

static const char usage_doctor[] =
	"usage: stalenet doctor\n"
	"\n"
	"Report what this host can do: root, network namespaces, the kernel's sch_netem, the\n"
	"iptables NFQUEUE target, the data set, BLAS threads, neighbour-table limits.\n";

static const char usage_plot[] =
	"usage: stalenet plot DIR\n"
	"       stalenet plot DIR [DIR...] --out OUT [--label TEXT]...\n"
	"\n"
	"Draw the figures of a run or sweep directory into DIR/plots/ (PNG and SVG).\n"
	"With --out: the runs of every DIR on one figure each (accuracy vs time, CDF of final\n"
	"steps) in OUT/, say an emulated run beside its simulations; the i-th --label names the\n"
	"i-th DIR's lines (default: its mode, emulation or simulation).\n";

static const char usage_summary[] =
	"usage: stalenet summary DIR [--plot]\n"
	"\n"
	"Rebuild DIR/summary.csv from the traces of a run or sweep directory (one row per run\n"
	"directory holding meta.json), replacing it atomically; --plot then draws the figures.\n"
	"Traces of an older schema are read as they are: a missing column leaves the fields that\n"
	"need it empty (each such file is named on stderr). Needs no privileges. Exit 2 when DIR\n"
	"holds no run.\n";

static const char usage_agent[] =
	"usage: stalenet agent\n"
	"\n"
	"Serve the orchestrator of a run across hosts on stdin/stdout (started over ssh, or by\n"
	"srun with launcher slurm, by 'stalenet run' on each host). Speaks a line protocol: a\n"
	"greeting with protocol, version and user, then clock exchanges ('time T1' ->\n"
	"'time T1 T2 T3') until 'quit'.\n";

/* /dev/null, put in place of the agent's stdin by SIGTERM or SIGHUP (dup2 is
 * async-signal-safe) */
static int agent_null_fd = -1;

static void agent_end_input(int sig)
{
	(void)sig;
	if (agent_null_fd >= 0)
		dup2(agent_null_fd, 0);
}

static void agent_ignore(int sig)
{
	(void)sig;
}

static int cmd_agent(int argc, char **argv)
{
	(void)argv;
	if (argc != 1) {
		fputs(usage_agent, stderr);
		return CLI_EXIT_USAGE;
	}
	/* SIGTERM (a Slurm step cancelled: srun gone with the orchestrator, the job ended) or
	 * SIGHUP ends the input as the end of the ssh channel does, so the agent tears its share
	 * down instead of dying with it built; the handler interrupts the agent's poll (no
	 * SA_RESTART) and its next read sees end of file. */
	agent_null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	struct sigaction sa = { .sa_handler = agent_end_input };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* a write to a channel whose other end is gone (srun or sshd closed it) must be an error
	 * that leads to the teardown, not a SIGPIPE that kills the agent with its share built; a
	 * handler rather than SIG_IGN, so the nodes it execs get the default back */
	sa.sa_handler = agent_ignore;
	sigaction(SIGPIPE, &sa, NULL);
	/* the protocol owns stdout; nothing else may write there */
	return agent_serve(0, 1) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILED;
}
static const char usage_recover[] =
	"usage: stalenet recover RUN_DIR DEVICE[@VERSION] [--out FILE]\n"
	"       stalenet recover RUN_DIR --all\n"
	"\n"
	"Rebuild a fleet device's model (topology fleet) at VERSION (default: its latest) from\n"
	"RUN_DIR/fleet.sqlite, replaying the stored frames from the last full snapshot, and\n"
	"verify its BLAKE2b-256 hash. --out writes the model as raw little-endian float32.\n"
	"--all rebuilds and verifies every stored version of every device. One line per version;\n"
	"exit 1 when a version does not verify or does not exist. Opens the store read-only.\n";

static int want_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return 1;
	return 0;
}

/* The CPU each training run asks of the host (orchestrator/cpuneed), the model's step
 * measured once per distinct model and batch. */
static void print_cpu_need(const struct plan *plan)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	const struct scenario *last = NULL;
	double cost = 0;
	size_t nparams = 0;

	for (size_t i = 0; i < plan_n_runs(plan); i++) {
		const struct plan_run *r = plan_run(plan, i);
		const struct scenario *sc = r->scenario;
		struct cpuneed e;

		if (sc->workload != SCENARIO_WORKLOAD_TRAIN)
			continue;
		if (!last || last->model.kind != sc->model.kind || last->model.n_hidden != sc->model.n_hidden ||
		    memcmp(last->model.hidden, sc->model.hidden, sizeof sc->model.hidden) ||
		    last->train.batch != sc->train.batch) {
			if (cpuneed_step_cost(sc, 5, &cost, &nparams) < 0) {
				fprintf(stderr, "stalenet check: the model's step cost could not be measured\n");
				return;
			}
			last = sc;
		}
		cpuneed_estimate(r, cost, nparams, true, cores > 0 ? (int)cores : 1, &e);
		cpuneed_print(stdout, r->id, &e);
	}
}

static int cmd_check(int argc, char **argv)
{
	static const struct option opts[] = { { "set", required_argument, NULL, 's' },
					      { "hosts", required_argument, NULL, 'H' }, { 0 } };
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc = NULL;
	struct plan *plan = NULL;
	struct hosts *file_hosts = NULL;
	const char *hosts_path = NULL;
	const char **sets = calloc((size_t)argc, sizeof *sets);
	size_t n_sets = 0;
	int c, rc = CLI_EXIT_USAGE;

	if (!sets)
		return CLI_EXIT_FAILED;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'H') {
			hosts_path = optarg;
			continue;
		}
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
	if (hosts_path && !(file_hosts = hosts_load(hosts_path, err, sizeof err))) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	struct hosts *hosts = file_hosts ? file_hosts : sc->hosts;
	/* with slurm, the hosts are completed from the allocation; outside one a complete list
	 * (addresses and cores) is still placed, anything else is an error */
	struct slurm_env env = slurm_env_get();
	if (hosts && hosts->launcher == HOSTS_LAUNCHER_SLURM &&
	    (slurm_in_allocation(&env) || !slurm_list_complete(hosts))) {
		if (slurm_resolve(hosts, &env, err, sizeof err)) {
			fprintf(stderr, "%s\n", err);
			goto out;
		}
	}
	/* every run is placed before anything is printed, so a bad map is one error line */
	if (hosts && placement_plan(hosts, plan, NULL, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	rc = plan_print(stdout, plan) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILED;
	if (rc == CLI_EXIT_OK && !hosts)
		print_cpu_need(plan);
	if (rc == CLI_EXIT_OK && hosts) {
		printf("hosts: %zu (%s), %llu cores\n", hosts->n, hosts_launcher_name(hosts->launcher),
		       (unsigned long long)hosts_total_cores(hosts));
		if (placement_plan(hosts, plan, stdout, err, sizeof err)) {
			fprintf(stderr, "%s\n", err);
			rc = CLI_EXIT_FAILED;
		}
	}
out:
	hosts_destroy(&file_hosts);
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
		{ "hosts", required_argument, NULL, 'H' },    { "identity", required_argument, NULL, 'I' },
		{ "known-hosts", required_argument, NULL, 'K' }, { "agent-path", required_argument, NULL, 'A' },
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
		case 'H':
			o.hosts_path = optarg;
			break;
		case 'I':
			o.identity = optarg;
			break;
		case 'K':
			o.known_hosts = optarg;
			break;
		case 'A':
			o.agent_path = optarg;
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
	{ "agent", usage_agent, cmd_agent },
	{ "recover", usage_recover, recover_cmd },
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
		printf("stalenet %s (%s)\n", version_release(), version_commit());
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
