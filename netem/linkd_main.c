/* stalenet-linkd: the userspace link emulator (NFQUEUE backend), started by `stalenet run`.
 *
 *   stalenet-linkd RUN_DIR            config RUN_DIR/linkd.conf (may be absent), counters
 *                                     RUN_DIR/linkd-counters.csv, control socket in the runtime
 *                                     directory: /run/stalenet/linkd-HASH.sock (HASH of RUN_DIR;
 *                                     logged), not in RUN_DIR, which a user may own
 *   stalenet-linkd [--config FILE] [--ctl SOCKET] [--counters CSV] [--every MS] [--rt-prio N]
 *                  [--precision timer|spin] [--spin-margin-us US] [--defer-reads on|off]
 *                  [--release-window-us US] [--read-window-us US]
 *
 * --rt-prio N: SCHED_FIFO priority of the emulator (default 10; 0 = the normal scheduler).
 * --precision: how held packets are released (netem/linkd.h, linkd_set_precision; default
 * timer); --spin-margin-us: spin's initial margin (default 200).
 * --defer-reads off: read every queue as packets arrive instead of deferring the reads of a queue
 * whose packets are all held (linkd_set_defer_reads; default on).
 * --release-window-us US: timer mode releases held packets due within half of it together
 * (linkd_set_release_window; default 40, 0 = each at its own wake-up, at most 1000).
 * --read-window-us US: a link of 100k packets/s or more whose reads are not deferred by its delay
 * is read at most once per window (linkd_set_read_window; default 40, 0 = off, at most 1000).
 * SIGHUP re-reads the configuration, SIGTERM/SIGINT stop (the kernel drops held packets when the
 * queues are unbound, so the orchestrator removes the iptables rules first). */
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/rtdir.h"
#include "netem/linkd.h"

static void usage(void)
{
	fprintf(stderr, "usage: stalenet-linkd RUN_DIR\n"
			"       stalenet-linkd [--config FILE] [--ctl SOCKET] [--counters CSV] [--every MS]\n"
			"                      [--rt-prio N] [--precision timer|spin] [--spin-margin-us US]\n"
			"                      [--defer-reads on|off] [--release-window-us US]\n"
			"                      [--read-window-us US]\n");
}

int main(int argc, char **argv)
{
	char config[4096] = "", ctl[4096] = "", counters[4096] = "";
	int every_ms = 1000, rt_prio = 10, margin_us = 200, window_us = -1, read_us = -1;
	enum linkd_precision precision = LINKD_PRECISION_TIMER;
	bool defer = true;
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' }, { "ctl", required_argument, NULL, 's' },
		{ "counters", required_argument, NULL, 'o' }, { "every", required_argument, NULL, 'e' },
		{ "rt-prio", required_argument, NULL, 'p' }, { "precision", required_argument, NULL, 'P' },
		{ "spin-margin-us", required_argument, NULL, 'm' }, { "defer-reads", required_argument, NULL, 'D' },
		{ "release-window-us", required_argument, NULL, 'W' }, { "read-window-us", required_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	log_init("linkd", LOG_INFO);
	int c;
	while ((c = getopt_long(argc, argv, "c:s:o:e:p:P:m:D:W:R:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': snprintf(config, sizeof config, "%s", optarg); break;
		case 's': snprintf(ctl, sizeof ctl, "%s", optarg); break;
		case 'o': snprintf(counters, sizeof counters, "%s", optarg); break;
		case 'e': every_ms = atoi(optarg); break;
		case 'p': rt_prio = atoi(optarg); break;
		case 'P':
			if (!strcmp(optarg, "spin")) {
				precision = LINKD_PRECISION_SPIN;
			} else if (strcmp(optarg, "timer") != 0) {
				usage();
				return 2;
			}
			break;
		case 'm': margin_us = atoi(optarg); break;
		case 'D':
			if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0) {
				usage();
				return 2;
			}
			defer = !strcmp(optarg, "on");
			break;
		case 'W':
		case 'R': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (end == optarg || *end || v < 0 || v > 1000) {
				fprintf(stderr, "stalenet-linkd: --%s-window-us: a whole number of microseconds, 0-1000\n",
					c == 'W' ? "release" : "read");
				return 2;
			}
			*(c == 'W' ? &window_us : &read_us) = (int)v;
			break;
		}
		default: usage(); return c == 'h' ? 0 : 2;
		}
	}
	if (optind < argc) {
		const char *run = argv[optind];
		snprintf(config, sizeof config, "%s/linkd.conf", run);
		uint32_t h = 2166136261u; /* FNV-1a */

		for (const char *p = run; *p; p++)
			h = (h ^ (uint8_t)*p) * 16777619u;
		if (rtdir_ensure() < 0)
			return 1;
		snprintf(ctl, sizeof ctl, "%s/linkd-%08x.sock", rtdir_path(), h);
		snprintf(counters, sizeof counters, "%s/linkd-counters.csv", run);
		if (access(config, R_OK) != 0)
			config[0] = '\0';
	}
	if (!config[0] && !ctl[0]) {
		usage();
		return 2;
	}
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct linkd *d = linkd_new(ctl[0] ? ctl : NULL);
	if (!d)
		return 1;
	linkd_set_rt_priority(d, rt_prio);
	linkd_set_precision(d, precision, (int64_t)margin_us * 1000);
	linkd_set_defer_reads(d, defer);
	if (window_us >= 0)
		linkd_set_release_window(d, (int64_t)window_us * 1000);
	if (read_us >= 0)
		linkd_set_read_window(d, (int64_t)read_us * 1000);
	if (precision == LINKD_PRECISION_SPIN)
		log_info("precision spin: release times polled from %d us before", margin_us);
	int rc = linkd_watch_signals(d, config[0] ? config : NULL);
	if (rc == 0 && config[0])
		rc = linkd_load_config(d, config);
	if (rc == 0 && counters[0] && every_ms > 0)
		rc = linkd_counters_every(d, counters, every_ms);
	if (rc == 0) {
		log_info("serving (control %s)", ctl[0] ? ctl : "none");
		rc = linkd_run(d);
	}
	linkd_destroy(&d);
	return rc < 0 ? 1 : 0;
}
