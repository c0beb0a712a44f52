/* stalenet-linkd: the userspace link emulator (NFQUEUE backend), started by `stalenet run`. */
#include <stdio.h>

#include "lib/log.h"

int main(int argc, char **argv)
{
	(void)argv;
	log_init("linkd", LOG_INFO);
	if (argc < 2) {
		fprintf(stderr, "usage: stalenet-linkd RUN_DIR (started by 'stalenet run')\n");
		return 2;
	}
	return 2;
}
