/* Bounded waits: poll a condition up to a deadline; files and bound ports as conditions. */
#include "tests/support/wait.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

int64_t support_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void support_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

bool support_wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms)
{
	int64_t deadline = support_now_ms() + timeout_ms;
	int pause_ms = 1;

	/* The short first pauses catch what is nearly ready at once; the longer later ones keep
	 * an expensive condition (a /proc scan, a command) from loading a busy machine. */
	for (;;) {
		int64_t left;

		if (cond(arg))
			return true;
		left = deadline - support_now_ms();
		if (left <= 0)
			return false;
		support_sleep_ms(left < pause_ms ? (int)left : pause_ms);
		if (pause_ms < 64)
			pause_ms *= 2;
	}
}

static bool file_exists(void *arg)
{
	struct stat st;

	return stat(arg, &st) == 0;
}

bool support_wait_file(const char *path, int timeout_ms)
{
	return support_wait_until(file_exists, (void *)path, timeout_ms);
}

/* Lines of /proc/net/{udp,tcp}[6]: "sl local_address rem_address st ...", addresses in hex
 * (IPv4 "0100007F:1F90", IPv6 32 hex digits), st 0A = TCP_LISTEN. */
static bool bound_in(const char *table, int type, int port)
{
	FILE *f = fopen(table, "re");
	char line[512], local[64];
	unsigned int p, st;
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof line, f)) {
		char *colon;

		if (sscanf(line, " %*d: %63s %*s %x", local, &st) != 2)
			continue;
		colon = strrchr(local, ':');
		if (!colon || sscanf(colon + 1, "%x", &p) != 1 || (int)p != port)
			continue;
		*colon = '\0';
		if (type == SOCK_STREAM && st != 0x0A)
			continue;
		/* 127.0.0.1, 0.0.0.0, ::, ::1 and ::ffff:127.0.0.1 */
		found = !strcmp(local, "0100007F") || !strcmp(local, "00000000") ||
			!strcmp(local, "00000000000000000000000000000000") ||
			!strcmp(local, "00000000000000000000000001000000") ||
			!strcmp(local, "0000000000000000FFFF00000100007F");
	}
	fclose(f);
	return found;
}

bool support_port_bound(int type, int port)
{
	const char *v4 = type == SOCK_STREAM ? "/proc/net/tcp" : "/proc/net/udp";
	const char *v6 = type == SOCK_STREAM ? "/proc/net/tcp6" : "/proc/net/udp6";

	return bound_in(v4, type, port) || bound_in(v6, type, port);
}

struct port_arg {
	int type, port;
};

static bool port_ready(void *arg)
{
	const struct port_arg *a = arg;

	return support_port_bound(a->type, a->port);
}

bool support_wait_port(int type, int port, int timeout_ms)
{
	struct port_arg a = { type, port };

	return support_wait_until(port_ready, &a, timeout_ms);
}
