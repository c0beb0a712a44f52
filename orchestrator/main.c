/* stalenet: the orchestrator's command line (orchestrator/cli does the work). */
#include "orchestrator/cli.h"

int main(int argc, char **argv)
{
	return cli_main(argc, argv);
}
