/* orchestrator/cmd: the commands that are not the run pipeline: `stalenet cleanup`, `doctor`,
 * `plot` and `summary`. Each takes its own arguments (argv[0] is the command name; --help is
 * handled by orchestrator/cli), prints its result to stdout and its diagnostics to stderr, and
 * returns a CLI exit code (orchestrator/cli.h). */
#ifndef STALENET_CMD_H
#define STALENET_CMD_H

/* `stalenet cleanup [--dry-run] [RUNS_DIR...]`: replay the journals of dead runs (root). */
int cmd_cleanup(int argc, char **argv);

/* `stalenet doctor`: what this host can do; CLI_EXIT_HOST when a check fails. */
int cmd_doctor(int argc, char **argv);

/* `stalenet plot DIR`: the figures of a run or sweep directory into DIR/plots/; `stalenet plot
 * DIR... --out OUT [--label TEXT]...`: several directories over each other (plot_compare). */
int cmd_plot(int argc, char **argv);

/* `stalenet summary DIR [--plot]`: rebuild DIR/summary.csv from the traces of a run or sweep
 * directory (orchestrator/resummary), then draw the figures with --plot. No root needed. */
int cmd_summary(int argc, char **argv);

#endif
