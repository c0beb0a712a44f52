/* stalenet-node: one node process of a run, started by `stalenet run` only. */
#include <stdio.h>

#include "lib/log.h"

int main(int argc, char **argv)
{
	(void)argv;
	log_init("node", LOG_INFO);
	if (argc != 2) {
		fprintf(stderr, "usage: stalenet-node NODE_CONFIG (started by 'stalenet run')\n");
		return 2;
	}
	return 2;
}
