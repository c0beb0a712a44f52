/* orchestrator/cli: the `stalenet` command line: parse, dispatch, help texts, exit codes.
 *
 * Exit codes (documented in README.md and `stalenet --help`):
 *   0 success; 1 the run failed (a node died, an emulator died, a host operation failed);
 *   2 invalid input (usage, scenario, --set); 3 this host cannot do it (not root, no netns,
 *   requested backend missing); 130 interrupted (SIGINT/SIGTERM/SIGHUP), after a full teardown. */
#ifndef STALENET_CLI_H
#define STALENET_CLI_H

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAILED 1
#define CLI_EXIT_USAGE 2
#define CLI_EXIT_HOST 3
#define CLI_EXIT_INTERRUPTED 130

/* Run the command line; returns the process exit code. Writes results to stdout,
 * diagnostics to stderr. */
int cli_main(int argc, char **argv);

#endif
