/* libFuzzer target: a --hosts file (orchestrator/hosts through hosts_parse: YAML, the section
 * itself or under a `hosts` key). Must never crash, hang or leak. A list that loads holds at
 * most HOSTS_MAX hosts with distinct names of the host alphabet, an address that reads back as
 * the stored number (or none yet, under slurm), cores within bounds, an ssh destination that
 * cannot be an option or shell syntax, and placement entries that name listed hosts. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "orchestrator/hosts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int plain(const char *s, const char *extra)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || strchr(extra, *s)))
			return 0;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int quiet = -1;
	char err[1024];
	struct hosts *h;
	uint64_t cores = 0;

	if (quiet < 0) { /* the parser may log; keep the run quiet */
		quiet = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (quiet >= 0)
			log_set_fd(quiet);
	}
	err[0] = 0;
	h = hosts_parse((const char *)data, size, "fuzz.hosts", err, sizeof err);
	if (!h) {
		if (strncmp(err, "fuzz.hosts:", 11))
			abort(); /* every refusal is FILE:LINE:COL: message */
		return 0;
	}
	if (h->n > HOSTS_MAX || (h->n && !h->list) || !hosts_launcher_name(h->launcher))
		abort();
	for (size_t i = 0; i < h->n; i++) {
		const struct hosts_host *x = &h->list[i];
		struct in_addr a;

		if (!x->name[0] || !plain(x->name, "-") || x->name[0] == '-' || hosts_find(h, x->name) != (int)i)
			abort();
		if (x->addr || h->launcher == HOSTS_LAUNCHER_SSH) {
			if (inet_pton(AF_INET, x->address, &a) != 1 || ntohl(a.s_addr) != x->addr)
				abort();
		}
		if (x->cores > HOSTS_MAX_CORES || (!x->cores && h->launcher == HOSTS_LAUNCHER_SSH))
			abort();
		if (h->launcher == HOSTS_LAUNCHER_SSH && (!x->ssh[0] || x->ssh[0] == '-' || !plain(x->ssh, "@._-ABCDEFGHIJKLMNOPQRSTUVWXYZ")))
			abort();
		cores += x->cores;
	}
	if (hosts_total_cores(h) != cores)
		abort();
	for (size_t i = 0; i < h->n_map; i++)
		if (!h->map || h->map[i].host >= h->n || !h->map[i].nodes)
			abort();
	hosts_destroy(&h);
	if (h)
		abort();
	return 0;
}
