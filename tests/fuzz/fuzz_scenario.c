/* libFuzzer target: any byte string through the scenario parser, and whatever parses through
 * --set, the plan (and the placement of a hosts section) and the YAML re-emit. Must never crash, hang or leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "orchestrator/hosts.h"
#include "orchestrator/placement.h"
#include "orchestrator/plan.h"
#include "orchestrator/scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[SCENARIO_ERR_MAX];
	struct scenario *sc = scenario_parse((const char *)data, size, "fuzz.yaml", err, sizeof err);
	if (!sc)
		return 0;
	scenario_set(sc, "network.default.delay=5ms", err, sizeof err);
	scenario_set(sc, "network.links.0.loss=1%", err, sizeof err);
	/* bound the work per input: big sweeps and node counts are tested elsewhere */
	size_t runs = sc->sweep.repeat;
	for (size_t a = 0; a < sc->sweep.n_axes; a++)
		runs *= sc->sweep.axes[a].n_values;
	if (runs <= 16 && sc->workers <= 256) {
		struct plan *p = plan_new(sc, err, sizeof err);
		if (p) {
			FILE *null = fopen("/dev/null", "w");
			if (null) {
				plan_print(null, p);
				/* a hosts section: every run placed and printed (small runs: the
				 * refinement is quadratic per pass) */
				if (p && sc->hosts && sc->workers <= 64)
					placement_plan(sc->hosts, p, null, err, sizeof err);
				fclose(null);
			}
		}
		plan_destroy(&p);
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	if (mem) {
		scenario_write_yaml(sc, mem);
		fclose(mem);
		/* the re-emitted document must parse again */
		struct scenario *back = scenario_parse(buf, len, "re.yaml", err, sizeof err);
		if (!back && len < SCENARIO_MAX_FILE_BYTES) {
			fprintf(stderr, "re-emitted scenario does not parse: %s\n%.*s\n", err, (int)len, buf);
			abort();
		}
		scenario_destroy(&back);
		free(buf);
	}
	scenario_destroy(&sc);
	return 0;
}
