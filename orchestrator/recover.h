/* orchestrator/recover: `stalenet recover RUN_DIR DEVICE[@VERSION] [--out FILE]` and
 * `stalenet recover RUN_DIR --all`: rebuild a fleet device's model at any version from the
 * registry's store (RUN_DIR/fleet.sqlite, node/fleet_store) and verify its hash. The store is
 * opened read-only and read as hostile input. */
#ifndef STALENET_RECOVER_H
#define STALENET_RECOVER_H

/* The command (argv[0] is "recover"). Prints one line per rebuilt version to stdout:
 * `DEVICE@VERSION ok|FAILED strategy=S chain=N recover_s=T hash=HEX`, and with --all a
 * closing summary line. Returns CLI_EXIT_OK, CLI_EXIT_FAILED (a version that does not verify,
 * or no such version), or CLI_EXIT_USAGE. --out writes the model as raw little-endian float32. */
int recover_cmd(int argc, char **argv);

#endif
