/* orchestrator/agent: see agent.h. One request at a time, answered before the next is read:
 * the orchestrator waits for each answer, so there is never more than one line in flight and
 * the T2 stamp is taken right after the read that completed the line. */
#include "orchestrator/agent.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/clock.h"

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t w = write(fd, buf, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

/* A decimal int64 that is the whole of s (optional '-'), else -EINVAL. */
static int parse_i64(const char *s, int64_t *out)
{
	char *end;
	if (!*s || (*s != '-' && (*s < '0' || *s > '9')))
		return -EINVAL;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Answer one request line (without its newline). 1 = quit, 0 = go on, <0 = error. */
static int answer(int out_fd, const char *line, int64_t t2)
{
	char buf[AGENT_LINE_MAX];
	int64_t t1;
	if (!strncmp(line, "time ", 5) && !parse_i64(line + 5, &t1)) {
		int n = snprintf(buf, sizeof buf, "time %" PRId64 " %" PRId64 " ", t1, t2);
		int m = snprintf(buf + n, sizeof buf - (size_t)n, "%" PRId64 "\n", clock_now_ns());
		return write_all(out_fd, buf, (size_t)(n + m));
	}
	if (!strcmp(line, "quit")) {
		int rc = write_all(out_fd, "bye\n", 4);
		return rc ? rc : 1;
	}
	write_all(out_fd, "error unknown request\n", 22);
	return -EPROTO;
}

const char *agent_version(void)
{
	return STALENET_VERSION;
}

const char *agent_commit(void)
{
	return STALENET_COMMIT;
}

int agent_serve(int in_fd, int out_fd)
{
	char hello[AGENT_LINE_MAX], host[64] = "?", buf[AGENT_LINE_MAX];
	size_t have = 0;
	int rc;

	if (gethostname(host, sizeof host - 1) < 0)
		snprintf(host, sizeof host, "?");
	for (char *p = host; *p; p++)
		if (*p <= ' ' || *p > '~')
			*p = '?';
	int n = snprintf(hello, sizeof hello, "stalenet-agent %d %s %s %u %s\n", AGENT_PROTO, agent_version(),
			 agent_commit(), (unsigned)geteuid(), host);
	if ((rc = write_all(out_fd, hello, (size_t)n)))
		return rc;
	for (;;) {
		ssize_t r = read(in_fd, buf + have, sizeof buf - have);
		int64_t t2 = clock_now_ns();
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return 0;
		have += (size_t)r;
		char *nl;
		while ((nl = memchr(buf, '\n', have))) {
			*nl = 0;
			rc = answer(out_fd, buf, t2);
			if (rc)
				return rc > 0 ? 0 : rc;
			size_t used = (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, have - used);
			have -= used;
		}
		if (have == sizeof buf) {
			write_all(out_fd, "error line too long\n", 20);
			return -EPROTO;
		}
	}
}
