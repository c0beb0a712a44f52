/* hostsim_cli: the test hosts of tests/support/hostsim as a program, for the benchmark script
 * (tests/bench/bench_multihost.sh), which runs `stalenet run --hosts` against them.
 *
 *   hostsim_cli N DIR
 *
 * makes N hosts (h0.., CLOCK_MONOTONIC offsets 0, +1000.25 s, -2.125 s, +7.5 s, then 0), writes
 * DIR/hosts.yaml (every host, `cores` 64, placement auto) and DIR/env (shell assignments:
 * CTL_NS, IDENTITY, KNOWN_HOSTS, the namespace and files to run the orchestrator with), prints
 * "ready" on stdout, and removes everything again when its standard input ends or on SIGTERM
 * or SIGINT. Needs root and openssh-server. Exit 0, 2 on bad arguments, 3 when the hosts could
 * not be made (the reason on stderr). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/hostsim.h"

static volatile sig_atomic_t stop_asked;

static void on_signal(int sig)
{
	(void)sig;
	stop_asked = 1;
}

/* A path or namespace name of safe characters only (it goes into a shell-sourced file). */
static int plain(const char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '/' ||
		      *s == '.' || *s == '_' || *s == '-'))
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	static const int64_t offsets[HOSTSIM_MAX] = { 0, 1000250000000ll, -2125000000ll, 7500000000ll };
	struct hostsim hs;
	char why[512], path[600];
	char *end = NULL;
	long n = argc == 3 ? strtol(argv[1], &end, 10) : 0;

	if (argc != 3 || !end || *end || n < 1 || n > HOSTSIM_MAX || strlen(argv[2]) > 400) {
		fprintf(stderr, "usage: hostsim_cli N DIR   (1 <= N <= %d)\n", HOSTSIM_MAX);
		return 2;
	}
	if (hostsim_start(&hs, "b", (size_t)n, offsets, why, sizeof why)) {
		fprintf(stderr, "hostsim_cli: %s\n", why);
		return 3;
	}
	int rc = 0;
	snprintf(path, sizeof path, "%s/hosts.yaml", argv[2]);
	FILE *f = fopen(path, "we");
	if (f) {
		fprintf(f, "list:\n");
		for (long i = 0; i < n; i++)
			fprintf(f, "  - {name: %s, address: %s, cores: 64}\n", hs.host[i].name, hs.host[i].address);
		fprintf(f, "placement: auto\n");
		rc |= fclose(f);
	} else {
		rc = -1;
	}
	snprintf(path, sizeof path, "%s/env", argv[2]);
	if (!rc && plain(hs.ctl_ns) && plain(hs.identity) && plain(hs.known_hosts) && (f = fopen(path, "we"))) {
		fprintf(f, "CTL_NS=%s\nIDENTITY=%s\nKNOWN_HOSTS=%s\n", hs.ctl_ns, hs.identity, hs.known_hosts);
		rc |= fclose(f);
	} else {
		rc = -1;
	}
	if (rc) {
		fprintf(stderr, "hostsim_cli: cannot write %s/hosts.yaml and env\n", argv[2]);
		hostsim_stop(&hs);
		return 3;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	printf("ready\n");
	fflush(stdout);
	while (!stop_asked) {
		struct pollfd p = { .fd = 0, .events = POLLIN };
		char buf[256];
		int r = poll(&p, 1, 1000);
		if (r < 0 && errno != EINTR)
			break;
		if (r > 0 && read(0, buf, sizeof buf) <= 0)
			break;  /* standard input ended: the caller is done (or gone) */
	}
	hostsim_stop(&hs);
	return 0;
}
