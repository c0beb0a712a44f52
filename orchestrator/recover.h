/* orchestrator/recover: `stalenet recover RUN_DIR DEVICE[@VERSION] [--out FILE]` and
 * `stalenet recover RUN_DIR --all`: rebuild a fleet device's model at any version from the
 * registry's store (RUN_DIR/fleet.sqlite, node/fleet_store) and verify its hash. The store is
 * opened read-only and read as hostile input. */
#ifndef STALENET_RECOVER_H
#define STALENET_RECOVER_H

#include <stddef.h>

/* The command (argv[0] is "recover"). Prints one line per rebuilt version to stdout:
 * `DEVICE@VERSION ok|FAILED strategy=S chain=N recover_s=T hash=HEX`, and with --all a
 * closing summary line; --all on a sweep directory verifies every run holding a store (a
 * `run NAME` line before each) and ends with a total. Returns CLI_EXIT_OK, CLI_EXIT_FAILED (a
 * version that does not verify,
 * or no such version), or CLI_EXIT_USAGE. --out writes the model as raw little-endian float32. */
int recover_cmd(int argc, char **argv);

/* What a verification pass over every stored version found. */
struct recover_totals {
	size_t versions, verified;  /* rows of the store; of them rebuilt with the right hash */
	double recover_s_mean, recover_s_max; /* wall seconds to rebuild one version (0 when none) */
};

/* The verification pass at the end of a fleet run: rebuild every version of every device in
 * RUN_DIR/fleet.sqlite (read-only, hostile) and write one row per version to RUN_DIR/recover.csv
 * (TRACE_HEADER_RECOVER, replaced atomically; docs/traces.md). Prints nothing. Returns 0 (even
 * when versions fail to verify: see tot), -ENOENT without a store, or -errno with err filled. */
int recover_verify_run(const char *run_dir, struct recover_totals *tot, char *err, size_t errlen);

#endif
