/* Fuzz stalenet-linkd's control lines (netem/linkd_ctl) from raw bytes, NUL-terminated. Whatever
 * parses must format to a line that parses back to the same request (formatted identically);
 * whatever fails must leave an "err " reply. Stats lines must round-trip too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netem/linkd_ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct linkd_ctl_req r, r2;
	struct linkd_counters c;
	char reply[128], line[8192], line2[8192], name[LINKD_CTL_NAME_MAX];
	char *in = malloc(size + 1); /* exact size: ASan sees any over-read */
	int n, n2;

	if (!in)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	reply[0] = '\0';
	if (linkd_ctl_parse(in, &r, reply, sizeof reply) == 0) {
		n = linkd_ctl_format(&r, line, sizeof line);
		if (n < 0 || (size_t)n >= sizeof line)
			abort();
		if (linkd_ctl_parse(line, &r2, reply, sizeof reply) != 0)
			abort();
		n2 = linkd_ctl_format(&r2, line2, sizeof line2);
		if (n2 != n || strcmp(line, line2) != 0 || r2.op != r.op || r2.queue != r.queue ||
		    strcmp(r2.name, r.name) || strcmp(r2.netns, r.netns) || strcmp(r2.ifname, r.ifname))
			abort();
	} else if (strncmp(reply, "err ", 4) != 0) {
		abort();
	}
	if (linkd_ctl_parse_stats_line(in, name, sizeof name, &c) == 0) {
		struct linkd_counters c2;
		char name2[LINKD_CTL_NAME_MAX];

		n = linkd_ctl_stats_line(name, &c, line, sizeof line);
		if (n < 0 || (size_t)n >= sizeof line)
			abort();
		if (linkd_ctl_parse_stats_line(line, name2, sizeof name2, &c2) != 0 || strcmp(name, name2) ||
		    memcmp(&c, &c2, sizeof c) != 0)
			abort();
	}
	free(in);
	return 0;
}
