/* libFuzzer target: Slurm's compressed lists as an allocation's environment hands them over
 * (orchestrator/slurm). Input: a node list (SLURM_JOB_NODELIST), optionally a newline and a CPU
 * list (SLURM_JOB_CPUS_PER_NODE). Must never crash, hang or leak. What expands must be at most
 * max distinct, valid host names; written back as a plain comma list they expand to the same
 * names; each gives an srun argv. A CPU list that expands gives exactly one count in 1..4096 per
 * node, and the same list, counts written one by one, expands to the same counts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/slurm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_NODES 64

static void check_name(const char *s)
{
	size_t n = strnlen(s, HOSTS_NAME_MAX);

	if (!n || n >= HOSTS_NAME_MAX)
		abort();
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || (i && s[i] == '-')))
			abort();
}

static void cpus(const char *list, size_t n)
{
	uint32_t c[FUZZ_MAX_NODES], back[FUZZ_MAX_NODES];
	char text[FUZZ_MAX_NODES * 6 + 1], err[256];
	size_t pos = 0;

	if (n > FUZZ_MAX_NODES || slurm_cpus_expand(list, c, n, err, sizeof err))
		return;
	for (size_t i = 0; i < n; i++) {
		if (c[i] < 1 || c[i] > HOSTS_MAX_CORES)
			abort();
		pos += (size_t)snprintf(text + pos, sizeof text - pos, "%s%u", i ? "," : "", c[i]);
	}
	if (slurm_cpus_expand(text, back, n, err, sizeof err) || memcmp(c, back, n * sizeof *c))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char names[FUZZ_MAX_NODES][HOSTS_NAME_MAX], again[FUZZ_MAX_NODES][HOSTS_NAME_MAX];
	char err[512] = "", *text = malloc(size + 1), *nl, *joined = NULL;
	size_t n = 0, m = 0, pos = 0;
	struct slurm_argv av;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	nl = strchr(text, '\n');
	if (nl)
		*nl++ = 0;
	if (slurm_hostlist_expand(text, names, FUZZ_MAX_NODES, &n, err, sizeof err) == 0) {
		if (!n || n > FUZZ_MAX_NODES)
			abort();
		joined = malloc(n * HOSTS_NAME_MAX + 1);
		if (!joined)
			abort();
		for (size_t i = 0; i < n; i++) {
			check_name(names[i]);
			for (size_t j = 0; j < i; j++)
				if (!strcmp(names[i], names[j]))
					abort();
			pos += (size_t)sprintf(joined + pos, "%s%s", i ? "," : "", names[i]);
			if (slurm_agent_argv(&av, "srun", names[i], "/usr/bin/stalenet") != 0)
				abort();
		}
		if (slurm_hostlist_expand(joined, again, FUZZ_MAX_NODES, &m, err, sizeof err) != 0 || m != n)
			abort();
		for (size_t i = 0; i < n; i++)
			if (strcmp(names[i], again[i]))
				abort();
		if (nl)
			cpus(nl, n);
	} else if (err[0] == 0) {
		abort(); /* a refusal says why */
	}
	if (nl)
		cpus(nl, 1 + size % FUZZ_MAX_NODES);
	/* the raw text as a node name and as the agent's path: refused unless plain */
	(void)slurm_agent_argv(&av, "srun", text, nl ? nl : "/usr/bin/stalenet");
	free(joined);
	free(text);
	return 0;
}
