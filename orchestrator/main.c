/* stalenet: the orchestrator's command line. Only dispatch lives here. */
#include <stdio.h>
#include <string.h>

#include "lib/log.h"

int main(int argc, char **argv)
{
	log_init("stalenet", LOG_INFO);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		printf("usage: stalenet <command> [options]\n");
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("stalenet %s (%s)\n", STALENET_VERSION, STALENET_COMMIT);
		return 0;
	}
	fprintf(stderr, "stalenet: unknown command '%s'\n", argv[1]);
	return 2;
}
