/* Test helper: simulate a scenario given as YAML text (sim/sim) into a run directory. */
#ifndef STALENET_TESTS_SUPPORT_SIMRUN_H
#define STALENET_TESTS_SUPPORT_SIMRUN_H

#include "sim/sim.h"

/* Parse text (as "c.yaml"), plan it and simulate its first run into dir (dir/nodes made), with a
 * step cost of 1 ms and a server cost of 20 us. Asserts every step. */
void support_simulate_text(const char *text, const char *dir, struct sim_result *res);

#endif
