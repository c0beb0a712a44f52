/* lib/version: see version.h. */
#include "lib/version.h"

#ifndef STALENET_VERSION
#define STALENET_VERSION "unknown"
#endif
#ifndef STALENET_COMMIT
#define STALENET_COMMIT "unknown"
#endif

const char *version_release(void)
{
	return STALENET_VERSION;
}

const char *version_commit(void)
{
	return STALENET_COMMIT;
}
